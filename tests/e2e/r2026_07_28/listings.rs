//! Listings from callers whose scope degraded to `call` (a 2026 request that names no
//! session, asking a `session`-scoped server): hosts fan out `tools/list`, `prompts/list`
//! and `resources/list` as they connect, and none of them may cost a process start. They
//! are served by one kept lister instance per server; calls and reads keep an instance
//! of their own, and a caller with a session still lists through its own instance.

use std::path::Path;
use std::time::Duration;

use mcpx_e2e::process::TempDir;
use mcpx_e2e::{Daemon, LegacySession, Modern, Whoami, config, fakemcp, tag, wait_until_gone};
use serde_json::{Value, json};

/// What a host sends as it connects, with whether each one lists the tools of a server.
const LISTINGS: [(&str, bool); 5] = [
    ("tools/list", true),
    ("prompts/list", false),
    ("resources/list", false),
    ("resources/templates/list", false),
    ("mcpx_search", true),
];

/// A fakemcp entry with `scope` that appends each of its process starts to `starts`.
fn recorded(scope: &str, tag: &str, starts: &Path) -> Value {
    fakemcp(scope, tag, &["--record-start", starts.to_str().expect("a UTF-8 temp path")])
}

/// The instance ids of the processes started so far, in the order they started.
fn started(starts: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(starts).unwrap_or_default();
    text.lines().map(|line| line.split(' ').next().unwrap_or_default().to_owned()).collect()
}

/// Sends every request of [`LISTINGS`] once, as `session` (none: a caller with no
/// session), and checks that each lists what `server` offers.
#[track_caller]
fn list_everything(url: &str, session: Option<&str>, server: &str) {
    for (method, _) in LISTINGS {
        let request = match method {
            "mcpx_search" => Modern::tools_call("mcpx_search", json!({"query": ""})),
            _ => Modern::new(method, json!({})),
        };
        let request = match session {
            Some(name) => request.session(name),
            None => request,
        };
        let reply = request.send(url);
        let result = reply.result();
        let listed = match method {
            "tools/list" => names(&result["tools"], "name").contains(&format!("{server}__whoami")),
            "prompts/list" => names(&result["prompts"], "name").contains(&format!("{server}__meta")),
            "resources/list" => names(&result["resources"], "uri").contains(&format!("mcpx://{server}/fake://meta")),
            "resources/templates/list" => result["resourceTemplates"].is_array(),
            _ => names(&reply.structured()["tools"], "server").contains(&server.to_owned()),
        };
        assert!(listed, "{method} without {server}'s items: {result}");
    }
}

fn names(items: &Value, field: &str) -> Vec<String> {
    let items = items.as_array().map(Vec::as_slice).unwrap_or_default();
    items.iter().filter_map(|item| item[field].as_str().map(str::to_owned)).collect()
}

fn exposed(servers: &[(&str, Value)]) -> Value {
    let mut cfg = config(servers);
    cfg["expose"] = servers.iter().map(|(name, _)| json!(name)).collect();
    cfg
}

#[test]
fn listings_without_a_session_start_one_lister_not_a_process_each() {
    let (tag, dir) = (tag(), TempDir::new());
    let starts = dir.path().join("browser.starts");
    let daemon = Daemon::start(&exposed(&[("browser", recorded("session", &tag, &starts))]));
    for _ in 0..3 {
        list_everything(daemon.url(), None, "browser");
    }
    // As hosts do when they connect: all at once, from several callers.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| list_everything(daemon.url(), None, "browser"));
        }
    });
    let processes = started(&starts);
    assert_eq!(
        processes.len(),
        1,
        "{} listings without a session started {} processes; one lister should answer them all",
        7 * LISTINGS.len(),
        processes.len()
    );
}

#[test]
fn a_tool_call_or_read_without_a_session_still_gets_an_instance_of_its_own() {
    let (tag, dir) = (tag(), TempDir::new());
    let starts = dir.path().join("browser.starts");
    let daemon = Daemon::start(&exposed(&[("browser", recorded("session", &tag, &starts))]));
    list_everything(daemon.url(), None, "browser");
    list_everything(daemon.url(), None, "browser");
    let lister = started(&starts);
    assert_eq!(lister.len(), 1, "listings without a session started {lister:?}");

    let call = || Modern::mcpx_call("browser", "whoami", json!({})).send(daemon.url());
    let (first, second) = (call(), call());
    for reply in [&first, &second] {
        let who = Whoami::of(reply);
        assert_eq!(who.calls, 1, "a call reached an instance that had served another: {who:?}");
        assert_ne!(who.instance, lister[0], "a call reached the lister, which serves listings only");
        assert_eq!(reply.structured()["toolLists"], json!(0), "the call's instance listed tools for someone");
    }
    assert_ne!(
        Whoami::of(&first).instance,
        Whoami::of(&second).instance,
        "two calls without a session shared an instance"
    );
    let read = Modern::new("resources/read", json!({"uri": "mcpx://browser/fake://meta"})).send(daemon.url());
    assert!(read.result()["contents"].is_array(), "{read}");

    // Two calls and a read: a process each, and the lister kept for the next listings.
    list_everything(daemon.url(), None, "browser");
    let processes = started(&starts);
    assert_eq!(processes.len(), 4, "expected the lister plus one process per call and read: {processes:?}");
    assert_eq!(processes[0], lister[0]);
    assert!(!processes[1..].contains(&lister[0]), "{processes:?}");
}

#[test]
fn a_caller_with_a_session_lists_through_its_own_instance_never_the_lister() {
    let (tag, dir) = (tag(), TempDir::new());
    let browser_starts = dir.path().join("browser.starts");
    let lsp_starts = dir.path().join("lsp.starts");
    let daemon = Daemon::start(&exposed(&[
        ("browser", recorded("session", &tag, &browser_starts)),
        // Over HTTP a cwd scope degrades to `call` even for a caller with a session.
        ("lsp", recorded("cwd", &tag, &lsp_starts)),
    ]));
    list_everything(daemon.url(), None, "browser");
    list_everything(daemon.url(), None, "lsp");
    let (browser_lister, lsp_lister) = (started(&browser_starts), started(&lsp_starts));
    assert_eq!(browser_lister.len(), 1, "listings without a session started {browser_lister:?}");
    assert_eq!(lsp_lister.len(), 1, "listings without a session started {lsp_lister:?}");

    let rounds = 2;
    for _ in 0..rounds {
        list_everything(daemon.url(), Some("a"), "browser");
    }
    // Session "a" has one instance of the session-scoped server, which did its listings.
    let browser = started(&browser_starts);
    assert_eq!(browser.len(), 2, "session \"a\" should have started exactly its own instance: {browser:?}");
    let who = Modern::mcpx_call("browser", "whoami", json!({})).session("a").send(daemon.url());
    assert_eq!(Whoami::of(&who).instance, browser[1], "session \"a\" called another instance than its own");
    let tool_listings = rounds * LISTINGS.iter().filter(|(_, lists_tools)| *lists_tools).count();
    assert_eq!(
        who.structured()["toolLists"],
        json!(tool_listings),
        "session \"a\"'s tool listings did not all reach its own instance"
    );
    // Its listings of the cwd-scoped server each had an instance of their own, as before.
    let lsp = started(&lsp_starts);
    assert_eq!(
        lsp.len(),
        1 + rounds * LISTINGS.len(),
        "a caller with a session listed through the lister, or shared an instance: {lsp:?}"
    );
}

/// Finding an exposed tool lists its server; the call then goes to the instance that
/// listed it. Of a `call`-scoped server that is one process per call, not one to list
/// and another to call: by its own name (found by listing) and prefixed (listed to check
/// a 2026 caller's `Mcp-Param-*` headers), in both eras.
#[test]
fn an_exposed_call_to_a_call_scoped_server_starts_one_process() {
    let (tag, dir) = (tag(), TempDir::new());
    for prefix in ["never", "always"] {
        let starts = dir.path().join(format!("repl-{prefix}.starts"));
        let mut cfg = exposed(&[("repl", recorded("call", &tag, &starts))]);
        cfg["exposePrefix"] = json!(prefix);
        let daemon = Daemon::start(&cfg);
        let name = if prefix == "never" { "whoami" } else { "repl__whoami" };
        let legacy = LegacySession::open(daemon.url());
        let replies = [Modern::tools_call(name, json!({})).send(daemon.url()), legacy.tools_call(name, json!({}))];
        let processes = started(&starts);
        assert_eq!(processes.len(), replies.len(), "exposePrefix {prefix}: two calls of {name} started {processes:?}");
        for (reply, process) in replies.iter().zip(&processes) {
            let who = Whoami::of(reply);
            assert_eq!(&who.instance, process, "exposePrefix {prefix}: a call went to another process than its own");
            assert_eq!(who.calls, 1, "exposePrefix {prefix}: a call reached a used instance: {who:?}");
        }
        drop(legacy);
        let left = wait_until_gone(&tag, Duration::from_secs(5));
        assert!(left.is_empty(), "exposePrefix {prefix}: per-call instances outlived their calls: {left:?}");
    }
}

/// A prompt or resource a `call`-scoped server names as its own is found by listing the
/// server, and the request for it (a get, a read, a completion) then goes to the instance
/// that listed it: one process per request, in both eras.
#[test]
fn an_own_name_prompt_or_resource_of_a_call_scoped_server_starts_one_process() {
    let (tag, dir) = (tag(), TempDir::new());
    let starts = dir.path().join("repl.starts");
    let mut cfg = exposed(&[("repl", recorded("call", &tag, &starts))]);
    cfg["exposePrefix"] = json!("never");
    let daemon = Daemon::start(&cfg);
    let legacy = LegacySession::open(daemon.url());
    let argument = json!({"name": "topic", "value": ""});
    let requests = [
        ("prompts/get", json!({"name": "meta"})),
        ("resources/read", json!({"uri": "fake://meta"})),
        ("completion/complete", json!({"ref": {"type": "ref/prompt", "name": "meta"}, "argument": argument})),
        ("completion/complete", json!({"ref": {"type": "ref/resource", "uri": "fake://meta"}, "argument": argument})),
    ];
    let mut sent = 0;
    for (method, params) in requests {
        for modern in [true, false] {
            let reply = match modern {
                true => Modern::new(method, params.clone()).send(daemon.url()),
                false => legacy.request(method, params.clone()),
            };
            sent += 1;
            assert!(reply.frame().get("result").is_some(), "{method} {params}: {}", reply.frame());
            let processes = started(&starts);
            assert_eq!(processes.len(), sent, "{method} {params}: {sent} requests started {processes:?}");
        }
    }
    drop(legacy);
    let left = wait_until_gone(&tag, Duration::from_secs(5));
    assert!(left.is_empty(), "per-call instances outlived their requests: {left:?}");
}

/// A caller without a session finds an exposed tool through the server's lister; the
/// call itself still gets an instance of its own, never the lister's.
#[test]
fn an_exposed_call_without_a_session_never_reaches_the_lister() {
    let (tag, dir) = (tag(), TempDir::new());
    let starts = dir.path().join("browser.starts");
    for prefix in ["never", "always"] {
        let mut cfg = exposed(&[("browser", recorded("session", &tag, &starts))]);
        cfg["exposePrefix"] = json!(prefix);
        let daemon = Daemon::start(&cfg);
        let name = if prefix == "never" { "whoami" } else { "browser__whoami" };
        let listed = Modern::tools_list().send(daemon.url());
        assert!(names(&listed.result()["tools"], "name").contains(&name.to_owned()), "{prefix}: {listed}");
        let lister = started(&starts).last().cloned().expect("the lister started");
        for _ in 0..2 {
            let reply = Modern::tools_call(name, json!({})).send(daemon.url());
            let who = Whoami::of(&reply);
            assert_ne!(
                who.instance, lister,
                "exposePrefix {prefix}: a call reached the lister, which serves listings only"
            );
            assert_eq!(who.calls, 1, "exposePrefix {prefix}: a call reached a used instance: {who:?}");
            assert_eq!(reply.structured()["toolLists"], json!(0), "exposePrefix {prefix}: the call's instance listed");
        }
    }
}
