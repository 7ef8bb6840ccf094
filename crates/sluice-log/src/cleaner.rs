//! The log cleaner: keeps the newest record per key in partitions whose `cleanup.policy`
//! includes `compact` (Kafka's log compaction; design and rules in `docs/compaction.md`).
//!
//! Guarantees:
//! - Offsets never change: a cleaned segment holds the surviving records at their offsets;
//!   removed batches are covered by empty *gap batches*, so every segment stays a run of
//!   consecutive batches and readers, indexes and recovery work unchanged.
//! - Crash-safe replacement, one segment at a time: the cleaned bytes go to a new file
//!   (`journal/<seq>.cleaned`, synced) and the new extents to `<base>.extents.cleaned`
//!   (synced) before the rename over `<base>.extents` switches to them. A crash at any
//!   step leaves the old segment or the new one, never a mix and never a loss.
//! - It runs on its own threads (`sluice-cleaner-N`), never on the async runtime or the
//!   committer; it holds a partition's `trim_lock` only for the swap (two renames, the old
//!   files' removals and three directory syncs), which retention, DeleteRecords and
//!   partition deletion also take, but produce and fetch never do: they never wait for a
//!   pass (`test_compaction.py::test_produce_is_not_held_up_by_a_throttled_pass`).
//! - Bounded memory: the key map is one allocation of at most the thread's share of
//!   `log.cleaner.dedupe.buffer.size`, made when a pass starts and never grown (at most
//!   that / [`KEY_MAP_ENTRY_BYTES`] keys); one batch (and its records) is in memory at a
//!   time, plus a write buffer of [`WRITE_BUFFER_BYTES`].
//! - I/O is throttled to `log.cleaner.io.max.bytes.per.second` (read plus written).
//! - The log never decompresses: records are read and rebuilt through [`RecordCodec`],
//!   which the broker supplies.
//! - Transactions as in Kafka (docs/compaction.md §6): nothing at or past the last stable
//!   offset is cleaned; aborted data goes like old versions and never counts in the key
//!   map; a marker stays while data of its transaction remains before it, then for
//!   `delete.retention.ms` (a delete horizon, as tombstones get). Offsets, the
//!   aborted-transaction list and producer state stay valid for read_committed readers
//!   and producers: only records that no reader may see, or that a newer committed
//!   version supersedes, go.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_record::Compression;

use crate::batch::{self, BatchFields, BatchHeader, HEADER_LEN};
use crate::cleaner_checkpoint::{self, Entry, EntryKey};
use crate::cleaner_txn::TxnWalk;
use crate::config::LogConfig;
use crate::engine::{Engine, Stats};
use crate::error::LogError;
use crate::fs::{self, OpenMode};
use crate::journal::JournalFile;
use crate::mutation::mutated;
use crate::partition::{Partition, SEGMENT_BYTES_MAX, SEGMENT_OFFSETS_MAX};
use crate::segment::{now_ms, Segment, CLEANED_SUFFIX};
use crate::txn::{self, AbortedTxn};
use crate::types::Offset;

/// Cleaned data files take sequence numbers from here on, so they never meet a journal
/// file's (journal sequence numbers count up from 0).
pub(crate) const CLEANED_SEQ_BASE: u64 = 1 << 63;
/// Bytes of one key map slot: a 128-bit key hash and an offset, as three `u64`s (no
/// padding: a `u128` field would be 16-byte aligned and make the slot 32 bytes).
const KEY_MAP_SLOT_BYTES: u64 = std::mem::size_of::<Slot>() as u64;
/// Share of its slots the key map fills at most (percent): with linear probing, a lookup
/// of an absent key probes about 8.5 slots on average at 75 %, and about 50 at 90 %.
const KEY_MAP_LOAD_PERCENT: u64 = 75;
/// Memory one key map entry costs: a slot (24 bytes) of a table at most 75 % full, so 32
/// bytes. The table is one allocation made at the start of a pass and never grown, so
/// `log.cleaner.dedupe.buffer.size` / this many entries is a true bound on its memory.
pub const KEY_MAP_ENTRY_BYTES: u64 = KEY_MAP_SLOT_BYTES * 100 / KEY_MAP_LOAD_PERCENT;
/// Cleaned bytes buffered before each write of the cleaned data file.
const WRITE_BUFFER_BYTES: usize = 1 << 20;
/// Bits of a cleaned file's sequence number below the open time (ms): files allocated in
/// one process run stay below the next run's start unless it allocates 65 536 per ms.
const CLEANED_SEQ_TIME_SHIFT: u32 = 16;

/// Reads and rewrites the records of one stored v2 batch for the cleaner. The broker
/// implements it with its codecs (`sluice_protocol::record_compact`).
pub trait RecordCodec: Send + Sync + std::fmt::Debug {
    /// Calls `visit` for every record of `batch`, in order.
    fn scan(&self, batch: &[u8], visit: &mut dyn FnMut(RecordKey<'_>)) -> Result<(), String>;
    /// Appends to `out` the batch with only the records `keep` accepts (called once per
    /// record, in order, with its offset delta), recompressed with the batch's codec, the
    /// header's offsets, producer fields and timestamps kept, length, count and CRC new.
    /// Returns how many records were kept.
    /// With `delete_horizon_ms`, the batch is stamped with it (Kafka's KIP-534: attribute
    /// bit 6, `baseTimestamp` = the horizon, record timestamp deltas rebased so every
    /// record keeps its timestamp).
    fn rebuild(
        &self,
        batch: &[u8],
        keep: &mut dyn FnMut(i32) -> bool,
        delete_horizon_ms: Option<i64>,
        out: &mut Vec<u8>,
    ) -> Result<i32, String>;
}

/// One record as the cleaner sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordKey<'a> {
    pub offset_delta: i32,
    pub timestamp_ms: i64,
    /// `None`: a keyless record (removed on a compacted topic).
    pub key: Option<&'a [u8]>,
    /// A null value.
    pub tombstone: bool,
}

/// What one pass over one partition did (logged, and returned by `clean_now`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanerPass {
    pub topic: String,
    pub partition: i32,
    /// Segments read and filtered.
    pub segments_read: usize,
    /// Segments replaced by a cleaned version.
    pub segments_cleaned: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    pub duration_ms: u64,
}

/// The cleaner's shared state (in the engine): where each partition's dirty part starts,
/// which partitions a thread is cleaning, the next cleaned file number and the I/O budget.
#[derive(Debug, Default)]
pub(crate) struct CleanerState {
    /// Per partition uid: offsets below this were cleaned by an earlier pass.
    first_dirty: Mutex<HashMap<u64, Offset>>,
    /// Per partition uid: the latest delete horizon among the batches that still held
    /// tombstones after the last pass. Once it has passed, the partition gets a pass even
    /// with nothing dirty, so its tombstones go (Kafka's `latestDeleteHorizon`). Persisted
    /// in the cleaner checkpoint, so this holds across a restart too (Kafka's does not).
    delete_horizons: Mutex<HashMap<u64, i64>>,
    /// The cleaner checkpoint as read at open, for partitions no pass has looked at yet
    /// (moved into `first_dirty` and `delete_horizons` by the first plan that does).
    loaded: Mutex<HashMap<EntryKey, Entry>>,
    busy: Mutex<HashSet<u64>>,
    /// 0 until first used.
    next_seq: Mutex<u64>,
    /// The I/O rate limit.
    io: crate::throttle::Throttle,
}

impl CleanerState {
    fn seq_floor(next: &mut u64) {
        if *next == 0 {
            let now = u64::try_from(now_ms()).unwrap_or(0) & ((1 << 46) - 1);
            *next = CLEANED_SEQ_BASE + (now << CLEANED_SEQ_TIME_SHIFT);
        }
    }

    /// Notes an existing cleaned file (recovery), so new ones get higher numbers.
    pub(crate) fn note_existing_seq(&self, seq: u64) {
        let mut next = self.next_seq.lock();
        Self::seq_floor(&mut next);
        *next = (*next).max(seq + 1);
    }

    pub(crate) fn allocate_seq(&self) -> u64 {
        let mut next = self.next_seq.lock();
        Self::seq_floor(&mut next);
        let seq = *next;
        *next += 1;
        seq
    }

    /// Sleeps until `bytes` of cleaner I/O are paid for (`log.cleaner.io.max.bytes.per.second`).
    fn charge(&self, bytes: u64, bytes_per_second: u64, stopping: &AtomicBool) {
        self.io.charge(bytes, bytes_per_second, stopping);
    }
}

/// `<seq:020>.cleaned` in the journal directory.
pub(crate) fn cleaned_file_name(seq: u64) -> String {
    format!("{seq:020}{CLEANED_SUFFIX}")
}

fn parse_cleaned_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(CLEANED_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&seq| seq >= CLEANED_SEQ_BASE)
}

/// An extents file written aside by a pass that did not reach its switch: a cleaned
/// segment (`<base>.extents.cleaned`) or a journal cleaner's rewrite of a segment's
/// records (`<base>.extents.moved`). Either way the segment file in force is the old one.
pub(crate) fn is_aside_name(name: &str) -> bool {
    name.strip_suffix(CLEANED_SUFFIX)
        .or_else(|| name.strip_suffix(crate::segment::MOVED_SUFFIX))
        .and_then(|n| n.strip_suffix(crate::extents::FILE_SUFFIX))
        .is_some_and(|s| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()))
}

/// Recovery: registers every cleaned data file for reading (segments point into them).
/// Those no segment names are deleted by the first retirement after open.
pub(crate) fn register_cleaned_files(engine: &Engine) -> io::Result<()> {
    let fs = engine.fs.as_ref();
    for entry in fs.read_dir(&engine.journal_dir)? {
        let Some(seq) = parse_cleaned_file_name(&entry.name) else {
            continue;
        };
        let file = fs.open(&engine.journal_dir.join(&entry.name), OpenMode::Existing)?;
        engine.journal_files.insert(JournalFile::new(seq, file));
        engine.cleaner.note_existing_seq(seq);
    }
    Ok(())
}

/// Reads the cleaner checkpoint (recovery, before any pass).
pub(crate) fn load_checkpoint(engine: &Engine) {
    let loaded = cleaner_checkpoint::load(engine.fs.as_ref(), &engine.config.data_dir);
    *engine.cleaner.loaded.lock() = loaded;
}

fn entry_key(partition: &Partition) -> EntryKey {
    (
        partition.key.topic.to_string(),
        partition.key.partition,
        partition.key.topic_id,
    )
}

/// Where a partition's dirty part starts: from this run's passes, else from the
/// checkpoint (when it is within the log; its delete horizon is taken along), else the
/// log start (`i64::MIN`: all dirty).
fn first_dirty(engine: &Engine, partition: &Partition) -> Offset {
    let mut first_dirty = engine.cleaner.first_dirty.lock();
    if let Some(&offset) = first_dirty.get(&partition.uid) {
        return offset;
    }
    let loaded = engine
        .cleaner
        .loaded
        .lock()
        .remove(&entry_key(partition))
        .filter(|e| e.first_dirty <= partition.log_end());
    if let Some(horizon) = loaded.and_then(|e| e.delete_horizon_ms) {
        let mut horizons = engine.cleaner.delete_horizons.lock();
        horizons.entry(partition.uid).or_insert(horizon);
    }
    let offset = loaded.map_or(Offset(i64::MIN), |e| e.first_dirty);
    first_dirty.insert(partition.uid, offset);
    offset
}

/// Persists every partition's first dirty offset and delete horizon (after a pass's
/// swaps are durable, and before the first stamped batch of a partition without a
/// horizon is swapped in). A failed write poisons the log unless the system refused it
/// for space or descriptors (the pass stays done in memory; the next pass writes the file
/// again).
fn store_checkpoint(engine: &Engine) -> Result<(), LogError> {
    let partitions = engine.partitions_snapshot();
    let entries: Vec<(EntryKey, Entry)> = {
        let first_dirty = engine.cleaner.first_dirty.lock();
        let loaded = engine.cleaner.loaded.lock();
        let horizons = engine.cleaner.delete_horizons.lock();
        partitions
            .iter()
            .filter(|p| !p.is_deleted())
            .filter_map(|p| {
                let key = entry_key(p);
                let entry = match first_dirty.get(&p.uid) {
                    Some(&first_dirty) => Entry {
                        first_dirty,
                        delete_horizon_ms: horizons.get(&p.uid).copied(),
                    },
                    None => *loaded.get(&key)?,
                };
                (entry.first_dirty.0 >= 0).then_some((key, entry))
            })
            .collect()
    };
    let result = cleaner_checkpoint::store(engine.fs.as_ref(), &engine.config.data_dir, entries);
    engine.guard("cleaner checkpoint", result)
}

/// Deletes the cleaned data files nothing refers to any more (no segment, reader or
/// fetch range). They are never replayed, so no checkpoint needs them.
pub(crate) fn retire_cleaned_files(engine: &Engine) {
    for seq in engine
        .journal_files
        .take_unreferenced_from(CLEANED_SEQ_BASE)
    {
        let path = engine.journal_dir.join(cleaned_file_name(seq));
        if let Err(error) = engine.fs.remove_file(&path) {
            tracing::warn!(%error, path = %path.display(), "could not delete a cleaned data file");
        }
    }
}

/// A cleaner thread's body.
pub(crate) fn run(engine: Arc<Engine>, codec: Arc<dyn RecordCodec>) {
    let backoff = Duration::from_millis(engine.config.cleaner.backoff_ms.max(1));
    loop {
        if engine.stopping.load(Ordering::Acquire) || engine.is_poisoned() {
            break;
        }
        let cleaned = match clean_once(&engine, codec.as_ref(), now_ms()) {
            Ok(pass) => pass.is_some(),
            Err(error) => {
                tracing::warn!(%error, "log cleaner pass failed");
                false
            }
        };
        if !cleaned {
            engine.cleaner_signal.wait(backoff);
        }
    }
    tracing::debug!("log cleaner stopped");
}

/// Which segments of a partition a pass would clean.
struct Plan {
    segments: Vec<Arc<Segment>>,
    /// Segments `[..end]` are cleanable.
    end: usize,
    /// Segments `[dirty_from..end]` are dirty.
    dirty_from: usize,
    dirty_ratio: f64,
}

/// Cleans the partition that needs it most, if any is due. Returns what the pass did.
pub(crate) fn clean_once(
    engine: &Engine,
    codec: &dyn RecordCodec,
    now_ms: i64,
) -> Result<Option<CleanerPass>, LogError> {
    engine.check_writable()?;
    retire_cleaned_files(engine);
    let partitions = engine.partitions_snapshot();
    engine
        .cleaner
        .first_dirty
        .lock()
        .retain(|uid, _| partitions.iter().any(|p| p.uid == *uid));
    engine
        .cleaner
        .delete_horizons
        .lock()
        .retain(|uid, _| partitions.iter().any(|p| p.uid == *uid));
    let chosen = {
        let mut busy = engine.cleaner.busy.lock();
        let best = partitions
            .into_iter()
            .filter(|p| !p.is_deleted() && !busy.contains(&p.uid))
            .filter_map(|p| plan(engine, &p, now_ms).map(|plan| (p, plan)))
            .max_by(|a, b| a.1.dirty_ratio.total_cmp(&b.1.dirty_ratio));
        if let Some((partition, _)) = &best {
            busy.insert(partition.uid);
        }
        best
    };
    let Some((partition, plan)) = chosen else {
        return Ok(None);
    };
    let result = clean_partition(engine, codec, &partition, plan, now_ms);
    engine.cleaner.busy.lock().remove(&partition.uid);
    retire_cleaned_files(engine);
    result.map(Some)
}

/// The partition's cleanable and dirty segments, when a pass is due.
fn plan(engine: &Engine, partition: &Partition, now_ms: i64) -> Option<Plan> {
    let config = partition.config();
    if !config.cleanup_compact {
        return None;
    }
    let segments = partition.segments();
    // The last stable offset (<= the high watermark): a still-open transaction's data and
    // everything after it is never cleaned, so every transaction met in a pass is decided.
    let stable = partition.offsets().last_stable_offset;
    let lag_cutoff = now_ms.saturating_sub(config.min_compaction_lag_ms.max(0));
    let end = segments[..segments.len() - 1]
        .iter()
        .take_while(|s| {
            !s.is_empty()
                && s.committed_next_offset() <= stable
                && s.is_settled()
                && s.max_timestamp().0 <= lag_cutoff
        })
        .count();
    if end + 1 < segments.len() && !segments[end].is_settled() {
        // Sealed, but its extents are not on disk yet: a checkpoint now, instead of at the
        // next interval, lets the next pass take it.
        engine.checkpoint_signal.raise();
    }
    let first_dirty = first_dirty(engine, partition);
    let dirty_from = segments[..end]
        .iter()
        .position(|s| s.next_offset() > first_dirty)
        .unwrap_or(end);
    // Tombstones or markers whose delete horizon has passed make a pass due by themselves,
    // however little is dirty (Kafka's `logsWithTombstonesExpired`).
    let horizon_passed = end > 0
        && engine
            .cleaner
            .delete_horizons
            .lock()
            .get(&partition.uid)
            .is_some_and(|&h| h <= now_ms);
    if dirty_from == end {
        return horizon_passed.then_some(Plan {
            segments,
            end,
            dirty_from: end,
            dirty_ratio: 0.0,
        });
    }
    let bytes = |range: &[Arc<Segment>]| range.iter().map(|s| s.written_len()).sum::<u64>();
    let dirty = bytes(&segments[dirty_from..end]);
    let total = bytes(&segments[..end]).max(1);
    let dirty_ratio = dirty as f64 / total as f64;
    let overdue = earliest_dirty_timestamp(&segments[dirty_from..segments.len() - 1])
        .is_some_and(|t| t < now_ms.saturating_sub(config.max_compaction_lag_ms.max(1)));
    (dirty_ratio >= config.min_cleanable_dirty_ratio || overdue || horizon_passed).then_some(Plan {
        segments,
        end,
        dirty_from,
        dirty_ratio,
    })
}

/// The earliest first-batch timestamp of the dirty, non-active segments: a partition is
/// overdue by `max.compaction.lag.ms` once this is older (Kafka's `maxCompactionDelay`;
/// the largest timestamp would let one old record wait behind newer ones in its segment).
fn earliest_dirty_timestamp(dirty: &[Arc<Segment>]) -> Option<i64> {
    dirty.iter().filter_map(|s| s.first_batch_timestamp()).min()
}

/// One key map slot: the key hash's high and low halves and the offset plus one (0: the
/// slot is empty, so a zeroed allocation is an empty map).
type Slot = [u64; 3];

/// Newest offset per key, by a 128-bit hash of the key: an open-addressing table with
/// linear probing, sized once for the pass and never grown (no rehash doubles its memory
/// mid-pass, as a growing hash table's would).
struct KeyMap {
    /// Zero-initialised in one allocation: the system maps it lazily, so the pages a
    /// small pass never touches cost no resident memory.
    slots: Vec<Slot>,
    len: usize,
    /// Keys it may hold: at most [`KEY_MAP_LOAD_PERCENT`] of the slots, and always fewer
    /// than the slots, so a probe for an absent key ends at an empty slot.
    capacity: usize,
}

fn key_hash(key: &[u8]) -> u128 {
    let mut first = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut first);
    let mut second = std::collections::hash_map::DefaultHasher::new();
    0x9e37_79b9_7f4a_7c15u64.hash(&mut second);
    key.hash(&mut second);
    (u128::from(first.finish()) << 64) | u128::from(second.finish())
}

impl KeyMap {
    /// A map of at most `budget_bytes`, for up to `wanted` keys (fewer when the budget
    /// holds fewer).
    fn new(budget_bytes: u64, wanted: usize) -> Self {
        let budget_slots = budget_bytes / KEY_MAP_SLOT_BYTES;
        let budget_capacity = budget_slots / 100 * KEY_MAP_LOAD_PERCENT
            + budget_slots % 100 * KEY_MAP_LOAD_PERCENT / 100;
        let capacity = wanted.min(usize::try_from(budget_capacity).unwrap_or(usize::MAX));
        // ceil(capacity / load) <= budget_slots, since capacity <= budget_slots * load.
        let slots = capacity
            .saturating_mul(100)
            .div_ceil(KEY_MAP_LOAD_PERCENT as usize)
            .max(capacity + 1);
        Self {
            slots: vec![[0; 3]; slots],
            len: 0,
            capacity,
        }
    }

    /// Heap bytes the map holds (fixed for its life).
    #[cfg(test)]
    fn memory_bytes(&self) -> u64 {
        (self.slots.capacity() as u64) * KEY_MAP_SLOT_BYTES
    }

    /// The slot holding `hash`, or the empty slot where it would go.
    fn find(&self, hash: u128) -> usize {
        let (high, low) = ((hash >> 64) as u64, hash as u64);
        let n = self.slots.len();
        // The low half scaled to the table (Lemire's multiply-shift: no division).
        let mut at = ((u128::from(low) * n as u128) >> 64) as usize;
        loop {
            let slot = &self.slots[at];
            if slot[2] == 0 || (slot[0] == high && slot[1] == low) {
                return at;
            }
            at = if at + 1 == n { 0 } else { at + 1 };
        }
    }

    /// Records `offset` for the key, keeping the newest. False (nothing stored) when the
    /// key is new and the map is full.
    fn put(&mut self, hash: u128, offset: i64) -> bool {
        let at = self.find(hash);
        let stored = u64::try_from(offset).unwrap_or(0) + 1;
        let slot = &mut self.slots[at];
        if slot[2] == 0 {
            if self.len == self.capacity {
                return false;
            }
            *slot = [(hash >> 64) as u64, hash as u64, stored];
            self.len += 1;
        } else {
            slot[2] = slot[2].max(stored);
        }
        true
    }

    /// The newest offset recorded for the key.
    fn get(&self, hash: u128) -> Option<i64> {
        let slot = &self.slots[self.find(hash)];
        (slot[2] != 0).then(|| (slot[2] - 1) as i64)
    }

    /// Whether a key with this newest offset survives (not superseded by a newer one).
    fn is_newest(&self, key: &[u8], offset: i64) -> bool {
        self.get(key_hash(key))
            .is_none_or(|newest| offset >= newest)
    }
}

fn codec_error(what: String) -> LogError {
    LogError::Io(io::Error::new(io::ErrorKind::InvalidData, what))
}

/// Calls `visit` for each batch of a sealed segment, CRC-checked (the cleaner never turns
/// damaged bytes into a batch with a valid CRC).
fn for_each_batch(
    engine: &Engine,
    segment: &Segment,
    buf: &mut Vec<u8>,
    mut visit: impl FnMut(&[u8]) -> Result<(), LogError>,
) -> Result<(), LogError> {
    let len = segment.committed_len();
    let mut position = 0u64;
    let mut next = segment.base_offset;
    while position < len {
        if engine.stopping.load(Ordering::Acquire) {
            return Err(LogError::ShuttingDown); // The pass is dropped, nothing swapped.
        }
        let mut head = [0u8; HEADER_LEN];
        let read = segment.read_at(&mut head, position)?;
        let size = BatchHeader::parse(&head[..read])
            .ok()
            .and_then(|h| h.total_size())
            .filter(|&size| position + size as u64 <= len)
            .ok_or(LogError::CorruptBatch("cleaner: batch header does not fit"))?;
        buf.resize(size, 0);
        if segment.read_at(buf, position)? != size {
            return Err(LogError::CorruptBatch("cleaner: batch is short"));
        }
        let header = batch::validate_stored(buf)?;
        if header.base_offset() != next {
            // Readers and recovery would call this damage too; never build on it.
            return Err(LogError::CorruptBatch(
                "cleaner: batch does not continue the previous one",
            ));
        }
        next = header.next_offset();
        engine.cleaner.charge(
            size as u64,
            engine.config.cleaner.io_max_bytes_per_second,
            &engine.stopping,
        );
        Stats::add(&engine.stats.cleaner_bytes_read, size as u64);
        visit(buf)?;
        position += size as u64;
    }
    Ok(())
}

fn clean_partition(
    engine: &Engine,
    codec: &dyn RecordCodec,
    partition: &Arc<Partition>,
    plan: Plan,
    now_ms: i64,
) -> Result<CleanerPass, LogError> {
    let started = Instant::now();
    let config = partition.config();
    let mut report = CleanerPass {
        topic: partition.key.topic.to_string(),
        partition: partition.key.partition,
        ..CleanerPass::default()
    };
    let mut buf = Vec::new();
    // Taken after the plan read the last stable offset: every ABORT marker below it is in.
    let (aborted, aborted_durable) = {
        let table = partition.producers.lock();
        (table.aborted().to_vec(), table.forgotten_aborted_durable())
    };
    let (keys, mut map_end) = build_key_map(engine, codec, &plan, &aborted, &mut buf)?;
    if map_end == plan.dirty_from && plan.dirty_from < plan.end {
        // Not even one segment fits: skip it, so the cleaner does not spin on it.
        tracing::warn!(
            topic = %report.topic,
            partition = report.partition,
            base_offset = plan.segments[map_end].base_offset.0,
            "log.cleaner.dedupe.buffer.size is too small for this segment; it is not cleaned"
        );
        map_end += 1;
    } else {
        let (retained, retained_markers) = newest_producer_batches(partition);
        let olds = &plan.segments[..map_end];
        let rules = Rules {
            keys: &keys,
            retained: &retained,
            retained_markers: &retained_markers,
            txns: RefCell::new(TxnWalk::new(&aborted, olds[0].base_offset)),
            aborted: &aborted,
            aborted_durable,
            forget: RefCell::new(Vec::new()),
            now_ms,
            new_delete_horizon_ms: now_ms.saturating_add(config.delete_retention_ms.max(0)),
            latest_delete_horizon_ms: Cell::new(None),
        };
        let cleaned = clean_segments(
            engine,
            codec,
            partition,
            olds,
            &rules,
            &mut buf,
            &mut report,
        );
        // Aborted transactions with nothing left but their marker: readers need not skip
        // anything of them (whether or not this pass's swaps happened: their data went in
        // an earlier, durable pass).
        let forget = rules.forget.take();
        if !forget.is_empty() && partition.producers.lock().forget_aborted(&forget) > 0 {
            engine
                .producer_snapshot_wanted
                .store(true, Ordering::Release);
            engine.checkpoint_signal.raise();
        }
        cleaned?;
        let mut horizons = engine.cleaner.delete_horizons.lock();
        match rules.latest_delete_horizon_ms.get() {
            Some(horizon) => horizons.insert(partition.uid, horizon),
            None => horizons.remove(&partition.uid),
        };
    }
    engine
        .cleaner
        .first_dirty
        .lock()
        .insert(partition.uid, plan.segments[map_end - 1].next_offset());
    store_checkpoint(engine)?;
    let elapsed = started.elapsed();
    report.duration_ms = elapsed.as_millis() as u64;
    let stats = &engine.stats;
    Stats::add(&stats.cleaner_passes, 1);
    Stats::add(&stats.cleaner_pass_us, elapsed.as_micros() as u64);
    Stats::add(&stats.cleaner_bytes_before, report.bytes_before);
    Stats::add(&stats.cleaner_bytes_after, report.bytes_after);
    Stats::add(
        &engine.stats.cleaner_records_removed,
        report.records_removed,
    );
    tracing::info!(
        topic = %report.topic,
        partition = report.partition,
        segments_read = report.segments_read,
        segments_cleaned = report.segments_cleaned,
        bytes_before = report.bytes_before,
        bytes_after = report.bytes_after,
        records_removed = report.records_removed,
        duration_ms = report.duration_ms,
        "log cleaner pass"
    );
    Ok(report)
}

/// The newest offset of every key in the dirty segments, as many of them as the key map's
/// share of `log.cleaner.dedupe.buffer.size` holds. Returns the map and the end (segment
/// index) of the segments it covers.
fn build_key_map(
    engine: &Engine,
    codec: &dyn RecordCodec,
    plan: &Plan,
    aborted: &[AbortedTxn],
    buf: &mut Vec<u8>,
) -> Result<(KeyMap, usize), LogError> {
    let threads = engine.config.cleaner.threads.max(1) as u64;
    let dirty = &plan.segments[plan.dirty_from..plan.end];
    // A segment holds at most one key per offset: the map never needs more entries.
    let wanted = dirty
        .iter()
        .map(|s| offset_span(s))
        .fold(0, usize::saturating_add);
    let mut keys = KeyMap::new(engine.config.cleaner.dedupe_buffer_bytes / threads, wanted);
    let mut map_end = plan.dirty_from;
    let mut txns = plan
        .segments
        .get(plan.dirty_from)
        .map(|s| TxnWalk::new(aborted, s.base_offset));
    for segment in dirty {
        if keys.len.saturating_add(offset_span(segment)) > keys.capacity {
            break; // It fits only if that many keys would.
        }
        let txns = txns.as_mut().expect("a dirty segment");
        for_each_batch(engine, segment, buf, |bytes| {
            let header = BatchHeader::parse(bytes)?;
            if header.is_control() {
                txns.on_marker(&header, txn::control_type(&bytes[HEADER_LEN..]));
                return Ok(());
            }
            // Only committed data counts: an aborted version never hides an older one.
            if txns.on_data(&header) || header.records_count() == 0 {
                return Ok(());
            }
            let base = header.base_offset().0;
            codec
                .scan(bytes, &mut |record| {
                    if let Some(key) = record.key {
                        let stored = keys.put(key_hash(key), base + i64::from(record.offset_delta));
                        debug_assert!(stored, "the segment was checked to fit");
                    }
                })
                .map_err(codec_error)
        })?;
        map_end += 1;
    }
    Ok((keys, map_end))
}

/// Offsets a segment spans: the most keys it can hold.
fn offset_span(segment: &Segment) -> usize {
    usize::try_from(segment.next_offset().0 - segment.base_offset.0).unwrap_or(0)
}

/// Cleans `olds` group by group (see [`clean_group`]) and swaps each group's result in.
fn clean_segments(
    engine: &Engine,
    codec: &dyn RecordCodec,
    partition: &Partition,
    olds: &[Arc<Segment>],
    rules: &Rules<'_>,
    buf: &mut Vec<u8>,
    report: &mut CleanerPass,
) -> Result<(), LogError> {
    let config = partition.config();
    let mut at = 0;
    while at < olds.len() {
        let (count, new, removed) =
            clean_group(engine, codec, partition, &olds[at..], rules, &config, buf)?;
        let group = &olds[at..at + count];
        report.segments_read += count;
        report.bytes_before += group.iter().map(|s| s.written_len()).sum::<u64>();
        match new {
            Some(new) => {
                report.bytes_after += new.written_len();
                report.records_removed += removed;
                announce_delete_horizon(engine, partition, rules)?;
                if swap(engine, partition, group, &new)? {
                    report.segments_cleaned += count;
                    Stats::add(&engine.stats.cleaner_segments_cleaned, count as u64);
                }
            }
            None => report.bytes_after += group.iter().map(|s| s.written_len()).sum::<u64>(),
        }
        at += count;
    }
    Ok(())
}

/// Before a swap that may put the partition's first stamped batches on disk: when no
/// horizon is known for the partition, stores one (memory and checkpoint), so a crash
/// before the pass's own checkpoint cannot leave stamped tombstones that no horizon
/// makes due after the restart. At most once per partition while it holds tombstones.
fn announce_delete_horizon(
    engine: &Engine,
    partition: &Partition,
    rules: &Rules<'_>,
) -> Result<(), LogError> {
    let Some(horizon) = rules.latest_delete_horizon_ms.get() else {
        return Ok(());
    };
    if mutated!("cleaner.horizon_after_swap") {
        return Ok(());
    }
    {
        let mut horizons = engine.cleaner.delete_horizons.lock();
        if horizons.contains_key(&partition.uid) {
            return Ok(());
        }
        horizons.insert(partition.uid, horizon);
    }
    store_checkpoint(engine)
}

/// (producer id, last offset) of each producer's newest batch: kept (possibly empty) so
/// its sequence checks survive cleaning; and, for each producer with no batch of its
/// epoch (a marker bumped it), that epoch: its markers of that epoch are kept, since
/// they are what holds the epoch in the log (Kafka's `lastRecordsOfActiveProducers`).
fn newest_producer_batches(partition: &Partition) -> (HashSet<(i64, i64)>, HashMap<i64, i16>) {
    let table = partition.producers.lock();
    let mut batches = HashSet::new();
    let mut markers = HashMap::new();
    for (id, entry) in table.by_activity() {
        match entry.newest_batch() {
            Some(b) => batches.insert((id.0, b.last_offset.0)),
            None => markers.insert(id.0, entry.epoch.0).is_none(),
        };
    }
    (batches, markers)
}

/// What one pass keeps.
struct Rules<'a> {
    keys: &'a KeyMap,
    retained: &'a HashSet<(i64, i64)>,
    /// Producer id -> epoch whose markers are kept (see [`newest_producer_batches`]).
    retained_markers: &'a HashMap<i64, i16>,
    /// Transactions as the pass's walk from the first cleaned segment meets them.
    txns: RefCell<TxnWalk>,
    /// The partition's aborted transactions (by marker offset) as the pass began.
    aborted: &'a [AbortedTxn],
    /// Whether aborted transactions forgotten earlier cannot come back with a restart
    /// (`ProducerStateTable::forgotten_aborted_durable`).
    aborted_durable: bool,
    /// ABORT markers the walk found alone (their transactions are forgotten after it).
    forget: RefCell<Vec<Offset>>,
    /// The pass's clock: a batch's tombstones go once its delete horizon is not after it.
    now_ms: i64,
    /// The horizon stamped on a batch whose tombstones this pass sees first: now +
    /// `delete.retention.ms` (Kafka >= 3.1, KIP-534).
    new_delete_horizon_ms: i64,
    /// The latest horizon of the batches left holding tombstones (filled by the pass).
    latest_delete_horizon_ms: Cell<Option<i64>>,
}

impl Rules<'_> {
    /// Notes a horizon left in the partition (a kept tombstone or marker).
    fn note_horizon(&self, horizon_ms: i64) {
        let latest = self.latest_delete_horizon_ms.get();
        self.latest_delete_horizon_ms
            .set(Some(latest.map_or(horizon_ms, |l| l.max(horizon_ms))));
    }

    /// Whether `record` of the batch at `base` survives. A tombstone (the newest of its
    /// key) survives until its batch's delete horizon (`None`: not stamped yet, so it is
    /// kept and the batch gets one). Timestamps play no part: a tombstone produced with an
    /// old timestamp still gets its full `delete.retention.ms`, counted from the pass that
    /// first saw it, as in Kafka.
    fn keeps(&self, base: i64, record: &RecordKey<'_>, delete_horizon_ms: Option<i64>) -> bool {
        let Some(key) = record.key else {
            return false;
        };
        let offset = base + i64::from(record.offset_delta);
        self.keys.is_newest(key, offset)
            && !(record.tombstone && delete_horizon_ms.is_some_and(|h| h <= self.now_ms))
    }
}

/// A run of removed batches, to be covered by one empty batch.
#[derive(Debug, Clone, Copy)]
struct Gap {
    base: i64,
    last: i64,
    max_timestamp: i64,
}

/// The cleaned segment being written: its data file and its extents.
struct Output<'a> {
    engine: &'a Engine,
    file: Arc<JournalFile>,
    path: std::path::PathBuf,
    segment: Segment,
    pending: Vec<u8>,
    /// File position of `pending[0]`.
    flushed: u64,
    gap: Option<Gap>,
    interval_bytes: u32,
    changed: bool,
}

impl<'a> Output<'a> {
    /// A new cleaned data file (registered, so reads can resolve it) and a new segment
    /// written aside, starting at `base`.
    fn create(
        engine: &'a Engine,
        partition: &Partition,
        base: Offset,
        config: &LogConfig,
    ) -> Result<Self, LogError> {
        let fs = engine.fs.as_ref();
        let seq = engine.cleaner.allocate_seq();
        let path = engine.journal_dir.join(cleaned_file_name(seq));
        let file = JournalFile::new(seq, fs.open(&path, OpenMode::CreateTruncate)?);
        engine.journal_files.insert(Arc::clone(&file));
        let segment = match Segment::create_aside(fs, &partition.dir, base) {
            Ok(segment) => segment,
            Err(error) => {
                drop(file);
                retire_cleaned_files(engine);
                return Err(error.into());
            }
        };
        Ok(Self {
            engine,
            file,
            path,
            segment,
            pending: Vec::with_capacity(WRITE_BUFFER_BYTES),
            flushed: 0,
            gap: None,
            interval_bytes: config.index_interval_bytes,
            changed: false,
        })
    }

    /// Drops what was written: the aside extents file now, the data file with the next
    /// retirement (nothing refers to it once this is gone).
    fn abandon(self) {
        let engine = self.engine;
        let aside = self.segment.paths.aside();
        drop(self);
        let _ = engine.fs.remove_file(&aside);
        retire_cleaned_files(engine);
    }

    /// Makes the output durable before anything names it: the data file, its directory
    /// entry, then the extents. Returns the new segment, sealed and not yet in force.
    fn finish(mut self, olds: usize) -> Result<Segment, LogError> {
        let engine = self.engine;
        let fs = engine.fs.as_ref();
        let synced = self
            .flush()
            .and_then(|()| match mutated!("cleaner.data_unsynced") {
                true => Ok(()),
                false => settle(engine, self.file.file.sync_data(), "cleaned data file sync"),
            })
            .and_then(|()| match mutated!("cleaner.data_dir_unsynced") {
                true => Ok(()),
                false => {
                    let journal_dir = fs.sync_dir(&engine.journal_dir);
                    settle(engine, journal_dir, "journal directory sync")
                }
            })
            .and_then(|()| {
                self.segment.publish_all();
                self.segment.seal();
                match mutated!("cleaner.extents_unsynced") {
                    true => Ok(()),
                    false => settle(engine, self.segment.sync(), "cleaned extents sync"),
                }
            });
        if let Err(error) = synced {
            self.abandon();
            return Err(error);
        }
        tracing::debug!(path = %self.path.display(), bytes = self.flushed, segments = olds, "cleaned data file written");
        Ok(self.segment)
    }

    /// Bytes of the segment so far.
    fn len(&self) -> u64 {
        self.flushed + self.pending.len() as u64
    }

    fn emit(&mut self, batch: &[u8]) -> Result<(), LogError> {
        self.close_gap()?;
        self.place(batch)
    }

    fn place(&mut self, batch: &[u8]) -> Result<(), LogError> {
        let header = BatchHeader::parse(batch)?;
        let position = self.flushed + self.pending.len() as u64;
        self.segment.place(
            header.base_offset(),
            &header,
            &self.file,
            position,
            batch.len() as u64,
            self.interval_bytes,
            now_ms(),
        );
        self.pending.extend_from_slice(batch);
        if self.pending.len() >= WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    fn drop_batch(&mut self, header: &BatchHeader<'_>) {
        self.changed = true;
        let (base, last) = (header.base_offset().0, header.last_offset().0);
        let max_timestamp = header.max_timestamp();
        self.gap = Some(match self.gap {
            Some(gap) => Gap {
                base: gap.base,
                last,
                max_timestamp: gap.max_timestamp.max(max_timestamp),
            },
            None => Gap {
                base,
                last,
                max_timestamp,
            },
        });
    }

    fn close_gap(&mut self) -> Result<(), LogError> {
        if let Some(gap) = self.gap.take() {
            let bytes = gap_batch(gap);
            self.place(&bytes)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), LogError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        fs::write_all_at(self.file.file.as_ref(), &self.pending, self.flushed)?;
        let written = self.pending.len() as u64;
        self.engine.cleaner.charge(
            written,
            self.engine.config.cleaner.io_max_bytes_per_second,
            &self.engine.stopping,
        );
        Stats::add(&self.engine.stats.cleaner_bytes_written, written);
        self.flushed += written;
        self.pending.clear();
        Ok(())
    }
}

/// An empty batch covering `gap`: no records, producer id -1, the run's largest timestamp.
fn gap_batch(gap: Gap) -> Vec<u8> {
    let delta = i32::try_from(gap.last - gap.base).expect("a segment spans < 2^31 offsets");
    BatchFields {
        base_offset: Offset(gap.base),
        last_offset_delta: delta,
        base_timestamp: gap.max_timestamp,
        max_timestamp: gap.max_timestamp,
        ..BatchFields::default()
    }
    .to_batch(&[])
}

/// `batch` without its records: the header (offsets, producer fields, timestamps) with
/// `recordsCount` 0 and no codec (an empty body needs none).
fn emptied_batch(header: &BatchHeader<'_>) -> Vec<u8> {
    let fields = BatchFields::of(header);
    BatchFields {
        attributes: fields.attributes.with_compression(Compression::None),
        records_count: 0,
        ..fields
    }
    .to_batch(&[])
}

/// A cleaned group's result: how many old segments it covers, the new segment replacing
/// them (written aside and synced; `None` when a lone segment would not change), and the
/// records removed.
type Group = (usize, Option<Arc<Segment>>, u64);

/// Cleans the leading run of `olds` into one new segment, written aside and synced. The
/// group grows while its output is below `segment.bytes` and the next old segment follows
/// on directly, so segments emptied by cleaning merge into their neighbours (as Kafka's
/// `groupSegmentsBySize` does) instead of staying behind as tiny files.
fn clean_group(
    engine: &Engine,
    codec: &dyn RecordCodec,
    partition: &Partition,
    olds: &[Arc<Segment>],
    rules: &Rules<'_>,
    config: &LogConfig,
    buf: &mut Vec<u8>,
) -> Result<Group, LogError> {
    let mut out = Output::create(engine, partition, olds[0].base_offset, config)?;
    let target = config.segment_bytes.clamp(1, SEGMENT_BYTES_MAX);
    let (mut count, mut removed) = (0usize, 0u64);
    loop {
        match filter_into(&mut out, codec, &olds[count], rules, buf) {
            Ok(n) => removed += n,
            Err(error) => {
                out.abandon();
                return Err(error);
            }
        }
        count += 1;
        let Some(next) = olds.get(count) else { break };
        let len = out.len();
        let joins = len < target
            && len + next.written_len() <= SEGMENT_BYTES_MAX
            && next.base_offset == olds[count - 1].next_offset()
            && next.next_offset().0 - olds[0].base_offset.0 <= SEGMENT_OFFSETS_MAX;
        if !joins {
            break;
        }
    }
    if let Err(error) = out.close_gap() {
        out.abandon();
        return Err(error);
    }
    if !out.changed && count == 1 {
        out.abandon();
        return Ok((count, None, 0));
    }
    debug_assert_eq!(out.segment.next_offset(), olds[count - 1].next_offset());
    let segment = out.finish(count)?;
    Ok((count, Some(Arc::new(segment)), removed))
}

/// A refused write (space, descriptors) fails the pass; any other error poisons the log,
/// as every failed sync does (a sync is never retried).
fn settle(engine: &Engine, result: io::Result<()>, what: &str) -> Result<(), LogError> {
    match result {
        Err(error) if fs::is_retryable(&error) => Err(error.into()),
        other => engine.guard(what, other),
    }
}

/// Filters every batch of `old` into `out`. Returns the records removed.
fn filter_into(
    out: &mut Output<'_>,
    codec: &dyn RecordCodec,
    old: &Segment,
    rules: &Rules<'_>,
    buf: &mut Vec<u8>,
) -> Result<u64, LogError> {
    let engine = out.engine;
    let mut keep: Vec<bool> = Vec::new();
    let mut rebuilt: Vec<u8> = Vec::new();
    let mut removed = 0u64;
    for_each_batch(engine, old, buf, |bytes| {
        let header = BatchHeader::parse(bytes)?;
        if header.is_control() {
            return filter_marker(out, codec, bytes, &header, rules);
        }
        let retained = rules
            .retained
            .contains(&(header.producer_id().0, header.last_offset().0));
        let aborted = rules.txns.borrow_mut().on_data(&header);
        if aborted && header.records_count() > 0 {
            // Removed like old versions (kept empty when it is its producer's newest).
            removed += u64::try_from(header.records_count()).unwrap_or(0);
            out.changed = true;
            if retained {
                return out.emit(&emptied_batch(&header));
            }
            out.drop_batch(&header);
            return Ok(());
        }
        if header.records_count() == 0 {
            return match retained {
                true => out.emit(bytes),
                false => {
                    out.drop_batch(&header);
                    Ok(())
                }
            };
        }
        let base = header.base_offset().0;
        let horizon = header.delete_horizon_ms();
        keep.clear();
        let mut tombstone_kept = false;
        codec
            .scan(bytes, &mut |record| {
                let kept = rules.keeps(base, &record, horizon);
                tombstone_kept |= kept && record.tombstone;
                keep.push(kept)
            })
            .map_err(codec_error)?;
        let kept = keep.iter().filter(|k| **k).count();
        removed += (keep.len() - kept) as u64;
        // A batch whose surviving tombstones this pass sees first is stamped with its
        // delete horizon (rewritten even when every record is kept).
        let stamp = (horizon.is_none() && tombstone_kept).then_some(rules.new_delete_horizon_ms);
        if tombstone_kept {
            let latest = horizon.or(stamp).max(rules.latest_delete_horizon_ms.get());
            rules.latest_delete_horizon_ms.set(latest);
        }
        if kept == keep.len() && stamp.is_none() {
            return out.emit(bytes);
        }
        out.changed = true;
        if kept == 0 {
            if retained {
                return out.emit(&emptied_batch(&header));
            }
            out.drop_batch(&header);
            return Ok(());
        }
        rebuilt.clear();
        let mut next = keep.iter();
        codec
            .rebuild(
                bytes,
                &mut |_| *next.next().unwrap_or(&false),
                stamp,
                &mut rebuilt,
            )
            .map_err(codec_error)?;
        out.emit(&rebuilt)
    })?;
    out.close_gap()?;
    Ok(removed)
}

/// A transaction marker: kept while data of its transaction remains before it (or while
/// it holds its producer's epoch), then stamped with a delete horizon by the first pass
/// that finds it alone, and removed by the first pass after that horizon.
fn filter_marker(
    out: &mut Output<'_>,
    codec: &dyn RecordCodec,
    bytes: &[u8],
    header: &BatchHeader<'_>,
    rules: &Rules<'_>,
) -> Result<(), LogError> {
    let control = txn::control_type(&bytes[HEADER_LEN..]);
    let alone = rules.txns.borrow_mut().on_marker(header, control);
    let offset = header.base_offset();
    let listed = rules
        .aborted
        .binary_search_by_key(&offset, |a| a.last_offset)
        .is_ok();
    if alone && listed {
        rules.forget.borrow_mut().push(offset); // In offset order: the walk's.
    }
    let holds_epoch =
        rules.retained_markers.get(&header.producer_id().0) == Some(&header.producer_epoch().0);
    if !alone || holds_epoch {
        return out.emit(bytes);
    }
    // An ABORT marker goes only once no restart can bring its forgotten entry back: the
    // entry without the marker would hide the producer's later data.
    let aborted_durable =
        rules.aborted_durable || mutated!("cleaner.abort_marker_before_checkpoint");
    let abort_pinned = control == Some(txn::ControlType::Abort) && (listed || !aborted_durable);
    match header.delete_horizon_ms() {
        _ if header.records_count() == 0 => {}
        Some(horizon) if horizon > rules.now_ms => {
            rules.note_horizon(horizon);
            return out.emit(bytes);
        }
        Some(_) if abort_pinned => {
            // Due again once the checkpointer (asked now) has written the snapshot.
            let engine = out.engine;
            engine.checkpoint_signal.raise();
            let interval_ms =
                i64::try_from(engine.config.checkpoint_interval_ms).unwrap_or(i64::MAX);
            rules.note_horizon(rules.now_ms.saturating_add(interval_ms.max(1)));
            return out.emit(bytes);
        }
        Some(_) => {}
        None => {
            out.changed = true;
            rules.note_horizon(rules.new_delete_horizon_ms);
            let mut stamped = Vec::with_capacity(bytes.len());
            codec
                .rebuild(
                    bytes,
                    &mut |_| true,
                    Some(rules.new_delete_horizon_ms),
                    &mut stamped,
                )
                .map_err(codec_error)?;
            return out.emit(&stamped);
        }
    }
    out.drop_batch(header);
    Ok(())
}

/// `<base:020>.<end:020>.swap`: a cleaned segment in force, replacing every segment with a
/// base offset in `[base, end)`, whose old files may still be there (§4 of the design).
fn swap_file_name(base: Offset, end: Offset) -> String {
    format!("{:020}.{:020}{SWAP_SUFFIX}", base.0, end.0)
}

const SWAP_SUFFIX: &str = ".swap";

/// Parses a swap file name into (base, end).
fn parse_swap_name(name: &str) -> Option<(Offset, Offset)> {
    let stem = name.strip_suffix(SWAP_SUFFIX)?;
    let (base, end) = stem.split_once('.')?;
    let digits = |s: &str| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(base) || !digits(end) {
        return None;
    }
    Some((Offset(base.parse().ok()?), Offset(end.parse().ok()?)))
}

/// Whether `name` is a cleaner swap file.
pub(crate) fn is_swap_name(name: &str) -> bool {
    parse_swap_name(name).is_some()
}

/// Puts `new` in place of the run `olds`: the synced aside file becomes the swap file
/// (the switch), the old files go, the swap file takes the first old segment's name, then
/// memory. False when the run left the log meanwhile (nothing is changed then).
fn swap(
    engine: &Engine,
    partition: &Partition,
    olds: &[Arc<Segment>],
    new: &Arc<Segment>,
) -> Result<bool, LogError> {
    let fs = engine.fs.as_ref();
    let dir = &partition.dir;
    let aside = new.paths.aside();
    let trim = partition.trim_lock.lock();
    if partition.is_deleted() || !partition.holds_run(olds) {
        drop(trim);
        let _ = fs.remove_file(&aside);
        return Ok(false);
    }
    let swap = dir.join(swap_file_name(new.base_offset, new.next_offset()));
    engine.guard("cleaner: aside to swap", fs.rename(&aside, &swap))?;
    if !mutated!("cleaner.swap_dir_unsynced") {
        engine.guard("partition directory sync", fs.sync_dir(dir))?;
    }
    for old in olds {
        engine.guard(
            "cleaner: remove old index files",
            old.retire_index_files(fs),
        )?;
    }
    for old in &olds[1..] {
        engine.guard(
            "cleaner: remove an old segment",
            fs.remove_file(&old.paths.extents),
        )?;
    }
    if !mutated!("cleaner.removals_dir_unsynced") {
        engine.guard("partition directory sync", fs.sync_dir(dir))?;
    }
    engine.guard(
        "cleaner: swap into place",
        fs.rename(&swap, &new.paths.extents),
    )?;
    if !mutated!("cleaner.rename_dir_unsynced") {
        engine.guard("partition directory sync", fs.sync_dir(dir))?;
    }
    let swapped = partition.replace_run(olds, Arc::clone(new));
    assert!(swapped, "the run was checked under trim_lock");
    drop(trim);
    if let Err(error) = new.write_index_files(fs) {
        // Derived data: rebuilt on the next open.
        tracing::warn!(%error, path = %new.paths.index.display(), "could not write a cleaned segment's index files");
    }
    Ok(true)
}

/// Recovery, before segments are listed: removes cleaned extents files written aside
/// whose swap never happened (the old segments are in force), and completes every swap
/// (the new segment is in force: the old files it replaces are removed, then it takes its
/// name). Returns what it did, for the recovery report.
pub(crate) fn finish_interrupted_passes(
    fs: &dyn crate::fs::Fs,
    dir: &Path,
) -> io::Result<Vec<String>> {
    let names: Vec<String> = fs
        .read_dir(dir)?
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.name)
        .collect();
    let mut done = Vec::new();
    for name in names.iter().filter(|n| is_aside_name(n)) {
        fs.remove_file(&dir.join(name))?;
        done.push(format!(
            "removed an unfinished segment rewrite {}",
            dir.join(name).display()
        ));
    }
    for (name, (base, end)) in names.iter().filter_map(|n| Some((n, parse_swap_name(n)?))) {
        for old in &names {
            let stem = old
                .strip_suffix(crate::extents::FILE_SUFFIX)
                .or_else(|| old.strip_suffix(".index"))
                .or_else(|| old.strip_suffix(".timeindex"));
            let old_base = stem
                .filter(|s| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<i64>().ok());
            if old_base.is_some_and(|b| base.0 <= b && b < end.0) {
                fs.remove_file(&dir.join(old))?;
            }
        }
        if !mutated!("recovery.swap_removals_dir_unsynced") {
            fs.sync_dir(dir)?;
        }
        let target = crate::segment::SegmentPaths::new(dir, base).extents;
        fs.rename(&dir.join(name), &target)?;
        if !mutated!("recovery.swap_rename_dir_unsynced") {
            fs.sync_dir(dir)?;
        }
        done.push(format!(
            "completed the cleaner's swap of {}",
            target.display()
        ));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_and_emptied_batches_are_valid_stored_batches() {
        // Goal: the batches the cleaner invents pass the stored-batch checks and cover
        // exactly the offsets they stand for.
        let gap = gap_batch(Gap {
            base: 10,
            last: 25,
            max_timestamp: 7,
        });
        let header = batch::validate_stored(&gap).expect("valid");
        assert_eq!((header.base_offset().0, header.last_offset().0), (10, 25));
        assert_eq!((header.records_count(), header.producer_id().0), (0, -1));
        assert_eq!(header.max_timestamp(), 7);
        let mut original = gap.clone();
        let mut view = batch::BatchHeaderMut::new(&mut original).unwrap();
        view.set_attributes(batch::Attributes::TRANSACTIONAL.with_compression(Compression::Lz4));
        view.set_producer_id(crate::types::ProducerId(9));
        view.update_crc();
        let emptied = emptied_batch(&BatchHeader::parse(&original).unwrap());
        let header = batch::validate_stored(&emptied).expect("valid");
        assert_eq!(header.producer_id().0, 9);
        assert_eq!(
            header.attributes(),
            batch::Attributes::TRANSACTIONAL,
            "no codec"
        );
        assert_eq!(header.last_offset().0, 25);
    }

    #[test]
    fn the_key_map_stays_within_its_budget_and_never_grows() {
        // Goal: the map's memory is fixed when a pass starts and within the budget
        // (log.cleaner.dedupe.buffer.size per thread), for any budget; filled to its
        // capacity it neither reallocates nor takes a new key, and it answers right.
        assert_eq!((KEY_MAP_SLOT_BYTES, KEY_MAP_ENTRY_BYTES), (24, 32));
        for budget in [24, 64, 100, 192, 1 << 20, 128 << 20] {
            let keys = KeyMap::new(budget, usize::MAX);
            assert!(
                keys.memory_bytes() <= budget,
                "{budget}: {}",
                keys.memory_bytes()
            );
            assert_eq!(keys.capacity as u64, budget / KEY_MAP_SLOT_BYTES * 3 / 4);
        }
        let small = KeyMap::new(128 << 20, 100);
        assert_eq!(small.capacity, 100, "sized for the keys the pass can meet");
        assert!(small.memory_bytes() <= 134 * KEY_MAP_SLOT_BYTES);

        let mut keys = KeyMap::new(1 << 20, usize::MAX);
        let (slots, memory) = (keys.slots.as_ptr(), keys.memory_bytes());
        for i in 0..keys.capacity as i64 {
            assert!(keys.put(key_hash(&i.to_be_bytes()), i));
        }
        assert!(!keys.put(key_hash(b"one too many"), 0), "full");
        assert!(
            keys.put(key_hash(&7i64.to_be_bytes()), 1 << 40),
            "a known key updates"
        );
        assert!(
            keys.put(key_hash(&8i64.to_be_bytes()), 0),
            "an older offset is ignored"
        );
        assert_eq!(
            (keys.slots.as_ptr(), keys.memory_bytes()),
            (slots, memory),
            "never reallocated"
        );
        assert_eq!(keys.get(key_hash(&7i64.to_be_bytes())), Some(1 << 40));
        assert_eq!(keys.get(key_hash(&8i64.to_be_bytes())), Some(8));
        assert_eq!(keys.get(key_hash(b"one too many")), None);
        assert!(keys.is_newest(&9i64.to_be_bytes(), 9));
        assert!(!keys.is_newest(&9i64.to_be_bytes(), 8));
    }

    #[test]
    fn key_rules() {
        // Goal: older versions and keyless records go; the newest stays, a tombstone until
        // its batch's delete horizon has passed, whatever its timestamp.
        let mut keys = KeyMap::new(10 * KEY_MAP_ENTRY_BYTES, 10);
        assert!(keys.put(key_hash(b"a"), 5));
        let retained = HashSet::new();
        let retained_markers = HashMap::new();
        let rules = Rules {
            keys: &keys,
            retained: &retained,
            retained_markers: &retained_markers,
            txns: RefCell::new(TxnWalk::new(&[], Offset(0))),
            aborted: &[],
            aborted_durable: true,
            forget: RefCell::new(Vec::new()),
            now_ms: 100,
            new_delete_horizon_ms: 200,
            latest_delete_horizon_ms: Cell::new(None),
        };
        let record = |delta, key: Option<&'static [u8]>, tombstone, timestamp_ms| RecordKey {
            offset_delta: delta,
            timestamp_ms,
            key,
            tombstone,
        };
        assert!(
            !rules.keeps(0, &record(4, Some(b"a"), false, 0), None),
            "older version"
        );
        assert!(
            rules.keeps(0, &record(5, Some(b"a"), false, 0), None),
            "newest"
        );
        assert!(
            rules.keeps(0, &record(1, Some(b"b"), false, 0), None),
            "not in the dirty part"
        );
        assert!(!rules.keeps(0, &record(6, None, false, 0), None), "keyless");
        assert!(
            rules.keeps(0, &record(5, Some(b"a"), true, -1_000_000), None),
            "a tombstone not seen before stays, however old its timestamp"
        );
        assert!(
            rules.keeps(0, &record(5, Some(b"a"), true, 0), Some(101)),
            "before its horizon"
        );
        assert!(
            !rules.keeps(0, &record(5, Some(b"a"), true, 0), Some(100)),
            "at its horizon"
        );
        assert!(
            !rules.keeps(0, &record(4, Some(b"a"), true, 0), Some(101)),
            "an older tombstone is an older version"
        );
        assert_ne!(key_hash(b"a"), key_hash(b"b"));
    }
}
