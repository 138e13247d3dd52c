//! The HTTP clients HTTP upstreams share (see `mcpx_http`): pooled keep-alive
//! connections, and the redirects a server may answer an endpoint with. One client per
//! place an upstream was configured at, since where its redirects may lead depends on
//! that place (`mcpx_http::egress`); every instance of a server there shares its pool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use mcpx_http::{Allowed, Egress};
pub(crate) use mcpx_http::{Body, Client, Response, basic_credentials, uri_of};

/// The client for an upstream at `url`, whose redirects may also lead to `allow`; built
/// on first use.
pub(crate) fn toward(url: &url::Url, allow: &Arc<[Allowed]>) -> Client {
    static CLIENTS: OnceLock<Mutex<HashMap<String, Client>>> = OnceLock::new();
    let key = format!(
        "{}://{}:{} {allow:?}",
        url.scheme(),
        url.host_str().unwrap_or_default(),
        url.port_or_known_default().unwrap_or_default()
    );
    let mut clients = CLIENTS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    clients
        .entry(key)
        .or_insert_with(|| Client::new(mcpx_http::Redirects::FOLLOW, None, Egress::toward(url).allowing(allow.clone())))
        .clone()
}
