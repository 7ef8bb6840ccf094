//! Damage found by reads, not by recovery: a batch in the middle of a segment whose journal
//! bytes were damaged after the log trusted them (a clean stop, so the open checks no
//! CRC), or under a running log written through the page cache.
//!
//! What must hold, for damage of every kind (100 zeroed bytes inside the records, a
//! flipped length, offset delta, magic or base offset):
//! - fetches of the damaged batch's offsets fail with `Damaged` (CORRUPT_MESSAGE), on the
//!   fetch path (`read_ranges`) and the byte path (`read`) alike;
//! - every other batch is served with the bytes that were appended, including the batches
//!   after the damage and before the next index entry; a read that starts before the damage
//!   ends at the last intact batch before it;
//! - a consumer that skips an offset each time it gets `Damaged` reads every intact batch
//!   exactly once and loses only the damaged batch's offsets.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use sluice_log::fs::StdFs;
use sluice_log::{LogConfig, LogError, LogManager, LogManagerConfig, Offset, PartitionKey};

const BATCHES: i64 = 40;
/// One index entry per this many bytes: about one per 10 batches.
const INDEX_INTERVAL_BYTES: u32 = 4096;

/// The kinds of damage: (name, byte of the batch, bytes written there; `None` flips a bit).
const KINDS: [(&str, u64, Option<[u8; 100]>); 5] = [
    ("zeroed records", 70, Some([0u8; 100])),
    ("length", 10, None),
    ("offset delta", 26, None),
    ("magic", 16, None),
    ("base offset", 7, None),
];

/// Segments of 1 MiB (all 40 batches in one) and an index entry about every 10 batches.
fn sparse_index() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: INDEX_INTERVAL_BYTES,
        retention_ms: -1,
        retention_bytes: -1,
        ..LogConfig::default()
    }
}

/// Appends the batches; returns each one's bytes by base offset.
async fn fill(log: &LogManager, k: &PartitionKey) -> BTreeMap<i64, Vec<u8>> {
    log.create_partition(k.clone(), sparse_index())
        .expect("create");
    let mut out = BTreeMap::new();
    for tag in 0..BATCHES {
        let records = bytes(2 + (tag % 4) as i32, 100, tag);
        let info = append(log, k, records.clone()).await;
        let mut stored = records.to_vec();
        sluice_log::batch::stamp_base_offset(&mut stored, info.base_offset);
        out.insert(info.base_offset.0, stored);
    }
    out
}

/// The batch to damage: the one right after the first index entry's batch, so that the
/// walk of a read comes to it from that entry, intact batches follow it before the next
/// entry (the stretch a read used to lose), and the open's header walk, which starts at
/// the last entry, never passes it. Entries are placed by the log's rule (`index.rs`): at
/// a batch once `INDEX_INTERVAL_BYTES` were written since the previous entry.
fn target(data: &Path, k: &PartitionKey) -> usize {
    let segments = segment_files(&partition_dir(data, k));
    assert_eq!(segments.len(), 1, "one segment");
    let (mut since, mut entries) = (0u64, Vec::new());
    for (i, (position, _, _, len)) in segment_batches(data, &segments[0]).into_iter().enumerate() {
        if since >= u64::from(INDEX_INTERVAL_BYTES) && position > 0 {
            entries.push(i);
            since = 0;
        }
        since += len;
    }
    assert!(
        entries.len() >= 2 && entries[1] - entries[0] >= 4,
        "{entries:?}"
    );
    entries[0] + 1
}

/// Damages batch `victim` where the journal holds it.
fn damage(data: &Path, k: &PartitionKey, victim: usize, at: u64, zeros: Option<[u8; 100]>) {
    let segments = segment_files(&partition_dir(data, k));
    let (_, seq, position, len) = segment_batches(data, &segments[0])[victim];
    assert!(at + 100 < len, "damage inside the batch");
    let path = journal_path(data, seq);
    match zeros {
        Some(zeros) => {
            use std::os::unix::fs::FileExt;
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .expect("open journal");
            file.write_all_at(&zeros, position + at).expect("zero");
        }
        None => flip_bit(&path, position + at),
    }
}

/// Checks every fetch offset both ways, then reads like a consumer that skips an offset
/// after each `Damaged`.
fn check_confined(
    what: &str,
    log: &LogManager,
    k: &PartitionKey,
    batches: &BTreeMap<i64, Vec<u8>>,
    victim: usize,
) {
    let bases: Vec<i64> = batches.keys().copied().collect();
    let (lost_from, lost_to) = (bases[victim], bases[victim + 1]);
    let high_watermark = log.offsets(k).expect("offsets").high_watermark.0;
    for offset in 0..high_watermark {
        let ranges = log.read_ranges(k, Offset(offset), 1 << 20, true);
        let bytes = log.read(k, Offset(offset), 1 << 20, true);
        if (lost_from..lost_to).contains(&offset) {
            assert!(
                matches!(ranges, Err(LogError::Damaged { .. })),
                "{what}: offset {offset}: {ranges:?}"
            );
            assert!(
                matches!(bytes, Err(LogError::Damaged { .. })),
                "{what}: {offset}"
            );
            continue;
        }
        let got = ranges
            .unwrap_or_else(|e| panic!("{what}: offset {offset} ({lost_from}..{lost_to}): {e:?}"))
            .to_vec()
            .expect("read ranges");
        assert_eq!(
            got,
            bytes.expect("served").records.to_vec(),
            "{what}: {offset}"
        );
        // From the batch holding the offset up to the damage, or to the end.
        let first = bases.partition_point(|&b| b <= offset) - 1;
        let last = match first < victim {
            true => victim,
            false => bases.len(),
        };
        let want: Vec<u8> = bases[first..last]
            .iter()
            .flat_map(|b| batches[b].iter().copied())
            .collect();
        assert_eq!(got, want, "{what}: offset {offset}");
    }
    let (mut next, mut served, mut skipped) = (0, Vec::new(), Vec::new());
    while next < high_watermark {
        match log.read_ranges(k, Offset(next), 4096, true) {
            Ok(r) => {
                let records = bytes::Bytes::from(r.to_vec().expect("read"));
                for batch in sluice_log::batch::BatchIter::new(records) {
                    let batch = batch.expect("whole batches");
                    let h = header(&batch);
                    assert_eq!(batch.to_vec(), batches[&h.base_offset().0], "{what}");
                    served.push(h.base_offset().0);
                    next = h.last_offset().0 + 1;
                }
            }
            Err(LogError::Damaged { .. }) => {
                skipped.push(next);
                next += 1;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
    let intact: Vec<i64> = bases.iter().copied().filter(|&b| b != lost_from).collect();
    assert_eq!(served, intact, "{what}: every intact batch once, in order");
    assert_eq!(skipped, (lost_from..lost_to).collect::<Vec<_>>(), "{what}");
}

fn manager_config(dir: &Path, direct_io: bool) -> LogManagerConfig {
    let mut config = config(dir);
    config.journal_direct_io = direct_io;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_in_a_stopped_logs_journal_costs_that_batch_only() {
    // Goal: damage made to the journal bytes of a batch in the middle of a segment while
    // the log was stopped (cleanly: the open trusts the segment and checks no CRC, and the
    // index files do not lead past the damage) is found by the reads and confined to that
    // batch, whatever field it hit.
    for (what, at, zeros) in KINDS {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key("stopped", 0);
        let (log, _) = LogManager::open(
            manager_config(dir.path(), journal_direct_io()),
            Arc::new(StdFs),
        )
        .expect("open");
        let batches = fill(&log, &k).await;
        log.shutdown().expect("shutdown");
        drop(log);
        let victim = target(dir.path(), &k);
        damage(dir.path(), &k, victim, at, zeros);
        let (log, report) = LogManager::open(
            manager_config(dir.path(), journal_direct_io()),
            Arc::new(StdFs),
        )
        .expect("reopen");
        assert!(
            report.actions.iter().all(|a| !a.contains("damaged")),
            "{what}: {:?}",
            report.actions
        );
        log.set_config(&k, sparse_index()).expect("config");
        check_confined(what, &log, &k, &batches, victim);
        log.shutdown().expect("shutdown");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damage_under_a_running_log_is_found_on_its_first_read() {
    // Goal: with the journal written through the page cache, damage made to a batch's
    // journal bytes under the running log before anything read them back is found by the
    // first reads and confined to that batch. (With direct I/O the newest bytes are served
    // from the in-memory tail as written, so such damage is not even seen.)
    for (what, at, zeros) in KINDS {
        let dir = tempfile::tempdir().expect("tempdir");
        let k = key("running", 0);
        let (log, _) =
            LogManager::open(manager_config(dir.path(), false), Arc::new(StdFs)).expect("open");
        let batches = fill(&log, &k).await;
        log.checkpoint_now().expect("checkpoint");
        let victim = target(dir.path(), &k);
        damage(dir.path(), &k, victim, at, zeros);
        check_confined(what, &log, &k, &batches, victim);
        log.shutdown().expect("shutdown");
    }
}

/// CPU time of this thread so far (user + system), in milliseconds.
#[allow(unsafe_code)]
fn thread_cpu_ms() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer for the calling thread's CPU clock.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e3 + ts.tv_nsec as f64 / 1e6
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, not a check: run with --ignored --nocapture"]
async fn measure_the_first_read_check() {
    // Method: 64 MiB of 16 KiB batches in 4 partitions (interleaved in the journal), clean
    // stop, reopen (nothing in the in-memory tail), then read every partition through
    // `read_ranges` in 1 MiB fetches twice, with the journal files in the page cache: the
    // first pass checks every batch (read + CRC-32C), the second finds it all verified.
    // Prints the reader thread's CPU per MB for each pass.
    let dir = tempfile::tempdir().expect("tempdir");
    let keys: Vec<PartitionKey> = (0..4).map(|p| key("measure", p)).collect();
    let (log, _) = LogManager::open(config(dir.path()), Arc::new(StdFs)).expect("open");
    for k in &keys {
        create(&log, k);
    }
    for tag in 0..1024 {
        for k in &keys {
            append(&log, k, bytes(16, 1000, tag)).await;
        }
    }
    log.shutdown().expect("shutdown");
    drop(log);
    for path in journal_files(dir.path()) {
        std::fs::read(path).expect("warm the page cache");
    }
    let (log, _) = LogManager::open(config(dir.path()), Arc::new(StdFs)).expect("reopen");
    let batch_len = bytes(16, 1000, 0).len();
    for pass in ["first (checks)", "second (verified)"] {
        let (cpu, mut bytes) = (thread_cpu_ms(), 0usize);
        for k in &keys {
            let end = log.offsets(k).expect("offsets").high_watermark;
            let mut next = Offset(0);
            while next < end {
                let r = log.read_ranges(k, next, 1 << 20, true).expect("read");
                bytes += r.len;
                assert!(r.len > 0 && r.len % batch_len == 0, "whole batches");
                next = Offset(next.0 + 16 * (r.len / batch_len) as i64);
            }
        }
        let ms = thread_cpu_ms() - cpu;
        println!(
            "{pass}: {:.1} MB, {:.3} ms CPU per MB",
            bytes as f64 / 1e6,
            ms / (bytes as f64 / 1e6)
        );
    }
}
