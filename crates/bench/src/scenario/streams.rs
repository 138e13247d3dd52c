//! Scenario `streams`: many idle event streams held open on one daemon, and what they cost
//! a caller who is doing ordinary work.
//!
//! Two phases, each on a fresh daemon with fakemcp (stdio, global) behind it:
//!
//! - `legacy`: `--streams` 2025-11-25 sessions (`initialize`, `notifications/initialized`),
//!   each holding its standalone stream (`GET /mcp` with its `Mcp-Session-Id`).
//! - `listen`: `--streams` 2026-07-28 `subscriptions/listen` streams, idle, each asking
//!   for tool list changes of fakemcp, which mcpx exposes in this phase (a listen with
//!   nothing to watch ends at once, so it would hold nothing open).
//!
//! In each, a normal caller makes `--calls` sequential `mcpx_call` → `echo` calls to the
//! daemon holding the streams, and as many to a twin daemon (the same configuration, its
//! own fakemcp) that holds none. The calls go in `--blocks` rounds, a block to either
//! daemon, alternating between the two and paced over `--window` seconds, so that
//! whatever else the machine does in that time lands on both alike, and the window spans
//! the daemon's periodic work on the streams (a keep-alive on each every 15 s) as a
//! caller's day would. Recorded: the daemon's resident memory with none and with all open
//! (so its memory per open stream, session included for `legacy`), and both latency
//! samples, pooled over the rounds and round by round. Targets: at most 16 KiB of daemon
//! memory per open stream, and the normal caller's p99 with every stream open within
//! twice its p99 with none.
//!
//! Each stream is a TCP connection of its own, held by a plain socket that sent its request
//! and read its response head (a 200 with an event stream) and, for a listen, the
//! acknowledgement event, so the bench holds them for a few KiB each. A stream counts as
//! still open after the calls only if its connection is up and its body has not ended.
//! The daemon's connection and session limits are raised to fit.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::http::{HttpClient, MCP_PATH};
use crate::mcp::{EchoCall, Era, LEGACY_VERSION, MODERN_VERSION, Route};
use crate::memory;
use crate::processes::{Binaries, Daemon, Scratch, UPSTREAM};
use crate::report::{Run, Spread};
use crate::scenario::{Tally, in_turn};

/// The targets: daemon memory per open stream, and the normal caller's p99 with
/// every stream open as a multiple of its p99 with none.
pub const PER_STREAM_TARGET_KIB: f64 = 16.0;
pub const P99_TARGET_RATIO: f64 = 2.0;

#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Options {
    /// Streams held open in each phase.
    #[arg(long, default_value_t = 10_000)]
    pub streams: usize,
    /// The normal caller's sequential calls, with no stream open and with all open.
    #[arg(long, default_value_t = 5_000)]
    pub calls: usize,
    /// Blocks the calls are split into, alternating between the two daemons (one round is
    /// a block to each).
    #[arg(long, default_value_t = 20)]
    pub blocks: usize,
    /// Seconds the blocks are spread over, from the first round to the last.
    #[arg(long, default_value_t = 20.0)]
    pub window: f64,
    /// Streams being opened at once.
    #[arg(long, default_value_t = 64)]
    pub parallel: usize,
}

/// How long one request (or one stream's response head) may take before the run is abandoned.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the daemon's memory is left to settle before it is read.
const SETTLE: Duration = Duration::from_secs(2);

/// Which kind of stream a phase holds.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Legacy,
    Listen,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Legacy => "legacy",
            Kind::Listen => "listen",
        }
    }
}

pub fn run(binaries: &Binaries, options: &Options) -> anyhow::Result<Vec<Run>> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    [Kind::Legacy, Kind::Listen].into_iter().map(|kind| phase(binaries, options, kind, &runtime)).collect()
}

fn phase(binaries: &Binaries, options: &Options, kind: Kind, runtime: &tokio::runtime::Runtime) -> anyhow::Result<Run> {
    let scratch = Scratch::new(&format!("streams-{}", kind.label()))?;
    let streams = options.streams.max(1);
    let room = streams + 256;
    let mut config = json!({
        "mcpServers": {UPSTREAM: {"command": binaries.fakemcp}},
        "http": {"maxConnections": room, "maxSessions": room, "maxSessionsPerClient": room},
    });
    if let Kind::Listen = kind {
        config["expose"] = json!([UPSTREAM]);
    }
    let daemon = Daemon::start(binaries, &scratch, &config)?;
    let twin_scratch = Scratch::new(&format!("streams-{}-twin", kind.label()))?;
    let twin = Daemon::start(binaries, &twin_scratch, &config)?;
    let outcome = runtime.block_on(measure(&daemon, &twin, kind, streams, options));
    let peak_rss = daemon.peak_rss();
    daemon.stop()?;
    twin.stop()?;
    drop((scratch, twin_scratch));
    let (quiet, busy, facts) = outcome?;
    let measured = |name, path, tally: Tally| tally.measured(name, path, peak_rss.clone());
    Ok(Run {
        scenario: "streams",
        heading: format!("streams · {streams} open {} streams · a normal caller's mcpx_call beside them", kind.label()),
        settings: json!({
            "era": Era::Modern.label(),
            "streams": streams,
            "kind": kind.label(),
            "calls": options.calls,
            "rounds": options.blocks.max(1),
            "windowSeconds": options.window,
        }),
        contenders: vec![
            measured("no-streams", "mcpx_call → fakemcp (stdio) on a twin daemon with no stream open", quiet),
            measured("streams-open", "the same calls to the daemon with every stream open", busy),
        ],
        comparisons: Vec::new(),
        targets: Vec::new(),
        facts: Some(facts),
    })
}

async fn measure(
    daemon: &Daemon,
    twin: &Daemon,
    kind: Kind,
    streams: usize,
    options: &Options,
) -> anyhow::Result<(Tally, Tally, Value)> {
    let addr = daemon.addr;
    let pid = daemon.pid();
    let rss = || memory::rss_kib(pid).context("reading the daemon's VmRSS");
    let call = EchoCall::new(Era::Modern, Route::Gateway { server: UPSTREAM });
    // Warm both alike: the upstream started, listings and every lazy setup done, one
    // stream opened and closed so its machinery is in the baseline too.
    for side in [addr, twin.addr] {
        let mut caller = HttpClient::connect(side).await?;
        calls(&mut caller, &call, 200, 1, REQUEST_TIMEOUT).await.context("warm-up calls")?;
        drop(open(side, kind, 0).await.context("a warm-up stream")?);
    }
    tokio::time::sleep(SETTLE).await;
    let baseline = rss()?;

    let opened = Instant::now();
    let held = open_all(addr, kind, streams, options.parallel.max(1)).await?;
    let open_seconds = opened.elapsed().as_secs_f64();
    tokio::time::sleep(SETTLE).await;
    let with_all = rss()?;

    // Opening the streams can take longer than `http.headerReadTimeout`, which also bounds
    // how long a connection may sit idle between requests: each caller connects afresh, as
    // a real client does when the daemon has closed its idle connection.
    let mut quiet_caller = HttpClient::connect(twin.addr).await?;
    let mut busy_caller = HttpClient::connect(addr).await?;
    let rounds = options.blocks.max(1);
    let per_round = options.calls.div_ceil(rounds);
    let pace = Duration::from_secs_f64(options.window.max(0.0) / rounds.saturating_sub(1).max(1) as f64);
    let started = tokio::time::Instant::now();
    let (mut quiet, mut busy) = (Tally::default(), Tally::default());
    let mut ratios = Vec::with_capacity(rounds);
    for round in 0..rounds {
        // Paced, not waiting on anything: the rounds are spread over the window.
        tokio::time::sleep_until(started + pace * round as u32).await;
        let first_id = 1_000 + (round * per_round) as u64;
        let mut quiet_block = Tally::default();
        let mut busy_block = Tally::default();
        // Each daemon goes first in every other round.
        let quiet_first = round % 2 == 0;
        for quiet_turn in [quiet_first, !quiet_first] {
            if quiet_turn {
                quiet_block = calls(&mut quiet_caller, &call, per_round, first_id, REQUEST_TIMEOUT)
                    .await
                    .with_context(|| format!("round {round}: calls, no streams"))?;
            } else {
                busy_block = calls(&mut busy_caller, &call, per_round, first_id, REQUEST_TIMEOUT)
                    .await
                    .with_context(|| format!("round {round}: calls, streams open"))?;
            }
        }
        ratios.push(busy_block.samples.summary().p99 / quiet_block.samples.summary().p99.max(1.0));
        quiet.absorb(quiet_block);
        busy.absorb(busy_block);
    }
    // Every stream must still be open after the calls: a closed one did not count.
    let still_open = held.iter().filter(|s| is_open(s)).count();
    drop(held);

    let per_stream = with_all.saturating_sub(baseline) as f64 / streams as f64;
    let (p99_quiet, p99_busy) = (quiet.samples.summary().p99, busy.samples.summary().p99);
    let ratio = p99_busy / p99_quiet.max(1.0);
    let by_round = Spread::of(ratios).map(|spread| spread.to_json());
    let facts = json!({
        "streamsOpened": streams,
        "streamsStillOpenAfterCalls": still_open,
        "openSeconds": round2(open_seconds),
        "measuredSeconds": round2(started.elapsed().as_secs_f64()),
        "rssKiB": {"noStreams": baseline, "allStreamsOpen": with_all},
        "daemonKiBPerStream": round2(per_stream),
        "p99Micros": {"noStreams": p99_quiet, "streamsOpen": p99_busy},
        "p99Ratio": round2(ratio),
        "p99RatioByRound": by_round,
        "callsPerRound": per_round,
        "targets": {
            "perStreamAtMost16KiB": {"kib": round2(per_stream), "met": per_stream <= PER_STREAM_TARGET_KIB},
            "p99WithinTwiceNoStreams": {"ratio": round2(ratio), "met": ratio <= P99_TARGET_RATIO},
            "everyStreamStayedOpen": {"met": still_open == streams},
        },
    });
    Ok((quiet, busy, facts))
}

/// `count` sequential calls; ids start at `first_id`.
async fn calls(
    client: &mut HttpClient,
    call: &EchoCall,
    count: usize,
    first_id: u64,
    timeout: Duration,
) -> anyhow::Result<Tally> {
    in_turn(client, std::iter::repeat_n(call, count).zip(first_id..), timeout).await
}

/// Opens `count` streams, `parallel` at a time; every one must come up.
async fn open_all(addr: SocketAddr, kind: Kind, count: usize, parallel: usize) -> anyhow::Result<Vec<TcpStream>> {
    let mut held = Vec::with_capacity(count);
    let mut next = 0;
    while next < count {
        let batch = (next..(next + parallel).min(count)).map(|i| open(addr, kind, i));
        for (i, stream) in futures::future::join_all(batch).await.into_iter().enumerate() {
            held.push(stream.with_context(|| format!("stream {}", next + i))?);
        }
        next += parallel;
    }
    Ok(held)
}

/// One open stream of `kind`: its connection, the response head read.
async fn open(addr: SocketAddr, kind: Kind, n: usize) -> anyhow::Result<TcpStream> {
    let stream = match kind {
        Kind::Legacy => {
            let session = legacy_session(addr).await?;
            let head = format!(
                "GET {MCP_PATH} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\
                 MCP-Protocol-Version: {LEGACY_VERSION}\r\nMcp-Session-Id: {session}\r\n\r\n"
            );
            send(addr, &head).await?
        }
        Kind::Listen => {
            let body = json!({
                "jsonrpc": "2.0",
                "id": n,
                "method": "subscriptions/listen",
                "params": {
                    "notifications": {"toolsListChanged": true},
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
                        "io.modelcontextprotocol/clientCapabilities": {},
                    },
                },
            })
            .to_string();
            let head = format!(
                "POST {MCP_PATH} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: {MODERN_VERSION}\r\n\
                 Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let mut stream = send(addr, &head).await?;
            read_until(&mut stream, b"notifications/subscriptions/acknowledged", 64 * 1024)
                .await
                .context("no acknowledgement of the listen")?;
            stream
        }
    };
    Ok(stream)
}

/// Opens a 2025-11-25 session on a connection of its own; its `Mcp-Session-Id`.
async fn legacy_session(addr: SocketAddr) -> anyhow::Result<String> {
    let mut client = HttpClient::connect(addr).await?;
    client.open_session().await?;
    client.session().context("the session has an id")
}

/// Connects, sends `request`, and reads the response head, which must be a 200 event
/// stream; the connection is returned with the stream open.
async fn send(addr: SocketAddr, request: &str) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
    stream.write_all(request.as_bytes()).await?;
    let head = read_until(&mut stream, b"\r\n\r\n", 16 * 1024).await.context("reading the response head")?;
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    if !head.starts_with("http/1.1 200") || !head.contains("content-type: text/event-stream") {
        bail!("not an open event stream: {head}");
    }
    Ok(stream)
}

/// Reads byte by byte (so nothing past `end` is taken) until what was read ends with
/// `end`; at most `limit` bytes, within [`REQUEST_TIMEOUT`].
async fn read_until(stream: &mut TcpStream, end: &[u8], limit: usize) -> anyhow::Result<Vec<u8>> {
    let mut read = Vec::with_capacity(512);
    let mut byte = [0u8; 1];
    let reading = async {
        while !read.ends_with(end) {
            if stream.read(&mut byte).await? == 0 {
                bail!("the daemon closed the connection");
            }
            read.push(byte[0]);
            if read.len() > limit {
                bail!("nothing like {:?} in {limit} bytes", String::from_utf8_lossy(end));
            }
        }
        Ok(())
    };
    tokio::time::timeout(REQUEST_TIMEOUT, reading).await.context("not in time")??;
    Ok(read)
}

/// Whether the daemon still holds `stream` open: its connection is up and what it has sent
/// since (keep-alives, events) does not end the response body, a chunked body's last chunk.
fn is_open(stream: &TcpStream) -> bool {
    let mut pending = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.try_read(&mut buffer) {
            Ok(0) => return false,
            Ok(n) => pending.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            Err(_) => return false,
        }
    }
    !pending.ends_with(b"\r\n0\r\n\r\n") && !pending.starts_with(b"0\r\n\r\n")
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}
