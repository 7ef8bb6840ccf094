//! Damage to files the log wrote, found while it was stopped: sealed segments with a
//! flipped length, cut short or missing, and a fuzzing harness that applies arbitrary
//! damage (flipped bytes, cuts, zeroed stretches, removed files) to every kind of file
//! (segments, indexes, journal, checkpoint, metadata) and reopens.
//!
//! What must hold: open never panics; nothing is invented (every batch served with a valid
//! CRC is byte for byte a batch that was appended at that offset); damage is reported and
//! confined (a fetch of damaged offsets fails with `Damaged`, never skips them silently);
//! and when only segment or index files of a cleanly stopped log are damaged, every batch
//! whose bytes were not touched is still served.
//!
//! The fuzzing runs on stable Rust with proptest, bounded to `SLUICE_FUZZ_CASES` cases per
//! property (default 24) from a fixed seed (`SLUICE_FUZZ_SEED`, default 1; `random` for
//! exploration), so it is part of `cargo test --workspace --release` and reproducible.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;
use proptest::prelude::*;
use sluice_log::{LogConfig, LogError, LogManager, Offset, PartitionKey};

const SEGMENT_BYTES: u64 = 1200;
const BATCHES: i64 = 40;

/// A batch as it sits in a segment file.
#[derive(Debug, Clone)]
struct Stored {
    file: PathBuf,
    position: u64,
    len: u64,
    base: i64,
    last: i64,
}

fn partition() -> PartitionKey {
    key("damage", 0)
}

/// Builds a log of `BATCHES` batches of 2 records over about 7 segments of
/// `SEGMENT_BYTES`. A clean stop, or (unclean) a checkpoint half way and a drop.
async fn build(dir: &Path, clean: bool) -> BTreeMap<i64, Vec<u8>> {
    let (log, _) = open(dir);
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

/// The batches in the segment files of `dir`, parsed straight from the files.
fn stored_batches(dir: &Path) -> Vec<Stored> {
    let mut out = Vec::new();
    for file in files_with(dir, ".log") {
        let data = std::fs::read(&file).expect("read segment");
        let mut position = 0usize;
        while position + 61 <= data.len() {
            let h = header(&data[position..]);
            let len = h.total_size().expect("length") as u64;
            out.push(Stored {
                file: file.clone(),
                position: position as u64,
                len,
                base: h.base_offset().0,
                last: h.last_offset().0,
            });
            position += len as usize;
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
                    // Bytes 12..16 (partition leader epoch) lie outside the CRC in Kafka's
                    // format; everything else must match.
                    assert_eq!(&first[..12], &original[..12], "batch at {offset}");
                    assert_eq!(&first[16..], &original[16..], "batch at {offset}");
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

fn segment_files(data: &Path) -> Vec<PathBuf> {
    files_with(&partition_dir(data, &partition()), ".log")
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
    // Goal: a flipped batchLength in a sealed segment (found while stopped) costs exactly
    // that batch: it is reported, fetches of its offsets fail, every other batch (before
    // and after it in the segment, and in later segments) is served, no file is deleted,
    // and new appends continue at the old log end.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let files = segment_files(dir.path());
    assert!(files.len() >= 5, "{files:?}");
    let stored = stored_batches(&partition_dir(dir.path(), &partition()));
    let target = stored
        .iter()
        .filter(|s| s.file == files[2])
        .nth(1)
        .expect("batch")
        .clone();
    flip_bit(&target.file, target.position + 10); // batchLength += or -= 256
    let (log, report) = open(dir.path());
    assert!(
        has_action(&report, "is damaged at byte"),
        "{:?}",
        report.actions
    );
    assert_eq!(segment_files(dir.path()), files, "no segment file deleted");
    assert_confined(&log, &originals, &[&target]);
    let next = append(&log, &partition(), bytes(1, 10, 99)).await;
    assert_eq!(next.base_offset, Offset(BATCHES * 2));
}

#[tokio::test]
async fn cut_sealed_segment_keeps_every_later_segment() {
    // Goal: 100 bytes cut from a sealed segment lose only the batches those bytes held;
    // later segments are kept and served, the missing offsets are answered Damaged.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let files = segment_files(dir.path());
    let len = std::fs::metadata(&files[1]).expect("meta").len();
    truncate_by(&files[1], 100);
    let (log, report) = open(dir.path());
    assert!(
        has_action(&report, "damaged") || has_action(&report, "missing"),
        "{:?}",
        report.actions
    );
    assert_eq!(segment_files(dir.path()), files, "no segment file deleted");
    let cut_from = len - 100;
    let lost: Vec<Stored> = batches_of(&originals, &files[1], dir.path())
        .into_iter()
        .filter(|s| s.position + s.len > cut_from)
        .collect();
    assert!(!lost.is_empty());
    assert_confined(&log, &originals, &lost.iter().collect::<Vec<_>>());
}

#[tokio::test]
async fn missing_sealed_segment_keeps_every_later_segment() {
    // Goal: a deleted segment file loses only its own offsets; later segments are kept.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let files = segment_files(dir.path());
    let lost = batches_of(&originals, &files[2], dir.path());
    std::fs::remove_file(&files[2]).expect("remove");
    let (log, report) = open(dir.path());
    assert!(has_action(&report, "are missing"), "{:?}", report.actions);
    assert_eq!(segment_files(dir.path()).len(), files.len() - 1);
    assert_confined(&log, &originals, &lost.iter().collect::<Vec<_>>());
}

#[tokio::test]
async fn damaged_last_segment_never_reuses_offsets() {
    // Goal: damage in the last segment's durable part keeps the log end where it was
    // (the checkpoint's recovery point): new appends never reuse acknowledged offsets.
    let dir = tempfile::tempdir().expect("tempdir");
    let originals = build(dir.path(), true).await;
    let files = segment_files(dir.path());
    let last = files.last().expect("last").clone();
    let lost = batches_of(&originals, &last, dir.path());
    flip_bit(&last, lost[0].position + 10);
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

/// The batches `file` held when the log was built, from the originals' layout (segments
/// hold batches back to back, so positions follow from the sizes).
fn batches_of(originals: &BTreeMap<i64, Vec<u8>>, file: &Path, _data: &Path) -> Vec<Stored> {
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    let base: i64 = name.trim_end_matches(".log").parse().expect("segment name");
    let mut position = 0u64;
    let mut out = Vec::new();
    for (&b, batch) in originals.range(base..) {
        let h = header(batch);
        if b != base && position == 0 {
            break;
        }
        out.push(Stored {
            file: file.to_owned(),
            position,
            len: batch.len() as u64,
            base: b,
            last: h.last_offset().0,
        });
        position += batch.len() as u64;
        if position + batch.len() as u64 > SEGMENT_BYTES {
            break;
        }
    }
    out
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

/// Copies the base log, damages it, opens it and checks the properties. With
/// `segments_only`, damage was restricted to segment and index files of a cleanly stopped
/// log, and every untouched batch must still be served.
fn check(clean: bool, damage: &[Damage], segments_only: bool) {
    let base = base(clean);
    let work = tempfile::tempdir().expect("tempdir");
    copy_dir(base.dir.path(), work.path());
    let pdir = partition_dir(work.path(), &partition());
    let files: Vec<PathBuf> = if segments_only {
        all_files(&pdir)
            .into_iter()
            .filter(|p| {
                let name = p.to_string_lossy();
                name.ends_with(".log") || name.ends_with(".index") || name.ends_with(".timeindex")
            })
            .collect()
    } else {
        all_files(work.path())
    };
    let layout = stored_batches(&pdir);
    let touched = apply(&files, damage);
    // A panic here fails the case (proptest reports the damage that caused it).
    let opened = LogManager::open(
        config(work.path()),
        std::sync::Arc::new(sluice_log::fs::StdFs),
    );
    let (log, _report) = match opened {
        Ok(opened) => opened,
        // Refusing to open is allowed (never silently wrong); only panics are not.
        Err(_) if !segments_only => return,
        Err(e) => panic!("open failed after segment damage {damage:?}: {e}"),
    };
    let k = partition();
    let Ok(_) = log.offsets(&k) else {
        assert!(!segments_only, "partition gone after {damage:?}");
        return; // partition.metadata damaged: the partition is skipped, with a warning
    };
    let got = served(&log, &k, &base.originals);
    if !segments_only {
        return;
    }
    for stored in &layout {
        let hit = touched.get(&stored.file).is_some_and(|ranges| {
            ranges
                .iter()
                .any(|&(from, to)| from < stored.position + stored.len && stored.position < to)
        });
        if hit {
            continue;
        }
        for offset in stored.base..=stored.last {
            assert_eq!(
                got.get(&offset),
                Some(&Served::Intact(stored.base)),
                "untouched batch {}..={} not served at {offset} after {damage:?}",
                stored.base,
                stored.last
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: fuzz_cases(), failure_persistence: None, max_shrink_iters: 64, rng_seed: fuzz_seed(), ..ProptestConfig::default() })]

    #[test]
    fn fuzz_any_file_clean_stop(damage in prop::collection::vec(damage(), 1..6)) {
        check(true, &damage, false);
    }

    #[test]
    fn fuzz_any_file_unclean_stop(damage in prop::collection::vec(damage(), 1..6)) {
        check(false, &damage, false);
    }

    #[test]
    fn fuzz_segments_keep_every_untouched_batch(damage in prop::collection::vec(damage(), 1..4)) {
        check(true, &damage, true);
    }
}
