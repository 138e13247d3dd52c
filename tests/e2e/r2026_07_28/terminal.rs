//! What the owner's terminal receives: text another token holder or an upstream chose (a
//! session label, a server or tool name in a call, a tool's description, an error
//! message) is shown with its control characters escaped, never sent to the terminal raw,
//! where an OSC would retitle the window, a CSI clear the screen and `\r\n` forge a line.

use std::time::Duration;

use mcpx_e2e::{CliRun, Daemon, Modern, config, fakemcp, poll, tag};
use serde_json::json;

const TOKEN: &str = "guest-token-0123456789abcdef";
/// A line that would begin with this in the owner's `mcpx log` was forged.
const FORGED: &str = "2001-01-01T00:00:00.000Z";
/// OSC (retitle), CSI (clear), BEL, `\r\n` and a forged record, and C1 CSI (U+009B).
fn hostile(what: &str) -> String {
    format!("{what}\u{1b}]0;owned\u{7}\u{1b}[2J\r\n{FORGED}  local  forged\u{9b}31m\u{7f}")
}

/// No character a terminal would act on in `run`'s output, beyond the line feeds the CLI
/// writes itself, and no line a caller forged.
#[track_caller]
fn assert_shown_not_sent(run: &CliRun, what: &str) {
    assert_no_raw_controls(run, what);
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(!text.lines().any(|l| l.starts_with(FORGED)), "{what}: a caller forged a line on {stream}:\n{run}");
    }
}

/// As [`assert_shown_not_sent`], for a result's text: many lines by nature, its line feeds
/// are the upstream's to write; every other control is escaped.
#[track_caller]
fn assert_no_raw_controls(run: &CliRun, what: &str) {
    for (stream, text) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        let raw = text.chars().find(|c| c.is_control() && *c != '\n');
        assert_eq!(raw, None, "{what}: a raw control character reached the terminal on {stream}:\n{run}");
    }
}

#[test]
fn control_characters_from_callers_and_upstreams_never_reach_the_owners_terminal() {
    let upstream =
        fakemcp("global", &tag(), &["--tool-named", "described", "--tool-description", &hostile("description")]);
    let mut cfg = config(&[("up", upstream), ("desk", fakemcp("session", &tag(), &[]))]);
    cfg["http"] = json!({"tokens": {"guest": TOKEN}});
    let daemon = Daemon::start(&cfg);
    let home = daemon.home();
    let bearer = format!("Bearer {TOKEN}");

    // A token holder names its session, a server and a tool as it likes.
    let label = hostile("session");
    Modern::mcpx_call(&hostile("server"), &hostile("tool"), json!({}))
        .session(&label)
        .header("Authorization", &bearer)
        .send(daemon.url());
    Modern::mcpx_call("up", &hostile("tool"), json!({}))
        .session(&label)
        .header("Authorization", &bearer)
        .send(daemon.url());
    let started = Modern::mcpx_call("desk", "whoami", json!({}))
        .session(&label)
        .header("Authorization", &bearer)
        .send(daemon.url());
    assert!(started.structured()["pid"].is_u64(), "{started}");
    let journaled = poll(Duration::from_secs(15), || {
        let log = home.cli(&["log", "--json"]);
        (log.stdout.lines().count() >= 3 && log.stdout.contains("owned")).then_some(log)
    });
    let journaled = journaled.expect("the token holder's calls were journaled");
    // `--json` is JSON: the controls are escaped there by JSON itself.
    assert!(journaled.stdout.contains("\\u001b]0;owned"), "{journaled}");

    assert_shown_not_sent(home.cli(&["log"]).assert_code(0), "mcpx log");
    for by in ["server", "tool", "session", "instance"] {
        assert_shown_not_sent(home.cli(&["stats", "--by", by]).assert_code(0), &format!("mcpx stats --by {by}"));
    }
    let status = home.cli(&["status"]);
    assert!(status.stdout.contains("owned"), "the session-scoped instance is listed:\n{status}");
    assert_shown_not_sent(status.assert_code(0), "mcpx status");

    // An upstream's description, in the listing and in a search.
    let ls = home.cli(&["ls"]);
    assert!(ls.stdout.contains("up.described"), "{ls}");
    assert_shown_not_sent(ls.assert_code(0), "mcpx ls");
    let search = home.cli(&["search", "described"]);
    assert!(search.stdout.contains("owned"), "{search}");
    assert_shown_not_sent(search.assert_code(0), "mcpx search");

    // An upstream's error message and result text.
    let failed = home.cli(&["call", "up.fail", &json!({"message": hostile("error")}).to_string()]);
    assert!(failed.stdout.contains("owned") || failed.stderr.contains("owned"), "{failed}");
    assert_no_raw_controls(&failed, "mcpx call (an upstream's error result)");
    let unknown = home.cli(&["call", &format!("up.{}", hostile("tool"))]);
    assert_shown_not_sent(&unknown, "mcpx call (an unknown tool)");
}

/// The daemon's log is the owner's terminal too (`mcpx daemon` in the foreground) and a
/// file the owner reads: a session label a token holder chose, which names the instance
/// the daemon logs starting, and an upstream's error text reach it escaped, forging no
/// line.
#[test]
fn control_characters_from_a_token_holder_never_reach_the_daemons_log_raw() {
    let mut cfg = config(&[("desk", fakemcp("session", &tag(), &[]))]);
    cfg["http"] = json!({"tokens": {"guest": TOKEN}});
    let daemon = Daemon::start(&cfg);
    let started = Modern::mcpx_call("desk", "whoami", json!({}))
        .session(&hostile("session"))
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send(daemon.url());
    assert!(started.structured()["pid"].is_u64(), "{started}");
    let logged = poll(Duration::from_secs(10), || {
        let log = daemon.stderr();
        log.lines().any(|l| l.contains("starting instance") && l.contains("owned")).then_some(log)
    });
    let log = logged.unwrap_or_else(|| panic!("the instance's start was not logged:\n{}", daemon.stderr()));
    let raw = log.chars().find(|c| c.is_control() && *c != '\n');
    assert_eq!(raw, None, "a raw control character reached the daemon's log:\n{log}");
    assert!(!log.lines().any(|l| l.starts_with(FORGED)), "a token holder forged a line in the daemon's log:\n{log}");
    assert!(log.contains("\\x1b]0;owned\\x07"), "the label is shown, escaped:\n{log}");
}
