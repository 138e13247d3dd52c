//! Wire taps: what a third-party client really sent, seen from outside both ends.
//!
//! A client such as the MCP Inspector CLI reports only results, not the protocol revision
//! it negotiated. A tap sits between it and mcpx, relays every byte unchanged and keeps a
//! copy, so a test can check the era from the requests themselves.
//!
//! - [`HttpTap`]: a loopback TCP relay in front of the daemon's `/mcp`; the requests it
//!   relayed come back parsed ([`TappedRequest`]: method, headers, JSON body), and with
//!   the answers the daemon gave them ([`TappedResponse`]: status, JSON-RPC messages).
//! - [`StdioTap`]: files for `tests/node/stdio_tap.js`, a relay put in front of
//!   `mcpx serve`; the JSON-RPC lines each way come back parsed.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::Value;

use crate::process::TempDir;

/// One HTTP request a client sent through an [`HttpTap`].
#[derive(Clone, Debug)]
pub struct TappedRequest {
    /// `POST`, `GET`, `DELETE`, ...
    pub method: String,
    pub path: String,
    /// Header names lowercased, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Null` when empty or not JSON).
    pub body: Value,
    /// The body's bytes as sent.
    pub raw_body: Vec<u8>,
}

impl TappedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC method of the body, if it is a request or notification.
    pub fn rpc_method(&self) -> Option<&str> {
        self.body["method"].as_str()
    }
}

/// One HTTP response the daemon gave through an [`HttpTap`].
#[derive(Clone, Debug)]
pub struct TappedResponse {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    /// The JSON-RPC messages of the body: a JSON body, or each `data:` of an SSE stream
    /// (as far as it got, for a stream still open).
    pub messages: Vec<Value>,
}

/// The bytes one connection carried one way, in order.
type Connections = Arc<Mutex<Vec<Arc<Mutex<Vec<u8>>>>>>;

/// A TCP relay on a free loopback port in front of an `http://host:port/...` endpoint.
/// Stopped on drop.
pub struct HttpTap {
    port: u16,
    path: String,
    /// The `host:port` relayed to; empty until known ([`HttpTap::start_unbound`]).
    target: Arc<Mutex<String>>,
    sent: Connections,
    /// What the target answered on each connection (same order as `sent`).
    received: Connections,
    /// The client side of every connection relayed, so [`HttpTap::cut`] can end them.
    live: Arc<Mutex<Vec<TcpStream>>>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl HttpTap {
    /// Starts relaying to the host and port of `url` (`http://127.0.0.1:P/mcp`).
    #[track_caller]
    pub fn start(url: &str) -> HttpTap {
        let mut tap = HttpTap::start_unbound();
        tap.relay_to(url);
        tap
    }

    /// A tap whose target is not known yet: its port is, so that something can be told
    /// to reach it before the target exists. Connections before [`HttpTap::relay_to`] are
    /// closed unanswered.
    pub fn start_unbound() -> HttpTap {
        let target = Arc::new(Mutex::new(String::new()));
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the tap's port");
        let port = listener.local_addr().expect("the tap's address").port();
        let sent: Connections = Arc::default();
        let received: Connections = Arc::default();
        let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let target = Arc::clone(&target);
            let sent = Arc::clone(&sent);
            let received = Arc::clone(&received);
            let live = Arc::clone(&live);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let target = target.lock().unwrap().clone();
                    let Ok(server) = TcpStream::connect(&target) else {
                        // Nothing to relay to: the client sees the connection close.
                        continue;
                    };
                    if let Ok(handle) = client.try_clone() {
                        live.lock().unwrap().push(handle);
                    }
                    let log = Arc::new(Mutex::new(Vec::new()));
                    let answers = Arc::new(Mutex::new(Vec::new()));
                    // One lock for both lists keeps their indexes in step.
                    let mut sent = sent.lock().unwrap();
                    sent.push(Arc::clone(&log));
                    received.lock().unwrap().push(Arc::clone(&answers));
                    drop(sent);
                    relay(client, server, log, answers);
                }
            })
        };
        HttpTap { port, path: "/".to_owned(), target, sent, received, live, stop, acceptor: Some(acceptor) }
    }

    /// Cuts the line: every connection relayed so far is ended, and new ones are closed
    /// unanswered until [`HttpTap::relay_to`] names a target again.
    pub fn cut(&self) {
        self.target.lock().unwrap().clear();
        for connection in self.live.lock().unwrap().drain(..) {
            let _ = connection.shutdown(Shutdown::Both);
        }
    }

    /// Relays from now on to the host and port of `url`; [`HttpTap::url`] takes its path.
    #[track_caller]
    pub fn relay_to(&mut self, url: &str) {
        let rest =
            url.strip_prefix("http://").unwrap_or_else(|| panic!("HttpTap relays plain http:// only, not {url}"));
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        *self.target.lock().unwrap() = authority.to_owned();
        self.path = format!("/{path}");
    }

    /// The tap's base URL, `http://127.0.0.1:<port>`.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The relayed endpoint: the target's path on the tap's port.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.path)
    }

    /// Every request relayed so far, connection by connection (in the order the
    /// connections were accepted), each connection's in the order sent.
    pub fn requests(&self) -> Vec<TappedRequest> {
        let connections: Vec<Vec<u8>> = self.sent.lock().unwrap().iter().map(|c| c.lock().unwrap().clone()).collect();
        connections.iter().flat_map(|c| parse_requests(c)).collect()
    }

    /// Every request relayed so far with the response the target gave it, if complete
    /// enough to read (HTTP/1.1 answers a connection's requests in order).
    pub fn exchanges(&self) -> Vec<(TappedRequest, Option<TappedResponse>)> {
        let sent = self.sent.lock().unwrap();
        let received = self.received.lock().unwrap();
        sent.iter()
            .zip(received.iter())
            .flat_map(|(out, back)| {
                let requests = parse_requests(&out.lock().unwrap());
                let mut responses = parse_responses(&back.lock().unwrap()).into_iter();
                requests.into_iter().map(|request| (request, responses.next())).collect::<Vec<_>>()
            })
            .collect()
    }

    /// The relayed requests as text, for failure messages.
    pub fn transcript(&self) -> String {
        self.requests()
            .iter()
            .map(|r| format!("{} {} {:?} {}", r.method, r.path, r.headers, r.body))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for HttpTap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the acceptor so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Copies both ways on two threads, keeping what each side sent; each side's end of
/// stream is passed on as a half-close.
fn relay(client: TcpStream, server: TcpStream, log: Arc<Mutex<Vec<u8>>>, answers: Arc<Mutex<Vec<u8>>>) {
    let (Ok(client_read), Ok(server_read)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    std::thread::spawn(move || pump(client_read, server, Some(log)));
    std::thread::spawn(move || pump(server_read, client, Some(answers)));
}

fn pump(mut from: TcpStream, mut to: TcpStream, log: Option<Arc<Mutex<Vec<u8>>>>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if let Some(log) = &log {
                    log.lock().unwrap().extend_from_slice(&buf[..n]);
                }
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

/// Splits one connection's client bytes into HTTP/1.1 requests (`Content-Length` and
/// chunked bodies); an incomplete trailing request is left out.
fn parse_requests(mut bytes: &[u8]) -> Vec<TappedRequest> {
    let mut requests = Vec::new();
    while let Some(end) = find(bytes, b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let mut start = lines.next().unwrap_or_default().split(' ');
        let method = start.next().unwrap_or_default().to_owned();
        let path = start.next().unwrap_or_default().to_owned();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let rest = &bytes[end + 4..];
        let value = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.to_ascii_lowercase());
        let (body, used) = if value("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            match dechunk(rest) {
                Some(done) => done,
                None => break,
            }
        } else {
            let length: usize = value("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
            if rest.len() < length {
                break;
            }
            (rest[..length].to_vec(), length)
        };
        requests.push(TappedRequest {
            method,
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
            raw_body: body,
        });
        bytes = &rest[used..];
    }
    requests
}

/// Splits one connection's answer bytes into HTTP/1.1 responses. A response whose body
/// is still arriving (an open SSE stream) is the last one, with the events so far.
fn parse_responses(mut bytes: &[u8]) -> Vec<TappedResponse> {
    let mut responses = Vec::new();
    while let Some(end) = find(bytes, b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
        let mut lines = head.split("\r\n");
        let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let value = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.to_ascii_lowercase());
        let rest = &bytes[end + 4..];
        let (body, used, complete) = if value("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            match dechunk(rest) {
                Some((body, used)) => (body, used, true),
                None => (dechunk_partial(rest), rest.len(), false),
            }
        } else {
            let length: Option<usize> = value("content-length").and_then(|v| v.parse().ok());
            match length {
                Some(length) if rest.len() >= length => (rest[..length].to_vec(), length, true),
                Some(_) => (rest.to_vec(), rest.len(), false),
                // No length and not chunked: the body runs to the end of the connection.
                None if status == 204 || status == 304 || (100..200).contains(&status) => (Vec::new(), 0, true),
                None => (rest.to_vec(), rest.len(), false),
            }
        };
        let sse = value("content-type").is_some_and(|v| v.starts_with("text/event-stream"));
        let messages = if sse {
            sse_messages(&body)
        } else {
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Array(items)) => items,
                Ok(Value::Null) | Err(_) => Vec::new(),
                Ok(one) => vec![one],
            }
        };
        responses.push(TappedResponse { status, headers, messages });
        if !complete {
            break;
        }
        bytes = &rest[used..];
    }
    responses
}

/// The JSON `data:` of each complete event of an SSE body.
fn sse_messages(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body).replace("\r\n", "\n");
    let complete = text.rfind("\n\n").map_or("", |end| &text[..end]);
    complete
        .split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            (!data.is_empty()).then(|| serde_json::from_str(&data.join("\n")).ok()).flatten()
        })
        .collect()
}

/// The complete chunks of a chunked body still arriving.
fn dechunk_partial(bytes: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut at = 0;
    while let Some(line) = find(&bytes[at..], b"\r\n") {
        let size_text = String::from_utf8_lossy(&bytes[at..at + line]);
        let Some(size) = size_text.split(';').next().and_then(|s| usize::from_str_radix(s.trim(), 16).ok()) else {
            break;
        };
        let start = at + line + 2;
        if size == 0 || bytes.len() < start + size {
            break;
        }
        body.extend_from_slice(&bytes[start..start + size]);
        at = start + size + 2;
        if at > bytes.len() {
            break;
        }
    }
    body
}

/// A chunked body: its bytes and how many input bytes it took, or `None` if incomplete.
fn dechunk(bytes: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + find(&bytes[at..], b"\r\n")?;
        let size_text = String::from_utf8_lossy(&bytes[at..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            // Trailers (none expected) end with an empty line.
            let trailer_end = at + find(&bytes[at..], b"\r\n")?;
            return Some((body, trailer_end + 2));
        }
        if bytes.len() < at + size + 2 {
            return None;
        }
        body.extend_from_slice(&bytes[at..at + size]);
        at += size + 2;
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The two logs of `tests/node/stdio_tap.js`, in a temporary directory of their own.
pub struct StdioTap {
    dir: TempDir,
}

impl StdioTap {
    pub fn new() -> StdioTap {
        StdioTap { dir: TempDir::new() }
    }

    /// What the client wrote to the server's stdin.
    pub fn sent_path(&self) -> PathBuf {
        self.dir.path().join("sent.jsonl")
    }

    /// What the server wrote to its stdout.
    pub fn received_path(&self) -> PathBuf {
        self.dir.path().join("received.jsonl")
    }

    /// The JSON-RPC messages the client sent, in order.
    #[track_caller]
    pub fn sent(&self) -> Vec<Value> {
        read_lines(&self.sent_path())
    }

    /// The JSON-RPC messages the server answered with, in order.
    #[track_caller]
    pub fn received(&self) -> Vec<Value> {
        read_lines(&self.received_path())
    }

    /// Both directions as text, for failure messages.
    pub fn transcript(&self) -> String {
        let sent = std::fs::read_to_string(self.sent_path()).unwrap_or_default();
        let received = std::fs::read_to_string(self.received_path()).unwrap_or_default();
        format!("client -> mcpx serve:\n{sent}\nmcpx serve -> client:\n{received}")
    }
}

impl Default for StdioTap {
    fn default() -> Self {
        StdioTap::new()
    }
}

#[track_caller]
fn read_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: a line that is not JSON ({e}): {l}", path.display()))
        })
        .collect()
}
