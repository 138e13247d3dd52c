//! Issue 10 with real peers: questions asked by real upstreams, answered by the real
//! Python SDK client (`tests/python/answering_client.py`) through the real mcpx daemon,
//! in both caller eras.
//!
//! - `server-everything` (handshake era, stdio) asks mid-call (`elicitation/create`,
//!   `sampling/createMessage`): a legacy caller gets the request on its session; a
//!   2026-07-28 caller gets `input_required` while mcpx holds the upstream call.
//! - `tests/python/asking_server.py` (Python `mcp` 2.x over HTTP, a stateless 2026
//!   upstream) returns `input_required`: relayed to a 2026 caller, asked on the session of
//!   a legacy caller.
//!
//! The fakemcp versions of these pairings are in `questions.rs`.

use mcpx_e2e::answering::{Answers, answering_client, asked_methods, result_text};
use mcpx_e2e::upstreams::{ScriptServer, everything};
use mcpx_e2e::{Daemon, tag};
use serde_json::{Value, json};

const LEGACY: &str = "legacy";
const MODERN: &str = "2026-07-28";

fn everything_daemon() -> Daemon {
    Daemon::start(&json!({"mcpServers": {"everything": everything(&tag())}}))
}

fn asking_daemon(server: &ScriptServer) -> Daemon {
    Daemon::start(&json!({"mcpServers": {"pyask": {"url": server.url()}}}))
}

fn mcpx_call(server: &str, tool: &str, arguments: Value) -> Value {
    json!({"server": server, "tool": tool, "arguments": arguments})
}

/// Asserts the client was asked exactly one `method` question and the call succeeded.
#[track_caller]
fn assert_asked_once(out: &Value, method: &str) {
    assert_eq!(out["era"], if out["protocolVersion"] == MODERN { "modern" } else { "legacy" }, "{out}");
    assert_eq!(asked_methods(out), vec![method], "{out}");
    assert_eq!(out["result"]["isError"], json!(false), "{out}");
}

/// Asserts the client settled on the era the test meant: 2026-07-28, or the handshake era.
#[track_caller]
fn assert_era(out: &Value, mode: &str) {
    if mode == MODERN {
        assert_eq!(out["protocolVersion"], MODERN, "{out}");
    } else {
        assert_ne!(out["protocolVersion"], MODERN, "{out}");
        assert_eq!(out["era"], "legacy", "{out}");
    }
}

// ---- server-everything: a handshake-era upstream asking mid-call ----

fn everything_elicitation_accepted(mode: &str) {
    let daemon = everything_daemon();
    let answers = Answers::accept(json!({"name": "Ada Lovelace", "check": true}), "unused");
    let call = mcpx_call("everything", "trigger-elicitation-request", json!({}));
    let out = answering_client(daemon.url(), mode, "mcpx_call", &call, &answers);
    assert_era(&out, mode);
    assert_asked_once(&out, "elicitation/create");
    assert_eq!(
        out["asked"][0]["params"]["message"], "Please provide inputs for the following fields:",
        "the upstream's own question reached the client: {out}"
    );
    let text = result_text(&out);
    assert!(text.contains("User provided the requested information"), "{out}");
    assert!(text.contains("- Name: Ada Lovelace"), "the answer reached the upstream: {out}");
    assert!(text.contains("- Agreed to terms: true"), "{out}");
}

fn everything_elicitation_declined(mode: &str) {
    let daemon = everything_daemon();
    let call = mcpx_call("everything", "trigger-elicitation-request", json!({}));
    let out = answering_client(daemon.url(), mode, "mcpx_call", &call, &Answers::decline());
    assert_era(&out, mode);
    assert_asked_once(&out, "elicitation/create");
    let text = result_text(&out);
    assert!(text.contains("User declined to provide the requested information"), "{out}");
    assert!(!text.contains("- Name:"), "{out}");
}

fn everything_sampling(mode: &str) {
    let daemon = everything_daemon();
    let answers = Answers::accept(json!({}), "forty-two from the host model");
    let call =
        mcpx_call("everything", "trigger-sampling-request", json!({"prompt": "meaning of life", "maxTokens": 20}));
    let out = answering_client(daemon.url(), mode, "mcpx_call", &call, &answers);
    assert_era(&out, mode);
    assert_asked_once(&out, "sampling/createMessage");
    let params = &out["asked"][0]["params"];
    assert_eq!(params["maxTokens"], 20, "{out}");
    assert!(
        params["messages"][0]["content"]["text"].as_str().unwrap_or_default().contains("meaning of life"),
        "the upstream's prompt reached the client: {out}"
    );
    let text = result_text(&out);
    assert!(text.starts_with("LLM sampling result:"), "{out}");
    assert!(text.contains("forty-two from the host model"), "the client's text reached the upstream: {out}");
    assert!(text.contains("answering-client-model"), "{out}");
}

#[test]
fn everything_elicitation_is_answered_by_the_python_client_on_its_legacy_session() {
    everything_elicitation_accepted(LEGACY);
}

#[test]
fn everything_elicitation_is_answered_by_the_python_client_in_an_input_required_round() {
    everything_elicitation_accepted(MODERN);
}

#[test]
fn everything_elicitation_declined_by_a_legacy_python_client_is_relayed_as_declined() {
    everything_elicitation_declined(LEGACY);
}

#[test]
fn everything_elicitation_declined_by_a_2026_python_client_is_relayed_as_declined() {
    everything_elicitation_declined(MODERN);
}

#[test]
fn everything_sampling_is_answered_by_the_python_client_on_its_legacy_session() {
    everything_sampling(LEGACY);
}

#[test]
fn everything_sampling_is_answered_by_the_python_client_in_an_input_required_round() {
    everything_sampling(MODERN);
}

// ---- a Python `mcp` 2.x server: a 2026 upstream answering input_required ----

fn python_server_elicitation(mode: &str, answers: &Answers, expected: &str) {
    let server = ScriptServer::start("asking_server.py", &[]);
    let daemon = asking_daemon(&server);
    let call = mcpx_call("pyask", "greet", json!({"question": "What is your name?"}));
    let out = answering_client(daemon.url(), mode, "mcpx_call", &call, answers);
    assert_era(&out, mode);
    assert_asked_once(&out, "elicitation/create");
    assert_eq!(out["asked"][0]["params"]["message"], "What is your name?", "{out}");
    assert_eq!(out["asked"][0]["params"]["requestedSchema"]["properties"]["name"]["type"], "string", "{out}");
    assert_eq!(result_text(&out), expected, "{out}");
}

fn python_server_sampling(mode: &str) {
    let server = ScriptServer::start("asking_server.py", &[]);
    let daemon = asking_daemon(&server);
    let call = mcpx_call("pyask", "complete", json!({"prompt": "Say something"}));
    let answers = Answers::accept(json!({}), "something, from the host");
    let out = answering_client(daemon.url(), mode, "mcpx_call", &call, &answers);
    assert_era(&out, mode);
    assert_asked_once(&out, "sampling/createMessage");
    assert_eq!(out["asked"][0]["params"]["messages"][0]["content"]["text"], "Say something", "{out}");
    assert_eq!(result_text(&out), "sampled: something, from the host", "{out}");
}

#[test]
fn python_server_input_required_is_relayed_to_a_2026_python_client_and_completes() {
    python_server_elicitation(
        MODERN,
        &Answers::accept(json!({"name": "Grace Hopper"}), "unused"),
        "hello Grace Hopper",
    );
}

#[test]
fn python_server_input_required_is_asked_on_a_legacy_python_clients_session_and_completes() {
    python_server_elicitation(
        LEGACY,
        &Answers::accept(json!({"name": "Grace Hopper"}), "unused"),
        "hello Grace Hopper",
    );
}

#[test]
fn python_server_elicitation_declined_by_a_2026_python_client_is_relayed_as_declined() {
    python_server_elicitation(MODERN, &Answers::decline(), "not answered: decline");
}

#[test]
fn python_server_elicitation_declined_by_a_legacy_python_client_is_relayed_as_declined() {
    python_server_elicitation(LEGACY, &Answers::decline(), "not answered: decline");
}

#[test]
fn python_server_sampling_is_answered_by_a_2026_python_client() {
    python_server_sampling(MODERN);
}

#[test]
fn python_server_sampling_is_answered_by_a_legacy_python_client() {
    python_server_sampling(LEGACY);
}
