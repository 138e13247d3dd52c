//! An MCP client over a child's stdin and stdout: one JSON-RPC message per line.
//!
//! Deliberately blocking: a sequential client measures the server best with one `write`
//! and one `poll` + `read` per request, and no runtime of its own adding wake-ups to the
//! figures. Every read has a deadline, so a server that stops answering ends the run
//! instead of hanging it.

use std::io::{Read, Write};
use std::process::{ChildStdin, ChildStdout};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;
use serde_json::Value;

use crate::mcp::{self, EchoCall, Era};

pub struct StdioClient {
    stdin: ChildStdin,
    stdout: ChildStdout,
    /// Bytes read but not yet consumed; `buffer[consumed..]` is the start of the next line.
    buffer: Vec<u8>,
    consumed: usize,
    /// What one `read` fills; allocated once, not zeroed per request.
    chunk: Box<[u8]>,
    /// The outgoing message and its newline, reused.
    line: Vec<u8>,
}

impl StdioClient {
    pub fn new(stdin: ChildStdin, stdout: ChildStdout) -> StdioClient {
        StdioClient {
            stdin,
            stdout,
            buffer: Vec::with_capacity(64 * 1024),
            consumed: 0,
            chunk: vec![0; 64 * 1024].into_boxed_slice(),
            line: Vec::with_capacity(1024),
        }
    }

    /// Opens a session if the era has a handshake.
    pub fn handshake(&mut self, era: Era, deadline: Instant) -> anyhow::Result<()> {
        if let Some((initialize, initialized)) = era.handshake() {
            self.send(initialize.to_string().as_bytes())?;
            let reply = self.reply_to(0, deadline)?;
            mcp::check_id(&reply, 0).context("initialize")?;
            self.send(initialized.to_string().as_bytes())?;
        }
        Ok(())
    }

    /// Sends `call` as request `id` and waits for its answer. Err only when the
    /// connection failed (closed, or no answer by `deadline`); Ok(Err) is a wrong answer.
    pub fn call(&mut self, call: &EchoCall, id: u64, deadline: Instant) -> anyhow::Result<anyhow::Result<()>> {
        self.send(call.request(id).as_bytes())?;
        let reply = self.reply_to(id, deadline)?;
        Ok(call.check(&reply, id))
    }

    /// Sends one request line (`id` inside it) and waits for its answer, whatever it is.
    pub fn request(&mut self, line: &str, id: u64, deadline: Instant) -> anyhow::Result<Value> {
        self.send(line.as_bytes())?;
        self.reply_to(id, deadline)
    }

    fn send(&mut self, message: &[u8]) -> anyhow::Result<()> {
        // One write per message: the newline goes with it, so a reader never sees half a line.
        self.line.clear();
        self.line.extend_from_slice(message);
        self.line.push(b'\n');
        self.stdin.write_all(&self.line).context("writing to the server's stdin")
    }

    /// The next message carrying `id`; notifications, server requests and stale answers
    /// (to a request that timed out earlier) are skipped.
    fn reply_to(&mut self, id: u64, deadline: Instant) -> anyhow::Result<Value> {
        loop {
            let message = self.next_message(deadline)?;
            if message.get("id").and_then(Value::as_u64) == Some(id) && message.get("method").is_none() {
                return Ok(message);
            }
        }
    }

    fn next_message(&mut self, deadline: Instant) -> anyhow::Result<Value> {
        loop {
            if let Some(end) = self.buffer[self.consumed..].iter().position(|&b| b == b'\n') {
                let line = &self.buffer[self.consumed..self.consumed + end];
                let message = serde_json::from_slice(line).with_context(|| {
                    format!("the server wrote a line that is not JSON: {}", String::from_utf8_lossy(line))
                });
                self.consumed += end + 1;
                if self.consumed == self.buffer.len() {
                    self.buffer.clear();
                    self.consumed = 0;
                }
                return message;
            }
            self.buffer.drain(..self.consumed);
            self.consumed = 0;
            self.fill(deadline)?;
        }
    }

    /// Reads whatever the server has written, waiting for it until `deadline`.
    fn fill(&mut self, deadline: Instant) -> anyhow::Result<()> {
        let timeout = deadline.saturating_duration_since(Instant::now());
        // A timeout too long for a timespec waits without one: the deadline is that far anyway.
        let timeout = Timespec::try_from(timeout.max(Duration::from_millis(1))).ok();
        match poll(&mut [PollFd::new(&self.stdout, PollFlags::IN)], timeout.as_ref()) {
            Ok(0) => bail!("no answer within the request timeout"),
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(()),
            Err(e) => return Err(std::io::Error::from(e)).context("waiting for the server's stdout"),
        }
        match self.stdout.read(&mut self.chunk[..]) {
            Ok(0) => bail!("the server closed its stdout"),
            Ok(n) => {
                self.buffer.extend_from_slice(&self.chunk[..n]);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e).context("reading the server's stdout"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use super::*;
    use crate::mcp::Route;

    /// A shell stand-in for a server: answers every line with a canned reply for id 1,
    /// preceded by a notification the client must skip.
    fn canned_server(reply: &str) -> (std::process::Child, StdioClient) {
        let script = format!(
            "while read -r line; do echo '{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}}'; echo '{reply}'; done"
        );
        let mut child =
            Command::new("sh").args(["-c", &script]).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let client = StdioClient::new(child.stdin.take().unwrap(), child.stdout.take().unwrap());
        (child, client)
    }

    #[test]
    fn a_call_skips_notifications_and_checks_the_echo() {
        let arguments = crate::mcp::echo_arguments();
        let reply = serde_json::json!({"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": arguments}});
        let (mut child, mut client) = canned_server(&reply.to_string());
        let call = EchoCall::new(Era::Modern, Route::Direct);
        let deadline = Instant::now() + Duration::from_secs(5);
        assert!(client.call(&call, 1, deadline).unwrap().is_ok());
        drop(client);
        child.wait().unwrap();
    }

    #[test]
    fn a_server_that_never_answers_ends_in_an_error_not_a_hang() {
        let mut child = Command::new("sleep").arg("5").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut client = StdioClient::new(child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let call = EchoCall::new(Era::Modern, Route::Direct);
        let started = Instant::now();
        assert!(client.call(&call, 1, started + Duration::from_millis(100)).is_err());
        assert!(started.elapsed() < Duration::from_secs(2));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
