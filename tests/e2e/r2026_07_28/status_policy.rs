//! `/v1/status` and `/ui/state` under a `clients` entry: a server hidden from a token
//! holder is absent there too (its name, scope, failures, instances and leases), as it
//! is from every listing.

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, tag};
use serde_json::{Value, json};

const ALICE: &str = "status-alice-0123456789ab";
const BOSS: &str = "status-boss-0123456789abc";

fn get(base: &str, path: &str, token: &str) -> Value {
    let reply = plain("GET", &format!("{base}{path}"), &[("Authorization", &format!("Bearer {token}"))], None);
    assert_eq!(reply.status, 200, "{path}: {reply}");
    serde_json::from_str(&reply.body).expect("JSON")
}

fn names(state: &Value) -> Vec<String> {
    let servers = state["servers"].as_array().expect("servers");
    let mut names: Vec<String> = servers.iter().map(|s| s["name"].as_str().unwrap().to_owned()).collect();
    names.sort();
    names
}

#[test]
fn a_server_hidden_from_a_token_holder_is_absent_from_its_status_and_ui_state() {
    let t = tag();
    let mut cfg = config(&[("open", fakemcp("global", &t, &[])), ("payroll", fakemcp("global", &t, &[]))]);
    cfg["mcpServers"]["ledger"] = json!({"command": "/nonexistent/ledger-server", "scope": "global"});
    cfg["http"] = json!({"tokens": {"alice": ALICE, "boss": BOSS}});
    cfg["clients"] = json!({"token:alice": {"servers": ["open"]}});
    let daemon = Daemon::start(&cfg);
    let base = base_url(daemon.url()).to_owned();
    let boss = format!("Bearer {BOSS}");
    Whoami::of(&Modern::mcpx_call("payroll", "whoami", json!({})).header("Authorization", &boss).send(daemon.url()));
    let failed = Modern::mcpx_call("ledger", "whoami", json!({})).header("Authorization", &boss).send(daemon.url());
    assert!(failed.body.contains("error"), "ledger cannot start: {failed}");

    // The control: a holder with no entry sees every server, the running one and the failing one.
    let everything = get(&base, "/v1/status", BOSS);
    assert_eq!(names(&everything), ["ledger", "open", "payroll"], "{everything}");
    assert!(everything["instances"].to_string().contains("payroll"), "{everything}");
    let servers = everything["servers"].as_array().expect("servers");
    assert!(servers.iter().any(|s| s["name"] == "ledger" && s["failing"].is_object()), "{everything}");

    for path in ["/v1/status", "/ui/state"] {
        let alice = get(&base, path, ALICE);
        assert_eq!(names(&alice), ["open"], "{path} names servers alice's entry leaves out: {alice}");
        let text = alice.to_string();
        for hidden in ["payroll", "ledger"] {
            assert!(!text.contains(hidden), "{path} shows alice {hidden:?}: {text}");
        }
    }
}
