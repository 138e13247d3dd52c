//! `--fixture conformance`: the surface the official MCP conformance suite calls on a
//! server, over stdio, in both eras.
//!
//! The suite's server scenarios (2025-11-25 sessions and 2026-07-28 stateless requests)
//! expect a fixed set of tools, resources, templates, prompts and completions, progress and
//! log notifications, server-to-client requests (legacy), `input_required` rounds with an
//! integrity-protected `requestState` (modern), and `subscriptions/listen` streams
//! (modern). This module serves them on top of the standard fakemcp tools, so a gateway can
//! put the suite in front of a fakemcp upstream. `Server` consults it only when the flag is
//! given: without the flag, nothing here runs and fakemcp behaves exactly as before.
//!
//! Files: `tools`, `resources`, `prompts`, `completion` say what exists and what it returns;
//! `input` runs requests that need the client's help, in either era; `client_requests`
//! carries a legacy server's own requests; `sealed_state` protects `requestState`;
//! `subscriptions` holds the open listen streams; `logging` decides which log messages go
//! out; `content` holds the fixed media.

mod call_id;
mod client_requests;
mod completion;
mod content;
mod input;
mod logging;
mod prompts;
mod resources;
mod sealed_state;
mod subscriptions;
mod tasks;
mod tools;

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

use self::client_requests::ClientRequests;
use self::logging::Level;
use self::sealed_state::Seal;
use self::subscriptions::Subscriptions;
use crate::era::{self, Era, MODERN_VERSION};
use crate::instance::Instance;
use crate::wire::{INTERNAL_ERROR, INVALID_PARAMS, Output, RESOURCE_NOT_FOUND, RpcError};

/// `ttlMs` of every cacheable modern result: lists and reads may be reused for 5 minutes
/// (a list change announced on a subscription invalidates them earlier).
const TTL_MS: u64 = 300_000;

/// A finished answer before its era's envelope.
pub enum Reply {
    Complete(Value),
    /// Modern only: `inputRequests` and `requestState` for the client to act on.
    InputRequired(Value),
}

/// How the server should answer a request the fixture took.
pub enum Answer {
    Now(Result<Value, RpcError>),
    /// Work that may block (sleeps, a legacy client's answers): run it on its own thread.
    OnThread(Box<dyn FnOnce() -> Result<Value, RpcError> + Send>),
    /// Answered later, by the fixture itself (a listen request, when its stream ends).
    Later,
}

pub struct Fixture {
    instance: Arc<Instance>,
    out: Output,
    client: ClientRequests,
    listens: Subscriptions,
    seal: Seal,
    session: Mutex<Session>,
    tasks: tasks::Tasks,
    /// `--echo-call-id`: legacy questions name the call they are for (see `call_id`).
    echo_call_id: bool,
}

/// What a legacy `initialize` and `logging/setLevel` set for the process's session.
#[derive(Default)]
struct Session {
    client_capabilities: Value,
    log_level: Option<Level>,
}

impl Fixture {
    pub fn new(instance: Arc<Instance>, out: Output) -> Result<Self, getrandom::Error> {
        Ok(Fixture {
            instance,
            client: ClientRequests::new(out.clone()),
            listens: Subscriptions::new(out.clone()),
            out,
            seal: Seal::new()?,
            session: Mutex::default(),
            tasks: tasks::Tasks::default(),
            echo_call_id: false,
        })
    }

    /// Makes legacy questions name the call they are for (`--echo-call-id`).
    pub fn echoing_call_id(mut self, echo: bool) -> Self {
        self.echo_call_id = echo;
        self
    }

    /// The server capabilities a legacy `initialize` announces.
    pub fn legacy_capabilities() -> Value {
        json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
            "tasks": tasks::legacy_capability(),
        })
    }

    /// Remembers what the client declared in its `initialize`.
    pub fn opened_session(&self, initialize_params: &Value) {
        let capabilities = initialize_params.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        self.session().client_capabilities = capabilities;
    }

    /// A modern request that passed the `_meta` checks. `None`: not the fixture's method;
    /// the standard fakemcp handling applies.
    pub fn modern(self: &Arc<Self>, id: &Value, method: &str, params: &Value) -> Option<Answer> {
        const METHODS: [&str; 13] = [
            "server/discover",
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
            "tools/list",
            "tools/call",
            "prompts/list",
            "prompts/get",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "completion/complete",
            "subscriptions/listen",
        ];
        if !METHODS.contains(&method) {
            return None;
        }
        if let Err(error) = logging::requested(params) {
            return Some(Answer::Now(Err(error)));
        }
        let era = Era::Modern;
        let cacheable = |body: Value, scope: &str| {
            let mut body = body;
            body["ttlMs"] = TTL_MS.into();
            body["cacheScope"] = scope.into();
            Ok(era::complete(body, &self.instance))
        };
        Some(Answer::Now(match method {
            // The same capabilities as a legacy session; `logging` still applies to requests
            // that carry a logLevel, and `resources.subscribe` means listen honours
            // `resourceSubscriptions`. Besides: the tasks extension.
            "server/discover" => {
                let mut capabilities = Self::legacy_capabilities();
                capabilities.as_object_mut().map(|c| c.remove("tasks"));
                capabilities["extensions"] = json!({ tasks::EXTENSION: {} });
                cacheable(json!({"supportedVersions": [MODERN_VERSION], "capabilities": capabilities}), "public")
            }
            "tasks/get" | "tasks/update" | "tasks/cancel" => self.task_request(method, params),
            "tools/call" if params.get("name").and_then(Value::as_str).is_some_and(tasks::is_task_tool) => {
                return Some(self.task_tool_call(params));
            }
            "tools/list" => cacheable(json!({"tools": self.tool_list(era)}), "public"),
            "tools/call" => return self.tool_call(era, params),
            "prompts/list" => cacheable(json!({"prompts": prompts::list(era)}), "public"),
            "prompts/get" => self.finish(era, prompts::get(&self.seal, era, params)),
            "resources/list" => cacheable(json!({"resources": resources::list()}), "public"),
            "resources/templates/list" => cacheable(json!({"resourceTemplates": resources::templates()}), "public"),
            "resources/read" => read_resource(era, params).and_then(|body| cacheable(body, "private")),
            "completion/complete" => completion::complete(era, params).map(|body| era::complete(body, &self.instance)),
            "subscriptions/listen" => {
                return Some(match self.listens.listen(id, params, resources::exists) {
                    Ok(()) => Answer::Later,
                    Err(error) => Answer::Now(Err(error)),
                });
            }
            _ => unreachable!("{method} is in METHODS"),
        }))
    }

    /// Whether the fixture serves `method` in a legacy session (so it needs one).
    pub fn serves_legacy(method: &str) -> bool {
        const METHODS: [&str; 15] = [
            "tools/list",
            "tools/call",
            "tasks/get",
            "tasks/result",
            "tasks/list",
            "tasks/cancel",
            "prompts/list",
            "prompts/get",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "resources/subscribe",
            "resources/unsubscribe",
            "completion/complete",
            "logging/setLevel",
        ];
        METHODS.contains(&method)
    }

    /// A legacy request inside an open session. `None`: not the fixture's method (or a
    /// tool that is not the fixture's).
    pub fn legacy(self: &Arc<Self>, method: &str, params: &Value) -> Option<Answer> {
        if !Self::serves_legacy(method) {
            return None;
        }
        let era = Era::Legacy;
        Some(Answer::Now(match method {
            "tools/list" => Ok(json!({"tools": self.tool_list(era)})),
            "tools/call" if params.get("name").and_then(Value::as_str).is_some_and(tasks::is_legacy_task_tool) => {
                return Some(self.legacy_task_tool_call(params));
            }
            "tools/call" => return self.tool_call(era, params),
            "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel" => {
                return Some(self.legacy_task_request(method, params));
            }
            "prompts/list" => Ok(json!({"prompts": prompts::list(era)})),
            "prompts/get" => self.finish(era, prompts::get(&self.seal, era, params)),
            "resources/list" => Ok(json!({"resources": resources::list()})),
            "resources/templates/list" => Ok(json!({"resourceTemplates": resources::templates()})),
            "resources/read" => read_resource(era, params),
            // Nothing ever changes, so a subscription needs no bookkeeping.
            "resources/subscribe" | "resources/unsubscribe" => uri_param(method, params).map(|_| json!({})),
            "completion/complete" => completion::complete(era, params),
            "logging/setLevel" => params
                .get("level")
                .ok_or_else(|| RpcError::new(INVALID_PARAMS, "logging/setLevel: level is required"))
                .and_then(Level::parse)
                .map(|level| {
                    self.session().log_level = Some(level);
                    json!({})
                }),
            _ => unreachable!("serves_legacy({method})"),
        }))
    }

    /// A response from the client to one of fakemcp's own (legacy) requests.
    pub fn response(&self, id: &Value, outcome: Result<Value, RpcError>) {
        if !self.client.deliver(id, outcome) {
            eprintln!("fakemcp {}: dropping a response to {id}, which no call is waiting for", self.instance.id);
        }
    }

    /// A notification from the client. Only `notifications/cancelled` naming an open
    /// subscription needs anything: it ends that subscription.
    pub fn notification(&self, method: &str, params: &Value) {
        if method == "notifications/cancelled" {
            if let Some(id) = params.get("requestId") {
                self.listens.cancel(id, &self.instance);
            }
        }
    }

    fn tool_list(&self, era: Era) -> Vec<Value> {
        let mut list = tools::catalogue(era);
        match era {
            Era::Modern => list.extend(tasks::TOOLS.iter().map(|(name, description)| {
                json!({"name": name, "description": description, "inputSchema": tasks::input_schema(name)})
            })),
            Era::Legacy => list.extend(tasks::legacy_tools()),
        }
        if let Value::Array(standard) = crate::tools::catalogue() {
            list.extend(standard);
        }
        list
    }

    fn tool_call(self: &Arc<Self>, era: Era, params: &Value) -> Option<Answer> {
        let name = params.get("name").and_then(Value::as_str)?;
        if !tools::is_ours(era, name) {
            return None;
        }
        self.instance.count_tool_call();
        let fixture = Arc::clone(self);
        let params = params.clone();
        Some(Answer::OnThread(Box::new(move || fixture.finish(era, tools::call(&fixture, era, &params)))))
    }

    /// Puts a reply in its era's envelope.
    fn finish(&self, era: Era, reply: Result<Reply, RpcError>) -> Result<Value, RpcError> {
        match (era, reply?) {
            (Era::Modern, Reply::Complete(body)) => Ok(era::complete(body, &self.instance)),
            (Era::Modern, Reply::InputRequired(body)) => Ok(era::input_required(body, &self.instance)),
            (Era::Legacy, Reply::Complete(body)) => Ok(body),
            (Era::Legacy, Reply::InputRequired(_)) => {
                Err(RpcError::new(INTERNAL_ERROR, "a legacy request cannot answer input_required"))
            }
        }
    }

    fn log(&self, era: Era, params: &Value, level: Level, message: &str) {
        let session_level = self.session().log_level;
        logging::log(&self.out, era, params, session_level, level, message);
    }

    fn session_capabilities(&self) -> Value {
        self.session().client_capabilities.clone()
    }

    fn session(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The `resources/read` body, or not-found in the era's way: -32602 (modern) or -32002
/// (legacy), with the URI in `data` either way.
fn read_resource(era: Era, params: &Value) -> Result<Value, RpcError> {
    let uri = uri_param("resources/read", params)?;
    match resources::read(uri) {
        Some(contents) => Ok(json!({"contents": contents})),
        None => {
            let code = match era {
                Era::Modern => INVALID_PARAMS,
                Era::Legacy => RESOURCE_NOT_FOUND,
            };
            Err(RpcError::new(code, format!("resource not found: {uri}")).with_data(json!({"uri": uri})))
        }
    }
}

fn uri_param<'a>(method: &str, params: &'a Value) -> Result<&'a str, RpcError> {
    params
        .get("uri")
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::new(INVALID_PARAMS, format!("{method}: uri must be a string")))
}
