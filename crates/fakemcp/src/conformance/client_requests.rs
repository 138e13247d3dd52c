//! How a legacy tool call asks the client something and gets the answer back.
//!
//! In a 2025-11-25 session the server may send its own JSON-RPC requests
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`) while it handles a call.
//! The asking tool thread writes the request with a fakemcp-minted id and blocks; the stdin
//! reader, which sees the client's response interleaved with new requests, hands it over
//! by id. Modern requests never come here: 2026-07-28 servers do not send requests.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

use serde_json::Value;

use crate::wire::{INTERNAL_ERROR, Output, RpcError};

/// How long a tool waits for the client to answer one of fakemcp's requests.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

pub struct ClientRequests {
    out: Output,
    next_id: AtomicU64,
    /// Requests sent and not yet answered, by id, with where the answer goes.
    waiting: Mutex<HashMap<String, Sender<Result<Value, RpcError>>>>,
}

impl ClientRequests {
    pub fn new(out: Output) -> Self {
        ClientRequests { out, next_id: AtomicU64::new(1), waiting: Mutex::default() }
    }

    /// Sends `method` to the client and waits for its answer: the result, the client's
    /// error, or an internal error once the wait times out.
    pub fn ask(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        let id = format!("fakemcp-{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        let (answer, answered) = mpsc::channel();
        self.lock().insert(id.clone(), answer);
        self.out.request(&Value::String(id.clone()), method, params);
        let outcome = answered.recv_timeout(ANSWER_TIMEOUT);
        self.lock().remove(&id);
        outcome.unwrap_or_else(|_| {
            Err(RpcError::new(INTERNAL_ERROR, format!("the client did not answer {method} within {ANSWER_TIMEOUT:?}")))
        })
    }

    /// Hands a response read from stdin to the call waiting for it. Returns false when no
    /// call is waiting for that id (a late or stray response), which is then dropped.
    pub fn deliver(&self, id: &Value, outcome: Result<Value, RpcError>) -> bool {
        let Some(id) = id.as_str() else {
            return false;
        };
        match self.lock().remove(id) {
            Some(waiter) => waiter.send(outcome).is_ok(),
            None => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Sender<Result<Value, RpcError>>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}
