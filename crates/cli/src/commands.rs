//! The commands people type at a shell: `status`, `stop`, `ls`, `call`, `search`, `ask`.
//! Each reaches the daemon's `/v1` API over the unix socket through `V1Client` (starting
//! the daemon when the command needs one), with the caller's identity as `mcpx serve`
//! would carry it.
//!
//! Exit codes: 0 ok; 1 failure or a tool result with `isError`; 2 usage; 124 timeout.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use mcpx_server::v1::{
    AbandonRequest, AnswerRequest, CallOutcome, CallRequest, Question, ToolEntry, ToolsQuery, V1Client,
};
use serde_json::{Map, Value, json};

use crate::client::Daemon;
use crate::terminal::{say, say_err, say_text};

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
            say_err!("mcpx: {message}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(e) => {
            say_err!("mcpx: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A `/v1` client as this command's caller (its session), starting a daemon if none runs.
pub(crate) async fn client(common: &Common) -> anyhow::Result<V1Client> {
    let stream = Daemon::new()?.connect_or_start(common.config.as_deref()).await?;
    Ok(V1Client::handshake(stream, common.session.clone()).await?)
}

/// What `--json` prints: the daemon's answer, pretty-printed.
pub(crate) fn print_json(body: &impl serde::Serialize) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(body)?);
    Ok(())
}

pub async fn status(common: Common) -> anyhow::Result<Outcome> {
    let daemon = Daemon::new()?;
    let Some(stream) = daemon.connect().await? else {
        if common.json {
            println!("{}", json!({ "running": false }));
        } else {
            say!("no daemon is running for {}", daemon.dir.display());
        }
        return Ok(Outcome::Ok);
    };
    let status = V1Client::handshake(stream, None).await?.status().await?;
    if common.json {
        print_json(&status)?;
        return Ok(Outcome::Ok);
    }
    let workers = if status.workers == 1 { "1 worker".to_owned() } else { format!("{} workers", status.workers) };
    say!("daemon   pid {} · {} · up {}s · {workers}", status.pid, status.url, status.uptime_ms / 1000);
    say!("socket   {}", status.socket.as_deref().unwrap_or("-"));
    say!("config   {}", status.config.as_deref().unwrap_or("(none)"));
    match status.journal_dropped {
        Some(0) => say!("journal  on"),
        Some(n) => say!("journal  on · {n} calls not journaled (its queue was full)"),
        None => say!("journal  off"),
    }
    say!("servers  {}", status.servers.len());
    for s in &status.servers {
        say!("  {:<20} scope {}", s.name, s.scope);
        if let Some(f) = &s.failing {
            let what = if f.crash_loop { "CRASHING soon after start" } else { "FAILING to start" };
            say!(
                "  {:<20} {what}: {} times in a row, next try in {}ms; last error: {}",
                "",
                f.failures,
                f.retry_in_ms,
                f.last_error
            );
        }
    }
    say!("instances {}", status.instances.len());
    for i in &status.instances {
        // An instance with no process of its own (an HTTP upstream) shows `pid null`.
        let pid = i.pid.map_or_else(|| "null".to_owned(), |pid| pid.to_string());
        say!(
            "  {:<20} {:<40} pid {pid} age {}s  idle {}s  in use {}",
            i.server,
            i.key,
            i.age_ms / 1000,
            i.idle_ms / 1000,
            i.in_use
        );
    }
    Ok(Outcome::Ok)
}

/// Asks the daemon to stop and returns once it and every child it started are gone.
pub async fn stop(common: Common, timeout: Duration) -> anyhow::Result<Outcome> {
    let daemon = Daemon::new()?;
    let Some(stream) = daemon.connect().await? else {
        say!("no daemon is running for {}", daemon.dir.display());
        return Ok(Outcome::Ok);
    };
    let pid = V1Client::handshake(stream, None).await?.stop().await?.pid as i32;
    let deadline = Instant::now() + timeout;
    // The daemon stops its upstreams before it exits, so its exit means theirs.
    while process_alive(pid) {
        if Instant::now() > deadline {
            say_err!("mcpx: the daemon (pid {pid}) is still running after {timeout:?}");
            return Ok(Outcome::TimedOut);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !common.json {
        say!("stopped the daemon (pid {pid})");
    }
    Ok(Outcome::Ok)
}

fn process_alive(pid: i32) -> bool {
    // A zombie has no cwd link: it is gone in every sense that matters here.
    std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok()
}

pub async fn list(common: Common, server: Option<String>, query: &str) -> anyhow::Result<Outcome> {
    let found = client(&common).await?.tools(&ToolsQuery { query: query.to_owned() }).await?;
    let tools: Vec<&ToolEntry> =
        found.tools.iter().filter(|t| server.as_deref().is_none_or(|s| t.server == s)).collect();
    if common.json {
        print_json(&json!({ "tools": tools, "unavailable": found.unavailable }))?;
    } else {
        for t in &tools {
            let description = t.description.as_deref().unwrap_or("").lines().next().unwrap_or("");
            say!("{}.{}  {description}", t.server, t.tool);
        }
        for u in found.unavailable.iter().flatten() {
            say_err!("mcpx: {} is unavailable: {}", u.server, u.error);
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
    let call = match call_request(target, arguments) {
        Ok(call) => call,
        Err(usage) => return Ok(usage),
    };
    let request = async { anyhow::Ok(client(&common).await?.call(&call).await?) };
    let outcome = match timeout {
        Some(limit) => match tokio::time::timeout(limit, request).await {
            Ok(answer) => answer?,
            Err(_) => {
                say_err!("mcpx: {target} did not finish within {limit:?}");
                return Ok(Outcome::TimedOut);
            }
        },
        None => request.await?,
    };
    print_call_outcome(&common, outcome)
}

/// The call `mcpx call <server>.<tool> [arguments]` names, or the usage error to print.
pub(crate) fn call_request(target: &str, arguments: Option<&str>) -> Result<CallRequest, Outcome> {
    let Some((server, tool)) = target.split_once('.').filter(|(s, t)| !s.is_empty() && !t.is_empty()) else {
        return Err(Outcome::Usage("name the tool as <server>.<tool>, e.g. time.get_current_time".into()));
    };
    let arguments = match arguments.map(serde_json::from_str::<Value>) {
        None => Map::new(),
        Some(Ok(Value::Object(arguments))) => arguments,
        Some(Ok(_)) => {
            return Err(Outcome::Usage("the arguments must be a JSON object, e.g. '{\"key\": \"value\"}'".into()));
        }
        Some(Err(e)) => return Err(Outcome::Usage(format!("the arguments are not JSON: {e}"))),
    };
    Ok(CallRequest { server: server.to_owned(), tool: tool.to_owned(), arguments: Some(arguments) })
}

/// Prints what a call (or an answered question) came to: its result, or the question it
/// is now waiting on.
pub(crate) fn print_call_outcome(common: &Common, outcome: CallOutcome) -> anyhow::Result<Outcome> {
    let result = match outcome {
        CallOutcome::Waiting(waiting) => {
            if common.json {
                print_json(&waiting)?;
            } else {
                print_question(&waiting.question);
            }
            return Ok(Outcome::Waiting);
        }
        CallOutcome::Done(result) => result,
    };
    if common.json {
        print_json(&result)?;
    } else {
        for block in result["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("text") => say_text!("{}", block["text"].as_str().unwrap_or("")),
                _ => say!("{block}"),
            }
        }
    }
    Ok(if result["isError"] == true { Outcome::Failed } else { Outcome::Ok })
}

fn print_question(question: &Question) {
    say!("{}.{} is waiting for an answer (question {}):", question.server, question.tool, question.id);
    for (key, request) in &question.input_requests {
        let params = &request["params"];
        let what = params["message"].as_str().map(str::to_owned).unwrap_or_else(|| params.to_string());
        say!("  {key}: {} — {what}", request["method"].as_str().unwrap_or("?"));
    }
    say!("answer with: {}", question.answer);
}

/// `mcpx ask ls`: the questions waiting for this session.
pub async fn ask_list(common: Common) -> anyhow::Result<Outcome> {
    let waiting = client(&common).await?.questions().await?;
    if common.json {
        print_json(&waiting)?;
        return Ok(Outcome::Ok);
    }
    if waiting.questions.is_empty() {
        say!("no question is waiting for this session");
    }
    for question in &waiting.questions {
        print_question(question);
    }
    Ok(Outcome::Ok)
}

/// `mcpx ask show <id>`: one waiting question.
pub async fn ask_show(common: Common, id: &str) -> anyhow::Result<Outcome> {
    let question = client(&common).await?.question(id).await?;
    if common.json {
        print_json(&question)?;
    } else {
        print_question(&question);
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
    let mut client = client(&common).await?;
    let asked = client.question(id).await?.input_requests;
    let keys: Vec<&str> = asked.keys().map(String::as_str).collect();
    let responses = match (answer, keys.as_slice()) {
        (Value::Object(keyed), _) if !keyed.is_empty() && keyed.keys().all(|k| asked.contains_key(k)) => keyed,
        (answer, [only]) => Map::from_iter([((*only).to_owned(), answer)]),
        _ => return Ok(Outcome::Usage(format!("answer each question by key: {}", keys.join(", ")))),
    };
    let outcome = client.answer(&AnswerRequest { id: id.to_owned(), responses }).await?;
    print_call_outcome(&common, outcome)
}

/// `mcpx ask decline <id>`: declines a form (elicitation) question; abandons any other.
pub async fn ask_decline(common: Common, id: &str) -> anyhow::Result<Outcome> {
    let mut client = client(&common).await?;
    let asked = client.question(id).await?.input_requests;
    if !asked.is_empty() && asked.values().all(|r| r["method"] == "elicitation/create") {
        let responses = asked.keys().map(|k| (k.clone(), json!({ "action": "decline" }))).collect();
        let outcome = client.answer(&AnswerRequest { id: id.to_owned(), responses }).await?;
        return print_call_outcome(&common, outcome);
    }
    client.abandon(&AbandonRequest { id: id.to_owned() }).await?;
    say!("abandoned question {id}");
    Ok(Outcome::Ok)
}

/// `mcpx config check --connect`: starts every server once, in this process (not the
/// daemon), lists what it offers as an unnamed caller would see it, and reports servers
/// that fail and names that clash. Every instance is stopped before it returns.
pub async fn check_servers(path: PathBuf) -> anyhow::Result<Outcome> {
    use mcpx_gateway::{CallContext, Gateway, Identity, Settings, Transport};
    let settings = Settings::load(Some(path))?;
    let _daemons = crate::serve::daemon_addresses(&settings);
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
        say!(
            "{}: does not start: {}",
            failure["server"].as_str().unwrap_or("?"),
            failure["error"].as_str().unwrap_or("?")
        );
        problems += 1;
    }
    say!("{} tool(s) found", found["tools"].as_array().map_or(0, Vec::len));
    for method in ["tools/list", "prompts/list", "resources/list", "resources/templates/list"] {
        if let Err(e) = gateway.handle(&ctx, method, json!({})).await {
            say!("{method}: {e}");
            problems += 1;
        }
    }
    gateway.shutdown().await;
    Ok(if problems == 0 { Outcome::Ok } else { Outcome::Failed })
}
