//! This process's stdin and stdout as async streams, without a thread hop per read and
//! write where the kernel allows it.
//!
//! tokio's own stdin/stdout run every read and write on its blocking pool: two thread
//! hand-offs per message, which a relay in the path of every tool call cannot afford.
//! Hosts give a stdio server pipes (or, with libuv, socket pairs), and both can be read
//! and written asynchronously directly; anything else (a terminal, a file) falls back to
//! tokio's.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::FileType;

use tokio::io::{AsyncRead, AsyncWrite};

pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

pub fn stdin() -> Reader {
    let fd = std::io::stdin();
    match kind(fd.as_fd()).and_then(|k| Some((k, duplicate(fd.as_fd())?))) {
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
    let fd = std::io::stdout();
    match kind(fd.as_fd()).and_then(|k| Some((k, duplicate(fd.as_fd())?))) {
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

fn kind(fd: BorrowedFd<'_>) -> Option<Kind> {
    match FileType::from_raw_mode(rustix::fs::fstat(fd).ok()?.st_mode) {
        FileType::Fifo => Some(Kind::Fifo),
        FileType::Socket => Some(Kind::Socket),
        _ => None,
    }
}

/// A descriptor of our own for the stream, so tokio can own (and set non-blocking) it
/// while fd 0 and 1 stay as they are for anything else in the process.
fn duplicate(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    rustix::io::dup(fd).ok()
}

fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(stream).ok()
}
