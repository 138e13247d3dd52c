//! [`Authorizer`]: one per daemon. It hands the HTTP upstream a bearer for a server, is
//! told of each 401 / 403 the server answers and gets a new token when it can do so
//! without a person (refresh, client credentials), runs logins (begin → URL for a person
//! → the redirect → tokens stored) and answers for the CLI's `auth ls` and `auth logout`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use url::Url;

use crate::challenge::{self, Challenge};
use crate::discovery::{self, AuthServer, Discovered};
use crate::error::OAuthError;
use crate::http::Http;
use crate::loopback;
use crate::shared::{Shared, SharedStore};
use crate::store::{AuthMethod, Client, CredentialKey, Store, Tokens};
use crate::token::{self, SigningKey};

/// The daemon-wide settings (the config's top-level `oauth` section).
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// A client ID metadata document URL, used as the client_id where the authorization
    /// server advertises `client_id_metadata_document_supported`.
    pub client_metadata_url: Option<String>,
    /// The loopback redirect's port; 0 takes an ephemeral one per login.
    pub redirect_port: u16,
    /// A login not completed within this is dropped and its listener closed.
    pub login_timeout: Duration,
    /// How many times in a row a 403 `insufficient_scope` may send mcpx back to the
    /// authorization server for more scopes before the request fails.
    pub max_step_ups: u32,
    /// A token this close to its expiry is refreshed before it is used.
    pub refresh_before: Duration,
    /// `client_name` in dynamic registration.
    pub client_name: String,
    /// Where endpoints a server's metadata names may lead beyond public addresses and the
    /// server's own kind of place (`egress.allow`).
    pub egress_allow: Arc<[mcpx_http::Allowed]>,
    /// In a cluster, how long this node holds a credential's lock while it spends the
    /// refresh token (and another node waits at most).
    pub refresh_lock: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            client_metadata_url: None,
            redirect_port: 0,
            login_timeout: Duration::from_secs(300),
            max_step_ups: 2,
            refresh_before: Duration::from_secs(60),
            client_name: "mcpx".into(),
            egress_allow: Arc::from([]),
            refresh_lock: Duration::from_secs(30),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Grant {
    /// A person logs in in a browser (the default).
    #[default]
    AuthorizationCode,
    /// mcpx authenticates as itself with the configured client credentials.
    ClientCredentials,
}

/// A server entry's `"oauth"` in the config: how mcpx identifies itself to the server's
/// authorization server. Every key is optional; without any, mcpx registers itself where
/// the authorization server allows it. Unknown keys are refused (a typo here would
/// silently log in differently).
#[derive(Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerOAuth {
    /// A client registered with the authorization server beforehand (used as is, first).
    pub client_id: Option<String>,
    /// Its secret, if it has one; `${VAR}` takes it from the daemon's environment.
    pub client_secret: Option<String>,
    /// A client ID metadata document URL for this server (overrides `oauth.clientMetadataUrl`).
    pub client_metadata_url: Option<String>,
    /// Scopes always asked for, beside those the server's challenge names.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `"authorization_code"` (default: a person logs in) or `"client_credentials"` (mcpx
    /// authenticates as itself with `clientId` and `clientSecret` or `privateKey`).
    #[serde(default)]
    pub grant: Grant,
    /// A PEM PKCS#8 P-256 private key for `private_key_jwt` (client credentials);
    /// `${VAR}` takes it from the daemon's environment.
    pub private_key: Option<String>,
}

impl std::fmt::Debug for ServerOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOAuth")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "<redacted>"))
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scopes", &self.scopes)
            .field("grant", &self.grant)
            .field("private_key", &self.private_key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Whose credential, for which server URL, configured how.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub key: CredentialKey,
    pub url: String,
    pub config: ServerOAuth,
}

/// A login under way: the URL a person opens.
#[derive(Clone, Debug, PartialEq)]
pub struct Login {
    pub id: String,
    pub server: String,
    pub url: String,
    pub expires_in: Duration,
}

#[derive(Clone, Debug, PartialEq)]
pub enum LoginState {
    Pending,
    Done,
    Failed(String),
    /// Not completed within `oauth.loginTimeout`: dropped, its listener closed.
    Expired,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthState {
    LoggedIn,
    NeedsLogin,
    NotRequired,
}

/// What `mcpx auth ls` shows of one server: never a token.
#[derive(Clone, Debug, PartialEq)]
pub struct AuthStatus {
    pub server: String,
    pub state: AuthState,
    pub expires_at: Option<u64>,
    pub scopes: Vec<String>,
    pub issuer: Option<String>,
}

/// What mcpx learned from a server's answers, per credential.
#[derive(Default)]
struct Known {
    challenge: Option<Challenge>,
    /// 403 `insufficient_scope` answers since the last success.
    step_ups: u32,
    /// Scopes asked for so far (a step-up asks for the union).
    requested: Vec<String>,
}

struct Flow {
    key: CredentialKey,
    scopes: Vec<String>,
    login: Login,
    state: tokio::sync::watch::Receiver<LoginState>,
    task: tokio::task::AbortHandle,
}

struct Inner {
    store: Store,
    settings: RwLock<Settings>,
    flows: Mutex<HashMap<String, Flow>>,
    known: Mutex<HashMap<CredentialKey, Known>>,
    /// One token request at a time per credential: concurrent 401s refresh once.
    renewing: Mutex<HashMap<CredentialKey, Arc<tokio::sync::Mutex<()>>>>,
    /// In a cluster, the store every node keeps its credentials in (`shared`).
    shared: std::sync::OnceLock<Shared>,
    /// In a cluster, when each credential was last read from the shared store.
    pulled: Mutex<HashMap<CredentialKey, std::time::Instant>>,
}

/// Whose turn it is to spend a credential's refresh token, in a cluster.
enum Turn {
    /// This node's: it holds the cluster's lock under this value (`None`: no cluster).
    Mine(Option<String>),
    /// Another node spent it meanwhile: what it got is in the store.
    Done,
}

/// How often a node waiting for another's refresh looks again.
const SPEND_POLL: Duration = Duration::from_millis(100);
/// How long a credential read from a cluster's store is used before it is read again
/// for a bearer (a 401 and a refresh always read it): a login, refresh or logout through
/// another node reaches this one within this long, at one read a second per credential.
const PULL_FRESH: Duration = Duration::from_secs(1);

#[derive(Clone)]
pub struct Authorizer {
    inner: Arc<Inner>,
}

/// Most logins under way at once of shared credentials, and as many of callers' own.
const MAX_FLOWS: usize = 16;

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs()
}

fn now_ms() -> u64 {
    u64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis()).unwrap_or(u64::MAX)
}

impl Authorizer {
    /// The lock that keeps one credential's token requests one at a time.
    fn renewing(&self, key: &CredentialKey) -> Arc<tokio::sync::Mutex<()>> {
        self.inner.renewing.lock().expect("renewing lock").entry(key.clone()).or_default().clone()
    }

    /// An authorizer whose store is `dir` (created private).
    pub fn open(dir: &Path, settings: Settings) -> Result<Authorizer, OAuthError> {
        Ok(Authorizer::with_store(Store::open(dir)?, settings))
    }

    pub fn in_memory(settings: Settings) -> Authorizer {
        Authorizer::with_store(Store::in_memory(), settings)
    }

    fn with_store(store: Store, settings: Settings) -> Authorizer {
        Authorizer {
            inner: Arc::new(Inner {
                store,
                settings: RwLock::new(settings),
                flows: Default::default(),
                known: Default::default(),
                renewing: Default::default(),
                shared: std::sync::OnceLock::new(),
                pulled: Default::default(),
            }),
        }
    }

    /// From now on, credential sets live in `store`, which every node of this daemon's
    /// cluster shares, sealed with `key` (32 bytes derived from the cluster's secret).
    pub fn join_cluster(&self, store: Arc<dyn SharedStore>, key: [u8; 32]) {
        if self.inner.shared.set(Shared::new(store, key)).is_err() {
            return;
        }
        // Logins made before this node joined: offered to the others at once (a first pull
        // of each offers it too, so no request finds it missing meanwhile).
        let before: Vec<(CredentialKey, Tokens)> =
            self.inner.store.all_tokens().into_iter().filter(|(_, tokens)| tokens.generation == 0).collect();
        if before.is_empty() {
            return;
        }
        let authorizer = self.clone();
        tokio::spawn(async move {
            for (key, tokens) in before {
                authorizer.offer(&key, tokens).await;
            }
        });
    }

    /// Offers `tokens`, a set this node kept before it joined its cluster (generation 0),
    /// to the cluster's store as `key`'s first: written (and kept here as written) only if
    /// no node of the cluster ever wrote a set of that credential, so a login logged out
    /// through another node meanwhile never comes back this way. Whether it was.
    async fn offer(&self, key: &CredentialKey, tokens: Tokens) -> bool {
        let Some(shared) = self.inner.shared.get() else { return false };
        let tokens = Tokens { generation: now_ms(), ..tokens };
        let (name, counter) = (Shared::name(key), Shared::generation_name(key));
        match shared.store.put_first(&name, &counter, shared.seal(key, &tokens), tokens.generation).await {
            Ok(true) => {
                tracing::info!(
                    server = key.server,
                    "a login made before this node joined its cluster now serves every node"
                );
                if let Err(e) = self.inner.store.put_tokens(key, tokens) {
                    tracing::warn!(server = key.server, "could not keep a shared credential on disk: {e}");
                }
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::debug!(server = key.server, "the cluster's credential store is unreachable: {e}");
                false
            }
        }
    }

    /// In a cluster, takes `key`'s credential set from the shared store into this node's
    /// (a login or refresh through another node); one that is gone there is gone here. A
    /// value no node of this cluster sealed counts as none. When the store cannot answer,
    /// this node goes on with what it has.
    async fn pull(&self, key: &CredentialKey) {
        let Some(shared) = self.inner.shared.get() else { return };
        let found = match shared.store.get(&Shared::name(key)).await {
            Ok(found) => {
                self.inner.pulled.lock().expect("pulled lock").insert(key.clone(), std::time::Instant::now());
                found
            }
            Err(e) => {
                tracing::debug!(server = key.server, "the cluster's credential store is unreachable: {e}");
                return;
            }
        };
        let opened = found.as_deref().and_then(|value| {
            let opened = shared.open(key, value);
            if opened.is_none() {
                tracing::error!(
                    server = key.server,
                    "a credential in the cluster's Redis was not sealed by a node of this cluster: ignored"
                );
            }
            opened
        });
        let local = self.inner.store.tokens(key);
        let seen = self.newest_seen(key, local.as_ref());
        let outcome = match opened {
            Some(tokens) if local.as_ref() == Some(&tokens) => Ok(()),
            // Whoever writes to Redis put back a set a node sealed earlier: after a logout,
            // one that was revoked or should serve no more; after a refresh, a spent one.
            Some(tokens) if seen.is_some_and(|seen| seen > 0 && tokens.generation <= seen) => {
                tracing::error!(
                    server = key.server,
                    "a credential in the cluster's Redis is older than one this node has seen (put back by whoever writes to Redis): ignored"
                );
                Ok(())
            }
            Some(tokens) => self.inner.store.put_tokens(key, tokens),
            None => match local {
                // A login made before this node joined its cluster, if no node ever wrote one.
                Some(local) if local.generation == 0 && self.offer(key, local.clone()).await => Ok(()),
                Some(_) => self.inner.store.forget_tokens(key).map(|_| ()),
                None => Ok(()),
            },
        };
        if let Err(e) = outcome {
            tracing::warn!(server = key.server, "could not keep a shared credential on disk: {e}");
        }
    }

    /// [`Authorizer::pull`], unless this node read `key` within [`PULL_FRESH`].
    async fn pull_if_stale(&self, key: &CredentialKey) {
        let read = self.inner.pulled.lock().expect("pulled lock").get(key).copied();
        if read.is_none_or(|at| at.elapsed() >= PULL_FRESH) {
            self.pull(key).await;
        }
    }

    /// The newest generation of `key`'s credential set this node has seen: the one it
    /// keeps (`local`) or the last one it forgot (the store remembers it across
    /// restarts); `None` if it has seen none.
    fn newest_seen(&self, key: &CredentialKey, local: Option<&Tokens>) -> Option<u64> {
        local.map(|t| t.generation).max(self.inner.store.forgotten(key))
    }

    /// Keeps `tokens` as `key`'s credential set, and in a cluster writes them to the shared
    /// store (with `lock`, only while this node holds the credential's lock) as a
    /// generation newer than any a node was given for it before: the store's counter,
    /// raised first to the time in milliseconds or one past the newest this node has seen,
    /// whichever is later, so no node's clock decides it. Only when the store cannot
    /// answer is it that floor, as this node alone sees it.
    async fn keep(&self, key: &CredentialKey, mut tokens: Tokens, lock: Option<&str>) -> Result<(), OAuthError> {
        if let Some(shared) = self.inner.shared.get() {
            let seen = self.newest_seen(key, self.inner.store.tokens(key).as_ref());
            let floor = now_ms().max(seen.map_or(0, |s| s + 1));
            tokens.generation = match shared.store.next(&Shared::generation_name(key), floor).await {
                Ok(generation) => generation.max(floor),
                Err(e) => {
                    tracing::debug!(server = key.server, "the cluster's credential store is unreachable: {e}");
                    floor
                }
            };
            let lock_name = Shared::lock_name(key);
            let held = lock.map(|value| (lock_name.as_str(), value));
            match shared.store.put(&Shared::name(key), shared.seal(key, &tokens), held).await {
                Ok(true) => {}
                Ok(false) => {
                    return Err(OAuthError::Store(format!(
                        "server {:?}: this node's turn to refresh the credential ran out before it was written; the next request reads another node's",
                        key.server
                    )));
                }
                Err(e) => tracing::warn!(
                    server = key.server,
                    "could not write a credential to the cluster's Redis ({e}): only this node has it"
                ),
            }
        }
        self.inner.store.put_tokens(key, tokens)
    }

    /// Forgets `key`'s credential set, in the shared store too.
    async fn forget(&self, key: &CredentialKey) -> Result<Option<Tokens>, OAuthError> {
        if let Some(shared) = self.inner.shared.get()
            && let Err(e) = shared.store.delete(&Shared::name(key)).await
        {
            tracing::warn!(server = key.server, "could not forget a credential in the cluster's Redis: {e}");
        }
        self.inner.store.forget_tokens(key)
    }

    /// In a cluster, waits for this node's turn to spend `key`'s refresh token: another
    /// node may hold it, and then `settled` (what the store holds once it let go) may
    /// say there is nothing left to do. Outside a cluster, always this node's turn.
    async fn turn(&self, key: &CredentialKey, settled: impl Fn(Option<&Tokens>) -> bool) -> Result<Turn, OAuthError> {
        let Some(shared) = self.inner.shared.get() else { return Ok(Turn::Mine(None)) };
        let mut value = [0u8; 16];
        getrandom::fill(&mut value).expect("the OS random source is available");
        let value: String = value.iter().map(|b| format!("{b:02x}")).collect();
        let lock = Shared::lock_name(key);
        let hold = self.settings().refresh_lock;
        let deadline = tokio::time::Instant::now() + hold;
        loop {
            match shared.store.lock(&lock, &value, hold).await {
                Ok(true) => {
                    self.pull(key).await;
                    if settled(self.inner.store.tokens(key).as_ref()) {
                        let _ = shared.store.unlock(&lock, &value).await;
                        return Ok(Turn::Done);
                    }
                    return Ok(Turn::Mine(Some(value)));
                }
                Ok(false) => {}
                Err(e) => {
                    return Err(OAuthError::Store(format!(
                        "the cluster's Redis is unreachable ({e}): a refresh needs it, so that no two nodes spend one refresh token"
                    )));
                }
            }
            tokio::time::sleep(SPEND_POLL).await;
            self.pull(key).await;
            if settled(self.inner.store.tokens(key).as_ref()) {
                return Ok(Turn::Done);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(OAuthError::Store(format!(
                    "server {:?}: another node of the cluster has been refreshing this credential for {hold:?} (oauth.refreshLock)",
                    key.server
                )));
            }
        }
    }

    /// Ends this node's turn.
    async fn end_turn(&self, key: &CredentialKey, turn: Option<String>) {
        if let (Some(shared), Some(value)) = (self.inner.shared.get(), turn) {
            let _ = shared.store.unlock(&Shared::lock_name(key), &value).await;
        }
    }

    /// The settings in force from now on (the config changed).
    pub fn set_settings(&self, settings: Settings) {
        *self.inner.settings.write().expect("settings lock") = settings;
    }

    /// The client for requests about the logins of the server at `server` (see
    /// [`Http::toward`]).
    fn http(&self, server: &str) -> Http {
        let allow = self.settings().egress_allow;
        // A URL that does not parse anchors nothing: its endpoints may only be public.
        let server = Url::parse(server).unwrap_or_else(|_| Url::parse("https://unknown.invalid/").expect("a URL"));
        Http::toward(&server, allow)
    }

    fn settings(&self) -> Settings {
        self.inner.settings.read().expect("settings lock").clone()
    }

    /// The access token to send to `target`, refreshed first when it is about to expire;
    /// `None` when there is none for this URL.
    pub async fn bearer(&self, target: &Target) -> Option<String> {
        self.pull_if_stale(&target.key).await;
        let tokens = self.inner.store.tokens(&target.key).filter(|t| t.server_url == target.url)?;
        let soon = now() + self.settings().refresh_before.as_secs();
        let fresh = |t: Option<&Tokens>| t.is_some_and(|t| t.expires_at.is_none_or(|at| at > soon));
        if fresh(Some(&tokens)) {
            return Some(tokens.access_token);
        }
        let lock = self.renewing(&target.key);
        let _one = lock.lock().await;
        // Someone else may have renewed it while this waited.
        if let Some(renewed) = self.inner.store.tokens(&target.key).filter(|t| fresh(Some(t))) {
            return Some(renewed.access_token);
        }
        let turn = match self.turn(&target.key, fresh).await {
            Ok(Turn::Done) => {
                let current = self.inner.store.tokens(&target.key).filter(|t| t.server_url == target.url);
                return current.map(|t| t.access_token);
            }
            Ok(Turn::Mine(turn)) => turn,
            Err(e) => {
                tracing::info!(server = target.key.server, "could not renew the access token: {e}");
                return None;
            }
        };
        // What the store holds now: another node may have rotated the refresh token.
        let current = self.inner.store.tokens(&target.key).filter(|t| t.server_url == target.url);
        let outcome = match current {
            Some(current) => self.renew(target, &current, None, turn.as_deref()).await,
            None => Err(OAuthError::LoginNeeded { server: target.key.server.clone() }),
        };
        let token = match outcome {
            Ok(fresh) => Some(fresh),
            Err(e) => {
                tracing::info!(server = target.key.server, "could not renew the access token: {e}");
                // A refresh the server refused ends the credential; one this node could not
                // keep (its turn ran out: another node's set is newer) does not.
                if !matches!(e, OAuthError::Store(_)) {
                    let _ = self.forget(&target.key).await;
                }
                None
            }
        };
        self.end_turn(&target.key, turn).await;
        token
    }

    /// The server accepted a request made with the bearer.
    pub fn succeeded(&self, target: &Target) {
        if let Some(known) = self.inner.known.lock().expect("known lock").get_mut(&target.key) {
            known.step_ups = 0;
        }
    }

    /// The server answered `status` (401 or 403) with these `WWW-Authenticate` values to a
    /// request that carried `sent`. Returns a token to try once more with, when one can
    /// be had without a person; otherwise why not ([`OAuthError::LoginNeeded`] when a
    /// login would help).
    pub async fn challenged<'a>(
        &self,
        target: &Target,
        status: u16,
        headers: impl IntoIterator<Item = &'a str>,
        sent: Option<&str>,
    ) -> Result<String, OAuthError> {
        let challenge = challenge::bearer(headers);
        let step_up = status == 403 && challenge.as_ref().is_some_and(Challenge::insufficient_scope);
        self.pull(&target.key).await;
        let stored = self.inner.store.tokens(&target.key).filter(|t| t.server_url == target.url);
        let login_needed = || OAuthError::LoginNeeded { server: target.key.server.clone() };
        {
            let mut known = self.inner.known.lock().expect("known lock");
            let known = known.entry(target.key.clone()).or_default();
            if step_up {
                known.step_ups += 1;
                let max = self.settings().max_step_ups;
                if known.step_ups > max {
                    known.step_ups = 0;
                    return Err(OAuthError::Refused(format!(
                        "server {:?} still answers insufficient_scope after {max} re-authorizations (oauth.maxStepUps)",
                        target.key.server
                    )));
                }
                let granted = stored.as_ref().map(|t| t.scopes.clone()).unwrap_or_default();
                let wanted = challenge.as_ref().and_then(|c| c.scope.clone()).unwrap_or_default();
                known.requested = union(&union(&known.requested, &granted), &wanted);
            }
            if challenge.is_some() {
                known.challenge = challenge.clone();
            }
        }
        if status != 401 && !step_up {
            return Err(OAuthError::Refused(format!("server {:?} answered HTTP {status}", target.key.server)));
        }
        let lock = self.renewing(&target.key);
        let _one = lock.lock().await;
        // Renewed by a concurrent request while this one waited (on any node): use that.
        self.pull(&target.key).await;
        if let Some(current) = self.inner.store.tokens(&target.key).filter(|t| t.server_url == target.url)
            && sent.is_some_and(|s| s != current.access_token)
            && !step_up
        {
            return Ok(current.access_token);
        }
        if target.config.grant == Grant::ClientCredentials {
            let discovered =
                discovery::discover(&self.http(&target.url), &parse(&target.url)?, challenge.as_ref()).await?;
            return self.client_credentials(target, &discovered).await;
        }
        match stored {
            Some(tokens) if tokens.refresh_token.is_some() && !step_up => {
                let url = parse(&target.url)?;
                // The server may have moved to another authorization server: a token
                // from the old one is no good there, and neither is its client. Found
                // before this node's turn, so the turn (a lock of fixed length, in a
                // cluster) covers only the token request: a slow discovery must not
                // outlast it and let another node spend the same refresh token.
                let discovered = discovery::discover(&self.http(&target.url), &url, challenge.as_ref()).await;
                let other = |t: Option<&Tokens>| t.is_some_and(|t| Some(t.access_token.as_str()) != sent);
                let turn = match self.turn(&target.key, other).await? {
                    Turn::Done => {
                        let current = self.inner.store.tokens(&target.key).filter(|t| t.server_url == target.url);
                        return current.map(|t| t.access_token).ok_or_else(login_needed);
                    }
                    Turn::Mine(turn) => turn,
                };
                let tokens =
                    self.inner.store.tokens(&target.key).filter(|t| t.server_url == target.url).unwrap_or(tokens);
                let same = discovered.as_ref().is_ok_and(|d| d.auth.issuer == tokens.issuer);
                let renewed = if same { Some(self.renew(target, &tokens, None, turn.as_deref()).await) } else { None };
                let outcome = match renewed {
                    Some(Ok(token)) if Some(token.as_str()) != sent => Ok(token),
                    // This node could not keep what it got: another node's set is newer.
                    Some(Err(e @ OAuthError::Store(_))) => Err(e),
                    _ => {
                        let _ = self.forget(&target.key).await;
                        Err(login_needed())
                    }
                };
                self.end_turn(&target.key, turn).await;
                outcome
            }
            Some(_) if !step_up => {
                let _ = self.forget(&target.key).await;
                Err(login_needed())
            }
            _ => Err(login_needed()),
        }
    }

    /// A new access token from the refresh token (or, for client credentials, a new grant).
    /// In a cluster, `turn` is this node's hold on the credential's lock: the new set is
    /// written only while it lasts.
    async fn renew(
        &self,
        target: &Target,
        tokens: &Tokens,
        scopes: Option<&[String]>,
        turn: Option<&str>,
    ) -> Result<String, OAuthError> {
        if target.config.grant == Grant::ClientCredentials {
            let discovered = discovery::discover(&self.http(&target.url), &parse(&target.url)?, None).await?;
            return self.client_credentials(target, &discovered).await;
        }
        let refresh = tokens
            .refresh_token
            .clone()
            .ok_or_else(|| OAuthError::LoginNeeded { server: target.key.server.clone() })?;
        let mut form = vec![
            ("grant_type", "refresh_token".to_owned()),
            ("refresh_token", refresh.clone()),
            ("resource", tokens.resource.clone()),
        ];
        if let Some(scopes) = scopes.filter(|s| !s.is_empty()) {
            form.push(("scope", scopes.join(" ")));
        }
        let key = target.config.private_key.clone().map(|pem| SigningKey { pem });
        let granted = token::request(
            &self.http(&target.url),
            &tokens.token_endpoint,
            &tokens.client,
            key.as_ref(),
            &tokens.issuer,
            form,
        )
        .await?;
        let fresh = Tokens {
            access_token: granted.access_token.clone(),
            // A server that does not rotate refresh tokens keeps the old one valid.
            refresh_token: granted.refresh_token.or(Some(refresh)),
            expires_at: granted.expires_in.map(|s| now() + s),
            scopes: granted.scope.unwrap_or_else(|| tokens.scopes.clone()),
            ..tokens.clone()
        };
        self.keep(&target.key, fresh, turn).await?;
        tracing::info!(server = target.key.server, "access token refreshed");
        Ok(granted.access_token)
    }

    async fn client_credentials(&self, target: &Target, discovered: &Discovered) -> Result<String, OAuthError> {
        let config = &target.config;
        let client_id = config.client_id.clone().ok_or_else(|| {
            OAuthError::Config(format!("server {:?}: client_credentials needs oauth.clientId", target.key.server))
        })?;
        let key = config.private_key.clone().map(|pem| SigningKey { pem });
        let auth_method = token::auth_method_for(&discovered.auth, config.client_secret.is_some(), key.is_some());
        let client =
            Client { client_id, client_secret: config.client_secret.clone(), auth_method, redirect_uris: vec![] };
        let requested = self.known_requested(&target.key);
        let scopes = select_scopes(
            &config.scopes,
            self.known_challenge(&target.key).and_then(|c| c.scope).as_deref(),
            discovered.scopes_supported.as_deref(),
            &requested,
            None,
        );
        let mut form = vec![("grant_type", "client_credentials".to_owned()), ("resource", discovered.resource.clone())];
        if !scopes.is_empty() {
            form.push(("scope", scopes.join(" ")));
        }
        let granted = token::request(
            &self.http(&target.url),
            &discovered.auth.token_endpoint,
            &client,
            key.as_ref(),
            &discovered.auth.issuer,
            form,
        )
        .await?;
        self.store_granted(target, discovered, client, granted.clone(), &scopes).await?;
        Ok(granted.access_token)
    }

    async fn store_granted(
        &self,
        target: &Target,
        discovered: &Discovered,
        client: Client,
        granted: token::Granted,
        asked: &[String],
    ) -> Result<(), OAuthError> {
        let tokens = Tokens {
            access_token: granted.access_token,
            refresh_token: granted.refresh_token,
            expires_at: granted.expires_in.map(|s| now() + s),
            scopes: granted.scope.unwrap_or_else(|| asked.to_vec()),
            server_url: target.url.clone(),
            issuer: discovered.auth.issuer.clone(),
            token_endpoint: discovered.auth.token_endpoint.clone(),
            revocation_endpoint: discovered.auth.revocation_endpoint.clone(),
            resource: discovered.resource.clone(),
            client,
            generation: 0,
        };
        self.keep(&target.key, tokens, None).await
    }

    fn known_challenge(&self, key: &CredentialKey) -> Option<Challenge> {
        self.inner.known.lock().expect("known lock").get(key).and_then(|k| k.challenge.clone())
    }

    fn known_requested(&self, key: &CredentialKey) -> Vec<String> {
        self.inner.known.lock().expect("known lock").get(key).map(|k| k.requested.clone()).unwrap_or_default()
    }

    /// Begins a login for `target`: discovery, registration, the loopback listener. The
    /// URL it returns is for a person to open; [`Authorizer::wait`] says when it is done.
    /// A login of the same credential and scopes under way is returned again.
    pub async fn begin(&self, target: &Target) -> Result<Login, OAuthError> {
        if target.config.grant == Grant::ClientCredentials {
            return Err(OAuthError::Config(format!(
                "server {:?} uses the client_credentials grant: there is nothing to log in to",
                target.key.server
            )));
        }
        let settings = self.settings();
        let server = parse(&target.url)?;
        let mut challenge = self.known_challenge(&target.key);
        if challenge.is_none() {
            challenge = self.probe(&server).await;
        }
        let discovered = discovery::discover(&self.http(&target.url), &server, challenge.as_ref()).await?;
        let auth = &discovered.auth;
        check_pkce(auth)?;
        let scopes = select_scopes(
            &target.config.scopes,
            challenge.as_ref().and_then(|c| c.scope.as_deref()),
            discovered.scopes_supported.as_deref(),
            &self.known_requested(&target.key),
            auth.scopes_supported.as_deref(),
        );
        if let Some(login) = self.pending(&target.key, &scopes) {
            return Ok(login);
        }
        // Shared credentials (only the daemon's owner logs them in) and callers' own ones
        // each have MAX_FLOWS: callers leaving logins open cannot lock the owner out.
        let shared = target.key.principal.is_none();
        if self
            .inner
            .flows
            .lock()
            .expect("flows lock")
            .values()
            .filter(|f| f.key.principal.is_none() == shared && f.state.borrow().eq(&LoginState::Pending))
            .count()
            >= MAX_FLOWS
        {
            return Err(OAuthError::Flow(format!(
                "{MAX_FLOWS} logins are already under way; finish or let them expire"
            )));
        }
        let (listener, redirect_uri) = loopback::bind(settings.redirect_port).await.map_err(|e| {
            OAuthError::Flow(format!(
                "opening the redirect listener on 127.0.0.1:{}: {e} (oauth.redirectPort)",
                settings.redirect_port
            ))
        })?;
        // Until the login ends, no request mcpx sends (a registration, a token request)
        // may be pointed at the listener that waits for its code.
        let own = listener.local_addr().ok().map(mcpx_http::egress::listening);
        let client = self.client_for(target, auth, &redirect_uri, &settings).await?;
        let state = token::random(32);
        let verifier = token::random(48);
        let mut url = parse(&auth.authorization_endpoint)?;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &client.client_id)
                .append_pair("redirect_uri", &redirect_uri)
                .append_pair("code_challenge", &token::challenge(&verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", &discovered.resource);
            if !scopes.is_empty() {
                q.append_pair("scope", &scopes.join(" "));
            }
        }
        {
            let mut known = self.inner.known.lock().expect("known lock");
            known.entry(target.key.clone()).or_default().requested = scopes.clone();
        }
        let id = token::random(16);
        let login = Login {
            id: id.clone(),
            server: target.key.server.clone(),
            url: url.to_string(),
            expires_in: settings.login_timeout,
        };
        let (tx, rx) = tokio::sync::watch::channel(LoginState::Pending);
        let me = self.clone();
        let flow_target = target.clone();
        let exchange =
            Exchange { discovered: discovered.clone(), client, redirect_uri, verifier, scopes: scopes.clone() };
        let task = tokio::spawn(async move {
            let _own = own;
            let outcome =
                tokio::time::timeout(settings.login_timeout, me.finish(&flow_target, listener, &state, exchange)).await;
            let state = match outcome {
                Ok(Ok(())) => {
                    tracing::info!(server = flow_target.key.server, "logged in");
                    LoginState::Done
                }
                Ok(Err(e)) => {
                    tracing::warn!(server = flow_target.key.server, "login failed: {e}");
                    LoginState::Failed(e.to_string())
                }
                Err(_) => {
                    tracing::info!(
                        server = flow_target.key.server,
                        "the login was not completed within {:?} (oauth.loginTimeout)",
                        settings.login_timeout
                    );
                    LoginState::Expired
                }
            };
            let _ = tx.send(state);
        });
        let mut flows = self.inner.flows.lock().expect("flows lock");
        // Finished logins are kept for `wait` until there are many.
        if flows.len() > 4 * MAX_FLOWS {
            flows.retain(|_, f| f.state.borrow().eq(&LoginState::Pending));
        }
        flows.insert(
            id,
            Flow { key: target.key.clone(), scopes, login: login.clone(), state: rx, task: task.abort_handle() },
        );
        Ok(login)
    }

    fn pending(&self, key: &CredentialKey, scopes: &[String]) -> Option<Login> {
        let flows = self.inner.flows.lock().expect("flows lock");
        flows
            .values()
            .find(|f| &f.key == key && f.scopes == scopes && f.state.borrow().eq(&LoginState::Pending))
            .map(|f| f.login.clone())
    }

    /// An unauthenticated request to the server, for its challenge (scope, metadata URL).
    async fn probe(&self, server: &Url) -> Option<Challenge> {
        let body = r#"{"jsonrpc":"2.0","id":"mcpx-auth-probe","method":"ping"}"#;
        let response = Http::toward(server, self.settings().egress_allow).probe(server, body).await.ok()?;
        let values: Vec<String> = response
            .headers()
            .get_all(mcpx_http::header::WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        challenge::bearer(values.iter().map(String::as_str))
    }

    /// Who mcpx is to this authorization server, in the spec's order: the configured
    /// client, a client ID metadata document, a dynamic registration (kept per issuer).
    async fn client_for(
        &self,
        target: &Target,
        auth: &AuthServer,
        redirect_uri: &str,
        settings: &Settings,
    ) -> Result<Client, OAuthError> {
        let metadata_url = target.config.client_metadata_url.clone().or(settings.client_metadata_url.clone());
        match registration_for(&target.config, metadata_url.as_deref(), auth) {
            Registration::Configured(client_id) => Ok(Client {
                client_id,
                client_secret: target.config.client_secret.clone(),
                auth_method: token::auth_method_for(auth, target.config.client_secret.is_some(), false),
                redirect_uris: vec![],
            }),
            Registration::MetadataDocument(url) => {
                Ok(Client { client_id: url, client_secret: None, auth_method: AuthMethod::None, redirect_uris: vec![] })
            }
            Registration::Dynamic(endpoint) => {
                if let Some(client) = self.inner.store.client(&auth.issuer)
                    && client.redirect_uris.iter().any(|u| u == redirect_uri)
                {
                    return Ok(client);
                }
                let client =
                    token::register(&self.http(&target.url), auth, &endpoint, redirect_uri, &settings.client_name)
                        .await?;
                self.inner.store.put_client(&auth.issuer, client.clone())?;
                Ok(client)
            }
            Registration::Impossible => Err(OAuthError::Registration(format!(
                "the authorization server {} offers no registration: set \"oauth\": {{\"clientId\": ...}} on server {:?}",
                auth.issuer, target.key.server
            ))),
        }
    }

    /// Waits for the redirect, checks it and exchanges the code.
    async fn finish(
        &self,
        target: &Target,
        listener: tokio::net::TcpListener,
        state: &str,
        exchange: Exchange,
    ) -> Result<(), OAuthError> {
        let (callback, mut stream) = loopback::wait_for(&listener, state).await;
        drop(listener);
        let outcome = self.exchange(target, &callback, exchange).await;
        let page = match &outcome {
            Ok(()) => "mcpx is logged in. You can close this page.".to_owned(),
            Err(e) => format!("mcpx could not log in: {e}"),
        };
        let _ = loopback::answer(&mut stream, if outcome.is_ok() { 200 } else { 400 }, &page).await;
        outcome
    }

    async fn exchange(&self, target: &Target, callback: &loopback::Callback, ex: Exchange) -> Result<(), OAuthError> {
        let auth = &ex.discovered.auth;
        check_iss(auth.authorization_response_iss_parameter_supported, callback.iss.as_deref(), &auth.issuer)?;
        if let Some(error) = &callback.error {
            let detail = callback.error_description.as_deref().map(|d| format!(": {d}")).unwrap_or_default();
            return Err(OAuthError::Denied(format!("{error}{detail}")));
        }
        let code = callback.code.clone().ok_or_else(|| OAuthError::Denied("the redirect carries no code".into()))?;
        let form = vec![
            ("grant_type", "authorization_code".to_owned()),
            ("code", code),
            ("redirect_uri", ex.redirect_uri.clone()),
            ("code_verifier", ex.verifier.clone()),
            ("resource", ex.discovered.resource.clone()),
        ];
        let granted =
            token::request(&self.http(&target.url), &auth.token_endpoint, &ex.client, None, &auth.issuer, form).await?;
        self.store_granted(target, &ex.discovered, ex.client, granted, &ex.scopes).await?;
        if let Some(known) = self.inner.known.lock().expect("known lock").get_mut(&target.key) {
            known.challenge = None;
        }
        Ok(())
    }

    /// Whose credential login `id` is for, while it is known.
    pub fn login_key(&self, id: &str) -> Option<CredentialKey> {
        self.inner.flows.lock().expect("flows lock").get(id).map(|f| f.key.clone())
    }

    /// The state of login `id` once it is no longer pending, or after `within`.
    pub async fn wait(&self, id: &str, within: Duration) -> Result<LoginState, OAuthError> {
        let mut state = {
            let flows = self.inner.flows.lock().expect("flows lock");
            let flow = flows.get(id).ok_or_else(|| OAuthError::Flow(format!("no login {id:?} is under way")))?;
            flow.state.clone()
        };
        let _ = tokio::time::timeout(within, state.wait_for(|s| s != &LoginState::Pending)).await;
        let now = state.borrow().clone();
        Ok(now)
    }

    /// What `mcpx auth ls` shows for each target (in a cluster, as the shared store has it).
    pub async fn status(&self, targets: &[Target]) -> Vec<AuthStatus> {
        for target in targets {
            self.pull(&target.key).await;
        }
        targets
            .iter()
            .map(|target| {
                let tokens = self.inner.store.tokens(&target.key).filter(|t| t.server_url == target.url);
                let challenged = self.known_challenge(&target.key).is_some();
                let state = match &tokens {
                    Some(t) if t.refresh_token.is_some() || t.expires_at.is_none_or(|at| at > now()) => {
                        AuthState::LoggedIn
                    }
                    Some(_) => AuthState::NeedsLogin,
                    None if target.config.grant == Grant::ClientCredentials => AuthState::NotRequired,
                    None if challenged || target.config != ServerOAuth::default() => AuthState::NeedsLogin,
                    None => AuthState::NotRequired,
                };
                AuthStatus {
                    server: target.key.server.clone(),
                    state,
                    expires_at: tokens.as_ref().and_then(|t| t.expires_at),
                    scopes: tokens.as_ref().map(|t| t.scopes.clone()).unwrap_or_default(),
                    issuer: tokens.map(|t| t.issuer),
                }
            })
            .collect()
    }

    /// Forgets the credential, revoking it first where the server offers revocation.
    /// Returns whether it was revoked; a login under way for it is dropped.
    pub async fn logout(&self, key: &CredentialKey) -> Result<bool, OAuthError> {
        {
            let mut flows = self.inner.flows.lock().expect("flows lock");
            flows.retain(|_, f| {
                if &f.key == key {
                    f.task.abort();
                }
                &f.key != key
            });
        }
        self.inner.known.lock().expect("known lock").remove(key);
        self.pull(key).await;
        let Some(tokens) = self.forget(key).await? else { return Ok(false) };
        let Some(endpoint) = tokens.revocation_endpoint.clone() else { return Ok(false) };
        let http = &self.http(&tokens.server_url);
        let mut revoked = true;
        if let Some(refresh) = &tokens.refresh_token {
            revoked &= token::revoke(http, &endpoint, &tokens.client, refresh, "refresh_token").await.is_ok();
        }
        revoked &= token::revoke(http, &endpoint, &tokens.client, &tokens.access_token, "access_token").await.is_ok();
        Ok(revoked)
    }
}

/// What a login's code exchange needs.
struct Exchange {
    discovered: Discovered,
    client: Client,
    redirect_uri: String,
    verifier: String,
    scopes: Vec<String>,
}

fn parse(url: &str) -> Result<Url, OAuthError> {
    Url::parse(url).map_err(|e| OAuthError::Config(format!("{url:?} is not a URL: {e}")))
}

fn union(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = a.to_vec();
    for s in b {
        if !out.contains(s) {
            out.push(s.clone());
        }
    }
    out
}

/// The scopes to ask for: the configured ones, what was asked before (a step-up asks for
/// the union), and the challenge's `scope` — else the resource's `scopes_supported`, else
/// nothing. `offline_access` is added when the authorization server lists it (so a refresh
/// token can be had), never otherwise.
pub fn select_scopes(
    configured: &[String],
    challenged: Option<&[String]>,
    resource_supported: Option<&[String]>,
    previously: &[String],
    server_supported: Option<&[String]>,
) -> Vec<String> {
    let base = match challenged.filter(|c| !c.is_empty()) {
        Some(c) => c,
        None => resource_supported.unwrap_or_default(),
    };
    let mut scopes = union(&union(configured, previously), base);
    if server_supported.is_some_and(|s| s.iter().any(|s| s == "offline_access")) {
        scopes = union(&scopes, &["offline_access".to_owned()]);
    }
    scopes
}

/// PKCE S256 or nothing: a server whose metadata does not list S256 in
/// `code_challenge_methods_supported` (absent included: the spec says it then does not
/// support PKCE) is refused. Only the 2025-03-26 default endpoints, taken without any
/// metadata to say, get the benefit of the doubt.
pub fn check_pkce(auth: &AuthServer) -> Result<(), OAuthError> {
    let s256 = auth.code_challenge_methods_supported.as_ref().is_some_and(|m| m.iter().any(|m| m == "S256"));
    if !auth.from_metadata || s256 {
        return Ok(());
    }
    Err(OAuthError::Refused(format!(
        "the authorization server {} does not advertise PKCE S256 (code_challenge_methods_supported); refusing to log in",
        auth.issuer
    )))
}

/// RFC 9207: an `iss` on the authorization response must be the issuer exactly (no
/// normalization); a server that advertises `authorization_response_iss_parameter_supported`
/// must send one.
pub fn check_iss(advertised: bool, iss: Option<&str>, issuer: &str) -> Result<(), OAuthError> {
    match iss {
        Some(iss) if iss == issuer => Ok(()),
        Some(iss) => Err(OAuthError::Refused(format!(
            "the authorization response's iss {iss:?} is not the authorization server {issuer:?}; refusing the code"
        ))),
        None if advertised => Err(OAuthError::Refused(format!(
            "the authorization server {issuer:?} advertises the iss parameter but the response has none; refusing the code"
        ))),
        None => Ok(()),
    }
}

#[derive(Debug, PartialEq)]
enum Registration {
    Configured(String),
    MetadataDocument(String),
    Dynamic(String),
    Impossible,
}

fn registration_for(config: &ServerOAuth, metadata_url: Option<&str>, auth: &AuthServer) -> Registration {
    if let Some(id) = &config.client_id {
        return Registration::Configured(id.clone());
    }
    if let Some(url) = metadata_url.filter(|_| auth.client_id_metadata_document_supported) {
        return Registration::MetadataDocument(url.to_owned());
    }
    match &auth.registration_endpoint {
        Some(endpoint) => Registration::Dynamic(endpoint.clone()),
        None => Registration::Impossible,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn scopes_come_from_the_challenge_else_the_resource_metadata_else_none() {
        let challenged = s(&["mcp:basic"]);
        let supported = s(&["mcp:basic", "mcp:read", "mcp:write"]);
        assert_eq!(select_scopes(&[], Some(&challenged), Some(&supported), &[], None), s(&["mcp:basic"]));
        assert_eq!(select_scopes(&[], None, Some(&supported), &[], None), supported);
        assert!(select_scopes(&[], None, None, &[], None).is_empty());
    }

    #[test]
    fn a_step_up_asks_for_the_union_and_offline_access_only_where_listed() {
        let before = s(&["mcp:basic"]);
        let challenged = s(&["mcp:write"]);
        assert_eq!(select_scopes(&[], Some(&challenged), None, &before, None), s(&["mcp:basic", "mcp:write"]));
        let with_offline = s(&["mcp:basic", "offline_access"]);
        assert_eq!(
            select_scopes(&[], Some(&before), None, &[], Some(&with_offline)),
            s(&["mcp:basic", "offline_access"])
        );
        let without = s(&["mcp:basic", "mcp:read"]);
        assert!(!select_scopes(&[], Some(&before), None, &[], Some(&without)).contains(&"offline_access".to_owned()));
    }

    #[test]
    fn iss_is_compared_exactly_and_required_only_when_advertised() {
        let issuer = "http://localhost:3000";
        assert!(check_iss(true, Some(issuer), issuer).is_ok());
        assert!(check_iss(true, None, issuer).is_err(), "advertised, missing");
        assert!(check_iss(true, Some("https://evil.example.com"), issuer).is_err());
        assert!(check_iss(false, Some("https://evil.example.com"), issuer).is_err(), "present: compared anyway");
        assert!(check_iss(true, Some("http://localhost:3000/"), issuer).is_err(), "no normalization");
        assert!(check_iss(true, Some("HTTP://localhost:3000"), issuer).is_err(), "no case folding");
        assert!(check_iss(false, None, issuer).is_ok());
    }

    #[test]
    fn an_authorization_server_without_s256_in_its_metadata_is_refused() {
        let with = |methods: Option<&[&str]>| AuthServer {
            code_challenge_methods_supported: methods.map(|m| m.iter().map(|s| s.to_string()).collect()),
            from_metadata: true,
            ..AuthServer::default()
        };
        assert!(check_pkce(&with(Some(&["S256"]))).is_ok());
        assert!(check_pkce(&with(Some(&["plain"]))).is_err());
        assert!(check_pkce(&with(Some(&[]))).is_err());
        assert!(check_pkce(&with(None)).is_err(), "absent: the server does not support PKCE");
        let defaults = AuthServer { from_metadata: false, ..AuthServer::default() };
        assert!(check_pkce(&defaults).is_ok(), "2025-03-26 default endpoints: no metadata to say");
    }

    #[test]
    fn registration_prefers_the_configured_client_then_a_metadata_document_then_dynamic() {
        let mut auth =
            AuthServer { registration_endpoint: Some("https://as/register".into()), ..AuthServer::default() };
        let configured = ServerOAuth { client_id: Some("pre".into()), ..ServerOAuth::default() };
        let url = "https://me/client.json";
        let doc = Some(url);
        assert_eq!(registration_for(&configured, doc, &auth), Registration::Configured("pre".into()));
        assert_eq!(
            registration_for(&ServerOAuth::default(), doc, &auth),
            Registration::Dynamic("https://as/register".into())
        );
        auth.client_id_metadata_document_supported = true;
        assert_eq!(registration_for(&ServerOAuth::default(), doc, &auth), Registration::MetadataDocument(url.into()));
        assert_eq!(
            registration_for(&ServerOAuth::default(), None, &auth),
            Registration::Dynamic("https://as/register".into())
        );
        auth.registration_endpoint = None;
        assert_eq!(registration_for(&ServerOAuth::default(), None, &auth), Registration::Impossible);
    }

    /// A store that remembers what it is given and counts as Redis does.
    #[derive(Default)]
    struct Memory {
        values: Mutex<HashMap<String, Vec<u8>>>,
        counters: Mutex<HashMap<String, u64>>,
    }

    impl SharedStore for Memory {
        fn get<'a>(&'a self, name: &'a str) -> crate::shared::Pending<'a, Option<Vec<u8>>> {
            Box::pin(async move { Ok(self.values.lock().unwrap().get(name).cloned()) })
        }
        fn put<'a>(
            &'a self,
            name: &'a str,
            value: Vec<u8>,
            _: Option<(&'a str, &'a str)>,
        ) -> crate::shared::Pending<'a, bool> {
            Box::pin(async move {
                self.values.lock().unwrap().insert(name.to_owned(), value);
                Ok(true)
            })
        }
        fn delete<'a>(&'a self, name: &'a str) -> crate::shared::Pending<'a, ()> {
            Box::pin(async move {
                self.values.lock().unwrap().remove(name);
                Ok(())
            })
        }
        fn lock<'a>(&'a self, _: &'a str, _: &'a str, _: Duration) -> crate::shared::Pending<'a, bool> {
            Box::pin(async { Ok(true) })
        }
        fn unlock<'a>(&'a self, _: &'a str, _: &'a str) -> crate::shared::Pending<'a, ()> {
            Box::pin(async { Ok(()) })
        }
        fn put_first<'a>(&'a self, _: &'a str, _: &'a str, _: Vec<u8>, _: u64) -> crate::shared::Pending<'a, bool> {
            Box::pin(async { Ok(false) })
        }
        fn next<'a>(&'a self, name: &'a str, floor: u64) -> crate::shared::Pending<'a, u64> {
            Box::pin(async move {
                let mut counters = self.counters.lock().unwrap();
                let counter = counters.entry(name.to_owned()).or_default();
                *counter = (*counter + 1).max(floor);
                Ok(*counter)
            })
        }
    }

    /// A node whose clock is an hour behind the node that wrote the last set still writes
    /// a newer generation: it comes from the store's counter, not from the node's clock
    /// (else every node that saw the newer set would ignore this login).
    #[tokio::test]
    async fn a_set_written_by_a_node_whose_clock_is_behind_is_still_the_newest_generation() {
        let dir = std::env::temp_dir().join(format!("mcpx-generation-{}", std::process::id()));
        let authorizer = Authorizer::open(&dir, Settings::default()).unwrap();
        let store = Arc::new(Memory::default());
        authorizer.join_cluster(store.clone(), [3; 32]);
        let key = CredentialKey::shared("docs");
        let ahead = now_ms() + 3_600_000;
        store.counters.lock().unwrap().insert(Shared::generation_name(&key), ahead);
        authorizer.keep(&key, crate::store::tests::sample("https://docs/mcp"), None).await.unwrap();
        let written = store.values.lock().unwrap()[&Shared::name(&key)].clone();
        let opened = Shared::new(store.clone(), [3; 32]).open(&key, &written).expect("a sealed set");
        assert!(opened.generation > ahead, "generation {} is not newer than {ahead}", opened.generation);
        let _ = std::fs::remove_dir_all(dir);
    }
}
