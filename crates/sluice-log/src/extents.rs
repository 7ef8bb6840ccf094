//! A segment's data: an ordered list of extents, byte ranges in journal files, presented
//! to the segment code as one contiguous read-only file ([`ExtentFile`] implements
//! [`FsFile`]). The batches are written once, to the journal; a segment only records where
//! its bytes are.
//!
//! The list is kept in memory and persisted in `<base_offset:020>.extents` in the
//! partition directory, one 32-byte record per extent:
//! `start u64` (position in the segment) · `journal file seq u64` · `position in that file
//! u64` · `length u32` · `crc u32` (CRC-32C of the 28 bytes before it). Records tile the
//! segment from position 0: each starts where the previous one ended.
//!
//! Guarantees:
//! - Only durable bytes are persisted: [`ExtentFile::sync_data`] writes the records of the
//!   bytes below the limit the committer publishes after each journal sync
//!   ([`ExtentFile::set_durable`]), appends them after the records already there, and
//!   `fdatasync`s. A record is never rewritten in place, except by a truncation
//!   ([`FsFile::set_len`]) that cuts records past the cut point: records ending at or
//!   before it are never touched, so a crash during a cut loses nothing before it.
//! - Loading stops at the first record that is short, fails its CRC or does not continue
//!   the previous one; the file is cut there. Bytes a record names that the journal no
//!   longer has (the file is gone, or was cut short) read as zeros, so the segment's own
//!   checks find them damaged and confine the loss, every time the log is opened.
//! - A reader holds the journal file it reads through an `Arc`, so the file cannot be
//!   retired (recycled) under it; no lock is held during I/O. [`ExtentFile::slices`] hands
//!   such `Arc`s out inside `FileRange`s (the fetch path sends them later with
//!   `sendfile`): the file stays pinned for as long as the range lives.

use std::io;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::fs::{self, Fs, FsFile, OpenMode};
use crate::journal::{JournalFile, JournalFiles};
use crate::mutation::mutated;
use crate::record_slices;

pub(crate) const FILE_SUFFIX: &str = ".extents";
const RECORD_LEN: usize = 32;
const RECORD_CHECKED: usize = 28;

/// One byte range of the segment, stored in a journal file.
#[derive(Debug, Clone)]
struct Extent {
    /// Position of the first byte in the segment.
    start: u64,
    seq: u64,
    /// `None` when the journal file is gone or was cut before these bytes (media damage,
    /// found on open): they read as zeros, which the segment's checks report as damage.
    file: Option<Arc<JournalFile>>,
    file_position: u64,
    len: u64,
}

impl Extent {
    fn end(&self) -> u64 {
        self.start + self.len
    }
}

/// A record as stored: the extent without its file handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Record {
    start: u64,
    seq: u64,
    file_position: u64,
    len: u32,
}

impl Record {
    fn encode(&self) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        out[..8].copy_from_slice(&self.start.to_be_bytes());
        out[8..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..24].copy_from_slice(&self.file_position.to_be_bytes());
        out[24..28].copy_from_slice(&self.len.to_be_bytes());
        let crc = crc32c::crc32c(&out[..RECORD_CHECKED]);
        out[28..].copy_from_slice(&crc.to_be_bytes());
        out
    }

    fn decode(raw: &[u8]) -> Option<Self> {
        let raw: &[u8; RECORD_LEN] = raw.try_into().ok()?;
        let crc = u32::from_be_bytes([raw[28], raw[29], raw[30], raw[31]]);
        if crc32c::crc32c(&raw[..RECORD_CHECKED]) != crc {
            return None;
        }
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&raw[at..at + 8]);
            u64::from_be_bytes(b)
        };
        Some(Self {
            start: u64_at(0),
            seq: u64_at(8),
            file_position: u64_at(16),
            len: u32::from_be_bytes([raw[24], raw[25], raw[26], raw[27]]),
        })
    }
}

/// What is on disk already, and the file it is in (replaced by a relocation, which
/// renames a rewritten file over it).
#[derive(Debug)]
struct Persisted {
    file: Box<dyn FsFile>,
    records: u64,
    /// Segment bytes the records cover.
    len: u64,
    /// A cut changed the file since its last sync.
    unsynced: bool,
    /// Record bytes written by this handle since it was opened.
    written_bytes: u64,
}

/// How loading an extents file went.
#[derive(Debug, Default)]
pub(crate) struct LoadOutcome {
    /// Why loading stopped before the end of the file, if it did (the file is cut there).
    pub(crate) stopped: Option<&'static str>,
    /// Why some bytes the records name are not in the journal, if some are not.
    pub(crate) missing: Option<&'static str>,
}

#[derive(Debug)]
pub(crate) struct ExtentFile {
    extents: RwLock<Vec<Extent>>,
    /// Segment bytes per data file, `(seq, bytes)`: what the journal cleaner weighs.
    /// Updated with `extents` (taken after its lock), so the two always agree.
    by_file: Mutex<Vec<(u64, u64)>>,
    len: AtomicU64,
    /// Bytes covered by a journal sync: what `sync_data` may persist.
    durable: AtomicU64,
    persisted: Mutex<Persisted>,
}

impl ExtentFile {
    /// A new, empty extents file at `path` (an existing one is truncated).
    pub(crate) fn create(fs: &dyn Fs, path: &Path) -> io::Result<Self> {
        let file = fs.open(path, OpenMode::CreateTruncate)?;
        let persisted = Persisted {
            file,
            records: 0,
            len: 0,
            unsynced: false,
            written_bytes: 0,
        };
        Ok(Self::from_parts(Vec::new(), persisted))
    }

    fn from_parts(extents: Vec<Extent>, persisted: Persisted) -> Self {
        let len = extents.last().map_or(0, Extent::end);
        Self {
            by_file: Mutex::new(bytes_by_file(&extents)),
            extents: RwLock::new(extents),
            len: AtomicU64::new(len),
            durable: AtomicU64::new(len),
            persisted: Mutex::new(persisted),
        }
    }

    /// Loads `path`, resolving journal files through `files`. The valid prefix is used and
    /// the file is cut after it (a torn append, or damage: the caller sees a shorter
    /// segment and treats it as such).
    pub(crate) fn open(
        fs: &dyn Fs,
        path: &Path,
        files: &JournalFiles,
    ) -> io::Result<(Self, LoadOutcome)> {
        let file = fs.open(path, OpenMode::Existing)?;
        let raw = fs::read_whole(file.as_ref())?;
        let mut outcome = LoadOutcome::default();
        let mut extents: Vec<Extent> = Vec::with_capacity(raw.len() / RECORD_LEN);
        let mut end = 0u64;
        // Journal file lengths, looked up once per file.
        let mut lengths: Vec<(u64, u64)> = Vec::new();
        let mut records = 0u64;
        for chunk in raw.chunks(RECORD_LEN) {
            let Some(record) = Record::decode(chunk) else {
                outcome.stopped = Some(match chunk.len() {
                    RECORD_LEN => "extent record fails its CRC",
                    _ => "extent record is torn",
                });
                break;
            };
            if record.start != end || record.len == 0 {
                outcome.stopped = Some("extent record does not continue the previous one");
                break;
            }
            let journal = files.get(record.seq);
            let available = match &journal {
                Some(journal) => {
                    let journal_len = match lengths.iter().find(|(seq, _)| *seq == record.seq) {
                        Some(&(_, len)) => len,
                        None => {
                            let len = journal.file.len()?;
                            lengths.push((record.seq, len));
                            len
                        }
                    };
                    journal_len.saturating_sub(record.file_position)
                }
                None => 0,
            };
            let len = u64::from(record.len);
            let present = len.min(available);
            if present < len {
                // The record stays as it is on disk, so every open finds the loss again.
                outcome.missing.get_or_insert(match journal {
                    Some(_) => "extent runs past the end of its journal file",
                    None => "extent points into a journal file that is missing",
                });
            }
            if present > 0 {
                extents.push(Extent {
                    start: record.start,
                    seq: record.seq,
                    file: journal,
                    file_position: record.file_position,
                    len: present,
                });
            }
            if present < len {
                extents.push(Extent {
                    start: record.start + present,
                    seq: record.seq,
                    file: None,
                    file_position: record.file_position + present,
                    len: len - present,
                });
            }
            end += len;
            records += 1;
        }
        let cut = raw.len() as u64 > records * RECORD_LEN as u64;
        if cut {
            file.set_len(records * RECORD_LEN as u64)?;
        }
        let persisted = Persisted {
            file,
            records,
            len: end,
            unsynced: cut,
            written_bytes: 0,
        };
        Ok((Self::from_parts(extents, persisted), outcome))
    }

    /// Appends `len` bytes stored at `file_position` of `journal` to the segment. Caller:
    /// the partition's single appender. Contiguous bytes of the same file extend the last
    /// extent.
    pub(crate) fn add(&self, journal: &Arc<JournalFile>, file_position: u64, len: u64) {
        assert!(len > 0 && len <= u64::from(u32::MAX));
        let mut extents = self.extents.write();
        let start = self.len.load(Ordering::Acquire);
        match extents.last_mut() {
            Some(last)
                if last.file.as_ref().is_some_and(|f| Arc::ptr_eq(f, journal))
                    && last.file_position + last.len == file_position
                    && last.len + len <= u64::from(u32::MAX) =>
            {
                last.len += len;
            }
            _ => extents.push(Extent {
                start,
                seq: journal.seq,
                file: Some(Arc::clone(journal)),
                file_position,
                len,
            }),
        }
        add_bytes(&mut self.by_file.lock(), journal.seq, len);
        self.len.store(start + len, Ordering::Release);
    }

    /// Segment bytes per data file, `(seq, bytes)`, in no particular order.
    pub(crate) fn bytes_by_file(&self) -> Vec<(u64, u64)> {
        self.by_file.lock().clone()
    }

    /// Bytes below `len` are covered by a journal sync (values only grow).
    pub(crate) fn set_durable(&self, len: u64) {
        self.durable.fetch_max(len, Ordering::AcqRel);
    }

    /// Journal files this segment refers to.
    #[cfg(test)]
    pub(crate) fn journal_seqs(&self) -> Vec<u64> {
        let mut seqs: Vec<u64> = self.extents.read().iter().map(|e| e.seq).collect();
        seqs.dedup();
        seqs
    }

    /// The records for segment bytes `[from, to)`.
    fn records_between(&self, from: u64, to: u64) -> Vec<Record> {
        records_of(&self.extents.read(), from, to)
    }

    /// Cuts the records on disk back to `len`: records ending at or before it stay as they
    /// are, the one holding it is replaced by its part below `len`.
    fn cut_persisted(&self, persisted: &mut Persisted, len: u64) -> io::Result<()> {
        let raw = fs::read_whole(persisted.file.as_ref())?;
        let mut keep = 0u64;
        let mut kept_len = 0u64;
        for r in valid_records(&raw) {
            if r.start != kept_len || kept_len + u64::from(r.len) > len {
                break;
            }
            keep += 1;
            kept_len += u64::from(r.len);
        }
        persisted.file.set_len(keep * RECORD_LEN as u64)?;
        let tail = self.records_between(kept_len, len);
        write_records(persisted.file.as_ref(), keep, &tail)?;
        persisted.records = keep + tail.len() as u64;
        persisted.len = len;
        persisted.unsynced = true;
        Ok(())
    }
}

/// Writes `records` into `file` from record slot `slot` on.
fn write_records(file: &dyn FsFile, slot: u64, records: &[Record]) -> io::Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let mut buf = Vec::with_capacity(records.len() * RECORD_LEN);
    for record in records {
        buf.extend_from_slice(&record.encode());
    }
    fs::write_all_at(file, &buf, slot * RECORD_LEN as u64)
}

/// The records for segment bytes `[from, to)` of `extents`.
fn records_of(extents: &[Extent], from: u64, to: u64) -> Vec<Record> {
    let first = extents.partition_point(|e| e.end() <= from);
    extents[first..]
        .iter()
        .take_while(|e| e.start < to)
        .map(|e| {
            let start = e.start.max(from);
            let end = e.end().min(to);
            Record {
                start,
                seq: e.seq,
                file_position: e.file_position + (start - e.start),
                len: (end - start) as u32,
            }
        })
        .collect()
}

/// Adds `len` bytes of file `seq` to a per-file summary.
fn add_bytes(by_file: &mut Vec<(u64, u64)>, seq: u64, len: u64) {
    match by_file.iter_mut().rev().find(|(s, _)| *s == seq) {
        Some((_, bytes)) => *bytes += len,
        None => by_file.push((seq, len)),
    }
}

/// The per-file summary of `extents` (bytes of no file, lost to damage, are not counted).
fn bytes_by_file(extents: &[Extent]) -> Vec<(u64, u64)> {
    let mut by_file = Vec::new();
    for e in extents.iter().filter(|e| e.file.is_some()) {
        add_bytes(&mut by_file, e.seq, e.len);
    }
    by_file
}

impl ExtentFile {
    /// Bytes of extent records written to the file so far (for the segment-bytes counter;
    /// a cut does not take them back).
    pub(crate) fn records_written_bytes(&self) -> u64 {
        self.persisted.lock().written_bytes
    }

    /// Whether every byte of the segment has its extent records on disk, synced.
    pub(crate) fn all_persisted(&self) -> bool {
        let persisted = self.persisted.lock();
        persisted.len == self.len.load(Ordering::Acquire) && !persisted.unsynced
    }
}

/// The valid prefix of an extents file's records (see [`ExtentFile::open`] for the checks
/// that also need the journal files).
fn valid_records(raw: &[u8]) -> impl Iterator<Item = Record> + '_ {
    raw.chunks(RECORD_LEN).map_while(Record::decode)
}

/// The journal files an extents file names (its valid prefix), without opening them:
/// recovery pins them for partitions it cannot load.
pub(crate) fn referenced_seqs(fs: &dyn Fs, path: &Path) -> io::Result<Vec<u64>> {
    let raw = fs::read_file(fs, path)?;
    let mut seqs: Vec<u64> = valid_records(&raw).map(|r| r.seq).collect();
    seqs.sort_unstable();
    seqs.dedup();
    Ok(seqs)
}

impl ExtentFile {
    /// The journal file (if present), file position and bytes left in the extent holding
    /// segment position `offset`; `None` past the end.
    fn locate(&self, offset: u64) -> Option<(Option<Arc<JournalFile>>, u64, usize)> {
        let extents = self.extents.read();
        let at = extents.partition_point(|e| e.start <= offset);
        let extent = &extents[at.checked_sub(1)?];
        if offset >= extent.end() {
            return None;
        }
        let delta = offset - extent.start;
        let available = usize::try_from(extent.len - delta).unwrap_or(usize::MAX);
        Some((extent.file.clone(), extent.file_position + delta, available))
    }
}

impl ExtentFile {
    /// Appends the slices of segment bytes `[from, to)` to `out`: ranges of the journal
    /// files that hold them, each pinning its file, or bytes read into memory where there
    /// is no file with a descriptor (zeros for a lost file, `SimFs`). The list lock is held
    /// only to clone the handles; reads happen after it. Bytes past the end are an error.
    pub(crate) fn slices(
        &self,
        from: u64,
        to: u64,
        out: &mut Vec<record_slices::RecordSlice>,
    ) -> io::Result<()> {
        // (index in `out`, segment position, length) of slices that need a read.
        let mut to_read: Vec<(usize, u64, u32)> = Vec::new();
        let mut covered = from;
        {
            let extents = self.extents.read();
            let first = extents.partition_point(|e| e.end() <= from);
            for e in extents[first..].iter().take_while(|e| e.start < to) {
                let start = e.start.max(from);
                let end = e.end().min(to);
                assert_eq!(start, covered, "extents tile the segment");
                let len = (end - start) as u32;
                let position = e.file_position + (start - e.start);
                match e.file.as_ref().and_then(|f| sendable(f, position, len)) {
                    Some(slice) => out.push(slice),
                    None => {
                        to_read.push((out.len(), start, len));
                        out.push(record_slices::RecordSlice::Bytes(bytes::Bytes::new()));
                    }
                }
                covered = end;
            }
        }
        if covered < to {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment shorter than its committed length",
            ));
        }
        for (at, start, len) in to_read {
            let buf = fs::read_new(self, len as usize, start)?;
            if buf.len() < len as usize {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "segment shorter than its committed length",
                ));
            }
            out[at] = record_slices::RecordSlice::Bytes(bytes::Bytes::from(buf));
        }
        Ok(())
    }
}

/// One extent the journal cleaner moved: segment bytes `[start, start + len)`, stored in
/// file `from_seq`, now also at `to_position` of `to`.
#[derive(Debug, Clone)]
pub(crate) struct Relocation {
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) from_seq: u64,
    pub(crate) to: Arc<JournalFile>,
    pub(crate) to_position: u64,
}

/// A persisted extent: segment bytes `[start, start + len)` at `file_position` of `file`.
#[derive(Debug, Clone)]
pub(crate) struct Placed {
    pub(crate) start: u64,
    pub(crate) len: u64,
    pub(crate) file: Arc<JournalFile>,
    pub(crate) file_position: u64,
}

impl ExtentFile {
    /// The extents whose records are on disk and whose bytes are in one of the files
    /// `seqs` (sorted), in segment order.
    pub(crate) fn persisted_extents_in(&self, seqs: &[u64]) -> Vec<Placed> {
        let persisted_len = self.persisted.lock().len;
        let extents = self.extents.read();
        extents
            .iter()
            .take_while(|e| e.end() <= persisted_len)
            .filter(|e| seqs.binary_search(&e.seq).is_ok())
            .filter_map(|e| {
                Some(Placed {
                    start: e.start,
                    len: e.len,
                    file: Arc::clone(e.file.as_ref()?),
                    file_position: e.file_position,
                })
            })
            .collect()
    }

    /// Points the extents `moves` (sorted by `start`, each one whole extent below the
    /// persisted length) at their copies: the records are rewritten into `aside`, synced
    /// and renamed over `path` (the switch; the caller syncs the directory); then memory
    /// follows, and adjacent extents of one file are merged. False, with nothing changed,
    /// when the list no longer holds the moves as they were planned; an error means
    /// nothing was switched either. The records on disk describe the
    /// same bytes at the same positions before and after, so a crash at any step leaves a
    /// valid segment, provided both the old and the new data files are still there (the
    /// caller retires the old ones only after this returns).
    pub(crate) fn relocate(
        &self,
        fs: &dyn Fs,
        path: &Path,
        aside: &Path,
        moves: &[Relocation],
    ) -> io::Result<bool> {
        let mut persisted = self.persisted.lock();
        if moves.iter().any(|m| m.start + m.len > persisted.len) {
            return Ok(false);
        }
        let Some(planned) = relocated(&self.extents.read(), moves) else {
            return Ok(false);
        };
        let records = records_of(&planned, 0, persisted.len);
        let file = fs.open(aside, OpenMode::CreateTruncate)?;
        write_records(file.as_ref(), 0, &records)?;
        if !mutated!("journal_cleaner.moved_unsynced") {
            file.sync_data()?;
        }
        fs.rename(aside, path)?;
        // From here the new file is the segment's: appends must go to it whatever happens.
        {
            let mut extents = self.extents.write();
            let list = relocated(&extents, moves)
                .expect("extents below the persisted length change only under its lock");
            *self.by_file.lock() = bytes_by_file(&list);
            *extents = list;
        }
        persisted.file = file;
        persisted.records = records.len() as u64;
        persisted.unsynced = false;
        persisted.written_bytes += (records.len() * RECORD_LEN) as u64;
        Ok(true)
    }
}

/// `extents` with `moves` applied and adjacent extents of one file merged; `None` when a
/// move does not match an extent exactly (start, length, file).
fn relocated(extents: &[Extent], moves: &[Relocation]) -> Option<Vec<Extent>> {
    let out = relocated_unchecked(extents, moves)?;
    // The same segment bytes at the same positions, only read from elsewhere: the list
    // still starts where it did and covers as many bytes (the journal cleaner's guarantee).
    let total = |list: &[Extent]| list.iter().map(|e| e.len).sum::<u64>();
    assert_eq!(
        out.first().map(|e| e.start),
        extents.first().map(|e| e.start)
    );
    assert_eq!(total(&out), total(extents), "a relocation keeps every byte");
    Some(out)
}

fn relocated_unchecked(extents: &[Extent], moves: &[Relocation]) -> Option<Vec<Extent>> {
    let mut out: Vec<Extent> = Vec::with_capacity(extents.len());
    let mut moves = moves.iter().peekable();
    for e in extents {
        let mut e = e.clone();
        if let Some(m) = moves.next_if(|m| m.start <= e.start) {
            if m.start != e.start || m.len != e.len || m.from_seq != e.seq {
                return None;
            }
            e.seq = m.to.seq;
            e.file = Some(Arc::clone(&m.to));
            e.file_position = m.to_position;
        }
        match out.last_mut() {
            Some(last) if continues(last, &e) => last.len += e.len,
            _ => out.push(e),
        }
    }
    moves.peek().is_none().then_some(out)
}

/// Whether `next` continues `last` in the same file (so the two can be one extent).
fn continues(last: &Extent, next: &Extent) -> bool {
    let same_file = match (&last.file, &next.file) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    };
    same_file
        && last.end() == next.start
        && last.file_position + last.len == next.file_position
        && last.len + next.len <= u64::from(u32::MAX)
}

impl ExtentFile {
    /// Whether segment bytes `[from, from + len)`, which [`Self::slices`] handed out as
    /// bytes in memory, are the journal's in-memory tail (the bytes as this process wrote
    /// them) rather than bytes read from a file: a file with a descriptor is sent as a
    /// range unless the tail holds the bytes, and a lost one (none) is never the tail.
    pub(crate) fn bytes_slice_from_tail(&self, from: u64, len: u64) -> bool {
        let Some((Some(journal), position, available)) = self.locate(from) else {
            return false;
        };
        let Ok(len) = u32::try_from(len) else {
            return false;
        };
        available >= len as usize
            && (journal.file.raw_fd().is_some() || journal.tail_slice(position, len).is_some())
    }
}

/// Segment bytes an extents file describes (its valid prefix), for reports.
pub(crate) fn stored_len(fs: &dyn Fs, path: &Path) -> io::Result<u64> {
    let raw = fs::read_file(fs, path)?;
    Ok(valid_records(&raw).map(|r| u64::from(r.len)).sum())
}

impl FsFile for ExtentFile {
    /// Reads from the extent holding `offset`, at most to its end (a short read; callers
    /// loop with `read_full_at`): from the journal's in-memory tail while it holds the
    /// bytes (a fetch's header walk over just-written batches then costs no system call
    /// and no disk read), else from the file. No lock is held during a file read.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Some((journal, position, available)) = self.locate(offset) else {
            return Ok(0);
        };
        let want = buf.len().min(available);
        match journal {
            Some(journal) if journal.read_tail(&mut buf[..want], position) => Ok(want),
            Some(journal) => journal.file.read_at(&mut buf[..want], position),
            None => {
                buf[..want].fill(0);
                Ok(want)
            }
        }
    }

    fn read_at_uninit(&self, buf: &mut [MaybeUninit<u8>], offset: u64) -> io::Result<usize> {
        let Some((journal, position, available)) = self.locate(offset) else {
            return Ok(0);
        };
        let want = buf.len().min(available);
        match journal {
            Some(journal) if journal.read_tail_uninit(&mut buf[..want], position) => Ok(want),
            Some(journal) => journal.file.read_at_uninit(&mut buf[..want], position),
            None => {
                fs::zero_filled(&mut buf[..want]);
                Ok(want)
            }
        }
    }

    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<usize> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "segment data is written to the journal, never to the segment",
        ))
    }

    /// Persists the records of the durable bytes not yet on disk, then `fdatasync`s.
    fn sync_data(&self) -> io::Result<()> {
        let mut persisted = self.persisted.lock();
        let limit = match mutated!("extents.records_past_durable") {
            true => self.len.load(Ordering::Acquire),
            false => self
                .durable
                .load(Ordering::Acquire)
                .min(self.len.load(Ordering::Acquire)),
        };
        if limit <= persisted.len {
            if persisted.unsynced {
                // No mutation point: the callers' (checkpoint, recovery, cleaner).
                persisted.file.sync_data()?;
                persisted.unsynced = false;
            }
            return Ok(());
        }
        let records = self.records_between(persisted.len, limit);
        write_records(persisted.file.as_ref(), persisted.records, &records)?;
        // No mutation point: the callers' (checkpoint, recovery, cleaner).
        persisted.file.sync_data()?;
        persisted.unsynced = false;
        persisted.records += records.len() as u64;
        persisted.written_bytes += (records.len() * RECORD_LEN) as u64;
        persisted.len = limit;
        Ok(())
    }

    /// Drops the bytes from `len` on (a refused round undone, a torn tail cut by
    /// recovery). Records already on disk past `len` are cut now (not yet synced).
    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut persisted = self.persisted.lock();
        {
            let mut extents = self.extents.write();
            let current = self.len.load(Ordering::Acquire);
            if len > current {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a segment grows only by appends",
                ));
            }
            let keep = extents.partition_point(|e| e.start < len);
            extents.truncate(keep);
            if let Some(last) = extents.last_mut() {
                last.len = last.len.min(len - last.start);
            }
            *self.by_file.lock() = bytes_by_file(&extents);
            self.len.store(len, Ordering::Release);
            let durable = self.durable.load(Ordering::Acquire).min(len);
            self.durable.store(durable, Ordering::Release);
        }
        if len < persisted.len {
            self.cut_persisted(&mut persisted, len)?;
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.len.load(Ordering::Acquire))
    }
}

/// File bytes as something the network layer sends without a copy: the journal's
/// in-memory tail while it still holds them (just written with direct I/O), else a range
/// of the file; `None` for a file without a descriptor.
fn sendable(
    file: &Arc<JournalFile>,
    position: u64,
    len: u32,
) -> Option<record_slices::RecordSlice> {
    if let Some(bytes) = file.tail_slice(position, len) {
        return Some(record_slices::RecordSlice::Bytes(bytes));
    }
    record_slices::FileRange::new(file, position, len).map(record_slices::RecordSlice::File)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::StdFs;

    fn journal_file(dir: &Path, seq: u64, bytes: &[u8]) -> Arc<JournalFile> {
        let file = StdFs
            .open(&dir.join(format!("{seq}.wal")), OpenMode::CreateTruncate)
            .expect("open");
        fs::write_all_at(file.as_ref(), bytes, 0).expect("write");
        JournalFile::new(seq, file)
    }

    #[test]
    fn reads_span_extents_and_persist_only_durable_bytes() {
        // Goal: a segment made of ranges of two journal files reads back as one file; only
        // bytes below the durable limit are persisted, and a reload sees exactly them.
        let dir = tempfile::tempdir().expect("tempdir");
        let a = journal_file(dir.path(), 1, b"xxABCDEFyy");
        let b = journal_file(dir.path(), 2, b"GHIJ");
        let files = JournalFiles::default();
        files.insert(Arc::clone(&a));
        files.insert(Arc::clone(&b));
        let path = dir.path().join("0.extents");
        let extents = ExtentFile::create(&StdFs, &path).expect("create");
        extents.add(&a, 2, 3);
        extents.add(&a, 5, 3); // contiguous: merged
        extents.add(&b, 0, 4);
        let mut buf = [0u8; 10];
        assert_eq!(fs::read_full_at(&extents, &mut buf, 0).expect("read"), 10);
        assert_eq!(&buf, b"ABCDEFGHIJ");
        assert_eq!(extents.journal_seqs(), vec![1, 2]);
        extents.set_durable(6);
        extents.sync_data().expect("sync");
        drop(extents);
        let (loaded, outcome) = ExtentFile::open(&StdFs, &path, &files).expect("open");
        assert!(outcome.stopped.is_none());
        assert_eq!(loaded.len().expect("len"), 6);
        let mut buf = [0u8; 6];
        fs::read_full_at(&loaded, &mut buf, 0).expect("read");
        assert_eq!(&buf, b"ABCDEF");
    }

    #[test]
    fn a_cut_keeps_the_records_before_it_and_a_torn_record_ends_the_load() {
        // Goal: set_len below the persisted length rewrites only the cut record; a torn
        // trailing record is dropped on load.
        let dir = tempfile::tempdir().expect("tempdir");
        let a = journal_file(dir.path(), 1, &[7u8; 100]);
        let files = JournalFiles::default();
        files.insert(Arc::clone(&a));
        let path = dir.path().join("0.extents");
        let extents = ExtentFile::create(&StdFs, &path).expect("create");
        for i in 0..4 {
            extents.add(&a, i * 20, 10); // gaps: four records
        }
        extents.set_durable(40);
        extents.sync_data().expect("sync");
        extents.set_len(25).expect("cut");
        extents.sync_data().expect("sync");
        drop(extents);
        let raw = fs::read_file(&StdFs, &path).expect("read");
        assert_eq!(raw.len(), 3 * RECORD_LEN);
        let (loaded, _) = ExtentFile::open(&StdFs, &path, &files).expect("open");
        assert_eq!(loaded.len().expect("len"), 25);
        drop(loaded);
        let file = StdFs.open(&path, OpenMode::Existing).expect("open");
        fs::write_all_at(file.as_ref(), &[1u8; 10], 3 * RECORD_LEN as u64).expect("torn");
        let (loaded, outcome) = ExtentFile::open(&StdFs, &path, &files).expect("open");
        assert_eq!(loaded.len().expect("len"), 25);
        assert_eq!(outcome.stopped, Some("extent record is torn"));
        assert_eq!(file.len().expect("len"), 3 * RECORD_LEN as u64);
    }
}
