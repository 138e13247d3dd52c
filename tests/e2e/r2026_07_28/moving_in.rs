//! Moving in: `mcpx import` reads each agent host's MCP server list in the host's own
//! documented format, `mcpx install <host>` points the host at mcpx and `mcpx uninstall`
//! puts its list back byte for byte.
//!
//! The real hosts that can check their MCP servers without an account (Claude Code,
//! Gemini CLI, Qwen Code, opencode: `mcp list` connects to each) show mcpx connected after
//! `mcpx install`; Codex's `mcp list` only prints its config, which must name `mcpx serve`.
//! The others (Claude Desktop, Cursor, VS Code) are checked against their documented
//! formats: files written here as each documents them, round-tripping through import,
//! install and uninstall.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use mcpx_e2e::hosts::{Host, HostHome, StandinModel};
use mcpx_e2e::process::TempDir;
use mcpx_e2e::{Daemon, node, paths};
use serde_json::{Value, json};

fn text(output: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A host, its servers: one of its own (a fakemcp named `echo2`), moved into the
/// daemon's config by `mcpx install`; then `<host> mcp list` shows mcpx connected, and
/// `mcpx uninstall` gives back the file it had, byte for byte.
#[track_caller]
fn install_then_uninstall(host: Host, name: &str) -> (HostHome, Daemon) {
    let daemon = Daemon::start(&node::echo_gateway_config());
    let model = StandinModel::start(&json!({}));
    let fakemcp = paths::fakemcp().to_str().expect("a UTF-8 path").to_owned();
    let args = vec!["--tag".to_owned(), mcpx_e2e::tag()];
    let home = HostHome::with_stdio_server(host, "echo2", &fakemcp, &args, ("ECHO_NOTE", "kept"), &model);
    let before = std::fs::read(home.config_file()).expect("the host's config");
    let config = daemon.config_path().to_str().expect("a UTF-8 path").to_owned();

    let install = home.mcpx(&["install", name, "--config", &config], &daemon);
    assert!(install.status.success(), "mcpx install {name}: {}", text(&install));
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&config).expect("the daemon's config")).unwrap();
    let imported = &merged["mcpServers"]["echo2"];
    assert_eq!(imported["command"], json!(fakemcp), "echo2 was not imported: {merged:#}");
    assert_eq!(imported["args"], json!(args), "{merged:#}");
    assert_eq!(imported["env"], json!({"ECHO_NOTE": "kept"}), "the env was not kept: {merged:#}");
    assert!(merged["mcpServers"]["fake"].is_object(), "the daemon's own server is gone: {merged:#}");
    let installed = std::fs::read_to_string(home.config_file()).expect("the host's config");
    assert!(!installed.contains("echo2"), "the host still lists echo2:\n{installed}");
    assert!(installed.contains("serve"), "the host has no mcpx serve entry:\n{installed}");

    if home.mcp_list_args().is_some() {
        home.assert_lists_mcpx_connected();
    } else {
        let run = home.run(&["mcp", "list"]);
        run.assert_success("mcp list");
        let line = run.stdout.lines().find(|l| l.contains("mcpx")).unwrap_or_else(|| panic!("no mcpx: {run}"));
        assert!(line.contains(&*paths::mcpx().to_string_lossy()) && line.contains("serve"), "{run}");
        assert!(!run.stdout.contains("echo2"), "{run}");
    }

    // Some hosts rewrite their own file (Claude Code adds its state, Gemini CLI and Qwen
    // Code reformat it): then only the server list must come back as it was.
    let touched = std::fs::read_to_string(home.config_file()).expect("the host's config") != installed;
    let uninstall = home.mcpx(&["uninstall", name], &daemon);
    assert!(uninstall.status.success(), "mcpx uninstall {name}: {}", text(&uninstall));
    let after = std::fs::read(home.config_file()).expect("the host's config");
    let (before, after) = (String::from_utf8_lossy(&before), String::from_utf8_lossy(&after));
    if touched && host != Host::Codex {
        let key = if host == Host::Opencode { "mcp" } else { "mcpServers" };
        let original = &jsonc(&before)[key];
        assert_eq!(&jsonc(&after)[key], original, "uninstall did not restore the servers:\n{before}\n---\n{after}");
        let listed = serde_json::to_string(original).unwrap();
        assert!(after.contains(&listed), "the server list is not the original text:\n{before}\n---\n{after}");
    } else {
        assert!(after == before, "uninstall did not restore the file:\n{before}\n---\n{after}");
    }
    (home, daemon)
}

#[test]
fn claude_code_mcp_list_shows_mcpx_connected_after_install() {
    install_then_uninstall(Host::ClaudeCode, "claude");
}

#[test]
fn gemini_cli_mcp_list_shows_mcpx_connected_after_install() {
    install_then_uninstall(Host::GeminiCli, "gemini");
}

#[test]
fn qwen_code_mcp_list_shows_mcpx_connected_after_install() {
    install_then_uninstall(Host::QwenCode, "qwen");
}

#[test]
fn opencode_mcp_list_shows_mcpx_connected_after_install() {
    install_then_uninstall(Host::Opencode, "opencode");
}

#[test]
fn codex_mcp_list_names_mcpx_serve_after_install() {
    install_then_uninstall(Host::Codex, "codex");
}

/// A machine's home with nothing but the files a test writes; mcpx runs as its user.
struct Machine {
    dir: TempDir,
}

impl Machine {
    fn new() -> Machine {
        let machine = Machine { dir: TempDir::new() };
        std::fs::create_dir_all(machine.home().join("project")).unwrap();
        machine
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.home().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn mcpx_config(&self) -> PathBuf {
        self.home().join(".config/mcpx/config.json")
    }

    fn config(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.mcpx_config()).expect("mcpx's config")).expect("JSON")
    }

    fn run(&self, args: &[&str], cwd: &Path) -> Output {
        Command::new(paths::mcpx())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", self.home())
            .env("MCPX_STATE_DIR", self.dir.path().join("state"))
            .current_dir(cwd)
            .stdin(Stdio::null())
            .output()
            .expect("run mcpx")
    }

    #[track_caller]
    fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args, &self.home().join("project"));
        assert!(output.status.success(), "mcpx {args:?}: {}", text(&output));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `mcpx install`, then `mcpx uninstall`: the host's file holds one mcpx serve entry
    /// under `key` in between, and comes back byte for byte.
    #[track_caller]
    fn round_trip(&self, host: &str, file: &Path, key: &str, extra: &[&str]) -> String {
        self.round_trip_installing(host, file, key, extra, extra)
    }

    /// As [`Machine::round_trip`], with `install_extra` for install only.
    #[track_caller]
    fn round_trip_installing(
        &self,
        host: &str,
        file: &Path,
        key: &str,
        install_extra: &[&str],
        extra: &[&str],
    ) -> String {
        let before = std::fs::read(file).unwrap();
        let mut args = vec!["install", host];
        args.extend(install_extra);
        self.ok(&args);
        let installed = std::fs::read_to_string(file).unwrap();
        let parsed = jsonc(&installed);
        let servers = parsed[key].as_object().unwrap_or_else(|| panic!("no {key}:\n{installed}"));
        assert_eq!(servers.keys().collect::<Vec<_>>(), ["mcpx"], "{installed}");
        let backups: Vec<_> = std::fs::read_dir(file.parent().unwrap())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".mcpx-backup-"))
            .collect();
        assert!(!backups.is_empty(), "install kept no backup of {}", file.display());
        assert_eq!(std::fs::read(backups[0].path()).unwrap(), before, "the backup is not the old file");
        let mut args = vec!["uninstall", host];
        args.extend(extra);
        self.ok(&args);
        assert_eq!(String::from_utf8_lossy(&std::fs::read(file).unwrap()), String::from_utf8_lossy(&before));
        installed
    }
}

/// JSON with comments and trailing commas, as VS Code and opencode allow: strips them
/// the simple way these test files allow (no `//` inside strings but URLs', no `/*`).
fn jsonc(text: &str) -> Value {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect();
    let joined = lines.join("\n").replace(",\n}", "\n}").replace(",\n  }", "\n  }");
    serde_json::from_str(&joined).unwrap_or_else(|e| panic!("{e}:\n{joined}"))
}

#[test]
fn claude_desktop_cursor_and_vscode_files_round_trip_through_import_and_install() {
    let machine = Machine::new();
    let desktop = machine.write(
        ".config/Claude/claude_desktop_config.json",
        r#"{
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Desktop"]
    }
  },
  "globalShortcut": "Ctrl+Space"
}
"#,
    );
    let cursor = machine.write(
        ".cursor/mcp.json",
        r#"{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": { "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example" }
    },
    "linear": {
      "url": "https://mcp.linear.app/mcp",
      "headers": { "Authorization": "Bearer lin_example" }
    }
  }
}
"#,
    );
    let vscode = machine.write(
        ".config/Code/User/mcp.json",
        r#"{
  // Inputs are asked for once and kept by VS Code.
  "inputs": [
    { "type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key", "password": true }
  ],
  "servers": {
    "perplexity": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "server-perplexity-ask"],
      "env": { "PERPLEXITY_API_KEY": "${input:perplexity-key}" }
    },
    "fetch": { "type": "http", "url": "https://api.example.com/mcp" },
  }
}
"#,
    );
    let out = machine.ok(&["import", "claude-desktop", "cursor", "vscode"]);
    let config = machine.config();
    let servers = &config["mcpServers"];
    assert_eq!(
        servers["filesystem"],
        json!({"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Desktop"]}),
        "{out}"
    );
    assert_eq!(servers["github"]["env"], json!({"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_example"}));
    assert_eq!(
        servers["linear"],
        json!({"url": "https://mcp.linear.app/mcp", "headers": {"Authorization": "Bearer lin_example"}})
    );
    assert_eq!(servers["perplexity"]["env"], json!({"PERPLEXITY_API_KEY": "${input:perplexity-key}"}));
    assert_eq!(servers["fetch"], json!({"url": "https://api.example.com/mcp"}));

    machine.round_trip("claude-desktop", &desktop, "mcpServers", &[]);
    machine.round_trip("cursor", &cursor, "mcpServers", &[]);
    let installed = machine.round_trip("vscode", &vscode, "servers", &[]);
    assert!(installed.contains("\"inputs\""), "the inputs went:\n{installed}");
    assert!(installed.contains("// Inputs are asked"), "the comment went:\n{installed}");
}

#[test]
fn gemini_qwen_codex_and_opencode_remote_servers_import_as_url_servers() {
    let machine = Machine::new();
    machine.write(
        ".gemini/settings.json",
        r#"{"theme": "Default", "mcpServers": {"gh": {"httpUrl": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer g"}, "timeout": 5000}}}"#,
    );
    machine.write(
        ".qwen/settings.json",
        r#"{"mcpServers": {"py": {"command": "python", "args": ["-m", "srv"], "cwd": "/srv", "env": {"K": "v"}}}}"#,
    );
    let codex = machine.write(
        ".codex/config.toml",
        "# mine\nmodel = \"o3\"\n\n[mcp_servers.docs]\nurl = \"https://docs.example/mcp\"\nhttp_headers = { \"X-Key\" = \"d\" }\n\n[mcp_servers.local]\ncommand = \"docs-mcp\"\nargs = [\"--stdio\"]   # comment kept\nenv = { TOKEN = \"t\" }\n\n[tui]\nnotifications = true\n",
    );
    let opencode = machine.write(
        ".config/opencode/opencode.jsonc",
        "{\n  // mine\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \"mcp\": {\n    \"ctx\": {\"type\": \"remote\", \"url\": \"https://ctx.example/mcp\", \"headers\": {\"A\": \"b\"}},\n    \"fs\": {\"type\": \"local\", \"command\": [\"npx\", \"fs-mcp\", \"/tmp\"], \"environment\": {\"E\": \"f\"}}\n  }\n}\n",
    );
    machine.ok(&["import"]);
    let servers = machine.config()["mcpServers"].clone();
    assert_eq!(
        servers["gh"],
        json!({"url": "https://api.githubcopilot.com/mcp/", "headers": {"Authorization": "Bearer g"}})
    );
    assert_eq!(servers["py"], json!({"command": "python", "args": ["-m", "srv"], "env": {"K": "v"}, "cwd": "/srv"}));
    assert_eq!(servers["docs"], json!({"url": "https://docs.example/mcp", "headers": {"X-Key": "d"}}));
    assert_eq!(servers["local"], json!({"command": "docs-mcp", "args": ["--stdio"], "env": {"TOKEN": "t"}}));
    assert_eq!(servers["ctx"], json!({"url": "https://ctx.example/mcp", "headers": {"A": "b"}}));
    assert_eq!(servers["fs"], json!({"command": "npx", "args": ["fs-mcp", "/tmp"], "env": {"E": "f"}}));

    let before = std::fs::read_to_string(&codex).unwrap();
    machine.ok(&["install", "codex", "--session-key", "team"]);
    let installed = std::fs::read_to_string(&codex).unwrap();
    assert!(installed.starts_with("# mine\nmodel = \"o3\"\n"), "{installed}");
    assert!(installed.contains("[tui]\nnotifications = true\n"), "{installed}");
    assert!(installed.contains("\"--session\", \"team\""), "{installed}");
    assert!(!installed.contains("docs-mcp"), "{installed}");
    machine.ok(&["uninstall", "codex"]);
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), before);
    machine.round_trip("opencode", &opencode, "mcp", &[]);
}

#[test]
fn claude_codes_servers_for_this_project_in_the_user_file_are_imported_from_that_project_only() {
    let machine = Machine::new();
    let project = machine.home().join("project");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::create_dir_all(project.join("src/deep")).unwrap();
    let other = machine.home().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let user = json!({
        "mcpServers": {"everywhere": {"type": "stdio", "command": "user-mcp", "args": [], "env": {}}},
        "projects": {
            project.to_str().unwrap(): {
                "allowedTools": [],
                "mcpServers": {
                    "local": {"type": "stdio", "command": "local-mcp", "args": ["--x"], "env": {"K": "V"}},
                    "docs": {"type": "http", "url": "https://docs.example/mcp", "headers": {"X-Key": "k"}},
                },
            },
            other.to_str().unwrap(): {"mcpServers": {"elsewhere": {"type": "stdio", "command": "other-mcp"}}},
        },
    });
    machine.write(".claude.json", &serde_json::to_string_pretty(&user).unwrap());

    // From a directory deep in the project's git worktree: the project's and the user's.
    let output = machine.run(&["import", "claude"], &project.join("src/deep"));
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("added local from claude") && stdout.contains("projects["), "{}", text(&output));
    let servers = machine.config()["mcpServers"].clone();
    assert_eq!(servers["everywhere"], json!({"command": "user-mcp"}));
    assert_eq!(servers["local"], json!({"command": "local-mcp", "args": ["--x"], "env": {"K": "V"}}));
    assert_eq!(servers["docs"], json!({"url": "https://docs.example/mcp", "headers": {"X-Key": "k"}}));
    assert!(servers.get("elsewhere").is_none(), "another project's server was imported: {servers:#}");

    // From the other project: its own server joins; none of the first project's is lost.
    let output = machine.run(&["import", "claude"], &other);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(machine.config()["mcpServers"]["elsewhere"], json!({"command": "other-mcp"}));
}

/// The real Claude Code's `mcp add --scope local` writes where import reads.
#[test]
fn a_server_claude_code_added_for_the_project_is_imported() {
    let daemon = Daemon::start(&node::echo_gateway_config());
    let model = StandinModel::start(&json!({}));
    let fakemcp = paths::fakemcp().to_str().expect("a UTF-8 path").to_owned();
    let args = vec!["--tag".to_owned(), mcpx_e2e::tag()];
    let home = HostHome::with_stdio_server(Host::ClaudeCode, "echo2", &fakemcp, &args, ("ECHO_NOTE", "kept"), &model);
    let mut add = vec!["mcp", "add", "--scope", "local", "proj-echo", "-e", "NOTE=local", "--", &fakemcp];
    add.extend(args.iter().map(String::as_str));
    home.run(&add).assert_success("claude mcp add --scope local");

    let config = daemon.config_path().to_str().expect("a UTF-8 path").to_owned();
    let import = home.mcpx(&["import", "claude", "--config", &config], &daemon);
    assert!(import.status.success(), "mcpx import claude: {}", text(&import));
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(
        merged["mcpServers"]["proj-echo"],
        json!({"command": fakemcp, "args": args, "env": {"NOTE": "local"}}),
        "the project's server was not imported: {merged:#}"
    );
    assert!(merged["mcpServers"]["echo2"].is_object(), "the user's server was not imported: {merged:#}");
}

/// Every host that takes remote servers gets mcpx's URL in its own format, with the
/// bearer `http.tokens` requires, and uninstall gives its file back byte for byte.
#[test]
fn install_http_writes_the_url_and_bearer_in_each_hosts_format_and_round_trips() {
    const TOKEN: &str = "http-install-0123456789abcdef";
    let machine = Machine::new();
    machine.write(".config/mcpx/config.json", &json!({"http": {"port": 7751, "tokens": {"ci": TOKEN}}}).to_string());
    let url = "http://127.0.0.1:7751/mcp";
    let bearer = json!({"Authorization": format!("Bearer {TOKEN}")});
    for (host, relative, key, expected) in [
        ("claude", ".claude.json", "mcpServers", json!({"type": "http", "url": url, "headers": bearer})),
        ("cursor", ".cursor/mcp.json", "mcpServers", json!({"url": url, "headers": bearer})),
        ("vscode", ".config/Code/User/mcp.json", "servers", json!({"type": "http", "url": url, "headers": bearer})),
        ("gemini", ".gemini/settings.json", "mcpServers", json!({"httpUrl": url, "headers": bearer})),
        ("qwen", ".qwen/settings.json", "mcpServers", json!({"httpUrl": url, "headers": bearer})),
        (
            "opencode",
            ".config/opencode/opencode.json",
            "mcp",
            json!({"type": "remote", "url": url, "enabled": true, "headers": bearer}),
        ),
    ] {
        let file = machine.write(relative, &format!("{{\n  \"theme\": \"dark\",\n  \"{key}\": {{}}\n}}\n"));
        let installed = machine.round_trip_installing(host, &file, key, &["--http"], &[]);
        assert_eq!(jsonc(&installed)[key]["mcpx"], expected, "{host}:\n{installed}");
    }

    // Codex: a [mcp_servers.mcpx] table with url and http_headers.
    let codex = machine.write(".codex/config.toml", "model = \"m\"\n");
    let before = std::fs::read(&codex).unwrap();
    machine.ok(&["install", "codex", "--http"]);
    let installed = std::fs::read_to_string(&codex).unwrap();
    let table = installed.split("[mcp_servers.mcpx]").nth(1).unwrap_or_else(|| panic!("no mcpx table:\n{installed}"));
    assert!(table.contains(&format!("url = \"{url}\"")), "{installed}");
    assert!(table.contains(&format!("http_headers = {{ Authorization = \"Bearer {TOKEN}\" }}")), "{installed}");
    assert!(!table.contains("command"), "{installed}");
    machine.ok(&["uninstall", "codex"]);
    assert_eq!(std::fs::read(&codex).unwrap(), before);

    // Claude Desktop's file takes stdio servers only: refused, nothing written.
    let desktop = machine.write(".config/Claude/claude_desktop_config.json", "{\"mcpServers\": {}}\n");
    let config_before = std::fs::read(machine.mcpx_config()).unwrap();
    let output = machine.run(&["install", "claude-desktop", "--http"], &machine.home());
    assert!(!output.status.success(), "{}", text(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("stdio servers only"), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(&desktop).unwrap(), "{\"mcpServers\": {}}\n");
    assert_eq!(std::fs::read(machine.mcpx_config()).unwrap(), config_before);
}

#[test]
fn install_http_with_several_tokens_needs_the_one_the_host_sends() {
    let machine = Machine::new();
    let tokens = json!({"a": "token-a-0123456789abcdef", "b": "token-b-0123456789abcdef"});
    machine.write(".config/mcpx/config.json", &json!({"http": {"port": 7751, "tokens": tokens}}).to_string());
    let claude = machine.write(".claude.json", "{}\n");
    let output = machine.run(&["install", "claude", "--http"], &machine.home().join("project"));
    assert!(!output.status.success(), "{}", text(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--token") && !stderr.contains("token-a-"), "{}", text(&output));
    assert_eq!(std::fs::read_to_string(&claude).unwrap(), "{}\n", "written without a token chosen");
    machine.ok(&["install", "claude", "--http", "--token", "b"]);
    let installed = jsonc(&std::fs::read_to_string(&claude).unwrap());
    assert_eq!(installed["mcpServers"]["mcpx"]["headers"]["Authorization"], "Bearer token-b-0123456789abcdef");
}

/// A real host, installed with `--http` against a daemon that requires a token: its
/// `mcp list` shows mcpx connected (it sent the bearer to the daemon's real URL).
#[track_caller]
fn install_http_then_list(host: Host, name: &str) {
    const TOKEN: &str = "real-host-0123456789abcdef";
    let mut config = node::echo_gateway_config();
    config["http"] = json!({"tokens": {"host": TOKEN}});
    let daemon = Daemon::start(&config);
    let model = StandinModel::start(&json!({}));
    let fakemcp = paths::fakemcp().to_str().expect("a UTF-8 path").to_owned();
    let args = vec!["--tag".to_owned(), mcpx_e2e::tag()];
    let home = HostHome::with_stdio_server(host, "echo2", &fakemcp, &args, ("ECHO_NOTE", "kept"), &model);
    let config = daemon.config_path().to_str().expect("a UTF-8 path").to_owned();
    let install = home.mcpx(&["install", name, "--http", "--config", &config], &daemon);
    assert!(install.status.success(), "mcpx install {name} --http: {}", text(&install));
    let installed = std::fs::read_to_string(home.config_file()).unwrap();
    assert!(installed.contains(daemon.url()) && !installed.contains("serve"), "{installed}");
    home.assert_lists_mcpx_connected();
}

#[test]
fn claude_code_mcp_list_shows_mcpx_connected_after_install_http() {
    install_http_then_list(Host::ClaudeCode, "claude");
}

#[test]
fn gemini_cli_mcp_list_shows_mcpx_connected_after_install_http() {
    install_http_then_list(Host::GeminiCli, "gemini");
}

#[test]
fn a_same_name_server_that_differs_is_reported_not_overwritten() {
    let machine = Machine::new();
    machine.write(
        ".config/mcpx/config.json",
        "{\"mcpServers\": {\"time\": {\"command\": \"uvx\", \"args\": [\"mcp-server-time\"]}}}\n",
    );
    let before = std::fs::read(machine.mcpx_config()).unwrap();
    let claude =
        machine.write(".claude.json", r#"{"mcpServers": {"time": {"type": "stdio", "command": "evil", "args": []}}}"#);
    let output = machine.run(&["import", "claude"], &machine.home());
    assert!(!output.status.success(), "a differing server was not reported: {}", text(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("time"), "{}", text(&output));
    assert_eq!(std::fs::read(machine.mcpx_config()).unwrap(), before, "mcpx's config changed");
    // install refuses too: the host's server would be lost behind mcpx's.
    let claude_before = std::fs::read(&claude).unwrap();
    let output = machine.run(&["install", "claude"], &machine.home());
    assert!(!output.status.success(), "{}", text(&output));
    assert_eq!(std::fs::read(&claude).unwrap(), claude_before, "the host's file changed");
}

#[test]
fn a_private_host_file_stays_private_and_so_do_its_backup_and_record() {
    use std::os::unix::fs::PermissionsExt;
    let machine = Machine::new();
    let claude = machine.write(
        ".claude.json",
        r#"{"mcpServers": {"gh": {"url": "https://x.example/mcp", "headers": {"Authorization": "Bearer secret"}}}}"#,
    );
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o600)).unwrap();
    machine.ok(&["install", "claude"]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&claude), 0o600, "install widened ~/.claude.json");
    for entry in std::fs::read_dir(machine.home()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".claude.json.") {
            assert_eq!(mode(&entry.path()), 0o600, "{name} is readable by others");
        }
    }
}

/// Every file under `dir` (recursively) whose bytes hold one of `secrets`, with its mode.
fn files_holding(dir: &Path, secrets: &[&str]) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, secrets));
        } else if let Ok(text) = std::fs::read_to_string(&path)
            && secrets.iter().any(|s| text.contains(s))
        {
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            found.push((path, mode));
        }
    }
    found
}

/// A host file that was 0644 before: after `install --http` the bearer it holds, the
/// backups, the install record and the mcpx config the host's own servers moved into are
/// owner-only; after `uninstall` nothing holding a credential is readable by others.
#[test]
fn install_http_leaves_no_credential_readable_by_others_in_any_host_file_or_backup() {
    use std::os::unix::fs::PermissionsExt;
    const BEARER: &str = "bearer-0123456789abcdef";
    const OWN: &str = "own-key-0123456789abcdef";
    let own = json!({"mcpServers": {"kept": {"command": "uvx", "args": ["x"], "env": {"API_KEY": OWN}}}}).to_string();
    let hosts = [
        ("claude", ".claude.json", own.as_str()),
        ("cursor", ".cursor/mcp.json", "{}"),
        ("vscode", ".config/Code/User/mcp.json", "{}"),
        ("gemini", ".gemini/settings.json", own.as_str()),
        ("qwen", ".qwen/settings.json", "{}"),
        ("codex", ".codex/config.toml", ""),
        ("opencode", ".config/opencode/opencode.json", "{}"),
    ];
    for (host, relative, before) in hosts {
        let machine = Machine::new();
        let mcpx = machine.write(
            ".config/mcpx/config.json",
            &json!({"http": {"port": 7751, "tokens": {"host": BEARER}}}).to_string(),
        );
        std::fs::set_permissions(&mcpx, std::fs::Permissions::from_mode(0o600)).unwrap();
        let file = machine.write(relative, before);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        machine.ok(&["install", host, "--http"]);
        assert!(std::fs::read_to_string(&file).unwrap().contains(BEARER), "{host}: no bearer in {}", file.display());
        let none_readable = |when: &str| {
            let holding = files_holding(&machine.home(), &[BEARER, OWN]);
            let readable: Vec<_> = holding.iter().filter(|(_, mode)| *mode != 0o600).collect();
            assert!(readable.is_empty(), "{host} {when}: credentials others may read: {readable:?}");
            holding
        };
        let holding = none_readable("after install --http");
        let backups = holding.iter().filter(|(p, _)| p.to_string_lossy().contains(".mcpx-backup-")).count();
        assert!(backups > 0 || !before.contains(OWN), "{host}: no backup of its own servers: {holding:?}");
        machine.ok(&["uninstall", host]);
        none_readable("after uninstall");
    }
}

/// Under a umask that lets the group write (002, common with per-user groups), the
/// folders and config `mcpx import` creates are still the user's alone, so the daemon
/// takes the config it wrote.
#[test]
fn a_config_import_creates_under_a_group_writable_umask_is_still_accepted() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let machine = Machine::new();
    machine.write(".claude.json", r#"{"mcpServers": {"t": {"command": "uvx", "args": ["x"]}}}"#);
    let mut import = Command::new(paths::mcpx());
    import.args(["import", "claude"]).env_clear().env("PATH", "/usr/bin:/bin").env("HOME", machine.home());
    import.env("MCPX_STATE_DIR", machine.dir.path().join("state")).current_dir(machine.home()).stdin(Stdio::null());
    // SAFETY: umask is async-signal-safe; it runs in the child before exec.
    unsafe {
        import.pre_exec(|| {
            libc::umask(0o002);
            Ok(())
        });
    }
    let output = import.output().expect("run mcpx import");
    assert!(output.status.success(), "{}", text(&output));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let folder = machine.mcpx_config().parent().unwrap().to_owned();
    assert_eq!((mode(&folder), mode(&machine.mcpx_config())), (0o700, 0o600), "{}", folder.display());
    let check = machine.ok(&["config", "check"]);
    assert!(check.contains("ok, 1 server(s)"), "{check}");
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let machine = Machine::new();
    let claude = machine.write(".claude.json", r#"{"mcpServers": {"t": {"command": "uvx", "args": ["x"]}}}"#);
    let out = machine.ok(&["import", "--dry-run"]);
    assert!(out.lines().any(|l| l.starts_with('+') && l.contains("\"t\"")), "no diff:\n{out}");
    assert!(!machine.mcpx_config().exists(), "--dry-run wrote the config");
    let before = std::fs::read(&claude).unwrap();
    let out = machine.ok(&["install", "claude", "--dry-run"]);
    assert!(out.lines().any(|l| l.starts_with('+') && l.contains("\"mcpx\"")), "no diff:\n{out}");
    assert!(out.lines().any(|l| l.starts_with('-') && l.contains("\"t\"")), "no diff:\n{out}");
    assert_eq!(std::fs::read(&claude).unwrap(), before);
    assert!(!machine.mcpx_config().exists());
}

#[test]
fn project_files_are_touched_only_with_project() {
    let machine = Machine::new();
    let project = machine.write("project/.mcp.json", r#"{"mcpServers": {"p": {"command": "proj-mcp"}}}"#);
    let before = std::fs::read(&project).unwrap();
    machine.ok(&["install", "claude"]);
    assert_eq!(std::fs::read(&project).unwrap(), before, "install without --project touched .mcp.json");
    // ~/.claude.json did not exist: install created it, uninstall takes it away.
    let user = machine.home().join(".claude.json");
    assert!(user.is_file(), "install did not write ~/.claude.json");
    machine.ok(&["uninstall", "claude"]);
    assert!(!user.exists(), "uninstall left the file install created");
    assert!(!machine.mcpx_config().exists(), "the project's server was imported without --project");
    machine.round_trip("claude", &project, "mcpServers", &["--project"]);
    assert_eq!(machine.config()["mcpServers"]["p"], json!({"command": "proj-mcp"}));
}

#[test]
fn completions_man_page_and_service_unit_come_from_the_cli() {
    let machine = Machine::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = machine.ok(&["completions", shell]);
        for command in ["import", "install", "uninstall", "service"] {
            assert!(script.contains(command), "{shell} completions lack {command}");
        }
    }
    let man = machine.ok(&["man"]);
    assert!(man.contains(".TH mcpx 1") && man.contains("import"), "{man}");
    let unit = machine.ok(&["service", "install", "--dry-run", "--config", "/etc/mcpx cfg.json"]);
    let exec = format!("ExecStart={} daemon --config \"/etc/mcpx cfg.json\"", paths::mcpx().display());
    assert!(unit.contains(&exec), "{unit}");
    assert!(unit.contains("WantedBy=default.target"), "{unit}");
    let unit_file = machine.home().join(".config/systemd/user/mcpx.service");
    assert!(!unit_file.exists(), "--dry-run wrote the unit");
}

/// Where no systemd user manager runs (this machine has no systemd; elsewhere, a runtime
/// dir without the manager's socket stands for a session without one), `mcpx service
/// install` and `uninstall` say why and what to do instead, and write nothing.
#[test]
fn service_install_without_a_systemd_user_manager_says_so_and_writes_nothing() {
    let machine = Machine::new();
    let runtime = machine.home().join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    let unit_file = machine.home().join(".config/systemd/user/mcpx.service");
    for command in ["install", "uninstall"] {
        let output = Command::new(paths::mcpx())
            .args(["service", command])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", machine.home())
            .env("XDG_RUNTIME_DIR", &runtime)
            .stdin(Stdio::null())
            .output()
            .expect("run mcpx");
        assert_eq!(output.status.code(), Some(1), "service {command}: {}", text(&output));
        let stderr = String::from_utf8_lossy(&output.stderr);
        let why = if Path::new("/run/systemd/system").is_dir() {
            "no systemd user manager runs for this user"
        } else {
            "systemd does not run here (no /run/systemd/system)"
        };
        assert!(stderr.contains(why), "service {command}: {}", text(&output));
        assert!(stderr.contains("nothing written") && stderr.contains("mcpx daemon"), "{}", text(&output));
        assert!(!unit_file.exists(), "service {command} wrote the unit");
    }
}

/// `scripts/install` into a fresh home, given the binary this build made (`--binary`; the
/// default path, `cargo install`, is the same but for a release build of its own): mcpx
/// in ~/.cargo/bin, completions for three shells and the man page where each looks, told
/// that the bin dir is not on the PATH; a second run changes nothing.
#[test]
fn scripts_install_puts_mcpx_its_completions_and_man_page_under_home() {
    let machine = Machine::new();
    let home = machine.home();
    let run = || {
        Command::new(paths::repo_root().join("scripts/install"))
            .args(["--binary".as_ref(), paths::mcpx().as_os_str()])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &home)
            .stdin(Stdio::null())
            .output()
            .expect("run scripts/install")
    };
    let first = run();
    assert!(first.status.success(), "{}", text(&first));
    let bin = home.join(".cargo/bin/mcpx");
    let version = Command::new(&bin).arg("--version").output().expect("run the installed mcpx");
    assert!(version.status.success() && String::from_utf8_lossy(&version.stdout).starts_with("mcpx "), "{version:?}");
    let read = |relative: &str| {
        std::fs::read_to_string(home.join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}\n{}", text(&first)))
    };
    assert!(read(".local/share/bash-completion/completions/mcpx").contains("mcpx"));
    assert!(read(".local/share/zsh/site-functions/_mcpx").starts_with("#compdef mcpx"));
    assert!(read(".config/fish/completions/mcpx.fish").contains("complete -c mcpx"));
    assert!(read(".local/share/man/man1/mcpx.1").contains(".TH mcpx 1"));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(stdout.contains(&format!("add {} to your PATH", home.join(".cargo/bin").display())), "{stdout}");

    let files = |dir: &Path| -> Vec<(PathBuf, Vec<u8>)> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
                let path = entry.path();
                if path.is_dir() { stack.push(path) } else { found.push((path.clone(), std::fs::read(&path).unwrap())) }
            }
        }
        found.sort();
        found
    };
    let before = files(&home);
    let again = run();
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(files(&home), before, "a second run changed the installed files");
}
