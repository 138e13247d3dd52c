//! With `"exposePrefix": "never"`, exposed servers keep their own names; two servers
//! offering the same name is a clash that mcpx reports, never resolves silently.

use mcpx_e2e::client::Modern;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
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
    let names: Vec<&str> = listed.result()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"a__whoami") && names.contains(&"b__whoami"), "{names:?}");
}
