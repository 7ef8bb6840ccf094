//! The file-system seam. Every byte the log reads or writes goes through [`Fs`] and
//! [`FsFile`], so tests can inject faults (a full disk, a failing `fdatasync`) at exact
//! points without touching the engine.
//!
//! - [`StdFs`]: the real implementation (`std::fs`, positional I/O via `FileExt`,
//!   `fdatasync` via `File::sync_data`, directory fsync by opening the directory).
//! - [`FaultyFs`]: wraps [`StdFs`]; once armed it fails writes with `ENOSPC` or syncs with
//!   `EIO` after a countdown of operations, optionally only on paths containing a string,
//!   and it can slow every sync down (a slow disk). Nothing else changes: reads, renames and
//!   deletes always go through.
//!
//! Files are shared by threads (the committer writes, readers `pread`, the checkpointer
//! syncs), so every [`FsFile`] method takes `&self` and uses positional I/O only.
//!
//! Permissions: a data store is private to its owner. [`StdFs`] creates directories with
//! mode 0700 ([`DIR_MODE`]) and files with mode 0600 ([`FILE_MODE`]), whatever the umask
//! would allow; the broker's own metadata files use the same helpers.
//!
//! Direct writes ([`Fs::open_direct`], [`DirectFile`]): with `sluice.journal.direct.io` the
//! committer writes journal rounds through a second descriptor opened with `O_DIRECT`, next
//! to the buffered one that readers, `sendfile` and syncs use. Every direct write starts and
//! ends on a [`DIRECT_IO_ALIGN`] boundary from an aligned buffer; the kernel refuses anything
//! else (`EINVAL`), and simulated files assert it, so the crash model checks the alignment
//! that production relies on. A direct write is durable only after `sync_data`, like any
//! other write.
//!
//! The data directory lock ([`Fs::lock_data_dir`]): an exclusive `flock` on
//! `<data_dir>/.lock` (Kafka's `log.dir` lock file), held for the life of the process, so a
//! second broker on the same directory refuses to start instead of overwriting the first
//! one's files. The kernel drops the lock when the process dies, so a crash never leaves a
//! stale lock behind.

use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io;
use std::io::{Read, Seek, Write};
use std::mem::MaybeUninit;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::mutation::mutated;

/// Mode of every directory the log (and the broker) creates: owner only.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file the log (and the broker) creates: owner read/write only.
pub const FILE_MODE: u32 = 0o600;
/// Name of the lock file in the data directory (Kafka's `.lock`).
pub const LOCK_FILE_NAME: &str = ".lock";

/// Creates `path` and its missing parents with mode [`DIR_MODE`]. Directories that already
/// exist keep their mode.
pub fn create_private_dir_all(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(path)
}

/// Creates (or truncates) a file with mode [`FILE_MODE`] for writing.
pub fn create_private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)
}

/// The held data directory lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct DataDirLock {
    _file: Option<File>,
}

impl DataDirLock {
    /// A lock that holds nothing, for file systems that are not the real one.
    pub fn none() -> Self {
        Self { _file: None }
    }
}

/// Takes an exclusive, non-blocking `flock` on `<dir>/.lock` and writes our process id into
/// it (for the message the next contender prints). Fails with `WouldBlock` naming the
/// holder's process id when another process holds it.
pub fn lock_dir(dir: &Path) -> io::Result<DataDirLock> {
    let path = dir.join(LOCK_FILE_NAME);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            let holder = if holder.is_empty() { "unknown" } else { holder };
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!(
                    "{} is locked by another process (pid {holder}); is another broker running on this data directory?",
                    path.display()
                ),
            ));
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    file.set_len(0)?;
    file.seek(io::SeekFrom::Start(0))?;
    writeln!(file, "{}", std::process::id())?;
    Ok(DataDirLock { _file: Some(file) })
}

/// A failed `fdatasync` / directory fsync. Wrapped so that its errno is never mistaken for
/// a refused write (see [`is_retryable`]): after a failed sync the kernel may have dropped
/// dirty pages, so it always poisons the log, whatever the errno says.
#[derive(Debug)]
pub struct SyncFailed(pub io::Error);

impl std::fmt::Display for SyncFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sync failed: {}", self.0)
    }
}

impl std::error::Error for SyncFailed {}

/// Wraps a sync error (see [`SyncFailed`]).
pub fn sync_failed(error: io::Error) -> io::Error {
    io::Error::new(error.kind(), SyncFailed(error))
}

/// Whether `error` is a write or open the system refused before changing anything durable:
/// no space (`ENOSPC`, `EDQUOT`) or no file descriptor (`EMFILE`, `ENFILE`). Such a failure
/// is undone and answered with an error, and later requests try again; it does not poison
/// the log. A failed sync never counts (it is wrapped in [`SyncFailed`] and has no errno).
pub fn is_retryable(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOSPC | libc::EDQUOT | libc::EMFILE | libc::ENFILE)
    )
}

/// Whether `error` is the process or system running out of file descriptors.
pub fn is_file_limit(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// How [`Fs::open`] treats an existing or missing file. Files are always opened read+write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// Open an existing file; fail if it is missing.
    Existing,
    /// Create the file, failing if it already exists.
    CreateNew,
    /// Create the file or truncate an existing one to zero length.
    CreateTruncate,
}

/// One open file. Thread-safe: positional reads and writes, no shared cursor.
pub trait FsFile: Send + Sync + Debug {
    /// Reads at `offset`; may return fewer bytes than asked (0 at end of file).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes at `offset`; may write fewer bytes than given.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Reads at `offset` into memory that need not be initialized; returns the bytes read,
    /// which are then initialized (the rest of `buf` is untouched). The default zero-fills
    /// `buf` and calls `read_at`; the real file system reads straight into it, which saves
    /// the fill on every fetch.
    fn read_at_uninit(&self, buf: &mut [MaybeUninit<u8>], offset: u64) -> io::Result<usize> {
        self.read_at(zero_filled(buf), offset)
    }
    /// Writes the slices back to back at `offset` (`pwritev`); may write fewer bytes than
    /// given. The default writes slice by slice and stops at the first short write.
    fn write_vectored_at(&self, bufs: &[io::IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let mut written = 0usize;
        for buf in bufs {
            let n = self.write_at(buf, offset + written as u64)?;
            written += n;
            if n < buf.len() {
                break;
            }
        }
        Ok(written)
    }
    /// `fdatasync`: data and the metadata needed to read it back are durable on return.
    fn sync_data(&self) -> io::Result<()>;
    /// Advises the kernel that the file's cached pages will not be read again
    /// (`POSIX_FADV_DONTNEED`; clean pages are dropped). Advice only: the default does
    /// nothing, and errors are ignored.
    fn drop_cache(&self) {}
    /// Truncates or extends the file.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Current length in bytes.
    fn len(&self) -> io::Result<u64>;
    /// The descriptor of a real open file, for reads the kernel can do on its own
    /// (`sendfile(2)` from the page cache to a socket). `None` (the default) for files that
    /// are not one kernel file: simulated ones, a segment's extent list. Callers then read
    /// through [`FsFile::read_at`].
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// The alignment of offsets, lengths and buffer addresses of [`DirectFile`] writes: one
/// page, which covers the logical block size of every device the broker runs on.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// Panics unless `buf` (address and length) and `offset` are multiples of
/// [`DIRECT_IO_ALIGN`]: a misaligned direct write is a bug in the caller, never bad input.
pub fn assert_direct_aligned(buf: &[u8], offset: u64) {
    let align = DIRECT_IO_ALIGN as u64;
    assert!(
        offset.is_multiple_of(align) && buf.len().is_multiple_of(DIRECT_IO_ALIGN),
        "direct write at {offset} of {} bytes is not on {DIRECT_IO_ALIGN}-byte boundaries",
        buf.len()
    );
    assert_eq!(
        buf.as_ptr() as usize % DIRECT_IO_ALIGN,
        0,
        "direct write from a misaligned buffer"
    );
}

/// A file opened for writes that bypass the page cache (`O_DIRECT`). Write only: reads,
/// syncs and truncation go through the file's [`FsFile`] handle.
pub trait DirectFile: Send + Sync + Debug {
    /// Writes `buf` at `offset`; both aligned (see [`assert_direct_aligned`]). May write
    /// fewer bytes than given (a multiple of the alignment).
    fn write_direct_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
}

/// Writes all of `buf` at `offset` through `file`, looping over short writes.
pub fn write_all_direct_at(
    file: &dyn DirectFile,
    mut buf: &[u8],
    mut offset: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        let n = file.write_direct_at(buf, offset)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "direct write returned 0",
            ));
        }
        buf = &buf[n..];
        offset += n as u64;
    }
    Ok(())
}

/// A [`DirectFile`] that writes through an ordinary handle after checking the alignment:
/// what simulated and fault-injecting file systems hand out (their write semantics stay
/// theirs), and the fallback where the file system refuses `O_DIRECT`.
#[derive(Debug)]
pub struct AlignedWrites(pub Box<dyn FsFile>);

impl DirectFile for AlignedWrites {
    /// A short write is reported in whole blocks, as the kernel reports a short direct
    /// write: the bytes of a partly written block are written again by the next call
    /// (same bytes, same place). A write that stops inside the first block goes on from
    /// where it stopped until that block is whole or the error that cut it short comes
    /// back (a full disk: ENOSPC, which the caller undoes). Bounded: each call either
    /// writes at least a byte or fails.
    fn write_direct_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        assert_direct_aligned(buf, offset);
        let mut written = 0;
        loop {
            let n = self.0.write_at(&buf[written..], offset + written as u64)?;
            written += n;
            let whole_blocks = written - written % DIRECT_IO_ALIGN;
            if n == 0 || whole_blocks > 0 {
                return Ok(whole_blocks);
            }
        }
    }
}

/// An entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub is_dir: bool,
}

/// The file-system operations the log needs, and nothing more.
pub trait Fs: Send + Sync + Debug {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Entries of `path` whose names are valid UTF-8 (others are not the log's).
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// fsyncs a directory so that entries created, renamed or removed in it are durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    fn exists(&self, path: &Path) -> bool;
    /// Opens the existing file `path` a second time, for direct writes (see
    /// [`DirectFile`]). The default opens it like [`OpenMode::Existing`] and checks the
    /// alignment of every write.
    fn open_direct(&self, path: &Path) -> io::Result<Box<dyn DirectFile>> {
        Ok(Box::new(AlignedWrites(
            self.open(path, OpenMode::Existing)?,
        )))
    }
    /// Takes the data directory's exclusive lock for the life of the returned guard. The
    /// real implementation is [`lock_dir`]; a simulated file system may hold nothing.
    fn lock_data_dir(&self, dir: &Path) -> io::Result<DataDirLock> {
        lock_dir(dir)
    }
}

/// Writes all of `buf` at `offset`, looping over short writes.
pub fn write_all_at(file: &dyn FsFile, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let written = file.write_at(buf, offset)?;
        if written == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0"));
        }
        buf = &buf[written..];
        offset += written as u64;
    }
    Ok(())
}

/// Writes all of `bufs` back to back at `offset`, looping over short writes. The slices are
/// advanced in place (the caller's array is consumed).
pub fn write_all_vectored_at(
    file: &dyn FsFile,
    mut bufs: &mut [io::IoSlice<'_>],
    mut offset: u64,
) -> io::Result<()> {
    io::IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        let batch = bufs.len().min(IOV_MAX);
        let written = match file.write_vectored_at(&bufs[..batch], offset) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0")),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        offset += written as u64;
        io::IoSlice::advance_slices(&mut bufs, written);
    }
    Ok(())
}

/// Most slices one `pwritev` takes (Linux's `IOV_MAX`).
const IOV_MAX: usize = 1024;

/// Zero-fills `buf` and returns it as initialized bytes.
#[allow(unsafe_code)]
pub fn zero_filled(buf: &mut [MaybeUninit<u8>]) -> &mut [u8] {
    for byte in buf.iter_mut() {
        byte.write(0);
    }
    // SAFETY: every byte was just initialized, and `MaybeUninit<u8>` has `u8`'s layout.
    unsafe { &mut *(std::ptr::from_mut(buf) as *mut [u8]) }
}

/// Reads `len` bytes at `offset` into a new buffer (shorter only at end of file), without
/// zero-filling it first.
#[allow(unsafe_code)]
pub fn read_new(file: &dyn FsFile, len: usize, offset: u64) -> io::Result<Vec<u8>> {
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let mut filled = 0;
    while filled < len {
        let spare = &mut buf.spare_capacity_mut()[..len - filled];
        match file.read_at_uninit(spare, offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => {
                debug_assert!(n <= spare.len());
                // SAFETY: `read_at_uninit` initialized the first `n` spare bytes.
                unsafe { buf.set_len(filled + n) };
                filled += n;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}

/// Fills as much of `buf` as the file holds from `offset`; returns the bytes read
/// (less than `buf.len()` only at end of file).
pub fn read_full_at(file: &dyn FsFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Reads a whole (small) file.
pub fn read_file(fs: &dyn Fs, path: &Path) -> io::Result<Vec<u8>> {
    read_whole(fs.open(path, OpenMode::Existing)?.as_ref())
}

/// Reads the whole of an open (small) file.
pub fn read_whole(file: &dyn FsFile) -> io::Result<Vec<u8>> {
    let len = usize::try_from(file.len()?).map_err(|_| io::Error::other("file too large"))?;
    read_new(file, len, 0)
}

/// Replaces `path` atomically and durably: write `path.tmp`, fsync it, rename it over
/// `path`, fsync the directory. A crash leaves either the old or the new contents.
pub fn write_file_atomic(fs: &dyn Fs, path: &Path, contents: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(path);
    let file = fs.open(&tmp, OpenMode::CreateTruncate)?;
    write_all_at(file.as_ref(), contents, 0)?;
    let (sync_mutated, dir_sync_mutated) = atomic_write_mutations(path);
    if !sync_mutated {
        file.sync_data()?;
    }
    drop(file);
    fs.rename(&tmp, path)?;
    match path.parent() {
        Some(dir) if !dir_sync_mutated => fs.sync_dir(dir),
        _ => Ok(()),
    }
}

/// The mutation points of [`write_file_atomic`] for the log's own files (skip the file's
/// sync, skip the directory's), by file name.
fn atomic_write_mutations(path: &Path) -> (bool, bool) {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name {
        _ if !cfg!(feature = "mutation") => (false, false),
        crate::checkpoint::FILE_NAME => (
            mutated!("checkpoint_file.unsynced"),
            mutated!("checkpoint_file.dir_unsynced"),
        ),
        crate::metadata::FILE_NAME => (
            mutated!("partition_create.metadata_unsynced"),
            mutated!("partition_create.metadata_dir_unsynced"),
        ),
        crate::cleaner_checkpoint::FILE_NAME => (
            mutated!("cleaner_checkpoint.unsynced"),
            mutated!("cleaner_checkpoint.dir_unsynced"),
        ),
        _ if name.ends_with(crate::producer_snapshot::SUFFIX) => (
            mutated!("producer_snapshot.unsynced"),
            mutated!("producer_snapshot.dir_unsynced"),
        ),
        _ => (false, false),
    }
}

/// The temporary name [`write_file_atomic`] uses for `path`.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

#[derive(Debug)]
struct StdFile(File);

/// `file` as an [`FsFile`] of the real file system.
pub(crate) fn std_file(file: File) -> Box<dyn FsFile> {
    Box::new(StdFile(file))
}

impl FsFile for StdFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }
    fn drop_cache(&self) {
        use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};
        use std::os::fd::AsRawFd;
        let advice = PosixFadviseAdvice::POSIX_FADV_DONTNEED;
        let _ = posix_fadvise(self.0.as_raw_fd(), 0, 0, advice);
    }
    #[allow(unsafe_code)]
    fn read_at_uninit(&self, buf: &mut [MaybeUninit<u8>], offset: u64) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        // SAFETY: the pointer and length describe `buf`, which is borrowed mutably for the
        // call; pread writes at most that many bytes and never reads them.
        let read = unsafe {
            libc::pread(
                self.0.as_raw_fd(),
                buf.as_mut_ptr().cast::<libc::c_void>(),
                buf.len(),
                offset,
            )
        };
        usize::try_from(read).map_err(|_| io::Error::last_os_error())
    }
    fn write_vectored_at(&self, bufs: &[io::IoSlice<'_>], offset: u64) -> io::Result<usize> {
        let offset = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset too large"))?;
        let bufs = &bufs[..bufs.len().min(IOV_MAX)];
        nix::sys::uio::pwritev(&self.0, bufs, offset).map_err(io::Error::from)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data().map_err(sync_failed)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.0.as_raw_fd())
    }
}

#[derive(Debug)]
struct StdDirectFile(File);

impl DirectFile for StdDirectFile {
    fn write_direct_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        assert!(
            (buf.as_ptr() as usize).is_multiple_of(DIRECT_IO_ALIGN)
                && offset.is_multiple_of(DIRECT_IO_ALIGN as u64)
        );
        self.0.write_at(buf, offset)
    }
}

impl Fs for StdFs {
    fn open_direct(&self, path: &Path) -> io::Result<Box<dyn DirectFile>> {
        let direct = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        match direct {
            Ok(file) => Ok(Box::new(StdDirectFile(file))),
            // The file system does not do direct I/O (tmpfs on older kernels): the same
            // aligned writes, buffered. Durability is unchanged (the sync covers them).
            Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                tracing::warn!(path = %path.display(), "O_DIRECT refused here; journal writes stay buffered");
                Ok(Box::new(AlignedWrites(
                    self.open(path, OpenMode::Existing)?,
                )))
            }
            Err(error) => Err(error),
        }
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let mut options = OpenOptions::new();
        options.read(true).write(true).mode(FILE_MODE);
        match mode {
            OpenMode::Existing => {}
            OpenMode::CreateNew => {
                options.create_new(true);
            }
            OpenMode::CreateTruncate => {
                options.create(true).truncate(true);
            }
        }
        Ok(Box::new(StdFile(options.open(path)?)))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        create_private_dir_all(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            if let Ok(name) = entry.file_name().into_string() {
                entries.push(DirEntry {
                    name,
                    is_dir: entry.file_type()?.is_dir(),
                });
            }
        }
        Ok(entries)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all().map_err(sync_failed)
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
}

/// Which operation a [`FaultyFs`] fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// `write_at` fails with `ENOSPC` (disk full).
    Write,
    /// `sync_data` (and directory syncs) fail with `EIO`.
    Sync,
    /// `open` of a file fails with `EMFILE` (out of file descriptors).
    Open,
}

/// An armed fault: the operation fails once `after_ops` matching operations have passed,
/// and every matching operation after that fails too (a broken disk stays broken).
#[derive(Debug, Clone)]
struct Fault {
    op: FaultOp,
    remaining_ops: u64,
    path_contains: Option<String>,
}

#[derive(Debug, Default)]
struct FaultState {
    fault: Mutex<Option<Fault>>,
    injected: AtomicU64,
    /// Added to every file `sync_data`, to model a slow disk.
    sync_delay_us: AtomicU64,
}

impl FaultState {
    /// Decides whether this operation fails, counting it against the armed fault.
    fn check(&self, op: FaultOp, path: &Path) -> io::Result<()> {
        let mut guard = self.fault.lock();
        let Some(fault) = guard.as_mut() else {
            return Ok(());
        };
        let path_matches = match &fault.path_contains {
            Some(part) => path.to_string_lossy().contains(part.as_str()),
            None => true,
        };
        if fault.op != op || !path_matches {
            return Ok(());
        }
        if fault.remaining_ops > 0 {
            fault.remaining_ops -= 1;
            return Ok(());
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        Err(match op {
            FaultOp::Write => io::Error::from_raw_os_error(libc::ENOSPC),
            FaultOp::Sync => sync_failed(io::Error::from_raw_os_error(libc::EIO)),
            FaultOp::Open => io::Error::from_raw_os_error(libc::EMFILE),
        })
    }
}

/// A [`StdFs`] that fails on command, for tests. Clones share one fault switch.
#[derive(Debug, Clone, Default)]
pub struct FaultyFs {
    inner: StdFs,
    state: Arc<FaultState>,
}

impl FaultyFs {
    pub fn new() -> Self {
        Self::default()
    }

    /// Arms a fault: after `after_ops` more `op` operations (on paths containing
    /// `path_contains`, if given), every such operation fails.
    pub fn arm(&self, op: FaultOp, after_ops: u64, path_contains: Option<&str>) {
        let fault = Fault {
            op,
            remaining_ops: after_ops,
            path_contains: path_contains.map(str::to_owned),
        };
        *self.state.fault.lock() = Some(fault);
    }

    /// Disarms any fault.
    pub fn disarm(&self) {
        *self.state.fault.lock() = None;
    }

    /// Makes every file `sync_data` take at least `delay` longer (a slow disk), so tests can
    /// rely on requests piling up behind a sync.
    pub fn set_sync_delay(&self, delay: std::time::Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.state.sync_delay_us.store(micros, Ordering::Relaxed);
    }

    /// How many operations have been failed so far.
    pub fn injected(&self) -> u64 {
        self.state.injected.load(Ordering::Relaxed)
    }
}

#[derive(Debug)]
struct FaultyFile {
    inner: Box<dyn FsFile>,
    path: PathBuf,
    state: Arc<FaultState>,
}

impl FsFile for FaultyFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.state.check(FaultOp::Write, &self.path)?;
        self.inner.write_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.state.check(FaultOp::Sync, &self.path)?;
        let delay_us = self.state.sync_delay_us.load(Ordering::Relaxed);
        if delay_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(delay_us));
        }
        self.inner.sync_data()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }
}

impl Fs for FaultyFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        self.state.check(FaultOp::Open, path)?;
        let inner = self.inner.open(path, mode)?;
        Ok(Box::new(FaultyFile {
            inner,
            path: path.to_owned(),
            state: Arc::clone(&self.state),
        }))
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        self.inner.read_dir(path)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.state.check(FaultOp::Sync, path)?;
        self.inner.sync_dir(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uninit_reads_and_vectored_writes_round_trip() {
        // Goal: read_new returns exactly the file's bytes (short only at end of file) on the
        // real file system (pread into uninitialized memory) and through the zero-filling
        // default (FaultyFs); write_all_vectored_at writes slices back to back, also past
        // the 1024-slice limit of one call.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        for fs in [&StdFs as &dyn Fs, &FaultyFs::new()] {
            let file = fs.open(&path, OpenMode::CreateTruncate).expect("open");
            let parts: Vec<Vec<u8>> = (0..1500u32).map(|i| vec![(i % 251) as u8; 3]).collect();
            let mut slices: Vec<io::IoSlice<'_>> =
                parts.iter().map(|p| io::IoSlice::new(p)).collect();
            write_all_vectored_at(file.as_ref(), &mut slices, 10).expect("write");
            let expected: Vec<u8> = parts.concat();
            assert_eq!(read_new(file.as_ref(), 4500, 10).expect("read"), expected);
            assert_eq!(read_new(file.as_ref(), 100, 4500).expect("read").len(), 10);
        }
    }

    #[test]
    fn faulty_fs_fails_after_countdown() {
        // Goal: an armed write fault lets N writes through, then fails every later one with ENOSPC.
        let dir = tempfile::tempdir().expect("tempdir");
        let fs = FaultyFs::new();
        let file = fs
            .open(&dir.path().join("f"), OpenMode::CreateNew)
            .expect("create");
        fs.arm(FaultOp::Write, 1, None);
        file.write_at(b"ok", 0).expect("first write passes");
        let err = file.write_at(b"no", 2).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert!(file.write_at(b"no", 2).is_err());
        file.sync_data().expect("syncs unaffected");
        assert_eq!(fs.injected(), 2);
    }

    #[test]
    fn atomic_write_replaces_contents() {
        // Goal: write_file_atomic leaves the new contents and no temporary file.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c");
        write_file_atomic(&StdFs, &path, b"one").expect("write");
        write_file_atomic(&StdFs, &path, b"two").expect("write");
        assert_eq!(read_file(&StdFs, &path).expect("read"), b"two");
        assert!(!StdFs.exists(&tmp_path(&path)));
    }
}
