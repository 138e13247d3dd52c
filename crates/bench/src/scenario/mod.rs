//! The scenarios: what is measured against what. Each one starts its own processes in a
//! scratch directory, measures its contenders side by side, stops everything it started,
//! and hands back a [`Run`](crate::report::Run) per setting.
//!
//! - `stdio_relay`: one sequential stdio client, fakemcp directly vs through `mcpx serve`.
//! - `http`: concurrent clients over HTTP: fakemcp directly, mcpx (to fakemcp over HTTP
//!   and over stdio), and the peer gateways.
//! - `sessions`: a thousand session names, a thousand instances, and their reap.
//! - `cold_start`: launch to first answer, for the daemon and for `mcpx serve`.
//! - `exec`: an `mcpx_exec` script with one tool call, and with none, against `mcpx_call`.
//! - `streams`: ten thousand idle event streams (sessions' standalone streams, then
//!   `subscriptions/listen`): daemon memory per stream, and a normal caller's p99 beside them.
//! - `soak`: ten minutes of mixed calls across sessions with upstream crashes: errors by
//!   kind, memory and descriptors over time, answers that cross sessions (not in `all`).

pub mod cold_start;
pub mod exec;
pub mod http;
pub mod sessions;
pub mod soak;
pub mod stdio_relay;
pub mod streams;

use std::time::{Duration, Instant};

use anyhow::Context;

use crate::http::HttpClient;
use crate::latency::Samples;
use crate::mcp::EchoCall;
use crate::report::Measured;

/// How much load each contender gets, and the bounds that stop a run.
#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Load {
    /// Measured requests per contender (and per concurrency level).
    #[arg(long, default_value_t = 20_000)]
    pub requests: usize,
    /// Requests per contender before measuring starts; not counted.
    #[arg(long, default_value_t = 1_000)]
    pub warmup: usize,
    /// Also stop measuring a contender after this many seconds, whichever comes first.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// Abort the run when one request takes longer than this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub timeout: f64,
}

impl Load {
    pub fn duration(&self) -> Option<Duration> {
        self.duration.map(Duration::from_secs_f64)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs_f64(self.timeout)
    }
}

/// What a stretch of load produced for one contender.
#[derive(Default)]
pub struct Tally {
    pub samples: Samples,
    pub errors: usize,
    pub first_error: Option<String>,
    pub elapsed: Duration,
}

impl Tally {
    pub fn with_capacity(capacity: usize) -> Tally {
        Tally { samples: Samples::with_capacity(capacity), ..Tally::default() }
    }

    /// Counts one request: a sample when it was answered right, an error otherwise.
    pub fn count(&mut self, latency: Duration, outcome: anyhow::Result<()>) {
        match outcome {
            Ok(()) => self.samples.record(latency),
            Err(e) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| format!("{e:#}"));
            }
        }
    }

    /// What a contender measured, as the report shows it.
    pub fn measured(self, name: &'static str, path: &'static str, peak_rss: Vec<(String, Option<u64>)>) -> Measured {
        Measured {
            name,
            path,
            samples: self.samples,
            errors: self.errors,
            first_error: self.first_error,
            elapsed: self.elapsed,
            peak_rss,
            cpu: None,
            turns: Vec::new(),
        }
    }

    pub fn absorb(&mut self, other: Tally) {
        self.samples.extend(other.samples);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.elapsed += other.elapsed;
    }
}

/// Sends each call with its id, one at a time on `client`, and tallies the answers; the run
/// is abandoned when one takes longer than `timeout`.
pub async fn in_turn<'a>(
    client: &mut HttpClient,
    calls: impl Iterator<Item = (&'a EchoCall, u64)>,
    timeout: Duration,
) -> anyhow::Result<Tally> {
    let started = Instant::now();
    let mut tally = Tally::with_capacity(calls.size_hint().0);
    for (call, id) in calls {
        let start = Instant::now();
        let outcome = tokio::time::timeout(timeout, client.call(call, id))
            .await
            .with_context(|| format!("request {id}: no answer within {timeout:?}"))??;
        tally.count(start.elapsed(), outcome);
    }
    tally.elapsed = started.elapsed();
    Ok(tally)
}
