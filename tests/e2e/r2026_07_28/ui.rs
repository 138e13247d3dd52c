//! `/ui`, the daemon's status page, rendered by headless Chromium (Debian's `chromium`,
//! pinned by scripts/deps.sh) driven over the DevTools protocol by `tests/node/ui_page.js`:
//! it shows the daemon's servers, follows an instance starting and a call being journaled
//! without a reload, follows sessions, streams, questions and artifacts as they come and
//! go, and shows an upstream's hostile error text as text. `/ui` and `/ui/state` sit
//! behind the same admission as every route, and `/ui/state` shows a token holder only
//! what `/v1` would: its own sessions, questions, artifacts and journal records.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use std::time::Duration;

use mcpx_e2e::client::{LegacySession, base_url, plain};
use mcpx_e2e::process::{TempDir, poll};
use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, node, paths, tag};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
/// What the broken server's command is named: markup that would run if the page ever
/// treated an upstream's error text as HTML.
const HOSTILE: &str = "/nonexistent/<img src=x onerror=\"window.__pwned=1\">";

/// `tests/node/ui_page.js` with its Chromium; killed on drop.
struct Page {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    _profile: TempDir,
}

impl Page {
    fn open(url: &str) -> Page {
        assert!(
            std::path::Path::new(CHROMIUM).exists(),
            "{CHROMIUM} is missing: scripts/deps.sh installs Debian's chromium"
        );
        let profile = TempDir::new();
        let mut child = Command::new(node::node())
            .arg(node::script("ui_page.js"))
            .arg(CHROMIUM)
            .arg(profile.path())
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ui_page.js");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Page { child, stdin, stdout, _profile: profile }
    }

    #[track_caller]
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("write to ui_page.js");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read from ui_page.js");
        assert!(!line.is_empty(), "ui_page.js ended on {command:?} (its stderr says why)");
        line.trim_end().to_owned()
    }

    #[track_caller]
    fn until(&mut self, expression: &str) {
        assert_eq!(self.ask(&format!("until {expression}")), "true");
    }

    fn eval(&mut self, expression: &str) -> Value {
        let line = self.ask(&format!("eval {expression}"));
        serde_json::from_str(line.strip_prefix("value ").expect("a value line")).expect("JSON")
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.wait();
        }
    }
}

fn rows(table: &str) -> String {
    format!("document.querySelectorAll('#{table} tbody tr').length")
}

#[test]
fn the_page_shows_servers_follows_an_instance_and_renders_error_text_as_text() {
    let cfg = config(&[("fake", fakemcp("global", &tag(), &[])), ("broken", json!({"command": HOSTILE}))]);
    let daemon = Daemon::start(&cfg);
    let base = base_url(daemon.url()).to_owned();
    let mut page = Page::open(&format!("{base}/ui"));

    page.until(&format!("{} === 2", rows("servers")));
    assert_eq!(page.eval(&rows("instances")), json!(0), "an instance before any call");

    // A call starts fake's instance: the open page shows it without a reload.
    Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    page.until(&format!("{} === 1", rows("instances")));
    page.until("document.querySelector('#instances tbody tr td').textContent === 'fake'");
    // And the call, from the journal: in the recent calls, and counted on fake's row.
    page.until("document.querySelector('#calls tbody').innerText.includes('tools/call whoami')");
    page.until("document.querySelector('tr[data-server=fake] td:nth-child(4)').textContent === '1'");
    page.until("document.querySelector('#instances tbody tr td:nth-child(7)').textContent === '1'");

    // The broken server fails to start; its error (naming the hostile command) is text.
    let _ = Modern::mcpx_call("broken", "anything", json!({})).send(daemon.url());
    page.until("document.querySelector('tr[data-server=broken] td.error').textContent.includes('<img src=x')");
    assert_eq!(page.eval("document.querySelectorAll('img').length"), json!(0), "the error text became markup");
    assert_eq!(page.eval("window.__pwned === undefined"), json!(true), "the error text ran");
    let state = page.eval("document.querySelector('tr[data-server=broken]').innerText");
    assert!(state.as_str().is_some_and(|s| s.contains("failing") || s.contains("crash-looping")), "{state}");
}

/// A `/v1/call` to the conformance fixture's tool that asks the caller's name: it waits as a
/// question (202). Its id.
#[track_caller]
fn ask_name(base: &str, headers: &[(&str, &str)]) -> String {
    let mut headers = headers.to_vec();
    headers.push(("Content-Type", "application/json"));
    let body = json!({"server": "asks", "tool": "test_input_required_result_elicitation", "arguments": {}});
    let asked = plain("POST", &format!("{base}/v1/call"), &headers, Some(&body.to_string()));
    assert_eq!(asked.status, 202, "{asked}");
    asked.json()["question"]["id"].as_str().expect("a question id").to_owned()
}

/// `mcpx_exec` keeping an artifact named `name` in `session`.
#[track_caller]
fn keep_artifact(session: &LegacySession, name: &str) {
    let script = format!("return await artifact({name:?}, 'kept')");
    let kept = session.tools_call("mcpx_exec", json!({ "script": script }));
    assert_ne!(kept.result()["isError"], json!(true), "{kept}");
}

fn text_of(table: &str) -> String {
    format!("document.querySelector('#{table} tbody').innerText")
}

#[test]
fn the_page_follows_sessions_streams_questions_and_artifacts_as_they_come_and_go() {
    let t = tag();
    let cfg = config(&[
        ("fake", fakemcp("global", &t, &[])),
        ("asks", fakemcp("global", &t, &["--fixture", "conformance"])),
        ("broken", json!({"command": "/nonexistent/mcp-server"})),
    ]);
    let daemon = Daemon::start(&cfg);
    let base = base_url(daemon.url()).to_owned();
    let mut page = Page::open(&format!("{base}/ui"));
    page.until(&format!("{} === 3", rows("servers")));
    for table in ["sessions", "questions", "artifacts"] {
        assert_eq!(page.eval(&rows(table)), json!(0), "{table} before anyone came");
    }

    // A handshake-era HTTP session, then an artifact it keeps: both show without a reload.
    let legacy = LegacySession::open_with(daemon.url(), "2025-11-25");
    page.until(&format!("{}.includes('http session')", text_of("sessions")));
    keep_artifact(&legacy, "notes.txt");
    page.until(&format!("{}.includes('notes.txt')", text_of("artifacts")));
    page.until("document.querySelector('#sessions tbody tr td:nth-child(8)').textContent === '1'");

    // A relayed stdio stream (`mcpx serve`): listed with its process.
    let mut serve = daemon.home().serve().session("relayed").start();
    Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    serve.whoami("fake");
    page.until(&format!("{}.includes('stdio stream (pid {})')", text_of("sessions"), serve.pid()));
    page.until(&format!("{}.includes('session:relayed')", text_of("sessions")));

    // A question waiting for a /v1 caller: what it asks, from which tool.
    let question = ask_name(&base, &[("X-Mcpx-Session", "cli")]);
    page.until(&format!("document.querySelector('tr[data-question=\"{question}\"]') !== null"));
    let asked = page.eval(&format!("document.querySelector('tr[data-question=\"{question}\"]').innerText"));
    assert!(asked.as_str().is_some_and(|a| a.contains("elicitation/create") && a.contains("session:cli")), "{asked}");

    // The broken server's failure and the calls so far, then the picture for docs/.
    let _ = Modern::mcpx_call("broken", "anything", json!({})).send(daemon.url());
    page.until("document.querySelector('tr[data-server=broken] td.error').textContent !== ''");
    page.until(&format!("{}.includes('tools/call whoami')", text_of("calls")));
    let shot = TempDir::new();
    let png = shot.path().join("ui.png");
    assert_eq!(page.ask(&format!("shot {}", png.display())), "shot");
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    // `MCPX_UI_SCREENSHOT=1` refreshes the one in docs/.
    if std::env::var_os("MCPX_UI_SCREENSHOT").is_some() {
        std::fs::write(paths::repo_root().join("docs/ui.png"), &bytes).expect("write docs/ui.png");
    }

    // Each goes when it ends: the question abandoned, the session deleted, the stream closed.
    let abandon = json!({ "id": question }).to_string();
    let headers = [("X-Mcpx-Session", "cli"), ("Content-Type", "application/json")];
    let abandoned = plain("POST", &format!("{base}/v1/ask/abandon"), &headers, Some(&abandon));
    assert_eq!(abandoned.status, 200, "{abandoned}");
    page.until(&format!("{} === 0", rows("questions")));
    assert_eq!(legacy.delete().status, 204);
    page.until(&format!("!{}.includes('http session')", text_of("sessions")));
    serve.close_stdin();
    assert!(serve.wait(Duration::from_secs(30)).is_some(), "mcpx serve did not end at the end of its input");
    page.until(&format!("{} === 0", rows("sessions")));
}

/// `/ui/state` as this bearer sees it.
#[track_caller]
fn ui_state(base: &str, token: &str) -> Value {
    let state = plain("GET", &format!("{base}/ui/state"), &[("Authorization", &format!("Bearer {token}"))], None);
    assert_eq!(state.status, 200, "{state}");
    state.json()
}

#[test]
fn a_token_holder_sees_only_its_own_sessions_questions_artifacts_and_calls() {
    const ALICE: &str = "ui-alice-0123456789abcdef";
    const BOB: &str = "ui-bob-0123456789abcdef01";
    let t = tag();
    let mut cfg =
        config(&[("fake", fakemcp("global", &t, &[])), ("asks", fakemcp("global", &t, &["--fixture", "conformance"]))]);
    cfg["http"] = json!({"tokens": {"alice": ALICE, "bob": BOB}});
    let daemon = Daemon::start(&cfg);
    let base = base_url(daemon.url()).to_owned();

    let mut kept = Vec::new();
    for (name, token) in [("alice", ALICE), ("bob", BOB)] {
        let bearer = format!("Bearer {token}");
        let session = LegacySession::open_as(daemon.url(), "2025-11-25", &[("Authorization", &bearer)]);
        keep_artifact(&session, &format!("{name}-notes.txt"));
        let question = ask_name(&base, &[("Authorization", &bearer)]);
        Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).header("Authorization", &bearer).send(daemon.url()));
        kept.push((session, question));
    }
    let (alice_question, bob_question) = (kept[0].1.clone(), kept[1].1.clone());

    // The journal writes in batches: wait until alice's call is there.
    let alice = poll(Duration::from_secs(30), || {
        let state = ui_state(&base, ALICE);
        let recent = state["journal"]["recent"].as_array().cloned().unwrap_or_default();
        recent.iter().any(|r| r["name"] == "whoami").then_some(state)
    })
    .expect("alice's call never reached the journal");

    assert_eq!(alice["sees"], "own", "{alice}");
    let sessions = alice["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 1, "alice sees another holder's session: {alice}");
    assert_eq!(alice["sessionsOpen"], 1, "alice counts another holder's session: {alice}");
    assert_eq!(sessions[0]["client"], "token:alice");
    assert_eq!(sessions[0]["artifacts"][0]["name"], "alice-notes.txt", "{alice}");
    let questions: Vec<&Value> = alice["questions"].as_array().expect("questions").iter().map(|q| &q["id"]).collect();
    assert_eq!(questions, [&json!(alice_question)], "{alice}");
    let recent = alice["journal"]["recent"].as_array().expect("recent calls");
    assert!(recent.iter().all(|r| r["client"] == "alice"), "alice sees another holder's calls: {alice}");
    assert_eq!(alice["streams"], json!([]), "{alice}");
    // Calls per instance: alice's own, on the global instance both holders used.
    let per_instance = alice["journal"]["instances"].as_array().expect("calls per instance");
    let fake = per_instance.iter().find(|g| g["key"] == "fake[global]");
    assert_eq!(fake.map(|g| &g["calls"]), Some(&json!(1)), "{alice}");
    let text = alice.to_string();
    for bobs in ["bob", &bob_question] {
        assert!(!text.contains(bobs), "alice's /ui/state shows {bobs:?}: {text}");
    }

    // The daemon's owner (the local user, over the socket) sees both.
    let owner = daemon.home().v1("GET", "/ui/state", None);
    assert_eq!(owner.status, 200, "{}", owner.body);
    let owner: Value = serde_json::from_str(&owner.body).expect("JSON");
    assert_eq!(owner["sees"], "everyone");
    assert_eq!(owner["sessions"].as_array().map(Vec::len), Some(2), "{owner}");
    assert_eq!(owner["questions"].as_array().map(Vec::len), Some(2), "{owner}");
    let calls = |state: &Value| {
        state["journal"]["instances"].as_array().and_then(|g| g.iter().find(|g| g["key"] == "fake[global]")).cloned()
    };
    let owners = poll(Duration::from_secs(30), || {
        let owner: Value = serde_json::from_str(&daemon.home().v1("GET", "/ui/state", None).body).ok()?;
        calls(&owner).filter(|g| g["calls"] == 2)
    });
    assert!(owners.is_some(), "the owner never saw both holders' calls on fake[global]");
}

#[test]
fn the_page_carries_a_strict_csp_and_its_state_needs_the_token() {
    const TOKEN: &str = "ui-token-0123456789abcdef";
    let mut cfg = config(&[("fake", fakemcp("global", &tag(), &[]))]);
    cfg["http"] = json!({"tokens": {"ci": TOKEN}});
    let daemon = Daemon::start(&cfg);
    let base = base_url(daemon.url());
    let bearer = format!("Bearer {TOKEN}");
    for path in ["/ui", "/ui/state", "/ui/app.js"] {
        let none = plain("GET", &format!("{base}{path}"), &[], None);
        assert_eq!(none.status, 401, "{path} without the token: {none}");
        assert!(!none.body.contains("fake"), "{path} leaked the servers: {none}");
    }
    let page = plain("GET", &format!("{base}/ui"), &[("Authorization", &bearer)], None);
    assert_eq!(page.status, 200, "{page}");
    let csp = page.headers.iter().find(|(n, _)| n == "content-security-policy").map(|(_, v)| v.clone());
    let csp = csp.unwrap_or_else(|| panic!("no CSP: {page}"));
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe"), "{csp}");
    let state = plain("GET", &format!("{base}/ui/state"), &[("Authorization", &bearer)], None);
    assert_eq!(state.status, 200, "{state}");
    let state: Value = serde_json::from_str(&state.body).expect("JSON");
    assert_eq!(state["servers"][0]["name"], "fake");
}

#[test]
fn the_script_never_writes_markup() {
    let script = std::fs::read_to_string(paths::repo_root().join("crates/server/src/ui/app.js")).unwrap();
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
        assert!(!script.contains(sink), "app.js uses {sink}");
    }
}
