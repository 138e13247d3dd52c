//! A daemon reaps only what a killed daemon for its own state dir left behind: the live
//! upstreams of a daemon for another state dir are never its orphans, even when that
//! dir's name starts with its own (`D` and `D#b`).

use mcpx_e2e::process::TempDir;
use mcpx_e2e::{Daemon, Home, Modern, Whoami, alive, config, fakemcp, tag};
use serde_json::json;

#[test]
fn a_daemon_starting_for_d_leaves_the_upstreams_of_the_daemon_for_d_hash_b_alone() {
    let t = tag();
    let c = config(&[("alpha", fakemcp("global", &t, &[]))]);
    let dirs = TempDir::new();
    let other = Daemon::start_in(Home::with_state_dir(&c, dirs.path().join("st#b")), &[]);
    let call = || Whoami::of(&Modern::mcpx_call("alpha", "whoami", json!({})).send(other.url()));
    let before = call();
    assert!(alive(before.pid));

    // Starting reaps the orphans of earlier daemons for its own dir.
    let daemon = Daemon::start_in(Home::with_state_dir(&c, dirs.path().join("st")), &[]);
    assert!(alive(daemon.pid()));
    assert!(
        alive(before.pid),
        "the daemon for {}/st killed the upstream of the daemon for st#b",
        dirs.path().display()
    );
    let after = call();
    assert_eq!(after.instance, before.instance, "the daemon for st#b lost its upstream");
}
