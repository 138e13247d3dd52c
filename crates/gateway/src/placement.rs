//! Which node of a cluster answers a request: the owner of the instance it is for.
//!
//! A front end asks before it hands a request to the gateway, and forwards the request
//! whole to the node named here, so that no second instance of a key starts. The server
//! a request is for is found as the request's own route would find it (a tool's, a
//! prompt's or a resource's owner; `mcpx_call`'s `server`); the key from the caller's
//! identity and the server's scope, as `scope` gives it. Requests that reach several
//! servers (listings, `mcpx_search`, `mcpx_exec`) and retries that carry mcpx's
//! `requestState` are answered where they arrive.

use serde_json::Value;

use crate::cluster::Node;
use crate::error::Error;
use crate::tools::CALL;
use crate::{CallContext, Gateway};

impl Gateway {
    /// The node that should answer this request, when it is another node of this
    /// node's cluster; `None` without a cluster, or when this node answers (it takes
    /// the key's lease if it was free). An error when the cluster's Redis cannot say.
    pub async fn placement(&self, ctx: &CallContext, method: &str, params: &Value) -> Result<Option<Node>, Error> {
        if self.instances.cluster.get().is_none() || params.get("requestState").is_some() {
            return Ok(None);
        }
        let Some(server) = self.server_of(ctx, method, params).await else { return Ok(None) };
        let config = self.settings.config();
        self.instances.owner_elsewhere(&config, ctx, &server, None).await
    }

    /// The one upstream server a request is for, if it is for one.
    async fn server_of(&self, ctx: &CallContext, method: &str, params: &Value) -> Option<String> {
        let name = || params.get("name").and_then(Value::as_str);
        match method {
            "tools/call" if name() == Some(CALL) => params.get("arguments")?.get("server")?.as_str().map(str::to_owned),
            "tools/call" => self.exposed_server(ctx, name()?).await,
            "prompts/get" => self.prompt_server(ctx, name()?).await,
            "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
                let uri = params.get("uri").and_then(Value::as_str)?;
                self.resource_owner(ctx, uri).await.map(|(server, _)| server)
            }
            _ => None,
        }
    }
}
