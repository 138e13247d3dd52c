//! `mcpx serve`: what an agent host launches as its MCP server. A thin stdio front end:
//! every line goes to the daemon over its unix socket, with the identity of this process
//! (session `$MCPX_SESSION_ID` if set, else this process as a session no label can name;
//! its cwd, its pid, which the daemon checks against the socket's credentials), and every
//! line back goes to stdout.
//!
//! It keeps just enough state to behave well when the daemon goes away: the requests in
//! flight (they get an error at once) and the `initialize` of a handshake-era client
//! (replayed to the next daemon connection, so the client's session carries on).
//! `--no-daemon` runs an in-process gateway for this one client instead.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;

use futures::StreamExt;
use mcpx_gateway::{Gateway, Settings};
use mcpx_protocol::dropped::Dropped;
use mcpx_protocol::message::{self, error_response};
use mcpx_protocol::{Message, RequestId, RpcError};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use crate::stdio::Writer as Stdout;
use mcpx_gateway::{Line, Lines};
use tokio_util::codec::FramedRead;

use crate::client::{self, Daemon};

/// Longest line accepted on stdin or from the daemon. The daemon enforces its own
/// `limits.maxLineBytes`; this only bounds the relay's memory.
const MAX_LINE: usize = 64 * 1024 * 1024;

#[derive(clap::Args)]
pub struct Args {
    /// Config file for a daemon started on demand (or for --no-daemon).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Session name for this client (default: $MCPX_SESSION_ID, else this process itself,
    /// a session no label can name).
    #[arg(long, env = "MCPX_SESSION_ID")]
    session: Option<String>,
    /// Run an in-process gateway for this one client instead of using the shared daemon.
    #[arg(long)]
    no_daemon: bool,
}

pub fn run(args: Args) -> ExitCode {
    crate::init_logging();
    // One thread: the relay is a pump, and cross-thread wake-ups are most of its cost.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime starts");
    let outcome = runtime.block_on(async { if args.no_daemon { in_process(args).await } else { relay(args).await } });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcpx serve: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn in_process(args: Args) -> anyhow::Result<()> {
    let cwd = std::env::current_dir()?;
    let settings = Settings::load(mcpx_gateway::settings::find_config(args.config, &cwd))?;
    let gateway = Gateway::new(settings);
    let transport = mcpx_server::stdio::transport(args.session.as_deref(), std::process::id(), Some(cwd));
    let (stdin, stdout) = (crate::stdio::stdin(), crate::stdio::stdout());
    // Nothing else ends this stream: it serves until stdin closes.
    let end = tokio_util::sync::CancellationToken::new();
    mcpx_server::stdio::serve_lines(gateway.clone(), transport, stdin, stdout, end).await;
    gateway.shutdown().await;
    Ok(())
}

/// What the relay remembers about the client's traffic.
#[derive(Default)]
struct Client {
    in_flight: HashSet<RequestId>,
    /// The client's `initialize` line, replayed when the daemon connection is replaced.
    initialize: Option<(RequestId, String)>,
    /// The id of a replayed `initialize`, whose answer the client already had.
    swallow: Option<RequestId>,
}

async fn relay(args: Args) -> anyhow::Result<()> {
    let daemon = Daemon::new()?;
    let mut stdin = FramedRead::new(crate::stdio::stdin(), Lines::new(MAX_LINE));
    let mut stdout = crate::stdio::stdout();
    let mut client = Client::default();
    let mut upstream: Option<Connection> = None;
    let mut stdin_open = true;
    loop {
        tokio::select! {
            line = stdin.next(), if stdin_open => {
                let line = match line {
                    Some(Ok(Line::Text(line))) => Some(line),
                    // A bad line is the daemon's to refuse: pass on what it can judge.
                    Some(Ok(Line::NotUtf8)) => {
                        let e = RpcError::parse_error("the line is not UTF-8");
                        write_frame(&mut stdout, &error_response(None, &e)).await?;
                        continue;
                    }
                    // Whoever waits on it is told, when the line's edges show who: a request
                    // is refused under its own id; an answer to the daemon's question goes on
                    // as an error, so the question does not wait out its timeout.
                    Some(Ok(Line::TooLong(edges))) => {
                        let e = RpcError::invalid_request(format!("message longer than mcpx serve accepts ({MAX_LINE} bytes)"));
                        match edges.read() {
                            Some(Dropped::Response(id)) => Some(error_response(Some(&id.to_value()), &e).to_string()),
                            Some(Dropped::Request(id)) => {
                                write_frame(&mut stdout, &error_response(Some(&id.to_value()), &e)).await?;
                                continue;
                            }
                            Some(Dropped::Unidentified) | None => {
                                write_frame(&mut stdout, &error_response(None, &e)).await?;
                                continue;
                            }
                        }
                    }
                    Some(Err(_)) | None => None,
                };
                let Some(line) = line else {
                    // The client is done: pass the end on and deliver what is still owed.
                    stdin_open = false;
                    match upstream.as_mut() {
                        Some(conn) => {
                            let _ = conn.writer.shutdown().await;
                            continue;
                        }
                        None => break,
                    }
                };
                if upstream.is_none() {
                    match connect(&daemon, &args, &mut client).await {
                        Ok(conn) => upstream = Some(conn),
                        Err(e) => {
                            tracing::warn!("cannot reach the mcpx daemon: {e:#}");
                            refuse(&mut stdout, &line, &e.to_string()).await?;
                            continue;
                        }
                    }
                }
                client.note_outgoing(&line);
                let conn = upstream.as_mut().expect("connected above");
                if write_line(&mut conn.writer, line).await.is_err() {
                    upstream = None;
                    client.fail_in_flight(&mut stdout).await?;
                }
            }
            line = next_line(&mut upstream) => match line {
                Some(line) => {
                    if client.note_incoming(&line) {
                        write_line(&mut stdout, line).await?;
                    }
                }
                None => {
                    upstream = None;
                    if !stdin_open {
                        client.fail_in_flight(&mut stdout).await?;
                        break;
                    }
                    tracing::warn!("the mcpx daemon went away; requests in flight fail, the next one reconnects");
                    client.fail_in_flight(&mut stdout).await?;
                }
            },
        }
    }
    Ok(())
}

/// One relayed stream to the daemon.
struct Connection {
    lines: FramedRead<tokio::io::ReadHalf<Io>, Lines>,
    writer: tokio::io::WriteHalf<Io>,
}

type Io = hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>;

impl Connection {
    async fn send(&mut self, line: &str) -> std::io::Result<()> {
        write_line(&mut self.writer, line.to_owned()).await
    }
}

async fn next_line(upstream: &mut Option<Connection>) -> Option<String> {
    match upstream {
        Some(conn) => loop {
            match conn.lines.next().await {
                Some(Ok(Line::Text(line))) => return Some(line),
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return None,
            }
        },
        None => std::future::pending().await,
    }
}

async fn connect(daemon: &Daemon, args: &Args, client: &mut Client) -> anyhow::Result<Connection> {
    let stream = daemon.connect_or_start(args.config.as_deref()).await?;
    let io = client::upgrade_to_stdio(stream, args.session.as_deref()).await?;
    let (reader, writer) = tokio::io::split(io);
    let mut conn = Connection { lines: FramedRead::new(reader, Lines::new(MAX_LINE)), writer };
    if let Some((id, line)) = &client.initialize {
        client.swallow = Some(id.clone());
        conn.send(line).await?;
        conn.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await?;
    }
    Ok(conn)
}

impl Client {
    fn note_outgoing(&mut self, line: &str) {
        // Peeked, not parsed: the daemon reads the message; the relay only keeps books.
        let Some((id, Some(method))) = message::peek(line.as_bytes()) else {
            return;
        };
        if method == "initialize" {
            self.initialize = Some((id.clone(), line.to_owned()));
        }
        self.in_flight.insert(id);
    }

    /// Whether a line from the daemon goes on to the client.
    fn note_incoming(&mut self, line: &str) -> bool {
        if let Some((id, None)) = message::peek(line.as_bytes()) {
            if self.swallow.as_ref() == Some(&id) {
                self.swallow = None;
                return false;
            }
            self.in_flight.remove(&id);
        }
        true
    }

    async fn fail_in_flight(&mut self, stdout: &mut Stdout) -> std::io::Result<()> {
        self.swallow = None;
        let e = RpcError::internal("the mcpx daemon went away while this request was in flight");
        for id in self.in_flight.drain() {
            write_frame(stdout, &error_response(Some(&id.to_value()), &e)).await?;
        }
        Ok(())
    }
}

/// Answers a request that could not be relayed at all.
async fn refuse(stdout: &mut Stdout, line: &str, reason: &str) -> std::io::Result<()> {
    if let Ok(Message::Request { id, .. }) = Message::parse(line.as_bytes()).and_then(Message::classify) {
        let e = RpcError::internal(format!("cannot reach the mcpx daemon: {reason}"));
        write_frame(stdout, &error_response(Some(&id.to_value()), &e)).await?;
    }
    Ok(())
}

/// One message, newline included, in one write: the reader on the other side wakes once.
async fn write_line<W: AsyncWriteExt + Unpin>(writer: &mut W, mut line: String) -> std::io::Result<()> {
    line.push('\n');
    writer.write_all(line.as_bytes()).await?;
    writer.flush().await
}

async fn write_frame(stdout: &mut Stdout, frame: &Value) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(frame).expect("a JSON value serializes");
    line.push(b'\n');
    stdout.write_all(&line).await?;
    stdout.flush().await
}
