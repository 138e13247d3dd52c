//! Bad lines on a stdio connection: a line over `limits.maxLineBytes`, or one that is not JSON, gets
//! its own error, and the connection goes on serving the next request.

use std::time::Duration;

use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::home::Home;
use mcpx_e2e::process::tag;
use serde_json::json;

#[test]
fn an_over_long_line_or_garbage_is_refused_and_the_stream_goes_on() {
    let t = tag();
    let mut cfg = config(&[("f", fakemcp("global", &t, &[]))]);
    cfg["limits"] = json!({"maxLineBytes": 2000});
    let home = Home::new(&cfg);
    let mut serve = home.serve().arg("--no-daemon").start();

    // The error carries the request's id when the line's edges show it (first or last),
    // so the caller's request ends; with the id in the middle, it cannot.
    let pad = "x".repeat(3000);
    let lines = [
        (format!(r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"pad":"{pad}"}}}}"#), json!(2)),
        (format!(r#"{{"method":"tools/call","params":{{"pad":"{pad}"}},"jsonrpc":"2.0","id":"last"}}"#), json!("last")),
        (format!(r#"{{"method":"tools/call","params":{{"pad":"{pad}"}},"id":4,"jsonrpc":"2.0"}}"#), json!(null)),
    ];
    for (line, id) in lines {
        // Sent as written (keys in this order); an id it can be answered under is noted.
        let frame: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(frame.to_string(), line, "the keys keep their order");
        if id.is_null() {
            serve.send_line(&line);
        } else {
            serve.send(&frame);
        }
        let refused = serve.next_frame(Duration::from_secs(10)).expect("an answer to the long line");
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        assert_eq!(refused["id"], id, "{refused}");
        assert!(
            refused["error"]["message"].as_str().unwrap().contains("limits.maxLineBytes (2000 bytes)"),
            "{refused}"
        );
    }

    serve.send_line("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"\u{fffd}\"}\u{0}");
    let echoed = serve.call("f", "echo", json!({"still": "serving"}));
    assert_eq!(echoed.structured()["still"], "serving");
}
