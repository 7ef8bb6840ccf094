//! Zero-copy view of a Kafka RecordBatch (magic v2) and its validation.
//!
//! The log never decodes records: it sees a batch as bytes with the fixed 61-byte v2 header
//! below (big-endian, offsets in bytes from the start of the batch) and trusts the CRC-32C
//! for everything after byte 21.
//!
//! | at | field                | type |
//! |----|----------------------|------|
//! | 0  | baseOffset           | i64  |
//! | 8  | batchLength          | i32 (bytes after this field) |
//! | 12 | partitionLeaderEpoch | i32  |
//! | 16 | magic                | i8 (= 2) |
//! | 17 | crc                  | u32 (CRC-32C of bytes 21..end) |
//! | 21 | attributes           | i16  |
//! | 23 | lastOffsetDelta      | i32  |
//! | 27 | baseTimestamp        | i64  |
//! | 35 | maxTimestamp         | i64  |
//! | 43 | producerId           | i64  |
//! | 51 | producerEpoch        | i16  |
//! | 53 | baseSequence         | i32  |
//! | 57 | recordsCount         | i32  |
//!
//! Guarantees: [`validate`] accepts only batches whose length fits the buffer, whose magic is
//! 2, whose CRC matches and whose offset deltas are consecutive; a validated batch can be
//! stored as is with only bytes 0..8 (the base offset, outside the CRC) rewritten.

use bytes::Bytes;

use crate::error::LogError;
use crate::types::Offset;

/// Size of the fixed v2 header.
pub const HEADER_LEN: usize = 61;
/// Bytes before `batchLength` counts: baseOffset (8) + batchLength (4).
pub const LOG_OVERHEAD: usize = 12;
/// The only batch format this log stores.
pub const MAGIC_V2: i8 = 2;

const OFF_BASE_OFFSET: usize = 0;
const OFF_BATCH_LENGTH: usize = 8;
const OFF_LEADER_EPOCH: usize = 12;
const OFF_MAGIC: usize = 16;
const OFF_CRC: usize = 17;
/// The CRC covers everything from the attributes field to the end of the batch.
pub const CRC_START: usize = 21;
const OFF_ATTRIBUTES: usize = 21;
const OFF_LAST_OFFSET_DELTA: usize = 23;
const OFF_BASE_TIMESTAMP: usize = 27;
const OFF_MAX_TIMESTAMP: usize = 35;
const OFF_PRODUCER_ID: usize = 43;
const OFF_PRODUCER_EPOCH: usize = 51;
const OFF_BASE_SEQUENCE: usize = 53;
const OFF_RECORDS_COUNT: usize = 57;

/// Attribute bits.
pub const ATTR_COMPRESSION_MASK: i16 = 0b111;
pub const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;
pub const ATTR_TRANSACTIONAL: i16 = 1 << 4;
pub const ATTR_CONTROL: i16 = 1 << 5;
/// Set by a log cleaner: `baseTimestamp` is the batch's delete horizon (KIP-534).
pub const ATTR_DELETE_HORIZON: i16 = 1 << 6;

/// A borrowed view of the 61-byte header at the start of `bytes`. Accessors read the
/// fields in place; nothing is copied or decoded up front.
#[derive(Debug, Clone, Copy)]
pub struct BatchHeader<'a> {
    bytes: &'a [u8],
}

impl<'a> BatchHeader<'a> {
    /// Views the header at the start of `bytes`. Fails only when fewer than 61 bytes are
    /// given; field values are not checked here (see [`validate`]).
    pub fn parse(bytes: &'a [u8]) -> Result<Self, LogError> {
        if bytes.len() < HEADER_LEN {
            return Err(LogError::CorruptBatch("shorter than a v2 batch header"));
        }
        Ok(Self { bytes })
    }

    fn i16_at(&self, at: usize) -> i16 {
        i16::from_be_bytes([self.bytes[at], self.bytes[at + 1]])
    }

    fn i32_at(&self, at: usize) -> i32 {
        let mut raw = [0u8; 4];
        raw.copy_from_slice(&self.bytes[at..at + 4]);
        i32::from_be_bytes(raw)
    }

    fn i64_at(&self, at: usize) -> i64 {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(&self.bytes[at..at + 8]);
        i64::from_be_bytes(raw)
    }

    pub fn base_offset(&self) -> Offset {
        Offset(self.i64_at(OFF_BASE_OFFSET))
    }
    /// Bytes after the batchLength field.
    pub fn batch_length(&self) -> i32 {
        self.i32_at(OFF_BATCH_LENGTH)
    }
    /// Total size of the batch, or `None` when batchLength is negative or too small to
    /// hold the rest of the header.
    pub fn total_size(&self) -> Option<usize> {
        let length = usize::try_from(self.batch_length()).ok()?;
        (length >= HEADER_LEN - LOG_OVERHEAD).then_some(length + LOG_OVERHEAD)
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        self.i32_at(OFF_LEADER_EPOCH)
    }
    pub fn magic(&self) -> i8 {
        i8::from_be_bytes([self.bytes[OFF_MAGIC]])
    }
    pub fn crc(&self) -> u32 {
        self.i32_at(OFF_CRC) as u32
    }
    pub fn attributes(&self) -> i16 {
        self.i16_at(OFF_ATTRIBUTES)
    }
    pub fn compression(&self) -> i16 {
        self.attributes() & ATTR_COMPRESSION_MASK
    }
    pub fn is_log_append_time(&self) -> bool {
        self.attributes() & ATTR_LOG_APPEND_TIME != 0
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & ATTR_TRANSACTIONAL != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & ATTR_CONTROL != 0
    }
    pub fn last_offset_delta(&self) -> i32 {
        self.i32_at(OFF_LAST_OFFSET_DELTA)
    }
    /// Offset of the last record: base offset + lastOffsetDelta.
    pub fn last_offset(&self) -> Offset {
        Offset(
            self.base_offset()
                .0
                .saturating_add(i64::from(self.last_offset_delta())),
        )
    }
    /// Offset after the last record.
    pub fn next_offset(&self) -> Offset {
        Offset(self.last_offset().0.saturating_add(1))
    }
    pub fn base_timestamp(&self) -> i64 {
        self.i64_at(OFF_BASE_TIMESTAMP)
    }
    /// The delete horizon a log cleaner stamped on the batch (Kafka's KIP-534: attribute
    /// bit 6, the time in `baseTimestamp`): its tombstones go once this has passed.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        (self.attributes() & ATTR_DELETE_HORIZON != 0).then(|| self.base_timestamp())
    }
    pub fn max_timestamp(&self) -> i64 {
        self.i64_at(OFF_MAX_TIMESTAMP)
    }
    pub fn producer_id(&self) -> i64 {
        self.i64_at(OFF_PRODUCER_ID)
    }
    pub fn producer_epoch(&self) -> i16 {
        self.i16_at(OFF_PRODUCER_EPOCH)
    }
    pub fn base_sequence(&self) -> i32 {
        self.i32_at(OFF_BASE_SEQUENCE)
    }
    pub fn records_count(&self) -> i32 {
        self.i32_at(OFF_RECORDS_COUNT)
    }
}

/// CRC-32C (Castagnoli) of the part of a batch its `crc` field covers.
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(&batch[CRC_START.min(batch.len())..])
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

/// Length of the batch at the start of `bytes`, checked against the buffer: `None` when
/// the header is short, its length field is insane, or the batch runs past the buffer.
pub fn batch_len_within(bytes: &[u8]) -> Option<usize> {
    let header = BatchHeader::parse(bytes).ok()?;
    let size = header.total_size()?;
    (size <= bytes.len()).then_some(size)
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

/// Writes `base_offset` into bytes 0..8 of a batch (outside the CRC, so the CRC stays valid).
pub fn stamp_base_offset(batch: &mut [u8], base_offset: Offset) {
    batch[OFF_BASE_OFFSET..OFF_BASE_OFFSET + 8].copy_from_slice(&base_offset.0.to_be_bytes());
}

/// The one re-encoding the log does: a copy of `batch` with maxTimestamp set to
/// `append_time_ms`, the LogAppendTime attribute bit set and the CRC recomputed.
pub fn with_log_append_time(batch: &[u8], append_time_ms: i64) -> Bytes {
    let mut copy = batch.to_vec();
    let attributes = i16::from_be_bytes([copy[OFF_ATTRIBUTES], copy[OFF_ATTRIBUTES + 1]]);
    let attributes = attributes | ATTR_LOG_APPEND_TIME;
    copy[OFF_ATTRIBUTES..OFF_ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    copy[OFF_MAX_TIMESTAMP..OFF_MAX_TIMESTAMP + 8].copy_from_slice(&append_time_ms.to_be_bytes());
    let crc = compute_crc(&copy);
    copy[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(copy)
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
        let mut out = Vec::with_capacity(HEADER_LEN + records.len());
        out.extend_from_slice(&0i64.to_be_bytes());
        let length = (HEADER_LEN - LOG_OVERHEAD + records.len()) as i32;
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
        out.push(2);
        out.extend_from_slice(&0u32.to_be_bytes()); // crc, filled below
        out.extend_from_slice(&0i16.to_be_bytes());
        out.extend_from_slice(&(count - 1).to_be_bytes());
        out.extend_from_slice(&ts.to_be_bytes());
        out.extend_from_slice(&(ts + i64::from(count) - 1).to_be_bytes());
        out.extend_from_slice(&(-1i64).to_be_bytes());
        out.extend_from_slice(&(-1i16).to_be_bytes());
        out.extend_from_slice(&(-1i32).to_be_bytes());
        out.extend_from_slice(&count.to_be_bytes());
        out.extend_from_slice(&records);
        let crc = compute_crc(&out);
        out[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::test_batches::batch;
    use super::*;

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
        assert_eq!(header.producer_id(), -1);
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
        b[16] = 1;
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
        b[OFF_LAST_OFFSET_DELTA..OFF_LAST_OFFSET_DELTA + 4].copy_from_slice(&7i32.to_be_bytes());
        let crc = compute_crc(&b);
        b[OFF_CRC..OFF_CRC + 4].copy_from_slice(&crc.to_be_bytes());
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
        let rewritten = with_log_append_time(&b, 99_000);
        let header = validate(&rewritten, 1 << 20).expect("valid after rewrite");
        assert_eq!(header.max_timestamp(), 99_000);
        assert!(header.is_log_append_time());
        assert_eq!(header.base_timestamp(), 10);
    }
}
