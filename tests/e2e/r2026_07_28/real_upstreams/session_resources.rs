//! A session-scoped upstream's resources are read from the caller's session's instance
//! only. fakemcp's `fake://meta` resource answers with the `_meta` its read arrived with,
//! which carries mcpx's invocation context (`scope: "session:<name>"`); `whoami` and the
//! processes alive show which instances exist.

use std::time::Duration;

use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, processes_with, tag};
use serde_json::{Map, Value, json};

const URI: &str = "mcpx://f/fake://meta";

/// The `_meta` the upstream saw for a read, from the resource's JSON text.
#[track_caller]
fn meta_of_read(reply: &mcpx_e2e::Reply) -> Map<String, Value> {
    let result = reply.result();
    let content = &result["contents"][0];
    assert_eq!(content["uri"], URI, "{reply}");
    let text = content["text"].as_str().unwrap_or_else(|| panic!("no text: {reply}"));
    match serde_json::from_str(text) {
        Ok(Value::Object(meta)) => meta,
        other => panic!("the resource is not the upstream's _meta ({other:?}): {reply}"),
    }
}

#[track_caller]
fn scope_of_read(reply: &mcpx_e2e::Reply) -> String {
    let meta = meta_of_read(reply);
    meta["dev.mcpx/invocation"]["scope"]
        .as_str()
        .unwrap_or_else(|| panic!("no invocation scope in {meta:?}"))
        .to_owned()
}

#[test]
fn each_session_reads_a_session_scoped_servers_resource_from_its_own_instance() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("session", &t, &[]))]));
    let url = daemon.url();
    let read = |session: &str| Modern::new("resources/read", json!({"uri": URI})).session(session).send(url);

    let alice = read("alice");
    assert_eq!(scope_of_read(&alice), "session:alice");
    assert_eq!(meta_of_read(&alice)["dev.mcpx/invocation"]["sessionId"], "alice");
    // A result routed by who asks is not cacheable by others.
    assert_eq!(alice.result()["ttlMs"], 0, "{alice}");
    assert_eq!(alice.result()["cacheScope"], "private", "{alice}");
    assert_eq!(processes_with(&t).len(), 1, "one instance, for alice");

    let bob = read("bob");
    assert_eq!(scope_of_read(&bob), "session:bob");
    assert_eq!(processes_with(&t).len(), 2, "bob's read started bob's own instance");
    assert_eq!(scope_of_read(&read("alice")), "session:alice", "alice again, her instance");
    assert_eq!(processes_with(&t).len(), 2, "no third instance");

    // The reads went to the instances the sessions' tool calls reach: the same two
    // processes, each with its own tool-call count.
    let whoami = |session: &str| Whoami::of(&Modern::mcpx_call("f", "whoami", json!({})).session(session).send(url));
    let (a1, b1, a2) = (whoami("alice"), whoami("bob"), whoami("alice"));
    assert_eq!((a1.calls, a2.calls, b1.calls), (1, 2, 1), "{a1:?} {a2:?} {b1:?}");
    assert_eq!(a1.instance, a2.instance);
    assert_ne!(a1.instance, b1.instance);
    let mut pids = vec![a1.pid, b1.pid];
    pids.sort_unstable();
    assert_eq!(processes_with(&t), pids, "exactly alice's and bob's instances exist");

    // Another session's read never lands on theirs.
    let carol = read("carol");
    assert_eq!(scope_of_read(&carol), "session:carol");
    let carols = mcpx_e2e::poll(Duration::from_secs(2), || {
        let now = processes_with(&t);
        (now.len() == 3).then_some(now)
    });
    assert!(carols.is_some(), "carol got a third instance: {:?}", processes_with(&t));
    assert_eq!(whoami("carol").calls, 1, "carol's instance served no one else's call");

    // Without a session the read is a scope of its own (a per-call instance).
    let nobody = read_without_session(url);
    let scope = scope_of_read(&nobody);
    assert!(scope.starts_with("call:"), "no session, no shared instance: {scope}");
}

fn read_without_session(url: &str) -> mcpx_e2e::Reply {
    Modern::new("resources/read", json!({"uri": URI})).send(url)
}
