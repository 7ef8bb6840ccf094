//! Transactions in the log (docs/transactions.md §6): only verified partitions accept a
//! producer's transactional batches, markers close transactions, the last stable offset
//! holds at the first open transaction and bounds read_committed reads, aborted
//! transactions are listed for fetches, and all of it survives clean and unclean restarts,
//! a lost producer snapshot, and retention.

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use bytes::Bytes;
use sluice_log::fs::{FaultOp, FaultyFs};
use sluice_log::{
    AbortedTxn, AppendGate, AppendGroup, ControlType, IsolationLevel, LogConfig, LogError,
    LogManager, Offset, PartitionKey, ProducerEpoch, ProducerId,
};

/// A transactional batch of `count` records from (`producer_id`, `epoch`) at `seq`.
fn txn_batch(producer_id: i64, epoch: i16, seq: i32, count: i32) -> Bytes {
    let mut out = idempotent_batch(producer_id, epoch, seq, count, i64::from(seq)).to_vec();
    set_transactional(&mut out, true);
    Bytes::from(out)
}

async fn verify(log: &LogManager, k: &PartitionKey, producer_id: i64, epoch: i16) {
    log.verify_txn(k, ProducerId(producer_id), ProducerEpoch(epoch))
        .await
        .expect("queued")
        .wait()
        .await
        .expect("verified");
}

async fn marker(
    log: &LogManager,
    k: &PartitionKey,
    producer_id: i64,
    epoch: i16,
    control: ControlType,
) -> Result<Offset, LogError> {
    let waiter = log
        .append_marker(k, ProducerId(producer_id), ProducerEpoch(epoch), control)
        .await?;
    Ok(waiter.wait().await?.base_offset)
}

/// Bytes a read from `from` returns under `isolation`.
fn read_len(log: &LogManager, k: &PartitionKey, from: i64, isolation: IsolationLevel) -> usize {
    let mut out = Vec::new();
    log.read_ranges_isolated_into(k, Offset(from), 1 << 20, true, isolation, &mut out)
        .expect("read")
        .0
}

fn aborted(log: &LogManager, k: &PartitionKey, from: i64, end: i64) -> Vec<(i64, i64, i64)> {
    let mut out: Vec<AbortedTxn> = Vec::new();
    log.aborted_transactions(k, Offset(from), Offset(end), &mut out)
        .expect("aborted");
    out.iter()
        .map(|a| (a.producer_id.0, a.first_offset.0, a.last_offset.0))
        .collect()
}

fn lso(log: &LogManager, k: &PartitionKey) -> i64 {
    log.offsets(k).expect("offsets").last_stable_offset.0
}

fn setup(dir: &Path) -> (LogManager, PartitionKey) {
    let (log, _) = open(dir);
    let k = key("txn", 0);
    create(&log, &k);
    (log, k)
}

#[tokio::test]
async fn commit_and_abort_move_the_lso_and_the_aborted_list() {
    // Goal: the rules of §6.1 through the public API, the LSO of §6.2 and the aborted
    // list of §6.3, and that they come back the same after a clean restart.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path());
    append(&log, &k, bytes(1, 10, 0)).await; // offset 0
    let unverified = try_append(&log, &k, txn_batch(7, 0, 0, 3)).await;
    assert!(
        matches!(unverified, Err(LogError::InvalidTxnState { .. })),
        "{unverified:?}"
    );
    verify(&log, &k, 7, 0).await;
    assert_eq!(
        try_append(&log, &k, txn_batch(7, 0, 0, 3))
            .await
            .expect("ok")
            .base_offset,
        Offset(1)
    );
    assert_eq!(lso(&log, &k), 1);
    assert_eq!(read_len(&log, &k, 1, IsolationLevel::ReadCommitted), 0);
    let mut out = Vec::new();
    let (_, _, end) = log
        .read_ranges_isolated_into(
            &k,
            Offset(0),
            1 << 20,
            true,
            IsolationLevel::ReadCommitted,
            &mut out,
        )
        .expect("read");
    assert_eq!(end, Offset(1), "a read_committed read ends at the LSO");
    let committed = read_len(&log, &k, 0, IsolationLevel::ReadCommitted);
    assert!(committed > 0 && committed < read_len(&log, &k, 0, IsolationLevel::ReadUncommitted));
    verify(&log, &k, 8, 0).await;
    append(&log, &k, txn_batch(8, 0, 0, 2)).await; // 4..5
    assert_eq!(
        marker(&log, &k, 7, 0, ControlType::Abort)
            .await
            .expect("abort"),
        Offset(6)
    );
    assert_eq!(lso(&log, &k), 4, "producer 8's transaction holds the LSO");
    assert_eq!(aborted(&log, &k, 0, 7), vec![(7, 1, 6)]);
    assert_eq!(
        marker(&log, &k, 8, 0, ControlType::Commit)
            .await
            .expect("commit"),
        Offset(7)
    );
    let offsets = log.offsets(&k).expect("offsets");
    assert_eq!(
        (offsets.last_stable_offset, offsets.high_watermark),
        (Offset(8), Offset(8))
    );
    assert_eq!(aborted(&log, &k, 0, 8), vec![(7, 1, 6)]);
    assert_eq!(aborted(&log, &k, 7, 8), Vec::<(i64, i64, i64)>::new());
    // The marker cleared the verification: the next transaction needs a new one.
    let after = try_append(&log, &k, txn_batch(7, 0, 3, 1)).await;
    assert!(
        matches!(after, Err(LogError::InvalidTxnState { .. })),
        "{after:?}"
    );
    // A marker at a newer epoch fences the old producer; an older epoch cannot follow.
    marker(&log, &k, 7, 2, ControlType::Abort)
        .await
        .expect("fencing abort");
    let fenced = try_append(&log, &k, idempotent_batch(7, 0, 3, 1, 0)).await;
    assert!(
        matches!(fenced, Err(LogError::InvalidProducerEpoch { .. })),
        "{fenced:?}"
    );
    let stale = marker(&log, &k, 7, 1, ControlType::Commit).await;
    assert!(
        matches!(stale, Err(LogError::InvalidProducerEpoch { .. })),
        "{stale:?}"
    );
    let before = (log.offsets(&k).expect("offsets"), aborted(&log, &k, 0, 100));
    log.shutdown().expect("shutdown");
    drop(log);
    let (log, _) = open(dir.path());
    assert_eq!(
        (log.offsets(&k).expect("offsets"), aborted(&log, &k, 0, 100)),
        before
    );
}

#[tokio::test]
async fn an_open_transaction_survives_a_crash_and_holds_the_lso() {
    // Goal: after an unclean stop, open transactions (one in the producer snapshot, one
    // only in the journal after it) hold the LSO, an abort after the snapshot is rebuilt
    // into the aborted list, and the open transaction goes on and can be committed.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path());
    verify(&log, &k, 7, 0).await;
    append(&log, &k, txn_batch(7, 0, 0, 2)).await; // 0..1, open
    append(&log, &k, bytes(1, 10, 0)).await; // 2
    log.checkpoint_now().expect("checkpoint"); // snapshot v2 with 7 open at 0
    append(&log, &k, txn_batch(7, 0, 2, 1)).await; // 3
    verify(&log, &k, 9, 0).await;
    append(&log, &k, txn_batch(9, 0, 0, 1)).await; // 4
    marker(&log, &k, 9, 0, ControlType::Abort)
        .await
        .expect("abort"); // 5
    assert_eq!(lso(&log, &k), 0);
    drop(log); // no shutdown checkpoint: the walk from the snapshot rebuilds the rest
    let (log, _) = open(dir.path());
    assert_eq!(lso(&log, &k), 0);
    assert_eq!(aborted(&log, &k, 0, 6), vec![(9, 4, 5)]);
    append(&log, &k, txn_batch(7, 0, 3, 1)).await; // 6, inside the open transaction
    assert_eq!(
        marker(&log, &k, 7, 0, ControlType::Commit)
            .await
            .expect("commit"),
        Offset(7)
    );
    assert_eq!(lso(&log, &k), 8);
    assert_eq!(aborted(&log, &k, 0, 8), vec![(9, 4, 5)]);
}

#[tokio::test]
async fn a_lost_snapshot_rebuilds_open_transactions_from_the_log_start() {
    // Goal: without a usable producer snapshot, a partition with transactional batches
    // among its newest segments is walked from its log start, so a transaction opened in
    // an older segment still holds the LSO (§6.1), not only the newest two segments.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("txnsmall", 0);
    let config = LogConfig {
        segment_bytes: 512,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    verify(&log, &k, 7, 0).await;
    append(&log, &k, txn_batch(7, 0, 0, 1)).await; // 0, open in the first segment
    for tag in 0..12 {
        append(&log, &k, bytes(2, 100, tag)).await; // rolls several segments
    }
    verify(&log, &k, 8, 0).await;
    let late = append(&log, &k, txn_batch(8, 0, 0, 1)).await;
    log.shutdown().expect("shutdown");
    drop(log);
    let pdir = partition_dir(dir.path(), &k);
    assert!(segment_files(&pdir).len() > 3, "several segments");
    for snapshot in files_with(&pdir, ".snapshot") {
        std::fs::remove_file(snapshot).expect("remove snapshot");
    }
    let (log, report) = open(dir.path());
    assert!(
        report
            .actions
            .iter()
            .any(|a| a.contains("transactional batches found")),
        "{:?}",
        report.actions
    );
    assert_eq!(
        lso(&log, &k),
        0,
        "producer 7's transaction still holds the LSO"
    );
    marker(&log, &k, 7, 0, ControlType::Abort)
        .await
        .expect("abort");
    assert_eq!(lso(&log, &k), late.base_offset.0);
}

#[tokio::test]
async fn retention_trims_aborted_transactions_and_the_lso_follows_the_log_start() {
    // Goal: DeleteRecords past an open transaction's start keeps LSO >= log start; an
    // aborted transaction whose marker is below the log start is forgotten.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path());
    verify(&log, &k, 7, 0).await;
    append(&log, &k, txn_batch(7, 0, 0, 1)).await; // 0
    marker(&log, &k, 7, 0, ControlType::Abort)
        .await
        .expect("abort"); // 1
    verify(&log, &k, 8, 0).await;
    append(&log, &k, txn_batch(8, 0, 0, 1)).await; // 2, open
    append(&log, &k, bytes(1, 10, 0)).await; // 3
    assert_eq!(
        (lso(&log, &k), aborted(&log, &k, 0, 4)),
        (2, vec![(7, 0, 1)])
    );
    log.delete_records(&k, Offset(3)).expect("delete records");
    assert_eq!(lso(&log, &k), 3, "never below the log start");
    log.expire_producers(0);
    assert_eq!(aborted(&log, &k, 0, 4), Vec::<(i64, i64, i64)>::new());
}

#[tokio::test]
async fn aborted_transactions_outlive_their_producers_across_a_crash() {
    // Goal: once its producer expired, a partition's only producer state is its aborted
    // transactions; the checkpoint must still snapshot them, or a crash loses them.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path());
    verify(&log, &k, 7, 0).await;
    append(&log, &k, txn_batch(7, 0, 0, 2)).await; // 0..1
    marker(&log, &k, 7, 0, ControlType::Abort)
        .await
        .expect("abort"); // 2
    assert_eq!(log.expire_producers(i64::MAX / 2), 1);
    log.checkpoint_now().expect("checkpoint");
    drop(log);
    let (log, _) = open(dir.path());
    assert_eq!(aborted(&log, &k, 0, 3), vec![(7, 0, 2)]);
}

#[tokio::test]
async fn txn_open_says_where_a_marker_is_still_missing_across_a_restart() {
    // Goal: `txn_open` (the coordinator's load completion asks it, docs/transactions.md §5.2)
    // is true exactly while a producer's data is written and its marker is not, per
    // partition, and is rebuilt from the log on restart. Method: one producer's
    // transaction over two partitions, the marker written to one only, a restart.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, a) = setup(dir.path());
    let b = key("txn", 1);
    create(&log, &b);
    let id = ProducerId(9);
    assert!(!log.txn_open(&a, id).expect("known partition"));
    for k in [&a, &b] {
        verify(&log, k, 9, 0).await;
        append(&log, k, txn_batch(9, 0, 0, 2)).await;
        assert!(log.txn_open(k, id).expect("open"));
    }
    marker(&log, &a, 9, 0, ControlType::Commit)
        .await
        .expect("marker");
    assert!(!log.txn_open(&a, id).expect("a"));
    assert!(log.txn_open(&b, id).expect("b"));
    assert!(!log.txn_open(&b, ProducerId(10)).expect("other producer"));
    log.shutdown().expect("shutdown");
    drop(log);
    let (log, _) = open(dir.path());
    assert!(!log.txn_open(&a, id).expect("a after restart"));
    assert!(log.txn_open(&b, id).expect("b after restart"));
    assert!(log.txn_open(&key("gone", 0), id).is_err());
}

#[tokio::test]
async fn active_producers_describe_each_producer() {
    // Goal: what DescribeProducers reports (docs/transactions.md §7.6): per producer its
    // epoch, last sequence, last timestamp and the first offset of its open transaction;
    // -1 sequence and timestamp for a producer known only from a verification; the marker
    // closes the transaction.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path());
    append(&log, &k, idempotent_batch(8, 2, 0, 4, 0)).await; // offsets 0-3
    verify(&log, &k, 7, 0).await;
    append(&log, &k, txn_batch(7, 0, 0, 3)).await; // offsets 4-6
    verify(&log, &k, 9, 1).await;
    let describe = |log: &LogManager| {
        let mut out = Vec::new();
        log.active_producers(&k, &mut out).expect("producers");
        out.sort_by_key(|p| p.producer_id);
        out.iter()
            .map(|p| {
                (
                    p.producer_id.0,
                    p.epoch.0,
                    p.last_sequence,
                    p.last_timestamp_ms >= 0,
                    p.current_txn_start_offset.map(|o| o.0),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        describe(&log),
        vec![
            (7, 0, 2, true, Some(4)),
            (8, 2, 3, true, None),
            (9, 1, -1, false, None),
        ]
    );
    marker(&log, &k, 7, 0, ControlType::Commit)
        .await
        .expect("marker");
    assert_eq!(describe(&log)[0], (7, 0, 2, true, None));
    let mut out = Vec::new();
    assert!(matches!(
        log.active_producers(&key("none", 0), &mut out),
        Err(LogError::UnknownPartition)
    ));
}

/// Queues a gating append (the coordinator's record, here plain data in `state`) and, right
/// behind it, the verification of `data` for producer 7 at epoch 0; answers the record's
/// outcome once its round is done, and the verification's waiter.
async fn record_then_verification(
    log: &LogManager,
    state: &PartitionKey,
    data: &PartitionKey,
    tag: i64,
) -> (Result<(), LogError>, sluice_log::AppendWaiter) {
    let gate = AppendGate::new();
    let mut group = AppendGroup::new();
    group.reset(1);
    log.append_in_group_gating(state, bytes(1, 10, tag), &group, 0, &gate)
        .await
        .expect("queued");
    let verification = log
        .verify_txn_after(data, ProducerId(7), ProducerEpoch(0), &gate)
        .await
        .expect("queued");
    group.wait().await;
    let record = group.take(0).expect("answered").map(|_| ());
    (record, verification)
}

#[tokio::test]
async fn a_verification_behind_a_refused_record_is_refused_in_any_round() {
    // Goal: a verification queued behind the coordinator's record (one commit round for
    // AddPartitionsToTxn, docs/transactions.md §6.1) takes effect only if the record does:
    // when the record's round is refused for space, the verification is refused too,
    // whether it shared that round or came in a later one once space was back; with the
    // record written, it verifies the partition as before.
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultyFs::new();
    let (log, _) = open_with(dir.path(), Arc::new(fs.clone()));
    let (state, data) = (key("state", 0), key("data", 0));
    create(&log, &state);
    create(&log, &data);
    // Same round (or the next one): the record and the verification are refused together.
    fs.arm(FaultOp::Write, 0, Some(".wal"));
    let (record, verification) = record_then_verification(&log, &state, &data, 0).await;
    assert!(matches!(record, Err(LogError::Io(_))), "{record:?}");
    assert!(
        verification.wait().await.is_err(),
        "refused with its record"
    );

    // A later round: the record was refused, space is back, the verification still fails.
    let gate = AppendGate::new();
    let mut group = AppendGroup::new();
    group.reset(1);
    log.append_in_group_gating(&state, bytes(1, 10, 1), &group, 0, &gate)
        .await
        .expect("queued");
    group.wait().await;
    assert!(matches!(group.take(0), Some(Err(LogError::Io(_)))));
    fs.disarm();
    let late = log
        .verify_txn_after(&data, ProducerId(7), ProducerEpoch(0), &gate)
        .await
        .expect("queued");
    let refused = late.wait().await;
    assert!(
        matches!(refused, Err(LogError::InvalidTxnState { .. })),
        "{refused:?}"
    );
    let unverified = try_append(&log, &data, txn_batch(7, 0, 0, 3)).await;
    assert!(
        matches!(unverified, Err(LogError::InvalidTxnState { .. })),
        "the partition must not have joined the transaction: {unverified:?}"
    );

    // The record written: the verification queued behind it takes effect.
    let (record, verification) = record_then_verification(&log, &state, &data, 2).await;
    assert!(record.is_ok(), "{record:?}");
    verification.wait().await.expect("verified");
    let accepted = try_append(&log, &data, txn_batch(7, 0, 0, 3))
        .await
        .expect("accepted");
    assert_eq!(accepted.base_offset, Offset(0));
}
