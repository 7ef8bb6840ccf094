//! Group-level failures. Each variant is one Kafka error; the broker's `error_code` module
//! owns the numbers, so this crate stays free of wire details.

/// Why a group request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("the group id is empty or invalid")]
    InvalidGroupId,
    #[error("the member id is not known to the group")]
    UnknownMemberId,
    #[error("the generation id is not the group's current generation")]
    IllegalGeneration,
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    #[error("the session timeout is outside group.min/max.session.timeout.ms")]
    InvalidSessionTimeout,
    #[error("the protocol type or protocols are incompatible with the group's")]
    InconsistentGroupProtocol,
    #[error("the member must rejoin with the member id it was given")]
    MemberIdRequired,
    #[error("another member with the same group.instance.id has joined")]
    FencedInstanceId,
    #[error("the group has reached group.max.size members")]
    GroupMaxSizeReached,
    #[error("the group still has members")]
    NonEmptyGroup,
    #[error("the group does not exist")]
    GroupIdNotFound,
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("the offset metadata is larger than offset.metadata.max.bytes")]
    OffsetMetadataTooLarge,
    #[error("the coordinator is at its limit of groups or offsets")]
    CoordinatorNotAvailable,
    // KIP-848 (consumer group protocol) errors.
    #[error("the request is malformed or combines fields that do not go together")]
    InvalidRequest,
    #[error("the member epoch is not the member's current epoch")]
    StaleMemberEpoch,
    #[error("the member was fenced and must rejoin with epoch 0")]
    FencedMemberEpoch,
    #[error("the static member's previous incarnation has not left")]
    UnreleasedInstanceId,
    #[error("the server-side assignor is not supported")]
    UnsupportedAssignor,
    #[error("the subscribed topic regex is not a valid regular expression")]
    InvalidRegularExpression,
}

/// Why a transaction request was refused (docs/transactions.md §7). The broker maps each
/// to Kafka's code for the request's version: `ProducerFenced` is sent as
/// INVALID_PRODUCER_EPOCH to the versions before KIP-588 (§7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("the transactional id is empty")]
    InvalidRequest,
    #[error("the transaction timeout is not positive or exceeds transaction.max.timeout.ms")]
    InvalidTransactionTimeout,
    #[error("a newer producer with the same transactional id has been started")]
    ProducerFenced,
    #[error("the transactional id has a change or a transaction completion in progress")]
    ConcurrentTransactions,
    #[error("the coordinator is at its limit of transactional ids or partitions")]
    CoordinatorNotAvailable,
    #[error("the producer id is not the transactional id's current one")]
    InvalidProducerIdMapping,
    #[error("the request does not fit the transaction's state")]
    InvalidTxnState,
    #[error("the transactional id does not exist")]
    TransactionalIdNotFound,
}
