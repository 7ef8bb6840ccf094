//! Kafka error codes: the mapping from log, group and transaction errors to the codes Sluice
//! answers. Protocol and storage crates stay free of wire error codes; this is the one place
//! they are decided. Codes are named by `kafka_protocol::error::ResponseError` (re-exported
//! here), the protocol crate's copy of Kafka's `Errors` table, so no code is typed by hand;
//! handlers write `ResponseError::UnknownMemberId.code()` into their responses.

pub use kafka_protocol::error::ResponseError;
use sluice_coordinator::GroupError;
use sluice_log::LogError;

/// No error (Kafka's `NONE`, which `ResponseError` has no variant for).
pub const NONE: i16 = 0;

/// The error code for a group coordinator refusal.
pub fn from_group(e: GroupError) -> i16 {
    let code = match e {
        GroupError::InvalidGroupId => ResponseError::InvalidGroupId,
        GroupError::UnknownMemberId => ResponseError::UnknownMemberId,
        GroupError::IllegalGeneration => ResponseError::IllegalGeneration,
        GroupError::RebalanceInProgress => ResponseError::RebalanceInProgress,
        GroupError::InvalidSessionTimeout => ResponseError::InvalidSessionTimeout,
        GroupError::InconsistentGroupProtocol => ResponseError::InconsistentGroupProtocol,
        GroupError::MemberIdRequired => ResponseError::MemberIdRequired,
        GroupError::FencedInstanceId => ResponseError::FencedInstanceId,
        GroupError::GroupMaxSizeReached => ResponseError::GroupMaxSizeReached,
        GroupError::NonEmptyGroup => ResponseError::NonEmptyGroup,
        GroupError::GroupIdNotFound => ResponseError::GroupIdNotFound,
        GroupError::GroupSubscribedToTopic => ResponseError::GroupSubscribedToTopic,
        GroupError::OffsetMetadataTooLarge => ResponseError::OffsetMetadataTooLarge,
        GroupError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        GroupError::InvalidRequest => ResponseError::InvalidRequest,
        GroupError::StaleMemberEpoch => ResponseError::StaleMemberEpoch,
        GroupError::FencedMemberEpoch => ResponseError::FencedMemberEpoch,
        GroupError::UnreleasedInstanceId => ResponseError::UnreleasedInstanceId,
        GroupError::UnsupportedAssignor => ResponseError::UnsupportedAssignor,
        GroupError::InvalidRegularExpression => ResponseError::InvalidRegularExpression,
    };
    code.code()
}

/// The code for an optional group error (`None` = success).
pub fn from_group_opt(e: Option<GroupError>) -> i16 {
    e.map_or(NONE, from_group)
}

/// The error code a produce, fetch or admin request gets for a log error.
pub fn from_log(e: &LogError) -> i16 {
    let code = match e {
        LogError::Io(_) | LogError::Poisoned => ResponseError::KafkaStorageError,
        LogError::UnknownPartition => ResponseError::UnknownTopicOrPartition,
        LogError::PartitionExists => ResponseError::TopicAlreadyExists,
        LogError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        LogError::CorruptBatch(_) => ResponseError::CorruptMessage,
        // Kafka answers a read of corrupt stored data with CORRUPT_MESSAGE too; clients
        // surface it to the application instead of retrying silently.
        LogError::Damaged { .. } => ResponseError::CorruptMessage,
        LogError::FileLimit(_) => ResponseError::KafkaStorageError,
        LogError::RecordTooLarge { .. } => ResponseError::MessageTooLarge,
        LogError::InvalidRecord(_) => ResponseError::InvalidRecord,
        LogError::OutOfOrderSequence { .. } => ResponseError::OutOfOrderSequenceNumber,
        LogError::InvalidProducerEpoch { .. } => ResponseError::InvalidProducerEpoch,
        // Produce v11+ gets TRANSACTION_ABORTABLE for some of these (`from_produce_log`).
        LogError::InvalidTxnState { .. } => ResponseError::InvalidTxnState,
        // Retriable and "not persisted" for both Java and librdkafka producers: they retry
        // the same batch, which succeeds once a slot frees up (see producer_state).
        LogError::ProducerStateFull { .. } => ResponseError::NotEnoughReplicas,
        // Retriable: the client reconnects and retries once the broker is back.
        LogError::ShuttingDown => ResponseError::NotLeaderOrFollower,
    };
    code.code()
}

/// Produce v11+ (KIP-890) knows TRANSACTION_ABORTABLE.
const PRODUCE_TRANSACTION_ABORTABLE_FROM: i16 = 11;

/// [`from_log`] for a Produce of `version`: a transactional batch to a partition that is not
/// in the producer's transaction gets TRANSACTION_ABORTABLE from v11 (the client aborts and
/// goes on), INVALID_TXN_STATE before (docs/transactions.md §7, §7.3).
pub fn from_produce_log(e: &LogError, version: i16) -> i16 {
    match e {
        LogError::InvalidTxnState {
            not_in_transaction: true,
            ..
        } if version >= PRODUCE_TRANSACTION_ABORTABLE_FROM => {
            ResponseError::TransactionAbortable.code()
        }
        other => from_log(other),
    }
}

/// The code for a transaction coordinator refusal. `producer_fenced` says whether the
/// request's version knows PRODUCER_FENCED (KIP-588); older versions get
/// INVALID_PRODUCER_EPOCH instead, as Kafka's `KafkaApis` sends them.
pub fn from_txn(e: sluice_coordinator::TxnError, producer_fenced: bool) -> i16 {
    use sluice_coordinator::TxnError;
    let code = match e {
        TxnError::InvalidRequest => ResponseError::InvalidRequest,
        TxnError::InvalidTransactionTimeout => ResponseError::InvalidTransactionTimeout,
        TxnError::ProducerFenced if producer_fenced => ResponseError::ProducerFenced,
        TxnError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        TxnError::ConcurrentTransactions => ResponseError::ConcurrentTransactions,
        TxnError::CoordinatorNotAvailable => ResponseError::CoordinatorNotAvailable,
        TxnError::InvalidProducerIdMapping => ResponseError::InvalidProducerIdMapping,
        TxnError::InvalidTxnState => ResponseError::InvalidTxnState,
        TxnError::TransactionalIdNotFound => ResponseError::TransactionalIdNotFound,
    };
    code.code()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_log::ProducerId;

    #[test]
    fn transaction_abortable_only_from_produce_v11_and_only_outside_the_transaction() {
        let refusal = |not_in_transaction| LogError::InvalidTxnState {
            producer_id: ProducerId(1),
            why: "test",
            not_in_transaction,
        };
        let invalid = ResponseError::InvalidTxnState.code();
        assert_eq!(from_produce_log(&refusal(true), 10), invalid);
        assert_eq!(
            from_produce_log(&refusal(true), 11),
            ResponseError::TransactionAbortable.code()
        );
        assert_eq!(from_produce_log(&refusal(false), 11), invalid);
        assert_eq!(from_log(&refusal(true)), invalid);
    }

    // Goal: the codes behind the names are Kafka's (a few spot checks against the
    // protocol guide, so a renumbering in the protocol crate would be noticed).
    #[test]
    fn codes_are_kafkas() {
        assert_eq!(ResponseError::UnknownServerError.code(), -1);
        assert_eq!(ResponseError::UnknownTopicOrPartition.code(), 3);
        assert_eq!(ResponseError::UnknownMemberId.code(), 25);
        assert_eq!(ResponseError::KafkaStorageError.code(), 56);
        assert_eq!(ResponseError::ProducerFenced.code(), 90);
        assert_eq!(ResponseError::UnsupportedEndpointType.code(), 115);
        assert_eq!(ResponseError::TransactionAbortable.code(), 120);
    }
}
