//! Reaching the daemon from a client process (`mcpx serve`, the CLI commands): over its
//! unix socket, starting it on demand when none runs. What is said over the connection is
//! `mcpx_server::v1` (the typed `/v1` API) or, for `mcpx serve`, the stdio relay.
//!
//! Starting is race-safe: every client that finds no daemon may start one, the daemon lock
//! lets exactly one of them run, and every client then connects to that one.
//!
//! A client sends nothing (a call's arguments, a session) to a socket it has not checked:
//! the state dir must be this user's and closed to others, and the process listening
//! must run as this user (its credentials as the kernel gives them, `SO_PEERCRED`), so a
//! socket another user planted is refused, not talked to.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::terminal::say_err;
use anyhow::{Context, anyhow, bail};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use mcpx_gateway::config::ConfigError;
use mcpx_gateway::settings;
use mcpx_server::{socket, state};
use tokio::net::UnixStream;

/// How long a client waits for a daemon it started to come up.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a daemon started on demand lives without any client.
const ON_DEMAND_IDLE_EXIT: &str = "10m";

pub struct Daemon {
    pub dir: PathBuf,
}

impl Daemon {
    pub fn new() -> anyhow::Result<Daemon> {
        Ok(Daemon { dir: state::state_dir()? })
    }

    fn socket(&self) -> PathBuf {
        self.dir.join(socket::SOCKET_FILE)
    }

    /// A connection to the running daemon, if one runs; an error when the state dir or
    /// the process listening is not this user's own.
    pub async fn connect(&self) -> anyhow::Result<Option<UnixStream>> {
        match std::fs::metadata(&self.dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            _ => state::check_private_dir(&self.dir)
                .with_context(|| format!("not trusting the daemon socket in {}", self.dir.display()))?,
        }
        let Ok(stream) = UnixStream::connect(self.socket()).await else { return Ok(None) };
        let peer = stream.peer_cred().context("reading who listens on the daemon socket")?;
        let uid = rustix::process::geteuid().as_raw();
        if peer.uid() != uid {
            bail!(
                "{} is served by a process of uid {}, not of this user ({uid}); refusing to send it anything",
                self.socket().display(),
                peer.uid()
            );
        }
        Ok(Some(stream))
    }

    /// A connection to the daemon, starting one (detached, with an idle exit) if none runs.
    pub async fn connect_or_start(&self, config: Option<&Path>) -> anyhow::Result<UnixStream> {
        if let Some(stream) = self.connect().await? {
            return Ok(stream);
        }
        self.start(config)?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(stream) = self.connect().await? {
                return Ok(stream);
            }
            if Instant::now() > deadline {
                bail!(
                    "started a daemon but it did not come up within {START_TIMEOUT:?}; see {}",
                    self.dir.join("daemon.log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts a daemon with the config the user chose, never one from this cwd; refused
    /// here, before anything starts, when that file is not the user's alone.
    fn start(&self, config: Option<&Path>) -> anyhow::Result<()> {
        if let Some(notice) = std::env::current_dir().ok().and_then(|cwd| settings::ignored_project_config(&cwd)) {
            say_err!("mcpx: {notice}");
        }
        let chosen =
            settings::find_config(config.map(Path::to_owned)).map_err(|e| anyhow!("not starting a daemon: {e}"))?;
        if let Some(chosen) = chosen {
            // Displayed whole: its source is already in its message.
            ConfigError::check_provenance(&chosen).map_err(|e| anyhow!("not starting a daemon: {e}"))?;
        }
        state::ensure_private_dir(&self.dir).with_context(|| format!("creating {}", self.dir.display()))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("daemon.log"))
            .context("opening the daemon log")?;
        let exe = std::env::current_exe().context("finding the mcpx executable")?;
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["daemon", "--port", "0", "--idle-exit", ON_DEMAND_IDLE_EXIT])
            .env("MCPX_STATE_DIR", &self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(config) = config {
            cmd.arg("--config").arg(config);
        }
        // SAFETY: setsid is async-signal-safe; it detaches the daemon from our terminal and
        // process group, so a Ctrl-C aimed at this client does not stop the shared daemon.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                let _ = rustix::process::setsid();
                Ok(())
            });
        }
        let mut child = cmd.spawn().context("starting the daemon")?;
        // Reap it when it exits so it never lingers as a zombie of a long-lived client.
        std::thread::spawn(move || child.wait());
        Ok(())
    }
}

/// Turns a socket connection into a raw stdio relay stream (`GET /v1/stdio`).
pub async fn upgrade_to_stdio(
    stream: UnixStream,
    session: Option<&str>,
) -> anyhow::Result<TokioIo<hyper::upgrade::Upgraded>> {
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn.with_upgrades());
    let mut builder = Request::builder()
        .method("GET")
        .uri("/v1/stdio")
        .header("host", "mcpx")
        .header("connection", "upgrade")
        .header("upgrade", mcpx_server::api::STDIO_PROTOCOL)
        .header(mcpx_server::api::PID_HEADER, std::process::id().to_string());
    if let Some(session) = session {
        builder = builder.header(mcpx_server::api::SESSION_HEADER, session);
    }
    let response = sender.send_request(builder.body(Full::new(Bytes::new()))?).await?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = response.status();
        let text = response.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        bail!("the daemon refused the stdio relay: {status} {}", String::from_utf8_lossy(&text).trim());
    }
    Ok(TokioIo::new(hyper::upgrade::on(response).await?))
}
