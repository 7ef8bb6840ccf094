//! A full disk recovers without a restart (issue 32), on the simulated file system: with
//! a capacity (`SimFs::set_capacity`) a write that would grow the files past it is refused
//! with ENOSPC as a real file system refuses it, while overwrites, cuts, unlinks and syncs
//! go on. The log is filled until an append is refused, then space comes back by
//! DeleteRecords, retention, a deleted partition, or a larger capacity, and appends must
//! resume by themselves: no poisoning, nothing acknowledged lost or written twice, also
//! after a crash.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use sluice_log::fs::FaultOp;
use sluice_log::sim_fs::{CrashMode, SimFs, SimRng};
use sluice_log::{AppendInfo, LogConfig, LogError, LogManager, LogManagerConfig, Offset};

use crate::common::{batch, key, read_all};

const DATA_DIR: &str = "/data";
/// Journal files of the tests: small, so a filled disk holds several.
const JOURNAL_FILE_BYTES: u64 = 64 * 1024;
/// Each batch: 8 records of 500 bytes (about 4 KiB).
const RECORDS: i32 = 8;
const VALUE_BYTES: usize = 500;
/// Appends tried before giving up on filling the disk (bounds the test).
const FILL_APPENDS_MAX: i64 = 10_000;
/// Appends after space is freed: about 80 KiB, more than any slack a filled disk had, so
/// they need the freed space.
const RESUMED: i64 = 20;
/// Refusals an append may get before it must go through once space was freed (each
/// frees a recycled journal file; the pool holds at most 4).
const RETRIES_MAX: usize = 4;

fn sim() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all_durable(Path::new(DATA_DIR))
        .expect("data dir");
    fs
}

/// Background threads idle: checkpoints and retention run when a test says.
fn config() -> LogManagerConfig {
    let mut config = LogManagerConfig::new(DATA_DIR);
    config.journal_direct_io = crate::common::journal_direct_io();
    config.checkpoint_interval_ms = 3_600_000;
    config.checkpoint_bytes = u64::MAX / 2;
    config.retention_check_interval_ms = 3_600_000;
    config.journal_file_bytes_max = JOURNAL_FILE_BYTES;
    config.journal_cleaner.enable = false;
    config
}

fn open(fs: &SimFs) -> LogManager {
    LogManager::open(config(), Arc::new(fs.clone()))
        .expect("open")
        .0
}

fn append_now(
    log: &LogManager,
    k: &sluice_log::PartitionKey,
    tag: i64,
) -> Result<AppendInfo, LogError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let bytes = Bytes::from(batch(RECORDS, VALUE_BYTES, tag));
    rt.block_on(async { log.append(k, bytes).await?.wait().await })
}

fn is_enospc(result: &Result<AppendInfo, LogError>) -> bool {
    matches!(result, Err(LogError::Io(e)) if e.raw_os_error() == Some(libc::ENOSPC))
}

/// Appends batches tagged `first..` until one is refused for space (checkpointing every
/// few, as the checkpointer would). Returns the acknowledged (tag, base offset) pairs.
fn fill(log: &LogManager, k: &sluice_log::PartitionKey, first: i64) -> Vec<(i64, i64)> {
    let mut acked = Vec::new();
    for tag in first..first + FILL_APPENDS_MAX {
        let result = append_now(log, k, tag);
        if is_enospc(&result) {
            assert!(!log.is_poisoned(), "a refused round poisoned the log");
            return acked;
        }
        acked.push((tag, result.expect("append").base_offset.0));
        if tag % 8 == 0 {
            // A refused checkpoint is fine here (the disk is filling); never poison.
            let _ = log.checkpoint_now();
            assert!(!log.is_poisoned());
        }
    }
    panic!("the disk never filled");
}

/// While full: appends are refused again (not poisoned), a checkpoint fails without
/// poisoning, and reads still work.
fn assert_full_but_serving(log: &LogManager, k: &sluice_log::PartitionKey, acked: &[(i64, i64)]) {
    assert!(is_enospc(&append_now(log, k, -1)), "still full");
    assert!(!log.is_poisoned(), "a refused round poisoned the log");
    let _ = log.checkpoint_now();
    assert!(!log.is_poisoned(), "a refused checkpoint poisoned the log");
    let seen = read_all(log, k);
    assert_eq!(seen.len(), acked.len(), "acknowledged batches readable");
}

/// The batches read back are exactly the acknowledged ones at or after `from`, once each.
fn assert_log(
    log: &LogManager,
    k: &sluice_log::PartitionKey,
    acked: &[(i64, i64)],
    from: i64,
    what: &str,
) {
    let seen: Vec<(i64, i64)> = read_all(log, k)
        .iter()
        .map(|s| (s.tag, s.base_offset))
        .collect();
    let expected: Vec<(i64, i64)> = acked.iter().copied().filter(|a| a.1 >= from).collect();
    assert_eq!(seen, expected, "{what}");
}

/// Appends `n` more batches tagged from `first`, each of which must be acknowledged at
/// the next offset. Each is retried, as a client retries KAFKA_STORAGE_ERROR, at most
/// `RETRIES_MAX` times: a refused round gives a recycled journal file's space back.
fn resume(
    log: &LogManager,
    k: &sluice_log::PartitionKey,
    first: i64,
    n: i64,
    acked: &mut Vec<(i64, i64)>,
) {
    let mut next = log.offsets(k).expect("offsets").log_end_offset.0;
    for tag in first..first + n {
        let mut result = append_now(log, k, tag);
        for _ in 0..RETRIES_MAX {
            if !is_enospc(&result) {
                break;
            }
            assert!(!log.is_poisoned());
            result = append_now(log, k, tag);
        }
        let info = result.expect("appends resume once space is free");
        assert_eq!(info.base_offset.0, next, "no offset skipped or reused");
        next += i64::from(RECORDS);
        acked.push((tag, info.base_offset.0));
    }
}

/// What the checkpointer thread does on its next turn (every 5 s by default): retire the
/// journal files nothing points into any more. It must work on the full disk, since
/// that is where the freed space comes from.
fn checkpointer_turn(log: &LogManager) {
    log.checkpoint_now().expect("a checkpoint on the full disk");
}

/// Crashes (drop or writeback mode by the seed) and checks what a reopen finds.
fn crash_and_check(
    fs: &SimFs,
    log: LogManager,
    k: &sluice_log::PartitionKey,
    acked: &[(i64, i64)],
    from: i64,
    seed: u64,
) {
    drop(log);
    let mode = [CrashMode::Drop, CrashMode::Writeback][seed as usize % 2];
    fs.crash_with(&mut SimRng::new(seed), mode);
    let log = open(fs);
    assert_log(
        &log,
        k,
        acked,
        from,
        &format!("after a crash (seed {seed})"),
    );
}

#[test]
fn a_refused_round_is_undone_without_writing_anything() {
    // Goal (issue 32: "undoing the refused round itself failed with ENOSPC, the log was
    // poisoned"): on a disk that refuses every write, the undo of a refused round needs
    // none, so the log is not poisoned and appends resume once writes are allowed again.
    // The segment's extents are not persisted yet (no checkpoint), which is what made the
    // old undo write (it synced the segment, persisting its records). Both crash modes.
    for seed in 0..4 {
        let fs = sim();
        let log = open(&fs);
        let k = key("undo", 0);
        log.create_partition(k.clone(), LogConfig::default())
            .expect("create");
        let mut acked = Vec::new();
        for tag in 0..3 {
            acked.push((
                tag,
                append_now(&log, &k, tag).expect("append").base_offset.0,
            ));
        }
        fs.arm(FaultOp::Write, 0, None);
        for tag in 3..5 {
            let refused = append_now(&log, &k, tag);
            assert!(is_enospc(&refused), "seed {seed}: {refused:?}");
            assert!(!log.is_poisoned(), "seed {seed}: the undo wrote and failed");
        }
        fs.disarm();
        resume(&log, &k, 10, 2, &mut acked);
        assert_eq!(
            acked[3].1,
            3 * i64::from(RECORDS),
            "the refused offsets given back"
        );
        crash_and_check(&fs, log, &k, &acked, 0, seed);
    }
}

#[test]
fn a_full_disk_resumes_when_the_file_system_grows() {
    // Goal: with nothing deleted, a larger file system is enough: appends resume at the
    // next offset without a restart, and every acknowledged batch is kept, after a crash
    // too.
    for seed in 0..2 {
        let fs = sim();
        fs.set_capacity(Some(400 * 1024));
        let log = open(&fs);
        let k = key("grow", 0);
        log.create_partition(k.clone(), LogConfig::default())
            .expect("create");
        let mut acked = fill(&log, &k, 0);
        assert!(
            acked.len() > 20,
            "seed {seed}: filled after {} appends",
            acked.len()
        );
        assert_full_but_serving(&log, &k, &acked);
        fs.set_capacity(Some(1600 * 1024));
        resume(&log, &k, 100_000, 5, &mut acked);
        log.checkpoint_now()
            .expect("a checkpoint once there is space");
        crash_and_check(&fs, log, &k, &acked, 0, seed);
    }
}

#[test]
fn delete_records_on_a_full_disk_frees_space_and_appends_resume() {
    // Goal: DeleteRecords up to the high watermark on a full disk succeeds (it must free
    // space before it can write its checkpoint), the journal files it emptied are freed,
    // appends resume by themselves, and after a crash the log starts at the new log
    // start with every later acknowledged batch.
    for seed in 0..2 {
        let fs = sim();
        fs.set_capacity(Some(400 * 1024));
        let log = open(&fs);
        let k = key("dr", 0);
        let config = LogConfig {
            segment_bytes: 16 * 1024,
            ..LogConfig::default()
        };
        log.create_partition(k.clone(), config).expect("create");
        let mut acked = fill(&log, &k, 0);
        assert_full_but_serving(&log, &k, &acked);
        let end = log.offsets(&k).expect("offsets").high_watermark;
        let start = log.delete_records(&k, Offset(-1));
        assert_eq!(
            start.expect("DeleteRecords on a full disk"),
            end,
            "seed {seed}"
        );
        checkpointer_turn(&log);
        resume(&log, &k, 100_000, RESUMED, &mut acked);
        crash_and_check(&fs, log, &k, &acked, end.0, seed);
    }
}

#[test]
fn deleting_a_partition_on_a_full_disk_frees_space_and_appends_resume() {
    // Goal: deleting the partition that filled the disk frees its journal files while the
    // disk is full (failed checkpoints must not keep its segments, and so its journal
    // files, alive), and appends to another partition, whose older data shares the first
    // journal file, resume by themselves with nothing of theirs lost.
    for seed in 0..2 {
        let fs = sim();
        fs.set_capacity(Some(400 * 1024));
        let log = open(&fs);
        let (kept, filled) = (key("kept", 0), key("filled", 0));
        log.create_partition(kept.clone(), LogConfig::default())
            .expect("create");
        log.create_partition(filled.clone(), LogConfig::default())
            .expect("create");
        let mut kept_acked = Vec::new();
        for tag in 0..3 {
            let info = append_now(&log, &kept, tag).expect("append");
            kept_acked.push((tag, info.base_offset.0));
        }
        let acked = fill(&log, &filled, 10);
        assert_full_but_serving(&log, &filled, &acked);
        assert!(
            is_enospc(&append_now(&log, &kept, -1)),
            "full for every partition"
        );
        log.delete_partition(&filled)
            .expect("delete on a full disk");
        checkpointer_turn(&log);
        resume(&log, &kept, 100_000, RESUMED, &mut kept_acked);
        crash_and_check(&fs, log, &kept, &kept_acked, 0, seed);
    }
}

#[test]
fn retention_on_a_full_disk_frees_space_and_appends_resume() {
    // Goal: time retention deletes every expired segment while the disk is full, and
    // appends resume by themselves (the batches' timestamps are their tags, so all of
    // them are long expired at the retention pass's clock).
    for seed in 0..2 {
        let fs = sim();
        fs.set_capacity(Some(400 * 1024));
        let log = open(&fs);
        let k = key("ret", 0);
        let config = LogConfig {
            segment_bytes: 16 * 1024,
            retention_ms: 1_000,
            ..LogConfig::default()
        };
        log.create_partition(k.clone(), config).expect("create");
        let mut acked = fill(&log, &k, 0);
        assert_full_but_serving(&log, &k, &acked);
        let end = log.offsets(&k).expect("offsets").high_watermark;
        // The pass itself may fail to write on a full disk; it must still free space.
        let _ = log.enforce_retention(1_000_000);
        assert!(
            !log.is_poisoned(),
            "seed {seed}: retention poisoned the log"
        );
        assert_eq!(log.offsets(&k).expect("offsets").log_start_offset, end);
        checkpointer_turn(&log);
        resume(&log, &k, 1_000_000, RESUMED, &mut acked);
        crash_and_check(&fs, log, &k, &acked, end.0, seed);
    }
}

#[test]
fn recycled_journal_files_give_their_space_back_on_a_full_disk() {
    // Goal: the journal files a checkpoint keeps for reuse (up to 4) hold their space,
    // and the journal writes into one only when the current file is at its size limit.
    // When a disk holding just a few journal files fills early in the current file and
    // DeleteRecords then empties them, they all go to the free pool and free nothing, so
    // the current file cannot grow and the pool's space is never reached: a refused
    // round must give a recycled file's space back to the file system.
    for seed in 0..2 {
        let fs = sim();
        fs.set_capacity(Some(4 * JOURNAL_FILE_BYTES + 20 * 1024));
        let log = open(&fs);
        let k = key("pool", 0);
        let config = LogConfig {
            segment_bytes: 16 * 1024,
            ..LogConfig::default()
        };
        log.create_partition(k.clone(), config).expect("create");
        let mut acked = fill(&log, &k, 0);
        assert_full_but_serving(&log, &k, &acked);
        let end = log.offsets(&k).expect("offsets").high_watermark;
        let start = log.delete_records(&k, Offset(-1));
        assert_eq!(start.expect("DeleteRecords on a full disk"), end);
        checkpointer_turn(&log);
        resume(&log, &k, 100_000, RESUMED, &mut acked);
        crash_and_check(&fs, log, &k, &acked, end.0, seed);
    }
}
