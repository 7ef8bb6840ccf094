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

use crate::config::{FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX, FETCH_DIRECT_READ_BYTES};
use crate::fs::DIRECT_IO_ALIGN;
use crate::journal::JournalFile;
use crate::journal_tail::{AlignedAlloc, ChunkOwner};
use crate::record_slices::RecordSlice;

const WINDOW: u64 = FETCH_DIRECT_READ_BYTES as u64;

/// A window read in: bytes `[index * WINDOW, index * WINDOW + bytes.len())` of file `seq`.
#[derive(Debug)]
struct Window {
    seq: u64,
    index: u64,
    /// The valid bytes, as `Bytes` readers get slices of (no allocation per slice).
    bytes: Bytes,
    alloc: Arc<AlignedAlloc>,
    /// When it was last used (the cache's clock): the least recently used goes first.
    used: u64,
}

#[derive(Debug, Default)]
struct Windows {
    cached: Vec<Window>,
    /// Buffers no window and no response holds, for the next read.
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
    /// The window after the furthest one fetches on this thread read from since the last
    /// [`read_ahead`]: (file, its sequence number, window index). Weak: it must not keep a
    /// retired file alive.
    static NEXT: RefCell<Option<(Weak<JournalFile>, u64, u64)>> = const { RefCell::new(None) };
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

/// Remembers window `index` of `file` for [`read_ahead`] if it lies past what was
/// remembered.
fn note_next(file: &Arc<JournalFile>, index: u64) {
    NEXT.with(|next| {
        let mut next = next.borrow_mut();
        let further = next
            .as_ref()
            .is_none_or(|(_, seq, at)| (file.seq, index) > (*seq, *at));
        if further {
            *next = Some((Arc::downgrade(file), file.seq, index));
        }
    });
}

/// Reads in, on this thread, the window after the furthest one the fetches on this thread
/// read from since the last call, unless it is in memory already (or in the tail, or past
/// what the file holds, or no buffer is free). Blocking: for a fetch reader thread, after
/// it handed its results over, so the read overlaps the response's write and the
/// consumer's next request, which a sequential consumer makes for the bytes that follow.
pub fn read_ahead() {
    let Some((file, _, index)) = NEXT.with(|next| next.borrow_mut().take()) else {
        return;
    };
    let Some(file) = file.upgrade() else { return };
    let Some(reads) = file.direct_reads.as_ref() else {
        return;
    };
    let start = index * WINDOW;
    if start >= file.stable_len() || file.tail_slice(start, 1).is_some() {
        return;
    }
    if reads.cached(file.seq, index, 1).is_some() {
        return;
    }
    let _fill = FillScope::enter();
    let _ = reads.fill(&file, index, 1);
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
        ) else {
            continue;
        };
        if filling() {
            note_next(&range.file, index + 1);
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
    /// thread may); false if some are not to be had (then `buf` may be partly written).
    pub(crate) fn read(&self, file: &Arc<JournalFile>, buf: &mut [u8], position: u64) -> bool {
        self.copy(file, position, buf.len(), |at, bytes| {
            buf[at..at + bytes.len()].copy_from_slice(bytes);
        })
    }

    /// [`Self::read`] into memory that may be uninitialized.
    pub(crate) fn read_uninit(
        &self,
        file: &Arc<JournalFile>,
        buf: &mut [MaybeUninit<u8>],
        position: u64,
    ) -> bool {
        self.copy(file, position, buf.len(), |at, bytes| {
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
        mut put: impl FnMut(usize, &[u8]),
    ) -> bool {
        let end = position + len as u64;
        let mut at = position;
        while at < end {
            let index = at / WINDOW;
            let start = index * WINDOW;
            let stop = end.min(start + WINDOW);
            let from = (at - start) as usize;
            let Some(bytes) = self.slice(file, index, from, (stop - start) as usize) else {
                return false;
            };
            put((at - position) as usize, &bytes);
            at = stop;
        }
        true
    }

    /// Bytes `[from, to)` of window `index` of `file`: from memory, else read in if this
    /// thread may.
    fn slice(&self, file: &Arc<JournalFile>, index: u64, from: usize, to: usize) -> Option<Bytes> {
        if let Some(bytes) = self.cached(file.seq, index, to) {
            return Some(bytes.slice(from..to));
        }
        if !filling() {
            return None;
        }
        Some(self.fill(file, index, to)?.slice(from..to))
    }

    /// Window `index` of file `seq` if it is in memory with at least `need` bytes.
    fn cached(&self, seq: u64, index: u64, need: usize) -> Option<Bytes> {
        let mut windows = self.windows.lock();
        windows.clock += 1;
        let clock = windows.clock;
        let window = windows
            .cached
            .iter_mut()
            .find(|w| w.seq == seq && w.index == index && need <= w.bytes.len())?;
        window.used = clock;
        Some(window.bytes.clone())
    }

    /// Reads window `index` of `file` with one direct read into a free buffer and keeps it.
    /// `None` when the window's first `need` bytes are not all final yet, when no buffer is
    /// free, or when the read fails (the caller then reads through the page cache, which
    /// reports a real error).
    fn fill(&self, file: &Arc<JournalFile>, index: u64, need: usize) -> Option<Bytes> {
        let start = index * WINDOW;
        let stable = file.stable_len();
        if start + need as u64 > stable {
            return None;
        }
        let alloc = self.take_buffer()?;
        let want = (stable - start).min(WINDOW) as usize;
        let want = want.next_multiple_of(DIRECT_IO_ALIGN);
        // SAFETY: `alloc` is held by nothing but this call (a new buffer, a free one, or
        // one whose last `Bytes` is gone), and no `Bytes` of it is made before the read
        // has ended.
        #[allow(unsafe_code)]
        let buf = unsafe { alloc.window_mut(0, want) };
        let got = match read_direct_full(file, buf, start) {
            Ok(got) => got,
            Err(error) => {
                tracing::debug!(%error, seq = file.seq, start, "direct read of a journal window failed; reading through the page cache");
                self.windows.lock().free.push(alloc);
                return None;
            }
        };
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(got as u64, Ordering::Relaxed);
        let valid = (got as u64).min(stable - start) as usize;
        if valid < need {
            // The file is shorter than its final bytes: the page-cache read reports it.
            self.windows.lock().free.push(alloc);
            return None;
        }
        let bytes = Bytes::from_owner(ChunkOwner(Arc::clone(&alloc))).slice(..valid);
        let mut windows = self.windows.lock();
        windows.clock += 1;
        let used = windows.clock;
        // A window of the same bytes read before with fewer final bytes (or by another
        // reader meanwhile) gives way to this one.
        while let Some(at) = windows
            .cached
            .iter()
            .position(|w| w.seq == file.seq && w.index == index)
        {
            let old = windows.cached.swap_remove(at);
            reclaim(old, &mut windows);
        }
        windows.cached.push(Window {
            seq: file.seq,
            index,
            bytes: bytes.clone(),
            alloc,
            used,
        });
        Some(bytes)
    }

    /// A buffer to read a window into: a free one, new memory within the bound, or the
    /// least recently used window's whose bytes no response holds.
    fn take_buffer(&self) -> Option<Arc<AlignedAlloc>> {
        let mut windows = self.windows.lock();
        if let Some(alloc) = windows.free.pop() {
            return Some(alloc);
        }
        let allocated = self.allocated.load(Ordering::Relaxed);
        if allocated + FETCH_DIRECT_READ_BYTES <= FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX {
            // Under the lock, so two readers cannot both take the last room.
            return Some(AlignedAlloc::new(FETCH_DIRECT_READ_BYTES, &self.allocated));
        }
        let mut order: [(u64, usize); FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX
            / FETCH_DIRECT_READ_BYTES] = [(u64::MAX, usize::MAX);
            FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX / FETCH_DIRECT_READ_BYTES];
        for (slot, (at, w)) in order.iter_mut().zip(windows.cached.iter().enumerate()) {
            *slot = (w.used, at);
        }
        order.sort_unstable();
        for &(_, at) in order.iter().take(windows.cached.len()) {
            let window = &mut windows.cached[at];
            // Dropping the window's own `Bytes` leaves only outside holders of its memory.
            let valid = window.bytes.len();
            window.bytes = Bytes::new();
            if Arc::strong_count(&window.alloc) == 1 {
                return Some(windows.cached.swap_remove(at).alloc);
            }
            // A response still sends from it: it stays, with a new handle on the same
            // (unchanged) bytes.
            window.bytes =
                Bytes::from_owner(ChunkOwner(Arc::clone(&window.alloc))).slice(..valid);
        }
        None
    }
}

/// Puts a window that left the cache back in the free list, unless a response still holds
/// its memory (which is then freed when the response lets go).
fn reclaim(window: Window, windows: &mut Windows) {
    let Window { bytes, alloc, .. } = window;
    drop(bytes);
    if Arc::strong_count(&alloc) == 1 {
        windows.free.push(alloc);
    }
}

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
mod tests {
    use super::*;
    use crate::fs::{Fs, OpenMode};
    use crate::sim_fs::SimFs;
    use std::path::Path;

    const W: usize = FETCH_DIRECT_READ_BYTES;

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
    fn windows_hold_only_final_bytes_and_only_fetches_read_them_in() {
        let reads = DirectReads::new();
        let stable = (W + W / 4) as u64;
        let file = journal_file(&reads, 3, stable);
        let mut buf = vec![0u8; 100];
        let at = W + 10;
        assert!(
            !reads.read(&file, &mut buf, at as u64),
            "outside a fetch nothing is read in"
        );
        assert_eq!(reads.counters().0, 0);
        let _fill = FillScope::enter();
        assert!(reads.read(&file, &mut buf, at as u64));
        expect_bytes(&buf, at);
        assert_eq!(reads.counters(), (1, W as u64 / 4), "one read of the final bytes");
        // Across a window boundary: the first window is read in too.
        let mut across = vec![0u8; 5000];
        assert!(reads.read(&file, &mut across, (W - 2000) as u64));
        expect_bytes(&across, W - 2000);
        assert_eq!(reads.counters().0, 2);
        // Past the final bytes: not read (the bytes may still be written).
        assert!(!reads.read(&file, &mut buf, stable));
        assert_eq!(reads.counters().0, 2);
        // Once final, the window is read again, further.
        file.set_stable_len(3 * W as u64);
        assert!(reads.read(&file, &mut buf, stable));
        expect_bytes(&buf, stable as usize);
        assert_eq!(reads.counters(), (3, W as u64 / 4 + 2 * W as u64));
        // In memory now: no more reads, and a read outside a fetch may use it.
        drop(_fill);
        assert!(reads.read(&file, &mut buf, at as u64));
        expect_bytes(&buf, at);
        assert_eq!(reads.counters().0, 3);
    }

    #[test]
    fn pinned_windows_are_never_reused_and_memory_stays_bounded() {
        let reads = DirectReads::new();
        let kept = FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX / W;
        let file = journal_file(&reads, kept + 2, u64::MAX);
        let _fill = FillScope::enter();
        let mut pins: Vec<Bytes> = (0..kept)
            .map(|i| reads.slice(&file, i as u64, 0, W).expect("read in"))
            .collect();
        assert_eq!(reads.allocated_bytes(), FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX);
        assert!(
            reads.slice(&file, kept as u64, 0, 10).is_none(),
            "every buffer is pinned: the fetch reads through the page cache"
        );
        assert_eq!(reads.allocated_bytes(), FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX);
        // Pinned windows stay usable and untouched.
        for (i, pin) in pins.iter().enumerate() {
            expect_bytes(pin, i * W);
            assert!(reads.cached(7, i as u64, W).is_some());
        }
        // One let go: its buffer takes the next window; the others stay as they are.
        drop(pins.remove(0));
        let next = reads.slice(&file, kept as u64, 0, W).expect("read in");
        expect_bytes(&next, kept * W);
        assert!(reads.cached(7, 0, 1).is_none(), "window 0 gave way");
        for (i, pin) in pins.iter().enumerate() {
            expect_bytes(pin, (i + 1) * W);
        }
        assert_eq!(reads.allocated_bytes(), FETCH_DIRECT_READ_ALLOCATED_BYTES_MAX);
        assert_eq!(reads.counters().0, kept as u64 + 1);
    }

    #[test]
    fn read_ahead_reads_the_window_after_the_furthest_one_read() {
        let reads = DirectReads::new();
        let file = journal_file(&reads, 4, u64::MAX);
        {
            let _fill = FillScope::enter();
            assert!(reads.slice(&file, 1, 0, 10).is_some());
            note_next(&file, 2);
            note_next(&file, 1); // an earlier one does not move it back
        }
        read_ahead();
        assert_eq!(reads.counters().0, 2);
        let window = reads.cached(7, 2, W).expect("read ahead");
        expect_bytes(&window, 2 * W);
        read_ahead();
        assert_eq!(reads.counters().0, 2, "nothing more noted");
    }
}
