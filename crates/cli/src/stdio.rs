//! This process's stdin and stdout as async streams, without a thread hop per read and
//! write where the kernel allows it.
//!
//! tokio's own stdin/stdout run every read and write on its blocking pool: two thread
//! hand-offs per message, which a relay in the path of every tool call cannot afford.
//! Hosts give a stdio server pipes (or, with libuv, socket pairs), and both can be read
//! and written asynchronously directly; anything else (a terminal, a file) falls back to
//! tokio's.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use tokio::io::{AsyncRead, AsyncWrite};

pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

pub fn stdin() -> Reader {
    match kind(0).and_then(|k| Some((k, duplicate(0)?))) {
        Some((Kind::Fifo, fd)) => match tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
            Ok(pipe) => Box::new(pipe),
            Err(_) => Box::new(tokio::io::stdin()),
        },
        Some((Kind::Socket, fd)) => match socket(fd) {
            Some(stream) => Box::new(stream),
            None => Box::new(tokio::io::stdin()),
        },
        None => Box::new(tokio::io::stdin()),
    }
}

pub fn stdout() -> Writer {
    match kind(1).and_then(|k| Some((k, duplicate(1)?))) {
        Some((Kind::Fifo, fd)) => match tokio::net::unix::pipe::Sender::from_owned_fd(fd) {
            Ok(pipe) => Box::new(pipe),
            Err(_) => Box::new(tokio::io::stdout()),
        },
        Some((Kind::Socket, fd)) => match socket(fd) {
            Some(stream) => Box::new(stream),
            None => Box::new(tokio::io::stdout()),
        },
        None => Box::new(tokio::io::stdout()),
    }
}

enum Kind {
    Fifo,
    Socket,
}

fn kind(fd: RawFd) -> Option<Kind> {
    // SAFETY: fstat writes into the zeroed struct we own; a bad fd yields an error.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut stat) } != 0 {
        return None;
    }
    match stat.st_mode & libc::S_IFMT {
        libc::S_IFIFO => Some(Kind::Fifo),
        libc::S_IFSOCK => Some(Kind::Socket),
        _ => None,
    }
}

/// A descriptor of our own for the stream, so tokio can own (and set non-blocking) it
/// while fd 0 and 1 stay as they are for anything else in the process.
fn duplicate(fd: RawFd) -> Option<OwnedFd> {
    // SAFETY: dup returns a fresh descriptor that nothing else owns, or -1.
    let copy = unsafe { libc::dup(fd) };
    (copy >= 0).then(|| unsafe { OwnedFd::from_raw_fd(copy) })
}

fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(stream).ok()
}
