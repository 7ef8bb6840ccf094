//! Idempotent-producer state of one partition (Kafka's `ProducerStateManager`): for each
//! producer id, its producer epoch and its last few batches, so that a retried batch is
//! answered with its original offsets instead of being written twice, and a batch that
//! skips sequence numbers is refused.
//!
//! Rules (Kafka's, post KIP-360), for a batch with producer id >= 0:
//! - no entry for the producer id (never seen, expired or evicted): accepted with any base
//!   sequence;
//! - epoch older than the entry's: `InvalidProducerEpoch`;
//! - epoch newer: accepted only with base sequence 0 (the entry then restarts);
//! - same epoch: a batch whose (first, last) sequence equals one of the cached batches is a
//!   duplicate; otherwise the base sequence must follow the newest cached batch's last
//!   sequence (wrapping past `i32::MAX` to 0), else `OutOfOrderSequence`.
//!
//! Concurrency contract: a table belongs to one partition and sits behind the partition's
//! `producers` mutex. The committer checks and records under the partition's append lock,
//! so the order in which batches are checked is the order in which they get offsets; the
//! checkpointer reads it under the same two locks; expiry takes only the table's mutex.
//!
//! Bound and eviction: a partition tracks at most `producer_ids_per_partition_max` producers.
//! A new producer id arriving at a full table takes the slot of the least recently active
//! producer only if that one has been idle for [`PRODUCER_EVICTION_IDLE_MS_MIN`] or longer
//! (longer than any client keeps retrying a batch, so its retries are over). Otherwise the
//! new producer's request is refused with `ProducerStateFull` and nothing is written: a flood
//! of producer ids can delay new producers, but it can never make an active producer's
//! retry look new and be written twice. (Recovery and snapshot loading still evict the
//! oldest unconditionally: they replay what was admitted before.)
//!
//! Memory: entries live in one dense `Vec` of slots, linked from least to most recently
//! active, plus an id -> slot map. Each entry's cached batches are a fixed ring. Checking
//! and recording a batch of a known producer allocates nothing; evicting the least recently
//! active producer when the table is full is O(1).

use std::collections::HashMap;

use bytes::Bytes;

use crate::batch::{BatchHeader, BatchIter};
use crate::config::{PRODUCER_BATCHES_CACHED_MAX, PRODUCER_EVICTION_IDLE_MS_MIN};
use crate::error::LogError;
use crate::types::{Offset, ProducerEpoch, ProducerId};

/// Marks "no slot" in the activity list.
const NIL: u32 = u32::MAX;

/// One batch remembered for a producer: enough to recognize a retry and to answer it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BatchMetadata {
    pub(crate) first_seq: i32,
    pub(crate) last_seq: i32,
    pub(crate) first_offset: Offset,
    pub(crate) last_offset: Offset,
    /// The stored batch's max timestamp (the append time on LogAppendTime topics).
    pub(crate) timestamp_ms: i64,
}

/// `sequence + increment`, wrapping past `i32::MAX` to 0 as Kafka's
/// `DefaultRecordBatch.incrementSequence` does (sequences are never negative).
pub(crate) fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(increment);
    // The modulus keeps the value in 0..=i32::MAX, so the cast is exact.
    sum.rem_euclid(i64::from(i32::MAX) + 1) as i32
}

/// The producer fields of one batch header, for batches that take part in sequence checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerBatch {
    pub(crate) producer_id: ProducerId,
    pub(crate) epoch: ProducerEpoch,
    pub(crate) first_seq: i32,
    pub(crate) last_seq: i32,
}

impl ProducerBatch {
    /// `None` for batches that are not tracked: no producer id, or a control batch
    /// (transaction markers carry no sequence).
    pub(crate) fn from_header(header: &BatchHeader<'_>) -> Option<Self> {
        let producer_id = ProducerId(header.producer_id());
        if !producer_id.is_idempotent() || header.is_control() {
            return None;
        }
        let first_seq = header.base_sequence();
        Some(Self {
            producer_id,
            epoch: ProducerEpoch(header.producer_epoch()),
            first_seq,
            last_seq: increment_sequence(first_seq, header.last_offset_delta()),
        })
    }
}

/// What the partition knows about one producer id.
#[derive(Debug, Clone)]
pub(crate) struct ProducerEntry {
    pub(crate) epoch: ProducerEpoch,
    /// A ring of the newest batches of this epoch; `batch_count` of them are in use.
    batches: [BatchMetadata; PRODUCER_BATCHES_CACHED_MAX],
    batch_count: u8,
    /// Index in `batches` of the newest batch (meaningful when `batch_count > 0`).
    newest: u8,
    /// Wall-clock time of the last append (or of the recovery that replayed it), for
    /// `producer.id.expiration.ms` and for eviction.
    pub(crate) last_activity_ms: i64,
}

impl ProducerEntry {
    pub(crate) fn new(epoch: ProducerEpoch, last_activity_ms: i64) -> Self {
        Self {
            epoch,
            batches: [BatchMetadata::default(); PRODUCER_BATCHES_CACHED_MAX],
            batch_count: 0,
            newest: 0,
            last_activity_ms,
        }
    }

    /// The cached batches, oldest first.
    pub(crate) fn batches(&self) -> impl Iterator<Item = &BatchMetadata> + '_ {
        let count = usize::from(self.batch_count);
        let oldest = usize::from(self.newest) + PRODUCER_BATCHES_CACHED_MAX + 1 - count;
        (0..count).map(move |i| &self.batches[(oldest + i) % PRODUCER_BATCHES_CACHED_MAX])
    }

    pub(crate) fn newest_batch(&self) -> Option<&BatchMetadata> {
        (self.batch_count > 0).then(|| &self.batches[usize::from(self.newest)])
    }

    /// Adds a batch as the newest, dropping the oldest when the ring is full.
    pub(crate) fn push(&mut self, batch: BatchMetadata) {
        let slot = match self.batch_count {
            0 => 0,
            _ => (usize::from(self.newest) + 1) % PRODUCER_BATCHES_CACHED_MAX,
        };
        self.batches[slot] = batch;
        // Both casts are exact: PRODUCER_BATCHES_CACHED_MAX <= 255 (asserted in config).
        self.newest = slot as u8;
        let count = (usize::from(self.batch_count) + 1).min(PRODUCER_BATCHES_CACHED_MAX);
        self.batch_count = count as u8;
    }

    fn find_duplicate(&self, first_seq: i32, last_seq: i32) -> Option<BatchMetadata> {
        self.batches()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
            .copied()
    }
}

/// Equal when they hold the same epoch, activity time and batches in the same order,
/// wherever the ring happens to start.
impl PartialEq for ProducerEntry {
    fn eq(&self, other: &Self) -> bool {
        self.epoch == other.epoch
            && self.last_activity_ms == other.last_activity_ms
            && self.batches().eq(other.batches())
    }
}

impl Eq for ProducerEntry {}

/// The newest batch of a producer among the batches checked earlier in the same request,
/// so that a request holding several batches of one producer is checked as a sequence.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Staged {
    producer_id: ProducerId,
    epoch: ProducerEpoch,
    last_seq: i32,
    /// Producers of the request so far that the table does not hold (each needs a slot).
    new_producers: usize,
}

/// The snapshot file that holds a table's contents: written at log end `offset` when the
/// table was at `version`. While the table is still at that version the file stays valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SnapshotMark {
    pub(crate) version: u64,
    pub(crate) offset: Offset,
}

#[derive(Debug)]
struct Slot {
    producer_id: ProducerId,
    entry: ProducerEntry,
    /// Neighbours in the activity list (`NIL` at the ends).
    older: u32,
    newer: u32,
}

/// The producer ids of one partition, bounded, in order of last activity.
#[derive(Debug)]
pub(crate) struct ProducerStateTable {
    slots: Vec<Slot>,
    by_id: HashMap<ProducerId, u32>,
    /// Least recently active slot (evicted first), or `NIL`.
    oldest: u32,
    /// Most recently active slot, or `NIL`.
    newest: u32,
    producer_ids_max: usize,
    /// Bumped by every change, so the checkpointer can tell whether its last snapshot
    /// still describes the table.
    version: u64,
    /// The last snapshot file written for this table (set by the checkpointer and by
    /// recovery once a checkpoint refers to it).
    pub(crate) snapshot: Option<SnapshotMark>,
}

impl ProducerStateTable {
    /// An empty table holding at most `producer_ids_max` producers (at least 1; slot
    /// numbers are 32-bit).
    pub(crate) fn new(producer_ids_max: usize) -> Self {
        Self {
            slots: Vec::new(),
            by_id: HashMap::new(),
            oldest: NIL,
            newest: NIL,
            producer_ids_max: producer_ids_max.clamp(1, (NIL - 1) as usize),
            version: 0,
            snapshot: None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    pub(crate) fn get(&self, producer_id: ProducerId) -> Option<&ProducerEntry> {
        let slot = *self.by_id.get(&producer_id)?;
        Some(&self.slots[slot as usize].entry)
    }

    /// Every producer, least recently active first (the order a snapshot keeps, so that
    /// loading it restores the eviction order).
    pub(crate) fn by_activity(&self) -> impl Iterator<Item = (ProducerId, &ProducerEntry)> + '_ {
        let mut at = self.oldest;
        std::iter::from_fn(move || {
            let slot = self.slots.get(at as usize)?;
            at = slot.newer;
            Some((slot.producer_id, &slot.entry))
        })
    }

    /// Checks one batch of a request against the table and against `staged` (what the
    /// earlier batches of the same request would change; the caller clears it per
    /// request). `Ok(Some(original))` means the batch is a retry of `original`.
    ///
    /// A producer the table does not hold must also find a slot (see the module header);
    /// `now_ms` is the wall-clock time its idle check uses.
    pub(crate) fn check(
        &self,
        batch: &ProducerBatch,
        staged: &mut Vec<Staged>,
        now_ms: i64,
    ) -> Result<Option<BatchMetadata>, LogError> {
        let entry = self.get(batch.producer_id);
        // Duplicates are looked for among what is written, as Kafka does.
        if let Some(entry) = entry.filter(|e| e.epoch == batch.epoch) {
            if let Some(original) = entry.find_duplicate(batch.first_seq, batch.last_seq) {
                return Ok(Some(original));
            }
        }
        let current = match staged
            .iter()
            .rev()
            .find(|s| s.producer_id == batch.producer_id)
        {
            Some(s) => Some((s.epoch, Some(s.last_seq))),
            None => entry.map(|e| (e.epoch, e.newest_batch().map(|b| b.last_seq))),
        };
        let mut new_producers = staged.last().map_or(0, |s| s.new_producers);
        match current {
            Some((epoch, last_seq)) => check_sequence(batch, epoch, last_seq)?,
            None => {
                new_producers += 1;
                self.check_room(batch.producer_id, new_producers, now_ms)?;
            }
        }
        staged.push(Staged {
            producer_id: batch.producer_id,
            epoch: batch.epoch,
            last_seq: batch.last_seq,
            new_producers,
        });
        Ok(None)
    }

    /// Whether `new_producers` more producers fit: in free slots, or in the slots of the
    /// least recently active producers that are idle for at least the eviction bound.
    fn check_room(
        &self,
        producer_id: ProducerId,
        new_producers: usize,
        now_ms: i64,
    ) -> Result<(), LogError> {
        debug_assert!(self.slots.len() <= self.producer_ids_max && new_producers >= 1);
        let evictions = (self.slots.len() + new_producers).saturating_sub(self.producer_ids_max);
        if evictions == 0 {
            return Ok(());
        }
        // The activity list is ordered, so only the last producer to be evicted needs a look.
        let last_evicted = self.by_activity().nth(evictions - 1);
        let idle_ms = last_evicted.map(|(_, e)| now_ms.saturating_sub(e.last_activity_ms));
        if idle_ms.is_some_and(|idle| idle >= PRODUCER_EVICTION_IDLE_MS_MIN) {
            return Ok(());
        }
        Err(LogError::ProducerStateFull {
            producer_id,
            producers_max: self.producer_ids_max,
        })
    }

    /// Checks every tracked batch of one append request, in order, as one unit (Kafka's
    /// rule): the first duplicate found answers the whole request (`Ok(Some(original))`,
    /// nothing is written), and any failing batch fails the whole request. `staged` is
    /// scratch space kept by the caller so that steady state allocates nothing.
    pub(crate) fn check_request(
        &self,
        records: &Bytes,
        staged: &mut Vec<Staged>,
    ) -> Result<Option<BatchMetadata>, LogError> {
        staged.clear();
        let now_ms = crate::segment::now_ms();
        for batch in BatchIter::new(records.clone()) {
            let batch = batch?;
            let header = BatchHeader::parse(&batch)?;
            if let Some(producer) = ProducerBatch::from_header(&header) {
                if let Some(original) = self.check(&producer, staged, now_ms)? {
                    return Ok(Some(original));
                }
            }
        }
        Ok(None)
    }

    /// Records a written batch, given its header and the base offset it got, if it is
    /// tracked. Returns whether it was.
    pub(crate) fn record_header(
        &mut self,
        header: &BatchHeader<'_>,
        base_offset: Offset,
        now_ms: i64,
    ) -> bool {
        let Some(batch) = ProducerBatch::from_header(header) else {
            return false;
        };
        let last_offset = base_offset
            .0
            .saturating_add(i64::from(header.last_offset_delta()));
        let written = BatchMetadata {
            first_seq: batch.first_seq,
            last_seq: batch.last_seq,
            first_offset: base_offset,
            last_offset: Offset(last_offset),
            timestamp_ms: header.max_timestamp(),
        };
        self.record(&batch, written, now_ms);
        true
    }

    /// [`Self::record_header`], first saving into `undo` what [`Self::undo`] needs to put
    /// the table back: the producer's entry as it was (or `None` when it is new) and the
    /// entry a new producer evicts. Only the first change of each producer id is saved.
    pub(crate) fn record_header_undoable(
        &mut self,
        header: &BatchHeader<'_>,
        base_offset: Offset,
        now_ms: i64,
        undo: &mut Vec<(ProducerId, Option<ProducerEntry>)>,
    ) -> bool {
        let Some(batch) = ProducerBatch::from_header(header) else {
            return false;
        };
        let mut save = |id: ProducerId, entry: Option<ProducerEntry>| {
            if !undo.iter().any(|(saved, _)| *saved == id) {
                undo.push((id, entry));
            }
        };
        save(batch.producer_id, self.get(batch.producer_id).cloned());
        let evicts = !self.by_id.contains_key(&batch.producer_id)
            && self.slots.len() >= self.producer_ids_max
            && self.oldest != NIL;
        if evicts {
            let oldest = &self.slots[self.oldest as usize];
            save(oldest.producer_id, Some(oldest.entry.clone()));
        }
        self.record_header(header, base_offset, now_ms)
    }

    /// Puts back the entries saved by [`Self::record_header_undoable`] (a commit round
    /// whose writes were refused). The restored entries count as the most recently active.
    /// `saved` is left empty (its capacity is reused by the committer).
    pub(crate) fn undo(&mut self, saved: &mut Vec<(ProducerId, Option<ProducerEntry>)>) {
        for (producer_id, _) in saved.iter() {
            if let Some(&slot) = self.by_id.get(producer_id) {
                self.remove_slot(slot);
            }
        }
        for (producer_id, entry) in saved.drain(..).rev() {
            if let Some(entry) = entry {
                self.insert_loaded(producer_id, entry);
            }
        }
        self.version += 1;
    }

    /// Records a written batch: a new epoch restarts the producer's entry. No check here
    /// (the committer checked first; recovery replays what the log holds, as Kafka does).
    pub(crate) fn record(&mut self, batch: &ProducerBatch, written: BatchMetadata, now_ms: i64) {
        let slot = match self.by_id.get(&batch.producer_id) {
            Some(&slot) => {
                self.unlink(slot);
                slot
            }
            None => {
                let entry = ProducerEntry::new(batch.epoch, now_ms);
                self.insert_slot(batch.producer_id, entry)
            }
        };
        self.link_newest(slot);
        let entry = &mut self.slots[slot as usize].entry;
        if entry.epoch != batch.epoch {
            *entry = ProducerEntry::new(batch.epoch, now_ms);
        }
        entry.push(written);
        entry.last_activity_ms = now_ms;
        self.version += 1;
    }

    /// Adds an entry read from a snapshot as the most recently active one (a snapshot
    /// lists producers least recently active first). Entries beyond the bound evict the
    /// oldest, as at run time.
    pub(crate) fn insert_loaded(&mut self, producer_id: ProducerId, entry: ProducerEntry) {
        if let Some(&slot) = self.by_id.get(&producer_id) {
            self.remove_slot(slot);
        }
        let slot = self.insert_slot(producer_id, entry);
        self.link_newest(slot);
        self.version += 1;
    }

    /// Forgets producers idle for `expiration_ms` or more at `now_ms` (Kafka's
    /// `producer.id.expiration.ms`). Returns how many were dropped.
    pub(crate) fn expire(&mut self, now_ms: i64, expiration_ms: u64) -> usize {
        let expiration_ms = i64::try_from(expiration_ms).unwrap_or(i64::MAX);
        self.retain(|_, entry| now_ms.saturating_sub(entry.last_activity_ms) < expiration_ms)
    }

    /// Forgets every producer for which `keep` is false. Returns how many were dropped.
    pub(crate) fn retain(
        &mut self,
        mut keep: impl FnMut(ProducerId, &ProducerEntry) -> bool,
    ) -> usize {
        let before = self.slots.len();
        // Backwards: removing slot i moves the last slot, already visited, into i.
        for slot in (0..self.slots.len()).rev() {
            let Slot {
                producer_id, entry, ..
            } = &self.slots[slot];
            if !keep(*producer_id, entry) {
                self.remove_slot(slot as u32);
            }
        }
        let dropped = before - self.slots.len();
        if dropped > 0 {
            self.version += 1;
        }
        dropped
    }

    /// Takes a slot for a new producer, evicting the least recently active one when the
    /// table is full. The slot is not yet in the activity list.
    fn insert_slot(&mut self, producer_id: ProducerId, entry: ProducerEntry) -> u32 {
        if self.slots.len() >= self.producer_ids_max {
            self.remove_slot(self.oldest);
        }
        let slot = self.slots.len() as u32; // < producer_ids_max < NIL
        self.slots.push(Slot {
            producer_id,
            entry,
            older: NIL,
            newer: NIL,
        });
        self.by_id.insert(producer_id, slot);
        slot
    }

    /// Removes a slot, moving the last slot into its place to keep the vector dense.
    fn remove_slot(&mut self, slot: u32) {
        assert!(
            (slot as usize) < self.slots.len(),
            "removing a slot that is not in use"
        );
        self.unlink(slot);
        let removed = self.slots.swap_remove(slot as usize);
        self.by_id.remove(&removed.producer_id);
        if (slot as usize) == self.slots.len() {
            return; // It was the last slot: nothing moved.
        }
        // The former last slot now lives at `slot`: repoint everything that named it.
        let moved_from = self.slots.len() as u32;
        let (older, newer, producer_id) = {
            let moved = &self.slots[slot as usize];
            (moved.older, moved.newer, moved.producer_id)
        };
        self.by_id.insert(producer_id, slot);
        match older {
            NIL => self.oldest = slot,
            o => self.slots[o as usize].newer = slot,
        }
        match newer {
            NIL => self.newest = slot,
            n => self.slots[n as usize].older = slot,
        }
        debug_assert!(self.oldest != moved_from && self.newest != moved_from);
    }

    fn unlink(&mut self, slot: u32) {
        let (older, newer) = {
            let s = &self.slots[slot as usize];
            (s.older, s.newer)
        };
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o as usize].newer = newer,
        }
        match newer {
            NIL => self.newest = older,
            n => self.slots[n as usize].older = older,
        }
        let s = &mut self.slots[slot as usize];
        s.older = NIL;
        s.newer = NIL;
    }

    fn link_newest(&mut self, slot: u32) {
        let previous = self.newest;
        {
            let s = &mut self.slots[slot as usize];
            s.older = previous;
            s.newer = NIL;
        }
        match previous {
            NIL => self.oldest = slot,
            p => self.slots[p as usize].newer = slot,
        }
        self.newest = slot;
    }
}

/// The epoch and sequence rules for a producer whose current epoch and newest last
/// sequence are known.
fn check_sequence(
    batch: &ProducerBatch,
    epoch: ProducerEpoch,
    last_seq: Option<i32>,
) -> Result<(), LogError> {
    let out_of_order = |expected| LogError::OutOfOrderSequence {
        producer_id: batch.producer_id,
        expected,
        received: batch.first_seq,
    };
    if batch.epoch < epoch {
        return Err(LogError::InvalidProducerEpoch {
            producer_id: batch.producer_id,
            epoch: batch.epoch,
            current: epoch,
        });
    }
    if batch.epoch > epoch {
        // A new session starts its sequence from 0.
        return match batch.first_seq {
            0 => Ok(()),
            _ => Err(out_of_order(0)),
        };
    }
    match last_seq {
        Some(last) if batch.first_seq != increment_sequence(last, 1) => {
            Err(out_of_order(increment_sequence(last, 1)))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(producer_id: i64, epoch: i16, first_seq: i32, records: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: ProducerId(producer_id),
            epoch: ProducerEpoch(epoch),
            first_seq,
            last_seq: increment_sequence(first_seq, records - 1),
        }
    }

    fn written(b: &ProducerBatch, first_offset: i64) -> BatchMetadata {
        let records = i64::from(b.last_seq.wrapping_sub(b.first_seq)) + 1;
        BatchMetadata {
            first_seq: b.first_seq,
            last_seq: b.last_seq,
            first_offset: Offset(first_offset),
            last_offset: Offset(first_offset + records - 1),
            timestamp_ms: 7,
        }
    }

    /// Checks then records, as the committer does for a one-batch request.
    fn append(table: &mut ProducerStateTable, b: ProducerBatch, offset: i64, now: i64) {
        let mut staged = Vec::new();
        assert_eq!(table.check(&b, &mut staged, now).expect("accepted"), None);
        table.record(&b, written(&b, offset), now);
    }

    fn check(
        table: &ProducerStateTable,
        b: ProducerBatch,
    ) -> Result<Option<BatchMetadata>, LogError> {
        table.check(&b, &mut Vec::new(), 1)
    }

    #[test]
    fn sequences_wrap_past_i32_max_to_zero() {
        // Goal: the last sequence of a batch and the next expected one wrap like Kafka's.
        assert_eq!(increment_sequence(5, 4), 9);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        let mut table = ProducerStateTable::new(10);
        append(&mut table, batch(1, 0, i32::MAX - 1, 2), 0, 1);
        assert!(check(&table, batch(1, 0, 0, 1))
            .expect("in sequence")
            .is_none());
        assert!(check(&table, batch(1, 0, i32::MAX, 1)).is_err());
    }

    #[test]
    fn duplicate_gap_epoch_rules() {
        // Goal: each rule of the module header gives its outcome.
        let mut table = ProducerStateTable::new(10);
        append(&mut table, batch(1, 3, 0, 5), 100, 1);
        append(&mut table, batch(1, 3, 5, 5), 105, 1);
        let dup = check(&table, batch(1, 3, 0, 5))
            .expect("ok")
            .expect("duplicate");
        assert_eq!(
            (dup.first_offset, dup.last_offset),
            (Offset(100), Offset(104))
        );
        assert!(matches!(
            check(&table, batch(1, 3, 11, 1)),
            Err(LogError::OutOfOrderSequence {
                expected: 10,
                received: 11,
                ..
            })
        ));
        assert!(matches!(
            check(&table, batch(1, 2, 10, 1)),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
        assert!(matches!(
            check(&table, batch(1, 4, 10, 1)),
            Err(LogError::OutOfOrderSequence { expected: 0, .. })
        ));
        assert_eq!(check(&table, batch(1, 4, 0, 1)).expect("new epoch"), None);
        // A duplicate of another epoch's batch is not a duplicate.
        assert!(check(&table, batch(1, 4, 5, 5)).is_err());
        // Unknown producers start anywhere.
        assert_eq!(check(&table, batch(2, 0, 4242, 1)).expect("unknown"), None);
    }

    #[test]
    fn only_the_last_five_batches_are_duplicates() {
        // Goal: the ring forgets the sixth-newest batch; a retry of it is then out of order.
        let mut table = ProducerStateTable::new(10);
        for i in 0..6 {
            append(&mut table, batch(1, 0, i * 2, 2), i64::from(i) * 2, 1);
        }
        let entry = table.get(ProducerId(1)).expect("entry");
        let firsts: Vec<i32> = entry.batches().map(|b| b.first_seq).collect();
        assert_eq!(firsts, vec![2, 4, 6, 8, 10]);
        assert!(check(&table, batch(1, 0, 2, 2)).expect("ok").is_some());
        assert!(check(&table, batch(1, 0, 0, 2)).is_err());
    }

    #[test]
    fn staged_batches_of_one_request_form_a_sequence() {
        // Goal: within one request, a batch is checked against the earlier batches of the
        // same producer, while duplicates are only those already written.
        let mut table = ProducerStateTable::new(10);
        append(&mut table, batch(1, 0, 0, 1), 0, 1);
        let mut staged = Vec::new();
        assert_eq!(
            table.check(&batch(1, 0, 1, 2), &mut staged, 1).expect("ok"),
            None
        );
        assert_eq!(
            table.check(&batch(1, 0, 3, 1), &mut staged, 1).expect("ok"),
            None
        );
        assert!(table.check(&batch(1, 0, 3, 1), &mut staged, 1).is_err());
        let mut staged = Vec::new();
        assert_eq!(
            table.check(&batch(1, 1, 0, 2), &mut staged, 1).expect("ok"),
            None
        );
        assert_eq!(
            table.check(&batch(1, 1, 2, 1), &mut staged, 1).expect("ok"),
            None
        );
    }

    #[test]
    fn full_table_evicts_only_producers_idle_long_enough() {
        // Goal: with room for 3, a new producer evicts the one idle longest when it has been
        // idle for the eviction bound, and is refused (nothing recorded) when even the
        // oldest is more recent; slot bookkeeping stays consistent through many rounds.
        let idle = PRODUCER_EVICTION_IDLE_MS_MIN;
        let mut table = ProducerStateTable::new(3);
        for id in 1..=3 {
            append(&mut table, batch(id, 0, 0, 1), id * 10, 0);
        }
        append(&mut table, batch(1, 0, 1, 1), 40, idle); // 1 is now the most recent.
        append(&mut table, batch(4, 0, 0, 1), 50, idle);
        assert!(table.get(ProducerId(2)).is_none(), "2 was idle longest");
        let order: Vec<i64> = table.by_activity().map(|(id, _)| id.0).collect();
        assert_eq!(order, vec![3, 1, 4]);
        // 3 is idle for the bound, but 1 is not: room for one newcomer, not two.
        let mut staged = Vec::new();
        assert!(table.check(&batch(5, 0, 0, 1), &mut staged, idle).is_ok());
        let second = table.check(&batch(6, 0, 0, 1), &mut staged, idle);
        assert!(matches!(second, Err(LogError::ProducerStateFull { .. })));
        append(&mut table, batch(5, 0, 0, 1), 60, idle);
        let refused = check(&table, batch(6, 0, 0, 1));
        assert!(matches!(refused, Err(LogError::ProducerStateFull { .. })));
        assert!(
            table.get(ProducerId(1)).is_some(),
            "an active producer is never evicted"
        );
        // Retries and known producers are unaffected by a full table.
        assert!(check(&table, batch(1, 0, 1, 1)).expect("ok").is_some());
        for round in 0..200i64 {
            let id = 7 + round % 7;
            let now = idle * (round + 2);
            let seq = table
                .get(ProducerId(id))
                .map_or(0, |e| e.newest_batch().unwrap().last_seq + 1);
            append(&mut table, batch(id, 0, seq, 1), 100 + round, now);
            assert!(table.len() <= 3);
            let listed: Vec<_> = table.by_activity().map(|(id, _)| id).collect();
            assert_eq!(listed.len(), table.len());
            for id in &listed {
                assert!(table.get(*id).is_some());
            }
        }
    }

    #[test]
    fn expiry_drops_idle_producers_only() {
        // Goal: producers idle for the expiration time or longer go; others stay, in order.
        let mut table = ProducerStateTable::new(10);
        for id in 1..=5 {
            append(&mut table, batch(id, 0, 0, 1), id, id * 100);
        }
        let version = table.version();
        assert_eq!(table.expire(1_000, 700), 3); // idle 900, 800, 700
        assert!(table.version() > version);
        let left: Vec<i64> = table.by_activity().map(|(id, _)| id.0).collect();
        assert_eq!(left, vec![4, 5]);
        assert_eq!(table.expire(1_000, 700), 0);
    }
}
