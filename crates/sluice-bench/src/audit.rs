//! The loss / duplicate / reorder audit. Each producer numbers its messages densely from 0; a
//! bitset per producer remembers which numbers were acknowledged (producer side) and which
//! arrived (per consumer thread). Sets grow with the highest number seen and are capped at
//! `limits::AUDIT_MAX_SEQ_PER_PRODUCER` bits, beyond which messages are counted as unaudited.
//! Reordering is judged per partition and producer: a number lower than the last one seen
//! from that producer on that partition.
//!
//! An acknowledged record that never arrived counts against the broker's contract only when
//! the producer asked for it: with acks=all (`lost_acked`). With acks=1 the leader alone
//! confirmed the write, and Kafka permits losing it when that leader fails before a follower
//! copied it; with acks=0 nothing was confirmed at all. Those count as `lost_unsynced`,
//! reported apart and not judged as a broker bug by default.

use std::collections::HashMap;

use crate::limits;

/// A growable bitset over sequence numbers.
#[derive(Debug, Clone, Default)]
pub struct SeqSet {
    words: Vec<u64>,
    ones: u64,
}

impl SeqSet {
    /// Sets `seq`; returns Some(true) when it was already set, None when `seq` is past the cap.
    pub fn insert(&mut self, seq: u64) -> Option<bool> {
        if seq >= limits::AUDIT_MAX_SEQ_PER_PRODUCER {
            return None;
        }
        let (w, bit) = ((seq / 64) as usize, 1u64 << (seq % 64));
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        let was = self.words[w] & bit != 0;
        if !was {
            self.words[w] |= bit;
            self.ones += 1;
        }
        Some(was)
    }

    pub fn contains(&self, seq: u64) -> bool {
        let w = (seq / 64) as usize;
        w < self.words.len() && self.words[w] & (1u64 << (seq % 64)) != 0
    }

    pub fn len(&self) -> u64 {
        self.ones
    }

    pub fn is_empty(&self) -> bool {
        self.ones == 0
    }

    /// Adds every member of `other`; returns how many were already present (the overlap).
    pub fn union_with(&mut self, other: &SeqSet) -> u64 {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        let mut overlap = 0u64;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            overlap += (*a & *b).count_ones() as u64;
            *a |= *b;
        }
        self.ones = self.words.iter().map(|w| w.count_ones() as u64).sum();
        overlap
    }

    /// Calls `f` with every member of `self` that is not in `other`, in order.
    pub fn for_each_missing_from(&self, other: &SeqSet, mut f: impl FnMut(u64)) {
        for (i, a) in self.words.iter().enumerate() {
            let mut m = a & !other.words.get(i).copied().unwrap_or(0);
            while m != 0 {
                let bit = m.trailing_zeros() as u64;
                f(i as u64 * 64 + bit);
                m &= m - 1;
            }
        }
    }

    /// Members of `self` that are not in `other`.
    pub fn count_missing_from(&self, other: &SeqSet) -> u64 {
        self.words
            .iter()
            .enumerate()
            .map(|(i, a)| (a & !other.words.get(i).copied().unwrap_or(0)).count_ones() as u64)
            .sum()
    }
}

/// What one consumer thread saw of bench-phase messages.
#[derive(Debug, Clone, Default)]
pub struct ConsumerAudit {
    /// Received sequence numbers, indexed by producer id.
    pub received: Vec<SeqSet>,
    pub duplicates: u64,
    pub reordered: u64,
    pub unaudited: u64,
    /// Last sequence seen per (partition, producer). A map, not a table, so memory follows
    /// the pairs this consumer actually sees (its partitions × producers), never the worst case.
    last_seq: HashMap<(i32, u32), u64>,
    producers: usize,
}

impl ConsumerAudit {
    pub fn new(producers: usize) -> Self {
        ConsumerAudit {
            received: vec![SeqSet::default(); producers],
            producers,
            ..Default::default()
        }
    }

    /// Notes one message; returns true when it was a duplicate.
    pub fn note(&mut self, partition: i32, producer: u32, seq: u64) -> bool {
        let p = producer as usize;
        if p >= self.producers || partition < 0 {
            self.unaudited += 1;
            return false;
        }
        let dup = match self.received[p].insert(seq) {
            Some(was) => was,
            None => {
                self.unaudited += 1;
                false
            }
        };
        if dup {
            self.duplicates += 1;
            return true;
        }
        match self.last_seq.get_mut(&(partition, producer)) {
            Some(last) if seq < *last => self.reordered += 1,
            Some(last) => *last = seq,
            None => {
                self.last_seq.insert((partition, producer), seq);
            }
        }
        false
    }
}

/// The audit verdict over the bench window.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct AuditResult {
    /// Messages handed to the client (send() accepted) in the measured window.
    pub produced: u64,
    /// Distinct measured-window messages received.
    pub received: u64,
    /// produced - received: never arrived (includes ones whose produce failed).
    pub lost: u64,
    /// Acknowledged with acks=all but never received: lost after the broker promised to keep
    /// them (0 with acks=1 or 0).
    pub lost_acked: u64,
    /// Acknowledged with acks=1 (by the leader alone) or sent with acks=0, and never
    /// received: a loss the broker's contract permits when a leader fails (0 with acks=all).
    pub lost_unsynced: u64,
    /// Received more than once (each extra copy counts once).
    pub duplicates: u64,
    /// Arrived on a partition after a later message of the same producer.
    pub reordered: u64,
    /// Past the audit's tracking cap or otherwise not attributable.
    pub unaudited: u64,
}

/// Joins producer and consumer views. `produced[p]` is the number of measured-window messages
/// producer `p` sent, with sequence numbers `first_seq[p]..first_seq[p] + produced[p]`.
/// Calls `f(producer, seq)` for every acknowledged message no consumer received (the
/// `lost_acked` of `reconcile`, one by one), so the loss can be placed in time.
pub fn for_each_lost_acked(
    acked: &[SeqSet],
    consumers: &[ConsumerAudit],
    mut f: impl FnMut(usize, u64),
) {
    for (p, a) in acked.iter().enumerate() {
        let mut received = SeqSet::default();
        for c in consumers {
            if let Some(set) = c.received.get(p) {
                received.union_with(set);
            }
        }
        a.for_each_missing_from(&received, |seq| f(p, seq));
    }
}

/// The verdict; `acks_all` says which figure an acknowledged-but-lost record counts in
/// (`lost_acked` for acks=all, `lost_unsynced` otherwise).
pub fn reconcile(
    produced: &[u64],
    acked: &[SeqSet],
    consumers: &[ConsumerAudit],
    acks_all: bool,
) -> AuditResult {
    let mut r = AuditResult::default();
    let producers = produced.len();
    let mut received = vec![SeqSet::default(); producers];
    for c in consumers {
        r.duplicates += c.duplicates;
        r.reordered += c.reordered;
        r.unaudited += c.unaudited;
        for (p, set) in c.received.iter().enumerate().take(producers) {
            // The same message seen by two consumer threads is also a duplicate.
            r.duplicates += received[p].union_with(set);
        }
    }
    for p in 0..producers {
        r.produced += produced[p];
        r.received += received[p].len();
        if let Some(a) = acked.get(p) {
            let missing = a.count_missing_from(&received[p]);
            if acks_all {
                r.lost_acked += missing;
            } else {
                r.lost_unsynced += missing;
            }
        }
    }
    r.lost = r.produced.saturating_sub(r.received);
    debug_assert!(r.lost_acked + r.lost_unsynced <= r.lost || r.unaudited > 0);
    debug_assert!(r.lost_acked == 0 || r.lost_unsynced == 0);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_acked_messages_are_listed_one_by_one() {
        let mut acked = vec![SeqSet::default(), SeqSet::default()];
        for s in [1, 2, 3, 64, 65, 200] {
            acked[0].insert(s);
        }
        acked[1].insert(5);
        let mut a = ConsumerAudit::new(2);
        let mut b = ConsumerAudit::new(2);
        a.note(0, 0, 2);
        b.note(1, 0, 65);
        b.note(1, 1, 5);
        let mut lost = Vec::new();
        for_each_lost_acked(&acked, &[a.clone(), b.clone()], |p, seq| {
            lost.push((p, seq))
        });
        assert_eq!(lost, vec![(0, 1), (0, 3), (0, 64), (0, 200)]);
        let r = reconcile(&[6, 1], &acked, &[a.clone(), b.clone()], true);
        assert_eq!(r.lost_acked, lost.len() as u64);
        assert_eq!(r.lost_unsynced, 0);
        // The same loss under acks=1: permitted by the contract, counted apart.
        let r1 = reconcile(&[6, 1], &acked, &[a, b], false);
        assert_eq!((r1.lost_acked, r1.lost_unsynced), (0, lost.len() as u64));
        assert_eq!(r1.lost, r.lost);
    }

    #[test]
    fn finds_loss_duplicates_and_reordering() {
        let mut acked = vec![SeqSet::default(), SeqSet::default()];
        for s in 0..10 {
            acked[0].insert(s);
            acked[1].insert(s);
        }
        let mut a = ConsumerAudit::new(2);
        let mut b = ConsumerAudit::new(2);
        for s in 0..10 {
            if s != 4 {
                a.note(0, 0, s); // producer 0 loses seq 4
            }
        }
        assert!(a.note(0, 0, 3)); // duplicate
        for s in [0, 1, 3, 2, 4, 5, 6, 7, 8, 9] {
            b.note(1, 1, s); // 2 after 3: one reorder
        }
        b.note(1, 0, 9); // producer 0 seq 9 again, on another consumer
        let r = reconcile(&[10, 10], &acked, &[a, b], true);
        assert_eq!(r.produced, 20);
        assert_eq!(r.received, 19);
        assert_eq!(r.lost, 1);
        assert_eq!(r.lost_acked, 1);
        assert_eq!(r.duplicates, 2);
        assert_eq!(r.reordered, 1);
        assert_eq!(r.produced, r.received + r.lost);
    }

    #[test]
    fn seqset_caps_and_counts() {
        let mut s = SeqSet::default();
        assert_eq!(s.insert(5), Some(false));
        assert_eq!(s.insert(5), Some(true));
        assert_eq!(s.insert(limits::AUDIT_MAX_SEQ_PER_PRODUCER), None);
        assert!(s.contains(5) && !s.contains(6));
        assert_eq!(s.len(), 1);
    }
}
