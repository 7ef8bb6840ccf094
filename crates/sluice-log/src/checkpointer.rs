//! The checkpointer thread: makes segment data durable in the background so journal files
//! can be deleted, without ever holding a lock the committer waits on during a sync.
//!
//! A checkpoint, every `checkpoint_interval_ms` or after `checkpoint_bytes` of journal:
//! 1. take the handoff (under its lock, briefly): journal position P up to which segments
//!    are written, segments written since the last checkpoint, sealed segments, partition
//!    directories that got new files, and each partition's recovery point at P;
//! 2. write the index files of sealed segments and fsync them;
//! 3. `fdatasync` every segment written since the last checkpoint, fsync new directories;
//! 4. atomically replace the checkpoint file (P, log start offsets, recovery points);
//! 5. retire journal files wholly before P (recycled or deleted).
//!
//! Guarantees: the checkpoint file never claims more than what was synced before it was
//! written; a failure poisons the log and leaves the previous checkpoint in force.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::checkpoint::RecoveryPoint;
use crate::engine::{CheckpointState, Engine, Stats};
use crate::error::LogError;
use crate::journal::JournalPosition;
use crate::partition::Partition;
use crate::segment::Segment;

/// What one checkpoint takes from the handoff.
#[derive(Debug)]
struct Taken {
    written_to: JournalPosition,
    journal_bytes: u64,
    dirty: Vec<Arc<Segment>>,
    sealed: Vec<Arc<Segment>>,
    new_files: Vec<Arc<Partition>>,
    recovery_points: HashMap<u64, RecoveryPoint>,
}

impl Taken {
    fn is_news_to(&self, state: &CheckpointState) -> bool {
        self.written_to != state.journal
            || !self.dirty.is_empty()
            || !self.sealed.is_empty()
            || !self.new_files.is_empty()
    }
}

/// The thread body.
pub(crate) fn run(engine: Arc<Engine>) {
    let interval = Duration::from_millis(engine.config.checkpoint_interval_ms.max(1));
    loop {
        engine.checkpoint_signal.wait(interval);
        if engine.stopping.load(Ordering::Acquire) || engine.is_poisoned() {
            break;
        }
        // Errors have poisoned the log and were logged; the loop ends on the next turn.
        let _ = checkpoint(&engine, false);
    }
    tracing::debug!("checkpointer stopped");
}

fn take_handoff(engine: &Engine) -> Taken {
    let mut handoff = engine.handoff.lock();
    let dirty = std::mem::take(&mut handoff.dirty);
    for segment in &dirty {
        // Cleared under the handoff lock: a write after this point re-adds the segment.
        segment.dirty.store(false, Ordering::Release);
    }
    Taken {
        written_to: handoff.written_to,
        journal_bytes: handoff.journal_bytes,
        dirty,
        sealed: std::mem::take(&mut handoff.sealed),
        new_files: std::mem::take(&mut handoff.new_files),
        recovery_points: handoff.recovery_points.clone(),
    }
}

/// Runs one checkpoint now. Returns false when there was nothing new to checkpoint
/// (a clean-shutdown checkpoint is always written).
pub(crate) fn checkpoint(engine: &Engine, clean_shutdown: bool) -> Result<bool, LogError> {
    let mut state = engine.checkpoints.lock();
    engine.check_writable()?;
    let taken = take_handoff(engine);
    if !clean_shutdown && !taken.is_news_to(&state) {
        return Ok(false);
    }
    for segment in &taken.sealed {
        engine.guard(
            "write index files",
            segment.write_index_files(engine.fs.as_ref()),
        )?;
    }
    for segment in &taken.dirty {
        engine.guard("segment sync", segment.sync())?;
        Stats::add(&engine.stats.segment_syncs, 1);
    }
    sync_new_dirs(engine, taken.new_files)?;
    let written =
        engine.write_checkpoint_file(taken.written_to, &taken.recovery_points, clean_shutdown);
    engine.guard("write checkpoint", written)?;
    state.journal = taken.written_to;
    state.journal_bytes = taken.journal_bytes;
    state.recovery_points = taken.recovery_points;
    engine.set_checkpoints_journal_bytes(taken.journal_bytes);
    if let Err(error) = engine.retire_journal_files_before(taken.written_to) {
        // Harmless: replay skips entries already in the segments; the next checkpoint retries.
        tracing::warn!(%error, "could not retire old journal files");
    }
    Ok(true)
}

/// fsyncs each partition directory that got a new segment file, so the file survives.
fn sync_new_dirs(engine: &Engine, mut partitions: Vec<Arc<Partition>>) -> Result<(), LogError> {
    partitions.sort_by_key(|p| p.uid);
    partitions.dedup_by_key(|p| p.uid);
    for partition in partitions {
        if partition.is_deleted() {
            continue;
        }
        if let Err(error) = engine.fs.sync_dir(&partition.dir) {
            // A partition deleted meanwhile has no directory left to sync.
            if !partition.is_deleted() {
                engine.poison("partition directory sync", &error);
                return Err(LogError::Io(error));
            }
        }
    }
    Ok(())
}

/// The last checkpoint at shutdown: index files for every segment, all data synced,
/// the clean-shutdown flag set so the next open trusts the segments without scanning.
pub(crate) fn shutdown_checkpoint(engine: &Engine) -> Result<(), LogError> {
    let mut actives = Vec::new();
    for partition in engine.partitions_snapshot() {
        let _append = partition.append_lock.lock();
        let active = partition.active();
        active.seal();
        actives.push(active);
    }
    engine.handoff.lock().sealed.append(&mut actives);
    checkpoint(engine, true).map(|_| ())
}
