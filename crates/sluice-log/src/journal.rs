//! The journal: `<data_dir>/journal/<seq:020>.wal`, the only copy of every record batch.
//!
//! Every appended batch of every partition is written here, in commit order, and one
//! `fdatasync` of the current journal file makes a whole commit round durable, however many
//! partitions it touched. Nothing copies the batches anywhere else: a partition's segments
//! are lists of extents (byte ranges) in these files (see `extents`), so every byte
//! produced is written to the page cache once and flushed to disk once. A file stays while
//! any live segment points into it, or while the checkpoint still needs it for replay;
//! then it is retired.
//!
//! File layout (big-endian):
//! - header, 16 bytes: magic `SLUICEJ2` (8), file sequence number u64 (8);
//! - entries, back to back:
//!   `entry_length u32` (bytes after this field) · `crc u32` · `topic_id [16]` ·
//!   `partition i32` · one or more stamped batches of that partition, consecutive offsets.
//!   The CRC-32C covers the file's sequence number (8 bytes, not stored), the topic id,
//!   the partition, the first 21 bytes of each batch (base offset, length, leader epoch,
//!   magic and the batch's own CRC, which covers the rest of the batch) and, last, the
//!   entry length. So the writer checksums 21 bytes per batch instead of the whole batch,
//!   and an entry left over from a recycled file's previous life never validates; a reader
//!   that replays an entry also checks each batch's own CRC;
//! - when the writer moves on to the next file it ends this one with an end marker: an entry
//!   of length 24 with an all-zero topic id and partition -1 (no batch), synced before
//!   anything in the next file is acknowledged.
//!
//! Retired files are recycled (renamed to `<seq:020>.free`, at most
//! [`JOURNAL_FILES_RECYCLED_MAX`]) and reused for later sequence numbers: overwriting
//! blocks that are already allocated lets `fdatasync` skip the file system's metadata
//! commit, which roughly doubles synchronous write throughput on ext4.
//!
//! Direct I/O (`sluice.journal.direct.io`, [`crate::LogManagerConfig::journal_direct_io`]): the
//! writer copies each round into page-aligned memory (`journal_tail`) and writes it
//! through a second, `O_DIRECT` descriptor of the current file; the sync, the end marker,
//! the header and every read use the buffered descriptor as before. The page cache then
//! holds no copy of the journal, so recycled files need no eviction, and the aligned
//! memory of the newest rounds stays published as the journal's in-memory tail, from which
//! fetches of just-written records are served.
//!
//! Guarantees: [`JournalWriter`] only appends; a new file is set up (directory fsynced)
//! before anything in it is acknowledged. [`read_entries`] stops at the end marker, or at the
//! first entry that is short, has an insane length, fails its CRC or holds a batch that
//! fails its own (a torn write, damage, or a recycled file's stale bytes): everything
//! before it is intact. [`JournalFiles`] retires a file only when no segment (and no
//! reader holding a segment) refers to it any more, so a reader never sees a recycled
//! file's new bytes.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_record::layout::BATCH_LENGTH_AT;

use crate::batch::{self, CRC_START, HEADER_LEN};
use crate::config::JOURNAL_FILES_RECYCLED_MAX;
use crate::fs::{self, DirectFile, Fs, FsFile, OpenMode};
use crate::journal_tail::{JournalTail, TailWriter};
use crate::mutation::mutated;
use crate::types::TopicId;

pub(crate) const FILE_MAGIC: &[u8; 8] = b"SLUICEJ2";
/// The magic of the format before the journal became the only copy (segments held the
/// data then): such a data directory is refused with a clear message.
pub(crate) const FILE_MAGIC_V1: &[u8; 8] = b"SLUICEJ1";
pub(crate) const FILE_HEADER_LEN: u64 = 16;
/// entry_length (4) + crc (4) + topic id (16) + partition (4).
pub(crate) const ENTRY_HEADER_LEN: usize = 28;
const ENTRY_LENGTH_FIELD: usize = 4;
/// entry_length of the end marker: crc (4) + topic id (16) + partition (4), no batch.
const END_MARKER_LENGTH: usize = 24;
const END_MARKER_PARTITION: i32 = -1;
/// The partition of a padding entry: it carries no batch, only bytes to skip.
const PADDING_PARTITION: i32 = -2;
/// Rounds end on this boundary (a padding entry fills the rest of the page), so the next
/// round does not rewrite the page the last sync just wrote.
pub(crate) const PAGE_BYTES: u64 = 4096;
/// Most bytes one padding entry takes: less than a page, plus room for its header.
pub(crate) const PADDING_BYTES_MAX: usize = PAGE_BYTES as usize + ENTRY_HEADER_LEN;
const FILE_SUFFIX: &str = ".wal";
const FREE_SUFFIX: &str = ".free";

/// A point in the journal: file sequence number and byte position inside that file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct JournalPosition {
    pub(crate) seq: u64,
    pub(crate) offset: u64,
}

pub(crate) fn file_name(seq: u64) -> String {
    format!("{seq:020}{FILE_SUFFIX}")
}

fn free_file_name(seq: u64) -> String {
    format!("{seq:020}{FREE_SUFFIX}")
}

fn parse_seq(name: &str, suffix: &str) -> Option<u64> {
    let digits = name.strip_suffix(suffix)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Parses `<seq:020>.wal`; anything else is not a journal file.
pub(crate) fn parse_file_name(name: &str) -> Option<u64> {
    parse_seq(name, FILE_SUFFIX)
}

/// Journal files in `dir`, sorted by sequence number.
pub(crate) fn list_files(fs: &dyn Fs, dir: &Path) -> io::Result<Vec<u64>> {
    let mut seqs: Vec<u64> = fs
        .read_dir(dir)?
        .into_iter()
        .filter(|e| !e.is_dir)
        .filter_map(|e| parse_file_name(&e.name))
        .collect();
    seqs.sort_unstable();
    Ok(seqs)
}

/// Builds one entry's header while its batches are added (the committer writes the
/// batches straight from the request buffers, so the header is all it encodes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryHeader {
    topic_id: TopicId,
    partition: i32,
    crc: u32,
    /// Bytes of batches added so far.
    batches_len: usize,
}

impl EntryHeader {
    pub(crate) fn begin(seq: u64, topic_id: TopicId, partition: i32) -> Self {
        let crc = crc32c::crc32c(&seq.to_be_bytes());
        let crc = crc32c::crc32c_append(crc, &topic_id.0);
        let crc = crc32c::crc32c_append(crc, &partition.to_be_bytes());
        Self {
            topic_id,
            partition,
            crc,
            batches_len: 0,
        }
    }

    /// Adds a batch whose first 8 bytes (the base offset) are `stamp` instead of what
    /// `batch` holds there.
    pub(crate) fn add_batch(&mut self, stamp: &[u8; 8], batch: &[u8]) {
        assert!(batch.len() >= HEADER_LEN);
        self.crc = crc32c::crc32c_append(self.crc, stamp);
        // The entry CRC covers each batch up to and including the batch's own CRC field,
        // with the stamp in place of the base offset.
        self.crc = crc32c::crc32c_append(self.crc, &batch[BATCH_LENGTH_AT..CRC_START]);
        self.batches_len += batch.len();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.batches_len == 0
    }

    /// The entry's bytes on disk, header and batches.
    pub(crate) fn entry_len(&self) -> usize {
        ENTRY_HEADER_LEN + self.batches_len
    }

    pub(crate) fn encode(&self) -> [u8; ENTRY_HEADER_LEN] {
        let length = (self.entry_len() - ENTRY_LENGTH_FIELD) as u32;
        let crc = crc32c::crc32c_append(self.crc, &length.to_be_bytes());
        let mut out = [0u8; ENTRY_HEADER_LEN];
        out[..4].copy_from_slice(&length.to_be_bytes());
        out[4..8].copy_from_slice(&crc.to_be_bytes());
        out[8..24].copy_from_slice(&self.topic_id.0);
        out[24..28].copy_from_slice(&self.partition.to_be_bytes());
        out
    }
}

/// The padding entry that moves a round ending at `end` to the next page boundary: its
/// header and how many zero bytes follow it. `None` when `end` is on a boundary. The
/// zeros are not covered by the CRC (they carry nothing); the header is.
pub(crate) fn padding_after(seq: u64, end: u64) -> Option<([u8; ENTRY_HEADER_LEN], usize)> {
    let mut pad = ((PAGE_BYTES - end % PAGE_BYTES) % PAGE_BYTES) as usize;
    if pad == 0 {
        return None;
    }
    if pad <= ENTRY_HEADER_LEN {
        pad += PAGE_BYTES as usize;
    }
    let mut header = EntryHeader::begin(seq, TopicId([0; 16]), PADDING_PARTITION);
    header.batches_len = pad - ENTRY_HEADER_LEN;
    Some((header.encode(), pad - ENTRY_HEADER_LEN))
}

/// The marker that ends a file the writer has moved on from.
pub(crate) fn encode_end_marker(seq: u64) -> [u8; ENTRY_HEADER_LEN] {
    let mut header = EntryHeader::begin(seq, TopicId([0; 16]), END_MARKER_PARTITION);
    header.batches_len = END_MARKER_LENGTH + ENTRY_LENGTH_FIELD - ENTRY_HEADER_LEN;
    header.encode()
}

/// One decoded entry, borrowing its batches from the file buffer.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    pub(crate) topic_id: TopicId,
    pub(crate) partition: i32,
    /// The entry's batches, back to back, each checked against its own CRC.
    pub(crate) batches: &'a [u8],
    /// Position of the entry's first byte in its file.
    pub(crate) position: u64,
}

impl Entry<'_> {
    /// Position of the first batch in the file.
    pub(crate) fn batches_position(&self) -> u64 {
        self.position + ENTRY_HEADER_LEN as u64
    }
}

/// How a scan of a journal file ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileEnd {
    /// The end marker: the writer moved on to the next file.
    Marker,
    /// The bytes simply ran out (the file the writer was using, never recycled).
    Eof,
    /// An entry is cut short (a torn write, or a recycled file's stale bytes).
    Torn,
    /// The length field is impossible or a CRC does not match (damage, or stale bytes).
    Corrupt,
}

/// One step of decoding.
enum Decoded<'a> {
    Entry(usize, Entry<'a>),
    Marker,
    /// A padding entry of this many bytes: skipped.
    Padding(usize),
}

/// Decodes entries of file `seq` from byte `from` on, where `data` is the file's content
/// starting at byte `data_start`. Calls `apply` for each intact entry and returns where
/// the intact part ends and how it ended.
pub(crate) fn read_entries(
    data: &[u8],
    data_start: u64,
    seq: u64,
    from: u64,
    mut apply: impl FnMut(Entry<'_>),
) -> (u64, FileEnd) {
    let skip = from.saturating_sub(data_start);
    let mut position = usize::try_from(skip).unwrap_or(usize::MAX).min(data.len());
    while position < data.len() {
        match decode_entry(&data[position..], seq) {
            Ok(Decoded::Entry(entry_len, mut entry)) => {
                entry.position = data_start + position as u64;
                apply(entry);
                position += entry_len;
            }
            Ok(Decoded::Padding(len)) => position += len,
            Ok(Decoded::Marker) => return (data_start + position as u64, FileEnd::Marker),
            Err(end) => return (data_start + position as u64, end),
        }
    }
    (data_start + position as u64, FileEnd::Eof)
}

fn decode_entry(data: &[u8], seq: u64) -> Result<Decoded<'_>, FileEnd> {
    if data.len() < ENTRY_LENGTH_FIELD {
        return Err(FileEnd::Torn);
    }
    let length = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    let total = ENTRY_LENGTH_FIELD.saturating_add(length);
    let is_marker = length == END_MARKER_LENGTH;
    if data.len() < ENTRY_HEADER_LEN {
        return Err(FileEnd::Torn);
    }
    let mut topic_id = [0u8; 16];
    topic_id.copy_from_slice(&data[8..24]);
    let partition = i32::from_be_bytes([data[24], data[25], data[26], data[27]]);
    let mut header = EntryHeader::begin(seq, TopicId(topic_id), partition);
    if partition == PADDING_PARTITION && topic_id == [0u8; 16] && length > END_MARKER_LENGTH {
        header.batches_len = total - ENTRY_HEADER_LEN;
        if header.encode()[..] != data[..ENTRY_HEADER_LEN] || total > PADDING_BYTES_MAX {
            return Err(FileEnd::Corrupt);
        }
        if data.len() < total {
            return Err(FileEnd::Torn);
        }
        return Ok(Decoded::Padding(total));
    }
    if !is_marker && length < ENTRY_HEADER_LEN - ENTRY_LENGTH_FIELD + HEADER_LEN {
        return Err(FileEnd::Corrupt);
    }
    if is_marker {
        header.batches_len = END_MARKER_LENGTH + ENTRY_LENGTH_FIELD - ENTRY_HEADER_LEN;
        let well_formed = partition == END_MARKER_PARTITION && topic_id == [0u8; 16];
        return match well_formed && header.encode()[..] == data[..ENTRY_HEADER_LEN] {
            true => Ok(Decoded::Marker),
            false => Err(FileEnd::Corrupt),
        };
    }
    let batches = data.get(ENTRY_HEADER_LEN..total).ok_or(FileEnd::Torn)?;
    let mut rest = batches;
    while !rest.is_empty() {
        let len = batch::batch_len_within(rest).ok_or(FileEnd::Corrupt)?;
        let mut stamp = [0u8; BATCH_LENGTH_AT];
        stamp.copy_from_slice(&rest[..BATCH_LENGTH_AT]);
        header.add_batch(&stamp, &rest[..len]);
        rest = &rest[len..];
    }
    if header.encode()[..] != data[..ENTRY_HEADER_LEN] {
        return Err(FileEnd::Corrupt);
    }
    let mut rest = batches;
    while !rest.is_empty() {
        let len = batch::batch_len_within(rest).ok_or(FileEnd::Corrupt)?;
        if batch::validate(&rest[..len], u32::MAX).is_err() {
            // The header and every batch prefix were written, the body was not (a torn
            // write), or the bytes were damaged since.
            return Err(FileEnd::Corrupt);
        }
        rest = &rest[len..];
    }
    Ok(Decoded::Entry(
        total,
        Entry {
            topic_id: TopicId(topic_id),
            partition,
            batches,
            position: 0,
        },
    ))
}

/// Checks a file image's header; `false` when it is missing, torn or names another seq.
pub(crate) fn header_ok(data: &[u8], seq: u64) -> bool {
    data.len() as u64 >= FILE_HEADER_LEN
        && &data[..8] == FILE_MAGIC
        && data[8..16] == seq.to_be_bytes()
}

pub(crate) fn encode_header(seq: u64) -> [u8; FILE_HEADER_LEN as usize] {
    let mut header = [0u8; FILE_HEADER_LEN as usize];
    header[..8].copy_from_slice(FILE_MAGIC);
    header[8..].copy_from_slice(&seq.to_be_bytes());
    header
}

/// Journal files retired by checkpoints, kept for reuse (shared by the committer, which
/// takes them, and the checkpointer, which gives them back).
#[derive(Debug, Default)]
pub(crate) struct FreePool {
    files: Mutex<Vec<u64>>,
}

impl FreePool {
    /// Registers the `.free` files already in `dir` (deleting any beyond the limit).
    pub(crate) fn load(&self, fs: &dyn Fs, dir: &Path) -> io::Result<()> {
        let mut seqs: Vec<u64> = fs
            .read_dir(dir)?
            .into_iter()
            .filter(|e| !e.is_dir)
            .filter_map(|e| parse_seq(&e.name, FREE_SUFFIX))
            .collect();
        seqs.sort_unstable();
        while seqs.len() > JOURNAL_FILES_RECYCLED_MAX {
            let seq = seqs.remove(0);
            fs.remove_file(&dir.join(free_file_name(seq)))?;
        }
        *self.files.lock() = seqs;
        Ok(())
    }

    /// The recycled files and their bytes on disk (for disk-use reports).
    pub(crate) fn usage(&self, fs: &dyn Fs, dir: &Path) -> (u64, u64) {
        let seqs = self.files.lock().clone();
        let bytes = seqs
            .iter()
            .filter_map(|&seq| {
                fs.open(&dir.join(free_file_name(seq)), OpenMode::Existing)
                    .ok()
            })
            .filter_map(|file| file.len().ok())
            .sum();
        (seqs.len() as u64, bytes)
    }

    /// Retires journal file `seq`: recycled while the pool has room, else deleted.
    pub(crate) fn retire(&self, fs: &dyn Fs, dir: &Path, seq: u64) -> io::Result<()> {
        let mut files = self.files.lock();
        let path = dir.join(file_name(seq));
        if files.len() >= JOURNAL_FILES_RECYCLED_MAX {
            return fs.remove_file(&path);
        }
        fs.rename(&path, &dir.join(free_file_name(seq)))?;
        files.push(seq);
        Ok(())
    }

    /// Deletes the oldest recycled file, if any, giving its space back to the file system;
    /// returns its sequence number. For a full disk: a recycled file is reused only when
    /// the current one reaches its size limit, which a current file that cannot grow never
    /// does. An unlink needs no space; a crash that keeps the file only puts it back in the
    /// pool.
    pub(crate) fn release_oldest(&self, fs: &dyn Fs, dir: &Path) -> io::Result<Option<u64>> {
        let mut files = self.files.lock();
        let Some(&oldest) = files.iter().min() else {
            return Ok(None);
        };
        fs.remove_file(&dir.join(free_file_name(oldest)))?;
        files.retain(|&seq| seq != oldest);
        Ok(Some(oldest))
    }

    /// Turns a recycled file into journal file `seq`, if one is available.
    /// `drop_cache`: evict the file's cached pages (buffered journals only: a journal
    /// written with direct I/O leaves nothing in the page cache to evict).
    fn take(
        &self,
        fs: &dyn Fs,
        dir: &Path,
        seq: u64,
        drop_cache: bool,
    ) -> io::Result<Option<Box<dyn FsFile>>> {
        let mut files = self.files.lock();
        let Some(old) = files.pop() else {
            return Ok(None);
        };
        let path = dir.join(file_name(seq));
        fs.rename(&dir.join(free_file_name(old)), &path)?;
        let file = fs.open(&path, OpenMode::Existing)?;
        // Its cached pages hold data nobody reads again. Dropping them also keeps the page
        // cache from tracking the new, differently aligned writes in the old large folios:
        // Linux then charges each sync's partly rewritten folio whole to the writer's
        // `write_bytes` (measured: 19.6 accounted bytes per byte written, 1.04 at the
        // device), which made the disk-bytes metric of the benchmarks meaningless.
        if drop_cache {
            file.drop_cache();
        }
        Ok(Some(file))
    }
}

/// One journal file, shared by the writer, the segments whose extents point into it and
/// the readers holding those segments. The `Arc` count is the reference count:
/// [`JournalFiles`] retires a file only when it holds the last one.
#[derive(Debug)]
pub(crate) struct JournalFile {
    pub(crate) seq: u64,
    pub(crate) file: Box<dyn FsFile>,
    /// The in-memory tail that may hold this file's newest bytes (files written with
    /// direct I/O by this process; see `journal_tail`).
    pub(crate) tail: Option<Arc<JournalTail>>,
    /// The stretch of the file a fetch reader last found or made resident in the page
    /// cache (a hint that spares the next read-ahead's probe; see `record_slices`).
    pub(crate) resident_hint: crate::record_slices::ResidentHint,
}

impl JournalFile {
    /// A file with no in-memory tail (read from disk and the page cache only).
    pub(crate) fn new(seq: u64, file: Box<dyn FsFile>) -> Arc<Self> {
        Arc::new(Self {
            seq,
            file,
            tail: None,
            resident_hint: Default::default(),
        })
    }

    /// How far the file's bytes are finished: past this, the writer may not have written
    /// them yet. A file written with direct I/O by this process (it has a tail) is finished
    /// up to the newest round published in the tail, or whole once the tail has moved on to
    /// a later file; its unfinished bytes must not be read through the page cache, which
    /// would keep what the disk held before the direct write. Every other file (written
    /// through the page cache, or by an earlier process) is coherent with the page cache
    /// wherever it is read.
    pub(crate) fn written_end(&self) -> u64 {
        match &self.tail {
            Some(tail) => tail.written_end(self.seq),
            None => u64::MAX,
        }
    }

    /// The bytes `[position, position + len)` from the in-memory tail, if it holds them.
    pub(crate) fn tail_slice(&self, position: u64, len: u32) -> Option<bytes::Bytes> {
        self.tail.as_ref()?.slice(self.seq, position, len)
    }

    /// Fills `buf` with the bytes at `position` from the in-memory tail; false (and `buf`
    /// untouched) unless it holds all of them.
    pub(crate) fn read_tail(&self, buf: &mut [u8], position: u64) -> bool {
        let len = u32::try_from(buf.len()).ok();
        match len.and_then(|len| self.tail_slice(position, len)) {
            Some(bytes) => {
                buf.copy_from_slice(&bytes);
                true
            }
            None => false,
        }
    }

    /// [`Self::read_tail`] into memory that may be uninitialized.
    pub(crate) fn read_tail_uninit(
        &self,
        buf: &mut [std::mem::MaybeUninit<u8>],
        position: u64,
    ) -> bool {
        let len = u32::try_from(buf.len()).ok();
        match len.and_then(|len| self.tail_slice(position, len)) {
            Some(bytes) => {
                for (to, from) in buf.iter_mut().zip(bytes.iter()) {
                    to.write(*from);
                }
                true
            }
            None => false,
        }
    }
}

/// Every journal file the log may read, by sequence number.
#[derive(Debug, Default)]
pub(crate) struct JournalFiles {
    files: Mutex<BTreeMap<u64, Arc<JournalFile>>>,
    /// Files holding data of partitions recovery could not load (a damaged
    /// `partition.metadata`, a segment set aside): kept until restart, never retired, so
    /// an operator who repairs the directory finds its data.
    pinned: Mutex<Vec<Arc<JournalFile>>>,
}

impl JournalFiles {
    pub(crate) fn insert(&self, file: Arc<JournalFile>) {
        self.files.lock().insert(file.seq, file);
    }

    pub(crate) fn get(&self, seq: u64) -> Option<Arc<JournalFile>> {
        self.files.lock().get(&seq).cloned()
    }

    /// Every registered file, by sequence number (the journal cleaner's accounting).
    pub(crate) fn all(&self) -> Vec<Arc<JournalFile>> {
        self.files.lock().values().cloned().collect()
    }

    /// Keeps file `seq` (if present) from being retired while the process runs.
    pub(crate) fn pin(&self, seq: u64) {
        if let Some(file) = self.get(seq) {
            self.pinned.lock().push(file);
        }
    }

    /// Whether [`Self::take_unreferenced_before`] would retire anything now.
    pub(crate) fn any_unreferenced_before(&self, before: u64) -> bool {
        let files = self.files.lock();
        files
            .range(..before)
            .any(|(_, file)| Arc::strong_count(file) == 1)
    }

    fn remove(&self, seq: u64) -> Option<Arc<JournalFile>> {
        self.files.lock().remove(&seq)
    }

    /// Removes and returns the sequence numbers at or above `from` that nothing refers to
    /// (the cleaner's files, `cleaner::CLEANED_SEQ_BASE` on: never replayed, so any of
    /// them may go as soon as no segment or reader holds it).
    pub(crate) fn take_unreferenced_from(&self, from: u64) -> Vec<u64> {
        let mut files = self.files.lock();
        let unreferenced: Vec<u64> = files
            .range(from..)
            .filter(|(_, file)| Arc::strong_count(file) == 1)
            .map(|(&seq, _)| seq)
            .collect();
        for seq in &unreferenced {
            files.remove(seq);
        }
        unreferenced
    }

    /// Removes and returns the sequence numbers below `before` that nothing refers to any
    /// more: no segment, no reader, not the writer. Nothing can take a new reference to
    /// such a file (references come from this map, under its lock, or from clones of
    /// existing ones), so the caller may delete or recycle it.
    pub(crate) fn take_unreferenced_before(&self, before: u64) -> Vec<u64> {
        let mut files = self.files.lock();
        let unreferenced: Vec<u64> = files
            .range(..before)
            .filter(|(_, file)| Arc::strong_count(file) == 1)
            .map(|(&seq, _)| seq)
            .collect();
        for seq in &unreferenced {
            files.remove(seq);
        }
        unreferenced
    }
}

/// The journal's append side. Owned by the committer thread (or by `open` before the
/// committer starts); not shared.
#[derive(Debug)]
pub(crate) struct JournalWriter {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    pool: Arc<FreePool>,
    files: Arc<JournalFiles>,
    current: Arc<JournalFile>,
    /// Bytes written to the current file, header included.
    len: u64,
    file_bytes_max: u64,
    /// Direct I/O: the current file's `O_DIRECT` descriptor and the round buffer.
    direct: Option<DirectWriter>,
}

/// The direct-I/O side of the writer (see the module header).
#[derive(Debug)]
struct DirectWriter {
    file: Box<dyn DirectFile>,
    tail: Arc<JournalTail>,
    writer: TailWriter,
}

impl JournalWriter {
    /// Sets up journal file `seq` (a recycled file if the pool has one), writes its header
    /// and fsyncs the directory, so the file survives a crash before anything in it is
    /// acknowledged. The file is registered in `files` for readers.
    pub(crate) fn create(
        fs: Arc<dyn Fs>,
        dir: &Path,
        pool: Arc<FreePool>,
        files: Arc<JournalFiles>,
        seq: u64,
        file_bytes_max: u64,
        direct_io: bool,
    ) -> io::Result<Self> {
        let tail = direct_io.then(JournalTail::new);
        let current = open_file(fs.as_ref(), dir, &pool, seq, tail.as_ref())?;
        files.insert(Arc::clone(&current));
        let direct = match tail {
            Some(tail) => Some(DirectWriter {
                file: fs.open_direct(&dir.join(file_name(seq)))?,
                writer: TailWriter::new(Arc::clone(&tail)),
                tail,
            }),
            None => None,
        };
        Ok(Self {
            fs,
            dir: dir.to_owned(),
            pool,
            files,
            current,
            len: FILE_HEADER_LEN,
            file_bytes_max,
            direct,
        })
    }

    /// Points the direct descriptor at the current file (after a roll or a reuse).
    fn reopen_direct(&mut self) -> io::Result<()> {
        if let Some(direct) = &mut self.direct {
            direct.file = self
                .fs
                .open_direct(&self.dir.join(file_name(self.current.seq)))?;
        }
        Ok(())
    }

    pub(crate) fn position(&self) -> JournalPosition {
        JournalPosition {
            seq: self.current.seq,
            offset: self.len,
        }
    }

    /// The sequence number entries of the next round must be encoded with.
    pub(crate) fn seq(&self) -> u64 {
        self.current.seq
    }

    /// The file the next round goes to (extents of its batches point into it).
    pub(crate) fn current(&self) -> &Arc<JournalFile> {
        &self.current
    }

    /// Called before a round of at most `round_bytes` is encoded: moves to a new file when
    /// the round would push the current one past its limit. A round is never split across
    /// files, so a file exceeds the limit only when one round alone is larger than it.
    pub(crate) fn reserve(&mut self, round_bytes: u64) -> io::Result<()> {
        let would_exceed = self.len + round_bytes > self.file_bytes_max;
        if would_exceed && self.len > FILE_HEADER_LEN {
            self.roll()?;
        }
        // The round fits, or it is alone in a fresh file.
        assert!(self.len + round_bytes <= self.file_bytes_max || self.len == FILE_HEADER_LEN);
        Ok(())
    }

    /// Appends a whole commit round (encoded with [`Self::seq`]), written straight from
    /// the slices (`pwritev`): entry headers, stamped base offsets and the request bytes.
    pub(crate) fn append_vectored(
        &mut self,
        round: &mut [io::IoSlice<'_>],
        round_len: u64,
    ) -> io::Result<JournalPosition> {
        assert!(
            round_len > 0 && self.len >= FILE_HEADER_LEN,
            "a round after the file header"
        );
        match &mut self.direct {
            Some(direct) => {
                let header;
                let prefix: &[u8] = if self.len == FILE_HEADER_LEN {
                    header = encode_header(self.current.seq);
                    &header
                } else {
                    &[]
                };
                direct.writer.write(
                    direct.file.as_ref(),
                    self.current.seq,
                    prefix,
                    round,
                    round_len,
                    self.len,
                )?;
            }
            None => fs::write_all_vectored_at(self.current.file.as_ref(), round, self.len)?,
        }
        self.len += round_len;
        Ok(self.position())
    }

    /// Appends bytes already laid out as entries (tests).
    #[cfg(test)]
    pub(crate) fn append(&mut self, round: &[u8]) -> io::Result<JournalPosition> {
        fs::write_all_at(self.current.file.as_ref(), round, self.len)?;
        self.len += round.len() as u64;
        Ok(self.position())
    }

    /// Ends the current file with the end marker and syncs it (so replay knows to go on to
    /// the next file even if this one was recycled), then moves to file `seq + 1`.
    fn roll(&mut self) -> io::Result<()> {
        let marker = encode_end_marker(self.current.seq);
        fs::write_all_at(self.current.file.as_ref(), &marker, self.len)?;
        if !mutated!("journal.roll_marker_unsynced") {
            self.current.file.sync_data()?;
        }
        let next = self.current.seq + 1;
        let tail = self.direct.as_ref().map(|d| &d.tail);
        self.current = open_file(self.fs.as_ref(), &self.dir, &self.pool, next, tail)?;
        self.files.insert(Arc::clone(&self.current));
        self.len = FILE_HEADER_LEN;
        self.reopen_direct()?;
        tracing::debug!(seq = next, "journal rolled to a new file");
        Ok(())
    }

    /// After a refused round (no space): cuts the file back to `round_start` (the
    /// position before the round) and syncs the cut. The round may have reached the file
    /// in part, or whole; no entry of it may survive a crash, since the next round reuses
    /// its offsets and its CRC would be valid (same file sequence number). The next round
    /// is written at `round_start`.
    pub(crate) fn discard_round(&mut self, round_start: JournalPosition) -> io::Result<()> {
        assert_eq!(
            round_start.seq, self.current.seq,
            "a round never spans two files"
        );
        assert!(round_start.offset <= self.len && round_start.offset >= FILE_HEADER_LEN);
        self.len = round_start.offset;
        if let Some(direct) = &mut self.direct {
            direct
                .writer
                .discard_from(round_start.seq, round_start.offset);
        }
        self.current.file.set_len(self.len)?;
        if mutated!("journal.discard_unsynced") {
            return Ok(());
        }
        self.current.file.sync_data()
    }

    /// When nothing but the writer refers to the current file any more (every segment
    /// with bytes in it was deleted: a deleted topic, DeleteRecords, retention), reuses it
    /// in place as the next file: renamed to `seq + 1`, given its new header, synced.
    ///
    /// `cut_back` (the disk is short of space: a round was refused for it) also cuts the
    /// file back to its header, which frees its space without needing any, as a roll to a
    /// new file would (on a full disk it cannot). Otherwise the file keeps its length, so
    /// later rounds overwrite blocks that are already allocated and written, like a
    /// recycled file's: their `fdatasync` then writes no metadata, only the device flush
    /// (measured on this machine: one data write and one flush per round instead of a data
    /// write, two metadata writes and a flush into a growing file; see
    /// docs/performance.md, "Journal rounds over written blocks"). The stale entries
    /// beyond the writer carry the old sequence number, so replay never takes them.
    ///
    /// Nothing in the file is lost: no segment points into it, and a crash before the new
    /// header is durable leaves a file whose header names another sequence number, which
    /// replay reads as the end of the journal (nothing after it was acknowledged). Returns
    /// whether it did. Caller: the committer, between rounds (so no extent of the current
    /// round can point into the file).
    pub(crate) fn reuse_if_unreferenced(&mut self, cut_back: bool) -> io::Result<bool> {
        // The registry and the writer hold the only references; only the committer adds
        // extents, so none can appear while it runs this.
        if self.len == FILE_HEADER_LEN || Arc::strong_count(&self.current) > 2 {
            return Ok(false);
        }
        let seq = self.current.seq;
        let next = seq + 1;
        let (from, to) = (
            self.dir.join(file_name(seq)),
            self.dir.join(file_name(next)),
        );
        self.fs.rename(&from, &to)?;
        // From here on a failure leaves the file under a name its entries do not match:
        // never a refused write to retry, always poison.
        let after_rename = |e: io::Error| io::Error::other(format!("journal file reuse: {e}"));
        drop(self.files.remove(seq));
        let file = self
            .fs
            .open(&to, OpenMode::Existing)
            .map_err(after_rename)?;
        fs::write_all_at(file.as_ref(), &encode_header(next), 0).map_err(after_rename)?;
        if cut_back {
            file.set_len(FILE_HEADER_LEN).map_err(after_rename)?;
        } else if self.direct.is_none() {
            // Written through the page cache: drop the old pages, as for a recycled file.
            file.drop_cache();
        }
        if !mutated!("journal.reuse_header_unsynced") {
            file.sync_data().map_err(after_rename)?;
        }
        if !mutated!("journal.reuse_dir_unsynced") {
            self.fs.sync_dir(&self.dir).map_err(after_rename)?;
        }
        self.current = Arc::new(JournalFile {
            seq: next,
            file,
            tail: self.direct.as_ref().map(|d| Arc::clone(&d.tail)),
            resident_hint: Default::default(),
        });
        self.files.insert(Arc::clone(&self.current));
        self.len = FILE_HEADER_LEN;
        self.reopen_direct().map_err(after_rename)?;
        tracing::info!(
            seq = next,
            cut_back,
            "journal file reused in place: nothing pointed into it any more"
        );
        Ok(true)
    }

    /// After a round refused for lack of space: deletes one recycled journal file (see
    /// [`FreePool::release_oldest`]), so later rounds can grow the current file. Returns
    /// whether there was one.
    pub(crate) fn release_free_file(&self) -> io::Result<bool> {
        let released = self.pool.release_oldest(self.fs.as_ref(), &self.dir)?;
        if let Some(seq) = released {
            tracing::info!(
                seq,
                "disk full: deleted a journal file kept for reuse, so its space can take new rounds"
            );
        }
        Ok(released.is_some())
    }

    /// `fdatasync` of the current file: covers every round appended since the last sync.
    pub(crate) fn sync(&self) -> io::Result<()> {
        // No mutation point: the callers' (`commit.ack_before_journal_sync`).
        self.current.file.sync_data()
    }

    /// At a clean stop: cuts the current file back to its last round when it is longer
    /// (a recycled file, or one reused in place, keeps its old bytes past the writer).
    /// The next start then finds the journal's end where the entries end, instead of
    /// reading the old bytes as a torn entry and warning about it. Only bytes no entry
    /// of this file's life ever held are cut, so a crash at any point of it is harmless.
    pub(crate) fn trim_to_written(&self) -> io::Result<()> {
        if self.current.file.len()? > self.len {
            self.current.file.set_len(self.len)?;
            // No mutation point: only bytes no entry of this file's life holds are cut.
            self.current.file.sync_data()?;
        }
        Ok(())
    }
}

fn open_file(
    fs: &dyn Fs,
    dir: &Path,
    pool: &FreePool,
    seq: u64,
    tail: Option<&Arc<JournalTail>>,
) -> io::Result<Arc<JournalFile>> {
    // A journal written with direct I/O leaves nothing in the page cache to evict.
    let file = match pool.take(fs, dir, seq, tail.is_none())? {
        Some(recycled) => recycled,
        None => fs.open(&dir.join(file_name(seq)), OpenMode::CreateTruncate)?,
    };
    fs::write_all_at(file.as_ref(), &encode_header(seq), 0)?;
    if !mutated!("journal.new_file_dir_unsynced") {
        fs.sync_dir(dir)?;
    }
    Ok(Arc::new(JournalFile {
        seq,
        file,
        tail: tail.cloned(),
        resident_hint: Default::default(),
    }))
}

/// Opens an existing journal file for reading (recovery).
pub(crate) fn open_existing(fs: &dyn Fs, dir: &Path, seq: u64) -> io::Result<Arc<JournalFile>> {
    let file = fs.open(&dir.join(file_name(seq)), OpenMode::Existing)?;
    Ok(JournalFile::new(seq, file))
}

/// Encodes one entry holding `batch` stamped with `base_offset` into `buf` (tests; the
/// committer lays entries out with [`EntryHeader`] and writes them vectored). Returns the
/// range of the stamped batch.
#[cfg(test)]
pub(crate) fn encode_entry(
    buf: &mut Vec<u8>,
    seq: u64,
    topic_id: TopicId,
    partition: i32,
    batch: &[u8],
    base_offset: crate::types::Offset,
) -> std::ops::Range<usize> {
    let stamp = base_offset.0.to_be_bytes();
    let mut header = EntryHeader::begin(seq, topic_id, partition);
    header.add_batch(&stamp, batch);
    buf.extend_from_slice(&header.encode());
    let start = buf.len();
    buf.extend_from_slice(&stamp);
    buf.extend_from_slice(&batch[BATCH_LENGTH_AT..]);
    start..buf.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::batch;
    use crate::types::Offset;

    #[test]
    fn entries_round_trip_and_stop_at_damage() {
        // Goal: encoded entries decode back; a torn tail, a flipped bit and a wrong file
        // sequence number each end the scan; the end marker ends it cleanly.
        let mut buf = Vec::new();
        let b = batch(2, 10, 0);
        let first = encode_entry(&mut buf, 9, TopicId([7; 16]), 3, &b, Offset(40));
        encode_entry(&mut buf, 9, TopicId([7; 16]), 4, &b, Offset(0));
        assert_eq!(&buf[first.start..first.start + 8], &40i64.to_be_bytes());
        let mut seen = Vec::new();
        let (end, how) = read_entries(&buf, 0, 9, 0, |e| seen.push((e.partition, e.batches.len())));
        assert_eq!((end as usize, how), (buf.len(), FileEnd::Eof));
        assert_eq!(seen, vec![(3, b.len()), (4, b.len())]);

        let (end, how) = read_entries(&buf[..buf.len() - 3], 0, 9, 0, |_| {});
        assert_eq!((end as usize, how), (first.end, FileEnd::Torn));
        let mut flipped = buf.clone();
        flipped[first.end + 40] ^= 0x10;
        let (end, how) = read_entries(&flipped, 0, 9, 0, |_| {});
        assert_eq!((end as usize, how), (first.end, FileEnd::Corrupt));
        let (end, how) = read_entries(&buf, 0, 10, 0, |_| {});
        assert_eq!(
            (end, how),
            (0, FileEnd::Corrupt),
            "entries of another file incarnation never validate"
        );

        let mut ended = buf.clone();
        ended.extend_from_slice(&encode_end_marker(9));
        ended.extend_from_slice(&[0xAB; 100]);
        let (end, how) = read_entries(&ended, 0, 9, 0, |_| {});
        assert_eq!((end as usize, how), (buf.len(), FileEnd::Marker));
    }

    #[test]
    fn padding_entries_are_skipped_and_checked() {
        // Goal: a padding entry moves the next entry to a page boundary and is skipped by
        // replay; a damaged padding header ends the scan like any damaged entry.
        let b = batch(2, 10, 0);
        let mut buf = vec![0u8; FILE_HEADER_LEN as usize];
        encode_entry(&mut buf, 7, TopicId([7; 16]), 1, &b, Offset(0));
        let (header, zeros) = padding_after(7, buf.len() as u64).expect("padding needed");
        buf.extend_from_slice(&header);
        buf.extend(std::iter::repeat_n(0u8, zeros));
        assert_eq!(buf.len() as u64 % PAGE_BYTES, 0);
        assert!(padding_after(7, buf.len() as u64).is_none());
        encode_entry(&mut buf, 7, TopicId([7; 16]), 2, &b, Offset(0));
        let mut seen = Vec::new();
        let (_, how) = read_entries(&buf, 0, 7, FILE_HEADER_LEN, |e| seen.push(e.partition));
        assert_eq!((seen, how), (vec![1, 2], FileEnd::Eof));
        let pad_at = FILE_HEADER_LEN as usize + ENTRY_HEADER_LEN + b.len();
        let mut flipped = buf.clone();
        flipped[pad_at + 26] ^= 1;
        let (end, how) = read_entries(&flipped, 0, 7, FILE_HEADER_LEN, |_| {});
        assert_eq!((end as usize, how), (pad_at, FileEnd::Corrupt));
        // A round ending 1..=28 bytes before a boundary pads through the next page.
        let (_, zeros) = padding_after(7, PAGE_BYTES - 10).expect("padding");
        assert_eq!(zeros + ENTRY_HEADER_LEN, 10 + PAGE_BYTES as usize);
    }

    #[test]
    fn file_names_parse() {
        // Goal: only 20-digit `.wal` names are journal files.
        assert_eq!(parse_file_name(&file_name(42)), Some(42));
        assert_eq!(parse_file_name("42.wal"), None);
        assert_eq!(parse_file_name(&free_file_name(42)), None);
        assert_eq!(parse_file_name("checkpoint"), None);
    }

    #[test]
    fn writer_recycles_retired_files() {
        // Goal: a retired file is reused for a later sequence number, and a rolled file ends
        // with the marker so replay moves on despite stale bytes after it.
        let dir = tempfile::tempdir().expect("tempdir");
        let fs: Arc<dyn Fs> = Arc::new(crate::fs::StdFs);
        let pool = Arc::new(FreePool::default());
        let mut writer = JournalWriter::create(
            Arc::clone(&fs),
            dir.path(),
            Arc::clone(&pool),
            Arc::default(),
            1,
            4096,
            false,
        )
        .expect("create");
        let mut round = Vec::new();
        encode_entry(
            &mut round,
            1,
            TopicId([1; 16]),
            0,
            &batch(1, 3000, 0),
            Offset(0),
        );
        writer.append(&round).expect("append");
        writer.reserve(round.len() as u64).expect("roll");
        assert_eq!(writer.seq(), 2);
        writer.files.take_unreferenced_before(2);
        pool.retire(fs.as_ref(), dir.path(), 1).expect("retire");
        assert!(!fs.exists(&dir.path().join(file_name(1))));
        writer.reserve(1 << 20).expect("no roll for an empty file");
        round.clear();
        encode_entry(
            &mut round,
            2,
            TopicId([1; 16]),
            0,
            &batch(1, 3000, 1),
            Offset(1),
        );
        writer.append(&round).expect("append");
        writer
            .reserve(round.len() as u64)
            .expect("roll into the recycled file");
        assert_eq!(writer.seq(), 3);
        let recycled = fs::read_file(fs.as_ref(), &dir.path().join(file_name(3))).expect("read");
        assert!(header_ok(&recycled, 3));
        assert!(
            recycled.len() > FILE_HEADER_LEN as usize,
            "recycled file keeps its blocks"
        );
        let (_, how) = read_entries(&recycled, 0, 3, FILE_HEADER_LEN, |_| {
            panic!("stale entry accepted")
        });
        assert_ne!(how, FileEnd::Marker);
        let second = fs::read_file(fs.as_ref(), &dir.path().join(file_name(2))).expect("read");
        let mut entries = 0;
        let (_, how) = read_entries(&second, 0, 2, FILE_HEADER_LEN, |_| entries += 1);
        assert_eq!((entries, how), (1, FileEnd::Marker));
    }
}
