//! The OTLP/HTTP span exporter: each batch of finished spans is written straight into the
//! protobuf of one `ExportTraceServiceRequest` and POSTed to the collector's traces
//! endpoint (`application/x-protobuf`).
//!
//! The OpenTelemetry crates' own exporter first turns every span into the generated
//! protobuf structs (a string per name and key, a struct per attribute, a map of scopes
//! per batch) and then walks those twice more to size and encode them: most of what an
//! exported trace cost a call. Writing the few messages a span needs directly is a
//! fraction of that; the format is the stable OTLP one (`opentelemetry/proto/trace/v1`),
//! field numbers below.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpx_http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use mcpx_http::{Body, Client, Method, Redirects, Request, Uri};
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use prost::encoding::{WireType, encode_key, encode_varint};

/// How long one export may take when `OTEL_EXPORTER_OTLP_TIMEOUT` says nothing.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Sends batches of spans to one OTLP/HTTP traces endpoint.
#[derive(Debug)]
pub(crate) struct Exporter {
    client: Client,
    url: String,
    timeout: Duration,
    headers: HeaderMap,
    /// The encoded `Resource` message every batch carries.
    resource: Vec<u8>,
}

impl Exporter {
    /// An exporter for `url` (the full traces endpoint), with the headers and timeout the
    /// standard `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS` and `..._TIMEOUT` variables set.
    pub(crate) fn new(url: String) -> Result<Exporter, String> {
        let timeout = standard("TIMEOUT").and_then(|ms| ms.trim().parse().ok()).map_or(TIMEOUT, Duration::from_millis);
        let client = Client::new(Redirects::FOLLOW, None);
        let headers = standard("HEADERS").map(|h| headers(&h)).transpose()?.unwrap_or_default();
        Ok(Exporter { client, url, timeout, headers, resource: Vec::new() })
    }
}

/// `OTEL_EXPORTER_OTLP_TRACES_<NAME>`, else `OTEL_EXPORTER_OTLP_<NAME>`, when set.
pub(crate) fn standard(name: &str) -> Option<String> {
    [format!("OTEL_EXPORTER_OTLP_TRACES_{name}"), format!("OTEL_EXPORTER_OTLP_{name}")]
        .into_iter()
        .find_map(|key| std::env::var(key).ok().filter(|v| !v.trim().is_empty()))
}

/// The W3C-baggage-like list the standard headers variable holds: `key=value` pairs,
/// comma-separated, values percent-encoded.
fn headers(list: &str) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for pair in list.split(',').filter(|p| !p.trim().is_empty()) {
        let (key, value) = pair.split_once('=').ok_or_else(|| format!("OTLP header `{pair}` has no `=`"))?;
        let value = percent_encoding::percent_decode_str(value.trim()).decode_utf8_lossy();
        let name = HeaderName::try_from(key.trim()).map_err(|e| format!("OTLP header `{key}`: {e}"))?;
        let value = HeaderValue::try_from(value.as_ref()).map_err(|e| format!("OTLP header `{key}`: {e}"))?;
        map.append(name, value);
    }
    Ok(map)
}

impl SpanExporter for Exporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let failed = |e: String| OTelSdkError::InternalFailure(format!("OTLP export to {}: {e}", self.url));
        let uri = self.url.parse::<Uri>().map_err(|e| failed(e.to_string()))?;
        let body = bytes::Bytes::from(request(&self.resource, &batch));
        let make = || {
            let mut post = Request::new(Body::new(body.clone()));
            *post.method_mut() = Method::POST;
            *post.uri_mut() = uri.clone();
            *post.headers_mut() = self.headers.clone();
            post.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/x-protobuf"));
            post
        };
        let sent = match tokio::time::timeout(self.timeout, self.client.send(make)).await {
            Ok(sent) => sent.map_err(failed)?,
            Err(_) => return Err(failed(format!("no answer within {:?}", self.timeout))),
        };
        match sent.status() {
            status if status.is_success() => Ok(()),
            status => Err(OTelSdkError::InternalFailure(format!("OTLP export to {}: HTTP {status}", self.url))),
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = self::resource(resource);
    }
}

/// The `Resource` message: its attributes (field 1).
fn resource(resource: &Resource) -> Vec<u8> {
    let mut w = Writer::default();
    for (key, value) in resource.iter() {
        w.message(1, |w| key_value(w, key.as_str(), value));
    }
    w.0
}

/// The `ExportTraceServiceRequest` for `spans`: one resource, and one scope per run of
/// spans from the same instrumentation scope (mcpx has one tracer, so one scope).
pub(crate) fn request(resource: &[u8], spans: &[SpanData]) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(256 + spans.len() * 320));
    // ExportTraceServiceRequest.resource_spans = 1
    w.message(1, |w| {
        // ResourceSpans.resource = 1; Resource.attributes = 1 (already encoded)
        w.bytes(1, resource);
        for run in spans.chunk_by(|a, b| a.instrumentation_scope == b.instrumentation_scope) {
            // ResourceSpans.scope_spans = 2
            w.message(2, |w| {
                let scope = &run[0].instrumentation_scope;
                // ScopeSpans.scope = 1: name = 1, version = 2
                w.message(1, |w| {
                    w.string(1, scope.name());
                    w.string(2, scope.version().unwrap_or_default());
                });
                for span in run {
                    // ScopeSpans.spans = 2
                    w.message(2, |w| self::span(w, span));
                }
                // ScopeSpans.schema_url = 3
                w.string(3, scope.schema_url().unwrap_or_default());
            });
        }
    });
    w.0
}

fn span(w: &mut Writer, span: &SpanData) {
    let context = &span.span_context;
    w.bytes(1, &context.trace_id().to_bytes());
    w.bytes(2, &context.span_id().to_bytes());
    w.string(3, &context.trace_state().header());
    if span.parent_span_id != opentelemetry::trace::SpanId::INVALID {
        w.bytes(4, &span.parent_span_id.to_bytes());
    }
    w.string(5, &span.name);
    let kind = match span.span_kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    };
    w.varint(6, kind);
    w.fixed64(7, nanos(span.start_time));
    w.fixed64(8, nanos(span.end_time));
    for kv in &span.attributes {
        w.message(9, |w| key_value(w, kv.key.as_str(), &kv.value));
    }
    w.varint(10, span.dropped_attributes_count.into());
    for event in span.events.iter() {
        // Event: time = 1, name = 2, attributes = 3, dropped = 4
        w.message(11, |w| {
            w.fixed64(1, nanos(event.timestamp));
            w.string(2, &event.name);
            attributes(w, 3, &event.attributes);
            w.varint(4, event.dropped_attributes_count.into());
        });
    }
    w.varint(12, span.events.dropped_count.into());
    for link in span.links.iter() {
        // Link: trace_id = 1, span_id = 2, trace_state = 3, attributes = 4, dropped = 5
        w.message(13, |w| {
            w.bytes(1, &link.span_context.trace_id().to_bytes());
            w.bytes(2, &link.span_context.span_id().to_bytes());
            w.string(3, &link.span_context.trace_state().header());
            attributes(w, 4, &link.attributes);
            w.varint(5, link.dropped_attributes_count.into());
        });
    }
    w.varint(14, span.links.dropped_count.into());
    // Status: message = 2, code = 3 (unset 0, ok 1, error 2)
    w.message(15, |w| match &span.status {
        Status::Unset => {}
        Status::Ok => w.varint(3, 1),
        Status::Error { description } => {
            w.string(2, description);
            w.varint(3, 2);
        }
    });
    // Flags: the trace flags, and whether the parent is remote (bits 8 and 9).
    let remote = if span.parent_span_is_remote { 0x300 } else { 0x100 };
    w.fixed32(16, u32::from(context.trace_flags().to_u8()) | remote);
}

fn attributes(w: &mut Writer, field: u32, attributes: &[KeyValue]) {
    for kv in attributes {
        w.message(field, |w| key_value(w, kv.key.as_str(), &kv.value));
    }
}

/// A `KeyValue`: key = 1, value = 2 (an `AnyValue`).
fn key_value(w: &mut Writer, key: &str, value: &Value) {
    w.string(1, key);
    w.message(2, |w| any_value(w, value));
}

/// An `AnyValue`: string = 1, bool = 2, int = 3, double = 4, array = 5 (values = 1).
fn any_value(w: &mut Writer, value: &Value) {
    match value {
        Value::String(s) => w.always_string(1, s.as_str()),
        Value::Bool(b) => w.always_varint(2, u64::from(*b)),
        Value::I64(i) => w.always_varint(3, *i as u64),
        Value::F64(f) => w.always_fixed64(4, f.to_bits()),
        Value::Array(array) => w.message(5, |w| match array {
            Array::Bool(items) => items.iter().for_each(|b| w.message(1, |w| w.always_varint(2, u64::from(*b)))),
            Array::I64(items) => items.iter().for_each(|i| w.message(1, |w| w.always_varint(3, *i as u64))),
            Array::F64(items) => items.iter().for_each(|f| w.message(1, |w| w.always_fixed64(4, f.to_bits()))),
            Array::String(items) => items.iter().for_each(|s| w.message(1, |w| w.always_string(1, s.as_str()))),
            _ => {}
        }),
        _ => {}
    }
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Protobuf wire format into a buffer. A field holding its type's default is left out,
/// as proto3 encoders do, except the one value of an `AnyValue` (its presence says which
/// kind it is).
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn varint(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.always_varint(field, value);
        }
    }

    fn always_varint(&mut self, field: u32, value: u64) {
        encode_key(field, WireType::Varint, &mut self.0);
        encode_varint(value, &mut self.0);
    }

    fn fixed64(&mut self, field: u32, value: u64) {
        if value != 0 {
            self.always_fixed64(field, value);
        }
    }

    fn always_fixed64(&mut self, field: u32, value: u64) {
        encode_key(field, WireType::SixtyFourBit, &mut self.0);
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    fn fixed32(&mut self, field: u32, value: u32) {
        if value != 0 {
            encode_key(field, WireType::ThirtyTwoBit, &mut self.0);
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn string(&mut self, field: u32, value: &str) {
        self.bytes(field, value.as_bytes());
    }

    fn always_string(&mut self, field: u32, value: &str) {
        encode_key(field, WireType::LengthDelimited, &mut self.0);
        encode_varint(value.len() as u64, &mut self.0);
        self.0.extend_from_slice(value.as_bytes());
    }

    fn bytes(&mut self, field: u32, value: &[u8]) {
        if !value.is_empty() {
            encode_key(field, WireType::LengthDelimited, &mut self.0);
            encode_varint(value.len() as u64, &mut self.0);
            self.0.extend_from_slice(value);
        }
    }

    /// A nested message, written in place after its key and a one-byte length; a body of
    /// 128 bytes or more (a span, the batch around it) moves over for the longer length.
    /// An empty message is still written: its presence can mean something.
    fn message(&mut self, field: u32, body: impl FnOnce(&mut Writer)) {
        encode_key(field, WireType::LengthDelimited, &mut self.0);
        self.0.push(0);
        let start = self.0.len();
        body(self);
        let len = self.0.len() - start;
        if len < 0x80 {
            self.0[start - 1] = len as u8;
        } else {
            let mut length = [0u8; 10];
            let mut at = &mut length[..];
            encode_varint(len as u64, &mut at);
            let written = 10 - at.len();
            self.0.splice(start - 1..start, length[..written].iter().copied());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::InstrumentationScope;
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
    use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
    use opentelemetry_sdk::trace::{SpanEvents, SpanLinks};
    use prost::Message as _;

    fn spans() -> Vec<SpanData> {
        let scope = InstrumentationScope::builder("mcpx").with_version("1.2.3").build();
        let state = TraceState::from_key_value([("vendor", "x1")]).unwrap();
        let context = |trace: u128, span: u64| {
            SpanContext::new(TraceId::from(trace), SpanId::from(span), TraceFlags::SAMPLED, false, state.clone())
        };
        let mut events = SpanEvents::default();
        events.events.push(opentelemetry::trace::Event::new(
            "retried",
            UNIX_EPOCH + Duration::from_nanos(1_500),
            vec![KeyValue::new("attempt", 2)],
            0,
        ));
        let server = SpanData {
            span_context: context(0x0af7651916cd43dd8448eb211c80319c, 0xb7ad6b7169203331),
            parent_span_id: SpanId::from(0x00f067aa0ba902b7),
            parent_span_is_remote: true,
            span_kind: SpanKind::Server,
            name: "tools/call mcpx_call".into(),
            start_time: UNIX_EPOCH + Duration::from_nanos(1_000),
            end_time: UNIX_EPOCH + Duration::from_nanos(2_000),
            attributes: vec![
                KeyValue::new("mcp.method.name", "tools/call"),
                KeyValue::new("gen_ai.tool.name", "mcpx_call"),
                KeyValue::new("flag", true),
                KeyValue::new("ratio", 0.25),
                KeyValue::new("count", -7),
                KeyValue::new("list", Value::Array(Array::String(vec!["a".into(), "".into()]))),
                KeyValue::new("empty", ""),
            ],
            dropped_attributes_count: 1,
            events,
            links: SpanLinks::default(),
            status: Status::error("-32602"),
            instrumentation_scope: scope.clone(),
        };
        let client = SpanData {
            span_context: context(0x0af7651916cd43dd8448eb211c80319c, 0x1122334455667788),
            parent_span_id: SpanId::from(0xb7ad6b7169203331),
            parent_span_is_remote: false,
            span_kind: SpanKind::Client,
            name: "tools/call echo".into(),
            start_time: UNIX_EPOCH + Duration::from_nanos(1_100),
            end_time: UNIX_EPOCH + Duration::from_nanos(1_900),
            attributes: vec![KeyValue::new("mcpx.server.name", "upstream")],
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status: Status::Unset,
            instrumentation_scope: scope,
        };
        vec![server, client]
    }

    #[test]
    fn a_batch_decodes_as_the_opentelemetry_crates_encode_it() {
        let resource = Resource::builder_empty()
            .with_attributes([KeyValue::new("service.name", "mcpx"), KeyValue::new("service.version", "0.1.0")])
            .build();
        let ours = ExportTraceServiceRequest::decode(request(&self::resource(&resource), &spans()).as_slice()).unwrap();
        let theirs = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(spans(), &ResourceAttributesWithSchema::from(&resource)),
        };
        assert_eq!(ours, theirs);
    }

    #[test]
    fn the_standard_headers_list_is_read_and_a_bad_one_refused() {
        let map = headers("api-key=s%20cret, x-tenant = t1").unwrap();
        assert_eq!(map.get("api-key").unwrap(), "s cret");
        assert_eq!(map.get("x-tenant").unwrap(), "t1");
        assert!(headers("no-equals-sign").is_err());
        assert!(headers("bad name=v").is_err());
    }
}
