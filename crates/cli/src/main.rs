//! `mcpx`: an MCP gateway. This binary parses arguments and wires the crates together;
//! the behaviour lives in `mcpx-gateway` (the core) and `mcpx-server` (the front ends).

mod daemon;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "mcpx", version, about = "An MCP gateway: one endpoint for many MCP servers, each instance chosen by who is asking.")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon in the foreground: Streamable HTTP at http://HOST:PORT/mcp (both
    /// protocol eras), owning every upstream server instance. Stops on SIGINT/SIGTERM,
    /// stopping every upstream it started.
    Daemon(daemon::Args),
    /// Work with the config file.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check the config file and name the file, line and reason of the first problem.
    Check {
        /// Config file. Default: $MCPX_CONFIG, else .mcpx.json in this directory or a
        /// parent, else $XDG_CONFIG_HOME/mcpx/config.json.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Daemon(args) => daemon::run(args),
        Command::Config(ConfigCommand::Check { config }) => check_config(config),
    }
}

fn check_config(flag: Option<PathBuf>) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_default();
    let Some(path) = mcpx_gateway::settings::find_config(flag, &cwd) else {
        eprintln!("mcpx: no config file found; the daemon would run with no servers (see examples/mcpx.json)");
        return ExitCode::SUCCESS;
    };
    match mcpx_gateway::Config::load(&path) {
        Ok(config) => {
            println!("{}: ok, {} server(s)", path.display(), config.mcp_servers.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcpx: {e}");
            ExitCode::FAILURE
        }
    }
}
