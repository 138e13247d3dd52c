//! `completion/complete` for the fixture's prompt arguments and template variables.
//!
//! Each completable argument has a short fixed list of candidates; the answer is the ones
//! starting with what the client typed so far.

use serde_json::{Value, json};

use super::prompts::{self, WITH_ARGUMENTS, WITH_EMBEDDED_RESOURCE};
use super::resources::{self, TEMPLATE};
use crate::era::Era;
use crate::wire::{INVALID_PARAMS, RpcError};

/// The result body of `completion/complete`.
pub fn complete(era: Era, params: &Value) -> Result<Value, RpcError> {
    let invalid = |problem: &str| RpcError::new(INVALID_PARAMS, format!("completion/complete: {problem}"));
    let reference = params.get("ref").ok_or_else(|| invalid("ref is required"))?;
    let argument = params
        .get("argument")
        .and_then(|argument| Some((argument.get("name")?.as_str()?, argument.get("value")?.as_str()?)))
        .ok_or_else(|| invalid("argument must be {name, value} strings"))?;
    let (name, typed) = argument;
    let candidates: &[&str] = match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let prompt =
                reference.get("name").and_then(Value::as_str).ok_or_else(|| invalid("ref/prompt needs a name"))?;
            if !prompts::exists(era, prompt) {
                return Err(invalid(&format!("unknown prompt: {prompt}")));
            }
            match (prompt, name) {
                (WITH_ARGUMENTS, "arg1") => &["alpha", "apple", "avocado"],
                (WITH_ARGUMENTS, "arg2") => &["beta", "banana", "blueberry"],
                (WITH_EMBEDDED_RESOURCE, "resourceUri") => {
                    &["test://static-text", "test://static-binary", "test://watched-resource"]
                }
                _ => &[],
            }
        }
        Some("ref/resource") => {
            let uri =
                reference.get("uri").and_then(Value::as_str).ok_or_else(|| invalid("ref/resource needs a uri"))?;
            match (uri, name) {
                (TEMPLATE, "id") => &["123", "456", "789"],
                _ if uri == TEMPLATE || resources::exists(uri) => &[],
                _ => return Err(invalid(&format!("unknown resource: {uri}"))),
            }
        }
        _ => return Err(invalid("ref.type must be ref/prompt or ref/resource")),
    };
    let values: Vec<&str> = candidates.iter().copied().filter(|candidate| candidate.starts_with(typed)).collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}
