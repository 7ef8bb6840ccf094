//! One segment of a partition: whole batches back to back, stored as extents of the
//! journal (`<base_offset:020>.extents`, see `extents`), with its in-memory
//! [`SegmentIndex`] and, once sealed, its `.index` / `.timeindex` files. Positions are
//! positions in the segment, as if it were one file; only `extents` knows where the bytes
//! physically are.
//!
//! Concurrency contract:
//! - Appends come from one appender at a time (the committer, or recovery before the
//!   threads start), serialized by the partition's append lock. An append reserves its
//!   bytes at `written_len` (indexing the batch) and records where the journal holds them.
//!   Bytes already placed never move.
//! - Readers (fetch threads) may run at any time. They read only below `committed_len`,
//!   which the committer raises after the journal sync that covers the bytes, so a reader
//!   never sees bytes that are not durable.
//! - The checkpointer syncs the file through a shared handle; no lock is held while it does.
//! - Deleted segments stay readable through open handles (the file is only unlinked).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use crate::batch::{self, BatchHeader, HEADER_LEN, MAGIC_V2};
use crate::config::{CHECK_READ_AHEAD_BYTES, DAMAGE_LOG_INTERVAL_MS};
use crate::error::LogError;
use crate::extents::{self, ExtentFile};
use crate::fs::{self, Fs, FsFile, OpenMode};
use crate::index::{BatchMeta, SegmentIndex};
use crate::journal::{JournalFile, JournalFiles};
use crate::log_limit::LogLimit;
use crate::mutation::mutated;
use crate::read_check::{self, VerifiedRanges};
use crate::record_slices::RecordSlice;
use crate::types::Offset;

/// Suffix (after `.extents`) of a cleaned segment's extents file while it is written.
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";

/// Bytes read at a time when a recovery scan checks CRCs (a batch larger than this is
/// read whole).
const SCAN_WINDOW_CRC_BYTES: usize = 1 << 20;
/// Bytes read at a time when a scan only walks headers: one page, so small batches share
/// a read and large ones cost one small read each.
const SCAN_WINDOW_HEADER_BYTES: usize = 4096;
/// `Segment::first_batch_timestamp` not known yet (-1 is Kafka's "no timestamp").
const TIMESTAMP_UNKNOWN: i64 = i64::MIN;
/// Damaged ranges a segment remembers from reads (beyond those recovery found); past it
/// a read finds the damage again (its search is bounded) instead of remembering it.
const DAMAGED_RANGES_FOUND_MAX: usize = 256;
/// New damage a read confines before it gives up and fails (each confinement is a
/// bounded search; a read meets more only on a badly damaged segment).
const CONFINE_PER_READ_MAX: usize = 4;

/// Segment files open in this process (each `Segment` holds its file open until dropped).
static SEGMENT_FILES_OPEN: AtomicUsize = AtomicUsize::new(0);
/// `LogManagerConfig::segment_files_max`, set when a log is opened.
static SEGMENT_FILES_MAX: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Sets the process-wide bound on open segment files (`LogManager::open`).
pub(crate) fn set_segment_files_max(max: usize) {
    SEGMENT_FILES_MAX.store(max, Ordering::Relaxed);
}

/// Segment files open in this process now.
pub(crate) fn segment_files_open() -> usize {
    SEGMENT_FILES_OPEN.load(Ordering::Relaxed)
}

/// The three file paths of a segment.
#[derive(Debug, Clone)]
pub(crate) struct SegmentPaths {
    pub(crate) extents: PathBuf,
    pub(crate) index: PathBuf,
    pub(crate) timeindex: PathBuf,
}

impl SegmentPaths {
    /// `<base>.extents.cleaned`: a cleaned segment's extents while being written.
    pub(crate) fn aside(&self) -> PathBuf {
        let mut name = self.extents.clone().into_os_string();
        name.push(CLEANED_SUFFIX);
        PathBuf::from(name)
    }

    /// `<base>.extents.moved`: the journal cleaner's rewrite of the extent records while
    /// being written (renamed over the extents file once synced).
    pub(crate) fn moved(&self) -> PathBuf {
        let mut name = self.extents.clone().into_os_string();
        name.push(MOVED_SUFFIX);
        PathBuf::from(name)
    }

    pub(crate) fn new(dir: &Path, base_offset: Offset) -> Self {
        let stem = format!("{:020}", base_offset.0);
        Self {
            extents: dir.join(format!("{stem}{}", extents::FILE_SUFFIX)),
            index: dir.join(format!("{stem}.index")),
            timeindex: dir.join(format!("{stem}.timeindex")),
        }
    }
}

/// Suffix of [`SegmentPaths::moved`].
pub(crate) const MOVED_SUFFIX: &str = ".moved";

/// Parses `<base_offset:020>.extents`.
pub(crate) fn parse_segment_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(extents::FILE_SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Offset)
}

#[derive(Debug)]
pub(crate) struct Segment {
    pub(crate) base_offset: Offset,
    pub(crate) paths: SegmentPaths,
    /// The segment's bytes: extents of journal files.
    file: ExtentFile,
    /// Bytes reserved by the appender: written (maybe only to the page cache) once the
    /// commit round that reserved them finished its writes. Raised by the appender only.
    written_len: AtomicU64,
    /// Bytes covered by a journal sync: the readers' limit. Raised by the committer.
    committed_len: AtomicU64,
    /// Offset after the last written batch.
    next_offset: AtomicI64,
    /// Offset after the last committed batch.
    committed_next_offset: AtomicI64,
    /// Wall-clock time of the first append, for `segment.ms`; -1 while empty.
    first_append_ms: AtomicI64,
    /// The first batch's max timestamp (Kafka's `getFirstBatchTimestamp`, which
    /// `max.compaction.lag.ms` is measured from); [`TIMESTAMP_UNKNOWN`] until placed or
    /// read back.
    first_batch_timestamp: AtomicI64,
    index: RwLock<SegmentIndex>,
    /// True while the segment sits in the checkpointer's to-sync list. Read and written only
    /// under the engine's handoff lock, so a write after a checkpoint took the list always
    /// re-adds the segment.
    pub(crate) dirty: AtomicBool,
    /// True once the files are deleted; guards index-file writes that could resurrect them.
    deleted: Mutex<bool>,
    /// Byte ranges found damaged inside this segment, sorted: by recovery (set at open) and
    /// by reads (`confine`, at most [`DAMAGED_RANGES_FOUND_MAX`] more). Reads of their
    /// offsets fail with `Damaged`; walks to offsets past one jump over it.
    damaged: RwLock<Vec<DamagedRange>>,
    /// Whether `damaged` holds anything: the read path's only cost when nothing is damaged.
    has_damage: AtomicBool,
    /// The byte ranges whose batches were read back from the journal files and found
    /// intact (`read_check`): served without another check.
    verified: VerifiedRanges,
    /// One ERROR line per [`DAMAGE_LOG_INTERVAL_MS`] for damage found in this segment (a
    /// consumer retrying a damaged offset finds it again on every fetch).
    damage_log: LogLimit,
}

impl Drop for Segment {
    fn drop(&mut self) {
        SEGMENT_FILES_OPEN.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A damaged stretch of a segment found on open: bytes `[position, resume_position)`,
/// which held offsets `[offset, resume_offset)`. Intact batches resume at
/// `resume_position` (proven by their CRC-32C); `resume_position` is the written length
/// when nothing after the damage could be proven intact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DamagedRange {
    pub(crate) position: u64,
    pub(crate) offset: Offset,
    pub(crate) resume_position: u64,
    pub(crate) resume_offset: Offset,
    pub(crate) why: &'static str,
}

/// What a walk found, or where damage stopped it.
type Walked<T> = Result<T, WalkBreak>;
/// The batch holding a fetch offset: its position, size and the offset after it.
type Located = (u64, usize, Offset);

/// Why a read (one attempt of it) has nothing to serve.
#[derive(Debug)]
enum ReadFail {
    Log(LogError),
    /// The first batch of the read is not intact: `Segment::settle` confines it.
    FirstBad(read_check::BadBatch),
}

impl From<LogError> for ReadFail {
    fn from(e: LogError) -> Self {
        ReadFail::Log(e)
    }
}

impl From<io::Error> for ReadFail {
    fn from(e: io::Error) -> Self {
        ReadFail::Log(LogError::from(e))
    }
}

/// Where a read's header walk met damage: the header at `position` is not a batch that
/// continues the walk, or starts a known damaged range (`known`).
#[derive(Debug, Clone, Copy)]
struct WalkBreak {
    position: u64,
    /// The batch the walk passed just before (position, base offset), if any: the damaged
    /// field may be its length.
    previous: Option<(u64, Offset)>,
    /// The first offset the damage makes unreadable (the offset expected at `position`).
    offset: Offset,
    why: &'static str,
    known: bool,
}

/// How a segment looked after [`Segment::open`] checked it.
#[derive(Debug, Default)]
pub(crate) struct OpenOutcome {
    /// Bytes cut from a torn or corrupt tail (after the trusted part), and why.
    pub(crate) truncated: Option<(u64, &'static str)>,
    /// Damage inside the trusted part (durable before the checkpoint, so media damage, not
    /// a torn write), when the caller asked to keep it. The file is left as it is; the
    /// batches before each range, and those after it that prove intact, are used. A last
    /// range whose `resume_offset` equals its `offset` found nothing intact after it.
    pub(crate) damaged: Vec<DamagedRange>,
    /// The index files were missing or inconsistent and were rebuilt from the segment.
    pub(crate) index_rebuilt: bool,
    /// Bytes that were CRC-checked (the part after the recovery point).
    pub(crate) bytes_verified: u64,
    /// The extents file ended early (a torn append, damage), why.
    pub(crate) extents_cut: Option<&'static str>,
    /// Some bytes the extents name are not in the journal (a file gone or cut), why.
    pub(crate) extents_missing: Option<&'static str>,
}

impl Segment {
    /// Creates an empty segment file (truncating any stale file of that name). Refused with
    /// `EMFILE` when `segment_files_max` files are open already: new segments (a roll, a
    /// new partition) wait for descriptors, segments that exist are always opened.
    pub(crate) fn create(fs: &dyn Fs, dir: &Path, base_offset: Offset) -> io::Result<Self> {
        let (open, max) = (
            segment_files_open(),
            SEGMENT_FILES_MAX.load(Ordering::Relaxed),
        );
        if open >= max {
            tracing::warn!(
                open,
                max,
                "segment file limit reached; the new segment is refused"
            );
            return Err(io::Error::from_raw_os_error(libc::EMFILE));
        }
        let paths = SegmentPaths::new(dir, base_offset);
        for stale in [&paths.index, &paths.timeindex] {
            remove_if_exists(fs, stale)?;
        }
        let file = ExtentFile::create(fs, &paths.extents)?;
        Ok(Self::from_parts(
            paths,
            file,
            base_offset,
            SegmentIndex::new(base_offset),
            0,
            base_offset,
        ))
    }

    fn from_parts(
        paths: SegmentPaths,
        file: ExtentFile,
        base_offset: Offset,
        index: SegmentIndex,
        len: u64,
        next_offset: Offset,
    ) -> Self {
        SEGMENT_FILES_OPEN.fetch_add(1, Ordering::Relaxed);
        Self {
            base_offset,
            paths,
            file,
            written_len: AtomicU64::new(len),
            committed_len: AtomicU64::new(len),
            next_offset: AtomicI64::new(next_offset.0),
            committed_next_offset: AtomicI64::new(next_offset.0),
            first_append_ms: AtomicI64::new(if len > 0 { now_ms() } else { -1 }),
            first_batch_timestamp: AtomicI64::new(TIMESTAMP_UNKNOWN),
            index: RwLock::new(index),
            dirty: AtomicBool::new(false),
            deleted: Mutex::new(false),
            damaged: RwLock::new(Vec::new()),
            has_damage: AtomicBool::new(false),
            verified: VerifiedRanges::default(),
            damage_log: LogLimit::new(DAMAGE_LOG_INTERVAL_MS),
        }
    }

    pub(crate) fn written_len(&self) -> u64 {
        self.written_len.load(Ordering::Acquire)
    }
    pub(crate) fn committed_len(&self) -> u64 {
        self.committed_len.load(Ordering::Acquire)
    }
    pub(crate) fn next_offset(&self) -> Offset {
        Offset(self.next_offset.load(Ordering::Acquire))
    }
    pub(crate) fn committed_next_offset(&self) -> Offset {
        Offset(self.committed_next_offset.load(Ordering::Acquire))
    }
    pub(crate) fn first_append_ms(&self) -> i64 {
        self.first_append_ms.load(Ordering::Acquire)
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.written_len() == 0
    }
    /// The max timestamp of the segment's first batch (`None`: no committed batch, no
    /// timestamp, or its header unreadable). Read from the segment once, then remembered.
    pub(crate) fn first_batch_timestamp(&self) -> Option<i64> {
        let mut known = self.first_batch_timestamp.load(Ordering::Acquire);
        if known == TIMESTAMP_UNKNOWN && self.committed_len() >= HEADER_LEN as u64 {
            let mut head = [0u8; HEADER_LEN];
            let read = self.read_at(&mut head, 0).ok()?;
            known = BatchHeader::parse(&head[..read]).ok()?.max_timestamp();
            self.first_batch_timestamp.store(known, Ordering::Release);
        }
        (known >= 0).then_some(known)
    }
    /// (largest max timestamp, base offset of the first batch holding it).
    pub(crate) fn max_timestamp(&self) -> (i64, Offset) {
        self.index.read().max_timestamp()
    }

    /// Places one batch, stamped with `base_offset` and stored at `file_position` of
    /// `journal`, at the end of the segment and indexes it. Caller: the partition's single
    /// appender, holding the partition's append lock; the bytes are readable once
    /// published. Returns the batch's position in the segment.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn place(
        &self,
        base_offset: Offset,
        header: &BatchHeader<'_>,
        journal: &Arc<JournalFile>,
        file_position: u64,
        size: u64,
        interval_bytes: u32,
        now_ms: i64,
    ) -> u64 {
        let position = self.written_len.load(Ordering::Acquire);
        assert_eq!(base_offset, self.next_offset(), "offsets are consecutive");
        assert!(size >= HEADER_LEN as u64, "a batch is at least its header");
        assert!(
            header.last_offset_delta() >= 0,
            "a batch covers at least one offset"
        );
        let next = Offset(base_offset.0 + i64::from(header.last_offset_delta()) + 1);
        let meta = BatchMeta {
            base_offset,
            position,
            size,
            max_timestamp: header.max_timestamp(),
        };
        self.index.write().on_append(meta, interval_bytes);
        self.file.add(journal, file_position, size);
        self.next_offset.store(next.0, Ordering::Release);
        self.written_len.store(position + size, Ordering::Release);
        if self.first_append_ms.load(Ordering::Acquire) < 0 {
            self.first_append_ms.store(now_ms, Ordering::Release);
        }
        if position == 0 {
            let first = header.max_timestamp();
            self.first_batch_timestamp.store(first, Ordering::Release);
        }
        position
    }

    /// Takes back every reservation from byte `len` (offset `next_offset`) on: a commit
    /// round whose writes were refused is undone. Caller: the appender, holding the append
    /// lock; nothing from `len` on was published.
    ///
    /// Nothing on disk changes, so this needs no space and no sync (on a full disk it must
    /// not: the round was refused for lack of space). The extents file holds records only
    /// of published bytes (the checkpointer persists up to the durable length, which is set
    /// when a round's sync returned), and `len` is at or past them; the round's batches
    /// themselves are in the journal, which the committer cuts back.
    pub(crate) fn undo_to(&self, len: u64, next_offset: Offset) -> io::Result<()> {
        // Only unpublished bytes are taken back, and only backwards.
        assert!(len >= self.committed_len() && len <= self.written_len());
        assert!(next_offset >= self.committed_next_offset() && next_offset <= self.next_offset());
        self.index.write().truncate(len, next_offset);
        self.written_len.store(len, Ordering::Release);
        self.next_offset.store(next_offset.0, Ordering::Release);
        if len == 0 {
            self.first_append_ms.store(-1, Ordering::Release);
            let unknown = TIMESTAMP_UNKNOWN;
            self.first_batch_timestamp.store(unknown, Ordering::Release);
        }
        // Cuts the extent list in memory; a cut of persisted records (which would write)
        // never happens here, since they end at or before the committed length.
        self.file.set_len(len)
    }

    /// Places one stamped batch the journal holds at `file_position` (recovery's replay
    /// and tests). Returns the new length.
    pub(crate) fn append(
        &self,
        bytes: &[u8],
        journal: &Arc<JournalFile>,
        file_position: u64,
        interval_bytes: u32,
        now_ms: i64,
    ) -> io::Result<u64> {
        let header =
            BatchHeader::parse(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let size = bytes.len() as u64;
        let position = self.place(
            header.base_offset(),
            &header,
            journal,
            file_position,
            size,
            interval_bytes,
            now_ms,
        );
        Ok(position + size)
    }

    /// Makes bytes up to `len` (ending at `next_offset`) visible to readers. Called after the
    /// journal sync that covers them; values only grow.
    pub(crate) fn publish(&self, len: u64, next_offset: Offset) {
        // Only placed bytes become visible.
        assert!(len <= self.written_len() && next_offset <= self.next_offset());
        self.file.set_durable(len);
        self.committed_len.fetch_max(len, Ordering::AcqRel);
        self.committed_next_offset
            .fetch_max(next_offset.0, Ordering::AcqRel);
    }

    /// Makes everything written visible (recovery: what is on disk is what there is).
    pub(crate) fn publish_all(&self) {
        self.publish(self.written_len(), self.next_offset());
    }

    /// Persists the extents of the committed bytes not yet on disk (`fdatasync`).
    pub(crate) fn sync(&self) -> io::Result<()> {
        // No mutation point: the callers' (checkpoint, recovery, cleaner).
        self.file.sync_data()
    }

    /// [`Segment::sync`], returning the extent-record bytes it wrote (the checkpointer
    /// counts them in `LogStats::segment_written_bytes`). Nothing for a deleted segment:
    /// its extents are of no use any more, and on a full disk writing them would fail the
    /// checkpoint that is to free space.
    pub(crate) fn sync_counted(&self) -> io::Result<u64> {
        if self.is_deleted() {
            return Ok(0);
        }
        let before = self.file.records_written_bytes();
        // No mutation point: the caller's (`checkpoint.extents_unsynced`).
        self.sync()?;
        Ok(self.file.records_written_bytes().saturating_sub(before))
    }

    /// Adds the final time index entry; the segment takes no more appends.
    pub(crate) fn seal(&self) {
        self.index.write().seal();
    }

    /// Writes the `.index` and `.timeindex` files from memory and fsyncs them; returns the
    /// bytes written. Skipped for a deleted segment, so a late write cannot resurrect its
    /// files.
    pub(crate) fn write_index_files(&self, fs: &dyn Fs) -> io::Result<u64> {
        let deleted = self.deleted.lock();
        if *deleted {
            return Ok(0);
        }
        let mut written = 0;
        let (offsets, times) = {
            let index = self.index.read();
            (index.encode_offsets(), index.encode_times())
        };
        for (path, contents) in [(&self.paths.index, offsets), (&self.paths.timeindex, times)] {
            let file = fs.open(path, OpenMode::CreateTruncate)?;
            fs::write_all_at(file.as_ref(), &contents, 0)?;
            if !mutated!("checkpoint.index_unsynced") {
                file.sync_data()?;
            }
            written += contents.len() as u64;
        }
        Ok(written)
    }

    /// Creates an empty segment whose extents file is written aside, at
    /// [`SegmentPaths::aside`], for the cleaner: once it is complete and synced, the
    /// cleaner renames that file over the segment it replaces (`docs/compaction.md` §4).
    /// Nothing else of the old segment is touched here.
    pub(crate) fn create_aside(fs: &dyn Fs, dir: &Path, base_offset: Offset) -> io::Result<Self> {
        if segment_files_open() >= SEGMENT_FILES_MAX.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(libc::EMFILE));
        }
        let paths = SegmentPaths::new(dir, base_offset);
        let file = ExtentFile::create(fs, &paths.aside())?;
        Ok(Self::from_parts(
            paths,
            file,
            base_offset,
            SegmentIndex::new(base_offset),
            0,
            base_offset,
        ))
    }

    /// Segment bytes per data file, `(seq, bytes)` (the journal cleaner's accounting).
    pub(crate) fn bytes_by_file(&self) -> Vec<(u64, u64)> {
        self.file.bytes_by_file()
    }

    /// The persisted extents whose bytes are in one of the files `seqs` (sorted).
    pub(crate) fn persisted_extents_in(&self, seqs: &[u64]) -> Vec<extents::Placed> {
        self.file.persisted_extents_in(seqs)
    }

    /// Points extents at the journal cleaner's copies of their bytes (see
    /// [`ExtentFile::relocate`]); false when the segment was deleted or its extents
    /// changed since the moves were planned. Caller: the journal cleaner, holding the
    /// partition's `trim_lock`; it syncs the partition directory after a true.
    pub(crate) fn relocate(&self, fs: &dyn Fs, moves: &[extents::Relocation]) -> io::Result<bool> {
        let deleted = self.deleted.lock();
        if *deleted {
            return Ok(false);
        }
        let moved = self.paths.moved();
        let result = self.file.relocate(fs, &self.paths.extents, &moved, moves);
        if !matches!(result, Ok(true)) {
            let _ = remove_if_exists(fs, &moved);
        }
        drop(deleted);
        result
    }

    /// Reads segment bytes at `position` (the cleaner's batch walk); short only at the end.
    pub(crate) fn read_at(&self, buf: &mut [u8], position: u64) -> io::Result<usize> {
        fs::read_full_at(&self.file, buf, position)
    }

    /// Whether every extent record is on disk and synced (the checkpointer is done with
    /// it) and no damage was found in it: only such a segment may be cleaned.
    pub(crate) fn is_settled(&self) -> bool {
        !self.has_damage.load(Ordering::Acquire) && self.file.all_persisted()
    }

    /// Marks the segment as replaced and removes its index files: no index file is
    /// written for it any more (a write in progress finishes first, under the lock).
    pub(crate) fn retire_index_files(&self, fs: &dyn Fs) -> io::Result<()> {
        let mut deleted = self.deleted.lock();
        *deleted = true;
        remove_if_exists(fs, &self.paths.index)?;
        remove_if_exists(fs, &self.paths.timeindex)
    }

    /// Marks the segment's files as gone (its partition directory is being removed), so no
    /// index file is written for it any more.
    pub(crate) fn mark_deleted(&self) {
        *self.deleted.lock() = true;
    }

    /// Whether the segment was deleted (retention, DeleteRecords, a deleted partition).
    pub(crate) fn is_deleted(&self) -> bool {
        *self.deleted.lock()
    }

    /// Unlinks the segment's files. Open handles (readers) keep working.
    pub(crate) fn delete_files(&self, fs: &dyn Fs) -> io::Result<()> {
        let mut deleted = self.deleted.lock();
        *deleted = true;
        for path in [
            &self.paths.index,
            &self.paths.timeindex,
            &self.paths.extents,
        ] {
            remove_if_exists(fs, path)?;
        }
        Ok(())
    }

    /// The error for damage found while reading, reported here ([`Self::report_damage`]).
    fn damaged(&self, offset: Offset, position: u64, why: &'static str) -> LogError {
        self.report_damage(offset, position, why);
        LogError::Damaged { offset, why }
    }

    /// Logs damage found by a read where it is found: at most one line per segment per
    /// [`DAMAGE_LOG_INTERVAL_MS`], with the count of the lines left out (a consumer
    /// retrying a damaged offset finds it on every fetch).
    fn report_damage(&self, offset: Offset, position: u64, why: &'static str) {
        if let Some(suppressed) = self.damage_log.check() {
            tracing::error!(
                segment = %self.paths.extents.display(), position, offset = offset.0, why,
                suppressed,
                "stored data is damaged; reads of these offsets fail (CORRUPT_MESSAGE)"
            );
        }
    }

    /// The damaged range starting at `position`, if any (no lock when none is known).
    fn damaged_at(&self, position: u64) -> Option<DamagedRange> {
        if !self.has_damage.load(Ordering::Acquire) {
            return None;
        }
        self.damaged
            .read()
            .iter()
            .find(|d| d.position == position)
            .copied()
    }

    /// Forgets which ranges were checked (their bytes now come from other files: the
    /// journal cleaner moved them), so the next read checks them again.
    pub(crate) fn forget_verified(&self) {
        self.verified.clear();
    }

    /// Reads the v2 header at `position`, checked for a sane length within `limit`.
    fn header_at(&self, position: u64, limit: u64) -> Result<[u8; HEADER_LEN], LogError> {
        let mut raw = [0u8; HEADER_LEN];
        if position + HEADER_LEN as u64 > limit {
            return Err(self.damaged(
                self.base_offset,
                position,
                "segment ends inside a batch header",
            ));
        }
        let read = fs::read_full_at(&self.file, &mut raw, position)?;
        if read < HEADER_LEN {
            return Err(self.damaged(
                self.base_offset,
                position,
                "segment file shorter than its committed length",
            ));
        }
        Ok(raw)
    }

    fn read_bytes(&self, position: u64, len: usize) -> Result<Bytes, LogError> {
        let buf = fs::read_new(&self.file, len, position)?;
        if buf.len() < len {
            return Err(self.damaged(
                self.base_offset,
                position,
                "segment file shorter than its committed length",
            ));
        }
        Ok(Bytes::from(buf))
    }

    /// Walks committed batch headers from `position`; returns the position and header of the
    /// first batch `stop` accepts, or `None` at the committed end (or at `high_watermark`).
    /// Every header must be a v2 header whose batch lies within the committed bytes and
    /// whose base offset continues the previous batch: a walk never jumps over offsets, so
    /// a damaged length is reported (`Damaged`) instead of silently skipping data.
    fn walk_until(
        &self,
        position: u64,
        high_watermark: Offset,
        stop: impl FnMut(&BatchHeader<'_>) -> bool,
    ) -> Result<Option<(u64, usize)>, LogError> {
        self.walk(position, None, high_watermark, Offset(i64::MIN), stop)?
            .map_err(|b| self.damaged(b.offset, b.position, b.why))
    }

    /// [`Self::walk_until`] from a batch whose base offset is `expected` (when known), that
    /// jumps over a known damaged range whose intact successor holds offsets at or below
    /// `past` (a read of an offset after the damage), and that hands damage back as a
    /// [`WalkBreak`] instead of an error, so the caller can confine it.
    fn walk(
        &self,
        mut position: u64,
        mut expected: Option<Offset>,
        high_watermark: Offset,
        past: Offset,
        mut stop: impl FnMut(&BatchHeader<'_>) -> bool,
    ) -> Result<Walked<Option<(u64, usize)>>, LogError> {
        let limit = self.committed_len();
        let mut previous = None;
        while position < limit {
            if let Some(range) = self.damaged_at(position) {
                if range.resume_offset <= past && range.resume_position > range.position {
                    (position, expected, previous) =
                        (range.resume_position, Some(range.resume_offset), None);
                    continue;
                }
                let (offset, why) = (range.offset, range.why);
                let known = true;
                return Ok(Err(WalkBreak {
                    position,
                    previous,
                    offset,
                    why,
                    known,
                }));
            }
            let mut raw = [0u8; HEADER_LEN];
            let short = position + HEADER_LEN as u64 > limit
                || fs::read_full_at(&self.file, &mut raw, position)? < HEADER_LEN;
            let header = BatchHeader::parse(&raw)?;
            let size = header
                .total_size()
                .filter(|&size| position + size as u64 <= limit);
            let continues = expected.is_none_or(|e| e == header.base_offset());
            let in_segment = header.base_offset() >= self.base_offset
                && header.base_offset() <= header.last_offset();
            let why = match size {
                _ if short => Some("segment ends inside a batch header"),
                None => Some("bad batch length in segment"),
                Some(_) if header.magic() != MAGIC_V2 || !continues || !in_segment => {
                    Some("batch header does not continue the segment")
                }
                Some(_) => None,
            };
            let (Some(size), None) = (size, why) else {
                let offset = expected.unwrap_or(header.base_offset());
                let why = why.unwrap_or("bad batch length in segment");
                let known = false;
                return Ok(Err(WalkBreak {
                    position,
                    previous,
                    offset,
                    why,
                    known,
                }));
            };
            if header.base_offset() >= high_watermark {
                return Ok(Ok(None));
            }
            if stop(&header) {
                return Ok(Ok(Some((position, size))));
            }
            previous = Some((position, header.base_offset()));
            position += size as u64;
            expected = Some(header.next_offset());
        }
        Ok(Ok(None))
    }

    /// The committed batch holding `fetch_offset`, walking from `from` (a position and the
    /// base offset of its batch, when known): its position, size and the offset after it.
    fn locate(
        &self,
        from: (u64, Option<Offset>),
        fetch_offset: Offset,
        high_watermark: Offset,
    ) -> Result<Walked<Option<Located>>, LogError> {
        let (mut base, mut next) = (fetch_offset, fetch_offset);
        let walked = self.walk(from.0, from.1, high_watermark, fetch_offset, |h| {
            base = h.base_offset();
            next = h.next_offset();
            h.last_offset() >= fetch_offset
        })?;
        let found = match walked {
            Ok(found) => found,
            Err(walk_break) => return Ok(Err(walk_break)),
        };
        if found.is_some() && base > fetch_offset {
            return Err(self.damaged(
                fetch_offset,
                from.0,
                "the batch holding this offset is missing",
            ));
        }
        Ok(Ok(found.map(|(at, size)| (at, size, next))))
    }

    /// Where a read of `fetch_offset` starts: the first batch's position, size and next
    /// offset, and the limit no read may reach (the committed length, or the first damaged
    /// range after the start). `None` when no committed batch here reaches `fetch_offset`
    /// or the first batch runs into damage. Damage the walk meets for the first time is
    /// confined ([`Self::confine`]), so offsets after it stay readable.
    fn read_start(
        &self,
        fetch_offset: Offset,
        high_watermark: Offset,
    ) -> Result<Option<(u64, usize, Offset, u64)>, LogError> {
        let entry = self.index.read().lookup(fetch_offset);
        let (mut from, mut confined) = (entry, 0);
        let found = loop {
            let walk_break = match self.locate(from, fetch_offset, high_watermark)? {
                Ok(found) => break found,
                Err(walk_break) => walk_break,
            };
            if !walk_break.known && from.0 > 0 && from == entry {
                // The index files are derived data and only spot-checked on open: when a
                // walk from an entry fails, walk from the start before calling the data
                // damaged.
                if self.damage_log.check().is_some() {
                    tracing::warn!(segment = %self.paths.extents.display(), position = from.0, "index entry does not lead to the batch; walking the segment from its start");
                }
                from = (0, Some(self.base_offset));
                continue;
            }
            if walk_break.known || confined == CONFINE_PER_READ_MAX || !self.confine(&walk_break)? {
                let (offset, why) = (walk_break.offset, walk_break.why);
                return Err(self.damaged(offset, walk_break.position, why));
            }
            confined += 1;
        };
        let Some((start, first_len, next)) = found else {
            return Ok(None);
        };
        // A read never runs into a damaged range: it ends before it.
        let mut limit = self.committed_len();
        if self.has_damage.load(Ordering::Acquire) {
            let damaged = self.damaged.read();
            let after = damaged.iter().map(|d| d.position).filter(|&p| p > start);
            limit = after.fold(limit, u64::min);
        }
        if start + first_len as u64 > limit {
            return Ok(None);
        }
        Ok(Some((start, first_len, next, limit)))
    }

    /// Confines damage a read's walk met for the first time: finds where intact batches
    /// resume after it and remembers the damaged range, so reads of the offsets after it
    /// jump over it instead of failing up to the next index entry. The damaged field may be
    /// the previous batch's length or offset delta (the walk trusted them to get here), so
    /// the range starts at that batch unless its CRC-32C proves it intact. The search is
    /// byte by byte and bounded: it ends at the next index entry after the damage (the
    /// walk's next trusted start), or at the committed end. False when the segment
    /// remembers [`DAMAGED_RANGES_FOUND_MAX`] ranges already.
    fn confine(&self, walk_break: &WalkBreak) -> Result<bool, LogError> {
        if self.damaged.read().len() >= DAMAGED_RANGES_FOUND_MAX {
            return Ok(false);
        }
        let (from, offset) = match walk_break.previous {
            Some((at, base))
                if read_check::check_batches(&self.file, at, walk_break.position)?.is_some() =>
            {
                (at, base)
            }
            _ => (walk_break.position, walk_break.offset),
        };
        let committed = (self.committed_len(), self.committed_next_offset());
        let (search_to, below) = match self.index.read().entry_after(from) {
            Some((position, entry_offset)) if entry_offset > offset => (position, entry_offset),
            _ => committed,
        };
        let after = Offset(offset.0.saturating_add(1));
        let (resume_position, resume_offset) =
            read_check::find_intact(&self.file, from + 1, search_to, committed.0, after, below)?
                .unwrap_or((search_to, below));
        let range = DamagedRange {
            position: from,
            offset,
            resume_position,
            resume_offset,
            why: walk_break.why,
        };
        if self.damage_log.check().is_some() {
            tracing::error!(
                segment = %self.paths.extents.display(), position = from, offset = offset.0,
                resume_offset = resume_offset.0, why = walk_break.why,
                "stored data is damaged; its offsets fail (CORRUPT_MESSAGE), the batches after it are served"
            );
        }
        let mut damaged = self.damaged.write();
        if let Err(at) = damaged.binary_search_by_key(&from, |d| d.position) {
            damaged.insert(at, range);
        }
        self.has_damage.store(true, Ordering::Release);
        Ok(true)
    }

    /// Whole committed batches starting with the one that contains `fetch_offset`, at most
    /// `max_bytes` (or exactly the first batch when it alone is larger and `min_one_batch`).
    /// `None` when no committed batch here reaches `fetch_offset`.
    pub(crate) fn read(
        &self,
        fetch_offset: Offset,
        high_watermark: Offset,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<Option<Bytes>, LogError> {
        self.settle(|| self.read_once(fetch_offset, high_watermark, max_bytes, min_one_batch))
    }

    /// Runs a read; when its first batch fails its check, confines that damage and runs it
    /// once more: the batch's offsets then fail as a known damaged range, and an offset
    /// the damaged header claimed but an intact batch after it holds is served from there.
    fn settle<T>(&self, mut read: impl FnMut() -> Result<T, ReadFail>) -> Result<T, LogError> {
        let bad = match read() {
            Ok(found) => return Ok(found),
            Err(ReadFail::Log(e)) => return Err(e),
            Err(ReadFail::FirstBad(bad)) => bad,
        };
        let walk_break = WalkBreak {
            position: bad.position,
            previous: None,
            offset: bad.base_offset,
            why: bad.why,
            known: false,
        };
        if !self.confine(&walk_break)? {
            return Err(self.damaged(bad.base_offset, bad.position, bad.why));
        }
        match read() {
            Ok(found) => Ok(found),
            Err(ReadFail::Log(e)) => Err(e),
            Err(ReadFail::FirstBad(bad)) => {
                Err(self.damaged(bad.base_offset, bad.position, bad.why))
            }
        }
    }

    fn read_once(
        &self,
        fetch_offset: Offset,
        high_watermark: Offset,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<Option<Bytes>, ReadFail> {
        let Some((start, first_len, _, limit)) = self.read_start(fetch_offset, high_watermark)?
        else {
            return Ok(None);
        };
        let budget = (max_bytes as u64).min(limit - start);
        if (first_len as u64) > budget {
            return match min_one_batch {
                true => {
                    let batch = self.read_bytes(start, first_len)?;
                    self.intact_prefix(batch, start).map(Some)
                }
                false => Ok(Some(Bytes::new())),
            };
        }
        let chunk = self.read_bytes(start, budget as usize)?;
        let whole = whole_batches_len(&chunk, high_watermark);
        self.intact_prefix(chunk.slice(..whole), start).map(Some)
    }

    /// `batches` (read at segment position `start`) up to the first batch that fails its
    /// CRC-32C or its checks (reported), or the error when that is the first. A batch
    /// whose length was the damaged field fails too, so the batches served never depend
    /// on a damaged length.
    fn intact_prefix(&self, batches: Bytes, start: u64) -> Result<Bytes, ReadFail> {
        let mut at = 0;
        while let Some(len) = batch::batch_len_within(&batches[at..]) {
            if batch::validate_stored(&batches[at..at + len]).is_err() {
                let base_offset = BatchHeader::parse(&batches[at..])
                    .map_or(self.base_offset, |h| h.base_offset());
                let (position, why) = (start + at as u64, "batch fails its CRC-32C");
                if at == 0 {
                    let bad = read_check::BadBatch {
                        position,
                        base_offset,
                        why,
                    };
                    return Err(ReadFail::FirstBad(bad));
                }
                self.report_damage(base_offset, position, why);
                break;
            }
            at += len;
        }
        Ok(batches.slice(..at))
    }

    /// [`Segment::read`] as slices of the journal files (appended to `out`) instead of
    /// bytes: the same batches, found by walking their headers (one small read per batch)
    /// instead of reading them. Returns the bytes appended, `None` where `read` returns
    /// `None`. Where the walk meets a header that does not continue the previous batch (a
    /// sign of damage, which `read` judges by the bytes and batch CRC), this read is done
    /// by `read` and appended as bytes, so both give the same answer.
    pub(crate) fn read_ranges(
        &self,
        fetch_offset: Offset,
        high_watermark: Offset,
        max_bytes: u32,
        min_one_batch: bool,
        out: &mut Vec<RecordSlice>,
    ) -> Result<Option<(usize, Offset)>, LogError> {
        self.settle(|| {
            self.read_ranges_once(fetch_offset, high_watermark, max_bytes, min_one_batch, out)
        })
    }

    fn read_ranges_once(
        &self,
        fetch_offset: Offset,
        high_watermark: Offset,
        max_bytes: u32,
        min_one_batch: bool,
        out: &mut Vec<RecordSlice>,
    ) -> Result<Option<(usize, Offset)>, ReadFail> {
        let Some((start, first_len, next, limit)) =
            self.read_start(fetch_offset, high_watermark)?
        else {
            return Ok(None);
        };
        let budget = (max_bytes as u64).min(limit - start);
        let (whole, end_offset) = if (first_len as u64) > budget {
            if !min_one_batch {
                return Ok(Some((0, fetch_offset)));
            }
            (first_len as u64, next)
        } else {
            let end = start + budget;
            match self.whole_batches_end(start + first_len as u64, next, end, high_watermark)? {
                Some((whole_end, end_offset)) => (whole_end - start, end_offset),
                None => {
                    let bytes =
                        self.read(fetch_offset, high_watermark, max_bytes, min_one_batch)?;
                    let len = bytes.as_ref().map_or(0, Bytes::len);
                    let end_offset = bytes
                        .as_ref()
                        .and_then(last_next_offset)
                        .unwrap_or(fetch_offset);
                    if len > 0 {
                        out.extend(bytes.map(RecordSlice::Bytes));
                    }
                    return Ok(Some((len, end_offset)));
                }
            }
        };
        // Whole batches only, inside what is committed: a fetch never hands out a partial
        // batch or bytes past the high watermark's position.
        assert!(whole >= first_len as u64 && start + whole <= limit);
        let first = out.len();
        self.file
            .slices(start, start + whole, out)
            .map_err(|e| match e.kind() {
                io::ErrorKind::UnexpectedEof => self.damaged(
                    fetch_offset,
                    start,
                    "segment file shorter than its committed length",
                ),
                _ => LogError::from(e),
            })?;
        match self.check_slices(start, &out[first..]) {
            Ok(None) => Ok(Some((whole as usize, end_offset))),
            Ok(Some(bad)) if bad.position > start => {
                // Serve the intact batches before it; the next fetch starts at it and fails.
                self.report_damage(bad.base_offset, bad.position, bad.why);
                cut_slices(out, first, bad.position - start);
                Ok(Some(((bad.position - start) as usize, bad.base_offset)))
            }
            other => {
                out.truncate(first);
                let mut bad = other?.expect("a damaged batch");
                if bad.base_offset.0 < 0 {
                    bad.base_offset = fetch_offset;
                }
                Err(ReadFail::FirstBad(bad))
            }
        }
    }

    /// Checks the batches of `slices` (segment bytes from `start`) that come from journal
    /// files and were not checked before (`read_check`); returns the first that is not
    /// intact. Bytes from the journal's in-memory tail are the bytes this process wrote
    /// (their CRC was checked when produced) and are not checked. A file range is read into
    /// the page cache first with the stretch of the file after it, as the fetch reader
    /// would before its `sendfile`, so a cold catch-up read still reaches the disk as long
    /// requests; the check then reads it from the cache.
    fn check_slices(
        &self,
        start: u64,
        slices: &[RecordSlice],
    ) -> Result<Option<read_check::BadBatch>, LogError> {
        let (mut position, mut span, mut read_in) = (start, None::<(u64, u64)>, false);
        for slice in slices {
            let end = position + slice.len() as u64;
            let unchecked = match slice {
                RecordSlice::File(range) => {
                    let gap = self.verified.first_gap(position, end);
                    // Once per read: the stretch read ahead covers the ranges after it.
                    if gap.is_some() && !read_in {
                        read_in = true;
                        if let Err(error) = range.make_resident(CHECK_READ_AHEAD_BYTES) {
                            tracing::debug!(%error, "could not read a range in before its check");
                        }
                    }
                    gap.is_some()
                }
                RecordSlice::Bytes(_) => !self.file.bytes_slice_from_tail(position, end - position),
            };
            if unchecked {
                span = Some((span.map_or(position, |s| s.0), end));
            } else if let Some((from, to)) = span.take() {
                if let Some(bad) = self.check_span(from, to)? {
                    return Ok(Some(bad));
                }
            }
            position = end;
        }
        match span {
            Some((from, to)) => self.check_span(from, to),
            None => Ok(None),
        }
    }

    /// Checks the batches of segment bytes `[from, to)` not yet verified, marking them
    /// verified when intact; the first that is not.
    fn check_span(&self, from: u64, to: u64) -> Result<Option<read_check::BadBatch>, LogError> {
        let mut at = from;
        while let Some((gap_from, gap_to)) = self.verified.first_gap(at, to) {
            if let Some(bad) = read_check::check_batches(&self.file, gap_from, gap_to)? {
                self.verified.note(gap_from, bad.position);
                return Ok(Some(bad));
            }
            self.verified.note(gap_from, gap_to);
            at = gap_to;
        }
        Ok(None)
    }

    /// End of the whole batches from `position` (where the batch with base offset
    /// `expected` should start) that lie below `end` and the high watermark, walking their
    /// headers, with the offset after them; `None` when a header that fits below `end` does not continue the sequence
    /// (the caller then reads the bytes and lets the batch CRC decide, as `read` does).
    /// The rules are `whole_batches_len`'s, applied to headers (the batch CRCs are
    /// checked after, by `check_slices`).
    fn whole_batches_end(
        &self,
        mut position: u64,
        mut expected: Offset,
        end: u64,
        high_watermark: Offset,
    ) -> Result<Option<(u64, Offset)>, LogError> {
        let mut raw = [0u8; HEADER_LEN];
        while position + HEADER_LEN as u64 <= end {
            if fs::read_full_at(&self.file, &mut raw, position)? < HEADER_LEN {
                return Ok(None);
            }
            let header = BatchHeader::parse(&raw)?;
            if header.magic() != MAGIC_V2 || header.base_offset() != expected {
                return Ok(None);
            }
            match header.total_size() {
                Some(size) if header.base_offset() < high_watermark => {
                    if position + size as u64 > end {
                        break;
                    }
                    position += size as u64;
                    expected = header.next_offset();
                }
                _ => break,
            }
        }
        Ok(Some((position, expected)))
    }

    /// The first committed batch whose max timestamp is >= `timestamp` and that ends at or
    /// after `log_start`.
    pub(crate) fn find_by_timestamp(
        &self,
        timestamp: i64,
        high_watermark: Offset,
        log_start: Offset,
    ) -> Result<Option<Bytes>, LogError> {
        let start = self.index.read().time_lookup_position(timestamp);
        let found = self.walk_until(start, high_watermark, |h| {
            h.max_timestamp() >= timestamp && h.last_offset() >= log_start
        })?;
        found
            .map(|(position, len)| self.read_bytes(position, len))
            .transpose()
    }

    /// The committed batch holding this segment's largest timestamp (the first such batch).
    pub(crate) fn max_timestamp_batch(
        &self,
        high_watermark: Offset,
    ) -> Result<Option<(i64, Bytes)>, LogError> {
        let (max_timestamp, offset) = self.max_timestamp();
        if offset < high_watermark && offset < self.committed_next_offset() {
            let batch = self.read(offset, high_watermark, 0, true)?;
            return Ok(batch.filter(|b| !b.is_empty()).map(|b| (max_timestamp, b)));
        }
        // The largest timestamp is not committed yet (a race with the committer): find the
        // largest committed one by walking the headers.
        let mut best: Option<(i64, u64, usize)> = None;
        let mut position = 0;
        while let Some((at, len)) = self.walk_until(position, high_watermark, |_| true)? {
            let raw = self.header_at(at, self.committed_len())?;
            let ts = BatchHeader::parse(&raw)?.max_timestamp();
            if best.is_none_or(|(b, _, _)| ts > b) {
                best = Some((ts, at, len));
            }
            position = at + len as u64;
        }
        best.map(|(ts, at, len)| self.read_bytes(at, len).map(|b| (ts, b)))
            .transpose()
    }
}

impl Segment {
    /// Calls `f` with the header of every written batch whose last offset is at or after
    /// `from`, in offset order. Recovery uses it to re-apply producer state; it starts at
    /// the sparse index entry before `from` and reads through a window, so small batches
    /// share a read and large ones cost one small read each.
    /// Each control batch comes with its marker type (read from its record key, a few
    /// bytes after the header), for the transaction state.
    pub(crate) fn walk_batches(
        &self,
        from: Offset,
        mut f: impl FnMut(&BatchHeader<'_>, Option<crate::txn::ControlType>),
    ) -> io::Result<()> {
        let invalid = |why: &'static str| io::Error::new(io::ErrorKind::InvalidData, why);
        let limit = self.written_len();
        let mut position = self.index.read().lookup_position(from);
        let mut scanner = Scanner::new(&self.file);
        while position < limit {
            if let Some(range) = self.damaged_at(position) {
                if range.resume_position <= position {
                    break;
                }
                position = range.resume_position;
                continue;
            }
            let Some(raw) = scanner.bytes(position, HEADER_LEN, limit, SCAN_WINDOW_HEADER_BYTES)?
            else {
                return Err(invalid("segment ends inside a batch header"));
            };
            let mut copy = [0u8; HEADER_LEN];
            copy.copy_from_slice(raw);
            let header = BatchHeader::parse(&copy).map_err(|_| invalid("short batch header"))?;
            let size = header
                .total_size()
                .ok_or_else(|| invalid("bad batch length in segment"))?;
            if header.last_offset() >= from {
                let control = match header.is_control() {
                    false => None,
                    true => {
                        let want = (size - HEADER_LEN).min(crate::txn::CONTROL_KEY_BYTES_MAX);
                        let key_at = position + HEADER_LEN as u64;
                        scanner
                            .bytes(key_at, want, limit, SCAN_WINDOW_HEADER_BYTES)?
                            .and_then(crate::txn::control_type)
                    }
                };
                f(&header, control);
            }
            position += size as u64;
        }
        Ok(())
    }
}

/// Cuts the slices from `out[first]` on to their first `keep` bytes.
fn cut_slices(out: &mut Vec<RecordSlice>, first: usize, keep: u64) {
    let (mut left, mut i) = (keep, first);
    while i < out.len() && left > 0 {
        let len = out[i].len() as u64;
        if len > left {
            out[i] = out[i].prefix(left as usize);
        }
        left = left.saturating_sub(len);
        i += 1;
    }
    out.truncate(i);
}

/// The offset after the last whole batch in `bytes` (batches as `read` returns them).
fn last_next_offset(bytes: &Bytes) -> Option<Offset> {
    let mut next = None;
    for batch in crate::batch::BatchIter::new(bytes.clone()) {
        next = Some(BatchHeader::parse(&batch.ok()?).ok()?.next_offset());
    }
    next
}

/// Length of the prefix of `chunk` made of whole v2 batches below `high_watermark` with
/// consecutive offsets. A batch that breaks the sequence ends the prefix; the next read
/// starts there and reports the damage.
fn whole_batches_len(chunk: &[u8], high_watermark: Offset) -> usize {
    let mut end = 0;
    let mut expected: Option<Offset> = None;
    while let Some(len) = batch::batch_len_within(&chunk[end..]) {
        let Ok(header) = BatchHeader::parse(&chunk[end..]) else {
            break;
        };
        let fits = header.base_offset() < high_watermark
            && header.magic() == MAGIC_V2
            && expected.is_none_or(|e| e == header.base_offset());
        if !fits {
            break;
        }
        expected = Some(header.next_offset());
        end += len;
    }
    end
}

fn remove_if_exists(fs: &dyn Fs, path: &Path) -> io::Result<()> {
    match fs.remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

pub(crate) fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// What a recovery scan does with each batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScanMode {
    /// Trusted (durable before the checkpoint): walk headers to rebuild the index.
    Headers,
    /// After the recovery point: check every batch's CRC-32C and offsets.
    Verify,
}

/// Where a scan ended and, when it ended early, why.
#[derive(Debug)]
struct ScanEnd {
    position: u64,
    next_offset: Offset,
    damage: Option<&'static str>,
}

/// Reads a segment file through a window buffer for a recovery scan.
struct Scanner<'a> {
    file: &'a dyn FsFile,
    window: Vec<u8>,
    window_start: u64,
    /// Offsets of this segment lie below this (the next segment's base, when known): a
    /// batch claiming more is damaged, even where its header walk looks fine.
    offsets_below: Offset,
}

impl<'a> Scanner<'a> {
    fn new(file: &'a dyn FsFile) -> Self {
        Self {
            file,
            window: Vec::new(),
            window_start: 0,
            offsets_below: Offset(i64::MAX),
        }
    }

    /// Bytes `[position, position + len)`, read through the window (`None` past `limit`).
    fn bytes(
        &mut self,
        position: u64,
        len: usize,
        limit: u64,
        window_bytes: usize,
    ) -> io::Result<Option<&[u8]>> {
        if position + len as u64 > limit {
            return Ok(None);
        }
        let window_end = self.window_start + self.window.len() as u64;
        if position < self.window_start || position + len as u64 > window_end {
            let want = (window_bytes.max(len) as u64).min(limit - position) as usize;
            self.window.resize(want, 0);
            let read = fs::read_full_at(self.file, &mut self.window, position)?;
            self.window.truncate(read);
            self.window_start = position;
            if read < len {
                return Ok(None);
            }
        }
        let at = (position - self.window_start) as usize;
        Ok(Some(&self.window[at..at + len]))
    }

    /// Scans batches in `[from, limit)` expecting consecutive offsets from `next_offset`.
    fn scan(
        &mut self,
        mode: ScanMode,
        from: u64,
        limit: u64,
        mut next_offset: Offset,
        index: &mut SegmentIndex,
        interval_bytes: u32,
    ) -> io::Result<ScanEnd> {
        let mut position = from;
        while position < limit {
            match self.check_batch(mode, position, limit, next_offset)? {
                Ok((size, max_timestamp, batch_next)) => {
                    let meta = BatchMeta {
                        base_offset: next_offset,
                        position,
                        size,
                        max_timestamp,
                    };
                    index.on_append(meta, interval_bytes);
                    position += size;
                    next_offset = batch_next;
                }
                Err(why) => {
                    return Ok(ScanEnd {
                        position,
                        next_offset,
                        damage: Some(why),
                    })
                }
            }
        }
        Ok(ScanEnd {
            position,
            next_offset,
            damage: None,
        })
    }

    /// Looks for the first position after `from` where a whole batch proves intact: a v2
    /// header whose base offset lies in `[after, below)`, whose length fits in `limit`,
    /// and whose CRC-32C matches. Byte by byte, so it costs a pass over the damaged
    /// stretch; it runs only when damage was found.
    fn resync(
        &mut self,
        from: u64,
        limit: u64,
        after: Offset,
        below: Offset,
    ) -> io::Result<Option<(u64, Offset)>> {
        let mut position = from;
        while position + HEADER_LEN as u64 <= limit {
            let candidate = match self.bytes(position, HEADER_LEN, limit, SCAN_WINDOW_CRC_BYTES)? {
                Some(raw) => BatchHeader::parse(raw).ok().and_then(|h| {
                    let base = h.base_offset();
                    let plausible = h.magic() == MAGIC_V2
                        && base >= after
                        && h.next_offset() <= below
                        && base <= h.last_offset();
                    h.total_size()
                        .filter(|_| plausible)
                        .map(|size| (size, base))
                }),
                None => None,
            };
            if let Some((size, base)) = candidate {
                if let Some(whole) = self.bytes(position, size, limit, SCAN_WINDOW_CRC_BYTES)? {
                    if batch::validate_stored(whole).is_ok() {
                        return Ok(Some((position, base)));
                    }
                }
            }
            position += 1;
        }
        Ok(None)
    }

    /// Checks the batch at `position`: (size, max timestamp, next offset) or why it is bad.
    #[allow(clippy::type_complexity)]
    fn check_batch(
        &mut self,
        mode: ScanMode,
        position: u64,
        limit: u64,
        expected: Offset,
    ) -> io::Result<Result<(u64, i64, Offset), &'static str>> {
        let window = match mode {
            ScanMode::Headers => SCAN_WINDOW_HEADER_BYTES,
            ScanMode::Verify => SCAN_WINDOW_CRC_BYTES,
        };
        let Some(raw) = self.bytes(position, HEADER_LEN, limit, window)? else {
            return Ok(Err("torn batch header"));
        };
        let header =
            BatchHeader::parse(raw).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let Some(size) = header.total_size() else {
            return Ok(Err("invalid batch length"));
        };
        let (base, next, max_timestamp) = (
            header.base_offset(),
            header.next_offset(),
            header.max_timestamp(),
        );
        if header.magic() != MAGIC_V2 {
            return Ok(Err("bad magic"));
        }
        if base != expected {
            return Ok(Err("batch offset does not follow the previous batch"));
        }
        if next > self.offsets_below || next <= base {
            return Ok(Err("batch offsets run past the next segment"));
        }
        if position + size as u64 > limit {
            return Ok(Err("torn batch"));
        }
        if mode == ScanMode::Verify {
            let Some(whole) = self.bytes(position, size, limit, window)? else {
                return Ok(Err("torn batch"));
            };
            if batch::validate_stored(whole).is_err() {
                return Ok(Err("batch fails CRC-32C or offset checks"));
            }
        }
        Ok(Ok((size as u64, max_timestamp, next)))
    }
}

/// Opens an existing segment for recovery: trusts its first `trusted_len` bytes (walking
/// only headers, or reusing valid index files), CRC-checks the rest, and truncates the file
/// at the first damaged batch after the trusted part (a torn write the journal repairs).
/// Damage inside the trusted part is media damage: with `keep_damaged_trusted` the file is
/// left untouched and only the intact prefix is used (`OpenOutcome::damaged`); otherwise
/// it is cut like a torn tail. Either way the index files are deleted, so the next open
/// scans the segment again and finds the damage again.
#[allow(clippy::too_many_arguments)]
pub(crate) fn open_segment(
    fs: &dyn Fs,
    files: &JournalFiles,
    dir: &Path,
    base_offset: Offset,
    trusted_len: u64,
    interval_bytes: u32,
    keep_damaged_trusted: bool,
    offsets_below: Offset,
) -> io::Result<(Arc<Segment>, OpenOutcome)> {
    let paths = SegmentPaths::new(dir, base_offset);
    let (file, loaded) = ExtentFile::open(fs, &paths.extents, files)?;
    let file_len = file.len()?;
    // Bytes whose journal file is gone or cut can never come back, wherever they are: the
    // whole segment is handled like media damage (scanned, the loss confined and
    // reported on every open), and its index files are not trusted.
    let missing = loaded.missing.is_some();
    let trusted_len = if missing {
        file_len
    } else {
        trusted_len.min(file_len)
    };
    let mut outcome = OpenOutcome {
        extents_cut: loaded.stopped,
        extents_missing: loaded.missing,
        ..OpenOutcome::default()
    };
    let mut scanner = Scanner::new(&file);
    scanner.offsets_below = offsets_below;
    let index_files = match missing {
        true => None,
        false => load_index_files(fs, &paths, base_offset, trusted_len),
    };
    let (mut index, trusted_end) = match index_files {
        Some(loaded) => {
            let (mut index, from, next) = loaded;
            match scanner.scan(
                ScanMode::Headers,
                from,
                trusted_len,
                next,
                &mut index,
                interval_bytes,
            )? {
                end if end.damage.is_none() => (index, end),
                _ => rebuild(
                    &mut scanner,
                    base_offset,
                    trusted_len,
                    interval_bytes,
                    &mut outcome,
                )?,
            }
        }
        None => rebuild(
            &mut scanner,
            base_offset,
            trusted_len,
            interval_bytes,
            &mut outcome,
        )?,
    };
    let damage_in_trusted = trusted_end.damage.is_some();
    // Missing journal bytes may sit inside batches whose headers survived: CRC-check
    // everything, as for media damage found by the header walk.
    let keep = (damage_in_trusted && keep_damaged_trusted) || missing;
    let mut end = match trusted_end.damage {
        // Media damage: a header walk trusts lengths, so the batch before the damage may
        // be the damaged one. Trust nothing here: CRC-check the whole segment.
        _ if keep => {
            index = SegmentIndex::new(base_offset);
            outcome.index_rebuilt = true;
            outcome.bytes_verified = file_len;
            scanner.scan(
                ScanMode::Verify,
                0,
                file_len,
                base_offset,
                &mut index,
                interval_bytes,
            )?
        }
        Some(_) => trusted_end,
        None => {
            outcome.bytes_verified = file_len - trusted_end.position;
            let (from, next) = (trusted_end.position, trusted_end.next_offset);
            scanner.scan(
                ScanMode::Verify,
                from,
                file_len,
                next,
                &mut index,
                interval_bytes,
            )?
        }
    };
    while let (Some(why), true) = (end.damage, keep) {
        // Media damage: keep every batch after it that proves intact.
        let (from, after) = (end.position, end.next_offset);
        let Some((position, offset)) = scanner.resync(from + 1, file_len, after, offsets_below)?
        else {
            outcome.damaged.push(DamagedRange {
                position: from,
                offset: after,
                resume_position: from,
                resume_offset: after,
                why,
            });
            break;
        };
        outcome.damaged.push(DamagedRange {
            position: from,
            offset: after,
            resume_position: position,
            resume_offset: offset,
            why,
        });
        index.force_entry();
        end = scanner.scan(
            ScanMode::Verify,
            position,
            file_len,
            offset,
            &mut index,
            interval_bytes,
        )?;
    }
    drop(scanner);
    if let Some(why) = end.damage {
        if keep {
            // Recorded above; the file stays as it is.
        } else {
            file.set_len(end.position)?;
            outcome.truncated = Some((file_len - end.position, why));
        }
        // The index files may describe the bytes past the damage; they are rewritten when
        // needed (never for a damaged segment kept as it is).
        remove_if_exists(fs, &paths.index)?;
        remove_if_exists(fs, &paths.timeindex)?;
    }
    let mut segment = Segment::from_parts(
        paths,
        file,
        base_offset,
        index,
        end.position,
        end.next_offset,
    );
    segment.has_damage = AtomicBool::new(!outcome.damaged.is_empty());
    segment.damaged.get_mut().clone_from(&outcome.damaged);
    Ok((Arc::new(segment), outcome))
}

/// Scans the trusted part from byte 0 with a fresh index.
fn rebuild(
    scanner: &mut Scanner<'_>,
    base_offset: Offset,
    trusted_len: u64,
    interval_bytes: u32,
    outcome: &mut OpenOutcome,
) -> io::Result<(SegmentIndex, ScanEnd)> {
    outcome.index_rebuilt = true;
    let mut index = SegmentIndex::new(base_offset);
    let end = scanner.scan(
        ScanMode::Headers,
        0,
        trusted_len,
        base_offset,
        &mut index,
        interval_bytes,
    )?;
    Ok((index, end))
}

/// Loads both index files if they exist and are well formed. Returns the index and where a
/// header walk must resume to extend it (the last indexed batch) and that batch's offset.
fn load_index_files(
    fs: &dyn Fs,
    paths: &SegmentPaths,
    base_offset: Offset,
    trusted_len: u64,
) -> Option<(SegmentIndex, u64, Offset)> {
    let offsets = fs::read_file(fs, &paths.index).ok()?;
    let times = fs::read_file(fs, &paths.timeindex).ok()?;
    let mut index = SegmentIndex::decode(base_offset, &offsets, &times, trusted_len)?;
    index.resume_at_last_entry();
    let (position, offset) = match index.last_entry() {
        Some(e) => (
            u64::from(e.position),
            Offset(base_offset.0 + i64::from(e.relative_offset)),
        ),
        None => (0, base_offset),
    };
    Some((index, position, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::batch;
    use crate::fs::StdFs;

    /// A journal file holding `n` stamped two-record batches from offset `base`, followed
    /// by `zeros` zero bytes; returns it and each batch's (bytes, position).
    fn journal_with(
        dir: &Path,
        n: i64,
        base: i64,
        zeros: usize,
    ) -> (Arc<JournalFile>, Vec<(Vec<u8>, u64)>) {
        let file = StdFs
            .open(&dir.join("1.wal"), OpenMode::CreateTruncate)
            .expect("journal");
        let (mut at, mut batches) = (0u64, Vec::new());
        for i in 0..n {
            let mut b = batch(2, 100, 1000 + i);
            batch::stamp_base_offset(&mut b, Offset(base + 2 * i));
            fs::write_all_at(file.as_ref(), &b, at).expect("write");
            let len = b.len() as u64;
            batches.push((b, at));
            at += len;
        }
        fs::write_all_at(file.as_ref(), &vec![0u8; zeros], at).expect("zeros");
        (JournalFile::new(1, file), batches)
    }

    fn append_all(segment: &Segment, journal: &Arc<JournalFile>, batches: &[(Vec<u8>, u64)]) {
        for (b, at) in batches {
            segment.append(b, journal, *at, 256, 1).expect("append");
        }
    }

    #[test]
    fn reads_stop_at_committed_length() {
        // Goal: readers see only published bytes and whole batches within max_bytes.
        let dir = tempfile::tempdir().expect("tempdir");
        let (journal, batches) = journal_with(dir.path(), 5, 0, 0);
        let segment = Segment::create(&StdFs, dir.path(), Offset(0)).expect("create");
        append_all(&segment, &journal, &batches);
        assert!(segment
            .read(Offset(0), Offset(10), 1 << 20, true)
            .expect("read")
            .is_none());
        let one = segment.written_len() / 5;
        segment.publish(one * 3, Offset(6));
        let got = segment
            .read(Offset(1), Offset(6), 1 << 20, true)
            .expect("read")
            .expect("some");
        assert_eq!(got.len() as u64, one * 3);
        assert_eq!(
            &got[..],
            &[&batches[0].0[..], &batches[1].0[..], &batches[2].0[..]].concat()[..]
        );
        let got = segment
            .read(Offset(2), Offset(6), (one + 10) as u32, false)
            .expect("read")
            .expect("some");
        assert_eq!(got.len() as u64, one);
        let got = segment
            .read(Offset(2), Offset(6), 10, false)
            .expect("read")
            .expect("some");
        assert!(got.is_empty());
    }

    #[test]
    fn reopen_rebuilds_index_and_truncates_garbage() {
        // Goal: open_segment rebuilds the index from the extents and cuts a zero-filled
        // tail past the trusted part, durably (the extents file is cut too).
        let dir = tempfile::tempdir().expect("tempdir");
        let (journal, batches) = journal_with(dir.path(), 20, 10, 100);
        let files = JournalFiles::default();
        files.insert(Arc::clone(&journal));
        let segment = Segment::create(&StdFs, dir.path(), Offset(10)).expect("create");
        append_all(&segment, &journal, &batches);
        let len = segment.written_len();
        segment.file.add(&journal, len, 100);
        let expected = segment.index.read().lookup_position(Offset(33));
        segment.file.set_durable(len + 100);
        segment.sync().expect("persist extents");
        drop(segment);
        let open = || {
            open_segment(
                &StdFs,
                &files,
                dir.path(),
                Offset(10),
                0,
                256,
                false,
                Offset(i64::MAX),
            )
            .expect("open")
        };
        let (segment, outcome) = open();
        assert_eq!(outcome.truncated.map(|t| t.0), Some(100));
        assert!(outcome.index_rebuilt);
        assert_eq!(segment.written_len(), len);
        assert_eq!(segment.next_offset(), Offset(50));
        assert_eq!(segment.index.read().lookup_position(Offset(33)), expected);
        segment.sync().expect("sync the cut");
        drop(segment);
        let (segment, outcome) = open();
        assert_eq!(outcome.truncated, None, "the cut was persisted");
        assert_eq!(segment.written_len(), len);
    }
}
