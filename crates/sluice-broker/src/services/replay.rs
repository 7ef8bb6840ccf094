//! Replaying an internal partition (`__consumer_offsets-0`, `__transaction_state-0`) on
//! start: every record from the log start offset to the high watermark, in log order, handed
//! to the coordinator that owns the partition.
//!
//! Guarantees: each offset is handed over at most once, in order (a read that starts inside
//! a batch skips the records before it); reads are bounded by
//! [`limits::OFFSETS_LOAD_READ_BYTES`]; a batch that does not decode stops the replay there
//! with an error in the log (the log's CRC checks passed, so it is a format bug, not damage:
//! stopping beats guessing), and so does a read that makes no progress.

use kafka_protocol::records::{Record, RecordBatchDecoder};
use sluice_log::{LogError, LogManager, Offset, PartitionKey};

use crate::config::limits;

/// Hands every record of `key`'s partition below its high watermark to `apply`, in log
/// order. `topic` names the partition in the error log. Blocking (log reads).
pub(crate) fn replay(
    log: &LogManager,
    key: &PartitionKey,
    topic: &str,
    mut apply: impl FnMut(Record),
) -> Result<(), LogError> {
    let offsets = log.offsets(key)?;
    let mut next = offsets.log_start_offset;
    while next < offsets.high_watermark {
        let read = log.read(key, next, limits::OFFSETS_LOAD_READ_BYTES, true)?;
        if read.records.is_empty() {
            break;
        }
        let mut buf = read.records.clone();
        let sets = match RecordBatchDecoder::decode_all(&mut buf) {
            Ok(sets) => sets,
            Err(e) => {
                tracing::error!(error = %e, offset = next.0, "undecodable batch in {topic}; stopping load here");
                break;
            }
        };
        let before = next;
        for record in sets.into_iter().flat_map(|set| set.records) {
            if record.offset < next.0 {
                continue;
            }
            assert!(record.offset >= before.0, "records handed over in order");
            next = Offset(record.offset + 1);
            apply(record);
        }
        if next == before {
            break;
        }
    }
    Ok(())
}
