//! One partition's log: its ordered segments, its watermarks and its config.
//!
//! Concurrency contract:
//! - The segment list sits behind an `RwLock` held only to clone or edit the list; readers
//!   then work on their own `Arc<Segment>` copies without any lock.
//! - Watermarks are atomics. `log_end` is raised by the appender; `high_watermark` is
//!   raised (Release) by the committer after the journal sync that made the data durable,
//!   which then wakes the long polls listening on this partition (`commit_listeners`);
//!   `log_start` only grows (retention, DeleteRecords) and never passes the high watermark.
//!   `last_stable` (the LSO, docs/transactions.md §6.2) is published by the committer with
//!   the high watermark, after it and before the wake-up: min(first offset of an open
//!   transaction, high watermark), so it never exposes anything undurable and never falls.
//! - `append_lock` serializes everything that writes the active segment or replaces it:
//!   the committer (per request), rolls from retention, recovery, deletion.
//! - `trim_lock` serializes removal of old segments (retention, DeleteRecords).
//! - `producers` (the idempotent-producer state) is changed by the committer holding
//!   `append_lock`, so a request's sequence check and its offsets are decided together;
//!   the checkpointer reads it under both locks, so the state and the log end it is taken
//!   at agree. Expiry takes `producers` alone (it changes no offset).
//! - `snapshot_lock` keeps a producer snapshot write and the partition's deletion apart, so
//!   a late snapshot never lands in a re-created partition's directory.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::config::LogConfig;
use crate::error::LogError;
use crate::fs::Fs;
use crate::manager::{CommitListener, PartitionOffsets, ReadResult};
use crate::producer_state::ProducerStateTable;
use crate::record_slices::RecordSlice;
use crate::segment::Segment;
use crate::txn::IsolationLevel;
use crate::types::{Offset, PartitionKey};

/// The segments a read may need: the one holding the fetch offset and the next.
type ReadSegments = [Option<Arc<Segment>>; 2];

/// Largest segment file: positions in the index files are 32-bit, and Kafka caps
/// `segment.bytes` at `i32::MAX` for the same reason.
pub(crate) const SEGMENT_BYTES_MAX: u64 = i32::MAX as u64;
/// Most offsets one segment may span: relative offsets in the index files are 32-bit
/// (Kafka rolls at `i32::MAX` as well).
pub(crate) const SEGMENT_OFFSETS_MAX: i64 = i32::MAX as i64;

#[derive(Debug)]
pub(crate) struct Partition {
    pub(crate) key: PartitionKey,
    /// Process-unique id, so engine maps need no string keys.
    pub(crate) uid: u64,
    pub(crate) dir: PathBuf,
    config: RwLock<LogConfig>,
    /// Oldest first; never empty; the last one is the active segment.
    segments: RwLock<Vec<Arc<Segment>>>,
    log_start: AtomicI64,
    high_watermark: AtomicI64,
    /// The last stable offset, before clamping to the log start (see the contract above).
    last_stable: AtomicI64,
    log_end: AtomicI64,
    deleted: AtomicBool,
    pub(crate) append_lock: Mutex<()>,
    pub(crate) trim_lock: Mutex<()>,
    /// Idempotent producers seen by this partition (see the concurrency contract above).
    pub(crate) producers: Mutex<ProducerStateTable>,
    pub(crate) snapshot_lock: Mutex<()>,
    /// Committer-only bookkeeping: the commit round that last touched this partition.
    pub(crate) round_mark: AtomicU64,
    /// The long polls waiting for the high watermark to rise: each is woken once, at the
    /// next rise, and removed. At most one entry per listener (see [`Self::listen_commits`]).
    commit_listeners: Mutex<Vec<CommitListener>>,
}

impl Partition {
    /// Builds a partition from existing segments (all written bytes already committed).
    pub(crate) fn new(
        key: PartitionKey,
        uid: u64,
        dir: PathBuf,
        config: LogConfig,
        segments: Vec<Arc<Segment>>,
        log_start: Offset,
        producer_ids_max: usize,
    ) -> Self {
        assert!(
            !segments.is_empty(),
            "a partition always has an active segment"
        );
        let log_end = segments.last().map_or(Offset(0), |s| s.next_offset());
        Self {
            key,
            uid,
            dir,
            config: RwLock::new(config),
            segments: RwLock::new(segments),
            log_start: AtomicI64::new(log_start.0),
            high_watermark: AtomicI64::new(log_end.0),
            last_stable: AtomicI64::new(log_end.0),
            log_end: AtomicI64::new(log_end.0),
            deleted: AtomicBool::new(false),
            append_lock: Mutex::new(()),
            trim_lock: Mutex::new(()),
            producers: Mutex::new(ProducerStateTable::new(producer_ids_max)),
            snapshot_lock: Mutex::new(()),
            round_mark: AtomicU64::new(0),
            commit_listeners: Mutex::new(Vec::new()),
        }
    }

    /// Read in the order log start, last stable offset, high watermark, log end, so that
    /// the snapshot keeps `log_start <= last_stable <= high_watermark <= log_end` although
    /// each value moves on its own.
    pub(crate) fn offsets(&self) -> PartitionOffsets {
        let log_start_offset = self.log_start();
        let last_stable = Offset(self.last_stable.load(Ordering::Acquire));
        let high_watermark = self.high_watermark();
        let log_end_offset = self.log_end();
        let last_stable_offset = last_stable.max(log_start_offset);
        assert!(last_stable_offset <= high_watermark && high_watermark <= log_end_offset);
        PartitionOffsets {
            log_start_offset,
            last_stable_offset,
            high_watermark,
            log_end_offset,
        }
    }

    pub(crate) fn log_start(&self) -> Offset {
        Offset(self.log_start.load(Ordering::Acquire))
    }
    pub(crate) fn high_watermark(&self) -> Offset {
        Offset(self.high_watermark.load(Ordering::Acquire))
    }
    pub(crate) fn log_end(&self) -> Offset {
        Offset(self.log_end.load(Ordering::Acquire))
    }
    /// Appender only (holding `append_lock`).
    pub(crate) fn set_log_end(&self, offset: Offset) {
        self.log_end.store(offset.0, Ordering::Release);
    }
    /// Committer only, after the journal sync covering everything below `offset`. Wakes the
    /// long polls waiting on this partition, only when the high watermark moved: waiters on
    /// other partitions are never woken by this one's commits.
    pub(crate) fn publish_high_watermark(&self, offset: Offset) {
        self.publish_watermarks(offset, None);
    }
    /// [`Self::publish_high_watermark`] together with the last stable offset, given the
    /// first offset of the oldest open transaction (if any) as the round left it.
    pub(crate) fn publish_watermarks(&self, offset: Offset, first_unstable: Option<Offset>) {
        // Only what the appender placed can be durable: a high watermark past the log end
        // would let readers ask for offsets no segment holds.
        assert!(
            offset <= self.log_end(),
            "the high watermark never passes the log end"
        );
        let previous = self.high_watermark.fetch_max(offset.0, Ordering::AcqRel);
        let high_watermark = offset.0.max(previous);
        let last_stable = first_unstable.map_or(high_watermark, |f| f.0.min(high_watermark));
        let previous_stable = self.last_stable.fetch_max(last_stable, Ordering::AcqRel);
        // A transaction opens at the log end, never below what is already stable.
        assert!(last_stable >= previous_stable, "the LSO never falls");
        if offset.0 > previous || last_stable > previous_stable {
            // After the Release store above: a listener that registered before this lock
            // is woken, one that registers after it sees the new high watermark.
            for listener in self.commit_listeners.lock().drain(..) {
                listener.wake();
            }
        }
    }
    /// Wakes `listener` at the next rise of the high watermark. Registering it again before
    /// then keeps one entry, so a long poll that re-arms after every wake-up from another
    /// partition does not grow this list. Register *before* checking the watermark.
    pub(crate) fn listen_commits(&self, listener: &CommitListener) {
        let mut listeners = self.commit_listeners.lock();
        if !listeners.iter().any(|l| l.same(listener)) {
            listeners.push(listener.clone());
        }
    }
    /// Removes `listener` (its long poll is over), so a finished poll holds no entry.
    pub(crate) fn unlisten_commits(&self, listener: &CommitListener) {
        let mut listeners = self.commit_listeners.lock();
        if let Some(i) = listeners.iter().position(|l| l.same(listener)) {
            listeners.swap_remove(i);
        }
    }
    /// Recovery only, once producer state is rebuilt: the LSO its open transactions allow.
    pub(crate) fn reset_last_stable(&self, first_unstable: Option<Offset>) {
        let high_watermark = self.high_watermark();
        let last_stable = first_unstable.map_or(high_watermark, |f| f.min(high_watermark));
        self.last_stable.store(last_stable.0, Ordering::Release);
    }
    /// Raises the log start offset (never lowers it). Returns the value now in force.
    pub(crate) fn advance_log_start(&self, offset: Offset) -> Offset {
        let previous = self.log_start.fetch_max(offset.0, Ordering::AcqRel);
        Offset(previous.max(offset.0))
    }

    pub(crate) fn config(&self) -> LogConfig {
        self.config.read().clone()
    }
    pub(crate) fn set_config(&self, config: LogConfig) {
        *self.config.write() = config;
    }

    pub(crate) fn is_deleted(&self) -> bool {
        self.deleted.load(Ordering::Acquire)
    }
    pub(crate) fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
    }

    pub(crate) fn segments(&self) -> Vec<Arc<Segment>> {
        self.segments.read().clone()
    }
    pub(crate) fn segment_count(&self) -> usize {
        self.segments.read().len()
    }
    /// Bytes of record batches the partition's segments hold (Kafka's `log.size`).
    pub(crate) fn size_bytes(&self) -> u64 {
        self.segments.read().iter().map(|s| s.written_len()).sum()
    }
    pub(crate) fn active(&self) -> Arc<Segment> {
        let segments = self.segments.read();
        Arc::clone(&segments[segments.len() - 1])
    }

    /// Why the active segment must be rolled before a batch of `batch_len` bytes ending at
    /// `last_offset` is appended at `now_ms`, if it must.
    pub(crate) fn roll_reason(
        active: &Segment,
        batch_len: u64,
        last_offset: Offset,
        config: &LogConfig,
        now_ms: i64,
    ) -> Option<&'static str> {
        if active.is_empty() {
            return None;
        }
        let segment_bytes = config.segment_bytes.min(SEGMENT_BYTES_MAX);
        if active.written_len() + batch_len > segment_bytes {
            return Some("segment.bytes");
        }
        if now_ms.saturating_sub(active.first_append_ms()) > config.roll_ms() {
            return Some(match config.roll_ms() < config.segment_ms {
                true => "max.compaction.lag.ms",
                false => "segment.ms",
            });
        }
        if last_offset.0 - active.base_offset.0 > SEGMENT_OFFSETS_MAX {
            return Some("relative offsets would overflow");
        }
        None
    }

    /// Seals the active segment and starts a new empty one at the log end. Caller holds
    /// `append_lock`. Returns the sealed segment (whose index files are still to be
    /// written and whose data is still to be synced by the checkpointer).
    pub(crate) fn roll(&self, fs: &dyn Fs) -> io::Result<Arc<Segment>> {
        let base = self.log_end();
        let next = Arc::new(Segment::create(fs, &self.dir, base)?);
        let mut segments = self.segments.write();
        let sealed = Arc::clone(&segments[segments.len() - 1]);
        sealed.seal();
        segments.push(next);
        tracing::debug!(topic = %self.key.topic, partition = self.key.partition, base = base.0, "rolled segment");
        Ok(sealed)
    }

    /// Removes the `count` oldest segments from the list (never the active one) and
    /// returns them; their files are deleted by the caller.
    pub(crate) fn remove_leading(&self, count: usize) -> Vec<Arc<Segment>> {
        let mut segments = self.segments.write();
        let count = count.min(segments.len().saturating_sub(1));
        segments.drain(..count).collect()
    }

    /// Drops the segments after the first `count` (rolled by a commit round that is being
    /// undone) and returns them; their files are deleted by the caller. Caller holds
    /// `append_lock`.
    pub(crate) fn truncate_segments(&self, count: usize) -> Vec<Arc<Segment>> {
        let mut segments = self.segments.write();
        assert!(count >= 1, "a partition always has an active segment");
        let keep = count.min(segments.len());
        segments.split_off(keep)
    }

    /// Where the run `olds` (consecutive sealed segments) starts in the list, if it is
    /// still there whole.
    fn find_run(segments: &[Arc<Segment>], olds: &[Arc<Segment>]) -> Option<usize> {
        let last = segments.len() - 1;
        let first = olds.first()?;
        let at = segments[..last]
            .iter()
            .position(|s| Arc::ptr_eq(s, first))?;
        let run = segments
            .get(at..at + olds.len())
            .filter(|_| at + olds.len() <= last)?;
        run.iter()
            .zip(olds)
            .all(|(a, b)| Arc::ptr_eq(a, b))
            .then_some(at)
    }

    /// Whether `segment` (the active one included) is still in the log.
    pub(crate) fn holds(&self, segment: &Arc<Segment>) -> bool {
        self.segments.read().iter().any(|s| Arc::ptr_eq(s, segment))
    }

    /// Whether the run `olds` is still in the log, whole (caller holds `trim_lock`).
    pub(crate) fn holds_run(&self, olds: &[Arc<Segment>]) -> bool {
        Self::find_run(&self.segments.read(), olds).is_some()
    }

    /// Puts `new` in place of the run `olds` (the cleaner's swap; caller holds
    /// `trim_lock`). False when the run is no longer in the list whole.
    pub(crate) fn replace_run(&self, olds: &[Arc<Segment>], new: Arc<Segment>) -> bool {
        let mut segments = self.segments.write();
        let Some(at) = Self::find_run(&segments, olds) else {
            return false;
        };
        // The cleaned segment covers exactly the offsets of the run it replaces.
        assert_eq!(new.base_offset, olds[0].base_offset);
        assert_eq!(
            Some(new.next_offset()),
            olds.last().map(|s| s.next_offset())
        );
        segments.splice(at..at + olds.len(), [new]);
        true
    }

    /// Replaces the whole segment list (recovery only, before the threads start).
    pub(crate) fn replace_segments(&self, segments: Vec<Arc<Segment>>) {
        assert!(!segments.is_empty());
        let log_end = segments.last().map_or(Offset(0), |s| s.next_offset());
        *self.segments.write() = segments;
        self.set_log_end(log_end);
        self.high_watermark.store(log_end.0, Ordering::Release);
        self.last_stable.store(log_end.0, Ordering::Release);
    }

    /// Whole batches from `fetch_offset` (see `LogManager::read`).
    pub(crate) fn read(
        &self,
        fetch_offset: Offset,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        let (offsets, _, segments) =
            self.read_segments(fetch_offset, IsolationLevel::ReadUncommitted)?;
        for segment in segments.into_iter().flatten() {
            if let Some(records) = segment.read(
                fetch_offset,
                offsets.high_watermark,
                max_bytes,
                min_one_batch,
            )? {
                let base = crate::batch::BatchHeader::parse(&records).map(|h| h.base_offset());
                if base.is_ok_and(|base| base > fetch_offset) {
                    return Err(LogError::Damaged {
                        offset: fetch_offset,
                        why: "the batch holding this offset is missing",
                    });
                }
                return Ok(ReadResult { records, offsets });
            }
        }
        Ok(ReadResult {
            records: Bytes::new(),
            offsets,
        })
    }

    /// [`Self::read`] as slices of the journal files (see `Segment::read_ranges`), appended
    /// to `out`: the same batches, the same errors, up to the high watermark
    /// (`ReadUncommitted`) or the last stable offset (`ReadCommitted`; a fetch offset in
    /// `[LSO, HW]` reads nothing). Returns the bytes appended, the watermarks the read
    /// answers with, and the offset after the last batch appended (`fetch_offset` when
    /// none was). Allocates nothing when `out` has room.
    pub(crate) fn read_ranges_into(
        &self,
        fetch_offset: Offset,
        max_bytes: u32,
        min_one_batch: bool,
        isolation: IsolationLevel,
        out: &mut Vec<RecordSlice>,
    ) -> Result<(usize, PartitionOffsets, Offset), LogError> {
        let (offsets, bound, segments) = self.read_segments(fetch_offset, isolation)?;
        let before = out.len();
        for segment in segments.into_iter().flatten() {
            if let Some((len, end)) =
                segment.read_ranges(fetch_offset, bound, max_bytes, min_one_batch, out)?
            {
                debug_assert_eq!(
                    out[before..].iter().map(RecordSlice::len).sum::<usize>(),
                    len
                );
                debug_assert!(end <= bound, "nothing at or above the bound is returned");
                return Ok((len, offsets, end));
            }
        }
        debug_assert_eq!(out.len(), before);
        Ok((0, offsets, fetch_offset))
    }

    /// The snapshot of the watermarks a read answers with, the offset it reads up to (the
    /// high watermark, or the LSO for `ReadCommitted`), and the segments it may read: the
    /// one holding `fetch_offset` and the next (none when the offset is at or above that
    /// bound). Checks the range and the gaps between segments.
    fn read_segments(
        &self,
        fetch_offset: Offset,
        isolation: IsolationLevel,
    ) -> Result<(PartitionOffsets, Offset, ReadSegments), LogError> {
        let offsets = self.offsets();
        let bound = match isolation {
            IsolationLevel::ReadUncommitted => offsets.high_watermark,
            IsolationLevel::ReadCommitted => offsets.last_stable_offset,
        };
        let out_of_range = |log_start_offset| LogError::OffsetOutOfRange {
            offset: fetch_offset,
            log_start_offset,
            high_watermark: offsets.high_watermark,
        };
        if fetch_offset < offsets.log_start_offset || fetch_offset > offsets.high_watermark {
            return Err(out_of_range(offsets.log_start_offset));
        }
        if fetch_offset >= bound {
            return Ok((offsets, bound, [None, None]));
        }
        // The segment holding the offset and the one after it are all a read can need (only
        // the last segment can be empty): two `Arc`s, no copy of the list per read.
        let (holder, next) = {
            let segments = self.segments.read();
            let first = segments.partition_point(|s| s.base_offset <= fetch_offset);
            match first.checked_sub(1) {
                Some(at) => (Arc::clone(&segments[at]), segments.get(first).cloned()),
                // Retention removed the segment after the range check: report the new start.
                None => return Err(out_of_range(self.log_start())),
            }
        };
        if let Some(next) = next
            .as_ref()
            .filter(|_| fetch_offset >= holder.committed_next_offset())
        {
            // Offsets are contiguous from the log start, so a gap between two segments is
            // data recovery found damaged or missing: say so rather than skip to the next.
            tracing::error!(
                topic = %self.key.topic, partition = self.key.partition, offset = fetch_offset.0,
                missing_from = holder.committed_next_offset().0, missing_to = next.base_offset.0,
                "fetch of offsets that recovery found damaged or missing"
            );
            return Err(LogError::Damaged {
                offset: fetch_offset,
                why: "the segment holding this offset is damaged or missing",
            });
        }
        Ok((offsets, bound, [Some(holder), next]))
    }

    pub(crate) fn find_batch_by_timestamp(
        &self,
        timestamp: i64,
    ) -> Result<Option<Bytes>, LogError> {
        let (log_start, high_watermark) = (self.log_start(), self.high_watermark());
        for segment in self.segments() {
            if segment.max_timestamp().0 < timestamp || segment.next_offset() <= log_start {
                continue;
            }
            if let Some(batch) = segment.find_by_timestamp(timestamp, high_watermark, log_start)? {
                return Ok(Some(batch));
            }
        }
        Ok(None)
    }

    pub(crate) fn find_max_timestamp_batch(&self) -> Result<Option<Bytes>, LogError> {
        let high_watermark = self.high_watermark();
        let segments = self.segments();
        let mut best: Option<(i64, &Arc<Segment>)> = None;
        for segment in segments.iter().filter(|s| !s.is_empty()) {
            let timestamp = segment.max_timestamp().0;
            if best.is_none_or(|(b, _)| timestamp > b) {
                best = Some((timestamp, segment));
            }
        }
        let Some((expected, segment)) = best else {
            return Ok(None);
        };
        match segment.max_timestamp_batch(high_watermark)? {
            Some((timestamp, batch)) if timestamp == expected => Ok(Some(batch)),
            // The newest data is not committed yet: compare every segment's committed max.
            _ => {
                let mut found: Option<(i64, Bytes)> = None;
                for segment in &segments {
                    if let Some((timestamp, batch)) = segment.max_timestamp_batch(high_watermark)? {
                        if found.as_ref().is_none_or(|(b, _)| timestamp > *b) {
                            found = Some((timestamp, batch));
                        }
                    }
                }
                Ok(found.map(|(_, batch)| batch))
            }
        }
    }
}
