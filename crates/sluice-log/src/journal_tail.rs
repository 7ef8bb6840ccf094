//! The journal's in-memory tail, for the journal written with `O_DIRECT`
//! (`sluice.journal.direct.io`).
//!
//! A direct write must start and end on a page and come from page-aligned memory
//! ([`crate::fs::DIRECT_IO_ALIGN`]), so the committer copies each round into aligned memory
//! before its one `pwrite`. That memory is kept: rounds are laid out back to back in chunks
//! of [`JOURNAL_TAIL_CHUNK_BYTES`], and the newest chunks (at most
//! [`JOURNAL_TAIL_BYTES_MAX`]) stay published, so a fetch of what was just written is
//! served from them instead of from the disk: a direct write leaves nothing in the page
//! cache, and without the tail a tailing consumer would read every record back from the
//! device (measured: twice the fetch CPU, a fifth less throughput).
//!
//! Layout: commit rounds end on a page (the padding entry), and every round but the first
//! of a file starts on one; the first starts right after the 16-byte file header, so its
//! bytes are preceded by the header again and the write covers the file from byte 0
//! (rewriting the header with the same bytes). A chunk holds one stretch of one journal
//! file: `[file_start, file_start + len)`. A round that does not fit in the open chunk's
//! room goes on in the next chunk (two direct writes, both on pages), so rounds of any size
//! are published and no chunk is ever larger than [`JOURNAL_TAIL_CHUNK_BYTES`]; a batch
//! that straddles two chunks is read from the file.
//!
//! Guarantees:
//! - Readers ([`JournalTail::slice`]) get a `Bytes` of a published chunk only for file
//!   bytes the chunk holds whole; `len` is published (under the ring's lock) only after the
//!   round's direct write succeeded, and cut back by [`TailWriter::discard_from`] when a
//!   refused round is cut from the file, so a chunk never answers for bytes the file does
//!   not hold. Readers ask only for committed bytes (below the high watermark), which are
//!   durable and never rewritten while their file lives.
//! - Memory the writer copies into is never visible to a reader: it lies at or past the
//!   published `len` of the open chunk, and a chunk is reused only when no `Bytes` of it
//!   is left outside the ring (the reference count of its allocation says so).
//! - Bounded: the ring keeps at most [`JOURNAL_TAIL_BYTES_MAX`]; chunks pinned by responses
//!   still being written count against [`JOURNAL_TAIL_ALLOCATED_BYTES_MAX`], past which the
//!   writer stages rounds in one private chunk that readers never see (they then read the
//!   file). No allocation per round in steady state: chunks are reused.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::config::{
    JOURNAL_TAIL_ALLOCATED_BYTES_MAX, JOURNAL_TAIL_BYTES_MAX, JOURNAL_TAIL_CHUNK_BYTES,
};
use crate::fs::{self, DirectFile, DIRECT_IO_ALIGN};

/// The size of a transparent huge page on x86-64 (and the usual one on aarch64).
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Page-aligned memory of a fixed size, counted in the tail's `allocated` while it lives.
#[derive(Debug)]
struct AlignedAlloc {
    ptr: NonNull<u8>,
    cap: usize,
    allocated: Arc<AtomicUsize>,
}

// SAFETY: the allocation is plain memory owned by this value; who may write where is
// governed by the module's protocol (one writer, disjoint from what readers see).
#[allow(unsafe_code)]
unsafe impl Send for AlignedAlloc {}
#[allow(unsafe_code)]
unsafe impl Sync for AlignedAlloc {}

impl AlignedAlloc {
    /// Chunks whose size is a whole number of huge pages are aligned to one, so the kernel
    /// can back them with transparent huge pages (see `new`).
    fn layout(cap: usize) -> std::alloc::Layout {
        let align = if cap.is_multiple_of(HUGE_PAGE_BYTES) {
            HUGE_PAGE_BYTES
        } else {
            DIRECT_IO_ALIGN
        };
        std::alloc::Layout::from_size_align(cap, align).expect("tail chunk layout")
    }

    /// Zeroed memory of `cap` bytes (a multiple of the page), counted in `allocated`.
    ///
    /// Asks for transparent huge pages before the memory is first touched (`MADV_HUGEPAGE`;
    /// on this machine THP is `madvise`-only). Why: every direct write pins the pages of its
    /// buffer and hands the device one segment per physically contiguous run. With 4 KiB
    /// pages a 512 KiB round is 128 pins and 128 segments; with a 2 MiB page it is one run.
    /// The advice is only a hint: if the kernel refuses it, the chunk works with small pages.
    #[allow(unsafe_code)]
    fn new(cap: usize, allocated: &Arc<AtomicUsize>) -> Arc<Self> {
        assert!(cap > 0 && cap.is_multiple_of(DIRECT_IO_ALIGN));
        let layout = Self::layout(cap);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc(layout) };
        let Some(ptr) = NonNull::new(raw) else {
            std::alloc::handle_alloc_error(layout);
        };
        if layout.align() == HUGE_PAGE_BYTES {
            // SAFETY: the range is this allocation, aligned to a huge page; advice does not
            // change its contents or validity.
            let _ = unsafe { libc::madvise(raw.cast(), cap, libc::MADV_HUGEPAGE) };
        }
        // SAFETY: `raw` is valid for `cap` bytes; zeroing touches (and faults in) the pages
        // after the advice.
        unsafe { std::ptr::write_bytes(raw, 0, cap) };
        allocated.fetch_add(cap, Ordering::Relaxed);
        Arc::new(Self {
            ptr,
            cap,
            allocated: Arc::clone(allocated),
        })
    }

    /// The bytes `[at, at + len)` for the writer to fill.
    ///
    /// SAFETY (caller): no reader may see these bytes while the returned slice lives: they
    /// lie at or past the open chunk's published length (or in a private buffer), and only
    /// the one [`TailWriter`] calls this.
    #[allow(unsafe_code, clippy::mut_from_ref)]
    unsafe fn window_mut(&self, at: usize, len: usize) -> &mut [u8] {
        assert!(at + len <= self.cap);
        // SAFETY: in bounds (checked), and exclusive by the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(at), len) }
    }
}

impl Drop for AlignedAlloc {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.cap)) };
        self.allocated.fetch_sub(self.cap, Ordering::Relaxed);
    }
}

/// The owner behind a chunk's `Bytes`: keeps the allocation alive while any `Bytes` of it
/// does.
struct ChunkOwner(Arc<AlignedAlloc>);

impl AsRef<[u8]> for ChunkOwner {
    #[allow(unsafe_code)]
    fn as_ref(&self) -> &[u8] {
        // SAFETY: in bounds. `Bytes::from_owner` calls this once, to learn the pointer and
        // length; readers only ever look at published (fully written) sub-ranges.
        unsafe { std::slice::from_raw_parts(self.0.ptr.as_ptr(), self.0.cap) }
    }
}

/// A published chunk: file `seq`'s bytes `[file_start, file_start + len)`.
#[derive(Debug)]
struct TailChunk {
    seq: u64,
    file_start: u64,
    len: u64,
    /// The whole allocation as `Bytes`; readers get slices of it (no allocation).
    bytes: Bytes,
    alloc: Arc<AlignedAlloc>,
}

/// The published chunks, shared by the writer and every reader of the journal's files.
#[derive(Debug)]
pub(crate) struct JournalTail {
    /// Oldest first; the newest may be the writer's open chunk.
    chunks: Mutex<VecDeque<TailChunk>>,
    /// Bytes of every live chunk allocation: in the ring, pinned by responses, or staging.
    allocated: Arc<AtomicUsize>,
}

impl JournalTail {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            chunks: Mutex::new(VecDeque::new()),
            allocated: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// The bytes `[position, position + len)` of journal file `seq`, if a published chunk
    /// holds all of them.
    pub(crate) fn slice(&self, seq: u64, position: u64, len: u32) -> Option<Bytes> {
        let end = position + u64::from(len);
        let chunks = self.chunks.lock();
        let chunk = chunks
            .iter()
            .rev()
            .find(|c| c.seq == seq && c.file_start <= position && end <= c.file_start + c.len)?;
        let at = (position - chunk.file_start) as usize;
        Some(chunk.bytes.slice(at..at + len as usize))
    }

    /// How much of journal file `seq` is surely written: the end of the newest published
    /// round if it belongs to `seq`, everything if the newest round belongs to a later file,
    /// nothing otherwise (no round published yet, or only rounds staged privately: `seq`
    /// may be the file being written).
    pub(crate) fn written_end(&self, seq: u64) -> u64 {
        let chunks = self.chunks.lock();
        match chunks.back() {
            Some(newest) if newest.seq > seq => u64::MAX,
            Some(newest) if newest.seq == seq => newest.file_start + newest.len,
            _ => 0,
        }
    }

    /// Bytes of chunk memory alive now.
    #[cfg(test)]
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }
}

/// Where the writer's next round goes.
#[derive(Debug)]
struct OpenChunk {
    alloc: Arc<AlignedAlloc>,
    seq: u64,
    file_start: u64,
    /// Bytes written (and, unless `private`, published).
    filled: usize,
    /// A staging buffer readers never see (over the memory bound, or a huge round).
    private: bool,
}

/// The committer's side of the tail: lays out rounds, writes them, publishes them. One per
/// journal writer; the only writer of chunk memory.
#[derive(Debug)]
pub(crate) struct TailWriter {
    tail: Arc<JournalTail>,
    open: Option<OpenChunk>,
}

impl TailWriter {
    pub(crate) fn new(tail: Arc<JournalTail>) -> Self {
        Self { tail, open: None }
    }

    /// Lays out a round of file `seq` that goes at `offset` and writes it with direct
    /// writes, one per chunk it lands in (one, unless it fills the open chunk), publishing
    /// each part once written. `prefix` is what the file holds before `offset` on the
    /// round's first page (the file header for the first round of a file, else empty:
    /// `offset` is on a page). The round's length must bring it to a page boundary. On an
    /// error nothing of the round stays published.
    pub(crate) fn write(
        &mut self,
        file: &dyn DirectFile,
        seq: u64,
        prefix: &[u8],
        round: &[IoSlice<'_>],
        round_len: u64,
        offset: u64,
    ) -> io::Result<()> {
        let page = DIRECT_IO_ALIGN as u64;
        let start = offset - offset % page;
        assert_eq!(
            (offset - start) as usize,
            prefix.len(),
            "a round starts on a page or right after the file header"
        );
        let total = prefix.len() + usize::try_from(round_len).expect("round fits memory");
        assert_eq!(total % DIRECT_IO_ALIGN, 0, "rounds end on a page");
        let mut pieces = Pieces::new(prefix, round);
        let mut at = start;
        while at < start + total as u64 {
            let left = (start + total as u64 - at) as usize;
            let written = self.write_part(file, seq, at, left, &mut pieces);
            at += written.inspect_err(|_| self.discard_from(seq, start))? as u64;
        }
        debug_assert!(pieces.is_done());
        Ok(())
    }

    /// Copies as much of the round's remaining `left` bytes as the open chunk has room for
    /// (a whole number of pages: chunks and rounds are page multiples), writes them at `at`
    /// and publishes them. Returns the bytes written.
    fn write_part(
        &mut self,
        file: &dyn DirectFile,
        seq: u64,
        at: u64,
        left: usize,
        pieces: &mut Pieces<'_, '_>,
    ) -> io::Result<usize> {
        let open = self.open_for(seq, at);
        let n = left.min(open.alloc.cap - open.filled);
        assert!(n > 0 && n.is_multiple_of(DIRECT_IO_ALIGN));
        // SAFETY: `[filled, filled + n)` is past the published length (or private), and
        // this writer is the only one.
        #[allow(unsafe_code)]
        let out = unsafe { open.alloc.window_mut(open.filled, n) };
        pieces.copy_into(out);
        fs::write_all_direct_at(file, out, at)?;
        open.filled += n;
        if !open.private {
            self.publish();
        }
        Ok(n)
    }

    /// After a refused round was cut from file `seq` at `offset`: no chunk may answer for
    /// bytes at or past it any more (the next round rewrites them).
    pub(crate) fn discard_from(&mut self, seq: u64, offset: u64) {
        let cut = offset - offset % DIRECT_IO_ALIGN as u64;
        let mut chunks = self.tail.chunks.lock();
        for c in chunks.iter_mut().filter(|c| c.seq == seq) {
            c.len = c.len.min(cut.saturating_sub(c.file_start));
        }
        drop(chunks);
        if let Some(open) = &mut self.open {
            if open.seq == seq && open.file_start + open.filled as u64 > cut {
                // Rounds continue from the cut in a new chunk.
                self.open = None;
            }
        }
    }

    /// Publishes the open chunk's new length.
    fn publish(&self) {
        let Some(open) = &self.open else { return };
        let mut chunks = self.tail.chunks.lock();
        let newest = chunks.back_mut().expect("the open chunk is published");
        assert!(Arc::ptr_eq(&newest.alloc, &open.alloc) && newest.seq == open.seq);
        assert!(open.filled as u64 >= newest.len);
        newest.len = open.filled as u64;
    }

    /// The chunk for bytes at `at` of file `seq`: the open one if it continues there and
    /// has room, else a new one.
    fn open_for(&mut self, seq: u64, at: u64) -> &mut OpenChunk {
        let continues = self.open.as_ref().is_some_and(|o| {
            o.seq == seq && o.file_start + o.filled as u64 == at && o.filled < o.alloc.cap
        });
        if !continues {
            let next = self.next_chunk(seq, at);
            self.open = Some(next);
        }
        self.open.as_mut().expect("just opened")
    }

    /// A chunk starting a new stretch at `start` of file `seq`: the oldest published chunk
    /// reused if nothing outside the ring holds it, else new memory, else (over the bound)
    /// private staging.
    fn next_chunk(&mut self, seq: u64, start: u64) -> OpenChunk {
        let cap = JOURNAL_TAIL_CHUNK_BYTES;
        // The previous open chunk: kept only as private staging to reuse (a published one
        // lives on in the ring, and must not count as a holder of itself below).
        let staging = self.open.take().filter(|p| p.private);
        let mut chunks = self.tail.chunks.lock();
        let mut reuse = None;
        let mut kept = chunks.len() * cap;
        while reuse.is_none() && kept + cap > JOURNAL_TAIL_BYTES_MAX {
            let Some(oldest) = chunks.pop_front() else {
                break;
            };
            kept -= cap;
            let TailChunk { bytes, alloc, .. } = oldest;
            drop(bytes);
            if Arc::strong_count(&alloc) == 1 {
                reuse = Some(alloc);
            }
        }
        let over_bound =
            || self.tail.allocated.load(Ordering::Relaxed) + cap > JOURNAL_TAIL_ALLOCATED_BYTES_MAX;
        let (alloc, private) = match (reuse, staging) {
            (Some(alloc), _) => (alloc, false),
            (None, Some(staging)) if over_bound() => (staging.alloc, true),
            (None, _) if over_bound() => (AlignedAlloc::new(cap, &self.tail.allocated), true),
            (None, _) => (AlignedAlloc::new(cap, &self.tail.allocated), false),
        };
        if !private {
            chunks.push_back(TailChunk {
                seq,
                file_start: start,
                len: 0,
                bytes: Bytes::from_owner(ChunkOwner(Arc::clone(&alloc))),
                alloc: Arc::clone(&alloc),
            });
        }
        OpenChunk {
            alloc,
            seq,
            file_start: start,
            filled: 0,
            private,
        }
    }
}

/// A cursor over a round's bytes (the prefix, then the slices), copied out in parts.
struct Pieces<'a, 'b> {
    prefix: &'a [u8],
    round: std::slice::Iter<'a, IoSlice<'b>>,
    current: &'a [u8],
}

impl<'a, 'b> Pieces<'a, 'b> {
    fn new(prefix: &'a [u8], round: &'a [IoSlice<'b>]) -> Self {
        Self {
            prefix,
            round: round.iter(),
            current: &[],
        }
    }

    /// Fills `out` with the next `out.len()` bytes; panics if the round has fewer.
    fn copy_into(&mut self, out: &mut [u8]) {
        let mut at = 0;
        while at < out.len() {
            if self.current.is_empty() {
                self.current = match std::mem::take(&mut self.prefix) {
                    p if !p.is_empty() => p,
                    _ => self.round.next().expect("round shorter than its length"),
                };
                continue;
            }
            let n = self.current.len().min(out.len() - at);
            out[at..at + n].copy_from_slice(&self.current[..n]);
            self.current = &self.current[n..];
            at += n;
        }
    }

    fn is_done(&mut self) -> bool {
        self.current.is_empty() && self.prefix.is_empty() && self.round.all(|s| s.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::AlignedWrites;
    use crate::fs::{Fs, OpenMode};
    use crate::sim_fs::SimFs;
    use std::path::Path;

    fn direct_file(fs: &SimFs) -> (Box<dyn crate::fs::FsFile>, AlignedWrites) {
        fs.create_dir_all(Path::new("/d")).unwrap();
        let path = Path::new("/d/f");
        let file = fs.open(path, OpenMode::CreateTruncate).unwrap();
        let direct = AlignedWrites(fs.open(path, OpenMode::Existing).unwrap());
        (file, direct)
    }

    #[test]
    fn chunks_start_on_a_huge_page_and_are_zeroed() {
        let allocated = Arc::new(AtomicUsize::new(0));
        let chunk = AlignedAlloc::new(JOURNAL_TAIL_CHUNK_BYTES, &allocated);
        assert_eq!(chunk.ptr.as_ptr() as usize % HUGE_PAGE_BYTES, 0);
        assert_eq!(allocated.load(Ordering::Relaxed), JOURNAL_TAIL_CHUNK_BYTES);
        // SAFETY (test): nothing else sees this chunk.
        #[allow(unsafe_code)]
        let bytes = unsafe { chunk.window_mut(0, chunk.cap) };
        assert!(bytes.iter().all(|&b| b == 0));
        // A size that is not a whole huge page keeps the page alignment direct writes need.
        let small = AlignedAlloc::new(3 * DIRECT_IO_ALIGN, &allocated);
        assert_eq!(small.ptr.as_ptr() as usize % DIRECT_IO_ALIGN, 0);
        drop((chunk, small));
        assert_eq!(allocated.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn rounds_are_written_aligned_and_served_from_memory() {
        let fs = SimFs::new();
        let (file, direct) = direct_file(&fs);
        let tail = JournalTail::new();
        let mut writer = TailWriter::new(Arc::clone(&tail));
        let body = vec![7u8; 4096 - 16];
        let len = body.len() as u64;
        writer
            .write(&direct, 1, &[1u8; 16], &[IoSlice::new(&body)], len, 16)
            .unwrap();
        let second: Vec<u8> = (0..8192u32).map(|i| i as u8).collect();
        let pieces = [IoSlice::new(&second[..100]), IoSlice::new(&second[100..])];
        writer.write(&direct, 1, &[], &pieces, 8192, 4096).unwrap();
        let data = fs::read_whole(file.as_ref()).unwrap();
        assert_eq!(data.len(), 3 * 4096);
        assert_eq!(&data[..16], &[1u8; 16]);
        assert!(data[16..4096].iter().all(|&b| b == 7));
        assert_eq!(&data[4096..], &second[..]);
        // Every published byte is the file's byte; nothing past the end, no other file.
        let got = tail.slice(1, 4000, 5000).expect("in the tail");
        assert_eq!(&got[..], &data[4000..9000]);
        assert!(
            tail.slice(1, 12000, 1000).is_none(),
            "past what was written"
        );
        assert!(tail.slice(2, 4096, 10).is_none(), "another file");
    }

    #[test]
    fn written_end_is_the_newest_published_round_of_the_file() {
        let fs = SimFs::new();
        let (_file, direct) = direct_file(&fs);
        let tail = JournalTail::new();
        assert_eq!(
            tail.written_end(1),
            0,
            "nothing published: nothing known written"
        );
        let mut writer = TailWriter::new(Arc::clone(&tail));
        let body = vec![7u8; 4096 - 16];
        writer
            .write(
                &direct,
                1,
                &[1u8; 16],
                &[IoSlice::new(&body)],
                body.len() as u64,
                16,
            )
            .unwrap();
        assert_eq!(tail.written_end(1), 4096);
        let second = vec![9u8; 8192];
        writer
            .write(&direct, 1, &[], &[IoSlice::new(&second)], 8192, 4096)
            .unwrap();
        assert_eq!(tail.written_end(1), 3 * 4096, "moves with each round");
        assert_eq!(tail.written_end(0), u64::MAX, "an older file is finished");
        assert_eq!(
            tail.written_end(2),
            0,
            "a newer file: nothing known written"
        );
        writer
            .write(
                &direct,
                2,
                &[2u8; 16],
                &[IoSlice::new(&body)],
                body.len() as u64,
                16,
            )
            .unwrap();
        assert_eq!(tail.written_end(1), u64::MAX, "the writer moved on");
        assert_eq!(tail.written_end(2), 4096);
    }

    #[test]
    fn chunks_are_reused_unless_a_reader_holds_them_and_the_bound_holds() {
        let fs = SimFs::new();
        let (_file, direct) = direct_file(&fs);
        let tail = JournalTail::new();
        let mut writer = TailWriter::new(Arc::clone(&tail));
        let round = vec![3u8; JOURNAL_TAIL_CHUNK_BYTES / 2];
        let chunks_kept = JOURNAL_TAIL_BYTES_MAX / JOURNAL_TAIL_CHUNK_BYTES;
        let mut offset = 4096u64;
        let mut write = |writer: &mut TailWriter| {
            let len = round.len() as u64;
            writer
                .write(&direct, 1, &[], &[IoSlice::new(&round)], len, offset)
                .unwrap();
            offset += len;
        };
        for _ in 0..4 * chunks_kept {
            write(&mut writer);
        }
        assert_eq!(tail.allocated_bytes(), JOURNAL_TAIL_BYTES_MAX, "reused");
        // A reader pins the oldest chunk: the writer allocates beside it, never over it.
        let oldest = {
            let chunks = tail.chunks.lock();
            let c = chunks.front().unwrap();
            (c.file_start, c.len)
        };
        let pinned = tail.slice(1, oldest.0, oldest.1 as u32).unwrap();
        for _ in 0..2 * chunks_kept {
            write(&mut writer);
        }
        assert!(pinned.iter().all(|&b| b == 3), "pinned bytes untouched");
        assert_eq!(
            tail.allocated_bytes(),
            JOURNAL_TAIL_BYTES_MAX + JOURNAL_TAIL_CHUNK_BYTES
        );
        assert!(tail.slice(1, oldest.0, 10).is_none(), "left the ring");
        drop(pinned);
        for _ in 0..2 * chunks_kept {
            write(&mut writer);
        }
        assert_eq!(tail.allocated_bytes(), JOURNAL_TAIL_BYTES_MAX, "freed");
    }

    #[test]
    fn a_round_larger_than_the_room_left_goes_on_in_the_next_chunk() {
        let fs = SimFs::new();
        let (file, direct) = direct_file(&fs);
        let tail = JournalTail::new();
        let mut writer = TailWriter::new(Arc::clone(&tail));
        let first = vec![1u8; 8192];
        writer
            .write(&direct, 1, &[], &[IoSlice::new(&first)], 8192, 4096)
            .unwrap();
        // Larger than a whole chunk, in uneven pieces.
        let big: Vec<u8> = (0..JOURNAL_TAIL_CHUNK_BYTES + 3 * 4096)
            .map(|i| (i % 251) as u8)
            .collect();
        let pieces = [
            IoSlice::new(&big[..1000]),
            IoSlice::new(&big[1000..JOURNAL_TAIL_CHUNK_BYTES - 77]),
            IoSlice::new(&big[JOURNAL_TAIL_CHUNK_BYTES - 77..]),
        ];
        let at = 4096 + 8192;
        writer
            .write(&direct, 1, &[], &pieces, big.len() as u64, at)
            .unwrap();
        let data = fs::read_whole(file.as_ref()).unwrap();
        let at = at as usize;
        assert_eq!(
            &data[at..at + big.len()],
            &big[..],
            "the file holds the round"
        );
        // The first chunk began at 4096: its room ends at 4096 + CHUNK.
        let boundary = 4096 + JOURNAL_TAIL_CHUNK_BYTES;
        let before = tail
            .slice(1, (boundary - 5000) as u64, 5000)
            .expect("first chunk");
        assert_eq!(&before[..], &data[boundary - 5000..boundary]);
        let after = tail.slice(1, boundary as u64, 5000).expect("second chunk");
        assert_eq!(&after[..], &data[boundary..boundary + 5000]);
        assert!(
            tail.slice(1, (boundary - 10) as u64, 20).is_none(),
            "straddles"
        );
        assert_eq!(tail.allocated_bytes(), 2 * JOURNAL_TAIL_CHUNK_BYTES);
    }

    #[test]
    fn readers_pinning_every_chunk_never_grow_it_past_its_bound() {
        let fs = SimFs::new();
        let (file, direct) = direct_file(&fs);
        let tail = JournalTail::new();
        let mut writer = TailWriter::new(Arc::clone(&tail));
        let round = vec![6u8; JOURNAL_TAIL_CHUNK_BYTES];
        let mut pins = Vec::new();
        let mut unpublished = 0;
        for i in 0..3 * JOURNAL_TAIL_ALLOCATED_BYTES_MAX / JOURNAL_TAIL_CHUNK_BYTES {
            let at = (4096 + i * round.len()) as u64;
            let len = round.len() as u64;
            writer
                .write(&direct, 1, &[], &[IoSlice::new(&round)], len, at)
                .unwrap();
            match tail.slice(1, at, 4096) {
                Some(pin) => pins.push(pin),
                None => unpublished += 1,
            }
            assert!(
                tail.allocated_bytes()
                    <= JOURNAL_TAIL_ALLOCATED_BYTES_MAX + JOURNAL_TAIL_CHUNK_BYTES,
                "{} B allocated",
                tail.allocated_bytes()
            );
        }
        assert!(
            unpublished > 0,
            "over the bound, rounds are staged privately"
        );
        let data = fs::read_whole(file.as_ref()).unwrap();
        assert!(
            data[4096..].iter().all(|&b| b == 6),
            "every round reached the file"
        );
        drop(pins);
        let at = (4096 + 3 * JOURNAL_TAIL_ALLOCATED_BYTES_MAX) as u64;
        let len = round.len() as u64;
        writer
            .write(&direct, 1, &[], &[IoSlice::new(&round)], len, at)
            .unwrap();
        assert!(
            tail.slice(1, at, 4096).is_some(),
            "published again once let go"
        );
    }

    #[test]
    fn a_discarded_round_is_no_longer_served() {
        let fs = SimFs::new();
        let (_file, direct) = direct_file(&fs);
        let tail = JournalTail::new();
        let mut writer = TailWriter::new(Arc::clone(&tail));
        let a = vec![1u8; 8192];
        writer
            .write(&direct, 1, &[], &[IoSlice::new(&a)], 8192, 4096)
            .unwrap();
        writer.discard_from(1, 8192);
        assert!(tail.slice(1, 8192, 10).is_none(), "cut");
        assert!(tail.slice(1, 4096, 4096).is_some(), "kept below the cut");
        let b = vec![9u8; 4096];
        writer
            .write(&direct, 1, &[], &[IoSlice::new(&b)], 4096, 8192)
            .unwrap();
        let got = tail.slice(1, 8192, 4096).unwrap();
        assert!(got.iter().all(|&x| x == 9), "the rewritten bytes");
    }

    #[test]
    #[should_panic(expected = "rounds end on a page")]
    fn a_round_off_the_page_is_refused() {
        let fs = SimFs::new();
        let (_file, direct) = direct_file(&fs);
        let mut writer = TailWriter::new(JournalTail::new());
        let _ = writer.write(&direct, 1, &[], &[IoSlice::new(&[0u8; 100])], 100, 4096);
    }
}
