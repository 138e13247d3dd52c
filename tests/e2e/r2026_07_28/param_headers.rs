//! `Mcp-Param-*` on mcpx's own endpoint: an exposed tool whose schema marks an argument
//! with `x-mcp-header` is listed with it, so a 2026 HTTP caller mirrors that argument into
//! a header; mcpx, which reads the body, checks the header against it (the 2026-07-28
//! transport: missing, mismatched or badly encoded is 400 with -32020).

use mcpx_e2e::process::TempDir;
use mcpx_e2e::upstreams::{first_text, python_script};
use mcpx_e2e::{Daemon, Modern, python};
use serde_json::json;

#[test]
fn an_exposed_tools_mirrored_arguments_must_match_their_headers() {
    let dir = TempDir::new();
    let tools = dir.path().join("tools.json");
    let fixture = json!({
        "tools": [{
            "name": "weather",
            "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "days": {"type": "integer", "x-mcp-header": "Days"},
            }},
        }],
        "result": {"content": [{"type": "text", "text": "sunny"}]},
    });
    std::fs::write(&tools, fixture.to_string()).unwrap();
    let server = json!({
        "command": python::venv_bin("python"),
        "args": [python_script("verbatim_tools_server.py"), tools, "legacy"],
    });
    let daemon = Daemon::start(&json!({"mcpServers": {"v": server}, "expose": ["v"]}));
    let url = daemon.url();
    let listed = Modern::tools_list().send(url);
    let weather = listed.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "v__weather").cloned();
    assert_eq!(weather.unwrap()["inputSchema"]["properties"]["region"]["x-mcp-header"], "Region", "{listed}");

    let call = |headers: &[(&str, &str)]| {
        let mut request = Modern::tools_call("v__weather", json!({"region": "Hello", "days": 3}));
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send(url)
    };
    for good in [
        vec![("Mcp-Param-Region", "Hello"), ("Mcp-Param-Days", "3")],
        vec![("mcp-param-region", "=?base64?SGVsbG8=?="), ("MCP-PARAM-DAYS", "03")],
    ] {
        let reply = call(&good);
        assert_eq!(first_text(reply.result()), "sunny", "{good:?}:\n{reply}");
    }
    for (bad, why) in [
        (vec![("Mcp-Param-Days", "3")], "Mcp-Param-Region header is required"),
        (vec![("Mcp-Param-Region", "=?base64?SGVsbG8?="), ("Mcp-Param-Days", "3")], "not valid base64"),
        (vec![("Mcp-Param-Region", "=?base64?SGVs!!!bG8=?="), ("Mcp-Param-Days", "3")], "not valid base64"),
        (vec![("Mcp-Param-Region", "Hallo"), ("Mcp-Param-Days", "3")], "does not match"),
        (vec![("Mcp-Param-Region", "Hello"), ("Mcp-Param-Days", "4")], "does not match"),
    ] {
        let reply = call(&bad);
        let error = reply.assert_error(400, -32020);
        assert!(
            error["message"].as_str().unwrap_or_default().contains(why),
            "{bad:?} should fail with {why:?}:\n{reply}"
        );
    }
    // Through mcpx_call the arguments are not mirrored (its own schema marks none).
    let gateway = Modern::mcpx_call("v", "weather", json!({"region": "Hello", "days": 3})).send(url);
    assert_eq!(first_text(gateway.result()), "sunny", "{gateway}");
}
