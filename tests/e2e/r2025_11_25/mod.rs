//! MCP 2025-11-25 (handshake era): legacy Streamable HTTP sessions.

mod cancel;
mod interop;
mod interop_inspector;
mod interop_ts_sdk;
mod questions;
mod real_upstreams;
mod serve;
mod standalone;
mod transport;
