//! With `"exposePrefix": "never"`, exposed servers keep their own names; two servers
//! offering the same name is a clash that mcpx reports, never resolves silently.

use mcpx_e2e::Home;
use mcpx_e2e::client::Modern;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::{processes_with, tag};
use serde_json::json;

#[test]
fn two_exposed_servers_with_the_same_tool_names_are_a_reported_clash() {
    let t = tag();
    let mut cfg = config(&[("a", fakemcp("global", &t, &[])), ("b", fakemcp("global", &t, &[]))]);
    cfg["expose"] = json!(["a", "b"]);
    cfg["exposePrefix"] = json!("never");
    let daemon = Daemon::start(&cfg);
    let reply = Modern::tools_list().send(daemon.url());
    let error = reply.assert_error(200, -32603);
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("\"a\"") && message.contains("\"b\"") && message.contains("exposePrefix"), "{reply}");

    // Prefixed, the same two servers list side by side.
    cfg["exposePrefix"] = json!("always");
    assert!(daemon.rewrite_config(&cfg));
    let listed = Modern::tools_list().send(daemon.url());
    let names: Vec<&str> =
        listed.result()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"a__whoami") && names.contains(&"b__whoami"), "{names:?}");
}

#[test]
fn mcpx_config_check_connect_names_a_clash_and_a_server_that_does_not_start() {
    let t = tag();
    let mut cfg = config(&[("a", fakemcp("global", &t, &[])), ("b", fakemcp("session", &t, &[]))]);
    cfg["expose"] = json!(["a", "b"]);
    cfg["exposePrefix"] = json!("never");
    let home = Home::new(&cfg);
    let path = home.config_path().to_str().unwrap().to_owned();
    // Parsing alone cannot see it: the names are in the servers' listings.
    home.cli(&["config", "check", "--config", &path]).assert_code(0);
    let connected = home.cli(&["config", "check", "--config", &path, "--connect"]);
    connected.assert_code(1);
    assert!(
        connected.stdout.contains("tools/list")
            && connected.stdout.contains("\"a\"")
            && connected.stdout.contains("\"b\""),
        "the clash must name both servers:\n{connected}"
    );
    assert!(processes_with(&t).is_empty(), "config check --connect stops every server it started");
    assert!(home.daemons().is_empty(), "config check --connect runs no daemon");

    cfg["exposePrefix"] = json!("always");
    cfg["mcpServers"]["broken"] = json!({"command": "sh", "args": ["-c", "exit 7"]});
    std::fs::write(home.config_path(), cfg.to_string()).unwrap();
    let broken = home.cli(&["config", "check", "--config", &path, "--connect"]);
    broken.assert_code(1);
    assert!(broken.stdout.contains("broken: does not start") && broken.stdout.contains("exit status: 7"), "{broken}");
    assert!(!broken.stdout.contains("tools/list"), "prefixed, the names no longer clash:\n{broken}");
}
