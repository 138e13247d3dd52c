//! What every node of a cluster shares: a `requestState` any node opens (its retry goes on
//! where its first round left the call), questions kept for `/v1` callers, and artifacts.
//! Each boundary is tried from the other side too: another cluster's state, another
//! token's questions and artifacts, through every node.

use mcpx_e2e::client::Modern;
use mcpx_e2e::cluster::{Cluster, Redis};
use mcpx_e2e::{Daemon, Home, LegacySession, Whoami, fakemcp, tag};
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

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

fn tokens() -> Value {
    json!({"http": {"tokens": {"alice": ALICE, "bob": BOB}}})
}

/// A `/v1` request to `node` as the holder of `token`, in session `session`: status and JSON body.
fn v1(node: &Daemon, method: &str, path: &str, token: &str, session: &str, body: Option<Value>) -> (u16, Value) {
    let url = format!("{}{path}", mcpx_e2e::client::base_url(node.url()));
    let mut request = mcpx_e2e::client::http()
        .request(method.parse().unwrap(), &url)
        .header("Authorization", format!("Bearer {token}"))
        .header("X-Mcpx-Session", session);
    if let Some(body) = body {
        request = request.header("Content-Type", "application/json").body(body.to_string());
    }
    let response = request.send().unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = response.status().as_u16();
    let text = response.text().unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The ids of the questions `token`'s session `session` sees through `node`.
fn listed(node: &Daemon, token: &str, session: &str) -> Vec<String> {
    let (status, body) = v1(node, "GET", "/v1/ask", token, session, None);
    assert_eq!(status, 200, "{body}");
    body["questions"].as_array().expect("questions").iter().map(|q| q["id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn a_v1_question_asked_on_one_node_is_seen_and_answered_through_another_by_its_caller_only() {
    let tag = tag();
    let cluster = Cluster::start(askers(&tag), "3s", tokens());
    let nodes = &cluster.nodes;
    for (server, tool, args, answer, expected) in cases() {
        let session = format!("s-{server}");
        let asked = json!({"server": server, "tool": tool, "arguments": args});
        let (status, body) = v1(&nodes[0], "POST", "/v1/call", ALICE, &session, Some(asked));
        assert_eq!(status, 202, "{body}");
        let id = body["question"]["id"].as_str().expect("a question id").to_owned();
        let key = body["question"]["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).unwrap();
        let answering = json!({"id": id, "responses": {key: answer}});

        // Another token's holder, even naming the same session, finds nothing through any node.
        for node in nodes {
            assert!(listed(node, BOB, &session).is_empty(), "{server}: bob sees alice's question");
            let (status, body) = v1(node, "POST", "/v1/ask/answer", BOB, &session, Some(answering.clone()));
            assert_eq!(status, 400, "{server}: bob answers alice's question through {}: {body}", node.url());
            let (status, _) = v1(node, "POST", "/v1/ask/abandon", BOB, &session, Some(json!({"id": id})));
            assert_eq!(status, 400, "{server}: bob abandons alice's question");
            assert!(listed(node, ALICE, "another").is_empty(), "another session of alice's sees it");
        }
        // Alice sees it through every node, and answers through one that does not hold it.
        for node in nodes {
            assert_eq!(listed(node, ALICE, &session), std::slice::from_ref(&id), "{server} through {}", node.url());
        }
        let (status, body) = v1(&nodes[1], "POST", "/v1/ask/answer", ALICE, &session, Some(answering.clone()));
        assert_eq!(status, 200, "{server}: answered through node 1: {body}");
        assert!(body.to_string().contains(expected), "{server}: {body}");
        for node in nodes {
            assert!(listed(node, ALICE, &session).is_empty(), "{server}: answered, yet listed");
        }
        let (status, _) = v1(&nodes[0], "POST", "/v1/ask/answer", ALICE, &session, Some(answering));
        assert_eq!(status, 400, "{server}: answered twice");
    }
    // Asked through node 2, abandoned through node 0.
    let asked = json!({"server": "new", "tool": "test_input_required_result_elicitation", "arguments": {}});
    let (status, body) = v1(&nodes[2], "POST", "/v1/call", ALICE, "later", Some(asked));
    assert_eq!(status, 202, "{body}");
    let id = body["question"]["id"].as_str().unwrap().to_owned();
    let (status, body) = v1(&nodes[0], "POST", "/v1/ask/abandon", ALICE, "later", Some(json!({"id": id})));
    assert_eq!(status, 200, "{body}");
    assert!(listed(&nodes[1], ALICE, "later").is_empty());
}

/// A script run by `mcpx_exec` as `token`'s holder in session `session`, through `node`:
/// `{uri}` of the artifact it keeps (`name`, `size` bytes of the name's first letter), or
/// `{error}`.
fn keep(node: &Daemon, token: &str, session: &str, name: &str, size: usize) -> Value {
    let script = format!(
        "try {{ return {{ uri: await artifact({name:?}, {:?}) }}; }} catch (e) {{ return {{ error: e.message }}; }}",
        name[..1].repeat(size)
    );
    let reply = Modern::tools_call("mcpx_exec", json!({ "script": script }))
        .session(session)
        .header("Authorization", &format!("Bearer {token}"))
        .send(node.url());
    reply.structured().clone()
}

fn read(node: &Daemon, token: &str, session: &str, uri: &str) -> mcpx_e2e::client::Reply {
    Modern::new("resources/read", json!({ "uri": uri }))
        .session(session)
        .header("Authorization", &format!("Bearer {token}"))
        .send(node.url())
}

#[test]
fn an_artifact_kept_through_one_node_is_read_through_another_by_its_session_only_within_one_quota() {
    let tag = tag();
    let mut extra = tokens();
    extra["artifacts"] = json!({"quotaBytes": 2048});
    let cluster = Cluster::start(askers(&tag), "3s", extra);
    let nodes = &cluster.nodes;
    let kept = keep(&nodes[0], ALICE, "work", "a.txt", 1000);
    let uri = kept["uri"].as_str().unwrap_or_else(|| panic!("kept: {kept}")).to_owned();
    let id = uri.trim_start_matches("mcpx://artifacts/").to_owned();

    for node in nodes {
        let mine = read(node, ALICE, "work", &uri);
        assert_eq!(mine.result()["contents"][0]["text"], "a".repeat(1000), "read through {}", node.url());
        let (status, body) = v1(node, "GET", "/v1/artifacts", ALICE, "work", None);
        assert_eq!((status, body["artifacts"][0]["uri"].as_str()), (200, Some(uri.as_str())), "{body}");
        let (status, body) = v1(node, "GET", &format!("/v1/artifacts/{id}"), ALICE, "work", None);
        assert_eq!((status, body), (200, Value::String("a".repeat(1000))));
        // Another token's holder naming the same session, and another session of alice's,
        // find nothing through any node.
        for (token, session) in [(BOB, "work"), (ALICE, "play")] {
            read(node, token, session, &uri).assert_error(200, -32602);
            let (status, body) = v1(node, "GET", "/v1/artifacts", token, session, None);
            assert_eq!((status, &body["artifacts"]), (200, &json!([])), "{body}");
            assert_eq!(v1(node, "GET", &format!("/v1/artifacts/{id}"), token, session, None).0, 404);
            assert_eq!(v1(node, "DELETE", &format!("/v1/artifacts/{id}"), token, session, Some(json!({}))).0, 404);
        }
    }
    // The quota is the session's across the cluster: what node 0 keeps counts on node 1.
    let refused = keep(&nodes[1], ALICE, "work", "b.txt", 1000);
    let error = refused["error"].as_str().unwrap_or_else(|| panic!("kept past the quota: {refused}"));
    assert!(error.contains("artifacts.quotaBytes"), "{error}");
    let small = keep(&nodes[1], ALICE, "work", "c.txt", 100);
    assert!(small["uri"].is_string(), "{small}");
    // Bob's session of the same name has a quota of its own.
    assert!(keep(&nodes[2], BOB, "work", "b.txt", 1000)["uri"].is_string());
    // Deleted through one node, gone through all.
    assert_eq!(v1(&nodes[2], "DELETE", &format!("/v1/artifacts/{id}"), ALICE, "work", Some(json!({}))).0, 204);
    for node in nodes {
        read(node, ALICE, "work", &uri).assert_error(200, -32602);
    }
    assert!(keep(&nodes[0], ALICE, "work", "b.txt", 1000)["uri"].is_string(), "room again after the delete");
}

#[test]
fn the_pending_questions_limit_counts_every_nodes_questions() {
    let tag = tag();
    let mut extra = tokens();
    extra["limits"] = json!({"pendingQuestions": 1});
    let cluster = Cluster::start(askers(&tag), "3s", extra);
    let asked = json!({"server": "new", "tool": "test_input_required_result_elicitation", "arguments": {}});
    let (status, body) = v1(&cluster.nodes[0], "POST", "/v1/call", ALICE, "one", Some(asked.clone()));
    assert_eq!(status, 202, "{body}");
    let first = body["question"]["id"].as_str().unwrap().to_owned();
    // Another caller, another node: the cluster keeps one question already.
    let (status, body) = v1(&cluster.nodes[1], "POST", "/v1/call", BOB, "two", Some(asked.clone()));
    assert_eq!(status, 502, "{body}");
    assert!(body.to_string().contains("limits.pendingQuestions"), "{body}");
    // Abandoned through a third node, it frees the room.
    let (status, _) = v1(&cluster.nodes[2], "POST", "/v1/ask/abandon", ALICE, "one", Some(json!({"id": first})));
    assert_eq!(status, 200);
    let (status, body) = v1(&cluster.nodes[1], "POST", "/v1/call", BOB, "two", Some(asked));
    assert_eq!(status, 202, "{body}");
}

/// `mcpx_exec` through `node` as `token`'s holder in session `session`: a script that
/// calls `whoami` of `notes` (one instance per session) and of `shared` (one for all), and
/// `meta` of `notes`; what it returned, or the failing reply.
fn script_calls(node: &Daemon, token: &str, session: &str) -> Value {
    let script = r#"return {
        notes: await call("notes", "whoami", {}),
        shared: await call("shared", "whoami", {}),
        meta: (await call("notes", "meta", {})).meta,
    };"#;
    let reply = Modern::tools_call("mcpx_exec", json!({ "script": script }))
        .session(session)
        .header("Authorization", &format!("Bearer {token}"))
        .send(node.url());
    reply.structured().clone()
}

/// A request that cannot go to the owner of its instance whole (a script's calls, a
/// handshake-era session's, a local caller's on a node's socket) is relayed there, call by
/// call: the instances the caller's direct calls reached, nothing started twice, and the
/// upstream told the same invocation context. Another token's holder naming the same
/// session reaches its own instance, and no caller can send a node's relay itself.
#[test]
fn calls_that_cannot_go_whole_are_relayed_to_the_instances_other_nodes_own_for_their_caller_only() {
    let tag = tag();
    let servers = json!({"notes": fakemcp("session", &tag, &[]), "shared": fakemcp("global", &tag, &[])});
    let cluster = Cluster::start(servers, "60s", tokens());
    let nodes = &cluster.nodes;
    let direct = |server: &str, tool: &str| {
        Modern::mcpx_call(server, tool, json!({}))
            .session("work")
            .header("Authorization", &format!("Bearer {ALICE}"))
            .send(nodes[0].url())
            .structured()
            .clone()
    };
    let (notes, shared) = (Whoami::from_structured(&direct("notes", "whoami")), direct("shared", "whoami"));
    let direct_meta = direct("notes", "meta")["meta"]["dev.mcpx/invocation"].clone();
    assert_eq!(cluster.owner_of("notes", "\"alice\":work"), Some(0));

    for (i, node) in nodes.iter().enumerate().skip(1) {
        let ran = script_calls(node, ALICE, "work");
        let (mine, all) = (Whoami::from_structured(&ran["notes"]), &ran["shared"]);
        assert_eq!(mine.instance, notes.instance, "the script on node {i} reached another notes instance: {ran}");
        assert_eq!(mine.calls, notes.calls + 2 * i as u64, "every call reached it, in order: {ran}");
        assert_eq!(all["instance"], shared["instance"], "the script on node {i} reached another shared: {ran}");
        let told = &ran["meta"]["dev.mcpx/invocation"];
        for field in ["sessionId", "clientId", "scope"] {
            assert_eq!(told[field], direct_meta[field], "{field} as the upstream is told it: {told} / {direct_meta}");
        }
    }
    assert_eq!(cluster.owner_of("notes", "\"alice\":work"), Some(0), "the instance did not move");

    // Bob's session "work" is his own, wherever his script runs; the global one is shared.
    let bobs = script_calls(&nodes[1], BOB, "work");
    assert_ne!(bobs["notes"]["instance"], json!(notes.instance), "bob reached alice's instance: {bobs}");
    assert_eq!(bobs["shared"]["instance"], shared["instance"]);
    assert_eq!(
        Whoami::from_structured(&direct("notes", "whoami")).calls,
        notes.calls + 6,
        "bob's calls went elsewhere"
    );

    // A handshake-era session held by node 1, and a local caller on node 2's socket (whose
    // pid and cwd only that node knows, so its requests are answered there), reach the
    // global instance node 0 owns.
    let bearer = format!("Bearer {ALICE}");
    let session = LegacySession::open_as(nodes[1].url(), "2025-11-25", &[("Authorization", &bearer)]);
    let through_session = session.mcpx_call("shared", "whoami", json!({}));
    assert_eq!(through_session.structured()["instance"], shared["instance"], "{through_session}");
    let call = json!({"server": "shared", "tool": "whoami", "arguments": {}});
    let local = nodes[2].home().v1("POST", "/v1/call", Some(&call));
    assert_eq!(local.status, 200, "{}", local.body);
    assert_eq!(local.json()["structuredContent"]["instance"], shared["instance"], "{}", local.body);

    // The node-to-node relay route, tried by a token holder: refused before anything is read.
    for node in nodes {
        let named = json!({"server": "notes", "tool": "whoami", "arguments": {}, "owner": "Everyone", "callId": "x"});
        let (status, body) = v1(node, "POST", "/v1/cluster/relay", ALICE, "work", Some(named));
        assert_eq!(status, 403, "{body}");
        assert!(body["error"]["message"].as_str().unwrap_or_default().contains("only another node"), "{body}");
    }
    assert_eq!(Whoami::from_structured(&direct("notes", "whoami")).calls, notes.calls + 7);
    let counts = cluster.instance_counts();
    assert!(counts.values().all(|n| *n == 1), "a key with an instance on two nodes: {counts:?}");
    assert_eq!(counts.len(), 3, "alice's notes, bob's notes, shared: {counts:?}");
}
