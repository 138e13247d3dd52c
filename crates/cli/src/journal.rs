//! `mcpx log` and `mcpx stats`: the daemon's call journal, read through `/v1/log` and
//! `/v1/stats`. A token holder sees its own calls; the local user, everyone's.

use std::time::{Duration, UNIX_EPOCH};

use mcpx_server::v1::{LogQuery, LogRecord, StatsQuery};

use crate::commands::{Common, Outcome, client, print_json};
use crate::terminal::say;

/// How often `--follow` asks for new records.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

#[derive(clap::Args)]
pub struct LogArgs {
    /// Only calls to this server.
    #[arg(long)]
    pub server: Option<String>,
    /// Only calls of this tool (or prompt, or resource URI), by its name on its server.
    #[arg(long)]
    pub tool: Option<String>,
    /// Only calls that did not simply succeed: tool errors, JSON-RPC errors, timeouts and
    /// refusals by a limit.
    #[arg(long)]
    pub errors: bool,
    /// Only calls made in this last stretch of time: 10m, 1h, 7d.
    #[arg(long)]
    pub since: Option<String>,
    /// At most this many calls (the newest).
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Keep printing new calls as they are journaled, until interrupted.
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Only this session's calls: a session key as `mcpx log` prints it
    /// (`session:<label>`, `process:<pid>`…). Without this flag every session's calls are shown.
    #[arg(long = "of-session", value_name = "KEY")]
    pub of_session: Option<String>,
}

#[derive(clap::Args)]
pub struct StatsArgs {
    /// Group by server, tool, client, session or instance.
    #[arg(long, default_value = "server", value_parser = ["server", "tool", "client", "session", "instance"])]
    pub by: String,
    /// Only calls made in this last stretch of time: 10m, 1h, 7d.
    #[arg(long)]
    pub since: Option<String>,
}

/// `mcpx log`: journaled calls, oldest of the newest first, then (`--follow`) new ones.
pub async fn log(common: Common, args: LogArgs) -> anyhow::Result<Outcome> {
    let mut daemon = client(&common).await?;
    let mut query = LogQuery {
        server: args.server,
        tool: args.tool,
        session: args.of_session,
        errors: args.errors,
        since: args.since,
        after: None,
        limit: Some(args.limit),
    };
    let log = daemon.log(&query).await?;
    let mut last = log.records.first().map(|r| r.id);
    // Newest first on the wire; a log reads oldest first.
    print(&common, log.records.iter().rev())?;
    if !args.follow {
        return Ok(Outcome::Ok);
    }
    query.since = None;
    loop {
        tokio::time::sleep(FOLLOW_EVERY).await;
        query.after = last.or(Some(0));
        let log = daemon.log(&query).await?;
        if let Some(newest) = log.records.first() {
            last = Some(newest.id);
        }
        print(&common, log.records.iter().rev())?;
    }
}

fn print<'a>(common: &Common, records: impl Iterator<Item = &'a LogRecord>) -> anyhow::Result<()> {
    for r in records {
        if common.json {
            println!("{}", serde_json::to_string(r)?);
        } else {
            say!("{}", line(r));
        }
    }
    Ok(())
}

/// One call on one line: when, who, what, how it ended, how long, how big.
fn line(r: &LogRecord) -> String {
    let time = humantime_ms(r.time_ms);
    let who = r.client.as_deref().unwrap_or("local");
    let session = r.session.as_deref().unwrap_or("-");
    let target = match (&r.server, &r.name) {
        (Some(server), Some(name)) => format!("{server}.{name}"),
        (None, Some(name)) => name.clone(),
        (Some(server), None) => server.clone(),
        (None, None) => "-".into(),
    };
    let outcome = match r.code {
        Some(code) => format!("{} {code}", r.outcome),
        None => r.outcome.clone(),
    };
    let script = if r.in_script { " (script)" } else { "" };
    format!(
        "{time}  {who:<16} {session:<24} {:<20} {target}{script}  {outcome}  {:.1}ms  {}B in {}B out",
        r.method, r.duration_ms, r.bytes_in, r.bytes_out
    )
}

/// `2026-12-03T19:43:20.123Z`, from milliseconds since the epoch.
fn humantime_ms(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

/// `mcpx stats`: calls, errors and duration percentiles per group.
pub async fn stats(common: Common, args: StatsArgs) -> anyhow::Result<Outcome> {
    let stats = client(&common).await?.stats(&StatsQuery { by: Some(args.by), since: args.since }).await?;
    if common.json {
        print_json(&stats)?;
        return Ok(Outcome::Ok);
    }
    say!(
        "{:<40} {:>8} {:>8} {:>7} {:>10} {:>10} {:>10}",
        stats.by,
        "calls",
        "errors",
        "err%",
        "p50 ms",
        "p95 ms",
        "p99 ms"
    );
    for g in &stats.groups {
        say!(
            "{:<40} {:>8} {:>8} {:>6.1}% {:>10.1} {:>10.1} {:>10.1}",
            g.key.as_deref().unwrap_or("-"),
            g.calls,
            g.errors,
            g.error_rate * 100.0,
            g.p50_ms,
            g.p95_ms,
            g.p99_ms
        );
    }
    if stats.dropped > 0 {
        say!("({} calls were not journaled: the journal's queue was full)", stats.dropped);
    }
    Ok(Outcome::Ok)
}
