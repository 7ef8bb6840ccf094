//! The transaction coordinator service (docs/transactions.md §2, §5): the pure
//! [`TransactionCoordinator`] wired to its durable home, the internal partition
//! `__transaction_state-0`, and to the markers it writes into the transactions' partitions.
//!
//! - Calls into the coordinator take a short `parking_lot` lock, never held across an
//!   `.await`.
//! - A change (decision record, markers, completion record) is queued by the request's task
//!   as one [`AppendGroup`], in that order, so one group-commit sync covers it and recovery
//!   keeps a prefix of it (§5.2). Once the group is answered, the records whose appends
//!   succeeded are applied in order and the id's pending flag is cleared: memory is the fold
//!   of durable records. Changes of one id are serialized by that flag (other requests get
//!   CONCURRENT_TRANSACTIONS), changes of different ids are independent.
//! - AddPartitionsToTxn's record and the verification of each added partition in the log
//!   (`LogManager::verify_txn_after`) are queued together and share a commit round; the
//!   verifications take effect only if the record does, and the client is answered once
//!   both are durable (§6.1).
//! - On start the partition is replayed; ongoing transactions have their partitions verified
//!   again and decided ones are completed. A timer aborts timed-out transactions, retries
//!   unfinished completions and expires idle ids (§8).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use parking_lot::Mutex;
use sluice_coordinator::{
    TopicPartition, TransactionCoordinator, TxnChange, TxnConfig, TxnRecord, TxnResult, TxnVersion,
};
use sluice_log::{
    AppendGate, AppendGroup, AppendWaiter, ControlType, LogConfig, LogError, LogManager,
    PartitionKey, ProducerEpoch, ProducerId,
};
use tokio::sync::watch;

use crate::clock::Clock;
use crate::config::{limits, BrokerConfig};
use crate::services::groups::{offsets_partition, GroupService, OFFSETS_TOPIC, OFFSETS_TOPIC_ID};
use crate::services::topics::TopicRegistry;

pub use crate::services::internal_topics::{TXN_STATE_TOPIC, TXN_STATE_TOPIC_ID};

/// The log key of the transaction state partition (one partition: §2).
pub fn txn_state_partition() -> PartitionKey {
    PartitionKey {
        topic_id: TXN_STATE_TOPIC_ID,
        topic: Arc::from(TXN_STATE_TOPIC),
        partition: 0,
    }
}

fn txn_state_log_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        retention_ms: -1,
        retention_bytes: -1,
        ..LogConfig::default()
    }
}

/// The coordinator and the log it writes to.
#[derive(Debug)]
pub struct TxnService {
    coordinator: Mutex<TransactionCoordinator>,
    log: LogManager,
    key: PartitionKey,
    /// The group coordinator, told when a marker in `__consumer_offsets-0` decides a
    /// producer's transactional offsets (§6.5).
    groups: Arc<GroupService>,
    /// The coordinator's time: every call, the timer and record timestamps read it.
    clock: Clock,
}

impl TxnService {
    /// Opens (creating if needed) the transaction state partition, with segments of
    /// `segment_bytes` (`transaction.state.log.segment.bytes`), and replays it. Time
    /// comes from the group coordinator's clock, so both coordinators share one.
    /// Blocking: runs before the listener accepts.
    pub fn open(
        log: &LogManager,
        config: TxnConfig,
        segment_bytes: u64,
        groups: Arc<GroupService>,
    ) -> Result<TxnService, LogError> {
        let key = txn_state_partition();
        match log.create_partition(key.clone(), txn_state_log_config(segment_bytes)) {
            Ok(()) | Err(LogError::PartitionExists) => {}
            Err(e) => return Err(e),
        }
        log.set_config(&key, txn_state_log_config(segment_bytes))?;
        let mut coordinator = TransactionCoordinator::new(config);
        let loaded = load(log, &key, &mut coordinator)?;
        tracing::info!(
            records = loaded,
            "transaction coordinator loaded {TXN_STATE_TOPIC}"
        );
        Ok(TxnService {
            coordinator: Mutex::new(coordinator),
            log: log.clone(),
            key,
            clock: groups.clock().clone(),
            groups,
        })
    }

    /// Runs `f` on the coordinator with the current time.
    pub fn call<T>(&self, f: impl FnOnce(&mut TransactionCoordinator, i64) -> T) -> T {
        f(&mut self.coordinator.lock(), self.clock.now_ms())
    }

    /// Writes `change` as one append group and applies what became durable. `Err` when
    /// any append of it failed (the id stays as its durable records say).
    pub async fn write(&self, topics: &TopicRegistry, change: &TxnChange) -> Result<(), LogError> {
        self.write_then_verify(topics, change, &[]).await
    }

    /// [`Self::write`] and, in the same commit round, the verification of `partitions` in
    /// the log for the change's producer id and epoch (AddPartitionsToTxn, §6.1). The
    /// verifications are queued right behind the change, gated on it (`AppendGate`): the
    /// committer refuses them unless the change's records took effect, so a partition is
    /// never verified for a transaction whose record was refused. The id stays pending
    /// until both are answered, so no EndTxn can slip in between. One round instead of two
    /// in a row: AddPartitionsToTxn took two syncs (p50 5.5-7.4 ms on a quiet machine).
    pub async fn write_then_verify(
        &self,
        topics: &TopicRegistry,
        change: &TxnChange,
        partitions: &[TopicPartition],
    ) -> Result<(), LogError> {
        let gate = AppendGate::new();
        let mut group = AppendGroup::new();
        let markers = Self::marker_keys(topics, change);
        let queued = self.queue_change(change, &markers, &mut group, &gate).await;
        let (first, rest) =
            partitions.split_at(partitions.len().min(limits::TXN_VERIFY_IN_FLIGHT_MAX));
        let mut waiters = Ok(Vec::new());
        if let (Ok(_), Some(v)) = (&queued, change.complete.value.as_ref()) {
            debug_assert!(
                first.is_empty() || change.markers.is_none(),
                "EndTxn verifies nothing"
            );
            let (id, epoch) = (ProducerId(v.producer_id), ProducerEpoch(v.producer_epoch));
            // A V2 transaction's first batch in each partition must start at sequence 0.
            let epoch_bump = v.client_transaction_version >= TxnVersion::V2.level();
            waiters = self
                .queue_verify(topics, first, id, epoch, Some((&gate, epoch_bump)))
                .await;
        }
        group.wait().await;
        let result = Self::collect_change(change, &markers, &group, queued);
        let durable = match &result {
            Ok((durable, _)) => durable.len() == change.records().count(),
            Err(_) => false,
        };
        if let Ok((records, offsets_marker)) = &result {
            let mut coordinator = self.coordinator.lock();
            for record in records {
                coordinator.apply(record);
            }
            drop(coordinator);
            // The marker in the offsets partition decides the producer's pending offsets
            // there; it is durable, so memory may follow (as a replay would).
            if let (true, Some(m)) = (*offsets_marker, &change.markers) {
                let commit = m.result == TxnResult::Commit;
                self.groups.complete_txn(m.producer_id, commit);
            }
        }
        // Awaited whatever the change's fate (a refused one answers at once), so nothing
        // of this request is still queued once the id is released.
        let mut verified = match waiters {
            Ok(waiters) => wait_all(waiters).await,
            Err(e) => Err(e),
        };
        if let (true, Ok(()), Some(v)) = (durable, &verified, change.complete.value.as_ref()) {
            if !rest.is_empty() {
                verified = self
                    .verify(topics, rest, v.producer_id, v.producer_epoch)
                    .await;
            }
        }
        self.coordinator.lock().finish(change.transactional_id());
        result?;
        match durable {
            true => verified,
            false => Err(LogError::Poisoned),
        }
    }

    /// Queues the change's appends as one group, in order: decision, markers, completion.
    /// The change's own records open `gate`. `Err` is the first append that could not be
    /// queued; nothing after it is queued.
    async fn queue_change(
        &self,
        change: &TxnChange,
        markers: &[PartitionKey],
        group: &mut AppendGroup,
        gate: &AppendGate,
    ) -> Result<(), LogError> {
        group.reset(usize::from(change.prepare.is_some()) + markers.len() + 1);
        let mut slot = 0;
        if let Some(prepare) = &change.prepare {
            let record = encode(prepare, self.clock.now_ms());
            self.log
                .append_in_group_gating(&self.key, record, group, slot, gate)
                .await?;
            slot += 1;
        }
        if let Some(m) = &change.markers {
            let control = match m.result {
                TxnResult::Commit => ControlType::Commit,
                TxnResult::Abort => ControlType::Abort,
            };
            let (id, epoch) = (ProducerId(m.producer_id), ProducerEpoch(m.producer_epoch));
            for key in markers {
                self.log
                    .append_marker_in_group(key, id, epoch, control, group, slot)
                    .await?;
                slot += 1;
            }
        }
        let record = encode(&change.complete, self.clock.now_ms());
        self.log
            .append_in_group_gating(&self.key, record, group, slot, gate)
            .await
    }

    /// The log keys of the change's markers, in the order they are queued.
    fn marker_keys(topics: &TopicRegistry, change: &TxnChange) -> Vec<PartitionKey> {
        change
            .markers
            .iter()
            .flat_map(|m| m.partitions.iter())
            .filter_map(|tp| marker_key(topics, tp))
            .collect()
    }

    /// Once the group is answered: the change's records whose appends are durable (a
    /// prefix), and whether a marker in `__consumer_offsets-0` is durable.
    fn collect_change(
        change: &TxnChange,
        markers: &[PartitionKey],
        group: &AppendGroup,
        queued: Result<(), LogError>,
    ) -> Result<(Vec<TxnRecord>, bool), LogError> {
        let ok = |slot: usize| matches!(group.take(slot), Some(Ok(_)));
        let mut durable = Vec::new();
        let mut slot = 0;
        if let Some(prepare) = &change.prepare {
            if !ok(slot) {
                return queued.map(|()| (durable, false));
            }
            durable.push(prepare.clone());
            slot += 1;
        }
        let mut markers_ok = true;
        let mut offsets_marker = false;
        for key in markers {
            let marker_ok = ok(slot);
            markers_ok &= marker_ok;
            offsets_marker |= marker_ok && key.topic_id == OFFSETS_TOPIC_ID;
            slot += 1;
        }
        if markers_ok && ok(slot) {
            durable.push(change.complete.clone());
        }
        match queued {
            Err(e) if durable.is_empty() && !offsets_marker => Err(e),
            _ => Ok((durable, offsets_marker)),
        }
    }

    /// Marks `partitions` as part of the producer's transaction in the log (§6.1). The
    /// verifications are queued together (up to `TXN_VERIFY_IN_FLIGHT_MAX` at a time) and
    /// then awaited, so they share the committer's rounds: one at a time, a transaction over
    /// N partitions waited for N rounds in a row, each behind whatever fsync was in progress
    /// (measured: AddPartitionsToTxn p99 0.8-2 s over 12 partitions on a loaded machine).
    pub async fn verify(
        &self,
        topics: &TopicRegistry,
        partitions: &[TopicPartition],
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<(), LogError> {
        let (id, epoch) = (ProducerId(producer_id), ProducerEpoch(producer_epoch));
        for chunk in partitions.chunks(limits::TXN_VERIFY_IN_FLIGHT_MAX) {
            wait_all(self.queue_verify(topics, chunk, id, epoch, None).await?).await?;
        }
        Ok(())
    }

    /// Queues the verification of `partitions` (at most `TXN_VERIFY_IN_FLIGHT_MAX`),
    /// behind `gate` if given (with whether the transaction is V2, whose epoch bumps at
    /// every end: `verify_epoch_bump_txn_after`), and returns their waiters. Unknown
    /// partitions are skipped.
    async fn queue_verify(
        &self,
        topics: &TopicRegistry,
        partitions: &[TopicPartition],
        id: ProducerId,
        epoch: ProducerEpoch,
        gate: Option<(&AppendGate, bool)>,
    ) -> Result<Vec<AppendWaiter>, LogError> {
        debug_assert!(partitions.len() <= limits::TXN_VERIFY_IN_FLIGHT_MAX);
        let mut waiters = Vec::with_capacity(partitions.len());
        for key in partitions.iter().filter_map(|tp| marker_key(topics, tp)) {
            let log = &self.log;
            waiters.push(match gate {
                Some((gate, false)) => log.verify_txn_after(&key, id, epoch, gate).await?,
                Some((gate, true)) => {
                    log.verify_epoch_bump_txn_after(&key, id, epoch, gate)
                        .await?
                }
                None => log.verify_txn(&key, id, epoch).await?,
            });
        }
        Ok(waiters)
    }

    /// Completes the load (re-verifies ongoing transactions, writes the missing markers of
    /// decided ones), then runs the timer (completions, timeouts, expiry) until `shutdown`
    /// turns true. The broker spawns it once, on the runtime, at start.
    pub async fn run_timer(
        &self,
        topics: &TopicRegistry,
        mut shutdown: watch::Receiver<bool>,
        config: &BrokerConfig,
    ) {
        // The load's unfinished business first: verify ongoing transactions again and
        // complete decided ones.
        let ongoing: Vec<(Vec<TopicPartition>, i64, i16)> = self.call(|c, _| {
            c.ongoing()
                .map(|(_, m)| {
                    (
                        m.partitions.iter().cloned().collect(),
                        m.producer_id,
                        m.producer_epoch,
                    )
                })
                .collect()
        });
        for (partitions, id, epoch) in ongoing {
            if let Err(e) = self.verify(topics, &partitions, id, epoch).await {
                tracing::error!(error = %e, "re-verifying an ongoing transaction failed");
            }
        }
        // Decided before the restart: only the markers that did not become durable.
        let mut decided = self.call(|c, now| c.pending_completions(now));
        for change in &mut decided {
            self.drop_written_markers(topics, change);
        }
        for change in decided {
            if let Err(e) = self.write(topics, &change).await {
                tracing::error!(error = %e, transactional_id = change.transactional_id(), "transaction completion not durable; retried later");
            }
        }
        let abort_interval_ms = config.transaction_abort_cleanup_interval_ms;
        let expire_interval_ms = config.transaction_remove_expired_cleanup_interval_ms;
        let mut last_expiry_ms = self.clock.now_ms();
        loop {
            let changes = self.call(|c, now| {
                let mut changes = c.pending_completions(now);
                changes.extend(c.abort_timed_out(now));
                // Expiry has its own, longer interval (Kafka's two cleanup settings).
                if now.saturating_sub(last_expiry_ms) >= expire_interval_ms as i64 {
                    last_expiry_ms = now;
                    changes.extend(c.expire_idle(now));
                }
                changes
            });
            for change in changes {
                if let Err(e) = self.write(topics, &change).await {
                    tracing::error!(error = %e, transactional_id = change.transactional_id(), "transaction completion not durable; retried later");
                }
            }
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => break,
                _ = self.clock.sleep_ms(abort_interval_ms) => {}
            }
        }
    }
}

impl TxnService {
    /// Keeps, of a decided transaction's markers, only those of partitions whose log still
    /// shows the transaction open: after a crash between the decision and the completion, a
    /// prefix of the markers may be durable already, and none is written twice
    /// (docs/transactions.md §5.2). Only on load: verification is not persisted, so a
    /// partition without the marker has nothing a zombie could write through; a retry in a
    /// running broker (§5.3) writes every marker, which also ends verifications of partitions
    /// that got no data. Partitions deleted meanwhile are dropped later by [`marker_key`].
    fn drop_written_markers(&self, topics: &TopicRegistry, change: &mut TxnChange) {
        let Some(markers) = change.markers.as_mut() else {
            return;
        };
        let id = ProducerId(markers.producer_id);
        markers
            .partitions
            .retain(|tp| match marker_key(topics, tp) {
                Some(key) => !matches!(self.log.txn_open(&key, id), Ok(false)),
                None => true,
            });
    }
}

/// Waits for every waiter, so none is still queued when the caller goes on; the first
/// error, if any.
async fn wait_all(waiters: Vec<AppendWaiter>) -> Result<(), LogError> {
    let mut first = Ok(());
    for waiter in waiters {
        first = first.and(waiter.wait().await.map(drop));
    }
    first
}

/// The log key of a transaction's partition; `None` when it no longer exists (markers to
/// deleted partitions are skipped, as Kafka does).
fn marker_key(topics: &TopicRegistry, tp: &TopicPartition) -> Option<PartitionKey> {
    if tp.topic == OFFSETS_TOPIC {
        return (tp.partition == 0).then(offsets_partition);
    }
    topics.get(&tp.topic)?.partition(tp.partition).cloned()
}

/// One record in a v2 batch of its own, stamped `now` (ms).
fn encode(record: &TxnRecord, now: i64) -> Bytes {
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    let batch = [Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now,
        key: Some(Bytes::from(record.encode_key())),
        value: record.encode_value().map(Bytes::from),
        headers: IndexMap::new(),
    }];
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(&mut out, &batch, &options).expect("a small record encodes");
    out.freeze()
}

/// Replays the transaction state partition. Returns the records applied.
fn load(
    log: &LogManager,
    key: &PartitionKey,
    coordinator: &mut TransactionCoordinator,
) -> Result<u64, LogError> {
    let mut applied = 0u64;
    crate::services::replay::replay(log, key, TXN_STATE_TOPIC, |record| {
        let Some(k) = record.key.as_deref() else {
            return;
        };
        match TxnRecord::decode(k, record.value.as_deref()) {
            Ok(r) => {
                coordinator.apply(&r);
                applied += 1;
            }
            Err(e) => {
                tracing::warn!(error = %e, offset = record.offset, "skipping record in {TXN_STATE_TOPIC}")
            }
        }
    })?;
    Ok(applied)
}
