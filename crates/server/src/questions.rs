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

/// A question open in [`Questions`], closed when dropped.
struct Open {
    questions: Arc<Questions>,
    id: String,
}

impl Drop for Open {
    fn drop(&mut self) {
        self.questions.open.lock().expect("questions lock").remove(&self.id);
    }
}

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
            // Given up however the wait ends: answered, expired, or dropped (the call it
            // is about ended, a relayed one's owner went).
            let open = Open { questions: questions.clone(), id };
            Box::pin(async move {
                let outcome = tokio::time::timeout(expiry, rx).await;
                drop(open);
                match outcome {
                    Ok(Ok(answer)) => answer,
                    Ok(Err(_)) => Err(RpcError::internal("the caller went away before answering")),
                    Err(_) => Err(RpcError::internal(format!("the caller did not answer {method} within {expiry:?}"))),
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A question whose wait is dropped (the call it is about ended) is no longer open:
    /// nothing the caller sends later answers it, and it is not counted as waiting.
    #[tokio::test]
    async fn a_question_given_up_is_closed() {
        let questions = Arc::new(Questions::default());
        let asked = Arc::new(Mutex::new(Vec::new()));
        let heard = asked.clone();
        let notify: Notify = Arc::new(move |frame| heard.lock().unwrap().push(frame));
        let ask = questions.asker(notify, serde_json::json!({"elicitation": {}}), Duration::from_secs(60));
        let waiting = ask("elicitation/create".into(), serde_json::json!({"message": "?"}));
        assert_eq!(questions.count(), 1);
        drop(waiting);
        assert_eq!(questions.count(), 0, "a given-up question is still open");
        let id = RequestId::from_value(&asked.lock().unwrap()[0]["id"]).expect("the question's id");
        assert!(!questions.answer(&id, Ok(Value::Null)), "a given-up question took an answer");
    }
}
