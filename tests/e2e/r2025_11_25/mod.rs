//! MCP 2025-11-25 (handshake era): legacy Streamable HTTP sessions.

mod interop;
mod interop_inspector;
mod interop_ts_sdk;
mod hosts;
mod transport;
mod questions;
mod serve;
mod logging;
mod session_end;
mod standalone;
mod cancel;
mod real_upstreams;
mod questions_shared;
