//! Supervising upstream processes: a crash mid-call.

use std::time::{Duration, Instant};

use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, poll, processes_with, tag};
use serde_json::json;

/// The call in flight when an upstream dies gets a JSON-RPC error at once (not after a
/// request timeout); the next call starts a fresh instance.
#[test]
fn a_crashed_upstream_fails_its_call_at_once_and_the_next_call_gets_a_new_instance() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("fragile", fakemcp("global", &tag, &[]))]));
    let call = |tool: &str| Modern::mcpx_call("fragile", tool, json!({})).send(daemon.url());
    let before = Whoami::of(&call("whoami"));

    let started = Instant::now();
    let crashed = call("crash");
    let took = started.elapsed();
    assert!(
        crashed.frame().get("error").is_some(),
        "a crashed upstream must fail the call with a JSON-RPC error:\n{crashed}"
    );
    assert!(took < Duration::from_secs(5), "the error took {took:?}: it must come when the upstream dies");

    let after = Whoami::of(&call("whoami"));
    assert_ne!(after.instance, before.instance, "the next call must reach a new instance");
    assert_eq!(after.calls, 1, "the new instance must be fresh: {after:?}");
    assert_ne!(after.pid, before.pid);
    let only_new = poll(Duration::from_secs(5), || (processes_with(&tag) == [after.pid]).then_some(()));
    assert!(only_new.is_some(), "expected only the new instance {} alive, found {:?}", after.pid, processes_with(&tag));
}
