//! The era each upstream answered in is remembered across daemon restarts: a restarted
//! daemon reaches a handshake-era server that ignores `server/discover` without waiting out
//! the probe again.

use mcpx_e2e::client::Modern;
use mcpx_e2e::daemon::Daemon;
use mcpx_e2e::fixtures::{config, fakemcp};
use mcpx_e2e::process::tag;
use serde_json::json;

const PROBE_GAVE_UP: &str = "no answer to server/discover";

#[test]
fn a_restarted_daemon_remembers_which_era_each_server_speaks() {
    let t = tag();
    // A handshake-era server that never answers an unknown method: the probe must time out.
    let mut cfg = config(&[("old", fakemcp("global", &t, &["--era", "legacy", "--silent-unknown"]))]);
    cfg["timeouts"] = json!({"probe": "300ms"});
    let mut daemon = Daemon::start_with_env(&cfg, &[("MCPX_LOG", "debug")]);
    let first = Modern::mcpx_call("old", "whoami", json!({})).send(daemon.url());
    assert_eq!(first.structured()["era"], "legacy");
    assert!(daemon.stderr().contains(PROBE_GAVE_UP), "the first daemon had to probe:\n{}", daemon.stderr());

    daemon.stop();
    let before = daemon.stderr().matches(PROBE_GAVE_UP).count();
    daemon.restart();
    let again = Modern::mcpx_call("old", "whoami", json!({})).send(daemon.url());
    assert_eq!(again.structured()["era"], "legacy");
    assert_eq!(
        daemon.stderr().matches(PROBE_GAVE_UP).count(),
        before,
        "the restarted daemon probed again instead of remembering:\n{}",
        daemon.stderr()
    );
}
