//! Calls held open while a stateless (2026) caller answers a question that a handshake-era
//! upstream asked in the middle of the call (`elicitation/create`, `sampling/createMessage`,
//! `roots/list` sent as requests on the upstream's connection).
//!
//! Such an upstream cannot be retried: it waits, inside the call, for its answer. So mcpx
//! keeps the upstream call running, returns `input_required` to the caller with the
//! question, and parks the call (with its instance, which must not be reaped meanwhile)
//! under a token sealed into the caller's `requestState`. The caller's retry brings the
//! answers; mcpx hands them to the waiting upstream and waits for the result or the next
//! question. A parked call that nobody resumes expires and is cancelled.
//!
//! A question reaches a held call only when the upstream connection says it is this
//! call's: it names the call's id, or its caller is the only one with requests in flight
//! on the instance. Another caller's question is never handed to a parked call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mcpx_protocol::RpcError;
use mcpx_upstream::{Ask, UpstreamError};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::Lease;
use crate::journal::Reached;

/// Where a held call's token travels inside the sealed `requestState`.
pub const HELD_KEY: &str = "dev.mcpx/held";

type Reply = oneshot::Sender<Result<Value, RpcError>>;

/// A question from the upstream: method, params, and where its answer goes.
pub struct Question {
    method: String,
    params: Value,
    reply: Reply,
}

/// An upstream call in flight on behalf of a stateless caller.
pub struct Held {
    call: Call,
    questions: mpsc::UnboundedReceiver<Question>,
    /// Questions put to the caller, by the key they were asked under.
    open: Vec<(String, Question)>,
    asked: usize,
    pub lease: Lease,
    /// The request the call is journaled for now: the first, then each retry that resumed it.
    reach: Reached,
}

/// What a held call did next.
pub enum Next {
    Finished(Result<Value, UpstreamError>, Lease),
    /// The upstream asks: the `inputRequests` to send, and the call to park.
    Asks(Value, Held),
}

impl Held {
    /// An `Ask` for the upstream's questions, and the receiving end a held call reads.
    /// A question the caller's `capabilities` do not cover is declined at once.
    pub fn asker(capabilities: Value) -> (Ask, mpsc::UnboundedReceiver<Question>) {
        let (tx, rx) = mpsc::unbounded_channel::<Question>();
        let ask: Ask = Arc::new(move |method: String, params| {
            if !crate::ask::caller_can_answer(&capabilities, &method) {
                let e = RpcError::new(
                    mcpx_protocol::code::METHOD_NOT_FOUND,
                    format!("the client cannot be asked for {method}"),
                );
                return Box::pin(std::future::ready(Err(e)));
            }
            let (reply, answer) = oneshot::channel();
            let sent = tx.send(Question { method, params, reply }).is_ok();
            Box::pin(async move {
                match answer.await {
                    Ok(outcome) if sent => outcome,
                    _ => Err(RpcError::internal("the caller did not answer")),
                }
            })
        });
        (ask, rx)
    }

    /// A call made for the request `reach` journals (its upstream call meters into it).
    pub fn new(
        call: JoinHandle<Result<Value, UpstreamError>>,
        questions: mpsc::UnboundedReceiver<Question>,
        lease: Lease,
        reach: Reached,
    ) -> Held {
        Held { call: Call(call), questions, open: Vec::new(), asked: 0, lease, reach }
    }

    /// The call goes on for the request `reach` journals (the caller's retry): what its
    /// upstream call exchanges from now on is that request's.
    pub fn taken_over_by(&mut self, reach: &Reached) {
        self.reach.hand_over(reach, self.lease.key());
        self.reach = reach.clone();
    }

    /// Hands the caller's answers to the questions they answer; the rest stay open.
    pub fn answer(&mut self, responses: Option<&Map<String, Value>>) {
        let open = std::mem::take(&mut self.open);
        for (key, question) in open {
            match responses.and_then(|r| r.get(&key)) {
                Some(answer) => {
                    let _ = question.reply.send(Ok(answer.clone()));
                }
                None => self.open.push((key, question)),
            }
        }
    }

    /// Waits for the call to finish or to ask something.
    pub async fn next(mut self) -> Next {
        if self.open.is_empty() {
            tokio::select! {
                done = &mut self.call.0 => {
                    let outcome = done.unwrap_or_else(|e| Err(UpstreamError::Rpc(RpcError::internal(format!("the call failed: {e}")))));
                    return Next::Finished(outcome, self.lease);
                }
                Some(question) = self.questions.recv() => {
                    self.asked += 1;
                    self.open.push((format!("q{}", self.asked), question));
                }
            }
        }
        // Everything the upstream asked so far goes to the caller in one round.
        while let Ok(question) = self.questions.try_recv() {
            self.asked += 1;
            self.open.push((format!("q{}", self.asked), question));
        }
        let requests: Map<String, Value> =
            self.open.iter().map(|(key, q)| (key.clone(), json!({ "method": q.method, "params": q.params }))).collect();
        Next::Asks(Value::Object(requests), self)
    }
}

/// The upstream call of a held request: cancelled when the held request is dropped
/// (expired, or its daemon stopping).
struct Call(JoinHandle<Result<Value, UpstreamError>>);

impl Drop for Call {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Parked calls by token, each until it is resumed or expires.
#[derive(Default)]
pub struct Parking {
    calls: Mutex<HashMap<String, (Held, Instant)>>,
}

impl Parking {
    pub fn park(&self, held: Held, until: Instant) -> String {
        let token = crate::context::new_call_id();
        let mut calls = self.calls.lock().expect("parking lock");
        // Expired calls are cancelled (dropping a Held aborts its upstream call).
        calls.retain(|_, (_, until)| *until > Instant::now());
        calls.insert(token.clone(), (held, until));
        token
    }

    /// Cancels the calls whose time is up (dropping a Held aborts its upstream call, which
    /// tells the upstream). Runs on the gateway's reaper tick.
    pub fn sweep(&self) {
        self.calls.lock().expect("parking lock").retain(|_, (_, until)| *until > Instant::now());
    }

    pub fn take(&self, token: &str) -> Option<Held> {
        let (held, until) = self.calls.lock().expect("parking lock").remove(token)?;
        (until > Instant::now()).then_some(held)
    }
}
