//! Writing JSON-RPC back as an HTTP response on `/mcp`: one frame as JSON or a one-event
//! SSE stream, as the request's `Accept` allows; a request's notifications then its answer
//! as an event stream; an open-ended event stream (a listen, a session's standalone
//! stream) with keep-alives. Events are framed by `axum::response::sse`.
//!
//! Also the one place that decides the HTTP status of a JSON-RPC outcome on `/mcp`
//! ([`refusal_status`], [`status_for`]); the other statuses the transport spec names for
//! a situation (an unknown session, a body too large) are set where it is detected.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use mcpx_protocol::message;
use mcpx_protocol::{RpcError, code};
use serde_json::Value;

use crate::dispatch::Notify;

/// How often an idle open-ended stream gets a keep-alive comment.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

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
        let accept =
            headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(",");
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
    match format.single() {
        Format::Json | Format::Either => {
            // Bytes straight from the serializer: `to_string` goes through `fmt` for every piece.
            let json = serde_json::to_vec(body).expect("a JSON value always serializes");
            (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], json).into_response()
        }
        Format::EventStream => events(status, Sse::new(futures::stream::once(std::future::ready(event(body))))),
    }
}

/// One frame as an event: `event: message`, the frame as its data.
fn event(frame: &Value) -> Result<Event, axum::Error> {
    Event::default().event("message").json_data(frame)
}

/// An event stream with `status`, which proxies pass on as it comes.
fn events(status: StatusCode, sse: impl IntoResponse) -> Response {
    let unbuffered = [(header::HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"))];
    (status, unbuffered, sse).into_response()
}

/// An open-ended event stream of `frames`, with a keep-alive comment whenever it has been
/// idle for [`KEEP_ALIVE`], until `frames` ends (or the caller closes it).
pub fn open_stream(frames: impl Stream<Item = Value> + Send + 'static) -> Response {
    let keep_alive = KeepAlive::new().interval(KEEP_ALIVE).text("keep-alive");
    events(StatusCode::OK, Sse::new(frames.map(|frame| event(&frame))).keep_alive(keep_alive))
}

/// The reply to one request whose caller takes an event stream. `work` gets a `Notify`
/// for the request's notifications and returns its response frame. Nothing to say before
/// the response: a plain JSON reply. Otherwise an event stream: the notifications as they
/// come, then the response, then the end.
/// With `cancel_on_close`, a caller closing the stream cancels the work (2026-07-28); a
/// handshake-era caller's disconnect is not a cancellation, so its work runs on.
///
/// A caller that does not read its stream holds at most `max_notes` notifications: past
/// that the oldest progress and log messages are dropped (and counted in the daemon's
/// log), so an upstream that floods a silent caller cannot grow the daemon's memory.
///
/// The work runs inside the response, not as a task of its own: a spawn per request (the
/// future moved into the task, a wake-up across tasks for the answer) was the largest cost
/// of a handshake-era call. Only if the caller goes away before the answer, and the work is
/// not to be cancelled, is what is left of it spawned to finish on its own.
pub async fn streamed<F, Fut>(cancel_on_close: bool, format: Format, max_notes: usize, work: F) -> Response
where
    F: FnOnce(Notify) -> Fut,
    Fut: Future<Output = Value> + Send + 'static,
{
    let mut progress = Progress::start(cancel_on_close, max_notes, work);
    // Until the first notification, the answer can still be a plain JSON reply.
    let first = match progress.next().await {
        Some(Item::Last(last)) => return frame_or_nothing(format, &last),
        Some(Item::Note(note)) => note,
        None => return status(StatusCode::INTERNAL_SERVER_ERROR, "the request ended without a response\n"),
    };
    let frames = futures::stream::unfold((Some(first), progress), |(first, mut progress)| async move {
        let frame = match first {
            Some(note) => note,
            None => match progress.next().await? {
                Item::Note(note) => note,
                // A request cancelled by its caller ends its stream without an answer.
                Item::Last(last) if last.is_null() => return None,
                Item::Last(last) => last,
            },
        };
        Some((event(&frame), (None, progress)))
    });
    events(StatusCode::OK, Sse::new(frames))
}

/// As [`streamed`], for another node of the cluster (a relayed request): every frame the
/// work sends, then its answer (none when it is null), each a JSON line
/// (`application/x-ndjson`), from the start. A caller that hangs up cancels the work.
pub fn lines<F, Fut>(max_notes: usize, work: F) -> Response
where
    F: FnOnce(Notify) -> Fut,
    Fut: Future<Output = Value> + Send + 'static,
{
    let progress = Progress::start(true, max_notes, work);
    let lines = futures::stream::unfold(progress, |mut progress| async move {
        let frame = match progress.next().await? {
            Item::Note(frame) => frame,
            // Work that answered along the way (a subscription) ends without more.
            Item::Last(last) if last.is_null() => return None,
            Item::Last(last) => last,
        };
        let mut line = serde_json::to_vec(&frame).expect("a frame serializes");
        line.push(b'\n');
        Some((Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(line)), progress))
    });
    let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON))];
    (StatusCode::OK, content_type, axum::body::Body::from_stream(lines)).into_response()
}

/// The media type of [`lines`].
pub const NDJSON: &str = "application/x-ndjson";

enum Item {
    Note(Value),
    Last(Value),
}

/// The notifications of one request not yet written to its caller, at most `max`.
struct Notes {
    queue: std::sync::Mutex<std::collections::VecDeque<Value>>,
    /// Woken (a permit kept) whenever one is added.
    added: tokio::sync::Notify,
    max: usize,
    dropped: std::sync::atomic::AtomicU64,
}

impl Notes {
    fn new(max: usize) -> Notes {
        Notes {
            queue: Default::default(),
            added: tokio::sync::Notify::new(),
            max: max.max(1),
            dropped: Default::default(),
        }
    }

    /// Adds a frame. When full, the oldest progress, log message or resource update (a
    /// relayed subscription's) goes; the server's questions never do, they wait for
    /// answers.
    fn push(&self, frame: Value) {
        let droppable = |f: &Value| {
            matches!(
                f["method"].as_str(),
                Some("notifications/progress" | "notifications/message" | "notifications/resources/updated")
            )
        };
        let mut queue = self.queue.lock().expect("notes lock");
        if queue.len() >= self.max {
            if let Some(oldest) = queue.iter().position(droppable) {
                queue.remove(oldest);
                self.count_dropped();
            } else if droppable(&frame) {
                self.count_dropped();
                return;
            }
            // Nothing held but questions: this one is kept too (each waits for its answer,
            // and the upstream's own requests in flight bound them).
        }
        queue.push_back(frame);
        drop(queue);
        self.added.notify_one();
    }

    fn count_dropped(&self) {
        let dropped = self.dropped.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if dropped == 1 || dropped.is_power_of_two() {
            tracing::warn!(
                dropped,
                "a caller is not reading its event stream: dropped its oldest notifications (limits.maxBufferedNotifications)"
            );
        }
    }

    fn pop(&self) -> Option<Value> {
        self.queue.lock().expect("notes lock").pop_front()
    }
}

/// A request being answered: its notifications so far, then its answer.
struct Progress {
    notes: std::sync::Arc<Notes>,
    work: Work,
    /// The answer, held until the notifications sent before it are out.
    last: Option<Value>,
}

impl Progress {
    /// Starts `work`, handing it where its notifications go (at most `max_notes` wait).
    fn start<F, Fut>(cancel_on_close: bool, max_notes: usize, work: F) -> Progress
    where
        F: FnOnce(Notify) -> Fut,
        Fut: Future<Output = Value> + Send + 'static,
    {
        let notes = std::sync::Arc::new(Notes::new(max_notes));
        let held = notes.clone();
        let notify: Notify = std::sync::Arc::new(move |frame| held.push(frame));
        let work = Work { future: Some(Box::pin(work(notify))), cancel_on_close };
        Progress { notes, work, last: None }
    }

    /// The next notification, or the answer once every notification sent before it is
    /// out; `None` after the answer.
    async fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(note) = self.notes.pop() {
                return Some(Item::Note(note));
            }
            if let Some(last) = self.last.take() {
                return Some(Item::Last(last));
            }
            let future = self.work.future.as_mut()?;
            tokio::select! {
                _ = self.notes.added.notified() => {}
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
    if frame.is_null() { accepted() } else { answer(format, frame) }
}

/// The response to request `id` with `outcome`, as [`answer`] gives it; a result as JSON
/// is written straight to bytes, without building its frame first.
pub fn outcome(format: Format, id: &Value, outcome: Result<Value, RpcError>) -> Response {
    match (format.single(), outcome) {
        (Format::Json | Format::Either, Ok(result)) => {
            let json = message::result_bytes(id, &result);
            let content_type = [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))];
            (StatusCode::OK, content_type, json).into_response()
        }
        (_, outcome) => answer(format, &crate::dispatch::response(id, outcome)),
    }
}

/// The response frame of a request that ran, with the status its outcome gets.
pub fn answer(format: Format, frame: &Value) -> Response {
    self::frame(status_for(frame), format.single(), frame)
}

/// The HTTP status of a response frame: the errors 2026-07-28 ties to 400 get it, every
/// other answer (results, and errors the spec leaves open) is 200.
pub fn status_for(frame: &Value) -> StatusCode {
    let code = frame.get("error").and_then(|e| e.get("code")).and_then(Value::as_i64);
    match code {
        Some(code::HEADER_MISMATCH | code::MISSING_REQUIRED_CLIENT_CAPABILITY | code::UNSUPPORTED_PROTOCOL_VERSION) => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}

/// The HTTP status of a 2026 request refused before it ran (`modern::admit`, and the
/// HTTP front end's own header checks): 404 for a method the era does not have, 400 for
/// every other refusal.
pub fn refusal_status(e: &RpcError) -> StatusCode {
    match e.code {
        code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::BAD_REQUEST,
    }
}

/// A refused 2026 request, with the status of its refusal.
pub fn refusal(format: Format, id: Option<&Value>, e: &RpcError) -> Response {
    error(refusal_status(e), format, id, e)
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

#[cfg(test)]
mod tests {
    use super::*;
    use mcpx_protocol::message::{error_response, result_response};
    use serde_json::json;

    #[test]
    fn a_refused_2026_request_is_404_for_an_unknown_method_and_400_otherwise() {
        assert_eq!(refusal_status(&RpcError::method_not_found("resources/subscribe")), StatusCode::NOT_FOUND);
        for e in [
            RpcError::invalid_params("params._meta is required"),
            RpcError::header_mismatch("the Mcp-Method header is required"),
            RpcError::unsupported_version("1999-01-01", &["2026-07-28"]),
            RpcError::invalid_request("a 2026-07-28 client never sends responses"),
        ] {
            assert_eq!(refusal_status(&e), StatusCode::BAD_REQUEST, "{}", e.message);
        }
    }

    #[test]
    fn an_answer_is_200_unless_its_error_is_one_2026_ties_to_400() {
        let id = json!(1);
        assert_eq!(status_for(&result_response(&id, json!({}))), StatusCode::OK);
        let bad_arguments = error_response(Some(&id), &RpcError::invalid_params("no such tool"));
        assert_eq!(status_for(&bad_arguments), StatusCode::OK, "a tool's bad arguments are an answer");
        let mismatch = error_response(Some(&id), &RpcError::header_mismatch("Mcp-Param-x does not match"));
        assert_eq!(status_for(&mismatch), StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn an_event_is_a_message_with_the_frame_as_its_data() {
        let response = frame(StatusCode::OK, Format::EventStream, &json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        assert_eq!(response.headers()[header::CONTENT_TYPE], "text/event-stream");
        assert_eq!(response.headers()["x-accel-buffering"], "no");
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
        assert_eq!(body, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n");
    }
}
