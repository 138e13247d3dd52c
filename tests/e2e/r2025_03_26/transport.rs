//! Streamable HTTP as 2025-03-26 has it: JSON-RPC batches inside a session.

use mcpx_e2e::{Daemon, LegacySession, config};
use serde_json::{Value, json};

/// A batch of requests and a notification gets one array with a response per request
/// (none for the notification), each matched by id and valid against 2025-03-26.
#[test]
fn a_2025_03_26_session_answers_batches() {
    let daemon = Daemon::start(&config(&[]));
    let session = LegacySession::open_with(daemon.url(), "2025-03-26");
    let reply = session.batch(&[
        json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 41, "method": "tools/list", "params": {}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]);
    assert_eq!(reply.status, 200, "{reply}");
    let mut ids: Vec<String> = reply.frames.iter().map(|f| f["id"].to_string()).collect();
    ids.sort();
    assert_eq!(ids, ["\"p\"", "41"], "one response per request, none for the notification:\n{reply}");
    let list = reply.frames.iter().find(|f| f["id"] == json!(41)).unwrap();
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"mcpx_call"), "{reply}");
    let ping = reply.frames.iter().find(|f| f["id"] == json!("p")).unwrap();
    assert_eq!(ping["result"], Value::Object(Default::default()), "{reply}");
}

fn call(id: usize, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "mcpx_call", "arguments": {"server": "up", "tool": tool, "arguments": arguments}}})
}

/// A batch longer than `limits.maxBatch` is refused whole before any entry runs: each of
/// its requests gets the error naming the setting, under its own id (so a client is not
/// left waiting); one at the limit is answered entry by entry.
#[test]
fn a_batch_over_limits_max_batch_is_refused_whole_and_runs_nothing() {
    let tag = mcpx_e2e::tag();
    let mut cfg = config(&[("up", mcpx_e2e::fakemcp("global", &tag, &[]))]);
    cfg["limits"] = json!({"maxBatch": 4});
    let daemon = Daemon::start(&cfg);
    let session = LegacySession::open_with(daemon.url(), "2025-03-26");
    let too_many: Vec<Value> = (0..5).map(|i| call(i, "echo", json!({"i": i}))).collect();
    let refused = session.batch(&too_many);
    assert_eq!(refused.frames.len(), 5, "every request is told:\n{refused}");
    for (i, frame) in refused.frames.iter().enumerate() {
        assert_eq!(frame["id"], i, "{refused}");
        assert_eq!(frame["error"]["code"], -32600, "{refused}");
        assert_eq!(frame["error"]["data"]["setting"], "limits.maxBatch", "{refused}");
    }
    // Nothing ran: the upstream's first call is the one below.
    let first = session.batch(&[call(9, "whoami", json!({}))]);
    assert_eq!(first.frames[0]["result"]["structuredContent"]["calls"], 1, "{first}");
    let at_limit: Vec<Value> = (0..4).map(|i| call(i, "echo", json!({"i": i}))).collect();
    assert_eq!(session.batch(&at_limit).frames.len(), 4);
}

/// The entries of one batch run `limits.batchConcurrency` at a time, so one request
/// cannot put a whole batch in flight at once.
#[test]
fn a_batch_runs_at_most_limits_batch_concurrency_entries_at_once() {
    let tag = mcpx_e2e::tag();
    let mut cfg = config(&[("up", mcpx_e2e::fakemcp("global", &tag, &[]))]);
    cfg["limits"] = json!({"batchConcurrency": 2});
    let daemon = Daemon::start(&cfg);
    let session = LegacySession::open_with(daemon.url(), "2025-03-26");
    let slow: Vec<Value> = (0..6).map(|i| call(i, "slow", json!({"ms": 700}))).collect();
    let home = daemon.home();
    let batch = std::thread::spawn(move || session.batch(&slow));
    let mut most = 0;
    while !batch.is_finished() {
        let in_use: u64 = home.instances("up").iter().map(|i| i["inUse"].as_u64().unwrap_or(0)).sum();
        most = most.max(in_use);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let reply = batch.join().expect("the batch");
    assert_eq!(reply.frames.len(), 6, "{reply}");
    assert_eq!(most, 2, "entries in flight at once, at most");
}
