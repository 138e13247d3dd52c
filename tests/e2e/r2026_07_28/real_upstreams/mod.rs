//! Real upstreams and faulty ones behind mcpx, seen by a 2026-07-28 caller:
//! the reference `server-everything` (handshake era, stdio and streamableHttp), `mcp-server-git`, tool
//! definitions with fields mcpx does not know, a session-scoped server's resources, and
//! upstreams that hang, print garbage, die at start, cannot be reached or cut their
//! streams. The handshake-era callers' side is in `r2025_11_25::real_upstreams`.

mod everything;
mod everything_http;
mod faults;
mod git;
mod session_resources;
mod subscriptions;
mod verbatim;
