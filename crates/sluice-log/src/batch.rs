//! The log's checks of Kafka record batches (magic v2), over the one model of the batch
//! layout in `sluice-record` (re-exported here, so `sluice_log::batch::BatchHeader` is that
//! crate's view, not a copy).
//!
//! The log never decodes records: it sees a batch as bytes with the fixed 61-byte v2 header
//! and trusts the CRC-32C for everything after the header's first 21 bytes.
//!
//! Guarantees: [`validate`] accepts only batches whose length fits the buffer, whose magic is
//! 2, whose CRC matches and whose offset deltas are consecutive; a validated batch can be
//! stored as is with only its base offset (outside the CRC) rewritten.

use bytes::Bytes;

use crate::error::LogError;

pub use sluice_record::{
    batch_len_within, compute_crc, layout, stamp_base_offset, Attributes, BatchFields, BatchHeader,
    BatchHeaderMut, BatchPrefix, HeaderTooShort, CRC_START, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2,
};

impl From<HeaderTooShort> for LogError {
    fn from(_: HeaderTooShort) -> Self {
        LogError::CorruptBatch("shorter than a v2 batch header")
    }
}

/// Checks one batch occupying exactly `batch` (as split by [`BatchIter`]): magic 2,
/// matching CRC-32C, at least one record, consecutive offset deltas, and a size within
/// `max_message_bytes`.
pub fn validate(batch: &[u8], max_message_bytes: u32) -> Result<BatchHeader<'_>, LogError> {
    let header = BatchHeader::parse(batch)?;
    let size = header
        .total_size()
        .ok_or(LogError::CorruptBatch("batchLength too small"))?;
    if size != batch.len() {
        return Err(LogError::CorruptBatch(
            "batchLength does not match the bytes given",
        ));
    }
    if size > max_message_bytes as usize {
        return Err(LogError::RecordTooLarge {
            size,
            max: max_message_bytes,
        });
    }
    if header.magic() != MAGIC_V2 {
        return Err(LogError::CorruptBatch("magic is not 2"));
    }
    if compute_crc(batch) != header.crc() {
        return Err(LogError::CorruptBatch("CRC-32C mismatch"));
    }
    check_offsets(&header)?;
    Ok(header)
}

/// Checks a batch as stored: like [`validate`] (magic, length, CRC-32C) but with the
/// offsets a cleaned batch may have (`docs/compaction.md` §2): fewer records than its
/// offset span (the cleaner removed some; each keeps its offset), or none at all (an empty
/// batch kept for its producer, or a gap batch covering removed ones).
pub fn validate_stored(batch: &[u8]) -> Result<BatchHeader<'_>, LogError> {
    let header = BatchHeader::parse(batch)?;
    let size = header
        .total_size()
        .ok_or(LogError::CorruptBatch("batchLength too small"))?;
    if size != batch.len() {
        return Err(LogError::CorruptBatch(
            "batchLength does not match the bytes given",
        ));
    }
    if header.magic() != MAGIC_V2 {
        return Err(LogError::CorruptBatch("magic is not 2"));
    }
    if compute_crc(batch) != header.crc() {
        return Err(LogError::CorruptBatch("CRC-32C mismatch"));
    }
    let count = header.records_count();
    let delta = header.last_offset_delta();
    if delta < 0 || count < 0 || i64::from(count) > i64::from(delta) + 1 {
        return Err(LogError::InvalidRecord(
            "recordsCount does not fit the batch's offsets",
        ));
    }
    Ok(header)
}

/// Offsets inside a batch must be 0..recordsCount: the log assigns one offset per record.
fn check_offsets(header: &BatchHeader<'_>) -> Result<(), LogError> {
    let count = header.records_count();
    if count < 1 {
        return Err(LogError::InvalidRecord("record batch holds no records"));
    }
    if header.last_offset_delta() != count - 1 {
        return Err(LogError::InvalidRecord(
            "lastOffsetDelta is not recordsCount - 1",
        ));
    }
    Ok(())
}

/// Splits a buffer of concatenated batches into one `Bytes` per batch (zero-copy slices).
/// Yields an error, then stops, at the first length that does not fit.
#[derive(Debug)]
pub struct BatchIter {
    rest: Bytes,
    failed: bool,
}

impl BatchIter {
    pub fn new(bytes: Bytes) -> Self {
        Self {
            rest: bytes,
            failed: false,
        }
    }
}

impl Iterator for BatchIter {
    type Item = Result<Bytes, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        match batch_len_within(&self.rest) {
            Some(len) => Some(Ok(self.rest.split_to(len))),
            None => {
                self.failed = true;
                Some(Err(LogError::CorruptBatch(
                    "batch length is invalid or exceeds the buffer",
                )))
            }
        }
    }
}

/// The one re-encoding the log does: a copy of `batch` with maxTimestamp set to
/// `append_time_ms`, the LogAppendTime attribute bit set and the CRC recomputed.
pub fn with_log_append_time(batch: &[u8], append_time_ms: i64) -> Result<Bytes, LogError> {
    let mut copy = batch.to_vec();
    let mut header = BatchHeaderMut::new(&mut copy)?;
    let attributes = header.header().attributes();
    header.set_attributes(attributes.with(Attributes::LOG_APPEND_TIME));
    header.set_max_timestamp(append_time_ms);
    header.update_crc();
    Ok(Bytes::from(copy))
}

#[cfg(test)]
pub(crate) mod test_batches {
    //! Builds valid v2 batches for tests: a real header, simple uncompressed records, and a
    //! correct CRC-32C.

    use super::*;

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

    fn record(offset_delta: i64, timestamp_delta: i64, value: &[u8]) -> Vec<u8> {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, timestamp_delta);
        put_varint(&mut body, offset_delta);
        put_varint(&mut body, -1); // null key
        put_varint(&mut body, value.len() as i64);
        body.extend_from_slice(value);
        put_varint(&mut body, 0); // no headers
        let mut out = Vec::new();
        put_varint(&mut out, body.len() as i64);
        out.extend_from_slice(&body);
        out
    }

    /// A batch of `count` records, each `value_len` bytes, timestamps `ts..ts+count-1`.
    pub(crate) fn batch(count: i32, value_len: usize, ts: i64) -> Vec<u8> {
        let mut records = Vec::new();
        for i in 0..count {
            let value = vec![b'a' + (i % 26) as u8; value_len];
            records.extend_from_slice(&record(i64::from(i), i64::from(i), &value));
        }
        BatchFields {
            last_offset_delta: count - 1,
            base_timestamp: ts,
            max_timestamp: ts + i64::from(count) - 1,
            records_count: count,
            ..BatchFields::default()
        }
        .to_batch(&records)
    }
}

#[cfg(test)]
mod tests {
    use super::test_batches::batch;
    use super::*;
    use crate::types::{Offset, ProducerId};

    #[test]
    fn valid_batch_parses_and_validates() {
        // Goal: a well-formed batch passes validation and its header fields read back.
        let b = batch(3, 10, 1000);
        let header = validate(&b, 1 << 20).expect("valid");
        assert_eq!(header.records_count(), 3);
        assert_eq!(header.last_offset_delta(), 2);
        assert_eq!(header.base_timestamp(), 1000);
        assert_eq!(header.max_timestamp(), 1002);
        assert_eq!(header.magic(), 2);
        assert_eq!(header.producer_id(), ProducerId(-1));
    }

    #[test]
    fn stamping_keeps_crc_valid() {
        // Goal: rewriting the base offset never invalidates the CRC (bytes 0..8 are outside it).
        let mut b = batch(2, 5, 0);
        stamp_base_offset(&mut b, Offset(12345));
        let header = validate(&b, 1 << 20).expect("still valid");
        assert_eq!(header.base_offset(), Offset(12345));
        assert_eq!(header.last_offset(), Offset(12346));
    }

    #[test]
    fn corrupt_batches_are_rejected() {
        // Goal: flipped CRC bytes, a wrong magic and a short buffer each give CorruptBatch.
        let mut b = batch(2, 5, 0);
        let last = b.len() - 1;
        b[last] ^= 1;
        assert!(matches!(
            validate(&b, 1 << 20),
            Err(LogError::CorruptBatch(_))
        ));
        let mut b = batch(2, 5, 0);
        BatchHeaderMut::new(&mut b).unwrap().set_magic(1);
        assert!(matches!(
            validate(&b, 1 << 20),
            Err(LogError::CorruptBatch(_))
        ));
        let b = batch(2, 5, 0);
        assert!(matches!(
            validate(&b[..40], 1 << 20),
            Err(LogError::CorruptBatch(_))
        ));
    }

    #[test]
    fn oversized_and_non_consecutive_batches_are_rejected() {
        // Goal: size over max.message.bytes is RecordTooLarge; bad deltas are InvalidRecord.
        let b = batch(4, 100, 0);
        let err = validate(&b, 100).unwrap_err();
        assert!(matches!(err, LogError::RecordTooLarge { size, max: 100 } if size == b.len()));
        let mut b = batch(4, 1, 0);
        let mut header = BatchHeaderMut::new(&mut b).unwrap();
        header.set_last_offset_delta(7);
        header.update_crc();
        assert!(matches!(
            validate(&b, 1 << 20),
            Err(LogError::InvalidRecord(_))
        ));
    }

    #[test]
    fn iterator_splits_concatenated_batches() {
        // Goal: BatchIter yields each batch once, then an error for a torn trailing batch.
        let mut all = batch(1, 3, 0);
        all.extend_from_slice(&batch(2, 3, 0));
        let whole = Bytes::from(all.clone());
        let parts: Vec<_> = BatchIter::new(whole)
            .collect::<Result<_, _>>()
            .expect("split");
        assert_eq!(parts.len(), 2);
        all.extend_from_slice(&batch(1, 3, 0)[..30]);
        let results: Vec<_> = BatchIter::new(Bytes::from(all)).collect();
        assert_eq!(results.len(), 3);
        assert!(results[2].is_err());
    }

    #[test]
    fn log_append_time_rewrite_sets_time_and_crc() {
        // Goal: the LogAppendTime copy carries the new max timestamp, the bit, and a valid CRC.
        let b = batch(2, 5, 10);
        let rewritten = with_log_append_time(&b, 99_000).unwrap();
        let header = validate(&rewritten, 1 << 20).expect("valid after rewrite");
        assert_eq!(header.max_timestamp(), 99_000);
        assert!(header.is_log_append_time());
        assert_eq!(header.base_timestamp(), 10);
    }
}
