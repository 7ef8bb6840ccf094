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

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;
use rdkafka::Offset;
use serde::Serialize;

use crate::attribution::{SentSlots, SeqMarks};
use crate::audit::{reconcile, AuditResult, ConsumerAudit, SeqSet};
use crate::backlog::{BacklogJob, BacklogResult};
use crate::batcher::{AppBatcher, BatcherStats, Pending};
use crate::clientconf::ClientConf;
use crate::clientstats::{Cumulative, LatencySplit, SplitAcc};
use crate::hist::LatencyHist;
use crate::keys::{Key, KeyGen};
use crate::lagview::{self, AckCheckpoints, LagFigures, TopicSet};
use crate::limits;
use crate::payload::{Header, PayloadPool, FLAG_WARMUP, HEADER_BYTES};
use crate::procstat::{self, ProcReading, ProcSampler};
use crate::ratecontrol::{LoadCounters, RateControl, RateSearchResult, SearchJob};
use crate::scenario::{Partitioning, Scenario};

/// The run's single monotonic time base; header times are nanoseconds since `epoch`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    fn new() -> Self {
        Clock {
            epoch: Instant::now(),
        }
    }
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    fn instant_at(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }
}

/// Client errors grouped by kind, with counts: a kind is the message with every run of digits
/// masked (`#`), so one failure repeated against other brokers, ports, offsets or retry
/// counts is one entry (the first message seen is kept as its example). Delivery and send
/// failures have their own table, bounded apart from librdkafka's log and reconnect noise, so
/// the reason records failed is never pushed out by it.
#[derive(Debug, Default)]
pub struct ErrorLog {
    inner: Mutex<ErrorTables>,
}

#[derive(Debug, Default, Clone)]
struct ErrorTables {
    noise: BTreeMap<String, ErrorEntry>,
    delivery: BTreeMap<String, ErrorEntry>,
    overflow: u64,
}

#[derive(Debug, Clone)]
struct ErrorEntry {
    count: u64,
    example: String,
    first: Instant,
    last: Instant,
}

/// One error kind in the report.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorKind {
    pub kind: String,
    pub count: u64,
    /// "delivery" (a record failed: delivery report or send()) or "client" (logs, connections).
    pub class: &'static str,
    /// The first message of this kind, as the client said it.
    pub example: String,
    /// Seconds since load start (negative: before the load started).
    pub first_at_s: f64,
    pub last_at_s: f64,
}

/// The kind of an error message: librdkafka's thread tag (`[thrd:...]`), its retry
/// annotations (`(after 0ms in state CONNECT, 3 identical error(s) suppressed)`) and broker
/// names (`host:port/bootstrap`) dropped, and digit runs masked.
pub fn error_kind(msg: &str) -> String {
    let mut m = msg.to_string();
    for open in ["[thrd:", " (after "] {
        while let Some(a) = m.find(open) {
            // To the bracket that closes this one (nested ones, as in `error(s)`, included).
            let mut depth = 0i32;
            let end = m[a..].char_indices().find_map(|(i, c)| {
                match c {
                    '(' | '[' => depth += 1,
                    ')' | ']' => depth -= 1,
                    _ => {}
                }
                (depth == 0 && i > 1).then_some(a + i + 1)
            });
            let Some(mut end) = end else { break };
            // The tag's own separator goes with it.
            if m[end..].starts_with(": ") {
                end += 2;
            }
            m.replace_range(a..end, "");
        }
    }
    let m = m.replace("/bootstrap", "/#");
    let msg = m.as_str();
    let mut out = String::with_capacity(msg.len());
    let mut in_digits = false;
    for c in msg.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

impl ErrorLog {
    pub fn note(&self, what: String) {
        let now = Instant::now();
        let delivery = what.starts_with("delivery:") || what.starts_with("send:");
        let kind = error_kind(&what);
        let mut g = self.inner.lock();
        let g = &mut *g;
        let (table, cap) = if delivery {
            (&mut g.delivery, limits::MAX_DISTINCT_DELIVERY_ERRORS)
        } else {
            (&mut g.noise, limits::MAX_DISTINCT_ERRORS)
        };
        if let Some(e) = table.get_mut(&kind) {
            e.count += 1;
            e.last = now;
        } else if table.len() < cap {
            table.insert(
                kind,
                ErrorEntry {
                    count: 1,
                    example: what,
                    first: now,
                    last: now,
                },
            );
        } else {
            g.overflow += 1;
        }
    }

    /// Kind -> count so far, both tables, with the errors beyond them under `OTHER_ERRORS`
    /// (the sampler's per-interval counts are differences of these).
    pub fn counts(&self) -> BTreeMap<String, u64> {
        let g = self.inner.lock();
        let mut m: BTreeMap<String, u64> = g
            .delivery
            .iter()
            .chain(g.noise.iter())
            .map(|(k, e)| (k.clone(), e.count))
            .collect();
        if g.overflow > 0 {
            m.insert(OTHER_ERRORS.to_string(), g.overflow);
        }
        m
    }

    /// Kind -> count (both tables), the kinds most frequent first with their times relative
    /// to `origin`, and the errors not listed.
    pub fn snapshot(&self, origin: Instant) -> (BTreeMap<String, u64>, Vec<ErrorKind>, u64) {
        let g = self.inner.lock().clone();
        let rel = |t: Instant| {
            if t >= origin {
                (t - origin).as_secs_f64()
            } else {
                -(origin - t).as_secs_f64()
            }
        };
        let mut kinds: Vec<ErrorKind> = g
            .delivery
            .iter()
            .map(|e| ("delivery", e))
            .chain(g.noise.iter().map(|e| ("client", e)))
            .map(|(class, (k, e))| ErrorKind {
                kind: k.clone(),
                count: e.count,
                class,
                example: e.example.clone(),
                first_at_s: rel(e.first),
                last_at_s: rel(e.last),
            })
            .collect();
        kinds.sort_by(|a, b| {
            (b.class == "delivery", b.count).cmp(&(a.class == "delivery", a.count))
        });
        let map = kinds.iter().map(|k| (k.kind.clone(), k.count)).collect();
        (map, kinds, g.overflow)
    }
}

/// The per-interval error series' key for every kind not among the run's most frequent
/// (`limits::ERROR_KINDS_IN_SERIES`), and for errors beyond the kind tables.
pub const OTHER_ERRORS: &str = "other";

/// This interval's errors by kind: what `now` counts beyond `prev` (both `ErrorLog::counts`),
/// the kinds with none left out.
fn error_deltas(
    prev: &BTreeMap<String, u64>,
    now: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    now.iter()
        .map(|(k, &n)| (k, n.saturating_sub(prev.get(k).copied().unwrap_or(0))))
        .filter(|&(_, d)| d > 0)
        .map(|(k, d)| (k.clone(), d))
        .collect()
}

/// Folds each interval's errors by kind into the run's `top` most frequent kinds (by their
/// total over the intervals; ties by name) plus `OTHER_ERRORS` for the rest, so the series,
/// the CSV and the chart stay a few lines wide however noisy the run.
pub fn fold_error_kinds(intervals: &mut [IntervalSample], top: usize) {
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    for i in intervals.iter() {
        for (k, n) in &i.errors_by_kind {
            if k != OTHER_ERRORS {
                *totals.entry(k.as_str()).or_default() += n;
            }
        }
    }
    let mut ranked: Vec<(&str, u64)> = totals.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let kept: std::collections::BTreeSet<String> = ranked
        .iter()
        .take(top)
        .map(|(k, _)| k.to_string())
        .collect();
    for i in intervals.iter_mut() {
        let mut folded = BTreeMap::new();
        for (k, n) in std::mem::take(&mut i.errors_by_kind) {
            let key = if kept.contains(&k) {
                k
            } else {
                OTHER_ERRORS.to_string()
            };
            *folded.entry(key).or_default() += n;
        }
        i.errors_by_kind = folded;
    }
}

/// Producer-side counters and histograms (one interval, or the measured totals).
#[derive(Debug, Clone, Default)]
pub struct ProduceSide {
    pub produced: u64,
    pub produced_bytes: u64,
    pub acked: u64,
    pub acked_bytes: u64,
    pub ack_errors: u64,
    pub send_errors: u64,
    pub queue_full_retries: u64,
    /// Delivery report time minus the actual send() call.
    pub ack: LatencyHist,
    /// Delivery report time minus the intended send time.
    pub ack_intended: LatencyHist,
    /// Actual send() call minus intended send time.
    pub send_delay: LatencyHist,
    /// Transactional mode (`txn`): transactions committed, aborted as drawn, whose commit
    /// failed and was aborted, and ended by an error that stopped the producer.
    pub txn_committed: u64,
    pub txn_aborted: u64,
    pub txn_commit_failed: u64,
    pub txn_errors: u64,
    /// Records sent in transactions drawn to abort (never expected by the audit).
    pub txn_aborted_records: u64,
    /// `commit_transaction` after the flush (the EndTxn round trip), `abort_transaction`, and
    /// the flush before either.
    pub txn_commit: LatencyHist,
    pub txn_abort: LatencyHist,
    pub txn_flush: LatencyHist,
}

impl ProduceSide {
    fn merge(&mut self, o: &ProduceSide) {
        self.produced += o.produced;
        self.produced_bytes += o.produced_bytes;
        self.acked += o.acked;
        self.acked_bytes += o.acked_bytes;
        self.ack_errors += o.ack_errors;
        self.send_errors += o.send_errors;
        self.queue_full_retries += o.queue_full_retries;
        self.ack.merge(&o.ack);
        self.ack_intended.merge(&o.ack_intended);
        self.send_delay.merge(&o.send_delay);
        self.txn_committed += o.txn_committed;
        self.txn_aborted += o.txn_aborted;
        self.txn_commit_failed += o.txn_commit_failed;
        self.txn_errors += o.txn_errors;
        self.txn_aborted_records += o.txn_aborted_records;
        self.txn_commit.merge(&o.txn_commit);
        self.txn_abort.merge(&o.txn_abort);
        self.txn_flush.merge(&o.txn_flush);
    }

    /// Messages the consumers must receive: those not sent in a transaction drawn to abort.
    pub fn expected(&self) -> u64 {
        self.produced.saturating_sub(self.txn_aborted_records)
    }

    /// Counts one end of a transaction.
    fn note_txn_end(&mut self, r: &crate::txn::EndReport) {
        use crate::txn::Ended;
        self.txn_flush.record_ns(r.flush_ns);
        match r.ended {
            Ended::Committed => {
                self.txn_committed += 1;
                self.txn_commit.record_ns(r.end_ns);
            }
            Ended::Aborted => {
                self.txn_aborted += 1;
                self.txn_abort.record_ns(r.end_ns);
            }
            Ended::CommitFailed => self.txn_commit_failed += 1,
        }
    }

    /// Zeroes everything in place; interval histograms are reused, not reallocated each second.
    fn reset(&mut self) {
        self.produced = 0;
        self.produced_bytes = 0;
        self.acked = 0;
        self.acked_bytes = 0;
        self.ack_errors = 0;
        self.send_errors = 0;
        self.queue_full_retries = 0;
        self.ack.reset();
        self.ack_intended.reset();
        self.send_delay.reset();
        self.txn_committed = 0;
        self.txn_aborted = 0;
        self.txn_commit_failed = 0;
        self.txn_errors = 0;
        self.txn_aborted_records = 0;
        self.txn_commit.reset();
        self.txn_abort.reset();
        self.txn_flush.reset();
    }
}

/// Consumer-side counters and histograms.
#[derive(Debug, Clone, Default)]
pub struct ConsumeSide {
    pub received: u64,
    pub received_bytes: u64,
    pub duplicates: u64,
    /// Consume time minus the actual send() call.
    pub e2e: LatencyHist,
    /// Consume time minus the intended send time.
    pub e2e_intended: LatencyHist,
    /// txmeta payloads: entries parsed, records that failed to parse, entries whose key hash
    /// another partition owns (see `txmeta`).
    pub entries: u64,
    pub bad_records: u64,
    pub misrouted_entries: u64,
    /// Records of transactions the producer aborted that a consumer received anyway: under
    /// read_committed, a broker bug (never part of the audit).
    pub txn_aborted_delivered: u64,
}

impl ConsumeSide {
    fn merge(&mut self, o: &ConsumeSide) {
        self.entries += o.entries;
        self.bad_records += o.bad_records;
        self.misrouted_entries += o.misrouted_entries;
        self.txn_aborted_delivered += o.txn_aborted_delivered;
        self.received += o.received;
        self.received_bytes += o.received_bytes;
        self.duplicates += o.duplicates;
        self.e2e.merge(&o.e2e);
        self.e2e_intended.merge(&o.e2e_intended);
    }

    fn reset(&mut self) {
        self.entries = 0;
        self.bad_records = 0;
        self.misrouted_entries = 0;
        self.txn_aborted_delivered = 0;
        self.received = 0;
        self.received_bytes = 0;
        self.duplicates = 0;
        self.e2e.reset();
        self.e2e_intended.reset();
    }
}

/// State one producer shares with its delivery-report thread and the sampler.
#[derive(Debug, Default)]
struct ProducerState {
    window: ProduceSide,
    measured: ProduceSide,
    warmup_produced: u64,
    warmup_acked: u64,
    acked_set: SeqSet,
    /// librdkafka statistics since the sampler last looked.
    split: SplitAcc,
    split_last: Cumulative,
    /// Emits whose whole window lies in the measured window (after warmup, before load end):
    /// a client's first windows cover its connection setup and belong to the warmup.
    split_measured: SplitAcc,
    /// Measured messages acknowledged per partition (index = partition), from delivery reports.
    partition_acked: Vec<u64>,
    /// The application batcher's flush counts (None when it is off).
    app_batch: Option<BatcherStats>,
    /// Delivery reports by the second their record was sent in (see `attribution`), and where
    /// the sequence numbers fall in time.
    by_sent: SentSlots,
    seq_marks: SeqMarks,
}

#[derive(Debug)]
struct ProducerCtx {
    clock: Clock,
    sched: Schedule,
    run_tag: u32,
    topic: String,
    state: Arc<Mutex<ProducerState>>,
    errors: Arc<ErrorLog>,
    counters: Arc<LoadCounters>,
    topics: Arc<TopicSet>,
    checkpoints: Arc<AckCheckpoints>,
    avail: Arc<crate::availability::Shared>,
}

impl ClientContext for ProducerCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, msg: &str) {
        log_to_errors(&self.errors, level, fac, msg);
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.errors.note(format!("producer: {error}: {reason}"));
    }
    fn stats(&self, statistics: Statistics) {
        let now = self.clock.now_ns();
        let window_start = now.saturating_sub(limits::CLIENT_STATS_INTERVAL.as_nanos() as u64);
        let measured = window_start >= self.sched.warmup_end_ns && now <= self.sched.load_end_ns;
        let mut s = self.state.lock();
        let st = &mut *s;
        let before = st.split_last;
        st.split
            .add_emit(&statistics, &self.topic, &mut st.split_last);
        if measured {
            let mut last = before;
            st.split_measured
                .add_emit(&statistics, &self.topic, &mut last);
        }
    }
}

impl ProducerContext for ProducerCtx {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let now = self.clock.now_ns();
        let (msg, err) = match result {
            Ok(m) => (m, None),
            Err((e, m)) => (m, Some(e)),
        };
        let Some(h) = msg
            .payload()
            .and_then(Header::read)
            .filter(|h| h.run_tag == self.run_tag)
        else {
            return;
        };
        let bytes = msg.payload_len() as u64;
        let sent_since_load = h.sent_ns.saturating_sub(self.sched.load_start_ns);
        let mut s = self.state.lock();
        if let Some(e) = err {
            s.by_sent.failed(sent_since_load);
            s.window.ack_errors += 1;
            if !h.is_warmup() {
                s.measured.ack_errors += 1;
            }
            drop(s);
            self.errors.note(format!("delivery: {e}"));
            return;
        }
        self.counters.acked.fetch_add(1, Ordering::Relaxed);
        if let Some(f) = self.topics.flat(msg.topic(), msg.partition()) {
            self.checkpoints.note(f, msg.offset(), h.sent_ns);
            self.avail.acks.note(f, now);
        }
        let ack = now.saturating_sub(h.sent_ns);
        let ack_intended = now.saturating_sub(h.intended_ns);
        s.by_sent.acked(sent_since_load, ack);
        let w = &mut s.window;
        w.acked += 1;
        w.acked_bytes += bytes;
        w.ack.record_ns(ack);
        w.ack_intended.record_ns(ack_intended);
        if h.is_warmup() {
            s.warmup_acked += 1;
        } else {
            let m = &mut s.measured;
            m.acked += 1;
            m.acked_bytes += bytes;
            m.ack.record_ns(ack);
            m.ack_intended.record_ns(ack_intended);
            // A record of a transaction drawn to abort is acknowledged (it is in the log) but
            // must never be delivered: the audit does not expect it.
            if !h.is_txn_aborted() {
                s.acked_set.insert(h.seq);
            }
            if let Ok(p) = usize::try_from(msg.partition()) {
                if p < limits::MAX_PARTITIONS as usize {
                    if s.partition_acked.len() <= p {
                        s.partition_acked.resize(p + 1, 0);
                    }
                    s.partition_acked[p] += 1;
                }
            }
        }
    }
}

/// State one consumer thread shares with the sampler.
#[derive(Debug, Default)]
struct ConsumerState {
    window: ConsumeSide,
    measured: ConsumeSide,
    warmup_received: u64,
    /// Messages that are not this run's (no bench header, or another run's tag).
    foreign: u64,
    audit: ConsumerAudit,
    /// Distinct measured messages received, per topic (index into the run's `TopicSet`).
    topic_received: Vec<u64>,
    /// Duplicates by the second their record was sent in.
    by_sent: SentSlots,
}

#[derive(Debug)]
struct ConsumerCtx {
    errors: Arc<ErrorLog>,
    who: &'static str,
}

impl ClientContext for ConsumerCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, msg: &str) {
        log_to_errors(&self.errors, level, fac, msg);
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.errors.note(format!("{}: {error}: {reason}", self.who));
    }
}

impl ConsumerContext for ConsumerCtx {}

/// librdkafka's own log lines: warnings and worse go to the report's error list; the rest
/// (only logged with `-X debug=...`, see `base_config`) is written to stderr with a UTC
/// timestamp, to line up with a broker's log.
fn log_to_errors(errors: &ErrorLog, level: RDKafkaLogLevel, fac: &str, msg: &str) {
    if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
        errors.note(format!("librdkafka {fac}: {msg}"));
    } else {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        eprintln!(
            "{}.{:03} librdkafka {fac}: {msg}",
            crate::report::utc_string(now.as_secs_f64()).trim_end_matches('Z'),
            now.subsec_millis()
        );
    }
}

/// One 1-second sample of the time series.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IntervalSample {
    /// Seconds since the load started, at the end of this interval.
    pub elapsed_s: f64,
    /// Actual length of this interval.
    pub interval_s: f64,
    /// "warmup", "measure" or "drain", by the interval's midpoint.
    pub phase: &'static str,
    pub produced_msg_s: f64,
    pub acked_msg_s: f64,
    pub received_msg_s: f64,
    pub produced_mib_s: f64,
    pub received_mib_s: f64,
    /// Delivery failures reported in this interval (by completion time).
    pub ack_errors: u64,
    pub send_errors: u64,
    pub queue_full_retries: u64,
    /// By send time (see `attribution`): records sent in this interval that were acked, that
    /// failed (whenever the report came), and their ack p99. Filled in at the end of the run.
    pub sent_acked: Option<u64>,
    pub sent_failed: Option<u64>,
    pub sent_ack_p99_ms: Option<f64>,
    /// By send time: acknowledged records no consumer received (with acks=1 or 0 these are
    /// the audit's `lost_unsynced`, else its `lost_acked`), and records received more than
    /// once (see `attribution`).
    pub sent_lost_acked: Option<u64>,
    pub sent_duplicates: Option<u64>,
    /// By completion time: acks and ack latencies reported in this interval.
    pub ack_p50_ms: Option<f64>,
    pub ack_p99_ms: Option<f64>,
    pub ack_intended_p99_ms: Option<f64>,
    pub send_delay_p99_ms: Option<f64>,
    pub e2e_p50_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    pub e2e_intended_p99_ms: Option<f64>,
    /// Client-view lag: sum over partitions of high watermark - consumed position.
    pub lag_total: Option<i64>,
    pub lag_max_partition: Option<i64>,
    /// Per-partition lag for the first `limits::MAX_PARTITIONS_IN_SERIES` partitions.
    pub lag_per_partition: Vec<i64>,
    /// Broker-view lag: sum over partitions of high watermark - the group's committed offset
    /// (missing ⇒ 0), and the largest partition's; null when either query failed.
    pub broker_lag_total: Option<i64>,
    pub broker_lag_max_partition: Option<i64>,
    /// Time lag: age of the oldest unconsumed message over all partitions (0 when caught up);
    /// null when unknown (a query failed, or no delivery report carried an offset: acks=0).
    pub time_lag_ms: Option<f64>,
    /// Broker CPU, RSS and disk, summed over every sampled broker process.
    pub broker_cpu_pct: Option<f64>,
    pub broker_rss_mib: Option<f64>,
    pub broker_disk_mib: Option<f64>,
    /// Each broker's own figures when more than one is sampled (empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub brokers: Vec<procstat::BrokerTick>,
    pub client_cpu_pct: Option<f64>,
    /// Producer latency decomposition from librdkafka statistics (null: no emit this interval).
    pub split: Option<LatencySplit>,
    /// Client errors noted in this interval (by the time the client reported them), by kind:
    /// the run's `limits::ERROR_KINDS_IN_SERIES` most frequent kinds and `"other"`; kinds
    /// with none in this interval are left out.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// This interval's histograms (V2-encoded; not in the JSON): the OMB export merges them
    /// into 10-second windows.
    #[serde(skip)]
    pub hdr: crate::hist::IntervalHdr,
}

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

/// Options of a run that are not part of the scenario (they do not change what is sent).
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub bootstrap: String,
    /// Broker processes to sample, and their data directories paired by position.
    pub broker_pids: Vec<u32>,
    pub broker_data_dirs: Vec<std::path::PathBuf>,
    pub delete_topic: bool,
    /// False for the null target (`sluice serve --storage null` keeps nothing): consumers
    /// receive nothing, so the run does not wait for them to drain.
    pub delivers: bool,
    pub progress: bool,
    /// Prometheus endpoints to scrape each interval (`--broker-metrics`, or the embedded
    /// broker's own admin listener).
    pub broker_metrics: Vec<String>,
}

/// The settings every client starts from; the user's (`cc`) are applied last by the callers
/// (`finish`), so they win over these defaults.
fn base_config(bootstrap: &str, client_id: &str, cc: &ClientConf) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        // Latency benchmark on loopback: no Nagle (the Java client disables it too).
        .set("socket.nagle.disable", "true")
        // `-X debug=...`: librdkafka's debug lines reach `log_to_errors`, which prints them.
        .set_log_level(if cc.debug() {
            RDKafkaLogLevel::Debug
        } else {
            RDKafkaLogLevel::Warning
        });
    c
}

/// The user's settings over the bench's (see `clientconf`: keys the bench owns are refused
/// before the run, so these only add or replace defaults).
fn finish(mut c: ClientConfig, cc: &ClientConf) -> ClientConfig {
    cc.apply(&mut c);
    c
}

fn producer_config(s: &Scenario, bootstrap: &str, i: u32) -> ClientConfig {
    let cc = &s.client_config;
    let mut c = base_config(bootstrap, &format!("sluice-bench-producer-{i}"), cc);
    c.set("acks", s.acks.config_value())
        .set("compression.codec", s.compression.config_value())
        .set("linger.ms", s.linger_ms.to_string())
        .set("batch.size", s.batch_bytes.to_string())
        .set("enable.idempotence", s.idempotence.to_string())
        .set(
            "max.in.flight.requests.per.connection",
            s.max_in_flight.to_string(),
        )
        .set(
            "queue.buffering.max.messages",
            limits::PRODUCER_QUEUE_MAX_MESSAGES.to_string(),
        )
        .set(
            "queue.buffering.max.kbytes",
            limits::PRODUCER_QUEUE_MAX_KBYTES.to_string(),
        )
        .set(
            "statistics.interval.ms",
            limits::CLIENT_STATS_INTERVAL.as_millis().to_string(),
        );
    if let Some(id) = &s.transactional_id {
        // Producer i's own id, so producers never fence each other; a transaction may live
        // up to its interval, with room for the flush and EndTxn.
        let timeout_ms = (s.txn_interval_ms as u64 + limits::TXN_CALL_TIMEOUT.as_millis() as u64)
            .max(limits::TXN_TIMEOUT_MS as u64);
        c.set("transactional.id", format!("{id}-{i}"))
            .set("enable.idempotence", "true")
            .set("transaction.timeout.ms", timeout_ms.to_string());
    }
    if s.message_bytes + 512 > 1_000_000 {
        c.set("message.max.bytes", (s.message_bytes + 4096).to_string());
    }
    finish(c, cc)
}

fn consumer_config(bootstrap: &str, client_id: &str, cc: &ClientConf) -> ClientConfig {
    let mut c = base_config(bootstrap, client_id, cc);
    // assign() only: no group membership, no commits, no offset store.
    c.set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set(
            "queued.max.messages.kbytes",
            limits::CONSUMER_QUEUE_MAX_KBYTES.to_string(),
        );
    finish(c, cc)
}

/// A bench consumer: like `consumer_config`, but it stores each message's offset as poll()
/// hands it over and auto-commits the stored offsets every `commit_interval_ms` to `group`
/// (assign() only, so the commits are standalone ones: generation -1, no member id).
fn committing_consumer_config(
    bootstrap: &str,
    client_id: &str,
    group: &str,
    commit_interval_ms: u32,
    read_committed: bool,
    cc: &ClientConf,
) -> ClientConfig {
    let mut c = consumer_config(bootstrap, client_id, cc);
    if read_committed {
        // Transactional mode: records become visible at their commit (e2e includes it), and
        // aborted ones never.
        c.set("isolation.level", "read_committed");
    }
    c.set("group.id", group)
        .set("enable.auto.commit", "true")
        .set("enable.auto.offset.store", "true")
        .set(
            "auto.commit.interval.ms",
            commit_interval_ms.max(1).to_string(),
        );
    finish(c, cc)
}

/// The per-run group id the consumers commit to.
fn group_id(run_tag: u32) -> String {
    format!("sluice-bench-{run_tag:08x}")
}

type Probe = BaseConsumer<ConsumerCtx>;

fn make_probe(bootstrap: &str, cc: &ClientConf, errors: &Arc<ErrorLog>) -> Result<Probe, String> {
    consumer_config(bootstrap, "sluice-bench-probe", cc)
        .create_with_context(ConsumerCtx {
            errors: errors.clone(),
            who: "probe",
        })
        .map_err(|e| format!("cannot create a client: {e}"))
}

/// A Metadata round trip; fails clearly when the address is not a working Kafka broker. An
/// authentication or TLS failure (a wrong password, an untrusted certificate) fails within
/// about a second with the client's own reason, instead of waiting out the timeout.
pub fn check_metadata(bootstrap: &str, cc: &ClientConf) -> Result<usize, String> {
    let errors = Arc::new(ErrorLog::default());
    let probe = make_probe(bootstrap, cc, &errors)?;
    let deadline = Instant::now() + limits::METADATA_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let step = left.min(limits::METADATA_CHECK_STEP);
        let err = match probe.fetch_metadata(None, step) {
            Ok(m) => return Ok(m.brokers().len()),
            Err(e) => e,
        };
        // Serves the error callback (authentication failures arrive there).
        let _ = probe.poll(Duration::ZERO);
        let (_, kinds, _) = errors.snapshot(Instant::now());
        if let Some(k) = kinds.iter().find(|k| is_auth_failure(&k.example)) {
            return Err(format!(
                "{bootstrap}: the client could not authenticate or complete the TLS handshake: {}",
                k.example
            ));
        }
        if left <= step {
            let seen = kinds.first().map(|k| format!(" (client: {})", k.example));
            return Err(format!(
                "{bootstrap} accepted a connection but did not answer Metadata within {:?}: {err}{}",
                limits::METADATA_TIMEOUT,
                seen.unwrap_or_default()
            ));
        }
    }
}

/// A client error that retrying will not cure: SASL authentication or the TLS handshake.
fn is_auth_failure(msg: &str) -> bool {
    [
        "Authentication",
        "SASL authentication error",
        "SSL handshake failed",
        "certificate verify failed",
    ]
    .iter()
    .any(|m| msg.contains(m))
}

fn admin_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start a runtime for admin requests: {e}"))
}

fn admin_config(bootstrap: &str, cc: &ClientConf) -> ClientConfig {
    finish(base_config(bootstrap, "sluice-bench-admin", cc), cc)
}

fn create_topics(bootstrap: &str, topics: &[String], s: &Scenario) -> Result<(), String> {
    let partitions = s.partitions;
    let admin: AdminClient<DefaultClientContext> = admin_config(bootstrap, &s.client_config)
        .create()
        .map_err(|e| format!("cannot create an admin client: {e}"))?;
    let timeout = limits::admin_timeout(topics.len() * partitions.max(1) as usize);
    let opts = AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    // -1 (the default) lets the broker apply its default.replication.factor (KIP-464).
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| {
            let n = NewTopic::new(
                t,
                partitions,
                TopicReplication::Fixed(s.replication_factor.into()),
            );
            s.topic_config
                .iter()
                .fold(n, |n, (k, v)| n.set(k.as_str(), v.as_str()))
        })
        .collect();
    let topic = topics.first().map(String::as_str).unwrap_or("");
    let rt = admin_runtime()?;
    let res = rt.block_on(async {
        tokio::time::timeout(timeout * 2, admin.create_topics(new.iter(), &opts)).await
    });
    match res {
        Err(_) => Err(format!("CreateTopics for {topic} timed out")),
        Ok(Err(e)) => Err(format!("CreateTopics for {topic} failed: {e}")),
        Ok(Ok(results)) => {
            for r in results {
                if let Err((name, code)) = r {
                    return Err(format!("CreateTopics for {name} failed: {code}"));
                }
            }
            Ok(())
        }
    }
}

fn delete_topics(bootstrap: &str, topics: &[String], partitions: i32, cc: &ClientConf) -> bool {
    let timeout = limits::admin_timeout(topics.len() * partitions.max(1) as usize);
    let Ok(admin) = admin_config(bootstrap, cc).create::<AdminClient<DefaultClientContext>>()
    else {
        return false;
    };
    let opts = AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    let Ok(rt) = admin_runtime() else {
        return false;
    };
    let res = rt.block_on(async {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        tokio::time::timeout(timeout * 2, admin.delete_topics(&names, &opts)).await
    });
    matches!(res, Ok(Ok(ref v)) if v.iter().all(|r| r.is_ok()))
}

/// Deletes the bench's consumer group (its committed offsets), as its topics are deleted: a
/// run leaves no `sluice-bench-*` group behind. True when the broker confirmed it.
fn delete_group(bootstrap: &str, group: &str, cc: &ClientConf) -> bool {
    let Ok(admin) = admin_config(bootstrap, cc).create::<AdminClient<DefaultClientContext>>()
    else {
        return false;
    };
    let timeout = limits::admin_timeout(1);
    let opts = AdminOptions::new().request_timeout(Some(timeout));
    let Ok(rt) = admin_runtime() else {
        return false;
    };
    let res = rt.block_on(async {
        tokio::time::timeout(timeout * 2, admin.delete_groups(&[group], &opts)).await
    });
    match res {
        Ok(Ok(v)) => v.iter().all(|r| match r {
            Ok(_) => true,
            // Nothing was committed (e.g. a run with no consumed message): nothing to delete.
            Err((_, code)) => *code == rdkafka::types::RDKafkaErrorCode::GroupIdNotFound,
        }),
        _ => false,
    }
}

/// Waits until Metadata shows `partitions` partitions of every topic, each with a leader.
fn wait_topics_ready(probe: &Probe, topics: &[String], partitions: i32) -> Result<(), String> {
    let deadline = Instant::now() + limits::TOPIC_READY_TIMEOUT;
    let mut last = String::from("no answer");
    let mut pending: Vec<&String> = topics.iter().collect();
    while Instant::now() < deadline {
        // One topic: ask for it alone; several: one Metadata request for all topics.
        let which = (pending.len() == 1).then(|| pending[0].as_str());
        match probe.fetch_metadata(which, Duration::from_secs(2)) {
            Ok(md) => {
                pending.retain(|topic| {
                    let Some(t) = md.topics().iter().find(|t| t.name() == topic.as_str()) else {
                        last = format!("{topic} not visible");
                        return true;
                    };
                    let ready = t.error().is_none()
                        && t.partitions().len() == partitions as usize
                        && t.partitions()
                            .iter()
                            .all(|p| p.leader() >= 0 && p.error().is_none());
                    if !ready {
                        last = format!(
                            "{topic}: {} of {partitions} partitions visible",
                            t.partitions().len()
                        );
                    }
                    !ready
                });
                if pending.is_empty() {
                    return Ok(());
                }
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "topic {} not ready within {:?} ({last})",
        pending.first().map(|t| t.as_str()).unwrap_or(""),
        limits::TOPIC_READY_TIMEOUT
    ))
}

/// Schedule boundaries shared by all threads, in clock nanoseconds.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    load_start_ns: u64,
    warmup_end_ns: u64,
    load_end_ns: u64,
}

impl Schedule {
    fn phase_at(&self, ns: u64) -> &'static str {
        if ns < self.warmup_end_ns {
            "warmup"
        } else if ns < self.load_end_ns {
            "measure"
        } else {
            "drain"
        }
    }
}

struct ProducerJob {
    index: u32,
    scenario: Scenario,
    bootstrap: String,
    topic: String,
    topics: Arc<TopicSet>,
    checkpoints: Arc<AckCheckpoints>,
    avail: Arc<crate::availability::Shared>,
    pool: Arc<PayloadPool>,
    clock: Clock,
    sched: Schedule,
    run_tag: u32,
    state: Arc<Mutex<ProducerState>>,
    errors: Arc<ErrorLog>,
    stop: Arc<AtomicBool>,
    stopped_ns: Arc<AtomicU64>,
    bp: Option<Arc<BpState>>,
    /// The max-rate search's shared target (None: the scenario's fixed rate shape).
    rate: Option<Arc<RateControl>>,
    counters: Arc<LoadCounters>,
}

/// Shared state of the backpressure controller.
#[derive(Debug, Default)]
pub struct BpState {
    paused: AtomicBool,
    events: AtomicU64,
    paused_ns: AtomicU64,
}

/// Returns whether the final flush timed out.
fn producer_thread(job: ProducerJob) -> bool {
    let ctx = ProducerCtx {
        clock: job.clock,
        sched: job.sched,
        run_tag: job.run_tag,
        topic: job.topic.clone(),
        state: job.state.clone(),
        errors: job.errors.clone(),
        counters: job.counters.clone(),
        topics: job.topics.clone(),
        checkpoints: job.checkpoints.clone(),
        avail: job.avail.clone(),
    };
    let producer: ThreadedProducer<ProducerCtx> =
        match producer_config(&job.scenario, &job.bootstrap, job.index).create_with_context(ctx) {
            Ok(p) => p,
            Err(e) => {
                job.errors
                    .note(format!("cannot create producer {}: {e}", job.index));
                return false;
            }
        };
    let s = &job.scenario;
    let txn = match s.transactional_id {
        Some(_) => {
            let t = crate::txn::TxnDriver::new(s, job.index);
            if let Err(crate::txn::Fatal(e)) = t.init(&producer) {
                job.errors.note(e);
                job.state.lock().measured.txn_errors += 1;
                return false;
            }
            Some(t)
        }
        None => None,
    };
    let search = job.rate.clone();
    let throttled = s.rate_msg_s > 0 || search.is_some();
    // The max-rate search's rate in force and its epoch (see `ratecontrol`).
    let (mut epoch, mut search_rate) = match &search {
        Some(rc) => {
            let (e, r, _) = rc.current();
            (e, r)
        }
        None => (0, 0.0),
    };
    // Producer i's slots interleave with the others': the aggregate schedule is evenly spaced
    // at the current target rate (bursts change the rate, never the spacing rule). `next` is
    // the next intended send time in clock nanoseconds, kept as f64 so no rounding accumulates.
    let first_rate = match search {
        Some(_) => search_rate,
        None => s.rate_at(Duration::ZERO).max(1) as f64,
    };
    let mut next = job.sched.load_start_ns as f64 + 1e9 * job.index as f64 / first_rate;
    let partitions = s.partitions.max(1) as u64;
    let mut keys = KeyGen::new(&s.shaping, s.seed, job.index);
    let mut batcher = AppBatcher::new(&s.shaping);
    let mut sender = Sender {
        producer: &producer,
        job: &job,
        seq: 0,
        key_buf: Vec::new(),
        txn,
    };
    let mut buf = Vec::with_capacity(s.message_bytes);
    // Messages made so far (the sequence number is given at send time, so it stays dense).
    let mut made: u64 = 0;
    'load: loop {
        if job.stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(b) = batcher.as_mut().filter(|b| b.due(job.clock.now_ns())) {
            if sender.flush(b, false) {
                break;
            }
        }
        if sender.end_txn_if_due() {
            break;
        }
        if let Some(bp) = job
            .bp
            .as_ref()
            .filter(|bp| bp.paused.load(Ordering::Relaxed))
        {
            let pause_start = job.clock.now_ns();
            while bp.paused.load(Ordering::Relaxed) {
                if job.stop.load(Ordering::Relaxed) || job.clock.now_ns() >= job.sched.load_end_ns {
                    break 'load;
                }
                std::thread::sleep(s.bp_poll_ms / 2);
            }
            // A pause is a deliberate slowdown: the schedule resumes where it stood, shifted
            // by the pause, instead of sending the skipped slots in a burst.
            next += job.clock.now_ns().saturating_sub(pause_start) as f64;
        }
        // A new search rate re-anchors the schedule at the change; due slots of the old one
        // that were not sent yet are dropped and counted.
        if let Some(rc) = search.as_ref().filter(|rc| rc.epoch() != epoch) {
            let (e, rate, anchor_ns) = rc.current();
            let anchor = anchor_ns as f64;
            if next < anchor {
                let spacing = 1e9 * s.producers as f64 / search_rate;
                rc.note_skipped(((anchor - next) / spacing).ceil() as u64);
            }
            epoch = e;
            search_rate = rate;
            next = anchor + 1e9 * job.index as f64 / rate;
        }
        let intended = if throttled {
            next as u64
        } else {
            job.clock.now_ns()
        };
        if intended >= job.sched.load_end_ns {
            break;
        }
        if throttled {
            let at = job.clock.instant_at(intended);
            loop {
                if let Some(b) = batcher.as_mut().filter(|b| b.due(job.clock.now_ns())) {
                    if sender.flush(b, false) {
                        break 'load;
                    }
                }
                if sender.end_txn_if_due() {
                    break 'load;
                }
                let now = Instant::now();
                if now >= at {
                    break;
                }
                if job.stop.load(Ordering::Relaxed) {
                    break 'load;
                }
                if job
                    .bp
                    .as_ref()
                    .is_some_and(|bp| bp.paused.load(Ordering::Relaxed))
                    || search.as_ref().is_some_and(|rc| rc.epoch() != epoch)
                {
                    continue 'load;
                }
                let mut wait = (at - now).min(limits::PRODUCER_MAX_SLEEP);
                if let Some(d) = batcher.as_ref().and_then(|b| b.deadline_ns()) {
                    wait = wait.min(job.clock.instant_at(d).saturating_duration_since(now));
                }
                if let Some(d) = sender.txn.as_ref().and_then(|t| t.deadline_ns()) {
                    wait = wait.min(job.clock.instant_at(d).saturating_duration_since(now));
                }
                std::thread::sleep(wait);
            }
            let rate = match search {
                Some(_) => search_rate,
                None => s
                    .rate_at(Duration::from_nanos(
                        intended.saturating_sub(job.sched.load_start_ns),
                    ))
                    .max(1) as f64,
            };
            next += 1e9 * s.producers as f64 / rate;
        }
        let warmup = intended < job.sched.warmup_end_ns;
        let header = Header {
            run_tag: job.run_tag,
            producer: job.index,
            flags: if warmup { FLAG_WARMUP } else { 0 },
            seq: made,
            intended_ns: intended,
            sent_ns: 0,
        };
        let key = keys.next_key();
        // Keyed messages go through librdkafka's partitioner, like an application's.
        let partition = (s.partitioning == Partitioning::RoundRobin && key.is_none())
            .then(|| ((job.index as u64 + made) % partitions) as i32);
        made += 1;
        match batcher.as_mut() {
            Some(b) => {
                let mut payload = Vec::with_capacity(s.message_bytes);
                job.pool.fill(&mut payload, &header);
                let p = Pending {
                    payload,
                    header,
                    key,
                    partition,
                };
                if b.push(p, job.clock.now_ns()) && sender.flush(b, true) {
                    break;
                }
            }
            None => {
                job.pool.fill(&mut buf, &header);
                if sender.send(&mut buf, header, key, partition) == SendOutcome::Stopped {
                    break;
                }
            }
        }
    }
    // End of load: the application batcher's remainder goes out when its timer fires, as it
    // would in the application (at once after Ctrl-C).
    if let Some(b) = batcher.as_mut() {
        while let Some(d) = b.deadline_ns() {
            let now = job.clock.now_ns();
            if job.stop.load(Ordering::Relaxed) || now >= d {
                break;
            }
            std::thread::sleep(Duration::from_nanos(d - now).min(limits::PRODUCER_MAX_SLEEP));
        }
        sender.flush(b, false);
        job.state.lock().app_batch = Some(b.stats);
    }
    // The last transaction ends as drawn, so its records are decided before the drain.
    sender.end_txn();
    job.stopped_ns
        .fetch_max(job.clock.now_ns(), Ordering::Relaxed);
    let flush_timeout = if job.stop.load(Ordering::Relaxed) {
        limits::INTERRUPTED_FLUSH_TIMEOUT
    } else {
        limits::FLUSH_TIMEOUT
    };
    producer.flush(flush_timeout).is_err()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendOutcome {
    Accepted,
    /// Refused for a reason other than a full queue: counted as a send error, slot skipped.
    Skipped,
    /// The run was stopped while the client queue was full, or a transaction call failed
    /// fatally (this producer stops; see `txn`).
    Stopped,
}

/// Hands messages to one producer client and counts them.
struct Sender<'a> {
    producer: &'a ThreadedProducer<ProducerCtx>,
    job: &'a ProducerJob,
    /// The next sequence number: dense over the messages the client accepted.
    seq: u64,
    key_buf: Vec<u8>,
    /// Transactional mode: the transaction in progress (None: plain producer).
    txn: Option<crate::txn::TxnDriver>,
}

impl Sender<'_> {
    /// Sends one message, retrying while the client queue is full. The header gets its
    /// sequence number and actual send time here; its intended time stays the schedule's.
    fn send(
        &mut self,
        buf: &mut [u8],
        mut header: Header,
        key: Option<Key>,
        partition: Option<i32>,
    ) -> SendOutcome {
        let job = self.job;
        let mut aborting = false;
        if let Some(t) = self.txn.as_mut() {
            match t.ensure_open(self.producer, job.clock.now_ns()) {
                Ok(a) => aborting = a,
                Err(crate::txn::Fatal(e)) => {
                    job.errors.note(e);
                    job.state.lock().measured.txn_errors += 1;
                    return SendOutcome::Stopped;
                }
            }
            if aborting {
                header.flags |= crate::payload::FLAG_TXN_ABORTED;
            }
        }
        header.seq = self.seq;
        header.write(buf);
        if let Some(k) = key {
            k.write(&mut self.key_buf);
        }
        let warmup = header.is_warmup();
        let intended = header.intended_ns;
        loop {
            let now = job.clock.now_ns();
            Header::set_sent_ns(buf, now);
            // Topic (and, for explicit round-robin, partition) from the sequence number, so
            // several topics share the load evenly (see lagview::destination).
            let (topic_index, rr_partition) = lagview::destination(
                job.index,
                self.seq,
                job.scenario.topics,
                job.scenario.partitions,
            );
            if partition.is_some() && job.scenario.payload == crate::payload::PayloadClass::Txmeta {
                // `packed`: every entry's key hash into this partition's range.
                crate::txmeta::route(
                    &mut buf[HEADER_BYTES..],
                    rr_partition,
                    job.scenario.partitions,
                );
            }
            let mut record =
                BaseRecord::<[u8], [u8]>::to(&job.topics.names[topic_index]).payload(&buf[..]);
            if key.is_some() {
                record = record.key(&self.key_buf[..]);
            }
            // `partition` marks explicit round-robin; its value is taken from the dense sequence
            // number above, so several topics each get every partition.
            if partition.is_some() {
                record = record.partition(rr_partition);
            }
            match self.producer.send(record) {
                Ok(()) => {
                    job.counters.produced.fetch_add(1, Ordering::Relaxed);
                    let delay = now.saturating_sub(intended);
                    let bytes = buf.len() as u64;
                    let mut st = job.state.lock();
                    st.seq_marks
                        .note(self.seq, now.saturating_sub(job.sched.load_start_ns));
                    st.window.produced += 1;
                    st.window.produced_bytes += bytes;
                    st.window.send_delay.record_ns(delay);
                    if aborting {
                        st.window.txn_aborted_records += 1;
                    }
                    if warmup {
                        st.warmup_produced += 1;
                    } else {
                        st.measured.produced += 1;
                        st.measured.produced_bytes += bytes;
                        st.measured.send_delay.record_ns(delay);
                        if aborting {
                            st.measured.txn_aborted_records += 1;
                        }
                    }
                    drop(st);
                    self.seq += 1;
                    if self.txn.as_mut().is_some_and(|t| t.sent(warmup)) && self.end_txn() {
                        return SendOutcome::Stopped;
                    }
                    return SendOutcome::Accepted;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    {
                        let mut st = job.state.lock();
                        st.window.queue_full_retries += 1;
                        if !warmup {
                            st.measured.queue_full_retries += 1;
                        }
                    }
                    if job.stop.load(Ordering::Relaxed) {
                        return SendOutcome::Stopped;
                    }
                    std::thread::sleep(limits::QUEUE_FULL_BACKOFF);
                }
                Err((e, _)) => {
                    let mut st = job.state.lock();
                    st.window.send_errors += 1;
                    if !warmup {
                        st.measured.send_errors += 1;
                    }
                    drop(st);
                    job.errors.note(format!("send: {e}"));
                    return SendOutcome::Skipped;
                }
            }
        }
    }

    /// Ends the open transaction if its interval has passed; true when the producer must stop.
    fn end_txn_if_due(&mut self) -> bool {
        let now = self.job.clock.now_ns();
        match self.txn.as_ref().and_then(|t| t.deadline_ns()) {
            Some(d) if now >= d => self.end_txn(),
            _ => false,
        }
    }

    /// Ends the open transaction (if any) and counts it; true when a fatal error means this
    /// producer must stop.
    fn end_txn(&mut self) -> bool {
        let job = self.job;
        let Some(t) = self.txn.as_mut().filter(|t| t.is_open()) else {
            return false;
        };
        let r = t.end(self.producer);
        match r {
            Ok(r) => {
                let mut st = job.state.lock();
                st.window.note_txn_end(&r);
                // Measured when its last record is (a late producer sends warmup slots
                // after the warmup's end, so the clock alone would count them).
                if !r.warmup {
                    st.measured.note_txn_end(&r);
                }
                drop(st);
                if let Some(n) = r.note {
                    job.errors.note(n);
                }
                false
            }
            Err(crate::txn::Fatal(e)) => {
                let mut st = job.state.lock();
                st.window.txn_errors += 1;
                st.measured.txn_errors += 1;
                drop(st);
                job.errors.note(e);
                true
            }
        }
    }

    /// Sends everything the application batcher holds; true when the run was stopped.
    fn flush(&mut self, b: &mut AppBatcher, by_size: bool) -> bool {
        for mut p in b.take(by_size) {
            if self.send(&mut p.payload, p.header, p.key, p.partition) == SendOutcome::Stopped {
                return true;
            }
        }
        false
    }
}

struct ConsumerJob {
    bootstrap: String,
    topics: Arc<TopicSet>,
    /// Flat topic-partition indexes (see `TopicSet`) this consumer is assigned.
    assigned: Vec<usize>,
    clock: Clock,
    run_tag: u32,
    state: Arc<Mutex<ConsumerState>>,
    positions: Arc<Vec<AtomicI64>>,
    unique_measured: Arc<AtomicU64>,
    errors: Arc<ErrorLog>,
    stop: Arc<AtomicBool>,
    index: u32,
    scenario: Scenario,
    load_start_ns: u64,
    /// Backlog mode: consume nothing while set.
    hold: Option<Arc<AtomicBool>>,
}

fn consumer_thread(job: ConsumerJob) {
    let ctx = ConsumerCtx {
        errors: job.errors.clone(),
        who: "consumer",
    };
    let consumer: BaseConsumer<ConsumerCtx> = match committing_consumer_config(
        &job.bootstrap,
        &format!("sluice-bench-consumer-{}", job.index),
        &group_id(job.run_tag),
        job.scenario.commit_interval_ms,
        job.scenario.transactional_id.is_some(),
        &job.scenario.client_config,
    )
    .create_with_context(ctx)
    {
        Ok(c) => c,
        Err(e) => {
            job.errors
                .note(format!("cannot create consumer {}: {e}", job.index));
            return;
        }
    };
    let tpl = job
        .topics
        .tpl(job.assigned.iter().copied(), Offset::Beginning);
    if let Err(e) = consumer.assign(&tpl) {
        job.errors
            .note(format!("consumer {} assign failed: {e}", job.index));
        return;
    }
    if let Some(hold) = &job.hold {
        crate::backlog::hold_consumer(&consumer, hold, &job.stop, &job.errors);
    }
    let mut rng =
        crate::payload::SplitMix64::new(job.scenario.seed ^ (0xC0A5_u64 << 32) ^ job.index as u64);
    while !job.stop.load(Ordering::Relaxed) {
        let msg = match consumer.poll(limits::CONSUMER_POLL) {
            None => continue,
            Some(Err(e)) => {
                job.errors.note(format!("consume: {e}"));
                continue;
            }
            Some(Ok(m)) => m,
        };
        let now = job.clock.now_ns();
        let flat = job.topics.flat(msg.topic(), msg.partition());
        if let Some(pos) = flat.and_then(|f| job.positions.get(f)) {
            pos.fetch_max(msg.offset() + 1, Ordering::Relaxed);
        }
        // The audit judges order per topic-partition: the flat index names one.
        let partition = flat.map(|f| f as i32).unwrap_or(-1);
        let bytes = msg.payload_len() as u64;
        let header = msg
            .payload()
            .and_then(Header::read)
            .filter(|h| h.run_tag == job.run_tag);
        // `packed`: parse every record like the application would (outside the lock).
        let parsed = (header.is_some()
            && job.scenario.payload == crate::payload::PayloadClass::Txmeta)
            .then(|| {
                let body = msg
                    .payload()
                    .and_then(|b| b.get(HEADER_BYTES..))
                    .unwrap_or(&[]);
                crate::txmeta::parse(body, partition, job.scenario.partitions)
            });
        let mut s = job.state.lock();
        let Some(h) = header else {
            s.foreign += 1;
            continue;
        };
        if h.is_txn_aborted() {
            s.window.txn_aborted_delivered += 1;
            s.measured.txn_aborted_delivered += 1;
            continue;
        }
        let e2e = now.saturating_sub(h.sent_ns);
        let e2e_intended = now.saturating_sub(h.intended_ns);
        s.window.received += 1;
        s.window.received_bytes += bytes;
        if h.is_warmup() {
            s.warmup_received += 1;
            s.window.e2e.record_ns(e2e);
            s.window.e2e_intended.record_ns(e2e_intended);
            drop(s);
            consumer_work(&job, now, &mut rng);
            continue;
        }
        if s.audit.note(partition, h.producer, h.seq) {
            s.by_sent
                .duplicate(h.sent_ns.saturating_sub(job.load_start_ns));
            s.window.duplicates += 1;
            s.measured.duplicates += 1;
            continue;
        }
        job.unique_measured.fetch_add(1, Ordering::Relaxed);
        if let Some(n) = flat
            .map(|f| f / job.topics.partitions as usize)
            .and_then(|t| s.topic_received.get_mut(t))
        {
            *n += 1;
        }
        s.window.e2e.record_ns(e2e);
        s.window.e2e_intended.record_ns(e2e_intended);
        let m = &mut s.measured;
        m.received += 1;
        m.received_bytes += bytes;
        m.e2e.record_ns(e2e);
        m.e2e_intended.record_ns(e2e_intended);
        match parsed {
            Some(Ok(p)) => {
                m.entries += p.entries;
                m.misrouted_entries += p.misrouted;
            }
            Some(Err(_)) => m.bad_records += 1,
            None => {}
        }
        drop(s);
        consumer_work(&job, now, &mut rng);
    }
    // The final commit, synchronously, so the last broker-view sample sees every offset this
    // consumer handed over. "No offset stored" just means nothing new since the last commit.
    // librdkafka's synchronous commit has no timeout (with the coordinator dead it waits for
    // good), so it runs on a helper thread that owns the client, and is awaited at most
    // `limits::FINAL_COMMIT_TIMEOUT`; past that the run goes on and the helper ends with the
    // commit (or the process).
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let errors = job.errors.clone();
    let index = job.index;
    let helper = std::thread::Builder::new()
        .name(format!("bench-commit-{index}"))
        .spawn(move || {
            match consumer.commit_consumer_state(CommitMode::Sync) {
                Ok(()) => {}
                Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
                Err(e) => errors.note(format!("consumer {index} final commit: {e}")),
            }
            let _ = done_tx.send(());
        });
    match helper {
        Ok(_) => {
            if done_rx.recv_timeout(limits::FINAL_COMMIT_TIMEOUT).is_err() {
                job.errors.note(format!(
                    "consumer {index} final commit: no answer within {:?} (the broker view's final lag is not exact)",
                    limits::FINAL_COMMIT_TIMEOUT
                ));
            }
        }
        Err(e) => job.errors.note(format!(
            "consumer {index} final commit: cannot start a thread: {e}"
        )),
    }
}

/// The processing model: a consumer thread handles one message at a time, then "works" for the
/// configured delay plus jitter (after its lock is released, so the sampler never waits on it).
fn consumer_work(job: &ConsumerJob, now_ns: u64, rng: &mut crate::payload::SplitMix64) {
    let since_start = Duration::from_nanos(now_ns.saturating_sub(job.load_start_ns));
    let mut work = job.scenario.consumer_delay_at(since_start);
    let jitter_ns = job.scenario.consumer_jitter_us.as_nanos() as u64;
    if jitter_ns > 0 {
        work += Duration::from_nanos(rng.below(jitter_ns));
    }
    if !work.is_zero() {
        std::thread::sleep(work);
    }
}

/// Client-view lag per topic-partition (high watermark minus the consumed position); None when
/// the watermark query fails.
fn client_lag(probe: &Probe, topics: &TopicSet, positions: &[AtomicI64]) -> Option<LagFigures> {
    let high = lagview::high_watermarks(probe, topics)?;
    Some(lagview::lag_against(&high, lagview::positions(positions)))
}

struct BpJob {
    probe: Probe,
    topics: Arc<TopicSet>,
    positions: Arc<Vec<AtomicI64>>,
    state: Arc<BpState>,
    max_lag: u64,
    resume_lag: u64,
    poll: Duration,
    clock: Clock,
    stop: Arc<AtomicBool>,
}

/// The backpressure controller: SSP's credit rule with hysteresis. A tick whose lag cannot be
/// read changes nothing.
fn backpressure_thread(job: BpJob) {
    let mut pause_start = 0u64;
    while !job.stop.load(Ordering::Relaxed) {
        if let Some(lag) = client_lag(&job.probe, &job.topics, &job.positions) {
            let lag = lag.total.max(0) as u64;
            let paused = job.state.paused.load(Ordering::Relaxed);
            if !paused && lag > job.max_lag {
                pause_start = job.clock.now_ns();
                job.state.events.fetch_add(1, Ordering::Relaxed);
                job.state.paused.store(true, Ordering::Relaxed);
            } else if paused && lag < job.resume_lag {
                job.state.paused.store(false, Ordering::Relaxed);
                job.state.paused_ns.fetch_add(
                    job.clock.now_ns().saturating_sub(pause_start),
                    Ordering::Relaxed,
                );
            }
        }
        std::thread::sleep(job.poll);
    }
    if job.state.paused.swap(false, Ordering::Relaxed) {
        job.state.paused_ns.fetch_add(
            job.clock.now_ns().saturating_sub(pause_start),
            Ordering::Relaxed,
        );
    }
}

/// What the sampler thread hands back.
#[derive(Debug, Default)]
struct SamplerOut {
    intervals: Vec<IntervalSample>,
    brokers: procstat::BrokerTrack,
    /// High watermarks at the last successful sample, per flat topic-partition.
    last_high: Option<Vec<i64>>,
    availability: crate::availability::AvailabilityReport,
}

struct SamplerJob {
    clock: Clock,
    sched: Schedule,
    topics: Arc<TopicSet>,
    probe: Probe,
    /// Carries the bench group id, never joins nor commits: reads the committed offsets.
    watcher: Option<Probe>,
    checkpoints: Arc<AckCheckpoints>,
    avail: Arc<crate::availability::Shared>,
    producers: Vec<Arc<Mutex<ProducerState>>>,
    consumers: Vec<Arc<Mutex<ConsumerState>>>,
    positions: Arc<Vec<AtomicI64>>,
    brokers: Vec<ProcSampler>,
    errors: Arc<ErrorLog>,
    stop: Arc<AtomicBool>,
    progress: bool,
    measure_s: f64,
}

const SAMPLE_NS: u64 = limits::SAMPLE_INTERVAL.as_nanos() as u64;

fn sampler_thread(job: SamplerJob) -> SamplerOut {
    let mut out = SamplerOut {
        brokers: procstat::BrokerTrack::start(job.brokers),
        ..SamplerOut::default()
    };
    let mut client_prev = procstat::client_usage().map(|u| u.cpu_user_s + u.cpu_system_s);
    let mut prev_ns = job.sched.load_start_ns;
    let mut tick: u64 = 0;
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut acc_p = ProduceSide::default();
    let mut acc_c = ConsumeSide::default();
    let mut acc_split = SplitAcc::default();
    let mut avail = crate::availability::Tracker::new(job.topics.len(), job.sched.load_start_ns);
    let mut errors_prev = job.errors.counts();
    let mut lag = match LagAsk::start(
        job.probe,
        job.watcher,
        job.topics.clone(),
        job.positions.clone(),
        job.checkpoints.clone(),
        job.clock,
    ) {
        Ok(l) => l,
        Err(_) => LagAsk::none(),
    };
    loop {
        tick += 1;
        let due =
            job.clock.instant_at(job.sched.load_start_ns) + limits::SAMPLE_INTERVAL * tick as u32;
        let mut last = false;
        loop {
            if job.stop.load(Ordering::Relaxed) {
                last = true;
                break;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
        }
        for p in &job.producers {
            let mut s = p.lock();
            acc_p.merge(&s.window);
            s.window.reset();
            acc_split.merge(&s.split);
            s.split = SplitAcc::default();
        }
        for c in &job.consumers {
            let mut s = c.lock();
            acc_c.merge(&s.window);
            s.window.reset();
        }
        // Counted at the tick, with the windows above: not after the lag reading, which may
        // wait for a dead broker while its connection errors pile up.
        let errors_now = job.errors.counts();
        let errors_by_kind = error_deltas(&errors_prev, &errors_now);
        errors_prev = errors_now;
        let now_ns = job.clock.now_ns();
        let dt = (now_ns.saturating_sub(prev_ns) as f64 / 1e9).max(1e-9);

        let mid = prev_ns + (now_ns.saturating_sub(prev_ns)) / 2;
        prev_ns = now_ns;
        avail.tick(now_ns, &job.avail.acks, &job.avail.leaderless);

        // The lag views come from the lag thread, asked now and awaited briefly: a broker
        // that cannot answer (dead, failing over) leaves this interval's lag unknown instead
        // of stretching the interval (see `LagAsk`).
        let obs = lag.ask(last);
        let (client, broker, time_lag_ms) = match obs {
            Some(o) => {
                if o.high.is_some() {
                    out.last_high = o.high;
                }
                (o.client, o.broker, o.time_lag_ms)
            }
            None => (None, None, None),
        };
        let (lag_total, lag_max, per_partition) = match client {
            Some(LagFigures {
                total,
                max,
                mut per_partition,
            }) => {
                per_partition.truncate(limits::MAX_PARTITIONS_IN_SERIES);
                (Some(total), max, per_partition)
            }
            None => (None, 0, Vec::new()),
        };

        let broker_ticks = out.brokers.tick(
            dt,
            now_ns.saturating_sub(job.sched.load_start_ns) as f64 / 1e9,
        );
        let (broker_cpu_pct, broker_rss_mib, broker_disk_mib) = procstat::sum_ticks(&broker_ticks);
        let client_now = procstat::client_usage().map(|u| u.cpu_user_s + u.cpu_system_s);
        let client_cpu_pct = match (client_prev, client_now) {
            (Some(a), Some(b)) => Some((b - a) / dt * 100.0),
            _ => None,
        };
        client_prev = client_now;

        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let sample = IntervalSample {
            elapsed_s: now_ns.saturating_sub(job.sched.load_start_ns) as f64 / 1e9,
            interval_s: dt,
            phase: job.sched.phase_at(mid),
            produced_msg_s: acc_p.produced as f64 / dt,
            acked_msg_s: acc_p.acked as f64 / dt,
            received_msg_s: acc_c.received as f64 / dt,
            produced_mib_s: mib(acc_p.produced_bytes) / dt,
            received_mib_s: mib(acc_c.received_bytes) / dt,
            ack_errors: acc_p.ack_errors,
            send_errors: acc_p.send_errors,
            queue_full_retries: acc_p.queue_full_retries,
            sent_acked: None,
            sent_failed: None,
            sent_ack_p99_ms: None,
            sent_lost_acked: None,
            sent_duplicates: None,
            ack_p50_ms: acc_p.ack.percentile_ms(50.0),
            ack_p99_ms: acc_p.ack.percentile_ms(99.0),
            ack_intended_p99_ms: acc_p.ack_intended.percentile_ms(99.0),
            send_delay_p99_ms: acc_p.send_delay.percentile_ms(99.0),
            e2e_p50_ms: acc_c.e2e.percentile_ms(50.0),
            e2e_p99_ms: acc_c.e2e.percentile_ms(99.0),
            e2e_intended_p99_ms: acc_c.e2e_intended.percentile_ms(99.0),
            lag_total,
            lag_max_partition: lag_total.map(|_| lag_max),
            lag_per_partition: per_partition,
            broker_lag_total: broker.as_ref().map(|b| b.total),
            broker_lag_max_partition: broker.as_ref().map(|b| b.max),
            time_lag_ms,
            broker_cpu_pct,
            broker_rss_mib,
            broker_disk_mib,
            brokers: if broker_ticks.len() > 1 {
                broker_ticks
            } else {
                Vec::new()
            },
            client_cpu_pct,
            split: acc_split.summary(),
            errors_by_kind,
            hdr: crate::hist::IntervalHdr::of(&acc_p.ack, &acc_p.send_delay, &acc_c.e2e),
        };
        acc_split = SplitAcc::default();
        if job.progress {
            print_progress(&sample, job.measure_s, tick, tty);
        }
        out.intervals.push(sample);
        acc_p.reset();
        acc_c.reset();
        // A sample that took longer than a tick (lag queries waiting on a dead broker) makes
        // the next interval longer; the missed ticks are skipped, never sampled back to back,
        // which would give near-empty intervals that draw as spikes and drops.
        let behind = job.clock.now_ns().saturating_sub(job.sched.load_start_ns) / SAMPLE_NS;
        tick = tick.max(behind);
        if last {
            if job.progress && tty {
                eprintln!();
            }
            out.availability = avail.finish(|f| {
                let (t, p) = job.topics.split(f);
                (t.to_string(), p)
            });
            return out;
        }
    }
}

// `%` rather than `is_multiple_of`, which is newer than the workspace's MSRV.
#[allow(clippy::manual_is_multiple_of)]
fn print_progress(s: &IntervalSample, measure_s: f64, tick: u64, tty: bool) {
    let ms = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
    let line = format!(
        "[{:>7} {:>6.1}s] produced {:>8.0}/s  received {:>8.0}/s  ack p99 {:>7} ms  e2e p99 {:>7} ms  lag {:>7}  of {:.0}s",
        s.phase,
        s.elapsed_s,
        s.produced_msg_s,
        s.received_msg_s,
        ms(s.ack_p99_ms),
        ms(s.e2e_p99_ms),
        s.lag_total.map(|l| l.to_string()).unwrap_or_else(|| "?".into()),
        measure_s,
    );
    if tty {
        eprint!("\r\x1b[2K{line}");
    } else if tick % limits::PROGRESS_EVERY_N_SAMPLES_NON_TTY == 0 {
        eprintln!("{line}");
    }
}

fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, String> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|e| format!("cannot start thread {name}: {e}"))
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
                crate::backlog::backlog_thread(job)
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
                crate::ratecontrol::search_thread(job)
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
    crate::attribution::fill(&mut intervals, &by_sent);
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

/// The threads that watch the run without taking part in it: the scenario's faults (one
/// thread each), the topology sampler and the broker metrics scraper. None of them blocks the
/// load or the 1-second sampler.
struct Observers {
    stop: Arc<AtomicBool>,
    faults: Vec<JoinHandle<crate::faults::FaultRecord>>,
    topology: JoinHandle<TopologyDuring>,
    metrics: Option<JoinHandle<crate::brokermetrics::BrokerMetrics>>,
}

/// What the observers saw.
struct Observed {
    faults: Vec<crate::faults::FaultRecord>,
    topology_changes: Vec<crate::topology::TimedChange>,
    topology_samples: u64,
    topology_failed: u64,
    broker_metrics: Option<crate::brokermetrics::BrokerMetrics>,
}

#[derive(Default)]
struct TopologyDuring {
    changes: Vec<crate::topology::TimedChange>,
    samples: u64,
    failed: u64,
}

impl Observers {
    fn start(
        s: &Scenario,
        opts: &RunOptions,
        topic_set: &Arc<TopicSet>,
        clock: Clock,
        sched: Schedule,
        topology_start: Option<crate::topology::Topology>,
        avail: Arc<crate::availability::Shared>,
    ) -> Result<Observers, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let load_start = clock.instant_at(sched.load_start_ns);
        let measure_start = clock.instant_at(sched.warmup_end_ns);
        let env = crate::faults::FaultEnv {
            bootstrap: opts.bootstrap.clone(),
            broker_pids: opts.broker_pids.clone(),
        };
        let mut faults = Vec::new();
        for (i, text) in s.fault_cmd.iter().enumerate() {
            let spec = crate::faults::parse(text)?;
            let (env, stop, progress) = (env.clone(), stop.clone(), opts.progress);
            faults.push(spawn(format!("bench-fault-{i}"), move || {
                let rec = crate::faults::run_one(&spec, &env, load_start, measure_start, &stop);
                if progress && rec.started_at_s.is_some() {
                    // On its own line, so it also marks the progress output.
                    eprintln!(
                        "\nsluice bench: fault {} at {:.1} s: {} -> exit {}",
                        i + 1,
                        rec.started_at_s.unwrap_or(0.0),
                        rec.command,
                        rec.exit_code
                            .map(|c| c.to_string())
                            .or_else(|| rec.error.clone())
                            .unwrap_or_else(|| "-".into())
                    );
                }
                rec
            })?);
        }
        let topology = {
            let (bootstrap, topics, stop) =
                (opts.bootstrap.clone(), topic_set.clone(), stop.clone());
            let cc = s.client_config.clone();
            spawn("bench-topology".into(), move || {
                let source = crate::topology::Source::new(&bootstrap, &cc);
                topology_thread(&source, &topics, topology_start, load_start, &stop, &avail)
            })?
        };
        let metrics = if opts.broker_metrics.is_empty() {
            None
        } else {
            let (urls, stop) = (opts.broker_metrics.clone(), stop.clone());
            Some(spawn("bench-broker-metrics".into(), move || {
                let mut sc = crate::brokermetrics::Scraper::new(urls);
                // The scrape at load start is the baseline of the first interval.
                let mut tick = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    sc.tick(load_start.elapsed().as_secs_f64());
                    tick += 1;
                    let due = load_start + limits::SAMPLE_INTERVAL * tick;
                    sleep_until(due, &stop);
                    let now = Instant::now();
                    if now > due + limits::SAMPLE_INTERVAL {
                        tick =
                            (now.duration_since(load_start).as_nanos() / SAMPLE_NS as u128) as u32;
                    }
                }
                sc.tick(load_start.elapsed().as_secs_f64());
                sc.finish()
            })?)
        };
        Ok(Observers {
            stop,
            faults,
            topology,
            metrics,
        })
    }

    /// Stops the observers (faults not started yet are skipped; running ones are awaited,
    /// each bounded by `limits::FAULT_CMD_TIMEOUT`).
    fn finish(self) -> Observed {
        self.stop.store(true, Ordering::Relaxed);
        let faults = self
            .faults
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        let t = self.topology.join().unwrap_or_default();
        Observed {
            faults,
            topology_changes: t.changes,
            topology_samples: t.samples,
            topology_failed: t.failed,
            broker_metrics: self.metrics.and_then(|h| h.join().ok()),
        }
    }
}

/// Sleeps until `due` in short steps, returning early when `stop` is set.
fn sleep_until(due: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= due || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}

/// Takes a topology snapshot every `limits::TOPOLOGY_SAMPLE_INTERVAL` and records the changes
/// from the previous successful one, with the time they were first seen.
fn topology_thread(
    source: &crate::topology::Source,
    topic_set: &TopicSet,
    mut prev: Option<crate::topology::Topology>,
    load_start: Instant,
    stop: &AtomicBool,
    avail: &crate::availability::Shared,
) -> TopologyDuring {
    let topics = &topic_set.names;
    let mut out = TopologyDuring::default();
    let mut next = Instant::now() + limits::TOPOLOGY_SAMPLE_INTERVAL;
    loop {
        sleep_until(next, stop);
        if stop.load(Ordering::Relaxed) {
            return out;
        }
        next = Instant::now() + limits::TOPOLOGY_SAMPLE_INTERVAL;
        out.samples += 1;
        match source.snapshot(topics) {
            Ok(t) => {
                // Partitions without a leader (or answered with an error) in this sample.
                avail.leaderless.set(
                    topic_set.len(),
                    t.partitions
                        .iter()
                        .filter(|p| p.leader < 0 || p.error_code != 0)
                        .filter_map(|p| topic_set.flat(&p.topic, p.partition)),
                );
                let at_s = load_start.elapsed().as_secs_f64();
                if let Some(p) = &prev {
                    for change in crate::topology::diff(p, &t) {
                        if out.changes.len() < limits::MAX_TOPOLOGY_CHANGES {
                            out.changes
                                .push(crate::topology::TimedChange { at_s, change });
                        }
                    }
                }
                prev = Some(t);
            }
            Err(_) => out.failed += 1,
        }
    }
}

/// One reading of the three lag views (see `sampler_thread`).
struct LagObs {
    high: Option<Vec<i64>>,
    client: Option<LagFigures>,
    broker: Option<LagFigures>,
    time_lag_ms: Option<f64>,
}

/// The lag thread: the sampler asks for a reading at each tick and waits at most
/// `limits::LAG_ANSWER_WAIT` (the last tick: `limits::LAG_FINAL_ANSWER_WAIT`); a reading that
/// comes later is dropped, never shown as a later interval's value. The queries themselves
/// (watermarks, committed offsets) have their own timeouts in `lagview`.
struct LagAsk {
    ask: Option<std::sync::mpsc::SyncSender<u64>>,
    answers: Option<std::sync::mpsc::Receiver<(u64, LagObs)>>,
    handle: Option<JoinHandle<()>>,
    asked: u64,
}

impl LagAsk {
    fn none() -> LagAsk {
        LagAsk {
            ask: None,
            answers: None,
            handle: None,
            asked: 0,
        }
    }

    fn start(
        probe: Probe,
        watcher: Option<Probe>,
        topics: Arc<TopicSet>,
        positions: Arc<Vec<AtomicI64>>,
        checkpoints: Arc<AckCheckpoints>,
        clock: Clock,
    ) -> Result<LagAsk, String> {
        let (ask_tx, ask_rx) = std::sync::mpsc::sync_channel::<u64>(1);
        let (ans_tx, ans_rx) = std::sync::mpsc::sync_channel::<(u64, LagObs)>(2);
        let handle = spawn("bench-lag".into(), move || {
            while let Ok(id) = ask_rx.recv() {
                // Committed offsets first and positions last: a committed offset is never
                // ahead of the position it was stored from, so per partition the broker view
                // is never below the client view.
                let committed = watcher
                    .as_ref()
                    .and_then(|w| lagview::committed_offsets(w, &topics));
                let high = lagview::high_watermarks(&probe, &topics);
                let pos: Vec<i64> = lagview::positions(&positions).collect();
                let client = high
                    .as_ref()
                    .map(|h| lagview::lag_against(h, pos.iter().copied()));
                let broker = high
                    .as_ref()
                    .zip(committed)
                    .map(|(h, c)| lagview::lag_against(h, c.into_iter()));
                let time_lag_ms = high
                    .as_ref()
                    .and_then(|h| checkpoints.max_age_ms(h, &pos, clock.now_ns()));
                let obs = LagObs {
                    high,
                    client,
                    broker,
                    time_lag_ms,
                };
                if ans_tx.try_send((id, obs)).is_err() {
                    // The sampler stopped listening (or is far behind): nothing to keep.
                }
            }
        })?;
        Ok(LagAsk {
            ask: Some(ask_tx),
            answers: Some(ans_rx),
            handle: Some(handle),
            asked: 0,
        })
    }

    /// Asks for a reading and waits for it; None when none came in time (or the lag thread
    /// is still busy with an earlier question).
    fn ask(&mut self, last: bool) -> Option<LagObs> {
        let (ask, answers) = (self.ask.as_ref()?, self.answers.as_ref()?);
        // Late answers to earlier questions are stale: drop them.
        while answers.try_recv().is_ok() {}
        self.asked += 1;
        let id = self.asked;
        let wait = if last {
            limits::LAG_FINAL_ANSWER_WAIT
        } else {
            limits::LAG_ANSWER_WAIT
        };
        let deadline = Instant::now() + wait;
        // A busy lag thread (still on an earlier question) gets until the deadline to free up.
        loop {
            match ask.try_send(id) {
                Ok(()) => break,
                Err(std::sync::mpsc::TrySendError::Full(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(_) => return None,
            }
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match answers.recv_timeout(left) {
                Ok((got, obs)) if got == id => return Some(obs),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }
}

impl Drop for LagAsk {
    fn drop(&mut self) {
        // Closing the question channel ends the thread after its current question; it is not
        // awaited (a question to a dead broker may take its queries' full timeouts).
        self.ask = None;
        self.answers = None;
        drop(self.handle.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_per_interval_are_count_differences_folded_into_the_top_kinds() {
        let log = ErrorLog::default();
        let c0 = log.counts();
        assert!(c0.is_empty());
        log.note("librdkafka FAIL: Connect to ipv4#127.0.0.1:1 failed: Connection refused".into());
        log.note("librdkafka FAIL: Connect to ipv4#127.0.0.1:2 failed: Connection refused".into());
        let c1 = log.counts();
        log.note("delivery: MessageTimedOut".into());
        log.note("librdkafka FAIL: Connect to ipv4#127.0.0.1:3 failed: Connection refused".into());
        let c2 = log.counts();
        let refused =
            error_kind("librdkafka FAIL: Connect to ipv4#127.0.0.1:1 failed: Connection refused");
        let d1 = error_deltas(&c0, &c1);
        assert_eq!(d1, BTreeMap::from([(refused.clone(), 2)]));
        let d2 = error_deltas(&c1, &c2);
        assert_eq!(d2.get(&refused), Some(&1));
        assert_eq!(d2.get("delivery: MessageTimedOut"), Some(&1));
        // No new error: an empty interval, not zeros.
        assert!(error_deltas(&c2, &c2).is_empty());

        // Three kinds over three intervals, top 2 kept: the least frequent goes to "other",
        // as do errors beyond the kind tables that came in as "other" already.
        let iv = |m: &[(&str, u64)]| IntervalSample {
            errors_by_kind: m.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            ..IntervalSample::default()
        };
        let mut v = vec![
            iv(&[("a", 5), ("c", 1)]),
            iv(&[("b", 3), (OTHER_ERRORS, 2)]),
            iv(&[]),
        ];
        fold_error_kinds(&mut v, 2);
        assert_eq!(
            v[0].errors_by_kind,
            BTreeMap::from([("a".into(), 5), (OTHER_ERRORS.into(), 1)])
        );
        assert_eq!(
            v[1].errors_by_kind,
            BTreeMap::from([("b".into(), 3), (OTHER_ERRORS.into(), 2)])
        );
        assert!(v[2].errors_by_kind.is_empty());
    }

    #[test]
    fn errors_are_grouped_by_kind_and_delivery_failures_keep_their_own_table() {
        let log = ErrorLog::default();
        let origin = Instant::now();
        // Reconnect noise: other brokers, retry counts, suppressed-duplicate notes.
        for (b, port) in [("1", 19092), ("2", 19094), ("bootstrap", 19096)] {
            for extra in ["", ", 3 identical error(s) suppressed"] {
                log.note(format!(
                    "librdkafka FAIL: [thrd:127.0.0.1:{port}/{b}]: 127.0.0.1:{port}/{b}: Connect to ipv4#127.0.0.1:{port} failed: Connection refused (after 0ms in state CONNECT{extra})"
                ));
            }
        }
        // More distinct noise than the noise table holds...
        for i in 0..(limits::MAX_DISTINCT_ERRORS * 2) {
            log.note(format!("librdkafka WARN: noise kind {}", "x".repeat(i)));
        }
        // ...cannot push out the real reason records failed.
        for p in 0..5 {
            log.note(format!("delivery: Message production error: MessageTimedOut (Local: Message timed out) partition {p}"));
        }
        let (map, kinds, overflow) = log.snapshot(origin);
        assert_eq!(kinds[0].class, "delivery");
        assert_eq!(kinds[0].count, 5);
        assert!(
            kinds[0].example.ends_with("partition 0"),
            "{}",
            kinds[0].example
        );
        let fail: Vec<&ErrorKind> = kinds
            .iter()
            .filter(|k| k.kind.contains("Connection refused"))
            .collect();
        assert_eq!(fail.len(), 1, "{fail:?}");
        assert_eq!(fail[0].count, 6);
        assert_eq!(
            fail[0].kind,
            "librdkafka FAIL: #.#.#.#:#/#: Connect to ipv###.#.#.#:# failed: Connection refused"
        );
        assert!(fail[0].first_at_s >= 0.0 && fail[0].last_at_s >= fail[0].first_at_s);
        assert_eq!(map.len(), kinds.len());
        assert_eq!(
            kinds.iter().filter(|k| k.class == "client").count(),
            limits::MAX_DISTINCT_ERRORS
        );
        assert_eq!(overflow, (limits::MAX_DISTINCT_ERRORS + 1) as u64);
    }
}
