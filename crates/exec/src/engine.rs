//! The engine thread: one QuickJS runtime per script, driven until the script's promise
//! settles, a limit trips, or the caller goes away. Host requests leave as
//! [`HostRequest`]s; their answers come back on a channel this thread waits on, so the
//! thread sleeps (never spins) while tools run.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use rquickjs::context::EvalOptions;
use rquickjs::function::Func;
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Exception, Function, Object, Persistent, Promise, Runtime, Value as JsValue};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::{Ended, HostCall, HostRequest, Limit, Limits, Outcome};

const PRELUDE: &str = include_str!("prelude.js");

/// How often a script waiting on tools looks at whether its caller went away.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Where the answer to one host request goes.
#[derive(Debug)]
pub(crate) struct Reply {
    id: u64,
    tx: std_mpsc::Sender<(u64, Result<Value, String>)>,
}

impl Reply {
    pub(crate) fn send(self, answer: Result<Value, String>) {
        let _ = self.tx.send((self.id, answer));
    }
}

type Settle = (Persistent<Function<'static>>, Persistent<Function<'static>>);

/// What the host functions share with the driving loop.
struct Host {
    requests: mpsc::UnboundedSender<HostRequest>,
    replies: std_mpsc::Sender<(u64, Result<Value, String>)>,
    pending: HashMap<u64, Settle>,
    next_id: u64,
    tool_calls: usize,
    output_bytes: usize,
    logs: Vec<String>,
    /// The script's limits, known once it is handed over.
    max_tool_calls: usize,
    max_output_bytes: usize,
}

/// A script for a prepared engine, with its limits.
struct Go {
    script: String,
    limits: Limits,
}

/// An engine thread with its runtime, context and globals ready, waiting for a script.
/// Dropped unused, its thread ends.
pub(crate) struct Prepared {
    go: std_mpsc::Sender<Go>,
    pub(crate) requests: mpsc::UnboundedReceiver<HostRequest>,
    pub(crate) done: oneshot::Receiver<Outcome>,
    pub(crate) stop: Arc<AtomicBool>,
    /// The most native stack a script on this thread may be allowed.
    pub(crate) stack_room: usize,
}

impl Prepared {
    /// Starts an engine thread with room for `stack_room` bytes of script stack; it
    /// builds its engine at once and waits. `finished` runs on it after a script ended.
    pub(crate) fn start(stack_room: usize, finished: Box<dyn FnOnce() + Send>) -> std::io::Result<Prepared> {
        let (requests_tx, requests) = mpsc::unbounded_channel();
        let (done_tx, done) = oneshot::channel();
        let (go, go_rx) = std_mpsc::channel::<Go>();
        let stop = Arc::new(AtomicBool::new(false));
        let engine_stop = stop.clone();
        std::thread::Builder::new()
            .name("mcpx-exec".into())
            // QuickJS checks its own limit; the thread needs room above it for the host.
            .stack_size(stack_room + 2 * 1024 * 1024)
            .spawn(move || {
                let Some(outcome) = serve(requests_tx, &go_rx, &engine_stop) else { return };
                let _ = done_tx.send(outcome);
                finished();
            })?;
        Ok(Prepared { go, requests, done, stop, stack_room })
    }

    /// Hands the engine its script.
    pub(crate) fn run(
        self,
        script: String,
        limits: Limits,
    ) -> (mpsc::UnboundedReceiver<HostRequest>, oneshot::Receiver<Outcome>, Arc<AtomicBool>) {
        let _ = self.go.send(Go { script, limits });
        (self.requests, self.done, self.stop)
    }
}

/// The engine thread: prepares, waits for a script (`None` if none comes), runs it.
fn serve(
    requests: mpsc::UnboundedSender<HostRequest>,
    go: &std_mpsc::Receiver<Go>,
    stop: &Arc<AtomicBool>,
) -> Option<Outcome> {
    let (replies_tx, replies) = std_mpsc::channel();
    let host = Rc::new(RefCell::new(Host {
        requests,
        replies: replies_tx,
        pending: HashMap::new(),
        next_id: 0,
        tool_calls: 0,
        output_bytes: 0,
        logs: Vec::new(),
        max_tool_calls: 0,
        max_output_bytes: 0,
    }));
    let tripped = Rc::new(Cell::new(None));
    // No deadline while the engine is built and waits: it starts with the script.
    let deadline = Rc::new(Cell::new(None));
    let engine = Engine::new(&host, &tripped, &deadline, stop);
    let Go { script, limits } = go.recv().ok()?;
    {
        let mut h = host.borrow_mut();
        h.max_tool_calls = limits.max_tool_calls;
        h.max_output_bytes = limits.max_output_bytes;
    }
    let ends_at = Instant::now() + limits.timeout;
    deadline.set(Some(ends_at));
    let ended = match engine {
        Ok(engine) => {
            engine.runtime.set_memory_limit(limits.memory_bytes);
            engine.runtime.set_max_stack_size(limits.stack_bytes);
            let ended = engine.drive(&script, &limits, ends_at, &host, &tripped, &replies, stop);
            // Promise resolvers must go before the runtime they belong to.
            host.borrow_mut().pending.clear();
            ended
        }
        Err(e) => Ended::Threw { message: format!("the script engine could not start: {e}"), stack: None },
    };
    let logs = std::mem::take(&mut host.borrow_mut().logs);
    Some(Outcome { ended, logs })
}

struct Engine {
    // Field order is drop order: the context before its runtime.
    context: Context,
    runtime: Runtime,
}

impl Engine {
    /// A runtime with its context and the prelude's globals; limits come with the script.
    fn new(
        host: &Rc<RefCell<Host>>,
        tripped: &Rc<Cell<Option<Limit>>>,
        deadline: &Rc<Cell<Option<Instant>>>,
        stop: &Arc<AtomicBool>,
    ) -> rquickjs::Result<Engine> {
        let runtime = Runtime::new()?;
        let (flag, deadline, stop) = (tripped.clone(), deadline.clone(), stop.clone());
        // Also stops a script whose caller went away, busy or not.
        runtime.set_interrupt_handler(Some(Box::new(move || {
            if flag.get().is_none() && deadline.get().is_some_and(|d| Instant::now() >= d) {
                flag.set(Some(Limit::Timeout));
            }
            flag.get().is_some() || stop.load(Ordering::Relaxed)
        })));
        let context = Context::full(&runtime)?;
        context.with(|ctx| install(&ctx, host, tripped))?;
        Ok(Engine { context, runtime })
    }

    /// Runs the script until it settles, trips a limit, passes `deadline` (the one the
    /// interrupt handler also stops at) or its caller goes away.
    #[allow(clippy::too_many_arguments)]
    fn drive(
        &self,
        script: &str,
        limits: &Limits,
        deadline: Instant,
        host: &Rc<RefCell<Host>>,
        tripped: &Rc<Cell<Option<Limit>>>,
        replies: &std_mpsc::Receiver<(u64, Result<Value, String>)>,
        stop: &AtomicBool,
    ) -> Ended {
        let stopped = |limit: Limit| Ended::Stopped { limit, message: limit.describe(limits) };
        // Line 1 of the script stays line 1 in stack traces.
        let source = format!("(async function () {{ {script}\n}})()");
        let mut options = EvalOptions::default();
        options.filename = Some("script.js".into());
        let promise = self.context.with(|ctx| match ctx.eval_with_options::<Promise, _>(source, options) {
            Ok(p) => Ok(Persistent::save(&ctx, p)),
            Err(e) => Err(thrown(&ctx, e)),
        });
        let promise = match promise {
            Ok(p) => p,
            Err(ended) => return tripped.get().map(stopped).unwrap_or(ended),
        };
        loop {
            while self.runtime.is_job_pending() {
                if tripped.get().is_some() {
                    break;
                }
                let _ = self.runtime.execute_pending_job();
            }
            if let Some(limit) = tripped.get() {
                return stopped(limit);
            }
            let settled = self.context.with(|ctx| {
                let p = promise.clone().restore(&ctx).ok()?;
                match p.state() {
                    PromiseState::Pending => None,
                    PromiseState::Resolved => Some(returned(&ctx, p.result::<JsValue>()?, limits)),
                    PromiseState::Rejected => {
                        let _ = p.result::<JsValue>();
                        Some(thrown(&ctx, rquickjs::Error::Exception))
                    }
                }
            });
            if let Some(ended) = settled {
                return match (&ended, tripped.get()) {
                    (_, Some(limit)) => stopped(limit),
                    (Ended::Threw { message, .. }, None) => classify(message).map(stopped).unwrap_or(ended),
                    _ => ended,
                };
            }
            if host.borrow().pending.is_empty() {
                return Ended::Threw {
                    message: "the script awaits a promise that nothing will settle (no tool call is running)".into(),
                    stack: None,
                };
            }
            let (id, answer) = loop {
                let now = Instant::now();
                if now >= deadline {
                    return stopped(Limit::Timeout);
                }
                if stop.load(Ordering::Relaxed) {
                    return Ended::Threw { message: "the caller went away".into(), stack: None };
                }
                match replies.recv_timeout((deadline - now).min(STOP_POLL)) {
                    Ok(reply) => break reply,
                    Err(std_mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => unreachable!("the host keeps a sender"),
                }
            };
            let Some((resolve, reject)) = host.borrow_mut().pending.remove(&id) else { continue };
            self.context.with(|ctx| {
                let _ = match answer {
                    Ok(value) => resolve.restore(&ctx).and_then(|f| f.call::<_, ()>((value.to_string(),))),
                    Err(message) => reject.restore(&ctx).and_then(|f| f.call::<_, ()>((message,))),
                };
            });
        }
    }
}

/// Runs the prelude with the two host functions; the script sees only what it defines.
fn install<'js>(ctx: &Ctx<'js>, host: &Rc<RefCell<Host>>, tripped: &Rc<Cell<Option<Limit>>>) -> rquickjs::Result<()> {
    let object = Object::new(ctx.clone())?;
    let (request_host, request_tripped) = (host.clone(), tripped.clone());
    let request = move |ctx: Ctx<'js>, kind: String, payload: String| -> rquickjs::Result<Promise<'js>> {
        let call = host_call(&kind, &payload).map_err(|m| Exception::throw_type(&ctx, &m))?;
        let mut host = request_host.borrow_mut();
        let max_calls = host.max_tool_calls;
        // A search reaches upstreams too (their listings), so it counts as a call.
        if matches!(call, HostCall::Tool { .. } | HostCall::Search { .. }) {
            host.tool_calls += 1;
            if host.tool_calls > max_calls {
                request_tripped.set(Some(Limit::ToolCalls));
                return Err(Exception::throw_range(&ctx, &format!("limit maxToolCalls ({max_calls}) reached")));
            }
        }
        // A kept artifact comes back as a link in the result, its name and media type
        // included: those bytes are output too.
        if let HostCall::Artifact { name, mime_type, .. } = &call {
            let max_output = host.max_output_bytes;
            host.output_bytes += crate::link_bytes(name, mime_type);
            if host.output_bytes > max_output {
                request_tripped.set(Some(Limit::Output));
                return Err(Exception::throw_range(&ctx, &format!("limit maxOutputBytes ({max_output}) reached")));
            }
        }
        let (promise, resolve, reject) = Promise::new(&ctx)?;
        let id = host.next_id;
        host.next_id += 1;
        let reply = crate::engine::Reply { id, tx: host.replies.clone() };
        if host.requests.send(HostRequest { call, reply }).is_err() {
            return Err(Exception::throw_internal(&ctx, "the caller went away"));
        }
        host.pending.insert(id, (Persistent::save(&ctx, resolve), Persistent::save(&ctx, reject)));
        Ok(promise)
    };
    let (log_host, log_tripped) = (host.clone(), tripped.clone());
    let log = move |ctx: Ctx<'js>, text: String| -> rquickjs::Result<()> {
        let mut host = log_host.borrow_mut();
        let max_output = host.max_output_bytes;
        host.output_bytes += text.len() + 1;
        if host.output_bytes > max_output {
            log_tripped.set(Some(Limit::Output));
            return Err(Exception::throw_range(&ctx, &format!("limit maxOutputBytes ({max_output}) reached")));
        }
        host.logs.push(text);
        Ok(())
    };
    object.set("request", Func::from(request))?;
    object.set("log", Func::from(log))?;
    let prelude: Function = ctx.eval(PRELUDE)?;
    prelude.call::<_, ()>((object,))
}

/// Reads a request the prelude made. Its JSON is the prelude's own, so a malformed one
/// is a bug there, reported to the script as a `TypeError`.
fn host_call(kind: &str, payload: &str) -> Result<HostCall, String> {
    let v: Value = serde_json::from_str(payload).map_err(|e| format!("bad host request: {e}"))?;
    let text = |field: &str| v.get(field).and_then(Value::as_str).map(str::to_owned);
    match kind {
        "call" => Ok(HostCall::Tool {
            server: text("server").unwrap_or_default(),
            tool: text("tool").unwrap_or_default(),
            arguments: v.get("arguments").cloned().unwrap_or(Value::Object(Default::default())),
            by_identifier: v.get("byIdentifier").and_then(Value::as_bool).unwrap_or(false),
        }),
        "search" => Ok(HostCall::Search { query: text("query").unwrap_or_default() }),
        "artifact" => {
            let data = match (text("text"), v.get("bytes").and_then(Value::as_array)) {
                (Some(t), _) => t.into_bytes(),
                (None, Some(bytes)) => bytes.iter().map(|b| b.as_u64().unwrap_or(0) as u8).collect(),
                _ => return Err("artifact: no data".into()),
            };
            Ok(HostCall::Artifact {
                name: text("name").unwrap_or_default(),
                mime_type: text("mimeType").unwrap_or_default(),
                data,
            })
        }
        other => Err(format!("unknown host request {other:?}")),
    }
}

/// The returned value as JSON, within the output limit.
fn returned<'js>(ctx: &Ctx<'js>, result: rquickjs::Result<JsValue<'js>>, limits: &Limits) -> Ended {
    let value = match result {
        Ok(v) => v,
        Err(e) => return thrown(ctx, e),
    };
    let text = match ctx.json_stringify(value) {
        Ok(Some(s)) => s.to_string().unwrap_or_default(),
        Ok(None) => "null".into(),
        Err(e) => return thrown(ctx, e),
    };
    if text.len() > limits.max_output_bytes {
        return Ended::Stopped { limit: Limit::Output, message: Limit::Output.describe(limits) };
    }
    Ended::Returned(serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The exception pending in `ctx` (or the engine error itself) as the script's error.
fn thrown(ctx: &Ctx<'_>, error: rquickjs::Error) -> Ended {
    if !matches!(error, rquickjs::Error::Exception) {
        return Ended::Threw { message: error.to_string(), stack: None };
    }
    let value = ctx.catch();
    if let Some(exception) = value.as_exception() {
        let message = exception.message().unwrap_or_default();
        let name: String = exception.get("name").unwrap_or_else(|_| "Error".into());
        return Ended::Threw {
            message: format!("{name}: {message}"),
            stack: exception.stack().filter(|s| !s.is_empty()),
        };
    }
    let message = match ctx.json_stringify(value.clone()) {
        Ok(Some(s)) if !value.is_string() => s.to_string().unwrap_or_default(),
        _ => value.as_string().and_then(|s| s.to_string().ok()).unwrap_or_else(|| "the script threw".into()),
    };
    Ended::Threw { message: format!("uncaught {message}"), stack: None }
}

/// The engine's own errors that mean a limit, by the message QuickJS gives them.
fn classify(message: &str) -> Option<Limit> {
    if message.contains("out of memory") {
        Some(Limit::Memory)
    } else if message.contains("stack overflow") || message.contains("Maximum call stack size exceeded") {
        Some(Limit::Stack)
    } else {
        None
    }
}
