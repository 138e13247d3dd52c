//! `mcpx service install|uninstall`: a systemd user unit that runs `mcpx daemon` for this
//! user, written to `$XDG_CONFIG_HOME/systemd/user/mcpx.service` and enabled with
//! `systemctl --user`. Where no systemd user manager runs, it says so and writes nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::terminal::{say, say_err};
use anyhow::{Context, anyhow, bail};

pub const UNIT: &str = "mcpx.service";

#[derive(clap::Subcommand)]
pub enum ServiceCommand {
    /// Write the systemd user unit for `mcpx daemon` and enable and start it.
    Install {
        /// Config file the daemon reads (default: as `mcpx daemon` finds it).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Print the unit; write and enable nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Stop and disable the unit and remove its file.
    Uninstall,
}

fn unit_path() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .ok_or_else(|| anyhow!("neither $XDG_CONFIG_HOME nor $HOME is set"))?;
    Ok(base.join("systemd/user").join(UNIT))
}

/// The unit's text: this binary's `daemon` (which stops on systemd's SIGTERM), restarted
/// when it fails.
pub fn unit(exe: &Path, config: Option<&Path>) -> String {
    let mut exec = format!("{} daemon", quote(&exe.to_string_lossy()));
    if let Some(config) = config {
        exec.push_str(&format!(" --config {}", quote(&config.to_string_lossy())));
    }
    format!(
        "[Unit]\nDescription=mcpx: an MCP gateway for this user's agent hosts\n\n\
         [Service]\nExecStart={exec}\nRestart=on-failure\n\n\
         [Install]\nWantedBy=default.target\n"
    )
}

/// A systemd command-line word: quoted when it holds spaces or quotes.
fn quote(word: &str) -> String {
    if word.chars().any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '\'') {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        word.to_owned()
    }
}

/// Why no systemd user manager can take the unit here, if none can: the machine did not
/// boot with systemd (as `sd_booted()` tells), or this user's manager is not running (its
/// private socket under `$XDG_RUNTIME_DIR`, else `/run/user/<uid>`, is missing), as in a
/// container or a session without a login.
fn no_user_systemd() -> Option<String> {
    if !Path::new("/run/systemd/system").is_dir() {
        return Some("systemd does not run here (no /run/systemd/system)".to_owned());
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(format!("/run/user/{}", rustix::process::getuid().as_raw())));
    let socket = runtime.join("systemd/private");
    (!socket.exists()).then(|| format!("no systemd user manager runs for this user (no {})", socket.display()))
}

fn systemctl(args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("systemctl").arg("--user").args(args).status().context("cannot run systemctl")?;
    if !status.success() {
        bail!("systemctl --user {} failed ({status})", args.join(" "));
    }
    Ok(())
}

/// What to do instead, after why the unit cannot be installed.
const INSTEAD: &str = "nothing written. Start `mcpx daemon` from your session's start-up instead \
                       (mcpx serve and the CLI also start it on demand)";

pub fn run(command: ServiceCommand) -> ExitCode {
    let outcome = (|| -> anyhow::Result<()> {
        let path = unit_path()?;
        match command {
            ServiceCommand::Install { config, dry_run } => {
                let exe = std::env::current_exe().context("cannot find this mcpx binary")?;
                let config = config.map(std::path::absolute).transpose()?;
                let text = unit(&exe, config.as_deref());
                if dry_run {
                    print!("{}", crate::terminal::text(&format!("# {}\n{text}", path.display())));
                    return Ok(());
                }
                if let Some(why) = no_user_systemd() {
                    bail!("{why}: {INSTEAD}");
                }
                std::fs::create_dir_all(path.parent().expect("a parent"))?;
                std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
                systemctl(&["daemon-reload"])?;
                systemctl(&["enable", "--now", UNIT])?;
                say!("wrote {} and started it (systemctl --user status {UNIT})", path.display());
            }
            ServiceCommand::Uninstall => {
                if let Some(why) = no_user_systemd() {
                    bail!("{why}: {INSTEAD}");
                }
                if path.exists() {
                    systemctl(&["disable", "--now", UNIT])?;
                    std::fs::remove_file(&path)?;
                    systemctl(&["daemon-reload"])?;
                    say!("removed {}", path.display());
                } else {
                    say!("{} is not installed", path.display());
                }
            }
        }
        Ok(())
    })();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            say_err!("mcpx: {e:#}");
            ExitCode::FAILURE
        }
    }
}
