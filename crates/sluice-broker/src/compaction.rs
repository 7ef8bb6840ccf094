//! The broker's side of compacted topics (`docs/compaction.md`): the record codec the log
//! cleaner reads and rebuilds batches with, and the produce-path rule that a compacted
//! topic takes only records with a key.
//!
//! Guarantees: the codec uses the record walk's bounds ([`WALK_LIMITS`]), so a cleaner pass
//! over any stored batch, however crafted, holds at most that much decompressed data; the
//! keyless check decompresses on the blocking pool under a decompression permit, never on
//! an async worker.

use bytes::Bytes;
use sluice_log::batch::{BatchHeader, BatchIter};
use sluice_log::{RecordCodec, RecordKey};
use sluice_protocol::record_compact;

use crate::error_code;
use crate::record_validation::{Refusal, DECOMPRESSION_PERMITS, WALK_LIMITS};

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
        out: &mut Vec<u8>,
    ) -> Result<i32, String> {
        record_compact::rebuild(batch, &WALK_LIMITS, keep, out).map_err(|e| e.to_string())
    }
}

/// The index of the first batch holding a keyless record, if any (blocking for compressed
/// data). Records that do not decode were refused by record validation before this runs.
fn first_keyless(records: &Bytes) -> Option<usize> {
    BatchIter::new(records.clone())
        .enumerate()
        .find_map(|(index, batch)| {
            let batch = batch.ok()?;
            let mut keyless = false;
            let _ = record_compact::scan(&batch, &WALK_LIMITS, &mut |r| {
                keyless |= r.key.is_none();
            });
            keyless.then_some(index)
        })
}

/// Refuses a partition's records for a compacted topic when any record has no key, as
/// Kafka does: INVALID_RECORD, nothing stored.
pub async fn refuse_keyless(records: &Bytes) -> Result<(), Refusal> {
    let compressed = BatchIter::new(records.clone()).any(|b| {
        b.ok()
            .and_then(|b| BatchHeader::parse(&b).ok().map(|h| h.compression() != 0))
            .unwrap_or(false)
    });
    let found = if compressed {
        let Ok(permit) = DECOMPRESSION_PERMITS.acquire().await else {
            return Ok(()); // The semaphore is never closed.
        };
        let owned = records.clone();
        let found = tokio::task::spawn_blocking(move || first_keyless(&owned))
            .await
            .unwrap_or(None);
        drop(permit);
        found
    } else {
        first_keyless(records)
    };
    match found {
        None => Ok(()),
        Some(batch_index) => Err(Refusal {
            error_code: error_code::INVALID_RECORD,
            message: format!("{KEYLESS_MESSAGE} (batch {batch_index})"),
        }),
    }
}
