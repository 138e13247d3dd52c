//! Who this process is: the identity tests use to tell upstream processes apart.
//!
//! The instance id is random per process, so a test can see whether two calls reached the
//! same upstream or a restarted one; the call counter shows whether calls were pooled, and
//! the listing counter how often a client listed the tools.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

pub struct Instance {
    /// 16 lowercase hex characters, fixed at start.
    pub id: String,
    pub pid: u32,
    /// Reported as `serverInfo.name` in both eras.
    pub name: String,
    pub version: &'static str,
    tool_calls: AtomicU64,
    tool_lists: AtomicU64,
    /// Tools listed besides the standard ones, by these exact names (`--tool-named`, and
    /// those `changed` added).
    extra_tools: std::sync::Mutex<Vec<String>>,
    /// Their description (`--tool-description`).
    extra_description: String,
    /// Where each request received is appended (`--record-requests`).
    record_requests: Option<std::path::PathBuf>,
}

impl Instance {
    pub fn new(name: String, extra_tools: Vec<String>, extra_description: String) -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 8];
        getrandom::fill(&mut bytes)?;
        let id = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Instance {
            id,
            pid: std::process::id(),
            name,
            version: env!("CARGO_PKG_VERSION"),
            tool_calls: AtomicU64::new(0),
            tool_lists: AtomicU64::new(0),
            extra_tools: std::sync::Mutex::new(extra_tools),
            extra_description,
            record_requests: None,
        })
    }

    /// Appends each request received to `file` from now on.
    pub fn recording_requests(mut self, file: Option<std::path::PathBuf>) -> Self {
        self.record_requests = file;
        self
    }

    /// Appends one line, `{"method", "params"}`, to the record file (when there is one),
    /// written whole in one append: how a test sees exactly what reached this server,
    /// including what it refused. A failed write is said on stderr, never fatal.
    pub fn record_request(&self, method: &str, params: &Value) {
        use std::io::Write as _;
        let Some(file) = &self.record_requests else { return };
        let line = format!("{}\n", json!({ "method": method, "params": params }));
        let written = std::fs::OpenOptions::new().create(true).append(true).open(file);
        if let Err(e) = written.and_then(|mut f| f.write_all(line.as_bytes())) {
            eprintln!("fakemcp {}: cannot record a request in {}: {e}", self.id, file.display());
        }
    }

    /// Counts one more `tools/call` and returns the total including it.
    pub fn count_tool_call(&self) -> u64 {
        self.tool_calls.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// The `tools` array of a `tools/list` answer, counting the listing.
    pub fn list_tools(&self) -> Value {
        self.tool_lists.fetch_add(1, Ordering::SeqCst);
        let mut tools = crate::tools::catalogue();
        if let Value::Array(list) = &mut tools {
            for name in self.extra_tools.lock().expect("tools lock").iter() {
                list.push(
                    json!({ "name": name, "description": self.extra_description, "inputSchema": { "type": "object" } }),
                );
            }
        }
        tools
    }

    /// Lists one more tool by this name from now on (nothing when it is listed already).
    pub fn add_tool(&self, name: &str) {
        let mut extra = self.extra_tools.lock().expect("tools lock");
        if !extra.iter().any(|n| n == name) {
            extra.push(name.to_owned());
        }
    }

    /// How many times the tools were listed so far.
    pub fn tool_lists(&self) -> u64 {
        self.tool_lists.load(Ordering::SeqCst)
    }

    /// The MCP `Implementation` object: `{name, version}`.
    pub fn server_info(&self) -> Value {
        json!({"name": self.name, "version": self.version})
    }
}
