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
    assert_eq!(
        ids,
        ["\"p\"", "41"],
        "one response per request, none for the notification:\n{reply}"
    );
    let list = reply.frames.iter().find(|f| f["id"] == json!(41)).unwrap();
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"mcpx_call"), "{reply}");
    let ping = reply.frames.iter().find(|f| f["id"] == json!("p")).unwrap();
    assert_eq!(ping["result"], Value::Object(Default::default()), "{reply}");
}
