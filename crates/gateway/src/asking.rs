//! When an upstream needs its caller: the one home for questions going to a caller and
//! answers coming back, in each pairing of eras.
//!
//! Before an instance is picked, a request is *settled*: a retry that carries mcpx's
//! `requestState` continues its first round (same call id, same instance, or the held
//! call waiting for it), and a request to a server scoped to where the caller works, from
//! a caller with no cwd but roots, gets the cwd its first `file://` root names. The
//! context that comes out is final: nothing after this changes who is asking.
//!
//! Then the request is sent, and what an upstream asks reaches the caller the way the
//! caller's era allows — one [`Caller`] per kind:
//! - [`Stateless`] (2026-07-28): a question goes back as `input_required` under a state
//!   mcpx seals (see `ask`); a handshake-era upstream that asks inside the call has the
//!   call held open meanwhile (see `held`).
//! - [`OnSession`] (handshake era): a question is put to the caller as a real request on
//!   its session while mcpx waits, and mcpx retries a stateless upstream for it. A
//!   handshake-era upstream's own requests reach the caller through its listener.
//!
//! mcpx asks one question of its own besides roots: when an HTTP upstream needs a person
//! to log in (`UpstreamError::LoginNeeded`), a caller that declared URL-mode elicitation
//! and may log that credential in (`login`) is asked to open the login's URL: as an
//! `elicitation/create` on its session (then mcpx waits for the login and sends the
//! request again), or as an `input_required` round whose retry waits for the login and
//! goes on as a fresh call. Either way the call completes without the agent starting
//! over. Any other caller gets the error, which names `mcpx auth login <server>`.

use std::borrow::Cow;
use std::path::PathBuf;

use mcpx_protocol::Era;
use mcpx_upstream::Listener;
use serde_json::{Map, Value, json};

use mcpx_oauth::LoginState;

use crate::ask::{self, Asker};
use crate::config::Launch;
use crate::context::CallContext;
use crate::error::Error;
use crate::scope::Owner;
use crate::{Gateway, Lease, caller_of, held, roots, tasks};

/// A request ready for its instance.
pub(crate) struct Settled<'a> {
    /// Who asks, for good: the first round's call id on a retry, the cwd from its roots.
    pub ctx: Cow<'a, CallContext>,
    /// What goes upstream: a retry's own fields taken out or replaced with the upstream's.
    pub params: Value,
    /// The instance a retry returns to: the one that asked.
    pub at: Option<Owner>,
    /// The request as the caller sent it, kept where a later round is sealed over it.
    pub original: Option<Value>,
}

pub(crate) enum Settle<'a> {
    Ready(Box<Settled<'a>>),
    /// Nothing to send: a held call went on, or the caller must answer a question first.
    Replied(Result<Value, (Error, Option<Lease>)>),
}

/// Where a retry with mcpx's `requestState` goes.
enum Resumed {
    /// To the instance that asked, with the upstream's own state.
    At(Option<Owner>),
    /// To the held call waiting for these answers.
    Held(held::Held),
    /// A fresh call, with the caller's first root as its cwd (`None`: it named none).
    Rooted(Option<PathBuf>),
    /// A fresh call once the login mcpx asked the caller to open is done; `None` when
    /// the caller did not accept.
    LoggedIn(Option<String>),
    /// The held call it belongs to has ended or expired.
    Expired,
}

/// What came of asking a caller to log in for an upstream.
pub(crate) enum LoggingIn {
    /// The login is done: send the request again.
    Done,
    /// The question, for a 2026 caller to answer in its retry.
    Asked(Value),
    /// The caller could not be asked, or the login did not happen: this error.
    Not(Error),
}

/// The `inputRequests` key (and sealed-state marker) of mcpx's own login question.
pub const LOGIN_KEY: &str = "dev.mcpx/login";

/// How an upstream's questions reach one kind of caller.
pub(crate) trait Caller {
    /// The caller's roots, asked now (`Ok`: the first `file://` root's directory), or the
    /// question to return to it, which it answers in its retry (`Err`).
    async fn roots(
        &self,
        gateway: &Gateway,
        ctx: &CallContext,
        server: &str,
        method: &str,
        original: Option<&Value>,
    ) -> Result<Option<PathBuf>, Value>;

    /// Sends the request on `lease`'s instance and sees its questions through.
    async fn send(
        &self,
        gateway: &Gateway,
        ctx: &CallContext,
        lease: Lease,
        method: &str,
        params: Value,
        original: Option<&Value>,
    ) -> Result<Value, (Error, Option<Lease>)>;
}

/// A 2026-07-28 caller.
pub(crate) struct Stateless;

/// A handshake-era caller, on its session.
pub(crate) struct OnSession;

impl Caller for Stateless {
    async fn roots(
        &self,
        gateway: &Gateway,
        ctx: &CallContext,
        server: &str,
        method: &str,
        original: Option<&Value>,
    ) -> Result<Option<PathBuf>, Value> {
        let Some(original) = original else { return Ok(None) };
        let lifetime = gateway.settings.config().timeouts.input_required;
        let marker = Some(json!({ roots::KEY: true }));
        let state = gateway.asks.seal(Asker::gateway(server), ctx, method, original, marker, lifetime);
        Err(json!({
            "resultType": "input_required",
            "inputRequests": { roots::KEY: roots::question() },
            "requestState": state,
        }))
    }

    async fn send(
        &self,
        gateway: &Gateway,
        ctx: &CallContext,
        lease: Lease,
        method: &str,
        params: Value,
        original: Option<&Value>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let upstream = lease.upstream().clone();
        if ask::METHODS.contains(&method) && upstream.facts().era == Era::Legacy {
            // A handshake-era upstream asks inside the call: run it so it can be held open.
            let (ask, questions) = held::Held::asker(ctx.client_capabilities.clone());
            let listener = Listener { ask: Some(ask), ..quiet_listener(ctx) };
            let capabilities = ctx.client_capabilities.clone();
            let method_owned = method.to_owned();
            let caller = caller_of(ctx);
            let call = tokio::spawn(async move {
                upstream.request_reporting(&method_owned, params, &capabilities, Some(caller), Some(listener)).await
            });
            let held = held::Held::new(call, questions, lease, ctx.reached.clone());
            return Box::pin(gateway.follow(ctx, method, original.cloned().unwrap_or_default(), held)).await;
        }
        let (mut result, lease) = request(ctx, lease, method, params).await?;
        if tasks::is_task(&result) {
            return gateway.adopt_task(ctx, lease, result, None);
        }
        if !ask::is_input_required(&result) {
            return Ok(result);
        }
        // The caller answers the questions itself and retries with mcpx's state.
        let Some(original) = original else { return Err(answered_input_required(method, lease)) };
        let upstream_state = result.as_object_mut().and_then(|r| r.remove("requestState"));
        let lifetime = gateway.settings.config().timeouts.input_required;
        let asker = Asker::instance(lease.key());
        result["requestState"] = gateway.asks.seal(asker, ctx, method, original, upstream_state, lifetime).into();
        Ok(result)
    }
}

impl Caller for OnSession {
    async fn roots(
        &self,
        _gateway: &Gateway,
        ctx: &CallContext,
        _server: &str,
        _method: &str,
        _original: Option<&Value>,
    ) -> Result<Option<PathBuf>, Value> {
        let Some(ask) = ctx.listener.as_ref().and_then(|l| l.ask.clone()) else { return Ok(None) };
        let asked = ask("roots/list".to_owned(), json!({})).await;
        Ok(asked.ok().as_ref().and_then(roots::first_dir))
    }

    async fn send(
        &self,
        gateway: &Gateway,
        ctx: &CallContext,
        lease: Lease,
        method: &str,
        params: Value,
        _original: Option<&Value>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        // The caller is asked on its session, and mcpx retries for it with the answers.
        let sent = ask::METHODS.contains(&method).then(|| params.clone());
        let tasked = params.pointer("/task/ttl").and_then(Value::as_u64).filter(|_| method == "tools/call");
        let (result, lease) = request(ctx, lease, method, params).await?;
        if let Some(ttl) = tasked
            && result.get("task").is_some_and(Value::is_object)
        {
            // A 2025-11-25 upstream ran the call as the task the caller asked for.
            return gateway.adopt_task(ctx, lease, result, Some(ttl));
        }
        if !ask::is_input_required(&result) {
            return Ok(result);
        }
        let Some(sent) = sent else { return Err(answered_input_required(method, lease)) };
        ask_on_session(ctx, &lease, method, sent, result).await.map_err(|e| (e, Some(lease)))
    }
}

impl Gateway {
    /// Settles a request before its instance is picked: a retry carrying mcpx's state
    /// continues the call it belongs to, and a caller with no cwd but roots is asked them.
    pub(crate) async fn settle<'a>(
        &self,
        ctx: &'a CallContext,
        server: &str,
        method: &str,
        mut params: Value,
    ) -> Settle<'a> {
        // A copy for a later round, only where one can follow: a 2026 caller's retry is
        // sealed over the request as it came (or a resumed one goes on under it); a
        // handshake-era caller's questions are answered here and the request sent again.
        let may_ask = ask::METHODS.contains(&method);
        let modern = ctx.revision.era() == Era::Modern;
        let state = params.get("requestState").and_then(Value::as_str).filter(|_| may_ask).map(str::to_owned);
        let original = (may_ask && (modern || state.is_some())).then(|| params.clone());
        let mut settled = Settled { ctx: Cow::Borrowed(ctx), params: Value::Null, at: None, original };
        let mut cwd = None;
        let mut roots_answered = false;
        if let Some(state) = state {
            let resume = match self.asks.open(&state, server, ctx, method, &params) {
                Ok(resume) => resume,
                Err(e) => return Settle::Replied(Err((e, None))),
            };
            settled.ctx = Cow::Owned(CallContext { call_id: resume.call_id.clone(), ..ctx.clone() });
            match self.resumed(resume, &mut params) {
                Resumed::Held(mut held) => {
                    held.answer(params.get("inputResponses").and_then(Value::as_object));
                    let original = settled.original.unwrap_or_default();
                    return Settle::Replied(Box::pin(self.follow(&settled.ctx, method, original, held)).await);
                }
                Resumed::Rooted(dir) => {
                    cwd = dir;
                    roots_answered = true;
                }
                Resumed::At(owner) => settled.at = owner,
                Resumed::LoggedIn(login) => {
                    if let Err(e) = Box::pin(self.login_done(&settled.ctx, server, login.as_deref())).await {
                        return Settle::Replied(Err((e, None)));
                    }
                }
                Resumed::Expired => {
                    let e = Error::params("requestState refused: the call it belongs to has ended or expired");
                    return Settle::Replied(Err((e, None)));
                }
            }
        }
        // Asked once: a caller whose roots name no directory degrades like one without roots.
        let scope = self.settings.config().server(server).map(|s| s.scope).unwrap_or_default();
        let principal = &ctx.identity.principal;
        if !roots_answered
            && settled.at.is_none()
            && roots::wanted(&settled.ctx, scope)
            && self.may_name_places(principal)
        {
            let original = settled.original.as_ref();
            let asked = match ctx.revision.era() {
                Era::Modern => Box::pin(Stateless.roots(self, &settled.ctx, server, method, original)).await,
                Era::Legacy => Box::pin(OnSession.roots(self, &settled.ctx, server, method, original)).await,
            };
            match asked {
                Ok(dir) => cwd = dir,
                Err(question) => return Settle::Replied(Ok(question)),
            }
        }
        // A directory the caller may not name is never used, nor looked at.
        if let Some(cwd) = cwd.and_then(|dir| self.place_named(principal, server, dir)) {
            settled.ctx.to_mut().identity.cwd = Some(cwd);
        }
        settled.params = params;
        Settle::Ready(Box::new(settled))
    }

    /// Where a retry carrying mcpx's `requestState` goes. Rewrites `params` for the
    /// upstream: its own state back in, or mcpx's roots answer taken out.
    fn resumed(&self, resume: ask::Resume, params: &mut Value) -> Resumed {
        let marker = |key: &str| resume.upstream_state.as_ref().and_then(|s| s.get(key)).cloned();
        if let Some(token) = marker(held::HELD_KEY) {
            return match token.as_str().and_then(|t| self.parking.take(t)) {
                Some(held) => Resumed::Held(held),
                None => Resumed::Expired,
            };
        }
        if let Some(login) = marker(LOGIN_KEY) {
            // The answer to mcpx's own login question: a fresh call once the login is done.
            let answer = params.get("inputResponses").and_then(|r| r.get(LOGIN_KEY));
            let accepted = answer.and_then(|a| a.get("action")).and_then(Value::as_str) == Some("accept");
            if let Some(p) = params.as_object_mut() {
                p.remove("requestState");
                p.remove("inputResponses");
            }
            return Resumed::LoggedIn(login.as_str().filter(|_| accepted).map(str::to_owned));
        }
        if marker(roots::KEY).is_some() {
            // The answer to mcpx's own roots question: a cwd, then a fresh call upstream.
            let answer = params.get("inputResponses").and_then(|r| r.get(roots::KEY)).cloned().unwrap_or_default();
            if let Some(p) = params.as_object_mut() {
                p.remove("requestState");
                p.remove("inputResponses");
            }
            return Resumed::Rooted(roots::first_dir(&answer));
        }
        match resume.upstream_state {
            Some(upstream_state) => params["requestState"] = upstream_state,
            None => {
                params.as_object_mut().map(|p| p.remove("requestState"));
            }
        }
        Resumed::At(resume.instance)
    }

    /// Follows a held call to its result, or parks it and returns its questions to the
    /// caller as `input_required` under a sealed state that names it.
    async fn follow(
        &self,
        ctx: &CallContext,
        method: &str,
        original: Value,
        mut held: held::Held,
    ) -> Result<Value, (Error, Option<Lease>)> {
        held.taken_over_by(&ctx.reached);
        match held.next().await {
            held::Next::Finished(Ok(result), _) => Ok(result),
            held::Next::Finished(Err(e), lease) => Err((Error::from(e), Some(lease))),
            held::Next::Asks(requests, held) => {
                let lifetime = self.settings.config().timeouts.input_required;
                let key = held.lease.key().clone();
                let token = self.parking.park(held, std::time::Instant::now() + lifetime);
                let marker = Some(json!({ held::HELD_KEY: token }));
                let state = self.asks.seal(Asker::instance(&key), ctx, method, &original, marker, lifetime);
                Ok(json!({ "resultType": "input_required", "inputRequests": requests, "requestState": state }))
            }
        }
    }
}

impl Gateway {
    /// Whether a request to `server` may have to be sent again after the caller logs in:
    /// `server` is an HTTP server (only those want logins) and the caller is one that
    /// [`Gateway::ask_to_log_in`] waits for (a handshake-era caller that can be asked, on
    /// its session, to open a URL). Every other caller gets its answer without a resend, so
    /// nothing of its request is kept for one.
    pub(crate) fn may_send_again_after_login(&self, ctx: &CallContext, server: &str) -> bool {
        ctx.revision.era() == Era::Legacy
            && ctx.listener.as_ref().is_some_and(|l| l.ask.is_some())
            && ctx.client_capabilities.pointer("/elicitation/url").is_some_and(Value::is_object)
            && self.settings.config().server(server).is_some_and(|s| matches!(s.launch, Launch::Http { .. }))
    }

    /// `server` needs a person to log in before it answers: asks the caller to open a
    /// login's URL where it declared URL-mode elicitation and may log that credential in.
    /// A handshake-era caller is asked on its session and the login waited for here; a
    /// 2026 caller gets the question to answer in its retry (`original` is its request).
    /// Otherwise `needed` stands, and the caller hears it (`login`).
    pub(crate) async fn ask_to_log_in(
        &self,
        ctx: &CallContext,
        server: &str,
        method: &str,
        original: Option<&Value>,
        needed: Error,
    ) -> LoggingIn {
        if !ctx.client_capabilities.pointer("/elicitation/url").is_some_and(Value::is_object) {
            return LoggingIn::Not(needed);
        }
        let ask = ctx.listener.as_ref().and_then(|l| l.ask.clone());
        let modern = ctx.revision.era() == Era::Modern;
        if (modern && original.is_none()) || (!modern && ask.is_none()) {
            return LoggingIn::Not(needed);
        }
        let login = match self.begin_login(server, &ctx.identity.principal).await {
            Ok(login) => login,
            Err(e) => {
                tracing::debug!(server, "no login to offer the caller: {e}");
                return LoggingIn::Not(needed);
            }
        };
        let message = format!(
            "{server} needs you to log in. Open this page to log mcpx in to it (`mcpx auth login {server}` does the same)."
        );
        if let (true, Some(original)) = (modern, original) {
            let lifetime = self.settings.config().oauth.login_timeout;
            let marker = Some(json!({ LOGIN_KEY: login.id }));
            let state = self.asks.seal(Asker::gateway(server), ctx, method, original, marker, lifetime);
            let question = json!({
                "method": "elicitation/create",
                "params": { "mode": "url", "message": message, "url": login.url },
            });
            return LoggingIn::Asked(json!({
                "resultType": "input_required",
                "inputRequests": { LOGIN_KEY: question },
                "requestState": state,
            }));
        }
        let Some(ask) = ask else { return LoggingIn::Not(needed) };
        let question = json!({ "mode": "url", "elicitationId": login.id, "message": message, "url": login.url });
        let answer = match ask("elicitation/create".to_owned(), question).await {
            Ok(answer) => answer,
            Err(e) => return LoggingIn::Not(Error::Relayed(e)),
        };
        let accepted = answer.get("action").and_then(Value::as_str) == Some("accept");
        match self.login_done(ctx, server, Some(&login.id).filter(|_| accepted).map(String::as_str)).await {
            Ok(()) => {
                if let Some(listener) = &ctx.listener {
                    let done = json!({ "elicitationId": login.id });
                    let note =
                        json!({ "jsonrpc": "2.0", "method": "notifications/elicitation/complete", "params": done });
                    (listener.notify)(note);
                }
                LoggingIn::Done
            }
            Err(e) => LoggingIn::Not(e),
        }
    }

    /// Waits for the login the caller was asked to open (`None`: it did not accept).
    async fn login_done(&self, ctx: &CallContext, server: &str, login: Option<&str>) -> Result<(), Error> {
        let Some(login) = login else {
            return Err(Error::params(format!(
                "the login to {server:?} was not accepted; run `mcpx auth login {server}` to log in"
            )));
        };
        let within = self.settings.config().oauth.login_timeout;
        match self.wait_login(login, &ctx.identity.principal, within).await? {
            LoginState::Done => Ok(()),
            LoginState::Pending | LoginState::Expired => Err(Error::params(format!(
                "the login to {server:?} was not completed within oauth.loginTimeout ({}); run `mcpx auth login {server}` to log in",
                humantime::format_duration(within)
            ))),
            LoginState::Failed(why) => Err(Error::params(format!(
                "the login to {server:?} failed: {why}; run `mcpx auth login {server}` to try again"
            ))),
        }
    }
}

/// One request upstream on behalf of `ctx`, its progress and logs relayed to the caller.
async fn request(
    ctx: &CallContext,
    lease: Lease,
    method: &str,
    params: Value,
) -> Result<(Value, Lease), (Error, Option<Lease>)> {
    let sent = lease
        .upstream()
        .request_reporting(method, params, &ctx.client_capabilities, Some(caller_of(ctx)), ctx.listener.clone())
        .await;
    match sent {
        Ok(result) => Ok((result, lease)),
        Err(e) => Err((Error::from(e), Some(lease))),
    }
}

fn answered_input_required(method: &str, lease: Lease) -> (Error, Option<Lease>) {
    let server = &lease.key().server;
    (Error::internal(format!("server {server:?} answered {method} with input_required")), Some(lease))
}

/// The caller's listener without a way to ask: progress and logs still reach it.
fn quiet_listener(ctx: &CallContext) -> Listener {
    match &ctx.listener {
        Some(listener) => Listener { ask: None, ..listener.clone() },
        None => Listener { progress_token: None, log_level: None, notify: std::sync::Arc::new(|_| {}), ask: None },
    }
}

/// Answers an upstream's `input_required` for a handshake-era caller: each question is
/// put to the caller as a real request on its session, then the upstream is asked again
/// with the answers (and its state), for as many rounds as it takes, up to a bound.
async fn ask_on_session(
    ctx: &CallContext,
    lease: &Lease,
    method: &str,
    sent: Value,
    mut result: Value,
) -> Result<Value, Error> {
    let Some(ask) = ctx.listener.as_ref().and_then(|l| l.ask.clone()) else {
        return Err(Error::internal(format!(
            "server {:?} needs answers from the client, but this request's connection cannot carry questions (send Accept: text/event-stream)",
            lease.key().server
        )));
    };
    for _ in 0..ask::MAX_ROUNDS {
        if !ask::is_input_required(&result) {
            return Ok(result);
        }
        let mut answers = Map::new();
        for (key, question) in result.get("inputRequests").and_then(Value::as_object).into_iter().flatten() {
            let asked = question.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
            let params = question.get("params").cloned().unwrap_or_else(|| json!({}));
            answers.insert(key.clone(), ask(asked, params).await.map_err(Error::Relayed)?);
        }
        let mut retry = sent.clone();
        retry["inputResponses"] = Value::Object(answers);
        match result.get("requestState") {
            Some(state) => retry["requestState"] = state.clone(),
            None => {
                retry.as_object_mut().map(|r| r.remove("requestState"));
            }
        }
        result = lease
            .upstream()
            .request_reporting(method, retry, &ctx.client_capabilities, Some(caller_of(ctx)), ctx.listener.clone())
            .await
            .map_err(Error::from)?;
    }
    Err(Error::internal(format!("{method} still needed input after {} rounds", ask::MAX_ROUNDS)))
}
