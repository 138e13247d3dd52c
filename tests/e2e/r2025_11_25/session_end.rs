//! A session mcpx derived from a transport ends with it, and so do its `session`-scoped
//! instances: a legacy HTTP session ended by `DELETE`, by `http.sessionIdleTimeout` or by
//! eviction, a `mcpx serve` that named no session when its client closes stdin, a CLI
//! call's process when it exits. A call in flight still finishes first. A session a caller
//! named keeps its instance under the idle rule, since anyone may name it again.
//!
//! `pool.idleTimeout` is ten minutes here: an instance that stops within seconds stopped
//! because its session ended, not because it went idle.

use std::time::Duration;

use mcpx_e2e::schema::LEGACY;
use mcpx_e2e::{Daemon, LegacySession, Modern, Serve, Whoami, alive, config, fakemcp, poll, tag};
use serde_json::{Value, json};

/// Well under `pool.idleTimeout`, with room for a loaded machine.
const PROMPTLY: Duration = Duration::from_secs(10);

/// A daemon with one `session`-scoped fakemcp, `f`, and `settings` merged in.
fn daemon(settings: Value) -> Daemon {
    let mut cfg = config(&[("f", fakemcp("session", &tag(), &[]))]);
    cfg["pool"] = json!({"idleTimeout": "10m"});
    for (key, value) in settings.as_object().into_iter().flatten() {
        cfg[key] = value.clone();
    }
    Daemon::start(&cfg)
}

fn exits_promptly(pid: u32) -> bool {
    poll(PROMPTLY, || (!alive(pid)).then_some(())).is_some()
}

fn whoami(session: &LegacySession) -> Whoami {
    Whoami::of(&session.mcpx_call("f", "whoami", json!({})))
}

/// `whoami` of `f` through a handshake-era `mcpx serve` client.
fn serve_whoami(client: &mut Serve) -> Whoami {
    let call = json!({"name": "mcpx_call", "arguments": {"server": "f", "tool": "whoami", "arguments": {}}});
    Whoami::from_structured(client.legacy_request("tools/call", call).structured())
}

#[test]
fn a_deleted_http_sessions_instance_stops_at_once() {
    let daemon = daemon(json!({}));
    let session = LegacySession::open(daemon.url());
    let instance = whoami(&session);
    assert!(alive(instance.pid));

    assert_eq!(session.delete().status, 204);
    assert!(exits_promptly(instance.pid), "the ended session's instance still runs: {}", daemon.home().status());
    assert!(daemon.home().instances("f").is_empty(), "{}", daemon.home().status());
}

#[test]
fn an_http_session_that_expires_unused_stops_its_instance() {
    let daemon = daemon(json!({"http": {"sessionIdleTimeout": "1s"}}));
    let session = LegacySession::open(daemon.url());
    let instance = whoami(&session);

    // Nothing touches the daemon meanwhile: the session ends on its own, not when the next
    // request finds it expired.
    assert!(exits_promptly(instance.pid), "the expired session's instance still runs: {}", daemon.home().status());
    let after = session.mcpx_call("f", "whoami", json!({}));
    assert_eq!(after.status, 404, "the session itself has ended:\n{after}");
}

#[test]
fn an_http_session_evicted_to_make_room_stops_its_instance() {
    let daemon = daemon(json!({"http": {"maxSessions": 1}}));
    let first = LegacySession::open(daemon.url());
    let evicted = whoami(&first);

    let second = LegacySession::open(daemon.url());
    assert!(exits_promptly(evicted.pid), "the evicted session's instance still runs: {}", daemon.home().status());
    assert_ne!(whoami(&second).instance, evicted.instance);
}

#[test]
fn a_call_in_flight_finishes_before_its_ended_sessions_instance_stops() {
    let daemon = daemon(json!({}));
    let session = LegacySession::open(daemon.url());
    let instance = whoami(&session);

    std::thread::scope(|scope| {
        let slow = scope.spawn(|| session.mcpx_call("f", "slow", json!({"ms": 3000})));
        assert!(daemon.home().wait_in_use("f", 1, PROMPTLY), "the slow call never started");
        assert_eq!(session.delete().status, 204);
        assert!(alive(instance.pid), "the instance stopped under a call in flight");

        let answered = slow.join().expect("the slow call's thread");
        assert_eq!(answered.structured(), &json!({"sleptMs": 3000}), "{answered}");
    });
    assert!(exits_promptly(instance.pid), "the instance outlived its last call: {}", daemon.home().status());
}

/// Both kinds of session in one daemon: the derived one's instance stops, and only then
/// is the named one's checked, which is still there and serves the next call naming it.
#[test]
fn a_named_sessions_instance_outlives_the_http_session_that_named_it() {
    let daemon = daemon(json!({}));
    let session = LegacySession::open(daemon.url());
    let derived = whoami(&session);
    let named_call = json!({
        "name": "mcpx_call",
        "arguments": {"server": "f", "tool": "whoami", "arguments": {}},
        "_meta": {"dev.mcpx/session": "kept"}
    });
    let named = Whoami::of(&session.request("tools/call", named_call));
    assert_ne!(named.instance, derived.instance);

    assert_eq!(session.delete().status, 204);
    assert!(exits_promptly(derived.pid), "the ended session's instance still runs: {}", daemon.home().status());
    assert!(alive(named.pid), "a named session's instance stopped with the HTTP session that named it");
    let again = Modern::mcpx_call("f", "whoami", json!({})).session("kept").send(daemon.url());
    assert_eq!(Whoami::of(&again).instance, named.instance, "the named session's instance was not reused");
}

#[test]
fn a_serve_clients_instance_stops_when_it_closes_stdin() {
    let daemon = daemon(json!({}));
    let mut client = daemon.home().serve().start();
    client.initialize(LEGACY);
    let instance = serve_whoami(&mut client);

    client.close_stdin();
    assert!(exits_promptly(instance.pid), "the closed client's instance still runs: {}", daemon.home().status());
}

#[test]
fn a_serve_client_named_by_session_keeps_its_instance_when_it_closes() {
    let daemon = daemon(json!({}));
    let home = daemon.home();
    let mut unnamed = home.serve().start();
    unnamed.initialize(LEGACY);
    let derived = serve_whoami(&mut unnamed);
    let mut named = home.serve().session("kept").start();
    named.initialize(LEGACY);
    let kept = serve_whoami(&mut named);

    unnamed.close_stdin();
    named.close_stdin();
    assert!(named.wait(PROMPTLY).is_some(), "the named client did not exit");
    assert!(exits_promptly(derived.pid), "the closed client's instance still runs: {}", home.status());
    assert!(alive(kept.pid), "the named session's instance stopped with its client");

    let mut next = home.serve().session("kept").start();
    next.initialize(LEGACY);
    assert_eq!(serve_whoami(&mut next).instance, kept.instance, "the named session's instance was not reused");
}

/// `mcpx call` without `--session` is a session of its own process, which ends when it
/// exits.
#[test]
fn a_cli_calls_instance_stops_when_its_process_exits() {
    let daemon = daemon(json!({}));
    let home = daemon.home();
    home.cli(&["call", "f.whoami"]).assert_code(0);
    let instances = home.instances("f");
    assert_eq!(instances.len(), 1, "{}", home.status());
    assert!(instances[0]["key"].as_str().is_some_and(|k| k.starts_with("process:")), "{instances:?}");
    let pid = instances[0]["pid"].as_u64().expect("a running instance has a pid") as u32;

    assert!(exits_promptly(pid), "the exited call's instance still runs: {}", home.status());
}
