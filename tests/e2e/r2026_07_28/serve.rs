//! `mcpx serve`: the stdio front end agent hosts launch. Every serve process relays to
//! the one daemon for its state dir, which owns every upstream instance, and carries the
//! identity of its own process (session, cwd, pid).

use std::time::{Duration, Instant};

use mcpx_e2e::client::next_id;
use mcpx_e2e::serve::ANSWER_TIMEOUT;
use mcpx_e2e::{
    Daemon, Home, Modern, Whoami, alive, config, fakemcp, processes_with, tag, wait_for_exit, wait_until_gone,
};
use serde_json::json;

/// What `mcpx serve` says to the calls in flight when the daemon goes away.
const DAEMON_WENT_AWAY: &str = "daemon went away";

#[test]
fn two_serve_processes_with_their_own_sessions_get_their_own_session_instances_and_share_the_global_one() {
    let tag = tag();
    let daemon =
        Daemon::start(&config(&[("browser", fakemcp("session", &tag, &[])), ("shared", fakemcp("global", &tag, &[]))]));
    let home = daemon.home();
    let mut alpha = home.serve().session("alpha").start();
    let mut beta = home.serve().session("beta").start();

    let alpha_browser = alpha.whoami("browser");
    let beta_browser = beta.whoami("browser");
    let alpha_again = alpha.whoami("browser");
    assert_ne!(alpha_browser.instance, beta_browser.instance, "two sessions shared a session-scoped instance");
    assert_eq!(alpha_again.instance, alpha_browser.instance, "one session got two session-scoped instances");
    assert_eq!(alpha_again.calls, 2, "{alpha_again:?}");

    let alpha_shared = alpha.whoami("shared");
    let beta_shared = beta.whoami("shared");
    assert_eq!(
        alpha_shared.instance, beta_shared.instance,
        "the global server must have one instance for every client of the daemon"
    );
    assert_eq!(beta_shared.calls, 2, "{beta_shared:?}");

    assert_eq!(home.instance_keys("browser"), ["session:alpha", "session:beta"]);
    assert_eq!(home.instance_keys("shared"), ["global"]);
    assert_eq!(processes_with(&tag).len(), 3, "two browsers and one shared instance");
}

/// The same session named over stdio (the process's `MCPX_SESSION_ID`, or a `_meta` key
/// on the request, which wins over the process) and over HTTP (`_meta` key) is one session.
#[test]
fn a_stdio_client_and_an_http_client_naming_the_same_session_reach_the_same_instance() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("browser", fakemcp("session", &tag, &[]))]));
    let home = daemon.home();
    let http_whoami = |session: &str| {
        Whoami::of(&Modern::mcpx_call("browser", "whoami", json!({})).session(session).send(daemon.url()))
    };

    let mut alpha = home.serve().session("alpha").start();
    let over_stdio = alpha.whoami("browser");
    let over_http = http_whoami("alpha");
    assert_eq!(
        over_http.instance, over_stdio.instance,
        "an HTTP caller naming session alpha must reach serve's alpha instance"
    );
    assert_eq!(over_http.calls, 2);

    let mut beta = home.serve().session("beta").start();
    let named = beta.request(&Modern::mcpx_call("browser", "whoami", json!({})).session("gamma").frame()).whoami();
    let unnamed = beta.whoami("browser");
    assert_ne!(named.instance, unnamed.instance, "a _meta session key must win over the serve process's own session");
    let gamma_over_http = http_whoami("gamma");
    assert_eq!(
        gamma_over_http.instance, named.instance,
        "stdio and HTTP callers naming gamma in _meta must share its instance"
    );
    assert_eq!(home.instance_keys("browser"), ["session:alpha", "session:beta", "session:gamma"]);
}

/// Without `MCPX_SESSION_ID` the session is the serve process itself (a kind of session no
/// label can name, keyed `process:<pid>`); `--session` names it.
#[test]
fn a_serve_process_without_a_session_name_is_its_own_session_and_the_flag_names_one() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("browser", fakemcp("session", &tag, &[]))]));
    let home = daemon.home();
    let mut anonymous = home.serve().start();
    let mut flagged = home.serve().arg("--session").arg("from-flag").start();
    anonymous.whoami("browser");
    flagged.whoami("browser");
    let mut expected = vec![format!("process:{}", anonymous.pid()), "session:from-flag".to_owned()];
    expected.sort();
    assert_eq!(home.instance_keys("browser"), expected);
}

#[test]
fn a_pid_scoped_instance_stops_when_its_serve_process_exits() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("repl", fakemcp("pid", &tag, &[]))]));
    let home = daemon.home();
    let mut first = home.serve().start();
    let mut second = home.serve().start();
    let first_repl = first.whoami("repl");
    let second_repl = second.whoami("repl");
    assert_ne!(first_repl.instance, second_repl.instance);
    assert_eq!(first.whoami("repl").instance, first_repl.instance);
    let mut keys = vec![format!("pid:{}", first.pid()), format!("pid:{}", second.pid())];
    keys.sort();
    assert_eq!(home.instance_keys("repl"), keys);

    // A host that closes stdin: serve exits, and its instance goes with it.
    first.close_stdin();
    assert!(first.wait(Duration::from_secs(10)).is_some(), "mcpx serve did not exit on stdin EOF");
    assert!(
        wait_for_exit(first_repl.pid, Duration::from_secs(3)),
        "the pid-scoped instance {} outlived its process by 3 s",
        first_repl.pid
    );
    assert!(alive(second_repl.pid), "the other process's instance must stay");

    // A host that dies: the same.
    second.kill();
    assert!(
        wait_for_exit(second_repl.pid, Duration::from_secs(3)),
        "the pid-scoped instance {} outlived its SIGKILLed process by 3 s",
        second_repl.pid
    );
    assert!(home.instance_keys("repl").is_empty());
}

/// A serve process that dies with a call in flight: the daemon lets the call go (it is no
/// longer in use), the instance stays for others, and the next client is served.
#[test]
fn a_serve_process_killed_mid_call_releases_the_call_and_the_next_client_is_served() {
    let tag = tag();
    let mut daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let before = {
        let home = daemon.home();
        let mut doomed = home.serve().start();
        let before = doomed.whoami("shared");
        doomed.send(&Modern::mcpx_call("shared", "slow", json!({"ms": 60_000})).frame());
        assert!(
            home.wait_in_use("shared", 1, Duration::from_secs(10)),
            "the slow call never showed as in use: {}",
            home.status()
        );
        doomed.kill();
        assert!(
            home.wait_in_use("shared", 0, Duration::from_secs(6)),
            "the dead client's call still holds the instance: {}",
            home.status()
        );

        let mut next = home.serve().start();
        let started = Instant::now();
        let after = next.whoami("shared");
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(after.instance, before.instance, "the global instance is the daemon's, not the dead client's");
        before
    };
    daemon.stop();
    assert!(
        wait_until_gone(&tag, Duration::from_secs(2)).is_empty(),
        "upstreams outlived the daemon: {:?} (the shared one was {})",
        processes_with(&tag),
        before.pid
    );
}

/// The daemon SIGKILLed with a call in flight: the call fails at once with a JSON-RPC
/// error, the daemon's upstreams do not outlive it, and the next request starts a new
/// daemon (serve passes its `--config` on) and is answered.
#[test]
fn a_daemon_killed_mid_call_fails_the_call_and_the_next_call_starts_a_new_daemon() {
    let tag = tag();
    let mut daemon =
        Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[])), ("browser", fakemcp("session", &tag, &[]))]));
    let old_pid = daemon.pid();
    let mut client = daemon.home().serve().session("s").start();
    let before = client.whoami("shared");
    client.whoami("browser");
    let slow = Modern::mcpx_call("shared", "slow", json!({"ms": 60_000})).frame();
    client.send(&slow);
    assert!(daemon.home().wait_in_use("shared", 1, Duration::from_secs(10)));

    daemon.kill();
    let started = Instant::now();
    let failed = client.answer(&slow["id"], Duration::from_secs(10));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the in-flight call must fail when the daemon goes, not after a timeout"
    );
    assert_eq!(failed.error()["code"], -32603, "{failed}");
    assert!(failed.error()["message"].as_str().is_some_and(|m| m.contains(DAEMON_WENT_AWAY)), "{failed}");
    let orphans = wait_until_gone(&tag, Duration::from_secs(3));
    assert!(orphans.is_empty(), "upstreams of the SIGKILLed daemon {old_pid} are still running: {orphans:?}");

    let after = client.whoami("shared");
    assert_ne!(after.instance, before.instance);
    let home = daemon.home();
    let daemons = home.daemons();
    assert_eq!(daemons.len(), 1, "expected one new daemon: {daemons:?}");
    assert_ne!(daemons[0], old_pid);
    assert_eq!(home.record().expect("daemon.json")["pid"], daemons[0]);
    assert_eq!(home.instance_keys("shared"), ["global"], "the new daemon runs the config serve passed on");

    home.stop_daemons();
    assert!(
        wait_until_gone(&tag, Duration::from_secs(3)).is_empty(),
        "upstreams outlived the on-demand daemon: {:?}",
        processes_with(&tag)
    );
}

/// A daemon stopped and started again: the call in flight fails, and the next request on
/// the same serve process reaches the new daemon.
#[test]
fn after_a_daemon_restart_the_call_in_flight_fails_and_the_next_one_reaches_the_new_daemon() {
    let tag = tag();
    let mut daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let mut client = daemon.home().serve().start();
    let before = client.whoami("shared");
    let slow = Modern::mcpx_call("shared", "slow", json!({"ms": 60_000})).frame();
    client.send(&slow);
    assert!(daemon.home().wait_in_use("shared", 1, Duration::from_secs(10)));

    let status = daemon.stop();
    assert!(status.success(), "{status}");
    let failed = client.answer(&slow["id"], Duration::from_secs(10));
    assert!(failed.frame.get("error").is_some(), "{failed}");

    daemon.restart();
    let after = client.whoami("shared");
    assert_ne!(after.instance, before.instance);
    assert_eq!(after.calls, 1);
    assert_eq!(daemon.home().status()["pid"], daemon.pid(), "the call must reach the restarted daemon");
    assert_eq!(daemon.home().daemons(), [daemon.pid()]);
}

#[test]
fn a_second_daemon_for_the_same_state_dir_refuses_and_names_the_running_one() {
    let daemon = Daemon::start(&config(&[]));
    let home = daemon.home();
    let config_path = home.config_path().to_str().unwrap().to_owned();
    let second = home.cli(&["daemon", "--config", &config_path, "--port", "0"]);
    second.assert_code(1);
    let said = &second.stderr;
    assert!(said.contains("a daemon already runs"), "{second}");
    assert!(said.contains(home.state_dir().to_str().unwrap()), "it must name the state dir: {second}");
    assert!(said.contains(&format!("pid {}", daemon.pid())), "it must name the running daemon's pid: {second}");
    assert!(said.contains(daemon.url()), "it must name the running daemon's URL: {second}");

    assert_eq!(home.daemons(), [daemon.pid()]);
    assert_eq!(home.record().expect("daemon.json")["pid"], daemon.pid());
    assert_eq!(home.status()["pid"], daemon.pid(), "the first daemon still serves the socket");
    mcpx_e2e::assert_serving(daemon.url());
}

/// Waits until the daemons that lost the race for the state dir's lock have exited (each
/// client that found none may have started one) and returns the one left.
#[track_caller]
fn one_daemon_remains(home: &Home) -> u32 {
    let settled = mcpx_e2e::poll(Duration::from_secs(10), || {
        let daemons = home.daemons();
        (daemons.len() == 1).then(|| daemons[0])
    });
    settled.unwrap_or_else(|| panic!("expected exactly one daemon, found {:?}", home.daemons()))
}

/// Six hosts start `mcpx serve` at once and each sends its first request with no daemon
/// running: each may try to start one, exactly one comes up, and all six are served by it.
#[test]
fn serve_processes_started_at_once_without_a_daemon_bring_up_exactly_one() {
    let tag = tag();
    let home = Home::without_state_dir(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let mut clients: Vec<_> = (0..6).map(|_| home.serve().start()).collect();
    let requests: Vec<_> = clients
        .iter_mut()
        .map(|client| {
            let frame = Modern::mcpx_call("shared", "whoami", json!({})).frame();
            client.send(&frame);
            frame
        })
        .collect();
    let answers: Vec<Whoami> = clients
        .iter_mut()
        .zip(&requests)
        .map(|(client, frame)| client.answer(&frame["id"], ANSWER_TIMEOUT).whoami())
        .collect();
    let survivor = one_daemon_remains(&home);
    assert_eq!(home.record().expect("daemon.json")["pid"], survivor);
    assert_eq!(home.status()["pid"], survivor, "the survivor owns the socket");
    assert!(
        answers.iter().all(|a| a.instance == answers[0].instance),
        "all clients must reach the one global instance of the one daemon: {answers:?}"
    );
    let mut counts: Vec<u64> = answers.iter().map(|a| a.calls).collect();
    counts.sort_unstable();
    assert_eq!(counts, [1, 2, 3, 4, 5, 6]);
    assert_eq!(processes_with(&tag).len(), 1);
}

/// The same race from the shell: six `mcpx call` commands at once.
#[test]
fn cli_calls_started_at_once_without_a_daemon_bring_up_exactly_one() {
    let tag = tag();
    let home = Home::without_state_dir(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let config_path = home.config_path().to_str().unwrap().to_owned();
    let runs: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let (home, config_path) = (&home, &config_path);
                scope.spawn(move || home.cli(&["call", "shared.whoami", "--json", "--config", config_path]))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let instances: Vec<String> = runs
        .iter()
        .map(|run| {
            run.assert_code(0);
            run.json()["structuredContent"]["instance"]
                .as_str()
                .unwrap_or_else(|| panic!("no whoami instance:\n{run}"))
                .to_owned()
        })
        .collect();
    let survivor = one_daemon_remains(&home);
    assert_eq!(home.status()["pid"], survivor, "the survivor owns the socket");
    assert!(
        instances.iter().all(|i| *i == instances[0]),
        "every call must reach the one daemon's global instance: {instances:?}"
    );
}

/// A request on the stream gets its answer even when the client closes stdin right after
/// writing it: serve half-closes and delivers what is still owed.
#[test]
fn serve_answers_a_request_written_just_before_stdin_closes() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let mut client = daemon.home().serve().start();
    let frame = Modern::mcpx_call("shared", "slow", json!({"ms": 300})).frame();
    client.send(&frame);
    client.close_stdin();
    let answer = client.answer(&frame["id"], Duration::from_secs(10));
    assert_eq!(answer.structured()["sleptMs"], 300, "{answer}");
    assert!(
        client.wait(Duration::from_secs(5)).is_some_and(|s| s.success()),
        "serve must exit 0 once it delivered what it owed"
    );
}

/// Interleaved requests on one stdio stream are answered as they finish, not in order.
#[test]
fn serve_answers_interleaved_requests_as_they_finish() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let mut client = daemon.home().serve().start();
    let slow = Modern::mcpx_call("shared", "slow", json!({"ms": 1500})).frame();
    let quick = Modern::mcpx_call("shared", "echo", json!({"n": next_id()})).frame();
    client.send(&slow);
    client.send(&quick);
    let first = client.next_frame(Duration::from_secs(10)).expect("an answer");
    assert_eq!(first["id"], quick["id"], "the quick call must not wait behind the slow one: {first}");
    assert_eq!(first["result"]["structuredContent"], quick["params"]["arguments"]["arguments"]);
    let second = client.answer(&slow["id"], Duration::from_secs(10));
    assert_eq!(second.structured()["sleptMs"], 1500);
}

/// The Python SDK's `Client` in `auto` mode launches `mcpx serve` as its stdio server
/// (against a running daemon), settles on 2026-07-28 and calls an upstream through
/// `mcpx_call`.
#[test]
fn python_sdk_client_in_auto_mode_launches_mcpx_serve_and_calls_an_upstream() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let home = daemon.home();
    let command = format!("{} serve", mcpx_e2e::paths::mcpx().display());
    let arguments = json!({"server": "shared", "tool": "echo", "arguments": {"from": "python auto"}});
    let out = mcpx_e2e::python::sdk_stdio_client(
        &command,
        &[("MCPX_STATE_DIR", home.state_dir().as_os_str())],
        "auto",
        "mcpx_call",
        &arguments,
    );
    assert_eq!(out["era"], "modern", "{out}");
    assert_eq!(out["protocolVersion"], "2026-07-28", "{out}");
    assert_eq!(out["result"]["isError"], false, "{out}");
    assert_eq!(out["result"]["structuredContent"], json!({"from": "python auto"}), "{out}");
    assert!(out["tools"].as_array().is_some_and(|t| t.contains(&json!("mcpx_call"))), "{out}");
    assert_eq!(home.daemons(), [daemon.pid()], "serve must use the running daemon");
    assert_eq!(home.instance_keys("shared"), ["global"]);
}

/// `--no-daemon`: an in-process gateway for this one client. No daemon is started, the
/// client's identity still picks instances, and its upstreams end with it.
#[test]
fn serve_without_a_daemon_runs_its_own_gateway_and_its_upstreams_end_with_it() {
    let tag = tag();
    let home = Home::without_state_dir(&config(&[
        ("browser", fakemcp("session", &tag, &[])),
        ("dir", fakemcp("cwd", &tag, &[])),
    ]));
    let workdir = mcpx_e2e::process::TempDir::new();
    let cwd = workdir.path().canonicalize().unwrap();
    let mut client = home.serve().arg("--no-daemon").session("solo").cwd(&cwd).start();
    let first = client.whoami("browser");
    assert_eq!(client.whoami("browser").instance, first.instance);
    let dir = client.whoami("dir");
    assert_eq!(dir.cwd.as_deref(), cwd.to_str(), "a cwd-scoped server starts in the client's cwd");
    let meta = client.call("browser", "meta", json!({}));
    assert_eq!(meta.structured()["meta"]["dev.mcpx/invocation"]["sessionId"], "solo", "{meta}");
    assert!(home.daemons().is_empty(), "--no-daemon must not start a daemon");
    assert!(!home.socket().exists());

    client.close_stdin();
    assert!(
        client.wait(Duration::from_secs(10)).is_some_and(|s| s.success()),
        "serve --no-daemon must exit 0 on stdin EOF"
    );
    assert!(
        wait_until_gone(&tag, Duration::from_secs(3)).is_empty(),
        "the in-process gateway's upstreams outlived it: {:?}",
        processes_with(&tag)
    );
}

/// A daemon that died without cleaning up leaves its socket and record behind: clients
/// see that nobody answers there, and the next daemon takes the state dir over.
#[test]
fn a_stale_socket_of_a_killed_daemon_is_recognised_and_replaced() {
    let tag = tag();
    let mut daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let old_pid = daemon.pid();
    daemon.kill();
    let home = daemon.home();
    assert!(home.socket().exists(), "SIGKILL leaves the socket file behind");

    let status = home.cli(&["status", "--json"]);
    status.assert_code(0);
    assert_eq!(status.json()["running"], false, "a stale socket is not a daemon:\n{status}");
    assert!(home.daemons().is_empty(), "status must not start a daemon");

    let config_path = home.config_path().to_str().unwrap().to_owned();
    let call = home.cli(&["call", "shared.whoami", "--config", &config_path]);
    call.assert_code(0);
    let survivor = one_daemon_remains(home);
    assert_ne!(survivor, old_pid);
    assert_eq!(home.record().expect("daemon.json")["pid"], survivor);
    assert_eq!(home.status()["pid"], survivor);
}
