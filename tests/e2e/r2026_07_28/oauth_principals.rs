//! OAuth callers by kind: an access token that names no subject, only its `client_id` (a
//! client acting for itself, as a client-credentials grant gives), is a client principal
//! of its own. It never shares a `user` instance, a session, journal records or a
//! `clients`/`http.admins` entry with the subject (or the `http.tokens` holder) of the
//! same name, and `oauth-client:<client_id>@<issuer>` is the key that names it.

use std::time::Duration;

use mcpx_e2e::authorization::{AuthorizationServer, Signer};
use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, poll, tag};
use serde_json::{Value, json};

const ALICE_SECRET: &str = "alice-secret-0123456789abcdef";
/// The static token of the holder named `alice`.
const STATIC_ALICE: &str = "static-alice-token-0123456789";

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

#[test]
fn a_client_acting_for_itself_is_never_the_subject_or_token_holder_of_its_name() {
    let server = AuthorizationServer::start(&[("alice", ALICE_SECRET)]);
    let issuer = &server.issuer;
    let tag = tag();
    let servers = [("desk", fakemcp("user", &tag, &[])), ("browser", fakemcp("session", &tag, &[]))];
    let mut cfg = config(&servers);
    cfg["http"] = json!({
        "oauth": {"issuers": [issuer], "requestTimeout": "30s"},
        "tokens": {"alice": STATIC_ALICE},
        // Grants to the subject alice: they must not reach the client alice.
        "admins": [format!("oauth:alice@{issuer}")],
    });
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let subject = bearer(&server.forge(Signer::Issuer, url, json!({"sub": "alice"})));
    let client = bearer(&server.forge(Signer::Issuer, url, json!({"sub": null, "client_id": "alice"})));
    let holder = bearer(STATIC_ALICE);
    let call = |server: &str, authorization: &str| {
        Modern::mcpx_call(server, "whoami", json!({})).session("work").header("Authorization", authorization).send(url)
    };
    let whoami = |server: &str, authorization: &str| Whoami::of(&call(server, authorization));

    // Its own `user` instance: another process than the subject's and the holder's.
    let clients_desk = whoami("desk", &client);
    let subjects_desk = whoami("desk", &subject);
    let holders_desk = whoami("desk", &holder);
    assert_ne!(clients_desk.pid, subjects_desk.pid, "the client got the subject alice's user instance");
    assert_ne!(clients_desk.instance, subjects_desk.instance, "the client got the subject alice's user instance");
    assert_ne!(clients_desk.pid, holders_desk.pid, "the client got the token holder alice's user instance");
    assert_eq!(whoami("desk", &client).instance, clients_desk.instance, "a client keeps its own user instance");
    // Its own session `work`.
    assert_ne!(whoami("browser", &client).instance, whoami("browser", &subject).instance, "session work was shared");

    // `http.admins` names the subject: it reads every caller's records, the client only
    // its own (its three calls above).
    let base = base_url(url);
    let log = |authorization: &str| -> Vec<Value> {
        let reply = plain("GET", &format!("{base}/v1/log"), &[("Authorization", authorization)], None);
        assert_eq!(reply.status, 200, "GET /v1/log: {}", reply.body);
        reply.json()["records"].as_array().cloned().unwrap_or_default()
    };
    let label = format!("client alice ({issuer})");
    let of = |records: &[Value], client: &str| records.iter().filter(|r| r["client"] == client).count();
    let everyone =
        poll(Duration::from_secs(15), || Some(log(&subject)).filter(|r| of(r, &label) == 3 && of(r, "alice") == 1));
    let everyone = everyone
        .unwrap_or_else(|| panic!("the admin never read the client's and holder's records: {:#?}", log(&subject)));
    assert_eq!(of(&everyone, &format!("alice ({issuer})")), 2, "{everyone:#?}");
    let own = log(&client);
    assert_eq!(own.len(), 3, "the client reads exactly its own three records: {own:#?}");
    assert_eq!(of(&own, &label), 3, "the client read another's records: {own:#?}");
}

#[test]
fn a_clients_key_for_a_client_must_name_a_configured_issuer() {
    let mut cfg = config(&[("desk", fakemcp("user", &tag(), &[]))]);
    cfg["http"] = json!({"oauth": {"issuers": ["https://as.example"]}});
    cfg["clients"] = json!({"oauth-client:alice@https://elsewhere.example": {"servers": ["desk"]}});
    let home = mcpx_e2e::Home::new(&cfg);
    let path = home.config_path().to_str().unwrap().to_owned();
    let checked = home.cli(&["config", "check", "--config", &path]);
    checked.assert_code(1);
    assert!(checked.stderr.contains("oauth-client:alice@https://elsewhere.example"), "{checked}");
    cfg["clients"] = json!({"oauth-client:alice@https://as.example": {"servers": ["desk"]}});
    let home = mcpx_e2e::Home::new(&cfg);
    let path = home.config_path().to_str().unwrap().to_owned();
    home.cli(&["config", "check", "--config", &path]).assert_code(0);
}

#[test]
fn a_clients_entry_for_the_client_limits_the_client_and_not_the_subject() {
    let server = AuthorizationServer::start(&[("alice", ALICE_SECRET)]);
    let issuer = &server.issuer;
    let tag = tag();
    let mut cfg = config(&[("desk", fakemcp("user", &tag, &[])), ("other", fakemcp("global", &tag, &[]))]);
    cfg["http"] = json!({"oauth": {"issuers": [issuer], "requestTimeout": "30s"}});
    cfg["clients"] = json!({ format!("oauth-client:alice@{issuer}"): {"servers": ["desk"]} });
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let subject = bearer(&server.forge(Signer::Issuer, url, json!({"sub": "alice"})));
    let client = bearer(&server.forge(Signer::Issuer, url, json!({"sub": null, "client_id": "alice"})));
    let call = |server: &str, authorization: &str| {
        Modern::mcpx_call(server, "whoami", json!({})).header("Authorization", authorization).send(url)
    };
    assert!(call("other", &subject).structured()["pid"].is_number(), "the subject may use every server");
    assert!(call("desk", &client).structured()["pid"].is_number(), "the client may use desk");
    let refused = call("other", &client);
    assert_eq!(refused.error_code(), -32602, "the client used a server its entry leaves out: {refused}");
}
