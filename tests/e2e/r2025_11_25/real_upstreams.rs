//! Real upstreams behind mcpx, seen by a handshake-era (2025-11-25) caller in its own
//! Streamable HTTP session: the reference `server-everything` (its whole
//! surface, progress and cancellation with `notifications/cancelled`), `mcp-server-git`,
//! tool definitions with fields mcpx does not know, and a session-scoped server's
//! resources. The 2026 callers' side is in `r2026_07_28::real_upstreams`.

use std::time::{Duration, Instant};

use mcpx_e2e::process::TempDir;
use mcpx_e2e::schema::LEGACY;
use mcpx_e2e::tap::StdioTap;
use mcpx_e2e::upstreams::verbatim::{self, assert_listed_verbatim, fixture, write_fixture};
use mcpx_e2e::upstreams::{
    RawPost, base64_decode, everything_tapped, field_of_each, first_text, git_server, upstream_exchange,
};
use mcpx_e2e::{Daemon, LegacySession, Reply, Whoami, config, fakemcp, poll, processes_with, tag};
use serde_json::{Value, json};

fn everything_daemon(tap: &StdioTap) -> Daemon {
    Daemon::start(&json!({
        "mcpServers": {"everything": everything_tapped(tap, &tag())},
        "expose": ["everything"],
    }))
}

#[test]
fn server_everything_serves_its_whole_surface_to_a_legacy_caller() {
    let tap = StdioTap::new();
    let daemon = everything_daemon(&tap);
    let session = LegacySession::open(daemon.url());

    // Tools.
    let list = session.request("tools/list", json!({}));
    let names = field_of_each(list.result(), "tools", "name");
    for tool in ["everything__echo", "everything__get-sum", "everything__trigger-long-running-operation"] {
        assert!(names.contains(&tool), "{tool} is listed: {names:?}");
    }
    let echo = list.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "everything__echo").unwrap();
    assert_eq!(echo["execution"], json!({"taskSupport": "forbidden"}), "{echo}");
    assert_eq!(echo["annotations"]["readOnlyHint"], true, "{echo}");
    let reply = session.tools_call("everything__echo", json!({"message": "legacy ✓"}));
    assert_eq!(first_text(reply.result()), "Echo: legacy ✓", "{reply}");
    let reply = session.mcpx_call("everything", "get-sum", json!({"a": 1.5, "b": 2}));
    assert_eq!(first_text(reply.result()), "The sum of 1.5 and 2 is 3.5.", "{reply}");

    // Resources: text, and binary from a template.
    let list = session.request("resources/list", json!({}));
    let uris = field_of_each(list.result(), "resources", "uri");
    let architecture = "mcpx://everything/demo://resource/static/document/architecture.md";
    assert!(uris.contains(&architecture), "{uris:?}");
    assert!(uris.iter().all(|u| u.starts_with("mcpx://everything/demo://")), "{uris:?}");
    let read = session.request("resources/read", json!({"uri": architecture}));
    let content = &read.result()["contents"][0];
    assert_eq!((content["uri"].as_str(), content["mimeType"].as_str()), (Some(architecture), Some("text/markdown")));
    assert!(content["text"].as_str().unwrap_or_default().contains("Architecture"), "{read}");
    let templates = session.request("resources/templates/list", json!({}));
    assert_eq!(field_of_each(templates.result(), "resourceTemplates", "uriTemplate").len(), 2, "{templates}");
    let blob_uri = "mcpx://everything/demo://resource/dynamic/blob/42";
    let read = session.request("resources/read", json!({"uri": blob_uri}));
    let content = &read.result()["contents"][0];
    assert_eq!(content["uri"], blob_uri, "{read}");
    let bytes = base64_decode(content["blob"].as_str().unwrap_or_else(|| panic!("no blob: {read}")));
    assert!(String::from_utf8_lossy(&bytes).starts_with("Resource 42: This is a base64 blob"), "{read}");

    // Prompts and completions.
    let prompts = session.request("prompts/list", json!({}));
    let mut names = field_of_each(prompts.result(), "prompts", "name");
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "everything__args-prompt",
            "everything__completable-prompt",
            "everything__resource-prompt",
            "everything__simple-prompt",
        ],
        "{prompts}"
    );
    let got = session.request("prompts/get", json!({"name": "everything__args-prompt", "arguments": {"city": "Köln"}}));
    assert_eq!(got.result()["messages"][0]["content"]["text"], "What's weather in Köln?", "{got}");
    let completed = session.request(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "everything__completable-prompt"},
               "argument": {"name": "department", "value": "S"}}),
    );
    assert_eq!(completed.result()["completion"]["values"], json!(["Sales", "Support"]), "{completed}");

    // Progress, under the caller's own token, before the result.
    let reply = session.request(
        "tools/call",
        json!({"name": "everything__trigger-long-running-operation",
               "arguments": {"duration": 0.6, "steps": 3}, "_meta": {"progressToken": 77}}),
    );
    assert_progress_then_result(&reply, &json!(77), 3);
}

#[track_caller]
fn assert_progress_then_result(reply: &Reply, token: &Value, steps: u64) {
    assert!(reply.content_type().starts_with("text/event-stream"), "{reply}");
    let last = reply.frames.len() - 1;
    assert!(reply.frames[last].get("result").is_some(), "the result comes last:\n{reply}");
    assert_eq!(reply.frames[..last].len() as u64, steps, "{reply}");
    for (step, note) in reply.frames[..last].iter().enumerate() {
        assert_eq!(note["method"], "notifications/progress", "{note}");
        assert_eq!(note["params"]["progressToken"], *token, "{note}");
        assert_eq!(note["params"]["progress"], json!(step + 1), "{note}");
        assert_eq!(note["params"]["total"], json!(steps), "{note}");
    }
}

/// A handshake-era caller cancels with `notifications/cancelled`: its stream ends without
/// an answer, the upstream is told (in its own ids), and the session serves on.
#[test]
fn notifications_cancelled_from_a_legacy_caller_reaches_server_everything() {
    let tap = StdioTap::new();
    let daemon = everything_daemon(&tap);
    let session = LegacySession::open(daemon.url());
    let headers: Vec<(String, String)> = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", session.id()),
        ("MCP-Protocol-Version", LEGACY),
    ]
    .iter()
    .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
    .collect();
    let call = json!({"jsonrpc": "2.0", "id": "long-1", "method": "tools/call", "params": {
        "name": "everything__trigger-long-running-operation",
        "arguments": {"duration": 8, "steps": 16}, "_meta": {"progressToken": "p-1"}}});
    let mut post = RawPost::send(daemon.url(), LEGACY, &headers, &call);
    assert_eq!(post.status(), 200, "{:?}", post.head);
    let first = post.read_until(Duration::from_secs(10), |f| f["method"] == "notifications/progress");
    assert_eq!(first["params"]["progressToken"], "p-1", "{first}");

    let started = Instant::now();
    let ack =
        session.notify("notifications/cancelled", json!({"requestId": "long-1", "reason": "the user pressed stop"}));
    assert_eq!(ack.status, 202, "{ack}");
    let rest = post.rest();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the stream must end at the cancellation, not with the 8 s operation: {:?}",
        started.elapsed()
    );
    assert!(
        rest.iter().all(|f| f.get("result").is_none() && f.get("error").is_none()),
        "a cancelled request gets no answer: {rest:?}"
    );

    let (upstream_call, _) =
        upstream_exchange(&tap, "tools/call", |f| f["params"]["name"] == "trigger-long-running-operation")
            .expect("the call went upstream");
    let cancelled = poll(Duration::from_secs(3), || {
        tap.sent()
            .into_iter()
            .find(|f| f["method"] == "notifications/cancelled" && f["params"]["requestId"] == upstream_call["id"])
    });
    assert!(
        cancelled.is_some(),
        "the upstream was not told about the cancellation of its request {}:\n{}",
        upstream_call["id"],
        tap.transcript()
    );
    let reply = session.tools_call("everything__echo", json!({"message": "after cancel"}));
    assert_eq!(first_text(reply.result()), "Echo: after cancel", "{reply}");
}

#[test]
fn git_log_of_a_real_repository_for_a_legacy_caller() {
    let dir = TempDir::new();
    let repo = mcpx_e2e::git::init_repo(&dir.path().join("repo"), &["src"]);
    mcpx_e2e::git::git(&repo, &["commit", "-q", "--allow-empty", "-m", "second commit"]);
    let head = mcpx_e2e::git::git(&repo, &["rev-parse", "HEAD"]);
    let daemon = Daemon::start(&config(&[("git", git_server(&repo))]));
    let session = LegacySession::open(daemon.url());
    let log = session.mcpx_call("git", "git_log", json!({"repo_path": repo, "max_count": 1}));
    let text = first_text(log.result());
    assert!(text.contains(&head) && text.contains("second commit"), "{text}");
    assert!(!text.contains("Message: init"), "max_count 1 reached the server: {text}");
    std::fs::write(repo.join("src/file"), "changed\n").unwrap();
    let status = session.mcpx_call("git", "git_status", json!({"repo_path": repo}));
    assert!(first_text(status.result()).contains("src/file"), "{status}");
}

#[test]
fn unknown_tool_fields_reach_a_legacy_caller_unchanged_from_upstreams_of_both_eras() {
    let dir = TempDir::new();
    let tools = write_fixture(dir.path());
    let daemon = Daemon::start(&verbatim::config(&tools));
    let session = LegacySession::open(daemon.url());
    let list = session.request("tools/list", json!({}));
    assert_listed_verbatim(list.result(), "old");
    assert_listed_verbatim(list.result(), "new");
    for server in ["old", "new"] {
        let reply = session.tools_call(&format!("{server}__odd"), json!({"q": "x"}));
        // Exactly as written: no 2026 envelope, no upstream serverInfo, nothing dropped.
        assert_eq!(*reply.result(), fixture()["result"], "{server}:\n{reply}");
    }
}

#[test]
fn two_legacy_sessions_read_a_session_scoped_resource_from_their_own_instances() {
    let t = tag();
    let daemon = Daemon::start(&config(&[("f", fakemcp("session", &t, &[]))]));
    let (one, two) = (LegacySession::open(daemon.url()), LegacySession::open(daemon.url()));
    let scope = |session: &LegacySession| {
        let reply = session.request("resources/read", json!({"uri": "mcpx://f/fake://meta"}));
        let text = reply.result()["contents"][0]["text"].as_str().unwrap_or_default().to_owned();
        let meta: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {reply}"));
        meta["dev.mcpx/invocation"]["scope"].as_str().unwrap_or_default().to_owned()
    };
    // Each session its own key, stable, and never its Mcp-Session-Id.
    let (first, second) = (scope(&one), scope(&two));
    assert!(first.starts_with("http-session:") && !first.contains(one.id()), "{first}");
    assert!(second.starts_with("http-session:") && !second.contains(two.id()), "{second}");
    assert_ne!(first, second);
    assert_eq!(scope(&one), first);
    let (w1, w2) =
        (Whoami::of(&one.mcpx_call("f", "whoami", json!({}))), Whoami::of(&two.mcpx_call("f", "whoami", json!({}))));
    assert_eq!((w1.calls, w2.calls), (1, 1), "each session's instance is its own");
    assert_ne!(w1.pid, w2.pid);
    let mut pids = vec![w1.pid, w2.pid];
    pids.sort_unstable();
    assert_eq!(processes_with(&t), pids, "the reads started no other instance");
}
