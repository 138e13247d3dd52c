//! Scenario `exec`: what code mode costs. One sequential client over HTTP (2026-07-28)
//! to one daemon, three contenders taking turns in rounds:
//!
//! - `mcpx_call`: the `echo` call of fakemcp (stdio) through `mcpx_call`;
//! - `exec-1-call`: the same call made by an `mcpx_exec` script, which returns its result;
//! - `exec-no-call`: an `mcpx_exec` script that returns the same object itself: a fresh
//!   engine per call, and nothing else.
//!
//! All three answer with the arguments as structured content, checked on every reply.
//! `exec-1-call` minus `mcpx_call` is what a script adds to one tool call; `exec-no-call`
//! is close to the engine's start per call.

use std::time::Instant;

use serde_json::json;

use crate::http::HttpClient;
use crate::mcp::{EchoCall, Era, Route};
use crate::processes::{Binaries, Daemon, Scratch, UPSTREAM};
use crate::report::{Comparison, Run};
use crate::scenario::{Load, Tally};

#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Options {
    /// Turns each contender takes; the requests are split evenly between them.
    #[arg(long, default_value_t = 10)]
    pub rounds: usize,
    #[command(flatten)]
    pub load: Load,
}

pub fn run(binaries: &Binaries, options: &Options) -> anyhow::Result<Run> {
    let rounds = options.rounds.max(1);
    let scratch = Scratch::new("exec")?;
    let daemon = Daemon::start(binaries, &scratch, &binaries.mcpx_config())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let calls = [
        ("mcpx_call", "bench → mcpx daemon (HTTP) → mcpx_call → fakemcp (stdio)", Route::Gateway { server: UPSTREAM }),
        (
            "exec-1-call",
            "bench → mcpx daemon (HTTP) → mcpx_exec script → call() → fakemcp (stdio)",
            Route::Script { server: UPSTREAM },
        ),
        ("exec-no-call", "bench → mcpx daemon (HTTP) → mcpx_exec script that returns at once", Route::ScriptAlone),
    ];
    let timeout = options.load.timeout();
    let mut tallies: Vec<Tally> = calls.iter().map(|_| Tally::with_capacity(options.load.requests)).collect();
    let per_slice = options.load.requests.div_ceil(rounds);
    let outcome: anyhow::Result<()> = runtime.block_on(async {
        let mut client = HttpClient::connect(daemon.addr).await?;
        let mut id = 0u64;
        for (_, _, route) in &calls {
            let call = EchoCall::new(Era::Modern, *route);
            for _ in 0..options.load.warmup.min(200) {
                id += 1;
                client.call(&call, id).await??;
            }
        }
        for round in 0..rounds {
            for turn in 0..calls.len() {
                let which = (turn + round) % calls.len();
                let call = EchoCall::new(Era::Modern, calls[which].2);
                let slice_started = Instant::now();
                for _ in 0..per_slice {
                    id += 1;
                    let started = Instant::now();
                    let answer = tokio::time::timeout(timeout, client.call(&call, id)).await;
                    let answer = answer.map_err(|_| anyhow::anyhow!("no answer within {timeout:?}"))??;
                    tallies[which].count(started.elapsed(), answer);
                }
                tallies[which].elapsed += slice_started.elapsed();
            }
        }
        Ok(())
    });
    outcome?;
    let peak = daemon.peak_rss();
    daemon.stop()?;
    drop(scratch);

    let contenders = calls
        .iter()
        .zip(tallies)
        .map(|((name, path, _), tally)| tally.measured(name, path, peak.clone()))
        .collect::<Vec<_>>();
    let requests: usize = contenders.iter().map(|c| c.samples.len()).sum();
    Ok(Run {
        scenario: "exec",
        heading: format!("exec · 1 client · modern HTTP · {requests} calls in {rounds} interleaved rounds"),
        settings: json!({ "rounds": rounds, "requests": options.load.requests, "warmup": options.load.warmup.min(200) }),
        contenders,
        comparisons: vec![
            Comparison {
                baseline: "mcpx_call",
                subject: "exec-1-call",
                added_p50_target_micros: None,
                min_throughput_ratio: None,
                max_front_cpu_ratio: None,
            },
            Comparison {
                baseline: "mcpx_call",
                subject: "exec-no-call",
                added_p50_target_micros: None,
                min_throughput_ratio: None,
                max_front_cpu_ratio: None,
            },
        ],
        targets: Vec::new(),
        facts: None,
    })
}
