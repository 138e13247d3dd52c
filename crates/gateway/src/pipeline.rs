//! The request path through the gateway, in order, in one place.
//!
//! Before a request gets here, its front end (crates/server) has admitted it (Origin,
//! Host, token, content type: `server::admission`) and built its [`CallContext`] once
//! from what its transport knows. From here:
//!
//! 1. **Limits**: the caller's client may have `limits.maxCallsPerClient` requests in
//!    flight ([`Gateway::handle`]).
//! 2. **Route**: a listing is gathered from every server and cut into pages; a call,
//!    read, prompt or completion goes to the server that owns the name (`tools`,
//!    `resources`, `prompts`), or to one of mcpx's own tools.
//! 3. **Settle** ([`Gateway::forward`] → `asking`): a retry continues the call it
//!    belongs to; a caller with no cwd but roots is asked them. The context is final.
//! 4. **Scope**: the server's scope and the caller's identity pick the instance
//!    (`scope::Scoper`), which the pool leases, starting it if need be (`pool`).
//! 5. **Send**: the invocation context is attached where the server gets it
//!    (`invocation`), the request goes upstream, and the upstream's questions reach the
//!    caller as its era allows (`asking`). An HTTP upstream that needs a person to log
//!    in has the caller asked to open the login's URL, and the request is sent again
//!    once the login is done (`asking`, `login`).
//!
//! A step that concerns every request (a policy, a journal, metrics, traces) is one more
//! line in [`Gateway::handle`], around the route, where it sees the final outcome. The
//! journal notes the request before the limits and records how it ended (`journal`), a
//! refusal by a limit included. Traces wrap the journal: when they are exported, the
//! request's span opens first (its parent from the caller's trace context) and each
//! request sent upstream in step 5 gets a span of its own, whose context the upstream
//! receives in `_meta` (`traces`).

use std::borrow::Cow;
use std::sync::Arc;

use mcpx_protocol::Era;
use mcpx_upstream::{Ask, Listener, UpstreamError};
use serde_json::{Map, Value};

use crate::asking::{Caller as _, LoggingIn, OnSession, Settle, Settled, Stateless};
use crate::error::{Elsewhere, Error};
use crate::scope::Owner;
use crate::{Answer, CallContext, Gateway, Lease, cluster, invocation, journal, page, tasks};

impl Gateway {
    /// Answers one request for the caller described by `ctx`, and journals, counts and
    /// (when traces are exported) traces it.
    pub async fn handle(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Answer, Error> {
        if !self.traces.on() {
            return self.journaled(ctx, method, params).await;
        }
        // Boxed: the span would make every request's future larger, traced or not.
        Box::pin(async {
            let span = self.traces.answering(ctx, method, &params);
            let answer = self.journaled(ctx, method, params).await;
            if let Some(span) = span {
                span.end(ctx, answer.as_ref().map(|a| &a.result));
            }
            answer
        })
        .await
    }

    /// Answers one request, and journals and counts it.
    async fn journaled(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Answer, Error> {
        let Some(method) = journal::journaled(method) else {
            return self.answer(ctx, method, params).await;
        };
        let pending = journal::Pending::start(method, &params, self.journal_keeps());
        // A caller that can be asked has its questions journaled too. That rare path is
        // boxed, its copy of the context inside: held here, it would make every request's
        // future (moved, so copied, several times) larger.
        let asked = self.journal_keeps().is_some() && ctx.listener.as_ref().is_some_and(|l| l.ask.is_some());
        let answer = match asked {
            true => Box::pin(self.answer_journaling_questions(ctx, pending.name(), method, params)).await,
            false => self.answer(ctx, method, params).await,
        };
        let caller = journal::Caller::of(&ctx.identity, ctx.revision.as_str());
        self.finished(pending.finish(caller, &ctx.reached, answer.as_ref().map(|a| &a.result), false));
        answer
    }

    /// Answers the request with its questions to the caller journaled as they are
    /// answered, named by the request they come `during`.
    async fn answer_journaling_questions(
        &self,
        ctx: &CallContext,
        during: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Answer, Error> {
        match self.asking_journaled(ctx, during) {
            Some(asking) => self.answer(&asking, method, params).await,
            None => self.answer(ctx, method, params).await,
        }
    }

    /// A copy of `ctx` whose questions to the caller are journaled as they are answered
    /// (named by the request they come `during`), when the caller can be asked; `None`
    /// otherwise. A question asked before the request reached an instance is mcpx's own
    /// (the caller's roots, to find its cwd): not journaled.
    fn asking_journaled(&self, ctx: &CallContext, during: Option<&str>) -> Option<CallContext> {
        let listener = ctx.listener.as_ref()?;
        let inner = listener.ask.clone()?;
        let gateway = self.me.get()?.clone();
        let caller = journal::Caller::of(&ctx.identity, ctx.revision.as_str());
        let (reach, during) = (ctx.reached.clone(), during.map(Arc::<str>::from));
        let ask: Ask = Arc::new(move |method: String, params: Value| {
            let Some(gateway) = gateway.upgrade().filter(|_| reach.get().is_some()) else {
                return inner(method, params);
            };
            let pending = journal::Pending::question(&method, &params, during.as_deref(), gateway.journal_keeps());
            let asked = inner(method, params);
            let (caller, reach) = (caller.clone(), reach.clone());
            Box::pin(async move {
                let answer = asked.await;
                if let Some(pending) = pending {
                    gateway.answered_question(pending.answered(caller, &reach, answer.as_ref()));
                }
                answer
            })
        });
        let listener = Some(Listener { ask: Some(ask), ..listener.clone() });
        Some(CallContext { listener, ..ctx.clone() })
    }

    /// Admits the request under the caller's limits and routes it.
    async fn answer(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Answer, Error> {
        let _admitted = self.admission.enter(&ctx.identity, &self.settings.config())?;
        match self.route(ctx, method, params).await {
            // An upstream that needs a login: the caller may be offered one (`login`).
            Err(e) => Err(Box::pin(self.login_needed(ctx, e)).await),
            answer => answer,
        }
    }

    /// Sends the request to the part of the gateway that answers `method`.
    async fn route(&self, ctx: &CallContext, method: &str, params: Value) -> Result<Answer, Error> {
        if page::field(method).is_some() {
            let from = page::start(method, &params)?;
            let mut answer = Box::pin(self.list(ctx, method)).await?;
            page::cut(method, &mut answer.result, from, self.settings.config().limits.page_size)?;
            return Ok(answer);
        }
        match method {
            "tools/call" => self.call_tool(ctx, params).await.map(Answer::uncached),
            // The other methods' futures are boxed: held inline, each would make every
            // call's future (moved, so copied, several times) as large as the largest.
            "resources/read" => Box::pin(self.read_resource(ctx, params)).await,
            "prompts/get" => Box::pin(self.get_prompt(ctx, params)).await.map(Answer::uncached),
            "completion/complete" => Box::pin(self.complete(ctx, params)).await.map(Answer::uncached),
            m if tasks::METHODS.contains(&m) && ctx.revision.era() == Era::Modern => {
                Box::pin(self.task_request(ctx, method, params)).await
            }
            m if tasks::LEGACY_METHODS.contains(&m) && ctx.revision.era() == Era::Legacy => {
                Box::pin(self.legacy_task_request(ctx, method, params)).await
            }
            "resources/subscribe" | "resources/unsubscribe" => {
                Box::pin(self.subscribe(ctx, method, params)).await.map(Answer::uncached)
            }
            _ => Err(Error::NoMethod(method.to_owned())),
        }
    }

    /// A whole aggregated list, before it is cut into pages.
    async fn list(&self, ctx: &CallContext, method: &str) -> Result<Answer, Error> {
        match method {
            "tools/list" => self.list_tools(ctx).await,
            "resources/list" => self.list_resources(ctx, method, "resources").await,
            "resources/templates/list" => self.list_resources(ctx, method, "resourceTemplates").await,
            _ => self.list_prompts(ctx).await,
        }
    }

    /// Sends `method` to the instance of `server` that answers this caller: the caller's
    /// `_meta` minus what mcpx owns, plus the invocation context where the server gets it.
    /// A retry is settled first (which call it continues, which instance it returns to,
    /// the cwd the caller's roots named), so the context is final before an instance is
    /// picked; the upstream's questions then go to the caller as its era allows.
    ///
    /// `leased` is the caller's instance of `server` when finding what the request names
    /// leased it already (a listing): the request goes there unless settling picked
    /// another, and no second lease is taken (which, of a per-call instance, would be a
    /// second process).
    pub(crate) async fn forward(
        &self,
        ctx: &CallContext,
        server: &str,
        method: &str,
        params: Value,
        caller_meta: Option<Map<String, Value>>,
        leased: Option<Lease>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let Settled { ctx, params, at, original } = match self.settle(ctx, server, method, params).await {
            Settle::Ready(settled) => *settled,
            Settle::Replied(reply) => return reply,
        };
        // A server's lister answers listings only, and a retry or a caller's roots may
        // have picked another instance than the one the caller had when it listed.
        let settled_as_asked = at.is_none() && matches!(ctx, Cow::Borrowed(_));
        let leased = leased.filter(|lease| settled_as_asked && !lease.key().is_lister());
        // A copy to send again is kept only where a login can be waited for.
        let again =
            self.may_send_again_after_login(&ctx, server).then(|| (params.clone(), caller_meta.clone(), at.clone()));
        let sent = self.send(&ctx, server, method, params, caller_meta, at, leased, original.as_ref()).await;
        match sent {
            // Boxed, as the rare steps below are: held inline, their futures would make
            // every call's future larger, and it is moved, so copied, more than once.
            Err((e, _)) if e.is_login_needed() => {
                match Box::pin(self.ask_to_log_in(&ctx, server, method, original.as_ref(), e)).await {
                    LoggingIn::Done => match again {
                        Some((params, caller_meta, at)) => {
                            Box::pin(self.send(&ctx, server, method, params, caller_meta, at, None, original.as_ref()))
                                .await
                        }
                        // Not reached: a login is waited for only where a copy was kept.
                        None => Err((Error::Upstream(UpstreamError::LoginNeeded { server: server.to_owned() }), None)),
                    },
                    LoggingIn::Asked(question) => Ok(question),
                    LoggingIn::Not(e) => Err((e, None)),
                }
            }
            sent => sent,
        }
    }

    /// Sends a settled request to its instance (`leased`, else the one at `at`, else the
    /// caller's), and sees its questions through.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send(
        &self,
        ctx: &CallContext,
        server: &str,
        method: &str,
        mut params: Value,
        caller_meta: Option<Map<String, Value>>,
        at: Option<Owner>,
        leased: Option<Lease>,
        original: Option<&Value>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let lease = match leased {
            Some(lease) => Ok(lease),
            None => self.lease_at(ctx, server, at).await,
        };
        let lease = match lease {
            Ok(lease) => lease,
            Err(Error::Elsewhere(owner)) if !ctx.relayed && cluster::RELAYED.contains(&method) => {
                let Elsewhere { node, url, key } = *owner;
                let node = cluster::Node { id: node, url };
                // Journaled as reaching that instance, as a call answered here would be.
                ctx.reached.set(key.clone());
                return Box::pin(self.relay_call(ctx, node, key, method, params, caller_meta))
                    .await
                    .map_err(|e| (e, None));
            }
            Err(e) => return Err((e, None)),
        };
        ctx.reached.set(lease.key().clone());
        if let Some(m) = caller_meta {
            params["_meta"] = Value::Object(m);
        }
        if self.settings.config().server(server).is_some_and(invocation::eligible) {
            invocation::attach(&mut params, invocation::context(ctx, lease.key(), lease.fence()));
        }
        if !self.traces.on() {
            return self.dispatch(ctx, lease, method, params, original).await;
        }
        Box::pin(async {
            let span = self.traces.sending(ctx, server, lease.upstream(), method, &mut params);
            let sent = self.dispatch(ctx, lease, method, params, original).await;
            if let Some(span) = span {
                span.end(sent.as_ref().map_err(|(e, _)| e));
            }
            sent
        })
        .await
    }

    /// Sends a request with its `_meta` complete, in the caller's era.
    async fn dispatch(
        &self,
        ctx: &CallContext,
        lease: Lease,
        method: &str,
        params: Value,
        original: Option<&Value>,
    ) -> Result<Value, (Error, Option<Lease>)> {
        let call = method == "tools/call";
        let tasks_declared = mcpx_protocol::meta::declares_tasks(&ctx.client_capabilities);
        match ctx.revision.era() {
            Era::Modern if call && tasks_declared && tasks::upstream_runs_tasks(&lease) => {
                let next = async |lease, params| match self.runs_slow_calls(ctx, &lease) {
                    Some(after) => self.call_or_task(ctx, lease, params, original.cloned(), after).await,
                    None => Stateless.send(self, ctx, lease, method, params, original).await,
                };
                // Boxed, as every way but the plain one: see `forward`.
                Box::pin(self.call_legacy_task_tool(ctx, lease, params, next)).await
            }
            Era::Modern if call && self.runs_slow_calls(ctx, &lease).is_some() => {
                let after = self.runs_slow_calls(ctx, &lease).unwrap_or_default();
                Box::pin(self.call_or_task(ctx, lease, params, original.cloned(), after)).await
            }
            Era::Modern => Stateless.send(self, ctx, lease, method, params, original).await,
            Era::Legacy if call && params.get("task").is_some_and(Value::is_object) => {
                Box::pin(self.legacy_task_call(ctx, lease, params, original.cloned())).await
            }
            Era::Legacy => Box::pin(OnSession.send(self, ctx, lease, method, params, original)).await,
        }
    }

    /// `tasks.after`, when a 2026 caller's call to this instance becomes a task mcpx runs
    /// once it has not been answered by then: the caller declared the tasks extension, and
    /// the upstream does not run tasks of its own.
    fn runs_slow_calls(&self, ctx: &CallContext, lease: &Lease) -> Option<std::time::Duration> {
        let after = if ctx.as_task { std::time::Duration::ZERO } else { self.settings.config().tasks.after };
        let wanted = ctx.as_task || !after.is_zero();
        let declared = mcpx_protocol::meta::declares_tasks(&ctx.client_capabilities);
        (wanted && declared && !tasks::upstream_has_extension(lease)).then_some(after)
    }
}
