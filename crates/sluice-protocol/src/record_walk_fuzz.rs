//! Fuzz harness for the record walk (batch validation and decompression), on stable Rust.
//!
//! Each case draws bytes from a seeded generator and lets `arbitrary` turn them into a
//! [`Case`]: a list of records, a codec, and a mutation applied to the encoded batch. The
//! harness then checks these invariants:
//! 1. the walk never panics, whatever the bytes;
//! 2. an unmutated batch of any codec walks `Ok`, visiting exactly its records, with offset
//!    deltas 0.. and the timestamps it was built with (pair check: encode, then walk back);
//! 3. a batch whose record framing was broken (count changed, bytes appended or cut) is
//!    refused, never accepted with a different record count;
//! 4. whatever is accepted visited exactly `recordsCount` records, and never read more than
//!    the decompression cap.
//!
//! A bounded run is part of `cargo test` ([`CASES_DEFAULT`] cases, at most
//! [`SECONDS_DEFAULT`] seconds). Longer runs: `SLUICE_FUZZ_CASES=1000000
//! SLUICE_FUZZ_SECONDS=600 SLUICE_FUZZ_SEED=7 cargo test --release -p sluice-protocol fuzz`.
//! A failure prints the seed and case number, which replay it exactly.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};

use super::tests::{batch, compress, encode_records, Rec, LIMITS};
use super::*;

const CASES_DEFAULT: u64 = 30_000;
const SECONDS_DEFAULT: u64 = 15;

/// A record as the fuzzer draws it (small, so cases stay fast).
#[derive(Debug, Arbitrary)]
struct FuzzRecord {
    timestamp_delta: i64,
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

#[derive(Debug, Arbitrary)]
enum Mutation {
    None,
    /// Claim a different record count (the framing no longer matches).
    Count(i32),
    /// Flip one byte of the record area (compressed or not).
    Flip {
        at: u32,
        xor: u8,
    },
    /// Cut the record area short.
    Truncate(u32),
    /// Append bytes after the records.
    Append(Vec<u8>),
    /// Replace the record area with arbitrary bytes.
    Replace(Vec<u8>),
}

#[derive(Debug, Arbitrary)]
struct Case {
    codec: u8,
    xerial: bool,
    base_timestamp: i64,
    records: Vec<FuzzRecord>,
    mutation: Mutation,
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// splitmix64: a tiny, seedable source of bytes for `arbitrary`.
fn fill(seed: &mut u64, out: &mut [u8]) {
    for chunk in out.chunks_mut(8) {
        *seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        chunk.copy_from_slice(&z.to_le_bytes()[..chunk.len()]);
    }
}

fn to_recs(records: &[FuzzRecord]) -> Vec<Rec> {
    records
        .iter()
        .map(|r| Rec {
            timestamp_delta: r.timestamp_delta,
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r.headers.clone(),
        })
        .collect()
}

/// Builds the case's batch; returns it and whether its framing was deliberately broken.
fn build(case: &Case) -> (Vec<u8>, bool) {
    let codec = i16::from(case.codec % 5);
    let recs = to_recs(&case.records);
    let mut count = recs.len() as i32;
    let mut payload = compress(codec, &encode_records(&recs), case.xerial);
    let mut broken = false;
    match &case.mutation {
        Mutation::None => {}
        Mutation::Count(c) => {
            broken = *c != count;
            count = *c;
        }
        Mutation::Flip { at, xor } if !payload.is_empty() => {
            let at = *at as usize % payload.len();
            payload[at] ^= xor;
        }
        Mutation::Truncate(n) if !payload.is_empty() => {
            let cut = (*n as usize % payload.len()).max(1);
            payload.truncate(payload.len() - cut);
            broken = codec == 0;
        }
        Mutation::Append(extra) if !extra.is_empty() => {
            payload.extend_from_slice(extra);
            broken = codec == 0;
        }
        Mutation::Replace(bytes) => payload = bytes.clone(),
        _ => {}
    }
    (
        batch(codec, count.max(1), case.base_timestamp, &payload),
        broken && count >= 1,
    )
}

/// Runs one case and checks the invariants of the module header; returns whether the walk
/// accepted the batch.
fn check(case: &Case) -> bool {
    let (b, broken) = build(case);
    let mut seen = Vec::new();
    let result = walk(&b, &LIMITS, |m| {
        seen.push(m);
        ControlFlow::Continue(())
    });
    let claimed = i32::from_be_bytes(b[57..61].try_into().unwrap());
    if let Ok(summary) = &result {
        assert_eq!(
            summary.records, claimed,
            "accepted: visited every claimed record"
        );
        assert_eq!(seen.len(), claimed as usize);
        assert!(summary.record_bytes <= LIMITS.decompressed_bytes_max);
        for (i, m) in seen.iter().enumerate() {
            assert_eq!(m.offset_delta, i as i32);
        }
    }
    if matches!(case.mutation, Mutation::None) && !case.records.is_empty() {
        let summary = result.as_ref().expect("an unmutated batch walks");
        assert_eq!(summary.records as usize, case.records.len());
        for (m, r) in seen.iter().zip(&case.records) {
            assert_eq!(
                m.timestamp,
                case.base_timestamp.wrapping_add(r.timestamp_delta)
            );
        }
    }
    if broken {
        assert!(result.is_err(), "broken framing accepted: {case:?}");
    }
    result.is_ok()
}

#[test]
fn fuzz_record_walk_bounded() {
    // Goal: the invariants of the module header hold for a bounded run of random cases.
    let cases = env_u64("SLUICE_FUZZ_CASES", CASES_DEFAULT);
    let deadline =
        Instant::now() + Duration::from_secs(env_u64("SLUICE_FUZZ_SECONDS", SECONDS_DEFAULT));
    let seed0 = env_u64("SLUICE_FUZZ_SEED", 0x5111CE);
    let mut raw = vec![0u8; 4096];
    let (mut ran, mut accepted) = (0u64, 0u64);
    for n in 0..cases {
        if Instant::now() > deadline {
            break;
        }
        let mut seed = seed0 ^ n.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let len = 16 + (n as usize * 37) % (raw.len() - 16);
        fill(&mut seed, &mut raw[..len]);
        let Ok(case) = Case::arbitrary(&mut Unstructured::new(&raw[..len])) else {
            continue;
        };
        let outcome = std::panic::catch_unwind(|| check(&case));
        let Ok(ok) = outcome else {
            panic!("fuzz case failed: seed {seed0:#x} case {n}");
        };
        ran += 1;
        accepted += u64::from(ok);
    }
    eprintln!("record walk fuzz: {ran} cases, {accepted} accepted");
    // Both outcomes must be exercised, or the generator has gone blind.
    assert!(
        ran > 0 && accepted > 0 && accepted < ran,
        "{ran} cases, {accepted} accepted"
    );
}

#[test]
fn fuzz_harness_canary_catches_a_broken_walk() {
    // Goal: the harness can fail. A walk that ignores leftover bytes would accept a batch
    // with bytes appended; invariant 3 must reject exactly that case.
    let case = Case {
        codec: 0,
        xerial: false,
        base_timestamp: 0,
        records: vec![FuzzRecord {
            timestamp_delta: 1,
            key: None,
            value: Some(b"v".to_vec()),
            headers: Vec::new(),
        }],
        mutation: Mutation::Append(vec![0; 9]),
    };
    let (b, broken) = build(&case);
    assert!(broken);
    assert!(
        validate(&b, &LIMITS).is_err(),
        "leftover bytes must be refused"
    );
    let lenient = validate(&b[..b.len() - 9], &LIMITS);
    assert!(lenient.is_ok(), "without the extra bytes the batch is fine");
}
