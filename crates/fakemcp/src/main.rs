//! fakemcp: a small MCP server over stdio (or, with `--http`, Streamable HTTP) that mcpx's
//! end-to-end tests and benchmarks use as an upstream.
//!
//! This file only parses flags and wires the pieces together: `instance` (who this
//! process is), `wire` (the framing), `era` (legacy vs modern rules), `server`
//! (dispatch), `tools` (what each tool does), `http` (the HTTP front end over the same
//! server) and, with `--fixture conformance`, `conformance` (the surface the official
//! conformance suite calls). The server itself stays synchronous and small: it is a test
//! fixture whose behaviour the gateway's tests rely on exactly; only the HTTP front end
//! runs an async runtime.

mod conformance;
mod era;
mod http;
mod instance;
mod meta_surface;
mod server;
mod tools;
mod wire;

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::conformance::Fixture;
use crate::era::EraMode;
use crate::instance::Instance;
use crate::server::{Behaviour, Server};
use crate::wire::Output;

/// How long stdin EOF waits for tool calls still running before exiting anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(250);

/// A test MCP server over stdio or Streamable HTTP, speaking MCP 2025-11-25 sessions
/// and/or 2026-07-28 stateless requests.
#[derive(Debug, Parser)]
#[command(name = "fakemcp", version)]
struct Flags {
    /// Which protocol eras to speak.
    #[arg(long, value_enum, default_value_t = EraMode::Both)]
    era: EraMode,

    /// Never answer requests for unknown methods (like legacy servers that ignore them).
    #[arg(long)]
    silent_unknown: bool,

    /// Ignore SIGTERM, so a supervisor has to escalate to SIGKILL.
    #[arg(long)]
    ignore_sigterm: bool,

    /// Send notifications/tools/list_changed right after answering a legacy initialize.
    #[arg(long)]
    list_changed_on_init: bool,

    /// Write to stderr without pause (1 KiB lines, from a thread of its own) for as long
    /// as the process lives, and a line before handling each message: a client that
    /// stops draining stderr stalls the answers.
    #[arg(long)]
    flood_stderr: bool,

    /// Append a line, "<instance id> <pid>", to this file as the process starts (before it
    /// reads a request): how a test counts the processes a gateway started, including
    /// those already gone.
    #[arg(long, value_name = "FILE")]
    record_start: Option<std::path::PathBuf>,

    /// Append each request received, as one JSON line `{"method", "params"}`, to this
    /// file: how a test sees what a gateway forwarded, and that it forwarded nothing.
    #[arg(long, value_name = "FILE")]
    record_requests: Option<std::path::PathBuf>,

    /// Ignored; lets tests find their processes by command line.
    #[arg(long = "tag", value_name = "STRING")]
    _tag: Vec<String>,

    /// Also list a tool by this exact name, whatever characters it holds (repeatable):
    /// how a test serves a name mcpx must refuse to pass on.
    #[arg(long = "tool-named", value_name = "NAME")]
    tool_named: Vec<String>,

    /// The description of the tools `--tool-named` lists, whatever characters it holds.
    #[arg(long, value_name = "TEXT", default_value = "A tool listed by --tool-named.")]
    tool_description: String,

    /// The serverInfo name to report.
    #[arg(long, default_value = "fakemcp")]
    name: String,

    /// The `ttlMs` a 2026-07-28 `tools/list` answer carries: how long a client may keep it.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    list_ttl_ms: u64,

    /// Also serve a named fixture surface besides the standard tools.
    #[arg(long, value_enum)]
    fixture: Option<FixtureKind>,

    /// With `--fixture conformance`: a question asked mid-call (handshake era) names the
    /// call it is for, echoing the callId of the call's `_meta["dev.mcpx/invocation"]`.
    #[arg(long, requires = "fixture")]
    echo_call_id: bool,

    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio, answering in JSON; port 0
    /// takes a free one. The URL is printed as one line on stdout once listening.
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FixtureKind {
    /// What the official MCP conformance suite calls: its tools, resources, prompts,
    /// completions, progress, logging, sampling/elicitation, input_required rounds and
    /// subscriptions/listen.
    Conformance,
}

/// One line per start, written whole in one append, so concurrent starts do not mix.
fn record_start(file: &std::path::Path, instance: &Instance) -> io::Result<()> {
    use std::io::Write as _;
    let line = format!("{} {}\n", instance.id, instance.pid);
    std::fs::OpenOptions::new().create(true).append(true).open(file)?.write_all(line.as_bytes())
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    if flags.ignore_sigterm {
        // SAFETY: installs the ignore disposition before any other thread exists.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    let instance = match Instance::new(flags.name, flags.tool_named, flags.tool_description) {
        Ok(instance) => Arc::new(instance.recording_requests(flags.record_requests)),
        Err(e) => {
            eprintln!("fakemcp: cannot draw a random instance id: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("fakemcp {} pid {} era {} started", instance.id, instance.pid, flags.era.label());
    if let Some(file) = &flags.record_start
        && let Err(e) = record_start(file, &instance)
    {
        eprintln!("fakemcp {}: cannot record the start in {}: {e}", instance.id, file.display());
        return ExitCode::FAILURE;
    }

    let behaviour = Behaviour {
        era_mode: flags.era,
        silent_unknown: flags.silent_unknown,
        list_changed_on_init: flags.list_changed_on_init,
        list_ttl_ms: flags.list_ttl_ms,
        flood_stderr: flags.flood_stderr,
    };
    if flags.flood_stderr {
        let id = instance.id.clone();
        std::thread::spawn(move || {
            let filler = "x".repeat(1000);
            for n in 0u64.. {
                eprintln!("fakemcp {id}: flood {n} {filler}");
            }
        });
    }
    if let Some(addr) = flags.http {
        return match http::serve(addr, behaviour, instance, flags.fixture.is_some()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("fakemcp: cannot serve HTTP on {addr}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let out = Output::new();
    let fixture = match flags.fixture {
        None => None,
        Some(FixtureKind::Conformance) => match Fixture::new(Arc::clone(&instance), out.clone()) {
            Ok(fixture) => Some(Arc::new(fixture.echoing_call_id(flags.echo_call_id))),
            Err(e) => {
                eprintln!("fakemcp: cannot draw a random requestState key: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    let mut server = Server::new(behaviour, Arc::clone(&instance), out.clone(), fixture);
    if let Err(e) = server.run(io::stdin().lock()) {
        eprintln!("fakemcp {}: reading stdin failed: {e}", instance.id);
    }
    // stdin closed: the client is done with us, and the spec asks for a prompt exit.
    // Quick tool calls still get answered; slow ones are abandoned. Holding the stdout
    // lock while exiting keeps every line already started whole.
    server.finish(SHUTDOWN_GRACE);
    let _stdout = out.hold();
    std::process::exit(0)
}
