//! The journal cleaner: a partition whose data outlives its neighbours' no longer keeps
//! their expired journal files on disk, and moving its bytes loses nothing.
//!
//! What must hold:
//! - after the short-lived data of shared journal files expired, a pass moves the
//!   long-lived bytes (and only those) into a cleaned data file, and the next checkpoint
//!   frees the old files: the data files then hold little more than what is retained;
//! - data that expires with the rest of its file (within the slack) is never moved, so it
//!   is written once;
//! - the moved data reads back byte for byte, before and after a clean reopen and after a
//!   crash, and its extents are merged (the trickle's list shrinks);
//! - appends, reads and checkpoints running during passes see the same data.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::common::*;
use sluice_log::fs::StdFs;
use sluice_log::{LogConfig, LogManager, LogManagerConfig, Offset, PartitionKey};

/// Small journal files, so a few hundred KiB spread over many.
const JOURNAL_FILE_BYTES: u64 = 32 * 1024;

fn cleaner_config(dir: &Path) -> LogManagerConfig {
    let mut config = config(dir);
    config.journal_file_bytes_max = JOURNAL_FILE_BYTES;
    config
}

fn retained_for(retention_ms: i64) -> LogConfig {
    LogConfig {
        segment_bytes: 8 * 1024,
        retention_ms,
        retention_bytes: -1,
        ..LogConfig::default()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as i64
}

/// Bytes of the data files (`.wal` and `.cleaned`) in the journal directory.
fn data_file_bytes(data: &Path) -> u64 {
    let journal = data.join("journal");
    total_len(&files_with(&journal, ".wal")) + total_len(&files_with(&journal, ".cleaned"))
}

/// Writes `rounds` rounds of a busy partition's 1 KiB batches, with a small batch of the
/// trickle partition every fourth round: every journal file holds both.
async fn interleave(log: &LogManager, busy: &PartitionKey, trickle: &PartitionKey, rounds: i64) {
    for tag in 0..rounds {
        append(log, busy, bytes(4, 250, tag)).await;
        if tag % 4 == 0 {
            append(log, trickle, bytes(1, 60, tag)).await;
        }
    }
}

/// Makes what was written settled (a checkpoint moves past its files), lets retention run
/// at `now_ms`, and checkpoints again (which retires the files nothing points into).
fn expire(log: &LogManager, now_ms: i64) {
    log.checkpoint_now().expect("checkpoint");
    log.enforce_retention(now_ms).expect("retention");
    log.checkpoint_now().expect("checkpoint");
}

/// A busy partition whose data expires after 1 s, and one kept forever.
fn busy_and_trickle(log: &LogManager) -> (PartitionKey, PartitionKey) {
    let (busy, trickle) = (key("busy", 0), key("trickle", 0));
    log.create_partition(busy.clone(), retained_for(1_000))
        .expect("create");
    log.create_partition(trickle.clone(), retained_for(-1))
        .expect("create");
    (busy, trickle)
}

fn trickle_tags(log: &LogManager, k: &PartitionKey) -> Vec<i64> {
    read_all(log, k).iter().map(|s| s.tag).collect()
}

#[tokio::test]
async fn a_long_lived_trickle_no_longer_keeps_expired_journal_files() {
    // Goal: a trickle with no time retention shares every journal file with a busy
    // partition whose data expires; once it has, a pass moves the trickle's bytes and the
    // next checkpoint frees the old files, so the data files hold about what is retained.
    // Method: 600 KiB over 32 KiB journal files, retention deletes the busy partition's
    // data, one pass, one checkpoint; read everything back now, after a clean reopen and
    // after a crash (the log dropped without shutdown).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = LogManager::open(cleaner_config(dir.path()), Arc::new(StdFs)).expect("open");
    let (busy, trickle) = busy_and_trickle(&log);
    interleave(&log, &busy, &trickle, 600).await;
    let expected = trickle_tags(&log, &trickle);
    expire(&log, now_ms() + 10_000);
    let pinned = data_file_bytes(dir.path());
    let usage = log.disk_usage();
    assert!(
        pinned > 400 * 1024,
        "the trickle keeps the expired files: {pinned} bytes"
    );
    assert!(
        usage.pinned_files >= 10,
        "pinned files are reported: {usage:?}"
    );
    let trickle_usage = usage
        .partitions
        .iter()
        .find(|p| p.key == trickle)
        .expect("trickle");
    assert!(
        trickle_usage.pinned_bytes > 0 && trickle_usage.file_bytes > 400 * 1024,
        "{trickle_usage:?}"
    );
    let pass = log.clean_journal_now(now_ms() + 10_000).expect("pass");
    log.checkpoint_now().expect("checkpoint");
    let after = data_file_bytes(dir.path());
    let usage = log.disk_usage();
    eprintln!("data files: {pinned} bytes before the pass, {after} after; {pass:?}; {usage:?}");
    assert!(pass.files_cleaned >= 10 && pass.bytes_moved > 0, "{pass:?}");
    assert!(
        pass.bytes_moved < 20 * 1024,
        "only the trickle's bytes move: {pass:?}"
    );
    // Left: the file being written (and the busy partition's active segment in it) and
    // the cleaned file; the old files are gone.
    assert!(
        after < 2 * JOURNAL_FILE_BYTES + 20 * 1024,
        "{after} bytes left"
    );
    assert_eq!(usage.pinned_files, 0, "{usage:?}");
    assert_eq!(trickle_tags(&log, &trickle), expected);
    let trickle_dir = partition_dir(dir.path(), &trickle);
    let records: usize = segment_files(&trickle_dir)
        .iter()
        .map(|p| extent_records(p).len())
        .sum();
    assert!(
        records <= 2 * segment_files(&trickle_dir).len(),
        "moved extents merge: {records} records"
    );
    log.shutdown().expect("shutdown");
    let (log, _) = open(dir.path());
    assert_eq!(
        trickle_tags(&log, &trickle),
        expected,
        "after a clean reopen"
    );
    append(&log, &trickle, bytes(1, 60, 9_999)).await;
    drop(log);
    let (log, _) = open(dir.path());
    let mut with_last = expected.clone();
    with_last.push(9_999);
    assert_eq!(trickle_tags(&log, &trickle), with_last, "after a crash");
}

#[tokio::test]
async fn data_that_expires_with_its_file_is_not_moved() {
    // Goal: one write per byte for data that expires on time. Bytes expiring within the
    // slack of their file's natural end stay where they are, even once the rest of the
    // file is gone; a week-retained partition's bytes in the same files are moved.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = LogManager::open(cleaner_config(dir.path()), Arc::new(StdFs)).expect("open");
    let (busy, soon, week) = (key("busy", 0), key("soon", 0), key("week", 0));
    log.create_partition(busy.clone(), retained_for(1_000))
        .expect("create");
    // 30 s: inside the 60 s slack of the busy data's end.
    log.create_partition(soon.clone(), retained_for(30_000))
        .expect("create");
    log.create_partition(week.clone(), retained_for(7 * 86_400_000))
        .expect("create");
    for tag in 0..400 {
        append(&log, &busy, bytes(4, 250, tag)).await;
        if tag % 4 == 0 {
            append(&log, &soon, bytes(1, 60, tag)).await;
        }
    }
    // Timestamps are the tags (0..400): the busy data has expired by 5 s.
    let now = 5_000;
    expire(&log, now);
    let pass = log.clean_journal_now(now).expect("pass");
    assert_eq!(pass.bytes_moved, 0, "nothing outlives its file: {pass:?}");
    for tag in 0..200 {
        append(&log, &busy, bytes(4, 250, 1_000 + tag)).await;
        if tag % 4 == 0 {
            append(&log, &week, bytes(1, 60, tag)).await;
        }
    }
    let now = 6_000;
    expire(&log, now);
    let soon_bytes = log.size_bytes(&soon).expect("size");
    let pass = log.clean_journal_now(now).expect("pass");
    let week_bytes = log.size_bytes(&week).expect("size");
    assert!(pass.bytes_moved > 0, "the week's bytes move: {pass:?}");
    assert!(
        pass.bytes_moved <= week_bytes,
        "only the week's bytes move ({week_bytes} of them; {soon_bytes} expire soon): {pass:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_during_appends_reads_and_checkpoints_lose_nothing() {
    // Goal: the switch of a segment's extents (the active one, still being appended to)
    // races with the committer's appends, the checkpointer's extent syncs and readers;
    // whatever the interleaving, every acknowledged batch reads back, now and after a
    // crash. Method: an appender and a reader loop on the trickle while the busy
    // partition's data expires and passes and checkpoints run back to back.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) = LogManager::open(cleaner_config(dir.path()), Arc::new(StdFs)).expect("open");
    let (busy, trickle) = busy_and_trickle(&log);
    let stop = Arc::new(AtomicBool::new(false));
    let appender = {
        let (log, busy, trickle, stop) = (
            log.clone(),
            busy.clone(),
            trickle.clone(),
            Arc::clone(&stop),
        );
        tokio::spawn(async move {
            let mut tag = 0;
            while !stop.load(Ordering::Acquire) {
                interleave(&log, &busy, &trickle, 8).await;
                append(&log, &trickle, bytes(1, 60, 100_000 + tag)).await;
                tag += 1;
            }
        })
    };
    let reader = {
        let (log, trickle, stop) = (log.clone(), trickle.clone(), Arc::clone(&stop));
        tokio::task::spawn_blocking(move || {
            let mut reads = 0;
            while !stop.load(Ordering::Acquire) {
                let seen = read_all(&log, &trickle);
                assert!(seen
                    .windows(2)
                    .all(|w| w[0].last_offset + 1 == w[1].base_offset));
                reads += 1;
            }
            reads
        })
    };
    let mut moved = 0;
    for _ in 0..40 {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let log = log.clone();
        moved += tokio::task::spawn_blocking(move || {
            expire(&log, now_ms() + 10_000);
            log.clean_journal_now(now_ms() + 10_000)
                .expect("pass")
                .bytes_moved
        })
        .await
        .expect("pass task");
    }
    stop.store(true, Ordering::Release);
    appender.await.expect("appender");
    assert!(reader.await.expect("reader") > 0);
    assert!(moved > 0, "passes moved something");
    let expected = read_all(&log, &trickle);
    assert!(expected.len() > 100);
    drop(log);
    let (log, _) = open(dir.path());
    assert_eq!(read_all(&log, &trickle), expected, "after a crash");
    let _ = log
        .offsets(&trickle)
        .map(|o| assert!(o.high_watermark > Offset(0)));
}
