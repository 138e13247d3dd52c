//! Config parsing: any file either loads or is refused with a path and a reason; never a
//! panic (the daemon re-reads the file on every change and must keep the last good one).
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use mcpx_gateway::Config;
use mcpx_gateway::config::{ConfigError, parse_duration};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = parse_duration(text);
    match Config::parse(text, Path::new("fuzz.json")) {
        Ok(config) => {
            assert!(config.pool.max_instances_per_server >= 1);
            for name in config.mcp_servers.keys() {
                assert!(!name.is_empty() && !name.contains("__") && name != "mcpx" && name != "artifacts");
            }
        }
        Err(ConfigError::Invalid { line, column, message, .. }) => {
            // serde_json counts columns from 0 at the end of input.
            assert!(line >= 1, "{line}:{column}");
            assert!(!message.is_empty());
        }
        Err(ConfigError::Rule { message, .. }) => assert!(!message.is_empty()),
        Err(ConfigError::Read { .. }) => unreachable!("parse reads no file"),
    }
});
