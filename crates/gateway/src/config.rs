//! The config file: the `mcpServers` JSON other MCP hosts use, plus mcpx's own keys.
//!
//! Parsing is strict about the values mcpx reads (a typo in a scope is an error with the
//! file, line and column) and lenient about keys it does not know, so an existing host
//! config works unchanged. Every limit has a default documented on its field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::scope::Scope;

/// Names no upstream server may take: mcpx serves these itself.
pub const RESERVED_SERVER_NAMES: [&str; 2] = ["artifacts", "mcpx"];

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Config {
    pub mcp_servers: BTreeMap<String, ServerConfig>,
    /// Servers whose tools are listed flat as `<server>__<tool>` beside the gateway tools.
    pub expose: Vec<String>,
    pub expose_prefix: ExposePrefix,
    pub transport: TransportConfig,
    pub pool: PoolConfig,
    pub http: HttpConfig,
    pub timeouts: TimeoutConfig,
    pub limits: LimitConfig,
    pub exec: ExecConfig,
    pub artifacts: ArtifactConfig,
    /// How mcpx logs in to HTTP upstreams that ask for OAuth.
    pub oauth: OAuthConfig,
    /// What each client may use, by `"local"`, `"token:<name>"`,
    /// `"oauth:<subject>@<issuer>"` or `"oauth-client:<client_id>@<issuer>"` (a token
    /// without a subject). A client not named here may use every server.
    pub clients: BTreeMap<String, ClientConfig>,
    /// The call journal: one record per request mcpx answers for a caller.
    pub journal: JournalConfig,
    /// Where traces go (`gateway::traces`).
    pub telemetry: TelemetryConfig,
    /// Tasks (the 2026-07-28 tasks extension) mcpx relays from upstreams.
    pub tasks: TaskConfig,
    /// Where mcpx may send requests a remote party pointed it at (`mcpx_http::egress`).
    pub egress: EgressConfig,
    /// Running as one node of several behind a load balancer (`gateway::cluster`).
    /// Absent by default: one daemon, no Redis, nothing shared. Read at the daemon's start.
    pub cluster: Option<ClusterConfig>,
    /// Threads the daemon serves on, 1 to [`MAX_WORKERS`]. Absent: [`default_workers`].
    /// Read at the daemon's start.
    pub workers: Option<usize>,
}

/// The most `workers` a config may ask for: each is a thread started with the daemon.
pub const MAX_WORKERS: usize = 1024;

/// Half the CPUs the daemon may run on, rounded up: every call also needs the upstream
/// that answers it and the caller that asked, mostly on the same machine, and a worker
/// with no core of its own to run on costs more (waking, stealing work) than it serves.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().div_ceil(2))
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "RawServer")]
pub struct ServerConfig {
    pub launch: Launch,
    pub scope: Scope,
    /// Whether a launched stdio server receives `_meta["dev.mcpx/invocation"]`.
    pub invocation_context: bool,
    /// What identifies this definition: an instance started from another one is replaced.
    /// Computed once when the config is read.
    pub definition: String,
    /// How mcpx logs in to this (HTTP) server, when it asks for OAuth.
    pub oauth: Option<mcpx_oauth::ServerOAuth>,
    /// Whose credential reaches the server: one shared by every caller (the default,
    /// logged in by the daemon's owner), or each authenticated caller's own.
    pub credentials: Credentials,
    /// Which of its tools callers see, under which names and descriptions.
    pub tools: ItemPolicy,
    /// Which of its prompts callers see, under which names and descriptions.
    pub prompts: ItemPolicy,
    /// Which of its resources (and templates) callers see, by URI.
    pub resources: UriPolicy,
}

/// A server entry's `"credentials"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Credentials {
    /// One credential for every caller, logged in by the daemon's owner only.
    #[default]
    Shared,
    /// Each authenticated caller logs in for itself (its own token in the store).
    User,
}

/// The top-level `"oauth"` section: how mcpx logs in to HTTP upstreams.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct OAuthConfig {
    /// A client ID metadata document URL (an https URL whose document describes mcpx),
    /// used as the client_id where an authorization server supports such documents.
    /// Default none: dynamic registration.
    pub client_metadata_url: Option<String>,
    /// The port of the loopback redirect (`http://127.0.0.1:<port>/callback`), for an
    /// authorization server that wants the redirect URI exactly. Default 0: an ephemeral
    /// port per login.
    pub redirect_port: u16,
    /// A login not completed within this is dropped and its listener closed. Default 5m.
    #[serde(with = "duration")]
    pub login_timeout: Duration,
    /// How many times in a row a server's 403 `insufficient_scope` may send mcpx back for
    /// more scopes before the request fails. Default 2.
    pub max_step_ups: u32,
    /// An access token this close to expiry is refreshed before use. Default 60s.
    #[serde(with = "duration")]
    pub refresh_before: Duration,
    /// The `client_name` mcpx registers under. Default "mcpx".
    pub client_name: String,
    /// In a cluster, how long a node holds a credential's lock while it spends the
    /// refresh token; another node waits that long at most. Longer than one token
    /// request may take. Default 30s.
    #[serde(with = "duration")]
    pub refresh_lock: Duration,
}

impl Default for OAuthConfig {
    fn default() -> Self {
        OAuthConfig {
            client_metadata_url: None,
            redirect_port: 0,
            login_timeout: Duration::from_secs(300),
            max_step_ups: 2,
            refresh_before: Duration::from_secs(60),
            client_name: "mcpx".into(),
            refresh_lock: Duration::from_secs(30),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Launch {
    Stdio { command: String, args: Vec<String>, env: BTreeMap<String, String>, cwd: Option<PathBuf> },
    Http { url: String, headers: BTreeMap<String, String> },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawServer {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    scope: Scope,
    #[serde(default = "yes")]
    invocation_context: bool,
    oauth: Option<mcpx_oauth::ServerOAuth>,
    #[serde(default)]
    credentials: Credentials,
    #[serde(default)]
    tools: ItemPolicy,
    #[serde(default)]
    prompts: ItemPolicy,
    #[serde(default)]
    resources: UriPolicy,
}

fn yes() -> bool {
    true
}

impl TryFrom<RawServer> for ServerConfig {
    type Error = String;

    fn try_from(raw: RawServer) -> Result<Self, String> {
        let launch = match (raw.command, raw.url) {
            (Some(command), None) if !command.trim().is_empty() => {
                Launch::Stdio { command, args: raw.args, env: raw.env, cwd: raw.cwd }
            }
            (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
                Launch::Http { url, headers: raw.headers }
            }
            (None, Some(url)) => return Err(format!("\"url\" must start with http:// or https://, got {url:?}")),
            (Some(_), Some(_)) => return Err("a server has either \"command\" or \"url\", not both".into()),
            _ => return Err("a server needs a non-empty \"command\" (stdio) or a \"url\" (HTTP)".into()),
        };
        if raw.oauth.is_some() && !matches!(launch, Launch::Http { .. }) {
            return Err("\"oauth\" is for HTTP servers (with a \"url\")".into());
        }
        if raw.credentials == Credentials::User && !matches!(launch, Launch::Http { .. }) {
            return Err("\"credentials\" is for HTTP servers (with a \"url\")".into());
        }
        // One instance carries one credential: it must serve one principal only.
        if raw.credentials == Credentials::User && !matches!(raw.scope, Scope::User | Scope::Session | Scope::Call) {
            return Err(
                "\"credentials\": \"user\" needs \"scope\": \"user\", \"session\" or \"call\" (an instance per caller)"
                    .into(),
            );
        }
        if let Some(oauth) = &raw.oauth
            && oauth.grant == mcpx_oauth::Grant::ClientCredentials
            && oauth.client_id.is_none()
        {
            return Err("\"oauth\": \"grant\": \"client_credentials\" needs \"clientId\"".into());
        }
        // The OAuth part enters the definition as a digest: the definition may be logged.
        let oauth_digest = raw.oauth.as_ref().map(|o| {
            use sha2::Digest;
            let text = serde_json::to_vec(o).expect("the oauth config serializes");
            let digest = sha2::Sha256::digest(&text);
            digest.iter().take(8).map(|b| format!("{b:02x}")).collect::<String>()
        });
        let definition =
            format!("{launch:?} {:?} {} {oauth_digest:?} {:?}", raw.scope, raw.invocation_context, raw.credentials);
        Ok(ServerConfig {
            launch,
            scope: raw.scope,
            invocation_context: raw.invocation_context,
            definition,
            oauth: raw.oauth,
            credentials: raw.credentials,
            tools: raw.tools.checked("tools")?,
            prompts: raw.prompts.checked("prompts")?,
            resources: raw.resources,
        })
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExposePrefix {
    /// `<server>__<tool>` always.
    #[default]
    Always,
    /// Prefixed only when more than one server is exposed.
    Conditional,
    /// The upstream's own names; clashes are a config error.
    Never,
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TransportConfig {
    /// `_meta` keys that name a client session, first present wins. Read per request.
    /// `key#field` reads a string field of an object value. The default lists mcpx's own
    /// key, then the keys real hosts send on every `tools/call`: opencode's (in its source,
    /// not yet in a release), Codex's (`session_id` inside its turn metadata, the same
    /// over stdio and HTTP), and Claude Code's (sent only when the host enables it).
    pub session_meta_keys: Vec<String>,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            session_meta_keys: vec![
                "dev.mcpx/session".into(),
                "ai.opencode/sessionID".into(),
                "x-codex-turn-metadata#session_id".into(),
                "claudecode/sessionId".into(),
            ],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct PoolConfig {
    /// An instance nobody used for this long is stopped. Default 5 minutes. (An instance of
    /// a session mcpx derived from a transport stops sooner: when that session ends.)
    #[serde(with = "duration")]
    pub idle_timeout: Duration,
    /// Most live instances of one server. Default 16.
    pub max_instances_per_server: usize,
    /// Most live instances of all servers together. Default 256.
    pub max_instances: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig { idle_timeout: Duration::from_secs(300), max_instances_per_server: 16, max_instances: 256 }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Loopback by default.
    pub host: String,
    /// Default 7750; 0 takes an ephemeral port.
    pub port: u16,
    /// Largest request body accepted on `/mcp`. Default 4 MiB.
    pub max_body_bytes: usize,
    /// Most legacy (handshake-era) HTTP sessions open at once. Default 4096.
    pub max_sessions: usize,
    /// Most legacy HTTP sessions one client (a token's name, an OAuth subject; without
    /// either, the local user) may hold; at the limit its least recently used idle session is ended to make
    /// room. Default 256.
    pub max_sessions_per_client: usize,
    /// A legacy HTTP session unused for this long is ended. Default 1 hour.
    #[serde(with = "duration")]
    pub session_idle_timeout: Duration,
    /// Bearer tokens by client name. When any is set (or `oauth` is), every TCP request
    /// needs one, and the name becomes the caller's principal. The unix socket needs none.
    pub tokens: BTreeMap<String, String>,
    /// Host names (besides loopback ones, which always count) that may appear in a TCP
    /// request's `Host`: a reverse proxy's or a LAN name when mcpx listens beyond
    /// loopback. Any other name is refused (403), as DNS rebinding would send it; a page
    /// served from one of these hosts may also send it as its `Origin`. Default empty.
    pub allowed_hosts: Vec<String>,
    /// Most connections (TCP and the unix socket together) open at once. At the limit a
    /// new connection closes the oldest one that has no request in flight (one still
    /// sending its headers, or idle between requests), so a flood cannot starve a caller.
    /// Clamped at start to what the daemon's open-file limit leaves. Default 1024.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, and how long it may
    /// sit idle between requests; then it is closed. Default 10s.
    #[serde(with = "duration")]
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive, from the end of its headers; then
    /// the connection is closed without an answer. Default 30s.
    #[serde(with = "duration")]
    pub body_read_timeout: Duration,
    /// Callers with access tokens from an OAuth authorization server, beside (or instead
    /// of) `tokens`. Absent by default: no OAuth.
    pub oauth: Option<OAuthResourceConfig>,
    /// Callers with the daemon's owner's rights over the daemon as a whole: they read
    /// everyone's records in the call journal (`/v1/log`, `/v1/stats`) and `/metrics`,
    /// stop the daemon, and log shared upstream credentials in and out; every other caller
    /// reaches only its own. Each is a client key: `token:<a name in tokens>`,
    /// `oauth:<subject>@<issuer>` or `oauth-client:<client_id>@<issuer>`. Default empty.
    pub admins: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            host: "127.0.0.1".into(),
            port: 7750,
            max_body_bytes: 4 * 1024 * 1024,
            max_sessions: 4096,
            max_sessions_per_client: 256,
            session_idle_timeout: Duration::from_secs(3600),
            tokens: BTreeMap::new(),
            allowed_hosts: Vec::new(),
            max_connections: 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            oauth: None,
            admins: Vec::new(),
        }
    }
}

/// `http.oauth`: mcpx as an OAuth 2.1 protected resource. A TCP caller may present an
/// access token from one of `issuers` instead of one of `http.tokens`; mcpx validates it
/// itself (a JWT against the issuer's keys, or an opaque token by introspection) and
/// serves its protected resource metadata (RFC 9728) at
/// `/.well-known/oauth-protected-resource`. Strict: an unknown key here is an error.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct OAuthResourceConfig {
    /// Issuer URLs of the authorization servers whose tokens are accepted, exactly as
    /// their tokens' `iss` says them. Required: at least one.
    pub issuers: Vec<String>,
    /// mcpx's canonical resource URL: what a token's `aud` must contain, and what the
    /// metadata names. Default: the `/mcp` URL mcpx listens on
    /// (`http://127.0.0.1:7750/mcp`); set it behind a proxy, and when `http.host` is
    /// `0.0.0.0` or `::` (then it is required).
    pub resource: Option<String>,
    /// Scopes the metadata lists as `scopes_supported`. Default: those `requiredScopes`
    /// names.
    pub scopes_supported: Vec<String>,
    /// Scopes a token must carry, per route. Default: none beyond a valid token.
    pub required_scopes: RequiredScopes,
    /// JWS algorithms a JWT may be signed with. Default: the asymmetric ones (RS*, PS*,
    /// ES256, ES384, EdDSA). `none` is never accepted; `HS*` only with `hmacSecret`.
    pub algorithms: Vec<String>,
    /// The shared secret for `HS*` tokens (at least 32 bytes). Default: none.
    pub hmac_secret: Option<String>,
    /// Clock skew allowed on `exp` and `nbf`. Default 30s.
    #[serde(with = "duration")]
    pub leeway: Duration,
    /// The claim that names the caller; qualified by the issuer, it becomes the caller's
    /// principal. Default `sub` (and, for a token without one, as an introspection answer
    /// about a client's own token may be, its `client_id`).
    pub principal_claim: String,
    /// Where the issuers' signing keys are, instead of the `jwks_uri` of their metadata
    /// (RFC 8414, then OpenID discovery). Default: discovered. Only with one issuer.
    pub jwks_url: Option<String>,
    /// RFC 7662 introspection for opaque (non-JWT) tokens. Default: none (only JWTs).
    pub introspection: Option<IntrospectionConfig>,
    /// How long fetched signing keys are used before they are fetched again. Default 10m.
    #[serde(with = "duration")]
    pub jwks_lifetime: Duration,
    /// Least time between two fetches of one issuer's keys when a token names a key
    /// mcpx does not know, so a flood of made-up key ids cannot hammer the issuer.
    /// Default 30s.
    #[serde(with = "duration")]
    pub jwks_min_refetch: Duration,
    /// How long a token's validation outcome is reused (never past its `exp`); held by
    /// a digest of the token, never the token. Default 60s.
    #[serde(with = "duration")]
    pub cache_lifetime: Duration,
    /// Most validation outcomes kept; past it the oldest is dropped. Default 4096.
    pub cache_entries: usize,
    /// How long one request to an authorization server (metadata, keys,
    /// introspection) may take; past it the token is refused. Default 5s.
    #[serde(with = "duration")]
    pub request_timeout: Duration,
}

impl Default for OAuthResourceConfig {
    fn default() -> Self {
        OAuthResourceConfig {
            issuers: Vec::new(),
            resource: None,
            scopes_supported: Vec::new(),
            required_scopes: RequiredScopes::default(),
            algorithms: ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"]
                .map(String::from)
                .to_vec(),
            hmac_secret: None,
            leeway: Duration::from_secs(30),
            principal_claim: "sub".into(),
            jwks_url: None,
            introspection: None,
            jwks_lifetime: Duration::from_secs(600),
            jwks_min_refetch: Duration::from_secs(30),
            cache_lifetime: Duration::from_secs(60),
            cache_entries: 4096,
            request_timeout: Duration::from_secs(5),
        }
    }
}

impl OAuthResourceConfig {
    /// What the metadata lists as `scopes_supported`: the configured list, else every
    /// scope a route requires.
    pub fn scopes_supported(&self) -> Vec<String> {
        if !self.scopes_supported.is_empty() {
            return self.scopes_supported.clone();
        }
        let mut all: Vec<String> = self.required_scopes.mcp.iter().chain(&self.required_scopes.v1).cloned().collect();
        all.sort();
        all.dedup();
        all
    }
}

/// `http.oauth.requiredScopes`: the scopes a token needs, by route. A static token needs
/// none. Strict.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct RequiredScopes {
    /// For `/mcp`. Default none.
    pub mcp: Vec<String>,
    /// For the `/v1` API, and every other route but `/mcp` (`/ui`, `/metrics`): each
    /// reveals what `/v1` does. Default none.
    pub v1: Vec<String>,
}

/// `http.oauth.introspection`: an RFC 7662 endpoint and the client mcpx authenticates
/// to it as (HTTP Basic). Strict.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntrospectionConfig {
    /// The introspection endpoint's URL. Required.
    pub endpoint: String,
    /// Required.
    pub client_id: String,
    /// Required.
    pub client_secret: String,
    /// The issuer whose tokens it introspects: an answer naming another `iss` is
    /// refused. Default: the only one of `issuers` (required when there are several).
    pub issuer: Option<String>,
}

impl IntrospectionConfig {
    /// The issuer its answers are attributed to.
    pub fn issuer<'a>(&'a self, oauth: &'a OAuthResourceConfig) -> &'a str {
        self.issuer.as_deref().or(oauth.issuers.first().map(String::as_str)).unwrap_or_default()
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TimeoutConfig {
    /// How long an upstream may leave `server/discover` unanswered before mcpx tries
    /// `initialize`. Default 5s.
    #[serde(with = "duration")]
    pub probe: Duration,
    /// How long the `initialize` handshake may take. Default 30s.
    #[serde(with = "duration")]
    pub handshake: Duration,
    /// How long one upstream request may take. Default 5 minutes.
    #[serde(with = "duration")]
    pub request: Duration,
    /// How long each step of stopping an upstream waits. Default 2s.
    #[serde(with = "duration")]
    pub stop_grace: Duration,
    /// How long a caller may take to answer an upstream's question (`input_required`)
    /// before the state mcpx gave it expires. Default 10 minutes.
    #[serde(with = "duration")]
    pub input_required: Duration,
}

impl Default for TimeoutConfig {
    fn default() -> Self {
        TimeoutConfig {
            probe: Duration::from_secs(5),
            handshake: Duration::from_secs(30),
            request: Duration::from_secs(300),
            stop_grace: Duration::from_secs(2),
            input_required: Duration::from_secs(600),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct LimitConfig {
    /// Longest line read from an upstream's stdout (and a stdio client's). Default 16 MiB.
    pub max_line_bytes: usize,
    /// Most items in one page of an aggregated list. Default 500.
    pub page_size: usize,
    /// Most questions waiting for `/v1` callers (the CLI) to answer. Default 256.
    pub pending_questions: usize,
    /// Most requests one client (a token's name, else a session, else a stdio process)
    /// may have in flight at once; more are refused at once. Default 64.
    pub max_calls_per_client: usize,
    /// Most entries in one JSON-RPC batch (2025-03-26 sessions); a larger batch is
    /// refused whole with one error. Default 32.
    pub max_batch: usize,
    /// Entries of one batch that run at once; the rest wait their turn. Default 4.
    pub batch_concurrency: usize,
    /// Notifications (progress, log messages, list changes) held for one caller's stream
    /// while the caller does not read it; past this the oldest are dropped and counted.
    /// Default 1024.
    pub max_buffered_notifications: usize,
    /// Requests one client may make per second, as a token bucket
    /// (`{"perSecond": 10, "burst": 20}`); one more is refused at once. A client is
    /// counted as for `maxCallsPerClient` (a request naming none counts as the local
    /// user's). Default none: no rate limit. `clients.<client>.limits.rate` overrides it.
    pub rate: Option<RateConfig>,
}

impl Default for LimitConfig {
    fn default() -> Self {
        LimitConfig {
            max_line_bytes: 16 * 1024 * 1024,
            page_size: 500,
            pending_questions: 256,
            max_calls_per_client: 64,
            max_batch: 32,
            batch_concurrency: 4,
            max_buffered_notifications: 1024,
            rate: None,
        }
    }
}

/// What one `mcpx_exec` script may use. Read when each script starts.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecConfig {
    /// Longest a script may run, its tool calls included; a call's `timeoutMs` can only
    /// lower it. Default 30s.
    #[serde(with = "duration")]
    pub timeout: Duration,
    /// Memory one script's engine may allocate. Default 64 MiB.
    pub memory_bytes: usize,
    /// Native stack one script's engine may use. Default 1 MiB.
    pub stack_bytes: usize,
    /// Tool calls one script may make. Default 100.
    pub max_tool_calls: usize,
    /// Console output plus the returned value, in bytes. Default 1 MiB.
    pub max_output_bytes: usize,
    /// Scripts running at once in the daemon; one more is refused. Default 8.
    pub max_concurrent: usize,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            timeout: Duration::from_secs(30),
            memory_bytes: 64 * 1024 * 1024,
            stack_bytes: 1024 * 1024,
            max_tool_calls: 100,
            max_output_bytes: 1024 * 1024,
            max_concurrent: 8,
        }
    }
}

/// What `artifact()` may keep, per session, under the state dir.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ArtifactConfig {
    /// Bytes of artifacts one session may keep, their names and media types included;
    /// storing past it fails. Default 64 MiB.
    pub quota_bytes: u64,
    /// An artifact older than this is deleted. Default 24h.
    #[serde(with = "duration")]
    pub max_age: Duration,
}

impl Default for ArtifactConfig {
    fn default() -> Self {
        ArtifactConfig { quota_bytes: 64 * 1024 * 1024, max_age: Duration::from_secs(24 * 3600) }
    }
}

/// The smallest `journal.maxBytes`: a journal's empty tables and its WAL take a few pages.
const MIN_JOURNAL_BYTES: u64 = 64 * 1024;

/// The call journal (`gateway::journal`), kept in the state dir.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct JournalConfig {
    /// Whether calls are journaled at all. Default true. Turning it off applies at once;
    /// turning it on, at the daemon's next start (the journal is opened then).
    pub enabled: bool,
    /// How much of a call's arguments is kept. Default none.
    pub arguments: JournalArguments,
    /// Records waiting for the writer; past it, a record is dropped (and counted), never
    /// waited for. Default 10000; read at the daemon's start.
    pub queue: usize,
    /// A record older than this is deleted. Default 30d.
    #[serde(with = "duration")]
    pub max_age: Duration,
    /// Past this size the oldest records are deleted, and the space given back: the files
    /// on disk (the database, its WAL and shared memory) stay within twice it. Default
    /// 256 MiB, at least 64 KiB.
    pub max_bytes: u64,
    /// Longest text a record keeps of a name, a URI, a server, a session label: past it, a
    /// prefix, the text's length and a digest. Default 1024, at least 64.
    pub max_text_bytes: usize,
    /// Longest arguments a record keeps (`redacted` or `whole`), cut the same way. Default
    /// 16384, at least 64.
    pub max_arguments_bytes: usize,
}

impl Default for JournalConfig {
    fn default() -> Self {
        JournalConfig {
            enabled: true,
            arguments: JournalArguments::None,
            queue: 10_000,
            max_age: Duration::from_secs(30 * 24 * 3600),
            max_bytes: 256 * 1024 * 1024,
            max_text_bytes: 1024,
            max_arguments_bytes: 16 * 1024,
        }
    }
}

/// Traces over OTLP (`gateway::traces`). Read at the daemon's start.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The base URL of an OTLP/HTTP collector (`/v1/traces` is appended), as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` would name it. Default none: then the standard
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT` variables, and
    /// without them no traces.
    pub otlp_endpoint: Option<String>,
}

/// The `"egress"` section: destinations a remote party may point mcpx at beyond the
/// default. An upstream's metadata, its `WWW-Authenticate` hints and redirects (of it or
/// its authorization server) may lead only to public addresses, or to addresses of the
/// kind the configured URL names by address (an upstream at 127.0.0.1 may name loopback
/// endpoints); never to mcpx's own listening addresses. An issuer's JWKS and the traces
/// collector's redirects follow the same rule without this list.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct EgressConfig {
    /// Host names, IP addresses and CIDR networks (`"auth.corp"`, `"10.0.0.0/8"`) that an
    /// upstream's learned endpoints may lead to as well, loopback, link-local or private.
    /// Default none.
    pub allow: Vec<String>,
}

impl EgressConfig {
    /// `allow`, parsed (the config was checked: an entry that does not parse is skipped).
    pub fn allowed(&self) -> std::sync::Arc<[mcpx_http::Allowed]> {
        self.allow.iter().filter_map(|a| mcpx_http::Allowed::parse(a).ok()).collect()
    }
}

/// The `"tasks"` section: tasks upstreams hand callers through mcpx (`gateway::tasks`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TaskConfig {
    /// Longest a task stays reachable (and its instance held) after it is created,
    /// whatever ttl the upstream offers; the caller is told the shorter. Default 1h.
    #[serde(with = "duration")]
    pub max_ttl: Duration,
    /// Most tasks mcpx tracks at once, across callers; past it a new task is refused
    /// (-32603 naming the setting) and the upstream's task cancelled. Default 1000.
    pub max: usize,
    /// Most of those one client (a token's name, an OAuth subject, the local user) may
    /// hold, so no client can take every slot from the others. Default 100.
    pub max_per_client: usize,
    /// For a 2026 caller that declared the tasks extension, a tool call not answered
    /// within this long becomes a task mcpx runs itself (the call goes on under its
    /// lease). Zero, the default, never does.
    #[serde(with = "duration")]
    pub after: Duration,
    /// How long the HTTP server running a task may stay out of reach (every poll of it
    /// failing) before mcpx gives the task up as failed: a stdio instance's exit is seen
    /// at once, a remote server's end only as silence. Default 30s.
    #[serde(with = "duration")]
    pub unreachable_for: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        TaskConfig {
            max_ttl: Duration::from_secs(3600),
            max: 1000,
            max_per_client: 100,
            after: Duration::ZERO,
            unreachable_for: Duration::from_secs(30),
        }
    }
}

/// The `"cluster"` section: this daemon is one node of a cluster that shares a Redis
/// (`gateway::cluster`, `docs/cluster.md`). Strict: an unknown key here is an error.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterConfig {
    /// The Redis every node shares: `redis://host:port/db` (`rediss://` for TLS, with
    /// `user:password@` where it needs them). Required; `${NAME}` reads the daemon's
    /// environment.
    pub redis: String,
    /// This node's name, unique in the cluster. Default: the machine's host name.
    #[serde(default)]
    pub node_id: Option<String>,
    /// The base URL other nodes reach this node at (`http://10.0.0.5:7750`): forwarded
    /// requests go to `<url>/mcp`. Default: the address this daemon listens on.
    #[serde(default)]
    pub url: Option<String>,
    /// How long an instance's lease lasts without renewal: when a node dies, the keys it
    /// owned are free again within this long. Renewed every third of it. Default 10s;
    /// at least 1s.
    #[serde(default = "ClusterConfig::default_lease_ttl", with = "duration")]
    pub lease_ttl: Duration,
    /// Where `global` instances live: `per-cluster` (default; one for the whole cluster),
    /// or `per-node` (one on each node: for stateless servers, no forwarding).
    #[serde(default)]
    pub global: GlobalPlacement,
    /// The secret every node shares: it authenticates node-to-node requests and seals
    /// what any node must be able to open. At least 32 characters; `${NAME}` reads the
    /// daemon's environment (keep it out of the file).
    pub secret: String,
    /// Longest wait for one Redis command (and for a connection to it); past it the
    /// request that needed it fails with an error naming Redis. Default 1s.
    #[serde(default = "ClusterConfig::default_redis_timeout", with = "duration")]
    pub redis_timeout: Duration,
    /// Most subscriptions this node's handshake-era sessions may hold at once to resources
    /// of instances other nodes own, all sessions together (each one a stream from that
    /// node, so one of the owner's connections); one more is refused. Default 256.
    #[serde(default = "ClusterConfig::default_max_relayed_subscriptions")]
    pub max_relayed_subscriptions: usize,
}

/// Everything but the secret.
impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("redis", &self.redis)
            .field("node_id", &self.node_id)
            .field("url", &self.url)
            .field("lease_ttl", &self.lease_ttl)
            .field("global", &self.global)
            .field("redis_timeout", &self.redis_timeout)
            .field("max_relayed_subscriptions", &self.max_relayed_subscriptions)
            .finish_non_exhaustive()
    }
}

impl ClusterConfig {
    fn default_lease_ttl() -> Duration {
        Duration::from_secs(10)
    }

    fn default_redis_timeout() -> Duration {
        Duration::from_secs(1)
    }

    fn default_max_relayed_subscriptions() -> usize {
        256
    }
}

/// `cluster.global`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GlobalPlacement {
    /// One instance of a `global` server in the whole cluster, owned by one node.
    #[default]
    PerCluster,
    /// One on every node, never forwarded: for servers that keep no state.
    PerNode,
}

/// What a journal record keeps of a call's arguments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JournalArguments {
    /// Nothing.
    #[default]
    None,
    /// The arguments with every secret-shaped value masked (`crate::redact`), a script
    /// kept as its length and digest.
    Redacted,
    /// A SHA-256 of the arguments: equal calls can be told apart from others, not read.
    Hashed,
    /// The arguments as they came.
    Whole,
}

/// Why a config file was refused: where, and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}:{column}: {message}")]
    Invalid { path: PathBuf, line: usize, column: usize, message: String },
    #[error("{path}: {message}")]
    Rule { path: PathBuf, message: String },
    /// Someone other than the user may have written it (`crate::provenance`).
    #[error(
        "{path}: not read: {why}, so someone else could have written it; make it and its folders yours and closed to others (chmod go-w), or choose another config"
    )]
    Untrusted { path: PathBuf, why: String },
}

impl ConfigError {
    /// `Untrusted` when someone other than the user may have written `path`; `Read` when
    /// there is no such file to check.
    pub fn check_provenance(path: &Path) -> Result<(), ConfigError> {
        Self::read_trusted(path).map(drop)
    }

    /// The bytes of `path`, read from the very file whose provenance was checked
    /// (`crate::provenance::open_trusted`): never a name checked and then read again.
    pub fn read_trusted(path: &Path) -> Result<Vec<u8>, ConfigError> {
        use crate::provenance::{Refused, open_trusted};
        use std::io::Read;
        let read = |source| ConfigError::Read { path: path.into(), source };
        let mut file = open_trusted(path).map_err(|refused| match refused {
            Refused::Read(source) => read(source),
            Refused::Untrusted(why) => ConfigError::Untrusted { path: path.into(), why },
        })?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(read)?;
        Ok(bytes)
    }
}

impl Config {
    /// Reads and parses the config at `path`, refused if it is not the user's alone.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let bytes = ConfigError::read_trusted(path)?;
        let text = String::from_utf8(bytes).map_err(|e| ConfigError::Read {
            path: path.into(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
        })?;
        Config::parse(&text, path)
    }

    /// Parses and checks a config; `path` is only used to name the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let config: Config = serde_json::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.into(),
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
        })?;
        config.check().map_err(|(message, at)| match locate(text, &at) {
            Some((line, column)) => ConfigError::Invalid { path: path.into(), line, column, message },
            None => ConfigError::Rule { path: path.into(), message },
        })?;
        Ok(config)
    }

    /// Rules that span more than one value. A failure says what is wrong and the JSON
    /// string (a key or a value) where it is, so the error can name the line.
    fn check(&self) -> Result<(), (String, String)> {
        for name in self.mcp_servers.keys() {
            if RESERVED_SERVER_NAMES.contains(&name.as_str()) {
                return Err((format!("server name {name:?} is reserved by mcpx; rename the server"), name.clone()));
            }
            let valid = !name.is_empty()
                && !name.contains("__")
                && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
            if !valid {
                let why = format!(
                    "server name {name:?} must be letters, digits, '_', '-' or '.', without \"__\" (it prefixes tool names)"
                );
                return Err((why, name.clone()));
            }
        }
        for name in &self.expose {
            if !self.mcp_servers.contains_key(name) {
                return Err((format!("\"expose\" names {name:?}, which is not in \"mcpServers\""), "expose".into()));
            }
        }
        let loopback = matches!(self.http.host.as_str(), "127.0.0.1" | "localhost" | "::1");
        if !loopback && self.http.tokens.is_empty() && self.http.oauth.is_none() {
            let why = format!(
                "\"http.host\" is {:?}, which is not loopback: set \"http.tokens\" or \"http.oauth\" so that only callers with a token get in",
                self.http.host
            );
            return Err((why, "host".into()));
        }
        if let Some((name, _)) = self.http.tokens.iter().find(|(_, t)| t.len() < 16) {
            return Err((format!("token {name:?} in \"http.tokens\" must be at least 16 characters"), name.clone()));
        }
        if let Some(oauth) = &self.http.oauth {
            check_oauth(oauth, &self.http.host)?;
        }
        if self.http.max_connections == 0 {
            return Err(("\"http.maxConnections\" must be at least 1".into(), "maxConnections".into()));
        }
        if let Some(workers) = self.workers.filter(|n| !(1..=MAX_WORKERS).contains(n)) {
            return Err((format!("\"workers\" is {workers}: it must be from 1 to {MAX_WORKERS}"), "workers".into()));
        }
        for (key, value) in
            [("headerReadTimeout", self.http.header_read_timeout), ("bodyReadTimeout", self.http.body_read_timeout)]
        {
            if value.is_zero() {
                return Err((format!("\"http.{key}\" must be longer than 0"), key.into()));
            }
        }
        if self.exec.memory_bytes < 1024 * 1024 {
            return Err(("\"exec.memoryBytes\" must be at least 1048576 (1 MiB)".into(), "memoryBytes".into()));
        }
        if self.exec.stack_bytes < 64 * 1024 {
            return Err(("\"exec.stackBytes\" must be at least 65536 (64 KiB)".into(), "stackBytes".into()));
        }
        if self.pool.max_instances_per_server == 0 {
            return Err(("\"pool.maxInstancesPerServer\" must be at least 1".into(), "maxInstancesPerServer".into()));
        }
        if self.pool.max_instances == 0 {
            return Err(("\"pool.maxInstances\" must be at least 1".into(), "maxInstances".into()));
        }
        if self.limits.max_calls_per_client == 0 {
            return Err(("\"limits.maxCallsPerClient\" must be at least 1".into(), "maxCallsPerClient".into()));
        }
        if self.journal.max_bytes < MIN_JOURNAL_BYTES {
            let why = format!("\"journal.maxBytes\" must be at least {MIN_JOURNAL_BYTES} (64 KiB)");
            return Err((why, "maxBytes".into()));
        }
        for (key, value) in
            [("maxTextBytes", self.journal.max_text_bytes), ("maxArgumentsBytes", self.journal.max_arguments_bytes)]
        {
            if value < crate::redact::MIN_BOUND {
                let why = format!(
                    "\"journal.{key}\" must be at least {} (a cut text keeps its length and digest)",
                    crate::redact::MIN_BOUND
                );
                return Err((why, key.into()));
            }
        }
        self.check_clients()?;
        for entry in &self.egress.allow {
            if let Err(why) = mcpx_http::Allowed::parse(entry) {
                return Err((format!("\"egress.allow\": {why}"), entry.clone()));
            }
        }
        if let Some(cluster) = &self.cluster {
            check_cluster(cluster)?;
        }
        Ok(())
    }

    pub fn server(&self, name: &str) -> Option<&ServerConfig> {
        self.mcp_servers.get(name)
    }
}

/// Replaces each `${NAME}` with the daemon's environment variable; an unset one is named.
pub(crate) fn expand_env(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let Some(len) = rest[start + 2..].find('}') else { break };
        let var = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        out.push_str(&std::env::var(var).map_err(|_| var.to_owned())?);
        rest = &rest[start + 3 + len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The rules of `cluster`, as [`Config::check`] reports them.
fn check_cluster(cluster: &ClusterConfig) -> Result<(), (String, String)> {
    if !["redis://", "rediss://", "redis+unix://", "unix://"].iter().any(|s| cluster.redis.starts_with(s))
        && !cluster.redis.starts_with("${")
    {
        return Err(("\"cluster.redis\" must be a redis:// or rediss:// URL".into(), "redis".into()));
    }
    if cluster.lease_ttl < Duration::from_secs(1) {
        return Err(("\"cluster.leaseTtl\" must be at least 1s".into(), "leaseTtl".into()));
    }
    if cluster.redis_timeout.is_zero() {
        return Err(("\"cluster.redisTimeout\" must be longer than 0".into(), "redisTimeout".into()));
    }
    // A lease taken by a command that took the whole timeout must still be worth serving.
    if cluster.lease_ttl < 2 * cluster.redis_timeout {
        return Err(("\"cluster.leaseTtl\" must be at least twice \"cluster.redisTimeout\"".into(), "leaseTtl".into()));
    }
    if !cluster.secret.starts_with("${") && cluster.secret.len() < 32 {
        return Err(("\"cluster.secret\" must be at least 32 characters".into(), "secret".into()));
    }
    if let Some(id) = &cluster.node_id
        && (id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)))
    {
        return Err(("\"cluster.nodeId\" must be 1 to 64 letters, digits, '_', '-' or '.'".into(), "nodeId".into()));
    }
    if let Some(url) = &cluster.url
        && !(url.starts_with("http://") || url.starts_with("https://") || url.starts_with("${"))
    {
        return Err(("\"cluster.url\" must be an http:// or https:// URL".into(), "url".into()));
    }
    Ok(())
}

/// The rules of `http.oauth`, as [`Config::check`] reports them.
fn check_oauth(oauth: &OAuthResourceConfig, host: &str) -> Result<(), (String, String)> {
    let web_url = |url: &str| url.starts_with("https://") || url.starts_with("http://");
    if oauth.issuers.is_empty() {
        return Err(("\"http.oauth.issuers\" must name at least one authorization server".into(), "oauth".into()));
    }
    for issuer in &oauth.issuers {
        if !web_url(issuer) || issuer.contains(['?', '#']) {
            let why = format!("issuer {issuer:?} must be an http(s) URL without a query or fragment");
            return Err((why, issuer.clone()));
        }
    }
    match &oauth.resource {
        Some(resource) if !web_url(resource) || resource.contains('#') => {
            let why = format!("\"http.oauth.resource\" {resource:?} must be an http(s) URL without a fragment");
            return Err((why, resource.clone()));
        }
        None if host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_unspecified()) => {
            let why = format!(
                "\"http.host\" is {host:?}, which names no address a caller can use: set \"http.oauth.resource\" to the URL callers reach mcpx's /mcp at"
            );
            return Err((why, "oauth".into()));
        }
        _ => {}
    }
    for alg in &oauth.algorithms {
        let known = matches!(
            alg.as_str(),
            "RS256" | "RS384" | "RS512" | "PS256" | "PS384" | "PS512" | "ES256" | "ES384" | "EdDSA"
        );
        let hmac = matches!(alg.as_str(), "HS256" | "HS384" | "HS512");
        if hmac && oauth.hmac_secret.as_ref().is_none_or(|s| s.len() < 32) {
            let why = format!("algorithm {alg:?} needs \"http.oauth.hmacSecret\" of at least 32 bytes");
            return Err((why, alg.clone()));
        }
        if !known && !hmac {
            let why = format!(
                "algorithm {alg:?} is not one mcpx verifies: RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA, or HS256, HS384, HS512 with a secret"
            );
            return Err((why, alg.clone()));
        }
    }
    if oauth.algorithms.is_empty() {
        return Err(("\"http.oauth.algorithms\" must name at least one algorithm".into(), "algorithms".into()));
    }
    // RFC 6749 §3.3: a scope is printable ASCII without space, `"` or `\`; anything else
    // could not be named in a challenge.
    let scopes = oauth.scopes_supported.iter().chain(&oauth.required_scopes.mcp).chain(&oauth.required_scopes.v1);
    for scope in scopes {
        if scope.is_empty() || !scope.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\') {
            return Err((format!("scope {scope:?} is not a valid OAuth scope (RFC 6749 §3.3)"), scope.clone()));
        }
    }
    if oauth.principal_claim.is_empty() {
        return Err(("\"http.oauth.principalClaim\" must name a claim".into(), "principalClaim".into()));
    }
    if let Some(url) = &oauth.jwks_url {
        if !web_url(url) {
            return Err((format!("\"http.oauth.jwksUrl\" {url:?} must be an http(s) URL"), url.clone()));
        }
        if oauth.issuers.len() > 1 {
            let why = "\"http.oauth.jwksUrl\" names one issuer's keys: configure one issuer with it".into();
            return Err((why, "jwksUrl".into()));
        }
    }
    if let Some(introspection) = &oauth.introspection {
        if !web_url(&introspection.endpoint) {
            let why = format!("introspection endpoint {:?} must be an http(s) URL", introspection.endpoint);
            return Err((why, introspection.endpoint.clone()));
        }
        match &introspection.issuer {
            Some(issuer) if !oauth.issuers.contains(issuer) => {
                let why = format!("introspection issuer {issuer:?} is not one of \"http.oauth.issuers\"");
                return Err((why, issuer.clone()));
            }
            None if oauth.issuers.len() > 1 => {
                let why = "\"http.oauth.introspection.issuer\" must say whose tokens it introspects".into();
                return Err((why, "introspection".into()));
            }
            _ => {}
        }
    }
    for (key, value) in [
        ("jwksLifetime", oauth.jwks_lifetime),
        ("cacheLifetime", oauth.cache_lifetime),
        ("requestTimeout", oauth.request_timeout),
    ] {
        if value.is_zero() {
            return Err((format!("\"http.oauth.{key}\" must be longer than 0"), key.into()));
        }
    }
    Ok(())
}

/// Parses a duration as written in the config: `500ms`, `30s`, `5m`, `2h`, `1h 30m`, or a
/// bare number of milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    duration::parse(text)
}

/// Line and column (1-based) of the first occurrence of `"<needle>"` in the file.
fn locate(text: &str, needle: &str) -> Option<(usize, usize)> {
    let quoted = serde_json::to_string(needle).ok()?;
    let at = text.find(&quoted)?;
    let line = text[..at].matches('\n').count() + 1;
    let column = at - text[..at].rfind('\n').map_or(0, |n| n + 1) + 1;
    Some((line, column))
}

/// serde_json appends " at line L column C"; the error already says where.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

// Tool policy and per-client access: the per-server `tools`, `prompts` and `resources`
// keys, the `clients` section and `limits.rate`. What they mean is `policy.rs`.

/// A server's `"tools"` or `"prompts"`: which items callers see, and under which name and
/// description. Every pattern and key is the upstream's own name. Strict.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ItemPolicy {
    /// Globs (`*` any run of characters, `?` one); when present, only matching items are
    /// shown. Default: absent, every item.
    pub allow: Option<Vec<String>>,
    /// Globs of items never shown; deny wins over allow. Default none.
    pub deny: Vec<String>,
    /// `{"upstreamName": "shownName"}`: the item is listed and called by the shown name
    /// only. Default none.
    pub rename: BTreeMap<String, String>,
    /// `{"upstreamName": "description shown"}`. Default none.
    pub describe: BTreeMap<String, String>,
}

impl ItemPolicy {
    /// The policy, or why its renames cannot work; `key` names it in the error.
    fn checked(self, key: &str) -> Result<ItemPolicy, String> {
        let mut targets: BTreeMap<&str, &str> = BTreeMap::new();
        for (from, to) in &self.rename {
            if to.is_empty() || to.chars().any(|c| c.is_control() || c.is_whitespace()) {
                return Err(format!(
                    "\"{key}.rename\" gives {from:?} the name {to:?}: a name must be non-empty, without spaces or controls"
                ));
            }
            if let Some(other) = targets.insert(to, from) {
                return Err(format!("\"{key}.rename\" gives both {other:?} and {from:?} the name {to:?}"));
            }
        }
        Ok(self)
    }
}

/// A server's `"resources"`: which resources and templates callers see, by URI glob
/// (the upstream's own URI or URI template). Strict.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct UriPolicy {
    /// Globs; when present, only matching URIs are shown. Default: absent, every one.
    pub allow: Option<Vec<String>>,
    /// Globs never shown; deny wins over allow. Default none.
    pub deny: Vec<String>,
}

/// One entry of `"clients"`: what a client may use. Strict.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ClientConfig {
    /// The servers whose tools, prompts and resources the client sees. Default: absent,
    /// every server.
    pub servers: Option<Vec<String>>,
    /// Globs over `<server>/<tool>` (the upstream's tool name). Default: every tool.
    pub tools: ToolAccess,
    pub limits: ClientLimits,
    /// Globs over absolute paths (`**` any number of directories, `*` and `?` within one)
    /// of the directories the client may name as where it works (its roots), for `cwd`,
    /// `repo` and `worktree` scoped servers. Default none: its requests to those servers
    /// degrade to one instance per call. The owner (`local`) names any directory.
    pub roots: Vec<String>,
}

/// A client's `"tools"`: globs over `<server>/<tool>`; deny wins. Strict.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ToolAccess {
    pub allow: Option<Vec<String>>,
    pub deny: Vec<String>,
}

/// A client's `"limits"`. Strict.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ClientLimits {
    /// Overrides `limits.rate` for this client.
    pub rate: Option<RateConfig>,
}

/// A token bucket: `burst` requests at once, refilled at `perSecond`. Strict.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateConfig {
    pub per_second: f64,
    pub burst: u32,
}

impl Config {
    /// Whether a client key (`local`, `token:<name>`, `oauth:<subject>@<issuer>`) names a
    /// caller this config admits.
    fn names_caller(&self, key: &str) -> bool {
        match key.split_once(':') {
            _ if key == "local" => true,
            Some(("token", name)) => self.http.tokens.contains_key(name),
            Some(("oauth" | "oauth-client", rest)) => rest.rsplit_once('@').is_some_and(|(name, issuer)| {
                !name.is_empty() && self.http.oauth.as_ref().is_some_and(|o| o.issuers.iter().any(|i| i == issuer))
            }),
            _ => false,
        }
    }

    /// The rules of `clients`, `http.admins` and `limits.rate`, as [`Config::check`] reports them.
    fn check_clients(&self) -> Result<(), (String, String)> {
        let rates =
            self.clients.iter().filter_map(|(k, c)| c.limits.rate.map(|r| (format!("clients.{k}.limits.rate"), r)));
        for (setting, rate) in self.limits.rate.map(|r| ("limits.rate".to_owned(), r)).into_iter().chain(rates) {
            if !(rate.per_second.is_finite() && rate.per_second > 0.0) || rate.burst == 0 {
                let why = format!("\"{setting}\" needs \"perSecond\" above 0 and \"burst\" of at least 1");
                return Err((why, "rate".into()));
            }
        }
        if let Some(key) = self.http.admins.iter().find(|k| *k == "local" || !self.names_caller(k)) {
            let why = format!(
                "\"http.admins\" entry {key:?} names no caller: use \"token:<a name in http.tokens>\", \"oauth:<subject>@<an issuer in http.oauth.issuers>\" or \"oauth-client:<client_id>@<an issuer>\" (the owner reads everything already)"
            );
            return Err((why, key.clone()));
        }
        for (key, client) in &self.clients {
            if !self.names_caller(key) {
                let why = format!(
                    "client {key:?} names no caller: use \"local\", \"token:<a name in http.tokens>\", \"oauth:<subject>@<an issuer in http.oauth.issuers>\" or \"oauth-client:<client_id>@<an issuer>\""
                );
                return Err((why, key.clone()));
            }
            if key == "local" && !client.roots.is_empty() {
                let why =
                    "\"clients.local.roots\": the local user names any directory; roots are granted to other clients"
                        .to_owned();
                return Err((why, "roots".into()));
            }
            for grant in &client.roots {
                if let Err(why) = check_grant(grant) {
                    return Err((format!("\"clients.{key}.roots\": {why}"), grant.clone()));
                }
            }
            for server in client.servers.iter().flatten() {
                if !self.mcp_servers.contains_key(server) {
                    let why = format!("client {key:?} names server {server:?}, which is not in \"mcpServers\"");
                    return Err((why, server.clone()));
                }
            }
        }
        Ok(())
    }
}

/// Why a `clients.<client>.roots` grant cannot be used: it must be an absolute path without
/// `.` or `..` components.
fn check_grant(grant: &str) -> Result<(), String> {
    if !grant.starts_with('/') {
        return Err(format!("{grant:?} is not an absolute path"));
    }
    if grant.split('/').any(|c| c == "." || c == "..") {
        return Err(format!("{grant:?} has a \".\" or \"..\" component"));
    }
    Ok(())
}

/// Durations as people write them (`500ms`, `30s`, `5m`, `2h`, `1h 30m`: whatever
/// `humantime` reads), or a bare number of milliseconds.
pub(crate) mod duration {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, de::Error};

    /// The longest duration accepted: 366 days.
    pub const MAX_MS: u64 = 366 * 24 * 3_600_000;

    pub fn parse(text: &str) -> Result<Duration, String> {
        let text = text.trim();
        // A bare number is milliseconds, as in the JSON number form; humantime wants a unit.
        let parsed = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            text.parse().map(Duration::from_millis).map_err(|e| e.to_string())
        } else {
            humantime::parse_duration(text).map_err(|e| e.to_string())
        };
        let duration = parsed.map_err(|e| format!("{text:?} is not a duration like \"30s\" or \"5m\": {e}"))?;
        // A year is plenty for any timeout; far beyond it, deadlines overflow the clock.
        if duration > Duration::from_millis(MAX_MS) {
            return Err(format!("{text:?} is too long (at most a year)"));
        }
        Ok(duration)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Millis(u64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Millis(ms) if ms > MAX_MS => Err(D::Error::custom(format!("{ms} ms is too long (at most a year)"))),
            Raw::Millis(ms) => Ok(Duration::from_millis(ms)),
            Raw::Text(t) => parse(&t).map_err(D::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, Path::new("mcpx.json"))
    }

    #[test]
    fn a_host_config_with_extra_keys_is_accepted() {
        let c = parse(
            r#"{"mcpServers": {"git": {"type": "stdio", "command": "mcp-server-git", "scope": "repo"}}, "inputs": []}"#,
        )
        .unwrap();
        assert_eq!(c.mcp_servers["git"].scope, Scope::Repo);
        assert!(c.mcp_servers["git"].invocation_context);
        assert_eq!(
            c.transport.session_meta_keys,
            ["dev.mcpx/session", "ai.opencode/sessionID", "x-codex-turn-metadata#session_id", "claudecode/sessionId"]
        );
        assert_eq!(c.pool.idle_timeout, Duration::from_secs(300));
    }

    #[test]
    fn a_misspelt_key_inside_an_mcpx_section_is_refused_not_ignored() {
        // `http.tokns` ignored would leave the daemon open to every caller it admits.
        for section in ["http", "pool", "transport", "timeouts", "limits"] {
            let err = parse(&format!(r#"{{"mcpServers": {{}}, "{section}": {{"tokns": {{"ci": "x"}}}}}}"#))
                .expect_err(section);
            assert!(err.to_string().contains("unknown field `tokns`"), "{section}: {err}");
        }
    }

    #[test]
    fn the_journals_bounds_have_defaults_and_a_floor_named_when_refused() {
        let c = parse("{}").unwrap();
        assert_eq!(
            (c.journal.max_bytes, c.journal.max_text_bytes, c.journal.max_arguments_bytes),
            (256 << 20, 1024, 16384)
        );
        let c = parse(r#"{"journal": {"maxBytes": 65536, "maxTextBytes": 64, "maxArgumentsBytes": 64}}"#).unwrap();
        assert_eq!((c.journal.max_bytes, c.journal.max_text_bytes, c.journal.max_arguments_bytes), (65536, 64, 64));
        for (key, value) in [("maxBytes", 65535), ("maxTextBytes", 63), ("maxArgumentsBytes", 0)] {
            let e = parse(&format!(r#"{{"journal": {{"{key}": {value}}}}}"#)).unwrap_err().to_string();
            assert!(e.contains(&format!("\"journal.{key}\" must be at least")), "{key}: {e}");
        }
    }

    #[test]
    fn workers_are_a_positive_count_and_default_to_half_the_cpus() {
        assert_eq!(parse(r#"{"workers": 3}"#).unwrap().workers, Some(3));
        assert_eq!(parse("{}").unwrap().workers, None);
        for refused in [0, super::MAX_WORKERS + 1, 1_000_000] {
            let err = parse(&format!("{{\n  \"workers\": {refused}\n}}")).unwrap_err().to_string();
            assert!(err.starts_with("mcpx.json:2:") && err.contains("must be from 1 to 1024"), "{err}");
        }
        let cpus = std::thread::available_parallelism().unwrap().get();
        assert_eq!(super::default_workers(), cpus.div_ceil(2), "{cpus} CPUs");
    }

    #[test]
    fn egress_allow_takes_hosts_addresses_and_networks_and_names_a_bad_entry_and_its_line() {
        assert!(parse("{}").unwrap().egress.allowed().is_empty(), "none by default");
        let c = parse(r#"{"egress": {"allow": ["auth.corp", "10.0.0.7", "fd00::/8"]}}"#).unwrap();
        assert_eq!(c.egress.allowed().len(), 3);
        let err = parse("{\n  \"egress\": {\"allow\": [\"10.0.0.0/33\"]}\n}").unwrap_err().to_string();
        assert!(
            err.starts_with("mcpx.json:2:") && err.contains("\"egress.allow\": \"10.0.0.0/33\" is neither"),
            "{err}"
        );
        let err = parse(r#"{"egress": {"alow": []}}"#).unwrap_err().to_string();
        assert!(err.contains("unknown field `alow`"), "{err}");
    }

    #[test]
    fn a_bad_scope_names_the_line() {
        let err = parse("{\n  \"mcpServers\": {\n    \"x\": {\"command\": \"a\", \"scope\": \"sesion\"}\n  }\n}")
            .unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("mcpx.json:3:"), "{text}");
        assert!(text.contains("sesion"), "{text}");
    }

    #[test]
    fn a_server_needs_a_command_or_a_url() {
        let err = parse(r#"{"mcpServers": {"x": {"args": []}}}"#).unwrap_err();
        assert!(err.to_string().contains("needs a non-empty \"command\""), "{err}");
    }

    #[test]
    fn a_rule_violation_names_the_line_too() {
        let err =
            parse("{\n  \"mcpServers\": {\"a\": {\"command\": \"x\"}},\n  \"expose\": [\"nosuch\"]\n}").unwrap_err();
        assert!(err.to_string().starts_with("mcpx.json:3:3: \"expose\" names \"nosuch\""), "{err}");
    }

    #[test]
    fn reserved_and_ambiguous_names_are_refused() {
        assert!(parse(r#"{"mcpServers": {"artifacts": {"command": "a"}}}"#).is_err());
        assert!(parse(r#"{"mcpServers": {"a__b": {"command": "a"}}}"#).is_err());
        assert!(parse(r#"{"expose": ["nope"]}"#).is_err());
    }

    #[test]
    fn listening_beyond_loopback_needs_a_token() {
        assert!(parse(r#"{"http": {"host": "0.0.0.0"}}"#).is_err());
        assert!(parse(r#"{"http": {"host": "0.0.0.0", "tokens": {"ci": "0123456789abcdef"}}}"#).is_ok());
        assert!(parse(r#"{"http": {"tokens": {"ci": "short"}}}"#).is_err());
    }

    #[test]
    fn oauth_needs_an_issuer_refuses_unsafe_algorithms_and_unknown_keys() {
        let c = parse(r#"{"http": {"oauth": {"issuers": ["https://as.example"]}}}"#).unwrap();
        let oauth = c.http.oauth.unwrap();
        assert_eq!(oauth.principal_claim, "sub");
        assert!(oauth.algorithms.iter().all(|a| !a.starts_with("HS") && a != "none"), "{:?}", oauth.algorithms);
        assert!(parse(r#"{"http": {"oauth": {}}}"#).is_err(), "no issuer");
        assert!(parse(r#"{"http": {"oauth": {"issuers": ["ftp://as"]}}}"#).is_err());
        assert!(parse(r#"{"http": {"oauth": {"issuers": ["https://a"], "algorithms": ["none"]}}}"#).is_err());
        assert!(parse(r#"{"http": {"oauth": {"issuers": ["https://a"], "algorithms": ["HS256"]}}}"#).is_err());
        let hs = r#"{"http": {"oauth": {"issuers": ["https://a"], "algorithms": ["HS256"], "hmacSecret": "0123456789abcdef0123456789abcdef"}}}"#;
        assert!(parse(hs).is_ok());
        assert!(parse(r#"{"http": {"oauth": {"issuers": ["https://a"], "isuers": []}}}"#).is_err(), "strict");
        let spaced = r#"{"http": {"oauth": {"issuers": ["https://a"], "requiredScopes": {"mcp": ["a b"]}}}}"#;
        assert!(parse(spaced).is_err(), "a scope with a space");
        let two = r#"{"http": {"oauth": {"issuers": ["https://a", "https://b"], "jwksUrl": "https://a/jwks"}}}"#;
        assert!(parse(two).is_err(), "one jwksUrl for two issuers");
    }

    #[test]
    fn listening_beyond_loopback_with_oauth_needs_no_static_token_but_a_resource_url() {
        assert!(parse(r#"{"http": {"host": "0.0.0.0", "oauth": {"issuers": ["https://a"]}}}"#).is_err());
        let ok = r#"{"http": {"host": "0.0.0.0", "oauth": {"issuers": ["https://a"], "resource": "https://mcpx.example/mcp"}}}"#;
        assert!(parse(ok).is_ok());
        assert!(parse(r#"{"http": {"host": "192.168.1.5", "oauth": {"issuers": ["https://a"]}}}"#).is_ok());
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(duration::parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration::parse("5m"), Ok(Duration::from_secs(300)));
        assert!(duration::parse("5 parsecs").is_err());
        // Found by fuzz/config: an hour count this large overflowed the millisecond count.
        assert!(duration::parse("18446744073709551615h").is_err());
        assert!(parse(r#"{"timeouts": {"request": 18446744073709551615}}"#).is_err());
        let c = parse(r#"{"pool": {"idleTimeout": "2s"}, "timeouts": {"probe": 250}}"#).unwrap();
        assert_eq!(c.pool.idle_timeout, Duration::from_secs(2));
        assert_eq!(c.timeouts.probe, Duration::from_millis(250));
    }

    #[test]
    fn every_duration_form_the_readme_promises_still_reads() {
        // `500ms`, `30s`, `5m`, `2h`, a number of milliseconds (also as a string), with or
        // without a space before the unit: what the config has always accepted.
        for (text, ms) in [
            ("500ms", 500),
            ("30s", 30_000),
            ("5m", 300_000),
            ("2h", 7_200_000),
            ("500", 500),
            ("0", 0),
            ("0ms", 0),
            ("5 m", 300_000),
            (" 30s ", 30_000),
            ("8784h", duration::MAX_MS),
        ] {
            assert_eq!(duration::parse(text), Ok(Duration::from_millis(ms)), "{text:?}");
        }
        assert_eq!(duration::parse("1h 30m"), Ok(Duration::from_secs(5400)));
        for refused in ["", "s", "-5s", "5 parsecs", "8785h", "367d", "99999999999999999999", "1.5.5s"] {
            assert!(duration::parse(refused).is_err(), "{refused:?} was accepted");
        }
        let c = parse(r#"{"exec": {"timeout": "1500"}, "artifacts": {"maxAge": "2d"}}"#).unwrap();
        assert_eq!(c.exec.timeout, Duration::from_millis(1500));
        assert_eq!(c.artifacts.max_age, Duration::from_secs(2 * 86_400));
    }

    #[test]
    fn a_servers_oauth_entry_is_read_strictly_and_checked() {
        let path = Path::new("mcpx.json");
        let ok = r#"{"mcpServers": {"docs": {"url": "https://docs.example/mcp",
            "oauth": {"clientId": "c", "clientSecret": "${S}", "scopes": ["read"]}}},
            "oauth": {"redirectPort": 8765, "loginTimeout": "2m", "maxStepUps": 1}}"#;
        let config = Config::parse(ok, path).unwrap();
        let oauth = config.mcp_servers["docs"].oauth.clone().unwrap();
        assert_eq!(oauth.client_id.as_deref(), Some("c"));
        assert_eq!(oauth.grant, mcpx_oauth::Grant::AuthorizationCode);
        assert_eq!(config.oauth.redirect_port, 8765);
        assert_eq!(config.oauth.login_timeout, Duration::from_secs(120));
        assert!(!format!("{oauth:?}").contains("${S}"), "the secret stays out of Debug");
        for (bad, why) in [
            (r#"{"mcpServers": {"d": {"url": "https://d/mcp", "oauth": {"clientID": "c"}}}}"#, "clientID"),
            (
                r#"{"mcpServers": {"d": {"url": "https://d/mcp", "oauth": {"grant": "client_credentials"}}}}"#,
                "clientId",
            ),
            (r#"{"mcpServers": {"d": {"command": "x", "oauth": {}}}}"#, "HTTP servers"),
            (r#"{"mcpServers": {"d": {"url": "https://d/mcp", "credentials": "user"}}}"#, "scope"),
            (r#"{"oauth": {"loginTimeOut": "1m"}}"#, "loginTimeOut"),
        ] {
            let e = Config::parse(bad, path).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let user = r#"{"mcpServers": {"d": {"url": "https://d/mcp", "credentials": "user", "scope": "session"}}}"#;
        assert_eq!(Config::parse(user, path).unwrap().mcp_servers["d"].credentials, Credentials::User);
    }

    #[test]
    fn no_cluster_section_means_one_daemon_and_the_section_is_read_strictly() {
        let path = Path::new("mcpx.json");
        assert_eq!(Config::parse("{}", path).unwrap().cluster, None);
        let secret = "0123456789abcdef0123456789abcdef";
        let ok = format!(r#"{{"cluster": {{"redis": "redis://127.0.0.1:6379", "secret": "{secret}"}}}}"#);
        let cluster = Config::parse(&ok, path).unwrap().cluster.unwrap();
        assert_eq!(cluster.lease_ttl, Duration::from_secs(10));
        assert_eq!(cluster.global, GlobalPlacement::PerCluster);
        assert_eq!(cluster.redis_timeout, Duration::from_secs(1));
        assert_eq!(cluster.max_relayed_subscriptions, 256);
        assert!(!format!("{cluster:?}").contains(secret), "the secret stays out of Debug");
        let full = format!(
            r#"{{"cluster": {{"redis": "redis://r:6379/2", "secret": "{secret}", "nodeId": "n-1",
               "url": "http://10.0.0.5:7750", "leaseTtl": "3s", "global": "per-node"}}}}"#
        );
        let cluster = Config::parse(&full, path).unwrap().cluster.unwrap();
        assert_eq!((cluster.lease_ttl, cluster.global), (Duration::from_secs(3), GlobalPlacement::PerNode));
        for (bad, why) in [
            (format!(r#"{{"cluster": {{"redis": "redis://r", "secret": "{secret}", "leaseTTL": "3s"}}}}"#), "leaseTTL"),
            (format!(r#"{{"cluster": {{"secret": "{secret}"}}}}"#), "redis"),
            (r#"{"cluster": {"redis": "redis://r"}}"#.to_owned(), "secret"),
            (r#"{"cluster": {"redis": "redis://r", "secret": "short"}}"#.to_owned(), "32 characters"),
            (format!(r#"{{"cluster": {{"redis": "http://r", "secret": "{secret}"}}}}"#), "redis://"),
            (format!(r#"{{"cluster": {{"redis": "redis://r", "secret": "{secret}", "leaseTtl": "10ms"}}}}"#), "1s"),
            (
                format!(
                    r#"{{"cluster": {{"redis": "redis://r", "secret": "{secret}", "leaseTtl": "3s", "redisTimeout": "2s"}}}}"#
                ),
                "twice",
            ),
            (format!(r#"{{"cluster": {{"redis": "redis://r", "secret": "{secret}", "global": "one"}}}}"#), "per-node"),
            (format!(r#"{{"cluster": {{"redis": "redis://r", "secret": "{secret}", "nodeId": "a b"}}}}"#), "nodeId"),
        ] {
            let e = Config::parse(&bad, path).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
