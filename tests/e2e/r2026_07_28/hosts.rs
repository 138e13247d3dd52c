//! Sessions named the way real agent hosts name them, with the default config: each
//! host's session gets its own session-scoped instance and keeps it across calls.

use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, tag};
use serde_json::{Value, json};

/// `mcpx_call browser whoami` on a session-scoped server, with `meta` as the request's
/// host-specific `_meta`.
#[track_caller]
fn whoami(daemon: &Daemon, meta: &[(&str, Value)]) -> Whoami {
    let request = meta.iter().fold(Modern::mcpx_call("browser", "whoami", json!({})), |request, (key, value)| {
        request.meta(key, value.clone())
    });
    Whoami::of(&request.send(daemon.url()))
}

/// Codex: `_meta["x-codex-turn-metadata"]` is an object whose `session_id` stays for the
/// session while its `turn_id` changes every turn.
fn codex(session: &str, turn: &str) -> Vec<(&'static str, Value)> {
    vec![("x-codex-turn-metadata", json!({"session_id": session, "turn_id": turn}))]
}

/// Claude Code: `_meta["claudecode/sessionId"]` (when the host enables it) beside a
/// `claudecode/toolUseId` that changes every call.
fn claude_code(session: &str, tool_use: &str) -> Vec<(&'static str, Value)> {
    vec![("claudecode/sessionId", json!(session)), ("claudecode/toolUseId", json!(tool_use))]
}

#[test]
fn codex_and_claude_code_sessions_each_keep_their_own_session_scoped_instance() {
    let daemon = Daemon::start(&config(&[("browser", fakemcp("session", &tag(), &[]))]));

    let codex_a =
        [whoami(&daemon, &codex("0199a1b2-codex-a", "turn-1")), whoami(&daemon, &codex("0199a1b2-codex-a", "turn-2"))];
    let codex_b = whoami(&daemon, &codex("0199a1b2-codex-b", "turn-1"));
    let claude = [
        whoami(&daemon, &claude_code("cc-session-1", "toolu_01")),
        whoami(&daemon, &claude_code("cc-session-1", "toolu_02")),
    ];

    assert_eq!(
        (codex_a[1].instance.as_str(), codex_a[1].calls),
        (codex_a[0].instance.as_str(), 2),
        "a Codex session must keep its instance across turns: {codex_a:?}"
    );
    assert_eq!(
        (claude[1].instance.as_str(), claude[1].calls),
        (claude[0].instance.as_str(), 2),
        "a Claude Code session must keep its instance across calls: {claude:?}"
    );
    let instances = [&codex_a[0].instance, &codex_b.instance, &claude[0].instance];
    for (i, a) in instances.iter().enumerate() {
        assert!(
            instances[i + 1..].iter().all(|b| b != a),
            "two sessions shared an instance: Codex a {codex_a:?}, Codex b {codex_b:?}, Claude Code {claude:?}"
        );
    }
    assert_eq!(codex_b.calls, 1, "Codex session b reached a used instance");

    // Without its session flag Claude Code sends only the tool use id, which changes every
    // call: no session, so each call is its own scope, never one shared instance.
    let unnamed = [
        whoami(&daemon, &[("claudecode/toolUseId", json!("toolu_03"))]),
        whoami(&daemon, &[("claudecode/toolUseId", json!("toolu_03"))]),
    ];
    assert_ne!(unnamed[0].instance, unnamed[1].instance, "a tool use id must not name a session: {unnamed:?}");
    assert!(
        unnamed.iter().all(|w| w.calls == 1 && !instances.contains(&&w.instance)),
        "calls without a session reached a session's instance: {unnamed:?}"
    );
}
