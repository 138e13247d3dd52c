//! `server-everything` in its `streamableHttp` mode (2025-11-25 only, an HTTP session per
//! connection of mcpx's) behind mcpx as a `url` server: a 2026-07-28 caller and a
//! handshake-era caller each list and call its tools, read a text and a binary resource,
//! get a prompt, complete an argument and receive progress for a long call.

use std::time::Duration;

use mcpx_e2e::schema::MODERN;
use mcpx_e2e::upstreams::{RawPost, ScriptServer, base64_decode, first_text};
use mcpx_e2e::{Daemon, LegacySession, Modern};
use serde_json::{Value, json};

const TEXT: &str = "mcpx://everything/demo://resource/dynamic/text/3";
const BLOB: &str = "mcpx://everything/demo://resource/dynamic/blob/3";

fn config(server: &ScriptServer) -> Value {
    json!({"mcpServers": {"everything": {"url": server.url()}}, "expose": ["everything"]})
}

/// What every caller must see, whatever its era: `call` sends one request, returns its result.
#[track_caller]
fn assert_the_whole_surface(call: &dyn Fn(&str, Value) -> Value) {
    let tools = call("tools/list", json!({}));
    let names: Vec<&str> = tools["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"everything__echo") && names.contains(&"everything__get-sum"), "{tools}");
    let echo = call("tools/call", json!({"name": "everything__echo", "arguments": {"message": "over HTTP ✓"}}));
    assert_eq!(first_text(&echo), "Echo: over HTTP ✓");
    let sum = call(
        "tools/call",
        json!({"name": "mcpx_call", "arguments": {"server": "everything", "tool": "get-sum", "arguments": {"a": 40, "b": 2}}}),
    );
    assert_eq!(first_text(&sum), "The sum of 40 and 2 is 42.");

    let text = call("resources/read", json!({"uri": TEXT}));
    assert_eq!(text["contents"][0]["uri"], TEXT, "{text}");
    assert!(
        text["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Resource 3: This is a plaintext resource"),
        "{text}"
    );
    let blob = call("resources/read", json!({"uri": BLOB}));
    assert!(blob["contents"][0].get("text").is_none(), "{blob}");
    let bytes = base64_decode(blob["contents"][0]["blob"].as_str().unwrap_or_else(|| panic!("no blob: {blob}")));
    assert!(String::from_utf8_lossy(&bytes).starts_with("Resource 3: This is a base64 blob"), "{blob}");

    let prompt = call(
        "prompts/get",
        json!({"name": "everything__args-prompt", "arguments": {"city": "Oslo", "state": "Viken"}}),
    );
    assert_eq!(prompt["messages"][0]["content"]["text"], "What's weather in Oslo, Viken?", "{prompt}");
    let completed = call(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "everything__completable-prompt"}, "argument": {"name": "department", "value": "E"}}),
    );
    assert_eq!(completed["completion"]["values"], json!(["Engineering"]), "{completed}");
}

#[test]
fn a_modern_caller_reaches_server_everything_over_http() {
    let server = ScriptServer::everything_http();
    let daemon = Daemon::start(&config(&server));
    let url = daemon.url();
    assert_the_whole_surface(&|method, params| Modern::new(method, params).send(url).result().clone());

    // Progress of a long call arrives on the caller's stream under its token, then the result.
    let request = Modern::tools_call("everything__trigger-long-running-operation", json!({"duration": 2, "steps": 4}))
        .meta("progressToken", json!("http-progress"));
    let mut post = RawPost::send(url, MODERN, &request.headers(), &request.frame());
    assert_eq!(post.status(), 200, "{:?}", post.head);
    let first = post.read_until(Duration::from_secs(15), |f| f["method"] == "notifications/progress");
    assert_eq!(first["params"]["progressToken"], "http-progress", "{first}");
    let frames = post.rest();
    assert!(frames.last().is_some_and(|f| f.get("result").is_some()), "the result comes last: {frames:?}");
}

#[test]
fn a_handshake_era_caller_reaches_server_everything_over_http() {
    let server = ScriptServer::everything_http();
    let daemon = Daemon::start(&config(&server));
    let session = LegacySession::open(daemon.url());
    assert_the_whole_surface(&|method, params| session.request(method, params).result().clone());
}
