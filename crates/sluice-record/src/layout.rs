//! Where each field of a v2 batch header is: the only copy of these numbers in Sluice.
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
//! | 61 | records              | (recordsCount records, compressed as a whole or not) |
//!
//! The positions are Kafka's (`DefaultRecordBatch`); the compile-time checks below tie each
//! one to the end of the field before it, so a typo cannot leave a gap or an overlap.

pub const BASE_OFFSET_AT: usize = 0;
pub const BATCH_LENGTH_AT: usize = 8;
pub const PARTITION_LEADER_EPOCH_AT: usize = 12;
pub const MAGIC_AT: usize = 16;
pub const CRC_AT: usize = 17;
pub const ATTRIBUTES_AT: usize = 21;
pub const LAST_OFFSET_DELTA_AT: usize = 23;
pub const BASE_TIMESTAMP_AT: usize = 27;
pub const MAX_TIMESTAMP_AT: usize = 35;
pub const PRODUCER_ID_AT: usize = 43;
pub const PRODUCER_EPOCH_AT: usize = 51;
pub const BASE_SEQUENCE_AT: usize = 53;
pub const RECORDS_COUNT_AT: usize = 57;
/// The first record starts right after the header.
pub const RECORDS_AT: usize = 61;

/// Size of the fixed v2 header.
pub const HEADER_LEN: usize = RECORDS_AT;
/// Bytes before what `batchLength` counts: baseOffset (8) + batchLength (4). A batch's
/// size is `batchLength + LOG_OVERHEAD`.
pub const LOG_OVERHEAD: usize = PARTITION_LEADER_EPOCH_AT;
/// The CRC covers everything from the attributes field to the end of the batch; the
/// fields before it (base offset, length, leader epoch, magic, the CRC itself) are
/// outside it, which is what lets a log stamp the base offset without re-checksumming.
pub const CRC_START: usize = ATTRIBUTES_AT;
/// The only batch format Sluice reads or writes.
pub const MAGIC_V2: i8 = 2;

const fn follows(at: usize, previous_at: usize, previous_bytes: usize) -> bool {
    at == previous_at + previous_bytes
}

const _: () = assert!(BASE_OFFSET_AT == 0);
const _: () = assert!(follows(BATCH_LENGTH_AT, BASE_OFFSET_AT, 8));
const _: () = assert!(follows(PARTITION_LEADER_EPOCH_AT, BATCH_LENGTH_AT, 4));
const _: () = assert!(follows(MAGIC_AT, PARTITION_LEADER_EPOCH_AT, 4));
const _: () = assert!(follows(CRC_AT, MAGIC_AT, 1));
const _: () = assert!(follows(ATTRIBUTES_AT, CRC_AT, 4));
const _: () = assert!(follows(LAST_OFFSET_DELTA_AT, ATTRIBUTES_AT, 2));
const _: () = assert!(follows(BASE_TIMESTAMP_AT, LAST_OFFSET_DELTA_AT, 4));
const _: () = assert!(follows(MAX_TIMESTAMP_AT, BASE_TIMESTAMP_AT, 8));
const _: () = assert!(follows(PRODUCER_ID_AT, MAX_TIMESTAMP_AT, 8));
const _: () = assert!(follows(PRODUCER_EPOCH_AT, PRODUCER_ID_AT, 8));
const _: () = assert!(follows(BASE_SEQUENCE_AT, PRODUCER_EPOCH_AT, 2));
const _: () = assert!(follows(RECORDS_COUNT_AT, BASE_SEQUENCE_AT, 4));
const _: () = assert!(follows(RECORDS_AT, RECORDS_COUNT_AT, 4));
