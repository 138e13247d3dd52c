//! Support for mcpx's end-to-end tests: a real `mcpx daemon` per test, a client for both
//! protocol eras whose every received frame is checked against the published MCP schema,
//! the `fakemcp` fixture, and the Python SDK as a third-party peer.
//!
//! Nothing here knows mcpx's internals: it sees the daemon only through its process, its
//! state file, its log and its HTTP endpoint, as a user would.

pub mod answering;
pub mod authorization;
pub mod client;
pub mod cluster;
pub mod daemon;
pub mod fake_http;
pub mod fixtures;
pub mod git;
pub mod home;
pub mod hosts;
pub mod node;
pub mod paths;
pub mod planted;
pub mod process;
pub mod python;
pub mod schema;
pub mod serve;
pub mod socket;
pub mod tap;
pub mod upstreams;

pub use client::{LegacySession, Modern, Reply, assert_serving};
pub use daemon::Daemon;
pub use fake_http::FakeHttp;
pub use fixtures::{Whoami, config, fakemcp};
pub use home::{CliRun, Home};
pub use process::{alive, poll, processes_with, tag, wait_for_exit, wait_until_gone};
pub use serve::{Answer, Serve};
