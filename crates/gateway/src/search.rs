//! Finding tools: what `mcpx_search` (and a script's `mcpx.search`) answer for a query
//! over the listings of the servers.

use serde_json::{Value, json};

use crate::error::Error;

/// Whether a tool matches a search: every word of the query appears somewhere in
/// "server tool description", case-insensitively.
pub fn matches(query: &str, server: &str, tool: &Value) -> bool {
    let haystack = format!(
        "{server} {} {}",
        tool.get("name").and_then(Value::as_str).unwrap_or_default(),
        tool.get("description").and_then(Value::as_str).unwrap_or_default()
    )
    .to_lowercase();
    query.split_whitespace().all(|word| haystack.contains(&word.to_lowercase()))
}

/// The tools of `listings` a search for `query` finds, as `mcpx_search` answers them:
/// `{query, tools, unavailable?}`.
pub(crate) fn found(query: &str, listings: &[(String, Result<Vec<Value>, Error>)]) -> Value {
    let mut found = Vec::new();
    let mut unavailable = Vec::new();
    for (server, listing) in listings {
        match listing {
            Ok(listed) => {
                for tool in listed.iter().filter(|t| matches(query, server, t)) {
                    let mut entry =
                        json!({ "server": server, "tool": tool.get("name").cloned().unwrap_or(Value::Null) });
                    if let Some(name) = tool.get("name").and_then(Value::as_str) {
                        // How a script calls it.
                        entry["js"] = mcpx_exec::accessor(server, name).into();
                    }
                    for field in ["title", "description", "inputSchema"] {
                        if let Some(v) = tool.get(field) {
                            entry[field] = v.clone();
                        }
                    }
                    found.push(entry);
                }
            }
            Err(e) => unavailable.push(json!({ "server": server, "error": e.to_string() })),
        }
    }
    let mut body = json!({ "query": query, "tools": found });
    if !unavailable.is_empty() {
        body["unavailable"] = unavailable.into();
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_query_word_must_match() {
        let tool = json!({"name": "get_current_time", "description": "Get the time in a timezone"});
        assert!(matches("", "time", &tool));
        assert!(matches("TIME zone", "time", &tool));
        assert!(!matches("time weather", "time", &tool));
    }

    #[test]
    fn a_found_tool_says_how_a_script_calls_it() {
        let listings = [("git".to_owned(), Ok(vec![json!({"name": "git-status", "description": "Show status"})]))];
        let body = found("status", &listings);
        assert_eq!(body["tools"][0]["js"], "tools.git.git_status(args)");
        assert_eq!(body["tools"][0]["server"], "git");
    }
}
