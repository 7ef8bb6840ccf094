//! Transactions V2's implicit add on Produce v12+ (KIP-890 part 2; docs/transactions.md
//! §14): a transactional produce adds its partitions to the producer's transaction itself,
//! where a V1 client sent AddPartitionsToTxn first. Kafka's partition leader sends the
//! coordinator an AddPartitionsToTxn v5 (not `verify_only`) and appends once it is
//! answered; here the coordinator is in process, so the add is the same change
//! AddPartitionsToTxn writes (the `Ongoing` record and, gated on it, the verification of
//! each partition in the log, one commit round), awaited before the request's appends are
//! queued. `start` runs in the connection's arrival order, so a pipelined produce behind
//! this one is queued only after the add took effect, as Kafka, which reads one request
//! of a connection at a time, orders them.
//!
//! Only the first produce of a transaction to a partition writes: once the partition is in
//! the ongoing transaction at the request's producer id and epoch, the check is one look
//! under the coordinator's lock, and the log decides each batch as for any transactional
//! batch (§6.1). The epoch must be the transaction's exactly: a zombie of an earlier
//! transaction is refused here, before anything reaches the log.
//!
//! Errors, as Kafka's leader translates the coordinator's for the produce response:
//! PRODUCER_FENCED is sent as INVALID_PRODUCER_EPOCH, CONCURRENT_TRANSACTIONS is retried for
//! up to 100 ms and then sent as is, an unavailable coordinator (a refused or failed write)
//! is NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh. More than
//! one producer id among a request's transactional batches is INVALID_PRODUCER_ID_MAPPING.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use sluice_coordinator::{TopicPartition, TxnError};
use sluice_log::LogError;
use sluice_record::BatchHeader;

use crate::{error_code, Broker};

/// The first Produce version whose transactional batches add their partition (Kafka's
/// `produceRequestVersionToTransactionSupportedOperation`: ADD_PARTITION).
pub(super) const IMPLICIT_ADD_VERSION_MIN: i16 = 12;

/// Kafka's retry of CONCURRENT_TRANSACTIONS on an implicit add: every
/// `add.partitions.to.txn.retry.backoff.ms` (20), for at most
/// `add.partitions.to.txn.retry.backoff.max.ms` (100).
const RETRY_BACKOFF_MS: u64 = 20;
const RETRY_FOR_MS_MAX: u64 = 100;

/// The producer id and epoch of a partition's first batch when it is transactional (a
/// batch too short for its header has none: validation refuses it).
pub(super) fn transactional_producer(records: &Bytes) -> Option<(i64, i16)> {
    let header = BatchHeader::parse(records).ok()?;
    let producer = (header.producer_id().0, header.producer_epoch().0);
    header.is_transactional().then_some(producer)
}

/// A request's transactional partitions, gathered before anything is appended.
#[derive(Debug, Default)]
pub(super) struct TxnPartitions {
    /// The producer of the first transactional batch.
    pub(super) producer: Option<(i64, i16)>,
    /// A batch of another producer id was seen (Kafka: InvalidPidMappingException).
    pub(super) mixed: bool,
    pub(super) partitions: Vec<TopicPartition>,
}

impl TxnPartitions {
    pub(super) fn push(&mut self, topic: &str, partition: i32, producer: (i64, i16)) {
        match self.producer {
            None => self.producer = Some(producer),
            Some((id, _)) if id != producer.0 => self.mixed = true,
            Some(_) => {}
        }
        self.partitions.push(TopicPartition {
            topic: topic.to_owned(),
            partition,
        });
    }

    /// Adds the partitions to the transaction of `transactional_id`; on `Err`, the code
    /// every transactional partition of the request gets (nothing of them is appended).
    pub(super) async fn add(&self, broker: &Broker, transactional_id: &str) -> Result<(), i16> {
        let Some((producer_id, epoch)) = self.producer else {
            return Ok(());
        };
        if self.mixed {
            return Err(ResponseError::InvalidProducerIdMapping.code());
        }
        let mut waited_ms = 0;
        loop {
            let change = broker.txns.call(|c, now| {
                c.add_partitions_implicitly(
                    transactional_id,
                    producer_id,
                    epoch,
                    &self.partitions,
                    now,
                )
            });
            let written = match change {
                Ok(None) => return Ok(()),
                Ok(Some(change)) => {
                    broker
                        .txns
                        .write_then_verify(&broker.topics, &change, &self.partitions)
                        .await
                }
                Err(TxnError::ConcurrentTransactions) if waited_ms < RETRY_FOR_MS_MAX => {
                    tokio::time::sleep(Duration::from_millis(RETRY_BACKOFF_MS)).await;
                    waited_ms += RETRY_BACKOFF_MS;
                    continue;
                }
                Err(e) => return Err(refusal_code(e)),
            };
            return written.map_err(|e| write_code(&e));
        }
    }
}

/// A coordinator refusal as Kafka's leader answers it on the produce path.
fn refusal_code(e: TxnError) -> i16 {
    match e {
        TxnError::ProducerFenced => ResponseError::InvalidProducerEpoch.code(),
        TxnError::CoordinatorNotAvailable => ResponseError::NotEnoughReplicas.code(),
        e => error_code::from_txn(e, false),
    }
}

/// A failed write of the add: the log's own refusals keep their codes, anything else
/// (a poisoned or full log) is NOT_ENOUGH_REPLICAS, retried by the client.
fn write_code(e: &LogError) -> i16 {
    match e {
        LogError::ProducerStateFull { .. } | LogError::InvalidProducerEpoch { .. } => {
            crate::log_limit::producer_state_full(e, None);
            error_code::from_log(e)
        }
        e => {
            tracing::warn!(error = %e, "implicit add to a transaction not durable");
            ResponseError::NotEnoughReplicas.code()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_record::{Attributes, BatchFields, ProducerEpoch, ProducerId, HEADER_LEN};

    #[test]
    fn the_producer_is_read_from_a_transactional_batch_header_only() {
        // Goal: the producer id and epoch come from the v2 header's fields, and a batch
        // without the transactional bit (or too short to hold a header) has none.
        let mut fields = BatchFields {
            producer_id: ProducerId(4_242),
            producer_epoch: ProducerEpoch(7),
            ..BatchFields::default()
        };
        assert_eq!(transactional_producer(&fields.to_batch(&[]).into()), None);
        fields.attributes = Attributes::TRANSACTIONAL;
        let batch = Bytes::from(fields.to_batch(&[]));
        assert_eq!(transactional_producer(&batch), Some((4_242, 7)));
        assert_eq!(transactional_producer(&batch.slice(..HEADER_LEN - 1)), None);
    }

    #[test]
    fn refusals_are_kafkas_produce_codes() {
        // Goal: the translation of ReplicaManager's postVerificationCallback.
        assert_eq!(
            refusal_code(TxnError::ProducerFenced),
            ResponseError::InvalidProducerEpoch.code()
        );
        assert_eq!(
            refusal_code(TxnError::InvalidProducerIdMapping),
            ResponseError::InvalidProducerIdMapping.code()
        );
        assert_eq!(
            refusal_code(TxnError::ConcurrentTransactions),
            ResponseError::ConcurrentTransactions.code()
        );
        assert_eq!(
            refusal_code(TxnError::CoordinatorNotAvailable),
            ResponseError::NotEnoughReplicas.code()
        );
        assert_eq!(
            write_code(&LogError::Poisoned),
            ResponseError::NotEnoughReplicas.code()
        );
    }
}
