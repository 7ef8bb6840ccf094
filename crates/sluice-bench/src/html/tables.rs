//! The tables of the HTML report that come after its summary and charts: faults, unavailable
//! partitions, topology, the scraped broker metrics, offline compression and client errors.
//!
//! Guarantees: every text cell is escaped; long tables are capped (`limits`) with a line
//! saying how many rows the JSON has beyond them; broker histograms with no samples are left
//! out and counted.

use std::fmt::Write as _;

use super::cells::{esc, ms};
use crate::limits;
use crate::report::Report;

/// Faults: command, times, exit, output, recovery (nothing without fault commands).
pub(super) fn faults_table(r: &Report) -> String {
    let mut o = String::new();
    let f1 = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "-".into());
    if !r.faults.is_empty() {
        o.push_str("<h2>Faults</h2><table><tr><th>#</th><th>command</th><th>at (measured)</th><th>started / ended (s since load start)</th><th>exit</th><th>output (tail)</th><th>time to recover</th><th>ack stall</th><th>sent after: acked / failed</th></tr>");
        for (i, f) in r.faults.iter().enumerate() {
            let imp = f.impact.as_ref();
            let _ = write!(
                o,
                "<tr><td>{}</td><td style=text-align:left><code>{}</code></td><td>{:.1} s</td><td>{} / {}</td><td>{}</td><td style=text-align:left><pre>{}</pre></td><td>{}</td><td>{}</td><td>{} / {}</td></tr>",
                i + 1,
                esc(&f.command),
                f.at_s,
                f1(f.started_at_s),
                f1(f.ended_at_s),
                f.exit_code.map(|c| c.to_string()).unwrap_or_else(|| esc(f.error.as_deref().unwrap_or("-"))),
                esc(&f.output_tail),
                match imp.and_then(|i| i.time_to_recover_s) {
                    Some(t) => format!("{t:.1} s"),
                    None => "not recovered".into(),
                },
                imp.map(|i| format!("{:.1} s", i.ack_stall_s)).unwrap_or_else(|| "-".into()),
                imp.map(|i| i.acked_after).unwrap_or(0),
                imp.map(|i| i.failed_after).unwrap_or(0),
            );
        }
        let _ = write!(
            o,
            "</table><p>Recovered: the first interval that began at the fault or later with {}.</p>",
            esc(&crate::faults::band_text())
        );
        for (i, f) in r.faults.iter().enumerate() {
            if let Some(n) = f.impact.as_ref().and_then(|i| i.baseline_note.as_deref()) {
                let _ = write!(o, "<p>Fault {}: {}.</p>", i + 1, esc(n));
            }
        }
    }
    o
}

/// The partitions that were unavailable while the others were not (nothing when none were).
pub(super) fn availability_table(a: &crate::availability::AvailabilityReport) -> String {
    let mut o = String::new();
    if a.per_partition.is_empty() {
        return o;
    }
    let _ = write!(
        o,
        "<h2>Unavailable partitions</h2><p>{} of {} partitions had intervals with no ack while the others had acks, or no leader in the topology samples; worst {:.1} s.</p><table><tr><th>partition</th><th>unavailable</th><th>no ack</th><th>no leader</th><th>longest (from)</th><th>first / last (s since load start)</th></tr>",
        a.unavailable_partitions, a.partitions, a.worst_s
    );
    for p in a
        .per_partition
        .iter()
        .take(crate::limits::MAX_TOPOLOGY_ROWS_IN_HTML)
    {
        let _ = write!(
            o,
            "<tr><td style=text-align:left>{}-{}</td><td>{:.1} s</td><td>{:.1} s</td><td>{:.1} s</td><td>{:.1} s ({:.1})</td><td>{:.1} / {:.1}</td></tr>",
            esc(&p.topic),
            p.partition,
            p.unavailable_s,
            p.no_ack_s,
            p.no_leader_s,
            p.longest_s,
            p.longest_from_s,
            p.first_at_s,
            p.last_at_s
        );
    }
    o.push_str("</table>");
    o
}

/// Brokers (leaders at start and end), each partition's leader, replicas and ISR at start and
/// end (at most `limits::MAX_TOPOLOGY_ROWS_IN_HTML` rows), and the changes.
pub(super) fn topology_section(t: &crate::topology::TopologyReport) -> String {
    let mut o = String::from("<h2>Topology</h2>");
    let Some(first) = t.start.as_ref().or(t.end.as_ref()) else {
        let why = t
            .start_error
            .as_deref()
            .or(t.end_error.as_deref())
            .unwrap_or("not taken");
        let _ = write!(o, "<p class=warn>unknown: {}</p>", esc(why));
        return o;
    };
    let (lead_a, lead_b) = (
        t.start.as_ref().map(|x| x.leaders_per_broker()),
        t.end.as_ref().map(|x| x.leaders_per_broker()),
    );
    let led = |m: &Option<std::collections::BTreeMap<i32, u32>>, id: i32| {
        m.as_ref()
            .map(|m| m.get(&id).copied().unwrap_or(0).to_string())
            .unwrap_or_else(|| "–".into())
    };
    let _ = write!(
        o,
        "<p>controller (as Metadata reports it) {} · cluster <code>{}</code></p><table><tr><th>broker</th><th>address</th><th>rack</th><th>leaders at start</th><th>leaders at end</th></tr>",
        first.controller_id,
        esc(first.cluster_id.as_deref().unwrap_or("–"))
    );
    for b in &first.brokers {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}:{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            b.id,
            esc(&b.host),
            b.port,
            esc(b.rack.as_deref().unwrap_or("–")),
            led(&lead_a, b.id),
            led(&lead_b, b.id)
        );
    }
    o.push_str("</table><table><tr><th>partition</th><th>leader</th><th>replicas</th><th>ISR at start</th><th>ISR at end</th></tr>");
    let ids = |v: &[i32]| v.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    for p in first
        .partitions
        .iter()
        .take(limits::MAX_TOPOLOGY_ROWS_IN_HTML)
    {
        let end = t.end.as_ref().and_then(|e| {
            e.partitions
                .iter()
                .find(|q| q.topic == p.topic && q.partition == p.partition)
        });
        let leader = match end {
            Some(q) if q.leader != p.leader => format!("{} → {}", p.leader, q.leader),
            _ => p.leader.to_string(),
        };
        let _ = write!(
            o,
            "<tr><td>{}/{}</td><td>{leader}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&p.topic),
            p.partition,
            ids(&p.replicas),
            ids(&p.isr),
            end.map(|q| ids(&q.isr)).unwrap_or_else(|| "–".into())
        );
    }
    o.push_str("</table>");
    if first.partitions.len() > limits::MAX_TOPOLOGY_ROWS_IN_HTML {
        let _ = write!(
            o,
            "<p>… and {} more partitions (all in the JSON)</p>",
            first.partitions.len() - limits::MAX_TOPOLOGY_ROWS_IN_HTML
        );
    }
    if let Some(e) = &t.end_error {
        let _ = write!(o, "<p class=warn>end snapshot failed: {}</p>", esc(e));
    } else if t.changes.is_empty() {
        o.push_str("<p>no change between the start and the end of the run</p>");
    } else {
        o.push_str("<p>changes between the start and the end of the run:</p><ul>");
        for c in &t.changes {
            let _ = write!(
                o,
                "<li>{} <code>{}</code>: {} → {}</li>",
                c.what,
                esc(&c.subject),
                esc(&c.before),
                esc(&c.after)
            );
        }
        if t.changes_not_listed > 0 {
            let _ = write!(o, "<li>… and {} more</li>", t.changes_not_listed);
        }
        o.push_str("</ul>");
    }
    o.push_str(&during_table(t));
    o
}

/// The topology changes seen while the run went on (a broker fenced and back, leaders
/// moving, ISRs shrinking), with when the snapshot that showed each was taken.
fn during_table(t: &crate::topology::TopologyReport) -> String {
    let mut o = String::new();
    if t.samples_during == 0 {
        return o;
    }
    let _ = write!(
        o,
        "<p>during the run: {} change(s) in {} snapshot(s) ({} failed)</p>",
        t.during.len(),
        t.samples_during,
        t.failed_samples_during
    );
    if t.during.is_empty() {
        return o;
    }
    o.push_str("<table class=during><tr><th>at (s since load start)</th><th>what</th><th>subject</th><th>before → after</th></tr>");
    for c in t.during.iter().take(limits::MAX_TOPOLOGY_CHANGES_IN_HTML) {
        let _ = write!(
            o,
            "<tr><td>{:.1}</td><td>{}</td><td><code>{}</code></td><td>{} → {}</td></tr>",
            c.at_s,
            c.change.what,
            esc(&c.change.subject),
            esc(&c.change.before),
            esc(&c.change.after)
        );
    }
    o.push_str("</table>");
    if t.during.len() > limits::MAX_TOPOLOGY_CHANGES_IN_HTML {
        let _ = write!(
            o,
            "<p>… and {} more (all in the JSON)</p>",
            t.during.len() - limits::MAX_TOPOLOGY_CHANGES_IN_HTML
        );
    }
    o
}

/// The scraped broker histograms that saw samples in the run (a broker exports one per API
/// and most APIs see no traffic in a benchmark), with how many were left out.
pub(super) fn broker_metrics_table(r: &Report) -> String {
    let mut o = String::new();
    if let Some(m) = &r.broker_metrics {
        o.push_str("<h2>Broker metrics (scraped)</h2><table><tr><th>histogram</th><th>count</th><th>mean</th><th>p50</th><th>p99</th><th>unit</th></tr>");
        let (used, idle): (Vec<_>, Vec<_>) = m.histograms.iter().partition(|(_, h)| h.count > 0.0);
        for (name, h) in used {
            let _ = write!(
                o,
                "<tr><td style=text-align:left>{}</td><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(name),
                h.count,
                ms(h.mean),
                ms(h.p50),
                ms(h.p99),
                h.unit
            );
        }
        let _ = write!(
            o,
            "</table><p>{} histograms with no samples not listed (all in the JSON). {} of {} scrapes failed{}.</p>",
            idle.len(),
            m.failed_scrapes,
            m.scrapes,
            m.last_error
                .as_deref()
                .map(|e| format!(" (last: {})", esc(e)))
                .unwrap_or_default()
        );
    }
    o
}

/// SSP's offline compression table for this run's payloads.
pub(super) fn compression_table(r: &Report) -> String {
    let c = &r.compression_offline;
    let mut o = format!(
        "<h2>Offline compression</h2><p>{} messages of this run's {} payload ({} bytes), concatenated and compressed once per codec (an upper bound on what per-batch compression achieves).</p><table><tr><th>codec</th><th>compressed bytes</th><th>ratio</th><th>space saved</th><th>encode µs</th></tr>",
        c.sample_count,
        r.scenario.payload.name(),
        c.raw_bytes
    );
    for (name, x) in c.rows() {
        let _ = write!(
            o,
            "<tr><td>{name}</td><td>{}</td><td>{:.2}×</td><td>{:.1}%</td><td>{}</td></tr>",
            x.compressed_bytes, x.ratio, x.space_saved_pct, x.encode_micros
        );
    }
    o.push_str("</table>");
    if let Some(w) = r
        .latency_split
        .as_ref()
        .and_then(|s| s.wire_compression_ratio)
    {
        let _ = write!(
            o,
            "<p>On the wire ({} batches, librdkafka statistics: message bytes ÷ bytes sent, protocol overhead included): {w:.2}×</p>",
            r.scenario.compression.config_value()
        );
    }
    o
}

/// Every client error kind with its count, first and last time, and an example.
pub(super) fn error_kinds_table(r: &Report) -> String {
    let mut o = String::new();
    if !r.error_kinds.is_empty() {
        o.push_str("<h2>Client errors (by kind)</h2><table><tr><th>count</th><th>class</th><th>first / last (s)</th><th>kind</th><th>example</th></tr>");
        for k in &r.error_kinds {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{:.1} / {:.1}</td><td style=text-align:left>{}</td><td style=text-align:left>{}</td></tr>",
                k.count,
                k.class,
                k.first_at_s,
                k.last_at_s,
                esc(&k.kind),
                esc(&k.example)
            );
        }
        o.push_str("</table>");
    }
    o
}
