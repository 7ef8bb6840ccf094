//! Damage to files the log wrote, found while it was stopped: a sealed segment's batch with
//! a flipped length (in the journal file that holds it), a sealed segment's extent list
//! cut short or missing, and a fuzzing harness that applies arbitrary damage (flipped
//! bytes, cuts, zeroed stretches, removed files) to every kind of file (journal files,
//! `.extents`, indexes, checkpoint, metadata, producer snapshots) and reopens.
//!
//! What must hold: open never panics; nothing is invented (every batch served with a valid
//! CRC is byte for byte a batch that was appended at that offset); damage is reported and
//! confined (a fetch of damaged offsets fails with `Damaged`, never skips them silently);
//! when only index files of a cleanly stopped log are damaged, every batch is served; and
//! when journal, extents or index files of a cleanly stopped log are damaged, every batch
//! whose bytes and extent record (and the records before it in its segment) were not
//! touched is still served.
//!
//! The fuzzing runs on stable Rust with proptest, bounded to `SLUICE_FUZZ_CASES` cases per
//! property (default 24) from a fixed seed (`SLUICE_FUZZ_SEED`, default 1; `random` for
//! exploration), so it is part of `cargo test --workspace --release` and reproducible.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::common::*;
use proptest::prelude::*;
use sluice_log::batch::layout::{MAGIC_AT, PARTITION_LEADER_EPOCH_AT};
use sluice_log::{LogConfig, LogError, LogManager, Offset, PartitionKey};

const SEGMENT_BYTES: u64 = 1200;
const BATCHES: i64 = 40;
/// Small journal files, so the batches are spread over several of them.
const JOURNAL_FILE_BYTES: u64 = 64 * 1024;

/// Where a batch is stored: its bytes in a journal file, and the extent record of its
/// segment that points at them.
#[derive(Debug, Clone)]
struct Stored {
    /// The journal file holding the batch's bytes.
    file: PathBuf,
    /// Position of the batch in that journal file.
    position: u64,
    len: u64,
    base: i64,
    last: i64,
    /// The segment's `.extents` file.
    extents: PathBuf,
    /// Index of the batch's record in it.
    slot: u64,
    /// Journal files named by the records before it in the same extents file (loading
    /// stops at a record naming a missing file).
    earlier_files: Vec<PathBuf>,
}

fn partition() -> PartitionKey {
    key("damage", 0)
}

/// Builds a log of `BATCHES` batches of 2 records over about 7 segments of
/// `SEGMENT_BYTES`, in journal files of `JOURNAL_FILE_BYTES`. A clean stop, or (unclean) a
/// checkpoint half way and a drop.
async fn build(dir: &Path, clean: bool) -> BTreeMap<i64, Vec<u8>> {
    let mut manager_config = config(dir);
    manager_config.journal_file_bytes_max = JOURNAL_FILE_BYTES;
    let (log, _) =
        LogManager::open(manager_config, std::sync::Arc::new(sluice_log::fs::StdFs)).expect("open");
    let k = partition();
    let config = LogConfig {
        segment_bytes: SEGMENT_BYTES,
        ..LogConfig::default()
    };
    log.create_partition(k.clone(), config).expect("create");
    for tag in 0..BATCHES {
        append(&log, &k, bytes(2, 50, tag)).await;
        if !clean && tag == BATCHES / 2 {
            log.checkpoint_now().expect("checkpoint");
        }
    }
    let originals = raw_batches(&log, &k);
    assert_eq!(originals.len() as i64, BATCHES);
    if clean {
        log.shutdown().expect("shutdown");
    }
    originals
}

/// Every batch from the log start to the high watermark, by base offset.
fn raw_batches(log: &LogManager, k: &PartitionKey) -> BTreeMap<i64, Vec<u8>> {
    let offsets = log.offsets(k).expect("offsets");
    let mut next = offsets.log_start_offset;
    let mut out = BTreeMap::new();
    while next < offsets.high_watermark {
        let records = log.read(k, next, 1 << 20, true).expect("read").records;
        for batch in sluice_log::batch::BatchIter::new(records) {
            let batch = batch.expect("batch");
            let h = header(&batch);
            next = Offset(h.last_offset().0 + 1);
            out.insert(h.base_offset().0, batch.to_vec());
        }
    }
    out
}

/// The batches of every segment of the partition in `data`, located through the persisted
/// extent records and parsed straight from the journal files.
fn stored_batches(data: &Path) -> Vec<Stored> {
    let mut out = Vec::new();
    for extents in segment_files(&partition_dir(data, &partition())) {
        let records = extent_records(&extents);
        for (segment_position, seq, position, len) in segment_batches(data, &extents) {
            let slot = records
                .iter()
                .position(|r| r.start <= segment_position && segment_position < r.start + r.len)
                .expect("a record holds the batch");
            let earlier_files = records[..slot]
                .iter()
                .map(|r| journal_path(data, r.seq))
                .collect();
            let journal = std::fs::read(journal_path(data, seq)).expect("journal");
            let h = header(&journal[position as usize..]);
            out.push(Stored {
                file: journal_path(data, seq),
                position,
                len,
                base: h.base_offset().0,
                last: h.last_offset().0,
                extents: extents.clone(),
                slot: slot as u64,
                earlier_files,
            });
        }
    }
    out
}

/// What a fetch of one offset gave.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Served {
    /// The batch holding it, with this base offset, byte for byte the original.
    Intact(i64),
    /// A batch whose CRC fails (the client rejects it): damage it could not see on open.
    BadCrc,
    /// `LogError::Damaged`: reported, not skipped.
    Damaged,
}

/// Fetches every offset from the log start to the high watermark one by one and checks
/// that nothing is invented.
fn served(
    log: &LogManager,
    k: &PartitionKey,
    originals: &BTreeMap<i64, Vec<u8>>,
) -> BTreeMap<i64, Served> {
    let offsets = log.offsets(k).expect("offsets");
    let mut out = BTreeMap::new();
    for offset in offsets.log_start_offset.0..offsets.high_watermark.0 {
        let got = match log.read(k, Offset(offset), 1 << 20, true) {
            Ok(result) => {
                let batch = result.records;
                assert!(
                    !batch.is_empty(),
                    "empty read at {offset} below the high watermark"
                );
                let h = header(&batch);
                let len = h.total_size().expect("whole batch");
                let first = &batch[..len];
                assert!(
                    h.base_offset().0 <= offset && offset <= h.last_offset().0,
                    "read at {offset} returned batch {}..={}",
                    h.base_offset().0,
                    h.last_offset().0
                );
                if sluice_log::batch::validate(first, u32::MAX).is_err() {
                    Served::BadCrc
                } else {
                    let original = originals
                        .get(&h.base_offset().0)
                        .unwrap_or_else(|| panic!("invented batch at {}", h.base_offset().0));
                    // The partition leader epoch lies outside the CRC in Kafka's format;
                    // everything else must match.
                    let epoch_at = PARTITION_LEADER_EPOCH_AT;
                    assert_eq!(
                        &first[..epoch_at],
                        &original[..epoch_at],
                        "batch at {offset}"
                    );
                    assert_eq!(
                        &first[MAGIC_AT..],
                        &original[MAGIC_AT..],
                        "batch at {offset}"
                    );
                    Served::Intact(h.base_offset().0)
                }
            }
            Err(LogError::Damaged { .. }) => Served::Damaged,
            Err(other) => panic!("read at {offset}: {other}"),
        };
        out.insert(offset, got);
    }
    out
}

/// The partition's segments (`.extents` files) in `data`.
fn segments(data: &Path) -> Vec<PathBuf> {
    segment_files(&partition_dir(data, &partition()))
}

/// The stored batches of segment file `extents`, in order.
fn batches_in(data: &Path, extents: &Path) -> Vec<Stored> {
    stored_batches(data)
        .into_iter()
        .filter(|s| s.extents == extents)
        .collect()
}

fn has_action(report: &sluice_log::RecoveryReport, needle: &str) -> bool {
    report.actions.iter().any(|a| a.contains(needle))
}

/// Asserts: the offsets of `lost` batches are answered `Damaged`, every other original
/// batch is served intact, and the log end did not move back.
fn assert_confined(log: &LogManager, originals: &BTreeMap<i64, Vec<u8>>, lost: &[&Stored]) {
    let k = partition();
    let got = served(log, &k, originals);
    let end = originals
        .values()
        .last()
        .map(|b| header(b).last_offset().0 + 1)
        .unwrap();
    assert_eq!(
        log.offsets(&k).expect("offsets").log_end_offset,
        Offset(end)
    );
    for (&offset, how) in &got {
        let in_lost = lost.iter().any(|s| s.base <= offset && offset <= s.last);
        if in_lost {
            assert_eq!(
                *how,
                Served::Damaged,
                "offset {offset} is in a damaged batch"
            );
        } else {
            assert!(matches!(how, Served::Intact(_)), "offset {offset}: {how:?}");
        }
    }
}

#[tokio::test]
async fn flipped_batch_length_in_sealed_segment_loses_only_that_batch() {
    // Goal: a flipped batchLength of a batch of a sealed segment (in the journal file that
    // holds it; found while stopped) costs exactly that batch: it is reported, fetches of
    // its offsets fail, every other batch (before and after it in the segment, and in later
    // segments) is served, no segment file is deleted, and new appends continue at the old
    // log end.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let files = segments(dir.path());
    assert!(files.len() >= 5, "{files:?}");
    let target = batches_in(dir.path(), &files[2])
        .into_iter()
        .nth(1)
        .expect("batch");
    flip_bit(&target.file, target.position + 10); // batchLength += or -= 256
    let (log, report) = open(dir.path());
    assert!(
        has_action(&report, "is damaged at byte"),
        "{:?}",
        report.actions
    );
    assert_eq!(segments(dir.path()), files, "no segment file deleted");
    assert_confined(&log, &originals, &[&target]);
    let next = append(&log, &partition(), bytes(1, 10, 99)).await;
    assert_eq!(next.base_offset, Offset(BATCHES * 2));
}

#[tokio::test]
async fn cut_sealed_segment_keeps_every_later_segment() {
    // Goal: a sealed segment's extent list cut short (40 bytes: one whole record and part of
    // the one before) loses only the batches those records described; later segments are
    // kept and served, the missing offsets are answered Damaged.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let files = segments(dir.path());
    let stored = batches_in(dir.path(), &files[1]);
    let records = std::fs::metadata(&files[1]).expect("meta").len() / EXTENT_RECORD_BYTES;
    truncate_by(&files[1], EXTENT_RECORD_BYTES + 8);
    let (log, report) = open(dir.path());
    assert!(has_action(&report, "ends early"), "{:?}", report.actions);
    assert!(has_action(&report, "are missing"), "{:?}", report.actions);
    assert_eq!(segments(dir.path()), files, "no segment file deleted");
    let lost: Vec<&Stored> = stored.iter().filter(|s| s.slot >= records - 2).collect();
    assert!(!lost.is_empty());
    assert!(lost.len() < stored.len(), "the batches before the cut stay");
    assert_confined(&log, &originals, &lost);
}

#[tokio::test]
async fn missing_sealed_segment_keeps_every_later_segment() {
    // Goal: a deleted segment (its `.extents` file) loses only its own offsets; later
    // segments are kept.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let files = segments(dir.path());
    let lost = batches_in(dir.path(), &files[2]);
    std::fs::remove_file(&files[2]).expect("remove");
    let (log, report) = open(dir.path());
    assert!(has_action(&report, "are missing"), "{:?}", report.actions);
    assert_eq!(segments(dir.path()).len(), files.len() - 1);
    assert_confined(&log, &originals, &lost.iter().collect::<Vec<_>>());
}

#[tokio::test]
async fn damaged_last_segment_never_reuses_offsets() {
    // Goal: damage in the last segment's durable part (its first batch's bytes in the
    // journal) keeps the log end where it was (the checkpoint's recovery point): new
    // appends never reuse acknowledged offsets.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let files = segments(dir.path());
    let last = files.last().expect("last").clone();
    let lost = batches_in(dir.path(), &last);
    flip_bit(&lost[0].file, lost[0].position + 10);
    let (log, report) = open(dir.path());
    assert!(
        has_action(&report, "is damaged at byte"),
        "{:?}",
        report.actions
    );
    assert_confined(&log, &originals, &[&lost[0]]);
    let next = append(&log, &partition(), bytes(1, 10, 99)).await;
    assert_eq!(next.base_offset, Offset(BATCHES * 2));
}

#[tokio::test]
async fn cut_journal_file_keeps_the_batches_before_the_cut() {
    // Goal: a journal file cut short (media damage found while stopped) loses only the
    // batches whose bytes were cut: a sealed segment's batches before the cut are served,
    // fetches of the cut ones fail with Damaged, and segments in later journal files are
    // kept. Found by `fuzz_data_files_keep_every_untouched_batch` with a random seed.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let stored = stored_batches(dir.path());
    // The last batch of a sealed segment (not its first), in the first journal file, with
    // a later journal file holding data too. The cut keeps its header: a header walk sees
    // nothing wrong with it.
    let target = stored
        .windows(2)
        .find(|w| w[0].slot > 0 && w[1].slot == 0 && w[0].file == stored[0].file)
        .map(|w| w[0].clone())
        .expect("the last batch of a segment");
    assert!(
        stored.iter().any(|s| s.file != target.file),
        "several journal files"
    );
    let keep = target.position + target.len - 20;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&target.file)
        .expect("open")
        .set_len(keep)
        .expect("cut the journal file");
    let (log, _report) = open(dir.path());
    let lost: Vec<&Stored> = stored
        .iter()
        .filter(|s| s.file == target.file && s.position + s.len > keep)
        .collect();
    assert_confined(&log, &originals, &lost);
}

// ---------------------------------------------------------------------------------------
// Fuzzing
// ---------------------------------------------------------------------------------------

/// One piece of damage to one file (picked by index among the files present).
#[derive(Debug, Clone)]
enum Damage {
    Flip { file: usize, at: u64, mask: u8 },
    Zero { file: usize, at: u64, len: u64 },
    Cut { file: usize, keep: u64 },
    Remove { file: usize },
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        4 => (any::<usize>(), any::<u64>(), 1u8..=255).prop_map(|(file, at, mask)| Damage::Flip { file, at, mask }),
        2 => (any::<usize>(), any::<u64>(), 1u64..200).prop_map(|(file, at, len)| Damage::Zero { file, at, len }),
        2 => (any::<usize>(), any::<u64>()).prop_map(|(file, keep)| Damage::Cut { file, keep }),
        1 => any::<usize>().prop_map(|file| Damage::Remove { file }),
    ]
}

/// Every regular file under `dir` (sorted), except the lock file.
fn all_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let entry = entry.expect("entry");
        let path = entry.path();
        if entry.file_type().expect("type").is_dir() {
            out.extend(all_files(&path));
        } else if path.file_name().is_some_and(|n| n != ".lock") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Byte ranges of each file that damage touched (a removed file: everything).
type Touched = BTreeMap<PathBuf, Vec<(u64, u64)>>;

fn apply(files: &[PathBuf], damage: &[Damage]) -> Touched {
    let mut touched = Touched::new();
    for d in damage {
        let pick = |i: usize| files[i % files.len()].clone();
        let path = match d {
            Damage::Flip { file, .. }
            | Damage::Zero { file, .. }
            | Damage::Cut { file, .. }
            | Damage::Remove { file } => pick(*file),
        };
        let Ok(mut data) = std::fs::read(&path) else {
            continue; // removed by an earlier piece of damage
        };
        let len = data.len() as u64;
        let range = match *d {
            Damage::Flip { at, mask, .. } if len > 0 => {
                data[(at % len) as usize] ^= mask;
                (at % len, at % len + 1)
            }
            Damage::Zero { at, len: n, .. } if len > 0 => {
                let from = at % len;
                let to = (from + n).min(len);
                data[from as usize..to as usize].fill(0);
                (from, to)
            }
            Damage::Cut { keep, .. } => {
                let keep = if len == 0 { 0 } else { keep % len };
                data.truncate(keep as usize);
                (keep, u64::MAX)
            }
            Damage::Remove { .. } => {
                std::fs::remove_file(&path).expect("remove");
                touched.entry(path).or_default().push((0, u64::MAX));
                continue;
            }
            _ => continue,
        };
        std::fs::write(&path, data).expect("write");
        touched.entry(path).or_default().push(range);
    }
    touched
}

/// The built logs (clean and unclean), made once and copied for each case.
struct Base {
    dir: tempfile::TempDir,
    originals: BTreeMap<i64, Vec<u8>>,
}

fn base(clean: bool) -> &'static Base {
    static CLEAN: OnceLock<Base> = OnceLock::new();
    static UNCLEAN: OnceLock<Base> = OnceLock::new();
    let cell = if clean { &CLEAN } else { &UNCLEAN };
    cell.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let originals = runtime.block_on(build(dir.path(), clean));
        Base { dir, originals }
    })
}

fn fuzz_cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

/// The bounded run in the test suite uses a fixed seed (`SLUICE_FUZZ_SEED`, default 1), so
/// it is reproducible; set another seed, or `random`, for exploratory runs.
fn fuzz_seed() -> proptest::test_runner::RngSeed {
    match std::env::var("SLUICE_FUZZ_SEED").ok().as_deref() {
        Some("random") => proptest::test_runner::RngSeed::Random,
        Some(seed) => proptest::test_runner::RngSeed::Fixed(seed.parse().unwrap_or(1)),
        None => proptest::test_runner::RngSeed::Fixed(1),
    }
}

/// Which files a fuzz case may damage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    /// Every file of the data directory: only "never panics, never invents" is checked.
    AnyFile,
    /// `.index` / `.timeindex` of a cleanly stopped log: every batch must be served.
    IndexFiles,
    /// Journal files, `.extents`, `.index` and `.timeindex` of a cleanly stopped log: every
    /// batch that damage did not reach must be served.
    DataFiles,
}

impl Scope {
    fn includes(self, path: &Path) -> bool {
        let name = path.to_string_lossy();
        let index = name.ends_with(".index") || name.ends_with(".timeindex");
        match self {
            Scope::AnyFile => true,
            Scope::IndexFiles => index,
            Scope::DataFiles => index || name.ends_with(".extents") || name.ends_with(".wal"),
        }
    }
}

/// Whether damage reached `stored`: its bytes in the journal, its extent record or one
/// before it in the same extents file (loading stops at the first bad record), or a
/// journal file an earlier record names (loading stops there too).
fn reached(stored: &Stored, touched: &Touched) -> bool {
    let overlaps = |path: &Path, from: u64, to: u64| {
        touched
            .get(path)
            .is_some_and(|ranges| ranges.iter().any(|&(a, b)| a < to && from < b))
    };
    let record_end = (stored.slot + 1) * EXTENT_RECORD_BYTES;
    overlaps(&stored.file, stored.position, stored.position + stored.len)
        || overlaps(&stored.extents, 0, record_end)
        || stored
            .earlier_files
            .iter()
            .chain(std::iter::once(&stored.file))
            .any(|f| !f.exists())
}

/// Copies the base log, damages files in `scope`, opens it and checks the properties.
fn check(clean: bool, damage: &[Damage], scope: Scope) {
    let base = base(clean);
    let work = tempfile::tempdir().expect("tempdir");
    copy_dir(base.dir.path(), work.path());
    let files: Vec<PathBuf> = all_files(work.path())
        .into_iter()
        .filter(|p| scope.includes(p))
        .collect();
    let layout = stored_batches(work.path());
    let touched = apply(&files, damage);
    // A panic here fails the case (proptest reports the damage that caused it).
    let opened = LogManager::open(
        config(work.path()),
        std::sync::Arc::new(sluice_log::fs::StdFs),
    );
    let (log, report) = match opened {
        Ok(opened) => opened,
        // Refusing to open is allowed (never silently wrong); only panics are not.
        Err(_) if scope == Scope::AnyFile => return,
        Err(e) => panic!("open failed after {scope:?} damage {damage:?}: {e}"),
    };
    let k = partition();
    let Ok(_) = log.offsets(&k) else {
        assert_eq!(scope, Scope::AnyFile, "partition gone after {damage:?}");
        return; // partition.metadata damaged: the partition is skipped, with a warning
    };
    let got = served(&log, &k, &base.originals);
    if scope == Scope::AnyFile {
        return;
    }
    assert_eq!(
        layout.len() as i64,
        BATCHES,
        "every batch has a stored place"
    );
    for stored in &layout {
        if scope == Scope::DataFiles && reached(stored, &touched) {
            continue;
        }
        for offset in stored.base..=stored.last {
            assert_eq!(
                got.get(&offset),
                Some(&Served::Intact(stored.base)),
                "untouched batch {}..={} not served at {offset} after {damage:?}: \
                 damaged {touched:?}; recovery: {:?}",
                stored.base,
                stored.last,
                report.actions
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), failure_persistence: None, max_shrink_iters: 64, rng_seed: fuzz_seed(), ..ProptestConfig::default() })]

    #[test]
    fn fuzz_any_file_clean_stop(damage in prop::collection::vec(damage(), 1..6)) {
        check(true, &damage, Scope::AnyFile);
    }

    #[test]
    fn fuzz_any_file_unclean_stop(damage in prop::collection::vec(damage(), 1..6)) {
        check(false, &damage, Scope::AnyFile);
    }

    #[test]
    fn fuzz_index_files_keep_every_batch(damage in prop::collection::vec(damage(), 1..4)) {
        check(true, &damage, Scope::IndexFiles);
    }

    #[test]
    fn fuzz_data_files_keep_every_untouched_batch(damage in prop::collection::vec(damage(), 1..4)) {
        check(true, &damage, Scope::DataFiles);
    }
}
