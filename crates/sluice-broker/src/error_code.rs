//! Kafka error codes Sluice returns, and the mapping from log errors to them. Protocol and
//! storage crates stay free of wire error codes; this is the one place they are decided.

use sluice_coordinator::GroupError;
use sluice_log::LogError;

pub const UNKNOWN_SERVER_ERROR: i16 = -1;
pub const NONE: i16 = 0;
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
pub const CORRUPT_MESSAGE: i16 = 2;
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub const MESSAGE_TOO_LARGE: i16 = 10;
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
pub const INVALID_REQUIRED_ACKS: i16 = 21;
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
pub const INVALID_PARTITIONS: i16 = 37;
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
pub const INVALID_CONFIG: i16 = 40;
pub const INVALID_REQUEST: i16 = 42;
pub const POLICY_VIOLATION: i16 = 44;
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
pub const KAFKA_STORAGE_ERROR: i16 = 56;
pub const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
pub const FENCED_LEADER_EPOCH: i16 = 74;
pub const UNKNOWN_LEADER_EPOCH: i16 = 75;
pub const INVALID_RECORD: i16 = 87;
pub const NOT_ENOUGH_REPLICAS: i16 = 19;
pub const INVALID_TXN_STATE: i16 = 48;
pub const INVALID_PRODUCER_ID_MAPPING: i16 = 49;
pub const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
pub const CONCURRENT_TRANSACTIONS: i16 = 51;
pub const OPERATION_NOT_ATTEMPTED: i16 = 55;
pub const PRODUCER_FENCED: i16 = 90;
pub const TRANSACTIONAL_ID_NOT_FOUND: i16 = 105;
pub const TRANSACTION_ABORTABLE: i16 = 120;
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
pub const SECURITY_DISABLED: i16 = 54;
pub const UNKNOWN_PRODUCER_ID: i16 = 59;
pub const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
pub const UNKNOWN_TOPIC_ID: i16 = 100;
pub const RESOURCE_NOT_FOUND: i16 = 91;
pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
pub const NOT_COORDINATOR: i16 = 16;
pub const ILLEGAL_GENERATION: i16 = 22;
pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
pub const INVALID_GROUP_ID: i16 = 24;
pub const UNKNOWN_MEMBER_ID: i16 = 25;
pub const INVALID_SESSION_TIMEOUT: i16 = 26;
pub const REBALANCE_IN_PROGRESS: i16 = 27;
pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
pub const UNSTABLE_OFFSET_COMMIT: i16 = 88;
pub const NON_EMPTY_GROUP: i16 = 68;
pub const GROUP_ID_NOT_FOUND: i16 = 69;
pub const MEMBER_ID_REQUIRED: i16 = 79;
pub const FENCED_INSTANCE_ID: i16 = 82;
pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
pub const FENCED_MEMBER_EPOCH: i16 = 110;
pub const UNRELEASED_INSTANCE_ID: i16 = 111;
pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
pub const STALE_MEMBER_EPOCH: i16 = 113;
pub const INVALID_REGULAR_EXPRESSION: i16 = 128;
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
pub const ILLEGAL_SASL_STATE: i16 = 34;
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
pub const DUPLICATE_RESOURCE: i16 = 92;
pub const UNACCEPTABLE_CREDENTIAL: i16 = 93;

/// The error code for a group coordinator refusal.
pub fn from_group(e: GroupError) -> i16 {
    match e {
        GroupError::InvalidGroupId => INVALID_GROUP_ID,
        GroupError::UnknownMemberId => UNKNOWN_MEMBER_ID,
        GroupError::IllegalGeneration => ILLEGAL_GENERATION,
        GroupError::RebalanceInProgress => REBALANCE_IN_PROGRESS,
        GroupError::InvalidSessionTimeout => INVALID_SESSION_TIMEOUT,
        GroupError::InconsistentGroupProtocol => INCONSISTENT_GROUP_PROTOCOL,
        GroupError::MemberIdRequired => MEMBER_ID_REQUIRED,
        GroupError::FencedInstanceId => FENCED_INSTANCE_ID,
        GroupError::GroupMaxSizeReached => GROUP_MAX_SIZE_REACHED,
        GroupError::NonEmptyGroup => NON_EMPTY_GROUP,
        GroupError::GroupIdNotFound => GROUP_ID_NOT_FOUND,
        GroupError::GroupSubscribedToTopic => GROUP_SUBSCRIBED_TO_TOPIC,
        GroupError::OffsetMetadataTooLarge => OFFSET_METADATA_TOO_LARGE,
        GroupError::CoordinatorNotAvailable => COORDINATOR_NOT_AVAILABLE,
        GroupError::InvalidRequest => INVALID_REQUEST,
        GroupError::StaleMemberEpoch => STALE_MEMBER_EPOCH,
        GroupError::FencedMemberEpoch => FENCED_MEMBER_EPOCH,
        GroupError::UnreleasedInstanceId => UNRELEASED_INSTANCE_ID,
        GroupError::UnsupportedAssignor => UNSUPPORTED_ASSIGNOR,
        GroupError::InvalidRegularExpression => INVALID_REGULAR_EXPRESSION,
    }
}

/// The code for an optional group error (`None` = success).
pub fn from_group_opt(e: Option<GroupError>) -> i16 {
    e.map_or(NONE, from_group)
}

/// The error code a produce, fetch or admin request gets for a log error.
pub fn from_log(e: &LogError) -> i16 {
    match e {
        LogError::Io(_) | LogError::Poisoned => KAFKA_STORAGE_ERROR,
        LogError::UnknownPartition => UNKNOWN_TOPIC_OR_PARTITION,
        LogError::PartitionExists => TOPIC_ALREADY_EXISTS,
        LogError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        LogError::CorruptBatch(_) => CORRUPT_MESSAGE,
        // Kafka answers a read of corrupt stored data with CORRUPT_MESSAGE too; clients
        // surface it to the application instead of retrying silently.
        LogError::Damaged { .. } => CORRUPT_MESSAGE,
        LogError::FileLimit(_) => KAFKA_STORAGE_ERROR,
        LogError::RecordTooLarge { .. } => MESSAGE_TOO_LARGE,
        LogError::InvalidRecord(_) => INVALID_RECORD,
        LogError::OutOfOrderSequence { .. } => OUT_OF_ORDER_SEQUENCE_NUMBER,
        LogError::InvalidProducerEpoch { .. } => INVALID_PRODUCER_EPOCH,
        // Produce v11+ gets TRANSACTION_ABORTABLE for some of these (`from_produce_log`).
        LogError::InvalidTxnState { .. } => INVALID_TXN_STATE,
        // Retriable and "not persisted" for both Java and librdkafka producers: they retry
        // the same batch, which succeeds once a slot frees up (see producer_state).
        LogError::ProducerStateFull { .. } => NOT_ENOUGH_REPLICAS,
        // Retriable: the client reconnects and retries once the broker is back.
        LogError::ShuttingDown => NOT_LEADER_OR_FOLLOWER,
    }
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
        } if version >= PRODUCE_TRANSACTION_ABORTABLE_FROM => TRANSACTION_ABORTABLE,
        other => from_log(other),
    }
}

/// The code for a transaction coordinator refusal. `producer_fenced` says whether the
/// request's version knows PRODUCER_FENCED (KIP-588); older versions get
/// INVALID_PRODUCER_EPOCH instead, as Kafka's `KafkaApis` sends them.
pub fn from_txn(e: sluice_coordinator::TxnError, producer_fenced: bool) -> i16 {
    use sluice_coordinator::TxnError;
    match e {
        TxnError::InvalidRequest => INVALID_REQUEST,
        TxnError::InvalidTransactionTimeout => INVALID_TRANSACTION_TIMEOUT,
        TxnError::ProducerFenced if producer_fenced => PRODUCER_FENCED,
        TxnError::ProducerFenced => INVALID_PRODUCER_EPOCH,
        TxnError::ConcurrentTransactions => CONCURRENT_TRANSACTIONS,
        TxnError::CoordinatorNotAvailable => COORDINATOR_NOT_AVAILABLE,
        TxnError::InvalidProducerIdMapping => INVALID_PRODUCER_ID_MAPPING,
        TxnError::InvalidTxnState => INVALID_TXN_STATE,
        TxnError::TransactionalIdNotFound => TRANSACTIONAL_ID_NOT_FOUND,
    }
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
        assert_eq!(from_produce_log(&refusal(true), 10), INVALID_TXN_STATE);
        assert_eq!(from_produce_log(&refusal(true), 11), TRANSACTION_ABORTABLE);
        assert_eq!(from_produce_log(&refusal(false), 11), INVALID_TXN_STATE);
        assert_eq!(from_log(&refusal(true)), INVALID_TXN_STATE);
    }
}
