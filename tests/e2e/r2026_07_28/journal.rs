//! The call journal: every request mcpx answers for a caller is recorded with how it ended,
//! read back through `/v1/log`, `/v1/stats` and `mcpx log`/`mcpx stats`; a token holder
//! reads only its own records; the journal survives a SIGKILL and is pruned by age.

use std::time::Duration;

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::{Daemon, Home, Modern, config, fakemcp, poll, tag};
use serde_json::{Value, json};

const CI_TOKEN: &str = "ci-token-0123456789abcdef";
const OTHER_TOKEN: &str = "other-token-0123456789abcdef";

fn with(servers: &[(&str, Value)], settings: Value) -> Value {
    let mut cfg = config(servers);
    for (key, value) in settings.as_object().into_iter().flatten() {
        cfg[key] = value.clone();
    }
    cfg
}

/// `GET /v1/log?<query>` over the socket (the owner): the whole answer.
#[track_caller]
fn log(home: &Home, query: &str) -> Value {
    let reply = home.v1("GET", &format!("/v1/log?{query}"), None);
    assert_eq!(reply.status, 200, "GET /v1/log?{query}:\n{}", reply.body);
    serde_json::from_str(&reply.body).expect("/v1/log answers JSON")
}

/// The owner's view of the journal once it holds at least `n` records (the writer is
/// asynchronous), newest first.
#[track_caller]
fn records(home: &Home, query: &str, n: usize) -> Vec<Value> {
    let found = poll(Duration::from_secs(15), || {
        let records = log(home, query)["records"].as_array().cloned().unwrap_or_default();
        (records.len() >= n).then_some(records)
    });
    found.unwrap_or_else(|| panic!("the journal never held {n} records: {}", log(home, query)))
}

/// The record of the call named `name`.
#[track_caller]
fn named<'a>(records: &'a [Value], name: &str) -> &'a Value {
    records.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no record of {name}: {records:#?}"))
}

/// `GET base+path` with `token` as the bearer; its JSON, which must come with a 200.
fn read_as(base: &str, path: &str, token: &str) -> Value {
    let reply = plain("GET", &format!("{base}{path}"), &[("Authorization", &format!("Bearer {token}"))], None);
    assert_eq!(reply.status, 200, "GET {path}: {}", reply.body);
    reply.json()
}

#[test]
fn every_call_is_journaled_with_its_outcome_class() {
    let cfg = with(
        &[("up", fakemcp("global", &tag(), &[]))],
        json!({"timeouts": {"request": "1s"}, "limits": {"maxCallsPerClient": 1}}),
    );
    let daemon = Daemon::start(&cfg);
    let url = daemon.url().to_owned();
    // A call that outlives timeouts.request, and, while it runs, one refused by the limit.
    let slow =
        std::thread::spawn(move || Modern::mcpx_call("up", "slow", json!({"ms": 5000})).session("busy").send(&url));
    assert!(daemon.home().wait_in_use("up", 1, Duration::from_secs(20)), "the slow call never started");
    Modern::mcpx_call("up", "whoami", json!({})).session("busy").send(daemon.url()).assert_error(200, -32603);
    slow.join().expect("the slow call").assert_error(200, -32603);
    Modern::mcpx_call("up", "echo", json!({"password": "hunter2"})).send(daemon.url()).structured();
    let failed = Modern::mcpx_call("up", "fail", json!({})).send(daemon.url());
    assert_eq!(failed.result()["isError"], true);
    Modern::mcpx_call("up", "nope", json!({})).send(daemon.url()).assert_error(200, -32602);

    let home = daemon.home();
    let records = records(home, "", 5);
    assert_eq!(named(&records, "slow")["outcome"], "timeout", "{records:#?}");
    assert_eq!(named(&records, "whoami")["outcome"], "refused", "{records:#?}");
    assert_eq!(named(&records, "fail")["outcome"], "tool_error", "{records:#?}");
    let nope = named(&records, "nope");
    assert_eq!((&nope["outcome"], &nope["code"]), (&json!("error"), &json!(-32602)), "{records:#?}");
    let echo = named(&records, "echo");
    assert_eq!(echo["outcome"], "ok");
    assert_eq!(echo["server"], "up");
    assert_eq!(echo["method"], "tools/call");
    assert_eq!(echo["instance"], "up[global]");
    assert_eq!(echo["transport"], "http");
    assert_eq!(echo["inScript"], false);
    assert!(echo["bytesIn"].as_i64() > Some(0) && echo["bytesOut"].as_i64() > Some(0), "{echo}");
    // Arguments are not kept unless journal.arguments says so.
    assert_eq!(echo["arguments"], Value::Null);
    assert!(!log(home, "").to_string().contains("hunter2"));
    assert_eq!(named(&records, "slow")["session"], "session:busy");

    // Filters: errors only, by tool, by server, limit.
    let errors = log(home, "errors=true")["records"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.len(), 4, "{errors:#?}");
    assert!(errors.iter().all(|r| r["outcome"] != "ok"));
    assert_eq!(log(home, "tool=echo")["records"].as_array().map(Vec::len), Some(1));
    assert_eq!(log(home, "server=elsewhere")["records"].as_array().map(Vec::len), Some(0));
    assert_eq!(log(home, "limit=2")["records"].as_array().map(Vec::len), Some(2));
    let bad = home.v1("GET", "/v1/log?since=yesterday", None);
    assert_eq!(bad.status, 400, "{}", bad.body);

    // The CLI reads the same journal.
    let cli = home.cli(&["log", "--errors"]);
    assert_eq!(cli.code, Some(0), "{}", cli.stderr);
    assert!(cli.stdout.contains("up.slow") && cli.stdout.contains("timeout"), "{}", cli.stdout);
    assert!(!cli.stdout.contains("up.echo"), "{}", cli.stdout);
    let stats = home.cli(&["stats", "--by", "tool", "--json"]);
    assert_eq!(stats.code, Some(0), "{}", stats.stderr);
    let stats: Value = serde_json::from_str(&stats.stdout).expect("stats --json prints JSON");
    let fail = stats["groups"].as_array().and_then(|g| g.iter().find(|g| g["key"] == "up.fail")).cloned();
    let fail = fail.unwrap_or_else(|| panic!("no up.fail group: {stats}"));
    assert_eq!((&fail["calls"], &fail["errors"], &fail["errorRate"]), (&json!(1), &json!(1), &json!(1.0)));
}

/// `bytesIn` and `bytesOut` are the sizes of what went to the server and came back, read
/// off the wire, whichever transport: a longer argument grows the request by its length and
/// the response (which carries it twice) by twice that. A call that reached no server has
/// exchanged nothing; mcpx's own tools are measured as JSON.
#[test]
fn a_records_sizes_are_the_bytes_exchanged_with_the_server_it_reached() {
    let web = mcpx_e2e::FakeHttp::start(&[]);
    let servers = [("up", fakemcp("global", &tag(), &[])), ("web", json!({ "url": web.url }))];
    let daemon = Daemon::start(&config(&servers));
    let long = "a".repeat(1001);
    for server in ["up", "web"] {
        for text in ["a", long.as_str()] {
            Modern::mcpx_call(server, "echo", json!({ "text": text })).send(daemon.url()).structured();
        }
    }
    Modern::mcpx_call("ghost", "nothing-here", json!({ "text": "a" })).send(daemon.url()).assert_error(200, -32602);
    Modern::tools_call("mcpx_search", json!({ "query": "echo" })).send(daemon.url()).structured();
    let records = records(daemon.home(), "", 6);
    let sizes = |server: &str| -> Vec<(i64, i64)> {
        // Newest first: the long text's call, then the short one's.
        let mut sizes = records
            .iter()
            .filter(|r| r["server"] == server && r["name"] == "echo")
            .map(|r| (r["bytesIn"].as_i64().unwrap_or(-1), r["bytesOut"].as_i64().unwrap_or(-1)));
        [(); 2].map(|_| sizes.next().unwrap_or_else(|| panic!("two records of {server}: {records:#?}"))).to_vec()
    };
    for server in ["up", "web"] {
        let [(long_in, long_out), (short_in, short_out)] = sizes(server)[..] else { unreachable!() };
        // The server's request id may have gained a digit between the two calls.
        assert!((1000..=1001).contains(&(long_in - short_in)), "{server}: {short_in} then {long_in}");
        assert!((2000..=2001).contains(&(long_out - short_out)), "{server}: {short_out} then {long_out}");
        assert!(short_in > r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#.len() as i64);
    }
    let ghost = named(&records, "nothing-here");
    assert_eq!((&ghost["bytesIn"], &ghost["bytesOut"]), (&json!(0), &json!(0)), "{ghost}");
    let search = named(&records, "mcpx_search");
    assert!(search["bytesIn"].as_i64() > Some(0) && search["bytesOut"].as_i64() > Some(0), "{search}");
}

/// A handshake-era server that asks mid-call keeps its call open while a stateless caller
/// answers: the call's final response arrives for the caller's retry, and is that
/// request's, not the first one's (already journaled as `input_required`).
#[test]
fn a_held_calls_final_response_counts_for_the_retry_that_received_it() {
    const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    let legacy = fakemcp("global", &tag(), &["--fixture", "conformance", "--era", "legacy"]);
    let daemon = Daemon::start(&config(&[("fx", legacy)]));
    let call = |extra: Value| {
        let mut params = json!({"name": "mcpx_call",
            "arguments": {"server": "fx", "tool": "test_elicitation", "arguments": {"message": "Who?"}}});
        for (key, value) in extra.as_object().into_iter().flatten() {
            params[key] = value.clone();
        }
        Modern::new("tools/call", params).meta(CAPABILITIES, json!({"elicitation": {}})).session("q")
    };
    let first = call(json!({})).send(daemon.url());
    let asked = first.result();
    let key = asked["inputRequests"].as_object().and_then(|r| r.keys().next().cloned()).expect("a question");
    let answer = json!({"action": "accept", "content": {"response": "a test"}});
    let retry = json!({"inputResponses": {key: answer}, "requestState": asked["requestState"]});
    assert_eq!(call(retry).send(daemon.url()).result()["resultType"], "complete");
    let records = records(daemon.home(), "", 2);
    // Newest first: the retry, then the first request.
    let (retried, first) = (&records[0], &records[1]);
    assert_eq!((&first["bytesOut"], &first["instance"]), (&json!(0), &json!("fx[global]")), "{first}");
    assert!(first["bytesIn"].as_i64() > Some(0), "{first}");
    assert_eq!(retried["instance"], "fx[global]", "{retried}");
    assert!(retried["bytesOut"].as_i64() > Some(0), "the final response went uncounted: {retried}");
}

/// A request to an HTTP server that cannot be reached was never sent: no bytes.
#[test]
fn a_request_an_http_server_never_received_counts_no_bytes() {
    let web = mcpx_e2e::FakeHttp::start(&[]);
    let daemon = Daemon::start(&config(&[("web", json!({ "url": web.url }))]));
    Modern::mcpx_call("web", "echo", json!({ "text": "a" })).send(daemon.url()).structured();
    drop(web);
    Modern::mcpx_call("web", "echo", json!({ "text": "b" })).send(daemon.url()).assert_error(200, -32603);
    let records = records(daemon.home(), "", 2);
    let failed = &records[0];
    assert_eq!(failed["outcome"], "error", "{failed}");
    assert_eq!((&failed["bytesIn"], &failed["bytesOut"]), (&json!(0), &json!(0)), "{failed}");
}

#[test]
fn a_scripts_tool_calls_are_journaled_each_and_marked_as_the_scripts() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let script = r#"await tools.up.echo({ a: 1 }); await call("up", "fail", {}); return 1;"#;
    let reply = Modern::tools_call("mcpx_exec", json!({ "script": script })).session("s").send(daemon.url());
    assert!(reply.result().is_object(), "{reply}");
    let records = records(daemon.home(), "", 3);
    let exec = named(&records, "mcpx_exec");
    assert_eq!((&exec["server"], &exec["inScript"]), (&json!("mcpx"), &json!(false)));
    let echo = named(&records, "echo");
    assert_eq!((&echo["server"], &echo["inScript"], &echo["outcome"]), (&json!("up"), &json!(true), &json!("ok")));
    assert_eq!(echo["session"], "session:s");
    assert_eq!(named(&records, "fail")["outcome"], "tool_error");
}

#[test]
fn redacted_arguments_mask_a_password_and_keep_the_rest() {
    let cfg = with(&[("up", fakemcp("global", &tag(), &[]))], json!({"journal": {"arguments": "redacted"}}));
    let daemon = Daemon::start(&cfg);
    let arguments = json!({"user": "ada", "password": "hunter2", "nested": {"apiToken": "t-1"}});
    Modern::mcpx_call("up", "echo", arguments).send(daemon.url()).structured();
    let records = records(daemon.home(), "", 1);
    let kept: Value = serde_json::from_str(records[0]["arguments"].as_str().expect("arguments kept")).unwrap();
    assert_eq!(kept, json!({"user": "ada", "password": "[redacted]", "nested": {"apiToken": "[redacted]"}}));
}

#[test]
fn a_token_holder_reads_only_its_own_records_and_the_owner_reads_all() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["http"] = json!({"tokens": {"ci": CI_TOKEN, "other": OTHER_TOKEN}});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let bearer = |token: &str| format!("Bearer {token}");
    Modern::mcpx_call("up", "echo", json!({"secret": 1})).header("Authorization", &bearer(CI_TOKEN)).send(url);
    Modern::mcpx_call("up", "whoami", json!({})).header("Authorization", &bearer(OTHER_TOKEN)).send(url);

    // The owner, over the socket, sees both.
    let all = records(daemon.home(), "", 2);
    assert_eq!(named(&all, "echo")["client"], "ci");
    assert_eq!(named(&all, "whoami")["client"], "other");

    let base = base_url(url);
    let read = |path: &str, token: &str| read_as(base, path, token);
    let theirs = read("/v1/log", OTHER_TOKEN);
    let names: Vec<&Value> = theirs["records"].as_array().expect("records").iter().map(|r| &r["name"]).collect();
    assert_eq!(names, [&json!("whoami")], "{theirs}");
    // Naming the other holder's tool or session does not reach its records either.
    assert_eq!(read("/v1/log?tool=echo", OTHER_TOKEN)["records"], json!([]));
    let stats = read("/v1/stats?by=client", OTHER_TOKEN);
    assert_eq!(stats["groups"].as_array().map(Vec::len), Some(1), "{stats}");
    assert_eq!(stats["groups"][0]["key"], "other", "{stats}");
    // Without a token, nothing.
    let none = plain("GET", &format!("{base}/v1/log"), &[], None);
    assert_eq!(none.status, 401);
}

#[test]
fn a_token_named_in_http_admins_reads_every_callers_records() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["http"] = json!({"tokens": {"ci": CI_TOKEN, "other": OTHER_TOKEN}, "admins": ["token:other"]});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let bearer = |token: &str| format!("Bearer {token}");
    Modern::mcpx_call("up", "echo", json!({})).header("Authorization", &bearer(CI_TOKEN)).send(url).structured();
    records(daemon.home(), "", 1);

    let base = base_url(url);
    let read = |path: &str, token: &str| read_as(base, path, token);
    // The admin reads ci's record; ci, not an admin, reads nothing of the admin's.
    let theirs = read("/v1/log", OTHER_TOKEN);
    assert_eq!(theirs["records"][0]["client"], "ci", "{theirs}");
    assert_eq!(read("/v1/stats?by=client", OTHER_TOKEN)["groups"][0]["key"], "ci");
    Modern::mcpx_call("up", "whoami", json!({})).header("Authorization", &bearer(OTHER_TOKEN)).send(url);
    records(daemon.home(), "", 2);
    let mine = read("/v1/log", CI_TOKEN);
    let names: Vec<&Value> = mine["records"].as_array().expect("records").iter().map(|r| &r["name"]).collect();
    assert_eq!(names, [&json!("echo")], "{mine}");
}

#[test]
fn an_admins_entry_that_names_no_caller_is_refused() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["http"] = json!({"tokens": {"ci": CI_TOKEN}, "admins": ["token:nobody"]});
    let home = Home::new(&cfg);
    let path = home.config_path().to_str().unwrap().to_owned();
    let checked = home.cli(&["config", "check", "--config", &path]);
    checked.assert_code(1);
    assert!(checked.stderr.contains("http.admins") && checked.stderr.contains("token:nobody"), "{checked}");
}

#[test]
fn mcpx_log_follow_prints_a_call_made_after_it_started() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    Modern::mcpx_call("up", "echo", json!({"before": true})).send(daemon.url()).structured();
    records(daemon.home(), "", 1);
    let mut follow = daemon
        .home()
        .mcpx()
        .args(["log", "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start mcpx log --follow");
    let (lines, received) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().expect("its stdout");
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| {
        let line = received.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("no line for {what}"));
        serde_json::from_str::<Value>(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    };
    assert_eq!(next("the earlier call")["name"], "echo");
    Modern::mcpx_call("up", "whoami", json!({})).send(daemon.url()).structured();
    assert_eq!(next("the later call")["name"], "whoami");
    follow.kill().expect("stop mcpx log --follow");
    follow.wait().expect("reap it");
}

#[test]
fn after_a_sigkill_the_journal_opens_with_the_records_written_before() {
    let mut daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    for i in 0..3 {
        Modern::mcpx_call("up", "echo", json!({"i": i})).send(daemon.url()).structured();
    }
    records(daemon.home(), "", 3);
    daemon.kill();
    daemon.restart();
    assert_eq!(log(daemon.home(), "")["records"].as_array().map(Vec::len), Some(3));
    Modern::mcpx_call("up", "whoami", json!({})).send(daemon.url());
    records(daemon.home(), "", 4);
}

#[test]
fn a_call_answered_just_before_the_daemon_stops_is_in_the_journal_after() {
    // No upstream, so the stop is quick: quicker than the writer's gathering of records.
    let mut daemon = Daemon::start(&config(&[]));
    Modern::tools_call("mcpx_exec", json!({"script": "return 1;"})).send(daemon.url());
    daemon.stop();
    daemon.restart();
    let after = log(daemon.home(), "");
    assert_eq!(named(after["records"].as_array().expect("records"), "mcpx_exec")["outcome"], "ok", "{after}");
}

#[test]
fn a_record_older_than_journal_max_age_is_pruned() {
    let mut daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    Modern::mcpx_call("up", "echo", json!({})).send(daemon.url()).structured();
    records(daemon.home(), "", 1);
    daemon.stop();
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["journal"] = json!({"maxAge": "1ms"});
    std::fs::write(daemon.config_path(), cfg.to_string()).expect("rewrite the config");
    daemon.restart();
    let pruned = poll(Duration::from_secs(15), || {
        log(daemon.home(), "")["records"].as_array().is_some_and(Vec::is_empty).then_some(())
    });
    assert!(pruned.is_some(), "the old record was kept: {}", log(daemon.home(), ""));
}

#[test]
fn records_the_queue_has_no_room_for_are_counted_as_dropped() {
    let cfg = with(&[("up", fakemcp("global", &tag(), &[]))], json!({"journal": {"queue": 1}}));
    let daemon = Daemon::start(&cfg);
    let calls = 40;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let url = daemon.url().to_owned();
            std::thread::spawn(move || {
                for i in 0..calls / 4 {
                    Modern::mcpx_call("up", "echo", json!({"i": i})).send(&url).structured();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("a caller"));
    // Every call is either written or counted as dropped; none is lost silently.
    let accounted = poll(Duration::from_secs(15), || {
        let answer = log(daemon.home(), "limit=1000");
        let written = answer["records"].as_array().map_or(0, Vec::len) as u64;
        (written + answer["dropped"].as_u64().unwrap_or(0) == calls).then_some(answer["dropped"].clone())
    });
    assert!(accounted.is_some(), "calls went unaccounted for: {}", log(daemon.home(), "limit=1000"));
    // The daemon's status says so too, for whoever looks there first.
    let dropped = accounted.and_then(|d| d.as_u64()).expect("a count of dropped records");
    assert_eq!(daemon.home().status()["journalDropped"], dropped);
    let status = daemon.home().cli(&["status"]);
    let line = status.stdout.lines().find(|l| l.starts_with("journal")).unwrap_or_default().to_owned();
    if dropped == 0 {
        assert_eq!(line, "journal  on", "{}", status.stdout);
    } else {
        assert!(line.contains(&format!("{dropped} calls not journaled")), "{}", status.stdout);
    }
}

#[test]
fn an_exposed_tool_is_journaled_by_its_server_and_its_own_name() {
    let cfg = with(&[("up", fakemcp("global", &tag(), &[]))], json!({"expose": ["up"]}));
    let daemon = Daemon::start(&cfg);
    Modern::tools_call("up__echo", json!({"x": 1})).send(daemon.url()).structured();
    let records = records(daemon.home(), "", 1);
    assert_eq!((&records[0]["server"], &records[0]["name"]), (&json!("up"), &json!("echo")), "{records:#?}");
    assert_eq!(log(daemon.home(), "server=up&tool=echo")["records"].as_array().map(Vec::len), Some(1));
}

#[test]
fn a_call_the_tool_policy_refuses_is_journaled_as_denied_though_the_caller_sees_an_unknown_tool() {
    let mut server = fakemcp("global", &tag(), &[]);
    server["tools"] = json!({ "deny": ["echo"] });
    let cfg = with(&[("up", server)], json!({ "limits": { "rate": { "perSecond": 0.001, "burst": 2 } } }));
    let daemon = Daemon::start(&cfg);
    Modern::mcpx_call("up", "echo", json!({})).send(daemon.url()).assert_error(200, -32602);
    Modern::mcpx_call("up", "whoami", json!({})).send(daemon.url()).structured();
    // Past the burst: refused by limits.rate.
    Modern::mcpx_call("up", "env", json!({})).send(daemon.url()).assert_error(200, -32603);
    let records = records(daemon.home(), "", 3);
    assert_eq!(named(&records, "echo")["outcome"], "denied", "{records:#?}");
    assert_eq!(named(&records, "whoami")["outcome"], "ok", "{records:#?}");
    assert_eq!(named(&records, "env")["outcome"], "refused", "{records:#?}");
}
