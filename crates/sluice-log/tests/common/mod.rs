//! Shared helpers for the integration tests: a v2 batch builder (real header, simple
//! uncompressed records, correct CRC-32C), keys, configs, and readers that walk a whole
//! partition back.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sluice_log::batch::{Attributes, BatchFields, BatchHeader, BatchHeaderMut, BatchIter};
use sluice_log::fs::{Fs, StdFs};
use sluice_log::{
    LogConfig, LogManager, LogManagerConfig, Offset, PartitionKey, ProducerEpoch, ProducerId,
    RecoveryReport, TopicId,
};

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    loop {
        let byte = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn record(offset_delta: i64, value: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8];
    put_varint(&mut body, 0); // timestamp delta
    put_varint(&mut body, offset_delta);
    put_varint(&mut body, -1); // null key
    put_varint(&mut body, value.len() as i64);
    body.extend_from_slice(value);
    put_varint(&mut body, 0); // no headers
    let mut out = Vec::new();
    put_varint(&mut out, body.len() as i64);
    out.extend_from_slice(&body);
    out
}

/// A valid v2 batch of `count` records of `value_len` bytes. `tag` goes into the base and
/// max timestamp, so each batch can be recognized when read back.
pub fn batch(count: i32, value_len: usize, tag: i64) -> Vec<u8> {
    let mut records = Vec::new();
    for i in 0..count {
        let value = vec![b'a' + (i % 26) as u8; value_len];
        records.extend_from_slice(&record(i64::from(i), &value));
    }
    BatchFields {
        last_offset_delta: count - 1,
        base_timestamp: tag,
        max_timestamp: tag,
        records_count: count,
        ..BatchFields::default()
    }
    .to_batch(&records)
}

/// A valid batch from an idempotent producer: like [`batch`], with the producer id, producer
/// epoch and base sequence set in the header.
pub fn idempotent_batch(
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    count: i32,
    tag: i64,
) -> Bytes {
    let mut out = batch(count, 20, tag);
    set_producer(&mut out, producer_id, epoch, base_sequence);
    Bytes::from(out)
}

/// Sets a batch's producer id, producer epoch and base sequence, and its CRC.
pub fn set_producer(batch: &mut [u8], producer_id: i64, epoch: i16, base_sequence: i32) {
    let mut header = BatchHeaderMut::new(batch).expect("a batch header");
    header.set_producer_id(ProducerId(producer_id));
    header.set_producer_epoch(ProducerEpoch(epoch));
    header.set_base_sequence(base_sequence);
    header.update_crc();
}

/// Sets (`on`) or clears a batch's transactional attribute, and its CRC.
pub fn set_transactional(batch: &mut [u8], on: bool) {
    let mut header = BatchHeaderMut::new(batch).expect("a batch header");
    let attributes = header.header().attributes();
    header.set_attributes(match on {
        true => attributes.with(Attributes::TRANSACTIONAL),
        false => attributes.without(Attributes::TRANSACTIONAL),
    });
    header.update_crc();
}

/// Recomputes the CRC after a test edits a batch.
pub fn fix_crc(batch: &mut [u8]) {
    BatchHeaderMut::new(batch)
        .expect("a batch header")
        .update_crc();
}

pub fn bytes(count: i32, value_len: usize, tag: i64) -> Bytes {
    Bytes::from(batch(count, value_len, tag))
}

pub fn key(topic: &str, partition: i32) -> PartitionKey {
    let mut id = [0u8; 16];
    for (i, b) in topic.bytes().enumerate() {
        id[i % 16] ^= b.wrapping_add(i as u8);
    }
    id[15] ^= 0x5a;
    PartitionKey {
        topic_id: TopicId(id),
        topic: Arc::from(topic),
        partition,
    }
}

/// Whether the tests run with the journal written by direct I/O (`sluice.journal.direct.io`
/// in the broker): the default, as in production; `SLUICE_TEST_JOURNAL_DIRECT_IO=0` runs them
/// through the page cache instead (the test command runs the suite both ways). The suites that
/// build their own configuration (the crash models) read it too, so one variable switches the
/// whole sluice-log suite.
pub fn journal_direct_io() -> bool {
    std::env::var_os("SLUICE_TEST_JOURNAL_DIRECT_IO").is_none_or(|v| v != "0")
}

/// Test defaults: background threads effectively off (checkpoints are taken explicitly).
pub fn config(dir: &Path) -> LogManagerConfig {
    let mut config = LogManagerConfig::new(dir);
    config.journal_direct_io = journal_direct_io();
    config.checkpoint_interval_ms = 3_600_000;
    config.checkpoint_bytes = u64::MAX / 2;
    config.retention_check_interval_ms = 3_600_000;
    config.append_queue_len = 1024;
    // Passes are run explicitly (`clean_journal_now`), so tests decide when data moves.
    config.journal_cleaner.enable = false;
    config
}

pub fn open(dir: &Path) -> (LogManager, RecoveryReport) {
    LogManager::open(config(dir), Arc::new(StdFs)).expect("open")
}

pub fn open_with(dir: &Path, fs: Arc<dyn Fs>) -> (LogManager, RecoveryReport) {
    LogManager::open(config(dir), fs).expect("open")
}

pub fn create(log: &LogManager, key: &PartitionKey) {
    log.create_partition(key.clone(), LogConfig::default())
        .expect("create partition");
}

/// Appends and waits for durability.
pub async fn append(
    log: &LogManager,
    key: &PartitionKey,
    records: Bytes,
) -> sluice_log::AppendInfo {
    log.append(key, records)
        .await
        .expect("queued")
        .wait()
        .await
        .expect("durable")
}

/// Appends and waits, returning the log's answer (for appends that may be refused).
pub async fn try_append(
    log: &LogManager,
    key: &PartitionKey,
    records: Bytes,
) -> Result<sluice_log::AppendInfo, sluice_log::LogError> {
    log.append(key, records).await?.wait().await
}

/// A batch read back: (base offset, tag, size, CRC valid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub base_offset: i64,
    pub last_offset: i64,
    pub tag: i64,
}

/// Reads a partition from its log start to its high watermark, checking every batch.
pub fn read_all(log: &LogManager, key: &PartitionKey) -> Vec<Seen> {
    let offsets = log.offsets(key).expect("offsets");
    let mut next = offsets.log_start_offset;
    let mut seen = Vec::new();
    while next < offsets.high_watermark {
        let result = log.read(key, next, 64 * 1024, true).expect("read");
        assert!(
            !result.records.is_empty(),
            "empty read at {next:?} below {:?}",
            offsets.high_watermark
        );
        for batch in BatchIter::new(result.records) {
            let batch = batch.expect("whole batch");
            let header = sluice_log::batch::validate(&batch, u32::MAX).expect("CRC intact");
            seen.push(Seen {
                base_offset: header.base_offset().0,
                last_offset: header.last_offset().0,
                tag: header.base_timestamp(),
            });
            next = Offset(header.last_offset().0 + 1);
        }
    }
    seen
}

pub fn header(batch: &[u8]) -> BatchHeader<'_> {
    BatchHeader::parse(batch).expect("header")
}

pub fn partition_dir(data: &Path, key: &PartitionKey) -> PathBuf {
    data.join(format!("{}-{}", key.topic, key.partition))
}

/// Sorted paths in `dir` ending with `suffix`.
pub fn files_with(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort();
    files
}

pub fn journal_files(data: &Path) -> Vec<PathBuf> {
    files_with(&data.join("journal"), ".wal")
}

/// Copies a directory tree (used to snapshot a running log, as a crash would see it).
///
/// A file-by-file copy is not taken at one instant, so the order matters; it is chosen so
/// that the copy is a state some crash could leave:
/// 1. the checkpoint first: a crash image never holds a checkpoint newer than the segment
///    data it vouches for (copied the other way round, it can, and recovery rightly reports
///    that as durable data missing);
/// 2. then everything outside `journal` (segments, extents, snapshots);
/// 3. the journal files last: extents are persisted only for journal bytes already synced,
///    so a crash image holds every journal byte its extents point to. Journal files copied
///    before the extents could miss bytes that extents copied later point to (the whole
///    segment then reads as damaged), a state no crash leaves.
pub fn copy_dir(from: &Path, to: &Path) {
    let checkpoint = Path::new("journal").join("checkpoint");
    if from.join(&checkpoint).exists() {
        std::fs::create_dir_all(to.join("journal")).expect("mkdir");
        copy_file(&from.join(&checkpoint), &to.join(&checkpoint));
    }
    copy_tree(from, to, &|rel| rel != Path::new("journal"));
    copy_tree(&from.join("journal"), &to.join("journal"), &|rel| {
        rel != Path::new("checkpoint")
    });
}

/// Copies the entries of `from` whose names pass `keep` (and everything below them).
fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) {
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in entries {
        let entry = entry.expect("entry");
        if !keep(Path::new(&entry.file_name())) {
            continue;
        }
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_tree(&entry.path(), &target, &|_| true);
        } else {
            copy_file(&entry.path(), &target);
        }
    }
}

fn copy_file(from: &Path, to: &Path) {
    if let Err(e) = std::fs::copy(from, to) {
        // A journal file deleted by a checkpoint mid-copy is fine: a crash could see that too.
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    }
}

pub fn truncate_by(path: &Path, bytes: u64) {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("open");
    let len = file.metadata().expect("meta").len();
    file.set_len(len.saturating_sub(bytes)).expect("truncate");
}

pub fn flip_bit(path: &Path, at: u64) {
    let mut data = std::fs::read(path).expect("read");
    data[at as usize] ^= 0x01;
    std::fs::write(path, data).expect("write");
}

/// One record of a `<base>.extents` file (see the module header of `extents.rs`): `len`
/// bytes of the segment, from position `start`, stored at `file_position` of journal file
/// `seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtentRecord {
    pub start: u64,
    pub seq: u64,
    pub file_position: u64,
    pub len: u64,
}

/// Size of one extents record on disk.
pub const EXTENT_RECORD_BYTES: u64 = 32;

/// The valid leading records of an extents file (parsing stops at the first record that is
/// short or fails its CRC, as loading does).
pub fn extent_records(path: &Path) -> Vec<ExtentRecord> {
    let data = std::fs::read(path).expect("read extents");
    let mut out = Vec::new();
    for raw in data.chunks_exact(EXTENT_RECORD_BYTES as usize) {
        let crc = u32::from_be_bytes(raw[28..32].try_into().unwrap());
        if crc32c::crc32c(&raw[..28]) != crc {
            break;
        }
        let u64_at = |at: usize| u64::from_be_bytes(raw[at..at + 8].try_into().unwrap());
        out.push(ExtentRecord {
            start: u64_at(0),
            seq: u64_at(8),
            file_position: u64_at(16),
            len: u64::from(u32::from_be_bytes(raw[24..28].try_into().unwrap())),
        });
    }
    out
}

/// A segment's logical size as persisted: the sum of its extent records' lengths. Only
/// bytes a checkpoint (or a clean shutdown) persisted are counted.
pub fn segment_len(extents: &Path) -> u64 {
    extent_records(extents).iter().map(|r| r.len).sum()
}

/// A segment's files, as the new layout names them: one `.extents` file per segment.
pub fn segment_files(pdir: &Path) -> Vec<PathBuf> {
    files_with(pdir, ".extents")
}

/// The base offset in a segment file's name.
pub fn segment_base(path: &Path) -> i64 {
    let name = path.file_name().expect("name").to_string_lossy();
    name[..20].parse().expect("segment name")
}

/// The path of journal file `seq`.
pub fn journal_path(data: &Path, seq: u64) -> PathBuf {
    data.join("journal").join(format!("{seq:020}.wal"))
}

/// The sequence number in a journal file's name (`.wal` or `.free`).
pub fn journal_seq(path: &Path) -> u64 {
    let name = path.file_name().expect("name").to_string_lossy();
    name[..20].parse().expect("journal name")
}

/// Total size of the files in `paths`.
pub fn total_len(paths: &[PathBuf]) -> u64 {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).expect("meta").len())
        .sum()
}

/// Where each batch of a segment lies: (position in the segment, journal seq, position in
/// that journal file, length), walked from the segment's extents and the journal bytes.
pub fn segment_batches(data: &Path, extents: &Path) -> Vec<(u64, u64, u64, u64)> {
    let records = extent_records(extents);
    let mut out = Vec::new();
    let mut journals: std::collections::HashMap<u64, Vec<u8>> = Default::default();
    // Reassemble the segment's bytes position by position, remembering where each lies.
    for r in &records {
        let journal = journals
            .entry(r.seq)
            .or_insert_with(|| std::fs::read(journal_path(data, r.seq)).expect("read journal"));
        let mut at = 0u64;
        while at + 12 <= r.len {
            let p = (r.file_position + at) as usize;
            let len = i32::from_be_bytes(journal[p + 8..p + 12].try_into().unwrap()) as u64 + 12;
            out.push((r.start + at, r.seq, r.file_position + at, len));
            at += len;
        }
    }
    out
}

/// The entries of a journal file (format v2, see `journal.rs`): (position, total length,
/// partition) of each entry holding batches, in order; padding entries are skipped and
/// the end marker ends the list.
pub fn journal_entries(path: &Path) -> Vec<(u64, u64, i32)> {
    let data = std::fs::read(path).expect("read journal");
    let mut out = Vec::new();
    let mut at = 16usize;
    while at + 28 <= data.len() {
        let len = u32::from_be_bytes(data[at..at + 4].try_into().expect("4 bytes")) as usize;
        let partition = i32::from_be_bytes(data[at + 24..at + 28].try_into().expect("4 bytes"));
        if len < 24 || partition == -1 || at + 4 + len > data.len() {
            break;
        }
        if partition != -2 {
            out.push((at as u64, (4 + len) as u64, partition));
        }
        at += 4 + len;
    }
    out
}
