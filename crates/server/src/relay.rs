//! The relay of `mcpx serve`: the client's stdio on one side, a daemon's relayed stdio
//! stream (`GET /v1/stdio`, served by `stdio`) on the other, one line at a time each way.
//! How that stream is reached (the checked socket, the upgrade) is the caller's: it hands
//! [`run`] a way to connect.
//!
//! It keeps just enough state to behave well when the daemon goes away: the requests in
//! flight (they get an error at once) and the `initialize` of a handshake-era client
//! (replayed to the next daemon connection, so the client's session carries on). It only
//! peeks at a line's id and method, never parses or copies a line it passes on: it is on
//! the path of every call an agent host makes.

use std::collections::HashSet;
use std::fmt::{self, Display};
use std::io;

use futures::StreamExt;
use mcpx_gateway::{Line, Lines};
use mcpx_protocol::dropped::Dropped;
use mcpx_protocol::message::{self, error_response};
use mcpx_protocol::{Message, RequestId, RpcError};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio_util::codec::FramedRead;

/// Longest line accepted on stdin or from the daemon. The daemon enforces its own
/// `limits.maxLineBytes`; this only bounds the relay's memory.
pub const MAX_LINE: usize = 64 * 1024 * 1024;

/// Relays `stdin` to the daemon and the daemon's lines to `stdout`, until the client has
/// closed `stdin` and been given everything still owed to it.
///
/// `connect` opens a stream to the daemon; it is called for a line that arrives with no
/// stream open: the first, and the first after the daemon went away. When it fails, the
/// line's request is answered with that error and the next line tries again. Fails only
/// when `stdout` can no longer be written.
///
/// ```no_run
/// # async fn example() -> std::io::Result<()> {
/// // Any byte stream will do: here, one end of an in-memory pipe, good for one connection.
/// let (daemon, _daemon_side) = tokio::io::duplex(64 * 1024);
/// let mut daemon = Some(daemon);
/// let connect = move || {
///     let stream = daemon.take();
///     async move { stream.ok_or("no daemon") }
/// };
/// mcpx_server::relay::run(connect, tokio::io::stdin(), tokio::io::stdout()).await
/// # }
/// ```
pub async fn run<S, E, F>(
    connect: impl FnMut() -> F,
    stdin: impl AsyncRead + Unpin,
    stdout: impl AsyncWrite + Unpin,
) -> io::Result<()>
where
    F: Future<Output = Result<S, E>>,
    S: AsyncRead + AsyncWrite,
    E: Display,
{
    relay(connect, stdin, stdout, MAX_LINE).await
}

async fn relay<S, E, F>(
    mut connect: impl FnMut() -> F,
    stdin: impl AsyncRead + Unpin,
    mut stdout: impl AsyncWrite + Unpin,
    max_line: usize,
) -> io::Result<()>
where
    F: Future<Output = Result<S, E>>,
    S: AsyncRead + AsyncWrite,
    E: Display,
{
    let mut stdin = FramedRead::new(stdin, Lines::new(max_line));
    let mut client = Client::default();
    let mut daemon: Option<Connection<S>> = None;
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
                        let e = RpcError::invalid_request(format!("message longer than mcpx serve accepts ({max_line} bytes)"));
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
                    match daemon.as_mut() {
                        Some(conn) => {
                            let _ = conn.writer.shutdown().await;
                            continue;
                        }
                        None => break,
                    }
                };
                if daemon.is_none() {
                    match Connection::open(&mut connect, &mut client, max_line).await {
                        Ok(conn) => daemon = Some(conn),
                        Err(e) => {
                            tracing::warn!("cannot reach the mcpx daemon: {e:#}");
                            refuse(&mut stdout, &line, &e.to_string()).await?;
                            continue;
                        }
                    }
                }
                client.note_outgoing(&line);
                let conn = daemon.as_mut().expect("connected above");
                if write_line(&mut conn.writer, line).await.is_err() {
                    daemon = None;
                    client.fail_in_flight(&mut stdout).await?;
                }
            }
            line = next_line(&mut daemon) => match line {
                Some(line) => {
                    if client.note_incoming(&line) {
                        write_line(&mut stdout, line).await?;
                    }
                }
                None => {
                    daemon = None;
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

/// What the relay remembers about the client's traffic.
#[derive(Default)]
struct Client {
    in_flight: HashSet<RequestId>,
    /// The client's `initialize` line, replayed when the daemon connection is replaced.
    initialize: Option<(RequestId, String)>,
    /// The id of a replayed `initialize`, whose answer the client already had.
    swallow: Option<RequestId>,
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

    async fn fail_in_flight(&mut self, stdout: &mut (impl AsyncWrite + Unpin)) -> io::Result<()> {
        self.swallow = None;
        let e = RpcError::internal("the mcpx daemon went away while this request was in flight");
        for id in self.in_flight.drain() {
            write_frame(stdout, &error_response(Some(&id.to_value()), &e)).await?;
        }
        Ok(())
    }
}

/// One relayed stream to the daemon.
struct Connection<S> {
    lines: FramedRead<ReadHalf<S>, Lines>,
    writer: WriteHalf<S>,
}

impl<S: AsyncRead + AsyncWrite> Connection<S> {
    /// A new stream, carrying on the client's session: its `initialize`, if it sent one,
    /// goes first, and its answer is not passed on again.
    async fn open<E, F>(
        connect: &mut impl FnMut() -> F,
        client: &mut Client,
        max_line: usize,
    ) -> Result<Connection<S>, Unreachable<E>>
    where
        F: Future<Output = Result<S, E>>,
    {
        let stream = connect().await.map_err(Unreachable::Connect)?;
        let (reader, writer) = tokio::io::split(stream);
        let mut conn = Connection { lines: FramedRead::new(reader, Lines::new(max_line)), writer };
        if let Some((id, line)) = &client.initialize {
            client.swallow = Some(id.clone());
            conn.send(line).await.map_err(Unreachable::Replay)?;
            conn.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .await
                .map_err(Unreachable::Replay)?;
        }
        Ok(conn)
    }

    async fn send(&mut self, line: &str) -> io::Result<()> {
        write_line(&mut self.writer, line.to_owned()).await
    }
}

/// Why no stream to the daemon could be opened.
enum Unreachable<E> {
    Connect(E),
    /// The stream opened, but the client's `initialize` could not be replayed on it.
    Replay(io::Error),
}

impl<E: Display> Display for Unreachable<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The formatter passes on as it is, so `{:#}` still shows a cause's whole chain.
        match self {
            Unreachable::Connect(e) => e.fmt(f),
            Unreachable::Replay(e) => e.fmt(f),
        }
    }
}

/// The next line from the daemon; `None` when it is gone. Never ready with no stream open.
async fn next_line<S: AsyncRead>(daemon: &mut Option<Connection<S>>) -> Option<String> {
    match daemon {
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

/// Answers a request that could not be relayed at all.
async fn refuse(stdout: &mut (impl AsyncWrite + Unpin), line: &str, reason: &str) -> io::Result<()> {
    if let Ok(Message::Request { id, .. }) = Message::parse(line.as_bytes()).and_then(Message::classify) {
        let e = RpcError::internal(format!("cannot reach the mcpx daemon: {reason}"));
        write_frame(stdout, &error_response(Some(&id.to_value()), &e)).await?;
    }
    Ok(())
}

/// One message, newline included, in one write: the reader on the other side wakes once.
async fn write_line<W: AsyncWrite + Unpin>(writer: &mut W, mut line: String) -> io::Result<()> {
    line.push('\n');
    writer.write_all(line.as_bytes()).await?;
    writer.flush().await
}

async fn write_frame<W: AsyncWrite + Unpin>(stdout: &mut W, frame: &Value) -> io::Result<()> {
    let mut line = serde_json::to_vec(frame).expect("a JSON value serializes");
    line.push(b'\n');
    stdout.write_all(&line).await?;
    stdout.flush().await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use serde_json::json;
    use tokio::io::{AsyncBufReadExt, BufReader, DuplexStream};
    use tokio::sync::mpsc;
    use tokio::task::JoinHandle;

    use super::*;

    const PIPE: usize = 64 * 1024;
    /// Long past anything in memory takes. The tests run on a paused clock, which jumps
    /// ahead when every task waits: a relay that never answers fails its test at once.
    const STALL: Duration = Duration::from_secs(60);

    async fn unstalled<T>(what: &str, step: impl Future<Output = T>) -> T {
        tokio::time::timeout(STALL, step).await.unwrap_or_else(|_| panic!("stalled waiting for {what}"))
    }

    /// A relay whose stdio and daemon connections are in the test's hands.
    struct Harness {
        stdin: DuplexStream,
        stdout: BufReader<DuplexStream>,
        /// The daemon's end of each connection the relay opened, in order.
        connections: mpsc::UnboundedReceiver<Daemon>,
        relay: JoinHandle<io::Result<()>>,
    }

    /// The daemon's end of one relayed stream.
    struct Daemon(BufReader<DuplexStream>);

    impl Harness {
        fn start(max_line: usize) -> Harness {
            let (opened, connections) = mpsc::unbounded_channel();
            let connect = move || {
                let (relay_end, daemon_end) = tokio::io::duplex(PIPE);
                let _ = opened.send(Daemon(BufReader::new(daemon_end)));
                async move { Ok::<_, &str>(relay_end) }
            };
            let (stdin, relay_stdin) = tokio::io::duplex(PIPE);
            let (relay_stdout, stdout) = tokio::io::duplex(PIPE);
            let relay = tokio::spawn(relay(connect, relay_stdin, relay_stdout, max_line));
            Harness { stdin, stdout: BufReader::new(stdout), connections, relay }
        }

        async fn send(&mut self, frame: Value) {
            self.send_bytes(format!("{frame}\n").as_bytes()).await
        }

        async fn send_bytes(&mut self, bytes: &[u8]) {
            self.stdin.write_all(bytes).await.expect("the relay reads stdin");
        }

        /// The next frame on stdout.
        async fn read(&mut self) -> Value {
            read_frame(&mut self.stdout).await.expect("a frame on stdout")
        }

        /// The next connection the relay opens to the daemon.
        async fn connection(&mut self) -> Daemon {
            unstalled("a connection", self.connections.recv()).await.expect("a connection")
        }

        /// Closes stdin: the frames still written to stdout, once the relay has ended.
        async fn close(self) -> Vec<Value> {
            let Harness { stdin, mut stdout, relay, .. } = self;
            drop(stdin);
            let mut rest = Vec::new();
            while let Some(frame) = read_frame(&mut stdout).await {
                rest.push(frame);
            }
            unstalled("the relay to end", relay).await.expect("the relay does not panic").expect("the relay ends well");
            rest
        }
    }

    impl Daemon {
        /// The next line the relay sent, as it came; `None` once the relay closed its end.
        async fn line(&mut self) -> Option<String> {
            let mut line = String::new();
            let read =
                unstalled("a line to the daemon", self.0.read_line(&mut line)).await.expect("the daemon's end reads");
            (read > 0).then(|| line.trim_end_matches('\n').to_owned())
        }

        async fn read(&mut self) -> Value {
            serde_json::from_str(&self.line().await.expect("a line from the relay")).expect("JSON")
        }

        async fn send(&mut self, frame: Value) {
            self.0.get_mut().write_all(format!("{frame}\n").as_bytes()).await.expect("the relay reads the daemon");
        }
    }

    async fn read_frame(reader: &mut BufReader<DuplexStream>) -> Option<Value> {
        let mut line = String::new();
        match unstalled("a line on stdout", reader.read_line(&mut line)).await.expect("stdout reads") {
            0 => None,
            _ => Some(serde_json::from_str(&line).expect("a JSON line on stdout")),
        }
    }

    fn request(id: Value, method: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}})
    }

    fn answer(id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {}})
    }

    fn error_message(frame: &Value) -> &str {
        frame["error"]["message"].as_str().unwrap_or_else(|| panic!("an error: {frame}"))
    }

    #[tokio::test(start_paused = true)]
    async fn requests_in_flight_each_get_an_error_when_the_daemon_goes_away() {
        let mut relay = Harness::start(MAX_LINE);
        relay.send(request(json!(1), "tools/list")).await;
        relay.send(request(json!("two"), "tools/call")).await;
        let mut daemon = relay.connection().await;
        daemon.read().await;
        daemon.read().await;
        drop(daemon);
        let mut failed = vec![relay.read().await, relay.read().await];
        failed.sort_by_key(|f| f["id"].to_string());
        assert_eq!(failed.iter().map(|f| f["id"].clone()).collect::<Vec<_>>(), [json!("two"), json!(1)]);
        for frame in &failed {
            assert_eq!(error_message(frame), "the mcpx daemon went away while this request was in flight");
        }
        assert_eq!(relay.close().await, Vec::<Value>::new(), "each request fails once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_notification_or_an_answered_request_gets_no_error_when_the_daemon_goes_away() {
        let mut relay = Harness::start(MAX_LINE);
        relay.send(json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})).await;
        relay.send(request(json!(1), "tools/list")).await;
        relay.send(request(json!(2), "tools/list")).await;
        let mut daemon = relay.connection().await;
        for _ in 0..3 {
            daemon.read().await;
        }
        daemon.send(answer(json!(1))).await;
        assert_eq!(relay.read().await, answer(json!(1)));
        drop(daemon);
        let failed = relay.read().await;
        assert_eq!(failed["id"], json!(2), "only the unanswered request fails: {failed}");
        assert_eq!(relay.close().await, Vec::<Value>::new());
    }

    #[tokio::test(start_paused = true)]
    async fn an_initialize_is_replayed_once_to_the_next_connection_and_its_answer_is_not_passed_on_again() {
        let mut relay = Harness::start(MAX_LINE);
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        relay.send(initialize.clone()).await;
        let mut first = relay.connection().await;
        let sent = first.line().await.expect("the initialize");
        first.send(answer(json!(0))).await;
        assert_eq!(relay.read().await, answer(json!(0)));
        relay.send(initialized.clone()).await;
        relay.send(request(json!(1), "tools/list")).await;
        assert_eq!(first.read().await, initialized);
        assert_eq!(first.read().await, request(json!(1), "tools/list"));
        drop(first);
        assert_eq!(relay.read().await["id"], json!(1), "the request in flight fails");

        relay.send(request(json!(2), "tools/list")).await;
        let mut second = relay.connection().await;
        assert_eq!(second.line().await.as_deref(), Some(sent.as_str()), "the client's own initialize line");
        assert_eq!(second.read().await, initialized);
        assert_eq!(second.read().await, request(json!(2), "tools/list"));
        second.send(answer(json!(0))).await;
        second.send(answer(json!(2))).await;
        assert_eq!(relay.read().await, answer(json!(2)), "the replayed initialize's answer is not passed on");
        let Harness { stdin, .. } = &mut relay;
        stdin.shutdown().await.expect("stdin closes");
        assert_eq!(second.line().await, None, "initialize went to this connection once");
        drop(second);
        assert_eq!(relay.close().await, Vec::<Value>::new());
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_gets_the_reason_when_the_daemon_cannot_be_reached_and_the_next_line_tries_again() {
        let attempts = Arc::new(AtomicUsize::new(0));
        let counted = attempts.clone();
        let connect = move || {
            counted.fetch_add(1, Ordering::Relaxed);
            async { Err::<DuplexStream, _>("no daemon here") }
        };
        let (mut stdin, relay_stdin) = tokio::io::duplex(PIPE);
        let (relay_stdout, stdout) = tokio::io::duplex(PIPE);
        let pump = tokio::spawn(relay(connect, relay_stdin, relay_stdout, MAX_LINE));
        let lines = format!(
            "{}\n{}\n",
            json!({"jsonrpc": "2.0", "method": "notifications/progress"}),
            request(json!(7), "tools/list")
        );
        stdin.write_all(lines.as_bytes()).await.unwrap();
        drop(stdin);
        let mut stdout = BufReader::new(stdout);
        let refused = read_frame(&mut stdout).await.expect("the request is answered");
        assert_eq!(refused["id"], json!(7));
        assert_eq!(error_message(&refused), "cannot reach the mcpx daemon: no daemon here");
        assert_eq!(read_frame(&mut stdout).await, None, "the notification gets no answer");
        unstalled("the relay to end", pump).await.unwrap().unwrap();
        assert_eq!(attempts.load(Ordering::Relaxed), 2, "each line tried to connect");
    }

    #[tokio::test(start_paused = true)]
    async fn an_over_long_request_is_refused_under_its_id_and_not_relayed() {
        let mut relay = Harness::start(1024);
        let long = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"pad": "x".repeat(4096)}});
        relay.send(long).await;
        let refused = relay.read().await;
        assert_eq!((&refused["id"], &refused["error"]["code"]), (&json!(5), &json!(-32600)), "{refused}");
        assert_eq!(error_message(&refused), "message longer than mcpx serve accepts (1024 bytes)");
        relay.send(request(json!(6), "tools/list")).await;
        let mut daemon = relay.connection().await;
        assert_eq!(daemon.read().await, request(json!(6), "tools/list"), "the first line the daemon sees");
    }

    #[tokio::test(start_paused = true)]
    async fn an_over_long_answer_to_the_daemons_question_goes_on_as_an_error_under_its_id() {
        let mut relay = Harness::start(1024);
        relay.send(request(json!(1), "tools/call")).await;
        let mut daemon = relay.connection().await;
        daemon.read().await;
        relay.send(json!({"jsonrpc": "2.0", "id": "q1", "result": {"pad": "x".repeat(4096)}})).await;
        let failed = daemon.read().await;
        assert_eq!((&failed["id"], &failed["error"]["code"]), (&json!("q1"), &json!(-32600)), "{failed}");
        daemon.send(answer(json!(1))).await;
        assert_eq!(relay.read().await, answer(json!(1)), "nothing for the client about its own answer");
    }

    #[tokio::test(start_paused = true)]
    async fn answers_still_owed_are_delivered_after_the_client_closes_stdin() {
        let mut relay = Harness::start(MAX_LINE);
        relay.send(request(json!(1), "tools/call")).await;
        let mut daemon = relay.connection().await;
        daemon.read().await;
        let Harness { stdin, .. } = &mut relay;
        stdin.shutdown().await.expect("stdin closes");
        assert_eq!(daemon.line().await, None, "the end of input is passed on");
        daemon.send(answer(json!(1))).await;
        drop(daemon);
        assert_eq!(relay.close().await, [answer(json!(1))]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_line_that_is_not_utf8_gets_a_parse_error_and_opens_no_connection() {
        let mut relay = Harness::start(MAX_LINE);
        relay.send_bytes(b"{\"id\": \"\xff\"}\n").await;
        let refused = relay.read().await;
        assert_eq!(refused["error"]["code"], json!(-32700), "{refused}");
        assert!(refused.get("id").is_none());
        // The relay connects before it writes a line on: none is open by now, nor ever will be.
        assert!(relay.connections.try_recv().is_err(), "no connection was opened");
        assert_eq!(relay.close().await, Vec::<Value>::new());
    }
}
