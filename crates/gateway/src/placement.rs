//! Which node of a cluster answers a request: the owner of the instance it is for.
//!
//! A front end asks before it hands a request to the gateway, and forwards the request
//! whole to the node named here, so that no second instance of a key starts. The server
//! a request is for is found as the request's own route would find it (a tool's, a
//! prompt's or a resource's owner; `mcpx_call`'s `server`); the key from the caller's
//! identity and the server's scope, as `scope` gives it. Requests that reach several
//! servers (listings, `mcpx_search`, `mcpx_exec`) are answered where they arrive.
//!
//! A retry that carries mcpx's `requestState` (sealed with the cluster's key, so any node
//! opens it) goes where its first round left what it needs: to the owner of the instance
//! that asked, or, for a call held open or a login waited for (in one node's memory), to
//! the node that sealed the state. A state this node cannot open is refused where it lands.
//!
//! A 2026 task method goes to the node that keeps the task's record: the node its id
//! (sealed like a state) names. An id that is not the caller's is answered where it lands,
//! as an unknown task.

use mcpx_protocol::Revision;
use mcpx_upstream::Meter as _;
use serde_json::{Map, Value};

use crate::asking::LOGIN_KEY;
use crate::cluster::{Kept, Listening, Node, NodeRequest, RELAYED};
use crate::config::Config;
use crate::error::{Elsewhere, Error};
use crate::identity::{Identity, Principal, Session, Source};
use crate::journal::json_len;
use crate::scope::InstanceKey;
use crate::tools::CALL;
use crate::{CallContext, Gateway, Listener, ask, held, places, roots, tasks};

/// What a relayed request may take on top of the call's own timeouts there: the hop to
/// the owner and back.
const RELAY_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl Gateway {
    /// The node that should answer this request, when it is another node of this
    /// node's cluster; `None` without a cluster, or when this node answers (it takes
    /// the key's lease if it was free), with what that node keeps for the request. An
    /// error when the cluster's Redis cannot say.
    pub async fn placement(
        &self,
        ctx: &CallContext,
        method: &str,
        params: &Value,
    ) -> Result<Option<(Node, Kept)>, Error> {
        let Some(cluster) = self.instances.cluster.get() else { return Ok(None) };
        if tasks::METHODS.contains(&method) {
            // A task's record is kept by the node that relayed or ran it, named in its id.
            let Some(id) = params.get("taskId").and_then(Value::as_str) else { return Ok(None) };
            return Ok(self.task_node(ctx, id).await.map(|node| (node, Kept::Task)));
        }
        let Some(server) = self.server_of(ctx, method, params).await else { return Ok(None) };
        let config = self.settings.config();
        let instance = |node: Option<Node>| node.map(|node| (node, Kept::Instance(server.clone())));
        let Some(state) = params.get("requestState") else {
            return self.instances.owner_elsewhere(&config, ctx, &server, None).await.map(instance);
        };
        let state = state.as_str().filter(|_| ask::METHODS.contains(&method));
        let Some(resume) = state.and_then(|state| self.asks.route(state, &server, ctx)) else {
            return Ok(None);
        };
        let marker = |key: &str| resume.upstream_state.as_ref().is_some_and(|s| s.get(key).is_some());
        if marker(held::HELD_KEY) || marker(LOGIN_KEY) {
            let node = resume.node.filter(|node| node.id != cluster.node());
            return Ok(node.map(|node| (node, Kept::Round(server.clone()))));
        }
        if marker(roots::KEY) {
            // A fresh call, in the directory the caller's answer names.
            let answer = params.get("inputResponses").and_then(|r| r.get(roots::KEY)).cloned().unwrap_or_default();
            let mut rooted = ctx.clone();
            let named = roots::first_dir(&answer);
            if let Some(cwd) = named.and_then(|dir| self.place_named(&ctx.identity.principal, &server, dir)) {
                rooted.identity.cwd = Some(cwd);
            }
            return self.instances.owner_elsewhere(&config, &rooted, &server, None).await.map(instance);
        }
        match resume.instance {
            Some(owner) => self.instances.owner_elsewhere(&config, ctx, &server, Some(owner)).await.map(instance),
            None => Ok(None),
        }
    }

    /// The other node that keeps the record of the caller's task `id`, in a cluster: the
    /// node that sealed the id (with the cluster's key, so no caller and no Redis writer
    /// can name another), while it is live. `None` for an id that is not this caller's
    /// (which the node that receives it refuses as any unknown task), for one this node
    /// sealed, and for one of a node that is gone: the record that node kept in Redis
    /// answers it wherever it lands. A node whose liveness Redis cannot tell is asked.
    pub async fn task_node(&self, ctx: &CallContext, id: &str) -> Option<Node> {
        let cluster = self.instances.cluster.get()?;
        let node = self.asks.task_node(id, ctx).filter(|node| node.id != cluster.node())?;
        match cluster.is_live(&node).await {
            Ok(false) => None,
            Ok(true) | Err(_) => Some(node),
        }
    }

    /// Relays a request another node owns the instance of to that node (see
    /// [`Gateway::relay`]). A 2025-11-25 caller's task-augmented call is a task mcpx runs
    /// here, where the caller's session follows it, sending the owner the plain call: the
    /// owner answers a relayed request as a call, and its tasks are not the session's.
    pub(crate) async fn relay_call(
        &self,
        ctx: &CallContext,
        node: Node,
        key: InstanceKey,
        method: &str,
        mut params: Value,
        meta: Option<Map<String, Value>>,
    ) -> Result<Value, Error> {
        let legacy_task = ctx.revision.era() == mcpx_protocol::Era::Legacy
            && method == "tools/call"
            && params.get("task").is_some_and(Value::is_object);
        if !legacy_task {
            return self.relay(ctx, node, key, method, params, meta).await;
        }
        let asked = params.pointer("/task/ttl").and_then(Value::as_u64);
        params.as_object_mut().map(|p| p.remove("task"));
        let gateway = self.shared()?;
        // Nobody can answer the call's questions once it runs as a task.
        let quiet = ctx.clone().with_listener(None);
        let at = key.clone();
        let call = async move { gateway.relay(&quiet, node, at, "tools/call", params, meta).await };
        self.run_task(ctx, key, asked, call)
    }

    /// Relays a request another node owns the instance of (see [`NodeRequest`]) to that
    /// node, and returns its answer.
    pub(crate) async fn relay(
        &self,
        ctx: &CallContext,
        node: Node,
        key: InstanceKey,
        method: &str,
        params: Value,
        meta: Option<Map<String, Value>>,
    ) -> Result<Value, Error> {
        let Some(relay) = self.relay.get() else {
            return Err(Error::Elsewhere(Box::new(Elsewhere { node: node.id, url: node.url, key })));
        };
        let mut request = node_request(ctx, key, method, params, meta);
        request.listen = ctx.listener.as_ref().map(|l| Listening::of(l, &ctx.client_capabilities));
        let (limit, patience) = self.relay_bounds();
        // What went to the owner and came back, where the journal keeps a call's sizes.
        let measured = self.journal_keeps().is_some();
        if measured {
            let meta = request.meta.as_ref().map_or(0, |m| json_len(&Value::Object(m.clone())));
            ctx.reached.sent(usize::try_from(json_len(&request.params) + meta).unwrap_or_default());
        }
        let principal = &ctx.identity.principal;
        let answer = relay.send(&node, principal, &request, limit, patience, ctx.listener.as_ref()).await;
        if let (true, Ok(result)) = (measured, &answer) {
            ctx.reached.received(usize::try_from(json_len(result)).unwrap_or_default());
        }
        answer
    }

    /// What an owner's answer to a relayed request may be: one upstream message, with the
    /// bound every one has; and when it must come: within what the call may take there,
    /// its instance's start, then the call, plus the hop.
    pub(crate) fn relay_bounds(&self) -> (usize, std::time::Duration) {
        let config = self.settings.config();
        let t = &config.timeouts;
        (config.limits.max_line_bytes, t.probe + t.handshake + t.request + RELAY_GRACE)
    }

    /// Answers a request another node of the cluster relayed to this one, the owner of
    /// its instance, for `principal` (whom that node vouched for). It goes to exactly the
    /// instance the sending node keyed, only if that is one `principal` may use (a key
    /// names its principal, a directory's included, so no relay reaches another
    /// principal's instance; the directory the caller works in must be one this node's
    /// `clients.<client>.roots` grant it), and no further: if this node no longer owns the key, the request fails here. What the
    /// upstream says of it on the way goes to `listener` (which the front end builds for
    /// what the request's caller listens for), as it would to the caller's.
    pub async fn relayed(
        &self,
        principal: Principal,
        request: NodeRequest,
        listener: Option<Listener>,
    ) -> Result<Value, Error> {
        if !RELAYED.contains(&request.method.as_str()) {
            return Err(Error::NoMethod(request.method));
        }
        let mut request = request;
        if request.method == "resources/read" {
            let uri = request.params.get("uri").and_then(Value::as_str).unwrap_or_default();
            let original =
                crate::resources::relayed_original(&self.settings.config(), &principal, &request.server, uri)?;
            request.params["uri"] = original.into();
        }
        let mut ctx = relayed_context(&self.settings.config(), principal, &request)?;
        ctx.listener = listener;
        let (server, method) = (request.server, request.method);
        self.send(&ctx, &server, &method, request.params, request.meta, Some(request.owner), None, None)
            .await
            .map_err(|(e, _)| e)
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

/// The request for `key`'s instance, `method` with `params` (names already mapped) and the
/// caller's `meta`, that this node relays for `ctx`'s caller.
pub(crate) fn node_request(
    ctx: &CallContext,
    key: InstanceKey,
    method: &str,
    params: Value,
    meta: Option<Map<String, Value>>,
) -> NodeRequest {
    let cwd = key.owner.named_place().and(ctx.identity.cwd.clone());
    NodeRequest {
        method: method.to_owned(),
        params,
        meta,
        owner: key.owner,
        server: key.server,
        // A process's session names a pid of this machine, which on the owner's could be
        // another process's: it stays here.
        session: ctx.identity.session.clone().filter(|s| !matches!(s, Session::Process(_))),
        call_id: ctx.call_id.clone(),
        cwd,
        host: ctx.identity.host.clone(),
        listen: None,
    }
}

/// Whom a relayed request serves, on the owner: the caller as the relaying node resolved
/// it, for `principal` (whom that node vouched for), if the instance it names is one
/// `principal` may use (a key names its principal, a directory's included, so no relay
/// reaches another principal's instance).
/// The context of a request another node relayed for `principal`. A place it names is
/// checked against this node's grants too, as where the caller landed: a relaying node is
/// never taken at its word about where a caller may work.
pub(crate) fn relayed_context(
    config: &Config,
    principal: Principal,
    request: &NodeRequest,
) -> Result<CallContext, Error> {
    let named = request.owner.named_place().is_some();
    if !request.owner.is_visible_to(&principal) {
        return Err(Error::params(format!(
            "the instance of {:?} named is not one the calling principal may use",
            request.server
        )));
    }
    let cwd = match request.cwd.as_deref().filter(|_| named) {
        Some(dir) => Some(
            places::place_for(config, &principal, &request.server, dir)
                .map_err(|why| Error::params(format!("a relayed place is refused: {why}")))?,
        ),
        None => None,
    };
    let identity = Identity {
        session: request.session.clone(),
        cwd,
        pid: None,
        principal,
        source: Source::Transport,
        host: request.host.clone(),
    };
    // A caller that can be asked is a handshake-era session: its questions are put to it
    // as they would be where it landed (through its listener), not left for a retry.
    let asked = request.listen.as_ref().and_then(|l| l.asks.clone());
    let mut ctx = match asked {
        Some(capabilities) => CallContext::new(identity, Revision::LATEST_LEGACY, capabilities),
        None => CallContext::new(identity, Revision::LATEST_MODERN, Value::Object(Map::new())),
    };
    ctx.call_id = request.call_id.clone();
    ctx.relayed = true;
    Ok(ctx)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::identity::SessionKey;
    use crate::scope::Owner;
    use crate::settings::Settings;

    /// A gateway serving one session-scoped server, which no test here may start.
    fn gateway() -> (std::sync::Arc<Gateway>, std::path::PathBuf) {
        let file = std::env::temp_dir().join(format!("mcpx-placement-{}.json", crate::context::new_call_id()));
        let config = json!({"mcpServers": {"notes": {"command": "/nonexistent/notes", "scope": "session"}}});
        std::fs::write(&file, config.to_string()).unwrap();
        (Gateway::new(Settings::load(Some(file.clone())).unwrap()), file)
    }

    fn request(owner: Owner, method: &str) -> NodeRequest {
        NodeRequest {
            server: "notes".into(),
            method: method.into(),
            params: json!({"name": "whoami", "arguments": {}}),
            meta: None,
            owner,
            session: Some(Session::Named("work".into())),
            call_id: "c1".into(),
            cwd: None,
            host: None,
            listen: None,
        }
    }

    /// Even a node's signed relay reaches no instance but the vouched principal's, and
    /// nothing but the methods a node relays: each is refused before any instance starts.
    #[tokio::test]
    async fn a_relayed_request_for_another_principals_instance_or_of_another_method_is_refused() {
        let (gateway, file) = gateway();
        let alice = Principal::Token("alice".into());
        let bobs = Owner::Session(SessionKey {
            principal: Principal::Token("bob".into()),
            session: Session::Named("work".into()),
        });
        let refused = gateway.relayed(alice.clone(), request(bobs.clone(), "tools/call"), None).await.unwrap_err();
        assert!(refused.to_string().contains("not one the calling principal may use"), "{refused}");
        let refused = gateway.relayed(alice, request(bobs, "resources/subscribe"), None).await.unwrap_err();
        assert!(matches!(refused, Error::NoMethod(_)), "{refused}");
        assert!(gateway.instances().is_empty(), "an instance started");
        std::fs::remove_file(file).unwrap();
    }

    /// A relayed read or subscription is checked against the resource policy here too, in
    /// normal form: a denied file is refused before any instance starts.
    #[tokio::test]
    async fn a_relayed_read_of_a_denied_resource_is_refused_in_any_spelling() {
        let file = std::env::temp_dir().join(format!("mcpx-placement-{}.json", crate::context::new_call_id()));
        let config = json!({"mcpServers": {"notes": {
            "command": "/nonexistent/notes", "scope": "session", "resources": {"deny": ["file:///etc/*"]}
        }}});
        std::fs::write(&file, config.to_string()).unwrap();
        let gateway = Gateway::new(Settings::load(Some(file.clone())).unwrap());
        let alice = Principal::Token("alice".into());
        let own = Owner::Session(SessionKey { principal: alice.clone(), session: Session::Named("work".into()) });
        for uri in ["file:///etc/shadow", "FILE://localhost/tmp/../etc/shadow", "file:///etc%2Fshadow"] {
            let mut read = request(own.clone(), "resources/read");
            read.params = json!({ "uri": uri });
            let refused = gateway.relayed(alice.clone(), read, None).await.unwrap_err();
            assert!(matches!(refused, Error::Hidden(_) | Error::Params { .. }), "{uri}: {refused}");
            let mut subscribe = request(own.clone(), "resources/subscribe");
            subscribe.params = json!({ "uri": uri });
            let refused =
                gateway.relayed_subscription(alice.clone(), subscribe, std::sync::Arc::new(|_| {})).await.err();
            assert!(matches!(refused, Some(Error::Hidden(_) | Error::Params { .. })), "{uri}: {refused:?}");
        }
        assert!(gateway.instances().is_empty(), "an instance started");
        std::fs::remove_file(file).unwrap();
    }

    /// A directory a caller named over the network (its roots) keys the instance of its
    /// principal: a relay for it from that principal, inside the directories granted to
    /// it, reaches it and starts it where the caller works, as the node the caller landed
    /// on would have; the same place as another principal's, or outside its grants, is
    /// refused before anything starts.
    #[tokio::test]
    async fn a_relayed_request_for_a_named_directorys_instance_starts_it_where_the_caller_works() {
        let dir = std::env::temp_dir().join(format!("mcpx-placement-{}", crate::context::new_call_id()));
        let (work, elsewhere) = (dir.join("work"), dir.join("elsewhere"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&elsewhere).unwrap();
        let work = work.canonicalize().unwrap();
        let marker = dir.join("started-in");
        // No MCP server: it says where it started, and its handshake fails.
        let config = json!({
            "mcpServers": {"here": {
                "command": "/bin/sh", "args": ["-c", format!("pwd > '{}'", marker.display())], "scope": "cwd"
            }},
            "http": {"tokens": {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}},
            "clients": {"token:alice": {"roots": [format!("{}/**", work.display())]}}
        });
        let file = dir.join("mcpx.json");
        std::fs::write(&file, config.to_string()).unwrap();
        let gateway = Gateway::new(Settings::load(Some(file)).unwrap());
        let alice = Principal::Token("alice".into());
        let place = |path: &std::path::Path, principal: &Principal| {
            Owner::Cwd(crate::scope::Place { path: path.to_owned(), node: None, principal: principal.clone() })
        };
        let relay = |path: &std::path::Path, owner: Owner| NodeRequest {
            server: "here".into(),
            cwd: Some(path.to_owned()),
            ..request(owner, "tools/call")
        };
        let bob = Principal::Token("bob".into());
        let refused = gateway.relayed(bob.clone(), relay(&work, place(&work, &alice)), None).await.unwrap_err();
        assert!(refused.to_string().contains("not one the calling principal may use"), "{refused}");
        let refused = gateway.relayed(bob.clone(), relay(&work, place(&work, &bob)), None).await.unwrap_err();
        assert!(refused.to_string().contains("granted no"), "{refused}");
        let refused =
            gateway.relayed(alice.clone(), relay(&elsewhere, place(&elsewhere, &alice)), None).await.unwrap_err();
        assert!(refused.to_string().contains("outside the directories granted"), "{refused}");
        // A relayed subscription is held to the same grants: it starts nothing there either.
        let mut subscribe = relay(&elsewhere, place(&elsewhere, &alice));
        subscribe.method = "resources/subscribe".into();
        subscribe.params = json!({"uri": "file:///notes"});
        let refused =
            gateway.relayed_subscription(alice.clone(), subscribe, std::sync::Arc::new(|_| {})).await.err().unwrap();
        assert!(refused.to_string().contains("outside the directories granted"), "{refused}");
        assert!(gateway.instances().is_empty(), "an instance started");
        assert!(!marker.exists(), "a refused place was started in");

        let answer = gateway.relayed(alice.clone(), relay(&work, place(&work, &alice)), None).await;
        if let Err(e) = &answer {
            assert!(!e.to_string().contains("refused") && !e.to_string().contains("may use"), "{e}");
        }
        let started = std::fs::read_to_string(&marker).expect("the instance started");
        assert_eq!(std::path::Path::new(started.trim()), work, "where it started");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
