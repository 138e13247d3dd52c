//! The client half of mcpx: one live connection to one upstream MCP server instance.
//!
//! An [`Upstream`] owns a stdio child process (in its own process group) or talks to an
//! HTTP server, speaks the era the server answered the probe in, remaps request ids so
//! many callers can share one instance, and stops a child the way the spec asks (close
//! stdin, wait, SIGTERM, wait, SIGKILL). Who is asking is the gateway's business: a
//! request carries only an opaque [`Caller`], so that a handshake-era upstream's question
//! reaches the caller it is for and no other (`questions`).
//!
//! The modules, in dependency order: each uses only those above it, and this file only
//! declares them and names the public API.
//!
//! - `error`: [`UpstreamError`], every way a connection or request fails.
//! - `spec`: [`Spec`], how to reach an instance, and its [`Timeouts`].
//! - `caller`: whom a request serves ([`Caller`]) and who hears about it ([`Listener`]).
//! - `changes`: which notifications say the server changed, handed on untagged, and the
//!   task statuses it announces.
//! - `lines`: reading one bounded line at a time, keeping the edges of one too long.
//! - `handshake`: the probe and `initialize` messages, and the [`ServerFacts`] they yield.
//! - `questions`: whom an upstream's question (sampling, elicitation, roots) is for.
//! - `stdio`: launching a child in its own process group, and stopping the group.
//! - `pipe`: a stdio connection (ids, cancellation, the era probe over the pipe), on `stdio`.
//! - `client`: the HTTP client the HTTP connections share (pool, TLS, redirects).
//! - `http`: an HTTP connection (either era, sessions, event streams), on `client`.
//! - `connection`: [`Upstream`], one face over `pipe` and `http`, adding each request's
//!   envelope for the era.

mod caller;
mod changes;
mod client;
mod connection;
mod error;
mod handshake;
mod http;
pub mod lines;
mod pipe;
mod questions;
mod spec;
mod stdio;

pub use caller::{Ask, Caller, LOG_LEVELS, Listener, Meter};
pub use changes::CHANGE_NOTIFICATIONS;
pub use connection::{ResourceWatch, Upstream};
pub use error::{LostLine, UpstreamError};
pub use handshake::ServerFacts;
pub use spec::{Authorization, HttpSpec, Spec, StdioSpec, Timeouts};
