//! Pages of the lists mcpx aggregates (`tools/list`, `resources/list`,
//! `resources/templates/list`, `prompts/list`).
//!
//! mcpx builds the whole list (in a deterministic order: server by server, each in its
//! own order) and hands it out `limits.pageSize` items at a time. A cursor is opaque to
//! callers: it names the list and the offset, so a cursor from another list, or one that
//! was altered, is -32602 (an empty string is a valid cursor and means the start).

use crate::error::Error;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::Value;

/// The list field of each paged method.
pub fn field(method: &str) -> Option<&'static str> {
    Some(match method {
        "tools/list" => "tools",
        "resources/list" => "resources",
        "resources/templates/list" => "resourceTemplates",
        "prompts/list" => "prompts",
        _ => return None,
    })
}

/// Where a cursor starts, in the list of `method`.
pub fn start(method: &str, params: &Value) -> Result<usize, Error> {
    let cursor = match params.get("cursor") {
        None | Some(Value::Null) => return Ok(0),
        Some(Value::String(c)) if c.is_empty() => return Ok(0),
        Some(Value::String(c)) => c,
        Some(_) => return Err(Error::params("cursor must be a string")),
    };
    let invalid = || Error::params(format!("invalid cursor for {method}"));
    let text = String::from_utf8(B64.decode(cursor).map_err(|_| invalid())?).map_err(|_| invalid())?;
    let (named, offset) = text.rsplit_once('@').ok_or_else(invalid)?;
    if named != method {
        return Err(invalid());
    }
    offset.parse().map_err(|_| invalid())
}

/// Cuts the page starting at `from` out of a whole list result, adding `nextCursor` when
/// more follows.
pub fn cut(method: &str, result: &mut Value, from: usize, size: usize) -> Result<(), Error> {
    let Some(items) = field(method).and_then(|f| result.get_mut(f)).and_then(Value::as_array_mut) else {
        return Ok(());
    };
    if from > items.len() {
        return Err(Error::params(format!("invalid cursor for {method}: past the end of the list")));
    }
    let end = from.saturating_add(size.max(1)).min(items.len());
    let more = end < items.len();
    *items = items.drain(from..end).collect();
    if more {
        result["nextCursor"] = B64.encode(format!("{method}@{end}")).into();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_is_handed_out_page_by_page_until_the_end() {
        let whole = json!({"tools": [1, 2, 3, 4, 5]});
        let mut seen = Vec::new();
        let mut params = json!({});
        loop {
            let mut page = whole.clone();
            cut("tools/list", &mut page, start("tools/list", &params).unwrap(), 2).unwrap();
            seen.extend(page["tools"].as_array().unwrap().clone());
            match page.get("nextCursor") {
                Some(c) => params = json!({"cursor": c}),
                None => break,
            }
        }
        assert_eq!(json!(seen), whole["tools"]);
    }

    #[test]
    fn foreign_altered_and_empty_cursors() {
        let mut page = json!({"prompts": [1, 2, 3]});
        cut("prompts/list", &mut page, 0, 1).unwrap();
        let cursor = page["nextCursor"].clone();
        assert!(start("tools/list", &json!({"cursor": cursor})).is_err());
        assert!(start("prompts/list", &json!({"cursor": "nope!"})).is_err());
        assert_eq!(start("prompts/list", &json!({"cursor": ""})).unwrap(), 0);
        assert!(cut("prompts/list", &mut json!({"prompts": [1]}), 5, 1).is_err());
    }
}
