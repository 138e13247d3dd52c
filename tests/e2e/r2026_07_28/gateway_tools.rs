//! The gateway tools: `mcpx_search` finds upstream tools, `mcpx_call` relays their results
//! verbatim, and a wrong server or tool name says what exists.

use mcpx_e2e::{Daemon, LegacySession, Modern, config, fakemcp, tag};
use serde_json::{Value, json};

fn gateway() -> Daemon {
    Daemon::start(&config(&[("fake", fakemcp("global", &tag(), &[]))]))
}

#[test]
fn tools_list_offers_the_gateway_tools() {
    let daemon = gateway();
    let reply = Modern::tools_list().send(daemon.url());
    let names: Vec<&str> =
        reply.result()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"mcpx_search") && names.contains(&"mcpx_call"), "{reply}");
}

#[test]
fn mcpx_search_finds_upstream_tools_with_their_schemas() {
    let daemon = gateway();
    let search = |query: &str| Modern::tools_call("mcpx_search", json!({"query": query})).send(daemon.url());

    let one = search("whoami");
    let found = one.structured()["tools"].as_array().unwrap_or_else(|| panic!("no tools array:\n{one}")).clone();
    assert_eq!(found.len(), 1, "{one}");
    assert_eq!((found[0]["server"].as_str(), found[0]["tool"].as_str()), (Some("fake"), Some("whoami")), "{one}");
    assert_eq!(found[0]["inputSchema"]["type"], "object", "{one}");
    assert!(found[0]["description"].as_str().is_some_and(|d| d.contains("instance")), "{one}");

    let all = search("");
    let mut tools: Vec<&str> =
        all.structured()["tools"].as_array().unwrap().iter().filter_map(|t| t["tool"].as_str()).collect();
    tools.sort_unstable();
    assert_eq!(tools, ["changed", "crash", "echo", "env", "fail", "flood", "meta", "slow", "whoami"], "{all}");

    let none = search("zebra-unicorn");
    assert_eq!(none.structured()["tools"], json!([]), "{none}");
}

#[test]
fn mcpx_call_relays_the_upstream_result_verbatim() {
    let daemon = gateway();
    let args = json!({"n": 1, "list": [true, null, "x"], "nested": {"k": "v"}});
    let echo = Modern::mcpx_call("fake", "echo", args.clone()).send(daemon.url());
    assert_eq!(echo.structured(), &args);
    assert_eq!(echo.result()["content"], json!([{"type": "text", "text": args.to_string()}]), "{echo}");

    let fail = Modern::mcpx_call("fake", "fail", json!({"message": "nope"})).send(daemon.url());
    assert_eq!(fail.result()["isError"], json!(true), "an upstream tool error stays a tool error:\n{fail}");
    assert_eq!(fail.result()["content"], json!([{"type": "text", "text": "nope"}]), "{fail}");

    let legacy = LegacySession::open(daemon.url());
    let echoed = legacy.mcpx_call("fake", "echo", args.clone());
    assert_eq!(echoed.structured(), &args);
}

#[test]
fn mcpx_call_to_an_unknown_server_or_tool_names_what_exists() {
    let daemon = gateway();
    let server = Modern::mcpx_call("nosuch", "whoami", json!({})).send(daemon.url());
    assert_eq!(server.error_code(), -32602, "{server}");
    assert!(text_of(server.error()).contains("fake"), "the error must name the servers that exist:\n{server}");

    let tool = Modern::mcpx_call("fake", "nosuch", json!({})).send(daemon.url());
    assert_eq!(tool.error_code(), -32602, "{tool}");
    assert!(text_of(tool.error()).contains("whoami"), "the error must name the tools that exist:\n{tool}");
}

/// The error's message and data as one string, to look for names in.
fn text_of(error: &Value) -> String {
    format!("{} {}", error["message"].as_str().unwrap_or_default(), error["data"])
}
