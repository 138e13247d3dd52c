//! The OTLP/HTTP span export: each span is written into protobuf as it ends, and a task
//! POSTs what has gathered as one `ExportTraceServiceRequest` to the collector's traces
//! endpoint (`application/x-protobuf`) every `OTEL_BSP_SCHEDULE_DELAY`, or sooner once a
//! batch is full.
//!
//! The OpenTelemetry crates' batch processor moves every finished span through a channel
//! and two vectors to a task, and their exporter then turns it into the generated
//! protobuf structs (a string per name and key, a struct per attribute, a map of scopes
//! per batch) and walks those twice more to size and encode them: most of what an
//! exported trace cost a call. Encoding the few messages a span needs once, where it
//! ends, is a fraction of that; the format is the stable OTLP one
//! (`opentelemetry/proto/trace/v1`), field numbers below.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mcpx_http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use mcpx_http::{Body, Client, Egress, Method, Redirects, Request, Uri};
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Array, Context, InstrumentationScope, KeyValue, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanProcessor};
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
}

impl Exporter {
    /// An exporter for `url` (the full traces endpoint), with the headers and timeout the
    /// standard `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS` and `..._TIMEOUT` variables set.
    pub(crate) fn new(url: String) -> Result<Exporter, String> {
        let timeout = standard("TIMEOUT").and_then(|ms| ms.trim().parse().ok()).map_or(TIMEOUT, Duration::from_millis);
        // The collector is where the user pointed: its redirects may lead where it is.
        let egress = mcpx_http::Url::parse(&url).map(|to| Egress::toward(&to)).unwrap_or_default();
        let client = Client::new(Redirects::FOLLOW, None, egress);
        let headers = standard("HEADERS").map(|h| headers(&h)).transpose()?.unwrap_or_default();
        Ok(Exporter { client, url, timeout, headers })
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

impl Exporter {
    /// POSTs one encoded `ExportTraceServiceRequest`.
    async fn post(&self, body: Vec<u8>) -> Result<(), String> {
        let failed = |e: String| format!("OTLP export to {}: {e}", self.url);
        let uri = self.url.parse::<Uri>().map_err(|e| failed(e.to_string()))?;
        let body = bytes::Bytes::from(body);
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
            status => Err(format!("OTLP export to {}: HTTP {status}", self.url)),
        }
    }
}

/// The batch settings, from the standard `OTEL_BSP_*` variables or their defaults.
#[derive(Clone, Copy, Debug)]
struct Batching {
    /// `OTEL_BSP_SCHEDULE_DELAY`: how long spans gather before they are sent.
    delay: Duration,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`: spans held at most; past it, spans are dropped.
    max_queue: usize,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: spans in one request at most.
    max_batch: usize,
}

impl Batching {
    fn from_env() -> Batching {
        use opentelemetry_sdk::trace::{
            OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE_DEFAULT, OTEL_BSP_MAX_QUEUE_SIZE,
            OTEL_BSP_MAX_QUEUE_SIZE_DEFAULT, OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_SCHEDULE_DELAY_DEFAULT,
        };
        let number = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let max_queue = number(OTEL_BSP_MAX_QUEUE_SIZE)
            .and_then(|n| usize::try_from(n).ok())
            .filter(|n| *n > 0)
            .unwrap_or(OTEL_BSP_MAX_QUEUE_SIZE_DEFAULT);
        Batching {
            delay: number(OTEL_BSP_SCHEDULE_DELAY).map_or(OTEL_BSP_SCHEDULE_DELAY_DEFAULT, Duration::from_millis),
            max_queue,
            // As the specification says: a batch is never larger than the queue.
            max_batch: number(OTEL_BSP_MAX_EXPORT_BATCH_SIZE)
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n > 0)
                .unwrap_or(OTEL_BSP_MAX_EXPORT_BATCH_SIZE_DEFAULT)
                .min(max_queue),
        }
    }
}

/// The span processor: encodes each sampled span as it ends into the batch being filled,
/// and leaves the sending to [`Processor::start`]'s task. A full queue drops the span and
/// counts it; nothing a request does waits on the collector.
#[derive(Debug)]
pub(crate) struct Processor {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<Queued>,
    /// Wakes the sending task: a batch is full, or the processor is shutting down.
    wake: tokio::sync::Notify,
    /// Wakes a shutdown waiting for the task to finish.
    finished: Condvar,
    batching: Batching,
    /// Spans dropped because the queue was full (`mcpx_trace_spans_dropped_total`).
    dropped: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct Queued {
    /// The encoded `Resource` every request carries.
    resource: Vec<u8>,
    /// The encoded `InstrumentationScope` of mcpx's one tracer, from its first span.
    scope: Option<(Vec<u8>, String)>,
    /// The batch being filled: `ScopeSpans.spans` fields, and how many.
    filling: Vec<u8>,
    filled: usize,
    /// Full batches waiting to be sent, with their span counts.
    full: VecDeque<(Vec<u8>, usize)>,
    /// Spans held in all: `filled` and the full batches'.
    held: usize,
    closing: bool,
    finished: bool,
}

impl Processor {
    /// A processor sending through `exporter`, batching as the `OTEL_BSP_*` variables say;
    /// its task runs on the current tokio runtime until the processor shuts down.
    pub(crate) fn start(exporter: Exporter) -> Processor {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            wake: tokio::sync::Notify::new(),
            finished: Condvar::new(),
            batching: Batching::from_env(),
            dropped: Arc::default(),
        });
        tokio::spawn(send(shared.clone(), exporter));
        Processor { shared }
    }

    /// The count of spans dropped for want of room, as it grows.
    pub(crate) fn dropped(&self) -> Arc<AtomicU64> {
        self.shared.dropped.clone()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl SpanProcessor for Processor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let shared = &self.shared;
        let mut queued = shared.lock();
        if queued.closing || queued.held >= shared.batching.max_queue {
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if queued.scope.is_none() {
            queued.scope = Some(encoded_scope(&span.instrumentation_scope));
        }
        let mut w = Writer(std::mem::take(&mut queued.filling));
        // ScopeSpans.spans = 2
        w.message(2, |w| self::span(w, &span));
        queued.filling = w.0;
        queued.filled += 1;
        queued.held += 1;
        if queued.filled >= shared.batching.max_batch {
            let batch = (std::mem::take(&mut queued.filling), std::mem::take(&mut queued.filled));
            queued.full.push_back(batch);
            drop(queued);
            shared.wake.notify_one();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    /// Has the task send what is held and stop; waits for it at most `timeout`.
    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        let shared = &self.shared;
        let mut queued = shared.lock();
        if queued.closing {
            return Ok(());
        }
        queued.closing = true;
        shared.wake.notify_one();
        let waited = shared.finished.wait_timeout_while(queued, timeout, |q| !q.finished);
        match waited.map(|(_, timed_out)| timed_out.timed_out()) {
            Ok(false) => Ok(()),
            _ => Err(OTelSdkError::Timeout(timeout)),
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.shared.lock().resource = self::resource(resource);
    }
}

/// The sending task: every schedule delay, or when woken, sends each batch held as one
/// request. A failed export is logged (once until exports succeed again) and its spans
/// are lost, as the OpenTelemetry SDKs do. Ends after sending what is held at shutdown.
async fn send(shared: Arc<Shared>, exporter: Exporter) {
    /// Marks the task finished however it ends (a runtime shutting down drops it).
    struct Finished<'a>(&'a Shared);
    impl Drop for Finished<'_> {
        fn drop(&mut self) {
            self.0.lock().finished = true;
            self.0.finished.notify_all();
        }
    }
    let _finished = Finished(&shared);
    let mut failing = false;
    loop {
        let _ = tokio::time::timeout(shared.batching.delay, shared.wake.notified()).await;
        let (batches, resource, scope, closing) = {
            let mut queued = shared.lock();
            let mut batches: Vec<_> = queued.full.drain(..).collect();
            if queued.filled > 0 {
                batches.push((std::mem::take(&mut queued.filling), std::mem::take(&mut queued.filled)));
            }
            queued.held = 0;
            (batches, queued.resource.clone(), queued.scope.clone(), queued.closing)
        };
        for (spans, count) in batches {
            let body = request_of(&resource, scope.as_ref(), &spans);
            match exporter.post(body).await {
                Ok(()) if failing => {
                    tracing::info!("traces: exports succeed again");
                    failing = false;
                }
                Ok(()) => {}
                Err(e) if failing => tracing::debug!("traces: {count} spans lost: {e}"),
                Err(e) => {
                    tracing::warn!("traces: {count} spans lost: {e}");
                    failing = true;
                }
            }
        }
        if closing {
            return;
        }
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

/// The `InstrumentationScope` message (name = 1, version = 2), and the scope's schema URL.
fn encoded_scope(scope: &InstrumentationScope) -> (Vec<u8>, String) {
    let mut w = Writer::default();
    w.string(1, scope.name());
    w.string(2, scope.version().unwrap_or_default());
    (w.0, scope.schema_url().unwrap_or_default().to_owned())
}

/// The `ExportTraceServiceRequest` for encoded spans (`ScopeSpans.spans` fields) of one
/// scope (mcpx has one tracer, so one scope) and one resource.
fn request_of(resource: &[u8], scope: Option<&(Vec<u8>, String)>, spans: &[u8]) -> Vec<u8> {
    let mut w = Writer(Vec::with_capacity(64 + resource.len() + spans.len()));
    // ExportTraceServiceRequest.resource_spans = 1
    w.message(1, |w| {
        // ResourceSpans.resource = 1; Resource.attributes = 1 (already encoded)
        w.bytes(1, resource);
        // ResourceSpans.scope_spans = 2
        w.message(2, |w| {
            if let Some((scope, _)) = scope {
                // ScopeSpans.scope = 1
                w.message(1, |w| w.0.extend_from_slice(scope));
            }
            w.0.extend_from_slice(spans);
            // ScopeSpans.schema_url = 3
            w.string(3, scope.map_or("", |(_, url)| url));
        });
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
        // Encoded as the processor does: each span as it ends, then the request around them.
        let mut encoded = Writer::default();
        for span in spans() {
            encoded.message(2, |w| self::span(w, &span));
        }
        let scope = encoded_scope(&spans()[0].instrumentation_scope);
        let body = request_of(&self::resource(&resource), Some(&scope), &encoded.0);
        let ours = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
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
