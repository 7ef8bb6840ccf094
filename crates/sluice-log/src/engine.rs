//! The state shared by the log's threads and the public API: the partition map, the
//! committer-to-checkpointer handoff, checkpoint writing, poisoning, counters.
//!
//! Lock order (outer first): `admin` → partition `trim_lock` → `checkpoints` →
//! partition `append_lock` → partition `producers` → `handoff` → partition segment list.
//! A partition's `snapshot_lock` is taken with none of the partition's other locks held,
//! or last (delete_partition). No lock is held across an `fdatasync` that the committer
//! could wait on: the committer only takes partition `append_lock`s and `producers` and,
//! briefly, `handoff`; the checkpointer syncs segments and writes producer snapshots
//! holding only `checkpoints` (and a partition's `snapshot_lock`).

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex, RwLock};
use tokio::sync::watch;

use crate::checkpoint::{self, Checkpoint, PartitionCheckpoint, ProducerStatePoint, RecoveryPoint};
use crate::config::{LogConfig, LogManagerConfig};
use crate::error::LogError;
use crate::fs::{self, Fs};
use crate::histogram::{self, Histogram};
use crate::journal::{FreePool, JournalFiles, JournalPosition};
use crate::manager::{CommitHistograms, LogStats};
use crate::metadata::{self, PartitionMetadata};
use crate::mutation::mutated;
use crate::partition::Partition;
use crate::segment::Segment;
use crate::types::{Offset, PartitionKey, TopicId};

pub(crate) const JOURNAL_DIR: &str = "journal";

/// The error for a write or open the system refused (see `Engine::guard`), logged (at most
/// once a second): `FileLimit` for descriptors, `Io` (KAFKA_STORAGE_ERROR) for space.
pub(crate) fn refused(what: &str, error: io::Error) -> LogError {
    if log_allowed() {
        tracing::warn!(%error, what, "storage refused the operation: nothing acknowledged is affected, it is tried again later");
    }
    refused_error(error)
}

/// The error a refused write or open answers with (see [`refused`]), not logged.
pub(crate) fn refused_error(error: io::Error) -> LogError {
    if fs::is_file_limit(&error) {
        LogError::FileLimit(error)
    } else {
        LogError::Io(error)
    }
}

/// Logs a commit round refused by the system and undone (at most once a second).
pub(crate) fn log_refused_round(what: &str, error: &io::Error) {
    if !log_allowed() {
        return;
    }
    if fs::is_file_limit(error) {
        tracing::warn!(%error, what, "commit round refused (out of file descriptors) and undone: nothing of it was stored or acknowledged, its produce requests got KAFKA_STORAGE_ERROR; later rounds try again");
    } else {
        tracing::warn!(%error, what, "commit round refused (disk full) and undone: nothing of it was stored or acknowledged, its produce requests got KAFKA_STORAGE_ERROR; produce resumes by itself once space is free (DeleteRecords, retention, deleted topics, or a larger file system)");
    }
}

/// Whether a line about refused storage may be logged now: at most one a second, since a
/// full disk refuses every round and the log file may well live on the same disk.
fn log_allowed() -> bool {
    static LAST_LOGGED_MS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let now = crate::segment::now_ms();
    let last = LAST_LOGGED_MS.load(Ordering::Relaxed);
    now - last >= 1000
        && LAST_LOGGED_MS
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

/// What the committer has written since the checkpointer last looked. Guarded by
/// `Engine::handoff`; the committer fills it at the end of each round's write phase.
#[derive(Debug, Default)]
pub(crate) struct Handoff {
    /// Every journal entry before this position has been written to its segment.
    pub(crate) written_to: JournalPosition,
    /// Journal bytes written since open.
    pub(crate) journal_bytes: u64,
    /// Segments written since the last checkpoint took this list (see `Segment::dirty`).
    pub(crate) dirty: Vec<Arc<Segment>>,
    /// Segments rolled since then: their index files are still to be written.
    pub(crate) sealed: Vec<Arc<Segment>>,
    /// Partitions whose directory got a new segment file since then.
    pub(crate) new_files: Vec<Arc<Partition>>,
    /// Per partition uid: the log end and active segment position as of `written_to`.
    pub(crate) recovery_points: HashMap<u64, RecoveryPoint>,
}

/// What the last checkpoint file says. Guarded by `Engine::checkpoints`, which also
/// serializes checkpoint writers (checkpointer, DeleteRecords, shutdown).
#[derive(Debug, Default)]
pub(crate) struct CheckpointState {
    pub(crate) journal: JournalPosition,
    pub(crate) journal_bytes: u64,
    pub(crate) recovery_points: HashMap<u64, RecoveryPoint>,
    /// Per partition uid: the producer state point the checkpoint file names (and so the
    /// snapshot file that must not be deleted).
    pub(crate) producer_points: HashMap<u64, ProducerStatePoint>,
}

/// A wake-up flag for a background thread that otherwise sleeps on a timer.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    raised: Mutex<bool>,
    condvar: Condvar,
}

impl Signal {
    pub(crate) fn raise(&self) {
        *self.raised.lock() = true;
        self.condvar.notify_all();
    }

    /// Sleeps until raised or `timeout`; clears the flag. True when raised.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let mut raised = self.raised.lock();
        if !*raised {
            let _ = self.condvar.wait_for(&mut raised, timeout);
        }
        std::mem::replace(&mut *raised, false)
    }
}

/// Monotonic counters behind [`LogStats`], and the committer's histograms (atomics only:
/// recording takes no lock and allocates nothing).
#[derive(Debug)]
pub(crate) struct Stats {
    pub(crate) journal_syncs: AtomicU64,
    pub(crate) journal_bytes: AtomicU64,
    pub(crate) commit_rounds: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) segment_syncs: AtomicU64,
    /// Segment extent records and index files written by the checkpointer.
    pub(crate) segment_written_bytes: AtomicU64,
    pub(crate) append_requests: AtomicU64,
    pub(crate) batches_appended: AtomicU64,
    pub(crate) cleaner_passes: AtomicU64,
    pub(crate) cleaner_segments_cleaned: AtomicU64,
    pub(crate) cleaner_bytes_read: AtomicU64,
    pub(crate) cleaner_bytes_written: AtomicU64,
    pub(crate) cleaner_records_removed: AtomicU64,
    pub(crate) cleaner_pass_us: AtomicU64,
    pub(crate) cleaner_bytes_before: AtomicU64,
    pub(crate) cleaner_bytes_after: AtomicU64,
    pub(crate) journal_cleaner_passes: AtomicU64,
    pub(crate) journal_cleaner_files_cleaned: AtomicU64,
    pub(crate) journal_cleaner_bytes_moved: AtomicU64,
    /// Journal bytes written per commit round (padding included).
    pub(crate) round_bytes: Histogram,
    /// Append requests answered per commit round.
    pub(crate) round_requests: Histogram,
    /// Duration of each journal `fdatasync`, in nanoseconds.
    pub(crate) journal_sync_ns: Histogram,
    /// Duration of each round's journal write (the `pwritev`, or the copy into the aligned
    /// tail and the direct `pwrite`), in nanoseconds.
    pub(crate) journal_write_ns: Histogram,
    /// Each round from its start (the queue drained) to its last answer sent, in nanoseconds.
    pub(crate) round_ns: Histogram,
    /// Each append request's wait in the queue: from `append` queuing it to the committer
    /// taking it into a round, in nanoseconds.
    pub(crate) append_queue_wait_ns: Histogram,
}

impl Default for Stats {
    fn default() -> Self {
        Self {
            journal_syncs: AtomicU64::default(),
            journal_bytes: AtomicU64::default(),
            commit_rounds: AtomicU64::default(),
            checkpoints: AtomicU64::default(),
            segment_syncs: AtomicU64::default(),
            segment_written_bytes: AtomicU64::default(),
            append_requests: AtomicU64::default(),
            batches_appended: AtomicU64::default(),
            cleaner_passes: AtomicU64::default(),
            cleaner_segments_cleaned: AtomicU64::default(),
            cleaner_bytes_read: AtomicU64::default(),
            cleaner_bytes_written: AtomicU64::default(),
            cleaner_records_removed: AtomicU64::default(),
            cleaner_pass_us: AtomicU64::default(),
            cleaner_bytes_before: AtomicU64::default(),
            cleaner_bytes_after: AtomicU64::default(),
            journal_cleaner_passes: AtomicU64::default(),
            journal_cleaner_files_cleaned: AtomicU64::default(),
            journal_cleaner_bytes_moved: AtomicU64::default(),
            round_bytes: Histogram::new(histogram::SIZE_BOUNDS_BYTES),
            round_requests: Histogram::new(histogram::COUNT_BOUNDS),
            journal_sync_ns: Histogram::new(histogram::LATENCY_BOUNDS_NS),
            journal_write_ns: Histogram::new(histogram::LATENCY_BOUNDS_NS),
            round_ns: Histogram::new(histogram::LATENCY_BOUNDS_NS),
            append_queue_wait_ns: Histogram::new(histogram::LATENCY_BOUNDS_NS),
        }
    }
}

impl Stats {
    pub(crate) fn histograms(&self) -> CommitHistograms {
        CommitHistograms {
            round_bytes: self.round_bytes.snapshot(),
            round_requests: self.round_requests.snapshot(),
            journal_sync_ns: self.journal_sync_ns.snapshot(),
            journal_write_ns: self.journal_write_ns.snapshot(),
            round_ns: self.round_ns.snapshot(),
            append_queue_wait_ns: self.append_queue_wait_ns.snapshot(),
        }
    }

    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LogStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LogStats {
            journal_syncs: get(&self.journal_syncs),
            journal_bytes: get(&self.journal_bytes),
            commit_rounds: get(&self.commit_rounds),
            checkpoints: get(&self.checkpoints),
            segment_syncs: get(&self.segment_syncs),
            // The cleaners' writes are segments' data written again: segment bytes too.
            segment_written_bytes: get(&self.segment_written_bytes)
                + get(&self.cleaner_bytes_written)
                + get(&self.journal_cleaner_bytes_moved),
            append_requests: get(&self.append_requests),
            batches_appended: get(&self.batches_appended),
            cleaner_passes: get(&self.cleaner_passes),
            cleaner_segments_cleaned: get(&self.cleaner_segments_cleaned),
            cleaner_bytes_read: get(&self.cleaner_bytes_read),
            cleaner_bytes_written: get(&self.cleaner_bytes_written),
            cleaner_records_removed: get(&self.cleaner_records_removed),
            cleaner_pass_us: get(&self.cleaner_pass_us),
            cleaner_bytes_before: get(&self.cleaner_bytes_before),
            cleaner_bytes_after: get(&self.cleaner_bytes_after),
            journal_cleaner_passes: get(&self.journal_cleaner_passes),
            journal_cleaner_files_cleaned: get(&self.journal_cleaner_files_cleaned),
            journal_cleaner_bytes_moved: get(&self.journal_cleaner_bytes_moved),
        }
    }
}

type MapKey = (Arc<str>, i32);

#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) config: LogManagerConfig,
    pub(crate) fs: Arc<dyn Fs>,
    pub(crate) journal_dir: PathBuf,
    /// Retired journal files kept for reuse (filled by checkpoints, drained by rolls).
    pub(crate) journal_pool: Arc<FreePool>,
    /// Every journal file segments may point into (the data itself).
    pub(crate) journal_files: Arc<JournalFiles>,
    partitions: RwLock<HashMap<MapKey, Arc<Partition>>>,
    next_uid: AtomicU64,
    poisoned: AtomicBool,
    /// Set when a round store makes rounds durable (`storage.backend=object`): the
    /// journal is then a cache the committer never syncs, and the checkpointer syncs it
    /// before it vouches for its bytes.
    pub(crate) journal_is_cache: AtomicBool,
    /// Set by shutdown (and drop): appends are refused, background threads exit.
    pub(crate) stopping: AtomicBool,
    pub(crate) stats: Stats,
    commits: watch::Sender<u64>,
    pub(crate) handoff: Mutex<Handoff>,
    pub(crate) checkpoints: Mutex<CheckpointState>,
    /// `Handoff::journal_bytes` as of the last checkpoint, readable without the
    /// `checkpoints` lock (which is held across segment syncs).
    checkpoint_journal_bytes: AtomicU64,
    /// The file of the last checkpoint's journal position P (files before it are not needed
    /// for replay), readable without the `checkpoints` lock: the journal cleaner and disk
    /// use reports read it.
    checkpoint_journal_seq: AtomicU64,
    pub(crate) checkpoint_signal: Signal,
    /// Set when a producer-state table changed with no append (the log cleaner forgot
    /// aborted transactions): the next checkpoint runs even with nothing new in the
    /// journal, so its producer snapshots make the change durable.
    pub(crate) producer_snapshot_wanted: AtomicBool,
    pub(crate) retention_signal: Signal,
    /// Wakes the log cleaner threads (shutdown).
    pub(crate) cleaner_signal: Signal,
    /// The log cleaner's shared state (`cleaner.rs`).
    pub(crate) cleaner: crate::cleaner::CleanerState,
    /// Wakes the journal cleaner (deletions, shutdown).
    pub(crate) journal_cleaner_signal: Signal,
    /// The journal cleaner's I/O rate limit.
    pub(crate) journal_cleaner_io: crate::throttle::Throttle,
    /// Serializes create_partition / delete_partition.
    admin: Mutex<()>,
}

impl Engine {
    pub(crate) fn new(config: LogManagerConfig, fs: Arc<dyn Fs>) -> Self {
        let journal_dir = config.data_dir.join(JOURNAL_DIR);
        Self {
            config,
            fs,
            journal_dir,
            journal_pool: Arc::new(FreePool::default()),
            journal_files: Arc::new(JournalFiles::default()),
            partitions: RwLock::new(HashMap::new()),
            next_uid: AtomicU64::new(1),
            poisoned: AtomicBool::new(false),
            journal_is_cache: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            stats: Stats::default(),
            commits: watch::channel(0).0,
            handoff: Mutex::new(Handoff::default()),
            checkpoints: Mutex::new(CheckpointState::default()),
            checkpoint_journal_bytes: AtomicU64::new(0),
            checkpoint_journal_seq: AtomicU64::new(0),
            checkpoint_signal: Signal::default(),
            producer_snapshot_wanted: AtomicBool::new(false),
            retention_signal: Signal::default(),
            cleaner_signal: Signal::default(),
            cleaner: crate::cleaner::CleanerState::default(),
            journal_cleaner_signal: Signal::default(),
            journal_cleaner_io: crate::throttle::Throttle::default(),
            admin: Mutex::new(()),
        }
    }

    pub(crate) fn next_uid(&self) -> u64 {
        self.next_uid.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// Marks the log failed after a write-path I/O error. Never undone: after a failed
    /// `fdatasync` the page cache may have dropped the dirty pages, so retrying could
    /// report success for data that is gone. Recovery is a restart.
    pub(crate) fn poison(&self, what: &str, error: &io::Error) {
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            tracing::error!(%error, what, "storage I/O failed; the log is poisoned: every write is refused (KAFKA_STORAGE_ERROR) until the broker is restarted; reads go on");
        }
    }

    /// Poisons the log because undoing a refused commit round failed (the files may not
    /// match memory any more): says what was refused and which step of the undo failed.
    pub(crate) fn poison_refused_undo(
        &self,
        what: &str,
        error: &io::Error,
        step: &str,
        undo_error: &io::Error,
    ) {
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            tracing::error!(%error, what, step, %undo_error, "a commit round refused by the system could not be undone; the log is poisoned: every write is refused (KAFKA_STORAGE_ERROR) until the broker is restarted; reads go on");
        }
    }

    /// Runs a write-path operation, poisoning the log if it fails, unless the system
    /// refused the write or open before anything durable changed (no space, no file
    /// descriptor: `fs::is_retryable`). Callers undo what they started; later requests try
    /// again, so the log recovers by itself once space or descriptors are free.
    pub(crate) fn guard<T>(&self, what: &str, result: io::Result<T>) -> Result<T, LogError> {
        result.map_err(|error| {
            if fs::is_retryable(&error) {
                return refused(what, error);
            }
            self.poison(what, &error);
            LogError::Io(error)
        })
    }

    pub(crate) fn check_writable(&self) -> Result<(), LogError> {
        if self.is_poisoned() {
            return Err(LogError::Poisoned);
        }
        Ok(())
    }

    pub(crate) fn bump_commits(&self) {
        self.commits
            .send_modify(|counter| *counter = counter.wrapping_add(1));
    }

    pub(crate) fn subscribe_commits(&self) -> watch::Receiver<u64> {
        self.commits.subscribe()
    }

    /// The partition for `key`, which must also match the topic id.
    pub(crate) fn partition(&self, key: &PartitionKey) -> Result<Arc<Partition>, LogError> {
        let map = self.partitions.read();
        let found = map.get(&(Arc::clone(&key.topic), key.partition));
        match found {
            Some(p) if p.key.topic_id == key.topic_id => Ok(Arc::clone(p)),
            _ => Err(LogError::UnknownPartition),
        }
    }

    /// Every live partition, in creation order, so that checkpoints, retention and
    /// recovery touch files in the same order every run (the crash-model test replays a
    /// seed exactly).
    pub(crate) fn partitions_snapshot(&self) -> Vec<Arc<Partition>> {
        let mut partitions: Vec<Arc<Partition>> =
            self.partitions.read().values().cloned().collect();
        partitions.sort_unstable_by_key(|p| p.uid);
        partitions
    }

    /// Segment files held by the partitions of `topic` (numbered from 0 without gaps, so
    /// the count stops at the first missing number). O(partitions of the topic): asked only
    /// when a request may roll a segment (`committer`), about once per segment.
    pub(crate) fn topic_segment_files(&self, topic: &Arc<str>) -> usize {
        let map = self.partitions.read();
        (0..)
            .map_while(|p| map.get(&(Arc::clone(topic), p)))
            .map(|p| p.segment_count())
            .sum()
    }

    /// Whether `topic` may roll `rolls` more segments within
    /// `segment_files_per_topic_max`.
    pub(crate) fn topic_may_roll(&self, topic: &Arc<str>, rolls: u64) -> bool {
        let share = self.config.segment_files_per_topic_max;
        share == usize::MAX
            || (self.topic_segment_files(topic) as u64).saturating_add(rolls) <= share as u64
    }

    pub(crate) fn partitions_by_id(&self) -> HashMap<(TopicId, i32), Arc<Partition>> {
        let map = self.partitions.read();
        map.values()
            .map(|p| ((p.key.topic_id, p.key.partition), Arc::clone(p)))
            .collect()
    }

    /// Adds a recovered or created partition. Recovery points start where the partition
    /// is known durable (its log end: it was just created, or recovery synced it).
    pub(crate) fn insert_partition(
        &self,
        partition: Arc<Partition>,
        durable_to: Option<RecoveryPoint>,
    ) {
        if let Some(point) = durable_to {
            self.handoff
                .lock()
                .recovery_points
                .insert(partition.uid, point);
        }
        let key = (Arc::clone(&partition.key.topic), partition.key.partition);
        self.partitions.write().insert(key, partition);
    }

    pub(crate) fn checkpoints_journal_bytes(&self) -> u64 {
        self.checkpoint_journal_bytes.load(Ordering::Acquire)
    }

    /// The file of the last checkpoint's journal position (see `checkpoint_journal_seq`).
    pub(crate) fn checkpoint_journal_seq(&self) -> u64 {
        self.checkpoint_journal_seq.load(Ordering::Acquire)
    }

    pub(crate) fn set_checkpoints_journal_bytes(&self, bytes: u64) {
        self.checkpoint_journal_bytes
            .store(bytes, Ordering::Release);
    }

    pub(crate) fn stats(&self) -> LogStats {
        self.stats.snapshot()
    }

    /// Creates the partition directory, its first segment and its metadata, durably.
    pub(crate) fn create_partition(
        &self,
        key: PartitionKey,
        config: LogConfig,
    ) -> Result<(), LogError> {
        self.check_writable()?;
        if !metadata::is_legal_topic_name(&key.topic) || key.partition < 0 {
            return Err(LogError::InvalidRecord(
                "not a legal topic name or partition number",
            ));
        }
        let _admin = self.admin.lock();
        let dir = self
            .config
            .data_dir
            .join(metadata::dir_name(&key.topic, key.partition));
        let exists = self
            .partitions
            .read()
            .contains_key(&(Arc::clone(&key.topic), key.partition));
        if exists || self.fs.exists(&dir) {
            return Err(LogError::PartitionExists);
        }
        let created = self.create_partition_files(&key, &dir);
        if created.as_ref().is_err_and(fs::is_retryable) {
            // Nothing of the partition is in use yet: take the half-made directory away so
            // the create can be retried (a crash here leaves it without metadata, which
            // recovery removes).
            if let Err(error) = self.fs.remove_dir_all(&dir) {
                tracing::warn!(%error, dir = %dir.display(), "could not remove a half-created partition directory");
            }
        }
        let segment = self.guard("create partition", created)?;
        let point = RecoveryPoint {
            offset: Offset(0),
            segment_base: Offset(0),
            position: 0,
        };
        let partition = Partition::new(
            key,
            self.next_uid(),
            dir,
            config,
            vec![Arc::new(segment)],
            Offset(0),
            self.config.producer_ids_per_partition_max,
        );
        tracing::info!(topic = %partition.key.topic, partition = partition.key.partition, "created partition");
        self.insert_partition(Arc::new(partition), Some(point));
        Ok(())
    }

    /// Directory, first segment, then metadata last: a directory without metadata is an
    /// unfinished create, which recovery removes.
    fn create_partition_files(&self, key: &PartitionKey, dir: &Path) -> io::Result<Segment> {
        let fs = self.fs.as_ref();
        fs.create_dir_all(dir)?;
        let segment = Segment::create(fs, dir, Offset(0))?;
        if !mutated!("partition_create.dir_unsynced") {
            fs.sync_dir(dir)?;
        }
        let meta = PartitionMetadata {
            topic_id: key.topic_id,
            topic: key.topic.to_string(),
            partition: key.partition,
        };
        fs::write_file_atomic(fs, &dir.join(metadata::FILE_NAME), &meta.encode())?;
        if !mutated!("partition_create.data_dir_unsynced") {
            fs.sync_dir(&self.config.data_dir)?;
        }
        Ok(segment)
    }

    /// Removes a partition: it disappears from the map at once (appends get
    /// UnknownPartition), then its files go, metadata first so that a crash half way leaves
    /// a directory recovery recognizes as unfinished and removes.
    pub(crate) fn delete_partition(&self, key: &PartitionKey) -> Result<(), LogError> {
        let _admin = self.admin.lock();
        let partition = self.partition(key)?;
        self.partitions
            .write()
            .remove(&(Arc::clone(&key.topic), key.partition));
        partition.mark_deleted();
        let _trim = partition.trim_lock.lock();
        // Waits for a commit round that is writing to it right now.
        let _append = partition.append_lock.lock();
        // Waits for a producer snapshot being written into the directory.
        let _snapshot = partition.snapshot_lock.lock();
        for segment in partition.segments() {
            segment.mark_deleted();
        }
        {
            // Out of the checkpointer's lists now: they would hold the partition's journal
            // files until a checkpoint succeeds, and on a full disk none does until space
            // is freed, which is what deleting a topic there is for.
            let mut handoff = self.handoff.lock();
            handoff.recovery_points.remove(&partition.uid);
            handoff.dirty.retain(|s| !s.is_deleted());
            handoff.sealed.retain(|s| !s.is_deleted());
            handoff.new_files.retain(|p| p.uid != partition.uid);
        }
        let result = self.delete_partition_files(&partition.dir);
        self.guard("delete partition", result)?;
        tracing::info!(topic = %key.topic, partition = key.partition, "deleted partition");
        self.bump_commits();
        Ok(())
    }

    fn delete_partition_files(&self, dir: &Path) -> io::Result<()> {
        let fs = self.fs.as_ref();
        match fs.remove_file(&dir.join(metadata::FILE_NAME)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        if !mutated!("partition_delete.dir_unsynced") {
            fs.sync_dir(dir)?;
        }
        fs.remove_dir_all(dir)?;
        if mutated!("partition_delete.data_dir_unsynced") {
            return Ok(());
        }
        fs.sync_dir(&self.config.data_dir)
    }

    /// Writes the checkpoint file for journal position `journal` with the given recovery
    /// and producer state points and every live partition's current log start offset.
    pub(crate) fn write_checkpoint_file(
        &self,
        journal: JournalPosition,
        recovery_points: &HashMap<u64, RecoveryPoint>,
        producer_points: &HashMap<u64, ProducerStatePoint>,
        clean_shutdown: bool,
    ) -> io::Result<()> {
        let mut partitions: Vec<PartitionCheckpoint> = self
            .partitions_snapshot()
            .iter()
            .map(|p| PartitionCheckpoint {
                topic_id: p.key.topic_id,
                partition: p.key.partition,
                log_start_offset: p.log_start(),
                recovery: recovery_points.get(&p.uid).copied(),
                producer_state: producer_points.get(&p.uid).copied(),
            })
            .collect();
        partitions.sort_by_key(|p| (p.topic_id, p.partition));
        let contents = Checkpoint {
            clean_shutdown,
            journal,
            partitions,
        }
        .encode();
        fs::write_file_atomic(
            self.fs.as_ref(),
            &self.journal_dir.join(checkpoint::FILE_NAME),
            &contents,
        )?;
        Stats::add(&self.stats.checkpoints, 1);
        Ok(())
    }

    /// Makes log start offsets durable now (DeleteRecords) by rewriting the last
    /// checkpoint with them; journal position and recovery points stay as they were.
    pub(crate) fn persist_log_starts(&self) -> Result<(), LogError> {
        let state = self.checkpoints.lock();
        self.check_writable()?;
        let result = self.write_checkpoint_file(
            state.journal,
            &state.recovery_points,
            &state.producer_points,
            false,
        );
        self.guard("write checkpoint for DeleteRecords", result)
    }

    /// Retires the journal files before `position`'s file (which the checkpoint no longer
    /// needs for replay) that no segment points into any more: recycled for later use or
    /// deleted. A file still holding live data waits until its last segment is deleted.
    pub(crate) fn retire_journal_files_before(&self, position: JournalPosition) -> io::Result<()> {
        self.checkpoint_journal_seq
            .fetch_max(position.seq, Ordering::AcqRel);
        for seq in self.journal_files.take_unreferenced_before(position.seq) {
            self.journal_pool
                .retire(self.fs.as_ref(), &self.journal_dir, seq)?;
        }
        crate::cleaner::retire_cleaned_files(self);
        Ok(())
    }
}
