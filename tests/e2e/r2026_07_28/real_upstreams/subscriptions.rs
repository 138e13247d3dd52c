//! `subscriptions/listen` through mcpx to real upstreams: resource subscriptions reach the
//! instance that owns the resource (here a handshake-era server, subscribed with
//! `resources/subscribe`), updates come back under the public URI tagged with the listen's
//! id, and when the instance exits mcpx opens the same subscriptions on a new one.

use std::time::Duration;

use mcpx_e2e::schema::MODERN;
use mcpx_e2e::upstreams::{RawPost, everything};
use mcpx_e2e::{Daemon, Modern, config, fakemcp, poll, processes_with, tag};
use serde_json::{Value, json};

const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
const UPDATED: &str = "notifications/resources/updated";

/// Opens a listen for `filter` and returns the stream with its acknowledgement.
fn listen(url: &str, filter: Value) -> (RawPost, Value, Value) {
    let request = Modern::new("subscriptions/listen", json!({ "notifications": filter }));
    let frame = request.frame();
    let mut post = RawPost::send(url, MODERN, &request.headers(), &frame);
    assert_eq!(post.status(), 200, "{:?}", post.head);
    let ack = post.read_until(Duration::from_secs(20), |f| f["method"] == ACKNOWLEDGED);
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], frame["id"], "{ack}");
    (post, ack, frame["id"].clone())
}

#[test]
fn a_resource_subscription_reaches_its_server_and_is_opened_again_when_the_instance_restarts() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("everything", everything(&t))]));
    let url = daemon.url();
    let listed = Modern::new("resources/list", json!({})).send(url);
    let uri = listed.result()["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .find(|u| u.starts_with("mcpx://everything/"))
        .unwrap_or_else(|| panic!("no resource of everything: {listed}"))
        .to_owned();
    // A URI no configured server owns cannot be subscribed to.
    let unknown = "mcpx://nosuch-server/demo://resource/static/document/architecture.md";

    let (mut stream, ack, id) =
        listen(url, json!({ "resourceSubscriptions": [uri, unknown], "toolsListChanged": true }));
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([uri]),
        "only what an upstream took is acknowledged: {ack}"
    );
    assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true, "{ack}");

    // server-everything sends updates for what it was subscribed to once this is on.
    let toggle = || Modern::mcpx_call("everything", "toggle-subscriber-updates", json!({})).send(url);
    toggle().result();
    let update = stream.read_until(Duration::from_secs(15), |f| f["method"] == UPDATED);
    assert_eq!(update["params"]["uri"], json!(uri), "the update names the public URI: {update}");
    assert_eq!(update["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id, "{update}");

    // The instance exits: nothing of its connection survives, so mcpx subscribes again on
    // the next one, and the updates it sends reach the same listen.
    let before = processes_with(&t);
    assert!(!before.is_empty(), "server-everything runs");
    for pid in &before {
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    let restarted = poll(Duration::from_secs(20), || {
        let now = processes_with(&t);
        (!now.is_empty() && now.iter().all(|p| !before.contains(p))).then_some(now)
    });
    assert!(restarted.is_some(), "the listen did not start a new instance of a watched server");
    toggle().result();
    let again = stream.read_until(Duration::from_secs(20), |f| f["method"] == UPDATED);
    assert_eq!(again["params"]["uri"], json!(uri), "{again}");
    assert_eq!(again["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id, "{again}");
}

#[test]
fn list_changes_keep_coming_after_a_watched_instance_restarts() {
    let t = tag();
    let mut c = config(&[("f", fakemcp("global", &t, &[]))]);
    c["expose"] = json!(["f"]);
    let daemon = Daemon::start(&c);
    let url = daemon.url();
    let (mut stream, ack, _) =
        listen(url, json!({ "toolsListChanged": true, "resourceSubscriptions": ["mcpx://f/fake://meta"] }));
    assert_eq!(
        ack["params"]["notifications"],
        json!({ "toolsListChanged": true, "resourceSubscriptions": [] }),
        "fakemcp offers no resource subscriptions: {ack}"
    );
    let changed = || Modern::tools_call("f__changed", json!({})).send(url).result().clone();
    changed();
    stream.read_until(Duration::from_secs(10), |f| f["method"] == "notifications/tools/list_changed");

    let before = processes_with(&t);
    for pid in &before {
        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
    }
    // Only the listen holds this server, so a new running instance is the listen's own.
    let home = daemon.home();
    let restarted = poll(Duration::from_secs(20), || {
        let instances = home.instances("f");
        instances
            .iter()
            .any(|i| i["pid"].as_u64().is_some_and(|p| !before.contains(&(p as u32))) && i["inUse"] == 1)
            .then_some(())
    });
    assert!(restarted.is_some(), "the listen did not start a new instance of a watched server");
    // It subscribes to the instance's changes right after taking it: a change announced
    // before that is not the listen's to hear, so announce until one arrives.
    let heard = poll(Duration::from_secs(20), || {
        changed();
        stream.try_read_until(Duration::from_millis(500), |f| f["method"] == "notifications/tools/list_changed")
    });
    assert!(heard.is_some(), "no list change reached the listen after the restart");
}

#[test]
fn a_stateless_http_servers_changes_reach_a_listen_through_a_listen_of_mcpx_own() {
    let python = mcpx_e2e::python::HttpServer::python_sdk();
    let daemon = Daemon::start(&json!({"mcpServers": {"py": {"url": python.url()}}, "expose": ["py"]}));
    let url = daemon.url();
    let uri = "mcpx://py/note://greeting/hello world";
    let (mut stream, ack, id) = listen(url, json!({ "toolsListChanged": true, "resourceSubscriptions": [uri] }));
    assert_eq!(ack["params"]["notifications"]["toolsListChanged"], true, "{ack}");

    assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!([uri]), "{ack}");

    // mcpx acknowledged once its own listens on the server were acknowledged: what the
    // server announces from now on reaches this listen.
    let touched = Modern::tools_call("py__touch", json!({})).send(url);
    assert_eq!(touched.result()["content"][0]["text"], "touched", "{touched}");
    // Both, in whichever order the server sent them.
    let wanted = |f: &Value| f["method"] == "notifications/tools/list_changed" || f["method"] == UPDATED;
    let frames =
        [stream.read_until(Duration::from_secs(10), wanted), stream.read_until(Duration::from_secs(10), wanted)];
    let update = frames.iter().find(|f| f["method"] == UPDATED).unwrap_or_else(|| panic!("no update: {frames:?}"));
    assert!(frames.iter().any(|f| f["method"] == "notifications/tools/list_changed"), "no list change: {frames:?}");
    assert_eq!(update["params"]["uri"], uri, "the update names the public URI: {update}");
    for frame in &frames {
        assert_eq!(frame["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id, "{frame}");
    }
}
