//! The seeded crash model for transactions (docs/transactions.md §9): transactional
//! producers, markers from a simulated coordinator, plain appends, checkpoints, power cuts,
//! crashes and clean shutdowns on the simulated file system (`SimFs`).
//!
//! The test plays the transaction coordinator: it verifies a partition before a
//! producer's first batch there (again after every reopen, since verification is not
//! persisted), decides commit or abort (sometimes with an epoch bump, as a fencing
//! InitProducerId does), and writes the markers; after a crash it writes the markers still
//! missing (those of partitions whose log still shows the transaction open), as the
//! coordinator's load does (§5.2). After every reopen it reads every partition back and
//! recomputes, from the batches alone, which transactions are open and which were aborted,
//! then checks:
//! - the last stable offset is the first offset of the oldest open transaction, else the
//!   high watermark (nothing at or above an open transaction's start is below the LSO);
//! - the aborted-transaction list equals the one recomputed from the log (producer, first
//!   offset, marker offset, LSO after the marker);
//! - a marker's transaction is closed in producer state: a transactional batch without a
//!   new verification is refused (`InvalidTxnState`), and an open transaction refuses a
//!   non-transactional batch; both write nothing;
//! - every acknowledged append and marker is at the offset it was acknowledged with.
//!
//! `SLUICE_TXN_MODEL_SEED=<seed>` replays one case.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use sluice_log::batch::{BatchHeader, BatchIter, HEADER_LEN};
use sluice_log::sim_fs::{SimFs, SimRng};
use sluice_log::txn::control_type;
use sluice_log::{
    AbortedTxn, AppendInfo, ControlType, LogConfig, LogError, LogManager, LogManagerConfig, Offset,
    PartitionKey, ProducerEpoch, ProducerId, TopicId,
};

const DATA_DIR: &str = "/data";
const CASES: u64 = 48;
const OPS_PER_CASE: usize = 250;
const PARTITIONS: usize = 3;
const PRODUCERS: usize = 3;

fn log_config() -> LogManagerConfig {
    let mut config = LogManagerConfig::new(DATA_DIR);
    config.journal_direct_io = crate::common::journal_direct_io();
    config.checkpoint_interval_ms = 3_600_000;
    config.checkpoint_bytes = u64::MAX / 2;
    config.retention_check_interval_ms = 3_600_000;
    // Journal cleaner passes run when the test says (`clean_journal_now`).
    config.journal_cleaner.enable = false;
    config.journal_file_bytes_max = 32 * 1024;
    config.commit_bytes_max = 16 * 1024;
    config.append_queue_len = 64;
    config
}

fn batch_bytes(tag: i64, count: i32, producer: Option<(i64, i16, i32, bool)>) -> Bytes {
    let mut batch = crate::common::batch(count, 50, tag);
    if let Some((producer_id, epoch, seq, transactional)) = producer {
        crate::common::set_producer(&mut batch, producer_id, epoch, seq);
        crate::common::set_transactional(&mut batch, transactional);
    }
    Bytes::from(batch)
}

/// The coordinator's view of one producer's transaction.
#[derive(Debug, Default)]
struct Txn {
    /// Partitions added (and verified since the last reopen).
    partitions: Vec<usize>,
    /// The decision, once taken: markers still to write, and at which epoch.
    decided: Option<(ControlType, i16)>,
}

#[derive(Debug)]
struct Producer {
    producer_id: i64,
    epoch: i16,
    /// Next sequence per partition at `epoch`.
    next_seq: [i32; PARTITIONS],
    txn: Txn,
}

/// What the log holds for one producer in one partition, recomputed from its batches.
#[derive(Debug, Default, Clone, Copy)]
struct Recomputed {
    epoch: Option<i16>,
    last_seq: Option<i32>,
    open: Option<i64>,
}

struct World {
    seed: u64,
    rng: SimRng,
    fs: SimFs,
    rt: tokio::runtime::Runtime,
    log: Option<LogManager>,
    keys: Vec<PartitionKey>,
    producers: Vec<Producer>,
    /// Acknowledged appends and markers: partition, offset -> (is marker, tag or producer).
    acked: Vec<BTreeMap<i64, (bool, i64)>>,
    next_tag: i64,
    trace: Vec<String>,
    stats: Stats,
}

/// What a run exercised, so that a weak run is visible.
#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    /// Producer-state refusals checked after reopens.
    checks: u64,
    /// Aborted-list entries compared after reopens.
    aborted_checked: u64,
    /// Reopened partitions whose LSO an open transaction held below the high watermark.
    open_at_reopen: u64,
    /// Markers written after a reopen to complete a decided transaction.
    completed_after_crash: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Self) {
        self.checks += o.checks;
        self.aborted_checked += o.aborted_checked;
        self.open_at_reopen += o.open_at_reopen;
        self.completed_after_crash += o.completed_after_crash;
    }
}

impl World {
    fn new(seed: u64) -> Self {
        let fs = SimFs::new();
        fs.create_dir_all_durable(Path::new(DATA_DIR))
            .expect("data dir");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("runtime");
        let log = LogManager::open(log_config(), Arc::new(fs.clone()))
            .expect("open")
            .0;
        let keys: Vec<PartitionKey> = (0..PARTITIONS)
            .map(|i| PartitionKey {
                topic_id: TopicId([i as u8 + 1; 16]),
                topic: Arc::from("txn"),
                partition: i as i32,
            })
            .collect();
        let config = LogConfig {
            segment_bytes: 2048,
            retention_ms: -1,
            ..LogConfig::default()
        };
        for key in &keys {
            log.create_partition(key.clone(), config.clone())
                .expect("create");
        }
        let producers = (0..PRODUCERS)
            .map(|i| Producer {
                producer_id: 500 + i as i64,
                epoch: 0,
                next_seq: [0; PARTITIONS],
                txn: Txn::default(),
            })
            .collect();
        Self {
            seed,
            rng: SimRng::new(seed),
            fs,
            rt,
            log: Some(log),
            keys,
            producers,
            acked: vec![BTreeMap::new(); PARTITIONS],
            next_tag: 1,
            trace: Vec::new(),
            stats: Stats::default(),
        }
    }

    fn log(&self) -> LogManager {
        self.log.clone().expect("log open")
    }

    fn note(&mut self, what: String) {
        self.trace.push(what);
    }

    fn broken(&self) -> bool {
        self.fs.is_power_cut() || self.log.as_ref().is_some_and(|l| l.is_poisoned())
    }

    fn append(&mut self, part: usize, bytes: Bytes) -> Result<AppendInfo, LogError> {
        let (log, key) = (self.log(), self.keys[part].clone());
        self.rt
            .block_on(async move { log.append(&key, bytes).await?.wait().await })
    }

    fn verify(&mut self, p: usize, part: usize) -> Result<(), LogError> {
        let (log, key) = (self.log(), self.keys[part].clone());
        let producer = &self.producers[p];
        let (id, epoch) = (
            ProducerId(producer.producer_id),
            ProducerEpoch(producer.epoch),
        );
        self.rt
            .block_on(async move { log.verify_txn(&key, id, epoch).await?.wait().await })
            .map(|_| ())
    }

    fn marker(
        &mut self,
        p: usize,
        part: usize,
        control: ControlType,
        epoch: i16,
    ) -> Result<AppendInfo, LogError> {
        let (log, key) = (self.log(), self.keys[part].clone());
        let id = ProducerId(self.producers[p].producer_id);
        self.rt.block_on(async move {
            let waiter = log
                .append_marker(&key, id, ProducerEpoch(epoch), control)
                .await?;
            waiter.wait().await
        })
    }

    /// An error the run may see: the storage failed (power cut, poisoned log).
    fn is_storage(&self, error: &LogError) -> bool {
        matches!(
            error,
            LogError::Io(_) | LogError::Poisoned | LogError::ShuttingDown
        ) || self.broken()
    }

    fn unexpected(&self, what: &str, error: LogError) -> ! {
        let last: Vec<&String> = self.trace.iter().rev().take(30).collect();
        panic!(
            "SLUICE_TXN_MODEL_SEED={}: {what}: {error}; last operations, newest first: {last:#?}",
            self.seed
        );
    }

    // ----- operations -----

    fn op_plain(&mut self) {
        let part = self.rng.below(PARTITIONS as u64) as usize;
        let tag = self.next_tag;
        self.next_tag += 1;
        self.note(format!("plain {part} tag {tag}"));
        match self.append(part, batch_bytes(tag, 2, None)) {
            Ok(info) => {
                self.acked[part].insert(info.base_offset.0, (false, tag));
            }
            Err(error) if self.is_storage(&error) => {}
            Err(error) => self.unexpected("plain append", error),
        }
    }

    /// Adds a partition to a producer's transaction (AddPartitionsToTxn, then verify).
    fn op_add_partition(&mut self) {
        let p = self.rng.below(PRODUCERS as u64) as usize;
        if self.producers[p].txn.decided.is_some() {
            return;
        }
        let part = self.rng.below(PARTITIONS as u64) as usize;
        self.note(format!("add producer {p} partition {part}"));
        match self.verify(p, part) {
            Ok(()) => {
                let txn = &mut self.producers[p].txn;
                if !txn.partitions.contains(&part) {
                    txn.partitions.push(part);
                }
            }
            Err(error) if self.is_storage(&error) => {}
            Err(error) => self.unexpected("verify", error),
        }
    }

    fn op_txn_produce(&mut self) {
        let p = self.rng.below(PRODUCERS as u64) as usize;
        let producer = &self.producers[p];
        if producer.txn.decided.is_some() || producer.txn.partitions.is_empty() {
            return;
        }
        let part =
            producer.txn.partitions[self.rng.below(producer.txn.partitions.len() as u64) as usize];
        let count = self.rng.range(1, 4) as i32;
        let (id, epoch, seq) = (
            producer.producer_id,
            producer.epoch,
            producer.next_seq[part],
        );
        let tag = self.next_tag;
        self.next_tag += 1;
        self.note(format!(
            "txn produce {p} partition {part} seq {seq} tag {tag}"
        ));
        match self.append(part, batch_bytes(tag, count, Some((id, epoch, seq, true)))) {
            Ok(info) => {
                assert!(
                    !info.duplicate,
                    "seed {}: fresh batch a duplicate",
                    self.seed
                );
                self.producers[p].next_seq[part] += count;
                self.acked[part].insert(info.base_offset.0, (false, tag));
            }
            Err(error) if self.is_storage(&error) => {}
            Err(error) => self.unexpected("transactional produce", error),
        }
    }

    /// EndTxn (or a fencing abort with an epoch bump): the decision, then every marker.
    fn op_end(&mut self) {
        let p = self.rng.below(PRODUCERS as u64) as usize;
        if self.producers[p].txn.decided.is_none() {
            if self.producers[p].txn.partitions.is_empty() {
                return;
            }
            let fence = self.rng.chance(20);
            let control = match fence || self.rng.chance(40) {
                true => ControlType::Abort,
                false => ControlType::Commit,
            };
            let producer = &mut self.producers[p];
            if fence {
                producer.epoch += 1;
                producer.next_seq = [0; PARTITIONS];
            }
            producer.txn.decided = Some((control, producer.epoch));
            self.note(format!("decide producer {p}: {control:?} (fence {fence})"));
        }
        self.write_markers(p, None);
    }

    /// Writes the decided markers of producer `p` to `only` those partitions, or to all.
    fn write_markers(&mut self, p: usize, only: Option<&[usize]>) {
        let Some((control, epoch)) = self.producers[p].txn.decided else {
            return;
        };
        let parts: Vec<usize> = match only {
            Some(only) => only.to_vec(),
            None => self.producers[p].txn.partitions.clone(),
        };
        for part in parts {
            self.note(format!("marker producer {p} partition {part} {control:?}"));
            match self.marker(p, part, control, epoch) {
                Ok(info) => {
                    let id = self.producers[p].producer_id;
                    self.acked[part].insert(info.base_offset.0, (true, id));
                }
                Err(error) if self.is_storage(&error) => return,
                Err(error) => self.unexpected("marker", error),
            }
        }
        self.producers[p].txn = Txn::default();
    }

    fn crash_and_reopen(&mut self, why: &str) {
        self.note(format!("crash ({why})"));
        self.log = None;
        self.fs.crash(&mut self.rng);
        self.reopen();
    }

    fn clean_restart(&mut self) {
        self.note("clean shutdown".into());
        let result = self.log().shutdown();
        self.log = None;
        if result.is_err() || self.rng.chance(50) {
            self.fs.crash(&mut self.rng);
        }
        self.reopen();
    }

    fn reopen(&mut self) {
        loop {
            if self.rng.chance(15) {
                let ops = self.rng.below(60);
                self.note(format!("power cut armed during recovery after {ops}"));
                self.fs.cut_power_after(ops);
            }
            match LogManager::open(log_config(), Arc::new(self.fs.clone())) {
                Ok((log, report)) if !self.fs.is_power_cut() => {
                    self.note(format!("reopened: {:?}", report.actions));
                    self.log = Some(log);
                    break;
                }
                Ok((log, _)) => drop(log),
                Err(error) => self.note(format!("open failed: {error}")),
            }
            self.fs.crash(&mut self.rng);
        }
        let states: Vec<HashMap<i64, Recomputed>> =
            (0..PARTITIONS).map(|part| self.check(part)).collect();
        self.resume_coordinator(&states);
    }

    /// After a reopen, the coordinator's load: sequences from what the log holds,
    /// undecided transactions re-verified, decided ones completed where still open.
    fn resume_coordinator(&mut self, states: &[HashMap<i64, Recomputed>]) {
        for p in 0..PRODUCERS {
            let id = self.producers[p].producer_id;
            for (part, state) in states.iter().enumerate() {
                let seen = state.get(&id).copied().unwrap_or_default();
                self.producers[p].next_seq[part] = expected_seq(seen, self.producers[p].epoch);
            }
            if self.producers[p].txn.decided.is_some() {
                let open: Vec<usize> = self.producers[p]
                    .txn
                    .partitions
                    .iter()
                    .copied()
                    .filter(|&part| states[part].get(&id).is_some_and(|s| s.open.is_some()))
                    .collect();
                self.stats.completed_after_crash += open.len() as u64;
                self.write_markers(p, Some(&open));
            } else {
                for part in self.producers[p].txn.partitions.clone() {
                    match self.verify(p, part) {
                        Ok(()) => {}
                        Err(error) if self.is_storage(&error) => return,
                        Err(error) => self.unexpected("re-verify", error),
                    }
                }
            }
            if self.broken() {
                return;
            }
        }
    }

    /// Checks one partition against what its batches say (see the module header) and
    /// returns each producer's recomputed state there.
    fn check(&mut self, part: usize) -> HashMap<i64, Recomputed> {
        let seed = self.seed;
        let (log, key) = (self.log(), self.keys[part].clone());
        let offsets = log.offsets(&key).expect("offsets");
        let mut producers: HashMap<i64, Recomputed> = HashMap::new();
        let mut expected_aborted = Vec::new();
        let mut seen = BTreeMap::new();
        let mut next = offsets.log_start_offset;
        while next < offsets.high_watermark {
            let read = log.read(&key, next, 1 << 20, true).expect("read");
            for batch in BatchIter::new(read.records) {
                let batch = batch.expect("whole batch");
                let header = BatchHeader::parse(&batch).expect("header");
                let (base, id) = (header.base_offset().0, header.producer_id().0);
                let epoch = header.producer_epoch().0;
                let state = producers.entry(id).or_default();
                if header.is_control() {
                    let control = control_type(&batch[HEADER_LEN..]).expect("marker type");
                    seen.insert(base, (true, id));
                    if state.epoch.is_some_and(|e| epoch > e) || state.epoch.is_none() {
                        state.last_seq = None;
                    }
                    state.epoch = Some(state.epoch.map_or(epoch, |e| e.max(epoch)));
                    if let Some(first) = state.open.take() {
                        if control == ControlType::Abort {
                            let after = base + 1;
                            let lso = producers
                                .values()
                                .filter_map(|s| s.open)
                                .min()
                                .map_or(after, |o| o.min(after));
                            expected_aborted.push((id, first, base, lso));
                        }
                    }
                } else {
                    seen.insert(base, (false, header.base_timestamp()));
                    if id >= 0 {
                        if state.epoch != Some(epoch) {
                            state.last_seq = None;
                        }
                        state.epoch = Some(epoch);
                        state.last_seq = Some(header.base_sequence() + header.last_offset_delta());
                        if header.is_transactional() && state.open.is_none() {
                            state.open = Some(base);
                        }
                    }
                }
                next = header.next_offset();
            }
        }
        let first_open = producers.values().filter_map(|s| s.open).min();
        let lso = first_open.map_or(offsets.high_watermark.0, |o| {
            o.min(offsets.high_watermark.0)
        });
        assert_eq!(
            offsets.last_stable_offset.0, lso,
            "seed {seed}: LSO of partition {part}"
        );
        if lso < offsets.high_watermark.0 {
            self.stats.open_at_reopen += 1;
        }
        let mut aborted: Vec<AbortedTxn> = Vec::new();
        log.aborted_transactions(&key, Offset(0), offsets.high_watermark, &mut aborted)
            .expect("aborted");
        let aborted: Vec<(i64, i64, i64, i64)> = aborted
            .iter()
            .map(|a| {
                (
                    a.producer_id.0,
                    a.first_offset.0,
                    a.last_offset.0,
                    a.last_stable_offset.0,
                )
            })
            .collect();
        assert_eq!(
            aborted, expected_aborted,
            "seed {seed}: aborted list of partition {part}"
        );
        self.stats.aborted_checked += aborted.len() as u64;
        for (offset, (marker, what)) in &self.acked[part] {
            let found = seen.get(offset);
            assert!(
                found.is_some_and(|(m, w)| m == marker && (*marker || w == what)),
                "seed {seed}: acked {} at {offset} of partition {part} is {found:?}",
                if *marker { "marker" } else { "append" }
            );
        }
        self.acked[part] = seen.into_iter().collect();
        for p in 0..PRODUCERS {
            let producer = &self.producers[p];
            let state = producers
                .get(&producer.producer_id)
                .copied()
                .unwrap_or_default();
            let seq = expected_seq(state, producer.epoch);
            let (transactional, what) = match state.open {
                Some(_) => (false, "a plain batch inside an open transaction"),
                None => (true, "a transactional batch before verification"),
            };
            let bytes = batch_bytes(
                0,
                1,
                Some((producer.producer_id, producer.epoch, seq, transactional)),
            );
            match self.append(part, bytes) {
                Err(LogError::InvalidTxnState { .. }) => self.stats.checks += 1,
                Err(error) if self.is_storage(&error) => return producers,
                other => panic!("seed {seed}: {what} in partition {part}: {other:?}"),
            }
        }
        producers
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=14 => self.op_plain(),
            15..=34 => self.op_add_partition(),
            35..=64 => self.op_txn_produce(),
            65..=79 => self.op_end(),
            80..=84 => {
                self.note("checkpoint".into());
                let _ = self.log().checkpoint_now();
            }
            85..=88 => self.crash_and_reopen("now"),
            89..=93 => {
                if !self.fs.is_cut_armed() {
                    let ops = self.rng.below(120);
                    self.note(format!("power cut armed after {ops}"));
                    self.fs.cut_power_after(ops);
                }
            }
            _ => self.clean_restart(),
        }
        if self.broken() {
            self.crash_and_reopen("storage failed");
        }
    }
}

/// The sequence the log expects next from a producer at `epoch`, given what it holds.
fn expected_seq(state: Recomputed, epoch: i16) -> i32 {
    match state.epoch {
        Some(e) if e == epoch => state.last_seq.map_or(0, |s| s + 1),
        _ => 0,
    }
}

fn run_case(seed: u64) -> Stats {
    let mut world = World::new(seed);
    for _ in 0..OPS_PER_CASE {
        world.step();
    }
    world.crash_and_reopen("end of case");
    world.stats
}

#[test]
fn txn_crash_model() {
    if let Ok(seed) = std::env::var("SLUICE_TXN_MODEL_SEED") {
        run_case(seed.parse().expect("SLUICE_TXN_MODEL_SEED is a number"));
        return;
    }
    let mut stats = Stats::default();
    for seed in 0..CASES {
        stats += run_case(seed);
    }
    eprintln!("transaction crash model: {CASES} cases: {stats:?}");
    let weak = stats.checks < CASES * 10
        || stats.aborted_checked == 0
        || stats.open_at_reopen == 0
        || stats.completed_after_crash == 0;
    assert!(!weak, "the run exercised too little: {stats:?}");
}
