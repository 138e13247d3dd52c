//! `/ui`: the status page the daemon serves. Three static files embedded in the binary
//! (no build step) and `/ui/state` (in `api`: the `/v1/status` answer, for the same
//! caller), behind the same admission as every route: loopback, and with `http.tokens`
//! the bearer.
//!
//! The page builds its DOM with `textContent` only: an upstream's error text is hostile
//! input. The Content-Security-Policy allows nothing but this origin's script, style and
//! fetches, so even markup that slipped through could not run.

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::front::Front;

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

/// Nothing but this origin's own script, style and `/ui/state`; no framing, no forms.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                       img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn routes() -> Router<Arc<Front>> {
    Router::new()
        .route("/ui", get(async || asset(INDEX, "text/html; charset=utf-8")))
        .route("/ui/app.js", get(async || asset(SCRIPT, "text/javascript; charset=utf-8")))
        .route("/ui/app.css", get(async || asset(STYLE, "text/css; charset=utf-8")))
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
