//! The journal as the only copy of the data: what reaches the disk, when journal files are
//! retired, and reopening a log whose segments point into several journal files.
//!
//! What must hold:
//! - every appended byte is written once, to the journal; a segment's own file
//!   (`.extents`) holds 32 bytes per extent, a tiny fraction of the data;
//! - a journal file stays while any segment points into it (its data stays readable) and
//!   is retired (deleted, or recycled as `.free`) by the first checkpoint after the last
//!   segment pointing into it was deleted (retention, DeleteRecords, partition delete);
//! - a read never sees a retired file's new contents, even while files are being recycled
//!   and rewritten under concurrent reads;
//! - after a clean shutdown and after a crash, a log spread over several journal files,
//!   some of them retired, reopens with every acknowledged batch at its offset.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use bytes::Bytes;
use sluice_log::batch::layout::{BATCH_LENGTH_AT, MAGIC_AT, PARTITION_LEADER_EPOCH_AT};
use sluice_log::batch::BatchIter;
use sluice_log::config::JOURNAL_FILES_RECYCLED_MAX;
use sluice_log::fs::{FaultOp, Fs, StdFs};
use sluice_log::sim_fs::{CrashMode, SimFs, SimRng};
use sluice_log::{LogConfig, LogError, LogManager, LogManagerConfig, Offset, PartitionKey};

/// Small journal files, so a few hundred KiB spread over many of them.
const SMALL_JOURNAL_FILE_BYTES: u64 = 32 * 1024;

fn small_journal_config(dir: &Path) -> LogManagerConfig {
    let mut config = config(dir);
    config.journal_file_bytes_max = SMALL_JOURNAL_FILE_BYTES;
    config
}

fn segments_of(bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes: bytes,
        retention_ms: -1,
        retention_bytes: -1,
        ..LogConfig::default()
    }
}

/// Sequence numbers of the `.wal` files in the journal directory.
fn wal_seqs(data: &Path) -> BTreeSet<u64> {
    journal_files(data).iter().map(|p| journal_seq(p)).collect()
}

/// Journal files every segment of every partition in `data` points into (as persisted:
/// call after a checkpoint).
fn referenced_seqs(data: &Path) -> BTreeSet<u64> {
    let mut seqs = BTreeSet::new();
    for entry in std::fs::read_dir(data).expect("ls") {
        let path = entry.expect("entry").path();
        if path.is_dir() && path.file_name().is_some_and(|n| n != "journal") {
            for extents in segment_files(&path) {
                seqs.extend(extent_records(&extents).iter().map(|r| r.seq));
            }
        }
    }
    seqs
}

/// After a checkpoint: every journal file a segment points into is there, and every other
/// `.wal` file but the one being written was retired; at most
/// `JOURNAL_FILES_RECYCLED_MAX` retired files are kept as `.free`.
fn assert_only_referenced_files_stay(data: &Path) {
    let present = wal_seqs(data);
    let referenced = referenced_seqs(data);
    let current = *present.last().expect("a journal file");
    assert!(
        referenced.is_subset(&present),
        "a segment points into a retired file: referenced {referenced:?}, present {present:?}"
    );
    let needless: Vec<u64> = present
        .iter()
        .copied()
        .filter(|s| *s != current && !referenced.contains(s))
        .collect();
    assert!(
        needless.is_empty(),
        "journal files {needless:?} are kept though no segment points into them \
         (referenced {referenced:?})"
    );
    let free = files_with(&data.join("journal"), ".free").len();
    assert!(free <= JOURNAL_FILES_RECYCLED_MAX, "{free} recycled files");
}

/// Whether files in the middle of the journal are gone (retired; recycled ones are reused
/// under a new, later sequence number).
fn has_retired(seqs: &BTreeSet<u64>) -> bool {
    match (seqs.first(), seqs.last()) {
        (Some(first), Some(last)) => last - first + 1 > seqs.len() as u64,
        _ => false,
    }
}

/// Reads a partition back and checks every batch against the one appended with its tag:
/// (tag, base offset) in order.
fn read_checked(
    log: &LogManager,
    k: &PartitionKey,
    records: i32,
    value_len: usize,
) -> Vec<(i64, i64)> {
    read_all(log, k)
        .iter()
        .map(|seen| {
            let got = log
                .read(k, Offset(seen.base_offset), 1, true)
                .expect("read")
                .records;
            let batch = BatchIter::new(got).next().expect("a batch").expect("whole");
            assert_same_batch(&batch, &crate::common::batch(records, value_len, seen.tag));
            (seen.tag, seen.base_offset)
        })
        .collect()
}

/// A stored batch is the appended one: everything but the base offset (stamped) and the
/// partition leader epoch (outside the CRC) is equal.
fn assert_same_batch(stored: &[u8], appended: &[u8]) {
    assert_eq!(stored.len(), appended.len(), "batch length");
    let (length, leader_epoch) = (BATCH_LENGTH_AT, PARTITION_LEADER_EPOCH_AT);
    assert_eq!(
        &stored[length..leader_epoch],
        &appended[length..leader_epoch]
    );
    assert_eq!(&stored[MAGIC_AT..], &appended[MAGIC_AT..], "batch bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twelve_partitions_write_their_bytes_once_to_the_journal() {
    // Goal: appending N MiB to 12 partitions (pipelined, so commit rounds hold batches of
    // many partitions) writes about N MiB to journal files (entry headers and file headers
    // are the only additions) and only small `.extents` files: less than 1% of the data.
    const DATA_BYTES: u64 = 12 << 20;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.journal_file_bytes_max = 4 << 20;
    let (log, _) = LogManager::open(config, Arc::new(StdFs)).expect("open");
    let keys: Vec<PartitionKey> = (0..12).map(|p| key("bytes", p)).collect();
    for k in &keys {
        log.create_partition(k.clone(), segments_of(256 << 10))
            .expect("create");
    }
    let batch_len = batch(16, 4000, 0).len() as u64;
    let per_partition = DATA_BYTES / 12 / batch_len;
    let mut tasks = Vec::new();
    for k in keys.clone() {
        let log = log.clone();
        tasks.push(tokio::spawn(async move {
            let mut waiters = Vec::new();
            for tag in 0..per_partition as i64 {
                waiters.push(log.append(&k, bytes(16, 4000, tag)).await.expect("queued"));
                if waiters.len() == 8 {
                    for w in waiters.drain(..) {
                        w.wait().await.expect("durable");
                    }
                }
            }
            for w in waiters {
                w.wait().await.expect("durable");
            }
        }));
    }
    for task in tasks {
        task.await.expect("appender");
    }
    let data = per_partition * 12 * batch_len;
    let stats = log.stats();
    log.shutdown().expect("shutdown");
    let journal = total_len(&journal_files(dir.path()));
    let (mut extents, mut indexes, mut segments) = (0, 0, 0);
    for k in &keys {
        let pdir = partition_dir(dir.path(), k);
        let files = segment_files(&pdir);
        segments += files.len();
        extents += total_len(&files);
        indexes += total_len(&files_with(&pdir, "index"));
    }
    eprintln!(
        "data {data} bytes in {segments} segments: journal files {journal} bytes ({} files, \
         {} journal syncs), extents {extents} bytes, index files {indexes} bytes",
        journal_files(dir.path()).len(),
        stats.journal_syncs
    );
    assert!(segments >= 24, "segments rolled: {segments}");
    assert!(journal >= data, "every batch is in the journal");
    assert!(
        journal < data + data / 100,
        "the journal holds the data once: {journal} bytes for {data}"
    );
    assert!(
        extents * 100 < data,
        "extents files are small: {extents} bytes for {data}"
    );
    let (log, _) = open(dir.path());
    for k in &keys {
        assert_eq!(read_all(&log, k).len() as u64, per_partition);
    }
}

#[tokio::test]
async fn a_journal_file_stays_while_one_partition_points_into_it() {
    // Goal: journal files holding two partitions' batches stay while either partition's
    // segments point into them: after DeleteRecords removed one partition's segments and a
    // checkpoint ran, the other's data in those files is still there and read back intact.
    // Once that partition is deleted too, the next checkpoint retires them.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) =
        LogManager::open(small_journal_config(dir.path()), Arc::new(StdFs)).expect("open");
    let (kept, dropped) = (key("kept", 0), key("dropped", 0));
    for k in [&kept, &dropped] {
        log.create_partition(k.clone(), segments_of(1024))
            .expect("create");
    }
    for tag in 0..40 {
        append(&log, &kept, bytes(2, 100, tag)).await;
        append(&log, &dropped, bytes(2, 100, 1000 + tag)).await;
    }
    log.checkpoint_now().expect("checkpoint");
    let shared = wal_seqs(dir.path());
    assert!(shared.len() >= 4, "{shared:?}");
    log.delete_records(&dropped, Offset(-1))
        .expect("delete records");
    for tag in 0..40 {
        append(&log, &dropped, bytes(2, 100, 2000 + tag)).await;
    }
    log.checkpoint_now().expect("checkpoint");
    let present = wal_seqs(dir.path());
    let old: Vec<u64> = shared
        .iter()
        .copied()
        .filter(|s| s < shared.last().unwrap())
        .collect();
    for seq in &old {
        assert!(present.contains(seq), "file {seq} still holds `kept` data");
    }
    assert_only_referenced_files_stay(dir.path());
    let tags: Vec<i64> = read_checked(&log, &kept, 2, 100)
        .iter()
        .map(|t| t.0)
        .collect();
    assert_eq!(tags, (0..40).collect::<Vec<_>>());
    log.delete_partition(&kept).expect("delete partition");
    append(&log, &dropped, bytes(2, 100, 3000)).await;
    log.checkpoint_now().expect("checkpoint");
    let present = wal_seqs(dir.path());
    for seq in &old {
        assert!(!present.contains(seq), "file {seq} is retired: {present:?}");
    }
    assert_only_referenced_files_stay(dir.path());
    let tags: Vec<i64> = read_checked(&log, &dropped, 2, 100)
        .iter()
        .map(|t| t.0)
        .collect();
    assert_eq!(tags, (2000..2040).chain([3000]).collect::<Vec<_>>());
}

#[tokio::test]
async fn retention_and_delete_records_retire_journal_files() {
    // Goal: segments deleted by time retention, by size retention and by DeleteRecords
    // each let the next checkpoint retire the journal files only they pointed into (the
    // file being written stays), and keep every file a remaining segment needs.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) =
        LogManager::open(small_journal_config(dir.path()), Arc::new(StdFs)).expect("open");
    let k = key("retire", 0);
    log.create_partition(k.clone(), segments_of(2048))
        .expect("create");
    let base_ts = 1_000_000;
    let mut tag = 0;
    let mut append_some = |n: i64| {
        let first = tag;
        tag += n;
        first..first + n
    };
    for t in append_some(150) {
        append(&log, &k, bytes(2, 100, base_ts + t * 1000)).await;
    }
    log.checkpoint_now().expect("checkpoint");
    let before = wal_seqs(dir.path()).len();
    assert!(before >= 5, "{before} journal files");

    // Time: segments whose newest batch is older than 20 s before the last one go.
    let by_time = LogConfig {
        retention_ms: 20_000,
        ..segments_of(2048)
    };
    log.set_config(&k, by_time).expect("config");
    log.enforce_retention(base_ts + 150_000).expect("retention");
    // A new batch makes the next checkpoint one that retires files: a checkpoint of an
    // idle log retires nothing (see `an_idle_log_retires_journal_files_at_the_next_checkpoint`).
    append(&log, &k, bytes(2, 100, base_ts + 150_000)).await;
    log.checkpoint_now().expect("checkpoint");
    let after_time = wal_seqs(dir.path()).len();
    assert!(after_time < before, "{after_time} vs {before}");
    assert_only_referenced_files_stay(dir.path());
    assert!(
        !files_with(&dir.path().join("journal"), ".free").is_empty(),
        "retired files are kept for reuse"
    );

    // Size: new appends reuse the recycled files; retention.bytes then trims again.
    log.set_config(&k, segments_of(2048)).expect("config");
    for t in append_some(60) {
        append(&log, &k, bytes(2, 100, base_ts + t * 1000)).await;
    }
    let by_size = LogConfig {
        retention_bytes: 4096,
        ..segments_of(2048)
    };
    log.set_config(&k, by_size).expect("config");
    log.enforce_retention(base_ts).expect("retention");
    log.checkpoint_now().expect("checkpoint");
    assert_only_referenced_files_stay(dir.path());
    assert!(
        wal_seqs(dir.path()).len() <= 3,
        "{:?}",
        wal_seqs(dir.path())
    );

    // DeleteRecords to the high watermark: only the active segment's files stay.
    log.set_config(&k, segments_of(2048)).expect("config");
    for t in append_some(30) {
        append(&log, &k, bytes(2, 100, base_ts + t * 1000)).await;
    }
    log.delete_records(&k, Offset(-1)).expect("delete records");
    log.checkpoint_now().expect("checkpoint");
    assert_only_referenced_files_stay(dir.path());
    let offsets = log.offsets(&k).expect("offsets");
    assert_eq!(offsets.log_start_offset, offsets.high_watermark);
    let next = append(&log, &k, bytes(2, 100, 7)).await;
    assert_eq!(next.base_offset, offsets.high_watermark);
    assert_eq!(read_all(&log, &k).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_see_a_retired_file_reused() {
    // Goal: a read result taken before retention deleted its segment keeps the bytes it
    // was given after the file is retired and rewritten; and reads running while segments
    // are deleted, files retired and recycled, and new batches written into the recycled
    // files, only ever return batches that were appended at those offsets (or
    // OffsetOutOfRange once deleted), never a recycled file's new bytes or Damaged.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) =
        LogManager::open(small_journal_config(dir.path()), Arc::new(StdFs)).expect("open");
    let k = key("race", 0);
    log.create_partition(k.clone(), segments_of(1024))
        .expect("create");
    for tag in 0..20 {
        append(&log, &k, bytes(2, 100, tag)).await;
    }
    let held = log
        .read(&k, Offset(0), 1 << 20, true)
        .expect("read")
        .records;
    let held_copy = held.to_vec();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (log, k, stop) = (log.clone(), k.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut checked = 0u64;
            while !stop.load(Ordering::Acquire) {
                let Ok(offsets) = log.offsets(&k) else { break };
                let mut next = offsets.log_start_offset;
                while next < offsets.high_watermark {
                    let records = match log.read(&k, next, 4096, true) {
                        Ok(result) => result.records,
                        Err(LogError::OffsetOutOfRange { .. }) => break,
                        Err(other) => panic!("read at {next:?}: {other}"),
                    };
                    if records.is_empty() {
                        break;
                    }
                    for batch in BatchIter::new(records) {
                        let batch = batch.expect("whole batch");
                        let h = header(&batch);
                        sluice_log::batch::validate(&batch, u32::MAX).expect("CRC intact");
                        let tag = h.base_timestamp();
                        assert_eq!(h.base_offset().0, tag * 2, "batch {tag} at its offset");
                        assert_same_batch(&batch, &crate::common::batch(2, 100, tag));
                        next = Offset(h.last_offset().0 + 1);
                        checked += 1;
                    }
                }
            }
            checked
        })
    };
    let started = Instant::now();
    let mut tag = 20;
    let mut recycled_reuses = 0;
    while started.elapsed() < Duration::from_secs(3) {
        for _ in 0..10 {
            append(&log, &k, bytes(2, 100, tag)).await;
            tag += 1;
        }
        let hw = log.offsets(&k).expect("offsets").high_watermark;
        log.delete_records(&k, Offset(hw.0 - 10))
            .expect("delete records");
        let free_before = files_with(&dir.path().join("journal"), ".free").len();
        log.checkpoint_now().expect("checkpoint");
        if free_before > 0 {
            recycled_reuses += 1;
        }
    }
    stop.store(true, Ordering::Release);
    let checked = reader.join().expect("reader");
    eprintln!("{tag} batches appended, {checked} batches read and checked, {recycled_reuses} rounds with recycled files");
    assert!(checked > 100, "the reader ran: {checked}");
    assert!(recycled_reuses > 5, "files were recycled and reused");
    assert!(
        !wal_seqs(dir.path()).contains(&1),
        "the file the held result came from was retired"
    );
    assert_eq!(held.to_vec(), held_copy, "a held result never changes");
    let first = BatchIter::new(held).next().expect("batch").expect("whole");
    assert_same_batch(&first, &crate::common::batch(2, 100, 0));
}

/// Per partition: its log start and (tag, base offset) of each batch it must hold.
type Expected = BTreeMap<i32, (i64, Vec<(i64, i64)>)>;

/// Builds a log over several small journal files, some of them retired: three partitions
/// appended to in turn, then the first alone (filling journal files no other partition
/// points into), which DeleteRecords then trims, then all three again (a checkpoint
/// retires the trimmed files early on, and later journal files reuse them). Returns what each partition must
/// hold: its log start and (tag, offset) of each batch from there.
async fn spread_over_journal_files(log: &LogManager, keys: &[PartitionKey]) -> Expected {
    for k in keys {
        log.create_partition(k.clone(), segments_of(1024))
            .expect("create");
    }
    let mut expected: Expected = keys
        .iter()
        .map(|k| (k.partition, (0, Vec::new())))
        .collect();
    async fn add(log: &LogManager, expected: &mut Expected, k: &PartitionKey, tag: i64) -> Offset {
        let offset = append(log, k, bytes(2, 100, tag)).await.base_offset;
        let entry = expected.get_mut(&k.partition).expect("partition");
        entry.1.push((tag, offset.0));
        offset
    }
    for round in 0..10 {
        for k in keys {
            add(
                log,
                &mut expected,
                k,
                i64::from(k.partition) * 10_000 + round,
            )
            .await;
        }
    }
    let mut end = Offset(0);
    for tag in 0..60 {
        end = add(log, &mut expected, &keys[0], 5_000 + tag).await;
    }
    let start = log
        .delete_records(&keys[0], Offset(end.0 + 2))
        .expect("delete");
    expected.get_mut(&keys[0].partition).expect("first").0 = start.0;
    log.checkpoint_now().expect("checkpoint");
    for round in 10..25 {
        for k in keys {
            add(
                log,
                &mut expected,
                k,
                i64::from(k.partition) * 10_000 + round,
            )
            .await;
        }
        if round == 12 {
            // The first checkpoint with news after the deletion retires the files.
            log.checkpoint_now().expect("checkpoint");
        }
    }
    // What a reader sees from the log start: batches holding offsets at or after it.
    expected
        .into_iter()
        .map(|(partition, (start, batches))| {
            let kept = batches
                .into_iter()
                .filter(|&(_, offset)| offset + 1 >= start)
                .collect();
            (partition, (start, kept))
        })
        .collect()
}

#[tokio::test]
async fn reopen_after_clean_shutdown_with_retired_journal_files() {
    // Goal: a log whose segments point into several journal files, some of them retired
    // and recycled, reopens after a clean shutdown without replaying or cutting anything,
    // with every batch at its offset, and keeps only the journal files segments need.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) =
        LogManager::open(small_journal_config(dir.path()), Arc::new(StdFs)).expect("open");
    let keys: Vec<PartitionKey> = (0..3).map(|p| key("spread", p)).collect();
    let expected = spread_over_journal_files(&log, &keys).await;
    assert!(
        has_retired(&wal_seqs(dir.path())),
        "DeleteRecords and a checkpoint retired files: {:?}",
        wal_seqs(dir.path())
    );
    log.shutdown().expect("shutdown");
    let referenced = referenced_seqs(dir.path());
    assert!(referenced.len() >= 4, "spread over {referenced:?}");
    let (log, report) =
        LogManager::open(small_journal_config(dir.path()), Arc::new(StdFs)).expect("reopen");
    assert_eq!(
        (report.journal_entries_replayed, report.bytes_truncated),
        (0, 0),
        "{:?}",
        report.actions
    );
    for k in &keys {
        let (start, batches) = &expected[&k.partition];
        assert_eq!(
            log.offsets(k).expect("offsets").log_start_offset,
            Offset(*start)
        );
        let got: Vec<(i64, i64)> = read_checked(&log, k, 2, 100);
        assert_eq!(&got, batches, "partition {}", k.partition);
    }
    log.checkpoint_now().expect("checkpoint");
    assert_only_referenced_files_stay(dir.path());
}

const SIM_DATA_DIR: &str = "/data";

fn sim_config() -> LogManagerConfig {
    let mut config = LogManagerConfig::new(SIM_DATA_DIR);
    config.journal_direct_io = crate::common::journal_direct_io();
    config.checkpoint_interval_ms = 3_600_000;
    config.checkpoint_bytes = u64::MAX / 2;
    config.retention_check_interval_ms = 3_600_000;
    config.journal_file_bytes_max = SMALL_JOURNAL_FILE_BYTES;
    config.journal_cleaner.enable = false;
    config
}

fn open_sim(fs: &SimFs) -> (LogManager, sluice_log::RecoveryReport) {
    LogManager::open(sim_config(), Arc::new(fs.clone())).expect("open")
}

#[test]
fn reopen_after_a_crash_with_retired_journal_files() {
    // Goal: a crash (SimFs: only synced state survives, plus torn or flushed unsynced
    // writes) of a log whose segments point into several journal files, some retired and
    // recycled, with batches acknowledged after the last checkpoint, loses nothing: every
    // acknowledged batch is back at its offset, the log start DeleteRecords set (made
    // durable by the checkpoint) holds, and the log goes on at the right offset. Both
    // crash modes, several draws each.
    for seed in 0..8u64 {
        let fs = SimFs::new();
        fs.create_dir_all_durable(Path::new(SIM_DATA_DIR))
            .expect("data dir");
        let (log, _) = open_sim(&fs);
        let keys: Vec<PartitionKey> = (0..3).map(|p| key("crash", p)).collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let expected = runtime.block_on(spread_over_journal_files(&log, &keys));
        let journal = fs
            .read_dir(&Path::new(SIM_DATA_DIR).join("journal"))
            .expect("ls");
        assert!(
            journal.iter().filter(|e| e.name.ends_with(".wal")).count() >= 4,
            "seed {seed}: several journal files"
        );
        let seqs: BTreeSet<u64> = journal
            .iter()
            .filter(|e| e.name.ends_with(".wal"))
            .map(|e| e.name[..20].parse().expect("journal name"))
            .collect();
        assert!(has_retired(&seqs), "seed {seed}: some retired: {seqs:?}");
        drop(log);
        let mode = [CrashMode::Drop, CrashMode::Writeback][seed as usize % 2];
        fs.crash_with(&mut SimRng::new(seed), mode);
        let (log, report) = open_sim(&fs);
        for k in &keys {
            let (start, batches) = &expected[&k.partition];
            let offsets = log.offsets(k).expect("offsets");
            assert_eq!(
                offsets.log_start_offset,
                Offset(*start),
                "seed {seed}: {:?}",
                report.actions
            );
            let got = read_checked(&log, k, 2, 100);
            assert_eq!(
                &got, batches,
                "seed {seed}, partition {}: {:?}",
                k.partition, report.actions
            );
            let end = batches.last().map_or(0, |&(_, offset)| offset + 2);
            let next = runtime
                .block_on(append(&log, k, Bytes::from(batch(1, 10, 77))))
                .base_offset;
            assert_eq!(next, Offset(end), "seed {seed}");
        }
        log.shutdown().expect("shutdown");
    }
}

#[tokio::test]
async fn an_idle_log_retires_journal_files_at_the_next_checkpoint() {
    // Goal: once retention, DeleteRecords or a partition delete removed the last segment
    // pointing into a journal file, the next checkpoint retires it even when nothing was
    // appended meanwhile: disk space comes back on an idle log too.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) =
        LogManager::open(small_journal_config(dir.path()), Arc::new(StdFs)).expect("open");
    let (k, other) = (key("idle", 0), key("idle", 1));
    for key in [&k, &other] {
        log.create_partition(key.clone(), segments_of(2048))
            .expect("create");
    }
    for tag in 0..150 {
        append(&log, &k, bytes(2, 100, tag)).await;
    }
    log.checkpoint_now().expect("checkpoint");
    let before = wal_seqs(dir.path());
    assert!(before.len() >= 5, "{before:?}");
    log.delete_records(&k, Offset(250)).expect("delete records");
    log.checkpoint_now().expect("checkpoint");
    assert_only_referenced_files_stay(dir.path());
    for tag in 0..150 {
        append(&log, &other, bytes(2, 100, tag)).await;
    }
    log.checkpoint_now().expect("checkpoint");
    let with_other = wal_seqs(dir.path());
    log.delete_partition(&other).expect("delete partition");
    log.checkpoint_now().expect("checkpoint");
    assert_only_referenced_files_stay(dir.path());
    assert!(wal_seqs(dir.path()).len() < with_other.len());
}

/// The names of the `.wal` files in a SimFs log's journal directory, sorted.
fn sim_wal_names(fs: &SimFs) -> Vec<String> {
    let journal_dir = Path::new(SIM_DATA_DIR).join("journal");
    let mut names: Vec<String> = fs
        .read_dir(&journal_dir)
        .expect("ls")
        .into_iter()
        .map(|e| e.name)
        .filter(|n| n.ends_with(".wal"))
        .collect();
    names.sort();
    names
}

/// The length of journal file `name` in a SimFs log.
fn sim_wal_len(fs: &SimFs, name: &str) -> u64 {
    let path = Path::new(SIM_DATA_DIR).join("journal").join(name);
    fs.open(&path, sluice_log::fs::OpenMode::Existing)
        .expect("open")
        .len()
        .expect("len")
}

/// A fresh SimFs log with one partition of topic `topic` (4 KiB segments) holding six
/// batches of two 300-byte records (offsets 0-11, tags 0-5), and a runtime to append with.
fn sim_log_with_six_batches(
    topic: &str,
) -> (SimFs, LogManager, PartitionKey, tokio::runtime::Runtime) {
    let fs = SimFs::new();
    fs.create_dir_all_durable(Path::new(SIM_DATA_DIR))
        .expect("data dir");
    let (log, _) = open_sim(&fs);
    let k = key(topic, 0);
    log.create_partition(k.clone(), segments_of(4096))
        .expect("create");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    for tag in 0..6 {
        runtime.block_on(append(&log, &k, bytes(2, 300, tag)));
    }
    (fs, log, k, runtime)
}

#[test]
fn the_current_journal_file_is_reused_in_place_once_nothing_points_into_it() {
    // Goal: once DeleteRecords up to the high watermark removed every segment pointing
    // into the journal file being written (the only way to free space on a full disk),
    // the next round reuses that file in place (renamed to the next sequence number)
    // instead of needing room for a new one. After a round refused for ENOSPC the file is
    // cut to its header (its space freed); otherwise it keeps its length, so new rounds
    // overwrite written blocks and the old entries stay behind the writer. Either way a
    // crash after that (SimFs: only synced state survives) brings back the log start and
    // every batch appended after the reuse, and nothing deleted or stale reappears. Both
    // crash modes, both cases, several draws.
    for seed in 0..8u64 {
        let space_short = seed % 4 >= 2;
        let (fs, log, k, runtime) = sim_log_with_six_batches("reuse");
        let before = sim_wal_names(&fs);
        assert_eq!(before.len(), 1, "seed {seed}: one journal file");
        let full_len = sim_wal_len(&fs, &before[0]);
        if space_short {
            fs.arm(FaultOp::Write, 0, Some(".wal"));
            let refused = runtime.block_on(async {
                let waiter = log.append(&k, bytes(2, 300, 99)).await.expect("queued");
                waiter.wait().await
            });
            assert!(
                matches!(&refused, Err(LogError::Io(e)) if e.raw_os_error() == Some(libc::ENOSPC)),
                "seed {seed}: {refused:?}"
            );
            fs.disarm();
        }
        assert_eq!(
            log.delete_records(&k, Offset(-1)).expect("delete"),
            Offset(12)
        );
        let mut kept = Vec::new();
        for tag in 10..13 {
            let info = runtime.block_on(append(&log, &k, bytes(2, 300, tag)));
            kept.push((tag, info.base_offset.0));
        }
        let after = sim_wal_names(&fs);
        assert_eq!(after.len(), 1, "seed {seed}: {after:?}");
        assert_ne!(
            after, before,
            "seed {seed}: the file was renamed to the next seq"
        );
        let size = sim_wal_len(&fs, &after[0]);
        if space_short {
            assert!(
                size < 4 * 4096 + 16,
                "seed {seed}: cut back, now {size} bytes"
            );
        } else {
            assert_eq!(size, full_len, "seed {seed}: the file kept its blocks");
        }
        drop(log);
        let mode = [CrashMode::Drop, CrashMode::Writeback][seed as usize % 2];
        fs.crash_with(&mut SimRng::new(seed), mode);
        let (log, report) = open_sim(&fs);
        let offsets = log.offsets(&k).expect("offsets");
        assert_eq!(
            offsets.log_start_offset,
            Offset(12),
            "seed {seed}: {:?}",
            report.actions
        );
        assert_eq!(
            offsets.log_end_offset,
            Offset(18),
            "seed {seed}: {:?}",
            report.actions
        );
        let got = read_checked(&log, &k, 2, 300);
        let want: Vec<(i64, i64)> = kept.clone();
        assert_eq!(got, want, "seed {seed}: {:?}", report.actions);
        log.shutdown().expect("shutdown");
    }
}

#[test]
fn a_clean_stop_cuts_a_reused_journal_file_back_to_its_entries() {
    // Goal: a journal file reused in place keeps its old bytes past the writer (so rounds
    // overwrite written blocks), but a clean stop cuts it back to its last round: the next
    // start finds the journal's end where the entries end, cuts nothing and warns about no
    // torn entry, and every batch is back. Method: SimFs; batches, DeleteRecords up to the
    // high watermark (nothing points into the file any more), one more batch (the file is
    // reused, keeping its length), shutdown, reopen.
    let (fs, log, k, runtime) = sim_log_with_six_batches("trim");
    assert_eq!(
        log.delete_records(&k, Offset(-1)).expect("delete"),
        Offset(12)
    );
    let info = runtime.block_on(append(&log, &k, bytes(2, 300, 10)));
    assert_eq!(info.base_offset, Offset(12));
    let wal_len = |fs: &SimFs| -> u64 {
        let names = sim_wal_names(fs);
        assert_eq!(names.len(), 1, "{names:?}");
        sim_wal_len(fs, &names[0])
    };
    let kept = wal_len(&fs);
    log.shutdown().expect("shutdown");
    let trimmed = wal_len(&fs);
    assert!(
        trimmed < kept,
        "cut back at the stop: {trimmed} bytes, {kept} before"
    );
    let (log, report) = open_sim(&fs);
    assert_eq!(report.bytes_truncated, 0, "{:?}", report.actions);
    assert_eq!(read_checked(&log, &k, 2, 300), vec![(10, 12)]);
    log.shutdown().expect("shutdown");
}
