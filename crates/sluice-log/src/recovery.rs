//! Recovery on open: rebuilds every partition from its directory and the journal, so that
//! every acknowledged append is present exactly once at its offset, and nothing that was
//! not written is invented.
//!
//! Steps:
//! 1. read the checkpoint (a missing or damaged one means "trust nothing": full scans);
//! 2. for each `<topic>-<partition>` directory with a valid `partition.metadata`, open its
//!    segments in base-offset order (each segment's extent list names where its bytes are in
//!    the journal files, which are all opened first). Bytes before the partition's recovery point (all of
//!    them after a clean shutdown) are trusted and only their headers are walked (or index
//!    files reused); bytes after it are CRC-checked batch by batch. The first damaged batch
//!    is cut off with everything after it (later segments are deleted), and a segment whose
//!    base offset does not follow its predecessor ends the log the same way;
//! 3. replay the journal from the checkpoint's position: a batch at the partition's log
//!    end is placed (its extent points into the journal: nothing is copied), one below is
//!    already there and skipped, one above is a gap and is reported, never filled with
//!    invented data. Entries of unknown topic ids (deleted
//!    topics) are skipped. A torn or corrupt entry ends the replay and is cut off;
//! 4. high watermark = log end; log start = max(checkpointed value, first segment base);
//! 5. rebuild each partition's producer state as of its recovered log end: start from the
//!    state the checkpoint names (a producer snapshot file, or empty) at its producer state
//!    offset, and re-apply the idempotent batches from there by walking their headers.
//!    That offset is at most what was durable when the checkpoint was written, so the walk
//!    covers about the bytes written since (nothing after a clean shutdown). When that state
//!    cannot be used (snapshot missing or damaged, or beyond the recovered log end because
//!    acknowledged data was lost), the newest other snapshot not beyond the log end is used,
//!    else the state is rebuilt from the newest `PRODUCER_STATE_REBUILD_SEGMENTS_MAX`
//!    segments (all of them when the checkpoint trusted nothing of the partition);
//! 6. fsync what recovery wrote, start a fresh journal file, write the changed producer
//!    snapshots and a new (not clean) checkpoint whose position is that file's start, and
//!    retire the old journal files no segment points into and the producer snapshots it
//!    does not name.
//!
//! Every action is logged through `tracing` and listed in the [`RecoveryReport`].

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, BatchHeader};
use crate::checkpoint::{self, Checkpoint, PartitionCheckpoint, ProducerStatePoint, RecoveryPoint};
use crate::checkpointer;
use crate::config::{LogConfig, PRODUCER_STATE_REBUILD_SEGMENTS_MAX};
use crate::engine::Engine;
use crate::error::LogError;
use crate::extents;
use crate::fs::{self, Fs};
use crate::journal::{self, Entry, FileEnd, JournalFile, JournalPosition, JournalWriter};
use crate::manager::RecoveryReport;
use crate::metadata::{self, PartitionMetadata};
use crate::mutation::mutated;
use crate::partition::Partition;
use crate::producer_snapshot;
use crate::producer_state::{ProducerStateTable, SnapshotMark};
use crate::segment::{self, now_ms, open_segment, Segment, SegmentPaths};
use crate::types::{Offset, PartitionKey, ProducerId, TopicId};

/// What a walk of producer batches re-applied.
#[derive(Debug, Default)]
struct WalkedBatches {
    /// Producer batches and markers re-applied.
    replayed: u64,
    /// The producers they belong to.
    walked: HashSet<ProducerId>,
    /// Some batch walked was transactional (data or marker).
    transactional: bool,
}

/// Gap reports per partition beyond which replay only counts.
const GAP_REPORTS_MAX: u32 = 3;

type Checkpoints = HashMap<(TopicId, i32), PartitionCheckpoint>;

struct Recovery<'a> {
    engine: &'a Engine,
    fs: &'a dyn Fs,
    report: RecoveryReport,
    checkpoint: Option<Checkpoint>,
    checkpoints: Checkpoints,
    /// Segments recovery scanned past a recovery point or wrote to: synced before the new
    /// checkpoint claims them.
    to_sync: Vec<Arc<Segment>>,
    /// Segments whose index files must be (re)written.
    to_index: Vec<Arc<Segment>>,
    dirs_to_sync: Vec<PathBuf>,
    gaps: HashMap<u64, u32>,
    /// Producer snapshot files found per partition directory, sorted by offset.
    snapshot_files: HashMap<PathBuf, Vec<Offset>>,
    /// Per partition directory: the lowest offset of durable data found missing or damaged.
    /// Offsets from there on no longer all hold their batches, so producer state beyond it
    /// is not used (it could answer a retry as a duplicate of data that is gone).
    lost_from: HashMap<PathBuf, Offset>,
    now_ms: i64,
}

/// A recovered partition's segments are in offset order without overlap, and the last
/// ends at the log end: no offset is held twice. A gap between two segments is allowed:
/// it is data a damaged segment lost, which recovery reports (its later segments are
/// kept). One pass over the segment list.
fn assert_segments_tile(partition: &Partition, segments: &[Arc<Segment>]) {
    assert!(!segments.is_empty(), "a partition has an active segment");
    for pair in segments.windows(2) {
        assert!(
            pair[0].base_offset < pair[1].base_offset,
            "segments in offset order"
        );
        assert!(
            pair[0].next_offset() <= pair[1].base_offset,
            "segments never overlap"
        );
    }
    let last = segments.last().map(|s| s.next_offset());
    assert_eq!(
        last,
        Some(partition.log_end()),
        "the last segment ends at the log end"
    );
}

/// Registers every journal file for reading: segments point into them. A data directory
/// of the earlier format (segments held the data, the journal only a copy) is refused.
fn open_journal_files(engine: &Engine) -> Result<(), LogError> {
    let fs = engine.fs.as_ref();
    for seq in journal::list_files(fs, &engine.journal_dir)? {
        let file = journal::open_existing(fs, &engine.journal_dir, seq)?;
        let mut magic = [0u8; 8];
        let read = fs::read_full_at(file.file.as_ref(), &mut magic, 0)?;
        if read == magic.len() && &magic == journal::FILE_MAGIC_V1 {
            return Err(older_format(
                &engine.journal_dir.join(journal::file_name(seq)),
            ));
        }
        engine.journal_files.insert(file);
    }
    crate::cleaner::register_cleaned_files(engine)?;
    crate::cleaner::load_checkpoint(engine);
    Ok(())
}

/// The error for a data directory written by the storage format before the journal became
/// the only copy of the data.
fn older_format(path: &Path) -> LogError {
    LogError::Io(io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} was written by an older Sluice storage format (segment .log files); this \
             version stores record batches only in the journal and cannot read it: start \
             with an empty data directory, or re-produce the data with the version that wrote it",
            path.display()
        ),
    ))
}

/// Recovers the data dir into `engine` and returns the journal writer for the committer.
pub(crate) fn recover(engine: &Engine) -> Result<(JournalWriter, RecoveryReport), LogError> {
    let fs = engine.fs.as_ref();
    fs.create_dir_all(&engine.config.data_dir)?;
    fs.create_dir_all(&engine.journal_dir)?;
    engine.journal_pool.load(fs, &engine.journal_dir)?;
    open_journal_files(engine)?;
    let mut recovery = Recovery {
        engine,
        fs,
        report: RecoveryReport::default(),
        checkpoint: None,
        checkpoints: HashMap::new(),
        to_sync: Vec::new(),
        to_index: Vec::new(),
        dirs_to_sync: Vec::new(),
        gaps: HashMap::new(),
        snapshot_files: HashMap::new(),
        lost_from: HashMap::new(),
        now_ms: now_ms(),
    };
    // The journal directory may have just been created (first start, or after a crash
    // lost its entry): its name must be durable before the checkpoint in it counts.
    recovery.dirs_to_sync.push(engine.config.data_dir.clone());
    recovery.read_checkpoint()?;
    recovery.load_partitions()?;
    let last_seq = recovery.replay_journal()?;
    recovery.settle_partitions()?;
    recovery.load_producer_states()?;
    let journal = recovery.persist(last_seq)?;
    let mut report = recovery.report;
    for partition in engine.partitions_snapshot() {
        report
            .partitions
            .push((partition.key.clone(), partition.offsets()));
    }
    report.partitions.sort_by(|a, b| a.0.cmp(&b.0));
    Ok((journal, report))
}

impl Recovery<'_> {
    fn info(&mut self, action: String) {
        tracing::info!("recovery: {action}");
        self.report.actions.push(action);
    }

    fn warn(&mut self, action: String) {
        tracing::warn!("recovery: {action}");
        self.report.actions.push(action);
    }

    fn note_loss(&mut self, dir: &Path, from: Offset) {
        let lost = self.lost_from.entry(dir.to_owned()).or_insert(from);
        *lost = (*lost).min(from);
    }

    /// Damage to data that was durable: an error, never silent.
    fn error(&mut self, action: String) {
        tracing::error!("recovery: {action}");
        self.report.actions.push(action);
    }

    fn read_checkpoint(&mut self) -> Result<(), LogError> {
        let path = self.engine.journal_dir.join(checkpoint::FILE_NAME);
        if !self.fs.exists(&path) {
            return Ok(());
        }
        let data = fs::read_file(self.fs, &path)?;
        match Checkpoint::decode(&data) {
            Some(checkpoint) => {
                let clean = if checkpoint.clean_shutdown {
                    "clean shutdown"
                } else {
                    "no clean shutdown"
                };
                let at = checkpoint.journal;
                self.info(format!(
                    "checkpoint at journal {}:{} ({clean})",
                    at.seq, at.offset
                ));
                for p in &checkpoint.partitions {
                    self.checkpoints
                        .insert((p.topic_id, p.partition), p.clone());
                }
                self.checkpoint = Some(checkpoint);
            }
            None => self.warn(
                "checkpoint file is damaged; scanning every segment and the whole journal".into(),
            ),
        }
        Ok(())
    }

    fn load_partitions(&mut self) -> Result<(), LogError> {
        let data_dir = self.engine.config.data_dir.clone();
        let mut names: Vec<String> = self
            .fs
            .read_dir(&data_dir)?
            .into_iter()
            .filter(|e| e.is_dir)
            .map(|e| e.name)
            .collect();
        names.sort();
        for name in names {
            if let Some((topic, partition)) = metadata::parse_dir_name(&name) {
                let (topic, dir) = (topic.to_owned(), data_dir.join(&name));
                self.load_partition(&dir, &topic, partition)?;
            }
        }
        Ok(())
    }

    /// Reads `partition.metadata`; `None` (after handling the directory) when it is not a
    /// complete partition.
    fn read_metadata(
        &mut self,
        dir: &Path,
        topic: &str,
        partition: i32,
    ) -> Result<Option<PartitionMetadata>, LogError> {
        let path = dir.join(metadata::FILE_NAME);
        if !self.fs.exists(&path) {
            self.remove_unfinished_dir(dir)?;
            return Ok(None);
        }
        let meta = PartitionMetadata::decode(&fs::read_file(self.fs, &path)?);
        match meta {
            Some(meta) if meta.topic == topic && meta.partition == partition => Ok(Some(meta)),
            _ => {
                self.pin_journal_files_of(dir)?;
                self.warn(format!(
                    "skipped {}: partition.metadata is unreadable or names another partition; \
                     the journal files its segments point into are kept",
                    dir.display()
                ));
                Ok(None)
            }
        }
    }

    /// Keeps the journal files the segments in `dir` point into (a directory recovery
    /// cannot load, kept for the operator to repair).
    fn pin_journal_files_of(&mut self, dir: &Path) -> Result<(), LogError> {
        for entry in self.fs.read_dir(dir)? {
            if entry.is_dir || !entry.name.ends_with(extents::FILE_SUFFIX) {
                continue;
            }
            for seq in extents::referenced_seqs(self.fs, &dir.join(&entry.name))? {
                self.engine.journal_files.pin(seq);
            }
        }
        Ok(())
    }

    /// A partition directory without metadata is an unfinished create or delete. It is
    /// removed only when it holds nothing but the log's own files.
    fn remove_unfinished_dir(&mut self, dir: &Path) -> Result<(), LogError> {
        let entries = self.fs.read_dir(dir)?;
        let ours = entries
            .iter()
            .all(|e| !e.is_dir && is_log_file_name(&e.name));
        if !ours {
            self.warn(format!(
                "skipped {}: no partition.metadata and unknown files inside",
                dir.display()
            ));
            return Ok(());
        }
        self.fs.remove_dir_all(dir)?;
        self.dirs_to_sync.push(self.engine.config.data_dir.clone());
        self.warn(format!(
            "removed unfinished partition directory {} (no partition.metadata)",
            dir.display()
        ));
        Ok(())
    }

    fn load_partition(&mut self, dir: &Path, topic: &str, number: i32) -> Result<(), LogError> {
        let Some(meta) = self.read_metadata(dir, topic, number)? else {
            return Ok(());
        };
        let _ = self
            .fs
            .remove_file(&fs::tmp_path(&dir.join(metadata::FILE_NAME)));
        let key = PartitionKey {
            topic_id: meta.topic_id,
            topic: Arc::from(meta.topic.as_str()),
            partition: number,
        };
        let checkpoint = self.checkpoints.get(&(key.topic_id, number)).cloned();
        let mut segments = self.load_segments(dir, &key, checkpoint.as_ref())?;
        if segments.is_empty() {
            let log_start = checkpoint
                .as_ref()
                .map_or(Offset(0), |c| c.log_start_offset);
            let durable_end = checkpoint
                .as_ref()
                .and_then(|c| c.recovery)
                .map_or(Offset(0), |p| p.offset);
            let base = log_start.max(durable_end);
            if base > log_start {
                self.note_loss(dir, log_start);
                self.error(format!(
                    "{topic}-{number}: every segment file is missing; offsets {}..{} are lost",
                    log_start.0, base.0
                ));
            }
            segments.push(Arc::new(Segment::create(self.fs, dir, base)?));
            self.dirs_to_sync.push(dir.to_owned());
            self.warn(format!(
                "{topic}-{number}: no segment files; started an empty log at offset {}",
                base.0
            ));
        }
        let config = LogConfig::default();
        let partition = Partition::new(
            key,
            self.engine.next_uid(),
            dir.to_owned(),
            config,
            segments,
            Offset(0),
            self.engine.config.producer_ids_per_partition_max,
        );
        self.engine.insert_partition(Arc::new(partition), None);
        Ok(())
    }

    /// Base offsets of the `.log` files in `dir`, sorted; removes index files that have no
    /// log file (left by an interrupted delete) and unfinished producer snapshot writes,
    /// and notes the producer snapshot files.
    fn list_segments(&mut self, dir: &Path) -> Result<Vec<Offset>, LogError> {
        // A cleaner pass cut short: aside files go, swaps are completed (compaction.md §4).
        for action in crate::cleaner::finish_interrupted_passes(self.fs, dir)? {
            self.info(action);
        }
        let names: Vec<String> = self
            .fs
            .read_dir(dir)?
            .into_iter()
            .filter(|e| !e.is_dir)
            .map(|e| e.name)
            .collect();
        if let Some(old) = names.iter().find(|n| is_older_segment_name(n)) {
            return Err(older_format(&dir.join(old)));
        }
        let mut bases: Vec<Offset> = names
            .iter()
            .filter_map(|n| segment::parse_segment_name(n))
            .collect();
        bases.sort();
        let mut snapshots: Vec<Offset> = names
            .iter()
            .filter_map(|n| producer_snapshot::parse_file_name(n))
            .collect();
        snapshots.sort();
        self.snapshot_files.insert(dir.to_owned(), snapshots);
        for name in names.iter().filter(|n| is_snapshot_tmp_name(n)) {
            self.fs.remove_file(&dir.join(name))?;
        }

        for name in &names {
            let stem = name
                .strip_suffix(".index")
                .or_else(|| name.strip_suffix(".timeindex"));
            let orphan = stem
                .and_then(|s| segment::parse_segment_name(&format!("{s}{}", extents::FILE_SUFFIX)));
            if orphan.is_some_and(|base| bases.binary_search(&base).is_err()) {
                self.fs.remove_file(&dir.join(name))?;
                self.info(format!(
                    "removed orphan index file {}",
                    dir.join(name).display()
                ));
            }
        }
        Ok(bases)
    }

    fn load_segments(
        &mut self,
        dir: &Path,
        key: &PartitionKey,
        checkpoint: Option<&PartitionCheckpoint>,
    ) -> Result<Vec<Arc<Segment>>, LogError> {
        let bases = self.list_segments(dir)?;
        let clean =
            self.checkpoint.as_ref().is_some_and(|c| c.clean_shutdown) && checkpoint.is_some();
        let point = checkpoint.and_then(|c| c.recovery);
        let interval = LogConfig::default().index_interval_bytes;
        let name = format!("{}-{}", key.topic, key.partition);
        let mut segments: Vec<Arc<Segment>> = Vec::new();
        for (i, &base) in bases.iter().enumerate() {
            let is_last = i + 1 == bases.len();
            if let Some(previous) = segments.last() {
                let (end, durable) = (previous.next_offset(), previous.base_offset);
                // Whether the previous segment was wholly durable at the checkpoint: then a
                // gap or overlap after it is damage to durable data (the journal cannot
                // repair it) and nothing after it may be deleted.
                let trusted = trusted_len(clean, point, durable) == u64::MAX;
                if base != end && !trusted {
                    self.warn(format!(
                        "{name}: segment {} does not follow the previous segment",
                        base.0
                    ));
                    self.delete_segment_files(dir, &bases[i..], &name)?;
                    break;
                }
                if base < end {
                    self.set_aside_overlapping(dir, base, end, &name)?;
                    continue;
                }
                if base > end {
                    self.note_loss(dir, end);
                    self.error(format!(
                        "{name}: offsets {}..{} are missing (a segment file is missing or was cut); \
                         later segments are kept and fetches of the missing offsets fail with CORRUPT_MESSAGE",
                        end.0, base.0
                    ));
                }
            }
            let trusted = trusted_len(clean, point, base);
            // The last segment keeps its damaged file only when the checkpoint says where
            // the log went on after it (a new segment then starts there).
            let keep = !is_last || point.is_some_and(|p| p.segment_base >= base && p.offset > base);
            // A segment's batches lie below the next segment's base (a batch claiming more
            // is damaged, and batches proven intact after damage must too). The last
            // segment is not bounded: after an unclean stop it may hold batches written
            // after the checkpoint.
            let below = bases.get(i + 1).copied().unwrap_or(Offset(i64::MAX));
            let files = &self.engine.journal_files;
            let (segment, outcome) =
                open_segment(self.fs, files, dir, base, trusted, interval, keep, below)?;
            if let Some(why) = outcome.extents_cut {
                self.warn(format!(
                    "{name}: the extent list of segment {} ends early ({why}); it is cut there",
                    base.0
                ));
                self.to_sync.push(Arc::clone(&segment));
            }
            if let Some(why) = outcome.extents_missing {
                self.error(format!(
                    "{name}: segment {} names journal bytes that are gone ({why}); the batches \
                     there are lost and fetches of them fail with CORRUPT_MESSAGE",
                    base.0
                ));
            }
            let damaged = !outcome.damaged.is_empty();
            if outcome.index_rebuilt && !is_last && trusted > 0 && !damaged {
                self.info(format!(
                    "{name}: rebuilt index of segment {} by scanning it",
                    base.0
                ));
            }
            if !is_last && !damaged && (outcome.index_rebuilt || outcome.truncated.is_some()) {
                self.to_index.push(Arc::clone(&segment));
            }
            if outcome.bytes_verified > 0 || outcome.truncated.is_some() {
                self.info(format!(
                    "{name}: CRC-checked {} bytes of segment {} past the recovery point",
                    outcome.bytes_verified, base.0
                ));
                self.to_sync.push(Arc::clone(&segment));
            }
            for range in &outcome.damaged {
                self.note_loss(dir, range.offset);
                let resumes = if range.resume_position > range.position {
                    format!(
                        "intact batches resume at byte {} (offset {}); fetches of offsets {}..{} fail with CORRUPT_MESSAGE",
                        range.resume_position, range.resume_offset.0, range.offset.0, range.resume_offset.0
                    )
                } else {
                    format!(
                        "nothing after it proves intact; fetches from offset {} to the next segment fail with CORRUPT_MESSAGE",
                        range.offset.0
                    )
                };
                self.error(format!(
                    "{name}: segment {} is damaged at byte {} (offset {}: {}); {resumes}; \
                     the file is left unchanged and later segments are kept",
                    base.0, range.position, range.offset.0, range.why
                ));
            }
            segments.push(segment);
            if let Some((bytes, why)) = outcome.truncated {
                self.report.bytes_truncated += bytes;
                self.warn(format!(
                    "{name}: truncated segment {} by {bytes} bytes ({why})",
                    base.0
                ));
                self.dirs_to_sync.push(dir.to_owned());
                self.delete_segment_files(dir, &bases[i + 1..], &name)?;
                break;
            }
        }
        self.continue_after_lost_tail(dir, &name, point, &mut segments)?;
        Ok(segments)
    }

    /// When the segments end before the checkpoint's recovery point, data that was durable
    /// is gone (a cut or missing file, or damage kept as it is): the log goes on at the
    /// recovery point in a new segment, so offsets that were acknowledged are never handed
    /// out again and the journal replays onto the right offset. The missing range is
    /// reported and fetches of it fail.
    fn continue_after_lost_tail(
        &mut self,
        dir: &Path,
        name: &str,
        point: Option<RecoveryPoint>,
        segments: &mut Vec<Arc<Segment>>,
    ) -> Result<(), LogError> {
        let Some(point) = point else {
            return Ok(());
        };
        let end = segments.last().map(|s| s.next_offset());
        if end.is_some_and(|end| end >= point.offset) || segments.is_empty() {
            return Ok(());
        }
        let end = end.unwrap_or(point.offset);
        self.note_loss(dir, end);
        self.error(format!(
            "{name}: the log ends at offset {} but offsets up to {} were durable at the checkpoint; \
             offsets {}..{} are missing and fetches of them fail with CORRUPT_MESSAGE; the log continues at {}",
            end.0, point.offset.0, end.0, point.offset.0, point.offset.0
        ));
        segments.push(Arc::new(Segment::create(self.fs, dir, point.offset)?));
        self.dirs_to_sync.push(dir.to_owned());
        Ok(())
    }

    /// A segment that starts inside the previous (durable) one cannot be placed: it is
    /// renamed to `<name>.damaged`, out of the log's way but kept for the operator.
    fn set_aside_overlapping(
        &mut self,
        dir: &Path,
        base: Offset,
        end: Offset,
        name: &str,
    ) -> Result<(), LogError> {
        let paths = SegmentPaths::new(dir, base);
        let aside = PathBuf::from(format!("{}.damaged", paths.extents.display()));
        for seq in extents::referenced_seqs(self.fs, &paths.extents)? {
            self.engine.journal_files.pin(seq);
        }
        self.fs.rename(&paths.extents, &aside)?;
        for index in [&paths.index, &paths.timeindex] {
            if let Err(e) = self.fs.remove_file(index) {
                if e.kind() != io::ErrorKind::NotFound {
                    return Err(e.into());
                }
            }
        }
        self.dirs_to_sync.push(dir.to_owned());
        self.error(format!(
            "{name}: segment {} starts inside the previous segment (which ends at {}); moved aside to {}",
            base.0,
            end.0,
            aside.display()
        ));
        Ok(())
    }

    /// Deletes whole segments that follow a damaged point.
    fn delete_segment_files(
        &mut self,
        dir: &Path,
        bases: &[Offset],
        name: &str,
    ) -> Result<(), LogError> {
        for &base in bases {
            let paths = SegmentPaths::new(dir, base);
            let len = extents::stored_len(self.fs, &paths.extents).unwrap_or(0);
            for path in [&paths.index, &paths.timeindex, &paths.extents] {
                match self.fs.remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
                    _ => {}
                }
            }
            self.report.bytes_truncated += len;
            self.warn(format!(
                "{name}: deleted segment {} ({len} bytes) after the damaged point",
                base.0
            ));
            self.dirs_to_sync.push(dir.to_owned());
        }
        Ok(())
    }

    /// Re-applies journal entries from the checkpoint on. Returns the highest journal file
    /// sequence number seen.
    fn replay_journal(&mut self) -> Result<u64, LogError> {
        let start = self
            .checkpoint
            .as_ref()
            .map_or(JournalPosition::default(), |c| c.journal);
        let seqs = journal::list_files(self.fs, &self.engine.journal_dir)?;
        let partitions = self.engine.partitions_by_id();
        let mut damaged = false;
        for &seq in seqs.iter().filter(|&&seq| seq >= start.seq) {
            let path = self.engine.journal_dir.join(journal::file_name(seq));
            if damaged {
                self.warn(format!(
                    "journal file {seq} follows a damaged entry and is not replayed"
                ));
                continue;
            }
            let Some(file) = self.engine.journal_files.get(seq) else {
                continue;
            };
            let file_len = file.file.len()?;
            let mut header = [0u8; journal::FILE_HEADER_LEN as usize];
            let read = fs::read_full_at(file.file.as_ref(), &mut header, 0)?;
            if !journal::header_ok(&header[..read], seq) {
                damaged = self.bad_journal_header(seq, file_len);
                continue;
            }
            let from = if seq == start.seq {
                start.offset.max(journal::FILE_HEADER_LEN)
            } else {
                journal::FILE_HEADER_LEN
            };
            // Only the part after the checkpoint is read: the rest is in the segments.
            let mut data = vec![0u8; usize::try_from(file_len.saturating_sub(from)).unwrap_or(0)];
            let read = fs::read_full_at(file.file.as_ref(), &mut data, from)?;
            data.truncate(read);
            damaged = self.replay_file(&file, &path, &data, from, &partitions)?;
        }
        let replayed = self.report.journal_entries_replayed;
        if replayed > 0 {
            self.info(format!("replayed {replayed} journal entries into segments"));
        }
        Ok(seqs.last().copied().unwrap_or(0).max(start.seq))
    }

    /// A file too short for its header was created just before a crash: it holds nothing.
    /// Any other bad header is damage. Returns whether replay must stop.
    fn bad_journal_header(&mut self, seq: u64, len: u64) -> bool {
        if len < journal::FILE_HEADER_LEN {
            self.info(format!(
                "journal file {seq} has no complete header ({len} bytes); ignored"
            ));
            return false;
        }
        self.report.bytes_truncated += len;
        self.warn(format!("journal file {seq} has a bad header; replay stops"));
        true
    }

    /// Replays one journal file; returns whether it ended in damage (which stops replay).
    /// A file ends cleanly at its end marker (the writer moved on) or at its last byte.
    fn replay_file(
        &mut self,
        file: &Arc<JournalFile>,
        path: &Path,
        data: &[u8],
        from: u64,
        partitions: &HashMap<(TopicId, i32), Arc<Partition>>,
    ) -> Result<bool, LogError> {
        let seq = file.seq;
        let mut failure: Option<io::Error> = None;
        let (end, how) = journal::read_entries(data, from, seq, from, |entry| {
            if failure.is_none() {
                failure = self.apply_entry(&entry, file, partitions).err();
            }
        });
        if let Some(error) = failure {
            return Err(error.into());
        }
        if matches!(how, FileEnd::Marker | FileEnd::Eof) {
            return Ok(false);
        }
        let cut = from + data.len() as u64 - end;
        let file = self.fs.open(path, fs::OpenMode::Existing)?;
        file.set_len(end)?;
        if !mutated!("recovery.journal_cut_unsynced") {
            file.sync_data()?;
        }
        self.report.bytes_truncated += cut;
        self.warn(format!(
            "journal file {seq}: {how:?} entry at byte {end} (a torn write, damage, or a recycled file's old bytes); cut {cut} bytes, replay stops"
        ));
        Ok(true)
    }

    /// Places the entry's batches that continue their partition's log (pointing into the
    /// journal: nothing is copied), skips those already present, reports a gap.
    fn apply_entry(
        &mut self,
        entry: &Entry<'_>,
        file: &Arc<JournalFile>,
        partitions: &HashMap<(TopicId, i32), Arc<Partition>>,
    ) -> io::Result<()> {
        let Some(partition) = partitions.get(&(entry.topic_id, entry.partition)) else {
            return Ok(()); // The topic was deleted (or re-created with a new id).
        };
        let mut position = entry.batches_position();
        let mut rest = entry.batches;
        while !rest.is_empty() {
            // `read_entries` checked that the batches tile the entry and pass their CRCs.
            let len = batch::batch_len_within(rest)
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "batch length"))?;
            let bytes = &rest[..len];
            let header = BatchHeader::parse(bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            let log_end = partition.log_end();
            if header.base_offset() > log_end {
                self.report_gap(partition, header.base_offset(), log_end);
                return Ok(());
            }
            if header.base_offset() == log_end {
                self.append_replayed(partition, bytes, &header, file, position)?;
                self.report.journal_entries_replayed += 1;
            }
            position += len as u64;
            rest = &rest[len..];
        }
        Ok(())
    }

    fn report_gap(&mut self, partition: &Partition, base: Offset, log_end: Offset) {
        let seen = self.gaps.entry(partition.uid).or_insert(0);
        *seen += 1;
        if *seen <= GAP_REPORTS_MAX {
            let name = format!("{}-{}", partition.key.topic, partition.key.partition);
            tracing::error!(partition = %name, base = base.0, log_end = log_end.0, "journal entry beyond log end");
            self.report.actions.push(format!(
                "{name}: journal entry at offset {} is beyond the log end {}; not applied (data before it is missing)",
                base.0, log_end.0
            ));
        }
    }

    fn append_replayed(
        &mut self,
        partition: &Partition,
        bytes: &[u8],
        header: &BatchHeader<'_>,
        file: &Arc<JournalFile>,
        file_position: u64,
    ) -> io::Result<()> {
        let config = partition.config();
        let _append = partition.append_lock.lock();
        // `apply_entry` places only the batch that continues the log.
        assert_eq!(header.base_offset(), partition.log_end());
        let mut active = partition.active();
        let reason = Partition::roll_reason(
            &active,
            bytes.len() as u64,
            header.last_offset(),
            &config,
            self.now_ms,
        );
        if reason.is_some() {
            let sealed = partition.roll(self.fs)?;
            self.to_index.push(sealed);
            self.dirs_to_sync.push(partition.dir.clone());
            active = partition.active();
        }
        active.append(
            bytes,
            file,
            file_position,
            config.index_interval_bytes,
            self.now_ms,
        )?;
        assert!(header.next_offset() > header.base_offset());
        assert_eq!(active.next_offset(), header.next_offset());
        partition.set_log_end(header.next_offset());
        if !self.to_sync.last().is_some_and(|s| Arc::ptr_eq(s, &active)) {
            self.to_sync.push(active);
        }
        Ok(())
    }

    /// Publishes what recovery found and settles the log start offsets.
    fn settle_partitions(&mut self) -> Result<(), LogError> {
        for partition in self.engine.partitions_snapshot() {
            let segments = partition.segments();
            assert_segments_tile(&partition, &segments);
            for segment in &segments {
                segment.publish_all();
            }
            partition.publish_high_watermark(partition.log_end());
            assert_eq!(partition.high_watermark(), partition.log_end());
            let checkpointed = self
                .checkpoints
                .get(&(partition.key.topic_id, partition.key.partition));
            let checkpointed_start = checkpointed.map_or(Offset(0), |c| c.log_start_offset);
            if checkpointed.is_some() && checkpointed_start < segments[0].base_offset {
                let name = format!("{}-{}", partition.key.topic, partition.key.partition);
                self.warn(format!(
                    "{name}: offsets {}..{} below the first segment are gone (deleted by retention \
                     after the last checkpoint, or a segment file is missing); the log starts at {}",
                    checkpointed_start.0, segments[0].base_offset.0, segments[0].base_offset.0
                ));
            }
            let log_start = checkpointed_start.max(segments[0].base_offset);
            self.settle_log_start(&partition, log_start)?;
        }
        Ok(())
    }

    fn settle_log_start(
        &mut self,
        partition: &Partition,
        log_start: Offset,
    ) -> Result<(), LogError> {
        let name = format!("{}-{}", partition.key.topic, partition.key.partition);
        let log_end = partition.log_end();
        let segments = partition.segments();
        if log_start > log_end {
            // DeleteRecords moved the start past data that was later lost: restart there.
            let fresh = Arc::new(Segment::create(self.fs, &partition.dir, log_start)?);
            partition.replace_segments(vec![fresh]);
            for segment in &segments {
                segment.delete_files(self.fs)?;
            }
            self.dirs_to_sync.push(partition.dir.clone());
            self.warn(format!(
                "{name}: log start {} is past the recovered log end {}; log restarted there",
                log_start.0, log_end.0
            ));
        } else {
            // A segment goes when the next one starts at or below the log start: its own
            // end may be short of that when it is damaged.
            let below = segments
                .windows(2)
                .take_while(|pair| pair[1].base_offset <= log_start)
                .count();
            for segment in partition.remove_leading(below) {
                segment.delete_files(self.fs)?;
                // Oldest first, one directory sync each: see `retention::remove_segments`.
                if !mutated!("recovery.below_start_dir_unsynced") {
                    self.fs.sync_dir(&partition.dir)?;
                }
                self.info(format!(
                    "{name}: deleted segment {} below the log start offset",
                    segment.base_offset.0
                ));
            }
        }
        let log_start = partition.advance_log_start(log_start);
        // The log start is inside the log: at or after the first segment's base, at or
        // below the high watermark (which is the log end here).
        let segments = partition.segments();
        assert!(log_start >= segments[0].base_offset && log_start <= partition.high_watermark());
        Ok(())
    }

    /// Rebuilds every partition's producer state as of its recovered log end (step 5 of
    /// the module header).
    fn load_producer_states(&mut self) -> Result<(), LogError> {
        for partition in self.engine.partitions_snapshot() {
            let (mut table, mut from, partial) = self.producer_state_start(&partition);
            let mut walk = self.walk_producer_batches(&partition, &mut table, from)?;
            if partial && walk.transactional {
                // A transaction still open may have started in any older segment: rebuild
                // from the log start, as Kafka does without a snapshot (transactions.md §6.1).
                let name = format!("{}-{}", partition.key.topic, partition.key.partition);
                from = partition.segments()[0].base_offset;
                self.warn(format!(
                    "{name}: transactional batches found; producer state rebuilt from offset {} instead",
                    from.0
                ));
                table = ProducerStateTable::new(self.engine.config.producer_ids_per_partition_max);
                walk = self.walk_producer_batches(&partition, &mut table, from)?;
            }
            let WalkedBatches {
                replayed, walked, ..
            } = walk;
            self.forget_producers_of_deleted_batches(&partition, from, &mut table, &walked);
            table.trim_aborted(partition.log_start());
            partition.reset_last_stable(table.first_unstable_offset());
            if replayed > 0 {
                let name = format!("{}-{}", partition.key.topic, partition.key.partition);
                self.info(format!(
                    "{name}: re-applied {replayed} idempotent batches from offset {} to the producer state ({} producers)",
                    from.0,
                    table.len()
                ));
            }
            *partition.producers.lock() = table;
        }
        Ok(())
    }

    /// Re-applies to `table` the producer batches and transaction markers of `partition`
    /// from offset `from` on, by walking their headers.
    fn walk_producer_batches(
        &self,
        partition: &Partition,
        table: &mut ProducerStateTable,
        from: Offset,
    ) -> Result<WalkedBatches, LogError> {
        let now = self.now_ms;
        let mut walk = WalkedBatches::default();
        for segment in partition.segments() {
            if segment.next_offset() <= from {
                continue;
            }
            segment.walk_batches(from, |header, control| {
                let base = header.base_offset();
                let producer_id = header.producer_id();
                if base < from {
                    return;
                }
                walk.transactional |= header.is_transactional();
                let replayed = match control {
                    Some(control) if producer_id.is_idempotent() => {
                        let epoch = header.producer_epoch();
                        table.record_marker(producer_id, epoch, control, base, now);
                        true
                    }
                    _ => table.record_header(header, base, now),
                };
                if replayed {
                    walk.replayed += 1;
                    walk.walked.insert(producer_id);
                }
            })?;
        }
        Ok(walk)
    }

    /// When retention or DeleteRecords deleted segments above the offset the state is as
    /// of, the batches in between are gone and the state may be behind for any producer
    /// that wrote there: answering its next sequence with OutOfOrderSequence would stall a
    /// healthy producer. Producers the walk did not see are therefore forgotten (accepted
    /// at any sequence, the safe direction); those it saw have their newest batches right.
    fn forget_producers_of_deleted_batches(
        &mut self,
        partition: &Partition,
        from: Offset,
        table: &mut ProducerStateTable,
        walked: &HashSet<ProducerId>,
    ) {
        let first_base = partition.segments()[0].base_offset;
        if from >= first_base {
            return;
        }
        let forgotten = table.retain(|producer_id, _| walked.contains(&producer_id));
        if forgotten > 0 {
            let name = format!("{}-{}", partition.key.topic, partition.key.partition);
            self.warn(format!(
                "{name}: segments from offset {} to {} were deleted after the producer state was taken; forgot {forgotten} producers not seen since",
                from.0, first_base.0
            ));
        }
    }

    /// The producer state to start from, the offset from which batches must be re-applied
    /// to it, and whether that is a partial rebuild (newest segments only).
    fn producer_state_start(
        &mut self,
        partition: &Partition,
    ) -> (ProducerStateTable, Offset, bool) {
        let name = format!("{}-{}", partition.key.topic, partition.key.partition);
        // Offsets below this hold exactly the batches they held when any state was taken.
        let log_end = match self.lost_from.get(&partition.dir) {
            Some(&lost) => partition.log_end().min(lost),
            None => partition.log_end(),
        };
        let checkpointed = self
            .checkpoints
            .get(&(partition.key.topic_id, partition.key.partition))
            .cloned();
        if let Some(point) = checkpointed.as_ref().and_then(|c| c.producer_state) {
            match self.checkpointed_producer_state(partition, point, log_end) {
                Ok(table) => return (table, point.offset, false),
                Err(why) => self.warn(format!("{name}: {why}; rebuilding producer state")),
            }
        }
        let files = self
            .snapshot_files
            .get(&partition.dir)
            .cloned()
            .unwrap_or_default();
        for &file in files.iter().rev().filter(|&&file| file <= log_end) {
            if let Some(table) = self.read_producer_snapshot(partition, file) {
                self.info(format!("{name}: producer state from snapshot {}", file.0));
                return (table, file, false);
            }
        }
        let segments = partition.segments();
        let mut first = 0;
        if checkpointed.is_some_and(|c| c.recovery.is_some()) {
            // The checkpoint spared recovery most of this partition: keep it that way.
            first = segments
                .len()
                .saturating_sub(PRODUCER_STATE_REBUILD_SEGMENTS_MAX);
            self.warn(format!(
                "{name}: producer state rebuilt from offset {} only; older producers are forgotten",
                segments[first].base_offset.0
            ));
        }
        let max = self.engine.config.producer_ids_per_partition_max;
        (
            ProducerStateTable::new(max),
            segments[first].base_offset,
            first > 0,
        )
    }

    /// The state a checkpoint names, or why it cannot be used.
    fn checkpointed_producer_state(
        &mut self,
        partition: &Partition,
        point: ProducerStatePoint,
        log_end: Offset,
    ) -> Result<ProducerStateTable, String> {
        if point.offset > log_end {
            return Err(format!(
                "producer state checkpointed at offset {} is beyond the recovered log end {}",
                point.offset.0, log_end.0
            ));
        }
        match point.snapshot {
            None => Ok(ProducerStateTable::new(
                self.engine.config.producer_ids_per_partition_max,
            )),
            Some(file) => self
                .read_producer_snapshot(partition, file)
                .ok_or_else(|| format!("producer snapshot {} is missing or damaged", file.0)),
        }
    }

    /// Reads `<file>.snapshot`; `None` when it is missing, unreadable, damaged, or not
    /// this partition's snapshot at that offset.
    fn read_producer_snapshot(
        &self,
        partition: &Partition,
        file: Offset,
    ) -> Option<ProducerStateTable> {
        let path = partition.dir.join(producer_snapshot::file_name(file));
        let data = fs::read_file(self.fs, &path).ok()?;
        let key = &partition.key;
        let max = self.engine.config.producer_ids_per_partition_max;
        let (offset, mut table) =
            producer_snapshot::decode(&data, key.topic_id, key.partition, max)?;
        if offset != file {
            return None;
        }
        table.snapshot = Some(SnapshotMark {
            version: table.version(),
            offset: file,
        });
        Some(table)
    }

    /// Deletes the producer snapshot files found on open that the new checkpoint does not
    /// name. Harmless if it fails: only logged.
    fn delete_unused_snapshots(&mut self, points: &HashMap<u64, ProducerStatePoint>) {
        for partition in self.engine.partitions_snapshot() {
            let keep = points.get(&partition.uid).and_then(|p| p.snapshot);
            let files = self
                .snapshot_files
                .remove(&partition.dir)
                .unwrap_or_default();
            for file in files.into_iter().filter(|&file| Some(file) != keep) {
                let path = partition.dir.join(producer_snapshot::file_name(file));
                if let Err(error) = self.fs.remove_file(&path) {
                    tracing::warn!(%error, path = %path.display(), "could not delete an old producer snapshot");
                }
            }
        }
    }

    /// Makes recovery's own writes durable, starts a fresh journal file and writes the
    /// checkpoint that stands for all of it; then the old journal files can go.
    fn persist(&mut self, last_seq: u64) -> Result<JournalWriter, LogError> {
        let mut synced: Vec<*const Segment> = Vec::new();
        for segment in &self.to_sync {
            if !synced.contains(&Arc::as_ptr(segment)) && !mutated!("recovery.segments_unsynced") {
                segment.sync()?;
                synced.push(Arc::as_ptr(segment));
            }
        }
        for segment in &self.to_index {
            segment.write_index_files(self.fs)?;
        }
        self.dirs_to_sync.sort();
        self.dirs_to_sync.dedup();
        if mutated!("recovery.dirs_unsynced") {
            self.dirs_to_sync.clear();
        }
        for dir in &self.dirs_to_sync {
            self.fs.sync_dir(dir)?;
        }
        let engine = self.engine;
        let seq = last_seq + 1;
        let (dir, pool) = (&engine.journal_dir, Arc::clone(&engine.journal_pool));
        let writer = JournalWriter::create(
            Arc::clone(&engine.fs),
            dir,
            pool,
            Arc::clone(&engine.journal_files),
            seq,
            engine.config.journal_file_bytes_max,
            engine.config.journal_writes_direct(),
        )?;
        let position = writer.position();
        let points = recovery_points(engine);
        // Every partition's state is as of its log end, which is durable now.
        let mut captures = checkpointer::capture_producer_states(engine);
        let none = HashMap::new();
        let producer_points = checkpointer::write_producer_snapshots(engine, &mut captures, &none)?;
        engine.write_checkpoint_file(position, &points, &producer_points, false)?;
        checkpointer::finish_producer_snapshots(engine, &captures, &none);
        self.delete_unused_snapshots(&producer_points);
        {
            let mut handoff = engine.handoff.lock();
            handoff.written_to = position;
            handoff.recovery_points = points.clone();
        }
        let mut state = engine.checkpoints.lock();
        state.journal = position;
        state.recovery_points = points;
        state.producer_points = producer_points;
        engine.retire_journal_files_before(position)?;
        Ok(writer)
    }
}

/// Every partition is durable up to its log end once recovery has synced its writes.
fn recovery_points(engine: &Engine) -> HashMap<u64, RecoveryPoint> {
    let mut points = HashMap::new();
    for partition in engine.partitions_snapshot() {
        let active = partition.active();
        let position = u32::try_from(active.written_len()).unwrap_or(u32::MAX);
        let point = RecoveryPoint {
            offset: partition.log_end(),
            segment_base: active.base_offset,
            position,
        };
        points.insert(partition.uid, point);
    }
    points
}

/// How many leading bytes of segment `base` were durable at the checkpoint.
fn trusted_len(clean_shutdown: bool, recovery: Option<RecoveryPoint>, base: Offset) -> u64 {
    if clean_shutdown {
        return u64::MAX;
    }
    match recovery {
        Some(point) if base < point.segment_base => u64::MAX,
        Some(point) if base == point.segment_base => u64::from(point.position),
        _ => 0,
    }
}

/// Files the log itself puts in a partition directory.
fn is_log_file_name(name: &str) -> bool {
    let stem = name
        .strip_suffix(extents::FILE_SUFFIX)
        .or_else(|| name.strip_suffix(".index"))
        .or_else(|| name.strip_suffix(".timeindex"));
    let segment_file = stem.is_some_and(|s| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()));
    segment_file
        || producer_snapshot::parse_file_name(name).is_some()
        || is_snapshot_tmp_name(name)
        || crate::cleaner::is_aside_name(name)
        || crate::cleaner::is_swap_name(name)
        || name == metadata::FILE_NAME
        || name == fs::tmp_path(Path::new(metadata::FILE_NAME)).to_string_lossy()
}

/// A segment file of the storage format before the journal held the only copy.
fn is_older_segment_name(name: &str) -> bool {
    name.strip_suffix(".log")
        .is_some_and(|s| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit()))
}

/// A producer snapshot being written (`<offset:020>.snapshot.tmp`) when the log stopped.
fn is_snapshot_tmp_name(name: &str) -> bool {
    name.strip_suffix(".tmp")
        .is_some_and(|n| producer_snapshot::parse_file_name(n).is_some())
}
