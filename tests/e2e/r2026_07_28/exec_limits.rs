//! Code mode's limits count everything a script makes mcpx do or return: every `search()`
//! counts against `exec.maxToolCalls` (and a script lists each server for its searches
//! once, however many it makes at once), and the links to the artifacts it keeps count
//! against `exec.maxOutputBytes`.

use mcpx_e2e::{Daemon, Modern, config, fakemcp, tag};
use serde_json::{Value, json};

fn exec(daemon: &Daemon, script: &str) -> mcpx_e2e::Reply {
    Modern::tools_call("mcpx_exec", json!({ "script": script })).session("alice").send(daemon.url())
}

fn limit(result: &Value) -> &str {
    result["structuredContent"]["error"]["limit"].as_str().unwrap_or_default()
}

#[test]
fn searches_count_against_max_tool_calls_and_list_each_server_once_per_script() {
    let mut c = config(&[("alpha", fakemcp("global", &tag(), &[]))]);
    c["exec"] = json!({ "maxToolCalls": 300 });
    let daemon = Daemon::start(&c);
    // call() names the tool exactly, so only the searches list alpha's tools.
    let script = r#"
        const before = (await call("alpha", "whoami", {})).toolLists;
        const found = await Promise.all(Array.from({ length: 200 }, () => search("whoami")));
        const after = (await call("alpha", "whoami", {})).toolLists;
        return { listed: after - before, found: found.every((f) => f.length === 1 && f[0].tool === "whoami") };"#;
    let reply = exec(&daemon, script);
    let out = reply.structured();
    assert_eq!(out["found"], true, "{reply}");
    assert_eq!(out["listed"], 1, "200 concurrent searches of one script listed alpha's tools this often:\n{reply}");

    let mut c = config(&[("alpha", fakemcp("global", &tag(), &[]))]);
    c["exec"] = json!({ "maxToolCalls": 10 });
    let daemon = Daemon::start(&c);
    let reply = exec(&daemon, r#"await Promise.all(Array.from({ length: 50 }, () => search("x"))); return "went on";"#);
    assert_eq!(reply.result()["isError"], true, "{reply}");
    assert_eq!(limit(reply.result()), "maxToolCalls", "50 searches passed exec.maxToolCalls = 10:\n{reply}");
}

#[test]
fn artifact_links_count_against_max_output_bytes() {
    let mut c = config(&[("alpha", fakemcp("global", &tag(), &[]))]);
    c["exec"] = json!({ "maxOutputBytes": 4096 });
    let daemon = Daemon::start(&c);
    let reply = exec(&daemon, r#"await artifact("n".repeat(100 * 1024), "x"); return "kept";"#);
    let result = reply.result();
    let size = result.to_string().len();
    assert!(size < 16 * 1024, "a result of {size} bytes under exec.maxOutputBytes = 4096");
    assert_eq!(result["isError"], true, "{}", result["structuredContent"]);
    assert_eq!(limit(result), "maxOutputBytes", "{}", result["structuredContent"]);
}
