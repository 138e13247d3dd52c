//! Who is asking: the identity a request carries, resolved from the transport it arrived
//! on and the session keys the config names. Never from the mcpx process itself.
//!
//! Two things make up who is asking. The *principal* is who authenticated: the local user
//! (the unix socket, or TCP without tokens), the holder of one of `http.tokens`, the
//! subject of an OAuth access token, or the client of one that names no subject, each
//! qualified by its issuer. The
//! *session* is typed by where it came from: a label the caller chose, which anyone of the
//! same principal may type to join it, or a session mcpx derived from the transport (a
//! stdio process, a legacy HTTP session), which no label can reach. Every per-caller
//! namespace (session instances, artifacts, questions, held calls) is keyed by both, so
//! two principals naming session `work` get two sessions.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Who authenticated.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Principal {
    /// The user mcpx runs as: the unix socket, or TCP while no tokens are configured.
    #[default]
    Local,
    /// The holder of the `http.tokens` entry of this name.
    Token(String),
    /// The subject an OAuth access token names (`http.oauth.principalClaim`), as that
    /// token's issuer said it: two issuers' subjects are two principals, and neither is
    /// ever a token holder, whatever the names.
    OAuth { issuer: String, subject: String },
    /// A client acting for itself: an OAuth access token naming no subject, only its
    /// `client_id` (a client-credentials grant), as that token's issuer said it. A kind
    /// of its own: never the subject, nor the token holder, of the same name.
    OAuthClient { issuer: String, client: String },
}

/// A session, by where its name came from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Session {
    /// A label the caller chose (a `_meta` key, `--session`, `$MCPX_SESSION_ID`,
    /// `X-Mcpx-Session`): joinable by anyone of the same principal who types it.
    Named(String),
    /// A local process that named no session (`mcpx serve`, a CLI call): its pid, read
    /// from the socket's credentials.
    Process(u32),
    /// A handshake-era HTTP session, by its `Mcp-Session-Id`. The id admits requests to
    /// the session, so it never leaves the daemon (but for the other nodes of its
    /// cluster, which the session's requests and relayed calls reach): keys and upstreams
    /// see a digest.
    Http(String),
}

/// What the front end knows about a connection before reading the request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Transport {
    /// The session the transport implies: the legacy HTTP session, the stdio process (or
    /// the name it was given), none otherwise.
    pub session: Option<Session>,
    pub cwd: Option<PathBuf>,
    pub pid: Option<u32>,
    pub principal: Principal,
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
    pub session: Option<Session>,
    pub cwd: Option<PathBuf>,
    pub pid: Option<u32>,
    pub principal: Principal,
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
            Some((key, label)) => (Some(Session::Named(label)), Source::MetaKey(key)),
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
        Identity {
            session,
            cwd: transport.cwd.clone(),
            pid: transport.pid,
            principal: transport.principal.clone(),
            source,
            host,
        }
    }

    /// The authenticated client's name, when a token admitted the request: a static
    /// token's name, an OAuth subject and its issuer as `<subject> (<issuer>)`, an OAuth
    /// client as `client <client_id> (<issuer>)`. A label for logs, limits' messages and
    /// upstreams, never a credential, and never a key: keys use [`Principal::tag`].
    pub fn client(&self) -> Option<String> {
        match &self.principal {
            Principal::Token(name) => Some(name.clone()),
            Principal::OAuth { issuer, subject } => Some(format!("{subject} ({issuer})")),
            Principal::OAuthClient { issuer, client } => Some(format!("client {client} ({issuer})")),
            Principal::Local => None,
        }
    }

    /// The session as a key for the caller's per-session state (a `session`-scoped
    /// instance, artifacts, held calls): the session and whose it is. No label can produce
    /// another kind's key or another principal's, and no key holds a `Mcp-Session-Id`.
    pub fn session_key(&self) -> Option<SessionKey> {
        let session = match self.session.as_ref()? {
            Session::Http(id) => Session::Http(digest("http-session", id)),
            other => other.clone(),
        };
        Some(SessionKey { principal: self.principal.clone(), session })
    }

    /// Whose per-caller state this is (questions waiting for a `/v1` caller, a sealed
    /// `requestState`): the session's key, or, without a session, the principal alone.
    pub fn owner_key(&self) -> String {
        self.session_key().map(|key| key.to_string()).unwrap_or_else(|| match &self.principal {
            Principal::Local => "local".to_owned(),
            other => format!("principal{}", other.tag()),
        })
    }

    /// The session as an upstream may see it (the invocation context's `sessionId`): a
    /// label the local user chose, verbatim; any other session, an opaque value that is
    /// stable for the session and says nothing that admits a request.
    pub fn session_for_upstream(&self) -> Option<String> {
        match (&self.session, &self.principal) {
            (Some(Session::Named(label)), Principal::Local) => Some(label.clone()),
            (Some(_), _) => self.session_key().map(|key| format!("mcpx-{}", digest("session", &key.to_string()))),
            (None, _) => None,
        }
    }

    /// The name a person types to reach this session again (`--session`), when it has one.
    pub fn session_label(&self) -> Option<&str> {
        match &self.session {
            Some(Session::Named(label)) => Some(label),
            _ => None,
        }
    }
}

impl Principal {
    /// What marks a key as this principal's: nothing for the local user, `@"<token name>"`
    /// (the name JSON-quoted, so it ends where it says) for a token holder,
    /// `@oauth["<issuer>","<subject>"]` for an OAuth subject,
    /// `@oauth-client["<issuer>","<client_id>"]` for an OAuth client. No two principals
    /// share a tag: a token's begins `@"`, an OAuth subject's `@oauth[`, a client's
    /// `@oauth-client[`, and quoting keeps every name whole.
    pub fn tag(&self) -> String {
        match self {
            Principal::Local => String::new(),
            Principal::Token(name) => format!("@{}", Value::String(name.clone())),
            Principal::OAuth { issuer, subject } => {
                format!("@oauth{}", Value::from(vec![issuer.clone(), subject.clone()]))
            }
            Principal::OAuthClient { issuer, client } => {
                format!("@oauth-client{}", Value::from(vec![issuer.clone(), client.clone()]))
            }
        }
    }
}

/// A session as the key of per-session state: the session and the principal it belongs
/// to. A handshake-era HTTP session is held by a digest of its id, never the id itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionKey {
    pub principal: Principal,
    pub session: Session,
}

impl SessionKey {
    /// The local process whose session this is, when the session is a process's.
    pub fn process(&self) -> Option<u32> {
        match self.session {
            Session::Process(pid) => Some(pid),
            _ => None,
        }
    }
}

/// `session:<label>` for the local user's named sessions, `session@"<token>":<label>` for
/// a token holder's, `process:<pid>` and `http-session:<digest>` for those mcpx derived:
/// how logs, `mcpx status` and the invocation context's `scope` name them.
impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let principal = self.principal.tag();
        match &self.session {
            Session::Named(label) => write!(f, "session{principal}:{label}"),
            Session::Process(pid) => write!(f, "process{principal}:{pid}"),
            Session::Http(digest) => write!(f, "http-session{principal}:{digest}"),
        }
    }
}

/// 128 bits of SHA-256 over a domain tag and a value, as hex: stable, and not reversible.
fn digest(domain: &str, value: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(domain.as_bytes());
    hasher.update([0]);
    hasher.update(value.as_bytes());
    hasher.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect()
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
        assert_eq!(id.session, Some(Session::Named("mx".into())));
        assert_eq!(id.source, Source::MetaKey("dev.mcpx/session".into()));
    }

    #[test]
    fn empty_and_non_string_values_count_as_absent() {
        let id = resolve(json!({"dev.mcpx/session": "", "ai.opencode/sessionID": 7}), &Transport::default());
        assert_eq!(id.session, None);
        assert_eq!(id.source, Source::Unnamed);
        let id = resolve(json!({"dev.mcpx/session": 5, "ai.opencode/sessionID": "oc"}), &Transport::default());
        assert_eq!(id.session, Some(Session::Named("oc".into())));
    }

    #[test]
    fn keys_outside_the_list_are_ignored_and_the_transport_session_applies() {
        let transport = Transport { session: Some(Session::Http("abc".into())), ..Transport::default() };
        let id = resolve(json!({"other/session": "x"}), &transport);
        assert_eq!(id.session, Some(Session::Http("abc".into())));
        assert_eq!(id.source, Source::Transport);
    }

    #[test]
    fn a_key_can_name_a_field_of_an_object() {
        let id = resolve(json!({"qwen-code/invocation": {"sessionId": "q1"}}), &Transport::default());
        assert_eq!(id.session, Some(Session::Named("q1".into())));
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
        assert_eq!(id.session_label(), Some(" A b/../ "));
    }

    fn who(session: Option<Session>, principal: Principal) -> Identity {
        Identity::resolve(None, &[], &Transport { session, principal, ..Transport::default() })
    }

    #[test]
    fn no_label_reaches_a_derived_session_or_another_principals() {
        let token = |name: &str| Principal::Token(name.into());
        let derived = [
            who(Some(Session::Process(42)), Principal::Local),
            who(Some(Session::Http("0123abcd".into())), Principal::Local),
            who(Some(Session::Named("work".into())), token("ci")),
            who(Some(Session::Named("work".into())), token("ci\":x")),
        ];
        for target in &derived {
            let key = target.session_key().unwrap();
            // Whatever label a caller types, as the local user or another token holder,
            // including the other key's own text and its parts.
            let attempts = [
                key.to_string(),
                key.to_string().trim_start_matches("session:").to_owned(),
                "42".into(),
                "mcp-42".into(),
                "0123abcd".into(),
                "work".into(),
            ];
            for label in attempts {
                for principal in [Principal::Local, token("ci"), token("other")] {
                    let forger = who(Some(Session::Named(label.clone())), principal.clone());
                    if forger.principal == target.principal && target.session == forger.session {
                        continue;
                    }
                    assert_ne!(
                        forger.session_key(),
                        Some(key.clone()),
                        "{label:?} as {principal:?} reached {target:?}"
                    );
                    assert_ne!(forger.owner_key(), target.owner_key());
                }
            }
        }
    }

    #[test]
    fn an_oauth_subject_is_never_a_token_holder_nor_another_issuers_subject() {
        let oauth = |issuer: &str, subject: &str| Principal::OAuth { issuer: issuer.into(), subject: subject.into() };
        let principals = [
            Principal::Local,
            Principal::Token("alice".into()),
            Principal::Token("oauth[\"https://a\",\"alice\"]".into()),
            oauth("https://a", "alice"),
            oauth("https://b", "alice"),
            oauth("https://a\",\"alice", ""),
            Principal::OAuthClient { issuer: "https://a".into(), client: "alice".into() },
            Principal::Token("oauth-client[\"https://a\",\"alice\"]".into()),
        ];
        for (i, a) in principals.iter().enumerate() {
            for b in &principals[i + 1..] {
                assert_ne!(a.tag(), b.tag(), "{a:?} and {b:?}");
                let (x, y) = (who(Some(Session::Named("work".into())), a.clone()), who(None, a.clone()));
                let (u, v) = (who(Some(Session::Named("work".into())), b.clone()), who(None, b.clone()));
                assert_ne!(x.session_key(), u.session_key(), "{a:?} and {b:?} share session work");
                assert_ne!(x.owner_key(), u.owner_key());
                assert_ne!(y.owner_key(), v.owner_key(), "{a:?} and {b:?} own the same state");
            }
        }
    }

    #[test]
    fn an_upstream_never_sees_a_legacy_session_id() {
        let id = "5f2b0c7d9e1a4b3c8d6e0f1a2b3c4d5e";
        let legacy = who(Some(Session::Http(id.into())), Principal::Local);
        let seen = legacy.session_for_upstream().unwrap();
        assert!(!seen.contains(id) && !legacy.session_key().unwrap().to_string().contains(id), "{seen}");
        assert_eq!(
            seen,
            who(Some(Session::Http(id.into())), Principal::Local).session_for_upstream().unwrap(),
            "stable"
        );
        assert_ne!(seen, who(Some(Session::Http("other".into())), Principal::Local).session_for_upstream().unwrap());
        assert_eq!(
            who(Some(Session::Named("s".into())), Principal::Local).session_for_upstream().as_deref(),
            Some("s")
        );
    }
}
