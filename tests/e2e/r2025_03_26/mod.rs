//! MCP 2025-03-26: the oldest handshake revision mcpx answers, the only one with batches.

mod transport;
