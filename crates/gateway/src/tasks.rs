//! Tasks: tool calls that outlive the request that started them, in both eras, under
//! ids of mcpx's own.
//!
//! A task reaches a caller three ways: a 2026 upstream answers with one (the
//! `io.modelcontextprotocol/tasks` extension, `resultType: "task"`); a 2025-11-25
//! upstream answers a task-augmented `tools/call` (`params.task`) with a
//! `CreateTaskResult`; or mcpx runs the call as a task itself (a handshake-era caller's
//! task-augmented call to an upstream without tasks, or a 2026 call still unanswered after
//! `tasks.after`). Whichever it is, the caller sees it in its own era's shapes: 2026
//! `tasks/get` (the result inside), `tasks/update`, `tasks/cancel`; 2025-11-25 `tasks/get`,
//! `tasks/result` (blocks, then the call's own result or error), `tasks/list`,
//! `tasks/cancel`. Each task is kept as one state in the 2026 shape (status, timestamps,
//! `inputRequests`, `result` or `error`), rendered for the caller's era.
//!
//! The caller never sees an upstream's task id. It gets one mcpx seals
//! (`ask::Asks::seal_task`: HMAC with the daemon's key) over the server and instance that
//! run the task, the caller's identity (`owner_key`) and an expiry. Every task method
//! opens the id first: one that was altered, has expired, or was issued to another caller
//! is refused exactly like an id that never existed (-32602), so nobody can read, answer
//! or cancel another's task, nor learn that it exists; `tasks/list` shows a caller its own.
//!
//! The instance that runs a task is held (a lease) until the task ends or its ttl passes
//! (`tasks.maxTtl` at most; swept every second): a watcher polls an upstream's task at
//! the interval it suggests, takes a handshake-era upstream's own
//! `notifications/tasks/status` for it at once (from that instance, under its id for the
//! task, and nothing else), and releases the lease the moment it sees it end, whether or
//! not the caller polls. A cancel the server cannot be reached for is recorded by mcpx
//! and sent again in the background. A task mcpx runs holds its instance through the call
//! in flight.
//! An instance that exits while a task runs ends it as `failed`, with an error that says so.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use mcpx_protocol::{Era, Revision, RpcError, meta};
use serde_json::{Map, Value, json};

use crate::ask::now_ms;
use crate::config::TaskConfig;
use crate::error::Error;
use crate::identity::Principal;
use crate::scope::InstanceKey;
use crate::{Answer, CallContext, Gateway, Lease, caller_of};

/// The task methods a 2026 caller may send.
pub const METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];
/// The task methods a 2025-11-25 caller may send.
pub const LEGACY_METHODS: [&str; 4] = ["tasks/get", "tasks/result", "tasks/list", "tasks/cancel"];

/// The `_meta` key a 2025-11-25 message about a task names it under.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];

/// The watcher polls an upstream's task no more often than this, and no less.
const FASTEST_POLL: Duration = Duration::from_millis(200);
const SLOWEST_POLL: Duration = Duration::from_secs(5);
/// How soon, and then how seldom at most, mcpx tells an unreachable server again of a
/// cancellation it recorded.
const CANCEL_RETRY_FIRST: Duration = Duration::from_millis(500);
const CANCEL_RETRY_LAST: Duration = Duration::from_secs(30);
/// What mcpx suggests a caller polls a task it runs itself at.
const OWN_POLL_MS: u64 = 500;

pub fn is_task(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("task")
}

/// What a 2025-11-25 session's `capabilities.tasks` declares: mcpx runs or relays a task
/// for any tool call, lists and cancels them.
pub fn legacy_capability() -> Value {
    json!({ "list": {}, "cancel": {}, "requests": { "tools": { "call": {} } } })
}

/// What a 2025-11-25 caller reads of a gateway tool's `execution.taskSupport`:
/// `optional`, for mcpx runs the task (or relays the upstream's). An exposed tool keeps
/// its upstream's own word, unchanged.
pub(crate) fn advertise_task_support(tool: &mut Value) {
    if let Some(t) = tool.as_object_mut() {
        let execution = t.entry("execution").or_insert_with(|| json!({}));
        if let Some(e) = execution.as_object_mut() {
            e.insert("taskSupport".into(), "optional".into());
        } else {
            *execution = json!({ "taskSupport": "optional" });
        }
    }
}

/// A tool's `execution.taskSupport` as its listing says (`forbidden` when it says none).
pub(crate) fn task_support(listed: &[Value], tool: &str) -> String {
    listed
        .iter()
        .find(|t| t.get("name").and_then(Value::as_str) == Some(tool))
        .and_then(|t| t.pointer("/execution/taskSupport"))
        .and_then(Value::as_str)
        .unwrap_or("forbidden")
        .to_owned()
}

/// Whether a handshake-era upstream runs task-augmented tool calls itself.
pub(crate) fn upstream_runs_tasks(lease: &Lease) -> bool {
    let facts = lease.upstream().facts();
    facts.era == Era::Legacy && facts.capabilities.pointer("/tasks/requests/tools/call").is_some_and(Value::is_object)
}

/// Whether a 2026 upstream runs tasks (declares the tasks extension).
pub(crate) fn upstream_has_extension(lease: &Lease) -> bool {
    let facts = lease.upstream().facts();
    let extensions = json!({ "extensions": facts.capabilities.get("extensions") });
    facts.era == Era::Modern && meta::declares_tasks(&extensions)
}

fn terminal(state: &Value) -> bool {
    state.get("status").and_then(Value::as_str).is_some_and(|s| TERMINAL.contains(&s))
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// The tasks mcpx tracks, by the id it handed out. Clones share them.
#[derive(Clone, Default)]
pub(crate) struct Tasks {
    entries: Arc<Mutex<HashMap<String, Entry>>>,
    /// The change streams of handshake-era sessions, by owner: each hears
    /// `notifications/tasks/status` when one of its tasks changes status.
    streams: Arc<Mutex<HashMap<String, Vec<crate::outbox::Sender>>>>,
    /// The 2026 `subscriptions/listen` streams that asked for a task's status pushes
    /// (`notifications.taskIds`), by the task's id.
    listens: Arc<Mutex<HashMap<String, Vec<crate::outbox::Sender>>>>,
    /// In a cluster, where a 2026 task's record goes at each change of status, to be kept
    /// in Redis (`Gateway::keep_task_records`): any node answers from it once this one is gone.
    kept: Arc<std::sync::OnceLock<tokio::sync::mpsc::Sender<KeptTask>>>,
}

/// A task's record as a node keeps it in the cluster's Redis: its id, its owner (the
/// caller it was handed to, whose index lists it), the record (JSON: `ttlMs` and the
/// state), and how long the task has left.
pub(crate) type KeptTask = (String, String, String, Duration);

/// Who runs a task.
#[derive(Clone)]
enum Runner {
    /// The upstream, under its own id, in its era.
    Upstream { upstream: mcpx_upstream::Upstream, id: String },
    /// mcpx, through a call in flight it can abort.
    Gateway { call: tokio::task::AbortHandle },
}

struct Entry {
    /// The client the task was handed to, counted against `tasks.maxPerClient`.
    client: Principal,
    /// The caller it was handed to (`owner_key`): `tasks/list` shows it its own.
    owner: String,
    /// In which era the caller speaks of it.
    era: Era,
    key: InstanceKey,
    runner: Runner,
    /// The caller's capabilities, which a 2026 upstream is told on every request about it.
    capabilities: Value,
    ttl_ms: u64,
    expires: Instant,
    /// Order of creation, for `tasks/list`.
    seq: u64,
    /// Holds the instance while an upstream may still run the task; `None` once it ended.
    lease: Option<Lease>,
    /// The task as last seen, in the 2026 shape without `taskId` and `ttlMs`.
    state: Value,
    /// Becomes true when the task ends: `tasks/result` waits on it.
    ended: tokio::sync::watch::Sender<bool>,
    /// Since when every poll of the (HTTP) server running the task has failed.
    unreachable_since: Option<Instant>,
    /// Whom the task serves, to a handshake-era upstream that asks it questions.
    caller: mcpx_upstream::Caller,
    /// A handshake-era upstream's questions to a 2026 caller (`questions`).
    questions: Questions,
}

impl Entry {
    /// Whether the task's upstream asks its questions as requests on its session (a
    /// handshake-era upstream), rather than in `inputRequests`.
    fn asks_on_session(&self) -> bool {
        matches!(&self.runner, Runner::Upstream { upstream, .. } if upstream.facts().era == Era::Legacy)
    }
}

/// The questions a handshake-era upstream asks, during the `tasks/result` mcpx keeps open
/// for a 2026 caller, waiting for the caller's `tasks/update`.
#[derive(Default)]
struct Questions {
    /// Whether mcpx has a `tasks/result` open to hear them.
    open: bool,
    /// Most kept waiting at once (`limits.pendingQuestions`): the upstream is told no
    /// for one past it, so what it asks never grows what mcpx holds without bound.
    max: usize,
    /// How many were asked: each key (`q<n>`) is used once in the task's life.
    asked: u64,
    /// Those not answered yet, as `inputRequests` shows them.
    waiting: Map<String, Value>,
    /// Where each one's answer goes.
    answers: HashMap<String, tokio::sync::oneshot::Sender<Value>>,
}

/// A copy of what a request about a task needs, taken under the lock.
#[derive(Clone)]
struct Found {
    key: InstanceKey,
    runner: Runner,
    capabilities: Value,
    ttl_ms: u64,
    state: Value,
    ended: tokio::sync::watch::Receiver<bool>,
}

impl Found {
    fn is_ended(&self) -> bool {
        *self.ended.borrow()
    }
}

/// A new task, before it is admitted.
struct New {
    key: InstanceKey,
    runner: Runner,
    ttl_ms: u64,
    state: Value,
    lease: Option<Lease>,
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the tasks whose ttl passed, releasing their instances and stopping the calls
    /// mcpx ran for them (nobody can reach them any more). Every second.
    pub fn sweep(&self) {
        let now = Instant::now();
        let mut tasks = self.lock();
        tasks.retain(|_, e| {
            let keep = e.expires > now;
            if let (false, Runner::Gateway { call }) = (keep, &e.runner) {
                call.abort();
            }
            keep
        });
        let mut listens = self.listens.lock().unwrap_or_else(|p| p.into_inner());
        listens.retain(|id, txs| {
            txs.retain(|tx| !tx.is_closed());
            !txs.is_empty() && tasks.contains_key(id)
        });
    }

    /// Tracks `entry` under `id` unless that would pass `tasks.max` or its client's
    /// `tasks.maxPerClient`: checked and inserted under one lock, so callers racing for
    /// the last slot cannot both take it. A refusal hands the entry back with the setting.
    fn admit(&self, id: String, entry: Entry, config: &TaskConfig) -> Result<(), Box<(Entry, &'static str, usize)>> {
        let mut tasks = self.lock();
        if tasks.len() >= config.max {
            return Err(Box::new((entry, "tasks.max", config.max)));
        }
        if tasks.values().filter(|e| e.client == entry.client).count() >= config.max_per_client {
            return Err(Box::new((entry, "tasks.maxPerClient", config.max_per_client)));
        }
        tasks.insert(id, entry);
        Ok(())
    }

    fn find(&self, id: &str, server: &str, instance: &crate::Owner) -> Option<Found> {
        let tasks = self.lock();
        let now = Instant::now();
        let e = tasks.get(id).filter(|e| e.key.server == server && &e.key.owner == instance && e.expires > now)?;
        Some(Found {
            key: e.key.clone(),
            runner: e.runner.clone(),
            capabilities: e.capabilities.clone(),
            ttl_ms: e.ttl_ms,
            state: e.state.clone(),
            ended: e.ended.subscribe(),
        })
    }

    /// Tells the change stream `tx` of `owner`'s handshake-era session of its tasks'
    /// status changes from now on, until it closes.
    pub(crate) fn tell(&self, owner: String, tx: crate::outbox::Sender) {
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        streams.retain(|_, txs| {
            txs.retain(|tx| !tx.is_closed());
            !txs.is_empty()
        });
        streams.entry(owner).or_default().push(tx);
    }

    /// `notifications/tasks/status` for `owner`'s open change streams; one that is not
    /// read is not waited for (past `limits.maxBufferedNotifications` it is dropped).
    fn announce(&self, owner: &str, task: Value) {
        let streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/tasks/status", "params": task });
        for tx in streams.get(owner).into_iter().flatten() {
            let _ = tx.try_send(note.clone());
        }
    }

    /// Pushes the task `id`'s status changes to the 2026 listen stream `tx` from now on,
    /// until it closes. The caller has opened the id (it is its own).
    pub(crate) fn listen(&self, id: &str, tx: crate::outbox::Sender) {
        let mut listens = self.listens.lock().unwrap_or_else(|p| p.into_inner());
        listens.retain(|_, txs| {
            txs.retain(|tx| !tx.is_closed());
            !txs.is_empty()
        });
        listens.entry(id.to_owned()).or_default().push(tx);
    }

    /// `notifications/tasks` (the task as `tasks/get` would answer it) for the listens of
    /// the task `id`; one that is not read is not waited for.
    fn push(&self, id: &str, task: &Value) {
        let listens = self.listens.lock().unwrap_or_else(|p| p.into_inner());
        let Some(txs) = listens.get(id) else { return };
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/tasks", "params": task });
        for tx in txs {
            let _ = tx.try_send(note.clone());
        }
    }

    /// Records what the task `id` looks like now; once it ended, that is final, its
    /// instance is released and whoever waits for it is woken. A handshake-era caller's
    /// session hears of a new status, and so do the 2026 listens that asked for the task.
    /// Returns the state kept.
    fn update(&self, id: &str, state: Value) -> Option<Value> {
        let (kept, announce) = self.record(id, state)?;
        if let Some((owner, task, era)) = announce {
            self.keep_in_cluster(id);
            match era {
                Era::Legacy => self.announce(&owner, task),
                Era::Modern => self.push(id, &task),
            }
        }
        Some(kept)
    }

    #[allow(clippy::type_complexity)]
    fn record(&self, id: &str, mut state: Value) -> Option<(Value, Option<(String, Value, Era)>)> {
        let mut tasks = self.lock();
        let entry = tasks.get_mut(id)?;
        if *entry.ended.borrow() {
            return Some((entry.state.clone(), None));
        }
        entry.unreachable_since = None;
        let changed = entry.state.get("status") != state.get("status");
        if let Some(s) = state.as_object_mut() {
            for field in ["createdAt", "pollIntervalMs"] {
                if !s.contains_key(field)
                    && let Some(v) = entry.state.get(field)
                {
                    s.insert(field.into(), v.clone());
                }
            }
        }
        if !terminal(&state) && !entry.questions.waiting.is_empty() {
            state["status"] = "input_required".into();
            state["inputRequests"] = Value::Object(entry.questions.waiting.clone());
        } else if state["status"] == "input_required" && entry.era == Era::Modern && entry.asks_on_session() {
            // Its questions come only once mcpx's tasks/result hears them: until one is
            // kept, a 2026 caller has nothing to answer, and an input_required task
            // carries what to answer.
            state["status"] = "working".into();
        }
        entry.state = state;
        if terminal(&entry.state) {
            entry.lease = None;
            entry.ended.send_replace(true);
        }
        let announce = changed.then(|| {
            let task = match entry.era {
                Era::Legacy => render_legacy(id, entry.ttl_ms, &entry.state),
                Era::Modern => render_modern(id, entry.ttl_ms, &entry.state),
            };
            (entry.owner.clone(), task, entry.era)
        });
        Some((entry.state.clone(), announce))
    }

    /// In a cluster, queues the record of 2026 task `id` as it is now to be kept in Redis
    /// for the rest of its ttl. A full queue (Redis slow or down) drops it, logged.
    fn keep_in_cluster(&self, id: &str) {
        let Some(queue) = self.kept.get() else { return };
        // Queued under the lock the state is read under: two changes queue their records
        // in the order they read them, so an older one is never written after a newer.
        let tasks = self.lock();
        let Some(entry) = tasks.get(id).filter(|e| e.era == Era::Modern) else { return };
        let left = entry.expires.saturating_duration_since(Instant::now());
        let record = json!({ "ttlMs": entry.ttl_ms, "state": entry.state }).to_string();
        let queued = queue.try_send((id.to_owned(), entry.owner.clone(), record, left));
        drop(tasks);
        if queued.is_err() {
            tracing::warn!(
                "a task's record was not kept in the cluster's Redis: tasks.max of them are waiting already"
            );
        }
    }

    /// The tasks handed to `owner` (in `era`, or in either), oldest first.
    fn of_owner(&self, owner: &str, era: Option<Era>) -> Vec<(String, u64, Value)> {
        self.page_of_owner(owner, era, 0, usize::MAX).0
    }

    /// At most `size` of the tasks handed to `owner` (in `era`, or in either), oldest
    /// first, from the one created `from`-th on, and where the next page starts if any.
    #[allow(clippy::type_complexity)]
    fn page_of_owner(
        &self,
        owner: &str,
        era: Option<Era>,
        from: u64,
        size: usize,
    ) -> (Vec<(String, u64, Value)>, Option<u64>) {
        let now = Instant::now();
        let tasks = self.lock();
        let mut mine: Vec<(u64, &String, &Entry)> = tasks
            .iter()
            .filter(|(_, e)| e.owner == owner && era.is_none_or(|era| e.era == era) && e.expires > now)
            .filter(|(_, e)| e.seq >= from)
            .map(|(id, e)| (e.seq, id, e))
            .collect();
        mine.sort_by_key(|m| m.0);
        let next = mine.get(size.max(1)).map(|m| m.0);
        let page = mine.into_iter().take(size.max(1)).map(|(_, id, e)| (id.clone(), e.ttl_ms, e.state.clone()));
        (page.collect(), next)
    }
}

/// An upstream's task as mcpx keeps it: the 2026 shape, without the fields mcpx owns.
fn from_modern(mut task: Value) -> Value {
    if let Some(t) = task.as_object_mut() {
        for field in ["resultType", "_meta", "taskId", "ttlMs", "requestState"] {
            t.remove(field);
        }
    }
    task
}

/// A 2025-11-25 `Task` as mcpx keeps it.
fn from_legacy(task: &Value) -> Value {
    let mut state = Map::new();
    for field in ["status", "statusMessage", "createdAt", "lastUpdatedAt"] {
        if let Some(v) = task.get(field) {
            state.insert(field.into(), v.clone());
        }
    }
    if let Some(poll) = task.get("pollInterval").and_then(Value::as_u64) {
        state.insert("pollIntervalMs".into(), poll.into());
    }
    Value::Object(state)
}

/// The task for a 2026 caller.
fn render_modern(id: &str, ttl_ms: u64, state: &Value) -> Value {
    let mut task = Map::new();
    task.insert("taskId".into(), id.into());
    for (k, v) in state.as_object().into_iter().flatten() {
        task.insert(k.clone(), v.clone());
    }
    task.insert("ttlMs".into(), ttl_ms.into());
    Value::Object(task)
}

/// The task for a 2025-11-25 caller: a `Task`, which carries neither result nor error.
fn render_legacy(id: &str, ttl_ms: u64, state: &Value) -> Value {
    let mut task = Map::new();
    task.insert("taskId".into(), id.into());
    for field in ["status", "statusMessage", "createdAt", "lastUpdatedAt"] {
        if let Some(v) = state.get(field) {
            task.insert(field.into(), v.clone());
        }
    }
    if !task.contains_key("statusMessage")
        && let Some(message) = state.pointer("/error/message")
    {
        task.insert("statusMessage".into(), message.clone());
    }
    task.insert("ttl".into(), ttl_ms.into());
    if let Some(poll) = state.get("pollIntervalMs") {
        task.insert("pollInterval".into(), poll.clone());
    }
    Value::Object(task)
}

/// What `tasks/result` answers for an ended task: the call's own result (naming the task
/// in `_meta`), or its error.
fn payload(id: &str, state: &Value) -> Result<Value, Error> {
    if let Some(error) = state.get("error").filter(|e| e.is_object()) {
        let mut e = RpcError::new(
            error.get("code").and_then(Value::as_i64).unwrap_or(mcpx_protocol::code::INTERNAL_ERROR),
            error.get("message").and_then(Value::as_str).unwrap_or("the task failed").to_owned(),
        );
        if let Some(data) = error.get("data") {
            e = e.with_data(data.clone());
        }
        return Err(Error::Relayed(e));
    }
    match (state.get("status").and_then(Value::as_str), state.get("result")) {
        (_, Some(result)) => {
            let mut result = result.clone();
            if let Some(r) = result.as_object_mut() {
                r.insert("_meta".into(), json!({ RELATED_TASK: { "taskId": id } }));
            }
            Ok(result)
        }
        (Some("cancelled"), None) => Err(Error::params(format!("tasks/result: task {id:?} was cancelled"))),
        _ => Err(Error::internal(format!("tasks/result: task {id:?} ended without a result"))),
    }
}

/// The state of a task whose instance exited under it.
fn crashed(key: &InstanceKey, upstream: &mcpx_upstream::Upstream, previous: &Value) -> Value {
    let how = upstream.crash().map(|c| format!(" ({c})")).unwrap_or_default();
    json!({
        "status": "failed",
        "statusMessage": "the server's instance ended while the task ran",
        "createdAt": previous.get("createdAt").cloned().unwrap_or_else(|| now_rfc3339().into()),
        "lastUpdatedAt": now_rfc3339(),
        "error": {
            "code": mcpx_protocol::code::INTERNAL_ERROR,
            "message": format!("server {:?}'s instance ({}) exited while running this task{how}", key.server, key.owner),
        },
    })
}

/// The state of a task whose HTTP server has not been reached for `lost_for`, or no
/// longer knows it (`why`).
fn lost(key: &InstanceKey, why: &str, previous: &Value) -> Value {
    json!({
        "status": "failed",
        "statusMessage": format!("the server stopped answering for the task: {why}"),
        "createdAt": previous.get("createdAt").cloned().unwrap_or_else(|| now_rfc3339().into()),
        "lastUpdatedAt": now_rfc3339(),
        "error": {
            "code": mcpx_protocol::code::INTERNAL_ERROR,
            "message": format!("server {:?} ({}) stopped answering for this task: {why}", key.server, key.owner),
        },
    })
}

/// How the call mcpx ran as a task ended, as the task's state.
fn ran(outcome: Result<Value, Error>, created: &str) -> Value {
    let mut state = json!({ "createdAt": created, "lastUpdatedAt": now_rfc3339(), "pollIntervalMs": OWN_POLL_MS });
    match outcome {
        Ok(result) if result.get("resultType").and_then(Value::as_str) == Some("input_required") => {
            state["status"] = "failed".into();
            state["error"] = json!({
                "code": mcpx_protocol::code::INTERNAL_ERROR,
                "message": "the server asked a question while mcpx ran the call as a task; call it without a task to answer it",
            });
        }
        Ok(mut result) => {
            if let Some(r) = result.as_object_mut() {
                r.remove("resultType");
                r.remove("_meta");
            }
            let failed = result.get("isError").and_then(Value::as_bool) == Some(true);
            state["status"] = if failed { "failed" } else { "completed" }.into();
            state["result"] = result;
        }
        Err(e) => {
            let e = RpcError::from(e);
            state["status"] = "failed".into();
            state["statusMessage"] = e.message.clone().into();
            let mut error = json!({ "code": e.code, "message": e.message });
            if let Some(data) = e.data {
                error["data"] = data;
            }
            state["error"] = error;
        }
    }
    state
}

impl Gateway {
    /// Tracks a new task for the caller and hands out its id, unless a limit refuses it
    /// (then the entry, with its lease, comes back in the error).
    #[allow(clippy::result_large_err)]
    fn track(&self, ctx: &CallContext, task: New) -> Result<String, (Error, Option<Lease>)> {
        let config = self.settings.config();
        let id = self.asks.seal_task(&task.key.server, &task.key.owner, ctx, now_ms().saturating_add(task.ttl_ms));
        let seq = self.task_seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let entry = Entry {
            client: ctx.identity.principal.clone(),
            owner: ctx.identity.owner_key(),
            era: ctx.revision.era(),
            key: task.key,
            runner: task.runner,
            capabilities: ctx.client_capabilities.clone(),
            ttl_ms: task.ttl_ms,
            expires: Instant::now() + Duration::from_millis(task.ttl_ms),
            seq,
            lease: task.lease,
            state: task.state,
            ended: tokio::sync::watch::channel(false).0,
            unreachable_since: None,
            // Kept for the task's life: its follow-ups are journaled as requests of their own.
            caller: mcpx_upstream::Caller { meter: None, ..caller_of(ctx) },
            questions: Questions { max: config.limits.pending_questions, ..Questions::default() },
        };
        if let Err(refused) = self.tasks.admit(id.clone(), entry, &config.tasks) {
            let (entry, setting, limit) = *refused;
            let who = if setting == "tasks.max" { "mcpx tracks" } else { "this client holds" };
            let message = format!("{who} {setting} ({limit}) tasks already; try again later");
            return Err((Error::Limit { message, setting, limit }, entry.lease));
        }
        self.tasks.keep_in_cluster(&id);
        Ok(id)
    }

    /// The longest ttl a task may have: `tasks.maxTtl`, and what the caller asked for.
    pub(crate) fn ttl_cap(&self, asked: Option<u64>) -> u64 {
        let cap = u64::try_from(self.settings.config().tasks.max_ttl.as_millis()).unwrap_or(u64::MAX);
        asked.map_or(cap, |a| a.min(cap))
    }

    /// An upstream answered a caller's request with a task (2026: `resultType: "task"`;
    /// 2025-11-25: a `CreateTaskResult`): the caller gets it under an id of mcpx's own, in
    /// its era's shape, and the instance is held for it until it ends.
    #[allow(clippy::result_large_err)]
    pub(crate) fn adopt_task(
        &self,
        ctx: &CallContext,
        lease: Lease,
        result: Value,
        asked_ttl: Option<u64>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let server = lease.key().server.clone();
        let upstream_era = lease.upstream().facts().era;
        let task = match upstream_era {
            Era::Modern => result.clone(),
            Era::Legacy => result.get("task").cloned().unwrap_or_default(),
        };
        let Some(upstream_id) = task.get("taskId").and_then(Value::as_str).map(str::to_owned) else {
            let e = Error::internal(format!("server {server:?} answered with a task but no taskId"));
            return Err((e, Some(lease)));
        };
        let (offered, state) = match upstream_era {
            Era::Modern => (task.get("ttlMs").and_then(Value::as_u64), from_modern(task.clone())),
            Era::Legacy => (task.get("ttl").and_then(Value::as_u64), from_legacy(&task)),
        };
        let ttl_ms = self.ttl_cap(asked_ttl).min(offered.unwrap_or(u64::MAX));
        let upstream = lease.upstream().clone();
        let runner = Runner::Upstream { upstream: upstream.clone(), id: upstream_id.clone() };
        let new = New { key: lease.key().clone(), runner, ttl_ms, state: state.clone(), lease: Some(lease) };
        let id = match self.track(ctx, new) {
            Ok(id) => id,
            Err((e, lease)) => {
                // Nobody could ever reach it: cancel it rather than leave it running.
                let capabilities = ctx.client_capabilities.clone();
                tokio::spawn(async move {
                    let _ = upstream.request("tasks/cancel", json!({ "taskId": upstream_id }), &capabilities).await;
                });
                return Err((e, lease));
            }
        };
        self.watch_task(id.clone());
        Ok(self.created(ctx, &id, ttl_ms, &state))
    }

    /// The answer that hands a caller a new task, in its era.
    fn created(&self, ctx: &CallContext, id: &str, ttl_ms: u64, state: &Value) -> Value {
        match ctx.revision.era() {
            Era::Modern => {
                let mut task = render_modern(id, ttl_ms, state);
                task.as_object_mut().map(|t| t.insert("resultType".into(), "task".into()));
                task
            }
            Era::Legacy => json!({ "task": render_legacy(id, ttl_ms, state) }),
        }
    }

    /// Runs a call as a task of mcpx's own: `call` goes on under its own lease while the
    /// caller polls, and is aborted (its upstream request cancelled) by `tasks/cancel`.
    pub(crate) fn run_task<F>(
        &self,
        ctx: &CallContext,
        key: InstanceKey,
        asked_ttl: Option<u64>,
        call: F,
    ) -> Result<Value, Error>
    where
        F: Future<Output = Result<Value, Error>> + Send + 'static,
    {
        let gateway = self.shared()?;
        let ttl_ms = self.ttl_cap(asked_ttl);
        let created = now_rfc3339();
        let state = json!({
            "status": "working",
            "createdAt": created,
            "lastUpdatedAt": created,
            "pollIntervalMs": OWN_POLL_MS,
        });
        // Started only once tracked, so a quick call cannot end before its entry exists.
        let (start, started) = tokio::sync::oneshot::channel::<String>();
        let running = tokio::spawn(async move {
            let Ok(id) = started.await else { return };
            let outcome = call.await;
            gateway.tasks.update(&id, ran(outcome, &created));
        });
        let runner = Runner::Gateway { call: running.abort_handle() };
        let new = New { key, runner, ttl_ms, state: state.clone(), lease: None };
        match self.track(ctx, new) {
            Ok(id) => {
                let _ = start.send(id.clone());
                Ok(self.created(ctx, &id, ttl_ms, &state))
            }
            Err((e, _)) => {
                running.abort();
                Err(e)
            }
        }
    }

    /// Follows an upstream's task until it ends or is gone, so its instance is released as
    /// soon as it ends even if the caller never asks again: it polls the task at the
    /// interval the upstream suggests, and a handshake-era upstream's own
    /// `notifications/tasks/status` for it is taken at once. Only the instance that runs
    /// the task is heard, and only under the upstream's id for it: a status for any other
    /// id, or from another instance, touches nothing.
    fn watch_task(&self, id: String) {
        let tasks = self.tasks.clone();
        let gateway = self.me.get().cloned().unwrap_or_default();
        // Heard from now on, before the caller even has the task.
        let mut heard = tasks.lock().get(&id).and_then(|e| match &e.runner {
            Runner::Upstream { upstream, .. } if upstream.facts().era == Era::Legacy => Some(upstream.task_statuses()),
            _ => None,
        });
        tokio::spawn(async move {
            loop {
                let Some(found) = ({
                    let guard = tasks.lock();
                    guard.get(&id).map(|e| (e.runner.clone(), e.key.clone(), e.capabilities.clone(), e.state.clone()))
                }) else {
                    return;
                };
                let (runner, key, capabilities, state) = found;
                if terminal(&state) {
                    return;
                }
                let Runner::Upstream { upstream, id: upstream_id } = runner else { return };
                let every = Duration::from_millis(state.get("pollIntervalMs").and_then(Value::as_u64).unwrap_or(1000));
                let announced = tokio::select! {
                    () = tokio::time::sleep(every.clamp(FASTEST_POLL, SLOWEST_POLL)) => None,
                    announced = announced_status(&mut heard, &upstream_id) => Some(announced),
                };
                let Some(unreachable_for) = gateway.upgrade().map(|g| g.settings.config().tasks.unreachable_for) else {
                    return;
                };
                let (key, capabilities) = (&key, &capabilities);
                match announced {
                    Some(task) => {
                        let mut state = from_legacy(&task);
                        if state.get("lastUpdatedAt").is_none() {
                            state["lastUpdatedAt"] = now_rfc3339().into();
                        }
                        let state = with_payload(&upstream, &upstream_id, capabilities, state).await;
                        keep(&tasks, &id, &upstream, &upstream_id, capabilities, state);
                    }
                    None => {
                        let _ =
                            refresh(&tasks, &id, key, &upstream, &upstream_id, capabilities, &state, unreachable_for)
                                .await;
                    }
                }
            }
        });
    }

    /// This gateway, for work that outlives the request (a call mcpx runs as a task).
    pub(crate) fn shared(&self) -> Result<Arc<Gateway>, Error> {
        self.me.get().and_then(std::sync::Weak::upgrade).ok_or_else(|| Error::internal("the gateway is shutting down"))
    }
}

/// Asks the upstream how its task is doing and keeps the answer; a terminal 2025-11-25
/// task's result is fetched with it, so it outlives the instance. Returns the state kept.
///
/// A stdio instance that exited fails the task at once. A server that answers but no
/// longer knows the task (it restarted) fails it too. A server out of reach (an HTTP
/// server that went away, or a network that did) is given `unreachable_for`, every poll
/// failing, before the task fails; meanwhile the state last seen is answered.
#[allow(clippy::too_many_arguments)]
async fn refresh(
    tasks: &Tasks,
    id: &str,
    key: &InstanceKey,
    upstream: &mcpx_upstream::Upstream,
    upstream_id: &str,
    capabilities: &Value,
    previous: &Value,
    unreachable_for: Duration,
) -> Result<Value, Error> {
    let asked = upstream.request("tasks/get", json!({ "taskId": upstream_id }), capabilities).await;
    let state = match asked {
        Ok(task) => match upstream.facts().era {
            Era::Modern => from_modern(task),
            Era::Legacy => with_payload(upstream, upstream_id, capabilities, from_legacy(&task)).await,
        },
        Err(_) if !upstream.is_alive() => crashed(key, upstream, previous),
        Err(mcpx_upstream::UpstreamError::Rpc(e)) if e.code == mcpx_protocol::code::INVALID_PARAMS => {
            lost(key, &format!("it no longer knows the task ({})", e.message), previous)
        }
        Err(e) if e.is_auth() || matches!(e, mcpx_upstream::UpstreamError::Rpc(_)) => return Err(Error::from(e)),
        Err(e) => {
            let Some((out_of_reach, kept)) = tasks.unreachable(id) else { return Err(Error::from(e)) };
            if out_of_reach < unreachable_for {
                return Ok(kept);
            }
            let why = format!("out of reach for {}s (tasks.unreachableFor): {e}", out_of_reach.as_secs());
            lost(key, &why, previous)
        }
    };
    Ok(keep(tasks, id, upstream, upstream_id, capabilities, state))
}

/// A handshake-era task's state with, once it ended, what its `tasks/result` answers
/// (the result, or a failed task's error), so it outlives the instance.
async fn with_payload(
    upstream: &mcpx_upstream::Upstream,
    upstream_id: &str,
    capabilities: &Value,
    mut state: Value,
) -> Value {
    if !terminal(&state) {
        return state;
    }
    match upstream.request("tasks/result", json!({ "taskId": upstream_id }), capabilities).await {
        Ok(mut result) => {
            result.as_object_mut().map(|r| r.remove("_meta"));
            state["result"] = result;
        }
        Err(mcpx_upstream::UpstreamError::Rpc(e)) if state["status"] == "failed" => {
            let mut error = json!({ "code": e.code, "message": e.message });
            if let Some(data) = e.data {
                error["data"] = data;
            }
            state["error"] = error;
        }
        Err(_) => {}
    }
    state
}

/// Keeps what the upstream says its task looks like now (see `Tasks::update`); a task of
/// a handshake-era upstream that asks a 2026 caller questions gets a `tasks/result` open
/// to hear them. Returns the state kept.
fn keep(
    tasks: &Tasks,
    id: &str,
    upstream: &mcpx_upstream::Upstream,
    upstream_id: &str,
    capabilities: &Value,
    state: Value,
) -> Value {
    let asking = state["status"] == "input_required";
    let kept = tasks.update(id, state.clone()).unwrap_or(state);
    if asking && let Some(caller) = tasks.opens_questions(id) {
        hear_questions(
            tasks.clone(),
            id.to_owned(),
            upstream.clone(),
            upstream_id.to_owned(),
            capabilities.clone(),
            caller,
        );
    }
    kept
}

/// The next `notifications/tasks/status` the instance announces for its task
/// `upstream_id` (the notification's params). Statuses for other ids, and ones that name
/// no status a task can have, are passed over; those that went unheard (too many at once)
/// are left to the next poll. Without an instance to hear, never.
async fn announced_status(heard: &mut Option<tokio::sync::broadcast::Receiver<Value>>, upstream_id: &str) -> Value {
    let Some(receiver) = heard else { return std::future::pending().await };
    loop {
        match receiver.recv().await {
            Ok(task) if task.get("taskId").and_then(Value::as_str) == Some(upstream_id) => {
                let status = task.get("status").and_then(Value::as_str).unwrap_or_default();
                if TERMINAL.contains(&status) || matches!(status, "working" | "input_required") {
                    return task;
                }
            }
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                *heard = None;
                return std::future::pending().await;
            }
        }
    }
}

/// Keeps a `tasks/result` open on a handshake-era upstream whose task asks a 2026 caller
/// questions: the upstream puts them as requests during it, which mcpx keeps as the
/// task's `inputRequests`, each waiting for the caller's `tasks/update` to be answered.
/// The result itself is left to the watcher, which fetches it when it sees the task end.
fn hear_questions(
    tasks: Tasks,
    id: String,
    upstream: mcpx_upstream::Upstream,
    upstream_id: String,
    capabilities: Value,
    caller: mcpx_upstream::Caller,
) {
    let keeper = (tasks.clone(), id.clone());
    let ask: mcpx_upstream::Ask = Arc::new(move |method: String, params: Value| {
        let (tasks, id) = keeper.clone();
        Box::pin(async move {
            let gone = || RpcError::internal(format!("task {id:?} is gone: nobody will answer {method}"));
            let waiting = tasks.keep_question(&id, method.clone(), params).ok_or_else(gone)??;
            waiting.await.map_err(|_| gone())
        })
    });
    let listener =
        mcpx_upstream::Listener { progress_token: None, log_level: None, notify: Arc::new(|_| {}), ask: Some(ask) };
    tokio::spawn(async move {
        let sent = json!({ "taskId": upstream_id });
        let _ = upstream.request_reporting("tasks/result", sent, &capabilities, Some(caller), Some(listener)).await;
        tasks.close_questions(&id);
    });
}

impl Gateway {
    /// Opens a task id for this caller: the task, or the error an unknown id gets.
    fn open_task(&self, ctx: &CallContext, method: &str, params: &Value) -> Result<(String, Found), Error> {
        let Some(id) = params.get("taskId").and_then(Value::as_str) else {
            return Err(Error::params(format!("{method}: taskId must be a string")));
        };
        let unknown = || Error::params(format!("{method}: no task {id:?}"));
        let (server, instance) = self.asks.open_task(id, ctx).ok_or_else(unknown)?;
        let found = self.tasks.find(id, &server, &instance).ok_or_else(unknown)?;
        Ok((id.to_owned(), found))
    }

    /// Which of `ids` a 2026 caller's `subscriptions/listen` gets status pushes for: its
    /// own tasks that are still kept (the others are left out of the acknowledgement,
    /// alike, so it learns nothing of them), each pushed to `tx` from now on.
    pub(crate) fn listen_to_tasks(&self, ctx: &CallContext, ids: &[String], tx: &crate::outbox::Sender) -> Vec<String> {
        let mut honored = Vec::new();
        for id in ids {
            if honored.contains(id) {
                continue;
            }
            if self.open_task(ctx, "subscriptions/listen", &json!({ "taskId": id })).is_ok() {
                self.tasks.listen(id, tx.clone());
                honored.push(id.clone());
            }
        }
        honored
    }

    /// The task as it is now: from the upstream while it runs, else as kept.
    async fn current(&self, id: &str, found: &Found) -> Result<Value, Error> {
        match &found.runner {
            Runner::Upstream { upstream, id: upstream_id } if !found.is_ended() => {
                let unreachable_for = self.settings.config().tasks.unreachable_for;
                let (tasks, key, capabilities) = (&self.tasks, &found.key, &found.capabilities);
                refresh(tasks, id, key, upstream, upstream_id, capabilities, &found.state, unreachable_for).await
            }
            _ => Ok(self.tasks.find_state(id).unwrap_or_else(|| found.state.clone())),
        }
    }

    /// Stops a task: the upstream is told to cancel it, or the call mcpx runs is aborted.
    async fn cancel(&self, id: &str, found: &Found) -> Result<Value, Error> {
        match &found.runner {
            Runner::Gateway { call } => {
                call.abort();
                let created = found.state.get("createdAt").cloned().unwrap_or_default();
                let state = json!({
                    "status": "cancelled",
                    "statusMessage": "cancelled by the caller",
                    "createdAt": created,
                    "lastUpdatedAt": now_rfc3339(),
                    "pollIntervalMs": OWN_POLL_MS,
                });
                Ok(self.tasks.update(id, state.clone()).unwrap_or(state))
            }
            Runner::Upstream { upstream, id: upstream_id } => {
                let sent = json!({ "taskId": upstream_id });
                match upstream.request("tasks/cancel", sent, &found.capabilities).await {
                    Ok(_) => {}
                    Err(_) if !upstream.is_alive() => {}
                    Err(e) if e.is_auth() || matches!(e, mcpx_upstream::UpstreamError::Rpc(_)) => {
                        return Err(Error::from(e));
                    }
                    // Out of reach: the cancellation is mcpx's to record, and the server is
                    // told once it can be.
                    Err(e) => return Ok(self.cancel_unreached(id, found, upstream, upstream_id, &e)),
                }
                self.current(id, found).await
            }
        }
    }

    /// Cancels a task whose server cannot be reached (`why`): the task ends `cancelled`
    /// at once, its instance released, and `tasks/cancel` is sent again in the background
    /// (backing off from `CANCEL_RETRY_FIRST` to `CANCEL_RETRY_LAST`) until the server
    /// answers it or the task's ttl passes.
    fn cancel_unreached(
        &self,
        id: &str,
        found: &Found,
        upstream: &mcpx_upstream::Upstream,
        upstream_id: &str,
        why: &mcpx_upstream::UpstreamError,
    ) -> Value {
        let mut state = json!({
            "status": "cancelled",
            "statusMessage": format!(
                "cancelled by the caller; the server could not be reached to be told ({why}), so mcpx keeps telling it until the task's ttl passes"
            ),
            "createdAt": found.state.get("createdAt").cloned().unwrap_or_else(|| now_rfc3339().into()),
            "lastUpdatedAt": now_rfc3339(),
        });
        if let Some(poll) = found.state.get("pollIntervalMs") {
            state["pollIntervalMs"] = poll.clone();
        }
        let kept = self.tasks.update(id, state.clone()).unwrap_or(state);
        let until = self.tasks.expiry(id).unwrap_or_else(Instant::now);
        let (upstream, sent, capabilities) =
            (upstream.clone(), json!({ "taskId": upstream_id }), found.capabilities.clone());
        tokio::spawn(async move {
            let mut wait = CANCEL_RETRY_FIRST;
            loop {
                tokio::time::sleep(wait.min(until.saturating_duration_since(Instant::now()))).await;
                if Instant::now() >= until {
                    return;
                }
                match upstream.request("tasks/cancel", sent.clone(), &capabilities).await {
                    // Told, or it answered (it knows the task no more, or it already ended).
                    Ok(_) | Err(mcpx_upstream::UpstreamError::Rpc(_)) => return,
                    Err(e) if e.is_auth() => return,
                    Err(_) => wait = (wait * 2).min(CANCEL_RETRY_LAST),
                }
            }
        });
        kept
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` from a 2026 caller.
    pub(crate) async fn task_request(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Answer, Error> {
        if !meta::declares_tasks(&ctx.client_capabilities) {
            let required = json!({ "extensions": { meta::TASKS_EXTENSION: {} } });
            return Err(Error::Relayed(RpcError::missing_capability(required)));
        }
        let (id, found) = match self.open_task(ctx, method, &params) {
            Ok(opened) => opened,
            Err(unknown) => {
                let id = params.get("taskId").and_then(Value::as_str).unwrap_or_default();
                let Some((ttl_ms, state)) = Box::pin(self.left_behind(ctx, id)).await else { return Err(unknown) };
                // Nothing runs it any more: a cancel or an answer has nothing to reach.
                let answer = if method == "tasks/get" { render_modern(id, ttl_ms, &state) } else { json!({}) };
                return Ok(Answer::uncached(answer));
            }
        };
        ctx.reached.set(found.key.clone());
        let ack = || Ok(Answer::uncached(json!({})));
        match method {
            "tasks/get" => {
                let state = self.current(&id, &found).await?;
                Ok(Answer::uncached(render_modern(&id, found.ttl_ms, &state)))
            }
            "tasks/cancel" => {
                if !found.is_ended() {
                    self.cancel(&id, &found).await?;
                }
                ack()
            }
            _ => {
                let Runner::Upstream { upstream, id: upstream_id } = &found.runner else {
                    return Err(Error::params(format!("tasks/update: task {id:?} asks nothing")));
                };
                if found.is_ended() {
                    return ack();
                }
                let answers = params.get("inputResponses").cloned().unwrap_or_else(|| json!({}));
                if upstream.facts().era != Era::Modern {
                    let Some(answers) = answers.as_object() else {
                        return Err(Error::params("tasks/update: inputResponses must be an object"));
                    };
                    self.tasks.answer_questions(&id, answers);
                    return ack();
                }
                let sent = json!({ "taskId": upstream_id, "inputResponses": answers });
                match upstream.request(method, sent, &ctx.client_capabilities).await {
                    Ok(_) => ack(),
                    Err(_) if !upstream.is_alive() => {
                        self.current(&id, &found).await?;
                        ack()
                    }
                    Err(e) => Err(Error::from(e)),
                }
            }
        }
    }

    /// `tasks/get`, `tasks/result`, `tasks/list` or `tasks/cancel` from a 2025-11-25 caller.
    pub(crate) async fn legacy_task_request(
        &self,
        ctx: &CallContext,
        method: &str,
        params: Value,
    ) -> Result<Answer, Error> {
        if ctx.revision != Revision::V2025_11_25 {
            return Err(Error::NoMethod(method.to_owned()));
        }
        if method == "tasks/list" {
            return self.list_tasks(ctx, &params).map(Answer::uncached);
        }
        let (id, found) = self.open_task(ctx, method, &params)?;
        ctx.reached.set(found.key.clone());
        match method {
            "tasks/get" => {
                let state = self.current(&id, &found).await?;
                Ok(Answer::uncached(render_legacy(&id, found.ttl_ms, &state)))
            }
            "tasks/cancel" => {
                if found.is_ended() {
                    let status = found.state.get("status").and_then(Value::as_str).unwrap_or("ended");
                    return Err(Error::params(format!(
                        "tasks/cancel: task {id:?} already ended ({status}); a task in a terminal status cannot be cancelled"
                    )));
                }
                let state = self.cancel(&id, &found).await?;
                Ok(Answer::uncached(render_legacy(&id, found.ttl_ms, &state)))
            }
            _ => self.task_result(ctx, &id, found).await.map(Answer::uncached),
        }
    }

    /// `tasks/list`: the session's own tasks, oldest first, `limits.pageSize` at a time.
    /// The cursor is opaque and the caller's own (`Asks::seal_cursor`): one that was
    /// altered, or issued to another caller, is -32602; an empty one is the start. It
    /// names the next task by its place in creation order, so tasks that expire between
    /// pages shift nothing.
    fn list_tasks(&self, ctx: &CallContext, params: &Value) -> Result<Value, Error> {
        let from = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(c)) if c.is_empty() => 0,
            Some(Value::String(c)) => {
                self.asks.open_cursor(c, ctx).ok_or_else(|| Error::params("tasks/list: invalid cursor"))?
            }
            Some(_) => return Err(Error::params("tasks/list: cursor must be a string")),
        };
        let size = self.settings.config().limits.page_size;
        let (page, next) = self.tasks.page_of_owner(&ctx.identity.owner_key(), Some(Era::Legacy), from, size);
        let tasks: Vec<Value> = page.iter().map(|(id, ttl, state)| render_legacy(id, *ttl, state)).collect();
        let mut result = json!({ "tasks": tasks });
        if let Some(next) = next {
            result["nextCursor"] = self.asks.seal_cursor(ctx, next).into();
        }
        Ok(result)
    }

    /// `tasks/result`: waits until the task ends and answers its result. A handshake-era
    /// upstream's own `tasks/result` is relayed meanwhile, so the questions it asks reach
    /// the caller on its session, naming mcpx's task id.
    async fn task_result(&self, ctx: &CallContext, id: &str, mut found: Found) -> Result<Value, Error> {
        if let Runner::Upstream { upstream, id: upstream_id } = &found.runner
            && upstream.facts().era == Era::Legacy
            && !found.is_ended()
        {
            let listener = ctx.listener.clone().map(|mut l| {
                l.ask = l.ask.map(|ask| renaming(ask, id.to_owned()));
                l
            });
            let sent = json!({ "taskId": upstream_id });
            let relayed = upstream
                .request_reporting("tasks/result", sent, &ctx.client_capabilities, Some(caller_of(ctx)), listener)
                .await;
            if relayed.is_err() || !found.is_ended() {
                self.current(id, &found).await?;
            }
        }
        if let Runner::Upstream { upstream, id: upstream_id } = found.runner.clone()
            && upstream.facts().era == Era::Modern
        {
            self.follow_modern_task(ctx, id, &mut found, &upstream, &upstream_id).await?;
        }
        let _ = found.ended.wait_for(|ended| *ended).await;
        let state = self.tasks.find_state(id).ok_or_else(|| Error::params(format!("tasks/result: no task {id:?}")))?;
        payload(id, &state)
    }
}

impl Gateway {
    /// Follows a 2026 upstream's task for a 2025-11-25 caller's `tasks/result` until it
    /// ends: the questions it asks (`input_required`) are put to the caller on its session,
    /// naming mcpx's task, and the answers sent upstream with `tasks/update`.
    async fn follow_modern_task(
        &self,
        ctx: &CallContext,
        id: &str,
        found: &mut Found,
        upstream: &mcpx_upstream::Upstream,
        upstream_id: &str,
    ) -> Result<(), Error> {
        let ask = ctx.listener.as_ref().and_then(|l| l.ask.clone());
        loop {
            // Gone (its ttl passed): nothing more to follow.
            if self.tasks.find_state(id).is_none() {
                return Ok(());
            }
            let state = self.current(id, found).await?;
            if terminal(&state) {
                return Ok(());
            }
            let asking = state.get("inputRequests").and_then(Value::as_object).filter(|r| !r.is_empty());
            if state["status"] == "input_required"
                && let (Some(ask), Some(requests)) = (&ask, asking)
            {
                let mut answers = Map::new();
                for (key, question) in requests {
                    let method = question.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
                    let mut params = question.get("params").cloned().unwrap_or_else(|| json!({}));
                    if let Some(p) = params.as_object_mut() {
                        p.insert("_meta".into(), json!({ RELATED_TASK: { "taskId": id } }));
                    }
                    answers.insert(key.clone(), ask(method, params).await.map_err(Error::Relayed)?);
                }
                let update = json!({ "taskId": upstream_id, "inputResponses": answers });
                upstream.request("tasks/update", update, &found.capabilities).await.map_err(Error::from)?;
                continue;
            }
            let every = Duration::from_millis(state.get("pollIntervalMs").and_then(Value::as_u64).unwrap_or(1000));
            tokio::select! {
                _ = found.ended.changed() => {}
                () = tokio::time::sleep(every.clamp(FASTEST_POLL, SLOWEST_POLL)) => {}
            }
        }
    }
}

impl Tasks {
    /// When the task `id`'s ttl passes.
    fn expiry(&self, id: &str) -> Option<Instant> {
        self.lock().get(id).map(|e| e.expires)
    }

    fn find_state(&self, id: &str) -> Option<Value> {
        self.lock().get(id).map(|e| e.state.clone())
    }

    /// Whether mcpx should open a `tasks/result` to hear the questions of the task `id`
    /// of a handshake-era upstream for a 2026 caller, now the upstream says it is
    /// `input_required`; if so, it is marked open.
    fn opens_questions(&self, id: &str) -> Option<mcpx_upstream::Caller> {
        let mut tasks = self.lock();
        let entry = tasks.get_mut(id)?;
        if entry.era != Era::Modern || !entry.asks_on_session() || entry.questions.open || *entry.ended.borrow() {
            return None;
        }
        entry.questions.open = true;
        Some(entry.caller.clone())
    }

    /// Keeps a question the upstream asks during the task `id` for its 2026 caller, who
    /// reads it in `inputRequests` and answers it with `tasks/update`; `None` once the task
    /// is gone, an error when as many as `limits.pendingQuestions` already wait.
    fn keep_question(
        &self,
        id: &str,
        method: String,
        mut params: Value,
    ) -> Option<Result<tokio::sync::oneshot::Receiver<Value>, RpcError>> {
        let mut tasks = self.lock();
        let entry = tasks.get_mut(id)?;
        if entry.questions.waiting.len() >= entry.questions.max {
            return Some(Err(RpcError::internal(format!(
                "{} questions of this task already wait for the caller's answers (limits.pendingQuestions)",
                entry.questions.max
            ))));
        }
        // The upstream's task id is its own, never the caller's business.
        if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.remove(RELATED_TASK);
        }
        entry.questions.asked += 1;
        let key = format!("q{}", entry.questions.asked);
        let (tx, rx) = tokio::sync::oneshot::channel();
        entry.questions.waiting.insert(key.clone(), json!({ "method": method, "params": params }));
        entry.questions.answers.insert(key, tx);
        if !terminal(&entry.state) {
            entry.state["status"] = "input_required".into();
            entry.state["inputRequests"] = Value::Object(entry.questions.waiting.clone());
        }
        Some(Ok(rx))
    }

    /// Hands the caller's answers (by key) to the questions waiting for them; an answer to
    /// a key not waiting is ignored, as the extension says.
    fn answer_questions(&self, id: &str, answers: &Map<String, Value>) {
        let mut tasks = self.lock();
        let Some(entry) = tasks.get_mut(id) else { return };
        for (key, answer) in answers {
            if let Some(tx) = entry.questions.answers.remove(key) {
                entry.questions.waiting.remove(key);
                let mut answer = answer.clone();
                answer.as_object_mut().map(|a| a.remove("resultType"));
                let _ = tx.send(answer);
            }
        }
        if let Some(state) = entry.state.as_object_mut().filter(|_| entry.questions.waiting.is_empty()) {
            state.remove("inputRequests");
        } else {
            entry.state["inputRequests"] = Value::Object(entry.questions.waiting.clone());
        }
    }

    /// The `tasks/result` that heard the task's questions ended: those still waiting are
    /// dropped (the upstream no longer waits for them).
    fn close_questions(&self, id: &str) {
        let mut tasks = self.lock();
        let Some(entry) = tasks.get_mut(id) else { return };
        entry.questions.open = false;
        entry.questions.answers.clear();
        entry.questions.waiting.clear();
        if let Some(state) = entry.state.as_object_mut() {
            state.remove("inputRequests");
        }
    }

    /// Notes that a poll of the task's server failed: how long every poll has failed
    /// since (zero for the first), and the state kept meanwhile.
    fn unreachable(&self, id: &str) -> Option<(Duration, Value)> {
        let mut tasks = self.lock();
        let entry = tasks.get_mut(id)?;
        let since = *entry.unreachable_since.get_or_insert_with(Instant::now);
        Some((since.elapsed(), entry.state.clone()))
    }
}

/// An asker that names mcpx's task id, never the upstream's, in a question's `_meta`.
fn renaming(ask: mcpx_upstream::Ask, id: String) -> mcpx_upstream::Ask {
    Arc::new(move |method: String, mut params: Value| {
        if let Some(related) = params.pointer_mut(&format!("/_meta/{}", RELATED_TASK.replace('/', "~1"))) {
            *related = json!({ "taskId": id });
        }
        ask(method, params)
    })
}

/// The tasks of a `/v1` caller (the CLI's `mcpx task`), in the 2026 shape: the same ids,
/// the same binding to the caller's identity, the same answer for another's task as for
/// none.
impl Gateway {
    /// Runs an `mcpx_call` (its params) as a task for a `/v1` caller: the task, or the
    /// call's answer when it came at once (a refusal, a question, a quick error).
    pub async fn start_task(&self, ctx: &CallContext, params: Value) -> Result<Value, Error> {
        let ctx = CallContext { as_task: true, ..ctx.clone() };
        Ok(self.handle(&ctx, "tools/call", params).await?.result)
    }

    /// Every task the caller holds, oldest first, as it was last seen.
    pub fn tasks_of(&self, ctx: &CallContext) -> Vec<Value> {
        let mine = self.tasks.of_owner(&ctx.identity.owner_key(), None);
        mine.iter().map(|(id, ttl, state)| render_modern(id, *ttl, state)).collect()
    }

    /// The caller's task `id` as it is now, after waiting up to `wait` for it to end.
    pub async fn task_now(&self, ctx: &CallContext, id: &str, wait: Duration) -> Result<Value, Error> {
        let (id, mut found) = match self.open_task(ctx, "task", &json!({ "taskId": id })) {
            Ok(opened) => opened,
            Err(unknown) => {
                return self.left_behind(ctx, id).await.map(|(ttl, s)| render_modern(id, ttl, &s)).ok_or(unknown);
            }
        };
        if !wait.is_zero() && !found.is_ended() {
            let mut ended = found.ended.clone();
            let _ = tokio::time::timeout(wait, ended.wait_for(|e| *e)).await;
            found = self.tasks.find_for(&id, &found).unwrap_or(found);
        }
        let state = self.current(&id, &found).await?;
        Ok(render_modern(&id, found.ttl_ms, &state))
    }

    /// Cancels the caller's task `id` (nothing happens to one that ended) and returns it.
    pub async fn cancel_task(&self, ctx: &CallContext, id: &str) -> Result<Value, Error> {
        let (id, found) = match self.open_task(ctx, "task", &json!({ "taskId": id })) {
            Ok(opened) => opened,
            Err(unknown) => {
                return self.left_behind(ctx, id).await.map(|(ttl, s)| render_modern(id, ttl, &s)).ok_or(unknown);
            }
        };
        let state = if found.is_ended() { found.state.clone() } else { self.cancel(&id, &found).await? };
        Ok(render_modern(&id, found.ttl_ms, &state))
    }
}

impl Gateway {
    /// In a cluster, the caller's task `id` as the node that kept it last recorded it in
    /// Redis, once that node no longer holds it (it died, stopped or restarted): its ttl
    /// and its state. A task that had ended, as it ended; one that had not, failed, since
    /// whatever ran it went with that node. `None` outside a cluster, for an id that is
    /// not this caller's, for a task another live node (or one Redis cannot tell is gone)
    /// keeps, and for a task no node kept (or whose ttl passed).
    pub(crate) async fn left_behind(&self, ctx: &CallContext, id: &str) -> Option<(u64, Value)> {
        let cluster = self.instances.cluster.get()?;
        self.asks.open_task(id, ctx)?;
        // Only for a node that is gone (or this one, which has forgotten it): a request
        // answered here without being forwarded (a caller on this node's socket, one
        // forwarded here) may name a task another node still runs, and whoever is told
        // that it failed would make the call again. Unsure (Redis down) is not gone.
        let kept_by = self.asks.task_node(id, ctx).filter(|node| node.id != cluster.node());
        if let Some(node) = kept_by
            && !matches!(cluster.is_live(&node).await, Ok(false))
        {
            return None;
        }
        let record = match cluster.kept_task(id).await {
            Ok(record) => record?,
            Err(e) => {
                tracing::warn!("a task's record in the cluster's Redis could not be read: {e}");
                return None;
            }
        };
        let record: Value = serde_json::from_str(&record).ok()?;
        let (ttl_ms, state) = (record["ttlMs"].as_u64()?, &record["state"]);
        if terminal(state) {
            return Some((ttl_ms, state.clone()));
        }
        let mut failed = json!({
            "status": "failed",
            "statusMessage": "the cluster node that kept this task is gone, and whatever ran it went with that node: make the call again",
            "createdAt": state.get("createdAt").cloned().unwrap_or_else(|| now_rfc3339().into()),
            "lastUpdatedAt": now_rfc3339(),
        });
        if let Some(poll) = state.get("pollIntervalMs") {
            failed["pollIntervalMs"] = poll.clone();
        }
        Some((ttl_ms, failed))
    }

    /// In a cluster, the caller's tasks whose node is gone (or has forgotten them), as
    /// their records say (see [`Gateway::left_behind`]), but those in `listed` (the ids
    /// the live nodes listed) and those this node holds; only those this node sealed and
    /// has forgotten (it restarted) when `forgotten_here` (another node lists the rest);
    /// at most `tasks.max` of them. Empty outside a cluster, or when Redis cannot say
    /// (logged).
    pub async fn tasks_left_behind(
        &self,
        ctx: &CallContext,
        listed: &HashSet<&str>,
        forgotten_here: bool,
    ) -> Vec<Value> {
        let Some(cluster) = self.instances.cluster.get() else { return Vec::new() };
        let limit = listed.len() + self.settings.config().tasks.max;
        let ids = match cluster.task_ids_of(&ctx.identity.owner_key(), limit).await {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!(
                    "listing tasks: the ids of the caller's tasks in the cluster's Redis were not read: {e}"
                );
                return Vec::new();
            }
        };
        let sealed_here = |id: &str| self.asks.task_node(id, ctx).is_none_or(|node| node.id == cluster.node());
        // One this node holds is listed as it is now (it may have been started since the
        // listing read this node's tasks).
        let held = |id: &str| self.open_task(ctx, "task", &json!({ "taskId": id })).is_ok();
        let unlisted = ids
            .into_iter()
            .filter(|id| !listed.contains(id.as_str()) && !held(id) && (!forgotten_here || sealed_here(id)));
        let found = unlisted.map(|id| async move {
            self.left_behind(ctx, &id).await.map(|(ttl, state)| render_modern(&id, ttl, &state))
        });
        futures::future::join_all(found).await.into_iter().flatten().collect()
    }

    /// From now on, in a cluster, each 2026 task's record is kept in Redis at each change
    /// of its status, in order, by one writer (see [`Gateway::left_behind`]). While Redis
    /// is slow, at most `tasks.max` records wait; one past that is not kept (logged), and
    /// the next change of that task's status writes a newer one.
    pub(crate) fn keep_task_records(&self, cluster: Arc<crate::cluster::Cluster>) {
        let waiting = self.settings.config().tasks.max.max(1);
        let (queue, mut records) = tokio::sync::mpsc::channel::<KeptTask>(waiting);
        if self.tasks.kept.set(queue).is_err() {
            return;
        }
        tokio::spawn(async move {
            while let Some((id, owner, record, left)) = records.recv().await {
                if let Err(e) = cluster.keep_task(&id, &owner, &record, left).await {
                    tracing::warn!("a task's record was not kept in the cluster's Redis: {e}");
                }
            }
        });
    }
}

impl Tasks {
    /// `found` again, as the task is now.
    fn find_for(&self, id: &str, found: &Found) -> Option<Found> {
        self.find(id, &found.key.server, &found.key.owner)
    }
}
