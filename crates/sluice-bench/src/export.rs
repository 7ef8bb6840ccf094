//! `--omb-json FILE` and `--ssp-json FILE`: one run's results in the result formats of
//! OpenMessaging Benchmark (`TestResult`) and of SSP's kafka-bench, so their chart scripts and
//! dashboards can read our runs next to theirs. Both are derived from the `Report` alone; what
//! we cannot measure is null (or 0 where the anchor's type has no null and 0 is the true
//! value, e.g. Go GC counters for a Rust client), never invented. docs/bench-schema.md lists
//! every mapping.
//!
//! OMB reports every 10 s; we sample every 1 s, so each OMB window merges ten of our
//! measured-phase intervals — rates from their counts, percentiles from their merged
//! histograms (each interval keeps its own, see `hist::IntervalHdr`), never averaged
//! percentiles. Several runs in one invocation write one file per run (see `numbered_path`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::hist::{LatencyHist, LatencySummary, CDF_EDGES_MS};
use crate::limits;
use crate::report::Report;
use crate::vocab::IntervalSample;

// ---------------------------------------------------------------------------------------------
// OMB

/// OMB's `TestResult`: field names and units as OMB writes them (publish latency and end-to-end
/// in ms, publish delay in µs; per-window arrays every 10 s of the measured phase).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OmbResult {
    pub workload: String,
    pub driver: String,
    pub message_size: u64,
    pub topics: u32,
    pub partitions: i32,
    pub producers_per_topic: u32,
    pub consumers_per_topic: u32,

    pub publish_rate: Vec<f64>,
    pub publish_error_rate: Vec<f64>,
    pub consume_rate: Vec<f64>,
    /// Client-view lag at the end of each window (null when the watermark query failed).
    pub backlog: Vec<Option<i64>>,

    #[serde(flatten)]
    pub publish_latency: Windows<f64>,
    #[serde(flatten)]
    pub publish_delay_latency: Windows<u64>,
    #[serde(flatten)]
    pub end_to_end_latency: Windows<f64>,

    #[serde(flatten)]
    /// `aggregated<Kind><Stat>` scalars over the whole measured window (integers for the
    /// publish delay, as OMB's are longs); null when nothing was measured.
    pub aggregated: BTreeMap<String, serde_json::Value>,
    pub aggregated_publish_latency_quantiles: BTreeMap<String, f64>,
    pub aggregated_publish_delay_latency_quantiles: BTreeMap<String, u64>,
    pub aggregated_end_to_end_latency_quantiles: BTreeMap<String, f64>,
}

/// Per-window statistics of one latency, serialized as `<prefix>Avg`, `<prefix>50pct`, ….
#[derive(Debug)]
pub struct Windows<T> {
    prefix: &'static str,
    avg: Vec<Option<f64>>,
    pct: [Vec<Option<T>>; 7],
    max: Vec<Option<T>>,
}

const OMB_PCTS: [(f64, &str); 7] = [
    (50.0, "50pct"),
    (75.0, "75pct"),
    (95.0, "95pct"),
    (99.0, "99pct"),
    (99.9, "999pct"),
    (99.99, "9999pct"),
    (99.999, "99999pct"),
];

impl<T: Serialize> Serialize for Windows<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(9))?;
        m.serialize_entry(&format!("{}Avg", self.prefix), &self.avg)?;
        for ((_, suffix), v) in OMB_PCTS.iter().zip(&self.pct) {
            m.serialize_entry(&format!("{}{suffix}", self.prefix), v)?;
        }
        m.serialize_entry(&format!("{}Max", self.prefix), &self.max)?;
        m.end()
    }
}

impl<T> Windows<T> {
    fn new(prefix: &'static str) -> Self {
        Windows {
            prefix,
            avg: Vec::new(),
            pct: Default::default(),
            max: Vec::new(),
        }
    }

    /// Appends one window; `conv` turns µs into the unit of this latency.
    fn push(&mut self, h: &LatencyHist, conv: impl Fn(f64) -> T) {
        self.avg
            .push(h.mean_us().map(|v| to_unit_f64(self.prefix, v)));
        for ((p, _), col) in OMB_PCTS.iter().zip(self.pct.iter_mut()) {
            col.push(h.percentile_us(*p).map(|v| conv(v as f64)));
        }
        self.max.push(h.max_us().map(|v| conv(v as f64)));
    }
}

/// OMB's averages are Doubles in the latency's unit (ms, or µs for the publish delay).
fn to_unit_f64(prefix: &str, us: f64) -> f64 {
    if prefix == "publishDelayLatency" {
        us
    } else {
        us / 1000.0
    }
}

fn ms(us: f64) -> f64 {
    us / 1000.0
}

fn us(v: f64) -> u64 {
    v.round() as u64
}

/// The measured-phase intervals, in OMB's 10-second windows.
fn omb_windows(intervals: &[IntervalSample]) -> Vec<&[IntervalSample]> {
    // Measured intervals are contiguous; take the run of them.
    let start = intervals.iter().position(|i| i.phase == "measure");
    let Some(start) = start else {
        return Vec::new();
    };
    let len = intervals[start..]
        .iter()
        .take_while(|i| i.phase == "measure")
        .count();
    intervals[start..start + len]
        .chunks(limits::OMB_WINDOW_INTERVALS)
        .collect()
}

/// Merges one histogram kind of a window's intervals.
fn merged(window: &[IntervalSample], pick: fn(&IntervalSample) -> &[u8]) -> LatencyHist {
    let mut h = LatencyHist::new();
    for i in window {
        // Our own encoding; a decode error would only drop that interval's samples.
        let _ = h.merge_v2(pick(i));
    }
    h
}

fn workload_name(r: &Report) -> String {
    match &r.label {
        Some(l) => format!("{}/{l}", r.scenario.preset),
        None => r.scenario.preset.clone(),
    }
}

/// One run as OMB's `TestResult`.
pub fn omb(r: &Report) -> OmbResult {
    let s = &r.scenario;
    let mut out = OmbResult {
        workload: workload_name(r),
        driver: format!("{} ({})", r.target.spec, r.target.kind),
        message_size: s.message_bytes as u64,
        topics: 1,
        partitions: s.partitions,
        producers_per_topic: s.producers,
        consumers_per_topic: s.consumers,
        publish_rate: Vec::new(),
        publish_error_rate: Vec::new(),
        consume_rate: Vec::new(),
        backlog: Vec::new(),
        publish_latency: Windows::new("publishLatency"),
        publish_delay_latency: Windows::new("publishDelayLatency"),
        end_to_end_latency: Windows::new("endToEndLatency"),
        aggregated: BTreeMap::new(),
        aggregated_publish_latency_quantiles: BTreeMap::new(),
        aggregated_publish_delay_latency_quantiles: BTreeMap::new(),
        aggregated_end_to_end_latency_quantiles: BTreeMap::new(),
    };
    for w in omb_windows(&r.intervals) {
        let dur: f64 = w.iter().map(|i| i.interval_s).sum::<f64>().max(1e-9);
        let count = |f: fn(&IntervalSample) -> f64| w.iter().map(f).sum::<f64>() / dur;
        // OMB counts a publish when its callback succeeds: our acks.
        out.publish_rate
            .push(count(|i| i.acked_msg_s * i.interval_s));
        out.publish_error_rate
            .push(count(|i| (i.ack_errors + i.send_errors) as f64));
        out.consume_rate
            .push(count(|i| i.received_msg_s * i.interval_s));
        out.backlog.push(w.iter().rev().find_map(|i| i.lag_total));
        out.publish_latency.push(&merged(w, |i| &i.hdr.ack), ms);
        out.publish_delay_latency
            .push(&merged(w, |i| &i.hdr.send_delay), us);
        out.end_to_end_latency.push(&merged(w, |i| &i.hdr.e2e), ms);
    }
    let kinds: [(&str, &LatencySummary, bool); 3] = [
        ("PublishLatency", &r.latency.ack, false),
        ("PublishDelayLatency", &r.latency.send_delay, true),
        ("EndToEndLatency", &r.latency.e2e, false),
    ];
    for (name, summary, in_us) in kinds {
        let h = summary.hist().unwrap_or_default();
        let unit = |v: u64| -> serde_json::Value {
            if in_us {
                v.into()
            } else {
                (v as f64 / 1000.0).into()
            }
        };
        out.aggregated.insert(
            format!("aggregated{name}Avg"),
            h.mean_us()
                .map(|v| if in_us { v } else { v / 1000.0 })
                .into(),
        );
        for (p, suffix) in OMB_PCTS {
            out.aggregated.insert(
                format!("aggregated{name}{suffix}"),
                h.percentile_us(p).map(unit).unwrap_or_default(),
            );
        }
        out.aggregated.insert(
            format!("aggregated{name}Max"),
            h.max_us().map(unit).unwrap_or_default(),
        );
        for (p, v) in h.quantile_curve_us() {
            // Java's Double.toString of the percentile, as OMB's map keys.
            let key = format!("{p:?}");
            match name {
                "PublishLatency" => {
                    out.aggregated_publish_latency_quantiles
                        .insert(key, v as f64 / 1000.0);
                }
                "PublishDelayLatency" => {
                    out.aggregated_publish_delay_latency_quantiles
                        .insert(key, v);
                }
                _ => {
                    out.aggregated_end_to_end_latency_quantiles
                        .insert(key, v as f64 / 1000.0);
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// SSP

/// SSP's result document (kafka-bench-v4 `-output`).
#[derive(Debug, Serialize)]
pub struct SspResult {
    pub config: SspConfig,
    #[serde(rename = "final")]
    pub final_: SspFinal,
    pub timeline: Vec<SspTick>,
    pub lag_timeline: Vec<SspLagTick>,
    pub lag_summary: SspLagSummary,
    pub sysperf_timeline: Vec<SspSysTick>,
    pub sysperf_summary: SspSysSummary,
    pub compression_offline: crate::compression::CompressionTable,
    pub bp_events: u64,
    pub bp_paused_s: f64,
}

#[derive(Debug, Serialize)]
pub struct SspConfig {
    pub brokers: Vec<String>,
    pub topic: String,
    /// The bench consumes with assign(), without a consumer group.
    pub group: String,
    pub partitions: i32,
    pub message_size: usize,
    pub target_rate: u64,
    pub duration_s: f64,
    pub warmup_s: f64,
    pub producers: u32,
    pub consumers: u32,
    /// SSP's integer form: 0, 1, −1.
    pub acks: i32,
    pub compression: &'static str,
    pub batch_bytes: u32,
    pub linger_ms: u32,
    pub payload_mode: &'static str,
    pub consumer_delay: String,
    pub consumer_jitter: String,
    pub phase_duration: String,
    pub phase_delay: String,
    pub initial_offset: &'static str,
    pub burst_rate: u64,
    pub burst_duration: String,
    pub burst_period: String,
    pub bp_max_lag: u64,
    pub bp_resume_lag: u64,
    pub bp_poll: String,
}

#[derive(Debug, Serialize)]
pub struct SspFinal {
    pub elapsed_s: f64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub errors: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub avg_rate_msg_per_sec: f64,
    pub avg_recv_rate_msg_per_sec: f64,
    pub throughput_mb_per_sec: f64,
    pub ack_latency_ms: GoStats,
    pub e2e_latency_ms: GoStats,
}

/// SSP's latency statistics object, Go field names, milliseconds.
#[derive(Debug, Serialize, Default)]
#[serde(rename_all = "PascalCase")]
pub struct GoStats {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub std_dev: f64,
    pub variance: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub p995: f64,
    pub p999: f64,
    pub p9999: f64,
    #[serde(rename = "MAD")]
    pub mad: f64,
    pub count: u64,
    #[serde(rename = "CDFBuckets")]
    pub cdf_buckets: Vec<u64>,
}

/// From a histogram: SSP's Go code leaves every field 0 for an empty sample set, so do we.
fn go_stats(l: &LatencySummary) -> GoStats {
    let z = |v: Option<f64>| v.unwrap_or(0.0);
    let mut g = GoStats {
        min: z(l.min_ms),
        max: z(l.max_ms),
        mean: z(l.mean_ms),
        std_dev: z(l.stddev_ms),
        variance: z(l.stddev_ms).powi(2),
        p50: z(l.p50_ms),
        p75: z(l.p75_ms),
        p90: z(l.p90_ms),
        p95: z(l.p95_ms),
        p99: z(l.p99_ms),
        p995: z(l.p99_5_ms),
        p999: z(l.p99_9_ms),
        p9999: z(l.p99_99_ms),
        mad: 0.0,
        count: l.count,
        cdf_buckets: if l.cdf_buckets.len() == CDF_EDGES_MS.len() + 1 {
            l.cdf_buckets.clone()
        } else {
            vec![0; CDF_EDGES_MS.len() + 1]
        },
    };
    if let Some(h) = l.hist() {
        g.mad = h.mad_us().unwrap_or(0.0) / 1000.0;
    }
    g
}

#[derive(Debug, Serialize)]
pub struct SspTick {
    pub elapsed_s: f64,
    pub inst_rate: f64,
    pub recv_rate: f64,
    pub throughput_mb: f64,
    pub ack_p50_ms: Option<f64>,
    pub ack_p99_ms: Option<f64>,
    pub e2e_p50_ms: Option<f64>,
    pub e2e_p99_ms: Option<f64>,
    /// Cumulative over the measured window.
    pub errors: u64,
}

#[derive(Debug, Serialize)]
pub struct SspLagTick {
    pub elapsed_s: f64,
    pub total_lag: i64,
    pub max_partition_lag: Option<i64>,
    /// Not measured: the client view has no committed offsets (null).
    pub committed_offset_sum: Option<i64>,
    /// Not measured per interval (null).
    pub end_offset_sum: Option<i64>,
    pub per_partition_lag: BTreeMap<String, i64>,
}

#[derive(Debug, Serialize)]
pub struct SspLagSummary {
    pub max_total_lag: i64,
    pub final_total_lag: i64,
    pub recovery_drain_rate_msg_per_sec: f64,
    pub time_to_drain_s: f64,
    pub sample_count: usize,
}

#[derive(Debug, Serialize)]
pub struct SspSysTick {
    pub elapsed_s: f64,
    /// A Rust client has no goroutines: 0.
    pub goroutines: u64,
    /// No garbage collector: 0 collections, 0 pause.
    pub num_gc: u64,
    pub gc_pause_total_ms: f64,
    pub gc_pause_last_ms: f64,
    /// The bench process's CPU (user + system, from rusage) as a percentage of all cores —
    /// the quantity SSP meant (its own figure reads the Go runtime's available CPU instead).
    pub cpu_fraction_pct: Option<f64>,
    /// Cores available to this process.
    pub gomaxprocs: usize,
    /// The same CPU as a percentage of one core (ours; additive).
    pub client_cpu_pct: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct SspSysSummary {
    pub count: usize,
    pub avg_cpu_fraction_pct: Option<f64>,
    pub max_cpu_fraction_pct: Option<f64>,
    pub avg_goroutines: f64,
    pub max_goroutines: u64,
    pub num_gc: u64,
    pub gc_pause_total_ms: f64,
    /// Peak resident memory of the bench process (ours; SSP's heap fields have no equivalent
    /// and are left out).
    pub max_rss_mb: Option<f64>,
}

/// Go's `time.Duration.String()`: "0s", "500µs", "1.5ms", "2m30s", "1h0m0s".
pub fn go_duration(d: std::time::Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    let frac = |v: u128, unit: u128| {
        let whole = v / unit;
        let rest = v % unit;
        if rest == 0 {
            whole.to_string()
        } else {
            let digits = unit.to_string().len() - 1;
            let f = format!("{rest:0digits$}");
            format!("{whole}.{}", f.trim_end_matches('0'))
        }
    };
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return format!("{}µs", frac(ns, 1_000));
    }
    if ns < 1_000_000_000 {
        return format!("{}ms", frac(ns, 1_000_000));
    }
    let secs = ns / 1_000_000_000;
    let sub = ns % 1_000_000_000;
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let s_str = frac(s * 1_000_000_000 + sub, 1_000_000_000);
    if h > 0 {
        format!("{h}h{m}m{s_str}s")
    } else if m > 0 {
        format!("{m}m{s_str}s")
    } else {
        format!("{s_str}s")
    }
}

/// One run as SSP's result document. Time base: seconds since the end of warmup (SSP's bench
/// start); the timelines cover the measured window, the lag timeline also the drain.
pub fn ssp(r: &Report) -> SspResult {
    let (timeline, lag_timeline) = ssp_timelines(r);
    let (sysperf_timeline, sysperf_summary) = ssp_sysperf(r);
    let lag_summary = SspLagSummary {
        max_total_lag: r.lag.peak_total.unwrap_or(0),
        final_total_lag: r.lag.final_total.unwrap_or(0),
        recovery_drain_rate_msg_per_sec: r.lag.drain_rate_msg_s.unwrap_or(0.0),
        time_to_drain_s: r.lag.time_to_drain_s.unwrap_or(0.0),
        sample_count: r.lag.samples,
    };
    SspResult {
        config: ssp_config(r),
        final_: ssp_final(r),
        timeline,
        lag_timeline,
        lag_summary,
        sysperf_timeline,
        sysperf_summary,
        compression_offline: r.compression_offline.clone(),
        bp_events: r.backpressure.as_ref().map(|b| b.events).unwrap_or(0),
        bp_paused_s: r.backpressure.as_ref().map(|b| b.paused_s).unwrap_or(0.0),
    }
}

fn ssp_config(r: &Report) -> SspConfig {
    let s = &r.scenario;
    SspConfig {
        brokers: r.target.bootstrap.split(',').map(str::to_string).collect(),
        topic: r.topic.clone(),
        group: String::new(),
        partitions: s.partitions,
        message_size: s.message_bytes,
        target_rate: s.rate_msg_s,
        duration_s: s.duration_s.as_secs_f64(),
        warmup_s: s.warmup_s.as_secs_f64(),
        producers: s.producers,
        consumers: s.consumers,
        acks: match s.acks.config_value() {
            "0" => 0,
            "1" => 1,
            _ => -1,
        },
        compression: s.compression.config_value(),
        batch_bytes: s.batch_bytes,
        linger_ms: s.linger_ms,
        payload_mode: s.payload.name(),
        consumer_delay: go_duration(s.consumer_delay_us),
        consumer_jitter: go_duration(s.consumer_jitter_us),
        phase_duration: go_duration(s.phase_after_s.unwrap_or_default()),
        phase_delay: go_duration(s.phase_delay_us),
        initial_offset: "oldest",
        burst_rate: s.burst_rate_msg_s,
        burst_duration: go_duration(s.burst_duration_s),
        burst_period: go_duration(s.burst_period_s),
        bp_max_lag: s.bp_max_lag,
        bp_resume_lag: if s.bp_max_lag > 0 { s.bp_resume() } else { 0 },
        bp_poll: go_duration(s.bp_poll_ms),
    }
}

/// SSP counts a message as sent when it is acknowledged, with the configured size.
fn ssp_final(r: &Report) -> SspFinal {
    let s = &r.scenario;
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let elapsed = r.window.measure_s;
    let sent = r.counts.acked;
    let bytes_sent = sent * s.message_bytes as u64;
    let per_s = |n: f64| if elapsed > 0.0 { n / elapsed } else { 0.0 };
    SspFinal {
        elapsed_s: elapsed,
        messages_sent: sent,
        messages_received: r.audit.received,
        errors: r.counts.ack_errors + r.counts.send_errors,
        bytes_sent,
        bytes_received: r.counts.received_bytes,
        avg_rate_msg_per_sec: per_s(sent as f64),
        avg_recv_rate_msg_per_sec: per_s(r.audit.received as f64),
        throughput_mb_per_sec: per_s(mib(bytes_sent as f64)),
        ack_latency_ms: go_stats(&r.latency.ack),
        e2e_latency_ms: go_stats(&r.latency.e2e),
    }
}

/// The throughput and lag timelines of the measured (and drain, for lag) intervals.
fn ssp_timelines(r: &Report) -> (Vec<SspTick>, Vec<SspLagTick>) {
    let mib = |b: f64| b / (1024.0 * 1024.0);
    let warm = r.window.warmup_s;
    let size = r.scenario.message_bytes as f64;
    let mut errors = 0;
    let timeline = r
        .intervals
        .iter()
        .filter(|i| i.phase == "measure")
        .map(|i| {
            errors += i.ack_errors + i.send_errors;
            SspTick {
                elapsed_s: i.elapsed_s - warm,
                inst_rate: i.acked_msg_s,
                recv_rate: i.received_msg_s,
                throughput_mb: mib(i.acked_msg_s * size),
                ack_p50_ms: i.ack_p50_ms,
                ack_p99_ms: i.ack_p99_ms,
                e2e_p50_ms: i.e2e_p50_ms,
                e2e_p99_ms: i.e2e_p99_ms,
                errors,
            }
        })
        .collect();
    let lag_timeline: Vec<SspLagTick> = r
        .intervals
        .iter()
        .filter(|i| i.phase != "warmup")
        .filter_map(|i| {
            i.lag_total.map(|t| SspLagTick {
                elapsed_s: i.elapsed_s - warm,
                total_lag: t,
                max_partition_lag: i.lag_max_partition,
                committed_offset_sum: None,
                end_offset_sum: None,
                per_partition_lag: i
                    .lag_per_partition
                    .iter()
                    .enumerate()
                    .map(|(p, l)| (p.to_string(), *l))
                    .collect(),
            })
        })
        .collect();
    (timeline, lag_timeline)
}

/// The bench client's CPU per measured interval, and its summary.
fn ssp_sysperf(r: &Report) -> (Vec<SspSysTick>, SspSysSummary) {
    let warm = r.window.warmup_s;
    let cores = r.environment.cores.unwrap_or(1).max(1);
    let sysperf_timeline: Vec<SspSysTick> = r
        .intervals
        .iter()
        .filter(|i| i.phase == "measure")
        .map(|i| SspSysTick {
            elapsed_s: i.elapsed_s - warm,
            goroutines: 0,
            num_gc: 0,
            gc_pause_total_ms: 0.0,
            gc_pause_last_ms: 0.0,
            cpu_fraction_pct: i.client_cpu_pct.map(|c| c / cores as f64),
            gomaxprocs: cores,
            client_cpu_pct: i.client_cpu_pct,
        })
        .collect();
    let cpus: Vec<f64> = sysperf_timeline
        .iter()
        .filter_map(|t| t.cpu_fraction_pct)
        .collect();
    let sysperf_summary = SspSysSummary {
        count: sysperf_timeline.len(),
        avg_cpu_fraction_pct: (!cpus.is_empty())
            .then(|| cpus.iter().sum::<f64>() / cpus.len() as f64),
        max_cpu_fraction_pct: cpus.iter().copied().reduce(f64::max),
        avg_goroutines: 0.0,
        max_goroutines: 0,
        num_gc: 0,
        gc_pause_total_ms: 0.0,
        max_rss_mb: r.client_process.max_rss_mib,
    };
    (sysperf_timeline, sysperf_summary)
}

// ---------------------------------------------------------------------------------------------
// Files

/// The file of run `index` (0-based) of `total`: the path as given for a single run, else
/// `<stem>-<n>[-<label>].<ext>` with n the 1-based run number (the CSV's `run` column) and the
/// sweep label made file-name safe.
pub fn numbered_path(path: &Path, index: usize, total: usize, label: Option<&str>) -> PathBuf {
    if total <= 1 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export".into());
    let mut name = format!("{stem}-{}", index + 1);
    if let Some(l) = label {
        let safe: String = l
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        name.push('-');
        name.push_str(&safe);
    }
    if let Some(ext) = path.extension() {
        name.push('.');
        name.push_str(&ext.to_string_lossy());
    }
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::ZERO), "0s");
        assert_eq!(go_duration(Duration::from_nanos(800)), "800ns");
        assert_eq!(go_duration(Duration::from_micros(500)), "500µs");
        assert_eq!(go_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(go_duration(Duration::from_millis(200)), "200ms");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_secs(150)), "2m30s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
    }

    #[test]
    fn numbered_paths() {
        let p = Path::new("/tmp/omb.json");
        assert_eq!(numbered_path(p, 0, 1, Some("x")), p);
        assert_eq!(
            numbered_path(p, 1, 4, None),
            PathBuf::from("/tmp/omb-2.json")
        );
        assert_eq!(
            numbered_path(p, 0, 2, Some("a/b c")),
            PathBuf::from("/tmp/omb-1-a_b_c.json")
        );
    }

    #[test]
    fn go_stats_of_an_empty_and_a_real_histogram() {
        let empty = go_stats(&LatencyHist::new().summary());
        assert_eq!((empty.count, empty.p99, empty.mad), (0, 0.0, 0.0));
        assert_eq!(empty.cdf_buckets.len(), 23);
        let mut h = LatencyHist::new();
        for v in 1..=1000u64 {
            h.record_ns(v * 10_000); // 0.01 .. 10 ms
        }
        let g = go_stats(&h.summary());
        assert_eq!(g.count, 1000);
        assert!((g.variance - g.std_dev * g.std_dev).abs() < 1e-9);
        // Uniform on [0, 10] ms: MAD 2.5 ms, σ ≈ 2.89 ms.
        assert!((g.mad - 2.5).abs() < 0.05, "{}", g.mad);
        assert!((g.std_dev - 2.887).abs() < 0.05, "{}", g.std_dev);
        assert_eq!(g.cdf_buckets.iter().sum::<u64>(), 1000);
        let json = serde_json::to_value(&g).unwrap_or_default();
        for k in [
            "Min",
            "StdDev",
            "P995",
            "P9999",
            "MAD",
            "Count",
            "CDFBuckets",
        ] {
            assert!(json.get(k).is_some(), "{k}");
        }
    }
}
