//! Aggregated lists are handed out in pages of `limits.pageSize`, with opaque cursors.

use mcpx_e2e::client::Modern;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use serde_json::{Value, json};

fn names(result: &Value) -> Vec<String> {
    result["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn tools_list_pages_cover_the_whole_list_once_in_order() {
    let t = tag();
    let mut cfg = config(&[("fake", fakemcp("global", &t, &[]))]);
    cfg["expose"] = json!(["fake"]);
    let whole = Daemon::start(&cfg);
    let all = names(Modern::tools_list().send(whole.url()).result());
    assert!(all.len() > 3, "{all:?}");

    cfg["limits"] = json!({"pageSize": 2});
    let paged = Daemon::start(&cfg);
    let mut seen = Vec::new();
    let mut cursor: Option<Value> = None;
    for _ in 0..all.len() {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let reply = Modern::new("tools/list", params).send(paged.url());
        let page = names(reply.result());
        assert!(page.len() <= 2, "a page larger than pageSize: {page:?}");
        seen.extend(page);
        cursor = reply.result().get("nextCursor").cloned();
        if cursor.is_none() {
            break;
        }
    }
    assert_eq!(seen, all);
}

#[test]
fn a_cursor_that_mcpx_did_not_issue_is_invalid_params() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("fake", fakemcp("global", &t, &[]))]));
    Modern::new("tools/list", json!({"cursor": "bm90LWEtY3Vyc29y"})).send(daemon.url()).assert_error(200, -32602);
    // The empty string is a valid cursor: the start of the list.
    assert!(!names(Modern::new("tools/list", json!({"cursor": ""})).send(daemon.url()).result()).is_empty());
}
