//! Upstreams that fail: each gives the caller a precise JSON-RPC error (naming the server,
//! and the URL for HTTP ones) well within the configured timeout, and a healthy server in
//! the same daemon answers before, during and after.

use std::time::{Duration, Instant};

use mcpx_e2e::process::free_port;
use mcpx_e2e::tap::StdioTap;
use mcpx_e2e::upstreams::{
    ScriptServer, fakemcp_id_in_the_middle, fakemcp_with_junk, first_text, tapped, upstream_exchange,
};
use mcpx_e2e::{Daemon, LegacySession, Modern, Reply, Whoami, fakemcp, poll, processes_with, tag};
use serde_json::{Value, json};

/// JSON-RPC "internal error": what mcpx answers when an upstream fails a request.
const INTERNAL_ERROR: i64 = -32603;

/// A config with a healthy fakemcp `ok`, the servers given, and `timeouts.request`.
fn with_healthy(servers: &[(&str, Value)], request_timeout: &str) -> (Value, String) {
    let ok_tag = tag();
    let mut all = serde_json::Map::new();
    all.insert("ok".into(), fakemcp("global", &ok_tag, &[]));
    for (name, server) in servers {
        all.insert((*name).into(), server.clone());
    }
    (json!({"mcpServers": all, "timeouts": {"request": request_timeout}}), ok_tag)
}

/// Asserts the healthy server answers, promptly, with its one instance.
#[track_caller]
fn assert_healthy_answers(url: &str) -> Whoami {
    let started = Instant::now();
    let reply = Modern::mcpx_call("ok", "whoami", json!({})).send(url);
    let who = Whoami::of(&reply);
    assert!(started.elapsed() < Duration::from_secs(2), "the healthy server took {:?}", started.elapsed());
    who
}

/// The caller's error: HTTP 200 with a JSON-RPC internal error; returns its message.
#[track_caller]
fn internal_error(reply: &Reply) -> String {
    let error = reply.assert_error(200, INTERNAL_ERROR);
    error["message"].as_str().unwrap_or_else(|| panic!("an error without a message:\n{reply}")).to_owned()
}

#[test]
fn an_upstream_that_hangs_fails_its_call_at_the_request_timeout_while_others_are_served() {
    let tap = StdioTap::new();
    let hang = tapped(&tap, &fakemcp("global", &tag(), &[]));
    let (cfg, ok_tag) = with_healthy(&[("hang", hang)], "1s");
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let before = Whoami::of(&Modern::mcpx_call("hang", "whoami", json!({})).send(url));
    let ok_before = assert_healthy_answers(url);

    let (reply, took, during) = std::thread::scope(|s| {
        let hung = s.spawn(|| {
            let started = Instant::now();
            let reply = Modern::mcpx_call("hang", "slow", json!({"ms": 20000})).send(url);
            (reply, started.elapsed())
        });
        // Wait until the first call is in flight on the instance.
        assert!(daemon.home().wait_in_use("hang", 1, Duration::from_secs(20)), "the first call never started");
        let during = assert_healthy_answers(url);
        let (reply, took) = hung.join().unwrap();
        (reply, took, during)
    });
    assert_eq!(internal_error(&reply), r#"server "hang" did not answer tools/call within 1s"#);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(2500),
        "the error must come at the 1 s request timeout, came after {took:?}"
    );
    assert_eq!(during.instance, ok_before.instance, "the healthy server kept its instance");
    // The upstream is told to stop working on the request it did not answer in time.
    let (slow, _) =
        upstream_exchange(&tap, "tools/call", |f| f["params"]["name"] == "slow").expect("the slow call went upstream");
    let cancelled = poll(Duration::from_secs(2), || {
        tap.sent()
            .into_iter()
            .find(|f| f["method"] == "notifications/cancelled" && f["params"]["requestId"] == slow["id"])
    });
    assert!(cancelled.is_some(), "no notifications/cancelled for the timed-out request:\n{}", tap.transcript());

    // A handshake-era caller gets the same precise error.
    let legacy = LegacySession::open(url);
    let started = Instant::now();
    let reply = legacy.mcpx_call("hang", "slow", json!({"ms": 20000}));
    assert_eq!(internal_error(&reply), r#"server "hang" did not answer tools/call within 1s"#);
    assert!(started.elapsed() < Duration::from_millis(2500), "{:?}", started.elapsed());

    // The slow server itself still answers quick requests, and so does the healthy one.
    let after = Whoami::of(&Modern::mcpx_call("hang", "whoami", json!({})).send(url));
    assert_eq!(after.instance, before.instance, "a timed-out request does not cost the instance");
    assert_eq!(assert_healthy_answers(url).calls, 3);
    assert_eq!(processes_with(&ok_tag).len(), 1);
}

#[test]
fn junk_on_an_upstreams_stdout_is_skipped_and_its_calls_work() {
    let junk_tag = tag();
    let (cfg, _) = with_healthy(&[("junk", fakemcp_with_junk(&junk_tag, false))], "5s");
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();

    let first = Whoami::of(&Modern::mcpx_call("junk", "whoami", json!({})).send(url));
    assert_eq!(first.calls, 1, "{first:?}");
    let echo = Modern::mcpx_call("junk", "echo", json!({"through": "the junk ✓"})).send(url);
    assert_eq!(echo.structured()["through"], "the junk ✓", "{echo}");
    let legacy = LegacySession::open(url);
    let again = Whoami::of(&legacy.mcpx_call("junk", "whoami", json!({})));
    assert_eq!((again.instance.as_str(), again.calls), (first.instance.as_str(), 3), "one instance served all");
    // The wrapper and the server it runs: one of each, never restarted.
    assert_eq!(processes_with(&junk_tag).len(), 2, "{:?}", processes_with(&junk_tag));
    assert_healthy_answers(url);
}

/// One line of stdout that is not UTF-8 must be skipped like any other junk.
#[test]
fn a_non_utf8_line_on_an_upstreams_stdout_is_skipped_too() {
    let junk_tag = tag();
    let (cfg, _) = with_healthy(&[("junk", fakemcp_with_junk(&junk_tag, true))], "5s");
    let daemon = Daemon::start(&cfg);
    let reply = Modern::mcpx_call("junk", "whoami", json!({})).send(daemon.url());
    assert!(reply.frame().get("result").is_some(), "the call must work past the junk:\n{reply}");
    assert_eq!(Whoami::of(&reply).calls, 1);
    assert_healthy_answers(daemon.url());
}

/// An upstream may write anything to its stderr (mcpx only logs it): a non-UTF-8 line
/// there must not cost it its stderr pipe, or its life.
#[test]
fn a_non_utf8_line_on_an_upstreams_stderr_does_not_break_it() {
    let t = tag();
    let script = r#"printf '\377\376 not UTF-8 on stderr\n' >&2; sleep 0.5; exec "$0" "$@""#;
    let server = json!({"command": "sh", "args": ["-c", script, mcpx_e2e::paths::fakemcp(), "--tag", t]});
    let (cfg, _) = with_healthy(&[("noisy", server)], "5s");
    let daemon = Daemon::start(&cfg);
    let reply = Modern::mcpx_call("noisy", "whoami", json!({})).send(daemon.url());
    assert!(reply.frame().get("result").is_some(), "the server must still work:\n{reply}");
    assert_eq!(Whoami::of(&reply).calls, 1);
}

#[test]
fn an_upstream_that_exits_at_start_fails_calls_with_an_error_naming_it() {
    let dead = json!({"command": "sh", "args": ["-c", "echo 'cannot start: no config' >&2; exit 3"]});
    let (cfg, _) = with_healthy(&[("dead", dead), ("gone", json!({"command": "false"}))], "5s");
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    for server in ["dead", "gone", "dead"] {
        let started = Instant::now();
        let reply = Modern::mcpx_call(server, "anything", json!({})).send(url);
        let message = internal_error(&reply);
        assert!(
            message.starts_with(&format!("server \"{server}\" ")) && message.contains("exited"),
            "the error must name the server and say it exited: {message}"
        );
        let status = if server == "dead" { "(exit status: 3)" } else { "(exit status: 1)" };
        assert!(message.contains(status), "the error must say how the server exited: {message}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "a dead server is noticed at once, not at a timeout: {:?}",
            started.elapsed()
        );
        assert_healthy_answers(url);
    }
    // The gateway's own listing still works with dead servers configured.
    let search = Modern::tools_call("mcpx_search", json!({"query": "whoami"})).send(url);
    let servers: Vec<&str> =
        search.structured()["tools"].as_array().unwrap().iter().filter_map(|t| t["server"].as_str()).collect();
    assert_eq!(servers, ["ok"], "{search}");
}

#[test]
fn an_unreachable_http_upstream_fails_calls_with_an_error_naming_it_and_its_url() {
    let down = format!("http://127.0.0.1:{}/mcp", free_port());
    let (cfg, _) = with_healthy(&[("down", json!({"url": down}))], "3s");
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let started = Instant::now();
    let reply = Modern::mcpx_call("down", "anything", json!({})).send(url);
    let message = internal_error(&reply);
    let expected = format!("server \"down\" at {down} is unreachable: ");
    assert!(message.starts_with(&expected), "expected {expected:?}…, got {message:?}");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert_healthy_answers(url);
    let legacy = LegacySession::open(url);
    let message = internal_error(&legacy.mcpx_call("down", "anything", json!({})));
    assert!(message.starts_with(&expected), "{message}");
    assert_healthy_answers(url);
}

#[test]
fn an_http_upstream_that_closes_its_stream_mid_reply_fails_the_call_precisely() {
    let handshake = ScriptServer::cut_stream("legacy");
    let stateless = ScriptServer::cut_stream("modern");
    let (cfg, _) =
        with_healthy(&[("cut25", json!({"url": handshake.url()})), ("cut26", json!({"url": stateless.url()}))], "3s");
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    for (server, upstream) in [("cut25", handshake.url()), ("cut26", stateless.url())] {
        let ok = Modern::mcpx_call(server, "ok", json!({})).send(url);
        assert_eq!(first_text(ok.result()), "ok", "{server} works before:\n{ok}");
        for tool in ["cut", "half"] {
            let started = Instant::now();
            let reply = Modern::mcpx_call(server, tool, json!({})).send(url);
            assert_eq!(
                internal_error(&reply),
                format!(
                    "server \"{server}\" at {upstream} answered with something that is not MCP: \
                     the event stream ended before the answer"
                ),
                "{server} {tool}"
            );
            assert!(
                started.elapsed() < Duration::from_secs(3),
                "the error comes when the stream ends, not at the 3 s timeout: {:?}",
                started.elapsed()
            );
            assert_healthy_answers(url);
        }
        let ok = Modern::mcpx_call(server, "ok", json!({})).send(url);
        assert_eq!(first_text(ok.result()), "ok", "{server} still works after:\n{ok}");
    }
}

/// Bytes the process `pid` has written (`wchar` of `/proc/<pid>/io`).
fn bytes_written(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    io.lines().find_map(|l| l.strip_prefix("wchar:")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

/// An upstream that writes to its stderr without pause, and a line before each answer,
/// keeps serving: mcpx drains its stderr as fast as it comes, far beyond what a pipe
/// holds (64 KiB), so the server never blocks on a full pipe and its answers flow.
#[test]
fn an_upstream_that_floods_its_stderr_keeps_serving() {
    let flood_tag = tag();
    let flood = fakemcp("global", &flood_tag, &["--flood-stderr"]);
    let (cfg, _) = with_healthy(&[("flood", flood)], "30s");
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();

    let first = Whoami::of(&Modern::mcpx_call("flood", "whoami", json!({})).send(url));
    const DRAINED: u64 = 8 << 20;
    let written = poll(Duration::from_secs(60), || {
        let written = bytes_written(first.pid);
        (written > DRAINED).then_some(written)
    });
    assert!(
        written.is_some(),
        "the flood stalled at {} bytes: mcpx stopped reading the server's stderr",
        bytes_written(first.pid)
    );
    for n in 0..20 {
        let echo = Modern::mcpx_call("flood", "echo", json!({"n": n})).send(url);
        assert_eq!(echo.structured(), &json!({"n": n}), "{echo}");
    }
    let last = Whoami::of(&Modern::mcpx_call("flood", "whoami", json!({})).send(url));
    assert_eq!((last.instance.as_str(), last.calls), (first.instance.as_str(), 22), "one instance served all");
    assert_healthy_answers(url);
}

/// An answer on a line over `limits.maxLineBytes` is dropped unread (never buffered
/// whole), but the line's first bytes still show its id (fakemcp writes it before the
/// result): only that call fails, at once and naming the setting; a call in flight beside
/// it is answered, and the instance serves on.
#[test]
fn an_answer_over_max_line_bytes_fails_only_its_own_call_naming_the_setting() {
    let big_tag = tag();
    let (mut cfg, _) = with_healthy(&[("big", fakemcp("global", &big_tag, &[]))], "120s");
    cfg["limits"] = json!({"maxLineBytes": 65536});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let before = Whoami::of(&Modern::mcpx_call("big", "whoami", json!({})).send(url));

    let huge = "x".repeat(100_000);
    let (slow, echo) = std::thread::scope(|s| {
        let slow = s.spawn(|| Modern::mcpx_call("big", "slow", json!({"ms": 3000})).send(url));
        // Wait until the first call is in flight on the instance.
        assert!(daemon.home().wait_in_use("big", 1, Duration::from_secs(20)), "the first call never started");
        let started = Instant::now();
        let echo = Modern::mcpx_call("big", "echo", json!({"text": huge})).send(url);
        assert!(started.elapsed() < Duration::from_secs(2), "the call failed after {:?}", started.elapsed());
        (slow.join().unwrap(), echo)
    });
    let message = internal_error(&echo);
    assert_eq!(
        message,
        r#"server "big" wrote a line longer than limits.maxLineBytes (65536 bytes), which mcpx dropped unread: it was the answer to this request"#
    );
    assert_eq!(slow.structured()["sleptMs"], 3000, "the call beside it is answered: {slow}");

    let after = Whoami::of(&Modern::mcpx_call("big", "whoami", json!({})).send(url));
    assert_eq!(after.instance, before.instance, "the instance serves on");
    let small = Modern::mcpx_call("big", "echo", json!({"text": "small"})).send(url);
    assert_eq!(small.structured()["text"], "small", "{small}");
    assert_healthy_answers(url);
}

/// A server that writes the id in the middle of an over-long answer leaves no way to know
/// whose it was: rather than one call waiting out `timeouts.request` for an answer that
/// will never come, every call in flight on that instance fails at once, naming the
/// setting. The instance serves on.
#[test]
fn an_over_long_answer_that_shows_no_id_fails_the_calls_in_flight_at_once() {
    let (mut cfg, _) = with_healthy(&[("big", fakemcp_id_in_the_middle(&tag()))], "120s");
    cfg["limits"] = json!({"maxLineBytes": 65536});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let before = Whoami::of(&Modern::mcpx_call("big", "whoami", json!({})).send(url));

    // Alone in flight: the lost line was most likely its answer.
    let huge = "x".repeat(100_000);
    let reply = Modern::mcpx_call("big", "echo", json!({"text": huge})).send(url);
    let message = internal_error(&reply);
    assert!(message.ends_with("it showed no id, and this was the only request in flight"), "{message}");

    // With a slow call in flight too, both fail (the slow one would otherwise have been
    // answered after 5 s).
    let (slow, echo) = std::thread::scope(|s| {
        let slow = s.spawn(|| Modern::mcpx_call("big", "slow", json!({"ms": 5000})).send(url));
        // Wait until the first call is in flight on the instance.
        assert!(daemon.home().wait_in_use("big", 1, Duration::from_secs(20)), "the first call never started");
        let echo = Modern::mcpx_call("big", "echo", json!({"text": huge})).send(url);
        (slow.join().unwrap(), echo)
    });
    for reply in [&slow, &echo] {
        let message = internal_error(reply);
        assert!(
            message.contains("limits.maxLineBytes") && message.contains("one of the 1 others in flight"),
            "{message}"
        );
    }

    let after = Whoami::of(&Modern::mcpx_call("big", "whoami", json!({})).send(url));
    assert_eq!(after.instance, before.instance, "the instance serves on");
    assert_healthy_answers(url);
}
