//! What a run found, and how it is shown: a JSON document for scripts and the committed
//! `bench/results.json`, and a table for people.
//!
//! A scenario hands over its contenders' raw measurements; every derived figure
//! (percentiles, throughput, ratios, added latency, target verdicts) is computed here, so
//! the JSON and the table can never disagree.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::latency::{Samples, Summary, round, throughput};

/// One contender's share of a run.
pub struct Measured {
    /// Short name, used in comparisons: `direct`, `relay`, `mcpx-stdio`.
    pub name: &'static str,
    /// The path a request travels, for people.
    pub path: &'static str,
    pub samples: Samples,
    /// Answers that came back wrong (never samples).
    pub errors: usize,
    pub first_error: Option<String>,
    /// Time spent measuring this contender (the sum of its slices when interleaved).
    pub elapsed: Duration,
    /// Peak resident set of each process under test, by role, in KiB.
    pub peak_rss: Vec<(String, Option<u64>)>,
    /// CPU time the processes under test used while measured (not the bench's own), when
    /// the scenario records it.
    pub cpu: Option<CpuTime>,
    /// Its turns, in order, when the scenario interleaved its contenders in rounds.
    pub turns: Vec<Turn>,
}

/// One contender's turn in one round of an interleaved run.
#[derive(Clone, Copy, Debug)]
pub struct Turn {
    /// Calls answered right.
    pub calls: usize,
    pub elapsed: Duration,
    /// CPU time of the processes under test during the turn, when the scenario reads it.
    pub cpu: Option<CpuTime>,
}

/// The least, middle and most of a figure taken round by round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; None when there are none.
    pub fn of(mut values: Vec<f64>) -> Option<Spread> {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => values[n / 2],
            _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
        };
        Some(Spread { min: values[0], median, max: values[n - 1] })
    }

    pub fn to_json(self) -> Value {
        self.to_json_to(2)
    }

    /// As JSON, to `digits` decimal places.
    pub fn to_json_to(self, digits: i32) -> Value {
        let scale = 10f64.powi(digits);
        let round = |v: f64| (v * scale).round() / scale;
        json!({"min": round(self.min), "median": round(self.median), "max": round(self.max)})
    }
}

/// CPU time of the processes under test, while measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuTime {
    /// The process the bench talks to (a gateway, or a server met directly).
    pub front: Duration,
    /// It and every process behind it.
    pub all: Duration,
}

impl CpuTime {
    /// What was used between `earlier` and this reading.
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime { front: self.front.saturating_sub(earlier.front), all: self.all.saturating_sub(earlier.all) }
    }
}

impl std::ops::AddAssign for CpuTime {
    fn add_assign(&mut self, other: CpuTime) {
        self.front += other.front;
        self.all += other.all;
    }
}

impl Measured {
    fn summary(&self) -> Summary {
        self.samples.summary()
    }

    fn throughput(&self) -> f64 {
        throughput(self.samples.len(), self.elapsed)
    }

    /// `figure` of this contender's turn against `baseline`'s, in each round they both
    /// took a turn in; None unless both were measured in the same rounds, with the figure.
    fn by_round(&self, baseline: &Measured, figure: impl Fn(&Turn) -> Option<f64>) -> Option<Spread> {
        if self.turns.len() < 2 || self.turns.len() != baseline.turns.len() {
            return None;
        }
        let ratios = self.turns.iter().zip(&baseline.turns).map(|(s, b)| Some(figure(s)? / figure(b)?));
        Spread::of(ratios.collect::<Option<Vec<f64>>>()?)
    }

    /// CPU time per answered call, in microseconds, of the front process and of all the
    /// processes under test.
    pub fn cpu_micros_per_call(&self) -> Option<(f64, f64)> {
        let calls = self.samples.len() as f64;
        let per_call = |time: Duration| (time.as_secs_f64() * 1e6 / calls).round();
        self.cpu.filter(|_| calls > 0.0).map(|cpu| (per_call(cpu.front), per_call(cpu.all)))
    }

    /// The front process's CPU time per answered call, in microseconds, unrounded.
    fn front_cpu_micros_per_call(&self) -> Option<f64> {
        let calls = self.samples.len() as f64;
        self.cpu.filter(|_| calls > 0.0).map(|cpu| cpu.front.as_secs_f64() * 1e6 / calls)
    }

    fn to_json(&self) -> Value {
        let rss: Map<String, Value> = self.peak_rss.iter().map(|(role, kib)| (role.clone(), json!(kib))).collect();
        json!({
            "name": self.name,
            "path": self.path,
            "requests": self.samples.len(),
            "errors": self.errors,
            "firstError": self.first_error,
            "seconds": (self.elapsed.as_secs_f64() * 100.0).round() / 100.0,
            "callsPerSecond": self.throughput().round(),
            "latencyMicros": self.summary().to_json(),
            "peakRssKiB": rss,
            "cpuMicrosPerCall": self.cpu_micros_per_call().map(|(front, all)| json!({"front": front, "all": all})),
        })
    }
}

/// How one contender fares against another measured in the same run.
pub struct Comparison {
    pub baseline: &'static str,
    pub subject: &'static str,
    /// The most the subject may add at p50, in microseconds, if there is a target.
    pub added_p50_target_micros: Option<f64>,
    /// The least the subject's throughput may be, as a multiple of the baseline's.
    pub min_throughput_ratio: Option<f64>,
    /// The most CPU per call the subject's front process may spend, as a multiple of the
    /// baseline's.
    pub max_front_cpu_ratio: Option<f64>,
}

/// What one contender must reach on its own.
pub struct Target {
    pub contender: &'static str,
    pub min_calls_per_second: Option<f64>,
    pub max_p99_micros: Option<f64>,
}

/// One scenario at one setting (era, concurrency): its contenders, side by side.
pub struct Run {
    pub scenario: &'static str,
    pub heading: String,
    /// The settings that produced the figures (era, clients, requests, rounds...).
    pub settings: Value,
    pub contenders: Vec<Measured>,
    pub comparisons: Vec<Comparison>,
    pub targets: Vec<Target>,
    /// Figures of the scenario's own that are not latencies (instances, memory, times).
    pub facts: Option<Value>,
}

impl Run {
    pub fn errors(&self) -> usize {
        self.contenders.iter().map(|c| c.errors).sum()
    }

    fn contender(&self, name: &str) -> Option<&Measured> {
        self.contenders.iter().find(|c| c.name == name)
    }

    fn compare(&self, comparison: &Comparison) -> Option<Value> {
        let base = self.contender(comparison.baseline)?.summary();
        let subject = self.contender(comparison.subject)?;
        let subj = subject.summary();
        let added_p50 = subj.p50 - base.p50;
        let baseline = self.contender(comparison.baseline)?;
        let ratio = subject.throughput() / baseline.throughput();
        let by_round = subject.by_round(baseline, |turn| Some(throughput(turn.calls, turn.elapsed)));
        let mut verdict = json!({
            "baseline": comparison.baseline,
            "subject": comparison.subject,
            "p50Ratio": (subj.p50 / base.p50 * 100.0).round() / 100.0,
            "addedMicros": {"p50": round(added_p50), "p90": round(subj.p90 - base.p90), "p99": round(subj.p99 - base.p99)},
            "throughputRatio": (ratio * 100.0).round() / 100.0,
        });
        if let Some(spread) = by_round {
            verdict["throughputRatioByRound"] = spread.to_json();
        }
        if let Some(target) = comparison.added_p50_target_micros {
            verdict["target"] = json!({"addedP50Micros": target, "met": added_p50 <= target});
        }
        if let Some(target) = comparison.min_throughput_ratio {
            // Interleaved, a ratio is judged on the median of the rounds' ratios, so that
            // one round the machine disturbed cannot decide it either way.
            let (judged, on) = match by_round {
                Some(spread) => (spread.median, "median of the rounds"),
                None => (ratio, "the whole run"),
            };
            verdict["target"] = json!({"minThroughputRatio": target, "judgedOn": on, "met": judged >= target});
        }
        let front_cpu = baseline.front_cpu_micros_per_call();
        if let Some(ratio) = subject.front_cpu_micros_per_call().zip(front_cpu).map(|(s, b)| s / b) {
            verdict["frontCpuRatio"] = json!((ratio * 1000.0).round() / 1000.0);
            let per_call = |turn: &Turn| Some(turn.cpu?.front.as_secs_f64() / turn.calls as f64);
            let by_round = subject.by_round(baseline, per_call);
            if let Some(spread) = by_round {
                verdict["frontCpuRatioByRound"] = spread.to_json_to(3);
            }
            if let Some(target) = comparison.max_front_cpu_ratio {
                // As a throughput target: the median of the rounds, where there are rounds.
                let (judged, on) = match by_round {
                    Some(spread) => (spread.median, "median of the rounds"),
                    None => (ratio, "the whole run"),
                };
                verdict["cpuTarget"] = json!({"maxFrontCpuRatio": target, "judgedOn": on, "met": judged <= target});
            }
        }
        Some(verdict)
    }

    fn check(&self, target: &Target) -> Option<Value> {
        let contender = self.contender(target.contender)?;
        let throughput = contender.throughput();
        let p99 = contender.summary().p99;
        let met = target.min_calls_per_second.is_none_or(|min| throughput >= min)
            && target.max_p99_micros.is_none_or(|max| p99 <= max);
        Some(json!({
            "contender": target.contender,
            "minCallsPerSecond": target.min_calls_per_second,
            "maxP99Micros": target.max_p99_micros,
            "callsPerSecond": throughput.round(),
            "p99Micros": round(p99),
            "met": met,
        }))
    }

    pub fn to_json(&self) -> Value {
        json!({
            "scenario": self.scenario,
            "settings": self.settings,
            "contenders": self.contenders.iter().map(Measured::to_json).collect::<Vec<_>>(),
            "comparisons": self.comparisons.iter().filter_map(|c| self.compare(c)).collect::<Vec<_>>(),
            "targets": self.targets.iter().filter_map(|t| self.check(t)).collect::<Vec<_>>(),
            "facts": self.facts,
        })
    }

    /// The run as a table with a line per comparison under it.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.heading);
        let _ = writeln!(
            out,
            "  {:<12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>13}  {:<}",
            "contender", "calls/s", "p50 µs", "p90 µs", "p99 µs", "max µs", "errors", "CPU µs/call", "peak RSS"
        );
        for c in &self.contenders {
            let s = c.summary();
            let rss: Vec<String> = c
                .peak_rss
                .iter()
                .map(|(role, kib)| match kib {
                    Some(kib) => format!("{role} {:.1} MiB", *kib as f64 / 1024.0),
                    None => format!("{role} ?"),
                })
                .collect();
            let _ = writeln!(
                out,
                "  {:<12} {:>9.0} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>7} {:>13}  {}",
                c.name,
                c.throughput(),
                s.p50,
                s.p90,
                s.p99,
                s.max,
                c.errors,
                c.cpu_micros_per_call()
                    .map_or_else(|| "-".to_owned(), |(front, all)| format!("{front:.0} of {all:.0}")),
                rss.join(", ")
            );
        }
        for c in &self.contenders {
            let _ = writeln!(out, "  {:<12} = {}", c.name, c.path);
            if let Some(error) = &c.first_error {
                let _ = writeln!(out, "  {:<12}   first error: {error}", "");
            }
        }
        for comparison in &self.comparisons {
            let Some(v) = self.compare(comparison) else { continue };
            let added = |p: &str| v["addedMicros"][p].as_f64().unwrap_or(f64::NAN);
            let _ = write!(
                out,
                "  {} vs {}: p50 ×{} ({:+.1} µs), p99 {:+.1} µs",
                comparison.subject,
                comparison.baseline,
                v["p50Ratio"],
                added("p50"),
                added("p99")
            );
            let _ = write!(out, "; throughput ×{}", v["throughputRatio"]);
            if let Some(spread) = v.get("throughputRatioByRound") {
                let _ = write!(out, " (by round ×{}–{}, median ×{})", spread["min"], spread["max"], spread["median"]);
            }
            if let Some(ratio) = v.get("frontCpuRatio") {
                let _ = write!(out, "; front CPU per call ×{ratio}");
                if let Some(spread) = v.get("frontCpuRatioByRound") {
                    let _ =
                        write!(out, " (by round ×{}–{}, median ×{})", spread["min"], spread["max"], spread["median"]);
                }
            }
            if let Some(target) = v.get("target") {
                let met = if target["met"] == true { "met" } else { "MISSED" };
                if let Some(micros) = target.get("addedP50Micros") {
                    let _ = write!(out, "; target ≤ {micros} µs added at p50: {met}");
                }
                if let Some(ratio) = target.get("minThroughputRatio") {
                    let _ = write!(out, "; target throughput ≥ ×{ratio}: {met}");
                }
            }
            if let Some(target) = v.get("cpuTarget") {
                let met = if target["met"] == true { "met" } else { "MISSED" };
                let _ = write!(out, "; target front CPU per call ≤ ×{}: {met}", target["maxFrontCpuRatio"]);
            }
            let _ = writeln!(out);
        }
        for target in &self.targets {
            let Some(v) = self.check(target) else { continue };
            let met = if v["met"] == true { "met" } else { "MISSED" };
            let mut wanted = Vec::new();
            if let Some(min) = target.min_calls_per_second {
                wanted.push(format!("≥ {min} calls/s"));
            }
            if let Some(max) = target.max_p99_micros {
                wanted.push(format!("p99 ≤ {max} µs"));
            }
            let _ = writeln!(
                out,
                "  {}: {} calls/s, p99 {} µs; target {}: {met}",
                target.contender,
                v["callsPerSecond"],
                v["p99Micros"],
                wanted.join(" and ")
            );
        }
        if let Some(facts) = &self.facts {
            for (key, value) in facts.as_object().into_iter().flatten() {
                match value.as_array() {
                    // A series (samples over time) is for the JSON, not for a table line.
                    Some(series) if series.len() > 12 => {
                        let _ = writeln!(out, "  {key}: {} entries (in the JSON)", series.len());
                    }
                    _ => {
                        let _ = writeln!(out, "  {key}: {value}");
                    }
                }
            }
        }
        out
    }
}

/// The whole output of one `mcpx-bench` invocation.
pub fn document(runs: &[Run], meta: Value, machine: Value, binaries: Value) -> Value {
    json!({
        "tool": "mcpx-bench",
        "version": env!("CARGO_PKG_VERSION"),
        "meta": meta,
        "machine": machine,
        "binaries": binaries,
        "runs": runs.iter().map(Run::to_json).collect::<Vec<_>>(),
    })
}

/// What the figures came from: CPU count and model, kernel, and the load the machine
/// carried (the bench shares it with whatever else runs).
pub fn machine() -> Value {
    let read = |path: &str| std::fs::read_to_string(path).ok().map(|s| s.trim().to_owned());
    let cpu_model = read("/proc/cpuinfo").and_then(|info| {
        info.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|m| m.trim().to_owned())
    });
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).ok(),
        "cpuModel": cpu_model,
        "kernel": read("/proc/sys/kernel/osrelease"),
        "loadAverage": read("/proc/loadavg").map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" ")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(name: &'static str, micros: u64, count: usize) -> Measured {
        let mut samples = Samples::default();
        for _ in 0..count {
            samples.record(Duration::from_micros(micros));
        }
        Measured {
            name,
            path: "a path",
            samples,
            errors: 0,
            first_error: None,
            elapsed: Duration::from_micros(micros * count as u64),
            peak_rss: vec![("fakemcp".into(), Some(2048))],
            cpu: None,
            turns: Vec::new(),
        }
    }

    fn run(direct: u64, relay: u64) -> Run {
        Run {
            scenario: "stdio-relay",
            heading: "test".into(),
            settings: json!({}),
            contenders: vec![measured("direct", direct, 100), measured("relay", relay, 100)],
            comparisons: vec![Comparison {
                baseline: "direct",
                subject: "relay",
                added_p50_target_micros: Some(150.0),
                min_throughput_ratio: None,
                max_front_cpu_ratio: None,
            }],
            targets: vec![Target { contender: "relay", min_calls_per_second: Some(5_000.0), max_p99_micros: None }],
            facts: None,
        }
    }

    #[test]
    fn the_comparison_gives_ratio_added_latency_and_verdict() {
        let json = run(50, 150).to_json();
        let verdict = &json["comparisons"][0];
        assert_eq!(verdict["p50Ratio"], 3.0);
        assert_eq!(verdict["addedMicros"]["p50"], 100.0);
        assert_eq!(verdict["throughputRatio"], 0.33);
        assert_eq!(verdict["target"]["met"], true);
        assert_eq!(run(50, 250).to_json()["comparisons"][0]["target"]["met"], false);
    }

    #[test]
    fn a_cpu_bound_is_judged_on_the_front_process_per_call() {
        // The baseline's front spends 100 µs per call; the subject's 104 and then 106.
        let with_cpu = |subject_front_micros: u64| {
            let mut run = run(50, 50);
            let cpu = |front_micros: u64| CpuTime {
                front: Duration::from_micros(front_micros * 100),
                all: Duration::from_micros(front_micros * 300),
            };
            run.contenders[0].cpu = Some(cpu(100));
            run.contenders[1].cpu = Some(cpu(subject_front_micros));
            run.comparisons[0].max_front_cpu_ratio = Some(1.05);
            run
        };
        let within = with_cpu(104).to_json();
        assert_eq!(within["comparisons"][0]["frontCpuRatio"], 1.04);
        assert_eq!(within["comparisons"][0]["cpuTarget"]["met"], true);
        let over = with_cpu(106);
        assert_eq!(over.to_json()["comparisons"][0]["cpuTarget"]["met"], false);
        assert!(over.table().contains("target front CPU per call ≤ ×1.05: MISSED"));
        // Without CPU readings there is no ratio to judge.
        assert!(run(50, 50).to_json()["comparisons"][0].get("frontCpuRatio").is_none());
    }

    #[test]
    fn an_interleaved_cpu_bound_is_judged_on_the_median_of_its_rounds() {
        let turn = |front_micros: u64| Turn {
            calls: 100,
            elapsed: Duration::from_millis(10),
            cpu: Some(CpuTime { front: Duration::from_micros(front_micros * 100), all: Duration::ZERO }),
        };
        let mut run = run(50, 50);
        run.comparisons[0].max_front_cpu_ratio = Some(1.05);
        // Three rounds of five at 1.02 and two the machine slowed at 1.30: the whole run
        // comes to 1.13, the median round to 1.02.
        run.contenders[0].turns = [100; 5].map(turn).to_vec();
        run.contenders[1].turns = [102, 130, 102, 130, 102].map(turn).to_vec();
        let total = |turns: &[Turn]| {
            turns.iter().filter_map(|t| t.cpu).fold(CpuTime::default(), |mut a, c| {
                a += c;
                a
            })
        };
        run.contenders[0].cpu = Some(total(&run.contenders[0].turns));
        run.contenders[1].cpu = Some(total(&run.contenders[1].turns));
        let verdict = &run.to_json()["comparisons"][0];
        assert_eq!(verdict["frontCpuRatio"], 1.132);
        assert_eq!(verdict["frontCpuRatioByRound"], json!({"min": 1.02, "median": 1.02, "max": 1.3}));
        assert_eq!(verdict["cpuTarget"]["judgedOn"], "median of the rounds");
        assert_eq!(verdict["cpuTarget"]["met"], true);
        // Over the bound in most rounds is a miss.
        run.contenders[1].turns = [130, 102, 130, 102, 130].map(turn).to_vec();
        assert_eq!(run.to_json()["comparisons"][0]["cpuTarget"]["met"], false);
    }

    #[test]
    fn an_interleaved_ratio_is_judged_on_the_median_of_its_rounds() {
        let turn = |micros: u64| Turn { calls: 100, elapsed: Duration::from_micros(micros * 100), cpu: None };
        let mut run = run(100, 100);
        run.comparisons[0].added_p50_target_micros = None;
        run.comparisons[0].min_throughput_ratio = Some(0.7);
        // The relay kept 0.8 of the direct line's pace in four rounds of five, and fell to
        // 0.1 in one the machine disturbed: a whole-run figure would be dragged under 0.7.
        run.contenders[0].turns = [100, 100, 100, 100, 100].map(turn).to_vec();
        run.contenders[1].turns = [125, 125, 1000, 125, 125].map(turn).to_vec();
        run.contenders[0].elapsed = Duration::from_millis(50);
        run.contenders[1].elapsed = Duration::from_millis(150);
        let verdict = &run.to_json()["comparisons"][0];
        assert_eq!(verdict["throughputRatio"], 0.33);
        assert_eq!(verdict["throughputRatioByRound"], json!({"min": 0.1, "median": 0.8, "max": 0.8}));
        assert_eq!(verdict["target"]["judgedOn"], "median of the rounds");
        assert_eq!(verdict["target"]["met"], true);
        // Slower in most rounds is a miss, whatever one round did.
        run.contenders[1].turns = [150, 150, 50, 150, 150].map(turn).to_vec();
        assert_eq!(run.to_json()["comparisons"][0]["target"]["met"], false);
        // Rounds that do not pair up are not compared round by round.
        run.contenders[1].turns.pop();
        assert_eq!(run.to_json()["comparisons"][0]["target"]["judgedOn"], "the whole run");
    }

    #[test]
    fn a_spread_has_a_true_median() {
        assert_eq!(Spread::of(vec![3.0, 1.0, 2.0]), Some(Spread { min: 1.0, median: 2.0, max: 3.0 }));
        assert_eq!(Spread::of(vec![4.0, 1.0, 2.0, 3.0]), Some(Spread { min: 1.0, median: 2.5, max: 4.0 }));
        assert_eq!(Spread::of(Vec::new()), None);
    }

    #[test]
    fn a_contender_target_is_judged_on_its_own_throughput() {
        // 100 calls of 150 µs in 15 ms: 6,667 calls/s; of 250 µs: 4,000.
        assert_eq!(run(50, 150).to_json()["targets"][0]["met"], true);
        assert_eq!(run(50, 250).to_json()["targets"][0]["met"], false);
    }

    #[test]
    fn the_table_names_every_contender_and_the_verdict() {
        let table = run(50, 250).table();
        assert!(table.contains("direct"));
        assert!(table.contains("relay"));
        assert!(table.contains("MISSED"));
        assert!(table.contains("fakemcp 2.0 MiB"));
    }
}
