//! The report as people read it on stdout (`Report::human`), its loss, duplicate and gate
//! lines, and the flat metric map that gates and comparisons read (`Report::metrics`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::schema::*;
use crate::gate::LATENCY_KINDS;
use crate::scenario::Scenario;
use crate::units::mib;

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
        let rule = "━".repeat(78);
        let mut o = format!("{rule}\n");
        o.push_str(&self.human_header());
        let _ = writeln!(o, "{rule}");
        o.push_str(&self.human_counts());
        o.push_str(&self.human_latency());
        o.push_str(&self.human_lag());
        o.push_str(&self.shaping_lines());
        o.push_str(&self.fault_lines());
        o.push_str(&self.availability.human());
        o.push_str(&self.human_resources());
        o.push_str(&self.human_notes());
        let _ = writeln!(o, "{rule}");
        o
    }

    /// What ran: target, topology, topics, load, client settings, phases.
    fn human_header(&self) -> String {
        let mut o = String::new();
        let s = &self.scenario;
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
        o
    }

    /// Produced, acknowledged, received, entries, the audit.
    fn human_counts(&self) -> String {
        let mut o = String::new();
        let s = &self.scenario;
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
        o
    }

    /// The latency table, transactions and the producer's latency split.
    fn human_latency(&self) -> String {
        let mut o = String::new();
        let ms = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
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
        o
    }

    /// The three lag views and the consumers' capacity.
    fn human_lag(&self) -> String {
        let mut o = String::new();
        let s = &self.scenario;
        let ms = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
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
        o
    }

    /// Backpressure, offline compression, the broker processes' cost and the client's CPU.
    fn human_resources(&self) -> String {
        let mut o = String::new();
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
        o
    }

    /// Warnings, client errors, loss / duplicate / unsynced lines and the gates.
    fn human_notes(&self) -> String {
        let mut o = String::new();
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
        o
    }
}

/// The bench topics' replication factor as the reports show it (-1: the broker decides).
pub fn replication_factor_text(replication_factor: i16) -> String {
    match replication_factor {
        -1 => "broker default".to_string(),
        n => n.to_string(),
    }
}

/// The bench topics' `--topic-config` settings as `k=v k=v` (empty when none).
pub fn topic_configs_text(s: &Scenario) -> String {
    s.topic_config
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The clients' `-X` / `--client-config` settings as `k=v k=v`, secrets as `***` (empty when
/// none).
pub fn client_configs_text(s: &Scenario) -> String {
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
