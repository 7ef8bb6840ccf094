//! Latency histograms (HdrHistogram, microsecond values, 3 significant digits) and their
//! summaries: the union of the percentiles SSP, OMB and Kafka's tools print, SSP's 23 CDF
//! buckets and an OMB-style quantile map. Recording saturates at `limits::HIST_MAX_US`
//! instead of failing, so an absurd value can never lose a sample or abort a run.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::limits;

/// SSP's CDF bucket upper edges in milliseconds; a 23rd bucket counts everything above.
pub const CDF_EDGES_MS: [f64; 22] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0,
    5000.0, 10000.0, 20000.0, 50000.0, 100000.0, 200000.0, 500000.0,
];

/// Percentiles of the OMB-style quantile map.
const QUANTILES: [f64; 17] = [
    1.0, 5.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.995, 99.999,
    99.9999, 100.0,
];

/// One latency distribution in microseconds.
#[derive(Debug, Clone)]
pub struct LatencyHist(Histogram<u64>);

impl Default for LatencyHist {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHist {
    pub fn new() -> Self {
        // The bounds are constants (1 µs .. one hour, 3 digits), valid by construction; a unit
        // test creates one.
        #[allow(clippy::expect_used)]
        let h = Histogram::new_with_bounds(1, limits::HIST_MAX_US, limits::HIST_SIGFIG)
            .expect("constant histogram bounds are valid");
        LatencyHist(h)
    }

    /// Records one latency given in nanoseconds.
    pub fn record_ns(&mut self, ns: u64) {
        self.0.saturating_record(ns / 1000);
    }

    /// Empties the histogram, keeping its allocation.
    pub fn reset(&mut self) {
        self.0.reset();
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    pub fn merge(&mut self, other: &LatencyHist) {
        // Same bounds on both sides, so `add` cannot fail; if it ever did, the sample counts
        // in the summary would show the gap rather than the run aborting.
        let _ = self.0.add(&other.0);
    }

    /// A value in milliseconds at percentile `p` (0..=100), or None when empty.
    pub fn percentile_ms(&self, p: f64) -> Option<f64> {
        if self.0.is_empty() {
            None
        } else {
            Some(us_to_ms(self.0.value_at_quantile(p / 100.0)))
        }
    }

    pub fn summary(&self) -> LatencySummary {
        let h = &self.0;
        if h.is_empty() {
            return LatencySummary::default();
        }
        let p = |q: f64| Some(us_to_ms(h.value_at_quantile(q)));
        let mut cdf = vec![0u64; CDF_EDGES_MS.len() + 1];
        for v in h.iter_recorded() {
            let ms = us_to_ms(v.value_iterated_to());
            let i = CDF_EDGES_MS
                .iter()
                .position(|&edge| ms <= edge)
                .unwrap_or(CDF_EDGES_MS.len());
            cdf[i] += v.count_at_value();
        }
        let quantiles = QUANTILES
            .iter()
            .map(|&q| (format!("{q}"), us_to_ms(h.value_at_quantile(q / 100.0))))
            .collect();
        LatencySummary {
            count: h.len(),
            min_ms: Some(us_to_ms(h.min())),
            mean_ms: Some(h.mean() / 1000.0),
            stddev_ms: Some(h.stdev() / 1000.0),
            p50_ms: p(0.50),
            p75_ms: p(0.75),
            p90_ms: p(0.90),
            p95_ms: p(0.95),
            p99_ms: p(0.99),
            p99_5_ms: p(0.995),
            p99_9_ms: p(0.999),
            p99_99_ms: p(0.9999),
            max_ms: Some(us_to_ms(h.max())),
            cdf_buckets: cdf,
            quantiles_ms: quantiles,
        }
    }
}

fn us_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// A latency distribution as reported. Every value is in milliseconds with microsecond
/// resolution; all are null when `count` is 0.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_ms: Option<f64>,
    pub mean_ms: Option<f64>,
    pub stddev_ms: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p75_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub p99_5_ms: Option<f64>,
    pub p99_9_ms: Option<f64>,
    pub p99_99_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// Counts per SSP bucket: value <= edge (see `cdf_edges_ms` in the report), then overflow.
    pub cdf_buckets: Vec<u64>,
    /// Percentile (as a string, e.g. "99.9") -> value in ms, OMB style.
    pub quantiles_ms: BTreeMap<String, f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_is_monotonic_and_buckets_add_up() {
        let mut h = LatencyHist::new();
        let mut x: u64 = 1;
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            h.record_ns((x >> 40) % 2_000_000_000); // up to 2 s
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        let seq = [
            s.min_ms,
            s.p50_ms,
            s.p75_ms,
            s.p90_ms,
            s.p95_ms,
            s.p99_ms,
            s.p99_5_ms,
            s.p99_9_ms,
            s.p99_99_ms,
            s.max_ms,
        ];
        let vals: Vec<f64> = seq.iter().map(|v| v.unwrap_or(f64::NAN)).collect();
        assert!(vals.windows(2).all(|w| w[0] <= w[1]), "{vals:?}");
        assert_eq!(s.cdf_buckets.len(), 23);
        assert_eq!(s.cdf_buckets.iter().sum::<u64>(), 10_000);
    }

    #[test]
    fn huge_values_saturate_and_empty_is_null() {
        let mut h = LatencyHist::new();
        assert!(h.summary().p50_ms.is_none());
        h.record_ns(u64::MAX);
        assert_eq!(h.count(), 1);
        let max = h.summary().max_ms.unwrap_or(0.0);
        assert!(max >= limits::HIST_MAX_US as f64 / 1000.0 * 0.99, "{max}");
    }

    #[test]
    fn microsecond_resolution() {
        let mut h = LatencyHist::new();
        h.record_ns(1_500); // 1.5 µs -> 1 µs bucket
        h.record_ns(250_000); // 250 µs
        assert_eq!(h.percentile_ms(0.0), Some(0.001));
        let p100 = h.percentile_ms(100.0).unwrap_or(0.0);
        assert!((p100 - 0.25).abs() < 0.001, "{p100}");
    }
}
