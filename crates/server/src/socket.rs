//! The daemon's unix socket: the trusted local path. It serves the same `/mcp` and `/v1`
//! as TCP, plus `GET /v1/stdio`, which `mcpx serve` upgrades into a raw line stream that
//! carries its stdio traffic.
//!
//! Who is on the other end is read from the kernel (`SO_PEERCRED`), never taken on trust:
//! a pid claim that does not match the peer's credentials is refused, and the caller's
//! cwd is read from that pid by the daemon itself.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, UnixListener, UnixStream};

pub const SOCKET_FILE: &str = "mcpx.sock";

/// Who is connected, as the transport knows it.
#[derive(Clone, Debug)]
pub enum Peer {
    Tcp(std::net::SocketAddr),
    /// A local process on the unix socket, from its credentials.
    Local {
        pid: Option<u32>,
        uid: u32,
    },
}

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Peer::Tcp(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, UnixListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        Peer::of_unix(stream.io())
    }
}

impl Peer {
    /// The process on the other end of a socket connection, from the kernel.
    pub fn of_unix(stream: &UnixStream) -> Peer {
        match stream.peer_cred() {
            Ok(cred) => Peer::Local { pid: cred.pid().and_then(|p| u32::try_from(p).ok()), uid: cred.uid() },
            // Unknowable credentials get no identity beyond the socket's own trust.
            Err(_) => Peer::Local { pid: None, uid: u32::MAX },
        }
    }
}

/// Binds the socket in `dir`, replacing a stale one (the caller holds the daemon lock, so
/// no live daemon owns it), readable and writable by the owner only.
pub fn bind(dir: &Path) -> std::io::Result<(UnixListener, PathBuf)> {
    let path = dir.join(SOCKET_FILE);
    match std::fs::remove_file(&path) {
        Ok(()) => tracing::info!("replaced a stale socket at {}", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok((listener, path))
}

/// The working directory of a process, read from the kernel.
pub fn cwd_of(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}
