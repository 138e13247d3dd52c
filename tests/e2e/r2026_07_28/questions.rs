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

#[test]
fn an_expired_question_cancels_the_held_upstream_call_and_refuses_the_late_answer() {
    let t = tag();
    let tap = mcpx_e2e::tap::StdioTap::new();
    let server = fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]);
    let mut cfg = config(&[("fx", mcpx_e2e::upstreams::tapped(&tap, &server))]);
    cfg["timeouts"] = json!({"inputRequired": "500ms"});
    let daemon = Daemon::start(&cfg);
    let caps = json!({"elicitation": {}});
    let args = json!({"message": "Too slow?"});
    let first = call("test_elicitation", args.clone(), json!({}), caps.clone()).send(daemon.url());
    let key = first.result()["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let state = first.result()["requestState"].as_str().unwrap().to_owned();
    std::thread::sleep(std::time::Duration::from_millis(800));

    let late =
        json!({"inputResponses": {key: {"action": "accept", "content": {"response": "late"}}}, "requestState": state});
    let refused = call("test_elicitation", args, late, caps).send(daemon.url());
    let error = refused.assert_error(200, -32602);
    assert!(error["message"].as_str().unwrap_or_default().contains("expired"), "{refused}");
    // The upstream was told its call is over.
    let (request, _) =
        mcpx_e2e::upstreams::upstream_exchange(&tap, "tools/call", |_| true).expect("the call reached the upstream");
    let cancelled = mcpx_e2e::process::poll(std::time::Duration::from_secs(5), || {
        tap.sent()
            .into_iter()
            .find(|f| f["method"] == "notifications/cancelled" && f["params"]["requestId"] == request["id"])
    });
    assert!(cancelled.is_some(), "no notifications/cancelled for the expired call reached the upstream");
}
