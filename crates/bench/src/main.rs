//! `mcpx-bench`: measures what mcpx adds to an MCP call, against the same call made
//! directly to the same upstream (fakemcp) and through peer gateways, in one run on one
//! machine.
//!
//! This file parses flags, runs the chosen scenarios and prints their results; how a
//! scenario works lives in `scenario/`, the protocol in `mcp`, `stdio` and `http`, the
//! processes under test in `processes`, the figures in `latency` and `report`, and the
//! picture of a results file in `plot`. The bench starts every process it measures and
//! stops every one before it exits, and it only ever talks to loopback.

mod http;
mod latency;
mod mcp;
mod memory;
#[cfg(feature = "plot")]
mod plot;
mod processes;
mod report;
mod scenario;
mod stdio;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::{Map, Value, json};

use crate::mcp::Era;
use crate::processes::Binaries;
use crate::report::Run;
use crate::scenario::{Load, cold_start, exec, http as http_scenario, sessions, soak, stdio_relay, streams};

#[derive(Parser)]
#[command(
    name = "mcpx-bench",
    version,
    about = "Measure mcpx against a direct connection to the same MCP server (fakemcp).",
    after_help = "Build in release mode first (scripts/bench.sh does it all). Exit codes: 0 ok; 1 the run failed or some answers were wrong."
)]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
    /// mcpx binary under test (default: next to this executable).
    #[arg(long, global = true)]
    mcpx: Option<PathBuf>,
    /// fakemcp binary, the upstream (default: next to this executable).
    #[arg(long, global = true)]
    fakemcp: Option<PathBuf>,
    /// The `mcp-proxy` program (0.13): adds it to the http scenario.
    #[arg(long, global = true, value_name = "PATH")]
    mcp_proxy: Option<PathBuf>,
    /// The `fastmcp` program (4.x): adds it to the http scenario.
    #[arg(long, global = true, value_name = "PATH")]
    fastmcp: Option<PathBuf>,
    /// Also write the results as JSON to this file ("-" for stdout; the tables then go to stderr).
    #[arg(long, global = true, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Record KEY=VALUE under "meta" in the JSON (e.g. commit=abc123, date=2026-12-02).
    #[arg(long, global = true, value_name = "KEY=VALUE", value_parser = parse_meta)]
    meta: Vec<(String, String)>,
}

#[derive(Subcommand)]
enum Scenario {
    /// One sequential stdio client: fakemcp directly vs through `mcpx serve` → daemon,
    /// interleaved in rounds.
    StdioRelay(stdio_relay::Options),
    /// Concurrent clients over HTTP: fakemcp directly, mcpx → fakemcp over HTTP and over
    /// stdio, and the peer gateways given, interleaved in rounds.
    Http(http_scenario::Options),
    /// Session names against a session-scoped upstream: instances, memory, the reap.
    Sessions(sessions::Options),
    /// Launch to first answer: the daemon, `mcpx serve`, fakemcp.
    ColdStart(cold_start::Options),
    /// Code mode: an `mcpx_exec` script with one tool call, and with none, against the
    /// same call through `mcpx_call`, interleaved in rounds.
    Exec(exec::Options),
    /// Many idle event streams (sessions' standalone streams, then `subscriptions/listen`):
    /// daemon memory per stream, and a normal caller's p99 with none and with all open.
    Streams(streams::Options),
    /// Reliability, not speed (not part of `all`): clients across sessions making mixed
    /// calls for minutes while upstreams are crashed; errors by kind, daemon memory and
    /// descriptors over time, processes left after the stop, answers that cross sessions.
    Soak(soak::Options),
    /// Everything scripts/bench.sh records: stdio-relay in both eras, http, sessions,
    /// cold-start, exec, streams.
    All {
        /// Rounds of the stdio-relay and exec scenarios, and of the http scenario up to its
        /// default.
        #[arg(long, default_value_t = 10)]
        rounds: usize,
        /// HTTP concurrency levels.
        #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 32, 128])]
        clients: Vec<usize>,
        /// Threads of the bench's own runtime in the http scenario.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Measured requests per level for each peer gateway in the http scenario.
        #[arg(long, default_value_t = 2_000)]
        peer_requests: usize,
        #[command(flatten)]
        load: Load,
        #[command(flatten)]
        sessions: sessions::Options,
        #[command(flatten)]
        cold_start: cold_start::Options,
        #[command(flatten)]
        streams: streams::Options,
    },
    /// Draws a results file (bench/results.json) as a PNG.
    Plot {
        /// The results JSON.
        results: PathBuf,
        /// The PNG to write.
        png: PathBuf,
    },
}

fn parse_meta(text: &str) -> Result<(String, String), String> {
    let (key, value) = text.split_once('=').ok_or("expected KEY=VALUE")?;
    Ok((key.to_owned(), value.to_owned()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("mcpx-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the scenarios and reports them; Ok(false) when some answers were wrong.
fn run(cli: Cli) -> anyhow::Result<bool> {
    if let Scenario::Plot { results, png } = &cli.scenario {
        plot(results, png)?;
        return Ok(true);
    }
    let mut binaries = Binaries::locate(cli.mcpx, cli.fakemcp)?;
    // Every process starts in a scratch directory: relative paths would not be found there.
    binaries.mcp_proxy = cli.mcp_proxy.map(std::path::absolute).transpose().context("--mcp-proxy")?;
    binaries.fastmcp = cli.fastmcp.map(std::path::absolute).transpose().context("--fastmcp")?;
    let tables_to_stderr = cli.json.as_deref() == Some(std::path::Path::new("-"));
    let show = |run: &Run| {
        if tables_to_stderr {
            eprintln!("{}", run.table());
        } else {
            println!("{}", run.table());
        }
    };
    if binaries.debug_build() {
        eprintln!("mcpx-bench: measuring a debug build; the figures say little about mcpx (build with --release)");
    }
    let machine_before = report::machine();

    let mut runs = Vec::new();
    let mut record = |run: Run| {
        show(&run);
        runs.push(run);
    };
    match cli.scenario {
        Scenario::StdioRelay(options) => record(stdio_relay::run(&binaries, &options)?),
        Scenario::Http(options) => http_scenario::run(&binaries, &options)?.into_iter().for_each(&mut record),
        Scenario::Sessions(options) => record(sessions::run(&binaries, &options)?),
        Scenario::ColdStart(options) => record(cold_start::run(&binaries, &options)?),
        Scenario::Exec(options) => record(exec::run(&binaries, &options)?),
        Scenario::Streams(options) => streams::run(&binaries, &options)?.into_iter().for_each(&mut record),
        Scenario::Soak(options) => record(soak::run(&binaries, &options)?),
        Scenario::All {
            rounds,
            clients,
            threads,
            peer_requests,
            load,
            sessions: session_options,
            cold_start: cold,
            streams: stream_options,
        } => {
            // Scripts are slower than plain calls: fewer of them say as much.
            let load_for_exec = Load { requests: 2_000, warmup: 200, ..load.clone() };
            for era in [Era::Modern, Era::Legacy] {
                let options = stdio_relay::Options { era, clients: 1, rounds, load: load.clone() };
                record(
                    stdio_relay::run(&binaries, &options)
                        .with_context(|| format!("stdio-relay, {} era", era.label()))?,
                );
            }
            let options = http_scenario::Options {
                clients,
                threads,
                rounds: rounds.min(http_scenario::ROUNDS),
                peer_requests,
                load,
            };
            http_scenario::run(&binaries, &options).context("http")?.into_iter().for_each(&mut record);
            record(sessions::run(&binaries, &session_options).context("sessions")?);
            record(cold_start::run(&binaries, &cold).context("cold-start")?);
            let options = exec::Options { rounds, load: load_for_exec };
            record(exec::run(&binaries, &options).context("exec")?);
            streams::run(&binaries, &stream_options).context("streams")?.into_iter().for_each(&mut record);
        }
        Scenario::Plot { .. } => unreachable!("handled above"),
    }
    finish(&cli.json, cli.meta, machine_before, &binaries, &runs)
}

#[cfg(feature = "plot")]
fn plot(results: &std::path::Path, png: &std::path::Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(results).with_context(|| format!("reading {}", results.display()))?;
    let document: Value = serde_json::from_str(&text).with_context(|| format!("{} is not JSON", results.display()))?;
    plot::draw(&document, png)
}

#[cfg(not(feature = "plot"))]
fn plot(_results: &std::path::Path, _png: &std::path::Path) -> anyhow::Result<()> {
    anyhow::bail!("this mcpx-bench was built without plotting: cargo build --release -p mcpx-bench --features plot")
}

fn finish(
    json_path: &Option<PathBuf>,
    meta: Vec<(String, String)>,
    mut machine: Value,
    binaries: &Binaries,
    runs: &[Run],
) -> anyhow::Result<bool> {
    machine["loadAverageAfter"] = report::machine()["loadAverage"].clone();
    if let Some(path) = json_path {
        let meta: Map<String, Value> = meta.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
        let binaries =
            json!({"mcpx": binaries.mcpx, "fakemcp": binaries.fakemcp, "debugBuild": binaries.debug_build()});
        let text =
            serde_json::to_string_pretty(&report::document(runs, Value::Object(meta), machine, binaries))? + "\n";
        if path.as_os_str() == "-" {
            print!("{text}");
        } else {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    let errors: usize = runs.iter().map(Run::errors).sum();
    if errors > 0 {
        eprintln!("mcpx-bench: {errors} answer(s) were wrong; the figures above do not count them");
    }
    Ok(errors == 0)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        // Catches, among others, two flattened options that take the same name.
        super::Cli::command().debug_assert();
    }
}
