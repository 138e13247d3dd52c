//! Capabilities, truthful both ways: what mcpx tells callers it delivers (list changes,
//! resource updates) in each era, and what it tells a stateless upstream about the
//! caller (only the questions mcpx relays, nothing it does not understand).

use std::time::Duration;

use mcpx_e2e::client::initialize;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use mcpx_e2e::schema::LEGACY;
use mcpx_e2e::{Daemon, Home, Modern};
use serde_json::{Value, json};

const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// The changes mcpx delivers are declared: list changes of tools, prompts and resources
/// (a listen's `*ListChanged`, a session's standalone stream) and resource updates
/// (`resourceSubscriptions`, `resources/subscribe`). The delivery itself is proven in
/// `real_upstreams::subscriptions` and `r2025_11_25::standalone`.
fn assert_declares_what_mcpx_delivers(capabilities: &Value, whose: &str) {
    assert_eq!(capabilities["tools"]["listChanged"], true, "{whose}: {capabilities}");
    assert_eq!(capabilities["prompts"]["listChanged"], true, "{whose}: {capabilities}");
    assert_eq!(capabilities["resources"]["listChanged"], true, "{whose}: {capabilities}");
    assert_eq!(capabilities["resources"]["subscribe"], true, "{whose}: {capabilities}");
}

#[test]
fn discover_and_initialize_declare_the_list_changes_and_resource_updates_mcpx_delivers() {
    let daemon = Daemon::start(&config(&[("f", fakemcp("global", &tag(), &[]))]));
    let discovered = Modern::discover().send(daemon.url());
    assert_declares_what_mcpx_delivers(&discovered.result()["capabilities"], "server/discover");
    for revision in ["2025-03-26", "2025-06-18", LEGACY] {
        let initialized = initialize(daemon.url(), revision);
        assert_declares_what_mcpx_delivers(&initialized.result()["capabilities"], revision);
    }
}

#[test]
fn a_stateless_upstream_is_told_only_the_client_capabilities_mcpx_relays() {
    let daemon = Daemon::start(&config(&[("f", fakemcp("global", &tag(), &[]))]));
    let declared = json!({
        "sampling": {},
        "roots": {},
        "experimental": {"mcpx-e2e-trial": {}},
        "extensions": {"com.example/unknown-extension": {"mode": "x"}},
    });
    let reply = Modern::mcpx_call("f", "meta", json!({})).meta(CLIENT_CAPABILITIES, declared).send(daemon.url());
    let told = &reply.structured()["meta"][CLIENT_CAPABILITIES];
    // Neither what mcpx does not speak nor what the caller did not declare (elicitation).
    assert_eq!(told, &json!({"sampling": {}, "roots": {}}), "{reply}");

    // A caller that declares nothing gets nothing declared for it.
    let reply = Modern::mcpx_call("f", "meta", json!({})).send(daemon.url());
    assert_eq!(reply.structured()["meta"][CLIENT_CAPABILITIES], json!({}), "{reply}");
}

/// A listen never finishes on its own: when the client closes its input, the listen ends
/// at once with its result (as a cancelled one does), so a client still reading knows.
#[test]
fn a_listen_open_when_a_stdio_client_closes_its_input_ends_with_its_result() {
    let t = tag();
    let mut cfg = config(&[("f", fakemcp("global", &t, &[]))]);
    cfg["expose"] = json!(["f"]);
    let daemon = Daemon::start(&cfg);
    for relayed in [false, true] {
        let home: &Home = daemon.home();
        let options = home.serve();
        let mut serve = if relayed { options.start() } else { options.arg("--no-daemon").start() };
        let listen = Modern::new("subscriptions/listen", json!({"notifications": {"toolsListChanged": true}})).frame();
        serve.send(&listen);
        let ack = serve.next_frame(Duration::from_secs(20)).expect("the listen is acknowledged");
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");

        serve.close_stdin();
        let ended = serve.answer(&listen["id"], Duration::from_secs(20));
        assert_eq!(ended.result()["resultType"], "complete", "relayed: {relayed}: {}", ended.frame);
        assert_eq!(ended.result()["_meta"]["io.modelcontextprotocol/subscriptionId"], listen["id"], "{}", ended.frame);
        assert!(serve.wait(Duration::from_secs(20)).is_some(), "mcpx serve did not exit after its input ended");
    }
}
