//! Latency samples and what is reported about them: percentiles, mean, maximum, and
//! throughput over the time the samples took.
//!
//! Every successful request is one sample, kept whole (no histogram buckets), so a
//! percentile is an observed latency and never an interpolation.

use std::time::Duration;

use serde_json::{Value, json};

/// The latencies of one contender's successful requests.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    nanos: Vec<u64>,
}

impl Samples {
    pub fn with_capacity(capacity: usize) -> Samples {
        Samples { nanos: Vec::with_capacity(capacity) }
    }

    pub fn record(&mut self, latency: Duration) {
        self.nanos.push(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX));
    }

    pub fn extend(&mut self, other: Samples) {
        self.nanos.extend(other.nanos);
    }

    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    pub fn summary(&self) -> Summary {
        let mut sorted = self.nanos.clone();
        sorted.sort_unstable();
        let micros = |nanos: u64| nanos as f64 / 1_000.0;
        let total: u128 = sorted.iter().map(|&n| u128::from(n)).sum();
        Summary {
            count: sorted.len(),
            p50: micros(percentile(&sorted, 50.0)),
            p90: micros(percentile(&sorted, 90.0)),
            p99: micros(percentile(&sorted, 99.0)),
            max: micros(sorted.last().copied().unwrap_or(0)),
            mean: if sorted.is_empty() { 0.0 } else { total as f64 / sorted.len() as f64 / 1_000.0 },
        }
    }
}

/// The nearest-rank percentile of ascending `sorted`: the smallest sample with at least
/// `p` percent of the samples at or below it. Zero when there are no samples.
fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Latency figures in microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Summary {
    pub fn to_json(self) -> Value {
        json!({
            "p50": round(self.p50),
            "p90": round(self.p90),
            "p99": round(self.p99),
            "max": round(self.max),
            "mean": round(self.mean),
        })
    }
}

/// Rounds to a tenth, which is all the precision a latency on a shared machine has.
pub fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// Requests per second: `count` requests completed in `elapsed`.
pub fn throughput(count: usize, elapsed: Duration) -> f64 {
    if elapsed.is_zero() { 0.0 } else { count as f64 / elapsed.as_secs_f64() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(micros: &[u64]) -> Samples {
        let mut samples = Samples::default();
        for &m in micros {
            samples.record(Duration::from_micros(m));
        }
        samples
    }

    #[test]
    fn percentiles_are_observed_samples_by_nearest_rank() {
        let summary = samples(&(1..=100).rev().collect::<Vec<_>>()).summary();
        assert_eq!(summary.count, 100);
        assert_eq!(summary.p50, 50.0);
        assert_eq!(summary.p90, 90.0);
        assert_eq!(summary.p99, 99.0);
        assert_eq!(summary.max, 100.0);
        assert_eq!(summary.mean, 50.5);
    }

    #[test]
    fn a_single_outlier_shows_in_max_and_not_in_p50() {
        let mut micros = vec![10; 99];
        micros.push(5_000);
        let summary = samples(&micros).summary();
        assert_eq!(summary.p50, 10.0);
        assert_eq!(summary.p99, 10.0);
        assert_eq!(summary.max, 5_000.0);
    }

    #[test]
    fn no_samples_means_zeros_not_a_panic() {
        let summary = Samples::default().summary();
        assert_eq!(summary.count, 0);
        assert_eq!(summary.p99, 0.0);
        assert_eq!(throughput(0, Duration::ZERO), 0.0);
    }
}
