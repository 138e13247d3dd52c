//! The real Python MCP SDK, as a third-party client and upstream.
//!
//! `scripts/deps.sh` installs the pinned packages into `.deps/venv`; it runs once per test
//! binary (the first test that needs Python waits for it, the rest reuse the outcome).
//! `tests/python/mcp_client.py` drives the SDK's `Client` and prints one JSON line.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::fixtures::config;
use crate::paths;

/// `.deps/venv`, installed (or verified) by `scripts/deps.sh`; panics with its output when
/// that fails.
pub fn venv() -> PathBuf {
    paths::deps().join("venv")
}

/// A program installed in the venv's `bin/`.
pub fn venv_bin(name: &str) -> PathBuf {
    venv().join("bin").join(name)
}

/// Runs `mcp_client.py --url <url> --mode <mode> --tool <tool> --args <arguments>` and
/// returns its JSON line; panics with its stderr when it fails.
#[track_caller]
pub fn sdk_client(url: &str, mode: &str, tool: &str, arguments: &Value) -> Value {
    let script = paths::repo_root().join("tests/python/mcp_client.py");
    let output = Command::new(venv_bin("python"))
        .arg(&script)
        .args(["--url", url, "--mode", mode, "--tool", tool, "--timeout", "30", "--trace"])
        .arg("--args")
        .arg(arguments.to_string())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    crate::process::json_line(&output, &format!("the Python SDK client ({mode})"))
}

/// A gateway with one upstream, `time`: the real `mcp-server-time` from `.deps/venv`.
pub fn time_gateway_config() -> Value {
    let time = json!({"command": venv_bin("mcp-server-time"), "args": ["--local-timezone", "UTC"]});
    config(&[("time", time)])
}

/// The `mcpx_call` arguments asking `time` for the current time in Berlin.
pub fn berlin_call() -> Value {
    json!({"server": "time", "tool": "get_current_time", "arguments": {"timezone": "Europe/Berlin"}})
}

/// Checks the SDK client's report: gateway tools listed, and Berlin's time relayed.
#[track_caller]
pub fn assert_berlin_time(out: &Value) {
    let tools: Vec<&str> = out["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    assert!(tools.contains(&"mcpx_search") && tools.contains(&"mcpx_call"), "gateway tools missing: {out}");
    let result = &out["result"];
    assert_eq!(result["isError"], json!(false), "the upstream call failed: {out}");
    // mcp-server-time answers {timezone, datetime, day_of_week, is_dst}, as structured
    // content or as JSON text; read whichever arrived.
    let time = match &result["structuredContent"] {
        Value::Object(_) => result["structuredContent"].clone(),
        _ => {
            let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content: {out}"));
            serde_json::from_str(text).unwrap_or_else(|e| panic!("time result is not JSON ({e}): {out}"))
        }
    };
    assert_eq!(time["timezone"], "Europe/Berlin", "{out}");
    let datetime = time["datetime"].as_str().unwrap_or_else(|| panic!("no datetime: {out}"));
    assert!(
        datetime.ends_with("+01:00") || datetime.ends_with("+02:00"),
        "Berlin is UTC+1 or UTC+2, got {datetime}: {out}"
    );
}

/// `tests/python/http_server.py`: a real Python-SDK server over Streamable HTTP (both
/// eras), started on a free port (see `upstreams::ScriptServer`).
pub type HttpServer = crate::upstreams::ScriptServer;

/// Runs `mcp_client.py --command "<command>" --mode <mode> --tool <tool> --args <arguments>`
/// with `env` added to its environment (the SDK passes its whole environment to the
/// command it launches) and returns its JSON line; panics with its stderr when it fails.
#[track_caller]
pub fn sdk_stdio_client(
    command: &str,
    env: &[(&str, &std::ffi::OsStr)],
    mode: &str,
    tool: &str,
    arguments: &Value,
) -> Value {
    let script = paths::repo_root().join("tests/python/mcp_client.py");
    let mut process = Command::new(venv_bin("python"));
    process
        .arg(&script)
        .args(["--command", command, "--mode", mode, "--tool", tool, "--timeout", "30"])
        .arg("--args")
        .arg(arguments.to_string())
        .env_remove("MCPX_SESSION_ID")
        .env_remove("MCPX_CONFIG");
    for (name, value) in env {
        process.env(name, value);
    }
    let output = process.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    crate::process::json_line(&output, &format!("the Python SDK client ({mode}, over stdio)"))
}
