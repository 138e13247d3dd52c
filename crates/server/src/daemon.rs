//! The daemon from start to stop, the one place that knows both orders.
//!
//! Start: load the settings (before the runtime, which `workers` sizes), take the state
//! dir's lock (one daemon per dir) and reap what a killed predecessor left, listen on
//! TCP and on the unix socket (through `listener`: connection cap and read timeouts),
//! write the record clients find it by.
//! Then serve until told to stop: a signal, `POST /v1/stop`, or idleness when started on
//! demand.
//!
//! Stop, in this order:
//! 1. stop accepting: each open connection finishes the request it is serving;
//! 2. `Gateway::shutdown`: every upstream instance stops and its process group is gone,
//!    so calls in flight fail at once instead of holding the next step open, and
//!    listens and standalone streams end with their last frame;
//! 3. let what is in flight finish: open connections drain, for at most [`DRAIN`];
//! 4. end the relayed stdio streams: each ends as at the end of its input (its requests
//!    get the stream's grace), for at most [`DRAIN`];
//! 5. remove the record and the socket.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use mcpx_gateway::config::ConfigError;
use mcpx_gateway::{Gateway, Settings};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use crate::front::{Front, Life};
use crate::listener::{self, Connections, Listener};
use crate::state::{self, LockError};
use crate::{admission, api, http, socket};

/// How long open connections, then relayed streams, get to finish once upstreams stop.
pub const DRAIN: Duration = Duration::from_secs(5);

/// How the daemon was asked to run (`mcpx daemon`'s flags).
#[derive(Debug, Default)]
pub struct Options {
    /// The config file; `None` looks for one from the current directory up.
    pub config: Option<PathBuf>,
    /// The TCP port; `None` takes `http.port` from the config.
    pub port: Option<u16>,
    /// Stop after this long with no requests and no relayed stream open.
    pub idle_exit: Option<Duration>,
}

/// Why the daemon could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    StateDir(std::io::Error),
    #[error("creating the state dir {}", .0.display())]
    PrivateDir(PathBuf, #[source] std::io::Error),
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error("reading the current directory")]
    Cwd(#[source] std::io::Error),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("listening on {0}")]
    Listen(String, #[source] std::io::Error),
    #[error("binding the socket in {}", .0.display())]
    Socket(PathBuf, #[source] std::io::Error),
    #[error("joining the cluster: {0}")]
    Cluster(String),
    #[error("writing the daemon record in {}", .0.display())]
    Record(PathBuf, #[source] std::io::Error),
    #[error("starting {0} worker threads (\"workers\")")]
    Runtime(usize, #[source] std::io::Error),
}

/// Runs the daemon until it is told to stop, then stops it; an error if it cannot start.
pub fn run(options: Options) -> Result<(), Error> {
    let dir = state::state_dir().map_err(Error::StateDir)?;
    // Every process the daemon starts inherits this, before any other thread exists.
    // SAFETY: single-threaded here: the runtime is not built yet.
    unsafe { std::env::set_var(state::OWNER_ENV, state::owner_tag(&dir)) };
    // Read before the runtime is built: `workers` sizes it.
    let cwd = std::env::current_dir().map_err(Error::Cwd)?;
    if let Some(notice) = mcpx_gateway::settings::ignored_project_config(&cwd) {
        tracing::warn!("{notice}");
    }
    let settings = Settings::load(mcpx_gateway::settings::find_config(options.config.clone())?)?;
    let workers = settings.config().workers.unwrap_or_else(mcpx_gateway::config::default_workers);
    // After a large reap each worker empties its allocator cache when it next goes idle.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .on_thread_park(mcpx_gateway::memory::on_park)
        .build()
        .map_err(|e| Error::Runtime(workers, e))?;
    runtime.block_on(serve(&dir, options, settings))
}

/// The router for both listeners: `/mcp` and the `/v1` API, every route and the fallback
/// behind `admission`. Served by `listener::serve`, which gives each request its
/// `ConnectInfo<Peer>`.
pub fn router(front: Arc<Front>) -> Router {
    // Each route says who may use it (`reach`): the owner's and admins' are guarded there.
    http::routes()
        .merge(api::routes())
        .merge(crate::ui::routes())
        .into_router(&front)
        // The limit is ours (a hot setting), enforced by `http` as it reads a body.
        .layer(DefaultBodyLimit::disable())
        // Last, so it wraps every route above (and the fallback): add routes before it.
        .layer(axum::middleware::from_fn_with_state(front.clone(), admission::admit))
        .with_state(front)
}

async fn serve(dir: &Path, options: Options, settings: Settings) -> Result<(), Error> {
    state::ensure_private_dir(dir).map_err(|e| Error::PrivateDir(dir.to_owned(), e))?;
    let _lock = state::DaemonLock::acquire(dir)?;
    let orphans = state::reap_orphans(dir);
    if orphans > 0 {
        tracing::warn!("stopped {orphans} process(es) a previous daemon for {} left behind", dir.display());
    }

    match settings.path() {
        Some(path) => tracing::info!("config: {}", path.display()),
        None => tracing::info!(
            "no config file found: serving no upstream servers. Add servers under \"mcpServers\" in ~/.config/mcpx/config.json or pass --config (examples/mcpx.json is a ready demo)"
        ),
    }
    let http = settings.config().http.clone();
    let port = options.port.unwrap_or(http.port);
    let listening = format!("{}:{port}", http.host);
    let tcp = tokio::net::TcpListener::bind((http.host.as_str(), port))
        .await
        .map_err(|e| Error::Listen(listening.clone(), e))?;
    let address = tcp.local_addr().map_err(|e| Error::Listen(listening, e))?;
    // No request mcpx sends, wherever a remote party points it, comes back here.
    let _own = mcpx_http::egress::listening(address);
    let url = format!("http://{}/mcp", reachable(address));
    if !address.ip().is_loopback() {
        tracing::warn!(
            "listening beyond loopback on {address}: reachable from other machines; every TCP request needs a token from http.tokens"
        );
    }
    let (unix, socket_path) = socket::bind(dir).map_err(|e| Error::Socket(dir.to_owned(), e))?;

    let record = state::Record {
        url: url.clone(),
        port: address.port(),
        socket: socket_path.clone(),
        config: settings.path().map(Into::into),
    };
    let gateway = Gateway::new(settings);
    gateway.remember_eras_in(dir.join("eras.json"));
    gateway.keep_artifacts_in(dir.join("artifacts"));
    if let Err(e) = gateway.keep_journal_in(dir.join("journal.sqlite")) {
        tracing::warn!("the call journal is off: cannot open {}: {e}", dir.join("journal.sqlite").display());
    }
    // Traces are read at the start: a changed endpoint applies at the next one.
    let telemetry = gateway.settings().config().telemetry.clone();
    if let Some(endpoint) = mcpx_gateway::traces::endpoint(telemetry.otlp_endpoint.as_deref())
        && let Err(e) = gateway.export_traces(&endpoint)
    {
        tracing::warn!("traces are off: {e}");
    }
    // Tokens live in the state dir, private like it: logins survive a daemon restart.
    match mcpx_oauth::Authorizer::open(&dir.join("oauth"), mcpx_oauth::Settings::default()) {
        Ok(authorizer) => gateway.authorize_with(authorizer),
        Err(e) => tracing::warn!("OAuth logins are off: {e}"),
    }
    let mut front = Front::new(gateway.clone(), Life::new(url.clone(), Some(socket_path.clone())));
    if let Some(cluster) = gateway.settings().config().cluster.clone() {
        let base = url.trim_end_matches("/mcp");
        let joining = mcpx_gateway::cluster::Joining::new(&cluster, base).map_err(Error::Cluster)?;
        tracing::info!(node = joining.node, url = joining.url, "running as a node of a cluster");
        let link = Arc::new(crate::cluster::Link::new(joining.node, joining.url, &joining.secret));
        front = front.in_cluster(link.clone());
        gateway.join_cluster(joining.cluster, link);
    }
    let front = Arc::new(front);
    let app = router(front.clone());
    // Before the record: a client may signal the daemon as soon as it can find it.
    let stop_signal = stop_signal();
    record.write(dir).map_err(|e| Error::Record(dir.to_owned(), e))?;
    eprintln!("mcpx: listening on {url} and {}", socket_path.display());
    tracing::info!("serving on {} worker threads", tokio::runtime::Handle::current().metrics().num_workers());

    // One cap for both listeners, within what the open-file limit leaves beside the
    // upstreams' pipes.
    let config = gateway.settings().config();
    let connections = Connections::new(listener::fd_budget(config.http.max_connections, config.pool.max_instances));
    let accepting = CancellationToken::new();
    let serve_on = |on: Listener| {
        tokio::spawn(listener::serve(on, app.clone(), gateway.clone(), connections.clone(), accepting.clone()))
    };
    let servers = [serve_on(Listener::Tcp(tcp)), serve_on(Listener::Unix(unix))];

    tokio::select! {
        _ = stop_signal => tracing::info!("stopping on a signal"),
        _ = front.life.stop_requested() => tracing::info!("stopping on request"),
        _ = idle_exit(&front.life, options.idle_exit) => {
            tracing::info!("stopping: idle for {:?}", options.idle_exit.unwrap_or_default())
        }
    }
    accepting.cancel();
    gateway.shutdown().await;
    let drained = tokio::time::timeout(DRAIN, async {
        for server in servers {
            let _ = server.await;
        }
    })
    .await;
    if drained.is_err() {
        tracing::warn!("connections still open after {DRAIN:?}; closing them");
    }
    if !front.life.end_streams(DRAIN).await {
        tracing::warn!("relayed stdio streams still open after {DRAIN:?}; closing them");
    }
    state::remove_record(dir);
    tracing::info!("stopped");
    Ok(())
}

/// The address a client can use: loopback when listening on every address (a URL that
/// names loopback is one `Host` admission accepts).
fn reachable(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, address.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, address.port()).into(),
        _ => address,
    }
}

async fn idle_exit(life: &Life, after: Option<Duration>) {
    let Some(after) = after else { return std::future::pending().await };
    let mut tick = tokio::time::interval(Duration::from_secs(1).min(after));
    loop {
        tick.tick().await;
        if life.idle_for().is_some_and(|idle| idle >= after) {
            return;
        }
    }
}

/// Installs the SIGTERM and SIGINT handlers now, and resolves when either arrives.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    let mut term = signal(SignalKind::terminate()).expect("installing a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing a SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_listening_on_every_address_is_reached_on_loopback() {
        let any4: SocketAddr = "0.0.0.0:7750".parse().unwrap();
        assert_eq!(reachable(any4), "127.0.0.1:7750".parse().unwrap());
        let any6: SocketAddr = "[::]:7750".parse().unwrap();
        assert_eq!(reachable(any6), "[::1]:7750".parse().unwrap());
        let one: SocketAddr = "192.168.1.5:7750".parse().unwrap();
        assert_eq!(reachable(one), one);
    }
}
