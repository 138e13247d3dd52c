//! An HTTP client for the daemon's `/mcp` endpoint, in both protocol eras.
//!
//! [`Modern`] builds one self-contained 2026-07-28 request (headers mirrored from the
//! body, the required `_meta` keys filled in) and lets a test break any part of it;
//! [`LegacySession`] opens a 2025-11-25 (or older) session with `initialize` and sends
//! requests inside it. Every JSON-RPC frame the daemon writes back, as JSON or as SSE
//! `data:` lines, is checked against the schema of the request's revision before the test
//! sees it: a frame that breaks the schema fails the test on the spot.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::schema::{self, LEGACY, MODERN};

/// What a client sends in `Accept` unless a test says otherwise.
pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

/// The one HTTP client all tests share (it pools connections; no proxy, ever).
pub fn http() -> &'static reqwest::blocking::Client {
    static CLIENT: OnceLock<reqwest::blocking::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        // In a workspace-wide build reqwest is compiled with mcpx's TLS features, which
        // need a crypto provider installed even for plain-HTTP clients.
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::blocking::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("build the HTTP client")
    })
}

/// A JSON-RPC request id no other request of this test run uses.
pub fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The daemon's answer to one HTTP request.
pub struct Reply {
    pub status: u16,
    /// Header names lowercased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Every JSON-RPC frame in the body: one for a JSON reply (or a batch's elements),
    /// each `data:` event of an SSE reply. Already schema-checked.
    pub frames: Vec<Value>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }

    /// The response frame (the last frame with a `result` or an `error`).
    #[track_caller]
    pub fn frame(&self) -> &Value {
        self.frames
            .iter()
            .rev()
            .find(|f| f.get("result").is_some() || f.get("error").is_some())
            .unwrap_or_else(|| panic!("no JSON-RPC response in the reply:\n{self}"))
    }

    /// The `result` of a 200 reply; panics with the whole reply otherwise.
    #[track_caller]
    pub fn result(&self) -> &Value {
        assert_eq!(self.status, 200, "expected HTTP 200 with a result:\n{self}");
        let frame = self.frame();
        assert!(frame.get("result").is_some(), "expected a result:\n{self}");
        &frame["result"]
    }

    /// The `error` object; panics with the whole reply when there is none.
    #[track_caller]
    pub fn error(&self) -> &Value {
        let frame = self.frame();
        assert!(frame.get("error").is_some(), "expected a JSON-RPC error:\n{self}");
        &frame["error"]
    }

    #[track_caller]
    pub fn error_code(&self) -> i64 {
        self.error()["code"].as_i64().unwrap_or_else(|| panic!("error without an integer code:\n{self}"))
    }

    /// Asserts the HTTP status and the JSON-RPC error code together.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: i64) -> &Value {
        assert_eq!(self.status, status, "expected HTTP {status} with JSON-RPC error {code}:\n{self}");
        assert_eq!(self.error_code(), code, "expected HTTP {status} with JSON-RPC error {code}:\n{self}");
        self.error()
    }

    /// `structuredContent` of a successful tool result (not `isError`).
    #[track_caller]
    pub fn structured(&self) -> &Value {
        let result = self.result();
        assert_ne!(result["isError"], json!(true), "the tool call failed:\n{self}");
        assert!(result["structuredContent"].is_object(), "the tool result has no structuredContent:\n{self}");
        &result["structuredContent"]
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "HTTP {}", self.status)?;
        for (name, value) in &self.headers {
            writeln!(f, "{name}: {value}")?;
        }
        write!(f, "\n{}", self.body)
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One raw HTTP request to the endpoint; the reply's frames are checked against the
/// schema of `revision`, as answers to `method` (None: the daemon cannot know it).
pub struct Raw<'a> {
    pub http_method: &'a str,
    pub url: &'a str,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub revision: &'a str,
    pub method: Option<&'a str>,
}

impl Raw<'_> {
    #[track_caller]
    pub fn send(&self) -> Reply {
        let method = reqwest::Method::from_bytes(self.http_method.as_bytes()).expect("an HTTP method");
        let mut request = http().request(method, self.url);
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        if let Some(body) = &self.body {
            request = request.body(body.clone());
        }
        let response = request.send().unwrap_or_else(|e| panic!("{} {} failed: {e:?}", self.http_method, self.url));
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let body = response.text().unwrap_or_else(|e| panic!("reading the reply body failed: {e:?}"));
        let mut reply = Reply { status, headers, body, frames: Vec::new() };
        reply.frames = parse_frames(&reply);
        for frame in &reply.frames {
            schema::assert_frame(self.revision, self.method, frame);
        }
        reply
    }
}

/// The JSON-RPC frames of a reply, by its content type. A JSON or SSE reply that does not
/// parse fails the test; other bodies (plain-text 4xx, empty 202) carry no frames.
#[track_caller]
fn parse_frames(reply: &Reply) -> Vec<Value> {
    let content_type = reply.content_type().to_ascii_lowercase();
    let parse = |text: &str| -> Value {
        serde_json::from_str(text)
            .unwrap_or_else(|e| panic!("the daemon wrote a frame that is not JSON ({e}):\n{reply}"))
    };
    if content_type.starts_with("application/json") {
        if reply.body.trim().is_empty() {
            return Vec::new();
        }
        match parse(&reply.body) {
            Value::Array(batch) => batch,
            frame => vec![frame],
        }
    } else if content_type.starts_with("text/event-stream") {
        sse_data(&reply.body).iter().map(|data| parse(data)).collect()
    } else {
        Vec::new()
    }
}

/// The `data` of each SSE event (multi-line data joined with `\n`); events without data
/// (priming events, keep-alive comments) are skipped.
pub fn sse_data(body: &str) -> Vec<String> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    for line in body.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Some(d) = data.take().filter(|d| !d.trim().is_empty()) {
                events.push(d);
            }
        } else if let Some(value) = line.strip_prefix("data:") {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_owned()),
            }
        }
    }
    events
}

/// One modern (2026-07-28) request, correct by default; each setter breaks or extends one
/// part of it for a test.
#[derive(Clone)]
pub struct Modern {
    method: String,
    params: Map<String, Value>,
    meta: Map<String, Value>,
    id: Value,
    jsonrpc: Value,
    header_overrides: Vec<(String, Option<String>)>,
    raw_body: Option<Vec<u8>>,
}

impl Modern {
    pub fn new(method: &str, params: Value) -> Modern {
        let mut params = match params {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => panic!("params must be an object, not {other}"),
        };
        let mut meta = Map::new();
        meta.insert("io.modelcontextprotocol/protocolVersion".into(), json!(MODERN));
        meta.insert("io.modelcontextprotocol/clientCapabilities".into(), json!({}));
        meta.insert("io.modelcontextprotocol/clientInfo".into(), json!({"name": "mcpx-e2e", "version": "0"}));
        if let Some(Value::Object(extra)) = params.remove("_meta") {
            meta.extend(extra);
        }
        Modern {
            method: method.to_owned(),
            params,
            meta,
            id: json!(next_id()),
            jsonrpc: json!("2.0"),
            header_overrides: Vec::new(),
            raw_body: None,
        }
    }

    pub fn discover() -> Modern {
        Modern::new("server/discover", json!({}))
    }

    pub fn tools_list() -> Modern {
        Modern::new("tools/list", json!({}))
    }

    pub fn tools_call(name: &str, arguments: Value) -> Modern {
        Modern::new("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// `tools/call mcpx_call {server, tool, arguments}`.
    pub fn mcpx_call(server: &str, tool: &str, arguments: Value) -> Modern {
        Modern::tools_call("mcpx_call", json!({"server": server, "tool": tool, "arguments": arguments}))
    }

    /// Adds (or replaces) one `_meta` entry.
    pub fn meta(mut self, key: &str, value: Value) -> Modern {
        self.meta.insert(key.to_owned(), value);
        self
    }

    pub fn without_meta(mut self, key: &str) -> Modern {
        self.meta.shift_remove(key);
        self
    }

    /// The request's JSON-RPC id, in place of the next number.
    pub fn with_id(mut self, id: Value) -> Modern {
        self.id = id;
        self
    }

    /// Names the session: `_meta["dev.mcpx/session"]`.
    pub fn session(self, name: &str) -> Modern {
        self.meta("dev.mcpx/session", json!(name))
    }

    /// The protocol version, in the header and in `_meta` alike.
    pub fn version(self, version: &str) -> Modern {
        self.meta("io.modelcontextprotocol/protocolVersion", json!(version)).header("MCP-Protocol-Version", version)
    }

    /// Sets a header, replacing the default of that name.
    pub fn header(mut self, name: &str, value: &str) -> Modern {
        self.header_overrides.push((name.to_owned(), Some(value.to_owned())));
        self
    }

    pub fn without_header(mut self, name: &str) -> Modern {
        self.header_overrides.push((name.to_owned(), None));
        self
    }

    pub fn jsonrpc(mut self, value: Value) -> Modern {
        self.jsonrpc = value;
        self
    }

    /// Sends these bytes instead of the frame (the headers stay as built).
    pub fn raw_body(mut self, body: impl Into<Vec<u8>>) -> Modern {
        self.raw_body = Some(body.into());
        self
    }

    /// The JSON-RPC frame this request sends.
    pub fn frame(&self) -> Value {
        let mut params = self.params.clone();
        params.insert("_meta".into(), Value::Object(self.meta.clone()));
        json!({"jsonrpc": self.jsonrpc, "id": self.id, "method": self.method, "params": params})
    }

    /// The headers this request sends: the defaults, then the overrides.
    pub fn headers(&self) -> Vec<(String, String)> {
        let version =
            self.meta.get("io.modelcontextprotocol/protocolVersion").and_then(Value::as_str).unwrap_or(MODERN);
        let mut headers: Vec<(String, String)> = vec![
            ("Content-Type".into(), "application/json".into()),
            ("Accept".into(), ACCEPT_BOTH.into()),
            ("MCP-Protocol-Version".into(), version.into()),
            ("Mcp-Method".into(), self.method.clone()),
        ];
        let name = match self.method.as_str() {
            "tools/call" | "prompts/get" => self.params.get("name"),
            "resources/read" => self.params.get("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => self.params.get("taskId"),
            _ => None,
        };
        if let Some(Value::String(name)) = name {
            headers.push(("Mcp-Name".into(), name.clone()));
        }
        for (name, value) in &self.header_overrides {
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            if let Some(value) = value {
                headers.push((name.clone(), value.clone()));
            }
        }
        headers
    }

    #[track_caller]
    pub fn send(&self, url: &str) -> Reply {
        let body = self.raw_body.clone().unwrap_or_else(|| self.frame().to_string().into_bytes());
        let readable = self.raw_body.is_none() && self.jsonrpc == json!("2.0");
        Raw {
            http_method: "POST",
            url,
            headers: self.headers(),
            body: Some(body),
            revision: MODERN,
            method: readable.then_some(self.method.as_str()),
        }
        .send()
    }
}

/// A legacy (handshake-era) Streamable HTTP session, opened by `initialize`.
pub struct LegacySession {
    url: String,
    id: String,
    revision: String,
    /// Sent with every request of the session (a bearer token).
    extra: Vec<(String, String)>,
    /// The `InitializeResult`.
    pub initialized: Value,
}

impl LegacySession {
    /// Opens a 2025-11-25 session.
    #[track_caller]
    pub fn open(url: &str) -> LegacySession {
        LegacySession::open_with(url, LEGACY)
    }

    /// Opens a session asking for `revision`; asserts the daemon agrees to it, mints a
    /// session id, and accepts `notifications/initialized`.
    #[track_caller]
    pub fn open_with(url: &str, revision: &str) -> LegacySession {
        LegacySession::open_as(url, revision, &[])
    }

    /// As [`LegacySession::open_with`], sending `extra` headers (a bearer token) with
    /// `initialize` and every later request.
    #[track_caller]
    pub fn open_as(url: &str, revision: &str, extra: &[(&str, &str)]) -> LegacySession {
        let extra: Vec<(String, String)> = extra.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
        let reply = initialize_with(url, revision, &extra);
        let result = reply.result().clone();
        assert_eq!(result["protocolVersion"], json!(revision), "initialize did not agree to {revision}:\n{reply}");
        let id = reply
            .header("mcp-session-id")
            .unwrap_or_else(|| panic!("initialize minted no Mcp-Session-Id:\n{reply}"))
            .to_owned();
        assert!(
            !id.is_empty() && id.bytes().all(|b| (0x21..=0x7e).contains(&b)),
            "the session id must be visible ASCII: {id:?}"
        );
        let session =
            LegacySession { url: url.to_owned(), id, revision: revision.to_owned(), extra, initialized: result };
        let ack = session.notify("notifications/initialized", json!({}));
        assert_eq!(ack.status, 202, "notifications/initialized must be accepted with 202:\n{ack}");
        session
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The same session, its requests sent to `url` (another node of a cluster).
    pub fn via(&self, url: &str) -> LegacySession {
        LegacySession {
            url: url.to_owned(),
            id: self.id.clone(),
            revision: self.revision.clone(),
            extra: self.extra.clone(),
            initialized: self.initialized.clone(),
        }
    }

    pub fn revision(&self) -> &str {
        &self.revision
    }

    fn headers(&self) -> Vec<(String, String)> {
        let mut headers = vec![
            ("Content-Type".into(), "application/json".into()),
            ("Accept".into(), ACCEPT_BOTH.into()),
            ("Mcp-Session-Id".into(), self.id.clone()),
            ("MCP-Protocol-Version".into(), self.revision.clone()),
        ];
        headers.extend(self.extra.iter().cloned());
        headers
    }

    /// The URIs of the resources this session is listed (`resources/list`, one page).
    pub fn resource_uris(&self) -> Vec<String> {
        let listed = self.request("resources/list", json!({}));
        let resources =
            listed.result()["resources"].as_array().cloned().unwrap_or_else(|| panic!("no resources:\n{listed}"));
        resources.iter().filter_map(|r| r["uri"].as_str().map(str::to_owned)).collect()
    }

    /// The events of the session's standalone stream (`GET`), as they arrive.
    #[track_caller]
    pub fn standalone_events(&self) -> std::sync::mpsc::Receiver<Value> {
        let mut get = http().get(&self.url).header("Accept", "text/event-stream");
        for (name, value) in self.headers().iter().filter(|(n, _)| n != "Content-Type" && n != "Accept") {
            get = get.header(name, value);
        }
        let response = get.send().expect("GET the standalone stream");
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
        let (events, arrived) = std::sync::mpsc::channel::<Value>();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(response).lines() {
                let Ok(line) = line else { return };
                if let Some(data) = line.strip_prefix("data:") {
                    let _ = events.send(serde_json::from_str(data.trim()).expect("an event is JSON"));
                }
            }
        });
        arrived
    }

    /// A request inside the session.
    #[track_caller]
    pub fn request(&self, method: &str, params: Value) -> Reply {
        self.request_with(method, params, &[])
    }

    /// A request inside the session, with some headers replaced (e.g. `Accept`).
    #[track_caller]
    pub fn request_with(&self, method: &str, params: Value, headers: &[(&str, &str)]) -> Reply {
        let frame = json!({"jsonrpc": "2.0", "id": next_id(), "method": method, "params": params});
        let mut all = self.headers();
        for (name, value) in headers {
            all.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
            all.push(((*name).to_owned(), (*value).to_owned()));
        }
        Raw {
            http_method: "POST",
            url: &self.url,
            headers: all,
            body: Some(frame.to_string().into_bytes()),
            revision: schema_revision(&self.revision),
            method: Some(method),
        }
        .send()
    }

    /// A JSON-RPC batch inside the session (2025-03-26 only). Each response in the reply is
    /// checked against the result definition of the request with its id.
    #[track_caller]
    pub fn batch(&self, frames: &[Value]) -> Reply {
        let reply = Raw {
            http_method: "POST",
            url: &self.url,
            headers: self.headers(),
            body: Some(Value::Array(frames.to_vec()).to_string().into_bytes()),
            revision: schema_revision(&self.revision),
            method: None,
        }
        .send();
        for response in &reply.frames {
            let method = frames
                .iter()
                .find(|f| f.get("id").is_some() && f["id"] == response["id"])
                .and_then(|f| f["method"].as_str());
            schema::assert_frame(schema_revision(&self.revision), method, response);
        }
        reply
    }

    #[track_caller]
    pub fn notify(&self, method: &str, params: Value) -> Reply {
        let frame = json!({"jsonrpc": "2.0", "method": method, "params": params});
        Raw {
            http_method: "POST",
            url: &self.url,
            headers: self.headers(),
            body: Some(frame.to_string().into_bytes()),
            revision: schema_revision(&self.revision),
            method: Some(method),
        }
        .send()
    }

    #[track_caller]
    pub fn tools_call(&self, name: &str, arguments: Value) -> Reply {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// `tools/call mcpx_call {server, tool, arguments}`.
    #[track_caller]
    pub fn mcpx_call(&self, server: &str, tool: &str, arguments: Value) -> Reply {
        self.tools_call("mcpx_call", json!({"server": server, "tool": tool, "arguments": arguments}))
    }

    /// Ends the session with `DELETE`.
    #[track_caller]
    pub fn delete(&self) -> Reply {
        Raw {
            http_method: "DELETE",
            url: &self.url,
            headers: self.headers(),
            body: None,
            revision: schema_revision(&self.revision),
            method: None,
        }
        .send()
    }
}

/// A bare `initialize` (no session yet) asking for `revision`.
#[track_caller]
pub fn initialize(url: &str, revision: &str) -> Reply {
    initialize_with(url, revision, &[])
}

/// As [`initialize`], with `extra` headers.
#[track_caller]
pub fn initialize_with(url: &str, revision: &str, extra: &[(String, String)]) -> Reply {
    let frame = json!({
        "jsonrpc": "2.0",
        "id": next_id(),
        "method": "initialize",
        "params": {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": "mcpx-e2e", "version": "0"}
        }
    });
    Raw {
        http_method: "POST",
        url,
        headers: [
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("Accept".to_owned(), ACCEPT_BOTH.to_owned()),
        ]
        .into_iter()
        .chain(extra.iter().cloned())
        .collect(),
        body: Some(frame.to_string().into_bytes()),
        revision: schema_revision(revision),
        method: Some("initialize"),
    }
    .send()
}

/// The `notifications/resources/updated` of a standalone stream's `events` (see
/// [`LegacySession::standalone_events`]) that arrive within `within`, in order.
pub fn resource_updates(events: &std::sync::mpsc::Receiver<Value>, within: Duration) -> Vec<Value> {
    let deadline = std::time::Instant::now() + within;
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(std::time::Instant::now()) {
        match events.recv_timeout(left) {
            Ok(event) if event["method"] == "notifications/resources/updated" => seen.push(event),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    seen
}

/// The schema to check a legacy revision's frames against (the newest legacy one for a
/// revision without a schema here).
fn schema_revision(revision: &str) -> &'static str {
    schema::REVISIONS.iter().find(|r| **r == revision).copied().unwrap_or(LEGACY)
}

/// Asserts the endpoint still answers a plain modern request (`server/discover`) and a
/// `tools/list`, e.g. after a test threw bad input at it.
#[track_caller]
pub fn assert_serving(url: &str) {
    let discover = Modern::discover().send(url);
    let versions = &discover.result()["supportedVersions"];
    assert!(
        versions.as_array().is_some_and(|v| v.contains(&json!(MODERN))),
        "server/discover must list {MODERN}:\n{discover}"
    );
    let tools = Modern::tools_list().send(url);
    assert!(tools.result()["tools"].is_array(), "tools/list has no tools:\n{tools}");
}

/// The answer to a plain (non-MCP) HTTP request, e.g. to the `/v1` API over TCP.
pub struct PlainReply {
    pub status: u16,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl PlainReply {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("the body is not JSON ({e}):\n{self}"))
    }
}

impl fmt::Display for PlainReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "HTTP {}", self.status)?;
        for (name, value) in &self.headers {
            writeln!(f, "{name}: {value}")?;
        }
        write!(f, "\n{}", self.body)
    }
}

impl fmt::Debug for PlainReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// One HTTP request whose answer is not MCP (so no frame is schema-checked).
#[track_caller]
pub fn plain(http_method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> PlainReply {
    let method = reqwest::Method::from_bytes(http_method.as_bytes()).expect("an HTTP method");
    let mut request = http().request(method, url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(body) = body {
        request = request.header("Content-Type", "application/json").body(body.to_owned());
    }
    let response = request.send().unwrap_or_else(|e| panic!("{http_method} {url} failed: {e:?}"));
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    let body = response.text().unwrap_or_default();
    PlainReply { status, headers, body }
}

/// The daemon's base URL (`http://127.0.0.1:PORT`) from its `/mcp` URL.
pub fn base_url(mcp_url: &str) -> &str {
    mcp_url.strip_suffix("/mcp").unwrap_or(mcp_url)
}
