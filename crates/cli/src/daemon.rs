//! `mcpx daemon`: load settings, listen, record where, serve until told to stop, then stop
//! every upstream before exiting. The one place that owns the daemon's shutdown order.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use mcpx_gateway::{Gateway, Settings};
use mcpx_server::state;
use tokio::signal::unix::{SignalKind, signal};

/// How long open HTTP connections get to finish after the upstreams are stopped.
const DRAIN: Duration = Duration::from_secs(5);

#[derive(clap::Args)]
pub struct Args {
    /// Config file. Default: $MCPX_CONFIG, else .mcpx.json in this directory or a parent,
    /// else $XDG_CONFIG_HOME/mcpx/config.json; with none, mcpx runs with no servers.
    #[arg(long)]
    config: Option<PathBuf>,
    /// TCP port on the loopback interface (default: http.port from the config, else 7750;
    /// 0 takes an ephemeral port). The address is printed and written to
    /// $MCPX_STATE_DIR/daemon.json.
    #[arg(long)]
    port: Option<u16>,
}

pub fn run(args: Args) -> ExitCode {
    init_logging();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a tokio runtime starts");
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let config_path = mcpx_gateway::settings::find_config(args.config, &cwd);
    let settings = Settings::load(config_path)?;
    match settings.path() {
        Some(path) => tracing::info!("config: {}", path.display()),
        None => tracing::info!(
            "no config file found: serving no upstream servers. Add servers under \"mcpServers\" in ~/.config/mcpx/config.json or pass --config (examples/mcpx.json is a ready demo)"
        ),
    }
    let http = settings.config().http.clone();
    let port = args.port.unwrap_or(http.port);
    let listener = tokio::net::TcpListener::bind((http.host.as_str(), port))
        .await
        .with_context(|| format!("listening on {}:{port}", http.host))?;
    let address = listener.local_addr()?;
    let url = format!("http://{address}/mcp");

    let dir = state::state_dir();
    state::ensure_private_dir(&dir).with_context(|| format!("creating the state dir {}", dir.display()))?;
    let record = state::Record { url: url.clone(), port: address.port(), config: settings.path().map(Into::into) };
    let gateway = Gateway::new(settings);
    record.write(&dir).with_context(|| format!("writing the daemon record in {}", dir.display()))?;
    eprintln!("mcpx: listening on {url}");

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, mcpx_server::router(gateway.clone()))
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .into_future(),
    );
    stop_signal().await;
    tracing::info!("stopping: ending every upstream instance");
    // Upstreams first, so calls in flight fail at once instead of holding the drain open.
    gateway.shutdown().await;
    let _ = stop_tx.send(());
    if tokio::time::timeout(DRAIN, server).await.is_err() {
        tracing::warn!("connections still open after {DRAIN:?}; closing them");
    }
    state::remove_record(&dir);
    tracing::info!("stopped");
    Ok(())
}

async fn stop_signal() {
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Logs go to stderr, filtered by `MCPX_LOG` (e.g. `debug`, `mcpx_upstream=debug`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCPX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}
