//! Names from upstreams: a tool whose name holds a bidirectional override or an invisible
//! character could read, in a host, as another tool's name. mcpx leaves such a tool out
//! of every listing it builds (`tools/list` of an exposed server, `mcpx_search`, a
//! script's `search()`) and logs why, once.

use mcpx_e2e::{Daemon, Modern, config, fakemcp, tag};
use serde_json::{Value, json};

/// Reads as "evil" followed by "exe.txt" mirrored: a host shows `eviltxt.exe`.
const OVERRIDDEN: &str = "evil\u{202E}txt.exe";
/// Reads as `whoami`.
const ZERO_WIDTH: &str = "who\u{200B}ami";

fn names(tools: &Value, field: &str) -> Vec<String> {
    tools.as_array().into_iter().flatten().filter_map(|t| t[field].as_str().map(str::to_owned)).collect()
}

#[test]
fn tools_named_with_hidden_characters_are_left_out_of_every_listing_and_logged_once() {
    let server = fakemcp(
        "global",
        &tag(),
        &["--tool-named", OVERRIDDEN, "--tool-named", ZERO_WIDTH, "--tool-named", "fine_tool"],
    );
    let mut c = config(&[("alpha", server)]);
    c["expose"] = json!(["alpha"]);
    let daemon = Daemon::start(&c);

    for _ in 0..2 {
        let listed = Modern::tools_list().send(daemon.url());
        let listed = names(&listed.result()["tools"], "name");
        assert!(
            listed.contains(&"alpha__fine_tool".to_owned()) && listed.contains(&"alpha__whoami".to_owned()),
            "{listed:?}"
        );
        assert!(
            !listed.iter().any(|n| n.contains('\u{202E}') || n.contains('\u{200B}')),
            "tools/list shows {listed:?}"
        );
    }
    let searched = Modern::tools_call("mcpx_search", json!({ "query": "" })).send(daemon.url());
    let found = names(&searched.structured()["tools"], "tool");
    assert!(found.contains(&"fine_tool".to_owned()), "{found:?}");
    assert!(!found.iter().any(|n| n.contains('\u{202E}') || n.contains('\u{200B}')), "mcpx_search shows {found:?}");
    let script = Modern::tools_call(
        "mcpx_exec",
        json!({ "script": "return { found: (await search('')).map((t) => t.tool) };" }),
    )
    .send(daemon.url());
    let found: Vec<&str> =
        script.structured()["found"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    assert!(found.contains(&"fine_tool"), "{script}");
    assert!(
        !found.iter().any(|n| n.contains('\u{202E}') || n.contains('\u{200B}')),
        "a script's search() shows {found:?}"
    );

    let log = daemon.stderr();
    for (name, point) in [(OVERRIDDEN, "U+202E"), (ZERO_WIDTH, "U+200B")] {
        let lines: Vec<&str> = log.lines().filter(|l| l.contains("left out tool") && l.contains(point)).collect();
        assert_eq!(lines.len(), 1, "the refusal of {name:?} is logged once, naming {point}:\n{log}");
    }
}
