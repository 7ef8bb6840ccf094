//! [`TransactionCoordinator`]: the state of every transactional id (docs/transactions.md
//! §4) as a pure state machine. Time is passed in, nothing is written here: each accepted
//! request hands back a [`TxnChange`] (the `__transaction_state` records and the markers to
//! append, as one append group in order) and the broker applies the records with
//! [`TransactionCoordinator::apply`] only once they are durable, then calls
//! [`TransactionCoordinator::finish`].
//!
//! Guarantees:
//! - memory only ever holds durable state: it is the fold of the applied records (the same
//!   fold replays the log on load), so a crash never loses a state that was answered;
//! - while a change of an id is being written every other request for it gets
//!   CONCURRENT_TRANSACTIONS (Kafka's `pendingTransitionInProgress`), so changes of one id
//!   are written one at a time and in order;
//! - every request is answered with Kafka's error for its case (§7); no call panics on any
//!   input; the ids and the partitions of ongoing transactions are bounded by
//!   [`TxnConfig`].
//!
//! Two transaction protocols are served side by side, chosen per request by its version as
//! Kafka's broker does (docs/transactions.md §14): V1 (AddPartitionsToTxn, AddOffsetsToTxn,
//! EndTxn v0-4; the epoch changes only at InitProducerId and fencing) and V2 (KIP-890 part
//! 2: Produce v12+ and TxnOffsetCommit v5+ add their partitions implicitly,
//! [`TransactionCoordinator::add_partitions_implicitly`]; EndTxn v5 bumps the epoch at
//! every end and moves to a new producer id when it is exhausted,
//! [`TransactionCoordinator::end_txn_v2`]).

use std::collections::{BTreeSet, HashMap};

use crate::config::TxnConfig;
use crate::coordinator::TopicPartition;
use crate::error::TxnError;
use crate::records::MAX_STRING_BYTES;
use crate::txn_records::{TxnRecord, TxnStatus, TxnValue};

/// The partition AddOffsetsToTxn adds: Sluice keeps every group in `__consumer_offsets-0`.
pub const CONSUMER_OFFSETS_PARTITION: (&str, i32) = ("__consumer_offsets", 0);

/// "No producer epoch" (Kafka's `RecordBatch.NO_PRODUCER_EPOCH`), and "no producer id".
const NO_EPOCH: i16 = -1;
const NO_PRODUCER_ID: i64 = -1;

/// Kafka's `TransactionMetadata.isEpochExhausted`: from this epoch on, the next bump takes
/// a new producer id instead (epoch `i16::MAX` stays free for the fencing abort).
fn is_epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

/// How a transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnResult {
    Commit,
    Abort,
}

/// The markers a change writes: one control batch per partition, from this producer id and
/// epoch (§5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMarkers {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub result: TxnResult,
    pub partitions: Vec<TopicPartition>,
}

/// What to append for one accepted request, as one append group in this order: `prepare`
/// (if any), one marker per partition of `markers` (if any), then `complete`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnChange {
    pub prepare: Option<TxnRecord>,
    pub markers: Option<TxnMarkers>,
    pub complete: TxnRecord,
}

impl TxnChange {
    /// The transactional id the change is for.
    pub fn transactional_id(&self) -> &str {
        &self.complete.transactional_id
    }

    /// The change's `__transaction_state` records, in append order.
    pub fn records(&self) -> impl Iterator<Item = &TxnRecord> + '_ {
        self.prepare.iter().chain(std::iter::once(&self.complete))
    }
}

/// The transaction protocol of a request, as Kafka's broker infers it from the request's
/// version (`TransactionVersion`): the level is what `__transaction_state` records keep
/// as `ClientTransactionVersion`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnVersion {
    /// AddPartitionsToTxn v0-3, AddOffsetsToTxn, EndTxn v0-4 (Kafka's TV_0).
    V1,
    /// Produce v12+, TxnOffsetCommit v5+, EndTxn v5+ (Kafka's TV_2).
    V2,
}

impl TxnVersion {
    pub fn level(self) -> i16 {
        match self {
            TxnVersion::V1 => 0,
            TxnVersion::V2 => 2,
        }
    }
}

/// The answer to a Transactions V2 EndTxn (v5+).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndOutcome {
    /// Write `change`; once it is durable, answer with this producer id and epoch (the
    /// bumped epoch, or a new producer id at epoch 0 when the old one was exhausted).
    /// Boxed: the change is large beside `Done`, and the outcome is moved once.
    Write {
        change: Box<TxnChange>,
        producer_id: i64,
        producer_epoch: i16,
    },
    /// A retry of an EndTxn already done: answer NONE with these at once.
    Done {
        producer_id: i64,
        producer_epoch: i16,
    },
}

/// The answer to a transactional InitProducerId.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitOutcome {
    /// Write `change`; once it is durable, answer with this producer id and epoch.
    Write {
        change: TxnChange,
        producer_id: i64,
        producer_epoch: i16,
    },
    /// A retry of an InitProducerId already done: answer with these at once.
    Unchanged {
        producer_id: i64,
        producer_epoch: i16,
    },
    /// The id has an open transaction (a new incarnation of the producer): answer
    /// CONCURRENT_TRANSACTIONS at once and write `change`, which aborts the transaction at
    /// a bumped epoch (fencing the old incarnation); the client's retry then gets an epoch.
    AbortFirst { change: TxnChange },
}

/// One transactional id's state: the fold of its durable records, plus what is only kept
/// in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub producer_id: i64,
    /// -1 until the id's first record is durable.
    pub producer_epoch: i16,
    /// The producer id before the current one (-1: none), for retries after an
    /// exhausted epoch moved the id to a new producer id. Memory only.
    pub previous_producer_id: i64,
    /// The epoch before the last bump (-1: unknown), for retried InitProducerIds. Memory
    /// only.
    pub last_producer_epoch: i16,
    /// While a V2 transaction whose epoch is exhausted is decided: the producer id it moves
    /// to once complete (-1: none). Written in the decision record, so a completion after
    /// a restart moves to the same one.
    pub next_producer_id: i64,
    /// The transaction protocol of the current transaction ([`TxnVersion::level`]).
    pub client_transaction_version: i16,
    pub timeout_ms: i32,
    pub status: TxnStatus,
    pub partitions: BTreeSet<TopicPartition>,
    /// When the ongoing transaction started (-1: none).
    pub start_ms: i64,
    pub last_update_ms: i64,
    /// A change of this id is being written.
    pub pending: bool,
}

impl TxnMetadata {
    fn value(&self) -> TxnValue {
        TxnValue {
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            transaction_timeout_ms: self.timeout_ms,
            status: self.status,
            partitions: self.partitions.iter().cloned().collect(),
            last_update_timestamp_ms: self.last_update_ms,
            start_timestamp_ms: self.start_ms,
            previous_producer_id: self.previous_producer_id,
            next_producer_id: self.next_producer_id,
            client_transaction_version: self.client_transaction_version,
        }
    }

    fn is_preparing(&self) -> bool {
        matches!(
            self.status,
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence
        )
    }

    /// The request's producer id and epoch are this id's current ones (§7.2, §7.4).
    fn check_producer(&self, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
        if producer_id != self.producer_id || self.producer_epoch < 0 {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if producer_epoch != self.producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        Ok(())
    }
}

fn record(transactional_id: &str, value: TxnValue) -> TxnRecord {
    TxnRecord {
        transactional_id: transactional_id.to_owned(),
        value: Some(value),
    }
}

/// The transaction coordinator: every transactional id and its transaction.
#[derive(Debug, Default)]
pub struct TransactionCoordinator {
    config: TxnConfig,
    txns: HashMap<String, TxnMetadata>,
    /// Partition entries of all transactions (bounded by `transaction_partitions_max`).
    partitions: usize,
}

impl TransactionCoordinator {
    pub fn new(config: TxnConfig) -> Self {
        Self {
            config,
            txns: HashMap::new(),
            partitions: 0,
        }
    }

    /// The state of one transactional id (DescribeTransactions).
    pub fn get(&self, transactional_id: &str) -> Option<&TxnMetadata> {
        self.txns
            .get(transactional_id)
            .filter(|m| m.producer_epoch >= 0)
    }

    /// Every transactional id with durable state (ListTransactions), in no order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &TxnMetadata)> + '_ {
        self.txns
            .iter()
            .filter(|(_, m)| m.producer_epoch >= 0)
            .map(|(id, m)| (id.as_str(), m))
    }

    /// Partition entries across all transactions.
    pub fn partition_count(&self) -> usize {
        self.partitions
    }

    /// InitProducerId with a transactional id (§4, §7.1). `expected` is the v3+ producer
    /// id and epoch (`None`, or -1/-1, when the client sent none). `new_producer_id` is
    /// called only when the id needs a new producer id (a new id, or an exhausted epoch).
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now_ms: i64,
        new_producer_id: impl FnOnce() -> Result<i64, TxnError>,
    ) -> Result<InitOutcome, TxnError> {
        if transactional_id.is_empty() || transactional_id.len() > MAX_STRING_BYTES {
            return Err(TxnError::InvalidRequest);
        }
        if timeout_ms <= 0 || timeout_ms > self.config.transaction_max_timeout_ms {
            return Err(TxnError::InvalidTransactionTimeout);
        }
        let expected = expected.filter(|&(id, _)| id != NO_PRODUCER_ID);
        let Some(m) = self.txns.get(transactional_id) else {
            return self.init_new(transactional_id, timeout_ms, now_ms, new_producer_id);
        };
        if m.pending || m.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if let Some((id, epoch)) = expected {
            let valid = m.producer_epoch == NO_EPOCH
                || id == m.producer_id
                || (id == m.previous_producer_id && is_epoch_exhausted(epoch));
            if !valid {
                return Err(TxnError::ProducerFenced);
            }
        }
        if m.status == TxnStatus::Ongoing {
            let change = abort_change(transactional_id, m, now_ms, true);
            self.set_pending(transactional_id);
            return Ok(InitOutcome::AbortFirst { change });
        }
        if let Some((id, epoch)) = expected {
            let current = id == m.producer_id && epoch == m.producer_epoch;
            let retried = (id == m.producer_id && epoch == m.last_producer_epoch)
                || (id == m.previous_producer_id && is_epoch_exhausted(epoch));
            if !current && retried {
                return Ok(InitOutcome::Unchanged {
                    producer_id: m.producer_id,
                    producer_epoch: m.producer_epoch,
                });
            }
            if !current {
                return Err(TxnError::ProducerFenced);
            }
        }
        let (producer_id, producer_epoch) = match is_epoch_exhausted(m.producer_epoch) {
            true => (new_producer_id()?, 0),
            false => (m.producer_id, m.producer_epoch + 1),
        };
        // Epochs only move forward for one producer id: the new one fences the old.
        assert!(producer_id != m.producer_id || producer_epoch > m.producer_epoch);
        let target = TxnMetadata {
            producer_id,
            producer_epoch,
            timeout_ms,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            ..m.clone()
        };
        let change = TxnChange {
            prepare: None,
            markers: None,
            complete: record(transactional_id, target.value()),
        };
        self.set_pending(transactional_id);
        Ok(InitOutcome::Write {
            change,
            producer_id,
            producer_epoch,
        })
    }

    /// A transactional id seen for the first time: it gets a new producer id at epoch 0.
    /// Its entry exists (pending, epoch -1) only until the write is finished.
    fn init_new(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        now_ms: i64,
        new_producer_id: impl FnOnce() -> Result<i64, TxnError>,
    ) -> Result<InitOutcome, TxnError> {
        if self.txns.len() >= self.config.transactional_ids_max {
            return Err(TxnError::CoordinatorNotAvailable);
        }
        let producer_id = new_producer_id()?;
        let placeholder = TxnMetadata {
            producer_id,
            producer_epoch: NO_EPOCH,
            previous_producer_id: NO_PRODUCER_ID,
            last_producer_epoch: NO_EPOCH,
            next_producer_id: NO_PRODUCER_ID,
            client_transaction_version: TxnVersion::V1.level(),
            timeout_ms,
            status: TxnStatus::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            pending: true,
        };
        let target = TxnMetadata {
            producer_epoch: 0,
            ..placeholder.clone()
        };
        self.txns.insert(transactional_id.to_owned(), placeholder);
        Ok(InitOutcome::Write {
            change: TxnChange {
                prepare: None,
                markers: None,
                complete: record(transactional_id, target.value()),
            },
            producer_id,
            producer_epoch: 0,
        })
    }

    /// AddPartitionsToTxn v0-3 (§4, §7.2). `Ok(None)`: every partition is already in the
    /// ongoing transaction, answer at once. Otherwise write the change; once durable the
    /// broker verifies `partitions` in the log (`LogManager::verify_txn`) and answers.
    /// Whether each partition exists is the broker's check, made before this call.
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
        now_ms: i64,
    ) -> Result<Option<TxnChange>, TxnError> {
        let request = (producer_id, producer_epoch, TxnVersion::V1);
        self.add(transactional_id, request, partitions, now_ms)
    }

    /// The implicit add of Transactions V2 (Kafka's AddPartitionsToTxn v5 from a partition
    /// leader): a transactional Produce v12+ or TxnOffsetCommit v5+ adds its partitions
    /// itself. The checks are AddPartitionsToTxn's (the epoch must be the current one
    /// exactly: PRODUCER_FENCED otherwise), and the transaction is marked V2, so the
    /// coordinator's own aborts treat it as one.
    pub fn add_partitions_implicitly(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
        now_ms: i64,
    ) -> Result<Option<TxnChange>, TxnError> {
        let request = (producer_id, producer_epoch, TxnVersion::V2);
        self.add(transactional_id, request, partitions, now_ms)
    }

    fn add(
        &mut self,
        transactional_id: &str,
        (producer_id, producer_epoch, version): (i64, i16, TxnVersion),
        partitions: &[TopicPartition],
        now_ms: i64,
    ) -> Result<Option<TxnChange>, TxnError> {
        let m = self.current(transactional_id, producer_id, producer_epoch)?;
        let ongoing = m.status == TxnStatus::Ongoing;
        let new: BTreeSet<&TopicPartition> = partitions
            .iter()
            .filter(|tp| !m.partitions.contains(*tp))
            .collect();
        // V2: a produce to partitions already in the transaction needs nothing here, even
        // while a change is in flight (Kafka's leader does not ask its coordinator then
        // either); the log decides each batch against the markers queued before it. V1
        // re-verifies on `None`, which must not slip in behind an EndTxn's markers, so it
        // waits for the change in flight.
        if ongoing && new.is_empty() && version == TxnVersion::V2 {
            return Ok(None);
        }
        if m.pending || m.is_preparing() {
            return Err(TxnError::ConcurrentTransactions);
        }
        if ongoing && new.is_empty() {
            return Ok(None);
        }
        if self.partitions + new.len() > self.config.transaction_partitions_max {
            return Err(TxnError::CoordinatorNotAvailable);
        }
        let mut target = m.clone();
        target.partitions.extend(new.into_iter().cloned());
        target.status = TxnStatus::Ongoing;
        target.start_ms = if ongoing { m.start_ms } else { now_ms };
        target.last_update_ms = now_ms;
        target.client_transaction_version = version.level();
        let change = TxnChange {
            prepare: None,
            markers: None,
            complete: record(transactional_id, target.value()),
        };
        self.set_pending(transactional_id);
        Ok(Some(change))
    }

    /// AddOffsetsToTxn (§6.5): adds `__consumer_offsets-0` to the transaction.
    pub fn add_offsets(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        now_ms: i64,
    ) -> Result<Option<TxnChange>, TxnError> {
        let (topic, partition) = CONSUMER_OFFSETS_PARTITION;
        let offsets = [TopicPartition {
            topic: topic.to_owned(),
            partition,
        }];
        self.add_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            &offsets,
            now_ms,
        )
    }

    /// Which of `partitions` are in the ongoing transaction (AddPartitionsToTxn v4+
    /// `verify_only`, KIP-890), after the same producer checks as AddPartitionsToTxn.
    pub fn contains_partitions(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TopicPartition],
    ) -> Result<Vec<bool>, TxnError> {
        let m = self.current(transactional_id, producer_id, producer_epoch)?;
        // Kafka's `handleVerifyPartitionsInTransaction`: a decided transaction is busy.
        if matches!(m.status, TxnStatus::PrepareCommit | TxnStatus::PrepareAbort) {
            return Err(TxnError::ConcurrentTransactions);
        }
        let ongoing = m.status == TxnStatus::Ongoing;
        Ok(partitions
            .iter()
            .map(|tp| ongoing && m.partitions.contains(tp))
            .collect())
    }

    /// TxnOffsetCommit's transaction check (§6.5, §7.5): the producer id and epoch are the
    /// id's current ones, and its ongoing transaction holds `__consumer_offsets-0`
    /// (AddOffsetsToTxn came first; else InvalidTxnState). On `Ok` the id is marked
    /// pending until the broker calls [`Self::finish`] once the offsets are durable and
    /// held as pending in the group coordinator, so an EndTxn cannot be decided (and its
    /// marker written) while they are in flight: the marker always finds them.
    pub fn begin_offset_commit(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<(), TxnError> {
        let m = self.writable(transactional_id, producer_id, producer_epoch)?;
        let (topic, partition) = CONSUMER_OFFSETS_PARTITION;
        let holds_offsets = m
            .partitions
            .iter()
            .any(|tp| tp.topic == topic && tp.partition == partition);
        if m.status != TxnStatus::Ongoing || !holds_offsets {
            return Err(TxnError::InvalidTxnState);
        }
        self.set_pending(transactional_id);
        Ok(())
    }

    /// EndTxn (§4, §7.4). `Ok(None)`: a retry of a completed EndTxn, answer NONE at once.
    /// Otherwise write the change (decision, markers, completion); answer once durable.
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        result: TxnResult,
        now_ms: i64,
    ) -> Result<Option<TxnChange>, TxnError> {
        let m = self.writable(transactional_id, producer_id, producer_epoch)?;
        let same = |status| status == completed_status(result) || status == prepare_status(result);
        let change = match m.status {
            TxnStatus::Ongoing => match result {
                TxnResult::Commit => commit_change(transactional_id, m, now_ms),
                TxnResult::Abort => abort_change(transactional_id, m, now_ms, false),
            },
            TxnStatus::CompleteCommit | TxnStatus::CompleteAbort if same(m.status) => {
                return Ok(None)
            }
            TxnStatus::PrepareCommit | TxnStatus::PrepareAbort if same(m.status) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            _ => return Err(TxnError::InvalidTxnState),
        };
        self.set_pending(transactional_id);
        Ok(Some(change))
    }

    /// EndTxn v5+, Transactions V2 (KIP-890 part 2; Kafka's `TransactionCoordinator.
    /// endTransaction` for TV_2): every end bumps the epoch, so each transaction has its own
    /// and a zombie of the previous one is fenced by its markers. A retry is recognized by
    /// the epoch it carries (the current one minus one, or the last epoch of the previous
    /// producer id after a move to a new one) and answered with the current producer id and
    /// epoch. An abort with no transaction open is allowed (it still bumps the epoch).
    /// `new_producer_id` is called only when the epoch is exhausted.
    pub fn end_txn_v2(
        &mut self,
        transactional_id: &str,
        (producer_id, producer_epoch): (i64, i16),
        result: TxnResult,
        now_ms: i64,
        new_producer_id: impl FnOnce() -> Result<i64, TxnError>,
    ) -> Result<EndOutcome, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let m = self
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        if m.pending {
            return Err(TxnError::ConcurrentTransactions);
        }
        let retry = end_txn_v2_check(m, producer_id, producer_epoch)?;
        let done = Ok(EndOutcome::Done {
            producer_id: m.producer_id,
            producer_epoch: m.producer_epoch,
        });
        let empty_abort = result == TxnResult::Abort && !retry;
        match (m.status, result) {
            (TxnStatus::Ongoing, _) => {}
            (TxnStatus::CompleteCommit, TxnResult::Commit) if retry => return done,
            (TxnStatus::CompleteAbort, TxnResult::Abort) if retry => return done,
            (TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort, _)
                if empty_abort => {}
            (TxnStatus::PrepareCommit, TxnResult::Commit)
            | (TxnStatus::PrepareAbort, TxnResult::Abort) => {
                return Err(TxnError::ConcurrentTransactions)
            }
            _ => return Err(TxnError::InvalidTxnState),
        }
        let next_producer_id = match is_epoch_exhausted(m.producer_epoch) {
            true => new_producer_id()?,
            false => NO_PRODUCER_ID,
        };
        // Saturating: an epoch at i16::MAX (only ever from a fencing abort of an exhausted
        // epoch) ends at that epoch and moves to the new producer id.
        let producer_epoch = m.producer_epoch.saturating_add(1);
        assert!(producer_epoch > m.producer_epoch || next_producer_id != NO_PRODUCER_ID);
        let decided = TxnMetadata {
            producer_epoch,
            status: prepare_status(result),
            last_update_ms: now_ms,
            start_ms: if m.partitions.is_empty() {
                now_ms
            } else {
                m.start_ms
            },
            next_producer_id,
            client_transaction_version: TxnVersion::V2.level(),
            ..m.clone()
        };
        let change = end_change(transactional_id, decided, result);
        let completed = change
            .complete
            .value
            .as_ref()
            .expect("a completion has a value");
        let (producer_id, producer_epoch) = (completed.producer_id, completed.producer_epoch);
        self.set_pending(transactional_id);
        Ok(EndOutcome::Write {
            change: Box::new(change),
            producer_id,
            producer_epoch,
        })
    }

    /// The timer of §8: every ongoing transaction older than its timeout is aborted at a
    /// bumped epoch (its producer is fenced). Returns the changes to write.
    pub fn abort_timed_out(&mut self, now_ms: i64) -> Vec<TxnChange> {
        let due: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, m)| {
                !m.pending
                    && m.status == TxnStatus::Ongoing
                    && now_ms > m.start_ms.saturating_add(i64::from(m.timeout_ms))
            })
            .map(|(id, _)| id.clone())
            .collect();
        due.into_iter()
            .map(|id| {
                let change = abort_change(&id, &self.txns[&id], now_ms, true);
                self.set_pending(&id);
                change
            })
            .collect()
    }

    /// Transactions decided but not completed (a crash or a refused write between the
    /// decision and the completion, §5.2, §5.3): their markers and completion record, to
    /// write again. On load, the broker writes markers only to partitions whose log still
    /// shows the transaction open.
    pub fn pending_completions(&mut self, now_ms: i64) -> Vec<TxnChange> {
        let due: Vec<String> = self
            .txns
            .iter()
            .filter(|(_, m)| !m.pending && m.is_preparing())
            .map(|(id, _)| id.clone())
            .collect();
        due.into_iter()
            .map(|id| {
                let m = &self.txns[&id];
                let result = match m.status {
                    TxnStatus::PrepareCommit => TxnResult::Commit,
                    _ => TxnResult::Abort,
                };
                let decided = TxnMetadata {
                    last_update_ms: now_ms,
                    ..m.clone()
                };
                let mut change = end_change(&id, decided, result);
                change.prepare = None;
                self.set_pending(&id);
                change
            })
            .collect()
    }

    /// Ongoing transactions (producer id, epoch, partitions): on load the broker verifies
    /// their partitions in the log again (verification is not persisted, §6.1).
    pub fn ongoing(&self) -> impl Iterator<Item = (&str, &TxnMetadata)> + '_ {
        self.iter().filter(|(_, m)| m.status == TxnStatus::Ongoing)
    }

    /// Transactional ids without a transaction idle for `transactional.id.expiration.ms`:
    /// their tombstones, to write (§8).
    pub fn expire_idle(&mut self, now_ms: i64) -> Vec<TxnChange> {
        let expiration_ms = self.config.transactional_id_expiration_ms;
        let due: Vec<String> = self
            .iter()
            .filter(|(_, m)| {
                let idle = matches!(
                    m.status,
                    TxnStatus::Empty | TxnStatus::CompleteCommit | TxnStatus::CompleteAbort
                );
                idle && !m.pending && now_ms.saturating_sub(m.last_update_ms) >= expiration_ms
            })
            .map(|(id, _)| id.to_owned())
            .collect();
        due.into_iter()
            .map(|id| {
                self.set_pending(&id);
                TxnChange {
                    prepare: None,
                    markers: None,
                    complete: TxnRecord {
                        transactional_id: id,
                        value: None,
                    },
                }
            })
            .collect()
    }

    /// Applies a durable record: the id's state becomes the record's (a tombstone, or
    /// `Dead`, removes it). Called for each record of a change once it is durable, and for
    /// every record in log order on load. Memory-only fields follow the change of
    /// producer id or epoch.
    pub fn apply(&mut self, record: &TxnRecord) {
        let id = &record.transactional_id;
        let Some(value) = record
            .value
            .as_ref()
            .filter(|v| v.status != TxnStatus::Dead)
        else {
            if let Some(old) = self.txns.remove(id) {
                self.partitions -= old.partitions.len();
            }
            return;
        };
        let old = self.txns.remove(id);
        let (mut previous_producer_id, mut last_producer_epoch) = (NO_PRODUCER_ID, NO_EPOCH);
        let mut pending = false;
        if let Some(old) = &old {
            self.partitions -= old.partitions.len();
            pending = old.pending;
            (previous_producer_id, last_producer_epoch) =
                (old.previous_producer_id, old.last_producer_epoch);
            if old.producer_epoch >= 0 && old.producer_id != value.producer_id {
                (previous_producer_id, last_producer_epoch) = (old.producer_id, NO_EPOCH);
            } else if old.producer_epoch >= 0 && old.producer_epoch != value.producer_epoch {
                // A fencing abort (timeout, or a new incarnation) bumps the epoch with its
                // decision record; the fenced epoch is no retry to honour (Kafka's
                // `prepareFenceProducerEpoch` clears the last epoch), so an InitProducerId
                // from the fenced producer gets PRODUCER_FENCED.
                // Transactions V2 bumps at every end, aborts included: there the epoch before
                // is the one a retry carries (Kafka's `prepareAbortOrCommit` for TV_2).
                let fenced = matches!(
                    value.status,
                    TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence
                ) && value.client_transaction_version < TxnVersion::V2.level();
                last_producer_epoch = if fenced { NO_EPOCH } else { old.producer_epoch };
            }
        }
        // A v1 record names the previous producer id itself (a v0 one reads -1).
        if value.previous_producer_id != NO_PRODUCER_ID {
            previous_producer_id = value.previous_producer_id;
        }
        let metadata = TxnMetadata {
            producer_id: value.producer_id,
            producer_epoch: value.producer_epoch,
            previous_producer_id,
            last_producer_epoch,
            next_producer_id: value.next_producer_id,
            client_transaction_version: value.client_transaction_version,
            timeout_ms: value.transaction_timeout_ms,
            status: match value.status {
                // Never written by Sluice; Kafka keeps it in memory only. An abort decided.
                TxnStatus::PrepareEpochFence => TxnStatus::PrepareAbort,
                status => status,
            },
            partitions: value.partitions.iter().cloned().collect(),
            start_ms: value.start_timestamp_ms,
            last_update_ms: value.last_update_timestamp_ms,
            pending,
        };
        self.partitions += metadata.partitions.len();
        self.txns.insert(id.clone(), metadata);
    }

    /// Ends the write of an id's change (after its durable records were applied, or after
    /// it failed: then nothing of it was applied). A new id whose first record never became
    /// durable is forgotten.
    pub fn finish(&mut self, transactional_id: &str) {
        let forget = match self.txns.get_mut(transactional_id) {
            Some(m) => {
                m.pending = false;
                m.producer_epoch < 0
            }
            None => false,
        };
        if forget {
            self.txns.remove(transactional_id);
        }
    }

    /// The live state of every id as records, for the snapshot that keeps
    /// `__transaction_state` small (as `__consumer_offsets` is, coordinator.md §9).
    pub fn snapshot_records(&self) -> Vec<TxnRecord> {
        self.iter().map(|(id, m)| record(id, m.value())).collect()
    }

    /// The id's metadata when the request's producer id and epoch are its current ones
    /// and no change of it is in flight.
    fn writable(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&TxnMetadata, TxnError> {
        let m = self.current(transactional_id, producer_id, producer_epoch)?;
        if m.pending {
            return Err(TxnError::ConcurrentTransactions);
        }
        Ok(m)
    }

    fn current(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<&TxnMetadata, TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest);
        }
        let m = self
            .get(transactional_id)
            .ok_or(TxnError::InvalidProducerIdMapping)?;
        m.check_producer(producer_id, producer_epoch)?;
        Ok(m)
    }

    fn set_pending(&mut self, transactional_id: &str) {
        if let Some(m) = self.txns.get_mut(transactional_id) {
            assert!(!m.pending, "one change of an id at a time");
            m.pending = true;
        }
    }
}

fn prepare_status(result: TxnResult) -> TxnStatus {
    match result {
        TxnResult::Commit => TxnStatus::PrepareCommit,
        TxnResult::Abort => TxnStatus::PrepareAbort,
    }
}

fn completed_status(result: TxnResult) -> TxnStatus {
    match result {
        TxnResult::Commit => TxnStatus::CompleteCommit,
        TxnResult::Abort => TxnStatus::CompleteAbort,
    }
}

fn commit_change(transactional_id: &str, m: &TxnMetadata, now_ms: i64) -> TxnChange {
    let decided = TxnMetadata {
        status: TxnStatus::PrepareCommit,
        last_update_ms: now_ms,
        ..m.clone()
    };
    end_change(transactional_id, decided, TxnResult::Commit)
}

/// The abort of `m`'s transaction; with `fence`, at the next epoch (a new incarnation of
/// the producer, or the timeout), which fences the old one in every partition.
fn abort_change(transactional_id: &str, m: &TxnMetadata, now_ms: i64, fence: bool) -> TxnChange {
    // Saturating: a V2 transaction may be open at the exhausted epoch i16::MAX - 1 (its
    // fence takes i16::MAX) and, after that, at i16::MAX itself, where the fence keeps it.
    let producer_epoch = match fence {
        true => m.producer_epoch.saturating_add(1),
        false => m.producer_epoch,
    };
    let decided = TxnMetadata {
        producer_epoch,
        status: TxnStatus::PrepareAbort,
        last_update_ms: now_ms,
        ..m.clone()
    };
    end_change(transactional_id, decided, TxnResult::Abort)
}

/// Decision record (`decided`, a Prepare* state), one marker per partition at the decided
/// producer id and epoch, completion record (§5.1). The completion lists no partitions, as
/// Kafka's does, and moves to `decided.next_producer_id` at epoch 0 when one was taken
/// (Kafka's `prepareComplete`).
fn end_change(transactional_id: &str, decided: TxnMetadata, result: TxnResult) -> TxnChange {
    assert_eq!(decided.status, prepare_status(result));
    assert!(
        decided.producer_epoch >= 0,
        "a decided transaction has a durable epoch"
    );
    let mut completed = TxnMetadata {
        status: completed_status(result),
        partitions: BTreeSet::new(),
        next_producer_id: NO_PRODUCER_ID,
        ..decided.clone()
    };
    if decided.next_producer_id != NO_PRODUCER_ID {
        completed.producer_id = decided.next_producer_id;
        completed.producer_epoch = 0;
        completed.previous_producer_id = decided.producer_id;
    }
    // A V2 abort with no partition added has nothing to mark.
    let markers = (!decided.partitions.is_empty()).then(|| TxnMarkers {
        producer_id: decided.producer_id,
        producer_epoch: decided.producer_epoch,
        result,
        partitions: decided.partitions.iter().cloned().collect(),
    });
    // The markers fence at the decided epoch, which the completion keeps (or moves to a new
    // producer id at epoch 0): no producer of the transaction's epoch writes after them.
    assert!(completed.producer_epoch == decided.producer_epoch || completed.producer_epoch == 0);
    assert_eq!(completed.status, completed_status(result));
    TxnChange {
        prepare: Some(record(transactional_id, decided.value())),
        markers,
        complete: record(transactional_id, completed.value()),
    }
}

/// The producer checks of a V2 EndTxn, in Kafka's order; `Ok(true)` for a retry of an
/// EndTxn already decided (its epoch is the one before the bump, or the exhausted epoch of
/// the previous producer id).
fn end_txn_v2_check(m: &TxnMetadata, producer_id: i64, epoch: i16) -> Result<bool, TxnError> {
    let retry_on_overflow =
        m.previous_producer_id == producer_id && epoch == i16::MAX - 1 && m.producer_epoch == 0;
    let retry_on_bump = i32::from(m.producer_epoch) == i32::from(epoch) + 1;
    if m.producer_id != producer_id && !retry_on_overflow {
        return Err(TxnError::InvalidProducerIdMapping);
    }
    let valid = match m.status {
        TxnStatus::PrepareCommit | TxnStatus::PrepareAbort | TxnStatus::PrepareEpochFence => {
            retry_on_bump
        }
        TxnStatus::CompleteCommit | TxnStatus::CompleteAbort => {
            retry_on_bump || retry_on_overflow || epoch == m.producer_epoch
        }
        TxnStatus::Ongoing | TxnStatus::Empty | TxnStatus::Dead => epoch == m.producer_epoch,
    };
    match valid {
        true => Ok(retry_on_bump || retry_on_overflow),
        false => Err(TxnError::ProducerFenced),
    }
}
