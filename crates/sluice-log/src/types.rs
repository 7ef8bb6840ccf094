//! Newtypes for the log's identifiers: offsets, topic ids, partition keys, and the
//! idempotent producer's producer id and producer epoch.

use std::fmt;
use std::sync::Arc;

/// A Kafka offset: the position of a record within one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

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

/// Kafka's producer id: names one idempotent producer session. Batches with a negative
/// producer id (-1 on the wire) come from producers that are not idempotent and are not
/// tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ProducerId(pub i64);

impl ProducerId {
    /// Whether batches carrying this id take part in sequence checks.
    pub fn is_idempotent(self) -> bool {
        self.0 >= 0
    }
}

/// Kafka's producer epoch: bumped when a producer id is handed to a new session, which
/// fences the old one. Compared as a signed 16-bit number, as Kafka does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ProducerEpoch(pub i16);
