//! Questions mcpx puts to a handshake-era caller on behalf of an upstream that asked
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`): sent as requests on the
//! caller's connection (its SSE response stream, its stdio), answered by the responses the
//! caller sends back on the same session or stream.
//!
//! A caller is only asked for what its `initialize` capabilities declare; otherwise the
//! upstream gets an error at once. An unanswered question expires, so nothing waits forever.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpx_gateway::Ask;
use mcpx_protocol::message::request;
use mcpx_protocol::{RequestId, RpcError, code};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::dispatch::Notify;

type Answer = Result<Value, RpcError>;

/// The questions one session or stream has open.
#[derive(Default)]
pub struct Questions {
    open: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    next: AtomicU64,
}

impl std::fmt::Debug for Questions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Questions").finish_non_exhaustive()
    }
}

impl Questions {
    /// How many questions wait for this caller's answer (the status page).
    pub fn count(&self) -> usize {
        self.open.lock().expect("questions lock").len()
    }

    /// Hands the caller's response to the question it answers. False when it answers
    /// nothing mcpx asked (unknown or expired id).
    pub fn answer(&self, id: &RequestId, outcome: Answer) -> bool {
        let RequestId::String(id) = id else { return false };
        match self.open.lock().expect("questions lock").remove(id) {
            Some(waiting) => waiting.send(outcome).is_ok(),
            None => false,
        }
    }

    /// How an upstream's question reaches this caller: as a request through `notify`,
    /// if `capabilities` declare what it needs.
    pub fn asker(self: &Arc<Self>, notify: Notify, capabilities: Value, expiry: Duration) -> Ask {
        let questions = self.clone();
        Arc::new(move |method: String, params: Value| {
            if !mcpx_gateway::caller_can_answer(&capabilities, &method) {
                let e = RpcError::new(code::METHOD_NOT_FOUND, format!("the client cannot be asked for {method}"));
                return Box::pin(std::future::ready(Err(e)));
            }
            let id = format!("mcpx-q-{}", questions.next.fetch_add(1, Ordering::Relaxed));
            let (tx, rx) = oneshot::channel();
            questions.open.lock().expect("questions lock").insert(id.clone(), tx);
            notify(request(&RequestId::String(id.clone()), &method, params));
            let questions = questions.clone();
            Box::pin(async move {
                let outcome = tokio::time::timeout(expiry, rx).await;
                questions.open.lock().expect("questions lock").remove(&id);
                match outcome {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(_)) => Err(RpcError::internal("the caller went away before answering")),
                    Err(_) => Err(RpcError::internal(format!("the caller did not answer {method} within {expiry:?}"))),
                }
            })
        })
    }
}
