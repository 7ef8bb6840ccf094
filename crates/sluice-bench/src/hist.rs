//! Latency histograms (HdrHistogram, microsecond values, 3 significant digits) and their
//! summaries: the union of the percentiles SSP, OMB and Kafka's tools print, SSP's 23 CDF
//! buckets and an OMB-style quantile map. Recording saturates at `limits::HIST_MAX_US`
//! instead of failing, so an absurd value can never lose a sample or abort a run.
//!
//! Histograms also serialize to HdrHistogram's V2 format (plain for the compact per-interval
//! copies the OMB windows merge, deflated and base64-encoded for the report's `hdr_base64`), so
//! distributions from several runs or intervals can be merged later without loss.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};
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

    /// HdrHistogram V2 encoding (no compression): small for a sparse histogram, cheap to make
    /// once a second. Empty when the histogram is empty.
    pub fn to_v2(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.0.is_empty() {
            // Serializing into a Vec cannot fail for a histogram we built (u64 counts).
            let _ = V2Serializer::new().serialize(&self.0, &mut out);
        }
        out
    }

    /// Adds a `to_v2` (or V2-deflate) encoding to this histogram; empty input adds nothing.
    pub fn merge_v2(&mut self, bytes: &[u8]) -> Result<(), String> {
        if bytes.is_empty() {
            return Ok(());
        }
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| format!("bad HdrHistogram encoding: {e:?}"))?;
        // Values beyond our range saturate, like recording does.
        for v in h.iter_recorded() {
            let _ = self.0.record_n(
                v.value_iterated_to().min(limits::HIST_MAX_US),
                v.count_at_value(),
            );
        }
        Ok(())
    }

    /// HdrHistogram V2 with deflate, base64 (standard alphabet, padded): the interchange form
    /// HdrHistogram's own tools (Java, Go, Python, Rust) decode. None when empty.
    pub fn to_base64(&self) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        let mut out = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.0, &mut out)
            .ok()?;
        Some(base64::engine::general_purpose::STANDARD.encode(out))
    }

    /// The inverse of `to_base64`.
    pub fn from_base64(s: &str) -> Result<LatencyHist, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s.trim())
            .map_err(|e| format!("bad base64: {e}"))?;
        let mut h = LatencyHist::new();
        h.merge_v2(&bytes)?;
        Ok(h)
    }

    /// Mean in microseconds (None when empty).
    pub fn mean_us(&self) -> Option<f64> {
        (!self.0.is_empty()).then(|| self.0.mean())
    }

    /// Value at percentile `p` in microseconds (None when empty).
    pub fn percentile_us(&self, p: f64) -> Option<u64> {
        (!self.0.is_empty()).then(|| self.0.value_at_quantile(p / 100.0))
    }

    /// Largest recorded value in microseconds (None when empty).
    pub fn max_us(&self) -> Option<u64> {
        (!self.0.is_empty()).then(|| self.0.max())
    }

    /// (percentile, value in µs) along HdrHistogram's quantile iteration, halving the distance
    /// to 100 % at each step (50, 75, 87.5, …): the curve OMB's quantile maps hold.
    pub fn quantile_curve_us(&self) -> Vec<(f64, u64)> {
        if self.0.is_empty() {
            return Vec::new();
        }
        self.0
            .iter_quantiles(1)
            .map(|v| (v.quantile_iterated_to() * 100.0, v.value_iterated_to()))
            .collect()
    }

    /// Median absolute deviation in µs: the median of |x − median| over the recorded values,
    /// each value taken at its bucket's upper edge (so within the histogram's 3 significant
    /// digits of the exact sample statistic). None when empty.
    pub fn mad_us(&self) -> Option<f64> {
        let h = &self.0;
        if h.is_empty() {
            return None;
        }
        let median = h.value_at_quantile(0.5) as f64;
        let mut dev: Vec<(f64, u64)> = h
            .iter_recorded()
            .map(|v| {
                (
                    (v.value_iterated_to() as f64 - median).abs(),
                    v.count_at_value(),
                )
            })
            .collect();
        dev.sort_by(|a, b| a.0.total_cmp(&b.0));
        let half = h.len().div_ceil(2);
        let mut seen = 0;
        for (d, n) in dev {
            seen += n;
            if seen >= half {
                return Some(d);
            }
        }
        None
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
            hdr_base64: self.to_base64(),
        }
    }
}

/// One interval's ack, send-delay and end-to-end histograms in the compact V2 encoding
/// (`LatencyHist::to_v2`); kept in memory with the interval, never written to the JSON.
#[derive(Debug, Clone, Default)]
pub struct IntervalHdr {
    pub ack: Vec<u8>,
    pub send_delay: Vec<u8>,
    pub e2e: Vec<u8>,
}

impl IntervalHdr {
    pub fn of(ack: &LatencyHist, send_delay: &LatencyHist, e2e: &LatencyHist) -> Self {
        IntervalHdr {
            ack: ack.to_v2(),
            send_delay: send_delay.to_v2(),
            e2e: e2e.to_v2(),
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
    /// The whole histogram (µs values): HdrHistogram V2, deflated, base64; null when empty.
    /// Decode with any HdrHistogram library to merge runs or read other percentiles.
    pub hdr_base64: Option<String>,
}

impl LatencySummary {
    /// The histogram behind this summary (from `hdr_base64`); None when empty or undecodable.
    pub fn hist(&self) -> Option<LatencyHist> {
        self.hdr_base64
            .as_deref()
            .and_then(|s| LatencyHist::from_base64(s).ok())
    }
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
    fn base64_and_v2_round_trip() {
        let mut h = LatencyHist::new();
        let mut x: u64 = 7;
        for _ in 0..5_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            h.record_ns((x >> 33) % 500_000_000);
        }
        let s = h.summary();
        let b64 = s.hdr_base64.clone().unwrap_or_default();
        assert!(!b64.is_empty());
        let back = LatencyHist::from_base64(&b64).unwrap_or_default();
        assert_eq!(back.count(), h.count());
        let s2 = back.summary();
        for (a, b) in [
            (s.p50_ms, s2.p50_ms),
            (s.p99_ms, s2.p99_ms),
            (s.p99_99_ms, s2.p99_99_ms),
            (s.max_ms, s2.max_ms),
            (s.min_ms, s2.min_ms),
        ] {
            assert_eq!(a, b);
        }
        assert_eq!(s.cdf_buckets, s2.cdf_buckets);
        // The plain V2 form merges: two copies double every count.
        let mut twice = LatencyHist::new();
        assert!(twice.merge_v2(&h.to_v2()).is_ok());
        assert!(twice.merge_v2(&h.to_v2()).is_ok());
        assert_eq!(twice.count(), 2 * h.count());
        assert_eq!(twice.percentile_ms(99.0), h.percentile_ms(99.0));
        // Empty stays empty and bad input is an error, not a panic.
        assert!(LatencyHist::new().summary().hdr_base64.is_none());
        assert!(LatencyHist::new().to_v2().is_empty());
        assert!(LatencyHist::from_base64("not base64!").is_err());
        assert!(LatencyHist::from_base64("AAAA").is_err());
    }

    #[test]
    fn mad_matches_the_exact_statistic() {
        // 1..=9 ms: median 5, deviations 0,1,1,2,2,3,3,4,4 -> MAD 2 ms.
        let mut h = LatencyHist::new();
        for v in 1..=9u64 {
            h.record_ns(v * 1_000_000);
        }
        let mad = h.mad_us().unwrap_or(0.0);
        assert!((mad - 2000.0).abs() <= 2000.0 * 0.002, "{mad}");
        assert!(LatencyHist::new().mad_us().is_none());
        let curve = h.quantile_curve_us();
        assert!(curve
            .windows(2)
            .all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(curve.last().map(|c| c.0), Some(100.0));
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
