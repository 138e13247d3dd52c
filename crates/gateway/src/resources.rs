//! `resources/list`, `resources/templates/list` and `resources/read`: every upstream's
//! resources under their public URIs (`mcpx://<server>/<uri>`), each read from the
//! instance the caller's identity selects.

use std::sync::atomic::{AtomicBool, Ordering};

use mcpx_protocol::shape::Cacheability;
use mcpx_protocol::{code, message};
use serde_json::{Value, json};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;

use crate::error::Error;
use crate::policy::Access;
use crate::{Answer, Artifact, CallContext, Found, Gateway, Scope, Search, artifacts, invocation, naming};

impl Gateway {
    pub(crate) async fn list_resources(&self, ctx: &CallContext, method: &str, field: &str) -> Result<Answer, Error> {
        let config = self.settings.config();
        let access = Access::of(&config, &ctx.identity);
        let (items, mut cache) = self.gather(ctx, &access.servers(), "resources", method, field).await;
        cache.private |= access.per_client();
        let uri_field = if field == "resources" { "uri" } else { "uriTemplate" };
        let kind = if field == "resources" { "resource" } else { "resource template" };
        let renamed: Vec<(String, Value)> = items
            .into_iter()
            .filter(|(server, item)| naming::shows(kind, server, item))
            .filter(|(server, item)| {
                item.get(uri_field).and_then(Value::as_str).is_some_and(|u| access.resource(server, u))
            })
            .map(|(server, mut item)| {
                if let Some(uri) = item.get(uri_field).and_then(Value::as_str) {
                    item[uri_field] = naming::public_uri(&config, &server, uri).into();
                }
                (server, item)
            })
            .collect();
        naming::refuse_clashes(
            kind,
            renamed.iter().map(|(s, r)| (s.as_str(), r[uri_field].as_str().unwrap_or_default())),
        )?;
        let mut listed: Vec<Value> = renamed.into_iter().map(|(_, r)| r).collect();
        if field == "resources" && self.keeps_artifacts() {
            // Which artifacts are listed depends on who asks, even when none are.
            listed.extend(self.artifacts_of(&ctx.identity).await.iter().map(Artifact::listing));
            cache = Cacheability::PRIVATE_UNCACHED;
        }
        Ok(Answer { result: message::object([(field, Value::Array(listed))]), cache })
    }

    pub(crate) async fn read_resource(&self, ctx: &CallContext, params: Value) -> Result<Answer, Error> {
        let Some(uri) = params.get("uri").and_then(Value::as_str).map(str::to_owned) else {
            return Err(Error::params("resources/read: \"uri\" must be a string"));
        };
        if uri.starts_with(artifacts::PREFIX) {
            return self.read_artifact(ctx, &uri).await;
        }
        let Found { server, original, lease } = self.visible_resource_owner(ctx, &uri).await?;
        let mut upstream_params = params.clone();
        if let Some(p) = upstream_params.as_object_mut() {
            p.remove("_meta");
            p.insert("uri".into(), original.clone().into());
        }
        let mut result = self
            .forward(ctx, &server, "resources/read", upstream_params, invocation::forwarded_meta(&params), lease)
            .await
            .map_err(|(e, _)| match e.code() {
                code::LEGACY_RESOURCE_NOT_FOUND | code::INVALID_PARAMS => not_found(&uri),
                _ => e,
            })?;
        let config = self.settings.config();
        if let Some(Value::Array(contents)) = result.get_mut("contents") {
            for item in contents {
                if let Some(u) = item.get("uri").and_then(Value::as_str) {
                    item["uri"] = naming::public_uri(&config, &server, u).into();
                }
            }
        }
        let scoped = config.server(&server).is_some_and(|s| s.scope != Scope::Global);
        let cache = if scoped {
            Cacheability::PRIVATE_UNCACHED
        } else {
            Cacheability {
                ttl_ms: result.get("ttlMs").and_then(Value::as_u64).unwrap_or(0),
                private: result.get("cacheScope").and_then(Value::as_str) == Some("private"),
            }
        };
        Ok(Answer { result, cache })
    }

    /// One of the caller's artifacts; another session's reads as if it did not exist.
    async fn read_artifact(&self, ctx: &CallContext, uri: &str) -> Result<Answer, Error> {
        let found = match artifacts::id_of(uri) {
            Some(id) => self.artifact(&ctx.identity, id).await,
            None => None,
        };
        let Some((artifact, data)) = found else { return Err(not_found(uri)) };
        let mut item = json!({ "uri": uri, "mimeType": artifact.mime_type });
        let texty = artifact.mime_type.starts_with("text/") || artifact.mime_type.contains("json");
        match String::from_utf8(data) {
            Ok(text) if texty => item["text"] = text.into(),
            Ok(text) => item["blob"] = BASE64.encode(text).into(),
            Err(e) => item["blob"] = BASE64.encode(e.into_bytes()).into(),
        }
        Ok(Answer::uncached(json!({ "contents": [item] })))
    }

    /// A handshake-era `resources/subscribe` or `unsubscribe`, passed to the instance that
    /// owns the resource.
    pub(crate) async fn subscribe(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Value, Error> {
        let Some(uri) = params.get("uri").and_then(Value::as_str).map(str::to_owned) else {
            return Err(Error::params(format!("{method}: \"uri\" must be a string")));
        };
        if method == "resources/unsubscribe" {
            // A subscription relayed to another node ends here, whatever serves the
            // resource now (or whether anything does).
            self.instances.relayed.end(&ctx.identity.owner_key(), Some(&uri));
        }
        let Found { server, original, lease } = self.visible_resource_owner(ctx, &uri).await?;
        // A stateless upstream has no resources/subscribe: the subscription is taken, but
        // its updates are not relayed to a handshake-era session yet.
        let leased = match lease {
            Some(lease) => Ok(lease),
            None => self.lease(ctx, &server).await,
        };
        let lease = match leased {
            Ok(lease) => lease,
            Err(Error::Elsewhere(_)) if method == "resources/unsubscribe" => return Ok(json!({})),
            Err(Error::Elsewhere(elsewhere)) if !ctx.relayed => {
                return Box::pin(self.shared()?.subscribe_elsewhere(ctx, *elsewhere, &uri, &original)).await;
            }
            Err(e) => return Err(e),
        };
        if lease.upstream().facts().era == mcpx_protocol::Era::Modern {
            return Ok(json!({}));
        }
        let mut upstream_params = params.clone();
        if let Some(p) = upstream_params.as_object_mut() {
            p.remove("_meta");
            p.insert("uri".into(), original.into());
        }
        let forwarded =
            self.forward(ctx, &server, method, upstream_params, invocation::forwarded_meta(&params), Some(lease));
        forwarded.await.map_err(|(e, _)| e)
    }

    /// The owner of a URI the caller may see, else the error for a resource that does not
    /// exist (as `Error::Hidden` when the policy hides it). `original` is the upstream's
    /// URI in normal form, the one the policy was asked about: what the upstream is sent.
    /// A URI without a sure normal form is refused as invalid, saying why.
    pub(crate) async fn visible_resource_owner(&self, ctx: &CallContext, uri: &str) -> Result<Found, Error> {
        let config = self.settings.config();
        let access = Access::of(&config, &ctx.identity);
        let hidden = || Error::Hidden(Box::new(not_found(uri)));
        if let Some((server, original)) = naming::split_uri(&config, uri) {
            let original = normal_form(uri, &original)?;
            return match access.resource(&server, &original) {
                true => Ok(Found { server, original, lease: None }),
                false => Err(hidden()),
            };
        }
        let normal = normal_form(uri, uri)?;
        // A server that keeps its own names, and that the caller may use, is found by its
        // listing, then its templates (one it may not use is not even started for it). An
        // item the caller's listing leaves out (the policy hides it there, or its text
        // could pass for another's) is passed over for the next server's, as the listing
        // passed over it.
        let own: Vec<String> = naming::own_name_servers(&config).into_iter().filter(|s| access.server(s)).collect();
        let refused = AtomicBool::new(false);
        let shown = |server: &str, kind: &str, item: &Value| {
            let allowed = access.resource(server, &normal);
            refused.fetch_or(!allowed, Ordering::Relaxed);
            allowed && naming::shows(kind, server, item)
        };
        let listed = |server: &str, r: &Value| {
            let listed_uri = r.get("uri").and_then(Value::as_str).map(|u| crate::uri::normalize(u).map(|u| u.normal));
            listed_uri.is_some_and(|u| u.as_ref() == Ok(&normal)) && shown(server, "resource", r)
        };
        let matched = |server: &str, t: &Value| {
            t.get("uriTemplate").and_then(Value::as_str).is_some_and(|t| naming::matches_template(t, &normal))
                && shown(server, "resource template", t)
        };
        let searches = [
            Search { method: "resources/list", field: "resources", wanted: &listed },
            Search { method: "resources/templates/list", field: "resourceTemplates", wanted: &matched },
        ];
        match self.find_listed(ctx, &own, "resources", &searches).await {
            Some((server, _, lease)) => Ok(Found { server, original: normal.clone(), lease }),
            None if refused.load(Ordering::Relaxed) => Err(hidden()),
            None => Err(not_found(uri)),
        }
    }

    /// The server and original URI of a URI the caller may see.
    pub(crate) async fn resource_owner(&self, ctx: &CallContext, uri: &str) -> Option<(String, String)> {
        self.visible_resource_owner(ctx, uri).await.ok().map(|found| (found.server, found.original))
    }
}

/// The normal form of the upstream's URI `uri` of `server`, when `principal` may read it:
/// how a node checks a read or subscription another node relayed, as the relaying node
/// did (a relay is never taken on trust about the resource).
pub(crate) fn relayed_original(
    config: &crate::config::Config,
    principal: &crate::Principal,
    server: &str,
    uri: &str,
) -> Result<String, Error> {
    let normal = normal_form(uri, uri)?;
    match Access::of_principal(config, principal).resource(server, &normal) {
        true => Ok(normal),
        false => Err(Error::Hidden(Box::new(not_found(uri)))),
    }
}

/// The normal form of `original`, the upstream's URI within the caller's `uri`, or an
/// invalid-params error naming the URI and why it has none.
fn normal_form(uri: &str, original: &str) -> Result<String, Error> {
    crate::uri::normalize(original).map(|u| u.normal).map_err(|why| {
        Error::params(format!("resource URI {uri:?} is refused: {why}")).with_data(json!({ "uri": uri, "reason": why }))
    })
}

/// Not found, in the handshake era's code; shaping turns it into -32602 for 2026 callers.
fn not_found(uri: &str) -> Error {
    Error::NoResource(uri.to_owned())
}
