//! The invocation context on every path that fans out to an upstream besides `tools/call`:
//! `resources/read`, `prompts/get`, `completion/complete`. Each request, however many run
//! at once through one instance, carries its own caller's session and call id; a caller's
//! own `dev.mcpx/` keys never pass.

use std::collections::HashSet;
use std::thread;

use mcpx_e2e::client::Modern;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use serde_json::{Value, json};

/// The upstream's view of `_meta`, from a fakemcp answer that carries it as JSON text.
fn upstream_meta(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not the JSON of a _meta ({e}): {text}"))
}

fn requests(session: &str) -> Vec<(&'static str, Modern)> {
    let forged = json!({"version": 1, "sessionId": "forged", "callId": "forged"});
    let sign =
        |m: Modern| m.session(session).meta("dev.mcpx/invocation", forged.clone()).meta("dev.mcpx/other", json!(1));
    vec![
        ("read", sign(Modern::new("resources/read", json!({"uri": "mcpx://f/fake://meta"})))),
        ("prompt", sign(Modern::new("prompts/get", json!({"name": "f__meta"})))),
        (
            "complete",
            sign(Modern::new(
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "f__meta"}, "argument": {"name": "a", "value": ""}}),
            )),
        ),
    ]
}

fn text_of(kind: &str, result: &Value) -> String {
    let text = match kind {
        "read" => &result["contents"][0]["text"],
        "prompt" => &result["messages"][0]["content"]["text"],
        _ => &result["completion"]["values"][0],
    };
    text.as_str().unwrap_or_else(|| panic!("{kind}: no text in {result}")).to_owned()
}

#[test]
fn reads_prompts_and_completions_carry_their_own_callers_context_concurrently() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("global", &t, &[]))]));
    let url = daemon.url().to_owned();
    let seen: Vec<(String, String, Value)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..5)
            .map(|s| {
                let url = url.clone();
                scope.spawn(move || {
                    let session = format!("s{s}");
                    let mut seen = Vec::new();
                    for _ in 0..3 {
                        for (kind, request) in requests(&session) {
                            let reply = request.send(&url);
                            let meta = upstream_meta(&text_of(kind, reply.result()));
                            seen.push((session.clone(), kind.to_owned(), meta));
                        }
                    }
                    seen
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(seen.len(), 5 * 3 * 3);
    let mut call_ids = HashSet::new();
    for (session, kind, meta) in &seen {
        let context = &meta["dev.mcpx/invocation"];
        assert_eq!(context["version"], 1, "{kind}: {meta}");
        assert_eq!(context["sessionId"], json!(session), "{kind} of {session} carried another context: {meta}");
        assert_eq!(context["scope"], "global", "{kind}: {meta}");
        assert!(meta.get("dev.mcpx/other").is_none(), "a caller's dev.mcpx/ key passed: {meta}");
        let call_id = context["callId"].as_str().expect("a callId").to_owned();
        assert_ne!(call_id, "forged");
        assert!(call_ids.insert(call_id), "two requests shared a callId: {meta}");
    }
}
