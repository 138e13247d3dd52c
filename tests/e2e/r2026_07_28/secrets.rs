//! Secrets stay where they belong: what `${ENV}` expands to in a server's `env` or
//! `headers`, and the bearer tokens of `http.tokens`, never appear in the daemon's log (at
//! debug level), in `/v1/status` or `mcpx status`, or in an error a caller gets; and no
//! name reaches a server the config does not have.

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::process::free_port;
use mcpx_e2e::{Daemon, Modern, fakemcp, tag};
use serde_json::json;

const SECRET: &str = "s3cret-env-value-7f1e2d";
const HEADER_SECRET: &str = "s3cret-header-value-9a8b7c";
const TOKEN: &str = "ci-token-0123456789abcdef-xyz";

#[test]
fn expanded_secrets_and_tokens_never_reach_logs_status_or_errors() {
    let t = tag();
    let mut env_server = fakemcp("global", &t, &[]);
    env_server["env"] = json!({"API_KEY": "${MCPX_TEST_SECRET}"});
    let down = format!("http://127.0.0.1:{}/mcp", free_port());
    let config = json!({
        "mcpServers": {
            "f": env_server,
            "down": {"url": down, "headers": {"Authorization": "Bearer ${MCPX_TEST_HEADER_SECRET}"}},
        },
        "http": {"tokens": {"ci": TOKEN}},
    });
    let daemon = Daemon::start_with_env(
        &config,
        &[("MCPX_TEST_SECRET", SECRET), ("MCPX_TEST_HEADER_SECRET", HEADER_SECRET), ("MCPX_LOG", "debug")],
    );
    let url = daemon.url();
    let auth = format!("Bearer {TOKEN}");

    // The secret did reach the server it was meant for.
    let seen = Modern::mcpx_call("f", "env", json!({"name": "API_KEY"})).header("Authorization", &auth).send(url);
    assert_eq!(seen.structured()["value"], SECRET, "{seen}");
    // The unreachable server's error names it and its URL, not its headers.
    let refused = Modern::mcpx_call("down", "anything", json!({})).header("Authorization", &auth).send(url);
    let mut seen_by_callers = vec![refused.to_string()];
    // A wrong token, and no token: refused without echoing anything back.
    for header in [Some("Bearer ci-token-0123456789abcdef-wrong"), None] {
        let mut request = Modern::tools_list();
        if let Some(value) = header {
            request = request.header("Authorization", value);
        }
        let reply = request.send(url);
        assert_eq!(reply.status, 401, "{reply}");
        seen_by_callers.push(reply.to_string());
    }
    let status = daemon.home().status();
    let cli = daemon.home().cli(&["status", "--json"]);
    seen_by_callers.push(status.to_string());
    seen_by_callers.push(cli.stdout.clone());
    let api = plain("GET", &format!("{}/v1/status", base_url(url)), &[("Authorization", auth.as_str())], None);
    seen_by_callers.push(api.json().to_string());

    let log = daemon.stderr();
    assert!(log.contains("DEBUG") || log.contains("debug"), "the daemon logged at debug level:\n{log}");
    for secret in [SECRET, HEADER_SECRET, TOKEN] {
        assert!(!log.contains(secret), "the daemon log shows {secret:?}:\n{log}");
        for text in &seen_by_callers {
            assert!(!text.contains(secret), "a caller was shown {secret:?}:\n{text}");
        }
    }
}

#[test]
fn no_server_name_reaches_what_the_config_does_not_have() {
    let t = tag();
    let daemon = Daemon::start(&json!({"mcpServers": {"f": fakemcp("global", &t, &[])}}));
    let url = daemon.url();
    for name in ["F", "f ", "../f", "f/..", "mcpx", "artifacts", "", "f\u{0}"] {
        let reply = Modern::mcpx_call(name, "whoami", json!({})).send(url);
        reply.assert_error(200, -32602);
        assert!(!reply.to_string().contains("\"instance\""), "{name:?} reached an instance:\n{reply}");
    }
}
