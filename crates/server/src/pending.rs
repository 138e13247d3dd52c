//! Questions waiting for a caller who cannot answer in-band: the CLI, `/v1/call`, a script.
//!
//! When an upstream asks something during a `/v1/call` (a form, a completion, the roots),
//! the call does not fail: the question is kept here (bounded by `limits.pendingQuestions`,
//! until `timeouts.inputRequired`), the call reports it, and the same identity answers it
//! later with `POST /v1/ask/answer`, which carries the call on (the upstream call itself is
//! held by the gateway, or resumed from its sealed state). A question raised for one
//! session is visible and answerable by that session only.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mcpx_protocol::RpcError;
use serde_json::{Value, json};

pub struct Pending {
    questions: Mutex<HashMap<String, Question>>,
    /// Calls begun in the background (`/v1/ask/begin`), until their outcome is polled.
    calls: Mutex<HashMap<String, Begun>>,
}

/// A background call: whose it is, and where its outcome (HTTP status, body) appears.
struct Begun {
    session: Option<String>,
    outcome: tokio::sync::watch::Receiver<Option<(u16, Value)>>,
    expires: Instant,
}

/// One waiting call: where it was going, what it asks, and how to carry it on.
#[derive(Clone)]
pub struct Question {
    pub id: String,
    session: Option<String>,
    /// The `mcpx_call` arguments of the call: server, tool, arguments.
    pub call: Value,
    pub input_requests: Value,
    pub request_state: Value,
    expires: Instant,
}

impl Default for Pending {
    fn default() -> Self {
        Pending { questions: Mutex::new(HashMap::new()), calls: Mutex::new(HashMap::new()) }
    }
}

impl Pending {
    /// Keeps the questions of an `input_required` answer to `call`, for `session`.
    pub fn store(&self, session: Option<&str>, call: &Value, asked: &Value, lifetime: Duration, max: usize) -> Result<Question, RpcError> {
        let mut questions = self.questions.lock().expect("pending lock");
        questions.retain(|_, q| q.expires > Instant::now());
        if questions.len() >= max {
            return Err(RpcError::internal(format!(
                "{max} questions are already waiting for answers (limits.pendingQuestions); answer or abandon some"
            )));
        }
        let question = Question {
            id: mcpx_gateway::context::new_call_id()[..12].to_owned(),
            session: session.map(str::to_owned),
            call: call.clone(),
            input_requests: asked.get("inputRequests").cloned().unwrap_or_else(|| json!({})),
            request_state: asked.get("requestState").cloned().unwrap_or(Value::Null),
            expires: Instant::now() + lifetime,
        };
        questions.insert(question.id.clone(), question.clone());
        Ok(question)
    }

    /// The questions waiting for `session`.
    pub fn of(&self, session: Option<&str>) -> Vec<Question> {
        let questions = self.questions.lock().expect("pending lock");
        let mut mine: Vec<Question> = questions
            .values()
            .filter(|q| q.session.as_deref() == session && q.expires > Instant::now())
            .cloned()
            .collect();
        mine.sort_by_key(|q| q.expires);
        mine
    }

    /// Takes question `id` of `session` out, to answer or abandon it.
    pub fn take(&self, id: &str, session: Option<&str>) -> Option<Question> {
        let mut questions = self.questions.lock().expect("pending lock");
        let mine = questions.get(id).is_some_and(|q| q.session.as_deref() == session && q.expires > Instant::now());
        if mine { questions.remove(id) } else { None }
    }
}

impl Pending {
    /// Registers a background call for `session`; its outcome goes into the sender.
    pub fn begin(
        &self,
        session: Option<&str>,
        lifetime: Duration,
        max: usize,
    ) -> Result<(String, tokio::sync::watch::Sender<Option<(u16, Value)>>), RpcError> {
        let mut calls = self.calls.lock().expect("pending lock");
        calls.retain(|_, c| c.expires > Instant::now());
        if calls.len() >= max {
            return Err(RpcError::internal(format!(
                "{max} background calls are already waiting to be polled (limits.pendingQuestions)"
            )));
        }
        let id = mcpx_gateway::context::new_call_id()[..12].to_owned();
        let (tx, rx) = tokio::sync::watch::channel(None);
        calls.insert(id.clone(), Begun { session: session.map(str::to_owned), outcome: rx, expires: Instant::now() + lifetime });
        Ok((id, tx))
    }

    /// The outcome channel of background call `id` of `session`.
    pub fn call(&self, id: &str, session: Option<&str>) -> Option<tokio::sync::watch::Receiver<Option<(u16, Value)>>> {
        let calls = self.calls.lock().expect("pending lock");
        calls.get(id).filter(|c| c.session.as_deref() == session && c.expires > Instant::now()).map(|c| c.outcome.clone())
    }

    /// Forgets a background call whose outcome was delivered.
    pub fn finish(&self, id: &str) {
        self.calls.lock().expect("pending lock").remove(id);
    }
}

impl Question {
    /// How the question looks to the caller, with the command that answers it.
    pub fn view(&self) -> Value {
        let session = self.session.as_deref().map(|s| format!(" --session {s}")).unwrap_or_default();
        json!({
            "id": self.id,
            "server": self.call["server"],
            "tool": self.call["tool"],
            "inputRequests": self.input_requests,
            "expiresInMs": self.expires.saturating_duration_since(Instant::now()).as_millis() as u64,
            "answer": format!("mcpx ask answer{session} {} '<json answers by key>'", self.id),
        })
    }
}
