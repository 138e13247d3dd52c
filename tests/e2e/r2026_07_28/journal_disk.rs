//! The call journal stays within its bound on disk whatever callers send: huge names,
//! arguments, URIs, scripts and labels, through every kind of record, refused or answered,
//! leave `journal.sqlite` and its WAL within twice `journal.maxBytes`; each long text is
//! kept as a prefix, its length and a digest; and space pruned is given back to the disk.

use std::path::Path;
use std::time::Duration;

use mcpx_e2e::{Daemon, Home, Modern, config, fakemcp, poll, tag};
use serde_json::{Value, json};

const GUEST: &str = "guest-token-0123456789abcdef";
const USER: &str = "user-token-0123456789abcdef";
const MAX_BYTES: u64 = 1024 * 1024;

/// The journal's files in `home`'s state dir (database, WAL, shared memory), in bytes.
fn on_disk(home: &Home) -> u64 {
    let dir = home.state_dir();
    ["journal.sqlite", "journal.sqlite-wal", "journal.sqlite-shm"]
        .iter()
        .filter_map(|name| std::fs::metadata(Path::new(dir).join(name)).ok())
        .map(|m| m.len())
        .sum()
}

/// The owner's records, newest first.
fn read_all(home: &Home) -> Vec<Value> {
    let reply = home.v1("GET", "/v1/log?limit=1000", None);
    assert_eq!(reply.status, 200, "{}", reply.body);
    let answer: Value = serde_json::from_str(&reply.body).expect("/v1/log answers JSON");
    answer["records"].as_array().cloned().unwrap_or_default()
}

/// Calls the daemon with every kind of request a record is made of, each carrying text of
/// `size` bytes in every field a caller chooses: refused (a guest allowed no server, an
/// unknown tool, prompt, resource) and answered (a tool call, a script) alike. The first
/// request is the guest's, the others a user's allowed every server.
fn flood(daemon: &Daemon, size: usize, round: usize) {
    let url = daemon.url();
    let huge = |c: &str| format!("{round}-{}", c.repeat(size));
    // A header carries the name of a direct call, a prompt or a resource: smaller.
    let named = |c: &str| format!("{round}-{}", c.repeat(size / 8));
    let label = format!("{round}-{}", "l".repeat(4096));
    let requests = [
        Modern::mcpx_call(&huge("s"), &huge("t"), json!({ "a": huge("a") })),
        Modern::mcpx_call("up", &huge("t"), json!({ "a": huge("a") })),
        Modern::tools_call(&named("d"), json!({ "a": huge("a") })),
        Modern::new("resources/read", json!({ "uri": format!("file:///{}", named("r")) })),
        Modern::new("prompts/get", json!({ "name": named("p"), "arguments": { "a": huge("a") } })),
        Modern::new(
            "completion/complete",
            json!({ "ref": { "type": "ref/prompt", "name": huge("c") }, "argument": { "name": huge("n"), "value": huge("v") } }),
        ),
        Modern::tools_call(
            "mcpx_exec",
            json!({ "script": format!("await tools.up.echo({{ text: {:?} }}); return 1; // {}", huge("e"), huge("x")) }),
        ),
        Modern::mcpx_call("up", "echo", json!({ "text": huge("a") })).session(&label),
    ];
    for (i, request) in requests.into_iter().enumerate() {
        let token = if i == 0 { GUEST } else { USER };
        let reply = request.header("Authorization", &format!("Bearer {token}")).send(url);
        assert!(reply.status == 200 || reply.status == 400, "{}: {reply}", reply.status);
    }
}

#[test]
fn whatever_callers_send_the_journal_stays_within_twice_max_bytes_and_shrinks_when_pruned() {
    let mut cfg = config(&[("up", fakemcp("global", &tag(), &[]))]);
    cfg["journal"] = json!({ "maxBytes": MAX_BYTES, "arguments": "whole" });
    cfg["http"] = json!({ "tokens": { "guest": GUEST, "user": USER } });
    cfg["clients"] = json!({ "token:guest": { "servers": [] } });
    let mut daemon = Daemon::start(&cfg);

    let mut largest = 0;
    for round in 0..12 {
        flood(&daemon, 192 * 1024, round);
        largest = largest.max(on_disk(daemon.home()));
    }
    let user = format!("Bearer {USER}");
    Modern::mcpx_call("up", "echo", json!({ "text": "last" }))
        .header("Authorization", &user)
        .send(daemon.url())
        .structured();
    let home = daemon.home();
    let written = poll(Duration::from_secs(20), || {
        let records = read_all(home);
        records.iter().any(|r| r["arguments"].as_str().is_some_and(|a| a.contains("\"last\""))).then_some(records)
    });
    let records = written.unwrap_or_else(|| panic!("the last call was never journaled: {:#?}", read_all(home)));
    let full = on_disk(home);
    largest = largest.max(full);
    assert!(largest <= 2 * MAX_BYTES, "the journal took {largest} bytes on disk, past twice {MAX_BYTES}");

    // What was kept of a long text: its prefix, its length and a digest, within the bound.
    let cut = records.iter().find(|r| r["name"].as_str().is_some_and(|n| n.starts_with("11-ttt")));
    let cut = cut.unwrap_or_else(|| panic!("no record of the last round's long tool name: {records:#?}"));
    let name = cut["name"].as_str().unwrap_or_default();
    assert!(name.len() <= 1024 && name.contains(&format!("[{} bytes, sha256:", 192 * 1024 + 3)), "{name}");
    for field in ["server", "name", "instance", "session", "client", "arguments"] {
        for r in &records {
            let kept = r[field].as_str().map_or(0, str::len);
            assert!(kept <= 16 * 1024, "{field} kept {kept} bytes: {}", &r[field].to_string()[..200]);
        }
    }

    // A smaller bound: pruned at the next start, and the space given back.
    daemon.stop();
    let small = 64 * 1024;
    cfg["journal"]["maxBytes"] = json!(small);
    std::fs::write(daemon.config_path(), cfg.to_string()).expect("rewrite the config");
    daemon.restart();
    let shrunk = poll(Duration::from_secs(20), || {
        let now = on_disk(daemon.home());
        (now <= 2 * small).then_some(now)
    });
    let now = on_disk(daemon.home());
    assert!(shrunk.is_some(), "after pruning to {small} bytes the journal still takes {now} (it took {full})");
    assert!(!read_all(daemon.home()).is_empty(), "pruning left the newest records");
}
