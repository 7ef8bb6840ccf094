//! Produce and fetch paths: offsets stamping, reads, visibility limits, validation errors,
//! timestamp lookups, group commit, partition lifecycle.

use std::sync::Arc;

use crate::common::*;
use bytes::Bytes;
use sluice_log::batch::layout::BATCH_LENGTH_AT;
use sluice_log::batch::{self, BatchIter};
use sluice_log::{CommitListener, LogConfig, LogError, Offset, TimestampType};

#[tokio::test]
async fn append_read_round_trip_over_partitions() {
    // Goal: appends to several partitions get consecutive per-partition offsets and read back
    // byte-identical apart from the stamped base offset, with valid CRCs.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, report) = open(dir.path());
    assert!(report.partitions.is_empty());
    let keys: Vec<_> = (0..3).map(|p| key("orders", p)).collect();
    for k in &keys {
        create(&log, k);
    }
    for round in 0..4i64 {
        for (p, k) in keys.iter().enumerate() {
            let info = append(&log, k, bytes(3, 20, round * 10 + p as i64)).await;
            assert_eq!(info.base_offset, Offset(round * 3));
            assert_eq!(info.last_offset, Offset(round * 3 + 2));
            assert_eq!(info.log_append_time_ms, -1);
        }
    }
    for (p, k) in keys.iter().enumerate() {
        let seen = read_all(&log, k);
        let tags: Vec<i64> = seen.iter().map(|s| s.tag).collect();
        assert_eq!(tags, (0..4).map(|r| r * 10 + p as i64).collect::<Vec<_>>());
        let bases: Vec<i64> = seen.iter().map(|s| s.base_offset).collect();
        assert_eq!(bases, vec![0, 3, 6, 9]);
        let offsets = log.offsets(k).expect("offsets");
        assert_eq!(
            (
                offsets.log_start_offset,
                offsets.high_watermark,
                offsets.log_end_offset
            ),
            (Offset(0), Offset(12), Offset(12))
        );
    }
    let raw = log
        .read(&keys[0], Offset(3), 1 << 20, false)
        .expect("read")
        .records;
    let original = batch(3, 20, 10);
    assert_eq!(
        &raw[BATCH_LENGTH_AT..original.len()],
        &original[BATCH_LENGTH_AT..],
        "stored bytes are the produced bytes"
    );
    log.shutdown().expect("shutdown");
}

#[tokio::test]
async fn fetch_inside_batch_returns_whole_batch() {
    // Goal: a fetch offset in the middle of a batch returns that batch from its base offset.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("t", 0);
    create(&log, &k);
    append(&log, &k, bytes(5, 10, 1)).await;
    append(&log, &k, bytes(5, 10, 2)).await;
    let result = log.read(&k, Offset(7), 1 << 20, true).expect("read");
    let first = BatchIter::new(result.records)
        .next()
        .expect("a batch")
        .expect("valid");
    assert_eq!(header(&first).base_offset(), Offset(5));
    assert_eq!(header(&first).base_timestamp(), 2);
}

#[tokio::test]
async fn out_of_range_reports_both_bounds() {
    // Goal: offsets below the log start or above the high watermark fail with both values;
    // the high watermark itself reads as empty.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("t", 0);
    create(&log, &k);
    append(&log, &k, bytes(4, 10, 1)).await;
    append(&log, &k, bytes(4, 10, 2)).await;
    log.delete_records(&k, Offset(4)).expect("delete records");
    for bad in [Offset(2), Offset(9)] {
        match log.read(&k, bad, 1000, true) {
            Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset,
                high_watermark,
            }) => {
                assert_eq!(
                    (offset, log_start_offset, high_watermark),
                    (bad, Offset(4), Offset(8))
                );
            }
            other => panic!("expected OffsetOutOfRange, got {other:?}"),
        }
    }
    let at_end = log.read(&k, Offset(8), 1000, true).expect("read at hw");
    assert!(at_end.records.is_empty());
    assert_eq!(at_end.offsets.high_watermark, Offset(8));
}

#[tokio::test]
async fn max_bytes_and_min_one_batch() {
    // Goal: reads return whole batches within max_bytes; a first batch larger than max_bytes
    // comes back alone with min_one_batch and not at all without it.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("t", 0);
    create(&log, &k);
    let one = batch(2, 100, 0).len();
    for tag in 0..5 {
        append(&log, &k, bytes(2, 100, tag)).await;
    }
    let two = log
        .read(&k, Offset(0), (2 * one + one / 2) as u32, false)
        .expect("read");
    assert_eq!(two.records.len(), 2 * one);
    let forced = log.read(&k, Offset(2), 10, true).expect("read");
    assert_eq!(forced.records.len(), one);
    assert_eq!(header(&forced.records).base_offset(), Offset(2));
    let none = log.read(&k, Offset(2), 10, false).expect("read");
    assert!(none.records.is_empty());
    let all = log.read(&k, Offset(0), 1 << 20, false).expect("read");
    assert_eq!(all.records.len(), 5 * one);
}

#[tokio::test]
async fn bad_batches_are_rejected() {
    // Goal: corrupt, oversized and non-consecutive batches are refused with the matching
    // error and nothing is appended.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("t", 0);
    let config = LogConfig {
        max_message_bytes: 500,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");

    let mut corrupt = batch(2, 10, 0);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    let err = log.append(&k, Bytes::from(corrupt)).await.unwrap_err();
    assert!(matches!(err, LogError::CorruptBatch(_)), "{err:?}");

    let err = log.append(&k, bytes(10, 100, 0)).await.unwrap_err();
    assert!(
        matches!(err, LogError::RecordTooLarge { max: 500, .. }),
        "{err:?}"
    );

    let mut gappy = batch(3, 10, 0);
    let mut header = sluice_log::batch::BatchHeaderMut::new(&mut gappy).unwrap();
    header.set_last_offset_delta(5);
    header.update_crc();
    let err = log.append(&k, Bytes::from(gappy)).await.unwrap_err();
    assert!(matches!(err, LogError::InvalidRecord(_)), "{err:?}");

    let mut torn = batch(2, 10, 0);
    torn.truncate(torn.len() - 3);
    let err = log.append(&k, Bytes::from(torn)).await.unwrap_err();
    assert!(matches!(err, LogError::CorruptBatch(_)), "{err:?}");

    let err = log.append(&k, Bytes::new()).await.unwrap_err();
    assert!(matches!(err, LogError::CorruptBatch(_)), "{err:?}");
    assert_eq!(log.offsets(&k).expect("offsets").log_end_offset, Offset(0));
}

#[tokio::test]
async fn several_batches_in_one_request() {
    // Goal: a request holding two batches gets consecutive offsets for both.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("t", 0);
    create(&log, &k);
    let mut two = batch(2, 5, 1);
    two.extend_from_slice(&batch(3, 5, 2));
    let info = append(&log, &k, Bytes::from(two)).await;
    assert_eq!((info.base_offset, info.last_offset), (Offset(0), Offset(4)));
    let seen = read_all(&log, &k);
    assert_eq!(
        seen.iter()
            .map(|s| (s.base_offset, s.tag))
            .collect::<Vec<_>>(),
        vec![(0, 1), (2, 2)]
    );
}

#[tokio::test]
async fn log_append_time_sets_timestamp_and_crc() {
    // Goal: a LogAppendTime partition stores the append time as max timestamp, sets the
    // attribute bit, and keeps a valid CRC; AppendInfo reports the same time.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("t", 0);
    let config = LogConfig {
        timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    let info = append(&log, &k, bytes(3, 10, 5)).await;
    assert!(info.log_append_time_ms > 1_600_000_000_000);
    let records = log
        .read(&k, Offset(0), 1 << 20, true)
        .expect("read")
        .records;
    let header = batch::validate(&records, u32::MAX).expect("valid CRC");
    assert!(header.is_log_append_time());
    assert_eq!(header.max_timestamp(), info.log_append_time_ms);
    assert_eq!(header.base_timestamp(), 5);
}

#[tokio::test]
async fn timestamp_lookups() {
    // Goal: the time lookup finds the first batch whose max timestamp reaches the target,
    // and the max-timestamp lookup finds the batch with the largest one.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("t", 0);
    let config = LogConfig {
        index_interval_bytes: 200,
        segment_bytes: 2000,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    let tags = [100, 300, 200, 900, 400, 500, 600, 700, 800, 650];
    for tag in tags {
        append(&log, &k, bytes(2, 100, tag)).await;
    }
    let found = log
        .find_batch_by_timestamp(&k, 250)
        .expect("lookup")
        .expect("some");
    assert_eq!(header(&found).max_timestamp(), 300);
    let found = log
        .find_batch_by_timestamp(&k, 850)
        .expect("lookup")
        .expect("some");
    assert_eq!(header(&found).max_timestamp(), 900);
    assert!(log
        .find_batch_by_timestamp(&k, 901)
        .expect("lookup")
        .is_none());
    let max = log
        .find_max_timestamp_batch(&k)
        .expect("lookup")
        .expect("some");
    assert_eq!(
        (header(&max).max_timestamp(), header(&max).base_offset()),
        (900, Offset(6))
    );
    log.shutdown().expect("shutdown");
    let (log, _) = open(dir.path());
    let max = log
        .find_max_timestamp_batch(&k)
        .expect("lookup")
        .expect("some");
    assert_eq!(
        header(&max).max_timestamp(),
        900,
        "survives reopen via the index files"
    );
    let found = log
        .find_batch_by_timestamp(&k, 610)
        .expect("lookup")
        .expect("some");
    assert_eq!(
        header(&found).max_timestamp(),
        900,
        "offset order: 900 comes before 650"
    );
    let found = log
        .find_batch_by_timestamp(&k, 150)
        .expect("lookup")
        .expect("some");
    assert_eq!(header(&found).max_timestamp(), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commit_uses_fewer_syncs_than_appends() {
    // Goal: many appends queued at once across many partitions are made durable by far fewer
    // journal syncs than appends (one sync per round, not per partition or per append).
    // Every sync takes 2 ms more, as on a slow disk, so the test does not depend on how
    // fast this machine's disk is.
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = sluice_log::fs::FaultyFs::new();
    fs.set_sync_delay(std::time::Duration::from_millis(2));
    let (log, _) = open_with(dir.path(), Arc::new(fs));
    let keys: Vec<_> = (0..32).map(|p| key("gc", p)).collect();
    for k in &keys {
        create(&log, k);
    }
    let before = log.stats();
    let mut waiters = Vec::new();
    for i in 0..8 {
        for k in &keys {
            waiters.push(log.append(k, bytes(4, 200, i)).await.expect("queued"));
        }
    }
    let appends = waiters.len() as u64;
    for waiter in waiters {
        waiter.wait().await.expect("durable");
    }
    let stats = log.stats();
    let syncs = stats.journal_syncs - before.journal_syncs;
    assert!(
        syncs < appends / 4,
        "{syncs} journal syncs for {appends} appends"
    );
    assert_eq!(stats.batches_appended - before.batches_appended, appends);
    for k in &keys {
        assert_eq!(log.offsets(k).expect("offsets").high_watermark, Offset(32));
    }
}

#[tokio::test]
async fn partition_lifecycle() {
    // Goal: duplicates and unknown keys are refused, a deleted partition refuses appends and
    // leaves no directory, and a re-created one starts empty.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("life", 0);
    create(&log, &k);
    assert!(matches!(
        log.create_partition(k.clone(), LogConfig::default()),
        Err(LogError::PartitionExists)
    ));
    let mut wrong_id = k.clone();
    wrong_id.topic_id.0[0] ^= 1;
    assert!(matches!(
        log.offsets(&wrong_id),
        Err(LogError::UnknownPartition)
    ));
    assert!(matches!(
        log.create_partition(key("../evil", 0), LogConfig::default()),
        Err(LogError::InvalidRecord(_))
    ));
    append(&log, &k, bytes(1, 1, 1)).await;
    log.delete_partition(&k).expect("delete");
    assert!(!partition_dir(dir.path(), &k).exists());
    assert!(matches!(
        log.append(&k, bytes(1, 1, 1)).await,
        Err(LogError::UnknownPartition)
    ));
    create(&log, &k);
    assert_eq!(log.offsets(&k).expect("offsets").log_end_offset, Offset(0));
    let listener = CommitListener::default();
    log.listen_commits(&k, &listener).expect("listen");
    append(&log, &k, bytes(1, 1, 1)).await;
    tokio::time::timeout(std::time::Duration::from_secs(5), listener.wait())
        .await
        .expect("a commit wakes its partition's listener");
}

#[tokio::test]
async fn commit_wakes_only_its_own_partition() {
    // Goal: long polls wait per partition: a commit to one partition wakes its waiters and
    // not those of another partition (nor bumps the global counter, kept for deletions).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let (a, b) = (key("t", 0), key("t", 1));
    create(&log, &a);
    create(&log, &b);
    let global = log.subscribe_commits();
    let (la, lb) = (CommitListener::default(), CommitListener::default());
    log.listen_commits(&a, &la).expect("a");
    log.listen_commits(&b, &lb).expect("b");
    // Registering twice keeps one entry: one commit leaves one wake-up, not two.
    log.listen_commits(&a, &la).expect("a again");
    append(&log, &a, bytes(1, 1, 1)).await;
    tokio::time::timeout(std::time::Duration::from_secs(5), la.wait())
        .await
        .expect("a's commit wakes a");
    let quiet = tokio::time::timeout(std::time::Duration::from_millis(200), lb.wait()).await;
    assert!(quiet.is_err(), "a's commit woke b's listener");
    let once = tokio::time::timeout(std::time::Duration::from_millis(100), la.wait()).await;
    assert!(once.is_err(), "a listener registered twice was woken twice");
    // A withdrawn listener is not woken: its poll is over.
    log.listen_commits(&b, &lb).expect("b again");
    log.unlisten_commits(&b, &lb);
    append(&log, &b, bytes(1, 1, 1)).await;
    let gone = tokio::time::timeout(std::time::Duration::from_millis(200), lb.wait()).await;
    assert!(gone.is_err(), "a withdrawn listener was woken");
    assert!(!global.has_changed().expect("sender alive"));
    log.delete_partition(&b).expect("delete");
    assert!(global.has_changed().expect("sender alive"));
}

#[tokio::test]
async fn shutdown_refuses_new_appends() {
    // Goal: after shutdown appends fail with ShuttingDown and a second shutdown is a no-op.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("t", 0);
    create(&log, &k);
    let waiter = log.append(&k, bytes(1, 1, 1)).await.expect("queued");
    log.shutdown().expect("shutdown");
    waiter
        .wait()
        .await
        .expect("queued append completed by shutdown");
    assert!(matches!(
        log.append(&k, bytes(1, 1, 1)).await,
        Err(LogError::ShuttingDown)
    ));
    log.shutdown().expect("second shutdown");
    let clone = log.clone();
    drop(log);
    drop(clone);
    let _ = Arc::new(());
}
