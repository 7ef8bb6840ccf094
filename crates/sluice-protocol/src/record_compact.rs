//! The record-level half of log compaction: reads the keys of one stored v2 batch, and
//! rebuilds a batch with only some of its records, recompressed with the batch's own codec.
//! The log cleaner (`sluice-log`, which never decompresses) drives it through its
//! `RecordCodec` trait. No I/O.
//!
//! Guarantees, for any input bytes:
//! - never panics; decompressed bytes are capped by [`WalkLimits::decompressed_bytes_max`]
//!   (the same cap as the record walk), so memory per call is bounded;
//! - a rebuilt batch keeps the header's base offset, `lastOffsetDelta`, producer fields,
//!   attributes and timestamps, and each kept record's bytes unchanged (so its offset and
//!   timestamp deltas, and therefore its offset and timestamp, stay what they were);
//!   `batchLength`, `recordsCount` and the CRC-32C are recomputed;
//! - a record's framing is checked as it is read; a batch that does not decode is an
//!   error, never a partial answer.

use std::io::{Read, Write};

use sluice_record::{Attributes, BatchHeader, BatchHeaderMut, HEADER_LEN};

use crate::record_walk::{codec, decoder, Compression, WalkError, WalkLimits, SHORT_HEADER};
/// Input bytes per xerial snappy block (snappy-java's default block size).
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;
/// zstd level Kafka's producers use by default.
const ZSTD_LEVEL: i32 = 3;

const BAD_RECORD: WalkError = WalkError::InvalidRecord("record framing does not decode");

/// One record as the cleaner needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset_delta: i32,
    /// baseTimestamp + timestampDelta.
    pub timestamp: i64,
    /// `None` for a null key.
    pub key: Option<&'a [u8]>,
    /// `None` for a null value: a tombstone.
    pub value: Option<&'a [u8]>,
}

/// Calls `visit` for every record of `batch`, in order.
pub fn scan(
    batch: &[u8],
    limits: &WalkLimits,
    visit: &mut dyn FnMut(RecordView<'_>),
) -> Result<(), WalkError> {
    let (header, records) = records_bytes(batch, limits)?;
    let base_timestamp = header.base_timestamp();
    let mut at = 0;
    while at < records.len() {
        let (end, view) = parse_record(&records, at, base_timestamp)?;
        visit(view);
        at = end;
    }
    Ok(())
}

/// Appends to `out` a copy of `batch` holding only the records `keep` accepts (by offset
/// delta). Returns how many were kept. The caller handles the cases "all kept" (keep the
/// original) and "none kept" (drop it or keep an empty header); this writes whatever it
/// is asked to.
///
/// With `delete_horizon_ms` (Kafka's KIP-534, for a batch whose tombstones the cleaner
/// has now seen for the first time), the batch is stamped as Kafka's cleaner stamps it:
/// attribute bit 6 set, `baseTimestamp` = the horizon, and each kept record's timestamp
/// delta rewritten against it, so every record keeps its timestamp.
pub fn rebuild(
    batch: &[u8],
    limits: &WalkLimits,
    keep: &mut dyn FnMut(i32) -> bool,
    delete_horizon_ms: Option<i64>,
    out: &mut Vec<u8>,
) -> Result<i32, WalkError> {
    let (header, records) = records_bytes(batch, limits)?;
    let base_timestamp = header.base_timestamp();
    let mut kept_bytes = Vec::with_capacity(records.len());
    let mut kept = 0i32;
    let mut at = 0;
    while at < records.len() {
        let (end, view) = parse_record(&records, at, base_timestamp)?;
        if keep(view.offset_delta) {
            match delete_horizon_ms {
                None => kept_bytes.extend_from_slice(&records[at..end]),
                Some(horizon) => {
                    rebase_record(&records[at..end], view.timestamp, horizon, &mut kept_bytes)?
                }
            }
            kept += 1;
        }
        at = end;
    }
    let attributes = header.attributes();
    let body = compress(codec(attributes)?, &kept_bytes)?;
    if HEADER_LEN + body.len() > i32::MAX as usize {
        return Err(BAD_RECORD);
    }
    let start = out.len();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&body);
    let mut rebuilt = BatchHeaderMut::new(&mut out[start..]).expect("a header was copied");
    if let Some(horizon) = delete_horizon_ms {
        rebuilt.set_attributes(attributes.with(Attributes::DELETE_HORIZON));
        rebuilt.set_base_timestamp(horizon);
    }
    rebuilt.fit_batch_length();
    rebuilt.set_records_count(kept);
    rebuilt.update_crc();
    Ok(kept)
}

/// Appends `record` (one whole record, length prefix included) with its timestamp delta
/// rewritten so that `new_base` + delta = `timestamp`; the rest of its bytes unchanged.
fn rebase_record(
    record: &[u8],
    timestamp: i64,
    new_base: i64,
    out: &mut Vec<u8>,
) -> Result<(), WalkError> {
    let mut pos = 0;
    varint(record, &mut pos)?; // length
    let attributes_at = pos;
    pos += 1;
    varint(record, &mut pos)?; // old timestamp delta
    let rest = record.get(pos..).ok_or(BAD_RECORD)?;
    let mut body = Vec::with_capacity(record.len() + 10);
    body.push(*record.get(attributes_at).ok_or(BAD_RECORD)?);
    put_varint(&mut body, timestamp.wrapping_sub(new_base));
    body.extend_from_slice(rest);
    put_varint(out, i64::try_from(body.len()).map_err(|_| BAD_RECORD)?);
    out.extend_from_slice(&body);
    Ok(())
}

/// A zigzag varint (Kafka's varint and varlong).
fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut raw = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (raw & 0x7f) as u8;
        raw >>= 7;
        if raw == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Whether a batch carries a delete horizon (KIP-534): its `baseTimestamp` is then the
/// time after which its tombstones may be removed.
pub fn delete_horizon_ms(batch: &[u8]) -> Option<i64> {
    BatchHeader::parse(batch).ok()?.delete_horizon_ms()
}

/// The header of `batch` and its records, decompressed (bounded by the walk's cap).
fn records_bytes<'b>(
    batch: &'b [u8],
    limits: &WalkLimits,
) -> Result<(BatchHeader<'b>, std::borrow::Cow<'b, [u8]>), WalkError> {
    let header = BatchHeader::parse(batch).map_err(|_| SHORT_HEADER)?;
    let codec = codec(header.attributes())?;
    let data = &batch[HEADER_LEN..];
    if codec == Compression::None {
        return Ok((header, std::borrow::Cow::Borrowed(data)));
    }
    let max = limits.decompressed_bytes_max;
    let mut out = Vec::new();
    decoder(codec, data, limits)?
        .take(max as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|_| WalkError::InvalidRecord("compressed records do not decode"))?;
    if out.len() > max {
        return Err(WalkError::DecompressedTooLarge { max });
    }
    Ok((header, std::borrow::Cow::Owned(out)))
}

/// `records` compressed with `codec`, in the framing Kafka's own clients write.
pub fn compress(codec: Compression, records: &[u8]) -> Result<Vec<u8>, WalkError> {
    const FAILED: WalkError = WalkError::InvalidRecord("recompression failed");
    Ok(match codec {
        Compression::None => records.to_vec(),
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(records).map_err(|_| FAILED)?;
            encoder.finish().map_err(|_| FAILED)?
        }
        Compression::Snappy => xerial_snappy(records)?,
        Compression::Lz4 => {
            let mut encoder = lz4::EncoderBuilder::new()
                .block_size(lz4::BlockSize::Max64KB)
                .block_mode(lz4::BlockMode::Independent)
                .checksum(lz4::ContentChecksum::NoChecksum)
                .build(Vec::new())
                .map_err(|_| FAILED)?;
            encoder.write_all(records).map_err(|_| FAILED)?;
            let (out, result) = encoder.finish();
            result.map_err(|_| FAILED)?;
            out
        }
        Compression::Zstd => zstd::bulk::compress(records, ZSTD_LEVEL).map_err(|_| FAILED)?,
    })
}

/// snappy-java's framed format: magic, version 1, compatible version 1, then
/// `[u32 length][raw snappy block]` per block of input.
fn xerial_snappy(records: &[u8]) -> Result<Vec<u8>, WalkError> {
    let mut out = Vec::with_capacity(16 + records.len());
    out.extend_from_slice(b"\x82SNAPPY\x00");
    out.extend_from_slice(&1i32.to_be_bytes());
    out.extend_from_slice(&1i32.to_be_bytes());
    let mut encoder = snap::raw::Encoder::new();
    for block in records.chunks(XERIAL_BLOCK_BYTES) {
        let compressed = encoder
            .compress_vec(block)
            .map_err(|_| WalkError::InvalidRecord("recompression failed"))?;
        let len = u32::try_from(compressed.len()).map_err(|_| BAD_RECORD)?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&compressed);
    }
    Ok(out)
}

/// Parses the record at `at`; returns where it ends and what the cleaner needs of it.
fn parse_record(
    data: &[u8],
    at: usize,
    base_timestamp: i64,
) -> Result<(usize, RecordView<'_>), WalkError> {
    let mut pos = at;
    let length = varint(data, &mut pos)?;
    let length = usize::try_from(length).map_err(|_| BAD_RECORD)?;
    let end = pos.checked_add(length).filter(|&e| e <= data.len());
    let end = end.ok_or(BAD_RECORD)?;
    let record = &data[..end];
    pos += 1; // attributes
    let timestamp_delta = varint(record, &mut pos)?;
    let offset_delta = i32::try_from(varint(record, &mut pos)?).map_err(|_| BAD_RECORD)?;
    let key = bytes_field(record, &mut pos)?;
    let value = bytes_field(record, &mut pos)?;
    if pos > end {
        return Err(BAD_RECORD);
    }
    Ok((
        end,
        RecordView {
            offset_delta,
            timestamp: base_timestamp.wrapping_add(timestamp_delta),
            key,
            value,
        },
    ))
}

/// A length-prefixed field (-1: null).
fn bytes_field<'a>(data: &'a [u8], pos: &mut usize) -> Result<Option<&'a [u8]>, WalkError> {
    let len = varint(data, pos)?;
    if len < 0 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| BAD_RECORD)?;
    let end = pos.checked_add(len).filter(|&e| e <= data.len());
    let end = end.ok_or(BAD_RECORD)?;
    let field = &data[*pos..end];
    *pos = end;
    Ok(Some(field))
}

/// A zigzag varint (Kafka's varint and varlong), at most 10 bytes.
fn varint(data: &[u8], pos: &mut usize) -> Result<i64, WalkError> {
    let mut raw: u64 = 0;
    for shift in (0..70).step_by(7) {
        let byte = *data.get(*pos).ok_or(BAD_RECORD)?;
        *pos += 1;
        raw |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err(BAD_RECORD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_record::{compute_crc, BatchFields, Offset};

    const LIMITS: WalkLimits = WalkLimits {
        decompressed_bytes_max: 1 << 20,
        zstd_window_log_max: 23,
    };

    fn record(delta: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
        let mut body = vec![0u8];
        put_varint(&mut body, delta * 10);
        put_varint(&mut body, delta);
        for field in [key, value] {
            match field {
                Some(b) => {
                    put_varint(&mut body, b.len() as i64);
                    body.extend_from_slice(b);
                }
                None => put_varint(&mut body, -1),
            }
        }
        put_varint(&mut body, 0);
        let mut out = Vec::new();
        put_varint(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
        out
    }

    /// A batch of records `k0=v0, k1=v1, k2=<tombstone>` compressed with `codec` (0-4).
    pub(crate) fn batch(codec: i16) -> Vec<u8> {
        let mut records = Vec::new();
        records.extend(record(0, Some(b"k0"), Some(b"v0")));
        records.extend(record(1, Some(b"k1"), Some(b"v1")));
        records.extend(record(2, Some(b"k2"), None));
        let codec = Compression::from_id(codec).unwrap();
        let body = compress(codec, &records).unwrap();
        BatchFields {
            base_offset: Offset(100),
            attributes: Attributes(0).with_compression(codec),
            last_offset_delta: 2,
            base_timestamp: 1000,
            max_timestamp: 1020,
            records_count: 3,
            ..BatchFields::default()
        }
        .to_batch(&body)
    }

    fn header(batch: &[u8]) -> BatchHeader<'_> {
        BatchHeader::parse(batch).expect("a header")
    }

    fn keys(batch: &[u8]) -> Vec<(i32, Option<Vec<u8>>, bool, i64)> {
        let mut seen = Vec::new();
        scan(batch, &LIMITS, &mut |r| {
            seen.push((
                r.offset_delta,
                r.key.map(<[u8]>::to_vec),
                r.value.is_none(),
                r.timestamp,
            ))
        })
        .expect("scans");
        seen
    }

    #[test]
    fn rebuild_keeps_chosen_records_at_their_offsets_for_every_codec() {
        // Goal: for each codec, a rebuilt batch decodes to exactly the kept records, with
        // their offset deltas and timestamps, a valid CRC, and the header's offsets kept.
        for codec in 0..=4i16 {
            let original = batch(codec);
            assert_eq!(keys(&original).len(), 3, "codec {codec}");
            let mut out = Vec::new();
            let kept = rebuild(&original, &LIMITS, &mut |d| d != 1, None, &mut out).unwrap();
            assert_eq!(kept, 2);
            assert_eq!(
                keys(&out),
                vec![
                    (0, Some(b"k0".to_vec()), false, 1000),
                    (2, Some(b"k2".to_vec()), true, 1020)
                ],
                "codec {codec}"
            );
            let (rebuilt, before) = (header(&out), header(&original));
            assert_eq!(
                rebuilt.base_offset(),
                before.base_offset(),
                "base offset kept"
            );
            let delta = rebuilt.last_offset_delta();
            assert_eq!(delta, before.last_offset_delta(), "lastOffsetDelta kept");
            assert_eq!(rebuilt.attributes(), before.attributes(), "codec kept");
            assert_eq!(rebuilt.records_count(), 2);
            assert_eq!(rebuilt.crc(), compute_crc(&out));
            assert_eq!(rebuilt.total_size(), Some(out.len()));
        }
    }

    #[test]
    fn a_delete_horizon_rebases_timestamps_for_every_codec() {
        // Goal: stamping a delete horizon sets bit 6 and baseTimestamp to the horizon, and
        // every kept record still decodes to its own timestamp (deltas now negative).
        for codec in 0..=4i16 {
            let original = batch(codec);
            assert_eq!(delete_horizon_ms(&original), None);
            let mut out = Vec::new();
            let kept = rebuild(&original, &LIMITS, &mut |_| true, Some(90_000), &mut out).unwrap();
            assert_eq!(kept, 3);
            assert_eq!(delete_horizon_ms(&out), Some(90_000), "codec {codec}");
            assert_eq!(
                keys(&out),
                keys(&original),
                "timestamps kept, codec {codec}"
            );
            let (rebuilt, before) = (header(&out), header(&original));
            let codec_id = rebuilt.attributes().compression_id();
            assert_eq!(codec_id, codec, "codec kept");
            let max_timestamp = rebuilt.max_timestamp();
            assert_eq!(max_timestamp, before.max_timestamp(), "maxTimestamp kept");
            assert_eq!(rebuilt.crc(), compute_crc(&out));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        // Goal: any bytes after a valid header (any codec id) give an answer or an error,
        // never a panic.
        #[test]
        fn any_records_bytes_never_panic(
            codec in 0i16..8,
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
        ) {
            let mut b = batch(0);
            b.truncate(HEADER_LEN);
            BatchHeaderMut::new(&mut b).unwrap().set_attributes(Attributes(codec));
            b.extend_from_slice(&body);
            let _ = scan(&b, &LIMITS, &mut |_| {});
            let mut out = Vec::new();
            let _ = rebuild(&b, &LIMITS, &mut |d| d % 2 == 0, Some(7), &mut out);
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        // Goal: cut or flipped batches fail cleanly.
        let original = batch(0);
        for cut in [0, 10, HEADER_LEN, HEADER_LEN + 1, original.len() - 1] {
            let mut out = Vec::new();
            let _ = rebuild(&original[..cut], &LIMITS, &mut |_| true, Some(7), &mut out);
            let _ = scan(&original[..cut], &LIMITS, &mut |_| {});
        }
        let mut bad = batch(4);
        let last = bad.len() - 3;
        bad[last] ^= 0xff;
        let _ = scan(&bad, &LIMITS, &mut |_| {});
    }
}
