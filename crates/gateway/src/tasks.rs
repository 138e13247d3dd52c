//! Tasks an upstream hands a 2026-07-28 caller (the `io.modelcontextprotocol/tasks`
//! extension), relayed under ids of mcpx's own.
//!
//! When an upstream answers a caller's request with a task (`resultType: "task"`), the
//! caller never sees the upstream's task id. It gets one mcpx seals (`ask::Asks::seal_task`:
//! HMAC with the daemon's key) over the server and instance that run the task, the
//! caller's identity (`owner_key`) and an expiry; mcpx keeps the upstream's id, and a
//! lease on the instance, under it. `tasks/get`, `tasks/update` and `tasks/cancel` open
//! the id first: one that was altered, has expired, or was issued to another caller is
//! refused exactly like an id that never existed (-32602), so nobody can read, answer or
//! cancel another's task, nor learn that it exists.
//!
//! The lease keeps the instance from being reaped or stopped for idleness until the task
//! ends (a `tasks/get` that reports a terminal status, kept here and answered from here
//! afterwards) or its ttl passes (`tasks.maxTtl` at most; swept every second). An
//! instance that exits while a task runs ends it as `failed`, with an error that says so.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mcpx_protocol::{RpcError, meta};
use serde_json::{Value, json};

use crate::ask::now_ms;
use crate::config::TaskConfig;
use crate::error::Error;
use crate::identity::Principal;
use crate::scope::InstanceKey;
use crate::{Answer, CallContext, Gateway, Lease};

/// The task methods a 2026 caller may send.
pub const METHODS: [&str; 3] = ["tasks/get", "tasks/update", "tasks/cancel"];

const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];

pub fn is_task(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("task")
}

/// The tasks mcpx relays, by the id it handed out.
#[derive(Default)]
pub(crate) struct Tasks {
    entries: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    /// The client the task was handed to, counted against `tasks.maxPerClient`.
    client: Principal,
    key: InstanceKey,
    upstream_id: String,
    ttl_ms: u64,
    expires: Instant,
    /// The instance's connection, which requests about the task go on.
    upstream: mcpx_upstream::Upstream,
    /// Holds the instance while the task may still run; `None` once it ended.
    lease: Option<Lease>,
    /// The task as it ended, answered from here from then on.
    ended: Option<Value>,
}

/// What a request about a task finds.
enum Found {
    Running { key: InstanceKey, upstream: mcpx_upstream::Upstream, upstream_id: String, ttl_ms: u64 },
    Ended(Value),
}

impl Tasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops the tasks whose ttl passed, releasing their instances. Every second.
    pub fn sweep(&self) {
        let now = Instant::now();
        self.lock().retain(|_, e| e.expires > now);
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

    /// Records how the task `id` ended and releases its instance.
    fn end(&self, id: &str, task: &Value) {
        if let Some(entry) = self.lock().get_mut(id) {
            let mut ended = task.clone();
            ended.as_object_mut().map(|t| t.remove("_meta"));
            entry.ended = Some(ended);
            entry.lease = None;
        }
    }
}

impl Gateway {
    /// An upstream answered a caller's request with a task: the caller gets it under an id
    /// of mcpx's own, and the instance is held for it. Returns what the send path does.
    #[allow(clippy::result_large_err)]
    pub(crate) fn adopt_task(
        &self,
        ctx: &CallContext,
        lease: Lease,
        mut result: Value,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let server = lease.key().server.clone();
        let Some(upstream_id) = result.get("taskId").and_then(Value::as_str).map(str::to_owned) else {
            let e = Error::internal(format!("server {server:?} answered with a task but no taskId"));
            return Err((e, Some(lease)));
        };
        let config = self.settings.config();
        let cap = u64::try_from(config.tasks.max_ttl.as_millis()).unwrap_or(u64::MAX);
        let ttl_ms = result.get("ttlMs").and_then(Value::as_u64).map_or(cap, |t| t.min(cap));
        let id = self.asks.seal_task(&server, &lease.key().owner, ctx, now_ms().saturating_add(ttl_ms));
        let entry = Entry {
            client: ctx.identity.principal.clone(),
            key: lease.key().clone(),
            upstream_id,
            ttl_ms,
            expires: Instant::now() + Duration::from_millis(ttl_ms),
            upstream: lease.upstream().clone(),
            lease: Some(lease),
            ended: None,
        };
        if let Err(refused) = self.tasks.admit(id.clone(), entry, &config.tasks) {
            let (entry, setting, limit) = *refused;
            // Nobody could ever reach it: cancel it rather than leave it running.
            let (upstream, upstream_id) = (entry.upstream, entry.upstream_id);
            let capabilities = ctx.client_capabilities.clone();
            tokio::spawn(async move {
                let _ = upstream.request("tasks/cancel", json!({ "taskId": upstream_id }), &capabilities).await;
            });
            let who = if setting == "tasks.max" { "mcpx tracks" } else { "this client holds" };
            let message = format!("{who} {setting} ({limit}) tasks already; try again later");
            return Err((Error::Limit { message, setting, limit }, entry.lease));
        }
        if let Some(r) = result.as_object_mut() {
            r.insert("taskId".into(), id.into());
            r.insert("ttlMs".into(), ttl_ms.into());
            r.remove("requestState");
            r.remove("_meta");
        }
        Ok(result)
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` from a 2026 caller.
    pub(crate) async fn task_request(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Answer, Error> {
        if !meta::declares_tasks(&ctx.client_capabilities) {
            let required = json!({ "extensions": { meta::TASKS_EXTENSION: {} } });
            return Err(Error::Relayed(RpcError::missing_capability(required)));
        }
        let Some(id) = params.get("taskId").and_then(Value::as_str) else {
            return Err(Error::params(format!("{method}: taskId must be a string")));
        };
        let unknown = || Error::params(format!("{method}: no task {id:?}"));
        let (server, instance) = self.asks.open_task(id, ctx).ok_or_else(unknown)?;
        let found = {
            let tasks = self.tasks.lock();
            let entry = tasks.get(id).filter(|e| e.key.server == server && e.key.owner == instance);
            match entry {
                None => return Err(unknown()),
                Some(Entry { ended: Some(task), .. }) => Found::Ended(task.clone()),
                Some(Entry { key, upstream_id, ttl_ms, upstream, .. }) => Found::Running {
                    key: key.clone(),
                    upstream: upstream.clone(),
                    upstream_id: upstream_id.clone(),
                    ttl_ms: *ttl_ms,
                },
            }
        };
        let ack = || Ok(Answer::uncached(json!({})));
        let (key, upstream, upstream_id, ttl_ms) = match found {
            Found::Ended(task) if method == "tasks/get" => return Ok(Answer::uncached(task)),
            Found::Ended(_) => return ack(),
            Found::Running { key, upstream, upstream_id, ttl_ms } => (key, upstream, upstream_id, ttl_ms),
        };
        let _ = ctx.reached.set(key.clone());
        let mut sent = json!({ "taskId": upstream_id });
        if method == "tasks/update" {
            sent["inputResponses"] = params.get("inputResponses").cloned().unwrap_or_else(|| json!({}));
        }
        let answered = upstream.request(method, sent, &ctx.client_capabilities).await;
        let mut task = match answered {
            Ok(task) => task,
            Err(_) if !upstream.is_alive() => {
                let how = upstream.crash().map(|c| format!(" ({c})")).unwrap_or_default();
                let failed = json!({
                    "taskId": id,
                    "status": "failed",
                    "statusMessage": "the server's instance ended while the task ran",
                    "ttlMs": ttl_ms,
                    "error": {
                        "code": mcpx_protocol::code::INTERNAL_ERROR,
                        "message": format!("server {:?}'s instance ({}) exited while running this task{how}", key.server, key.owner),
                    },
                });
                self.tasks.end(id, &failed);
                return if method == "tasks/get" { Ok(Answer::uncached(failed)) } else { ack() };
            }
            Err(e) => return Err(Error::from(e)),
        };
        if method != "tasks/get" {
            return ack();
        }
        if let Some(t) = task.as_object_mut() {
            t.insert("taskId".into(), id.into());
            t.insert("ttlMs".into(), ttl_ms.into());
            t.remove("requestState");
        }
        if task.get("status").and_then(Value::as_str).is_some_and(|s| TERMINAL.contains(&s)) {
            self.tasks.end(id, &task);
        }
        Ok(Answer::uncached(task))
    }
}
