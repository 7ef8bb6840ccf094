//! The group coordinator service: the pure [`GroupCoordinator`] state machine wired to the
//! network and to its durable home, the internal `__consumer_offsets` partition.
//!
//! - Calls into the coordinator take a short `parking_lot` lock, never held across an
//!   `.await`. Requests that must wait (JoinGroup, SyncGroup) are parked under a
//!   [`ReplyId`] whose oneshot sender lives in `parked`; the coordinator answers them later
//!   through [`Effects`], from another request's call or from the timer task.
//! - One writer task owns every append to `__consumer_offsets`. It takes all jobs queued at
//!   that moment, appends them as one request (so one group-commit `fdatasync`, shared with
//!   produce, covers them), waits until they are durable, then applies validated commits to
//!   the coordinator and answers. Offset commits therefore ride the produce path's group
//!   commit without slowing it: they are one more partition in a round.
//! - Jobs that carry already-applied state (group metadata after a rebalance) are queued
//!   while the coordinator lock is held, so the log keeps them in the order the state
//!   changed.
//! - The offsets log is kept small without compaction: when it holds far more records than
//!   there is live state, the writer appends a snapshot of every live record and then moves
//!   the log start offset to the snapshot's first offset (see `docs/coordinator.md`).
//! - On start the whole partition is replayed into the coordinator before the listener
//!   accepts connections.
//!
//! Bounds: the job queue is bounded by the requests in flight (connections × in-flight
//! requests per connection); parked replies likewise; each append round takes at most
//! [`limits::GROUP_WRITE_JOBS_PER_ROUND_MAX`] jobs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use parking_lot::Mutex;
use sluice_coordinator::{
    Effects, GroupConfig, GroupCoordinator, GroupReply, ReplyId, StoreRecord,
};
use sluice_log::{
    AppendGroup, LogConfig, LogError, LogManager, Offset, PartitionKey, ProducerEpoch, ProducerId,
};
use tokio::sync::{mpsc, oneshot, watch, Notify};

use crate::clock::Clock;
use crate::config::limits;

pub use crate::services::internal_topics::{OFFSETS_TOPIC, OFFSETS_TOPIC_ID};

/// Its partition count, as Metadata reports it: one partition (a single node gains nothing
/// from spreading groups over several).
pub const OFFSETS_TOPIC_PARTITIONS: i32 = 1;

/// The log key of the offsets partition.
pub fn offsets_partition() -> PartitionKey {
    const _: () = assert!(
        OFFSETS_TOPIC_PARTITIONS == 1,
        "every group lives in partition 0"
    );
    PartitionKey {
        topic_id: OFFSETS_TOPIC_ID,
        topic: Arc::from(OFFSETS_TOPIC),
        partition: 0,
    }
}

/// Storage settings of the offsets partition: never deleted by time or size (the
/// snapshot scheme bounds it), small segments so a moved log start frees disk soon.
fn offsets_log_config() -> LogConfig {
    LogConfig {
        segment_bytes: limits::OFFSETS_SEGMENT_BYTES,
        retention_ms: -1,
        retention_bytes: -1,
        max_message_bytes: limits::OFFSETS_BATCH_BYTES_MAX as u32,
        ..LogConfig::default()
    }
}

/// Why a write to the offsets log failed. `refused` says why the log refused a
/// transactional offset batch (TxnOffsetCommit), when that is the reason.
#[derive(Debug, Clone, thiserror::Error)]
#[error("writing to {OFFSETS_TOPIC} failed: {0}")]
pub struct WriteError(pub String, pub Option<TxnRefusal>);

impl WriteError {
    fn new(message: impl ToString) -> WriteError {
        WriteError(message.to_string(), None)
    }

    fn from_log(e: &LogError) -> WriteError {
        let refused = match e {
            LogError::InvalidProducerEpoch { .. } => Some(TxnRefusal::Fenced),
            LogError::InvalidTxnState { .. } => Some(TxnRefusal::NotInTransaction),
            _ => None,
        };
        WriteError(e.to_string(), refused)
    }
}

/// The log's refusal of a transactional offset batch (docs/transactions.md §7.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnRefusal {
    /// The producer's epoch is older than the partition's: a newer incarnation or the
    /// coordinator's timeout abort fenced it.
    Fenced,
    /// `__consumer_offsets-0` is not (or no longer) part of the producer's transaction.
    NotInTransaction,
}

/// The producer a transactional offsets job writes for (TxnOffsetCommit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxnProducer {
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// One unit of work for the writer task.
#[derive(Debug)]
struct Job {
    records: Vec<StoreRecord>,
    /// Apply the records to the coordinator once durable (validated commits and deletes);
    /// false for records whose state is already applied.
    apply: bool,
    /// Transactional offsets (TxnOffsetCommit): written as the producer's transactional
    /// batch in an append of their own, and held as pending once durable.
    txn: Option<TxnProducer>,
    /// Parked requests to answer once the records are durable.
    replies: Vec<(ReplyId, GroupReply)>,
    done: Option<oneshot::Sender<Result<(), WriteError>>>,
}

/// The coordinator, its parked requests and its writer.
#[derive(Debug)]
pub struct GroupService {
    coordinator: Mutex<GroupCoordinator>,
    parked: Mutex<HashMap<ReplyId, oneshot::Sender<GroupReply>>>,
    next_reply: AtomicU64,
    jobs: mpsc::UnboundedSender<Job>,
    /// Taken by [`GroupService::start`].
    jobs_rx: Mutex<Option<mpsc::UnboundedReceiver<Job>>>,
    /// Wakes the timer task when a call may have brought a deadline forward.
    timer: Notify,
    log: LogManager,
    key: PartitionKey,
    /// Live records in the last snapshot (or loaded), for the compaction threshold.
    live_records: AtomicU64,
    /// The coordinator's time: every call, tick and commit timestamp reads it.
    clock: Clock,
}

impl GroupService {
    /// Opens (creating if needed) the offsets partition and replays it into a new
    /// coordinator, which keeps time by `clock`. Blocking: runs before the listener accepts.
    pub fn open(
        log: &LogManager,
        config: GroupConfig,
        clock: Clock,
    ) -> Result<GroupService, LogError> {
        let key = offsets_partition();
        match log.create_partition(key.clone(), offsets_log_config()) {
            Ok(()) | Err(LogError::PartitionExists) => {}
            Err(e) => return Err(e),
        }
        log.set_config(&key, offsets_log_config())?;
        let mut coordinator = GroupCoordinator::new(config, random_seed());
        let started = std::time::Instant::now();
        let loaded = load(log, &key, &mut coordinator, clock.now_ms())?;
        coordinator.finish_load(
            clock.now_ms(),
            crate::services::consumer_protocol::decode_subscription,
        );
        let live = coordinator.snapshot().len() as u64;
        tracing::info!(
            records = loaded,
            load_ms = started.elapsed().as_millis() as u64,
            "group coordinator loaded {OFFSETS_TOPIC}"
        );
        let (jobs, jobs_rx) = mpsc::unbounded_channel();
        Ok(GroupService {
            coordinator: Mutex::new(coordinator),
            parked: Mutex::new(HashMap::new()),
            next_reply: AtomicU64::new(1),
            jobs,
            jobs_rx: Mutex::new(Some(jobs_rx)),
            timer: Notify::new(),
            log: log.clone(),
            key,
            live_records: AtomicU64::new(live),
            clock,
        })
    }

    /// Starts the writer and timer tasks on the current runtime.
    pub fn start(self: &Arc<Self>, shutdown: watch::Receiver<bool>) {
        if let Some(rx) = self.jobs_rx.lock().take() {
            tokio::spawn(Arc::clone(self).run_writer(rx));
        }
        tokio::spawn(Arc::clone(self).run_timer(shutdown));
    }

    /// The coordinator's clock (handlers stamp commits with it).
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Reserves a reply slot for a request that may be parked.
    pub fn park(&self) -> (ReplyId, oneshot::Receiver<GroupReply>) {
        let id = ReplyId(self.next_reply.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.parked.lock().insert(id, tx);
        (id, rx)
    }

    /// Forgets a reply slot whose request was answered directly.
    pub fn unpark(&self, id: ReplyId) {
        self.parked.lock().remove(&id);
    }

    /// Runs `f` on the coordinator with the current time and dispatches the effects it
    /// returns while the lock is still held (so persisted state keeps its order).
    pub fn call<T>(&self, f: impl FnOnce(&mut GroupCoordinator, i64) -> (T, Effects)) -> T {
        let mut coordinator = self.coordinator.lock();
        let (value, effects) = f(&mut coordinator, self.clock.now_ms());
        self.dispatch(effects);
        drop(coordinator);
        self.timer.notify_one();
        value
    }

    /// Read-only access to the coordinator.
    pub fn read<T>(&self, f: impl FnOnce(&GroupCoordinator) -> T) -> T {
        f(&self.coordinator.lock())
    }

    /// Validates under the lock with the current time (no effects). For calls that only
    /// refresh sessions (Heartbeat, commit validation): they move deadlines later, never
    /// earlier, so the timer task need not be woken.
    pub fn check<T>(&self, f: impl FnOnce(&mut GroupCoordinator, i64) -> T) -> T {
        f(&mut self.coordinator.lock(), self.clock.now_ms())
    }

    /// Appends validated records (commits, deletes) and applies them once durable.
    pub async fn write(&self, records: Vec<StoreRecord>) -> Result<(), WriteError> {
        self.write_job(records, None).await
    }

    /// Appends validated transactional offsets as `producer`'s transactional batch and,
    /// once durable, holds them as the producer's pending offsets (KIP-447,
    /// docs/transactions.md §6.5): the marker of its transaction decides them
    /// ([`Self::complete_txn`]).
    pub async fn write_txn(
        &self,
        records: Vec<StoreRecord>,
        producer: TxnProducer,
    ) -> Result<(), WriteError> {
        self.write_job(records, Some(producer)).await
    }

    /// The producer's transaction marker in `__consumer_offsets-0` is durable: its pending
    /// offsets become committed (`commit`) or are dropped.
    pub fn complete_txn(&self, producer_id: i64, commit: bool) {
        let decided =
            self.coordinator
                .lock()
                .complete_txn(producer_id, commit, self.clock.now_ms());
        if decided > 0 {
            tracing::debug!(
                producer_id,
                commit,
                offsets = decided,
                "transactional offsets decided"
            );
        }
    }

    async fn write_job(
        &self,
        records: Vec<StoreRecord>,
        txn: Option<TxnProducer>,
    ) -> Result<(), WriteError> {
        if records.is_empty() {
            return Ok(());
        }
        let (done, result) = oneshot::channel();
        let job = Job {
            records,
            apply: true,
            txn,
            replies: Vec::new(),
            done: Some(done),
        };
        if self.jobs.send(job).is_err() {
            return Err(WriteError::new("the offsets writer has stopped"));
        }
        result
            .await
            .unwrap_or_else(|_| Err(WriteError::new("the offsets writer has stopped")))
    }

    fn dispatch(&self, effects: Effects) {
        let Effects { replies, persist } = effects;
        if persist.is_empty() {
            self.deliver(replies);
            return;
        }
        let job = Job {
            records: persist,
            apply: false,
            txn: None,
            replies,
            done: None,
        };
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(job) {
            tracing::warn!("offsets writer stopped; group state change not persisted");
            self.deliver(job.replies);
        }
    }

    fn deliver(&self, replies: Vec<(ReplyId, GroupReply)>) {
        if replies.is_empty() {
            return;
        }
        let mut parked = self.parked.lock();
        for (id, reply) in replies {
            if let Some(tx) = parked.remove(&id) {
                // The request may be gone (connection closed); nothing to do then.
                let _ = tx.send(reply);
            }
        }
    }

    async fn run_timer(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        loop {
            let next = self.coordinator.lock().next_deadline_ms();
            let wait_ms = next
                .map(|d| (d - self.clock.now_ms()).clamp(0, limits::GROUP_TIMER_INTERVAL_MS_MAX))
                .unwrap_or(limits::GROUP_TIMER_INTERVAL_MS_MAX);
            tokio::select! {
                // Biased: shutdown first, then a due deadline before a wake-up, so a steady
                // stream of requests cannot starve the timers.
                biased;
                _ = shutdown.wait_for(|s| *s) => break,
                _ = self.clock.sleep_ms(wait_ms as u64) => {}
                _ = self.timer.notified() => continue,
            }
            let mut coordinator = self.coordinator.lock();
            let effects = coordinator.tick(self.clock.now_ms());
            self.dispatch(effects);
        }
        // Parked requests are answered with NOT_COORDINATOR by their handlers once their
        // senders are dropped.
        self.parked.lock().clear();
    }

    async fn run_writer(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Job>) {
        let mut jobs = Vec::new();
        while rx
            .recv_many(&mut jobs, limits::GROUP_WRITE_JOBS_PER_ROUND_MAX)
            .await
            > 0
        {
            let outcomes = self.append_round(&jobs).await;
            {
                let now = self.clock.now_ms();
                let mut coordinator = self.coordinator.lock();
                for (job, outcome) in jobs.iter().zip(&outcomes) {
                    let Ok(base) = outcome else { continue };
                    if !job.apply {
                        continue;
                    }
                    for (offset, record) in (base.0..).zip(&job.records) {
                        match job.txn {
                            None => coordinator.apply(record, offset, now),
                            Some(p) => coordinator.apply_txn_offset(p.producer_id, record, offset),
                        }
                    }
                }
            }
            for (job, outcome) in jobs.drain(..).zip(outcomes) {
                if let Err(e) = &outcome {
                    if e.1.is_none() {
                        tracing::error!(error = %e, "group coordinator write failed");
                    }
                }
                // Already-applied state (a finished rebalance) is answered even when the
                // write failed: the group works in memory; the log is poisoned and the
                // broker refuses writes until restarted.
                self.deliver(job.replies);
                if let Some(done) = job.done {
                    let _ = done.send(outcome.map(|_| ()));
                }
            }
            if let Err(e) = self.maybe_compact().await {
                tracing::error!(error = %e, "compacting {OFFSETS_TOPIC} failed");
            }
        }
    }

    /// Appends one round of jobs as one append group (one sync): the plain jobs' records
    /// as one log request, each transactional job as a request of its own (the log judges
    /// a request whole, so one producer's refused batch must not fail the others).
    /// Returns each job's outcome: the log offset of its first record.
    async fn append_round(&self, jobs: &[Job]) -> Vec<Result<Offset, WriteError>> {
        let plain: Vec<&StoreRecord> = jobs
            .iter()
            .filter(|j| j.txn.is_none())
            .flat_map(|j| j.records.iter())
            .collect();
        let has_plain = !plain.is_empty();
        let slots = usize::from(has_plain) + jobs.iter().filter(|j| j.txn.is_some()).count();
        let mut group = AppendGroup::new();
        group.reset(slots);
        // Per slot: an error found before the append was queued.
        let mut queued: Vec<Option<WriteError>> = Vec::with_capacity(slots);
        if has_plain {
            let result = match encode_batches(&plain, None, self.clock.now_ms()) {
                Ok(bytes) => self
                    .log
                    .append_in_group(&self.key, bytes, &group, 0)
                    .await
                    .map_err(|e| WriteError::from_log(&e)),
                Err(e) => Err(WriteError::new(e)),
            };
            queued.push(result.err());
        }
        drop(plain);
        for job in jobs {
            let Some(p) = job.txn else { continue };
            let slot = queued.len();
            let records: Vec<&StoreRecord> = job.records.iter().collect();
            let result = self.append_txn_job(&records, p, &group, slot).await;
            queued.push(result.err());
        }
        group.wait().await;
        let outcome = |slot: usize, queued: &mut [Option<WriteError>]| {
            if let Some(e) = queued[slot].take() {
                return Err(e);
            }
            match group.take(slot) {
                Some(Ok(info)) => Ok(info.base_offset),
                Some(Err(e)) => Err(WriteError::from_log(&e)),
                None => Err(WriteError::new("append not answered")),
            }
        };
        let plain_outcome = has_plain.then(|| outcome(0, &mut queued));
        let mut plain_next = plain_outcome.clone().and_then(Result::ok).map(|o| o.0);
        let mut txn_slot = usize::from(has_plain);
        let mut out = Vec::with_capacity(jobs.len());
        for job in jobs {
            if job.txn.is_some() {
                out.push(outcome(txn_slot, &mut queued));
                txn_slot += 1;
                continue;
            }
            match (&plain_outcome, plain_next.as_mut()) {
                (_, Some(next)) => {
                    out.push(Ok(Offset(*next)));
                    *next += job.records.len() as i64;
                }
                (Some(Err(e)), None) => out.push(Err(e.clone())),
                _ => out.push(Err(WriteError::new("append not answered"))),
            }
        }
        out
    }

    /// Queues one transactional offsets job in `slot` of `group`: the producer's batch,
    /// with the base sequence the log expects next (this writer is the only one writing
    /// that producer's batches in the offsets partition, one round at a time).
    async fn append_txn_job(
        &self,
        records: &[&StoreRecord],
        p: TxnProducer,
        group: &AppendGroup,
        slot: usize,
    ) -> Result<(), WriteError> {
        let (id, epoch) = (ProducerId(p.producer_id), ProducerEpoch(p.producer_epoch));
        let sequence = self
            .log
            .next_sequence(&self.key, id, epoch)
            .map_err(|e| WriteError::from_log(&e))?;
        let bytes = encode_batches(records, Some((p, sequence)), self.clock.now_ms())
            .map_err(WriteError::new)?;
        self.log
            .append_in_group(&self.key, bytes, group, slot)
            .await
            .map_err(|e| WriteError::from_log(&e))
    }

    /// Appends records (in as many batches as their size needs) as one log request and
    /// waits until durable. Returns the offset of the first record.
    async fn append(&self, records: &[&StoreRecord]) -> Result<Offset, WriteError> {
        let bytes = encode_batches(records, None, self.clock.now_ms()).map_err(WriteError::new)?;
        let waiter = self
            .log
            .append(&self.key, bytes)
            .await
            .map_err(|e| WriteError::from_log(&e))?;
        let info = waiter.wait().await.map_err(|e| WriteError::from_log(&e))?;
        Ok(info.base_offset)
    }

    /// When the offsets log holds many more records than there is live state, appends a
    /// snapshot of the live state and moves the log start offset to it.
    ///
    /// Undecided transactional offsets are not in the snapshot (it holds committed state
    /// only), so the log start never passes the first open transaction: the last stable
    /// offset, read before the snapshot is taken, bounds it, and a replay still finds their
    /// records and their markers (docs/transactions.md §6.5). Only the records below it
    /// can go, so only they count towards the threshold; otherwise a long transaction would
    /// make every round append another snapshot.
    async fn maybe_compact(&self) -> Result<(), WriteError> {
        let offsets = self.log.offsets(&self.key).map_err(WriteError::new)?;
        let stable = offsets.last_stable_offset;
        let held = (stable.0 - offsets.log_start_offset.0).max(0) as u64;
        let live = self.live_records.load(Ordering::Relaxed);
        if held <= limits::OFFSETS_COMPACT_RECORDS_MIN.max(live.saturating_mul(2)) {
            return Ok(());
        }
        let snapshot = self.coordinator.lock().snapshot();
        let snapshot_start = if snapshot.is_empty() {
            offsets.log_end_offset
        } else {
            let refs: Vec<&StoreRecord> = snapshot.iter().collect();
            self.append(&refs).await?
        };
        let new_start = snapshot_start.min(stable);
        let log = self.log.clone();
        let key = self.key.clone();
        let moved = tokio::task::spawn_blocking(move || log.delete_records(&key, new_start))
            .await
            .map_err(WriteError::new)?
            .map_err(WriteError::new)?;
        self.live_records
            .store(snapshot.len() as u64, Ordering::Relaxed);
        tracing::info!(
            records_before = held,
            live_records = snapshot.len(),
            log_start_offset = moved.0,
            "compacted {OFFSETS_TOPIC} by snapshot"
        );
        Ok(())
    }
}

fn random_seed() -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&uuid::Uuid::new_v4().as_bytes()[..8]);
    u64::from_le_bytes(bytes)
}

/// Encodes records into v2 batches of at most [`limits::OFFSETS_BATCH_BYTES_SOFT`] each
/// (a single larger record gets a batch of its own).
/// With `producer`, the batches are that producer's transactional batches, sequences
/// numbered on from the given base sequence. Every record is stamped `now` (ms).
fn encode_batches(
    records: &[&StoreRecord],
    producer: Option<(TxnProducer, i32)>,
    now: i64,
) -> Result<Bytes, String> {
    let mut out = BytesMut::new();
    let mut batch: Vec<Record> = Vec::new();
    let mut batch_bytes = 0usize;
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    for (index, record) in records.iter().enumerate() {
        let key = Bytes::from(record.encode_key());
        let value = record.encode_value().map(Bytes::from);
        let size = key.len() + value.as_ref().map_or(0, Bytes::len) + 32;
        if !batch.is_empty() && batch_bytes + size > limits::OFFSETS_BATCH_BYTES_SOFT {
            RecordBatchEncoder::encode(&mut out, &batch, &options).map_err(|e| e.to_string())?;
            batch.clear();
            batch_bytes = 0;
        }
        batch_bytes += size;
        let (producer_id, producer_epoch, sequence) = match producer {
            Some((p, base)) => (
                p.producer_id,
                p.producer_epoch,
                // Kafka's wrapping sequence arithmetic.
                base.wrapping_add(index as i32) & i32::MAX,
            ),
            None => (-1, -1, -1),
        };
        batch.push(Record {
            transactional: producer.is_some(),
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: batch.len() as i64,
            sequence,
            timestamp: now,
            key: Some(key),
            value,
            headers: IndexMap::new(),
        });
    }
    if !batch.is_empty() {
        RecordBatchEncoder::encode(&mut out, &batch, &options).map_err(|e| e.to_string())?;
    }
    Ok(out.freeze())
}

/// Replays the offsets partition into `coordinator` at time `now` (ms). Returns the
/// records applied.
fn load(
    log: &LogManager,
    key: &PartitionKey,
    coordinator: &mut GroupCoordinator,
    now: i64,
) -> Result<u64, LogError> {
    let mut applied = 0u64;
    crate::services::replay::replay(log, key, OFFSETS_TOPIC, |record| {
        let Some(k) = record.key.as_deref() else {
            return;
        };
        if record.control {
            // A transaction marker (docs/transactions.md §6.5): decides the producer's
            // pending offsets, in log order as they were decided.
            if let Some(commit) = marker_commits(k) {
                coordinator.complete_txn(record.producer_id, commit, now);
            }
            return;
        }
        match StoreRecord::decode(k, record.value.as_deref()) {
            Ok(r) if record.transactional => {
                coordinator.apply_txn_offset(record.producer_id, &r, record.offset);
                applied += 1;
            }
            Ok(r) => {
                coordinator.apply(&r, record.offset, now);
                applied += 1;
            }
            Err(e) => {
                tracing::warn!(error = %e, offset = record.offset, "skipping record in {OFFSETS_TOPIC}")
            }
        }
    })?;
    Ok(applied)
}

/// A control record's key (version i16, type i16: 0 ABORT, 1 COMMIT): whether the marker
/// commits; `None` for a key that is not a marker's.
fn marker_commits(key: &[u8]) -> Option<bool> {
    match key {
        [_, _, 0, 0] => Some(false),
        [_, _, 0, 1] => Some(true),
        _ => None,
    }
}
