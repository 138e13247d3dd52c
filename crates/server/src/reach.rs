//! Who may use each route: the one table that says it. Every route of the daemon is added
//! through [`Routes::route`], which takes the route's [`Reach`] beside its path, so a
//! route added later cannot be added without saying who it is for.
//!
//! A route for [`Reach::Daemon`] acts on the daemon as a whole (stops it, reads every
//! caller's counters): only the daemon's owner and the callers `http.admins` names get
//! past it; anyone else is refused (403) before the handler runs, naming the route and
//! who it needs. A route for [`Reach::Node`] serves only a request another node of the
//! cluster signed (admission checked the signature and marked the request). A route for
//! [`Reach::Caller`] serves any admitted caller, and its handler answers with what is
//! that caller's own. Nothing here authenticates: admission did that before, and left
//! the principal in the request.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use mcpx_gateway::policy;
use mcpx_protocol::RpcError;

use crate::admission::Admitted;
use crate::cluster::Forwarded;
use crate::front::Front;
use crate::v1;

/// Who may use a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Any admitted caller: the handler shows and acts on only what is the caller's own.
    Caller,
    /// The daemon as a whole: the daemon's owner and `http.admins` only.
    Daemon,
    /// Another node of this daemon's cluster only.
    Node,
}

impl Reach {
    /// How `docs/api/openapi.json` marks an operation of this reach (`x-mcpx-reach`).
    #[cfg(test)]
    pub fn as_str(self) -> &'static str {
        match self {
            Reach::Caller => "caller",
            Reach::Daemon => "daemon",
            Reach::Node => "node",
        }
    }
}

/// Routes, each with its reach; a router once [`Routes::into_router`] puts each
/// [`Reach::Daemon`] route behind its guard.
#[derive(Default)]
pub struct Routes {
    routes: Vec<(&'static str, Reach, MethodRouter<Arc<Front>>)>,
}

impl Routes {
    pub fn new() -> Routes {
        Routes::default()
    }

    /// Adds `methods` at `path`, for the callers `reach` says.
    pub fn route(mut self, path: &'static str, reach: Reach, methods: MethodRouter<Arc<Front>>) -> Routes {
        self.routes.push((path, reach, methods));
        self
    }

    /// Every route of `other` too.
    pub fn merge(mut self, other: Routes) -> Routes {
        self.routes.extend(other.routes);
        self
    }

    /// Each path and its reach, in the order added.
    #[cfg(test)]
    pub fn table(&self) -> Vec<(&'static str, Reach)> {
        self.routes.iter().map(|(path, reach, _)| (*path, *reach)).collect()
    }

    pub fn into_router(self, front: &Arc<Front>) -> Router<Arc<Front>> {
        self.routes.into_iter().fold(Router::new(), |router, (path, reach, methods)| {
            let methods = match reach {
                Reach::Daemon => methods.route_layer(middleware::from_fn_with_state(front.clone(), daemon_wide)),
                Reach::Node => methods.route_layer(middleware::from_fn(node_only)),
                Reach::Caller => methods,
            };
            router.route(path, methods)
        })
    }
}

/// The guard of a [`Reach::Daemon`] route: the owner and `http.admins` pass, anyone else
/// is refused before the handler runs.
async fn daemon_wide(State(front): State<Arc<Front>>, request: Request, next: Next) -> Response {
    let allowed = request.extensions().get::<Admitted>().is_some_and(|Admitted(transport)| {
        policy::acts_for_daemon(&front.gateway.settings().config(), &transport.principal)
    });
    if allowed {
        return next.run(request).await;
    }
    refused(&request, " acts on the daemon as a whole: it needs the daemon's owner or a caller in http.admins")
}

/// The guard of a [`Reach::Node`] route: only a request another node signed passes.
async fn node_only(request: Request, next: Next) -> Response {
    if request.extensions().get::<Forwarded>().is_some() {
        return next.run(request).await;
    }
    refused(&request, ": only another node of this daemon's cluster may send this request")
}

/// The 403 a guard answers: the request's method and path, then `why`.
fn refused(request: &Request, why: &str) -> Response {
    let why = format!("{} {}{why}", request.method(), request.uri().path());
    (StatusCode::FORBIDDEN, Json(v1::ErrorBody::from(&RpcError::invalid_request(why)))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `docs/api/openapi.json` says of each operation's reach, by path.
    fn documented() -> Vec<(String, String, String)> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/api/openapi.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let doc: serde_json::Value = serde_json::from_str(&text).expect("openapi.json is JSON");
        let mut found = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("a path item") {
                let reach = operation["x-mcpx-reach"].as_str().unwrap_or("(none)").to_owned();
                found.push((path.clone(), method.clone(), reach));
            }
        }
        found
    }

    #[test]
    fn every_v1_route_has_the_reach_the_description_documents() {
        let table = crate::api::routes().table();
        let documented = documented();
        assert!(documented.iter().any(|(p, _, r)| p == "/v1/stop" && r == "daemon"), "{documented:?}");
        for (path, method, reach) in &documented {
            let routed = table.iter().find(|(p, _)| p == path).map(|(_, r)| r.as_str());
            assert_eq!(routed, Some(reach.as_str()), "{method} {path}: the router and openapi.json disagree");
        }
        for (path, _) in table.iter().filter(|(p, _)| p.starts_with("/v1")) {
            assert!(documented.iter().any(|(p, _, _)| p == path), "{path} is routed but not documented");
        }
    }

    #[test]
    fn metrics_count_every_callers_requests_so_they_are_the_daemons() {
        let table = crate::http::routes().table();
        assert!(table.contains(&("/metrics", Reach::Daemon)), "{table:?}");
    }
}
