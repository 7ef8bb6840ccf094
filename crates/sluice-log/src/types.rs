//! Newtypes for the log's identifiers: offsets, topic ids and partition keys.

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
