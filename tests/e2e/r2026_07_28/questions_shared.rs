//! Questions a handshake-era upstream asks mid-call while two 2026-07-28 callers share its
//! instance (global scope). Each caller's call is held open upstream and its questions are
//! returned as `input_required`; a question must come back to its own call, never be
//! handed to another caller's parked call.

use mcpx_e2e::client::{Modern, Reply};
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use serde_json::{Value, json};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

fn shared_fixture(extra: &[&str]) -> Daemon {
    let mut args = vec!["--fixture", "conformance", "--era", "legacy"];
    args.extend_from_slice(extra);
    let mut cfg = config(&[("fx", fakemcp("global", &tag(), &args))]);
    // A question handed to the wrong call leaves its own call waiting: not for long here.
    cfg["timeouts"] = json!({"request": "10s"});
    Daemon::start(&cfg)
}

/// `session`'s call of fx `test_elicitation` asking `message`, with a retry's fields.
fn elicit(url: &str, session: &str, message: &str, retry: Value) -> Reply {
    let mut params = json!({"name": "mcpx_call", "arguments": {"server": "fx", "tool": "test_elicitation", "arguments": {"message": message}}});
    for (k, v) in retry.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    Modern::new("tools/call", params).meta(CAPABILITIES, json!({"elicitation": {}})).session(session).send(url)
}

/// The one question of an `input_required` round: its key, message, and the state.
#[track_caller]
fn asked(reply: &Reply) -> (String, Value, String) {
    let result = reply.result();
    assert_eq!(result["resultType"], "input_required", "{reply}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{reply}");
    let (key, question) = requests.iter().next().unwrap();
    let state = result["requestState"].as_str().expect("requestState").to_owned();
    (key.clone(), question["params"]["message"].clone(), state)
}

fn answering(key: &str, response: &str, state: &str) -> Value {
    json!({"inputResponses": {key: {"action": "accept", "content": {"response": response}}}, "requestState": state})
}

fn text_of(reply: &Reply) -> String {
    reply.result()["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// A's call is parked on its question when B's call asks one naming no call: mcpx cannot
/// tell whose it is, so the upstream is told why, and B's call ends at once with that
/// (it used to be handed to A's parked call while B's waited for nothing).
#[test]
fn a_question_naming_no_call_is_refused_not_handed_to_another_callers_parked_call() {
    let daemon = shared_fixture(&[]);
    let url = daemon.url();
    let (a_key, a_message, a_state) = asked(&elicit(url, "A", "for A", json!({})));
    assert_eq!(a_message, "for A");

    let b = elicit(url, "B", "for B", json!({}));
    assert_eq!(b.result()["isError"], true, "{b}");
    assert!(text_of(&b).contains("ambiguous among 2 callers"), "the upstream was not told why: {b}");

    // A's parked call was not given B's question: A's answer completes A's call.
    let a = elicit(url, "A", "for A", answering(&a_key, "from A", &a_state));
    assert_eq!(a.result()["resultType"], "complete", "{a}");
    assert!(text_of(&a).contains("from A"), "{a}");
}

#[test]
fn a_question_naming_its_call_comes_back_to_that_call_while_another_callers_call_is_parked() {
    let daemon = shared_fixture(&["--echo-call-id"]);
    let url = daemon.url();
    let (a_key, a_message, a_state) = asked(&elicit(url, "A", "for A", json!({})));
    let (b_key, b_message, b_state) = asked(&elicit(url, "B", "for B", json!({})));
    assert_eq!((a_message, b_message), (json!("for A"), json!("for B")));

    let b = elicit(url, "B", "for B", answering(&b_key, "from B", &b_state));
    assert!(text_of(&b).contains("from B"), "{b}");
    let a = elicit(url, "A", "for A", answering(&a_key, "from A", &a_state));
    assert!(text_of(&a).contains("from A"), "{a}");
}
