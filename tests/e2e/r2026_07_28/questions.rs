//! Questions an upstream asks while serving a 2026-07-28 caller, relayed as
//! `input_required` rounds. (Stateless upstreams are covered by the conformance suite's
//! `input-required-result-*` scenarios, which run through mcpx in CI; here the upstream
//! speaks the handshake era and asks with real requests mid-call.)

use mcpx_e2e::client::Modern;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use serde_json::{Value, json};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

fn legacy_fixture(tag: &str) -> Daemon {
    Daemon::start(&config(&[("fx", fakemcp("global", tag, &["--fixture", "conformance", "--era", "legacy"]))]))
}

/// A `tools/call` of `mcpx_call` → fx `tool`, with extra params (a retry's fields).
fn call(tool: &str, arguments: Value, extra: Value, capabilities: Value) -> Modern {
    let mut params = json!({"name": "mcpx_call", "arguments": {"server": "fx", "tool": tool, "arguments": arguments}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    Modern::new("tools/call", params).meta(CAPABILITIES, capabilities).session("q")
}

#[test]
fn a_handshake_era_upstreams_question_reaches_a_stateless_caller_and_the_held_call_completes() {
    let t = tag();
    let daemon = legacy_fixture(&t);
    let caps = json!({"elicitation": {}});
    let args = json!({"message": "Who are you?"});

    let first = call("test_elicitation", args.clone(), json!({}), caps.clone()).send(daemon.url());
    let result = first.result();
    assert_eq!(result["resultType"], "input_required", "{first}");
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{first}");
    let (key, question) = requests.iter().next().unwrap();
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(question["params"]["message"], "Who are you?");
    let state = result["requestState"].as_str().expect("requestState").to_owned();

    let answer = json!({"action": "accept", "content": {"response": "a test"}});
    let retry = json!({"inputResponses": {key.clone(): answer}, "requestState": state});
    let second = call("test_elicitation", args, retry, caps).send(daemon.url());
    let text = second.result()["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.contains("action=accept") && text.contains("a test"), "{second}");
    assert_eq!(second.result()["resultType"], "complete");
}

#[test]
fn a_state_for_one_request_is_refused_for_another_and_when_tampered() {
    let t = tag();
    let daemon = legacy_fixture(&t);
    let caps = json!({"sampling": {}});
    let first = call("test_sampling", json!({"prompt": "p"}), json!({}), caps.clone()).send(daemon.url());
    let state = first.result()["requestState"].as_str().expect("requestState").to_owned();
    let key = first.result()["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let answer = json!({key: {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}});

    let tampered = json!({"inputResponses": answer, "requestState": format!("{state}-TAMPERED")});
    call("test_sampling", json!({"prompt": "p"}), tampered, caps.clone()).send(daemon.url()).assert_error(200, -32602);
    let other_request = json!({"inputResponses": answer, "requestState": state});
    call("test_sampling", json!({"prompt": "another"}), other_request.clone(), caps.clone())
        .send(daemon.url())
        .assert_error(200, -32602);
    // The genuine retry still completes: refusals did not consume the held call.
    let done = call("test_sampling", json!({"prompt": "p"}), other_request, caps).send(daemon.url());
    assert_eq!(done.result()["content"][0]["text"], "LLM response: x", "{done}");
}

#[test]
fn a_caller_that_did_not_declare_the_capability_is_not_asked() {
    let t = tag();
    let daemon = legacy_fixture(&t);
    // No sampling capability: the upstream's question is declined, never put to the caller.
    let reply = call("test_sampling", json!({"prompt": "p"}), json!({}), json!({})).send(daemon.url());
    let result = reply.result();
    assert_ne!(result["resultType"], "input_required", "{reply}");
    assert_eq!(result["isError"], true, "the upstream reports the declined question: {reply}");
}
