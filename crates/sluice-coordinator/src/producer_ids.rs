//! Producer ids for idempotent producers (InitProducerId without a transactional id).
//!
//! Ids must never repeat, across restarts too: a reused id could make the log treat a new
//! producer's batches as duplicates of an old one's. The allocator hands ids out of a block
//! whose end has been made durable *before* any id of it is used; after a crash the next
//! block starts at that durable end, so at most one block of ids is skipped, never reused.
//! The caller persists [`ProducerIdAllocator::block_end_to_persist`] when asked.

/// The producer id the log stores and checks (one type for every crate).
pub use sluice_record::ProducerId;

/// Ids reserved per durable write.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1_000;

/// Allocates producer ids in durable blocks.
#[derive(Debug, Clone)]
pub struct ProducerIdAllocator {
    next: i64,
    /// First id past the durably reserved block.
    block_end: i64,
}

impl ProducerIdAllocator {
    /// Starts after `persisted_block_end`, the last block end made durable (0 on a new
    /// broker). Nothing below it is ever handed out again.
    pub fn new(persisted_block_end: i64) -> Self {
        let start = persisted_block_end.max(0);
        Self {
            next: start,
            block_end: start,
        }
    }

    /// The next id, or `None` when the current block is used up: persist
    /// [`Self::block_end_to_persist`], call [`Self::block_persisted`], and ask again.
    pub fn next_id(&mut self) -> Option<ProducerId> {
        if self.next >= self.block_end {
            return None;
        }
        let id = self.next;
        self.next += 1;
        Some(ProducerId(id))
    }

    /// The block end to make durable before more ids can be handed out.
    pub fn block_end_to_persist(&self) -> i64 {
        self.next.saturating_add(PRODUCER_ID_BLOCK_SIZE)
    }

    /// Records that `block_end` (from [`Self::block_end_to_persist`]) is durable.
    pub fn block_persisted(&mut self, block_end: i64) {
        self.block_end = self.block_end.max(block_end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: no id is handed out before its block is durable, and a restart from the durable
    // block end never repeats an id handed out before it.
    #[test]
    fn ids_are_unique_across_restarts() {
        let mut a = ProducerIdAllocator::new(0);
        assert_eq!(a.next_id(), None, "no block reserved yet");
        let end = a.block_end_to_persist();
        a.block_persisted(end);
        let mut seen = Vec::new();
        for _ in 0..(PRODUCER_ID_BLOCK_SIZE + 5) {
            match a.next_id() {
                Some(id) => seen.push(id.0),
                None => {
                    let end = a.block_end_to_persist();
                    a.block_persisted(end);
                }
            }
        }
        let durable = a.block_end;
        let mut b = ProducerIdAllocator::new(durable);
        let end = b.block_end_to_persist();
        b.block_persisted(end);
        let after = b.next_id().unwrap().0;
        assert!(seen.iter().all(|&s| s < after), "restart reused an id");
        let mut sorted = seen.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), seen.len(), "duplicate ids");
    }
}
