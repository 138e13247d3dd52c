//! HTTP upstreams: a real Python-SDK server over Streamable HTTP
//! (`tests/python/http_server.py`), reached through mcpx by modern and legacy callers.

use mcpx_e2e::python::HttpServer;
use mcpx_e2e::{Daemon, LegacySession, Modern};
use serde_json::{Map, Value, json};

const TOKEN: &str = "ci-token-0123456789abcdef";
const PY_TOOLS: [&str; 6] = ["echo", "whoami", "headers", "meta", "progress", "touch"];

/// A config with the Python server as `py`, exposed (so its tools are listed as `py__*`).
fn py_config(python: &HttpServer, extra: Value) -> Value {
    let mut server = json!({"url": python.url()});
    if let Value::Object(extra) = extra {
        server.as_object_mut().unwrap().extend(extra);
    }
    json!({"mcpServers": {"py": server}, "expose": ["py"]})
}

/// A tool result's JSON body: its structured content, else its first text block parsed.
#[track_caller]
fn tool_json(result: &Value) -> Value {
    assert_ne!(result["isError"], json!(true), "the tool call failed: {result}");
    if result["structuredContent"].is_object() {
        return result["structuredContent"].clone();
    }
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a result without text: {result}"));
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {result}"))
}

#[track_caller]
fn first_text(result: &Value) -> &str {
    assert_ne!(result["isError"], json!(true), "the tool call failed: {result}");
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("a result without text: {result}"))
}

#[track_caller]
fn listed_py_tools(result: &Value) -> Vec<String> {
    let mut names: Vec<String> = result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {result}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("py__"))
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

fn expected_py_tools() -> Vec<String> {
    let mut names: Vec<String> = PY_TOOLS.iter().map(|t| format!("py__{t}")).collect();
    names.sort();
    names
}

#[test]
fn a_python_http_servers_tools_are_listed_and_called_by_modern_and_legacy_callers() {
    let python = HttpServer::python_sdk();
    let daemon = Daemon::start(&py_config(&python, json!({})));
    let url = daemon.url();

    // Modern over HTTP.
    let list = Modern::tools_list().send(url);
    assert_eq!(listed_py_tools(list.result()), expected_py_tools(), "{list}");
    let echo = list.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "py__echo").unwrap();
    assert_eq!(echo["inputSchema"]["properties"]["text"]["type"], "string", "the upstream's schema is relayed: {echo}");
    let direct = Modern::tools_call("py__echo", json!({"text": "modern"})).send(url);
    assert_eq!(first_text(direct.result()), "echo: modern", "{direct}");
    let gateway = Modern::mcpx_call("py", "echo", json!({"text": "via mcpx_call"})).send(url);
    assert_eq!(first_text(gateway.result()), "echo: via mcpx_call", "{gateway}");
    let search = Modern::tools_call("mcpx_search", json!({"query": "echo"})).send(url);
    let found: Vec<(&str, &str)> = search.structured()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["server"].as_str().unwrap(), t["tool"].as_str().unwrap()))
        .collect();
    assert_eq!(found, [("py", "echo")], "{search}");

    // Legacy over HTTP.
    let legacy = LegacySession::open(url);
    let list = legacy.request("tools/list", json!({}));
    assert_eq!(listed_py_tools(list.result()), expected_py_tools(), "{list}");
    let direct = legacy.tools_call("py__echo", json!({"text": "legacy"}));
    assert_eq!(first_text(direct.result()), "echo: legacy", "{direct}");
    let gateway = legacy.mcpx_call("py", "echo", json!({"text": "legacy mcpx_call"}));
    assert_eq!(first_text(gateway.result()), "echo: legacy mcpx_call");

    // Both eras over stdio.
    let mut modern = daemon.home().serve().start();
    let answer = modern.request(&Modern::tools_call("py__echo", json!({"text": "stdio"})).frame());
    assert_eq!(first_text(answer.result()), "echo: stdio", "{answer}");
    let mut handshake = daemon.home().serve().start();
    handshake.initialize(mcpx_e2e::schema::LEGACY);
    let list = handshake.legacy_request("tools/list", json!({}));
    assert_eq!(listed_py_tools(list.result()), expected_py_tools(), "{list}");
    let answer =
        handshake.legacy_request("tools/call", json!({"name": "py__echo", "arguments": {"text": "stdio legacy"}}));
    assert_eq!(first_text(answer.result()), "echo: stdio legacy", "{answer}");
}

/// The upstream reports progress against mcpx's token; the caller sees it against its own.
#[test]
fn progress_from_an_http_upstream_reaches_the_caller_under_its_own_token() {
    let python = HttpServer::python_sdk();
    let daemon = Daemon::start(&py_config(&python, json!({})));
    let check = |notifications: Vec<&Value>, token: &Value, how: &str| {
        let progress: Vec<&Value> =
            notifications.into_iter().filter(|f| f["method"] == "notifications/progress").collect();
        assert_eq!(progress.len(), 3, "{how}: expected three progress notifications: {progress:?}");
        for (step, n) in progress.iter().enumerate() {
            assert_eq!(&n["params"]["progressToken"], token, "{how}: {n}");
            assert_eq!(n["params"]["progress"], json!(step + 1), "{how}: {n}");
            assert_eq!(n["params"]["total"], 3, "{how}: {n}");
        }
    };

    let token = json!("caller-token-1");
    let reply = Modern::tools_call("py__progress", json!({})).meta("progressToken", token.clone()).send(daemon.url());
    assert!(reply.content_type().starts_with("text/event-stream"), "progress needs an SSE reply:\n{reply}");
    assert_eq!(first_text(reply.result()), "done");
    check(reply.frames.iter().collect(), &token, "modern HTTP");

    let token = json!(4242);
    let mut client = daemon.home().serve().start();
    let answer =
        client.request(&Modern::mcpx_call("py", "progress", json!({})).meta("progressToken", token.clone()).frame());
    assert_eq!(first_text(answer.result()), "done");
    check(answer.notifications.iter().collect(), &token, "stdio");
}

#[test]
fn the_callers_authorization_is_not_forwarded_to_an_http_upstream_but_configured_headers_are() {
    let python = HttpServer::python_sdk();
    let mut cfg = py_config(
        &python,
        json!({"headers": {"X-Api-Key": "configured-key", "X-From-Env": "${MCPX_E2E_UPSTREAM_SECRET}"}}),
    );
    cfg["http"] = json!({"tokens": {"ci": TOKEN}});
    let daemon = Daemon::start_with_env(&cfg, &[("MCPX_E2E_UPSTREAM_SECRET", "from-env-123")]);
    let bearer = format!("Bearer {TOKEN}");

    let check = |headers: &Map<String, Value>, how: &str| {
        assert!(
            !headers.contains_key("authorization"),
            "{how}: the caller's Authorization reached the upstream: {headers:?}"
        );
        assert!(
            !Value::Object(headers.clone()).to_string().contains(TOKEN),
            "{how}: the caller's token reached the upstream: {headers:?}"
        );
        assert!(!headers.contains_key("x-caller-secret"), "{how}: a caller's header reached the upstream: {headers:?}");
        assert_eq!(headers.get("x-api-key"), Some(&json!("configured-key")), "{how}");
        assert_eq!(headers.get("x-from-env"), Some(&json!("from-env-123")), "{how}");
    };

    let reply = Modern::tools_call("py__headers", json!({}))
        .header("Authorization", &bearer)
        .header("X-Caller-Secret", "caller-secret")
        .send(daemon.url());
    let headers = tool_json(reply.result());
    check(headers.as_object().expect("headers"), "modern HTTP");

    let reply = Modern::mcpx_call("py", "headers", json!({})).header("Authorization", &bearer).send(daemon.url());
    check(tool_json(reply.result()).as_object().expect("headers"), "mcpx_call");

    let mut client = daemon.home().serve().start();
    let answer = client.call("py", "headers", json!({}));
    check(tool_json(answer.result()).as_object().expect("headers"), "stdio");
}

/// Starlette (under the Python SDK and FastMCP) answers `/mcp/` with a 307 to `/mcp`: mcpx
/// follows it with the same method, body and headers, credentials too (same origin).
#[test]
fn an_endpoint_the_server_redirects_is_followed_with_its_method_body_and_credentials() {
    let python = HttpServer::python_sdk();
    let server = json!({"url": format!("{}/", python.url()), "headers": {"Authorization": "Bearer configured-secret"}});
    let daemon = Daemon::start(&json!({"mcpServers": {"py": server}}));
    let url = daemon.url();

    let reply = Modern::mcpx_call("py", "headers", json!({})).send(url);
    let headers = tool_json(reply.result());
    assert_eq!(headers["authorization"], "Bearer configured-secret", "{headers}");
    let reply = Modern::mcpx_call("py", "echo", json!({"text": "redirected"})).send(url);
    assert_eq!(first_text(reply.result()), "echo: redirected", "{reply}");
    let legacy = LegacySession::open(url);
    let reply = legacy.mcpx_call("py", "echo", json!({"text": "legacy, redirected"}));
    assert_eq!(first_text(reply.result()), "echo: legacy, redirected", "{reply}");
    assert!(python.log().contains("/mcp/ HTTP/1.1\" 307"), "the server redirected:\n{}", python.log());
}

/// A redirect to another origin (here `localhost` for `127.0.0.1`) is followed, but the
/// credentials configured for the server stay behind: a server's open redirect must not
/// hand them to whoever it points at.
#[test]
fn credentials_do_not_follow_a_redirect_to_another_origin() {
    let python = HttpServer::python_sdk();
    let elsewhere = python.url().replace("127.0.0.1", "localhost");
    let redirect = HttpServer::start("redirect_server.py", &["307", &elsewhere]);
    let headers = json!({
        "Authorization": "Bearer configured-secret",
        "Cookie": "session=configured-cookie",
        "X-Api-Key": "configured-key",
    });
    let daemon = Daemon::start(&json!({"mcpServers": {"py": {"url": redirect.url(), "headers": headers}}}));

    let reply = Modern::mcpx_call("py", "headers", json!({})).send(daemon.url());
    let seen = tool_json(reply.result());
    assert!(seen["host"].as_str().is_some_and(|h| h.starts_with("localhost:")), "the redirect was followed: {seen}");
    assert!(!seen.to_string().contains("configured-secret"), "the bearer followed the redirect: {seen}");
    assert!(!seen.to_string().contains("configured-cookie"), "the cookie followed the redirect: {seen}");
    assert_eq!(seen["x-api-key"], "configured-key", "{seen}");
}

/// A server that redirects to itself fails the call at once, naming the loop.
#[test]
fn a_redirect_loop_fails_the_call_naming_it() {
    let redirect = HttpServer::start("redirect_server.py", &["308", "/mcp"]);
    let daemon = Daemon::start(&json!({"mcpServers": {"loop": {"url": redirect.url()}}}));
    let reply = Modern::mcpx_call("loop", "anything", json!({})).send(daemon.url());
    let error = reply.to_string();
    assert!(error.contains("more than 10 redirects"), "{error}");
}
