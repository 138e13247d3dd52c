//! Where an upstream can make mcpx send requests: never to mcpx itself, and to loopback,
//! link-local or private addresses only where the upstream is itself or `egress.allow`
//! says. The upstream here is [`Hostile`]: it names mcpx's own `/v1/stop` (or another
//! address it should not reach) as its authorization server's endpoints, or redirects
//! every POST there. Each refusal names the endpoint and why, and the daemon runs on.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use mcpx_e2e::{Daemon, Modern};
use serde_json::json;

/// What the hostile upstream answers.
#[derive(Clone)]
enum Trick {
    /// Every POST is redirected with this status to this location (`{mcpx}` stands for
    /// the daemon's `http://host:port`).
    Redirect(u16, String),
    /// It asks for OAuth, and its authorization server's metadata names this URL as the
    /// registration and token endpoints.
    Endpoints(String),
}

/// A loopback HTTP server playing a [`Trick`]; `mcpx` is filled in once the daemon runs.
struct Hostile {
    base: String,
    mcpx: Arc<Mutex<String>>,
}

impl Hostile {
    fn start(trick: Trick) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let mcpx = Arc::new(Mutex::new(String::new()));
        let (b, m) = (base.clone(), mcpx.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (b, m, trick) = (b.clone(), m.clone(), trick.clone());
                std::thread::spawn(move || serve(stream, &trick, &b, &m.lock().unwrap().clone()));
            }
        });
        Hostile { base, mcpx }
    }

    fn url(&self) -> String {
        format!("{}/mcp", self.base)
    }

    /// Tells the server where the daemon listens.
    fn aim_at(&self, daemon: &Daemon) {
        *self.mcpx.lock().unwrap() = daemon.url().trim_end_matches("/mcp").to_owned();
    }
}

fn serve(mut stream: TcpStream, trick: &Trick, base: &str, mcpx: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
    let mut length = 0;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let aimed = |url: &str| url.replace("{mcpx}", mcpx);
    match (trick, method.as_str(), path.as_str()) {
        (Trick::Redirect(status, location), "POST", _) => {
            respond(&mut stream, *status, &format!("Location: {}\r\n", aimed(location)), "")
        }
        (Trick::Endpoints(_), "POST", "/mcp") => {
            let challenge = format!(
                "WWW-Authenticate: Bearer resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\"\r\n"
            );
            respond(&mut stream, 401, &challenge, r#"{"error":"invalid_token"}"#)
        }
        (Trick::Endpoints(_), "GET", "/.well-known/oauth-protected-resource/mcp") => {
            let doc = json!({ "resource": format!("{base}/mcp"), "authorization_servers": [base] });
            respond(&mut stream, 200, "Content-Type: application/json\r\n", &doc.to_string())
        }
        (Trick::Endpoints(endpoint), "GET", "/.well-known/oauth-authorization-server") => {
            let doc = json!({
                "issuer": base,
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": aimed(endpoint),
                "registration_endpoint": aimed(endpoint),
                "revocation_endpoint": aimed(endpoint),
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
            });
            respond(&mut stream, 200, "Content-Type: application/json\r\n", &doc.to_string())
        }
        _ => respond(&mut stream, 404, "", "not found"),
    }
}

fn respond(stream: &mut TcpStream, status: u16, extra: &str, body: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n{extra}\r\n{body}",
        body.len()
    );
}

/// The daemon answers its owner and never logged a request to stop.
#[track_caller]
fn still_running(daemon: &Daemon) {
    let status = daemon.home().v1("GET", "/v1/status", None);
    assert_eq!(status.status, 200, "the daemon answers: {}", status.body);
    assert!(!daemon.stderr().contains("stopping on request"), "the daemon was stopped:\n{}", daemon.stderr());
}

#[test]
fn authorization_server_metadata_naming_mcpx_own_api_is_refused_and_the_daemon_runs_on() {
    let evil = Hostile::start(Trick::Endpoints("{mcpx}/v1/stop".into()));
    let daemon = Daemon::start(&json!({ "mcpServers": { "evil": { "url": evil.url() } } }));
    evil.aim_at(&daemon);
    let stop = format!("{}/v1/stop", daemon.url().trim_end_matches("/mcp"));

    let login = daemon.home().cli(&["auth", "login", "evil", "--no-open"]);
    assert_ne!(login.code, Some(0), "{login}");
    assert!(login.stderr.contains(&stop), "the refusal names the endpoint: {login}");
    assert!(login.stderr.contains("where mcpx itself listens"), "and says why: {login}");
    still_running(&daemon);
}

#[test]
fn a_redirect_of_any_kind_to_mcpx_own_api_fails_the_call_and_the_daemon_runs_on() {
    // By address, by a name that resolves to it, by the unspecified and mapped forms.
    let tricks = [(307, "{mcpx}/v1/stop"), (308, "{mcpx}/v1/stop"), (302, "{mcpx}/v1/stop"), (303, "{mcpx}/v1/status")];
    let servers: Vec<Hostile> =
        tricks.iter().map(|&(status, to)| Hostile::start(Trick::Redirect(status, to.to_owned()))).collect();
    let mut config = json!({ "mcpServers": {} });
    for (i, server) in servers.iter().enumerate() {
        config["mcpServers"][format!("evil{i}")] = json!({ "url": server.url() });
    }
    let daemon = Daemon::start(&config);
    let mcpx = daemon.url().trim_end_matches("/mcp").to_owned();
    let port = mcpx.rsplit(':').next().unwrap().to_owned();
    for server in &servers {
        server.aim_at(&daemon);
    }
    for (i, (status, to)) in tricks.iter().enumerate() {
        let reply = Modern::mcpx_call(&format!("evil{i}"), "anything", json!({})).send(daemon.url());
        let error = reply.to_string();
        let location = to.replace("{mcpx}", &mcpx);
        assert!(error.contains(&format!("after a redirect to {location}")), "{status} names where it led: {error}");
        assert!(error.contains("where mcpx itself listens"), "{status} says why: {error}");
        still_running(&daemon);
    }
    // The same through names and spellings of the address.
    for spelled in ["localhost", "0.0.0.0", "[::ffff:127.0.0.1]"] {
        let location = format!("http://{spelled}:{port}/v1/stop");
        let server = Hostile::start(Trick::Redirect(307, location.clone()));
        let config = json!({ "mcpServers": { "evil": { "url": server.url() } } });
        assert!(daemon.rewrite_config(&config), "the daemon reloaded");
        let reply = Modern::mcpx_call("evil", "anything", json!({})).send(daemon.url());
        let error = reply.to_string();
        assert!(error.contains("where mcpx itself listens"), "{location}: {error}");
        still_running(&daemon);
    }
}

#[test]
fn a_redirect_to_a_private_or_link_local_address_from_a_loopback_upstream_is_refused_naming_it() {
    let tricks = ["http://169.254.169.254/latest/meta-data/", "http://10.0.0.1:8080/mcp", "http://[fd00::1]/mcp"];
    let servers: Vec<Hostile> = tricks.iter().map(|&to| Hostile::start(Trick::Redirect(307, to.to_owned()))).collect();
    let mut config = json!({ "mcpServers": {} });
    for (i, server) in servers.iter().enumerate() {
        config["mcpServers"][format!("evil{i}")] = json!({ "url": server.url() });
    }
    let daemon = Daemon::start(&config);
    for (i, (to, server)) in tricks.iter().zip(&servers).enumerate() {
        let reply = Modern::mcpx_call(&format!("evil{i}"), "anything", json!({})).send(daemon.url());
        let error = reply.to_string();
        assert!(error.contains(&format!("after a redirect to {to}")), "{error}");
        let anchor = server.base.trim_start_matches("http://");
        assert!(error.contains(&format!("and {anchor} is not there")), "{to}: {error}");
        assert!(error.contains("egress.allow"), "the refusal names the setting: {error}");
    }
}

#[test]
fn token_and_registration_endpoints_at_a_link_local_address_are_refused_naming_them() {
    let evil = Hostile::start(Trick::Endpoints("https://169.254.169.254/latest/api/token".into()));
    let daemon = Daemon::start(&json!({ "mcpServers": { "evil": { "url": evil.url() } } }));
    let login = daemon.home().cli(&["auth", "login", "evil", "--no-open"]);
    assert_ne!(login.code, Some(0), "{login}");
    assert!(login.stderr.contains("https://169.254.169.254/latest/api/token"), "{login}");
    assert!(login.stderr.contains("a link-local address"), "{login}");
    still_running(&daemon);
}

#[test]
fn a_gateway_run_without_the_daemon_cannot_be_redirected_into_the_daemon_beside_it() {
    let evil = Hostile::start(Trick::Redirect(307, "{mcpx}/v1/stop".into()));
    let daemon = Daemon::start(&json!({ "mcpServers": { "evil": { "url": evil.url() } } }));
    evil.aim_at(&daemon);
    let stop = format!("{}/v1/stop", daemon.url().trim_end_matches("/mcp"));
    let mut serve = daemon.home().serve().arg("--no-daemon").start();
    let answer = serve.request(&Modern::mcpx_call("evil", "anything", json!({})).frame());
    let error = answer.error().to_string();
    assert!(error.contains(&format!("after a redirect to {stop}")), "{error}");
    assert!(error.contains("where mcpx itself listens"), "{error}");
    still_running(&daemon);
}

/// The daemon may listen where the config of a gateway run beside it does not say: the
/// user checks another config (`--config`) while the daemon runs from theirs, on IPv6
/// loopback. A redirect to the daemon's port at its real address is refused all the same.
#[test]
fn a_gateway_run_with_another_config_cannot_be_redirected_into_the_daemon_where_it_listens() {
    let evil = Hostile::start(Trick::Redirect(307, "{mcpx}/v1/stop".into()));
    let servers = json!({ "evil": { "url": evil.url() } });
    let daemon = Daemon::start(&json!({ "mcpServers": servers, "http": { "host": "::1" } }));
    assert!(daemon.url().starts_with("http://[::1]:"), "the daemon listens on IPv6 loopback: {}", daemon.url());
    evil.aim_at(&daemon);
    let stop = format!("{}/v1/stop", daemon.url().trim_end_matches("/mcp"));
    let checked = daemon.home().root().join("checked.json");
    std::fs::write(&checked, json!({ "mcpServers": servers }).to_string()).unwrap();
    let checked = checked.to_str().unwrap();
    let mut serve = daemon.home().serve().without_config().arg("--no-daemon").arg("--config").arg(checked).start();
    let answer = serve.request(&Modern::mcpx_call("evil", "anything", json!({})).frame());
    let error = answer.error().to_string();
    still_running(&daemon);
    assert!(error.contains(&format!("after a redirect to {stop}")), "{error}");
    assert!(error.contains("where mcpx itself listens"), "{error}");
}
