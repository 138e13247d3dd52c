//! End-to-end tests of the fakemcp binary: each test launches the real process, talks
//! JSON-RPC over its stdin/stdout, and asserts the exact behaviour the gateway's tests
//! rely on.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// One running fakemcp process with its stdout read line by line on a helper thread.
struct Fake {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
}

impl Fake {
    fn start(args: &[&str]) -> Fake {
        Fake::start_with(Command::new(env!("CARGO_BIN_EXE_fakemcp")).args(args))
    }

    fn start_with(command: &mut Command) -> Fake {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("fakemcp starts");
        let stdin = child.stdin.take();
        let lines = forward_lines(child.stdout.take().unwrap());
        let stderr = forward_lines(child.stderr.take().unwrap());
        Fake { child, stdin, lines, stderr }
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let reply = self.recv();
        assert_eq!(reply["id"], id, "reply answers the request just sent: {reply}");
        reply
    }

    /// The next line on stdout, parsed; it must be JSON-RPC 2.0.
    fn recv(&mut self) -> Value {
        let line = self.lines.recv_timeout(REPLY_TIMEOUT).expect("a line on stdout in time");
        let message: Value = serde_json::from_str(&line).expect("stdout carries only JSON");
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        message
    }

    fn expect_no_output_for(&mut self, wait: Duration) {
        match self.lines.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(line) => panic!("expected silence, got {line}"),
            Err(RecvTimeoutError::Disconnected) => panic!("fakemcp closed stdout"),
        }
    }

    fn initialize(&mut self, version: &str) -> Value {
        let reply = self.request(
            json!(0),
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "fakemcp-tests", "version": "0"},
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        reply
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    fn wait_for_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + REPLY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "fakemcp did not exit");
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn startup_line(&mut self) -> String {
        self.stderr.recv_timeout(REPLY_TIMEOUT).expect("startup line on stderr")
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn forward_lines(stream: impl Read + Send + 'static) -> Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

fn tool_call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

fn modern_tool_call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments, "_meta": modern_meta()})
}

/// The tool's text block must be exactly the structured content, serialized.
fn assert_text_mirrors_structured(result: &Value) {
    let text = result["content"][0]["text"].as_str().expect("a text block");
    assert_eq!(result["content"][0]["type"], "text");
    let parsed: Value = serde_json::from_str(text).unwrap();
    assert_eq!(parsed, result["structuredContent"]);
}

#[test]
fn startup_line_names_instance_pid_and_era() {
    let mut fake = Fake::start(&["--era", "modern", "--tag", "startup-test"]);
    let line = fake.startup_line();
    let words: Vec<&str> = line.split(' ').collect();
    assert_eq!(words.len(), 7, "{line}");
    assert_eq!(words[0], "fakemcp");
    assert_eq!(words[1].len(), 16);
    assert!(words[1].chars().all(|c| c.is_ascii_hexdigit()), "{line}");
    assert_eq!(words[2..4], ["pid", &fake.child.id().to_string()]);
    assert_eq!(words[4..], ["era", "modern", "started"]);
}

#[test]
fn legacy_handshake_then_whoami_counts_calls() {
    let mut fake = Fake::start(&["--name", "upstream-a"]);
    let startup = fake.startup_line();
    let reply = fake.initialize("2025-06-18");
    let result = &reply["result"];
    assert_eq!(result["protocolVersion"], "2025-06-18");
    assert_eq!(
        result["capabilities"],
        json!({"tools": {"listChanged": true}, "resources": {}, "prompts": {}, "completions": {}})
    );
    assert_eq!(result["serverInfo"]["name"], "upstream-a");
    assert_eq!(result["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(result.get("resultType").is_none(), "legacy results carry no resultType");

    let first = fake.request(json!(1), "tools/call", tool_call("whoami", json!({})));
    let second = fake.request(json!("two"), "tools/call", tool_call("whoami", json!({})));
    let first = &first["result"];
    let second = &second["result"];
    assert_eq!(first["structuredContent"]["calls"], 1);
    assert_eq!(second["structuredContent"]["calls"], 2);
    let instance = first["structuredContent"]["instance"].as_str().unwrap();
    assert_eq!(instance, second["structuredContent"]["instance"]);
    assert!(startup.contains(instance), "{startup} names instance {instance}");
    assert_eq!(first["structuredContent"]["pid"], fake.child.id());
    assert_eq!(first["structuredContent"]["era"], "legacy");
    let cwd = std::env::current_dir().unwrap();
    assert_eq!(first["structuredContent"]["cwd"], cwd.to_string_lossy().as_ref());
    assert!(first.get("resultType").is_none());
    assert!(first.get("_meta").is_none());
    assert_text_mirrors_structured(first);
}

#[test]
fn legacy_initialize_counter_offers_latest_version() {
    let mut fake = Fake::start(&[]);
    let reply = fake.initialize("2024-01-01");
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn legacy_requests_before_initialize_are_rejected_except_ping() {
    let mut fake = Fake::start(&[]);
    let reply = fake.request(json!(1), "tools/list", json!({}));
    assert_eq!(reply["error"]["code"], -32600);
    assert!(reply["error"]["message"].as_str().unwrap().contains("not initialized"));
    let reply = fake.request(json!(2), "ping", json!({}));
    assert_eq!(reply["result"], json!({}));
    fake.initialize("2025-11-25");
    let reply = fake.request(json!(3), "tools/list", json!({}));
    let names: Vec<&str> =
        reply["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["whoami", "echo", "fail", "slow", "crash", "changed", "meta", "env", "flood"]);
    assert!(reply["result"].get("ttlMs").is_none());
    let reply = fake.request(json!(4), "logging/setLevel", json!({"level": "info"}));
    assert_eq!(reply["error"]["code"], -32601);
}

#[test]
fn resources_prompts_and_completions_reveal_the_meta_they_arrived_with() {
    let mut fake = Fake::start(&[]);
    let reply = fake.request(json!(1), "resources/list", json!({}));
    assert_eq!(reply["error"]["code"], -32600, "before initialize: {reply}");
    fake.initialize("2025-11-25");
    let meta = json!({"dev.mcpx/invocation": {"callId": "c1"}});
    let read = fake.request(json!(2), "resources/read", json!({"uri": "fake://meta", "_meta": meta}));
    let text = read["result"]["contents"][0]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(text).unwrap(), meta);
    let prompt = fake.request(json!(3), "prompts/get", json!({"name": "meta", "_meta": meta}));
    let text = prompt["result"]["messages"][0]["content"]["text"].as_str().unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(text).unwrap(), meta);
    let complete = fake.request(
        json!(4),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "meta"}, "argument": {"name": "a", "value": ""}, "_meta": meta}),
    );
    let text = complete["result"]["completion"]["values"][0].as_str().unwrap();
    assert_eq!(serde_json::from_str::<serde_json::Value>(text).unwrap(), meta);
    let missing = fake.request(json!(5), "resources/read", json!({"uri": "fake://nope"}));
    assert_eq!(missing["error"]["data"]["uri"], "fake://nope");
}

#[test]
fn modern_discover_has_the_2026_shape() {
    let mut fake = Fake::start(&["--name", "modern-one"]);
    let reply = fake.request(json!(7), "server/discover", json!({"_meta": modern_meta()}));
    assert_eq!(
        reply["result"],
        json!({
            "resultType": "complete",
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}, "resources": {}, "prompts": {}, "completions": {}},
            "ttlMs": 0,
            "cacheScope": "public",
            "_meta": {"io.modelcontextprotocol/serverInfo": {
                "name": "modern-one",
                "version": env!("CARGO_PKG_VERSION"),
            }},
        })
    );
}

#[test]
fn modern_tools_list_and_call_carry_the_modern_envelope() {
    let mut fake = Fake::start(&[]);
    let list = fake.request(json!(1), "tools/list", json!({"_meta": modern_meta()}));
    let list = &list["result"];
    assert_eq!(list["resultType"], "complete");
    assert_eq!(list["ttlMs"], 0);
    assert_eq!(list["cacheScope"], "public");
    assert_eq!(list["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "fakemcp");
    let tools = list["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 9);
    for tool in tools {
        assert!(tool["description"].is_string(), "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }

    let arguments = json!({"b": [1, 2], "a": {"nested": true}});
    let reply = fake.request(json!(2), "tools/call", modern_tool_call("echo", arguments.clone()));
    let result = &reply["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["structuredContent"], arguments);
    assert_eq!(result["content"][0]["text"], arguments.to_string());
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["version"], env!("CARGO_PKG_VERSION"));

    let reply = fake.request(json!(3), "tools/call", modern_tool_call("whoami", json!({})));
    assert_eq!(reply["result"]["structuredContent"]["era"], "modern");
    assert_eq!(reply["result"]["structuredContent"]["calls"], 2);
}

#[test]
fn modern_meta_is_validated_on_every_request() {
    let mut fake = Fake::start(&[]);
    let reply = fake.request(
        json!("no-caps"),
        "tools/list",
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    );
    assert_eq!(reply["error"]["code"], -32602);
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("io.modelcontextprotocol/clientCapabilities"), "{message}");

    let reply = fake.request(
        json!("old-version"),
        "server/discover",
        json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
            "io.modelcontextprotocol/clientCapabilities": {},
        }}),
    );
    assert_eq!(reply["error"]["code"], -32022);
    assert_eq!(reply["error"]["data"], json!({"supported": ["2026-07-28"], "requested": "2099-01-01"}));

    let reply = fake.request(json!(5), "ping", json!({"_meta": modern_meta()}));
    assert_eq!(reply["error"]["code"], -32601, "ping is not a 2026-07-28 method");
}

#[test]
fn modern_only_server_refuses_initialize_and_meta_less_requests() {
    let mut fake = Fake::start(&["--era", "modern"]);
    let reply = fake.request(json!(1), "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}}));
    assert_eq!(reply["error"]["code"], -32022);
    assert_eq!(reply["error"]["data"], json!({"supported": ["2026-07-28"], "requested": "2025-11-25"}));

    let reply = fake.request(json!(2), "tools/list", json!({}));
    assert_eq!(reply["error"]["code"], -32602);
    let message = reply["error"]["message"].as_str().unwrap();
    assert!(message.contains("io.modelcontextprotocol/protocolVersion"), "{message}");

    let reply = fake.request(json!(3), "server/discover", json!({"_meta": modern_meta()}));
    assert_eq!(reply["result"]["supportedVersions"], json!(["2026-07-28"]));
}

#[test]
fn legacy_only_server_answers_discover_with_method_not_found() {
    let mut fake = Fake::start(&["--era", "legacy"]);
    let reply = fake.request(json!(1), "server/discover", json!({"_meta": modern_meta()}));
    assert_eq!(reply["error"]["code"], -32601);
    // Modern _meta means nothing to it: a tools/list carrying it is still pre-initialize.
    let reply = fake.request(json!(2), "tools/list", json!({"_meta": modern_meta()}));
    assert_eq!(reply["error"]["code"], -32600);
    let reply = fake.initialize("2025-11-25");
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn silent_unknown_ignores_discover_but_answers_initialize() {
    let mut fake = Fake::start(&["--era", "legacy", "--silent-unknown"]);
    fake.send(
        &json!({"jsonrpc": "2.0", "id": "probe", "method": "server/discover", "params": {"_meta": modern_meta()}}),
    );
    fake.expect_no_output_for(Duration::from_millis(500));
    let reply = fake.initialize("2025-11-25");
    assert_eq!(reply["result"]["serverInfo"]["name"], "fakemcp");
}

#[test]
fn list_changed_on_init_follows_the_initialize_reply() {
    let mut fake = Fake::start(&["--list-changed-on-init"]);
    let reply = fake.initialize("2025-11-25");
    assert!(reply["result"].is_object());
    let notification = fake.recv();
    assert_eq!(notification["method"], "notifications/tools/list_changed");
    assert!(notification.get("id").is_none());
}

#[test]
fn malformed_line_gets_parse_error_and_server_keeps_working() {
    let mut fake = Fake::start(&[]);
    fake.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\":");
    let reply = fake.recv();
    assert_eq!(reply["id"], Value::Null);
    assert_eq!(reply["error"]["code"], -32700);
    let reply = fake.request(json!(2), "ping", json!({}));
    assert_eq!(reply["result"], json!({}));
}

#[test]
fn slow_call_does_not_block_a_concurrent_echo() {
    let mut fake = Fake::start(&[]);
    fake.initialize("2025-11-25");
    fake.send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": tool_call("slow", json!({"ms": 700}))}));
    fake.send(
        &json!({"jsonrpc": "2.0", "id": "echo", "method": "tools/call", "params": tool_call("echo", json!({"x": 1}))}),
    );
    let first = fake.recv();
    assert_eq!(first["id"], "echo");
    assert_eq!(first["result"]["structuredContent"], json!({"x": 1}));
    let second = fake.recv();
    assert_eq!(second["id"], "slow");
    assert_eq!(second["result"]["structuredContent"], json!({"sleptMs": 700}));
    assert_text_mirrors_structured(&second["result"]);
}

#[test]
fn crash_exits_with_status_3_without_answering() {
    let mut fake = Fake::start(&[]);
    fake.send(
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": modern_tool_call("crash", json!({}))}),
    );
    let status = fake.wait_for_exit();
    assert_eq!(status.code(), Some(3));
    assert!(fake.lines.recv_timeout(Duration::from_secs(2)).is_err(), "no answer to crash");
}

#[test]
fn stdin_eof_exits_promptly_with_status_0() {
    let mut fake = Fake::start(&[]);
    fake.initialize("2025-11-25");
    fake.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": tool_call("slow", json!({"ms": 60000}))}),
    );
    let closed = Instant::now();
    fake.close_stdin();
    let status = fake.wait_for_exit();
    assert_eq!(status.code(), Some(0));
    assert!(closed.elapsed() < Duration::from_secs(5), "exit took {:?}", closed.elapsed());
}

#[test]
fn quick_calls_sent_just_before_eof_are_still_answered() {
    let mut fake = Fake::start(&[]);
    fake.initialize("2025-11-25");
    fake.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": tool_call("echo", json!({"last": true}))}),
    );
    fake.close_stdin();
    assert_eq!(fake.recv()["result"]["structuredContent"], json!({"last": true}));
    assert_eq!(fake.wait_for_exit().code(), Some(0));
}

#[test]
fn unknown_tool_is_invalid_params_naming_the_tool() {
    let mut fake = Fake::start(&[]);
    let reply = fake.request(json!(1), "tools/call", modern_tool_call("no-such-tool", json!({})));
    assert_eq!(reply["error"]["code"], -32602);
    assert!(reply["error"]["message"].as_str().unwrap().contains("no-such-tool"));
}

#[test]
fn fail_returns_an_error_result() {
    let mut fake = Fake::start(&[]);
    let reply = fake.request(json!(1), "tools/call", modern_tool_call("fail", json!({"message": "boom"})));
    assert_eq!(reply["result"]["isError"], true);
    assert_eq!(reply["result"]["content"], json!([{"type": "text", "text": "boom"}]));
    assert_eq!(reply["result"]["resultType"], "complete");
    let reply = fake.request(json!(2), "tools/call", modern_tool_call("fail", json!({})));
    assert_eq!(reply["result"]["content"][0]["text"], "fakemcp: fail was called");
}

#[test]
fn meta_returns_the_meta_exactly_as_received() {
    let mut fake = Fake::start(&[]);
    let mut meta = modern_meta();
    meta["progressToken"] = json!("tok-1");
    meta["com.example/trace"] = json!({"z": 1, "a": [true]});
    let reply = fake.request(json!(1), "tools/call", json!({"name": "meta", "_meta": meta}));
    assert_eq!(reply["result"]["structuredContent"], json!({"meta": meta}));
    assert_eq!(reply["result"]["content"][0]["text"], json!({"meta": meta}).to_string());

    fake.initialize("2025-11-25");
    let reply = fake.request(json!(2), "tools/call", json!({"name": "meta"}));
    assert_eq!(reply["result"]["structuredContent"], json!({"meta": null}));
}

#[test]
fn env_reports_the_process_environment() {
    let mut fake = Fake::start_with(Command::new(env!("CARGO_BIN_EXE_fakemcp")).env("FAKEMCP_TEST_VAR", "hello there"));
    let reply = fake.request(json!(1), "tools/call", modern_tool_call("env", json!({"name": "FAKEMCP_TEST_VAR"})));
    assert_eq!(reply["result"]["structuredContent"], json!({"name": "FAKEMCP_TEST_VAR", "value": "hello there"}));
    let reply = fake.request(json!(2), "tools/call", modern_tool_call("env", json!({"name": "FAKEMCP_UNSET_VAR"})));
    assert_eq!(reply["result"]["structuredContent"], json!({"name": "FAKEMCP_UNSET_VAR", "value": null}));
    let reply = fake.request(json!(3), "tools/call", modern_tool_call("env", json!({})));
    assert_eq!(reply["error"]["code"], -32602);
}

#[test]
fn ignore_sigterm_survives_sigterm_and_default_does_not() {
    let mut stubborn = Fake::start(&["--ignore-sigterm"]);
    stubborn.startup_line(); // the flag is applied before this line is written
    let mut plain = Fake::start(&[]);
    plain.startup_line();
    use rustix::process::{Pid, Signal, kill_process};
    for fake in [&stubborn, &plain] {
        let pid = Pid::from_raw(fake.child.id() as i32).expect("a child's pid");
        kill_process(pid, Signal::TERM).expect("the child is there to signal");
    }
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(plain.wait_for_exit().signal(), Some(Signal::TERM.as_raw()));
    let reply = stubborn.request(json!(1), "ping", json!({}));
    assert_eq!(reply["result"], json!({}));
}
