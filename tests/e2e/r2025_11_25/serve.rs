//! Handshake-era clients of `mcpx serve`: a session opened with `initialize` outlives the
//! daemon connection under it, and the real Python SDK in legacy mode uses serve as its
//! stdio server.

use std::time::Duration;

use mcpx_e2e::python::sdk_stdio_client;
use mcpx_e2e::schema::LEGACY;
use mcpx_e2e::serve::legacy_frame;
use mcpx_e2e::{Daemon, Home, Whoami, config, fakemcp, paths, processes_with, tag, wait_until_gone};
use serde_json::json;

fn mcpx_call(tool: &str, arguments: serde_json::Value) -> serde_json::Value {
    json!({"name": "mcpx_call", "arguments": {"server": "shared", "tool": tool, "arguments": arguments}})
}

/// The daemon is SIGKILLed under a legacy client: the call in flight fails, and the next
/// request, without a new `initialize`, is answered by a new daemon (serve replays the
/// client's `initialize` to it and keeps that answer to itself).
#[test]
fn a_legacy_client_of_serve_keeps_its_session_when_the_daemon_is_killed() {
    let tag = tag();
    let mut daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let old_daemon = daemon.pid();
    let mut client = daemon.home().serve().start();
    client.initialize(LEGACY);
    let before =
        Whoami::from_structured(client.legacy_request("tools/call", mcpx_call("whoami", json!({}))).structured());
    let slow = legacy_frame("tools/call", mcpx_call("slow", json!({"ms": 60_000})));
    client.send(&slow);
    assert!(daemon.home().wait_in_use("shared", 1, Duration::from_secs(10)));

    daemon.kill();
    let failed = client.answer(&slow["id"], Duration::from_secs(10));
    assert_eq!(failed.error()["code"], -32603, "{failed}");

    let after = client.legacy_request("tools/call", mcpx_call("whoami", json!({})));
    let after = Whoami::from_structured(after.structured());
    assert_ne!(after.instance, before.instance);
    let list = client.legacy_request("tools/list", json!({}));
    assert!(list.result()["tools"].is_array(), "{list}");
    let home = daemon.home();
    let daemons = home.daemons();
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    assert_ne!(daemons[0], old_daemon, "a new daemon must serve the session");

    home.stop_daemons();
    assert!(
        wait_until_gone(&tag, Duration::from_secs(3)).is_empty(),
        "upstreams outlived the daemons: {:?}",
        processes_with(&tag)
    );
}

/// The same across a clean restart of the daemon the test runs.
#[test]
fn a_legacy_client_of_serve_keeps_its_session_across_a_daemon_restart() {
    let tag = tag();
    let mut daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let mut client = daemon.home().serve().start();
    client.initialize(LEGACY);
    client.legacy_request("tools/call", mcpx_call("whoami", json!({}))).structured();
    daemon.stop();
    daemon.restart();
    let again = client.legacy_request("tools/call", mcpx_call("echo", json!({"after": "restart"})));
    assert_eq!(again.structured(), &json!({"after": "restart"}));
    assert_eq!(daemon.home().status()["pid"], daemon.pid());
}

/// The Python SDK's `Client(mode="legacy")` launches `mcpx serve` (which starts the daemon
/// on demand), initializes a 2025-11-25 session and calls an upstream through `mcpx_call`.
#[test]
fn python_sdk_client_in_legacy_mode_launches_mcpx_serve_and_calls_an_upstream() {
    let tag = tag();
    let home = Home::without_state_dir(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let command = format!("{} serve --config {}", paths::mcpx().display(), home.config_path().display());
    let arguments = json!({"server": "shared", "tool": "echo", "arguments": {"from": "python legacy"}});
    let out = sdk_stdio_client(
        &command,
        &[("MCPX_STATE_DIR", home.state_dir().as_os_str())],
        "legacy",
        "mcpx_call",
        &arguments,
    );
    assert_eq!(out["era"], "legacy", "{out}");
    assert_eq!(out["protocolVersion"], LEGACY, "{out}");
    assert_eq!(out["result"]["isError"], false, "{out}");
    assert_eq!(out["result"]["structuredContent"], json!({"from": "python legacy"}), "{out}");
    assert_eq!(home.daemons().len(), 1, "serve started the daemon on demand");
}
