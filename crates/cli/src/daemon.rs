//! `mcpx daemon`: take the state dir's lock, load settings, listen on loopback TCP and on
//! the unix socket (through `mcpx_server::listener`: connection cap and read timeouts),
//! record where, serve until told to stop (a signal, `POST /v1/stop`, or
//! idleness when started on demand), then stop every upstream before exiting. The one
//! place that owns the daemon's shutdown order.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use mcpx_gateway::{Gateway, Settings};
use mcpx_server::listener::{self, Connections, Listener};
use mcpx_server::{Daemon, Front, socket, state};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// How long open HTTP connections get to finish after the upstreams are stopped.
const DRAIN: Duration = Duration::from_secs(5);

#[derive(clap::Args)]
pub struct Args {
    /// Config file. Default: $MCPX_CONFIG, else .mcpx.json in this directory or a parent,
    /// else $XDG_CONFIG_HOME/mcpx/config.json; with none, mcpx runs with no servers.
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
    let dir = match state::state_dir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("mcpx: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Every process the daemon starts inherits this, before any other thread exists.
    // SAFETY: single-threaded here: the runtime is not built yet.
    unsafe { std::env::set_var(state::OWNER_ENV, state::owner_tag(&dir)) };
    // After a large reap each worker empties its allocator cache when it next goes idle.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(mcpx_gateway::memory::on_park)
        .build()
        .expect("a tokio runtime starts");
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let dir = state::state_dir()?;
    state::ensure_private_dir(&dir).with_context(|| format!("creating the state dir {}", dir.display()))?;
    let _lock = state::DaemonLock::acquire(&dir)?;
    let orphans = state::reap_orphans(&dir);
    if orphans > 0 {
        tracing::warn!("stopped {orphans} process(es) a previous daemon for {} left behind", dir.display());
    }

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
    let tcp = tokio::net::TcpListener::bind((http.host.as_str(), port))
        .await
        .with_context(|| format!("listening on {}:{port}", http.host))?;
    let address = tcp.local_addr()?;
    // Listening on every address: the URL names loopback, an address a client can use
    // (and a Host admission accepts).
    let reachable = match address.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => (std::net::Ipv4Addr::LOCALHOST, address.port()).into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => (std::net::Ipv6Addr::LOCALHOST, address.port()).into(),
        _ => address,
    };
    let url = format!("http://{reachable}/mcp");
    if !address.ip().is_loopback() {
        tracing::warn!(
            "listening beyond loopback on {address}: reachable from other machines; every TCP request needs a token from http.tokens"
        );
    }
    let (unix, socket_path) = socket::bind(&dir).with_context(|| format!("binding the socket in {}", dir.display()))?;

    let record = state::Record {
        url: url.clone(),
        port: address.port(),
        socket: socket_path.clone(),
        config: settings.path().map(Into::into),
    };
    let gateway = Gateway::new(settings);
    gateway.remember_eras_in(dir.join("eras.json"));
    gateway.keep_artifacts_in(dir.join("artifacts"));
    let front = Arc::new(Front {
        gateway: gateway.clone(),
        sessions: Default::default(),
        daemon: Daemon::new(url.clone(), Some(socket_path.clone())),
        pending: Default::default(),
    });
    let app = mcpx_server::router(front.clone());
    record.write(&dir).with_context(|| format!("writing the daemon record in {}", dir.display()))?;
    eprintln!("mcpx: listening on {url} and {}", socket_path.display());

    // One cap for both listeners, within what the open-file limit leaves beside the
    // upstreams' pipes.
    let config = gateway.settings().config();
    let connections = Connections::new(listener::fd_budget(config.http.max_connections, config.pool.max_instances));
    let stop = CancellationToken::new();
    let serve_on = |on: Listener| {
        tokio::spawn(listener::serve(on, app.clone(), gateway.clone(), connections.clone(), stop.clone()))
    };
    let tcp_server = serve_on(Listener::Tcp(tcp));
    let unix_server = serve_on(Listener::Unix(unix));

    tokio::select! {
        _ = stop_signal() => tracing::info!("stopping on a signal"),
        _ = front.daemon.stop.notified() => tracing::info!("stopping on request"),
        _ = idle_exit(&front.daemon, args.idle_exit) => tracing::info!("stopping: idle for {:?}", args.idle_exit.unwrap_or_default()),
    }
    // Upstreams first, so calls in flight fail at once instead of holding the drain open.
    gateway.shutdown().await;
    stop.cancel();
    if tokio::time::timeout(DRAIN, async {
        let _ = tcp_server.await;
        let _ = unix_server.await;
    })
    .await
    .is_err()
    {
        tracing::warn!("connections still open after {DRAIN:?}; closing them");
    }
    state::remove_record(&dir);
    tracing::info!("stopped");
    Ok(())
}

async fn idle_exit(daemon: &Daemon, after: Option<Duration>) {
    let Some(after) = after else { return std::future::pending().await };
    let mut tick = tokio::time::interval(Duration::from_secs(1).min(after));
    loop {
        tick.tick().await;
        if daemon.idle_for().is_some_and(|idle| idle >= after) {
            return;
        }
    }
}

async fn stop_signal() {
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
