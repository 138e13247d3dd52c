//! Every limit is a setting with a documented default (README, Configuration), and each
//! one, when hit, gives the documented error while other callers are served. The body
//! limit (`http.maxBodyBytes`) is in transport.rs, the stdio line limit
//! (`limits.maxLineBytes`) in stdio_lines.rs, the call timeout (`timeouts.request`) in
//! real_upstreams/faults.rs.

use std::time::Duration;

use mcpx_e2e::{Daemon, Modern, Reply, Whoami, alive, config, fakemcp, poll, tag};
use serde_json::{Value, json};

fn with(servers: &[(&str, Value)], settings: Value) -> Value {
    let mut cfg = config(servers);
    for (key, value) in settings.as_object().into_iter().flatten() {
        cfg[key] = value.clone();
    }
    cfg
}

/// The message of the JSON-RPC error a call got.
#[track_caller]
fn error_message(reply: &Reply) -> String {
    reply.assert_error(200, -32603)["message"].as_str().unwrap_or_default().to_owned()
}

/// Holds a slow call in flight on `server` for `session` (the `in_use`th call in use on
/// that server), until the returned thread ends.
fn busy(daemon: &Daemon, server: &str, session: &str, in_use: u64) -> std::thread::JoinHandle<Reply> {
    let (url, owned_server, session) = (daemon.url().to_owned(), server.to_owned(), session.to_owned());
    let call = std::thread::spawn(move || {
        Modern::mcpx_call(&owned_server, "slow", json!({"ms": 3000})).session(&session).send(&url)
    });
    assert!(daemon.home().wait_in_use(server, in_use, Duration::from_secs(20)), "the slow call never started");
    call
}

#[test]
fn at_pool_max_instances_per_server_an_idle_instance_makes_room_and_only_busy_ones_refuse() {
    let daemon =
        Daemon::start(&with(&[("up", fakemcp("session", &tag(), &[]))], json!({"pool": {"maxInstancesPerServer": 2}})));
    let call = |session: &str| Modern::mcpx_call("up", "whoami", json!({})).session(session).send(daemon.url());
    let a = Whoami::of(&call("a"));
    Whoami::of(&call("b"));
    // A third session gets an instance: the least recently used idle one (a's) makes room.
    Whoami::of(&call("c"));
    let stopped = poll(Duration::from_secs(10), || (!alive(a.pid)).then_some(()));
    assert!(stopped.is_some(), "a's idle instance was not stopped: {}", daemon.home().status());
    assert_eq!(daemon.home().instance_keys("up"), ["session:b", "session:c"]);

    // With every slot busy, the next session is refused, naming the setting.
    let (slow_b, slow_c) = (busy(&daemon, "up", "b", 1), busy(&daemon, "up", "c", 2));
    let refused = error_message(&call("d"));
    assert!(refused.contains("pool.maxInstancesPerServer"), "{refused}");
    for slow in [slow_b, slow_c] {
        assert_eq!(slow.join().expect("the slow call").structured()["sleptMs"], 3000);
    }
}

#[test]
fn at_pool_max_instances_an_idle_instance_of_any_server_makes_room_and_only_busy_ones_refuse() {
    let t = tag();
    let servers =
        [("a", fakemcp("global", &t, &[])), ("b", fakemcp("global", &t, &[])), ("c", fakemcp("global", &t, &[]))];
    let daemon = Daemon::start(&with(&servers, json!({"pool": {"maxInstances": 2}})));
    let call = |server: &str| Modern::mcpx_call(server, "whoami", json!({})).send(daemon.url());
    let a = Whoami::of(&call("a"));
    Whoami::of(&call("b"));
    Whoami::of(&call("c"));
    let stopped = poll(Duration::from_secs(10), || (!alive(a.pid)).then_some(()));
    assert!(stopped.is_some(), "a's idle instance was not stopped: {}", daemon.home().status());

    let url = daemon.url().to_owned();
    let slow = |server: &'static str| {
        let url = url.clone();
        std::thread::spawn(move || Modern::mcpx_call(server, "slow", json!({"ms": 3000})).send(&url))
    };
    let (slow_b, slow_c) = (slow("b"), slow("c"));
    let both_busy = poll(Duration::from_secs(20), || {
        let status = daemon.home().status();
        let busy = status["instances"].as_array()?.iter().filter(|i| i["inUse"].as_u64() > Some(0)).count();
        (busy == 2).then_some(())
    });
    assert!(both_busy.is_some(), "the slow calls never started: {}", daemon.home().status());
    let refused = error_message(&call("a"));
    assert!(refused.contains("pool.maxInstances"), "{refused}");
    for slow in [slow_b, slow_c] {
        assert_eq!(slow.join().expect("the slow call").structured()["sleptMs"], 3000);
    }
}

#[test]
fn a_client_over_limits_max_calls_per_client_is_refused_and_other_clients_are_served() {
    let daemon =
        Daemon::start(&with(&[("up", fakemcp("global", &tag(), &[]))], json!({"limits": {"maxCallsPerClient": 1}})));
    let url = daemon.url().to_owned();
    let slow =
        std::thread::spawn(move || Modern::mcpx_call("up", "slow", json!({"ms": 2000})).session("busy").send(&url));
    assert!(daemon.home().wait_in_use("up", 1, Duration::from_secs(20)), "the slow call never started");
    let refused = error_message(&Modern::mcpx_call("up", "echo", json!({})).session("busy").send(daemon.url()));
    assert!(refused.contains("limits.maxCallsPerClient"), "{refused}");
    let other = Modern::mcpx_call("up", "echo", json!({"k": 1})).session("calm").send(daemon.url());
    assert_eq!(other.structured(), &json!({"k": 1}));
    assert_eq!(slow.join().expect("the slow call").structured()["sleptMs"], 2000);
    // Its call done, the busy client is served again.
    let again = Modern::mcpx_call("up", "echo", json!({"k": 2})).session("busy").send(daemon.url());
    assert_eq!(again.structured(), &json!({"k": 2}));
}

#[test]
fn an_instance_unused_for_pool_idle_timeout_is_stopped() {
    let daemon =
        Daemon::start(&with(&[("up", fakemcp("global", &tag(), &[]))], json!({"pool": {"idleTimeout": "1s"}})));
    let first = Whoami::of(&Modern::mcpx_call("up", "whoami", json!({})).send(daemon.url()));
    let gone = poll(Duration::from_secs(20), || daemon.home().instances("up").is_empty().then_some(()));
    assert!(gone.is_some(), "the idle instance was never stopped: {}", daemon.home().status());
    let exited = poll(Duration::from_secs(10), || (!alive(first.pid)).then_some(()));
    assert!(exited.is_some(), "pid {} outlived its instance", first.pid);
    let second = Whoami::of(&Modern::mcpx_call("up", "whoami", json!({})).send(daemon.url()));
    assert_ne!(second.instance, first.instance, "a fresh instance serves the next call");
    assert!(alive(second.pid));
}

/// After a large reap the daemon gives the freed memory back to the system, and each
/// runtime worker the chunks its allocator cache kept (which pin pages a trim cannot
/// release): the bench's sessions scenario measures the effect, this checks the wiring.
#[test]
fn after_a_large_reap_the_runtime_workers_give_their_cached_memory_back() {
    // The reaper gives memory back once at least this many instances have stopped (memory.rs).
    const SESSIONS: usize = 64;
    let daemon = Daemon::start(&with(
        &[("up", fakemcp("session", &tag(), &[]))],
        json!({"pool": {"idleTimeout": "1s", "maxInstancesPerServer": SESSIONS}}),
    ));
    for i in 0..SESSIONS {
        let reply = Modern::mcpx_call("up", "echo", json!({"i": i})).session(&format!("reap-{i}")).send(daemon.url());
        assert_eq!(reply.structured(), &json!({"i": i}));
    }
    // Each of the daemon's workers collects, up to two: tokio is sure to wake two (memory.rs).
    let status = daemon.home().status();
    let workers = status["workers"].as_u64().unwrap_or_else(|| panic!("/v1/status says no workers: {status}")).min(2);
    let workers = workers as usize;
    let emptied = |log: &str| log.matches("returned a worker's freed memory to the system").count();
    let given_back = poll(Duration::from_secs(30), || {
        let log = daemon.stderr();
        (log.contains("returned freed memory to the system") && emptied(&log) >= workers).then_some(())
    });
    assert!(
        given_back.is_some(),
        "after the reap, {} of {workers} workers gave their cached memory back; status {}\n{}",
        emptied(&daemon.stderr()),
        daemon.home().status(),
        daemon.stderr()
    );
    assert!(daemon.home().instances("up").is_empty(), "{}", daemon.home().status());
}

/// An upstream that starts but never answers (neither `server/discover` nor `initialize`)
/// fails the call once `timeouts.probe` and then `timeouts.handshake` have passed.
#[test]
fn an_upstream_that_never_answers_fails_the_call_at_the_start_timeouts() {
    let t = tag();
    let silent = json!({"command": "sh", "args": ["-c", "exec sleep 120", "silent", &t]});
    let daemon = Daemon::start(&with(
        &[("silent", silent), ("up", fakemcp("global", &t, &[]))],
        json!({"timeouts": {"probe": "300ms", "handshake": "700ms"}}),
    ));
    let refused = error_message(&Modern::mcpx_call("silent", "x", json!({})).send(daemon.url()));
    assert!(refused.contains("silent") && refused.contains("initialize"), "{refused}");
    let other = Modern::mcpx_call("up", "echo", json!({"k": 1})).send(daemon.url());
    assert_eq!(other.structured(), &json!({"k": 1}));
}

/// The daemon's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the daemon's /proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number of KiB")
}

/// A caller that stops reading its event stream while an upstream floods it with progress
/// holds the daemon to `limits.maxBufferedNotifications` of them: the oldest are dropped,
/// memory stays flat, and the response itself still arrives when the caller reads on.
#[test]
fn a_caller_that_does_not_read_its_stream_costs_at_most_limits_max_buffered_notifications() {
    use std::io::{BufRead, BufReader, Write};
    const FLOOD: u64 = 200_000;
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    // Started, so the baseline includes the instance and its connection.
    Whoami::of(&Modern::mcpx_call("up", "whoami", json!({})).send(daemon.url()));
    let before = rss_kib(daemon.pid());

    let request = Modern::mcpx_call("up", "flood", json!({"count": FLOOD})).meta("progressToken", json!("silent"));
    let body = request.frame().to_string();
    let address = daemon.url().trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let mut socket = std::net::TcpStream::connect(&address).expect("connect");
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in request.headers() {
        if !name.eq_ignore_ascii_case("content-type") {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
    }
    socket.write_all(format!("{head}\r\n{body}").as_bytes()).expect("send the request");

    // The caller reads nothing while the upstream sends every notification. fakemcp
    // floods from its request loop, so a call it answers after the flood started is
    // answered after the last notification went through the daemon.
    assert!(daemon.home().wait_in_use("up", 1, Duration::from_secs(20)), "the flood never started");
    let after = Modern::mcpx_call("up", "echo", json!({"after": "flood"})).send(daemon.url());
    assert_eq!(after.structured(), &json!({"after": "flood"}));
    let grown = rss_kib(daemon.pid()).saturating_sub(before);
    assert!(grown < 64 * 1024, "the daemon grew by {grown} KiB holding notifications for a caller that does not read");

    // Reading on, the caller gets what was kept and then its response, whole.
    let mut progress = 0u64;
    let mut response = None;
    for line in BufReader::new(socket).lines() {
        let line = line.expect("the stream reads");
        let Some(data) = line.strip_prefix("data: ") else { continue };
        let frame: Value = serde_json::from_str(data).expect("an event is JSON");
        if frame.get("id").is_some() {
            response = Some(frame);
            break;
        }
        progress += 1;
    }
    let response = response.expect("the response after the notifications");
    mcpx_e2e::schema::assert_frame(mcpx_e2e::schema::MODERN, Some("tools/call"), &response);
    assert_eq!(response["result"]["structuredContent"]["sent"], FLOOD, "{response}");
    assert!(progress > 0 && progress < FLOOD, "{progress} of {FLOOD} notifications were kept");
}
