//! The journal cleaner: frees data files that a few long-lived bytes would otherwise keep
//! on disk (`docs/storage.md` §7a).
//!
//! Every journal file holds every partition's data, and a file is freed only when no
//! segment points into it any more. A partition whose data lives much longer than its
//! neighbours' (a week-retained topic with a trickle, `__consumer_offsets`, a compacted
//! topic) would keep every file it wrote into. A pass finds the data files (journal files
//! the checkpoint no longer needs for replay, and the cleaners' own files) whose bytes are
//! mostly expired, copies the bytes that outlive the rest into a new data file of the
//! cleaned kind (`journal/<seq>.cleaned`, never replayed), and points those extents at the
//! copies; the old file is then retired by the usual rule.
//!
//! Policy (what keeps one write per byte for data that expires on time): a file's
//! *natural end* is the time by which at most `max_live_ratio` of its size is still live
//! (from each holding segment's expiry, `maxTimestamp + retention.ms`). A file whose
//! natural end is within the slack of now is cleaned, and only the bytes that expire more
//! than the slack after its natural end (and after now) are moved: at most
//! `max_live_ratio` of the file, and never data that would have gone with its neighbours.
//! Bytes that never expire by time (compacted or size-retained partitions, the internal
//! topics) always outlive their file, so they are moved whenever the rest of their file
//! has gone; a moved extent's copies are contiguous, so a partition's moved extents merge
//! and its extent list shrinks.
//!
//! Guarantees (crash cases in `docs/storage.md` §10): the copy is synced, with its
//! directory entry, before any extents file names it; a segment's extents file is
//! replaced atomically (`<base>.extents.moved`, synced, renamed over it, directory
//! synced) and describes the same bytes at the same positions before and after; an old
//! file is retired only after every extents file that named it was switched and synced.
//! The pass runs on its own thread, throttled, and never takes a lock the committer
//! waits on for longer than an in-memory list swap.

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::cleaner::{cleaned_file_name, CLEANED_SEQ_BASE};
use crate::config::{JournalCleanerConfig, LogConfig};
use crate::engine::{Engine, Stats};
use crate::error::LogError;
use crate::extents::{Placed, Relocation};
use crate::fs::{self, OpenMode};
use crate::journal::JournalFile;
use crate::mutation::mutated;
use crate::partition::Partition;
use crate::segment::{now_ms, Segment};
use crate::types::PartitionKey;

/// Copy buffer of a pass.
const COPY_BUFFER_BYTES: usize = 1 << 20;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JournalCleanerPass {
    /// Data files whose outliving bytes were moved (each is freed once unreferenced).
    pub files_cleaned: usize,
    pub segments_moved: usize,
    pub bytes_moved: u64,
}

/// Disk use of the log's data files, and who holds it (`LogManager::disk_usage`).
#[derive(Debug, Clone, Default)]
pub struct DiskUsage {
    /// Journal files (`.wal`) and their bytes on disk.
    pub journal_files: u64,
    pub journal_file_bytes: u64,
    /// The cleaners' data files (`.cleaned`).
    pub cleaned_files: u64,
    pub cleaned_file_bytes: u64,
    /// Retired journal files kept for reuse (`.free`).
    pub free_files: u64,
    pub free_file_bytes: u64,
    /// Bytes the partitions' segments hold (what retention keeps).
    pub retained_bytes: u64,
    /// Data files no longer written nor needed for replay, at most `max_live_ratio` live,
    /// yet still on disk: kept by the few bytes the journal cleaner has not moved yet.
    pub pinned_files: u64,
    pub pinned_file_bytes: u64,
    pub partitions: Vec<PartitionDiskUsage>,
}

impl DiskUsage {
    /// Data file bytes (journal and cleaned) per retained byte; 1.0 for an empty log.
    pub fn space_amplification(&self) -> f64 {
        let files = self.journal_file_bytes + self.cleaned_file_bytes;
        if self.retained_bytes == 0 {
            return 1.0;
        }
        files as f64 / self.retained_bytes as f64
    }
}

/// One partition's share of [`DiskUsage`].
#[derive(Debug, Clone)]
pub struct PartitionDiskUsage {
    pub key: PartitionKey,
    /// Bytes of its segments.
    pub retained_bytes: u64,
    /// Sizes of the data files it has bytes in (shared with other partitions).
    pub file_bytes: u64,
    /// Its bytes in pinned files: what keeps them on disk.
    pub pinned_bytes: u64,
}

/// One segment's bytes in one file, and when they expire.
#[derive(Debug, Clone, Copy)]
struct Holder {
    expiry_ms: i64,
    bytes: u64,
    /// Index into `Usage::segments`.
    segment: usize,
}

#[derive(Debug)]
struct FileUse {
    seq: u64,
    size: u64,
    live: u64,
    /// Not written any more and not needed for replay: may be cleaned.
    settled: bool,
    holders: Vec<Holder>,
}

#[derive(Debug)]
struct Usage {
    files: Vec<FileUse>,
    segments: Vec<(Arc<Partition>, Arc<Segment>)>,
}

/// The thread body: a pass every `backoff_ms`, or when woken.
pub(crate) fn run(engine: Arc<Engine>) {
    let backoff = Duration::from_millis(engine.config.journal_cleaner.backoff_ms.max(1));
    loop {
        engine.journal_cleaner_signal.wait(backoff);
        if engine.stopping.load(Ordering::Acquire) || engine.is_poisoned() {
            break;
        }
        if let Err(error) = clean_once(&engine, now_ms()) {
            tracing::warn!(%error, "journal cleaner pass failed; the next pass tries again");
        }
    }
    tracing::debug!("journal cleaner stopped");
}

/// When a segment's bytes expire by time; `i64::MAX` when they never do (no time
/// retention, or compaction only). The active segment's is a lower bound (it still grows).
fn expiry_ms(config: &LogConfig, segment: &Segment) -> i64 {
    if !config.cleanup_delete || config.retention_ms < 0 {
        return i64::MAX;
    }
    segment
        .max_timestamp()
        .0
        .saturating_add(config.retention_ms)
}

/// Every data file, its size, and which segments hold how many of its bytes.
fn measure(engine: &Engine) -> Usage {
    let replay_from = engine.checkpoint_journal_seq();
    let mut files: BTreeMap<u64, FileUse> = BTreeMap::new();
    for file in engine.journal_files.all() {
        let seq = file.seq;
        files.insert(
            seq,
            FileUse {
                seq,
                size: file.file.len().unwrap_or(0),
                live: 0,
                settled: seq < replay_from || seq >= CLEANED_SEQ_BASE,
                holders: Vec::new(),
            },
        );
    }
    let mut segments = Vec::new();
    for partition in engine.partitions_snapshot() {
        if partition.is_deleted() {
            continue;
        }
        let config = partition.config();
        for segment in partition.segments() {
            let expiry_ms = expiry_ms(&config, &segment);
            for (seq, bytes) in segment.bytes_by_file() {
                if let Some(file) = files.get_mut(&seq) {
                    file.live += bytes;
                    file.holders.push(Holder {
                        expiry_ms,
                        bytes,
                        segment: segments.len(),
                    });
                }
            }
            segments.push((Arc::clone(&partition), segment));
        }
    }
    Usage {
        files: files.into_values().collect(),
        segments,
    }
}

/// The time by which at most `max_live_ratio` of the file is live (`i64::MIN`: already);
/// `None` if that never happens by expiry.
fn natural_end_ms(file: &FileUse, max_live_ratio: f64) -> Option<i64> {
    let allowed = (file.size as f64 * max_live_ratio) as u64;
    let mut live = file.live;
    if live <= allowed {
        return Some(i64::MIN);
    }
    let mut holders = file.holders.clone();
    holders.sort_unstable_by_key(|h| h.expiry_ms);
    for h in holders {
        live -= h.bytes;
        if live <= allowed {
            return (h.expiry_ms != i64::MAX).then_some(h.expiry_ms);
        }
    }
    None
}

/// A file to clean: which of its holders outlive it.
#[derive(Debug)]
struct Victim {
    seq: u64,
    natural_end_ms: i64,
    outliving: Vec<usize>,
    outliving_bytes: u64,
}

/// The settled files whose natural end is within the slack of now, with the holders
/// whose bytes outlive it by more than the slack.
fn victims(
    usage: &Usage,
    config: &JournalCleanerConfig,
    now_ms: i64,
    slack_ms: i64,
) -> Vec<Victim> {
    let mut out = Vec::new();
    for file in usage.files.iter().filter(|f| f.settled && f.live > 0) {
        let Some(end) = natural_end_ms(file, config.max_live_ratio) else {
            continue;
        };
        if end > now_ms.saturating_add(slack_ms) {
            continue;
        }
        let threshold = end.max(now_ms).saturating_add(slack_ms);
        let outliving: Vec<&Holder> = file
            .holders
            .iter()
            .filter(|h| h.expiry_ms > threshold)
            .collect();
        if outliving.is_empty() {
            continue;
        }
        out.push(Victim {
            seq: file.seq,
            natural_end_ms: end,
            outliving_bytes: outliving.iter().map(|h| h.bytes).sum(),
            outliving: outliving.iter().map(|h| h.segment).collect(),
        });
    }
    out.sort_unstable_by_key(|v| (v.natural_end_ms, v.seq));
    out
}

/// One pass: choose files, copy what outlives them, switch the segments, retire.
pub(crate) fn clean_once(engine: &Engine, now_ms: i64) -> Result<JournalCleanerPass, LogError> {
    engine.check_writable()?;
    let config = engine.config.journal_cleaner;
    let slack_ms = JournalCleanerConfig::slack_ms(engine.config.retention_check_interval_ms);
    let usage = measure(engine);
    let mut chosen = Vec::new();
    let mut planned = 0u64;
    for victim in victims(&usage, &config, now_ms, slack_ms) {
        assert!(victim.outliving_bytes > 0 && !victim.outliving.is_empty());
        if !chosen.is_empty()
            && planned + victim.outliving_bytes > engine.config.journal_file_bytes_max
        {
            break;
        }
        planned += victim.outliving_bytes;
        chosen.push(victim);
    }
    let mut pass = JournalCleanerPass::default();
    if chosen.is_empty() {
        return Ok(pass);
    }
    // Per segment, the chosen files it must leave (sorted).
    let mut leave: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for victim in &chosen {
        for &segment in &victim.outliving {
            leave.entry(segment).or_default().push(victim.seq);
        }
    }
    let mut output = Output::create(engine)?;
    let mut switches = Vec::new();
    for (index, mut seqs) in leave {
        seqs.sort_unstable();
        seqs.dedup();
        let placed = usage.segments[index].1.persisted_extents_in(&seqs);
        let moves = match output.copy(&placed) {
            Ok(moves) => moves,
            Err(error) => return Err(output.abandon(error)),
        };
        // One move per extent, each the same segment bytes.
        assert_eq!(moves.len(), placed.len());
        if !moves.is_empty() {
            switches.push((index, moves));
        }
    }
    if let Err(error) = output.finish() {
        return Err(output.abandon(error));
    }
    for (index, moves) in switches {
        let (partition, segment) = &usage.segments[index];
        if switch(engine, partition, segment, &moves)? {
            pass.segments_moved += 1;
            pass.bytes_moved += moves.iter().map(|m| m.len).sum::<u64>();
        }
    }
    pass.files_cleaned = chosen.len();
    drop(output);
    record(engine, &pass, &chosen);
    let state = engine.checkpoints.lock();
    let retired = engine.retire_journal_files_before(state.journal);
    drop(state);
    if let Err(error) = retired {
        tracing::warn!(%error, "could not retire the journal files a journal cleaner pass freed; the next checkpoint tries again");
    }
    Ok(pass)
}

fn record(engine: &Engine, pass: &JournalCleanerPass, chosen: &[Victim]) {
    if pass.bytes_moved == 0 {
        // Every chosen segment left the log meanwhile: nothing was moved.
        return;
    }
    Stats::add(&engine.stats.journal_cleaner_passes, 1);
    Stats::add(
        &engine.stats.journal_cleaner_files_cleaned,
        pass.files_cleaned as u64,
    );
    Stats::add(&engine.stats.journal_cleaner_bytes_moved, pass.bytes_moved);
    tracing::debug!(
        files = chosen.len(),
        segments = pass.segments_moved,
        bytes = pass.bytes_moved,
        "journal cleaner moved the bytes that outlive their files"
    );
}

/// Points `segment`'s moved extents at their copies, under the partition's `trim_lock`
/// (so retention, DeleteRecords, the log cleaner's swap and deletion wait). False when the
/// segment left the log meanwhile. A failure before the switch changes nothing and is no
/// poison (only a synced copy nobody names is left); a failed directory sync after it is.
fn switch(
    engine: &Engine,
    partition: &Partition,
    segment: &Arc<Segment>,
    moves: &[Relocation],
) -> Result<bool, LogError> {
    let _trim = partition.trim_lock.lock();
    if partition.is_deleted() || !partition.holds(segment) {
        return Ok(false);
    }
    let fs = engine.fs.as_ref();
    match segment.relocate(fs, moves) {
        Ok(true) => {
            // The moved bytes come from another file now: the read path checks them again.
            segment.forget_verified();
            if !mutated!("journal_cleaner.switch_dir_unsynced") {
                engine.guard(
                    "journal cleaner: partition directory sync",
                    fs.sync_dir(&partition.dir),
                )?;
            }
            Ok(true)
        }
        Ok(false) => Ok(false),
        Err(error) => Err(LogError::Io(error)),
    }
}

/// The pass's new data file. Copies gather in one buffer written out 1 MiB at a time: the
/// bytes that outlive their file are often many small extents (a trickle's single
/// records), and a write per extent would cost more than the copying.
struct Output<'a> {
    engine: &'a Engine,
    file: Arc<JournalFile>,
    /// Bytes written to the file so far; `pending` follows them.
    flushed: u64,
    pending: Vec<u8>,
}

impl<'a> Output<'a> {
    fn create(engine: &'a Engine) -> Result<Self, LogError> {
        let seq = engine.cleaner.allocate_seq();
        let path = engine.journal_dir.join(cleaned_file_name(seq));
        let file = JournalFile::new(seq, engine.fs.open(&path, OpenMode::CreateTruncate)?);
        engine.journal_files.insert(Arc::clone(&file));
        Ok(Self {
            engine,
            file,
            flushed: 0,
            pending: Vec::with_capacity(COPY_BUFFER_BYTES),
        })
    }

    /// Copies `placed` (one segment's extents, in order) to the end of the file, back to
    /// back, so consecutive extents become one.
    fn copy(&mut self, placed: &[Placed]) -> io::Result<Vec<Relocation>> {
        let mut moves = Vec::with_capacity(placed.len());
        for p in placed {
            let to_position = self.flushed + self.pending.len() as u64;
            let mut done = 0u64;
            while done < p.len {
                if self.engine.stopping.load(Ordering::Acquire) {
                    return Err(io::Error::new(
                        io::ErrorKind::Interrupted,
                        "the log is stopping",
                    ));
                }
                if self.pending.len() == COPY_BUFFER_BYTES {
                    self.flush()?;
                }
                let room = (COPY_BUFFER_BYTES - self.pending.len()) as u64;
                let n = (p.len - done).min(room) as usize;
                let at = self.pending.len();
                self.pending.resize(at + n, 0);
                let from = p.file_position + done;
                let read = fs::read_full_at(p.file.file.as_ref(), &mut self.pending[at..], from)?;
                if read < n {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "a data file is shorter than the extents that name it",
                    ));
                }
                done += n as u64;
            }
            // The copy is whole and back to back with the one before it.
            assert_eq!(
                to_position + p.len,
                self.flushed + self.pending.len() as u64
            );
            moves.push(Relocation {
                start: p.start,
                len: p.len,
                from_seq: p.file.seq,
                to: Arc::clone(&self.file),
                to_position,
            });
        }
        Ok(moves)
    }

    /// Writes the gathered copies, then waits for the I/O budget to pay for them (read
    /// and written).
    fn flush(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        fs::write_all_at(self.file.file.as_ref(), &self.pending, self.flushed)?;
        let n = self.pending.len() as u64;
        self.flushed += n;
        self.pending.clear();
        let engine = self.engine;
        let rate = engine.config.journal_cleaner.io_max_bytes_per_second;
        engine
            .journal_cleaner_io
            .charge(2 * n, rate, &engine.stopping);
        Ok(())
    }

    /// Makes the copies durable before anything names them: data, then the directory entry.
    fn finish(&mut self) -> io::Result<()> {
        self.flush()?;
        assert!(
            self.pending.is_empty(),
            "every copy is written before the sync"
        );
        if !mutated!("journal_cleaner.copy_unsynced") {
            self.file.file.sync_data()?;
        }
        if mutated!("journal_cleaner.copy_dir_unsynced") {
            return Ok(());
        }
        self.engine.fs.sync_dir(&self.engine.journal_dir)
    }

    /// Gives the pass up: nothing names the file, so the next retirement deletes it. A
    /// refused write (full disk) is logged as such; either way the log is not poisoned.
    fn abandon(self, error: io::Error) -> LogError {
        let engine = self.engine;
        drop(self);
        crate::cleaner::retire_cleaned_files(engine);
        if fs::is_retryable(&error) {
            return crate::engine::refused("journal cleaner copy", error);
        }
        LogError::Io(error)
    }
}

/// [`DiskUsage`] now (for metrics and DescribeLogDirs): one walk of the segments' per-file
/// summaries, no extent list is read.
pub(crate) fn disk_usage(engine: &Engine) -> DiskUsage {
    let usage = measure(engine);
    let ratio = engine.config.journal_cleaner.max_live_ratio;
    let mut out = DiskUsage::default();
    (out.free_files, out.free_file_bytes) = engine
        .journal_pool
        .usage(engine.fs.as_ref(), &engine.journal_dir);
    // Partitions in segment order (their segments are contiguous in `usage.segments`).
    let mut partition_of = Vec::with_capacity(usage.segments.len());
    for (partition, segment) in &usage.segments {
        let retained = segment.written_len();
        out.retained_bytes += retained;
        match out.partitions.last_mut() {
            Some(last) if last.key == partition.key => last.retained_bytes += retained,
            _ => out.partitions.push(PartitionDiskUsage {
                key: partition.key.clone(),
                retained_bytes: retained,
                file_bytes: 0,
                pinned_bytes: 0,
            }),
        }
        partition_of.push(out.partitions.len() - 1);
    }
    for file in &usage.files {
        if file.seq >= CLEANED_SEQ_BASE {
            out.cleaned_files += 1;
            out.cleaned_file_bytes += file.size;
        } else {
            out.journal_files += 1;
            out.journal_file_bytes += file.size;
        }
        let pinned = file.settled && file.live > 0 && file.live as f64 <= ratio * file.size as f64;
        if pinned {
            out.pinned_files += 1;
            out.pinned_file_bytes += file.size;
        }
        // Holders come in segment order, so one partition's are consecutive.
        let mut last_partition = None;
        for h in &file.holders {
            let p = &mut out.partitions[partition_of[h.segment]];
            if last_partition != Some(partition_of[h.segment]) {
                p.file_bytes += file.size;
                last_partition = Some(partition_of[h.segment]);
            }
            if pinned {
                p.pinned_bytes += h.bytes;
            }
        }
    }
    out
}
