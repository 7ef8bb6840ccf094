//! The report: the JSON document (schema in docs/bench-schema.md, additive only), the flat
//! metric map that gates read, and the human summary printed on stdout. Everything here is
//! derived from `RunData`; nothing is measured here.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::audit::AuditResult;
use crate::engine::RunData;
use crate::gate::{GateResult, LATENCY_KINDS};
use crate::hist::{LatencySummary, CDF_EDGES_MS};
use crate::limits;
use crate::procstat::ProcReading;
use crate::scenario::Scenario;
use crate::vocab::IntervalSample;

pub const SCHEMA: &str = "sluice-bench/1";

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub tool: Tool,
    pub started_at_unix_s: f64,
    pub started_at_utc: String,
    /// The sweep variant of this run (null outside sweeps).
    pub label: Option<String>,
    pub scenario: Scenario,
    pub target: TargetInfo,
    pub topic: String,
    pub run_tag: String,
    /// Every topic of the run (`--topics`); the first is `topic`.
    pub topics: Vec<String>,
    /// Per topic, in `topics` order.
    pub per_topic: Vec<TopicSummary>,
    pub window: Window,
    pub counts: Counts,
    pub audit: AuditResult,
    pub throughput: Throughput,
    pub latency: Latencies,
    /// Where producer time went, from librdkafka statistics (measure phase); null if none came.
    pub latency_split: Option<crate::clientstats::LatencySplit>,
    pub cdf_edges_ms: Vec<f64>,
    pub lag: LagSummary,
    pub consumer_model: ConsumerModel,
    pub backpressure: Option<Backpressure>,
    /// SSP's offline codec table for this scenario's payloads (see `compression`).
    pub compression_offline: crate::compression::CompressionTable,
    /// Summed over every sampled broker process; `per_broker` has each one.
    pub broker_process: Option<BrokerProcess>,
    pub client_process: ClientProcess,
    /// Brokers, controller, partitions' leaders, replicas and ISR at start and end.
    pub topology: crate::topology::TopologyReport,
    /// Partitions that were unavailable while the others were not (see `availability`).
    pub availability: crate::availability::AvailabilityReport,
    /// Whether the bench's topics and its consumer group were deleted after the run (null:
    /// kept, e.g. the embedded broker's or with --keep-topic).
    pub topics_deleted: Option<bool>,
    pub group_deleted: Option<bool>,
    /// Measured acknowledged messages per partition and the skew; null if none was acked.
    pub partition_balance: Option<crate::keys::PartitionBalance>,
    /// OMB max-rate search: trajectory and result; null unless `--rate search`.
    pub rate_search: Option<crate::engine::ratecontrol::RateSearchResult>,
    /// OMB backlog build and drain; null unless `--backlog`.
    pub backlog: Option<crate::engine::backlog::BacklogResult>,
    /// The application batcher's flushes; null when it is off.
    pub app_batcher: Option<AppBatcher>,
    /// Transactional mode (`--transactional-id`): transactions and their records; null
    /// otherwise. The EndTxn latencies are `latency.txn_commit` and `latency.txn_abort`.
    pub transactions: Option<TxnSummary>,
    pub intervals: Vec<IntervalSample>,
    /// The scenario's fault commands as they ran (start, end, exit code, output tail) and what
    /// each did to the load (time to recover, ack stall); empty without faults.
    pub faults: Vec<crate::faults::FaultRecord>,
    /// Scraped broker metrics (null without a metrics endpoint).
    pub broker_metrics: Option<crate::brokermetrics::BrokerMetrics>,
    /// Error kind (digits masked) -> count.
    pub errors: BTreeMap<String, u64>,
    /// The same kinds with an example, class and first/last time, delivery failures first.
    pub error_kinds: Vec<crate::vocab::ErrorKind>,
    pub errors_not_listed: u64,
    /// One line when records were lost (acknowledged ones, or delivery below 100 %); the
    /// process then exits 4 unless allowed (see `loss_line`).
    pub loss: Option<String>,
    /// One line when records were delivered more than once (`audit.duplicates`); the process
    /// then exits 4 unless allowed (see `duplicate_line`).
    pub duplicated: Option<String>,
    /// One line when records acknowledged with acks=1 or 0 were lost (`audit.lost_unsynced`):
    /// said, not judged (see `unsynced_line`).
    pub unsynced: Option<String>,
    pub warnings: Vec<String>,
    pub gates: Vec<GateResult>,
    pub environment: Environment,
    /// With --calibrate: the client's own ceiling for this scenario (null otherwise).
    pub client_ceiling: Option<crate::calibrate::ClientCeiling>,
    /// With --calibrate: whether the client or the broker set the pace (null otherwise).
    pub bottleneck: Option<crate::calibrate::Bottleneck>,
    /// txmeta payloads (`packed`): what the consumers parsed (null otherwise).
    pub txmeta: Option<TxmetaSummary>,
    /// In a comparison (more than one run): what settling the disk before this run took
    /// (null for a single run or with --no-settle).
    pub settle: Option<crate::settle::Settle>,
}

/// The consumers' parse of the measured txmeta records.
#[derive(Debug, Serialize)]
pub struct TxmetaSummary {
    pub entries_per_record: u32,
    /// Entries parsed out of the distinct measured records received.
    pub entries_received: u64,
    /// Records that did not parse (each counts none of its entries).
    pub bad_records: u64,
    /// Entries whose key hash belongs to another partition's range.
    pub misrouted_entries: u64,
    /// End to end per entry: a record's mean end-to-end latency shared by its entries (what
    /// packing saves each entry).
    pub ns_per_entry: Option<f64>,
    /// Measured window ÷ entries received: the inverse of the entry rate (with `--rate max`,
    /// teranode's ns/tx through a real broker).
    pub window_ns_per_entry: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
    pub git_sha: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetInfo {
    /// "embedded", "bootstrap" or "null" (`sluice serve --storage null`, the calibration).
    pub kind: &'static str,
    /// The target as given: "embedded" or the --bootstrap / --target host:port list.
    pub spec: String,
    pub bootstrap: String,
    /// The first of `broker_pids` / `broker_data_dirs`.
    pub broker_pid: Option<u32>,
    pub broker_data_dir: Option<String>,
    /// Every sampled broker process, and their data directories (paired by position).
    pub broker_pids: Vec<u32>,
    pub broker_data_dirs: Vec<String>,
    /// The short name in tables: the first bootstrap address and `+N` others.
    pub label: String,
}

#[derive(Debug, Serialize)]
pub struct TopicSummary {
    pub topic: String,
    /// Distinct measured-window messages consumed from this topic.
    pub received: u64,
    /// Sum of its partitions' high watermarks at the last lag sample (every message written,
    /// warmup included); null when that query failed.
    pub end_offset_sum: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct Window {
    pub warmup_s: f64,
    /// The scheduled window from the end of warmup to the end of load (shorter after Ctrl-C).
    pub measure_s: f64,
    /// Time the consumers were given after the producers stopped.
    pub drain_s: f64,
    /// Ctrl-C ended the run early; everything reflects what was measured until then.
    pub interrupted: bool,
    pub flush_timed_out: bool,
}

#[derive(Debug, Serialize)]
pub struct Counts {
    /// Measured-window messages (not warmup).
    pub produced: u64,
    pub acked: u64,
    pub ack_errors: u64,
    pub send_errors: u64,
    pub queue_full_retries: u64,
    pub received: u64,
    pub duplicates: u64,
    pub produced_bytes: u64,
    pub received_bytes: u64,
    pub warmup_produced: u64,
    pub warmup_acked: u64,
    pub warmup_received: u64,
    /// Messages on the topic that are not this run's.
    pub foreign: u64,
}

#[derive(Debug, Serialize)]
pub struct Throughput {
    /// Target aggregate rate; null when unthrottled.
    pub target_msg_s: Option<u64>,
    pub produced_msg_s: f64,
    pub acked_msg_s: f64,
    pub received_msg_s: f64,
    pub produced_mib_s: f64,
    pub received_mib_s: f64,
    /// produced / target, percent; null when unthrottled.
    pub rate_accuracy_pct: Option<f64>,
    /// received / produced, percent (measured window only, so never above 100).
    pub delivery_pct: Option<f64>,
    /// txmeta payloads: received records/s × entries per record; null otherwise.
    pub received_entries_s: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Latencies {
    /// Delivery report minus the send() call.
    pub ack: LatencySummary,
    /// Delivery report minus the intended send time (coordinated-omission free).
    pub ack_intended: LatencySummary,
    /// send() call minus the intended send time.
    pub send_delay: LatencySummary,
    /// Consumer receipt minus the send() call.
    pub e2e: LatencySummary,
    /// Consumer receipt minus the intended send time.
    pub e2e_intended: LatencySummary,
    /// Transactional mode: `commit_transaction` after the transaction's flush, i.e. the
    /// EndTxn round trip as the client sees it (empty otherwise).
    pub txn_commit: LatencySummary,
    /// Transactional mode: `abort_transaction` after the flush (empty otherwise).
    pub txn_abort: LatencySummary,
}

impl Latencies {
    fn by_kind(&self, kind: &str) -> Option<&LatencySummary> {
        match kind {
            "ack" => Some(&self.ack),
            "ack_intended" => Some(&self.ack_intended),
            "send_delay" => Some(&self.send_delay),
            "e2e" => Some(&self.e2e),
            "e2e_intended" => Some(&self.e2e_intended),
            "txn_commit" => Some(&self.txn_commit),
            "txn_abort" => Some(&self.txn_abort),
            _ => None,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct LagSummary {
    /// "client": high watermark minus the bench consumer's position, per partition, summed.
    pub view: &'static str,
    pub samples: usize,
    pub peak_total: Option<i64>,
    pub peak_at_s: Option<f64>,
    pub peak_partition: Option<i64>,
    /// The last known value and when it was sampled (seconds since load start); when the
    /// last samples failed, `unknown_since_s` says from when it was unknown (never a stale
    /// value passed off as final).
    pub final_total: Option<i64>,
    pub final_at_s: Option<f64>,
    pub unknown_since_s: Option<f64>,
    pub drain_rate_msg_s: Option<f64>,
    pub time_to_drain_s: Option<f64>,
    /// The broker view's final total (as `broker_final_total`).
    pub broker_view: Option<i64>,
    pub broker_view_note: &'static str,
    /// Broker view: high watermark minus the bench group's committed offset, per partition,
    /// summed (first maximum, and the last sample, which follows the final synchronous commit).
    pub broker_samples: usize,
    pub broker_peak_total: Option<i64>,
    pub broker_peak_at_s: Option<f64>,
    pub broker_final_total: Option<i64>,
    /// When the broker view's final is stale: the last samples failed from then on (seconds
    /// since load start); null when the last sample answered.
    pub broker_unknown_since_s: Option<f64>,
    /// The consumers' auto-commit interval: the broker view trails the client view by up to
    /// this long's worth of messages.
    pub commit_interval_ms: u32,
    /// Time lag: age of the oldest unconsumed message over all partitions (0 when caught up).
    pub time_lag_samples: usize,
    pub time_lag_peak_ms: Option<f64>,
    pub time_lag_peak_at_s: Option<f64>,
    pub time_lag_final_ms: Option<f64>,
    /// As `broker_unknown_since_s`, for the time lag.
    pub time_lag_unknown_since_s: Option<f64>,
}

/// A view's final value as the summaries say it: the last value when the last sample was
/// taken; otherwise when it stopped ("v as of T s (unknown from U s on)"), never a stale value
/// passed off as final.
pub fn final_wording(last: Option<(f64, String)>, unknown_since_s: Option<f64>) -> String {
    match (last, unknown_since_s) {
        (Some((at, v)), Some(u)) => format!("{v} as of {at:.0} s (unknown from {u:.0} s on)"),
        (None, Some(u)) => format!("unknown from {u:.0} s on"),
        (Some((_, v)), None) => v,
        (None, None) => "-".into(),
    }
}

impl LagSummary {
    /// The client view's, broker view's and time lag's finals (see `final_wording`), with the
    /// last time each was known taken from `intervals`.
    pub fn final_texts(&self, intervals: &[IntervalSample]) -> [String; 3] {
        let last = |f: &dyn Fn(&IntervalSample) -> Option<String>| {
            intervals
                .iter()
                .rev()
                .find_map(|i| f(i).map(|v| (i.elapsed_s, v)))
        };
        [
            final_wording(
                last(&|i| i.lag_total.map(|v| v.to_string())),
                self.unknown_since_s,
            ),
            final_wording(
                last(&|i| i.broker_lag_total.map(|v| v.to_string())),
                self.broker_unknown_since_s,
            ),
            final_wording(
                last(&|i| i.time_lag_ms.map(|v| format!("{v:.1} ms"))),
                self.time_lag_unknown_since_s,
            ),
        ]
    }
}

/// (first maximum, its time, last value) of a series of (elapsed_s, value) points.
fn peak_and_final<T: PartialOrd + Copy>(pts: &[(f64, T)]) -> (Option<T>, Option<f64>, Option<T>) {
    let mut best: Option<(f64, T)> = None;
    for &(t, v) in pts {
        let higher = match best {
            None => true,
            Some((_, b)) => v > b,
        };
        if higher {
            best = Some((t, v));
        }
    }
    (
        best.map(|b| b.1),
        best.map(|b| b.0),
        pts.last().map(|p| p.1),
    )
}

/// How the consumers process messages, and what that allows.
#[derive(Debug, Serialize)]
pub struct ConsumerModel {
    /// "serial-per-consumer": each consumer thread handles its partitions' messages one at a
    /// time, sleeping `delay + uniform[0, jitter)` after each.
    pub kind: &'static str,
    /// Consumer threads actually used (at most one per partition).
    pub consumers: u32,
    /// consumers / mean delay; null when there is no delay.
    pub capacity_msg_s: Option<f64>,
    /// The highest target rate of the schedule (bursts included); null when unthrottled.
    pub peak_target_msg_s: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct Backpressure {
    pub max_lag: u64,
    pub resume_lag: u64,
    pub poll_ms: f64,
    pub events: u64,
    pub paused_s: f64,
}

#[derive(Debug, Serialize)]
pub struct BrokerProcess {
    /// Where the figures come from: "procfs" (the sampled pids' /proc) or "metrics" (no pid:
    /// the scraped endpoints' `process_cpu_seconds_total` and `process_resident_memory_bytes`,
    /// CPU and RSS only).
    pub source: &'static str,
    /// The first sampled pid (`pids` has them all; 0 and empty with "metrics").
    pub pid: u32,
    pub pids: Vec<u32>,
    /// CPU (user + system) from the start of load to the end of the drain.
    pub cpu_s: Option<f64>,
    pub cpu_pct_avg: Option<f64>,
    /// Over every message of the run, warmup included (the CPU covers both).
    pub cpu_us_per_msg: Option<f64>,
    pub cpu_ms_per_mib: Option<f64>,
    pub peak_rss_mib: Option<f64>,
    pub final_rss_mib: Option<f64>,
    pub threads: Option<u64>,
    pub disk_read_bytes: Option<u64>,
    pub disk_write_bytes: Option<u64>,
    pub data_dir_bytes: Option<u64>,
    pub data_dir_bytes_per_msg: Option<f64>,
    /// Each broker's own figures (same fields) when more than one is sampled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_broker: Vec<BrokerProcess>,
    /// The process died (could not be read) at this time, seconds since load start: its CPU,
    /// RSS, I/O and threads are as of the last reading before (the sum: the first such time).
    pub gone_at_s: Option<f64>,
}

/// The brokers' CPU and RSS from their metrics endpoints' process gauges, when no pid was
/// sampled (a remote broker); the per-message figures are over `total_msgs` and `total_mib`.
fn broker_process_from_metrics(
    m: &crate::brokermetrics::ProcessFromMetrics,
    total_msgs: u64,
    total_mib: f64,
) -> BrokerProcess {
    let first = ProcReading {
        cpu_s: Some(0.0),
        ..ProcReading::default()
    };
    let last = ProcReading {
        cpu_s: Some(m.cpu_s),
        rss_bytes: m.final_rss_mib.map(|v| (v * 1048576.0) as u64),
        ..ProcReading::default()
    };
    let peak = m.peak_rss_mib.map(|v| (v * 1048576.0) as u64);
    let mut b = broker_process(
        Vec::new(),
        first,
        last,
        peak,
        m.span_s,
        total_msgs,
        total_mib,
    );
    b.source = "metrics";
    b
}

/// Fills the intervals' broker CPU and RSS, where no pid gave them, from the metrics tick
/// taken within half an interval of each interval's end.
fn fill_from_metrics(intervals: &mut [IntervalSample], m: &crate::brokermetrics::BrokerMetrics) {
    let half = limits::SAMPLE_INTERVAL.as_secs_f64() / 2.0;
    for i in intervals.iter_mut() {
        let Some(t) = m
            .intervals
            .iter()
            .find(|t| (t.elapsed_s - i.elapsed_s).abs() <= half)
        else {
            continue;
        };
        i.broker_cpu_pct = i.broker_cpu_pct.or(t.process_cpu_pct);
        i.broker_rss_mib = i.broker_rss_mib.or(t.process_rss_mib);
    }
}

/// One broker process's (or the summed) figures over the run: `first` and `last` readings
/// (the last one with a CPU figure), the peak RSS, the run's messages and MiB.
fn broker_process(
    pids: Vec<u32>,
    first: ProcReading,
    last: ProcReading,
    peak_rss_bytes: Option<u64>,
    span_s: f64,
    total_msgs: u64,
    total_mib: f64,
) -> BrokerProcess {
    let cpu_s = match (first.cpu_s, last.cpu_s) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    BrokerProcess {
        source: "procfs",
        pid: pids.first().copied().unwrap_or(0),
        pids,
        cpu_s,
        cpu_pct_avg: cpu_s.filter(|_| span_s > 0.0).map(|c| c / span_s * 100.0),
        cpu_us_per_msg: cpu_s
            .filter(|_| total_msgs > 0)
            .map(|c| c * 1e6 / total_msgs as f64),
        cpu_ms_per_mib: cpu_s
            .filter(|_| total_mib > 0.0)
            .map(|c| c * 1e3 / total_mib),
        peak_rss_mib: peak_rss_bytes.map(mib),
        final_rss_mib: last.rss_bytes.map(mib),
        threads: last.threads,
        disk_read_bytes: last.read_bytes,
        disk_write_bytes: last.write_bytes,
        data_dir_bytes: last.disk_bytes,
        data_dir_bytes_per_msg: last
            .disk_bytes
            .filter(|_| total_msgs > 0)
            .map(|b| b as f64 / total_msgs as f64),
        per_broker: Vec::new(),
        gone_at_s: None,
    }
}

/// The transactional mode's counts (measured window: transactions whose last record is a measured one).
#[derive(Debug, Serialize)]
pub struct TxnSummary {
    /// Producer n's `transactional.id` is `<prefix>-<n>`.
    pub transactional_id_prefix: String,
    pub messages_per_txn: u32,
    pub interval_ms: u32,
    pub abort_ratio: f64,
    pub committed: u64,
    /// Aborted as drawn (`abort_ratio`).
    pub aborted: u64,
    /// Commits that failed with an abortable error and were aborted (their records count as
    /// lost in the audit).
    pub commit_failed: u64,
    /// Fatal transaction errors (each stopped its producer).
    pub errors: u64,
    pub committed_per_s: f64,
    /// Measured records sent in transactions drawn to abort (not expected by the audit).
    pub aborted_records: u64,
    /// Records of aborted transactions the read_committed consumers received (must be 0).
    pub aborted_records_delivered: u64,
    /// The flush before each EndTxn (the transaction's last records' acknowledgement).
    pub flush: LatencySummary,
}

impl TxnSummary {
    /// The one-line summary the text and HTML reports both show.
    pub fn summary_line(&self) -> String {
        let ms = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
        format!(
            "{} committed ({:.1}/s) · {} aborted · {} commits failed · {} errors · {} msgs / {} ms each · aborted records {} (delivered under read_committed: {}) · flush before EndTxn p50 {} p99 {} ms",
            self.committed,
            self.committed_per_s,
            self.aborted,
            self.commit_failed,
            self.errors,
            self.messages_per_txn,
            self.interval_ms,
            self.aborted_records,
            self.aborted_records_delivered,
            ms(self.flush.p50_ms),
            ms(self.flush.p99_ms)
        )
    }
}

#[derive(Debug, Serialize)]
pub struct AppBatcher {
    pub mode: crate::shaping::AppBatchMode,
    pub linger_ms: u32,
    pub max_msgs: u32,
    pub flushes: u64,
    /// Flushes by the size trigger (the others by the timer or the end of load).
    pub size_flushes: u64,
    pub msgs_per_flush_avg: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct ClientProcess {
    /// CPU of this bench process over its whole life (clients, generation, sampling).
    pub cpu_s: Option<f64>,
    pub max_rss_mib: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Environment {
    pub cpu_model: Option<String>,
    pub cores: Option<usize>,
    pub kernel: Option<String>,
    pub rustc: &'static str,
    pub librdkafka: String,
    pub seed: u64,
    pub command: String,
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn per_s(n: u64, s: f64) -> f64 {
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// Start of the trailing run of intervals where `known` is false (None when the last one is
/// known, or there are none).
fn unknown_since(
    intervals: &[IntervalSample],
    known: impl Fn(&IntervalSample) -> bool,
) -> Option<f64> {
    let trailing = intervals.iter().rev().take_while(|i| !known(i)).count();
    if trailing == 0 {
        return None;
    }
    let first = &intervals[intervals.len() - trailing];
    Some(first.elapsed_s - first.interval_s)
}

#[allow(clippy::unnecessary_map_or)]
fn lag_summary(intervals: &[IntervalSample]) -> LagSummary {
    let pts: Vec<(f64, i64, Option<i64>)> = intervals
        .iter()
        .filter_map(|i| i.lag_total.map(|l| (i.elapsed_s, l, i.lag_max_partition)))
        .collect();
    let mut s = LagSummary {
        view: "client",
        samples: pts.len(),
        peak_total: None,
        peak_at_s: None,
        peak_partition: None,
        final_total: pts.last().map(|p| p.1),
        final_at_s: pts.last().map(|p| p.0),
        unknown_since_s: unknown_since(intervals, |i| i.lag_total.is_some()),
        drain_rate_msg_s: None,
        time_to_drain_s: None,
        broker_view: None,
        broker_view_note: "high watermark minus the bench group's committed offset (consumers assign() partitions and auto-commit stored offsets every commit_interval_ms, then commit synchronously at shutdown); missing committed offsets count as 0",
        broker_samples: 0,
        broker_peak_total: None,
        broker_peak_at_s: None,
        broker_final_total: None,
        broker_unknown_since_s: unknown_since(intervals, |i| i.broker_lag_total.is_some()),
        commit_interval_ms: 0,
        time_lag_samples: 0,
        time_lag_peak_ms: None,
        time_lag_peak_at_s: None,
        time_lag_final_ms: None,
        time_lag_unknown_since_s: unknown_since(intervals, |i| i.time_lag_ms.is_some()),
    };
    let broker: Vec<(f64, i64)> = intervals
        .iter()
        .filter_map(|i| i.broker_lag_total.map(|l| (i.elapsed_s, l)))
        .collect();
    (
        s.broker_peak_total,
        s.broker_peak_at_s,
        s.broker_final_total,
    ) = peak_and_final(&broker);
    s.broker_samples = broker.len();
    s.broker_view = s.broker_final_total;
    let time: Vec<(f64, f64)> = intervals
        .iter()
        .filter_map(|i| i.time_lag_ms.map(|l| (i.elapsed_s, l)))
        .collect();
    (
        s.time_lag_peak_ms,
        s.time_lag_peak_at_s,
        s.time_lag_final_ms,
    ) = peak_and_final(&time);
    s.time_lag_samples = time.len();
    // First maximum. (`map_or(true, ..)`: `is_none_or` is newer than the workspace's MSRV.)
    let mut best: Option<usize> = None;
    for (i, p) in pts.iter().enumerate() {
        if best.map_or(true, |b| p.1 > pts[b].1) {
            best = Some(i);
        }
    }
    let Some(ipeak) = best else {
        return s;
    };
    let peak = pts[ipeak];
    s.peak_total = Some(peak.1);
    s.peak_at_s = Some(peak.0);
    s.peak_partition = pts.iter().filter_map(|p| p.2).max();
    let mut sorted: Vec<i64> = pts.iter().map(|p| p.1).collect();
    sorted.sort_unstable();
    let typical = sorted[sorted.len() / 4];
    let backlog = peak.1 >= limits::LAG_BACKLOG_MIN_PEAK
        && peak.1 >= limits::LAG_BACKLOG_MIN_FACTOR * typical;
    if !backlog {
        return s;
    }
    if let Some(last) = pts.last() {
        if ipeak + 1 < pts.len() && last.1 < peak.1 && last.0 > peak.0 {
            s.drain_rate_msg_s = Some((peak.1 - last.1) as f64 / (last.0 - peak.0));
        }
        {
            s.time_to_drain_s = pts[ipeak..].iter().find(|p| p.1 <= 0).map(|p| p.0 - peak.0);
        }
    }
    s
}

fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The command line, quoted so it can be pasted back into a shell; secret client settings
/// (`-X sasl.password=...`) are shown as `***` (see `clientconf::redact_arg`).
pub fn command_line() -> String {
    std::env::args()
        .map(|a| crate::clientconf::redact_arg(&a))
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn build(
    scenario: &Scenario,
    target: TargetInfo,
    data: RunData,
    started_at_unix_s: f64,
    mut warnings: Vec<String>,
) -> Report {
    let d = &data;
    let measure_s = d.measure_s;
    let c = Counts {
        produced: d.produced.produced,
        acked: d.produced.acked,
        ack_errors: d.produced.ack_errors,
        send_errors: d.produced.send_errors,
        queue_full_retries: d.produced.queue_full_retries,
        received: d.audit.received,
        duplicates: d.audit.duplicates,
        produced_bytes: d.produced.produced_bytes,
        received_bytes: d.consumed.received_bytes,
        warmup_produced: d.warmup_produced,
        warmup_acked: d.warmup_acked,
        warmup_received: d.warmup_received,
        foreign: d.foreign,
    };
    // The max-rate search has no fixed target (its trajectory is in `rate_search`).
    let target_rate =
        (scenario.rate_msg_s > 0 && !scenario.shaping.rate_search).then_some(scenario.rate_msg_s);
    let produced_msg_s = per_s(c.produced, measure_s);
    let throughput = Throughput {
        target_msg_s: target_rate,
        produced_msg_s,
        acked_msg_s: per_s(c.acked, measure_s),
        received_msg_s: per_s(c.received, measure_s),
        produced_mib_s: mib(c.produced_bytes) / measure_s.max(1e-9),
        received_mib_s: mib(c.received_bytes) / measure_s.max(1e-9),
        rate_accuracy_pct: target_rate
            .filter(|_| measure_s > 0.0)
            .map(|t| produced_msg_s / t as f64 * 100.0),
        // Of the records the consumers must get (`audit.produced`: without those of
        // transactions drawn to abort; all of them otherwise).
        delivery_pct: (d.audit.produced > 0)
            .then(|| d.audit.received as f64 / d.audit.produced as f64 * 100.0),
        received_entries_s: (scenario.entries_per_record > 0)
            .then(|| per_s(d.consumed.entries, measure_s)),
    };
    if let Some(acc) = throughput.rate_accuracy_pct {
        if acc < 95.0 && !d.interrupted {
            let why = match d.bp_paused_s {
                Some(p) if p > 0.0 => format!("backpressure paused the producers for {p:.1} s"),
                _ if scenario.burst_rate_msg_s > 0 => {
                    "the target is the base rate; bursts add to it".to_string()
                }
                _ => "the generator or client could not keep up".to_string(),
            };
            warnings.push(format!(
                "rate deficit: produced {:.0} msg/s of the {} msg/s target ({acc:.1}%); {why}",
                produced_msg_s, scenario.rate_msg_s
            ));
        }
    }
    if d.flush_timed_out {
        warnings.push("producer flush timed out: some messages were never acknowledged".into());
    }
    let unconsumed = d.intervals.last().and_then(|i| i.lag_total).unwrap_or(0);
    if target.kind == "null" {
        // Not loss: the null target (`sluice serve --storage null`) keeps nothing to fetch.
        warnings.push(
            "null target: nothing is kept, so consumers receive nothing; produce rates only".into(),
        );
    } else if d.audit.lost > 0 && !d.interrupted {
        if unconsumed > 0 {
            warnings.push(format!(
                "{} measured messages were not consumed by the end of the drain; {unconsumed} were still on the topic unread (a consumer backlog, not necessarily loss)",
                d.audit.lost
            ));
        } else {
            warnings.push(format!(
                "{} measured messages never arrived ({} of them acknowledged{})",
                d.audit.lost,
                d.audit.lost_acked + d.audit.lost_unsynced,
                if d.audit.lost_unsynced > 0 {
                    format!(
                        " with acks={}: lost_unsynced, which the contract permits when a leader fails",
                        scenario.acks.config_value()
                    )
                } else {
                    String::new()
                }
            ));
        }
    }
    let peak_target = target_rate.map(|r| r.max(scenario.burst_rate_msg_s));
    let consumer_model = ConsumerModel {
        kind: "serial-per-consumer",
        consumers: d.consumers_used,
        capacity_msg_s: scenario.consumer_capacity_msg_s(d.consumers_used),
        peak_target_msg_s: peak_target,
    };
    if let (Some(cap), Some(peak)) = (consumer_model.capacity_msg_s, peak_target) {
        if cap < peak as f64 {
            warnings.push(format!(
                "producer rate {peak} msg/s exceeds the consumers' capacity of {cap:.0} msg/s ({} consumers, mean delay {:.0} µs): a backlog builds",
                d.consumers_used,
                (scenario.consumer_delay_us + scenario.consumer_jitter_us / 2).as_secs_f64() * 1e6
            ));
        }
    }
    let backpressure = d.bp_events.map(|events| Backpressure {
        max_lag: scenario.bp_max_lag,
        resume_lag: scenario.bp_resume(),
        poll_ms: scenario.bp_poll_ms.as_secs_f64() * 1e3,
        events,
        paused_s: d.bp_paused_s.unwrap_or(0.0),
    });
    let latency = Latencies {
        ack: d.produced.ack.summary(),
        ack_intended: d.produced.ack_intended.summary(),
        send_delay: d.produced.send_delay.summary(),
        e2e: d.consumed.e2e.summary(),
        e2e_intended: d.consumed.e2e_intended.summary(),
        txn_commit: d.produced.txn_commit.summary(),
        txn_abort: d.produced.txn_abort.summary(),
    };
    let transactions = scenario.transactional_id.as_ref().map(|id| {
        let p = &d.produced;
        TxnSummary {
            transactional_id_prefix: id.clone(),
            messages_per_txn: scenario.txn_messages,
            interval_ms: scenario.txn_interval_ms,
            abort_ratio: scenario.txn_abort_ratio,
            committed: p.txn_committed,
            aborted: p.txn_aborted,
            commit_failed: p.txn_commit_failed,
            errors: p.txn_errors,
            committed_per_s: per_s(p.txn_committed, measure_s),
            aborted_records: p.txn_aborted_records,
            aborted_records_delivered: d.consumed.txn_aborted_delivered,
            flush: p.txn_flush.summary(),
        }
    });
    if let Some(t) = transactions.as_ref() {
        if t.aborted_records_delivered > 0 {
            warnings.push(format!(
                "{} records of aborted transactions reached the read_committed consumers",
                t.aborted_records_delivered
            ));
        }
        if t.errors + t.commit_failed > 0 {
            warnings.push(format!(
                "transactions: {} fatal errors, {} commits that failed and were aborted (see the client errors)",
                t.errors, t.commit_failed
            ));
        }
    }
    let total_msgs = c.produced + c.warmup_produced;
    let total_mib = mib(total_msgs * scenario.message_bytes as u64);
    let span_s = d.intervals.last().map(|i| i.elapsed_s).unwrap_or(0.0);
    let broker_process = (!d.broker_each.is_empty()).then(|| {
        let mut sum = broker_process(
            d.broker_each.iter().map(|b| b.pid).collect(),
            d.broker_first.unwrap_or_default(),
            d.broker_last.unwrap_or_default(),
            d.broker_peak_rss_bytes,
            span_s,
            total_msgs,
            total_mib,
        );
        if d.broker_each.len() > 1 {
            sum.per_broker = d
                .broker_each
                .iter()
                .map(|b| {
                    // Per message and per MiB of the whole cluster's traffic: each broker's
                    // share of the cost of the run.
                    let mut one = broker_process(
                        vec![b.pid],
                        b.first,
                        b.last,
                        b.peak_rss_bytes,
                        span_s,
                        total_msgs,
                        total_mib,
                    );
                    one.gone_at_s = b.gone_at_s;
                    one
                })
                .collect();
        }
        sum.gone_at_s = d
            .broker_each
            .iter()
            .filter_map(|b| b.gone_at_s)
            .reduce(f64::min);
        sum
    });
    let from_metrics = d
        .broker_metrics
        .as_ref()
        .and_then(|m| m.process.as_ref())
        .filter(|_| d.broker_each.is_empty());
    let broker_process = broker_process
        .or_else(|| from_metrics.map(|m| broker_process_from_metrics(m, total_msgs, total_mib)));
    let costed_by_metrics = from_metrics.is_some();
    if d.topic_deleted == Some(false) {
        warnings.push("the bench's topics could not be deleted".into());
    }
    if d.group_deleted == Some(false) {
        warnings.push("the bench's consumer group could not be deleted".into());
    }
    let client_usage = crate::procstat::client_usage();
    if let Some(b) = d.backlog.as_ref().filter(|b| !b.reached && !d.interrupted) {
        warnings.push(format!(
            "backlog: only {} of the {} bytes built before the load ended",
            b.built_bytes, b.target_bytes
        ));
    }
    let sh = &scenario.shaping;
    let app_batcher = d.app_batch.map(|b| AppBatcher {
        mode: sh.app_batch_mode,
        linger_ms: sh.app_batch_linger_ms,
        max_msgs: sh.app_batch_max,
        flushes: b.flushes,
        size_flushes: b.size_flushes,
        msgs_per_flush_avg: (b.flushes > 0).then(|| b.messages as f64 / b.flushes as f64),
    });
    let mut lag = lag_summary(&d.intervals);
    lag.commit_interval_ms = scenario.commit_interval_ms;
    if let (Some(0), Some(b)) = (lag.final_total, lag.broker_final_total) {
        if b > 0 && !d.interrupted {
            warnings.push(format!(
                "every message was consumed but the broker view still shows {b} messages of lag: the final offset commit did not reach the broker"
            ));
        }
    }
    let per_topic = d
        .topics
        .iter()
        .enumerate()
        .map(|(i, t)| TopicSummary {
            topic: t.clone(),
            received: d.topic_received.get(i).copied().unwrap_or(0),
            end_offset_sum: d.topic_end_offsets.as_ref().and_then(|e| e.get(i).copied()),
        })
        .collect();
    let txmeta = (scenario.entries_per_record > 0).then(|| TxmetaSummary {
        entries_per_record: scenario.entries_per_record,
        entries_received: d.consumed.entries,
        bad_records: d.consumed.bad_records,
        misrouted_entries: d.consumed.misrouted_entries,
        ns_per_entry: d
            .consumed
            .e2e
            .summary()
            .mean_ms
            .map(|ms| ms * 1e6 / scenario.entries_per_record as f64),
        window_ns_per_entry: (d.consumed.entries > 0)
            .then(|| measure_s * 1e9 / d.consumed.entries as f64),
    });
    if let Some(t) = txmeta
        .as_ref()
        .filter(|t| t.bad_records + t.misrouted_entries > 0)
    {
        warnings.push(format!(
            "txmeta: {} records did not parse and {} entries were in another partition's hash range",
            t.bad_records, t.misrouted_entries
        ));
    }
    let compression_offline = crate::compression::offline(scenario);
    if let Some(split) = d.latency_split.as_ref() {
        let batch_ratio = crate::compression::batch_ratio(
            split.batch_msgs_avg,
            split.batch_bytes_avg,
            scenario.message_bytes,
        );
        if let Some(w) = crate::compression::wire_ratio_warning(
            scenario.compression.config_value(),
            split.wire_compression_ratio,
            batch_ratio,
            &compression_offline,
        ) {
            warnings.push(w);
        }
    }
    Report {
        schema: SCHEMA,
        tool: Tool {
            name: "sluice bench",
            version: env!("CARGO_PKG_VERSION"),
            git_sha: env!("SLUICE_BENCH_GIT_SHA"),
        },
        started_at_unix_s,
        started_at_utc: crate::units::utc_string(started_at_unix_s),
        label: None,
        scenario: scenario.clone(),
        target,
        topic: d.topic.clone(),
        run_tag: format!("{:08x}", d.run_tag),
        topics: d.topics.clone(),
        per_topic,
        window: Window {
            warmup_s: d.warmup_s,
            measure_s,
            drain_s: d.drain_s,
            interrupted: d.interrupted,
            flush_timed_out: d.flush_timed_out,
        },
        counts: c,
        audit: d.audit.clone(),
        throughput,
        latency,
        latency_split: d.latency_split.clone(),
        cdf_edges_ms: CDF_EDGES_MS.to_vec(),
        lag,
        consumer_model,
        backpressure,
        compression_offline,
        broker_process,
        topology: d.topology.clone(),
        availability: d.availability.clone(),
        topics_deleted: d.topic_deleted,
        group_deleted: d.group_deleted,
        client_process: ClientProcess {
            cpu_s: d.client_cpu_s,
            max_rss_mib: client_usage.map(|u| u.max_rss_mib),
        },
        partition_balance: crate::keys::partition_balance(&d.partition_acked, scenario.partitions),
        rate_search: d.rate_search.clone(),
        backlog: d.backlog.clone(),
        app_batcher,
        transactions,
        loss: None,
        duplicated: None,
        unsynced: None,
        intervals: {
            let mut v = data.intervals;
            if let Some(m) = data.broker_metrics.as_ref().filter(|_| costed_by_metrics) {
                fill_from_metrics(&mut v, m);
            }
            v
        },
        faults: data.faults,
        broker_metrics: data.broker_metrics,
        error_kinds: data.error_kinds,
        errors: data.errors,
        errors_not_listed: data.errors_overflow,
        warnings,
        gates: Vec::new(),
        environment: Environment {
            cpu_model: cpu_model(),
            cores: std::thread::available_parallelism().ok().map(|n| n.get()),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_string()),
            rustc: env!("SLUICE_BENCH_RUSTC"),
            librdkafka: rdkafka::util::get_rdkafka_version().1,
            seed: scenario.seed,
            command: command_line(),
        },
        client_ceiling: None,
        bottleneck: None,
        txmeta,
        settle: None,
    }
}

/// One line per gate result for the human summaries.
pub fn gate_lines(gates: &[crate::gate::GateResult]) -> String {
    let mut o = String::new();
    for g in gates {
        let _ = writeln!(
            o,
            " gate {:<28} {}  (value {}{})",
            g.gate.expr,
            if g.passed { "PASS" } else { "FAIL" },
            g.value
                .map(|v| format!("{v:.3}"))
                .unwrap_or_else(|| "none".into()),
            g.against
                .map(|v| format!(", against {v:.3}"))
                .unwrap_or_default()
        );
    }
    o
}

impl Report {
    /// The producers' on-wire compression ratio (message bytes over bytes sent); None when no
    /// librdkafka statistics came.
    pub fn wire_compression_ratio(&self) -> Option<f64> {
        self.latency_split
            .as_ref()
            .and_then(|s| s.wire_compression_ratio)
    }

    /// Human lines for keys and skew, the rate search, the backlog and the app batcher.
    fn shaping_lines(&self) -> String {
        let mut o = String::new();
        let sh = &self.scenario.shaping;
        if let Some(b) = &self.partition_balance {
            if sh.keys != crate::shaping::KeyMode::None || b.max_over_mean >= 1.5 {
                let _ = writeln!(
                    o,
                    " partitions         {} of {} used · largest {} with {:.1}% of acked msgs · max/mean {:.2}",
                    b.partitions_used,
                    b.per_partition.len(),
                    b.max_partition,
                    b.max_share_pct,
                    b.max_over_mean
                );
            }
        }
        if let Some(r) = &self.rate_search {
            let f0 = |v: Option<f64>| v.map(|x| format!("{x:.0}")).unwrap_or_else(|| "-".into());
            let path: Vec<String> = r
                .steps
                .iter()
                .take(12)
                .map(|s| {
                    format!(
                        "{:.0}{}",
                        s.target_msg_s,
                        if s.verdict == "up" { "" } else { "!" }
                    )
                })
                .collect();
            let _ = writeln!(
                o,
                " rate search        sustainable {} msg/s (highest held {}) · final target {:.0} · {} steps of {:.1} s: {}{}",
                f0(r.sustainable_msg_s),
                f0(r.max_sustained_msg_s),
                r.final_target_msg_s,
                r.steps.len(),
                r.period_s,
                path.join(" → "),
                if r.steps.len() > 12 { " …" } else { "" }
            );
        }
        if let Some(b) = &self.backlog {
            let f1 = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                o,
                " backlog            built {:.1} MiB ({} msgs) in {:.1} s{} · drained to ≤{} msgs in {} s at {} msg/s (net {} msg/s)",
                mib(b.built_bytes),
                b.built_msgs,
                b.build_s,
                if b.reached { "" } else { " (target not reached)" },
                b.drain_target_msgs,
                f1(b.drain_s),
                f1(b.drain_msg_s),
                f1(b.net_drain_msg_s)
            );
        }
        if let Some(a) = &self.app_batcher {
            let _ = writeln!(
                o,
                " app batcher        {:?} {} ms, max {} · {} flushes ({} by size), {} msgs each on average",
                a.mode,
                a.linger_ms,
                a.max_msgs,
                a.flushes,
                a.size_flushes,
                a.msgs_per_flush_avg
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_else(|| "-".into())
            );
        }
        o
    }

    /// The flat metric map gates are evaluated against (names in `gate::metric_names`).
    pub fn metrics(&self) -> BTreeMap<String, Option<f64>> {
        let mut m = BTreeMap::new();
        for kind in LATENCY_KINDS {
            let Some(l) = self.latency.by_kind(kind) else {
                continue;
            };
            let stats = [
                ("min", l.min_ms),
                ("mean", l.mean_ms),
                ("p50", l.p50_ms),
                ("p75", l.p75_ms),
                ("p90", l.p90_ms),
                ("p95", l.p95_ms),
                ("p99", l.p99_ms),
                ("p99_5", l.p99_5_ms),
                ("p999", l.p99_9_ms),
                ("p9999", l.p99_99_ms),
                ("max", l.max_ms),
            ];
            for (stat, v) in stats {
                m.insert(format!("{stat}_{kind}_ms"), v);
            }
        }
        let t = &self.throughput;
        let f = |v: u64| Some(v as f64);
        let bp = self.broker_process.as_ref();
        let scalars: [(&str, Option<f64>); 18] = [
            ("produced_msg_s", Some(t.produced_msg_s)),
            ("acked_msg_s", Some(t.acked_msg_s)),
            ("received_msg_s", Some(t.received_msg_s)),
            ("produced_mib_s", Some(t.produced_mib_s)),
            ("delivery_pct", t.delivery_pct),
            ("rate_accuracy_pct", t.rate_accuracy_pct),
            ("lost", f(self.audit.lost)),
            ("lost_acked", f(self.audit.lost_acked)),
            ("lost_unsynced", f(self.audit.lost_unsynced)),
            ("duplicates", f(self.audit.duplicates)),
            ("reordered", f(self.audit.reordered)),
            ("ack_errors", f(self.counts.ack_errors)),
            ("send_errors", f(self.counts.send_errors)),
            ("peak_lag", self.lag.peak_total.map(|v| v as f64)),
            ("final_lag", self.lag.final_total.map(|v| v as f64)),
            ("broker_cpu_us_per_msg", bp.and_then(|b| b.cpu_us_per_msg)),
            ("broker_cpu_ms_per_mib", bp.and_then(|b| b.cpu_ms_per_mib)),
            ("broker_peak_rss_mib", bp.and_then(|b| b.peak_rss_mib)),
        ];
        for (k, v) in scalars {
            m.insert(k.to_string(), v);
        }
        m
    }

    /// One line when the run lost records: acknowledged ones with acks=all (always), or any
    /// other measured record (delivery below 100 %) unless the shortfall is still unread on
    /// the topic at the end (a consumer backlog, not loss) or the run was interrupted. Records
    /// acknowledged with acks=1 or 0 and lost (`lost_unsynced`) are not judged here: the
    /// contract permits that loss when a leader fails (`unsynced_line` says it; a gate on
    /// `lost_unsynced` can still fail the run).
    pub fn loss_line(&self) -> Option<String> {
        // The null target keeps nothing: consumers receiving nothing is not loss.
        if self.window.interrupted || self.target.kind == "null" {
            return None;
        }
        let a = &self.audit;
        let backlog =
            self.lag.final_total.is_some_and(|l| l > 0) && self.lag.unknown_since_s.is_none();
        if a.lost_acked > 0 {
            return Some(format!(
                "{}{} acknowledged records were lost ({} lost in all, delivery {:.2}%)",
                self.label
                    .as_deref()
                    .map(|l| format!("[{l}] "))
                    .unwrap_or_default(),
                a.lost_acked,
                a.lost,
                self.throughput.delivery_pct.unwrap_or(0.0)
            ));
        }
        let unexplained = a.lost.saturating_sub(a.lost_unsynced);
        if unexplained > 0 && !backlog {
            return Some(format!(
                "{}delivery {:.2}%: {} measured records never arrived (none of them acknowledged; {} delivery failures)",
                self.label.as_deref().map(|l| format!("[{l}] ")).unwrap_or_default(),
                self.throughput.delivery_pct.unwrap_or(0.0),
                unexplained,
                self.counts.ack_errors
            ));
        }
        None
    }

    /// One line when the consumers received records more than once: a retried produce the
    /// broker stored twice (no idempotence), or a consumer that read a record again. Like
    /// loss, it breaks what the run promised the application, so it is judged (exit 4 unless
    /// `--allow-duplicates` or a gate on `duplicates`). An interrupted run is not judged.
    pub fn duplicate_line(&self) -> Option<String> {
        let n = self.audit.duplicates;
        (n > 0 && !self.window.interrupted).then(|| {
            format!(
                "{}{n} acknowledged records delivered more than once (extra copies received; idempotence {})",
                self.label.as_deref().map(|l| format!("[{l}] ")).unwrap_or_default(),
                if self.scenario.idempotence { "on" } else { "off" }
            )
        })
    }

    /// One line when records acknowledged with acks=1 (or sent with acks=0) were lost: a loss
    /// the broker's contract permits when a leader fails before replicating, so it is said,
    /// not judged (see `loss_line`).
    pub fn unsynced_line(&self) -> Option<String> {
        let n = self.audit.lost_unsynced;
        (n > 0).then(|| {
            format!(
                "{}{n} records acknowledged with acks={} were lost (lost_unsynced): permitted by acks={} when a leader fails before a replica has them; acks=all would make this a failure",
                self.label.as_deref().map(|l| format!("[{l}] ")).unwrap_or_default(),
                self.scenario.acks.config_value(),
                self.scenario.acks.config_value(),
            )
        })
    }

    /// Fault lines for the summary: each command, and its impact.
    fn fault_lines(&self) -> String {
        let mut o = String::new();
        let f1 = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into());
        for f in &self.faults {
            let _ = writeln!(
                o,
                " fault              at {:.1} s (measured) started {} s ended {} s · exit {} · {}{}",
                f.at_s,
                f1(f.started_at_s),
                f1(f.ended_at_s),
                f.exit_code.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
                f.command,
                f.error.as_deref().map(|e| format!(" ({e})")).unwrap_or_default()
            );
            if !f.output_tail.is_empty() {
                let last = f.output_tail.lines().last().unwrap_or("");
                let _ = writeln!(o, "                    output: {last}");
            }
            if let Some(i) = &f.impact {
                let _ = writeln!(
                    o,
                    "                    recovered {} · ack stall {:.1} s{} · sent after: {} acked, {} failed, {} acked but lost, {} duplicated",
                    match i.time_to_recover_s {
                        Some(t) => format!("after {t:.1} s (at {:.1} s)", i.recovered_at_s.unwrap_or(0.0)),
                        None if i.baseline_intervals == 0 => "- (no pre-fault baseline)".into(),
                        None => "NOT within the band by the end of the load".into(),
                    },
                    i.ack_stall_s,
                    i.ack_stall_from_s.map(|t| format!(" from {t:.1} s")).unwrap_or_default(),
                    i.acked_after,
                    i.failed_after,
                    i.lost_acked_after,
                    i.duplicates_after
                );
                let _ = writeln!(
                    o,
                    "                    baseline {} msg/s acked{}, ack p99 {} ms over {} intervals; band: {}",
                    f1(i.baseline_acked_msg_s),
                    if i.baseline_capped_at_rate { " (capped at the target rate)" } else { "" },
                    i.baseline_ack_p99_ms.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into()),
                    i.baseline_intervals,
                    i.band
                );
                if let Some(n) = &i.baseline_note {
                    let _ = writeln!(o, "                    {n}");
                }
            }
        }
        if let Some(m) = &self.broker_metrics {
            let ms = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
            let apis: Vec<String> = self
                .broker_metrics
                .iter()
                .flat_map(|m| m.request_p99_ms.iter())
                .filter(|(a, _)| {
                    ["Produce", "Fetch", "Metadata", "OffsetCommit"].contains(&a.as_str())
                })
                .map(|(a, v)| format!("{a} {v:.2}"))
                .collect();
            let _ = writeln!(
                o,
                " broker metrics     fdatasync p50 {} p99 {} ms ({} syncs) · group commit {} requests/round · request p99 ms: {} · {} of {} scrapes failed",
                ms(m.fsync_p50_ms),
                ms(m.fsync_p99_ms),
                m.fsyncs.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()),
                m.commit_round_requests_avg.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
                if apis.is_empty() { "-".to_string() } else { apis.join(", ") },
                m.failed_scrapes,
                m.scrapes
            );
        }
        o
    }

    /// The human summary for stdout.
    pub fn human(&self) -> String {
        let mut o = String::new();
        let rule = "━".repeat(78);
        let s = &self.scenario;
        let ms = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(o, "{rule}");
        let _ = writeln!(
            o,
            " sluice bench · preset {}{} · {} broker at {}",
            s.preset,
            self.label
                .as_deref()
                .map(|l| format!(" [{l}]"))
                .unwrap_or_default(),
            self.target.kind,
            self.target.bootstrap
        );
        o.push_str(&self.topology.human());
        let rate = if s.shaping.rate_search {
            format!(
                "max-rate search from {} msg/s",
                s.shaping.search_start_msg_s
            )
        } else if s.rate_msg_s == 0 {
            "unthrottled".to_string()
        } else {
            format!("{} msg/s", s.rate_msg_s)
        };
        let _ = writeln!(
            o,
            " topic {}{} ({} partitions) · {} B {} payload (seed {}) · {rate} from {} producers",
            self.topic,
            if self.topics.len() > 1 {
                format!(" and {} more topics", self.topics.len() - 1)
            } else {
                String::new()
            },
            s.partitions,
            s.message_bytes,
            s.payload.name(),
            s.seed,
            s.producers
        );
        let _ = writeln!(
            o,
            " acks={} compression={} linger.ms={} batch.size={} idempotence={} · {} consumers (assign)",
            s.acks.config_value(),
            s.compression.config_value(),
            s.linger_ms,
            s.batch_bytes,
            s.idempotence,
            s.consumers
        );
        let configs = topic_configs_text(s);
        let client = client_configs_text(s);
        let _ = writeln!(
            o,
            " replication.factor={}{}{}",
            replication_factor_text(s.replication_factor),
            if configs.is_empty() {
                String::new()
            } else {
                format!(" · topic configs {configs}")
            },
            if client.is_empty() {
                String::new()
            } else {
                format!(" · client settings {client}")
            }
        );
        let w = &self.window;
        let _ = writeln!(
            o,
            " warmup {:.1} s · measured {:.1} s · drain {:.1} s{}",
            w.warmup_s,
            w.measure_s,
            w.drain_s,
            if w.interrupted {
                " · INTERRUPTED (partial results)"
            } else {
                ""
            }
        );
        let _ = writeln!(o, "{rule}");
        let t = &self.throughput;
        let a = &self.audit;
        let _ = writeln!(
            o,
            " produced  {:>10} msgs  {:>10.0} msg/s  {:>8.2} MiB/s{}",
            self.counts.produced,
            t.produced_msg_s,
            t.produced_mib_s,
            t.rate_accuracy_pct
                .map(|p| format!("  ({p:.1}% of target)"))
                .unwrap_or_default()
        );
        let _ = writeln!(
            o,
            " acked     {:>10} msgs  {:>10.0} msg/s  errors {}",
            self.counts.acked, t.acked_msg_s, self.counts.ack_errors
        );
        let _ = writeln!(
            o,
            " received  {:>10} msgs  {:>10.0} msg/s  {:>8.2} MiB/s  delivery {}",
            a.received,
            t.received_msg_s,
            t.received_mib_s,
            t.delivery_pct
                .map(|p| format!("{p:.2}%"))
                .unwrap_or_else(|| "-".into())
        );
        if let Some(e) = t.received_entries_s {
            let _ = writeln!(
                o,
                " entries   {e:>31.0} entries/s ({} per record, parsed by the consumers)",
                s.entries_per_record
            );
        }
        if let Some(x) = &self.txmeta {
            let _ = writeln!(
                o,
                " txmeta    {} entries parsed · {:.0} ns e2e per entry · {:.0} ns of window per entry · {} bad records · {} misrouted entries",
                x.entries_received,
                x.ns_per_entry.unwrap_or(f64::NAN),
                x.window_ns_per_entry.unwrap_or(f64::NAN),
                x.bad_records,
                x.misrouted_entries
            );
        }
        let _ = writeln!(
            o,
            " audit     lost {} (acked {}{}) · duplicates {} · reordered {} · warmup msgs excluded {}",
            a.lost,
            a.lost_acked,
            if a.lost_unsynced > 0 {
                format!(", acked with acks={} {}", self.scenario.acks.config_value(), a.lost_unsynced)
            } else {
                String::new()
            },
            a.duplicates,
            a.reordered,
            self.counts.warmup_produced
        );
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            " {:<20} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "latency (ms)", "samples", "p50", "p90", "p99", "p99.9", "p99.99", "max"
        );
        let rows = [
            ("ack", &self.latency.ack),
            ("ack from intended", &self.latency.ack_intended),
            ("send delay", &self.latency.send_delay),
            ("end-to-end", &self.latency.e2e),
            ("e2e from intended", &self.latency.e2e_intended),
            ("txn commit (EndTxn)", &self.latency.txn_commit),
            ("txn abort (EndTxn)", &self.latency.txn_abort),
        ];
        // The transaction rows only in transactional mode.
        let txn = self.transactions.is_some();
        for (name, l) in rows
            .into_iter()
            .filter(|(n, _)| txn || !n.starts_with("txn"))
        {
            let _ = writeln!(
                o,
                " {:<20} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                name,
                l.count,
                ms(l.p50_ms),
                ms(l.p90_ms),
                ms(l.p99_ms),
                ms(l.p99_9_ms),
                ms(l.p99_99_ms),
                ms(l.max_ms)
            );
        }
        if let Some(t) = &self.transactions {
            let _ = writeln!(o, " transactions       {}", t.summary_line());
        }
        if let Some(sp) = &self.latency_split {
            let _ = writeln!(
                o,
                " producer split     queue avg {} p99≤{} · socket wait avg {} · rtt avg {} p99≤{} ms · batches {} msgs / {} B · wire ratio {}",
                ms(sp.queue_avg_ms),
                ms(sp.queue_p99_ms),
                ms(sp.outbuf_avg_ms),
                ms(sp.rtt_avg_ms),
                ms(sp.rtt_p99_ms),
                sp.batch_msgs_avg.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into()),
                sp.batch_bytes_avg.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into()),
                sp.wire_compression_ratio.map(|v| format!("{v:.2}x")).unwrap_or_else(|| "-".into())
            );
        }
        let _ = writeln!(o);
        let l = &self.lag;
        let opt = |v: Option<i64>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        let [final_text, broker_final, time_final] = l.final_texts(&self.intervals);
        let _ = writeln!(
            o,
            " lag (client view)  peak {} at {} s · final {} · samples {}{}",
            opt(l.peak_total),
            l.peak_at_s
                .map(|x| format!("{x:.0}"))
                .unwrap_or_else(|| "-".into()),
            final_text,
            l.samples,
            l.drain_rate_msg_s
                .map(|r| format!(" · drain {r:.0} msg/s"))
                .unwrap_or_default()
        );
        let _ = writeln!(
            o,
            " lag (broker view)  peak {} at {} s · final {} · samples {} · commit every {} ms",
            opt(l.broker_peak_total),
            l.broker_peak_at_s
                .map(|x| format!("{x:.0}"))
                .unwrap_or_else(|| "-".into()),
            broker_final,
            l.broker_samples,
            l.commit_interval_ms
        );
        let _ = writeln!(
            o,
            " time lag           peak {} ms at {} s · final {} · samples {}{}",
            ms(l.time_lag_peak_ms),
            l.time_lag_peak_at_s
                .map(|x| format!("{x:.0}"))
                .unwrap_or_else(|| "-".into()),
            time_final,
            l.time_lag_samples,
            if s.acks == crate::scenario::Acks::None {
                " (unknown while behind with acks=0: delivery reports carry no offsets)"
            } else {
                ""
            }
        );
        if let Some(cap) = self.consumer_model.capacity_msg_s {
            let _ = writeln!(
                o,
                " consumers          {} serial consumers · capacity {cap:.0} msg/s",
                self.consumer_model.consumers
            );
        }
        o.push_str(&self.shaping_lines());
        o.push_str(&self.fault_lines());
        o.push_str(&self.availability.human());
        if let Some(bp) = &self.backpressure {
            let _ = writeln!(
                o,
                " backpressure       pause above lag {} · resume below {} · {} pauses · {:.1} s paused",
                bp.max_lag, bp.resume_lag, bp.events, bp.paused_s
            );
        }
        let _ = writeln!(
            o,
            " offline compression of {} payload samples ({} B): codec, bytes, ratio, saved, encode",
            self.compression_offline.sample_count, self.compression_offline.raw_bytes
        );
        for (name, c) in self.compression_offline.rows() {
            let _ = writeln!(
                o,
                "   {name:<8} {:>12} B {:>9.2}x {:>7.1}% {:>9} µs",
                c.compressed_bytes, c.ratio, c.space_saved_pct, c.encode_micros
            );
        }
        if let Some(b) = &self.broker_process {
            let f1 = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into());
            let line = |o: &mut String, who: String, b: &BrokerProcess| {
                let _ = writeln!(
                    o,
                    " {who:<18} cpu {} s ({}% avg) · {} µs/msg · {} ms/MiB · rss peak {} MiB · data dir {} MiB{}",
                    f1(b.cpu_s),
                    f1(b.cpu_pct_avg),
                    f1(b.cpu_us_per_msg),
                    f1(b.cpu_ms_per_mib),
                    f1(b.peak_rss_mib),
                    f1(b.data_dir_bytes.map(mib)),
                    b.gone_at_s
                        .map(|t| format!(" · GONE at {t:.1} s (figures as of then)"))
                        .unwrap_or_default()
                );
            };
            if b.source == "metrics" {
                line(&mut o, "broker (/metrics)".to_string(), b);
            } else if b.per_broker.is_empty() {
                line(&mut o, format!("broker pid {}", b.pid), b);
            } else {
                line(&mut o, format!("{} brokers (sum)", b.pids.len()), b);
                for p in &b.per_broker {
                    line(&mut o, format!("  broker pid {}", p.pid), p);
                }
            }
        }
        if let Some(cpu) = self.client_process.cpu_s {
            let _ = writeln!(o, " bench client       cpu {cpu:.1} s");
        }
        for w in &self.warnings {
            let _ = writeln!(o, " warning: {w}");
        }
        if !self.error_kinds.is_empty() {
            let _ = writeln!(o, " client errors (by kind, delivery failures first):");
            for k in self.error_kinds.iter().take(8) {
                let _ = writeln!(
                    o,
                    "   {:>6} × {} [{:.1}..{:.1} s] {}",
                    k.count, k.class, k.first_at_s, k.last_at_s, k.example
                );
            }
            if self.error_kinds.len() > 8 || self.errors_not_listed > 0 {
                let _ = writeln!(
                    o,
                    "   ... {} more kinds in the JSON, {} errors not listed",
                    self.error_kinds.len().saturating_sub(8),
                    self.errors_not_listed
                );
            }
        }
        if let Some(l) = &self.loss {
            let _ = writeln!(o, " LOSS: {l}");
        }
        if let Some(l) = &self.duplicated {
            let _ = writeln!(o, " DUPLICATES: {l}");
        }
        if let Some(l) = &self.unsynced {
            let _ = writeln!(o, " UNSYNCED: {l}");
        }
        o.push_str(&gate_lines(&self.gates));
        let _ = writeln!(o, "{rule}");
        o
    }
}

/// The bench topics' replication factor as the reports show it (-1: the broker decides).
pub(crate) fn replication_factor_text(replication_factor: i16) -> String {
    match replication_factor {
        -1 => "broker default".to_string(),
        n => n.to_string(),
    }
}

/// The bench topics' `--topic-config` settings as `k=v k=v` (empty when none).
pub(crate) fn topic_configs_text(s: &Scenario) -> String {
    s.topic_config
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The clients' `-X` / `--client-config` settings as `k=v k=v`, secrets as `***` (empty when
/// none).
pub(crate) fn client_configs_text(s: &Scenario) -> String {
    s.client_config
        .iter()
        .map(|(k, v)| {
            if crate::clientconf::is_secret(k) {
                format!("{k}=***")
            } else {
                format!("{k}={v}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Records the ceiling and the verdict in a finished run's report, with a warning when the
/// client may have been the bottleneck.
pub fn attach_ceiling(rep: &mut Report, ceiling: &crate::calibrate::ClientCeiling) {
    let deficit = rep
        .throughput
        .rate_accuracy_pct
        .is_some_and(|acc| acc < 95.0);
    let b = crate::calibrate::judge(
        ceiling,
        rep.throughput.acked_msg_s,
        rep.scenario.rate_msg_s,
        deficit,
    );
    if b.verdict == "client" {
        rep.warnings.push(format!(
            "client-bound: {:.0} msg/s acknowledged is {:.0}% of the client's own ceiling ({:.0} msg/s against the null target, sluice serve --storage null); the broker may be capable of more",
            rep.throughput.acked_msg_s,
            b.share_of_ceiling * 100.0,
            ceiling.produce_msg_s
        ));
    }
    rep.client_ceiling = Some(ceiling.clone());
    rep.bottleneck = Some(b);
}

/// The human summary's calibration lines (empty without --calibrate).
pub fn calibration_lines(rep: &Report) -> String {
    let (Some(c), Some(b)) = (&rep.client_ceiling, &rep.bottleneck) else {
        return String::new();
    };
    let what = match b.verdict {
        "client" => "the CLIENT set the pace (at or near its own ceiling)",
        "none" => "the target rate was met, well within the client's ceiling",
        _ => "the BROKER set the pace (the client had headroom)",
    };
    format!(
        "  client ceiling   {:.0} msg/s produced, {:.0} msg/s consumed (null target); this run reached {:.0}% of it: {what}\n",
        c.produce_msg_s,
        c.consume_msg_s,
        b.share_of_ceiling * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, lag: i64) -> IntervalSample {
        IntervalSample {
            elapsed_s: t,
            interval_s: 1.0,
            phase: "measure",
            produced_msg_s: 0.0,
            acked_msg_s: 0.0,
            received_msg_s: 0.0,
            produced_mib_s: 0.0,
            received_mib_s: 0.0,
            ack_errors: 0,
            send_errors: 0,
            queue_full_retries: 0,
            sent_acked: None,
            sent_failed: None,
            sent_ack_p99_ms: None,
            sent_lost_acked: None,
            sent_duplicates: None,
            ack_p50_ms: None,
            ack_p99_ms: None,
            ack_intended_p99_ms: None,
            send_delay_p99_ms: None,
            e2e_p50_ms: None,
            e2e_p99_ms: None,
            e2e_intended_p99_ms: None,
            lag_total: Some(lag),
            lag_max_partition: Some(lag),
            lag_per_partition: vec![],
            broker_lag_total: Some(lag + 7),
            broker_lag_max_partition: Some(lag + 7),
            time_lag_ms: Some(lag as f64 / 10.0),
            broker_cpu_pct: None,
            broker_rss_mib: None,
            broker_disk_mib: None,
            brokers: Vec::new(),
            client_cpu_pct: None,
            split: None,
            errors_by_kind: Default::default(),
            hdr: Default::default(),
        }
    }

    #[test]
    fn lag_peak_drain_rate_and_time_to_drain() {
        let pts: Vec<IntervalSample> = [
            (1.0, 10),
            (2.0, 5000),
            (3.0, 5000),
            (4.0, 2500),
            (5.0, 0),
            (6.0, 0),
        ]
        .iter()
        .map(|&(t, l)| sample(t, l))
        .collect();
        let s = lag_summary(&pts);
        assert_eq!(s.peak_total, Some(5000));
        assert_eq!(s.peak_at_s, Some(2.0)); // the first maximum
        assert_eq!(s.final_total, Some(0));
        assert_eq!(s.drain_rate_msg_s, Some(1250.0));
        assert_eq!(s.time_to_drain_s, Some(3.0));
        // The broker view and time lag get their own first maximum and last value.
        assert_eq!(s.broker_peak_total, Some(5007));
        assert_eq!(s.broker_peak_at_s, Some(2.0));
        assert_eq!(s.broker_final_total, Some(7));
        assert_eq!(s.broker_view, Some(7));
        assert_eq!(s.broker_samples, 6);
        assert_eq!(s.time_lag_peak_ms, Some(500.0));
        assert_eq!(s.time_lag_final_ms, Some(0.0));
        // Ordinary in-flight lag is not a backlog: no drain rate.
        let healthy: Vec<IntervalSample> = [(1.0, 40), (2.0, 900), (3.0, 30)]
            .iter()
            .map(|&(t, l)| sample(t, l))
            .collect();
        assert_eq!(lag_summary(&healthy).drain_rate_msg_s, None);
        assert_eq!(lag_summary(&[]).peak_total, None);
    }
}
