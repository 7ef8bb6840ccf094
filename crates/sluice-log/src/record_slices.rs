//! A fetch's records as slices instead of bytes: byte ranges of journal files the network
//! layer sends straight from the page cache (`sendfile(2)`), with in-memory bytes only
//! where there is no file to send from (see [`crate::LogManager::read_ranges`]).
//!
//! Guarantees:
//! - A [`FileRange`] holds its journal file (an `Arc`), exactly as a reader does: the file
//!   is neither retired nor recycled (renamed and rewritten by the journal writer) while
//!   any range of it lives, so the bytes it names stay the bytes that were read. Journal
//!   files are only ever appended to below their live entries' end, never rewritten in
//!   place while referenced, so the range's bytes cannot change under a send.
//! - A range is built only for bytes below the segment's committed length (durable, within
//!   the high watermark) and only for files with a real descriptor; a damaged stretch read
//!   as zeros, or a file system without descriptors (`SimFs`, fault injection) comes as
//!   [`RecordSlice::Bytes`].

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::Arc;

use bytes::Bytes;

use crate::fs;
use crate::journal::JournalFile;
use crate::manager::PartitionOffsets;

/// Bytes of a journal file, pinned for as long as the range lives.
#[derive(Debug, Clone)]
pub struct FileRange {
    file: Arc<JournalFile>,
    /// `file.file.raw_fd()`, checked present when the range was made.
    fd: RawFd,
    position: u64,
    len: u32,
}

impl FileRange {
    /// A range of `journal` if its file has a descriptor.
    pub(crate) fn new(journal: &Arc<JournalFile>, position: u64, len: u32) -> Option<Self> {
        let fd = journal.file.raw_fd()?;
        Some(Self {
            file: Arc::clone(journal),
            fd,
            position,
            len,
        })
    }

    /// A range of a file that belongs to no log (tests and tools of other crates): the
    /// range keeps the file open.
    pub fn standalone(file: std::fs::File, position: u64, len: u32) -> Self {
        let journal = JournalFile::new(u64::MAX, fs::std_file(file));
        Self::new(&journal, position, len).expect("a std file has a descriptor")
    }

    /// The `len` bytes right after this range, in the same file (and sharing its
    /// [`ResidentHint`], as all ranges of one journal file do).
    pub fn following(&self, len: u32) -> Self {
        Self {
            file: Arc::clone(&self.file),
            fd: self.fd,
            position: self.position + u64::from(self.len),
            len,
        }
    }

    /// The range's first `len` bytes (at most its length).
    pub(crate) fn prefix(&self, len: u32) -> Self {
        Self {
            len: len.min(self.len),
            ..self.clone()
        }
    }

    /// The file's descriptor, valid while `self` is borrowed.
    #[allow(unsafe_code)]
    pub fn fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor belongs to the file `self.file` owns and keeps open for
        // at least as long as `self` lives; the borrow cannot outlive `self`.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }

    /// The journal file's sequence number (later files have larger ones).
    pub fn file_seq(&self) -> u64 {
        self.file.seq
    }

    /// Position of the first byte in the file.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Bytes in the range (never 0 for ranges from a read).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Makes sure the range's bytes are in the page cache, reading them in on this thread if
    /// they are not, so that a later `sendfile` from an async worker does not wait for the
    /// disk (a catch-up consumer reading data written long ago). Blocking file I/O: for a
    /// fetch reader thread. A range whose last byte is cached costs three system calls
    /// (`mincore` of a one-page mapping); otherwise the range and up to
    /// `read_ahead_bytes` of the file after its start are sent to `/dev/null`, which reads
    /// them into the page cache without copying them to user space.
    ///
    /// Why the read-ahead: the journal interleaves partitions, so a consumer of many
    /// partitions reads each partition's batches as short ranges with other partitions'
    /// bytes between them. Read one range at a time, a cold backlog of 12 partitions
    /// reached the disk as about 250 KiB requests, each with its own submission, interrupt
    /// and page-cache insertions (0.68-0.78 ms of broker CPU per MB, against 0.31-0.35 warm);
    /// reading the file ahead in one long stretch makes the device requests long and leaves
    /// the other partitions' next batches cached for their own fetches, which the consumer
    /// asks for next. The stretch never goes past what the file's writer has finished (see
    /// [`JournalFile::written_end`]), so no page is cached before its direct write.
    /// Returns whether it had to read. A file system that does not support the probe is taken
    /// as cached: this is an optimisation, never needed for correctness.
    pub fn make_resident(&self, read_ahead_bytes: u64) -> io::Result<bool> {
        if self.len == 0 || is_cached(self.fd, self.position + u64::from(self.len) - 1)? {
            return Ok(false);
        }
        let end = self.position + u64::from(self.len);
        let ahead = (self.position + read_ahead_bytes).min(self.file.written_end());
        page_in(self.fd, self.position, end.max(ahead) - self.position)?;
        self.file.resident_hint.note(self.position, end.max(ahead));
        Ok(true)
    }

    /// Reads the file's next `bytes` after this range into the page cache, from the first
    /// of them that is not cached on, once at least `step_bytes` of them are missing (or
    /// the span reaches what the file's writer has finished, where it stops, as
    /// [`Self::make_resident`] does). For after a fetch was answered: the consumer's next
    /// fetch asks for what follows, and reading it now overlaps the disk with the client's
    /// turn instead of making the next fetch wait for it. Only the part not yet cached is
    /// read: a consumer of one partition asks for 1 MiB at a time, and reading the whole
    /// span again after every fetch (all but its last MiB cached by the fetch before) kept
    /// a reader thread busy for nothing. Returns whether it read.
    ///
    /// The probe starts where the stretch this file's readers last found or made resident
    /// ends, when that stretch holds the span's start ([`ResidentHint`]): a consumer
    /// moving forward 1 MiB at a time would otherwise look up all 4096 pages of the span
    /// again after every fetch, to find the same first missing page (about 5 % of the
    /// broker's CPU in a 12-partition backlog fetch).
    pub fn read_ahead_after(&self, bytes: u64, step_bytes: u64) -> io::Result<bool> {
        let start = self.position + u64::from(self.len);
        let wanted_end = start + bytes;
        let end = wanted_end.min(self.file.written_end());
        if end <= start {
            return Ok(false);
        }
        let hint = &self.file.resident_hint;
        let probe_from = hint.resident_from(start).min(end);
        let missing = match probe_from < end {
            true => first_uncached(self.fd, probe_from, end)?,
            false => None,
        };
        match missing {
            Some(from) if end - from >= step_bytes || end < wanted_end => {
                page_in(self.fd, from, end - from)?;
                hint.note(start, end);
                Ok(true)
            }
            Some(from) => {
                hint.note(start, from);
                Ok(false)
            }
            None => {
                hint.note(start, end);
                Ok(false)
            }
        }
    }

    /// Reads `len` bytes of the range from byte `from` on into memory: the copy path for
    /// writers that cannot `sendfile` (e.g. TLS). Blocking file I/O: not on an async
    /// worker. A file shorter than the range is an error (`UnexpectedEof`).
    pub fn read(&self, from: usize, len: usize) -> io::Result<Vec<u8>> {
        if from.checked_add(len).is_none_or(|end| end > self.len()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "read past the end of a file range",
            ));
        }
        let buf = fs::read_new(self.file.file.as_ref(), len, self.position + from as u64)?;
        if buf.len() < len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "journal file shorter than the range being sent",
            ));
        }
        Ok(buf)
    }
}

/// The stretch `[start, end)` of a journal file that a fetch reader last found in the page
/// cache or read into it. A hint, never needed for correctness: pages may be evicted after
/// it was noted, and then the `sendfile` that sends them reads them in itself.
#[derive(Debug, Default)]
pub(crate) struct ResidentHint(parking_lot::Mutex<(u64, u64)>);

impl ResidentHint {
    /// Where the probe of a span starting at `start` should begin: the end of the noted
    /// stretch if it holds `start`, else `start` itself.
    fn resident_from(&self, start: u64) -> u64 {
        let (from, to) = *self.0.lock();
        match from <= start && start < to {
            true => to,
            false => start,
        }
    }

    fn note(&self, start: u64, end: u64) {
        debug_assert!(start <= end, "resident stretch {start}..{end}");
        *self.0.lock() = (start, end);
    }
}

/// Whether the page holding byte `position` of `fd` is in the page cache.
fn is_cached(fd: RawFd, position: u64) -> io::Result<bool> {
    Ok(first_uncached(fd, position, position + 1)?.is_none())
}

/// Pages whose residency one `mincore` call reports (16 MiB of 4 KiB pages): the status
/// vector lives on the stack.
const RESIDENCY_WINDOW_PAGES: usize = 4096;

/// The start of the first page of bytes `from..to` of `fd` that is not in the page cache
/// (clamped up to `from`), or `None` when all are: `mincore` over read-only mappings of the
/// span, a window at a time, which read nothing in. (A read that may not block,
/// `preadv2(RWF_NOWAIT)`, was used first: it starts the kernel's read of a missing page,
/// and on a fast device that read finished before the call looked again, so a cold range
/// was answered as cached with only its last page read in, about one time in three in a
/// loop.) A file that cannot be mapped cannot be probed and is taken as cached.
#[allow(unsafe_code)]
fn first_uncached(fd: RawFd, from: u64, to: u64) -> io::Result<Option<u64>> {
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let mut window_start = from - from % page;
    while window_start < to {
        let pages = (to - window_start)
            .div_ceil(page)
            .min(RESIDENCY_WINDOW_PAGES as u64) as usize;
        let mut resident = [0u8; RESIDENCY_WINDOW_PAGES];
        if !residency(fd, window_start, pages, page, &mut resident[..pages])? {
            return Ok(None);
        }
        if let Some(i) = resident[..pages].iter().position(|r| r & 1 == 0) {
            return Ok(Some((window_start + i as u64 * page).max(from)));
        }
        window_start += pages as u64 * page;
    }
    Ok(None)
}

/// Fills `out` (one byte per page) with the residency of `pages` pages of `fd` from the
/// page-aligned `offset`. Returns false when the file cannot be mapped (no probe possible).
#[allow(unsafe_code)]
fn residency(fd: RawFd, offset: u64, pages: usize, page: u64, out: &mut [u8]) -> io::Result<bool> {
    assert_eq!(offset % page, 0, "residency windows start on a page");
    assert_eq!(out.len(), pages, "one status byte per page");
    let offset = libc::off_t::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    let len = pages * page as usize;
    // SAFETY: a fresh read-only shared mapping of an open descriptor; it is never read
    // through (no fault, no I/O) and is unmapped before returning.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            fd,
            offset,
        )
    };
    if addr == libc::MAP_FAILED {
        return match io::Error::last_os_error() {
            e if matches!(e.raw_os_error(), Some(libc::ENODEV | libc::EINVAL)) => Ok(false),
            e => Err(e),
        };
    }
    // SAFETY: `addr` is the page-aligned mapping of `len` bytes made above; `out` has one
    // status byte for each of its `pages` pages.
    let rc = unsafe { libc::mincore(addr, len, out.as_mut_ptr()) };
    let error = (rc != 0).then(io::Error::last_os_error);
    // SAFETY: unmaps exactly the mapping made above, which nothing else refers to.
    unsafe { libc::munmap(addr, len) };
    match error {
        Some(e) => Err(e),
        None => Ok(true),
    }
}

/// Reads `len` bytes of `fd` from `position` into the page cache by sending them to
/// `/dev/null` (the kernel reads the pages and discards them; nothing reaches user space).
#[allow(unsafe_code)]
fn page_in(fd: RawFd, position: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    static DEV_NULL: std::sync::OnceLock<io::Result<std::fs::File>> = std::sync::OnceLock::new();
    let null =
        match DEV_NULL.get_or_init(|| std::fs::OpenOptions::new().write(true).open("/dev/null")) {
            Ok(f) => f.as_raw_fd(),
            Err(e) => return Err(io::Error::new(e.kind(), format!("/dev/null: {e}"))),
        };
    let mut offset = libc::off_t::try_from(position)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
    let mut left = len;
    while left > 0 {
        let chunk = usize::try_from(left.min(1 << 30)).unwrap_or(1 << 30);
        // SAFETY: both descriptors are open; `offset` is a valid out-parameter.
        let n = unsafe { libc::sendfile(null, fd, &mut offset, chunk) };
        match n {
            n if n > 0 => left -= n as u64,
            0 => break, // end of file: nothing more to read in
            _ => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// One piece of a partition's records, in order.
#[derive(Debug, Clone)]
pub enum RecordSlice {
    /// Bytes to send from a journal file.
    File(FileRange),
    /// Bytes in memory.
    Bytes(Bytes),
}

impl RecordSlice {
    pub fn len(&self) -> usize {
        match self {
            RecordSlice::File(r) => r.len(),
            RecordSlice::Bytes(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slice's first `len` bytes (at most its length).
    pub(crate) fn prefix(&self, len: usize) -> Self {
        match self {
            RecordSlice::File(r) => {
                RecordSlice::File(r.prefix(u32::try_from(len).unwrap_or(u32::MAX)))
            }
            RecordSlice::Bytes(b) => RecordSlice::Bytes(b.slice(..len.min(b.len()))),
        }
    }
}

/// A read for a fetch, as slices ([`crate::LogManager::read_ranges`]).
#[derive(Debug, Clone)]
pub struct RangesResult {
    /// Whole batches, starting with the batch that contains the fetch offset; the
    /// concatenation of the slices is what [`crate::LogManager::read`] returns.
    pub slices: Vec<RecordSlice>,
    /// Bytes in `slices`.
    pub len: usize,
    pub offsets: PartitionOffsets,
}

impl RangesResult {
    /// The slices' bytes in one buffer (tests; reads the files). Blocking.
    pub fn to_vec(&self) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.len);
        for s in &self.slices {
            match s {
                RecordSlice::File(r) => out.extend_from_slice(&r.read(0, r.len())?),
                RecordSlice::Bytes(b) => out.extend_from_slice(b),
            }
        }
        Ok(out)
    }
}
