//! mcpx as the task runner: when a tool call becomes a task mcpx runs itself, instead of
//! an answer the caller waits for.
//!
//! Across eras, the upstream's own task is relayed when it runs tasks: a 2025-11-25
//! caller's task-augmented call to a 2026 upstream that declares the tasks extension is
//! sent with the extension declared, and a 2026 caller's call (extension declared) of a
//! tool a 2025-11-25 upstream runs as a task (`execution.taskSupport`) is sent with
//! `params.task`; either way the caller sees its own era's task (`tasks`).
//!
//! Otherwise mcpx runs the task: a 2025-11-25 caller's task-augmented `tools/call` to an
//! upstream that runs no tasks, and a 2026 caller's call, under `tasks.after`, still
//! unanswered after that long. Either way the call goes on in
//! a task of its own, holding its instance's lease as any call in flight does, and the
//! caller gets a task it polls (`tasks`); `tasks/cancel` aborts the call, which cancels
//! the request upstream. Nobody can answer the call's questions once it runs as a task:
//! it runs without the caller's listener.

use std::time::Duration;

use serde_json::{Value, json};

use crate::asking::{Caller as _, OnSession, Stateless};
use crate::error::Error;
use crate::{CallContext, Gateway, Lease, caller_of, tasks};

/// Aborts a spawned call when dropped: a task mcpx runs is cancelled by aborting it.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Gateway {
    /// A 2025-11-25 caller's task-augmented `tools/call` (`params.task`, its ttl asked for
    /// there), on `lease`'s instance: relayed to a handshake-era upstream that runs tasks
    /// (`OnSession` adopts the task it answers), else run by mcpx as a task of its own,
    /// the upstream seeing a plain call.
    pub(crate) async fn legacy_task_call(
        &self,
        ctx: &CallContext,
        lease: Lease,
        mut params: Value,
        original: Option<Value>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let asked = params.pointer("/task/ttl").and_then(Value::as_u64);
        if tasks::upstream_runs_tasks(&lease) {
            // The upstream decides which of its tools run as tasks: one it lists as
            // forbidden (or says nothing of) is refused as the revision says.
            let tool = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
            let listed = crate::listed(self, ctx, &lease, "tools/list", "tools").await.map(|l| l.0);
            let support = listed.map(|l| tasks::task_support(&l, &tool)).unwrap_or_else(|_| "optional".into());
            if support == "forbidden" {
                let server = &lease.key().server;
                let message = format!(
                    "tools/call: server {server:?}'s tool {tool:?} cannot run as a task (its execution.taskSupport is forbidden); call it without \"task\""
                );
                let refused = mcpx_protocol::RpcError::new(mcpx_protocol::code::METHOD_NOT_FOUND, message);
                return Err((Error::Relayed(refused), Some(lease)));
            }
            params["task"] = json!({ "ttl": self.ttl_cap(asked) });
            return OnSession.send(self, ctx, lease, "tools/call", params, original.as_ref()).await;
        }
        params.as_object_mut().map(|p| p.remove("task"));
        if tasks::upstream_has_extension(&lease) {
            return self.relay_as_modern_task(ctx, lease, params, original, asked).await;
        }
        let gateway = match self.shared() {
            Ok(gateway) => gateway,
            Err(e) => return Err((e, Some(lease))),
        };
        let key = lease.key().clone();
        // Nobody hears the call's progress, and nobody can answer its questions, once
        // its request has been answered with the task.
        let quiet = ctx.clone().with_listener(None);
        let call = async move {
            OnSession.send(&gateway, &quiet, lease, "tools/call", params, original.as_ref()).await.map_err(|(e, _)| e)
        };
        self.run_task(ctx, key, asked, call).map_err(|e| (e, None))
    }

    /// A 2026 caller's `tools/call` under `tasks.after`: answered as usual when the
    /// upstream answers within `after`, else turned into a task mcpx runs, the call going
    /// on under its lease. An upstream that runs tasks itself is left to do so.
    pub(crate) async fn call_or_task(
        &self,
        ctx: &CallContext,
        lease: Lease,
        params: Value,
        original: Option<Value>,
        after: Duration,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let gateway = match self.shared() {
            Ok(gateway) => gateway,
            Err(e) => return Err((e, Some(lease))),
        };
        let key = lease.key().clone();
        let call_ctx = ctx.clone();
        let mut call = AbortOnDrop(tokio::spawn(async move {
            Stateless
                .send(&gateway, &call_ctx, lease, "tools/call", params, original.as_ref())
                .await
                .map_err(|(e, _)| e)
        }));
        let joined = |j: Result<Result<Value, Error>, tokio::task::JoinError>| {
            j.unwrap_or_else(|e| Err(Error::internal(format!("the call ended unexpectedly: {e}"))))
        };
        match tokio::time::timeout(after, &mut call.0).await {
            Ok(done) => joined(done).map_err(|e| (e, None)),
            Err(_) => {
                let running = async move { joined((&mut call.0).await) };
                self.run_task(ctx, key, None, running).map_err(|e| (e, None))
            }
        }
    }
}

impl Gateway {
    /// A 2025-11-25 caller's task-augmented call to a 2026 upstream that runs tasks: sent
    /// with the extension declared, so the upstream's task (relayed in the caller's era)
    /// or its answer at once (kept as a task that already ended) comes back.
    async fn relay_as_modern_task(
        &self,
        ctx: &CallContext,
        lease: Lease,
        params: Value,
        original: Option<Value>,
        asked: Option<u64>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let _ = original;
        let mut capabilities = ctx.client_capabilities.clone();
        capabilities["extensions"] = json!({ mcpx_protocol::meta::TASKS_EXTENSION: {} });
        let ctx = CallContext { client_capabilities: capabilities, ..ctx.clone() };
        let sent = lease
            .upstream()
            .request_reporting("tools/call", params, &ctx.client_capabilities, Some(caller_of(&ctx)), None)
            .await;
        match sent {
            Ok(result) if tasks::is_task(&result) => self.adopt_task(&ctx, lease, result, asked),
            answered => {
                let key = lease.key().clone();
                drop(lease);
                let answered = answered.map_err(Error::from);
                self.run_task(&ctx, key, asked, async move { answered }).map_err(|e| (e, None))
            }
        }
    }

    /// A 2026 caller's call (extension declared) to a 2025-11-25 upstream that runs tasks:
    /// a tool it runs as a task (`execution.taskSupport` optional or required) is sent
    /// with `params.task` and its task relayed; any other goes on as `next` says.
    pub(crate) async fn call_legacy_task_tool(
        &self,
        ctx: &CallContext,
        lease: Lease,
        mut params: Value,
        next: impl AsyncFnOnce(Lease, Value) -> Result<Value, (Error, Option<Lease>)>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let tool = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let listed = crate::listed(self, ctx, &lease, "tools/list", "tools").await.map(|l| l.0).unwrap_or_default();
        let support = tasks::task_support(&listed, &tool);
        if !matches!(support.as_str(), "optional" | "required") {
            return next(lease, params).await;
        }
        params["task"] = json!({ "ttl": self.ttl_cap(None) });
        let sent = lease
            .upstream()
            .request_reporting("tools/call", params, &ctx.client_capabilities, Some(caller_of(ctx)), None)
            .await;
        match sent {
            Ok(result) if result.get("task").is_some_and(Value::is_object) => self.adopt_task(ctx, lease, result, None),
            Ok(result) => Ok(result),
            Err(e) => Err((Error::from(e), Some(lease))),
        }
    }
}
