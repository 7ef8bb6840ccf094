//! Building the report from a run's `RunData`: the counts, rates and latency summaries, the
//! lag views, the broker processes' cost, and the warnings a reader must not miss (rate
//! deficit, loss, a consumer backlog, failed cleanup, ...). Nothing is measured here.

use super::schema::*;
use crate::engine::RunData;
use crate::hist::CDF_EDGES_MS;
use crate::limits;
use crate::procstat::ProcReading;
use crate::scenario::Scenario;
use crate::units::mib;
use crate::vocab::IntervalSample;

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

/// The report of one run. `warnings` are the caller's (the target's); the run's own follow.
pub fn build(
    scenario: &Scenario,
    target: TargetInfo,
    data: RunData,
    started_at_unix_s: f64,
    mut warnings: Vec<String>,
) -> Report {
    let d = &data;
    let measure_s = d.measure_s;
    let c = counts(d);
    let throughput = throughput(scenario, d, &c);
    rate_and_loss_warnings(scenario, &target, d, &throughput, &mut warnings);
    let consumer_model = consumer_model(scenario, d, &mut warnings);
    let transactions = transactions(scenario, d, &mut warnings);
    let (broker_process, costed_by_metrics) = broker_processes(scenario, d, &c);
    cleanup_warnings(d, &mut warnings);
    let lag = lag(scenario, d, &mut warnings);
    let txmeta = txmeta(scenario, d, &mut warnings);
    let compression_offline = compression(scenario, d, &mut warnings);
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
        per_topic: per_topic(d),
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
        latency: latencies(d),
        latency_split: d.latency_split.clone(),
        cdf_edges_ms: CDF_EDGES_MS.to_vec(),
        lag,
        consumer_model,
        backpressure: backpressure(scenario, d),
        compression_offline,
        broker_process,
        topology: d.topology.clone(),
        availability: d.availability.clone(),
        topics_deleted: d.topic_deleted,
        group_deleted: d.group_deleted,
        client_process: ClientProcess {
            cpu_s: d.client_cpu_s,
            max_rss_mib: crate::procstat::client_usage().map(|u| u.max_rss_mib),
        },
        partition_balance: crate::keys::partition_balance(&d.partition_acked, scenario.partitions),
        rate_search: d.rate_search.clone(),
        backlog: d.backlog.clone(),
        app_batcher: d
            .app_batch
            .map(|b| crate::engine::batcher::AppBatchReport::new(&scenario.shaping, &b)),
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
        environment: environment(scenario),
        client_ceiling: None,
        bottleneck: None,
        txmeta,
        settle: None,
    }
}

fn counts(d: &RunData) -> Counts {
    Counts {
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
    }
}

fn backpressure(scenario: &Scenario, d: &RunData) -> Option<Backpressure> {
    d.bp_events.map(|events| Backpressure {
        max_lag: scenario.bp_max_lag,
        resume_lag: scenario.bp_resume(),
        poll_ms: scenario.bp_poll_ms.as_secs_f64() * 1e3,
        events,
        paused_s: d.bp_paused_s.unwrap_or(0.0),
    })
}

fn latencies(d: &RunData) -> Latencies {
    Latencies {
        ack: d.produced.ack.summary(),
        ack_intended: d.produced.ack_intended.summary(),
        send_delay: d.produced.send_delay.summary(),
        e2e: d.consumed.e2e.summary(),
        e2e_intended: d.consumed.e2e_intended.summary(),
        txn_commit: d.produced.txn_commit.summary(),
        txn_abort: d.produced.txn_abort.summary(),
    }
}

/// Topics or group not deleted, a backlog that was not built.
fn cleanup_warnings(d: &RunData, warnings: &mut Vec<String>) {
    if d.topic_deleted == Some(false) {
        warnings.push("the bench's topics could not be deleted".into());
    }
    if d.group_deleted == Some(false) {
        warnings.push("the bench's consumer group could not be deleted".into());
    }
    if let Some(b) = d.backlog.as_ref().filter(|b| !b.reached && !d.interrupted) {
        warnings.push(format!(
            "backlog: only {} of the {} bytes built before the load ended",
            b.built_bytes, b.target_bytes
        ));
    }
}

/// The lag views, with a warning when the broker's view never caught up with the client's.
fn lag(scenario: &Scenario, d: &RunData, warnings: &mut Vec<String>) -> LagSummary {
    let mut lag = lag_summary(&d.intervals);
    lag.commit_interval_ms = scenario.commit_interval_ms;
    if let (Some(0), Some(b)) = (lag.final_total, lag.broker_final_total) {
        if b > 0 && !d.interrupted {
            warnings.push(format!(
                "every message was consumed but the broker view still shows {b} messages of lag: the final offset commit did not reach the broker"
            ));
        }
    }
    lag
}

fn per_topic(d: &RunData) -> Vec<TopicSummary> {
    d.topics
        .iter()
        .enumerate()
        .map(|(i, t)| TopicSummary {
            topic: t.clone(),
            received: d.topic_received.get(i).copied().unwrap_or(0),
            end_offset_sum: d.topic_end_offsets.as_ref().and_then(|e| e.get(i).copied()),
        })
        .collect()
}

/// The offline compression table, with a warning when the wire ratio disagrees with it.
fn compression(
    scenario: &Scenario,
    d: &RunData,
    warnings: &mut Vec<String>,
) -> crate::compression::CompressionTable {
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
    compression_offline
}

/// Where the run ran and how to run it again.
fn environment(scenario: &Scenario) -> Environment {
    Environment {
        cpu_model: cpu_model(),
        cores: std::thread::available_parallelism().ok().map(|n| n.get()),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string()),
        rustc: env!("SLUICE_BENCH_RUSTC"),
        librdkafka: rdkafka::util::get_rdkafka_version().1,
        seed: scenario.seed,
        command: command_line(),
    }
}

fn throughput(scenario: &Scenario, d: &RunData, c: &Counts) -> Throughput {
    let measure_s = d.measure_s;
    // The max-rate search has no fixed target (its trajectory is in `rate_search`).
    let target_rate =
        (scenario.rate_msg_s > 0 && !scenario.shaping.rate_search).then_some(scenario.rate_msg_s);
    let produced_msg_s = per_s(c.produced, measure_s);
    Throughput {
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
    }
}

/// A rate short of its target, a flush that timed out, and records that never arrived (a
/// consumer backlog or loss, with what the acks permit).
fn rate_and_loss_warnings(
    scenario: &Scenario,
    target: &TargetInfo,
    d: &RunData,
    throughput: &Throughput,
    warnings: &mut Vec<String>,
) {
    let produced_msg_s = throughput.produced_msg_s;
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
}

/// The consumers' processing model, with a warning when the load exceeds their capacity.
fn consumer_model(scenario: &Scenario, d: &RunData, warnings: &mut Vec<String>) -> ConsumerModel {
    let target_rate =
        (scenario.rate_msg_s > 0 && !scenario.shaping.rate_search).then_some(scenario.rate_msg_s);
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
    consumer_model
}

fn transactions(
    scenario: &Scenario,
    d: &RunData,
    warnings: &mut Vec<String>,
) -> Option<TxnSummary> {
    let measure_s = d.measure_s;
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
    transactions
}

/// The broker processes' cost: sampled pids (summed, and each when several), else the metrics
/// endpoints' process gauges; and whether the latter gave it.
fn broker_processes(scenario: &Scenario, d: &RunData, c: &Counts) -> (Option<BrokerProcess>, bool) {
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
    (broker_process, costed_by_metrics)
}

fn txmeta(scenario: &Scenario, d: &RunData, warnings: &mut Vec<String>) -> Option<TxmetaSummary> {
    let measure_s = d.measure_s;
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
    txmeta
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
