//! Segment rolls (size, time) and retention (time, bytes, DeleteRecords) moving the log
//! start offset.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common::*;
use sluice_log::{LogConfig, LogError, Offset};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        retention_ms: -1,
        retention_bytes: -1,
        ..LogConfig::default()
    }
}

#[tokio::test]
async fn segments_roll_by_size() {
    // Goal: the active segment rolls before a batch would push it past segment.bytes; every
    // segment (its `.extents` file) is named by its base offset, its persisted extents
    // cover exactly its batches, and reads cross segment boundaries.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("roll", 0);
    log.create_partition(k.clone(), small_segments())
        .expect("create");
    let size = batch(2, 100, 0).len() as u64;
    for tag in 0..10 {
        append(&log, &k, bytes(2, 100, tag)).await;
    }
    log.checkpoint_now()
        .expect("checkpoint persists the extents");
    let logs = segment_files(&partition_dir(dir.path(), &k));
    let per_segment = 1000 / size;
    assert_eq!(logs.len() as u64, 10_u64.div_ceil(per_segment));
    for path in &logs[..logs.len() - 1] {
        assert_eq!(segment_len(path), per_segment * size, "{path:?}");
    }
    let last = logs.last().expect("active segment");
    assert_eq!(segment_len(last), (10 % per_segment) * size);
    let second = logs[1]
        .file_name()
        .expect("name")
        .to_string_lossy()
        .to_string();
    assert_eq!(second, format!("{:020}.extents", per_segment * 2));
    assert_eq!(read_all(&log, &k).len(), 10);
}

#[tokio::test]
async fn segments_roll_by_time() {
    // Goal: a non-empty active segment older than segment.ms rolls on the next append, and a
    // retention pass rolls it too once it is old enough.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("timeroll", 0);
    let config = LogConfig {
        segment_ms: 100,
        ..small_segments()
    };
    log.create_partition(k.clone(), config).expect("create");
    let pdir = partition_dir(dir.path(), &k);
    append(&log, &k, bytes(1, 10, 0)).await;
    assert_eq!(segment_files(&pdir).len(), 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    append(&log, &k, bytes(1, 10, 1)).await;
    assert_eq!(segment_files(&pdir).len(), 2);
    log.enforce_retention(now_ms() + 1_000)
        .expect("retention pass");
    assert_eq!(segment_files(&pdir).len(), 3);
    assert_eq!(read_all(&log, &k).len(), 2);
}

#[tokio::test]
async fn retention_by_time_moves_log_start() {
    // Goal: segments whose newest timestamp is older than retention.ms are deleted, oldest
    // first, and the log start offset moves to the first remaining segment.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("rtime", 0);
    log.create_partition(k.clone(), small_segments())
        .expect("create");
    let base_ts = 1_000_000;
    for i in 0..12 {
        append(&log, &k, bytes(2, 100, base_ts + i * 1000)).await;
    }
    let pdir = partition_dir(dir.path(), &k);
    let before = segment_files(&pdir).len();
    let config = LogConfig {
        retention_ms: 5_000,
        ..small_segments()
    };
    log.set_config(&k, config).expect("config");
    log.enforce_retention(base_ts + 10_500).expect("retention");
    let start = log.offsets(&k).expect("offsets").log_start_offset;
    let seen = read_all(&log, &k);
    assert_eq!(seen[0].base_offset, start.0);
    assert!(
        seen.iter().all(|s| s.tag >= base_ts + 5_000 - 3_000),
        "{seen:?}"
    );
    assert!(segment_files(&pdir).len() < before);
    assert!(matches!(
        log.read(&k, Offset(0), 100, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

#[tokio::test]
async fn retention_rolls_and_deletes_expired_active_segment() {
    // Goal: when everything has expired, the active segment is rolled so that it can go too;
    // the log ends up empty at its old log end.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("rall", 0);
    log.create_partition(
        k.clone(),
        LogConfig {
            retention_ms: 1000,
            ..small_segments()
        },
    )
    .expect("create");
    for i in 0..3 {
        append(&log, &k, bytes(1, 10, 100 + i)).await;
    }
    log.enforce_retention(1_000_000).expect("retention");
    let offsets = log.offsets(&k).expect("offsets");
    assert_eq!(
        (offsets.log_start_offset, offsets.high_watermark),
        (Offset(3), Offset(3))
    );
    assert!(read_all(&log, &k).is_empty());
    assert_eq!(
        append(&log, &k, bytes(1, 10, 5)).await.base_offset,
        Offset(3)
    );
}

#[tokio::test]
async fn retention_by_bytes_keeps_the_limit() {
    // Goal: the oldest segments go while the partition stays at or above retention.bytes
    // without them; the active segment is never deleted.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("rbytes", 0);
    let config = LogConfig {
        retention_bytes: 2500,
        ..small_segments()
    };
    log.create_partition(k.clone(), config).expect("create");
    for tag in 0..20 {
        append(&log, &k, bytes(2, 100, tag)).await;
    }
    let pdir = partition_dir(dir.path(), &k);
    let total = |files: &[std::path::PathBuf]| files.iter().map(|f| segment_len(f)).sum::<u64>();
    log.enforce_retention(now_ms()).expect("retention");
    // The segment sizes are read from the persisted extents, which a checkpoint writes.
    log.checkpoint_now().expect("checkpoint");
    let logs = segment_files(&pdir);
    let remaining = total(&logs);
    assert!(remaining >= 2500, "{remaining}");
    let oldest = segment_len(&logs[0]);
    assert!(
        remaining - oldest < 2500,
        "one more segment could have gone"
    );
    let start = log.offsets(&k).expect("offsets").log_start_offset;
    assert!(start > Offset(0));
    assert_eq!(read_all(&log, &k)[0].base_offset, start.0);
}

#[tokio::test]
async fn delete_records_removes_segments_below() {
    // Goal: DeleteRecords deletes segments wholly below the new log start and keeps the one
    // that holds it.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("drseg", 0);
    log.create_partition(k.clone(), small_segments())
        .expect("create");
    for tag in 0..10 {
        append(&log, &k, bytes(2, 100, tag)).await;
    }
    let pdir = partition_dir(dir.path(), &k);
    let before = segment_files(&pdir).len();
    assert_eq!(
        log.delete_records(&k, Offset(9)).expect("delete"),
        Offset(9)
    );
    let logs = segment_files(&pdir);
    assert!(logs.len() < before);
    let first = read_all(&log, &k)[0].clone();
    assert!(first.base_offset <= 9 && 9 <= first.last_offset);
    assert_eq!(
        log.delete_records(&k, Offset(3)).expect("no-op"),
        Offset(9),
        "never moves back"
    );
}

#[tokio::test]
async fn deleting_a_partition_with_pending_checkpoint_work() {
    // Goal: a partition deleted while the checkpointer still owes it index files and syncs
    // (rolled segments, new files) does not make the next checkpoint fail or poison the log.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = open(dir.path());
    let k = key("doomed", 0);
    log.create_partition(k.clone(), small_segments())
        .expect("create");
    for tag in 0..10 {
        append(&log, &k, bytes(2, 100, tag)).await;
    }
    log.delete_partition(&k).expect("delete");
    log.checkpoint_now().expect("checkpoint");
    log.enforce_retention(now_ms()).expect("retention");
    assert!(!log.is_poisoned());
    assert!(!partition_dir(dir.path(), &k).exists());
    log.shutdown().expect("shutdown");
    let (_, report) = open(dir.path());
    assert!(report.partitions.is_empty());
}
