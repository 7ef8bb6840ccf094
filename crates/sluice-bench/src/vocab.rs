//! The run's shared vocabulary: the clock and schedule every thread of a run keeps time by,
//! the error log they all write to, the counters each side fills (`ProduceSide`,
//! `ConsumeSide`), the one-second `IntervalSample`, the run's options and the thread
//! spawner. The engine's threads, its controllers, the exports and the report all speak it.
//!
//! Guarantees: this module imports nothing of the bench above its leaves (`limits`, `hist`,
//! `clientstats`, `procstat`), so any module may use it without closing an import cycle;
//! error tables are bounded (`limits::MAX_DISTINCT_ERRORS`,
//! `limits::MAX_DISTINCT_DELIVERY_ERRORS`), every kind beyond them counted under
//! `OTHER_ERRORS`.

use std::collections::BTreeMap;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::Serialize;

use crate::clientstats::LatencySplit;
use crate::hist::LatencyHist;
use crate::limits;
use crate::procstat;

/// The run's single monotonic time base; header times are nanoseconds since `epoch`.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    epoch: Instant,
}

impl Clock {
    pub(crate) fn new() -> Self {
        Clock {
            epoch: Instant::now(),
        }
    }
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    pub(crate) fn instant_at(&self, ns: u64) -> Instant {
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
pub(crate) fn error_deltas(
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
    pub(crate) fn merge(&mut self, o: &ProduceSide) {
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

    /// Zeroes everything in place; interval histograms are reused, not reallocated each second.
    pub(crate) fn reset(&mut self) {
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
    pub(crate) fn merge(&mut self, o: &ConsumeSide) {
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

    pub(crate) fn reset(&mut self) {
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

/// Schedule boundaries shared by all threads, in clock nanoseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    pub(crate) load_start_ns: u64,
    pub(crate) warmup_end_ns: u64,
    pub(crate) load_end_ns: u64,
}

impl Schedule {
    pub(crate) fn phase_at(&self, ns: u64) -> &'static str {
        if ns < self.warmup_end_ns {
            "warmup"
        } else if ns < self.load_end_ns {
            "measure"
        } else {
            "drain"
        }
    }
}

/// Starts a named thread of the run (the names are in docs/ARCHITECTURE.md).
pub(crate) fn spawn<T: Send + 'static>(
    name: String,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, String> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map_err(|e| format!("cannot start thread {name}: {e}"))
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
