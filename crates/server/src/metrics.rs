//! `GET /metrics`: the daemon's counters in the Prometheus text format, rendered at each
//! scrape (no listener of its own: it is served on the daemon's router, behind the same
//! admission as every route). The request counters and the pool's live in the gateway
//! (`gateway::metrics`); what is a level right now (instances, sessions, questions,
//! scripts) is read at the scrape.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::front::Front;

/// The content type of the text format, version 0.0.4 (what Prometheus asks for).
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    server: String,
    scope: String,
}

pub async fn render(State(front): State<Arc<Front>>) -> Response {
    match text(&front) {
        Ok(text) => ([(header::CONTENT_TYPE, TEXT_FORMAT)], text).into_response(),
        Err(e) => {
            (axum::http::StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render the metrics: {e}\n")).into_response()
        }
    }
}

fn text(front: &Front) -> Result<String, std::fmt::Error> {
    let gateway = &front.gateway;
    let mut registry = Registry::with_prefix("mcpx");
    let calls = gateway.metrics();
    registry.register("requests", "Requests answered, by server, method, tool and outcome", calls.requests.clone());
    registry.register(
        "request_duration_seconds",
        "How long requests took, by server, method, tool and outcome",
        calls.durations.clone(),
    );
    let pool = gateway.pool_counters();
    registry.register("instance_starts", "Upstream instances started, by server", pool.starts.clone());
    registry.register(
        "instance_crashes",
        "Upstream instances that exited on their own, by server",
        pool.crashes.clone(),
    );
    registry.register(
        "instance_reaps",
        "Upstream instances mcpx stopped (idle, reconfigured, orphaned), by server",
        pool.reaps.clone(),
    );

    // Levels, read now. Instances by configured server and scope (a server no longer
    // configured shows under its own name until its instances stop; keys are bounded by
    // the config).
    let config = gateway.settings().config();
    let mut running: BTreeMap<(String, String), i64> = BTreeMap::new();
    for (name, server) in &config.mcp_servers {
        running.insert((name.clone(), server.scope.as_str().to_owned()), 0);
    }
    for instance in gateway.instances() {
        let scope = config.server(&instance.key.server).map_or("unconfigured", |s| s.scope.as_str()).to_owned();
        *running.entry((instance.key.server.clone(), scope)).or_default() += 1;
    }
    let instances = Family::<InstanceLabels, Gauge>::default();
    for ((server, scope), n) in running {
        instances.get_or_create(&InstanceLabels { server, scope }).set(n);
    }
    registry.register("instances", "Upstream instances running, by server and scope", instances);
    let level = |n: usize| {
        let gauge = Gauge::<i64>::default();
        gauge.set(i64::try_from(n).unwrap_or(i64::MAX));
        gauge
    };
    registry.register("legacy_sessions", "Handshake-era HTTP sessions open", level(front.sessions.count()));
    registry.register("pending_questions", "Questions waiting for /v1 callers", level(front.pending.waiting()));
    registry.register("scripts_running", "mcpx_exec scripts running", level(gateway.scripts_running()));
    let dropped = Counter::<u64>::default();
    dropped.inc_by(gateway.journal().map_or(0, |j| j.dropped()));
    registry.register("journal_dropped", "Journal records dropped because its queue was full", dropped);

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}
