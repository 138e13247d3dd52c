//! A real OAuth authorization server for the protected-resource tests, and the clients
//! that bring its tokens to mcpx.
//!
//! [`AuthorizationServer`] runs `tests/node/authorization_server.js` (oidc-provider,
//! pinned by `scripts/deps.sh` into `.deps/oidc`) on an ephemeral loopback port; it issues
//! JWT access tokens for whatever resource a client names. [`AuthorizationServer::token`]
//! gets one by the client_credentials grant; [`AuthorizationServer::forge`] signs claims
//! with the server's own key (or with one it does not publish), for tokens it would not
//! issue itself (an expired one). [`python_sdk`] and [`ts_sdk`] run the SDK clients with
//! a token, or with their own client-credentials providers.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::{client, node, paths, python};

/// The pinned version (`OIDC_PINS` in scripts/deps.sh); checked against what is installed.
pub const OIDC_PROVIDER_VERSION: &str = "9.13.3";

/// How long the server may take to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One oidc-provider process; killed when dropped.
pub struct AuthorizationServer {
    child: Child,
    pub issuer: String,
    /// RFC 7662, for opaque tokens (those of clients whose id begins with `opaque`).
    pub introspection_endpoint: String,
    token_endpoint: String,
    signing: Key,
    stranger: Key,
    clients: Vec<(String, String)>,
}

struct Key {
    kid: String,
    pem: String,
}

/// Which key [`AuthorizationServer::forge`] signs with.
pub enum Signer {
    /// The server's own signing key, which its metadata publishes.
    Issuer,
    /// A key the server never published, under a key id of its own.
    Stranger,
}

impl AuthorizationServer {
    /// A server with these clients (`(id, secret)`), each allowed client_credentials.
    pub fn start(clients: &[(&str, &str)]) -> AuthorizationServer {
        let oidc = paths::deps().join("oidc");
        let manifest = oidc.join("node_modules/oidc-provider/package.json");
        let installed: Value = serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap_or_default())
            .unwrap_or_else(|e| panic!("{} is unreadable ({e}): scripts/deps.sh installs it", manifest.display()));
        assert_eq!(installed["version"], OIDC_PROVIDER_VERSION, "MCPX_DEPS_FORCE=1 scripts/deps.sh");
        let mut command = Command::new(node::node());
        command.arg(node::script("authorization_server.js")).env("MCPX_OIDC_DEPS", &oidc);
        for (id, secret) in clients {
            command.args(["--client", &format!("{id}:{secret}")]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts the authorization server");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = tx.send(line);
            // Kept open until the server ends: a closed pipe would fail its next write.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let line = rx.recv_timeout(START_TIMEOUT).unwrap_or_default();
        let ready: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            let _ = child.kill();
            panic!("the authorization server did not start ({e}): {line:?}")
        });
        let key = |name: &str| Key {
            kid: ready[name]["kid"].as_str().expect("a kid").to_owned(),
            pem: ready[name]["pem"].as_str().expect("a PEM").to_owned(),
        };
        AuthorizationServer {
            issuer: ready["issuer"].as_str().expect("an issuer").to_owned(),
            token_endpoint: ready["token_endpoint"].as_str().expect("a token endpoint").to_owned(),
            introspection_endpoint: ready["introspection_endpoint"].as_str().expect("an endpoint").to_owned(),
            signing: key("signing_key"),
            stranger: key("stranger_key"),
            clients: clients.iter().map(|(id, secret)| ((*id).to_owned(), (*secret).to_owned())).collect(),
            child,
        }
    }

    /// An access token for `client` to use at `resource`, with `scope`, by the
    /// client_credentials grant (RFC 8707 `resource`).
    #[track_caller]
    pub fn token(&self, client: &str, resource: &str, scope: &str) -> String {
        let secret = &self.clients.iter().find(|(id, _)| id == client).expect("a configured client").1;
        let form = |s: &str| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
        let body = format!("grant_type=client_credentials&resource={}&scope={}", form(resource), form(scope));
        let response = client::http()
            .post(&self.token_endpoint)
            .basic_auth(client, Some(secret))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .expect("the token endpoint answers");
        let status = response.status();
        let answer: Value = response.json().expect("the token endpoint answers JSON");
        assert!(status.is_success(), "no token for {client} at {resource}: {status} {answer}");
        answer["access_token"].as_str().expect("an access_token").to_owned()
    }

    /// A JWT the server did not issue: `claims` (`iss`, `sub`, `aud` default to this
    /// server, `subject` and `resource`; `exp` to five minutes from now; a claim given as
    /// `null` is left out) signed by `signer` with ES256.
    pub fn forge(&self, signer: Signer, resource: &str, claims: Value) -> String {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let mut all = json!({"iss": self.issuer, "sub": "forged", "aud": resource, "iat": now, "exp": now + 300});
        all.as_object_mut().unwrap().extend(claims.as_object().cloned().unwrap_or_default());
        all.as_object_mut().unwrap().retain(|_, value| !value.is_null());
        let key = match signer {
            Signer::Issuer => &self.signing,
            Signer::Stranger => &self.stranger,
        };
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(key.kid.clone());
        header.typ = Some("at+jwt".into());
        let encoding = jsonwebtoken::EncodingKey::from_ec_pem(key.pem.as_bytes()).expect("an EC key");
        jsonwebtoken::encode(&header, &all, &encoding).expect("the claims sign")
    }
}

impl Drop for AuthorizationServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How an SDK client authenticates to mcpx.
pub enum Credentials<'a> {
    /// A token it already has, sent as `Authorization: Bearer` on every request.
    Bearer(&'a str),
    /// The SDK's own client-credentials provider: it discovers the authorization server
    /// from mcpx's protected resource metadata and gets its own token.
    Client { id: &'a str, secret: &'a str, issuer: &'a str },
}

impl Credentials<'_> {
    fn args(&self) -> Vec<String> {
        match self {
            Credentials::Bearer(token) => vec!["--bearer".into(), (*token).to_owned()],
            Credentials::Client { id, secret, issuer } => {
                vec!["--oauth-client".into(), format!("{id}:{secret}"), "--oauth-issuer".into(), (*issuer).to_owned()]
            }
        }
    }
}

/// `tests/python/mcp_client.py` against `url` with `credentials`: its JSON line.
#[track_caller]
pub fn python_sdk(url: &str, mode: &str, credentials: &Credentials, tool: &str, arguments: &Value) -> Value {
    let script = paths::repo_root().join("tests/python/mcp_client.py");
    let output = Command::new(python::venv_bin("python"))
        .arg(&script)
        .args(["--url", url, "--mode", mode, "--tool", tool, "--timeout", "30"])
        .arg("--args")
        .arg(arguments.to_string())
        .args(credentials.args())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    crate::process::json_line(&output, &format!("the Python SDK client ({mode})"))
}

/// `tests/node/mcp_client.js` against `url` with `credentials`: its JSON line.
#[track_caller]
pub fn ts_sdk(url: &str, mode: &str, credentials: &Credentials, tool: &str, arguments: &Value) -> Value {
    let output = Command::new(node::node())
        .arg(node::script("mcp_client.js"))
        .args(["--url", url, "--mode", mode, "--tool", tool, "--timeout", "30"])
        .arg("--args")
        .arg(arguments.to_string())
        .args(credentials.args())
        .env("MCPX_NODE_DEPS", node::deps())
        .output()
        .expect("node runs the TypeScript SDK client");
    crate::process::json_line(&output, &format!("the TypeScript SDK client ({mode})"))
}
