//! Roots for scopes: a caller over HTTP has no cwd, so a `cwd`, `repo` or `worktree`
//! scoped server would degrade to one instance per call. When the caller declared the
//! `roots` capability, mcpx asks it for its roots instead (a `roots/list` request on a
//! handshake-era session; an `input_required` round for a 2026 caller) and uses the first
//! `file://` root as that request's cwd. A caller without `roots` still degrades.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::Scope;
use crate::context::CallContext;

/// The `inputRequests` key (and sealed-state marker) of mcpx's own roots question.
pub const KEY: &str = "dev.mcpx/roots";

/// Whether this request should ask its caller for roots before picking an instance.
pub fn wanted(ctx: &CallContext, scope: Scope) -> bool {
    matches!(scope, Scope::Cwd | Scope::Repo | Scope::Worktree)
        && ctx.identity.cwd.is_none()
        && ctx.client_capabilities.get("roots").is_some_and(|r| !r.is_null())
}

/// The question to put to the caller.
pub fn question() -> Value {
    json!({ "method": "roots/list", "params": {} })
}

/// The directory of the first `file://` root of a `ListRootsResult`.
pub fn first_dir(answer: &Value) -> Option<PathBuf> {
    answer.get("roots")?.as_array()?.iter().find_map(|root| {
        let path = root.get("uri")?.as_str()?.strip_prefix("file://")?;
        let path = percent_decode(path.strip_prefix("localhost").unwrap_or(path))?;
        path.starts_with('/').then(|| PathBuf::from(path))
    })
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_file_root_is_the_directory() {
        let answer = json!({"roots": [
            {"uri": "https://example.com/repo"},
            {"uri": "file:///home/a/my%20project", "name": "p"},
            {"uri": "file:///second"}
        ]});
        assert_eq!(first_dir(&answer), Some(PathBuf::from("/home/a/my project")));
        assert_eq!(first_dir(&json!({"roots": [{"uri": "file://localhost/srv/x"}]})), Some(PathBuf::from("/srv/x")));
        assert_eq!(first_dir(&json!({"roots": []})), None);
        assert_eq!(first_dir(&json!({"roots": [{"uri": "file://relative"}]})), None);
    }
}
