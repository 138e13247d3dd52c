//! The CLI people type at a shell: `call`, `ls`, `search`, `status`, `stop`, `config
//! check`. Each reaches the daemon over its unix socket; exit codes are 0 ok, 1 failure
//! or a tool result with `isError`, 2 usage, 124 timeout.

use std::time::Duration;

use mcpx_e2e::{Daemon, Home, alive, config, fakemcp, paths, processes_with, tag};
use serde_json::{Value, json};

fn two_servers(tag: &str) -> Value {
    config(&[("alpha", fakemcp("global", tag, &[])), ("beta", fakemcp("session", tag, &[]))])
}

#[test]
fn mcpx_call_exits_0_on_success_1_on_a_failed_call_and_124_on_timeout() {
    let tag = tag();
    let daemon = Daemon::start(&two_servers(&tag));
    let home = daemon.home();

    let ok = home.cli(&["call", "alpha.echo", r#"{"said": "hello"}"#]);
    ok.assert_code(0);
    assert!(ok.stdout.contains(r#"{"said":"hello"}"#), "{ok}");

    let json = home.cli(&["call", "alpha.echo", r#"{"n": 7}"#, "--json"]);
    json.assert_code(0);
    assert_eq!(json.json()["structuredContent"], json!({"n": 7}), "{json}");

    let is_error = home.cli(&["call", "alpha.fail", r#"{"message": "boom-42"}"#]);
    is_error.assert_code(1);
    assert!(
        is_error.stdout.contains("boom-42") || is_error.stderr.contains("boom-42"),
        "an isError result must still be shown:\n{is_error}"
    );

    let unknown = home.cli(&["call", "nosuch.whoami"]);
    unknown.assert_code(1);
    assert!(unknown.stderr.contains("nosuch"), "{unknown}");

    let slow = home.cli(&["call", "alpha.slow", r#"{"ms": 30000}"#, "--timeout", "1"]);
    slow.assert_code(124);
    assert!(slow.took < Duration::from_secs(10), "--timeout 1 must give up after about a second:\n{slow}");
}

#[test]
fn mcpx_usage_errors_exit_2_without_starting_a_daemon() {
    let home = Home::without_state_dir(&config(&[("alpha", fakemcp("global", &tag(), &[]))]));
    let config_path = home.config_path().to_str().unwrap().to_owned();
    for args in [
        vec!["frobnicate"],
        vec!["call"],
        vec!["call", "alpha.echo", "--timeout", "soon"],
        vec!["call", "alpha-without-a-tool"],
        vec!["call", "alpha.echo", "not json"],
        vec!["call", "alpha.echo", "[1, 2]"],
    ] {
        let mut all = args.clone();
        all.extend(["--config", &config_path]);
        let run = home.cli(&all);
        run.assert_code(2);
        assert!(!run.stderr.is_empty(), "a usage error must say what is wrong:\n{run}");
    }
    assert!(home.daemons().is_empty(), "a usage error must not start a daemon: {:?}", home.daemons());
}

#[test]
fn mcpx_ls_lists_the_tools_of_every_server_or_of_one_and_search_finds_them() {
    let tag = tag();
    let daemon = Daemon::start(&two_servers(&tag));
    let home = daemon.home();
    let listed = |run: &mcpx_e2e::CliRun| -> Vec<String> {
        let mut names: Vec<String> =
            run.stdout.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_owned).collect();
        names.sort();
        names
    };
    let fake_tools = ["changed", "crash", "echo", "env", "fail", "flood", "meta", "slow", "whoami"];

    let all = home.cli(&["ls"]);
    all.assert_code(0);
    let mut expected: Vec<String> =
        ["alpha", "beta"].iter().flat_map(|s| fake_tools.iter().map(move |t| format!("{s}.{t}"))).collect();
    expected.sort();
    assert_eq!(listed(&all), expected, "{all}");
    assert!(
        all.stdout.lines().any(|l| l.starts_with("alpha.slow") && l.contains("Sleep")),
        "each tool is listed with its description:\n{all}"
    );

    let one = home.cli(&["ls", "beta"]);
    one.assert_code(0);
    let only_beta: Vec<String> = fake_tools.iter().map(|t| format!("beta.{t}")).collect();
    assert_eq!(listed(&one), only_beta, "{one}");

    let as_json = home.cli(&["ls", "alpha", "--json"]).json();
    let tools = as_json["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), fake_tools.len(), "{as_json}");
    assert!(tools.iter().all(|t| t["server"] == "alpha" && t["tool"].is_string()), "{as_json}");

    let search = home.cli(&["search", "beta", "sleep"]);
    search.assert_code(0);
    assert_eq!(listed(&search), ["beta.slow"], "every word must match:\n{search}");
}

#[test]
fn mcpx_status_shows_the_daemon_its_servers_and_live_instances_with_their_keys() {
    let tag = tag();
    let daemon = Daemon::start(&two_servers(&tag));
    let home = daemon.home();
    home.cli(&["call", "alpha.whoami"]).assert_code(0);
    home.cli(&["call", "beta.whoami", "--session", "one"]).assert_code(0);
    home.cli(&["call", "beta.whoami", "--session", "two"]).assert_code(0);

    let run = home.cli(&["status", "--json"]);
    run.assert_code(0);
    let status = run.json();
    assert_eq!(status["pid"], daemon.pid(), "{status}");
    assert_eq!(status["url"], daemon.url(), "{status}");
    assert_eq!(status["socket"].as_str(), home.socket().to_str(), "{status}");
    assert_eq!(status["config"].as_str(), home.config_path().to_str(), "{status}");
    assert!(status["version"].as_str().is_some_and(|v| !v.is_empty()));
    let mut servers: Vec<(String, String)> = status["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .map(|s| (s["name"].as_str().unwrap().into(), s["scope"].as_str().unwrap().into()))
        .collect();
    servers.sort();
    assert_eq!(servers, [("alpha".into(), "global".into()), ("beta".into(), "session".into())]);

    let instances = status["instances"].as_array().expect("instances");
    let mut keys: Vec<(String, String)> =
        instances.iter().map(|i| (i["server"].as_str().unwrap().into(), i["key"].as_str().unwrap().into())).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            ("alpha".into(), "global".into()),
            ("beta".into(), "session:one".into()),
            ("beta".into(), "session:two".into())
        ],
        "{status}"
    );
    let mut pids: Vec<u64> = instances.iter().filter_map(|i| i["pid"].as_u64()).collect();
    pids.sort_unstable();
    let running: Vec<u64> = processes_with(&tag).into_iter().map(u64::from).collect();
    assert_eq!(pids, running, "the instances' pids are the upstream processes: {status}");
    for i in instances {
        assert!(i["ageMs"].is_u64() && i["idleMs"].is_u64(), "{i}");
        assert_eq!(i["inUse"], 0, "{i}");
    }

    let text = home.cli(&["status"]);
    text.assert_code(0);
    for needle in ["session:one", "session:two", "global", &daemon.pid().to_string()] {
        assert!(text.stdout.contains(needle), "status must show {needle}:\n{text}");
    }
}

#[test]
fn mcpx_status_and_stop_without_a_daemon_say_so_and_start_none() {
    let home = Home::without_state_dir(&config(&[]));
    let status = home.cli(&["status", "--json"]);
    status.assert_code(0);
    assert_eq!(status.json()["running"], false, "{status}");
    home.cli(&["stop"]).assert_code(0);
    assert!(home.daemons().is_empty());
}

/// `mcpx stop` returns only once the daemon and every upstream it started are gone, even
/// one that ignores SIGTERM and one in the middle of a call. Checked at the moment it
/// returns, without waiting.
#[test]
fn mcpx_stop_returns_only_when_the_daemon_and_its_children_are_gone() {
    let tag = tag();
    let mut cfg =
        config(&[("shared", fakemcp("global", &tag, &[])), ("deaf", fakemcp("session", &tag, &["--ignore-sigterm"]))]);
    cfg["timeouts"] = json!({"stopGrace": "500ms"});
    let home = Home::without_state_dir(&cfg);
    let config_path = home.config_path().to_str().unwrap().to_owned();
    home.cli(&["call", "deaf.whoami", "--session", "x", "--config", &config_path]).assert_code(0);
    let mut client = home.serve().start();
    client.send(&mcpx_e2e::Modern::mcpx_call("shared", "slow", json!({"ms": 60_000})).frame());
    assert!(home.wait_in_use("shared", 1, Duration::from_secs(10)));
    let daemons = home.daemons();
    assert_eq!(daemons.len(), 1);
    assert_eq!(processes_with(&tag).len(), 2);

    let stop = home.cli(&["stop"]);
    let left = processes_with(&tag);
    let daemon_alive = alive(daemons[0]);
    stop.assert_code(0);
    assert!(!daemon_alive, "mcpx stop returned while the daemon {} ran:\n{stop}", daemons[0]);
    assert!(left.is_empty(), "mcpx stop returned while upstreams ran: {left:?}\n{stop}");
    assert!(!home.socket().exists() && home.record().is_none(), "a clean stop removes the socket and daemon.json");
}

#[test]
fn mcpx_config_check_accepts_a_good_file_and_names_file_line_and_column_of_a_bad_one() {
    let home = Home::new(&config(&[("alpha", fakemcp("global", &tag(), &[]))]));
    let good = home.config_path().to_str().unwrap().to_owned();
    let ok = home.cli(&["config", "check", "--config", &good]);
    ok.assert_code(0);
    assert!(ok.stdout.contains(&good), "{ok}");

    let fakemcp = paths::fakemcp();
    let fakemcp = fakemcp.to_str().unwrap();
    let cases = [
        (
            "syntax.json",
            format!("{{\n  \"mcpServers\": {{\n    \"alpha\": {{\"command\": \"{fakemcp}\"}},\n  }}\n}}\n"),
            4,
        ),
        (
            "scope.json",
            format!(
                "{{\n  \"mcpServers\": {{\n    \"alpha\": {{\n      \"command\": \"{fakemcp}\",\n      \"scope\": \"galaxy\"\n    }}\n  }}\n}}\n"
            ),
            5,
        ),
    ];
    for (name, text, line) in cases {
        let path = home.root().join(name);
        std::fs::write(&path, text).unwrap();
        let path = path.to_str().unwrap();
        let bad = home.cli(&["config", "check", "--config", path]);
        bad.assert_code(1);
        assert!(
            bad.stderr.contains(&format!("{path}:{line}:")),
            "the error must start with {path}:{line}:<column>:\n{bad}"
        );
    }
    assert!(home.daemons().is_empty(), "config check must not start a daemon");
}

/// A problem found after parsing (a rule spanning several values) is still a problem in a
/// place of the file: the message names its line.
#[test]
fn mcpx_config_check_names_the_line_of_a_rule_violation() {
    let home = Home::new(&config(&[]));
    let fakemcp = paths::fakemcp();
    let text = format!(
        "{{\n  \"mcpServers\": {{\n    \"alpha\": {{\"command\": \"{}\"}}\n  }},\n  \"expose\": [\"nosuch\"]\n}}\n",
        fakemcp.display()
    );
    let path = home.root().join("rule.json");
    std::fs::write(&path, text).unwrap();
    let path = path.to_str().unwrap();
    let bad = home.cli(&["config", "check", "--config", path]);
    bad.assert_code(1);
    assert!(bad.stderr.contains("nosuch"), "{bad}");
    assert!(
        bad.stderr.contains(&format!("{path}:5:")),
        "the error must name the line of \"expose\" ({path}:5:…):\n{bad}"
    );
}
