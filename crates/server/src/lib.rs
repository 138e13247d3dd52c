//! The mcpx front ends: how a connection plus a frame becomes an admitted request.
//!
//! `listener` accepts connections (limits, timeouts); `admission` is the one step every
//! request on every route passes first (Origin, Host, token, content type).
//! `http` serves Streamable HTTP at `/mcp` for both eras on one endpoint: it decides each
//! request's era (the Streamable HTTP transport of 2026-07-28), validates it in the order the spec gives, resolves
//! who is asking, and shapes every result for the caller's revision. `session` holds the
//! handshake-era sessions; `state` is the daemon's record on disk.
//! Nothing here picks an instance or talks to an upstream: that is the gateway's job.

mod admission;
pub mod api;
mod dispatch;
pub mod http;
mod legacy;
mod listen;
pub mod listener;
mod modern;
mod pending;
mod questions;
mod reply;
mod session;
pub mod socket;
pub mod state;
pub mod stdio;
pub mod v1;

pub use api::Daemon;
pub use http::{Front, router};
pub use socket::Peer;
