//! Real agent hosts (Claude Code, Gemini CLI, Qwen Code, Codex, opencode) driven through
//! their own CLIs against mcpx, with a stand-in model so no account is needed.
//!
//! `scripts/deps.sh` installs the pinned CLIs (`HOST_PINS`) into `.deps/hosts`; each runs
//! on the Node 22 of `.deps/node`. A [`HostHome`] is a fresh `$HOME` (and working
//! directory) holding only that host's config: one MCP server named `mcpx`, reached over
//! stdio (`mcpx serve` behind `tests/node/stdio_tap.js`) or over Streamable HTTP (the
//! daemon's `/mcp` behind an [`HttpTap`]), and a model endpoint pointed at a
//! [`StandinModel`] (`tests/python/standin_model.py`), which asks for one `mcpx_call`.
//!
//! Every host runs with a clean environment (no telemetry, no update checks, nothing
//! but loopback), in a process group of its own; [`HostHome::run`] fails the test when
//! anything the host started is still alive after it exited.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::node;
use crate::paths;
use crate::process::{TempDir, alive, poll, signal};
use crate::schema;
use crate::tap::{HttpTap, StdioTap};

/// How long one host run may take before it is killed (they take 1 to 20 s here).
const HOST_TIMEOUT: Duration = Duration::from_secs(120);
/// How long what a host started may take to go after the host exited.
const LEFTOVER_TIMEOUT: Duration = Duration::from_secs(15);
/// What the stand-in model says before the tool result it was given.
pub const FINAL_PREFIX: &str = "DONE: ";

/// A real agent host, pinned by version in `HOST_PINS` (scripts/deps.sh).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Host {
    ClaudeCode,
    GeminiCli,
    QwenCode,
    Codex,
    Opencode,
}

impl Host {
    /// The npm package and the version pinned for it.
    pub fn package(self) -> (&'static str, &'static str) {
        match self {
            Host::ClaudeCode => ("@anthropic-ai/claude-code", "2.1.328"),
            Host::GeminiCli => ("@google/gemini-cli", "0.61.0"),
            Host::QwenCode => ("@qwen-code/qwen-code", "0.24.4"),
            Host::Codex => ("@openai/codex", "0.169.0"),
            Host::Opencode => ("opencode-ai", "1.18.33"),
        }
    }

    fn command_name(self) -> &'static str {
        match self {
            Host::ClaudeCode => "claude",
            Host::GeminiCli => "gemini",
            Host::QwenCode => "qwen",
            Host::Codex => "codex",
            Host::Opencode => "opencode",
        }
    }

    /// The installed CLI; panics (never skips) when it is missing or not the pinned version.
    #[track_caller]
    pub fn executable(self) -> PathBuf {
        let (package, pinned) = self.package();
        let root = deps().join("node_modules");
        let manifest = root.join(package).join("package.json");
        let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| {
            panic!(
                "{package} is not installed ({}: {e}): scripts/deps.sh should have installed it \
                 into .deps/hosts (MCPX_DEPS_FORCE=1 scripts/deps.sh)",
                manifest.display()
            )
        });
        let installed: Value = serde_json::from_str(&text).expect("package.json is JSON");
        assert_eq!(
            installed["version"], pinned,
            "{package} in .deps/hosts is not the pinned version: MCPX_DEPS_FORCE=1 scripts/deps.sh"
        );
        let bin = root.join(".bin").join(self.command_name());
        assert!(bin.exists(), "{} is missing: the {package} install is broken", bin.display());
        bin
    }
}

/// `.deps/hosts`, installed (or verified) by `scripts/deps.sh`.
pub fn deps() -> PathBuf {
    paths::deps().join("hosts")
}

/// How a host reaches mcpx, with the tap that sees what went over it.
pub enum Link {
    /// The host launches `mcpx serve` (behind a stdio tap) joining the test's daemon.
    Serve { state_dir: PathBuf, tap: StdioTap },
    /// The host posts to the daemon's `/mcp` (through an HTTP tap).
    Http { tap: HttpTap },
}

impl Link {
    pub fn serve(daemon: &crate::Daemon) -> Link {
        Link::Serve { state_dir: daemon.state_dir().to_owned(), tap: StdioTap::new() }
    }

    pub fn http(daemon: &crate::Daemon) -> Link {
        Link::Http { tap: HttpTap::start(daemon.url()) }
    }

    /// The stdio command line (program, arguments) and its environment, or the URL.
    fn entry(&self) -> Entry {
        match self {
            Link::Serve { state_dir, tap } => {
                let argv = node::tap_command(tap, &node::mcpx_serve());
                let text = |s: &OsString| s.to_str().expect("a UTF-8 path").to_owned();
                Entry::Stdio {
                    command: text(&argv[0]),
                    args: argv[1..].iter().map(text).collect(),
                    env: ("MCPX_STATE_DIR".to_owned(), state_dir.to_str().expect("a UTF-8 path").to_owned()),
                }
            }
            Link::Http { tap } => Entry::Http { url: tap.url() },
        }
    }

    /// The JSON-RPC methods the host sent mcpx, in order.
    pub fn methods(&self) -> Vec<String> {
        match self {
            Link::Serve { tap, .. } => node::rpc_methods(&tap.sent()),
            Link::Http { tap } => {
                let bodies: Vec<Value> = tap.requests().into_iter().flat_map(|r| batch(r.body)).collect();
                node::rpc_methods(&bodies)
            }
        }
    }

    /// The protocol revision the host spoke: 2026-07-28 when its requests carry it in
    /// `_meta`, else the version its `initialize` asked for.
    pub fn revision(&self) -> Option<String> {
        let sent: Vec<Value> = match self {
            Link::Serve { tap, .. } => tap.sent(),
            Link::Http { tap } => tap.requests().into_iter().flat_map(|r| batch(r.body)).collect(),
        };
        sent.iter().find_map(|m| {
            node::meta_protocol_version(m).map(str::to_owned).or_else(|| {
                (m["method"] == "initialize")
                    .then(|| m["params"]["protocolVersion"].as_str().map(str::to_owned))
                    .flatten()
            })
        })
    }

    /// Checks every frame mcpx wrote to the host (over stdio, or in the HTTP responses)
    /// against the schema of the revision the request it answers spoke.
    #[track_caller]
    pub fn assert_frames_valid(&self) {
        // (the request messages, mcpx's answer messages, the revision the HTTP header named)
        let exchanges: Vec<(Vec<Value>, Vec<Value>, Option<String>)> = match self {
            Link::Serve { tap, .. } => vec![(tap.sent(), tap.received(), None)],
            Link::Http { tap } => tap
                .exchanges()
                .into_iter()
                .map(|(request, response)| {
                    let header = request.header("mcp-protocol-version").map(str::to_owned);
                    let answers = response.map(|r| r.messages).unwrap_or_default();
                    (batch(request.body), answers, header)
                })
                .collect(),
        };
        let mut negotiated: Option<String> = None;
        let mut checked = 0;
        for (sent, received, header) in exchanges {
            for frame in received {
                let answers = frame.get("result").is_some() || frame.get("error").is_some();
                let request =
                    sent.iter().find(|m| answers && m.get("method").is_some() && m.get("id") == frame.get("id"));
                let Some(request) = request else {
                    // A notification or a request of mcpx's: the session's revision.
                    let revision = header.clone().or_else(|| negotiated.clone());
                    let revision = revision.unwrap_or_else(|| schema::MODERN.to_owned());
                    schema::assert_frame(known(&revision), None, &frame);
                    checked += 1;
                    continue;
                };
                let method = request["method"].as_str().unwrap_or_default();
                let revision = match node::meta_protocol_version(request) {
                    Some(modern) => modern.to_owned(),
                    None if method == "initialize" => {
                        frame["result"]["protocolVersion"].as_str().unwrap_or(schema::MODERN).to_owned()
                    }
                    None => header.clone().or_else(|| negotiated.clone()).unwrap_or_else(|| schema::MODERN.to_owned()),
                };
                schema::assert_frame(known(&revision), Some(method), &frame);
                checked += 1;
                if method == "initialize" {
                    negotiated = Some(revision);
                }
            }
        }
        assert!(checked > 0, "mcpx wrote no frame the tap could read:\n{}", self.transcript());
    }

    /// Waits until no `mcpx serve` (nor tap in front of one) joining the test's daemon is
    /// left: a host may start its stdio servers outside its own process group, so
    /// [`HostHome::run`]'s check alone could miss one. Kills those left and panics.
    #[track_caller]
    pub fn assert_nothing_left(&self) {
        let Link::Serve { state_dir, .. } = self else {
            return;
        };
        let gone = poll(LEFTOVER_TIMEOUT, || serves_for(state_dir).is_empty().then_some(()));
        if gone.is_none() {
            let left = serves_for(state_dir);
            let described: Vec<String> = left.iter().map(|p| format!("{p}: {}", cmdline(*p))).collect();
            for pid in &left {
                signal(*pid, libc::SIGKILL);
            }
            panic!("the host left mcpx serve behind: {}", described.join("; "));
        }
    }

    /// What went over the link, for failure messages.
    pub fn transcript(&self) -> String {
        match self {
            Link::Serve { tap, .. } => tap.transcript(),
            Link::Http { tap } => tap.transcript(),
        }
    }
}

/// A revision the schema directory has (an unknown one is checked as 2025-11-25).
fn known(revision: &str) -> &'static str {
    schema::REVISIONS.iter().find(|r| **r == revision).copied().unwrap_or("2025-11-25")
}

/// A JSON-RPC body as its messages (a batch is several).
fn batch(body: Value) -> Vec<Value> {
    match body {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        one => vec![one],
    }
}

/// The server entry a host is configured with (named `mcpx` unless the test names it).
enum Entry {
    /// A command line and one environment variable.
    Stdio {
        command: String,
        args: Vec<String>,
        env: (String, String),
    },
    Http {
        url: String,
    },
}

/// A fresh home for one host: `$HOME`, its config, a working directory.
pub struct HostHome {
    host: Host,
    dir: TempDir,
    /// The name of the one MCP server in the host's config.
    server: String,
    /// Environment the host runs with (on top of a cleared one).
    env: Vec<(String, OsString)>,
}

/// What one host run printed.
#[derive(Debug)]
pub struct HostRun {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl HostRun {
    /// Panics with the output unless the host exited 0.
    #[track_caller]
    pub fn assert_success(&self, what: &str) -> &HostRun {
        assert!(self.status.success(), "{what} failed: {self}");
        self
    }
}

impl std::fmt::Display for HostRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit {} after {:?}\nstdout:\n{}\nstderr:\n{}", self.status, self.took, self.stdout, self.stderr)
    }
}

impl HostHome {
    /// A home for `host` whose one MCP server, `mcpx`, is reached over `link`, and whose
    /// model endpoint is `model`.
    #[track_caller]
    pub fn new(host: Host, link: &Link, model: &StandinModel) -> HostHome {
        let dir = TempDir::new();
        std::fs::create_dir_all(dir.path().join("work")).expect("create the host's working directory");
        let mut home = HostHome { host, dir, server: "mcpx".to_owned(), env: Vec::new() };
        home.configure(&link.entry(), &model.base_url());
        home
    }

    /// A home for `host` whose one MCP server, `name`, is a stdio server of its own (not
    /// mcpx): `command args` with `env` set, as a user's host would have before moving in.
    #[track_caller]
    pub fn with_stdio_server(
        host: Host,
        name: &str,
        command: &str,
        args: &[String],
        env: (&str, &str),
        model: &StandinModel,
    ) -> HostHome {
        let dir = TempDir::new();
        std::fs::create_dir_all(dir.path().join("work")).expect("create the host's working directory");
        let mut home = HostHome { host, dir, server: name.to_owned(), env: Vec::new() };
        let entry = Entry::Stdio {
            command: command.to_owned(),
            args: args.to_vec(),
            env: (env.0.to_owned(), env.1.to_owned()),
        };
        home.configure(&entry, &model.base_url());
        home
    }

    /// The host's config file holding its MCP servers.
    pub fn config_file(&self) -> PathBuf {
        self.path().join(match self.host {
            Host::ClaudeCode => ".claude.json",
            Host::GeminiCli => ".gemini/settings.json",
            Host::QwenCode => ".qwen/settings.json",
            Host::Codex => ".codex/config.toml",
            Host::Opencode => ".config/opencode/opencode.json",
        })
    }

    /// Runs `target/debug/mcpx args` as this host's user (its `$HOME` and the host's own
    /// environment), reaching `daemon`.
    #[track_caller]
    pub fn mcpx(&self, args: &[&str], daemon: &crate::Daemon) -> std::process::Output {
        Command::new(paths::mcpx())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.path())
            .env("MCPX_STATE_DIR", daemon.state_dir())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.path().join("work"))
            .stdin(Stdio::null())
            .output()
            .expect("run mcpx")
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path().join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("create a config directory");
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }

    fn set(&mut self, name: &str, value: impl Into<OsString>) {
        self.env.push((name.to_owned(), value.into()));
    }

    /// Writes the host's config files and sets its environment.
    fn configure(&mut self, entry: &Entry, model: &str) {
        let home = self.path().to_owned();
        let key = "sk-standin-not-a-real-key";
        match self.host {
            Host::ClaudeCode => {
                // User-scope servers live in ~/.claude.json.
                let server = match entry {
                    Entry::Stdio { command, args, env: (key, value) } => json!({
                        "type": "stdio", "command": command, "args": args,
                        "env": {key: value},
                    }),
                    Entry::Http { url } => json!({"type": "http", "url": url}),
                };
                self.write(".claude.json", &json!({"mcpServers": {&self.server: server}}).to_string());
                self.set("ANTHROPIC_BASE_URL", model);
                self.set("ANTHROPIC_API_KEY", key);
                self.set("DISABLE_TELEMETRY", "1");
                self.set("DISABLE_ERROR_REPORTING", "1");
                self.set("DISABLE_AUTOUPDATER", "1");
                self.set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
                // MCP tools otherwise hide behind a ToolSearch step a stand-in cannot take.
                self.set("ENABLE_TOOL_SEARCH", "false");
            }
            Host::GeminiCli | Host::QwenCode => {
                let mut server = match entry {
                    Entry::Stdio { command, args, env: (key, value) } => json!({
                        "command": command, "args": args, "env": {key: value},
                    }),
                    Entry::Http { url } => json!({"httpUrl": url}),
                };
                let mut settings = json!({
                    "mcpServers": {},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false},
                    "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                });
                if self.host == Host::GeminiCli {
                    server["trust"] = json!(true);
                    settings["security"] = json!({"auth": {"selectedType": "gemini-api-key"}});
                    self.set("GEMINI_CLI_TRUST_WORKSPACE", "true");
                    self.set("GOOGLE_GEMINI_BASE_URL", model);
                    self.set("GEMINI_API_KEY", key);
                } else {
                    // MCP tools otherwise hide behind tool_search (as with Claude Code).
                    settings["tools"] = json!({"toolSearch": {"enabled": false}});
                    self.set("OPENAI_BASE_URL", format!("{model}/v1"));
                    self.set("OPENAI_API_KEY", key);
                    self.set("OPENAI_MODEL", "standin");
                    self.set("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1");
                }
                settings["mcpServers"][&self.server] = server;
                let file = if self.host == Host::GeminiCli { ".gemini/settings.json" } else { ".qwen/settings.json" };
                self.write(file, &settings.to_string());
            }
            Host::Codex => {
                let server = match entry {
                    Entry::Stdio { command, args, env: (key, value) } => format!(
                        "command = {}\nargs = {}\nenv = {{ {key} = {} }}\n",
                        toml_string(command),
                        format_args!("[{}]", args.iter().map(|a| toml_string(a)).collect::<Vec<_>>().join(", ")),
                        toml_string(value)
                    ),
                    Entry::Http { url } => format!("url = {}\n", toml_string(url)),
                };
                let config = format!(
                    "model = \"standin\"\nmodel_provider = \"standin\"\napproval_policy = \"never\"\n\
                     sandbox_mode = \"danger-full-access\"\ncheck_for_update_on_startup = false\n\n\
                     [analytics]\nenabled = false\n\n[features]\nplugins = false\n\n\
                     [model_providers.standin]\nname = \"Stand-in\"\nbase_url = {}\nwire_api = \"responses\"\n\
                     env_key = \"STANDIN_API_KEY\"\n\n[mcp_servers.{}]\n{server}",
                    toml_string(&format!("{model}/v1")),
                    self.server
                );
                self.write(".codex/config.toml", &config);
                self.set("CODEX_HOME", home.join(".codex"));
                self.set("STANDIN_API_KEY", key);
            }
            Host::Opencode => {
                let server = match entry {
                    Entry::Stdio { command, args, env: (key, value) } => {
                        let mut argv = vec![command.clone()];
                        argv.extend(args.iter().cloned());
                        json!({"type": "local", "command": argv, "environment": {key: value}})
                    }
                    Entry::Http { url } => json!({"type": "remote", "url": url}),
                };
                let config = json!({
                    "mcp": {&self.server: server},
                    "provider": {"standin": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Stand-in",
                        "options": {"baseURL": format!("{model}/v1"), "apiKey": key},
                        "models": {"standin": {"name": "standin"}},
                    }},
                    "model": "standin/standin",
                    "permission": {"*": "allow"},
                    "autoupdate": false,
                    "share": "disabled",
                });
                self.write(".config/opencode/opencode.json", &config.to_string());
                self.set("XDG_CONFIG_HOME", home.join(".config"));
                self.set("XDG_DATA_HOME", home.join(".local/share"));
                self.set("XDG_STATE_HOME", home.join(".local/state"));
                self.set("XDG_CACHE_HOME", home.join(".cache"));
                self.set("OPENCODE_DISABLE_AUTOUPDATE", "1");
                self.set("OPENCODE_DISABLE_MODELS_FETCH", "1");
                self.set("OPENCODE_DISABLE_LSP_DOWNLOAD", "1");
                self.set("OPENCODE_DISABLE_SHARE", "1");
                // Its default plugins come from npm at start-up, and it installs its plugin
                // SDK into each config directory in the background: keep npm off the network
                // (the install fails quietly; nothing here needs it).
                self.set("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1");
                self.write(".npmrc", "offline=true\nregistry=http://127.0.0.1:9/\n");
                self.set("npm_config_offline", "true");
                self.set("npm_config_registry", "http://127.0.0.1:9/");
            }
        }
    }

    /// The host's own way to list its MCP servers and whether each connected, where it
    /// has one that connects (`codex mcp list` only prints its config: `None`).
    pub fn mcp_list_args(&self) -> Option<&'static [&'static str]> {
        match self.host {
            Host::Codex => None,
            _ => Some(&["mcp", "list"]),
        }
    }

    /// `<host> mcp list`; panics unless it exited 0 showing `mcpx` connected.
    #[track_caller]
    pub fn assert_lists_mcpx_connected(&self) -> HostRun {
        let args = self.mcp_list_args().expect("this host has no connecting `mcp list`");
        let run = self.run(args);
        run.assert_success("mcp list");
        let text = strip_ansi(&format!("{}\n{}", run.stdout, run.stderr));
        let line =
            text.lines().find(|l| l.contains("mcpx")).unwrap_or_else(|| panic!("mcp list does not name mcpx: {run}"));
        // opencode prints the status on the server's line; the others too.
        assert!(
            line.to_lowercase().contains("connected") && !line.to_lowercase().contains("disconnected"),
            "mcp list does not show mcpx connected ({line:?}): {run}"
        );
        run
    }

    /// A non-interactive prompt, tool approvals bypassed: the model decides what happens.
    #[track_caller]
    pub fn prompt(&self, prompt: &str) -> HostRun {
        let args: Vec<&str> = match self.host {
            // Root may not skip every permission; allowing the one tool is enough.
            Host::ClaudeCode => vec!["-p", prompt, "--allowedTools", "mcp__mcpx__mcpx_call"],
            // A fixed model: `auto` would first ask a classifier model for a route.
            Host::GeminiCli => vec!["-m", "gemini-2.5-flash", "--yolo", "-p", prompt],
            Host::QwenCode => vec!["--yolo", "--auth-type", "openai", "-p", prompt],
            Host::Codex => vec!["exec", "--skip-git-repo-check", prompt],
            Host::Opencode => vec!["run", prompt],
        };
        self.run(&args)
    }

    /// Runs the host CLI with `args` in its home: a cleared environment, stdin closed, a
    /// process group of its own; killed after [`HOST_TIMEOUT`]. Panics if anything it
    /// started outlives it by [`LEFTOVER_TIMEOUT`] (and kills those).
    #[track_caller]
    pub fn run(&self, args: &[&str]) -> HostRun {
        let executable = self.host.executable();
        let node_bin = node::node().parent().expect("node's directory").to_owned();
        let mut path = OsString::from(node_bin);
        path.push(":/usr/local/bin:/usr/bin:/bin");
        let mut command = Command::new(&executable);
        command
            .args(args)
            .env_clear()
            .env("PATH", path)
            .env("HOME", self.path())
            .env("TMPDIR", std::env::temp_dir())
            .env("LANG", "C.UTF-8")
            .env("NO_COLOR", "1")
            .env("TERM", "dumb")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(self.path().join("work"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let started = Instant::now();
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", executable.display()));
        let group = child.id();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if done_rx.recv_timeout(HOST_TIMEOUT).is_err() {
                signal_group(group, libc::SIGKILL);
            }
        });
        let output = child.wait_with_output();
        let _ = done_tx.send(());
        let _ = watchdog.join();
        let output = output.unwrap_or_else(|e| panic!("{:?}: {e}", self.host));
        let run = HostRun {
            status: output.status,
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            took: started.elapsed(),
        };
        assert!(run.took < HOST_TIMEOUT, "{:?} {args:?} did not finish within {HOST_TIMEOUT:?}: {run}", self.host);
        let left = poll(LEFTOVER_TIMEOUT, || group_members(group).is_empty().then_some(()));
        if left.is_none() {
            let members = group_members(group);
            signal_group(group, libc::SIGKILL);
            panic!(
                "{:?} {args:?} left processes behind: {members:?} ({})\n{run}",
                self.host,
                members.iter().map(|p| cmdline(*p)).collect::<Vec<_>>().join("; ")
            );
        }
        run
    }
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).expect("a string serialises")
}

/// Text without ANSI escape sequences (colours, cursor moves).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

fn signal_group(group: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on a process group this test created; no memory effects.
    unsafe {
        libc::kill(-(group as libc::pid_t), sig);
    }
}

/// Live processes of process group `group`.
fn group_members(group: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let pid: u32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // Fields after the parenthesised name: state, ppid, pgrp.
            let rest = stat.rsplit_once(')')?.1;
            let pgrp: u32 = rest.split_whitespace().nth(2)?.parse().ok()?;
            (pgrp == group && alive(pid)).then_some(pid)
        })
        .collect()
}

/// Live `mcpx serve` processes, and stdio taps, whose environment names `state_dir`.
fn serves_for(state_dir: &Path) -> Vec<u32> {
    let mut wanted = b"MCPX_STATE_DIR=".to_vec();
    wanted.extend_from_slice(state_dir.as_os_str().as_encoded_bytes());
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let argv = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = argv.split(|b| *b == 0).collect();
            let serve = args.first().is_some_and(|a| a.ends_with(b"mcpx")) && args.get(1) == Some(&&b"serve"[..]);
            let tap = args.iter().any(|a| a.ends_with(b"stdio_tap.js"));
            if !(serve || tap) || !alive(pid) {
                return None;
            }
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            environ.split(|b| *b == 0).any(|v| v == wanted.as_slice()).then_some(pid)
        })
        .collect()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// `tests/python/standin_model.py`: a model endpoint that asks for one call of the tool
/// whose name ends with `mcpx_call`, then answers `DONE: <the tool's result>`. Killed on drop.
pub struct StandinModel {
    child: Child,
    port: u16,
    dir: TempDir,
}

impl StandinModel {
    /// Starts the stand-in, which will call `mcpx_call` with `arguments`.
    #[track_caller]
    pub fn start(arguments: &Value) -> StandinModel {
        let dir = TempDir::new();
        let script = paths::repo_root().join("tests/python/standin_model.py");
        let mut child = Command::new(crate::python::venv_bin("python"))
            .arg(&script)
            .arg("--log")
            .arg(dir.path().join("requests.jsonl"))
            .args(["--suffix", "mcpx_call", "--arguments"])
            .arg(arguments.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", script.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(15)).unwrap_or_default();
        let port = line.trim().strip_prefix("PORT ").and_then(|p| p.parse().ok());
        let Some(port) = port else {
            signal(child.id(), libc::SIGKILL);
            let _ = child.wait();
            panic!("the stand-in model did not start (it printed {line:?})");
        };
        StandinModel { child, port, dir }
    }

    /// The API base URL (no path): hosts append `/v1/...` or `/v1beta/...` themselves.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// One entry per model request so far: `{api, path, tool, tool_result, answer, tools}`.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("requests.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The requests as text, for failure messages (offered tool lists left out).
    pub fn transcript(&self) -> String {
        self.requests()
            .into_iter()
            .map(|mut r| {
                r.as_object_mut().map(|o| o.remove("tools"));
                r.to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for StandinModel {
    fn drop(&mut self) {
        signal(self.child.id(), libc::SIGKILL);
        let _ = self.child.wait();
    }
}

/// The `echo` result fakemcp gives for `{"v": token}`, as its text content: compact JSON,
/// which the stand-in never writes itself (Python's `json.dumps` puts spaces after `:`).
pub fn echoed(token: &str) -> String {
    serde_json::to_string(&json!({"v": token})).expect("JSON")
}

/// A full round trip: the model asked for `mcpx_call`, the next model request carried
/// the result fakemcp's `echo` gave (so the host relayed it), and the host printed the
/// model's final answer holding it.
#[track_caller]
pub fn assert_round_trip(run: &HostRun, model: &StandinModel, link: &Link, token: &str) {
    let context = || format!("{run}\nmodel requests:\n{}\nmcpx link:\n{}", model.transcript(), link.transcript());
    assert!(run.status.success(), "the host failed: {}", context());
    let requests = model.requests();
    let asked = requests.iter().position(|r| r["answer"] == "call");
    let asked = asked.unwrap_or_else(|| panic!("the host never offered mcpx_call to the model: {}", context()));
    let expected = echoed(token);
    let result = requests[asked..].iter().find_map(|r| r["tool_result"].as_str().filter(|t| t.contains(&expected)));
    assert!(result.is_some(), "no model request carried the echoed {expected}: {}", context());
    assert!(
        run.stdout.contains(FINAL_PREFIX) && run.stdout.contains(&expected),
        "the host's output lacks the model's final answer with {expected}: {}",
        context()
    );
}

/// Which way a host reaches mcpx.
#[derive(Clone, Copy, Debug)]
pub enum Transport {
    /// The host launches `mcpx serve`.
    Serve,
    /// The host posts to the daemon's `/mcp`.
    Http,
}

impl Transport {
    fn link(self, daemon: &crate::Daemon) -> Link {
        match self {
            Transport::Serve => Link::serve(daemon),
            Transport::Http => Link::http(daemon),
        }
    }
}

/// `<host> mcp list` with mcpx (fronting fakemcp) as its one server over `transport`:
/// panics unless the host shows it connected. Returns what went over the link.
#[track_caller]
pub fn assert_host_lists_mcpx(host: Host, transport: Transport) -> Link {
    let daemon = crate::Daemon::start(&node::echo_gateway_config());
    let link = transport.link(&daemon);
    let model = StandinModel::start(&json!({}));
    let home = HostHome::new(host, &link, &model);
    home.assert_lists_mcpx_connected();
    link.assert_nothing_left();
    // Some hosts only open a session (and ping) to tell it is up; each spoke first.
    assert!(!link.methods().is_empty(), "{host:?} said nothing to mcpx:\n{}", link.transcript());
    link.assert_frames_valid();
    link
}

/// The host, prompted, runs a turn with the stand-in model, which asks for `mcpx_call`
/// of fakemcp's `echo` with a token: the call goes through mcpx (over `transport`) to
/// fakemcp, and its result back to the model and into the host's final output. fakemcp
/// (global) then counts exactly that call before the test's own `whoami`. Returns what
/// went over the link.
#[track_caller]
pub fn assert_host_calls_through_mcpx(host: Host, transport: Transport) -> Link {
    let daemon = crate::Daemon::start(&node::echo_gateway_config());
    let link = transport.link(&daemon);
    let token = node::unique(&format!("{host:?}-{transport:?}").to_lowercase());
    let model = StandinModel::start(&node::echo_call("fake", &token));
    let home = HostHome::new(host, &link, &model);
    let run = home.prompt("Call the mcpx_call tool once, then report its result.");
    link.assert_nothing_left();
    assert_round_trip(&run, &model, &link, &token);
    let whoami = crate::Whoami::of(&crate::Modern::mcpx_call("fake", "whoami", json!({})).send(daemon.url()));
    assert_eq!(
        whoami.calls,
        2,
        "fakemcp did not see exactly the host's one call before this whoami:\n{}",
        link.transcript()
    );
    let calls = link.methods().iter().filter(|m| *m == "tools/call").count();
    assert_eq!(calls, 1, "{host:?} sent mcpx {calls} tools/call:\n{}", link.transcript());
    link.assert_frames_valid();
    link
}
