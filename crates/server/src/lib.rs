//! The mcpx front ends: how a connection plus a frame becomes an admitted request, the
//! daemon that serves them, and the relay `mcpx serve` runs in front of it. Nothing here
//! picks an instance or talks to an upstream: that is the gateway's job.
//!
//! The modules, each depending only on those above it (no module imports one below it):
//!
//! - **Shared steps.** `socket`: the unix socket and who is on the other end (`Peer`).
//!   `state`: the private state dir and the daemon's record in it. `dispatch`: ask the
//!   gateway, shape the outcome for the caller's revision, make the response frame.
//!   `caller`: the identity step, the transport a front end describes becoming a
//!   `CallContext`, once per request. `listen`: a `subscriptions/listen` on the wire.
//!   `questions`: an upstream's questions put to a handshake-era caller. `pending`:
//!   questions waiting for `/v1` callers. `reply`: writing JSON-RPC as an HTTP response
//!   (JSON or SSE), and the one place that decides its HTTP status. `listener`: the
//!   accept loop (connection cap, read timeouts).
//! - **Eras**, transport-free: `legacy` (what a request means in the handshake era:
//!   `initialize`, then frames and batches under what it negotiated), `modern` (a 2026
//!   request, self-contained: admission steps 2-6 and its answer). They get a
//!   `caller::Caller`, never a front end.
//! - **Shared state.** `session`: handshake-era HTTP sessions. `front`: what the front
//!   ends share (`Front`: the gateway, the sessions, the `/v1` questions, the daemon's
//!   `Life`). `bearer`: OAuth access tokens callers bring, validated. `resource_metadata`:
//!   mcpx as a protected resource (its RFC 9728 metadata, its challenges). `admission`:
//!   the step every HTTP request passes first (Origin, Host, token, content type).
//!   `reach`: the route table's one column that says who may use each route (any
//!   caller, for what is its own; the daemon's owner and `http.admins`; another node).
//! - **Front ends.** `http`: Streamable HTTP at `/mcp`, which decides each request's era
//!   (`http::legacy` carries a handshake-era session, `http::modern` a 2026 request).
//!   `stdio`: MCP over lines, for `mcpx serve` (relayed over the socket by
//!   `GET /v1/stdio`) and `--no-daemon`. `api`: the `/v1` API for the CLI and scripts.
//! - **The daemon.** `daemon`: start (lock, settings, listeners, socket, record), the
//!   router, and the one shutdown sequence.
//! - **The client's end.** `relay`: `mcpx serve`'s pump between its stdio and a relayed
//!   `stdio` stream, failing the requests in flight and replaying a handshake-era
//!   `initialize` when the daemon goes away. It needs no other module here.

mod admission;
pub mod api;
mod bearer;
mod caller;
mod cluster;
pub mod daemon;
mod dispatch;
mod front;
mod http;
mod legacy;
mod listen;
pub mod listener;
mod metrics;
mod modern;
mod pending;
mod questions;
mod reach;
pub mod relay;
mod relayed;
mod reply;
mod resource_metadata;
mod session;
pub mod socket;
pub mod state;
pub mod stdio;
mod ui;
pub mod v1;
