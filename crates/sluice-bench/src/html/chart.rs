//! The SVG charts of the HTML report: line charts on a linear or log axis with the warmup
//! shaded and the faults marked, the per-partition lag heatmap, the latency quantile plot on a
//! log percentile axis, and the overlays of several runs.
//!
//! Guarantees: every text drawn is escaped; a chart with no data says so instead of drawing an
//! empty frame; a `None` point breaks a line rather than drawing it to zero.

use std::fmt::Write as _;

use super::cells::esc;
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

/// One line of a chart: a name and (x, y) points; None breaks the line.
pub(super) struct Series {
    pub(super) name: String,
    pub(super) points: Vec<(f64, Option<f64>)>,
}

pub(super) struct Chart<'a> {
    pub(super) title: &'a str,
    pub(super) x_label: &'a str,
    pub(super) y_label: &'a str,
    pub(super) log_y: bool,
    /// Custom x tick labels (value, text); default: evenly spaced numbers.
    pub(super) x_ticks: Option<Vec<(f64, String)>>,
    /// A shaded x range (the warmup).
    pub(super) shade: Option<(f64, f64)>,
    /// Vertical markers (x, label): the faults, at the time each command started.
    pub(super) markers: Vec<(f64, String)>,
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

/// The plot area's scales: data x range, y range (log10 of it on a log axis).
struct Plot {
    x0: f64,
    x1: f64,
    ly0: f64,
    ly1: f64,
    log_y: bool,
}

impl Plot {
    /// The scales for `series`, with the warmup and every fault on the axis (also where a line
    /// stopped before it, a dead broker's RSS); None when no point can be drawn.
    fn of(c: &Chart<'_>, series: &[Series]) -> Option<Plot> {
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
        if x0 > x1 {
            return None;
        }
        if let Some((a, b)) = c.shade {
            x0 = x0.min(a);
            x1 = x1.max(b.min(x1));
        }
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
        Some(Plot {
            x0,
            x1,
            ly0,
            ly1,
            log_y: c.log_y,
        })
    }

    fn px(&self, x: f64) -> f64 {
        PAD_L + (x - self.x0) / (self.x1 - self.x0) * (W - PAD_L - PAD_R)
    }

    fn py(&self, y: f64) -> f64 {
        let v = if self.log_y { y.max(1e-3).log10() } else { y };
        H - PAD_B - (v - self.ly0) / (self.ly1 - self.ly0) * (H - PAD_T - PAD_B)
    }
}

pub(super) fn svg_chart(c: &Chart<'_>, series: &[Series]) -> String {
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
    let Some(plot) = Plot::of(c, series) else {
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" class="n">no data</text></svg>"#,
            W / 2.0 - 20.0,
            H / 2.0
        );
        return o;
    };
    if let Some((a, b)) = c.shade {
        let (sa, sb) = (plot.px(a.max(plot.x0)), plot.px(b.min(plot.x1)));
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
    draw_axes(&mut o, c, &plot);
    draw_lines(&mut o, c, &plot, series);
    draw_markers(
        &mut o,
        &c.markers,
        (plot.x0, plot.x1),
        |x| plot.px(x),
        H - PAD_B,
    );
    o.push_str("</svg>");
    o
}

/// The grid with its y labels, the x ticks, the x axis and both axis labels.
fn draw_axes(o: &mut String, c: &Chart<'_>, plot: &Plot) {
    let y_ticks: Vec<f64> = if c.log_y {
        (plot.ly0 as i32..=plot.ly1 as i32)
            .map(|e| 10f64.powi(e))
            .collect()
    } else {
        nice_ticks(plot.ly0, plot.ly1, 5)
    };
    for t in y_ticks {
        let y = plot.py(t);
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
        nice_ticks(plot.x0, plot.x1, 8)
            .into_iter()
            .map(|v| (v, fmt_num(v)))
            .collect()
    });
    for (v, label) in xt {
        if v < plot.x0 - 1e-9 || v > plot.x1 + 1e-9 {
            continue;
        }
        let x = plot.px(v);
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
}

/// Each series' line (broken at a missing point, and at zero on a log axis) and its legend.
fn draw_lines(o: &mut String, c: &Chart<'_>, plot: &Plot, series: &[Series]) {
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
                        plot.px(x),
                        plot.py(y)
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

pub(super) fn series(
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
pub(super) fn quantile_series(name: &str, l: &LatencySummary) -> Series {
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
pub(super) fn lag_heatmap(r: &Report, shade: Option<(f64, f64)>) -> String {
    heatmap_of(&r.intervals, shade, &fault_markers(r))
}

/// One heatmap column: its time span and each partition's largest lag in it.
type HeatColumn = (f64, f64, Vec<i64>);

fn heatmap_of(
    intervals: &[crate::vocab::IntervalSample],
    shade: Option<(f64, f64)>,
    markers: &[(f64, String)],
) -> String {
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
    let cols = heat_columns(intervals, rows);
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
    draw_heat_cells(&mut o, &cols, max, cell_h, px);
    draw_heat_frame(&mut o, rows, cell_h, x_end, px);
    let base = PAD_T + cell_h * rows as f64;
    draw_markers(&mut o, markers, (0.0, x_end), px, base);
    let _ = write!(
        o,
        r#"<text x="{}" y="{:.1}" class="a" text-anchor="middle">seconds since load start</text></svg>"#,
        (PAD_L + W - PAD_R) / 2.0,
        h - 4.0
    );
    o
}

/// The intervals as at most `HEATMAP_MAX_COLS` columns (merged ones keep the maximum).
fn heat_columns(intervals: &[crate::vocab::IntervalSample], rows: usize) -> Vec<HeatColumn> {
    const HEATMAP_MAX_COLS: usize = 300;
    let per_col = intervals.len().div_ceil(HEATMAP_MAX_COLS);
    intervals
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
        .collect()
}

/// One cell per (column, partition) with lag, darker = more lag relative to `max`.
fn draw_heat_cells(
    o: &mut String,
    cols: &[HeatColumn],
    max: i64,
    cell_h: f64,
    px: impl Fn(f64) -> f64,
) {
    for (t0, t1, v) in cols {
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
}

/// The heatmap's frame, partition labels and time axis.
fn draw_heat_frame(o: &mut String, rows: usize, cell_h: f64, x_end: f64, px: impl Fn(f64) -> f64) {
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

/// The per-interval error series as chart lines: the `ERROR_KINDS_IN_CHART` most frequent
/// kinds of the run as "kind N" (a kind is too long for the legend; the list under the chart
/// names them) and every other error summed as "other"; nothing when the run had no errors.
pub(super) fn error_series(r: &Report) -> (Vec<Series>, String) {
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
pub(super) fn fault_markers(r: &Report) -> Vec<(f64, String)> {
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
