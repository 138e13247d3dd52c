//! The HTTP client every HTTP upstream shares (see `mcpx_http`): pooled keep-alive
//! connections, and the redirects a server may answer an endpoint with.

use std::sync::OnceLock;

pub(crate) use mcpx_http::{Body, Client, Response, basic_credentials, uri_of};

/// The client, built on first use.
pub(crate) fn shared() -> &'static Client {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    CLIENT.get_or_init(|| Client::new(mcpx_http::Redirects::FOLLOW, None))
}
