//! The seeded crash-model test: random operations against a `LogManager` on the simulated
//! file system (`SimFs`), checked against an in-memory model after every reopen.
//!
//! Each case draws, from its seed, a sequence of appends (several partitions, varied batch
//! sizes, idempotent producers and plain ones, single and pipelined), retries of acked
//! idempotent batches, segment rolls (small `segment.bytes`), checkpoints, journal
//! cleaner passes (moving live extents out of half-dead journal files), retention,
//! DeleteRecords, partition creates and deletes, power cuts at a random later file-system
//! operation, injected ENOSPC / EIO, crashes and clean shutdowns. After every reopen it
//! reads every partition back and checks:
//! - every acknowledged append at or above the log start is present exactly once, at the
//!   offset it was acknowledged with, with identical bytes;
//! - nothing is invented: every batch read is one the test sent; one whose append was not
//!   answered may be there or not, but whole, once, and in offset order; once a reopen has
//!   shown it absent it never comes back;
//! - offsets are contiguous from the log start to the high watermark, which equals the log
//!   end; the log start is at least every acknowledged DeleteRecords offset and at most
//!   what DeleteRecords or retention asked for;
//! - producer state: the retry of any of an idempotent producer's last 5 batches still in
//!   the log is answered as a duplicate with its original offsets, a batch of an epoch the
//!   producer has moved past is fenced, and the producer's next sequence is accepted,
//!   whatever crashes came in between;
//! - partitions: acknowledged creates and deletes hold; interrupted ones may go either way;
//! - between crashes, the high watermark covers every acknowledged append at once;
//! - LogAppendTime partitions store the append time they answered (duplicates too).
//!
//! A `crash_model` case is deterministic from its seed (background threads idle, the
//! committer's rounds lined up at the file system's gate), so a failure replays: it prints
//! `SLUICE_MODEL_SEED=<seed>` and the last operations (all of them when replaying).
//! `SLUICE_MODEL_CASES=<n>` runs n cases from a fresh random base seed.
//! `SLUICE_TEST_JOURNAL_DIRECT_IO=1` runs it with the journal written by direct I/O (the
//! simulated file system asserts that every direct write is page-aligned).
//! `crash_model_with_background_checkpoints` runs the same with the checkpointer on its own
//! (closer to production, replays only approximately). The fixed cases at the end are the
//! bugs the model found, each failing without its fix.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sluice_log::batch::layout::BATCH_LENGTH_AT;
use sluice_log::batch::{Attributes, BatchFields, BatchHeader, BatchIter, HEADER_LEN};
use sluice_log::fs::{FaultOp, Fs};
use sluice_log::sim_fs::{CrashMode, SimFs, SimRng};
use sluice_log::{
    AppendInfo, LogConfig, LogError, LogManager, LogManagerConfig, Offset, PartitionKey,
    TimestampType, TopicId,
};

const DATA_DIR: &str = "/data";
/// Cases in the default run (fixed seeds, so CI runs are repeatable).
const DEFAULT_CASES: u64 = 128;
/// Cases with the checkpointer running on its own (timing-dependent, fewer).
const BACKGROUND_CASES: u64 = 32;
const OPS_PER_CASE: usize = 300;
const TOPICS: [&str; 3] = ["alpha", "beta", "gamma-x"];
const PARTITIONS_MAX: usize = 4;
const PRODUCERS_PER_PARTITION: usize = 2;
/// How many of a producer's batches the log remembers (PRODUCER_BATCHES_CACHED_MAX).
const PRODUCER_BATCHES_CACHED: usize = 5;
const TRACE_LEN: usize = 40;

#[derive(Debug, Clone)]
struct Sent {
    tag: i64,
    bytes: Bytes,
    records: i64,
    /// Idempotent batches: who sent it, with which epoch and first sequence.
    producer: Option<ProducerFields>,
    /// On a LogAppendTime partition, the append time the log answered (or stored).
    append_time_ms: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProducerFields {
    /// Index of the producer in its partition's model.
    index: usize,
    epoch: i16,
    first_seq: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Live,
    /// The create was not answered: may exist (empty) after the next reopen, or not.
    MaybeCreated,
    /// The delete was not answered: may be gone, or intact.
    MaybeDeleted,
}

#[derive(Debug)]
struct Producer {
    producer_id: i64,
    /// The epoch the producer sends with (bumped now and then, as a new session would).
    epoch: i16,
    next_seq: i32,
    /// Base offsets of its batches present in the log, oldest first.
    history: Vec<i64>,
}

#[derive(Debug)]
struct PartModel {
    key: PartitionKey,
    config: LogConfig,
    status: Status,
    /// Batches known present (acknowledged, or seen by a reopen), by base offset. Never
    /// pruned: retention and DeleteRecords may be undone by a crash, and whatever comes
    /// back must be the same bytes.
    batches: BTreeMap<i64, Sent>,
    /// Sent but not answered: may or may not be in the log after the next reopen.
    unknown: Vec<Sent>,
    /// The next offset the log will assign.
    log_end: i64,
    log_start_min: i64,
    log_start_max: i64,
    producers: Vec<Producer>,
}

#[derive(Debug)]
enum Outcome {
    Acked(AppendInfo),
    /// No answer, or a storage failure: the append may or may not be in the log.
    Unknown,
    /// Its commit round was refused for space (or descriptors) and undone, and the log
    /// is not poisoned: the append is not in the log, and later appends go on.
    Undone,
    Refused(LogError),
}

fn classify(log: &LogManager, result: Result<AppendInfo, LogError>) -> Outcome {
    match result {
        Ok(info) => Outcome::Acked(info),
        Err(LogError::Io(e) | LogError::FileLimit(e))
            if sluice_log::fs::is_retryable(&e) && !log.is_poisoned() =>
        {
            Outcome::Undone
        }
        Err(LogError::Io(_) | LogError::Poisoned | LogError::ShuttingDown) => Outcome::Unknown,
        Err(error) => Outcome::Refused(error),
    }
}

/// What a run exercised, printed at the end so a weak run is visible.
#[derive(Debug, Default, Clone, Copy)]
struct Totals {
    ops: u64,
    acked: u64,
    /// Appends with no answer (power cut, fault) ...
    unknown: u64,
    /// ... of which found in the log after the reopen.
    unknown_present: u64,
    /// Appends refused for space and undone, the log going on.
    undone: u64,
    duplicates_checked: u64,
    zombies_fenced: u64,
    reopens: u64,
    clean_shutdowns: u64,
    /// Journal cleaner passes that moved bytes, and the bytes.
    journal_moves: u64,
    journal_bytes_moved: u64,
}

impl std::ops::AddAssign for Totals {
    fn add_assign(&mut self, o: Self) {
        self.ops += o.ops;
        self.acked += o.acked;
        self.unknown += o.unknown;
        self.unknown_present += o.unknown_present;
        self.undone += o.undone;
        self.duplicates_checked += o.duplicates_checked;
        self.zombies_fenced += o.zombies_fenced;
        self.reopens += o.reopens;
        self.clean_shutdowns += o.clean_shutdowns;
        self.journal_moves += o.journal_moves;
        self.journal_bytes_moved += o.journal_bytes_moved;
    }
}

struct World {
    seed: u64,
    rng: SimRng,
    fs: SimFs,
    rt: tokio::runtime::Runtime,
    log: Option<LogManager>,
    parts: Vec<PartModel>,
    next_tag: i64,
    next_topic_id: u8,
    next_producer_id: i64,
    trace: VecDeque<String>,
    /// Lines of `trace` kept (all of them when a seed is replayed).
    trace_len: usize,
    totals: Totals,
    /// The checkpointer runs on its own (see `log_config_for`).
    background: bool,
}

fn log_config() -> LogManagerConfig {
    log_config_for(false)
}

/// With `background`, the checkpointer thread runs on its own every few milliseconds, in
/// parallel with appends (closer to production, but the order of file operations then
/// depends on thread timing and a seed no longer replays exactly).
fn log_config_for(background: bool) -> LogManagerConfig {
    let mut config = LogManagerConfig::new(DATA_DIR);
    config.journal_direct_io = crate::common::journal_direct_io();
    // Otherwise background threads stay idle: checkpoints and retention run when the test
    // says, so the sequence of file-system operations is a function of the seed.
    config.checkpoint_interval_ms = 3_600_000;
    config.checkpoint_bytes = u64::MAX / 2;
    if background {
        config.checkpoint_interval_ms = 3;
        config.checkpoint_bytes = 48 * 1024;
    }
    config.retention_check_interval_ms = 3_600_000;
    // Journal cleaner passes run when the test says (`clean_journal_now`).
    config.journal_cleaner.enable = false;
    // Small journal files: rolls, end markers and recycled files come up often.
    config.journal_file_bytes_max = 32 * 1024;
    // Rounds stay far below the parallel segment-write threshold (one thread writes).
    config.commit_bytes_max = 16 * 1024;
    config.append_queue_len = 64;
    config
}

fn batch_bytes(count: i32, value_len: usize, tag: i64, producer: Option<(i64, i16, i32)>) -> Bytes {
    let mut batch = crate::common::batch(count, value_len, tag);
    if let Some((producer_id, epoch, base_sequence)) = producer {
        crate::common::set_producer(&mut batch, producer_id, epoch, base_sequence);
    }
    Bytes::from(batch)
}

impl World {
    fn new(seed: u64, background: bool) -> Self {
        let fs = SimFs::new();
        fs.create_dir_all_durable(Path::new(DATA_DIR))
            .expect("data dir");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("runtime");
        Self {
            seed,
            rng: SimRng::new(seed),
            fs,
            rt,
            log: None,
            parts: Vec::new(),
            next_tag: 1,
            next_topic_id: 1,
            next_producer_id: 1000,
            trace: VecDeque::new(),
            trace_len: match std::env::var("SLUICE_MODEL_SEED") {
                Ok(_) => usize::MAX,
                Err(_) => TRACE_LEN,
            },
            totals: Totals::default(),
            background,
        }
    }

    fn note(&mut self, what: String) {
        if self.trace.len() >= self.trace_len {
            self.trace.pop_front();
        }
        self.trace.push_back(what);
    }

    fn log(&self) -> &LogManager {
        self.log.as_ref().expect("log open")
    }

    fn live(&self) -> Vec<usize> {
        (0..self.parts.len())
            .filter(|&i| self.parts[i].status == Status::Live)
            .collect()
    }

    fn pick_live(&mut self) -> Option<usize> {
        let live = self.live();
        (!live.is_empty()).then(|| live[self.rng.below(live.len() as u64) as usize])
    }

    /// True when the log can no longer be trusted to act (power cut or poisoned).
    fn broken(&self) -> bool {
        self.fs.is_power_cut() || self.log.as_ref().is_some_and(|l| l.is_poisoned())
    }

    // ----- operations -----

    fn new_sent(&mut self, part: usize, idempotent: bool) -> Sent {
        let count = self.rng.range(1, 8) as i32;
        let value_len = [0, 10, 100, 700, 3000][self.rng.below(5) as usize];
        let tag = self.next_tag;
        self.next_tag += 1;
        let mut producer_id = -1;
        let producer = match idempotent {
            true => {
                let index = self.rng.below(PRODUCERS_PER_PARTITION as u64) as usize;
                let p = &mut self.parts[part].producers[index];
                if self.rng.chance(5) {
                    // A new session of the same producer id (InitProducerId bumps the epoch).
                    p.epoch += 1;
                    p.next_seq = 0;
                }
                let fields = ProducerFields {
                    index,
                    epoch: p.epoch,
                    first_seq: p.next_seq,
                };
                p.next_seq += count;
                producer_id = p.producer_id;
                Some(fields)
            }
            false => None,
        };
        let header = producer.map(|f| (producer_id, f.epoch, f.first_seq));
        Sent {
            tag,
            bytes: batch_bytes(count, value_len, tag, header),
            records: i64::from(count),
            producer,
            append_time_ms: None,
        }
    }

    fn append_one(&mut self, part: usize, bytes: Bytes) -> Outcome {
        let log = self.log().clone();
        let key = self.parts[part].key.clone();
        let result = self.rt.block_on(async move {
            match log.append(&key, bytes).await {
                Ok(waiter) => waiter.wait().await,
                Err(error) => Err(error),
            }
        });
        classify(self.log(), result)
    }

    /// Records the outcome of a fresh (not retried) append. `undone` lists the producers
    /// (partition, index, epoch) with an undone (or unknown: maybe undone before the log
    /// was poisoned) batch earlier in the same burst: their later batches may be refused
    /// for the sequence gap.
    fn settle_append(
        &mut self,
        part: usize,
        mut sent: Sent,
        outcome: Outcome,
        after_unknown: bool,
        undone: &mut Vec<(usize, usize, i16)>,
    ) {
        let seed = self.seed;
        let model = &mut self.parts[part];
        let producer = sent.producer.map(|f| (part, f.index, f.epoch));
        match outcome {
            Outcome::Acked(info) => {
                let log_append_time = model.config.timestamp_type == TimestampType::LogAppendTime;
                assert_eq!(
                    info.log_append_time_ms >= 0,
                    log_append_time,
                    "seed {seed}: append time answered iff LogAppendTime"
                );
                sent.append_time_ms = log_append_time.then_some(info.log_append_time_ms);
                assert!(
                    !after_unknown,
                    "seed {seed}: an append was acked after an earlier one failed"
                );
                assert!(
                    !info.duplicate,
                    "seed {seed}: fresh batch answered as duplicate"
                );
                assert_eq!(
                    info.base_offset.0, model.log_end,
                    "seed {seed}: acked at an unexpected offset"
                );
                assert_eq!(info.last_offset.0, model.log_end + sent.records - 1);
                if let Some(fields) = sent.producer {
                    model.producers[fields.index].history.push(model.log_end);
                }
                model.log_end += sent.records;
                self.totals.acked += 1;
                model.batches.insert(info.base_offset.0, sent);
            }
            Outcome::Unknown => {
                model.unknown.push(sent);
                self.totals.unknown += 1;
                undone.extend(producer);
            }
            Outcome::Undone => {
                self.totals.undone += 1;
                if let Some(fields) = sent.producer {
                    // Not in the log: the producer's next batch starts at this one's
                    // sequence again (a client retries it).
                    let p = &mut model.producers[fields.index];
                    if p.epoch == fields.epoch {
                        p.next_seq = p.next_seq.min(fields.first_seq);
                    }
                    undone.extend(producer);
                }
            }
            Outcome::Refused(LogError::OutOfOrderSequence { .. })
                if producer.is_some_and(|p| undone.contains(&p)) =>
            {
                let fields = sent.producer.expect("idempotent");
                let p = &mut model.producers[fields.index];
                if p.epoch == fields.epoch {
                    p.next_seq = p.next_seq.min(fields.first_seq);
                }
            }
            Outcome::Refused(error) => panic!("seed {seed}: append refused: {error}"),
        }
    }

    fn op_append(&mut self, idempotent: bool) {
        let Some(part) = self.pick_live() else {
            return self.op_create();
        };
        let sent = self.new_sent(part, idempotent);
        self.note(format!(
            "append {} tag {} ({} records, {} bytes, producer {:?}) at {}",
            self.parts[part].key.topic,
            sent.tag,
            sent.records,
            sent.bytes.len(),
            sent.producer,
            self.parts[part].log_end
        ));
        let outcome = self.append_one(part, sent.bytes.clone());
        let acked = matches!(outcome, Outcome::Acked(_));
        self.settle_append(part, sent, outcome, false, &mut Vec::new());
        if acked {
            self.check_high_watermark(part);
        }
    }

    /// An acknowledged append is visible: the high watermark covers it at once.
    fn check_high_watermark(&self, part: usize) {
        let model = &self.parts[part];
        let offsets = self.log().offsets(&model.key).expect("offsets");
        assert_eq!(
            (offsets.high_watermark.0, offsets.log_end_offset.0),
            (model.log_end, model.log_end),
            "seed {}: high watermark or log end after an acked append",
            self.seed
        );
    }

    /// Several appends in flight at once. The gate holds the committer inside the first
    /// request's round until the rest are queued, so they form the next round whatever
    /// the thread timing: the run stays a function of the seed.
    fn op_burst(&mut self) {
        let count = self.rng.range(2, 8) as usize;
        let mut planned = Vec::new();
        for _ in 0..count {
            let Some(part) = self.pick_live() else {
                return self.op_create();
            };
            let idempotent = self.rng.chance(40);
            planned.push((part, self.new_sent(part, idempotent)));
        }
        let tags: Vec<i64> = planned.iter().map(|(_, s)| s.tag).collect();
        self.note(format!("burst of {count}: tags {tags:?}"));
        let log = self.log().clone();
        self.fs.pause();
        let mut handles = Vec::new();
        for (part, sent) in &planned {
            let key = self.parts[*part].key.clone();
            let queued = self.rt.block_on(log.append(&key, sent.bytes.clone()));
            let handle = match queued {
                Ok(waiter) => Some(self.rt.spawn(waiter.wait())),
                Err(error) => {
                    handles.push(Err(error));
                    continue;
                }
            };
            let handle = handle.expect("spawned");
            // Until the committer is held at the gate, let each request settle alone.
            let deadline = Instant::now() + Duration::from_secs(20);
            while self.fs.blocked() == 0 && !handle.is_finished() {
                assert!(Instant::now() < deadline, "seed {}: burst stuck", self.seed);
                std::thread::sleep(Duration::from_micros(50));
            }
            handles.push(Ok(handle));
        }
        self.fs.resume();
        let mut after_unknown = false;
        let mut undone = Vec::new();
        for ((part, sent), handle) in planned.into_iter().zip(handles) {
            let result = match handle {
                Ok(handle) => self.rt.block_on(handle).expect("waiter task"),
                Err(error) => Err(error),
            };
            let outcome = classify(self.log(), result);
            let unknown = matches!(outcome, Outcome::Unknown);
            self.settle_append(part, sent, outcome, after_unknown, &mut undone);
            after_unknown |= unknown;
        }
    }

    /// Resends one of a producer's last 5 batches still in the log: it must be answered
    /// as a duplicate with its original offsets, and nothing written.
    fn op_retry(&mut self) {
        let Some(part) = self.pick_live() else {
            return;
        };
        let log_start = match self.log().offsets(&self.parts[part].key) {
            Ok(offsets) => offsets.log_start_offset.0,
            Err(_) => return,
        };
        let index = self.rng.below(PRODUCERS_PER_PARTITION as u64) as usize;
        let model = &self.parts[part];
        let epoch_of = |base: &i64| model.batches[base].producer.expect("idempotent").epoch;
        let producer = &model.producers[index];
        // The log keeps the last 5 batches of the epoch it last saw written.
        let written_epoch = producer.history.last().map(epoch_of);
        let same_epoch: Vec<i64> = producer
            .history
            .iter()
            .copied()
            .filter(|b| Some(epoch_of(b)) == written_epoch)
            .collect();
        let recent = &same_epoch[same_epoch.len().saturating_sub(PRODUCER_BATCHES_CACHED)..];
        let candidates: Vec<i64> = recent.iter().copied().filter(|&b| b >= log_start).collect();
        if candidates.is_empty() {
            return;
        }
        let zombie = producer
            .history
            .iter()
            .copied()
            .find(|b| Some(epoch_of(b)) < written_epoch);
        if let Some(old) = zombie.filter(|_| self.rng.chance(30)) {
            return self.op_zombie(part, old);
        }
        let base = candidates[self.rng.below(candidates.len() as u64) as usize];
        let sent = self.parts[part].batches[&base].clone();
        self.note(format!(
            "retry {} tag {} (base {base}, producer {index})",
            self.parts[part].key.topic, sent.tag
        ));
        match self.append_one(part, sent.bytes.clone()) {
            Outcome::Acked(info) => {
                assert!(
                    info.duplicate,
                    "seed {}: retry of tag {} at {base} was written again (at {:?})",
                    self.seed, sent.tag, info.base_offset
                );
                assert_eq!(
                    (info.base_offset.0, info.last_offset.0),
                    (base, base + sent.records - 1),
                    "seed {}: duplicate answered with other offsets",
                    self.seed
                );
                assert_eq!(
                    info.log_append_time_ms,
                    sent.append_time_ms.unwrap_or(-1),
                    "seed {}: duplicate answered with another append time",
                    self.seed
                );
            }
            Outcome::Unknown | Outcome::Undone => {}
            Outcome::Refused(error) => panic!(
                "seed {}: retry of tag {} at {base} refused: {error}",
                self.seed, sent.tag
            ),
        }
        self.totals.duplicates_checked += 1;
    }

    /// Resends a batch of an older epoch of a producer whose newer epoch has a batch in
    /// the log (at or above the log start, so its state cannot have been forgotten): the
    /// old session is fenced (InvalidProducerEpoch), whatever crashes came in between.
    fn op_zombie(&mut self, part: usize, base: i64) {
        let sent = self.parts[part].batches[&base].clone();
        self.note(format!(
            "zombie resend {} tag {} (base {base}, {:?})",
            self.parts[part].key.topic, sent.tag, sent.producer
        ));
        match self.append_one(part, sent.bytes.clone()) {
            Outcome::Refused(LogError::InvalidProducerEpoch { .. })
            | Outcome::Unknown
            | Outcome::Undone => {}
            other => panic!(
                "seed {}: a fenced epoch's batch (tag {}) got {other:?}",
                self.seed, sent.tag
            ),
        }
        self.totals.zombies_fenced += 1;
    }

    fn op_checkpoint(&mut self) {
        self.note("checkpoint".into());
        let _ = self.log().checkpoint_now();
    }

    /// A journal cleaner pass: moves the bytes of half-dead journal files (every
    /// partition keeps its data for a week here, so whatever is live outlives its file).
    fn op_journal_clean(&mut self) {
        // Timestamps are the tags: at time 0 a week's retention keeps everything.
        let result = self.log().clean_journal_now(0);
        self.note(format!("journal cleaner: {result:?}"));
        if let Ok(pass) = result {
            if pass.bytes_moved > 0 {
                self.totals.journal_moves += 1;
                self.totals.journal_bytes_moved += pass.bytes_moved;
            }
        }
    }

    fn op_retention(&mut self) {
        let Some(part) = self.pick_live() else {
            return;
        };
        let key = self.parts[part].key.clone();
        let before = match self.log().offsets(&key) {
            Ok(offsets) => offsets,
            Err(_) => return,
        };
        let mut config = self.parts[part].config.clone();
        config.retention_bytes = [0, 4096, 20_000][self.rng.below(3) as usize];
        self.note(format!(
            "retention {} retention.bytes {} (hw {})",
            key.topic, config.retention_bytes, before.high_watermark.0
        ));
        self.log().set_config(&key, config).expect("set config");
        let result = self.log().enforce_retention(wall_clock_ms());
        self.log()
            .set_config(&key, self.parts[part].config.clone())
            .expect("restore config");
        let model = &mut self.parts[part];
        match result {
            Ok(()) => {
                let after = self
                    .log
                    .as_ref()
                    .expect("log")
                    .offsets(&key)
                    .expect("offsets");
                model.log_start_max = model.log_start_max.max(after.log_start_offset.0);
            }
            // Interrupted: retention may have moved the start to any segment boundary below
            // the high watermark it saw.
            Err(_) => model.log_start_max = model.log_start_max.max(before.high_watermark.0),
        }
    }

    fn op_delete_records(&mut self) {
        let Some(part) = self.pick_live() else {
            return;
        };
        let key = self.parts[part].key.clone();
        let Ok(offsets) = self.log().offsets(&key) else {
            return;
        };
        let (start, hw) = (offsets.log_start_offset.0, offsets.high_watermark.0);
        let target = match self.rng.below(4) {
            0 => -1,
            _ => self.rng.range(start as u64, hw as u64) as i64,
        };
        self.note(format!(
            "delete_records {} to {target} (start {start}, hw {hw})",
            key.topic
        ));
        let result = self.log().delete_records(&key, Offset(target));
        let model = &mut self.parts[part];
        let target = if target == -1 { hw } else { target };
        match result {
            Ok(now) => {
                assert!(
                    now.0 >= target,
                    "seed {}: log start below the request",
                    self.seed
                );
                model.log_start_min = model.log_start_min.max(now.0);
                model.log_start_max = model.log_start_max.max(now.0);
            }
            Err(LogError::Io(_) | LogError::Poisoned) => {
                model.log_start_max = model.log_start_max.max(target);
            }
            Err(error) => panic!("seed {}: delete_records refused: {error}", self.seed),
        }
    }

    fn op_create(&mut self) {
        if self.parts.len() >= PARTITIONS_MAX {
            return;
        }
        let taken: HashSet<(String, i32)> = self
            .parts
            .iter()
            .map(|p| (p.key.topic.to_string(), p.key.partition))
            .collect();
        let topic = TOPICS[self.rng.below(TOPICS.len() as u64) as usize];
        let partition = self.rng.below(2) as i32;
        if taken.contains(&(topic.to_owned(), partition)) {
            return;
        }
        let mut id = [0u8; 16];
        id[0] = self.next_topic_id;
        id[1..].copy_from_slice(&[0xA5; 15]);
        self.next_topic_id = self.next_topic_id.wrapping_add(1);
        let key = PartitionKey {
            topic_id: TopicId(id),
            topic: Arc::from(topic),
            partition,
        };
        let timestamp_type = match self.rng.chance(25) {
            true => TimestampType::LogAppendTime,
            false => TimestampType::CreateTime,
        };
        let config = LogConfig {
            segment_bytes: [2048, 8192, 65_536][self.rng.below(3) as usize],
            retention_ms: -1,
            timestamp_type,
            ..LogConfig::default()
        };
        self.note(format!(
            "create {topic}-{partition} id {} segment.bytes {} {:?}",
            id[0], config.segment_bytes, config.timestamp_type
        ));
        let status = match self.log().create_partition(key.clone(), config.clone()) {
            Ok(()) => Status::Live,
            Err(LogError::Io(_) | LogError::Poisoned) => Status::MaybeCreated,
            Err(error) => panic!("seed {}: create refused: {error}", self.seed),
        };
        let producers = (0..PRODUCERS_PER_PARTITION)
            .map(|_| {
                self.next_producer_id += 1;
                Producer {
                    producer_id: self.next_producer_id,
                    epoch: 0,
                    next_seq: 0,
                    history: Vec::new(),
                }
            })
            .collect();
        self.parts.push(PartModel {
            key,
            config,
            status,
            batches: BTreeMap::new(),
            unknown: Vec::new(),
            log_end: 0,
            log_start_min: 0,
            log_start_max: 0,
            producers,
        });
    }

    fn op_delete_partition(&mut self) {
        let Some(part) = self.pick_live() else {
            return;
        };
        let key = self.parts[part].key.clone();
        self.note(format!("delete partition {}-{}", key.topic, key.partition));
        match self.log().delete_partition(&key) {
            Ok(()) => {
                self.parts.remove(part);
            }
            Err(LogError::Io(_) | LogError::Poisoned) => {
                self.parts[part].status = Status::MaybeDeleted;
            }
            Err(error) => panic!("seed {}: delete refused: {error}", self.seed),
        }
    }

    fn op_arm_power_cut(&mut self) {
        if self.fs.is_cut_armed() {
            return;
        }
        let ops = self.rng.below(120);
        self.note(format!("power cut armed after {ops} operations"));
        self.fs.cut_power_after(ops);
    }

    fn op_arm_fault(&mut self) {
        let op = match self.rng.chance(50) {
            true => FaultOp::Write,
            false => FaultOp::Sync,
        };
        let paths = [
            None,
            Some(".wal"),
            Some(".extents"),
            Some("checkpoint"),
            Some(".snapshot"),
            Some(".index"),
        ];
        let path = paths[self.rng.below(paths.len() as u64) as usize];
        let after = self.rng.below(30);
        self.note(format!("fault {op:?} after {after} on {path:?}"));
        self.fs.arm(op, after, path);
    }

    // ----- restarts -----

    /// Stops the log without a clean shutdown (the threads are joined, nothing more is
    /// written), loses power, and reopens.
    fn crash_and_reopen(&mut self, why: &str) {
        self.note(format!("crash ({why})"));
        self.fs.resume();
        self.log = None;
        self.fs.crash(&mut self.rng);
        self.reopen();
    }

    fn clean_restart(&mut self) {
        self.note("clean shutdown".into());
        self.totals.clean_shutdowns += 1;
        let result = self.log().shutdown();
        self.log = None;
        if result.is_err() || self.rng.chance(50) {
            // Power lost right after the shutdown: a clean shutdown left everything durable.
            self.note("crash after shutdown".into());
            self.fs.crash(&mut self.rng);
        }
        self.reopen();
    }

    /// Opens the log (crashing again whenever an injected failure stops recovery itself)
    /// and checks it against the model.
    fn reopen(&mut self) {
        loop {
            self.totals.reopens += 1;
            if self.rng.chance(15) {
                let ops = self.rng.below(60);
                self.note(format!("power cut armed during recovery after {ops}"));
                self.fs.cut_power_after(ops);
            }
            let fs: Arc<dyn sluice_log::fs::Fs> = Arc::new(self.fs.clone());
            match LogManager::open(log_config_for(self.background), fs) {
                Ok((log, report)) if !self.fs.is_power_cut() => {
                    self.log = Some(log);
                    let found: Vec<(PartitionKey, sluice_log::PartitionOffsets)> =
                        report.partitions.clone();
                    self.note(format!("reopened: {:?}", report.actions));
                    self.reconcile(&found);
                    return;
                }
                Ok((log, _)) => drop(log),
                Err(error) => self.note(format!("open failed: {error}")),
            }
            self.fs.crash(&mut self.rng);
        }
    }

    /// Checks the reopened log against the model, then makes the model what the log now
    /// durably holds.
    fn reconcile(&mut self, found: &[(PartitionKey, sluice_log::PartitionOffsets)]) {
        let seed = self.seed;
        let mut present: HashMap<PartitionKey, sluice_log::PartitionOffsets> =
            found.iter().cloned().collect();
        let mut parts = std::mem::take(&mut self.parts);
        parts.retain(|model| {
            let exists = present.contains_key(&model.key);
            match model.status {
                Status::Live => assert!(
                    exists,
                    "seed {seed}: partition {}-{} lost",
                    model.key.topic, model.key.partition
                ),
                Status::MaybeCreated | Status::MaybeDeleted => {}
            }
            exists
        });
        for model in &mut parts {
            let offsets = present.remove(&model.key).expect("present");
            if model.status == Status::MaybeCreated {
                assert_eq!(
                    (offsets.log_start_offset.0, offsets.log_end_offset.0),
                    (0, 0),
                    "seed {seed}: an unfinished create has data"
                );
            }
            model.status = Status::Live;
            self.log()
                .set_config(&model.key, model.config.clone())
                .expect("set config");
            self.totals.unknown_present += check_partition(seed, self.log(), model) as u64;
        }
        assert!(
            present.is_empty(),
            "seed {seed}: partitions the model does not know: {:?}",
            present.keys().collect::<Vec<_>>()
        );
        self.parts = parts;
    }

    fn step(&mut self) {
        self.totals.ops += 1;
        match self.rng.below(100) {
            0..=29 => self.op_append(false),
            30..=47 => self.op_append(true),
            48..=56 => self.op_burst(),
            57..=63 => self.op_retry(),
            64..=69 => self.op_checkpoint(),
            70..=71 => self.op_journal_clean(),
            72..=75 => self.op_retention(),
            76..=79 => self.op_delete_records(),
            80..=82 => self.op_create(),
            83 => self.op_delete_partition(),
            84..=87 => self.crash_and_reopen("now"),
            88..=92 => self.op_arm_power_cut(),
            93..=94 => self.op_arm_fault(),
            _ => self.clean_restart(),
        }
        if self.broken() {
            self.crash_and_reopen("storage failed");
        }
    }
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Reads one partition from its log start to its high watermark and checks it against
/// the model (see the module header); then the model becomes what was read.
/// The batch read is the one sent, stamped: identical after the base offset, except that
/// on a LogAppendTime partition the log sets the timestamp-type bit and the max timestamp
/// (to the append time it answered) and recomputes the CRC.
fn assert_same_batch(seed: u64, name: &str, read: &[u8], sent: &Sent, log_append_time: bool) {
    let tag = sent.tag;
    if !log_append_time {
        assert!(
            read[BATCH_LENGTH_AT..] == sent.bytes[BATCH_LENGTH_AT..],
            "seed {seed}: {name}: bytes of tag {tag} differ"
        );
        return;
    }
    let header = sluice_log::batch::validate(read, u32::MAX)
        .unwrap_or_else(|e| panic!("seed {seed}: {name}: tag {tag}: {e}"));
    assert!(
        header.is_log_append_time(),
        "seed {seed}: {name}: tag {tag} lacks the LogAppendTime bit"
    );
    if let Some(append_time) = sent.append_time_ms {
        assert_eq!(
            header.max_timestamp(),
            append_time,
            "seed {seed}: {name}: tag {tag} stored with another append time than answered"
        );
    }
    // Every header field but the base offset, the CRC, the LogAppendTime bit and the max
    // timestamp, and every record byte.
    let kept = |b: &[u8]| {
        let header = BatchHeader::parse(b).expect("a header");
        let fields = BatchFields::of(&header);
        let attributes = fields.attributes.without(Attributes::LOG_APPEND_TIME);
        let fields = BatchFields {
            base_offset: Offset(0),
            attributes,
            max_timestamp: 0,
            ..fields
        };
        (fields, header.batch_length(), header.magic())
    };
    assert!(
        kept(read) == kept(&sent.bytes) && read[HEADER_LEN..] == sent.bytes[HEADER_LEN..],
        "seed {seed}: {name}: bytes of tag {tag} differ"
    );
}

/// Returns how many unanswered appends turned out to be in the log.
fn check_partition(seed: u64, log: &LogManager, model: &mut PartModel) -> usize {
    let name = format!("{}-{}", model.key.topic, model.key.partition);
    let offsets = log.offsets(&model.key).expect("offsets");
    let (start, hw) = (offsets.log_start_offset.0, offsets.high_watermark.0);
    assert_eq!(
        hw, offsets.log_end_offset.0,
        "seed {seed}: {name}: hw != log end after open"
    );
    assert!(
        start >= model.log_start_min,
        "seed {seed}: {name}: log start {start} below an acknowledged DeleteRecords {}",
        model.log_start_min
    );
    assert!(
        start <= model.log_start_max.max(model.log_start_min),
        "seed {seed}: {name}: log start {start} beyond anything asked for ({})",
        model.log_start_max
    );
    let unknown: HashMap<i64, Sent> = model.unknown.drain(..).map(|s| (s.tag, s)).collect();
    let log_append_time = model.config.timestamp_type == TimestampType::LogAppendTime;
    let mut seen_tags = HashSet::new();
    let mut promoted = Vec::new();
    let mut next = start;
    let mut expected_base: Option<i64> = None;
    while next < hw {
        let read = log
            .read(&model.key, Offset(next), 256 * 1024, true)
            .unwrap_or_else(|e| panic!("seed {seed}: {name}: read at {next}: {e}"));
        assert!(
            !read.records.is_empty(),
            "seed {seed}: {name}: empty read at {next} below hw {hw}"
        );
        for batch in BatchIter::new(read.records) {
            let batch = batch.unwrap_or_else(|e| panic!("seed {seed}: {name}: torn batch: {e}"));
            let header = BatchHeader::parse(&batch).expect("header");
            let base = header.base_offset().0;
            let tag = header.base_timestamp();
            if let Some(expected) = expected_base {
                assert_eq!(
                    base, expected,
                    "seed {seed}: {name}: offsets not contiguous"
                );
            } else {
                assert!(
                    base <= start,
                    "seed {seed}: {name}: first batch {base} after log start {start}"
                );
            }
            assert!(
                seen_tags.insert(tag),
                "seed {seed}: {name}: tag {tag} present twice"
            );
            let sent = match model.batches.get(&base) {
                Some(sent) => {
                    assert_eq!(
                        sent.tag, tag,
                        "seed {seed}: {name}: acked tag {} at {base} replaced by tag {tag}",
                        sent.tag
                    );
                    sent.clone()
                }
                None => {
                    let mut sent = unknown.get(&tag).cloned().unwrap_or_else(|| {
                        panic!("seed {seed}: {name}: batch tag {tag} at {base} was never sent or was already gone")
                    });
                    if log_append_time {
                        sent.append_time_ms = Some(header.max_timestamp());
                    }
                    promoted.push((base, sent.clone()));
                    sent
                }
            };
            assert_same_batch(seed, &name, &batch, &sent, log_append_time);
            assert_eq!(header.last_offset().0, base + sent.records - 1);
            expected_base = Some(base + sent.records);
            next = base + sent.records;
        }
    }
    if let Some(end) = expected_base {
        assert_eq!(
            end, hw,
            "seed {seed}: {name}: last batch does not end at hw"
        );
    }
    for (&base, sent) in model.batches.range(start..) {
        assert!(
            base < hw && seen_tags.contains(&sent.tag),
            "seed {seed}: {name}: acknowledged tag {} at {base} lost (log {start}..{hw})",
            sent.tag
        );
    }
    // A batch acked below the log start but whose records reach past it is still there.
    if let Some((&base, sent)) = model.batches.range(..start).next_back() {
        if base + sent.records > start {
            assert!(
                seen_tags.contains(&sent.tag),
                "seed {seed}: {name}: batch at log start lost"
            );
        }
    }
    // Batches above the recovered log end that the model held are gone for good only if
    // they were never acknowledged (checked above); drop them from the model.
    model.batches.retain(|&base, _| base < hw);
    let promoted_count = promoted.len();
    for (base, sent) in promoted {
        if let Some(fields) = sent.producer {
            model.producers[fields.index].history.push(base);
        }
        model.batches.insert(base, sent);
    }
    for producer in &mut model.producers {
        producer.history.retain(|base| *base < hw);
        producer.history.sort_unstable();
        // Continue after the newest batch the log holds; a session whose first batch was
        // lost starts again at sequence 0.
        let newest = producer.history.last().map(|base| &model.batches[base]);
        producer.next_seq = match newest {
            Some(sent) if sent.producer.expect("idempotent").epoch == producer.epoch => {
                sent.producer.expect("idempotent").first_seq + sent.records as i32
            }
            _ => 0,
        };
    }
    model.log_end = hw;
    promoted_count
}

/// Runs one case; on failure prints the seed and the last operations, then fails.
/// Returns the world for the caller to inspect.
fn run_case(seed: u64, background: bool) -> World {
    run_case_with(World::new(seed, background))
}

fn run_case_with(mut world: World) -> World {
    let seed = world.seed;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        world.reopen();
        for _ in 0..2 {
            world.op_create();
        }
        for _ in 0..OPS_PER_CASE {
            world.step();
        }
        world.crash_and_reopen("end of case");
    }));
    world.fs.resume();
    world.log = None;
    if let Err(panic) = result {
        eprintln!("crash-model test failed; last operations:");
        for line in &world.trace {
            eprintln!("  {line}");
        }
        let how = match world.background {
            true => " crash_model_with_background_checkpoints (timing-dependent: may not replay exactly)",
            false => " crash_model",
        };
        eprintln!(
            "crash-model test failed: replay with SLUICE_MODEL_SEED={seed} and the test{how}"
        );
        std::panic::resume_unwind(panic);
    }
    world
}

/// Runs the default cases (fixed seeds), or `SLUICE_MODEL_CASES` from a random base seed,
/// or the one `SLUICE_MODEL_SEED`; prints what the run exercised.
fn run_cases(background: bool, default_cases: u64) {
    if let Ok(seed) = std::env::var("SLUICE_MODEL_SEED") {
        let seed: u64 = seed.parse().expect("SLUICE_MODEL_SEED is a number");
        run_case(seed, background);
        return;
    }
    let (base, cases) = match std::env::var("SLUICE_MODEL_CASES") {
        Ok(cases) => {
            let base = wall_clock_ms() as u64 * 1000;
            eprintln!("crash-model test: base seed {base}");
            (base, cases.parse().expect("SLUICE_MODEL_CASES is a number"))
        }
        Err(_) => (0, default_cases),
    };
    let started = Instant::now();
    let (mut totals, mut fs) = (Totals::default(), sluice_log::sim_fs::SimStats::default());
    for seed in base..base + cases {
        let world = run_case(seed, background);
        totals += world.totals;
        let stats = world.fs.stats();
        fs.writes += stats.writes;
        fs.file_syncs += stats.file_syncs;
        fs.dir_syncs += stats.dir_syncs;
        fs.crashes += stats.crashes;
        fs.torn_files += stats.torn_files;
        fs.faults_injected += stats.faults_injected;
    }
    eprintln!(
        "crash-model test (background checkpoints: {background}): {cases} cases in {:?}: {totals:?}; file system: {fs:?}",
        started.elapsed()
    );
    assert!(
        totals.unknown_present > 0
            && totals.duplicates_checked > 0
            && fs.torn_files > 0
            && totals.journal_moves > 0,
        "the run exercised too little: {totals:?} {fs:?}"
    );
}

#[test]
fn crash_model() {
    run_cases(false, DEFAULT_CASES);
}

#[test]
fn crash_model_with_background_checkpoints() {
    // The same checks with the checkpointer thread running on its own in parallel with
    // appends, so checkpoints also overlap commit rounds in flight.
    run_cases(true, BACKGROUND_CASES);
}

#[test]
fn a_seed_replays_identically() {
    // Goal: a case is a function of its seed (same operations, same file-system operations,
    // same crashes), so a failing seed printed by `crash_model` replays exactly.
    let run = |seed| {
        let mut world = World::new(seed, false);
        world.trace_len = usize::MAX;
        let world = run_case_with(world);
        (world.fs.stats(), world.trace.clone())
    };
    for seed in [3, 11] {
        let (first, second) = (run(seed), run(seed));
        assert_eq!(
            first.0, second.0,
            "seed {seed}: file-system counters differ"
        );
        assert!(first.1 == second.1, "seed {seed}: operation traces differ");
        assert!(
            first.0.crashes > 3,
            "seed {seed}: the case crashed only {} times",
            first.0.crashes
        );
    }
}

// ----- Regressions the model found, as fixed cases -----

fn sim_with_data_dir() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all_durable(Path::new(DATA_DIR))
        .expect("data dir");
    fs
}

fn open_sim(fs: &SimFs) -> LogManager {
    LogManager::open(log_config(), Arc::new(fs.clone()))
        .expect("open")
        .0
}

fn fixed_key() -> PartitionKey {
    PartitionKey {
        topic_id: TopicId([7; 16]),
        topic: Arc::from("fixed"),
        partition: 0,
    }
}

fn append_now(log: &LogManager, key: &PartitionKey, bytes: Bytes) -> Result<AppendInfo, LogError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    rt.block_on(async { log.append(key, bytes).await?.wait().await })
}

fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

#[test]
fn delete_records_holds_after_retention_and_a_crash() {
    // Goal (found by the crash model, seed 30): DeleteRecords answered with a log start
    // that retention had set in memory only is in force after a crash; the deleted
    // segments that the crash brings back stay out of the log.
    let fs = sim_with_data_dir();
    let log = open_sim(&fs);
    let key = fixed_key();
    log.create_partition(key.clone(), small_segments())
        .expect("create");
    for tag in 0..4 {
        append_now(&log, &key, batch_bytes(1, 1500, tag, None)).expect("append");
    }
    log.checkpoint_now().expect("checkpoint");
    let retain_nothing = LogConfig {
        retention_bytes: 0,
        ..small_segments()
    };
    log.set_config(&key, retain_nothing).expect("config");
    log.enforce_retention(wall_clock_ms()).expect("retention");
    assert_eq!(
        log.offsets(&key).expect("offsets").log_start_offset,
        Offset(3)
    );
    assert_eq!(
        log.delete_records(&key, Offset(3)).expect("delete"),
        Offset(3)
    );
    drop(log);
    fs.crash_with(&mut SimRng::new(1), CrashMode::Drop);
    let log = open_sim(&fs);
    assert_eq!(
        log.offsets(&key).expect("offsets").log_start_offset,
        Offset(3),
        "an answered DeleteRecords survives the crash"
    );
}

#[test]
fn producer_continues_after_its_batches_were_deleted_and_a_crash() {
    // Goal (found by the crash model, seed 24): an idempotent producer whose batches since
    // the last checkpoint were all deleted (DeleteRecords) before a crash is not held to
    // the older checkpointed sequence: its next batch is accepted, not refused with
    // OutOfOrderSequence. The deleted segments must survive the crash on their own (the
    // kernel wrote them back) for recovery to see the gap, so several writeback crashes
    // are tried; at least one must hit it.
    let mut gaps = 0;
    for seed in 0..16 {
        let fs = sim_with_data_dir();
        let log = open_sim(&fs);
        let key = fixed_key();
        log.create_partition(key.clone(), small_segments())
            .expect("create");
        let producer = |seq, tag| batch_bytes(5, 10, tag, Some((77, 0, seq)));
        append_now(&log, &key, producer(0, 1)).expect("first batch");
        log.checkpoint_now().expect("checkpoint");
        append_now(&log, &key, producer(5, 2)).expect("second batch");
        for tag in 3..5 {
            append_now(&log, &key, batch_bytes(1, 1900, tag, None)).expect("roll");
        }
        assert_eq!(
            log.delete_records(&key, Offset(-1)).expect("delete"),
            Offset(12)
        );
        drop(log);
        fs.crash_with(&mut SimRng::new(seed), CrashMode::Writeback);
        let (log, report) = LogManager::open(log_config(), Arc::new(fs.clone())).expect("open");
        gaps += report
            .actions
            .iter()
            .filter(|a| a.contains("were deleted after the producer state was taken"))
            .count();
        let info = append_now(&log, &key, producer(10, 5))
            .unwrap_or_else(|e| panic!("seed {seed}: next sequence refused: {e}"));
        assert_eq!((info.base_offset, info.duplicate), (Offset(12), false));
    }
    assert!(gaps > 0, "no crash left the deleted segments in place");
}

#[test]
fn retention_never_leaves_a_hole_after_a_crash() {
    // Goal (found by the crash model, seed 2 before SimFs draws changed): when retention
    // deletes several segments and the crash keeps only some of the unlinks (POSIX does
    // not order them), recovery still finds a log without holes: every acknowledged batch
    // from the first remaining segment on is there. Several writeback crashes are tried.
    for seed in 0..24 {
        let fs = sim_with_data_dir();
        let log = open_sim(&fs);
        let key = fixed_key();
        log.create_partition(key.clone(), small_segments())
            .expect("create");
        for tag in 0..6 {
            append_now(&log, &key, batch_bytes(1, 1500, tag, None)).expect("append");
        }
        log.checkpoint_now().expect("checkpoint");
        let retain_nothing = LogConfig {
            retention_bytes: 0,
            ..small_segments()
        };
        log.set_config(&key, retain_nothing).expect("config");
        log.enforce_retention(wall_clock_ms()).expect("retention");
        drop(log);
        fs.crash_with(&mut SimRng::new(seed), CrashMode::Writeback);
        let log = open_sim(&fs);
        let offsets = log.offsets(&key).expect("offsets");
        assert_eq!(
            offsets.log_end_offset,
            Offset(6),
            "seed {seed}: acknowledged batches lost behind a hole"
        );
        let read = log.read(&key, Offset(5), 1 << 20, true).expect("read");
        let header = BatchHeader::parse(&read.records).expect("batch");
        assert_eq!(header.base_timestamp(), 5, "seed {seed}");
    }
}

#[test]
fn a_recreated_journal_directory_is_durable() {
    // Goal (found by the crash model, seed 1795517020469372): when recovery creates the
    // journal directory while partitions already exist (a crash during the first
    // partition create lost its entry; here it is removed by hand to get there), the
    // directory's name is made durable, so appends acknowledged from its journal and the
    // checkpoints written into it survive the next crash.
    let fs = sim_with_data_dir();
    let log = open_sim(&fs);
    let key = fixed_key();
    log.create_partition(key.clone(), small_segments())
        .expect("create");
    log.shutdown().expect("shutdown");
    drop(log);
    fs.remove_dir_all(Path::new("/data/journal"))
        .expect("remove");
    fs.sync_dir(Path::new(DATA_DIR)).expect("sync");
    let log = open_sim(&fs);
    append_now(&log, &key, batch_bytes(3, 100, 1, None)).expect("append");
    drop(log);
    fs.crash_with(&mut SimRng::new(1), CrashMode::Drop);
    let log = open_sim(&fs);
    assert_eq!(
        log.offsets(&key).expect("offsets").high_watermark,
        Offset(3),
        "the acknowledged append survives"
    );
}

#[test]
fn a_refused_round_is_not_replayed_after_a_crash() {
    // Goal (found by the crash model, seed 13, when segments still had their own data
    // file): a commit round whose journal write is refused for space is undone in the
    // journal too (cut back to where the round started), so a crash does not replay
    // whatever of it reached the file over the acknowledged append that took its offsets
    // once space was back. Both crash modes and several draws are tried.
    for seed in 0..8 {
        let fs = sim_with_data_dir();
        let log = open_sim(&fs);
        let key = fixed_key();
        log.create_partition(key.clone(), small_segments())
            .expect("create");
        append_now(&log, &key, batch_bytes(3, 100, 1, None)).expect("append");
        fs.arm(FaultOp::Write, 0, Some(".wal"));
        match append_now(&log, &key, batch_bytes(2, 100, 2, None)) {
            Err(LogError::Io(e)) if e.raw_os_error() == Some(libc::ENOSPC) => {}
            other => panic!("seed {seed}: the refused append got {other:?}"),
        }
        assert!(!log.is_poisoned(), "seed {seed}: a refused round poisons");
        fs.disarm();
        let info = append_now(&log, &key, batch_bytes(4, 100, 3, None)).expect("append");
        assert_eq!(
            info.base_offset,
            Offset(3),
            "seed {seed}: the undone round's offsets"
        );
        drop(log);
        let mode = [CrashMode::Drop, CrashMode::Writeback][seed as usize % 2];
        fs.crash_with(&mut SimRng::new(seed), mode);
        let log = open_sim(&fs);
        assert_eq!(
            log.offsets(&key).expect("offsets").log_end_offset,
            Offset(7),
            "seed {seed}"
        );
        let read = log.read(&key, Offset(3), 1 << 20, true).expect("read");
        let header = BatchHeader::parse(&read.records).expect("batch");
        assert_eq!(
            header.base_timestamp(),
            3,
            "seed {seed}: the acknowledged append at 3 was replaced"
        );
    }
}

#[test]
fn a_refused_round_s_rolled_segment_stays_deleted_after_a_crash() {
    // Goal (found by the crash model, seed 1795522053675090): a segment rolled by a
    // commit round whose journal write is refused for space is deleted durably by the
    // undo, so no crash brings it back with the round's batch in it (recovery would take
    // the batch for data: its CRC is valid). Several refused rounds each roll and delete
    // the same segment name; a writeback crash may keep the first create alone.
    for seed in 0..16 {
        let fs = sim_with_data_dir();
        let log = open_sim(&fs);
        let key = fixed_key();
        log.create_partition(key.clone(), small_segments())
            .expect("create");
        // The first batch fills its segment: every later one rolls a new segment.
        append_now(&log, &key, batch_bytes(1, 2100, 1, None)).expect("append");
        log.checkpoint_now().expect("checkpoint");
        fs.arm(FaultOp::Write, 0, Some(".wal"));
        for tag in 2..5 {
            match append_now(&log, &key, batch_bytes(1, 10, tag, None)) {
                Err(LogError::Io(e)) if e.raw_os_error() == Some(libc::ENOSPC) => {}
                other => panic!("seed {seed}: the refused append got {other:?}"),
            }
        }
        assert!(!log.is_poisoned(), "seed {seed}: a refused round poisons");
        drop(log);
        fs.crash_with(&mut SimRng::new(seed), CrashMode::Writeback);
        let log = open_sim(&fs);
        assert_eq!(
            log.offsets(&key).expect("offsets").log_end_offset,
            Offset(1),
            "seed {seed}: the refused append came back"
        );
    }
}
