//! mcpx as an OAuth protected resource, as a client discovers it: the protected resource
//! metadata (RFC 9728) at `/.well-known/oauth-protected-resource` (and under it, the
//! path-based `/.well-known/oauth-protected-resource/mcp`), and the `WWW-Authenticate`
//! challenges that point a refused caller at it (RFC 6750 §3).
//!
//! The metadata is public: admission lets it through without a token (still under its
//! Origin and Host rules). It names only what any client may know.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mcpx_gateway::config::OAuthResourceConfig;
use serde_json::json;

use crate::front::Front;

/// Where the metadata is served (`http::routes` spells it out); anything under it
/// serves the same document.
pub const PATH: &str = "/.well-known/oauth-protected-resource";

/// Whether `path` is the metadata, which needs no token.
pub fn is_metadata(path: &str) -> bool {
    path == PATH || path.strip_prefix(PATH).is_some_and(|rest| rest.starts_with('/'))
}

/// mcpx's canonical resource URL: `http.oauth.resource`, else the `/mcp` URL it listens on.
pub fn resource_url(oauth: &OAuthResourceConfig, listening: &str) -> String {
    oauth.resource.clone().unwrap_or_else(|| listening.to_owned())
}

/// The metadata's URL for `resource` (RFC 9728 §3.1): the well-known path inserted
/// between the resource's origin and its path.
pub fn metadata_url(resource: &str) -> String {
    let Some((scheme, rest)) = resource.split_once("://") else { return format!("{resource}{PATH}") };
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_end_matches('/');
    if path.is_empty() {
        format!("{scheme}://{authority}{PATH}")
    } else {
        format!("{scheme}://{authority}{PATH}/{path}")
    }
}

/// `GET /.well-known/oauth-protected-resource[/...]`: the metadata, or 404 while
/// `http.oauth` is not configured.
pub async fn document(State(front): State<Arc<Front>>) -> Response {
    let config = front.gateway.settings().config();
    let Some(oauth) = &config.http.oauth else {
        return (StatusCode::NOT_FOUND, "mcpx accepts no OAuth tokens (http.oauth is not configured)\n")
            .into_response();
    };
    let mut metadata = json!({
        "resource": resource_url(oauth, &front.life.url),
        "authorization_servers": oauth.issuers,
        "bearer_methods_supported": ["header"],
        "resource_name": "mcpx",
    });
    let scopes = oauth.scopes_supported();
    if !scopes.is_empty() {
        metadata["scopes_supported"] = scopes.into();
    }
    let mut response = Json(metadata).into_response();
    // Public, and read by browser-based clients too; admission already refused a
    // foreign page's request.
    response.headers_mut().insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    response
}

/// A `WWW-Authenticate: Bearer` challenge: where the metadata is, the scopes the route
/// needs (when there are any to name), and the error when a token was presented.
pub fn challenge(resource: &str, error: Option<&str>, scopes: &[String]) -> HeaderValue {
    let mut value = String::from("Bearer");
    let mut param = |name: &str, v: &str| {
        let sep = if value.len() == "Bearer".len() { " " } else { ", " };
        value.push_str(&format!("{sep}{name}=\"{}\"", v.replace(['"', '\\'], "")));
    };
    if let Some(error) = error {
        param("error", error);
    }
    if !scopes.is_empty() {
        param("scope", &scopes.join(" "));
    }
    param("resource_metadata", &metadata_url(resource));
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_inserts_the_well_known_path_before_the_resources_path() {
        assert_eq!(
            metadata_url("http://127.0.0.1:7750/mcp"),
            "http://127.0.0.1:7750/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(metadata_url("https://mcpx.example/"), "https://mcpx.example/.well-known/oauth-protected-resource");
        assert!(is_metadata(PATH) && is_metadata(&format!("{PATH}/mcp")));
        assert!(!is_metadata("/.well-known/oauth-protected-resourcex") && !is_metadata("/mcp"));
    }

    #[test]
    fn a_challenge_names_error_scope_and_metadata() {
        let scopes = vec!["mcp:tools".to_owned(), "x".to_owned()];
        let c = challenge("http://h/mcp", Some("insufficient_scope"), &scopes);
        assert_eq!(
            c.to_str().unwrap(),
            "Bearer error=\"insufficient_scope\", scope=\"mcp:tools x\", resource_metadata=\"http://h/.well-known/oauth-protected-resource/mcp\""
        );
        let c = challenge("http://h/mcp", None, &[]);
        assert_eq!(
            c.to_str().unwrap(),
            "Bearer resource_metadata=\"http://h/.well-known/oauth-protected-resource/mcp\""
        );
    }
}
