//! `mcpx call --task` and `mcpx task ls|get|wait|cancel`: tool calls run as tasks, for a
//! caller that would rather poll than hold a command open (`/v1/tasks`).
//!
//! A task belongs to the session that started it, as questions do (`mcpx ask`): name one
//! (`--session` or `$MCPX_SESSION_ID`) to reach a task from a later command.

use std::time::{Duration, Instant};

use mcpx_server::v1::{TaskQuery, TaskStarted};
use serde_json::Value;

use crate::commands::{Common, Outcome, call_request, client, print_call_outcome, print_json};
use crate::terminal::{say, say_err, say_text};

/// How long one `GET /v1/tasks/{id}` waits for the task to end.
const WAIT_EACH: Duration = Duration::from_secs(25);

/// `mcpx call --task`: starts the call as a task and prints its id (exit 0), or the
/// result when it answered at once.
pub async fn start(common: Common, target: &str, arguments: Option<&str>) -> anyhow::Result<Outcome> {
    let call = match call_request(target, arguments) {
        Ok(call) => call,
        Err(usage) => return Ok(usage),
    };
    match client(&common).await?.start_task(&call).await? {
        TaskStarted::Done(result) => print_call_outcome(&common, mcpx_server::v1::CallOutcome::Done(result)),
        TaskStarted::Task(task) => {
            if common.json {
                print_json(&task)?;
            } else {
                say!("{}", task["taskId"].as_str().unwrap_or_default());
            }
            if common.session.is_none() {
                say_err!(
                    "mcpx: this task belongs to this command's own session; name one (--session or MCPX_SESSION_ID) to reach it later"
                );
            }
            Ok(Outcome::Ok)
        }
    }
}

/// `mcpx task ls`: the session's tasks, one a line (id, status, last update).
pub async fn list(common: Common) -> anyhow::Result<Outcome> {
    let listed = client(&common).await?.tasks().await?;
    if common.json {
        print_json(&listed)?;
        return Ok(Outcome::Ok);
    }
    if listed.tasks.is_empty() {
        say!("no task belongs to this session");
    }
    for task in &listed.tasks {
        let field = |name: &str| task[name].as_str().unwrap_or("-").to_owned();
        say!("{}  {}  {}", field("taskId"), field("status"), field("lastUpdatedAt"));
    }
    Ok(Outcome::Ok)
}

/// `mcpx task get`: where the task stands; once it ended, its result (exit as `mcpx call`).
pub async fn get(common: Common, id: &str) -> anyhow::Result<Outcome> {
    let task = client(&common).await?.task(id, &TaskQuery::default()).await?;
    show(&common, &task)
}

/// `mcpx task wait`: waits for the task to end (exit 124 past `timeout`) and prints its
/// result, exiting as `mcpx call` does.
pub async fn wait(common: Common, id: &str, timeout: Option<Duration>) -> anyhow::Result<Outcome> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut client = client(&common).await?;
    loop {
        let left = deadline.map_or(WAIT_EACH, |d| d.saturating_duration_since(Instant::now()).min(WAIT_EACH));
        let query = TaskQuery { wait_ms: Some(u64::try_from(left.as_millis()).unwrap_or(u64::MAX)) };
        let task = client.task(id, &query).await?;
        if ended(&task) {
            return show(&common, &task);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            say_err!("mcpx: task {id} did not end within {:?}", timeout.unwrap_or_default());
            return Ok(Outcome::TimedOut);
        }
    }
}

/// `mcpx task cancel`: cancels the task and prints where it stands.
pub async fn cancel(common: Common, id: &str) -> anyhow::Result<Outcome> {
    let task = client(&common).await?.cancel_task(id).await?;
    if common.json {
        print_json(&task)?;
    } else {
        say!("{}", task["status"].as_str().unwrap_or_default());
    }
    Ok(Outcome::Ok)
}

fn ended(task: &Value) -> bool {
    matches!(task["status"].as_str(), Some("completed" | "failed" | "cancelled"))
}

/// Prints a task: its status while it runs; its result (or error) once it ended, with
/// `mcpx call`'s exit status (cancelled and failed are failures).
fn show(common: &Common, task: &Value) -> anyhow::Result<Outcome> {
    if common.json {
        print_json(task)?;
    } else if let Some(result) = task.get("result") {
        for block in result["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("text") => say_text!("{}", block["text"].as_str().unwrap_or("")),
                _ => say!("{block}"),
            }
        }
    } else if let Some(error) = task.get("error") {
        say_err!("mcpx: the task failed: {}", error["message"].as_str().unwrap_or("(no message)"));
    } else {
        let message = task["statusMessage"].as_str().map(|m| format!(": {m}")).unwrap_or_default();
        say!("{}{message}", task["status"].as_str().unwrap_or("unknown"));
    }
    Ok(match task["status"].as_str() {
        Some("completed") if task.pointer("/result/isError") != Some(&Value::Bool(true)) => Outcome::Ok,
        Some("completed" | "failed" | "cancelled") => Outcome::Failed,
        _ => Outcome::Ok,
    })
}
