//! Direct reads of the journal for fetches of a backlog (`sluice.journal.direct.io`).
//!
//! A journal written with `O_DIRECT` leaves nothing in the page cache: bytes older than the
//! in-memory tail (`journal_tail`) are only on disk. Read through the page cache (the
//! header walk's `pread`s, then `sendfile`), they came in requests of about 90 KiB, and on
//! a VM every request is an exit to the hypervisor and an interrupt (docs/performance.md).
//! Here a fetch reads such bytes instead in aligned windows of
//! [`FETCH_DIRECT_READ_BYTES`] (window `i` of a file is its bytes `[i * W, (i + 1) * W)`),
//! each with one `O_DIRECT` read ([`crate::fs::FsFile::read_direct_at`]) into page-aligned
//! memory, and serves the header walk and the records from that memory, the records as
//! `Bytes` slices sent like the tail's. The windows are kept and shared: the partitions of
//! a topic are interleaved in the journal, so one window holds the next records of all of
//! them, and a consumer's next fetch continues in the window its last one ended in. After
//! a fetch, its reader thread reads the next window ahead ([`read_ahead`]) while the
//! response is written.
//!
//! Who reads: only fetches (a [`FillScope`] on the thread, entered by the partition's
//! ranged read) read windows in; any read may use a window already in memory. Blocking
//! file I/O, so only on the threads that run fetch reads (never an async worker).
//!
//! Guarantees:
//! - A window holds only bytes that were final when it was read: below the file's
//!   [`JournalFile::stable_len`] (rounds the writer completed; a journal file's bytes are
//!   never rewritten while it lives: see `journal`), so it never serves a stale or torn
//!   byte, and a read past its end reads the window again. Windows are keyed by the journal
//!   file's sequence number, which no other file ever gets (a recycled file is renamed to a
//!   new one), so a window of a retired file is never hit again; windows do not hold their
//!   files.
//! - Memory written by a read is held by nothing else: a buffer is reused only when no
//!   `Bytes` of it is left outside the cache (the reference count of its allocation says
//!   so); a window whose bytes a response still holds stays as it is.
//! - Bounded: all window memory, cached or pinned by responses, is at most
//!   [`FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX`]. When no buffer is free the fetch reads
//!   through the page cache as before (a [`crate::FileRange`] sent with `sendfile`); so do
//!   file systems that refuse `O_DIRECT` (the read fails with `Unsupported`) and files
//!   written without direct I/O. No allocation per fetch in steady state: buffers are reused;
//!   only reading a window in allocates (its `Bytes` owner, once per window).

use std::cell::{Cell, RefCell};
use std::io;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::config::{
    FETCH_DIRECT_READ_AHEAD_BYTES, FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX, FETCH_DIRECT_READ_BYTES,
};
use crate::fs::DIRECT_IO_ALIGN;
use crate::journal::JournalFile;
use crate::journal_tail::{AlignedAlloc, ChunkOwner};
use crate::record_slices::RecordSlice;

const WINDOW: u64 = FETCH_DIRECT_READ_BYTES as u64;
const PAGE: u64 = DIRECT_IO_ALIGN as u64;
const PAGES: usize = FETCH_DIRECT_READ_BYTES / DIRECT_IO_ALIGN;
const PAGE_WORDS: usize = PAGES.div_ceil(64);

/// Window `index` of file `seq`: the file's bytes `[index * WINDOW, (index + 1) * WINDOW)`,
/// of which the pages marked in `valid` have been read (only final bytes: see the module
/// header). Pages are read in only as a fetch needs them, so a window of a journal whose
/// partitions interleave holds just the partitions' bytes that were asked for.
#[derive(Debug)]
struct Window {
    seq: u64,
    index: u64,
    valid: [u64; PAGE_WORDS],
    /// A read into this window is under way (by one thread; others read through the page
    /// cache meanwhile, and the window is not evicted).
    busy: bool,
    /// The whole buffer as `Bytes`; readers get slices of valid pages (no allocation per
    /// slice).
    bytes: Bytes,
    alloc: Arc<AlignedAlloc>,
    /// When it was last used (the cache's clock): the least recently used goes first.
    used: u64,
}

impl Window {
    fn is_valid(&self, page: usize) -> bool {
        self.valid[page / 64] & (1 << (page % 64)) != 0
    }

    /// Whether every page of bytes `[from, to)` of the window is valid.
    fn holds(&self, from: usize, to: usize) -> bool {
        let (first, end) = (from / DIRECT_IO_ALIGN, to.div_ceil(DIRECT_IO_ALIGN));
        (first..end).all(|p| self.is_valid(p))
    }

    fn mark_valid(&mut self, pages: std::ops::Range<usize>) {
        for p in pages {
            self.valid[p / 64] |= 1 << (p % 64);
        }
    }
}

#[derive(Debug, Default)]
struct Windows {
    cached: Vec<Window>,
    /// Buffers no window and no response holds, for the next window.
    free: Vec<Arc<AlignedAlloc>>,
    clock: u64,
}

/// The windows of every journal file of one log.
#[derive(Debug)]
pub(crate) struct DirectReads {
    windows: Mutex<Windows>,
    /// Bytes of every live window buffer: cached, free, or pinned by responses.
    allocated: Arc<AtomicUsize>,
    reads: AtomicU64,
    read_bytes: AtomicU64,
}

thread_local! {
    /// Whether reads on this thread may read windows in (a fetch's read is running).
    static FILL: Cell<bool> = const { Cell::new(false) };
    /// The bytes after the furthest ones fetches on this thread took from windows since
    /// the last [`read_ahead`]: (file, its sequence number, file position, end of the
    /// extent they belong to). Weak: it must not keep a retired file alive.
    static NEXT: RefCell<Option<(Weak<JournalFile>, u64, u64, u64)>> = const { RefCell::new(None) };
}

/// While it lives, reads on this thread may read windows in (a fetch's read).
#[derive(Debug)]
pub(crate) struct FillScope {
    was: bool,
}

impl FillScope {
    pub(crate) fn enter() -> Self {
        Self {
            was: FILL.with(|f| f.replace(true)),
        }
    }
}

impl Drop for FillScope {
    fn drop(&mut self) {
        FILL.with(|f| f.set(self.was));
    }
}

fn filling() -> bool {
    FILL.with(Cell::get)
}

/// Remembers file position `at` of `file` for [`read_ahead`] if it lies past what was
/// remembered.
fn note_next(file: &Arc<JournalFile>, at: u64) {
    NEXT.with(|next| {
        let mut next = next.borrow_mut();
        let further = next
            .as_ref()
            .is_none_or(|(_, seq, was, _)| (file.seq, at) > (*seq, *was));
        if further {
            *next = Some((
                Arc::downgrade(file),
                file.seq,
                at,
                at + FETCH_DIRECT_READ_AHEAD_BYTES,
            ));
        }
    });
}

/// Reads in, on this thread, the window's worth of journal bytes after the furthest ones
/// the fetches on this thread took from windows since the last call, unless they are in
/// memory already (or in the tail, or not final yet, or no buffer is free). Blocking: for
/// a fetch reader thread, after it handed its results over, so the read overlaps the
/// response's write and the consumer's next request, which a sequential consumer makes
/// for the bytes that follow.
pub fn read_ahead() {
    let Some((file, _, at, end)) = NEXT.with(|next| next.borrow_mut().take()) else {
        return;
    };
    let Some(file) = file.upgrade() else { return };
    let Some(reads) = file.direct_reads.as_ref() else {
        return;
    };
    let end = end.min(file.stable_len() / PAGE * PAGE);
    let _fill = FillScope::enter();
    let mut at = at;
    while at < end && file.tail_slice(at, 1).is_none() {
        let index = at / WINDOW;
        let start = index * WINDOW;
        let to = (end - start).min(WINDOW);
        let from = (at - start) as usize;
        if reads.slice(&file, index, from, to as usize, end).is_none() {
            return;
        }
        at = start + to;
    }
}

/// Replaces the file ranges in `out[from..]` of files read directly by slices of windows
/// (read in if this thread is in a [`FillScope`]). A range that spans windows becomes one
/// slice per window; where a window cannot be had (no buffer free, a failed read, bytes
/// not final yet), the rest of the range stays a file range, sent from the page cache.
pub(crate) fn replace_file_ranges(out: &mut Vec<RecordSlice>, from: usize) {
    let mut i = from;
    while i < out.len() {
        i += 1;
        let RecordSlice::File(range) = &out[i - 1] else {
            continue;
        };
        let Some(reads) = range.file.direct_reads.as_ref() else {
            continue;
        };
        let (position, end) = (range.position(), range.position() + range.len() as u64);
        let index = position / WINDOW;
        let start = index * WINDOW;
        let stop = end.min(start + WINDOW);
        let Some(bytes) = reads.slice(
            &range.file,
            index,
            (position - start) as usize,
            (stop - start) as usize,
            end,
        ) else {
            continue;
        };
        if filling() {
            note_next(&range.file, stop);
        }
        let rest = (stop < end).then(|| range.after(stop));
        out[i - 1] = RecordSlice::Bytes(bytes);
        if let Some(rest) = rest {
            // The next turn of the loop takes the rest on from the next window.
            out.insert(i, RecordSlice::File(rest));
        }
    }
}

impl DirectReads {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            windows: Mutex::new(Windows::default()),
            allocated: Arc::new(AtomicUsize::new(0)),
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
        })
    }

    /// Direct reads done, and the bytes they read (for the log's statistics).
    pub(crate) fn counters(&self) -> (u64, u64) {
        (
            self.reads.load(Ordering::Relaxed),
            self.read_bytes.load(Ordering::Relaxed),
        )
    }

    /// Bytes of window memory alive now.
    #[cfg(test)]
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }

    /// Fills `buf` with the bytes of `file` at `position` from windows (read in if this
    /// thread may, together with what follows up to `hint_end`, the end of the extent they
    /// belong to); false if some are not to be had (then `buf` may be partly written).
    pub(crate) fn read(
        &self,
        file: &Arc<JournalFile>,
        buf: &mut [u8],
        position: u64,
        hint_end: u64,
    ) -> bool {
        self.copy(file, position, buf.len(), hint_end, |at, bytes| {
            buf[at..at + bytes.len()].copy_from_slice(bytes);
        })
    }

    /// [`Self::read`] into memory that may be uninitialized.
    pub(crate) fn read_uninit(
        &self,
        file: &Arc<JournalFile>,
        buf: &mut [MaybeUninit<u8>],
        position: u64,
        hint_end: u64,
    ) -> bool {
        self.copy(file, position, buf.len(), hint_end, |at, bytes| {
            for (to, from) in buf[at..at + bytes.len()].iter_mut().zip(bytes) {
                to.write(*from);
            }
        })
    }

    fn copy(
        &self,
        file: &Arc<JournalFile>,
        position: u64,
        len: usize,
        hint_end: u64,
        mut put: impl FnMut(usize, &[u8]),
    ) -> bool {
        let end = position + len as u64;
        let mut at = position;
        while at < end {
            let index = at / WINDOW;
            let start = index * WINDOW;
            let stop = end.min(start + WINDOW);
            let from = (at - start) as usize;
            let to = (stop - start) as usize;
            let Some(bytes) = self.slice(file, index, from, to, hint_end.max(end)) else {
                return false;
            };
            put((at - position) as usize, &bytes);
            at = stop;
        }
        true
    }

    /// Bytes `[from, to)` of window `index` of `file`: from memory, else (if this thread
    /// may) read in with the pages after them up to file position `hint_end` (within the
    /// window), one direct read per run of pages not yet read.
    fn slice(
        &self,
        file: &Arc<JournalFile>,
        index: u64,
        from: usize,
        to: usize,
        hint_end: u64,
    ) -> Option<Bytes> {
        let start = index * WINDOW;
        loop {
            let mut windows = self.windows.lock();
            windows.clock += 1;
            let clock = windows.clock;
            let found = windows
                .cached
                .iter()
                .position(|w| w.seq == file.seq && w.index == index);
            if let Some(at) = found {
                let window = &mut windows.cached[at];
                window.used = clock;
                if window.holds(from, to) {
                    return Some(window.bytes.slice(from..to));
                }
            }
            if !filling() {
                return None;
            }
            // Only whole pages of final bytes are read in.
            let final_pages = (file.stable_len().saturating_sub(start) / PAGE).min(PAGES as u64);
            let final_pages = final_pages as usize;
            if to.div_ceil(DIRECT_IO_ALIGN) > final_pages {
                return None;
            }
            let at = match found {
                Some(at) if windows.cached[at].busy => return None,
                Some(at) => at,
                None => {
                    let alloc = take_buffer(&mut windows, &self.allocated)?;
                    windows.cached.push(Window {
                        seq: file.seq,
                        index,
                        valid: [0; PAGE_WORDS],
                        busy: false,
                        bytes: Bytes::from_owner(ChunkOwner(Arc::clone(&alloc))),
                        alloc,
                        used: clock,
                    });
                    windows.cached.len() - 1
                }
            };
            // The run of pages to read: from the first one missing, on while missing, up to
            // the hint (the extent's end) and the final bytes.
            let window = &mut windows.cached[at];
            let first = (from / DIRECT_IO_ALIGN..to.div_ceil(DIRECT_IO_ALIGN))
                .find(|&p| !window.is_valid(p))
                .expect("a page is missing");
            let hint_pages = hint_end.saturating_sub(start).div_ceil(PAGE) as usize;
            let limit = hint_pages.max(to.div_ceil(DIRECT_IO_ALIGN)).min(final_pages);
            let end = (first..limit)
                .find(|&p| window.is_valid(p))
                .unwrap_or(limit);
            window.busy = true;
            let alloc = Arc::clone(&window.alloc);
            drop(windows);
            let got = self.read_pages(file, &alloc, start, first..end);
            let mut windows = self.windows.lock();
            let window = windows
                .cached
                .iter_mut()
                .find(|w| w.seq == file.seq && w.index == index)
                .expect("a busy window stays");
            window.busy = false;
            let read = got?;
            if read == 0 {
                return None;
            }
            window.mark_valid(first..first + read);
        }
    }

    /// Reads pages `pages` of the window at file position `start` into `alloc` with one
    /// direct read; returns the pages read whole (fewer at the end of the file). `None` if
    /// the read failed (the caller then reads through the page cache, which reports a real
    /// error).
    fn read_pages(
        &self,
        file: &JournalFile,
        alloc: &AlignedAlloc,
        start: u64,
        pages: std::ops::Range<usize>,
    ) -> Option<usize> {
        let (at, len) = (
            pages.start * DIRECT_IO_ALIGN,
            pages.len() * DIRECT_IO_ALIGN,
        );
        // SAFETY: these pages are not valid, so no reader has a slice of them, and the
        // window is busy, so no other thread writes them; they lie within the buffer.
        #[allow(unsafe_code)]
        let buf = unsafe { alloc.window_mut(at, len) };
        match read_direct_full(file, buf, start + at as u64) {
            Ok(got) => {
                self.reads.fetch_add(1, Ordering::Relaxed);
                self.read_bytes.fetch_add(got as u64, Ordering::Relaxed);
                Some(got / DIRECT_IO_ALIGN)
            }
            Err(error) => {
                tracing::debug!(%error, seq = file.seq, "direct read of journal pages failed; reading through the page cache");
                None
            }
        }
    }
}

/// A buffer for a new window: a free one, new memory within the bound, or the least
/// recently used window's whose bytes no response holds (a window a response still sends
/// from stays as it is).
fn take_buffer(windows: &mut Windows, allocated: &Arc<AtomicUsize>) -> Option<Arc<AlignedAlloc>> {
    if let Some(alloc) = windows.free.pop() {
        return Some(alloc);
    }
    if allocated.load(Ordering::Relaxed) + FETCH_DIRECT_READ_BYTES
        <= FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX
    {
        // Under the lock, so two readers cannot both take the last room.
        return Some(AlignedAlloc::new(FETCH_DIRECT_READ_BYTES, allocated));
    }
    let mut order = [(u64::MAX, usize::MAX); WINDOWS_MAX];
    for (slot, (at, w)) in order.iter_mut().zip(windows.cached.iter().enumerate()) {
        *slot = (w.used, at);
    }
    order.sort_unstable();
    for &(_, at) in order.iter().take(windows.cached.len()) {
        let window = &mut windows.cached[at];
        if window.busy {
            continue;
        }
        // Dropping the window's own `Bytes` leaves only outside holders of its memory.
        window.bytes = Bytes::new();
        if Arc::strong_count(&window.alloc) == 1 {
            return Some(windows.cached.swap_remove(at).alloc);
        }
        // A response still sends from it: it stays, with a new handle on the same
        // (unchanged) memory.
        window.bytes = Bytes::from_owner(ChunkOwner(Arc::clone(&window.alloc)));
    }
    None
}

/// Most windows alive at once (each has its own buffer).
const WINDOWS_MAX: usize = FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX / FETCH_DIRECT_READ_BYTES;

/// Reads as much of `buf` as the file holds at `offset` with direct reads: short only at
/// the end of the file.
fn read_direct_full(file: &JournalFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.file.read_direct_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => {
                got += n;
                if !n.is_multiple_of(DIRECT_IO_ALIGN) {
                    break; // the end of the file
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(test)]
impl DirectReads {
    /// Whether window `index` of file `seq` holds bytes `[from, to)`.
    fn in_memory(&self, seq: u64, index: u64, from: usize, to: usize) -> bool {
        let windows = self.windows.lock();
        windows
            .cached
            .iter()
            .any(|w| w.seq == seq && w.index == index && w.holds(from, to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Fs, OpenMode};
    use crate::sim_fs::SimFs;
    use std::path::Path;

    const W: usize = FETCH_DIRECT_READ_BYTES;
    const P: u64 = DIRECT_IO_ALIGN as u64;

    fn byte_at(position: usize) -> u8 {
        (position % 251) as u8 ^ (position / W) as u8
    }

    /// A simulated journal file of `windows` windows of known bytes, read through `reads`.
    fn journal_file(reads: &Arc<DirectReads>, windows: usize, stable: u64) -> Arc<JournalFile> {
        let fs = SimFs::new();
        fs.create_dir_all(Path::new("/j")).unwrap();
        let file = fs
            .open(Path::new("/j/1.wal"), OpenMode::CreateTruncate)
            .unwrap();
        let data: Vec<u8> = (0..windows * W).map(byte_at).collect();
        crate::fs::write_all_at(file.as_ref(), &data, 0).unwrap();
        JournalFile::with(7, file, None, Some(Arc::clone(reads)), stable)
    }

    fn expect_bytes(got: &[u8], position: usize) {
        let want: Vec<u8> = (position..position + got.len()).map(byte_at).collect();
        assert!(got == want.as_slice(), "bytes at {position} differ");
    }

    #[test]
    fn only_final_pages_a_fetch_needs_are_read_in() {
        let reads = DirectReads::new();
        let stable = (W + W / 4) as u64;
        let file = journal_file(&reads, 3, stable);
        let mut buf = vec![0u8; 100];
        let at = (W + 10) as u64;
        assert!(
            !reads.read(&file, &mut buf, at, at + 100),
            "outside a fetch nothing is read in"
        );
        assert_eq!(reads.counters().0, 0);
        let _fill = FillScope::enter();
        // Just the page needed (the extent ends there).
        assert!(reads.read(&file, &mut buf, at, at + 100));
        expect_bytes(&buf, at as usize);
        assert_eq!(reads.counters(), (1, P));
        // The next page is missing: it is read with the rest of its extent, up to the
        // final bytes, in one read.
        let at = (W + 5000) as u64;
        assert!(reads.read(&file, &mut buf, at, 2 * W as u64));
        expect_bytes(&buf, at as usize);
        assert_eq!(reads.counters(), (2, P + (W / 4) as u64 - P));
        // Past the final bytes: not read (they may still be written).
        assert!(!reads.read(&file, &mut buf, stable, stable + 100));
        assert_eq!(reads.counters().0, 2);
        // Once final, they are.
        file.set_stable_len(3 * W as u64);
        assert!(reads.read(&file, &mut buf, stable, 2 * W as u64));
        expect_bytes(&buf, stable as usize);
        assert_eq!(reads.counters(), (3, W as u64));
        // Across a window boundary: the next window is read in too.
        let mut across = vec![0u8; 5000];
        let at = (2 * W - 2000) as u64;
        assert!(reads.read(&file, &mut across, at, at + 5000));
        expect_bytes(&across, at as usize);
        assert_eq!(reads.counters().0, 5);
        // In memory now: no more reads, and a read outside a fetch may use it.
        drop(_fill);
        assert!(reads.read(&file, &mut buf, at, at + 100));
        assert_eq!(reads.counters().0, 5);
    }

    #[test]
    fn pinned_windows_are_never_reused_and_memory_stays_bounded() {
        let reads = DirectReads::new();
        let kept = WINDOWS_MAX;
        let file = journal_file(&reads, kept + 2, u64::MAX);
        let _fill = FillScope::enter();
        let end = u64::MAX;
        let mut pins: Vec<Bytes> = (0..kept)
            .map(|i| reads.slice(&file, i as u64, 0, W, end).expect("read in"))
            .collect();
        assert_eq!(reads.allocated_bytes(), FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX);
        assert!(
            reads.slice(&file, kept as u64, 0, 10, end).is_none(),
            "every buffer is pinned: the fetch reads through the page cache"
        );
        assert_eq!(reads.allocated_bytes(), FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX);
        // Pinned windows stay usable and untouched.
        for (i, pin) in pins.iter().enumerate() {
            expect_bytes(pin, i * W);
            assert!(reads.in_memory(7, i as u64, 0, W));
        }
        // One let go: its buffer takes the next window; the others stay as they are.
        drop(pins.remove(0));
        let next = reads.slice(&file, kept as u64, 0, W, end).expect("read in");
        expect_bytes(&next, kept * W);
        assert!(!reads.in_memory(7, 0, 0, 1), "window 0 gave way");
        for (i, pin) in pins.iter().enumerate() {
            expect_bytes(pin, (i + 1) * W);
        }
        assert_eq!(reads.allocated_bytes(), FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX);
        assert_eq!(reads.counters().0, kept as u64 + 1);
    }

    #[test]
    fn read_ahead_reads_on_from_the_furthest_bytes_taken() {
        let reads = DirectReads::new();
        let windows = 2 + (FETCH_DIRECT_READ_AHEAD_BYTES as usize).div_ceil(W);
        let file = journal_file(&reads, windows + 1, u64::MAX);
        {
            let _fill = FillScope::enter();
            assert!(reads.slice(&file, 1, 0, W, 2 * W as u64).is_some());
            note_next(&file, 2 * W as u64);
            note_next(&file, W as u64); // an earlier one does not move it back
        }
        read_ahead();
        let ahead = FETCH_DIRECT_READ_AHEAD_BYTES as usize;
        for at in (2 * W..2 * W + ahead).step_by(W) {
            let index = (at / W) as u64;
            let to = (2 * W + ahead - at).min(W);
            assert!(reads.in_memory(7, index, 0, to), "{at} read ahead");
        }
        assert!(!reads.in_memory(7, ((2 * W + ahead) / W) as u64, 0, W));
        let done = reads.counters().0;
        read_ahead();
        assert_eq!(reads.counters().0, done, "nothing more noted");
    }
}
