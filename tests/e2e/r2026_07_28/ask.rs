//! The ask path for callers who cannot answer in-band: an upstream's question during
//! `mcpx call` is kept, the call exits 75 naming the command that answers it, and the same
//! session answers later with `mcpx ask answer` (or declines), which carries the call on.
//! Another session neither sees nor answers it. Both kinds of upstream: a handshake-era one
//! that asks mid-call (its call is held) and a 2026 one that returns `input_required`.

use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use serde_json::Value;

fn daemon() -> Daemon {
    let t = tag();
    Daemon::start(&config(&[
        ("old", fakemcp("global", &t, &["--fixture", "conformance", "--era", "legacy"])),
        ("new", fakemcp("global", &t, &["--fixture", "conformance"])),
    ]))
}

/// The id of the one question waiting for `session`.
fn waiting(daemon: &Daemon, session: &str) -> (String, Value) {
    let listed = daemon.home().cli(&["ask", "ls", "--json", "--session", session]);
    listed.assert_code(0);
    let body: Value = serde_json::from_str(&listed.stdout).expect("ask ls --json prints JSON");
    let questions = body["questions"].as_array().expect("questions").clone();
    assert_eq!(questions.len(), 1, "{body}");
    (questions[0]["id"].as_str().unwrap().to_owned(), questions[0].clone())
}

#[test]
fn a_question_from_a_call_is_answered_later_by_the_same_session_only() {
    let daemon = daemon();
    let home = daemon.home();
    for (server, tool, args, answer, expected) in [
        (
            "old",
            "test_elicitation",
            r#"{"message": "Your name?"}"#,
            r#"{"action": "accept", "content": {"response": "Ada"}}"#,
            "Ada",
        ),
        (
            "new",
            "test_input_required_result_elicitation",
            "{}",
            r#"{"action": "accept", "content": {"name": "Grace"}}"#,
            "Hello, Grace!",
        ),
    ] {
        let call = home.cli(&["call", "--session", "a", &format!("{server}.{tool}"), args]);
        call.assert_code(75);
        assert!(
            call.stdout.contains("elicitation/create") && call.stdout.contains("mcpx ask answer --session a"),
            "{call:?}"
        );
        let (id, question) = waiting(&daemon, "a");
        assert_eq!(question["server"], server);

        // Another session sees nothing and cannot answer.
        let other: Value = serde_json::from_str(&home.cli(&["ask", "ls", "--json", "--session", "b"]).stdout).unwrap();
        assert_eq!(other["questions"], serde_json::json!([]));
        home.cli(&["ask", "answer", "--session", "b", &id, answer]).assert_code(1);

        let answered = home.cli(&["ask", "answer", "--session", "a", &id, answer]);
        answered.assert_code(0);
        assert!(answered.stdout.contains(expected), "{answered:?}");
        // Answered: gone.
        let after: Value = serde_json::from_str(&home.cli(&["ask", "ls", "--json", "--session", "a"]).stdout).unwrap();
        assert_eq!(after["questions"], serde_json::json!([]));
    }
}

#[test]
fn a_form_question_can_be_declined() {
    let daemon = daemon();
    let home = daemon.home();
    home.cli(&["call", "--session", "d", "old.test_elicitation", r#"{"message": "Go on?"}"#]).assert_code(75);
    let (id, _) = waiting(&daemon, "d");
    let declined = home.cli(&["ask", "decline", "--session", "d", &id]);
    declined.assert_code(0);
    assert!(declined.stdout.contains("action=decline"), "{declined:?}");
}

#[test]
fn a_begun_call_is_polled_to_its_question_then_answered() {
    let daemon = daemon();
    let home = daemon.home();
    let begun = home.v1_as(
        "POST",
        "/v1/ask/begin",
        Some(&serde_json::json!({
        "server": "old", "tool": "test_elicitation", "arguments": {"message": "Polled?"}})),
        "p",
    );
    assert_eq!(begun.status, 202, "{}", begun.body);
    let begun_body: Value = serde_json::from_str(&begun.body).unwrap();
    let call = begun_body["call"].as_str().expect("a call id").to_owned();
    // Another session cannot poll it.
    assert_eq!(home.v1_as("GET", &format!("/v1/ask/poll?call={call}&waitMs=100"), None, "q").status, 400);
    let polled = home.v1_as("GET", &format!("/v1/ask/poll?call={call}&waitMs=10000"), None, "p");
    assert_eq!(polled.status, 202, "{}", polled.body);
    let polled: Value = serde_json::from_str(&polled.body).unwrap();
    assert_eq!(polled["status"], "input_required", "{polled}");
    let id = polled["question"]["id"].as_str().unwrap().to_owned();
    let shown = home.cli(&["ask", "show", "--session", "p", &id]);
    shown.assert_code(0);
    assert!(shown.stdout.contains("Polled?"), "{shown:?}");
    let answered =
        home.cli(&["ask", "answer", "--session", "p", &id, r#"{"action": "accept", "content": {"response": "yes"}}"#]);
    answered.assert_code(0);
    assert!(answered.stdout.contains("response"), "{answered:?}");
}
