//! Scenario `sessions`: many agent sessions against one session-scoped upstream.
//!
//! Each of `--sessions` distinct names (in `_meta["dev.mcpx/session"]`, the first of
//! mcpx's default `transport.sessionMetaKeys`) makes one `tools/call` through a daemon whose
//! fakemcp has `scope: "session"`, so each name gets an instance of its own: the time to a
//! first reply includes starting that instance. Then the daemon's `/v1/status` must list
//! exactly one instance per name; each session calls once more (an existing instance);
//! and, with the short `pool.idleTimeout` of the bench config, the reaper must stop them
//! all. Recorded: the daemon's resident memory at start, at the baseline (after one
//! session-less warm-up call, whose instance lives only for that call), with every
//! instance up, and after the reap; so also the daemon memory each idle instance costs.
//! A second round of as many new names follows, and its reap, to tell memory the daemon
//! keeps for reuse from memory it leaks. Both rounds' first calls are `new-session` samples.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::http::HttpClient;
use crate::mcp::{EchoCall, Era, Route};
use crate::memory;
use crate::processes::{Binaries, Daemon, Scratch, UPSTREAM};
use crate::report::Run;
use crate::scenario::{Tally, in_turn};

/// The `_meta` key the sessions are named by (first of the default `sessionMetaKeys`).
pub const SESSION_META_KEY: &str = "dev.mcpx/session";
/// The targets: daemon memory per idle instance, idle daemon memory, and how
/// close to the baseline memory must come back after the reap.
pub const PER_INSTANCE_TARGET_KIB: f64 = 64.0;
pub const IDLE_RSS_TARGET_KIB: u64 = 15 * 1000 * 1000 / 1024;
pub const AFTER_REAP_TARGET_RATIO: f64 = 1.10;

#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Options {
    /// Distinct session names, one instance each.
    #[arg(long, default_value_t = 1_000)]
    pub sessions: usize,
    /// `pool.idleTimeout` of the daemon, in seconds: long enough for every session to be
    /// created before the first one is reaped.
    #[arg(long, value_name = "SECONDS", default_value_t = 20)]
    pub idle_timeout: u64,
}

/// How long the daemon's memory is left to settle after a reap before it is read: the
/// reaper gives freed memory back a tick after the last instance has stopped, so one second
/// (the old wait) could read it before or after, from run to run.
const SETTLE: Duration = Duration::from_secs(3);

/// The daemon's RSS once the reap has settled.
async fn settled(rss: &impl Fn() -> anyhow::Result<u64>) -> anyhow::Result<u64> {
    tokio::time::sleep(SETTLE).await;
    rss()
}

/// How long one request may take before the run is abandoned.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(binaries: &Binaries, options: &Options) -> anyhow::Result<Run> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let scratch = Scratch::new("sessions")?;
    let sessions = options.sessions.max(1);
    let idle_timeout = Duration::from_secs(options.idle_timeout.max(1));
    let config = json!({
        "mcpServers": {UPSTREAM: {"command": binaries.fakemcp, "scope": "session"}},
        "pool": {
            "idleTimeout": format!("{}s", idle_timeout.as_secs()),
            "maxInstancesPerServer": sessions + 16,
            "maxInstances": sessions + 16,
        },
    });
    let daemon = Daemon::start(binaries, &scratch, &config)?;
    let outcome = runtime.block_on(measure(&daemon, sessions, idle_timeout, REQUEST_TIMEOUT));
    let peak_rss = daemon.peak_rss();
    daemon.stop()?;
    drop(scratch);
    let (new, existing, facts) = outcome?;
    let measured = |name, path, tally: Tally| tally.measured(name, path, peak_rss.clone());
    Ok(Run {
        scenario: "sessions",
        heading: format!(
            "sessions · {sessions} session names · session-scoped fakemcp · idleTimeout {}s",
            idle_timeout.as_secs()
        ),
        settings: json!({
            "era": Era::Modern.label(),
            "sessions": sessions,
            "sessionMetaKey": SESSION_META_KEY,
            "idleTimeoutSeconds": idle_timeout.as_secs(),
        }),
        contenders: vec![
            measured("new-session", "first call of a session: mcpx starts its instance (fakemcp, stdio)", new),
            measured("existing", "a later call of a session whose instance is up", existing),
        ],
        comparisons: Vec::new(),
        targets: Vec::new(),
        facts: Some(facts),
    })
}

async fn measure(
    daemon: &Daemon,
    sessions: usize,
    idle_timeout: Duration,
    timeout: Duration,
) -> anyhow::Result<(Tally, Tally, Value)> {
    let addr = daemon.addr;
    let pid = daemon.pid();
    let rss = || memory::rss_kib(pid).context("reading the daemon's VmRSS");
    let mut client = HttpClient::connect(addr).await?;
    // The first request sets up what every request needs (connection, listings).
    status(&mut client).await?;
    let at_start = rss()?;
    // A session-less call: the session scope degrades to a per-call instance, which goes
    // away with the call, so the baseline has every lazy setup done and no instance.
    let warm = EchoCall::new(Era::Modern, Route::Gateway { server: UPSTREAM });
    client.call(&warm, 1).await?.context("the warm-up call")?;
    wait_for_instances(&mut client, daemon, 0, Duration::from_secs(30)).await.context("after the warm-up call")?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let baseline = rss()?;

    let calls: Vec<EchoCall> = (0..sessions)
        .map(|i| warm.clone().with_meta(SESSION_META_KEY, json!(format!("bench-session-{i:05}"))))
        .collect();
    let created = Instant::now();
    let new = pass(&mut client, &calls, 1_000, timeout).await.context("new sessions")?;
    let creation = created.elapsed();
    if creation >= idle_timeout {
        bail!(
            "creating {sessions} sessions took {creation:?}, longer than the idle timeout {idle_timeout:?}: pass a larger --idle-timeout"
        );
    }
    let listed = session_instances(&status(&mut client).await?);
    let processes = daemon.upstreams().len();
    let with_all = rss()?;
    let existing = pass(&mut client, &calls, 1_000_000, timeout).await.context("existing sessions")?;
    let last_use = Instant::now();

    // The reaper checks once a second: everything should be gone one tick after the timeout.
    let bound = idle_timeout + Duration::from_secs(60);
    wait_for_instances(&mut client, daemon, 0, bound).await.context("waiting for the reap")?;
    let reaped_after = last_use.elapsed();
    let after_reap = settled(&rss).await?;

    // The same again with new names: memory the first reap did not give back to the
    // system is either reused now (the allocator keeps it) or added to (a leak).
    let again: Vec<EchoCall> =
        (0..sessions).map(|i| warm.clone().with_meta(SESSION_META_KEY, json!(format!("bench-again-{i:05}")))).collect();
    let second = pass(&mut client, &again, 2_000_000, timeout).await.context("a second round of new sessions")?;
    let with_all_again = rss()?;
    wait_for_instances(&mut client, daemon, 0, bound).await.context("waiting for the second reap")?;
    let after_second_reap = settled(&rss).await?;
    let mut new = new;
    new.absorb(second);

    let per_instance = with_all.saturating_sub(baseline) as f64 / sessions as f64;
    let facts = json!({
        "instancesCreated": listed,
        "instancesExpected": sessions,
        "upstreamProcessesWithAll": processes,
        "createSeconds": round2(creation.as_secs_f64()),
        "reapedSecondsAfterLastUse": round2(reaped_after.as_secs_f64()),
        "rssKiB": {
            "atStart": at_start,
            "baseline": baseline,
            "withAllInstances": with_all,
            "afterReap": after_reap,
            "withAllInstancesSecondRound": with_all_again,
            "afterSecondReap": after_second_reap,
        },
        "daemonKiBPerIdleInstance": round2(per_instance),
        "afterReapToBaseline": round2(after_reap as f64 / baseline as f64),
        "targets": {
            "exactlyOneInstancePerSession": {"met": listed == sessions && processes == sessions},
            "idleRssAtMost15MB": {"kib": baseline, "met": baseline <= IDLE_RSS_TARGET_KIB},
            "perIdleInstanceAtMost64KiB": {"kib": round2(per_instance), "met": per_instance <= PER_INSTANCE_TARGET_KIB},
            "afterReapWithin10PercentOfBaseline": {"met": (after_reap as f64) <= baseline as f64 * AFTER_REAP_TARGET_RATIO},
        },
    });
    Ok((new, existing, facts))
}

/// One call per session, in order; ids start at `first_id`.
async fn pass(client: &mut HttpClient, calls: &[EchoCall], first_id: u64, timeout: Duration) -> anyhow::Result<Tally> {
    in_turn(client, calls.iter().zip(first_id..), timeout).await
}

async fn status(client: &mut HttpClient) -> anyhow::Result<Value> {
    client.get("/v1/status").await.context("GET /v1/status")
}

/// How many `session:` instances of the bench's server `/v1/status` lists.
fn session_instances(status: &Value) -> usize {
    status["instances"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["server"] == UPSTREAM && i["key"].as_str().is_some_and(|k| k.starts_with("session:")))
        .count()
}

/// Waits until the daemon lists `count` instances and runs as many upstream processes.
async fn wait_for_instances(
    client: &mut HttpClient,
    daemon: &Daemon,
    count: usize,
    bound: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + bound;
    loop {
        let listed = status(client).await?["instances"].as_array().map_or(0, Vec::len);
        let processes = daemon.upstreams().len();
        if listed == count && processes == count {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "after {bound:?} the daemon still lists {listed} instance(s) and runs {processes} upstream process(es)"
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_session_instances_of_the_bench_server_count() {
        let status = json!({"instances": [
            {"server": UPSTREAM, "key": "session:a"},
            {"server": UPSTREAM, "key": "session:b"},
            {"server": UPSTREAM, "key": "global"},
            {"server": "other", "key": "session:a"},
        ]});
        assert_eq!(session_instances(&status), 2);
        assert_eq!(session_instances(&json!({})), 0);
    }
}
