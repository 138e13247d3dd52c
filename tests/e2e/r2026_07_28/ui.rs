//! `/ui`, the daemon's status page, rendered by headless Chromium (Debian's `chromium`,
//! pinned by scripts/deps.sh) driven over the DevTools protocol by `tests/node/ui_page.js`:
//! it shows the daemon's servers, follows an instance starting and a call being journaled
//! without a reload, and shows
//! an upstream's hostile error text as text. `/ui` and `/ui/state` sit behind the same
//! admission as every route.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use mcpx_e2e::client::{base_url, plain};
use mcpx_e2e::process::TempDir;
use mcpx_e2e::{Daemon, Modern, Whoami, config, fakemcp, node, paths, tag};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
/// What the broken server's command is named: markup that would run if the page ever
/// treated an upstream's error text as HTML.
const HOSTILE: &str = "/nonexistent/<img src=x onerror=\"window.__pwned=1\">";

/// `tests/node/ui_page.js` with its Chromium; killed on drop.
struct Page {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    _profile: TempDir,
}

impl Page {
    fn open(url: &str) -> Page {
        assert!(
            std::path::Path::new(CHROMIUM).exists(),
            "{CHROMIUM} is missing: scripts/deps.sh installs Debian's chromium"
        );
        let profile = TempDir::new();
        let mut child = Command::new(node::node())
            .arg(node::script("ui_page.js"))
            .arg(CHROMIUM)
            .arg(profile.path())
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ui_page.js");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Page { child, stdin, stdout, _profile: profile }
    }

    #[track_caller]
    fn ask(&mut self, command: &str) -> String {
        writeln!(self.stdin, "{command}").expect("write to ui_page.js");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read from ui_page.js");
        assert!(!line.is_empty(), "ui_page.js ended on {command:?} (its stderr says why)");
        line.trim_end().to_owned()
    }

    #[track_caller]
    fn until(&mut self, expression: &str) {
        assert_eq!(self.ask(&format!("until {expression}")), "true");
    }

    fn eval(&mut self, expression: &str) -> Value {
        let line = self.ask(&format!("eval {expression}"));
        serde_json::from_str(line.strip_prefix("value ").expect("a value line")).expect("JSON")
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.wait();
        }
    }
}

fn rows(table: &str) -> String {
    format!("document.querySelectorAll('#{table} tbody tr').length")
}

#[test]
fn the_page_shows_servers_follows_an_instance_and_renders_error_text_as_text() {
    let cfg = config(&[("fake", fakemcp("global", &tag(), &[])), ("broken", json!({"command": HOSTILE}))]);
    let daemon = Daemon::start(&cfg);
    let base = base_url(daemon.url()).to_owned();
    let mut page = Page::open(&format!("{base}/ui"));

    page.until(&format!("{} === 2", rows("servers")));
    assert_eq!(page.eval(&rows("instances")), json!(0), "an instance before any call");

    // A call starts fake's instance: the open page shows it without a reload.
    Whoami::of(&Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    page.until(&format!("{} === 1", rows("instances")));
    page.until("document.querySelector('#instances tbody tr td').textContent === 'fake'");
    // And the call, from the journal: in the recent calls, and counted on fake's row.
    page.until("document.querySelector('#calls tbody').innerText.includes('tools/call whoami')");
    page.until("document.querySelector('tr[data-server=fake] td:nth-child(4)').textContent === '1'");

    // The broken server fails to start; its error (naming the hostile command) is text.
    let _ = Modern::mcpx_call("broken", "anything", json!({})).send(daemon.url());
    page.until("document.querySelector('tr[data-server=broken] td.error').textContent.includes('<img src=x')");
    assert_eq!(page.eval("document.querySelectorAll('img').length"), json!(0), "the error text became markup");
    assert_eq!(page.eval("window.__pwned === undefined"), json!(true), "the error text ran");
    let state = page.eval("document.querySelector('tr[data-server=broken]').innerText");
    assert!(state.as_str().is_some_and(|s| s.contains("failing") || s.contains("crash-looping")), "{state}");

    let shot = TempDir::new();
    let png = shot.path().join("ui.png");
    assert_eq!(page.ask(&format!("shot {}", png.display())), "shot");
    let bytes = std::fs::read(&png).expect("the screenshot");
    assert!(bytes.starts_with(b"\x89PNG"), "not a PNG");
    // `MCPX_UI_SCREENSHOT=1` refreshes the one in docs/.
    if std::env::var_os("MCPX_UI_SCREENSHOT").is_some() {
        std::fs::write(paths::repo_root().join("docs/ui.png"), &bytes).expect("write docs/ui.png");
    }
}

#[test]
fn the_page_carries_a_strict_csp_and_its_state_needs_the_token() {
    const TOKEN: &str = "ui-token-0123456789abcdef";
    let mut cfg = config(&[("fake", fakemcp("global", &tag(), &[]))]);
    cfg["http"] = json!({"tokens": {"ci": TOKEN}});
    let daemon = Daemon::start(&cfg);
    let base = base_url(daemon.url());
    let bearer = format!("Bearer {TOKEN}");
    for path in ["/ui", "/ui/state", "/ui/app.js"] {
        let none = plain("GET", &format!("{base}{path}"), &[], None);
        assert_eq!(none.status, 401, "{path} without the token: {none}");
        assert!(!none.body.contains("fake"), "{path} leaked the servers: {none}");
    }
    let page = plain("GET", &format!("{base}/ui"), &[("Authorization", &bearer)], None);
    assert_eq!(page.status, 200, "{page}");
    let csp = page.headers.iter().find(|(n, _)| n == "content-security-policy").map(|(_, v)| v.clone());
    let csp = csp.unwrap_or_else(|| panic!("no CSP: {page}"));
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe"), "{csp}");
    let state = plain("GET", &format!("{base}/ui/state"), &[("Authorization", &bearer)], None);
    assert_eq!(state.status, 200, "{state}");
    let state: Value = serde_json::from_str(&state.body).expect("JSON");
    assert_eq!(state["servers"][0]["name"], "fake");
}

#[test]
fn the_script_never_writes_markup() {
    let script = std::fs::read_to_string(paths::repo_root().join("crates/server/src/ui/app.js")).unwrap();
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
        assert!(!script.contains(sink), "app.js uses {sink}");
    }
}
