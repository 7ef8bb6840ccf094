//! [`LogManager`]: the public face of the log. It owns every partition, the committer
//! thread (group commit into the journal, with the idempotent-producer checks), the
//! checkpointer thread and retention (which also expires idle producer ids).
//!
//! API CONTRACT (the broker codes against exactly this; keep signatures stable).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::append_queue::{self, AppendSender};
use crate::completion::{AppendGate, AppendGroup, Completion, Gating};

use crate::batch::{self, BatchHeader, BatchIter};
use crate::checkpointer;
use crate::committer::TxnOp;
use crate::committer::{AppendRequest, Committer, Message};
use crate::config::{LogConfig, LogManagerConfig, TimestampType};
use crate::engine::Engine;
use crate::error::LogError;
use crate::fs::Fs;
use crate::partition::Partition;
use crate::record_slices::{RangesResult, RecordSlice};
use crate::recovery;
use crate::retention;
use crate::segment::now_ms;
use crate::txn::{self, AbortedTxn, ControlType, IsolationLevel};
use crate::types::{Offset, PartitionKey, ProducerEpoch, ProducerId};

/// Cheap to clone; all clones share one engine.
#[derive(Debug, Clone)]
pub struct LogManager {
    inner: Arc<Inner>,
}

/// Owned by the `LogManager` clones only; the threads hold the [`Engine`], never this, so
/// dropping the last clone runs `Drop` below, which stops and joins them.
#[derive(Debug)]
struct Inner {
    engine: Arc<Engine>,
    /// The append queue's sending side (bounded: `append_queue_len`).
    sender: AppendSender<Message>,
    /// `None` once shut down (or stopped by drop).
    threads: Mutex<Option<Threads>>,
    /// The data directory's `.lock`: released by `shutdown` once the final checkpoint is
    /// written, or on drop after the threads have stopped (declared last, dropped last).
    lock: Mutex<Option<crate::fs::DataDirLock>>,
}

#[derive(Debug)]
struct Threads {
    committer: JoinHandle<()>,
    checkpointer: JoinHandle<()>,
    retention: JoinHandle<()>,
    cleaners: Vec<JoinHandle<()>>,
    journal_cleaner: Option<JoinHandle<()>>,
}

impl Inner {
    /// Stops appends and the threads: the committer finishes what is queued first.
    fn stop_threads(&self, threads: Threads) {
        self.engine.stopping.store(true, Ordering::Release);
        // If the queue is full the committer is busy and sees `stopping` after its round.
        let _ = self.sender.try_send(Message::Stop);
        self.engine.checkpoint_signal.raise();
        self.engine.retention_signal.raise();
        self.engine.cleaner_signal.raise();
        self.engine.journal_cleaner_signal.raise();
        let cleaners = threads
            .cleaners
            .into_iter()
            .map(|h| ("cleaner", h))
            .chain(threads.journal_cleaner.map(|h| ("journal cleaner", h)));
        for (name, handle) in [
            ("committer", threads.committer),
            ("checkpointer", threads.checkpointer),
            ("retention", threads.retention),
        ]
        .into_iter()
        .chain(cleaners)
        {
            if handle.join().is_err() {
                tracing::error!(thread = name, "log thread panicked");
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(threads) = self.threads.get_mut().take() {
            self.stop_threads(threads);
        }
    }
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
}

fn spawn_threads(engine: &Arc<Engine>, committer: Committer) -> Result<Threads, LogError> {
    let stop_on_error = |error: std::io::Error| {
        engine.stopping.store(true, Ordering::Release);
        engine.checkpoint_signal.raise();
        engine.retention_signal.raise();
        engine.cleaner_signal.raise();
        engine.journal_cleaner_signal.raise();
        LogError::Io(error)
    };
    let committer = spawn("sluice-committer", move || committer.run()).map_err(stop_on_error)?;
    let for_checkpointer = Arc::clone(engine);
    let checkpointer = spawn("sluice-checkpointer", move || {
        checkpointer::run(for_checkpointer)
    })
    .map_err(stop_on_error)?;
    let for_retention = Arc::clone(engine);
    let retention =
        spawn("sluice-retention", move || retention::run(for_retention)).map_err(stop_on_error)?;
    let mut cleaners = Vec::new();
    if let Some(codec) = engine.config.record_codec.as_ref() {
        if engine.config.cleaner.enable {
            for n in 0..engine.config.cleaner.threads.max(1) {
                let (engine, codec) = (Arc::clone(engine), Arc::clone(codec));
                let name = format!("sluice-cleaner-{n}");
                let handle = spawn(&name, move || crate::cleaner::run(engine, codec))
                    .map_err(stop_on_error)?;
                cleaners.push(handle);
            }
        }
    }
    let journal_cleaner = match engine.config.journal_cleaner.enable {
        true => {
            let engine = Arc::clone(engine);
            let run = move || crate::journal_cleaner::run(engine);
            Some(spawn("sluice-journal-cleaner", run).map_err(stop_on_error)?)
        }
        false => None,
    };
    Ok(Threads {
        committer,
        checkpointer,
        retention,
        cleaners,
        journal_cleaner,
    })
}

/// What recovery did on open, for the caller to log and for tests to assert.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// Partitions found on disk, with their recovered offsets.
    pub partitions: Vec<(PartitionKey, PartitionOffsets)>,
    /// Journal entries re-applied to segments.
    pub journal_entries_replayed: u64,
    /// Bytes cut from torn or corrupt segment / journal tails.
    pub bytes_truncated: u64,
    /// Human-readable lines, one per action taken (also emitted through `tracing`).
    pub actions: Vec<String>,
}

/// A long poll's wake-up: registered with every partition it waits on
/// ([`LogManager::listen_commits`]), woken once by the next rise of any of their high
/// watermarks. Waking stores a permit, so a commit between registering and waiting is not
/// missed; a permit left from an earlier wake-up only makes the poll check once more. One
/// listener is made per long-polling connection and reused, so waiting allocates nothing.
#[derive(Debug, Clone, Default)]
pub struct CommitListener(Arc<tokio::sync::Notify>);

impl CommitListener {
    /// Completes after a wake-up (or at once, for one stored earlier).
    pub async fn wait(&self) {
        self.0.notified().await;
    }

    pub(crate) fn wake(&self) {
        self.0.notify_one();
    }

    pub(crate) fn same(&self, other: &CommitListener) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The three watermarks of a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    pub log_start_offset: Offset,
    /// Everything below this is decided: no open transaction starts below it
    /// (docs/transactions.md §6.2). Equal to the high watermark without transactions.
    pub last_stable_offset: Offset,
    /// Everything below this is durable and visible to consumers.
    pub high_watermark: Offset,
    /// Next offset to assign (>= high_watermark).
    pub log_end_offset: Offset,
}

/// Result of a durable append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub base_offset: Offset,
    pub last_offset: Offset,
    /// The broker's append time when the partition uses LogAppendTime, else -1.
    pub log_append_time_ms: i64,
    pub log_start_offset: Offset,
    /// The request was a retry of batches already written by the same idempotent producer:
    /// nothing was written, and the offsets (and append time) are those of the original.
    pub duplicate: bool,
}

/// Completes when the append is durable (or has failed). Dropping it is fine (acks=0).
#[derive(Debug)]
pub struct AppendWaiter {
    receiver: oneshot::Receiver<Result<AppendInfo, LogError>>,
}

impl AppendWaiter {
    pub async fn wait(self) -> Result<AppendInfo, LogError> {
        // The committer answers every request it took; a dropped reply means it stopped.
        self.receiver.await.unwrap_or(Err(LogError::ShuttingDown))
    }
}

/// Bytes read for a fetch.
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// Whole batches, starting with the batch that contains the fetch offset.
    pub records: Bytes,
    pub offsets: PartitionOffsets,
}

/// Produced batches, validated and ready to queue.
#[derive(Debug)]
struct Prepared {
    /// The bytes to store: the input itself unless LogAppendTime rewrote it.
    records: Bytes,
    batch_count: usize,
    /// The append time for LogAppendTime partitions, else -1.
    log_append_time_ms: i64,
    /// Some batch carries a producer id (the committer then checks sequences).
    idempotent: bool,
}

/// Checks the producer fields of one batch. A batch with a producer id must carry a base
/// sequence, as Kafka's LogValidator requires; sequences are never negative.
fn validate_producer(header: &BatchHeader<'_>) -> Result<bool, LogError> {
    if !header.producer_id().is_idempotent() {
        return Ok(false);
    }
    if header.base_sequence() < 0 {
        return Err(LogError::InvalidRecord(
            "record batch has a producer id but a negative base sequence",
        ));
    }
    Ok(true)
}

/// Validates produced batches on the caller's thread and applies LogAppendTime.
fn prepare_records(records: Bytes, config: &LogConfig) -> Result<Prepared, LogError> {
    if records.is_empty() {
        return Err(LogError::CorruptBatch("no record batch in the request"));
    }
    let mut batch_count = 0usize;
    let mut idempotent = false;
    for batch in BatchIter::new(records.clone()) {
        let batch = batch?;
        let header = batch::validate(&batch, config.max_message_bytes)?;
        idempotent |= validate_producer(&header)?;
        batch_count += 1;
    }
    let prepared = |records, log_append_time_ms| Prepared {
        records,
        batch_count,
        log_append_time_ms,
        idempotent,
    };
    if config.timestamp_type == TimestampType::CreateTime {
        return Ok(prepared(records, -1));
    }
    let append_time = now_ms();
    if batch_count == 1 {
        let rewritten = batch::with_log_append_time(&records, append_time)?;
        return Ok(prepared(rewritten, append_time));
    }
    let mut rewritten = Vec::with_capacity(records.len());
    for batch in BatchIter::new(records) {
        rewritten.extend_from_slice(&batch::with_log_append_time(&batch?, append_time)?);
    }
    Ok(prepared(Bytes::from(rewritten), append_time))
}

impl LogManager {
    /// Opens (creating if needed) the data dir and recovers every partition found.
    /// Blocking. Starts the committer, checkpointer and retention threads.
    pub fn open(
        config: LogManagerConfig,
        fs: Arc<dyn Fs>,
    ) -> Result<(LogManager, RecoveryReport), LogError> {
        Self::open_with_round_store(config, fs, None)
    }

    /// [`LogManager::open`], with rounds made durable by `round_store` instead of the
    /// journal's `fdatasync` when one is given (`storage.backend=object`): the journal is
    /// then written but never synced on the produce path, and a round is answered only once
    /// the store committed it (see [`crate::round_store`]).
    pub fn open_with_round_store(
        config: LogManagerConfig,
        fs: Arc<dyn Fs>,
        round_store: Option<Box<dyn crate::round_store::RoundStore>>,
    ) -> Result<(LogManager, RecoveryReport), LogError> {
        // Nothing is read before the lock is held: another broker on this directory would
        // otherwise see (and later overwrite) files in the middle of being changed.
        fs.create_dir_all(&config.data_dir)?;
        let lock = fs.lock_data_dir(&config.data_dir)?;
        crate::segment::set_segment_files_max(config.segment_files_max);
        let engine = Arc::new(Engine::new(config, fs));
        let mut round_store = round_store;
        if let Some(store) = round_store.as_mut() {
            engine
                .journal_is_cache
                .store(true, std::sync::atomic::Ordering::Release);
            crate::round_restore::reconcile(&engine, store.as_mut())?;
        }
        let (journal, report) = recovery::recover(&engine)?;
        let (sender, receiver) = append_queue::queue(engine.config.append_queue_len);
        let mut committer = Committer::new(Arc::clone(&engine), receiver, journal);
        if let Some(store) = round_store {
            committer.set_round_store(store);
        }
        let threads = spawn_threads(&engine, committer)?;
        let inner = Inner {
            engine,
            sender,
            threads: Mutex::new(Some(threads)),
            lock: Mutex::new(Some(lock)),
        };
        Ok((
            LogManager {
                inner: Arc::new(inner),
            },
            report,
        ))
    }

    fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Creates a partition's directory and first segment. Blocking; durable on return.
    pub fn create_partition(&self, key: PartitionKey, config: LogConfig) -> Result<(), LogError> {
        self.engine().create_partition(key, config)
    }

    /// Deletes a partition and its files. Blocking. In-flight appends to it fail.
    pub fn delete_partition(&self, key: &PartitionKey) -> Result<(), LogError> {
        self.engine().delete_partition(key)
    }

    /// Replaces a partition's config (takes effect on the next append / retention pass).
    pub fn set_config(&self, key: &PartitionKey, config: LogConfig) -> Result<(), LogError> {
        self.engine().partition(key)?.set_config(config);
        Ok(())
    }

    /// Whether the partition's `cleanup.policy` includes `compact` (the produce path refuses
    /// keyless records there). False for an unknown partition.
    pub fn is_compacted(&self, key: &PartitionKey) -> bool {
        self.engine()
            .partition(key)
            .is_ok_and(|p| p.config().cleanup_compact)
    }

    /// Validates `records` (one or more v2 batches: length, magic, CRC-32C, size against
    /// max.message.bytes, offsets consecutive, a base sequence wherever there is a producer
    /// id) on the caller's thread, then queues them. Waits (async) only when the bounded
    /// append queue is full. Never does file I/O.
    ///
    /// Batches with a producer id (idempotent producers) are checked by the committer
    /// against the partition's producer state, the request as a whole: a retry of a batch
    /// already written is answered with its original offsets and `duplicate` set, writing
    /// nothing; a stale producer epoch fails with `InvalidProducerEpoch` and a sequence gap
    /// with `OutOfOrderSequence`, writing nothing.
    pub async fn append(
        &self,
        key: &PartitionKey,
        records: Bytes,
    ) -> Result<AppendWaiter, LogError> {
        let (partition, prepared) = self.prepare(key, records)?;
        let (completion, receiver) = Completion::oneshot();
        self.send_append(partition, prepared, completion, None)
            .await?;
        Ok(AppendWaiter { receiver })
    }

    /// [`LogManager::append`] answered in slot `slot` of `group` instead of a waiter of its
    /// own: a produce request queues all its partitions on one group and is woken once.
    /// On `Err` the append was not queued (its slot may hold the same error).
    pub async fn append_in_group(
        &self,
        key: &PartitionKey,
        records: Bytes,
        group: &AppendGroup,
        slot: usize,
    ) -> Result<(), LogError> {
        let (partition, prepared) = self.prepare(key, records)?;
        self.send_append(partition, prepared, group.completion(slot), None)
            .await
    }

    /// [`Self::append_in_group`] for an append that opens `gate`: appends queued after it
    /// with [`Self::verify_txn_after`] take effect only if this one does.
    pub async fn append_in_group_gating(
        &self,
        key: &PartitionKey,
        records: Bytes,
        group: &AppendGroup,
        slot: usize,
        gate: &AppendGate,
    ) -> Result<(), LogError> {
        let (partition, prepared) = self.prepare(key, records)?;
        let gating = Some(Gating::Sets(gate.clone()));
        self.send_append(partition, prepared, group.completion(slot), gating)
            .await
    }

    /// Checks the log is writable and validates `records` for the partition's config.
    fn prepare(
        &self,
        key: &PartitionKey,
        records: Bytes,
    ) -> Result<(Arc<Partition>, Prepared), LogError> {
        let engine = self.engine();
        engine.check_writable()?;
        if engine.stopping.load(Ordering::Acquire) {
            return Err(LogError::ShuttingDown);
        }
        let partition = engine.partition(key)?;
        let prepared = prepare_records(records, &partition.config())?;
        Ok((partition, prepared))
    }

    async fn send_append(
        &self,
        partition: Arc<Partition>,
        prepared: Prepared,
        completion: Completion,
        gate: Option<Gating>,
    ) -> Result<(), LogError> {
        let request = AppendRequest {
            partition,
            records: prepared.records,
            batch_count: prepared.batch_count,
            log_append_time_ms: prepared.log_append_time_ms,
            idempotent: prepared.idempotent,
            txn: None,
            gate,
            reply: completion,
            queued_at: Instant::now(),
        };
        self.inner
            .sender
            .send(Message::Append(request))
            .await
            .map_err(|_| LogError::ShuttingDown)
    }

    /// Appends the marker (control batch) that ends producer `producer_id`'s transaction
    /// in partition `key` as `control` decides, answered in slot `slot` of `group`
    /// (docs/transactions.md §5.1: the coordinator queues its decision, every marker and
    /// the completion on one group, in that order). The marker closes the producer's open
    /// transaction there (an ABORT records it as aborted), adopts `epoch` if newer (fencing
    /// older epochs) and clears the partition's verification. Fails with
    /// `InvalidProducerEpoch` for an epoch older than the partition's, writing nothing.
    /// Never does file I/O.
    pub async fn append_marker_in_group(
        &self,
        key: &PartitionKey,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        control: ControlType,
        group: &AppendGroup,
        slot: usize,
    ) -> Result<(), LogError> {
        let partition = self.writable_partition(key)?;
        let records = Bytes::from(txn::marker_batch(producer_id, epoch, control, now_ms()));
        let op = TxnOp::Marker(control);
        self.send_txn(partition, records, op, group.completion(slot), None)
            .await
    }

    /// [`Self::append_marker_in_group`] with a waiter of its own.
    pub async fn append_marker(
        &self,
        key: &PartitionKey,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        control: ControlType,
    ) -> Result<AppendWaiter, LogError> {
        let partition = self.writable_partition(key)?;
        let records = Bytes::from(txn::marker_batch(producer_id, epoch, control, now_ms()));
        let (completion, receiver) = Completion::oneshot();
        self.send_txn(partition, records, TxnOp::Marker(control), completion, None)
            .await?;
        Ok(AppendWaiter { receiver })
    }

    /// Marks partition `key` as part of producer `producer_id`'s ongoing transaction at
    /// `epoch` (the coordinator calls it once AddPartitionsToTxn is durable): the
    /// producer's next transactional batch of that epoch may open the transaction there;
    /// without it such a batch fails with `InvalidTxnState`. Goes through the append queue
    /// and writes nothing, so it is ordered with markers: a batch queued after the marker
    /// that ended the transaction is refused. Fails with `InvalidProducerEpoch` for an
    /// epoch older than the partition's and `ProducerStateFull` when a new producer finds
    /// no slot. Not persisted (the coordinator re-verifies on load).
    pub async fn verify_txn(
        &self,
        key: &PartitionKey,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
    ) -> Result<AppendWaiter, LogError> {
        let op = TxnOp::Verify {
            producer_id,
            epoch,
            epoch_bump: false,
        };
        self.send_verify(key, op, None).await
    }

    /// [`Self::verify_txn`] queued behind appends that open `gate`: refused with
    /// `InvalidTxnState` unless they all took effect, so it can share their commit round
    /// instead of waiting for it (docs/transactions.md §6.1).
    pub async fn verify_txn_after(
        &self,
        key: &PartitionKey,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        gate: &AppendGate,
    ) -> Result<AppendWaiter, LogError> {
        let gating = Some(Gating::Requires(gate.clone()));
        let op = TxnOp::Verify {
            producer_id,
            epoch,
            epoch_bump: false,
        };
        self.send_verify(key, op, gating).await
    }

    /// [`Self::verify_txn_after`] for a Transactions V2 transaction (KIP-890 part 2): its
    /// epoch is its own (bumped at every end), so its first batch here must start at
    /// sequence 0 when the partition holds no batch of the producer at that epoch, else
    /// `OutOfOrderSequence` (Kafka's rule for a verification that `supportsEpochBump`).
    pub async fn verify_epoch_bump_txn_after(
        &self,
        key: &PartitionKey,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        gate: &AppendGate,
    ) -> Result<AppendWaiter, LogError> {
        let gating = Some(Gating::Requires(gate.clone()));
        let op = TxnOp::Verify {
            producer_id,
            epoch,
            epoch_bump: true,
        };
        self.send_verify(key, op, gating).await
    }

    async fn send_verify(
        &self,
        key: &PartitionKey,
        op: TxnOp,
        gate: Option<Gating>,
    ) -> Result<AppendWaiter, LogError> {
        let partition = self.writable_partition(key)?;
        let (completion, receiver) = Completion::oneshot();
        self.send_txn(partition, Bytes::new(), op, completion, gate)
            .await?;
        Ok(AppendWaiter { receiver })
    }

    fn writable_partition(&self, key: &PartitionKey) -> Result<Arc<Partition>, LogError> {
        let engine = self.engine();
        engine.check_writable()?;
        if engine.stopping.load(Ordering::Acquire) {
            return Err(LogError::ShuttingDown);
        }
        engine.partition(key)
    }

    async fn send_txn(
        &self,
        partition: Arc<Partition>,
        records: Bytes,
        op: TxnOp,
        completion: Completion,
        gate: Option<Gating>,
    ) -> Result<(), LogError> {
        let request = AppendRequest {
            partition,
            batch_count: usize::from(!records.is_empty()),
            records,
            log_append_time_ms: -1,
            idempotent: false,
            txn: Some(op),
            gate,
            reply: completion,
            queued_at: Instant::now(),
        };
        self.inner
            .sender
            .send(Message::Append(request))
            .await
            .map_err(|_| LogError::ShuttingDown)
    }

    /// Reads whole batches from `fetch_offset` up to the high watermark, at most `max_bytes`
    /// but always at least the first batch when `min_one_batch` is set (KIP-74). An offset
    /// equal to the high watermark returns empty records. Blocking file I/O: call it from a
    /// blocking thread, not an async worker.
    pub fn read(
        &self,
        key: &PartitionKey,
        fetch_offset: Offset,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogError> {
        self.engine()
            .partition(key)?
            .read(fetch_offset, max_bytes, min_one_batch)
    }

    /// [`Self::read`] as slices instead of bytes: ranges of the journal files holding the
    /// batches, for the network layer to send from the page cache (`sendfile`), with
    /// in-memory bytes only where no file can be sent from. The same batches and errors as
    /// `read`. Each [`crate::FileRange`] pins its journal file until dropped, so hold the
    /// result only until it is sent. Blocking file I/O (batch headers are read).
    pub fn read_ranges(
        &self,
        key: &PartitionKey,
        fetch_offset: Offset,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<RangesResult, LogError> {
        let mut slices = Vec::new();
        let (len, offsets) =
            self.read_ranges_into(key, fetch_offset, max_bytes, min_one_batch, &mut slices)?;
        Ok(RangesResult {
            slices,
            len,
            offsets,
        })
    }

    /// [`Self::read_ranges`] appending to `out` (a fetch reuses it from request to request):
    /// returns the bytes appended and the watermarks. Allocates nothing when `out` has room
    /// (counted by sluice-broker's `tests/alloc_per_request.rs`). Blocking file I/O.
    pub fn read_ranges_into(
        &self,
        key: &PartitionKey,
        fetch_offset: Offset,
        max_bytes: u32,
        min_one_batch: bool,
        out: &mut Vec<RecordSlice>,
    ) -> Result<(usize, PartitionOffsets), LogError> {
        let isolation = IsolationLevel::ReadUncommitted;
        let (len, offsets, _) = self.engine().partition(key)?.read_ranges_into(
            fetch_offset,
            max_bytes,
            min_one_batch,
            isolation,
            out,
        )?;
        Ok((len, offsets))
    }

    /// [`Self::read_ranges_into`] up to the bound of `isolation`: the high watermark, or
    /// for `ReadCommitted` the last stable offset (a fetch offset at or above the LSO and
    /// at most the high watermark reads nothing, as in Kafka). Also returns the offset
    /// after the last batch read (`fetch_offset` when none), the end of the range whose
    /// aborted transactions a read_committed fetch reports. Blocking file I/O.
    pub fn read_ranges_isolated_into(
        &self,
        key: &PartitionKey,
        fetch_offset: Offset,
        max_bytes: u32,
        min_one_batch: bool,
        isolation: IsolationLevel,
        out: &mut Vec<RecordSlice>,
    ) -> Result<(usize, PartitionOffsets, Offset), LogError> {
        self.engine().partition(key)?.read_ranges_into(
            fetch_offset,
            max_bytes,
            min_one_batch,
            isolation,
            out,
        )
    }

    /// Appends to `out` the aborted transactions a `read_committed` fetch that returned
    /// offsets `[from, end)` reports (see [`txn::collect_aborted`]). Non-blocking (one
    /// short lock; the entries are in memory).
    pub fn aborted_transactions(
        &self,
        key: &PartitionKey,
        from: Offset,
        end: Offset,
        out: &mut Vec<AbortedTxn>,
    ) -> Result<(), LogError> {
        let partition = self.engine().partition(key)?;
        let table = partition.producers.lock();
        txn::collect_aborted(table.aborted(), from, end, out);
        Ok(())
    }

    /// Whether `producer_id` has an open transaction at the partition: a data batch of it
    /// is written and its marker is not. The transaction coordinator's load completion
    /// writes markers only where this holds, so no marker is written twice
    /// (docs/transactions.md §5.2). Non-blocking (one short lock).
    pub fn txn_open(&self, key: &PartitionKey, producer_id: ProducerId) -> Result<bool, LogError> {
        let partition = self.engine().partition(key)?;
        let table = partition.producers.lock();
        Ok(table.get(producer_id).is_some_and(|e| e.in_txn()))
    }

    /// The base sequence the next batch of `producer_id` at `epoch` must carry in the
    /// partition: one after its newest batch of that epoch, else 0 (a new epoch starts at
    /// 0; a producer with no batch of its epoch here takes any). For the group
    /// coordinator's transactional offset batches in `__consumer_offsets`, whose only
    /// writer (one task, one round at a time) asks before each batch; Kafka skips the
    /// sequence check for coordinator appends instead (docs/transactions.md §6.5).
    /// Non-blocking (one short lock).
    pub fn next_sequence(
        &self,
        key: &PartitionKey,
        producer_id: ProducerId,
        epoch: ProducerEpoch,
    ) -> Result<i32, LogError> {
        let partition = self.engine().partition(key)?;
        let table = partition.producers.lock();
        let next = table
            .get(producer_id)
            .filter(|e| e.epoch == epoch)
            .and_then(|e| e.newest_batch())
            .map_or(0, |b| {
                crate::producer_state::increment_sequence(b.last_seq, 1)
            });
        Ok(next)
    }

    /// Appends to `out` every producer the partition's producer state holds, least recently
    /// active first (DescribeProducers). At most `producer_ids_per_partition_max` entries;
    /// non-blocking (one short lock, no I/O).
    pub fn active_producers(
        &self,
        key: &PartitionKey,
        out: &mut Vec<txn::ActiveProducer>,
    ) -> Result<(), LogError> {
        let partition = self.engine().partition(key)?;
        let table = partition.producers.lock();
        out.extend(table.by_activity().map(|(id, e)| {
            let newest = e.newest_batch();
            txn::ActiveProducer {
                producer_id: id,
                epoch: e.epoch,
                last_sequence: newest.map_or(-1, |b| b.last_seq),
                last_timestamp_ms: newest.map_or(-1, |b| b.timestamp_ms),
                current_txn_start_offset: e.current_txn_first_offset,
                coordinator_epoch: e.coordinator_epoch,
            }
        }));
        Ok(())
    }

    /// Bytes of record batches the partition holds, as DescribeLogDirs reports them (the
    /// journal files they live in may hold more: other partitions' bytes). Takes the
    /// segment list's read lock briefly.
    pub fn size_bytes(&self, key: &PartitionKey) -> Result<u64, LogError> {
        Ok(self.engine().partition(key)?.size_bytes())
    }

    /// Current watermarks. Non-blocking (atomics only).
    pub fn offsets(&self, key: &PartitionKey) -> Result<PartitionOffsets, LogError> {
        Ok(self.engine().partition(key)?.offsets())
    }

    /// A counter bumped after changes that are not commits but change what a fetch sees:
    /// partition deletion, retention and DeleteRecords moving the log start. Long-polling
    /// fetches wait on it besides their [`CommitListener`].
    pub fn subscribe_commits(&self) -> tokio::sync::watch::Receiver<u64> {
        self.engine().subscribe_commits()
    }

    /// Wakes `listener` at the next rise of `key`'s high watermark (see [`CommitListener`]).
    /// Register before checking the watermark. Registering again before the wake-up is a
    /// no-op; non-blocking (one short lock).
    pub fn listen_commits(
        &self,
        key: &PartitionKey,
        listener: &CommitListener,
    ) -> Result<(), LogError> {
        self.engine().partition(key)?.listen_commits(listener);
        Ok(())
    }

    /// Withdraws `listener` from `key` (its long poll is over). Unknown partitions are
    /// ignored: a deleted partition took its listeners with it.
    pub fn unlisten_commits(&self, key: &PartitionKey, listener: &CommitListener) {
        if let Ok(p) = self.engine().partition(key) {
            p.unlisten_commits(listener);
        }
    }

    /// The first durable batch whose max timestamp is >= `timestamp_ms` (ListOffsets by
    /// time). The caller refines to the exact record. Blocking.
    pub fn find_batch_by_timestamp(
        &self,
        key: &PartitionKey,
        timestamp_ms: i64,
    ) -> Result<Option<Bytes>, LogError> {
        self.engine()
            .partition(key)?
            .find_batch_by_timestamp(timestamp_ms)
    }

    /// The durable batch holding the largest timestamp (ListOffsets MAX_TIMESTAMP). Blocking.
    pub fn find_max_timestamp_batch(&self, key: &PartitionKey) -> Result<Option<Bytes>, LogError> {
        self.engine().partition(key)?.find_max_timestamp_batch()
    }

    /// Moves the log start offset up to `offset` (DeleteRecords); `Offset(-1)` means the high
    /// watermark. Deletes segments wholly below it. Durable on return. Blocking.
    /// Returns the new log start offset. Offsets above the high watermark are OffsetOutOfRange.
    pub fn delete_records(&self, key: &PartitionKey, offset: Offset) -> Result<Offset, LogError> {
        let partition = self.engine().partition(key)?;
        retention::delete_records(self.engine(), &partition, offset)
    }

    /// Runs one retention and time-roll pass now (the background thread also runs it every
    /// `retention_check_interval_ms`). `now_ms` is passed in so tests control time.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<(), LogError> {
        retention::enforce(self.engine(), now_ms)
    }

    /// Forgets, in every partition, the producer ids with no append for
    /// `producer_id_expiration_ms` or more at `now_ms` (Kafka's `producer.id.expiration.ms`);
    /// such a producer is then accepted with any sequence. The retention thread runs this
    /// every `retention_check_interval_ms`; `now_ms` is passed in so tests control time.
    /// No I/O: the next checkpoint writes the smaller state. Returns how many were dropped.
    pub fn expire_producers(&self, now_ms: i64) -> usize {
        retention::expire_producers(self.engine(), now_ms)
    }

    /// Runs a checkpoint now on the caller's thread: syncs every segment written since the
    /// last one, snapshots changed producer state, writes the checkpoint file and deletes
    /// journal files it no longer needs.
    /// The checkpointer thread does the same on its own schedule. Blocking.
    pub fn checkpoint_now(&self) -> Result<(), LogError> {
        if self.engine().stopping.load(Ordering::Acquire) {
            // The shutdown checkpoint is the last one (it carries the clean-shutdown flag).
            return Err(LogError::ShuttingDown);
        }
        checkpointer::checkpoint(self.engine(), false).map(|_| ())
    }

    /// How many more segment files may be opened now (`segment_files_max` minus the files
    /// open in the process): each new partition needs one.
    pub fn segment_files_available(&self) -> usize {
        self.engine()
            .config
            .segment_files_max
            .saturating_sub(crate::segment::segment_files_open())
    }

    /// True once a write or sync has failed.
    pub fn is_poisoned(&self) -> bool {
        self.engine().is_poisoned()
    }

    /// Counters for benchmarks and metrics.
    pub fn stats(&self) -> LogStats {
        self.engine().stats()
    }

    /// Producer ids with state in some partition, summed over the partitions (a producer
    /// writing to three partitions counts three times, as Kafka's `ProducerIdCount`).
    /// One short lock per partition; allocates the partition list, so call it at scrape
    /// time, not per request.
    pub fn producer_ids_live(&self) -> u64 {
        self.engine()
            .partitions_snapshot()
            .iter()
            .map(|p| p.producers.lock().len() as u64)
            .sum()
    }

    /// The group commit's histograms (round sizes, journal sync latency), for metrics.
    /// Allocates a snapshot; call it at scrape time, not per request.
    pub fn commit_histograms(&self) -> CommitHistograms {
        self.engine().stats.histograms()
    }

    /// Runs log cleaner passes on the caller's thread until none is due at `now_ms`
    /// (tests, tools). Blocking. Empty without a `record_codec`.
    pub fn clean_now(&self, now_ms: i64) -> Result<Vec<crate::cleaner::CleanerPass>, LogError> {
        let Some(codec) = self.engine().config.record_codec.clone() else {
            return Ok(Vec::new());
        };
        let mut passes = Vec::new();
        // Each pass moves its partition's dirty start forward by at least one segment, so
        // this ends; the bound only guards against partitions that keep being refilled.
        let segments: usize = self
            .engine()
            .partitions_snapshot()
            .iter()
            .map(|p| p.segment_count())
            .sum();
        for _ in 0..=segments {
            match crate::cleaner::clean_once(self.engine(), codec.as_ref(), now_ms)? {
                Some(pass) => passes.push(pass),
                None => break,
            }
        }
        Ok(passes)
    }

    /// Runs one journal cleaner pass now with the given clock (tests; the thread runs
    /// them every `sluice.journal.cleaner.backoff.ms`).
    pub fn clean_journal_now(
        &self,
        now_ms: i64,
    ) -> Result<crate::journal_cleaner::JournalCleanerPass, LogError> {
        crate::journal_cleaner::clean_once(&self.inner.engine, now_ms)
    }

    /// Disk use of the data files and who holds it (metrics, DescribeLogDirs). Walks
    /// every segment's per-file summary: run it off the network threads.
    pub fn disk_usage(&self) -> crate::journal_cleaner::DiskUsage {
        crate::journal_cleaner::disk_usage(&self.inner.engine)
    }

    /// Stops accepting appends, completes queued ones, syncs, writes a final checkpoint and
    /// joins the threads. Blocking.
    pub fn shutdown(&self) -> Result<(), LogError> {
        let threads = self.inner.threads.lock().take();
        if let Some(threads) = threads {
            self.inner.stop_threads(threads);
            let result = self
                .engine()
                .check_writable()
                .and_then(|()| checkpointer::shutdown_checkpoint(self.engine()));
            // The log writes nothing more: the next process may take the directory.
            drop(self.inner.lock.lock().take());
            result?;
            tracing::info!(data_dir = %self.engine().config.data_dir.display(), "log shut down cleanly");
            return Ok(());
        }
        self.engine().check_writable()
    }
}

/// Monotonic counters since open.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogStats {
    pub journal_syncs: u64,
    pub journal_bytes: u64,
    pub commit_rounds: u64,
    pub checkpoints: u64,
    pub segment_syncs: u64,
    /// Bytes written to segment files other than by the journal: the checkpointer's extent
    /// records and index files, and the cleaner's cleaned segments (its
    /// `cleaner_bytes_written` included). The records themselves are written once, to the
    /// journal (`journal_bytes`).
    pub segment_written_bytes: u64,
    /// Append requests answered (successfully or not).
    pub append_requests: u64,
    /// Record batches written to segments.
    pub batches_appended: u64,
    /// Log cleaner passes (one partition each), segments replaced by a cleaned version,
    /// bytes the cleaner read and wrote, and records it removed.
    pub cleaner_passes: u64,
    pub cleaner_segments_cleaned: u64,
    pub cleaner_bytes_read: u64,
    pub cleaner_bytes_written: u64,
    pub cleaner_records_removed: u64,
    /// Time spent in cleaner passes (microseconds), and the bytes of the segments they
    /// covered before and after cleaning (a pass's `bytes_before` and `bytes_after`).
    pub cleaner_pass_us: u64,
    pub cleaner_bytes_before: u64,
    pub cleaner_bytes_after: u64,
    /// Journal cleaner passes that moved something, data files they cleaned (freed once
    /// nothing reads them) and bytes they moved (also in `segment_written_bytes`).
    pub journal_cleaner_passes: u64,
    pub journal_cleaner_files_cleaned: u64,
    pub journal_cleaner_bytes_moved: u64,
}

/// The group commit's histograms since open (see [`crate::histogram`]).
#[derive(Debug, Clone)]
pub struct CommitHistograms {
    /// Journal bytes written per round (padding included), in bytes.
    pub round_bytes: crate::histogram::HistogramSnapshot,
    /// Append requests answered per round.
    pub round_requests: crate::histogram::HistogramSnapshot,
    /// Each journal `fdatasync`, in nanoseconds (none with `sluice.fsync=never`).
    pub journal_sync_ns: crate::histogram::HistogramSnapshot,
    /// Each round's journal write, in nanoseconds.
    pub journal_write_ns: crate::histogram::HistogramSnapshot,
    /// Each round, queue drained to last answer sent, in nanoseconds.
    pub round_ns: crate::histogram::HistogramSnapshot,
    /// Each append request's time in the queue before a round took it, in nanoseconds.
    pub append_queue_wait_ns: crate::histogram::HistogramSnapshot,
}
