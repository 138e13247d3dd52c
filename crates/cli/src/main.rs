//! `mcpx`: an MCP gateway. This binary parses arguments and wires the crates together;
//! the behaviour lives in `mcpx-gateway` (the core) and `mcpx-server` (the front ends).

mod auth;
mod client;
mod commands;
mod daemon;
mod exec;
mod hosts;
mod journal;
mod moving;
mod serve;
mod service;
mod stdio;
mod tasks;
mod terminal;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::terminal::{say, say_err};
use clap::{CommandFactory, Parser, Subcommand};
use commands::Common;

#[derive(Parser)]
#[command(
    name = "mcpx",
    version,
    about = "An MCP gateway: one endpoint for many MCP servers, each instance chosen by who is asking.",
    after_help = "Exit codes: 0 ok; 1 failure, or a tool result with isError; 2 usage; 75 waiting for an answer (mcpx ask); 124 timeout.\nThe daemon's state dir is $MCPX_STATE_DIR, else $XDG_RUNTIME_DIR/mcpx, else $XDG_STATE_HOME/mcpx."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the daemon in the foreground: Streamable HTTP at http://HOST:PORT/mcp (both
    /// protocol eras) and the unix socket in the state dir, owning every upstream server
    /// instance. Stops on SIGINT/SIGTERM or `mcpx stop`, stopping every upstream it started.
    Daemon(daemon::Args),
    /// Speak MCP over stdio (what an agent host launches), relaying to the shared daemon,
    /// which is started if none runs.
    Serve(serve::Args),
    /// Show the daemon, its servers and their live instances.
    Status {
        #[command(flatten)]
        common: Common,
    },
    /// Stop the daemon; returns once it and every upstream it started are gone.
    Stop {
        #[command(flatten)]
        common: Common,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
    },
    /// List upstream tools, of every server or of one.
    Ls {
        server: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Call an upstream tool: `mcpx call time.get_current_time '{"timezone":"UTC"}'`.
    Call {
        /// <server>.<tool>
        target: String,
        /// The tool's arguments as a JSON object.
        arguments: Option<String>,
        /// Give up after this many seconds (exit code 124).
        #[arg(long, conflicts_with = "task")]
        timeout: Option<u64>,
        /// Run the call as a task: print its id and exit 0 at once; follow it with
        /// `mcpx task` (in the same --session).
        #[arg(long)]
        task: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Tool calls run as tasks (`mcpx call --task`) of this session: list, show, wait
    /// for, cancel.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Find upstream tools whose server, name or description contain every word.
    Search {
        query: Vec<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Run a script that calls tools, as the mcpx_exec tool does: the body of an async
    /// function, e.g. `mcpx exec 'return await tools.time.get_current_time({timezone: "UTC"})'`.
    /// Exit 124 when it runs past its time limit. Artifacts it keeps belong to the session:
    /// name one (--session or $MCPX_SESSION_ID) to find them again with `mcpx artifact`.
    Exec {
        /// The script; `-` reads it from stdin.
        script: Option<String>,
        /// Read the script from this file.
        #[arg(short = 'f', long = "file")]
        file: Option<PathBuf>,
        /// Stop the script after this many milliseconds (capped by the daemon's exec.timeout).
        #[arg(long)]
        timeout_ms: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// What this session's scripts kept with artifact() (name the session with --session or
    /// $MCPX_SESSION_ID, as the script's `mcpx exec` did).
    #[command(subcommand)]
    Artifact(ArtifactCommand),
    /// Questions an upstream asked during an `mcpx call`, waiting for this session's answer.
    #[command(subcommand)]
    Ask(AskCommand),
    /// Work with the config file.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Log in to HTTP servers that ask for OAuth, list their logins, log out.
    #[command(subcommand)]
    Auth(AuthCommand),
    /// The calls the daemon journaled (tool calls, a script's tool calls, resource reads,
    /// prompts, completions; not listings), newest last. A token holder sees only its own
    /// calls; the local user and the clients named in `http.admins` see everyone's.
    Log {
        #[command(flatten)]
        args: journal::LogArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Calls, errors, error rate and p50/p95/p99 duration from the journal, per server, tool,
    /// client or session. A token holder counts only its own calls; the local user and the
    /// clients named in `http.admins` count everyone's.
    Stats {
        #[command(flatten)]
        args: journal::StatsArgs,
        #[command(flatten)]
        common: Common,
    },
    /// Merge the MCP server lists of the agent hosts found (Claude Code, Claude Desktop,
    /// Cursor, VS Code, Gemini CLI, Qwen Code, Codex, opencode) into mcpx's config. A
    /// same-name server that differs is reported, not overwritten (exit 1); the config is
    /// backed up before it is written.
    Import(moving::ImportArgs),
    /// Point a host at mcpx: its servers are imported, then its list is replaced by one
    /// `mcpx serve` entry named mcpx (the rest of its file byte for byte, a backup kept).
    /// $MCPX_STATE_DIR, when set, is passed on to that entry.
    Install(moving::InstallArgs),
    /// Undo `mcpx install`: the host's own server list comes back.
    Uninstall(moving::UninstallArgs),
    /// Run the daemon as a systemd user service (where systemd runs).
    #[command(subcommand)]
    Service(service::ServiceCommand),
    /// Print a shell completion script: `mcpx completions bash > ~/.local/share/bash-completion/completions/mcpx`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `mcpx man > ~/.local/share/man/man1/mcpx.1`.
    Man,
}

#[derive(Subcommand)]
enum AuthCommand {
    /// Log in to a server (OAuth), waiting until the login is done.
    ///
    /// Prints the URL to open, and opens it in a browser when there is a desktop ($DISPLAY or
    /// $WAYLAND_DISPLAY set; $BROWSER, else xdg-open). Exits 0 when logged in, 1 when the
    /// login failed, 124 when it was not completed within the daemon's oauth.loginTimeout. A
    /// server's shared credential can only be logged in by the daemon's owner (this user,
    /// over the unix socket).
    Login {
        /// The server's name in mcpServers.
        server: String,
        /// Print the URL only; do not open a browser.
        #[arg(long)]
        no_open: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Each HTTP server's login: logged in, needs login, or not required.
    ///
    /// "Not required" means mcpx has not seen the server ask; a logged-in server shows its
    /// token's expiry, scopes and issuer. Never shows a token.
    Ls {
        #[command(flatten)]
        common: Common,
    },
    /// Forget a server's tokens, revoking them first when its authorization server offers
    /// revocation.
    Logout {
        /// The server's name in mcpServers.
        server: String,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Subcommand)]
enum TaskCommand {
    /// The session's tasks: id, status, last update.
    Ls {
        #[command(flatten)]
        common: Common,
    },
    /// Where a task stands; once it ended, its result (exits like `mcpx call`).
    Get {
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Wait for a task to end and print its result (exits like `mcpx call`; 124 past
    /// --timeout).
    Wait {
        id: String,
        /// Give up after this many seconds.
        #[arg(long)]
        timeout: Option<u64>,
        #[command(flatten)]
        common: Common,
    },
    /// Cancel a task.
    Cancel {
        id: String,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Subcommand)]
enum AskCommand {
    /// The questions waiting for this session.
    Ls {
        #[command(flatten)]
        common: Common,
    },
    /// Show one waiting question.
    Show {
        id: String,
        #[command(flatten)]
        common: Common,
    },
    /// Answer a question and carry its call on: `mcpx ask answer <id> '{"key": answer}'`
    /// (with one question, the bare answer will do). Exits like `mcpx call`.
    Answer {
        id: String,
        answer: String,
        #[command(flatten)]
        common: Common,
    },
    /// Decline a form question (others are abandoned).
    Decline {
        id: String,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Subcommand)]
enum ArtifactCommand {
    /// List this session's artifacts.
    Ls {
        #[command(flatten)]
        common: Common,
    },
    /// Write an artifact's bytes to stdout, or to a file with -o.
    Get {
        /// mcpx://artifacts/<id>, or the id.
        artifact: String,
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Delete an artifact.
    Rm {
        /// mcpx://artifacts/<id>, or the id.
        artifact: String,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Check the config file and name the file, line and reason of the first problem.
    Check {
        /// Config file. Default: $MCPX_CONFIG (absolute), else $XDG_CONFIG_HOME/mcpx/config.json.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Also start every server once and list what it offers: reports servers that do
        /// not start and names that clash between exposed servers (which only their
        /// listings can show). Stops them all before it exits.
        #[arg(long)]
        connect: bool,
    },
}

/// mimalloc, not the system's allocator: a call allocates a few hundred small blocks
/// (two JSON trees, headers, buffers), and glibc's spent a fifth of the daemon's CPU on
/// them (docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Daemon(args) => daemon::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Status { common } => commands::run(async || commands::status(common).await),
        Command::Log { args, common } => commands::run(async || journal::log(common, args).await),
        Command::Stats { args, common } => commands::run(async || journal::stats(common, args).await),
        Command::Stop { common, timeout } => {
            commands::run(async || commands::stop(common, Duration::from_secs(timeout)).await)
        }
        Command::Ls { server, common } => commands::run(async || commands::list(common, server, "").await),
        Command::Search { query, common } => {
            commands::run(async || commands::list(common, None, &query.join(" ")).await)
        }
        Command::Call { target, arguments, task: true, common, .. } => {
            commands::run(async || tasks::start(common, &target, arguments.as_deref()).await)
        }
        Command::Call { target, arguments, timeout, common, .. } => commands::run(async || {
            commands::call(common, &target, arguments.as_deref(), timeout.map(Duration::from_secs)).await
        }),
        Command::Task(TaskCommand::Ls { common }) => commands::run(async || tasks::list(common).await),
        Command::Task(TaskCommand::Get { id, common }) => commands::run(async || tasks::get(common, &id).await),
        Command::Task(TaskCommand::Wait { id, timeout, common }) => {
            commands::run(async || tasks::wait(common, &id, timeout.map(Duration::from_secs)).await)
        }
        Command::Task(TaskCommand::Cancel { id, common }) => commands::run(async || tasks::cancel(common, &id).await),
        Command::Exec { script, file, timeout_ms, common } => {
            commands::run(async || exec::exec(common, script, file.as_deref(), timeout_ms).await)
        }
        Command::Artifact(ArtifactCommand::Ls { common }) => commands::run(async || exec::list(common).await),
        Command::Artifact(ArtifactCommand::Get { artifact, output, common }) => {
            commands::run(async || exec::get(common, &artifact, output.as_deref()).await)
        }
        Command::Artifact(ArtifactCommand::Rm { artifact, common }) => {
            commands::run(async || exec::remove(common, &artifact).await)
        }
        Command::Ask(AskCommand::Ls { common }) => commands::run(async || commands::ask_list(common).await),
        Command::Ask(AskCommand::Show { id, common }) => commands::run(async || commands::ask_show(common, &id).await),
        Command::Ask(AskCommand::Answer { id, answer, common }) => {
            commands::run(async || commands::ask_answer(common, &id, &answer).await)
        }
        Command::Ask(AskCommand::Decline { id, common }) => {
            commands::run(async || commands::ask_decline(common, &id).await)
        }
        Command::Import(args) => moving::import(args),
        Command::Service(command) => service::run(command),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "mcpx", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man => match clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say_err!("mcpx: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Install(args) => moving::install(args),
        Command::Uninstall(args) => moving::uninstall(args),
        Command::Config(ConfigCommand::Check { config, connect }) => check_config(config, connect),
        Command::Auth(AuthCommand::Login { server, no_open, common }) => {
            commands::run(async || auth::login(common, &server, !no_open).await)
        }
        Command::Auth(AuthCommand::Ls { common }) => commands::run(async || auth::list(common).await),
        Command::Auth(AuthCommand::Logout { server, common }) => {
            commands::run(async || auth::logout(common, &server).await)
        }
    }
}

fn check_config(flag: Option<PathBuf>, connect: bool) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_default();
    if let Some(notice) = mcpx_gateway::settings::ignored_project_config(&cwd) {
        say_err!("mcpx: {notice}");
    }
    let found = match mcpx_gateway::settings::find_config(flag) {
        Ok(found) => found,
        Err(e) => {
            say_err!("mcpx: {e}");
            return ExitCode::FAILURE;
        }
    };
    let Some(path) = found else {
        say_err!("mcpx: no config file found; the daemon would run with no servers (see examples/mcpx.json)");
        return ExitCode::SUCCESS;
    };
    match mcpx_gateway::Config::load(&path) {
        Ok(config) => {
            say!("{}: ok, {} server(s)", path.display(), config.mcp_servers.len());
            if connect {
                return commands::run(async || commands::check_servers(path).await);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            say_err!("mcpx: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr (stdout is MCP's, for `serve`), filtered by `MCPX_LOG`
/// (e.g. `debug`, `mcpx_upstream=debug`); default `info`. Each message and field value is
/// escaped as any line the CLI prints ([`terminal::line`]): it names what callers and
/// upstreams chose (a session label in an instance's name, an upstream's error), and the
/// log is a terminal (`mcpx daemon` in the foreground) or a file the owner reads.
pub fn init_logging() {
    use tracing_subscriber::field::MakeExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCPX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let fields = tracing_subscriber::fmt::format::debug_fn(|writer, field, value| {
        let value = format!("{value:?}");
        match field.name() {
            "message" => write!(writer, "{}", terminal::line(&value)),
            name => write!(writer, "{name}={}", terminal::line(&value)),
        }
    })
    .delimited(" ");
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .fmt_fields(fields)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}
