//! Unit tests of the record walk, and the batch builder the fuzz harness shares.

use std::io::Write;

use super::*;

pub(crate) const LIMITS: WalkLimits = WalkLimits {
    decompressed_bytes_max: 1 << 20,
    zstd_window_log_max: 23,
};

/// One record to encode.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rec {
    pub timestamp_delta: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

pub(crate) fn put_varint(out: &mut Vec<u8>, value: i64) {
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

fn put_field(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => put_varint(out, -1),
        Some(bytes) => {
            put_varint(out, bytes.len() as i64);
            out.extend_from_slice(bytes);
        }
    }
}

/// Kafka's record layout, offset delta = position.
pub(crate) fn encode_records(records: &[Rec]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut body = vec![0u8];
        put_varint(&mut body, r.timestamp_delta);
        put_varint(&mut body, i as i64);
        put_field(&mut body, r.key.as_deref());
        put_field(&mut body, r.value.as_deref());
        put_varint(&mut body, r.headers.len() as i64);
        for (k, v) in &r.headers {
            put_field(&mut body, Some(k));
            put_field(&mut body, v.as_deref());
        }
        put_varint(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
    }
    out
}

/// `raw` compressed with codec id `codec` as a Kafka client would (snappy: xerial framing
/// when `xerial`, else one raw block as librdkafka writes).
pub(crate) fn compress(codec: i16, raw: &[u8], xerial: bool) -> Vec<u8> {
    match codec {
        1 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(raw).unwrap();
            e.finish().unwrap()
        }
        2 if xerial => {
            let mut out = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
            for chunk in raw.chunks(32 * 1024) {
                let block = snap::raw::Encoder::new().compress_vec(chunk).unwrap();
                out.extend_from_slice(&(block.len() as u32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        2 => snap::raw::Encoder::new().compress_vec(raw).unwrap(),
        3 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
            e.write_all(raw).unwrap();
            let (out, result) = e.finish();
            result.unwrap();
            out
        }
        4 => zstd::encode_all(raw, 3).unwrap(),
        _ => raw.to_vec(),
    }
}

/// A v2 batch around `payload` (the walk does not check the CRC, but it is right).
pub(crate) fn batch(attributes: i16, count: i32, base_timestamp: i64, payload: &[u8]) -> Vec<u8> {
    sluice_record::BatchFields {
        attributes: sluice_record::Attributes(attributes),
        last_offset_delta: count.wrapping_sub(1),
        base_timestamp,
        max_timestamp: base_timestamp,
        records_count: count,
        ..sluice_record::BatchFields::default()
    }
    .to_batch(payload)
}

/// `records` as a batch with codec `codec`.
pub(crate) fn records_batch(codec: i16, records: &[Rec], base_timestamp: i64) -> Vec<u8> {
    let raw = encode_records(records);
    batch(
        codec,
        records.len() as i32,
        base_timestamp,
        &compress(codec, &raw, true),
    )
}

fn sample(n: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| Rec {
            timestamp_delta: i as i64 * 3,
            key: (i % 2 == 0).then(|| format!("k{i}").into_bytes()),
            value: Some(vec![b'v'; i * 10]),
            headers: vec![(b"h".to_vec(), None), (b"hh".to_vec(), Some(b"x".to_vec()))],
        })
        .collect()
}

#[test]
fn every_codec_walks_with_offsets_and_timestamps() {
    // Goal: each codec's batch walks record by record with the right deltas and times.
    for codec in 0..=4 {
        let b = records_batch(codec, &sample(5), 1_000);
        let mut seen = Vec::new();
        let s = walk(&b, &LIMITS, |m| {
            seen.push(m);
            ControlFlow::Continue(())
        })
        .unwrap_or_else(|e| panic!("codec {codec}: {e}"));
        assert_eq!(s.records, 5);
        let times: Vec<i64> = seen.iter().map(|m| m.timestamp).collect();
        assert_eq!(
            times,
            vec![1_000, 1_003, 1_006, 1_009, 1_012],
            "codec {codec}"
        );
        let deltas: Vec<i32> = seen.iter().map(|m| m.offset_delta).collect();
        assert_eq!(deltas, vec![0, 1, 2, 3, 4]);
    }
}

#[test]
fn raw_snappy_as_librdkafka_writes_it_walks() {
    // Goal: unframed snappy (librdkafka) is accepted like xerial-framed snappy (Java).
    let raw = encode_records(&sample(3));
    let b = batch(2, 3, 0, &compress(2, &raw, false));
    assert_eq!(validate(&b, &LIMITS).expect("raw snappy").records, 3);
}

#[test]
fn undefined_codecs_are_unsupported() {
    // Goal: compression ids 5-7 are refused as unsupported, before anything is read.
    let raw = encode_records(&sample(1));
    for codec in 5..=7 {
        let b = batch(codec, 1, 0, &raw);
        assert_eq!(
            validate(&b, &LIMITS),
            Err(WalkError::UnsupportedCompression(codec))
        );
    }
}

fn invalid(b: &[u8]) -> bool {
    matches!(validate(b, &LIMITS), Err(WalkError::InvalidRecord(_)))
}

#[test]
fn framing_errors_are_invalid_record() {
    // Goal: each framing rule refuses a batch that breaks only it.
    let raw = encode_records(&sample(2));
    assert!(invalid(&batch(0, 3, 0, &raw)), "count above the records");
    assert!(
        invalid(&batch(0, 1, 0, &raw)),
        "bytes left after count records"
    );
    assert!(
        invalid(&batch(0, i32::MAX, 0, &raw)),
        "2^31-1 records claimed"
    );
    let zstd = compress(4, &raw, true);
    assert!(
        invalid(&batch(4, i32::MAX, 0, &zstd)),
        "2^31-1 compressed records claimed"
    );
    assert!(invalid(&batch(0, 0, 0, &raw)), "no records");
    assert!(invalid(&batch(0, 2, 0, &raw[..raw.len() - 1])), "truncated");
    let mut swapped = encode_records(&sample(1));
    swapped[3] = 2; // offset delta 1 for the first record
    assert!(invalid(&batch(0, 1, 0, &swapped)), "offset delta");
    assert!(invalid(&batch(0, 1, 0, &[0xff; 64])), "random bytes");
    let mut long = encode_records(&sample(1));
    long[0] += 2; // declared length 1 byte longer than the fields
    long.push(0);
    assert!(invalid(&batch(0, 1, 0, &long)), "length above the fields");
    assert!(
        invalid(&batch(1, 2, 0, &raw)),
        "gzip flag over plain records"
    );
}

#[test]
fn bombs_stop_at_the_cap_for_every_codec() {
    // Goal: a batch expanding far past the cap fails with DecompressedTooLarge for each
    // codec, having produced no more than the cap (the walk reads only cap + 1 bytes).
    let mut value = vec![0u8; 8 << 20];
    value[0] = 1;
    let raw = encode_records(&[Rec {
        value: Some(value),
        ..Rec::default()
    }]);
    for (codec, xerial) in [(1, true), (2, true), (2, false), (3, true), (4, true)] {
        let b = batch(codec, 1, 0, &compress(codec, &raw, xerial));
        assert!(
            b.len() < raw.len() / 10,
            "codec {codec} compresses the bomb"
        );
        assert_eq!(
            validate(&b, &LIMITS),
            Err(WalkError::DecompressedTooLarge { max: 1 << 20 }),
            "codec {codec} xerial {xerial}"
        );
    }
}

#[test]
fn zstd_windows_above_the_limit_are_refused() {
    // Goal: a zstd frame asking for a window above the limit is refused, not allocated.
    let raw = encode_records(&sample(2));
    let mut c = zstd::stream::Encoder::new(Vec::new(), 3).unwrap();
    c.set_parameter(zstd::zstd_safe::CParameter::WindowLog(26))
        .unwrap();
    c.write_all(&raw).unwrap();
    let b = batch(4, 2, 0, &c.finish().unwrap());
    assert!(invalid(&b));
    let roomy = WalkLimits {
        zstd_window_log_max: 27,
        ..LIMITS
    };
    assert_eq!(validate(&b, &roomy).expect("window allowed").records, 2);
}

#[test]
fn visit_can_stop_early() {
    // Goal: breaking out of the walk returns the records seen so far and reads no further.
    let b = records_batch(4, &sample(5), 0);
    let s = walk(&b, &LIMITS, |m| {
        if m.offset_delta == 1 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .expect("walk");
    assert_eq!(s.records, 2);
}
