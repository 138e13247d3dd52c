//! What mcpx tells an upstream it launched: `_meta["dev.mcpx/invocation"]`, built from
//! mcpx's own state on every request made on a caller's behalf.
//!
//! It is correlation metadata (which session, which call, which instance key), never a
//! credential. Callers can never set it: every `dev.mcpx/` key (and a host's own
//! `qwen-code/invocation`) is removed from what they send before mcpx adds its own.
//! Requests mcpx makes on its own account (probes, listings) carry none.

use mcpx_protocol::meta;
use serde_json::{Map, Value, json};

use crate::config::{Launch, ServerConfig};
use crate::context::CallContext;
use crate::scope::InstanceKey;

use crate::identity::HOST_CONTEXT_KEYS;

/// The caller's `_meta` as it may travel upstream: without mcpx's keys, without host
/// context keys, and without the caller's protocol envelope (the upstream connection
/// supplies its own). `None` when nothing is left.
pub fn forwarded_meta(params: &Value) -> Option<Map<String, Value>> {
    // Only what travels is copied, not the envelope (the caller's capabilities) with it.
    let travels = |key: &str| {
        !key.starts_with(meta::MCPX_PREFIX) && !meta::ENVELOPE_KEYS.contains(&key) && !HOST_CONTEXT_KEYS.contains(&key)
    };
    let m: Map<String, Value> =
        meta::of(params)?.iter().filter(|(k, _)| travels(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    (!m.is_empty()).then_some(m)
}

/// Whether this server gets the context: a stdio server mcpx launches, unless its config
/// says `"invocationContext": false`. HTTP servers may be third parties: never.
pub fn eligible(server: &ServerConfig) -> bool {
    matches!(server.launch, Launch::Stdio { .. }) && server.invocation_context
}

/// The context for one upstream request made on behalf of `ctx`, routed by `key`, to an
/// instance that runs under the cluster lease `fence` names, in a cluster.
pub fn context(ctx: &CallContext, key: &InstanceKey, fence: Option<u64>) -> Value {
    let mut context = json!({ "version": 1 });
    if let Some(session) = ctx.identity.session_for_upstream() {
        context["sessionId"] = session.into();
    }
    context["callId"] = ctx.call_id.clone().into();
    context["scope"] = key.owner.to_string().into();
    if let Some(client) = ctx.identity.client() {
        context["clientId"] = client.into();
    }
    if let Some(host) = &ctx.identity.host {
        context["host"] = Value::Object(host.clone());
    }
    if let Some(fence) = fence {
        context["fence"] = fence.into();
    }
    context
}

/// Adds the context to `params._meta` of an upstream request.
pub fn attach(params: &mut Value, context: Value) {
    meta::of_mut(params).insert(meta::MCPX_INVOCATION.into(), context);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::Owner;

    fn ctx(session: Option<&str>) -> CallContext {
        CallContext::local_for_test(session)
    }

    #[test]
    fn the_context_names_session_call_and_instance_key() {
        let c = ctx(Some("a"));
        let key = InstanceKey { server: "s".into(), owner: Owner::Session(c.identity.session_key().unwrap()) };
        let v = context(&c, &key, None);
        assert_eq!(v, json!({"version": 1, "sessionId": "a", "callId": c.call_id, "scope": "session:a"}));
    }

    #[test]
    fn an_unnamed_caller_has_no_session_in_its_context() {
        let c = ctx(None);
        let key = InstanceKey { server: "s".into(), owner: Owner::Call(c.call_id.clone()) };
        assert!(context(&c, &key, None).get("sessionId").is_none());
    }

    #[test]
    fn callers_cannot_pass_mcpx_or_host_keys_through() {
        let params = json!({"_meta": {
            "dev.mcpx/invocation": {"callId": "forged"}, "dev.mcpx/session": "a",
            "qwen-code/invocation": {"sessionId": "q"}, "progressToken": 1,
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"
        }});
        assert_eq!(Value::Object(forwarded_meta(&params).unwrap()), json!({"progressToken": 1}));
        assert_eq!(forwarded_meta(&json!({"_meta": {"dev.mcpx/x": 1}})), None);
    }
}
