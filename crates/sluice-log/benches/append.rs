//! Durable append throughput (FsyncPolicy::Always): 16 KiB batches of 16 x 1 KiB records,
//! many appenders in flight, at 1, 16 and 128 partitions. One line per case:
//! partitions, MB/s, appends/s, journal syncs/s, segment syncs/s, mean batches per sync.
//!
//! Runs in a temporary directory under `target/` (the same disk as the work tree).
//! Knobs (environment): `SLUICE_BENCH_SECS` (measured per case, default 3),
//! `SLUICE_BENCH_WARMUP_SECS` (unmeasured lead-in per case, default 2); for experiments
//! `SLUICE_BENCH_FSYNC=never`, `SLUICE_BENCH_JOURNAL_MIB`, `SLUICE_BENCH_CHECKPOINT_MIB`,
//! `SLUICE_BENCH_COMMIT_MIB` override the corresponding `LogManagerConfig` fields and
//! `SLUICE_BENCH_PARTITIONS` runs one case only; `SLUICE_BENCH_DIR` puts the data
//! elsewhere (e.g. a tmpfs, to see the CPU ceiling without the disk).
//! `SLUICE_BENCH_IDEMPOTENT=1` makes every appender an idempotent producer (its own
//! producer id, consecutive sequences), so the producer checks and snapshots are measured;
//! each append then also pays a 16 KiB copy and a CRC on the appender's side.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use sluice_log::batch::{BatchFields, BatchHeaderMut};
use sluice_log::fs::StdFs;
use sluice_log::{
    FsyncPolicy, LogConfig, LogManager, LogManagerConfig, PartitionKey, ProducerEpoch, ProducerId,
    TopicId,
};

const RECORD_BYTES: usize = 1024;
const RECORDS_PER_BATCH: i32 = 16;
/// Appenders in flight per partition...
const IN_FLIGHT_PER_PARTITION: usize = 8;
/// ...but at most this many in total.
const IN_FLIGHT_MAX: usize = 256;
const PARTITION_COUNTS: [i32; 3] = [1, 16, 128];

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

/// A valid v2 batch of 16 uncompressed 1 KiB records with a correct CRC-32C.
fn make_batch() -> Bytes {
    let mut records = Vec::new();
    for i in 0..RECORDS_PER_BATCH {
        let mut body = vec![0u8];
        put_varint(&mut body, 0);
        put_varint(&mut body, i64::from(i));
        put_varint(&mut body, -1);
        put_varint(&mut body, RECORD_BYTES as i64);
        body.extend(std::iter::repeat_n(b'x', RECORD_BYTES));
        put_varint(&mut body, 0);
        put_varint(&mut records, body.len() as i64);
        records.extend_from_slice(&body);
    }
    let fields = BatchFields {
        last_offset_delta: RECORDS_PER_BATCH - 1,
        base_timestamp: 1_700_000_000_000,
        max_timestamp: 1_700_000_000_000,
        records_count: RECORDS_PER_BATCH,
        ..BatchFields::default()
    };
    Bytes::from(fields.to_batch(&records))
}

/// `batch` as sent by idempotent producer `producer_id` (epoch 0) at `sequence`.
fn with_sequence(batch: &Bytes, producer_id: i64, sequence: i32) -> Bytes {
    let mut out = BytesMut::from(&batch[..]);
    let mut header = BatchHeaderMut::new(&mut out).expect("a batch");
    header.set_producer_id(ProducerId(producer_id));
    header.set_producer_epoch(ProducerEpoch(0));
    header.set_base_sequence(sequence);
    header.update_crc();
    out.freeze()
}

fn key(partition: i32) -> PartitionKey {
    PartitionKey {
        topic_id: TopicId([7; 16]),
        topic: Arc::from("bench"),
        partition,
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn bench_root() -> PathBuf {
    let root = match std::env::var("SLUICE_BENCH_DIR") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/bench-tmp"),
    };
    std::fs::create_dir_all(&root).expect("create bench dir");
    root
}

async fn run_case(partitions: i32, warmup: Duration, duration: Duration, batch: Bytes) -> String {
    let dir = tempfile::tempdir_in(bench_root()).expect("tempdir");
    let mut config = LogManagerConfig::new(dir.path());
    config.fsync = FsyncPolicy::Always;
    if std::env::var("SLUICE_BENCH_FSYNC").is_ok_and(|v| v == "never") {
        config.fsync = FsyncPolicy::Never;
    }
    if let Some(mib) = env_u64("SLUICE_BENCH_JOURNAL_MIB") {
        config.journal_file_bytes_max = mib << 20;
    }
    if let Some(mib) = env_u64("SLUICE_BENCH_CHECKPOINT_MIB") {
        config.checkpoint_bytes = mib << 20;
    }
    if let Some(mib) = env_u64("SLUICE_BENCH_COMMIT_MIB") {
        config.commit_bytes_max = (mib << 20) as usize;
    }
    let (log, _) = LogManager::open(config, Arc::new(StdFs)).expect("open");
    for p in 0..partitions {
        log.create_partition(key(p), LogConfig::default())
            .expect("create");
    }
    let in_flight = (partitions as usize * IN_FLIGHT_PER_PARTITION).min(IN_FLIGHT_MAX);
    let appends = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + warmup + duration;
    let idempotent = std::env::var("SLUICE_BENCH_IDEMPOTENT").is_ok_and(|v| v == "1");
    let mut tasks = Vec::new();
    for i in 0..in_flight {
        let (log, batch, appends) = (log.clone(), batch.clone(), Arc::clone(&appends));
        let key = key((i % partitions as usize) as i32);
        tasks.push(tokio::spawn(async move {
            let mut sequence = 0i32;
            while Instant::now() < deadline {
                let records = match idempotent {
                    true => with_sequence(&batch, i as i64, sequence),
                    false => batch.clone(),
                };
                sequence = sequence.wrapping_add(RECORDS_PER_BATCH) & i32::MAX;
                let waiter = log.append(&key, records).await.expect("append");
                waiter.wait().await.expect("durable");
                appends.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Measure the steady state only: by the end of the warm-up the first checkpoints have
    // run and retired journal files are being recycled.
    tokio::time::sleep(warmup).await;
    let (before, appends_before, started) =
        (log.stats(), appends.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(duration).await;
    let (stats, appends_after) = (log.stats(), appends.load(Ordering::Relaxed));
    let elapsed = started.elapsed().as_secs_f64();
    for task in tasks {
        task.await.expect("appender");
    }
    log.shutdown().expect("shutdown");
    let appends = (appends_after - appends_before) as f64;
    let journal_syncs = (stats.journal_syncs - before.journal_syncs) as f64;
    let segment_syncs = (stats.segment_syncs - before.segment_syncs) as f64;
    format!(
        "partitions={partitions:>4} in_flight={in_flight:>3}  {:>7.1} MB/s  {:>8.0} appends/s  {:>7.0} journal syncs/s  {:>6.1} segment syncs/s  {:>6.1} batches/sync",
        appends * batch.len() as f64 / elapsed / 1e6,
        appends / elapsed,
        journal_syncs / elapsed,
        segment_syncs / elapsed,
        appends / journal_syncs.max(1.0),
    )
}

fn main() {
    // `cargo bench` passes --bench; a plain `cargo test --benches` run passes nothing and
    // should not spend seconds here.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let seconds = env_u64("SLUICE_BENCH_SECS").unwrap_or(3);
    let warmup = Duration::from_secs(env_u64("SLUICE_BENCH_WARMUP_SECS").unwrap_or(2));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let batch = make_batch();
    let idempotent = std::env::var("SLUICE_BENCH_IDEMPOTENT").is_ok_and(|v| v == "1");
    println!("durable appends (FsyncPolicy::Always), batch = {} bytes ({RECORDS_PER_BATCH} x {RECORD_BYTES} B records), {} s warm-up + {seconds} s measured per case{}", batch.len(), warmup.as_secs(), if idempotent { ", idempotent producers" } else { "" });
    let only: Option<i32> = env_u64("SLUICE_BENCH_PARTITIONS").map(|p| p as i32);
    for partitions in PARTITION_COUNTS
        .into_iter()
        .filter(|p| only.is_none_or(|o| o == *p))
    {
        let line = runtime.block_on(run_case(
            partitions,
            warmup,
            Duration::from_secs(seconds),
            batch.clone(),
        ));
        println!("{line}");
    }
}
