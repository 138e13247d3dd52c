//! Writing a JSON-RPC frame back as an HTTP response: JSON or a one-event SSE stream, as
//! the request's `Accept` allows, with the status the spec names for the situation.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpx_protocol::RpcError;
use mcpx_protocol::message;
use serde_json::Value;

use crate::dispatch::Notify;

/// What the caller's `Accept` allows: a single reply is JSON whenever JSON is allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    EventStream,
    /// Both: JSON for a single frame, an event stream when there is more to send.
    Either,
}

impl Format {
    pub fn from_headers(headers: &HeaderMap) -> Format {
        let accept = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(",");
        let offers = |kind: &str| accept.split(',').any(|part| part.split(';').next().unwrap_or("").trim() == kind);
        let json = offers("application/json") || offers("application/*") || offers("*/*") || accept.is_empty();
        match (json, offers("text/event-stream")) {
            (true, true) => Format::Either,
            (false, true) => Format::EventStream,
            _ => Format::Json,
        }
    }

    /// The encoding of a reply that is one frame.
    pub fn single(self) -> Format {
        match self {
            Format::Either => Format::Json,
            other => other,
        }
    }

    pub fn allows_stream(self) -> bool {
        matches!(self, Format::EventStream | Format::Either)
    }
}

/// A frame (or a batch of frames) with a status.
pub fn frame(status: StatusCode, format: Format, body: &Value) -> Response {
    // Bytes straight from the serializer: `to_string` goes through `fmt` for every piece.
    let json = serde_json::to_vec(body).expect("a JSON value always serializes");
    match format.single() {
        Format::Json | Format::Either => (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], json).into_response(),
        Format::EventStream => {
            let text = String::from_utf8(json).expect("serde_json writes UTF-8");
            (status, event_stream_headers(), event(&text)).into_response()
        }
    }
}

fn event_stream_headers() -> [(header::HeaderName, HeaderValue); 3] {
    [
        (header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        // Proxies must pass events on as they come.
        (header::HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no")),
    ]
}

pub fn event(json: &str) -> String {
    format!("event: message\ndata: {json}\n\n")
}

/// The reply to one request whose caller takes an event stream. `work` gets a `Notify`
/// for the request's notifications and returns its response frame. Nothing to say before
/// the response: a plain JSON reply. Otherwise an event stream: the notifications as they
/// come, then the response, then the end.
/// With `cancel_on_close`, a caller closing the stream cancels the work (2026-07-28); a
/// handshake-era caller's disconnect is not a cancellation, so its work runs on.
pub async fn streamed<F, Fut>(cancel_on_close: bool, format: Format, work: F) -> Response
where
    F: FnOnce(Notify) -> Fut,
    Fut: Future<Output = Value> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Item>();
    let notes = tx.clone();
    let notify: Notify = std::sync::Arc::new(move |frame| {
        let _ = notes.send(Item::Note(frame));
    });
    let fut = work(notify);
    let task = tokio::spawn(async move {
        let last = fut.await;
        let _ = tx.send(Item::Last(last));
    });
    let mut guard = AbortOnDrop(cancel_on_close.then(|| task.abort_handle()));
    let first = match rx.recv().await {
        Some(Item::Last(frame)) => return frame_or_nothing(format, &frame),
        Some(Item::Note(frame)) => frame,
        None => return status(StatusCode::INTERNAL_SERVER_ERROR, "the request ended without a response\n"),
    };
    let events = futures::stream::unfold((Some(first), rx, guard.take()), |(first, mut rx, mut guard)| async move {
        let item = match first {
            Some(frame) => Item::Note(frame),
            None => rx.recv().await?,
        };
        let text = match item {
            Item::Note(frame) => event(&frame.to_string()),
            // A request cancelled by its caller ends its stream without an answer.
            Item::Last(frame) if frame.is_null() => return None,
            Item::Last(frame) => {
                guard.disarm();
                rx.close();
                event(&frame.to_string())
            }
        };
        Some((Ok::<_, std::convert::Infallible>(text), (None, rx, guard)))
    });
    (StatusCode::OK, event_stream_headers(), axum::body::Body::from_stream(events)).into_response()
}

/// A response that is an open-ended event stream.
pub fn event_stream(body: axum::body::Body) -> Response {
    (StatusCode::OK, event_stream_headers(), body).into_response()
}

enum Item {
    Note(Value),
    Last(Value),
}

fn frame_or_nothing(format: Format, frame: &Value) -> Response {
    if frame.is_null() { accepted() } else { self::frame(status_for(frame), format.single(), frame) }
}

/// The HTTP status of a response frame: the errors 2026-07-28 ties to 400 get it, every
/// other answer (results, and errors the spec leaves open) is 200.
pub fn status_for(frame: &Value) -> StatusCode {
    let code = frame.get("error").and_then(|e| e.get("code")).and_then(Value::as_i64);
    match code {
        Some(mcpx_protocol::code::HEADER_MISMATCH)
        | Some(mcpx_protocol::code::MISSING_REQUIRED_CLIENT_CAPABILITY)
        | Some(mcpx_protocol::code::UNSUPPORTED_PROTOCOL_VERSION) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// Aborts the request's task when the caller goes away first.
struct AbortOnDrop(Option<tokio::task::AbortHandle>);

impl AbortOnDrop {
    fn take(&mut self) -> AbortOnDrop {
        AbortOnDrop(self.0.take())
    }

    fn disarm(&mut self) {
        self.0 = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// An error response frame.
pub fn error(status: StatusCode, format: Format, id: Option<&Value>, e: &RpcError) -> Response {
    frame(status, format, &message::error_response(id, e))
}

/// 202 Accepted, no body: a notification or response was taken.
pub fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

/// A bare status for situations the spec answers without JSON-RPC (405, 413).
pub fn status(status: StatusCode, text: &'static str) -> Response {
    (status, [(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"))], text).into_response()
}
