//! The run's topics and the three lag views the sampler reads each second.
//!
//! - `TopicSet`: the fresh topics of a run (all with the same partition count) and a flat
//!   topic-partition index `topic * partitions + partition`, bounded by
//!   `limits::MAX_TOPIC_PARTITIONS`, that every per-partition table is sized by.
//! - Client view: high watermark minus the bench consumer's position (its next offset).
//! - Broker view: high watermark minus the group's committed offset, as an outside lag monitor
//!   (SSP, Burrow, `kafka-consumer-groups`) sees it. Consumers commit in the background every
//!   `commit_interval_ms`, so this view trails the client view by up to one interval's worth of
//!   messages; a missing committed offset counts as 0 (SSP's rule).
//! - Time lag: the age of the oldest unconsumed message. Delivery reports give each message's
//!   offset; `AckCheckpoints` keeps, per topic-partition, (offset, send time) checkpoints at
//!   least `limits::TIME_LAG_CHECKPOINT_SPACING` of send time apart, and the age is taken from
//!   the newest checkpoint at or before the consumer position. It can overstate the age by at
//!   most the checkpoint spacing (more only after thinning, see below) and never understates it.
//!   A report for an offset below every checkpoint is always kept, whatever the spacing: with
//!   several producers on one partition the first report to arrive need not be for the
//!   partition's first offset, and without the lower one a position there has no checkpoint.
//!
//! Guarantees: every broker query has a timeout, a failed query yields "not measured" (None)
//! rather than a guess, and checkpoint memory is bounded by `limits::TIME_LAG_CHECKPOINTS_TOTAL`
//! (a full partition table is thinned to every other checkpoint, coarsening its resolution).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use parking_lot::Mutex;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};

use crate::limits;

/// The fresh topics of one run.
#[derive(Debug, Clone)]
pub struct TopicSet {
    pub names: Vec<String>,
    pub partitions: i32,
    index: HashMap<String, usize>,
}

impl TopicSet {
    /// `base` for a single topic (the name earlier versions used), `base-0 .. base-(n-1)` else.
    pub fn new(base: &str, topics: u32, partitions: i32) -> TopicSet {
        let names: Vec<String> = if topics <= 1 {
            vec![base.to_string()]
        } else {
            (0..topics).map(|i| format!("{base}-{i}")).collect()
        };
        let index = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        TopicSet {
            names,
            partitions: partitions.max(1),
            index,
        }
    }

    /// Topic-partitions in all topics.
    pub fn len(&self) -> usize {
        self.names.len() * self.partitions as usize
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The flat index of (topic name, partition), None for a topic or partition not ours.
    pub fn flat(&self, topic: &str, partition: i32) -> Option<usize> {
        if partition < 0 || partition >= self.partitions {
            return None;
        }
        let t = if self.names.len() == 1 {
            (self.names[0] == topic).then_some(0)?
        } else {
            *self.index.get(topic)?
        };
        Some(t * self.partitions as usize + partition as usize)
    }

    /// (topic name, partition) of a flat index.
    pub fn split(&self, flat: usize) -> (&str, i32) {
        let p = self.partitions as usize;
        (&self.names[flat / p], (flat % p) as i32)
    }

    /// A list of the given flat indexes, each with `offset`.
    pub fn tpl(
        &self,
        flats: impl IntoIterator<Item = usize>,
        offset: Offset,
    ) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        for f in flats {
            let (t, p) = self.split(f);
            // Only fails for an offset librdkafka cannot represent, which `offset` never is.
            let _ = tpl.add_partition_offset(t, p, offset);
        }
        tpl
    }
}

/// The destination of producer `producer`'s message `seq`: (topic index, round-robin
/// partition). Topics rotate with the message number; with several topics the round-robin
/// partition advances once per full rotation, so every (topic, partition) pair is used even
/// when the topic and partition counts share a factor. One topic: partition (producer + seq) % P.
pub fn destination(producer: u32, seq: u64, topics: u32, partitions: i32) -> (usize, i32) {
    let n = topics.max(1) as u64;
    let k = producer as u64 + seq;
    (
        (k % n) as usize,
        ((k / n) % partitions.max(1) as u64) as i32,
    )
}

/// High watermarks of every topic-partition, in flat order: one ListOffsets (latest) request
/// per broker for all of them. None when the query fails or misses a partition.
pub fn high_watermarks<C: ConsumerContext>(
    probe: &BaseConsumer<C>,
    topics: &TopicSet,
) -> Option<Vec<i64>> {
    if topics.len() <= limits::WATERMARK_SINGLE_QUERY_MAX {
        // Few partitions: per-partition watermark queries (librdkafka caches nothing here).
        let mut v = Vec::with_capacity(topics.len());
        for f in 0..topics.len() {
            let (t, p) = topics.split(f);
            let (_low, high) = probe
                .fetch_watermarks(t, p, limits::LAG_QUERY_TIMEOUT)
                .ok()?;
            v.push(high);
        }
        return Some(v);
    }
    // Timestamp -1 in ListOffsets means "latest": the high watermark of every partition at once.
    let tpl = topics.tpl(0..topics.len(), Offset::End);
    let res = probe
        .offsets_for_times(tpl, limits::LAG_BATCH_QUERY_TIMEOUT)
        .ok()?;
    let mut v = vec![-1i64; topics.len()];
    for e in res.elements() {
        if e.error().is_err() {
            return None;
        }
        let f = topics.flat(e.topic(), e.partition())?;
        v[f] = match e.offset() {
            Offset::Offset(o) => o,
            _ => return None,
        };
    }
    v.iter().all(|h| *h >= 0).then_some(v)
}

/// Committed offsets of the bench group for every topic-partition, in flat order (an
/// OffsetFetch through a client that carries the group id but never joins or commits). A
/// partition without a committed offset reads 0. None when the fetch fails.
pub fn committed_offsets<C: ConsumerContext>(
    watcher: &BaseConsumer<C>,
    topics: &TopicSet,
) -> Option<Vec<i64>> {
    let tpl = topics.tpl(0..topics.len(), Offset::Invalid);
    let res = watcher
        .committed_offsets(tpl, limits::COMMITTED_QUERY_TIMEOUT)
        .ok()?;
    let mut v = vec![0i64; topics.len()];
    for e in res.elements() {
        if let (Some(f), Offset::Offset(o)) = (topics.flat(e.topic(), e.partition()), e.offset()) {
            v[f] = o.max(0);
        }
    }
    Some(v)
}

/// Per-partition lag figures: the total, the largest partition's, and every partition's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LagFigures {
    pub total: i64,
    pub max: i64,
    pub per_partition: Vec<i64>,
}

/// max(0, high watermark − offset) per partition, summed.
pub fn lag_against(high: &[i64], offsets: impl Iterator<Item = i64>) -> LagFigures {
    let mut f = LagFigures {
        per_partition: Vec::with_capacity(high.len()),
        ..Default::default()
    };
    for (h, o) in high.iter().zip(offsets) {
        let lag = (h - o).max(0);
        f.total += lag;
        f.max = f.max.max(lag);
        f.per_partition.push(lag);
    }
    f
}

/// Reads a position table (one atomic per flat topic-partition).
pub fn positions(table: &[AtomicI64]) -> impl Iterator<Item = i64> + '_ {
    table.iter().map(|a| a.load(Ordering::Relaxed))
}

/// Send-time checkpoints by offset, per topic-partition, fed by delivery reports.
#[derive(Debug)]
pub struct AckCheckpoints {
    parts: Vec<Checkpoints>,
    per_partition_cap: usize,
    spacing_ns: u64,
}

/// One topic-partition's checkpoints: offset → send time (clock ns).
#[derive(Debug)]
struct Checkpoints {
    /// Send time of the newest checkpoint added (`NONE_YET` before the first). Spacing is judged
    /// against it, not against the map's last key, because reports of several producers
    /// interleave; being atomic, most delivery reports are turned away without the lock.
    last_ns: AtomicU64,
    /// The lowest offset in `map` (`i64::MAX` while empty): a report below it extends the
    /// coverage down and is kept regardless of spacing. Written under the lock.
    low_offset: AtomicI64,
    map: Mutex<BTreeMap<i64, u64>>,
}

const NONE_YET: u64 = u64::MAX;

impl AckCheckpoints {
    pub fn new(topic_partitions: usize) -> AckCheckpoints {
        let cap = (limits::TIME_LAG_CHECKPOINTS_TOTAL / topic_partitions.max(1)).clamp(
            limits::TIME_LAG_CHECKPOINTS_MIN_PER_PARTITION,
            limits::TIME_LAG_CHECKPOINTS_MAX_PER_PARTITION,
        );
        AckCheckpoints {
            parts: (0..topic_partitions)
                .map(|_| Checkpoints {
                    last_ns: AtomicU64::new(NONE_YET),
                    low_offset: AtomicI64::new(i64::MAX),
                    map: Mutex::new(BTreeMap::new()),
                })
                .collect(),
            per_partition_cap: cap,
            spacing_ns: limits::TIME_LAG_CHECKPOINT_SPACING.as_nanos() as u64,
        }
    }

    /// A successful delivery report: message at `offset` of topic-partition `flat` was sent
    /// at `sent_ns`. Reports without an offset (acks=0) are ignored.
    pub fn note(&self, flat: usize, offset: i64, sent_ns: u64) {
        let Some(part) = self.parts.get(flat) else {
            return;
        };
        let too_soon =
            |last: u64| last != NONE_YET && sent_ns < last.saturating_add(self.spacing_ns);
        let wanted = |part: &Checkpoints| {
            offset < part.low_offset.load(Ordering::Relaxed)
                || !too_soon(part.last_ns.load(Ordering::Relaxed))
        };
        if offset < 0 || !wanted(part) {
            return;
        }
        let mut map = part.map.lock();
        if !wanted(part) {
            return;
        }
        let last = part.last_ns.load(Ordering::Relaxed);
        if last == NONE_YET || sent_ns > last {
            part.last_ns.store(sent_ns, Ordering::Relaxed);
        }
        if offset < part.low_offset.load(Ordering::Relaxed) {
            part.low_offset.store(offset, Ordering::Relaxed);
        }
        map.insert(offset, sent_ns);
        if map.len() > self.per_partition_cap {
            // Thin out: keep every other checkpoint (the oldest one always stays).
            let kept: BTreeMap<i64, u64> = map
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == 0)
                .map(|(_, (k, v))| (*k, *v))
                .collect();
            *map = kept;
        }
    }

    /// Age of the oldest unconsumed message of `flat`, in ns: 0 when the consumer position
    /// has reached the high watermark; None when the partition is behind but no checkpoint at
    /// or before the position exists (no delivery report with an offset, e.g. acks=0).
    /// Checkpoints older than the one used are dropped: positions only move forward.
    pub fn age_ns(&self, flat: usize, position: i64, high: i64, now_ns: u64) -> Option<u64> {
        if position >= high {
            return Some(0);
        }
        let part = self.parts.get(flat)?;
        let mut map = part.map.lock();
        let (&off, &sent) = map.range(..=position).next_back()?;
        let newer = map.split_off(&off);
        *map = newer;
        part.low_offset.store(off, Ordering::Relaxed);
        Some(now_ns.saturating_sub(sent))
    }

    /// The largest age over all topic-partitions, in ms (see `age_ns`); None when any
    /// partition that is behind has no usable checkpoint.
    pub fn max_age_ms(&self, high: &[i64], positions: &[i64], now_ns: u64) -> Option<f64> {
        let mut max = 0u64;
        for (f, (h, p)) in high.iter().zip(positions).enumerate() {
            max = max.max(self.age_ns(f, *p, *h, now_ns)?);
        }
        Some(max as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_set_flat_index_round_trips() {
        let one = TopicSet::new("t", 1, 3);
        assert_eq!(one.names, vec!["t".to_string()]);
        assert_eq!(one.flat("t", 2), Some(2));
        assert_eq!(one.flat("t", 3), None);
        assert_eq!(one.flat("u", 0), None);
        let many = TopicSet::new("t", 3, 4);
        assert_eq!(many.names, vec!["t-0", "t-1", "t-2"]);
        assert_eq!(many.len(), 12);
        for f in 0..many.len() {
            let (t, p) = many.split(f);
            assert_eq!(many.flat(t, p), Some(f));
        }
        assert_eq!(many.tpl(0..12, Offset::End).count(), 12);
    }

    #[test]
    fn destinations_cover_every_topic_partition() {
        // 3 topics x 3 partitions: the naive (k % 3, k % 3) would use only the diagonal.
        let mut seen = std::collections::HashSet::new();
        for seq in 0..9 {
            seen.insert(destination(0, seq, 3, 3));
        }
        assert_eq!(seen.len(), 9);
        // One topic keeps the old rule.
        assert_eq!(destination(2, 5, 1, 4), (0, 3));
    }

    #[test]
    fn lag_is_clamped_and_summed() {
        let f = lag_against(&[10, 5, 0], [4, 7, 0].into_iter());
        assert_eq!(
            f,
            LagFigures {
                total: 6,
                max: 6,
                per_partition: vec![6, 0, 0]
            }
        );
    }

    #[test]
    fn time_lag_uses_the_checkpoint_at_or_before_the_position() {
        let ms = 1_000_000u64;
        let c = AckCheckpoints::new(1);
        // Offsets 0..100 sent 0.1 ms apart: checkpoints every 1 ms of send time (10 offsets).
        for o in 0..100i64 {
            c.note(0, o, o as u64 * ms / 10);
        }
        // Reports without offsets (acks=0) and for unknown partitions are ignored.
        c.note(0, -1, 0);
        c.note(7, 3, 0);
        let now = 50 * ms;
        // Caught up: 0, whatever the checkpoints say.
        assert_eq!(c.age_ns(0, 100, 100, now), Some(0));
        // Position 35: the checkpoint at offset 30 (sent at 3 ms) bounds the age from above.
        let age = c.age_ns(0, 35, 100, now).unwrap_or(0);
        assert!(age >= now - 35 * ms / 10 && age <= now - 3 * ms, "{age}");
        // Older checkpoints were dropped; later positions still resolve.
        assert_eq!(c.age_ns(0, 95, 100, now), Some(now - 9 * ms));
        assert_eq!(c.max_age_ms(&[100], &[95], now), Some(41.0));
        assert_eq!(AckCheckpoints::new(1).age_ns(0, 0, 5, now), None);
    }

    #[test]
    fn a_late_report_below_every_checkpoint_is_kept() {
        let ms = 1_000_000u64;
        let c = AckCheckpoints::new(1);
        // Two producers on one partition: the report for offsets 5.. arrives first, then the
        // one for offset 0, sent 0.2 ms earlier (inside the spacing).
        c.note(0, 5, 10 * ms);
        c.note(0, 0, 10 * ms - ms / 5);
        // A report above the lowest checkpoint inside the spacing is still turned away.
        c.note(0, 3, 10 * ms);
        assert_eq!(c.parts[0].map.lock().len(), 2);
        // Position 0, behind: the age comes from offset 0's send time.
        assert_eq!(c.age_ns(0, 0, 9, 20 * ms), Some(10 * ms + ms / 5));
        // After the position moved to 5 the older checkpoint is gone, and a report for a
        // consumed offset below it is kept but never used past the position.
        assert_eq!(c.age_ns(0, 5, 9, 20 * ms), Some(10 * ms));
        c.note(0, 1, 9 * ms);
        assert_eq!(c.age_ns(0, 6, 9, 20 * ms), Some(10 * ms));
    }

    #[test]
    fn checkpoints_stay_bounded() {
        let c = AckCheckpoints::new(limits::TIME_LAG_CHECKPOINTS_TOTAL);
        let spacing = limits::TIME_LAG_CHECKPOINT_SPACING.as_nanos() as u64;
        for o in 0..10_000i64 {
            c.note(0, o, o as u64 * spacing);
        }
        assert!(c.parts[0].map.lock().len() <= limits::TIME_LAG_CHECKPOINTS_MIN_PER_PARTITION);
        // The oldest checkpoint survives thinning: the age is never understated.
        assert_eq!(
            c.age_ns(0, 0, 10_000, 20_000 * spacing),
            Some(20_000 * spacing)
        );
    }
}
