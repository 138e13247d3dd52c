//! Which instance answers a caller, and the instances themselves: the server's scope and
//! the caller's identity give a key (`scope`), the pool holds one instance per key and
//! starts, reaps and stops them (`pool`), and a handshake-era session's change stream
//! joins each instance started for it (`watch`). Routing asks here for a lease; nothing
//! here knows MCP methods.

use mcpx_upstream::{Authorization, HttpSpec, Spec, StdioSpec, Timeouts};
use serde_json::json;

use crate::cluster::{Claim, Cluster};
use crate::config::{Config, Credentials, Launch, ServerConfig, expand_env};
use crate::context::CallContext;
use crate::error::{Elsewhere, Error};
use crate::identity::{Identity, Principal};
use crate::pool::{Lease, Pool, PoolError};
use crate::scope::{InstanceKey, Owner, Scope, Scoper};
use crate::watch::SessionStreams;

#[derive(Default)]
pub(crate) struct Instances {
    pub pool: Pool,
    pub scoper: Scoper,
    /// Handshake-era sessions' change streams, by the instances they follow.
    pub streams: SessionStreams,
    /// Their subscriptions to resources of instances other nodes own.
    pub relayed: crate::watch::RelayedSubscriptions,
    /// Logs in to HTTP upstreams that ask for OAuth, when the daemon gave it one.
    pub oauth: std::sync::OnceLock<mcpx_oauth::Authorizer>,
    /// The cluster this node belongs to, when it is one: which keys it may serve.
    pub cluster: std::sync::OnceLock<std::sync::Arc<Cluster>>,
}

impl Instances {
    /// The instance of `server` that `pick` names for this caller, started if need be.
    pub async fn lease(&self, config: &Config, ctx: &CallContext, server: &str, pick: Pick) -> Result<Lease, Error> {
        let Some(server_config) = config.server(server) else {
            let names: Vec<&str> = config.mcp_servers.keys().map(String::as_str).collect();
            let known = if names.is_empty() { "none are configured".to_owned() } else { names.join(", ") };
            return Err(Error::params(format!("unknown server {server:?}; servers: {known}"))
                .with_data(json!({ "server": server, "servers": names })));
        };
        let listing = matches!(pick, Pick::Listing);
        let mut key = match pick {
            Pick::At(owner) => InstanceKey { server: server.to_owned(), owner },
            Pick::Caller => self.scoper.key(server, server_config.scope, &ctx.identity, &ctx.call_id),
            Pick::Listing => self.scoper.listing_key(server, server_config.scope, &ctx.identity, &ctx.call_id),
        };
        let mut fence = None;
        if let Some(cluster) = self.cluster.get().filter(|c| c.clusters(&key)) {
            // Boxed, as the stream's join below: each is rare, or done once per instance, and
            // held inline would make every call's future (copied as it moves) larger.
            match Box::pin(cluster.claim(&key)).await.map_err(|e| Error::internal(e.to_string()))? {
                Claim::Mine { fence: held } => fence = Some(held),
                // A listing carries nothing of the caller: this node's lister answers it.
                Claim::Elsewhere(_) if listing => {
                    key =
                        InstanceKey { server: server.to_owned(), owner: Owner::Lister(ctx.identity.principal.clone()) };
                }
                Claim::Elsewhere(node) => {
                    return Err(Error::Elsewhere(Box::new(Elsewhere { node: node.id, url: node.url, key })));
                }
            }
        }
        let spec = || {
            let mut spec = upstream_spec(config, server, server_config, &ctx.identity)
                .map_err(|e| PoolError::Config(e.to_string()))?;
            if let (Spec::Http(http), Some(authorizer)) = (&mut spec, self.oauth.get()) {
                authorizer.set_settings(oauth_settings(config));
                let target = login_target(server, server_config, &ctx.identity.principal)
                    .map_err(|e| PoolError::Config(e.to_string()))?;
                http.auth = target.map(|target| Authorization { authorizer: authorizer.clone(), target });
            }
            Ok(spec)
        };
        let acquire = || {
            self.pool.acquire(
                &key,
                &server_config.definition,
                spec,
                config.pool.max_instances_per_server,
                config.pool.max_instances,
            )
        };
        let to_error = |e| match e {
            PoolError::Upstream(e) => Error::from(e),
            other => Error::internal(other.to_string()),
        };
        let mut lease = acquire().await.map_err(to_error)?;
        if let Some(fence) = fence {
            // An instance serves under the lease it started under only: one this node kept
            // past that lease (it ran out while Redis could not renew it) starts afresh.
            if lease.fence().is_some_and(|started| started < fence) {
                tracing::warn!(instance = %key, fence, "the lease this instance ran under ran out: starting it afresh");
                lease.retire();
                drop(lease);
                lease = acquire().await.map_err(to_error)?;
            }
            lease.started_under(fence);
        }
        // A stream that opened before the start joins it here (one that opens later finds
        // it running); before the call is sent, so a change it provokes is not missed.
        if lease.started_it() {
            Box::pin(self.streams.join(&lease)).await;
        }
        Ok(lease)
    }
}

impl Instances {
    /// The node that serves `server`'s instance for this caller, when another node of the
    /// cluster does; `None` when this node serves it (taking its lease if it was free) or
    /// the key is local by nature.
    pub async fn owner_elsewhere(
        &self,
        config: &Config,
        ctx: &CallContext,
        server: &str,
        at: Option<Owner>,
    ) -> Result<Option<crate::cluster::Node>, Error> {
        let (Some(cluster), Some(server_config)) = (self.cluster.get(), config.server(server)) else { return Ok(None) };
        let key = match at {
            Some(owner) => InstanceKey { server: server.to_owned(), owner },
            None => self.scoper.key(server, server_config.scope, &ctx.identity, &ctx.call_id),
        };
        if !cluster.clusters(&key) {
            return Ok(None);
        }
        match cluster.claim(&key).await.map_err(|e| Error::internal(e.to_string()))? {
            Claim::Mine { .. } => Ok(None),
            Claim::Elsewhere(node) => Ok(Some(node)),
        }
    }
}

/// Which instance of a server a lease is for.
pub(crate) enum Pick {
    /// The one the caller's identity selects.
    Caller,
    /// The one that lists for the caller (a lister serves listings, nothing else).
    Listing,
    /// The one with this owner: the instance that asked the question a retry answers.
    At(Owner),
}

fn upstream_spec(config: &Config, name: &str, server: &ServerConfig, who: &Identity) -> Result<Spec, Error> {
    let timeouts = Timeouts {
        probe: config.timeouts.probe,
        handshake: config.timeouts.handshake,
        request: config.timeouts.request,
        stop_grace: config.timeouts.stop_grace,
    };
    let expand = |value: &str| {
        expand_env(value).map_err(|var| {
            Error::internal(format!("server {name:?}: ${{{var}}} is not set in the daemon's environment"))
        })
    };
    match &server.launch {
        Launch::Stdio { command, args, env, cwd } => {
            // A server scoped to where the caller works starts there, unless the config says where.
            let named_by_caller = cwd.is_none() && matches!(server.scope, Scope::Cwd | Scope::Repo | Scope::Worktree);
            let cwd = if named_by_caller { who.cwd.clone() } else { cwd.clone() };
            let env = env.iter().map(|(k, v)| Ok((k.clone(), expand(v)?))).collect::<Result<_, Error>>()?;
            Ok(Spec::Stdio(StdioSpec {
                server: name.to_owned(),
                command: command.clone(),
                args: args.clone(),
                env,
                // The owner's own directory is entered as named; another principal's
                // was checked in resolved form and must still be that one.
                cwd_without_symlinks: named_by_caller && cwd.is_some() && who.principal != Principal::Local,
                cwd,
                timeouts,
                max_line_bytes: config.limits.max_line_bytes,
            }))
        }
        Launch::Http { url, headers } => {
            let headers = headers.iter().map(|(k, v)| Ok((k.clone(), expand(v)?))).collect::<Result<_, Error>>()?;
            Ok(Spec::Http(HttpSpec {
                server: name.to_owned(),
                url: url.clone(),
                headers,
                timeouts,
                max_line_bytes: config.limits.max_line_bytes,
                auth: None,
                allow: config.egress.allowed(),
            }))
        }
    }
}

/// The daemon-wide OAuth settings, as the authorizer takes them.
pub(crate) fn oauth_settings(config: &Config) -> mcpx_oauth::Settings {
    let (egress, config) = (&config.egress, &config.oauth);
    mcpx_oauth::Settings {
        egress_allow: egress.allowed(),
        client_metadata_url: config.client_metadata_url.clone(),
        redirect_port: config.redirect_port,
        login_timeout: config.login_timeout,
        max_step_ups: config.max_step_ups,
        refresh_before: config.refresh_before,
        client_name: config.client_name.clone(),
        refresh_lock: config.refresh_lock,
    }
}

/// Which credential of an HTTP server serves `principal`, and how it is configured;
/// `None` for a stdio server. The shared credential unless the server says
/// `"credentials": "user"`.
pub(crate) fn login_target(
    name: &str,
    server: &ServerConfig,
    principal: &Principal,
) -> Result<Option<mcpx_oauth::Target>, Error> {
    let Launch::Http { url, .. } = &server.launch else { return Ok(None) };
    let expand = |value: &Option<String>| {
        value
            .as_deref()
            .map(|v| {
                expand_env(v).map_err(|var| {
                    Error::internal(format!("server {name:?}: ${{{var}}} is not set in the daemon's environment"))
                })
            })
            .transpose()
    };
    let oauth = server.oauth.clone().unwrap_or_default();
    let config = mcpx_oauth::ServerOAuth {
        client_secret: expand(&oauth.client_secret)?,
        private_key: expand(&oauth.private_key)?,
        ..oauth
    };
    // A principal's tag names it and no other (`Principal::tag`); the local user's is empty.
    let principal = match (server.credentials, principal) {
        (Credentials::Shared, _) => None,
        (Credentials::User, Principal::Local) => Some("local".to_owned()),
        (Credentials::User, other) => Some(other.tag()),
    };
    let key = mcpx_oauth::CredentialKey { server: name.to_owned(), principal };
    Ok(Some(mcpx_oauth::Target { key, url: url.clone(), config }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn environment_references_are_expanded_and_a_missing_one_is_named() {
        // SAFETY: set before any thread of this test reads the environment.
        unsafe { std::env::set_var("MCPX_TEST_TOKEN", "s3cret") };
        assert_eq!(expand_env("Bearer ${MCPX_TEST_TOKEN}").as_deref(), Ok("Bearer s3cret"));
        assert_eq!(expand_env("no refs, {braces} and $DOLLAR").as_deref(), Ok("no refs, {braces} and $DOLLAR"));
        assert_eq!(expand_env("${MCPX_TEST_UNSET_VARIABLE}"), Err("MCPX_TEST_UNSET_VARIABLE".to_owned()));
    }
}
