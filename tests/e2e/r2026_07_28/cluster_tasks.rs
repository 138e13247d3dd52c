//! What a cluster keeps on one node, reached through any: a task (its record lives where
//! it was relayed or run; its id, sealed with the cluster's key, names that node) and a
//! background call begun with `/v1/ask/begin`; a 2025-11-25 session's tasks go with the
//! session. Each is tried by another token's holder (or session) through every node,
//! which must find nothing.

use std::time::{Duration, Instant};

use mcpx_e2e::client::{Modern, Reply, base_url, plain};
use mcpx_e2e::cluster::Cluster;
use mcpx_e2e::{fakemcp, tag};
use serde_json::{Value, json};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";
/// How long a test waits for a task to reach a state before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn cluster(tag: &str) -> Cluster {
    let servers = json!({
        "fx": fakemcp("session", tag, &["--fixture", "conformance"]),
        "plain": fakemcp("session", tag, &[]),
    });
    Cluster::start(servers, "3s", json!({"http": {"tokens": {"alice": ALICE, "bob": BOB}}}))
}

/// A 2026 request as `token`'s holder in session `session`, declaring the tasks extension.
fn as_caller(request: Modern, token: &str, session: &str) -> Modern {
    request
        .meta(CAPABILITIES, json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}))
        .session(session)
        .header("Authorization", &format!("Bearer {token}"))
}

fn task_request(url: &str, token: &str, method: &str, params: Value) -> Reply {
    as_caller(Modern::new(method, params), token, "work").send(url)
}

/// Polls task `id` through `url` until `done` says so of it.
fn poll_until(url: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let reply = task_request(url, ALICE, "tasks/get", json!({"taskId": id}));
        let task = reply.result().clone();
        assert_eq!(task["taskId"], id, "{reply}");
        if done(&task) {
            return task;
        }
        assert!(Instant::now() < deadline, "the task never got there: {reply}");
        std::thread::sleep(Duration::from_millis(task["pollIntervalMs"].as_u64().unwrap_or(100)));
    }
}

fn ended(task: &Value) -> bool {
    task["status"].as_str().is_some_and(|s| ["completed", "failed", "cancelled"].contains(&s))
}

#[test]
fn a_task_started_through_one_node_is_read_answered_and_cancelled_through_the_others_by_its_caller_only() {
    let tag = tag();
    let cluster = cluster(&tag);
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).collect();
    let start = |url: &str, tool: &str, arguments: Value| {
        let created = as_caller(Modern::mcpx_call("fx", tool, arguments), ALICE, "work").send(url);
        assert_eq!(created.result()["resultType"], "task", "{created}");
        created.result()["taskId"].as_str().unwrap().to_owned()
    };
    let id = start(&urls[0], "confirm_delete", json!({"filename": "plans.txt"}));
    let made_up = format!("{}x", &id[..id.len() - 1]);

    // Another token's holder in a session of the same name, through every node (the one
    // holding the task included): what an id that never existed gets, and nothing more.
    for url in &urls {
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let params = |id: &str| json!({"taskId": id, "inputResponses": {}});
            let unknown = task_request(url, BOB, method, params(&made_up));
            let unknown = unknown.assert_error(200, -32602).clone();
            let foreign = task_request(url, BOB, method, params(&id));
            let foreign = foreign.assert_error(200, -32602);
            assert_eq!(foreign["message"], unknown["message"].as_str().unwrap().replace(&made_up, &id), "{method}");
        }
    }
    // Its caller reads it through every node and through nginx.
    for url in urls.iter().chain([&cluster.nginx.url()]) {
        let asking = poll_until(url, &id, |t| t["status"] == "input_required");
        assert!(asking["inputRequests"]["confirm"].is_object(), "through {url}: {asking}");
    }
    // Answers it through another node than the one that holds it, and reads the result
    // through a third.
    let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let ack = task_request(&urls[2], ALICE, "tasks/update", json!({"taskId": id, "inputResponses": answer}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");
    let done = poll_until(&urls[1], &id, ended);
    assert_eq!(done["result"]["content"][0]["text"], "Deleted plans.txt", "{done}");

    // A long task started through node 1, cancelled through node 0, seen cancelled through node 2.
    let long = start(&urls[1], "slow_compute", json!({"seconds": 600}));
    let ack = task_request(&urls[0], ALICE, "tasks/cancel", json!({"taskId": long}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");
    assert_eq!(poll_until(&urls[2], &long, ended)["status"], "cancelled");
}

/// A `/v1` request to `url` (a node's `/mcp`) as `token`'s holder in session `work`.
fn v1(url: &str, method: &str, path: &str, token: &str, body: Option<&str>) -> mcpx_e2e::client::PlainReply {
    let bearer = format!("Bearer {token}");
    let headers =
        [("Authorization", bearer.as_str()), ("Content-Type", "application/json"), ("X-Mcpx-Session", "work")];
    plain(method, &format!("{}{path}", base_url(url)), &headers, body)
}

#[test]
fn a_v1_task_started_on_one_node_is_read_and_cancelled_through_another_by_its_caller_only() {
    let tag = tag();
    let cluster = cluster(&tag);
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).collect();
    let slow = r#"{"server": "plain", "tool": "slow", "arguments": {"ms": 600000}}"#;
    let started = v1(&urls[0], "POST", "/v1/tasks", ALICE, Some(slow));
    assert_eq!(started.status, 202, "{started}");
    let id = started.json()["taskId"].as_str().unwrap().to_owned();
    let path = format!("/v1/tasks/{id}");
    for url in &urls {
        assert_eq!(v1(url, "GET", &path, BOB, None).status, 404, "bob reads alice's task through {url}");
        assert_eq!(v1(url, "POST", &format!("{path}/cancel"), BOB, Some("{}")).status, 404, "through {url}");
        let mine = v1(url, "GET", &path, ALICE, None);
        assert_eq!((mine.status, &mine.json()["status"]), (200, &json!("working")), "through {url}: {mine}");
    }
    let cancelled = v1(&urls[2], "POST", &format!("{path}/cancel"), ALICE, Some("{}"));
    assert_eq!(cancelled.json()["status"], "cancelled", "{cancelled}");
    assert_eq!(v1(&urls[1], "GET", &path, ALICE, None).json()["status"], "cancelled");
}

#[test]
fn a_call_begun_on_one_node_is_polled_through_another_by_its_caller_only() {
    let tag = tag();
    let cluster = cluster(&tag);
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).collect();
    let call = r#"{"server": "plain", "tool": "slow", "arguments": {"ms": 300}}"#;
    let begun = v1(&urls[0], "POST", "/v1/ask/begin", ALICE, Some(call));
    assert_eq!(begun.status, 202, "{begun}");
    let poll = begun.json()["poll"].as_str().unwrap().to_owned();
    let id = begun.json()["call"].as_str().unwrap().to_owned();
    let mut altered: Vec<char> = id.chars().collect();
    altered[3] = if altered[3] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    for url in &urls {
        let theirs = v1(url, "GET", &format!("{poll}&waitMs=10"), BOB, None);
        assert_eq!(theirs.status, 400, "bob polls alice's call through {url}: {theirs}");
        let forged = v1(url, "GET", &format!("/v1/ask/poll?call={altered}&waitMs=10"), ALICE, None);
        assert_eq!(forged.status, 400, "an altered id through {url}: {forged}");
    }
    let done = v1(&urls[1], "GET", &format!("{poll}&waitMs=20000"), ALICE, None);
    assert_eq!(done.status, 200, "polled through node 1: {done}");
    assert!(done.json()["content"][0]["text"].is_string(), "{done}");
    // Delivered once: the call is gone, through any node.
    assert_eq!(v1(&urls[2], "GET", &format!("{poll}&waitMs=10"), ALICE, None).status, 400);
}

#[test]
fn a_2025_11_25_sessions_task_is_read_awaited_and_cancelled_through_every_node_by_that_session_only() {
    let tag = tag();
    let servers = json!({"fx": fakemcp("session", &tag, &["--fixture", "conformance", "--era", "legacy"])});
    let cluster = Cluster::start(servers, "3s", json!({}));
    let session = mcpx_e2e::LegacySession::open(&cluster.nginx.url());
    let intruder = mcpx_e2e::LegacySession::open(&cluster.nginx.url());
    let start = |arguments: Value| {
        let params = json!({"name": "mcpx_call", "arguments": {"server": "fx", "tool": "slow_compute",
            "arguments": arguments}, "task": {"ttl": 60_000}});
        let created = session.request("tools/call", params);
        assert_eq!(created.result()["task"]["status"], "working", "{created}");
        created.result()["task"]["taskId"].as_str().unwrap().to_owned()
    };
    let id = start(json!({"seconds": 0.3, "label": "sum"}));
    for node in &cluster.nodes {
        let read = session.via(node.url()).request("tasks/get", json!({"taskId": id}));
        assert_eq!(read.result()["taskId"], id.as_str(), "through {}: {read}", node.url());
        for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
            intruder.via(node.url()).request(method, json!({"taskId": id})).assert_error(200, -32602);
        }
    }
    let result = session.via(cluster.nodes[2].url()).request("tasks/result", json!({"taskId": id}));
    assert_eq!(result.result()["content"][0]["text"], "sum: computed after 0.3s", "{result}");
    let long = start(json!({"seconds": 600}));
    let cancelled = session.via(cluster.nodes[1].url()).request("tasks/cancel", json!({"taskId": long}));
    assert_eq!(cancelled.result()["status"], "cancelled", "{cancelled}");
    let read = session.via(cluster.nodes[0].url()).request("tasks/get", json!({"taskId": long}));
    assert_eq!(read.result()["status"], "cancelled", "{read}");
}

/// Three nodes with two session-scoped servers, `plain` and `other`, and `leaseTtl` as given.
fn two_servers(tag: &str, lease_ttl: &str) -> Cluster {
    let servers = json!({"plain": fakemcp("session", tag, &[]), "other": fakemcp("session", tag, &[])});
    Cluster::start(servers, lease_ttl, json!({"http": {"tokens": {"alice": ALICE, "bob": BOB}}}))
}

/// Starts a ten-minute `/v1` task on `server` through `url` as alice; its id.
fn slow_v1_task(url: &str, server: &str) -> String {
    let slow = json!({"server": server, "tool": "slow", "arguments": {"ms": 600_000}}).to_string();
    let started = v1(url, "POST", "/v1/tasks", ALICE, Some(&slow));
    assert_eq!(started.status, 202, "{started}");
    started.json()["taskId"].as_str().unwrap().to_owned()
}

/// `GET /v1/tasks` lists the caller's tasks on every node, through any node: two tasks
/// started through two nodes (each on the node that owns its instance) are both listed
/// through the third, and through nginx. Another caller lists none of them, and a node
/// that dies takes only its own tasks out of the listing.
#[test]
fn v1_tasks_lists_the_callers_tasks_from_every_node_and_no_one_elses() {
    let mut cluster = two_servers(&tag(), "60s");
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).collect();
    let first = slow_v1_task(&urls[0], "plain");
    let second = slow_v1_task(&urls[1], "other");
    assert_eq!(cluster.owner_of("plain", ":work"), Some(0));
    assert_eq!(cluster.owner_of("other", ":work"), Some(1));
    let listed = |url: &str, token: &str| {
        let reply = v1(url, "GET", "/v1/tasks", token, None);
        assert_eq!(reply.status, 200, "{reply}");
        let mut ids: Vec<String> = reply.json()["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["taskId"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        ids
    };
    let mut both = vec![first.clone(), second.clone()];
    both.sort();
    for url in urls.iter().chain([&cluster.nginx.url()]) {
        assert_eq!(listed(url, ALICE), both, "alice's tasks through {url}");
        assert_eq!(listed(url, BOB), Vec::<String>::new(), "bob lists alice's tasks through {url}");
    }
    // Node 1 dies: its task is gone, node 0's is still listed through node 2.
    cluster.nodes[1].kill();
    assert_eq!(listed(&urls[2], ALICE), vec![first], "after node 1 died");
}

/// A node that takes the listing's connection but never answers (stopped, so the kernel
/// still accepts for it) is left out once `cluster.leaseTtl` passes: `GET /v1/tasks`
/// answers with the tasks the live nodes hold instead of waiting on it (and, once the
/// stopped node's announcement has lapsed meanwhile, its task as its record reads: failed).
#[test]
fn a_node_that_never_answers_is_left_out_of_v1_tasks_after_the_lease_ttl() {
    let cluster = two_servers(&tag(), "2s");
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).collect();
    let first = slow_v1_task(&urls[0], "plain");
    let second = slow_v1_task(&urls[1], "other");
    let signal = |which: &str| {
        let pid = cluster.nodes[1].pid().to_string();
        assert!(std::process::Command::new("kill").args([which, &pid]).status().unwrap().success(), "kill {which}");
    };
    assert_eq!((cluster.owner_of("plain", ":work"), cluster.owner_of("other", ":work")), (Some(0), Some(1)));
    signal("-STOP");
    // Stopped once every thread's state is `T`: a stop takes effect as each thread runs.
    let threads = format!("/proc/{}/task", cluster.nodes[1].pid());
    let state = |stat: String| stat.rsplit(')').next().unwrap_or("").trim_start().chars().next();
    let stopped = || {
        let mut stats =
            std::fs::read_dir(&threads).ok()?.map(|t| std::fs::read_to_string(t.ok()?.path().join("stat")).ok());
        stats.all(|stat| stat.and_then(state) == Some('T')).then_some(())
    };
    assert!(mcpx_e2e::process::poll(PATIENCE, stopped).is_some(), "node 1 never stopped");
    let reply = v1(&urls[2], "GET", "/v1/tasks", ALICE, None);
    signal("-CONT");
    assert_eq!(reply.status, 200, "{reply}");
    let listed = reply.json();
    let tasks = listed["tasks"].as_array().unwrap();
    let status = |id: &str| tasks.iter().find(|t| t["taskId"] == id).map(|t| t["status"].clone());
    assert_eq!(status(&first), Some(json!("working")), "{reply}");
    if let Some(theirs) = status(&second) {
        assert_eq!(theirs, "failed", "a stopped node's task is listed only as its record reads: {reply}");
    }
    assert!(tasks.len() <= 2, "{reply}");
}

/// The task records kept in `cluster`'s Redis, as stored.
fn kept_task_records(cluster: &Cluster) -> Vec<String> {
    let names = cluster.redis.cli(&["--scan", "--pattern", "mcpx:task:*"]);
    names.lines().filter(|n| !n.is_empty()).map(|name| cluster.redis.cli(&["GET", name])).collect()
}

/// Each 2026 task's record is kept in Redis at each change of its status: once the node
/// that held the task dies, every other node answers for it from that record, to its
/// caller only. A task that had ended reads as it ended, result included; one that was
/// still running reads as failed, saying its node is gone, and cancelling it changes
/// nothing; both are listed among the caller's tasks. A record altered in Redis is not
/// believed.
#[test]
fn a_task_whose_node_died_is_answered_through_every_other_node_from_its_record() {
    let mut cluster = two_servers(&tag(), "2s");
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).collect();
    // Long enough to be answered as a task, not with the call's own answer.
    let short = json!({"server": "plain", "tool": "slow", "arguments": {"ms": 500}}).to_string();
    let started = v1(&urls[0], "POST", "/v1/tasks", ALICE, Some(&short));
    assert_eq!(started.status, 202, "{started}");
    let done = started.json()["taskId"].as_str().unwrap().to_owned();
    let ended_there = v1(&urls[0], "GET", &format!("/v1/tasks/{done}?waitMs=20000"), ALICE, None);
    assert_eq!(ended_there.json()["status"], "completed", "{ended_there}");
    let running = slow_v1_task(&urls[0], "plain");
    assert_eq!(cluster.owner_of("plain", ":work"), Some(0));
    let kept = mcpx_e2e::process::poll(PATIENCE, || {
        let records = kept_task_records(&cluster);
        (records.len() == 2 && records.iter().any(|r| r.contains("\"completed\""))).then_some(())
    });
    assert!(kept.is_some(), "the records never reached Redis: {:?}", kept_task_records(&cluster));
    cluster.nodes[0].kill();

    // Until node 0's announcement lapses a request for its tasks fails naming it; then
    // the record answers, through each live node.
    let path = format!("/v1/tasks/{done}");
    let read = mcpx_e2e::process::poll(PATIENCE, || {
        let reply = v1(&urls[1], "GET", &path, ALICE, None);
        (reply.status == 200).then_some(reply)
    })
    .expect("the ended task was never answered again after its node died");
    assert_eq!(read.json()["status"], "completed", "{read}");
    assert_eq!(read.json()["result"]["structuredContent"], json!({"sleptMs": 500}), "{read}");
    let modern = task_request(&urls[2], ALICE, "tasks/get", json!({"taskId": done}));
    assert_eq!((&modern.result()["status"], &modern.result()["taskId"]), (&json!("completed"), &json!(done)));

    let lost = v1(&urls[2], "GET", &format!("/v1/tasks/{running}"), ALICE, None);
    assert_eq!((lost.status, &lost.json()["status"]), (200, &json!("failed")), "{lost}");
    assert!(lost.json()["statusMessage"].as_str().unwrap_or_default().contains("is gone"), "{lost}");
    let cancelled = v1(&urls[1], "POST", &format!("/v1/tasks/{running}/cancel"), ALICE, Some("{}"));
    assert_eq!((cancelled.status, &cancelled.json()["status"]), (200, &json!("failed")), "{cancelled}");
    let ack = task_request(&urls[1], ALICE, "tasks/cancel", json!({"taskId": running}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");

    // Both are listed among the caller's tasks, as they read.
    for url in &urls[1..] {
        let listed = v1(url, "GET", "/v1/tasks", ALICE, None);
        assert_eq!(listed.status, 200, "{listed}");
        let tasks = listed.json()["tasks"].as_array().cloned().unwrap_or_default();
        let status = |id: &str| tasks.iter().find(|t| t["taskId"] == id).map(|t| t["status"].clone());
        assert_eq!(status(&done), Some(json!("completed")), "through {url}: {listed}");
        assert_eq!(status(&running), Some(json!("failed")), "through {url}: {listed}");
        assert_eq!(tasks.len(), 2, "through {url}: {listed}");
    }

    // Another token's holder finds nothing through any node.
    for url in &urls[1..] {
        assert_eq!(v1(url, "GET", &path, BOB, None).status, 404, "bob reads alice's task through {url}");
        task_request(url, BOB, "tasks/get", json!({"taskId": done})).assert_error(200, -32602);
        let listed = v1(url, "GET", "/v1/tasks", BOB, None);
        assert_eq!(listed.json()["tasks"], json!([]), "bob lists alice's tasks through {url}: {listed}");
    }

    // Whoever else writes to Redis cannot make a node answer with a record of its own.
    let record = kept_task_records(&cluster).into_iter().find(|r| r.contains("\"completed\"")).expect("a record");
    let forged = record.trim_end().replace("\"sleptMs\":500", "\"sleptMs\":501");
    assert_ne!(forged, record.trim_end(), "the result is in the record as it was answered");
    for name in cluster.redis.cli(&["--scan", "--pattern", "mcpx:task:*"]).lines().filter(|n| !n.is_empty()) {
        assert_eq!(cluster.redis.cli(&["SET", name, &forged]), "OK");
    }
    assert_eq!(v1(&urls[1], "GET", &path, ALICE, None).status, 404, "a forged record was believed");
}

/// A node that restarted (the same id at the same URL, as a restarted pod) has forgotten
/// the tasks it held: they are listed as their records read (a running one as failed)
/// through every node, not only through that one, and only to their caller.
#[test]
fn a_restarted_nodes_forgotten_tasks_are_listed_through_every_node() {
    let mut cluster = two_servers(&tag(), "60s");
    let urls: Vec<String> = cluster.nodes.iter().map(|n| n.url().to_owned()).collect();
    let running = slow_v1_task(&urls[0], "plain");
    let kept = mcpx_e2e::process::poll(PATIENCE, || (!kept_task_records(&cluster).is_empty()).then_some(()));
    assert!(kept.is_some(), "the task's record never reached Redis");
    cluster.nodes[0].kill();
    cluster.nodes[0].restart_on_its_port();
    assert_eq!(cluster.nodes[0].url(), urls[0], "the node came back elsewhere");

    for (node, url) in urls.iter().enumerate() {
        let listed = v1(url, "GET", "/v1/tasks", ALICE, None);
        assert_eq!(listed.status, 200, "{listed}");
        let tasks = listed.json()["tasks"].as_array().cloned().unwrap_or_default();
        let status = tasks.iter().find(|t| t["taskId"] == running.as_str()).map(|t| t["status"].clone());
        assert_eq!(status, Some(json!("failed")), "through node {node}: {listed}");
        assert_eq!(tasks.len(), 1, "through node {node}: {listed}");
        let theirs = v1(url, "GET", "/v1/tasks", BOB, None);
        assert_eq!(theirs.json()["tasks"], json!([]), "bob lists alice's task through node {node}: {theirs}");
    }
}

/// A task still running on a live node is never answered from its record: the local user
/// (no tokens, so the same caller over TCP and over a node's socket) who started it through
/// node 0 and asks through node 1's socket, which forwards nothing, gets what such a caller
/// gets for another node's task (404), not `failed`, which would have it make the call
/// again while the first one runs.
#[test]
fn a_task_running_on_a_live_node_is_not_answered_as_failed_from_its_record() {
    let cluster = Cluster::start(json!({"plain": fakemcp("global", &tag(), &[])}), "60s", json!({}));
    let url = cluster.nodes[0].url();
    let headers = [("Content-Type", "application/json"), ("X-Mcpx-Session", "work")];
    let slow = json!({"server": "plain", "tool": "slow", "arguments": {"ms": 600_000}}).to_string();
    let started = plain("POST", &format!("{}/v1/tasks", base_url(url)), &headers, Some(&slow));
    assert_eq!(started.status, 202, "{started}");
    let id = started.json()["taskId"].as_str().unwrap().to_owned();
    let kept = mcpx_e2e::process::poll(PATIENCE, || (!kept_task_records(&cluster).is_empty()).then_some(()));
    assert!(kept.is_some(), "the record never reached Redis");

    let path = format!("/v1/tasks/{id}");
    let through_socket = cluster.nodes[1].home().v1_as("GET", &path, None, "work");
    assert_eq!(through_socket.status, 404, "a running task read as: {}", through_socket.body);
    let there = plain("GET", &format!("{}{path}", base_url(url)), &headers, None);
    assert_eq!((there.status, &there.json()["status"]), (200, &json!("working")), "{there}");
}
