//! The `io.modelcontextprotocol/tasks` extension (2026-07-28): tools whose calls the
//! server may answer with a task (`resultType: "task"`), and `tasks/get`,
//! `tasks/update`, `tasks/cancel` on them.
//!
//! A request that declares the extension in its client capabilities gets a task from a
//! task-supporting tool; one that does not gets the tool's result at once (`slow_compute`)
//! or, for a tool that needs a task, error -32021 naming the extension. A task runs on a
//! thread of its own; what it asks the client (`input_required`) waits for a
//! `tasks/update` that answers it, and `tasks/cancel` stops it at its next step.
//! The tools are the ones the conformance suite's `tasks-*` scenarios call, plus
//! `crash_job`, which ends the process mid-task (for a gateway's crash handling).
//!
//! The same tasks run in a 2025-11-25 session (core tasks of that revision): a
//! `tools/call` with `task` (`{ttl}`) answers a `CreateTaskResult` (`{task}`), and
//! `tasks/get`, `tasks/result` (blocks until the task ends; a question the task asks is
//! sent to the client meanwhile as a real `elicitation/create` naming the task in
//! `_meta`), `tasks/list` and `tasks/cancel` act on it. The session declares
//! `capabilities.tasks`, and each task tool its `execution.taskSupport`.
//!
//! There a task-augmented `slow_compute` also takes `pollInterval` (ms: what its task
//! suggests the client polls at), `notify` (true: the task sends
//! `notifications/tasks/status` itself when it ends), `notifyAs` (ids: it sends them
//! under these task ids instead of its own, as a server that speaks of tasks it does not
//! run would) and `notifyStatus` (the status they say, in place of the task's own). Over HTTP they have nowhere to go (no event stream) and are dropped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::content::{text, tool_result};
use super::input::{self, Step};
use super::{Answer, Fixture, Reply};
use crate::era::{self, CLIENT_CAPABILITIES_KEY};
use crate::wire::{INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_CLIENT_CAPABILITY, RpcError};

pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// How long a task stays readable, and how often a client should poll it.
const TTL_MS: u64 = 600_000;
const POLL_INTERVAL_MS: u64 = 100;
/// The step a running task sleeps in, so a cancel stops it promptly.
const STEP: Duration = Duration::from_millis(20);

/// The task tools (2026-07-28 only), in listing order: name and description.
pub const TOOLS: [(&str, &str); 8] = [
    ("greet", "Returns Hello, {name}! at once; never a task."),
    ("slow_compute", "Sleeps `seconds`, then answers; a task when the request declares the tasks extension."),
    ("failing_job", "Needs a task; after a moment, completes with a tool error (isError)."),
    ("protocol_error_job", "Needs a task; fails it with a JSON-RPC error."),
    ("confirm_delete", "Needs a task; asks to confirm deleting `filename`, then answers."),
    ("multi_input", "Needs a task; asks two questions at once, then answers."),
    ("test_tool_with_task", "Asks the user's name (input_required), then answers it from a task."),
    ("crash_job", "Needs a task; the server process exits while it runs."),
];

pub fn is_task_tool(name: &str) -> bool {
    TOOLS.iter().any(|(tool, _)| *tool == name)
}

/// The `_meta` key a 2025-11-25 message about a task names it under.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The 2025-11-25 task tools (all but the one whose question is a 2026 round), each with
/// its `execution.taskSupport`.
pub fn legacy_tools() -> Vec<Value> {
    TOOLS
        .iter()
        .filter(|(name, _)| *name != "test_tool_with_task")
        .map(|(name, description)| {
            let support = if matches!(*name, "greet" | "slow_compute") { "optional" } else { "required" };
            json!({
                "name": name,
                "description": description,
                "inputSchema": input_schema(name),
                "execution": {"taskSupport": support},
            })
        })
        .collect()
}

pub fn is_legacy_task_tool(name: &str) -> bool {
    is_task_tool(name) && name != "test_tool_with_task"
}

/// What a 2025-11-25 session's `capabilities.tasks` declares.
pub fn legacy_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

pub fn input_schema(name: &str) -> Value {
    let props = |props: Value| json!({"type": "object", "properties": props});
    match name {
        "greet" => props(json!({"name": {"type": "string"}})),
        "slow_compute" => props(json!({"seconds": {"type": "number"}, "label": {"type": "string"}})),
        "confirm_delete" => props(json!({"filename": {"type": "string"}})),
        _ => props(json!({})),
    }
}

/// Whether a request declared the tasks extension.
pub fn declared(params: &Value) -> bool {
    era::meta(params)
        .and_then(|m| m.get(CLIENT_CAPABILITIES_KEY))
        .and_then(|c| c.get("extensions"))
        .and_then(|e| e.get(EXTENSION))
        .is_some_and(|e| !e.is_null())
}

fn needs_extension(what: &str) -> RpcError {
    RpcError::new(MISSING_CLIENT_CAPABILITY, format!("{what} needs the {EXTENSION} extension"))
        .with_data(json!({"requiredCapabilities": {"extensions": {EXTENSION: {}}}}))
}

/// The tasks of this process.
#[derive(Default)]
pub struct Tasks {
    tasks: Mutex<HashMap<String, Task>>,
    changed: Condvar,
    next: AtomicU64,
}

struct Task {
    status: &'static str,
    /// What the task suggests the client polls it at.
    poll_ms: u64,
    /// The ids its own `notifications/tasks/status` go out under (2025-11-25 only).
    announce: Vec<String>,
    /// The status they say, when not its own.
    announce_status: Option<String>,
    /// How long the task stays readable after it was created.
    ttl_ms: u64,
    /// Questions sent to a 2025-11-25 client and not yet answered.
    sent: usize,
    created: String,
    updated: String,
    result: Option<Value>,
    error: Option<Value>,
    /// Questions not yet answered.
    asking: Map<String, Value>,
    answers: Map<String, Value>,
}

impl Task {
    fn terminal(&self) -> bool {
        matches!(self.status, "completed" | "failed" | "cancelled")
    }

    fn body(&self, id: &str) -> Value {
        let mut body = json!({
            "taskId": id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_ms,
        });
        if let Some(result) = &self.result {
            body["result"] = result.clone();
        }
        if let Some(error) = &self.error {
            body["error"] = error.clone();
        }
        if self.status == "input_required" {
            body["inputRequests"] = Value::Object(self.asking.clone());
        }
        body
    }

    /// The task as a 2025-11-25 `Task`.
    fn legacy_body(&self, id: &str) -> Value {
        let mut body = json!({
            "taskId": id,
            "status": self.status,
            "createdAt": self.created,
            "lastUpdatedAt": self.updated,
            "ttl": self.ttl_ms,
            "pollInterval": self.poll_ms,
        });
        if self.status == "failed" {
            let message =
                self.error.as_ref().and_then(|e| e["message"].as_str()).unwrap_or("the tool reported an error");
            body["statusMessage"] = message.into();
        }
        body
    }

    fn set(&mut self, status: &'static str) {
        self.status = status;
        self.updated = now();
    }
}

/// What a 2025-11-25 task tells its client unasked, and what it suggests it polls at.
struct Announcing {
    poll_ms: u64,
    notify: bool,
    notify_as: Option<Vec<String>>,
    status: Option<String>,
}

impl Default for Announcing {
    fn default() -> Self {
        Announcing { poll_ms: POLL_INTERVAL_MS, notify: false, notify_as: None, status: None }
    }
}

/// How a task's work ended.
enum Outcome {
    Completed(Value),
    Failed(RpcError),
}

/// What a task's work can do: sleep (false once cancelled) and ask the client.
struct Control {
    fixture: Arc<Fixture>,
    id: String,
}

impl Control {
    fn sleep(&self, total: Duration) -> bool {
        let until = Instant::now() + total;
        loop {
            if self.fixture.tasks.lock().get(&self.id).is_none_or(Task::terminal) {
                return false;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            thread::sleep(left.min(STEP));
        }
    }

    /// Puts `questions` to the client and waits until every one is answered; `None`
    /// once the task was cancelled.
    fn ask(&self, questions: Map<String, Value>) -> Option<Map<String, Value>> {
        let tasks = &self.fixture.tasks;
        let mut map = tasks.lock();
        let task = map.get_mut(&self.id)?;
        task.asking = questions;
        task.set("input_required");
        // A `tasks/result` may already be waiting for the task to change: wake it to ask.
        tasks.changed.notify_all();
        loop {
            let task = map.get_mut(&self.id)?;
            if task.terminal() {
                return None;
            }
            if task.asking.is_empty() {
                task.set("working");
                return Some(std::mem::take(&mut task.answers));
            }
            map = tasks.changed.wait(map).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Tasks {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Task>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a new working task and returns its id.
    fn create(&self, ttl_ms: u64, announcing: Announcing) -> String {
        let id = format!("task-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1);
        let at = now();
        let announce = match announcing.notify_as {
            Some(ids) => ids,
            None if announcing.notify => vec![id.clone()],
            None => Vec::new(),
        };
        let task = Task {
            status: "working",
            poll_ms: announcing.poll_ms,
            announce,
            announce_status: announcing.status,
            ttl_ms,
            sent: 0,
            created: at.clone(),
            updated: at,
            result: None,
            error: None,
            asking: Map::new(),
            answers: Map::new(),
        };
        self.lock().insert(id.clone(), task);
        id
    }

    fn finish(&self, id: &str, outcome: Outcome) {
        let mut map = self.lock();
        let Some(task) = map.get_mut(id) else { return };
        if task.terminal() {
            return; // cancelled meanwhile: it stays cancelled
        }
        match outcome {
            Outcome::Completed(result) => {
                task.result = Some(result);
                task.set("completed");
            }
            Outcome::Failed(error) => {
                task.error = Some(json!({"code": error.code, "message": error.message}));
                task.set("failed");
            }
        }
        self.changed.notify_all();
    }
}

impl Fixture {
    /// A `tools/call` of a task tool.
    pub(super) fn task_tool_call(self: &Arc<Self>, params: &Value) -> Answer {
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let with_task = declared(params);
        let needs_task = !matches!(name.as_str(), "greet" | "slow_compute");
        if needs_task && !with_task {
            return Answer::Now(Err(needs_extension(&format!("tools/call {name}"))));
        }
        if !with_task || name == "greet" {
            let instance = Arc::clone(&self.instance);
            return self.at_once(&name, &arguments, move |body| era::complete(body, &instance));
        }
        if name == "test_tool_with_task" {
            let asked = input::modern(&self.seal, "tools/call test_tool_with_task", params, |inputs| {
                Ok(match inputs.elicited("user_name")? {
                    Some(answer) => {
                        let name = answer.text("name").unwrap_or("nobody").to_owned();
                        Step::Done(tool_result(vec![text(&format!("Hello from a task, {name}!"))]))
                    }
                    None => Step::Ask(Map::from_iter([("user_name".to_owned(), name_question("What is your name?"))])),
                })
            });
            return match asked {
                Err(e) => Answer::Now(Err(e)),
                Ok(Reply::InputRequired(body)) => Answer::Now(Ok(era::input_required(body, &self.instance))),
                Ok(Reply::Complete(result)) => {
                    self.start(move |ctl| ctl.sleep(Duration::from_millis(100)).then(|| Outcome::Completed(result)))
                }
            };
        }
        match work(&name, &arguments) {
            Some(work) => self.start(work),
            None => Answer::Now(Err(RpcError::new(INVALID_PARAMS, format!("unknown tool {name}")))),
        }
    }

    /// A `tools/call` of a task tool in a 2025-11-25 session: a task when the request
    /// carries `task`, the result at once for a tool that may run without one, -32601 for
    /// a tool that needs one (as that revision asks).
    pub(super) fn legacy_task_tool_call(self: &Arc<Self>, params: &Value) -> Answer {
        let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
        let Some(task) = params.get("task").filter(|t| t.is_object()) else {
            if matches!(name.as_str(), "greet" | "slow_compute") {
                return self.at_once(&name, &arguments, |body| body);
            }
            return Answer::Now(Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!("tools/call {name} needs a task: send it with params.task"),
            )));
        };
        if name == "greet" {
            return Answer::Now(Err(RpcError::new(METHOD_NOT_FOUND, "tools/call greet never runs as a task")));
        }
        let ttl_ms = task.get("ttl").and_then(Value::as_u64).unwrap_or(TTL_MS).min(TTL_MS);
        let Some(work) = work(&name, &arguments) else {
            return Answer::Now(Err(RpcError::new(INVALID_PARAMS, format!("unknown tool {name}"))));
        };
        let announcing = Announcing {
            poll_ms: arguments.get("pollInterval").and_then(Value::as_u64).unwrap_or(POLL_INTERVAL_MS),
            notify: arguments.get("notify").and_then(Value::as_bool) == Some(true),
            notify_as: arguments
                .get("notifyAs")
                .and_then(Value::as_array)
                .map(|ids| ids.iter().filter_map(Value::as_str).map(str::to_owned).collect()),
            status: arguments.get("notifyStatus").and_then(Value::as_str).map(str::to_owned),
        };
        let id = self.spawn_task(ttl_ms, announcing, work);
        let body = self.tasks.lock()[&id].legacy_body(&id);
        Answer::Now(Ok(json!({"task": body})))
    }

    /// `greet`, or `slow_compute` run without a task, answered (after its sleep) in `envelope`.
    fn at_once(&self, name: &str, arguments: &Value, envelope: impl Fn(Value) -> Value + Send + 'static) -> Answer {
        let string =
            |key: &str, default: &str| arguments.get(key).and_then(Value::as_str).unwrap_or(default).to_owned();
        if name == "greet" {
            return Answer::Now(Ok(envelope(tool_result(vec![text(&format!("Hello, {}!", string("name", "World")))]))));
        }
        let seconds = arguments.get("seconds").and_then(Value::as_f64).unwrap_or(1.0).clamp(0.0, 3600.0);
        let label = string("label", "compute");
        Answer::OnThread(Box::new(move || {
            thread::sleep(Duration::from_secs_f64(seconds));
            Ok(envelope(tool_result(vec![text(&format!("{label}: computed after {seconds}s"))])))
        }))
    }

    /// Creates a task, runs `work` for it on a thread of its own, and answers with it.
    /// `work` returns `None` when the task was cancelled meanwhile.
    fn start(self: &Arc<Self>, work: impl FnOnce(&Control) -> Option<Outcome> + Send + 'static) -> Answer {
        let id = self.spawn_task(TTL_MS, Announcing::default(), work);
        let mut body = self.tasks.lock()[&id].body(&id);
        body.as_object_mut().map(|b| b.remove("inputRequests"));
        Answer::Now(Ok(era::task(body, &self.instance)))
    }

    /// Creates a task that `work` runs on a thread of its own, and returns its id.
    fn spawn_task(
        self: &Arc<Self>,
        ttl_ms: u64,
        announcing: Announcing,
        work: impl FnOnce(&Control) -> Option<Outcome> + Send + 'static,
    ) -> String {
        let id = self.tasks.create(ttl_ms, announcing);
        let ctl = Control { fixture: Arc::clone(self), id: id.clone() };
        thread::spawn(move || {
            if let Some(outcome) = work(&ctl) {
                ctl.fixture.tasks.finish(&ctl.id, outcome);
                ctl.fixture.announce(&ctl.id);
            }
        });
        id
    }

    /// Sends the task's `notifications/tasks/status` under each id it announces under.
    fn announce(&self, id: &str) {
        let notes: Vec<Value> = {
            let map = self.tasks.lock();
            let Some(task) = map.get(id) else { return };
            let body = |as_id: &String| {
                let mut body = task.legacy_body(as_id);
                if let Some(status) = &task.announce_status {
                    body["status"] = status.as_str().into();
                }
                body
            };
            task.announce.iter().map(body).collect()
        };
        for note in notes {
            self.out.notify_with("notifications/tasks/status", note);
        }
    }

    /// `tasks/get`, `tasks/update`, `tasks/cancel`.
    pub(super) fn task_request(&self, method: &str, params: &Value) -> Result<Value, RpcError> {
        if !declared(params) {
            return Err(needs_extension(method));
        }
        let id = params.get("taskId").and_then(Value::as_str).unwrap_or_default();
        let mut map = self.tasks.lock();
        let Some(task) = map.get_mut(id) else {
            return Err(RpcError::new(INVALID_PARAMS, format!("{method}: unknown taskId {id:?}")));
        };
        let body = match method {
            "tasks/get" => task.body(id),
            "tasks/update" => {
                let responses = params.get("inputResponses").and_then(Value::as_object).cloned().unwrap_or_default();
                for (key, answer) in responses {
                    if task.asking.remove(&key).is_some() {
                        task.answers.insert(key, answer);
                    }
                }
                self.tasks.changed.notify_all();
                json!({})
            }
            _ => {
                if !task.terminal() {
                    task.set("cancelled");
                    self.tasks.changed.notify_all();
                }
                json!({})
            }
        };
        Ok(era::complete(body, &self.instance))
    }
}

impl Fixture {
    /// `tasks/get`, `tasks/result`, `tasks/list` and `tasks/cancel` in a 2025-11-25 session.
    pub(super) fn legacy_task_request(self: &Arc<Self>, method: &str, params: &Value) -> Answer {
        if method == "tasks/list" {
            let map = self.tasks.lock();
            let mut tasks: Vec<(&String, &Task)> = map.iter().collect();
            tasks.sort_by(|a, b| a.1.created.cmp(&b.1.created).then(a.0.cmp(b.0)));
            let tasks: Vec<Value> = tasks.into_iter().map(|(id, task)| task.legacy_body(id)).collect();
            return Answer::Now(Ok(json!({"tasks": tasks})));
        }
        let id = params.get("taskId").and_then(Value::as_str).unwrap_or_default().to_owned();
        let unknown = || RpcError::new(INVALID_PARAMS, format!("{method}: unknown taskId {id:?}"));
        let mut map = self.tasks.lock();
        let Some(task) = map.get_mut(&id) else { return Answer::Now(Err(unknown())) };
        match method {
            "tasks/get" => Answer::Now(Ok(task.legacy_body(&id))),
            "tasks/cancel" if task.terminal() => Answer::Now(Err(RpcError::new(
                INVALID_PARAMS,
                format!("Cannot cancel task: already in terminal status {:?}", task.status),
            ))),
            "tasks/cancel" => {
                task.set("cancelled");
                task.sent = 0;
                self.tasks.changed.notify_all();
                Answer::Now(Ok(task.legacy_body(&id)))
            }
            _ => {
                drop(map);
                let fixture = Arc::clone(self);
                Answer::OnThread(Box::new(move || fixture.task_result(&id)))
            }
        }
    }

    /// `tasks/result`: waits until the task ends, putting the questions it asks meanwhile
    /// to the client, then answers what the tool call would have.
    fn task_result(&self, id: &str) -> Result<Value, RpcError> {
        let tasks = &self.tasks;
        let mut map = tasks.lock();
        loop {
            let Some(task) = map.get_mut(id) else {
                return Err(RpcError::new(INVALID_PARAMS, format!("tasks/result: unknown taskId {id:?}")));
            };
            match task.status {
                "completed" => {
                    let mut result = task.result.clone().unwrap_or_else(|| json!({}));
                    result["_meta"] = json!({ RELATED_TASK: {"taskId": id} });
                    return Ok(result);
                }
                "failed" => {
                    let error = task.error.clone().unwrap_or_default();
                    let message = error["message"].as_str().unwrap_or("the task failed").to_owned();
                    return Err(RpcError::new(error["code"].as_i64().unwrap_or(INTERNAL_ERROR), message));
                }
                "cancelled" => return Err(RpcError::new(INVALID_PARAMS, format!("task {id:?} was cancelled"))),
                _ => {}
            }
            // Questions nobody is putting to the client yet: put them now, one at a time.
            if task.status == "input_required" && task.sent == 0 && !task.asking.is_empty() {
                let questions = task.asking.clone();
                task.sent = questions.len();
                drop(map);
                // All at once, each on a thread of its own, as a server may.
                let asked: Vec<(String, String, Result<Value, RpcError>)> = thread::scope(|scope| {
                    let asking: Vec<_> = questions
                        .into_iter()
                        .map(|(key, question)| {
                            let method = question["method"].as_str().unwrap_or_default().to_owned();
                            let mut params = question.get("params").cloned().unwrap_or_else(|| json!({}));
                            params["_meta"] = json!({ RELATED_TASK: {"taskId": id} });
                            scope.spawn(move || {
                                let answer = self.client.ask(&method, params);
                                (key, method, answer)
                            })
                        })
                        .collect();
                    asking.into_iter().filter_map(|a| a.join().ok()).collect()
                });
                let mut answers = Map::new();
                for (key, method, answer) in asked {
                    match answer {
                        Ok(answer) => {
                            answers.insert(key, answer);
                        }
                        Err(error) => {
                            let failed = RpcError::new(
                                INTERNAL_ERROR,
                                format!("the client answered {method} with error {}: {}", error.code, error.message),
                            );
                            tasks.finish(id, Outcome::Failed(failed));
                            break;
                        }
                    }
                }
                map = tasks.lock();
                if let Some(task) = map.get_mut(id) {
                    for (key, answer) in answers {
                        if task.asking.remove(&key).is_some() {
                            task.answers.insert(key, answer);
                        }
                    }
                    task.sent = 0;
                }
                tasks.changed.notify_all();
                continue;
            }
            map = tasks.changed.wait(map).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// The work of a task tool's task, `None` for a name that is no such tool.
#[allow(clippy::type_complexity)]
fn work(name: &str, arguments: &Value) -> Option<Box<dyn FnOnce(&Control) -> Option<Outcome> + Send>> {
    let string = |key: &str, default: &str| arguments.get(key).and_then(Value::as_str).unwrap_or(default).to_owned();
    Some(match name {
        "slow_compute" => {
            let seconds = arguments.get("seconds").and_then(Value::as_f64).unwrap_or(1.0).clamp(0.0, 3600.0);
            let label = string("label", "compute");
            Box::new(move |ctl| {
                ctl.sleep(Duration::from_secs_f64(seconds)).then(|| {
                    Outcome::Completed(tool_result(vec![text(&format!("{label}: computed after {seconds}s"))]))
                })
            })
        }
        "failing_job" => Box::new(|ctl| {
            ctl.sleep(Duration::from_millis(300)).then(|| {
                Outcome::Completed(json!({"content": [text("failing_job failed, as it always does")], "isError": true}))
            })
        }),
        "protocol_error_job" => Box::new(|ctl| {
            ctl.sleep(Duration::from_millis(100))
                .then(|| Outcome::Failed(RpcError::new(INTERNAL_ERROR, "protocol_error_job: the job broke down")))
        }),
        "crash_job" => Box::new(|ctl| {
            ctl.sleep(Duration::from_millis(200)).then(|| {
                eprintln!("fakemcp: crash_job ends the process");
                std::process::exit(3)
            })
        }),
        "confirm_delete" => {
            let filename = string("filename", "file");
            Box::new(move |ctl| {
                let question = confirm(&format!("Delete {filename}?"));
                let answers = ctl.ask(Map::from_iter([("confirm".to_owned(), question)]))?;
                let confirmed = answers.get("confirm").is_some_and(|a| {
                    a["action"] == "accept" && a.pointer("/content/confirm") == Some(&Value::Bool(true))
                });
                let said = if confirmed { format!("Deleted {filename}") } else { format!("Kept {filename}") };
                Some(Outcome::Completed(tool_result(vec![text(&said)])))
            })
        }
        "multi_input" => {
            // `count` (beyond the two the conformance suite asks): that many questions at once.
            let count = arguments.get("count").and_then(Value::as_u64).map(|n| n.clamp(1, 10_000));
            Box::new(move |ctl| {
                let questions = match count {
                    None => Map::from_iter([
                        ("first".to_owned(), name_question("First: what is your name?")),
                        ("second".to_owned(), name_question("Second: what is your name?")),
                    ]),
                    Some(count) => (1..=count)
                        .map(|n| (format!("n{n}"), name_question(&format!("Question {n}: what is your name?"))))
                        .collect(),
                };
                let answers = ctl.ask(questions)?;
                let said = format!("Answered {} questions", answers.len());
                Some(Outcome::Completed(tool_result(vec![text(&said)])))
            })
        }
        _ => return None,
    })
}

fn name_question(message: &str) -> Value {
    input::elicitation(
        message,
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
    )
}

fn confirm(message: &str) -> Value {
    input::elicitation(
        message,
        json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}),
    )
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}
