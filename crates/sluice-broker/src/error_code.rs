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

// The earlier constant names, now derived from `ResponseError` (no number is typed here).
// Kept so that code written against them on other branches (the broker config rewrite's
// `handlers/describe_configs.rs`) still merges; new code names `ResponseError` directly.
mod names {
    use super::ResponseError;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = ResponseError::ClusterAuthorizationFailed.code();
    pub const CONCURRENT_TRANSACTIONS: i16 = ResponseError::ConcurrentTransactions.code();
    pub const COORDINATOR_NOT_AVAILABLE: i16 = ResponseError::CoordinatorNotAvailable.code();
    pub const CORRUPT_MESSAGE: i16 = ResponseError::CorruptMessage.code();
    pub const DUPLICATE_RESOURCE: i16 = ResponseError::DuplicateResource.code();
    pub const FENCED_INSTANCE_ID: i16 = ResponseError::FencedInstanceId.code();
    pub const FENCED_LEADER_EPOCH: i16 = ResponseError::FencedLeaderEpoch.code();
    pub const FENCED_MEMBER_EPOCH: i16 = ResponseError::FencedMemberEpoch.code();
    pub const FETCH_SESSION_ID_NOT_FOUND: i16 = ResponseError::FetchSessionIdNotFound.code();
    pub const GROUP_AUTHORIZATION_FAILED: i16 = ResponseError::GroupAuthorizationFailed.code();
    pub const GROUP_ID_NOT_FOUND: i16 = ResponseError::GroupIdNotFound.code();
    pub const GROUP_MAX_SIZE_REACHED: i16 = ResponseError::GroupMaxSizeReached.code();
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = ResponseError::GroupSubscribedToTopic.code();
    pub const ILLEGAL_GENERATION: i16 = ResponseError::IllegalGeneration.code();
    pub const ILLEGAL_SASL_STATE: i16 = ResponseError::IllegalSaslState.code();
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = ResponseError::InconsistentGroupProtocol.code();
    pub const INVALID_CONFIG: i16 = ResponseError::InvalidConfig.code();
    pub const INVALID_GROUP_ID: i16 = ResponseError::InvalidGroupId.code();
    pub const INVALID_PARTITIONS: i16 = ResponseError::InvalidPartitions.code();
    pub const INVALID_PRODUCER_EPOCH: i16 = ResponseError::InvalidProducerEpoch.code();
    pub const INVALID_PRODUCER_ID_MAPPING: i16 = ResponseError::InvalidProducerIdMapping.code();
    pub const INVALID_RECORD: i16 = ResponseError::InvalidRecord.code();
    pub const INVALID_REGULAR_EXPRESSION: i16 = ResponseError::InvalidRegularExpression.code();
    pub const INVALID_REPLICATION_FACTOR: i16 = ResponseError::InvalidReplicationFactor.code();
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = ResponseError::InvalidReplicaAssignment.code();
    pub const INVALID_REQUEST: i16 = ResponseError::InvalidRequest.code();
    pub const INVALID_REQUIRED_ACKS: i16 = ResponseError::InvalidRequiredAcks.code();
    pub const INVALID_SESSION_TIMEOUT: i16 = ResponseError::InvalidSessionTimeout.code();
    pub const INVALID_TOPIC_EXCEPTION: i16 = ResponseError::InvalidTopicException.code();
    pub const INVALID_TRANSACTION_TIMEOUT: i16 = ResponseError::InvalidTransactionTimeout.code();
    pub const INVALID_TXN_STATE: i16 = ResponseError::InvalidTxnState.code();
    pub const KAFKA_STORAGE_ERROR: i16 = ResponseError::KafkaStorageError.code();
    pub const MEMBER_ID_REQUIRED: i16 = ResponseError::MemberIdRequired.code();
    pub const MESSAGE_TOO_LARGE: i16 = ResponseError::MessageTooLarge.code();
    pub const NON_EMPTY_GROUP: i16 = ResponseError::NonEmptyGroup.code();
    pub const NOT_COORDINATOR: i16 = ResponseError::NotCoordinator.code();
    pub const NOT_ENOUGH_REPLICAS: i16 = ResponseError::NotEnoughReplicas.code();
    pub const NOT_LEADER_OR_FOLLOWER: i16 = ResponseError::NotLeaderOrFollower.code();
    pub const OFFSET_METADATA_TOO_LARGE: i16 = ResponseError::OffsetMetadataTooLarge.code();
    pub const OFFSET_OUT_OF_RANGE: i16 = ResponseError::OffsetOutOfRange.code();
    pub const OPERATION_NOT_ATTEMPTED: i16 = ResponseError::OperationNotAttempted.code();
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = ResponseError::OutOfOrderSequenceNumber.code();
    pub const POLICY_VIOLATION: i16 = ResponseError::PolicyViolation.code();
    pub const PRODUCER_FENCED: i16 = ResponseError::ProducerFenced.code();
    pub const REBALANCE_IN_PROGRESS: i16 = ResponseError::RebalanceInProgress.code();
    pub const RESOURCE_NOT_FOUND: i16 = ResponseError::ResourceNotFound.code();
    pub const SASL_AUTHENTICATION_FAILED: i16 = ResponseError::SaslAuthenticationFailed.code();
    pub const SECURITY_DISABLED: i16 = ResponseError::SecurityDisabled.code();
    pub const STALE_MEMBER_EPOCH: i16 = ResponseError::StaleMemberEpoch.code();
    pub const TOPIC_ALREADY_EXISTS: i16 = ResponseError::TopicAlreadyExists.code();
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = ResponseError::TopicAuthorizationFailed.code();
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 =
        ResponseError::TransactionalIdAuthorizationFailed.code();
    pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = ResponseError::TransactionalIdNotFound.code();
    pub const TRANSACTION_ABORTABLE: i16 = ResponseError::TransactionAbortable.code();
    pub const UNACCEPTABLE_CREDENTIAL: i16 = ResponseError::UnacceptableCredential.code();
    pub const UNKNOWN_LEADER_EPOCH: i16 = ResponseError::UnknownLeaderEpoch.code();
    pub const UNKNOWN_MEMBER_ID: i16 = ResponseError::UnknownMemberId.code();
    pub const UNKNOWN_PRODUCER_ID: i16 = ResponseError::UnknownProducerId.code();
    pub const UNKNOWN_SERVER_ERROR: i16 = ResponseError::UnknownServerError.code();
    pub const UNKNOWN_TOPIC_ID: i16 = ResponseError::UnknownTopicId.code();
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = ResponseError::UnknownTopicOrPartition.code();
    pub const UNRELEASED_INSTANCE_ID: i16 = ResponseError::UnreleasedInstanceId.code();
    pub const UNSTABLE_OFFSET_COMMIT: i16 = ResponseError::UnstableOffsetCommit.code();
    pub const UNSUPPORTED_ASSIGNOR: i16 = ResponseError::UnsupportedAssignor.code();
    pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = ResponseError::UnsupportedCompressionType.code();
    pub const UNSUPPORTED_SASL_MECHANISM: i16 = ResponseError::UnsupportedSaslMechanism.code();
}
pub use names::*;

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
