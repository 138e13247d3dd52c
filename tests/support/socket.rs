//! Raw HTTP/1.1 over the daemon's unix socket, written by hand so a test controls every
//! header (a forged `X-Mcpx-Pid`, a missing `Upgrade`) and sees exactly what came back.
//!
//! Each request opens its own connection with `Connection: close` (an upgrade keeps it:
//! the reply hands the connection back as a line stream). Its answer reader
//! ([`read_head`], [`read_body`]) also serves tests that speak raw HTTP over TCP.

use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

/// How long a socket request may wait for any byte of its answer.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// The daemon's answer to one request over the socket.
pub struct SocketReply {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// After `101 Switching Protocols`: the connection, now carrying whatever was upgraded to.
    pub upgraded: Option<BufReader<UnixStream>>,
}

impl SocketReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("the body is not JSON ({e}):\n{self}"))
    }
}

impl fmt::Display for SocketReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "HTTP {}", self.status)?;
        for (name, value) in &self.headers {
            writeln!(f, "{name}: {value}")?;
        }
        write!(f, "\n{}", self.body)
    }
}

impl fmt::Debug for SocketReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Sends one request over a fresh connection to `socket` and reads the answer.
#[track_caller]
pub fn request(
    socket: &Path,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: Option<&[u8]>,
) -> SocketReply {
    let stream = UnixStream::connect(socket).unwrap_or_else(|e| panic!("cannot connect to {}: {e}", socket.display()));
    stream.set_read_timeout(Some(READ_TIMEOUT)).expect("set a read timeout");
    let upgrading = headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("upgrade"));
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: mcpx\r\n");
    if !upgrading {
        head.push_str("Connection: close\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let body = body.unwrap_or_default();
    if !body.is_empty() || method == "POST" {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut writer = stream.try_clone().expect("clone the socket");
    // A server may answer (404, 405) and close before reading a body: then the write
    // fails, and the answer is still there to read.
    let written = writer.write_all(head.as_bytes()).and_then(|()| writer.write_all(body));

    let mut reader = BufReader::new(stream);
    let (status, headers) = read_head(&mut reader)
        .unwrap_or_else(|e| panic!("reading the answer to {method} {path} failed: {e} (writing it: {written:?})"));
    let mut reply = SocketReply { status, headers, body: String::new(), upgraded: None };
    if status == 101 {
        reply.upgraded = Some(reader);
        return reply;
    }
    let bytes = read_body(&mut reader, status, &reply.headers);
    reply.body = String::from_utf8_lossy(&bytes).into_owned();
    reply
}

/// An HTTP/1.1 answer's status and headers (names lowercased), read off `reader` up to the
/// blank line and no further, so the connection can go on carrying requests.
pub fn read_head(reader: &mut impl BufRead) -> Result<(u16, Vec<(String, String)>), String> {
    let mut status_line = String::new();
    reader.read_line(&mut status_line).map_err(|e| e.to_string())?;
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP status line: {status_line:?}"))?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|e| format!("reading a header line: {e}"))?;
        let line = line.trim_end();
        if line.is_empty() {
            return Ok((status, headers));
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
}

/// The body of the answer whose head [`read_head`] read, as its headers frame it: none
/// for an interim (1xx), 204 or 304 answer, chunked, `Content-Length`, or up to the end.
pub fn read_body(reader: &mut impl BufRead, status: u16, headers: &[(String, String)]) -> Vec<u8> {
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    if (100..200).contains(&status) || status == 204 || status == 304 {
        Vec::new()
    } else if header("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
        read_chunked(reader)
    } else if let Some(length) = header("content-length").and_then(|l| l.parse::<usize>().ok()) {
        let mut bytes = vec![0; length];
        reader.read_exact(&mut bytes).expect("read the body");
        bytes
    } else {
        let mut bytes = Vec::new();
        reader.read_to_end(&mut bytes).expect("read the body");
        bytes
    }
}

fn read_chunked(reader: &mut impl BufRead) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).expect("read a chunk size");
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size:?}"));
        if size == 0 {
            let mut trailer = String::new();
            let _ = reader.read_line(&mut trailer);
            return body;
        }
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).expect("read a chunk");
        body.extend_from_slice(&chunk[..size]);
    }
}

/// `GET /v1/stdio` asking to upgrade, claiming `pid` (none: no claim header).
#[track_caller]
pub fn stdio_upgrade(socket: &Path, pid: Option<u32>, session: Option<&str>) -> SocketReply {
    let mut headers = vec![("Connection", "upgrade".to_owned()), ("Upgrade", "mcpx-stdio".to_owned())];
    if let Some(pid) = pid {
        headers.push(("X-Mcpx-Pid", pid.to_string()));
    }
    if let Some(session) = session {
        headers.push(("X-Mcpx-Session", session.to_owned()));
    }
    request(socket, "GET", "/v1/stdio", &headers, None)
}
