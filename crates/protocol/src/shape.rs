//! Shaping a result for the revision of the caller that receives it.
//!
//! mcpx builds each result once and shapes it at the edge: a 2026-07-28 caller gets
//! `resultType`, the caching fields on cacheable results and `serverInfo` in `_meta`; a
//! handshake-era caller gets none of those, whatever the upstream sent.

use serde_json::{Map, Value};

use crate::error::{RpcError, code};
use crate::meta;
use crate::revision::{Era, Revision};

/// Methods whose complete results must carry `ttlMs` and `cacheScope` in 2026-07-28.
pub const CACHEABLE_METHODS: [&str; 6] =
    ["server/discover", "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"];

/// Who may reuse a result, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cacheability {
    pub ttl_ms: u64,
    pub private: bool,
}

impl Cacheability {
    /// For a result that depends on who asked: never reused, never shared.
    pub const PRIVATE_UNCACHED: Cacheability = Cacheability { ttl_ms: 0, private: true };

    /// The more restrictive of two: the shorter lifetime, private if either is.
    pub fn min(self, other: Cacheability) -> Cacheability {
        Cacheability { ttl_ms: self.ttl_ms.min(other.ttl_ms), private: self.private || other.private }
    }
}

/// Shapes a successful result for a caller speaking `revision`.
pub fn shape_result(result: &mut Value, method: &str, revision: Revision, server_info: &Value, cache: Cacheability) {
    let Value::Object(obj) = result else { return };
    match revision.era() {
        Era::Modern => {
            let result_type = obj.entry("resultType").or_insert_with(|| "complete".into());
            let complete = result_type.as_str() == Some("complete");
            if complete && CACHEABLE_METHODS.contains(&method) {
                obj.insert("ttlMs".into(), cache.ttl_ms.into());
                obj.insert("cacheScope".into(), if cache.private { "private" } else { "public" }.into());
            }
            meta_of(obj).insert(meta::SERVER_INFO.into(), server_info.clone());
        }
        Era::Legacy => {
            for key in ["resultType", "ttlMs", "cacheScope"] {
                obj.remove(key);
            }
            if let Some(Value::Object(m)) = obj.get_mut("_meta") {
                m.remove(meta::SERVER_INFO);
                if m.is_empty() {
                    obj.remove("_meta");
                }
            }
        }
    }
}

/// Shapes an error for a caller speaking `revision`: 2026-07-28 retired -32002.
pub fn shape_error(mut error: RpcError, revision: Revision) -> RpcError {
    if revision.era() == Era::Modern && error.code == code::LEGACY_RESOURCE_NOT_FOUND {
        error.code = code::INVALID_PARAMS;
    }
    error
}

fn meta_of(obj: &mut Map<String, Value>) -> &mut Map<String, Value> {
    let m = obj.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut().expect("_meta was just made an object")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info() -> Value {
        json!({"name": "mcpx", "version": "0"})
    }

    #[test]
    fn a_modern_caller_gets_result_type_caching_and_server_info() {
        let mut r = json!({"tools": []});
        shape_result(&mut r, "tools/list", Revision::V2026_07_28, &info(), Cacheability::PRIVATE_UNCACHED);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["ttlMs"], 0);
        assert_eq!(r["cacheScope"], "private");
        assert_eq!(r["_meta"][meta::SERVER_INFO], info());
    }

    #[test]
    fn a_tool_result_is_not_given_caching_fields() {
        let mut r = json!({"content": [], "isError": false});
        shape_result(&mut r, "tools/call", Revision::V2026_07_28, &info(), Cacheability::PRIVATE_UNCACHED);
        assert!(r.get("ttlMs").is_none());
        assert_eq!(r["resultType"], "complete");
    }

    #[test]
    fn a_legacy_caller_gets_none_of_the_modern_fields() {
        let mut r = json!({"tools": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "public",
                           "_meta": {meta::SERVER_INFO: info()}});
        shape_result(&mut r, "tools/list", Revision::V2025_11_25, &info(), Cacheability::PRIVATE_UNCACHED);
        assert_eq!(r, json!({"tools": []}));
    }

    #[test]
    fn modern_callers_never_see_the_retired_not_found_code() {
        let e = RpcError::new(-32002, "not found");
        assert_eq!(shape_error(e.clone(), Revision::V2026_07_28).code, -32602);
        assert_eq!(shape_error(e, Revision::V2025_11_25).code, -32002);
    }
}
