//! `subscriptions/listen`: which changes a 2026-07-28 caller hears about, fanned in from
//! every upstream instance its identity reaches.
//!
//! A caller asks for kinds of change (tools, prompts, resources lists); mcpx acknowledges
//! the kinds it can deliver and relays each upstream's change notifications of those
//! kinds until the caller stops listening. The caller's instances are held (not reaped)
//! while it listens. Resource subscriptions are not relayed yet, so they are not
//! acknowledged.

use mcpx_protocol::RpcError;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::{CallContext, Gateway, Lease};

const KINDS: [(&str, &str); 3] = [
    ("toolsListChanged", "notifications/tools/list_changed"),
    ("promptsListChanged", "notifications/prompts/list_changed"),
    ("resourcesListChanged", "notifications/resources/list_changed"),
];

/// One open listen. Dropping it stops relaying and releases the instances.
pub struct Watch {
    /// The filter mcpx honours: the subset of what was asked that it can deliver.
    pub honored: Value,
    /// Change notifications, untagged (the front end tags them with the listen's id).
    pub changes: mpsc::UnboundedReceiver<Value>,
    _relays: Vec<Relay>,
}

struct Relay {
    task: tokio::task::JoinHandle<()>,
    _lease: Lease,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Gateway {
    pub async fn watch(&self, ctx: &CallContext, params: &Value) -> Result<Watch, RpcError> {
        let filter = match params.get("notifications") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(f)) => f.clone(),
            Some(_) => return Err(RpcError::invalid_params("subscriptions/listen: \"notifications\" must be an object")),
        };
        let wanted: Vec<&str> =
            KINDS.iter().filter(|(flag, _)| filter.get(*flag) == Some(&Value::Bool(true))).map(|(_, method)| *method).collect();
        let honored: Map<String, Value> =
            KINDS.iter().filter(|(_, m)| wanted.contains(m)).map(|(flag, _)| (flag.to_string(), json!(true))).collect();
        let (tx, rx) = mpsc::unbounded_channel();
        let mut relays = Vec::new();
        let config = self.settings.config();
        for server in config.mcp_servers.keys() {
            // Only exposed servers' tools are listed by mcpx, so only their tool changes matter.
            let kinds: Vec<&str> = wanted
                .iter()
                .copied()
                .filter(|m| *m != "notifications/tools/list_changed" || config.expose.contains(server))
                .collect();
            if kinds.is_empty() {
                continue;
            }
            let lease = match self.lease(ctx, server).await {
                Ok(lease) => lease,
                Err(e) => {
                    tracing::warn!(server, "not watched for changes: {}", e.message);
                    continue;
                }
            };
            let Some(mut changes) = lease.upstream().changes() else { continue };
            let tx = tx.clone();
            let task = tokio::spawn(async move {
                loop {
                    match changes.recv().await {
                        Ok(change) if change["method"].as_str().is_some_and(|m| kinds.contains(&m)) => {
                            if tx.send(change).is_err() {
                                return;
                            }
                        }
                        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                    }
                }
            });
            relays.push(Relay { task, _lease: lease });
        }
        Ok(Watch { honored: Value::Object(honored), changes: rx, _relays: relays })
    }
}
