//! The names and fixed ids of the internal topics: the group coordinator's
//! `__consumer_offsets` and the transaction coordinator's `__transaction_state`. They live in
//! the log but not in the topic registry; the registry refuses them as user topic names, and
//! recovery recognizes their directories by these ids.
//!
//! Kept apart from the coordinators so the topic registry can name them without importing
//! the services that own them (the coordinators import the registry).

use sluice_log::TopicId;

/// The internal topic that holds committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// Its fixed topic id, so recovery and the topic registry recognize its directory.
pub const OFFSETS_TOPIC_ID: TopicId = TopicId(*b"sluice.offsets.1");

/// The internal topic that holds the transaction state.
pub const TXN_STATE_TOPIC: &str = "__transaction_state";
/// Its fixed topic id, so recovery and the topic registry recognize its directory.
pub const TXN_STATE_TOPIC_ID: TopicId = TopicId(*b"sluice.txnstate1");
