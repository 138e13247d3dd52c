//! Whom a question from a handshake-era upstream is for: `sampling/createMessage`,
//! `elicitation/create` or `roots/list`, sent as a request of its own on a connection
//! that may be serving several callers at once.
//!
//! Over stdio, and on an HTTP session's standalone stream, such a request names no request
//! of ours. mcpx never guesses toward sharing: the question goes to the caller whose call
//! the upstream names, by echoing that call's id in
//! `params._meta["dev.mcpx/invocation"].callId`; without one, to the caller whose requests
//! are all there is in flight on the instance; otherwise it is refused, saying why. It must
//! never hand one caller's question to another.

use std::sync::atomic::{AtomicBool, Ordering};

use mcpx_protocol::{RpcError, code, meta};
use serde_json::Value;

use crate::caller::{Ask, Caller};

/// What the connection knows about one request in flight: whom it serves (none for mcpx's
/// own requests) and how its caller is asked, when it can be.
#[derive(Clone, Default)]
pub(crate) struct Serving {
    pub(crate) caller: Option<Caller>,
    pub(crate) ask: Option<Ask>,
}

impl Serving {
    /// Whether the request is one the connection must remember: it serves a caller or can
    /// ask one.
    pub(crate) fn is_for_someone(&self) -> bool {
        self.caller.is_some() || self.ask.is_some()
    }
}

/// Why a question was not put to anyone.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No request in flight serves a caller.
    NoCaller,
    /// The call it names by its call id is not in flight here.
    NoSuchCall(String),
    /// The caller it is for cannot be asked on any of its requests in flight.
    CannotAsk,
    /// Requests of this many callers are in flight, and the question names none of them.
    Ambiguous(usize),
}

/// The request whose caller is asked, as an index into `in_flight` (oldest first), or
/// why nobody is. `echoed` is the call id the question names, if it names one.
pub(crate) fn choose(echoed: Option<&str>, in_flight: &[&Serving]) -> Result<usize, Refusal> {
    let serving: Vec<(usize, &Serving)> =
        in_flight.iter().copied().enumerate().filter(|(_, s)| s.is_for_someone()).collect();
    let askable = |candidates: &[(usize, &Serving)]| candidates.iter().find(|(_, s)| s.ask.is_some()).map(|(i, _)| *i);
    if let Some(call_id) = echoed {
        let named: Vec<_> = serving
            .iter()
            .copied()
            .filter(|(_, s)| s.caller.as_ref().is_some_and(|c| &*c.call_id == call_id))
            .collect();
        if named.is_empty() {
            return Err(Refusal::NoSuchCall(call_id.to_owned()));
        }
        return askable(&named).ok_or(Refusal::CannotAsk);
    }
    // A request that can ask but names no caller is a caller of its own.
    let mut callers: Vec<Option<&str>> = serving.iter().map(|(_, s)| s.caller.as_ref().map(|c| &*c.key)).collect();
    let anonymous = callers.iter().filter(|k| k.is_none()).count();
    callers.retain(Option::is_some);
    callers.sort_unstable();
    callers.dedup();
    match callers.len() + anonymous {
        0 => Err(Refusal::NoCaller),
        1 => askable(&serving).ok_or(Refusal::CannotAsk),
        n => Err(Refusal::Ambiguous(n)),
    }
}

/// How to ask the caller a question is for, among the requests `in_flight` (oldest
/// first), or the error the upstream gets instead.
pub(crate) fn asker(
    server: &str,
    method: &str,
    echoed: Option<&str>,
    in_flight: &[&Serving],
    warned: &AtomicBool,
) -> Result<Ask, RpcError> {
    let chosen = choose(echoed, in_flight).and_then(|i| in_flight[i].ask.clone().ok_or(Refusal::CannotAsk));
    chosen.map_err(|why| refused(server, method, why, warned))
}

/// The call id a question names, taken out of its `_meta` with every other key mcpx owns
/// (they are mcpx's, not the caller's to see).
pub(crate) fn take_call_id(params: &mut Value) -> Option<String> {
    let Some(Value::Object(m)) = params.get_mut("_meta") else { return None };
    let echoed = m.get(meta::MCPX_INVOCATION).and_then(|i| i.get("callId")).and_then(Value::as_str).map(str::to_owned);
    meta::strip_mcpx_keys(m);
    if m.is_empty() {
        params.as_object_mut().map(|p| p.remove("_meta"));
    }
    echoed
}

/// The error the upstream gets for a question nobody is asked. An ambiguous one is also
/// logged, once per connection, with how to avoid it.
fn refused(server: &str, method: &str, why: Refusal, warned: &AtomicBool) -> RpcError {
    match why {
        Refusal::NoCaller => RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("{method}: no request of a caller that could answer it is in flight"),
        ),
        Refusal::CannotAsk => RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("{method}: the caller it is for cannot be asked on its request"),
        ),
        Refusal::NoSuchCall(call_id) => RpcError::invalid_params(format!(
            "{method} names call {call_id:?} in _meta[\"{}\"].callId, which is not in flight on this connection",
            meta::MCPX_INVOCATION
        )),
        Refusal::Ambiguous(callers) => {
            if !warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    server,
                    callers,
                    "refused a {method} that names no call while the instance serves several callers; \"scope\": \"session\" (or finer) gives each caller its own instance"
                );
            }
            RpcError::invalid_params(format!(
                "{method} is ambiguous among {callers} callers with requests in flight on this instance: name the call it is for by echoing the callId of the request's _meta[\"{0}\"] in params._meta[\"{0}\"].callId, or configure the server with \"scope\": \"session\" (or finer)",
                meta::MCPX_INVOCATION
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn ask() -> Ask {
        Arc::new(|_, _| Box::pin(std::future::ready(Ok(json!({})))))
    }

    fn of(key: &str, call_id: &str, askable: bool) -> Serving {
        Serving {
            caller: Some(Caller { key: key.into(), call_id: call_id.into(), meter: None }),
            ask: askable.then(ask),
        }
    }

    fn mcpx_own() -> Serving {
        Serving::default()
    }

    #[test]
    fn a_question_naming_a_call_goes_to_that_call_whatever_is_older() {
        let (a, b) = (of("A", "a1", true), of("B", "b1", true));
        assert_eq!(choose(Some("b1"), &[&a, &b]), Ok(1));
        assert_eq!(choose(Some("a1"), &[&a, &b]), Ok(0));
    }

    #[test]
    fn a_question_naming_a_call_not_in_flight_or_not_askable_is_refused() {
        let (a, b) = (of("A", "a1", true), of("B", "b1", false));
        assert_eq!(choose(Some("gone"), &[&a, &b]), Err(Refusal::NoSuchCall("gone".into())));
        assert_eq!(choose(Some("b1"), &[&a, &b]), Err(Refusal::CannotAsk));
    }

    #[test]
    fn a_question_naming_no_call_goes_to_the_only_caller_at_its_oldest_askable_request() {
        let (first, second, third) = (of("A", "a1", false), of("A", "a2", true), of("A", "a3", true));
        assert_eq!(choose(None, &[&mcpx_own(), &first, &second, &third]), Ok(2));
    }

    #[test]
    fn a_question_naming_no_call_among_several_callers_is_refused_even_when_only_one_can_be_asked() {
        let (a, b) = (of("A", "a1", false), of("B", "b1", true));
        assert_eq!(choose(None, &[&a, &b]), Err(Refusal::Ambiguous(2)));
    }

    #[test]
    fn a_question_with_only_mcpx_own_requests_in_flight_or_none_is_refused() {
        assert_eq!(choose(None, &[&mcpx_own()]), Err(Refusal::NoCaller));
        assert_eq!(choose(None, &[]), Err(Refusal::NoCaller));
        assert_eq!(choose(None, &[&of("A", "a1", false)]), Err(Refusal::CannotAsk));
    }

    #[test]
    fn a_request_that_can_ask_but_names_no_caller_is_a_caller_of_its_own() {
        let unnamed = Serving { caller: None, ask: Some(ask()) };
        assert_eq!(choose(None, &[&unnamed]), Ok(0));
        assert_eq!(choose(None, &[&unnamed, &of("A", "a1", true)]), Err(Refusal::Ambiguous(2)));
        assert_eq!(choose(None, &[&unnamed, &unnamed.clone()]), Err(Refusal::Ambiguous(2)));
    }

    #[test]
    fn the_echoed_call_id_and_every_mcpx_key_are_taken_out_of_the_question() {
        let mut params = json!({"message": "m", "_meta": {"dev.mcpx/invocation": {"callId": "c1"}, "dev.mcpx/x": 1}});
        assert_eq!(take_call_id(&mut params).as_deref(), Some("c1"));
        assert_eq!(params, json!({"message": "m"}));
        let mut kept = json!({"_meta": {"progressToken": 1, "dev.mcpx/invocation": {}}});
        assert_eq!(take_call_id(&mut kept), None);
        assert_eq!(kept, json!({"_meta": {"progressToken": 1}}));
    }
}
