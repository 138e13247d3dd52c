//! Real upstreams and badly behaved ones, as `mcpServers` entries: the reference
//! `server-everything` (Node, handshake era only), `mcp-server-git` (Python SDK), a stdio
//! server that lists tool definitions verbatim, a junk-printing wrapper, and an HTTP server
//! that cuts its reply streams. Also a raw HTTP request whose response a test can drop
//! half-read (how a 2026 caller cancels).

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::process::{TempDir, free_port, poll};
use crate::tap::StdioTap;
use crate::{node, paths, python, schema};

/// The pinned version (`NODE_PINS` in scripts/deps.sh).
pub const EVERYTHING_VERSION: &str = "2026.8.31";
pub const EVERYTHING_PACKAGE: &str = "@modelcontextprotocol/server-everything";

/// `server-everything`'s entry point (`dist/index.js`), installed by scripts/deps.sh.
#[track_caller]
pub fn everything_index() -> PathBuf {
    let index = node::deps().join("node_modules").join(EVERYTHING_PACKAGE).join("dist/index.js");
    assert!(
        index.is_file(),
        "{} is missing: scripts/deps.sh should have installed {EVERYTHING_PACKAGE}@{EVERYTHING_VERSION}",
        index.display()
    );
    assert_eq!(
        node::installed_version(EVERYTHING_PACKAGE),
        EVERYTHING_VERSION,
        "the installed {EVERYTHING_PACKAGE} is not the pinned one"
    );
    index
}

/// A `mcpServers` entry running `server-everything` over stdio on Node 22 (`tag` is an
/// extra argument it ignores, so a test can find its processes).
pub fn everything(tag: &str) -> Value {
    json!({
        "command": node::node(),
        "args": [everything_index(), "stdio", tag],
    })
}

/// As [`everything`], behind `tests/node/stdio_tap.js`, which logs every line mcpx sends
/// it (`tap.sent()`) and every line it answers (`tap.received()`).
pub fn everything_tapped(tap: &StdioTap, tag: &str) -> Value {
    tapped(tap, &everything(tag))
}

/// A stdio `mcpServers` entry (`command`, `args`, and any other keys) put behind
/// `tests/node/stdio_tap.js`, which logs what mcpx sends it and what it answers.
#[track_caller]
pub fn tapped(tap: &StdioTap, server: &Value) -> Value {
    let mut tapped = server.clone();
    let mut args = vec![
        json!(node::script("stdio_tap.js")),
        json!(tap.sent_path()),
        json!(tap.received_path()),
        server["command"].clone(),
    ];
    args.extend(server["args"].as_array().cloned().unwrap_or_default());
    tapped["command"] = json!(node::node());
    tapped["args"] = Value::Array(args);
    tapped
}

/// A `mcpServers` entry running the real `mcp-server-git --repository <repo>`.
pub fn git_server(repo: &Path) -> Value {
    json!({
        "command": python::venv_bin("mcp-server-git"),
        "args": ["--repository", repo],
    })
}

/// `tests/python/<name>`.
pub fn python_script(name: &str) -> PathBuf {
    paths::repo_root().join("tests/python").join(name)
}

/// A `mcpServers` entry running `tests/python/verbatim_tools_server.py` over the fixture
/// file `tools_file` (`{"tools": [...], "result": {...}}`) in `era` (`legacy`|`modern`).
pub fn verbatim_tools(tools_file: &Path, era: &str, tag: &str) -> Value {
    json!({
        "command": python::venv_bin("python"),
        "args": [python_script("verbatim_tools_server.py"), tools_file, era, "--tag", tag],
    })
}

/// A `mcpServers` entry running `fakemcp --tag <tag>` behind `tests/python/junk_stdout.py`,
/// which prints junk lines first and one junk line before every frame (with `non_utf8`,
/// one of the first lines is not UTF-8).
pub fn fakemcp_with_junk(tag: &str, non_utf8: bool) -> Value {
    let mut args = vec![json!(python_script("junk_stdout.py"))];
    if non_utf8 {
        args.push(json!("--non-utf8"));
    }
    args.extend([json!(paths::fakemcp()), json!("--tag"), json!(tag)]);
    json!({"command": python::venv_bin("python"), "args": args})
}

/// A `mcpServers` entry running `fakemcp --tag <tag>` behind
/// `tests/python/id_in_the_middle.py`, which writes the id of every answer between its
/// result and `"jsonrpc"`.
pub fn fakemcp_id_in_the_middle(tag: &str) -> Value {
    json!({
        "command": python::venv_bin("python"),
        "args": [python_script("id_in_the_middle.py"), paths::fakemcp(), "--tag", tag],
    })
}

/// A server over HTTP on a free loopback port (a Python script, `script PORT args...`, or
/// server-everything), killed on drop; its stdout and stderr go to a log shown when the
/// test fails.
pub struct ScriptServer {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: TempDir,
}

impl ScriptServer {
    /// `tests/python/http_server.py PORT`: the real Python-SDK server over HTTP.
    #[track_caller]
    pub fn python_sdk() -> ScriptServer {
        ScriptServer::start("http_server.py", &[])
    }

    /// `tests/python/cut_stream_server.py PORT <era>`.
    #[track_caller]
    pub fn cut_stream(era: &str) -> ScriptServer {
        ScriptServer::start("cut_stream_server.py", &[era])
    }

    /// Starts `tests/python/<script> PORT args...` and waits (up to 30 s) until it accepts
    /// connections.
    #[track_caller]
    pub fn start(script: &str, args: &[&str]) -> ScriptServer {
        let script = python_script(script);
        let port = free_port();
        let mut command = Command::new(python::venv_bin("python"));
        command.arg(&script).arg(port.to_string()).args(args);
        ScriptServer::launch(command, port, &script.display().to_string())
    }

    /// `server-everything streamableHttp` (2025-11-25 only) on Node 22, on a free port.
    #[track_caller]
    pub fn everything_http() -> ScriptServer {
        let port = free_port();
        let mut command = Command::new(node::node());
        command.arg(everything_index()).arg("streamableHttp").env("PORT", port.to_string());
        ScriptServer::launch(command, port, "server-everything streamableHttp")
    }

    #[track_caller]
    fn launch(mut command: Command, port: u16, what: &str) -> ScriptServer {
        let dir = TempDir::new();
        let log = dir.path().join("server.log");
        let file = std::fs::File::create(&log).expect("create the server log");
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone the log file"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let mut server = ScriptServer { child, port, log, _dir: dir };
        let up = poll(Duration::from_secs(30), || {
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("{what} exited with {status}:\n{}", server.log());
            }
            TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
        });
        assert!(up.is_some(), "{what} did not listen on {port} within 30 s:\n{}", server.log());
        server
    }

    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ScriptServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- script server log ----\n{}\n----", self.log());
        }
    }
}

/// An HTTP POST written by hand on its own TCP connection, whose response the test reads
/// line by line and may abandon at any point: dropping it closes the connection, which
/// is how a 2026 caller cancels a request.
pub struct RawPost {
    reader: BufReader<TcpStream>,
    /// The revision and method every frame read is schema-checked as.
    revision: &'static str,
    method: String,
    /// The status line and header lines as received (without line ends).
    pub head: Vec<String>,
    /// Every body line read so far (a chunked body is de-chunked first).
    pub lines: Vec<String>,
    /// Body bytes read but not yet split into lines.
    pending: Vec<u8>,
    chunked: bool,
    /// The body has ended (last chunk, or the connection closed).
    done: bool,
}

impl RawPost {
    /// Sends `body` (a JSON-RPC request of `revision`) to `url` (`http://127.0.0.1:P/path`)
    /// with `headers`, and reads the response head.
    #[track_caller]
    pub fn send(url: &str, revision: &'static str, headers: &[(String, String)], body: &Value) -> RawPost {
        let method = body["method"].as_str().expect("a request frame").to_owned();
        let body = body.to_string();
        let rest = url.strip_prefix("http://").expect("an http:// URL");
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let stream = TcpStream::connect(authority).unwrap_or_else(|e| panic!("cannot connect to {authority}: {e}"));
        stream.set_read_timeout(Some(Duration::from_secs(30))).expect("set a read timeout");
        let mut request = format!("POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\n", body.len());
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("Connection: close\r\n\r\n");
        request.push_str(&body);
        (&stream).write_all(request.as_bytes()).expect("write the request");
        let mut post = RawPost {
            reader: BufReader::new(stream),
            revision,
            method,
            head: Vec::new(),
            lines: Vec::new(),
            pending: Vec::new(),
            chunked: false,
            done: false,
        };
        loop {
            let line = post
                .raw_line()
                .unwrap_or_else(|| panic!("the connection closed in the response head: {:?}", post.head));
            if line.is_empty() {
                break;
            }
            post.head.push(line);
        }
        post.chunked = post.head.iter().any(|h| {
            let h = h.to_ascii_lowercase();
            h.starts_with("transfer-encoding:") && h.contains("chunked")
        });
        post
    }

    /// One line of the connection (head or chunk framing), without its line end.
    fn raw_line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
        }
    }

    /// Reads more of the body into `pending`; false once the body has ended.
    fn fill(&mut self) -> bool {
        if self.done {
            return false;
        }
        if !self.chunked {
            let mut buf = [0u8; 4096];
            match std::io::Read::read(&mut self.reader, &mut buf) {
                Ok(0) | Err(_) => self.done = true,
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
            }
            return !self.done;
        }
        let size =
            self.raw_line().and_then(|l| usize::from_str_radix(l.split(';').next().unwrap_or("").trim(), 16).ok());
        match size {
            None | Some(0) => {
                self.done = true;
                false
            }
            Some(size) => {
                let mut chunk = vec![0u8; size + 2];
                if std::io::Read::read_exact(&mut self.reader, &mut chunk).is_err() {
                    self.done = true;
                    return false;
                }
                self.pending.extend_from_slice(&chunk[..size]);
                true
            }
        }
    }

    /// The status code of the response.
    pub fn status(&self) -> u16 {
        self.head.first().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0)
    }

    /// The next line of the body (a last line without a line end counts), or `None` at
    /// its end.
    fn read_line(&mut self) -> Option<String> {
        loop {
            if let Some(at) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=at).collect();
                let line = String::from_utf8_lossy(&line);
                return Some(line.trim_end_matches(['\r', '\n']).to_owned());
            }
            if !self.fill() {
                if self.pending.is_empty() {
                    return None;
                }
                let line: Vec<u8> = std::mem::take(&mut self.pending);
                return Some(String::from_utf8_lossy(&line).into_owned());
            }
        }
    }

    /// Reads body lines until one of them is an SSE `data:` line whose JSON satisfies
    /// `wanted`; returns that JSON. Panics when the stream ends or `timeout` passes first.
    #[track_caller]
    pub fn read_until(&mut self, timeout: Duration, wanted: impl Fn(&Value) -> bool) -> Value {
        match self.try_read_until(timeout, wanted) {
            Some(frame) => frame,
            None => panic!("no wanted event within {timeout:?}; head: {:?}; body so far: {:?}", self.head, self.lines),
        }
    }

    /// As [`read_until`](Self::read_until), `None` when no wanted event came in time.
    #[track_caller]
    pub fn try_read_until(&mut self, timeout: Duration, wanted: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let _ = self.reader.get_ref().set_read_timeout(Some(left.max(Duration::from_millis(1))));
            let Some(frame) = self.next_frame() else {
                break;
            };
            if wanted(&frame) {
                return Some(frame);
            }
        }
        None
    }

    /// Reads the rest of the response to its end (the request asks the server to close
    /// the connection after it); returns the JSON frames of its SSE `data:` lines, each
    /// schema-checked.
    #[track_caller]
    pub fn rest(&mut self) -> Vec<Value> {
        let _ = self.reader.get_ref().set_read_timeout(Some(Duration::from_secs(30)));
        std::iter::from_fn(|| self.next_frame()).collect()
    }

    /// The next SSE `data:` line's frame, schema-checked (a data line that is not JSON
    /// fails the test); `None` at the end of the body.
    #[track_caller]
    fn next_frame(&mut self) -> Option<Value> {
        loop {
            let line = self.read_line()?;
            self.lines.push(line.clone());
            let Some(data) = line.strip_prefix("data:").map(str::trim) else {
                continue;
            };
            if data.is_empty() {
                continue;
            }
            let frame: Value = serde_json::from_str(data)
                .unwrap_or_else(|e| panic!("the daemon wrote an event that is not JSON ({e}): {line}"));
            schema::assert_frame(self.revision, Some(&self.method), &frame);
            return Some(frame);
        }
    }
}

/// The text of the first content block of a successful tool result.
#[track_caller]
pub fn first_text(result: &Value) -> &str {
    assert_ne!(result["isError"], json!(true), "the tool call failed: {result}");
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a result without a text block: {result}"))
}

/// The values of `field` of every element of `result[list]`, in order.
#[track_caller]
pub fn field_of_each<'a>(result: &'a Value, list: &str, field: &str) -> Vec<&'a str> {
    result[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} array in {result}"))
        .iter()
        .map(|item| item[field].as_str().unwrap_or_else(|| panic!("an element of {list} without {field}: {item}")))
        .collect()
}

/// Decodes standard base64 (with or without padding); panics on anything else.
#[track_caller]
pub fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0u32);
    for byte in text.bytes().filter(|b| *b != b'=') {
        let value = ALPHABET.iter().position(|a| *a == byte).unwrap_or_else(|| panic!("not base64: {text:?}")) as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    out
}

/// What a tapped stdio upstream was sent and answered for one request: the first request
/// mcpx sent with `method` for which `wanted` holds, and the upstream's response to it
/// (`None` if it has not answered, yet or at all).
#[track_caller]
pub fn upstream_exchange(
    tap: &StdioTap,
    method: &str,
    wanted: impl Fn(&Value) -> bool,
) -> Option<(Value, Option<Value>)> {
    let request = tap.sent().into_iter().find(|f| f["method"] == method && f.get("id").is_some() && wanted(f))?;
    let response = tap.received().into_iter().find(|f| f["id"] == request["id"] && f.get("method").is_none());
    Some((request, response))
}

/// The fixture of `tests/python/verbatim_tools_server.py`: tool definitions carrying
/// fields mcpx does not know, and a call result with extra fields, for the pass-through
/// tests of both caller eras.
pub mod verbatim {
    use std::path::{Path, PathBuf};

    use serde_json::{Value, json};

    use super::verbatim_tools;
    use crate::process::tag;

    /// The tools the upstream lists (and so what a caller must see), and what a call returns.
    pub fn fixture() -> Value {
        json!({
            "tools": [
                {
                    "name": "odd",
                    "title": "A tool with fields mcpx does not know",
                    "description": "Lists everything a tool definition may carry, and more.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {
                            "q": {"type": "string", "x-vendor-widget": "textarea", "examples": ["ü", "✓"]},
                            "n": {"type": "integer", "minimum": 0, "default": 3}
                        },
                        "required": ["q"],
                        "additionalProperties": false,
                        "x-vendor-schema": {"version": 2}
                    },
                    "outputSchema": {
                        "type": "object",
                        "properties": {"echoed": {"type": "string"}, "count": {"type": "integer"}},
                        "required": ["echoed"]
                    },
                    "annotations": {
                        "readOnlyHint": true,
                        "openWorldHint": false,
                        "x-vendor-annotation": {"nested": [1, 2, {"deep": null}]}
                    },
                    "execution": {"taskSupport": "optional"},
                    "icons": [{"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png", "sizes": ["16x16"]}],
                    "_meta": {"com.example/owner": "team-a", "com.example/flags": {"beta": true, "weight": 0.25}},
                    "x-vendor": {"tier": "gold", "list": [1, "two", null, 3.5, false], "unicode": "ünïcödé ✓"},
                    "futureField": 42
                },
                {
                    "name": "plain",
                    "description": "Nothing unusual.",
                    "inputSchema": {"type": "object"}
                }
            ],
            "result": {
                "content": [{"type": "text", "text": "{\"echoed\":\"x\",\"count\":1}", "x-block-extra": "kept"}],
                "structuredContent": {"echoed": "x", "count": 1},
                "isError": false,
                "_meta": {"com.example/trace": "abc-123"},
                "x-result-extra": {"kept": [true]}
            }
        })
    }

    /// Writes the fixture into `dir` and returns its path.
    pub fn write_fixture(dir: &Path) -> PathBuf {
        let path = dir.join("tools.json");
        std::fs::write(&path, fixture().to_string()).expect("write the tool fixture");
        path
    }

    /// Two copies of the server, one per era, both exposed.
    pub fn config(tools: &Path) -> Value {
        let t = tag();
        json!({
            "mcpServers": {
                "old": verbatim_tools(tools, "legacy", &t),
                "new": verbatim_tools(tools, "modern", &t),
            },
            "expose": ["old", "new"],
        })
    }

    /// Asserts `listed` holds each fixture tool as `<server>__<name>`, every other field equal.
    #[track_caller]
    pub fn assert_listed_verbatim(listed: &Value, server: &str) {
        let tools = listed["tools"].as_array().unwrap_or_else(|| panic!("no tools: {listed}"));
        for original in fixture()["tools"].as_array().unwrap() {
            let name = format!("{server}__{}", original["name"].as_str().unwrap());
            let relayed = tools
                .iter()
                .find(|t| t["name"] == name.as_str())
                .unwrap_or_else(|| panic!("{name} is not listed: {listed}"));
            let mut expected = original.clone();
            expected["name"] = json!(name);
            assert_eq!(*relayed, expected, "{name} must reach the caller exactly as {server} listed it (only renamed)");
        }
    }

    /// The fixture's call result, less `_meta` keys under `io.modelcontextprotocol/` (each
    /// hop names itself there) and `resultType` (the 2026 envelope).
    pub fn comparable(result: &Value) -> Value {
        let mut result = result.clone();
        let object = result.as_object_mut().expect("a result object");
        object.remove("resultType");
        if let Some(Value::Object(meta)) = object.get_mut("_meta") {
            meta.retain(|k, _| !k.starts_with("io.modelcontextprotocol/"));
        }
        result
    }
}
