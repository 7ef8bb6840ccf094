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
//! producer only if that one has been idle for the eviction window or longer
//! (`LogManagerConfig::producer_eviction_idle_ms`, by default
//! [`PRODUCER_EVICTION_IDLE_MS_DEFAULT`]: longer than any client keeps retrying a batch by
//! default, so its retries are over). The callers pass the window in. Otherwise the
//! new producer's request is refused with `ProducerStateFull` and nothing is written: a flood
//! of producer ids can delay new producers, but it can never make an active producer's
//! retry look new and be written twice. (Recovery and snapshot loading still evict the
//! oldest unconditionally: they replay what was admitted before.)
//!
//! Transactions (docs/transactions.md §6.1): an entry also holds the first offset of the
//! producer's open transaction in this partition, if any, and the epoch the transaction
//! coordinator verified the partition for (`verify_txn`, after AddPartitionsToTxn is
//! durable). Checked in the same pass as the sequences:
//! - a transactional batch is accepted inside the producer's open transaction (same
//!   epoch), or opens one when the partition was verified for its epoch; otherwise
//!   `InvalidTxnState` (KIP-890 part 1: nothing reaches a partition the transaction did not
//!   add); a verification for a Transactions V2 transaction (KIP-890 part 2, whose epoch
//!   is its own) also wants the opening batch at sequence 0 when the producer has no batch
//!   of that epoch here, else `OutOfOrderSequence`, as Kafka;
//! - a non-transactional batch while the producer's transaction is open is
//!   `InvalidTxnState`;
//! - a marker (COMMIT / ABORT, written only by the log's own `append_marker`) is accepted
//!   at any sequence with an epoch not older than the entry's (a newer one is adopted: that
//!   fences the old producer here), closes the open transaction, clears the verification
//!   and, for ABORT, records an [`AbortedTxn`].
//!
//! The table keeps `ongoing` (first offset -> producer id of every open transaction, so the
//! last stable offset is its first key) and the partition's aborted transactions in
//! marker order. An entry with an open transaction is never evicted or expired; a table
//! full of them refuses new producers with `ProducerStateFull`.
//!
//! Memory: entries live in one dense `Vec` of slots, linked from least to most recently
//! active, plus an id -> slot map. Each entry's cached batches are a fixed ring. Checking
//! and recording a batch of a known producer allocates nothing; evicting the least recently
//! active producer when the table is full is O(1).

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use crate::batch::{BatchHeader, BatchIter};
use crate::config::PRODUCER_BATCHES_CACHED_MAX;
#[cfg(doc)]
use crate::config::PRODUCER_EVICTION_IDLE_MS_DEFAULT;
use crate::error::LogError;
use crate::txn::{AbortedTxn, ControlType};
use crate::types::{Offset, ProducerEpoch, ProducerId};

/// Marks "no slot" in the activity list.
const NIL: u32 = u32::MAX;

/// What a new producer's room check needs: the wall-clock time, and how long the least
/// recently active producer must have been idle for its slot to be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Room {
    pub(crate) now_ms: i64,
    pub(crate) eviction_idle_ms: i64,
}

impl Room {
    pub(crate) fn new(now_ms: i64, eviction_idle_ms: u64) -> Self {
        Self {
            now_ms,
            eviction_idle_ms: i64::try_from(eviction_idle_ms).unwrap_or(i64::MAX),
        }
    }
}

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
    /// Part of a transaction (the batch's transactional attribute).
    pub(crate) transactional: bool,
}

impl ProducerBatch {
    /// `None` for batches that are not tracked: no producer id, or a control batch
    /// (transaction markers carry no sequence).
    pub(crate) fn from_header(header: &BatchHeader<'_>) -> Option<Self> {
        let producer_id = header.producer_id();
        if !producer_id.is_idempotent() || header.is_control() {
            return None;
        }
        let first_seq = header.base_sequence();
        Some(Self {
            producer_id,
            epoch: header.producer_epoch(),
            first_seq,
            last_seq: increment_sequence(first_seq, header.last_offset_delta()),
            transactional: header.is_transactional(),
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
    /// First offset of the producer's open transaction in this partition (persisted in
    /// snapshot v2).
    pub(crate) current_txn_first_offset: Option<Offset>,
    /// The epoch the coordinator verified this partition for (the partition is in the
    /// producer's ongoing transaction); cleared by the marker. Not persisted: the
    /// coordinator re-verifies the partitions of every ongoing transaction on load.
    pub(crate) verified_epoch: Option<ProducerEpoch>,
    /// The verification was for a Transactions V2 transaction (Kafka's
    /// `supportsEpochBump`): the transaction's first batch here must start at sequence 0
    /// unless the producer has a batch of that epoch here already. Not persisted either.
    pub(crate) verified_epoch_bump: bool,
    /// The coordinator epoch of the newest marker written for this producer here (Kafka's
    /// `ProducerStateEntry.coordinatorEpoch`, which DescribeProducers reports); None (-1)
    /// until its first marker. Persisted in snapshot v3.
    pub(crate) coordinator_epoch: Option<i32>,
}

impl ProducerEntry {
    pub(crate) fn new(epoch: ProducerEpoch, last_activity_ms: i64) -> Self {
        Self {
            epoch,
            batches: [BatchMetadata::default(); PRODUCER_BATCHES_CACHED_MAX],
            batch_count: 0,
            newest: 0,
            last_activity_ms,
            current_txn_first_offset: None,
            verified_epoch: None,
            verified_epoch_bump: false,
            coordinator_epoch: None,
        }
    }

    /// Whether the producer has an open transaction here (such an entry is never evicted).
    pub(crate) fn in_txn(&self) -> bool {
        self.current_txn_first_offset.is_some()
    }

    fn clear_batches(&mut self) {
        self.batch_count = 0;
        self.newest = 0;
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
            && self.current_txn_first_offset == other.current_txn_first_offset
            && self.coordinator_epoch == other.coordinator_epoch
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
    /// Whether the producer's transaction is open after this batch.
    txn_open: bool,
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
    /// First offset -> producer of every open transaction (one per entry with
    /// `current_txn_first_offset`, kept in step by every change of an entry).
    ongoing: BTreeMap<Offset, ProducerId>,
    /// The partition's aborted transactions whose marker is at or above the log start, in
    /// marker order (persisted in snapshot v2).
    aborted: Vec<AbortedTxn>,
    /// The table's version when the log cleaner last forgot aborted transactions (0:
    /// never since open); see [`Self::forgotten_aborted_durable`].
    aborted_forgotten_version: u64,
    /// The newest table version a durable checkpoint describes (its snapshot file, or no
    /// snapshot for an empty table: recovery then rebuilds from the log).
    checkpointed_version: u64,
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
            ongoing: BTreeMap::new(),
            aborted: Vec::new(),
            aborted_forgotten_version: 0,
            checkpointed_version: 0,
        }
    }

    /// The first offset of the oldest open transaction: the last stable offset is never
    /// above it (docs/transactions.md §6.2).
    pub(crate) fn first_unstable_offset(&self) -> Option<Offset> {
        self.ongoing.keys().next().copied()
    }

    /// The aborted transactions, in marker order.
    pub(crate) fn aborted(&self) -> &[AbortedTxn] {
        &self.aborted
    }

    /// Adds an aborted transaction read from a snapshot (in marker order).
    pub(crate) fn push_loaded_aborted(&mut self, entry: AbortedTxn) {
        debug_assert!(self
            .aborted
            .last()
            .is_none_or(|last| last.last_offset < entry.last_offset));
        self.aborted.push(entry);
        self.version += 1;
    }

    /// Forgets the aborted transactions whose ABORT marker is at one of `markers` (sorted):
    /// the log cleaner found no batch of them left, so there is nothing for readers to
    /// skip, and their markers may go later (a reader told of an aborted transaction skips
    /// its producer's batches until it meets the marker, so the entry must go first, as in
    /// Kafka's cleaned `.txnindex`). Returns how many were forgotten.
    pub(crate) fn forget_aborted(&mut self, markers: &[Offset]) -> usize {
        debug_assert!(markers.windows(2).all(|w| w[0] < w[1]));
        let before = self.aborted.len();
        self.aborted
            .retain(|e| markers.binary_search(&e.last_offset).is_err());
        let forgotten = before - self.aborted.len();
        if forgotten > 0 {
            self.version += 1;
            self.aborted_forgotten_version = self.version;
        }
        forgotten
    }

    /// Whether the producer state in force after a restart (what a durable checkpoint
    /// names) was taken after the cleaner last forgot aborted transactions, so a restart
    /// cannot bring them back. Until then the cleaner keeps their ABORT markers: a
    /// forgotten entry that came back without its marker would hide its producer's later
    /// data from read_committed readers. (A rebuild from the log cannot bring one back:
    /// an entry is made only when the walk meets data of the transaction, and none is left.)
    pub(crate) fn forgotten_aborted_durable(&self) -> bool {
        self.checkpointed_version >= self.aborted_forgotten_version
    }

    /// A durable checkpoint now describes the table as it was at `version`.
    pub(crate) fn note_checkpointed(&mut self, version: u64) {
        self.checkpointed_version = self.checkpointed_version.max(version);
    }

    /// Forgets aborted transactions whose marker is below `log_start`: none of their
    /// offsets can be read any more. Returns how many were dropped.
    pub(crate) fn trim_aborted(&mut self, log_start: Offset) -> usize {
        let below = self.aborted.partition_point(|e| e.last_offset < log_start);
        if below > 0 {
            self.aborted.drain(..below);
            self.version += 1;
        }
        below
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// No producer and no aborted transaction: nothing a snapshot would need to keep.
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty() && self.aborted.is_empty()
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
    /// `room` is the wall-clock time its idle check uses and the eviction window.
    pub(crate) fn check(
        &self,
        batch: &ProducerBatch,
        staged: &mut Vec<Staged>,
        room: Room,
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
            Some(s) => Some((s.epoch, Some(s.last_seq), s.txn_open)),
            None => entry.map(|e| (e.epoch, e.newest_batch().map(|b| b.last_seq), e.in_txn())),
        };
        let mut new_producers = staged.last().map_or(0, |s| s.new_producers);
        let txn_open = match current {
            Some((epoch, last_seq, txn_open)) => {
                check_sequence(batch, epoch, last_seq)?;
                txn_open
            }
            None => {
                new_producers += 1;
                self.check_room(batch.producer_id, new_producers, room)?;
                false
            }
        };
        let verified = entry.and_then(|e| Some((e.verified_epoch?, e.verified_epoch_bump)));
        let epoch = current.map(|(epoch, ..)| epoch);
        let last_seq = current.and_then(|(_, last_seq, _)| last_seq);
        let txn_open = check_txn(batch, txn_open, (epoch, last_seq), verified)?;
        staged.push(Staged {
            producer_id: batch.producer_id,
            epoch: batch.epoch,
            last_seq: batch.last_seq,
            txn_open,
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
        room: Room,
    ) -> Result<(), LogError> {
        assert!(self.slots.len() <= self.producer_ids_max && new_producers >= 1);
        let evictions = (self.slots.len() + new_producers).saturating_sub(self.producer_ids_max);
        if evictions == 0 {
            return Ok(());
        }
        // The activity list is ordered, so only the last producer to be evicted needs a look.
        // Producers with an open transaction are never evicted.
        let last_evicted = self
            .by_activity()
            .filter(|(_, e)| !e.in_txn())
            .nth(evictions - 1);
        let idle_ms = last_evicted.map(|(_, e)| room.now_ms.saturating_sub(e.last_activity_ms));
        if idle_ms.is_some_and(|idle| idle >= room.eviction_idle_ms) {
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
        eviction_idle_ms: u64,
    ) -> Result<Option<BatchMetadata>, LogError> {
        staged.clear();
        let room = Room::new(crate::segment::now_ms(), eviction_idle_ms);
        for batch in BatchIter::new(records.clone()) {
            let batch = batch?;
            let header = BatchHeader::parse(&batch)?;
            if let Some(producer) = ProducerBatch::from_header(&header) {
                if let Some(original) = self.check(&producer, staged, room)? {
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
        self.save_for_undo(batch.producer_id, undo);
        self.record_header(header, base_offset, now_ms)
    }

    /// Saves into `undo` what [`Self::undo`] needs to put back a change of `producer_id`:
    /// its entry as it is (or `None` when it is new) and the entry a new producer would
    /// evict. Only the first change of each producer id is saved.
    fn save_for_undo(
        &self,
        producer_id: ProducerId,
        undo: &mut Vec<(ProducerId, Option<ProducerEntry>)>,
    ) {
        let mut save = |id: ProducerId, entry: Option<ProducerEntry>| {
            if !undo.iter().any(|(saved, _)| *saved == id) {
                undo.push((id, entry));
            }
        };
        save(producer_id, self.get(producer_id).cloned());
        let evicts =
            !self.by_id.contains_key(&producer_id) && self.slots.len() >= self.producer_ids_max;
        if let Some(victim) = evicts.then(|| self.eviction_victim()).flatten() {
            let victim = &self.slots[victim as usize];
            save(victim.producer_id, Some(victim.entry.clone()));
        }
    }

    /// Records that the coordinator added this partition to `producer_id`'s transaction at
    /// `epoch` (docs/transactions.md §6.1): its next transactional batch of that epoch may
    /// open the transaction. An unknown producer gets an entry (it needs a slot, as for its
    /// first batch). Changes are saved into `undo` first.
    pub(crate) fn verify_txn(
        &mut self,
        (producer_id, epoch, epoch_bump): (ProducerId, ProducerEpoch, bool),
        room: Room,
        undo: &mut Vec<(ProducerId, Option<ProducerEntry>)>,
    ) -> Result<(), LogError> {
        let now_ms = room.now_ms;
        match self.get(producer_id) {
            Some(entry) if epoch < entry.epoch => {
                return Err(LogError::InvalidProducerEpoch {
                    producer_id,
                    epoch,
                    current: entry.epoch,
                })
            }
            Some(_) => {}
            None => self.check_room(producer_id, 1, room)?,
        }
        self.save_for_undo(producer_id, undo);
        let slot = self.touch(producer_id, epoch, now_ms);
        let entry = &mut self.slots[slot as usize].entry;
        entry.verified_epoch = Some(epoch);
        entry.verified_epoch_bump = epoch_bump;
        self.version += 1;
        Ok(())
    }

    /// Whether a marker of `producer_id` at `epoch` may be written: never with an epoch
    /// older than the partition's (the coordinator only ever bumps epochs).
    pub(crate) fn check_marker(
        &self,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
    ) -> Result<(), LogError> {
        match self.get(producer_id) {
            Some(entry) if epoch < entry.epoch => Err(LogError::InvalidProducerEpoch {
                producer_id,
                epoch,
                current: entry.epoch,
            }),
            _ => Ok(()),
        }
    }

    /// Applies a written marker at `offset` (no check: the committer checked with
    /// [`Self::check_marker`]; recovery replays what the log holds). A newer epoch is
    /// adopted and forgets the older epoch's batches; the open transaction is closed and,
    /// for ABORT, recorded as aborted with the last stable offset just after the marker.
    pub(crate) fn record_marker(
        &mut self,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        control: ControlType,
        offset: Offset,
        now_ms: i64,
    ) {
        let slot = self.touch(producer_id, epoch, now_ms);
        let entry = &mut self.slots[slot as usize].entry;
        if epoch > entry.epoch {
            entry.epoch = epoch;
            entry.clear_batches();
        }
        entry.verified_epoch = None;
        entry.coordinator_epoch = Some(crate::txn::COORDINATOR_EPOCH);
        entry.last_activity_ms = now_ms;
        let first = entry.current_txn_first_offset.take();
        if let Some(first) = first {
            let removed = self.ongoing.remove(&first);
            assert_eq!(removed, Some(producer_id), "ongoing follows the entries");
            if control == ControlType::Abort {
                let after = Offset(offset.0 + 1);
                let last_stable_offset =
                    self.first_unstable_offset().map_or(after, |o| o.min(after));
                assert!(self.aborted.last().is_none_or(|e| e.last_offset < offset));
                self.aborted.push(AbortedTxn {
                    producer_id,
                    first_offset: first,
                    last_offset: offset,
                    last_stable_offset,
                });
            }
        }
        self.version += 1;
    }

    /// [`Self::record_marker`], first saving into `undo` what [`Self::undo`] needs.
    pub(crate) fn record_marker_undoable(
        &mut self,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        control: ControlType,
        offset: Offset,
        now_ms: i64,
        undo: &mut Vec<(ProducerId, Option<ProducerEntry>)>,
    ) {
        self.save_for_undo(producer_id, undo);
        self.record_marker(producer_id, epoch, control, offset, now_ms);
    }

    /// The slot of `producer_id`, made the most recently active; a new entry at `epoch`
    /// when there is none (evicting as [`Self::insert_slot`] does).
    fn touch(&mut self, producer_id: ProducerId, epoch: ProducerEpoch, now_ms: i64) -> u32 {
        let slot = match self.by_id.get(&producer_id) {
            Some(&slot) => {
                self.unlink(slot);
                slot
            }
            None => self.insert_slot(producer_id, ProducerEntry::new(epoch, now_ms)),
        };
        self.link_newest(slot);
        slot
    }

    /// Puts back the entries saved by the `*_undoable` methods (a commit round whose
    /// writes were refused), and drops the aborted transactions whose marker is at or
    /// after `round_start` (the round's; by offset, not by count, since the cleaner and
    /// retention may forget older entries meanwhile). The restored entries count as the
    /// most recently active. `saved` is left empty (its capacity is reused by the committer).
    pub(crate) fn undo(
        &mut self,
        saved: &mut Vec<(ProducerId, Option<ProducerEntry>)>,
        round_start: Offset,
    ) {
        let keep = self
            .aborted
            .partition_point(|e| e.last_offset < round_start);
        self.aborted.truncate(keep);
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
    /// A transactional batch opens the producer's transaction if none is open.
    pub(crate) fn record(&mut self, batch: &ProducerBatch, written: BatchMetadata, now_ms: i64) {
        let slot = self.touch(batch.producer_id, batch.epoch, now_ms);
        let entry = &mut self.slots[slot as usize].entry;
        if entry.epoch != batch.epoch {
            // The transaction fields outlive the batches of the older epoch: the
            // verification may already be for the new one, and an open transaction is
            // closed only by its marker.
            let (open, verified) = (entry.current_txn_first_offset, entry.verified_epoch);
            let (coordinator_epoch, epoch_bump) =
                (entry.coordinator_epoch, entry.verified_epoch_bump);
            *entry = ProducerEntry::new(batch.epoch, now_ms);
            entry.current_txn_first_offset = open;
            entry.verified_epoch = verified;
            entry.verified_epoch_bump = epoch_bump;
            entry.coordinator_epoch = coordinator_epoch;
        }
        entry.push(written);
        entry.last_activity_ms = now_ms;
        let opens = batch.transactional && !entry.in_txn();
        if opens {
            entry.current_txn_first_offset = Some(written.first_offset);
            self.ongoing.insert(written.first_offset, batch.producer_id);
        }
        self.version += 1;
    }

    /// Adds an entry read from a snapshot as the most recently active one (a snapshot
    /// lists producers least recently active first). Entries beyond the bound evict the
    /// oldest, as at run time.
    pub(crate) fn insert_loaded(&mut self, producer_id: ProducerId, entry: ProducerEntry) {
        if let Some(&slot) = self.by_id.get(&producer_id) {
            self.remove_slot(slot);
        }
        let open = entry.current_txn_first_offset;
        let slot = self.insert_slot(producer_id, entry);
        if let Some(first) = open {
            self.ongoing.insert(first, producer_id);
        }
        self.link_newest(slot);
        self.version += 1;
    }

    /// Forgets producers idle for `expiration_ms` or more at `now_ms` (Kafka's
    /// `producer.id.expiration.ms`), except those with an open transaction (Kafka's rule).
    /// Returns how many were dropped.
    pub(crate) fn expire(&mut self, now_ms: i64, expiration_ms: u64) -> usize {
        let expiration_ms = i64::try_from(expiration_ms).unwrap_or(i64::MAX);
        self.retain(|_, entry| {
            entry.in_txn() || now_ms.saturating_sub(entry.last_activity_ms) < expiration_ms
        })
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
            if let Some(victim) = self.eviction_victim() {
                self.remove_slot(victim);
            }
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

    /// The slot a new producer takes at a full table: the least recently active producer
    /// without an open transaction; the least recently active one when all have one (only
    /// recovery and snapshot loading get there: at run time `check_room` refuses first).
    fn eviction_victim(&self) -> Option<u32> {
        let mut at = self.oldest;
        while let Some(slot) = self.slots.get(at as usize) {
            if !slot.entry.in_txn() {
                return Some(at);
            }
            at = slot.newer;
        }
        (self.oldest != NIL).then_some(self.oldest)
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
        if let Some(first) = removed.entry.current_txn_first_offset {
            self.ongoing.remove(&first);
        }
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

/// The transaction rules of the module header for a data batch: `txn_open`, `epoch` and
/// `last_seq` describe the producer before the batch (epoch `None`: unknown producer;
/// `last_seq`: its newest batch at that epoch), `verified` the coordinator's verification
/// (its epoch, and whether it was for a Transactions V2 transaction). Returns whether the
/// transaction is open after the batch.
fn check_txn(
    batch: &ProducerBatch,
    txn_open: bool,
    (epoch, last_seq): (Option<ProducerEpoch>, Option<i32>),
    verified: Option<(ProducerEpoch, bool)>,
) -> Result<bool, LogError> {
    let refuse = |why| {
        Err(LogError::InvalidTxnState {
            producer_id: batch.producer_id,
            why,
            not_in_transaction: false,
        })
    };
    match (batch.transactional, txn_open) {
        (false, false) => Ok(false),
        (false, true) => refuse("a non-transactional batch while its transaction is open"),
        (true, true) if epoch == Some(batch.epoch) => Ok(true),
        (true, true) => refuse("a newer epoch while the older epoch's transaction is open"),
        // Transactions V2: every transaction has an epoch of its own, so its first batch
        // in a partition starts at 0 (Kafka refuses any other with OUT_OF_ORDER_SEQUENCE).
        (true, false)
            if verified == Some((batch.epoch, true))
                && last_seq.is_none()
                && batch.first_seq != 0 =>
        {
            Err(LogError::OutOfOrderSequence {
                producer_id: batch.producer_id,
                expected: 0,
                received: batch.first_seq,
            })
        }
        (true, false) if verified.map(|(e, _)| e) == Some(batch.epoch) => Ok(true),
        (true, false) => Err(LogError::InvalidTxnState {
            producer_id: batch.producer_id,
            why: "the partition is not part of the producer's transaction",
            not_in_transaction: true,
        }),
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
    use crate::config::PRODUCER_EVICTION_IDLE_MS_DEFAULT;

    /// The default eviction window, in the table's signed milliseconds.
    const IDLE: i64 = PRODUCER_EVICTION_IDLE_MS_DEFAULT as i64;

    /// A room check at `now_ms` with the default eviction window.
    fn at(now_ms: i64) -> Room {
        Room::new(now_ms, PRODUCER_EVICTION_IDLE_MS_DEFAULT)
    }

    fn batch(producer_id: i64, epoch: i16, first_seq: i32, records: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id: ProducerId(producer_id),
            epoch: ProducerEpoch(epoch),
            first_seq,
            last_seq: increment_sequence(first_seq, records - 1),
            transactional: false,
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
        assert_eq!(
            table.check(&b, &mut staged, at(now)).expect("accepted"),
            None
        );
        table.record(&b, written(&b, offset), now);
    }

    fn check(
        table: &ProducerStateTable,
        b: ProducerBatch,
    ) -> Result<Option<BatchMetadata>, LogError> {
        table.check(&b, &mut Vec::new(), at(1))
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
            table
                .check(&batch(1, 0, 1, 2), &mut staged, at(1))
                .expect("ok"),
            None
        );
        assert_eq!(
            table
                .check(&batch(1, 0, 3, 1), &mut staged, at(1))
                .expect("ok"),
            None
        );
        assert!(table.check(&batch(1, 0, 3, 1), &mut staged, at(1)).is_err());
        let mut staged = Vec::new();
        assert_eq!(
            table
                .check(&batch(1, 1, 0, 2), &mut staged, at(1))
                .expect("ok"),
            None
        );
        assert_eq!(
            table
                .check(&batch(1, 1, 2, 1), &mut staged, at(1))
                .expect("ok"),
            None
        );
    }

    #[test]
    fn full_table_evicts_only_producers_idle_long_enough() {
        // Goal: with room for 3, a new producer evicts the one idle longest when it has been
        // idle for the eviction bound, and is refused (nothing recorded) when even the
        // oldest is more recent; slot bookkeeping stays consistent through many rounds.
        let idle = IDLE;
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
        assert!(table
            .check(&batch(5, 0, 0, 1), &mut staged, at(idle))
            .is_ok());
        let second = table.check(&batch(6, 0, 0, 1), &mut staged, at(idle));
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
    fn the_eviction_window_is_the_callers() {
        // Goal: the window passed in decides: a producer idle for 2 s is kept against a new
        // one under the default window (10 minutes) and a 3 s window, and gives up its slot
        // under a 1 s window; a verification's room check takes the same window.
        let mut table = ProducerStateTable::new(1);
        append(&mut table, batch(1, 0, 0, 1), 0, 0);
        let new = batch(2, 0, 0, 1);
        let full = |r: Result<Option<BatchMetadata>, LogError>| {
            matches!(r, Err(LogError::ProducerStateFull { .. }))
        };
        assert!(full(table.check(&new, &mut Vec::new(), at(2_000))));
        assert!(full(table.check(
            &new,
            &mut Vec::new(),
            Room::new(2_000, 3_000)
        )));
        assert!(table
            .check(&new, &mut Vec::new(), Room::new(2_000, 1_000))
            .is_ok());
        let mut undo = Vec::new();
        let v = (ProducerId(3), ProducerEpoch(0), false);
        let refused = table.verify_txn(v, Room::new(2_000, 3_000), &mut undo);
        assert!(matches!(refused, Err(LogError::ProducerStateFull { .. })));
        table
            .verify_txn(v, Room::new(2_000, 1_000), &mut undo)
            .expect("evicts 1");
        assert!(table.get(ProducerId(1)).is_none() && table.get(ProducerId(3)).is_some());
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
    fn txn_batch(producer_id: i64, epoch: i16, first_seq: i32, records: i32) -> ProducerBatch {
        ProducerBatch {
            transactional: true,
            ..batch(producer_id, epoch, first_seq, records)
        }
    }

    fn verify(table: &mut ProducerStateTable, producer_id: i64, epoch: i16) {
        let mut undo = Vec::new();
        table
            .verify_txn(
                (ProducerId(producer_id), ProducerEpoch(epoch), false),
                at(1),
                &mut undo,
            )
            .expect("verified");
    }

    fn marker(table: &mut ProducerStateTable, id: i64, epoch: i16, control: ControlType, at: i64) {
        table
            .check_marker(ProducerId(id), ProducerEpoch(epoch))
            .expect("marker accepted");
        table.record_marker(ProducerId(id), ProducerEpoch(epoch), control, Offset(at), 1);
    }

    fn is_txn_state(result: Result<Option<BatchMetadata>, LogError>) -> bool {
        matches!(result, Err(LogError::InvalidTxnState { .. }))
    }

    #[test]
    fn transactional_batches_need_a_verified_partition_or_an_open_transaction() {
        // Goal: each data row of the table in docs/transactions.md §6.1 gives its outcome.
        let mut table = ProducerStateTable::new(10);
        // Not verified: refused, for a new producer and for a known one.
        assert!(is_txn_state(check(&table, txn_batch(1, 0, 0, 1))));
        append(&mut table, batch(2, 0, 0, 1), 0, 1);
        assert!(is_txn_state(check(&table, txn_batch(2, 0, 1, 1))));
        // Verified for another epoch: refused; for this one: accepted, opens at its offset.
        verify(&mut table, 1, 1);
        assert!(is_txn_state(check(&table, txn_batch(1, 2, 0, 1))));
        append(&mut table, txn_batch(1, 1, 0, 2), 10, 1);
        assert_eq!(table.first_unstable_offset(), Some(Offset(10)));
        // Inside the open transaction: accepted; a non-transactional batch: refused.
        append(&mut table, txn_batch(1, 1, 2, 1), 12, 1);
        assert!(is_txn_state(check(&table, batch(1, 1, 3, 1))));
        // A stale epoch is still the data-path fence.
        assert!(matches!(
            check(&table, txn_batch(1, 0, 3, 1)),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
        // A newer epoch while the older epoch's transaction is open: refused.
        assert!(is_txn_state(check(&table, txn_batch(1, 2, 0, 1))));
        assert_eq!(table.first_unstable_offset(), Some(Offset(10)));
    }

    #[test]
    fn a_v2_transaction_starts_each_partition_at_sequence_zero() {
        // Goal: Kafka's rule for a verification that `supportsEpochBump` (Transactions V2):
        // with no batch of the producer at the epoch here (a new producer, or after the
        // previous transaction's marker bumped the epoch), the first batch must start at
        // sequence 0 (OUT_OF_ORDER_SEQUENCE otherwise); a V1 verification accepts any.
        let mut table = ProducerStateTable::new(10);
        let mut undo = Vec::new();
        let v2 = (ProducerId(1), ProducerEpoch(3), true);
        table.verify_txn(v2, at(1), &mut undo).expect("verified");
        assert!(matches!(
            check(&table, txn_batch(1, 3, 5, 1)),
            Err(LogError::OutOfOrderSequence { expected: 0, .. })
        ));
        append(&mut table, txn_batch(1, 3, 0, 2), 0, 1);
        append(&mut table, txn_batch(1, 3, 2, 1), 2, 1);
        // The V2 end: a marker at the bumped epoch forgets the batches; the next
        // transaction starts at 0 again.
        marker(&mut table, 1, 4, ControlType::Commit, 3);
        let next = (ProducerId(1), ProducerEpoch(4), true);
        table.verify_txn(next, at(1), &mut undo).expect("verified");
        assert!(matches!(
            check(&table, txn_batch(1, 4, 3, 1)),
            Err(LogError::OutOfOrderSequence { expected: 0, .. })
        ));
        assert_eq!(check(&table, txn_batch(1, 4, 0, 1)).expect("from 0"), None);
        // V1: the same state accepts any first sequence, as before.
        verify(&mut table, 2, 0);
        assert_eq!(check(&table, txn_batch(2, 0, 7, 1)).expect("any"), None);
    }

    #[test]
    fn staged_batches_of_one_request_see_the_transaction_they_open() {
        // Goal: in one request, a verified transactional batch opens the transaction for
        // the next one, and a non-transactional batch after it is refused.
        let mut table = ProducerStateTable::new(10);
        verify(&mut table, 1, 0);
        let mut staged = Vec::new();
        assert!(table
            .check(&txn_batch(1, 0, 0, 1), &mut staged, at(1))
            .is_ok());
        assert!(table
            .check(&txn_batch(1, 0, 1, 1), &mut staged, at(1))
            .is_ok());
        let mixed = table.check(&batch(1, 0, 2, 1), &mut staged, at(1));
        assert!(matches!(mixed, Err(LogError::InvalidTxnState { .. })));
    }

    #[test]
    fn markers_close_transactions_record_aborts_and_clear_verification() {
        // Goal: the marker row of §6.1: COMMIT closes, ABORT closes and records the
        // aborted transaction with the LSO after it, both clear the verification, the
        // ongoing map (and so the LSO) follows, and a newer epoch is adopted.
        let mut table = ProducerStateTable::new(10);
        verify(&mut table, 1, 0);
        verify(&mut table, 2, 0);
        append(&mut table, txn_batch(1, 0, 0, 2), 0, 1);
        append(&mut table, txn_batch(2, 0, 0, 1), 2, 1);
        assert_eq!(table.first_unstable_offset(), Some(Offset(0)));
        marker(&mut table, 1, 0, ControlType::Abort, 3);
        assert_eq!(table.first_unstable_offset(), Some(Offset(2)));
        let aborted = table.aborted().to_vec();
        assert_eq!(aborted.len(), 1);
        assert_eq!(
            (
                aborted[0].first_offset,
                aborted[0].last_offset,
                aborted[0].last_stable_offset
            ),
            (Offset(0), Offset(3), Offset(2)),
            "producer 2 still holds the LSO at 2"
        );
        // Verification is cleared: a new transaction needs a new AddPartitionsToTxn.
        assert!(is_txn_state(check(&table, txn_batch(1, 0, 2, 1))));
        marker(&mut table, 2, 0, ControlType::Commit, 4);
        assert_eq!(table.first_unstable_offset(), None);
        assert_eq!(table.aborted().len(), 1, "a commit records nothing");
        // A marker with a newer epoch fences the old one; an older epoch is refused.
        marker(&mut table, 2, 3, ControlType::Abort, 5);
        assert_eq!(
            table.aborted().len(),
            1,
            "no open transaction: nothing aborted"
        );
        assert_eq!(
            table.get(ProducerId(2)).expect("entry").epoch,
            ProducerEpoch(3)
        );
        assert!(matches!(
            check(&table, batch(2, 0, 1, 1)),
            Err(LogError::InvalidProducerEpoch { .. })
        ));
        assert!(table.check_marker(ProducerId(2), ProducerEpoch(2)).is_err());
        // A marker for a producer never seen here creates its entry at that epoch.
        marker(&mut table, 9, 4, ControlType::Commit, 6);
        assert_eq!(
            table.get(ProducerId(9)).expect("entry").epoch,
            ProducerEpoch(4)
        );
        assert_eq!(table.trim_aborted(Offset(3)), 0);
        assert_eq!(table.trim_aborted(Offset(4)), 1);
    }

    #[test]
    fn open_transactions_are_never_evicted_or_expired() {
        // Goal: a table full of open transactions refuses a new producer; expiry and
        // eviction skip producers with an open transaction; undo restores `ongoing`.
        let idle = IDLE;
        let mut table = ProducerStateTable::new(2);
        verify(&mut table, 1, 0);
        verify(&mut table, 2, 0);
        append(&mut table, txn_batch(1, 0, 0, 1), 0, 0);
        append(&mut table, txn_batch(2, 0, 0, 1), 1, 0);
        let refused = table.check(&batch(3, 0, 0, 1), &mut Vec::new(), at(10 * idle));
        assert!(matches!(refused, Err(LogError::ProducerStateFull { .. })));
        assert_eq!(table.expire(10 * idle, 1), 0);
        // Once 1's transaction is closed it may go.
        marker(&mut table, 1, 0, ControlType::Commit, 2);
        let mut staged = Vec::new();
        assert!(table
            .check(&batch(3, 0, 0, 1), &mut staged, at(10 * idle))
            .is_ok());
        let mut undo = Vec::new();
        let header = header_bytes(3, 0, 0, false);
        table.record_header_undoable(
            &BatchHeader::parse(&header).unwrap(),
            Offset(3),
            10 * idle,
            &mut undo,
        );
        assert!(table.get(ProducerId(1)).is_none(), "1 evicted, 2 kept");
        assert_eq!(table.first_unstable_offset(), Some(Offset(1)));
        table.undo(&mut undo, Offset(i64::MAX));
        assert!(table.get(ProducerId(1)).is_some() && table.get(ProducerId(3)).is_none());
        assert_eq!(table.first_unstable_offset(), Some(Offset(1)));
        // Undo of an ABORT marker removes its aborted entry and reopens the transaction.
        let mut undo = Vec::new();
        table.record_marker_undoable(
            ProducerId(2),
            ProducerEpoch(0),
            ControlType::Abort,
            Offset(3),
            1,
            &mut undo,
        );
        assert_eq!(
            (table.aborted().len(), table.first_unstable_offset()),
            (1, None)
        );
        table.undo(&mut undo, Offset(3));
        assert_eq!(
            (table.aborted().len(), table.first_unstable_offset()),
            (0, Some(Offset(1)))
        );
    }

    #[test]
    fn forgotten_aborted_transactions_wait_for_a_checkpoint() {
        // Goal: the cleaner may remove the ABORT marker of a forgotten aborted transaction
        // only once a durable checkpoint describes the table without it; undo by offset
        // keeps older entries whatever was forgotten meanwhile.
        let mut table = ProducerStateTable::new(4);
        let entry = |first, last| AbortedTxn {
            producer_id: ProducerId(1),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(last + 1),
        };
        for (first, last) in [(0, 2), (3, 5), (6, 8)] {
            table.push_loaded_aborted(entry(first, last));
        }
        assert!(table.forgotten_aborted_durable(), "nothing forgotten");
        assert_eq!(table.forget_aborted(&[Offset(2), Offset(7)]), 1);
        assert!(!table.forgotten_aborted_durable());
        table.note_checkpointed(table.version() - 1);
        assert!(!table.forgotten_aborted_durable(), "an older state");
        table.note_checkpointed(table.version());
        assert!(table.forgotten_aborted_durable());
        table.undo(&mut Vec::new(), Offset(6));
        assert_eq!(table.aborted(), &[entry(3, 5)]);
    }

    /// A batch header (no records) of producer `id` at `epoch` and `seq`.
    fn header_bytes(id: i64, epoch: i16, seq: i32, transactional: bool) -> Vec<u8> {
        use crate::batch::{Attributes, BatchHeaderMut};
        let mut b = crate::batch::test_batches::batch(1, 1, 0);
        let mut header = BatchHeaderMut::new(&mut b).unwrap();
        header.set_producer_id(ProducerId(id));
        header.set_producer_epoch(ProducerEpoch(epoch));
        header.set_base_sequence(seq);
        header.set_attributes(match transactional {
            true => Attributes::TRANSACTIONAL,
            false => Attributes(0),
        });
        b
    }
}
