//! Code mode: one JavaScript program per `mcpx_exec` call, run in a QuickJS sandbox.
//!
//! The script is the body of an async function. It reaches the world only through the
//! globals the prelude builds (`tools`, `call`, `search`, `artifact`, `console`), and
//! each of those becomes a [`HostRequest`] the caller answers: this crate knows nothing of
//! pools, identities or transports, so a script can reach exactly what its caller lets it.
//! The engine runs on its own thread, so a script that never yields blocks only itself;
//! every [`Limits`] field is enforced by the engine, not by the script's good will.

mod engine;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// What one script may use. Every field is a setting of the daemon.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Wall-clock time for the whole script, tool calls included.
    pub timeout: Duration,
    /// Bytes the engine may allocate.
    pub memory_bytes: usize,
    /// Bytes of native stack the engine may use (deep recursion stops here).
    pub stack_bytes: usize,
    /// Tool calls one script may make; each `search()` counts as one.
    pub max_tool_calls: usize,
    /// Bytes of console output, the returned value and the links to the artifacts the
    /// script kept (see [`link_bytes`]).
    pub max_output_bytes: usize,
}

/// A limit a script ran into, named as the setting that sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Timeout,
    Memory,
    Stack,
    ToolCalls,
    Output,
}

impl Limit {
    /// The setting's name, as the config and the error result spell it.
    pub fn setting(self) -> &'static str {
        match self {
            Limit::Timeout => "timeoutMs",
            Limit::Memory => "memoryBytes",
            Limit::Stack => "stackBytes",
            Limit::ToolCalls => "maxToolCalls",
            Limit::Output => "maxOutputBytes",
        }
    }

    fn describe(self, limits: &Limits) -> String {
        match self {
            Limit::Timeout => format!("the script ran past its time limit ({} ms)", limits.timeout.as_millis()),
            Limit::Memory => format!("the script used more than its memory limit ({} bytes)", limits.memory_bytes),
            Limit::Stack => format!("the script recursed past its stack limit ({} bytes)", limits.stack_bytes),
            Limit::ToolCalls => format!("the script made more than {} tool calls and searches", limits.max_tool_calls),
            Limit::Output => format!(
                "the script's output (console, result and artifact links) passed {} bytes",
                limits.max_output_bytes
            ),
        }
    }
}

/// Something a script asks of its host.
#[derive(Clone, Debug, PartialEq)]
pub enum HostCall {
    /// `tools.<server>.<tool>(arguments)` (`by_identifier`: the names may be the
    /// identifiers of [`identifier`]) or `call(server, tool, arguments)` (exact names).
    Tool { server: String, tool: String, arguments: Value, by_identifier: bool },
    /// `search(query)`.
    Search { query: String },
    /// `artifact(name, data, mimeType)`.
    Artifact { name: String, mime_type: String, data: Vec<u8> },
}

/// One [`HostCall`] waiting for its answer. Answer it with [`HostRequest::answer`]; one
/// dropped unanswered fails the script's promise when the script ends, never earlier.
#[derive(Debug)]
pub struct HostRequest {
    pub call: HostCall,
    reply: engine::Reply,
}

impl HostRequest {
    /// Settles the script's promise: `Ok` with the JSON the prelude expects for the call
    /// (`{server, tool, result}` for a tool, the tool list for a search, `{uri}` for an
    /// artifact), `Err` with a message the script sees as an `Error`.
    pub fn answer(self, answer: Result<Value, String>) {
        self.reply.send(answer);
    }
}

/// How a script ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub ended: Ended,
    /// Console output, one entry per call, in order.
    pub logs: Vec<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Ended {
    /// The value the script returned, as JSON (`undefined` becomes `null`).
    Returned(Value),
    /// The script threw (or failed to compile): the error's text and its stack.
    Threw { message: String, stack: Option<String> },
    /// The engine stopped the script at a limit.
    Stopped { limit: Limit, message: String },
}

/// What a running script wants next.
#[derive(Debug)]
pub enum Event {
    Request(HostRequest),
    Done(Outcome),
}

/// One script running on its own engine thread. Dropping it stops the script.
pub struct Run {
    requests: mpsc::UnboundedReceiver<HostRequest>,
    done: oneshot::Receiver<Outcome>,
    stop: Arc<AtomicBool>,
}

impl Run {
    /// Starts `script` (the body of an async function) under `limits`, on an engine
    /// built for it. [`Engines::start`] does the same without waiting for the build.
    pub fn start(script: String, limits: Limits) -> std::io::Result<Run> {
        let prepared = engine::Prepared::start(limits.stack_bytes, Box::new(|| {}))?;
        Ok(Run::on(prepared, script, limits))
    }

    fn on(prepared: engine::Prepared, script: String, limits: Limits) -> Run {
        let (requests, done, stop) = prepared.run(script, limits);
        Run { requests, done, stop }
    }

    /// The next request of the script, or how it ended. Requests come before the end.
    pub async fn next(&mut self) -> Event {
        if let Some(request) = self.requests.recv().await {
            return Event::Request(request);
        }
        match (&mut self.done).await {
            Ok(outcome) => Event::Done(outcome),
            Err(_) => Event::Done(Outcome {
                ended: Ended::Threw { message: "the script engine stopped unexpectedly".into(), stack: None },
                logs: Vec::new(),
            }),
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Where scripts get their engines: one engine is kept built and waiting, so a script
/// does not wait for a runtime, a context and the prelude (and a thread) to be made.
/// Every script still runs on a fresh engine of its own, used once; the next one is
/// built on the finished script's thread, after its answer has gone.
#[derive(Default)]
pub struct Engines {
    spare: Arc<Mutex<Option<engine::Prepared>>>,
}

impl Engines {
    /// As [`Run::start`], on the waiting engine when it has room for `limits`.
    pub fn start(&self, script: String, limits: Limits) -> std::io::Result<Run> {
        let spare = self.spare.lock().expect("spare engine lock").take().filter(|p| p.stack_room >= limits.stack_bytes);
        let prepared = match spare {
            Some(prepared) => prepared,
            None => {
                engine::Prepared::start(limits.stack_bytes, refill(Arc::downgrade(&self.spare), limits.stack_bytes))?
            }
        };
        Ok(Run::on(prepared, script, limits))
    }
}

/// Builds the next waiting engine once a script ended, unless one is waiting already.
fn refill(slot: Weak<Mutex<Option<engine::Prepared>>>, stack_room: usize) -> Box<dyn FnOnce() + Send> {
    Box::new(move || {
        let Some(spare) = slot.upgrade() else { return };
        let mut spare = spare.lock().expect("spare engine lock");
        if spare.is_none() {
            *spare = engine::Prepared::start(stack_room, refill(slot, stack_room)).ok();
        }
    })
}

/// The bytes the link to a kept artifact adds to a script's result, as counted against
/// [`Limits::max_output_bytes`]: its name and media type as JSON strings (escapes
/// included) plus the fixed part of a `resource_link` (type, URI, size and field names).
pub fn link_bytes(name: &str, mime_type: &str) -> usize {
    const FIXED: usize = 128;
    let quoted = |s: &str| serde_json::to_string(s).map_or(s.len(), |q| q.len());
    FIXED + quoted(name) + quoted(mime_type)
}

/// The JavaScript identifier a server or tool name is reachable by as
/// `tools.<server>.<tool>`: characters outside `[A-Za-z0-9_$]` become `_`, and a name
/// that starts with a digit gets a leading `_`. Deterministic, so `mcpx_search` can show it.
pub fn identifier(name: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '$' { c } else { '_' }).collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// How a script calls a tool, as `mcpx_search` shows it: `tools.<server>.<tool>(args)`,
/// or `call("<server>", "<tool>", args)` where a name cannot be a property (`then`, which
/// `await` looks up).
pub fn accessor(server: &str, tool: &str) -> String {
    let (s, t) = (identifier(server), identifier(tool));
    if s == "then" || t == "then" {
        format!("call({server:?}, {tool:?}, args)")
    } else {
        format!("tools.{s}.{t}(args)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits() -> Limits {
        Limits {
            timeout: Duration::from_secs(5),
            memory_bytes: 32 * 1024 * 1024,
            stack_bytes: 512 * 1024,
            max_tool_calls: 10,
            max_output_bytes: 64 * 1024,
        }
    }

    /// Runs a script whose tool `echo` returns its arguments as structured content, `text`
    /// returns them as JSON text and `fail` is an error result.
    async fn run(script: &str, limits: Limits) -> Outcome {
        drive(Run::start(script.into(), limits).unwrap()).await
    }

    async fn drive(mut run: Run) -> Outcome {
        loop {
            match run.next().await {
                Event::Done(outcome) => return outcome,
                Event::Request(request) => {
                    let answer = match &request.call {
                        HostCall::Tool { server, tool, arguments, .. } => {
                            let result = match tool.as_str() {
                                "echo" => json!({ "content": [], "structuredContent": arguments }),
                                "text" => json!({ "content": [{ "type": "text", "text": arguments.to_string() }] }),
                                "fail" => {
                                    json!({ "content": [{ "type": "text", "text": "no such thing" }], "isError": true })
                                }
                                _ => json!({ "content": [{ "type": "text", "text": "plain words" }] }),
                            };
                            Ok(json!({ "server": server, "tool": tool, "result": result }))
                        }
                        HostCall::Search { query } => Ok(json!([{ "server": "s", "tool": query }])),
                        HostCall::Artifact { name, .. } => Ok(json!({ "uri": format!("mcpx://artifacts/{name}") })),
                    };
                    request.answer(answer);
                }
            }
        }
    }

    fn returned(outcome: &Outcome) -> &Value {
        match &outcome.ended {
            Ended::Returned(v) => v,
            other => panic!("expected a returned value, got {other:?}"),
        }
    }

    fn stopped_by(outcome: &Outcome) -> Limit {
        match &outcome.ended {
            Ended::Stopped { limit, .. } => *limit,
            other => panic!("expected a limit, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_script_awaits_tools_and_returns_what_it_builds() {
        let out = run(
            r#"const a = await tools.s.echo({ n: 1 });
               const [b, c] = await Promise.all([call("s", "text", { n: 2 }), tools.s.other()]);
               console.log("got", a.n, b);
               return { sum: a.n + b.n, c };"#,
            limits(),
        )
        .await;
        assert_eq!(returned(&out), &json!({ "sum": 3, "c": "plain words" }));
        assert_eq!(out.logs, vec!["got 1 {\"n\":2}".to_owned()]);
    }

    #[tokio::test]
    async fn a_tool_error_throws_with_server_tool_and_content() {
        let out = run(
            r#"try { await tools.s.fail({}); return "not thrown"; }
               catch (e) { return { message: e.message, server: e.server, tool: e.tool, text: e.content[0].text }; }"#,
            limits(),
        )
        .await;
        assert_eq!(
            returned(&out),
            &json!({ "message": "s.fail failed: no such thing", "server": "s", "tool": "fail", "text": "no such thing" })
        );
    }

    #[tokio::test]
    async fn an_uncaught_error_ends_the_script_with_its_message() {
        let out = run("await tools.s.fail();", limits()).await;
        assert!(
            matches!(&out.ended, Ended::Threw { message, .. } if message == "Error: s.fail failed: no such thing"),
            "{out:?}"
        );
        let out = run("return (", limits()).await;
        assert!(matches!(&out.ended, Ended::Threw { message, .. } if message.starts_with("SyntaxError")), "{out:?}");
    }

    #[tokio::test]
    async fn busy_loops_with_and_without_await_stop_at_the_timeout() {
        let short = Limits { timeout: Duration::from_millis(300), ..limits() };
        assert_eq!(stopped_by(&run("while (true) {}", short.clone()).await), Limit::Timeout);
        assert_eq!(
            stopped_by(
                &run(
                    "while (true) { await tools.s.echo({}); }",
                    Limits { max_tool_calls: usize::MAX, ..short.clone() }
                )
                .await
            ),
            Limit::Timeout
        );
        assert_eq!(
            stopped_by(&run("try { while (true) {} } catch (e) { return 'caught'; }", short).await),
            Limit::Timeout
        );
    }

    #[tokio::test]
    async fn memory_stack_calls_and_output_are_limited() {
        let out = run("const a = []; while (true) a.push(new Array(100000).fill(1));", limits()).await;
        assert_eq!(stopped_by(&out), Limit::Memory);
        assert_eq!(
            stopped_by(&run("function f(n) { return f(n + 1) + 1; } return f(0);", limits()).await),
            Limit::Stack
        );
        let out = run(
            "for (let i = 0; i < 20; i++) { try { await tools.s.echo({}); } catch {} } return 'went on';",
            limits(),
        )
        .await;
        assert_eq!(stopped_by(&out), Limit::ToolCalls);
        assert_eq!(stopped_by(&run("while (true) console.log('x'.repeat(1000));", limits()).await), Limit::Output);
        assert_eq!(stopped_by(&run("return 'x'.repeat(100000);", limits()).await), Limit::Output);
    }

    #[tokio::test]
    async fn the_host_is_out_of_reach() {
        let out = run(
            r#"const probes = {
                 require: typeof require, process: typeof process, Deno: typeof Deno, fetch: typeof fetch,
                 std: typeof std, os: typeof os, host: typeof host, XMLHttpRequest: typeof XMLHttpRequest,
               };
               let imported;
               try { await import("/etc/passwd"); imported = "loaded"; } catch (e) { imported = String(e); }
               let reassigned;
               try { globalThis.tools = 1; reassigned = "yes"; } catch (e) { reassigned = e.name; }
               return { probes, imported, reassigned };"#,
            limits(),
        )
        .await;
        let v = returned(&out);
        for (name, kind) in v["probes"].as_object().unwrap() {
            assert_eq!(kind, "undefined", "{name} is reachable");
        }
        assert_ne!(v["imported"], "loaded");
        assert_eq!(v["reassigned"], "TypeError");
    }

    #[tokio::test]
    async fn every_script_gets_a_fresh_engine_even_a_waiting_one() {
        let engines = Engines::default();
        for round in 0..4 {
            let script = "const seen = typeof globalThis.leftover; globalThis.leftover = 1; return seen;";
            let out = drive(engines.start(script.into(), limits()).unwrap()).await;
            assert_eq!(returned(&out), &json!("undefined"), "round {round} saw a global of an earlier script");
            // The next engine is built after the answer: give it the moment it takes.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let tight = Limits { timeout: Duration::from_millis(200), ..limits() };
        let out = drive(engines.start("while (true) {}".into(), tight).unwrap()).await;
        assert!(
            matches!(out.ended, Ended::Stopped { limit: Limit::Timeout, .. }),
            "a waiting engine takes the script's own limits: {out:?}"
        );
    }

    #[tokio::test]
    async fn searches_count_as_tool_calls_even_all_at_once() {
        let out =
            run("await Promise.all(Array.from({ length: 50 }, () => search('x'))); return 'went on';", limits()).await;
        assert_eq!(stopped_by(&out), Limit::ToolCalls);
        let out =
            run("for (let i = 0; i < 20; i++) { try { await search('x'); } catch {} } return 'went on';", limits())
                .await;
        assert_eq!(stopped_by(&out), Limit::ToolCalls);
    }

    #[tokio::test]
    async fn artifact_links_count_as_output() {
        let small = Limits { max_output_bytes: 4096, ..limits() };
        let out = run("try { await artifact('n'.repeat(8192), 'x'); } catch {} return 'went on';", small.clone()).await;
        assert_eq!(stopped_by(&out), Limit::Output);
        let out = run("for (let i = 0; i < 100; i++) await artifact('a' + i, 'x'); return 'went on';", small).await;
        assert_eq!(stopped_by(&out), Limit::Output);
    }

    #[tokio::test]
    async fn search_and_artifacts_go_to_the_host() {
        let out =
            run(r#"return { found: await search("time"), uri: await artifact("a.txt", "hello") };"#, limits()).await;
        assert_eq!(
            returned(&out),
            &json!({ "found": [{ "server": "s", "tool": "time" }], "uri": "mcpx://artifacts/a.txt" })
        );
    }

    #[test]
    fn names_become_identifiers_deterministically() {
        assert_eq!(identifier("get-current_time"), "get_current_time");
        assert_eq!(identifier("my.server"), "my_server");
        assert_eq!(identifier("2fa"), "_2fa");
        assert_eq!(identifier("héllo"), "h_llo");
        assert_eq!(accessor("git", "git-status"), "tools.git.git_status(args)");
        assert_eq!(accessor("a", "then"), "call(\"a\", \"then\", args)");
    }
}
