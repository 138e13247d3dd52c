//! The agent hosts whose MCP server lists `mcpx import` reads and `mcpx install` rewrites:
//! where each keeps its list, in which format (as each host documents it), and how one
//! entry translates to and from mcpx's own `mcpServers` entry.
//!
//! Edits are splices: only the value of the host's server-list key is replaced, so every
//! other byte of the file (comments, order, indentation, other settings) stays as it was.
//! JSON(C) files are parsed with `jsonc-parser` for the byte ranges; Codex's TOML with
//! `toml_edit`, which keeps formatting.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow, bail};
use serde_json::{Map, Value, json};

/// The name of the one entry `mcpx install` leaves in a host's list.
pub const ENTRY: &str = "mcpx";

#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
pub enum Host {
    /// Claude Code: ~/.claude.json, key mcpServers, and for this directory's project
    /// projects.<dir>.mcpServers (project: .mcp.json).
    Claude,
    /// Claude Desktop: claude_desktop_config.json, key mcpServers (stdio only).
    ClaudeDesktop,
    /// Cursor: ~/.cursor/mcp.json (project: .cursor/mcp.json), key mcpServers.
    Cursor,
    /// VS Code: mcp.json in the user settings directory (project: .vscode/mcp.json), key servers.
    Vscode,
    /// Gemini CLI: ~/.gemini/settings.json (project: .gemini/settings.json), key mcpServers.
    Gemini,
    /// Qwen Code: ~/.qwen/settings.json (project: .qwen/settings.json), key mcpServers.
    Qwen,
    /// Codex: $CODEX_HOME/config.toml or ~/.codex/config.toml, tables [mcp_servers.<name>].
    Codex,
    /// opencode: opencode.json(c) in ~/.config/opencode (project: ./opencode.json(c)), key mcp.
    Opencode,
}

pub const ALL: [Host; 8] = [
    Host::Claude,
    Host::ClaudeDesktop,
    Host::Cursor,
    Host::Vscode,
    Host::Gemini,
    Host::Qwen,
    Host::Codex,
    Host::Opencode,
];

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn home() -> anyhow::Result<PathBuf> {
    env_path("HOME").ok_or_else(|| anyhow!("$HOME is not set"))
}

fn config_home() -> anyhow::Result<PathBuf> {
    match env_path("XDG_CONFIG_HOME") {
        Some(p) => Ok(p),
        None => Ok(home()?.join(".config")),
    }
}

/// The first of `candidates` that exists, else the last one (where a new file goes).
fn existing_or_last(candidates: Vec<PathBuf>) -> PathBuf {
    candidates.iter().find(|p| p.is_file()).cloned().unwrap_or_else(|| candidates.last().cloned().unwrap_or_default())
}

impl Host {
    pub fn name(self) -> &'static str {
        match self {
            Host::Claude => "claude",
            Host::ClaudeDesktop => "claude-desktop",
            Host::Cursor => "cursor",
            Host::Vscode => "vscode",
            Host::Gemini => "gemini",
            Host::Qwen => "qwen",
            Host::Codex => "codex",
            Host::Opencode => "opencode",
        }
    }

    /// The host's config file: the user's, or with `project` the one in `cwd`.
    pub fn path(self, project: Option<&Path>) -> anyhow::Result<PathBuf> {
        if let Some(dir) = project {
            return Ok(match self {
                Host::Claude => dir.join(".mcp.json"),
                Host::ClaudeDesktop => bail!("Claude Desktop has no project config"),
                Host::Cursor => dir.join(".cursor/mcp.json"),
                Host::Vscode => dir.join(".vscode/mcp.json"),
                Host::Gemini => dir.join(".gemini/settings.json"),
                Host::Qwen => dir.join(".qwen/settings.json"),
                Host::Codex => dir.join(".codex/config.toml"),
                Host::Opencode => existing_or_last(vec![dir.join("opencode.jsonc"), dir.join("opencode.json")]),
            });
        }
        Ok(match self {
            Host::Claude => home()?.join(".claude.json"),
            Host::ClaudeDesktop if cfg!(target_os = "macos") => {
                home()?.join("Library/Application Support/Claude/claude_desktop_config.json")
            }
            Host::ClaudeDesktop => config_home()?.join("Claude/claude_desktop_config.json"),
            Host::Cursor => home()?.join(".cursor/mcp.json"),
            Host::Vscode if cfg!(target_os = "macos") => home()?.join("Library/Application Support/Code/User/mcp.json"),
            Host::Vscode => config_home()?.join("Code/User/mcp.json"),
            Host::Gemini => home()?.join(".gemini/settings.json"),
            Host::Qwen => home()?.join(".qwen/settings.json"),
            Host::Codex => {
                env_path("CODEX_HOME").map_or_else(|| home().map(|h| h.join(".codex")), Ok)?.join("config.toml")
            }
            Host::Opencode => {
                let dir = config_home()?.join("opencode");
                existing_or_last(vec![dir.join("opencode.jsonc"), dir.join("opencode.json")])
            }
        })
    }

    /// The key of the server list in a JSON host's file.
    fn key(self) -> &'static str {
        match self {
            Host::Vscode => "servers",
            Host::Opencode => "mcp",
            _ => "mcpServers",
        }
    }

    /// The host's entry that launches `mcpx serve` with `args` and `env`.
    pub fn serve_entry(self, command: &str, args: &[String], env: &Map<String, Value>) -> Value {
        let mut entry = match self {
            Host::Claude | Host::Vscode => json!({"type": "stdio", "command": command, "args": args}),
            Host::Opencode => {
                let mut argv = vec![command.to_owned()];
                argv.extend(args.iter().cloned());
                json!({"type": "local", "command": argv, "enabled": true})
            }
            _ => json!({"command": command, "args": args}),
        };
        if !env.is_empty() {
            let key = if self == Host::Opencode { "environment" } else { "env" };
            entry[key] = Value::Object(env.clone());
        }
        entry
    }

    /// The host's entry that reaches mcpx's Streamable HTTP endpoint at `url`, sending
    /// `headers`; an error for a host whose config takes only stdio servers.
    pub fn http_entry(self, url: &str, headers: &Map<String, Value>) -> anyhow::Result<Value> {
        let mut entry = match self {
            Host::ClaudeDesktop => bail!(
                "Claude Desktop's config file takes stdio servers only (remote ones are added in its app): install it without --http"
            ),
            Host::Claude | Host::Vscode => json!({"type": "http", "url": url}),
            Host::Cursor | Host::Codex => json!({"url": url}),
            // `url` would be SSE to them; `httpUrl` is Streamable HTTP.
            Host::Gemini | Host::Qwen => json!({"httpUrl": url}),
            Host::Opencode => json!({"type": "remote", "url": url, "enabled": true}),
        };
        if !headers.is_empty() {
            let key = if self == Host::Codex { "http_headers" } else { "headers" };
            entry[key] = Value::Object(headers.clone());
        }
        Ok(entry)
    }
}

/// The directory Claude Code keys a project's settings by: the top of the git worktree
/// holding `cwd` (the first directory up with a `.git`, a directory or a worktree's file),
/// else `cwd`; with links resolved.
pub fn claude_project_dir(cwd: &Path) -> PathBuf {
    let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_owned());
    cwd.ancestors().find(|dir| dir.join(".git").exists()).map_or_else(|| cwd.clone(), Path::to_owned)
}

/// A host's config file as read: its text and its servers in the host's own format.
pub struct HostFile {
    pub host: Host,
    pub path: PathBuf,
    /// The file's text; empty when the file does not exist yet.
    pub text: String,
    pub exists: bool,
    /// The host's entries, by name, as the host wrote them.
    pub servers: Map<String, Value>,
    /// Where in the file they are, when not under its usual key (Claude Code's servers
    /// for one project: `projects["/dir"].mcpServers`).
    pub section: Option<String>,
}

impl HostFile {
    pub fn read(host: Host, path: PathBuf) -> anyhow::Result<HostFile> {
        let (text, exists) = match std::fs::read_to_string(&path) {
            Ok(text) => (text, true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), false),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let servers = parse_servers(host, &text, &path)?;
        Ok(HostFile { host, path, text, exists, servers, section: None })
    }

    /// Claude Code's servers for the project `cwd` is in, which it keeps in the user's
    /// file (`claude mcp add --scope local`): `projects.<dir>.mcpServers`, where `<dir>`
    /// is the top of the git worktree holding `cwd`, else `cwd` itself. `None` when the
    /// file has none for that project.
    pub fn claude_project(&self, cwd: &Path) -> anyhow::Result<Option<HostFile>> {
        if self.host != Host::Claude || self.text.trim().is_empty() {
            return Ok(None);
        }
        let root = parse_jsonc(&self.text).with_context(|| format!("{} is not valid JSON", self.path.display()))?;
        let Some(projects) = root.get("projects").and_then(Value::as_object) else { return Ok(None) };
        let dir = claude_project_dir(cwd);
        let same = |key: &str| Path::new(key) == dir || std::fs::canonicalize(key).is_ok_and(|k| k == dir);
        let Some((key, project)) = projects.iter().find(|(key, _)| same(key)) else { return Ok(None) };
        let servers = match project.get("mcpServers") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(servers)) if servers.is_empty() => return Ok(None),
            Some(Value::Object(servers)) => servers.clone(),
            Some(_) => bail!("{}: projects[{key:?}].mcpServers is not an object", self.path.display()),
        };
        Ok(Some(HostFile {
            host: Host::Claude,
            path: self.path.clone(),
            text: String::new(),
            exists: true,
            servers,
            section: Some(format!("projects[{key:?}]")),
        }))
    }

    /// `file` with its servers parsed from its text.
    pub fn read_text(mut file: HostFile) -> anyhow::Result<HostFile> {
        file.servers = parse_servers(file.host, &file.text, &file.path)?;
        Ok(file)
    }

    /// The file's text with the server list replaced by `servers` (in the host's format);
    /// every byte outside that list unchanged.
    pub fn with_servers(&self, servers: &Map<String, Value>) -> anyhow::Result<String> {
        if self.host == Host::Codex {
            return codex_with_servers(&self.text, servers);
        }
        splice_json_member(&self.text, self.host.key(), &Value::Object(servers.clone()))
    }

    /// The server list's own text in the file (what `with_servers` replaces), if present.
    pub fn servers_text(&self) -> Option<String> {
        if self.host == Host::Codex {
            let doc: toml_edit::DocumentMut = self.text.parse().ok()?;
            let table = doc.get("mcp_servers")?;
            let mut only = toml_edit::DocumentMut::new();
            only.insert("mcp_servers", table.clone());
            return Some(only.to_string());
        }
        let ast = parse_ast(&self.text).ok()?;
        let root = ast.as_object()?;
        let prop = root.get(self.host.key())?;
        Some(jsonc_parser::common::Ranged::text(&prop.value, &self.text).to_owned())
    }

    /// The file's text with the server list's own text replaced by `servers_text` (as
    /// [`servers_text`](Self::servers_text) gave it).
    pub fn with_servers_text(&self, servers_text: &str) -> anyhow::Result<String> {
        if self.host == Host::Codex {
            let saved: toml_edit::DocumentMut = servers_text.parse().context("the saved servers are not TOML")?;
            let mut doc: toml_edit::DocumentMut = self.text.parse()?;
            match saved.get("mcp_servers") {
                Some(table) => doc.insert("mcp_servers", table.clone()),
                None => doc.remove("mcp_servers"),
            };
            return Ok(doc.to_string());
        }
        let ast = parse_ast(&self.text)?;
        let root = ast.as_object().ok_or_else(|| anyhow!("{} is not a JSON object", self.path.display()))?;
        let prop = root
            .get(self.host.key())
            .ok_or_else(|| anyhow!("{} has no \"{}\"", self.path.display(), self.host.key()))?;
        let range = jsonc_parser::common::Ranged::range(&prop.value);
        Ok(format!("{}{}{}", &self.text[..range.start], servers_text, &self.text[range.end..]))
    }
}

fn parse_servers(host: Host, text: &str, path: &Path) -> anyhow::Result<Map<String, Value>> {
    let servers = if text.trim().is_empty() {
        Map::new()
    } else if host == Host::Codex {
        codex_servers(text).with_context(|| format!("{} is not valid TOML", path.display()))?
    } else {
        let root = parse_jsonc(text).with_context(|| format!("{} is not valid JSON", path.display()))?;
        match root.get(host.key()) {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(servers)) => servers.clone(),
            Some(_) => bail!("{}: \"{}\" is not an object", path.display(), host.key()),
        }
    };
    Ok(servers)
}

fn parse_options() -> jsonc_parser::ParseOptions {
    jsonc_parser::ParseOptions::default()
}

/// JSON with comments and trailing commas (VS Code's and opencode's files have them).
pub fn parse_jsonc(text: &str) -> anyhow::Result<Value> {
    let value: Option<Value> =
        jsonc_parser::parse_to_serde_value(text, &parse_options()).map_err(|e| anyhow!("{e}"))?;
    Ok(value.unwrap_or(Value::Null))
}

fn parse_ast(text: &str) -> anyhow::Result<jsonc_parser::ast::Value<'_>> {
    let collect = jsonc_parser::CollectOptions::default();
    let parsed = jsonc_parser::parse_to_ast(text, &collect, &parse_options()).map_err(|e| anyhow!("{e}"))?;
    parsed.value.ok_or_else(|| anyhow!("the file holds no JSON value"))
}

/// `text` (a JSON object, or empty) with top-level member `key` set to `value`: the old
/// value's bytes replaced, or a new member added before the closing brace.
pub fn splice_json_member(text: &str, key: &str, value: &Value) -> anyhow::Result<String> {
    if text.trim().is_empty() {
        let mut root = Map::new();
        root.insert(key.to_owned(), value.clone());
        return Ok(serde_json::to_string_pretty(&root)? + "\n");
    }
    let ast = parse_ast(text)?;
    let root = ast.as_object().ok_or_else(|| anyhow!("the file is not a JSON object"))?;
    if let Some(prop) = root.get(key) {
        let range = jsonc_parser::common::Ranged::range(&prop.value);
        let indent = line_indent(text, prop.range.start);
        let rendered = indented(value, &indent)?;
        return Ok(format!("{}{}{}", &text[..range.start], rendered, &text[range.end..]));
    }
    let close = root.range.end - 1;
    let member_indent = match root.properties.first() {
        Some(first) => line_indent(text, first.range.start),
        None => "  ".to_owned(),
    };
    let rendered = indented(value, &member_indent)?;
    let member = format!("{}: {rendered}", serde_json::to_string(key)?);
    Ok(match root.properties.last() {
        Some(last) => {
            let at = last.range.end;
            // A trailing comma after the last member is kept where it is.
            let rest = &text[at..close];
            let trailing_comma = rest.trim_start().starts_with(',');
            if trailing_comma {
                let comma = at + rest.find(',').expect("a comma");
                format!("{}\n{member_indent}{member},{}", &text[..=comma], &text[comma + 1..])
            } else {
                format!("{},\n{member_indent}{member}{}", &text[..at], &text[at..])
            }
        }
        None => format!("{}\n{member_indent}{member}\n{}", &text[..close], &text[close..]),
    })
}

/// The whitespace that starts the line holding byte `at`.
fn line_indent(text: &str, at: usize) -> String {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..at].chars().take_while(|c| c.is_whitespace()).collect()
}

/// `value` pretty-printed, its lines after the first indented by `indent`.
fn indented(value: &Value, indent: &str) -> anyhow::Result<String> {
    let pretty = serde_json::to_string_pretty(value)?;
    Ok(pretty.lines().enumerate().map(|(i, l)| if i == 0 { l.to_owned() } else { format!("\n{indent}{l}") }).collect())
}

fn codex_servers(text: &str) -> anyhow::Result<Map<String, Value>> {
    let doc: toml_edit::DocumentMut = text.parse()?;
    let mut out = Map::new();
    let Some(table) = doc.get("mcp_servers").and_then(|t| t.as_table_like()) else {
        return Ok(out);
    };
    for (name, item) in table.iter() {
        out.insert(name.to_owned(), toml_item_to_json(item));
    }
    Ok(out)
}

fn toml_item_to_json(item: &toml_edit::Item) -> Value {
    match item {
        toml_edit::Item::Value(v) => toml_value_to_json(v),
        toml_edit::Item::Table(t) => {
            Value::Object(t.iter().map(|(k, v)| (k.to_owned(), toml_item_to_json(v))).collect())
        }
        toml_edit::Item::ArrayOfTables(a) => {
            Value::Array(a.iter().map(|t| toml_item_to_json(&toml_edit::Item::Table(t.clone()))).collect())
        }
        toml_edit::Item::None => Value::Null,
    }
}

fn toml_value_to_json(v: &toml_edit::Value) -> Value {
    match v {
        toml_edit::Value::String(s) => json!(s.value()),
        toml_edit::Value::Integer(i) => json!(i.value()),
        toml_edit::Value::Float(f) => json!(f.value()),
        toml_edit::Value::Boolean(b) => json!(b.value()),
        toml_edit::Value::Datetime(d) => json!(d.value().to_string()),
        toml_edit::Value::Array(a) => Value::Array(a.iter().map(toml_value_to_json).collect()),
        toml_edit::Value::InlineTable(t) => {
            Value::Object(t.iter().map(|(k, v)| (k.to_owned(), toml_value_to_json(v))).collect())
        }
    }
}

fn json_to_toml(v: &Value) -> toml_edit::Value {
    match v {
        Value::String(s) => s.as_str().into(),
        Value::Bool(b) => (*b).into(),
        Value::Number(n) => n.as_i64().map_or_else(|| n.as_f64().unwrap_or_default().into(), Into::into),
        Value::Array(items) => toml_edit::Value::Array(items.iter().map(json_to_toml).collect()),
        Value::Object(map) => {
            let mut t = toml_edit::InlineTable::new();
            for (k, v) in map {
                t.insert(k, json_to_toml(v));
            }
            toml_edit::Value::InlineTable(t)
        }
        Value::Null => "".into(),
    }
}

fn codex_with_servers(text: &str, servers: &Map<String, Value>) -> anyhow::Result<String> {
    let mut doc: toml_edit::DocumentMut = text.parse()?;
    let mut table = toml_edit::Table::new();
    table.set_implicit(true);
    for (name, entry) in servers {
        let mut server = toml_edit::Table::new();
        for (k, v) in entry.as_object().into_iter().flatten() {
            server.insert(k, toml_edit::Item::Value(json_to_toml(v)));
        }
        table.insert(name, toml_edit::Item::Table(server));
    }
    // The new tables go where the old ones were, not to the end of the file.
    if let Some(at) = doc.get("mcp_servers").and_then(first_position) {
        table.set_position(Some(at));
        for (_, item) in table.iter_mut() {
            if let Some(t) = item.as_table_mut() {
                t.set_position(Some(at));
            }
        }
    }
    doc.insert("mcp_servers", toml_edit::Item::Table(table));
    Ok(doc.to_string())
}

/// The smallest document position of a table and its subtables.
fn first_position(item: &toml_edit::Item) -> Option<isize> {
    let table = item.as_table()?;
    let inner = table.iter().filter_map(|(_, v)| first_position(v));
    table.position().into_iter().chain(inner).min()
}

/// A host's entry as an mcpx `mcpServers` entry, or why it cannot be one.
pub fn to_mcpx(host: Host, entry: &Value) -> Result<Value, String> {
    let obj = entry.as_object().ok_or("the entry is not an object")?;
    let string_map = |key: &str| -> Result<Option<Value>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) if m.values().all(Value::is_string) => {
                Ok((!m.is_empty()).then(|| Value::Object(m.clone())))
            }
            Some(_) => Err(format!("\"{key}\" is not an object of strings")),
        }
    };
    let strings = |key: &str| -> Result<Vec<String>, String> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_owned).ok_or(format!("\"{key}\" is not a list of strings")))
                .collect(),
            Some(_) => Err(format!("\"{key}\" is not a list of strings")),
        }
    };
    let text = |key: &str| obj.get(key).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_owned);
    let mut out = Map::new();
    let (command, args, env, headers) = match host {
        Host::Opencode => {
            let argv = strings("command")?;
            let (command, args) = match argv.split_first() {
                Some((c, rest)) => (Some(c.clone()), rest.to_vec()),
                None => (None, Vec::new()),
            };
            (command, args, string_map("environment")?, string_map("headers")?)
        }
        Host::Codex => (text("command"), strings("args")?, string_map("env")?, string_map("http_headers")?),
        _ => (text("command"), strings("args")?, string_map("env")?, string_map("headers")?),
    };
    // Gemini and Qwen name a Streamable HTTP endpoint httpUrl and an SSE one url.
    let url = text("httpUrl").or_else(|| text("url")).or_else(|| text("serverUrl"));
    match (command, url) {
        (Some(command), None) => {
            out.insert("command".into(), json!(command));
            if !args.is_empty() {
                out.insert("args".into(), json!(args));
            }
            if let Some(env) = env {
                out.insert("env".into(), env);
            }
            if let Some(cwd) = text("cwd") {
                out.insert("cwd".into(), json!(cwd));
            }
        }
        (None, Some(url)) => {
            out.insert("url".into(), json!(url));
            if let Some(headers) = headers {
                out.insert("headers".into(), headers);
            }
        }
        (Some(_), Some(_)) => return Err("the entry has both a command and a URL".into()),
        (None, None) => return Err("the entry has neither a command nor a URL".into()),
    }
    Ok(Value::Object(out))
}

/// Whether the host's entry is the one `mcpx install` wrote: it runs `mcpx serve`, or
/// (`--http`) it reaches an mcpx `/mcp` endpoint.
pub fn is_mcpx_entry(host: Host, name: &str, entry: &Value) -> bool {
    if name != ENTRY {
        return false;
    }
    let url = ["url", "httpUrl"].iter().find_map(|k| entry.get(*k).and_then(Value::as_str));
    if let Some(url) = url {
        return url.ends_with("/mcp") && entry.get("command").is_none();
    }
    let argv: Vec<&str> = match host {
        Host::Opencode => entry["command"].as_array().into_iter().flatten().filter_map(Value::as_str).collect(),
        _ => {
            let mut v: Vec<&str> = entry["command"].as_str().into_iter().collect();
            v.extend(entry["args"].as_array().into_iter().flatten().filter_map(Value::as_str));
            v
        }
    };
    argv.first().is_some_and(|c| c.ends_with("mcpx")) && argv.get(1) == Some(&"serve")
}
