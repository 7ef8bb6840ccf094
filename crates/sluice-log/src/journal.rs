//! The shared write-ahead journal: `<data_dir>/journal/<seq:020>.wal`.
//!
//! Every appended batch of every partition is written here first, in commit order, and one
//! `fdatasync` of the current journal file makes a whole commit round durable, however many
//! partitions it touched. Segments are written behind it (page cache only) and synced later
//! by the checkpointer, which then retires journal files it no longer needs.
//!
//! File layout (big-endian):
//! - header, 16 bytes: magic `SLUICEJ1` (8), file sequence number u64 (8);
//! - entries, back to back:
//!   `entry_length u32` (bytes after this field) · `crc u32` · `topic_id [16]` ·
//!   `partition i32` · the stamped batch bytes. The CRC-32C covers the file's sequence
//!   number (8 bytes, not stored in the entry) followed by every entry byte after the crc
//!   field, so an entry left over from a recycled file's previous life never validates;
//! - when the writer moves on to the next file it ends this one with an end marker: an entry
//!   of length 24 with an all-zero topic id and partition -1 (no batch), synced before
//!   anything in the next file is acknowledged.
//!
//! Retired files are recycled (renamed to `<seq:020>.free`, at most
//! [`JOURNAL_FILES_RECYCLED_MAX`]) and reused for later sequence numbers: overwriting
//! blocks that are already allocated lets `fdatasync` skip the file system's metadata
//! commit, which roughly doubles synchronous write throughput on ext4.
//!
//! Guarantees: [`JournalWriter`] only appends; a new file is set up (directory fsynced)
//! before anything in it is acknowledged. [`read_entries`] stops at the end marker, or at the
//! first entry that is short, has an insane length or fails its CRC (a torn write, damage,
//! or a recycled file's stale bytes): everything before it is intact.

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::{self, HEADER_LEN};
use crate::config::JOURNAL_FILES_RECYCLED_MAX;
use crate::fs::{self, Fs, FsFile, OpenMode};
use crate::types::{Offset, TopicId};

pub(crate) const FILE_MAGIC: &[u8; 8] = b"SLUICEJ1";
pub(crate) const FILE_HEADER_LEN: u64 = 16;
/// entry_length (4) + crc (4) + topic id (16) + partition (4).
pub(crate) const ENTRY_HEADER_LEN: usize = 28;
const ENTRY_LENGTH_FIELD: usize = 4;
const CRC_FIELD_END: usize = 8;
/// entry_length of the end marker: crc (4) + topic id (16) + partition (4), no batch.
const END_MARKER_LENGTH: usize = 24;
const END_MARKER_PARTITION: i32 = -1;
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

/// Appends one journal entry for `batch` (stamped with `base_offset`) to `buf` and returns
/// the range of the stamped batch inside `buf`, which the committer then writes to the
/// segment: the journal copy is the only copy the produce path makes.
pub(crate) fn encode_entry(
    buf: &mut Vec<u8>,
    seq: u64,
    topic_id: TopicId,
    partition: i32,
    batch: &[u8],
    base_offset: Offset,
) -> Range<usize> {
    debug_assert!(batch.len() >= HEADER_LEN);
    let start = buf.len();
    let entry_length = (ENTRY_HEADER_LEN - ENTRY_LENGTH_FIELD + batch.len()) as u32;
    buf.extend_from_slice(&entry_length.to_be_bytes());
    buf.extend_from_slice(&[0u8; 4]);
    buf.extend_from_slice(&topic_id.0);
    buf.extend_from_slice(&partition.to_be_bytes());
    let batch_start = buf.len();
    buf.extend_from_slice(&base_offset.0.to_be_bytes());
    buf.extend_from_slice(&batch[8..]);
    let crc = entry_crc(seq, &buf[start + CRC_FIELD_END..]);
    buf[start + ENTRY_LENGTH_FIELD..start + CRC_FIELD_END].copy_from_slice(&crc.to_be_bytes());
    batch_start..buf.len()
}

fn entry_crc(seq: u64, after_crc_field: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&seq.to_be_bytes()), after_crc_field)
}

/// The marker that ends a file the writer has moved on from.
fn encode_end_marker(seq: u64) -> Vec<u8> {
    let mut marker = Vec::with_capacity(ENTRY_LENGTH_FIELD + END_MARKER_LENGTH);
    marker.extend_from_slice(&(END_MARKER_LENGTH as u32).to_be_bytes());
    marker.extend_from_slice(&[0u8; 4]);
    marker.extend_from_slice(&[0u8; 16]);
    marker.extend_from_slice(&END_MARKER_PARTITION.to_be_bytes());
    let crc = entry_crc(seq, &marker[CRC_FIELD_END..]);
    marker[ENTRY_LENGTH_FIELD..CRC_FIELD_END].copy_from_slice(&crc.to_be_bytes());
    marker
}

/// One decoded entry, borrowing the batch bytes from the file buffer.
#[derive(Debug)]
pub(crate) struct Entry<'a> {
    pub(crate) topic_id: TopicId,
    pub(crate) partition: i32,
    pub(crate) batch: &'a [u8],
    /// Position of the entry's first byte in its file.
    pub(crate) position: u64,
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
    /// The length field is impossible or the CRC does not match (damage, or stale bytes).
    Corrupt,
}

/// One step of decoding.
enum Decoded<'a> {
    Entry(usize, Entry<'a>),
    Marker,
}

/// Decodes entries of file `seq` from byte `from` on. Calls `apply` for each intact entry
/// and returns where the intact part ends and how it ended.
pub(crate) fn read_entries(
    data: &[u8],
    seq: u64,
    from: u64,
    mut apply: impl FnMut(Entry<'_>),
) -> (u64, FileEnd) {
    let mut position = usize::try_from(from).unwrap_or(usize::MAX).min(data.len());
    while position < data.len() {
        match decode_entry(&data[position..], seq) {
            Ok(Decoded::Entry(entry_len, mut entry)) => {
                entry.position = position as u64;
                apply(entry);
                position += entry_len;
            }
            Ok(Decoded::Marker) => return (position as u64, FileEnd::Marker),
            Err(end) => return (position as u64, end),
        }
    }
    (position as u64, FileEnd::Eof)
}

fn decode_entry(data: &[u8], seq: u64) -> Result<Decoded<'_>, FileEnd> {
    if data.len() < ENTRY_LENGTH_FIELD {
        return Err(FileEnd::Torn);
    }
    let length = u32::from_be_bytes([data[0], data[1], data[2], data[3]]) as usize;
    let total = ENTRY_LENGTH_FIELD.saturating_add(length);
    let is_marker = length == END_MARKER_LENGTH;
    if !is_marker && length < ENTRY_HEADER_LEN - ENTRY_LENGTH_FIELD + HEADER_LEN {
        return Err(FileEnd::Corrupt);
    }
    if data.len() < total {
        return Err(FileEnd::Torn);
    }
    let stored_crc = u32::from_be_bytes([data[4], data[5], data[6], data[7]]);
    if entry_crc(seq, &data[CRC_FIELD_END..total]) != stored_crc {
        return Err(FileEnd::Corrupt);
    }
    let mut topic_id = [0u8; 16];
    topic_id.copy_from_slice(&data[8..24]);
    let partition = i32::from_be_bytes([data[24], data[25], data[26], data[27]]);
    if is_marker {
        let well_formed = partition == END_MARKER_PARTITION && topic_id == [0u8; 16];
        return if well_formed {
            Ok(Decoded::Marker)
        } else {
            Err(FileEnd::Corrupt)
        };
    }
    let batch = &data[ENTRY_HEADER_LEN..total];
    if batch::batch_len_within(batch) != Some(batch.len()) {
        return Err(FileEnd::Corrupt);
    }
    Ok(Decoded::Entry(
        total,
        Entry {
            topic_id: TopicId(topic_id),
            partition,
            batch,
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

fn encode_header(seq: u64) -> [u8; FILE_HEADER_LEN as usize] {
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

    /// Turns a recycled file into journal file `seq`, if one is available.
    fn take(&self, fs: &dyn Fs, dir: &Path, seq: u64) -> io::Result<Option<Box<dyn FsFile>>> {
        let mut files = self.files.lock();
        let Some(old) = files.pop() else {
            return Ok(None);
        };
        let path = dir.join(file_name(seq));
        fs.rename(&dir.join(free_file_name(old)), &path)?;
        fs.open(&path, OpenMode::Existing).map(Some)
    }
}

/// The journal's append side. Owned by the committer thread (or by `open` before the
/// committer starts); not shared.
#[derive(Debug)]
pub(crate) struct JournalWriter {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    pool: Arc<FreePool>,
    seq: u64,
    file: Box<dyn FsFile>,
    /// Bytes written to the current file, header included.
    len: u64,
    file_bytes_max: u64,
}

impl JournalWriter {
    /// Sets up journal file `seq` (a recycled file if the pool has one), writes its header
    /// and fsyncs the directory, so the file survives a crash before anything in it is
    /// acknowledged.
    pub(crate) fn create(
        fs: Arc<dyn Fs>,
        dir: &Path,
        pool: Arc<FreePool>,
        seq: u64,
        file_bytes_max: u64,
    ) -> io::Result<Self> {
        let file = open_file(fs.as_ref(), dir, &pool, seq)?;
        Ok(Self {
            fs,
            dir: dir.to_owned(),
            pool,
            seq,
            file,
            len: FILE_HEADER_LEN,
            file_bytes_max,
        })
    }

    pub(crate) fn position(&self) -> JournalPosition {
        JournalPosition {
            seq: self.seq,
            offset: self.len,
        }
    }

    /// The sequence number entries of the next round must be encoded with.
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// Called before a round of at most `round_bytes` is encoded: moves to a new file when
    /// the round would push the current one past its limit. A round is never split across
    /// files, so a file exceeds the limit only when one round alone is larger than it.
    pub(crate) fn reserve(&mut self, round_bytes: u64) -> io::Result<()> {
        let would_exceed = self.len + round_bytes > self.file_bytes_max;
        if would_exceed && self.len > FILE_HEADER_LEN {
            self.roll()?;
        }
        Ok(())
    }

    /// Appends a whole commit round (encoded with [`Self::seq`]).
    pub(crate) fn append(&mut self, round: &[u8]) -> io::Result<JournalPosition> {
        fs::write_all_at(self.file.as_ref(), round, self.len)?;
        self.len += round.len() as u64;
        Ok(self.position())
    }

    /// Ends the current file with the end marker and syncs it (so replay knows to go on to
    /// the next file even if this one was recycled), then moves to file `seq + 1`.
    fn roll(&mut self) -> io::Result<()> {
        fs::write_all_at(self.file.as_ref(), &encode_end_marker(self.seq), self.len)?;
        self.file.sync_data()?;
        let next = self.seq + 1;
        self.file = open_file(self.fs.as_ref(), &self.dir, &self.pool, next)?;
        self.seq = next;
        self.len = FILE_HEADER_LEN;
        tracing::debug!(seq = next, "journal rolled to a new file");
        Ok(())
    }

    /// After a refused round (no space): cuts the file back to `round_start` (the
    /// position before the round) and syncs the cut. The round may have reached the file
    /// in part, or whole and synced (when its segment writes were the ones refused); no
    /// entry of it may survive a crash, since the next round reuses its offsets and its
    /// CRC would be valid (same file sequence number). The next round is written at
    /// `round_start`.
    pub(crate) fn discard_round(&mut self, round_start: JournalPosition) -> io::Result<()> {
        debug_assert_eq!(round_start.seq, self.seq, "a round never spans two files");
        debug_assert!(round_start.offset <= self.len);
        self.len = round_start.offset;
        self.file.set_len(self.len)?;
        self.file.sync_data()
    }

    /// `fdatasync` of the current file: covers every round appended since the last sync.
    pub(crate) fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

fn open_file(fs: &dyn Fs, dir: &Path, pool: &FreePool, seq: u64) -> io::Result<Box<dyn FsFile>> {
    let file = match pool.take(fs, dir, seq)? {
        Some(recycled) => recycled,
        None => fs.open(&dir.join(file_name(seq)), OpenMode::CreateTruncate)?,
    };
    fs::write_all_at(file.as_ref(), &encode_header(seq), 0)?;
    fs.sync_dir(dir)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::batch;

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
        let (end, how) = read_entries(&buf, 9, 0, |e| seen.push((e.partition, e.batch.len())));
        assert_eq!((end as usize, how), (buf.len(), FileEnd::Eof));
        assert_eq!(seen, vec![(3, b.len()), (4, b.len())]);

        let (end, how) = read_entries(&buf[..buf.len() - 3], 9, 0, |_| {});
        assert_eq!((end as usize, how), (first.end, FileEnd::Torn));
        let mut flipped = buf.clone();
        flipped[first.end + 40] ^= 0x10;
        let (end, how) = read_entries(&flipped, 9, 0, |_| {});
        assert_eq!((end as usize, how), (first.end, FileEnd::Corrupt));
        let (end, how) = read_entries(&buf, 10, 0, |_| {});
        assert_eq!(
            (end, how),
            (0, FileEnd::Corrupt),
            "entries of another file incarnation never validate"
        );

        let mut ended = buf.clone();
        ended.extend_from_slice(&encode_end_marker(9));
        ended.extend_from_slice(&[0xAB; 100]);
        let (end, how) = read_entries(&ended, 9, 0, |_| {});
        assert_eq!((end as usize, how), (buf.len(), FileEnd::Marker));
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
        let mut writer =
            JournalWriter::create(Arc::clone(&fs), dir.path(), Arc::clone(&pool), 1, 4096)
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
        let (_, how) = read_entries(&recycled, 3, FILE_HEADER_LEN, |_| {
            panic!("stale entry accepted")
        });
        assert_ne!(how, FileEnd::Marker);
        let second = fs::read_file(fs.as_ref(), &dir.path().join(file_name(2))).expect("read");
        let mut entries = 0;
        let (_, how) = read_entries(&second, 2, FILE_HEADER_LEN, |_| entries += 1);
        assert_eq!((entries, how), (1, FileEnd::Marker));
    }
}
