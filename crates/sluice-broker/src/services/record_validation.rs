//! Record validation on the produce path: what Kafka's `LogValidator` refuses, checked before
//! a batch reaches `log.append`.
//!
//! The first failing check answers the partition, and nothing of it is stored. Step 1 is
//! decided over all of the partition's batches first, then steps 2-3 batch by batch, then
//! step 4 batch by batch:
//! 1. framing, magic, CRC-32C, lastOffsetDelta = recordsCount - 1 (`sluice-log`'s
//!    `batch::validate`): CORRUPT_MESSAGE / INVALID_RECORD;
//! 2. a control batch from a client: INVALID_RECORD (Kafka: "Clients are not allowed to write
//!    control records"); a transactional batch in a request without a transactional id:
//!    TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's answer); with one it goes on to the
//!    log, which accepts it only inside the producer's ongoing transaction there
//!    (INVALID_TXN_STATE otherwise, docs/transactions.md §6.1);
//!    zstd in a Produce request older than v7: UNSUPPORTED_COMPRESSION_TYPE (Kafka's rule:
//!    clients that old cannot read zstd);
//! 3. a producer id that this broker never issued: UNKNOWN_PRODUCER_ID (Java and librdkafka
//!    clients recover by asking InitProducerId for a new id);
//! 4. the records themselves, by the bounded walk of `sluice_protocol::record_walk`: codec
//!    ids 5-7 get UNSUPPORTED_COMPRESSION_TYPE, framing INVALID_RECORD, and a batch that
//!    expands past [`limits::RECORD_BATCH_DECOMPRESSED_BYTES_MAX`] MESSAGE_TOO_LARGE.
//!
//! One CRC-32C per accepted batch: step 1's checksum is the one `log.append` computes anyway
//! (the log refuses a corrupt batch from any caller, so it cannot be skipped there). This
//! module runs steps 2-4 first, without a checksum, and only when they refuse does it run
//! step 1 over every batch of the partition, so that the answer is the one the numbered
//! order gives: a batch damaged in transit gets CORRUPT_MESSAGE (which clients retry), never
//! INVALID_RECORD for whatever the damage happens to look like. That is also Kafka's order
//! (`UnifiedLog.analyzeAndValidateRecords` checks every batch's CRC before `LogValidator`).
//! The walk is safe on any bytes (see `record_walk`), checksummed or not.
//!
//! Guarantees: memory per walk is fixed (see `record_walk`), at most
//! [`limits::DECOMPRESSIONS_CONCURRENT_MAX`] compressed batches are walked at once across the
//! broker, and walks of compressed or large data run on the blocking pool, never on an async
//! worker. Small uncompressed requests are walked in place on the caller (a framing walk, no
//! copy), which keeps the common produce path free of a thread hop.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use sluice_log::batch::{self, BatchIter};
use sluice_protocol::record_walk::{self, WalkError, WalkLimits};
use sluice_record::{BatchHeader, Compression};
use tokio::sync::Semaphore;

use crate::services::producer_ids::ProducerIds;
use crate::{config::limits, error_code};

/// The walk's bounds, from [`limits`].
pub const WALK_LIMITS: WalkLimits = WalkLimits {
    decompressed_bytes_max: limits::RECORD_BATCH_DECOMPRESSED_BYTES_MAX,
    zstd_window_log_max: limits::ZSTD_WINDOW_LOG_MAX,
};

/// Permits for concurrent walks of compressed batches (produce and ListOffsets share them).
pub static DECOMPRESSION_PERMITS: Semaphore =
    Semaphore::const_new(limits::DECOMPRESSIONS_CONCURRENT_MAX);

/// What the request says about its records (the same for every partition of it).
#[derive(Debug, Clone, Copy)]
pub struct ProduceContext {
    /// The Produce request's version (zstd needs v7 or later).
    pub version: i16,
    /// Whether the request carries a transactional id.
    pub transactional_id: bool,
}

/// First Produce version that may carry zstd batches (Kafka's `ProduceRequest`).
const ZSTD_PRODUCE_VERSION_MIN: i16 = 7;

/// Why a partition's records were refused: the Kafka error code and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub error_code: i16,
    pub message: String,
    /// The records to blame (Produce v8+ `record_errors`): their index among the
    /// partition's records and a message for each. Empty when the whole batch is at fault.
    pub record_errors: Vec<(i32, String)>,
}

impl Refusal {
    fn new(error_code: i16, message: impl Into<String>) -> Self {
        Self {
            error_code,
            message: message.into(),
            record_errors: Vec::new(),
        }
    }
}

/// The code for a refused walk.
pub fn walk_error_code(e: &WalkError) -> i16 {
    match e {
        WalkError::UnsupportedCompression(_) => ResponseError::UnsupportedCompressionType.code(),
        WalkError::InvalidRecord(_) => ResponseError::InvalidRecord.code(),
        WalkError::DecompressedTooLarge { .. } => ResponseError::MessageTooLarge.code(),
    }
}

/// Validates one partition's produced records. Cheap header checks run here; the record
/// walk runs here for small uncompressed requests, else on the blocking pool. `Ok` leaves
/// the CRC-32C to `log.append` (see the module header).
pub async fn validate_produce(
    producer_ids: &ProducerIds,
    request: ProduceContext,
    records: &Bytes,
) -> Result<(), Refusal> {
    match validate_contents(producer_ids, request, records).await {
        Ok(()) => Ok(()),
        // Damage in transit explains any refusal; only a sound batch gets the content's code.
        Err(refusal) => Err(integrity_refusal(records).unwrap_or(refusal)),
    }
}

/// Step 1 for every batch (the refusal path only): the log's own check, CRC-32C included.
/// `None` when every batch is sound. Size is checked by the log against the partition's
/// max.message.bytes.
fn integrity_refusal(records: &Bytes) -> Option<Refusal> {
    BatchIter::new(records.clone())
        .find_map(|b| {
            b.and_then(|b| batch::validate(&b, u32::MAX).map(|_| ()))
                .err()
        })
        .map(log_refusal)
}

/// Steps 2-4, without a checksum.
async fn validate_contents(
    producer_ids: &ProducerIds,
    request: ProduceContext,
    records: &Bytes,
) -> Result<(), Refusal> {
    let compressed = check_headers(producer_ids, request, records)?;
    if !compressed && records.len() <= limits::RECORDS_INLINE_WALK_BYTES_MAX {
        return walk_all(records);
    }
    // A permit only for compressed data: uncompressed walks use no decoder memory. The
    // semaphore is never closed, so acquiring fails only in theory.
    let permit = if compressed {
        let permit = DECOMPRESSION_PERMITS.acquire().await;
        Some(permit.map_err(|_| {
            Refusal::new(ResponseError::NotLeaderOrFollower.code(), "shutting down")
        })?)
    } else {
        None
    };
    let owned = records.clone();
    let walked = tokio::task::spawn_blocking(move || walk_all(&owned)).await;
    drop(permit);
    walked.unwrap_or_else(|e| {
        tracing::error!(error = %e, "record validation task failed");
        Err(Refusal::new(
            ResponseError::InvalidRecord.code(),
            "record validation failed",
        ))
    })
}

/// Steps 2-3 of the module header for every batch; returns whether any batch is compressed.
/// Framing only (each batch's length fits the buffer): no checksum, see the module header.
fn check_headers(
    producer_ids: &ProducerIds,
    request: ProduceContext,
    records: &Bytes,
) -> Result<bool, Refusal> {
    let mut compressed = false;
    for b in BatchIter::new(records.clone()) {
        let b = b.map_err(log_refusal)?;
        let header = BatchHeader::parse(&b).map_err(|e| log_refusal(e.into()))?;
        check_header(producer_ids, request, &header)?;
        compressed |= header.attributes().compression() != Some(Compression::None);
    }
    Ok(compressed)
}

fn log_refusal(e: sluice_log::LogError) -> Refusal {
    Refusal::new(error_code::from_log(&e), e.to_string())
}

fn check_header(
    producer_ids: &ProducerIds,
    request: ProduceContext,
    header: &BatchHeader<'_>,
) -> Result<(), Refusal> {
    if header.is_control() {
        return Err(Refusal::new(
            ResponseError::InvalidRecord.code(),
            "clients are not allowed to write control records",
        ));
    }
    if header.is_transactional() && !request.transactional_id {
        return Err(Refusal::new(
            ResponseError::TransactionalIdAuthorizationFailed.code(),
            "transactional records in a request without a transactional id",
        ));
    }
    let compression = record_walk::codec(header.attributes()).map_err(|e| walk_refusal(&e))?;
    if compression == Compression::Zstd && request.version < ZSTD_PRODUCE_VERSION_MIN {
        return Err(Refusal::new(
            ResponseError::UnsupportedCompressionType.code(),
            "zstd needs Produce v7 or later",
        ));
    }
    let producer_id = header.producer_id();
    if producer_id.is_idempotent() && !producer_ids.is_issued(producer_id) {
        return Err(Refusal::new(
            ResponseError::UnknownProducerId.code(),
            format!(
                "producer id {} was never issued by this broker",
                producer_id.0
            ),
        ));
    }
    Ok(())
}

fn walk_refusal(e: &WalkError) -> Refusal {
    Refusal::new(walk_error_code(e), e.to_string())
}

/// Step 4: walks every batch's records. Blocking for compressed data (decompression).
fn walk_all(records: &Bytes) -> Result<(), Refusal> {
    for b in BatchIter::new(records.clone()) {
        let b = b.map_err(log_refusal)?;
        record_walk::validate(&b, &WALK_LIMITS).map_err(|e| walk_refusal(&e))?;
    }
    Ok(())
}

/// Keeps the shared permits type nameable for handlers that hold one across blocking work.
pub type DecompressionPermit = tokio::sync::SemaphorePermit<'static>;

/// Takes a decompression permit (for ListOffsets by time, which may decompress one batch).
pub async fn decompression_permit() -> Option<DecompressionPermit> {
    DECOMPRESSION_PERMITS.acquire().await.ok()
}
