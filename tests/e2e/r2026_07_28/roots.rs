//! Roots for scopes: a 2026 caller over HTTP has no cwd, so a `cwd`-scoped server would
//! degrade to one instance per call; a caller that declared `roots` is asked for them (an
//! `input_required` round) and its first `file://` root becomes the request's cwd.

use mcpx_e2e::client::Modern;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{Whoami, config, fakemcp};
use mcpx_e2e::process::{TempDir, tag};
use serde_json::{Value, json};

const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// `whoami` on the cwd-scoped server, answering mcpx's roots question with `root`.
fn whoami_in(daemon: &Daemon, root: &std::path::Path) -> Whoami {
    let params = json!({"name": "mcpx_call", "arguments": {"server": "lsp", "tool": "whoami"}});
    whoami_answering(daemon, root, params, None)
}

/// A call of `whoami` with `params`, as `session` (if any), answering mcpx's roots
/// question with `root`.
fn whoami_answering(daemon: &Daemon, root: &std::path::Path, params: Value, session: Option<&str>) -> Whoami {
    let call = |extra: Value| {
        let mut params = params.clone();
        for (k, v) in extra.as_object().into_iter().flatten() {
            params[k] = v.clone();
        }
        let request = Modern::new("tools/call", params).meta(CAPABILITIES, json!({"roots": {}}));
        match session {
            Some(name) => request.session(name),
            None => request,
        }
        .send(daemon.url())
    };
    let asked = call(json!({}));
    let result = asked.result();
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let (key, question) = result["inputRequests"].as_object().unwrap().iter().next().unwrap();
    assert_eq!(question["method"], "roots/list", "{asked}");
    let answer = json!({"roots": [{"uri": format!("file://{}", root.display()), "name": "work"}]});
    let retry = json!({"inputResponses": {key.clone(): answer}, "requestState": result["requestState"]});
    Whoami::of(&call(retry))
}

#[test]
fn a_caller_that_declares_roots_gets_the_instance_of_its_first_root() {
    let t = tag();
    let (one, two) = (TempDir::new(), TempDir::new());
    let daemon = Daemon::start(&config(&[("lsp", fakemcp("cwd", &t, &[]))]));
    let a = whoami_in(&daemon, one.path());
    let a_again = whoami_in(&daemon, one.path());
    let b = whoami_in(&daemon, two.path());
    assert_eq!(a.instance, a_again.instance, "one root, one instance");
    assert_eq!(a_again.calls, 2);
    assert_ne!(a.instance, b.instance, "another root, another instance");
    let canonical = |p: &std::path::Path| p.canonicalize().unwrap();
    assert_eq!(std::path::PathBuf::from(a.cwd.unwrap()).canonicalize().unwrap(), canonical(one.path()));
    assert_eq!(std::path::PathBuf::from(b.cwd.unwrap()).canonicalize().unwrap(), canonical(two.path()));
}

/// Finding an exposed tool lists its server through the instance the caller has before
/// it names a root (a per-call one, for a caller with a session); the call itself goes
/// to the root's instance, by its own name and prefixed.
#[test]
fn an_exposed_tool_runs_in_the_callers_root_not_where_it_was_listed() {
    let t = tag();
    let root = TempDir::new();
    for prefix in ["never", "always"] {
        let mut cfg = config(&[("lsp", fakemcp("cwd", &t, &[]))]);
        cfg["expose"] = json!(["lsp"]);
        cfg["exposePrefix"] = json!(prefix);
        let daemon = Daemon::start(&cfg);
        let name = if prefix == "never" { "whoami" } else { "lsp__whoami" };
        let params = json!({"name": name, "arguments": {}});
        let first = whoami_answering(&daemon, root.path(), params.clone(), Some("a"));
        let again = whoami_answering(&daemon, root.path(), params, Some("a"));
        let cwd = first.cwd.as_deref().map(|dir| std::path::PathBuf::from(dir).canonicalize().unwrap());
        assert_eq!(cwd, Some(root.path().canonicalize().unwrap()), "exposePrefix {prefix}: {first:?}");
        assert_eq!((again.instance, again.calls), (first.instance, 2), "exposePrefix {prefix}: one root, one instance");
    }
}

#[test]
fn a_caller_without_roots_still_degrades_to_one_instance_per_call() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("lsp", fakemcp("cwd", &t, &[]))]));
    let first = Whoami::of(&Modern::mcpx_call("lsp", "whoami", json!({})).send(daemon.url()));
    let second = Whoami::of(&Modern::mcpx_call("lsp", "whoami", json!({})).send(daemon.url()));
    assert_ne!(first.instance, second.instance);
}

#[test]
fn roots_that_name_no_directory_degrade_instead_of_asking_again() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("lsp", fakemcp("cwd", &t, &[]))]));
    let call = |extra: Value| {
        let mut params = json!({"name": "mcpx_call", "arguments": {"server": "lsp", "tool": "whoami"}});
        for (k, v) in extra.as_object().into_iter().flatten() {
            params[k] = v.clone();
        }
        Modern::new("tools/call", params).meta(CAPABILITIES, json!({"roots": {}})).send(daemon.url())
    };
    let asked = call(json!({}));
    let key = asked.result()["inputRequests"].as_object().unwrap().keys().next().unwrap().clone();
    let answer = json!({"roots": [{"uri": "https://example.com/not-a-directory"}]});
    let retry = json!({"inputResponses": {key: answer}, "requestState": asked.result()["requestState"]});
    let done = call(retry);
    assert_ne!(done.result()["resultType"], "input_required", "asked again: {done}");
    Whoami::of(&done);
}
