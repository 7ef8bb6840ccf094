//! [`LogError`]: the operating errors of the log, typed so the broker can map each one to
//! a Kafka error code (that mapping lives in `sluice-broker`, not here).

use crate::types::{Offset, ProducerEpoch, ProducerId};

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An I/O error on the write path. The log is poisoned from here on.
    #[error("storage I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// An earlier write or sync failed; the log refuses writes until the process restarts.
    #[error("log is poisoned by an earlier I/O failure; restart required")]
    Poisoned,
    /// No partition with that key (or the topic id does not match).
    #[error("unknown partition")]
    UnknownPartition,
    /// The partition already exists.
    #[error("partition already exists")]
    PartitionExists,
    /// A read below the log start offset or above the high watermark.
    #[error("offset {offset:?} out of range [{log_start_offset:?}, {high_watermark:?}]")]
    OffsetOutOfRange {
        offset: Offset,
        log_start_offset: Offset,
        high_watermark: Offset,
    },
    /// The produced bytes are not valid v2 record batches (bad length, magic, or CRC).
    #[error("corrupt record batch: {0}")]
    CorruptBatch(&'static str),
    /// A batch larger than the partition's `max.message.bytes`.
    #[error("record batch of {size} bytes exceeds max.message.bytes {max}")]
    RecordTooLarge { size: usize, max: u32 },
    /// A batch whose offsets are not consecutive from zero, or otherwise not acceptable.
    #[error("invalid record batch: {0}")]
    InvalidRecord(&'static str),
    /// An idempotent batch from a producer epoch older than the one the partition has seen
    /// for that producer id: the producer was fenced by a newer session (Kafka 47,
    /// INVALID_PRODUCER_EPOCH). Nothing of the request was written.
    #[error(
        "producer {producer_id:?}: epoch {epoch:?} is older than the current epoch {current:?}"
    )]
    InvalidProducerEpoch {
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        current: ProducerEpoch,
    },
    /// An idempotent batch whose base sequence does not follow the producer's last one
    /// (or a new epoch that does not start at 0): a batch is missing in between (Kafka 45,
    /// OUT_OF_ORDER_SEQUENCE_NUMBER). Nothing of the request was written.
    #[error("producer {producer_id:?}: base sequence {received} where {expected} was expected")]
    OutOfOrderSequence {
        producer_id: ProducerId,
        expected: i32,
        received: i32,
    },
    /// A transactional batch for a partition that is not part of the producer's ongoing
    /// transaction (not verified by the coordinator, docs/transactions.md §6.1), or a
    /// non-transactional batch while the producer's transaction is open there (Kafka 48,
    /// INVALID_TXN_STATE). Nothing of the request was written.
    #[error("producer {producer_id:?}: {why}")]
    InvalidTxnState {
        producer_id: ProducerId,
        why: &'static str,
        /// The batch's partition was never added to (verified for) the producer's
        /// transaction: KIP-890's abortable case (TRANSACTION_ABORTABLE for Produce v11+);
        /// the other refusals stay INVALID_TXN_STATE.
        not_in_transaction: bool,
    },
    /// A new idempotent producer at a partition whose producer table is full of producers
    /// active too recently to be evicted (their retries may still come). Nothing of the
    /// request was written; the producer may retry later.
    #[error("producer {producer_id:?}: partition already tracks {producers_max} recently active producers")]
    ProducerStateFull {
        producer_id: ProducerId,
        producers_max: usize,
    },
    /// Stored data that was acknowledged cannot be served: a segment is damaged (its bytes
    /// do not form consecutive, well-formed batches) or a segment file is missing. Raised
    /// instead of skipping the offsets, so the loss is never silent; the broker answers
    /// CORRUPT_MESSAGE, which clients report to the application.
    #[error("stored data is damaged at offset {offset:?}: {why}")]
    Damaged { offset: Offset, why: &'static str },
    /// A file could not be opened because the process or system is out of file
    /// descriptors (EMFILE / ENFILE). Nothing was written; the request may be retried.
    #[error("out of file descriptors: {0}")]
    FileLimit(std::io::Error),
    /// The log is shutting down and accepts no more appends.
    #[error("log is shutting down")]
    ShuttingDown,
}
