//! Scenario `http`: throughput and latency of `tools/call` over Streamable HTTP at several
//! concurrency levels, each client on its own keep-alive connection, against every
//! contender at once.
//!
//! The contenders, all in front of the same fakemcp build:
//! - `direct-http`: fakemcp answering HTTP itself, the zero-overhead line;
//! - `mcpx-http`: `mcpx daemon` → fakemcp over HTTP (the same upstream transport as the direct line);
//! - `mcpx-stdio`: `mcpx daemon` → fakemcp over stdio, mcpx's usual path;
//! - `mcpx-exposed`, `mcpx-exposed-prefixed`: the same, calling the tool mcpx lists flat
//!   (`expose`) by its own name (`"exposePrefix": "never"`) or as `fake__echo`, as most
//!   clients do, instead of through `mcpx_call`; and `mcpx-legacy-exposed[-prefixed]`, the
//!   same from 2025-11-25 sessions. Their fakemcp lets a 2026 `tools/list` be kept ten
//!   minutes (`--list-ttl-ms`), as a server whose tools do not change would;
//! - `mcp-proxy`: mcp-proxy `--stateless` → fakemcp over stdio (2025-11-25 calls: it speaks no 2026);
//! - `fastmcp`: `fastmcp run` of an `mcpServers` file → fakemcp over stdio.
//!
//! The peers run only when their programs are given (`--mcp-proxy`, `--fastmcp`). At each
//! level every contender is started fresh (so its peak RSS belongs to that level) and all
//! of them stay up while they take turns in rounds, in a different order each round, so
//! whatever else the machine does lands on all of them alike; a throughput ratio's target
//! is judged on the median of its rounds' ratios, and their range is reported beside it.
//! The Python peers are far slower, so they get fewer requests (`--peer-requests`).

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;
use tokio::task::JoinSet;

use crate::http::HttpClient;
use crate::mcp::{EchoCall, Era, Route};
use crate::memory;
use crate::processes::{Binaries, Daemon, HttpServer, Scratch, UPSTREAM, children_of, free_port};
use crate::report::{Comparison, CpuTime, Measured, Run, Target, Turn};
use crate::scenario::{Load, Tally};

/// fakemcp's `echo` as mcpx exposes it with the default prefix: `<server>__<tool>`.
const PREFIXED_ECHO: &str = "fake__echo";

/// The concurrency level the HTTP targets are set at.
pub const TARGET_CLIENTS: usize = 32;

/// Turns each contender takes per level, unless told otherwise.
pub const ROUNDS: usize = 8;

#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Options {
    /// Concurrency levels: concurrent clients (connections), one request in flight each.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 32, 128])]
    pub clients: Vec<usize>,
    /// Threads of the bench's own runtime. One keeps the load generator to one core, so
    /// most of a small machine is left to the processes under test.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Turns each contender takes per level; its requests are split evenly between them.
    /// A ratio target is judged on the median of the rounds' ratios.
    #[arg(long, default_value_t = ROUNDS)]
    pub rounds: usize,
    /// Measured requests per level for each peer gateway (they answer hundreds, not
    /// thousands, of calls a second).
    #[arg(long, default_value_t = 2_000)]
    pub peer_requests: usize,
    #[command(flatten)]
    pub load: Load,
}

/// Who answers the HTTP requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    Direct,
    McpxHttp,
    McpxStdio,
    /// mcpx's stdio path for a handshake-era caller: a 2025-11-25 session per connection.
    McpxLegacy,
    /// mcpx's stdio path to an exposed tool by its own name, then as `fake__echo`; in the
    /// 2026 era, then from 2025-11-25 sessions.
    McpxExposed,
    McpxExposedPrefixed,
    McpxLegacyExposed,
    McpxLegacyExposedPrefixed,
    McpProxy,
    Fastmcp,
}

impl Contender {
    const ALL: &[Contender] = &[
        Contender::Direct,
        Contender::McpxHttp,
        Contender::McpxStdio,
        Contender::McpxLegacy,
        Contender::McpxExposed,
        Contender::McpxExposedPrefixed,
        Contender::McpxLegacyExposed,
        Contender::McpxLegacyExposedPrefixed,
        Contender::McpProxy,
        Contender::Fastmcp,
    ];

    fn name(self) -> &'static str {
        match self {
            Contender::Direct => "direct-http",
            Contender::McpxHttp => "mcpx-http",
            Contender::McpxStdio => "mcpx-stdio",
            Contender::McpxLegacy => "mcpx-legacy",
            Contender::McpxExposed => "mcpx-exposed",
            Contender::McpxExposedPrefixed => "mcpx-exposed-prefixed",
            Contender::McpxLegacyExposed => "mcpx-legacy-exposed",
            Contender::McpxLegacyExposedPrefixed => "mcpx-legacy-exposed-prefixed",
            Contender::McpProxy => "mcp-proxy",
            Contender::Fastmcp => "fastmcp",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Contender::Direct => "bench → fakemcp (HTTP)",
            Contender::McpxHttp => "bench → HTTP /mcp → mcpx daemon → fakemcp (HTTP)",
            Contender::McpxStdio => "bench → HTTP /mcp → mcpx daemon → fakemcp (stdio)",
            Contender::McpxLegacy => {
                "bench → HTTP /mcp, a 2025-11-25 session per connection → mcpx daemon → fakemcp (stdio)"
            }
            Contender::McpxExposed => {
                "bench → HTTP /mcp, echo exposed under its own name → mcpx daemon → fakemcp (stdio)"
            }
            Contender::McpxExposedPrefixed => "bench → HTTP /mcp, fake__echo exposed → mcpx daemon → fakemcp (stdio)",
            Contender::McpxLegacyExposed => {
                "bench → HTTP /mcp, a 2025-11-25 session per connection, echo exposed under its own name → mcpx daemon → fakemcp (stdio)"
            }
            Contender::McpxLegacyExposedPrefixed => {
                "bench → HTTP /mcp, a 2025-11-25 session per connection, fake__echo exposed → mcpx daemon → fakemcp (stdio)"
            }
            Contender::McpProxy => "bench → mcp-proxy 0.13 --stateless (2025-11-25) → fakemcp (stdio)",
            Contender::Fastmcp => "bench → fastmcp 4 run → fakemcp (stdio)",
        }
    }

    /// mcp-proxy 0.13 is built on the 2025 SDK: it gets sessionless 2025-11-25 calls.
    fn era(self) -> Era {
        match self {
            Contender::McpProxy
            | Contender::McpxLegacy
            | Contender::McpxLegacyExposed
            | Contender::McpxLegacyExposedPrefixed => Era::Legacy,
            _ => Era::Modern,
        }
    }

    /// Whether each connection opens a 2025-11-25 session before its calls.
    fn in_session(self) -> bool {
        matches!(self, Contender::McpxLegacy | Contender::McpxLegacyExposed | Contender::McpxLegacyExposedPrefixed)
    }

    fn route(self) -> Route<'static> {
        match self {
            Contender::McpxHttp | Contender::McpxStdio | Contender::McpxLegacy => Route::Gateway { server: UPSTREAM },
            Contender::McpxExposed | Contender::McpxLegacyExposed => Route::Exposed { name: "echo" },
            Contender::McpxExposedPrefixed | Contender::McpxLegacyExposedPrefixed => {
                Route::Exposed { name: PREFIXED_ECHO }
            }
            _ => Route::Direct,
        }
    }

    fn is_peer(self) -> bool {
        matches!(self, Contender::McpProxy | Contender::Fastmcp)
    }

    fn available(self, binaries: &Binaries) -> bool {
        match self {
            Contender::McpProxy => binaries.mcp_proxy.is_some(),
            Contender::Fastmcp => binaries.fastmcp.is_some(),
            _ => true,
        }
    }

    fn start(self, binaries: &Binaries, scratch: &Scratch) -> anyhow::Result<Running> {
        let fakemcp = binaries.fakemcp.display().to_string();
        Ok(match self {
            Contender::Direct => Running::Server(HttpServer::fakemcp(binaries, scratch, "fakemcp")?),
            Contender::McpxStdio | Contender::McpxLegacy => {
                Running::Daemon(Daemon::start(binaries, scratch, &binaries.mcpx_config())?, None)
            }
            Contender::McpxExposed
            | Contender::McpxExposedPrefixed
            | Contender::McpxLegacyExposed
            | Contender::McpxLegacyExposedPrefixed => {
                let own_names = matches!(self, Contender::McpxExposed | Contender::McpxLegacyExposed);
                let mut config = json!({
                    "mcpServers": {UPSTREAM: {"command": fakemcp, "args": ["--list-ttl-ms", "600000"]}},
                    "expose": [UPSTREAM],
                });
                if own_names {
                    config["exposePrefix"] = json!("never");
                }
                Running::Daemon(Daemon::start(binaries, scratch, &config)?, None)
            }
            Contender::McpxHttp => {
                let upstream = HttpServer::fakemcp(binaries, scratch, "fakemcp (HTTP upstream)")?;
                let url = format!("http://{}/mcp", upstream.addr);
                let config = json!({"mcpServers": {UPSTREAM: {"url": url}}});
                Running::Daemon(Daemon::start(binaries, scratch, &config)?, Some(upstream))
            }
            Contender::McpProxy => {
                let program = binaries.mcp_proxy.as_ref().context("no --mcp-proxy")?;
                let port = free_port()?;
                let mut command = Command::new(program);
                command.args(["--stateless", "--host", "127.0.0.1", "--port", &port.to_string()]).args([
                    "--log-level",
                    "WARNING",
                    "--",
                    &fakemcp,
                ]);
                Running::Server(HttpServer::spawn("mcp-proxy", &mut command, scratch, port)?)
            }
            Contender::Fastmcp => {
                let program = binaries.fastmcp.as_ref().context("no --fastmcp")?;
                let config = scratch.path().join("mcp.json");
                let servers = json!({"mcpServers": {UPSTREAM: {"command": fakemcp}}});
                std::fs::write(&config, serde_json::to_vec_pretty(&servers)?)?;
                let port = free_port()?;
                let mut command = Command::new(program);
                command
                    .arg("run")
                    .arg(&config)
                    .args(["--transport", "http", "--host", "127.0.0.1", "--port", &port.to_string()])
                    .args(["--log-level", "WARNING", "--no-banner", "--skip-env"]);
                Running::Server(HttpServer::spawn("fastmcp", &mut command, scratch, port)?)
            }
        })
    }
}

/// A started contender: a daemon (with its HTTP upstream, for `mcpx-http`) or a server.
enum Running {
    Daemon(Daemon, Option<HttpServer>),
    Server(HttpServer),
}

impl Running {
    fn addr(&self) -> SocketAddr {
        match self {
            Running::Daemon(daemon, _) => daemon.addr,
            Running::Server(server) => server.addr,
        }
    }

    fn peak_rss(&self) -> Vec<(String, Option<u64>)> {
        match self {
            Running::Daemon(daemon, upstream) => {
                let mut figures = daemon.peak_rss();
                figures.extend(upstream.iter().flat_map(HttpServer::peak_rss));
                figures
            }
            Running::Server(server) => server.peak_rss(),
        }
    }

    /// CPU time used so far by the front process and by every process under test: the
    /// daemon or server, what it started and a separate upstream (counted while they
    /// live, so read it before stopping them).
    fn cpu_time(&self) -> CpuTime {
        let (front, behind) = match self {
            Running::Daemon(daemon, upstream) => (daemon.pid(), upstream.as_ref().map(HttpServer::pid)),
            Running::Server(server) => (server.pid(), None),
        };
        let mut all: Vec<u32> =
            [front].into_iter().chain(behind).flat_map(|pid| children_of(pid).into_iter().chain([pid])).collect();
        all.sort_unstable();
        all.dedup();
        let front = memory::cpu_time(front).unwrap_or_default();
        CpuTime { front, all: all.into_iter().filter_map(memory::cpu_time).sum() }
    }

    fn stop(self) -> anyhow::Result<()> {
        match self {
            Running::Daemon(daemon, upstream) => {
                daemon.stop()?;
                upstream.map(HttpServer::stop).transpose()?;
            }
            Running::Server(server) => server.stop()?,
        }
        Ok(())
    }
}

pub fn run(binaries: &Binaries, options: &Options) -> anyhow::Result<Vec<Run>> {
    let runtime = match options.threads {
        0 | 1 => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(n).enable_all().build()?,
    };
    let contenders: Vec<Contender> = Contender::ALL.iter().copied().filter(|c| c.available(binaries)).collect();
    let mut runs = Vec::new();
    for (level, &clients) in options.clients.iter().enumerate() {
        let clients = clients.max(1);
        let measured = measure_level(&runtime, binaries, &contenders, level, clients, options)
            .with_context(|| format!("{clients} client(s)"))?;
        let requests: usize = measured.iter().map(|c| c.samples.len()).sum();
        runs.push(Run {
            scenario: "http",
            heading: format!(
                "http · {clients} client(s) · {requests} calls in {} interleaved rounds · {} bench thread(s)",
                options.rounds.max(1),
                options.threads.max(1)
            ),
            settings: json!({
                "era": "modern (mcpx-legacy: a 2025-11-25 session per connection; mcp-proxy: 2025-11-25, sessionless)",
                "clients": clients,
                "requests": options.load.requests,
                "peerRequests": options.peer_requests,
                "rounds": options.rounds.max(1),
                "warmup": options.load.warmup,
                "durationSeconds": options.load.duration,
                "benchThreads": options.threads.max(1),
            }),
            contenders: measured,
            comparisons: comparisons(clients),
            targets: targets(clients),
            facts: None,
        });
    }
    Ok(runs)
}

/// (b) against (a), and (c) against each peer; with the targets at 32 clients.
fn comparisons(clients: usize) -> Vec<Comparison> {
    let at_target = clients == TARGET_CLIENTS;
    let compare = |baseline, subject, ratio: f64| Comparison {
        baseline,
        subject,
        added_p50_target_micros: None,
        min_throughput_ratio: at_target.then_some(ratio),
        max_front_cpu_ratio: None,
    };
    // Exposed tools against mcpx_call, in each era: as fast, and within 5% of the daemon's
    // CPU per call.
    let exposed = |baseline, subject| Comparison {
        max_front_cpu_ratio: at_target.then_some(1.05),
        ..compare(baseline, subject, 0.95)
    };
    vec![
        compare("direct-http", "mcpx-http", 0.7),
        compare("mcp-proxy", "mcpx-stdio", 20.0),
        compare("fastmcp", "mcpx-stdio", 20.0),
        exposed("mcpx-stdio", "mcpx-exposed"),
        exposed("mcpx-stdio", "mcpx-exposed-prefixed"),
        exposed("mcpx-legacy", "mcpx-legacy-exposed"),
        exposed("mcpx-legacy", "mcpx-legacy-exposed-prefixed"),
        // The handshake era on both sides, for what most clients speak today; no target.
        Comparison {
            baseline: "mcp-proxy",
            subject: "mcpx-legacy",
            added_p50_target_micros: None,
            min_throughput_ratio: None,
            max_front_cpu_ratio: None,
        },
    ]
}

/// mcpx's own targets at 32 clients: ≥ 10,000 calls/s with p99 ≤ 10 ms (global instance).
fn targets(clients: usize) -> Vec<Target> {
    if clients != TARGET_CLIENTS {
        return Vec::new();
    }
    ["mcpx-stdio", "mcpx-http"]
        .into_iter()
        .map(|name| Target { contender: name, min_calls_per_second: Some(10_000.0), max_p99_micros: Some(10_000.0) })
        .collect()
}

/// Starts every contender, warms each, then measures them in interleaved rounds.
fn measure_level(
    runtime: &tokio::runtime::Runtime,
    binaries: &Binaries,
    contenders: &[Contender],
    level: usize,
    clients: usize,
    options: &Options,
) -> anyhow::Result<Vec<Measured>> {
    let load = &options.load;
    let rounds = options.rounds.max(1);
    let timeout = load.timeout();
    let scratches = contenders
        .iter()
        .map(|c| Scratch::new(&format!("http-{}-{clients}", c.name())))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut sides = Vec::new();
    for (&contender, scratch) in contenders.iter().zip(&scratches) {
        let running = contender.start(binaries, scratch).with_context(|| format!("starting {}", contender.name()))?;
        let call = EchoCall::new(contender.era(), contender.route());
        let requests = if contender.is_peer() { options.peer_requests } else { load.requests };
        sides.push(Side {
            contender,
            running,
            call,
            requests,
            tally: Tally::with_capacity(requests),
            cpu: CpuTime::default(),
            turns: Vec::with_capacity(rounds),
        });
    }
    for side in &sides {
        let warmup = if side.contender.is_peer() { load.warmup.min(side.requests / 4) } else { load.warmup };
        let warming = async {
            let connections = connect(side.running.addr(), side.contender.in_session(), clients).await?;
            drive(connections, &side.call, warmup.max(clients), None, timeout).await
        };
        runtime.block_on(warming).with_context(|| format!("{}: warm-up", side.contender.name()))?;
    }
    let budget = load.duration().map(|d| d / rounds as u32);
    for round in 0..rounds {
        // A different contender goes first in each round and at each level.
        let count = sides.len();
        for k in 0..count {
            let side = &mut sides[(level + round + k) % count];
            let slice = side.requests.div_ceil(rounds);
            let name = side.contender.name();
            // Connecting, and opening a session on each connection, is neither timed nor
            // counted in the CPU per call.
            let connections = runtime
                .block_on(connect(side.running.addr(), side.contender.in_session(), clients))
                .with_context(|| format!("{name}: round {round}"))?;
            let cpu_before = side.running.cpu_time();
            let tally = runtime
                .block_on(drive(connections, &side.call, slice, budget, timeout))
                .with_context(|| format!("{name}: round {round}"))?;
            let cpu = side.running.cpu_time().since(cpu_before);
            side.cpu += cpu;
            side.turns.push(Turn { calls: tally.samples.len(), elapsed: tally.elapsed, cpu: Some(cpu) });
            side.tally.absorb(tally);
        }
    }
    let mut measured = Vec::new();
    for side in sides {
        let peak_rss = side.running.peak_rss();
        side.running.stop().with_context(|| format!("stopping {}", side.contender.name()))?;
        let mut figures = side.tally.measured(side.contender.name(), side.contender.path(), peak_rss);
        figures.cpu = Some(side.cpu);
        figures.turns = side.turns;
        measured.push(figures);
    }
    drop(scratches);
    Ok(measured)
}

/// One contender at one level.
struct Side {
    contender: Contender,
    running: Running,
    call: EchoCall,
    requests: usize,
    tally: Tally,
    /// CPU time its processes used while measured.
    cpu: CpuTime,
    /// Its turn in each round so far.
    turns: Vec<Turn>,
}

/// `clients` connections to `addr`, each with a 2025-11-25 session opened on it when
/// `in_session`.
async fn connect(addr: SocketAddr, in_session: bool, clients: usize) -> anyhow::Result<Vec<HttpClient>> {
    let mut connections = Vec::with_capacity(clients);
    for _ in 0..clients {
        let mut connection = HttpClient::connect(addr).await?;
        if in_session {
            connection.open_session().await.context("opening a 2025-11-25 session")?;
        }
        connections.push(connection);
    }
    Ok(connections)
}

/// The `connections` share `requests` calls, one in flight on each, until the calls are
/// done or `budget` has passed.
async fn drive(
    connections: Vec<HttpClient>,
    call: &EchoCall,
    requests: usize,
    budget: Option<Duration>,
    timeout: Duration,
) -> anyhow::Result<Tally> {
    let clients = connections.len().max(1);
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
