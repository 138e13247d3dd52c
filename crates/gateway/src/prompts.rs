//! `prompts/list`, `prompts/get` and `completion/complete`: every upstream's prompts under
//! their public names (`<server>__<prompt>`), and completions routed to the server that
//! owns the prompt or resource they complete.

use mcpx_protocol::{code, message};
use serde_json::{Value, json};

use crate::error::Error;
use crate::policy::{Access, Kind};
use crate::{Answer, CallContext, Found, Gateway, Search, invocation, list_all, naming};

impl Gateway {
    pub(crate) async fn list_prompts(&self, ctx: &CallContext) -> Result<Answer, Error> {
        let config = self.settings.config();
        let access = Access::of(&config, &ctx.identity);
        let (items, mut cache) = self.gather(ctx, &access.servers(), "prompts", "prompts/list", "prompts").await;
        cache.private |= access.per_client();
        let items = items.into_iter().filter(|(server, prompt)| naming::shows("prompt", server, prompt)).collect();
        let renamed: Vec<(String, Value)> = access
            .show_all(Kind::Prompt, items)?
            .into_iter()
            .map(|(server, mut prompt)| {
                if let Some(name) = prompt.get("name").and_then(Value::as_str) {
                    prompt["name"] = naming::public_name(&config, &server, name).into();
                }
                (server, prompt)
            })
            .collect();
        naming::refuse_clashes(
            "prompt",
            renamed.iter().map(|(s, p)| (s.as_str(), p["name"].as_str().unwrap_or_default())),
        )?;
        let listed: Vec<Value> = renamed.into_iter().map(|(_, p)| p).collect();
        Ok(Answer { result: message::object([("prompts", Value::Array(listed))]), cache })
    }

    pub(crate) async fn get_prompt(&self, ctx: &CallContext, params: Value) -> Result<Value, Error> {
        let Some(name) = params.get("name").and_then(Value::as_str).map(str::to_owned) else {
            return Err(Error::params("prompts/get: \"name\" must be a string"));
        };
        let unknown = || Error::params(format!("unknown prompt {name:?}")).with_data(json!({ "name": name }));
        let Some(Found { server, original, lease }) = self.prompt_owner(ctx, &name).await else {
            let config = self.settings.config();
            let refused = Access::of(&config, &ctx.identity).refuses(Kind::Prompt, &name);
            return Err(if refused { Error::Hidden(Box::new(unknown())) } else { unknown() });
        };
        let mut upstream_params = params.clone();
        if let Some(p) = upstream_params.as_object_mut() {
            p.remove("_meta");
            p.insert("name".into(), original.clone().into());
        }
        let meta = invocation::forwarded_meta(&params);
        let forwarded = self.forward(ctx, &server, "prompts/get", upstream_params, meta, lease);
        let mut result = match forwarded.await {
            Ok(result) => result,
            // A prompt the server does not have gets mcpx's own error, as a hidden one does,
            // so the two cannot be told apart.
            Err((e, Some(lease))) if e.code() == code::INVALID_PARAMS || e.code() == code::METHOD_NOT_FOUND => {
                let listing = Box::pin(list_all(self, ctx, &lease, "prompts/list", "prompts"));
                let listed = listing.await.map(|l| l.0).unwrap_or_default();
                let has = listed.iter().any(|p| p.get("name").and_then(Value::as_str) == Some(original.as_str()));
                return Err(if listed.is_empty() || has { e } else { unknown() });
            }
            Err((e, _)) => return Err(e),
        };
        naming::link_resources(&self.settings.config(), &server, &mut result);
        Ok(result)
    }

    pub(crate) async fn complete(&self, ctx: &CallContext, params: Value) -> Result<Value, Error> {
        let reference = params.get("ref").cloned().unwrap_or(Value::Null);
        let owner = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => match reference.get("name").and_then(Value::as_str) {
                Some(name) => self.prompt_owner(ctx, name).await.map(|found| (found, "name")),
                None => return Err(Error::params("completion/complete: ref/prompt needs a \"name\"")),
            },
            Some("ref/resource") => match reference.get("uri").and_then(Value::as_str) {
                Some(uri) => match self.visible_resource_owner(ctx, uri).await {
                    Ok(found) => Some((found, "uri")),
                    // A URI without a sure normal form: the caller learns why.
                    Err(e @ Error::Params { .. }) => return Err(e),
                    Err(_) => None,
                },
                None => return Err(Error::params("completion/complete: ref/resource needs a \"uri\"")),
            },
            _ => {
                return Err(Error::params("completion/complete: \"ref\" must be a ref/prompt or ref/resource"));
            }
        };
        let Some((Found { server, original, lease }, field)) = owner else {
            return Err(Error::params("completion/complete: the ref names nothing mcpx serves")
                .with_data(json!({ "ref": reference })));
        };
        // The call goes to this instance, so a per-call one is not stopped and started again.
        let leased = match lease {
            Some(lease) => Ok(lease),
            None => self.lease(ctx, &server).await,
        };
        let lease = match leased {
            // The owner offers no completions: nothing to suggest, and nothing to ask it.
            Ok(lease) if lease.upstream().facts().capabilities.get("completions").is_none() => {
                return Ok(json!({ "completion": { "values": [], "hasMore": false } }));
            }
            Ok(lease) => Some(lease),
            // Another node runs the instance: `forward` relays the request there, whose
            // upstream answers as it does for its own callers.
            Err(Error::Elsewhere(_)) if !ctx.relayed => None,
            Err(e) => return Err(e),
        };
        let mut upstream_params = params.clone();
        if let Some(p) = upstream_params.as_object_mut() {
            p.remove("_meta");
            p["ref"][field] = original.into();
        }
        let meta = invocation::forwarded_meta(&params);
        let forwarded = self.forward(ctx, &server, "completion/complete", upstream_params, meta, lease);
        forwarded.await.map_err(|(e, _)| e)
    }

    /// The server of the prompt a public name stands for (`placement`).
    pub(crate) async fn prompt_server(&self, ctx: &CallContext, name: &str) -> Option<String> {
        self.prompt_owner(ctx, name).await.map(|found| found.server)
    }

    /// The server and upstream name of the prompt a public name stands for, when the
    /// caller may see it; with the lease that listed it, for a name the server keeps.
    async fn prompt_owner(&self, ctx: &CallContext, name: &str) -> Option<Found> {
        let config = self.settings.config();
        let access = Access::of(&config, &ctx.identity);
        if let Some((server, shown)) = naming::split_name(&config, name) {
            let original = access.named(Kind::Prompt, &server, &shown)?;
            return Some(Found { server, original, lease: None });
        }
        let own: Vec<String> = naming::own_name_servers(&config).into_iter().filter(|s| access.server(s)).collect();
        let named = |server: &str, prompt: &Value| {
            let upstream = prompt.get("name").and_then(Value::as_str);
            upstream.is_some_and(|upstream| access.named(Kind::Prompt, server, name).as_deref() == Some(upstream))
        };
        let search = Search { method: "prompts/list", field: "prompts", wanted: &named };
        let (server, prompt, lease) = self.find_listed(ctx, &own, "prompts", &[search]).await?;
        let original = prompt.get("name").and_then(Value::as_str)?.to_owned();
        Some(Found { server, original, lease })
    }
}
