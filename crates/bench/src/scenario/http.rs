//! Scenario `http`: throughput and latency of 2026-07-28 `tools/call` over Streamable
//! HTTP at several concurrency levels, each client on its own keep-alive connection.
//!
//! Each contender is started fresh for each level (so its peak RSS belongs to that level),
//! warmed up, loaded with a fixed number of requests shared by all clients, and stopped.
//! Contenders take turns in a different order at each level.
//!
//! Today there is one contender, mcpx's usual path: `mcpx daemon` → fakemcp over stdio.
//! The zero-overhead line, fakemcp answering HTTP itself, and mcpx reaching fakemcp over
//! HTTP are the next ones: add them to [`Contender`] (start, route, processes) once
//! fakemcp has an HTTP mode, with a [`Comparison`] against the direct one. The load
//! itself ([`drive`]) does not change.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tokio::task::JoinSet;

use crate::http::HttpClient;
use crate::mcp::{EchoCall, Era, Route};
use crate::processes::{Binaries, Daemon, Scratch, UPSTREAM};
use crate::report::{Comparison, Measured, Run};
use crate::scenario::{Load, Tally};

#[derive(clap::Args, Debug, Clone)]
pub struct Options {
    /// Concurrency levels: concurrent clients (connections), one request in flight each.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 32])]
    pub clients: Vec<usize>,
    /// Threads of the bench's own runtime. One keeps the load generator to one core, so
    /// most of a small machine is left to the processes under test.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    #[command(flatten)]
    pub load: Load,
}

/// Who answers the HTTP requests.
#[derive(Debug, Clone, Copy)]
enum Contender {
    /// `mcpx daemon` (global-scope fakemcp over stdio), called through `mcpx_call`.
    McpxStdio,
}

impl Contender {
    const ALL: &[Contender] = &[Contender::McpxStdio];

    fn name(self) -> &'static str {
        match self {
            Contender::McpxStdio => "mcpx-stdio",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Contender::McpxStdio => "bench → HTTP /mcp → mcpx daemon → fakemcp (stdio)",
        }
    }

    fn route(self) -> Route<'static> {
        match self {
            Contender::McpxStdio => Route::Gateway { server: UPSTREAM },
        }
    }

    fn start(self, binaries: &Binaries, scratch: &Scratch) -> anyhow::Result<Daemon> {
        match self {
            Contender::McpxStdio => Daemon::start(binaries, scratch, &binaries.mcpx_config()),
        }
    }
}

pub fn run(binaries: &Binaries, options: &Options) -> anyhow::Result<Vec<Run>> {
    let runtime = match options.threads {
        0 | 1 => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build()?,
    };
    let mut runs = Vec::new();
    for (level, &clients) in options.clients.iter().enumerate() {
        let clients = clients.max(1);
        let mut contenders = Vec::new();
        // Rotate the order per level, so no contender always goes first.
        let count = Contender::ALL.len();
        for k in 0..count {
            let contender = Contender::ALL[(level + k) % count];
            contenders.push(measure(&runtime, binaries, contender, clients, &options.load)?);
        }
        contenders.sort_by_key(|m| Contender::ALL.iter().position(|c| c.name() == m.name));
        let requests: usize = contenders.iter().map(|c| c.samples.len()).sum();
        runs.push(Run {
            scenario: "http",
            heading: format!(
                "http · modern era · {clients} client(s) · {requests} calls · {} bench thread(s)",
                options.threads.max(1)
            ),
            settings: json!({
                "era": Era::Modern.label(),
                "clients": clients,
                "requests": options.load.requests,
                "warmup": options.load.warmup,
                "durationSeconds": options.load.duration,
                "benchThreads": options.threads.max(1),
            }),
            contenders,
            comparisons: comparisons(),
        });
    }
    Ok(runs)
}

/// Which contenders are compared, once there is more than one.
fn comparisons() -> Vec<Comparison> {
    Vec::new()
}

fn measure(
    runtime: &tokio::runtime::Runtime,
    binaries: &Binaries,
    contender: Contender,
    clients: usize,
    load: &Load,
) -> anyhow::Result<Measured> {
    let scratch = Scratch::new(&format!("http-{}-{clients}", contender.name()))?;
    let daemon = contender.start(binaries, &scratch)?;
    let call = EchoCall::new(Era::Modern, contender.route());
    let addr = daemon.addr;
    let timeout = load.timeout();
    runtime.block_on(drive(addr, &call, clients, load.warmup, None, timeout)).context("warm-up")?;
    let tally = runtime.block_on(drive(addr, &call, clients, load.requests, load.duration(), timeout))?;
    let peak_rss = daemon.peak_rss();
    daemon.stop()?;
    drop(scratch);
    Ok(Measured {
        name: contender.name(),
        path: contender.path(),
        samples: tally.samples,
        errors: tally.errors,
        first_error: tally.first_error,
        elapsed: tally.elapsed,
        peak_rss,
    })
}

/// `clients` connections to `addr` share `requests` calls, one in flight per connection,
/// until the calls are done or `budget` has passed. Connecting is not timed.
async fn drive(
    addr: SocketAddr,
    call: &EchoCall,
    clients: usize,
    requests: usize,
    budget: Option<Duration>,
    timeout: Duration,
) -> anyhow::Result<Tally> {
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        connections.push(HttpClient::connect(addr, call).await?);
    }
    let issued = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let until = budget.map(|b| started + b);
    let mut running = JoinSet::new();
    for mut connection in connections {
        let issued = Arc::clone(&issued);
        let call = call.clone();
        running.spawn(async move {
            let mut tally = Tally::with_capacity(requests / clients + 1);
            loop {
                let n = issued.fetch_add(1, Ordering::Relaxed);
                if n >= requests || until.is_some_and(|until| Instant::now() >= until) {
                    return Ok::<_, anyhow::Error>(tally);
                }
                let id = n as u64 + 1;
                let start = Instant::now();
                let outcome = tokio::time::timeout(timeout, connection.call(&call, id))
                    .await
                    .with_context(|| format!("request {id}: no answer within {timeout:?}"))?
                    .with_context(|| format!("request {id}"))?;
                tally.count(start.elapsed(), outcome);
            }
        });
    }
    let mut total = Tally::with_capacity(requests);
    while let Some(done) = running.join_next().await {
        total.absorb(done.context("a client task panicked")??);
    }
    total.elapsed = started.elapsed();
    Ok(total)
}
