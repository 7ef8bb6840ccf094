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
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use self::attribution::SentSlots;
use self::backlog::{BacklogJob, BacklogResult};
use self::backpressure::{backpressure_thread, BpJob, BpState};
use self::batcher::BatcherStats;
use self::clients::{
    consumer_config, create_topics, delete_group, delete_topics, group_id, make_probe,
    wait_topics_ready, ConsumerCtx,
};
use self::consumer::{consumer_thread, ConsumerJob, ConsumerState};
use self::observers::Observers;
use self::producer::{producer_thread, ProducerJob, ProducerState};
use self::ratecontrol::{LoadCounters, RateControl, RateSearchResult, SearchJob};
use self::sampler::{sampler_thread, SamplerJob};
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
pub fn run(s: &Scenario, opts: &RunOptions, stop: Arc<AtomicBool>) -> Result<RunData, String> {
    let errors = Arc::new(ErrorLog::default());
    let run_tag = new_run_tag();
    let topics = Arc::new(TopicSet::new(
        &format!("sluice-bench-{}-{run_tag:08x}", s.preset),
        s.topics,
        s.partitions,
    ));
    let topic = topics.names[0].clone();
    create_topics(&opts.bootstrap, &topics.names, s)?;
    let probe = make_probe(&opts.bootstrap, &s.client_config, &errors)?;
    wait_topics_ready(&probe, &topics.names, s.partitions)?;
    let topology_source = crate::topology::Source::new(&opts.bootstrap, &s.client_config);
    let topology_start = topology_source.snapshot(&topics.names);
    let topology_start_copy = topology_start.as_ref().ok().cloned();
    // The committed-offset reader: the bench group id, auto-commit off, never assigned.
    let watcher = consumer_config(&opts.bootstrap, "sluice-bench-committed", &s.client_config)
        .set("group.id", group_id(run_tag))
        .create_with_context(ConsumerCtx {
            errors: errors.clone(),
            who: "committed-offsets",
        })
        .map_err(|e| format!("cannot create a client: {e}"))?;
    // One fetch now, so finding the group coordinator does not delay the first sample.
    let _ = lagview::committed_offsets(&watcher, &topics);
    let checkpoints = Arc::new(AckCheckpoints::new(topics.len()));
    let avail = Arc::new(crate::availability::Shared::new(topics.len()));

    let clock = Clock::new();
    let pool = Arc::new(PayloadPool::new(s.payload, s.message_bytes, s.seed));
    let positions: Arc<Vec<AtomicI64>> =
        Arc::new((0..topics.len()).map(|_| AtomicI64::new(0)).collect());
    let unique_measured = Arc::new(AtomicU64::new(0));
    let consumer_stop = Arc::new(AtomicBool::new(false));
    let sampler_stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(LoadCounters::default());
    let hold = (s.shaping.backlog_bytes > 0).then(|| Arc::new(AtomicBool::new(true)));

    // The schedule starts now; consumers start first (their first messages fall in warmup).
    let load_start_ns = clock.now_ns();
    let sched = Schedule {
        load_start_ns,
        warmup_end_ns: load_start_ns + s.warmup_s.as_nanos() as u64,
        load_end_ns: load_start_ns + (s.warmup_s + s.duration_s).as_nanos() as u64,
    };

    // Consumers, each with a fixed share of the topic-partitions (round-robin).
    let consumers_used = s.consumers.min(topics.len().max(1) as u32).max(1);
    let mut consumer_states = Vec::new();
    let mut consumer_handles = Vec::new();
    for c in 0..consumers_used {
        let state = Arc::new(Mutex::new(ConsumerState {
            audit: ConsumerAudit::new(s.producers as usize),
            topic_received: vec![0; topics.names.len()],
            ..Default::default()
        }));
        consumer_states.push(state.clone());
        let job = ConsumerJob {
            bootstrap: opts.bootstrap.clone(),
            topics: topics.clone(),
            assigned: (0..topics.len())
                .filter(|f| *f as u32 % consumers_used == c)
                .collect(),
            clock,
            run_tag,
            state,
            positions: positions.clone(),
            unique_measured: unique_measured.clone(),
            errors: errors.clone(),
            stop: consumer_stop.clone(),
            index: c,
            scenario: s.clone(),
            load_start_ns,
            hold: hold.clone(),
        };
        consumer_handles.push(spawn(format!("bench-consumer-{c}"), move || {
            consumer_thread(job)
        })?);
    }

    let producer_states: Vec<Arc<Mutex<ProducerState>>> = (0..s.producers)
        .map(|_| Arc::new(Mutex::new(ProducerState::default())))
        .collect();
    let brokers: Vec<ProcSampler> = opts
        .broker_pids
        .iter()
        .enumerate()
        .map(|(i, &pid)| ProcSampler::new(pid, opts.broker_data_dirs.get(i).cloned()))
        .collect();
    let sampler = {
        let job = SamplerJob {
            clock,
            sched,
            topics: topics.clone(),
            probe,
            watcher: Some(watcher),
            checkpoints: checkpoints.clone(),
            avail: avail.clone(),
            producers: producer_states.clone(),
            consumers: consumer_states.clone(),
            positions: positions.clone(),
            brokers,
            errors: errors.clone(),
            stop: sampler_stop.clone(),
            progress: opts.progress,
            measure_s: s.duration_s.as_secs_f64(),
        };
        spawn("bench-sampler".into(), move || sampler_thread(job))?
    };
    let observers = Observers::start(
        s,
        opts,
        &topics,
        clock,
        sched,
        topology_start_copy,
        avail.clone(),
    )?;
    let bp_stop = Arc::new(AtomicBool::new(false));
    let (bp, bp_handle) = if s.bp_max_lag > 0 {
        let state = Arc::new(BpState::default());
        let job = BpJob {
            probe: make_probe(&opts.bootstrap, &s.client_config, &errors)?,
            topics: topics.clone(),
            positions: positions.clone(),
            state: state.clone(),
            max_lag: s.bp_max_lag,
            resume_lag: s.bp_resume(),
            poll: s.bp_poll_ms.max(Duration::from_millis(1)),
            clock,
            stop: bp_stop.clone(),
        };
        (
            Some(state),
            Some(spawn("bench-backpressure".into(), move || {
                backpressure_thread(job)
            })?),
        )
    } else {
        (None, None)
    };
    let backlog_handle = match &hold {
        Some(hold) => {
            let job = BacklogJob {
                clock,
                load_start_ns,
                load_end_ns: sched.load_end_ns,
                target_bytes: s.shaping.backlog_bytes,
                drain_ratio: s.shaping.backlog_drain_ratio,
                message_bytes: s.message_bytes as u64,
                hold: hold.clone(),
                counters: counters.clone(),
                positions: positions.clone(),
                interrupt: stop.clone(),
                stop: consumer_stop.clone(),
            };
            Some(spawn("bench-backlog".into(), move || {
                self::backlog::backlog_thread(job)
            })?)
        }
        None => None,
    };
    let rate_control = s.shaping.rate_search.then(|| {
        Arc::new(RateControl::new(
            s.shaping.search_start_msg_s as f64,
            load_start_ns,
        ))
    });
    let search_handle = match &rate_control {
        Some(rc) => {
            let job = SearchJob {
                clock,
                load_start_ns,
                load_end_ns: sched.load_end_ns,
                control: rc.clone(),
                counters: counters.clone(),
                positions: positions.clone(),
                stop: stop.clone(),
                start_msg_s: s.shaping.search_start_msg_s as f64,
                period: s.shaping.search_period_ms,
                limit: s.shaping.search_backlog_limit,
            };
            Some(spawn("bench-rate-search".into(), move || {
                self::ratecontrol::search_thread(job)
            })?)
        }
        None => None,
    };
    let stopped_ns = Arc::new(AtomicU64::new(0));
    let mut producer_handles = Vec::new();
    for i in 0..s.producers {
        let job = ProducerJob {
            index: i,
            scenario: s.clone(),
            bootstrap: opts.bootstrap.clone(),
            topic: topic.clone(),
            topics: topics.clone(),
            checkpoints: checkpoints.clone(),
            avail: avail.clone(),
            pool: pool.clone(),
            clock,
            sched,
            run_tag,
            state: producer_states[i as usize].clone(),
            errors: errors.clone(),
            stop: stop.clone(),
            stopped_ns: stopped_ns.clone(),
            bp: bp.clone(),
            rate: rate_control.clone(),
            counters: counters.clone(),
        };
        producer_handles.push(spawn(format!("bench-producer-{i}"), move || {
            producer_thread(job)
        })?);
    }
    let mut flush_timed_out = false;
    for h in producer_handles {
        flush_timed_out |= h.join().unwrap_or(true);
    }
    bp_stop.store(true, Ordering::Relaxed);
    if let Some(h) = bp_handle {
        let _ = h.join();
    }
    let rate_search = search_handle.and_then(|h| h.join().ok());
    let interrupted = stop.load(Ordering::Relaxed);
    // The measured window is the schedule's (its slots span exactly warmup end .. load end; the
    // last send happens one slot before the end). Only Ctrl-C cuts it short.
    let load_stopped_ns = if interrupted {
        stopped_ns
            .load(Ordering::Relaxed)
            .clamp(sched.warmup_end_ns, sched.load_end_ns)
    } else {
        sched.load_end_ns
    };

    // Drain: until every measured message arrived, nothing arrived for DRAIN_IDLE, or DRAIN_MAX.
    let produced_measured: u64 = producer_states
        .iter()
        .map(|p| p.lock().measured.expected())
        .sum();
    let drain_start = Instant::now();
    let drain_max = if interrupted {
        limits::INTERRUPTED_DRAIN_MAX
    } else {
        limits::DRAIN_MAX
    };
    let mut last_seen = unique_measured.load(Ordering::Relaxed);
    let mut last_change = Instant::now();
    loop {
        let seen = unique_measured.load(Ordering::Relaxed);
        if seen >= produced_measured || !opts.delivers {
            break;
        }
        if seen != last_seen {
            last_seen = seen;
            last_change = Instant::now();
        }
        let idle_limit = if stop.load(Ordering::Relaxed) {
            limits::INTERRUPTED_DRAIN_MAX
        } else {
            limits::DRAIN_IDLE
        };
        if last_change.elapsed() >= idle_limit || drain_start.elapsed() >= drain_max {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let drain_s = drain_start.elapsed().as_secs_f64();
    let observed = observers.finish();
    consumer_stop.store(true, Ordering::Relaxed);
    for h in consumer_handles {
        let _ = h.join();
    }
    let backlog = backlog_handle.and_then(|h| h.join().ok());
    sampler_stop.store(true, Ordering::Relaxed);
    let sampled = sampler.join().unwrap_or_default();
    let client_cpu_s = procstat::client_usage().map(|u| u.cpu_user_s + u.cpu_system_s);

    let topology_end = topology_source.snapshot(&topics.names);
    let mut topology = crate::topology::TopologyReport::new(topology_start, topology_end);
    topology.during = observed.topology_changes;
    topology.samples_during = observed.topology_samples;
    topology.failed_samples_during = observed.topology_failed;
    let (topic_deleted, group_deleted) = if opts.delete_topic {
        (
            Some(delete_topics(
                &opts.bootstrap,
                &topics.names,
                s.partitions,
                &s.client_config,
            )),
            Some(delete_group(
                &opts.bootstrap,
                &group_id(run_tag),
                &s.client_config,
            )),
        )
    } else {
        (None, None)
    };

    // Reconcile.
    let mut produced = ProduceSide::default();
    let mut warmup_produced = 0;
    let mut warmup_acked = 0;
    let mut produced_counts = Vec::new();
    let mut acked_sets = Vec::new();
    let mut split_measured = SplitAcc::default();
    let mut partition_acked: Vec<u64> = Vec::new();
    let mut app_batch: Option<BatcherStats> = None;
    let mut by_sent = SentSlots::default();
    let mut seq_marks = Vec::new();
    for p in &producer_states {
        let st = p.lock();
        by_sent.merge(&st.by_sent);
        seq_marks.push(st.seq_marks.clone());
        if partition_acked.len() < st.partition_acked.len() {
            partition_acked.resize(st.partition_acked.len(), 0);
        }
        for (sum, n) in partition_acked.iter_mut().zip(&st.partition_acked) {
            *sum += n;
        }
        if let Some(b) = &st.app_batch {
            app_batch.get_or_insert_with(BatcherStats::default).merge(b);
        }
        split_measured.merge(&st.split_measured);
        produced.merge(&st.measured);
        warmup_produced += st.warmup_produced;
        warmup_acked += st.warmup_acked;
        // The audit expects every measured record but those of transactions drawn to abort.
        produced_counts.push(st.measured.expected());
        acked_sets.push(st.acked_set.clone());
    }
    let mut consumed = ConsumeSide::default();
    let mut warmup_received = 0;
    let mut foreign = 0;
    let mut audits = Vec::new();
    let mut topic_received = vec![0u64; topics.names.len()];
    for c in &consumer_states {
        let st = c.lock();
        for (sum, n) in topic_received.iter_mut().zip(&st.topic_received) {
            *sum += n;
        }
        consumed.merge(&st.measured);
        warmup_received += st.warmup_received;
        foreign += st.foreign;
        audits.push(st.audit.clone());
        by_sent.merge(&st.by_sent);
    }
    let audit = reconcile(
        &produced_counts,
        &acked_sets,
        &audits,
        s.acks == crate::scenario::Acks::All,
    );
    // Placed in time whatever the acks: with acks=1 the series shows when the permitted
    // (unsynced) losses were sent.
    if audit.lost_acked + audit.lost_unsynced > 0 {
        crate::audit::for_each_lost_acked(&acked_sets, &audits, |p, seq| {
            if let Some(ns) = seq_marks.get(p).and_then(|m| m.sent_ns_of(seq)) {
                by_sent.lost_acked(ns);
            }
        });
    }
    let (errors, error_kinds, errors_overflow) =
        errors.snapshot(clock.instant_at(sched.load_start_ns));
    let mut intervals = sampled.intervals;
    fold_error_kinds(&mut intervals, limits::ERROR_KINDS_IN_SERIES);
    self::attribution::fill(&mut intervals, &by_sent);
    let mut faults = observed.faults;
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
                &intervals,
                at,
                first_fault_s,
                target_rate,
            ));
        }
    }
    let topic_end_offsets = sampled.last_high.as_ref().map(|h| {
        h.chunks(topics.partitions as usize)
            .map(|c| c.iter().sum())
            .collect()
    });
    Ok(RunData {
        availability: sampled.availability,
        topic,
        topics: topics.names.clone(),
        topic_received,
        topic_end_offsets,
        run_tag,
        interrupted,
        measure_s: load_stopped_ns.saturating_sub(sched.warmup_end_ns) as f64 / 1e9,
        warmup_s: s.warmup_s.as_secs_f64(),
        drain_s,
        flush_timed_out,
        produced,
        consumed,
        warmup_produced,
        warmup_acked,
        warmup_received,
        foreign,
        audit,
        intervals,
        faults,
        error_kinds,
        broker_metrics: observed.broker_metrics,
        broker_first: (!sampled.brokers.is_empty())
            .then(|| procstat::sum_readings(&sampled.brokers.first)),
        broker_last: (!sampled.brokers.is_empty())
            .then(|| procstat::sum_readings(&sampled.brokers.last)),
        broker_peak_rss_bytes: sampled.brokers.peak_rss_bytes.iter().fold(
            None,
            |a: Option<u64>, p| match (a, p) {
                (Some(x), Some(y)) => Some(x + y),
                (x, None) => x,
                (None, y) => *y,
            },
        ),
        broker_each: sampled
            .brokers
            .pids()
            .into_iter()
            .enumerate()
            .map(|(i, pid)| BrokerEach {
                pid,
                first: sampled.brokers.first[i],
                last: sampled.brokers.last[i],
                peak_rss_bytes: sampled.brokers.peak_rss_bytes[i],
                gone_at_s: sampled.brokers.gone_at_s[i],
            })
            .collect(),
        client_cpu_s,
        errors,
        errors_overflow,
        consumers_used,
        topic_deleted,
        group_deleted,
        topology,
        bp_events: bp.as_ref().map(|b| b.events.load(Ordering::Relaxed)),
        bp_paused_s: bp
            .as_ref()
            .map(|b| b.paused_ns.load(Ordering::Relaxed) as f64 / 1e9),
        latency_split: split_measured.summary(),
        partition_acked,
        rate_search,
        backlog,
        app_batch,
    })
}
