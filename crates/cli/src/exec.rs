//! `mcpx exec` (run an `mcpx_exec` script from the shell) and `mcpx artifact ls|get|rm`
//! (what this session's scripts kept). Same engine, limits and session rules as a host's
//! `mcpx_exec` call: the daemon runs the script.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};

use crate::commands::{
    Common, Outcome, api, api_bytes, api_error, get_unless_printed, percent_encode, print_call_outcome,
};

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
    let mut body = json!({ "script": script });
    if let Some(ms) = timeout_ms {
        body["timeoutMs"] = ms.into();
    }
    let (status, result) = api(&common, "POST", "/v1/exec", Some(body)).await?;
    if status == 200 && result["structuredContent"]["error"]["limit"] == "timeoutMs" {
        let message = result["structuredContent"]["error"]["message"].as_str().unwrap_or("the script timed out");
        eprintln!("mcpx: {message}");
        return Ok(Outcome::TimedOut);
    }
    print_call_outcome(&common, status, &result)
}

/// `mcpx artifact ls`: this session's artifacts.
pub async fn list(common: Common) -> anyhow::Result<Outcome> {
    let Some(body) = get_unless_printed(&common, "/v1/artifacts").await? else { return Ok(Outcome::Ok) };
    let artifacts = body["artifacts"].as_array().cloned().unwrap_or_default();
    if artifacts.is_empty() {
        println!("this session has no artifacts");
    }
    for a in artifacts {
        println!(
            "{}  {:>9} B  {:<24} {}",
            a["uri"].as_str().unwrap_or("?"),
            a["size"],
            a["mimeType"].as_str().unwrap_or("?"),
            a["name"].as_str().unwrap_or("?")
        );
    }
    Ok(Outcome::Ok)
}

/// `mcpx artifact get <uri|id> [-o file]`: the bytes, to stdout or a file.
pub async fn get(common: Common, artifact: &str, output: Option<&Path>) -> anyhow::Result<Outcome> {
    let id = id_of(artifact);
    let (status, bytes) = api_bytes(&common, "GET", &format!("/v1/artifacts/{}", percent_encode(id)), None).await?;
    if status != 200 {
        return Err(api_error(status, &serde_json::from_slice(&bytes).unwrap_or(Value::Null)));
    }
    match output {
        Some(path) => std::fs::write(path, &bytes).with_context(|| format!("writing {}", path.display()))?,
        None => std::io::stdout().write_all(&bytes)?,
    }
    Ok(Outcome::Ok)
}

/// `mcpx artifact rm <uri|id>`.
pub async fn remove(common: Common, artifact: &str) -> anyhow::Result<Outcome> {
    let id = id_of(artifact);
    let (status, body) = api(&common, "DELETE", &format!("/v1/artifacts/{}", percent_encode(id)), None).await?;
    if status != 204 {
        return Err(api_error(status, &body));
    }
    println!("removed {artifact}");
    Ok(Outcome::Ok)
}

fn id_of(artifact: &str) -> &str {
    artifact.strip_prefix("mcpx://artifacts/").unwrap_or(artifact)
}
