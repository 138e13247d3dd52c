//! `/ui`: the status page the daemon serves. Three static files embedded in the binary
//! (no build step) and `/ui/state`, its data, behind the same admission as every route:
//! loopback, and with `http.tokens` the bearer.
//!
//! `/ui/state` is the `/v1/status` answer for the same caller, plus what is open now (the
//! handshake-era HTTP sessions, the relayed stdio streams of `mcpx serve`, the questions
//! waiting for `/v1` callers, each session's artifacts) and the journal's recent calls
//! and error rates. A caller sees what `/v1` would show it: the daemon's owner (the local
//! user) everything; a token holder or OAuth subject only its own sessions, questions and
//! artifacts, and the journal's records `/v1/log` gives it (everyone's for `http.admins`).
//! Never a session's id: it admits requests to its session.
//!
//! The page builds its DOM with `textContent` only: an upstream's error text is hostile
//! input. The Content-Security-Policy allows nothing but this origin's script, style and
//! fetches, so even markup that slipped through could not run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::future::join_all;
use mcpx_gateway::{Identity, Principal, Transport, journal, policy};
use serde::Serialize;

use crate::api::{self, Caller};
use crate::front::Front;
use crate::reach::{Reach, Routes};
use crate::v1;

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

/// Nothing but this origin's own script, style and `/ui/state`; no framing, no forms.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                       img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn routes() -> Routes {
    Routes::new()
        .route("/ui", Reach::Caller, get(async || asset(INDEX, "text/html; charset=utf-8")))
        .route("/ui/app.js", Reach::Caller, get(async || asset(SCRIPT, "text/javascript; charset=utf-8")))
        .route("/ui/app.css", Reach::Caller, get(async || asset(STYLE, "text/css; charset=utf-8")))
        .route("/ui/state", Reach::Caller, get(state))
}

/// The journal's window for the error rates.
const RATES_OVER: Duration = Duration::from_secs(3600);
/// How many of the journal's newest records the page lists.
const RECENT_CALLS: usize = 20;
/// How many HTTP sessions the page lists (the most recently used; each costs a read of
/// its artifacts at every poll), out of up to `http.maxSessions`.
const LISTED_SESSIONS: usize = 100;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UiState {
    #[serde(flatten)]
    status: v1::Status,
    /// `everyone` for the daemon's owner; `own` for a caller shown only its own.
    sees: &'static str,
    sessions: Vec<SessionView>,
    /// The caller's HTTP sessions open, listed or not.
    sessions_open: usize,
    streams: Vec<StreamView>,
    questions: Vec<QuestionView>,
    /// Absent when the daemon keeps no journal.
    #[serde(skip_serializing_if = "Option::is_none")]
    journal: Option<JournalView>,
}

/// A handshake-era HTTP session.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionView {
    /// As logs and scope keys name it: `http-session:<digest>`.
    session: String,
    client: String,
    revision: String,
    age_ms: u64,
    idle_ms: u64,
    in_flight: usize,
    /// Questions from upstreams this session was asked and has not answered yet.
    asked: usize,
    artifacts: Vec<ArtifactView>,
}

/// A relayed stdio stream (`mcpx serve`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StreamView {
    session: Option<String>,
    pid: Option<u32>,
    cwd: Option<String>,
    age_ms: u64,
    artifacts: Vec<ArtifactView>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ArtifactView {
    #[serde(flatten)]
    entry: v1::ArtifactEntry,
    age_ms: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QuestionView {
    #[serde(flatten)]
    question: v1::Question,
    client: String,
    session: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JournalView {
    /// Calls, errors and durations per server over the last [`RATES_OVER`].
    rates: Vec<v1::StatsGroup>,
    rates_over_ms: u64,
    /// Calls, errors and durations per instance (`server[scope key]`) over the same window.
    instances: Vec<v1::StatsGroup>,
    /// The newest records, newest first.
    recent: Vec<v1::LogRecord>,
    dropped: u64,
}

async fn state(State(front): State<Arc<Front>>, Caller(caller): Caller) -> Response {
    let status = api::status_of(&front, &caller);
    let everyone = matches!(caller.principal, Principal::Local);
    let mine = |principal: &Principal| everyone || *principal == caller.principal;
    let now = Instant::now();

    let mut open: Vec<_> = front.sessions.list().into_iter().filter(|(s, _)| mine(&s.owner)).collect();
    let sessions_open = open.len();
    open.sort_by_key(|(_, idle)| *idle);
    open.truncate(LISTED_SESSIONS);
    let front = &front;
    let sessions = join_all(open.into_iter().map(|(session, idle)| async move {
        let transport =
            Transport { session: Some(session.identity()), principal: session.owner.clone(), ..Transport::default() };
        let identity = front.gateway.identity(&serde_json::Value::Null, &transport);
        SessionView {
            session: identity.session_key().map(|k| k.to_string()).unwrap_or_default(),
            client: policy::client_key(&session.owner),
            revision: session.negotiated.revision.as_str().to_owned(),
            age_ms: millis(now.duration_since(session.opened)),
            idle_ms: millis(idle),
            in_flight: session.negotiated.in_flight.count(),
            asked: session.negotiated.questions.count(),
            artifacts: artifacts(front, &identity).await,
        }
    }))
    .await;

    // Relayed streams are the local user's: only the owner sees them.
    let streams = join_all(front.life.open_streams().into_iter().filter(|s| mine(&s.transport.principal)).map(
        |open| async move {
            let identity = front.gateway.identity(&serde_json::Value::Null, &open.transport);
            StreamView {
                session: identity.session_key().map(|k| k.to_string()),
                pid: open.transport.pid,
                cwd: open.transport.cwd.as_ref().map(|p| p.display().to_string()),
                age_ms: millis(now.duration_since(open.opened)),
                artifacts: artifacts(front, &identity).await,
            }
        },
    ))
    .await;

    let questions = front
        .pending
        .all()
        .into_iter()
        .filter(|q| mine(&q.principal))
        .map(|q| QuestionView { question: q.view(), client: policy::client_key(&q.principal), session: q.session })
        .collect();

    let state = UiState {
        status,
        sees: if everyone { "everyone" } else { "own" },
        sessions,
        sessions_open,
        streams,
        questions,
        journal: journal_view(front, &caller).await,
    };
    ([(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))], Json(state)).into_response()
}

/// The artifacts of one session, oldest first.
async fn artifacts(front: &Front, session: &Identity) -> Vec<ArtifactView> {
    front
        .gateway
        .artifacts_of(session)
        .await
        .iter()
        .map(|a| ArtifactView {
            entry: v1::ArtifactEntry::from(a),
            age_ms: a.created.elapsed().map(millis).unwrap_or(0),
        })
        .collect()
}

/// The journal's recent calls and per-server rates, as `/v1/log` and `/v1/stats` would
/// give them to this caller; `None` when the daemon keeps no journal or cannot read it.
async fn journal_view(front: &Arc<Front>, caller: &Identity) -> Option<JournalView> {
    front.gateway.journal()?;
    let since = format!("{}s", RATES_OVER.as_secs());
    let recent = api::journal_filter(front, caller, None).ok()?;
    let rated = api::journal_filter(front, caller, Some(&since)).ok()?;
    let query = journal::Query { filter: recent, limit: RECENT_CALLS };
    let read = api::read_journal(front, move |j| {
        Ok((j.read(&query)?, j.stats(&rated, journal::GroupBy::Server)?, j.stats(&rated, journal::GroupBy::Instance)?))
    });
    match read.await {
        Ok(((records, rates, instances), dropped)) => Some(JournalView {
            rates: rates.into_iter().map(api::stats_group).collect(),
            instances: instances.into_iter().map(api::stats_group).collect(),
            rates_over_ms: millis(RATES_OVER),
            recent: records.into_iter().map(api::log_record).collect(),
            dropped,
        }),
        Err(e) => {
            tracing::warn!("/ui/state without the journal: {}", e.message);
            None
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
