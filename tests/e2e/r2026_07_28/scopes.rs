//! Scopes that need something HTTP cannot tell (the caller's cwd) degrade to per-call
//! instances, and the daemon says so once, not on every call.

use std::time::Duration;

use mcpx_e2e::{Daemon, LegacySession, Modern, Whoami, config, fakemcp, tag, wait_until_gone};

const DEGRADED: &str = "cannot be honoured";
use serde_json::json;

#[test]
fn cwd_scope_over_http_degrades_to_per_call_and_is_logged_once() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("lsp", fakemcp("cwd", &tag, &[]))]));
    let call = || Modern::mcpx_call("lsp", "whoami", json!({}));
    let legacy = LegacySession::open(daemon.url());
    let answers: Vec<Whoami> = vec![
        Whoami::of(&call().send(daemon.url())),
        Whoami::of(&call().session("a").send(daemon.url())),
        Whoami::of(&call().session("a").send(daemon.url())),
        Whoami::of(&legacy.mcpx_call("lsp", "whoami", json!({}))),
        Whoami::of(&legacy.mcpx_call("lsp", "whoami", json!({}))),
    ];
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a.calls, 1, "call {i} reached an instance that had served others: {answers:?}");
        assert!(answers[i + 1..].iter().all(|b| b.instance != a.instance), "two calls shared an instance: {answers:?}");
    }

    let log = daemon.stderr();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(DEGRADED)).collect();
    assert_eq!(warnings.len(), 1, "expected exactly one degradation warning over five calls:\n{log}");
    assert!(
        warnings[0].contains("lsp") && warnings[0].contains("cwd"),
        "the warning must name the server and scope: {}",
        warnings[0]
    );
    assert!(
        warnings[0].contains("mcpx serve"),
        "the warning must name the fix (connect through `mcpx serve`): {}",
        warnings[0]
    );

    let left = wait_until_gone(&tag, Duration::from_secs(5));
    assert!(left.is_empty(), "per-call instances must stop when their call ends; still running: {left:?}");
}

/// `call` is a scope of its own, not a degradation: every call gets a fresh instance that
/// ends with it, and nothing is logged as "cannot be honoured".
#[test]
fn a_call_scoped_server_gets_an_instance_per_call_without_a_degradation_warning() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("repl", fakemcp("call", &tag, &[]))]));
    let answers: Vec<Whoami> = (0..3)
        .map(|i| {
            Whoami::of(
                &Modern::mcpx_call("repl", "whoami", json!({})).session(&format!("s{}", i % 2)).send(daemon.url()),
            )
        })
        .collect();
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a.calls, 1, "call {i} reached a used instance: {answers:?}");
        assert!(answers[i + 1..].iter().all(|b| b.instance != a.instance), "two calls shared an instance: {answers:?}");
    }
    let left = wait_until_gone(&tag, Duration::from_secs(5));
    assert!(left.is_empty(), "per-call instances must stop when their call ends; still running: {left:?}");
    let log = daemon.stderr();
    let noise: Vec<&str> = log.lines().filter(|l| l.contains(DEGRADED)).collect();
    assert!(noise.is_empty(), "a call-scoped server is configured as intended, not degraded: {noise:?}");
}
