//! Moving in: `mcpx import` merges the agent hosts' MCP server lists into mcpx's config;
//! `mcpx install <host>` then points the host at mcpx (one `mcpx serve` entry in place of
//! its list, which it keeps to put back), and `mcpx uninstall <host>` puts the list back.
//!
//! Every write keeps a backup of the file it replaces (`<file>.mcpx-backup-<unix time>`)
//! and changes nothing outside the host's server list (see [`crate::hosts`]). What mcpx
//! writes here holds credentials (mcpx's bearer for an `--http` install, the hosts' own
//! servers' headers and keys on their way into mcpx's config), so every file it writes,
//! backups and install records included, is the user's alone (0600), whatever the file
//! it replaces allowed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use serde_json::{Map, Value, json};

use crate::hosts::{self, ENTRY, Host, HostFile};
use crate::terminal::{say, say_err, say_text};

#[derive(clap::Args)]
pub struct ImportArgs {
    /// The hosts to read (default: every host whose config file exists).
    #[arg(value_enum)]
    hosts: Vec<Host>,
    /// Read the hosts' project files in this directory (.mcp.json, .cursor/mcp.json,
    /// .vscode/mcp.json, .gemini/settings.json, ...) instead of the user's.
    #[arg(long)]
    project: bool,
    /// Print the merged config and the diff; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// mcpx config to merge into. Default: $MCPX_CONFIG (absolute), else
    /// $XDG_CONFIG_HOME/mcpx/config.json (created if missing).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct InstallArgs {
    #[arg(value_enum)]
    host: Host,
    /// The host's project file in this directory instead of the user's.
    #[arg(long)]
    project: bool,
    /// The session key the host's `mcpx serve` uses (`mcpx serve --session KEY`): hosts
    /// given the same key share session-scoped instances and artifacts.
    #[arg(long, conflicts_with = "http")]
    session_key: Option<String>,
    /// Reach mcpx's HTTP endpoint (`/mcp`) instead of launching `mcpx serve`, for hosts
    /// that take remote servers (not Claude Desktop). With `http.tokens` set, the entry
    /// sends one of them as its bearer.
    #[arg(long)]
    http: bool,
    /// With --http: the endpoint (default: the running daemon's, else
    /// http://<http.host>:<http.port>/mcp from mcpx's config).
    #[arg(long, requires = "http")]
    url: Option<String>,
    /// With --http: the name of the `http.tokens` entry the host sends (needed when there
    /// are several).
    #[arg(long, requires = "http", value_name = "NAME")]
    token: Option<String>,
    /// Print the host's new config and the diff; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// mcpx config the host's servers are imported into, and that `mcpx serve` names
    /// (default: as for `mcpx import`).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct UninstallArgs {
    #[arg(value_enum)]
    host: Host,
    /// The host's project file in this directory instead of the user's.
    #[arg(long)]
    project: bool,
    /// Print the host's restored config and the diff; write nothing.
    #[arg(long)]
    dry_run: bool,
}

fn report(outcome: anyhow::Result<bool>) -> ExitCode {
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            say_err!("mcpx: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn project_dir(project: bool) -> anyhow::Result<Option<PathBuf>> {
    Ok(if project { Some(std::env::current_dir()?) } else { None })
}

/// The mcpx config file to merge into (it may not exist yet).
fn target_config(flag: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(notice) = mcpx_gateway::settings::ignored_project_config(&std::env::current_dir()?) {
        say_err!("mcpx: {notice}");
    }
    if let Some(found) = mcpx_gateway::settings::find_config(flag.clone())? {
        return Ok(found);
    }
    mcpx_gateway::settings::user_config_file()
        .ok_or_else(|| anyhow!("neither $XDG_CONFIG_HOME nor $HOME is an absolute path: name the config with --config"))
}

/// What merging hosts' servers into mcpx's did.
#[derive(Default)]
struct Merge {
    added: Vec<String>,
    same: Vec<String>,
    /// Same name, different server: reported, not overwritten.
    conflicts: Vec<String>,
    skipped: Vec<String>,
}

/// Merges `file`'s servers into `servers` (mcpx's `mcpServers`).
fn merge(file: &HostFile, servers: &mut Map<String, Value>, merge: &mut Merge) {
    let within = file.section.as_deref().map(|s| format!(" {s}")).unwrap_or_default();
    let from = format!("{} ({}{within})", file.host.name(), file.path.display());
    for (name, entry) in &file.servers {
        if hosts::is_mcpx_entry(file.host, name, entry) {
            continue;
        }
        let imported = match hosts::to_mcpx(file.host, entry) {
            Ok(v) => v,
            Err(why) => {
                merge.skipped.push(format!("{name} from {from}: {why}"));
                continue;
            }
        };
        if let Err(e) = serde_json::from_value::<mcpx_gateway::config::ServerConfig>(imported.clone()) {
            merge.skipped.push(format!("{name} from {from}: {e}"));
            continue;
        }
        match servers.get(name) {
            None => {
                servers.insert(name.clone(), imported);
                merge.added.push(format!("{name} from {from}"));
            }
            Some(existing) if *existing == imported => merge.same.push(format!("{name} from {from}")),
            // Not the values: they may hold credentials.
            Some(_) => merge.conflicts.push(format!("{name} from {from} differs from mcpx's {name}: kept mcpx's")),
        }
    }
}

/// mcpx's config text and its `mcpServers`.
fn read_config(path: &Path) -> anyhow::Result<(String, Map<String, Value>)> {
    use mcpx_gateway::config::ConfigError;
    // Refused, not merged into: servers (and their credentials) would go where others read.
    // Read from the very file checked, so no name swapped in between is merged.
    let bytes = match ConfigError::read_trusted(path) {
        Ok(bytes) => bytes,
        Err(ConfigError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let text = String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    if text.trim().is_empty() {
        return Ok((text, Map::new()));
    }
    let root: Value = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
    let servers = root.get("mcpServers").and_then(Value::as_object).cloned().unwrap_or_default();
    Ok((text, servers))
}

/// Merges the hosts' servers into the config at `config`, writing it (with a backup)
/// unless `dry_run`. False when a same-name server differs.
fn import_files(files: &[HostFile], config: &Path, dry_run: bool) -> anyhow::Result<bool> {
    let (text, mut servers) = read_config(config)?;
    let mut outcome = Merge::default();
    for file in files {
        merge(file, &mut servers, &mut outcome);
    }
    for line in &outcome.added {
        say!("added {line}");
    }
    for line in &outcome.same {
        say!("already there: {line}");
    }
    for line in &outcome.skipped {
        say_err!("mcpx: skipped {line}");
    }
    for line in &outcome.conflicts {
        say_err!("mcpx: not imported: {line}");
    }
    if outcome.added.is_empty() {
        say!("{} unchanged", config.display());
        return Ok(outcome.conflicts.is_empty());
    }
    let new_text = hosts::splice_json_member(&text, "mcpServers", &Value::Object(servers))?;
    // What the daemon would load: refuse to write a config it would reject.
    mcpx_gateway::Config::parse(&new_text, config).map_err(|e| anyhow!("the merged config would not load: {e}"))?;
    if dry_run {
        say!("--- merged {} ---", config.display());
        say_text!("{new_text}");
        print_diff(&text, &new_text, config);
    } else {
        write_with_backup(config, &new_text)?;
        say!("wrote {}", config.display());
    }
    Ok(outcome.conflicts.is_empty())
}

pub fn import(args: ImportArgs) -> ExitCode {
    report((|| {
        let project = project_dir(args.project)?;
        let chosen: Vec<Host> = if args.hosts.is_empty() { hosts::ALL.to_vec() } else { args.hosts.clone() };
        let mut files = Vec::new();
        for host in chosen {
            let path = match host.path(project.as_deref()) {
                Ok(p) => p,
                // Hosts without a project file (Claude Desktop) when none was named.
                Err(_) if args.hosts.is_empty() => continue,
                Err(e) => return Err(e),
            };
            let file = HostFile::read(host, path)?;
            if !file.exists {
                if !args.hosts.is_empty() {
                    say_err!("mcpx: {} has no config at {}", host.name(), file.path.display());
                }
                continue;
            }
            // Claude Code keeps a project's own servers in the user's file too.
            let local = if project.is_none() { file.claude_project(&std::env::current_dir()?)? } else { None };
            files.push(file);
            files.extend(local);
        }
        if files.is_empty() {
            say!("no host config found");
            return Ok(true);
        }
        import_files(&files, &target_config(args.config.clone())?, args.dry_run)
    })())
}

/// Where install keeps what it took out of a host's file, for uninstall to put back.
fn record_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".mcpx-install.json");
    PathBuf::from(name)
}

pub fn install(args: InstallArgs) -> ExitCode {
    report((|| {
        let project = project_dir(args.project)?;
        let host = args.host;
        if args.http {
            // Refused before anything is imported or written.
            host.http_entry("", &Map::new())?;
        }
        let file = HostFile::read(host, host.path(project.as_deref())?)?;
        let config = target_config(args.config.clone())?;
        let others: Vec<&String> =
            file.servers.iter().filter(|(n, e)| !hosts::is_mcpx_entry(host, n, e)).map(|(n, _)| n).collect();
        // The host's servers move into mcpx first: none may be lost or shadowed.
        if !others.is_empty() && !import_files(std::slice::from_ref(&file), &config, args.dry_run)? {
            bail!("not installed: resolve the servers above first (rename one, or make them equal)");
        }
        let entry = if args.http { http_entry(host, &args, &config)? } else { serve_entry(host, &args, &config)? };
        let mut servers = Map::new();
        servers.insert(ENTRY.to_owned(), entry);
        let new_text = file.with_servers(&servers)?;
        if args.dry_run {
            say!("--- {} after install ---", file.path.display());
            say_text!("{new_text}");
            print_diff(&file.text, &new_text, &file.path);
            return Ok(true);
        }
        create_folders_for(&file.path)?;
        let record = record_path(&file.path);
        // A second install keeps the first record: it holds the host's own servers.
        if !record.exists() {
            let saved = json!({
                "host": host.name(),
                "existed": file.exists,
                "servers": file.servers_text(),
                "original": file.text,
                "installed": new_text,
            });
            write_private(&record, &serde_json::to_string_pretty(&saved)?)?;
        }
        write_with_backup(&file.path, &new_text)?;
        say!("{} now reaches its servers through mcpx ({})", host.name(), file.path.display());
        Ok(true)
    })())
}

/// The host's entry running this binary's `mcpx serve`, reaching the daemon of `config`.
fn serve_entry(host: Host, args: &InstallArgs, config: &Path) -> anyhow::Result<Value> {
    let exe = std::env::current_exe().context("cannot find this mcpx binary")?;
    let exe = exe.to_str().ok_or_else(|| anyhow!("the mcpx binary's path is not UTF-8"))?;
    let mut serve_args = vec!["serve".to_owned()];
    if let Some(key) = &args.session_key {
        serve_args.extend(["--session".to_owned(), key.clone()]);
    }
    if args.config.is_some() || config.is_file() {
        let absolute = std::path::absolute(config)?;
        serve_args.extend(["--config".to_owned(), absolute.to_string_lossy().into_owned()]);
    }
    // The daemon this shell reaches is the one the host's mcpx serve must reach.
    let mut env = Map::new();
    if let Some(dir) = std::env::var_os("MCPX_STATE_DIR").filter(|v| !v.is_empty()) {
        env.insert("MCPX_STATE_DIR".into(), json!(std::path::absolute(PathBuf::from(dir))?));
    }
    Ok(host.serve_entry(exe, &serve_args, &env))
}

/// The host's entry reaching mcpx's `/mcp` over HTTP, with the bearer `http.tokens`
/// requires.
fn http_entry(host: Host, args: &InstallArgs, config_path: &Path) -> anyhow::Result<Value> {
    let (text, _) = read_config(config_path)?;
    let text = if text.trim().is_empty() { "{}".to_owned() } else { text };
    let config = mcpx_gateway::Config::parse(&text, config_path).map_err(|e| anyhow!("{e}"))?;
    let url = match &args.url {
        Some(url) => url.clone(),
        None => endpoint(&config.http, config_path)?,
    };
    let mut headers = Map::new();
    let tokens = &config.http.tokens;
    let chosen = match (&args.token, tokens.len()) {
        (Some(name), _) => Some(tokens.get_key_value(name).ok_or_else(|| {
            anyhow!("http.tokens has no {name:?} (it has: {})", tokens.keys().cloned().collect::<Vec<_>>().join(", "))
        })?),
        (None, 0) => None,
        (None, 1) => tokens.iter().next(),
        (None, _) => bail!(
            "http.tokens has several tokens: name the one {} sends with --token ({})",
            host.name(),
            tokens.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    if let Some((name, token)) = chosen {
        headers.insert("Authorization".into(), json!(format!("Bearer {token}")));
        say!("{} will send the token {name:?} (http.tokens) to {url}", host.name());
    } else if config.http.oauth.is_some() {
        bail!(
            "mcpx takes OAuth bearers here and has no http.tokens to give {}: install it without --http",
            host.name()
        );
    }
    host.http_entry(&url, &headers)
}

/// mcpx's `/mcp` URL: the running daemon's when it runs with this config (it may have
/// been given another port), else from `http.host` and `http.port`.
fn endpoint(http: &mcpx_gateway::config::HttpConfig, config: &Path) -> anyhow::Result<String> {
    let dir = mcpx_server::state::state_dir()?;
    let real = |p: &Path| std::fs::canonicalize(p).ok();
    let config = real(config);
    let running = mcpx_server::state::read_record(&dir).filter(|record| {
        let alive = record["pid"].as_u64().is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        alive && config.is_some() && record["config"].as_str().is_some_and(|c| real(Path::new(c)) == config)
    });
    if let Some(url) = running.as_ref().and_then(|record| record["url"].as_str()) {
        return Ok(url.to_owned());
    }
    if http.port == 0 {
        bail!("http.port is 0 (any free port) and no daemon runs with this config: name the endpoint with --url");
    }
    let host = match http.host.as_str() {
        "0.0.0.0" | "" => "127.0.0.1".to_owned(),
        "::" => "[::1]".to_owned(),
        h if h.contains(':') && !h.starts_with('[') => format!("[{h}]"),
        h => h.to_owned(),
    };
    Ok(format!("http://{host}:{}/mcp", http.port))
}

pub fn uninstall(args: UninstallArgs) -> ExitCode {
    report((|| {
        let project = project_dir(args.project)?;
        let host = args.host;
        let file = HostFile::read(host, host.path(project.as_deref())?)?;
        let record_file = record_path(&file.path);
        let record: Option<Value> = match std::fs::read_to_string(&record_file) {
            Ok(t) => Some(serde_json::from_str(&t).with_context(|| format!("{} is damaged", record_file.display()))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e.into()),
        };
        let saved_text = record.as_ref().and_then(|r| r["servers"].as_str().map(str::to_owned));
        let only_mcpx = file.servers.len() == 1 && file.servers.iter().all(|(n, e)| hosts::is_mcpx_entry(host, n, e));
        let untouched = record.as_ref().is_some_and(|r| r["installed"].as_str() == Some(file.text.as_str()));
        let original = record.as_ref().and_then(|r| r["original"].as_str().map(str::to_owned));
        let new_text = match (&saved_text, only_mcpx) {
            // Nothing changed the file since install: it comes back whole.
            _ if untouched && original.is_some() => original.clone().unwrap_or_default(),
            // Untouched since install: the list comes back byte for byte.
            (Some(saved), true) => file.with_servers_text(saved)?,
            _ => {
                let mut servers = file.servers.clone();
                servers.retain(|n, e| !hosts::is_mcpx_entry(host, n, e));
                if let Some(saved) = &saved_text {
                    let restored = HostFile {
                        host,
                        path: file.path.clone(),
                        text: if host == Host::Codex {
                            saved.clone()
                        } else {
                            format!("{{\"{}\": {saved}}}", key_of(host))
                        },
                        exists: true,
                        servers: Map::new(),
                        section: None,
                    };
                    let restored = HostFile::read_text(restored)?;
                    for (name, entry) in restored.servers {
                        servers.entry(name).or_insert(entry);
                    }
                }
                file.with_servers(&servers)?
            }
        };
        if args.dry_run {
            say!("--- {} after uninstall ---", file.path.display());
            say_text!("{new_text}");
            print_diff(&file.text, &new_text, &file.path);
            return Ok(true);
        }
        let created = record.as_ref().is_some_and(|r| r["existed"] == json!(false));
        if untouched && created {
            // Install created the file: uninstall takes it away again (a backup stays).
            write_with_backup(&file.path, &new_text)?;
            std::fs::remove_file(&file.path)?;
        } else if new_text != file.text {
            write_with_backup(&file.path, &new_text)?;
        }
        if record.is_some() {
            std::fs::remove_file(&record_file)?;
        }
        say!("{} reaches its own servers again ({})", host.name(), file.path.display());
        Ok(true)
    })())
}

fn key_of(host: Host) -> &'static str {
    match host {
        Host::Vscode => "servers",
        Host::Opencode => "mcp",
        _ => "mcpServers",
    }
}

fn print_diff(old: &str, new: &str, path: &Path) {
    let name = path.display().to_string();
    let diff = similar::TextDiff::from_lines(old, new);
    print!("{}", crate::terminal::text(&diff.unified_diff().context_radius(3).header(&name, &name).to_string()));
}

/// Writes `text` to `path` (through a temporary file and a rename), first copying the
/// file it replaces to `<path>.mcpx-backup-<unix time>`. Both are owner-only (0600): a
/// host's file was often 0644, and what it holds after mcpx wrote it (a bearer), or held
/// before (the host's own tokens, now in the backup), is no one else's to read.
pub fn write_with_backup(path: &Path, text: &str) -> anyhow::Result<Option<PathBuf>> {
    let mut backup = None;
    if let Ok(old) = std::fs::read(path) {
        let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
        let mut n = 0;
        let target = loop {
            let suffix = if n == 0 { format!(".mcpx-backup-{seconds}") } else { format!(".mcpx-backup-{seconds}-{n}") };
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            let candidate = PathBuf::from(name);
            if !candidate.exists() {
                break candidate;
            }
            n += 1;
        };
        // Not `fs::copy`: it would give the backup the old file's mode.
        write_private(&target, &old).with_context(|| format!("cannot back up {}", path.display()))?;
        say!("backup: {}", target.display());
        backup = Some(target);
    }
    create_folders_for(path)?;
    let mut temp = path.as_os_str().to_owned();
    temp.push(".mcpx-tmp");
    let temp = PathBuf::from(temp);
    let _ = std::fs::remove_file(&temp);
    write_private(&temp, text)?;
    std::fs::rename(&temp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(backup)
}

/// Creates the missing folders above `path`, private (0700): one its group could write
/// to would get mcpx's own config refused (`mcpx_gateway::provenance`).
fn create_folders_for(path: &Path) -> anyhow::Result<()> {
    let Some(parent) = path.parent() else { return Ok(()) };
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(parent)
        .with_context(|| format!("cannot create {}", parent.display()))
}

/// Creates `path` (never through an existing file or link) readable by its owner only.
fn write_private(path: &Path, bytes: impl AsRef<[u8]>) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(bytes.as_ref())?;
    Ok(())
}
