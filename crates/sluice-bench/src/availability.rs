//! Unavailability per partition: for each topic-partition of the run, the seconds it was
//! unavailable to producers while the rest of the topic was not — an interval in which it had
//! no successful ack although other partitions had some and it was expected to (its own ack
//! rate so far, or an even share of the interval's acks before it had any, predicts at least
//! `limits::UNAVAILABLE_MIN_EXPECTED_ACKS`), or an interval in which the latest topology sample
//! showed it without a leader (leader -1 or a partition error).
//!
//! A stall of every partition at once (a single broker gone) is not a partition's
//! unavailability: the fault's ack stall and time to recover say it (see `faults`). What this
//! adds is which partitions a cluster failure took away, and for how long.
//!
//! Guarantees: bounded by the run's topic-partitions (`limits::MAX_TOPIC_PARTITIONS`); the
//! delivery path does one relaxed atomic add per ack; a partition is never counted twice for
//! one interval (no ack and no leader together count once).

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde::Serialize;

use crate::limits;

/// Successful acks per topic-partition (flat index, see `lagview::TopicSet`), cumulative;
/// written by the delivery reports, read by the sampler.
#[derive(Debug)]
pub struct AckCounts {
    parts: Vec<AtomicU64>,
}

impl AckCounts {
    pub fn new(topic_partitions: usize) -> AckCounts {
        AckCounts {
            parts: (0..topic_partitions).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub fn note(&self, flat: usize) {
        if let Some(c) = self.parts.get(flat) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn read(&self, into: &mut [u64]) {
        for (d, c) in into.iter_mut().zip(&self.parts) {
            *d = c.load(Ordering::Relaxed);
        }
    }
}

/// Which partitions the latest topology sample showed without a leader; written by the
/// topology thread, read by the sampler.
#[derive(Debug, Default)]
pub struct Leaderless {
    flags: Mutex<Vec<bool>>,
}

impl Leaderless {
    /// Replaces the view with one sample: `leaderless` holds the flat indexes without a leader.
    pub fn set(&self, topic_partitions: usize, leaderless: impl Iterator<Item = usize>) {
        let mut f = vec![false; topic_partitions];
        for i in leaderless {
            if let Some(x) = f.get_mut(i) {
                *x = true;
            }
        }
        *self.flags.lock() = f;
    }

    fn get(&self, flat: usize) -> bool {
        self.flags.lock().get(flat).copied().unwrap_or(false)
    }
}

/// What the delivery reports and the topology thread share with the sampler.
#[derive(Debug)]
pub struct Shared {
    pub acks: AckCounts,
    pub leaderless: Leaderless,
}

impl Shared {
    pub fn new(topic_partitions: usize) -> Shared {
        Shared {
            acks: AckCounts::new(topic_partitions),
            leaderless: Leaderless::default(),
        }
    }
}

/// One partition's unavailability over the run (seconds since load start).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PartitionUnavailability {
    pub topic: String,
    pub partition: i32,
    /// Seconds unavailable: the intervals with no ack while others had acks, or no leader.
    pub unavailable_s: f64,
    /// Of those, the seconds with no ack while other partitions had acks.
    pub no_ack_s: f64,
    /// Of those, the seconds the topology samples showed no leader.
    pub no_leader_s: f64,
    /// The longest unbroken stretch, and when it started.
    pub longest_s: f64,
    pub longest_from_s: f64,
    /// Start of the first and end of the last unavailable interval.
    pub first_at_s: f64,
    pub last_at_s: f64,
}

/// The report's `availability` section.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct AvailabilityReport {
    /// Topic-partitions watched, and how many were ever unavailable.
    pub partitions: usize,
    pub unavailable_partitions: usize,
    /// Largest `unavailable_s` of any partition.
    pub worst_s: f64,
    /// The partitions that were unavailable at some point, worst first (the others had none).
    pub per_partition: Vec<PartitionUnavailability>,
}

#[derive(Debug, Clone, Default)]
struct Track {
    total_s: f64,
    no_ack_s: f64,
    no_leader_s: f64,
    run_s: f64,
    run_from_s: f64,
    longest_s: f64,
    longest_from_s: f64,
    first_at_s: Option<f64>,
    last_at_s: f64,
}

/// Per-interval judge, driven by the sampler.
#[derive(Debug)]
pub struct Tracker {
    prev: Vec<u64>,
    now: Vec<u64>,
    tracks: Vec<Track>,
}

impl Tracker {
    pub fn new(topic_partitions: usize) -> Tracker {
        Tracker {
            prev: vec![0; topic_partitions],
            now: vec![0; topic_partitions],
            tracks: vec![Track::default(); topic_partitions],
        }
    }

    /// One sampler interval `[end_s - interval_s, end_s]` (seconds since load start).
    pub fn tick(&mut self, end_s: f64, interval_s: f64, acks: &AckCounts, leaderless: &Leaderless) {
        acks.read(&mut self.now);
        let n = self.now.len().max(1);
        let deltas: Vec<u64> = self
            .now
            .iter()
            .zip(&self.prev)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect();
        let total: u64 = deltas.iter().sum();
        let start_s = (end_s - interval_s).max(0.0);
        for (i, t) in self.tracks.iter_mut().enumerate() {
            let others = total - deltas[i];
            // What this partition should have had: its own ack rate so far, or before its
            // first ack an even share of this interval's.
            let expected = if self.prev[i] > 0 && start_s > 0.0 {
                self.prev[i] as f64 / start_s * interval_s
            } else {
                total as f64 / n as f64
            };
            let no_ack = deltas[i] == 0
                && others > 0
                && expected >= limits::UNAVAILABLE_MIN_EXPECTED_ACKS as f64;
            let no_leader = leaderless.get(i);
            if no_ack {
                t.no_ack_s += interval_s;
            }
            if no_leader {
                t.no_leader_s += interval_s;
            }
            if no_ack || no_leader {
                t.total_s += interval_s;
                if t.run_s == 0.0 {
                    t.run_from_s = start_s;
                }
                t.run_s += interval_s;
                if t.run_s > t.longest_s {
                    t.longest_s = t.run_s;
                    t.longest_from_s = t.run_from_s;
                }
                t.first_at_s.get_or_insert(start_s);
                t.last_at_s = end_s;
            } else {
                t.run_s = 0.0;
            }
            debug_assert!(t.total_s + 1e-9 >= t.no_ack_s.max(t.no_leader_s));
        }
        std::mem::swap(&mut self.prev, &mut self.now);
    }

    /// The report, naming partitions by `name(flat)`.
    pub fn finish(self, name: impl Fn(usize) -> (String, i32)) -> AvailabilityReport {
        let partitions = self.tracks.len();
        let mut per: Vec<PartitionUnavailability> = self
            .tracks
            .into_iter()
            .enumerate()
            .filter(|(_, t)| t.total_s > 0.0)
            .map(|(i, t)| {
                let (topic, partition) = name(i);
                PartitionUnavailability {
                    topic,
                    partition,
                    unavailable_s: t.total_s,
                    no_ack_s: t.no_ack_s,
                    no_leader_s: t.no_leader_s,
                    longest_s: t.longest_s,
                    longest_from_s: t.longest_from_s,
                    first_at_s: t.first_at_s.unwrap_or(0.0),
                    last_at_s: t.last_at_s,
                }
            })
            .collect();
        per.sort_by(|a, b| {
            b.unavailable_s
                .total_cmp(&a.unavailable_s)
                .then((&a.topic, a.partition).cmp(&(&b.topic, b.partition)))
        });
        AvailabilityReport {
            partitions,
            unavailable_partitions: per.len(),
            worst_s: per.first().map(|p| p.unavailable_s).unwrap_or(0.0),
            per_partition: per,
        }
    }
}

impl AvailabilityReport {
    /// The summary line(s): none when no partition was unavailable.
    pub fn human(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        if self.per_partition.is_empty() {
            return o;
        }
        let _ = writeln!(
            o,
            " unavailable {} of {} partitions (no ack while others had acks, or no leader); worst {:.1} s",
            self.unavailable_partitions, self.partitions, self.worst_s
        );
        for p in self
            .per_partition
            .iter()
            .take(limits::UNAVAILABLE_ROWS_IN_TEXT)
        {
            let _ = writeln!(
                o,
                "             {}-{}: {:.1} s (no ack {:.1} s, no leader {:.1} s), longest {:.1} s from {:.1} s",
                p.topic, p.partition, p.unavailable_s, p.no_ack_s, p.no_leader_s, p.longest_s, p.longest_from_s
            );
        }
        if self.per_partition.len() > limits::UNAVAILABLE_ROWS_IN_TEXT {
            let _ = writeln!(
                o,
                "             ... {} more in the JSON",
                self.per_partition.len() - limits::UNAVAILABLE_ROWS_IN_TEXT
            );
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ticks: &[[u64; 3]], leaderless_at: &[(usize, usize)]) -> AvailabilityReport {
        let acks = AckCounts::new(3);
        let lead = Leaderless::default();
        let mut t = Tracker::new(3);
        for (k, per) in ticks.iter().enumerate() {
            for (p, n) in per.iter().enumerate() {
                for _ in 0..*n {
                    acks.note(p);
                }
            }
            lead.set(
                3,
                leaderless_at
                    .iter()
                    .filter(|(tick, _)| *tick == k)
                    .map(|(_, p)| *p),
            );
            t.tick((k + 1) as f64, 1.0, &acks, &lead);
        }
        t.finish(|i| ("t".to_string(), i as i32))
    }

    #[test]
    fn a_partition_without_acks_while_others_ack_is_unavailable() {
        let r = run(
            &[
                [100, 100, 100],
                [100, 0, 100],
                [100, 0, 100],
                [100, 100, 100],
                [100, 0, 100],
            ],
            &[],
        );
        assert_eq!(r.unavailable_partitions, 1);
        let p = &r.per_partition[0];
        assert_eq!((p.partition, p.unavailable_s, p.no_ack_s), (1, 3.0, 3.0));
        assert_eq!((p.longest_s, p.longest_from_s), (2.0, 1.0));
        assert_eq!((p.first_at_s, p.last_at_s), (1.0, 5.0));
    }

    #[test]
    fn a_stall_of_every_partition_is_not_a_partitions_unavailability() {
        let r = run(
            &[[100, 100, 100], [0, 0, 0], [0, 0, 0], [100, 100, 100]],
            &[],
        );
        assert!(r.per_partition.is_empty() && r.worst_s == 0.0);
        assert!(r.human().is_empty());
    }

    #[test]
    fn a_trickle_is_not_an_outage_and_no_leader_counts_once() {
        // 3 acks a second over 3 partitions: a partition with none is chance, not an outage.
        let r = run(&[[1, 1, 1], [2, 0, 1], [0, 0, 3]], &[]);
        assert!(r.per_partition.is_empty(), "{r:?}");
        // No leader for partition 2 in ticks 1 and 2 (and no acks in tick 2): 2 s, not 3.
        let r = run(
            &[[50, 50, 50], [50, 50, 50], [50, 50, 0]],
            &[(1, 2), (2, 2)],
        );
        let p = &r.per_partition[0];
        assert_eq!(
            (p.partition, p.unavailable_s, p.no_leader_s, p.no_ack_s),
            (2, 2.0, 2.0, 1.0)
        );
    }
}
