//! Recovery: every acknowledged append survives an unclean stop exactly once at its offset;
//! torn and corrupt tails (of the journal, of a segment's extent list) are cut; the journal
//! refills the extents a checkpoint had not persisted yet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use parking_lot::Mutex;
use sluice_log::fs::StdFs;
use sluice_log::{LogConfig, LogManager, Offset, PartitionKey};

/// Appends `count` batches tagged `first_tag..`, each of `records` records; returns the tags.
async fn append_tags(
    log: &LogManager,
    k: &PartitionKey,
    first_tag: i64,
    count: i64,
    records: i32,
) -> Vec<i64> {
    for tag in first_tag..first_tag + count {
        append(log, k, bytes(records, 50, tag)).await;
    }
    (first_tag..first_tag + count).collect()
}

fn tags(log: &LogManager, k: &PartitionKey) -> Vec<i64> {
    let seen = read_all(log, k);
    for pair in seen.windows(2) {
        assert_eq!(
            pair[0].last_offset + 1,
            pair[1].base_offset,
            "offsets are contiguous"
        );
    }
    seen.iter().map(|s| s.tag).collect()
}

/// A partition's segments: its `.extents` files, in base-offset order.
fn segment_logs(data: &Path, k: &PartitionKey) -> Vec<PathBuf> {
    segment_files(&partition_dir(data, k))
}

fn checkpoint_file(data: &Path) -> PathBuf {
    data.join("journal").join("checkpoint")
}

/// Puts back a checkpoint file saved earlier: the disk as a crash would leave it when a later
/// checkpoint persisted extents (step 4) but died before replacing the checkpoint file.
fn restore_checkpoint(data: &Path, saved: &[u8]) {
    std::fs::write(checkpoint_file(data), saved).expect("restore checkpoint");
}

#[tokio::test]
async fn empty_dir_opens_in_milliseconds() {
    // Goal: opening (and shutting down) an empty data dir is fast and leaves only the
    // journal directory and the lock file; a second open of it is fast too.
    let dir = tempfile::tempdir().expect("tempdir");
    for _ in 0..2 {
        let started = Instant::now();
        let (log, report) = open(dir.path());
        let took = started.elapsed();
        eprintln!("open of an empty data dir took {took:?}");
        assert!(took < Duration::from_millis(500), "open took {took:?}");
        assert!(report.partitions.is_empty());
        log.shutdown().expect("shutdown");
    }
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("ls")
        .map(|e| e.expect("e").file_name())
        .collect();
    names.sort();
    assert_eq!(names, [".lock", "journal"].map(std::ffi::OsString::from));
}

#[tokio::test]
async fn clean_shutdown_reopen_trusts_segments() {
    // Goal: after a clean shutdown, reopening replays nothing, cuts nothing, CRC-checks no
    // segment, and reads back the same data.
    let dir = tempfile::tempdir().expect("tempdir");
    let k = key("clean", 0);
    let (log, _) = open(dir.path());
    create(&log, &k);
    let written = append_tags(&log, &k, 0, 20, 3).await;
    log.shutdown().expect("shutdown");
    let (log, report) = open(dir.path());
    assert_eq!(
        (report.journal_entries_replayed, report.bytes_truncated),
        (0, 0)
    );
    assert!(
        !report.actions.iter().any(|a| a.contains("CRC-checked")),
        "{:?}",
        report.actions
    );
    assert_eq!(report.partitions.len(), 1);
    assert_eq!(report.partitions[0].1.high_watermark, Offset(60));
    assert_eq!(tags(&log, &k), written);
}

#[tokio::test]
async fn drop_without_shutdown_keeps_acked_appends_once() {
    // Goal: dropping the log without shutdown (an unclean stop) and reopening keeps every
    // acknowledged append exactly once at its offset, across partitions, and the log goes on
    // from the right offset.
    let dir = tempfile::tempdir().expect("tempdir");
    let keys: Vec<_> = (0..3).map(|p| key("unclean", p)).collect();
    let (log, _) = open(dir.path());
    let mut expected: BTreeMap<i32, Vec<i64>> = BTreeMap::new();
    for k in &keys {
        create(&log, k);
    }
    for round in 0..10 {
        for k in &keys {
            let tag = round * 100 + i64::from(k.partition);
            append(&log, k, bytes(2, 40, tag)).await;
            expected.entry(k.partition).or_default().push(tag);
        }
        if round == 4 {
            log.checkpoint_now().expect("checkpoint");
        }
    }
    drop(log);
    let (log, report) = open(dir.path());
    assert_eq!(report.partitions.len(), 3);
    for k in &keys {
        assert_eq!(tags(&log, k), expected[&k.partition]);
        let info = append(&log, k, bytes(1, 1, 7)).await;
        assert_eq!(info.base_offset, Offset(20));
    }
}

#[tokio::test]
async fn journal_refills_segment_data_lost_from_page_cache() {
    // Goal: the extents of batches written after the last checkpoint are not on disk (only a
    // checkpoint persists them; anything a crash could leave past them is cut back here to
    // the checkpointed records); reopening replays those batches from the journal, exactly
    // once.
    let dir = tempfile::tempdir().expect("tempdir");
    let k = key("lost", 0);
    let (log, _) = open(dir.path());
    create(&log, &k);
    let mut written = append_tags(&log, &k, 0, 5, 2).await;
    log.checkpoint_now().expect("checkpoint");
    let checkpointed: Vec<(PathBuf, u64)> = segment_logs(dir.path(), &k)
        .into_iter()
        .map(|p| (p.clone(), std::fs::metadata(&p).expect("meta").len()))
        .collect();
    assert_eq!(checkpointed.len(), 1);
    assert_eq!(
        checkpointed[0].1,
        5 * EXTENT_RECORD_BYTES,
        "one record per batch"
    );
    written.extend(append_tags(&log, &k, 5, 7, 2).await);
    drop(log);
    for (path, len) in &checkpointed {
        std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open")
            .set_len(*len)
            .expect("cut");
    }
    let (log, report) = open(dir.path());
    assert_eq!(report.journal_entries_replayed, 7);
    assert_eq!(tags(&log, &k), written);
}

#[tokio::test]
async fn torn_journal_tail_is_cut() {
    // Goal: a journal whose last entry is torn (and whose segment has no persisted extents:
    // no checkpoint ran) is cut at the last whole entry; everything before it is back, the
    // torn batch is not, and new appends continue right after.
    let dir = tempfile::tempdir().expect("tempdir");
    let k = key("torn", 0);
    let (log, _) = open(dir.path());
    create(&log, &k);
    let written = append_tags(&log, &k, 0, 6, 2).await;
    drop(log);
    let journal = journal_files(dir.path()).pop().expect("journal file");
    // Cut 13 bytes off the last entry (rounds end in padding, which is cut too).
    let &(last_at, last_len, _) = journal_entries(&journal).last().expect("entries");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&journal)
        .expect("open");
    file.set_len(last_at + last_len - 13).expect("cut");
    let extents = &segment_logs(dir.path(), &k)[0];
    assert_eq!(std::fs::metadata(extents).expect("meta").len(), 0);
    let (log, report) = open(dir.path());
    assert!(report.bytes_truncated > 0);
    assert!(
        report
            .actions
            .iter()
            .any(|a| a.contains("journal file") && a.contains("Torn")),
        "{:?}",
        report.actions
    );
    assert_eq!(report.journal_entries_replayed, 5);
    assert_eq!(tags(&log, &k), written[..5]);
    assert_eq!(
        append(&log, &k, bytes(1, 1, 99)).await.base_offset,
        Offset(10)
    );
}

#[tokio::test]
async fn torn_segment_tail_is_cut_and_refilled() {
    // Goal: a segment whose extent list has a torn last record, persisted after the
    // checkpoint in force (a crash before the next checkpoint file was written), is cut back
    // to whole records, and the batch it lost comes back from the journal, once.
    let dir = tempfile::tempdir().expect("tempdir");
    let k = key("tornseg", 0);
    let (log, _) = open(dir.path());
    create(&log, &k);
    let mut written = append_tags(&log, &k, 0, 3, 2).await;
    log.checkpoint_now().expect("checkpoint");
    let saved = std::fs::read(checkpoint_file(dir.path())).expect("checkpoint");
    written.extend(append_tags(&log, &k, 3, 3, 2).await);
    log.checkpoint_now()
        .expect("second checkpoint persists 3 more records");
    drop(log);
    restore_checkpoint(dir.path(), &saved);
    let extents = &segment_logs(dir.path(), &k)[0];
    assert_eq!(extent_records(extents).len(), 6);
    truncate_by(extents, 7);
    let (log, report) = open(dir.path());
    assert!(
        report
            .actions
            .iter()
            .any(|a| a.contains("extent list of segment 0 ends early")),
        "{:?}",
        report.actions
    );
    assert_eq!(
        std::fs::metadata(extents).expect("meta").len() % EXTENT_RECORD_BYTES,
        0,
        "the torn record is cut off"
    );
    assert_eq!(report.journal_entries_replayed, 1);
    assert_eq!(tags(&log, &k), written);
}

#[tokio::test]
async fn flipped_bit_in_segment_after_checkpoint_truncates_there() {
    // Goal: a CRC failure in a segment's extent record persisted after the checkpoint in
    // force (a later checkpoint persisted it, then crashed before its checkpoint file) cuts
    // the segment's extent list at that record and deletes the later segments; the journal
    // then restores every batch from there, each once.
    let dir = tempfile::tempdir().expect("tempdir");
    let k = key("flip", 0);
    let (log, _) = open(dir.path());
    let config = LogConfig {
        segment_bytes: 1200,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    let mut written = append_tags(&log, &k, 0, 4, 2).await;
    log.checkpoint_now().expect("checkpoint");
    let saved = std::fs::read(checkpoint_file(dir.path())).expect("checkpoint");
    written.extend(append_tags(&log, &k, 4, 10, 2).await);
    log.checkpoint_now().expect("second checkpoint");
    drop(log);
    restore_checkpoint(dir.path(), &saved);
    let logs = segment_logs(dir.path(), &k);
    assert!(logs.len() >= 3, "{logs:?}");
    let victim = &logs[logs.len() - 2];
    assert!(
        segment_base(victim) > 4 * 2,
        "written after the first checkpoint"
    );
    flip_bit(victim, EXTENT_RECORD_BYTES + 20);
    let (log, report) = open(dir.path());
    assert!(
        report
            .actions
            .iter()
            .any(|a| a.contains("extent record fails its CRC")),
        "{:?}",
        report.actions
    );
    assert!(
        report.actions.iter().any(|a| a.contains("deleted segment")),
        "{:?}",
        report.actions
    );
    assert!(report.journal_entries_replayed > 0);
    assert_eq!(tags(&log, &k), written);
}

#[tokio::test]
async fn flipped_bit_in_journal_ends_replay() {
    // Goal: a corrupt journal entry after the checkpoint ends replay there and is cut; the
    // entries before it are replayed and the batches the segment's persisted extents already
    // hold stay.
    let dir = tempfile::tempdir().expect("tempdir");
    let k = key("jflip", 0);
    let (log, _) = open(dir.path());
    create(&log, &k);
    let mut written = append_tags(&log, &k, 0, 2, 2).await;
    log.checkpoint_now().expect("checkpoint");
    written.extend(append_tags(&log, &k, 2, 4, 2).await);
    drop(log);
    let journal = journal_files(dir.path()).pop().expect("journal file");
    let entries = journal_entries(&journal);
    assert_eq!(entries.len(), 6);
    flip_bit(&journal, entries[3].0 + 40);
    let file_len = std::fs::metadata(&journal).expect("meta").len();
    let segment = &segment_logs(dir.path(), &k)[0];
    assert_eq!(
        extent_records(segment).len(),
        2,
        "the checkpoint persisted two"
    );
    let (log, report) = open(dir.path());
    assert!(
        report.actions.iter().any(|a| a.contains("Corrupt")),
        "{:?}",
        report.actions
    );
    assert_eq!(report.bytes_truncated, file_len - entries[3].0);
    assert_eq!(report.journal_entries_replayed, 1);
    assert_eq!(tags(&log, &k), written[..3]);
}

#[tokio::test]
async fn index_files_are_rebuilt_when_missing() {
    // Goal: deleting the .index files of sealed segments after a clean shutdown makes
    // recovery rebuild them by scanning; lookups inside those segments still work.
    let dir = tempfile::tempdir().expect("tempdir");
    let k = key("idx", 0);
    let (log, _) = open(dir.path());
    let config = LogConfig {
        segment_bytes: 2000,
        index_interval_bytes: 100,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    let written = append_tags(&log, &k, 0, 30, 2).await;
    log.shutdown().expect("shutdown");
    let pdir = partition_dir(dir.path(), &k);
    let indexes = files_with(&pdir, ".index");
    assert!(indexes.len() >= 3);
    for index in &indexes {
        std::fs::remove_file(index).expect("rm");
    }
    let (log, report) = open(dir.path());
    assert!(
        report.actions.iter().any(|a| a.contains("rebuilt index")),
        "{:?}",
        report.actions
    );
    assert_eq!(
        files_with(&pdir, ".index").len(),
        indexes.len() - 1,
        "sealed segments get their files back"
    );
    assert_eq!(tags(&log, &k), written);
    for offset in [0, 17, 33, 58] {
        let records = log.read(&k, Offset(offset), 1, true).expect("read").records;
        let h = header(&records);
        assert!(h.base_offset().0 <= offset && offset <= h.last_offset().0);
    }
}

#[tokio::test]
async fn delete_records_is_durable_across_unclean_reopen() {
    // Goal: the log start offset set by DeleteRecords survives a reopen without shutdown,
    // and DeleteRecords past the high watermark is refused.
    let dir = tempfile::tempdir().expect("tempdir");
    let k = key("dr", 0);
    let (log, _) = open(dir.path());
    create(&log, &k);
    append_tags(&log, &k, 0, 5, 2).await;
    assert_eq!(
        log.delete_records(&k, Offset(5)).expect("delete"),
        Offset(5)
    );
    assert!(log.delete_records(&k, Offset(11)).is_err());
    drop(log);
    let (log, _) = open(dir.path());
    assert_eq!(
        log.offsets(&k).expect("offsets").log_start_offset,
        Offset(5)
    );
    assert_eq!(
        read_all(&log, &k)[0].base_offset,
        4,
        "the batch holding offset 5 is still readable"
    );
    assert_eq!(
        log.delete_records(&k, Offset(-1)).expect("delete to hw"),
        Offset(10)
    );
}

#[tokio::test]
async fn deleted_topic_entries_are_not_replayed() {
    // Goal: journal entries of a deleted topic are skipped on replay even when a topic of the
    // same name and a new id exists.
    let dir = tempfile::tempdir().expect("tempdir");
    let old = key("gone", 0);
    let (log, _) = open(dir.path());
    create(&log, &old);
    append_tags(&log, &old, 0, 3, 1).await;
    log.delete_partition(&old).expect("delete");
    let mut new = old.clone();
    new.topic_id.0[3] ^= 0xff;
    create(&log, &new);
    append_tags(&log, &new, 50, 2, 1).await;
    drop(log);
    // No checkpoint ran: the new partition's data comes back only by replay.
    assert_eq!(segment_len(&segment_logs(dir.path(), &new)[0]), 0);
    let (log, report) = open(dir.path());
    assert_eq!(report.journal_entries_replayed, 2);
    assert_eq!(tags(&log, &new), vec![50, 51]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_of_running_log_keeps_acked_appends() {
    // Goal: a copy of the data dir taken while appends and checkpoints run (what a crash
    // would leave, minus the page cache) recovers every append acknowledged before the copy
    // began, exactly once at its acknowledged offset.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.checkpoint_bytes = 32 * 1024;
    config.checkpoint_interval_ms = 5;
    config.journal_file_bytes_max = 16 * 1024;
    let (log, _) = LogManager::open(config, Arc::new(StdFs)).expect("open");
    let keys: Vec<_> = (0..4).map(|p| key("snap", p)).collect();
    for k in &keys {
        let config = LogConfig {
            segment_bytes: 4096,
            ..LogConfig::default()
        };
        log.create_partition(k.clone(), config).expect("create");
    }
    let acked: Arc<Mutex<Vec<(i32, i64, Offset)>>> = Arc::default();
    let mut tasks = Vec::new();
    for k in keys.clone() {
        let (log, acked) = (log.clone(), Arc::clone(&acked));
        tasks.push(tokio::spawn(async move {
            for i in 0..150i64 {
                let tag = i64::from(k.partition) * 1000 + i;
                let info = append(&log, &k, bytes(2, 60, tag)).await;
                acked.lock().push((k.partition, tag, info.base_offset));
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    let before_copy = acked.lock().clone();
    let copy_root = tempfile::tempdir().expect("tempdir");
    let copy = copy_root.path().join("data");
    tokio::task::spawn_blocking({
        let (from, to) = (dir.path().to_owned(), copy.clone());
        move || copy_dir(&from, &to)
    })
    .await
    .expect("copy");
    for task in tasks {
        task.await.expect("appender");
    }
    drop(log);
    let (copied, _) = open(&copy);
    for (partition, tag, offset) in before_copy {
        let k = &keys[partition as usize];
        let seen = read_all(&copied, k);
        let found: Vec<_> = seen.iter().filter(|s| s.tag == tag).collect();
        assert_eq!(found.len(), 1, "tag {tag} of partition {partition}");
        assert_eq!(found[0].base_offset, offset.0);
    }
}

#[tokio::test]
async fn replay_crosses_recycled_journal_files() {
    // Goal: with small journal files that checkpoints retire once DeleteRecords removed the
    // segments pointing into them, and that the writer reuses (stale bytes after each file's
    // live entries), replay still walks every file via its end marker and restores every
    // batch whose extents were not persisted since the last checkpoint.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.journal_file_bytes_max = 4096;
    let (log, _) = LogManager::open(config.clone(), Arc::new(StdFs)).expect("open");
    let k = key("recycle", 0);
    log.create_partition(
        k.clone(),
        LogConfig {
            segment_bytes: 2048,
            ..LogConfig::default()
        },
    )
    .expect("create");
    append_tags(&log, &k, 0, 30, 4).await;
    log.delete_records(&k, Offset(120)).expect("delete records");
    log.checkpoint_now().expect("checkpoint");
    let free = files_with(&dir.path().join("journal"), ".free");
    assert!(!free.is_empty(), "retired journal files are kept for reuse");
    let written = append_tags(&log, &k, 30, 30, 4).await;
    assert!(
        files_with(&dir.path().join("journal"), ".free").len() < free.len(),
        "the writer reused recycled files"
    );
    drop(log);
    let (log, report) = LogManager::open(config, Arc::new(StdFs)).expect("reopen");
    assert_eq!(report.journal_entries_replayed, 30, "{:?}", report.actions);
    assert_eq!(tags(&log, &k), written);
}
