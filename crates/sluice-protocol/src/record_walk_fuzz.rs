//! Fuzz harness for the record walk (batch validation and decompression), on stable Rust,
//! driven by proptest.
//!
//! Each case is a list of records, a codec (none, gzip, snappy framed or raw, lz4, zstd), a
//! base timestamp and a mutation applied to the encoded batch. The harness checks:
//! 1. the walk never panics, whatever the bytes;
//! 2. an unmutated batch of any codec walks `Ok`, visiting exactly its records, with offset
//!    deltas 0.. and the timestamps it was built with (pair check: encode, then walk back);
//! 3. a batch whose record framing was broken (count changed; bytes appended or cut from
//!    uncompressed records) is refused, never accepted with another record count;
//! 4. whatever is accepted visited exactly `recordsCount` records, in order, and never read
//!    more than the decompression cap;
//! 5. uncompressed batches get the same answer (result, error, visits) from the fast slice
//!    walk as from the generic byte-at-a-time walk.
//!
//! A bounded run is part of `cargo test` ([`CASES_DEFAULT`] cases, well under a second in
//! release). `SLUICE_FUZZ_CASES=1000000 cargo test --release -p sluice-protocol record_walk`
//! runs longer; proptest prints the shrunk failing case.

use std::ops::ControlFlow;

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;

use super::tests::{batch, compress, encode_records, Rec, LIMITS};
use super::*;

const CASES_DEFAULT: u32 = 20_000;

fn config() -> ProptestConfig {
    let cases = std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES_DEFAULT);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    None,
    /// Claim a different record count (the framing no longer matches).
    Count(i32),
    /// Flip bits of one byte of the record area (compressed or not).
    Flip {
        at: usize,
        xor: u8,
    },
    /// Cut the record area short by this many bytes (at least 1).
    Truncate(usize),
    /// Append bytes after the records.
    Append(Vec<u8>),
    /// Replace the record area with arbitrary bytes.
    Replace(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Case {
    codec: i16,
    xerial: bool,
    base_timestamp: i64,
    records: Vec<Rec>,
    mutation: Mutation,
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..max)
}

fn record() -> impl Strategy<Value = Rec> {
    let headers = vec((bytes(8), option::of(bytes(8))), 0..3);
    (
        any::<i64>(),
        option::of(bytes(16)),
        option::of(bytes(200)),
        headers,
    )
        .prop_map(|(timestamp_delta, key, value, headers)| Rec {
            timestamp_delta,
            key,
            value,
            headers,
        })
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => Just(Mutation::None),
        1 => prop_oneof![any::<i32>(), -2..12i32].prop_map(Mutation::Count),
        2 => (any::<usize>(), 1..=255u8).prop_map(|(at, xor)| Mutation::Flip { at, xor }),
        1 => (1..64usize).prop_map(Mutation::Truncate),
        1 => vec(any::<u8>(), 1..32).prop_map(Mutation::Append),
        1 => bytes(300).prop_map(Mutation::Replace),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        0..5i16,
        any::<bool>(),
        any::<i64>(),
        vec(record(), 0..8),
        mutation(),
    )
        .prop_map(|(codec, xerial, base_timestamp, records, mutation)| Case {
            codec,
            xerial,
            base_timestamp,
            records,
            mutation,
        })
}

/// Builds the case's batch; returns it and whether its framing was deliberately broken.
fn build(case: &Case) -> (Vec<u8>, bool) {
    let mut count = case.records.len() as i32;
    let mut payload = compress(case.codec, &encode_records(&case.records), case.xerial);
    let mut broken = false;
    let plain = case.codec == 0;
    match &case.mutation {
        Mutation::None => {}
        Mutation::Count(c) => {
            broken = *c != count && *c >= 1;
            count = *c;
        }
        Mutation::Flip { at, xor } if !payload.is_empty() => {
            let at = at % payload.len();
            payload[at] ^= xor;
        }
        Mutation::Truncate(n) if !payload.is_empty() => {
            let cut = (*n).min(payload.len());
            payload.truncate(payload.len() - cut);
            broken = plain;
        }
        Mutation::Append(extra) => {
            payload.extend_from_slice(extra);
            broken = plain;
        }
        Mutation::Replace(raw) => payload = raw.clone(),
        _ => {}
    }
    let broken = broken && !case.records.is_empty();
    (
        batch(case.codec, count.max(1), case.base_timestamp, &payload),
        broken,
    )
}

/// Runs one case and checks the invariants of the module header.
fn check(case: &Case) {
    let (b, broken) = build(case);
    let mut seen = Vec::new();
    let result = walk(&b, &LIMITS, |m| {
        seen.push(m);
        ControlFlow::Continue(())
    });
    let mut seen_generic = Vec::new();
    let generic = walk_generic(&b, &LIMITS, |m| {
        seen_generic.push(m);
        ControlFlow::Continue(())
    });
    assert_eq!(
        result, generic,
        "the slice walk and the generic walk disagree"
    );
    assert_eq!(
        seen, seen_generic,
        "the two walks visited different records"
    );
    let claimed = sluice_record::BatchHeader::parse(&b)
        .expect("a header")
        .records_count();
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
            let expected = case.base_timestamp.wrapping_add(r.timestamp_delta);
            assert_eq!(m.timestamp, expected);
        }
    }
    if broken {
        assert!(result.is_err(), "broken framing accepted");
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_record_walk(case in case()) {
        // Goal: the invariants of the module header hold for every generated case.
        check(&case);
    }
}

#[test]
fn fuzz_harness_canary_catches_a_broken_walk() {
    // Goal: the harness can fail. A walk that ignored leftover bytes would accept a batch
    // with bytes appended; the case is marked broken, and the real walk refuses it.
    let case = Case {
        codec: 0,
        xerial: false,
        base_timestamp: 0,
        records: vec![Rec {
            timestamp_delta: 1,
            value: Some(b"v".to_vec()),
            ..Rec::default()
        }],
        mutation: Mutation::Append(vec![0; 9]),
    };
    let (b, broken) = build(&case);
    assert!(broken, "appending to plain records breaks the framing");
    assert!(
        validate(&b, &LIMITS).is_err(),
        "leftover bytes must be refused"
    );
    let trimmed = validate(&b[..b.len() - 9], &LIMITS);
    assert!(trimmed.is_ok(), "without the extra bytes the batch is fine");
}
