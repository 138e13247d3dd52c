//! Scenario `stdio-relay`: what `mcpx serve` costs a stdio client. The same sequential
//! `tools/call` of fakemcp's `echo` goes (a) straight to a fakemcp child over stdio and
//! (b) through `mcpx serve` → unix socket → `mcpx daemon` → the daemon's fakemcp over
//! stdio.
//!
//! Both paths stay up for the whole run and take turns in rounds (direct first in even
//! rounds, relay first in odd ones), so whatever else the machine is doing lands on both
//! alike. The figure that matters is the latency the relay adds at p50 and p99.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::json;

use crate::mcp::{EchoCall, Era, Route};
use crate::processes::{Binaries, Daemon, Process, Scratch, UPSTREAM};
use crate::report::{Comparison, Measured, Run};
use crate::scenario::{Load, Tally};
use crate::stdio::StdioClient;

/// What mcpx may add to a stdio call at p50 (the project's target), in microseconds.
pub const ADDED_P50_TARGET_MICROS: f64 = 150.0;

#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Options {
    /// Protocol era the client speaks (to fakemcp, and to `mcpx serve`).
    #[arg(long, value_enum, default_value_t = Era::Modern)]
    pub era: Era,
    /// Concurrent clients per contender, each with its own process (fakemcp, or `mcpx
    /// serve`; the relay's clients share the daemon's one fakemcp).
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Turns each contender takes; the requests are split evenly between them.
    #[arg(long, default_value_t = 10)]
    pub rounds: usize,
    #[command(flatten)]
    pub load: Load,
}

pub fn run(binaries: &Binaries, options: &Options) -> anyhow::Result<Run> {
    let clients = options.clients.max(1);
    let rounds = options.rounds.max(1);
    let era = options.era;
    let timeout = options.load.timeout();
    let scratch = Scratch::new("stdio-relay")?;
    let daemon = Daemon::start(binaries, &scratch, &binaries.mcpx_config())?;

    let direct_clients = (0..clients)
        .map(|i| {
            let mut command = Command::new(&binaries.fakemcp);
            Client::start(&format!("fakemcp {i}"), &mut command, &scratch, era, Route::Direct, timeout)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let relay_clients = (0..clients)
        .map(|i| {
            let mut command = Command::new(&binaries.mcpx);
            command.arg("serve").env("MCPX_STATE_DIR", daemon.state_dir());
            let route = Route::Gateway { server: UPSTREAM };
            Client::start(&format!("mcpx serve {i}"), &mut command, &scratch, era, route, timeout)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut sides = [
        Side { name: "direct", path: "bench → fakemcp (stdio)", clients: direct_clients, tally: Tally::default() },
        Side {
            name: "relay",
            path: "bench → mcpx serve → unix socket → mcpx daemon → fakemcp (stdio)",
            clients: relay_clients,
            tally: Tally::default(),
        },
    ];

    for side in &mut sides {
        side.slice(options.load.warmup.div_ceil(clients), None, timeout)?;
        side.tally = Tally::with_capacity(options.load.requests);
    }
    let per_slice = options.load.requests.div_ceil(rounds * clients);
    let slice_budget = options.load.duration().map(|d| d / (2 * rounds) as u32);
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let tally = sides[i].slice(per_slice, slice_budget, timeout)?;
            sides[i].tally.absorb(tally);
        }
    }

    let [direct, relay] = sides;
    let direct_rss = direct.peak_rss("fakemcp");
    let mut relay_rss = relay.peak_rss("mcpx serve");
    relay_rss.extend(daemon.peak_rss());
    let direct = direct.finish(direct_rss)?;
    let relay = relay.finish(relay_rss)?;
    daemon.stop()?;
    drop(scratch);

    Ok(Run {
        scenario: "stdio-relay",
        heading: format!(
            "stdio-relay · {} era · {clients} client(s) · {} + {} calls in {rounds} interleaved rounds",
            era.label(),
            direct.samples.len(),
            relay.samples.len()
        ),
        settings: json!({
            "era": era.label(),
            "clients": clients,
            "rounds": rounds,
            "requests": options.load.requests,
            "warmup": options.load.warmup,
            "durationSeconds": options.load.duration,
        }),
        contenders: vec![direct, relay],
        comparisons: vec![Comparison {
            baseline: "direct",
            subject: "relay",
            added_p50_target_micros: Some(ADDED_P50_TARGET_MICROS),
            min_throughput_ratio: None,
            max_front_cpu_ratio: None,
        }],
        targets: Vec::new(),
        facts: None,
    })
}

/// One contender: its clients and what they have measured so far.
struct Side {
    name: &'static str,
    path: &'static str,
    clients: Vec<Client>,
    tally: Tally,
}

impl Side {
    /// Every client makes up to `per_client` calls (fewer if `budget` runs out), all at once.
    fn slice(&mut self, per_client: usize, budget: Option<Duration>, timeout: Duration) -> anyhow::Result<Tally> {
        let started = Instant::now();
        let until = budget.map(|b| started + b);
        let mut tally = Tally::default();
        if let [client] = self.clients.as_mut_slice() {
            // One client: no thread between the bench and the pipe.
            tally = client.calls(per_client, until, timeout)?;
        } else {
            let tallies: Vec<anyhow::Result<Tally>> = std::thread::scope(|scope| {
                let running: Vec<_> = self
                    .clients
                    .iter_mut()
                    .map(|client| scope.spawn(move || client.calls(per_client, until, timeout)))
                    .collect();
                running.into_iter().map(|t| t.join().expect("a client thread does not panic")).collect()
            });
            for client_tally in tallies {
                tally.absorb(client_tally?);
            }
        }
        tally.elapsed = started.elapsed();
        Ok(tally)
    }

    /// The peak RSS of this side's client processes: each one's when there is one, the
    /// largest when there are several.
    fn peak_rss(&self, role: &str) -> Vec<(String, Option<u64>)> {
        let peaks = self.clients.iter().map(|c| c.process.peak_rss_kib());
        match self.clients.len() {
            1 => vec![(role.to_owned(), peaks.into_iter().next().flatten())],
            n => vec![(format!("{role} (largest of {n})"), peaks.flatten().max())],
        }
    }

    /// Stops the clients' processes (closing stdin first, as a host would) and hands the
    /// measurement over.
    fn finish(self, peak_rss: Vec<(String, Option<u64>)>) -> anyhow::Result<Measured> {
        for Client { mut process, io, .. } in self.clients {
            drop(io);
            if !process.stop() {
                anyhow::bail!("{} did not exit when its stdin closed, nor on SIGTERM", process.role);
            }
        }
        Ok(self.tally.measured(self.name, self.path, peak_rss))
    }
}

/// A stdio client and the process it talks to.
struct Client {
    process: Process,
    io: StdioClient,
    call: EchoCall,
    next_id: u64,
}

impl Client {
    fn start(
        role: &str,
        command: &mut Command,
        scratch: &Scratch,
        era: Era,
        route: Route<'_>,
        timeout: Duration,
    ) -> anyhow::Result<Client> {
        let mut process = Process::spawn_stdio(role, command, scratch)?;
        let (stdin, stdout) = process.take_stdio()?;
        let mut io = StdioClient::new(stdin, stdout);
        io.handshake(era, Instant::now() + timeout)
            .with_context(|| format!("{role}: opening the session; its stderr:\n{}", process.log_tail()))?;
        Ok(Client { process, io, call: EchoCall::new(era, route), next_id: 1 })
    }

    /// Up to `count` sequential calls, stopping early at `until`.
    fn calls(&mut self, count: usize, until: Option<Instant>, timeout: Duration) -> anyhow::Result<Tally> {
        let mut tally = Tally::with_capacity(count);
        for _ in 0..count {
            if until.is_some_and(|until| Instant::now() >= until) {
                break;
            }
            let id = self.next_id;
            self.next_id += 1;
            let start = Instant::now();
            let outcome = self.io.call(&self.call, id, start + timeout).with_context(|| {
                format!("{}: request {id} failed; its stderr:\n{}", self.process.role, self.process.log_tail())
            })?;
            tally.count(start.elapsed(), outcome);
        }
        Ok(tally)
    }
}
