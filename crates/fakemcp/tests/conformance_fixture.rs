//! End-to-end tests of `fakemcp --fixture conformance`: each test launches the real binary,
//! plays an MCP client over its stdin/stdout (answering the server's own requests where the
//! era has them), and checks the behaviour the official conformance suite's scenarios
//! expect, with a few frames checked against the published JSON schemas.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use jsonschema::{Registry, Validator};
use serde_json::{Value, json};

const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";

/// One `fakemcp --fixture conformance` process.
struct Fixture {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Fixture {
    fn start() -> Fixture {
        let mut child = Command::new(env!("CARGO_BIN_EXE_fakemcp"))
            .args(["--fixture", "conformance", "--tag", "conformance-fixture-test"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("fakemcp starts");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        Fixture { child, stdin, lines }
    }

    /// A process with an open legacy session (the client declares sampling and elicitation).
    fn legacy() -> Fixture {
        let mut fixture = Fixture::start();
        let (_, reply) = fixture.call(
            json!(0),
            "initialize",
            json!({
                "protocolVersion": LEGACY,
                "capabilities": {"sampling": {}, "elicitation": {}},
                "clientInfo": {"name": "conformance-fixture-test", "version": "0"},
            }),
        );
        schema(LEGACY).assert_valid("InitializeResult", &reply["result"]);
        fixture.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        fixture
    }

    fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    fn recv(&mut self) -> Value {
        let line = self.lines.recv_timeout(REPLY_TIMEOUT).expect("a line on stdout in time");
        let message: Value = serde_json::from_str(&line).expect("stdout carries only JSON");
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        message
    }

    /// Sends a request and reads until its response: (everything before it, the response).
    fn call(&mut self, id: Value, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until_response(&id)
    }

    fn until_response(&mut self, id: &Value) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let message = self.recv();
            let is_response = message.get("method").is_none();
            if is_response && message["id"] == *id {
                return (before, message);
            }
            before.push(message);
        }
    }

    /// A modern request: `params` plus the required `_meta` (and `extra_meta`).
    fn modern(&mut self, id: Value, method: &str, params: Value, extra_meta: Value) -> (Vec<Value>, Value) {
        let mut params = params;
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities":
                {"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}},
        });
        for (key, value) in extra_meta.as_object().cloned().unwrap_or_default() {
            meta[key] = value;
        }
        params["_meta"] = meta;
        self.call(id, method, params)
    }

    fn expect_silence(&mut self, wait: Duration) {
        match self.lines.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(line) => panic!("expected silence, got {line}"),
            Err(RecvTimeoutError::Disconnected) => panic!("fakemcp closed stdout"),
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One revision's published schema, checking frames against its `$defs`.
struct Schema {
    uri: String,
    registry: Registry<'static>,
}

fn schema(revision: &str) -> Schema {
    // MCPX_SPEC_DIR, else the repository's copy (spec/README.md).
    let dir = std::env::var_os("MCPX_SPEC_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/schema"));
    let path = dir.join(revision).join("schema.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {} ({e}); set MCPX_SPEC_DIR to a folder of schemas", path.display()));
    let document: Value = serde_json::from_str(&text).unwrap();
    let uri = format!("https://fakemcp.test/spec/{revision}/schema.json");
    let registry =
        Registry::new().add(&uri, document).and_then(|builder| builder.prepare()).expect("the schema registers");
    Schema { uri, registry }
}

impl Schema {
    #[track_caller]
    fn assert_valid(&self, definition: &str, instance: &Value) {
        let wrapper = json!({"$ref": format!("{}#/$defs/{definition}", self.uri)});
        let validator: Validator = jsonschema::options()
            .with_registry(&self.registry)
            .build(&wrapper)
            .unwrap_or_else(|e| panic!("cannot compile {definition}: {e}"));
        let violations: Vec<String> =
            validator.iter_errors(instance).map(|e| format!("at {:?}: {e}", e.instance_path().as_str())).collect();
        assert!(violations.is_empty(), "not a valid {definition}:\n  {}\n{instance:#}", violations.join("\n  "));
    }
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array().expect("a list").iter().map(|item| item["name"].as_str().expect("a name")).collect()
}

fn first_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().expect("a text block")
}

const BOTH_ERA_TOOLS: [&str; 15] = [
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_tool_with_progress",
    "test_error_handling",
    "test_tool_with_logging",
    "test_logging_levels",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "json_schema_2020_12_tool",
    "test_reconnection",
];

const MODERN_ONLY_TOOLS: [&str; 13] = [
    "test_missing_capability",
    "test_streaming_elicitation",
    "test_logging_tool",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
];

#[test]
fn legacy_session_announces_and_lists_the_whole_surface() {
    let mut fixture = Fixture::start();
    let (_, reply) = fixture.call(
        json!(0),
        "initialize",
        json!({"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}),
    );
    assert_eq!(
        reply["result"]["capabilities"],
        json!({
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        })
    );

    let (_, tools) = fixture.call(json!(1), "tools/list", json!({}));
    schema(LEGACY).assert_valid("ListToolsResult", &tools["result"]);
    let listed = names(&tools["result"]["tools"]);
    for tool in BOTH_ERA_TOOLS {
        assert!(listed.contains(&tool), "{tool} missing from {listed:?}");
    }
    for tool in MODERN_ONLY_TOOLS {
        assert!(!listed.contains(&tool), "{tool} is modern-only");
    }
    assert!(listed.contains(&"whoami"), "the standard tools stay");
    let raw = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "json_schema_2020_12_tool")
        .unwrap();
    let schema_2020 = &raw["inputSchema"];
    assert_eq!(schema_2020["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(schema_2020["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(schema_2020["additionalProperties"], false);
    for keyword in ["allOf", "if", "then", "else"] {
        assert!(schema_2020.get(keyword).is_some(), "{keyword} kept");
    }
    // The task tools say whether they run as tasks (2025-11-25 tool-level negotiation).
    let support = |name: &str| {
        let tool = tools["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == name).cloned();
        tool.map(|t| t["execution"]["taskSupport"].clone())
    };
    assert_eq!(support("slow_compute"), Some(json!("optional")));
    assert_eq!(support("confirm_delete"), Some(json!("required")));
    assert_eq!(support("test_tool_with_task"), None, "its question is a 2026 round");

    let (_, resources) = fixture.call(json!(2), "resources/list", json!({}));
    assert_eq!(
        resources["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["uri"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["test://static-text", "test://static-binary", "test://watched-resource"]
    );
    let (_, templates) = fixture.call(json!(3), "resources/templates/list", json!({}));
    assert_eq!(templates["result"]["resourceTemplates"][0]["uriTemplate"], "test://template/{id}/data");
    let (_, prompts) = fixture.call(json!(4), "prompts/list", json!({}));
    schema(LEGACY).assert_valid("ListPromptsResult", &prompts["result"]);
    assert_eq!(
        names(&prompts["result"]["prompts"]),
        [
            "test_simple_prompt",
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image"
        ]
    );
    for (id, method) in [(5, "logging/setLevel"), (6, "resources/subscribe"), (7, "resources/unsubscribe"), (8, "ping")]
    {
        let params = json!({"level": "info", "uri": "test://watched-resource"});
        let (_, reply) = fixture.call(json!(id), method, params);
        assert_eq!(reply["result"], json!({}), "{method}");
    }
}

#[test]
fn modern_discover_and_every_cacheable_result_carry_caching_hints() {
    let mut fixture = Fixture::start();
    let modern = schema(MODERN);
    let (_, discover) = fixture.modern(json!(1), "server/discover", json!({}), json!({}));
    let discover = &discover["result"];
    modern.assert_valid("DiscoverResult", discover);
    assert_eq!(discover["supportedVersions"], json!([MODERN]));
    for capability in ["tools", "resources", "prompts", "completions"] {
        assert!(discover["capabilities"].get(capability).is_some(), "{capability}");
    }

    let (_, tools) = fixture.modern(json!(2), "tools/list", json!({}), json!({}));
    modern.assert_valid("ListToolsResult", &tools["result"]);
    let listed = names(&tools["result"]["tools"]);
    for tool in BOTH_ERA_TOOLS.iter().chain(&MODERN_ONLY_TOOLS) {
        assert!(listed.contains(tool), "{tool} missing from {listed:?}");
    }
    let (_, prompts) = fixture.modern(json!(3), "prompts/list", json!({}), json!({}));
    modern.assert_valid("ListPromptsResult", &prompts["result"]);
    assert!(names(&prompts["result"]["prompts"]).contains(&"test_input_required_result_prompt"));
    let (_, resources) = fixture.modern(json!(4), "resources/list", json!({}), json!({}));
    modern.assert_valid("ListResourcesResult", &resources["result"]);
    let (_, templates) = fixture.modern(json!(5), "resources/templates/list", json!({}), json!({}));
    modern.assert_valid("ListResourceTemplatesResult", &templates["result"]);
    let first_uri = resources["result"]["resources"][0]["uri"].clone();
    let (_, read) = fixture.modern(json!(6), "resources/read", json!({"uri": first_uri}), json!({}));
    modern.assert_valid("ReadResourceResult", &read["result"]);

    for (result, scope) in [
        (discover, "public"),
        (&tools["result"], "public"),
        (&prompts["result"], "public"),
        (&resources["result"], "public"),
        (&templates["result"], "public"),
        (&read["result"], "private"),
    ] {
        assert_eq!(result["resultType"], "complete");
        assert!(result["ttlMs"].as_u64().is_some(), "ttlMs on {result}");
        assert_eq!(result["cacheScope"], scope);
    }
    // Gone from the modern wire, even though a legacy session has them.
    for method in ["ping", "logging/setLevel", "resources/subscribe", "initialize"] {
        let (_, reply) = fixture.modern(json!(method), method, json!({}), json!({}));
        assert_eq!(reply["error"]["code"], -32601, "{method}");
    }
}

#[test]
fn simple_text_tool_answers_a_call_without_arguments_in_both_eras() {
    let expected = "This is a simple text response for testing.";
    let mut legacy = Fixture::legacy();
    let (_, reply) = legacy.call(json!(1), "tools/call", json!({"name": "test_simple_text"}));
    assert_eq!(first_text(&reply["result"]), expected);
    assert!(reply["result"].get("resultType").is_none());

    let mut modern = Fixture::start();
    let (_, reply) = modern.modern(json!(1), "tools/call", json!({"name": "test_simple_text"}), json!({}));
    schema(MODERN).assert_valid("CallToolResult", &reply["result"]);
    assert_eq!(first_text(&reply["result"]), expected);
    assert_eq!(reply["result"]["resultType"], "complete");

    let (_, error) = modern.modern(json!(2), "tools/call", json!({"name": "test_error_handling"}), json!({}));
    assert_eq!(error["result"]["isError"], true, "a tool failure is a result");
}

#[test]
fn progress_notifications_echo_the_token_before_the_result_in_both_eras() {
    let check = |before: &[Value], reply: &Value, token: &Value| {
        let progress: Vec<&Value> =
            before.iter().filter(|m| m["method"] == "notifications/progress").map(|m| &m["params"]).collect();
        assert!(progress.len() >= 3, "{before:?}");
        assert!(progress.iter().all(|p| p["progressToken"] == *token));
        let values: Vec<f64> = progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect();
        assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
        assert!(reply.get("result").is_some(), "{reply}");
    };

    let mut legacy = Fixture::legacy();
    let started = Instant::now();
    let (before, reply) =
        legacy.call(json!(1), "tools/call", json!({"name": "test_tool_with_progress", "_meta": {"progressToken": 7}}));
    check(&before, &reply, &json!(7));
    assert!(started.elapsed() >= Duration::from_millis(90), "about 50 ms apart");

    let mut modern = Fixture::start();
    let (before, reply) = modern.modern(
        json!(1),
        "tools/call",
        json!({"name": "test_tool_with_progress"}),
        json!({"progressToken": "progress-test-1"}),
    );
    check(&before, &reply, &json!("progress-test-1"));
    for notification in &before {
        schema(MODERN).assert_valid("ProgressNotification", notification);
    }
}

#[test]
fn logging_follows_the_session_level_in_legacy_and_the_request_level_in_modern() {
    let logs = |before: &[Value]| -> Vec<String> {
        before
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .map(|m| format!("{}:{}", m["params"]["level"].as_str().unwrap(), m["params"]["data"]))
            .collect()
    };
    let mut legacy = Fixture::legacy();
    let (before, _) = legacy.call(json!(1), "tools/call", json!({"name": "test_tool_with_logging"}));
    assert_eq!(
        logs(&before),
        ["info:\"Tool execution started\"", "info:\"Tool processing data\"", "info:\"Tool execution completed\""]
    );
    legacy.call(json!(2), "logging/setLevel", json!({"level": "error"}));
    let (before, _) = legacy.call(json!(3), "tools/call", json!({"name": "test_tool_with_logging"}));
    assert!(logs(&before).is_empty(), "info is below the session's error level");

    let mut modern = Fixture::start();
    let (before, reply) = modern.modern(json!(1), "tools/call", json!({"name": "test_logging_tool"}), json!({}));
    assert!(logs(&before).is_empty() && reply.get("result").is_some(), "no logLevel, no logs");
    let (before, _) = modern.modern(
        json!(2),
        "tools/call",
        json!({"name": "test_tool_with_logging"}),
        json!({"io.modelcontextprotocol/logLevel": "info"}),
    );
    assert_eq!(logs(&before).len(), 3);
    let (_, reply) = modern.modern(
        json!(3),
        "tools/call",
        json!({"name": "test_logging_tool"}),
        json!({"io.modelcontextprotocol/logLevel": "loud"}),
    );
    assert_eq!(reply["error"]["code"], -32602);
}

#[test]
fn legacy_sampling_asks_the_client_and_answers_with_its_reply() {
    let mut fixture = Fixture::legacy();
    fixture.send(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "test_sampling", "arguments": {"prompt": "Say hi"}},
    }));
    let request = fixture.recv();
    assert_eq!(request["method"], "sampling/createMessage");
    assert_eq!(
        request["params"],
        json!({"messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}], "maxTokens": 100})
    );
    schema(LEGACY).assert_valid("CreateMessageRequest", &request);
    // The reader keeps serving while the tool waits: a ping is answered first.
    let (_, pong) = fixture.call(json!("ping-while-waiting"), "ping", json!({}));
    assert_eq!(pong["result"], json!({}));
    fixture.send(&json!({
        "jsonrpc": "2.0", "id": request["id"],
        "result": {"role": "assistant", "content": {"type": "text", "text": "hi there"}, "model": "m", "stopReason": "endTurn"},
    }));
    let (_, reply) = fixture.until_response(&json!(1));
    assert_eq!(first_text(&reply["result"]), "LLM response: hi there");

    // A client that refuses gets a tool failure, not a hang.
    fixture.send(&json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "test_elicitation_sep1034_defaults"},
    }));
    let request = fixture.recv();
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["requestedSchema"]["properties"]["score"]["default"], 95.5);
    assert_ne!(request["id"], json!(1), "fakemcp mints its own ids");
    fixture.send(&json!({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no"}}));
    let (_, reply) = fixture.until_response(&json!(2));
    assert_eq!(reply["result"]["isError"], true);
}

#[test]
fn input_required_asks_then_completes_across_rounds() {
    let mut fixture = Fixture::start();
    let modern = schema(MODERN);
    let call = |name: &str, extra: Value| {
        let mut params = json!({"name": name, "arguments": {}});
        for (key, value) in extra.as_object().cloned().unwrap_or_default() {
            params[key] = value;
        }
        params
    };

    let (_, r1) =
        fixture.modern(json!(1), "tools/call", call("test_input_required_result_elicitation", json!({})), json!({}));
    let r1 = &r1["result"];
    modern.assert_valid("InputRequiredResult", r1);
    assert_eq!(r1["resultType"], "input_required");
    assert_eq!(r1["inputRequests"]["user_name"]["method"], "elicitation/create");
    let (_, r2) = fixture.modern(
        json!(2),
        "tools/call",
        call(
            "test_input_required_result_elicitation",
            json!({
                "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}, "extra": {}},
                "requestState": r1["requestState"],
            }),
        ),
        json!({}),
    );
    assert_eq!(r2["result"]["resultType"], "complete");
    assert_eq!(first_text(&r2["result"]), "Hello, Alice!");

    // Three rounds: the second asks anew with a new state; the third completes.
    let name = "test_input_required_result_multi_round";
    let (_, r1) = fixture.modern(json!(3), "tools/call", call(name, json!({})), json!({}));
    let state1 = r1["result"]["requestState"].clone();
    let (_, r2) = fixture.modern(
        json!(4),
        "tools/call",
        call(name, json!({"inputResponses": {"step1": {"action": "accept", "content": {"name": "Bo"}}}, "requestState": state1})),
        json!({}),
    );
    assert_eq!(r2["result"]["resultType"], "input_required");
    assert!(r2["result"]["inputRequests"].get("step2").is_some());
    assert_ne!(r2["result"]["requestState"], state1);
    let (_, r3) = fixture.modern(
        json!(5),
        "tools/call",
        call(
            name,
            json!({
                "inputResponses": {"step2": {"action": "accept", "content": {"color": "teal"}}},
                "requestState": r2["result"]["requestState"],
            }),
        ),
        json!({}),
    );
    assert_eq!(first_text(&r3["result"]), "Multi-round complete: Bo likes teal");

    // prompts/get does the same.
    let (_, p1) =
        fixture.modern(json!(6), "prompts/get", json!({"name": "test_input_required_result_prompt"}), json!({}));
    assert_eq!(p1["result"]["inputRequests"]["user_context"]["method"], "elicitation/create");
    let (_, p2) = fixture.modern(
        json!(7),
        "prompts/get",
        json!({
            "name": "test_input_required_result_prompt",
            "inputResponses": {"user_context": {"action": "accept", "content": {"context": "tests"}}},
            "requestState": p1["result"]["requestState"],
        }),
        json!({}),
    );
    modern.assert_valid("GetPromptResult", &p2["result"]);
    assert_eq!(p2["result"]["resultType"], "complete");

    // Only what the request's capabilities allow is asked for.
    let mut only_sampling = json!({"name": "test_input_required_result_capabilities"});
    only_sampling["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
    });
    let (_, reply) = fixture.call(json!(8), "tools/call", only_sampling);
    let methods: Vec<&Value> =
        reply["result"]["inputRequests"].as_object().unwrap().values().map(|request| &request["method"]).collect();
    assert_eq!(methods, [&json!("sampling/createMessage")]);
}

#[test]
fn tampered_state_malformed_answers_and_undeclared_capabilities_are_refused() {
    let mut fixture = Fixture::start();
    let name = "test_input_required_result_tampered_state";
    let (_, r1) = fixture.modern(json!(1), "tools/call", json!({"name": name}), json!({}));
    let state = r1["result"]["requestState"].as_str().unwrap().to_owned();
    let confirm = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let (_, tampered) = fixture.modern(
        json!(2),
        "tools/call",
        json!({"name": name, "inputResponses": confirm, "requestState": format!("{state}-TAMPERED")}),
        json!({}),
    );
    assert_eq!(tampered["error"]["code"], -32602, "{tampered}");
    let (_, intact) = fixture.modern(
        json!(3),
        "tools/call",
        json!({"name": name, "inputResponses": confirm, "requestState": state}),
        json!({}),
    );
    assert_eq!(first_text(&intact["result"]), "integrity-ok: requestState verified");
    let (_, elsewhere) = fixture.modern(
        json!(4),
        "tools/call",
        json!({"name": "test_input_required_result_request_state", "inputResponses": confirm, "requestState": state}),
        json!({}),
    );
    assert_eq!(elsewhere["error"]["code"], -32602, "a state is bound to its request");

    let elicitation = "test_input_required_result_elicitation";
    for (id, responses) in [(5, json!({"user_name": 12345})), (6, Value::Null)] {
        let (_, reply) = fixture.modern(
            json!(id),
            "tools/call",
            json!({"name": elicitation, "inputResponses": responses}),
            json!({}),
        );
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
    }
    let (_, wrong_key) = fixture.modern(
        json!(7),
        "tools/call",
        json!({"name": elicitation, "inputResponses": {"wrong_key": {"action": "accept", "content": {}}}}),
        json!({}),
    );
    assert_eq!(wrong_key["result"]["resultType"], "input_required", "re-asks");

    let mut no_capabilities = json!({"name": elicitation});
    no_capabilities["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let (_, reply) = fixture.call(json!(8), "tools/call", no_capabilities.clone());
    assert_eq!(reply["error"]["code"], -32021);
    assert_eq!(reply["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}));
    no_capabilities["name"] = json!("test_missing_capability");
    let (_, reply) = fixture.call(json!(9), "tools/call", no_capabilities);
    schema(MODERN).assert_valid("MissingRequiredClientCapabilityError", &reply);
    assert_eq!(reply["error"]["data"]["requiredCapabilities"], json!({"sampling": {}}));
    let (_, reply) = fixture.modern(json!(10), "tools/call", json!({"name": "test_missing_capability"}), json!({}));
    assert_eq!(reply["result"]["resultType"], "complete");
}

#[test]
fn listen_is_acknowledged_then_hears_only_the_changes_it_asked_for_until_cancelled() {
    let mut fixture = Fixture::start();
    let modern = schema(MODERN);
    let listen = |fixture: &mut Fixture, id: &str, filter: Value| {
        let mut params = json!({"notifications": filter});
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        });
        fixture.send(&json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": params}));
        let ack = fixture.recv();
        modern.assert_valid("SubscriptionsAcknowledgedNotification", &ack);
        assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], id);
        ack
    };
    let ack = listen(&mut fixture, "tools-listen", json!({"toolsListChanged": true, "rootsListChanged": true}));
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "only what is honoured");
    listen(&mut fixture, "prompts-listen", json!({"promptsListChanged": true}));

    let (before, reply) =
        fixture.modern(json!(1), "tools/call", json!({"name": "test_trigger_tool_change"}), json!({}));
    assert_eq!(
        before,
        [json!({
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {"io.modelcontextprotocol/subscriptionId": "tools-listen"}},
        })]
    );
    assert_eq!(reply["result"]["resultType"], "complete");

    fixture
        .send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "tools-listen"}}));
    let (_, end) = fixture.until_response(&json!("tools-listen"));
    modern.assert_valid("SubscriptionsListenResult", &end["result"]);
    assert_eq!(end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "tools-listen");

    let (before, _) = fixture.modern(json!(2), "tools/call", json!({"name": "test_trigger_tool_change"}), json!({}));
    assert!(before.is_empty(), "a cancelled subscription hears nothing: {before:?}");
    let (before, _) = fixture.modern(json!(3), "tools/call", json!({"name": "test_trigger_prompt_change"}), json!({}));
    assert_eq!(before.len(), 1);
    assert_eq!(before[0]["method"], "notifications/prompts/list_changed");
    assert_eq!(before[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "prompts-listen");
    fixture.expect_silence(Duration::from_millis(100));
}

#[test]
fn resources_read_by_uri_and_template_and_unknown_uris_are_not_found_by_era() {
    let mut modern = Fixture::start();
    let (_, text) = modern.modern(json!(1), "resources/read", json!({"uri": "test://static-text"}), json!({}));
    assert_eq!(
        text["result"]["contents"][0],
        json!({"uri": "test://static-text", "mimeType": "text/plain", "text": "This is the content of the static text resource."})
    );
    let (_, binary) = modern.modern(json!(2), "resources/read", json!({"uri": "test://static-binary"}), json!({}));
    assert_eq!(binary["result"]["contents"][0]["mimeType"], "image/png");
    assert!(binary["result"]["contents"][0]["blob"].as_str().unwrap().starts_with("iVBOR"));
    let (_, templated) =
        modern.modern(json!(3), "resources/read", json!({"uri": "test://template/123/data"}), json!({}));
    let data: Value = serde_json::from_str(templated["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(data, json!({"id": "123", "templateTest": true, "data": "Data for ID: 123"}));

    let missing = "test://nonexistent-resource-for-conformance-testing";
    let (_, not_found) = modern.modern(json!(4), "resources/read", json!({"uri": missing}), json!({}));
    assert_eq!(not_found["error"]["code"], -32602);
    assert_eq!(not_found["error"]["data"]["uri"], missing);

    let mut legacy = Fixture::legacy();
    let (_, not_found) = legacy.call(json!(1), "resources/read", json!({"uri": missing}));
    assert_eq!(not_found["error"]["code"], -32002);
    assert_eq!(not_found["error"]["data"]["uri"], missing);
}

#[test]
fn prompts_take_their_arguments_and_completion_suggests_values() {
    let mut legacy = Fixture::legacy();
    let (_, prompt) = legacy.call(
        json!(1),
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "testValue1", "arg2": "testValue2"}}),
    );
    schema(LEGACY).assert_valid("GetPromptResult", &prompt["result"]);
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        "Prompt with arguments: arg1='testValue1', arg2='testValue2'"
    );
    let (_, missing) =
        legacy.call(json!(2), "prompts/get", json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x"}}));
    assert_eq!(missing["error"]["code"], -32602);
    let (_, embedded) = legacy.call(
        json!(3),
        "prompts/get",
        json!({"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://example-resource"}}),
    );
    assert_eq!(embedded["result"]["messages"][0]["content"]["resource"]["uri"], "test://example-resource");

    let (_, completion) = legacy.call(
        json!(4),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "a"}}),
    );
    schema(LEGACY).assert_valid("CompleteResult", &completion["result"]);
    assert_eq!(completion["result"]["completion"]["values"], json!(["alpha", "apple", "avocado"]));

    let mut modern = Fixture::start();
    let (_, completion) = modern.modern(
        json!(1),
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"}, "argument": {"name": "id", "value": "4"}}),
        json!({}),
    );
    schema(MODERN).assert_valid("CompleteResult", &completion["result"]);
    assert_eq!(completion["result"]["completion"]["values"], json!(["456"]));
}
