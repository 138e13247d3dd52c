//! How a request that needs something from the client gets it, in either era.
//!
//! A tool or prompt that needs input is written once, as a function from the answers
//! gathered so far to a [`Step`]: the finished result, or the questions still open, each
//! an `elicitation/create`, `sampling/createMessage` or `roots/list` request under a key
//! of the asker's choosing. Two drivers run such a function:
//!
//! * legacy ([`legacy`]): every open question becomes a real request to the client on
//!   stdout; the answers are collected in memory and the function runs again.
//! * modern ([`modern`], multi round-trip requests): the open questions go back as an
//!   `input_required` result. The answers so far travel in a sealed `requestState`, so a
//!   retry may answer only the latest questions; its `inputResponses` are merged in.
//!   Unknown answer keys are carried but never read. A state that does not open (altered,
//!   expired, or issued for another request) is an invalid-params error, never a re-ask.
//!
//! Only `tools/call` and `prompts/get` use this; no other method may return
//! `input_required`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::Reply;
use super::client_requests::ClientRequests;
use super::sealed_state::Seal;
use crate::era::{self, CLIENT_CAPABILITIES_KEY};
use crate::wire::{INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, RpcError};

/// How long a sealed `requestState` stays good.
const STATE_LIFETIME: Duration = Duration::from_secs(600);
/// How many rounds of questions a legacy call asks before giving up on the client.
const LEGACY_ROUNDS: usize = 5;

/// What an asker decides, given the answers so far.
pub enum Step {
    /// The finished result body.
    Done(Value),
    /// Questions still open: key → `{method, params}`.
    Ask(Map<String, Value>),
}

/// The answers an asker sees.
pub struct Inputs<'a> {
    answers: Map<String, Value>,
    /// Whether earlier rounds' state came back intact (always, in a legacy call, where it
    /// never leaves the process; in a modern one, only when a valid `requestState` did).
    pub state_verified: bool,
    /// The client capabilities in force: the request's (modern) or the session's (legacy).
    pub client_capabilities: &'a Value,
}

/// An `ElicitResult` answer.
pub struct Elicited<'a> {
    pub action: &'a str,
    content: Option<&'a Map<String, Value>>,
}

impl Elicited<'_> {
    pub fn accepted(&self) -> bool {
        self.action == "accept"
    }

    /// A string field of the accepted content.
    pub fn text(&self, field: &str) -> Option<&str> {
        self.content?.get(field)?.as_str()
    }

    /// A field of the accepted content.
    pub fn field(&self, field: &str) -> Option<&Value> {
        self.content?.get(field)
    }

    /// The content as JSON (`{}` when there is none), for echoing back.
    pub fn content_json(&self) -> String {
        self.content.map(|content| Value::Object(content.clone()).to_string()).unwrap_or_else(|| "{}".into())
    }
}

impl Inputs<'_> {
    pub fn answered(&self, key: &str) -> bool {
        self.answers.contains_key(key)
    }

    /// The `ElicitResult` answering `key`; `None` when unanswered, an error when malformed.
    pub fn elicited(&self, key: &str) -> Result<Option<Elicited<'_>>, RpcError> {
        let Some(answer) = self.answer(key)? else {
            return Ok(None);
        };
        let action = answer
            .get("action")
            .and_then(Value::as_str)
            .filter(|action| ["accept", "decline", "cancel"].contains(action))
            .ok_or_else(|| malformed(key, "action must be accept, decline or cancel"))?;
        let content = match answer.get("content") {
            None | Some(Value::Null) => None,
            Some(Value::Object(content)) => Some(content),
            Some(_) => return Err(malformed(key, "content must be an object")),
        };
        Ok(Some(Elicited { action, content }))
    }

    /// The text a `CreateMessageResult` answering `key` carries (its text blocks joined);
    /// `None` when unanswered, an error when malformed.
    pub fn sampled_text(&self, key: &str) -> Result<Option<String>, RpcError> {
        let Some(answer) = self.answer(key)? else {
            return Ok(None);
        };
        let blocks = match answer.get("content") {
            Some(Value::Array(blocks)) => blocks.iter().collect(),
            Some(block @ Value::Object(_)) => vec![block],
            _ => {
                return Err(malformed(key, "content must be a content block or an array of them"));
            }
        };
        let text: Vec<&str> = blocks
            .iter()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|block| block.get("text").and_then(Value::as_str))
            .collect();
        Ok(Some(text.join("\n")))
    }

    /// The roots of a `ListRootsResult` answering `key`.
    pub fn roots(&self, key: &str) -> Result<Option<&Vec<Value>>, RpcError> {
        let Some(answer) = self.answer(key)? else {
            return Ok(None);
        };
        answer.get("roots").and_then(Value::as_array).map(Some).ok_or_else(|| malformed(key, "roots must be an array"))
    }

    fn answer(&self, key: &str) -> Result<Option<&Map<String, Value>>, RpcError> {
        match self.answers.get(key) {
            None => Ok(None),
            Some(Value::Object(answer)) => Ok(Some(answer)),
            Some(_) => Err(malformed(key, "must be an object")),
        }
    }
}

fn malformed(key: &str, problem: &str) -> RpcError {
    RpcError::new(INVALID_PARAMS, format!("input response \"{key}\": {problem}"))
}

/// An `elicitation/create` question.
pub fn elicitation(message: &str, requested_schema: Value) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": requested_schema},
    })
}

/// A `sampling/createMessage` question: one user text message.
pub fn sampling(text: &str, max_tokens: u32) -> Value {
    json!({
        "method": "sampling/createMessage",
        "params": {
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
            "maxTokens": max_tokens,
        },
    })
}

/// A `roots/list` question.
pub fn roots_list() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// The client capability a question needs.
fn capability_for(question: &Value) -> &'static str {
    match question.get("method").and_then(Value::as_str) {
        Some("sampling/createMessage") => "sampling",
        Some("roots/list") => "roots",
        _ => "elicitation",
    }
}

/// Runs `asker` as a modern multi round-trip request. `target` names the request (e.g.
/// `tools/call test_x`); a state sealed for one target does not open for another.
pub fn modern(
    seal: &Seal,
    target: &str,
    params: &Value,
    asker: impl Fn(&Inputs) -> Result<Step, RpcError>,
) -> Result<Reply, RpcError> {
    let no_capabilities = json!({});
    let client_capabilities =
        era::meta(params).and_then(|meta| meta.get(CLIENT_CAPABILITIES_KEY)).unwrap_or(&no_capabilities);
    let (mut answers, state_verified) = match params.get("requestState") {
        None => (Map::new(), false),
        Some(Value::String(state)) => (open_state(seal, target, state)?, true),
        Some(_) => {
            return Err(RpcError::new(INVALID_PARAMS, "requestState must be a string"));
        }
    };
    match params.get("inputResponses") {
        None => {}
        Some(Value::Object(responses)) => answers.extend(responses.iter().map(|(k, v)| (k.clone(), v.clone()))),
        Some(_) => {
            return Err(RpcError::new(INVALID_PARAMS, "inputResponses must be an object"));
        }
    }
    let inputs = Inputs { answers, state_verified, client_capabilities };
    let questions = match asker(&inputs)? {
        Step::Done(body) => return Ok(Reply::Complete(body)),
        Step::Ask(questions) => questions,
    };
    let mut missing = Map::new();
    for question in questions.values() {
        let capability = capability_for(question);
        if client_capabilities.get(capability).is_none_or(Value::is_null) {
            missing.insert(capability.into(), json!({}));
        }
    }
    if !missing.is_empty() {
        return Err(RpcError::new(
            MISSING_CLIENT_CAPABILITY,
            "this request needs client capabilities it did not declare",
        )
        .with_data(json!({"requiredCapabilities": missing})));
    }
    let state = json!({
        "for": target,
        "answers": inputs.answers,
        "expiresAtMs": now_ms() + STATE_LIFETIME.as_millis() as u64,
    });
    Ok(Reply::InputRequired(json!({
        "inputRequests": questions,
        "requestState": seal.seal(&state),
    })))
}

/// The answers a sealed state carries, if it opens, was issued for `target`, and is fresh.
fn open_state(seal: &Seal, target: &str, state: &str) -> Result<Map<String, Value>, RpcError> {
    let refused = |why: &str| RpcError::new(INVALID_PARAMS, format!("requestState {why}"));
    let payload = seal.open(state).ok_or_else(|| refused("failed its integrity check"))?;
    if payload.get("for").and_then(Value::as_str) != Some(target) {
        return Err(refused("was issued for another request"));
    }
    let expires = payload.get("expiresAtMs").and_then(Value::as_u64).unwrap_or(0);
    if now_ms() > expires {
        return Err(refused("has expired"));
    }
    match payload.get("answers") {
        Some(Value::Object(answers)) => Ok(answers.clone()),
        _ => Err(refused("carries no answers")),
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as u64)
}

/// Runs `asker` in a legacy session: each open question is sent to the client as a real
/// request, in order, and the call waits for every answer. A client error or silence
/// ends the call with an error result (`isError`), as a tool failure.
pub fn legacy(
    client: &ClientRequests,
    client_capabilities: &Value,
    asker: impl Fn(&Inputs) -> Result<Step, RpcError>,
) -> Result<Value, RpcError> {
    let mut inputs = Inputs { answers: Map::new(), state_verified: true, client_capabilities };
    for _ in 0..LEGACY_ROUNDS {
        let questions = match asker(&inputs)? {
            Step::Done(body) => return Ok(body),
            Step::Ask(questions) => questions,
        };
        for (key, question) in questions {
            let method = question["method"].as_str().unwrap_or_default().to_owned();
            let params = question.get("params").cloned().unwrap_or_else(|| json!({}));
            match client.ask(&method, params) {
                Ok(answer) => {
                    inputs.answers.insert(key, answer);
                }
                Err(error) => {
                    return Ok(failure(&format!(
                        "the client answered {method} with error {}: {}",
                        error.code, error.message
                    )));
                }
            }
        }
    }
    Ok(failure(&format!("the client's answers were still incomplete after {LEGACY_ROUNDS} rounds of questions")))
}

fn failure(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}
