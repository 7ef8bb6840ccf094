//! The record walk's cost per MB on uncompressed batches (the produce path's validation),
//! cold and hot: 256 batches of about 256 KiB each (64 MiB, more than the caches hold, as
//! a produce request's records are by the time they are walked) and one batch walked over
//! and over (in the cache). One line per case: record size, ms per MB cold, ms per MB hot.
//! Knobs (environment): `SLUICE_BENCH_ROUNDS` (default 5; the median is printed).

use sluice_protocol::record_walk::{validate, WalkLimits};
use sluice_record::BatchFields;

const BATCH_BYTES_TARGET: usize = 256 * 1024;
const COLD_BATCHES: usize = 256;
const HOT_WALKS: usize = 1024;
const LIMITS: WalkLimits = WalkLimits {
    decompressed_bytes_max: 1 << 30,
    zstd_window_log_max: 27,
};

fn zigzag(v: i64, out: &mut Vec<u8>) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}

/// One v2 batch of `value_bytes`-byte records with null keys and no headers (the walk
/// reads only the header's attributes, base timestamp and record count).
fn batch(value_bytes: usize) -> Vec<u8> {
    let count = BATCH_BYTES_TARGET / (value_bytes + 8);
    let mut records = Vec::new();
    let mut record = Vec::new();
    for i in 0..count {
        record.clear();
        record.push(0); // attributes
        zigzag(0, &mut record); // timestamp delta
        zigzag(i as i64, &mut record); // offset delta
        zigzag(-1, &mut record); // null key
        zigzag(value_bytes as i64, &mut record);
        record.resize(record.len() + value_bytes, 7);
        zigzag(0, &mut record); // no headers
        zigzag(record.len() as i64, &mut records);
        records.extend_from_slice(&record);
    }
    let count = count as i32;
    BatchFields {
        last_offset_delta: count - 1,
        records_count: count,
        ..BatchFields::default()
    }
    .to_batch(&records)
}

/// Milliseconds per MB of walking every batch of `batches` `passes` times.
fn ms_per_mb(batches: &[Vec<u8>], passes: usize) -> f64 {
    let start = std::time::Instant::now();
    let mut records = 0i64;
    for _ in 0..passes {
        for b in batches {
            records += i64::from(validate(b, &LIMITS).expect("a well-formed batch").records);
        }
    }
    std::hint::black_box(records);
    let bytes: usize = batches.iter().map(Vec::len).sum::<usize>() * passes;
    start.elapsed().as_secs_f64() * 1e3 / (bytes as f64 / 1e6)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("SLUICE_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    println!("record bytes, walk ms/MB cold (64 MiB), hot (one 256 KiB batch)");
    for value_bytes in [100, 1000] {
        let one = batch(value_bytes);
        let cold: Vec<Vec<u8>> = (0..COLD_BATCHES).map(|_| one.clone()).collect();
        let hot = std::slice::from_ref(&one);
        let c = median((0..rounds).map(|_| ms_per_mb(&cold, 1)).collect());
        let h = median((0..rounds).map(|_| ms_per_mb(hot, HOT_WALKS)).collect());
        println!("{value_bytes}, {c:.3}, {h:.3}");
    }
}
