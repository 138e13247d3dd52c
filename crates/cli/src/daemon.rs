//! `mcpx daemon`: its flags. What the daemon does from start to stop, and in which order
//! it stops, is `mcpx_server::daemon`'s.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::terminal::say_err;
use mcpx_server::daemon::{self, Options};

#[derive(clap::Args)]
pub struct Args {
    /// Config file. Default: $MCPX_CONFIG (absolute), else $XDG_CONFIG_HOME/mcpx/config.json; with
    /// none, mcpx runs with no servers. A project's .mcpx.json is never read on its own.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// TCP port on the loopback interface (default: http.port from the config, else 7750;
    /// 0 takes an ephemeral port). The address is printed and written to daemon.json in
    /// the state dir.
    #[arg(long)]
    pub port: Option<u16>,
    /// Exit after this long with no requests and no `mcpx serve` attached (e.g. "10m").
    /// Used when a client starts the daemon on demand; a daemon started by hand runs
    /// until stopped.
    #[arg(long, value_parser = parse_duration)]
    pub idle_exit: Option<Duration>,
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    mcpx_gateway::config::parse_duration(text)
}

pub fn run(args: Args) -> ExitCode {
    crate::init_logging();
    let options = Options { config: args.config, port: args.port, idle_exit: args.idle_exit };
    match daemon::run(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say_err!("mcpx: {:#}", anyhow::Error::new(e));
            ExitCode::FAILURE
        }
    }
}
