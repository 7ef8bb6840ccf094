//! Retention and time-based rolls, run by a background thread every
//! `retention_check_interval_ms` and on demand (`LogManager::enforce_retention`), plus the
//! segment removal DeleteRecords shares with it. The same thread expires idle producer ids
//! (`LogManager::expire_producers`).
//!
//! Producer state is not trimmed with the log start offset: as in Kafka, a producer whose
//! batches were all deleted keeps its entry (and so its duplicate detection) until it
//! expires.
//!
//! Per partition, oldest segments first:
//! - `retention.ms`: a segment goes when its largest timestamp is older than
//!   `now - retention.ms`;
//! - `retention.bytes`: the oldest segment goes while the partition would still hold at
//!   least `retention.bytes` without it;
//! - never the active segment: when every segment, the active one included, has expired
//!   by time, the active one is rolled (if non-empty) so it can go too, as Kafka does;
//! - only segments whose every batch is below the high watermark (acknowledged data).
//!
//! Guarantees: the log start offset moves to the new first segment's base offset before any
//! file is unlinked, so a reader never sees an offset the log no longer holds as in range;
//! the partition directory is fsynced before unlinking, so a crash cannot leave the old
//! segments gone while a newer segment's creation is lost, and after each segment's
//! unlink, so a crash keeps only the removal of the oldest ones (never a hole).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::config::LogConfig;
use crate::engine::Engine;
use crate::error::LogError;
use crate::mutation::mutated;
use crate::partition::Partition;
use crate::segment::{now_ms, Segment};
use crate::types::Offset;

/// The thread body.
pub(crate) fn run(engine: Arc<Engine>) {
    let interval = Duration::from_millis(engine.config.retention_check_interval_ms.max(1));
    loop {
        engine.retention_signal.wait(interval);
        if engine.stopping.load(Ordering::Acquire) || engine.is_poisoned() {
            break;
        }
        if let Err(error) = enforce(&engine, now_ms()) {
            tracing::warn!(%error, "retention pass failed");
        }
        expire_producers(&engine, now_ms());
    }
    tracing::debug!("retention stopped");
}

/// One pass over every partition.
pub(crate) fn enforce(engine: &Engine, now_ms: i64) -> Result<(), LogError> {
    engine.check_writable()?;
    for partition in engine.partitions_snapshot() {
        if !partition.is_deleted() {
            enforce_partition(engine, &partition, now_ms)?;
        }
    }
    Ok(())
}

/// Drops the producer ids idle for `producer_id_expiration_ms` in every partition. Only
/// memory changes; the next checkpoint snapshots the result.
pub(crate) fn expire_producers(engine: &Engine, now_ms: i64) -> usize {
    let expiration_ms = engine.config.producer_id_expiration_ms;
    let mut expired = 0;
    for partition in engine.partitions_snapshot() {
        let dropped = {
            let mut producers = partition.producers.lock();
            // Aborted transactions wholly below the log start can no longer be read.
            producers.trim_aborted(partition.log_start());
            producers.expire(now_ms, expiration_ms)
        };
        if dropped > 0 {
            tracing::debug!(
                topic = %partition.key.topic,
                partition = partition.key.partition,
                dropped,
                "expired idle producer ids"
            );
        }
        expired += dropped;
    }
    expired
}

fn enforce_partition(
    engine: &Engine,
    partition: &Arc<Partition>,
    now_ms: i64,
) -> Result<(), LogError> {
    let config = partition.config();
    let _trim = partition.trim_lock.lock();
    if partition.is_deleted() {
        return Ok(()); // Deleted while this pass was on its way.
    }
    roll_if_due(engine, partition, &config, now_ms)?;
    if !config.cleanup_delete {
        return Ok(()); // `cleanup.policy=compact`: the cleaner, not retention, trims it.
    }
    let segments = partition.segments();
    let by_time = expired_by_time(&segments, &config, now_ms);
    let by_bytes = over_size(&segments, &config);
    let count = removable(&segments, by_time.max(by_bytes), partition.high_watermark());
    if count > 0 {
        let reason = if by_time >= by_bytes {
            "retention.ms"
        } else {
            "retention.bytes"
        };
        remove_segments(engine, partition, count, reason)?;
    }
    Ok(())
}

/// Rolls the active segment when it is older than `segment.ms` (on a compacted topic,
/// `max.compaction.lag.ms` when shorter: `LogConfig::roll_ms`), or when it has expired
/// by `retention.ms` together with every older segment (so the next step can delete it).
fn roll_if_due(
    engine: &Engine,
    partition: &Arc<Partition>,
    config: &LogConfig,
    now_ms: i64,
) -> Result<(), LogError> {
    let _append = partition.append_lock.lock();
    let segments = partition.segments();
    let active = &segments[segments.len() - 1];
    if active.is_empty() {
        return Ok(());
    }
    let too_old = now_ms.saturating_sub(active.first_append_ms()) > config.roll_ms();
    let all_expired = expired_by_time(&segments, config, now_ms) == segments.len();
    if !too_old && !all_expired {
        return Ok(());
    }
    // A roll by age adds a file; within the topic's share only. (A roll of a wholly
    // expired segment is for deleting it: the file count does not grow.)
    if !all_expired && !engine.topic_may_roll(&partition.key.topic, 1) {
        return Ok(());
    }
    let sealed = engine.guard("segment roll", partition.roll(engine.fs.as_ref()))?;
    let mut handoff = engine.handoff.lock();
    handoff.sealed.push(sealed);
    handoff.new_files.push(Arc::clone(partition));
    Ok(())
}

/// Rolls the active segment when every batch in it is below `target` (DeleteRecords up to
/// the high watermark), so it is deleted with the others: its bytes are in the journal,
/// and the journal file they share can only be freed once no segment points into it. A
/// roll the system refuses (no space for the new extents file) leaves the segment as it
/// is; DeleteRecords still succeeds.
fn roll_if_wholly_below(
    engine: &Engine,
    partition: &Arc<Partition>,
    target: Offset,
) -> Result<(), LogError> {
    let _append = partition.append_lock.lock();
    let active = partition.active();
    if active.is_empty() || active.next_offset() > target {
        return Ok(());
    }
    let sealed = match partition.roll(engine.fs.as_ref()) {
        Ok(sealed) => sealed,
        Err(error) if crate::fs::is_retryable(&error) => {
            tracing::warn!(%error, "DeleteRecords could not roll the active segment; it stays");
            return Ok(());
        }
        Err(error) => return engine.guard("segment roll", Err(error)),
    };
    let mut handoff = engine.handoff.lock();
    handoff.sealed.push(sealed);
    handoff.new_files.push(Arc::clone(partition));
    Ok(())
}

/// How many leading segments are older than `retention.ms`.
fn expired_by_time(segments: &[Arc<Segment>], config: &LogConfig, now_ms: i64) -> usize {
    if config.retention_ms < 0 {
        return 0;
    }
    let cutoff = now_ms.saturating_sub(config.retention_ms);
    segments
        .iter()
        .take_while(|s| !s.is_empty() && s.max_timestamp().0 < cutoff)
        .count()
}

/// How many leading segments can go while at least `retention.bytes` remain.
fn over_size(segments: &[Arc<Segment>], config: &LogConfig) -> usize {
    let Ok(keep) = u64::try_from(config.retention_bytes) else {
        return 0;
    };
    let mut total: u64 = segments.iter().map(|s| s.written_len()).sum();
    let mut count = 0;
    for segment in segments {
        let size = segment.written_len();
        if total - size < keep {
            break;
        }
        total -= size;
        count += 1;
    }
    count
}

/// Caps `wanted` to segments that are not active and fully below the high watermark.
fn removable(segments: &[Arc<Segment>], wanted: usize, high_watermark: Offset) -> usize {
    let candidates = wanted.min(segments.len().saturating_sub(1));
    segments[..candidates]
        .iter()
        .take_while(|s| s.committed_next_offset() <= high_watermark)
        .count()
}

/// Removes the `count` oldest segments: log start first, then the list, then the files.
/// Caller holds the partition's `trim_lock`.
pub(crate) fn remove_segments(
    engine: &Engine,
    partition: &Partition,
    count: usize,
    reason: &str,
) -> Result<(), LogError> {
    let segments = partition.segments();
    if count == 0 || count >= segments.len() {
        return Ok(());
    }
    let new_start = segments[count].base_offset;
    partition.advance_log_start(new_start);
    let removed = partition.remove_leading(count);
    // Files these segments shared may now be mostly expired.
    engine.journal_cleaner_signal.raise();
    if !mutated!("retention.dir_unsynced_before_unlinks") {
        engine.guard(
            "partition directory sync",
            engine.fs.sync_dir(&partition.dir),
        )?;
    }
    {
        // The checkpointer need not sync or index deleted segments; dropping them from its
        // lists now closes their files at once instead of at the next checkpoint, so the
        // descriptors are free for new segments (a refused roll can go on).
        let is_removed = |s: &Arc<Segment>| removed.iter().any(|r| Arc::ptr_eq(r, s));
        let mut handoff = engine.handoff.lock();
        handoff.dirty.retain(|s| !is_removed(s));
        handoff.sealed.retain(|s| !is_removed(s));
    }
    for (i, segment) in removed.iter().enumerate() {
        if let Err(error) = segment.delete_files(engine.fs.as_ref()) {
            // Not a durability problem: the segment is out of the log either way.
            tracing::warn!(%error, path = %segment.paths.extents.display(), "could not delete segment files");
        }
        // Oldest first, with a directory sync after each: POSIX does not order unsynced
        // unlinks, and a crash that kept a newer segment's removal but not an older one's
        // would leave a hole, which recovery must take for damage (it cuts the log there).
        if mutated!("retention.unlinks_synced_once") && i + 1 < removed.len() {
            continue;
        }
        engine.guard(
            "partition directory sync",
            engine.fs.sync_dir(&partition.dir),
        )?;
    }
    tracing::info!(
        topic = %partition.key.topic,
        partition = partition.key.partition,
        segments = removed.len(),
        log_start_offset = partition.log_start().0,
        reason,
        "deleted old segments"
    );
    engine.bump_commits();
    Ok(())
}

/// How many leading segments lie wholly below `target` (judged by the next segment's base).
fn segments_below(partition: &Partition, target: Offset) -> usize {
    partition
        .segments()
        .windows(2)
        .take_while(|pair| pair[1].base_offset <= target)
        .count()
}

/// Moves the log start offset to `offset` (DeleteRecords), durably, then deletes segments
/// wholly below it. Returns the log start offset now in force.
pub(crate) fn delete_records(
    engine: &Engine,
    partition: &Arc<Partition>,
    offset: Offset,
) -> Result<Offset, LogError> {
    engine.check_writable()?;
    let _trim = partition.trim_lock.lock();
    if partition.is_deleted() {
        return Err(LogError::UnknownPartition);
    }
    let offsets = partition.offsets();
    let target = if offset.0 == -1 {
        offsets.high_watermark
    } else {
        offset
    };
    if target.0 < 0 || target > offsets.high_watermark {
        return Err(LogError::OffsetOutOfRange {
            offset,
            log_start_offset: offsets.log_start_offset,
            high_watermark: offsets.high_watermark,
        });
    }
    // Persisted even when the log start is already there: retention moves it in memory
    // only (its deletes become durable later), and the answer promises it durably.
    let now_in_force = partition.advance_log_start(target);
    roll_if_wholly_below(engine, partition, target)?;
    // Judged by the next segment's base, so a damaged segment whose intact part ends
    // early is not dropped while part of its range is still at or above the target.
    let delete_below_target = || {
        remove_segments(
            engine,
            partition,
            segments_below(partition, target),
            "DeleteRecords",
        )
    };
    let persisted = match mutated!("delete_records.unpersisted") {
        true => Ok(()),
        false => engine.persist_log_starts(),
    };
    match persisted {
        Ok(()) => {}
        // A full disk: the checkpoint cannot be rewritten until space is freed, and freeing
        // space is what the caller asked for. Delete the segments first (as retention
        // always does), then write the checkpoint. A crash in between keeps the old log
        // start, raised to the first remaining segment.
        Err(LogError::Io(error)) if crate::fs::is_retryable(&error) => {
            tracing::warn!(%error, "DeleteRecords on a full disk: deleting segments before rewriting the checkpoint");
            delete_below_target()?;
            engine.persist_log_starts()?;
        }
        Err(other) => return Err(other),
    }
    delete_below_target()?;
    engine.bump_commits();
    Ok(now_in_force)
}
