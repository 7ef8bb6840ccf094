//! The self-contained HTML report (`--html FILE`): one file, inline CSS and SVG, no script and
//! no network, so it opens anywhere and can be attached to an issue. Charts are drawn here
//! from the same `Report` the JSON is made of: time series (throughput, latency, lag, broker
//! resources, with the warmup shaded), a per-partition lag heatmap, a latency quantile plot on
//! a log percentile axis and the offline compression table.

use std::fmt::Write as _;

use crate::hist::LatencySummary;
use crate::limits;
use crate::report::Report;

const W: f64 = 720.0;
const H: f64 = 250.0;
const PAD_L: f64 = 64.0;
const PAD_R: f64 = 16.0;
const PAD_T: f64 = 44.0;
const PAD_B: f64 = 36.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One line of a chart: a name and (x, y) points; None breaks the line.
struct Series {
    name: String,
    points: Vec<(f64, Option<f64>)>,
}

struct Chart<'a> {
    title: &'a str,
    x_label: &'a str,
    y_label: &'a str,
    log_y: bool,
    /// Custom x tick labels (value, text); default: evenly spaced numbers.
    x_ticks: Option<Vec<(f64, String)>>,
    /// A shaded x range (the warmup).
    shade: Option<(f64, f64)>,
    /// Vertical markers (x, label): the faults, at the time each command started.
    markers: Vec<(f64, String)>,
}

fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    // Also catches NaN bounds.
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(raw);
    let mut t = (lo / step).ceil() * step;
    let mut v = Vec::new();
    while t <= hi + step * 1e-9 && v.len() < 50 {
        v.push(t);
        t += step;
    }
    v
}

fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn svg_chart(c: &Chart<'_>, series: &[Series]) -> String {
    let pts = series
        .iter()
        .flat_map(|s| s.points.iter().filter_map(|&(x, y)| y.map(|y| (x, y))));
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for (x, y) in pts {
        if c.log_y && y <= 0.0 {
            continue;
        }
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img"><title>{}</title>"#,
        esc(c.title)
    );
    let _ = write!(
        o,
        r#"<text x="{PAD_L}" y="18" class="t">{}</text>"#,
        esc(c.title)
    );
    if x0 > x1 {
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" class="n">no data</text></svg>"#,
            W / 2.0 - 20.0,
            H / 2.0
        );
        return o;
    }
    if let Some((a, b)) = c.shade {
        x0 = x0.min(a);
        x1 = x1.max(b.min(x1));
    }
    // Every fault is on the axis, also where a line stopped before it (a dead broker's RSS).
    for (x, _) in &c.markers {
        x0 = x0.min(*x);
        x1 = x1.max(*x);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let (ly0, ly1) = if c.log_y {
        let lo = y0.max(1e-3).log10().floor();
        let hi = y1.max(1e-3).log10().ceil().max(lo + 1.0);
        (lo, hi)
    } else {
        let hi = if y1 <= 0.0 { 1.0 } else { y1 * 1.08 };
        (0.0f64.min(y0), hi)
    };
    let px = |x: f64| PAD_L + (x - x0) / (x1 - x0) * (W - PAD_L - PAD_R);
    let py = |y: f64| {
        let v = if c.log_y { y.max(1e-3).log10() } else { y };
        H - PAD_B - (v - ly0) / (ly1 - ly0) * (H - PAD_T - PAD_B)
    };
    if let Some((a, b)) = c.shade {
        let (sa, sb) = (px(a.max(x0)), px(b.min(x1)));
        if sb > sa {
            let _ = write!(
                o,
                r##"<rect x="{sa:.1}" y="{PAD_T}" width="{:.1}" height="{}" fill="#eee"/><text x="{:.1}" y="{}" class="n">warmup</text>"##,
                sb - sa,
                H - PAD_T - PAD_B,
                sa + 3.0,
                PAD_T + 12.0
            );
        }
    }
    // Axes and grid.
    let y_ticks: Vec<f64> = if c.log_y {
        (ly0 as i32..=ly1 as i32).map(|e| 10f64.powi(e)).collect()
    } else {
        nice_ticks(ly0, ly1, 5)
    };
    for t in y_ticks {
        let y = py(t);
        let _ = write!(
            o,
            r##"<line x1="{PAD_L}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" class="a" text-anchor="end">{}</text>"##,
            W - PAD_R,
            PAD_L - 4.0,
            y + 4.0,
            fmt_num(t)
        );
    }
    let xt = c.x_ticks.clone().unwrap_or_else(|| {
        nice_ticks(x0, x1, 8)
            .into_iter()
            .map(|v| (v, fmt_num(v)))
            .collect()
    });
    for (v, label) in xt {
        if v < x0 - 1e-9 || v > x1 + 1e-9 {
            continue;
        }
        let x = px(v);
        let _ = write!(
            o,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{}" y2="{}" stroke="#999"/><text x="{x:.1}" y="{}" class="a" text-anchor="middle">{}</text>"##,
            H - PAD_B,
            H - PAD_B + 4.0,
            H - PAD_B + 16.0,
            esc(&label)
        );
    }
    let _ = write!(
        o,
        r##"<line x1="{PAD_L}" x2="{}" y1="{}" y2="{}" stroke="#333"/>"##,
        W - PAD_R,
        H - PAD_B,
        H - PAD_B
    );
    let _ = write!(
        o,
        r#"<text x="{}" y="{}" class="a" text-anchor="middle">{}</text>"#,
        (PAD_L + W - PAD_R) / 2.0,
        H - 4.0,
        esc(c.x_label)
    );
    let _ = write!(
        o,
        r#"<text x="12" y="{}" class="a" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        H / 2.0,
        H / 2.0,
        esc(c.y_label)
    );
    // Lines and legend.
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut d = String::new();
        let mut pen_down = false;
        for &(x, y) in &s.points {
            match y.filter(|v| !c.log_y || *v > 0.0) {
                Some(y) => {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1} ",
                        if pen_down { "L" } else { "M" },
                        px(x),
                        py(y)
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        if !d.is_empty() {
            let _ = write!(
                o,
                r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.6"/>"#
            );
        }
        let lx = PAD_L + 8.0 + i as f64 * 130.0;
        let _ = write!(
            o,
            r#"<rect x="{lx}" y="29" width="10" height="3" fill="{color}"/><text x="{}" y="34" class="a">{}</text>"#,
            lx + 14.0,
            esc(&s.name)
        );
    }
    draw_markers(&mut o, &c.markers, (x0, x1), px, H - PAD_B);
    o.push_str("</svg>");
    o
}

/// The fault markers inside the x range `[x0, x1]`: a dashed red line from the top of the plot
/// down to `bottom`, labelled.
fn draw_markers(
    o: &mut String,
    markers: &[(f64, String)],
    (x0, x1): (f64, f64),
    px: impl Fn(f64) -> f64,
    bottom: f64,
) {
    for (x, label) in markers {
        if *x < x0 - 1e-9 || *x > x1 + 1e-9 {
            continue;
        }
        let mx = px(*x);
        let _ = write!(
            o,
            r##"<line x1="{mx:.1}" x2="{mx:.1}" y1="{PAD_T}" y2="{bottom:.1}" stroke="#c00" stroke-dasharray="4 3" class="fault"/><text x="{:.1}" y="{}" class="a" fill="#c00">{}</text>"##,
            mx + 3.0,
            PAD_T + 24.0,
            esc(label)
        );
    }
}

fn series(
    r: &Report,
    name: &str,
    f: impl Fn(&crate::vocab::IntervalSample) -> Option<f64>,
) -> Series {
    Series {
        name: name.to_string(),
        points: r.intervals.iter().map(|i| (i.elapsed_s, f(i))).collect(),
    }
}

/// x = log10(100 / (100 - p)) so 90, 99, 99.9 … are evenly spaced.
fn quantile_series(name: &str, l: &LatencySummary) -> Series {
    let points = l
        .quantiles_ms
        .iter()
        .filter_map(|(k, v)| {
            k.parse::<f64>()
                .ok()
                .filter(|p| *p < 100.0)
                .map(|p| ((100.0 / (100.0 - p)).log10(), Some(*v)))
        })
        .collect::<Vec<_>>();
    let mut points = points;
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    Series {
        name: name.to_string(),
        points,
    }
}

/// Per-partition lag over time: one row per partition (the first
/// `limits::MAX_PARTITIONS_IN_SERIES`), one column per interval (intervals merged, keeping the
/// maximum, when there are more than `HEATMAP_MAX_COLS`), darker = more lag relative to the
/// run's largest partition lag.
fn lag_heatmap(r: &Report, shade: Option<(f64, f64)>) -> String {
    heatmap_of(&r.intervals, shade, &fault_markers(r))
}

fn heatmap_of(
    intervals: &[crate::vocab::IntervalSample],
    shade: Option<(f64, f64)>,
    markers: &[(f64, String)],
) -> String {
    const HEATMAP_MAX_COLS: usize = 300;
    let rows = intervals
        .iter()
        .map(|i| i.lag_per_partition.len())
        .max()
        .unwrap_or(0);
    let mut o = String::new();
    let title = "Consumer lag per partition (client view)";
    if rows == 0 || intervals.is_empty() {
        let _ = write!(
            o,
            r#"<svg viewBox="0 0 {W} 60" width="{W}" height="60" role="img"><title>{title}</title><text x="{PAD_L}" y="18" class="t">{title}</text><text x="{PAD_L}" y="44" class="n">no per-partition lag samples</text></svg>"#
        );
        return o;
    }
    let n = intervals.len();
    let per_col = n.div_ceil(HEATMAP_MAX_COLS);
    let cols: Vec<(f64, f64, Vec<i64>)> = intervals
        .chunks(per_col)
        .map(|c| {
            let t0 = c.first().map(|i| i.elapsed_s - i.interval_s).unwrap_or(0.0);
            let t1 = c.last().map(|i| i.elapsed_s).unwrap_or(0.0);
            let mut v = vec![0i64; rows];
            for i in c {
                for (p, l) in i.lag_per_partition.iter().enumerate() {
                    v[p] = v[p].max(*l);
                }
            }
            (t0.max(0.0), t1, v)
        })
        .collect();
    let max = cols
        .iter()
        .flat_map(|c| c.2.iter().copied())
        .max()
        .unwrap_or(0);
    let cell_h = (180.0 / rows as f64).clamp(3.0, 14.0);
    let h = PAD_T + cell_h * rows as f64 + PAD_B;
    let x_end = cols.last().map(|c| c.1).unwrap_or(1.0).max(1e-9);
    let px = |x: f64| PAD_L + x / x_end * (W - PAD_L - PAD_R);
    let _ = write!(
        o,
        r#"<svg viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img" class="heatmap"><title>{title}</title><text x="{PAD_L}" y="18" class="t">{title}</text><text x="{}" y="34" class="a">{}</text>"#,
        PAD_L + 8.0,
        if max > 0 {
            format!("darkest = {max} messages behind the high watermark")
        } else {
            "lag stayed at 0 on every partition".to_string()
        }
    );
    if let Some((a, b)) = shade {
        let (sa, sb) = (px(a), px(b.min(x_end)));
        if sb > sa {
            let _ = write!(
                o,
                r##"<rect x="{sa:.1}" y="{PAD_T}" width="{:.1}" height="{:.1}" fill="#eee"/>"##,
                sb - sa,
                cell_h * rows as f64
            );
        }
    }
    for (t0, t1, v) in &cols {
        let (x0, x1) = (px(*t0), px(*t1));
        for (p, l) in v.iter().enumerate() {
            if *l <= 0 || max <= 0 {
                continue;
            }
            let a = 0.12 + 0.88 * (*l as f64 / max as f64);
            let _ = write!(
                o,
                r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#d62728" fill-opacity="{a:.2}"><title>p{p} at {t1:.0} s: {l}</title></rect>"##,
                PAD_T + cell_h * p as f64,
                (x1 - x0).max(0.5),
                cell_h
            );
        }
    }
    // Frame, partition labels and the time axis.
    let _ = write!(
        o,
        r##"<rect x="{PAD_L}" y="{PAD_T}" width="{}" height="{:.1}" fill="none" stroke="#999"/>"##,
        W - PAD_L - PAD_R,
        cell_h * rows as f64
    );
    let label_every = (rows / 8).max(1);
    for p in (0..rows).step_by(label_every) {
        let _ = write!(
            o,
            r#"<text x="{}" y="{:.1}" class="a" text-anchor="end">p{p}</text>"#,
            PAD_L - 4.0,
            PAD_T + cell_h * (p as f64 + 0.5) + 4.0
        );
    }
    let base = PAD_T + cell_h * rows as f64;
    for t in nice_ticks(0.0, x_end, 8) {
        let x = px(t);
        let _ = write!(
            o,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{base:.1}" y2="{:.1}" stroke="#999"/><text x="{x:.1}" y="{:.1}" class="a" text-anchor="middle">{}</text>"##,
            base + 4.0,
            base + 16.0,
            fmt_num(t)
        );
    }
    draw_markers(&mut o, markers, (0.0, x_end), px, base);
    let _ = write!(
        o,
        r#"<text x="{}" y="{:.1}" class="a" text-anchor="middle">seconds since load start</text></svg>"#,
        (PAD_L + W - PAD_R) / 2.0,
        h - 4.0
    );
    o
}

/// A/B and sweep overlays: per-interval throughput and e2e p99 of several runs on shared axes
/// (the first `COLORS.len()` runs, so every line keeps its own colour), with every run's faults.
pub fn overlays(runs: &[(String, &Report)]) -> String {
    let runs = &runs[..runs.len().min(COLORS.len())];
    let markers = overlay_markers(runs.iter().map(|(_, r)| r.faults.as_slice()));
    let chart = |title, y_label, log_y| Chart {
        title,
        x_label: "seconds since load start",
        y_label,
        log_y,
        x_ticks: None,
        shade: None,
        markers: markers.clone(),
    };
    let mut o = String::from("<h2>Runs overlaid (1 s intervals)</h2>");
    o.push_str(&svg_chart(
        &chart("Received per interval", "msg/s", false),
        &runs
            .iter()
            .map(|(name, r)| series(r, name, |i| Some(i.received_msg_s)))
            .collect::<Vec<_>>(),
    ));
    o.push_str(&svg_chart(
        &chart("End-to-end p99 per interval (log)", "ms", true),
        &runs
            .iter()
            .map(|(name, r)| series(r, name, |i| i.e2e_p99_ms))
            .collect::<Vec<_>>(),
    ));
    o
}

/// SSP's offline compression table for this run's payloads.
fn compression_table(r: &Report) -> String {
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

fn ms(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "–".into())
}

/// A count, or a dash when it was not measured.
fn count(v: Option<i64>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "–".into())
}

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

/// The sections of one run's report (no document wrapper).
/// Brokers (leaders at start and end), each partition's leader, replicas and ISR at start and
/// end (at most `limits::MAX_TOPOLOGY_ROWS_IN_HTML` rows), and the changes.
fn topology_section(t: &crate::topology::TopologyReport) -> String {
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

/// The per-interval error series as chart lines: the `ERROR_KINDS_IN_CHART` most frequent
/// kinds of the run as "kind N" (a kind is too long for the legend; the list under the chart
/// names them) and every other error summed as "other"; nothing when the run had no errors.
fn error_series(r: &Report) -> (Vec<Series>, String) {
    let other = crate::vocab::OTHER_ERRORS;
    let mut totals: std::collections::BTreeMap<&str, u64> = Default::default();
    for (k, n) in r.intervals.iter().flat_map(|i| &i.errors_by_kind) {
        if k != other {
            *totals.entry(k.as_str()).or_default() += n;
        }
    }
    let mut ranked: Vec<(&str, u64)> = totals.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    ranked.truncate(limits::ERROR_KINDS_IN_CHART);
    let any = r.intervals.iter().any(|i| !i.errors_by_kind.is_empty());
    if !any {
        return (Vec::new(), String::new());
    }
    let mut lines: Vec<Series> = ranked
        .iter()
        .enumerate()
        .map(|(n, (k, _))| {
            series(r, &format!("kind {}", n + 1), |i| {
                Some(i.errors_by_kind.get(*k).copied().unwrap_or(0) as f64)
            })
        })
        .collect();
    let shown: Vec<&str> = ranked.iter().map(|(k, _)| *k).collect();
    lines.push(series(r, other, |i| {
        Some(
            i.errors_by_kind
                .iter()
                .filter(|(k, _)| !shown.contains(&k.as_str()))
                .map(|(_, n)| *n as f64)
                .sum(),
        )
    }));
    let mut names = String::from("<ol class=kinds>");
    for (k, n) in &ranked {
        let _ = write!(names, "<li><code>{}</code> ({n})</li>", esc(k));
    }
    names.push_str("</ol>");
    (lines, names)
}

/// The faults as chart markers: where each command started (seconds since load start).
fn fault_markers(r: &Report) -> Vec<(f64, String)> {
    markers_of(&r.faults)
}

fn markers_of(faults: &[crate::faults::FaultRecord]) -> Vec<(f64, String)> {
    faults
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.started_at_s.map(|t| (t, format!("fault {}", i + 1))))
        .collect()
}

/// The faults of several overlaid runs: each run's own, except that the same fault (same
/// number) started within `limits::OVERLAY_MARKER_MERGE` of one already drawn is drawn once, as
/// in a sweep where every variant runs the same fault commands.
fn overlay_markers<'a>(
    runs: impl Iterator<Item = &'a [crate::faults::FaultRecord]>,
) -> Vec<(f64, String)> {
    let merge = limits::OVERLAY_MARKER_MERGE.as_secs_f64();
    let mut out: Vec<(f64, String)> = Vec::new();
    for faults in runs {
        for (t, label) in markers_of(faults) {
            if !out
                .iter()
                .any(|(u, l)| *l == label && (u - t).abs() <= merge)
            {
                out.push((t, label));
            }
        }
    }
    out
}

/// The partitions that were unavailable while the others were not (nothing when none were).
fn availability_table(a: &crate::availability::AvailabilityReport) -> String {
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

/// Faults (command, times, exit, output, recovery), error kinds and broker metrics.
fn faults_section(r: &Report) -> String {
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
    o.push_str(&availability_table(&r.availability));
    if let Some(m) = &r.broker_metrics {
        o.push_str("<h2>Broker metrics (scraped)</h2><table><tr><th>histogram</th><th>count</th><th>mean</th><th>p50</th><th>p99</th><th>unit</th></tr>");
        for (name, h) in &m.histograms {
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
            "</table><p>{} of {} scrapes failed{}.</p>",
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

pub fn body(r: &Report) -> String {
    let shade = (r.window.warmup_s > 0.0).then_some((0.0, r.window.warmup_s));
    let markers = fault_markers(r);
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
    o.push_str(&topology_section(&r.topology));
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
    o.push_str("</table>");

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

    let chart = |title, y_label, log_y| Chart {
        title,
        x_label: "seconds since load start",
        y_label,
        log_y,
        x_ticks: None,
        shade,
        markers: markers.clone(),
    };
    o.push_str(&faults_section(r));
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

    o.push_str(&compression_table(r));

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_escapes_and_handles_empty_and_log_data() {
        let c = Chart {
            title: "a<b",
            x_label: "x",
            y_label: "y",
            log_y: true,
            x_ticks: None,
            shade: Some((0.0, 1.0)),
            markers: Vec::new(),
        };
        let empty = svg_chart(&c, &[]);
        assert!(empty.contains("no data") && empty.contains("a&lt;b") && !empty.contains("a<b"));
        let s = Series {
            name: "s".into(),
            points: vec![
                (0.0, Some(0.0)),
                (1.0, Some(10.0)),
                (2.0, None),
                (3.0, Some(1000.0)),
            ],
        };
        let svg = svg_chart(&c, &[s]);
        // Two separate line pieces (the None breaks the line; 0 is skipped on a log axis).
        assert_eq!(svg.matches('M').count(), 2, "{svg}");
        assert!(svg.ends_with("</svg>"));
    }

    #[test]
    fn heatmap_cells_follow_the_per_partition_lag() {
        let lags: [&[i64]; 3] = [&[0, 5], &[10, 0], &[0, 0]];
        let intervals: Vec<crate::vocab::IntervalSample> = lags
            .iter()
            .enumerate()
            .map(|(i, l)| crate::vocab::IntervalSample {
                elapsed_s: i as f64 + 1.0,
                interval_s: 1.0,
                lag_per_partition: l.to_vec(),
                ..Default::default()
            })
            .collect();
        let svg = heatmap_of(&intervals, None, &[]);
        // One cell per (interval, partition) with lag; the largest is fully opaque.
        assert_eq!(svg.matches("<rect x=").count() - 1, 2, "{svg}");
        assert!(svg.contains(r#"fill-opacity="1.00""#));
        assert!(svg.contains("darkest = 10"));
        assert!(heatmap_of(&[], None, &[]).contains("no per-partition lag"));
        // Faults are marked on the heatmap as on the line charts (one outside the run is not).
        let marked = heatmap_of(
            &intervals,
            None,
            &[(1.5, "fault 1".into()), (99.0, "fault 2".into())],
        );
        assert_eq!(marked.matches(r#"class="fault""#).count(), 1, "{marked}");
        assert!(marked.contains(">fault 1<") && !marked.contains(">fault 2<"));
    }

    #[test]
    fn overlaid_runs_carry_every_runs_faults_once() {
        let fault = |t: f64| crate::faults::FaultRecord {
            started_at_s: Some(t),
            ..Default::default()
        };
        // A sweep's two variants ran the same two faults a few ms apart; a third run had its
        // first fault 5 s later; a fault that never started is not drawn.
        let a = vec![fault(3.0), fault(6.0)];
        let b = vec![fault(3.02), fault(6.01)];
        let c = vec![fault(8.0), crate::faults::FaultRecord::default()];
        let m = overlay_markers([a.as_slice(), b.as_slice(), c.as_slice()].into_iter());
        assert_eq!(
            m,
            vec![
                (3.0, "fault 1".to_string()),
                (6.0, "fault 2".into()),
                (8.0, "fault 1".into())
            ]
        );
        let chart = Chart {
            title: "t",
            x_label: "seconds since load start",
            y_label: "y",
            log_y: false,
            x_ticks: None,
            shade: None,
            markers: m,
        };
        let line = Series {
            name: "s".into(),
            points: (0..10).map(|t| (t as f64, Some(1.0))).collect(),
        };
        let faults = |svg: String| svg.matches(r#"class="fault""#).count();
        assert_eq!(faults(svg_chart(&chart, &[line])), 3);
        // A line that stopped before the faults (a broker that died) still shows them all.
        let short = Series {
            name: "s".into(),
            points: (0..3).map(|t| (t as f64, Some(1.0))).collect(),
        };
        assert_eq!(faults(svg_chart(&chart, &[short])), 3);
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t = nice_ticks(0.0, 97.0, 5);
        assert_eq!(t.first().copied(), Some(0.0));
        assert!(t.last().copied().unwrap_or(0.0) <= 97.0 && t.len() >= 4);
    }
}
