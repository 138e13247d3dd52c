//! The commands people type at a shell: `status`, `stop`, `ls`, `call`, `search`. Each
//! reaches the daemon's `/v1` API over the unix socket (starting the daemon when the
//! command needs one), with the caller's identity as `mcpx serve` would carry it.
//!
//! Exit codes: 0 ok; 1 failure or a tool result with `isError`; 2 usage; 124 timeout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use crate::client::{self, Daemon};

pub const EXIT_TIMEOUT: u8 = 124;
/// The call is waiting for an answer from the caller (`mcpx ask`).
pub const EXIT_WAITING: u8 = 75;
pub const EXIT_USAGE: u8 = 2;

#[derive(clap::Args, Clone)]
pub struct Common {
    /// Config file for a daemon started on demand.
    #[arg(long, global = true)]
    pub(crate) config: Option<PathBuf>,
    /// Session name (default: $MCPX_SESSION_ID, else this command's own process, which no
    /// later command can name).
    #[arg(long, global = true, env = "MCPX_SESSION_ID")]
    pub(crate) session: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

pub enum Outcome {
    Ok,
    Failed,
    TimedOut,
    /// An upstream asked a question; it waits for `mcpx ask answer`.
    Waiting,
    /// The command line was wrong: exit 2, like clap's own usage errors.
    Usage(String),
}

pub fn run(f: impl AsyncFnOnce() -> anyhow::Result<Outcome>) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime starts");
    match runtime.block_on(f()) {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::FAILURE,
        Ok(Outcome::TimedOut) => ExitCode::from(EXIT_TIMEOUT),
        Ok(Outcome::Waiting) => ExitCode::from(EXIT_WAITING),
        Ok(Outcome::Usage(message)) => {
            eprintln!("mcpx: {message}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(e) => {
            eprintln!("mcpx: {e:#}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) async fn api(
    common: &Common,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(u16, Value)> {
    let (status, bytes) = api_bytes(common, method, path, body).await?;
    Ok((status, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
}

/// A `/v1` request as this command's caller; the body as it came.
pub(crate) async fn api_bytes(
    common: &Common,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> anyhow::Result<(u16, hyper::body::Bytes)> {
    let stream = Daemon::new()?.connect_or_start(common.config.as_deref()).await?;
    let mut headers = Vec::new();
    if let Some(session) = &common.session {
        headers.push((mcpx_server::api::SESSION_HEADER, session.clone()));
    }
    let (status, body) = client::request_bytes(stream, method, path, &headers, body).await?;
    Ok((status.as_u16(), body))
}

/// `GET path` as this command's caller: its JSON body, or, with `--json`, `None` once the
/// body is printed as it came.
pub(crate) async fn get_unless_printed(common: &Common, path: &str) -> anyhow::Result<Option<Value>> {
    let (status, body) = api(common, "GET", path, None).await?;
    if status != 200 {
        return Err(api_error(status, &body));
    }
    if common.json {
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(None);
    }
    Ok(Some(body))
}

pub(crate) fn api_error(status: u16, body: &Value) -> anyhow::Error {
    match body["error"]["message"].as_str() {
        Some(message) => anyhow::anyhow!("{message}"),
        None => anyhow::anyhow!("the daemon answered {status}"),
    }
}

pub async fn status(common: Common) -> anyhow::Result<Outcome> {
    let daemon = Daemon::new()?;
    let Some(stream) = daemon.connect().await? else {
        if common.json {
            println!("{}", json!({ "running": false }));
        } else {
            println!("no daemon is running for {}", daemon.dir.display());
        }
        return Ok(Outcome::Ok);
    };
    let (status, body) = client::request(stream, "GET", "/v1/status", &[], None).await?;
    if status.as_u16() != 200 {
        return Err(api_error(status.as_u16(), &body));
    }
    if common.json {
        println!("{}", serde_json::to_string_pretty(&body)?);
        return Ok(Outcome::Ok);
    }
    println!(
        "daemon   pid {} · {} · up {}s",
        body["pid"],
        body["url"].as_str().unwrap_or("?"),
        body["uptimeMs"].as_u64().unwrap_or(0) / 1000
    );
    println!("socket   {}", body["socket"].as_str().unwrap_or("-"));
    println!("config   {}", body["config"].as_str().unwrap_or("(none)"));
    println!("servers  {}", body["servers"].as_array().map_or(0, Vec::len));
    for s in body["servers"].as_array().into_iter().flatten() {
        println!("  {:<20} scope {}", s["name"].as_str().unwrap_or("?"), s["scope"].as_str().unwrap_or("?"));
        if let Some(f) = s.get("failing") {
            let what = if f["crashLoop"] == true { "CRASHING soon after start" } else { "FAILING to start" };
            println!(
                "  {:<20} {what}: {} times in a row, next try in {}ms; last error: {}",
                "",
                f["failures"],
                f["retryInMs"],
                f["lastError"].as_str().unwrap_or("?")
            );
        }
    }
    let instances = body["instances"].as_array().cloned().unwrap_or_default();
    println!("instances {}", instances.len());
    for i in instances {
        println!(
            "  {:<20} {:<40} pid {:<8} age {}s  idle {}s  in use {}",
            i["server"].as_str().unwrap_or("?"),
            i["key"].as_str().unwrap_or("?"),
            i["pid"],
            i["ageMs"].as_u64().unwrap_or(0) / 1000,
            i["idleMs"].as_u64().unwrap_or(0) / 1000,
            i["inUse"]
        );
    }
    Ok(Outcome::Ok)
}

/// Asks the daemon to stop and returns once it and every child it started are gone.
pub async fn stop(common: Common, timeout: Duration) -> anyhow::Result<Outcome> {
    let daemon = Daemon::new()?;
    let Some(stream) = daemon.connect().await? else {
        println!("no daemon is running for {}", daemon.dir.display());
        return Ok(Outcome::Ok);
    };
    let (status, body) = client::request(stream, "POST", "/v1/stop", &[], None).await?;
    if status.as_u16() != 202 {
        return Err(api_error(status.as_u16(), &body));
    }
    let pid = body["pid"].as_u64().context("the daemon did not say its pid")? as i32;
    let deadline = Instant::now() + timeout;
    // The daemon stops its upstreams before it exits, so its exit means theirs.
    while process_alive(pid) {
        if Instant::now() > deadline {
            eprintln!("mcpx: the daemon (pid {pid}) is still running after {timeout:?}");
            return Ok(Outcome::TimedOut);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !common.json {
        println!("stopped the daemon (pid {pid})");
    }
    Ok(Outcome::Ok)
}

fn process_alive(pid: i32) -> bool {
    // A zombie has no cwd link: it is gone in every sense that matters here.
    std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok()
}

pub async fn list(common: Common, server: Option<String>, query: &str) -> anyhow::Result<Outcome> {
    let path = format!("/v1/tools?query={}", percent_encode(query));
    let (status, body) = api(&common, "GET", &path, None).await?;
    if status != 200 {
        return Err(api_error(status, &body));
    }
    let tools: Vec<&Value> = body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| server.as_deref().is_none_or(|s| t["server"] == s))
        .collect();
    if common.json {
        println!("{}", serde_json::to_string_pretty(&json!({ "tools": tools, "unavailable": body["unavailable"] }))?);
    } else {
        for t in &tools {
            let description = t["description"].as_str().unwrap_or("").lines().next().unwrap_or("");
            println!("{}.{}  {description}", t["server"].as_str().unwrap_or("?"), t["tool"].as_str().unwrap_or("?"));
        }
        for u in body["unavailable"].as_array().into_iter().flatten() {
            eprintln!(
                "mcpx: {} is unavailable: {}",
                u["server"].as_str().unwrap_or("?"),
                u["error"].as_str().unwrap_or("?")
            );
        }
    }
    Ok(Outcome::Ok)
}

pub async fn call(
    common: Common,
    target: &str,
    arguments: Option<&str>,
    timeout: Option<Duration>,
) -> anyhow::Result<Outcome> {
    let Some((server, tool)) = target.split_once('.').filter(|(s, t)| !s.is_empty() && !t.is_empty()) else {
        return Ok(Outcome::Usage("name the tool as <server>.<tool>, e.g. time.get_current_time".into()));
    };
    let arguments: Value = match arguments.map(serde_json::from_str::<Value>) {
        None => json!({}),
        Some(Ok(v @ Value::Object(_))) => v,
        Some(Ok(_)) => {
            return Ok(Outcome::Usage("the arguments must be a JSON object, e.g. '{\"key\": \"value\"}'".into()));
        }
        Some(Err(e)) => return Ok(Outcome::Usage(format!("the arguments are not JSON: {e}"))),
    };
    let body = json!({ "server": server, "tool": tool, "arguments": arguments });
    let request = api(&common, "POST", "/v1/call", Some(body));
    let (status, result) = match timeout {
        Some(limit) => match tokio::time::timeout(limit, request).await {
            Ok(answer) => answer?,
            Err(_) => {
                eprintln!("mcpx: {target} did not finish within {limit:?}");
                return Ok(Outcome::TimedOut);
            }
        },
        None => request.await?,
    };
    print_call_outcome(&common, status, &result)
}

/// Prints what a call (or an answered question) came to: its result, or the question it
/// is now waiting on.
pub(crate) fn print_call_outcome(common: &Common, status: u16, result: &Value) -> anyhow::Result<Outcome> {
    if status == 202 && result["status"] == "input_required" {
        if common.json {
            println!("{}", serde_json::to_string_pretty(result)?);
        } else {
            print_question(&result["question"]);
        }
        return Ok(Outcome::Waiting);
    }
    if status != 200 {
        return Err(api_error(status, result));
    }
    if common.json {
        println!("{}", serde_json::to_string_pretty(result)?);
    } else {
        for block in result["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("text") => println!("{}", block["text"].as_str().unwrap_or("")),
                _ => println!("{block}"),
            }
        }
    }
    Ok(if result["isError"] == true { Outcome::Failed } else { Outcome::Ok })
}

fn print_question(question: &Value) {
    println!(
        "{}.{} is waiting for an answer (question {}):",
        question["server"].as_str().unwrap_or("?"),
        question["tool"].as_str().unwrap_or("?"),
        question["id"].as_str().unwrap_or("?")
    );
    for (key, request) in question["inputRequests"].as_object().into_iter().flatten() {
        let params = &request["params"];
        let what = params["message"].as_str().map(str::to_owned).unwrap_or_else(|| params.to_string());
        println!("  {key}: {} — {what}", request["method"].as_str().unwrap_or("?"));
    }
    println!("answer with: {}", question["answer"].as_str().unwrap_or("mcpx ask answer <id> '<json>'"));
}

/// `mcpx ask ls`: the questions waiting for this session.
pub async fn ask_list(common: Common) -> anyhow::Result<Outcome> {
    let Some(body) = get_unless_printed(&common, "/v1/ask").await? else { return Ok(Outcome::Ok) };
    let questions = body["questions"].as_array().cloned().unwrap_or_default();
    if questions.is_empty() {
        println!("no question is waiting for this session");
    }
    for question in &questions {
        print_question(question);
    }
    Ok(Outcome::Ok)
}

/// `mcpx ask show <id>`: one waiting question.
pub async fn ask_show(common: Common, id: &str) -> anyhow::Result<Outcome> {
    if let Some(body) = get_unless_printed(&common, &format!("/v1/ask?id={}", percent_encode(id))).await? {
        print_question(&body);
    }
    Ok(Outcome::Ok)
}

/// `mcpx ask answer <id> <json>`: answers and carries the call on. The JSON maps each
/// question key to its answer; with one question, the bare answer will do.
pub async fn ask_answer(common: Common, id: &str, answer: &str) -> anyhow::Result<Outcome> {
    let answer: Value = match serde_json::from_str(answer) {
        Ok(v) => v,
        Err(e) => return Ok(Outcome::Usage(format!("the answer is not JSON: {e}"))),
    };
    let (status, shown) = api(&common, "GET", &format!("/v1/ask?id={}", percent_encode(id)), None).await?;
    if status != 200 {
        return Err(api_error(status, &shown));
    }
    let keys: Vec<String> = shown["inputRequests"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    let keyed = answer.as_object().is_some_and(|m| !m.is_empty() && m.keys().all(|k| keys.contains(k)));
    let responses = match (keyed, keys.as_slice()) {
        (true, _) => answer,
        (false, [only]) => json!({ only.clone(): answer }),
        (false, _) => return Ok(Outcome::Usage(format!("answer each question by key: {}", keys.join(", ")))),
    };
    let (status, result) =
        api(&common, "POST", "/v1/ask/answer", Some(json!({ "id": id, "responses": responses }))).await?;
    print_call_outcome(&common, status, &result)
}

/// `mcpx ask decline <id>`: declines a form (elicitation) question; abandons any other.
pub async fn ask_decline(common: Common, id: &str) -> anyhow::Result<Outcome> {
    let (status, shown) = api(&common, "GET", &format!("/v1/ask?id={}", percent_encode(id)), None).await?;
    if status != 200 {
        return Err(api_error(status, &shown));
    }
    let requests = shown["inputRequests"].as_object().cloned().unwrap_or_default();
    if !requests.is_empty() && requests.values().all(|r| r["method"] == "elicitation/create") {
        let responses: serde_json::Map<String, Value> =
            requests.keys().map(|k| (k.clone(), json!({ "action": "decline" }))).collect();
        let (status, result) =
            api(&common, "POST", "/v1/ask/answer", Some(json!({ "id": id, "responses": responses }))).await?;
        return print_call_outcome(&common, status, &result);
    }
    let (status, body) = api(&common, "POST", "/v1/ask/abandon", Some(json!({ "id": id }))).await?;
    if status != 200 {
        return Err(api_error(status, &body));
    }
    println!("abandoned question {id}");
    Ok(Outcome::Ok)
}

pub(crate) fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `mcpx config check --connect`: starts every server once, in this process (not the
/// daemon), lists what it offers as an unnamed caller would see it, and reports servers
/// that fail and names that clash. Every instance is stopped before it returns.
pub async fn check_servers(path: PathBuf) -> anyhow::Result<Outcome> {
    use mcpx_gateway::{CallContext, Gateway, Identity, Settings, Transport};
    let settings = Settings::load(Some(path))?;
    let gateway = Gateway::new(settings);
    let ctx = CallContext::new(
        Identity::resolve(None, &[], &Transport::default()),
        mcpx_protocol::Revision::LATEST_MODERN,
        json!({}),
    );
    let mut problems = 0;
    // The search lists every server's tools, and names those that would not start.
    let search =
        gateway.handle(&ctx, "tools/call", json!({ "name": "mcpx_search", "arguments": { "query": "" } })).await;
    let found = search.map(|a| a.result["structuredContent"].clone()).unwrap_or_default();
    for failure in found["unavailable"].as_array().into_iter().flatten() {
        println!(
            "{}: does not start: {}",
            failure["server"].as_str().unwrap_or("?"),
            failure["error"].as_str().unwrap_or("?")
        );
        problems += 1;
    }
    println!("{} tool(s) found", found["tools"].as_array().map_or(0, Vec::len));
    for method in ["tools/list", "prompts/list", "resources/list", "resources/templates/list"] {
        if let Err(e) = gateway.handle(&ctx, method, json!({})).await {
            println!("{method}: {e}");
            problems += 1;
        }
    }
    gateway.shutdown().await;
    Ok(if problems == 0 { Outcome::Ok } else { Outcome::Failed })
}
