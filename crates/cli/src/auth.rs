//! `mcpx auth`: logging in to HTTP upstream servers that ask for OAuth. The daemon does
//! the work (discovery, registration, the loopback redirect, the token store); this asks
//! it to begin, shows the URL (and opens it in a browser when there is a desktop), and
//! waits until the daemon says the login is done.

use std::time::Duration;

use mcpx_server::v1::LoginWait;

use crate::commands::{Common, Outcome, client, print_json};
use crate::terminal::{say, say_err};

pub async fn login(common: Common, server: &str, open: bool) -> anyhow::Result<Outcome> {
    let mut v1 = client(&common).await?;
    let login = v1.auth_login(server).await?;
    if common.json {
        print_json(&login)?;
    } else {
        say!("Open this URL to log in to {server}:");
        say!("{}", login.url);
    }
    if open && desktop() {
        open_browser(&login.url);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(login.expires_in_ms) + Duration::from_secs(5);
    loop {
        let wait = LoginWait { id: login.id.clone(), wait_ms: Some(25_000) };
        let progress = v1.auth_wait(&wait).await?;
        match progress.status.as_str() {
            "done" => {
                if !common.json {
                    say!("Logged in to {server}.");
                }
                return Ok(Outcome::Ok);
            }
            "failed" => {
                say_err!("mcpx: logging in to {server} failed: {}", progress.error.unwrap_or_default());
                return Ok(Outcome::Failed);
            }
            "expired" => {
                say_err!("mcpx: the login to {server} was not completed in time (the daemon's oauth.loginTimeout)");
                return Ok(Outcome::TimedOut);
            }
            _ if tokio::time::Instant::now() >= deadline => {
                say_err!("mcpx: the login to {server} was not completed in time");
                return Ok(Outcome::TimedOut);
            }
            _ => {}
        }
    }
}

pub async fn list(common: Common) -> anyhow::Result<Outcome> {
    let list = client(&common).await?.auth_list().await?;
    if common.json {
        print_json(&list)?;
        return Ok(Outcome::Ok);
    }
    if list.servers.is_empty() {
        say!("no HTTP servers are configured");
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs();
    for s in &list.servers {
        let state = match s.state.as_str() {
            "loggedIn" => "logged in",
            "needsLogin" => "needs login",
            _ => "not required",
        };
        let mut line = format!("{:<20} {state}", s.server);
        if let Some(at) = s.expires_at {
            line += &if at > now { format!(" · expires in {}s", at - now) } else { " · expired".to_owned() };
        }
        if !s.scopes.is_empty() {
            line += &format!(" · scopes {}", s.scopes.join(" "));
        }
        if let Some(issuer) = &s.issuer {
            line += &format!(" · issuer {issuer}");
        }
        say!("{line}");
    }
    Ok(Outcome::Ok)
}

pub async fn logout(common: Common, server: &str) -> anyhow::Result<Outcome> {
    let out = client(&common).await?.auth_logout(server).await?;
    if common.json {
        print_json(&out)?;
    } else if out.revoked {
        say!("Logged out of {server}: the tokens were revoked and forgotten.");
    } else {
        say!(
            "Logged out of {server}: the tokens were forgotten (not revoked: the server offers no revocation, or refused)."
        );
    }
    Ok(Outcome::Ok)
}

/// Whether a graphical session is there to open a browser in.
fn desktop() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"].iter().any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()))
}

/// `$BROWSER`, else `xdg-open`; a failure only means the person opens the URL by hand.
fn open_browser(url: &str) {
    let program = std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty()).unwrap_or_else(|| "xdg-open".into());
    let spawned = std::process::Command::new(&program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        say_err!("mcpx: could not open a browser with {program}: {e}");
    }
}
