//! `GET /metrics`: the daemon's counters in the Prometheus text format, or OpenMetrics when
//! the scraper's `Accept` prefers it, rendered at each scrape (no listener of its own: it is served on the daemon's router, behind the same
//! admission as every route). The request counters and the pool's live in the gateway
//! (`gateway::metrics`); what is a level right now (instances, sessions, questions,
//! scripts) is read at the scrape.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::front::Front;

/// The content type of the Prometheus text format, version 0.0.4.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of OpenMetrics 1.0 (what a Prometheus server asks for first).
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    server: String,
    scope: String,
}

pub async fn render(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or("");
    let waiting = front.pending.waiting(front.gateway.cluster()).await;
    match openmetrics(&front, waiting) {
        Ok(text) if prefers_openmetrics(accept) => ([(header::CONTENT_TYPE, OPENMETRICS)], text).into_response(),
        Ok(text) => ([(header::CONTENT_TYPE, TEXT_FORMAT)], prometheus_text(&text)).into_response(),
        Err(e) => {
            (axum::http::StatusCode::INTERNAL_SERVER_ERROR, format!("cannot render the metrics: {e}\n")).into_response()
        }
    }
}

/// Whether an `Accept` header ranks OpenMetrics above the Prometheus text format (which is
/// what a scraper gets when it names neither, or only `*/*`).
fn prefers_openmetrics(accept: &str) -> bool {
    let quality = |wanted: &str| {
        accept
            .split(',')
            .filter_map(|range| {
                let mut parts = range.split(';').map(str::trim);
                (parts.next()? == wanted).then(|| {
                    parts.filter_map(|p| p.strip_prefix("q=")).find_map(|q| q.parse::<f32>().ok()).unwrap_or(1.0)
                })
            })
            .fold(0.0_f32, f32::max)
    };
    let open = quality("application/openmetrics-text");
    open > 0.0 && open >= quality("text/plain")
}

/// OpenMetrics text turned into the Prometheus text format: a counter's `HELP` and `TYPE`
/// name its `_total` sample, and the lines only OpenMetrics has (`UNIT`, `EOF`) go.
fn prometheus_text(openmetrics: &str) -> String {
    let counters: Vec<&str> =
        openmetrics.lines().filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut text = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let family = ["# HELP ", "# TYPE "].into_iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let name = rest.split(' ').next()?;
            counters.contains(&name).then(|| (p, name, &rest[name.len()..]))
        });
        match family {
            Some((prefix, name, rest)) => text.push_str(&format!("{prefix}{name}_total{rest}")),
            None => text.push_str(line),
        }
        text.push('\n');
    }
    text
}

/// `waiting`: the questions waiting for `/v1` callers (the whole cluster's, in one).
fn openmetrics(front: &Front, waiting: usize) -> Result<String, std::fmt::Error> {
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
    registry.register("pending_questions", "Questions waiting for /v1 callers", level(waiting));
    registry.register("scripts_running", "mcpx_exec scripts running", level(gateway.scripts_running()));
    let dropped = Counter::<u64>::default();
    dropped.inc_by(gateway.journal().map_or(0, |j| j.dropped()));
    registry.register("journal_dropped", "Journal records dropped because its queue was full", dropped);
    if let Some(n) = gateway.trace_spans_dropped() {
        let dropped = Counter::<u64>::default();
        dropped.inc_by(n);
        registry.register("trace_spans_dropped", "Spans dropped because the trace export queue was full", dropped);
    }

    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prometheus_server_gets_openmetrics_and_a_plain_scraper_the_text_format() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(prefers_openmetrics(prometheus));
        assert!(!prefers_openmetrics(""));
        assert!(!prefers_openmetrics("*/*"));
        assert!(!prefers_openmetrics("text/plain"));
        assert!(!prefers_openmetrics("application/openmetrics-text;q=0"));
        assert!(!prefers_openmetrics("text/plain, application/openmetrics-text;q=0.5"));
    }

    #[test]
    fn the_text_format_names_a_counters_samples_and_drops_what_only_openmetrics_has() {
        let open = "# HELP mcpx_starts Instances started.\n# TYPE mcpx_starts counter\nmcpx_starts_total 2\n\
                    # HELP mcpx_up Up.\n# TYPE mcpx_up gauge\n# UNIT mcpx_up seconds\nmcpx_up 1\n# EOF\n";
        assert_eq!(
            prometheus_text(open),
            "# HELP mcpx_starts_total Instances started.\n# TYPE mcpx_starts_total counter\nmcpx_starts_total 2\n\
             # HELP mcpx_up Up.\n# TYPE mcpx_up gauge\nmcpx_up 1\n"
        );
    }
}
