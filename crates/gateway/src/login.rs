//! Logging in to HTTP upstreams that ask for OAuth: who may start a login, for which
//! credential, and what a caller hears when a call needs one.
//!
//! A server's shared credential (the default) serves every caller, so only the daemon's
//! owner (`Principal::Local`: the unix socket, or loopback without tokens) and the
//! callers `http.admins` names may log it in or out: any other token holder who could
//! start that login could put its own account behind everyone's server (login CSRF /
//! account fixation). With `"credentials": "user"` each principal logs in its own
//! credential.
//!
//! A call that needs a login fails with `UpstreamError::LoginNeeded`. A 2025-11-25 caller
//! that declared URL-mode elicitation and may log the credential in gets -32042
//! (`URLElicitationRequiredError`) carrying a freshly begun login's URL; any other caller
//! gets the plain error naming `mcpx auth login <server>`, and no URL.

use std::time::Duration;

use mcpx_oauth::{AuthStatus, Authorizer, Login, LoginState};
use mcpx_protocol::{Revision, RpcError};
use mcpx_upstream::UpstreamError;
use serde_json::{Value, json};

use crate::config::{Credentials, Launch};
use crate::error::Error;
use crate::identity::Principal;
use crate::instances::{login_target, oauth_settings};
use crate::{CallContext, Gateway};

/// JSON-RPC code of `URLElicitationRequiredError` (2025-11-25).
const URL_ELICITATION_REQUIRED: i64 = -32042;

impl Gateway {
    /// Logs in to HTTP upstreams with this authorizer (the daemon's, over its state dir).
    pub fn authorize_with(&self, authorizer: Authorizer) {
        authorizer.set_settings(oauth_settings(&self.settings.config()));
        let _ = self.instances.oauth.set(authorizer);
    }

    fn authorizer(&self) -> Result<&Authorizer, Error> {
        self.instances
            .oauth
            .get()
            .ok_or_else(|| Error::internal("this mcpx has no token store: OAuth logins need the daemon"))
    }

    /// The credential of `server` that `principal` may log in, if it may.
    fn target_for(&self, server: &str, principal: &Principal) -> Result<mcpx_oauth::Target, Error> {
        let config = self.settings.config();
        let access = crate::policy::Access::of_principal(&config, principal);
        let Some(entry) = config.server(server).filter(|_| access.server(server)) else {
            let names = access.servers();
            return Err(Error::params(format!("unknown server {server:?}; servers: {}", names.join(", "))));
        };
        if entry.credentials == Credentials::Shared && !crate::policy::acts_for_daemon(&config, principal) {
            return Err(Error::params(format!(
                "only the daemon's owner or a caller in http.admins may log in or out server {server:?}: its credential is shared by every caller"
            )));
        }
        login_target(server, entry, principal)?.ok_or_else(|| {
            Error::params(format!("server {server:?} is not an HTTP server: there is nothing to log in to"))
        })
    }

    /// Begins a login of `server`'s credential for `principal`: the URL a person opens.
    pub async fn begin_login(&self, server: &str, principal: &Principal) -> Result<Login, Error> {
        let target = self.target_for(server, principal)?;
        let authorizer = self.authorizer()?;
        authorizer.set_settings(oauth_settings(&self.settings.config()));
        authorizer.begin(&target).await.map_err(|e| Error::Upstream(UpstreamError::from_oauth(server, e)))
    }

    /// Where login `id` stands, waiting up to `within` for it to finish. Only a caller
    /// who may log that credential in may watch it (the owner and `http.admins`, any): a login's
    /// id is also the `elicitationId` its caller is shown, no secret. To anyone else it
    /// is as unknown as an id never issued.
    pub async fn wait_login(&self, id: &str, principal: &Principal, within: Duration) -> Result<LoginState, Error> {
        let authorizer = self.authorizer()?;
        let daemon_wide = crate::policy::acts_for_daemon(&self.settings.config(), principal);
        let theirs = authorizer
            .login_key(id)
            .is_some_and(|key| daemon_wide || key.principal.as_deref() == Some(principal.tag().as_str()));
        if !theirs {
            return Err(Error::params(format!("no login {id:?} is under way")));
        }
        authorizer.wait(id, within).await.map_err(|e| Error::params(e.to_string()))
    }

    /// The credential of each HTTP server `principal` may use (a server its `clients`
    /// entry leaves out is not named): logged in, needing a login, or not asking. A
    /// server's shared credential, or with `"credentials": "user"` the principal's own.
    pub async fn auth_status(&self, principal: &Principal) -> Vec<AuthStatus> {
        let Ok(authorizer) = self.authorizer() else { return Vec::new() };
        let config = self.settings.config();
        let access = crate::policy::Access::of_principal(&config, principal);
        let targets: Vec<mcpx_oauth::Target> = config
            .mcp_servers
            .iter()
            .filter(|(name, s)| matches!(s.launch, Launch::Http { .. }) && access.server(name))
            .filter_map(|(name, s)| login_target(name, s, principal).ok().flatten())
            .collect();
        authorizer.status(&targets).await
    }

    /// Forgets `server`'s credential for `principal` (revoking it where the server can).
    pub async fn logout(&self, server: &str, principal: &Principal) -> Result<bool, Error> {
        let target = self.target_for(server, principal)?;
        self.authorizer()?.logout(&target.key).await.map_err(|e| Error::internal(e.to_string()))
    }

    /// What the caller hears of a call that needs a login: -32042 with a login's URL when
    /// it can take one (see the module comment), the error as it was otherwise.
    pub(crate) async fn login_needed(&self, ctx: &CallContext, error: Error) -> Error {
        let Error::Upstream(UpstreamError::LoginNeeded { server }) = &error else { return error };
        let declared = ctx.client_capabilities.pointer("/elicitation/url").is_some_and(Value::is_object);
        if ctx.revision != Revision::V2025_11_25 || !declared {
            return error;
        }
        let login = match self.begin_login(server, &ctx.identity.principal).await {
            Ok(login) => login,
            Err(e) => {
                tracing::debug!(server, "no login URL for the caller: {e}");
                return error;
            }
        };
        let message = format!("Log in to {server} to continue (mcpx auth login {server} does the same).");
        Error::Relayed(
            RpcError::new(URL_ELICITATION_REQUIRED, format!("server {server:?} needs you to log in")).with_data(
                json!({ "elicitations": [{
                    "mode": "url",
                    "elicitationId": login.id,
                    "url": login.url,
                    "message": message,
                }] }),
            ),
        )
    }
}
