//! Config snippets and result readers for the `fakemcp` test upstream.

use serde_json::{Value, json};

use crate::client::Reply;
use crate::paths;

/// A `mcpServers` entry launching `fakemcp --tag <tag>` (plus `extra` flags) with `scope`.
pub fn fakemcp(scope: &str, tag: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--tag".to_owned(), tag.to_owned()];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    json!({"command": paths::fakemcp(), "args": args, "scope": scope})
}

/// A config with these servers and nothing else.
pub fn config(servers: &[(&str, Value)]) -> Value {
    let servers: serde_json::Map<String, Value> =
        servers.iter().map(|(name, server)| ((*name).to_owned(), server.clone())).collect();
    json!({"mcpServers": servers})
}

/// What fakemcp's `whoami` tool says about the process that answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Whoami {
    /// Random per process: two calls with the same id reached the same process.
    pub instance: String,
    pub pid: u32,
    /// `tools/call` requests this process has answered, this one included.
    pub calls: u64,
    pub era: String,
    /// The process's working directory.
    pub cwd: Option<String>,
}

impl Whoami {
    /// Reads a successful `whoami` result (relayed verbatim through `mcpx_call`).
    #[track_caller]
    pub fn of(reply: &Reply) -> Whoami {
        Whoami::from_structured(reply.structured())
    }

    /// Reads the `structuredContent` of a `whoami` result, however it arrived.
    #[track_caller]
    pub fn from_structured(s: &Value) -> Whoami {
        let field = |name: &str| s.get(name).unwrap_or_else(|| panic!("whoami without {name:?}: {s}"));
        Whoami {
            instance: field("instance").as_str().expect("instance is a string").to_owned(),
            pid: field("pid").as_u64().expect("pid is a number") as u32,
            calls: field("calls").as_u64().expect("calls is a number"),
            era: field("era").as_str().unwrap_or_default().to_owned(),
            cwd: s["cwd"].as_str().map(str::to_owned),
        }
    }
}
