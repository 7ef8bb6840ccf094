//! Group and transaction coordinator settings and bounds, with Kafka's names and defaults.

/// Settings of the group coordinator. Every bound the coordinator enforces is here.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.min.session.timeout.ms`.
    pub group_min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms`.
    pub group_max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms`: how long the first rebalance of an empty group
    /// waits for more members, re-armed by each join, never past the rebalance timeout.
    pub group_initial_rebalance_delay_ms: i32,
    /// `group.max.size`: members (including pending ones) per group.
    pub group_max_size: usize,
    /// Groups the coordinator holds at most (Sluice bound).
    pub groups_max: usize,
    /// Committed offsets per group at most (Sluice bound).
    pub offsets_per_group_max: usize,
    /// `offset.metadata.max.bytes`.
    pub offset_metadata_bytes_max: usize,
    /// `offsets.retention.minutes`, in ms: committed offsets of an empty group expire this
    /// long after the group became empty (or after the commit, for standalone commits).
    pub offsets_retention_ms: i64,
    /// `group.consumer.session.timeout.ms`: a KIP-848 member not heard from this long is
    /// removed (the broker decides it; members do not send one).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`: returned in every ConsumerGroupHeartbeat
    /// answer; members heartbeat this often.
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.max.size`: members of one KIP-848 group (Kafka's default is
    /// unbounded; Sluice bounds it like classic groups).
    pub consumer_group_max_size: usize,
    /// Topics one KIP-848 member may subscribe to by name (Sluice bound).
    pub consumer_subscribed_topics_max: usize,
    /// Memory one compiled `SubscribedTopicRegex` may take, for its program and again for
    /// its lazy DFA's cache (Sluice bound; Kafka has none). A larger pattern gets
    /// INVALID_REGULAR_EXPRESSION. Each group holds one compiled copy per distinct pattern.
    pub consumer_regex_compiled_bytes_max: usize,
}

impl Default for GroupConfig {
    fn default() -> Self {
        Self {
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: 1_000,
            groups_max: 10_000,
            offsets_per_group_max: 100_000,
            offset_metadata_bytes_max: 4_096,
            offsets_retention_ms: 7 * 24 * 60 * 60 * 1000,
            consumer_session_timeout_ms: 45_000,
            consumer_heartbeat_interval_ms: 5_000,
            consumer_group_max_size: 1_000,
            consumer_subscribed_topics_max: 10_000,
            consumer_regex_compiled_bytes_max: 256 * 1024,
        }
    }
}

/// Settings of the transaction coordinator (docs/transactions.md §8). Every bound it
/// enforces is here.
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer may ask.
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an id with no transaction (Empty or Complete*)
    /// idle this long is removed (a tombstone is written).
    pub transactional_id_expiration_ms: i64,
    /// Transactional ids the coordinator holds at most (Sluice bound). A new id beyond it
    /// gets COORDINATOR_NOT_AVAILABLE, as `groups_max` does for groups.
    pub transactional_ids_max: usize,
    /// Partition entries across all ongoing transactions at most (Sluice bound; about 40
    /// bytes each). AddPartitionsToTxn beyond it gets COORDINATOR_NOT_AVAILABLE.
    pub transaction_partitions_max: usize,
}

impl Default for TxnConfig {
    fn default() -> Self {
        Self {
            transaction_max_timeout_ms: 900_000,
            transactional_id_expiration_ms: 604_800_000,
            transactional_ids_max: 100_000,
            transaction_partitions_max: 1_000_000,
        }
    }
}
