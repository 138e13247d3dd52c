//! MCP 2025-11-25 (handshake era): legacy Streamable HTTP sessions.

mod interop;
mod transport;
mod questions;
