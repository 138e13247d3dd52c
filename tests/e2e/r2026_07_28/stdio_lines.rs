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

    let long = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"pad": "x".repeat(3000)}});
    serve.send_line(&long.to_string());
    let refused = serve.next_frame(Duration::from_secs(10)).expect("an answer to the long line");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");

    serve.send_line("{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"\u{fffd}\"}\u{0}");
    let echoed = serve.call("f", "echo", json!({"still": "serving"}));
    assert_eq!(echoed.structured()["still"], "serving");
}
