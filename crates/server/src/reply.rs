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
///
/// The work runs inside the response, not as a task of its own: a spawn per request (the
/// future moved into the task, a wake-up across tasks for the answer) was the largest cost
/// of a handshake-era call. Only if the caller goes away before the answer, and the work is
/// not to be cancelled, is what is left of it spawned to finish on its own.
pub async fn streamed<F, Fut>(cancel_on_close: bool, format: Format, work: F) -> Response
where
    F: FnOnce(Notify) -> Fut,
    Fut: Future<Output = Value> + Send + 'static,
{
    let (tx, notes) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let notify: Notify = std::sync::Arc::new(move |frame| {
        let _ = tx.send(frame);
    });
    let work = Work { future: Some(Box::pin(work(notify))), cancel_on_close };
    let mut progress = Progress { notes, notes_open: true, work, last: None };
    // Until the first notification, the answer can still be a plain JSON reply.
    let first = match progress.next().await {
        Some(Item::Last(last)) => return frame_or_nothing(format, &last),
        Some(Item::Note(note)) => note,
        None => return status(StatusCode::INTERNAL_SERVER_ERROR, "the request ended without a response\n"),
    };
    let events = futures::stream::unfold((Some(first), progress), |(first, mut progress)| async move {
        let text = match first {
            Some(note) => event(&note.to_string()),
            None => match progress.next().await? {
                Item::Note(note) => event(&note.to_string()),
                // A request cancelled by its caller ends its stream without an answer.
                Item::Last(last) if last.is_null() => return None,
                Item::Last(last) => event(&last.to_string()),
            },
        };
        Some((Ok::<_, std::convert::Infallible>(text), (None, progress)))
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

/// A request being answered: its notifications so far, then its answer.
struct Progress {
    notes: tokio::sync::mpsc::UnboundedReceiver<Value>,
    /// False once the work has dropped its `Notify`.
    notes_open: bool,
    work: Work,
    /// The answer, held until the notifications sent before it are out.
    last: Option<Value>,
}

impl Progress {
    /// The next notification, or the answer once every notification sent before it is
    /// out; `None` after the answer.
    async fn next(&mut self) -> Option<Item> {
        loop {
            if let Ok(note) = self.notes.try_recv() {
                return Some(Item::Note(note));
            }
            if let Some(last) = self.last.take() {
                return Some(Item::Last(last));
            }
            let future = self.work.future.as_mut()?;
            tokio::select! {
                note = self.notes.recv(), if self.notes_open => match note {
                    Some(note) => return Some(Item::Note(note)),
                    None => self.notes_open = false,
                },
                last = future => {
                    self.work.future = None;
                    self.last = Some(last);
                }
            }
        }
    }
}

/// The work of a request until it has answered. Dropped before that (the caller went
/// away): cancelled, or spawned to finish on its own.
struct Work {
    future: Option<std::pin::Pin<Box<dyn Future<Output = Value> + Send>>>,
    cancel_on_close: bool,
}

impl Drop for Work {
    fn drop(&mut self) {
        if let Some(future) = self.future.take().filter(|_| !self.cancel_on_close) {
            // Not while the runtime itself is going away: then everything stops anyway.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(future);
            }
        }
    }
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
