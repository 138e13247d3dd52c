//! What the daemon counts for Prometheus (`/metrics`, rendered by `server::metrics`):
//! requests by server, method, tool and outcome with their durations; the pool counts
//! its own starts, crashes and reaps (`pool`).
//!
//! Labels must stay bounded whatever callers send: never a session, a call id or an
//! argument; a server label only for a configured server (else `other`); a tool label
//! only for a tool call that reached a configured server's tool, at most
//! [`MAX_TOOL_LABELS`] of them (then `other`); other methods' names (a resource's URI)
//! never.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use crate::config::Config;
use crate::journal::{Outcome, Record};

/// Most distinct (server, tool) label pairs; past it, a new tool is counted as `other`.
pub const MAX_TOOL_LABELS: usize = 1000;
/// What a label value reads as when the real one could grow without bound.
pub const OTHER: &str = "other";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub server: String,
    pub method: String,
    pub tool: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServerLabel {
    pub server: String,
}

type Durations = Family<CallLabels, Histogram, fn() -> Histogram>;

/// The request counters, shared with each scrape's registry (the families are handles).
pub struct Metrics {
    pub requests: Family<CallLabels, Counter>,
    pub durations: Durations,
    tools: Mutex<ToolLabels>,
    /// The label set counted last, and its counter and histogram: calls come in runs of
    /// one tool, and a run is counted without making labels or looking them up.
    last: Mutex<Option<Counted>>,
}

/// A label set's metrics, as [`Metrics::last`] keeps them.
struct Counted {
    labels: CallLabels,
    requests: Counter,
    durations: Histogram,
}

/// A request's labels as its record has them, before a tool name is admitted as a label.
struct Borrowed<'a> {
    server: &'a str,
    method: &'a str,
    tool: Tool<'a>,
    outcome: &'static str,
}

enum Tool<'a> {
    /// The tool's name: its label if it is one, or can become one under the cap.
    Named(&'a str),
    /// `other`, or none for a method that calls no tool.
    Fixed(&'static str),
}

impl CallLabels {
    /// Whether these are the labels `borrowed` makes. A name that is a tool label of the
    /// server stays one, so a label equal to the name is the name's.
    fn are(&self, borrowed: &Borrowed) -> bool {
        let tool = match borrowed.tool {
            Tool::Named(name) => name,
            Tool::Fixed(label) => label,
        };
        self.server == borrowed.server
            && self.method == borrowed.method
            && self.tool == tool
            && self.outcome == borrowed.outcome
    }
}

/// The tool names used as labels so far, per server (at most [`MAX_TOOL_LABELS`]).
#[derive(Default)]
struct ToolLabels {
    names: HashMap<String, HashSet<String>>,
    count: usize,
}

impl Default for Metrics {
    fn default() -> Self {
        fn histogram() -> Histogram {
            // 1ms to about 33s, doubling.
            Histogram::new(exponential_buckets(0.001, 2.0, 16))
        }
        Metrics {
            requests: Family::default(),
            durations: Family::new_with_constructor(histogram as fn() -> Histogram),
            tools: Mutex::default(),
            last: Mutex::default(),
        }
    }
}

impl Metrics {
    /// Counts one finished request.
    pub fn observe(&self, record: &Record, config: &Config) {
        let seconds = record.duration_us as f64 / 1e6;
        let borrowed = borrowed(record, config);
        let mut last = self.last.lock().expect("metrics lock");
        if let Some(counted) = last.as_ref().filter(|c| c.labels.are(&borrowed)) {
            counted.requests.inc();
            counted.durations.observe(seconds);
            return;
        }
        let labels = self.owned(borrowed);
        let requests = self.requests.get_or_create(&labels).clone();
        let durations = self.durations.get_or_create(&labels).clone();
        requests.inc();
        durations.observe(seconds);
        *last = Some(Counted { labels, requests, durations });
    }

    /// The bounded labels of a request.
    pub fn labels(&self, record: &Record, config: &Config) -> CallLabels {
        self.owned(borrowed(record, config))
    }

    fn owned(&self, borrowed: Borrowed) -> CallLabels {
        let tool = match borrowed.tool {
            Tool::Named(name) => self.tool_label(borrowed.server, name),
            Tool::Fixed(label) => label.to_owned(),
        };
        CallLabels {
            server: borrowed.server.to_owned(),
            method: borrowed.method.to_owned(),
            tool,
            outcome: borrowed.outcome.to_owned(),
        }
    }

    fn tool_label(&self, server: &str, tool: &str) -> String {
        let mut tools = self.tools.lock().expect("metrics lock");
        // Looked up by reference: a name already labelled costs no copy.
        if tools.names.get(server).is_some_and(|names| names.contains(tool)) {
            return tool.to_owned();
        }
        if tools.count >= MAX_TOOL_LABELS {
            return OTHER.to_owned();
        }
        tools.count += 1;
        tools.names.entry(server.to_owned()).or_default().insert(tool.to_owned());
        tool.to_owned()
    }
}

/// What the pool counts, per configured server.
#[derive(Default)]
pub struct PoolCounters {
    /// Instances started.
    pub starts: Family<ServerLabel, Counter>,
    /// Instances that exited on their own.
    pub crashes: Family<ServerLabel, Counter>,
    /// Instances mcpx stopped: idle, reconfigured, orphaned or their session ended.
    pub reaps: Family<ServerLabel, Counter>,
}

/// A request's labels, read off its record: a server only if configured, a tool only if
/// the call reached a configured server's tool.
fn borrowed<'a>(record: &'a Record, config: &Config) -> Borrowed<'a> {
    let server = match record.server.as_deref() {
        Some(s) if s == "mcpx" || config.mcp_servers.contains_key(s) => s,
        _ => OTHER,
    };
    // A name the upstream refused as unknown (-32601/-32602) may be anything a caller typed.
    let known =
        !matches!(record.code, Some(-32601 | -32602)) && !matches!(record.outcome, Outcome::Refused | Outcome::Denied);
    let tool = match record.name.as_deref() {
        Some(name) if record.method == "tools/call" && server != OTHER && known => Tool::Named(name),
        _ if record.method == "tools/call" => Tool::Fixed(OTHER),
        _ => Tool::Fixed(""),
    };
    Borrowed { server, method: &record.method, tool, outcome: record.outcome.as_str() }
}

impl PoolCounters {
    pub(crate) fn count(family: &Family<ServerLabel, Counter>, server: &str) {
        family.get_or_create(&ServerLabel { server: server.to_owned() }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Caller;

    fn record(server: &str, method: &str, name: &str, outcome: Outcome, code: Option<i64>) -> Record {
        Record {
            id: 0,
            time_ms: 0,
            caller: Caller {
                principal: String::new(),
                client: None,
                session: Some("session:secret-label".into()),
                transport: "http",
                revision: "2026-07-28".into(),
            },
            server: Some(server.into()),
            instance: Some(format!("{server}[call:0123]")),
            method: method.into(),
            name: Some(name.into()),
            in_script: false,
            duration_us: 1500,
            outcome,
            code,
            bytes_in: 1,
            bytes_out: 1,
            arguments: Some("{\"a\":1}".into()),
        }
    }

    fn config() -> Config {
        serde_json::from_value(serde_json::json!({ "mcpServers": { "up": { "command": "true" } } })).unwrap()
    }

    #[test]
    fn labels_never_carry_a_session_an_instance_or_arguments() {
        let metrics = Metrics::default();
        let labels = metrics.labels(&record("up", "tools/call", "echo", Outcome::Ok, None), &config());
        assert_eq!(
            labels,
            CallLabels { server: "up".into(), method: "tools/call".into(), tool: "echo".into(), outcome: "ok".into() }
        );
    }

    #[test]
    fn unconfigured_servers_unknown_tools_and_uris_are_not_labels() {
        let metrics = Metrics::default();
        let config = config();
        let elsewhere = metrics.labels(&record("nowhere", "tools/call", "x", Outcome::Error, Some(-32602)), &config);
        assert_eq!((elsewhere.server.as_str(), elsewhere.tool.as_str()), (OTHER, OTHER));
        let typo = metrics.labels(&record("up", "tools/call", "ecko", Outcome::Error, Some(-32602)), &config);
        assert_eq!((typo.server.as_str(), typo.tool.as_str()), ("up", OTHER));
        let read = metrics.labels(&record("up", "resources/read", "file:///a/b", Outcome::Ok, None), &config);
        assert_eq!(read.tool, "");
    }

    /// A run of calls with the same labels is counted on the label set counted last; a call
    /// with other labels, even one that differs only by its outcome or by being refused as
    /// unknown, is counted on its own.
    #[test]
    fn each_call_is_counted_on_its_own_label_set_in_and_out_of_a_run() {
        let metrics = Metrics::default();
        let config = config();
        let calls = [
            record("up", "tools/call", "echo", Outcome::Ok, None),
            record("up", "tools/call", "echo", Outcome::Ok, None),
            record("up", "tools/call", "echo", Outcome::Error, Some(-32603)),
            record("up", "tools/call", "echo", Outcome::Error, Some(-32602)),
            record("up", "tools/call", "echo", Outcome::Ok, None),
            record("nowhere", "tools/call", "echo", Outcome::Ok, None),
            record("up", "resources/read", "echo", Outcome::Ok, None),
        ];
        for call in &calls {
            metrics.observe(call, &config);
        }
        let count = |server: &str, method: &str, tool: &str, outcome: &str| {
            let labels =
                CallLabels { server: server.into(), method: method.into(), tool: tool.into(), outcome: outcome.into() };
            (metrics.requests.get_or_create(&labels).get(), metrics.durations.get_or_create(&labels).count())
        };
        assert_eq!(count("up", "tools/call", "echo", "ok"), (3, 3));
        assert_eq!(count("up", "tools/call", "echo", "error"), (1, 1));
        assert_eq!(count("up", "tools/call", OTHER, "error"), (1, 1));
        assert_eq!(count(OTHER, "tools/call", OTHER, "ok"), (1, 1));
        assert_eq!(count("up", "resources/read", "", "ok"), (1, 1));
    }

    #[test]
    fn tool_labels_stop_growing_at_the_cap() {
        let metrics = Metrics::default();
        let config = config();
        for i in 0..MAX_TOOL_LABELS {
            let labels = metrics.labels(&record("up", "tools/call", &format!("t{i}"), Outcome::Ok, None), &config);
            assert_eq!(labels.tool, format!("t{i}"));
        }
        let past = metrics.labels(&record("up", "tools/call", "one-more", Outcome::Ok, None), &config);
        assert_eq!(past.tool, OTHER);
        let seen = metrics.labels(&record("up", "tools/call", "t0", Outcome::Ok, None), &config);
        assert_eq!(seen.tool, "t0");
    }
}
