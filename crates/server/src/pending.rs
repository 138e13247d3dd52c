//! Questions waiting for a caller who cannot answer in-band: the CLI, `/v1/call`, a script.
//!
//! When an upstream asks something during a `/v1/call` (a form, a completion, the roots),
//! the call does not fail: the question is kept here (bounded by `limits.pendingQuestions`,
//! until `timeouts.inputRequired`), the call reports it, and the same identity answers it
//! later with `POST /v1/ask/answer`, which carries the call on (the upstream call itself is
//! held by the gateway, or resumed from its sealed state). A question raised for one
//! caller is visible and answerable by that caller only: the same principal (token) and
//! the same session, or, for a caller without a session, the same principal.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcpx_gateway::cluster::Cluster;
use mcpx_gateway::{Identity, Principal};
use mcpx_protocol::RpcError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub struct Pending {
    questions: Mutex<HashMap<String, Question>>,
    /// Calls begun in the background (`/v1/ask/begin`), until their outcome is polled.
    calls: Mutex<HashMap<String, Begun>>,
}

/// A background call's outcome once it has one: the HTTP status and body to answer with.
pub type Outcome = Option<(u16, Value)>;

/// A background call: whose it is, and where its outcome (HTTP status, body) appears.
struct Begun {
    /// `Identity::owner_key` of the caller that began it.
    owner: String,
    outcome: tokio::sync::watch::Receiver<Outcome>,
    expires: Instant,
}

/// One waiting call: where it was going, what it asks, and how to carry it on.
#[derive(Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    pub id: String,
    /// `Identity::owner_key` of the caller it waits for.
    owner: String,
    /// That caller's principal: whose status page shows the question.
    pub principal: Principal,
    /// That caller's session, as `SessionKey` names it (`session:<label>`), if it has one.
    pub session: Option<String>,
    /// The session name that caller typed, if it named one: shown in the answer command.
    label: Option<String>,
    /// The `mcpx_call` arguments of the call: server, tool, arguments.
    pub call: Value,
    pub input_requests: Value,
    pub request_state: Value,
    /// When it expires, in ms since the epoch.
    expires: u64,
}

impl Default for Pending {
    fn default() -> Self {
        Pending { questions: Mutex::new(HashMap::new()), calls: Mutex::new(HashMap::new()) }
    }
}

impl Pending {
    /// Keeps the questions of an `input_required` answer to `call`, for `owner`: in the
    /// cluster's Redis when there is one.
    pub async fn store(
        &self,
        cluster: Option<&Cluster>,
        owner: &Identity,
        call: &Value,
        asked: &Value,
        lifetime: Duration,
        max: usize,
    ) -> Result<Question, RpcError> {
        let full = || {
            RpcError::internal(format!(
                "{max} questions are already waiting for answers (limits.pendingQuestions); answer or abandon some"
            ))
        };
        let question = Question {
            id: mcpx_gateway::context::new_call_id()[..12].to_owned(),
            owner: owner.owner_key(),
            principal: owner.principal.clone(),
            session: owner.session_key().map(|key| key.to_string()),
            label: owner.session_label().map(str::to_owned),
            call: call.clone(),
            input_requests: asked.get("inputRequests").cloned().unwrap_or_else(|| json!({})),
            request_state: asked.get("requestState").cloned().unwrap_or(Value::Null),
            expires: now_ms() + lifetime.as_millis() as u64,
        };
        if let Some(cluster) = cluster {
            let record = serde_json::to_string(&question).expect("a question serializes");
            return match cluster.put_question(&question.owner, &question.id, &record, lifetime, max).await {
                Ok(true) => Ok(question),
                Ok(false) => Err(full()),
                Err(e) => Err(RpcError::internal(e.to_string())),
            };
        }
        let mut questions = self.questions.lock().expect("pending lock");
        questions.retain(|_, q| q.expires > now_ms());
        if questions.len() >= max {
            return Err(full());
        }
        questions.insert(question.id.clone(), question.clone());
        Ok(question)
    }

    /// Questions waiting now, everyone's (`/metrics`): the whole cluster's in a cluster.
    pub async fn waiting(&self, cluster: Option<&Cluster>) -> usize {
        match cluster {
            Some(cluster) => cluster.questions_waiting().await.unwrap_or_default(),
            None => self.questions.lock().expect("pending lock").values().filter(|q| q.expires > now_ms()).count(),
        }
    }

    /// Every question waiting on this node, soonest to expire first: for the status page,
    /// which shows each principal only its own (in a cluster, the questions other nodes
    /// asked are on their pages).
    pub fn all(&self) -> Vec<Question> {
        let questions = self.questions.lock().expect("pending lock");
        let mut all: Vec<Question> = questions.values().filter(|q| q.expires > now_ms()).cloned().collect();
        all.sort_by_key(|q| q.expires);
        all
    }

    /// The questions waiting for `owner`, soonest to expire first.
    pub async fn of(&self, cluster: Option<&Cluster>, owner: &Identity) -> Result<Vec<Question>, RpcError> {
        let owner = owner.owner_key();
        let mut mine: Vec<Question> = match cluster {
            Some(cluster) => {
                let records = cluster.questions_of(&owner).await.map_err(|e| RpcError::internal(e.to_string()))?;
                records.iter().filter_map(|r| serde_json::from_str::<Question>(r).ok()).collect()
            }
            None => self.questions.lock().expect("pending lock").values().cloned().collect(),
        };
        mine.retain(|q| q.owner == owner && q.expires > now_ms());
        mine.sort_by_key(|q| q.expires);
        Ok(mine)
    }

    /// Takes question `id` of `owner` out, to answer or abandon it.
    pub async fn take(
        &self,
        cluster: Option<&Cluster>,
        id: &str,
        owner: &Identity,
    ) -> Result<Option<Question>, RpcError> {
        let owner = owner.owner_key();
        let mine = |q: &Question| q.owner == owner && q.expires > now_ms();
        if let Some(cluster) = cluster {
            let record = cluster.take_question(&owner, id).await.map_err(|e| RpcError::internal(e.to_string()))?;
            return Ok(record
                .and_then(|r| serde_json::from_str::<Question>(&r).ok())
                .filter(|q| q.id == id && mine(q)));
        }
        let mut questions = self.questions.lock().expect("pending lock");
        let found = questions.get(id).is_some_and(mine);
        Ok(if found { questions.remove(id) } else { None })
    }
}

impl Pending {
    /// Registers a background call for `owner`, under `id` (in a cluster, one that names
    /// this node) or a random one; its outcome goes into the sender.
    pub fn begin(
        &self,
        owner: &Identity,
        lifetime: Duration,
        max: usize,
        id: Option<String>,
    ) -> Result<(String, tokio::sync::watch::Sender<Outcome>), RpcError> {
        let mut calls = self.calls.lock().expect("pending lock");
        calls.retain(|_, c| c.expires > Instant::now());
        if calls.len() >= max {
            return Err(RpcError::internal(format!(
                "{max} background calls are already waiting to be polled (limits.pendingQuestions)"
            )));
        }
        let id = id.unwrap_or_else(|| mcpx_gateway::context::new_call_id()[..12].to_owned());
        let (tx, rx) = tokio::sync::watch::channel(None);
        calls.insert(id.clone(), Begun { owner: owner.owner_key(), outcome: rx, expires: Instant::now() + lifetime });
        Ok((id, tx))
    }

    /// The outcome channel of background call `id` of `owner`.
    pub fn call(&self, id: &str, owner: &Identity) -> Option<tokio::sync::watch::Receiver<Outcome>> {
        let owner = owner.owner_key();
        let calls = self.calls.lock().expect("pending lock");
        calls.get(id).filter(|c| c.owner == owner && c.expires > Instant::now()).map(|c| c.outcome.clone())
    }

    /// Forgets a background call whose outcome was delivered.
    pub fn finish(&self, id: &str) {
        self.calls.lock().expect("pending lock").remove(id);
    }
}

impl Question {
    /// How the question looks to the caller, with the command that answers it.
    pub fn view(&self) -> crate::v1::Question {
        let session = self.label.as_deref().map(|s| format!(" --session {s}")).unwrap_or_default();
        crate::v1::Question {
            id: self.id.clone(),
            server: self.call["server"].as_str().unwrap_or_default().to_owned(),
            tool: self.call["tool"].as_str().unwrap_or_default().to_owned(),
            input_requests: self.input_requests.as_object().cloned().unwrap_or_default(),
            expires_in_ms: Some(self.expires.saturating_sub(now_ms())),
            answer: format!("mcpx ask answer{session} {} '<json answers by key>'", self.id),
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or_default()
}
