//! mcpx end to end: the real `mcpx daemon` against `fakemcp` and real MCP peers.
//!
//! Tests are grouped `<revision>::<area>::<requirement>`, named after what they prove.
//! Every test starts its own daemon (own port, own state directory), so they run in
//! parallel. Every frame the daemon writes is schema-checked by the support client.
//! Build the binaries first: `cargo build -p mcpx -p fakemcp && cargo test -p mcpx-e2e`.

mod r2025_03_26;
mod r2025_11_25;
mod r2026_07_28;
