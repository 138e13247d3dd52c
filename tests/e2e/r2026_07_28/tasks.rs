//! Tasks (the 2026-07-28 `io.modelcontextprotocol/tasks` extension) relayed from a 2026
//! upstream (fakemcp's conformance fixture) to 2026 callers: ids of mcpx's own that only
//! their caller can use, the instance held while a task runs, expiry at `tasks.maxTtl`,
//! cancellation, and an instance that exits mid-task. (The suite's `tasks-*` scenarios
//! run through mcpx in `scripts/conformance.sh` besides.)

use std::time::{Duration, Instant};

use mcpx_e2e::client::{Modern, Reply};
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use serde_json::{Value, json};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const TERMINAL: [&str; 3] = ["completed", "failed", "cancelled"];
/// How long a test waits for a task to reach a state before it fails.
const PATIENCE: Duration = Duration::from_secs(30);

fn with_tasks(request: Modern) -> Modern {
    request.meta(CAPABILITIES, json!({"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}))
}

fn daemon_with(extra: Value) -> Daemon {
    let mut cfg = config(&[("fx", fakemcp("global", &tag(), &["--fixture", "conformance"]))]);
    for (key, value) in extra.as_object().into_iter().flatten() {
        cfg[key] = value.clone();
    }
    Daemon::start(&cfg)
}

/// Calls fx's `tool` as `session`, and returns the task it answered with.
fn start(daemon: &Daemon, session: &str, tool: &str, arguments: Value) -> Value {
    start_on(daemon, session, "fx", tool, arguments)
}

/// Calls `server`'s `tool` as `session`, and returns the task it answered with.
fn start_on(daemon: &Daemon, session: &str, server: &str, tool: &str, arguments: Value) -> Value {
    let created = with_tasks(Modern::mcpx_call(server, tool, arguments)).session(session).send(daemon.url());
    let task = created.result().clone();
    assert_eq!(task["resultType"], "task", "{created}");
    for field in ["taskId", "status", "createdAt", "lastUpdatedAt"] {
        assert!(task[field].is_string(), "a task carries {field}: {created}");
    }
    assert!(task["ttlMs"].is_u64(), "{created}");
    assert!(task.get("requestState").is_none() && task.get("result").is_none(), "{created}");
    task
}

fn task_request(daemon: &Daemon, session: &str, method: &str, params: Value) -> Reply {
    with_tasks(Modern::new(method, params)).session(session).send(daemon.url())
}

fn get(daemon: &Daemon, session: &str, id: &str) -> Reply {
    task_request(daemon, session, "tasks/get", json!({"taskId": id}))
}

/// Polls the task until `done` says so of it, at the interval it suggests.
fn poll_until(daemon: &Daemon, session: &str, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let reply = get(daemon, session, id);
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
    task["status"].as_str().is_some_and(|s| TERMINAL.contains(&s))
}

#[test]
fn a_task_reaches_its_caller_under_an_id_of_mcpx_and_ends_with_the_result() {
    let daemon = daemon_with(json!({}));
    let task = start(&daemon, "a", "slow_compute", json!({"seconds": 0.3, "label": "sum"}));
    let id = task["taskId"].as_str().unwrap();
    // The upstream's own ids are "task-<n>": the caller never sees them.
    assert!(!id.starts_with("task-"), "{task}");
    let done = poll_until(&daemon, "a", id, ended);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "sum: computed after 0.3s", "{done}");
    // Ended: still readable (from mcpx), and a cancel is an empty acknowledgement.
    assert_eq!(get(&daemon, "a", id).result()["status"], "completed");
    let ack = task_request(&daemon, "a", "tasks/cancel", json!({"taskId": id}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");
    assert!(ack.result().get("status").is_none(), "{ack}");
}

#[test]
fn another_caller_can_neither_read_answer_nor_cancel_a_task_and_learns_nothing_of_it() {
    let daemon = daemon_with(json!({}));
    let task = start(&daemon, "owner", "confirm_delete", json!({"filename": "plans.txt"}));
    let id = task["taskId"].as_str().unwrap().to_owned();
    let asking = poll_until(&daemon, "owner", &id, |t| t["status"] == "input_required");
    assert!(asking["inputRequests"]["confirm"].is_object(), "{asking}");

    // What a caller gets for an id that never existed...
    let made_up = format!("{}x", &id[..id.len() - 1]);
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let params = |id: &str| json!({"taskId": id, "inputResponses": {}});
        let unknown = task_request(&daemon, "intruder", method, params(&made_up));
        let unknown = unknown.assert_error(200, -32602).clone();
        // ...is what another caller gets for the real one: the same code, the same words.
        let foreign = task_request(&daemon, "intruder", method, params(&id));
        let foreign = foreign.assert_error(200, -32602);
        assert_eq!(foreign["message"], unknown["message"].as_str().unwrap().replace(&made_up, &id), "{method}");
        assert_eq!(foreign.get("data"), unknown.get("data"), "{method}");
    }
    // The intruder's answer and cancel changed nothing: the owner's task still waits.
    let still = get(&daemon, "owner", &id);
    assert_eq!(still.result()["status"], "input_required", "{still}");

    // The owner answers, and the task completes with that answer.
    let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let ack = task_request(&daemon, "owner", "tasks/update", json!({"taskId": id, "inputResponses": answer}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");
    let done = poll_until(&daemon, "owner", &id, ended);
    assert_eq!(done["result"]["content"][0]["text"], "Deleted plans.txt", "{done}");
}

#[test]
fn a_cancelled_task_ends_cancelled() {
    let daemon = daemon_with(json!({}));
    let task = start(&daemon, "a", "slow_compute", json!({"seconds": 600}));
    let id = task["taskId"].as_str().unwrap();
    let ack = task_request(&daemon, "a", "tasks/cancel", json!({"taskId": id}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");
    let done = poll_until(&daemon, "a", id, ended);
    assert_eq!(done["status"], "cancelled", "{done}");
}

#[test]
fn a_task_is_gone_for_good_once_its_ttl_passes() {
    let daemon = daemon_with(json!({"tasks": {"maxTtl": "2s"}}));
    let task = start(&daemon, "a", "slow_compute", json!({"seconds": 600}));
    assert_eq!(task["ttlMs"], 2000, "the caller is told mcpx's shorter ttl: {task}");
    let id = task["taskId"].as_str().unwrap();
    assert_eq!(get(&daemon, "a", id).result()["status"], "working");
    let deadline = Instant::now() + PATIENCE;
    loop {
        let reply = get(&daemon, "a", id);
        if reply.frame().get("error").is_some() {
            reply.assert_error(200, -32602);
            break;
        }
        assert!(Instant::now() < deadline, "the task outlived its ttl: {reply}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_instance_running_a_task_is_not_stopped_for_idleness() {
    // Idle after a second: without the task's hold the instance would be stopped long
    // before the task ends, and the task would end failed.
    let daemon = daemon_with(json!({"pool": {"idleTimeout": "1s"}}));
    let task = start(&daemon, "a", "slow_compute", json!({"seconds": 4}));
    let id = task["taskId"].as_str().unwrap();
    let done = poll_until(&daemon, "a", id, ended);
    assert_eq!(done["status"], "completed", "{done}");
}

#[test]
fn an_upstream_that_exits_mid_task_fails_the_task_saying_so() {
    let daemon = daemon_with(json!({}));
    let task = start(&daemon, "a", "crash_job", json!({}));
    let id = task["taskId"].as_str().unwrap();
    let done = poll_until(&daemon, "a", id, ended);
    assert_eq!(done["status"], "failed", "{done}");
    let message = done["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("\"fx\"") && message.contains("exited while running this task"), "{done}");
    assert_eq!(done["error"]["code"], -32603, "{done}");
    assert!(done.get("result").is_none(), "{done}");
}

#[test]
fn the_task_methods_need_the_extension_declared() {
    let daemon = daemon_with(json!({}));
    let task = start(&daemon, "a", "slow_compute", json!({"seconds": 600}));
    let id = task["taskId"].as_str().unwrap();
    let undeclared = Modern::new("tasks/get", json!({"taskId": id})).session("a").send(daemon.url());
    let error = undeclared.assert_error(400, -32021);
    assert_eq!(error["data"]["requiredCapabilities"], json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}));
    // Without the extension a task-supporting tool answers at once, never with a task.
    let plain = Modern::mcpx_call("fx", "slow_compute", json!({"seconds": 0})).session("a").send(daemon.url());
    assert_eq!(plain.result()["resultType"], "complete", "{plain}");
}

#[test]
fn past_tasks_max_a_new_task_is_refused_naming_the_setting_and_the_others_go_on() {
    let daemon = daemon_with(json!({"tasks": {"max": 1}}));
    let first = start(&daemon, "a", "slow_compute", json!({"seconds": 600}));
    let refused = with_tasks(Modern::mcpx_call("fx", "slow_compute", json!({"seconds": 600}))).session("b");
    let refused = refused.send(daemon.url());
    let error = refused.assert_error(200, -32603);
    assert_eq!(error["data"]["setting"], "tasks.max", "{refused}");
    assert_eq!(error["data"]["limit"], 1, "{refused}");
    let id = first["taskId"].as_str().unwrap();
    assert_eq!(get(&daemon, "a", id).result()["status"], "working");
}

#[test]
fn one_client_cannot_take_every_task_slot_from_another() {
    let alice = "Bearer alice-token-0123456789abcdef";
    let bob = "Bearer bob-token-0123456789abcdef0";
    let daemon = daemon_with(json!({
        "http": {"tokens": {"alice": &alice[7..], "bob": &bob[7..]}},
        "tasks": {"max": 10, "maxPerClient": 1},
    }));
    let slow = |who: &str, session: &str| {
        with_tasks(Modern::mcpx_call("fx", "slow_compute", json!({"seconds": 600})))
            .session(session)
            .header("Authorization", who)
            .send(daemon.url())
    };
    let first = slow(alice, "a1");
    assert_eq!(first.result()["resultType"], "task", "{first}");
    // A second session of the same client counts against the same share.
    let refused = slow(alice, "a2");
    let error = refused.assert_error(200, -32603);
    assert_eq!(error["data"]["setting"], "tasks.maxPerClient", "{refused}");
    assert_eq!(error["data"]["limit"], 1, "{refused}");
    let other = slow(bob, "b1");
    assert_eq!(other.result()["resultType"], "task", "another client still gets a task: {other}");
}

#[test]
fn the_instance_of_an_ended_task_is_released_without_anyone_polling() {
    // Without a watcher, the hold would last until someone polls or the ttl (1h) passes.
    let t = tag();
    let cfg = config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance"]))]);
    let mut cfg = cfg;
    cfg["pool"] = json!({"idleTimeout": "1s"});
    let daemon = Daemon::start(&cfg);
    let task = start(&daemon, "a", "slow_compute", json!({"seconds": 1}));
    assert_eq!(task["status"], "working", "{task}");
    let stopped = mcpx_e2e::process::poll(PATIENCE, || mcpx_e2e::process::processes_with(&t).is_empty().then_some(()));
    assert!(stopped.is_some(), "the instance outlived its task: {:?}", mcpx_e2e::process::processes_with(&t));
    // Its end was kept: the caller still reads the result, though the instance is gone.
    let id = task["taskId"].as_str().unwrap();
    let done = get(&daemon, "a", id);
    assert_eq!(done.result()["status"], "completed", "{done}");
    assert_eq!(done.result()["result"]["content"][0]["text"], "compute: computed after 1s", "{done}");
}

/// A daemon where mcpx runs a call still unanswered after `after` as a task, with `plain`,
/// a fakemcp that knows nothing of tasks.
fn running_slow_calls(t: &str, after: &str) -> Daemon {
    let mut cfg = config(&[("plain", fakemcp("global", t, &[]))]);
    cfg["tasks"] = json!({"after": after});
    Daemon::start(&cfg)
}

#[test]
fn a_call_slower_than_tasks_after_becomes_a_task_mcpx_runs() {
    let t = tag();
    let daemon = running_slow_calls(&t, "300ms");
    // Quick: answered as usual.
    let quick = with_tasks(Modern::mcpx_call("plain", "slow", json!({"ms": 10}))).session("a").send(daemon.url());
    assert_eq!(quick.result()["resultType"], "complete", "{quick}");
    // Slow: a task at once, which ends with the call's result.
    let asked = Instant::now();
    let task = start_on(&daemon, "a", "plain", "slow", json!({"ms": 1500}));
    assert!(asked.elapsed() < Duration::from_millis(1400), "the caller waited for the call");
    let task = poll_until(&daemon, "a", task["taskId"].as_str().unwrap(), ended);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["result"]["structuredContent"]["sleptMs"], 1500, "{task}");
    // A caller that did not declare the extension waits for its answer, however slow.
    let plain = Modern::mcpx_call("plain", "slow", json!({"ms": 600})).session("a").send(daemon.url());
    assert_eq!(plain.result()["resultType"], "complete", "{plain}");
}

#[test]
fn cancelling_a_task_mcpx_runs_cancels_the_call_upstream() {
    let t = tag();
    let daemon = running_slow_calls(&t, "200ms");
    let task = start_on(&daemon, "a", "plain", "slow", json!({"ms": 600_000}));
    let id = task["taskId"].as_str().unwrap();
    assert_eq!(get(&daemon, "a", id).result()["status"], "working");
    // Another caller cannot cancel it.
    task_request(&daemon, "b", "tasks/cancel", json!({"taskId": id})).assert_error(200, -32602);
    assert_eq!(get(&daemon, "a", id).result()["status"], "working");
    let ack = task_request(&daemon, "a", "tasks/cancel", json!({"taskId": id}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");
    assert_eq!(get(&daemon, "a", id).result()["status"], "cancelled");
    // The call was stopped (its upstream request cancelled): the instance has none in flight.
    let idle = mcpx_e2e::process::poll(PATIENCE, || {
        let status = mcpx_e2e::client::plain(
            "GET",
            &format!("{}/v1/status", mcpx_e2e::client::base_url(daemon.url())),
            &[],
            None,
        );
        let instances = status.json()["instances"].clone();
        instances.as_array().into_iter().flatten().all(|i| i["inUse"] == 0).then_some(())
    });
    assert!(idle.is_some(), "the upstream call went on after the task was cancelled");
}

/// A daemon with `plain`, a fakemcp that knows nothing of tasks, reached through the CLI.
fn cli_daemon(t: &str) -> Daemon {
    Daemon::start(&config(&[("plain", fakemcp("global", t, &[]))]))
}

#[test]
fn mcpx_call_task_prints_an_id_that_mcpx_task_follows_in_the_same_session_only() {
    let t = tag();
    let daemon = cli_daemon(&t);
    let home = daemon.home();
    let started = home.cli(&["call", "--task", "--session", "a", "plain.slow", r#"{"ms": 800}"#]);
    started.assert_code(0);
    let id = started.stdout.trim().to_owned();
    assert!(!id.is_empty() && !id.contains(char::is_whitespace), "{started:?}");

    let listed = home.cli(&["task", "ls", "--session", "a"]);
    listed.assert_code(0);
    assert!(listed.stdout.contains(&id), "{listed:?}");
    // Another session sees nothing, and cannot read, wait for or cancel it.
    let other = home.cli(&["task", "ls", "--json", "--session", "b"]);
    assert_eq!(serde_json::from_str::<Value>(&other.stdout).unwrap()["tasks"], json!([]), "{other:?}");
    for verb in ["get", "wait", "cancel"] {
        let refused = home.cli(&["task", verb, "--session", "b", &id]);
        refused.assert_code(1);
        assert!(refused.stderr.contains("no task"), "{refused:?}");
    }

    let waited = home.cli(&["task", "wait", "--session", "a", &id]);
    waited.assert_code(0);
    assert!(waited.stdout.contains("sleptMs"), "{waited:?}");
    let got = home.cli(&["task", "get", "--json", "--session", "a", &id]);
    let task: Value = serde_json::from_str(&got.stdout).unwrap();
    assert_eq!(task["status"], "completed", "{got:?}");
    assert_eq!(task["result"]["structuredContent"]["sleptMs"], 800, "{got:?}");
}

#[test]
fn mcpx_task_cancel_stops_the_call_and_wait_reports_it() {
    let t = tag();
    let daemon = cli_daemon(&t);
    let home = daemon.home();
    let started = home.cli(&["call", "--task", "--session", "a", "plain.slow", r#"{"ms": 600000}"#]);
    started.assert_code(0);
    let id = started.stdout.trim().to_owned();
    let timed_out = home.cli(&["task", "wait", "--timeout", "1", "--session", "a", &id]);
    timed_out.assert_code(124);
    let cancelled = home.cli(&["task", "cancel", "--session", "a", &id]);
    cancelled.assert_code(0);
    assert_eq!(cancelled.stdout.trim(), "cancelled", "{cancelled:?}");
    home.cli(&["task", "wait", "--session", "a", &id]).assert_code(1);
}

#[test]
fn over_v1_a_token_holder_reaches_its_own_tasks_and_another_s_are_not_found() {
    let alice = "Bearer alice-token-0123456789abcdef";
    let bob = "Bearer bob-token-0123456789abcdef0";
    let t = tag();
    let mut cfg = config(&[("plain", fakemcp("global", &t, &[]))]);
    cfg["http"] = json!({"tokens": {"alice": &alice[7..], "bob": &bob[7..]}});
    let daemon = Daemon::start(&cfg);
    let base = mcpx_e2e::client::base_url(daemon.url()).to_owned();
    let v1 = |method: &str, path: &str, who: &str, body: Option<&str>| {
        let headers = [("Authorization", who), ("Content-Type", "application/json")];
        mcpx_e2e::client::plain(method, &format!("{base}{path}"), &headers, body)
    };
    let started =
        v1("POST", "/v1/tasks", alice, Some(r#"{"server": "plain", "tool": "slow", "arguments": {"ms": 600000}}"#));
    assert_eq!(started.status, 202, "{started}");
    let id = started.json()["taskId"].as_str().unwrap().to_owned();
    let path = format!("/v1/tasks/{id}");

    let unknown = v1("GET", &format!("{path}x"), bob, None);
    assert_eq!(unknown.status, 404, "{unknown}");
    let foreign = v1("GET", &path, bob, None);
    assert_eq!(foreign.status, 404, "{foreign}");
    let cancel = v1("POST", &format!("{path}/cancel"), bob, None);
    assert_eq!(cancel.status, 404, "{cancel}");
    assert_eq!(v1("GET", "/v1/tasks", bob, None).json()["tasks"], json!([]));

    let mine = v1("GET", &path, alice, None);
    assert_eq!(mine.json()["status"], "working", "{mine}");
    let listed = v1("GET", "/v1/tasks", alice, None);
    assert_eq!(listed.json()["tasks"][0]["taskId"], id.as_str(), "{listed}");
    let cancelled = v1("POST", &format!("{path}/cancel"), alice, None);
    assert_eq!(cancelled.json()["status"], "cancelled", "{cancelled}");
}

#[test]
fn a_2026_caller_gets_a_handshake_era_upstreams_task_in_its_own_eras_shapes() {
    let t = tag();
    let daemon =
        Daemon::start(&config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]));
    let task = start(&daemon, "a", "slow_compute", json!({"seconds": 0.3, "label": "sum"}));
    let id = task["taskId"].as_str().unwrap();
    assert!(!id.starts_with("task-"), "{task}");
    let done = poll_until(&daemon, "a", id, ended);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "sum: computed after 0.3s", "{done}");
    // A tool that runs only as a task, and whose instance exits under it.
    let task = start(&daemon, "a", "crash_job", json!({}));
    let done = poll_until(&daemon, "a", task["taskId"].as_str().unwrap(), ended);
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["error"]["message"].as_str().unwrap_or_default().contains("exited while running this task"), "{done}");
    // Without the extension declared, a tool that may run either way answers at once.
    let plain = Modern::mcpx_call("fx", "slow_compute", json!({"seconds": 0})).session("a").send(daemon.url());
    assert_eq!(plain.result()["resultType"], "complete", "{plain}");
}

#[test]
fn an_http_upstream_that_goes_away_mid_task_fails_the_task_saying_so() {
    for era in ["modern", "legacy"] {
        let fake = mcpx_e2e::FakeHttp::start(&["--fixture", "conformance", "--era", era]);
        let mut cfg = config(&[("fx", json!({"url": fake.url}))]);
        cfg["tasks"] = json!({"unreachableFor": "1s"});
        let daemon = Daemon::start(&cfg);
        let task = start(&daemon, "a", "crash_job", json!({}));
        let id = task["taskId"].as_str().unwrap();
        // While the server is out of reach, but not yet for tasks.unreachableFor, the
        // task is as last seen, never an error.
        let done = poll_until(&daemon, "a", id, ended);
        assert_eq!(done["status"], "failed", "{era}: {done}");
        let message = done["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("\"fx\"") && message.contains("stopped answering for this task"), "{era}: {done}");
        assert!(message.contains("tasks.unreachableFor"), "{era}: {done}");
        assert_eq!(done["error"]["code"], -32603, "{era}: {done}");
        assert!(done["statusMessage"].as_str().is_some_and(|m| m.contains("stopped answering")), "{era}: {done}");
    }
}

#[test]
fn a_2026_caller_answers_a_handshake_era_upstreams_task_questions_and_nobody_else_can() {
    let t = tag();
    let daemon =
        Daemon::start(&config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]));
    let task = start(&daemon, "owner", "confirm_delete", json!({"filename": "plans.txt"}));
    let id = task["taskId"].as_str().unwrap().to_owned();
    // The upstream asks during a tasks/result mcpx holds open; the caller reads the
    // question in inputRequests, as the extension has it.
    let asking = poll_until(&daemon, "owner", &id, |t| t["inputRequests"].is_object() || ended(t));
    assert_eq!(asking["status"], "input_required", "{asking}");
    let requests = asking["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{asking}");
    let (key, question) = requests.iter().next().unwrap();
    assert_eq!(question["method"], "elicitation/create", "{asking}");
    assert!(question["params"]["message"].as_str().unwrap_or_default().contains("plans.txt"), "{asking}");
    // The upstream's own task id ("task-<n>") appears nowhere.
    assert!(!asking.to_string().contains("\"task-"), "{asking}");

    // Another caller's answer is refused like one for a task that does not exist, and
    // changes nothing.
    let answer = |yes: bool| json!({key.as_str(): {"action": "accept", "content": {"confirm": yes}}});
    let intruder =
        task_request(&daemon, "intruder", "tasks/update", json!({"taskId": id, "inputResponses": answer(false)}));
    intruder.assert_error(200, -32602);
    let still = get(&daemon, "owner", &id);
    assert_eq!(still.result()["status"], "input_required", "{still}");
    assert!(still.result()["inputRequests"][key.as_str()].is_object(), "{still}");

    // The owner's answer reaches the upstream, and the task ends with it.
    let ack = task_request(&daemon, "owner", "tasks/update", json!({"taskId": id, "inputResponses": answer(true)}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");
    let done = poll_until(&daemon, "owner", &id, ended);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Deleted plans.txt", "{done}");
    assert!(done.get("inputRequests").is_none(), "{done}");
}

/// Opens a `subscriptions/listen` as `session` for `filter`, and returns the stream with
/// its acknowledgement.
fn listen(daemon: &Daemon, session: &str, filter: Value) -> (mcpx_e2e::upstreams::RawPost, Value) {
    let request = with_tasks(Modern::new("subscriptions/listen", json!({"notifications": filter}))).session(session);
    let (frame, headers) = (request.frame(), request.headers());
    let mut post = mcpx_e2e::upstreams::RawPost::send(daemon.url(), mcpx_e2e::schema::MODERN, &headers, &frame);
    assert_eq!(post.status(), 200, "{:?}", post.head);
    let ack = post.read_until(PATIENCE, |f| f["method"] == "notifications/subscriptions/acknowledged");
    mcpx_e2e::schema::spec(mcpx_e2e::schema::MODERN).assert_valid("SubscriptionsAcknowledgedNotification", &ack, "ack");
    (post, ack)
}

#[test]
fn a_listen_hears_its_callers_tasks_change_status_and_only_those() {
    let daemon = daemon_with(json!({}));
    let task = start(&daemon, "owner", "slow_compute", json!({"seconds": 1, "label": "pushed"}));
    let id = task["taskId"].as_str().unwrap().to_owned();
    let made_up = format!("{}x", &id[..id.len() - 1]);

    // Another caller asking for the owner's task is acknowledged nothing, exactly as for
    // a task that never existed.
    let (mut intruder, refused) = listen(&daemon, "intruder", json!({"taskIds": [id, made_up]}));
    assert_eq!(refused["params"]["notifications"]["taskIds"], json!([]), "{refused}");
    let (mut owner, ack) = listen(&daemon, "owner", json!({"taskIds": [id, made_up]}));
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]), "only its own task: {ack}");

    // Nobody polls: the end comes to the owner's listen, the whole task with its result.
    let pushed = owner.read_until(PATIENCE, |f| f["method"] == "notifications/tasks" && ended(&f["params"]));
    assert_eq!(pushed["params"]["taskId"], id.as_str(), "{pushed}");
    assert_eq!(pushed["params"]["status"], "completed", "{pushed}");
    assert_eq!(pushed["params"]["result"]["content"][0]["text"], "pushed: computed after 1s", "{pushed}");
    assert!(pushed["params"]["ttlMs"].is_u64(), "{pushed}");
    assert_eq!(
        pushed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]
    );
    // The intruder's listen heard nothing of it.
    let heard = intruder.try_read_until(Duration::from_secs(1), |f| f["method"] == "notifications/tasks");
    assert!(heard.is_none(), "another caller heard of the task: {heard:?}");

    // Asking for task pushes needs the extension declared.
    let undeclared = Modern::new("subscriptions/listen", json!({"notifications": {"taskIds": [id]}})).session("owner");
    undeclared.send(daemon.url()).assert_error(400, -32021);
}

#[test]
fn a_handshake_era_upstream_that_asks_a_task_question_after_question_is_held_to_the_pending_limit() {
    let t = tag();
    let mut cfg = config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]);
    cfg["limits"] = json!({"pendingQuestions": 4});
    let daemon = Daemon::start(&cfg);
    // The upstream puts twelve questions at once during the tasks/result mcpx holds open.
    let task = start(&daemon, "owner", "multi_input", json!({"count": 12}));
    let id = task["taskId"].as_str().unwrap().to_owned();
    let count = |t: &Value| t["inputRequests"].as_object().map_or(0, |r| r.len());
    let asking = poll_until(&daemon, "owner", &id, |t| count(t) >= 4 || ended(t));
    assert_eq!(count(&asking), 4, "at most limits.pendingQuestions are kept: {asking}");
    // The four kept are answered; the upstream was told no for the others, and says so.
    let answers: serde_json::Map<String, Value> = asking["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .map(|key| (key.clone(), json!({"action": "accept", "content": {"name": "Ada"}})))
        .collect();
    let ack = task_request(&daemon, "owner", "tasks/update", json!({"taskId": id, "inputResponses": answers}));
    assert_eq!(ack.result()["resultType"], "complete", "{ack}");
    let done = poll_until(&daemon, "owner", &id, ended);
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done.to_string().contains("limits.pendingQuestions"), "{done}");
    assert!(done.get("inputRequests").is_none(), "{done}");
}

#[test]
fn a_listen_hears_a_handshake_era_upstreams_own_task_status_without_waiting_for_a_poll() {
    let t = tag();
    let daemon =
        Daemon::start(&config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]));
    let arguments = json!({"seconds": 0.5, "label": "told", "notify": true, "pollInterval": 60_000});
    let task = start(&daemon, "owner", "slow_compute", arguments);
    let id = task["taskId"].as_str().unwrap().to_owned();
    let (mut owner, ack) = listen(&daemon, "owner", json!({"taskIds": [id]}));
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]), "{ack}");
    // mcpx polls no less often than every 5 s, whatever the upstream suggests (60 s
    // here): only the upstream's own notification brings the end sooner than that.
    let heard =
        owner.try_read_until(Duration::from_secs(3), |f| f["method"] == "notifications/tasks" && ended(&f["params"]));
    let pushed = heard.expect("the upstream's own status was pushed at once");
    assert_eq!(pushed["params"]["taskId"], id.as_str(), "{pushed}");
    assert_eq!(pushed["params"]["status"], "completed", "{pushed}");
    assert_eq!(pushed["params"]["result"]["content"][0]["text"], "told: computed after 0.5s", "{pushed}");
}

#[test]
fn cancelling_a_task_whose_http_upstream_is_gone_records_the_cancellation() {
    for era in ["modern", "legacy"] {
        let fake = mcpx_e2e::FakeHttp::start(&["--fixture", "conformance", "--era", era]);
        let daemon = Daemon::start(&config(&[("fx", json!({"url": fake.url}))]));
        let home = daemon.home();
        let first = start(&daemon, "a", "slow_compute", json!({"seconds": 600}));
        let first = first["taskId"].as_str().unwrap();
        let body = json!({"server": "fx", "tool": "slow_compute", "arguments": {"seconds": 600}});
        let second = home.v1_as("POST", "/v1/tasks", Some(&body), "b");
        assert_eq!(second.status, 202, "{era}: {}", second.body);
        let second: Value = serde_json::from_str(&second.body).unwrap();
        let second = second["taskId"].as_str().unwrap();
        drop(fake);

        // tasks/cancel: acknowledged, and the task ends cancelled, saying the server was
        // not told, rather than a transport error.
        let cancel = task_request(&daemon, "a", "tasks/cancel", json!({"taskId": first}));
        assert_eq!(cancel.result()["resultType"], "complete", "{era}: {cancel}");
        let got = get(&daemon, "a", first);
        assert_eq!(got.result()["status"], "cancelled", "{era}: {got}");
        let message = got.result()["statusMessage"].as_str().unwrap_or_default();
        assert!(message.contains("could not be reached"), "{era}: {got}");
        // POST /v1/tasks/{id}/cancel: the task, cancelled, the same way.
        let cancelled = home.v1_as("POST", &format!("/v1/tasks/{second}/cancel"), None, "b");
        assert_eq!(cancelled.status, 200, "{era}: {}", cancelled.body);
        let cancelled: Value = serde_json::from_str(&cancelled.body).unwrap();
        assert_eq!(cancelled["status"], "cancelled", "{era}: {cancelled}");
        assert!(cancelled["statusMessage"].as_str().is_some_and(|m| m.contains("could not be reached")), "{cancelled}");
    }
}
