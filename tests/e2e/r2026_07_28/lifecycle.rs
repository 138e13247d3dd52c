//! The daemon's life: the state file it publishes, and a shutdown that leaves no upstream
//! process behind, even one that ignores SIGTERM.

use std::time::Duration;

use mcpx_e2e::{Daemon, LegacySession, Modern, Whoami, config, fakemcp, paths, poll, processes_with, tag};
use serde_json::json;

#[test]
fn the_state_file_names_the_endpoint_and_is_removed_on_stop() {
    let mut daemon = Daemon::start(&config(&[]));
    let state = daemon.state().clone();
    assert_eq!(state["pid"], json!(daemon.pid()), "daemon.json: {state}");
    let port = state["port"].as_u64().unwrap_or_else(|| panic!("daemon.json has no port: {state}"));
    assert_ne!(port, 0, "an ephemeral port must be reported as the port actually bound: {state}");
    assert_eq!(state["url"], json!(format!("http://127.0.0.1:{port}/mcp")), "daemon.json: {state}");
    assert!(state["version"].as_str().is_some_and(|v| !v.is_empty()), "daemon.json: {state}");
    assert!(state["startedAt"].is_string() || state["startedAt"].is_number(), "daemon.json: {state}");
    let config_file = daemon.config_path().canonicalize().unwrap();
    let named = std::path::Path::new(state["config"].as_str().unwrap_or_default()).canonicalize().ok();
    assert_eq!(named.as_ref(), Some(&config_file), "daemon.json must name the config file: {state}");

    let state_file = daemon.state_file();
    let status = daemon.stop();
    assert!(status.success(), "SIGTERM must end the daemon with status 0, got {status}");
    assert!(!state_file.exists(), "daemon.json must be removed on shutdown");
}

/// The daemon serves on `workers` threads when set, else on half the CPUs it may run on
/// (rounded up), and says how many in `/v1/status`.
#[test]
fn the_daemon_serves_on_the_workers_set_else_on_half_the_cpus() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let daemon = Daemon::start(&config(&[]));
    let status = daemon.home().status();
    assert_eq!(status["workers"], json!(cpus.div_ceil(2)), "{cpus} CPUs: {status}");

    let mut set = config(&[]);
    set["workers"] = json!(3);
    let daemon = Daemon::start(&set);
    let status = daemon.home().status();
    assert_eq!(status["workers"], json!(3), "workers: 3 in the config: {status}");
}

/// SIGTERM stops every upstream the daemon started: global, session and per-call
/// instances, a fakemcp that ignores SIGTERM, and a wrapper that ignores both stdin EOF and
/// SIGTERM (only SIGKILL of its process group ends it).
#[test]
fn stopping_the_daemon_leaves_no_upstream_process() {
    let tag = tag();
    let script = "trap '' TERM; \"$0\" \"$@\"; while :; do sleep 1; done";
    let stubborn = json!({
        "command": "/bin/sh",
        "args": ["-c", script, paths::fakemcp(), "--ignore-sigterm", "--tag", &tag],
    });
    let mut cfg = config(&[
        ("shared", fakemcp("global", &tag, &[])),
        ("browser", fakemcp("session", &tag, &[])),
        ("repl", fakemcp("call", &tag, &[])),
        ("deaf", fakemcp("global", &tag, &["--ignore-sigterm"])),
        ("stubborn", stubborn),
    ]);
    cfg["timeouts"] = json!({"stopGrace": "500ms"});
    let mut daemon = Daemon::start(&cfg);
    let url = daemon.url().to_owned();

    let whoami = |server: &str| Modern::mcpx_call(server, "whoami", json!({}));
    Whoami::of(&whoami("shared").send(&url));
    Whoami::of(&whoami("browser").session("s").send(&url));
    let legacy = LegacySession::open(&url);
    Whoami::of(&legacy.mcpx_call("browser", "whoami", json!({})));
    Whoami::of(&whoami("deaf").send(&url));
    Whoami::of(&whoami("stubborn").send(&url));
    let in_flight = {
        let url = url.clone();
        std::thread::spawn(move || Modern::mcpx_call("repl", "slow", json!({"ms": 60_000})).send(&url).status)
    };
    // shared, 2 × browser, deaf, stubborn's sh and its fakemcp, the per-call repl.
    let expected = 7;
    let up = poll(Duration::from_secs(10), || (processes_with(&tag).len() >= expected).then_some(()));
    assert!(up.is_some(), "expected {expected} upstream processes, found {:?}", processes_with(&tag));

    let status = daemon.stop();
    let at_exit = processes_with(&tag);
    assert!(status.success(), "SIGTERM must end the daemon with status 0, got {status}");
    let left = poll(Duration::from_secs(1), || processes_with(&tag).is_empty().then_some(()));
    assert!(
        left.is_some(),
        "upstream processes outlived the daemon: {:?} (alive when it exited: {at_exit:?})",
        processes_with(&tag)
    );
    assert!(at_exit.is_empty(), "the daemon exited before its upstreams were gone: {at_exit:?}");
    let _ = in_flight.join();
}
