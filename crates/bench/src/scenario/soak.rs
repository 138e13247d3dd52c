//! Scenario `soak`: mcpx under a long, mixed load with upstream crashes, checked for
//! leaks and for answers that cross sessions. A program people run, not a test
//! and not part of `all`: it takes ten minutes by default.
//!
//! `--clients` HTTP clients (200), each on its own keep-alive connection, share
//! `--sessions` session names (50, in `_meta["dev.mcpx/session"]`; client `i` is session
//! `i % sessions`), against one daemon whose fakemcp has `scope: "session"` and is exposed
//! flat, so every session owns one instance. For `--duration` seconds (600) each client
//! sends one 2026-07-28 request after another, picked at random: `echo`, `whoami`, `meta`,
//! `slow` and `fail` through `mcpx_call`, `tools/list`, and `resources/read` of
//! fakemcp's `fake://meta`. Every `--crash-every` seconds (3) one session, picked at
//! random, calls fakemcp's `crash` tool: its instance exits mid-call, failing that call
//! and any other in flight on it, and the session's next call starts a new one.
//!
//! Every answer is checked. Echo must echo, `slow` must have slept, `fail` must be a tool
//! error with its message, the listing must hold the session's exposed tools. Across
//! sessions: the instance id `whoami` reports must never reach two sessions, and the
//! invocation context the upstream received (`meta`, and the resource) must name the
//! caller's session and the instance key `session:<name>`; any other answer is a
//! cross-session observation. A failed call is counted by kind; failures that follow an
//! injected crash (the instance exited; its restart is backed off) are expected, every
//! other failure and every wrong answer is an error of the run (exit status 1).
//!
//! Every `--sample-every` seconds the daemon's resident memory (`VmRSS`), its open file
//! descriptors (`/proc/<pid>/fd`) and its upstream processes are sampled. After the daemon
//! is stopped, any process still running in the scenario's directory (which every process
//! it started, and theirs, inherit as cwd) is a process left behind.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::task::JoinSet;

use crate::http::HttpClient;
use crate::latency::{Samples, round};
use crate::mcp::MODERN_VERSION;
use crate::memory;
use crate::processes::{Binaries, Daemon, Scratch, UPSTREAM, open_fds, processes_in, signal};
use crate::report::{Measured, Run};
use crate::scenario::Tally;
use crate::scenario::sessions::SESSION_META_KEY;

#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Options {
    /// Concurrent clients, one connection and one request in flight each.
    #[arg(long, default_value_t = 200)]
    pub clients: usize,
    /// Session names the clients are spread over (one upstream instance each).
    #[arg(long, default_value_t = 50)]
    pub sessions: usize,
    /// How long the load runs, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    pub duration: f64,
    /// Seconds between injected upstream crashes (0: none).
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    pub crash_every: f64,
    /// Seconds between samples of the daemon's memory, descriptors and upstreams.
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub sample_every: f64,
    /// A request unanswered this long counts as failed (kind "no answer") and its client
    /// reconnects.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
    /// Seed of the random choice of requests and crash victims.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// What `slow` is asked to sleep, in milliseconds.
const SLOW_MS: u64 = 25;

/// The requests of the mix, with how many in a hundred are of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Echo,
    Whoami,
    Meta,
    Slow,
    Fail,
    ToolsList,
    ReadMeta,
}

impl Op {
    const MIX: [(Op, u64); 7] = [
        (Op::Echo, 25),
        (Op::Whoami, 20),
        (Op::Meta, 15),
        (Op::Slow, 10),
        (Op::Fail, 10),
        (Op::ToolsList, 10),
        (Op::ReadMeta, 10),
    ];

    fn index(self) -> usize {
        Op::MIX.iter().position(|(op, _)| *op == self).expect("every op is in the mix")
    }

    fn name(self) -> &'static str {
        match self {
            Op::Echo => "echo",
            Op::Whoami => "whoami",
            Op::Meta => "meta",
            Op::Slow => "slow",
            Op::Fail => "fail",
            Op::ToolsList => "tools/list",
            Op::ReadMeta => "resources/read",
        }
    }

    fn path(self) -> &'static str {
        match self {
            Op::Echo => "mcpx_call fake.echo: the arguments come back unchanged",
            Op::Whoami => "mcpx_call fake.whoami: the instance id is the session's own",
            Op::Meta => "mcpx_call fake.meta: the invocation context names the caller's session",
            Op::Slow => "mcpx_call fake.slow (25 ms)",
            Op::Fail => "mcpx_call fake.fail: a tool error with the message sent",
            Op::ToolsList => "tools/list: gateway tools and the session's fake__* tools",
            Op::ReadMeta => "resources/read mcpx://fake/fake://meta: the context names the caller's session",
        }
    }

    fn pick(random: u64) -> Op {
        let total: u64 = Op::MIX.iter().map(|(_, w)| w).sum();
        let mut n = random % total;
        for (op, weight) in Op::MIX {
            if n < weight {
                return op;
            }
            n -= weight;
        }
        unreachable!("n < total")
    }
}

/// A small deterministic generator (xorshift64*): the mix needs no more.
struct Random(u64);

impl Random {
    fn new(seed: u64) -> Random {
        // splitmix64 of the seed, so neighbouring seeds give unrelated streams (never 0).
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Random((z ^ (z >> 31)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn session_name(index: usize) -> String {
    format!("soak-{index:03}")
}

/// Why a request failed, as counted in `failedByKind`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// The session's instance exited under the call (an injected crash).
    UpstreamExited,
    /// A new instance of the server is not started yet (start or crash-loop backoff).
    Backoff,
    InstanceLimit,
    CallsPerClient,
    UpstreamTimeout,
    /// The bench waited `--timeout` in vain.
    NoAnswer,
    /// The connection failed (refused, closed, HTTP error).
    Connection,
    /// Answered, but not what the request asks for.
    WrongAnswer,
    /// An answer that belongs to another session.
    CrossSession,
    /// Any other JSON-RPC error.
    Other,
}

impl Kind {
    fn label(&self) -> &'static str {
        match self {
            Kind::UpstreamExited => "upstream exited (after an injected crash)",
            Kind::Backoff => "restart backed off (after an injected crash)",
            Kind::InstanceLimit => "instance limit",
            Kind::CallsPerClient => "limits.maxCallsPerClient",
            Kind::UpstreamTimeout => "upstream did not answer in time",
            Kind::NoAnswer => "no answer within --timeout",
            Kind::Connection => "connection failed",
            Kind::WrongAnswer => "wrong answer",
            Kind::CrossSession => "cross-session answer",
            Kind::Other => "other error",
        }
    }

    /// Failures an injected crash explains.
    fn expected(&self) -> bool {
        matches!(self, Kind::UpstreamExited | Kind::Backoff)
    }

    /// The kind of a JSON-RPC error's message, as mcpx words them.
    fn of_error(message: &str) -> Kind {
        if message.contains("tries again in") {
            Kind::Backoff
        } else if message.contains(" exited") {
            Kind::UpstreamExited
        } else if message.contains("pool.maxInstances") {
            Kind::InstanceLimit
        } else if message.contains("limits.maxCallsPerClient") {
            Kind::CallsPerClient
        } else if message.contains("did not answer") {
            Kind::UpstreamTimeout
        } else {
            Kind::Other
        }
    }
}

/// A failed request: its kind and what it said.
struct Failure {
    kind: Kind,
    detail: String,
}

impl Failure {
    fn new(kind: Kind, detail: impl Into<String>) -> Failure {
        Failure { kind, detail: detail.into() }
    }
}

/// What all clients saw, merged.
#[derive(Default)]
struct Seen {
    /// Which session each instance id (from `whoami`) was first seen by.
    owners: HashMap<String, usize>,
    cross_session: usize,
    /// The first few cross-session observations, for the report.
    cross_examples: Vec<String>,
}

/// One client's figures.
struct ClientTally {
    ops: Vec<Tally>,
    failed: BTreeMap<Kind, usize>,
    examples: BTreeMap<Kind, String>,
}

impl ClientTally {
    fn new() -> ClientTally {
        ClientTally {
            ops: Op::MIX.iter().map(|_| Tally::default()).collect(),
            failed: BTreeMap::new(),
            examples: BTreeMap::new(),
        }
    }

    fn count(&mut self, op: Op, latency: Duration, outcome: Result<(), Failure>) {
        let tally = &mut self.ops[op.index()];
        match outcome {
            Ok(()) => tally.samples.record(latency),
            Err(failure) => {
                if !failure.kind.expected() {
                    tally.errors += 1;
                    tally.first_error.get_or_insert_with(|| format!("{}: {}", failure.kind.label(), failure.detail));
                }
                *self.failed.entry(failure.kind.clone()).or_default() += 1;
                self.examples.entry(failure.kind).or_insert(failure.detail);
            }
        }
    }

    fn absorb(&mut self, other: ClientTally) {
        for (mine, theirs) in self.ops.iter_mut().zip(other.ops) {
            mine.absorb(theirs);
        }
        for (kind, n) in other.failed {
            *self.failed.entry(kind).or_default() += n;
        }
        for (kind, example) in other.examples {
            self.examples.entry(kind).or_insert(example);
        }
    }
}

/// One sample of the daemon over time.
#[derive(Clone, Copy)]
struct Sample {
    seconds: f64,
    rss_kib: u64,
    fds: usize,
    upstreams: usize,
}

pub fn run(binaries: &Binaries, options: &Options) -> anyhow::Result<Run> {
    let clients = options.clients.max(1);
    let sessions = options.sessions.clamp(1, clients);
    let duration = Duration::from_secs_f64(options.duration.max(1.0));
    let scratch = Scratch::new("soak")?;
    let config = json!({
        "mcpServers": {UPSTREAM: {"command": binaries.fakemcp, "scope": "session"}},
        "expose": [UPSTREAM],
        "pool": {"maxInstancesPerServer": sessions + 16, "maxInstances": sessions + 16},
    });
    let daemon = Daemon::start(binaries, &scratch, &config)?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let outcome = runtime.block_on(soak(&daemon, clients, sessions, duration, options));
    let peak_rss = daemon.peak_rss().into_iter().take(1).collect::<Vec<_>>();
    let stopped = daemon.halt();
    // Whatever the daemon's stop missed, anywhere below the scenario's directory.
    std::thread::sleep(Duration::from_millis(500));
    let left = processes_in(scratch.path());
    // These run in the bench's own scratch dir.
    for &pid in &left {
        signal(pid, rustix::process::Signal::KILL);
    }
    drop(scratch);
    let (tally, seen, samples, crashes, elapsed) = outcome?;

    let mut all = Samples::default();
    for op in &tally.ops {
        all.extend(op.samples.clone());
    }
    let overall = all.summary();
    let completed = all.len();
    let failed: usize = tally.failed.values().sum();
    let unexpected: usize = tally.failed.iter().filter(|(k, _)| !k.expected()).map(|(_, n)| n).sum();
    // "first" is the daemon before any load; "warm" once the load has run a while (a
    // tenth of the run, at most a minute): flat means "last" stays near "warm".
    let warm_at = (elapsed.as_secs_f64() / 10.0).min(60.0);
    let series = |pick: fn(&Sample) -> f64| {
        let values: Vec<f64> = samples.iter().map(pick).collect();
        let warm = samples.iter().find(|s| s.seconds >= warm_at).map(pick);
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        let min = values.iter().copied().fold(f64::MAX, f64::min);
        json!({"first": values.first(), "warm": warm, "last": values.last(), "min": min, "max": max})
    };
    let facts = json!({
        "seconds": round(elapsed.as_secs_f64()),
        "callsCompleted": completed,
        "callsFailed": failed,
        "unexpectedFailures": unexpected,
        "failedByKind": tally.failed.iter().map(|(k, n)| (k.label().to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "failureExamples": tally.examples.iter().map(|(k, e)| (k.label().to_owned(), json!(e))).collect::<serde_json::Map<_, _>>(),
        "latencyMicrosAll": overall.to_json(),
        "crashesInjected": crashes.injected,
        "crashesThatExitedTheInstance": crashes.exited,
        "crashOtherAnswer": crashes.other_answer,
        "instancesSeen": seen.owners.len(),
        "crossSessionObservations": seen.cross_session,
        "crossSessionExamples": seen.cross_examples,
        "daemonRssKiB": series(|s| s.rss_kib as f64),
        "daemonOpenFds": series(|s| s.fds as f64),
        "upstreamProcesses": series(|s| s.upstreams as f64),
        "daemonNeededSigkill": stopped.needed_sigkill.is_some(),
        "processesOutlivingTheDaemon": stopped.outlived.len(),
        "processesLeftAfterStop": left.len(),
        "samples": samples.iter().map(|s| json!([round(s.seconds), s.rss_kib, s.fds, s.upstreams])).collect::<Vec<_>>(),
        "samplesAre": "[seconds, daemon VmRSS KiB, daemon open fds, upstream processes]",
    });
    let mut contenders: Vec<Measured> = Op::MIX
        .iter()
        .zip(tally.ops)
        .map(|((op, _), tally)| Measured {
            name: op.name(),
            path: op.path(),
            samples: tally.samples,
            errors: tally.errors,
            first_error: tally.first_error,
            elapsed,
            peak_rss: peak_rss.clone(),
            cpu: None,
            turns: Vec::new(),
        })
        .collect();
    // What was left behind, and answers that crossed sessions, fail the run.
    let leaks = stopped.outlived.len() + left.len() + usize::from(stopped.needed_sigkill.is_some());
    if leaks > 0 {
        contenders[0].errors += leaks;
        contenders[0]
            .first_error
            .get_or_insert_with(|| format!("{leaks} process(es) outlived the daemon or needed SIGKILL"));
    }
    Ok(Run {
        scenario: "soak",
        heading: format!(
            "soak · {clients} clients · {sessions} sessions · {:.0} s · a crash every {} s · errors: unexpected failures and wrong answers",
            duration.as_secs_f64(),
            options.crash_every
        ),
        settings: json!({
            "era": "modern",
            "clients": clients,
            "sessions": sessions,
            "sessionMetaKey": SESSION_META_KEY,
            "durationSeconds": duration.as_secs_f64(),
            "crashEverySeconds": options.crash_every,
            "sampleEverySeconds": options.sample_every,
            "timeoutSeconds": options.timeout,
            "seed": options.seed,
            "mix": Op::MIX.iter().map(|(op, w)| (op.name().to_owned(), json!(w))).collect::<serde_json::Map<_, _>>(),
        }),
        contenders,
        comparisons: Vec::new(),
        targets: Vec::new(),
        facts: Some(facts),
    })
}

#[derive(Default, Clone)]
struct Crashes {
    injected: usize,
    exited: usize,
    /// The first answer to a crash call that was not the instance's exit.
    other_answer: Option<String>,
}

type Outcome = (ClientTally, Seen, Vec<Sample>, Crashes, Duration);

async fn soak(
    daemon: &Daemon,
    clients: usize,
    sessions: usize,
    duration: Duration,
    options: &Options,
) -> anyhow::Result<Outcome> {
    let addr = daemon.addr;
    let pid = daemon.pid();
    let timeout = Duration::from_secs_f64(options.timeout.max(0.1));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let started = Instant::now();
    let until = started + duration;

    let mut tasks = JoinSet::new();
    for client in 0..clients {
        let seen = Arc::clone(&seen);
        let mut random = Random::new(options.seed.wrapping_mul(1_000_003).wrapping_add(client as u64));
        tasks.spawn(async move {
            let session = client % sessions;
            let mut tally = ClientTally::new();
            let mut connection: Option<HttpClient> = None;
            let mut id = 0u64;
            while Instant::now() < until {
                id += 1;
                let op = Op::pick(random.next());
                let begun = Instant::now();
                let outcome = match connection.as_mut() {
                    Some(c) => request(c, op, session, client, id, timeout, &seen).await,
                    None => match HttpClient::connect(addr).await {
                        Ok(c) => request(connection.insert(c), op, session, client, id, timeout, &seen).await,
                        Err(e) => Err(Failure::new(Kind::Connection, format!("{e:#}"))),
                    },
                };
                if matches!(&outcome, Err(f) if matches!(f.kind, Kind::Connection | Kind::NoAnswer)) {
                    // The connection is in an unknown state: start afresh.
                    connection = None;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                tally.count(op, begun.elapsed(), outcome);
            }
            tally
        });
    }

    let crasher = (options.crash_every > 0.0).then(|| {
        let every = Duration::from_secs_f64(options.crash_every);
        let mut random = Random::new(options.seed ^ 0xC0A5);
        tokio::spawn(async move {
            let mut crashes = Crashes::default();
            let mut client = None;
            let mut next = Instant::now() + every;
            while next < until {
                tokio::time::sleep_until(next.into()).await;
                next += every;
                let session = (random.next() % sessions as u64) as usize;
                crashes.injected += 1;
                if client.is_none() {
                    client = HttpClient::connect(addr).await.ok();
                }
                let Some(c) = client.as_mut() else { continue };
                let body = tool_call(1_000_000_000 + crashes.injected as u64, session, "crash", json!({}));
                match tokio::time::timeout(
                    Duration::from_secs(30),
                    c.modern_named("tools/call", Some("mcpx_call"), body),
                )
                .await
                {
                    Ok(Ok(reply)) => {
                        let message = reply["error"]["message"].as_str().unwrap_or_default();
                        if Kind::of_error(message) == Kind::UpstreamExited {
                            crashes.exited += 1;
                        } else {
                            crashes.other_answer.get_or_insert_with(|| reply.to_string());
                        }
                    }
                    outcome => {
                        crashes.other_answer.get_or_insert_with(|| format!("{outcome:?}"));
                        client = None;
                    }
                }
            }
            crashes
        })
    });

    let sample_every = Duration::from_secs_f64(options.sample_every.max(0.1));
    let sampler = tokio::spawn(async move {
        let mut samples = Vec::new();
        let mut next = Instant::now();
        let mut reported = Instant::now();
        loop {
            let upstreams = crate::processes::children_of(pid).len();
            if let (Some(rss_kib), Some(fds)) = (memory::rss_kib(pid), open_fds(pid)) {
                samples.push(Sample { seconds: started.elapsed().as_secs_f64(), rss_kib, fds, upstreams });
            }
            if reported.elapsed() >= Duration::from_secs(60) {
                reported = Instant::now();
                if let Some(s) = samples.last() {
                    eprintln!(
                        "mcpx-bench soak: {:.0} s, daemon {} KiB, {} fds, {} upstreams",
                        s.seconds, s.rss_kib, s.fds, s.upstreams
                    );
                }
            }
            next += sample_every;
            if next >= until {
                return samples;
            }
            tokio::time::sleep_until(next.into()).await;
        }
    });

    let mut total = ClientTally::new();
    while let Some(done) = tasks.join_next().await {
        total.absorb(done?);
    }
    let elapsed = started.elapsed();
    let crashes = match crasher {
        Some(task) => task.await?,
        None => Crashes::default(),
    };
    let mut samples = sampler.await?;
    // One last look once the load is over, so "last" is the daemon at rest.
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let (Some(rss_kib), Some(fds)) = (memory::rss_kib(pid), open_fds(pid)) {
        let upstreams = crate::processes::children_of(pid).len();
        samples.push(Sample { seconds: started.elapsed().as_secs_f64(), rss_kib, fds, upstreams });
    }
    let seen = Arc::try_unwrap(seen)
        .map_err(|_| anyhow::anyhow!("a client is still running"))?
        .into_inner()
        .expect("seen lock");
    Ok((total, seen, samples, crashes, elapsed))
}

/// The `_meta` of every request: the 2026 envelope and the session name.
fn meta(session: usize) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        SESSION_META_KEY: session_name(session),
    })
}

fn tool_call(id: u64, session: usize, tool: &str, arguments: Value) -> String {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "mcpx_call", "arguments": {"server": UPSTREAM, "tool": tool, "arguments": arguments}, "_meta": meta(session)},
    })
    .to_string()
}

/// Sends one request of kind `op` in `session` and checks its answer.
async fn request(
    client: &mut HttpClient,
    op: Op,
    session: usize,
    client_index: usize,
    id: u64,
    timeout: Duration,
    seen: &Mutex<Seen>,
) -> Result<(), Failure> {
    let echo = json!({"text": "soak", "client": client_index, "n": id});
    let fail_message = format!("soak fail {client_index}/{id}");
    let resource = format!("mcpx://{UPSTREAM}/fake://meta");
    let (method, name, body) = match op {
        Op::Echo => ("tools/call", Some("mcpx_call"), tool_call(id, session, "echo", echo.clone())),
        Op::Whoami => ("tools/call", Some("mcpx_call"), tool_call(id, session, "whoami", json!({}))),
        Op::Meta => ("tools/call", Some("mcpx_call"), tool_call(id, session, "meta", json!({}))),
        Op::Slow => ("tools/call", Some("mcpx_call"), tool_call(id, session, "slow", json!({"ms": SLOW_MS}))),
        Op::Fail => ("tools/call", Some("mcpx_call"), tool_call(id, session, "fail", json!({"message": fail_message}))),
        Op::ToolsList => (
            "tools/list",
            None,
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"_meta": meta(session)}}).to_string(),
        ),
        Op::ReadMeta => (
            "resources/read",
            Some(resource.as_str()),
            json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": resource, "_meta": meta(session)}})
                .to_string(),
        ),
    };
    let reply = match tokio::time::timeout(timeout, client.modern_named(method, name, body)).await {
        Err(_) => return Err(Failure::new(Kind::NoAnswer, format!("{method} unanswered after {timeout:?}"))),
        Ok(Err(e)) => return Err(Failure::new(Kind::Connection, format!("{e:#}"))),
        Ok(Ok(reply)) => reply,
    };
    if reply["id"].as_u64() != Some(id) {
        return Err(Failure::new(Kind::WrongAnswer, format!("expected the answer to request {id}, got {reply}")));
    }
    if let Some(message) = reply["error"]["message"].as_str() {
        return Err(Failure::new(Kind::of_error(message), message));
    }
    let result = &reply["result"];
    let wrong = |what: &str| Err(Failure::new(Kind::WrongAnswer, format!("{what}: {result}")));
    let content = &result["structuredContent"];
    match op {
        Op::Echo if content == &echo => Ok(()),
        Op::Echo => wrong("echo did not echo"),
        Op::Slow if content["sleptMs"] == SLOW_MS => Ok(()),
        Op::Slow => wrong("slow did not sleep"),
        Op::Fail if result["isError"] == true && result["content"][0]["text"] == fail_message.as_str() => Ok(()),
        Op::Fail => wrong("fail is not the tool error asked for"),
        Op::ToolsList => {
            let names: Vec<&str> =
                result["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
            if names.contains(&"mcpx_call") && names.contains(&"fake__whoami") {
                Ok(())
            } else {
                wrong("the listing lacks mcpx_call or fake__whoami")
            }
        }
        Op::Whoami => {
            let Some(instance) = content["instance"].as_str() else { return wrong("whoami named no instance") };
            let mut seen = seen.lock().expect("seen lock");
            let owner = *seen.owners.entry(instance.to_owned()).or_insert(session);
            if owner == session {
                return Ok(());
            }
            let detail =
                format!("instance {instance} answered {} after {}", session_name(session), session_name(owner));
            seen.cross_session += 1;
            if seen.cross_examples.len() < 5 {
                seen.cross_examples.push(detail.clone());
            }
            Err(Failure::new(Kind::CrossSession, detail))
        }
        Op::Meta => check_context(&content["meta"], session, seen),
        Op::ReadMeta => {
            let text = result["contents"][0]["text"].as_str().unwrap_or_default();
            match serde_json::from_str::<Value>(text) {
                Ok(meta) => check_context(&meta, session, seen),
                Err(_) => wrong("the resource is not the _meta as JSON"),
            }
        }
    }
}

/// The invocation context an upstream received must name `session` and its instance key.
fn check_context(meta: &Value, session: usize, seen: &Mutex<Seen>) -> Result<(), Failure> {
    let context = &meta["dev.mcpx/invocation"];
    let name = session_name(session);
    let (got_session, got_scope) = (context["sessionId"].as_str(), context["scope"].as_str());
    if got_session == Some(name.as_str()) && got_scope == Some(format!("session:{name}").as_str()) {
        return Ok(());
    }
    if got_session.is_none() && got_scope.is_none() {
        return Err(Failure::new(Kind::WrongAnswer, format!("no invocation context in {meta}")));
    }
    let detail = format!("{name} was served with the context {context}");
    let mut seen = seen.lock().expect("seen lock");
    seen.cross_session += 1;
    if seen.cross_examples.len() < 5 {
        seen.cross_examples.push(detail.clone());
    }
    Err(Failure::new(Kind::CrossSession, detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mix_picks_every_op_in_its_proportion() {
        let mut random = Random::new(7);
        let mut counts = [0usize; 7];
        for _ in 0..100_000 {
            counts[Op::pick(random.next()).index()] += 1;
        }
        for ((_, weight), count) in Op::MIX.iter().zip(counts) {
            let share = count as f64 / 1_000.0;
            assert!((share - *weight as f64).abs() < 1.5, "{count} of 100,000 for weight {weight}");
        }
    }

    #[test]
    fn mcpx_errors_are_sorted_into_kinds() {
        assert_eq!(Kind::of_error("server \"fake\" exited (exit status: 3)"), Kind::UpstreamExited);
        assert_eq!(
            Kind::of_error(
                "server \"fake\" exited (x) (server \"fake\" failed to start 2 times in a row; mcpx tries again in 900ms)"
            ),
            Kind::Backoff
        );
        assert_eq!(
            Kind::of_error("mcpx already runs 66 instances in all (pool.maxInstances); wait"),
            Kind::InstanceLimit
        );
        assert_eq!(Kind::of_error("something else"), Kind::Other);
        assert!(Kind::UpstreamExited.expected() && !Kind::Other.expected() && !Kind::CrossSession.expected());
    }

    #[test]
    fn a_context_of_another_session_is_a_cross_session_observation() {
        let seen = Mutex::new(Seen::default());
        let own = json!({"dev.mcpx/invocation": {"sessionId": "soak-001", "scope": "session:soak-001"}});
        assert!(check_context(&own, 1, &seen).is_ok());
        let other = json!({"dev.mcpx/invocation": {"sessionId": "soak-002", "scope": "session:soak-002"}});
        assert_eq!(check_context(&other, 1, &seen).unwrap_err().kind, Kind::CrossSession);
        assert_eq!(check_context(&json!({}), 1, &seen).unwrap_err().kind, Kind::WrongAnswer);
        assert_eq!(seen.lock().unwrap().cross_session, 1);
    }
}
