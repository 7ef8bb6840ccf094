//! Unavailability per partition: for each topic-partition of the run, the seconds it was
//! unavailable to producers while the rest of the topic was not — a silence: no successful ack
//! for longer than `limits::UNAVAILABLE_GRACE` although another partition had one within
//! `limits::UNAVAILABLE_LIVE` and its own ack rate so far predicted at least
//! `limits::UNAVAILABLE_MIN_EXPECTED_ACKS` in that time (counted from its last ack, so the whole
//! silence is reported) — or an interval in which the latest topology sample showed it without
//! a leader (leader -1 or a partition error).
//!
//! A stall of every partition at once (a single broker gone, a client in reconnect backoff) is
//! not a partition's unavailability: the fault's ack stall and time to recover say it (see
//! `faults`). What this adds is which partitions a cluster failure took away, and for how long.
//! Silences shorter than the grace are not counted (they are indistinguishable from batching).
//!
//! Guarantees: bounded by the run's topic-partitions (`limits::MAX_TOPIC_PARTITIONS`); the
//! delivery path does two relaxed atomic operations per ack; a partition is never counted twice
//! for one stretch of time (no ack and no leader together count once).

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde::Serialize;

use crate::limits;

/// Successful acks per topic-partition (flat index, see `lagview::TopicSet`): how many, and
/// the run-clock time of the latest; written by the delivery reports, read by the sampler.
#[derive(Debug)]
pub struct AckCounts {
    count: Vec<AtomicU64>,
    last_ns: Vec<AtomicU64>,
}

impl AckCounts {
    pub fn new(topic_partitions: usize) -> AckCounts {
        AckCounts {
            count: (0..topic_partitions).map(|_| AtomicU64::new(0)).collect(),
            last_ns: (0..topic_partitions).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// A successful ack of topic-partition `flat` reported at `now_ns` (run clock).
    pub fn note(&self, flat: usize, now_ns: u64) {
        if let (Some(c), Some(l)) = (self.count.get(flat), self.last_ns.get(flat)) {
            c.fetch_add(1, Ordering::Relaxed);
            l.fetch_max(now_ns, Ordering::Relaxed);
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
    /// In a silence (no-ack unavailability) as of the last tick.
    silent: bool,
    /// Unavailable time is counted up to here (a silence found late reaches back, but never
    /// over time already counted).
    counted_until_s: f64,
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
    load_start_ns: u64,
    prev_ns: u64,
    tracks: Vec<Track>,
}

impl Tracker {
    pub fn new(topic_partitions: usize, load_start_ns: u64) -> Tracker {
        Tracker {
            load_start_ns,
            prev_ns: load_start_ns,
            tracks: vec![Track::default(); topic_partitions],
        }
    }

    /// One sampler tick at `now_ns` (run clock): judges `(previous tick, now]`.
    pub fn tick(&mut self, now_ns: u64, acks: &AckCounts, leaderless: &Leaderless) {
        let s = |ns: u64| ns.saturating_sub(self.load_start_ns) as f64 / 1e9;
        let (now_s, prev_s) = (s(now_ns), s(self.prev_ns));
        let dt = (now_s - prev_s).max(0.0);
        let last: Vec<u64> = acks
            .last_ns
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect();
        let count: Vec<u64> = acks
            .count
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        // The two latest acks over all partitions: "another partition acked recently".
        let (mut top, mut second) = ((0u64, usize::MAX), 0u64);
        for (i, &l) in last.iter().enumerate() {
            if l > top.0 {
                second = top.0;
                top = (l, i);
            } else if l > second {
                second = l;
            }
        }
        let grace = limits::UNAVAILABLE_GRACE.as_secs_f64();
        let live_ns = limits::UNAVAILABLE_LIVE.as_nanos() as u64;
        let total: u64 = count.iter().sum();
        let n = count.len().max(1) as f64;
        for (i, t) in self.tracks.iter_mut().enumerate() {
            let other_last = if top.1 == i { second } else { top.0 };
            let others_live = other_last > 0 && now_ns.saturating_sub(other_last) <= live_ns;
            let since_s = if last[i] > 0 { s(last[i]) } else { 0.0 };
            let silent_s = now_s - since_s;
            // Its own rate so far, or an even share of all acks before it had one.
            let rate = if count[i] > 0 {
                count[i] as f64 / now_s.max(1e-9)
            } else {
                total as f64 / n / now_s.max(1e-9)
            };
            let silent = silent_s > grace
                && others_live
                && rate * grace >= limits::UNAVAILABLE_MIN_EXPECTED_ACKS as f64;
            // A silence counts from the partition's last ack (once, when first seen).
            let from_s = if silent && !t.silent {
                since_s.max(0.0)
            } else {
                prev_s
            };
            let leaderless = leaderless.get(i);
            t.silent = silent;
            if silent {
                t.no_ack_s += (now_s - from_s).max(0.0);
            }
            if leaderless {
                t.no_leader_s += dt;
            }
            // The union of the two, not counted twice.
            let start = match (silent, leaderless) {
                (true, true) => Some(from_s.min(prev_s)),
                (true, false) => Some(from_s),
                (false, true) => Some(prev_s),
                (false, false) => None,
            };
            let here = start.map_or(0.0, |st| (now_s - st.max(t.counted_until_s)).max(0.0));
            if start.is_some() {
                t.counted_until_s = now_s;
            }
            if here > 0.0 {
                let start_s = now_s - here;
                t.total_s += here;
                if t.run_s == 0.0 {
                    t.run_from_s = start_s;
                }
                t.run_s += here;
                if t.run_s > t.longest_s {
                    t.longest_s = t.run_s;
                    t.longest_from_s = t.run_from_s;
                }
                t.first_at_s.get_or_insert(start_s);
                t.last_at_s = now_s;
            } else {
                t.run_s = 0.0;
            }
            debug_assert!(t.total_s <= t.no_ack_s + t.no_leader_s + 1e-9);
        }
        self.prev_ns = now_ns;
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

    const MS: u64 = 1_000_000;

    /// Ticks every second for `secs` seconds; `acking(p, t_ms)` says whether partition `p`
    /// gets an ack at each 10 ms step; `leaderless(p, tick)` marks samples without a leader.
    fn run(
        secs: u64,
        acking: impl Fn(usize, u64) -> bool,
        leaderless: impl Fn(usize, u64) -> bool,
    ) -> AvailabilityReport {
        let acks = AckCounts::new(3);
        let lead = Leaderless::default();
        let mut t = Tracker::new(3, 0);
        for tick in 1..=secs {
            for step in ((tick - 1) * 1000..tick * 1000).step_by(10) {
                for p in 0..3 {
                    if acking(p, step) {
                        acks.note(p, (step + 5) * MS);
                    }
                }
            }
            lead.set(3, (0..3).filter(|p| leaderless(*p, tick)));
            t.tick(tick * 1000 * MS, &acks, &lead);
        }
        t.finish(|i| ("t".to_string(), i as i32))
    }

    #[test]
    fn a_silent_partition_while_others_ack_is_unavailable_from_its_last_ack() {
        // Partition 1 silent from 3.0 s to 7.5 s.
        let r = run(
            10,
            |p, ms| p != 1 || !(3000..7500).contains(&ms),
            |_, _| false,
        );
        assert_eq!(r.unavailable_partitions, 1, "{r:?}");
        let p = &r.per_partition[0];
        assert_eq!(p.partition, 1);
        // Counted from its last ack (2.995 s) to the last tick of the silence (7 s).
        assert!((p.unavailable_s - 4.0).abs() < 0.02, "{p:?}");
        assert!(
            (p.longest_from_s - 2.995).abs() < 0.02 && p.no_leader_s == 0.0,
            "{p:?}"
        );
        assert!(r.human().contains("unavailable 1 of 3 partitions"));
    }

    #[test]
    fn a_stall_of_every_partition_is_not_a_partitions_unavailability() {
        // Everything stops at 3.2 s (partition 2 a little earlier), resumes at 8.1 s.
        let r = run(
            10,
            |p, ms| {
                let stop = if p == 2 { 3050 } else { 3200 };
                !(stop..8100).contains(&ms)
            },
            |_, _| false,
        );
        assert!(r.per_partition.is_empty() && r.worst_s == 0.0, "{r:?}");
        assert!(r.human().is_empty());
    }

    #[test]
    fn a_trickle_is_not_an_outage_and_no_leader_counts_once() {
        // One ack per partition every 1.5 s: long gaps are its rate, not an outage.
        let r = run(10, |p, ms| ms % 1500 == (p as u64) * 10, |_, _| false);
        assert!(r.per_partition.is_empty(), "{r:?}");
        // Partition 2: no leader in samples 4..=7 and silent over the same time: 4 s, once.
        let r = run(
            10,
            |p, ms| p != 2 || !(3000..7000).contains(&ms),
            |p, tick| p == 2 && (4..=7).contains(&tick),
        );
        let p = &r.per_partition[0];
        assert_eq!(p.partition, 2);
        assert!((p.no_leader_s - 4.0).abs() < 1e-9, "{p:?}");
        assert!((p.unavailable_s - 4.005).abs() < 0.02, "{p:?}");
    }
}
