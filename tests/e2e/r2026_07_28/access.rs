//! Who may reach the daemon: the unix socket is the trusted local path (private to its
//! owner, the peer's pid checked against the kernel's credentials); TCP needs a bearer
//! token once tokens are configured.

use std::io::{BufRead, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use mcpx_e2e::client::{Raw, base_url, initialize, plain};
use mcpx_e2e::schema::{self, MODERN};
use mcpx_e2e::socket::stdio_upgrade;
use mcpx_e2e::{Daemon, Home, Modern, Whoami, config, fakemcp, tag};
use serde_json::{Value, json};

const TOKEN: &str = "ci-token-0123456789abcdef";

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

#[test]
fn a_stdio_relay_claiming_a_pid_other_than_its_own_is_refused() {
    let tag = tag();
    let daemon = Daemon::start(&config(&[("shared", fakemcp("global", &tag, &[]))]));
    let home = daemon.home();
    let socket = home.socket();
    let bystander = home.serve().start();

    for (what, claim) in [
        ("the daemon's pid", Some(daemon.pid())),
        ("another client's pid", Some(bystander.pid())),
        ("init's pid", Some(1)),
        ("no pid at all", None),
    ] {
        let reply = stdio_upgrade(&socket, claim, Some("forged"));
        assert_eq!(reply.status, 403, "a relay claiming {what} must be refused:\n{reply}");
    }
    assert!(home.instance_keys("shared").is_empty(), "nothing may have run for a refused relay");

    // The control: the true pid is let in, and the stream carries MCP.
    let reply = stdio_upgrade(&socket, Some(std::process::id()), None);
    assert_eq!(reply.status, 101, "the true pid must be accepted:\n{reply}");
    let mut stream = reply.upgraded.expect("an upgraded stream");
    let request = Modern::mcpx_call("shared", "whoami", json!({})).frame();
    writeln!(stream.get_mut(), "{request}").expect("write to the relay");
    let mut line = String::new();
    stream.read_line(&mut line).expect("read the relay's answer");
    let answer: Value =
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("the relay wrote no JSON ({e}): {line:?}"));
    schema::assert_frame(MODERN, Some("tools/call"), &answer);
    assert_eq!(answer["id"], request["id"], "{answer}");
    assert!(answer["result"]["structuredContent"]["instance"].is_string(), "{answer}");
}

#[test]
fn the_stdio_relay_is_served_on_the_socket_only() {
    let daemon = Daemon::start(&config(&[]));
    let url = format!("{}/v1/stdio", base_url(daemon.url()));
    let pid = std::process::id().to_string();
    let reply = plain("GET", &url, &[("Connection", "upgrade"), ("Upgrade", "mcpx-stdio"), ("X-Mcpx-Pid", &pid)], None);
    assert_eq!(reply.status, 403, "{reply}");
}

#[test]
fn with_tokens_configured_tcp_needs_the_token_and_the_socket_does_not() {
    let tag = tag();
    let mut cfg = config(&[("shared", fakemcp("global", &tag, &[]))]);
    cfg["http"] = json!({"tokens": {"ci": TOKEN}});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let base = base_url(url);
    let bearer = format!("Bearer {TOKEN}");
    let wrong = format!("Bearer {TOKEN}x");

    let unauthorized = |status: u16, headers: &[(String, String)], what: &str| {
        assert_eq!(status, 401, "{what} without a valid token");
        let challenge = headers.iter().find(|(n, _)| n == "www-authenticate").map(|(_, v)| v.as_str());
        assert!(
            challenge.is_some_and(|v| v.starts_with("Bearer")),
            "{what}: a 401 must carry WWW-Authenticate: Bearer, got {challenge:?}"
        );
    };

    // /mcp, modern: none, wrong, right.
    let call = || Modern::mcpx_call("shared", "whoami", json!({}));
    let none = call().send(url);
    unauthorized(none.status, &none.headers, "a modern /mcp request");
    let bad = call().header("Authorization", &wrong).send(url);
    unauthorized(bad.status, &bad.headers, "a modern /mcp request (wrong token)");
    Whoami::of(&call().header("Authorization", &bearer).send(url));

    // /mcp, legacy initialize.
    let init = initialize(url, schema::LEGACY);
    unauthorized(init.status, &init.headers, "a legacy initialize");
    let init = Raw {
        http_method: "POST",
        url,
        headers: vec![
            ("Content-Type".into(), "application/json".into()),
            ("Accept".into(), "application/json, text/event-stream".into()),
            ("Authorization".into(), bearer.clone()),
        ],
        body: Some(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": schema::LEGACY, "capabilities": {},
                "clientInfo": {"name": "mcpx-e2e", "version": "0"}}})
            .to_string()
            .into_bytes(),
        ),
        revision: schema::LEGACY,
        method: Some("initialize"),
    }
    .send();
    assert_eq!(init.status, 200, "{init}");

    // /v1 over TCP.
    let status_url = format!("{base}/v1/status");
    let v1 = plain("GET", &status_url, &[], None);
    unauthorized(v1.status, &v1.headers, "GET /v1/status");
    let v1 = plain("GET", &status_url, &[("Authorization", &wrong)], None);
    unauthorized(v1.status, &v1.headers, "GET /v1/status (wrong token)");
    let v1 = plain("GET", &status_url, &[("Authorization", &bearer)], None);
    assert_eq!(v1.status, 200, "{v1}");
    let call_url = format!("{base}/v1/call");
    let body = json!({"server": "shared", "tool": "whoami", "arguments": {}}).to_string();
    let v1 = plain("POST", &call_url, &[], Some(&body));
    unauthorized(v1.status, &v1.headers, "POST /v1/call");
    let stop_url = format!("{base}/v1/stop");
    let v1 = plain("POST", &stop_url, &[], None);
    unauthorized(v1.status, &v1.headers, "POST /v1/stop");
    assert!(mcpx_e2e::alive(daemon.pid()), "an unauthorized stop stopped the daemon");

    // The socket is trusted: no token.
    let home = daemon.home();
    assert_eq!(home.status()["pid"], daemon.pid());
    let mut client = home.serve().start();
    client.whoami("shared");
    home.cli(&["call", "shared.whoami"]).assert_code(0);
}

#[test]
fn the_state_dir_is_private_and_the_socket_is_owner_only() {
    // A state dir made with the default umask before the daemon ran.
    let daemon = Daemon::start(&config(&[]));
    let home = daemon.home();
    assert_eq!(mode(home.state_dir()), 0o700, "state dir {}", home.state_dir().display());
    assert_eq!(mode(&home.socket()), 0o600, "socket {}", home.socket().display());
    let record = home.record().expect("daemon.json");
    assert_eq!(
        record["socket"].as_str().map(Path::new),
        Some(home.socket().as_path()),
        "daemon.json names the socket: {record}"
    );

    // A state dir a client creates when it starts a daemon on demand.
    let fresh = Home::without_state_dir(&config(&[]));
    assert!(!fresh.state_dir().exists());
    fresh.cli(&["ls", "--config", fresh.config_path().to_str().unwrap()]).assert_code(0);
    assert_eq!(mode(fresh.state_dir()), 0o700);
    assert_eq!(mode(&fresh.socket()), 0o600);
}

#[test]
fn a_non_loopback_host_needs_tokens_and_binding_one_is_warned_about() {
    let mut open = config(&[]);
    open["http"] = json!({"host": "0.0.0.0"});
    let home = Home::new(&open);
    let path = home.config_path().to_str().unwrap().to_owned();
    let check = home.cli(&["config", "check", "--config", &path]);
    check.assert_code(1);
    assert!(
        check.stderr.contains(&path) && check.stderr.contains("http.tokens"),
        "the error must name the file and the fix:\n{check}"
    );
    let refused = home.cli(&["daemon", "--config", &path, "--port", "0"]);
    refused.assert_code(1);
    assert!(refused.stderr.contains("http.tokens"), "{refused}");
    assert!(home.daemons().is_empty());

    let mut guarded = config(&[]);
    guarded["http"] = json!({"host": "0.0.0.0", "tokens": {"ci": TOKEN}});
    let daemon = Daemon::start(&guarded);
    let log = daemon.stderr();
    assert!(
        log.lines().any(|l| l.contains("WARN") && l.contains("0.0.0.0")),
        "binding a non-loopback address must be warned about:\n{log}"
    );
}

/// A state dir anyone may write to (say `MCPX_STATE_DIR=/tmp`) is refused, not made 0700
/// under everyone's feet nor used with a socket others could replace.
#[test]
fn a_world_writable_state_dir_is_refused_with_a_clear_error() {
    use std::os::unix::fs::PermissionsExt;
    let home = Home::new(&config(&[]));
    std::fs::create_dir_all(home.state_dir()).expect("the state dir");
    std::fs::set_permissions(home.state_dir(), std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let run = home.cli(&["daemon", "--port", "0"]);
    assert_ne!(run.code, Some(0), "{}", run.stderr);
    assert!(run.stderr.contains("writable by others"), "{}", run.stderr);
    assert_eq!(mode(home.state_dir()), 0o777, "the shared dir is left as it was");
    assert!(!home.socket().exists());
}

/// A token is compared whole (both sides hashed first, so neither its length nor a right
/// prefix shows in the time taken): a prefix, an extension, one byte off, another
/// token's value padded to this one's length are all 401; each token admits its own name,
/// whichever is longer.
#[test]
fn only_a_whole_configured_token_is_admitted_and_it_names_its_own_client() {
    const SHORT: &str = "short-token-0123456";
    let tag = tag();
    let mut cfg = config(&[("shared", fakemcp("global", &tag, &[]))]);
    cfg["http"] = json!({"tokens": {"long": TOKEN, "short": SHORT}});
    let daemon = Daemon::start(&cfg);
    let url = daemon.url();
    let call = |token: &str| {
        Modern::mcpx_call("shared", "meta", json!({})).header("Authorization", &format!("Bearer {token}")).send(url)
    };

    let one_off = format!("{}X", &TOKEN[..TOKEN.len() - 1]);
    let padded = format!("{SHORT}{}", &TOKEN[SHORT.len()..]);
    for guess in [&TOKEN[..TOKEN.len() - 1], &format!("{TOKEN}0"), &one_off, &padded, &SHORT[..4], "", "x"] {
        let reply = call(guess);
        assert_eq!(reply.status, 401, "{guess:?} must be refused:\n{reply}");
    }
    for (name, token) in [("long", TOKEN), ("short", SHORT)] {
        let reply = call(token);
        let client = &reply.structured()["meta"]["dev.mcpx/invocation"]["clientId"];
        assert_eq!(client, name, "{reply}");
    }
}
