//! Zero-copy views of a v2 batch header: [`BatchHeader`] (all 61 bytes) and
//! [`BatchPrefix`] (the 21 bytes before the CRC-covered part).
//!
//! A view borrows a fixed-size array, checked once when it is made; every getter reads its
//! field in place at a constant position of that array, so once inlined it compiles to a
//! load with no bounds check. The produce path, the read path and recovery call these per
//! batch, so they are all `#[inline]` and allocate nothing. Field values are not checked
//! here (magic, CRC, offsets): that is the caller's policy (`sluice_log::batch::validate`).

use std::fmt;

use crate::attributes::Attributes;
use crate::ids::{Offset, ProducerEpoch, ProducerId};
use crate::layout::*;

/// A view was asked of fewer bytes than it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderTooShort;

impl fmt::Display for HeaderTooShort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("shorter than a v2 batch header")
    }
}

impl std::error::Error for HeaderTooShort {}

#[inline(always)]
fn i16_at<const N: usize>(bytes: &[u8; N], at: usize) -> i16 {
    i16::from_be_bytes([bytes[at], bytes[at + 1]])
}

#[inline(always)]
fn i32_at<const N: usize>(bytes: &[u8; N], at: usize) -> i32 {
    i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[inline(always)]
fn i64_at<const N: usize>(bytes: &[u8; N], at: usize) -> i64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[at..at + 8]);
    i64::from_be_bytes(raw)
}

/// The batch's size from its `batchLength`, or `None` when that is negative or too small
/// to hold the rest of a header.
#[inline(always)]
fn size_from_length(batch_length: i32) -> Option<usize> {
    let length = usize::try_from(batch_length).ok()?;
    (length >= HEADER_LEN - LOG_OVERHEAD).then_some(length + LOG_OVERHEAD)
}

/// A borrowed view of the 61-byte header at the start of a batch.
#[derive(Clone, Copy)]
pub struct BatchHeader<'a> {
    bytes: &'a [u8; HEADER_LEN],
}

impl<'a> BatchHeader<'a> {
    /// Views the header at the start of `bytes` (a batch, or more bytes starting with one).
    /// Fails only when fewer than 61 bytes are given.
    #[inline]
    pub fn parse(bytes: &'a [u8]) -> Result<Self, HeaderTooShort> {
        match bytes.first_chunk::<HEADER_LEN>() {
            Some(bytes) => Ok(Self { bytes }),
            None => Err(HeaderTooShort),
        }
    }

    /// The 61 header bytes.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8; HEADER_LEN] {
        self.bytes
    }

    /// The part before the CRC-covered bytes.
    #[inline]
    pub fn prefix(&self) -> BatchPrefix<'a> {
        let (prefix, _) = self
            .bytes
            .split_first_chunk::<CRC_START>()
            .expect("61 > 21");
        BatchPrefix { bytes: prefix }
    }

    #[inline]
    pub fn base_offset(&self) -> Offset {
        Offset(i64_at(self.bytes, BASE_OFFSET_AT))
    }
    /// Bytes after the batchLength field.
    #[inline]
    pub fn batch_length(&self) -> i32 {
        i32_at(self.bytes, BATCH_LENGTH_AT)
    }
    /// Total size of the batch, or `None` when batchLength is negative or too small to
    /// hold the rest of the header.
    #[inline]
    pub fn total_size(&self) -> Option<usize> {
        size_from_length(self.batch_length())
    }
    #[inline]
    pub fn partition_leader_epoch(&self) -> i32 {
        i32_at(self.bytes, PARTITION_LEADER_EPOCH_AT)
    }
    #[inline]
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC_AT] as i8
    }
    #[inline]
    pub fn crc(&self) -> u32 {
        i32_at(self.bytes, CRC_AT) as u32
    }
    #[inline]
    pub fn attributes(&self) -> Attributes {
        Attributes(i16_at(self.bytes, ATTRIBUTES_AT))
    }
    #[inline]
    pub fn is_log_append_time(&self) -> bool {
        self.attributes().contains(Attributes::LOG_APPEND_TIME)
    }
    #[inline]
    pub fn is_transactional(&self) -> bool {
        self.attributes().is_transactional()
    }
    #[inline]
    pub fn is_control(&self) -> bool {
        self.attributes().is_control()
    }
    #[inline]
    pub fn last_offset_delta(&self) -> i32 {
        i32_at(self.bytes, LAST_OFFSET_DELTA_AT)
    }
    /// Offset of the last record: base offset + lastOffsetDelta.
    #[inline]
    pub fn last_offset(&self) -> Offset {
        let delta = i64::from(self.last_offset_delta());
        Offset(self.base_offset().0.saturating_add(delta))
    }
    /// Offset after the last record.
    #[inline]
    pub fn next_offset(&self) -> Offset {
        Offset(self.last_offset().0.saturating_add(1))
    }
    #[inline]
    pub fn base_timestamp(&self) -> i64 {
        i64_at(self.bytes, BASE_TIMESTAMP_AT)
    }
    /// The delete horizon a log cleaner stamped on the batch (Kafka's KIP-534: attribute
    /// bit 6, the time in `baseTimestamp`): its tombstones go once this has passed.
    #[inline]
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        let stamped = self.attributes().has_delete_horizon();
        stamped.then(|| self.base_timestamp())
    }
    #[inline]
    pub fn max_timestamp(&self) -> i64 {
        i64_at(self.bytes, MAX_TIMESTAMP_AT)
    }
    #[inline]
    pub fn producer_id(&self) -> ProducerId {
        ProducerId(i64_at(self.bytes, PRODUCER_ID_AT))
    }
    #[inline]
    pub fn producer_epoch(&self) -> ProducerEpoch {
        ProducerEpoch(i16_at(self.bytes, PRODUCER_EPOCH_AT))
    }
    #[inline]
    pub fn base_sequence(&self) -> i32 {
        i32_at(self.bytes, BASE_SEQUENCE_AT)
    }
    #[inline]
    pub fn records_count(&self) -> i32 {
        i32_at(self.bytes, RECORDS_COUNT_AT)
    }
}

impl fmt::Debug for BatchHeader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchHeader")
            .field("base_offset", &self.base_offset().0)
            .field("batch_length", &self.batch_length())
            .field("partition_leader_epoch", &self.partition_leader_epoch())
            .field("magic", &self.magic())
            .field("crc", &self.crc())
            .field("attributes", &self.attributes())
            .field("last_offset_delta", &self.last_offset_delta())
            .field("base_timestamp", &self.base_timestamp())
            .field("max_timestamp", &self.max_timestamp())
            .field("producer_id", &self.producer_id().0)
            .field("producer_epoch", &self.producer_epoch().0)
            .field("base_sequence", &self.base_sequence())
            .field("records_count", &self.records_count())
            .finish()
    }
}

/// A borrowed view of the first 21 bytes of a batch: the fields its CRC does not cover
/// (base offset, length, leader epoch, magic, the CRC itself). For readers that check a
/// batch's CRC in pieces and for the journal, which checksums these bytes itself.
#[derive(Debug, Clone, Copy)]
pub struct BatchPrefix<'a> {
    bytes: &'a [u8; CRC_START],
}

impl<'a> BatchPrefix<'a> {
    /// Views the first 21 bytes of `bytes`; fails when fewer are given.
    #[inline]
    pub fn parse(bytes: &'a [u8]) -> Result<Self, HeaderTooShort> {
        match bytes.first_chunk::<CRC_START>() {
            Some(bytes) => Ok(Self { bytes }),
            None => Err(HeaderTooShort),
        }
    }

    /// The 21 prefix bytes.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8; CRC_START] {
        self.bytes
    }
    #[inline]
    pub fn base_offset(&self) -> Offset {
        Offset(i64_at(self.bytes, BASE_OFFSET_AT))
    }
    #[inline]
    pub fn batch_length(&self) -> i32 {
        i32_at(self.bytes, BATCH_LENGTH_AT)
    }
    /// As [`BatchHeader::total_size`].
    #[inline]
    pub fn total_size(&self) -> Option<usize> {
        size_from_length(self.batch_length())
    }
    #[inline]
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC_AT] as i8
    }
    #[inline]
    pub fn crc(&self) -> u32 {
        i32_at(self.bytes, CRC_AT) as u32
    }
}

/// CRC-32C (Castagnoli) of the part of a batch its `crc` field covers (bytes 21..end).
#[inline]
pub fn compute_crc(batch: &[u8]) -> u32 {
    crc32c::crc32c(batch.get(CRC_START..).unwrap_or_default())
}

/// Size of the batch at the start of `bytes`, checked against the buffer: `None` when the
/// header is short, its length field is insane, or the batch runs past the buffer.
#[inline]
pub fn batch_len_within(bytes: &[u8]) -> Option<usize> {
    let size = BatchHeader::parse(bytes).ok()?.total_size()?;
    (size <= bytes.len()).then_some(size)
}
