//! The durability step of a round when the journal is only a cache: the seam between the
//! committer and a remote store (`storage.backend=object`: an object per round and one
//! metadata transaction, implemented by `sluice-object`; see `docs/object-storage.md`).
//!
//! With a [`RoundStore`] the committer writes each round to the local journal as always,
//! skips the journal's `fdatasync`, and hands the same bytes and the round's entries to
//! [`RoundStore::commit_round`]. The round's requests are answered, and its high
//! watermarks published, only after that returns `Ok`.
//!
//! Contract for implementations:
//! - `Ok` means the round is durable and ordered in the store: after any crash it is
//!   found again, with every entry where the round says.
//! - [`RoundStoreError::Refused`] means the round did NOT commit and never will (its object
//!   may exist, unreferenced): the committer undoes it and its requests get a retriable
//!   error; a later round may succeed.
//! - [`RoundStoreError::Fatal`] means this broker must stop writing: it was fenced by
//!   another, or the round's outcome is unknown. The log is poisoned.
//!
//! The committer calls it from its own thread only, one round at a time, in journal order.

use std::fmt;
use std::io::IoSlice;

use crate::types::{Offset, TopicId};

/// One partition's part of a round: an entry of the journal (header and batches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundEntry {
    pub topic_id: TopicId,
    pub partition: i32,
    /// Base offset of the entry's first batch.
    pub base_offset: Offset,
    /// Last offset of the entry's last batch.
    pub last_offset: Offset,
    /// Position of the entry (its header) in the round, from the round's first byte.
    pub position: u64,
    /// The entry's length, header included.
    pub size_bytes: u32,
}

/// A round as written to the journal.
#[derive(Debug)]
pub struct Round<'a> {
    /// The journal file the round was written to, and where in it the round starts.
    pub journal_seq: u64,
    pub journal_position: u64,
    /// The round's bytes, in order (the slices handed to the journal write).
    pub data: &'a [IoSlice<'a>],
    pub len: u64,
    /// The round's entries that hold batches, in journal order (padding left out).
    pub entries: &'a [RoundEntry],
}

/// Why a round did not commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoundStoreError {
    /// Not committed, and it never will be: undo the round, answer a retriable error.
    Refused(String),
    /// Stop writing: fenced by another writer, or the round's outcome is unknown.
    Fatal(String),
}

impl fmt::Display for RoundStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RoundStoreError::Refused(why) => write!(f, "round refused by the store: {why}"),
            RoundStoreError::Fatal(why) => write!(f, "store failure, writes stopped: {why}"),
        }
    }
}

impl std::error::Error for RoundStoreError {}

/// A round the store committed: where it lay in the journal, its length and CRC-32C.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedRound {
    pub journal_seq: u64,
    pub journal_position: u64,
    pub size_bytes: u64,
    pub crc32c: u32,
    /// The store's name for it (an object key).
    pub key: String,
}

/// Where rounds become durable instead of the journal's `fdatasync`.
pub trait RoundStore: Send + fmt::Debug {
    /// Makes `round` durable (see the module comment for the contract).
    fn commit_round(&mut self, round: &Round<'_>) -> Result<(), RoundStoreError>;

    /// The committed rounds at or after journal position `(seq, position)`, in journal
    /// order (start-up: `round_restore`).
    fn committed_rounds_from(
        &mut self,
        seq: u64,
        position: u64,
    ) -> Result<Vec<CommittedRound>, RoundStoreError>;

    /// The bytes of a committed round.
    fn read_round(&mut self, round: &CommittedRound) -> Result<Vec<u8>, RoundStoreError>;
}
