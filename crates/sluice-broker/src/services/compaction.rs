//! The broker's side of compacted topics (`docs/compaction.md`): the record codec the log
//! cleaner reads and rebuilds batches with, and the produce-path rule that a compacted
//! topic takes only records with a key.
//!
//! Guarantees: the codec uses the record walk's bounds ([`WALK_LIMITS`]), so a cleaner pass
//! over any stored batch, however crafted, holds at most that much decompressed data; the
//! keyless check decompresses on the blocking pool under a decompression permit, never on
//! an async worker.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use sluice_log::batch::BatchIter;
use sluice_log::{PartitionKey, RecordCodec, RecordKey};
use sluice_protocol::record_compact;
use sluice_record::{BatchHeader, Compression};

use crate::config::limits::PRODUCE_RECORD_ERRORS_MAX;
use crate::services::record_validation::{Refusal, DECOMPRESSION_PERMITS, WALK_LIMITS};

/// Kafka's message for a keyless record on a compacted topic (`LogValidator`).
const KEYLESS_MESSAGE: &str = "Compacted topic cannot accept message without key";

/// [`RecordCodec`] over `sluice_protocol::record_compact`.
#[derive(Debug, Default)]
pub struct ProtocolCodec;

impl RecordCodec for ProtocolCodec {
    fn scan(&self, batch: &[u8], visit: &mut dyn FnMut(RecordKey<'_>)) -> Result<(), String> {
        record_compact::scan(batch, &WALK_LIMITS, &mut |r| {
            visit(RecordKey {
                offset_delta: r.offset_delta,
                timestamp_ms: r.timestamp,
                key: r.key,
                tombstone: r.value.is_none(),
            })
        })
        .map_err(|e| e.to_string())
    }

    fn rebuild(
        &self,
        batch: &[u8],
        keep: &mut dyn FnMut(i32) -> bool,
        delete_horizon_ms: Option<i64>,
        out: &mut Vec<u8>,
    ) -> Result<i32, String> {
        record_compact::rebuild(batch, &WALK_LIMITS, keep, delete_horizon_ms, out)
            .map_err(|e| e.to_string())
    }
}

/// The keyless records of a partition's records, as (index among the records, index of
/// the batch holding it); at most [`PRODUCE_RECORD_ERRORS_MAX`] of them, and how many in all.
/// Blocking for compressed data. Records that do not decode were refused by record
/// validation before this runs.
fn keyless_records(records: &Bytes) -> (Vec<(i32, usize)>, usize) {
    let mut found = Vec::new();
    let (mut index, mut total) = (0i32, 0usize);
    for (batch_index, batch) in BatchIter::new(records.clone()).enumerate() {
        let Ok(batch) = batch else { break };
        let _ = record_compact::scan(&batch, &WALK_LIMITS, &mut |r| {
            if r.key.is_none() {
                total += 1;
                if found.len() < PRODUCE_RECORD_ERRORS_MAX {
                    found.push((index, batch_index));
                }
            }
            index = index.saturating_add(1);
        });
    }
    (found, total)
}

/// Refuses a partition's records for a compacted topic when any record has no key, as
/// Kafka does: INVALID_RECORD, nothing stored, and each keyless record named in
/// `record_errors` (Kafka's `LogValidator` message, per record).
pub async fn refuse_keyless(records: &Bytes, key: &PartitionKey) -> Result<(), Refusal> {
    let compressed = BatchIter::new(records.clone()).any(|b| {
        b.ok().is_some_and(|b| {
            BatchHeader::parse(&b)
                .is_ok_and(|h| h.attributes().compression() != Some(Compression::None))
        })
    });
    let (found, total) = if compressed {
        let Ok(permit) = DECOMPRESSION_PERMITS.acquire().await else {
            return Ok(()); // The semaphore is never closed.
        };
        let owned = records.clone();
        let found = tokio::task::spawn_blocking(move || keyless_records(&owned))
            .await
            .unwrap_or_default();
        drop(permit);
        found
    } else {
        keyless_records(records)
    };
    let Some(&(_, batch_index)) = found.first() else {
        return Ok(());
    };
    let per_record = format!(
        "{KEYLESS_MESSAGE} in topic partition {}-{}.",
        key.topic, key.partition
    );
    Err(Refusal {
        error_code: ResponseError::InvalidRecord.code(),
        message: format!("{KEYLESS_MESSAGE} (batch {batch_index}; {total} keyless records)"),
        record_errors: found
            .into_iter()
            .map(|(index, _)| (index, per_record.clone()))
            .collect(),
    })
}
