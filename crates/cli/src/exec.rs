//! `mcpx exec` (run an `mcpx_exec` script from the shell) and `mcpx artifact ls|get|rm`
//! (what this session's scripts kept). Same engine, limits and session rules as a host's
//! `mcpx_exec` call: the daemon runs the script.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use mcpx_server::v1::{CallOutcome, ExecRequest};

use crate::commands::{Common, Outcome, client, print_call_outcome, print_json};
use crate::terminal::{say, say_err};

/// `mcpx exec '<script>'` or `mcpx exec -f file.js`; `-` reads the script from stdin.
pub async fn exec(
    common: Common,
    script: Option<String>,
    file: Option<&Path>,
    timeout_ms: Option<u64>,
) -> anyhow::Result<Outcome> {
    let script = match (script, file) {
        (Some(_), Some(_)) => return Ok(Outcome::Usage("give the script inline or with -f, not both".into())),
        (Some(s), None) if s == "-" => {
            std::io::read_to_string(std::io::stdin()).context("reading the script from stdin")?
        }
        (Some(s), None) => s,
        (None, Some(path)) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        (None, None) => {
            return Ok(Outcome::Usage("give a script: mcpx exec 'return 1 + 1' or mcpx exec -f script.js".into()));
        }
    };
    let outcome = client(&common).await?.exec(&ExecRequest { script, timeout_ms }).await?;
    if let CallOutcome::Done(result) = &outcome
        && result["structuredContent"]["error"]["limit"] == "timeoutMs"
    {
        let message = result["structuredContent"]["error"]["message"].as_str().unwrap_or("the script timed out");
        say_err!("mcpx: {message}");
        return Ok(Outcome::TimedOut);
    }
    print_call_outcome(&common, outcome)
}

/// `mcpx artifact ls`: this session's artifacts.
pub async fn list(common: Common) -> anyhow::Result<Outcome> {
    let kept = client(&common).await?.artifacts().await?;
    if common.json {
        print_json(&kept)?;
        return Ok(Outcome::Ok);
    }
    if kept.artifacts.is_empty() {
        say!("this session has no artifacts");
    }
    for a in &kept.artifacts {
        say!("{}  {} B  {:<24} {}", a.uri, a.size, a.mime_type, a.name);
    }
    Ok(Outcome::Ok)
}

/// `mcpx artifact get <uri|id> [-o file]`: the bytes, to stdout or a file.
pub async fn get(common: Common, artifact: &str, output: Option<&Path>) -> anyhow::Result<Outcome> {
    let id = id_of(artifact);
    let bytes = client(&common).await?.artifact(id).await?;
    match output {
        Some(path) => std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?,
        None => std::io::stdout().write_all(&bytes)?,
    }
    Ok(Outcome::Ok)
}

/// `mcpx artifact rm <uri|id>`.
pub async fn remove(common: Common, artifact: &str) -> anyhow::Result<Outcome> {
    let id = id_of(artifact);
    client(&common).await?.remove_artifact(id).await?;
    say!("removed {artifact}");
    Ok(Outcome::Ok)
}

fn id_of(artifact: &str) -> &str {
    artifact.strip_prefix("mcpx://artifacts/").unwrap_or(artifact)
}
