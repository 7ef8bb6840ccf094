//! Newtypes for the log's identifiers: topic ids and partition keys, and (re-exported from
//! `sluice-record`, the one definition the log, the coordinators and the broker share)
//! offsets and the idempotent producer's producer id and producer epoch.

use std::fmt;
use std::sync::Arc;

pub use sluice_record::{Offset, ProducerEpoch, ProducerId};

/// A topic id (Kafka's 16-byte topic UUID). Stored in every partition directory and in every
/// journal entry, so a topic deleted and re-created under the same name never receives the
/// old topic's journal entries on replay.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct TopicId(pub [u8; 16]);

impl fmt::Debug for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Identifies one partition's log. The directory is `<data_dir>/<topic>-<partition>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionKey {
    pub topic_id: TopicId,
    pub topic: Arc<str>,
    pub partition: i32,
}
