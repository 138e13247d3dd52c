//! An upstream that keeps failing to start is started again with exponential backoff
//! (never a busy loop), its calls fail at once naming the last error, and `mcpx status`
//! says so; once it starts, it is served as usual.

use std::time::Duration;

use mcpx_e2e::{Daemon, Modern, config, fakemcp, poll, tag};
use serde_json::json;

#[test]
fn an_upstream_that_crashes_at_start_is_backed_off_and_shown_failing_in_status() {
    let t = tag();
    let dir = mcpx_e2e::process::TempDir::new();
    let starts = dir.path().join("starts");
    let gate = dir.path().join("healthy");
    // Counts its starts; exits at once until the gate file exists, then is fakemcp.
    let script = r#"echo start >> "$1"; [ -e "$2" ] || exit 3; shift 2; exec "$@""#;
    let mut up = fakemcp("global", &t, &[]);
    let fake = up["command"].clone();
    let mut args = vec![json!("-c"), json!(script), json!("crashy"), json!(starts), json!(gate), fake];
    args.extend(up["args"].as_array().cloned().unwrap_or_default());
    up = json!({"command": "sh", "args": args});
    let daemon = Daemon::start(&config(&[("crashy", up)]));
    let count = || std::fs::read_to_string(&starts).unwrap_or_default().lines().count();

    let calls = 20;
    let mut messages = Vec::new();
    for _ in 0..calls {
        let reply = Modern::mcpx_call("crashy", "echo", json!({})).send(daemon.url());
        messages.push(reply.assert_error(200, -32603)["message"].as_str().unwrap_or_default().to_owned());
    }
    assert!(messages[0].contains("crashy"), "{}", messages[0]);
    assert!(
        messages.iter().any(|m| m.contains("tries again in")),
        "calls during the backoff fail at once saying when mcpx tries again: {messages:#?}"
    );
    // 20 calls in a row started the server a few times at most (backoff 0.5 s, 1 s, 2 s, …).
    assert!(count() < calls / 2, "{} starts for {calls} calls: no backoff", count());

    let status = daemon.home().status();
    let failing = &status["servers"][0]["failing"];
    assert!(failing["failures"].as_u64().unwrap_or_default() >= 1, "{status}");
    assert!(failing["lastError"].as_str().unwrap_or_default().contains("crashy"), "{status}");
    let text = daemon.home().cli(&["status"]);
    assert!(text.stdout.contains("FAILING to start"), "{}", text.stdout);

    // Healthy again: after the backoff a call starts it, and status forgets the failures.
    std::fs::write(&gate, "").expect("opening the gate");
    let served = poll(Duration::from_secs(90), || {
        let reply = Modern::mcpx_call("crashy", "echo", json!({"ok": true})).send(daemon.url());
        (reply.frame().get("result").is_some()).then_some(reply)
    });
    let served = served.expect("the server was never started again after it became healthy");
    assert_eq!(served.structured(), &json!({"ok": true}));
    assert!(daemon.home().status()["servers"][0].get("failing").is_none());
}

/// A server that starts fine and then exits on its own within seconds, again and again
/// (here: each call makes it crash), is backed off like one that cannot start: its
/// restarts are spaced out, calls meanwhile fail at once saying so, and `mcpx status`
/// shows the crash loop; an instance that stays up ends it.
#[test]
fn an_upstream_that_keeps_crashing_soon_after_starting_is_backed_off_and_shown_in_status() {
    let t = tag();
    let dir = mcpx_e2e::process::TempDir::new();
    let starts = dir.path().join("starts");
    let script = r#"echo start >> "$1"; shift; exec "$@""#;
    let up = fakemcp("global", &t, &[]);
    let mut args = vec![json!("-c"), json!(script), json!("looping"), json!(starts), up["command"].clone()];
    args.extend(up["args"].as_array().cloned().unwrap_or_default());
    let daemon = Daemon::start(&config(&[("looping", json!({"command": "sh", "args": args}))]));
    let count = || std::fs::read_to_string(&starts).unwrap_or_default().lines().count();

    let calls = 12;
    let mut messages = Vec::new();
    for _ in 0..calls {
        let reply = Modern::mcpx_call("looping", "crash", json!({})).send(daemon.url());
        messages.push(reply.assert_error(200, -32603)["message"].as_str().unwrap_or_default().to_owned());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(messages[0].contains("exited (exit status: 3)"), "{}", messages[0]);
    let refused = messages
        .iter()
        .find(|m| m.contains("tries again in"))
        .unwrap_or_else(|| panic!("calls during the backoff fail at once saying when mcpx tries again: {messages:#?}"));
    assert!(
        refused.contains("after it started (exit status: 3)") && refused.contains("exited soon after starting"),
        "{refused}"
    );
    // Each start lasted one call: without the backoff every call would have started one.
    assert!(count() < calls / 2, "{} starts for {calls} calls: no backoff", count());

    let status = daemon.home().status();
    let failing = &status["servers"][0]["failing"];
    assert_eq!(failing["crashLoop"], true, "{status}");
    assert!(failing["failures"].as_u64().unwrap_or_default() >= 2, "{status}");
    let text = daemon.home().cli(&["status"]);
    assert!(text.stdout.contains("CRASHING soon after start"), "{}", text.stdout);

    // A call that does not crash it: once the backoff allows a start, it is served, and
    // once that instance has stayed up a few seconds the crash loop is over.
    let served = poll(Duration::from_secs(90), || {
        let reply = Modern::mcpx_call("looping", "echo", json!({"ok": true})).send(daemon.url());
        (reply.frame().get("result").is_some()).then_some(reply)
    });
    assert_eq!(served.expect("never served again").structured(), &json!({"ok": true}));
    let over =
        poll(Duration::from_secs(30), || daemon.home().status()["servers"][0].get("failing").is_none().then_some(()));
    assert!(over.is_some(), "still failing: {}", daemon.home().status());
}
