//! Node-to-node requests as someone on the network between the nodes would attack them:
//! a signed request seen once on the wire must not be usable again, on its own node or
//! on another.

use std::process::Command;

use mcpx_e2e::client::http;
use mcpx_e2e::cluster::Cluster;
use mcpx_e2e::tap::{HttpTap, TappedRequest};
use mcpx_e2e::{Modern, Reply, Whoami, fakemcp, tag};
use serde_json::json;

const ALICE: &str = "Bearer alice-token-0123456789";

fn redis(cluster: &Cluster, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &cluster.redis.port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli runs (scripts/deps.sh installs it)");
    assert!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("redis-cli prints text").trim().to_owned()
}

/// Sends a request again, byte for byte as it was captured, to `url`.
fn replay(request: &TappedRequest, url: &str) -> Reply {
    let method = reqwest::Method::from_bytes(request.method.as_bytes()).expect("a captured method");
    let mut replayed = http().request(method, url).body(request.raw_body.clone());
    for (name, value) in &request.headers {
        if !["host", "content-length", "connection", "transfer-encoding"].contains(&name.as_str()) {
            replayed = replayed.header(name, value);
        }
    }
    let answer = replayed.send().expect("the node answers");
    let status = answer.status().as_u16();
    let headers =
        answer.headers().iter().map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned())).collect();
    Reply { status, headers, body: answer.text().unwrap_or_default(), frames: Vec::new() }
}

/// Alice's call, forwarded by n2 to the owner n1 over a wire someone records (here: n1's
/// lease names a recording relay in front of n1). Replaying the recorded request, to n1
/// within the signature's time window or to n3, is refused: a node accepts each signed
/// request once, and only the node it was signed for.
#[test]
fn a_captured_node_request_is_refused_when_replayed_or_sent_to_another_node() {
    let tag = tag();
    let tokens = json!({"http": {"tokens": {"alice": "alice-token-0123456789"}}});
    let cluster = Cluster::start(json!({"notes": fakemcp("session", &tag, &[])}), "60s", tokens);
    let alice = |url: &str| {
        Modern::mcpx_call("notes", "whoami", json!({})).session("work").header("Authorization", ALICE).send(url)
    };
    Whoami::of(&alice(cluster.nodes[0].url()));
    let leases = redis(&cluster, &["--scan", "--pattern", "mcpx:lease:*"]);
    let lease = leases.lines().next().unwrap_or_else(|| panic!("n1 holds a lease: {leases:?}"));
    let value = redis(&cluster, &["GET", lease]);
    let (fence_and_node, _url) = value.rsplit_once(' ').unwrap_or_else(|| panic!("a lease value: {value:?}"));
    let tap = HttpTap::start(cluster.nodes[0].url());
    let through = tap.url().trim_end_matches("/mcp").to_owned();
    redis(&cluster, &["SET", lease, &format!("{fence_and_node} {through}"), "KEEPTTL"]);

    let forwarded = alice(cluster.nodes[1].url());
    Whoami::of(&forwarded);
    redis(&cluster, &["SET", lease, &value, "KEEPTTL"]);
    let captured = tap
        .requests()
        .into_iter()
        .find(|r| r.header("x-mcpx-node").is_some())
        .unwrap_or_else(|| panic!("n2 forwarded through the relay:\n{}", tap.transcript()));
    assert_eq!(captured.header("authorization"), None, "the caller's token stays on n2: {captured:?}");

    for (node, url) in [("n1, again", cluster.nodes[0].url()), ("n3", cluster.nodes[2].url())] {
        let again = replay(&captured, url);
        assert_eq!(again.status, 401, "a captured node request replayed to {node} was taken:\n{}", again.body);
        assert!(!again.body.contains("\"instance\""), "no upstream answered it: {}", again.body);
    }
}
