//! Fixed-bucket histograms recorded with atomics only, for metrics on hot paths (the
//! committer's rounds and syncs, the broker's request latencies).
//!
//! Guarantees: [`Histogram::observe`] takes no lock and allocates nothing (a binary search
//! of a static bound table and two relaxed `fetch_add`s), so it may run inside the group
//! commit and on the allocation-free produce path. A [`Histogram::snapshot`] (at scrape
//! time; it allocates) reads each bucket once: buckets, count and sum taken while
//! observations go on may disagree by the observations in flight, never more, and each
//! of them only grows. Values are plain `u64` in the unit the caller chose (nanoseconds,
//! bytes, requests); the exporter scales them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds for latencies in nanoseconds: 10 µs to 10 s, about three per decade.
pub const LATENCY_BOUNDS_NS: &[u64] = &[
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// Upper bounds for sizes in bytes: 1 KiB to 64 MiB, powers of four.
pub const SIZE_BOUNDS_BYTES: &[u64] = &[
    1 << 10,
    1 << 12,
    1 << 14,
    1 << 16,
    1 << 18,
    1 << 20,
    1 << 22,
    1 << 24,
    1 << 26,
];

/// Upper bounds for counts (requests in a commit round): 1 to 4096, powers of two.
pub const COUNT_BOUNDS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// A histogram over fixed upper bounds (each bucket counts values `<=` its bound and above
/// the previous one; one more bucket counts values above the last bound).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [u64],
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
}

/// What a histogram held at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// The upper bounds, ascending.
    pub bounds: &'static [u64],
    /// Observations per bucket (not cumulative): one per bound, then the overflow bucket.
    pub buckets: Vec<u64>,
    /// Sum of the observed values (wraps only after 584 years of nanoseconds).
    pub sum: u64,
}

impl HistogramSnapshot {
    /// Every observation, overflow included.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

impl Histogram {
    /// A histogram over `bounds`, which must be strictly ascending.
    pub fn new(bounds: &'static [u64]) -> Self {
        assert!(
            bounds.windows(2).all(|w| w[0] < w[1]),
            "histogram bounds must be strictly ascending"
        );
        Self {
            bounds,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Records one value. No lock, no allocation.
    pub fn observe(&self, value: u64) {
        let i = self.bounds.partition_point(|b| *b < value);
        debug_assert!(i < self.buckets.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Reads the buckets and the sum (allocates; for scrapes, not hot paths).
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            buckets: self
                .buckets
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a value lands in the first bucket whose bound is at least the value; values above
    // every bound land in the overflow bucket; sum and count add up.
    #[test]
    fn values_land_in_their_buckets() {
        static BOUNDS: &[u64] = &[10, 100];
        let h = Histogram::new(BOUNDS);
        for v in [0, 10, 11, 100, 101, 5000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![2, 2, 2]);
        assert_eq!(s.count(), 6);
        assert_eq!(s.sum, 10 + 11 + 100 + 101 + 5000);
    }

    #[test]
    fn bound_tables_are_ascending() {
        for bounds in [LATENCY_BOUNDS_NS, SIZE_BOUNDS_BYTES, COUNT_BOUNDS] {
            let _ = Histogram::new(bounds);
        }
    }
}
