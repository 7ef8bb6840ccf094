//! The run engine: creates a fresh topic, starts consumers on explicitly assigned partitions,
//! drives open-loop producers on an intended-time schedule, samples everything once a second,
//! then flushes, drains and reconciles the audit.
//!
//! Guarantees:
//! - Latency is never lost to a late sender: each message's intended send time is fixed by the
//!   schedule (`t0 + k / rate`) before anything can delay it, and both "from send" and "from
//!   intended" latencies are recorded (the latter is free of coordinated omission).
//! - Warmup exclusion is by message, not by time window: a message whose intended time falls in
//!   the warmup carries a warmup flag and never enters the measured totals or the audit, however
//!   late it is acknowledged or consumed.
//! - Every wait is bounded (see `limits`), and every queue is bounded: librdkafka's queues by
//!   config, our per-thread state by the audit cap and fixed-size histograms.
//! - No group membership (no rebalances): consumers `assign()` topic-partitions from the start.
//!   They do store and auto-commit offsets to a per-run group id (generation -1, like a
//!   standalone consumer), so the lag can also be read as the broker sees it (`lagview`); a
//!   last synchronous commit at consumer shutdown makes the final broker view exact.

//!
//! The threads, one module each: `producer`, `consumer`, `sampler` (with its lag thread),
//! `observers` (faults, topology, broker metrics); their clients' settings in `clients`; the
//! controllers beside them (`backpressure`, `backlog`, `ratecontrol`, `batcher`,
//! `attribution`). They share `crate::vocab`; this module runs them as a list of phases and
//! returns the `RunData` the report is built from.

pub mod attribution;
pub mod backlog;
pub mod backpressure;
pub mod batcher;
pub mod clients;
pub mod consumer;
pub mod observers;
pub mod producer;
pub mod ratecontrol;
pub mod sampler;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use self::attribution::SentSlots;
use self::backlog::{BacklogJob, BacklogResult};
use self::backpressure::{backpressure_thread, BpJob, BpState};
use self::batcher::BatcherStats;
use self::clients::{
    consumer_config, create_topics, delete_group, delete_topics, group_id, make_probe,
    wait_topics_ready, ConsumerCtx, Probe,
};
use self::consumer::{consumer_thread, ConsumerJob, ConsumerState};
use self::observers::{Observed, Observers};
use self::producer::{producer_thread, ProducerJob, ProducerState};
use self::ratecontrol::{LoadCounters, RateControl, RateSearchResult, SearchJob};
use self::sampler::{sampler_thread, SamplerJob, SamplerOut};
use crate::audit::{reconcile, AuditResult, ConsumerAudit};
use crate::clientstats::{LatencySplit, SplitAcc};
use crate::lagview::{self, AckCheckpoints, TopicSet};
use crate::limits;
use crate::payload::PayloadPool;
use crate::procstat::{self, ProcReading, ProcSampler};
use crate::scenario::Scenario;
use crate::vocab::{
    fold_error_kinds, spawn, Clock, ConsumeSide, ErrorKind, ErrorLog, IntervalSample, ProduceSide,
    RunOptions, Schedule,
};

pub use self::clients::check_metadata;

/// Everything a finished (or interrupted) run measured, before it is turned into a report.
#[derive(Debug)]
pub struct RunData {
    pub topic: String,
    /// Every topic of the run (the first is `topic`).
    pub topics: Vec<String>,
    /// Per topic: distinct measured messages received, and the sum of its partitions' high
    /// watermarks at the last sample (None if that query failed).
    pub topic_received: Vec<u64>,
    pub topic_end_offsets: Option<Vec<i64>>,
    pub run_tag: u32,
    pub interrupted: bool,
    /// Measured window: the schedule's, from the end of warmup to the end of load (shorter after Ctrl-C).
    pub measure_s: f64,
    pub warmup_s: f64,
    pub drain_s: f64,
    pub flush_timed_out: bool,
    pub produced: ProduceSide,
    pub consumed: ConsumeSide,
    pub warmup_produced: u64,
    pub warmup_acked: u64,
    pub warmup_received: u64,
    pub foreign: u64,
    pub audit: AuditResult,
    pub intervals: Vec<IntervalSample>,
    /// Summed over the sampled brokers (`broker_each` has each one).
    pub broker_first: Option<ProcReading>,
    pub broker_last: Option<ProcReading>,
    pub broker_peak_rss_bytes: Option<u64>,
    /// Every sampled broker process: pid, first and last reading, peak RSS.
    pub broker_each: Vec<BrokerEach>,
    pub client_cpu_s: Option<f64>,
    /// Error kind -> count, and the kinds with examples and times (most frequent first).
    pub errors: BTreeMap<String, u64>,
    pub error_kinds: Vec<ErrorKind>,
    pub errors_overflow: u64,
    /// The scenario's fault commands as they ran, with their impact.
    pub faults: Vec<crate::faults::FaultRecord>,
    /// Scraped broker metrics (None without a metrics endpoint).
    pub broker_metrics: Option<crate::brokermetrics::BrokerMetrics>,
    pub consumers_used: u32,
    pub topic_deleted: Option<bool>,
    /// The bench's consumer group deleted with its topics (None when topics are kept).
    pub group_deleted: Option<bool>,
    /// Brokers, controller and the bench topics' partitions at the start and end of the run.
    pub topology: crate::topology::TopologyReport,
    /// Per-partition unavailability (see `availability`).
    pub availability: crate::availability::AvailabilityReport,
    /// Backpressure: pauses and total paused seconds (None when off).
    pub bp_events: Option<u64>,
    pub bp_paused_s: Option<f64>,
    /// Producer latency decomposition over the measure-phase intervals.
    pub latency_split: Option<LatencySplit>,
    /// Measured messages acknowledged per partition (all producers).
    pub partition_acked: Vec<u64>,
    /// The max-rate search (None unless `rate_search`).
    pub rate_search: Option<RateSearchResult>,
    /// Backlog build and drain (None unless `backlog_bytes` > 0).
    pub backlog: Option<BacklogResult>,
    /// Application batcher flushes over all producers (None when it is off).
    pub app_batch: Option<BatcherStats>,
}

/// One sampled broker process over a run.
#[derive(Debug, Clone, Copy)]
pub struct BrokerEach {
    pub pid: u32,
    pub first: ProcReading,
    pub last: ProcReading,
    pub peak_rss_bytes: Option<u64>,
    /// The process could no longer be read from this time on (seconds since load start).
    pub gone_at_s: Option<f64>,
}

/// A run tag that differs between runs (and between concurrent runs), so messages of an earlier
/// run on a reused topic are recognised as foreign.
pub fn new_run_tag() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut r = crate::payload::SplitMix64::new(t ^ ((std::process::id() as u64) << 32));
    (r.next_u64() >> 32) as u32
}

/// Runs one scenario against one broker. `stop` is set by Ctrl-C: producing ends early, the
/// drain is shortened and the data measured so far is returned.
///
/// The phases, in order: the topics and the clients that watch them (`Prepared`), the run's
/// shared state and schedule (`Shared`), the consumers, the sampler and observers, the
/// controllers, the load (producers, until the schedule ends), the drain, the shutdown of
/// every thread, the topics' deletion, and the reconciliation into `RunData`.
pub fn run(s: &Scenario, opts: &RunOptions, stop: Arc<AtomicBool>) -> Result<RunData, String> {
    let prepared = Prepared::new(s, opts)?;
    let shared = Shared::new(s, &prepared, stop);
    let (consumer_states, consumer_handles) = start_consumers(s, opts, &shared)?;
    let producer_states: Vec<Arc<Mutex<ProducerState>>> = (0..s.producers)
        .map(|_| Arc::new(Mutex::new(ProducerState::default())))
        .collect();
    let topology_start = prepared.topology_start.as_ref().ok().cloned();
    let states = (producer_states.clone(), consumer_states.clone());
    let sampler = start_sampler(s, opts, prepared.probe, prepared.watcher, &shared, states)?;
    let observers = Observers::start(
        s,
        opts,
        &shared.topics,
        shared.clock,
        shared.sched,
        topology_start,
        shared.avail.clone(),
    )?;
    let mut controllers = Controllers::start(s, opts, &shared)?;
    let flush_timed_out = run_load(s, opts, &shared, &controllers, &producer_states)?;
    let rate_search = controllers.stop_load();
    let load = LoadEnd::now(&shared, flush_timed_out);
    let produced_measured: u64 = producer_states
        .iter()
        .map(|p| p.lock().measured.expected())
        .sum();
    let drain_s = drain(&shared, produced_measured, opts.delivers);
    let observed = observers.finish();
    shared.consumer_stop.store(true, Ordering::Relaxed);
    for h in consumer_handles {
        let _ = h.join();
    }
    let backlog = controllers.backlog.take().and_then(|h| h.join().ok());
    shared.sampler_stop.store(true, Ordering::Relaxed);
    let sampled = sampler.join().unwrap_or_default();
    let client_cpu_s = procstat::client_usage().map(|u| u.cpu_user_s + u.cpu_system_s);
    let topology = finish_topology(
        &prepared.topology_source,
        prepared.topology_start,
        &shared,
        &observed,
    );
    let (topic_deleted, group_deleted) = clean_up(s, opts, &shared);
    let ended = Ended {
        load,
        drain_s,
        rate_search,
        backlog,
        bp: controllers.bp.clone(),
        observed,
        sampled,
        client_cpu_s,
        topology,
        topic_deleted,
        group_deleted,
    };
    let producers = Producers::gather(&producer_states);
    let consumers = Consumers::gather(&consumer_states, shared.topics.names.len());
    Ok(reconciled(s, &shared, ended, producers, consumers))
}

/// What the run's threads left when they all ended.
struct Ended {
    load: LoadEnd,
    drain_s: f64,
    rate_search: Option<RateSearchResult>,
    backlog: Option<BacklogResult>,
    bp: Option<Arc<BpState>>,
    observed: Observed,
    sampled: SamplerOut,
    client_cpu_s: Option<f64>,
    topology: crate::topology::TopologyReport,
    topic_deleted: Option<bool>,
    group_deleted: Option<bool>,
}

/// The reconciliation: the audit, the series completed by send time and fault impact, and
/// every figure of the run in one `RunData`.
fn reconciled(s: &Scenario, sh: &Shared, e: Ended, p: Producers, c: Consumers) -> RunData {
    let audit = audit(s, &p, &c);
    let mut by_sent = p.by_sent.clone();
    by_sent.merge(&c.by_sent);
    place_lost_acked(&audit, &p, &c, &mut by_sent);
    let origin = sh.clock.instant_at(sh.sched.load_start_ns);
    let (errors, error_kinds, errors_overflow) = sh.errors.snapshot(origin);
    let mut intervals = e.sampled.intervals;
    fold_error_kinds(&mut intervals, limits::ERROR_KINDS_IN_SERIES);
    self::attribution::fill(&mut intervals, &by_sent);
    let faults = fault_impacts(s, e.observed.faults, &intervals);
    let parts = sh.topics.partitions as usize;
    let topic_end_offsets =
        (e.sampled.last_high.as_ref()).map(|h| h.chunks(parts).map(|c| c.iter().sum()).collect());
    let brokers = broker_figures(&e.sampled.brokers);
    let bp = e.bp.as_ref();
    RunData {
        availability: e.sampled.availability,
        topic: sh.topics.names[0].clone(),
        topics: sh.topics.names.clone(),
        topic_received: c.topic_received,
        topic_end_offsets,
        run_tag: sh.run_tag,
        interrupted: e.load.interrupted,
        measure_s: e.load.stopped_ns.saturating_sub(sh.sched.warmup_end_ns) as f64 / 1e9,
        warmup_s: s.warmup_s.as_secs_f64(),
        drain_s: e.drain_s,
        flush_timed_out: e.load.flush_timed_out,
        produced: p.measured,
        consumed: c.measured,
        warmup_produced: p.warmup_produced,
        warmup_acked: p.warmup_acked,
        warmup_received: c.warmup_received,
        foreign: c.foreign,
        audit,
        intervals,
        faults,
        error_kinds,
        broker_metrics: e.observed.broker_metrics,
        broker_first: brokers.first,
        broker_last: brokers.last,
        broker_peak_rss_bytes: brokers.peak_rss_bytes,
        broker_each: brokers.each,
        client_cpu_s: e.client_cpu_s,
        errors,
        errors_overflow,
        consumers_used: sh.consumers_used,
        topic_deleted: e.topic_deleted,
        group_deleted: e.group_deleted,
        topology: e.topology,
        bp_events: bp.map(|b| b.events.load(Ordering::Relaxed)),
        bp_paused_s: bp.map(|b| b.paused_ns.load(Ordering::Relaxed) as f64 / 1e9),
        latency_split: p.split_measured.summary(),
        partition_acked: p.partition_acked,
        rate_search: e.rate_search,
        backlog: e.backlog,
        app_batch: p.app_batch,
    }
}

/// The run's topics, created and ready, and the clients that watch them from the start.
struct Prepared {
    run_tag: u32,
    topics: Arc<TopicSet>,
    errors: Arc<ErrorLog>,
    probe: Probe,
    /// The committed-offset reader: the bench group id, auto-commit off, never assigned.
    watcher: Probe,
    topology_source: crate::topology::Source,
    topology_start: Result<crate::topology::Topology, String>,
}

impl Prepared {
    fn new(s: &Scenario, opts: &RunOptions) -> Result<Prepared, String> {
        let errors = Arc::new(ErrorLog::default());
        let run_tag = new_run_tag();
        let topics = Arc::new(TopicSet::new(
            &format!("sluice-bench-{}-{run_tag:08x}", s.preset),
            s.topics,
            s.partitions,
        ));
        create_topics(&opts.bootstrap, &topics.names, s)?;
        let probe = make_probe(&opts.bootstrap, &s.client_config, &errors)?;
        wait_topics_ready(&probe, &topics.names, s.partitions)?;
        let topology_source = crate::topology::Source::new(&opts.bootstrap, &s.client_config);
        let topology_start = topology_source.snapshot(&topics.names);
        let watcher = consumer_config(&opts.bootstrap, "sluice-bench-committed", &s.client_config)
            .set("group.id", group_id(run_tag))
            .create_with_context(ConsumerCtx {
                errors: errors.clone(),
                who: "committed-offsets",
            })
            .map_err(|e| format!("cannot create a client: {e}"))?;
        // One fetch now, so finding the group coordinator does not delay the first sample.
        let _ = lagview::committed_offsets(&watcher, &topics);
        Ok(Prepared {
            run_tag,
            topics,
            errors,
            probe,
            watcher,
            topology_source,
            topology_start,
        })
    }
}

/// What the run's threads share: the clock and schedule, the payloads, the positions and
/// counters, and the stop flags of each group of threads.
struct Shared {
    run_tag: u32,
    topics: Arc<TopicSet>,
    errors: Arc<ErrorLog>,
    clock: Clock,
    sched: Schedule,
    pool: Arc<PayloadPool>,
    checkpoints: Arc<AckCheckpoints>,
    avail: Arc<crate::availability::Shared>,
    positions: Arc<Vec<AtomicI64>>,
    unique_measured: Arc<AtomicU64>,
    counters: Arc<LoadCounters>,
    /// Backlog mode: the consumers' hold (None otherwise).
    hold: Option<Arc<AtomicBool>>,
    consumers_used: u32,
    /// Ctrl-C; the consumers' and the sampler's own stops.
    stop: Arc<AtomicBool>,
    consumer_stop: Arc<AtomicBool>,
    sampler_stop: Arc<AtomicBool>,
    /// The clock time the last producer stopped sending.
    stopped_ns: Arc<AtomicU64>,
}

impl Shared {
    fn new(s: &Scenario, p: &Prepared, stop: Arc<AtomicBool>) -> Shared {
        let topics = p.topics.clone();
        let clock = Clock::new();
        // The schedule starts now; consumers start first (their first messages fall in warmup).
        let load_start_ns = clock.now_ns();
        let sched = Schedule {
            load_start_ns,
            warmup_end_ns: load_start_ns + s.warmup_s.as_nanos() as u64,
            load_end_ns: load_start_ns + (s.warmup_s + s.duration_s).as_nanos() as u64,
        };
        Shared {
            run_tag: p.run_tag,
            errors: p.errors.clone(),
            clock,
            sched,
            pool: Arc::new(PayloadPool::new(s.payload, s.message_bytes, s.seed)),
            checkpoints: Arc::new(AckCheckpoints::new(topics.len())),
            avail: Arc::new(crate::availability::Shared::new(topics.len())),
            positions: Arc::new((0..topics.len()).map(|_| AtomicI64::new(0)).collect()),
            unique_measured: Arc::new(AtomicU64::new(0)),
            counters: Arc::new(LoadCounters::default()),
            hold: (s.shaping.backlog_bytes > 0).then(|| Arc::new(AtomicBool::new(true))),
            consumers_used: s.consumers.min(topics.len().max(1) as u32).max(1),
            stop,
            consumer_stop: Arc::new(AtomicBool::new(false)),
            sampler_stop: Arc::new(AtomicBool::new(false)),
            stopped_ns: Arc::new(AtomicU64::new(0)),
            topics,
        }
    }
}

type ConsumerStates = Vec<Arc<Mutex<ConsumerState>>>;

/// The consumers, each with a fixed share of the topic-partitions (round-robin).
fn start_consumers(
    s: &Scenario,
    opts: &RunOptions,
    sh: &Shared,
) -> Result<(ConsumerStates, Vec<JoinHandle<()>>), String> {
    let mut states = Vec::new();
    let mut handles = Vec::new();
    let used = sh.consumers_used;
    for c in 0..used {
        let state = Arc::new(Mutex::new(ConsumerState {
            audit: ConsumerAudit::new(s.producers as usize),
            topic_received: vec![0; sh.topics.names.len()],
            ..Default::default()
        }));
        states.push(state.clone());
        let job = ConsumerJob {
            bootstrap: opts.bootstrap.clone(),
            topics: sh.topics.clone(),
            assigned: (0..sh.topics.len())
                .filter(|f| *f as u32 % used == c)
                .collect(),
            clock: sh.clock,
            run_tag: sh.run_tag,
            state,
            positions: sh.positions.clone(),
            unique_measured: sh.unique_measured.clone(),
            errors: sh.errors.clone(),
            stop: sh.consumer_stop.clone(),
            index: c,
            scenario: s.clone(),
            load_start_ns: sh.sched.load_start_ns,
            hold: sh.hold.clone(),
        };
        handles.push(spawn(format!("bench-consumer-{c}"), move || {
            consumer_thread(job)
        })?);
    }
    Ok((states, handles))
}

/// The one-second sampler, over every producer's and consumer's state.
fn start_sampler(
    s: &Scenario,
    opts: &RunOptions,
    probe: Probe,
    watcher: Probe,
    sh: &Shared,
    (producers, consumers): (Vec<Arc<Mutex<ProducerState>>>, ConsumerStates),
) -> Result<JoinHandle<SamplerOut>, String> {
    let brokers: Vec<ProcSampler> = opts
        .broker_pids
        .iter()
        .enumerate()
        .map(|(i, &pid)| ProcSampler::new(pid, opts.broker_data_dirs.get(i).cloned()))
        .collect();
    let job = SamplerJob {
        clock: sh.clock,
        sched: sh.sched,
        topics: sh.topics.clone(),
        probe: Some(probe),
        watcher: Some(watcher),
        checkpoints: sh.checkpoints.clone(),
        avail: sh.avail.clone(),
        producers,
        consumers,
        positions: sh.positions.clone(),
        brokers,
        errors: sh.errors.clone(),
        stop: sh.sampler_stop.clone(),
        progress: opts.progress,
        measure_s: s.duration_s.as_secs_f64(),
    };
    spawn("bench-sampler".into(), move || sampler_thread(job))
}

/// The controllers of the load: backpressure, the backlog hold and the max-rate search, each
/// only when the scenario asks for it.
struct Controllers {
    bp: Option<Arc<BpState>>,
    bp_stop: Arc<AtomicBool>,
    bp_handle: Option<JoinHandle<()>>,
    backlog: Option<JoinHandle<BacklogResult>>,
    rate: Option<Arc<RateControl>>,
    search: Option<JoinHandle<RateSearchResult>>,
}

impl Controllers {
    fn start(s: &Scenario, opts: &RunOptions, sh: &Shared) -> Result<Controllers, String> {
        let bp_stop = Arc::new(AtomicBool::new(false));
        let (bp, bp_handle) = if s.bp_max_lag > 0 {
            let state = Arc::new(BpState::default());
            let job = BpJob {
                probe: make_probe(&opts.bootstrap, &s.client_config, &sh.errors)?,
                topics: sh.topics.clone(),
                positions: sh.positions.clone(),
                state: state.clone(),
                max_lag: s.bp_max_lag,
                resume_lag: s.bp_resume(),
                poll: s.bp_poll_ms.max(Duration::from_millis(1)),
                clock: sh.clock,
                stop: bp_stop.clone(),
            };
            let h = spawn("bench-backpressure".into(), move || {
                backpressure_thread(job)
            })?;
            (Some(state), Some(h))
        } else {
            (None, None)
        };
        let backlog = match &sh.hold {
            Some(hold) => Some(start_backlog(s, sh, hold.clone())?),
            None => None,
        };
        let rate = s.shaping.rate_search.then(|| {
            Arc::new(RateControl::new(
                s.shaping.search_start_msg_s as f64,
                sh.sched.load_start_ns,
            ))
        });
        let search = match &rate {
            Some(rc) => Some(start_search(s, sh, rc.clone())?),
            None => None,
        };
        Ok(Controllers {
            bp,
            bp_stop,
            bp_handle,
            backlog,
            rate,
            search,
        })
    }

    /// Stops backpressure and awaits the rate search (both end with the load); the backlog
    /// thread runs on through the drain.
    fn stop_load(&mut self) -> Option<RateSearchResult> {
        self.bp_stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.bp_handle.take() {
            let _ = h.join();
        }
        self.search.take().and_then(|h| h.join().ok())
    }
}

fn start_backlog(
    s: &Scenario,
    sh: &Shared,
    hold: Arc<AtomicBool>,
) -> Result<JoinHandle<BacklogResult>, String> {
    let job = BacklogJob {
        clock: sh.clock,
        load_start_ns: sh.sched.load_start_ns,
        load_end_ns: sh.sched.load_end_ns,
        target_bytes: s.shaping.backlog_bytes,
        drain_ratio: s.shaping.backlog_drain_ratio,
        message_bytes: s.message_bytes as u64,
        hold,
        counters: sh.counters.clone(),
        positions: sh.positions.clone(),
        interrupt: sh.stop.clone(),
        stop: sh.consumer_stop.clone(),
    };
    spawn("bench-backlog".into(), move || {
        self::backlog::backlog_thread(job)
    })
}

fn start_search(
    s: &Scenario,
    sh: &Shared,
    control: Arc<RateControl>,
) -> Result<JoinHandle<RateSearchResult>, String> {
    let job = SearchJob {
        clock: sh.clock,
        load_start_ns: sh.sched.load_start_ns,
        load_end_ns: sh.sched.load_end_ns,
        control,
        counters: sh.counters.clone(),
        positions: sh.positions.clone(),
        stop: sh.stop.clone(),
        start_msg_s: s.shaping.search_start_msg_s as f64,
        period: s.shaping.search_period_ms,
        limit: s.shaping.search_backlog_limit,
    };
    spawn("bench-rate-search".into(), move || {
        self::ratecontrol::search_thread(job)
    })
}

/// The load: one producer thread each, awaited; true when a final flush timed out.
fn run_load(
    s: &Scenario,
    opts: &RunOptions,
    sh: &Shared,
    controllers: &Controllers,
    states: &[Arc<Mutex<ProducerState>>],
) -> Result<bool, String> {
    let mut handles = Vec::new();
    for i in 0..s.producers {
        let job = ProducerJob {
            index: i,
            scenario: s.clone(),
            bootstrap: opts.bootstrap.clone(),
            topic: sh.topics.names[0].clone(),
            topics: sh.topics.clone(),
            checkpoints: sh.checkpoints.clone(),
            avail: sh.avail.clone(),
            pool: sh.pool.clone(),
            clock: sh.clock,
            sched: sh.sched,
            run_tag: sh.run_tag,
            state: states[i as usize].clone(),
            errors: sh.errors.clone(),
            stop: sh.stop.clone(),
            stopped_ns: sh.stopped_ns.clone(),
            bp: controllers.bp.clone(),
            rate: controllers.rate.clone(),
            counters: sh.counters.clone(),
        };
        handles.push(spawn(format!("bench-producer-{i}"), move || {
            producer_thread(job)
        })?);
    }
    let mut flush_timed_out = false;
    for h in handles {
        flush_timed_out |= h.join().unwrap_or(true);
    }
    Ok(flush_timed_out)
}

/// How the load ended.
struct LoadEnd {
    flush_timed_out: bool,
    interrupted: bool,
    /// End of the measured window, clock ns.
    stopped_ns: u64,
}

impl LoadEnd {
    fn now(sh: &Shared, flush_timed_out: bool) -> LoadEnd {
        let interrupted = sh.stop.load(Ordering::Relaxed);
        // The measured window is the schedule's (its slots span exactly warmup end .. load
        // end; the last send happens one slot before the end). Only Ctrl-C cuts it short.
        let stopped_ns = if interrupted {
            sh.stopped_ns
                .load(Ordering::Relaxed)
                .clamp(sh.sched.warmup_end_ns, sh.sched.load_end_ns)
        } else {
            sh.sched.load_end_ns
        };
        LoadEnd {
            flush_timed_out,
            interrupted,
            stopped_ns,
        }
    }
}

/// The drain: until every measured message arrived, nothing arrived for `DRAIN_IDLE`, or
/// `DRAIN_MAX`. Returns its length in seconds.
fn drain(sh: &Shared, produced_measured: u64, delivers: bool) -> f64 {
    let drain_start = Instant::now();
    let drain_max = if sh.stop.load(Ordering::Relaxed) {
        limits::INTERRUPTED_DRAIN_MAX
    } else {
        limits::DRAIN_MAX
    };
    let mut last_seen = sh.unique_measured.load(Ordering::Relaxed);
    let mut last_change = Instant::now();
    loop {
        let seen = sh.unique_measured.load(Ordering::Relaxed);
        if seen >= produced_measured || !delivers {
            break;
        }
        if seen != last_seen {
            last_seen = seen;
            last_change = Instant::now();
        }
        let idle_limit = if sh.stop.load(Ordering::Relaxed) {
            limits::INTERRUPTED_DRAIN_MAX
        } else {
            limits::DRAIN_IDLE
        };
        if last_change.elapsed() >= idle_limit || drain_start.elapsed() >= drain_max {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drain_start.elapsed().as_secs_f64()
}

/// The topology at the start and end of the run, with the changes seen during it.
fn finish_topology(
    source: &crate::topology::Source,
    start: Result<crate::topology::Topology, String>,
    sh: &Shared,
    observed: &Observed,
) -> crate::topology::TopologyReport {
    let end = source.snapshot(&sh.topics.names);
    let mut topology = crate::topology::TopologyReport::new(start, end);
    topology.during = observed.topology_changes.clone();
    topology.samples_during = observed.topology_samples;
    topology.failed_samples_during = observed.topology_failed;
    topology
}

/// Deletes the run's topics and group when asked; whether each deletion was confirmed.
fn clean_up(s: &Scenario, opts: &RunOptions, sh: &Shared) -> (Option<bool>, Option<bool>) {
    if !opts.delete_topic {
        return (None, None);
    }
    let cc = &s.client_config;
    (
        Some(delete_topics(
            &opts.bootstrap,
            &sh.topics.names,
            s.partitions,
            cc,
        )),
        Some(delete_group(&opts.bootstrap, &group_id(sh.run_tag), cc)),
    )
}

/// Every producer's measured state, merged.
#[derive(Default)]
struct Producers {
    measured: ProduceSide,
    warmup_produced: u64,
    warmup_acked: u64,
    /// Per producer: the records the audit expects, and those acknowledged.
    produced_counts: Vec<u64>,
    acked_sets: Vec<crate::audit::SeqSet>,
    split_measured: SplitAcc,
    partition_acked: Vec<u64>,
    app_batch: Option<BatcherStats>,
    by_sent: SentSlots,
    seq_marks: Vec<self::attribution::SeqMarks>,
}

impl Producers {
    fn gather(states: &[Arc<Mutex<ProducerState>>]) -> Producers {
        let mut p = Producers::default();
        for state in states {
            let st = state.lock();
            p.by_sent.merge(&st.by_sent);
            p.seq_marks.push(st.seq_marks.clone());
            if p.partition_acked.len() < st.partition_acked.len() {
                p.partition_acked.resize(st.partition_acked.len(), 0);
            }
            for (sum, n) in p.partition_acked.iter_mut().zip(&st.partition_acked) {
                *sum += n;
            }
            if let Some(b) = &st.app_batch {
                p.app_batch
                    .get_or_insert_with(BatcherStats::default)
                    .merge(b);
            }
            p.split_measured.merge(&st.split_measured);
            p.measured.merge(&st.measured);
            p.warmup_produced += st.warmup_produced;
            p.warmup_acked += st.warmup_acked;
            // The audit expects every measured record but those of transactions drawn to abort.
            p.produced_counts.push(st.measured.expected());
            p.acked_sets.push(st.acked_set.clone());
        }
        p
    }
}

/// Every consumer's measured state, merged.
#[derive(Default)]
struct Consumers {
    measured: ConsumeSide,
    warmup_received: u64,
    foreign: u64,
    audits: Vec<ConsumerAudit>,
    topic_received: Vec<u64>,
    by_sent: SentSlots,
}

impl Consumers {
    fn gather(states: &[Arc<Mutex<ConsumerState>>], topics: usize) -> Consumers {
        let mut c = Consumers {
            topic_received: vec![0u64; topics],
            ..Consumers::default()
        };
        for state in states {
            let st = state.lock();
            for (sum, n) in c.topic_received.iter_mut().zip(&st.topic_received) {
                *sum += n;
            }
            c.measured.merge(&st.measured);
            c.warmup_received += st.warmup_received;
            c.foreign += st.foreign;
            c.audits.push(st.audit.clone());
            c.by_sent.merge(&st.by_sent);
        }
        c
    }
}

/// The loss / duplicate / reorder audit of the measured records.
fn audit(s: &Scenario, p: &Producers, c: &Consumers) -> AuditResult {
    reconcile(
        &p.produced_counts,
        &p.acked_sets,
        &c.audits,
        s.acks == crate::scenario::Acks::All,
    )
}

/// Places the acknowledged records no consumer received in time, whatever the acks: with
/// acks=1 the series shows when the permitted (unsynced) losses were sent.
fn place_lost_acked(audit: &AuditResult, p: &Producers, c: &Consumers, by_sent: &mut SentSlots) {
    if audit.lost_acked + audit.lost_unsynced == 0 {
        return;
    }
    crate::audit::for_each_lost_acked(&p.acked_sets, &c.audits, |producer, seq| {
        if let Some(ns) = p.seq_marks.get(producer).and_then(|m| m.sent_ns_of(seq)) {
            by_sent.lost_acked(ns);
        }
    });
}

/// The fault commands as they ran, each with its impact on the series.
fn fault_impacts(
    s: &Scenario,
    mut faults: Vec<crate::faults::FaultRecord>,
    intervals: &[IntervalSample],
) -> Vec<crate::faults::FaultRecord> {
    // A fixed target (bursts can lift it for a while): what a steady interval acks at most.
    let target_rate = (s.rate_msg_s > 0 && !s.shaping.rate_search)
        .then(|| s.rate_msg_s.max(s.burst_rate_msg_s) as f64);
    let first_fault_s = faults
        .iter()
        .filter_map(|f| f.started_at_s)
        .fold(f64::INFINITY, f64::min);
    for f in &mut faults {
        if let Some(at) = f.started_at_s {
            f.impact = Some(crate::faults::analyze(
                intervals,
                at,
                first_fault_s,
                target_rate,
            ));
        }
    }
    faults
}

/// The sampled broker processes' figures, summed and each.
struct BrokerFigures {
    first: Option<ProcReading>,
    last: Option<ProcReading>,
    peak_rss_bytes: Option<u64>,
    each: Vec<BrokerEach>,
}

fn broker_figures(b: &procstat::BrokerTrack) -> BrokerFigures {
    BrokerFigures {
        first: (!b.is_empty()).then(|| procstat::sum_readings(&b.first)),
        last: (!b.is_empty()).then(|| procstat::sum_readings(&b.last)),
        peak_rss_bytes: b
            .peak_rss_bytes
            .iter()
            .fold(None, |a: Option<u64>, p| match (a, p) {
                (Some(x), Some(y)) => Some(x + y),
                (x, None) => x,
                (None, y) => *y,
            }),
        each: b
            .pids()
            .into_iter()
            .enumerate()
            .map(|(i, pid)| BrokerEach {
                pid,
                first: b.first[i],
                last: b.last[i],
                peak_rss_bytes: b.peak_rss_bytes[i],
                gone_at_s: b.gone_at_s[i],
            })
            .collect(),
    }
}
