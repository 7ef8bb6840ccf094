//! The ids a batch header carries, as newtypes: the offset, and the idempotent producer's
//! producer id and epoch. One type each for every crate (the log stores and checks them,
//! the producer-id allocator hands them out, the broker maps them to the wire).

/// A Kafka offset: the position of a record within one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Offset(pub i64);

/// Kafka's producer id: names one idempotent producer session (non-negative once
/// assigned). Batches with a negative producer id (-1 on the wire) come from producers that
/// are not idempotent and are not tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ProducerId(pub i64);

impl ProducerId {
    /// "No producer" (Kafka's `NO_PRODUCER_ID`).
    pub const NONE: ProducerId = ProducerId(-1);

    /// Whether batches carrying this id take part in sequence checks.
    #[inline]
    pub fn is_idempotent(self) -> bool {
        self.0 >= 0
    }
}

/// Kafka's producer epoch: bumped when a producer id is handed to a new session, which
/// fences the old one. Compared as a signed 16-bit number, as Kafka does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ProducerEpoch(pub i16);

impl ProducerEpoch {
    /// "No epoch" (Kafka's `NO_PRODUCER_EPOCH`).
    pub const NONE: ProducerEpoch = ProducerEpoch(-1);
}

/// The base sequence of a batch from a producer that is not idempotent (Kafka's
/// `NO_SEQUENCE`). Sequences stay plain `i32`: they are counted with wrapping arithmetic
/// against the offset deltas, as Kafka counts them.
pub const NO_SEQUENCE: i32 = -1;
