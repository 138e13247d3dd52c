//! 2025-11-25 tasks through mcpx: a session's task-augmented `tools/call` relayed to a
//! handshake-era upstream that runs tasks (fakemcp's conformance fixture, `--era
//! legacy`), or run by mcpx itself for an upstream without tasks; `tasks/get`,
//! `tasks/result`, `tasks/list` and `tasks/cancel` under ids of mcpx's own that only the
//! session they were handed to can use.

use std::time::{Duration, Instant};

use mcpx_e2e::client::{LegacySession, Reply, next_id};
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::{poll, processes_with, tag};
use mcpx_e2e::tap::HttpTap;
use serde_json::{Value, json};

const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];
const PATIENCE: Duration = Duration::from_secs(30);

/// A daemon with `fx`, a 2025-11-25-only upstream that runs tasks, plus `extra` settings.
fn daemon_with(t: &str, extra: Value) -> Daemon {
    let mut cfg = config(&[
        ("fx", fakemcp("global", t, &["--fixture", "conformance", "--era", "legacy"])),
        ("plain", fakemcp("global", t, &["--era", "legacy"])),
    ]);
    for (key, value) in extra.as_object().into_iter().flatten() {
        cfg[key] = value.clone();
    }
    Daemon::start(&cfg)
}

/// Calls `server`'s `tool` as a task, and returns the `Task` mcpx handed back.
fn start(session: &LegacySession, server: &str, tool: &str, arguments: Value, ttl: u64) -> Value {
    let params = json!({"name": "mcpx_call", "arguments": {"server": server, "tool": tool, "arguments": arguments},
        "task": {"ttl": ttl}});
    let created = session.request("tools/call", params);
    let task = created.result()["task"].clone();
    assert!(task["taskId"].is_string() && task["status"] == "working", "{created}");
    task
}

fn get(session: &LegacySession, id: &str) -> Reply {
    session.request("tasks/get", json!({"taskId": id}))
}

fn poll_until(session: &LegacySession, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let reply = get(session, id);
        let task = reply.result().clone();
        assert_eq!(task["taskId"], id, "{reply}");
        if done(&task) {
            return task;
        }
        assert!(Instant::now() < deadline, "the task never got there: {reply}");
        std::thread::sleep(Duration::from_millis(task["pollInterval"].as_u64().unwrap_or(100)));
    }
}

fn ended(task: &Value) -> bool {
    task["status"].as_str().is_some_and(|s| TERMINAL.contains(&s))
}

#[test]
fn a_session_is_offered_tasks_and_its_task_is_relayed_under_an_id_of_mcpx() {
    let t = tag();
    let daemon = daemon_with(&t, json!({}));
    let session = LegacySession::open(daemon.url());
    let tasks = &session.initialized["capabilities"]["tasks"];
    assert!(tasks["requests"]["tools"]["call"].is_object() && tasks["list"].is_object(), "{}", session.initialized);

    let task = start(&session, "fx", "slow_compute", json!({"seconds": 0.3, "label": "sum"}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    // fakemcp's own ids are "task-<n>": the caller never sees them.
    assert!(!id.starts_with("task-"), "{task}");
    assert!(task["ttl"].as_u64().is_some_and(|ttl| ttl <= 60_000), "{task}");

    let listed = session.request("tasks/list", json!({}));
    assert!(listed.result()["tasks"].as_array().unwrap().iter().any(|t| t["taskId"] == id), "{listed}");

    let result = session.request("tasks/result", json!({"taskId": id}));
    assert_eq!(result.result()["content"][0]["text"], "sum: computed after 0.3s", "{result}");
    assert_eq!(result.result()["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id, "{result}");
    let done = poll_until(&session, id, ended);
    assert_eq!(done["status"], "completed", "{done}");
    // Ended: cancelling it is refused, as the revision says.
    session.request("tasks/cancel", json!({"taskId": id})).assert_error(200, -32602);
}

#[test]
fn another_session_can_neither_read_await_nor_cancel_a_task_nor_see_it_listed() {
    let t = tag();
    let daemon = daemon_with(&t, json!({}));
    let owner = LegacySession::open(daemon.url());
    let intruder = LegacySession::open(daemon.url());
    let task = start(&owner, "fx", "slow_compute", json!({"seconds": 600}), 60_000);
    let id = task["taskId"].as_str().unwrap().to_owned();

    let made_up = format!("{}x", &id[..id.len() - 1]);
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let unknown = intruder.request(method, json!({"taskId": made_up}));
        let unknown = unknown.assert_error(200, -32602).clone();
        let foreign = intruder.request(method, json!({"taskId": id}));
        let foreign = foreign.assert_error(200, -32602);
        assert_eq!(foreign["message"], unknown["message"].as_str().unwrap().replace(&made_up, &id), "{method}");
        assert_eq!(foreign.get("data"), unknown.get("data"), "{method}");
    }
    let listed = intruder.request("tasks/list", json!({}));
    assert_eq!(listed.result()["tasks"], json!([]), "{listed}");
    // The intruder's cancel changed nothing.
    assert_eq!(get(&owner, &id).result()["status"], "working");
    let cancelled = owner.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(cancelled.result()["status"], "cancelled", "{cancelled}");
}

#[test]
fn a_cancelled_task_ends_cancelled_and_its_result_says_so() {
    let t = tag();
    let daemon = daemon_with(&t, json!({}));
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "slow_compute", json!({"seconds": 600}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    let cancelled = session.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(cancelled.result()["status"], "cancelled", "{cancelled}");
    assert_eq!(poll_until(&session, id, ended)["status"], "cancelled");
    session.request("tasks/result", json!({"taskId": id})).assert_error(200, -32602);
}

#[test]
fn a_task_is_gone_once_its_ttl_passes() {
    let t = tag();
    let daemon = daemon_with(&t, json!({"tasks": {"maxTtl": "2s"}}));
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "slow_compute", json!({"seconds": 600}), 60_000);
    assert_eq!(task["ttl"], 2000, "the caller is told mcpx's shorter ttl: {task}");
    let id = task["taskId"].as_str().unwrap();
    let gone = poll(PATIENCE, || get(&session, id).frame().get("error").map(|_| ()));
    assert!(gone.is_some(), "the task outlived its ttl");
    get(&session, id).assert_error(200, -32602);
    assert_eq!(session.request("tasks/list", json!({})).result()["tasks"], json!([]));
}

#[test]
fn an_upstream_that_exits_mid_task_fails_the_task_with_a_clear_status() {
    let t = tag();
    let daemon = daemon_with(&t, json!({}));
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "crash_job", json!({}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    let done = poll_until(&session, id, ended);
    assert_eq!(done["status"], "failed", "{done}");
    let message = done["statusMessage"].as_str().unwrap_or_default();
    assert!(message.contains("instance ended"), "{done}");
    let result = session.request("tasks/result", json!({"taskId": id}));
    let error = result.assert_error(200, -32603);
    assert!(error["message"].as_str().unwrap().contains("exited while running this task"), "{result}");
}

#[test]
fn a_caller_that_hangs_up_on_tasks_result_gets_the_result_when_it_returns() {
    let t = tag();
    let daemon = daemon_with(&t, json!({}));
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "slow_compute", json!({"seconds": 2, "label": "late"}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    // Waits for the result, then hangs up long before it comes.
    let frame = json!({"jsonrpc": "2.0", "id": next_id(), "method": "tasks/result", "params": {"taskId": id}});
    let hung_up = reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap()
        .post(daemon.url())
        .header("Content-Type", "application/json")
        .header("Accept", "application/json, text/event-stream")
        .header("Mcp-Session-Id", session.id())
        .header("MCP-Protocol-Version", "2025-11-25")
        .body(frame.to_string())
        .send()
        .and_then(|r| r.text());
    assert!(hung_up.is_err(), "the result came before the caller hung up: {hung_up:?}");
    // It comes back in the same session: the task went on meanwhile.
    assert_eq!(get(&session, id).result()["status"], "working");
    let result = session.request("tasks/result", json!({"taskId": id}));
    assert_eq!(result.result()["content"][0]["text"], "late: computed after 2s", "{result}");
}

#[test]
fn the_instance_of_a_running_task_is_not_stopped_for_idleness_and_is_once_it_ends() {
    let t = tag();
    let daemon = daemon_with(&t, json!({"pool": {"idleTimeout": "1s"}}));
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "slow_compute", json!({"seconds": 3}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    // Nobody asks until it is over: the hold alone keeps the instance.
    let result = session.request("tasks/result", json!({"taskId": id}));
    assert_eq!(result.result()["content"][0]["text"], "compute: computed after 3s", "{result}");
    // Ended, the hold is gone: the instance is stopped for idleness like any other.
    let stopped = poll(PATIENCE, || processes_with(&t).is_empty().then_some(()));
    assert!(stopped.is_some(), "the instance outlived its task: {:?}", processes_with(&t));
}

#[test]
fn mcpx_runs_a_task_itself_for_an_upstream_without_tasks() {
    let t = tag();
    let daemon = daemon_with(&t, json!({}));
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "plain", "slow", json!({"ms": 500}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    let done = poll_until(&session, id, ended);
    assert_eq!(done["status"], "completed", "{done}");
    let result = session.request("tasks/result", json!({"taskId": id}));
    assert_eq!(result.result()["structuredContent"]["sleptMs"], 500, "{result}");

    // Cancelled, the call upstream stops too: a later call finds the instance free.
    let task = start(&session, "plain", "slow", json!({"ms": 600_000}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    let cancelled = session.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(cancelled.result()["status"], "cancelled", "{cancelled}");
    assert_eq!(get(&session, id).result()["status"], "cancelled");
}

/// A daemon with `fx`, a 2026-only upstream that runs tasks (the tasks extension).
fn daemon_with_modern_upstream(t: &str) -> Daemon {
    Daemon::start(&config(&[("fx", fakemcp("global", t, &["--fixture", "conformance", "--era", "modern"]))]))
}

#[test]
fn a_session_gets_a_2026_upstreams_task_in_its_own_eras_shapes() {
    let t = tag();
    let daemon = daemon_with_modern_upstream(&t);
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "slow_compute", json!({"seconds": 0.3, "label": "sum"}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    assert!(!id.starts_with("task-"), "{task}");
    let result = session.request("tasks/result", json!({"taskId": id}));
    assert_eq!(result.result()["content"][0]["text"], "sum: computed after 0.3s", "{result}");
    assert_eq!(poll_until(&session, id, ended)["status"], "completed");

    let crashing = start(&session, "fx", "crash_job", json!({}), 60_000);
    let id = crashing["taskId"].as_str().unwrap();
    let done = poll_until(&session, id, ended);
    assert_eq!(done["status"], "failed", "{done}");
    session.request("tasks/result", json!({"taskId": id})).assert_error(200, -32603);
}

/// The next frame on `serve` that is not a task's status notification (which the session
/// hears whenever one of its tasks changes status).
fn next_answer_or_question(serve: &mut super::questions::ServeStdio) -> Value {
    loop {
        let frame = serve.read();
        if frame["method"] != "notifications/tasks/status" {
            return frame;
        }
    }
}

/// Calls `fx`'s `confirm_delete` as a task on `serve`, waits for its result, answers the
/// question mcpx puts to the caller meanwhile, and returns the result.
fn confirmed_through_the_question_relay(serve: &mut super::questions::ServeStdio) -> Value {
    serve.initialize(json!({"elicitation": {}}));
    serve.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcpx_call",
        "arguments": {"server": "fx", "tool": "confirm_delete", "arguments": {"filename": "plans.txt"}},
        "task": {"ttl": 60_000}}}));
    let created = next_answer_or_question(serve);
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_owned();
    serve.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": id}}));
    let question = next_answer_or_question(serve);
    assert_eq!(question["method"], "elicitation/create", "{question}");
    // The question names mcpx's task, never the upstream's.
    assert_eq!(question["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id, "{question}");
    let answer = json!({"action": "accept", "content": {"confirm": true}});
    serve.send(json!({"jsonrpc": "2.0", "id": question["id"], "result": answer}));
    let result = next_answer_or_question(serve);
    assert_eq!(result["id"], 3, "{result}");
    result["result"].clone()
}

#[test]
fn a_question_a_task_asks_reaches_the_session_whichever_era_the_upstream_speaks() {
    for era in ["legacy", "modern"] {
        let t = tag();
        let cfg = config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", era]))]);
        let mut serve = super::questions::ServeStdio::start(&cfg);
        let result = confirmed_through_the_question_relay(&mut serve);
        assert_eq!(result["content"][0]["text"], "Deleted plans.txt", "{era}: {result}");
    }
}

#[test]
fn a_session_hears_its_tasks_change_status() {
    let t = tag();
    let cfg = config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]);
    let mut serve = super::questions::ServeStdio::start(&cfg);
    serve.initialize(json!({}));
    serve.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcpx_call",
        "arguments": {"server": "fx", "tool": "slow_compute", "arguments": {"seconds": 0.3}}, "task": {"ttl": 60_000}}}));
    let created = serve.read();
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_owned();
    // Nobody polls: the session is told when the task ends.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let frame = serve.read();
        if frame["method"] == "notifications/tasks/status" {
            assert_eq!(frame["params"]["taskId"], id, "{frame}");
            assert_eq!(frame["params"]["status"], "completed", "{frame}");
            break;
        }
        assert!(Instant::now() < deadline, "no status notification came");
    }
}

#[test]
fn tasks_list_comes_in_pages_whose_cursor_only_its_session_can_follow() {
    let t = tag();
    let daemon = daemon_with(&t, json!({"limits": {"pageSize": 2}}));
    let session = LegacySession::open(daemon.url());
    let intruder = LegacySession::open(daemon.url());
    let ids: Vec<String> = (0..3)
        .map(|_| {
            start(&session, "plain", "slow", json!({"ms": 600_000}), 60_000)["taskId"].as_str().unwrap().to_owned()
        })
        .collect();
    // Someone else's task in between changes nothing of the session's pages.
    start(&intruder, "plain", "slow", json!({"ms": 600_000}), 60_000);

    let first = session.request("tasks/list", json!({}));
    let listed: Vec<&Value> = first.result()["tasks"].as_array().unwrap().iter().map(|t| &t["taskId"]).collect();
    assert_eq!(listed, [&json!(ids[0]), &json!(ids[1])], "{first}");
    let cursor = first.result()["nextCursor"].as_str().unwrap_or_else(|| panic!("no nextCursor: {first}")).to_owned();
    let second = session.request("tasks/list", json!({"cursor": cursor}));
    assert_eq!(second.result()["tasks"].as_array().unwrap().len(), 1, "{second}");
    assert_eq!(second.result()["tasks"][0]["taskId"], ids[2].as_str(), "{second}");
    assert!(second.result().get("nextCursor").is_none(), "the last page says no more: {second}");
    // An empty cursor is the start.
    let again = session.request("tasks/list", json!({"cursor": ""}));
    assert_eq!(again.result()["tasks"][0]["taskId"], ids[0].as_str(), "{again}");

    // An altered cursor, and the session's own in another session's hands, are refused
    // alike: the intruder pages through nothing of the session's.
    let altered = format!("{}x", &cursor[..cursor.len() - 1]);
    let bad = session.request("tasks/list", json!({"cursor": altered}));
    let bad = bad.assert_error(200, -32602).clone();
    let foreign = intruder.request("tasks/list", json!({"cursor": cursor}));
    assert_eq!(foreign.assert_error(200, -32602), &bad, "{foreign}");
    session.request("tasks/list", json!({"cursor": 7})).assert_error(200, -32602);
}

#[test]
fn a_session_reads_each_tools_task_support_and_a_tool_that_forbids_tasks_is_refused_one() {
    let t = tag();
    let daemon = daemon_with(&t, json!({"expose": ["fx", "plain"]}));
    let session = LegacySession::open(daemon.url());
    let listed = session.request("tools/list", json!({}));
    let support = |name: &str| {
        let tools = listed.result()["tools"].as_array().unwrap();
        let tool = tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("no {name}: {listed}"));
        tool.pointer("/execution/taskSupport").cloned().unwrap_or(Value::Null)
    };
    // mcpx runs or relays a task for any call.
    assert_eq!(support("mcpx_call"), "optional", "{listed}");
    // A server that runs tasks itself says which of its tools may: its word is passed on.
    assert_eq!(support("fx__slow_compute"), "optional", "{listed}");
    assert_eq!(support("fx__crash_job"), "required", "{listed}");
    assert_eq!(support("fx__echo"), Value::Null, "{listed}");
    // Exposed tools are listed as their server lists them, whatever it runs.
    assert_eq!(support("plain__echo"), Value::Null, "{listed}");

    // The tool fx forbids tasks for is refused one, by its exposed name and through
    // mcpx_call alike, as the revision says (-32601); called plainly it answers.
    let task = json!({"ttl": 60_000});
    let exposed = session.request("tools/call", json!({"name": "fx__echo", "arguments": {"text": "hi"}, "task": task}));
    let error = exposed.assert_error(200, -32601);
    assert!(error["message"].as_str().unwrap().contains("forbidden"), "{exposed}");
    let through = session.request(
        "tools/call",
        json!({"name": "mcpx_call",
        "arguments": {"server": "fx", "tool": "echo", "arguments": {"text": "hi"}}, "task": task}),
    );
    through.assert_error(200, -32601);
    let plain = session.request("tools/call", json!({"name": "fx__echo", "arguments": {"text": "hi"}}));
    assert!(plain.result()["content"].is_array(), "{plain}");
    // A server without tasks of its own forbids nothing: mcpx runs the task.
    let ran = session.request("tools/call", json!({"name": "plain__echo", "arguments": {"text": "hi"}, "task": task}));
    assert_eq!(ran.result()["task"]["status"], "working", "{ran}");
}

#[test]
fn an_http_upstream_that_goes_away_mid_task_fails_the_task_with_a_clear_status() {
    let fake = mcpx_e2e::FakeHttp::start(&["--fixture", "conformance", "--era", "legacy"]);
    let mut cfg = config(&[("fx", json!({"url": fake.url}))]);
    cfg["tasks"] = json!({"unreachableFor": "1s"});
    let daemon = Daemon::start(&cfg);
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "crash_job", json!({}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    // Waiting on it outlasts the server: the wait ends with the task's failure.
    let result = session.request("tasks/result", json!({"taskId": id}));
    let error = result.assert_error(200, -32603);
    assert!(error["message"].as_str().unwrap().contains("stopped answering for this task"), "{result}");
    let done = get(&session, id);
    assert_eq!(done.result()["status"], "failed", "{done}");
    assert!(done.result()["statusMessage"].as_str().unwrap_or_default().contains("stopped answering"), "{done}");
}

/// Waits (at most `within`) for the status notification of the task `id` on a session's
/// standalone stream, checked against the schema; `None` when none came.
fn status_of(arrived: &std::sync::mpsc::Receiver<Value>, id: &str, within: Duration) -> Option<Value> {
    let deadline = Instant::now() + within;
    loop {
        let frame = arrived.recv_timeout(deadline.saturating_duration_since(Instant::now())).ok()?;
        if frame["method"] == "notifications/tasks/status" {
            mcpx_e2e::schema::spec(mcpx_e2e::schema::LEGACY).assert_valid(
                "TaskStatusNotification",
                &frame,
                "a task status on the standalone stream",
            );
            if frame["params"]["taskId"] == id {
                return Some(frame);
            }
        }
    }
}

/// How long a status the upstream announces may take to reach the caller. mcpx polls a
/// task no less often than every 5 s, whatever the upstream suggests (60 s here): a
/// status that came only by polling would arrive after this.
const HEARD_WITHIN: Duration = Duration::from_secs(3);

#[test]
fn a_session_hears_an_upstreams_own_task_status_without_waiting_for_a_poll() {
    let t = tag();
    let daemon = daemon_with(&t, json!({}));
    let session = LegacySession::open(daemon.url());
    let arrived = session.standalone_events();
    let arguments = json!({"seconds": 0.5, "label": "told", "notify": true, "pollInterval": 60_000});
    let task = start(&session, "fx", "slow_compute", arguments, 60_000);
    assert_eq!(task["pollInterval"], 60_000, "{task}");
    let id = task["taskId"].as_str().unwrap();

    let heard = status_of(&arrived, id, HEARD_WITHIN).expect("the upstream's own status reached the session");
    assert_eq!(heard["params"]["status"], "completed", "{heard}");
    assert!(!heard.to_string().contains("task-1"), "the upstream's own id leaked: {heard}");
    // Kept at once, result and all: nobody polled, and the list shows it as last seen.
    let listed = session.request("tasks/list", json!({}));
    assert_eq!(listed.result()["tasks"][0]["status"], "completed", "{listed}");
    let result = session.request("tasks/result", json!({"taskId": id}));
    assert_eq!(result.result()["content"][0]["text"], "told: computed after 0.5s", "{result}");
}

/// Every task status on a session's standalone stream (checked against the schema) until
/// one that `until` picks comes, and for `more` after that (or until `within` passes).
/// Returns them, and whether the one picked came.
fn statuses(
    arrived: &std::sync::mpsc::Receiver<Value>,
    within: Duration,
    until: impl Fn(&Value) -> bool,
    more: Duration,
) -> (Vec<Value>, bool) {
    let (mut seen, mut came) = (Vec::new(), false);
    let mut deadline = Instant::now() + within;
    while let Ok(frame) = arrived.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if frame["method"] != "notifications/tasks/status" {
            continue;
        }
        let spec = mcpx_e2e::schema::spec(mcpx_e2e::schema::LEGACY);
        spec.assert_valid("TaskStatusNotification", &frame, "a task status on the standalone stream");
        if !came && until(&frame) {
            came = true;
            deadline = Instant::now() + more;
        }
        seen.push(frame);
    }
    (seen, came)
}

/// An upstream speaks only for the tasks it runs: a status it sends under an id it never
/// ran, or under the id of another caller's task on another instance, changes nothing and
/// reaches nobody.
#[test]
fn an_upstream_cannot_touch_tasks_it_does_not_run_with_a_status_notification() {
    let t = tag();
    let cfg = config(&[("fx", fakemcp("session", &t, &["--fixture", "conformance", "--era", "legacy"]))]);
    let daemon = Daemon::start(&cfg);
    let (alice, bob) = (LegacySession::open(daemon.url()), LegacySession::open(daemon.url()));
    let (alice_hears, bob_hears) = (alice.standalone_events(), bob.standalone_events());
    let waiting = |seconds: f64| json!({"seconds": seconds, "pollInterval": 60_000});
    // Alice's instance runs task-1 (ending soon) and then her task-2.
    start(&alice, "fx", "slow_compute", json!({"seconds": 0.2}), 60_000);
    let alices = start(&alice, "fx", "slow_compute", waiting(600.0), 60_000);
    let alices = alices["taskId"].as_str().unwrap();
    // Bob's instance runs his task-1, then task-2, which says, as it ends, that task-404
    // (which it never ran) and task-2 (its own, and Alice's id on her instance) wait
    // for input: a status mcpx keeps as it hears it, with nothing to fetch.
    let bobs_other = start(&bob, "fx", "slow_compute", waiting(600.0), 60_000);
    let bobs_other = bobs_other["taskId"].as_str().unwrap();
    let mut speaking = waiting(0.3);
    speaking["notifyAs"] = json!(["task-404", "task-2"]);
    speaking["notifyStatus"] = json!("input_required");
    let bobs = start(&bob, "fx", "slow_compute", speaking, 60_000);
    let bobs = bobs["taskId"].as_str().unwrap();

    // Its own task's status is heard, by Bob alone, and nothing else is.
    let about = |id: &str| {
        let id = id.to_owned();
        move |f: &Value| f["params"]["taskId"] == id.as_str()
    };
    let (heard, came) = statuses(&bob_hears, HEARD_WITHIN, about(bobs), Duration::from_secs(1));
    assert!(came, "Bob heard his own task's status: {heard:?}");
    assert!(!heard.iter().any(about(bobs_other)), "a status for a task the instance never ran: {heard:?}");
    let (heard, _) = statuses(&alice_hears, Duration::from_secs(1), |_| false, Duration::ZERO);
    assert!(!heard.iter().any(about(alices)), "another instance spoke for Alice's task: {heard:?}");
    for (session, id) in [(&alice, alices), (&bob, bobs_other)] {
        let listed = session.request("tasks/list", json!({}));
        let task = listed.result()["tasks"].as_array().unwrap().iter().find(|t| t["taskId"] == id).cloned();
        assert_eq!(task.as_ref().map(|t| &t["status"]), Some(&json!("working")), "{listed}");
    }
}

#[test]
fn cancelling_a_task_whose_http_upstream_is_gone_records_the_cancellation() {
    let fake = mcpx_e2e::FakeHttp::start(&["--fixture", "conformance", "--era", "legacy"]);
    let cfg = config(&[("fx", json!({"url": fake.url}))]);
    let daemon = Daemon::start(&cfg);
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "slow_compute", json!({"seconds": 600}), 60_000);
    let id = task["taskId"].as_str().unwrap();
    drop(fake);

    // Not a transport error: the task ends cancelled, and says the server was not told.
    let cancelled = session.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(cancelled.result()["status"], "cancelled", "{cancelled}");
    let message = cancelled.result()["statusMessage"].as_str().unwrap_or_default();
    assert!(message.contains("could not be reached"), "{cancelled}");
    assert_eq!(get(&session, id).result()["status"], "cancelled");
    session.request("tasks/result", json!({"taskId": id})).assert_error(200, -32602);
    // Cancelled is terminal: cancelling again is refused as for any ended task.
    session.request("tasks/cancel", json!({"taskId": id})).assert_error(200, -32602);
}

/// A cancellation the server could not hear is sent again once it can: the line to an
/// HTTP upstream is cut while it runs a task, the task is cancelled, the line comes back,
/// and the upstream's own task ends cancelled without anyone asking again.
#[test]
fn a_cancellation_the_http_upstream_missed_reaches_it_once_it_is_back() {
    let fake = mcpx_e2e::FakeHttp::start(&["--fixture", "conformance", "--era", "legacy"]);
    let mut line = HttpTap::start(&fake.url);
    let cfg = config(&[("fx", json!({"url": line.url()}))]);
    let daemon = Daemon::start(&cfg);
    let session = LegacySession::open(daemon.url());
    let task = start(&session, "fx", "slow_compute", json!({"seconds": 600}), 120_000);
    let id = task["taskId"].as_str().unwrap();

    line.cut();
    let cancelled = session.request("tasks/cancel", json!({"taskId": id}));
    assert_eq!(cancelled.result()["status"], "cancelled", "{cancelled}");
    assert!(cancelled.result()["statusMessage"].as_str().is_some_and(|m| m.contains("could not be reached")));
    line.relay_to(&fake.url);

    // The upstream answers a `tasks/cancel` of its task with the task, now cancelled.
    let told = || {
        line.exchanges().into_iter().find(|(request, response)| {
            request.rpc_method() == Some("tasks/cancel")
                && response.as_ref().is_some_and(|r| r.messages.iter().any(|m| m["result"]["status"] == "cancelled"))
        })
    };
    let heard = poll(Duration::from_secs(60), told);
    assert!(heard.is_some(), "the upstream never heard the cancellation:\n{}", line.transcript());
    assert_eq!(get(&session, id).result()["status"], "cancelled");
}
