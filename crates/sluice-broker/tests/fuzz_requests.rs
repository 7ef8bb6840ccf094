//! Fuzzing of request decoding, on stable Rust (proptest-driven), bounded so it runs in the
//! test command.
//!
//! What it holds: for every API and version in the broker's handler table
//! (`sluice_broker::api_table`, advertised or not), header parsing and body
//! decoding of arbitrary bytes, and of mutated valid requests (bytes flipped, cut, inserted,
//! counts and lengths overwritten with hostile values), never panic and never abort; a body
//! that decodes also re-encodes and decodes to the same value (the decoder accepts nothing it
//! cannot represent). Every row of the table needs a seed here (`default_kind` panics for a
//! key without one), so a new API cannot be served unfuzzed. The allocation guard is installed as in the broker binary, so hostile
//! array counts exercise the same path they take in production.
//!
//! `SLUICE_FUZZ_CASES` raises the number of cases per property (default 256) for a longer run.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use proptest::prelude::*;
use sluice_broker::api_table::Keyed;
use sluice_protocol::alloc_guard::GuardedAlloc;
use sluice_protocol::{adapted, header};

mod common;
use common::seeds::{name, seed_body, served};

#[global_allocator]
static ALLOC: GuardedAlloc = GuardedAlloc;

fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// One change to a valid body.
#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: usize,
        bits: u8,
    },
    Cut {
        at: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    /// Overwrites 4 bytes with a hostile count or length.
    Count {
        at: usize,
        value: i32,
    },
    /// Overwrites one byte with a varint continuation (compact counts in flexible versions).
    Varint {
        at: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let hostile = prop_oneof![
        Just(i32::MAX),
        Just(i32::MIN),
        Just(-1),
        Just(-2),
        Just(0),
        Just(0x7fff),
        Just(1_000_000_000),
        any::<i32>()
    ];
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, bits)| Mutation::Flip { at, bits }),
        any::<usize>().prop_map(|at| Mutation::Cut { at }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), hostile).prop_map(|(at, value)| Mutation::Count { at, value }),
        any::<usize>().prop_map(|at| Mutation::Varint { at }),
    ]
}

fn apply(body: &Bytes, mutations: &[Mutation]) -> Bytes {
    let mut b = body.to_vec();
    for m in mutations {
        let n = b.len().max(1);
        match m {
            Mutation::Flip { at, bits } => {
                if let Some(x) = b.get_mut(at % n) {
                    *x ^= bits;
                }
            }
            Mutation::Cut { at } => b.truncate(at % n),
            Mutation::Insert { at, bytes } => {
                let at = (at % n).min(b.len());
                b.splice(at..at, bytes.iter().copied());
            }
            Mutation::Count { at, value } => {
                let at = at % n;
                for (i, x) in value.to_be_bytes().iter().enumerate() {
                    if let Some(slot) = b.get_mut(at + i) {
                        *slot = *x;
                    }
                }
            }
            Mutation::Varint { at } => {
                if let Some(x) = b.get_mut(at % n) {
                    *x |= 0x80;
                }
            }
        }
    }
    Bytes::from(b)
}

/// Decodes a body as the broker does; when it decodes, it must survive a re-encode and
/// decode to the same value.
fn check_body(key: ApiKey, version: i16, body: Bytes) -> Result<(), TestCaseError> {
    let mut input = body;
    let Ok(decoded) = adapted::decode_request(key, &mut input, version) else {
        return Ok(());
    };
    // kafka-protocol keeps unknown tags as i32 and re-encodes only the non-negative ones
    // (while still counting every one), so a tag of 2^31 or more decodes but cannot
    // round-trip. The broker never re-encodes a request, so for it such a tag is only an
    // unknown tagged field, skipped as Kafka skips it; the decode above is what must hold.
    if format!("{decoded:?}").contains("unknown_tagged_fields: {-") {
        return Ok(());
    }
    let mut again = BytesMut::new();
    if adapted::encode_request(&decoded, version, &mut again).is_err() {
        // Values the encoder refuses (e.g. a field that only exists at other versions set
        // by tagged data) are fine to refuse later; the point is that decode did not panic.
        return Ok(());
    }
    let redecoded = adapted::decode_request(key, &mut again.freeze(), version).map_err(|e| {
        TestCaseError::fail(format!(
            "{key:?} v{version}: re-encoded body does not decode: {e}"
        ))
    })?;
    prop_assert_eq!(format!("{decoded:?}"), format!("{redecoded:?}"));
    Ok(())
}

fn api_and_version() -> impl Strategy<Value = (ApiKey, i16)> {
    let all = served();
    (0..all.len()).prop_map(move |i| all[i])
}

proptest! {
    #![proptest_config(config())]

    // Goal: arbitrary frame bodies never panic the header parser.
    #[test]
    fn header_parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = header::parse(Bytes::from(bytes), &Keyed);
    }

    // Goal: a valid header followed by arbitrary bytes never panics any body decoder.
    #[test]
    fn arbitrary_bodies_never_panic(
        (key, version) in api_and_version(),
        bytes in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        check_body(key, version, Bytes::from(bytes))?;
    }

    // Goal: mutated valid requests (flips, cuts, inserts, hostile counts) never panic, and
    // whatever still decodes round-trips.
    #[test]
    fn mutated_requests_never_panic(
        (key, version) in api_and_version(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let body = seed_body(key, version);
        check_body(key, version, apply(&body, &mutations))?;
    }

    // Goal: the whole frame path (header then body) on mutated frames never panics.
    #[test]
    fn mutated_frames_never_panic(
        (key, version) in api_and_version(),
        correlation_id in any::<i32>(),
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let mut frame = BytesMut::new();
        frame.put_i16(key as i16);
        frame.put_i16(version);
        frame.put_i32(correlation_id);
        let mut h = RequestHeader::default();
        h.request_api_key = key as i16;
        h.request_api_version = version;
        h.correlation_id = correlation_id;
        h.client_id = Some(name("fuzz"));
        let mut rest = BytesMut::new();
        use kafka_protocol::protocol::Encodable;
        h.encode(&mut rest, key.request_header_version(version)).unwrap();
        frame.put_slice(&rest[8..]);
        frame.put_slice(&seed_body(key, version));
        let mutated = apply(&frame.freeze(), &mutations);
        if let Ok(req) = header::parse(mutated, &Keyed) {
            check_body(req.api_key, req.header.request_api_version, req.body)?;
        }
    }
}

// Goal: every served API and version has a seed that encodes and decodes back (so the
// mutation properties start from real requests, not from errors).
#[test]
fn every_served_version_has_a_valid_seed() {
    for (key, version) in served() {
        let body = seed_body(key, version);
        let mut b = body.clone();
        adapted::decode_request(key, &mut b, version)
            .unwrap_or_else(|e| panic!("{key:?} v{version} seed does not decode: {e}"));
        assert!(b.is_empty(), "{key:?} v{version}: seed leaves bytes");
    }
}

/// The case CI found: a tag varint whose fifth byte still has the continuation bit set
/// decodes to tag 2^31. Decoding must not panic, and the round-trip check must not
/// mistake the library's i32 tag map for a decoder bug.
#[test]
fn tag_of_two_to_the_31_decodes() {
    let mut body = vec![1u8, 0x80, 0x80, 0x80, 0x80, 0x88, 0];
    body.extend_from_slice(&[0; 40]);
    let decoded = RequestKind::decode(ApiKey::ListGroups, &mut Bytes::from(body.clone()), 3)
        .expect("an unknown tagged field is skipped, not refused");
    assert!(format!("{decoded:?}").contains("-2147483648"));
    check_body(ApiKey::ListGroups, 3, Bytes::from(body)).expect("round-trip check");
}
