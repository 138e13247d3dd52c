//! Validating frames against the published MCP JSON schemas.
//!
//! Each revision's `schema.json` is loaded once (a `OnceLock` per revision) into a
//! `jsonschema` registry under its own URI; a definition is checked through a one-line
//! wrapper schema, `{"$ref": "<uri>#/$defs/<Name>"}`, compiled on first use and cached.
//! The 2025-06-18 and older documents are draft-07 and keep their definitions under
//! `definitions`; that is handled here so callers only name the definition.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::{Registry, Validator};
use serde_json::{Value, json};

use crate::paths;

/// The protocol revisions whose schemas ship in `spec/schema`.
pub const REVISIONS: [&str; 4] = ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"];

/// The newest revision of the handshake era.
pub const LEGACY: &str = "2025-11-25";
/// The stateless revision.
pub const MODERN: &str = "2026-07-28";

/// One revision's schema document, ready to check frames against its definitions.
pub struct Spec {
    revision: &'static str,
    uri: String,
    /// `$defs` (2020-12 documents) or `definitions` (draft-07 documents).
    defs_key: &'static str,
    document: Value,
    registry: Registry<'static>,
    validators: Mutex<HashMap<String, Arc<Validator>>>,
}

/// The schema of `revision` (one of [`REVISIONS`]), loaded on first use.
pub fn spec(revision: &str) -> &'static Spec {
    static SPECS: [OnceLock<Spec>; 4] = [const { OnceLock::new() }; 4];
    let index = REVISIONS
        .iter()
        .position(|r| *r == revision)
        .unwrap_or_else(|| panic!("no schema for revision {revision:?}; known: {REVISIONS:?}"));
    SPECS[index].get_or_init(|| Spec::load(REVISIONS[index]))
}

impl Spec {
    fn load(revision: &'static str) -> Spec {
        let path = paths::spec_schema_dir().join(revision).join("schema.json");
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let document: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        let defs_key = if document.get("$defs").is_some() { "$defs" } else { "definitions" };
        let uri = format!("https://mcpx.test/spec/{revision}/schema.json");
        let registry = Registry::new()
            .add(&uri, document.clone())
            .and_then(|builder| builder.prepare())
            .unwrap_or_else(|e| panic!("{}: cannot register the schema: {e}", path.display()));
        Spec { revision, uri, defs_key, document, registry, validators: Mutex::new(HashMap::new()) }
    }

    pub fn revision(&self) -> &'static str {
        self.revision
    }

    /// Whether this revision defines `name` (e.g. `DiscoverResult` exists only in 2026-07-28).
    pub fn has(&self, name: &str) -> bool {
        self.document[self.defs_key].get(name).is_some()
    }

    fn validator(&self, name: &str) -> Arc<Validator> {
        let mut cache = self.validators.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(validator) = cache.get(name) {
            return validator.clone();
        }
        assert!(self.has(name), "schema {} has no definition {name:?}", self.revision);
        let wrapper = json!({ "$ref": format!("{}#/{}/{name}", self.uri, self.defs_key) });
        let validator = jsonschema::options()
            .with_registry(&self.registry)
            .build(&wrapper)
            .unwrap_or_else(|e| panic!("schema {}: cannot compile {name}: {e}", self.revision));
        let validator = Arc::new(validator);
        cache.insert(name.to_owned(), validator.clone());
        validator
    }

    /// Every violation of definition `name` by `instance`, one line each (empty: valid).
    pub fn violations(&self, name: &str, instance: &Value) -> Vec<String> {
        self.validator(name)
            .iter_errors(instance)
            .map(|e| format!("at {:?}: {e}", e.instance_path().as_str()))
            .collect()
    }

    /// Panics, printing the frame and every violation, unless `instance` is a valid `name`.
    #[track_caller]
    pub fn assert_valid(&self, name: &str, instance: &Value, what: &str) {
        let violations = self.violations(name, instance);
        assert!(
            violations.is_empty(),
            "{what} is not a valid {name} of MCP {}:\n  {}\nframe: {}",
            self.revision,
            violations.join("\n  "),
            serde_json::to_string_pretty(instance).unwrap_or_default()
        );
    }
}

/// The result definition the schema gives for a method's successful answer, if the tests
/// check that method's results.
pub fn result_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "initialize" => "InitializeResult",
        "server/discover" => "DiscoverResult",
        "tools/list" => "ListToolsResult",
        "tools/call" => "CallToolResult",
        "prompts/get" => "GetPromptResult",
        "resources/read" => "ReadResourceResult",
        "resources/list" => "ListResourcesResult",
        "prompts/list" => "ListPromptsResult",
        "completion/complete" => "CompleteResult",
        "ping" => "EmptyResult",
        // The tasks extension's methods: the core schema knows only their envelope.
        "tasks/get" => "Result",
        "tasks/update" | "tasks/cancel" => "EmptyResult",
        _ => return None,
    })
}

/// The 2025-11-25 definition of a task method's answer (a task-augmented `tools/call`
/// answers a `CreateTaskResult`; `tasks/result` the tool call's own result).
fn legacy_task_def(method: &str, result: &Value) -> Option<&'static str> {
    Some(match method {
        "tools/call" if result.get("task").is_some() => "CreateTaskResult",
        "tasks/get" => "GetTaskResult",
        "tasks/cancel" => "CancelTaskResult",
        "tasks/list" => "ListTasksResult",
        "tasks/result" => "CallToolResult",
        _ => return None,
    })
}

/// The 2026-07-28 definition of a standard error, by code: whole frames for the MCP codes
/// (which constrain `data`), the `error` object for the JSON-RPC ones.
fn modern_error_def(code: i64) -> Option<(&'static str, bool)> {
    Some(match code {
        -32700 => ("ParseError", false),
        -32600 => ("InvalidRequestError", false),
        -32601 => ("MethodNotFoundError", false),
        -32602 => ("InvalidParamsError", false),
        -32603 => ("InternalError", false),
        -32020 => ("HeaderMismatchError", true),
        -32021 => ("MissingRequiredClientCapabilityError", true),
        -32022 => ("UnsupportedProtocolVersionError", true),
        _ => return None,
    })
}

/// Checks one frame the daemon wrote in answer to `method` (None when the request could
/// not be read), against the schema of `revision`. Panics with the frame on a violation.
#[track_caller]
pub fn assert_frame(revision: &str, method: Option<&str>, frame: &Value) {
    let spec = spec(revision);
    let what = format!("the daemon's answer to {}", method.unwrap_or("an unreadable request"));
    let envelope = |modern: &str, older: &str| {
        if spec.has(modern) { modern.to_owned() } else { older.to_owned() }
    };
    if frame.get("error").is_some() {
        spec.assert_valid(&envelope("JSONRPCErrorResponse", "JSONRPCError"), frame, &what);
        let specific = frame["error"]["code"].as_i64().and_then(modern_error_def);
        match specific {
            Some((def, true)) if revision == MODERN => spec.assert_valid(def, frame, &what),
            Some((def, false)) if revision == MODERN => spec.assert_valid(def, &frame["error"], &what),
            _ => {}
        }
    } else if frame.get("result").is_some() {
        spec.assert_valid(&envelope("JSONRPCResultResponse", "JSONRPCResponse"), frame, &what);
        // A question instead of the answer (2026 `input_required`) has its own shape; a
        // task instead of it (the tasks extension) is a `Result` as far as the core schema
        // goes (its own fields are the extension's, which tests check themselves).
        let def = match frame["result"]["resultType"].as_str() {
            Some("input_required") => Some("InputRequiredResult"),
            Some("task") => Some("Result"),
            _ if revision == LEGACY => {
                method.and_then(|m| legacy_task_def(m, &frame["result"]).or_else(|| result_def(m)))
            }
            _ => method.and_then(result_def),
        };
        if let Some(def) = def.filter(|def| spec.has(def)) {
            spec.assert_valid(def, &frame["result"], &what);
        }
    } else if let Some(question) = frame.get("id").and(frame["method"].as_str()) {
        // A question mcpx puts to a handshake-era caller on its stream.
        let def = match question {
            "elicitation/create" => "ElicitRequest",
            "sampling/createMessage" => "CreateMessageRequest",
            "roots/list" => "ListRootsRequest",
            "ping" => "PingRequest",
            other => {
                panic!("{what}: mcpx asked the caller {other:?}, which is not a question a client answers: {frame}")
            }
        };
        spec.assert_valid(&envelope("JSONRPCRequest", "JSONRPCRequest"), frame, &what);
        spec.assert_valid(def, frame, &format!("a question during {what}"));
    } else if frame.get("method").is_some() && frame.get("id").is_none() {
        spec.assert_valid("JSONRPCNotification", frame, &format!("a notification during {what}"));
    } else {
        panic!("{what} is neither a response nor a notification: {frame}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conforming_frame_passes_and_a_broken_one_is_caught() {
        let modern = spec(MODERN);
        let ok = json!({"content": [{"type": "text", "text": "hi"}], "resultType": "complete"});
        assert!(modern.violations("CallToolResult", &ok).is_empty());
        assert!(!modern.violations("CallToolResult", &json!({"content": "hi", "resultType": "complete"})).is_empty());
        let null_id = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "bad"}});
        assert!(!modern.violations("JSONRPCErrorResponse", &null_id).is_empty());
        let unsupported = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32022, "message": "no"}});
        assert!(!modern.violations("UnsupportedProtocolVersionError", &unsupported).is_empty());
    }

    #[test]
    fn draft_07_revisions_resolve_their_definitions() {
        let init = json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "serverInfo": {"name": "x", "version": "1"}
        });
        assert!(spec("2025-06-18").violations("InitializeResult", &init).is_empty());
        assert!(!spec("2025-03-26").violations("InitializeResult", &json!({"capabilities": {}})).is_empty());
        assert!(spec(LEGACY).violations("InitializeResult", &init).is_empty());
    }
}
