//! Transactions V2 (KIP-890 part 2) in the transaction coordinator: the implicit add of
//! Produce v12+ / TxnOffsetCommit v5+ and EndTxn v5, against Kafka's table in
//! `TransactionCoordinator.endTransaction` (docs/transactions.md §14). A change counts as
//! durable only once the test applies its records, as the broker does after the sync.

use crate::config::TxnConfig;
use crate::coordinator::TopicPartition;
use crate::error::TxnError;
use crate::transaction::{
    EndOutcome, InitOutcome, TransactionCoordinator, TxnChange, TxnResult, TxnVersion,
};
use crate::txn_records::{TxnRecord, TxnStatus, TxnValue};

const ID: &str = "v2-app";
const T0: i64 = 2_000_000;
const PID: i64 = 7_000;

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

fn durable(c: &mut TransactionCoordinator, change: &TxnChange) {
    for record in change.records() {
        c.apply(record);
    }
    c.finish(change.transactional_id());
}

fn no_new_id() -> Result<i64, TxnError> {
    panic!("no new producer id expected")
}

/// A coordinator whose id is Empty at (PID, epoch), as after an InitProducerId.
fn at_epoch(epoch: i16) -> TransactionCoordinator {
    let mut c = TransactionCoordinator::new(TxnConfig::default());
    c.apply(&TxnRecord {
        transactional_id: ID.into(),
        value: Some(TxnValue {
            producer_id: PID,
            producer_epoch: epoch,
            transaction_timeout_ms: 60_000,
            status: TxnStatus::Empty,
            partitions: Vec::new(),
            last_update_timestamp_ms: T0,
            start_timestamp_ms: -1,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
        }),
    });
    c
}

fn add(c: &mut TransactionCoordinator, epoch: i16, parts: &[TopicPartition]) {
    let change = c
        .add_partitions_implicitly(ID, PID, epoch, parts, T0)
        .expect("added")
        .expect("a change");
    durable(c, &change);
}

/// EndTxn v5, made durable; the answer's producer id and epoch and the change.
fn end(c: &mut TransactionCoordinator, producer: (i64, i16), result: TxnResult) -> (i64, i16) {
    let outcome = c.end_txn_v2(ID, producer, result, T0 + 1, || Ok(PID + 1));
    let Ok(EndOutcome::Write {
        change,
        producer_id,
        producer_epoch,
    }) = outcome
    else {
        panic!("end: {outcome:?}")
    };
    durable(c, &change);
    (producer_id, producer_epoch)
}

fn state(c: &TransactionCoordinator) -> (i64, i16, TxnStatus) {
    let m = c.get(ID).expect("id");
    (m.producer_id, m.producer_epoch, m.status)
}

#[test]
fn every_end_bumps_the_epoch_and_marks_at_the_bumped_one() {
    // Goal: EndTxn v5 decides at epoch + 1, writes the markers at it, answers it, and the
    // next transaction runs at it; the implicit add marks the transaction V2.
    let mut c = at_epoch(3);
    add(&mut c, 3, &[tp("a", 0), tp("b", 1)]);
    assert_eq!(c.get(ID).expect("id").client_transaction_version, 2);
    let outcome = c.end_txn_v2(ID, (PID, 3), TxnResult::Commit, T0 + 1, no_new_id);
    let Ok(EndOutcome::Write {
        change,
        producer_id,
        producer_epoch,
    }) = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!((producer_id, producer_epoch), (PID, 4));
    let markers = change.markers.as_ref().expect("markers");
    assert_eq!((markers.producer_id, markers.producer_epoch), (PID, 4));
    assert_eq!(markers.partitions, vec![tp("a", 0), tp("b", 1)]);
    let prepare = change.prepare.as_ref().and_then(|r| r.value.as_ref());
    assert_eq!(prepare.map(|v| v.producer_epoch), Some(4));
    durable(&mut c, &change);
    assert_eq!(state(&c), (PID, 4, TxnStatus::CompleteCommit));
    add(&mut c, 4, &[tp("a", 0)]);
    assert_eq!(end(&mut c, (PID, 4), TxnResult::Abort), (PID, 5));
    assert_eq!(state(&c), (PID, 5, TxnStatus::CompleteAbort));
}

#[test]
fn retries_are_answered_with_the_current_producer_and_epoch() {
    // Goal: Kafka's V2 table: a retry (epoch before the bump) of the same result is NONE
    // with the current epoch; of the other result INVALID_TXN_STATE; a new commit with
    // nothing open is INVALID_TXN_STATE; a new abort with nothing open bumps again.
    let mut c = at_epoch(0);
    add(&mut c, 0, &[tp("a", 0)]);
    assert_eq!(end(&mut c, (PID, 0), TxnResult::Commit), (PID, 1));
    let retried = c.end_txn_v2(ID, (PID, 0), TxnResult::Commit, T0, no_new_id);
    let done = EndOutcome::Done {
        producer_id: PID,
        producer_epoch: 1,
    };
    assert_eq!(retried, Ok(done.clone()));
    let other = c.end_txn_v2(ID, (PID, 0), TxnResult::Abort, T0, no_new_id);
    assert_eq!(other, Err(TxnError::InvalidTxnState));
    let again = c.end_txn_v2(ID, (PID, 1), TxnResult::Commit, T0, no_new_id);
    assert_eq!(again, Err(TxnError::InvalidTxnState));
    let outcome = c.end_txn_v2(ID, (PID, 1), TxnResult::Abort, T0, no_new_id);
    let Ok(EndOutcome::Write { change, .. }) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(
        change.markers, None,
        "an abort with no partition marks nothing"
    );
    durable(&mut c, &change);
    assert_eq!(state(&c), (PID, 2, TxnStatus::CompleteAbort));
    let retried = c.end_txn_v2(ID, (PID, 1), TxnResult::Abort, T0, no_new_id);
    let done = EndOutcome::Done {
        producer_id: PID,
        producer_epoch: 2,
    };
    assert_eq!(retried, Ok(done));
    let commit = c.end_txn_v2(ID, (PID, 1), TxnResult::Commit, T0, no_new_id);
    assert_eq!(commit, Err(TxnError::InvalidTxnState));
}

#[test]
fn stale_and_foreign_producers_get_kafkas_errors() {
    // Goal: an epoch that is neither current nor a retry is PRODUCER_FENCED, another
    // producer id INVALID_PRODUCER_ID_MAPPING, a change in flight or a decided transaction
    // CONCURRENT_TRANSACTIONS (same result) / INVALID_TXN_STATE (other); nothing written.
    let mut c = at_epoch(5);
    let abort = TxnResult::Abort;
    assert_eq!(
        c.end_txn_v2("", (PID, 5), abort, T0, no_new_id),
        Err(TxnError::InvalidRequest)
    );
    assert_eq!(
        c.end_txn_v2("other", (PID, 5), abort, T0, no_new_id),
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        c.end_txn_v2(ID, (PID + 9, 5), abort, T0, no_new_id),
        Err(TxnError::InvalidProducerIdMapping)
    );
    for stale in [4, 6, -1] {
        assert_eq!(
            c.end_txn_v2(ID, (PID, stale), abort, T0, no_new_id),
            Err(TxnError::ProducerFenced),
            "Empty at 5, epoch {stale}"
        );
    }
    assert_eq!(
        c.add_partitions_implicitly(ID, PID, 4, &[tp("a", 0)], T0),
        Err(TxnError::ProducerFenced)
    );
    add(&mut c, 5, &[tp("a", 0)]);
    let outcome = c.end_txn_v2(ID, (PID, 5), TxnResult::Commit, T0, no_new_id);
    let Ok(EndOutcome::Write { change, .. }) = outcome else {
        panic!("{outcome:?}")
    };
    let in_flight = c.end_txn_v2(ID, (PID, 5), TxnResult::Commit, T0, no_new_id);
    assert_eq!(in_flight, Err(TxnError::ConcurrentTransactions));
    // Only the decision is durable (a crash or refused round before the completion).
    c.apply(change.prepare.as_ref().expect("decision"));
    c.finish(ID);
    assert_eq!(state(&c).2, TxnStatus::PrepareCommit);
    let same = c.end_txn_v2(ID, (PID, 5), TxnResult::Commit, T0, no_new_id);
    assert_eq!(same, Err(TxnError::ConcurrentTransactions));
    let other = c.end_txn_v2(ID, (PID, 5), TxnResult::Abort, T0, no_new_id);
    assert_eq!(other, Err(TxnError::InvalidTxnState));
    let current = c.end_txn_v2(ID, (PID, 6), TxnResult::Commit, T0, no_new_id);
    assert_eq!(current, Err(TxnError::ProducerFenced));
}

#[test]
fn an_exhausted_epoch_moves_to_a_new_producer_id() {
    // Goal: Kafka's rotation: the end of a transaction at epoch i16::MAX - 1 marks at
    // i16::MAX with the old producer id and answers the new producer id at epoch 0; a retry
    // from the old producer id is answered with the new one; InitProducerId from the old
    // one with its exhausted epoch is accepted.
    let mut c = at_epoch(i16::MAX - 2);
    add(&mut c, i16::MAX - 2, &[tp("a", 0)]);
    assert_eq!(
        end(&mut c, (PID, i16::MAX - 2), TxnResult::Commit),
        (PID, i16::MAX - 1)
    );
    add(&mut c, i16::MAX - 1, &[tp("a", 0)]);
    let outcome = c.end_txn_v2(ID, (PID, i16::MAX - 1), TxnResult::Commit, T0, || {
        Ok(PID + 1)
    });
    let Ok(EndOutcome::Write {
        change,
        producer_id,
        producer_epoch,
    }) = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!((producer_id, producer_epoch), (PID + 1, 0));
    let markers = change.markers.as_ref().expect("markers");
    assert_eq!(
        (markers.producer_id, markers.producer_epoch),
        (PID, i16::MAX)
    );
    let prepare = change.prepare.as_ref().and_then(|r| r.value.as_ref());
    assert_eq!(prepare.map(|v| v.next_producer_id), Some(PID + 1));
    durable(&mut c, &change);
    assert_eq!(state(&c), (PID + 1, 0, TxnStatus::CompleteCommit));
    assert_eq!(c.get(ID).expect("id").previous_producer_id, PID);
    let retried = c.end_txn_v2(ID, (PID, i16::MAX - 1), TxnResult::Commit, T0, no_new_id);
    let done = EndOutcome::Done {
        producer_id: PID + 1,
        producer_epoch: 0,
    };
    assert_eq!(retried, Ok(done));
    let init = c.init_producer_id(ID, 60_000, Some((PID, i16::MAX - 1)), T0, no_new_id);
    assert!(
        matches!(init, Ok(InitOutcome::Unchanged { .. })),
        "{init:?}"
    );
}

#[test]
fn a_decision_survives_a_restart_with_its_new_producer_id() {
    // Goal: the crash rows of §9 for V2: with only the decision durable, the load
    // completion writes the completion with the producer id the decision took (not a new
    // one), and a replay of the encoded records (v1) rebuilds the same state.
    let mut c = at_epoch(i16::MAX - 1);
    add(&mut c, i16::MAX - 1, &[tp("a", 0)]);
    let outcome = c.end_txn_v2(
        ID,
        (PID, i16::MAX - 1),
        TxnResult::Abort,
        T0,
        || Ok(PID + 5),
    );
    let Ok(EndOutcome::Write { change, .. }) = outcome else {
        panic!("{outcome:?}")
    };
    let mut log: Vec<TxnRecord> = c.snapshot_records();
    log.push(change.prepare.clone().expect("decision"));
    // The restart: a new coordinator replays the bytes.
    let mut loaded = TransactionCoordinator::new(TxnConfig::default());
    for r in &log {
        let bytes = r.encode_value();
        let decoded = TxnRecord::decode(&r.encode_key(), bytes.as_deref()).expect("decodes");
        loaded.apply(&decoded);
    }
    assert_eq!(state(&loaded), (PID, i16::MAX, TxnStatus::PrepareAbort));
    let completions = loaded.pending_completions(T0 + 5);
    assert_eq!(completions.len(), 1);
    assert_eq!(completions[0].prepare, None);
    let markers = completions[0].markers.as_ref().expect("markers");
    assert_eq!(
        (markers.producer_id, markers.producer_epoch),
        (PID, i16::MAX)
    );
    durable(&mut loaded, &completions[0]);
    assert_eq!(state(&loaded), (PID + 5, 0, TxnStatus::CompleteAbort));
}

#[test]
fn a_timed_out_v2_transaction_is_fenced_but_its_abort_is_a_retry() {
    // Goal: the timeout aborts a V2 transaction at epoch + 1 (its markers fence the old
    // epoch in the log); the producer's own abort then counts as a retry of that end
    // (Kafka's TV_2 table: NONE with the bumped epoch), its commit is INVALID_TXN_STATE,
    // and its implicit add at the old epoch is PRODUCER_FENCED.
    let mut c = at_epoch(2);
    add(&mut c, 2, &[tp("a", 0)]);
    let changes = c.abort_timed_out(T0 + 60_001);
    assert_eq!(changes.len(), 1);
    durable(&mut c, &changes[0]);
    assert_eq!(state(&c), (PID, 3, TxnStatus::CompleteAbort));
    let commit = c.end_txn_v2(ID, (PID, 2), TxnResult::Commit, T0, no_new_id);
    assert_eq!(commit, Err(TxnError::InvalidTxnState));
    assert_eq!(
        c.add_partitions_implicitly(ID, PID, 2, &[tp("a", 0)], T0),
        Err(TxnError::ProducerFenced)
    );
    let abort = c.end_txn_v2(ID, (PID, 2), TxnResult::Abort, T0, no_new_id);
    let done = EndOutcome::Done {
        producer_id: PID,
        producer_epoch: 3,
    };
    assert_eq!(abort, Ok(done));
}

#[test]
fn v1_requests_keep_their_epoch() {
    // Goal: the V1 protocol is unchanged beside V2: AddPartitionsToTxn marks the
    // transaction V1 and EndTxn v0-4 decides at the same epoch.
    let mut c = at_epoch(8);
    let change = c
        .add_partitions(ID, PID, 8, &[tp("a", 0)], T0)
        .expect("ok")
        .expect("c");
    durable(&mut c, &change);
    let m = c.get(ID).expect("id");
    assert_eq!(m.client_transaction_version, TxnVersion::V1.level());
    let end = c
        .end_txn(ID, PID, 8, TxnResult::Commit, T0)
        .expect("ok")
        .expect("c");
    let markers = end.markers.as_ref().expect("markers");
    assert_eq!(markers.producer_epoch, 8);
    durable(&mut c, &end);
    assert_eq!(state(&c), (PID, 8, TxnStatus::CompleteCommit));
}
