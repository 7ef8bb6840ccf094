//! Attribution by send time: every delivery report (ack or failure) is counted in the
//! 1-second slot of load time in which its record was *sent*, next to the time series'
//! completion-time figures. A broker that dies at 10 s makes the records sent at 10 s fail or
//! stall; by completion time those failures arrive all at once when the client gives up
//! (`message.timeout.ms` later) and the stalled acks land in whatever second they finally
//! come, while by send time they sit in the seconds the outage hit. Both views are kept:
//! `acked_msg_s`, `ack_p99_ms`, `ack_errors` of an interval are by completion; `sent_acked`,
//! `sent_failed`, `sent_ack_p99_ms` by send time (filled in when the run ends, since the
//! last reports of a slot may arrive much later).
//!
//! Guarantees: memory is bounded (`limits::MAX_SENT_SLOTS` slots per producer, each a fixed
//! 1 KiB log-bucket histogram; a record sent past the last slot counts in it); a slot's p99 is
//! an upper bound within one bucket (a factor 2^(1/8), about 9 %).

use crate::limits;

/// Log buckets: bucket b holds latencies up to 2^(b/8) µs; 256 of them reach about 70 min.
const BUCKETS: usize = 256;

/// Delivery reports of records sent in one 1-second slot.
#[derive(Debug, Clone)]
pub struct SentSlot {
    pub acked: u64,
    pub failed: u64,
    /// Acknowledged records no consumer received, and records received more than once.
    pub lost_acked: u64,
    pub duplicates: u64,
    hist: Box<[u32; BUCKETS]>,
}

impl Default for SentSlot {
    fn default() -> Self {
        SentSlot {
            acked: 0,
            failed: 0,
            lost_acked: 0,
            duplicates: 0,
            hist: Box::new([0; BUCKETS]),
        }
    }
}

fn bucket_of(us: u64) -> usize {
    if us <= 1 {
        return 0;
    }
    // 8 * log2(us), rounded up, so the bucket's bound is >= the value.
    let b = (8.0 * (us as f64).log2()).ceil() as usize;
    b.min(BUCKETS - 1)
}

fn bound_ms(b: usize) -> f64 {
    2f64.powf(b as f64 / 8.0) / 1000.0
}

impl SentSlot {
    fn merge(&mut self, o: &SentSlot) {
        self.acked += o.acked;
        self.failed += o.failed;
        self.lost_acked += o.lost_acked;
        self.duplicates += o.duplicates;
        for (a, b) in self.hist.iter_mut().zip(o.hist.iter()) {
            *a = a.saturating_add(*b);
        }
    }

    /// The ack latency at percentile `p` (upper bucket bound), None without acks.
    pub fn percentile_ms(&self, p: f64) -> Option<f64> {
        let total: u64 = self.hist.iter().map(|&n| n as u64).sum();
        if total == 0 {
            return None;
        }
        let want = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0u64;
        for (b, &n) in self.hist.iter().enumerate() {
            seen += n as u64;
            if seen >= want {
                return Some(bound_ms(b));
            }
        }
        Some(bound_ms(BUCKETS - 1))
    }
}

/// One producer's slots (index: whole seconds of load time at send).
#[derive(Debug, Clone, Default)]
pub struct SentSlots {
    slots: Vec<SentSlot>,
}

impl SentSlots {
    fn slot(&mut self, sent_since_load_ns: u64) -> &mut SentSlot {
        let i = ((sent_since_load_ns / 1_000_000_000) as usize).min(limits::MAX_SENT_SLOTS - 1);
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, SentSlot::default);
        }
        &mut self.slots[i]
    }

    pub fn acked(&mut self, sent_since_load_ns: u64, ack_ns: u64) {
        let s = self.slot(sent_since_load_ns);
        s.acked += 1;
        let b = bucket_of(ack_ns / 1000);
        s.hist[b] = s.hist[b].saturating_add(1);
    }

    pub fn failed(&mut self, sent_since_load_ns: u64) {
        self.slot(sent_since_load_ns).failed += 1;
    }

    pub fn duplicate(&mut self, sent_since_load_ns: u64) {
        self.slot(sent_since_load_ns).duplicates += 1;
    }

    pub fn lost_acked(&mut self, sent_since_load_ns: u64) {
        self.slot(sent_since_load_ns).lost_acked += 1;
    }

    pub fn merge(&mut self, o: &SentSlots) {
        if self.slots.len() < o.slots.len() {
            self.slots.resize_with(o.slots.len(), SentSlot::default);
        }
        for (a, b) in self.slots.iter_mut().zip(&o.slots) {
            a.merge(b);
        }
    }

    /// The slot of second `i` (None past the last record sent).
    pub fn get(&self, i: usize) -> Option<&SentSlot> {
        self.slots.get(i)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// Where each producer's sequence numbers fall in time: the first sequence number sent in each
/// second of load time (one mark per second at most), so a message known only by its number
/// (an acknowledged one that never arrived) can be placed in the second it was sent.
#[derive(Debug, Clone, Default)]
pub struct SeqMarks {
    marks: Vec<(u64, u64)>,
}

impl SeqMarks {
    /// Notes that `seq` was sent at `sent_since_load_ns` (sequence numbers only grow).
    pub fn note(&mut self, seq: u64, sent_since_load_ns: u64) {
        let slot = sent_since_load_ns / 1_000_000_000;
        if self.marks.last().is_none_or(|m| m.1 < slot) && self.marks.len() < limits::MAX_SENT_SLOTS
        {
            debug_assert!(self.marks.last().is_none_or(|m| m.0 <= seq));
            self.marks.push((seq, slot));
        }
    }

    /// The send time (start of its second, since load start) of `seq`; None before any mark.
    pub fn sent_ns_of(&self, seq: u64) -> Option<u64> {
        let i = self.marks.partition_point(|m| m.0 <= seq);
        i.checked_sub(1).map(|i| self.marks[i].1 * 1_000_000_000)
    }
}

/// Fills each interval's by-send-time figures from the slots whose second ends inside it
/// (interval k normally covers slot k exactly; a longer interval gathers several slots).
/// The last interval takes every slot left: a record sent after the last sample (the load
/// stops a little after it) still counts, so the series sums to the run's counts.
pub fn fill(intervals: &mut [crate::vocab::IntervalSample], slots: &SentSlots) {
    let mut next = 0usize;
    let last = intervals.len().saturating_sub(1);
    for (k, iv) in intervals.iter_mut().enumerate() {
        let mut acc = SentSlot::default();
        let mut any = false;
        // Slot i covers [i, i+1) s: it belongs to the interval its end falls in.
        while next < slots.len() && (k == last || (next as f64 + 1.0) <= iv.elapsed_s + 0.5) {
            if let Some(s) = slots.get(next) {
                acc.merge(s);
                any = true;
            }
            next += 1;
        }
        iv.sent_acked = Some(acc.acked);
        iv.sent_failed = Some(acc.failed);
        iv.sent_lost_acked = Some(acc.lost_acked);
        iv.sent_duplicates = Some(acc.duplicates);
        iv.sent_ack_p99_ms = if any { acc.percentile_ms(99.0) } else { None };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::IntervalSample;

    const S: u64 = 1_000_000_000;

    /// Interval samples taken at 1, 2, ..., `n` seconds.
    fn samples_every_second(n: u32) -> Vec<IntervalSample> {
        (1..=n)
            .map(|t| IntervalSample {
                elapsed_s: f64::from(t),
                ..IntervalSample::default()
            })
            .collect()
    }

    #[test]
    fn late_failures_and_acks_count_where_they_were_sent() {
        let mut a = SentSlots::default();
        let mut b = SentSlots::default();
        // Second 0: 2 fast acks. Second 1: 1 ack after 20 s (a stall), 3 failures reported
        // much later. Second 2: nothing sent. Second 3: 1 ack.
        a.acked(S / 2, 1_000_000);
        b.acked(S / 3, 2_000_000);
        a.acked(S + 1, 20 * S);
        b.failed(S + 5);
        b.failed(S + 6);
        a.failed(2 * S - 1);
        a.acked(3 * S + 1, 1_000_000);
        a.merge(&b);
        let mut iv: Vec<IntervalSample> = (1..=4)
            .map(|t| IntervalSample {
                elapsed_s: t as f64,
                interval_s: 1.0,
                ..IntervalSample::default()
            })
            .collect();
        fill(&mut iv, &a);
        let got: Vec<(Option<u64>, Option<u64>)> =
            iv.iter().map(|i| (i.sent_acked, i.sent_failed)).collect();
        assert_eq!(
            got,
            vec![
                (Some(2), Some(0)),
                (Some(1), Some(3)),
                (Some(0), Some(0)),
                (Some(1), Some(0))
            ]
        );
        // The stalled ack's latency is in second 1's p99, within one bucket (9 %).
        let p = iv[1].sent_ack_p99_ms.unwrap();
        assert!((20_000.0..=20_000.0 * 1.1).contains(&p), "{p}");
        let p = iv[0].sent_ack_p99_ms.unwrap();
        assert!((2.0..=2.2).contains(&p), "{p}");
        assert_eq!(iv[2].sent_ack_p99_ms, None);
    }

    #[test]
    fn records_sent_after_the_last_sample_count_in_the_last_interval() {
        let mut s = SentSlots::default();
        for k in 0..4 {
            s.acked(k * S + 1, 1000);
        }
        // Samples at 1 s and 2 s; records sent at 2.x s and 3.x s, before the load stopped.
        let mut iv = samples_every_second(2);
        fill(&mut iv, &s);
        assert_eq!(iv[0].sent_acked, Some(1));
        assert_eq!(iv[1].sent_acked, Some(3), "every record is in the series");
    }

    #[test]
    fn a_long_interval_gathers_its_slots_and_slots_are_bounded() {
        let mut s = SentSlots::default();
        for k in 0..4 {
            s.acked(k * S + 1, 1000);
        }
        let mut iv = vec![
            IntervalSample {
                elapsed_s: 1.0,
                ..IntervalSample::default()
            },
            // A sampler that fell behind: one 3-second interval.
            IntervalSample {
                elapsed_s: 4.0,
                ..IntervalSample::default()
            },
        ];
        fill(&mut iv, &s);
        assert_eq!(iv[0].sent_acked, Some(1));
        assert_eq!(iv[1].sent_acked, Some(3));
        s.failed(u64::MAX);
        assert_eq!(s.len(), limits::MAX_SENT_SLOTS);
    }

    #[test]
    fn lost_and_duplicated_records_are_placed_by_their_sequence_numbers() {
        let mut m = SeqMarks::default();
        assert_eq!(m.sent_ns_of(0), None);
        // 10 records a second: seq 0..9 in second 0, 10..19 in second 1, a gap, 20.. in 3.
        for seq in 0..30u64 {
            let t = if seq < 20 { seq / 10 } else { 3 };
            m.note(seq, t * S + seq * 1000);
        }
        assert_eq!(m.sent_ns_of(0), Some(0));
        assert_eq!(m.sent_ns_of(9), Some(0));
        assert_eq!(m.sent_ns_of(10), Some(S));
        assert_eq!(m.sent_ns_of(25), Some(3 * S));
        let mut s = SentSlots::default();
        s.lost_acked(m.sent_ns_of(15).unwrap());
        s.duplicate(3 * S + 7);
        let mut iv = samples_every_second(4);
        fill(&mut iv, &s);
        let got: Vec<(Option<u64>, Option<u64>)> = iv
            .iter()
            .map(|i| (i.sent_lost_acked, i.sent_duplicates))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(0), Some(0)),
                (Some(1), Some(0)),
                (Some(0), Some(0)),
                (Some(0), Some(1))
            ]
        );
    }
}
