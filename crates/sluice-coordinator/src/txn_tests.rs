//! The transaction coordinator against the state table of docs/transactions.md §4 and the
//! error tables of §7, one test per row group. A change counts as durable only once the
//! test applies its records, as the broker does after the append group's sync.

use std::sync::atomic::{AtomicI64, Ordering};

use crate::config::TxnConfig;
use crate::coordinator::TopicPartition;
use crate::error::TxnError;
use crate::transaction::{InitOutcome, TransactionCoordinator, TxnChange, TxnResult};
use crate::txn_records::{TxnRecord, TxnStatus};

const ID: &str = "app-1";
const T0: i64 = 1_000_000;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn coordinator() -> TransactionCoordinator {
    TransactionCoordinator::new(TxnConfig::default())
}

/// The broker's part once a change's append group is durable.
fn durable(c: &mut TransactionCoordinator, change: &TxnChange) {
    for record in change.records() {
        c.apply(record);
    }
    c.finish(change.transactional_id());
}

/// A producer id source: ids never repeat within the test run, like the allocator's.
fn ids() -> impl FnMut() -> Result<i64, TxnError> {
    static NEXT: AtomicI64 = AtomicI64::new(100);
    || Ok(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// InitProducerId written and made durable; returns (producer id, epoch).
fn init(c: &mut TransactionCoordinator, expected: Option<(i64, i16)>) -> (i64, i16) {
    let mut next = ids();
    match c.init_producer_id(ID, 60_000, expected, T0, &mut next) {
        Ok(InitOutcome::Write {
            change,
            producer_id,
            producer_epoch,
        }) => {
            durable(c, &change);
            (producer_id, producer_epoch)
        }
        other => panic!("init: {other:?}"),
    }
}

fn add(c: &mut TransactionCoordinator, pid: i64, epoch: i16, parts: &[TopicPartition], now: i64) {
    let change = c
        .add_partitions(ID, pid, epoch, parts, now)
        .expect("added")
        .expect("a change");
    durable(c, &change);
}

fn status(c: &TransactionCoordinator) -> TxnStatus {
    c.get(ID).expect("id").status
}

#[test]
fn init_producer_id_for_a_new_id() {
    // Goal: row 1 of §4: a new id gets a new producer id at epoch 0 once durable; while
    // the write is in flight the id is invisible and busy; a failed write forgets it.
    let mut c = coordinator();
    let mut next = ids();
    let outcome = c
        .init_producer_id(ID, 60_000, None, T0, &mut next)
        .expect("ok");
    let InitOutcome::Write { change, .. } = outcome else {
        panic!("{outcome:?}")
    };
    assert!(c.get(ID).is_none(), "nothing durable yet");
    assert_eq!(
        c.init_producer_id(ID, 60_000, None, T0, &mut next),
        Err(TxnError::ConcurrentTransactions)
    );
    c.finish(ID); // the write failed
    assert!(c.iter().next().is_none());
    let (pid, epoch) = init(&mut c, None);
    assert_eq!(epoch, 0);
    let m = c.get(ID).expect("id");
    assert_eq!(
        (m.producer_id, m.status, m.timeout_ms),
        (pid, TxnStatus::Empty, 60_000)
    );
    assert_eq!(
        change
            .complete
            .value
            .as_ref()
            .expect("value")
            .producer_epoch,
        0
    );
}

#[test]
fn init_producer_id_refusals() {
    // Goal: §7.1: empty id, bad timeouts, the id bound, and an allocator failure.
    let mut c = TransactionCoordinator::new(TxnConfig {
        transactional_ids_max: 1,
        ..TxnConfig::default()
    });
    let mut next = ids();
    assert_eq!(
        c.init_producer_id("", 1_000, None, T0, &mut next),
        Err(TxnError::InvalidRequest)
    );
    for timeout in [0, -5, 900_001] {
        assert_eq!(
            c.init_producer_id(ID, timeout, None, T0, &mut next),
            Err(TxnError::InvalidTransactionTimeout)
        );
    }
    init(&mut c, None);
    assert_eq!(
        c.init_producer_id("other", 1_000, None, T0, &mut next),
        Err(TxnError::CoordinatorNotAvailable)
    );
    let mut c = coordinator();
    let failing = || Err(TxnError::CoordinatorNotAvailable);
    assert_eq!(
        c.init_producer_id(ID, 1_000, None, T0, failing),
        Err(TxnError::CoordinatorNotAvailable)
    );
    assert!(c.iter().next().is_none());
}

#[test]
fn init_producer_id_bumps_the_epoch_and_fences() {
    // Goal: row 2 of §4 and the v3+ checks of §7.1: Empty and Complete* bump the epoch;
    // an exhausted epoch moves to a new producer id; retries get the current one back;
    // a producer id that is neither current nor previous is fenced; -1/-1 is "none".
    let mut c = coordinator();
    let (pid, _) = init(&mut c, None);
    assert_eq!(init(&mut c, None), (pid, 1));
    assert_eq!(init(&mut c, Some((-1, -1))), (pid, 2));
    assert_eq!(init(&mut c, Some((pid, 2))), (pid, 3));
    let mut next = ids();
    // A retry of the bump to 3 (sent with epoch 2 again) gets epoch 3 at once.
    assert_eq!(
        c.init_producer_id(ID, 60_000, Some((pid, 2)), T0, &mut next),
        Ok(InitOutcome::Unchanged {
            producer_id: pid,
            producer_epoch: 3
        })
    );
    assert_eq!(
        c.init_producer_id(ID, 60_000, Some((pid, 1)), T0, &mut next),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        c.init_producer_id(ID, 60_000, Some((pid + 50, 0)), T0, &mut next),
        Err(TxnError::ProducerFenced)
    );
    // Drive the epoch to exhaustion through records (as a long-lived id would reach it).
    let mut value = c
        .snapshot_records()
        .pop()
        .expect("record")
        .value
        .expect("value");
    value.producer_epoch = i16::MAX - 1;
    c.apply(&TxnRecord {
        transactional_id: ID.into(),
        value: Some(value),
    });
    let (new_pid, epoch) = init(&mut c, Some((pid, i16::MAX - 1)));
    assert!(new_pid != pid && epoch == 0, "{new_pid} {epoch}");
    assert_eq!(c.get(ID).expect("id").previous_producer_id, pid);
    // Its retry (the old id with the exhausted epoch) gets the new id back.
    assert_eq!(
        c.init_producer_id(ID, 60_000, Some((pid, i16::MAX - 1)), T0, &mut next),
        Ok(InitOutcome::Unchanged {
            producer_id: new_pid,
            producer_epoch: 0
        })
    );
}

#[test]
fn init_producer_id_aborts_an_open_transaction_first() {
    // Goal: row 3 of §4: with an open transaction, CONCURRENT_TRANSACTIONS at once and an
    // abort at a bumped epoch (decision, markers, completion); the retry then bumps again.
    let mut c = coordinator();
    let (pid, epoch) = init(&mut c, None);
    add(&mut c, pid, epoch, &[tp("a", 0), tp("b", 1)], T0);
    let mut next = ids();
    let outcome = c
        .init_producer_id(ID, 60_000, None, T0 + 5, &mut next)
        .expect("ok");
    let InitOutcome::AbortFirst { change } = outcome else {
        panic!("{outcome:?}")
    };
    let prepare = change
        .prepare
        .as_ref()
        .expect("decision")
        .value
        .as_ref()
        .expect("value");
    assert_eq!(
        (prepare.status, prepare.producer_epoch),
        (TxnStatus::PrepareAbort, epoch + 1)
    );
    let markers = change.markers.as_ref().expect("markers");
    assert_eq!(
        (
            markers.result,
            markers.producer_epoch,
            markers.partitions.clone()
        ),
        (TxnResult::Abort, epoch + 1, vec![tp("a", 0), tp("b", 1)])
    );
    let complete = change.complete.value.as_ref().expect("value");
    assert_eq!(complete.status, TxnStatus::CompleteAbort);
    assert!(complete.partitions.is_empty());
    assert_eq!(
        c.init_producer_id(ID, 60_000, None, T0 + 5, &mut next),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        c.end_txn(ID, pid, epoch, TxnResult::Commit, T0),
        Err(TxnError::ConcurrentTransactions)
    );
    durable(&mut c, &change);
    assert_eq!(status(&c), TxnStatus::CompleteAbort);
    assert_eq!(c.partition_count(), 0);
    assert_eq!(init(&mut c, None), (pid, epoch + 2));
}

#[test]
fn a_decided_transaction_blocks_until_completed() {
    // Goal: rows "Prepare*" of §4 and §5.3: when only the decision became durable, the
    // id stays in Prepare*, InitProducerId and a same-result EndTxn get
    // CONCURRENT_TRANSACTIONS, the other result INVALID_TXN_STATE, and the completion
    // (markers and completion record, no second decision) is handed out once.
    let mut c = coordinator();
    let (pid, epoch) = init(&mut c, None);
    add(&mut c, pid, epoch, &[tp("a", 0)], T0);
    let change = c
        .end_txn(ID, pid, epoch, TxnResult::Commit, T0 + 1)
        .expect("ok")
        .expect("change");
    c.apply(change.prepare.as_ref().expect("decision"));
    c.finish(ID); // markers and completion refused
    assert_eq!(status(&c), TxnStatus::PrepareCommit);
    let mut next = ids();
    assert_eq!(
        c.init_producer_id(ID, 60_000, None, T0, &mut next),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        c.end_txn(ID, pid, epoch, TxnResult::Commit, T0),
        Err(TxnError::ConcurrentTransactions)
    );
    assert_eq!(
        c.end_txn(ID, pid, epoch, TxnResult::Abort, T0),
        Err(TxnError::InvalidTxnState)
    );
    assert_eq!(
        c.add_partitions(ID, pid, epoch, &[tp("b", 0)], T0),
        Err(TxnError::ConcurrentTransactions)
    );
    // AddPartitionsToTxn v4+ `verify_only`, as Kafka's handleVerifyPartitionsInTransaction.
    assert_eq!(
        c.contains_partitions(ID, pid, epoch, &[tp("a", 0)]),
        Err(TxnError::ConcurrentTransactions)
    );
    let completions = c.pending_completions(T0 + 2);
    assert_eq!(completions.len(), 1);
    let completion = &completions[0];
    assert!(completion.prepare.is_none());
    let markers = completion.markers.as_ref().expect("markers");
    assert_eq!(
        (markers.result, markers.partitions.clone()),
        (TxnResult::Commit, vec![tp("a", 0)])
    );
    assert!(
        c.pending_completions(T0 + 3).is_empty(),
        "in flight: not handed out twice"
    );
    durable(&mut c, completion);
    assert_eq!(status(&c), TxnStatus::CompleteCommit);
    assert_eq!(c.end_txn(ID, pid, epoch, TxnResult::Commit, T0), Ok(None));
}

#[test]
fn add_partitions_rows() {
    // Goal: the AddPartitionsToTxn rows of §4 and §7.2.
    let mut c = TransactionCoordinator::new(TxnConfig {
        transaction_partitions_max: 3,
        ..TxnConfig::default()
    });
    let (pid, epoch) = init(&mut c, None);
    let parts = [tp("a", 0)];
    assert_eq!(
        c.add_partitions("", pid, epoch, &parts, T0),
        Err(TxnError::InvalidRequest)
    );
    assert_eq!(
        c.add_partitions("nope", pid, epoch, &parts, T0),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.add_partitions(ID, pid + 1, epoch, &parts, T0),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.add_partitions(ID, pid, epoch + 1, &parts, T0),
        Err(TxnError::ProducerFenced)
    );
    // Empty -> Ongoing, started now.
    let change = c
        .add_partitions(ID, pid, epoch, &parts, T0)
        .expect("ok")
        .expect("change");
    assert_eq!(
        c.add_partitions(ID, pid, epoch, &parts, T0),
        Err(TxnError::ConcurrentTransactions)
    );
    durable(&mut c, &change);
    let m = c.get(ID).expect("id");
    assert_eq!((m.status, m.start_ms), (TxnStatus::Ongoing, T0));
    // Already in: nothing to write. More: the start time is kept.
    assert_eq!(c.add_partitions(ID, pid, epoch, &parts, T0 + 9), Ok(None));
    add(&mut c, pid, epoch, &[tp("a", 0), tp("b", 0)], T0 + 10);
    let m = c.get(ID).expect("id");
    assert_eq!((m.start_ms, m.partitions.len()), (T0, 2));
    assert_eq!(c.partition_count(), 2);
    // The bound counts partition entries across ongoing transactions.
    assert_eq!(
        c.add_partitions(ID, pid, epoch, &[tp("c", 0), tp("d", 0)], T0),
        Err(TxnError::CoordinatorNotAvailable)
    );
    add(&mut c, pid, epoch, &[tp("c", 0)], T0 + 11);
    assert_eq!(
        c.contains_partitions(ID, pid, epoch, &[tp("a", 0), tp("z", 0)]),
        Ok(vec![true, false])
    );
    // Complete* -> Ongoing with a new start; AddOffsetsToTxn adds __consumer_offsets-0.
    let end = c
        .end_txn(ID, pid, epoch, TxnResult::Commit, T0 + 12)
        .expect("ok")
        .expect("c");
    durable(&mut c, &end);
    assert_eq!(c.partition_count(), 0);
    let offsets = c
        .add_offsets(ID, pid, epoch, T0 + 20)
        .expect("ok")
        .expect("change");
    durable(&mut c, &offsets);
    let m = c.get(ID).expect("id");
    assert_eq!(m.start_ms, T0 + 20);
    assert!(m.partitions.contains(&tp("__consumer_offsets", 0)));
}

#[test]
fn end_txn_rows() {
    // Goal: the EndTxn rows of §4 and §7.4.
    let mut c = coordinator();
    let (pid, epoch) = init(&mut c, None);
    assert_eq!(
        c.end_txn("", pid, epoch, TxnResult::Commit, T0),
        Err(TxnError::InvalidRequest)
    );
    assert_eq!(
        c.end_txn("nope", pid, epoch, TxnResult::Commit, T0),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.end_txn(ID, pid, epoch, TxnResult::Commit, T0),
        Err(TxnError::InvalidTxnState),
        "Empty"
    );
    add(&mut c, pid, epoch, &[tp("a", 0), tp("a", 1)], T0);
    assert_eq!(
        c.end_txn(ID, pid, epoch - 1, TxnResult::Commit, T0),
        Err(TxnError::ProducerFenced)
    );
    let change = c
        .end_txn(ID, pid, epoch, TxnResult::Abort, T0 + 1)
        .expect("ok")
        .expect("change");
    let prepare = change
        .prepare
        .as_ref()
        .expect("decision")
        .value
        .as_ref()
        .expect("v");
    assert_eq!(
        (prepare.status, prepare.producer_epoch),
        (TxnStatus::PrepareAbort, epoch)
    );
    assert_eq!(
        change.markers.as_ref().expect("markers").partitions.len(),
        2
    );
    durable(&mut c, &change);
    assert_eq!(status(&c), TxnStatus::CompleteAbort);
    assert_eq!(
        c.end_txn(ID, pid, epoch, TxnResult::Abort, T0),
        Ok(None),
        "a retry"
    );
    assert_eq!(
        c.end_txn(ID, pid, epoch, TxnResult::Commit, T0),
        Err(TxnError::InvalidTxnState)
    );
}

#[test]
fn timed_out_transactions_are_aborted_and_their_producer_fenced() {
    // Goal: the timer row of §4: only an ongoing transaction past its timeout is aborted,
    // at a bumped epoch; the old producer then gets PRODUCER_FENCED everywhere.
    let mut c = coordinator();
    let (pid, epoch) = init(&mut c, None);
    assert!(
        c.abort_timed_out(T0 + 10_000_000).is_empty(),
        "Empty: nothing to abort"
    );
    add(&mut c, pid, epoch, &[tp("a", 0)], T0);
    assert!(
        c.abort_timed_out(T0 + 60_000).is_empty(),
        "not yet past the timeout"
    );
    let changes = c.abort_timed_out(T0 + 60_001);
    assert_eq!(changes.len(), 1);
    let markers = changes[0].markers.as_ref().expect("markers");
    assert_eq!(
        (markers.result, markers.producer_epoch),
        (TxnResult::Abort, epoch + 1)
    );
    assert!(c.abort_timed_out(T0 + 60_002).is_empty(), "in flight");
    durable(&mut c, &changes[0]);
    assert_eq!(status(&c), TxnStatus::CompleteAbort);
    assert_eq!(
        c.end_txn(ID, pid, epoch, TxnResult::Commit, T0),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(
        c.add_partitions(ID, pid, epoch, &[tp("a", 0)], T0),
        Err(TxnError::ProducerFenced)
    );
    // Nor can it re-initialize from its old epoch (KIP-360 bump): Kafka fences it too.
    let mut next = ids();
    assert_eq!(
        c.init_producer_id(ID, 60_000, Some((pid, epoch)), T0, &mut next),
        Err(TxnError::ProducerFenced)
    );
}

#[test]
fn idle_ids_expire_with_a_tombstone() {
    // Goal: the expiry row of §4: Empty and Complete* ids idle for
    // transactional.id.expiration.ms get a tombstone; ongoing ones never; the tombstone
    // removes the id, which then starts over with a new producer id.
    let mut c = coordinator();
    let (pid, epoch) = init(&mut c, None);
    add(&mut c, pid, epoch, &[tp("a", 0)], T0);
    let week = TxnConfig::default().transactional_id_expiration_ms;
    assert!(c.expire_idle(T0 + week * 2).is_empty(), "ongoing: kept");
    let end = c
        .end_txn(ID, pid, epoch, TxnResult::Commit, T0)
        .expect("ok")
        .expect("c");
    durable(&mut c, &end);
    assert!(c.expire_idle(T0 + week - 1).is_empty());
    let tombstones = c.expire_idle(T0 + week);
    assert_eq!(tombstones.len(), 1);
    assert_eq!(tombstones[0].complete.value, None);
    durable(&mut c, &tombstones[0]);
    assert!(c.get(ID).is_none());
    let (new_pid, new_epoch) = init(&mut c, None);
    assert!(new_pid != pid && new_epoch == 0);
}

#[test]
fn replaying_the_records_rebuilds_the_same_state() {
    // Goal: load = apply every record in log order: the state after replaying all the
    // records written equals the live state, and after replaying a snapshot of it too;
    // ongoing transactions are listed for re-verification.
    let mut c = coordinator();
    let mut log: Vec<TxnRecord> = Vec::new();
    let mut write = |c: &mut TransactionCoordinator, change: TxnChange| {
        log.extend(change.records().cloned());
        durable(c, &change);
    };
    let mut next = ids();
    let Ok(InitOutcome::Write {
        change,
        producer_id: pid,
        producer_epoch: epoch,
    }) = c.init_producer_id(ID, 30_000, None, T0, &mut next)
    else {
        panic!("init")
    };
    write(&mut c, change);
    let add = c
        .add_partitions(ID, pid, epoch, &[tp("x", 3)], T0)
        .expect("ok")
        .expect("c");
    write(&mut c, add);
    let mut replayed = coordinator();
    for record in &log {
        replayed.apply(record);
    }
    assert_eq!(replayed.get(ID), c.get(ID));
    let ongoing: Vec<&str> = replayed.ongoing().map(|(id, _)| id).collect();
    assert_eq!(ongoing, vec![ID]);
    let mut from_snapshot = coordinator();
    for record in c.snapshot_records() {
        from_snapshot.apply(&record);
    }
    assert_eq!(
        from_snapshot.get(ID).map(|m| m.status),
        Some(TxnStatus::Ongoing)
    );
    assert_eq!(from_snapshot.partition_count(), 1);
}

// Goal: TxnOffsetCommit's transaction check (§7.5): the producer must be current, and its
// ongoing transaction must hold `__consumer_offsets-0`; while the commit is written the id
// is busy, so EndTxn cannot be decided in between.
#[test]
fn txn_offset_commit_needs_add_offsets_and_holds_the_id() {
    let mut c = coordinator();
    let (pid, epoch) = init(&mut c, None);
    assert_eq!(
        c.begin_offset_commit("nobody", pid, epoch),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.begin_offset_commit(ID, pid, epoch),
        Err(TxnError::InvalidTxnState),
        "no transaction yet"
    );
    add(&mut c, pid, epoch, &[tp("t", 0)], T0);
    assert_eq!(
        c.begin_offset_commit(ID, pid, epoch),
        Err(TxnError::InvalidTxnState),
        "AddOffsetsToTxn did not come first"
    );
    let change = c.add_offsets(ID, pid, epoch, T0).unwrap().unwrap();
    durable(&mut c, &change);
    assert_eq!(
        c.begin_offset_commit(ID, pid, epoch + 1),
        Err(TxnError::ProducerFenced)
    );
    assert_eq!(c.begin_offset_commit(ID, pid, epoch), Ok(()));
    assert_eq!(
        c.end_txn(ID, pid, epoch, TxnResult::Commit, T0).map(|_| ()),
        Err(TxnError::ConcurrentTransactions)
    );
    c.finish(ID);
    assert!(c.end_txn(ID, pid, epoch, TxnResult::Commit, T0).is_ok());
}
