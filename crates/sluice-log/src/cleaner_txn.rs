//! The log cleaner's view of transactions (Kafka's `CleanedTransactionMetadata`), for one
//! walk over a partition's batches in offset order (docs/compaction.md §6).
//!
//! Guarantees:
//! - A transactional data batch is *aborted* exactly when an aborted transaction of the
//!   partition's aborted-transaction list covers it (same producer id, its offsets between
//!   the transaction's first offset and its ABORT marker); every other transactional batch
//!   the cleaner sees is committed, because the cleanable range ends at the last stable
//!   offset (no batch in it belongs to an open transaction).
//! - A marker is *discardable* only when the walk met no batch of its transaction before
//!   it (removed or not: a batch seen by this pass may still be in the log). The cleaner
//!   walks from the log start, so every batch of the transaction that remains in the log
//!   is met before its marker. A discardable marker is then kept for `delete.retention.ms`
//!   like a tombstone, and removed by a later pass.
//! - Memory: the aborted transactions overlapping the walked range (a copy of the list
//!   sorted by first offset) and one entry per producer with a transaction under way.

use std::collections::{HashMap, HashSet};

use crate::batch::BatchHeader;
use crate::txn::{AbortedTxn, ControlType};
use crate::types::Offset;

/// Transactions as one walk in offset order meets them.
#[derive(Debug)]
pub(crate) struct TxnWalk {
    /// Aborted transactions not reached yet, by first offset, latest first (popped).
    pending: Vec<AbortedTxn>,
    /// Per producer id: its aborted transaction the walk is inside of, and whether a batch
    /// of it was met.
    in_aborted: HashMap<i64, bool>,
    /// Producers whose committed transactional data the walk met since their last marker.
    in_committed: HashSet<i64>,
}

impl TxnWalk {
    /// A walk of the offsets from `from`, given the partition's aborted transactions (in
    /// any order); those whose marker is below `from` cannot matter and are left out.
    pub(crate) fn new(aborted: &[AbortedTxn], from: Offset) -> Self {
        let mut pending: Vec<AbortedTxn> = aborted
            .iter()
            .filter(|a| a.last_offset >= from)
            .copied()
            .collect();
        pending.sort_by_key(|a| std::cmp::Reverse(a.first_offset));
        Self {
            pending,
            in_aborted: HashMap::new(),
            in_committed: HashSet::new(),
        }
    }

    /// Enters the aborted transactions that start at or before `offset`.
    fn reach(&mut self, offset: Offset) {
        while self
            .pending
            .last()
            .is_some_and(|a| a.first_offset <= offset)
        {
            let entered = self.pending.pop().expect("checked");
            self.in_aborted.insert(entered.producer_id.0, false);
        }
    }

    /// A data batch: whether it belongs to an aborted transaction (its records are removed
    /// like old versions). Non-transactional batches are never aborted.
    pub(crate) fn on_data(&mut self, header: &BatchHeader<'_>) -> bool {
        self.reach(header.last_offset());
        if !header.is_transactional() {
            return false;
        }
        let producer_id = header.producer_id().0;
        match self.in_aborted.get_mut(&producer_id) {
            Some(seen) => {
                *seen = true;
                true
            }
            None => {
                self.in_committed.insert(producer_id);
                false
            }
        }
    }

    /// A control batch (`control`: its marker type, `None` for an emptied or unknown
    /// one): whether no batch of its transaction remains before it, so it may go once its
    /// delete horizon has passed. Ends the producer's transaction in the walk.
    pub(crate) fn on_marker(
        &mut self,
        header: &BatchHeader<'_>,
        control: Option<ControlType>,
    ) -> bool {
        debug_assert!(header.is_control());
        self.reach(header.last_offset());
        let producer_id = header.producer_id().0;
        match control {
            Some(ControlType::Abort) => !self.in_aborted.remove(&producer_id).unwrap_or(false),
            Some(ControlType::Commit) => !self.in_committed.remove(&producer_id),
            // An emptied control batch was cleaned already; an unknown type is kept.
            None => header.records_count() == 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{stamp_base_offset, Attributes, BatchHeaderMut};
    use crate::txn::marker_batch;
    use crate::types::{ProducerEpoch, ProducerId};

    fn marker(producer_id: i64, offset: i64, control: ControlType) -> Vec<u8> {
        let mut b = marker_batch(ProducerId(producer_id), ProducerEpoch(0), control, 0);
        stamp_base_offset(&mut b, Offset(offset));
        b
    }

    /// A one-offset data batch (a marker's bytes with data attributes: only the header
    /// matters here).
    fn data(producer_id: i64, offset: i64, transactional: bool) -> Vec<u8> {
        let mut b = marker(producer_id, offset, ControlType::Commit);
        let attributes = match transactional {
            true => Attributes::TRANSACTIONAL,
            false => Attributes(0),
        };
        BatchHeaderMut::new(&mut b)
            .unwrap()
            .set_attributes(attributes);
        b
    }

    fn on_data(walk: &mut TxnWalk, b: &[u8]) -> bool {
        walk.on_data(&BatchHeader::parse(b).unwrap())
    }

    fn on_marker(walk: &mut TxnWalk, producer_id: i64, offset: i64, c: ControlType) -> bool {
        let b = marker(producer_id, offset, c);
        walk.on_marker(&BatchHeader::parse(&b).unwrap(), Some(c))
    }

    fn aborted(producer_id: i64, first: i64, last: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: ProducerId(producer_id),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(last + 1),
        }
    }

    #[test]
    fn aborted_data_and_markers_as_kafka_judges_them() {
        // Goal: data inside an aborted transaction is aborted, other transactional data is
        // committed, and a marker is discardable only when no batch of its transaction
        // came before it in the walk, interleaved producers included.
        use ControlType::{Abort, Commit};
        let index = [aborted(1, 2, 5), aborted(2, 8, 9)];
        let mut walk = TxnWalk::new(&index, Offset(0));
        assert!(!on_data(&mut walk, &data(1, 0, true)), "committed");
        assert!(!on_marker(&mut walk, 1, 1, Commit), "its data was seen");
        assert!(
            on_data(&mut walk, &data(1, 2, true)),
            "aborted transaction of 1"
        );
        assert!(!on_data(&mut walk, &data(3, 3, false)), "not transactional");
        assert!(!on_data(&mut walk, &data(2, 4, true)), "2 commits this one");
        assert!(
            !on_marker(&mut walk, 1, 5, Abort),
            "its aborted data was seen"
        );
        assert!(!on_marker(&mut walk, 2, 6, Commit));
        assert!(on_marker(&mut walk, 3, 7, Commit), "nothing of it seen");
        // 2's aborted transaction from 8 lost its data to an earlier pass: only the marker.
        assert!(on_marker(&mut walk, 2, 9, Abort));
        let emptied = marker(4, 10, Commit);
        let mut emptied_header = emptied.clone();
        BatchHeaderMut::new(&mut emptied_header)
            .unwrap()
            .set_records_count(0);
        let header = BatchHeader::parse(&emptied_header).unwrap();
        assert!(
            walk.on_marker(&header, None),
            "an emptied marker was cleaned before"
        );
        // A walk from the middle still knows a transaction it entered part-way.
        let mut walk = TxnWalk::new(&index, Offset(3));
        assert!(on_data(&mut walk, &data(1, 4, true)));
        assert!(!on_marker(&mut walk, 1, 5, Abort));
        assert!(
            !on_data(&mut walk, &data(1, 6, true)),
            "after 1's ABORT marker"
        );
    }
}
