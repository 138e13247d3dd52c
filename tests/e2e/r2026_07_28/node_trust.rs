//! Node-to-node requests as someone on the network between the nodes would attack them:
//! a signed request seen once on the wire must not be usable again, on its own node or
//! on another.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mcpx_e2e::client::http;
use mcpx_e2e::cluster::Cluster;
use mcpx_e2e::tap::{HttpTap, TappedRequest};
use mcpx_e2e::{Modern, Reply, Whoami, fakemcp, tag};
use serde_json::json;

const ALICE: &str = "Bearer alice-token-0123456789";

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

fn alice(url: &str) -> Reply {
    Modern::mcpx_call("notes", "whoami", json!({})).session("work").header("Authorization", ALICE).send(url)
}

fn alices_cluster(announce: [Option<String>; 3]) -> Cluster {
    let tokens = json!({"http": {"tokens": {"alice": "alice-token-0123456789"}}});
    Cluster::start_announcing(json!({"notes": fakemcp("session", &tag(), &[])}), "60s", tokens, announce)
}

/// Alice's call, forwarded by n2 to the owner n1 over a wire someone records (n1 is
/// reached through a recording relay). Replaying the recorded request, to n1 within the
/// signature's time window or to n3, is refused: a node accepts each signed request
/// once, and only the node it was signed for.
#[test]
fn a_captured_node_request_is_refused_when_replayed_or_sent_to_another_node() {
    let mut wire = HttpTap::start_unbound();
    let cluster = alices_cluster([Some(wire.base()), None, None]);
    wire.relay_to(cluster.nodes[0].url());
    Whoami::of(&alice(cluster.nodes[0].url()));
    Whoami::of(&alice(cluster.nodes[1].url()));
    let captured = wire
        .requests()
        .into_iter()
        .find(|r| r.header("x-mcpx-node").is_some())
        .unwrap_or_else(|| panic!("n2 forwarded to n1 through the relay:\n{}", wire.transcript()));
    assert_eq!(captured.header("authorization"), None, "the caller's token stays on n2: {captured:?}");

    for (node, url) in [("n1, again", cluster.nodes[0].url()), ("n3", cluster.nodes[2].url())] {
        let again = replay(&captured, url);
        assert_eq!(again.status, 401, "a captured node request replayed to {node} was taken:\n{}", again.body);
        assert!(!again.body.contains("\"instance\""), "no upstream answered it: {}", again.body);
    }
}

/// Someone who can write to the cluster's Redis but does not know `cluster.secret`
/// rewrites the lease of alice's instance to name a URL of theirs. No node sends
/// anything there (alice's principal, her arguments, or a request to an internal
/// address): the lease is refused, naming what is wrong, and alice's call fails.
#[test]
fn a_lease_naming_a_url_no_node_wrote_is_never_followed() {
    let cluster = alices_cluster([None, None, None]);
    Whoami::of(&alice(cluster.nodes[0].url()));
    let leases = cluster.redis.cli(&["--scan", "--pattern", "mcpx:lease:*"]);
    let lease = leases.lines().next().unwrap_or_else(|| panic!("n1 holds a lease: {leases:?}"));
    let value = cluster.redis.cli(&["GET", lease]);
    // Only the URL changes: the fence, the node and whatever else the value holds stay.
    let elsewhere = HttpTap::start(cluster.nodes[0].url());
    let mut fields: Vec<String> = value.split(' ').map(str::to_owned).collect();
    assert!(fields.len() >= 3 && fields[2].starts_with("http://"), "a lease's third field is its URL: {value:?}");
    fields[2] = elsewhere.base();
    cluster.redis.cli(&["SET", lease, &fields.join(" "), "KEEPTTL"]);

    let refused = alice(cluster.nodes[1].url());
    assert!(elsewhere.requests().is_empty(), "a node followed a forged lease:\n{}", elsewhere.transcript());
    assert!(refused.body.contains("no node of this cluster wrote it"), "{refused}");
}

/// The head of a request declaring a body it never sends, and the status line the node
/// answers with, if it answers within `within`.
fn head_only(url: &str, headers: &[(&str, &str)], within: Duration) -> Option<String> {
    let authority = url.trim_start_matches("http://").split('/').next().expect("host:port");
    let mut stream = TcpStream::connect(authority).expect("connect to the node");
    stream.set_read_timeout(Some(within)).expect("a read timeout");
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: 4000000\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.windows(2).any(|w| w == b"\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.split("\r\n").next().filter(|line| !line.is_empty()).map(str::to_owned)
}

/// Someone with no token who claims to be a node is refused from the head of its
/// request, as a caller without a token is: the node neither waits for nor keeps the
/// body (up to `http.maxBodyBytes`, for up to `http.bodyReadTimeout`) of a request it
/// cannot yet tell is signed.
#[test]
fn a_request_claiming_to_be_a_node_is_refused_before_its_body_is_read() {
    let cluster = alices_cluster([None, None, None]);
    let url = cluster.nodes[0].url();
    let within = Duration::from_secs(10);
    let caller = head_only(url, &[], within);
    assert!(caller.as_deref().is_some_and(|l| l.contains(" 401 ")), "a caller without a token: {caller:?}");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().to_string();
    let node = head_only(
        url,
        &[
            ("X-Mcpx-Node", "n2"),
            ("X-Mcpx-Node-Time", &now),
            ("X-Mcpx-Node-Nonce", "00112233445566778899aabbccddeeff"),
            ("X-Mcpx-Node-Principal", "eyJUb2tlbiI6ImFsaWNlIn0"),
            ("X-Mcpx-Node-Signature", &"0".repeat(64)),
        ],
        within,
    );
    assert!(
        node.as_deref().is_some_and(|l| l.contains(" 401 ")),
        "an unsigned node request was not refused from its head within {within:?}: {node:?}"
    );
}
