//! Message keys (OMB's key distributors plus a hot-key skew). Keyed messages are partitioned by
//! librdkafka's own partitioner (a hash of the key), as an application's would be, so the
//! partition spread the report shows is what that partitioner makes of the key stream.
//!
//! Guarantees: the key sequence of producer `p` depends only on the scenario and seed (seeded
//! generator, no clock), and a key is written into a caller-owned buffer, so producing a key
//! allocates nothing.

use std::io::Write as _;

use crate::payload::SplitMix64;
use crate::shaping::{KeyMode, Shaping};

/// Which key one message carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// Key `k-<n>` of the key set.
    Set(u32),
    /// The hot key of `KeyMode::Hot`.
    Hot,
}

impl Key {
    /// Writes the key bytes into `out` (cleared first).
    pub fn write(self, out: &mut Vec<u8>) {
        out.clear();
        let _ = match self {
            Key::Set(n) => write!(out, "k-{n}"),
            Key::Hot => write!(out, "k-hot"),
        };
    }
}

/// One producer's key stream.
#[derive(Debug)]
pub struct KeyGen {
    mode: KeyMode,
    count: u64,
    hot_pct: u64,
    next: u64,
    rng: SplitMix64,
}

impl KeyGen {
    pub fn new(shaping: &Shaping, seed: u64, producer: u32) -> KeyGen {
        let count = shaping.key_count.max(1) as u64;
        KeyGen {
            mode: shaping.keys,
            count,
            hot_pct: shaping.hot_key_pct.min(100) as u64,
            // Producers start at different points of the round-robin, so together they cover
            // the set evenly from the first message.
            next: (producer as u64).wrapping_mul(7919) % count,
            rng: SplitMix64::new(seed ^ 0x6b65_7973_0000_0000 ^ ((producer as u64) << 16)),
        }
    }

    /// The key of the next message; None for null keys.
    pub fn next_key(&mut self) -> Option<Key> {
        match self.mode {
            KeyMode::None => None,
            KeyMode::RoundRobin => {
                let k = self.next;
                self.next = (self.next + 1) % self.count;
                Some(Key::Set(k as u32))
            }
            KeyMode::Random => Some(Key::Set(self.rng.below(self.count) as u32)),
            KeyMode::Hot => {
                if self.rng.below(100) < self.hot_pct {
                    Some(Key::Hot)
                } else {
                    Some(Key::Set(self.rng.below(self.count) as u32))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gen(keys: KeyMode, count: u32, hot: u32) -> KeyGen {
        let s = Shaping {
            keys,
            key_count: count,
            hot_key_pct: hot,
            ..Shaping::default()
        };
        KeyGen::new(&s, 42, 0)
    }

    #[test]
    fn modes_give_their_distributions() {
        assert_eq!(gen(KeyMode::None, 10, 0).next_key(), None);
        let mut rr = gen(KeyMode::RoundRobin, 3, 0);
        let seq: Vec<_> = (0..6).map(|_| rr.next_key()).collect();
        assert_eq!(seq[0], seq[3]);
        assert_ne!(seq[0], seq[1]);
        let mut hot = gen(KeyMode::Hot, 100, 80);
        let n_hot = (0..10_000)
            .filter(|_| hot.next_key() == Some(Key::Hot))
            .count();
        assert!((7_700..8_300).contains(&n_hot), "{n_hot}");
        let mut rnd = gen(KeyMode::Random, 4, 0);
        let mut seen = [0u32; 4];
        for _ in 0..4000 {
            if let Some(Key::Set(k)) = rnd.next_key() {
                seen[k as usize] += 1;
            }
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
        // Same seed, same stream.
        let a: Vec<_> = {
            let mut g = gen(KeyMode::Random, 1000, 0);
            (0..50).map(|_| g.next_key()).collect()
        };
        let b: Vec<_> = {
            let mut g = gen(KeyMode::Random, 1000, 0);
            (0..50).map(|_| g.next_key()).collect()
        };
        assert_eq!(a, b);
        let mut out = Vec::new();
        Key::Set(12).write(&mut out);
        assert_eq!(out, b"k-12");
        Key::Hot.write(&mut out);
        assert_eq!(out, b"k-hot");
    }
}

/// The `partition_balance` object of the report: how the measured, acknowledged messages spread
/// over the partitions (the delivery report names the partition librdkafka chose).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PartitionBalance {
    /// `"acked"`: measured messages counted by the partition of their delivery report.
    pub view: &'static str,
    /// Messages per partition, index = partition.
    pub per_partition: Vec<u64>,
    /// Partitions that got at least one message.
    pub partitions_used: u32,
    /// The partition with the most messages (the first, on a tie).
    pub max_partition: i32,
    pub max_share_pct: f64,
    /// The largest partition's count over the mean per partition (1.0 = perfectly even).
    pub max_over_mean: f64,
}

/// None when nothing was acknowledged.
pub fn partition_balance(acked: &[u64], partitions: i32) -> Option<PartitionBalance> {
    let mut per: Vec<u64> = acked.to_vec();
    let n = (partitions.max(1) as usize).max(per.len());
    per.resize(n, 0);
    let total: u64 = per.iter().sum();
    if total == 0 {
        return None;
    }
    let (max_partition, &max) =
        per.iter().enumerate().fold(
            (0, &0u64),
            |best, (i, c)| if *c > *best.1 { (i, c) } else { best },
        );
    let mean = total as f64 / n as f64;
    Some(PartitionBalance {
        view: "acked",
        partitions_used: per.iter().filter(|&&c| c > 0).count() as u32,
        max_partition: max_partition as i32,
        max_share_pct: max as f64 / total as f64 * 100.0,
        max_over_mean: max as f64 / mean,
        per_partition: per,
    })
}

#[cfg(test)]
mod balance_tests {
    use super::*;

    #[test]
    fn balance_shows_the_hot_partition() {
        let b = partition_balance(&[10, 80, 10], 4).expect("some");
        assert_eq!(b.per_partition, vec![10, 80, 10, 0]);
        assert_eq!(b.partitions_used, 3);
        assert_eq!(b.max_partition, 1);
        assert!((b.max_share_pct - 80.0).abs() < 1e-9);
        assert!((b.max_over_mean - 3.2).abs() < 1e-9);
        assert!(partition_balance(&[], 4).is_none());
        let even = partition_balance(&[5, 5], 2).expect("some");
        assert_eq!((even.max_partition, even.max_over_mean), (0, 1.0));
    }
}
