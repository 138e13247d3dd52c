//! What every node of a cluster shares: a `requestState` any node opens (its retry goes on
//! where its first round left the call), questions kept for `/v1` callers, and artifacts.
//! Each boundary is tried from the other side too: another cluster's state, another
//! token's questions and artifacts, through every node.

use mcpx_e2e::client::Modern;
use mcpx_e2e::cluster::{Cluster, Redis};
use mcpx_e2e::{Daemon, Home, fakemcp, tag};
use serde_json::{Value, json};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// A handshake-era upstream that asks mid-call (its call is held) and a 2026 one that
/// answers `input_required`, both one instance per session.
fn askers(tag: &str) -> Value {
    json!({
        "old": fakemcp("session", tag, &["--fixture", "conformance", "--era", "legacy"]),
        "new": fakemcp("session", tag, &["--fixture", "conformance"]),
    })
}

/// A `tools/call` of `mcpx_call` → `server`'s `tool` in session `label`, with a retry's fields.
fn call(server: &str, tool: &str, arguments: &Value, label: &str, retry: Value) -> Modern {
    let mut params =
        json!({"name": "mcpx_call", "arguments": {"server": server, "tool": tool, "arguments": arguments}});
    for (k, v) in retry.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    Modern::new("tools/call", params).meta(CAPABILITIES, json!({"elicitation": {}})).session(label)
}

/// The one question of an `input_required` answer: its key and mcpx's state.
fn question(reply: &mcpx_e2e::client::Reply) -> (String, String) {
    let result = reply.result();
    assert_eq!(result["resultType"], "input_required", "{reply}");
    let key = result["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).expect("a question");
    (key, result["requestState"].as_str().expect("requestState").to_owned())
}

/// Each kind of upstream: its eliciting tool, arguments, an answer, and what the result says then.
fn cases() -> [(&'static str, &'static str, Value, Value, &'static str); 2] {
    [
        (
            "old",
            "test_elicitation",
            json!({"message": "Your name?"}),
            json!({"action": "accept", "content": {"response": "Ada"}}),
            "Ada",
        ),
        (
            "new",
            "test_input_required_result_elicitation",
            json!({}),
            json!({"action": "accept", "content": {"name": "Grace"}}),
            "Hello, Grace!",
        ),
    ]
}

#[test]
fn a_question_asked_through_one_node_is_answered_through_another() {
    let tag = tag();
    let cluster = Cluster::start(askers(&tag), "3s", json!({}));
    for (server, tool, args, answer, expected) in cases() {
        for (asked, answered) in [(0, 1), (2, 0)] {
            let label = format!("{server}-{asked}-{answered}");
            let first = call(server, tool, &args, &label, json!({})).send(cluster.nodes[asked].url());
            let (key, state) = question(&first);
            assert_eq!(cluster.owner_of(server, &format!("session:{label}")), Some(asked), "asked where it landed");
            let retry = json!({"inputResponses": {key: answer}, "requestState": state});
            let second = call(server, tool, &args, &label, retry).send(cluster.nodes[answered].url());
            let text = second.result()["content"][0]["text"].as_str().unwrap_or_default().to_owned();
            assert!(text.contains(expected), "{server}: asked on node {asked}, answered on node {answered}:\n{second}");
            assert_eq!(second.result()["resultType"], "complete", "{second}");
        }
    }
    // Through nginx, wherever each round lands.
    for (server, tool, args, answer, expected) in cases() {
        let label = format!("{server}-nginx");
        let first = call(server, tool, &args, &label, json!({})).send(&cluster.nginx.url());
        let (key, state) = question(&first);
        let retry = json!({"inputResponses": {key: answer}, "requestState": state});
        let second = call(server, tool, &args, &label, retry).send(&cluster.nginx.url());
        assert!(second.result()["content"][0]["text"].as_str().unwrap_or_default().contains(expected), "{second}");
    }
}

#[test]
fn a_request_state_from_another_cluster_or_altered_is_refused_by_every_node() {
    let tag = tag();
    let cluster = Cluster::start(askers(&tag), "3s", json!({}));
    // A daemon of another cluster (its own secret, its own Redis) serving the same servers.
    let redis = Redis::start();
    let foreign = Daemon::start_in(
        Home::new(&json!({
            "mcpServers": askers(&tag),
            "cluster": {"redis": redis.url(), "secret": "another cluster's secret, 32+ characters", "nodeId": "x1"},
        })),
        &[],
    );
    for (server, tool, args, answer, _) in cases() {
        let label = format!("{server}-forged");
        let (key, theirs) = question(&call(server, tool, &args, &label, json!({})).send(foreign.url()));
        let (_, ours) = question(&call(server, tool, &args, &label, json!({})).send(cluster.nodes[0].url()));
        let (body, tag_part) = ours.split_once('.').expect("a state has a body and a tag");
        let mut altered: Vec<char> = body.chars().collect();
        altered[4] = if altered[4] == 'A' { 'B' } else { 'A' };
        let altered = format!("{}.{tag_part}", altered.into_iter().collect::<String>());
        for state in [&theirs, &altered] {
            for node in &cluster.nodes {
                let retry = json!({"inputResponses": {key.clone(): answer.clone()}, "requestState": state});
                let reply = call(server, tool, &args, &label, retry).send(node.url());
                assert_eq!(reply.error_code(), -32602, "{server} through {}:\n{reply}", node.url());
                let message = reply.error()["message"].as_str().unwrap_or_default().to_owned();
                assert!(message.contains("requestState refused"), "{message}");
            }
        }
    }
}
