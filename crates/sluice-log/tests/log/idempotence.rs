//! Idempotent producers: a retry is answered with its original offsets and writes nothing,
//! gaps and stale epochs are refused, a request is accepted or refused as a whole, and the
//! producer state survives clean and unclean restarts, torn tails, expiry and its bound,
//! without ever calling a batch a duplicate of data the log does not hold.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::*;
use bytes::{Bytes, BytesMut};
use sluice_log::fs::{FaultOp, FaultyFs, StdFs};
use sluice_log::{
    AppendInfo, LogConfig, LogError, LogManager, LogManagerConfig, Offset, PartitionKey,
    ProducerEpoch, ProducerId, TimestampType,
};

/// The producer id most tests use.
const P: i64 = 4242;

fn now_ms() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock");
    i64::try_from(since_epoch.as_millis()).expect("ms")
}

fn open_config(config: LogManagerConfig) -> (LogManager, sluice_log::RecoveryReport) {
    LogManager::open(config, Arc::new(StdFs)).expect("open")
}

fn setup(dir: &Path, topic: &str) -> (LogManager, PartitionKey) {
    let (log, _) = open(dir);
    let k = key(topic, 0);
    create(&log, &k);
    (log, k)
}

/// Sends a batch of `records` records from (`producer_id`, `epoch`) at `seq`, tagged `seq`.
async fn send(
    log: &LogManager,
    k: &PartitionKey,
    producer_id: i64,
    epoch: i16,
    seq: i32,
    records: i32,
) -> Result<AppendInfo, LogError> {
    let batch = idempotent_batch(producer_id, epoch, seq, records, i64::from(seq));
    try_append(log, k, batch).await
}

/// Like [`send`], and expects the batch to be written (not answered as a duplicate).
async fn produce(
    log: &LogManager,
    k: &PartitionKey,
    producer_id: i64,
    epoch: i16,
    seq: i32,
    records: i32,
) -> AppendInfo {
    let info = send(log, k, producer_id, epoch, seq, records)
        .await
        .unwrap_or_else(|e| panic!("producer {producer_id} seq {seq} refused: {e}"));
    assert!(
        !info.duplicate,
        "producer {producer_id} seq {seq} was a duplicate"
    );
    info
}

/// Like [`send`], and expects a duplicate answered with `base..=last`.
async fn expect_duplicate(
    log: &LogManager,
    k: &PartitionKey,
    (producer_id, epoch, seq, records): (i64, i16, i32, i32),
    base: i64,
    last: i64,
) {
    let info = send(log, k, producer_id, epoch, seq, records)
        .await
        .unwrap_or_else(|e| panic!("retry of producer {producer_id} seq {seq} refused: {e}"));
    assert!(
        info.duplicate,
        "retry of producer {producer_id} seq {seq} was written again"
    );
    assert_eq!(
        (info.base_offset, info.last_offset),
        (Offset(base), Offset(last))
    );
}

fn log_end(log: &LogManager, k: &PartitionKey) -> Offset {
    log.offsets(k).expect("offsets").log_end_offset
}

fn out_of_order(result: Result<AppendInfo, LogError>) -> (i32, i32) {
    match result {
        Err(LogError::OutOfOrderSequence {
            expected, received, ..
        }) => (expected, received),
        other => panic!("expected OutOfOrderSequence, got {other:?}"),
    }
}

fn concat(batches: &[Bytes]) -> Bytes {
    let mut out = BytesMut::new();
    for batch in batches {
        out.extend_from_slice(batch);
    }
    out.freeze()
}

/// A partition's segments: its `.extents` files, in base-offset order.
fn segment_logs(data: &Path, k: &PartitionKey) -> Vec<PathBuf> {
    segment_files(&partition_dir(data, k))
}

fn snapshots(data: &Path, k: &PartitionKey) -> Vec<PathBuf> {
    files_with(&partition_dir(data, k), ".snapshot")
}

fn has_action(report: &sluice_log::RecoveryReport, needle: &str) -> bool {
    report.actions.iter().any(|a| a.contains(needle))
}

#[tokio::test]
async fn retry_returns_original_offsets_and_writes_nothing() {
    // Goal: a retried batch (same producer, epoch and sequences) is answered with the
    // offsets it got the first time and flagged duplicate, even with other data appended in
    // between, and adds nothing: log end, batch count and contents are unchanged.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "dup");
    append(&log, &k, bytes(2, 10, 1)).await;
    let first = produce(&log, &k, P, 0, 0, 3).await;
    assert_eq!(
        (first.base_offset, first.last_offset),
        (Offset(2), Offset(4))
    );
    produce(&log, &k, P, 0, 3, 2).await;
    append(&log, &k, bytes(1, 10, 2)).await;
    let before = (
        log_end(&log, &k),
        log.stats().batches_appended,
        read_all(&log, &k),
    );
    let retry = send(&log, &k, P, 0, 0, 3).await.expect("answered");
    assert!(retry.duplicate);
    assert_eq!(
        (retry.base_offset, retry.last_offset),
        (Offset(2), Offset(4))
    );
    assert_eq!(retry.log_append_time_ms, -1);
    expect_duplicate(&log, &k, (P, 0, 3, 2), 5, 6).await;
    let after = (
        log_end(&log, &k),
        log.stats().batches_appended,
        read_all(&log, &k),
    );
    assert_eq!(after, before);
    // The producer goes on from where it was.
    assert_eq!(produce(&log, &k, P, 0, 5, 1).await.base_offset, Offset(8));
}

#[tokio::test]
async fn duplicate_on_log_append_time_topic_carries_original_append_time() {
    // Goal: on a LogAppendTime topic, the answer to a retry carries the append time the
    // original batch got, not a new one.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("lat", 0);
    let config = LogConfig {
        timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    let first = produce(&log, &k, P, 0, 0, 2).await;
    assert!(first.log_append_time_ms > 0);
    tokio::time::sleep(Duration::from_millis(5)).await;
    let retry = send(&log, &k, P, 0, 0, 2).await.expect("answered");
    assert!(retry.duplicate);
    assert_eq!(retry.log_append_time_ms, first.log_append_time_ms);
}

#[tokio::test]
async fn sequence_gap_is_out_of_order() {
    // Goal: a base sequence that skips numbers is refused with OutOfOrderSequence (naming
    // the expected sequence), writes nothing, and leaves the expected sequence as it was.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "gap");
    produce(&log, &k, P, 0, 0, 3).await;
    let result = send(&log, &k, P, 0, 5, 1).await;
    assert!(matches!(
        result,
        Err(LogError::OutOfOrderSequence {
            producer_id: ProducerId(P),
            expected: 3,
            received: 5
        })
    ));
    assert_eq!(log_end(&log, &k), Offset(3));
    assert_eq!(produce(&log, &k, P, 0, 3, 1).await.base_offset, Offset(3));
}

#[tokio::test]
async fn stale_epoch_is_refused() {
    // Goal: a batch from an older producer epoch than the partition has seen is refused
    // with InvalidProducerEpoch (the old session was fenced) and writes nothing.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "epoch");
    produce(&log, &k, P, 2, 0, 1).await;
    let result = send(&log, &k, P, 1, 1, 1).await;
    assert!(
        matches!(
            result,
            Err(LogError::InvalidProducerEpoch {
                producer_id: ProducerId(P),
                epoch: ProducerEpoch(1),
                current: ProducerEpoch(2),
            })
        ),
        "{result:?}"
    );
    assert_eq!(log_end(&log, &k), Offset(1));
    produce(&log, &k, P, 2, 1, 1).await;
}

#[tokio::test]
async fn new_epoch_must_start_at_sequence_zero() {
    // Goal: a newer epoch is accepted only from base sequence 0; once accepted, the old
    // epoch is fenced, even for a retry of one of its own batches.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "newepoch");
    produce(&log, &k, P, 0, 0, 5).await;
    produce(&log, &k, P, 0, 5, 5).await;
    assert_eq!(out_of_order(send(&log, &k, P, 1, 10, 1).await), (0, 10));
    assert_eq!(log_end(&log, &k), Offset(10));
    assert_eq!(produce(&log, &k, P, 1, 0, 1).await.base_offset, Offset(10));
    for seq in [10, 5] {
        assert!(matches!(
            send(&log, &k, P, 0, seq, 5).await,
            Err(LogError::InvalidProducerEpoch { .. })
        ));
    }
    assert_eq!(out_of_order(send(&log, &k, P, 1, 5, 1).await), (1, 5));
}

#[tokio::test]
async fn unknown_producer_is_accepted_at_any_sequence() {
    // Goal: a producer id the partition has no state for starts at whatever sequence it
    // sends (as after its state expired: KIP-360); from then on its sequence is enforced,
    // wrapping from i32::MAX to 0.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "unknown");
    produce(&log, &k, P, 3, 1234, 3).await;
    assert_eq!(
        out_of_order(send(&log, &k, P, 3, 1236, 1).await),
        (1237, 1236)
    );
    produce(&log, &k, P, 3, 1237, 1).await;
    produce(&log, &k, 77, 0, i32::MAX - 1, 2).await;
    assert_eq!(out_of_order(send(&log, &k, 77, 0, 1, 1).await), (0, 1));
    produce(&log, &k, 77, 0, 0, 1).await;
}

#[tokio::test]
async fn request_with_several_batches_is_all_or_nothing() {
    // Goal: one append request holding several batches is checked as a whole: a bad batch
    // refuses all of them (non-idempotent ones too), a retried batch makes the whole
    // request a duplicate that writes nothing (not even its new batch), and batches in
    // sequence (one producer or several) are all written.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "multi");
    let b = |seq, records| idempotent_batch(P, 0, seq, records, i64::from(seq));
    produce(&log, &k, P, 0, 0, 1).await;
    let gap = concat(&[b(1, 2), b(4, 1)]);
    assert_eq!(out_of_order(try_append(&log, &k, gap).await), (3, 4));
    let mixed = concat(&[bytes(1, 5, 9), b(1, 1), b(9, 1)]);
    assert_eq!(out_of_order(try_append(&log, &k, mixed).await), (2, 9));
    assert_eq!(
        log_end(&log, &k),
        Offset(1),
        "refused requests wrote nothing"
    );
    let info = try_append(&log, &k, concat(&[b(1, 2), b(3, 1)]))
        .await
        .expect("in sequence");
    assert_eq!(
        (info.base_offset, info.last_offset, info.duplicate),
        (Offset(1), Offset(3), false)
    );
    let retry = try_append(&log, &k, concat(&[b(3, 1), b(4, 1)]))
        .await
        .expect("answered");
    assert_eq!(
        (retry.base_offset, retry.last_offset, retry.duplicate),
        (Offset(3), Offset(3), true)
    );
    assert_eq!(log_end(&log, &k), Offset(4));
    // Sequence 4 was not written with the duplicate: it is still the next one.
    assert_eq!(produce(&log, &k, P, 0, 4, 1).await.base_offset, Offset(4));
    let two = concat(&[idempotent_batch(9, 0, 70, 1, 0), b(5, 1), bytes(1, 5, 9)]);
    let info = try_append(&log, &k, two).await.expect("two producers");
    assert_eq!((info.base_offset, info.last_offset), (Offset(5), Offset(7)));
    assert_eq!(read_all(&log, &k).len(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_in_one_round_see_each_other() {
    // Goal: requests queued behind a slow journal sync are committed in one round, in queue
    // order, and each is checked against the state the earlier ones left: a retry of a batch
    // queued earlier in the same round is a duplicate of it, a gap is refused, the others are
    // written. Every sync takes 300 ms, so the five requests queue up behind a first one.
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultyFs::new();
    let (log, _) = open_with(dir.path(), Arc::new(fs.clone()));
    let (k, blocker_key) = (key("pipe", 0), key("pipe", 1));
    create(&log, &k);
    create(&log, &blocker_key);
    fs.set_sync_delay(Duration::from_millis(300));
    let blocker = log
        .append(&blocker_key, bytes(1, 1, 0))
        .await
        .expect("queued");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rounds_before = log.stats().commit_rounds;
    let mut waiters = Vec::new();
    for (seq, records) in [(0, 2), (2, 2), (0, 2), (9, 1), (4, 1)] {
        let batch = idempotent_batch(P, 0, seq, records, i64::from(seq));
        waiters.push(log.append(&k, batch).await.expect("queued"));
    }
    blocker.wait().await.expect("blocker durable");
    let mut results = Vec::new();
    for waiter in waiters {
        results.push(waiter.wait().await);
    }
    assert_eq!(
        log.stats().commit_rounds - rounds_before,
        2,
        "the blocker's round, then one"
    );
    let offsets = |i: usize| {
        let info: &AppendInfo = results[i].as_ref().expect("accepted");
        (info.base_offset.0, info.last_offset.0, info.duplicate)
    };
    assert_eq!(offsets(0), (0, 1, false));
    assert_eq!(offsets(1), (2, 3, false));
    assert_eq!(offsets(2), (0, 1, true));
    assert!(matches!(
        results[3],
        Err(LogError::OutOfOrderSequence {
            expected: 4,
            received: 9,
            ..
        })
    ));
    assert_eq!(offsets(4), (4, 4, false));
    assert_eq!(log_end(&log, &k), Offset(5));
}

#[tokio::test]
async fn dedup_survives_clean_shutdown() {
    // Goal: after shutdown and reopen a retry is still a duplicate with its original offsets
    // and the next sequence is still enforced. The state comes from the snapshot written at
    // shutdown, with no batch re-read; a partition without idempotent producers gets no
    // snapshot file at all.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "clean");
    let plain = key("plain", 0);
    create(&log, &plain);
    for seq in [0, 2, 4] {
        produce(&log, &k, P, 0, seq, 2).await;
    }
    append(&log, &plain, bytes(3, 10, 1)).await;
    log.shutdown().expect("shutdown");
    assert_eq!(snapshots(dir.path(), &k).len(), 1);
    assert!(snapshots(dir.path(), &plain).is_empty());
    let (log, report) = open(dir.path());
    assert!(!has_action(&report, "re-applied"), "{:?}", report.actions);
    expect_duplicate(&log, &k, (P, 0, 2, 2), 2, 3).await;
    assert_eq!(out_of_order(send(&log, &k, P, 0, 7, 1).await), (6, 7));
    assert_eq!(produce(&log, &k, P, 0, 6, 1).await.base_offset, Offset(6));
}

#[tokio::test]
async fn dedup_survives_unclean_stop() {
    // Goal: dropping the log without shutdown (an unclean stop) keeps duplicate detection and
    // sequence checks for batches acknowledged before and after the last checkpoint. Those
    // after it are re-applied from the log, including a producer first seen after it.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "unclean");
    for seq in [0, 3, 6] {
        produce(&log, &k, P, 0, seq, 3).await;
    }
    log.checkpoint_now().expect("checkpoint");
    produce(&log, &k, P, 0, 9, 3).await;
    produce(&log, &k, P, 0, 12, 3).await;
    produce(&log, &k, 7, 0, 100, 1).await;
    drop(log);
    let (log, report) = open(dir.path());
    assert!(
        has_action(&report, "re-applied 3 idempotent batches"),
        "{:?}",
        report.actions
    );
    expect_duplicate(&log, &k, (P, 0, 6, 3), 6, 8).await;
    expect_duplicate(&log, &k, (P, 0, 12, 3), 12, 14).await;
    expect_duplicate(&log, &k, (7, 0, 100, 1), 15, 15).await;
    assert_eq!(out_of_order(send(&log, &k, P, 0, 20, 1).await), (15, 20));
    assert_eq!(produce(&log, &k, P, 0, 15, 1).await.base_offset, Offset(16));
}

#[tokio::test]
async fn torn_tail_after_snapshot_is_refilled_with_its_producer_state() {
    // Goal: a segment's extent list torn after the checkpoint in force (and its producer
    // snapshot) is cut and the lost batch refilled from the journal; retries of the
    // refilled batch and of the one before it are duplicates at their original offsets, and
    // the sequence continues after them. The torn records were persisted by a later
    // checkpoint that crashed before replacing the checkpoint file (its checkpoint file and
    // snapshot are rolled back to simulate that).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "torn");
    produce(&log, &k, P, 0, 0, 2).await;
    produce(&log, &k, P, 0, 2, 2).await;
    log.checkpoint_now().expect("checkpoint");
    let old_snapshots = snapshots(dir.path(), &k);
    assert_eq!(old_snapshots.len(), 1);
    let saved_snapshot = std::fs::read(&old_snapshots[0]).expect("snapshot");
    let checkpoint = dir.path().join("journal").join("checkpoint");
    let saved_checkpoint = std::fs::read(&checkpoint).expect("checkpoint");
    produce(&log, &k, P, 0, 4, 2).await;
    produce(&log, &k, P, 0, 6, 2).await;
    log.checkpoint_now().expect("second checkpoint");
    drop(log);
    std::fs::write(&checkpoint, saved_checkpoint).expect("roll back the checkpoint");
    std::fs::write(&old_snapshots[0], saved_snapshot).expect("and its snapshot");
    let extents = &segment_logs(dir.path(), &k)[0];
    assert_eq!(extent_records(extents).len(), 4);
    truncate_by(extents, 7);
    let (log, report) = open(dir.path());
    assert!(
        has_action(&report, "extent record is torn"),
        "{:?}",
        report.actions
    );
    assert_eq!(report.journal_entries_replayed, 1);
    expect_duplicate(&log, &k, (P, 0, 6, 2), 6, 7).await;
    expect_duplicate(&log, &k, (P, 0, 4, 2), 4, 5).await;
    assert_eq!(produce(&log, &k, P, 0, 8, 1).await.base_offset, Offset(8));
}

#[tokio::test]
async fn state_beyond_recovered_data_is_never_used() {
    // Goal: when recovery ends below the offset the producer state was checkpointed at
    // (acknowledged data lost together with the journal: a media failure), that state is
    // not used, so a retry of a lost batch is written again instead of being answered as a
    // duplicate of data that is gone. Batches still present stay duplicates.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "lost");
    for seq in 0..3 {
        produce(&log, &k, P, 0, seq, 1).await;
    }
    log.checkpoint_now().expect("checkpoint");
    drop(log);
    // The journal holds the only copy of the batches: losing its tail after the first
    // entry loses batches 1 and 2 although the segment's extents still name them.
    let journals = journal_files(dir.path());
    assert_eq!(journals.len(), 1);
    let entries = extent_records(&segment_logs(dir.path(), &k)[0]);
    assert_eq!(entries.len(), 3);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&journals[0])
        .expect("open")
        .set_len(entries[1].file_position - 28)
        .expect("cut the journal after the first entry");
    let (log, report) = open(dir.path());
    assert!(
        has_action(&report, "beyond the recovered log end"),
        "{:?}",
        report.actions
    );
    // Offsets 1 and 2 were durable at the checkpoint: they are reported missing and never
    // handed out again, so the log goes on at 3.
    assert!(
        has_action(&report, "offsets 1..3 are missing"),
        "{:?}",
        report.actions
    );
    assert_eq!(log_end(&log, &k), Offset(3));
    let again = produce(&log, &k, P, 0, 1, 1).await;
    assert_eq!(again.base_offset, Offset(3));
    expect_duplicate(&log, &k, (P, 0, 0, 1), 0, 0).await;
}

#[tokio::test]
async fn damaged_snapshot_rebuilds_from_the_newest_segments() {
    // Goal: a damaged producer snapshot is not used; the state is rebuilt from the newest
    // two segments only (PRODUCER_STATE_REBUILD_SEGMENTS_MAX), so a producer seen only in
    // older segments is forgotten (accepted at any sequence) while one seen in them still
    // gets its retries answered as duplicates.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("damaged", 0);
    let config = LogConfig {
        segment_bytes: 400,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    for seq in 0..3 {
        produce(&log, &k, 1, 0, seq, 1).await;
    }
    for tag in 0..20 {
        append(&log, &k, bytes(1, 20, tag)).await;
    }
    let newest = produce(&log, &k, 2, 0, 0, 1).await;
    log.shutdown().expect("shutdown");
    assert!(segment_logs(dir.path(), &k).len() >= 5);
    let snapshot = snapshots(dir.path(), &k).pop().expect("snapshot");
    flip_bit(&snapshot, 40);
    let (log, report) = open(dir.path());
    assert!(
        has_action(&report, "missing or damaged"),
        "{:?}",
        report.actions
    );
    assert!(
        has_action(&report, "older producers are forgotten"),
        "{:?}",
        report.actions
    );
    let at = newest.base_offset.0;
    expect_duplicate(&log, &k, (2, 0, 0, 1), at, at).await;
    produce(&log, &k, 1, 0, 50, 1).await;
}

#[tokio::test]
async fn idle_producers_expire_and_are_then_accepted_anywhere() {
    // Goal: expire_producers drops producers idle for producer_id_expiration_ms or more (and
    // none idle for less); an expired producer is then accepted at any sequence, and the
    // expiry holds across a clean restart.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.producer_id_expiration_ms = 60_000;
    let (log, _) = open_config(config.clone());
    let k = key("expire", 0);
    create(&log, &k);
    produce(&log, &k, P, 0, 0, 1).await;
    produce(&log, &k, 8, 0, 0, 1).await;
    let t = now_ms();
    assert_eq!(log.expire_producers(t + 30_000), 0);
    assert_eq!(out_of_order(send(&log, &k, P, 0, 5, 1).await), (1, 5));
    assert_eq!(log.expire_producers(t + 61_000), 2);
    produce(&log, &k, P, 0, 5, 1).await;
    log.shutdown().expect("shutdown");
    let (log, _) = open_config(config);
    assert_eq!(out_of_order(send(&log, &k, P, 0, 7, 1).await), (6, 7));
    produce(&log, &k, 8, 0, 9, 1).await;
}

#[tokio::test]
async fn retention_thread_expires_idle_producers() {
    // Goal: the background retention thread runs producer expiry on its own schedule: a
    // producer idle past producer_id_expiration_ms is forgotten without any call, and is
    // then accepted at any sequence.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.retention_check_interval_ms = 10;
    config.producer_id_expiration_ms = 50;
    let (log, _) = open_config(config);
    let k = key("expirethread", 0);
    create(&log, &k);
    produce(&log, &k, P, 0, 0, 1).await;
    assert_eq!(out_of_order(send(&log, &k, P, 0, 9, 1).await), (1, 9));
    tokio::time::sleep(Duration::from_millis(400)).await;
    produce(&log, &k, P, 0, 9, 1).await;
}

#[tokio::test]
async fn producer_id_without_base_sequence_is_invalid() {
    // Goal: a batch with a producer id but a negative base sequence is refused on the
    // caller's thread with InvalidRecord (Kafka's LogValidator does the same).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, k) = setup(dir.path(), "noseq");
    let result = log.append(&k, idempotent_batch(P, 0, -1, 1, 0)).await;
    assert!(
        matches!(result, Err(LogError::InvalidRecord(_))),
        "{result:?}"
    );
    assert_eq!(log_end(&log, &k), Offset(0));
}

#[tokio::test]
async fn full_partition_refuses_new_producers_while_the_others_are_active() {
    // Goal: with room for two producers per partition, a third is refused (nothing written)
    // while both are recently active, so neither loses its state and a retry of theirs is
    // still a duplicate; the bound is per partition. (Eviction of producers idle for the
    // default window is covered by producer_state's unit tests, which control time; a
    // lowered window by the next test.)
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.producer_ids_per_partition_max = 2;
    let (log, _) = open_config(config);
    let (k, other) = (key("bound", 0), key("bound", 1));
    create(&log, &k);
    create(&log, &other);
    produce(&log, &k, 1, 0, 0, 1).await;
    produce(&log, &k, 2, 0, 0, 1).await;
    produce(&log, &k, 1, 0, 1, 1).await;
    produce(&log, &other, 5, 0, 0, 1).await;
    produce(&log, &other, 6, 0, 0, 1).await;
    let end = log.offsets(&k).expect("offsets").high_watermark;
    let refused = send(&log, &k, 3, 0, 0, 1).await;
    assert!(
        matches!(refused, Err(LogError::ProducerStateFull { .. })),
        "{refused:?}"
    );
    assert_eq!(log.offsets(&k).expect("offsets").high_watermark, end);
    expect_duplicate(&log, &k, (1, 0, 1, 1), 2, 2).await;
    assert_eq!(out_of_order(send(&log, &k, 2, 0, 10, 1).await), (1, 10));
    produce(&log, &k, 2, 0, 1, 1).await;
}

#[tokio::test]
async fn a_lowered_eviction_window_admits_a_new_producer_once_the_others_idle() {
    // Goal: `producer_eviction_idle_ms` is the window the committer checks: with room for
    // two producers and a 300 ms window, a third is refused while both are recent, and
    // once they have been idle for 300 ms it takes the least recently active one's slot.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.producer_ids_per_partition_max = 2;
    config.producer_eviction_idle_ms = 300;
    let (log, _) = open_config(config);
    let k = key("window", 0);
    create(&log, &k);
    produce(&log, &k, 1, 0, 0, 1).await;
    produce(&log, &k, 2, 0, 0, 1).await;
    let refused = send(&log, &k, 3, 0, 0, 1).await;
    assert!(
        matches!(refused, Err(LogError::ProducerStateFull { .. })),
        "{refused:?}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(produce(&log, &k, 3, 0, 0, 1).await.base_offset, Offset(2));
    // Producer 1 was evicted: its next batch is new to the table (any sequence), and it
    // takes producer 2's slot, idle for the window too.
    assert_eq!(produce(&log, &k, 1, 0, 7, 1).await.base_offset, Offset(3));
}

#[tokio::test]
async fn recreated_partition_starts_without_producer_state() {
    // Goal: deleting a partition drops its producer state and snapshot with it: a partition
    // re-created under the same name accepts the same producer id at any sequence, before
    // and after an unclean reopen, and keeps its own state from then on.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, old) = setup(dir.path(), "again");
    for seq in 0..3 {
        produce(&log, &old, P, 0, seq, 1).await;
    }
    log.checkpoint_now().expect("checkpoint");
    log.delete_partition(&old).expect("delete");
    let mut new = old.clone();
    new.topic_id.0[0] ^= 0xff;
    create(&log, &new);
    assert_eq!(
        produce(&log, &new, P, 0, 40, 1).await.base_offset,
        Offset(0)
    );
    drop(log);
    let (log, _) = open(dir.path());
    expect_duplicate(&log, &new, (P, 0, 40, 1), 0, 0).await;
    assert_eq!(out_of_order(send(&log, &new, P, 0, 3, 1).await), (41, 3));
}

#[tokio::test]
async fn retry_below_log_start_is_still_a_duplicate() {
    // Goal: moving the log start past a producer's batches (DeleteRecords) keeps its state,
    // as in Kafka: a retry is still answered with the original offsets, also after an
    // unclean reopen once a checkpoint has snapshotted the state.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("trimmed", 0);
    let config = LogConfig {
        segment_bytes: 300,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    for seq in 0..3 {
        produce(&log, &k, P, 0, seq, 1).await;
    }
    for tag in 0..6 {
        append(&log, &k, bytes(1, 20, tag)).await;
    }
    log.checkpoint_now().expect("checkpoint");
    let start = log.delete_records(&k, Offset(-1)).expect("delete records");
    assert_eq!(start, Offset(9));
    assert!(!segment_logs(dir.path(), &k)
        .iter()
        .any(|p| p.ends_with("00000000000000000000.extents")));
    expect_duplicate(&log, &k, (P, 0, 2, 1), 2, 2).await;
    drop(log);
    let (log, _) = open(dir.path());
    expect_duplicate(&log, &k, (P, 0, 2, 1), 2, 2).await;
    assert_eq!(produce(&log, &k, P, 0, 3, 1).await.base_offset, Offset(9));
}

#[tokio::test]
async fn failed_snapshot_write_poisons_and_loses_nothing() {
    // Goal: an I/O error syncing a producer snapshot poisons the log like any write-path
    // failure; after reopening, every acknowledged batch is still a duplicate at its offset
    // (the previous snapshot plus the batches re-applied from the log). A full disk while
    // writing it (ENOSPC) only fails that checkpoint: nothing is poisoned.
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultyFs::new();
    let (log, _) = open_with(dir.path(), Arc::new(fs.clone()));
    let k = key("snapfault", 0);
    create(&log, &k);
    produce(&log, &k, P, 0, 0, 1).await;
    produce(&log, &k, P, 0, 1, 1).await;
    log.checkpoint_now().expect("checkpoint");
    produce(&log, &k, P, 0, 2, 1).await;
    fs.arm(FaultOp::Write, 0, Some(".snapshot"));
    assert!(matches!(log.checkpoint_now(), Err(LogError::Io(_))));
    assert!(
        !log.is_poisoned(),
        "a refused write only fails the checkpoint"
    );
    fs.arm(FaultOp::Sync, 0, Some(".snapshot"));
    produce(&log, &k, P, 0, 3, 1).await;
    assert!(matches!(log.checkpoint_now(), Err(LogError::Io(_))));
    assert!(log.is_poisoned());
    assert!(fs.injected() > 0);
    drop(log);
    let (log, _) = open(dir.path());
    for seq in 0..4 {
        expect_duplicate(&log, &k, (P, 0, seq, 1), i64::from(seq), i64::from(seq)).await;
    }
    assert_eq!(produce(&log, &k, P, 0, 4, 1).await.base_offset, Offset(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copy_of_running_log_has_producer_state_matching_its_data() {
    // Goal: a copy of the data dir taken while idempotent producers append and checkpoints
    // (with producer snapshots) run, as a crash would leave it, recovers a producer state
    // that matches the recovered data exactly: each producer's last five batches present are
    // duplicates at their offsets, a gap after them is refused, and the next sequence is
    // written at the log end.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.checkpoint_bytes = 16 * 1024;
    config.checkpoint_interval_ms = 5;
    config.journal_file_bytes_max = 16 * 1024;
    let (log, _) = open_config(config);
    let keys: Vec<_> = (0..4).map(|p| key("copy", p)).collect();
    for k in &keys {
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        log.create_partition(k.clone(), config).expect("create");
    }
    let mut tasks = Vec::new();
    for k in keys.clone() {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let producer_id = 100 + i64::from(k.partition);
            for i in 0..150 {
                produce(&log, &k, producer_id, 0, 2 * i, 2).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(40)).await;
    let copy_root = tempfile::tempdir().expect("tempdir");
    let copy = copy_root.path().join("data");
    tokio::task::spawn_blocking({
        let (from, to) = (dir.path().to_owned(), copy.clone());
        move || copy_dir(&from, &to)
    })
    .await
    .expect("copy");
    for task in tasks {
        task.await.expect("producer");
    }
    drop(log);
    let (copied, _) = open(&copy);
    for k in &keys {
        let producer_id = 100 + i64::from(k.partition);
        let seen = read_all(&copied, k);
        let tags: Vec<i64> = seen.iter().map(|s| s.tag).collect();
        let n = seen.len();
        assert!(n > 0, "partition {} has data", k.partition);
        assert_eq!(tags, (0..n as i64).map(|i| 2 * i).collect::<Vec<_>>());
        for (j, batch) in seen.iter().enumerate().skip(n.saturating_sub(5)) {
            let retry = (producer_id, 0, 2 * j as i32, 2);
            expect_duplicate(&copied, k, retry, batch.base_offset, batch.last_offset).await;
        }
        let next = 2 * n as i32;
        assert_eq!(
            out_of_order(send(&copied, k, producer_id, 0, next + 2, 2).await).0,
            next
        );
        let info = produce(&copied, k, producer_id, 0, next, 2).await;
        assert_eq!(info.base_offset.0, seen[n - 1].last_offset + 1);
    }
}

/// Set in the child process of [`sigkill_mid_produce_keeps_producer_state_matching_data`]:
/// the data dir it produces into until it is killed.
const CHILD_DIR_ENV: &str = "SLUICE_IDEMPOTENCE_CHILD_DIR";
const SIGKILL_PARTITIONS: i32 = 2;

/// The child: produces from one idempotent producer per partition, as fast as acks come,
/// printing `ACK <partition> <seq> <base offset>` after each ack, with frequent checkpoints
/// so that the kill lands anywhere among appends, snapshots and checkpoint writes.
async fn produce_until_killed(dir: &Path) {
    let mut config = config(dir);
    config.checkpoint_bytes = 16 * 1024;
    config.checkpoint_interval_ms = 2;
    config.journal_file_bytes_max = 32 * 1024;
    let (log, _) = open_config(config);
    let mut tasks = Vec::new();
    for partition in 0..SIGKILL_PARTITIONS {
        let k = key("killed", partition);
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        log.create_partition(k.clone(), config).expect("create");
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            // Bounded, in case the parent never kills us.
            for i in 0..20_000 {
                let info = produce(&log, &k, 500 + i64::from(partition), 0, 2 * i, 2).await;
                println!("ACK {partition} {} {}", 2 * i, info.base_offset.0);
            }
        }));
    }
    for task in tasks {
        task.await.expect("producer");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_produce_keeps_producer_state_matching_data() {
    // Goal: after a real SIGKILL of a process producing idempotently (with checkpoints and
    // producer snapshots running), every acknowledged batch is present at its acknowledged
    // offset, and the recovered producer state matches the recovered data exactly: the last
    // five batches present are duplicates at their offsets, a gap is refused, the next
    // sequence is written at the log end. Method: this test binary runs itself as the child.
    if let Ok(dir) = std::env::var(CHILD_DIR_ENV) {
        return produce_until_killed(Path::new(&dir)).await;
    }
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut child = std::process::Command::new(std::env::current_exe().expect("exe"))
        // The test's name in this binary: its module path without the crate's name.
        .args([
            "--exact",
            "idempotence::sigkill_mid_produce_keeps_producer_state_matching_data",
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env(CHILD_DIR_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    let acked = tokio::task::spawn_blocking(move || {
        let mut acked: Vec<(i32, i32, i64)> = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.expect("line");
            let fields: Vec<&str> = line.split_whitespace().collect();
            if let ["ACK", partition, seq, offset] = fields[..] {
                let parse = |s: &str| s.parse::<i64>().expect("number");
                acked.push((parse(partition) as i32, parse(seq) as i32, parse(offset)));
                if acked.len() >= 600 {
                    break;
                }
            }
        }
        (acked, child)
    });
    let (acked, mut child) = acked.await.expect("reader");
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    assert!(
        acked.len() >= 600,
        "the child acknowledged only {} appends",
        acked.len()
    );
    let (log, _) = open(dir.path());
    for partition in 0..SIGKILL_PARTITIONS {
        let k = key("killed", partition);
        let producer_id = 500 + i64::from(partition);
        let seen = read_all(&log, &k);
        let n = seen.len();
        for &(_, seq, offset) in acked.iter().filter(|a| a.0 == partition) {
            let batch = &seen[(seq / 2) as usize];
            assert_eq!((batch.tag, batch.base_offset), (i64::from(seq), offset));
        }
        for (j, batch) in seen.iter().enumerate().skip(n.saturating_sub(5)) {
            let retry = (producer_id, 0, 2 * j as i32, 2);
            expect_duplicate(&log, &k, retry, batch.base_offset, batch.last_offset).await;
        }
        let next = 2 * n as i32;
        assert_eq!(
            out_of_order(send(&log, &k, producer_id, 0, next + 2, 2).await).0,
            next
        );
        let info = produce(&log, &k, producer_id, 0, next, 2).await;
        assert_eq!(info.base_offset.0, seen[n - 1].last_offset + 1);
    }
}
