//! One classic-protocol consumer group: members, generations and the rebalance state
//! machine (Empty → PreparingRebalance → CompletingRebalance → Stable), with Kafka's rules.

/// A group (placeholder until the state machine lands).
#[derive(Debug, Default)]
pub struct Group {}
