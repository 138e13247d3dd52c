//! A call relayed to the node that owns its instance (a handshake-era session's, here) is
//! the same call as one answered where it landed: the upstream is told the same
//! invocation context, and the relaying node journals it as reaching that instance.
//! The relay route itself is a node's only: anyone else is refused before its body.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mcpx_e2e::client::{Modern, Raw, next_id};
use mcpx_e2e::cluster::Cluster;
use mcpx_e2e::schema::LEGACY;
use mcpx_e2e::upstreams::RawPost;
use mcpx_e2e::upstreams::everything;
use mcpx_e2e::{Daemon, LegacySession, config, fakemcp, poll, tag};
use serde_json::{Value, json};

const ALICE: &str = "alice-token-relay";

/// A cluster whose nodes know alice's token and one global fakemcp server `name` (started
/// with `args`, the config merged with `extra`, whose `mcpServers` come beside it), its
/// instance taken by node 0; and alice's `Authorization` value.
fn with_instance_on_node_0(name: &str, args: &[&str], extra: Value) -> (Cluster, String) {
    let mut cfg = json!({"http": {"tokens": {"alice": ALICE}}});
    let mut servers = json!({ name: fakemcp("global", &tag(), args) });
    if let (Some(cfg), Some(servers), Some(extra)) = (cfg.as_object_mut(), servers.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            match (key.as_str(), value.as_object()) {
                ("mcpServers", Some(more)) => servers.extend(more.clone()),
                _ => drop(cfg.insert(key.clone(), value.clone())),
            }
        }
    }
    let cluster = Cluster::start(servers, "60s", cfg);
    let bearer = format!("Bearer {ALICE}");
    let first =
        Modern::mcpx_call(name, "whoami", json!({})).header("Authorization", &bearer).send(cluster.nodes[0].url());
    assert!(first.structured()["instance"].is_string(), "{first}");
    assert_eq!(cluster.owner_of(name, "global"), Some(0));
    (cluster, bearer)
}

/// Alice's first call of the cluster's `everything` server, made on node 0 so that node 0
/// runs its instance; returns alice's `Authorization` value.
fn everything_on_node_0(cluster: &Cluster) -> String {
    let bearer = format!("Bearer {ALICE}");
    let first = Modern::mcpx_call("everything", "echo", json!({"message": "hi"}))
        .header("Authorization", &bearer)
        .send(cluster.nodes[0].url());
    assert!(first.result()["content"].is_array(), "{first}");
    assert_eq!(cluster.owner_of("everything", "global"), Some(0));
    bearer
}

/// The `tools/call` records `node` journaled (newest first), once it holds at least `n`.
fn calls(node: &Daemon, n: usize) -> Vec<Value> {
    let read = || {
        let reply = node.home().v1("GET", "/v1/log?limit=100", None);
        assert_eq!(reply.status, 200, "{}", reply.body);
        let records = reply.json()["records"].as_array().cloned().unwrap_or_default();
        records.into_iter().filter(|r| r["method"] == "tools/call").collect::<Vec<_>>()
    };
    poll(Duration::from_secs(15), || Some(read()).filter(|r| r.len() >= n))
        .unwrap_or_else(|| panic!("node never journaled {n} calls: {:#?}", read()))
}

#[test]
fn a_relayed_legacy_call_is_told_its_session_and_journaled_with_the_instance_it_reached() {
    let (cluster, bearer) = with_instance_on_node_0("shared", &[], json!({}));
    let nodes = &cluster.nodes;

    // The same call from a handshake-era session held by node 0 (answered there) and by
    // node 1 (relayed to node 0).
    let meta_through = |node: &Daemon| {
        let session = LegacySession::open_as(node.url(), "2025-11-25", &[("Authorization", &bearer)]);
        let reply = session.mcpx_call("shared", "meta", json!({}));
        reply.structured()["meta"]["dev.mcpx/invocation"].clone()
    };
    let (here, relayed) = (meta_through(&nodes[0]), meta_through(&nodes[1]));
    assert!(here["sessionId"].as_str().is_some_and(|s| s.starts_with("mcpx-")), "{here}");
    assert!(
        relayed["sessionId"].as_str().is_some_and(|s| s.starts_with("mcpx-") && s != here["sessionId"]),
        "a relayed call from a legacy session is told its own session: {relayed} / {here}"
    );
    for field in ["scope", "clientId"] {
        assert_eq!(relayed[field], here[field], "{field}: {relayed} / {here}");
    }

    // Node 1 journals its relayed call as reaching node 0's instance, with its traffic.
    let owner = calls(&nodes[0], 2);
    let relaying = calls(&nodes[1], 1);
    let (direct, via) = (&owner[0], &relaying[0]);
    assert_eq!(via["instance"], direct["instance"], "{via} / {direct}");
    assert_eq!(via["server"], json!("shared"), "{via}");
    assert_eq!(via["name"], direct["name"], "{via} / {direct}");
    assert!(via["bytesIn"].as_i64().unwrap_or_default() > 0, "{via}");
    assert!(via["bytesOut"].as_i64().unwrap_or_default() > 0, "{via}");
}

/// A caller whose call is relayed hears what the upstream says of it on the way, as it
/// would where its instance runs: its progress notifications, under its own token, and the
/// log messages at or above its session's level, before the result.
#[test]
fn a_relayed_legacy_call_passes_back_its_progress_and_log_messages() {
    let conf = fakemcp("global", &tag(), &["--fixture", "conformance"]);
    let (cluster, bearer) = with_instance_on_node_0("shared", &[], json!({"mcpServers": {"conf": conf}}));
    let nodes = &cluster.nodes;
    let conformance =
        Modern::mcpx_call("conf", "test_simple_text", json!({})).header("Authorization", &bearer).send(nodes[0].url());
    assert!(conformance.result()["content"].is_array(), "{conformance}");
    assert_eq!(cluster.owner_of("conf", "global"), Some(0));

    let session = LegacySession::open_as(nodes[1].url(), "2025-11-25", &[("Authorization", &bearer)]);
    let call = |server: &str, tool: &str, meta: Value| {
        let arguments = json!({"server": server, "tool": tool, "arguments": {"count": 3}});
        session.request("tools/call", json!({"name": "mcpx_call", "arguments": arguments, "_meta": meta}))
    };
    let notes = |reply: &mcpx_e2e::client::Reply, method: &str| -> Vec<Value> {
        let response = reply.frames.iter().position(|f| f.get("id").is_some()).expect("a response");
        let before = &reply.frames[..response];
        assert_eq!(before.len() + 1, reply.frames.len(), "nothing follows the response: {reply}");
        before.iter().filter(|f| f["method"] == method).map(|f| f["params"].clone()).collect()
    };

    let flooded = call("shared", "flood", json!({"progressToken": "mine"}));
    assert_eq!(flooded.structured()["sent"], 3, "{flooded}");
    let progress = notes(&flooded, "notifications/progress");
    assert_eq!(progress.len(), 3, "every progress notification comes back: {flooded}");
    assert!(progress.iter().all(|p| p["progressToken"] == "mine"), "{flooded}");

    let level = session.request("logging/setLevel", json!({"level": "warning"}));
    assert!(level.result().is_object(), "{level}");
    let logged = call("conf", "test_logging_levels", json!({}));
    assert!(logged.result()["content"].is_array(), "{logged}");
    let messages = notes(&logged, "notifications/message");
    assert_eq!(messages.len(), 1, "only the error message is at or above warning: {logged}");
    assert_eq!(messages[0]["level"], "error", "{logged}");
}

/// A handshake-era upstream's question during a relayed call reaches the caller where it
/// landed, and the caller's answer reaches the upstream: the call completes with it.
#[test]
fn a_question_during_a_relayed_legacy_call_is_put_to_its_caller() {
    let (cluster, bearer) =
        with_instance_on_node_0("asker", &["--era", "legacy", "--fixture", "conformance"], json!({}));
    // On the node that owns the instance, and on another (relayed).
    for node in &cluster.nodes[..2] {
        asks_and_is_answered(node.url(), &bearer);
    }
}

/// A session on the node at `url` that can be asked to elicit calls the handshake-era
/// upstream `asker`'s `test_elicitation`, and answers its question.
fn asks_and_is_answered(url: &str, bearer: &str) {
    let headers = |session: &str| {
        let mut headers = vec![
            ("Content-Type".to_owned(), "application/json".to_owned()),
            ("Accept".to_owned(), "application/json, text/event-stream".to_owned()),
            ("MCP-Protocol-Version".to_owned(), LEGACY.to_owned()),
            ("Authorization".to_owned(), bearer.to_owned()),
        ];
        if !session.is_empty() {
            headers.push(("Mcp-Session-Id".to_owned(), session.to_owned()));
        }
        headers
    };
    let post = |session: &str, frame: Value, method: Option<&str>| {
        let body = Some(frame.to_string().into_bytes());
        Raw { http_method: "POST", url, headers: headers(session), body, revision: LEGACY, method }.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": next_id(), "method": "initialize", "params": {
        "protocolVersion": LEGACY, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "mcpx-e2e", "version": "0"}}});
    let opened = post("", initialize, Some("initialize"));
    let session = opened.header("mcp-session-id").expect("a session").to_owned();
    let ack = post(&session, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), None);
    assert_eq!(ack.status, 202, "{ack}");

    let call = json!({"jsonrpc": "2.0", "id": next_id(), "method": "tools/call", "params": {"name": "mcpx_call",
        "arguments": {"server": "asker", "tool": "test_elicitation", "arguments": {"message": "Your name?"}}}});
    let mut stream = RawPost::send(url, LEGACY, &headers(&session), &call);
    assert_eq!(stream.status(), 200, "{:?}", stream.head);
    let question = stream.read_until(Duration::from_secs(15), |f| f["method"] == "elicitation/create");
    assert_eq!(question["params"]["message"], "Your name?", "{question}");
    let answer = json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {"response": "Ada"}}});
    let taken = post(&session, answer, None);
    assert_eq!(taken.status, 202, "the answer was not accepted: {taken}");
    let reply = stream.read_until(Duration::from_secs(15), |f| f.get("result").is_some() || f.get("error").is_some());
    let text = reply["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("accept") && text.contains("Ada"), "the upstream did not get the answer: {reply}");
}

/// A handshake-era session's subscription to a resource whose instance another node owns
/// reaches that instance: the updates it sends arrive on the session's standalone stream,
/// as they would where the instance runs, each session hearing only what it subscribed
/// to. A node holds at most `cluster.maxRelayedSubscriptions` such subscriptions, and a
/// session a request names by label (whose end the node cannot know) gets none.
#[test]
fn a_legacy_sessions_subscription_to_a_resource_another_node_serves_gets_its_updates() {
    let cfg = json!({"http": {"tokens": {"alice": ALICE}}});
    let servers = json!({"everything": everything(&tag())});
    let cluster = Cluster::start_with(servers, "60s", cfg, |_, _| json!({"maxRelayedSubscriptions": 2}));
    let bearer = everything_on_node_0(&cluster);
    let nodes = &cluster.nodes;
    let open = || LegacySession::open_as(nodes[1].url(), "2025-11-25", &[("Authorization", &bearer)]);
    let (session, neighbour) = (open(), open());
    let uris = session.resource_uris();
    let subscribe = |who: &LegacySession, uri: &str, meta: Value| {
        who.request("resources/subscribe", json!({ "uri": uri, "_meta": meta }))
    };
    subscribe(&session, &uris[0], json!({})).result();
    subscribe(&neighbour, &uris[1], json!({})).result();
    let over = subscribe(&session, &uris[2], json!({}));
    assert_eq!(over.error_code(), -32602, "{over}");
    assert!(over.to_string().contains("maxRelayedSubscriptions"), "{over}");
    let labelled = subscribe(&session, &uris[0], json!({"dev.mcpx/session": "a-label"}));
    assert!(labelled.frame().get("error").is_some() && labelled.to_string().contains("n1"), "{labelled}");

    let arrived = session.standalone_events();
    let neighbour_arrived = neighbour.standalone_events();
    // server-everything sends updates for what it was subscribed to once this is on, then
    // every 5 seconds; the call is relayed to node 0's instance as well.
    session.mcpx_call("everything", "toggle-subscriber-updates", json!({})).result();
    for (events, uri) in [(&arrived, &uris[0]), (&neighbour_arrived, &uris[1])] {
        let heard = mcpx_e2e::client::resource_updates(events, Duration::from_secs(7));
        assert!(!heard.is_empty(), "no update of {uri} reached the session that subscribed to it");
        for update in &heard {
            assert_eq!(update["params"]["uri"], json!(uri), "a session hears only what it subscribed to: {update}");
            mcpx_e2e::schema::spec(LEGACY).assert_valid("ResourceUpdatedNotification", update, "a relayed update");
        }
    }
}

/// The same subscription by the resource's own URI (a server exposed under its own names):
/// found through this node's listing, it still goes to the node that runs the instance,
/// and its updates come back; leaving it is answered too.
#[test]
fn a_legacy_subscription_by_own_uri_reaches_the_node_that_serves_it() {
    let cfg = json!({"http": {"tokens": {"alice": ALICE}}, "expose": ["everything"], "exposePrefix": "never"});
    let cluster = Cluster::start(json!({"everything": everything(&tag())}), "60s", cfg);
    let bearer = everything_on_node_0(&cluster);
    let session = LegacySession::open_as(cluster.nodes[1].url(), "2025-11-25", &[("Authorization", &bearer)]);
    let uri = session.resource_uris().into_iter().next().expect("everything lists resources");
    assert!(!uri.starts_with("mcpx://"), "listed under its own URI: {uri}");
    let subscribed = session.request("resources/subscribe", json!({ "uri": uri }));
    subscribed.result();
    let arrived = session.standalone_events();
    session.mcpx_call("everything", "toggle-subscriber-updates", json!({})).result();
    let heard = mcpx_e2e::client::resource_updates(&arrived, Duration::from_secs(7));
    assert!(!heard.is_empty(), "no update of {uri} reached the session that subscribed to it");
    assert!(heard.iter().all(|update| update["params"]["uri"] == json!(uri)), "{heard:?}");
    let left = session.request("resources/unsubscribe", json!({ "uri": uri }));
    left.result();
}

/// A handshake-era session's completion for a prompt whose instance another node runs is
/// relayed there, as its call of the prompt's server would be, and answered by that
/// instance with the session's invocation context.
#[test]
fn a_legacy_sessions_completion_for_a_server_another_node_runs_is_relayed() {
    let (cluster, bearer) = with_instance_on_node_0("shared", &[], json!({}));
    let session = LegacySession::open_as(cluster.nodes[1].url(), "2025-11-25", &[("Authorization", &bearer)]);
    let argument = json!({"name": "topic", "value": ""});
    let reply = session.request(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "shared__meta"}, "argument": argument}),
    );
    let values = reply.result()["completion"]["values"].clone();
    let meta: Value = serde_json::from_str(values[0].as_str().unwrap_or_default()).unwrap_or_default();
    let invocation = &meta["dev.mcpx/invocation"];
    assert!(invocation["sessionId"].as_str().is_some_and(|s| s.starts_with("mcpx-")), "{reply}");
    assert_eq!(cluster.owner_of("shared", "global"), Some(0), "answered by node 0's instance, not a second one");
}

/// A relayed call whose caller listens ends on the owner when the relaying node goes away
/// mid-call (killed): the owner's upstream is told the call is cancelled, as it is when a
/// caller of the owner's own goes, instead of working on for nobody.
#[test]
fn a_relayed_call_ends_on_the_owner_when_the_relaying_node_goes() {
    let tap = mcpx_e2e::tap::StdioTap::new();
    let plain = mcpx_e2e::upstreams::tapped(&tap, &fakemcp("global", &tag(), &[]));
    let cfg = json!({"http": {"tokens": {"alice": ALICE}}});
    let mut cluster = Cluster::start(json!({ "plain": plain }), "60s", cfg);
    let bearer = format!("Bearer {ALICE}");
    let first =
        Modern::mcpx_call("plain", "whoami", json!({})).header("Authorization", &bearer).send(cluster.nodes[0].url());
    assert!(first.structured()["instance"].is_string(), "{first}");
    assert_eq!(cluster.owner_of("plain", "global"), Some(0));

    let (url, auth) = (cluster.nodes[1].url().to_owned(), bearer.clone());
    std::thread::spawn(move || {
        let session = LegacySession::open_as(&url, "2025-11-25", &[("Authorization", &auth)]);
        let call = json!({"server": "plain", "tool": "slow", "arguments": {"ms": 60_000}});
        // Answered by an error, or by nothing once node 1 is gone: either way it ends.
        let _ = std::panic::catch_unwind(|| {
            session
                .request("tools/call", json!({"name": "mcpx_call", "arguments": call, "_meta": {"progressToken": 1}}))
        });
    });
    let slow = poll(Duration::from_secs(15), || {
        tap.sent().into_iter().find(|m| m["method"] == "tools/call" && m["params"]["name"] == "slow")
    });
    let slow =
        slow.unwrap_or_else(|| panic!("the relayed call never reached the owner's upstream:\n{}", tap.transcript()));
    cluster.nodes[1].kill();
    let cancelled = poll(Duration::from_secs(15), || {
        tap.sent()
            .into_iter()
            .find(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == slow["id"])
    });
    assert!(cancelled.is_some(), "the owner's upstream was never told the call ended:\n{}", tap.transcript());
}

/// A token holder's request to the node-to-node relay routes (a relayed request, an answer
/// to a question) is refused before its body is read: a body declared a gigabyte long, of
/// which a kilobyte is sent, gets its 403 at once, instead of the node waiting for (and
/// holding) the rest.
#[test]
fn the_relay_routes_refuse_a_caller_before_reading_its_body() {
    let daemon = Daemon::start(&{
        let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
        cfg["http"] = json!({"tokens": {"alice": ALICE}});
        cfg
    });
    let port: u16 = daemon.url().rsplit(':').next().unwrap().trim_end_matches("/mcp").parse().unwrap();
    for route in ["/v1/cluster/relay", "/v1/cluster/relay/answer"] {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let head = format!(
            "POST {route} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ALICE}\r\n\
             Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&[b' '; 1024]).unwrap();
        let mut got = [0u8; 64];
        let n = stream.read(&mut got).unwrap_or_else(|e| panic!("{route}: no answer before the body came: {e}"));
        let text = String::from_utf8_lossy(&got[..n]);
        assert!(text.starts_with("HTTP/1.1 403"), "{route}: {text}");
    }
}

/// A handshake-era session's task-augmented call whose instance another node owns is a
/// task of the session, as on the node that owns it: its `tasks/get` and `tasks/result`
/// inside the session reach it.
#[test]
fn a_relayed_legacy_task_call_is_a_task_of_the_session() {
    let (cluster, bearer) = with_instance_on_node_0("plain", &["--era", "legacy"], json!({}));
    let nodes = &cluster.nodes;

    for node in &nodes[..2] {
        let session = LegacySession::open_as(node.url(), "2025-11-25", &[("Authorization", &bearer)]);
        let params = json!({"name": "mcpx_call", "arguments": {"server": "plain", "tool": "whoami", "arguments": {}},
            "task": {"ttl": 60_000}});
        let created = session.request("tools/call", params);
        let id = created.result()["task"]["taskId"].as_str().unwrap_or_else(|| panic!("no task: {created}")).to_owned();
        let ended = poll(Duration::from_secs(30), || {
            let got = session.request("tasks/get", json!({"taskId": id}));
            let status = got.result()["status"].as_str().unwrap_or_default().to_owned();
            (status != "working").then_some(got)
        })
        .expect("the task never ended");
        assert_eq!(ended.result()["status"], "completed", "{ended}");
        let result = session.request("tasks/result", json!({"taskId": id}));
        assert!(result.result()["structuredContent"]["instance"].is_string(), "{result}");
    }
}

/// A script's call carries what the script built, which no request body bounds: one of
/// 5 MiB (over `http.maxBodyBytes`, under the upstream message limit) reaches the instance
/// another node owns as it reaches one this node owns.
#[test]
fn a_relayed_script_call_larger_than_a_request_body_goes_through() {
    let (cluster, bearer) = with_instance_on_node_0("plain", &[], json!({}));
    let nodes = &cluster.nodes;
    let script = r#"const r = await call("plain", "echo", {pad: "x".repeat(5 * 1024 * 1024)});
        return {len: r.pad.length};"#;
    for node in &nodes[..2] {
        let reply = Modern::tools_call("mcpx_exec", json!({ "script": script }))
            .header("Authorization", &bearer)
            .send(node.url());
        let told = reply.to_string();
        assert_eq!(reply.structured()["len"], 5 * 1024 * 1024, "{}", &told[..told.len().min(600)]);
    }
}

/// A relayed call waits for the owner no longer than the call could take there (its
/// instance's start and `timeouts.request`): an owner that took the request and then
/// stopped answering (here: stopped with SIGSTOP) fails the call naming it, instead of
/// holding the caller for good.
#[test]
fn a_relayed_call_to_an_owner_that_stopped_answering_fails_within_its_timeouts() {
    let (cluster, bearer) =
        with_instance_on_node_0("plain", &[], json!({"timeouts": {"request": "2s", "handshake": "2s"}}));
    let nodes = &cluster.nodes;
    let session = LegacySession::open_as(nodes[1].url(), "2025-11-25", &[("Authorization", &bearer)]);
    let owner = nodes[0].pid();
    mcpx_e2e::process::signal(owner, libc::SIGSTOP);
    let started = std::time::Instant::now();
    let reply = std::panic::catch_unwind(|| session.mcpx_call("plain", "whoami", json!({})).to_string());
    let took = started.elapsed();
    mcpx_e2e::process::signal(owner, libc::SIGCONT);
    let reply = reply.unwrap_or_else(|_| panic!("no answer after {took:?}"));
    assert!(took < Duration::from_secs(20), "answered after {took:?}: {reply}");
    assert!(reply.contains("\"error\"") && reply.contains("n1"), "{reply}");
}
