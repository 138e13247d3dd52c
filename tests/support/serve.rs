//! `mcpx serve` driven the way an agent host drives it: a child process whose stdin takes
//! one JSON-RPC message per line, and whose stdout a thread reads line by line.
//!
//! Every line `mcpx serve` writes must be one JSON-RPC message: it is parsed and checked
//! against the schema of the revision of the request it answers (2026-07-28 for a request
//! carrying the modern `_meta`, the negotiated revision after `initialize`) before a test
//! sees it. A request written to stdout outside a handshake-era session fails the test.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Modern, next_id};
use crate::fixtures::Whoami;
use crate::home::{Home, tail};
use crate::process::{TempDir, poll, signal};
use crate::schema::{self, LEGACY, MODERN};

/// How long a request waits for its answer by default.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// How to start one `mcpx serve`: `home.serve().session("a").cwd(dir).start()`.
pub struct ServeOptions<'a> {
    home: &'a Home,
    session: Option<String>,
    cwd: Option<PathBuf>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    with_config: bool,
}

impl Home {
    /// `mcpx serve --config <this home's config>`, from the home's root, with no
    /// `MCPX_SESSION_ID` unless the options set one.
    pub fn serve(&self) -> ServeOptions<'_> {
        ServeOptions { home: self, session: None, cwd: None, args: Vec::new(), env: Vec::new(), with_config: true }
    }
}

impl ServeOptions<'_> {
    /// `MCPX_SESSION_ID` for the process.
    pub fn session(mut self, session: &str) -> Self {
        self.session = Some(session.to_owned());
        self
    }

    /// The process's working directory.
    pub fn cwd(mut self, dir: &Path) -> Self {
        self.cwd = Some(dir.to_owned());
        self
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Leaves out `--config` (a daemon must already run, or none is configured).
    pub fn without_config(mut self) -> Self {
        self.with_config = false;
        self
    }

    #[track_caller]
    pub fn start(self) -> Serve {
        let dir = TempDir::new();
        let stderr_path = dir.path().join("serve.stderr");
        let mut command = self.home.mcpx();
        command.arg("serve");
        if self.with_config {
            command.arg("--config").arg(self.home.config_path());
        }
        command.args(&self.args);
        if let Some(session) = &self.session {
            command.env("MCPX_SESSION_ID", session);
        }
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        for (name, value) in &self.env {
            command.env(name, value);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(File::create(&stderr_path).expect("create serve's stderr file"));
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start mcpx serve: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(line) => {
                        if tx.send(line).is_err() {
                            return;
                        }
                    }
                    Err(_) => return,
                }
            }
        });
        Serve {
            child,
            stdin,
            lines,
            stdout_closed: false,
            stderr_path,
            pending: HashMap::new(),
            legacy: None,
            buffered: VecDeque::new(),
            _dir: dir,
        }
    }
}

/// A running `mcpx serve`, owned by one test (killed on drop).
pub struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stdout_closed: bool,
    stderr_path: PathBuf,
    /// Requests sent and not answered yet: id (as JSON text) → (revision, method).
    /// Requests sent and not yet answered, by id; a test may send one id twice.
    pending: HashMap<String, Vec<(String, String)>>,
    /// The revision `initialize` settled, once it did.
    legacy: Option<String>,
    /// Frames read (and checked) while waiting for another answer.
    buffered: VecDeque<Value>,
    _dir: TempDir,
}

/// The answer to one request, and the notifications that arrived while waiting for it.
pub struct Answer {
    pub frame: Value,
    pub notifications: Vec<Value>,
}

impl Answer {
    #[track_caller]
    pub fn result(&self) -> &Value {
        assert!(self.frame.get("result").is_some(), "expected a result:\n{self}");
        &self.frame["result"]
    }

    #[track_caller]
    pub fn error(&self) -> &Value {
        assert!(self.frame.get("error").is_some(), "expected a JSON-RPC error:\n{self}");
        &self.frame["error"]
    }

    /// `structuredContent` of a successful tool result.
    #[track_caller]
    pub fn structured(&self) -> &Value {
        let result = self.result();
        assert_ne!(result["isError"], json!(true), "the tool call failed:\n{self}");
        assert!(result["structuredContent"].is_object(), "the tool result has no structuredContent:\n{self}");
        &result["structuredContent"]
    }

    /// A successful fakemcp `whoami`.
    #[track_caller]
    pub fn whoami(&self) -> Whoami {
        Whoami::from_structured(self.structured())
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", serde_json::to_string_pretty(&self.frame).unwrap_or_default())?;
        for n in &self.notifications {
            write!(f, "\n(notification) {n}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serve {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process has logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// Writes one message (one line). Requests are remembered so their answers can be
    /// checked against the right schema.
    #[track_caller]
    pub fn send(&mut self, frame: &Value) {
        if let (Some(id), Some(method)) = (frame.get("id"), frame["method"].as_str()) {
            let modern = frame["params"]["_meta"].get("io.modelcontextprotocol/protocolVersion").is_some();
            let revision = if modern {
                MODERN.to_owned()
            } else if method == "initialize" {
                frame["params"]["protocolVersion"].as_str().unwrap_or(LEGACY).to_owned()
            } else {
                self.legacy.clone().unwrap_or_else(|| LEGACY.to_owned())
            };
            self.pending.entry(id.to_string()).or_default().push((revision, method.to_owned()));
        }
        self.send_line(&frame.to_string());
    }

    /// Writes a raw line (plus the newline).
    #[track_caller]
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin was closed");
        stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("writing to mcpx serve failed: {e}\nstderr:\n{}", self.stderr()));
    }

    /// Closes stdin (EOF), as a host does when it is done.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next message `mcpx serve` writes, checked, or `None` after `timeout` or at EOF.
    #[track_caller]
    pub fn next_frame(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(frame) = self.buffered.pop_front() {
            return Some(frame);
        }
        self.read_frame(timeout)
    }

    #[track_caller]
    fn read_frame(&mut self, timeout: Duration) -> Option<Value> {
        if self.stdout_closed {
            return None;
        }
        let line = match self.lines.recv_timeout(timeout) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => return None,
            Err(RecvTimeoutError::Disconnected) => {
                self.stdout_closed = true;
                return None;
            }
        };
        let frame: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("mcpx serve wrote a line that is not JSON ({e}): {line:?}"));
        self.check(&frame);
        Some(frame)
    }

    /// Schema-checks a frame from stdout as the answer to the request it names.
    #[track_caller]
    fn check(&mut self, frame: &Value) {
        let is_response = frame.get("result").is_some() || frame.get("error").is_some();
        if is_response {
            let key = frame.get("id").map(Value::to_string).unwrap_or_default();
            let sent = self.pending.get_mut(&key).and_then(|sent| sent.pop());
            if self.pending.get(&key).is_some_and(Vec::is_empty) {
                self.pending.remove(&key);
            }
            match sent {
                Some((revision, method)) => {
                    schema::assert_frame(schema_revision(&revision), Some(&method), frame);
                    if method == "initialize"
                        && let Some(v) = frame["result"]["protocolVersion"].as_str()
                    {
                        self.legacy = Some(v.to_owned());
                    }
                }
                None if frame["id"].is_null() => {
                    let revision = self.legacy.clone().unwrap_or_else(|| LEGACY.to_owned());
                    schema::assert_frame(schema_revision(&revision), None, frame);
                }
                None => panic!("mcpx serve answered a request it was never sent: {frame}"),
            }
        } else if frame.get("id").is_some() && frame.get("method").is_some() {
            let Some(revision) = self.legacy.clone() else {
                panic!("mcpx serve wrote a request to a client that opened no handshake-era session: {frame}");
            };
            schema::spec(schema_revision(&revision)).assert_valid(
                "JSONRPCRequest",
                frame,
                "a server-to-client request",
            );
        } else {
            // A notification belongs to a request still in flight; check it against the
            // newest revision in use.
            let revision = if self.pending.values().flatten().any(|(r, _)| r == MODERN) {
                MODERN.to_owned()
            } else {
                self.legacy.clone().unwrap_or_else(|| MODERN.to_owned())
            };
            schema::assert_frame(schema_revision(&revision), None, frame);
        }
    }

    /// Waits for the answer to request `id`; other answers are kept for later, and the
    /// notifications seen meanwhile come with it.
    #[track_caller]
    pub fn answer(&mut self, id: &Value, timeout: Duration) -> Answer {
        self.try_answer(id, timeout).unwrap_or_else(|| {
            panic!("no answer to request {id} within {timeout:?}; stderr of mcpx serve:\n{}", tail(&self.stderr(), 40))
        })
    }

    /// As [`Serve::answer`], `None` when none came in time (or stdout ended).
    #[track_caller]
    pub fn try_answer(&mut self, id: &Value, timeout: Duration) -> Option<Answer> {
        let is_answer = |f: &Value| f.get("id") == Some(id) && (f.get("result").is_some() || f.get("error").is_some());
        if let Some(i) = self.buffered.iter().position(is_answer) {
            let frame = self.buffered.remove(i).expect("found above");
            return Some(Answer { frame, notifications: Vec::new() });
        }
        let deadline = Instant::now() + timeout;
        let mut notifications = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = self.read_frame(left)?;
            if is_answer(&frame) {
                return Some(Answer { frame, notifications });
            }
            if frame.get("id").is_none() {
                notifications.push(frame);
            } else {
                self.buffered.push_back(frame);
            }
        }
    }

    /// Sends a request and waits for its answer.
    #[track_caller]
    pub fn request(&mut self, frame: &Value) -> Answer {
        self.send(frame);
        self.answer(&frame["id"], ANSWER_TIMEOUT)
    }

    /// A modern (2026-07-28) `tools/call mcpx_call {server, tool, arguments}`.
    #[track_caller]
    pub fn call(&mut self, server: &str, tool: &str, arguments: Value) -> Answer {
        self.request(&Modern::mcpx_call(server, tool, arguments).frame())
    }

    /// A modern `whoami` of `server`.
    #[track_caller]
    pub fn whoami(&mut self, server: &str) -> Whoami {
        self.call(server, "whoami", json!({})).whoami()
    }

    /// Opens a handshake-era session: `initialize` asking for `revision`, then
    /// `notifications/initialized`. Returns the `InitializeResult`.
    #[track_caller]
    pub fn initialize(&mut self, revision: &str) -> Value {
        let frame = json!({
            "jsonrpc": "2.0", "id": next_id(), "method": "initialize",
            "params": {
                "protocolVersion": revision,
                "capabilities": {},
                "clientInfo": {"name": "mcpx-e2e", "version": "0"}
            }
        });
        let answer = self.request(&frame);
        let result = answer.result().clone();
        assert_eq!(result["protocolVersion"], json!(revision), "initialize did not agree to {revision}:\n{answer}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        result
    }

    /// A handshake-era request (no modern `_meta`), inside the session `initialize` opened.
    #[track_caller]
    pub fn legacy_request(&mut self, method: &str, params: Value) -> Answer {
        self.request(&legacy_frame(method, params))
    }

    /// Waits for the process to exit.
    pub fn wait(&mut self, timeout: Duration) -> Option<ExitStatus> {
        poll(timeout, || self.child.try_wait().ok().flatten())
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        signal(self.child.id(), libc::SIGKILL);
        let _ = self.child.wait();
    }
}

/// A handshake-era request frame with a fresh id.
pub fn legacy_frame(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": next_id(), "method": method, "params": params})
}

fn schema_revision(revision: &str) -> &'static str {
    schema::REVISIONS.iter().find(|r| **r == revision).copied().unwrap_or(LEGACY)
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.stdin = None;
            signal(self.child.id(), libc::SIGKILL);
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- mcpx serve (pid {}) stderr, last 40 lines ----\n{}\n----",
                self.child.id(),
                tail(&self.stderr(), 40)
            );
        }
    }
}
