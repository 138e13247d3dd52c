//! Who is asking: the identity a request carries, resolved from the transport it arrived
//! on and the session keys the config names. Never from the mcpx process itself.

use std::path::PathBuf;

use serde_json::{Map, Value};

/// What the front end knows about a connection before reading the request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transport {
    /// The session the transport implies: `mcp-<Mcp-Session-Id>` inside a legacy HTTP
    /// session, `$MCPX_SESSION_ID` or `mcp-<pid>` over stdio, none otherwise.
    pub session: Option<String>,
    pub cwd: Option<PathBuf>,
    pub pid: Option<u32>,
    /// The authenticated client name, when the request came with a named token.
    pub client: Option<String>,
    /// Whether this is a host's own stdio (through `mcpx serve`): a context the host
    /// attests there (`_meta["qwen-code/invocation"]`) is relayed to upstreams as `host`.
    /// Over HTTP such a context is only a session label.
    pub stdio: bool,
}

/// Which rule produced an identity's session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A `_meta` key from `transport.sessionMetaKeys`.
    MetaKey(String),
    /// The transport's own session (stdio process, legacy HTTP session).
    Transport,
    /// Nothing named a session: the request is its own scope.
    Unnamed,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub session: Option<String>,
    pub cwd: Option<PathBuf>,
    pub pid: Option<u32>,
    pub client: Option<String>,
    pub source: Source,
    /// Contexts the host attested over its own stdio, by `_meta` key.
    pub host: Option<Map<String, Value>>,
}

impl Identity {
    /// Resolves who is asking. The first configured key whose value is a non-empty
    /// string names the session, verbatim; otherwise the transport's session, if any.
    /// A key may name a field inside an object value: `"qwen-code/invocation#sessionId"`.
    pub fn resolve(meta: Option<&Map<String, Value>>, session_keys: &[String], transport: &Transport) -> Identity {
        let named = meta.and_then(|meta| {
            session_keys.iter().find_map(|key| session_from(meta, key).map(|session| (key.clone(), session)))
        });
        let (session, source) = match named {
            Some((key, session)) => (Some(session), Source::MetaKey(key)),
            None if transport.session.is_some() => (transport.session.clone(), Source::Transport),
            None => (None, Source::Unnamed),
        };
        let host = meta.filter(|_| transport.stdio).and_then(|meta| {
            let attested: Map<String, Value> = HOST_CONTEXT_KEYS
                .iter()
                .filter_map(|k| meta.get(*k).filter(|v| v.is_object()).map(|v| ((*k).to_owned(), v.clone())))
                .collect();
            (!attested.is_empty()).then_some(attested)
        });
        Identity { session, cwd: transport.cwd.clone(), pid: transport.pid, client: transport.client.clone(), source, host }
    }
}

/// `_meta` keys under which a host attests its own context to the stdio servers it
/// launched. mcpx strips them from what it forwards and relays them as `host`.
pub const HOST_CONTEXT_KEYS: [&str; 1] = ["qwen-code/invocation"];

fn session_from(meta: &Map<String, Value>, key: &str) -> Option<String> {
    let value = match key.split_once('#') {
        Some((outer, field)) => meta.get(outer)?.get(field)?,
        None => meta.get(key)?,
    };
    value.as_str().filter(|s| !s.is_empty()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys() -> Vec<String> {
        vec!["dev.mcpx/session".into(), "ai.opencode/sessionID".into(), "qwen-code/invocation#sessionId".into()]
    }

    fn resolve(meta: Value, transport: &Transport) -> Identity {
        Identity::resolve(meta.as_object(), &keys(), transport)
    }

    #[test]
    fn the_first_listed_key_wins() {
        let id = resolve(json!({"ai.opencode/sessionID": "oc", "dev.mcpx/session": "mx"}), &Transport::default());
        assert_eq!(id.session.as_deref(), Some("mx"));
        assert_eq!(id.source, Source::MetaKey("dev.mcpx/session".into()));
    }

    #[test]
    fn empty_and_non_string_values_count_as_absent() {
        let id = resolve(json!({"dev.mcpx/session": "", "ai.opencode/sessionID": 7}), &Transport::default());
        assert_eq!(id.session, None);
        assert_eq!(id.source, Source::Unnamed);
        let id = resolve(json!({"dev.mcpx/session": 5, "ai.opencode/sessionID": "oc"}), &Transport::default());
        assert_eq!(id.session.as_deref(), Some("oc"));
    }

    #[test]
    fn keys_outside_the_list_are_ignored_and_the_transport_session_applies() {
        let transport = Transport { session: Some("mcp-abc".into()), ..Transport::default() };
        let id = resolve(json!({"other/session": "x"}), &transport);
        assert_eq!(id.session.as_deref(), Some("mcp-abc"));
        assert_eq!(id.source, Source::Transport);
    }

    #[test]
    fn a_key_can_name_a_field_of_an_object() {
        let id = resolve(json!({"qwen-code/invocation": {"sessionId": "q1"}}), &Transport::default());
        assert_eq!(id.session.as_deref(), Some("q1"));
    }

    #[test]
    fn a_host_context_is_kept_only_from_a_hosts_own_stdio() {
        let meta = json!({"qwen-code/invocation": {"version": 1, "sessionId": "q1"}});
        let stdio = Transport { stdio: true, ..Transport::default() };
        assert_eq!(resolve(meta.clone(), &stdio).host.unwrap()["qwen-code/invocation"]["sessionId"], "q1");
        assert_eq!(resolve(meta, &Transport::default()).host, None);
    }

    #[test]
    fn the_value_is_used_verbatim() {
        let id = resolve(json!({"dev.mcpx/session": " A b/../ "}), &Transport::default());
        assert_eq!(id.session.as_deref(), Some(" A b/../ "));
    }
}
