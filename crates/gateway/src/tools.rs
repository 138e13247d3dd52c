//! Tools mcpx publishes: the gateway tools (`mcpx_search`, `mcpx_call`, `mcpx_exec`) and, for servers
//! named in `expose`, the upstream tools themselves under `<server>__<tool>`.

use futures::future::join_all;
use mcpx_protocol::shape::Cacheability;
use mcpx_protocol::{code, message, param_headers};
use serde_json::{Map, Value, json};

use crate::error::Error;
use crate::listings::Listed;
use crate::policy::{Access, Kind};
use crate::{Answer, CallContext, Gateway, Lease, Scope, exec, invocation, list_all, naming, search};

pub use crate::{CALL, SEARCH};

/// The gateway's own tool definitions.
pub fn gateway_tools() -> Vec<Value> {
    vec![
        json!({
            "name": SEARCH,
            "title": "Search upstream tools",
            "description": "Find tools offered by the MCP servers behind mcpx. Every word of the query must appear in the server name, tool name or description; an empty query lists every tool. Returns each match's server, tool, description and input schema, and `js`, how an mcpx_exec script calls it; call one with mcpx_call.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "Words to look for; empty lists everything." }
                }
            },
            "annotations": { "readOnlyHint": true, "openWorldHint": false }
        }),
        json!({
            "name": CALL,
            "title": "Call an upstream tool",
            "description": "Call a tool of one of the MCP servers behind mcpx, as found with mcpx_search. The result is the upstream tool's result, unchanged.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "server": { "type": "string", "description": "The server's name, as mcpx_search reports it." },
                    "tool": { "type": "string", "description": "The tool's name on that server." },
                    "arguments": { "type": "object", "description": "The tool's arguments.", "additionalProperties": true }
                },
                "required": ["server", "tool"]
            }
        }),
        exec::definition(),
    ]
}

/// The tool a call is for: its server and its name as the caller sees it, with where it
/// was found when finding it took the server's listing (so neither checking its headers
/// nor sending the call looks again).
struct Target {
    server: String,
    tool: String,
    offered: Option<Offered>,
}

/// A server's listing as the instance that listed it for the caller keeps it, where a
/// tool is in it, and the lease on that instance.
struct Offered {
    listed: Listed,
    at: usize,
    lease: Lease,
}

/// The arguments of an `mcpx_call`.
pub struct CallArgs {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
}

impl CallArgs {
    /// Reads `mcpx_call`'s arguments, taking the tool's own out of them (not copied).
    pub fn read(mut arguments: Value) -> Result<CallArgs, Error> {
        let field = |name: &str| match arguments.get(name) {
            Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
            _ => Err(Error::params(format!("{CALL}: \"{name}\" must be a non-empty string"))),
        };
        let (server, tool) = (field("server")?, field("tool")?);
        Ok(CallArgs { server, tool, arguments: take_arguments(&mut arguments, CALL)? })
    }
}

/// Takes `"arguments"` out of a call's params (not copied): an object, or `{}` when absent
/// or null. `caller` names the call in the error.
fn take_arguments(params: &mut Value, caller: &str) -> Result<Value, Error> {
    match params.get_mut("arguments").map(Value::take) {
        None | Some(Value::Null) => Ok(Value::Object(Map::new())),
        Some(v @ Value::Object(_)) => Ok(v),
        Some(_) => Err(Error::params(format!("{caller}: \"arguments\" must be an object"))),
    }
}

/// A tool result mcpx builds itself: structured content plus its JSON text, as the spec
/// recommends for clients that only read text.
pub fn structured_result(value: Value) -> Value {
    json!({
        "content": [{ "type": "text", "text": value.to_string() }],
        "structuredContent": value,
    })
}

impl Gateway {
    /// The gateway tools, then the tools of every exposed server under their public names.
    pub(crate) async fn list_tools(&self, ctx: &CallContext) -> Result<Answer, Error> {
        let config = self.settings.config();
        let mut listed = Vec::new();
        let mut cache = Cacheability { ttl_ms: 0, private: Access::of(&config, &ctx.identity).per_client() };
        for server in &config.expose {
            if config.server(server).is_some_and(|s| s.scope != Scope::Global) {
                cache = Cacheability::PRIVATE_UNCACHED;
            }
            for mut tool in self.server_tools(ctx, server).await? {
                let name = tool.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                tool["name"] = naming::public_name(&config, server, &name).into();
                listed.push((server.as_str(), tool));
            }
        }
        let mut gateway_tools = gateway_tools();
        if ctx.revision == mcpx_protocol::Revision::V2025_11_25 {
            // mcpx runs or relays a task for any call; the tool called may still refuse one.
            let call = gateway_tools.iter_mut().find(|t| t["name"] == CALL);
            call.into_iter().for_each(crate::tasks::advertise_task_support);
        }
        let names = gateway_tools.iter().map(|t| ("mcpx", t)).chain(listed.iter().map(|(s, t)| (*s, t)));
        naming::refuse_clashes("tool", names.map(|(s, t)| (s, t["name"].as_str().unwrap_or_default())))?;
        let tools: Vec<Value> = gateway_tools.into_iter().chain(listed.into_iter().map(|(_, t)| t)).collect();
        Ok(Answer { result: message::object([("tools", Value::Array(tools))]), cache })
    }

    pub(crate) async fn call_tool(&self, ctx: &CallContext, mut params: Value) -> Result<Value, Error> {
        let name = match params.get("name") {
            Some(Value::String(name)) => name.clone(),
            _ => return Err(Error::params("tools/call: \"name\" must be a string")),
        };
        // Taken, not copied: what is forwarded is built from the other params and these.
        let arguments = take_arguments(&mut params, "tools/call")?;
        let caller_meta = invocation::forwarded_meta(&params);
        match name.as_str() {
            SEARCH => {
                let query = match arguments.get("query") {
                    None | Some(Value::Null) => "",
                    Some(Value::String(query)) => query.as_str(),
                    Some(_) => return Err(Error::params("mcpx_search: \"query\" must be a string")),
                };
                // Boxed, as `exec` is: see the exposed lookups below.
                Ok(Box::pin(self.search(ctx, query)).await)
            }
            CALL => {
                let CallArgs { server, tool, arguments } = CallArgs::read(arguments)?;
                self.forward_call(ctx, Target { server, tool, offered: None }, arguments, &params, caller_meta).await
            }
            crate::EXEC => Box::pin(self.exec(ctx, &arguments)).await,
            // The lookups that may list a server's tools are boxed: they would make every
            // call's future KiBs larger (and it is moved, so copied, more than once).
            _ => match Box::pin(self.exposed_owner(ctx, &name)).await? {
                Some(mut target) => {
                    Box::pin(self.check_param_headers(ctx, &mut target, &arguments)).await?;
                    self.forward_call(ctx, target, arguments, &params, caller_meta).await
                }
                None => {
                    let unknown = Error::params(format!(
                        "unknown tool {name:?}; this gateway offers {SEARCH}, {CALL} and the tools of the servers in \"expose\""
                    ));
                    let config = self.settings.config();
                    let refused = Access::of(&config, &ctx.identity).refuses(Kind::Tool, &name);
                    Err(if refused { Error::Hidden(Box::new(unknown)) } else { unknown })
                }
            },
        }
    }

    /// An HTTP caller's `Mcp-Param-*` headers must mirror the arguments the tool's schema
    /// marks with `x-mcp-header`, as the caller saw it listed (400 / -32020 otherwise).
    /// Where the tool is found is kept in `target`, for the call to go to that instance.
    async fn check_param_headers(
        &self,
        ctx: &CallContext,
        target: &mut Target,
        arguments: &Value,
    ) -> Result<(), Error> {
        let Some(received) = &ctx.param_headers else { return Ok(()) };
        if target.offered.is_none() {
            target.offered = self.offered_tool(ctx, &target.server, &target.tool).await?;
        }
        let Some(Offered { listed, at, .. }) = &target.offered else {
            return Ok(()); // the upstream says what it lacks
        };
        // A rename or description changes no schema: the upstream's is the caller's.
        let mirrored = param_headers::of_tool(&listed[*at]["inputSchema"]).unwrap_or_default();
        param_headers::verify(&mirrored, arguments, received).map_err(Error::HeaderMismatch)
    }

    /// Which exposed server and tool a listed tool name stands for.
    /// The server of the exposed tool a public name stands for (`placement`).
    pub(crate) async fn exposed_server(&self, ctx: &CallContext, name: &str) -> Option<String> {
        Box::pin(self.exposed_owner(ctx, name)).await.ok().flatten().map(|target| target.server)
    }

    async fn exposed_owner(&self, ctx: &CallContext, name: &str) -> Result<Option<Target>, Error> {
        let config = self.settings.config();
        if let Some((server, tool)) = naming::split_name(&config, name) {
            // A server the caller may not use is as absent as one not exposed.
            let offered = config.expose.contains(&server) && Access::of(&config, &ctx.identity).server(&server);
            return Ok(offered.then_some(Target { server, tool, offered: None }));
        }
        for server in naming::own_name_servers(&config) {
            if let Some(found) = self.offered_tool(ctx, &server, name).await? {
                return Ok(Some(Target { server, tool: name.to_owned(), offered: Some(found) }));
            }
        }
        Ok(None)
    }

    /// The tool of `server` the caller sees as `shown`, if the server lists it and the
    /// caller may use it: the server's listing (as the instance that lists for the caller
    /// keeps it), where the tool is in it, and the lease on that instance.
    async fn offered_tool(&self, ctx: &CallContext, server: &str, shown: &str) -> Result<Option<Offered>, Error> {
        let upstream = {
            let config = self.settings.config();
            match Access::of(&config, &ctx.identity).named(Kind::Tool, server, shown) {
                Some(upstream) => upstream,
                None => return Ok(None),
            }
        };
        let lease = self.lease_for_listing(ctx, server).await?;
        let (listed, _) = crate::listed(self, ctx, &lease, "tools/list", "tools").await?;
        let at = listed.iter().position(|t| {
            t.get("name").and_then(Value::as_str) == Some(upstream.as_str()) && naming::shows("tool", server, t)
        });
        Ok(at.map(|at| Offered { listed, at, lease }))
    }

    pub(crate) async fn search(&self, ctx: &CallContext, query: &str) -> Value {
        structured_result(search::found(query, &self.search_listings(ctx).await))
    }

    /// What a search looks through: the tools of every server the caller may use, or why
    /// a server has none.
    pub(crate) async fn search_listings(&self, ctx: &CallContext) -> Vec<(String, Result<Vec<Value>, Error>)> {
        let servers = Access::of(&self.settings.config(), &ctx.identity).servers();
        join_all(servers.into_iter().map(|server| async move {
            let tools = self.server_tools(ctx, &server).await;
            (server, tools)
        }))
        .await
    }

    /// Every tool of `server` the caller may see, under the names and descriptions it
    /// sees, as the instance that lists for this caller lists them. None of a server the
    /// caller may not use (which is not even started for it).
    pub(crate) async fn server_tools(&self, ctx: &CallContext, server: &str) -> Result<Vec<Value>, Error> {
        if !Access::of(&self.settings.config(), &ctx.identity).server(server) {
            return Ok(Vec::new());
        }
        let lease = self.lease_for_listing(ctx, server).await?;
        let (listed, _) = crate::listed(self, ctx, &lease, "tools/list", "tools").await?;
        let shows = listed.iter().filter(|tool| naming::shows("tool", server, tool)).cloned().collect();
        Access::of(&self.settings.config(), &ctx.identity).show(Kind::Tool, server, shows)
    }

    /// A script's call of `tool` on `server` (`mcpx_exec`), sent as `mcpx_call` sends one.
    pub(crate) async fn forward_script_call(
        &self,
        ctx: &CallContext,
        server: &str,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, Error> {
        let target = Target { server: server.to_owned(), tool: tool.to_owned(), offered: None };
        self.forward_call(ctx, target, arguments, &json!({}), None).await
    }

    async fn forward_call(
        &self,
        ctx: &CallContext,
        target: Target,
        arguments: Value,
        caller_params: &Value,
        caller_meta: Option<Map<String, Value>>,
    ) -> Result<Value, Error> {
        let (server, tool) = (target.server.as_str(), target.tool.as_str());
        // A hidden server or tool gets the error an unknown one gets, without a round trip.
        let upstream_tool = {
            let config = self.settings.config();
            let access = Access::of(&config, &ctx.identity);
            if !access.server(server) {
                let unknown = unknown_server(&access, server);
                return Err(if config.server(server).is_some() { Error::Hidden(Box::new(unknown)) } else { unknown });
            }
            access.named(Kind::Tool, server, tool)
        };
        let Some(upstream_tool) = upstream_tool else {
            let listed = Box::pin(self.server_tools(ctx, server)).await.unwrap_or_default();
            return Err(Error::Hidden(Box::new(no_tool(server, tool, &names_of(&listed)))));
        };
        // The caller's other params travel too (a retry's inputResponses and requestState,
        // fields mcpx does not know); the name and arguments are the upstream tool's.
        // Built field by field: the caller's own arguments are not copied only to be replaced.
        let mut params = Map::new();
        for (key, value) in caller_params.as_object().into_iter().flatten() {
            if !matches!(key.as_str(), "_meta" | "name" | "arguments") {
                params.insert(key.clone(), value.clone());
            }
        }
        params.insert("name".into(), upstream_tool.into());
        params.insert("arguments".into(), arguments);
        let leased = target.offered.map(|offered| offered.lease);
        match self.forward(ctx, server, "tools/call", Value::Object(params), caller_meta, leased).await {
            Ok(mut result) => {
                naming::link_resources(&self.settings.config(), server, &mut result);
                Ok(result)
            }
            Err((e, Some(lease))) if e.code() == code::INVALID_PARAMS || e.code() == code::METHOD_NOT_FOUND => {
                // Say what exists when the tool does not; otherwise the upstream's own error stands.
                let listing = Box::pin(list_all(self, ctx, &lease, "tools/list", "tools"));
                let listed = listing.await.map(|l| l.0).unwrap_or_default();
                let listed = listed.into_iter().filter(|t| naming::shows("tool", server, t)).collect();
                let shown = Access::of(&self.settings.config(), &ctx.identity).show(Kind::Tool, server, listed);
                let names = names_of(&shown.unwrap_or_default());
                if names.is_empty() || names.iter().any(|n| n == tool) {
                    Err(e)
                } else {
                    Err(no_tool(server, tool, &names))
                }
            }
            Err((e, _)) => Err(e),
        }
    }
}

/// The names of listed tools.
fn names_of(listed: &[Value]) -> Vec<String> {
    listed.iter().filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned)).collect()
}

/// The error for a tool `server` does not offer the caller, naming those it does.
fn no_tool(server: &str, tool: &str, names: &[String]) -> Error {
    Error::params(format!("server {server:?} has no tool {tool:?}; its tools: {}", names.join(", ")))
        .with_data(json!({ "server": server, "tool": tool, "tools": names }))
}

/// The error for a server that is not configured, naming those the caller may use.
fn unknown_server(access: &Access, server: &str) -> Error {
    let names = access.servers();
    let known = if names.is_empty() { "none are configured".to_owned() } else { names.join(", ") };
    Error::params(format!("unknown server {server:?}; servers: {known}"))
        .with_data(json!({ "server": server, "servers": names }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_arguments_are_checked() {
        assert!(CallArgs::read(json!({"server": "a"})).is_err());
        assert!(CallArgs::read(json!({"server": "a", "tool": "b", "arguments": [1]})).is_err());
        let args = CallArgs::read(json!({"server": "a", "tool": "b"})).unwrap();
        assert_eq!(args.arguments, json!({}));
    }
}
