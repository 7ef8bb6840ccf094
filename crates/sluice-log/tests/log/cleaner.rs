//! The log cleaner through the public API: the key rules (newest per key, offsets kept,
//! tombstones and `delete.retention.ms` (counted from the pass that first saw them), keyless records, compressed batches rebuilt with
//! their codec, producers' newest batches kept), cleaned segments surviving a reopen, and
//! the crash-safe swap on the fault-injecting `SimFs` (a power cut after every file
//! operation of a pass, then a crash: old or new segment, never a loss), delete horizons
//! across restarts and crashes, and transactions (aborted data, markers, open
//! transactions) as Kafka's cleaner treats them.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::{config, key, partition_dir};
use bytes::Bytes;
use sluice_log::batch::{
    validate_stored, Attributes, BatchFields, BatchHeader, BatchIter, HEADER_LEN,
};
use sluice_log::fs::{Fs, StdFs};
use sluice_log::sim_fs::{SimFs, SimRng};
use sluice_log::{
    AbortedTxn, ControlType, IsolationLevel, LogConfig, LogManager, Offset, PartitionKey,
    ProducerEpoch, ProducerId, RecordCodec, RecordKey,
};
use sluice_protocol::record_compact::{self, RecordView};
use sluice_protocol::record_walk::{Compression, WalkLimits};

const LIMITS: WalkLimits = WalkLimits {
    decompressed_bytes_max: 1 << 20,
    zstd_window_log_max: 23,
};
const NOW_MS: i64 = 1_700_000_000_000;
const DELETE_RETENTION_MS: i64 = 60_000;

/// The broker's codec, as the broker wires it.
#[derive(Debug)]
struct ProtoCodec;

impl RecordCodec for ProtoCodec {
    fn scan(&self, batch: &[u8], visit: &mut dyn FnMut(RecordKey<'_>)) -> Result<(), String> {
        record_compact::scan(batch, &LIMITS, &mut |r: RecordView<'_>| {
            visit(RecordKey {
                offset_delta: r.offset_delta,
                timestamp_ms: r.timestamp,
                key: r.key,
                tombstone: r.value.is_none(),
            })
        })
        .map_err(|e| e.to_string())
    }

    fn rebuild(
        &self,
        batch: &[u8],
        keep: &mut dyn FnMut(i32) -> bool,
        delete_horizon_ms: Option<i64>,
        out: &mut Vec<u8>,
    ) -> Result<i32, String> {
        record_compact::rebuild(batch, &LIMITS, keep, delete_horizon_ms, out)
            .map_err(|e| e.to_string())
    }
}

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// One record: key (None = keyless), value (None = tombstone).
type Rec<'a> = (Option<&'a str>, Option<&'a str>);

/// A v2 batch of `records` with codec id `codec`, timestamp `ts`, and optionally producer
/// (id, epoch, base sequence).
fn keyed_batch(
    records: &[Rec<'_>],
    ts: i64,
    codec: i16,
    producer: Option<(i64, i16, i32)>,
) -> Bytes {
    let mut body = Vec::new();
    for (i, (k, v)) in records.iter().enumerate() {
        let mut r = vec![0u8];
        put_varint(&mut r, 0);
        put_varint(&mut r, i as i64);
        for field in [k, v] {
            match field {
                Some(s) => {
                    put_varint(&mut r, s.len() as i64);
                    r.extend_from_slice(s.as_bytes());
                }
                None => put_varint(&mut r, -1),
            }
        }
        put_varint(&mut r, 0);
        put_varint(&mut body, r.len() as i64);
        body.extend_from_slice(&r);
    }
    let codec = Compression::from_id(codec).expect("a Kafka codec");
    let body = record_compact::compress(codec, &body).unwrap();
    let count = records.len() as i32;
    let (pid, epoch, seq) = producer.unwrap_or((-1, -1, -1));
    let fields = BatchFields {
        attributes: Attributes(0).with_compression(codec),
        last_offset_delta: count - 1,
        base_timestamp: ts,
        max_timestamp: ts,
        producer_id: ProducerId(pid),
        producer_epoch: ProducerEpoch(epoch),
        base_sequence: seq,
        records_count: count,
        ..BatchFields::default()
    };
    Bytes::from(fields.to_batch(&body))
}

type Seen = BTreeMap<i64, (Option<String>, Option<String>)>;

/// Every record from the log start to the high watermark, by offset; checks that batches
/// are consecutive and CRC-valid.
fn read_records(log: &LogManager, key: &PartitionKey) -> Seen {
    let offsets = log.offsets(key).expect("offsets");
    let mut next = offsets.log_start_offset;
    let mut seen = Seen::new();
    while next < offsets.high_watermark {
        let result = log.read(key, next, 64 * 1024, true).expect("read");
        assert!(!result.records.is_empty(), "empty read at {next:?}");
        for batch in BatchIter::new(result.records) {
            let batch = batch.expect("whole batch");
            let header = validate_stored(&batch).expect("stored batch intact");
            assert!(
                header.base_offset() <= next || seen.is_empty(),
                "batches are consecutive"
            );
            let base = header.base_offset().0;
            record_compact::scan(&batch, &LIMITS, &mut |r| {
                let text = |b: Option<&[u8]>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
                if base + i64::from(r.offset_delta) >= next.0 {
                    seen.insert(
                        base + i64::from(r.offset_delta),
                        (text(r.key), text(r.value)),
                    );
                }
            })
            .expect("records decode");
            next = Offset(header.last_offset().0 + 1);
        }
    }
    seen
}

fn compacted() -> LogConfig {
    LogConfig {
        segment_bytes: 400,
        cleanup_compact: true,
        cleanup_delete: false,
        min_cleanable_dirty_ratio: 0.0,
        delete_retention_ms: DELETE_RETENTION_MS,
        ..LogConfig::default()
    }
}

fn open(dir: &std::path::Path, fs: Arc<dyn Fs>) -> LogManager {
    let mut config = config(dir);
    config.record_codec = Some(Arc::new(ProtoCodec));
    config.cleaner.enable = false; // passes run through `clean_now`
    LogManager::open(config, fs).expect("open").0
}

async fn append(log: &LogManager, key: &PartitionKey, batch: Bytes) -> i64 {
    crate::common::append(log, key, batch).await.base_offset.0
}

/// The newest record per key (tombstones included) of everything written.
fn newest(written: &Seen) -> Seen {
    let mut by_key: BTreeMap<Option<String>, (i64, Option<String>)> = BTreeMap::new();
    for (offset, (k, v)) in written {
        if k.is_some() {
            by_key.insert(k.clone(), (*offset, v.clone()));
        }
    }
    by_key.into_iter().map(|(k, (o, v))| (o, (k, v))).collect()
}

/// Writes 40 single-record batches over 4 keys (a tombstone for k3 last, a keyless record
/// early), rolled into many small segments, and one more batch in the active segment.
async fn write_versions(log: &LogManager, key: &PartitionKey) -> Seen {
    let mut written = Seen::new();
    for i in 0..40 {
        let k = format!("k{}", i % 4);
        let v = format!("v{i}");
        let rec: Rec<'_> = match i {
            3 => (None, Some("keyless")),
            39 => (Some(k.as_str()), None),
            _ => (Some(k.as_str()), Some(v.as_str())),
        };
        let offset = append(log, key, keyed_batch(&[rec], NOW_MS + i, 0, None)).await;
        written.insert(offset, (rec.0.map(str::to_owned), rec.1.map(str::to_owned)));
    }
    // Fillers with keys of their own, so the versions above are all in sealed segments.
    for i in 0..8 {
        let k = format!("z{i}");
        let rec: Rec<'_> = (Some(k.as_str()), Some("z"));
        let offset = append(log, key, keyed_batch(&[rec], NOW_MS + 40 + i, 0, None)).await;
        written.insert(offset, (Some(k), Some("z".to_owned())));
    }
    written
}

/// Base offset of the active segment (the newest `.extents` file).
fn active_base(dir: &std::path::Path, k: &PartitionKey) -> i64 {
    let files = crate::common::segment_files(&partition_dir(dir, k));
    crate::common::segment_base(files.last().expect("a segment"))
}

/// What a pass leaves: the newest record per key below the active segment, and the active
/// segment as written.
fn expected_after(written: &Seen, active: i64) -> Seen {
    let cleanable: Seen = written
        .range(..active)
        .map(|(o, r)| (*o, r.clone()))
        .collect();
    newest(&cleanable)
        .into_iter()
        .chain(written.range(active..).map(|(o, r)| (*o, r.clone())))
        .collect()
}

#[tokio::test]
async fn cleaning_keeps_the_newest_record_per_key_at_its_offset() {
    // Goal: after a pass, a read from the start sees exactly the newest record per key at
    // its original offset (the recent tombstone included), the watermarks are unchanged,
    // and the result survives a reopen, which finds nothing dirty (cleaner checkpoint). A later pass past delete.retention.ms removes the
    // tombstone.
    let dir = tempfile::tempdir().unwrap();
    let k = key("compacted", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let written = write_versions(&log, &k).await;
    log.checkpoint_now().unwrap();
    let before = log.offsets(&k).unwrap();
    assert_eq!(read_records(&log, &k), written);

    let segments_before = crate::common::segment_files(&partition_dir(dir.path(), &k)).len();
    let passes = log.clean_now(NOW_MS + 100).unwrap();
    let segments_after = crate::common::segment_files(&partition_dir(dir.path(), &k)).len();
    assert!(
        segments_after < segments_before / 2,
        "emptied segments merge: {segments_before} -> {segments_after}"
    );
    assert_eq!(passes.len(), 1, "{passes:?}");
    assert!(passes[0].segments_cleaned > 0 && passes[0].bytes_after < passes[0].bytes_before);
    let after = read_records(&log, &k);
    let active = active_base(dir.path(), &k);
    assert!(active > 39, "the versions are in sealed segments");
    assert_eq!(after, expected_after(&written, active));
    assert_eq!(
        after.get(&39),
        Some(&(Some("k3".to_owned()), None)),
        "recent tombstone kept"
    );
    let offsets = log.offsets(&k).unwrap();
    assert_eq!(offsets.high_watermark, before.high_watermark);
    assert_eq!(offsets.log_start_offset, before.log_start_offset);
    let stats = log.stats();
    assert_eq!(stats.cleaner_passes, 1);
    assert!(stats.cleaner_records_removed >= 30, "{stats:?}");

    log.shutdown().unwrap();
    drop(log);
    let log = open(dir.path(), Arc::new(StdFs));
    log.set_config(&k, compacted()).unwrap();
    assert_eq!(
        read_records(&log, &k),
        after,
        "cleaned segments survive a reopen"
    );
    // The cleaner checkpoint says how far the first run cleaned: nothing is dirty.
    assert_eq!(
        log.clean_now(NOW_MS + 200).unwrap(),
        Vec::new(),
        "a restart does not clean again what was cleaned"
    );

    // New data makes the log dirty again; past delete.retention.ms the tombstone goes.
    let mut written2 = after.clone();
    for i in 0..12 {
        let v = format!("w{i}");
        let rec: Rec<'_> = (Some("k0"), Some(v.as_str()));
        let offset = append(&log, &k, keyed_batch(&[rec], NOW_MS + 100 + i, 0, None)).await;
        written2.insert(offset, (Some("k0".into()), Some(v)));
    }
    log.checkpoint_now().unwrap();
    log.clean_now(NOW_MS + DELETE_RETENTION_MS + 1_000).unwrap();
    let last = read_records(&log, &k);
    assert!(
        last.values().all(|(key, _)| key.as_deref() != Some("k3")),
        "tombstone removed after delete.retention.ms: {last:?}"
    );
    assert!(last.values().any(|(key, _)| key.as_deref() == Some("k1")));
    assert_eq!(
        log.offsets(&k).unwrap().high_watermark.0,
        *written2.keys().last().unwrap() + 1
    );
}

#[tokio::test]
async fn a_tombstone_ages_from_the_pass_that_first_saw_it() {
    // Goal: as in Kafka >= 3.1 (KIP-534), delete.retention.ms counts from the pass that
    // first saw a tombstone, not from its timestamp: a tombstone produced with a timestamp
    // far in the past survives that pass (its batch stamped with the delete horizon) and a
    // pass just before the horizon, and a pass after it removes it, although nothing new
    // was written meanwhile (the horizon alone makes the partition due).
    let dir = tempfile::tempdir().unwrap();
    let k = key("aging", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let old_ts = NOW_MS - 100 * DELETE_RETENTION_MS;
    append(
        &log,
        &k,
        keyed_batch(&[(Some("k0"), Some("v"))], old_ts, 0, None),
    )
    .await;
    let tombstone = append(
        &log,
        &k,
        keyed_batch(&[(Some("k0"), None)], old_ts, 0, None),
    )
    .await;
    for i in 0..8 {
        let z = format!("z{i}");
        append(
            &log,
            &k,
            keyed_batch(&[(Some(z.as_str()), Some("z"))], NOW_MS, 0, None),
        )
        .await;
    }
    log.checkpoint_now().unwrap();
    let is_there = |log: &LogManager| {
        read_records(log, &k).get(&tombstone) == Some(&(Some("k0".to_owned()), None))
    };

    let first = log.clean_now(NOW_MS).unwrap();
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(is_there(&log), "kept by the pass that first saw it");
    assert!(
        !read_records(&log, &k).contains_key(&(tombstone - 1)),
        "older value removed"
    );
    let early = log.clean_now(NOW_MS + DELETE_RETENTION_MS - 1).unwrap();
    assert!(early.is_empty(), "not due before the horizon: {early:?}");
    assert!(is_there(&log));
    let late = log.clean_now(NOW_MS + DELETE_RETENTION_MS).unwrap();
    assert_eq!(
        late.len(),
        1,
        "due at the horizon with nothing dirty: {late:?}"
    );
    assert!(!is_there(&log), "removed once the horizon has passed");
    assert!(read_records(&log, &k)
        .values()
        .any(|(key, _)| key.as_deref() == Some("z0")));
    assert!(log
        .clean_now(NOW_MS + 10 * DELETE_RETENTION_MS)
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn compressed_batches_are_rebuilt_with_their_codec() {
    // Goal: batches of several records under every codec lose exactly their superseded
    // records; the survivors keep their offsets and decode.
    let dir = tempfile::tempdir().unwrap();
    let k = key("codecs", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let mut written = Seen::new();
    for round in 0..3 {
        for codec in 0..=4i16 {
            let keys: Vec<String> = (0..3).map(|i| format!("c{codec}-{i}")).collect();
            let values: Vec<String> = (0..3).map(|i| format!("r{round}-{i}")).collect();
            // The first record's key is rewritten every round; the others only once.
            let recs: Vec<Rec<'_>> = (0..3)
                .map(|i| {
                    let key = if i == 0 || round == 0 {
                        Some(keys[i].as_str())
                    } else {
                        None
                    };
                    (key, Some(values[i].as_str()))
                })
                .collect();
            let offset = append(&log, &k, keyed_batch(&recs, NOW_MS, codec, None)).await;
            for (i, (key, value)) in recs.iter().enumerate() {
                written.insert(
                    offset + i as i64,
                    (key.map(str::to_owned), value.map(str::to_owned)),
                );
            }
        }
    }
    for i in 0..6 {
        let t = format!("tail{i}");
        let rec: Rec<'_> = (Some(t.as_str()), Some("x"));
        let offset = append(&log, &k, keyed_batch(&[rec], NOW_MS, 0, None)).await;
        written.insert(offset, (Some(t), Some("x".into())));
    }
    log.checkpoint_now().unwrap();
    let passes = log.clean_now(NOW_MS).unwrap();
    assert!(passes.iter().any(|p| p.segments_cleaned > 0), "{passes:?}");
    let after = read_records(&log, &k);
    assert_eq!(after, expected_after(&written, active_base(dir.path(), &k)));
    assert!(after.len() < written.len(), "something was removed");
}

#[tokio::test]
async fn a_producers_newest_batch_survives_cleaning() {
    // Goal: an idempotent producer whose newest batch was wholly superseded keeps it as an
    // empty batch: its next sequence is accepted and a retry is still a duplicate.
    let dir = tempfile::tempdir().unwrap();
    let k = key("producers", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let p = |seq| Some((7i64, 0i16, seq));
    append(
        &log,
        &k,
        keyed_batch(&[(Some("a"), Some("1"))], NOW_MS, 0, p(0)),
    )
    .await;
    let second = keyed_batch(&[(Some("a"), Some("2"))], NOW_MS, 0, p(1));
    let second_offset = append(&log, &k, second.clone()).await;
    for i in 0..12 {
        let v = format!("{i}");
        append(
            &log,
            &k,
            keyed_batch(&[(Some("a"), Some(v.as_str()))], NOW_MS, 0, None),
        )
        .await;
    }
    log.checkpoint_now().unwrap();
    log.clean_now(NOW_MS).unwrap();
    let read = log.read(&k, Offset(second_offset), 1 << 20, true).unwrap();
    let first = BatchIter::new(read.records).next().unwrap().unwrap();
    let header = validate_stored(&first).unwrap();
    assert_eq!(header.base_offset().0, second_offset);
    assert_eq!((header.producer_id().0, header.records_count()), (7, 0));
    let retry = crate::common::try_append(&log, &k, second).await.unwrap();
    assert!(
        retry.duplicate,
        "a retry of the newest batch is still a duplicate"
    );
    let next = keyed_batch(&[(Some("a"), Some("3"))], NOW_MS, 0, p(2));
    crate::common::try_append(&log, &k, next)
        .await
        .expect("next sequence accepted");
}

#[tokio::test]
async fn a_crash_at_any_step_of_a_pass_keeps_old_or_new_segments() {
    // Goal: a power cut after each file operation of a pass, then a crash (both modes),
    // loses nothing: after reopening, the newest record of every key is there at its
    // offset, nothing else appears that was not written at that offset, and every batch
    // reads back intact.
    let mut cut = 1u64;
    let mut rng = SimRng::new(13);
    loop {
        for _draw in 0..3 {
            let fs = SimFs::new();
            let dir = std::path::Path::new("/data");
            fs.create_dir_all_durable(dir).unwrap();
            let k = key("crash", 0);
            let log = open(dir, Arc::new(fs.clone()));
            log.create_partition(k.clone(), compacted()).unwrap();
            let mut written = write_versions(&log, &k).await;
            log.checkpoint_now().unwrap();
            // Acknowledged after the last checkpoint: recovery replays these from the
            // journal next to the cleaned segments.
            for i in 0..10 {
                let key = format!("k{}", i % 4);
                let rec: Rec<'_> = (Some(key.as_str()), Some("late"));
                let offset = append(&log, &k, keyed_batch(&[rec], NOW_MS + 60, 0, None)).await;
                written.insert(offset, (Some(key), Some("late".to_owned())));
            }
            fs.cut_power_after(cut);
            let result = log.clean_now(NOW_MS + 100);
            let finished = !fs.is_power_cut();
            drop(log);
            fs.crash(&mut rng);
            let log = open(dir, Arc::new(fs.clone()));
            log.set_config(&k, compacted()).unwrap();
            let after = read_records(&log, &k);
            for (offset, record) in newest(&written) {
                assert_eq!(
                    after.get(&offset),
                    Some(&record),
                    "cut {cut}: newest at {offset} lost"
                );
            }
            for (offset, record) in &after {
                assert_eq!(
                    written.get(offset),
                    Some(record),
                    "cut {cut}: invented at {offset}"
                );
            }
            let names = fs.read_dir(&partition_dir(dir, &k)).unwrap();
            assert!(
                !names.iter().any(|e| e.name.ends_with(".cleaned")),
                "cut {cut}: recovery removes unfinished cleaned segments"
            );
            drop(log);
            if finished {
                assert!(result.is_ok(), "{result:?}");
                assert!(cut > 5, "the pass did some file operations");
                return;
            }
        }
        cut += 1;
        assert!(cut < 10_000, "the pass ends");
    }
}

#[tokio::test]
async fn a_small_key_map_cleans_in_several_passes() {
    // Goal: a key map bounded far below the dirty data (6 entries for 48 records) still
    // ends with the newest record per key: each pass cleans as many dirty segments as its
    // map covers, and the next pass goes on from there.
    let dir = tempfile::tempdir().unwrap();
    let k = key("small-map", 0);
    let mut config = config(dir.path());
    config.record_codec = Some(Arc::new(ProtoCodec));
    config.cleaner.enable = false;
    config.cleaner.dedupe_buffer_bytes = 6 * sluice_log::cleaner::KEY_MAP_ENTRY_BYTES;
    let log = LogManager::open(config, Arc::new(StdFs)).expect("open").0;
    log.create_partition(k.clone(), compacted()).unwrap();
    let written = write_versions(&log, &k).await;
    log.checkpoint_now().unwrap();
    let passes = log.clean_now(NOW_MS + 100).unwrap();
    assert!(passes.len() > 1, "the bound splits the work: {passes:?}");
    assert_eq!(
        read_records(&log, &k),
        expected_after(&written, active_base(dir.path(), &k))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_for_a_throttled_pass() {
    // Goal: a cleaner thread deep in a pass throttled by
    // log.cleaner.io.max.bytes.per.second stops within a fraction of a second when the log
    // shuts down (the pass is dropped; nothing half-swapped), instead of finishing the pass.
    let dir = tempfile::tempdir().unwrap();
    let k = key("throttled", 0);
    let mut config = config(dir.path());
    config.record_codec = Some(Arc::new(ProtoCodec));
    config.cleaner.backoff_ms = 10;
    config.cleaner.io_max_bytes_per_second = 500; // ~8 s for this partition's bytes
    let log = LogManager::open(config, Arc::new(StdFs)).expect("open").0;
    log.create_partition(
        k.clone(),
        LogConfig {
            min_compaction_lag_ms: 0,
            ..compacted()
        },
    )
    .unwrap();
    let written = write_versions(&log, &k).await;
    log.checkpoint_now().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while log.stats().cleaner_bytes_read == 0 {
        assert!(std::time::Instant::now() < deadline, "the cleaner started");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let started = std::time::Instant::now();
    log.shutdown().unwrap();
    let took = started.elapsed();
    assert!(
        took < std::time::Duration::from_millis(1500),
        "shutdown took {took:?}"
    );
    drop(log);
    let log = open(dir.path(), Arc::new(StdFs));
    assert_eq!(
        read_records(&log, &k),
        written,
        "nothing was swapped half-way"
    );
}

/// Writes `k0`..`k7` twice each, cleans them (a pass that stamps nothing; what it leaves
/// fills more than a segment, so a later pass does not merge it all into one dirty
/// segment), then a tombstone for `k0` and fillers. Returns the tombstone's offset.
async fn values_then_a_tombstone(log: &LogManager, k: &PartitionKey) -> i64 {
    let value = "v".repeat(100);
    for i in 0..16 {
        let key = format!("k{}", i % 8);
        let rec: Rec<'_> = (Some(key.as_str()), Some(value.as_str()));
        append(log, k, keyed_batch(&[rec], NOW_MS, 0, None)).await;
    }
    log.checkpoint_now().unwrap();
    assert_eq!(log.clean_now(NOW_MS).unwrap().len(), 1);
    let tombstone = append(log, k, keyed_batch(&[(Some("k0"), None)], NOW_MS, 0, None)).await;
    for i in 0..8 {
        let z = format!("z{i}");
        let rec: Rec<'_> = (Some(z.as_str()), Some("z"));
        append(log, k, keyed_batch(&[rec], NOW_MS, 0, None)).await;
    }
    log.checkpoint_now().unwrap();
    tombstone
}

/// Whether the batch holding `offset` is stamped with a delete horizon and still holds
/// the record at `offset`.
fn stamped_and_there(log: &LogManager, k: &PartitionKey, offset: i64) -> bool {
    let read = log.read(k, Offset(offset), 1 << 20, true).unwrap();
    let Some(batch) = BatchIter::new(read.records).next() else {
        return false;
    };
    let batch = batch.unwrap();
    let header = validate_stored(&batch).unwrap();
    header.delete_horizon_ms().is_some() && read_records(log, k).contains_key(&offset)
}

#[tokio::test]
async fn a_delete_horizon_survives_a_restart() {
    // Goal: the latest delete horizon of a partition is kept in the cleaner checkpoint:
    // after a restart with nothing new written, a pass comes at the horizon by itself and
    // removes the tombstone (kept only in memory, the partition would wait for new data).
    let dir = tempfile::tempdir().unwrap();
    let k = key("horizon-restart", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let tombstone = values_then_a_tombstone(&log, &k).await;
    assert_eq!(log.clean_now(NOW_MS + 1).unwrap().len(), 1);
    assert!(stamped_and_there(&log, &k, tombstone), "stamped, kept");
    log.shutdown().unwrap();
    drop(log);

    let log = open(dir.path(), Arc::new(StdFs));
    log.set_config(&k, compacted()).unwrap();
    assert!(log
        .clean_now(NOW_MS + DELETE_RETENTION_MS)
        .unwrap()
        .is_empty());
    assert!(stamped_and_there(&log, &k, tombstone));
    let passes = log.clean_now(NOW_MS + 1 + DELETE_RETENTION_MS).unwrap();
    assert_eq!(
        passes.len(),
        1,
        "due at the horizon after a restart: {passes:?}"
    );
    assert!(!read_records(&log, &k).contains_key(&tombstone), "removed");
}

#[tokio::test]
async fn a_crash_after_stamping_keeps_the_delete_horizon() {
    // Goal: a power cut after each file operation of a pass that stamps a partition's
    // first tombstone, then a crash: whenever the stamped tombstone is on disk after the
    // reopen, a pass after its horizon removes it with nothing new written and a dirty
    // ratio that would never make the partition due (the horizon was stored before the
    // swap, not only with the pass's own checkpoint after it).
    let mut cut = 1u64;
    let mut rng = SimRng::new(29);
    let mut stamped_cuts = 0;
    loop {
        let fs = SimFs::new();
        let dir = std::path::Path::new("/data");
        fs.create_dir_all_durable(dir).unwrap();
        let k = key("horizon-crash", 0);
        let log = open(dir, Arc::new(fs.clone()));
        log.create_partition(k.clone(), compacted()).unwrap();
        let tombstone = values_then_a_tombstone(&log, &k).await;
        fs.cut_power_after(cut);
        let result = log.clean_now(NOW_MS + 1);
        let finished = !fs.is_power_cut();
        drop(log);
        fs.crash(&mut rng);
        let log = open(dir, Arc::new(fs.clone()));
        let never_dirty_enough = LogConfig {
            min_cleanable_dirty_ratio: 1.0,
            ..compacted()
        };
        log.set_config(&k, never_dirty_enough).unwrap();
        if stamped_and_there(&log, &k, tombstone) {
            stamped_cuts += 1;
            log.clean_now(NOW_MS + 1 + DELETE_RETENTION_MS).unwrap();
            assert!(
                !read_records(&log, &k).contains_key(&tombstone),
                "cut {cut}: a stamped tombstone outlived its horizon"
            );
        }
        drop(log);
        if finished {
            assert!(result.is_ok(), "{result:?}");
            assert!(stamped_cuts > 1, "some cuts left the stamp on disk");
            return;
        }
        cut += 1;
        assert!(cut < 10_000, "the pass ends");
    }
}

fn wall_clock_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.expect("after 1970").as_millis() as i64
}

/// `batch` marked transactional (attribute bit 4).
fn transactional(batch: Bytes) -> Bytes {
    let mut b = batch.to_vec();
    crate::common::set_transactional(&mut b, true);
    Bytes::from(b)
}

/// One transaction of `producer_id` (epoch 0): the partition verified, one batch of
/// `records` at sequence `seq`, then its marker. Returns the batch's base offset.
async fn transaction(
    log: &LogManager,
    k: &PartitionKey,
    producer_id: i64,
    seq: i32,
    records: &[Rec<'_>],
    control: Option<ControlType>,
) -> i64 {
    log.verify_txn(k, ProducerId(producer_id), ProducerEpoch(0))
        .await
        .expect("queued")
        .wait()
        .await
        .expect("verified");
    let batch = keyed_batch(records, NOW_MS, 0, Some((producer_id, 0, seq)));
    let offset = append(log, k, transactional(batch)).await;
    if let Some(control) = control {
        end_transaction(log, k, producer_id, control).await;
    }
    offset
}

async fn end_transaction(log: &LogManager, k: &PartitionKey, producer_id: i64, c: ControlType) {
    log.append_marker(k, ProducerId(producer_id), ProducerEpoch(0), c)
        .await
        .expect("queued")
        .wait()
        .await
        .expect("marker written");
}

/// Offsets of the control batches (markers) from the log start to the high watermark.
fn markers(log: &LogManager, k: &PartitionKey) -> Vec<i64> {
    let offsets = log.offsets(k).unwrap();
    let mut next = offsets.log_start_offset;
    let mut found = Vec::new();
    while next < offsets.high_watermark {
        let read = log.read(k, next, 64 * 1024, true).unwrap();
        for batch in BatchIter::new(read.records) {
            let batch = batch.unwrap();
            let header = validate_stored(&batch).unwrap();
            if header.is_control() && header.last_offset() >= next {
                found.push(header.base_offset().0);
            }
            next = Offset(header.last_offset().0 + 1);
        }
    }
    found
}

async fn fillers(log: &LogManager, k: &PartitionKey, tag: &str, count: usize) {
    for i in 0..count {
        let z = format!("{tag}{i}");
        let rec: Rec<'_> = (Some(z.as_str()), Some("z"));
        append(log, k, keyed_batch(&[rec], NOW_MS, 0, None)).await;
    }
    log.checkpoint_now().unwrap();
}

fn value_of(seen: &Seen, key: &str) -> Vec<(i64, Option<String>)> {
    seen.iter()
        .filter(|(_, (k, _))| k.as_deref() == Some(key))
        .map(|(o, (_, v))| (*o, v.clone()))
        .collect()
}

#[tokio::test]
async fn transactions_are_cleaned_as_kafka_cleans_them() {
    // Goal: aborted data goes like old versions and never hides an older committed value
    // (k0 and k2 keep T1's values over T2's aborted ones); committed transactional data is
    // compacted like any record (T3's k1 superseded); a marker stays while data of its
    // transaction remains (T1, T4), and one whose data is gone (T2 ABORT, T3 COMMIT)
    // stays through the pass that removed the data and the next one (which stamps its
    // delete horizon and forgets T2 in the aborted-transaction list), and goes at the
    // horizon (the ABORT marker once a producer snapshot without T2 is in force); the
    // producer goes on at its next sequence.
    let dir = tempfile::tempdir().unwrap();
    let k = key("txn-compacted", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    // Markers carry the wall clock: the passes run after it (min.compaction.lag.ms 0).
    let now = wall_clock_ms() + 1_000;
    use ControlType::{Abort, Commit};
    let recs_t1: [Rec<'_>; 3] = [
        (Some("k0"), Some("a1")),
        (Some("k1"), Some("a1")),
        (Some("k2"), Some("a1")),
    ];
    let t1 = transaction(&log, &k, 1, 0, &recs_t1, Some(Commit)).await;
    let recs_t2: [Rec<'_>; 2] = [(Some("k0"), Some("b2")), (Some("k2"), Some("b2"))];
    let t2 = transaction(&log, &k, 1, 3, &recs_t2, Some(Abort)).await;
    append(
        &log,
        &k,
        keyed_batch(&[(Some("k1"), Some("n3"))], NOW_MS, 0, None),
    )
    .await;
    let t3 = transaction(&log, &k, 1, 5, &[(Some("k1"), Some("c3"))], Some(Commit)).await;
    let t4 = transaction(&log, &k, 1, 6, &[(Some("k3"), Some("d4"))], Some(Commit)).await;
    let n5 = append(
        &log,
        &k,
        keyed_batch(&[(Some("k1"), Some("n5"))], NOW_MS, 0, None),
    )
    .await;
    fillers(&log, &k, "z", 8).await;
    let all_markers = vec![t1 + 3, t2 + 2, t3 + 1, t4 + 1];
    assert_eq!(markers(&log, &k), all_markers);

    assert_eq!(log.clean_now(now).unwrap().len(), 1);
    let after = read_records(&log, &k);
    assert_eq!(
        value_of(&after, "k0"),
        vec![(t1, Some("a1".into()))],
        "aborted b2 hides nothing"
    );
    assert_eq!(value_of(&after, "k2"), vec![(t1 + 2, Some("a1".into()))]);
    assert_eq!(value_of(&after, "k1"), vec![(n5, Some("n5".into()))]);
    assert_eq!(value_of(&after, "k3"), vec![(t4, Some("d4".into()))]);
    assert_eq!(
        markers(&log, &k),
        all_markers,
        "each marker's data was seen by this pass"
    );

    let listed = |log: &LogManager| {
        let mut listed: Vec<AbortedTxn> = Vec::new();
        let high_watermark = log.offsets(&k).unwrap().high_watermark;
        log.aborted_transactions(&k, Offset(0), high_watermark, &mut listed)
            .unwrap();
        listed
            .iter()
            .map(|a| (a.producer_id.0, a.first_offset.0, a.last_offset.0))
            .collect::<Vec<_>>()
    };
    assert_eq!(listed(&log), vec![(1, t2, t2 + 2)], "T2's data was there");

    fillers(&log, &k, "y", 8).await;
    assert_eq!(log.clean_now(now + 10).unwrap().len(), 1);
    assert_eq!(
        markers(&log, &k),
        all_markers,
        "stamped, kept for delete.retention.ms"
    );
    assert_eq!(
        listed(&log),
        Vec::new(),
        "T2 forgotten: readers must not skip anything of it, since its marker will go"
    );
    assert!(log
        .clean_now(now + 9 + DELETE_RETENTION_MS)
        .unwrap()
        .is_empty());
    // The forgetting raised a checkpoint; made sure of here, so the ABORT marker may go
    // (a restart cannot bring T2's entry back without it).
    log.checkpoint_now().unwrap();
    let passes = log.clean_now(now + 10 + DELETE_RETENTION_MS).unwrap();
    assert_eq!(passes.len(), 1, "due at the markers' horizon: {passes:?}");
    assert_eq!(
        markers(&log, &k),
        vec![t1 + 3, t4 + 1],
        "markers alone removed"
    );
    let last = read_records(&log, &k);
    assert_eq!(value_of(&last, "k0"), vec![(t1, Some("a1".into()))]);
    assert_eq!(value_of(&last, "k3"), vec![(t4, Some("d4".into()))]);

    let high_watermark = log.offsets(&k).unwrap().high_watermark;
    let mut out = Vec::new();
    let (committed_bytes, _, _) = log
        .read_ranges_isolated_into(
            &k,
            Offset(0),
            1 << 20,
            true,
            IsolationLevel::ReadCommitted,
            &mut out,
        )
        .unwrap();
    assert!(committed_bytes > 0);
    assert_eq!(log.offsets(&k).unwrap().last_stable_offset, high_watermark);
    let t5 = transaction(&log, &k, 1, 7, &[(Some("k3"), Some("e5"))], Some(Commit)).await;
    assert!(t5 > n5, "the producer goes on at its next sequence");
}

#[tokio::test]
async fn an_open_transaction_bounds_the_cleanable_range() {
    // Goal: nothing at or past the last stable offset is cleaned (an open transaction's
    // data, and every later version of a key); once the transaction commits, the next
    // pass cleans it all and keeps its data as the newest committed value.
    let dir = tempfile::tempdir().unwrap();
    let k = key("txn-open", 0);
    let now = wall_clock_ms() + 1_000;
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let mut written = Seen::new();
    for i in 0..8 {
        let v = format!("v{i}");
        let offset = append(
            &log,
            &k,
            keyed_batch(&[(Some("k0"), Some(v.as_str()))], NOW_MS, 0, None),
        )
        .await;
        written.insert(offset, (Some("k0".into()), Some(v)));
    }
    let open_at = transaction(&log, &k, 2, 0, &[(Some("k1"), Some("open"))], None).await;
    written.insert(open_at, (Some("k1".into()), Some("open".into())));
    for i in 8..24 {
        let v = format!("v{i}");
        let offset = append(
            &log,
            &k,
            keyed_batch(&[(Some("k0"), Some(v.as_str()))], NOW_MS, 0, None),
        )
        .await;
        written.insert(offset, (Some("k0".into()), Some(v)));
    }
    log.checkpoint_now().unwrap();
    assert_eq!(log.offsets(&k).unwrap().last_stable_offset.0, open_at);
    log.clean_now(now).unwrap();
    let after = read_records(&log, &k);
    for (offset, record) in written.range(open_at..) {
        assert_eq!(
            after.get(offset),
            Some(record),
            "{offset} is at or past the LSO"
        );
    }
    assert!(
        after.range(..open_at).count() < 8,
        "below the LSO was cleaned"
    );

    end_transaction(&log, &k, 2, ControlType::Commit).await;
    fillers(&log, &k, "z", 8).await;
    log.clean_now(now + 1).unwrap();
    let last = read_records(&log, &k);
    assert_eq!(value_of(&last, "k1"), vec![(open_at, Some("open".into()))]);
    assert_eq!(value_of(&last, "k0").len(), 1, "{last:?}");
}

/// Every batch from the log start to the high watermark, as stored, by base offset.
fn raw_batches(log: &LogManager, k: &PartitionKey) -> BTreeMap<i64, Bytes> {
    let offsets = log.offsets(k).unwrap();
    let mut next = offsets.log_start_offset;
    let mut found = BTreeMap::new();
    while next < offsets.high_watermark {
        let read = log.read(k, next, 64 * 1024, true).unwrap();
        for batch in BatchIter::new(read.records) {
            let batch = batch.unwrap();
            let header = validate_stored(&batch).unwrap();
            if header.last_offset() >= next {
                found.insert(header.base_offset().0, batch.clone());
            }
            next = Offset(header.last_offset().0 + 1);
        }
    }
    found
}

/// Appends one single-record batch per key of `keys` (value `value`, timestamp `ts`) and
/// notes each in `written`.
async fn put_keys(
    log: &LogManager,
    k: &PartitionKey,
    keys: &[String],
    value: &str,
    ts: i64,
    written: &mut Seen,
) {
    for key in keys {
        let rec: Rec<'_> = (Some(key.as_str()), Some(value));
        let offset = append(log, k, keyed_batch(&[rec], ts, 0, None)).await;
        written.insert(offset, (Some(key.clone()), Some(value.to_owned())));
    }
}

/// `count` keys cycling through `k0`..`k{distinct - 1}`.
fn cycling_keys(count: usize, distinct: usize) -> Vec<String> {
    (0..count).map(|i| format!("k{}", i % distinct)).collect()
}

/// Writes 17 batches at `t_old` (8 keys twice and one more), cleans them (leaving one
/// `t_old` batch in the active segment, so dirty), then 7 more versions at `t_new`: the
/// first dirty segment starts with a `t_old` batch and goes on with `t_new` ones, and the
/// dirty part is well below half the cleanable bytes.
async fn clean_then_dirty(log: &LogManager, k: &PartitionKey, t_old: i64, t_new: i64) -> Seen {
    let mut written = Seen::new();
    let value = "v".repeat(20);
    put_keys(log, k, &cycling_keys(17, 8), &value, t_old, &mut written).await;
    log.checkpoint_now().unwrap();
    assert_eq!(log.clean_now(t_old).unwrap().len(), 1);
    put_keys(log, k, &cycling_keys(7, 8), &value, t_new, &mut written).await;
    log.checkpoint_now().unwrap();
    written
}

#[tokio::test]
async fn max_compaction_lag_makes_a_partition_due_below_the_dirty_ratio() {
    // Goal: as in Kafka, a partition whose dirty part holds a record older than
    // max.compaction.lag.ms is cleaned whatever its dirty ratio, measured from the earliest
    // first-batch timestamp of its dirty segments (not from their newest record, which
    // would let an old record wait behind newer ones in its segment).
    const LAG_MS: i64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let k = key("max-lag", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let (t_old, t_new) = (NOW_MS, NOW_MS + LAG_MS / 2);
    let written = clean_then_dirty(&log, &k, t_old, t_new).await;
    let config = LogConfig {
        min_cleanable_dirty_ratio: 0.9,
        max_compaction_lag_ms: LAG_MS,
        ..compacted()
    };
    log.set_config(&k, config).unwrap();
    assert!(
        log.clean_now(t_old + LAG_MS - 1).unwrap().is_empty(),
        "below the dirty ratio and not yet overdue"
    );
    let passes = log.clean_now(t_old + LAG_MS + 1).unwrap();
    assert_eq!(
        passes.len(),
        1,
        "overdue by the oldest dirty batch: {passes:?}"
    );
    assert_eq!(
        read_records(&log, &k),
        expected_after(&written, active_base(dir.path(), &k))
    );
}

#[tokio::test]
async fn max_compaction_lag_rolls_a_quiet_active_segment_so_it_is_cleaned() {
    // Goal: on a compacted topic the active segment rolls at max.compaction.lag.ms when
    // that is shorter than segment.ms (Kafka's maxSegmentMs), with no append to trigger it,
    // so records nobody writes after are still cleaned within the lag.
    const LAG_MS: i64 = 5_000;
    let dir = tempfile::tempdir().unwrap();
    let k = key("quiet", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    let config = LogConfig {
        segment_bytes: 1 << 20,
        max_compaction_lag_ms: LAG_MS,
        ..compacted()
    };
    log.create_partition(k.clone(), config).unwrap();
    let mut written = Seen::new();
    let start = wall_clock_ms();
    put_keys(&log, &k, &cycling_keys(12, 3), "v", start, &mut written).await;
    log.checkpoint_now().unwrap();
    let segments = || crate::common::segment_files(&partition_dir(dir.path(), &k)).len();
    assert!(
        log.clean_now(start + 2 * LAG_MS).unwrap().is_empty(),
        "all active"
    );
    log.enforce_retention(start + LAG_MS / 5).unwrap();
    assert_eq!(segments(), 1, "younger than the lag: not rolled");
    log.enforce_retention(wall_clock_ms() + LAG_MS + 1).unwrap();
    assert_eq!(
        segments(),
        2,
        "rolled at max.compaction.lag.ms, not segment.ms"
    );
    log.checkpoint_now().unwrap();
    let passes = log.clean_now(wall_clock_ms() + LAG_MS + 1).unwrap();
    assert_eq!(passes.len(), 1, "{passes:?}");
    assert_eq!(read_records(&log, &k), newest(&written));
}

#[tokio::test]
async fn a_partition_below_the_dirty_ratio_is_not_cleaned() {
    // Goal: min.cleanable.dirty.ratio holds a pass back however old the dirty records
    // (max.compaction.lag.ms unset), and a lower ratio lets the same partition be cleaned.
    let dir = tempfile::tempdir().unwrap();
    let k = key("ratio", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let written = clean_then_dirty(&log, &k, NOW_MS, NOW_MS).await;
    let with_ratio = |ratio| LogConfig {
        min_cleanable_dirty_ratio: ratio,
        ..compacted()
    };
    log.set_config(&k, with_ratio(0.5)).unwrap();
    let much_later = NOW_MS + 1_000 * DELETE_RETENTION_MS;
    let before = read_records(&log, &k);
    assert!(log.clean_now(much_later).unwrap().is_empty());
    assert_eq!(read_records(&log, &k), before, "nothing cleaned");
    assert!(
        before.len() > newest(&written).len(),
        "dirty versions remain"
    );
    log.set_config(&k, with_ratio(0.05)).unwrap();
    assert_eq!(log.clean_now(much_later).unwrap().len(), 1);
    assert_eq!(
        read_records(&log, &k),
        expected_after(&written, active_base(dir.path(), &k))
    );
}

#[tokio::test]
async fn min_compaction_lag_holds_new_segments_back_until_they_are_old_enough() {
    // Goal: a segment holding a record newer than min.compaction.lag.ms is not cleaned
    // (nor anything after it); once the lag has passed for it, it is.
    const LAG_MS: i64 = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let k = key("min-lag", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    let config = LogConfig {
        min_compaction_lag_ms: LAG_MS,
        ..compacted()
    };
    log.create_partition(k.clone(), config).unwrap();
    let (t0, t1) = (NOW_MS, NOW_MS + LAG_MS);
    let mut written = Seen::new();
    put_keys(&log, &k, &cycling_keys(12, 4), "old", t0, &mut written).await;
    let first_new = written.keys().last().unwrap() + 1;
    put_keys(&log, &k, &cycling_keys(12, 4), "new", t1, &mut written).await;
    let fillers: Vec<String> = (0..6).map(|i| format!("z{i}")).collect();
    put_keys(&log, &k, &fillers, "z", t1, &mut written).await;
    log.checkpoint_now().unwrap();

    assert!(
        log.clean_now(t0 + LAG_MS - 1).unwrap().is_empty(),
        "all too new"
    );
    assert_eq!(
        log.clean_now(t0 + LAG_MS).unwrap().len(),
        1,
        "the old segments"
    );
    let after = read_records(&log, &k);
    assert!(
        written
            .range(first_new..)
            .all(|(o, r)| after.get(o) == Some(r)),
        "every record newer than the lag is still there"
    );
    assert!(
        written
            .range(..first_new)
            .any(|(o, _)| !after.contains_key(o)),
        "older versions went"
    );
    assert_eq!(log.clean_now(t1 + LAG_MS).unwrap().len(), 1, "released");
    assert_eq!(
        read_records(&log, &k),
        expected_after(&written, active_base(dir.path(), &k))
    );
}

#[tokio::test]
async fn compact_and_delete_both_apply() {
    // Goal: with cleanup.policy=compact,delete, retention deletes the segments older than
    // retention.ms and the cleaner compacts what remains: the newest record per key among
    // the records at or after the new log start.
    const RETENTION_MS: i64 = 60_000;
    let dir = tempfile::tempdir().unwrap();
    let k = key("compact-delete", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    let config = LogConfig {
        cleanup_delete: true,
        retention_ms: RETENTION_MS,
        ..compacted()
    };
    log.create_partition(k.clone(), config).unwrap();
    let (t0, t1) = (NOW_MS, NOW_MS + 2 * RETENTION_MS);
    let mut written = Seen::new();
    put_keys(&log, &k, &cycling_keys(16, 4), "old", t0, &mut written).await;
    put_keys(&log, &k, &cycling_keys(16, 4), "new", t1, &mut written).await;
    let fillers: Vec<String> = (0..6).map(|i| format!("z{i}")).collect();
    put_keys(&log, &k, &fillers, "z", t1, &mut written).await;
    log.checkpoint_now().unwrap();

    log.enforce_retention(t1 + 1).unwrap();
    let start = log.offsets(&k).unwrap().log_start_offset.0;
    assert!(start > 8, "old segments deleted: log start {start}");
    let kept: Seen = written
        .range(start..)
        .map(|(o, r)| (*o, r.clone()))
        .collect();
    assert_eq!(
        read_records(&log, &k),
        kept,
        "retention alone compacts nothing"
    );
    assert_eq!(log.clean_now(t1 + 1).unwrap().len(), 1);
    let after = read_records(&log, &k);
    assert_eq!(after, expected_after(&kept, active_base(dir.path(), &k)));
    assert!(after.len() < kept.len(), "the cleaner removed versions");
    assert_eq!(log.offsets(&k).unwrap().log_start_offset.0, start);
}

#[tokio::test]
async fn the_io_limit_paces_a_pass() {
    // Goal: a pass over N bytes (read plus written) under
    // log.cleaner.io.max.bytes.per.second = X takes at least about N / X.
    const LIMIT: u64 = 8_000;
    let dir = tempfile::tempdir().unwrap();
    let k = key("paced", 0);
    let mut config = config(dir.path());
    config.record_codec = Some(Arc::new(ProtoCodec));
    config.cleaner.enable = false;
    config.cleaner.io_max_bytes_per_second = LIMIT;
    let log = LogManager::open(config, Arc::new(StdFs)).expect("open").0;
    log.create_partition(k.clone(), compacted()).unwrap();
    write_versions(&log, &k).await;
    log.checkpoint_now().unwrap();
    let before = log.stats();
    let started = std::time::Instant::now();
    let passes = log.clean_now(NOW_MS + 100).unwrap();
    let took = started.elapsed().as_secs_f64();
    assert_eq!(passes.len(), 1);
    let after = log.stats();
    let bytes = (after.cleaner_bytes_read - before.cleaner_bytes_read)
        + (after.cleaner_bytes_written - before.cleaner_bytes_written);
    let floor = 0.9 * bytes as f64 / LIMIT as f64;
    assert!(bytes > 4_000, "enough bytes to measure: {bytes}");
    assert!(
        took >= floor,
        "{bytes} bytes in {took:.2} s, at least {floor:.2} s expected"
    );
}

/// A snappy batch of `records` in two xerial blocks (Kafka's Java client writes a block
/// per 32 KiB): valid, but not what the cleaner's own recompression would write, so a
/// rebuilt copy could not come out byte-identical.
fn two_block_snappy_batch(records: &[Rec<'_>], ts: i64) -> Bytes {
    let plain = keyed_batch(records, ts, 0, None);
    let body = &plain[HEADER_LEN..];
    let half = body.len() / 2;
    let mut stream = record_compact::compress(Compression::Snappy, &body[..half]).unwrap();
    stream.extend_from_slice(
        &record_compact::compress(Compression::Snappy, &body[half..]).unwrap()[16..],
    );
    let header = BatchHeader::parse(&plain).unwrap();
    let fields = BatchFields {
        attributes: Attributes(0).with_compression(Compression::Snappy),
        ..BatchFields::of(&header)
    };
    Bytes::from(fields.to_batch(&stream))
}

#[tokio::test]
async fn untouched_batches_are_copied_byte_for_byte() {
    // Goal: a batch that keeps all its records comes out of a pass byte-identical, CRC
    // and compression included (a snappy batch in a framing the cleaner's codec would not
    // write), while batches that lost records are rewritten with a new CRC.
    let dir = tempfile::tempdir().unwrap();
    let k = key("verbatim", 0);
    let log = open(dir.path(), Arc::new(StdFs));
    log.create_partition(k.clone(), compacted()).unwrap();
    let mut untouched = Vec::new();
    for round in 0..4 {
        let (u0, u1) = (format!("u{round}-0"), format!("u{round}-1"));
        let plain = keyed_batch(
            &[(Some(&u0), Some("a")), (Some(&u1), Some("b"))],
            NOW_MS,
            0,
            None,
        );
        untouched.push(append(&log, &k, plain).await);
        let m = format!("m{round}");
        let mixed = [
            (Some("k0"), Some(m.as_str())),
            (Some(m.as_str()), Some("e")),
        ];
        append(&log, &k, keyed_batch(&mixed, NOW_MS, 1, None)).await;
        let (s0, s1) = (format!("s{round}-0"), format!("s{round}-1"));
        let snappy =
            two_block_snappy_batch(&[(Some(&s0), Some("c")), (Some(&s1), Some("d"))], NOW_MS);
        untouched.push(append(&log, &k, snappy).await);
    }
    let fillers: Vec<String> = (0..6).map(|i| format!("z{i}")).collect();
    put_keys(&log, &k, &fillers, "z", NOW_MS, &mut Seen::new()).await;
    log.checkpoint_now().unwrap();
    let before = raw_batches(&log, &k);
    assert_eq!(log.clean_now(NOW_MS).unwrap().len(), 1);
    let after = raw_batches(&log, &k);
    for offset in &untouched {
        assert_eq!(
            after.get(offset),
            before.get(offset),
            "batch at {offset} changed"
        );
    }
    let rewritten: Vec<_> = before
        .iter()
        .filter(|(o, b)| after.get(*o).is_some_and(|a| a != *b))
        .collect();
    assert_eq!(
        rewritten.len(),
        3,
        "the gzip batches whose k0 a later one superseded: {rewritten:?}"
    );
}
