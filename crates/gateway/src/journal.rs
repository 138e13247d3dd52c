//! The call journal: one [`Record`] per request mcpx answers for a caller (a tool call, a
//! script's tool call, a resource read, a prompt, a completion), kept in SQLite in the
//! state dir, and read back for `/v1/log` and `/v1/stats`.
//!
//! Writing never holds up a call: a record goes into a bounded queue to one writer thread,
//! woken by the first record after it emptied the queue, which gathers for [`GATHER`] and
//! writes what it holds in one transaction (a transaction, or a thread wake-up, per call
//! would cost more than the call itself). A full queue drops the
//! record and counts it. Listings are not journaled: they carry no caller's data and would drown the
//! calls in noise.
//!
//! It must never grow past its bound whatever callers send: every text a record keeps is
//! cut to `journal.maxTextBytes` (its arguments to `journal.maxArgumentsBytes`), and the
//! writer prunes, vacuums and checkpoints as it writes, so the files on disk stay within
//! twice `journal.maxBytes` (see [`Store::compact`]). Short of `journal.arguments: whole`
//! it keeps no secret-shaped value in any field (`crate::redact`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcpx_protocol::RpcError;
use mcpx_upstream::{Meter, UpstreamError};
use rusqlite::{Connection, OpenFlags, params_from_iter};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::{JournalArguments, JournalConfig};
use crate::error::Error;
use crate::identity::{Identity, Principal, Session};
use crate::redact;
use crate::scope::InstanceKey;

/// Most records one transaction writes.
const BATCH: usize = 512;
/// How long the writer gathers records after the first before it writes them: a record
/// reaches the file within this (plus the write), and a SIGKILL loses at most this much.
const GATHER: Duration = Duration::from_millis(200);
/// How often the writer enforces retention when it is otherwise idle.
const PRUNE_EVERY: Duration = Duration::from_secs(60);
/// What a masked value reads as.
pub use crate::redact::MASK;
/// Longest principal tag a record keeps: what its reader's filter cuts its own tag to.
const PRINCIPAL_BYTES: usize = 1024;

/// How a request ended, as the journal and the metrics count it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    /// A tool result with `isError: true`.
    ToolError,
    /// A JSON-RPC error (its code is in the record).
    Error,
    /// The upstream did not answer in time.
    Timeout,
    /// A limit of mcpx refused the request (`limits.*`, `limits.rate`).
    Refused,
    /// The tool policy refused it: the caller was told the name does not exist.
    Denied,
}

impl Outcome {
    pub const ALL: [Outcome; 6] =
        [Outcome::Ok, Outcome::ToolError, Outcome::Error, Outcome::Timeout, Outcome::Refused, Outcome::Denied];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
            Outcome::Refused => "refused",
            Outcome::Denied => "denied",
        }
    }

    fn parse(text: &str) -> Outcome {
        Outcome::ALL.into_iter().find(|o| o.as_str() == text).unwrap_or(Outcome::Error)
    }

    /// Whether the caller got anything but a plain success.
    pub fn is_error(self) -> bool {
        self != Outcome::Ok
    }

    /// The outcome of a request and the JSON-RPC error code the caller saw, if any.
    pub fn of(answer: Result<&Value, &Error>) -> (Outcome, Option<i64>) {
        match answer {
            Ok(result) if result.get("isError").and_then(Value::as_bool) == Some(true) => (Outcome::ToolError, None),
            Ok(_) => (Outcome::Ok, None),
            Err(e) if e.refusal() == Some("limit") => (Outcome::Refused, Some(e.code())),
            Err(e) if e.refusal() == Some("policy") => (Outcome::Denied, Some(e.code())),
            Err(e @ Error::Upstream(UpstreamError::Timeout { .. })) => (Outcome::Timeout, Some(e.code())),
            Err(e) => (Outcome::Error, Some(e.code())),
        }
    }
}

/// Who asked, as the journal keeps it: the principal (whose records these are), the
/// client and session as mcpx prints them, the transport and the revision.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Caller {
    /// `Principal::tag`: empty for the local user.
    #[serde(skip)]
    pub principal: String,
    pub client: Option<String>,
    pub session: Option<String>,
    pub transport: &'static str,
    pub revision: String,
}

impl Caller {
    pub fn of(identity: &Identity, revision: &str) -> Caller {
        let transport = match (&identity.session, identity.pid) {
            (Some(Session::Http(_)), _) => "http-session",
            (_, Some(_)) => "socket",
            _ => "http",
        };
        Caller {
            principal: principal_tag(&identity.principal),
            client: identity.client(),
            session: identity.session_key().map(|k| k.to_string()),
            transport,
            revision: revision.to_owned(),
        }
    }
}

/// `principal`'s tag as records hold it: cut to [`PRINCIPAL_BYTES`] (an OAuth subject is
/// the issuer's to choose).
fn principal_tag(principal: &Principal) -> String {
    redact::cut(&principal.tag(), PRINCIPAL_BYTES).into_owned()
}

/// How the journal keeps what a record holds, as `journal.*` says when it is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keep {
    /// `journal.arguments`: also whether secret shapes are masked in every field.
    pub arguments: JournalArguments,
    /// `journal.maxTextBytes`.
    pub max_text: usize,
    /// `journal.maxArgumentsBytes`.
    pub max_arguments: usize,
}

impl Keep {
    pub fn of(config: &JournalConfig) -> Keep {
        Keep { arguments: config.arguments, max_text: config.max_text_bytes, max_arguments: config.max_arguments_bytes }
    }
}

impl Default for Keep {
    fn default() -> Keep {
        Keep::of(&JournalConfig::default())
    }
}

/// One request mcpx answered, as the journal keeps it.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Its place in the journal, once written: later records have larger ids.
    pub id: i64,
    /// Milliseconds since the Unix epoch, when the request arrived.
    pub time_ms: i64,
    #[serde(flatten)]
    pub caller: Caller,
    pub server: Option<String>,
    pub instance: Option<String>,
    pub method: String,
    /// The tool, prompt or completion reference, or the resource's URI.
    pub name: Option<String>,
    /// Made by a script (`mcpx_exec`) rather than the caller itself.
    pub in_script: bool,
    pub duration_us: i64,
    pub outcome: Outcome,
    pub code: Option<i64>,
    pub bytes_in: i64,
    pub bytes_out: i64,
    /// As `journal.arguments` says: absent, masked, a digest, or whole.
    pub arguments: Option<String>,
}

impl Record {
    /// The record as the journal keeps it: every text cut to its bound and, short of
    /// `whole`, every secret-shaped value masked (by its name too in free text: the tool
    /// or URI, the server a caller named; by its shape only in the labels mcpx wrote).
    pub fn kept(mut self, keep: Keep) -> Record {
        let masking = keep.arguments != JournalArguments::Whole;
        let bound = |field: &mut String, free_text: bool| {
            let masked = match (masking, free_text) {
                (false, _) => Cow::Borrowed(field.as_str()),
                (true, true) => redact::text(field),
                (true, false) => redact::label(field),
            };
            let kept = redact::cut(&masked, keep.max_text).into_owned();
            *field = kept;
        };
        for field in [&mut self.server, &mut self.name].into_iter().flatten() {
            bound(field, true);
        }
        for field in [&mut self.instance, &mut self.caller.client, &mut self.caller.session].into_iter().flatten() {
            bound(field, false);
        }
        if let Some(arguments) = &mut self.arguments {
            *arguments = redact::cut(arguments, keep.max_arguments).into_owned();
        }
        self
    }

    /// Roughly the bytes the record takes in the file: what the writer counts between
    /// compactions.
    fn footprint(&self) -> u64 {
        let texts =
            [&self.server, &self.instance, &self.name, &self.arguments, &self.caller.client, &self.caller.session];
        let len = texts.into_iter().flatten().map(String::len).sum::<usize>() + self.method.len();
        64 + len as u64
    }
}

/// Where a request went, shared by every copy of its context.
pub type Reached = Arc<Reach>;

/// The instance a request reached (set once the pool leased it), and the bytes of the
/// messages exchanged with it for the request ([`Meter`]): what the journal records as
/// the request's `bytes_in` and `bytes_out`, read off the wire rather than measured again.
#[derive(Debug, Default)]
pub struct Reach {
    key: OnceLock<InstanceKey>,
    sent: AtomicU64,
    received: AtomicU64,
    /// The request that took this one's upstream call over, once one did (a held call
    /// resumed by the caller's retry): what the call exchanges from then on is its.
    then: OnceLock<Reached>,
}

impl Reach {
    pub fn get(&self) -> Option<&InstanceKey> {
        self.key.get()
    }

    /// Records the instance; the first one set stays (a request reaches one instance).
    pub fn set(&self, key: InstanceKey) {
        let _ = self.key.set(key);
    }

    /// Hands what this request's upstream call exchanges from now on to `next`, the
    /// request that took the call over (at `key`), and to whichever takes it over from it.
    pub fn hand_over(self: &Arc<Reach>, next: &Reached, key: &InstanceKey) {
        let mut last = self;
        while let Some(then) = last.then.get() {
            last = then;
        }
        if !Arc::ptr_eq(last, next) {
            next.set(key.clone());
            let _ = last.then.set(next.clone());
        }
    }

    /// The bytes sent to the instance and received from it so far, as the journal keeps
    /// them.
    fn traffic(&self) -> (i64, i64) {
        let size = |n: &AtomicU64| i64::try_from(n.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        (size(&self.sent), size(&self.received))
    }
}

impl Meter for Reach {
    fn sent(&self, bytes: usize) {
        match self.then.get() {
            Some(next) => next.sent(bytes),
            None => _ = self.sent.fetch_add(bytes as u64, Ordering::Relaxed),
        }
    }

    fn received(&self, bytes: usize) {
        match self.then.get() {
            Some(next) => next.received(bytes),
            None => _ = self.received.fetch_add(bytes as u64, Ordering::Relaxed),
        }
    }
}

/// A request being journaled: what is known before it is answered.
pub(crate) struct Pending {
    started: Instant,
    time_ms: i64,
    method: &'static str,
    server: Option<String>,
    name: Option<String>,
    /// A call of one of mcpx's own tools, whose params and result are measured (when the
    /// record is kept) as no server exchanged them: a walk of the JSON.
    measured: bool,
    bytes_in: i64,
    arguments: Option<String>,
    /// `journal.maxTextBytes` when the request arrived: every text of its record is cut to
    /// it from the start, so a record waiting for the writer holds no more.
    max_text: usize,
}

/// The methods whose requests are journaled, as static names.
pub(crate) fn journaled(method: &str) -> Option<&'static str> {
    ["tools/call", "resources/read", "prompts/get", "completion/complete"].into_iter().find(|m| *m == method)
}

/// The questions a server may put to a caller during a request, journaled when the caller
/// answers them (or fails to).
const QUESTIONS: [&str; 3] = ["elicitation/create", "sampling/createMessage", "roots/list"];

impl Pending {
    /// Notes a request before it is answered: its target as the params name it and, when
    /// the journal keeps records (`kept` is how it keeps arguments), its arguments, and
    /// the size of a call of mcpx's own tools. Reads `params`; copies only short names.
    pub(crate) fn start(method: &'static str, params: &Value, kept: Option<Keep>) -> Pending {
        let max_text = kept.unwrap_or_default().max_text;
        let (server, name, arguments) = target(method, params, max_text);
        let own = method == "tools/call"
            && matches!(params.get("name").and_then(Value::as_str), Some(crate::SEARCH | crate::EXEC));
        let measured = own && kept.is_some();
        let script = own && name.as_deref() == Some(crate::EXEC);
        Pending {
            started: Instant::now(),
            time_ms: now_ms(),
            method,
            server,
            name,
            measured,
            max_text,
            bytes_in: if measured { json_len(params) } else { 0 },
            arguments: arguments.zip(kept).and_then(|(a, keep)| match script {
                true => keep_arguments(&without_script(a, keep.arguments), keep),
                false => keep_arguments(a, keep),
            }),
        }
    }

    /// The finished record: its sizes are those of the messages exchanged with the
    /// instance it reached (none if it reached none), or as measured for mcpx's own tools.
    pub(crate) fn finish(
        self,
        caller: Caller,
        reach: &Reach,
        answer: Result<&Value, &Error>,
        in_script: bool,
    ) -> Record {
        let sizes = match self.measured {
            true => (self.bytes_in, answer.map_or(0, json_len)),
            false => reach.traffic(),
        };
        self.record(caller, reach, Outcome::of(answer), sizes, in_script)
    }

    /// The record of the request as it `ended` (its outcome and code), with its sizes.
    fn record(
        self,
        mut caller: Caller,
        reach: &Reach,
        (outcome, code): (Outcome, Option<i64>),
        (bytes_in, bytes_out): (i64, i64),
        in_script: bool,
    ) -> Record {
        let reached = reach.get();
        let cut = |text: String| match redact::cut(&text, self.max_text) {
            Cow::Borrowed(_) => text,
            Cow::Owned(cut) => cut,
        };
        caller.client = caller.client.map(cut);
        caller.session = caller.session.map(cut);
        // An exposed tool is called as `<server>__<tool>`: recorded by its name on its server.
        let name = match (reached, self.name) {
            (Some(key), Some(name)) if self.method == "tools/call" => {
                let tool = name.strip_prefix(key.server.as_str()).and_then(|rest| rest.strip_prefix("__"));
                Some(tool.map(str::to_owned).unwrap_or(name))
            }
            (_, name) => name,
        };
        Record {
            id: 0,
            time_ms: self.time_ms,
            caller,
            server: reached.map(|k| k.server.clone()).or(self.server),
            instance: reached.map(ToString::to_string).map(cut),
            method: self.method.to_owned(),
            name,
            in_script,
            duration_us: i64::try_from(self.started.elapsed().as_micros()).unwrap_or(i64::MAX),
            outcome,
            code,
            bytes_in,
            bytes_out,
            arguments: self.arguments,
        }
    }

    /// A question put to the caller during the request `during` names (by its tool,
    /// prompt or resource), asked now; `None` for a method that is not a question.
    pub(crate) fn question(method: &str, params: &Value, during: Option<&str>, kept: Option<Keep>) -> Option<Pending> {
        let method = QUESTIONS.into_iter().find(|m| *m == method)?;
        Some(Pending {
            started: Instant::now(),
            time_ms: now_ms(),
            method,
            server: None,
            name: during.map(|d| redact::cut(d, kept.unwrap_or_default().max_text).into_owned()),
            measured: kept.is_some(),
            bytes_in: kept.map_or(0, |_| json_len(params)),
            arguments: None,
            max_text: kept.unwrap_or_default().max_text,
        })
    }

    /// The record of a question: asked of the caller, so its sizes are the question
    /// (in) and the caller's answer (out) as JSON; an error is the caller's (or the
    /// `timeouts.request` mcpx waited).
    pub(crate) fn answered(self, caller: Caller, reach: &Reach, answer: Result<&Value, &RpcError>) -> Record {
        let ended = match answer {
            Ok(_) => (Outcome::Ok, None),
            Err(e) => (Outcome::Error, Some(e.code)),
        };
        let sizes = (self.bytes_in, answer.ok().filter(|_| self.measured).map_or(0, json_len));
        self.record(caller, reach, ended, sizes, false)
    }

    /// The name this request is recorded under: what its questions are asked during.
    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// A script's tool call, named by the server and tool the script reached.
    pub(crate) fn script_call(server: &str, tool: &str, arguments: &Value, kept: Option<Keep>) -> Pending {
        let max_text = kept.unwrap_or_default().max_text;
        Pending {
            started: Instant::now(),
            time_ms: now_ms(),
            method: "tools/call",
            server: Some(redact::cut(server, max_text).into_owned()),
            name: Some(redact::cut(tool, max_text).into_owned()),
            measured: false,
            max_text,
            bytes_in: 0,
            arguments: kept.and_then(|keep| keep_arguments(arguments, keep)),
        }
    }
}

/// `mcpx_exec`'s arguments with its script as its length and digest, short of `whole`: a
/// script spells out what it uses, a token included, where no key names it.
fn without_script(arguments: &Value, mode: JournalArguments) -> Value {
    let mut arguments = arguments.clone();
    if mode != JournalArguments::Whole
        && let Some(script) = arguments.get_mut("script")
        && let Some(text) = script.as_str()
    {
        *script = Value::String(redact::script(text));
    }
    arguments
}

/// The server (when the params name it), the name (both cut to `max_text` bytes), and the
/// arguments of a request.
fn target<'a>(method: &str, params: &'a Value, max_text: usize) -> (Option<String>, Option<String>, Option<&'a Value>) {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(|s| redact::cut(s, max_text).into_owned());
    match method {
        "tools/call" => {
            let arguments = params.get("arguments");
            match params.get("name").and_then(Value::as_str) {
                // `mcpx_call` names its server and tool in its arguments.
                Some(crate::CALL) => {
                    let inner = arguments.and_then(|a| a.get("arguments"));
                    (text(arguments.and_then(|a| a.get("server"))), text(arguments.and_then(|a| a.get("tool"))), inner)
                }
                Some(name @ (crate::SEARCH | crate::EXEC)) => (Some("mcpx".into()), Some(name.to_owned()), arguments),
                name => (None, name.map(|n| redact::cut(n, max_text).into_owned()), arguments),
            }
        }
        "resources/read" => (None, text(params.get("uri")), None),
        "prompts/get" => (None, text(params.get("name")), params.get("arguments")),
        "completion/complete" => {
            let reference = params.get("ref");
            let name = text(reference.and_then(|r| r.get("name")).or_else(|| reference.and_then(|r| r.get("uri"))));
            (None, name, params.get("argument"))
        }
        _ => (None, None, None),
    }
}

/// A duration as the config writes one (`"10m"`, `"1h"`, a number of milliseconds).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::config::duration::parse(text)
}

/// The journal's storage error.
pub type StoreError = rusqlite::Error;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The bytes an escape adds to one byte of a string, as `serde_json` writes it: one for a
/// quote, a backslash and the control characters with a short escape (`\n` and its kin),
/// five for the other control characters (`\u00XX`), none for the rest.
const ESCAPED: [u8; 256] = {
    let mut extra = [0; 256];
    let mut b = 0;
    while b < 0x20 {
        extra[b] = match b as u8 {
            b'\x08' | b'\x0c' | b'\n' | b'\r' | b'\t' => 1,
            _ => 5,
        };
        b += 1;
    }
    extra[b'"' as usize] = 1;
    extra[b'\\' as usize] = 1;
    extra
};

/// The size of `value` as compact JSON (as `serde_json` writes it), counted by walking
/// the tree: nothing is written out, and only a float is formatted.
pub fn json_len(value: &Value) -> i64 {
    fn len(value: &Value) -> usize {
        match value {
            Value::Null | Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => digits(u),
                (None, Some(i)) => 1 + digits(i.unsigned_abs()),
                _ => n.to_string().len(),
            },
            Value::String(s) => string_len(s),
            Value::Array(items) => 2 + items.len().saturating_sub(1) + items.iter().map(len).sum::<usize>(),
            Value::Object(map) => {
                2 + map.len().saturating_sub(1) + map.iter().map(|(k, v)| string_len(k) + 1 + len(v)).sum::<usize>()
            }
        }
    }
    fn digits(n: u64) -> usize {
        n.checked_ilog10().map_or(1, |d| d as usize + 1)
    }
    fn string_len(s: &str) -> usize {
        2 + s.len() + s.bytes().map(|b| usize::from(ESCAPED[usize::from(b)])).sum::<usize>()
    }
    i64::try_from(len(value)).unwrap_or(i64::MAX)
}

/// The arguments as `keep` keeps them: masked (`redacted`) or whole, cut to their bound;
/// or a digest.
pub fn keep_arguments(arguments: &Value, keep: Keep) -> Option<String> {
    let text = match keep.arguments {
        JournalArguments::None => return None,
        JournalArguments::Whole => arguments.to_string(),
        JournalArguments::Redacted => redact::value(arguments).to_string(),
        JournalArguments::Hashed => {
            let digest = Sha256::digest(arguments.to_string().as_bytes());
            return Some(format!("sha256:{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>()));
        }
    };
    Some(redact::cut(&text, keep.max_arguments).into_owned())
}

/// Records waiting for the writer. A caller's thread only pushes under the lock: it wakes
/// the writer for the first record after the writer has emptied the queue, never for
/// the others, so a busy daemon pays one wake-up per gathering, not one per call.
struct Queue {
    state: Mutex<Queued>,
    /// Signalled by the first record into an empty queue, by a flush and by the close.
    wake: Condvar,
    capacity: usize,
    dropped: AtomicU64,
}

#[derive(Default)]
struct Queued {
    records: Vec<Record>,
    /// Flushes asked for: answered once what was queued before each is in the file.
    flushes: Vec<SyncSender<()>>,
    /// The journal is gone: the writer writes what is left and ends.
    closed: bool,
}

/// The journal: a queue to its writer, and the file it reads back.
pub struct Journal {
    queue: Arc<Queue>,
    path: PathBuf,
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.queue.state.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
        self.queue.wake.notify_one();
    }
}

impl Journal {
    /// Opens (or creates) the journal in `path` and starts its writer, which ends when the
    /// journal is dropped. `retention` says the settings in force at each pruning (they
    /// are hot), `None` once the gateway is gone.
    pub fn open(
        path: &Path,
        capacity: usize,
        retention: impl Fn() -> Option<JournalConfig> + Send + 'static,
    ) -> Result<Journal, rusqlite::Error> {
        let mut connection = Connection::open(path)?;
        prepare(&mut connection)?;
        let queue =
            Arc::new(Queue { state: Mutex::default(), wake: Condvar::new(), capacity, dropped: AtomicU64::new(0) });
        let writer = queue.clone();
        std::thread::Builder::new()
            .name("mcpx-journal".into())
            .spawn(move || write(connection, &writer, retention))
            .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?;
        Ok(Journal { queue, path: path.to_owned() })
    }

    /// Queues `record` for the writer; when the queue is full it is dropped and counted.
    pub fn record(&self, record: Record) {
        let mut queued = self.queue.state.lock().unwrap_or_else(PoisonError::into_inner);
        if queued.records.len() >= self.queue.capacity {
            self.queue.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        queued.records.push(record);
        if queued.records.len() == 1 {
            self.queue.wake.notify_one();
        }
    }

    /// Returns once every record queued so far is in the file (or after 5 s): at the
    /// daemon's stop, so a call answered just before it is not lost with the writer's
    /// gathering.
    pub async fn flush(&self) {
        let queue = self.queue.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let (done, written) = std::sync::mpsc::sync_channel(1);
            queue.state.lock().unwrap_or_else(PoisonError::into_inner).flushes.push(done);
            queue.wake.notify_one();
            let _ = written.recv_timeout(Duration::from_secs(5));
        })
        .await;
    }

    /// Records dropped since the daemon started, for want of room in the queue.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped.load(Ordering::Relaxed)
    }

    /// Records matching `query`, newest first. Blocking: call it off the async runtime.
    pub fn read(&self, query: &Query) -> Result<Vec<Record>, rusqlite::Error> {
        let connection = self.reader()?;
        let (clause, values) = query.filter.clause();
        let sql = format!("SELECT {COLUMNS} FROM calls {clause} ORDER BY id DESC LIMIT {}", query.limit);
        let mut statement = connection.prepare(&sql)?;
        let rows = statement.query_map(params_from_iter(values.iter()), row_record)?;
        rows.collect()
    }

    /// Calls, errors and duration percentiles per group, busiest group first. Blocking.
    pub fn stats(&self, filter: &Filter, by: GroupBy) -> Result<Vec<Stat>, rusqlite::Error> {
        let connection = self.reader()?;
        let (clause, values) = filter.clause();
        let sql = format!("SELECT {}, duration_us, outcome FROM calls {clause}", by.column());
        let mut statement = connection.prepare(&sql)?;
        let rows = statement.query_map(params_from_iter(values.iter()), |row| {
            Ok((row.get::<_, Option<String>>(0)?, row.get::<_, i64>(1)?, row.get::<_, String>(2)?))
        })?;
        let mut groups: std::collections::HashMap<Option<String>, (Vec<i64>, u64)> = Default::default();
        for row in rows {
            let (key, duration, outcome) = row?;
            let group = groups.entry(key).or_default();
            group.0.push(duration);
            group.1 += u64::from(Outcome::parse(&outcome).is_error());
        }
        let mut stats: Vec<Stat> =
            groups.into_iter().map(|(key, (durations, errors))| Stat::of(key, durations, errors)).collect();
        stats.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.key.cmp(&b.key)));
        Ok(stats)
    }

    fn reader(&self) -> Result<Connection, rusqlite::Error> {
        let connection = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        connection.busy_timeout(Duration::from_secs(5))?;
        Ok(connection)
    }
}

/// The records, and the callers they name once each: a call's row holds its caller's id,
/// so the writer binds one integer where it bound five strings. `calls` is the view every
/// reader queries, with one column per field of a [`Record`].
const SCHEMA: &str = "
PRAGMA auto_vacuum = INCREMENTAL;
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
CREATE TABLE IF NOT EXISTS callers (
    id INTEGER PRIMARY KEY,
    principal TEXT NOT NULL,
    client TEXT,
    session TEXT,
    transport TEXT NOT NULL,
    revision TEXT NOT NULL
);
-- A record's id is in time order and at least its start time in milliseconds shifted
-- left by `ID_TIME_SHIFT` bits (`Store::next_id`), so the primary key doubles as the time
-- index: no second B-tree to insert into for every call.
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY,
    time_ms INTEGER NOT NULL,
    caller INTEGER NOT NULL,
    server TEXT,
    instance TEXT,
    method TEXT NOT NULL,
    name TEXT,
    in_script INTEGER NOT NULL,
    duration_us INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    code INTEGER,
    bytes_in INTEGER NOT NULL,
    bytes_out INTEGER NOT NULL,
    arguments TEXT
);
DROP INDEX IF EXISTS records_by_time;
";

/// `PRAGMA auto_vacuum`'s value for incremental vacuuming.
const INCREMENTAL: i64 = 2;

/// A record's id is its start time in milliseconds, shifted left by this many bits, or the
/// id before it plus one when that is more (4,096 records a millisecond before ids run
/// ahead of the clock; they stay in order either way).
const ID_TIME_SHIFT: u32 = 12;

/// Ids numbered one by one, as journals before time-ordered ids had them, are below this
/// (no clock since 1970 gives an id this small); they are renumbered when the file opens.
const FIRST_TIME_ID: i64 = 1 << 44;

/// Gives records numbered one by one time-ordered ids: their time, and the low bits of
/// their old id to keep them apart.
const RENUMBER: &str = "UPDATE records SET id = (time_ms << ?1) + (id & ((1 << ?1) - 1)) WHERE id < ?2";

/// The view over [`SCHEMA`]'s tables that readers query.
const VIEW: &str = "
CREATE VIEW IF NOT EXISTS calls AS
SELECT r.id, r.time_ms, c.principal, c.client, c.session, c.transport, c.revision, r.server, r.instance,
       r.method, r.name, r.in_script, r.duration_us, r.outcome, r.code, r.bytes_in, r.bytes_out, r.arguments
FROM records r JOIN callers c ON c.id = r.caller;
";

/// A journal written before callers had a table of their own kept everything in one
/// table `calls`: its rows move into the two tables, in one transaction.
const MIGRATE_ONE_TABLE: &str = "
INSERT INTO callers (principal, client, session, transport, revision)
    SELECT DISTINCT principal, client, session, transport, revision FROM calls;
INSERT INTO records (id, time_ms, caller, server, instance, method, name, in_script, duration_us, outcome, code,
                     bytes_in, bytes_out, arguments)
    SELECT o.id, o.time_ms, c.id, o.server, o.instance, o.method, o.name, o.in_script, o.duration_us, o.outcome,
           o.code, o.bytes_in, o.bytes_out, o.arguments
    FROM calls o JOIN callers c ON c.principal = o.principal AND c.client IS o.client AND c.session IS o.session
                               AND c.transport = o.transport AND c.revision = o.revision;
DROP TABLE calls;
";

/// Creates the tables and the view in `connection`, moving an older journal's rows.
fn prepare(connection: &mut Connection) -> Result<(), rusqlite::Error> {
    connection.execute_batch(SCHEMA)?;
    // A journal made before it gave pruned space back keeps every page it ever had: one
    // rewrite switches it to incremental vacuuming (the pragma above asked for it).
    let auto_vacuum: i64 = connection.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
    if auto_vacuum != INCREMENTAL {
        connection.execute_batch("VACUUM")?;
    }
    let one_table: bool = connection.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'calls')",
        [],
        |r| r.get(0),
    )?;
    let transaction = connection.transaction()?;
    if one_table {
        transaction.execute_batch(MIGRATE_ONE_TABLE)?;
    }
    transaction.execute(RENUMBER, [i64::from(ID_TIME_SHIFT), FIRST_TIME_ID])?;
    transaction.commit()?;
    connection.execute_batch(VIEW)
}

const COLUMNS: &str = "id, time_ms, principal, client, session, transport, revision, server, instance, method, name, \
                       in_script, duration_us, outcome, code, bytes_in, bytes_out, arguments";

fn row_record(row: &rusqlite::Row<'_>) -> Result<Record, rusqlite::Error> {
    let transport: String = row.get(5)?;
    Ok(Record {
        id: row.get(0)?,
        time_ms: row.get(1)?,
        caller: Caller {
            principal: row.get(2)?,
            client: row.get(3)?,
            session: row.get(4)?,
            transport: ["socket", "http", "http-session"].into_iter().find(|t| *t == transport).unwrap_or("http"),
            revision: row.get(6)?,
        },
        server: row.get(7)?,
        instance: row.get(8)?,
        method: row.get(9)?,
        name: row.get(10)?,
        in_script: row.get(11)?,
        duration_us: row.get(12)?,
        outcome: Outcome::parse(&row.get::<_, String>(13)?),
        code: row.get(14)?,
        bytes_in: row.get(15)?,
        bytes_out: row.get(16)?,
        arguments: row.get(17)?,
    })
}

/// The writer: waits for a record, gathers for [`GATHER`] (a flush or the close cuts that
/// short), writes what the queue holds in transactions of at most [`BATCH`], and enforces
/// retention now and then. Ends, after writing what is left, when the journal is dropped.
fn write(connection: Connection, queue: &Queue, retention: impl Fn() -> Option<JournalConfig>) {
    let mut store = Store::new(connection);
    let mut pruned = Instant::now();
    if let Some(config) = retention() {
        store.compact(&config);
    }
    let lock = || queue.state.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let mut queued = lock();
        let idle = |q: &mut Queued| q.records.is_empty() && q.flushes.is_empty() && !q.closed;
        queued = queue.wake.wait_timeout_while(queued, PRUNE_EVERY, idle).unwrap_or_else(PoisonError::into_inner).0;
        if !queued.records.is_empty() {
            let until = Instant::now() + GATHER;
            let gathering = |q: &mut Queued| q.flushes.is_empty() && !q.closed && Instant::now() < until;
            queued = queue.wake.wait_timeout_while(queued, GATHER, gathering).unwrap_or_else(PoisonError::into_inner).0;
        }
        let records = std::mem::take(&mut queued.records);
        let flushes = std::mem::take(&mut queued.flushes);
        let closed = queued.closed;
        drop(queued);
        let config = retention();
        let budget = config.as_ref().map_or(u64::MAX, Store::budget);
        // Masked here, off the callers' threads: the queue holds records already cut.
        let keep = config.as_ref().map_or_else(Keep::default, Keep::of);
        let records: Vec<Record> = records.into_iter().map(|r| r.kept(keep)).collect();
        for batch in batches(&records, budget) {
            match store.insert(batch) {
                Ok(()) => store.written += batch.iter().map(Record::footprint).sum::<u64>(),
                Err(e) => tracing::warn!("journal: cannot write {} records: {e}", batch.len()),
            }
            if let Some(config) = config.as_ref().filter(|_| store.written >= budget) {
                store.compact(config);
                pruned = Instant::now();
            }
        }
        for done in flushes {
            let _ = done.send(());
        }
        if closed {
            return;
        }
        if pruned.elapsed() >= PRUNE_EVERY {
            let Some(config) = retention() else { return };
            store.compact(&config);
            pruned = Instant::now();
        }
    }
}

/// `records` in runs the writer commits one at a time: at most [`BATCH`] records, and at
/// most `budget` bytes (or one record), so no transaction outgrows the WAL's share of
/// `journal.maxBytes`.
fn batches(records: &[Record], budget: u64) -> impl Iterator<Item = &[Record]> {
    let mut rest = records;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let end = rest
            .iter()
            .take(BATCH)
            .position(|r| {
                bytes += r.footprint();
                bytes > budget
            })
            .unwrap_or(rest.len().min(BATCH))
            .max(1);
        let (batch, after) = rest.split_at(end);
        rest = after;
        Some(batch)
    })
}

/// The writer's side of the file: its connection, the ids it hands out, and what it has
/// written since it last compacted the files.
struct Store {
    connection: Connection,
    ids: Ids,
    /// Bytes of records written since [`Store::compact`] ran (as [`Record::footprint`]s).
    written: u64,
}

/// The ids the writer gives records, and the ids of the callers it has written (the
/// `callers` table's rows, found or added once each).
struct Ids {
    callers: HashMap<Caller, i64>,
    /// The caller written last, and its id: a caller's calls usually come in runs.
    last_caller: Option<(Caller, i64)>,
    /// The record id written last ([`Ids::record`]).
    last_record: i64,
}

impl Ids {
    /// The id of a record that started at `time_ms`: in time order, after every id
    /// written, and never below the time's own ([`ID_TIME_SHIFT`]).
    fn record(&mut self, time_ms: i64) -> i64 {
        self.last_record = (self.last_record + 1).max(time_ms.max(0) << ID_TIME_SHIFT);
        self.last_record
    }

    /// The id of `caller`'s row, added if there is none.
    fn caller(&mut self, connection: &Connection, caller: &Caller) -> Result<i64, rusqlite::Error> {
        if let Some((last, id)) = &self.last_caller
            && last == caller
        {
            return Ok(*id);
        }
        let id = match self.callers.get(caller) {
            Some(id) => *id,
            None => {
                let id = caller_id(connection, caller)?;
                self.callers.insert(caller.clone(), id);
                id
            }
        };
        self.last_caller = Some((caller.clone(), id));
        Ok(id)
    }

    /// Forgets the callers' ids (their rows were removed, or never written).
    fn forget_callers(&mut self) {
        self.callers.clear();
        self.last_caller = None;
    }
}

impl Store {
    fn new(connection: Connection) -> Store {
        let last_record =
            connection.query_row("SELECT COALESCE(MAX(id), 0) FROM records", [], |r| r.get(0)).unwrap_or(0);
        // A checkpoint waits this long for a reader (`mcpx log`) to finish with the WAL.
        let _ = connection.busy_timeout(Duration::from_secs(1));
        Store { connection, ids: Ids { callers: HashMap::new(), last_caller: None, last_record }, written: 0 }
    }

    /// Bytes of records the writer writes between compactions: an eighth of
    /// `journal.maxBytes`, so the WAL they fill stays a fraction of it.
    fn budget(config: &JournalConfig) -> u64 {
        config.max_bytes / 8
    }

    /// Keeps the files on disk within twice `journal.maxBytes`: prunes ([`prune`]), gives the
    /// freed pages back to the file system (incremental vacuum), then copies the WAL into
    /// the database and truncates it. The WAL is also checkpointed, and cut back, whenever
    /// it holds a [`Store::budget`] of pages.
    fn compact(&mut self, config: &JournalConfig) {
        self.prune(config);
        let budget = Store::budget(config);
        let connection = &self.connection;
        let page: i64 = connection.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap_or(4096);
        let limits = connection
            .pragma_update(None, "journal_size_limit", i64::try_from(budget).unwrap_or(i64::MAX))
            .and_then(|()| connection.pragma_update(None, "wal_autocheckpoint", (budget as i64 / page.max(1)).max(16)));
        // Each step of the pragma frees one page: stepped to its end, it frees them all.
        let vacuumed = connection.prepare("PRAGMA incremental_vacuum").and_then(|mut statement| {
            let mut pages = statement.query([])?;
            while pages.next()?.is_some() {}
            Ok(())
        });
        let checkpointed = connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
        for (what, done) in [("set its WAL's limits", limits), ("vacuum", vacuumed), ("checkpoint", checkpointed)] {
            if let Err(e) = done {
                tracing::warn!("journal: cannot {what}: {e}");
            }
        }
        self.written = 0;
    }

    /// Writes `batch` in one transaction.
    fn insert(&mut self, batch: &[Record]) -> Result<(), rusqlite::Error> {
        let Store { connection, ids, .. } = self;
        let transaction = connection.transaction()?;
        let written = write_rows(&transaction, ids, batch).and_then(|()| transaction.commit());
        if written.is_err() {
            // Callers added in the transaction are gone with it (rolled back when dropped).
            ids.forget_callers();
        }
        written
    }

    /// Enforces retention ([`prune`]); callers no record names any more go too, and are
    /// forgotten here, to be added again when they call.
    fn prune(&mut self, config: &JournalConfig) {
        if prune(&self.connection, config) > 0 {
            self.ids.forget_callers();
            if let Err(e) =
                self.connection.execute("DELETE FROM callers WHERE id NOT IN (SELECT caller FROM records)", [])
            {
                tracing::warn!("journal: cannot prune callers: {e}");
            }
        }
    }
}

/// Writes `batch` into `transaction`, one row per record.
fn write_rows(transaction: &rusqlite::Transaction, ids: &mut Ids, batch: &[Record]) -> Result<(), rusqlite::Error> {
    let mut statement = transaction.prepare_cached(
        "INSERT INTO records (id, time_ms, caller, server, instance, method, name, in_script, duration_us, \
             outcome, code, bytes_in, bytes_out, arguments) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)",
    )?;
    // A statement's bindings outlive each execution, so a field equal to the one
    // before is not bound again: in a run of calls of one tool by one caller, only
    // the id, the times and the sizes are.
    let mut before: Option<(&Record, i64)> = None;
    for r in batch {
        let caller = ids.caller(transaction, &r.caller)?;
        let changed = |same: fn(&Record, &Record) -> bool| before.is_none_or(|(b, _)| !same(b, r));
        statement.raw_bind_parameter(1, ids.record(r.time_ms))?;
        statement.raw_bind_parameter(2, r.time_ms)?;
        if before.is_none_or(|(_, c)| c != caller) {
            statement.raw_bind_parameter(3, caller)?;
        }
        if changed(|a, b| a.server == b.server) {
            statement.raw_bind_parameter(4, &r.server)?;
        }
        if changed(|a, b| a.instance == b.instance) {
            statement.raw_bind_parameter(5, &r.instance)?;
        }
        if changed(|a, b| a.method == b.method) {
            statement.raw_bind_parameter(6, &r.method)?;
        }
        if changed(|a, b| a.name == b.name) {
            statement.raw_bind_parameter(7, &r.name)?;
        }
        if changed(|a, b| a.in_script == b.in_script) {
            statement.raw_bind_parameter(8, r.in_script)?;
        }
        statement.raw_bind_parameter(9, r.duration_us)?;
        if changed(|a, b| a.outcome == b.outcome) {
            statement.raw_bind_parameter(10, r.outcome.as_str())?;
        }
        if changed(|a, b| a.code == b.code) {
            statement.raw_bind_parameter(11, r.code)?;
        }
        statement.raw_bind_parameter(12, r.bytes_in)?;
        statement.raw_bind_parameter(13, r.bytes_out)?;
        if changed(|a, b| a.arguments == b.arguments) {
            statement.raw_bind_parameter(14, &r.arguments)?;
        }
        statement.raw_execute()?;
        before = Some((r, caller));
    }
    Ok(())
}

/// The id of `caller`'s row, added if there is none.
fn caller_id(connection: &Connection, caller: &Caller) -> Result<i64, rusqlite::Error> {
    let params = rusqlite::params![caller.principal, caller.client, caller.session, caller.transport, caller.revision];
    let found = connection
        .prepare_cached(
            "SELECT id FROM callers WHERE principal = ?1 AND client IS ?2 AND session IS ?3 AND transport = ?4 \
             AND revision = ?5",
        )?
        .query_row(params, |r| r.get(0));
    match found {
        Err(rusqlite::Error::QueryReturnedNoRows) => {
            connection
                .prepare_cached(
                    "INSERT INTO callers (principal, client, session, transport, revision) VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params)?;
            Ok(connection.last_insert_rowid())
        }
        found => found,
    }
}

/// Deletes records older than `journal.maxAge`, then the oldest until the file's used
/// pages fit three quarters of `journal.maxBytes` (the rest is the WAL's, and the next
/// records'). Returns how many records it deleted.
fn prune(connection: &Connection, config: &JournalConfig) -> usize {
    let mut deleted = 0;
    let cutoff = now_ms() - i64::try_from(config.max_age.as_millis()).unwrap_or(i64::MAX);
    // An id below the cutoff's is a record that started before it (a range of the primary
    // key); one that started before but was written after waits for the next pruning.
    match connection.execute("DELETE FROM records WHERE id < ?1", [cutoff.max(0) << ID_TIME_SHIFT]) {
        Ok(n) => deleted += n,
        Err(e) => tracing::warn!("journal: cannot prune old records: {e}"),
    }
    let used = |c: &Connection| -> Result<u64, rusqlite::Error> {
        let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0))?;
        let free: i64 = c.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0))?;
        Ok(((pages - free).max(0) * size) as u64)
    };
    // A tenth of the records at a time, until the rest fit.
    while used(connection).is_ok_and(|bytes| bytes > config.max_bytes / 4 * 3) {
        match connection.execute(
            "DELETE FROM records WHERE id IN \
             (SELECT id FROM records ORDER BY id LIMIT MAX(1, (SELECT COUNT(*) FROM records) / 10))",
            [],
        ) {
            Ok(n) if n > 0 => deleted += n,
            _ => break,
        }
    }
    deleted
}

/// Which records a reader asks for.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only this principal's (`Principal::tag`); `None`: everyone's (the owner).
    pub principal: Option<String>,
    pub server: Option<String>,
    pub tool: Option<String>,
    pub session: Option<String>,
    pub errors_only: bool,
    pub since_ms: Option<i64>,
    /// Only records written after the one with this id (following the journal).
    pub after_id: Option<i64>,
}

impl Filter {
    /// Only the records `principal` may see: a token holder or OAuth subject sees its
    /// own; the local user (the daemon's owner) sees everyone's.
    pub fn visible_to(principal: &Principal) -> Filter {
        Filter {
            principal: (!matches!(principal, Principal::Local)).then(|| principal_tag(principal)),
            ..Filter::default()
        }
    }

    fn clause(&self) -> (String, Vec<rusqlite::types::Value>) {
        use rusqlite::types::Value as Sql;
        let mut conditions = Vec::new();
        let mut values = Vec::new();
        let mut add = |condition: &str, value: Sql| {
            values.push(value);
            conditions.push(format!("{condition} ?{}", values.len()));
        };
        if let Some(p) = &self.principal {
            add("principal =", Sql::Text(p.clone()));
        }
        if let Some(s) = &self.server {
            add("server =", Sql::Text(s.clone()));
        }
        if let Some(t) = &self.tool {
            add("name =", Sql::Text(t.clone()));
        }
        if let Some(s) = &self.session {
            add("session =", Sql::Text(s.clone()));
        }
        if let Some(since) = self.since_ms {
            // Every record at or after `since` has an id at or after this: a range of the
            // primary key, then the exact time.
            add("id >=", Sql::Integer(since.max(0) << ID_TIME_SHIFT));
            add("time_ms >=", Sql::Integer(since));
        }
        if let Some(id) = self.after_id {
            add("id >", Sql::Integer(id));
        }
        if self.errors_only {
            conditions.push("outcome != 'ok'".into());
        }
        let clause = if conditions.is_empty() { String::new() } else { format!("WHERE {}", conditions.join(" AND ")) };
        (clause, values)
    }
}

/// A `/v1/log` request.
#[derive(Clone, Debug)]
pub struct Query {
    pub filter: Filter,
    pub limit: usize,
}

/// What `/v1/stats` groups by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupBy {
    Server,
    Tool,
    Client,
    Session,
    /// The instance that answered (`server[scope key]`).
    Instance,
}

impl GroupBy {
    pub fn parse(text: &str) -> Option<GroupBy> {
        match text {
            "server" => Some(GroupBy::Server),
            "tool" => Some(GroupBy::Tool),
            "client" => Some(GroupBy::Client),
            "session" => Some(GroupBy::Session),
            "instance" => Some(GroupBy::Instance),
            _ => None,
        }
    }

    fn column(self) -> &'static str {
        match self {
            GroupBy::Server => "server",
            GroupBy::Tool => "COALESCE(server || '.', '') || COALESCE(name, '')",
            GroupBy::Client => "client",
            GroupBy::Session => "session",
            GroupBy::Instance => "instance",
        }
    }
}

/// One group's numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stat {
    /// The server, `server.tool`, client or session; `None` where the records had none
    /// (the local user has no client name).
    pub key: Option<String>,
    pub calls: u64,
    pub errors: u64,
    pub error_rate: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
}

impl Stat {
    fn of(key: Option<String>, mut durations_us: Vec<i64>, errors: u64) -> Stat {
        durations_us.sort_unstable();
        let calls = durations_us.len() as u64;
        let ms = |p| percentile(&durations_us, p) as f64 / 1000.0;
        Stat {
            key,
            calls,
            errors,
            error_rate: if calls == 0 { 0.0 } else { errors as f64 / calls as f64 },
            p50_ms: ms(50.0),
            p95_ms: ms(95.0),
            p99_ms: ms(99.0),
        }
    }
}

/// The nearest-rank percentile `p` (0–100) of `sorted`: the smallest value at or below
/// which `p`% of the values lie. 0 for no values.
pub fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn redaction_masks_secret_like_keys_at_any_depth_and_keeps_the_rest() {
        let arguments = json!({
            "query": "weather",
            "password": "hunter2",
            "nested": { "apiKey": "k-1", "list": [{ "Authorization": "Bearer x", "n": 1 }] },
            "session_cookie": { "a": "b" },
        });
        let masked = redact::value(&arguments);
        assert_eq!(
            masked,
            json!({
                "query": "weather",
                "password": MASK,
                "nested": { "apiKey": MASK, "list": [{ "Authorization": MASK, "n": 1 }] },
                "session_cookie": MASK,
            })
        );
        assert!(!masked.to_string().contains("hunter2"));
    }

    #[test]
    fn each_arguments_mode_keeps_what_it_says() {
        let arguments = json!({ "token": "t0p", "q": 1 });
        let keep = |arguments| Keep { arguments, ..Keep::default() };
        assert_eq!(keep_arguments(&arguments, keep(JournalArguments::None)), None);
        assert_eq!(
            keep_arguments(&arguments, keep(JournalArguments::Whole)).as_deref(),
            Some(r#"{"token":"t0p","q":1}"#)
        );
        let hashed = keep_arguments(&arguments, keep(JournalArguments::Hashed)).unwrap();
        assert!(hashed.starts_with("sha256:") && hashed.len() == 7 + 64 && !hashed.contains("t0p"), "{hashed}");
        assert_eq!(keep_arguments(&arguments, keep(JournalArguments::Hashed)).unwrap(), hashed);
        assert!(!keep_arguments(&arguments, keep(JournalArguments::Redacted)).unwrap().contains("t0p"));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&values, 50.0), 50);
        assert_eq!(percentile(&values, 95.0), 95);
        assert_eq!(percentile(&values, 99.0), 99);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[1, 2], 50.0), 1);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn the_size_counted_is_the_compact_json_size() {
        let values = [
            json!({ "a": [1, "two", null], "b": { "c": true, "d": false }, "e": [], "f": {} }),
            json!([0, 9, 10, 99, 100, -1, -10, u64::MAX, i64::MIN, 0.5, -2.25e-7, 1e300, 3.0]),
            json!("quote \" backslash \\ newline \n tab \t bell \u{7} nul \u{0} del \u{7f} é 🦀"),
            json!({ "ke\"y\n": "\u{1f}\u{8}\u{c}\r" }),
        ];
        for value in values {
            assert_eq!(json_len(&value), value.to_string().len() as i64, "{value}");
        }
    }

    #[test]
    fn outcomes_are_classified_from_the_result_and_the_error() {
        assert_eq!(Outcome::of(Ok(&json!({ "content": [] }))).0, Outcome::Ok);
        assert_eq!(Outcome::of(Ok(&json!({ "isError": true }))).0, Outcome::ToolError);
        let limit = Error::Limit { message: "busy".into(), setting: "limits.maxCallsPerClient", limit: 1 };
        assert_eq!(Outcome::of(Err(&limit)), (Outcome::Refused, Some(-32603)));
        let timeout = Error::Upstream(UpstreamError::Timeout {
            server: "s".into(),
            method: "tools/call".into(),
            after: Duration::from_secs(1),
        });
        assert_eq!(Outcome::of(Err(&timeout)).0, Outcome::Timeout);
        assert_eq!(Outcome::of(Err(&Error::NoMethod("x".into()))), (Outcome::Error, Some(-32601)));
    }

    fn record(time_ms: i64, principal: &str, outcome: Outcome) -> Record {
        Record {
            id: 0,
            time_ms,
            caller: Caller {
                principal: principal.into(),
                client: None,
                session: None,
                transport: "socket",
                revision: "2025-11-25".into(),
            },
            server: Some("alpha".into()),
            instance: None,
            method: "tools/call".into(),
            name: Some("echo".into()),
            in_script: false,
            duration_us: 1000,
            outcome,
            code: None,
            bytes_in: 2,
            bytes_out: 2,
            arguments: None,
        }
    }

    fn memory() -> Store {
        let mut connection = Connection::open_in_memory().unwrap();
        prepare(&mut connection).unwrap();
        Store::new(connection)
    }

    fn count(connection: &Connection) -> i64 {
        connection.query_row("SELECT COUNT(*) FROM calls", [], |r| r.get(0)).unwrap()
    }

    /// A batch binds only the fields that changed since the record before: each record
    /// still reads back with its own values, a field that goes back to NULL included, and
    /// a second batch (its statement's bindings cleared) with its own.
    #[test]
    fn each_record_of_a_batch_reads_back_as_it_was_whatever_the_record_before_held() {
        let mut store = memory();
        let base = now_ms() - 60_000;
        let mut batch: Vec<Record> = (0..6).map(|i| record(base + i, "", Outcome::Ok)).collect();
        batch[1].server = None;
        batch[1].caller.principal = "@\"ci\"".into();
        batch[2].instance = Some("alpha[global]".into());
        batch[2].method = "resources/read".into();
        batch[2].name = None;
        batch[3].in_script = true;
        batch[3].outcome = Outcome::Error;
        batch[3].code = Some(-32602);
        batch[3].arguments = Some("{\"a\":1}".into());
        for (i, r) in batch.iter_mut().enumerate() {
            r.duration_us = 100 + i as i64;
            r.bytes_in = 10 + i as i64;
            r.bytes_out = 20 + i as i64;
        }
        let (first, second) = batch.split_at(4);
        store.insert(first).unwrap();
        store.insert(second).unwrap();
        let read: Vec<Record> = store
            .connection
            .prepare("SELECT * FROM calls ORDER BY id")
            .unwrap()
            .query_map([], row_record)
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(read.len(), batch.len());
        for (read, written) in read.iter().zip(&batch) {
            let fields = |r: &Record| {
                format!(
                    "{} {:?} {:?} {:?} {} {:?} {} {} {:?} {:?} {} {} {:?}",
                    r.time_ms,
                    r.caller,
                    r.server,
                    r.instance,
                    r.method,
                    r.name,
                    r.in_script,
                    r.duration_us,
                    r.outcome,
                    r.code,
                    r.bytes_in,
                    r.bytes_out,
                    r.arguments
                )
            };
            assert_eq!(fields(read), fields(written));
        }
    }

    /// A batch that fails part-way is rolled back whole, the callers it added with it: a
    /// later record of the same caller adds it again, so it is read back with its caller.
    #[test]
    fn after_a_batch_fails_a_new_callers_next_record_reads_back_with_its_caller() {
        let mut store = memory();
        store
            .connection
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE INSERT ON records WHEN NEW.name = 'boom' \
                 BEGIN SELECT RAISE(ABORT, 'refused'); END;",
            )
            .unwrap();
        let mut first = record(now_ms(), "@\"new\"", Outcome::Ok);
        first.name = Some("boom".into());
        assert!(store.insert(&[first]).is_err());
        store.connection.execute_batch("DROP TRIGGER refuse").unwrap();
        store.insert(&[record(now_ms(), "@\"new\"", Outcome::Ok)]).unwrap();
        assert_eq!(count(&store.connection), 1, "the record lost its caller");
    }

    #[test]
    fn records_older_than_max_age_are_pruned_and_newer_ones_kept() {
        let mut store = memory();
        let day = 24 * 3_600_000;
        let batch = [record(now_ms() - 3 * day, "", Outcome::Ok), record(now_ms(), "", Outcome::Ok)];
        store.insert(&batch).unwrap();
        store.prune(&JournalConfig { max_age: Duration::from_millis(2 * day as u64), ..Default::default() });
        let left: i64 = store.connection.query_row("SELECT MIN(time_ms) FROM calls", [], |r| r.get(0)).unwrap();
        assert_eq!(count(&store.connection), 1);
        assert!(left > now_ms() - day);
    }

    #[test]
    fn a_record_written_after_a_later_one_is_found_by_its_start_and_ids_keep_the_written_order() {
        let mut store = memory();
        let base = now_ms() - 60_000;
        // Written in this order: a long call that started first is answered last.
        let batch = [base + 5_000, base + 4_000, base + 3_000].map(|t| record(t, "", Outcome::Ok));
        store.insert(&batch).unwrap();
        let ids: Vec<i64> = store
            .connection
            .prepare("SELECT id FROM records ORDER BY rowid")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        let since = |store: &Store, since_ms: i64| -> Vec<i64> {
            let (clause, values) = Filter { since_ms: Some(since_ms), ..Filter::default() }.clause();
            let sql = format!("SELECT time_ms FROM calls {clause} ORDER BY time_ms");
            let mut statement = store.connection.prepare(&sql).unwrap();
            statement.query_map(params_from_iter(values.iter()), |r| r.get(0)).unwrap().map(Result::unwrap).collect()
        };
        assert_eq!(since(&store, base + 3_000), vec![base + 3_000, base + 4_000, base + 5_000]);
        assert_eq!(since(&store, base + 3_500), vec![base + 4_000, base + 5_000]);
        // Pruning goes by id: a record that started before the cutoff but was written after
        // one that started after it waits for a cutoff past that one.
        let prune_before = |store: &mut Store, cutoff: i64| {
            let max_age = Duration::from_millis(u64::try_from(now_ms() - cutoff).unwrap());
            store.prune(&JournalConfig { max_age, ..Default::default() });
        };
        let mut store = memory();
        store.insert(&[base + 1_000, base + 9_000, base + 2_000].map(|t| record(t, "", Outcome::Ok))).unwrap();
        prune_before(&mut store, base + 2_500);
        assert_eq!(since(&store, 0), vec![base + 2_000, base + 9_000]);
        prune_before(&mut store, base + 9_500);
        assert_eq!(since(&store, 0), Vec::<i64>::new());
    }

    #[test]
    fn past_max_bytes_the_oldest_records_go_first() {
        let mut store = memory();
        let mut batch: Vec<Record> = (0..2000).map(|i| record(now_ms() - 10_000 + i, "", Outcome::Ok)).collect();
        batch.iter_mut().for_each(|r| r.arguments = Some("x".repeat(200)));
        store.insert(&batch).unwrap();
        store.prune(&JournalConfig { max_bytes: 100 * 1024, ..Default::default() });
        let left = count(&store.connection);
        assert!(left > 0 && left < 2000, "{left} records left");
        let newest: i64 = store.connection.query_row("SELECT MAX(time_ms) FROM calls", [], |r| r.get(0)).unwrap();
        assert_eq!(newest, batch.last().unwrap().time_ms);
    }

    /// The files of the journal at `path`, database, WAL and shared memory, in bytes.
    fn on_disk(path: &Path) -> u64 {
        ["", "-wal", "-shm"]
            .iter()
            .filter_map(|s| std::fs::metadata(format!("{}{s}", path.display())).ok())
            .map(|m| m.len())
            .sum()
    }

    #[test]
    fn compacting_keeps_the_files_within_twice_max_bytes_and_gives_pruned_space_back() {
        let dir = std::env::temp_dir().join(format!("mcpx-journal-compact-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.sqlite");
        let _ = std::fs::remove_file(&path);
        let mut connection = Connection::open(&path).unwrap();
        prepare(&mut connection).unwrap();
        let mut store = Store::new(connection);
        let config = JournalConfig { max_bytes: 256 * 1024, ..Default::default() };
        let mut batch: Vec<Record> = (0..200).map(|i| record(now_ms() - 10_000 + i, "", Outcome::Ok)).collect();
        batch.iter_mut().for_each(|r| r.arguments = Some("x".repeat(16 * 1024)));
        for run in batches(&batch, Store::budget(&config)) {
            store.insert(run).unwrap();
            store.written += run.iter().map(Record::footprint).sum::<u64>();
            if store.written >= Store::budget(&config) {
                store.compact(&config);
            }
        }
        store.compact(&config);
        let full = on_disk(&path);
        assert!(full <= 2 * config.max_bytes, "{full} bytes on disk");
        assert!(count(&store.connection) > 0);
        store.compact(&JournalConfig { max_bytes: 64 * 1024, ..config });
        let smaller = on_disk(&path);
        assert!(smaller < full && smaller <= 2 * 64 * 1024, "{full} bytes, then {smaller}");
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_journal_made_without_incremental_vacuum_is_switched_to_it_once_with_its_records() {
        let dir = std::env::temp_dir().join(format!("mcpx-journal-vacuum-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.sqlite");
        let _ = std::fs::remove_file(&path);
        let old = Connection::open(&path).unwrap();
        old.execute_batch(&SCHEMA.replace("PRAGMA auto_vacuum = INCREMENTAL;", "")).unwrap();
        old.execute_batch(VIEW).unwrap();
        let mode = |c: &Connection| c.query_row("PRAGMA auto_vacuum", [], |r| r.get::<_, i64>(0)).unwrap();
        assert_eq!(mode(&old), 0);
        Store::new(old).insert(&[record(now_ms(), "", Outcome::Ok)]).unwrap();
        let mut connection = Connection::open(&path).unwrap();
        prepare(&mut connection).unwrap();
        assert_eq!(mode(&connection), INCREMENTAL);
        assert_eq!(count(&connection), 1);
        drop(connection);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_batch_holds_no_more_than_the_budget_unless_one_record_is_more() {
        let mut records: Vec<Record> = (0..10).map(|i| record(i, "", Outcome::Ok)).collect();
        records[3].arguments = Some("x".repeat(10_000));
        let sizes: Vec<usize> = batches(&records, 1000).map(<[Record]>::len).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 10);
        assert!(batches(&records, 1000).all(|b| b.len() == 1 || b.iter().map(Record::footprint).sum::<u64>() <= 1000));
        assert_eq!(batches(&records, u64::MAX).count(), 1);
    }

    #[test]
    fn a_kept_record_has_every_text_cut_and_no_secret_shape_short_of_whole() {
        let mut r = record(now_ms(), "", Outcome::Ok);
        let huge = "n".repeat(100_000);
        r.server = Some(huge.clone());
        r.name = Some("https://ada:hunter2@example.com/x?token=hunter2".into());
        r.caller.session = Some(format!("session:{}", "s".repeat(5000)));
        r.instance = Some("up[session:busy]".into());
        r.arguments = Some("a".repeat(50_000));
        let keep = Keep { arguments: JournalArguments::Redacted, max_text: 256, max_arguments: 1024 };
        let kept = r.clone().kept(keep);
        assert!(kept.server.as_ref().unwrap().len() <= 256);
        assert!(kept.server.as_ref().unwrap().contains("100000 bytes, sha256:"));
        assert!(!kept.name.as_ref().unwrap().contains("hunter2"), "{:?}", kept.name);
        assert!(kept.caller.session.as_ref().unwrap().len() <= 256);
        assert_eq!(kept.instance.as_deref(), Some("up[session:busy]"));
        assert!(kept.arguments.as_ref().unwrap().len() <= 1024);
        let whole = r.kept(Keep { arguments: JournalArguments::Whole, ..keep });
        assert!(whole.name.as_ref().unwrap().contains("hunter2"), "whole keeps what came");
        assert!(whole.server.as_ref().unwrap().len() <= 256, "and cuts it still");
    }

    #[test]
    fn stats_group_and_count_errors_over_what_the_filter_lets_through() {
        let dir = std::env::temp_dir().join(format!("mcpx-journal-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.sqlite");
        let _ = std::fs::remove_file(&path);
        let journal = Journal::open(&path, 16, || None).unwrap();
        let mut store = Store::new(Connection::open(&path).unwrap());
        let batch = [
            record(now_ms(), "", Outcome::Ok),
            record(now_ms(), "", Outcome::ToolError),
            record(now_ms(), "@\"ci\"", Outcome::Ok),
        ];
        store.insert(&batch).unwrap();
        let all = journal.stats(&Filter::default(), GroupBy::Server).unwrap();
        assert_eq!((all[0].key.as_deref(), all[0].calls, all[0].errors), (Some("alpha"), 3, 1));
        let ci = Filter::visible_to(&Principal::Token("ci".into()));
        let theirs = journal.stats(&ci, GroupBy::Tool).unwrap();
        assert_eq!((theirs[0].key.as_deref(), theirs[0].calls, theirs[0].errors), (Some("alpha.echo"), 1, 0));
        let errors = Filter { errors_only: true, ..Filter::default() };
        let read = journal.read(&Query { filter: errors, limit: 10 }).unwrap();
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].outcome, Outcome::ToolError);
        drop(journal);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_caller_whose_records_were_all_pruned_is_journaled_again_when_it_calls() {
        let mut store = memory();
        let day = 24 * 3_600_000;
        store.insert(&[record(now_ms() - 3 * day, "@\"ci\"", Outcome::Ok)]).unwrap();
        store.prune(&JournalConfig { max_age: Duration::from_millis(day as u64), ..Default::default() });
        assert_eq!(count(&store.connection), 0);
        let callers: i64 = store.connection.query_row("SELECT COUNT(*) FROM callers", [], |r| r.get(0)).unwrap();
        assert_eq!(callers, 0, "a caller no record names is pruned with its records");
        store.insert(&[record(now_ms(), "@\"ci\"", Outcome::Ok)]).unwrap();
        assert_eq!(count(&store.connection), 1, "the new record names a caller row that exists");
    }

    #[test]
    fn a_journal_kept_in_one_table_is_moved_into_callers_and_records_whole() {
        let dir = std::env::temp_dir().join(format!("mcpx-journal-migrate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.sqlite");
        let _ = std::fs::remove_file(&path);
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "CREATE TABLE calls (id INTEGER PRIMARY KEY, time_ms INTEGER NOT NULL, principal TEXT NOT NULL,
                 client TEXT, session TEXT, transport TEXT NOT NULL, revision TEXT NOT NULL, server TEXT,
                 instance TEXT, method TEXT NOT NULL, name TEXT, in_script INTEGER NOT NULL,
                 duration_us INTEGER NOT NULL, outcome TEXT NOT NULL, code INTEGER, bytes_in INTEGER NOT NULL,
                 bytes_out INTEGER NOT NULL, arguments TEXT);
             CREATE INDEX calls_by_time ON calls (time_ms);
             INSERT INTO calls VALUES (7, 1000, '', 'claude', NULL, 'socket', '2025-11-25', 'alpha',
                 'alpha[global]', 'tools/call', 'echo', 0, 1500, 'ok', NULL, 10, 20, NULL);
             INSERT INTO calls VALUES (9, 2000, '@\"ci\"', NULL, 'session:s1', 'http', '2026-07-28', 'beta',
                 NULL, 'resources/read', 'file:///a', 1, 2500, 'error', -32602, 30, 0, '{\"a\":1}');",
        )
        .unwrap();
        drop(old);
        let journal = Journal::open(&path, 16, || None).unwrap();
        let all = journal.read(&Query { filter: Filter::default(), limit: 10 }).unwrap();
        let rows: Vec<Value> = all.iter().map(|r| serde_json::to_value(r).unwrap()).collect();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(
            rows[0],
            json!({ "id": (2000 << ID_TIME_SHIFT) + 9, "timeMs": 2000, "client": null, "session": "session:s1", "transport": "http",
                    "revision": "2026-07-28", "server": "beta", "instance": null, "method": "resources/read",
                    "name": "file:///a", "inScript": true, "durationUs": 2500, "outcome": "error", "code": -32602,
                    "bytesIn": 30, "bytesOut": 0, "arguments": "{\"a\":1}" })
        );
        assert_eq!(
            (rows[1]["id"].clone(), rows[1]["client"].clone()),
            (json!((1000 << ID_TIME_SHIFT) + 7), json!("claude"))
        );
        let ci = Filter::visible_to(&Principal::Token("ci".into()));
        assert_eq!(journal.read(&Query { filter: ci, limit: 10 }).unwrap().len(), 1);
        drop(journal);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_token_holder_is_filtered_to_its_own_records_and_the_local_user_to_none() {
        assert_eq!(Filter::visible_to(&Principal::Local).principal, None);
        assert_eq!(Filter::visible_to(&Principal::Token("ci".into())).principal.as_deref(), Some("@\"ci\""));
    }
}
