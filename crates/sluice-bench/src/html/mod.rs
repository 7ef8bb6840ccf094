//! The self-contained HTML report (`--html FILE`): one file, inline CSS and SVG, no script and
//! no network, so it opens anywhere and can be attached to an issue. Charts are drawn (`chart`)
//! from the same `Report` the JSON is made of: time series (throughput, latency, lag, broker
//! resources, with the warmup shaded), a per-partition lag heatmap, a latency quantile plot on
//! a log percentile axis.
//!
//! Guarantees: the page reads as people read, what the run did first: the run's parameters,
//! warnings and gates, the summary and latency tables, then the charts; the detail tables
//! (`tables`: faults' commands, unavailable partitions, topology, the scraped broker metrics
//! with only the histograms that saw samples, offline compression, client errors) after them.

mod cells;
mod chart;
mod tables;

use std::fmt::Write as _;

use self::cells::{count, ms};
use self::chart::{
    error_series, fault_markers, lag_heatmap, quantile_series, series, svg_chart, Chart, Series,
};
use self::tables::{
    availability_table, broker_metrics_table, compression_table, error_kinds_table, faults_table,
    topology_section,
};
use crate::report::Report;

pub use self::cells::esc;
pub use self::chart::overlays;

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
th:first-child,td:first-child{text-align:left}.t{font:600 13px sans-serif}.a{font:11px sans-serif;fill:#444}.n{font:12px sans-serif;fill:#888}
.warn{color:#a40}.fail{color:#c00;font-weight:600}.pass{color:#080;font-weight:600}code{background:#f4f4f4;padding:1px 4px}
details{margin:12px 0}summary{font-weight:600;cursor:pointer}.diff{font-weight:600;color:#05c}.same{color:#666}";

/// Wraps a body into a complete, self-contained document.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>{body}</body></html>\n",
        t = esc(title)
    )
}

/// The report of one run as a complete page.
pub fn render(r: &Report) -> String {
    page(
        &format!(
            "sluice bench · {} · {}",
            r.scenario.preset, r.started_at_utc
        ),
        &body(r),
    )
}

/// The sections of one run's report (no document wrapper), in reading order.
pub fn body(r: &Report) -> String {
    let mut o = run_header(r);
    o.push_str(&warnings_and_gates(r));
    o.push_str(&summary_table(r));
    o.push_str(&latency_table(r));
    o.push_str(&faults_table(r));
    o.push_str(&time_series(r));
    o.push_str(&resource_charts(r));
    o.push_str(&quantiles_chart(r));
    o.push_str(&availability_table(&r.availability));
    o.push_str(&topology_section(&r.topology));
    o.push_str(&broker_metrics_table(r));
    o.push_str(&compression_table(r));
    o.push_str(&error_kinds_table(r));
    o.push_str(&reproduce(r));
    o
}

/// What ran: target, topics, message shape, load, client settings and the phases' lengths.
fn run_header(r: &Report) -> String {
    let mut o = String::new();
    let s = &r.scenario;
    let rate = if s.rate_msg_s == 0 {
        "unthrottled".to_string()
    } else {
        format!("{} msg/s", s.rate_msg_s)
    };
    let _ = write!(
        o,
        "<p>{} broker <code>{}</code> · topic <code>{}</code>{} ({} partitions{}) · {} B {} payload · {rate} from {} producers · {} consumers · acks={} · {} · linger.ms={} · batch.size={}<br>warmup {:.1} s · measured {:.1} s · drain {:.1} s{}</p>",
        esc(r.target.kind),
        esc(&r.target.bootstrap),
        esc(&r.topic),
        if r.topics.len() > 1 {
            format!(" and {} more topics", r.topics.len() - 1)
        } else {
            String::new()
        },
        s.partitions,
        if r.topics.len() > 1 { " each" } else { "" },
        s.message_bytes,
        s.payload.name(),
        s.producers,
        s.consumers,
        s.acks.config_value(),
        s.compression.config_value(),
        s.linger_ms,
        s.batch_bytes,
        r.window.warmup_s,
        r.window.measure_s,
        r.window.drain_s,
        if r.window.interrupted { " · <b class=warn>interrupted: partial results</b>" } else { "" }
    );
    let configs = crate::report::topic_configs_text(s);
    let client = crate::report::client_configs_text(s);
    let _ = write!(
        o,
        "<p>replication.factor={}{}{}</p>",
        crate::report::replication_factor_text(s.replication_factor),
        if configs.is_empty() {
            String::new()
        } else {
            format!(" · topic configs <code>{}</code>", esc(&configs))
        },
        if client.is_empty() {
            String::new()
        } else {
            format!(" · client settings <code>{}</code>", esc(&client))
        }
    );
    o
}

fn warnings_and_gates(r: &Report) -> String {
    let mut o = String::new();
    for w in &r.warnings {
        let _ = write!(o, "<p class=warn>warning: {}</p>", esc(w));
    }
    if !r.gates.is_empty() {
        o.push_str("<h2>Gates</h2><table><tr><th>gate</th><th>value</th><th>result</th></tr>");
        for g in &r.gates {
            let _ = write!(
                o,
                "<tr><td><code>{}</code></td><td>{}</td><td class={}>{}</td></tr>",
                esc(&g.gate.expr),
                g.value
                    .map(|v| format!("{v:.3}"))
                    .unwrap_or_else(|| "none".into()),
                if g.passed { "pass" } else { "fail" },
                if g.passed { "PASS" } else { "FAIL" }
            );
        }
        o.push_str("</table>");
    }
    o
}

/// Produced, acknowledged, received, the audit and the three lag views, then the broker
/// process, transactions and the producer's latency split.
fn summary_table(r: &Report) -> String {
    let mut o = String::new();
    let t = &r.throughput;
    let a = &r.audit;
    o.push_str("<h2>Summary</h2><table>");
    // The same wording as the text summary: a view that stopped answering says since when.
    let [client_final, broker_final, time_final] = r.lag.final_texts(&r.intervals);
    let rows: Vec<(&str, String)> = vec![
        (
            "produced",
            format!(
                "{} msgs · {:.0} msg/s · {:.2} MiB/s{}",
                a.produced,
                t.produced_msg_s,
                t.produced_mib_s,
                t.rate_accuracy_pct
                    .map(|p| format!(" · {p:.1}% of target"))
                    .unwrap_or_default()
            ),
        ),
        (
            "acknowledged",
            format!(
                "{} msgs · {:.0} msg/s · {} errors",
                r.counts.acked, t.acked_msg_s, r.counts.ack_errors
            ),
        ),
        (
            "received",
            format!(
                "{} msgs · {:.0} msg/s · {:.2} MiB/s · delivery {}",
                a.received,
                t.received_msg_s,
                t.received_mib_s,
                t.delivery_pct
                    .map(|p| format!("{p:.2}%"))
                    .unwrap_or_else(|| "–".into())
            ),
        ),
        (
            "audit",
            format!(
                "lost {} (after ack {}; unsynced, acks=1/0: {}) · duplicates {} · reordered {} · warmup excluded {}",
                a.lost, a.lost_acked, a.lost_unsynced, a.duplicates, a.reordered, r.counts.warmup_produced
            ),
        ),
        (
            "lag (client view)",
            format!(
                "peak {} · final {}{}",
                count(r.lag.peak_total),
                client_final,
                r.lag
                    .drain_rate_msg_s
                    .map(|d| format!(" · drain {d:.0} msg/s"))
                    .unwrap_or_default()
            ),
        ),
        (
            "lag (broker view)",
            format!(
                "peak {} · final {} · offsets committed every {} ms",
                count(r.lag.broker_peak_total),
                broker_final,
                r.lag.commit_interval_ms
            ),
        ),
        (
            "time lag",
            format!(
                "peak {} ms · final {}",
                r.lag
                    .time_lag_peak_ms
                    .map(|v| format!("{v:.1}"))
                    .unwrap_or_else(|| "–".into()),
                time_final
            ),
        ),
    ];
    for (k, v) in rows {
        let _ = write!(
            o,
            "<tr><td>{k}</td><td style=text-align:left>{}</td></tr>",
            esc(&v)
        );
    }
    o.push_str(&summary_extra_rows(r));
    o.push_str("</table>");
    o
}

fn summary_extra_rows(r: &Report) -> String {
    let mut o = String::new();
    if let Some(b) = &r.broker_process {
        let f = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "–".into());
        let row = |o: &mut String, who: String, b: &crate::report::BrokerProcess| {
            let _ = write!(
                o,
                "<tr><td>{who}</td><td style=text-align:left>CPU {} s ({}% avg) · {} µs/msg · {} ms/MiB · RSS peak {} MiB · data dir {} MiB{}</td></tr>",
                f(b.cpu_s),
                f(b.cpu_pct_avg),
                f(b.cpu_us_per_msg),
                f(b.cpu_ms_per_mib),
                f(b.peak_rss_mib),
                f(b.data_dir_bytes.map(|v| v as f64 / 1048576.0)),
                b.gone_at_s
                    .map(|t| format!(" · <b class=warn>GONE at {t:.1} s</b> (figures as of then)"))
                    .unwrap_or_default()
            );
        };
        if b.source == "metrics" {
            row(&mut o, "broker (from /metrics)".to_string(), b);
        } else if b.per_broker.is_empty() {
            row(&mut o, format!("broker pid {}", b.pid), b);
        } else {
            row(&mut o, format!("{} brokers (sum)", b.pids.len()), b);
            for p in &b.per_broker {
                row(&mut o, format!("broker pid {}", p.pid), p);
            }
        }
    }
    if let Some(t) = &r.transactions {
        let _ = write!(
            o,
            "<tr><td>transactions</td><td style=text-align:left>{}</td></tr>",
            t.summary_line()
        );
    }
    if let Some(sp) = &r.latency_split {
        let _ = write!(
            o,
            "<tr><td>producer split</td><td style=text-align:left>queue avg {} ms (p99 ≤ {}) · socket wait avg {} ms · rtt avg {} ms (p99 ≤ {}) · batches {} msgs / {} B · wire ratio {}</td></tr>",
            ms(sp.queue_avg_ms),
            ms(sp.queue_p99_ms),
            ms(sp.outbuf_avg_ms),
            ms(sp.rtt_avg_ms),
            ms(sp.rtt_p99_ms),
            sp.batch_msgs_avg.map(|v| format!("{v:.1}")).unwrap_or_else(|| "–".into()),
            sp.batch_bytes_avg.map(|v| format!("{v:.0}")).unwrap_or_else(|| "–".into()),
            sp.wire_compression_ratio.map(|v| format!("{v:.2}×")).unwrap_or_else(|| "–".into())
        );
    }
    o
}

fn latency_table(r: &Report) -> String {
    let mut o = String::new();
    o.push_str("<h2>Latency (ms)</h2><table><tr><th></th><th>samples</th><th>min</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>p99.99</th><th>max</th></tr>");
    let lat = [
        ("ack", &r.latency.ack),
        ("ack from intended", &r.latency.ack_intended),
        ("send delay", &r.latency.send_delay),
        ("end-to-end", &r.latency.e2e),
        ("e2e from intended", &r.latency.e2e_intended),
        ("txn commit (EndTxn)", &r.latency.txn_commit),
        ("txn abort (EndTxn)", &r.latency.txn_abort),
    ];
    // The transaction rows only in transactional mode.
    let txn = r.transactions.is_some();
    for (name, l) in lat
        .into_iter()
        .filter(|(n, _)| txn || !n.starts_with("txn"))
    {
        let _ = write!(
            o,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            l.count,
            ms(l.min_ms),
            ms(l.mean_ms),
            ms(l.p50_ms),
            ms(l.p90_ms),
            ms(l.p99_ms),
            ms(l.p99_9_ms),
            ms(l.p99_99_ms),
            ms(l.max_ms)
        );
    }
    o.push_str("</table>");

    o
}

/// The one-second series: throughput, delivery by send time, errors, latency, the producer's
/// split, lag (with the per-partition heatmap) and time lag.
fn time_series(r: &Report) -> String {
    let mut o = String::new();
    let shade = (r.window.warmup_s > 0.0).then_some((0.0, r.window.warmup_s));
    let markers = fault_markers(r);
    let chart = |title, y_label, log_y| Chart {
        title,
        x_label: "seconds since load start",
        y_label,
        log_y,
        x_ticks: None,
        shade,
        markers: markers.clone(),
    };
    o.push_str("<h2>Time series (1 s)</h2>");
    o.push_str(&svg_chart(
        &chart("Throughput", "msg/s", false),
        &[
            series(r, "produced", |i| Some(i.produced_msg_s)),
            series(r, "acked", |i| Some(i.acked_msg_s)),
            series(r, "received", |i| Some(i.received_msg_s)),
        ],
    ));
    o.push_str(&svg_chart(
        &chart(
            "Delivery by send time (records sent in each second: acked, failed)",
            "records",
            false,
        ),
        &[
            series(r, "acked", |i| i.sent_acked.map(|v| v as f64)),
            series(r, "failed", |i| i.sent_failed.map(|v| v as f64)),
        ],
    ));
    let (error_lines, error_kinds) = error_series(r);
    if !error_lines.is_empty() {
        o.push_str(&svg_chart(
            &chart(
                "Client errors per interval by kind (when the client reported them)",
                "errors",
                false,
            ),
            &error_lines,
        ));
        o.push_str(&error_kinds);
    }
    o.push_str(&svg_chart(
        &chart("Latency per interval (log)", "ms", true),
        &[
            series(r, "ack p50", |i| i.ack_p50_ms),
            series(r, "ack p99", |i| i.ack_p99_ms),
            series(r, "e2e p50", |i| i.e2e_p50_ms),
            series(r, "e2e p99", |i| i.e2e_p99_ms),
            series(r, "send delay p99", |i| i.send_delay_p99_ms),
            series(r, "ack p99 by send time", |i| i.sent_ack_p99_ms),
        ],
    ));
    let split = |f: fn(&crate::clientstats::LatencySplit) -> Option<f64>| {
        move |i: &crate::vocab::IntervalSample| i.split.as_ref().and_then(f)
    };
    o.push_str(&svg_chart(
        &chart(
            "Producer latency split, average (librdkafka statistics)",
            "ms",
            false,
        ),
        &[
            series(r, "partition queue", split(|s| s.queue_avg_ms)),
            series(r, "socket wait", split(|s| s.outbuf_avg_ms)),
            series(r, "rtt (wire + broker)", split(|s| s.rtt_avg_ms)),
        ],
    ));
    o.push_str(&svg_chart(
        &chart(
            "Consumer lag (client view: position; broker view: committed offset)",
            "messages",
            false,
        ),
        &[
            series(r, "total", |i| i.lag_total.map(|v| v as f64)),
            series(r, "max partition", |i| {
                i.lag_max_partition.map(|v| v as f64)
            }),
            series(r, "broker view total", |i| {
                i.broker_lag_total.map(|v| v as f64)
            }),
        ],
    ));
    o.push_str(&lag_heatmap(r, shade));
    o.push_str(&svg_chart(
        &chart(
            "Time lag (age of the oldest unconsumed message)",
            "ms",
            false,
        ),
        &[series(r, "time lag", |i| i.time_lag_ms)],
    ));
    o
}

/// CPU and memory of the broker(s) and the bench, and the broker's own scraped latencies.
fn resource_charts(r: &Report) -> String {
    let mut o = String::new();
    let shade = (r.window.warmup_s > 0.0).then_some((0.0, r.window.warmup_s));
    let markers = fault_markers(r);
    let chart = |title, y_label, log_y| Chart {
        title,
        x_label: "seconds since load start",
        y_label,
        log_y,
        x_ticks: None,
        shade,
        markers: markers.clone(),
    };
    // With several brokers: the sum, then one line per broker.
    let pids = r
        .broker_process
        .as_ref()
        .map(|b| b.per_broker.iter().map(|p| p.pid).collect::<Vec<_>>())
        .unwrap_or_default();
    let per_broker = |what: &str, f: fn(&crate::procstat::BrokerTick) -> Option<f64>| {
        pids.iter()
            .map(|&pid| {
                series(r, &format!("{what} pid {pid}"), move |i| {
                    i.brokers.iter().find(|b| b.pid == pid).and_then(f)
                })
            })
            .collect::<Vec<_>>()
    };
    let sum = if pids.is_empty() { "" } else { " (sum)" };
    let mut cpu = vec![
        series(r, &format!("broker{sum}"), |i| i.broker_cpu_pct),
        series(r, "bench client", |i| i.client_cpu_pct),
    ];
    cpu.extend(per_broker("broker", |b| b.cpu_pct));
    o.push_str(&svg_chart(&chart("CPU", "% of one core", false), &cpu));
    let mut mem = vec![
        series(r, &format!("RSS{sum}"), |i| i.broker_rss_mib),
        series(r, &format!("data dir{sum}"), |i| i.broker_disk_mib),
    ];
    mem.extend(per_broker("RSS", |b| b.rss_mib));
    o.push_str(&svg_chart(
        &chart("Broker memory and data", "MiB", false),
        &mem,
    ));

    if let Some(m) = &r.broker_metrics {
        let pts = |f: fn(&crate::brokermetrics::MetricsTick) -> Option<f64>| {
            m.intervals
                .iter()
                .map(|t| (t.elapsed_s, f(t)))
                .collect::<Vec<_>>()
        };
        o.push_str(&svg_chart(
            &chart("Broker side (scraped /metrics, log)", "ms", true),
            &[
                Series {
                    name: "fdatasync p99".into(),
                    points: pts(|t| t.fsync_p99_ms),
                },
                Series {
                    name: "fdatasync p50".into(),
                    points: pts(|t| t.fsync_p50_ms),
                },
                Series {
                    name: "Produce p99".into(),
                    points: pts(|t| t.produce_p99_ms),
                },
            ],
        ));
    }
    o
}

fn quantiles_chart(r: &Report) -> String {
    let mut o = String::new();
    o.push_str("<h2>Latency quantiles (measured window)</h2>");
    let ticks = [50.0, 90.0, 99.0, 99.9, 99.99, 99.999]
        .iter()
        .map(|p: &f64| ((100.0 / (100.0 - p)).log10(), format!("p{p}")))
        .collect();
    o.push_str(&svg_chart(
        &Chart {
            title: "Quantiles (log)",
            x_label: "percentile",
            y_label: "ms",
            log_y: true,
            x_ticks: Some(ticks),
            shade: None,
            markers: Vec::new(),
        },
        &[
            quantile_series("ack", &r.latency.ack),
            quantile_series("ack from intended", &r.latency.ack_intended),
            quantile_series("e2e", &r.latency.e2e),
            quantile_series("e2e from intended", &r.latency.e2e_intended),
        ],
    ));

    o
}

fn reproduce(r: &Report) -> String {
    let mut o = String::new();
    let e = &r.environment;
    let _ = write!(
        o,
        "<h2>Reproduce</h2><p><code>{}</code></p><table><tr><td>sluice</td><td style=text-align:left>{} ({})</td></tr><tr><td>librdkafka</td><td style=text-align:left>{}</td></tr><tr><td>rustc</td><td style=text-align:left>{}</td></tr><tr><td>CPU</td><td style=text-align:left>{} × {}</td></tr><tr><td>kernel</td><td style=text-align:left>{}</td></tr><tr><td>seed</td><td style=text-align:left>{}</td></tr></table>",
        esc(&e.command),
        r.tool.version,
        esc(r.tool.git_sha),
        esc(&e.librdkafka),
        esc(e.rustc),
        e.cores.map(|c| c.to_string()).unwrap_or_default(),
        esc(e.cpu_model.as_deref().unwrap_or("?")),
        esc(e.kernel.as_deref().unwrap_or("?")),
        e.seed
    );
    o
}
