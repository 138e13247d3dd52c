//! `mcpx_exec`: how a script's requests reach tools. The script runs in `mcpx-exec`'s
//! sandbox; every tool it calls is routed here as if its caller had called it, with the
//! caller's identity and the exec's call id, so a script reaches exactly the instances
//! (and only the servers) its caller could.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use mcpx_exec::{Ended, Event, HostCall, Limits, Outcome};
use mcpx_protocol::message;

use crate::error::Error;
use serde_json::{Map, Value, json};

use crate::artifacts::Artifact;
use crate::policy::Access;
use crate::{CallContext, Gateway, journal, search};

pub use crate::EXEC;

/// The `mcpx_exec` definition: what a model may write, with one example.
pub fn definition() -> Value {
    json!({
        "name": EXEC,
        "title": "Run a script that calls tools",
        "description": concat!(
            "Run a short JavaScript program (the body of an async function) that calls the tools of the MCP servers behind mcpx and returns only what matters. ",
            "In scope: `await tools.<server>.<tool>(args)` (names as mcpx_search shows them in `js`), `await call(\"server\", \"tool\", args)`, ",
            "`await search(\"words\")` (the same list as mcpx_search), `await artifact(name, data, mimeType?)` (keeps text, bytes or JSON for this session and returns an mcpx://artifacts/ URI), and `console.log`. ",
            "A tool's result arrives as its structuredContent, else its text (parsed when it is JSON); a tool error throws an Error with `server`, `tool` and `content`. ",
            "`return` a value: objects come back as structured content, anything else as text. ",
            "There is no filesystem, network, process, environment or module access, and time, memory and the number of tool calls are limited.\n\n",
            "Example:\n",
            "const [a, b] = await Promise.all([tools.git.git_status({ repo_path: \".\" }), tools.time.get_current_time({ timezone: \"UTC\" })]);\n",
            "return { clean: !a.includes(\"modified\"), at: b.datetime };"
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "script": { "type": "string", "description": "The body of an async function: use await anywhere and return the result." },
                "timeoutMs": { "type": "integer", "minimum": 1, "description": "Stop the script after this long (capped by the daemon's setting exec.timeout)." }
            },
            "required": ["script"]
        },
        "annotations": { "openWorldHint": true }
    })
}

/// Counts scripts running now, against `exec.maxConcurrent`.
#[derive(Default)]
pub(crate) struct Running(AtomicUsize);

struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Running {
    /// Scripts running now.
    pub(crate) fn now(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn enter(&self, max: usize) -> Option<Slot<'_>> {
        let before = self.0.fetch_add(1, Ordering::Relaxed);
        let slot = Slot(&self.0);
        (before < max).then_some(slot)
    }
}

impl Gateway {
    /// Runs an `mcpx_exec` for the caller in `ctx` and builds its tool result.
    pub(crate) async fn exec(&self, ctx: &CallContext, arguments: &Value) -> Result<Value, Error> {
        let script = match arguments.get("script") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            _ => return Err(Error::params(format!("{EXEC}: \"script\" must be a non-empty string"))),
        };
        let config = self.settings.config();
        let mut timeout = config.exec.timeout;
        match arguments.get("timeoutMs") {
            None | Some(Value::Null) => {}
            Some(v) => match v.as_u64().filter(|ms| *ms > 0) {
                Some(ms) => timeout = timeout.min(Duration::from_millis(ms)),
                None => {
                    return Err(Error::params(format!("{EXEC}: \"timeoutMs\" must be a positive integer")));
                }
            },
        }
        let Some(_slot) = self.running_scripts.enter(config.exec.max_concurrent) else {
            return Err(Error::Limit {
                message: format!(
                    "{EXEC}: {} scripts are already running (setting exec.maxConcurrent); try again when one ends",
                    config.exec.max_concurrent
                ),
                setting: "exec.maxConcurrent",
                limit: config.exec.max_concurrent,
            });
        };
        let limits = Limits {
            timeout,
            memory_bytes: config.exec.memory_bytes,
            stack_bytes: config.exec.stack_bytes,
            max_tool_calls: config.exec.max_tool_calls,
            max_output_bytes: config.exec.max_output_bytes,
        };
        let mut run = self
            .engines
            .start(script, limits)
            .map_err(|e| Error::internal(format!("{EXEC}: cannot start a script engine: {e}")))?;
        // A script cannot answer an upstream's questions or hear its progress: its tools
        // see a caller without those capabilities.
        // Its calls are journaled on their own: the script's own record names no instance.
        let script_ctx =
            CallContext { client_capabilities: json!({}), listener: None, reached: Default::default(), ..ctx.clone() };
        let host = Host {
            gateway: self,
            ctx: &script_ctx,
            listings: Default::default(),
            searched: Default::default(),
            artifacts: Default::default(),
        };
        let mut running = FuturesUnordered::new();
        let outcome = loop {
            tokio::select! {
                event = run.next() => match event {
                    Event::Request(request) => running.push(async {
                        let answer = host.answer(&request.call).await;
                        request.answer(answer);
                    }),
                    Event::Done(outcome) => break outcome,
                },
                Some(()) = running.next(), if !running.is_empty() => {}
            }
        };
        drop(running);
        let artifacts = std::mem::take(&mut *host.artifacts.lock().expect("exec artifacts"));
        Ok(result(outcome, &artifacts))
    }
}

/// What answers one script's requests.
struct Host<'a> {
    gateway: &'a Gateway,
    ctx: &'a CallContext,
    /// Tool names per server, listed once per script, to map identifiers back.
    listings: tokio::sync::Mutex<HashMap<String, Vec<String>>>,
    /// What `search()` looks through, listed at the first search and reused by every
    /// later one (concurrent ones wait for it): however many searches a script makes,
    /// each server is listed for them once.
    searched: tokio::sync::OnceCell<Vec<Listing>>,
    artifacts: std::sync::Mutex<Vec<Artifact>>,
}

/// One server's tools as `search()` sees them, or why they could not be listed.
type Listing = (String, Result<Vec<Value>, Error>);

impl Host<'_> {
    async fn answer(&self, call: &HostCall) -> Result<Value, String> {
        match call {
            HostCall::Tool { server, tool, arguments, by_identifier } => {
                let server = self.server(server, *by_identifier)?;
                let tool = if *by_identifier { self.tool(&server, tool).await? } else { tool.clone() };
                let result =
                    self.call(&server, &tool, arguments).await.map_err(|e| format!("{server}.{tool}: {}", e))?;
                Ok(message::object([("server", server.into()), ("tool", tool.into()), ("result", result)]))
            }
            HostCall::Search { query } => {
                let listings = self.searched.get_or_init(|| self.gateway.search_listings(self.ctx)).await;
                Ok(search::found(query, listings)["tools"].take())
            }
            HostCall::Artifact { name, mime_type, data } => {
                let artifact = self
                    .gateway
                    .keep_artifact(&self.ctx.identity, name, mime_type, data.clone())
                    .await
                    .map_err(|e| e.to_string())?;
                let uri = artifact.uri();
                self.artifacts.lock().expect("exec artifacts").push(artifact);
                Ok(json!({ "uri": uri }))
            }
        }
    }

    /// Calls a tool for the script, and journals (and counts) the call as the script's caller's.
    async fn call(&self, server: &str, tool: &str, arguments: &Value) -> Result<Value, Error> {
        let pending = journal::Pending::script_call(server, tool, arguments, self.gateway.journal_keeps());
        let ctx = CallContext { reached: Default::default(), ..self.ctx.clone() };
        let result = self.gateway.forward_script_call(&ctx, server, tool, arguments.clone()).await;
        let caller = journal::Caller::of(&ctx.identity, ctx.revision.as_str());
        self.gateway.finished(pending.finish(caller, &ctx.reached, result.as_ref(), true));
        result
    }

    /// The configured server a script named: its own name, or its identifier.
    /// Only the servers the caller may use count: one its `clients` entry leaves out is as
    /// absent here as in every listing.
    fn server(&self, named: &str, by_identifier: bool) -> Result<String, String> {
        let config = self.gateway.settings.config();
        let known = Access::of(&config, &self.ctx.identity).servers();
        if known.iter().any(|s| s == named) {
            return Ok(named.to_owned());
        }
        let matching: Vec<&String> =
            known.iter().filter(|s| by_identifier && mcpx_exec::identifier(s) == named).collect();
        match matching.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(format!("no server named {named:?}; the servers are: {}", known.join(", "))),
            many => Err(format!(
                "{named:?} could be any of {many:?}; use call(\"<server>\", \"<tool>\", args) with the exact name"
            )),
        }
    }

    /// The tool of `server` a script named: its own name, or its identifier.
    async fn tool(&self, server: &str, named: &str) -> Result<String, String> {
        let mut listings = self.listings.lock().await;
        if !listings.contains_key(server) {
            let listed = self.gateway.server_tools(self.ctx, server).await.map_err(|e| format!("{server}: {}", e))?;
            let names =
                listed.iter().filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned)).collect();
            listings.insert(server.to_owned(), names);
        }
        let names = &listings[server];
        if names.iter().any(|n| n == named) {
            return Ok(named.to_owned());
        }
        let matching: Vec<&String> = names.iter().filter(|n| mcpx_exec::identifier(n) == named).collect();
        match matching.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(format!("server {server:?} has no tool {named:?}; its tools: {}", names.join(", "))),
            many => {
                Err(format!("{named:?} could be any of {many:?} on {server:?}; use call({server:?}, \"<tool>\", args)"))
            }
        }
    }
}

/// The tool result of a script: what it returned (structured when it is an object), its
/// console output, and links to the artifacts it kept; or the error that ended it.
fn result(outcome: Outcome, artifacts: &[Artifact]) -> Value {
    let Outcome { ended, logs } = outcome;
    let mut content = Vec::new();
    let mut structured = None;
    let mut is_error = false;
    match ended {
        Ended::Returned(value) => {
            let text = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            content.push(json!({ "type": "text", "text": text }));
            if value.is_object() {
                structured = Some(value);
            }
        }
        Ended::Threw { message, stack } => {
            is_error = true;
            let text = match stack {
                Some(stack) => format!("the script threw {message}\n{stack}"),
                None => format!("the script threw {message}"),
            };
            content.push(json!({ "type": "text", "text": text }));
            structured = Some(json!({ "error": { "message": message } }));
        }
        Ended::Stopped { limit, message } => {
            is_error = true;
            let setting = format!("exec.{}", limit.setting().trim_end_matches("Ms"));
            content.push(
                json!({ "type": "text", "text": format!("{EXEC} stopped the script: {message} (setting {setting})") }),
            );
            structured = Some(json!({ "error": { "limit": limit.setting(), "setting": setting, "message": message } }));
        }
    }
    if !logs.is_empty() {
        content.push(json!({ "type": "text", "text": format!("console:\n{}", logs.join("\n")) }));
    }
    for artifact in artifacts {
        let mut link = artifact.listing();
        link["type"] = "resource_link".into();
        content.push(link);
    }
    let mut result = Map::new();
    result.insert("content".into(), content.into());
    if let Some(s) = structured {
        result.insert("structuredContent".into(), s);
    }
    if is_error {
        result.insert("isError".into(), true.into());
    }
    Value::Object(result)
}
