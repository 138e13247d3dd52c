//! MCP 2025-11-25 (handshake era): legacy Streamable HTTP sessions.

mod cancel;
mod hosts;
mod interop;
mod interop_inspector;
mod interop_ts_sdk;
mod logging;
mod questions;
mod questions_shared;
mod real_upstreams;
mod serve;
mod session_end;
mod standalone;
mod tasks;
mod transport;
