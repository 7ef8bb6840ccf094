//! `sluice-coordinator`: the group coordinator, the transaction coordinator and the
//! producer-id allocator as pure state machines. Nothing here does I/O, reads a clock or spawns work: every call takes `now_ms`,
//! and whatever must be made durable is handed back to the caller as [`StoreRecord`]s.
//!
//! The broker owns the wiring: it decodes requests into the types below, holds the
//! coordinator behind a mutex (never across an `.await`), appends the returned records to the
//! internal `__consumer_offsets` log, and answers the client once they are durable.
//!
//! # Durability contract
//! - Offset commits, offset deletes and group deletes are *validated* here, written by the
//!   broker, and *applied* here ([`GroupCoordinator::apply`]) only after the write is durable,
//!   so an OffsetFetch never returns an offset that a crash could take back.
//! - Records in [`Effects::persist`] describe state that is already applied in memory (group
//!   metadata after a rebalance, expired offsets); the broker appends them and delivers
//!   [`Effects::replies`] after they are durable.
//! - On start the broker replays the log through [`GroupCoordinator::apply`] in log order and
//!   then calls [`GroupCoordinator::finish_load`]. Replay is idempotent: later log offsets win.
//!
//! # Layout
//! - [`config`]: timeouts and every bound (groups, members, offsets, metadata sizes).
//! - [`error`]: [`GroupError`], the group-level failures; the broker maps them to Kafka codes.
//! - [`records`]: the versioned key/value format of `__consumer_offsets` records.
//! - [`group`]: the classic-protocol group state machine (JoinGroup, SyncGroup, Heartbeat,
//!   LeaveGroup, rebalance timers, static membership).
//! - [`consumer_group`]: KIP-848 consumer groups (ConsumerGroupHeartbeat): group epochs,
//!   target assignments and per-member reconciliation.
//! - [`assignor`]: the server-side assignors of KIP-848 groups, `uniform` and `range`.
//! - [`topic_regex`]: KIP-848 `SubscribedTopicRegex` compilation and whole-name matching.
//! - [`coordinator`]: [`GroupCoordinator`], the façade over all groups and their offsets.
//! - [`producer_ids`]: block allocation of producer ids that stay unique across restarts.
//! - [`transaction`]: [`TransactionCoordinator`], every transactional id's transaction
//!   (docs/transactions.md §4, §7); the same durability contract as groups: changes are
//!   handed back as records and applied only once durable.
//! - [`txn_records`]: the record format of `__transaction_state` (Kafka's).

pub mod assignor;
pub mod config;
pub mod consumer_group;
pub mod coordinator;
pub mod error;
pub mod group;
pub mod producer_ids;
pub mod records;
pub mod topic_regex;
pub mod transaction;
pub mod txn_records;

#[cfg(test)]
mod consumer_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;
#[cfg(test)]
mod txn_v2_tests;

pub use assignor::{Assignor, TopicUuid};
pub use config::{GroupConfig, TxnConfig};
pub use consumer_group::{
    ConsumerGroup, ConsumerGroupDescription, ConsumerHeartbeatRequest, ConsumerHeartbeatResponse,
    ConsumerMemberDescription, DescribedTopicPartitions, TopicsSnapshot,
};
pub use coordinator::{
    CommitAuth, CommittedOffset, ConsumerSubscription, DescribedGroup, DescribedMember, Effects,
    GroupCoordinator, GroupListing, GroupReply, HeartbeatRequest, JoinGroupRequest,
    JoinGroupResponse, JoinMember, JoinProtocol, LeavingMember, MemberData, ReplyId,
    SyncGroupRequest, SyncGroupResponse, TopicPartition,
};
pub use error::{GroupError, TxnError};
pub use group::{Group, GroupState};
pub use producer_ids::{ProducerId, ProducerIdAllocator};
pub use records::{
    ConsumerGroupValue, GroupMetadataValue, MemberMetadataValue, OffsetValue, StoreRecord,
};
pub use transaction::{
    EndOutcome, InitOutcome, TransactionCoordinator, TxnChange, TxnMarkers, TxnMetadata, TxnResult,
    TxnVersion, CONSUMER_OFFSETS_PARTITION,
};
pub use txn_records::{TxnRecord, TxnStatus, TxnValue};
