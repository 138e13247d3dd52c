//! `/metrics`: the real Prometheus server scrapes mcpx (in OpenMetrics, which it asks for
//! first) and reads back what it counted; the text format passes Prometheus's linter;
//! labels stay bounded (no session, call id or argument); the route is behind the same
//! admission as every other (the admission tests walk it too), and with tokens it is the
//! owner's and `http.admins'` only.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::{Daemon, Modern, config, fakemcp, poll, tag};
use serde_json::{Value, json};

/// A Prometheus server of its own, stopped when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: std::path::PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

impl Prometheus {
    /// Starts `prometheus` scraping `target` (host:port) every second.
    fn scraping(target: &str) -> Prometheus {
        let dir = std::env::temp_dir().join(format!("mcpx-prometheus-{}", tag()));
        std::fs::create_dir_all(&dir).expect("a directory for prometheus");
        let config = format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: mcpx\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write prometheus.yml");
        let port = free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr")).expect("prometheus stderr"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start prometheus ({e}): scripts/deps.sh installs it"));
        Prometheus { child, port, _dir: dir }
    }

    /// The value of the one series `query` selects, once Prometheus has it.
    fn value(&self, query: &str) -> Option<f64> {
        let encoded: String = query
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect();
        let url = format!("http://127.0.0.1:{}/api/v1/query?query={encoded}", self.port);
        let reply = mcpx_e2e::client::http().get(url).send().ok()?;
        let body: Value = reply.json().ok()?;
        body["data"]["result"][0]["value"][1].as_str()?.parse().ok()
    }
}

#[test]
fn prometheus_scrapes_the_call_count_by_server_tool_and_outcome() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    let calls = 5;
    for i in 0..calls {
        Modern::mcpx_call("up", "echo", json!({"i": i})).session("secret-session").send(daemon.url()).structured();
    }
    Modern::mcpx_call("up", "fail", json!({})).send(daemon.url());
    let target = base_url(daemon.url()).trim_start_matches("http://").to_owned();
    let prometheus = Prometheus::scraping(&target);
    let ok = r#"mcpx_requests_total{server="up",method="tools/call",tool="echo",outcome="ok"}"#;
    let seen = poll(Duration::from_secs(60), || prometheus.value(ok).filter(|v| *v == calls as f64));
    assert!(seen.is_some(), "Prometheus never read {calls} calls: {:?}", prometheus.value(ok));
    let failed = r#"mcpx_requests_total{server="up",tool="fail",outcome="tool_error"}"#;
    assert_eq!(prometheus.value(failed), Some(1.0));
    let durations = r#"mcpx_request_duration_seconds_count{server="up",tool="echo",outcome="ok"}"#;
    assert_eq!(prometheus.value(durations), Some(calls as f64));
    assert_eq!(prometheus.value(r#"mcpx_instances{server="up",scope="global"}"#), Some(1.0));
    assert_eq!(prometheus.value(r#"mcpx_instance_starts_total{server="up"}"#), Some(1.0));
}

#[test]
fn metric_labels_carry_no_session_call_id_or_argument() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("call", &tag(), &[]))]));
    Modern::mcpx_call("up", "echo", json!({"needle": "argument-value"})).session("session-label").send(daemon.url());
    // A caller may type any tool name: it does not become a label.
    Modern::mcpx_call("up", "made-up-tool-name", json!({})).send(daemon.url());
    let reply = plain("GET", &format!("{}/metrics", base_url(daemon.url())), &[], None);
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.header("content-type").is_some_and(|t| t.starts_with("text/plain")), "{:?}", reply.headers);
    let text = reply.body;
    assert!(text.contains(r#"tool="echo""#), "{text}");
    for leak in ["session-label", "argument-value", "made-up-tool-name", "call:"] {
        assert!(!text.contains(leak), "{leak} appears in /metrics:\n{text}");
    }
    // Every sample line is `name{labels} value`, with a number for a value.
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let value = line.rsplit(' ').next().unwrap_or_default();
        assert!(value.parse::<f64>().is_ok(), "not a sample: {line}");
        assert!(line.starts_with("mcpx_"), "{line}");
    }
    for name in ["mcpx_legacy_sessions", "mcpx_pending_questions", "mcpx_scripts_running", "mcpx_journal_dropped_total"]
    {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
}

/// Prometheus's own linter (`promtool check metrics`) on what a scraper that asks for no
/// particular format gets; its status and what it said.
fn promtool_check(text: &str) -> (bool, String) {
    use std::io::Write as _;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start promtool ({e}): scripts/deps.sh installs prometheus"));
    child.stdin.take().expect("promtool stdin").write_all(text.as_bytes()).expect("write to promtool");
    let out = child.wait_with_output().expect("promtool ran");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_text_format_passes_promtool_and_openmetrics_is_served_when_asked_for() {
    let daemon = Daemon::start(&config(&[("up", fakemcp("global", &tag(), &[]))]));
    Modern::mcpx_call("up", "echo", json!({})).send(daemon.url());
    let url = format!("{}/metrics", base_url(daemon.url()));

    let text = plain("GET", &url, &[], None);
    assert_eq!(text.status, 200, "{}", text.body);
    assert_eq!(text.header("content-type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    let (clean, said) = promtool_check(&text.body);
    assert!(clean, "promtool rejects the text format: {said}\n{}", text.body);
    assert!(text.body.contains("# TYPE mcpx_requests_total counter"), "{}", text.body);

    // What a Prometheus server sends first.
    let accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    let open = plain("GET", &url, &[("Accept", accept)], None);
    assert_eq!(open.status, 200, "{}", open.body);
    assert_eq!(open.header("content-type"), Some("application/openmetrics-text; version=1.0.0; charset=utf-8"));
    assert!(open.body.ends_with("# EOF\n"), "OpenMetrics ends with # EOF:\n{}", open.body);
    assert!(open.body.contains("# TYPE mcpx_requests counter"), "{}", open.body);
    assert!(open.body.contains(r#"mcpx_requests_total{server="up",method="tools/call",tool="echo",outcome="ok"} 1"#));
}

/// With tokens, `/metrics` needs one like every route, and one of `http.admins`: it counts
/// every caller's requests (a scraper is given an admin's token).
#[test]
fn with_tokens_metrics_need_an_admins_token() {
    let mut cfg = config(&[]);
    cfg["http"] = json!({
        "tokens": {"ci": "ci-token-0123456789abcdef", "guest": "guest-token-0123456789abc"},
        "admins": ["token:ci"],
    });
    let daemon = Daemon::start(&cfg);
    let url = format!("{}/metrics", base_url(daemon.url()));
    assert_eq!(plain("GET", &url, &[], None).status, 401);
    let guest = plain("GET", &url, &[("Authorization", "Bearer guest-token-0123456789abc")], None);
    assert_eq!(guest.status, 403, "{}", guest.body);
    let authorized = plain("GET", &url, &[("Authorization", "Bearer ci-token-0123456789abcdef")], None);
    assert_eq!(authorized.status, 200, "{}", authorized.body);
}
