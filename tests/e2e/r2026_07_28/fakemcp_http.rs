//! fakemcp over Streamable HTTP (`fakemcp --http`): the same tools as over stdio, in both
//! eras, and an mcpx daemon reaching it through a `url` server in both caller eras.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mcpx_e2e::{Daemon, LegacySession, Modern, Whoami, config, paths, tag};
use serde_json::{Value, json};

/// A `fakemcp --http 127.0.0.1:0` process, killed on drop.
struct FakeHttp {
    child: Child,
    url: String,
}

impl FakeHttp {
    /// Starts it with `extra` flags and reads the URL it prints once listening.
    #[track_caller]
    fn start(extra: &[&str]) -> FakeHttp {
        let mut child = Command::new(paths::fakemcp())
            .args(["--http", "127.0.0.1:0", "--tag", &tag()])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", paths::fakemcp().display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, url) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = sender.send(line.trim().to_owned());
        });
        let url = url
            .recv_timeout(Duration::from_secs(30))
            .ok()
            .filter(|url| url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"));
        let Some(url) = url else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("fakemcp --http printed no http://127.0.0.1:PORT/mcp line within 30 s");
        };
        FakeHttp { child, url }
    }
}

impl Drop for FakeHttp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn arguments() -> Value {
    json!({"text": "over http", "n": 7, "nested": {"list": [1, 2]}})
}

#[test]
fn fakemcp_over_http_answers_modern_requests_and_legacy_sessions_with_its_stdio_tools() {
    let fake = FakeHttp::start(&[]);

    let list = Modern::tools_list().send(&fake.url);
    let names: Vec<&str> = list.result()["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {list}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"echo") && names.contains(&"whoami"), "{list}");
    let echo = Modern::tools_call("echo", arguments()).send(&fake.url);
    assert_eq!(echo.status, 200, "{echo}");
    assert_eq!(echo.structured(), &arguments(), "{echo}");
    let modern = Whoami::of(&Modern::tools_call("whoami", json!({})).send(&fake.url));
    assert_eq!(modern.era, "modern");

    // A handshake-era request outside a session is refused; inside one it is answered,
    // by the same process.
    let outside = Modern::tools_list()
        .without_meta("io.modelcontextprotocol/protocolVersion")
        .without_meta("io.modelcontextprotocol/clientCapabilities")
        .send(&fake.url);
    assert!(outside.frame().get("error").is_some(), "{outside}");
    let session = LegacySession::open(&fake.url);
    let legacy = Whoami::of(&session.tools_call("whoami", json!({})));
    assert_eq!(legacy.era, "legacy");
    assert_eq!(legacy.instance, modern.instance);
    assert_eq!(legacy.calls, modern.calls + 1);
    let echo = session.tools_call("echo", arguments());
    assert_eq!(echo.structured(), &arguments(), "{echo}");

    // DELETE ends the session: its id is then unknown.
    assert_eq!(session.delete().status, 200);
    let after = session.request("tools/list", json!({}));
    assert_eq!(after.status, 404, "{after}");
}

#[test]
fn a_daemon_answers_tools_calls_through_a_url_server_that_is_fakemcp_over_http() {
    let fake = FakeHttp::start(&[]);
    let direct = Whoami::of(&Modern::tools_call("whoami", json!({})).send(&fake.url));
    let daemon = Daemon::start(&config(&[("fake", json!({"url": fake.url}))]));

    let echo = Modern::mcpx_call("fake", "echo", arguments()).send(daemon.url());
    assert_eq!(echo.structured(), &arguments(), "{echo}");
    let through = Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    assert_eq!(through.instance, direct.instance, "mcpx reached the fakemcp that listens on {}", fake.url);
    assert_eq!(through.era, "modern", "fakemcp answers server/discover, so mcpx speaks 2026 to it");
    assert!(through.calls > direct.calls);

    let session = LegacySession::open(daemon.url());
    let echo = session.mcpx_call("fake", "echo", arguments());
    assert_eq!(echo.structured(), &arguments(), "{echo}");
}

#[test]
fn a_daemon_falls_back_to_a_session_with_a_handshake_era_fakemcp_over_http() {
    let fake = FakeHttp::start(&["--era", "legacy"]);
    let daemon = Daemon::start(&config(&[("fake", json!({"url": fake.url}))]));

    let echo = Modern::mcpx_call("fake", "echo", arguments()).send(daemon.url());
    assert_eq!(echo.structured(), &arguments(), "{echo}");
    let first = Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    assert_eq!(first.era, "legacy", "mcpx opened a session after server/discover was refused");
    let second = Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    assert_eq!(second.instance, first.instance);
    assert_eq!(second.calls, first.calls + 1);
}
