//! The `/v1` types against `docs/api/openapi.json`: for every JSON body the document
//! describes (a request, or a response by status), a complete example of the Rust type
//! that carries it must match the document's schema, made strict: no property beyond the
//! documented ones, and every documented one present. So a field renamed on either side,
//! or added on one side only, fails here.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::*;

fn document() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/api/openapi.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// Every schema that lists `properties` takes no others and needs them all.
fn strict(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::Object(properties)) = object.get("properties") {
                let names: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
                object.insert("required".into(), Value::Array(names));
                object.entry("additionalProperties").or_insert(Value::Bool(false));
            }
            object.values_mut().for_each(strict);
        }
        Value::Array(items) => items.iter_mut().for_each(strict),
        _ => {}
    }
}

fn to_value(example: impl Serialize) -> Value {
    serde_json::to_value(example).expect("an example serialises")
}

/// A JSON pointer to `segments` in the document, as a URI fragment (`{id}` is escaped).
fn pointer(segments: &[&str]) -> String {
    const FRAGMENT: &percent_encoding::AsciiSet =
        &percent_encoding::CONTROLS.add(b' ').add(b'%').add(b'{').add(b'}').add(b'"').add(b'<').add(b'>');
    let escaped: Vec<String> = segments
        .iter()
        .map(|s| percent_encoding::utf8_percent_encode(&s.replace('~', "~0").replace('/', "~1"), FRAGMENT).to_string())
        .collect();
    format!("#/{}", escaped.join("/"))
}

/// Whether `example` matches the (strict) schema at `at` in the document.
fn mismatches(strict_document: &Value, at: &str, example: &Value) -> Vec<String> {
    let mut root = strict_document.clone();
    root["$ref"] = Value::String(at.to_owned());
    let validator = jsonschema::validator_for(&root).unwrap_or_else(|e| panic!("{at}: not a schema: {e}"));
    validator.iter_errors(example).map(|e| format!("{e} (at {})", e.instance_path())).collect()
}

/// A task as the 2026 tasks extension shapes it (kept as JSON, like a tool's result).
fn task() -> Value {
    json!({
        "taskId": "eyJ2IjoxfQ.c2ln",
        "status": "completed",
        "createdAt": "2026-01-01T00:00:00.000Z",
        "lastUpdatedAt": "2026-01-01T00:00:01.000Z",
        "ttlMs": 3_600_000,
        "pollIntervalMs": 500,
        "result": {"content": [{"type": "text", "text": "done"}]},
    })
}

fn question() -> Question {
    let mut requests = Map::new();
    requests.insert("confirm".into(), json!({"method": "elicitation/create", "params": {"message": "Sure?"}}));
    Question {
        id: "q1".into(),
        server: "alpha".into(),
        tool: "deploy".into(),
        input_requests: requests,
        expires_in_ms: Some(600_000),
        answer: "mcpx ask answer q1 '<json answers by key>'".into(),
    }
}

fn object(pairs: Value) -> Map<String, Value> {
    pairs.as_object().cloned().expect("an object")
}

/// Complete examples of the Rust types that carry each JSON body the document describes:
/// `part` is `request` or a response status. `None`: no example is checked, for a reason
/// given in the match.
fn examples(path: &str, method: &str, part: &str) -> Option<Vec<Value>> {
    let call = CallRequest { server: "alpha".into(), tool: "echo".into(), arguments: Some(object(json!({"a": 1}))) };
    let running = Running::call("c1".into(), Some("/v1/ask/poll?call=c1".into()));
    let examples = match (path, method, part) {
        ("/v1/status", "get", "200") => vec![to_value(Status {
            pid: 42,
            version: "0.1.0".into(),
            url: "http://127.0.0.1:7750/mcp".into(),
            socket: Some("/run/user/1000/mcpx/mcpx.sock".into()),
            config: Some("/home/a/.mcpx.json".into()),
            started_at: 1_700_000_000,
            uptime_ms: 1234,
            workers: 2,
            servers: vec![ServerStatus {
                name: "alpha".into(),
                scope: "global".into(),
                failing: Some(Failing {
                    failures: 2,
                    last_error: "exited".into(),
                    retry_in_ms: 1000,
                    crash_loop: true,
                }),
            }],
            instances: vec![InstanceStatus {
                server: "alpha".into(),
                key: "global".into(),
                pid: Some(43),
                age_ms: 10,
                idle_ms: 5,
                in_use: 1,
            }],
            journal_dropped: Some(3),
            cluster: Some(ClusterStatus {
                node: "mcpx-a".into(),
                url: "http://10.0.0.5:7750".into(),
                lease_ttl_ms: 10_000,
                leases: vec![LeaseStatus { server: "alpha".into(), key: "global".into(), fence: 4 }],
                recovered: vec![RecoveredStatus {
                    server: "alpha".into(),
                    key: "global".into(),
                    previous_owner: "mcpx-b".into(),
                    fence: 4,
                }],
                redis_error: Some("connection refused".into()),
            }),
        })],
        ("/v1/tools", "get", "200") => vec![to_value(ToolList {
            query: "echo".into(),
            tools: vec![ToolEntry {
                server: "alpha".into(),
                tool: "echo".into(),
                js: Some("tools.alpha.echo".into()),
                title: Some("Echo".into()),
                description: Some("Says it back".into()),
                input_schema: Some(json!({"type": "object"})),
            }],
            unavailable: Some(vec![Unavailable { server: "beta".into(), error: "did not start".into() }]),
        })],
        ("/v1/call" | "/v1/ask/begin", "post", "request") => vec![to_value(&call)],
        ("/v1/exec", "post", "request") => {
            vec![to_value(ExecRequest { script: "return 1".into(), timeout_ms: Some(500) })]
        }
        ("/v1/call" | "/v1/ask/answer", "post", "202") => vec![to_value(Waiting::on(question()))],
        ("/v1/artifacts", "get", "200") => vec![to_value(ArtifactList {
            artifacts: vec![ArtifactEntry {
                uri: "mcpx://artifacts/0123456789abcdef0123456789abcdef".into(),
                name: "a.txt".into(),
                mime_type: "text/plain".into(),
                size: 4,
            }],
        })],
        ("/v1/stop", "post", "202") => vec![to_value(Stopping { stopping: true, pid: 42 })],
        ("/v1/ask", "get", "200") => {
            vec![to_value(QuestionList { questions: vec![question()] }), to_value(question())]
        }
        ("/v1/ask/answer", "post", "request") => {
            vec![to_value(AnswerRequest {
                id: "q1".into(),
                responses: object(json!({"confirm": {"action": "accept"}})),
            })]
        }
        ("/v1/ask/abandon", "post", "request") => vec![to_value(AbandonRequest { id: "q1".into() })],
        ("/v1/ask/abandon", "post", "200") => vec![to_value(Abandoned { abandoned: "q1".into() })],
        ("/v1/ask/begin", "post", "202") => vec![to_value(&running)],
        ("/v1/ask/poll", "get", "202") => vec![to_value(&running), to_value(Waiting::on(question()))],
        ("/v1/auth", "get", "200") => vec![to_value(AuthList {
            servers: vec![AuthEntry {
                server: "docs".into(),
                state: "loggedIn".into(),
                expires_at: Some(1_700_003_600),
                scopes: vec!["mcp:read".into()],
                issuer: Some("https://auth.example.com".into()),
            }],
        })],
        ("/v1/auth/login" | "/v1/auth/logout", "post", "request") => {
            vec![to_value(AuthServerRequest { server: "docs".into() })]
        }
        ("/v1/auth/login", "post", "200") => vec![to_value(LoginStarted {
            id: "l1".into(),
            server: "docs".into(),
            url: "https://auth.example.com/authorize?client_id=x".into(),
            expires_in_ms: 300_000,
        })],
        ("/v1/auth/wait", "post", "request") => {
            vec![to_value(LoginWait { id: "l1".into(), wait_ms: Some(1000) })]
        }
        ("/v1/auth/wait", "post", "200") => {
            vec![to_value(LoginProgress { id: "l1".into(), status: "failed".into(), error: Some("wrong iss".into()) })]
        }
        ("/v1/auth/logout", "post", "200") => vec![to_value(LoggedOut { server: "docs".into(), revoked: true })],
        ("/v1/log", "get", "200") => vec![to_value(Log {
            records: vec![LogRecord {
                id: 7,
                time_ms: 1_700_000_000_000,
                client: Some("ci".into()),
                session: Some("session@\"ci\":a".into()),
                transport: "http".into(),
                revision: "2025-11-25".into(),
                server: Some("alpha".into()),
                instance: Some("alpha[global]".into()),
                method: "tools/call".into(),
                name: Some("echo".into()),
                in_script: false,
                duration_ms: 1.5,
                outcome: "error".into(),
                code: Some(-32602),
                bytes_in: 40,
                bytes_out: 0,
                arguments: Some("{\"password\":\"[redacted]\"}".into()),
            }],
            dropped: 0,
        })],
        ("/v1/stats", "get", "200") => vec![to_value(Stats {
            by: "server".into(),
            groups: vec![StatsGroup {
                key: Some("alpha".into()),
                calls: 10,
                errors: 1,
                error_rate: 0.1,
                p50_ms: 1.0,
                p95_ms: 2.0,
                p99_ms: 3.0,
            }],
            dropped: 2,
        })],
        ("/v1/tasks", "post", "request") => vec![to_value(&call)],
        ("/v1/tasks", "post", "202") | ("/v1/tasks/{id}" | "/v1/tasks/{id}/cancel", _, "200") => vec![task()],
        ("/v1/tasks", "get", "200") => vec![to_value(TaskList { tasks: vec![task()] })],
        ("/v1/cluster/relay", "post", "request") => {
            let place = mcpx_gateway::scope::Place { path: "/w".into(), node: None, principal: Default::default() };
            vec![to_value(mcpx_gateway::cluster::NodeRequest {
                server: "alpha".into(),
                method: "tools/call".into(),
                params: json!({"name": "echo", "arguments": {"text": "hi"}}),
                meta: Some(Map::from_iter([("progressToken".to_owned(), json!(1))])),
                owner: mcpx_gateway::Owner::Cwd(place),
                session: Some(mcpx_gateway::Session::Named("a".into())),
                call_id: "5f0c2c7e9b8a4d21a0f3c6d9e1b2a4c7".into(),
                cwd: Some("/w".into()),
                host: Some(Map::from_iter([("qwen-code/invocation".to_owned(), json!({"sessionId": "q"}))])),
                listen: Some(mcpx_gateway::cluster::Listening {
                    progress: true,
                    log_level: Some("warning".into()),
                    asks: Some(json!({"elicitation": {}})),
                }),
            })]
        }
        // What the owner's upstream answered, passed through as a `Value`.
        ("/v1/cluster/relay", "post", "200") => return None,
        ("/v1/cluster/relay/answer", "post", "request") => {
            let answered =
                RelayAnswer { id: "9c1f".into(), outcome: RelayOutcome::Result(json!({"action": "decline"})) };
            let failed = RelayAnswer {
                id: "9c20".into(),
                outcome: RelayOutcome::from(Err::<Value, _>(
                    RpcError::invalid_params("no form").with_data(json!({"why": "x"})),
                )),
            };
            vec![to_value(answered), to_value(failed)]
        }
        // A tool's result is the upstream's own, passed through as a `Value`.
        ("/v1/call" | "/v1/exec" | "/v1/ask/answer" | "/v1/ask/poll" | "/v1/tasks", _, "200") => return None,
        _ => vec![],
    };
    Some(examples)
}

/// The documented JSON bodies of one operation: (`request` or a status, pointer to its schema).
fn bodies(document: &Value, path: &str, method: &str) -> Vec<(String, String)> {
    let operation = &document["paths"][path][method];
    let json = "application/json";
    let mut found = Vec::new();
    if operation["requestBody"]["content"][json].get("schema").is_some() {
        found.push(("request".to_owned(), pointer(&["paths", path, method, "requestBody", "content", json, "schema"])));
    }
    for (status, response) in operation["responses"].as_object().into_iter().flatten() {
        if response["content"][json].get("schema").is_some() {
            found.push((
                status.clone(),
                pointer(&["paths", path, method, "responses", status, "content", json, "schema"]),
            ));
        }
    }
    found
}

#[test]
fn every_documented_v1_body_matches_its_rust_type_field_for_field() {
    let document = document();
    let mut strict_document = document.clone();
    strict(&mut strict_document);
    let error = to_value(ErrorBody::from(&RpcError::invalid_params("no such tool").with_data(json!({"tool": "x"}))));
    let mut checked = 0;
    let mut problems = Vec::new();
    for (path, item) in document["paths"].as_object().expect("the document has paths") {
        for method in ["get", "post", "put", "delete", "patch"].into_iter().filter(|m| item.get(*m).is_some()) {
            for (part, at) in bodies(&document, path, method) {
                let schema =
                    &document["paths"][path][method]["responses"][&part]["content"]["application/json"]["schema"];
                let examples = if schema["$ref"] == "#/components/schemas/Error" {
                    vec![error.clone()]
                } else {
                    match examples(path, method, &part) {
                        Some(examples) if examples.is_empty() => {
                            problems.push(format!("{method} {path} {part}: no Rust type is checked against it"));
                            continue;
                        }
                        Some(examples) => examples,
                        None => continue,
                    }
                };
                for example in examples {
                    checked += 1;
                    for why in mismatches(&strict_document, &at, &example) {
                        problems.push(format!("{method} {path} {part}: {example} does not match: {why}"));
                    }
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} bodies were checked: is the document read right?");
    assert!(problems.is_empty(), "the /v1 types and docs/api/openapi.json disagree:\n{}", problems.join("\n"));
}

#[test]
fn every_documented_query_parameter_is_a_field_of_the_route_s_query_type() {
    let document = document();
    let routes = [
        ("/v1/tools", to_value(ToolsQuery { query: "x".into() })),
        ("/v1/ask", to_value(AskQuery { id: Some("q1".into()) })),
        ("/v1/ask/poll", to_value(PollQuery { call: Some("c1".into()), wait_ms: Some(1) })),
        ("/v1/tasks/{id}", to_value(TaskQuery { wait_ms: Some(1) })),
    ];
    for (path, example) in routes {
        let documented: Vec<&str> = document["paths"][path]["get"]["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|p| p["in"] == "query")
            .filter_map(|p| p["name"].as_str())
            .collect();
        let fields: Vec<&str> = example.as_object().expect("a query is an object").keys().map(String::as_str).collect();
        assert_eq!(fields, documented, "GET {path}: the query type's fields are not the documented parameters");
    }
}

#[test]
fn the_strict_check_catches_a_renamed_field() {
    let mut document = document();
    strict(&mut document);
    let at = pointer(&["paths", "/v1/stop", "post", "responses", "202", "content", "application/json", "schema"]);
    assert!(mismatches(&document, &at, &json!({"stopping": true, "pid": 1})).is_empty());
    assert!(!mismatches(&document, &at, &json!({"stopping": true, "processId": 1})).is_empty());
    assert!(!mismatches(&document, &at, &json!({"stopping": true})).is_empty());
}

#[test]
fn a_body_of_the_wrong_shape_is_refused_naming_the_shape() {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime");
    let read = |body: &'static str| {
        runtime.block_on(async {
            let request = axum::http::Request::new(axum::body::Body::from(body));
            match Body::<CallRequest>::from_request(request, &()).await {
                Ok(Body(call)) => Ok(call),
                Err(response) => {
                    let status = response.status();
                    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("a body");
                    let error: ErrorBody = serde_json::from_slice(&bytes).expect("an error body");
                    Err((status, error.error.code, error.error.message))
                }
            }
        })
    };
    let call = read(r#"{"server": "a", "tool": "b"}"#).expect("a call");
    assert_eq!((call.server.as_str(), call.tool.as_str(), call.arguments), ("a", "b", None));
    let (status, code, message) = read(r#"{"server": "a"}"#).expect_err("no tool");
    assert_eq!((status, code), (StatusCode::BAD_REQUEST, mcpx_protocol::code::INVALID_PARAMS));
    assert!(message.contains("{server, tool, arguments}") && message.contains("tool"), "{message}");
    let (status, code, _) = read("{not json").expect_err("not JSON");
    assert_eq!((status, code), (StatusCode::BAD_REQUEST, mcpx_protocol::code::PARSE_ERROR));
}
