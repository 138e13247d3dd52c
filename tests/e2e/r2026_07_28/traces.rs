//! Traces: an OTLP/HTTP receiver in the test process decodes what the real daemon exports.
//! One trace runs from the caller's `traceparent` through mcpx's server span and its client
//! span into the upstream, which receives mcpx's span as its parent in `_meta`; a script's
//! tool calls are children of the script's span; a caller's trace context cannot reach an
//! upstream unchecked; and with no endpoint mcpx makes no span.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::{Daemon, FakeHttp, Modern, config, fakemcp, poll, tag};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message as _;
use serde_json::{Value, json};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

/// One span as the receiver decoded it.
#[derive(Clone, Debug)]
struct Received {
    name: String,
    kind: i32,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    attributes: Vec<(String, String)>,
}

impl Received {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

/// An OTLP/HTTP receiver on a loopback port: every `POST /v1/traces` body is decoded as
/// an `ExportTraceServiceRequest` and its spans kept; anything else fails the test.
struct Receiver {
    port: u16,
    spans: Arc<Mutex<Vec<Received>>>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let receiver = Receiver { port, spans: Default::default(), errors: Default::default() };
        let (spans, errors) = (receiver.spans.clone(), receiver.errors.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (spans, errors) = (spans.clone(), errors.clone());
                std::thread::spawn(move || serve(stream, &spans, &errors));
            }
        });
        receiver
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Received> {
        let errors = self.errors.lock().unwrap();
        assert!(errors.is_empty(), "the receiver got bad exports: {errors:?}");
        self.spans.lock().unwrap().clone()
    }

    /// The spans once `ready` holds for them (within a minute).
    #[track_caller]
    fn until(&self, what: &str, ready: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        poll(Duration::from_secs(60), || Some(self.spans()).filter(|s| ready(s)))
            .unwrap_or_else(|| panic!("never received {what}: {:#?}", self.spans()))
    }
}

/// Answers one connection's requests (HTTP/1.1, kept alive), decoding each body.
fn serve(stream: TcpStream, spans: &Mutex<Vec<Received>>, errors: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().expect("a second handle"));
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let request_line = line.trim_end().to_owned();
        let mut length = 0;
        let mut content_type = String::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap_or((header, ""));
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap_or(0),
                "content-type" => content_type = value.trim().to_owned(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if request_line != "POST /v1/traces HTTP/1.1" || content_type != "application/x-protobuf" {
            errors.lock().unwrap().push(format!("{request_line} ({content_type})"));
        }
        match ExportTraceServiceRequest::decode(body.as_slice()) {
            Ok(export) => spans.lock().unwrap().extend(decoded(export)),
            Err(e) => errors.lock().unwrap().push(format!("not OTLP protobuf: {e}")),
        }
        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn decoded(export: ExportTraceServiceRequest) -> Vec<Received> {
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let mut out = Vec::new();
    for resource in export.resource_spans {
        let service = resource.resource.iter().flat_map(|r| &r.attributes).any(|a| {
            a.key == "service.name"
                && matches!(&a.value, Some(v) if v.value == Some(any_value::Value::StringValue("mcpx".into())))
        });
        assert!(service, "spans without service.name mcpx");
        for span in resource.scope_spans.into_iter().flat_map(|s| s.spans) {
            let attributes = span
                .attributes
                .iter()
                .map(|a| {
                    let value = match a.value.as_ref().and_then(|v| v.value.as_ref()) {
                        Some(any_value::Value::StringValue(s)) => s.clone(),
                        other => format!("{other:?}"),
                    };
                    (a.key.clone(), value)
                })
                .collect();
            out.push(Received {
                name: span.name,
                kind: span.kind,
                trace_id: hex(&span.trace_id),
                span_id: hex(&span.span_id),
                parent_span_id: hex(&span.parent_span_id),
                attributes,
            });
        }
    }
    out
}

/// A daemon exporting to `receiver`, in batches sent every 100 ms.
fn daemon_exporting_to(receiver: &Receiver, servers: &[(&str, Value)]) -> Daemon {
    let mut cfg = config(servers);
    cfg["telemetry"] = json!({ "otlpEndpoint": receiver.endpoint() });
    Daemon::start_with_env(&cfg, &[("OTEL_BSP_SCHEDULE_DELAY", "100")])
}

/// The `_meta` fakemcp's `meta` tool received.
#[track_caller]
fn received_meta(result: &Value) -> serde_json::Map<String, Value> {
    result["meta"].as_object().unwrap_or_else(|| panic!("no meta in {result}")).clone()
}

fn named<'a>(spans: &'a [Received], name: &str) -> Option<&'a Received> {
    spans.iter().find(|s| s.name == name)
}

#[test]
fn one_trace_runs_from_the_caller_through_mcpx_into_the_tool() {
    let receiver = Receiver::start();
    let daemon = daemon_exporting_to(&receiver, &[("up", fakemcp("global", &tag(), &[]))]);
    let reply = Modern::mcpx_call("up", "meta", json!({}))
        .with_id(json!("traced-call-7"))
        .meta("traceparent", json!(format!("00-{TRACE_ID}-{PARENT_ID}-01")))
        .meta("tracestate", json!("rojo=00f067aa0ba902b7"))
        .session("traced")
        .send(daemon.url());
    let meta = received_meta(reply.structured());
    let spans = receiver.until("the server and client spans", |s| {
        named(s, "tools/call mcpx_call").is_some() && named(s, "tools/call meta").is_some()
    });
    let server = named(&spans, "tools/call mcpx_call").unwrap();
    assert_eq!(server.kind, SpanKind::Server as i32, "{server:?}");
    assert_eq!((server.trace_id.as_str(), server.parent_span_id.as_str()), (TRACE_ID, PARENT_ID), "{server:?}");
    assert_eq!(server.attribute("mcp.method.name"), Some("tools/call"));
    assert_eq!(server.attribute("gen_ai.tool.name"), Some("mcpx_call"));
    assert_eq!(server.attribute("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(server.attribute("mcp.protocol.version"), Some("2026-07-28"));
    assert_eq!(server.attribute("mcp.session.id"), Some("traced"));
    assert_eq!(server.attribute("jsonrpc.request.id"), Some("traced-call-7"));
    assert_eq!(server.attribute("mcpx.server.name"), Some("up"));
    assert_eq!(server.attribute("error.type"), None);

    let client = named(&spans, "tools/call meta").unwrap();
    assert_eq!(client.kind, SpanKind::Client as i32, "{client:?}");
    assert_eq!(client.trace_id, TRACE_ID);
    assert_eq!(client.parent_span_id, server.span_id, "the upstream request is a child of mcpx's request span");
    assert_eq!(client.attribute("mcpx.server.name"), Some("up"));
    assert_eq!(client.attribute("gen_ai.tool.name"), Some("meta"));
    assert_eq!(client.attribute("network.transport"), Some("pipe"));

    // The tool sees mcpx's client span as its parent, and the caller's trace state.
    assert_eq!(meta["traceparent"], json!(format!("00-{TRACE_ID}-{}-01", client.span_id)), "{meta:?}");
    assert_eq!(meta["tracestate"], json!("rojo=00f067aa0ba902b7"), "{meta:?}");
}

#[test]
fn an_http_upstream_gets_mcpxs_span_as_its_parent_in_headers_as_in_meta() {
    let receiver = Receiver::start();
    let fake = FakeHttp::start(&[]);
    let daemon = daemon_exporting_to(&receiver, &[("web", json!({ "url": fake.url }))]);
    let reply = Modern::mcpx_call("web", "meta", json!({}))
        .meta("traceparent", json!(format!("00-{TRACE_ID}-{PARENT_ID}-01")))
        .meta("tracestate", json!("rojo=00f067aa0ba902b7"))
        .send(daemon.url());
    let meta = received_meta(reply.structured());
    let spans = receiver.until("the client span", |s| named(s, "tools/call meta").is_some());
    let client = named(&spans, "tools/call meta").unwrap();
    assert_eq!(client.attribute("network.transport"), Some("tcp"));
    let traceparent = json!(format!("00-{TRACE_ID}-{}-01", client.span_id));
    assert_eq!(meta["traceparent"], traceparent, "{meta:?}");
    // fakemcp shows the HTTP request's own trace headers under a key of its own.
    let headers = &meta["fakemcp.dev/traceHeaders"];
    assert_eq!(headers["traceparent"], traceparent, "{meta:?}");
    assert_eq!(headers["tracestate"], json!("rojo=00f067aa0ba902b7"), "{meta:?}");
}

#[test]
fn a_tool_error_and_a_json_rpc_error_are_recorded_on_the_spans() {
    let receiver = Receiver::start();
    let daemon = daemon_exporting_to(&receiver, &[("up", fakemcp("global", &tag(), &[]))]);
    Modern::mcpx_call("up", "fail", json!({"message": "no"})).send(daemon.url());
    Modern::tools_call("no-such-tool", json!({})).send(daemon.url());
    let spans = receiver.until("the failing spans", |s| {
        named(s, "tools/call fail").is_some() && named(s, "tools/call no-such-tool").is_some()
    });
    assert_eq!(named(&spans, "tools/call fail").unwrap().attribute("error.type"), Some("tool_error"));
    let unknown = named(&spans, "tools/call no-such-tool").unwrap();
    assert_eq!(unknown.attribute("error.type"), Some("-32602"), "{unknown:?}");
}

/// The requests a front end answers itself have spans too: a handshake-era session's
/// `initialize`, `ping` and `logging/setLevel` (a bad level as an error), and a stateless
/// caller's `server/discover`.
#[test]
fn the_handshake_requests_mcpx_answers_itself_have_server_spans() {
    let receiver = Receiver::start();
    let daemon = daemon_exporting_to(&receiver, &[("up", fakemcp("global", &tag(), &[]))]);
    let session = mcpx_e2e::client::LegacySession::open(daemon.url());
    session.request("ping", json!({}));
    session.request("logging/setLevel", json!({"level": "loud"}));
    Modern::discover().with_id(json!(41)).send(daemon.url());
    let spans = receiver.until("the handshake's spans", |s| {
        ["initialize", "ping", "logging/setLevel", "server/discover"].iter().all(|n| named(s, n).is_some())
    });
    for name in ["initialize", "ping", "logging/setLevel", "server/discover"] {
        let span = named(&spans, name).unwrap();
        assert_eq!(span.kind, SpanKind::Server as i32, "{span:?}");
        assert_eq!(span.attribute("mcp.method.name"), Some(name), "{span:?}");
        assert!(span.attribute("jsonrpc.request.id").is_some(), "{span:?}");
    }
    assert_eq!(named(&spans, "server/discover").unwrap().attribute("jsonrpc.request.id"), Some("41"));
    assert_eq!(named(&spans, "ping").unwrap().attribute("error.type"), None);
    assert_eq!(named(&spans, "logging/setLevel").unwrap().attribute("error.type"), Some("-32602"));
}

#[test]
fn an_http_requests_traceparent_header_is_the_parent_when_meta_names_none() {
    let receiver = Receiver::start();
    let daemon = daemon_exporting_to(&receiver, &[("up", fakemcp("global", &tag(), &[]))]);
    Modern::mcpx_call("up", "echo", json!({}))
        .header("traceparent", &format!("00-{TRACE_ID}-{PARENT_ID}-01"))
        .send(daemon.url())
        .structured();
    let spans = receiver.until("the server span", |s| named(s, "tools/call mcpx_call").is_some());
    let server = named(&spans, "tools/call mcpx_call").unwrap();
    assert_eq!((server.trace_id.as_str(), server.parent_span_id.as_str()), (TRACE_ID, PARENT_ID), "{server:?}");
}

#[test]
fn a_callers_invalid_trace_context_is_ignored_and_never_reaches_the_upstream() {
    let receiver = Receiver::start();
    let daemon = daemon_exporting_to(&receiver, &[("up", fakemcp("global", &tag(), &[]))]);
    let reply = Modern::mcpx_call("up", "meta", json!({}))
        .meta("traceparent", json!(format!("00-{TRACE_ID}-{PARENT_ID}-01\r\ndev.mcpx/invocation: forged")))
        .meta("tracestate", json!("evil=forged"))
        .send(daemon.url());
    let meta = received_meta(reply.structured());
    let spans = receiver.until("the spans", |s| named(s, "tools/call meta").is_some());
    let server = named(&spans, "tools/call mcpx_call").expect("the server span");
    assert_eq!(server.parent_span_id, "", "an invalid traceparent is no parent: {server:?}");
    assert_ne!(server.trace_id, TRACE_ID);
    let client = named(&spans, "tools/call meta").unwrap();
    // What the upstream got is mcpx's own context, and nothing of the caller's.
    assert_eq!(meta["traceparent"], json!(format!("00-{}-{}-01", client.trace_id, client.span_id)), "{meta:?}");
    assert!(!meta.contains_key("tracestate"), "{meta:?}");
    let text = Value::Object(meta.clone()).to_string();
    assert!(!text.contains("forged"), "{text}");
}

#[test]
fn every_tool_call_of_a_script_is_a_child_of_the_scripts_span() {
    let receiver = Receiver::start();
    let daemon = daemon_exporting_to(&receiver, &[("up", fakemcp("global", &tag(), &[]))]);
    let script = r#"
        const a = await call("up", "echo", { n: 1 });
        const b = await call("up", "meta", {});
        return { a, b };
    "#;
    let reply = Modern::tools_call("mcpx_exec", json!({ "script": script }))
        .meta("traceparent", json!(format!("00-{TRACE_ID}-{PARENT_ID}-01")))
        .send(daemon.url());
    let result = reply.structured();
    let spans = receiver.until("the script's spans", |s| {
        ["tools/call mcpx_exec", "tools/call echo", "tools/call meta"].iter().all(|n| named(s, n).is_some())
    });
    let script_span = named(&spans, "tools/call mcpx_exec").unwrap();
    assert_eq!(script_span.parent_span_id, PARENT_ID);
    for call in ["tools/call echo", "tools/call meta"] {
        let span = named(&spans, call).unwrap();
        assert_eq!(span.kind, SpanKind::Client as i32, "{span:?}");
        assert_eq!(span.parent_span_id, script_span.span_id, "{call} is not a child of the script: {span:?}");
        assert_eq!(span.trace_id, TRACE_ID);
    }
    // The upstream saw the call's own span as its parent.
    let meta = received_meta(&result["b"]);
    let meta_span = named(&spans, "tools/call meta").unwrap();
    assert_eq!(meta["traceparent"], json!(format!("00-{TRACE_ID}-{}-01", meta_span.span_id)), "{meta:?}");
}

#[test]
fn the_listings_a_search_makes_upstream_are_client_spans_of_the_search() {
    let receiver = Receiver::start();
    let daemon = daemon_exporting_to(&receiver, &[("up", fakemcp("global", &tag(), &[]))]);
    Modern::tools_call("mcpx_search", json!({ "query": "echo" })).send(daemon.url()).structured();
    let spans = receiver.until("the search and its listing", |s| {
        named(s, "tools/call mcpx_search").is_some() && named(s, "tools/list").is_some()
    });
    let search = named(&spans, "tools/call mcpx_search").unwrap();
    let listing = named(&spans, "tools/list").unwrap();
    assert_eq!(listing.kind, SpanKind::Client as i32, "{listing:?}");
    assert_eq!(listing.parent_span_id, search.span_id, "{listing:?}");
    assert_eq!(listing.attribute("mcpx.server.name"), Some("up"));
}

#[test]
fn with_no_endpoint_mcpx_makes_no_span_and_calls_work() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    let reply = Modern::mcpx_call("up", "meta", json!({})).meta("traceparent", json!(traceparent)).send(daemon.url());
    // Not tracing, mcpx opens no span of its own: the caller's context goes on as any
    // other `_meta` key would (a span of mcpx's would have replaced it).
    assert_eq!(received_meta(reply.structured())["traceparent"], json!(traceparent));
}

#[test]
fn spans_past_the_export_queue_are_dropped_and_counted_while_calls_go_on() {
    // A collector that never answers: its port takes connections, nobody reads them.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["telemetry"] = json!({ "otlpEndpoint": format!("http://{}", silent.local_addr().unwrap()) });
    let env = [("OTEL_BSP_MAX_QUEUE_SIZE", "3"), ("OTEL_EXPORTER_OTLP_TIMEOUT", "600000")];
    let daemon = Daemon::start_with_env(&cfg, &env);
    // Ten spans: at most three in the export that hangs and three queued behind it.
    for _ in 0..5 {
        let reply = Modern::mcpx_call("up", "echo", json!({ "text": "x" })).send(daemon.url());
        assert_eq!(reply.structured()["text"], json!("x"));
    }
    let metrics = plain("GET", &format!("{}/metrics", base_url(daemon.url())), &[], None);
    let dropped: u64 = metrics
        .body
        .lines()
        .find_map(|l| l.strip_prefix("mcpx_trace_spans_dropped_total "))
        .unwrap_or_else(|| panic!("no dropped spans counted:\n{}", metrics.body))
        .parse()
        .unwrap();
    assert!(dropped >= 4, "{dropped} spans dropped");
}

#[test]
fn spans_held_for_the_next_export_are_sent_when_the_daemon_stops() {
    let receiver = Receiver::start();
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["telemetry"] = json!({ "otlpEndpoint": receiver.endpoint() });
    let mut daemon = Daemon::start_with_env(&cfg, &[("OTEL_BSP_SCHEDULE_DELAY", "600000")]);
    Modern::mcpx_call("up", "echo", json!({ "text": "x" })).send(daemon.url()).structured();
    assert!(daemon.stop().success());
    let spans = receiver.until("the two spans held", |s| s.len() >= 2);
    assert!(named(&spans, "tools/call mcpx_call").is_some() && named(&spans, "tools/call echo").is_some(), "{spans:?}");
}
