//! [`ObjectRoundStore`]: the log's [`RoundStore`] on the two stores. A round becomes one
//! object (`PREFIX/rounds/<round_id:020>`, its bytes straight from the committer's slices,
//! with their CRC-32C) and then one metadata transaction (`sluice_commit_round`).
//!
//! Guarantees (the `RoundStore` contract): `Ok` only after both; a failed upload, or a
//! transaction the store refused without committing, is `Refused` (the committer undoes the
//! round; the object, if it was stored, is left unreferenced and its key is used again by
//! the next round); a stale writer epoch, a log end the store disagrees with, or an outcome
//! left unknown is `Fatal`. Round ids follow each other from one past the store's largest,
//! so a key is never reused for a committed round.

use std::time::Duration;

use sluice_log::round_store::{CommittedRound, Round, RoundStore, RoundStoreError};
use uuid::Uuid;

use crate::meta_store::{EntryRow, MetaError, MetaStore, RoundRow};
use crate::s3::ObjectStore;

/// The object key of round `round_id` under `store`'s prefix.
pub fn round_key(store: &ObjectStore, round_id: i64) -> String {
    store.key(&format!("rounds/{round_id:020}"))
}

/// The object backend's round store.
#[derive(Debug)]
pub struct ObjectRoundStore {
    objects: ObjectStore,
    meta: MetaStore,
    epoch: i64,
    next_round_id: i64,
    /// How long an unknown commit outcome is asked about before giving up.
    resolve_for: Duration,
    entries: Vec<EntryRow>,
}

impl ObjectRoundStore {
    /// A store over `objects` and `meta`, writing under writer `epoch` (already taken).
    pub fn new(
        objects: ObjectStore,
        mut meta: MetaStore,
        epoch: i64,
        resolve_for: Duration,
    ) -> Result<Self, MetaError> {
        let next_round_id = meta.next_round_id()?;
        Ok(Self {
            objects,
            meta,
            epoch,
            next_round_id,
            resolve_for,
            entries: Vec::new(),
        })
    }

    fn upload(&mut self, round: &Round<'_>, key: &str) -> Result<u32, RoundStoreError> {
        let crc = round
            .data
            .iter()
            .fold(0u32, |crc, slice| crc32c::crc32c_append(crc, slice));
        let put = self.objects.put(key, round.data, round.len, crc);
        put.map_err(|error| RoundStoreError::Refused(format!("upload of {key}: {error}")))?;
        Ok(crc)
    }
}

impl RoundStore for ObjectRoundStore {
    fn commit_round(&mut self, round: &Round<'_>) -> Result<(), RoundStoreError> {
        let round_id = self.next_round_id;
        let key = round_key(&self.objects, round_id);
        let crc = self.upload(round, &key)?;
        self.entries.clear();
        self.entries.extend(round.entries.iter().map(|e| EntryRow {
            topic_id: Uuid::from_bytes(e.topic_id.0),
            partition: e.partition,
            base_offset: e.base_offset.0,
            last_offset: e.last_offset.0,
            position: e.position,
            size_bytes: e.size_bytes,
        }));
        let row = RoundRow {
            object_key: key,
            journal_seq: round.journal_seq,
            journal_position: round.journal_position,
            size_bytes: round.len,
            crc32c: crc,
        };
        let committed =
            self.meta
                .commit_round(self.epoch, round_id, &row, &self.entries, self.resolve_for);
        match committed {
            Ok(()) => {
                self.next_round_id += 1;
                Ok(())
            }
            Err(
                error @ (MetaError::Fenced(_)
                | MetaError::LogEndMismatch(_)
                | MetaError::OutcomeUnknown(_)),
            ) => Err(RoundStoreError::Fatal(error.to_string())),
            // Refused before commit: nothing of the round is in the store.
            Err(error) => Err(RoundStoreError::Refused(error.to_string())),
        }
    }

    fn committed_rounds_from(
        &mut self,
        seq: u64,
        position: u64,
    ) -> Result<Vec<CommittedRound>, RoundStoreError> {
        let rows = self
            .meta
            .rounds_from(seq, position)
            .map_err(|e| RoundStoreError::Refused(e.to_string()))?;
        Ok(rows
            .into_iter()
            .map(|r| CommittedRound {
                journal_seq: r.journal_seq,
                journal_position: r.journal_position,
                size_bytes: r.size_bytes,
                crc32c: r.crc32c,
                key: r.object_key,
            })
            .collect())
    }

    fn read_round(&mut self, round: &CommittedRound) -> Result<Vec<u8>, RoundStoreError> {
        self.objects
            .get_range(&round.key, 0, round.size_bytes)
            .map_err(|e| RoundStoreError::Refused(format!("{}: {e}", round.key)))
    }
}
