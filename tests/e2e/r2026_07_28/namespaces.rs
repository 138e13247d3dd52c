//! Who may name what: the sessions mcpx derives from a transport (a stdio process, a
//! legacy HTTP session) cannot be reached by any label a caller types, an upstream never
//! learns what admits a caller's requests, and token holders never share a session,
//! an artifact or a question, even when they type the same name.

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::{Daemon, LegacySession, Modern, Whoami, config, fakemcp, tag};
use serde_json::{Value, json};

const ALICE: &str = "alice-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef01";

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// The `mcpx://artifacts/` URIs among the resources listed for `request`.
fn artifacts_listed(reply: &mcpx_e2e::Reply) -> Vec<String> {
    reply.result()["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("a resource list: {reply}"))
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter(|uri| uri.starts_with("mcpx://artifacts/"))
        .map(str::to_owned)
        .collect()
}

/// Keeps an artifact from a script run by the holder of `token` in session `work`.
fn keep_artifact(token: &str, url: &str) -> String {
    let script = "return { uri: await artifact('secret.txt', 'only mine') };";
    let kept = Modern::tools_call("mcpx_exec", json!({ "script": script }))
        .session("work")
        .header("Authorization", &bearer(token))
        .send(url);
    let uri = kept.structured()["uri"].as_str().unwrap_or_else(|| panic!("an artifact URI: {kept}")).to_owned();
    assert!(uri.starts_with("mcpx://artifacts/"), "{kept}");
    uri
}

#[test]
fn a_label_cannot_name_a_session_mcpx_derived_from_a_transport() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("browser", fakemcp("session", &tag, &[]))]));
    let url = daemon.url();
    let home = daemon.home();

    // Two victims whose sessions mcpx derived: a stdio client that named none, and a
    // legacy HTTP session.
    let mut stdio = home.serve().start();
    let stdio_browser = stdio.whoami("browser");
    let legacy = LegacySession::open(url);
    let legacy_browser = Whoami::of(&legacy.mcpx_call("browser", "whoami", json!({})));
    let script = "return { uri: await artifact('s.txt', 'stdio secret') };";
    let kept = stdio.request(&Modern::tools_call("mcpx_exec", json!({ "script": script })).frame());
    assert!(kept.structured()["uri"].as_str().is_some_and(|u| u.starts_with("mcpx://artifacts/")), "{kept:?}");

    // Whatever an HTTP caller types, it reaches neither: the old spellings of those
    // sessions, the instance keys status shows for them, their bare ids.
    let mut labels = vec![
        format!("mcp-{}", stdio.pid()),
        format!("mcp-{}", legacy.id()),
        stdio.pid().to_string(),
        legacy.id().to_owned(),
    ];
    for key in home.instance_keys("browser") {
        labels.push(key.clone());
        labels.extend(key.split_once(':').map(|(_, rest)| rest.to_owned()));
    }
    for label in &labels {
        let forger = Whoami::of(&Modern::mcpx_call("browser", "whoami", json!({})).session(label).send(url));
        assert_ne!(forger.instance, stdio_browser.instance, "the label {label:?} reached the stdio client's browser");
        assert_ne!(
            forger.instance, legacy_browser.instance,
            "the label {label:?} reached the legacy session's browser"
        );
        let listed = Modern::new("resources/list", json!({})).session(label).send(url);
        assert_eq!(
            artifacts_listed(&listed),
            Vec::<String>::new(),
            "the label {label:?} listed the stdio client's artifacts"
        );
    }
    // The victims still have their own.
    assert_eq!(stdio.whoami("browser").instance, stdio_browser.instance);
    assert_eq!(Whoami::of(&legacy.mcpx_call("browser", "whoami", json!({}))).instance, legacy_browser.instance);
    // And a label the caller chose is still joined verbatim by whoever types it.
    let mut named = home.serve().session("shared-by-choice").start();
    let over_http = Modern::mcpx_call("browser", "whoami", json!({})).session("shared-by-choice").send(url);
    assert_eq!(Whoami::of(&over_http).instance, named.whoami("browser").instance);
}

#[test]
fn an_upstream_never_learns_a_callers_legacy_session_id_and_cannot_act_in_that_session() {
    let tag = tag();
    let daemon =
        Daemon::start(&config(&[("f", fakemcp("session", &tag, &[])), ("browser", fakemcp("session", &tag, &[]))]));
    let url = daemon.url();
    let seen_by_upstream = |session: &LegacySession| {
        let reply = session.mcpx_call("f", "meta", json!({}));
        reply.structured()["meta"]["dev.mcpx/invocation"].clone()
    };
    let (one, two) = (LegacySession::open(url), LegacySession::open(url));
    let context = seen_by_upstream(&one);
    let (session_id, scope) =
        (context["sessionId"].as_str().unwrap().to_owned(), context["scope"].as_str().unwrap().to_owned());
    for seen in [&session_id, &scope] {
        assert!(!seen.contains(one.id()), "the upstream saw the Mcp-Session-Id in {seen:?}: {context}");
    }
    assert_eq!(seen_by_upstream(&one)["sessionId"], session_id.as_str(), "stable for the session");
    assert_ne!(seen_by_upstream(&two)["sessionId"], session_id.as_str(), "another session, another value");

    // What a malicious upstream could try with what it saw: name it as a session, or
    // present it as the session header. Neither reaches the caller's browser.
    let victims_browser = Whoami::of(&one.mcpx_call("browser", "whoami", json!({})));
    for label in [&session_id, &scope] {
        let forged = Whoami::of(&Modern::mcpx_call("browser", "whoami", json!({})).session(label).send(url));
        assert_ne!(forged.instance, victims_browser.instance, "{label:?} reached the session's browser");
    }
    let deleted = plain("DELETE", url, &[("Mcp-Session-Id", &session_id)], None);
    assert_eq!(deleted.status, 404, "{deleted}");
    assert_eq!(Whoami::of(&one.mcpx_call("browser", "whoami", json!({}))).instance, victims_browser.instance);
}

fn two_holders() -> (Daemon, String) {
    let tag = tag();
    let mut cfg = config(&[
        ("browser", fakemcp("session", &tag, &[])),
        ("old", fakemcp("global", &tag, &["--fixture", "conformance", "--era", "legacy"])),
    ]);
    cfg["http"] = json!({"tokens": {"alice": ALICE, "bob": BOB}});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url().to_owned();
    (daemon, url)
}

#[test]
fn token_holders_naming_the_same_session_get_their_own_instances_and_artifacts() {
    let (daemon, url) = two_holders();
    let as_holder = |token: &str| {
        Modern::mcpx_call("browser", "whoami", json!({})).session("work").header("Authorization", &bearer(token))
    };
    let alice = Whoami::of(&as_holder(ALICE).send(&url));
    let bob = Whoami::of(&as_holder(BOB).send(&url));
    assert_ne!(alice.instance, bob.instance, "two token holders naming session work shared one browser");
    assert_eq!(Whoami::of(&as_holder(ALICE).send(&url)).instance, alice.instance, "one holder keeps its session");

    let uri = keep_artifact(ALICE, &url);
    let listed = |token: &str| {
        Modern::new("resources/list", json!({})).session("work").header("Authorization", &bearer(token)).send(&url)
    };
    assert_eq!(artifacts_listed(&listed(ALICE)), vec![uri.clone()]);
    assert_eq!(artifacts_listed(&listed(BOB)), Vec::<String>::new(), "bob listed alice's artifact");
    let read = Modern::new("resources/read", json!({"uri": uri}))
        .session("work")
        .header("Authorization", &bearer(BOB))
        .send(&url);
    assert!(read.frame().get("error").is_some(), "bob read alice's artifact: {read}");
    let over_v1 = plain(
        "GET",
        &format!("{}/v1/artifacts", base_url(&url)),
        &[("Authorization", &bearer(BOB)), ("X-Mcpx-Session", "work")],
        None,
    );
    assert_eq!(over_v1.json()["artifacts"], json!([]), "{over_v1}");

    // Status shows bob the shared instances and his own, not alice's session.
    let status =
        plain("GET", &format!("{}/v1/status", base_url(&url)), &[("Authorization", &bearer(BOB))], None).json();
    let pids: Vec<u64> = status["instances"].as_array().unwrap().iter().filter_map(|i| i["pid"].as_u64()).collect();
    assert!(pids.contains(&u64::from(bob.pid)) && !pids.contains(&u64::from(alice.pid)), "{status}");
    drop(daemon);
}

#[test]
fn a_v1_question_is_seen_and_answered_only_by_the_token_holder_it_waits_for() {
    let (_daemon, url) = two_holders();
    let v1 = |method: &str, path: &str, token: &str, body: Option<&Value>| {
        let body = body.map(Value::to_string);
        plain(method, &format!("{}{path}", base_url(&url)), &[("Authorization", &bearer(token))], body.as_deref())
    };
    let call = json!({"server": "old", "tool": "test_elicitation", "arguments": {"message": "Alice's secret?"}});
    let asked = v1("POST", "/v1/call", ALICE, Some(&call));
    assert_eq!(asked.status, 202, "{asked}");
    let id = asked.json()["question"]["id"].as_str().expect("a question id").to_owned();

    let bobs = v1("GET", "/v1/ask", BOB, None);
    assert_eq!(bobs.json()["questions"], json!([]), "bob sees alice's question: {bobs}");
    assert_eq!(v1("GET", &format!("/v1/ask?id={id}"), BOB, None).status, 400);
    let answer =
        json!({"id": id, "responses": {"elicitation": {"action": "accept", "content": {"response": "bob's"}}}});
    let stolen = v1("POST", "/v1/ask/answer", BOB, Some(&answer));
    assert_eq!(stolen.status, 400, "bob answered alice's question: {stolen}");
    assert_eq!(v1("POST", "/v1/ask/abandon", BOB, Some(&json!({"id": id}))).status, 400);

    let alices = v1("GET", "/v1/ask", ALICE, None).json();
    assert_eq!(alices["questions"].as_array().map(Vec::len), Some(1), "{alices}");
    let key =
        alices["questions"][0]["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).expect("a key");
    let answer = json!({"id": id, "responses": {key: {"action": "accept", "content": {"response": "Ada"}}}});
    let answered = v1("POST", "/v1/ask/answer", ALICE, Some(&answer));
    assert_eq!(answered.status, 200, "{answered}");
    assert!(answered.body.contains("Ada"), "{answered}");
}

/// One token holder cannot take every legacy session: at `http.maxSessionsPerClient` its
/// own least recently used idle session makes room, with all of its sessions busy it is
/// refused, and meanwhile another holder opens sessions as usual. A session belongs to
/// the holder that opened it: another token presenting its id finds nothing.
#[test]
fn a_token_holder_cannot_take_every_legacy_session_nor_use_anothers() {
    let tag = tag();
    let mut cfg = config(&[("up", fakemcp("global", &tag, &[]))]);
    cfg["http"] = json!({"tokens": {"alice": ALICE, "bob": BOB}, "maxSessions": 4, "maxSessionsPerClient": 2});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url().to_owned();
    let (alice, bob) = (bearer(ALICE), bearer(BOB));
    let open = |token: &str| LegacySession::open_as(&url, "2025-11-25", &[("Authorization", token)]);

    let first = open(&alice);
    let second = open(&alice);
    assert_eq!(second.request("ping", json!({})).status, 200);
    // A third: alice's least recently used idle session (first) makes room.
    let third = open(&alice);
    assert_eq!(first.request("ping", json!({})).status, 404, "the least recently used idle session should have ended");
    assert_eq!(second.request("ping", json!({})).status, 200);

    // Both of alice's sessions busy: the next one is refused, naming the setting.
    let slow =
        |session: LegacySession| std::thread::spawn(move || session.mcpx_call("up", "slow", json!({"ms": 3000})));
    let (busy_second, busy_third) = (slow(second), slow(third));
    assert!(daemon.home().wait_in_use("up", 2, std::time::Duration::from_secs(20)), "the slow calls never started");
    let refused = mcpx_e2e::client::initialize_with(&url, "2025-11-25", &[("Authorization".into(), alice.clone())]);
    assert_eq!(refused.status, 503, "{refused}");
    assert!(
        refused.frame()["error"]["message"].as_str().unwrap_or_default().contains("http.maxSessionsPerClient"),
        "{refused}"
    );

    // Bob is not held up by alice, and cannot use her session by its id.
    let bobs = open(&bob);
    assert_eq!(bobs.request("ping", json!({})).status, 200);
    let stolen = plain(
        "POST",
        &url,
        &[("Authorization", &bob), ("Mcp-Session-Id", first.id())],
        Some(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#),
    );
    assert_eq!(stolen.status, 404, "{stolen}");
    for busy in [busy_second, busy_third] {
        assert_eq!(busy.join().expect("the slow call").structured()["sleptMs"], 3000);
    }
}
