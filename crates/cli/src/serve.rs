//! `mcpx serve`: what an agent host launches as its MCP server. A thin stdio front end:
//! every line goes to the daemon over its unix socket, with the identity of this process
//! (session `$MCPX_SESSION_ID` if set, else this process as a session no label can name;
//! its cwd, its pid, which the daemon checks against the socket's credentials), and every
//! line back goes to stdout. The relay and what it keeps when the daemon goes away are
//! `mcpx_server::relay`'s; this file reads the arguments and connects it.
//! `--no-daemon` runs an in-process gateway for this one client instead.

use std::path::PathBuf;
use std::process::ExitCode;

use mcpx_gateway::{Gateway, Settings};
use mcpx_server::relay;

use crate::client::{self, Daemon};
use crate::terminal::say_err;

#[derive(clap::Args)]
pub struct Args {
    /// Config file for a daemon started on demand (or for --no-daemon).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Session name for this client (default: $MCPX_SESSION_ID, else this process itself,
    /// a session no label can name).
    #[arg(long, env = "MCPX_SESSION_ID")]
    session: Option<String>,
    /// Run an in-process gateway for this one client instead of using the shared daemon.
    #[arg(long)]
    no_daemon: bool,
}

pub fn run(args: Args) -> ExitCode {
    crate::init_logging();
    // One thread: the relay is a pump, and cross-thread wake-ups are most of its cost.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime starts");
    let outcome =
        runtime.block_on(async { if args.no_daemon { in_process(args).await } else { through_daemon(args).await } });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say_err!("mcpx serve: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn in_process(args: Args) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()?;
    if let Some(notice) = mcpx_gateway::settings::ignored_project_config(&cwd) {
        tracing::warn!("{notice}");
    }
    let settings = Settings::load(mcpx_gateway::settings::find_config(args.config)?)?;
    // No daemon here, but the user's may run beside it: no request this process sends
    // (an upstream's redirect) may reach that one's API either.
    let _daemons = daemon_addresses(&settings);
    let gateway = Gateway::new(settings);
    let transport = mcpx_server::stdio::transport(args.session.as_deref(), std::process::id(), Some(cwd));
    let (stdin, stdout) = (crate::stdio::stdin(), crate::stdio::stdout());
    // Nothing else ends this stream: it serves until stdin closes.
    let end = tokio_util::sync::CancellationToken::new();
    mcpx_server::stdio::serve_lines(gateway.clone(), transport, stdin, stdout, end).await;
    gateway.shutdown().await;
    Ok(())
}

/// The relay itself is `mcpx_server::relay`; this is where its daemon connections come
/// from: the checked socket (starting a daemon if none runs), upgraded to a stdio stream.
async fn through_daemon(args: Args) -> anyhow::Result<()> {
    let daemon = Daemon::new()?;
    let (config, session) = (args.config.as_deref(), args.session.as_deref());
    let daemon = &daemon;
    let connect = move || async move {
        let stream = daemon.connect_or_start(config).await?;
        client::upgrade_to_stdio(stream, session).await
    };
    relay::run(connect, crate::stdio::stdin(), crate::stdio::stdout()).await?;
    Ok(())
}

/// Where the user's daemon listens or would, held as mcpx's own for as long as the
/// returned guards live: the port its record names, and the configured one, each on
/// every address of this machine. A gateway run in a CLI process keeps its requests from
/// them. Not on the configured host alone: the daemon may run
/// from another config than this process reads (`config check --connect other.json`,
/// `serve --no-daemon --config`), on another address (`::1` where this one says
/// `127.0.0.1`), and its record names only one of the addresses that reach it.
pub(crate) fn daemon_addresses(settings: &Settings) -> Vec<mcpx_http::egress::Listening> {
    let http = &settings.config().http;
    let recorded = mcpx_server::state::state_dir().ok().and_then(|dir| mcpx_server::state::read_record(&dir));
    let ports = [Some(http.port), recorded.and_then(|r| r["port"].as_u64()).and_then(|p| u16::try_from(p).ok())];
    let everywhere = std::net::IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED);
    ports
        .into_iter()
        .flatten()
        .map(|port| mcpx_http::egress::listening(std::net::SocketAddr::new(everywhere, port)))
        .collect()
}
