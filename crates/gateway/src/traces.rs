//! Traces: a span for each request mcpx answers for a caller (kind server) and for each
//! request it sends an upstream on that caller's behalf (kind client), exported over
//! OTLP/HTTP (protobuf) when an endpoint is configured (`telemetry.otlpEndpoint`, or the
//! standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`). Names
//! and attributes follow the OpenTelemetry semantic conventions for MCP.
//!
//! The W3C trace context a caller sends in `params._meta` (`traceparent`, `tracestate`),
//! or in the headers of the HTTP request that carried it, is the parent of mcpx's span;
//! mcpx's client span is the parent it passes on to the upstream in `_meta` (and, for an
//! HTTP upstream, in headers), so one trace runs from the agent through mcpx to the tool.
//!
//! What this must never do: build a span when nothing exports (one load and a branch is
//! all a request pays then); pass a caller's trace context on unchecked while it exports
//! (what reaches an upstream is mcpx's own context, written from parsed values, so a
//! caller can add nothing else to the upstream's `_meta`); or let a trace context decide
//! anything but the parent of a span (identity, scope and routing never read it).

use std::borrow::Cow;
use std::sync::OnceLock;

use mcpx_protocol::meta;
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{Span as _, SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider, Span};
use serde_json::{Map, Value};

use crate::context::CallContext;
use crate::error::Error;

/// The W3C Trace Context keys, in `_meta` as in HTTP headers (unprefixed, as the MCP
/// conventions ask).
pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

/// The attribute naming the mcpx server (from its config) a request went to.
pub const SERVER_NAME: &str = "mcpx.server.name";

pub use crate::context::{Trace, TraceHeaders};

/// How long the daemon's stop waits for the last spans to be sent.
const FLUSH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Where spans go: nowhere until the daemon starts an exporter.
#[derive(Default)]
pub(crate) struct Traces {
    exporting: OnceLock<Exporting>,
}

struct Exporting {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    dropped: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Why traces cannot be exported.
#[derive(Debug, thiserror::Error)]
#[error("traces: {0}")]
pub struct ExportError(String);

/// Where spans are sent: the config's endpoint (a base URL, `/v1/traces` appended), else
/// the standard environment variables. `None`: traces are off.
pub fn endpoint(configured: Option<&str>) -> Option<Endpoint> {
    let from_env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    match configured.filter(|e| !e.trim().is_empty()) {
        Some(base) => Some(Endpoint::Url(format!("{}/v1/traces", base.trim_end_matches('/')))),
        None => (from_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some()
            || from_env("OTEL_EXPORTER_OTLP_ENDPOINT").is_some())
        .then_some(Endpoint::FromEnvironment),
    }
}

/// Where an exporter sends, as [`endpoint`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The full URL of the traces endpoint.
    Url(String),
    /// As `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/traces` appended) say.
    FromEnvironment,
}

impl Endpoint {
    /// The traces endpoint's URL: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is one as it is,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` a base to which `/v1/traces` is appended.
    fn url(&self) -> String {
        match self {
            Endpoint::Url(url) => url.clone(),
            Endpoint::FromEnvironment => std::env::var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .ok()
                .filter(|v| !v.trim().is_empty())
                .unwrap_or_else(|| {
                    let base = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_default();
                    format!("{}/v1/traces", base.trim_end_matches('/'))
                }),
        }
    }
}

impl Traces {
    /// Starts exporting to `endpoint`, in batches from a task on the current tokio runtime:
    /// a full queue drops spans, never waits. Once per gateway.
    pub(crate) fn export(&self, endpoint: &Endpoint) -> Result<(), ExportError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = crate::otlp::Exporter::new(endpoint.url()).map_err(ExportError)?;
        let batches = crate::otlp::Processor::start(exporter);
        let dropped = batches.dropped();
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("mcpx")
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder().with_span_processor(batches).with_resource(resource).build();
        let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "mcpx");
        self.exporting.set(Exporting { provider, tracer, dropped }).map_err(|_| ExportError("already exporting".into()))
    }

    /// The tracer, when spans are exported.
    fn tracer(&self) -> Option<&SdkTracer> {
        self.exporting.get().map(|e| &e.tracer)
    }

    pub(crate) fn on(&self) -> bool {
        self.exporting.get().is_some()
    }

    /// Spans dropped because the export queue was full; `None` when nothing is exported.
    pub(crate) fn dropped(&self) -> Option<u64> {
        self.exporting.get().map(|e| e.dropped.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Sends the spans still queued and stops the exporter (at shutdown), waiting at most
    /// [`FLUSH_TIMEOUT`] for a collector that does not answer.
    pub(crate) async fn flush(&self) {
        if let Some(exporting) = self.exporting.get() {
            let provider = exporting.provider.clone();
            let _ = tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(FLUSH_TIMEOUT)).await;
        }
    }

    /// Opens the span of a request mcpx answers, as a child of the caller's trace context
    /// (its `_meta`'s, else its HTTP request's); `None` when nothing is exported.
    pub(crate) fn answering(&self, ctx: &CallContext, method: &str, params: &Value) -> Option<Answering> {
        let tracer = self.tracer()?;
        let parent = meta::of(params)
            .map(|m| extract(&MetaCarrier(m)))
            .filter(has_span)
            .or_else(|| ctx.trace.headers.as_deref().map(|h| extract(&HeaderCarrier(h))).filter(has_span))
            .unwrap_or_default();
        let target = target(method, params);
        let mut attributes = request_attributes(method, params, target);
        attributes.push(KeyValue::new("mcp.protocol.version", ctx.revision.as_str()));
        if let Some(session) = ctx.identity.session_for_upstream() {
            attributes.push(KeyValue::new("mcp.session.id", session));
        }
        match &ctx.trace.request_id {
            Some(Value::String(id)) => attributes.push(KeyValue::new("jsonrpc.request.id", id.clone())),
            Some(id @ Value::Number(_)) => attributes.push(KeyValue::new("jsonrpc.request.id", id.to_string())),
            _ => {}
        }
        let name = span_name(method, target);
        let builder = tracer.span_builder(name).with_kind(SpanKind::Server).with_attributes(attributes);
        let span = tracer.build_with_context(builder, &parent);
        let _ = ctx.trace.span.set(span.span_context().clone());
        Some(Answering(span))
    }

    /// Opens the span of a request sent to `server` on behalf of `ctx`, and writes its
    /// trace context into `params._meta` in place of any the caller sent. `None` when
    /// nothing is exported (then `params` is left as it is).
    pub(crate) fn sending(
        &self,
        ctx: &CallContext,
        server: &str,
        upstream: &mcpx_upstream::Upstream,
        method: &str,
        params: &mut Value,
    ) -> Option<Sending> {
        let tracer = self.tracer()?;
        let target = target(method, params);
        let mut attributes = request_attributes(method, params, target);
        attributes.push(KeyValue::new(SERVER_NAME, server.to_owned()));
        attributes.push(KeyValue::new("mcp.protocol.version", upstream.facts().revision.as_str()));
        attributes.push(KeyValue::new("network.transport", if upstream.pid().is_some() { "pipe" } else { "tcp" }));
        let parent =
            ctx.trace.span.get().map(|s| Context::new().with_remote_span_context(s.clone())).unwrap_or_default();
        let builder =
            tracer.span_builder(span_name(method, target)).with_kind(SpanKind::Client).with_attributes(attributes);
        let span = tracer.build_with_context(builder, &parent);
        // Written from the span's own ids, as the W3C format has them (what the SDK's
        // propagator writes, without a context built per request to write it), in place of
        // whatever the caller's `_meta` held under these keys.
        let m = meta::of_mut(params);
        let sent = span.span_context();
        let state = sent.trace_state().header();
        match sent.is_valid() {
            true => m.insert(TRACEPARENT.into(), traceparent(sent).into()),
            false => m.remove(TRACEPARENT),
        };
        match state.is_empty() || !sent.is_valid() {
            true => m.remove(TRACESTATE),
            false => m.insert(TRACESTATE.into(), state.into()),
        };
        Some(Sending(span))
    }
}

/// The span of a request mcpx answers; ends with [`Answering::end`].
pub(crate) struct Answering(Span);

impl Answering {
    /// Ends the span with the request's outcome, naming the server it reached if any.
    pub(crate) fn end(mut self, ctx: &CallContext, outcome: Result<&Value, &Error>) {
        if let Some(reached) = ctx.reached.get() {
            self.0.set_attribute(KeyValue::new(SERVER_NAME, reached.server.clone()));
        }
        end(&mut self.0, outcome);
    }
}

/// The span of a request sent to an upstream; ends with [`Sending::end`].
pub(crate) struct Sending(Span);

impl Sending {
    pub(crate) fn end(mut self, outcome: Result<&Value, &Error>) {
        end(&mut self.0, outcome);
    }
}

/// Records how a request ended, as the conventions ask: `error.type` (the JSON-RPC code,
/// or `tool_error` for a tool result with `isError`) and an error status.
fn end(span: &mut Span, outcome: Result<&Value, &Error>) {
    match outcome {
        Ok(result) if result.get("isError") == Some(&Value::Bool(true)) => {
            span.set_attribute(KeyValue::new("error.type", "tool_error"));
            span.set_status(Status::error("tool_error"));
        }
        Ok(_) => {}
        Err(e) => {
            let code = e.code().to_string();
            span.set_attribute(KeyValue::new("error.type", code.clone()));
            span.set_attribute(KeyValue::new("rpc.response.status_code", code));
            span.set_status(Status::error(e.to_string()));
        }
    }
    span.end();
}

/// `00-<trace id>-<span id>-<flags>` in lower-case hex: the W3C `traceparent` of `sent`,
/// with only the sampled flag passed on.
fn traceparent(sent: &opentelemetry::trace::SpanContext) -> String {
    fn hex(out: &mut String, bytes: &[u8]) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for b in bytes {
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 0xf)]));
        }
    }
    let flags = sent.trace_flags() & opentelemetry::trace::TraceFlags::SAMPLED;
    let mut out = String::with_capacity(55);
    out.push_str("00-");
    hex(&mut out, &sent.trace_id().to_bytes());
    out.push('-');
    hex(&mut out, &sent.span_id().to_bytes());
    out.push('-');
    hex(&mut out, &[flags.to_u8()]);
    out
}

/// The low-cardinality target of a request: the tool or prompt it names.
fn target<'a>(method: &str, params: &'a Value) -> Option<&'a str> {
    match method {
        "tools/call" | "prompts/get" => params.get("name").and_then(Value::as_str),
        _ => None,
    }
}

/// `{method} {target}`, or the method alone.
fn span_name(method: &str, target: Option<&str>) -> Cow<'static, str> {
    match target {
        Some(target) => [method, " ", target].concat().into(),
        None => known(method).map_or_else(|| method.to_owned().into(), Cow::Borrowed),
    }
}

/// The methods that reach the gateway, as static text: their attributes and span names
/// need no copy of their own.
fn known(method: &str) -> Option<&'static str> {
    const METHODS: [&str; 10] = [
        "tools/call",
        "tools/list",
        "resources/read",
        "resources/list",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/get",
        "prompts/list",
        "completion/complete",
    ];
    METHODS.iter().find(|m| **m == method).copied()
}

/// The attributes every MCP span has for `method` with `params`.
fn request_attributes(method: &str, params: &Value, target: Option<&str>) -> Vec<KeyValue> {
    let name: opentelemetry::Value = known(method).map_or_else(|| method.to_owned().into(), Into::into);
    // Room for what the callers add, so the vector is allocated once.
    let mut attributes = Vec::with_capacity(6);
    attributes.push(KeyValue::new("mcp.method.name", name));
    match (method, target) {
        ("tools/call", Some(tool)) => {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        ("prompts/get", Some(prompt)) => attributes.push(KeyValue::new("gen_ai.prompt.name", prompt.to_owned())),
        ("resources/read" | "resources/subscribe" | "resources/unsubscribe", _) => {
            if let Some(uri) = params.get("uri").and_then(Value::as_str) {
                attributes.push(KeyValue::new("mcp.resource.uri", uri.to_owned()));
            }
        }
        _ => {}
    }
    attributes
}

/// The trace context in a carrier; an invalid one yields a context without a span.
fn extract(carrier: &dyn Extractor) -> Context {
    TraceContextPropagator::new().extract(carrier)
}

fn has_span(cx: &Context) -> bool {
    cx.span().span_context().is_valid()
}

/// A `_meta` object as a carrier: only string values are read.
struct MetaCarrier<M>(M);

impl<M: std::ops::Deref<Target = Map<String, Value>>> Extractor for MetaCarrier<M> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

struct HeaderCarrier<'a>(&'a TraceHeaders);

impl Extractor for HeaderCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            TRACEPARENT => Some(&self.0.traceparent),
            TRACESTATE => self.0.tracestate.as_deref(),
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::SpanContext;
    use serde_json::json;

    fn parent_of(meta: Value) -> Option<SpanContext> {
        let params = json!({ "_meta": meta });
        let cx = extract(&MetaCarrier(meta::of(&params).unwrap()));
        has_span(&cx).then(|| cx.span().span_context().clone())
    }

    #[test]
    fn a_valid_traceparent_in_meta_is_the_parent() {
        let parent = parent_of(json!({
            "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "tracestate": "rojo=00f067aa0ba902b7"
        }))
        .expect("a parent");
        assert_eq!(parent.trace_id().to_string(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(parent.span_id().to_string(), "00f067aa0ba902b7");
        assert_eq!(parent.trace_state().header(), "rojo=00f067aa0ba902b7");
    }

    #[test]
    fn an_invalid_traceparent_is_ignored() {
        for bad in [
            json!("garbage"),
            json!("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            json!("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"),
            json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nx-evil: 1"),
            json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}),
            json!(17),
        ] {
            assert!(parent_of(json!({ "traceparent": bad })).is_none(), "{bad} was taken");
        }
    }

    #[test]
    fn the_traceparent_sent_is_the_w3c_form_of_the_span_context() {
        use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};
        let context = |flags| {
            SpanContext::new(
                TraceId::from(0x4bf92f3577b34da6a3ce929d0e0e4736),
                SpanId::from(0x00f067aa0ba902b7),
                flags,
                false,
                TraceState::default(),
            )
        };
        assert_eq!(
            traceparent(&context(TraceFlags::SAMPLED)),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(
            traceparent(&context(TraceFlags::new(0xff))),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(
            traceparent(&context(TraceFlags::default())),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
        );
    }

    #[test]
    fn the_endpoint_comes_from_the_config_first() {
        assert_eq!(
            endpoint(Some("http://collector:4318/")),
            Some(Endpoint::Url("http://collector:4318/v1/traces".into()))
        );
    }
}
