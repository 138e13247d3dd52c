//! The standalone stream of a handshake-era HTTP session (GET with `Mcp-Session-Id`): the
//! list changes of the upstream instances the session reaches arrive there, outside any
//! request.

use std::time::Duration;

use mcpx_e2e::client::LegacySession;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use mcpx_e2e::schema;
use mcpx_e2e::upstreams::everything;
use serde_json::{Value, json};

#[test]
fn a_sessions_standalone_stream_carries_an_upstreams_list_changes() {
    let t = tag();
    let mut cfg = config(&[("f", fakemcp("session", &t, &["--era", "legacy"]))]);
    cfg["expose"] = json!(["f"]);
    let daemon = Daemon::start(&cfg);
    let session = LegacySession::open(daemon.url());

    let arrived = session.standalone_events();

    // The upstream announces a change while serving this session's call.
    let reply = session.mcpx_call("f", "changed", json!({}));
    assert_eq!(reply.structured()["announced"], "notifications/tools/list_changed");
    let change = arrived.recv_timeout(Duration::from_secs(10)).expect("the change reached the standalone stream");
    assert_eq!(change["method"], "notifications/tools/list_changed", "{change}");
    schema::spec(schema::LEGACY).assert_valid(
        "ToolListChangedNotification",
        &change,
        "a notification on the standalone stream",
    );
}

/// Clients open the standalone stream as they connect, unasked: it must neither start the
/// session's instances nor keep them from being reaped. It hears an instance from the
/// moment a call of the session leases it, and again after a reap and a fresh start.
#[test]
fn a_standalone_stream_starts_no_instance_and_keeps_none_from_being_reaped() {
    let t = tag();
    let mut cfg = config(&[("f", fakemcp("session", &t, &["--era", "legacy"]))]);
    cfg["expose"] = json!(["f"]);
    cfg["pool"] = json!({"idleTimeout": "1s"});
    let daemon = Daemon::start(&cfg);
    let session = LegacySession::open(daemon.url());
    let arrived = session.standalone_events();

    // Two reaper ticks with the stream open: nothing was started for it.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(daemon.home().instances("f"), Vec::<Value>::new(), "the stream started an instance");

    for round in ["first", "after the reap"] {
        let reply = session.mcpx_call("f", "changed", json!({}));
        assert_eq!(reply.structured()["announced"], "notifications/tools/list_changed");
        let change = arrived
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no change reached the stream ({round} instance)"));
        assert_eq!(change["method"], "notifications/tools/list_changed", "{change}");
        // Idle, the instance is reaped though the stream stays open.
        let reaped = mcpx_e2e::poll(Duration::from_secs(20), || daemon.home().instances("f").is_empty().then_some(()));
        assert!(reaped.is_some(), "the open stream kept an idle instance up: {}", daemon.home().status());
    }
}

#[test]
fn updates_to_resources_a_session_subscribed_to_arrive_on_its_standalone_stream() {
    let daemon = Daemon::start(&config(&[("everything", everything(&tag()))]));
    let session = LegacySession::open(daemon.url());
    let uris = session.resource_uris();
    let (watched, other) = (&uris[0], &uris[1]);
    session.request("resources/subscribe", json!({ "uri": watched })).result();
    let arrived = session.standalone_events();
    // Another session on the same (global) instance subscribes to another resource: the
    // upstream sends both updates on its one connection, and each session hears its own.
    let neighbour = LegacySession::open(daemon.url());
    neighbour.request("resources/subscribe", json!({ "uri": other })).result();
    let neighbour_arrived = neighbour.standalone_events();
    // server-everything sends updates for what it was subscribed to once this is on, then
    // every 5 seconds.
    session.mcpx_call("everything", "toggle-subscriber-updates", json!({})).result();
    let mine = mcpx_e2e::client::resource_updates(&arrived, Duration::from_secs(7));
    assert!(!mine.is_empty(), "no update reached the subscribed session's standalone stream");
    for update in &mine {
        assert_eq!(update["params"]["uri"], json!(watched), "a session hears only what it subscribed to: {update}");
        schema::spec(schema::LEGACY).assert_valid(
            "ResourceUpdatedNotification",
            update,
            "an update on the standalone stream",
        );
    }
    // Its stream was filling meanwhile.
    let theirs = mcpx_e2e::client::resource_updates(&neighbour_arrived, Duration::from_millis(500));
    assert!(!theirs.is_empty() && theirs.iter().all(|u| u["params"]["uri"] == json!(other)), "{theirs:?}");
}

#[test]
fn a_standalone_stream_needs_a_session_and_an_event_stream() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("global", &t, &[]))]));
    let http = mcpx_e2e::client::http();
    let without = http.get(daemon.url()).header("Accept", "text/event-stream").send().unwrap();
    assert_eq!(without.status(), 405);
    let session = LegacySession::open(daemon.url());
    let json_only = http
        .get(daemon.url())
        .header("Accept", "application/json")
        .header("Mcp-Session-Id", session.id())
        .send()
        .unwrap();
    assert_eq!(json_only.status(), 406);
}

/// On stdio the stream itself is the standalone stream: a handshake-era session hears the
/// list changes of its instances there, with `mcpx serve --no-daemon` and through the
/// daemon alike.
#[test]
fn a_stdio_session_hears_the_list_changes_of_its_instances() {
    for no_daemon in [true, false] {
        let t = tag();
        let mut cfg = config(&[("f", fakemcp("session", &t, &["--era", "legacy"]))]);
        cfg["expose"] = json!(["f"]);
        let home = mcpx_e2e::Home::new(&cfg);
        let serve = home.serve();
        let mut serve = if no_daemon { serve.arg("--no-daemon") } else { serve }.start();
        serve.initialize("2025-11-25");
        let answer = serve.legacy_request(
            "tools/call",
            json!({"name": "mcpx_call",
            "arguments": {"server": "f", "tool": "changed", "arguments": {}}}),
        );
        assert_eq!(answer.structured()["announced"], "notifications/tools/list_changed");
        let mut seen = answer.notifications.clone();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !seen.iter().any(|n| n["method"] == "notifications/tools/list_changed") {
            let left = deadline.checked_duration_since(std::time::Instant::now()).unwrap_or_default();
            match serve.next_frame(left) {
                Some(frame) => seen.push(frame),
                None => panic!("no list change reached the stdio session (no_daemon: {no_daemon}); saw {seen:?}"),
            }
        }
    }
}
