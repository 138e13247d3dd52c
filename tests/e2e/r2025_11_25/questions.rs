//! Questions a handshake-era upstream asks mid-call, put to a handshake-era caller as real
//! requests on its connection (here the stdio of `mcpx serve --no-daemon`), and the
//! caller's answers carried back.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use std::time::Duration;

use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::home::Home;
use mcpx_e2e::paths;
use mcpx_e2e::process::{TempDir, tag, wait_until_gone};
use mcpx_e2e::schema;
use mcpx_e2e::serve::Serve;
use serde_json::{Value, json};

/// `mcpx serve --no-daemon` on a config, as a handshake-era caller on its stdio (also used
/// by `tasks`).
pub(super) struct ServeStdio {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    _dir: TempDir,
}

impl ServeStdio {
    pub(super) fn start(config: &Value) -> ServeStdio {
        let dir = TempDir::new();
        let path = dir.path().join("mcpx.json");
        std::fs::write(&path, config.to_string()).unwrap();
        let mut child = Command::new(paths::mcpx())
            .args(["serve", "--no-daemon", "--config"])
            .arg(&path)
            .env("MCPX_STATE_DIR", dir.path().join("state"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mcpx serve");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        ServeStdio { child, stdin, stdout, _dir: dir }
    }

    pub(super) fn send(&mut self, frame: Value) {
        writeln!(self.stdin, "{frame}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next frame mcpx writes, checked against the 2025-11-25 schema.
    pub(super) fn read(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read from mcpx serve");
        assert!(!line.is_empty(), "mcpx serve closed its stdout");
        let frame: Value = serde_json::from_str(&line).expect("a JSON line");
        let method = frame.get("method").and_then(Value::as_str).map(str::to_owned);
        let def = match method.as_deref() {
            Some("sampling/createMessage") => "CreateMessageRequest",
            Some("elicitation/create") => "ElicitRequest",
            Some(_) => "JSONRPCNotification",
            None if frame.get("error").is_some() => "JSONRPCErrorResponse",
            None => "JSONRPCResultResponse",
        };
        schema::spec(schema::LEGACY).assert_valid(def, &frame, "a frame mcpx serve wrote");
        frame
    }

    pub(super) fn initialize(&mut self, capabilities: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "e2e", "version": "0"}}}));
        assert_eq!(self.read()["result"]["protocolVersion"], "2025-11-25");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }
}

impl Drop for ServeStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sampling_call(prompt: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "mcpx_call",
        "arguments": {"server": "fx", "tool": "test_sampling", "arguments": {"prompt": prompt}}}})
}

#[test]
fn a_handshake_era_upstreams_question_is_asked_on_the_callers_connection_and_answered() {
    let t = tag();
    let mut serve =
        ServeStdio::start(&config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]));
    serve.initialize(json!({"sampling": {}}));
    serve.send(sampling_call("What is 2+2?"));

    let question = serve.read();
    assert_eq!(question["method"], "sampling/createMessage", "{question}");
    assert_eq!(question["params"]["messages"][0]["content"]["text"], "What is 2+2?");
    serve.send(json!({"jsonrpc": "2.0", "id": question["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "Four"}, "model": "e2e"}}));

    let answer = serve.read();
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["result"]["content"][0]["text"], "LLM response: Four", "{answer}");
    drop(serve);
    assert_eq!(wait_until_gone(&t, std::time::Duration::from_secs(10)), Vec::<u32>::new());
}

/// Each question put to the caller is a journal record of its own, named by the call it
/// came during, with how the caller answered: an answer, or an error of the caller's.
#[test]
fn each_question_asked_and_how_the_caller_answered_it_is_journaled() {
    let t = tag();
    let home = Home::new(&config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]));
    let mut serve = home.serve().start();
    let answer = serve.request(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
        "clientInfo": {"name": "e2e", "version": "0"}}}));
    assert_eq!(answer.result()["protocolVersion"], "2025-11-25");
    serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for (id, reply) in [
        (2, json!({"result": {"role": "assistant", "content": {"type": "text", "text": "Four"}, "model": "e2e"}})),
        (3, json!({"error": {"code": -1, "message": "the user said no"}})),
    ] {
        let mut call = sampling_call("What is 2+2?");
        call["id"] = id.into();
        serve.send(&call);
        let question = serve.next_frame(Duration::from_secs(10)).expect("the upstream's question");
        assert_eq!(question["method"], "sampling/createMessage", "{question}");
        let mut frame = json!({"jsonrpc": "2.0", "id": question["id"]});
        frame.as_object_mut().unwrap().extend(reply.as_object().unwrap().clone());
        serve.send(&frame);
        serve.answer(&json!(id), Duration::from_secs(10));
    }
    let records = mcpx_e2e::poll(Duration::from_secs(15), || {
        let reply = home.v1("GET", "/v1/log?limit=10", None);
        let records: Vec<Value> = serde_json::from_str::<Value>(&reply.body).ok()?["records"].as_array()?.clone();
        let questions: Vec<Value> = records.into_iter().filter(|r| r["method"] == "sampling/createMessage").collect();
        (questions.len() == 2).then_some(questions)
    })
    .unwrap_or_else(|| panic!("two question records: {}", home.v1("GET", "/v1/log", None).body));
    // Newest first: the refused question, then the answered one.
    for (record, outcome, code) in [(&records[1], "ok", Value::Null), (&records[0], "error", json!(-1))] {
        assert_eq!((&record["server"], &record["name"]), (&json!("fx"), &json!("test_sampling")), "{record}");
        assert_eq!((&record["outcome"], &record["code"]), (&json!(outcome), &code), "{record}");
        assert_eq!(record["transport"], "socket", "{record}");
    }
}

#[test]
fn a_handshake_era_caller_without_the_capability_is_never_asked() {
    let t = tag();
    let mut serve =
        ServeStdio::start(&config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]));
    serve.initialize(json!({}));
    serve.send(sampling_call("p"));
    // The very next frame is the call's answer: no request was put to this caller.
    let answer = serve.read();
    assert_eq!(answer["id"], 2, "mcpx asked a caller that cannot answer: {answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
}

/// The caller's answer to a question, over `limits.maxLineBytes`: the question fails at once
/// with the reason (it does not wait out `timeouts.request`), and the stream goes on. Both
/// on the stdio of `mcpx serve --no-daemon` and through `mcpx serve` to the daemon.
#[test]
fn a_callers_answer_over_max_line_bytes_fails_the_question_at_once_and_the_stream_goes_on() {
    for no_daemon in [true, false] {
        let t = tag();
        let mut cfg = config(&[("fx", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"]))]);
        cfg["limits"] = json!({"maxLineBytes": 4000});
        cfg["timeouts"] = json!({"request": "60s"});
        let home = Home::new(&cfg);
        let serve = home.serve();
        let mut serve = if no_daemon { serve.arg("--no-daemon") } else { serve }.start();
        let answer = serve.request(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
            "clientInfo": {"name": "e2e", "version": "0"}}}));
        assert_eq!(answer.result()["protocolVersion"], "2025-11-25");
        serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));

        let ask = |serve: &mut Serve, id: u64, prompt: &str| {
            let mut call = sampling_call(prompt);
            call["id"] = id.into();
            serve.send(&call);
            let question = serve.next_frame(Duration::from_secs(10)).expect("the upstream's question");
            assert_eq!(question["method"], "sampling/createMessage", "{question}");
            question["id"].clone()
        };
        // The id comes first, as most clients write it; the text makes the line too long.
        let question = ask(&mut serve, 2, "What is 2+2?");
        serve.send(&json!({"jsonrpc": "2.0", "id": question, "result": {
            "role": "assistant", "content": {"type": "text", "text": "Four ".repeat(2000)}, "model": "e2e"}}));
        let answer = serve.answer(&json!(2), Duration::from_secs(10));
        assert!(answer.to_string().contains("limits.maxLineBytes (4000 bytes)"), "the call did not say why: {answer}");

        // Nothing else was lost: the next question is asked and answered on the same stream.
        let question = ask(&mut serve, 3, "And 3+3?");
        serve.send(&json!({"jsonrpc": "2.0", "id": question, "result": {
            "role": "assistant", "content": {"type": "text", "text": "Six"}, "model": "e2e"}}));
        let answer = serve.answer(&json!(3), Duration::from_secs(10));
        assert_eq!(answer.result()["content"][0]["text"], "LLM response: Six", "{answer}");
    }
}
