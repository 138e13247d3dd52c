//! Scenario `cold-start`: how soon a freshly launched process answers its first request.
//!
//! - `daemon`: from spawning `mcpx daemon --port P` (a fresh state dir each time) to its
//!   answer to a 2026-07-28 `server/discover` over HTTP. The bench tries to connect every
//!   250 µs until the port accepts, so the figure may be up to that much late.
//! - `serve`: from spawning `mcpx serve` next to a running daemon to its answer, on
//!   stdout, to a `server/discover` written to its stdin at once.
//! - `fakemcp`: the same for fakemcp over stdio: what starting any small program and
//!   answering one line costs on this machine, for scale.
//!
//! Each is launched `--launches` times, one at a time; each launch is one sample.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use crate::http::HttpClient;
use crate::mcp::{self, Era};
use crate::processes::{Binaries, Daemon, Process, Scratch, free_port};
use crate::report::{Run, Target};
use crate::scenario::Tally;
use crate::stdio::StdioClient;

/// The target: the daemon answers its first `server/discover` within 50 ms.
pub const DAEMON_TARGET_MICROS: f64 = 50_000.0;
/// How long a launch may take before the run is abandoned.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Options {
    /// Launches of each program.
    #[arg(long, default_value_t = 20)]
    pub launches: usize,
}

pub fn run(binaries: &Binaries, options: &Options) -> anyhow::Result<Run> {
    let launches = options.launches.max(1);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut daemon = Tally::with_capacity(launches);
    let mut serve = Tally::with_capacity(launches);
    let mut fakemcp = Tally::with_capacity(launches);
    let mut peak_daemon = Vec::new();

    let scratch = Scratch::new("cold-start-serve")?;
    let running = Daemon::start(binaries, &scratch, &binaries.mcpx_config())?;
    // Interleaved: one launch of each per turn.
    for turn in 0..launches {
        let (elapsed, peak) = launch_daemon(&runtime, binaries).with_context(|| format!("daemon launch {turn}"))?;
        daemon.count(elapsed, Ok(()));
        daemon.elapsed += elapsed;
        peak_daemon = peak;
        let elapsed = launch_stdio(binaries, &scratch, "mcpx serve", Some(&running))
            .with_context(|| format!("mcpx serve launch {turn}"))?;
        serve.count(elapsed, Ok(()));
        serve.elapsed += elapsed;
        let elapsed =
            launch_stdio(binaries, &scratch, "fakemcp", None).with_context(|| format!("fakemcp launch {turn}"))?;
        fakemcp.count(elapsed, Ok(()));
        fakemcp.elapsed += elapsed;
    }
    let serve_peak = running.peak_rss();
    running.stop()?;
    drop(scratch);

    let measured = |name, path, tally: Tally, peak_rss| tally.measured(name, path, peak_rss);
    Ok(Run {
        scenario: "cold-start",
        heading: format!("cold-start · {launches} launches each · time to first answer (calls/s: launches/s)"),
        settings: json!({"launches": launches, "era": Era::Modern.label(), "request": "server/discover"}),
        contenders: vec![
            measured("daemon", "spawn mcpx daemon → first server/discover answered over HTTP", daemon, peak_daemon),
            measured("serve", "spawn mcpx serve (daemon running) → first answer on stdout", serve, serve_peak),
            measured("fakemcp", "spawn fakemcp (stdio) → first answer on stdout, for scale", fakemcp, Vec::new()),
        ],
        comparisons: Vec::new(),
        // With 20 launches, p99 is the slowest launch: every launch must make it.
        targets: vec![Target {
            contender: "daemon",
            min_calls_per_second: None,
            max_p99_micros: Some(DAEMON_TARGET_MICROS),
        }],
        facts: None,
    })
}

/// Peak RSS (KiB) by process name, where it could be read.
type PeakRss = Vec<(String, Option<u64>)>;

/// One daemon launch to its first answered `server/discover`; the daemon's peak RSS.
fn launch_daemon(runtime: &tokio::runtime::Runtime, binaries: &Binaries) -> anyhow::Result<(Duration, PeakRss)> {
    let scratch = Scratch::new("cold-start-daemon")?;
    let port = free_port()?;
    let started = Instant::now();
    let daemon = Daemon::launch(binaries, &scratch, &binaries.mcpx_config(), port)?;
    let answered = runtime.block_on(async {
        let deadline = started + LAUNCH_TIMEOUT;
        let mut client = loop {
            match HttpClient::connect(daemon.addr).await {
                Ok(client) => break client,
                Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_micros(250)).await,
                Err(e) => return Err(e.context("the daemon never accepted a connection")),
            }
        };
        let reply = client.modern("server/discover", mcp::discover_request(1)).await?;
        mcp::check_id(&reply, 1)?;
        if reply["result"]["supportedVersions"].as_array().is_none_or(Vec::is_empty) {
            bail!("server/discover named no versions: {reply}");
        }
        Ok(started.elapsed())
    });
    let elapsed = match answered {
        Ok(elapsed) => elapsed,
        Err(e) => return Err(e.context(daemon.process().log_tail())),
    };
    let peak = daemon.peak_rss();
    daemon.stop()?;
    Ok((elapsed, peak))
}

/// One launch of a stdio program (`mcpx serve` next to `daemon`, else fakemcp) to its
/// answer to a `server/discover` written at once.
fn launch_stdio(
    binaries: &Binaries,
    scratch: &Scratch,
    role: &str,
    daemon: Option<&Daemon>,
) -> anyhow::Result<Duration> {
    let mut command = match daemon {
        Some(daemon) => {
            let mut command = Command::new(&binaries.mcpx);
            command.arg("serve").env("MCPX_STATE_DIR", daemon.state_dir());
            command
        }
        None => Command::new(&binaries.fakemcp),
    };
    let started = Instant::now();
    let mut process = Process::spawn_stdio(role, &mut command, scratch)?;
    let (stdin, stdout) = process.take_stdio()?;
    let mut io = StdioClient::new(stdin, stdout);
    let reply = io
        .request(&mcp::discover_request(1), 1, started + LAUNCH_TIMEOUT)
        .with_context(|| format!("{role}: no answer; its stderr:\n{}", process.log_tail()))?;
    let elapsed = started.elapsed();
    mcp::check_id(&reply, 1).with_context(|| role.to_owned())?;
    drop(io);
    if !process.stop() {
        bail!("{role} did not exit when its stdin closed, nor on SIGTERM");
    }
    Ok(elapsed)
}
