//! How a message finds its answer: era selection, the legacy session, and dispatch.
//!
//! The read loop runs on the main thread and answers everything cheap inline. Every
//! `tools/call` gets its own thread, so a `slow` call never holds up the next request.
//! The only state is whether a legacy session has been opened; modern requests never read
//! or change it. With `--fixture conformance` the fixture sees each request first and
//! takes the methods it serves; the reader also hands it the client's responses (to the
//! fixture's own legacy requests) and notifications (cancelling a subscription).

use std::io::{self, BufRead};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::conformance::{Answer, Fixture};
use crate::era::{self, Era, EraMode, LEGACY_VERSIONS};
use crate::instance::Instance;
use crate::wire::{self, INTERNAL_ERROR, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, Output, RpcError};
use crate::{meta_surface, tools};

/// Behaviour switches chosen on the command line.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    pub era_mode: EraMode,
    /// Play a legacy server that ignores methods it does not know.
    pub silent_unknown: bool,
    /// Send `notifications/tools/list_changed` right after answering `initialize`.
    pub list_changed_on_init: bool,
    /// Write a stderr line before handling each message (`--flood-stderr`).
    pub flood_stderr: bool,
    /// The `ttlMs` of a 2026-07-28 `tools/list` (`--list-ttl-ms`).
    pub list_ttl_ms: u64,
}

pub struct Server {
    behaviour: Behaviour,
    instance: Arc<Instance>,
    out: Output,
    /// Set by a legacy `initialize`; legacy requests other than `ping` need it.
    legacy_session_open: bool,
    tool_calls_running: Arc<Running>,
    /// The conformance surface, when `--fixture conformance` asked for it.
    fixture: Option<Arc<Fixture>>,
}

/// How many tool-call threads have not answered yet, so shutdown can let quick ones finish.
#[derive(Default)]
struct Running {
    count: Mutex<usize>,
    changed: Condvar,
}

/// Marks one tool call as running until dropped, even if the tool thread panics.
struct RunningCall(Arc<Running>);

impl RunningCall {
    fn start(running: &Arc<Running>) -> Self {
        *running.count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        RunningCall(Arc::clone(running))
    }
}

impl Drop for RunningCall {
    fn drop(&mut self) {
        *self.0.count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.0.changed.notify_all();
    }
}

impl Server {
    pub fn new(behaviour: Behaviour, instance: Arc<Instance>, out: Output, fixture: Option<Arc<Fixture>>) -> Self {
        Server { behaviour, instance, out, legacy_session_open: false, tool_calls_running: Arc::default(), fixture }
    }

    /// Waits up to `grace` for tool calls still running. A client that writes its last
    /// request and closes stdin still gets quick answers, while a `slow` call cannot
    /// delay shutdown for long.
    pub fn finish(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        let running = &self.tool_calls_running;
        let mut count = running.count.lock().unwrap_or_else(|p| p.into_inner());
        while *count > 0 {
            let now = Instant::now();
            if now >= deadline {
                eprintln!("fakemcp {}: exiting with {} tool call(s) unanswered", self.instance.id, *count);
                return;
            }
            count = running.changed.wait_timeout(count, deadline - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Serves messages until `input` reaches end of file.
    pub fn run(&mut self, mut input: impl BufRead) -> io::Result<()> {
        let mut line = Vec::new();
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                return Ok(());
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            self.handle_line(&line);
        }
    }

    fn handle_line(&mut self, line: &[u8]) {
        if self.behaviour.flood_stderr {
            eprintln!("fakemcp {}: handling a {}-byte message", self.instance.id, line.len());
        }
        match wire::parse(line) {
            Ok(incoming) => self.handle(incoming),
            Err(rejected) => {
                eprintln!("fakemcp {}: {}", self.instance.id, rejected.error.message);
                self.out.reply(&rejected.id, Err(rejected.error));
            }
        }
    }

    /// Handles one message, however it arrived (a stdin line, an HTTP body).
    pub fn handle(&mut self, incoming: Incoming) {
        match incoming {
            Incoming::Request { id, method, params } => self.handle_request(id, &method, params),
            // Without the fixture there is no cancellable state and no request of ours to
            // answer, so notifications and responses need no action.
            Incoming::Notification { method, params } => {
                if let Some(fixture) = &self.fixture {
                    fixture.notification(&method, &params);
                }
            }
            Incoming::Response { id, outcome } => {
                if let Some(fixture) = &self.fixture {
                    fixture.response(&id, outcome);
                }
            }
        }
    }

    fn handle_request(&mut self, id: Value, method: &str, params: Value) {
        self.instance.record_request(method, &params);
        if self.behaviour.era_mode == EraMode::Modern && method == "initialize" && !era::names_protocol_version(&params)
        {
            // A modern-only server names the versions it does speak, so a legacy client
            // learns why it was refused.
            let requested = params.get("protocolVersion").cloned().unwrap_or(Value::Null);
            self.out.reply(&id, Err(era::unsupported_version(requested)));
            return;
        }
        match self.behaviour.era_mode.era_of(&params) {
            Era::Modern => self.modern_request(id, method, params),
            Era::Legacy => self.legacy_request(id, method, params),
        }
    }

    fn modern_request(&self, id: Value, method: &str, params: Value) {
        if let Err(error) = era::check_modern_request(&params) {
            self.out.reply(&id, Err(error));
            return;
        }
        if let Some(answer) = self.fixture.as_ref().and_then(|fixture| fixture.modern(&id, method, &params)) {
            return self.answer(id, answer);
        }
        if let Some(outcome) = meta_surface::answer(method, &params, true) {
            return self.out.reply(&id, outcome.map(|body| era::complete(body, &self.instance)));
        }
        let body = match method {
            "server/discover" => json!({
                "supportedVersions": [era::MODERN_VERSION],
                "capabilities": meta_surface::capabilities(),
                "ttlMs": 0,
                "cacheScope": "public",
            }),
            "tools/list" => {
                json!({"tools": self.instance.list_tools(), "ttlMs": self.behaviour.list_ttl_ms, "cacheScope": "public"})
            }
            "tools/call" => return self.spawn_tool_call(id, params, Era::Modern),
            _ => return self.unknown_method(id, method),
        };
        self.out.reply(&id, Ok(era::complete(body, &self.instance)));
    }

    fn legacy_request(&mut self, id: Value, method: &str, params: Value) {
        let needs_session = matches!(method, "tools/list" | "tools/call")
            || meta_surface::answer(method, &Value::Null, false).is_some()
            || (self.fixture.is_some() && Fixture::serves_legacy(method));
        if needs_session && !self.legacy_session_open {
            return self.out.reply(&id, Err(RpcError::new(INVALID_REQUEST, "not initialized: send initialize first")));
        }
        if let Some(answer) = self.fixture.as_ref().and_then(|fixture| fixture.legacy(method, &params)) {
            return self.answer(id, answer);
        }
        if let Some(outcome) = meta_surface::answer(method, &params, false) {
            return self.out.reply(&id, outcome);
        }
        match method {
            "initialize" => self.initialize(id, &params),
            "ping" => self.out.reply(&id, Ok(json!({}))),
            "tools/list" => self.out.reply(&id, Ok(json!({"tools": self.instance.list_tools()}))),
            "tools/call" => self.spawn_tool_call(id, params, Era::Legacy),
            _ => self.unknown_method(id, method),
        }
    }

    /// Opens the legacy session: echo a version we speak, else counter-offer the latest.
    fn initialize(&mut self, id: Value, params: &Value) {
        let latest = LEGACY_VERSIONS[LEGACY_VERSIONS.len() - 1];
        let version = params
            .get("protocolVersion")
            .and_then(Value::as_str)
            .filter(|requested| LEGACY_VERSIONS.contains(requested))
            .unwrap_or(latest);
        self.legacy_session_open = true;
        let capabilities = match &self.fixture {
            Some(fixture) => {
                fixture.opened_session(params);
                Fixture::legacy_capabilities()
            }
            None => meta_surface::capabilities(),
        };
        let result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": self.instance.server_info(),
        });
        self.out.reply(&id, Ok(result));
        if self.behaviour.list_changed_on_init {
            self.out.notify("notifications/tools/list_changed");
        }
    }

    fn unknown_method(&self, id: Value, method: &str) {
        if self.behaviour.silent_unknown {
            eprintln!("fakemcp {}: not answering unknown method {method}", self.instance.id);
            return;
        }
        self.out.reply(&id, Err(RpcError::new(METHOD_NOT_FOUND, format!("method not found: {method}"))));
    }

    fn spawn_tool_call(&self, id: Value, params: Value, era: Era) {
        if params.get("name").and_then(Value::as_str) == Some("changed") {
            // Listed before it is announced: whoever lists on hearing of it finds it.
            if let Some(added) = params.get("arguments").and_then(|a| a.get("add")).and_then(Value::as_str) {
                self.instance.add_tool(added);
            }
            self.out.notify("notifications/tools/list_changed");
        }
        if params.get("name").and_then(Value::as_str) == Some("flood") {
            self.flood(&params);
        }
        let instance = Arc::clone(&self.instance);
        self.spawn_reply(
            id,
            Box::new(move || {
                tools::call(&instance, era, &params).map(|body| match era {
                    Era::Modern => era::complete(body, &instance),
                    Era::Legacy => body,
                })
            }),
        );
    }

    /// `flood`: `count` progress notifications to the request's token, back to back.
    fn flood(&self, params: &Value) {
        let token = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
        let count = params.get("arguments").and_then(|a| a.get("count")).and_then(Value::as_u64).unwrap_or(0);
        let Some(token) = token else { return };
        for i in 0..count {
            let progress = json!({"progressToken": token, "progress": i, "total": count, "message": "flooding"});
            self.out.notify_with("notifications/progress", progress);
        }
    }

    fn answer(&self, id: Value, answer: Answer) {
        match answer {
            Answer::Now(outcome) => self.out.reply(&id, outcome),
            Answer::OnThread(work) => self.spawn_reply(id, work),
            Answer::Later => {}
        }
    }

    /// Runs `work` on its own thread and answers request `id` with what it returns.
    fn spawn_reply(&self, id: Value, work: Box<dyn FnOnce() -> Result<Value, RpcError> + Send>) {
        let out = self.out.clone();
        let running = RunningCall::start(&self.tool_calls_running);
        let spawned = thread::Builder::new().name("tools/call".into()).spawn({
            let id = id.clone();
            move || {
                let _running = running;
                out.reply(&id, work());
            }
        });
        if let Err(e) = spawned {
            self.out.reply(&id, Err(RpcError::new(INTERNAL_ERROR, format!("cannot start tool thread: {e}"))));
        }
    }
}
