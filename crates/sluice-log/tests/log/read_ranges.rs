//! `LogManager::read_ranges`, the fetch path's read as journal file ranges, against
//! `LogManager::read`, the read as bytes.
//!
//! What must hold:
//! - for any fetch offset, byte limit and `min_one_batch`, the ranges' bytes are exactly the
//!   bytes `read` returns (or both fail alike), over a log with many extents, segment rolls
//!   and journal file rotation;
//! - on the real file system the records come as file ranges, not as bytes in memory,
//!   except the newest ones of a journal written with direct I/O, which come from its
//!   in-memory tail;
//! - a range pins its journal file: DeleteRecords and a checkpoint that would retire the
//!   file leave it alone while the range lives (its bytes still read back as they were),
//!   and retire it once the range is dropped.

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use sluice_log::fs::StdFs;
use sluice_log::{LogConfig, LogManager, LogManagerConfig, Offset, RecordSlice};

/// Small journal files, so the log spreads over many of them.
const SMALL_JOURNAL_FILE_BYTES: u64 = 32 * 1024;

fn small_journal_config(dir: &Path) -> LogManagerConfig {
    let mut config = config(dir);
    config.journal_file_bytes_max = SMALL_JOURNAL_FILE_BYTES;
    config
}

fn segments_of(bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes: bytes,
        retention_ms: -1,
        retention_bytes: -1,
        ..LogConfig::default()
    }
}

/// A small deterministic generator (xorshift64*), so failures reproduce by seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn wal_seqs(data: &Path) -> BTreeSet<u64> {
    journal_files(data).iter().map(|p| journal_seq(p)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_hold_the_same_bytes_as_read() {
    // Goal: random reads over two interleaved partitions (many extents per segment, many
    // segments, many journal files) give the same bytes, or the same error, both ways, and
    // the ranges path serves them from files.
    ranges_match_read(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_from_the_in_memory_tail_hold_the_same_bytes_as_read() {
    // Goal: with the journal written by direct I/O, the newest files' bytes come from the
    // in-memory tail and older ones from the files, and both are exactly what `read`
    // returns from the files.
    ranges_match_read(true).await;
}

async fn ranges_match_read(direct_io: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = small_journal_config(dir.path());
    config.journal_direct_io = direct_io;
    let (log, _) = LogManager::open(config, Arc::new(StdFs)).expect("open");
    let keys = [key("a", 0), key("b", 0)];
    for k in &keys {
        log.create_partition(k.clone(), segments_of(20 * 1024))
            .expect("create");
    }
    let mut rng = Rng(0x5eed_1234);
    for tag in 0..300 {
        // Several appends in flight at once, so one commit round holds both partitions'
        // entries and extents of one segment alternate with the other's.
        let mut waits = Vec::new();
        for k in &keys {
            let count = 1 + rng.below(8) as i32;
            let value_len = 20 + rng.below(400) as usize;
            waits.push(
                log.append(k, bytes(count, value_len, tag))
                    .await
                    .expect("queued"),
            );
        }
        for w in waits {
            w.wait().await.expect("durable");
        }
    }
    assert!(wal_seqs(dir.path()).len() >= 8, "several journal files");
    let (mut compared, mut multi_slice, mut files_seen) = (0, 0, BTreeSet::new());
    let mut from_memory = 0;
    for k in &keys {
        let offsets = log.offsets(k).expect("offsets");
        for _ in 0..1500 {
            let offset = Offset(rng.below(offsets.high_watermark.0 as u64 + 2) as i64);
            let max_bytes = match rng.below(4) {
                0 => rng.below(200) as u32,
                1 => 64 * 1024,
                _ => rng.below(16 * 1024) as u32,
            };
            let min_one_batch = rng.below(2) == 0;
            let bytes = log.read(k, offset, max_bytes, min_one_batch);
            let ranges = log.read_ranges(k, offset, max_bytes, min_one_batch);
            match (bytes, ranges) {
                (Ok(b), Ok(r)) => {
                    assert_eq!(r.len, b.records.len(), "{offset:?} {max_bytes}");
                    assert_eq!(r.to_vec().expect("read ranges"), b.records.to_vec());
                    assert_eq!(r.offsets, b.offsets);
                    assert!(r.slices.iter().all(|s| !s.is_empty()));
                    for s in &r.slices {
                        match s {
                            RecordSlice::File(f) => {
                                files_seen.insert(f.fd().as_raw_fd());
                            }
                            RecordSlice::Bytes(_) if direct_io => from_memory += 1,
                            RecordSlice::Bytes(_) => panic!("records in memory on StdFs"),
                        }
                    }
                    multi_slice += usize::from(r.slices.len() > 1);
                }
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string()),
                (a, b) => panic!("read {a:?} but read_ranges {b:?}"),
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 3000);
    assert!(multi_slice > 100, "reads across extents: {multi_slice}");
    assert!(files_seen.len() >= 4, "reads from several journal files");
    assert_eq!(
        from_memory > 100,
        direct_io,
        "slices from the tail: {from_memory}"
    );
}

#[tokio::test]
async fn a_range_pins_its_journal_file() {
    // Goal: a range taken before DeleteRecords and a checkpoint keeps its journal file from
    // being retired (deleted or recycled and rewritten): its bytes read back unchanged, even
    // after more appends that would reuse a recycled file. Dropping it lets the next
    // checkpoint retire the file.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, _) =
        LogManager::open(small_journal_config(dir.path()), Arc::new(StdFs)).expect("open");
    let k = key("pinned", 0);
    log.create_partition(k.clone(), segments_of(4096))
        .expect("create");
    for tag in 0..60 {
        append(&log, &k, bytes(2, 200, tag)).await;
    }
    log.checkpoint_now().expect("checkpoint");
    let first_files = wal_seqs(dir.path());
    let held = log.read_ranges(&k, Offset(0), 4096, true).expect("ranges");
    let want = log.read(&k, Offset(0), 4096, true).expect("read").records;
    assert!(!want.is_empty());
    log.delete_records(&k, Offset(-1)).expect("delete records");
    for tag in 100..200 {
        append(&log, &k, bytes(2, 200, tag)).await;
    }
    log.checkpoint_now().expect("checkpoint");
    let first = *first_files.first().expect("a file");
    assert!(
        wal_seqs(dir.path()).contains(&first),
        "the held file {first} is not retired"
    );
    assert_eq!(held.to_vec().expect("read"), want.to_vec());
    drop(held);
    append(&log, &k, bytes(2, 200, 300)).await;
    log.checkpoint_now().expect("checkpoint");
    assert!(
        !wal_seqs(dir.path()).contains(&first),
        "released, the file {first} is retired"
    );
}

#[tokio::test]
async fn damaged_headers_give_the_same_answer_both_ways() {
    // Goal: where a batch header in the journal is damaged (its base offset, its length, its
    // magic), `read_ranges` answers every fetch exactly as `read` does: the same bytes up to
    // the damage, or the same error. The header walk hands such reads to the byte path,
    // whose batch CRC decides.
    // Buffered journal only: damage made on disk under a running broker is not seen in the
    // in-memory tail of a direct-I/O journal, which serves the bytes as they were written.
    for (what, delta) in [("base offset", 7u64), ("length", 10), ("magic", 16)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = config(dir.path());
        config.journal_direct_io = false;
        let (log, _) = LogManager::open(config, Arc::new(StdFs)).expect("open");
        let k = key("damaged", 0);
        create(&log, &k);
        let mut rng = Rng(0xdead_0001 + delta);
        for tag in 0..40 {
            let count = 1 + rng.below(5) as i32;
            append(&log, &k, bytes(count, 50 + rng.below(300) as usize, tag)).await;
        }
        log.checkpoint_now().expect("checkpoint");
        let pdir = partition_dir(dir.path(), &k);
        let extents = segment_files(&pdir);
        let batches = segment_batches(dir.path(), &extents[0]);
        let (_, seq, position, _) = batches[20];
        flip_bit(&journal_path(dir.path(), seq), position + delta);
        let high_watermark = log.offsets(&k).expect("offsets").high_watermark.0;
        let (mut same_bytes, mut same_errors) = (0, 0);
        for offset in 0..=high_watermark {
            for max_bytes in [100, 3000, 20_000, 1 << 20] {
                for min_one_batch in [false, true] {
                    let offset = Offset(offset);
                    let a = log.read(&k, offset, max_bytes, min_one_batch);
                    let b = log.read_ranges(&k, offset, max_bytes, min_one_batch);
                    match (a, b) {
                        (Ok(a), Ok(b)) => {
                            assert_eq!(b.to_vec().expect("read"), a.records.to_vec(), "{what}");
                            same_bytes += 1;
                        }
                        (Err(a), Err(b)) => {
                            assert_eq!(a.to_string(), b.to_string(), "{what}");
                            same_errors += 1;
                        }
                        (a, b) => panic!("{what}: read {a:?} but read_ranges {b:?}"),
                    }
                }
            }
        }
        assert!(same_errors > 0, "{what}: the damage is seen");
        assert!(same_bytes > 0, "{what}: data around it is served");
    }
}

/// Drops bytes `at..at + len` of `file` from the page cache (clean pages, so they go).
fn evict(file: &std::fs::File, at: u64, len: u64) {
    for _ in 0..50 {
        nix::fcntl::posix_fadvise(
            file.as_raw_fd(),
            at as i64,
            len as i64,
            nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED,
        )
        .expect("fadvise");
        if resident_pages(file, at, len) == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("pages {at}..+{len} still cached after 50 DONTNEED advices");
}

/// Opens `path` with its pages dropped from the page cache (clean pages of an unmapped
/// file: dropped by the advice). The kernel may keep a page it is advised to drop, so the
/// advice is repeated until `mincore` finds no page resident.
fn open_evicted(path: &std::path::Path) -> std::fs::File {
    let file = std::fs::File::open(path).expect("open");
    let len = file.metadata().expect("stat").len();
    evict(&file, 0, len);
    file
}

/// How many of the 4 KiB pages of `file` in `[offset, offset + len)` (`offset` a multiple
/// of 4 KiB) are in the page cache: `mincore` over a read-only shared mapping, which reads
/// nothing in.
#[allow(unsafe_code)]
fn resident_pages(file: &std::fs::File, offset: u64, len: u64) -> usize {
    let page = 4096u64;
    assert_eq!(offset % page, 0);
    if len == 0 {
        return 0;
    }
    let len = usize::try_from(len).expect("len");
    let mut vec = vec![0u8; len.div_ceil(page as usize)];
    // SAFETY: a fresh read-only mapping of an open file, unmapped before returning; `vec`
    // has a byte for every page of it, as `mincore` writes.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            libc::off_t::try_from(offset).expect("offset"),
        );
        assert_ne!(addr, libc::MAP_FAILED, "mmap");
        let rc = libc::mincore(addr, len, vec.as_mut_ptr());
        libc::munmap(addr, len);
        assert_eq!(rc, 0, "mincore");
    }
    vec.iter().filter(|b| **b & 1 == 1).count()
}

/// A range whose pages were dropped from the page cache is read back in by
/// `make_resident` (on the caller's thread, not later in a worker's `sendfile`), and a
/// cached range costs nothing but the check.
///
/// Residency is checked with `mincore` over the whole range, not only by `make_resident`'s
/// answer: its probe looks at the range's last page alone. (With the earlier probe, a
/// non-blocking read that itself read the missing page, asserting the answer failed about
/// one run in four in a loop: see `is_cached` in `record_slices.rs`.)
#[test]
fn make_resident_reads_an_evicted_range_back_into_the_page_cache() {
    use std::io::Write;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("cold");
    let len = 1u32 << 20;
    let mut file = std::fs::File::create(&path).expect("create");
    file.write_all(&vec![7u8; len as usize]).expect("write");
    file.sync_all().expect("sync");
    drop(file);
    let file = open_evicted(&path);
    let probe = file.try_clone().expect("dup");
    let range = sluice_log::FileRange::standalone(file, 0, len);
    range.make_resident(0).expect("page in");
    let pages = (len / 4096) as usize;
    assert_eq!(
        resident_pages(&probe, 0, u64::from(len)),
        pages,
        "the evicted range was read in whole"
    );
    assert!(
        !range.make_resident(0).expect("check"),
        "once read in, the range is cached"
    );
    assert_eq!(range.read(len as usize - 3, 3).expect("read"), vec![7u8; 3]);
}

/// A cold range is read in together with the file after it, up to the read-ahead: a later
/// range inside that stretch (another partition's next batch in the journal) is then
/// cached without a read of its own.
#[test]
fn make_resident_reads_the_file_ahead_of_a_cold_range() {
    use std::io::Write;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("cold");
    let mib = 1u64 << 20;
    let mut file = std::fs::File::create(&path).expect("create");
    file.write_all(&vec![5u8; 8 * mib as usize]).expect("write");
    file.sync_all().expect("sync");
    drop(file);
    // Well past what the kernel's own read-ahead brings in for a 256 KiB read (2 MiB at the
    // largest initial window of an 8 MiB `read_ahead_kb`).
    let (later_at, later_len) = (3 * mib + mib / 2, mib / 4);
    let later_pages = (later_len / 4096) as usize;
    let first = |file| sluice_log::FileRange::standalone(file, 0, (mib / 4) as u32);
    let probe = std::fs::File::open(&path).expect("open");
    first(open_evicted(&path))
        .make_resident(4 * mib)
        .expect("page in");
    assert_eq!(
        resident_pages(&probe, later_at, later_len),
        later_pages,
        "the read-ahead brought the later range in"
    );
    // Without the read-ahead the later range stays cold.
    first(open_evicted(&path))
        .make_resident(0)
        .expect("page in");
    assert_eq!(
        resident_pages(&probe, later_at, later_len),
        0,
        "no read-ahead: the later range stays out"
    );
}

/// After a fetch, the file after its furthest range is read in for the consumer's next
/// fetch, once enough of it is missing; once that is cached, asking again reads nothing.
#[test]
fn read_ahead_after_brings_in_what_follows_a_range() {
    use std::io::Write;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("next");
    let mib = 1u64 << 20;
    let mut file = std::fs::File::create(&path).expect("create");
    file.write_all(&vec![6u8; 8 * mib as usize]).expect("write");
    file.sync_all().expect("sync");
    drop(file);
    let (later_at, later_len) = (3 * mib, mib / 4);
    let later_pages = (later_len / 4096) as usize;
    let range = |file| sluice_log::FileRange::standalone(file, 0, (mib / 4) as u32);
    let probe = std::fs::File::open(&path).expect("open");
    assert!(
        !range(open_evicted(&path))
            .read_ahead_after(0, 0)
            .expect("nothing to read"),
        "no bytes asked for: no read"
    );
    assert_eq!(resident_pages(&probe, later_at, later_len), 0, "still cold");
    let cold = range(open_evicted(&path));
    assert!(
        !cold.read_ahead_after(4 * mib, 5 * mib).expect("probe"),
        "less missing than one step: no read yet"
    );
    assert_eq!(resident_pages(&probe, later_at, later_len), 0, "still cold");
    assert!(
        cold.read_ahead_after(4 * mib, mib).expect("read ahead"),
        "it read"
    );
    assert_eq!(
        resident_pages(&probe, later_at, later_len),
        later_pages,
        "the next stretch is in the page cache"
    );
    assert!(
        !cold.read_ahead_after(4 * mib, 0).expect("probe"),
        "already cached: nothing read again"
    );
    // Asked for one more MiB (5 MiB after the range), with that MiB evicted (the kernel's
    // own read-ahead may have brought it in): only it is missing, under a 2 MiB step, so
    // nothing is read; with a 1 MiB step it is.
    let (next_at, next_len) = (4 * mib + mib / 4, mib);
    let next_pages = (next_len / 4096) as usize;
    evict(&probe, next_at, next_len);
    assert!(
        !cold.read_ahead_after(5 * mib, 2 * mib).expect("probe"),
        "one MiB missing, a two-MiB step: no read"
    );
    assert_eq!(resident_pages(&probe, next_at, next_len), 0, "not read");
    assert!(
        cold.read_ahead_after(5 * mib, mib).expect("read ahead"),
        "one MiB missing, a one-MiB step: read"
    );
    assert_eq!(
        resident_pages(&probe, next_at, next_len),
        next_pages,
        "the missing MiB is in the page cache"
    );
}

#[test]
fn read_ahead_after_probes_from_where_the_last_resident_stretch_ends() {
    // Goal: a consumer moving forward through a file does not look up, after every fetch,
    // the pages the fetch before found or made resident: the probe starts at the end of
    // the stretch last noted for the file when that stretch holds the span's start. Shown
    // by a page evicted inside that stretch: the next read-ahead does not bring it back
    // (without the hint it is the first missing page and the read starts there), while
    // the part of the span past the stretch is read.
    use std::io::Write;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let path = dir.path().join("hint");
    let (kib, mib) = (1u64 << 10, 1u64 << 20);
    let mut file = std::fs::File::create(&path).expect("create");
    file.write_all(&vec![3u8; 8 * mib as usize]).expect("write");
    file.sync_all().expect("sync");
    drop(file);
    let probe = std::fs::File::open(&path).expect("open");
    let first = sluice_log::FileRange::standalone(open_evicted(&path), 0, (256 * kib) as u32);
    assert!(first.read_ahead_after(2 * mib, 0).expect("read ahead"));
    assert_eq!(
        resident_pages(&probe, 256 * kib, 2 * mib),
        (2 * mib / 4096) as usize,
        "the stretch after the first range is resident"
    );
    // The kernel's own read-ahead may have read on past the stretch: evict that part too.
    let (inside_at, inside_len) = (mib, 256 * kib);
    let (past_at, past_len) = (256 * kib + 2 * mib, 256 * kib);
    evict(&probe, inside_at, inside_len);
    evict(&probe, past_at, 4 * mib);
    let second = first.following((256 * kib) as u32);
    assert!(
        second.read_ahead_after(2 * mib, 0).expect("read ahead"),
        "the part past the stretch is missing"
    );
    assert_eq!(
        resident_pages(&probe, past_at, past_len),
        (past_len / 4096) as usize,
        "the part past the noted stretch was read"
    );
    assert_eq!(
        resident_pages(&probe, inside_at, inside_len),
        0,
        "the probe started at the stretch's end, not at the page evicted inside it"
    );
}
