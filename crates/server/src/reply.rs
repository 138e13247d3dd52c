//! Writing a JSON-RPC frame back as an HTTP response: JSON or a one-event SSE stream, as
//! the request's `Accept` allows, with the status the spec names for the situation.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpx_protocol::RpcError;
use mcpx_protocol::message;
use serde_json::Value;

/// How the caller wants replies: JSON unless it accepts only an event stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    EventStream,
}

impl Format {
    pub fn from_headers(headers: &HeaderMap) -> Format {
        let accept = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect::<Vec<_>>().join(",");
        let offers = |kind: &str| accept.split(',').any(|part| part.split(';').next().unwrap_or("").trim() == kind);
        if !offers("application/json") && !offers("*/*") && !offers("application/*") && offers("text/event-stream") {
            Format::EventStream
        } else {
            Format::Json
        }
    }
}

/// A frame (or a batch of frames) with a status.
pub fn frame(status: StatusCode, format: Format, body: &Value) -> Response {
    let text = body.to_string();
    match format {
        Format::Json => (status, [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], text).into_response(),
        Format::EventStream => (
            status,
            [
                (header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream")),
                (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
                (header::HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no")),
            ],
            format!("event: message\ndata: {text}\n\n"),
        )
            .into_response(),
    }
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
