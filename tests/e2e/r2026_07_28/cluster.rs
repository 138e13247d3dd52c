//! mcpx as a cluster: three daemons sharing a real Redis behind a real nginx, all on
//! loopback. Each instance key lives on one node; any node takes any request.

use std::time::{Duration, Instant};

use mcpx_e2e::client::{base_url, http, plain};
use mcpx_e2e::cluster::Cluster;
use mcpx_e2e::{Daemon, LegacySession, Modern, Whoami, config, fakemcp, poll, tag, wait_until_gone};
use serde_json::{Value, json};

fn servers(tag: &str) -> Value {
    json!({
        "notes": fakemcp("session", tag, &[]),
        "shared": fakemcp("global", tag, &[]),
    })
}

fn whoami(url: &str, server: &str, session: Option<&str>) -> Whoami {
    let call = Modern::mcpx_call(server, "whoami", json!({}));
    let call = match session {
        Some(label) => call.session(label),
        None => call,
    };
    Whoami::of(&call.send(url))
}

/// The fencing token the `notes` instance of session `label` is told with a request.
#[track_caller]
fn fence(url: &str, label: &str) -> u64 {
    let reply = Modern::mcpx_call("notes", "meta", json!({})).session(label).send(url);
    let context = &reply.structured()["meta"]["dev.mcpx/invocation"];
    context["fence"].as_u64().unwrap_or_else(|| panic!("no fence in the invocation context: {context}"))
}

/// No key is listed by two nodes.
#[track_caller]
fn assert_one_instance_per_key(cluster: &Cluster) {
    let counts = cluster.instance_counts();
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "keys with an instance on more than one node: {twice:?}\n{:#?}", cluster.statuses());
}

#[test]
fn one_session_label_through_every_node_and_nginx_reaches_one_instance() {
    let tag = tag();
    let cluster = Cluster::start(servers(&tag), "3s", json!({}));
    let mut urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).collect();
    urls.extend(std::iter::repeat_n(cluster.nginx.url(), 6));
    for server in ["notes", "shared"] {
        let answers: Vec<Whoami> = urls.iter().map(|url| whoami(url, server, Some("work"))).collect();
        assert!(
            answers.iter().all(|a| a.instance == answers[0].instance),
            "{server}: the calls reached more than one instance: {answers:?}"
        );
        let calls: Vec<u64> = answers.iter().map(|a| a.calls).collect();
        assert_eq!(calls, (1..=urls.len() as u64).collect::<Vec<_>>(), "{server}: every call reached it, in order");
    }
    // Another label is another instance, wherever it lands.
    let other = whoami(&cluster.nginx.url(), "notes", Some("play"));
    assert_ne!(other.instance, whoami(&urls[0], "notes", Some("work")).instance);
    assert_one_instance_per_key(&cluster);
    let leases: usize = cluster.statuses().iter().map(|s| s["cluster"]["leases"].as_array().map_or(0, Vec::len)).sum();
    assert_eq!(leases, 3, "one lease per key: notes for work and play, shared");
}

#[test]
fn a_legacy_session_keeps_its_instance_through_nginx_and_through_every_node() {
    let tag = tag();
    let cluster = Cluster::start(servers(&tag), "3s", json!({}));
    let session = LegacySession::open(&cluster.nginx.url());
    let first = Whoami::of(&session.mcpx_call("notes", "whoami", json!({})));
    for _ in 0..4 {
        assert_eq!(Whoami::of(&session.mcpx_call("notes", "whoami", json!({}))).instance, first.instance);
    }
    // Sent straight to each node, the wrong ones included: the same session, the same instance.
    for node in &cluster.nodes {
        let via = session.via(node.url());
        let answer = Whoami::of(&via.mcpx_call("notes", "whoami", json!({})));
        assert_eq!(answer.instance, first.instance, "through {}", node.url());
    }
    assert_one_instance_per_key(&cluster);
    // An id no node minted (or one altered) is no session on any node.
    let mut forged: Vec<char> = session.id().chars().collect();
    let last = forged.len() - 1;
    forged[last] = if forged[last] == 'A' { 'B' } else { 'A' };
    let forged: String = forged.into_iter().collect();
    for node in &cluster.nodes {
        let reply = plain(
            "POST",
            node.url(),
            &[
                ("Mcp-Session-Id", &forged),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            Some(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#),
        );
        assert_eq!(reply.status, 404, "a forged session id through {}:\n{reply}", node.url());
    }
    // Ended through one node, it is gone on all of them.
    assert_eq!(session.via(cluster.nodes[2].url()).delete().status, 204);
    let after = plain(
        "POST",
        &cluster.nginx.url(),
        &[("Mcp-Session-Id", session.id()), ("Accept", "application/json"), ("MCP-Protocol-Version", "2025-11-25")],
        Some(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#),
    );
    assert_eq!(after.status, 404, "{after}");
}

/// A caller that sends the node-to-node headers itself is refused, whatever principal it
/// claims: on a node (no valid signature) and on a daemon in no cluster.
#[test]
fn a_callers_own_node_headers_are_never_taken_for_a_nodes() {
    let tag = tag();
    let tokens = json!({"http": {"tokens": {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}}});
    let cluster = Cluster::start(servers(&tag), "3s", tokens.clone());
    let mut single = config(&[("notes", fakemcp("session", &tag, &[]))]);
    single["http"] = tokens["http"].clone();
    let alone = Daemon::start(&single);
    // Bob's session instance exists on the cluster.
    let bob = Modern::mcpx_call("notes", "whoami", json!({})).session("work");
    let bobs = Whoami::of(&bob.header("Authorization", "Bearer bob-token-0123456789ab").send(&cluster.nginx.url()));
    let bob_principal = base64_url(br#"{"Token":"bob"}"#);
    for url in cluster.nodes.iter().map(|n| n.url().to_owned()).chain([alone.url().to_owned()]) {
        let reply = Modern::mcpx_call("notes", "whoami", json!({}))
            .session("work")
            .header("Authorization", "Bearer alice-token-0123456789")
            .header("X-Mcpx-Node", "n1")
            .header("X-Mcpx-Node-Time", &format!("{}", now()))
            .header("X-Mcpx-Node-Principal", &bob_principal)
            .header("X-Mcpx-Node-Signature", &"0".repeat(64))
            .send(&url);
        assert_eq!(reply.status, 401, "node headers from a caller through {url}:\n{reply}");
    }
    let again = Modern::mcpx_call("notes", "whoami", json!({}))
        .session("work")
        .header("Authorization", "Bearer bob-token-0123456789ab")
        .send(&cluster.nginx.url());
    assert_eq!(Whoami::of(&again).calls, bobs.calls + 1, "nobody else reached bob's instance");
}

#[test]
fn kill_9_of_a_node_fails_only_its_calls_and_its_keys_move_within_the_lease_ttl() {
    let tag = tag();
    let mut cluster = Cluster::start(servers(&tag), "2s", json!({}));
    // Sessions spread over the nodes through nginx; each lands where its first call did.
    let labels: Vec<String> = (0..9).map(|i| format!("s{i}")).collect();
    let first: Vec<Whoami> = labels.iter().map(|l| whoami(&cluster.nginx.url(), "notes", Some(l))).collect();
    let owners: Vec<usize> =
        labels.iter().map(|l| cluster.owner_of("notes", &format!("session:{l}")).expect("an owner")).collect();
    let victim = owners[0];
    let (gone, kept): (Vec<usize>, Vec<usize>) = (0..labels.len()).partition(|i| owners[*i] == victim);
    let fences_before: Vec<u64> = labels.iter().map(|l| fence(&cluster.nginx.url(), l)).collect();
    // A call in flight on the victim, sent straight to it.
    let victim_url = cluster.nodes[victim].url().to_owned();
    let slow = Modern::mcpx_call("notes", "slow", json!({"ms": 20_000})).session(&labels[gone[0]]);
    let in_flight = std::thread::spawn(move || {
        let mut request = http().post(&victim_url).body(slow.frame().to_string());
        for (name, value) in slow.headers() {
            request = request.header(name, value);
        }
        request.send().and_then(|r| r.text())
    });
    let busy = poll(Duration::from_secs(10), || {
        let status = cluster.nodes[victim].home().status();
        let instances = status["instances"].as_array().cloned().unwrap_or_default();
        instances.iter().any(|i| i["inUse"].as_u64() > Some(0)).then_some(())
    });
    assert!(busy.is_some(), "the slow call never reached the victim's instance");
    cluster.nodes[victim].kill();
    let killed_at = Instant::now();
    assert!(in_flight.join().unwrap().is_err(), "the call in flight on the killed node fails");

    // The other nodes' sessions go on at once, on their instances.
    for i in &kept {
        let answer = whoami(&cluster.nginx.url(), "notes", Some(&labels[*i]));
        assert_eq!(answer.instance, first[*i].instance, "session {} kept its instance", labels[*i]);
    }
    // The victim's sessions answer again once its leases expire, on fresh instances.
    for i in &gone {
        let label = labels[*i].clone();
        let answer = poll(Duration::from_secs(10), || {
            let reply = Modern::mcpx_call("notes", "whoami", json!({})).session(&label).send(&cluster.nginx.url());
            (reply.status == 200 && reply.frame().get("result").is_some_and(|r| r["isError"] != json!(true)))
                .then(|| Whoami::of(&reply))
        })
        .unwrap_or_else(|| panic!("session {label} never answered again after its node died"));
        assert_ne!(answer.instance, first[*i].instance);
        assert_eq!(answer.calls, 1, "a fresh instance");
        // Its upstream is told a fencing token larger than the dead owner's instance had.
        let after = fence(&cluster.nginx.url(), &label);
        assert!(after > fences_before[*i], "session {label}: fence {after} after, {} before", fences_before[*i]);
    }
    for i in &kept {
        assert_eq!(fence(&cluster.nginx.url(), &labels[*i]), fences_before[*i], "an instance keeps its fence");
    }
    assert!(killed_at.elapsed() < Duration::from_secs(2 + 6), "keys moved within the lease ttl (and a margin)");
    let recovered: Vec<Value> = cluster
        .statuses()
        .iter()
        .flat_map(|s| s["cluster"]["recovered"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(recovered.len(), gone.len(), "each taken-over key is shown once: {recovered:?}");
    assert!(recovered.iter().all(|r| r["previousOwner"] == format!("n{}", victim + 1)), "{recovered:?}");
    assert_one_instance_per_key(&cluster);
}

/// A `/v1` error body: `{"error": {"code", "message"}}`, as every `/v1` route answers,
/// not a JSON-RPC response.
#[track_caller]
fn assert_v1_error(body: &Value) {
    let keys: Vec<&String> = body.as_object().map(|o| o.keys().collect()).unwrap_or_default();
    assert_eq!(keys, ["error"], "not a /v1 error body: {body}");
    assert!(body["error"]["code"].is_i64() && body["error"]["message"].is_string(), "{body}");
}

/// A caller whose request must go to a node that died (its lease not expired yet) is told
/// which server (or task, or session) and that the node that owns it is unreachable,
/// naming the node by its id: never its address inside the cluster. The forwarding
/// node's log has the address.
#[test]
fn a_dead_owner_is_named_to_callers_by_its_id_never_by_its_address() {
    let tag = tag();
    let alice = "alice-token-0123456789";
    let bearer = format!("Bearer {alice}");
    let tokens = json!({"http": {"tokens": {"alice": alice}}});
    // A long lease: the dead node's keys stay its own while the callers are answered.
    let mut cluster = Cluster::start(servers(&tag), "60s", tokens);
    let owner_url = cluster.nodes[0].url().to_owned();
    let call = || Modern::mcpx_call("notes", "whoami", json!({})).session("work").header("Authorization", &bearer);
    Whoami::of(&call().send(&owner_url));
    assert_eq!(cluster.owner_of("notes", ":work"), Some(0), "the first call took the key on node 0");
    let v1_headers =
        [("Authorization", bearer.as_str()), ("Content-Type", "application/json"), ("X-Mcpx-Session", "work")];
    let v1 = |url: &str, method: &str, path: &str, body: Option<&str>| {
        plain(method, &format!("{}{path}", base_url(url)), &v1_headers, body)
    };
    let slow = r#"{"server": "notes", "tool": "slow", "arguments": {"ms": 600000}}"#;
    let task = v1(&owner_url, "POST", "/v1/tasks", Some(slow));
    assert_eq!(task.status, 202, "{task}");
    let task = task.json()["taskId"].as_str().unwrap().to_owned();
    let body = task.split('.').next().unwrap();
    let readable = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, body).unwrap();
    let readable = String::from_utf8_lossy(&readable).into_owned();
    assert!(
        !readable.contains("127.0.0.1") && !readable.contains("http://"),
        "the task id shows an address: {readable}"
    );
    let session = LegacySession::open_as(&owner_url, "2025-11-25", &[("Authorization", &bearer)]);
    let address = base_url(&owner_url).trim_start_matches("http://").to_owned();
    let port = address.rsplit(':').next().unwrap().to_owned();
    cluster.nodes[0].kill();

    let leaks =
        |text: &str| ["http://", "127.0.0.1", address.as_str(), port.as_str()].into_iter().find(|a| text.contains(a));
    let alive = cluster.nodes[1].url().to_owned();
    let mut answers = Vec::new();
    for url in [alive.as_str(), &cluster.nginx.url()] {
        let reply = call().send(url);
        assert_eq!(reply.status, 502, "through {url}: {reply}");
        answers.push(("a 2026 call", reply.error()["message"].as_str().unwrap().to_owned()));
    }
    let reply = v1(&alive, "POST", "/v1/call", Some(r#"{"server": "notes", "tool": "whoami", "arguments": {}}"#));
    assert_eq!(reply.status, 502, "{reply}");
    assert_v1_error(&reply.json());
    answers.push(("/v1/call", reply.json()["error"]["message"].as_str().unwrap_or(&reply.body).to_owned()));
    for (what, message) in &answers {
        assert_eq!(leaks(message), None, "{what}: the error shows the dead node's address: {message}");
        assert!(message.contains("server \"notes\"") && message.contains("\"n1\""), "{what}: {message}");
        assert!(
            message.contains("owns this caller's instance") && message.contains("unreachable"),
            "{what}: {message}"
        );
    }
    let reply = v1(&alive, "GET", &format!("/v1/tasks/{task}"), None);
    assert_eq!(reply.status, 502, "{reply}");
    assert_v1_error(&reply.json());
    assert_eq!(leaks(&reply.body), None, "a task's follow-up shows the dead node's address: {reply}");
    let message = reply.json()["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.contains("this task (\"n1\") is unreachable"), "{reply}");
    let reply = session.via(&alive).mcpx_call("notes", "whoami", json!({}));
    assert_eq!(reply.status, 502, "{reply}");
    assert_eq!(leaks(&reply.body), None, "a legacy session's request shows the dead node's address: {reply}");
    assert!(reply.error()["message"].as_str().unwrap().contains("this session (\"n1\") is unreachable"), "{reply}");
    // The node that forwarded says where it tried, to whoever reads its log.
    assert!(cluster.nodes[1].stderr().contains(&address), "{}", cluster.nodes[1].stderr());
}

#[test]
fn concurrent_first_calls_through_every_node_start_one_instance_per_key() {
    let tag = tag();
    let cluster = Cluster::start(servers(&tag), "3s", json!({}));
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).chain([cluster.nginx.url()]).collect();
    let answers: Vec<(String, Whoami)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .flat_map(|label| urls.iter().map(move |url| (label, url.clone())))
            .flat_map(|(label, url)| ["notes", "shared"].map(|server| (label, url.clone(), server)))
            .map(|(label, url, server)| {
                scope.spawn(move || {
                    let label = format!("c{label}");
                    let key = if server == "shared" { "global".to_owned() } else { label.clone() };
                    (format!("{server}/{key}"), whoami(&url, server, Some(&label)))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut by_key: std::collections::HashMap<String, Vec<String>> = Default::default();
    for (key, who) in answers {
        by_key.entry(key).or_default().push(who.instance);
    }
    for (key, instances) in &by_key {
        assert!(instances.iter().all(|i| *i == instances[0]), "{key} reached several instances: {instances:?}");
    }
    assert_one_instance_per_key(&cluster);
}

#[test]
fn with_redis_down_owned_instances_answer_and_other_keys_fail_at_once_naming_redis() {
    let tag = tag();
    let mut cluster = Cluster::start(servers(&tag), "3s", json!({}));
    let a = cluster.nodes[0].url().to_owned();
    let b = cluster.nodes[1].url().to_owned();
    let owned = whoami(&a, "notes", Some("mine"));
    cluster.redis.kill();
    let again = whoami(&a, "notes", Some("mine"));
    assert_eq!((again.instance, again.calls), (owned.instance, owned.calls + 1), "the owner goes on serving it");
    for (url, label) in [(&a, "new"), (&b, "mine")] {
        let started = Instant::now();
        let reply = Modern::mcpx_call("notes", "whoami", json!({})).session(label).send(url);
        let took = started.elapsed();
        let error = reply.error();
        assert!(error["message"].as_str().unwrap_or_default().contains("Redis"), "{label} through {url}:\n{reply}");
        assert!(took < Duration::from_secs(3), "failed at once, not after {took:?}");
    }
    let status = cluster.nodes[1].home().status();
    assert!(status["cluster"]["redisError"].is_string(), "the status says Redis is unreachable: {status}");
    drop(cluster);
    assert!(wait_until_gone(&tag, Duration::from_secs(10)).is_empty(), "every upstream stopped with its node");
}

/// A node cut off from Redis (not from its callers) cannot renew its leases, nor learn
/// whether another node took a key once a lease may have run out. So it stops serving the
/// key before then: its instance stops, with the call it was running; a call through it
/// fails naming Redis instead of reaching its old instance while another node's instance
/// serves the same key; and the nodes' statuses never show the key twice.
#[test]
fn a_node_cut_off_from_redis_stops_serving_a_key_before_another_node_can_take_it() {
    let tag = tag();
    let cluster = Cluster::start_with(servers(&tag), "3s", json!({}), |redis, i| {
        if i != 1 {
            return json!({});
        }
        redis.cli(&["ACL", "SETUSER", "n1", "on", ">n1-password", "~*", "&*", "+@all"]);
        json!({ "redis": format!("redis://n1:n1-password@127.0.0.1:{}", redis.port) })
    });
    let (a, b) = (cluster.nodes[0].url(), cluster.nodes[1].url());
    let first = whoami(a, "notes", Some("mine"));
    assert_eq!(cluster.owner_of("notes", "mine"), Some(0));

    // A long call runs on node 1's instance as node 1 loses Redis: its user is switched
    // off and its connections are closed.
    let (done, running) = std::sync::mpsc::channel();
    let slow = Modern::mcpx_call("notes", "slow", json!({"ms": 60_000})).session("mine");
    let url = a.to_owned();
    std::thread::spawn(move || done.send(slow.send(&url)));
    cluster.redis.cli(&["ACL", "SETUSER", "n1", "off"]);
    cluster.redis.cli(&["CLIENT", "KILL", "USER", "n1"]);
    // Node 2 forwards the session's calls to node 1 until the lease runs out in Redis,
    // then takes the key.
    let moved = poll(Duration::from_secs(20), || {
        let reply = Modern::mcpx_call("notes", "whoami", json!({})).session("mine").send(b);
        let instance = reply.frame()["result"]["structuredContent"]["instance"].as_str().map(str::to_owned);
        instance.filter(|i| *i != first.instance)
    })
    .expect("node 2 never took the key of the cut-off node");
    let statuses = cluster.statuses();
    let counts = cluster.instance_counts();
    assert!(counts.values().all(|n| *n == 1), "a key has two live instances: {counts:?}\n{statuses:#?}");
    let ended = running.recv_timeout(Duration::from_secs(15)).expect("node 1's instance still runs its call");
    assert!(ended.frame().get("error").is_some() || ended.result()["isError"] == true, "{ended}");

    let reply = Modern::mcpx_call("notes", "whoami", json!({})).session("mine").send(a);
    let instance = reply.frame()["result"]["structuredContent"]["instance"].as_str();
    assert_ne!(instance, Some(first.instance.as_str()), "node 1 still serves the key: {reply}");
    assert!(reply.error()["message"].as_str().unwrap_or_default().contains("Redis"), "{reply}");
    assert_eq!(whoami(b, "notes", Some("mine")).instance, moved, "node 2 serves it");
    drop(cluster);
    assert!(wait_until_gone(&tag, Duration::from_secs(10)).is_empty(), "every upstream stopped with its node");
}

fn base64_url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

/// A local caller's (the unix socket's, `mcpx serve`'s) cwd is a path of its node's
/// machine: two machines with the same path are two directories. Here a CLI call on
/// every node's socket runs in one directory (a repository): its `cwd`, `repo` and
/// `worktree` instances must be one per node, none leased in Redis, none forwarded.
#[test]
fn local_callers_in_the_same_directory_on_two_nodes_get_an_instance_each() {
    let tag = tag();
    let servers = json!({
        "lsp": fakemcp("cwd", &tag, &[]),
        "git": fakemcp("repo", &tag, &[]),
        "tree": fakemcp("worktree", &tag, &[]),
    });
    let cluster = Cluster::start(servers, "3s", json!({}));
    let dir = mcpx_e2e::process::TempDir::new();
    let repo = mcpx_e2e::git::init_repo(&dir.path().join("repo"), &["src"]);
    let work = repo.join("src");
    for server in ["lsp", "git", "tree"] {
        let tool = format!("{server}.whoami");
        let mut seen: Vec<Whoami> = Vec::new();
        for (i, node) in cluster.nodes.iter().enumerate() {
            for round in 0..2 {
                let run = node.home().cli_in(&work, &["call", &tool, "--json"]);
                assert_eq!(run.code, Some(0), "{server} through node {i}'s socket, round {round}:\n{run}");
                let who = Whoami::from_structured(&run.json()["structuredContent"]);
                if round == 1 {
                    assert_eq!(who.instance, seen.last().unwrap().instance, "{server}: node {i} keeps its instance");
                    continue;
                }
                assert!(
                    seen.iter().all(|other| other.instance != who.instance),
                    "{server}: node {i}'s caller reached another node's instance"
                );
                seen.push(who);
            }
            let keys = node.home().instance_keys(server);
            assert_eq!(keys.len(), 1, "{server}: node {i} runs its own instance: {keys:?}");
            assert!(keys[0].contains(&format!("[n{}]", i + 1)), "{server}: the key names its node: {keys:?}");
        }
        assert_eq!(cluster.owner_of(server, ""), None, "{server}: a machine's directory is never leased cluster-wide");
    }
    assert_one_instance_per_key(&cluster);
}
