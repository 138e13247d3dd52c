//! The mcpx core: from an admitted request to the upstream instance that answers it.
//!
//! A front end hands the [`Gateway`] a [`CallContext`] (who is asking, in which revision)
//! and a method with its params; the gateway picks the instance from the server's scope
//! and the caller's identity, talks to it through the [`Pool`], and returns the result
//! unshaped: the front end shapes it for the caller's revision. Nothing here knows about
//! HTTP or stdio framing.

pub mod config;
pub mod context;
pub mod identity;
pub mod invocation;
pub mod pool;
pub mod scope;
pub mod settings;
pub mod tools;

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use mcpx_protocol::shape::Cacheability;
use mcpx_protocol::{RpcError, code, meta};
use mcpx_upstream::{StdioSpec, Timeouts, UpstreamError};
use serde_json::{Map, Value, json};

pub use config::Config;
pub use context::CallContext;
pub use identity::{Identity, Transport};
pub use pool::{InstanceInfo, Lease, Pool, PoolError};
pub use scope::{InstanceKey, Scope};
pub use settings::Settings;

use config::{Launch, ServerConfig};

/// Most pages of `tools/list` mcpx follows from one upstream before it stops.
const MAX_LIST_PAGES: usize = 100;

/// A result as mcpx built it, before it is shaped for the caller's revision.
#[derive(Debug)]
pub struct Answer {
    pub result: Value,
    pub cache: Cacheability,
}

impl Answer {
    fn uncached(result: Value) -> Answer {
        Answer { result, cache: Cacheability::PRIVATE_UNCACHED }
    }
}

pub struct Gateway {
    settings: Settings,
    pool: Pool,
    scoper: scope::Scoper,
    reaper: tokio::task::JoinHandle<()>,
}

impl Gateway {
    /// A gateway on these settings. Starts the idle reaper on the current tokio runtime.
    pub fn new(settings: Settings) -> Arc<Gateway> {
        Arc::new_cyclic(|this: &std::sync::Weak<Gateway>| {
            let this = this.clone();
            let reaper = tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(1));
                loop {
                    tick.tick().await;
                    let Some(gateway) = this.upgrade() else { return };
                    let config = gateway.settings.config();
                    gateway.pool.reap(config.pool.idle_timeout, |server| config.server(server).map(definition));
                }
            });
            Gateway { settings, pool: Pool::default(), scoper: scope::Scoper::default(), reaper }
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Who is asking, per the session keys in force right now (a hot setting).
    pub fn identity(&self, params: &Value, transport: &Transport) -> Identity {
        let config = self.settings.config();
        Identity::resolve(meta::of(params), &config.transport.session_meta_keys, transport)
    }

    pub fn server_info() -> Value {
        json!({ "name": "mcpx", "title": "mcpx MCP gateway", "version": env!("CARGO_PKG_VERSION") })
    }

    pub fn capabilities(&self) -> Value {
        json!({ "tools": {} })
    }

    pub fn instructions(&self) -> String {
        let config = self.settings.config();
        if config.mcp_servers.is_empty() {
            let file = self.settings.path().map(|p| p.display().to_string());
            return format!(
                "mcpx has no upstream servers configured yet. Add them under \"mcpServers\" in {} (see examples/mcpx.json); the daemon picks up the change without a restart.",
                file.unwrap_or_else(|| "a config file ($MCPX_CONFIG, .mcpx.json, or ~/.config/mcpx/config.json)".into())
            );
        }
        let names: Vec<&str> = config.mcp_servers.keys().map(String::as_str).collect();
        format!(
            "mcpx fronts these MCP servers: {}. Find their tools with {} and call them with {}.",
            names.join(", "),
            tools::SEARCH,
            tools::CALL
        )
    }

    /// The `server/discover` result body.
    pub fn discover(&self, supported_versions: &[&str]) -> Answer {
        Answer {
            result: json!({
                "supportedVersions": supported_versions,
                "capabilities": self.capabilities(),
                "instructions": self.instructions(),
            }),
            cache: Cacheability { ttl_ms: 0, private: false },
        }
    }

    /// Answers one request for the caller described by `ctx`.
    pub async fn handle(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Answer, RpcError> {
        match method {
            "tools/list" => self.list_tools(ctx, &params).await,
            "tools/call" => self.call_tool(ctx, params).await.map(Answer::uncached),
            _ => Err(RpcError::method_not_found(method)),
        }
    }

    pub fn instances(&self) -> Vec<InstanceInfo> {
        self.pool.instances()
    }

    /// Stops every upstream instance and waits until they are gone.
    pub async fn shutdown(&self) {
        self.reaper.abort();
        self.pool.shutdown().await;
    }

    async fn list_tools(&self, ctx: &CallContext, params: &Value) -> Result<Answer, RpcError> {
        if params.get("cursor").is_some_and(|c| !c.is_null()) {
            return Err(RpcError::invalid_params("invalid cursor: mcpx lists every tool in one page"));
        }
        let config = self.settings.config();
        let mut listed = tools::gateway_tools();
        let mut cache = Cacheability { ttl_ms: 0, private: false };
        for server in &config.expose {
            let Some(server_config) = config.server(server) else { continue };
            if server_config.scope != Scope::Global {
                cache = Cacheability::PRIVATE_UNCACHED;
            }
            for mut tool in self.server_tools(ctx, server).await? {
                let name = tool.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                tool["name"] = tools::exposed_name(&config, server, &name).into();
                listed.push(tool);
            }
        }
        Ok(Answer { result: json!({ "tools": listed }), cache })
    }

    async fn call_tool(&self, ctx: &CallContext, params: Value) -> Result<Value, RpcError> {
        let name = match params.get("name") {
            Some(Value::String(name)) => name.clone(),
            _ => return Err(RpcError::invalid_params("tools/call: \"name\" must be a string")),
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => Value::Object(Map::new()),
            Some(v @ Value::Object(_)) => v.clone(),
            Some(_) => return Err(RpcError::invalid_params("tools/call: \"arguments\" must be an object")),
        };
        let forwarded_meta = invocation::forwarded_meta(&params);
        match name.as_str() {
            tools::SEARCH => {
                let query = arguments.get("query").and_then(Value::as_str).unwrap_or_default();
                Ok(self.search(ctx, query).await)
            }
            tools::CALL => {
                let call = tools::CallArgs::read(&arguments)?;
                self.forward_call(ctx, &call.server, &call.tool, call.arguments, forwarded_meta).await
            }
            _ => match self.exposed_owner(ctx, &name).await? {
                Some((server, tool)) => self.forward_call(ctx, &server, &tool, arguments, forwarded_meta).await,
                None => Err(RpcError::invalid_params(format!(
                    "unknown tool {name:?}; this gateway offers {}, {} and the tools of the servers in \"expose\"",
                    tools::SEARCH,
                    tools::CALL
                ))),
            },
        }
    }

    /// Which exposed server and tool a flat tool name stands for.
    async fn exposed_owner(&self, ctx: &CallContext, name: &str) -> Result<Option<(String, String)>, RpcError> {
        let config = self.settings.config();
        for server in &config.expose {
            let prefixed = tools::exposed_name(&config, server, "");
            if !prefixed.is_empty() {
                if let Some(tool) = name.strip_prefix(&prefixed) {
                    return Ok(Some((server.clone(), tool.to_owned())));
                }
                continue;
            }
            // Unprefixed names: routed by the listing the caller's instance gives.
            let listed = self.server_tools(ctx, server).await?;
            if listed.iter().any(|t| t.get("name").and_then(Value::as_str) == Some(name)) {
                return Ok(Some((server.clone(), name.to_owned())));
            }
        }
        Ok(None)
    }

    async fn search(&self, ctx: &CallContext, query: &str) -> Value {
        let config = self.settings.config();
        let listings = join_all(config.mcp_servers.keys().map(|server| async move {
            (server.clone(), self.server_tools(ctx, server).await)
        }))
        .await;
        let mut found = Vec::new();
        let mut unavailable = Vec::new();
        for (server, listing) in listings {
            match listing {
                Ok(listed) => {
                    for tool in listed.iter().filter(|t| tools::matches(query, &server, t)) {
                        let mut entry = json!({ "server": server, "tool": tool.get("name").cloned().unwrap_or(Value::Null) });
                        for field in ["title", "description", "inputSchema"] {
                            if let Some(v) = tool.get(field) {
                                entry[field] = v.clone();
                            }
                        }
                        found.push(entry);
                    }
                }
                Err(e) => unavailable.push(json!({ "server": server, "error": e.message })),
            }
        }
        let mut body = json!({ "query": query, "tools": found });
        if !unavailable.is_empty() {
            body["unavailable"] = unavailable.into();
        }
        tools::structured_result(body)
    }

    /// Every tool of `server`, as the instance the caller's identity selects lists them.
    async fn server_tools(&self, ctx: &CallContext, server: &str) -> Result<Vec<Value>, RpcError> {
        let lease = self.lease(ctx, server).await?;
        list_all_tools(&lease, &ctx.client_capabilities).await
    }

    async fn forward_call(
        &self,
        ctx: &CallContext,
        server: &str,
        tool: &str,
        arguments: Value,
        forwarded_meta: Option<Map<String, Value>>,
    ) -> Result<Value, RpcError> {
        let lease = self.lease(ctx, server).await?;
        let mut params = json!({ "name": tool, "arguments": arguments });
        if let Some(m) = forwarded_meta {
            params["_meta"] = Value::Object(m);
        }
        if self.settings.config().server(server).is_some_and(invocation::eligible) {
            invocation::attach(&mut params, invocation::context(ctx, lease.key()));
        }
        match lease.upstream().request("tools/call", params, &ctx.client_capabilities).await {
            Ok(result) => Ok(result),
            Err(UpstreamError::Rpc(e)) if e.code == code::INVALID_PARAMS || e.code == code::METHOD_NOT_FOUND => {
                // Say what exists when the tool does not; otherwise the upstream's own error stands.
                let listed = list_all_tools(&lease, &ctx.client_capabilities).await.unwrap_or_default();
                let names: Vec<&str> = listed.iter().filter_map(|t| t.get("name").and_then(Value::as_str)).collect();
                if names.is_empty() || names.contains(&tool) {
                    Err(e)
                } else {
                    Err(RpcError::invalid_params(format!(
                        "server {server:?} has no tool {tool:?}; its tools: {}",
                        names.join(", ")
                    ))
                    .with_data(json!({ "server": server, "tool": tool, "tools": names })))
                }
            }
            Err(e) => Err(e.to_rpc()),
        }
    }

    /// The instance of `server` that answers this caller.
    async fn lease(&self, ctx: &CallContext, server: &str) -> Result<Lease, RpcError> {
        let config = self.settings.config();
        let Some(server_config) = config.server(server) else {
            let names: Vec<&str> = config.mcp_servers.keys().map(String::as_str).collect();
            let known = if names.is_empty() { "none are configured".to_owned() } else { names.join(", ") };
            return Err(RpcError::invalid_params(format!("unknown server {server:?}; servers: {known}"))
                .with_data(json!({ "server": server, "servers": names })));
        };
        let key = self.scoper.key(server, server_config.scope, &ctx.identity, &ctx.call_id);
        let spec = stdio_spec(&config, server, server_config, &ctx.identity)?;
        self.pool
            .acquire(&key, &definition(server_config), &spec, config.pool.max_instances_per_server)
            .await
            .map_err(|e| match e {
                PoolError::Upstream(e) => e.to_rpc(),
                other => RpcError::internal(other.to_string()),
            })
    }
}

/// The identity of a server definition: an instance started from another one is replaced.
fn definition(server: &ServerConfig) -> String {
    format!("{server:?}")
}

fn stdio_spec(config: &Config, name: &str, server: &ServerConfig, who: &Identity) -> Result<StdioSpec, RpcError> {
    let Launch::Stdio { command, args, env, cwd } = &server.launch else {
        return Err(RpcError::internal(format!(
            "server {name:?} is an HTTP server; this mcpx build serves stdio upstreams only"
        )));
    };
    // A server scoped to where the caller works starts there, unless the config says where.
    let cwd = cwd.clone().or_else(|| match server.scope {
        Scope::Cwd | Scope::Repo | Scope::Worktree => who.cwd.clone(),
        _ => None,
    });
    Ok(StdioSpec {
        server: name.to_owned(),
        command: command.clone(),
        args: args.clone(),
        env: env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        cwd,
        timeouts: Timeouts {
            probe: config.timeouts.probe,
            handshake: config.timeouts.handshake,
            request: config.timeouts.request,
            stop_grace: config.timeouts.stop_grace,
        },
        max_line_bytes: config.limits.max_line_bytes,
    })
}

async fn list_all_tools(lease: &Lease, client_capabilities: &Value) -> Result<Vec<Value>, RpcError> {
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = match &cursor {
            Some(c) => json!({ "cursor": c }),
            None => json!({}),
        };
        let page = lease.upstream().request("tools/list", params, client_capabilities).await.map_err(|e| e.to_rpc())?;
        if let Some(Value::Array(listed)) = page.get("tools") {
            tools.extend(listed.iter().cloned());
        }
        match page.get("nextCursor") {
            Some(Value::String(c)) => cursor = Some(c.clone().into()),
            _ => return Ok(tools),
        }
    }
    tracing::warn!(server = lease.key().server, "stopped listing tools after {MAX_LIST_PAGES} pages");
    Ok(tools)
}
