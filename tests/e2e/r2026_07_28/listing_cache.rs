//! Each instance keeps the lists it answered while its server allows: a 2026-07-28 list
//! for its `ttlMs`, a handshake-era one until the server says it changed. Exposed tools
//! are called and searched without listing the server again; a change the server
//! announces shows on the next listing; an instance never serves another's lists, and a
//! restarted one lists afresh.

use std::time::Duration;

use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, poll, tag};
use serde_json::{Value, json};

/// fakemcp in each era, as the list cache sees it: a handshake-era server (kept until it
/// announces a change), and a 2026 one that allows ten minutes.
const ERAS: [(&str, &[&str]); 2] =
    [("legacy", &["--era", "legacy"]), ("modern", &["--era", "modern", "--list-ttl-ms", "600000"])];

/// A config exposing fakemcp as `f` with `scope` and these flags, under its own names.
fn own_names(scope: &str, tag: &str, flags: &[&str]) -> Value {
    let mut cfg = config(&[("f", fakemcp(scope, tag, flags))]);
    cfg["expose"] = json!(["f"]);
    cfg["exposePrefix"] = json!("never");
    cfg
}

fn tool_names(reply: &mcpx_e2e::Reply) -> Vec<String> {
    let tools = reply.result()["tools"].as_array().cloned().unwrap_or_default();
    tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

/// How often the instance that answers `session` (none: the shared one) listed its tools.
fn tool_lists(url: &str, session: Option<&str>) -> u64 {
    let call = Modern::tools_call("whoami", json!({}));
    let reply = match session {
        Some(name) => call.session(name),
        None => call,
    }
    .send(url);
    reply.structured()["toolLists"].as_u64().unwrap_or_else(|| panic!("whoami without toolLists: {reply}"))
}

fn list(url: &str, session: Option<&str>) -> Vec<String> {
    let request = Modern::tools_list();
    tool_names(
        &match session {
            Some(name) => request.session(name),
            None => request,
        }
        .send(url),
    )
}

#[test]
fn exposed_calls_and_searches_use_the_kept_list_and_a_change_shows_on_the_next_listing() {
    for (era, flags) in ERAS {
        let daemon = Daemon::start(&own_names("global", &tag(), flags));
        let url = daemon.url();
        assert!(list(url, None).contains(&"echo".to_owned()), "{era}: echo is not listed");
        for _ in 0..3 {
            let reply = Modern::tools_call("echo", json!({"n": 1})).send(url);
            assert_eq!(reply.structured(), &json!({"n": 1}), "{era}: {reply}");
        }
        let found = Modern::tools_call("mcpx_search", json!({"query": "echo"})).send(url);
        assert!(found.structured()["tools"].as_array().is_some_and(|t| !t.is_empty()), "{era}: {found}");
        list(url, None);
        assert_eq!(
            tool_lists(url, None),
            1,
            "{era}: three calls of an exposed tool, a search and a second listing should all use the first listing"
        );

        let announced = Modern::tools_call("changed", json!({"add": "late"})).send(url);
        assert_eq!(announced.structured()["announced"], "notifications/tools/list_changed", "{era}: {announced}");
        assert!(list(url, None).contains(&"late".to_owned()), "{era}: the announced change did not show");
        assert_eq!(tool_lists(url, None), 2, "{era}: the change should have cost exactly one listing");
    }
}

#[test]
fn two_instances_of_a_session_scoped_server_never_see_each_others_lists() {
    for (era, flags) in ERAS {
        let daemon = Daemon::start(&own_names("session", &tag(), flags));
        let url = daemon.url();
        // Each instance announces one change, so neither can tell the other's list from
        // its own by how often its list changed: only keeping them apart does.
        for (session, added) in [("a", "only_a"), ("b", "only_b")] {
            let announced = Modern::tools_call("changed", json!({"add": added})).session(session).send(url);
            assert_eq!(announced.structured()["announced"], "notifications/tools/list_changed", "{era}: {announced}");
        }
        for (session, own, other) in [("a", "only_a", "only_b"), ("b", "only_b", "only_a"), ("a", "only_a", "only_b")] {
            let listed = list(url, Some(session));
            assert!(listed.contains(&own.to_owned()), "{era}: {session}'s own change did not show: {listed:?}");
            assert!(!listed.contains(&other.to_owned()), "{era}: {session} was shown the other instance's list");
            let unknown = Modern::tools_call(other, json!({})).session(session).send(url);
            let message = unknown.error()["message"].as_str().unwrap_or_default().to_owned();
            assert!(
                message.contains(&format!("unknown tool \"{other}\"")),
                "{era}: {session} reached a tool of the other instance: {unknown}"
            );
        }
    }
}

#[test]
fn a_restarted_instance_lists_afresh() {
    for (era, flags) in ERAS {
        let daemon = Daemon::start(&own_names("global", &tag(), flags));
        let url = daemon.url();
        // Through mcpx_call, which lists nothing: only the listings below fill the cache.
        let call = |tool: &str, arguments: Value| Modern::mcpx_call("f", tool, arguments).send(url);
        call("changed", json!({"add": "late"}));
        assert!(list(url, None).contains(&"late".to_owned()), "{era}: the added tool is not listed");
        let first = Whoami::of(&call("whoami", json!({})));

        // The instance exits; the next call starts another, which never listed `late`.
        call("crash", json!({}));
        let restarted = poll(Duration::from_secs(20), || {
            let reply = call("whoami", json!({}));
            let who = reply.frame().get("result").map(|_| Whoami::of(&reply))?;
            (who.instance != first.instance).then_some(who)
        });
        assert!(restarted.is_some(), "{era}: no fresh instance after the crash");
        // It announces a change too, as its predecessor had: only a list of its own is true.
        call("changed", json!({}));
        let listed = list(url, None);
        assert!(listed.contains(&"echo".to_owned()), "{era}: {listed:?}");
        assert!(!listed.contains(&"late".to_owned()), "{era}: the restarted instance was given its predecessor's list");
    }
}
