//! mcpx as an OAuth 2.1 client of its HTTP upstreams, as the MCP authorization spec asks
//! (2025-11-25 and 2026-07-28, with the 2025-03-26 fallbacks): discovery from a 401's
//! challenge, client registration, the authorization code flow with PKCE through a
//! loopback redirect, refresh, scope step-up, the client credentials grant, and the token
//! store. Nothing here knows MCP messages or other mcpx crates but `mcpx_http`, the client
//! it sends with: the upstream asks an [`Authorizer`] for a bearer and tells it what the
//! server answered.
//!
//! Hand-written over that client rather than the `oauth2` crate: the MCP order of discovery
//! (resource metadata, then issuer metadata with path insertion and issuer checks),
//! registration (pre-registered, metadata document URL, dynamic) and the `resource`
//! parameter on every request are the bulk of the work and are outside that crate, while
//! what it would add (three form posts) is a few lines each.
//!
//! Modules, each using only those above it: `error`, `challenge` (`WWW-Authenticate`),
//! `http` (the bounded client for authorization requests), `discovery`, `store` (files
//! 0600), `shared` (a cluster's store, its values sealed), `token` (registration, token
//! endpoint, revocation, PKCE), `loopback` (the redirect listener), `authorizer` (logins,
//! tokens and the decisions between them).
//!
//! Never: a token, code, verifier or client secret in a log line, an error or a status;
//! a bearer sent anywhere but the server URL it was issued for.

mod authorizer;
pub mod challenge;
pub mod discovery;
mod error;
mod http;
mod loopback;
pub mod shared;
pub mod store;
mod token;

pub use authorizer::{
    AuthState, AuthStatus, Authorizer, Grant, Login, LoginState, ServerOAuth, Settings, Target, check_iss,
    select_scopes,
};
pub use challenge::Challenge;
pub use error::OAuthError;
pub use store::CredentialKey;
