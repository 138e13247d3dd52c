//! The token store: `<state dir>/oauth/tokens.json` (one credential set per key) and
//! `<state dir>/oauth/clients.json` (dynamic registrations, by issuer), in a directory only
//! the owner may enter, each file 0600 and replaced atomically (temp file, fsync, rename).
//!
//! A key is the server's name, plus a principal tag when each caller logs in for itself
//! (`"credentials": "user"`), so one server can hold many credential sets. A credential set
//! remembers the server URL it was issued for: a config that points the name elsewhere
//! gets no token (the bearer only ever goes where it was issued for).

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::OAuthError;

/// Whose credential set: a server's shared one, or one principal's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CredentialKey {
    pub server: String,
    /// `None`: the server's shared credential (the default).
    pub principal: Option<String>,
}

impl CredentialKey {
    pub fn shared(server: &str) -> CredentialKey {
        CredentialKey { server: server.to_owned(), principal: None }
    }

    /// The key as stored: `server`, or `server\u{0}principal` (no server name holds NUL).
    fn text(&self) -> String {
        match &self.principal {
            None => self.server.clone(),
            Some(p) => format!("{}\u{0}{p}", self.server),
        }
    }

    fn from_text(text: &str) -> CredentialKey {
        match text.split_once('\u{0}') {
            None => CredentialKey::shared(text),
            Some((server, p)) => CredentialKey { server: server.to_owned(), principal: Some(p.to_owned()) },
        }
    }
}

/// How the client authenticates at the token endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    PrivateKeyJwt,
    None,
}

impl AuthMethod {
    pub fn name(self) -> &'static str {
        match self {
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::PrivateKeyJwt => "private_key_jwt",
            AuthMethod::None => "none",
        }
    }

    pub fn from_name(name: &str) -> Option<AuthMethod> {
        [AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost, AuthMethod::PrivateKeyJwt, AuthMethod::None]
            .into_iter()
            .find(|m| m.name() == name)
    }
}

/// A registered client: who mcpx is to one authorization server.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Client {
    pub client_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    pub auth_method: AuthMethod,
    /// The redirect URIs it was registered with (empty: not registered by mcpx).
    #[serde(default)]
    pub redirect_uris: Vec<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "<redacted>"))
            .field("auth_method", &self.auth_method)
            .finish()
    }
}

/// One credential set.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tokens {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds; `None`: the server said nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The server URL the token was issued for: the only place it is sent.
    pub server_url: String,
    /// What refreshing needs without running discovery again.
    pub issuer: String,
    pub token_endpoint: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revocation_endpoint: Option<String>,
    pub resource: String,
    pub client: Client,
    /// In a cluster, which write of the credential this set is: a later write has a
    /// larger one (`Authorizer::keep`), so a node that has seen a set never takes an
    /// older one back. 0 outside a cluster and for a set written before generations.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("access_token", &"<redacted>")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "<redacted>"))
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("issuer", &self.issuer)
            .field("client", &self.client)
            .field("generation", &self.generation)
            .finish()
    }
}

#[derive(Default, Serialize, Deserialize)]
struct TokenFile {
    #[serde(default)]
    tokens: BTreeMap<String, Tokens>,
    /// The generation of the last set forgotten of each credential, where it had one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    forgotten: BTreeMap<String, u64>,
}

#[derive(Default, Serialize, Deserialize)]
struct ClientFile {
    /// Dynamic registrations by issuer: an authorization server's client is its own.
    #[serde(default)]
    clients: BTreeMap<String, Client>,
}

/// The store: in memory, written through to disk on every change.
pub struct Store {
    dir: Option<PathBuf>,
    tokens: std::sync::Mutex<BTreeMap<CredentialKey, Tokens>>,
    /// The generation of the last set forgotten of each credential (in a cluster, where
    /// sets have generations): a set that old or older is not taken back, even after a
    /// restart.
    forgotten: std::sync::Mutex<BTreeMap<CredentialKey, u64>>,
    clients: std::sync::Mutex<BTreeMap<String, Client>>,
}

impl Store {
    /// A store in `dir` (created private if need be), loading what is there. An unreadable
    /// file is logged and treated as empty: the next login writes a good one.
    pub fn open(dir: &Path) -> Result<Store, OAuthError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .and_then(|()| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(|e| OAuthError::Store(format!("creating {}: {e}", dir.display())))?;
        let tokens: TokenFile = load(&dir.join("tokens.json"));
        let clients: ClientFile = load(&dir.join("clients.json"));
        Ok(Store {
            dir: Some(dir.to_owned()),
            tokens: std::sync::Mutex::new(
                tokens.tokens.into_iter().map(|(k, v)| (CredentialKey::from_text(&k), v)).collect(),
            ),
            forgotten: std::sync::Mutex::new(
                tokens.forgotten.into_iter().map(|(k, v)| (CredentialKey::from_text(&k), v)).collect(),
            ),
            clients: std::sync::Mutex::new(clients.clients),
        })
    }

    /// A store that keeps nothing on disk (tests, and a daemon without a state dir).
    pub fn in_memory() -> Store {
        Store { dir: None, tokens: Default::default(), forgotten: Default::default(), clients: Default::default() }
    }

    pub fn tokens(&self, key: &CredentialKey) -> Option<Tokens> {
        self.tokens.lock().expect("store lock").get(key).cloned()
    }

    pub fn all_tokens(&self) -> Vec<(CredentialKey, Tokens)> {
        self.tokens.lock().expect("store lock").iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    pub fn put_tokens(&self, key: &CredentialKey, tokens: Tokens) -> Result<(), OAuthError> {
        let mut all = self.tokens.lock().expect("store lock");
        all.insert(key.clone(), tokens);
        self.write_tokens(&all)
    }

    /// Forgets `key`'s set, remembering its generation (when it has one).
    pub fn forget_tokens(&self, key: &CredentialKey) -> Result<Option<Tokens>, OAuthError> {
        let mut all = self.tokens.lock().expect("store lock");
        let gone = all.remove(key);
        if let Some(tokens) = &gone {
            if tokens.generation > 0 {
                let mut forgotten = self.forgotten.lock().expect("store lock");
                let generation = forgotten.entry(key.clone()).or_default();
                *generation = (*generation).max(tokens.generation);
            }
            self.write_tokens(&all)?;
        }
        Ok(gone)
    }

    /// The generation of the last set of `key` forgotten, if it had one.
    pub fn forgotten(&self, key: &CredentialKey) -> Option<u64> {
        self.forgotten.lock().expect("store lock").get(key).copied()
    }

    pub fn client(&self, issuer: &str) -> Option<Client> {
        self.clients.lock().expect("store lock").get(issuer).cloned()
    }

    pub fn put_client(&self, issuer: &str, client: Client) -> Result<(), OAuthError> {
        let mut all = self.clients.lock().expect("store lock");
        all.insert(issuer.to_owned(), client);
        let Some(dir) = &self.dir else { return Ok(()) };
        write_private(&dir.join("clients.json"), &ClientFile { clients: all.clone() })
    }

    fn write_tokens(&self, all: &BTreeMap<CredentialKey, Tokens>) -> Result<(), OAuthError> {
        let Some(dir) = &self.dir else { return Ok(()) };
        let forgotten = self.forgotten.lock().expect("store lock").iter().map(|(k, g)| (k.text(), *g)).collect();
        let file = TokenFile { tokens: all.iter().map(|(k, v)| (k.text(), v.clone())).collect(), forgotten };
        write_private(&dir.join("tokens.json"), &file)
    }
}

fn load<T: Default + serde::de::DeserializeOwned>(path: &Path) -> T {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!("{} is unreadable ({e}); starting without it", path.display());
            T::default()
        }),
        Err(_) => T::default(),
    }
}

/// Writes `value` to `path` as JSON, 0600 from the moment the file exists, atomically.
fn write_private<T: Serialize>(path: &Path, value: &T) -> Result<(), OAuthError> {
    let fail = |e: std::io::Error| OAuthError::Store(format!("writing {}: {e}", path.display()));
    let temp = path.with_extension(format!("tmp.{}", std::process::id()));
    let bytes = serde_json::to_vec_pretty(value).expect("the store always serializes");
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&temp).map_err(fail)?;
    file.write_all(&bytes).and_then(|()| file.sync_all()).map_err(fail)?;
    std::fs::rename(&temp, path).map_err(fail)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    pub(crate) fn sample(url: &str) -> Tokens {
        Tokens {
            access_token: "at-secret".into(),
            refresh_token: Some("rt-secret".into()),
            expires_at: Some(1),
            scopes: vec!["a".into()],
            server_url: url.into(),
            issuer: "https://as".into(),
            token_endpoint: "https://as/token".into(),
            revocation_endpoint: None,
            resource: url.into(),
            client: Client {
                client_id: "c".into(),
                client_secret: Some("cs-secret".into()),
                auth_method: AuthMethod::ClientSecretBasic,
                redirect_uris: vec![],
            },
            generation: 0,
        }
    }

    /// The generation of a forgotten set outlives the store: a node restarted after a
    /// logout still knows which sets are older than the one it forgot.
    #[test]
    fn a_forgotten_sets_generation_is_remembered_across_a_reopen() {
        let dir = std::env::temp_dir().join(format!("mcpx-store-forgotten-{}", std::process::id()));
        let key = CredentialKey::shared("docs");
        let store = Store::open(&dir).unwrap();
        store.put_tokens(&key, Tokens { generation: 41, ..sample("https://docs/mcp") }).unwrap();
        store.forget_tokens(&key).unwrap();
        let other = CredentialKey::shared("plain");
        store.put_tokens(&other, sample("https://plain/mcp")).unwrap();
        store.forget_tokens(&other).unwrap();
        let reopened = Store::open(&dir).unwrap();
        assert_eq!((reopened.tokens(&key), reopened.forgotten(&key)), (None, Some(41)));
        assert_eq!(reopened.forgotten(&other), None, "a set without a generation leaves none");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tokens_are_written_0600_in_a_private_dir_and_read_back() {
        let dir = std::env::temp_dir().join(format!("mcpx-oauth-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = Store::open(&dir.join("oauth")).unwrap();
        let shared = CredentialKey::shared("docs");
        let alice = CredentialKey { server: "docs".into(), principal: Some("alice".into()) };
        store.put_tokens(&shared, sample("https://docs/mcp")).unwrap();
        store.put_tokens(&alice, sample("https://docs/mcp")).unwrap();
        let file = dir.join("oauth/tokens.json");
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(dir.join("oauth")).unwrap().mode() & 0o777, 0o700);
        let again = Store::open(&dir.join("oauth")).unwrap();
        assert_eq!(again.tokens(&shared), Some(sample("https://docs/mcp")));
        assert!(again.tokens(&alice).is_some(), "a principal's set is its own key");
        assert_eq!(again.forget_tokens(&shared).unwrap().map(|t| t.access_token), Some("at-secret".into()));
        assert!(Store::open(&dir.join("oauth")).unwrap().tokens(&shared).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn debug_output_never_shows_a_secret() {
        let shown = format!("{:?}", sample("https://docs/mcp"));
        for secret in ["at-secret", "rt-secret", "cs-secret"] {
            assert!(!shown.contains(secret), "{shown}");
        }
    }
}
