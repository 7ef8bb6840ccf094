//! The batch CRC check of the read path: stored batches are checked before they are served,
//! at most once per segment range while the log is open.
//!
//! The fetch path sends record bytes with `sendfile(2)` from the page cache without reading
//! them into user space; checking every batch of every fetch would read (copy) and
//! checksum every byte served, each time. Instead a segment remembers which of its byte
//! ranges were read back and found intact ([`VerifiedRanges`]): a range is checked the
//! first time it is served from a journal file ([`check_batches`]: read through a pooled
//! buffer, CRC-32C of every batch), and served by `sendfile` unchecked after that. Bytes
//! served from the journal's in-memory tail are not checked: they are the bytes this
//! process wrote, whose CRC was checked when they were produced.
//!
//! Guarantees:
//! - A batch whose bytes in a journal file fail their CRC-32C (or whose length, magic or
//!   framing does not hold) is never marked verified; the caller serves only the batches
//!   before it (or fails the read, when it is the first).
//! - Verified ranges are segment positions of whole batches (ranges start and end on batch
//!   boundaries); a segment's bytes never change below its committed length, so a mark
//!   stays true as long as the media keeps what was read back (`docs/storage.md` §11).
//!   What the marks do not catch: bytes changed in the page cache after they were checked
//!   (another process writing into a running broker's journal file); `docs/storage.md` §4.
//! - Bounded: at most [`VERIFIED_RANGES_MAX`] ranges per segment (past it the smallest is
//!   forgotten, which only costs a second check), and at most [`CHECK_BUFFERS_KEPT`]
//!   buffers of [`CHECK_WINDOW_BYTES`] kept for reuse across reads.

use std::io;

use parking_lot::Mutex;

use crate::batch::{BatchHeader, BatchPrefix, CRC_START, HEADER_LEN, MAGIC_V2};
use crate::fs::{self, FsFile};
use crate::types::Offset;

/// Verified ranges kept per segment. Consumers read forward, so ranges grow and merge;
/// a few cover consumers at different places in one segment.
pub(crate) const VERIFIED_RANGES_MAX: usize = 16;
/// Bytes read per system call while checking.
pub(crate) const CHECK_WINDOW_BYTES: usize = 128 * 1024;
/// Check buffers kept for reuse (one per fetch reader thread, and some).
const CHECK_BUFFERS_KEPT: usize = 8;

/// Byte ranges `[from, to)` of a segment whose batches were read back and found intact.
#[derive(Debug, Default)]
pub(crate) struct VerifiedRanges(Mutex<Vec<(u64, u64)>>);

impl VerifiedRanges {
    /// The first stretch of `[from, to)` not verified, as `(start, end)`, or `None`.
    pub(crate) fn first_gap(&self, from: u64, to: u64) -> Option<(u64, u64)> {
        let ranges = self.0.lock();
        let mut at = from;
        for &(a, b) in ranges.iter() {
            if b <= at {
                continue;
            }
            if a > at {
                return Some((at, a.min(to))).filter(|(s, e)| s < e);
            }
            at = b;
            if at >= to {
                return None;
            }
        }
        (at < to).then_some((at, to))
    }

    /// Marks `[from, to)` verified, merging it with the ranges it touches.
    pub(crate) fn note(&self, from: u64, to: u64) {
        if from >= to {
            return;
        }
        let mut ranges = self.0.lock();
        let first = ranges.partition_point(|&(_, b)| b < from);
        let last = ranges.partition_point(|&(a, _)| a <= to);
        let (mut a, mut b) = (from, to);
        if first < last {
            a = a.min(ranges[first].0);
            b = b.max(ranges[last - 1].1);
        }
        ranges.splice(first..last, [(a, b)]);
        if ranges.len() > VERIFIED_RANGES_MAX {
            let smallest = (0..ranges.len())
                .min_by_key(|&i| ranges[i].1 - ranges[i].0)
                .unwrap_or(0);
            ranges.remove(smallest);
        }
    }

    /// Forgets every mark (the segment's bytes now come from other files).
    pub(crate) fn clear(&self) {
        self.0.lock().clear();
    }

    #[cfg(test)]
    fn ranges(&self) -> Vec<(u64, u64)> {
        self.0.lock().clone()
    }
}

/// The first batch of a checked stretch that is not intact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BadBatch {
    /// Its position in the segment.
    pub(crate) position: u64,
    /// Its base offset as stored (outside the CRC; the header walk that found the batch
    /// checked that it continues the batch before it).
    pub(crate) base_offset: Offset,
    pub(crate) why: &'static str,
}

/// Reads the whole batches that tile `[from, to)` of `file` (segment positions) and checks
/// each one's length, magic and CRC-32C; returns the first that fails. Blocking file I/O;
/// streams a batch larger than the window through it, so memory stays one window.
pub(crate) fn check_batches(file: &dyn FsFile, from: u64, to: u64) -> io::Result<Option<BadBatch>> {
    let mut window = Window::new(file, to);
    let result = check_with(&mut window, from, to);
    window.release();
    result
}

fn check_with(window: &mut Window<'_>, from: u64, to: u64) -> io::Result<Option<BadBatch>> {
    let mut position = from;
    while position < to {
        let bad = |base_offset, why| {
            Ok(Some(BadBatch {
                position,
                base_offset,
                why,
            }))
        };
        // The part of a batch header a check needs (base offset, length, epoch, magic,
        // CRC): the bytes before those the CRC covers.
        let Some(head) = window.bytes(position, CRC_START)? else {
            return bad(Offset(-1), "segment ends inside a batch header");
        };
        let prefix = BatchPrefix::parse(head).expect("CRC_START bytes");
        let (base, crc) = (prefix.base_offset(), prefix.crc());
        let Some(size) = prefix.total_size().map(|size| size as u64) else {
            return bad(base, "batch length does not fit the segment");
        };
        if position + size > to {
            return bad(base, "batch length does not fit the segment");
        }
        if prefix.magic() != MAGIC_V2 {
            return bad(base, "batch magic is not 2");
        }
        let mut sum = 0u32;
        let mut at = position + CRC_START as u64;
        let end = position + size;
        while at < end {
            let Some(part) = window.bytes_upto(at, end)? else {
                return bad(base, "segment shorter than its committed length");
            };
            sum = crc32c::crc32c_append(sum, part);
            at += part.len() as u64;
        }
        if sum != crc {
            return bad(base, "batch fails its CRC-32C");
        }
        position = end;
    }
    Ok(None)
}

/// The first position in `[from, search_to]` where a whole batch proves intact: a v2
/// header whose base offset lies in `[after, below)` and whose offsets stay below
/// `below`, a batch that ends within `limit`, and a matching CRC-32C. Byte by byte through
/// the window (a header is parsed at every position, a CRC computed only where one is
/// plausible), so it costs one pass over the stretch; reads run it only on damage they
/// found, over the stretch to the next index entry.
pub(crate) fn find_intact(
    file: &dyn FsFile,
    from: u64,
    search_to: u64,
    limit: u64,
    after: Offset,
    below: Offset,
) -> io::Result<Option<(u64, Offset)>> {
    let mut window = Window::new(file, limit);
    let result = find_with(&mut window, from, search_to, limit, after, below);
    window.release();
    result
}

fn find_with(
    window: &mut Window<'_>,
    from: u64,
    search_to: u64,
    limit: u64,
    after: Offset,
    below: Offset,
) -> io::Result<Option<(u64, Offset)>> {
    let mut position = from;
    while position <= search_to && position + HEADER_LEN as u64 <= limit {
        let Some(raw) = window.bytes(position, HEADER_LEN)? else {
            return Ok(None);
        };
        let candidate = BatchHeader::parse(raw).ok().and_then(|h| {
            let base = h.base_offset();
            let plausible = h.magic() == MAGIC_V2
                && base >= after
                && h.next_offset() <= below
                && base <= h.last_offset();
            let size = h.total_size().filter(|_| plausible)? as u64;
            (position + size <= limit).then_some((size, base))
        });
        if let Some((size, base)) = candidate {
            if check_with(window, position, position + size)?.is_none() {
                return Ok(Some((position, base)));
            }
        }
        position += 1;
    }
    Ok(None)
}

/// A read window over `[.., limit)` of a file, in a pooled buffer.
struct Window<'a> {
    file: &'a dyn FsFile,
    limit: u64,
    buf: Vec<u8>,
    start: u64,
    /// Bytes of `buf` holding the file's bytes from `start`.
    valid: usize,
}

/// Buffers kept between checks, so a fetch reader's check does not allocate.
static BUFFERS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

impl<'a> Window<'a> {
    fn new(file: &'a dyn FsFile, limit: u64) -> Self {
        let buf = BUFFERS.lock().pop().unwrap_or_default();
        Self {
            file,
            limit,
            buf,
            start: 0,
            valid: 0,
        }
    }

    /// Gives the buffer back to the pool (or drops it, when the pool is full).
    fn release(self) {
        let buf = self.buf;
        let mut pool = BUFFERS.lock();
        if pool.len() < CHECK_BUFFERS_KEPT && buf.capacity() <= CHECK_WINDOW_BYTES {
            pool.push(buf);
        }
    }

    /// Reads the window at `position`: up to [`CHECK_WINDOW_BYTES`], never past `limit`.
    /// Returns false when the file holds fewer bytes than that. The buffer is zeroed once,
    /// when first used, not before every read.
    fn fill(&mut self, position: u64) -> io::Result<bool> {
        let want = (self.limit.saturating_sub(position)).min(CHECK_WINDOW_BYTES as u64) as usize;
        if self.buf.len() < CHECK_WINDOW_BYTES {
            self.buf.resize(CHECK_WINDOW_BYTES, 0);
        }
        let read = fs::read_full_at(self.file, &mut self.buf[..want], position)?;
        (self.start, self.valid) = (position, read);
        Ok(read == want)
    }

    fn end(&self) -> u64 {
        self.start + self.valid as u64
    }

    /// Exactly `len` bytes at `position` (`len` at most a window), or `None` when the file
    /// is shorter.
    fn bytes(&mut self, position: u64, len: usize) -> io::Result<Option<&[u8]>> {
        if position < self.start || position + len as u64 > self.end() {
            self.fill(position)?;
            if position + len as u64 > self.end() {
                return Ok(None);
            }
        }
        let at = (position - self.start) as usize;
        Ok(Some(&self.buf[at..at + len]))
    }

    /// The bytes from `position` up to `end` that the window holds (reading the next
    /// window when it holds none of them), or `None` when the file ends first.
    fn bytes_upto(&mut self, position: u64, end: u64) -> io::Result<Option<&[u8]>> {
        if position < self.start || position >= self.end() {
            self.fill(position)?;
            if position >= self.end() {
                return Ok(None);
            }
        }
        let at = (position - self.start) as usize;
        let until = (end.min(self.end()) - self.start) as usize;
        Ok(Some(&self.buf[at..until]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::test_batches::batch;
    use crate::fs::{Fs, OpenMode, StdFs};

    #[test]
    fn verified_ranges_merge_report_gaps_and_stay_bounded() {
        // Goal: marks merge with what they touch, gaps are reported from the left, and the
        // list never grows past its bound (the smallest range goes first).
        let v = VerifiedRanges::default();
        assert_eq!(v.first_gap(0, 100), Some((0, 100)));
        v.note(10, 20);
        v.note(30, 40);
        assert_eq!(v.first_gap(0, 100), Some((0, 10)));
        assert_eq!(v.first_gap(10, 20), None);
        assert_eq!(v.first_gap(10, 35), Some((20, 30)));
        assert_eq!(v.first_gap(30, 40), None);
        assert_eq!(v.first_gap(35, 100), Some((40, 100)));
        v.note(20, 30);
        assert_eq!(v.ranges(), vec![(10, 40)]);
        v.note(0, 5);
        v.note(5, 10);
        assert_eq!(v.ranges(), vec![(0, 40)]);
        for i in 0..40u64 {
            v.note(100 + i * 10, 100 + i * 10 + 1 + i % 3);
        }
        let ranges = v.ranges();
        assert_eq!(ranges.len(), VERIFIED_RANGES_MAX);
        assert_eq!(ranges[0], (0, 40), "the largest range is kept");
        assert!(ranges.windows(2).all(|w| w[0].1 < w[1].0), "{ranges:?}");
        v.clear();
        assert_eq!(v.first_gap(0, 10), Some((0, 10)));
    }

    #[test]
    fn check_finds_the_first_damaged_batch_of_any_size() {
        // Goal: intact batches pass whatever their size against the window (small ones
        // sharing a read, one larger than the window streamed through it); zeroed bytes
        // inside a batch body, a bad magic and a length past the stretch are each reported
        // at that batch, with its base offset.
        let dir = tempfile::tempdir().expect("tempdir");
        let mut data = Vec::new();
        let mut starts = Vec::new();
        for (i, value_len) in [100usize, 3000, 300_000, 50, 200_000].iter().enumerate() {
            let mut b = batch(2, *value_len, i as i64);
            crate::batch::stamp_base_offset(&mut b, Offset(10 * i as i64));
            starts.push(data.len() as u64);
            data.extend_from_slice(&b);
        }
        let end = data.len() as u64;
        let path = dir.path().join("f");
        let write = |bytes: &[u8]| {
            let file = StdFs.open(&path, OpenMode::CreateTruncate).expect("open");
            fs::write_all_at(file.as_ref(), bytes, 0).expect("write");
            file
        };
        let file = write(&data);
        assert_eq!(check_batches(file.as_ref(), 0, end).expect("check"), None);
        assert_eq!(
            check_batches(file.as_ref(), starts[2], starts[4]).expect("check"),
            None
        );
        for (batch_no, at, bytes, why) in [
            (
                2usize,
                150_000u64,
                vec![0u8; 100],
                "batch fails its CRC-32C",
            ),
            (1, 100, vec![0u8; 100], "batch fails its CRC-32C"),
            (3, 16, vec![7u8], "batch magic is not 2"),
            (
                4,
                8,
                vec![0x7f, 0, 0, 0],
                "batch length does not fit the segment",
            ),
        ] {
            let mut damaged = data.clone();
            let p = (starts[batch_no] + at) as usize;
            damaged[p..p + bytes.len()].copy_from_slice(&bytes);
            let file = write(&damaged);
            let bad = check_batches(file.as_ref(), 0, end).expect("check");
            assert_eq!(
                bad,
                Some(BadBatch {
                    position: starts[batch_no],
                    base_offset: Offset(10 * batch_no as i64),
                    why,
                })
            );
        }
        let file = write(&data[..data.len() - 10]);
        let bad = check_batches(file.as_ref(), 0, end).expect("check");
        assert_eq!(bad.map(|b| b.position), Some(starts[4]), "a short file");
    }
}
