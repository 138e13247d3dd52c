//! Roots for scopes: a caller over HTTP has no cwd, so a `cwd`, `repo` or `worktree`
//! scoped server would degrade to one instance per call. When the caller declared the
//! `roots` capability, mcpx asks it for its roots instead (a `roots/list` request on a
//! handshake-era session; an `input_required` round for a 2026 caller) and uses the first
//! `file://` root as that request's cwd, when its principal may name that directory
//! (`places`: the owner any, another principal only inside its grants, and one with no
//! grants is not asked). A caller without `roots`, or whose root is refused, degrades.

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

/// The path of a `file://` URI, percent-decoded; `None` when it is not UTF-8 or has a `%`
/// without two hex digits after it (a malformed URI is skipped, not guessed at).
fn percent_decode(text: &str) -> Option<String> {
    let escapes_valid = text
        .match_indices('%')
        .all(|(at, _)| text.as_bytes().get(at + 1..at + 3).is_some_and(|hex| hex.iter().all(u8::is_ascii_hexdigit)));
    let decoded = escapes_valid.then(|| percent_encoding::percent_decode_str(text).decode_utf8())?;
    decoded.ok().map(std::borrow::Cow::into_owned)
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

    #[test]
    fn a_root_with_a_malformed_escape_or_not_utf8_is_skipped() {
        let answer = json!({"roots": [{"uri": "file:///a%zz"}, {"uri": "file:///b%"}, {"uri": "file:///c%ff"}]});
        assert_eq!(first_dir(&answer), None);
        assert_eq!(first_dir(&json!({"roots": [{"uri": "file:///%C3%A9t%C3%A9"}]})), Some(PathBuf::from("/été")));
    }
}
