//! The checkpointer thread: persists the segments' extent lists in the background so the
//! journal need not be replayed from the start, and retires journal files no segment points
//! into, without ever holding a lock the committer waits on during a sync.
//!
//! A checkpoint, every `checkpoint_interval_ms` or after `checkpoint_bytes` of journal:
//! 1. take the handoff (under its lock, briefly): journal position P up to which segments
//!    have their extents in memory, segments written since the last checkpoint, sealed segments, partition
//!    directories that got new files, and each partition's recovery point at P;
//! 2. take each partition's producer state together with the log end L it is as of (under
//!    the partition's append lock, so no request is half applied), encoding it only when it
//!    changed since its last snapshot file;
//! 3. write the index files of sealed segments and fsync them;
//! 4. persist the extents of every segment written since the last checkpoint (the records of
//!    its committed bytes, appended to `<base>.extents` and `fdatasync`ed), fsync new
//!    directories;
//! 5. wait until each partition's high watermark reaches its L (the append in flight, if
//!    any, is covered by a journal sync), then write the changed producer snapshots
//!    `<L>.snapshot`;
//! 6. atomically replace the checkpoint file (P, log start offsets, recovery points,
//!    producer state points);
//! 7. delete producer snapshots the new checkpoint no longer names, and retire journal
//!    files before P's file that no segment points into (recycled or deleted).
//!
//! Guarantees: the checkpoint file never claims more than what was synced before it was
//! written; a producer snapshot never describes a batch that a crash could take away, so
//! after a crash the state the checkpoint names is usable as is (recovery additionally
//! refuses any state beyond the log it recovered); a failure poisons the log and leaves
//! the previous checkpoint (and the snapshots it names) in force. Partitions that see no idempotent producer never get a snapshot file: their
//! producer state point (empty, as of L) rides in the checkpoint file.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::checkpoint::{ProducerStatePoint, RecoveryPoint};
use crate::config::PRODUCER_SNAPSHOT_WAIT_MS_MAX;
use crate::engine::{CheckpointState, Engine, Stats};
use crate::error::LogError;
use crate::fs;
use crate::journal::JournalPosition;
use crate::mutation::mutated;
use crate::partition::Partition;
use crate::producer_snapshot;
use crate::producer_state::SnapshotMark;
use crate::segment::Segment;
use crate::types::Offset;

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
    // Segments deleted since the last checkpoint (retention, a deleted topic) may have
    // left journal files nothing points into: a checkpoint (with the log start offsets as
    // they are now) retires them even when nothing was written.
    let retirable = engine
        .journal_files
        .any_unreferenced_before(state.journal.seq);
    let snapshot_wanted = engine
        .producer_snapshot_wanted
        .swap(false, Ordering::AcqRel);
    if !clean_shutdown && !taken.is_news_to(&state) && !retirable && !snapshot_wanted {
        return Ok(false);
    }
    // The journal position and byte count the committer hands over only grow: a checkpoint
    // never claims less of the journal than the one before it.
    assert!(taken.written_to >= state.journal && taken.journal_bytes >= state.journal_bytes);
    let result = write_checkpoint(engine, &mut state, &taken, clean_shutdown);
    assert!(result.is_err() || state.journal == taken.written_to);
    if result.is_err() {
        // A refused write (no space) failed this checkpoint without poisoning the log:
        // what it took from the handoff goes back, so the next checkpoint persists it.
        give_back(engine, taken);
    }
    result.map(|()| true)
}

/// Returns what a failed checkpoint took to the handoff (segments whose extents were
/// persisted meanwhile cost nothing the next time). Deleted segments and partitions are
/// dropped instead: kept, they would hold their journal files (the extents point into
/// them), so on a full disk, where checkpoints fail until space is freed, a deleted topic
/// or DeleteRecords could never free the journal file it emptied.
fn give_back(engine: &Engine, taken: Taken) {
    let mut handoff = engine.handoff.lock();
    for segment in taken.dirty {
        if !segment.is_deleted() && !segment.dirty.swap(true, Ordering::AcqRel) {
            handoff.dirty.push(segment);
        }
    }
    let sealed = taken.sealed.into_iter().filter(|s| !s.is_deleted());
    handoff.sealed.extend(sealed);
    let new_files = taken.new_files.into_iter().filter(|p| !p.is_deleted());
    handoff.new_files.extend(new_files);
}

/// Steps 2-7 of the module header, for what `taken` holds.
fn write_checkpoint(
    engine: &Engine,
    state: &mut CheckpointState,
    taken: &Taken,
    clean_shutdown: bool,
) -> Result<(), LogError> {
    // Taken before the syncs below, so the append in flight has most likely become
    // durable by the time the snapshots are written.
    let mut captures = capture_producer_states(engine);
    sync_journal_cache(engine, state.journal.seq, taken.written_to.seq)?;
    for segment in &taken.sealed {
        match segment.write_index_files(engine.fs.as_ref()) {
            // Index files are derived data (rebuilt on open when missing or short); a full
            // disk must not stop the extents below, which the handoff now owns.
            Err(error) if crate::fs::is_retryable(&error) => {
                tracing::warn!(%error, segment = %segment.paths.extents.display(), "index files not written; they are rebuilt on open");
            }
            result => {
                let written = engine.guard("write index files", result)?;
                Stats::add(&engine.stats.segment_written_bytes, written);
            }
        }
    }
    let dirty = match mutated!("checkpoint.extents_unsynced") {
        true => &[][..],
        false => &taken.dirty[..],
    };
    for segment in dirty {
        let written = engine.guard("persist segment extents", segment.sync_counted())?;
        Stats::add(&engine.stats.segment_syncs, 1);
        Stats::add(&engine.stats.segment_written_bytes, written);
    }
    if !mutated!("checkpoint.new_dirs_unsynced") {
        sync_new_dirs(engine, &taken.new_files)?;
    }
    if mutated!("checkpoint.retire_before_write") {
        let _ = engine.retire_journal_files_before(taken.written_to);
    }
    let producer_points = write_producer_snapshots(engine, &mut captures, &state.producer_points)?;
    let written = engine.write_checkpoint_file(
        taken.written_to,
        &taken.recovery_points,
        &producer_points,
        clean_shutdown,
    );
    engine.guard("write checkpoint", written)?;
    finish_producer_snapshots(engine, &captures, &state.producer_points);
    state.producer_points = producer_points;
    state.journal = taken.written_to;
    state.journal_bytes = taken.journal_bytes;
    state.recovery_points = taken.recovery_points.clone();
    engine.set_checkpoints_journal_bytes(taken.journal_bytes);
    if let Err(error) = engine.retire_journal_files_before(taken.written_to) {
        // Harmless: the files stay until the next checkpoint retries.
        tracing::warn!(%error, "could not retire old journal files");
    }
    Ok(())
}

/// With a round store the committer never syncs the journal (the store makes rounds
/// durable). Before a checkpoint vouches for journal bytes (extents pointing into them, a
/// replay position after them), the files that may hold them are synced here, off the
/// produce path: everything before the checkpoint's position is then on disk, and on start
/// `round_restore` only has to check the rounds after it.
fn sync_journal_cache(engine: &Engine, from_seq: u64, to_seq: u64) -> Result<(), LogError> {
    if !engine.journal_is_cache.load(Ordering::Acquire)
        || mutated!("round_store.journal_cache_unsynced")
    {
        return Ok(());
    }
    for seq in from_seq..=to_seq {
        if let Some(file) = engine.journal_files.get(seq) {
            // The mutation point is above (`round_store.journal_cache_unsynced`).
            engine.guard("journal sync before a checkpoint", file.file.sync_data())?;
        }
    }
    Ok(())
}

/// fsyncs each partition directory that got a new segment file, so the file survives.
fn sync_new_dirs(engine: &Engine, partitions: &[Arc<Partition>]) -> Result<(), LogError> {
    let mut partitions = partitions.to_vec();
    partitions.sort_by_key(|p| p.uid);
    partitions.dedup_by_key(|p| p.uid);
    for partition in partitions {
        if partition.is_deleted() {
            continue;
        }
        // No mutation point: the caller's (`checkpoint.new_dirs_unsynced`).
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

/// One partition's producer state, taken for a checkpoint.
#[derive(Debug)]
pub(crate) struct ProducerCapture {
    pub(crate) partition: Arc<Partition>,
    /// The partition's log end when the state was taken: the state is as of this offset.
    log_end: Offset,
    version: u64,
    /// The encoded state, when the table changed since its last snapshot file.
    snapshot: Option<Vec<u8>>,
    pub(crate) point: ProducerStatePoint,
}

/// Takes every live partition's producer state with the log end it is as of. Holds each
/// partition's append lock only while reading it (encoding a changed table costs about
/// 200 bytes of copying per producer).
pub(crate) fn capture_producer_states(engine: &Engine) -> Vec<ProducerCapture> {
    let mut captures = Vec::new();
    for partition in engine.partitions_snapshot() {
        let _append = partition.append_lock.lock();
        if partition.is_deleted() {
            continue;
        }
        let log_end = partition.log_end();
        let table = partition.producers.lock();
        let version = table.version();
        let (snapshot, file) = match table.snapshot {
            _ if table.is_empty() => (None, None),
            Some(mark) if mark.version == version => (None, Some(mark.offset)),
            _ => {
                let key = &partition.key;
                let bytes = producer_snapshot::encode(&table, key.topic_id, key.partition, log_end);
                (Some(bytes), Some(log_end))
            }
        };
        drop(table);
        captures.push(ProducerCapture {
            partition: Arc::clone(&partition),
            log_end,
            version,
            snapshot,
            point: ProducerStatePoint {
                offset: log_end,
                snapshot: file,
            },
        });
    }
    captures
}

/// Waits until every captured state is durable: its partition's high watermark reached
/// its log end, so the batches it describes are covered by a journal sync. Drops the
/// captures of deleted partitions and, once the log is poisoned or after
/// `PRODUCER_SNAPSHOT_WAIT_MS_MAX`, those still waiting (they keep their previous point).
fn wait_until_durable(engine: &Engine, captures: &mut Vec<ProducerCapture>) {
    let deadline = Instant::now() + Duration::from_millis(PRODUCER_SNAPSHOT_WAIT_MS_MAX);
    // The no-op log never moves a high watermark: nothing there is waiting to be synced.
    if engine.config.storage == crate::config::Storage::Null {
        return;
    }
    loop {
        captures.retain(|c| !c.partition.is_deleted());
        let durable = |c: &ProducerCapture| c.partition.high_watermark() >= c.log_end;
        if captures.iter().all(durable) {
            return;
        }
        if engine.is_poisoned() || Instant::now() >= deadline {
            captures.retain(durable);
            tracing::warn!(
                "producer snapshots skipped for partitions whose appends are not yet durable"
            );
            return;
        }
        // One commit round, normally a few milliseconds.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes the snapshot files of the captured tables that changed, once their state is
/// durable. Returns the producer state points for the checkpoint file: the captured ones,
/// and the previous point of partitions whose capture had to be dropped.
pub(crate) fn write_producer_snapshots(
    engine: &Engine,
    captures: &mut Vec<ProducerCapture>,
    previous: &HashMap<u64, ProducerStatePoint>,
) -> Result<HashMap<u64, ProducerStatePoint>, LogError> {
    if !mutated!("producer_snapshot.before_durable") {
        wait_until_durable(engine, captures);
    }
    let mut points: HashMap<u64, ProducerStatePoint> = engine
        .partitions_snapshot()
        .iter()
        .filter_map(|p| previous.get(&p.uid).map(|point| (p.uid, *point)))
        .collect();
    for capture in captures.iter() {
        // A snapshot describes only batches a journal sync covers (the module's guarantee),
        // and is named by the offset it is as of.
        let null = engine.config.storage == crate::config::Storage::Null;
        assert!(null || capture.partition.high_watermark() >= capture.log_end);
        assert_eq!(capture.point.offset, capture.log_end);
        if let Some(bytes) = &capture.snapshot {
            let written = write_snapshot_file(engine, &capture.partition, capture.log_end, bytes);
            engine.guard("write producer snapshot", written)?;
        }
        points.insert(capture.partition.uid, capture.point);
    }
    Ok(points)
}

/// Writes `<offset>.snapshot` into the partition's directory, unless the partition is
/// being deleted (its directory may be re-created for a new topic: never write there).
fn write_snapshot_file(
    engine: &Engine,
    partition: &Partition,
    offset: Offset,
    bytes: &[u8],
) -> io::Result<()> {
    let _snapshot = partition.snapshot_lock.lock();
    if partition.is_deleted() {
        return Ok(());
    }
    let path = partition.dir.join(producer_snapshot::file_name(offset));
    fs::write_file_atomic(engine.fs.as_ref(), &path, bytes)
}

/// After the checkpoint file naming the captured points is durable: remembers which
/// snapshot file holds each table's state, and deletes the files that no checkpoint names
/// any more. A file that cannot be deleted is only logged (recovery deletes leftovers).
pub(crate) fn finish_producer_snapshots(
    engine: &Engine,
    captures: &[ProducerCapture],
    previous: &HashMap<u64, ProducerStatePoint>,
) {
    for capture in captures {
        let partition = &capture.partition;
        {
            let mut table = partition.producers.lock();
            if capture.snapshot.is_some() {
                table.snapshot = Some(SnapshotMark {
                    version: capture.version,
                    offset: capture.log_end,
                });
            }
            table.note_checkpointed(capture.version);
        }
        let old = previous.get(&partition.uid).and_then(|p| p.snapshot);
        if let Some(old) = old.filter(|&old| Some(old) != capture.point.snapshot) {
            let _snapshot = partition.snapshot_lock.lock();
            if partition.is_deleted() {
                continue;
            }
            let path = partition.dir.join(producer_snapshot::file_name(old));
            match engine.fs.remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => {
                    tracing::warn!(error = %e, path = %path.display(), "could not delete an old producer snapshot");
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LogConfig, LogManagerConfig};
    use crate::fs::StdFs;
    use crate::types::{PartitionKey, TopicId};

    fn capture_at(partition: &Arc<Partition>, log_end: Offset) -> ProducerCapture {
        ProducerCapture {
            partition: Arc::clone(partition),
            log_end,
            version: 1,
            snapshot: Some(Vec::new()),
            point: ProducerStatePoint {
                offset: log_end,
                snapshot: Some(log_end),
            },
        }
    }

    #[test]
    fn producer_snapshots_wait_until_their_log_end_is_durable() {
        // Goal: state taken while an append is placed but not yet covered by a journal sync
        // (log end above the high watermark) is held back until the high watermark reaches
        // it; once the log is poisoned (the sync failed) it is dropped, never written.
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = Engine::new(LogManagerConfig::new(dir.path()), Arc::new(StdFs));
        let segment = Segment::create(&StdFs, dir.path(), Offset(0)).expect("segment");
        let key = PartitionKey {
            topic_id: TopicId([1; 16]),
            topic: Arc::from("t"),
            partition: 0,
        };
        let partition = Arc::new(Partition::new(
            key,
            1,
            dir.path().to_owned(),
            LogConfig::default(),
            vec![Arc::new(segment)],
            Offset(0),
            10,
        ));
        partition.set_log_end(Offset(5));
        let mut captures = vec![capture_at(&partition, Offset(5))];
        let started = Instant::now();
        let publisher = {
            let partition = Arc::clone(&partition);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                partition.publish_high_watermark(Offset(5));
            })
        };
        wait_until_durable(&engine, &mut captures);
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(captures.len(), 1, "kept once durable");
        publisher.join().expect("publisher");
        partition.set_log_end(Offset(9));
        let mut captures = vec![capture_at(&partition, Offset(9))];
        engine.poison("test", &io::Error::other("sync failed"));
        wait_until_durable(&engine, &mut captures);
        assert!(captures.is_empty(), "never written for a failed append");
    }
}
