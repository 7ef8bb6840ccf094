//! The report's JSON document (schema in docs/bench-schema.md, additive only): `Report` and
//! the sections it is made of. Pure data with the small views its readers share (final lag
//! wording, the transaction summary line); built by `build`, printed by `human`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::audit::AuditResult;
use crate::gate::GateResult;
use crate::hist::LatencySummary;
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
    pub app_batcher: Option<crate::engine::batcher::AppBatchReport>,
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
    pub(super) fn by_kind(&self, kind: &str) -> Option<&LatencySummary> {
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
pub(super) fn peak_and_final<T: PartialOrd + Copy>(
    pts: &[(f64, T)],
) -> (Option<T>, Option<f64>, Option<T>) {
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
