//! Configuration: per-partition [`LogConfig`] (Kafka's topic configs that storage obeys) and
//! the process-wide [`LogManagerConfig`]. Every storage limit lives here.

use std::path::PathBuf;

/// Journal files retired by a checkpoint that are kept (renamed `<seq>.free`) and reused
/// as later journal files instead of being deleted. Overwriting already-allocated blocks
/// lets `fdatasync` skip the file system's metadata commit; each kept file costs up to
/// `journal_file_bytes_max` of disk space.
pub const JOURNAL_FILES_RECYCLED_MAX: usize = 4;

/// Size of one chunk of the journal's in-memory tail (`sluice.journal.direct.io`, see
/// `journal_tail`): rounds are laid out back to back in it. A round larger than this (one
/// huge request) is staged in memory of its own, released after its write.
pub const JOURNAL_TAIL_CHUNK_BYTES: usize = 4 << 20;

/// Chunks of the in-memory tail kept for readers: the newest stretch of the journal that
/// fetches are served from memory, without reading back what was written with `O_DIRECT`.
/// At 200 MB/s of produce it is the last 80 ms, far more than a tailing consumer lags.
pub const JOURNAL_TAIL_BYTES_MAX: usize = 16 << 20;

/// All chunk memory alive at once: the ring plus chunks still pinned by fetch responses
/// being written to slow sockets. Past it the committer stages rounds privately (readers
/// then read the file) until the responses let go.
pub const JOURNAL_TAIL_ALLOCATED_BYTES_MAX: usize = 32 << 20;

/// Batches remembered per idempotent producer for duplicate detection. Kafka keeps 5
/// because a producer has at most 5 requests in flight per partition
/// (`max.in.flight.requests.per.connection` <= 5 is required for idempotence), so any retry
/// it can send is one of its last 5 batches.
pub const PRODUCER_BATCHES_CACHED_MAX: usize = 5;
const _: () = assert!(PRODUCER_BATCHES_CACHED_MAX >= 1 && PRODUCER_BATCHES_CACHED_MAX <= 255);

/// Default of [`LogManagerConfig::producer_eviction_idle_ms`]: a producer's state is
/// evicted to make room for a new producer id only once it has been idle this long (see
/// `producer_state`). It outlasts the retry window of every client default: Java's
/// `delivery.timeout.ms` (120 s) and librdkafka's `message.timeout.ms` (300 s); a client
/// configured to retry for longer is protected only while the table has room. New producers
/// arriving at a table full of more recently active ones are refused (retriably) until some
/// become idle or expire.
pub const PRODUCER_EVICTION_IDLE_MS_DEFAULT: u64 = 600_000;

/// When a partition's producer snapshot cannot be used (missing, damaged, or newer than
/// what recovery found), its producer state is rebuilt by walking the batch headers of at
/// most this many of its newest segments. Older producers are forgotten and therefore
/// accepted with any sequence: the safe direction (a retry may be written twice, but no
/// batch is ever answered as a duplicate of data that is not there).
pub const PRODUCER_STATE_REBUILD_SEGMENTS_MAX: usize = 2;

/// How long a checkpoint waits for the append in flight to become durable before it
/// snapshots a partition's producer state (normally one journal sync). When it waits in
/// vain, that partition keeps its previous snapshot until the next checkpoint.
pub const PRODUCER_SNAPSHOT_WAIT_MS_MAX: u64 = 10_000;

/// At most one ERROR line per segment (and one per partition, for offsets between
/// segments) per this long for damaged stored data found by reads, carrying the count of
/// the lines left out: a consumer retrying a damaged offset finds the damage on every fetch.
pub const DAMAGE_LOG_INTERVAL_MS: u64 = 10_000;

/// Bytes of a journal file read into the page cache, from the start of a fetch's range
/// that is not cached, before the read path checks that range's batches (the same
/// stretch as the broker's fetch readers read ahead, `FETCH_READ_AHEAD_BYTES`): the
/// journal interleaves partitions, so a cold catch-up read range by range would reach the
/// disk as short requests.
pub const CHECK_READ_AHEAD_BYTES: u64 = 4 << 20;

/// Which timestamp a batch keeps (`message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimestampType {
    /// Keep the producer's timestamps (Kafka's default).
    #[default]
    CreateTime,
    /// Overwrite the batch max timestamp with the broker's append time and set the
    /// timestamp-type attribute bit; the batch CRC is recomputed (the only re-encoding
    /// the log ever does).
    LogAppendTime,
}

/// Per-partition settings, taken from the topic's configs.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    /// `segment.bytes`: roll the active segment before it would exceed this size.
    pub segment_bytes: u64,
    /// `segment.ms`: roll a non-empty active segment older than this on the next append.
    pub segment_ms: i64,
    /// `retention.ms`: delete whole segments whose newest record is older; -1 keeps forever.
    pub retention_ms: i64,
    /// `retention.bytes`: delete oldest whole segments while the partition is larger; -1 = no limit.
    pub retention_bytes: i64,
    /// `max.message.bytes`: the largest record batch accepted.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `index.interval.bytes`: bytes between offset/time index entries.
    pub index_interval_bytes: u32,
    /// `cleanup.policy` contains `delete`: retention deletes old segments.
    pub cleanup_delete: bool,
    /// `cleanup.policy` contains `compact`: the log cleaner keeps the newest record per key
    /// (see `docs/compaction.md`).
    pub cleanup_compact: bool,
    /// `min.cleanable.dirty.ratio`: clean when this share of the cleanable bytes is dirty.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records newer than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: a dirty segment older than this is cleaned whatever the
    /// dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: a tombstone is removed by the first pass this long after the
    /// pass that first saw it (KIP-534; see `docs/compaction.md` §3).
    pub delete_retention_ms: i64,
}

impl LogConfig {
    /// How old the active segment may get before it is rolled: `segment.ms`, or on a
    /// compacted topic `max.compaction.lag.ms` when that is shorter (as Kafka's
    /// `maxSegmentMs`), since the active segment is never cleaned and a record must be
    /// cleanable within `max.compaction.lag.ms`.
    pub fn roll_ms(&self) -> i64 {
        match self.cleanup_compact && self.max_compaction_lag_ms > 0 {
            true => self.segment_ms.min(self.max_compaction_lag_ms),
            false => self.segment_ms,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            max_message_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
            index_interval_bytes: 4096,
            cleanup_delete: true,
            cleanup_compact: false,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

/// When appends are made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Every append is answered only after an `fdatasync` of the journal covers it.
    #[default]
    Always,
    /// Kafka-style page-cache durability: appends are answered once written, never synced
    /// on the produce path (checkpoints still sync segments). Off by default.
    Never,
}

/// What the log does with appended batches (`sluice.storage`, `sluice serve --storage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Storage {
    /// The journal and segments on disk: the broker.
    #[default]
    Disk,
    /// A no-op log for calibration (`sluice-bench --calibrate`, `--target null`): every
    /// append is validated, queued and given offsets by the committer as usual, then
    /// acknowledged without being laid out, written or synced. Nothing is kept, the high
    /// watermark never moves, so a fetch finds nothing and long-polls instead of spinning.
    /// What remains is the cost of the front end (network, decoding, validation, the append
    /// queue and the commit round's wake-ups): the least a broker must do. Never durable.
    Null,
}

/// Process-wide settings for the [`crate::LogManager`].
#[derive(Debug, Clone)]
pub struct LogManagerConfig {
    pub data_dir: PathBuf,
    pub fsync: FsyncPolicy,
    /// Disk (the default), or the no-op log of calibration runs.
    pub storage: Storage,
    /// Roll the journal to a new file after this many bytes.
    pub journal_file_bytes_max: u64,
    /// `sluice.journal.direct.io`: write journal rounds with `O_DIRECT` from one aligned
    /// buffer instead of through the page cache (same `fdatasync`, same durability).
    /// Default true: a buffered append into new blocks waits, in its `fdatasync`, for ext4's
    /// one shared conversion worker, which a busy CPU starves for seconds (docs/performance.md,
    /// "Why the journal is written with O_DIRECT by default"); false keeps the page cache
    /// warm for consumers that lag further than the in-memory tail. Applies only with
    /// `FsyncPolicy::Always`: see [`LogManagerConfig::journal_writes_direct`].
    pub journal_direct_io: bool,
    /// Checkpoint (sync dirty segments, then drop covered journal files) when this many
    /// journal bytes have been written since the last checkpoint...
    pub checkpoint_bytes: u64,
    /// ...or when this much time has passed with unflushed data.
    pub checkpoint_interval_ms: u64,
    /// Capacity of the bounded append queue (requests, not bytes). Producers wait when full.
    pub append_queue_len: usize,
    /// Most bytes one group-commit round takes from the queue before it syncs.
    pub commit_bytes_max: usize,
    /// How often retention (time, bytes) and time-based segment rolls are checked. Idle
    /// producer ids are expired on the same schedule.
    pub retention_check_interval_ms: u64,
    /// Idempotent producers tracked per partition. When a new producer id arrives at a
    /// full partition, the least recently active one is forgotten if it has been idle for
    /// `producer_eviction_idle_ms` (it is then accepted with any sequence, like an
    /// expired one); otherwise the new producer is refused with `ProducerStateFull`. Each costs about 200 bytes of memory and
    /// of the partition's producer snapshot. Minimum 1.
    pub producer_ids_per_partition_max: usize,
    /// Kafka's `producer.id.expiration.ms`: a producer id with no append to a partition for
    /// this long is forgotten there. Default 86_400_000 (one day).
    pub producer_id_expiration_ms: u64,
    /// How long a producer must have been idle before a new producer id may take its slot
    /// in a full partition table (`sluice.producer.eviction.idle.ms`, default
    /// [`PRODUCER_EVICTION_IDLE_MS_DEFAULT`]). Below a client's retry window, a retry of
    /// an evicted producer is no longer recognised as a duplicate.
    pub producer_eviction_idle_ms: u64,
    /// Most segment files open at once in the process (every segment keeps its file open,
    /// as in Kafka). Creating a partition or rolling a segment beyond it is refused with
    /// `LogError::FileLimit` (the log is not poisoned), so the descriptors left over for
    /// the journal, checkpoints, index files and client connections never run out. The
    /// broker sets it from `RLIMIT_NOFILE` minus its reserve; default: no limit.
    pub segment_files_max: usize,
    /// Most segment files one topic may hold before its rolls are refused with
    /// `LogError::FileLimit` (the request only; nothing of it is written), so one topic
    /// cannot take all of `segment_files_max` and leave no file for others' rolls and new
    /// partitions. New partitions are not held to it (each needs its one file). The broker
    /// sets it to a share of `segment_files_max`; default: no limit.
    pub segment_files_per_topic_max: usize,
    /// The log cleaner's process-wide settings (Kafka's `log.cleaner.*`).
    pub cleaner: CleanerConfig,
    /// The journal cleaner's settings (`sluice.journal.cleaner.*`).
    pub journal_cleaner: JournalCleanerConfig,
    /// Reads and rewrites records for the cleaner (the log itself never decompresses);
    /// `None`: no cleaner runs, and compacted partitions are only rolled.
    pub record_codec: Option<std::sync::Arc<dyn crate::cleaner::RecordCodec>>,
}

/// Kafka's `log.cleaner.*` broker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable`.
    pub enable: bool,
    /// `log.cleaner.threads`: cleaner threads (at least 1).
    pub threads: usize,
    /// `log.cleaner.backoff.ms`: sleep between passes when nothing is due.
    pub backoff_ms: u64,
    /// `log.cleaner.io.max.bytes.per.second`: bytes read plus written by all cleaner
    /// threads together; `u64::MAX`: no limit.
    pub io_max_bytes_per_second: u64,
    /// `log.cleaner.dedupe.buffer.size`: memory for the key map of one pass, shared by the
    /// threads (each gets its share), in bytes.
    pub dedupe_buffer_bytes: u64,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        Self {
            enable: true,
            threads: 1,
            backoff_ms: 15_000,
            io_max_bytes_per_second: u64::MAX,
            dedupe_buffer_bytes: 128 << 20,
        }
    }
}

/// The journal cleaner (`journal_cleaner.rs`): moves the bytes that outlive their
/// neighbours out of mostly-expired journal files, so those files can be freed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct JournalCleanerConfig {
    /// `sluice.journal.cleaner.enable`.
    pub enable: bool,
    /// `sluice.journal.cleaner.max.live.ratio`: a data file is cleaned once at most this
    /// share of its bytes is still live, counting only bytes that outlive its natural end
    /// (when the rest expires) by more than [`JournalCleanerConfig::slack_ms`]. 0.5 means
    /// at most one byte moved per byte freed.
    pub max_live_ratio: f64,
    /// `sluice.journal.cleaner.backoff.ms`: time between passes (a retention pass that
    /// deleted something, DeleteRecords and topic deletion also wake it).
    pub backoff_ms: u64,
    /// `sluice.journal.cleaner.io.max.bytes.per.second`: bytes read plus written.
    pub io_max_bytes_per_second: u64,
}

impl Default for JournalCleanerConfig {
    fn default() -> Self {
        Self {
            enable: true,
            max_live_ratio: 0.5,
            backoff_ms: 5_000,
            io_max_bytes_per_second: 64 << 20,
        }
    }
}

impl JournalCleanerConfig {
    /// Bytes that expire within this long after the rest of their file count as expiring
    /// with it and are never moved: at least [`JOURNAL_CLEANER_SLACK_MS_MIN`], and at
    /// least one retention check, since retention may delete that much later anyway.
    pub fn slack_ms(retention_check_interval_ms: u64) -> i64 {
        i64::try_from(retention_check_interval_ms)
            .unwrap_or(i64::MAX)
            .max(JOURNAL_CLEANER_SLACK_MS_MIN)
    }
}

/// See [`JournalCleanerConfig::slack_ms`].
pub const JOURNAL_CLEANER_SLACK_MS_MIN: i64 = 60_000;

impl LogManagerConfig {
    /// Whether journal rounds are written with `O_DIRECT`: `journal_direct_io`, and only
    /// when every ack waits for `fdatasync` anyway. A direct write returns when the device
    /// has the bytes, so under `FsyncPolicy::Never` it would make each ack wait for the
    /// device, the wait that policy exists to skip (measured, transactional runs: EndTxn
    /// p99 47-63 ms direct against 14-17 ms through the page cache, docs/transactions.md
    /// §13.5); and the stall that made direct writes the default is one of `fdatasync`.
    pub fn journal_writes_direct(&self) -> bool {
        self.journal_direct_io && self.fsync == FsyncPolicy::Always
    }

    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            fsync: FsyncPolicy::Always,
            storage: Storage::Disk,
            journal_file_bytes_max: 128 << 20,
            journal_direct_io: true,
            checkpoint_bytes: 256 << 20,
            checkpoint_interval_ms: 5_000,
            append_queue_len: 4096,
            commit_bytes_max: 8 << 20,
            // Kafka's `log.retention.check.interval.ms` default, as the broker's config
            // table has it (a broker test checks they agree).
            retention_check_interval_ms: 300_000,
            producer_ids_per_partition_max: 10_000,
            producer_id_expiration_ms: 86_400_000,
            producer_eviction_idle_ms: PRODUCER_EVICTION_IDLE_MS_DEFAULT,
            segment_files_max: usize::MAX,
            segment_files_per_topic_max: usize::MAX,
            cleaner: CleanerConfig::default(),
            journal_cleaner: JournalCleanerConfig::default(),
            record_codec: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the journal is written with O_DIRECT only when asked for and every ack waits
    // for fdatasync; under `never` it goes through the page cache whatever the setting.
    #[test]
    fn direct_journal_writes_only_under_fsync_always() {
        let mut c = LogManagerConfig::new("/data");
        assert!(
            c.journal_direct_io && c.journal_writes_direct(),
            "the default"
        );
        for (fsync, direct_io, expected) in [
            (FsyncPolicy::Always, true, true),
            (FsyncPolicy::Always, false, false),
            (FsyncPolicy::Never, true, false),
            (FsyncPolicy::Never, false, false),
        ] {
            (c.fsync, c.journal_direct_io) = (fsync, direct_io);
            assert_eq!(
                c.journal_writes_direct(),
                expected,
                "{fsync:?} direct.io={direct_io}"
            );
        }
    }
}
