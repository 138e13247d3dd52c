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
    let text = body.to_string();
    match format.single() {
        Format::Json | Format::Either => (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], text).into_response(),
        Format::EventStream => (status, event_stream_headers(), event(&text)).into_response(),
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

fn event(json: &str) -> String {
    format!("event: message\ndata: {json}\n\n")
}

/// An event stream for one request: the notifications `work` sends through the `Notify`
/// it is given, then the frame it returns, then the end of the stream.
/// With `cancel_on_close`, a caller closing the stream cancels the work (2026-07-28); a
/// handshake-era caller's disconnect is not a cancellation, so its work runs on.
pub fn stream<F, Fut>(cancel_on_close: bool, work: F) -> Response
where
    F: FnOnce(Notify) -> Fut,
    Fut: Future<Output = Value> + Send + 'static,
{
    enum Item {
        Note(Value),
        Last(Value),
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Item>();
    let notes = tx.clone();
    let notify: Notify = std::sync::Arc::new(move |frame| {
        let _ = notes.send(Item::Note(frame));
    });
    let task = tokio::spawn({
        let fut = work(notify);
        async move {
            let last = fut.await;
            let _ = tx.send(Item::Last(last));
        }
    });
    struct Guard(Option<tokio::task::AbortHandle>);
    impl Drop for Guard {
        fn drop(&mut self) {
            if let Some(task) = self.0.take() {
                task.abort();
            }
        }
    }
    let guard = Guard(cancel_on_close.then(|| task.abort_handle()));
    let events = futures::stream::unfold((rx, guard, false), |(mut rx, mut guard, done)| async move {
        if done {
            return None;
        }
        match rx.recv().await? {
            Item::Note(frame) => Some((Ok::<_, std::convert::Infallible>(event(&frame.to_string())), (rx, guard, false))),
            Item::Last(frame) => {
                guard.0 = None;
                Some((Ok(event(&frame.to_string())), (rx, guard, true)))
            }
        }
    });
    (StatusCode::OK, event_stream_headers(), axum::body::Body::from_stream(events)).into_response()
}

/// An error response frame. Errors before the body could be read are always JSON.
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
