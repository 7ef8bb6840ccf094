//! The statistics of comparisons: means and medians, deterministic percentile-bootstrap
//! confidence intervals of a mean and of a ratio of two means, and the verdict a ratio's
//! interval supports ("A faster", "B better", "no difference", ...).
//!
//! Guarantees: the same values and seed always give the same interval (`SplitMix64` seeded by
//! `limits::BOOTSTRAP_SEED` mixed with the metric's name); with fewer than two values on either
//! side there is no interval.

use crate::limits;
use crate::payload::SplitMix64;

pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

/// A per-metric seed, so each metric's resampling is independent yet reproducible.
pub fn seed_for(name: &str) -> u64 {
    // FNV-1a of the name, mixed into the fixed seed.
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    limits::BOOTSTRAP_SEED ^ h
}

pub fn resample_mean(v: &[f64], rng: &mut SplitMix64) -> f64 {
    let n = v.len();
    (0..n).map(|_| v[rng.below(n as u64) as usize]).sum::<f64>() / n as f64
}

/// The 2.5th and 97.5th percentiles of `stats` (sorted in place).
pub fn percentile_interval(stats: &mut [f64]) -> Option<(f64, f64)> {
    if stats.is_empty() {
        return None;
    }
    stats.sort_by(f64::total_cmp);
    let last = (stats.len() - 1) as f64;
    let lo = stats[(0.025 * last).floor() as usize];
    let hi = stats[(0.975 * last).ceil() as usize];
    Some((lo, hi))
}

/// 95% percentile-bootstrap interval of the mean of `v`; None with fewer than 2 values.
pub fn bootstrap_mean_ci(v: &[f64], resamples: usize, seed: u64) -> Option<(f64, f64)> {
    if v.len() < 2 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut stats: Vec<f64> = (0..resamples).map(|_| resample_mean(v, &mut rng)).collect();
    percentile_interval(&mut stats)
}

/// 95% percentile-bootstrap interval of mean(b) / mean(a), resampling a and b independently;
/// None with fewer than 2 values on either side or when most resampled means of `a` are 0.
pub fn bootstrap_ratio_ci(a: &[f64], b: &[f64], resamples: usize, seed: u64) -> Option<(f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut stats = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let ma = resample_mean(a, &mut rng);
        let mb = resample_mean(b, &mut rng);
        if ma != 0.0 {
            stats.push(mb / ma);
        }
    }
    if stats.len() < resamples / 2 {
        return None;
    }
    percentile_interval(&mut stats)
}

/// Larger is better for these metrics; smaller for every other compared metric.
pub fn higher_is_better(metric: &str) -> bool {
    metric.ends_with("_msg_s")
}

/// The verdict of one A/B metric (A = baseline target, B = the compared target); see
/// `Ratio::verdicts`.
pub fn verdict(
    metric: &str,
    a: &[f64],
    b: &[f64],
    ratio: Option<f64>,
    ci: Option<(f64, f64)>,
) -> String {
    if a.is_empty() || b.is_empty() {
        return "n/a".into();
    }
    if a.len() < 2 || b.len() < 2 {
        return "inconclusive (1 run)".into();
    }
    if ratio.is_none() {
        // Baseline mean 0: equal only if B is all zeros too (e.g. lost == 0 on both).
        return if b.iter().all(|v| *v == 0.0) && a.iter().all(|v| *v == 0.0) {
            "no difference".into()
        } else {
            "n/a".into()
        };
    }
    let Some((lo, hi)) = ci else {
        return "n/a".into();
    };
    if lo <= 1.0 && 1.0 <= hi {
        return "no difference".into();
    }
    let b_larger = lo > 1.0;
    let b_wins = b_larger == higher_is_better(metric);
    let word = if metric.ends_with("_ms") || higher_is_better(metric) {
        "faster"
    } else {
        "better"
    };
    // A percentile bootstrap of very few runs gives too narrow an interval; say so.
    let few = a.len().min(b.len());
    let caveat = if few < limits::BOOTSTRAP_SOLID_RUNS {
        format!(" (weak: {few} runs)")
    } else {
        String::new()
    };
    format!("{} {word}{caveat}", if b_wins { "B" } else { "A" })
}
