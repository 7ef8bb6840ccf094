//! Several runs in one invocation: a sweep (one run per preset variant), A/B targets (the same
//! seeded scenario on each broker, in A B B A order so drift over time hits both alike), or
//! both. Produces the `sluice-bench-set/1` document: every run's full report plus a comparison
//! of key metrics per (variant, target) — mean, median, min, max and a 95% bootstrap
//! confidence interval of the mean over that pair's runs — and, with several targets, the ratio
//! of each target's mean to the first target's with a bootstrap confidence interval of the ratio
//! and a verdict per metric ("A faster", "B faster", "no difference", …).
//!
//! The bootstrap is deterministic: a fixed seed (`limits::BOOTSTRAP_SEED`, mixed with the metric
//! name) and `limits::BOOTSTRAP_RESAMPLES` resamples, so the same runs always give the same
//! intervals. Repeats of A and B are resampled independently (the percentile method); with fewer
//! than two runs on either side there is no interval and the verdict says so.
//!
//! Runs are only comparable when the client did the same work in each: the set warns when the
//! producers' wire compression ratios of two targets of one variant, or of the repeats of one
//! target, are more than `limits::WIRE_RATIO_SPREAD_MAX` apart (`wire_ratio_warnings`), e.g.
//! when a client compresses against one broker and silently not against the other.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::bootstrap::{bootstrap_mean_ci, bootstrap_ratio_ci, mean, median, seed_for, verdict};
use crate::compression::ratios_differ;
use crate::limits;
use crate::report::Report;

pub const SET_SCHEMA: &str = "sluice-bench-set/1";

/// The metrics compared across runs (names as in `gate::metric_names`).
pub const COMPARE_METRICS: [&str; 14] = [
    "produced_msg_s",
    "received_msg_s",
    "p50_ack_ms",
    "p99_ack_ms",
    "p999_ack_ms",
    "max_ack_ms",
    "p50_e2e_ms",
    "p99_e2e_ms",
    "p999_e2e_ms",
    "max_e2e_ms",
    "p99_e2e_intended_ms",
    "lost",
    "broker_cpu_ms_per_mib",
    "broker_peak_rss_mib",
];

/// Where each run went: the variant label (sweeps) and the target's spec (A/B).
#[derive(Debug, Clone, Serialize)]
pub struct RunKey {
    pub label: Option<String>,
    pub target: String,
}

#[derive(Debug, Serialize)]
pub struct Stat {
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub median: Option<f64>,
    /// 95% bootstrap confidence interval of the mean; null with fewer than 2 values.
    pub ci95_lo: Option<f64>,
    pub ci95_hi: Option<f64>,
    /// Runs that measured this metric.
    pub n: usize,
}

#[derive(Debug, Serialize)]
pub struct Row {
    pub label: Option<String>,
    pub target: String,
    pub runs: usize,
    pub metrics: BTreeMap<&'static str, Stat>,
}

#[derive(Debug, Serialize)]
pub struct Ratio {
    pub label: Option<String>,
    pub target: String,
    pub baseline_target: String,
    /// target mean / baseline target mean; below 1 means smaller (faster for latencies).
    pub ratios: BTreeMap<&'static str, Option<f64>>,
    /// 95% bootstrap confidence interval of each ratio, `[lo, hi]`; null with fewer than two
    /// runs on either side.
    pub ratio_ci95: BTreeMap<&'static str, Option<[f64; 2]>>,
    /// Per metric, with A the baseline target and B this row's target: "A faster", "B faster"
    /// (latency, throughput), "A better", "B better" (loss, CPU, memory), "no difference" (the
    /// interval contains 1), "inconclusive (1 run)", or "n/a" (not measured).
    pub verdicts: BTreeMap<&'static str, String>,
}

#[derive(Debug, Serialize)]
pub struct RunSet {
    pub schema: &'static str,
    pub preset: String,
    pub started_at_utc: String,
    pub targets: Vec<String>,
    /// Run order as (label, target); A/B uses A B B A.
    pub order: Vec<RunKey>,
    pub interrupted: bool,
    pub rows: Vec<Row>,
    pub ratios: Vec<Ratio>,
    /// Cross-run gates (`metric@run`), judged once over all runs; per-run gates are in each run.
    pub gates: Vec<crate::gate::GateResult>,
    /// The set's own warnings (runs that are not like for like, see `wire_ratio_warnings`),
    /// then every run's warnings prefixed with `run N (name): `.
    pub warnings: Vec<String>,
    pub runs: Vec<Report>,
}

/// Target order for A/B: forward then backward (A B B A, A B C C B A); one target runs once.
pub fn abba(targets: usize) -> Vec<usize> {
    if targets <= 1 {
        return vec![0];
    }
    (0..targets).chain((0..targets).rev()).collect()
}

fn stat(values: &[Option<f64>], name: &str) -> Stat {
    let v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.is_empty() {
        return Stat {
            mean: None,
            min: None,
            max: None,
            median: None,
            ci95_lo: None,
            ci95_hi: None,
            n: 0,
        };
    }
    let ci = bootstrap_mean_ci(&v, limits::BOOTSTRAP_RESAMPLES, seed_for(name));
    Stat {
        mean: Some(mean(&v)),
        min: v.iter().copied().reduce(f64::min),
        max: v.iter().copied().reduce(f64::max),
        median: median(&v),
        ci95_lo: ci.map(|c| c.0),
        ci95_hi: ci.map(|c| c.1),
        n: v.len(),
    }
}

/// The compression warnings of a set, from each run's key and wire compression ratio (None:
/// not measured) in run order; `targets` is the number of targets, for the row names. Two
/// kinds, each when the largest ratio is more than `limits::WIRE_RATIO_SPREAD_MAX` times the
/// smallest: the repeats of one (variant, target) compared among themselves, and the targets
/// of one variant compared by their mean ratio. Variants are never compared with each other:
/// a sweep may vary the codec itself.
pub fn wire_ratio_warnings(runs: &[(&RunKey, Option<f64>)], targets: usize) -> Vec<String> {
    let spread_pct = crate::compression::ratio_spread_pct();
    // (label, target) groups in first-seen order, each with its runs' measured ratios.
    let mut groups: Vec<(&RunKey, Vec<f64>)> = Vec::new();
    for (key, ratio) in runs {
        let at = groups
            .iter()
            .position(|(k, _)| k.label == key.label && k.target == key.target);
        let i = at.unwrap_or_else(|| {
            groups.push((key, Vec::new()));
            groups.len() - 1
        });
        groups[i].1.extend(*ratio);
    }
    let min_max = |v: &[f64]| {
        let lo = v.iter().copied().reduce(f64::min)?;
        let hi = v.iter().copied().reduce(f64::max)?;
        Some((lo, hi))
    };
    let mut out = Vec::new();
    for (k, v) in groups.iter().filter(|(_, v)| v.len() >= 2) {
        let Some((lo, hi)) = min_max(v) else {
            continue;
        };
        if ratios_differ(lo, hi) {
            out.push(format!(
                "the wire compression ratio of the {} runs of {} ranges from {lo:.2}x to \
                 {hi:.2}x (more than {spread_pct:.0} % apart): the client compressed \
                 differently from run to run, so these runs are not like for like",
                v.len(),
                row_name(&k.label, &k.target, targets)
            ));
        }
    }
    let mut labels: Vec<&Option<String>> = Vec::new();
    for (k, _) in &groups {
        if !labels.contains(&&k.label) {
            labels.push(&k.label);
        }
    }
    for label in labels {
        // Each target of this variant with its mean measured ratio.
        let means: Vec<(&str, f64)> = groups
            .iter()
            .filter(|(k, v)| &k.label == label && !v.is_empty())
            .map(|(k, v)| (k.target.as_str(), mean(v)))
            .collect();
        let values: Vec<f64> = means.iter().map(|m| m.1).collect();
        let Some((lo, hi)) = min_max(&values).filter(|_| means.len() >= 2) else {
            continue;
        };
        if !ratios_differ(lo, hi) {
            continue;
        }
        let listed: Vec<String> = means.iter().map(|(t, r)| format!("{t} {r:.2}x")).collect();
        out.push(format!(
            "wire compression ratios differ between targets{}: {} (more than {spread_pct:.0} % \
             apart): the client compressed differently for each target (for example it sent \
             its batches uncompressed to one of them), so their results are not comparable",
            label
                .as_ref()
                .map(|l| format!(" in {l}"))
                .unwrap_or_default(),
            listed.join(", ")
        ));
    }
    out
}

/// Every warning of a set: its own compression warnings, then each run's, prefixed with its
/// number and name as in the HTML report.
fn set_warnings(order: &[RunKey], runs: &[Report], targets: usize) -> Vec<String> {
    let keyed: Vec<(&RunKey, Option<f64>)> = order
        .iter()
        .zip(runs)
        .map(|(k, r)| (k, r.wire_compression_ratio()))
        .collect();
    let mut out = wire_ratio_warnings(&keyed, targets);
    for (i, (k, rep)) in order.iter().zip(runs).enumerate() {
        for w in &rep.warnings {
            out.push(format!(
                "run {} ({}): {w}",
                i + 1,
                row_name(&k.label, &k.target, 2)
            ));
        }
    }
    out
}

pub fn build(
    preset: &str,
    started_at_utc: String,
    targets: Vec<String>,
    order: Vec<RunKey>,
    runs: Vec<Report>,
    interrupted: bool,
    gates: Vec<crate::gate::GateResult>,
) -> RunSet {
    let groups = groups(&order, &runs);
    let rows = rows(&groups);
    let ratios = ratios(&groups, &rows, &targets);
    let warnings = set_warnings(&order, &runs, targets.len());
    RunSet {
        schema: SET_SCHEMA,
        preset: preset.to_string(),
        started_at_utc,
        targets,
        order,
        interrupted,
        rows,
        ratios,
        gates,
        warnings,
        runs,
    }
}

/// A run's metric map.
type Metrics = BTreeMap<String, Option<f64>>;

/// The runs grouped in first-seen order of (label, target), each with its runs' metric maps.
fn groups(order: &[RunKey], runs: &[Report]) -> Vec<(RunKey, Vec<Metrics>)> {
    let mut groups: Vec<(RunKey, Vec<Metrics>)> = Vec::new();
    for (key, rep) in order.iter().zip(runs) {
        let m = rep.metrics();
        match groups
            .iter_mut()
            .find(|(k, _)| k.label == key.label && k.target == key.target)
        {
            Some((_, v)) => v.push(m),
            None => groups.push((key.clone(), vec![m])),
        }
    }
    groups
}

/// One row per group: the spread of every compared metric over its runs.
fn rows(groups: &[(RunKey, Vec<Metrics>)]) -> Vec<Row> {
    groups
        .iter()
        .map(|(k, ms)| Row {
            label: k.label.clone(),
            target: k.target.clone(),
            runs: ms.len(),
            metrics: COMPARE_METRICS
                .iter()
                .map(|&name| {
                    (
                        name,
                        stat(
                            &ms.iter()
                                .map(|m| m.get(name).copied().flatten())
                                .collect::<Vec<_>>(),
                            name,
                        ),
                    )
                })
                .collect(),
        })
        .collect()
}

/// Every row of a target other than the first, against the first target's row of the same
/// label: the ratio of the means, its bootstrap CI and the verdict.
fn ratios(groups: &[(RunKey, Vec<Metrics>)], rows: &[Row], targets: &[String]) -> Vec<Ratio> {
    // The measured values of one metric in a group's runs.
    let values = |label: &Option<String>, target: &str, name: &str| -> Vec<f64> {
        groups
            .iter()
            .find(|(k, _)| &k.label == label && k.target == target)
            .map(|(_, ms)| {
                ms.iter()
                    .filter_map(|m| m.get(name).copied().flatten())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut ratios = Vec::new();
    if let Some(first) = targets.first() {
        for row in rows.iter().filter(|r| &r.target != first) {
            let Some(base) = rows
                .iter()
                .find(|b| b.label == row.label && &b.target == first)
            else {
                continue;
            };
            let ratios_map: BTreeMap<&'static str, Option<f64>> = COMPARE_METRICS
                .iter()
                .map(|&name| {
                    let r = match (row.metrics[name].mean, base.metrics[name].mean) {
                        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
                        _ => None,
                    };
                    (name, r)
                })
                .collect();
            let mut ratio_ci95 = BTreeMap::new();
            let mut verdicts = BTreeMap::new();
            for &name in &COMPARE_METRICS {
                let a = values(&row.label, first, name);
                let b = values(&row.label, &row.target, name);
                let ci = bootstrap_ratio_ci(&a, &b, limits::BOOTSTRAP_RESAMPLES, seed_for(name));
                let r: Option<f64> = ratios_map.get(name).copied().flatten();
                ratio_ci95.insert(name, ci.map(|(lo, hi)| [lo, hi]));
                verdicts.insert(name, verdict(name, &a, &b, r, ci));
            }
            ratios.push(Ratio {
                label: row.label.clone(),
                target: row.target.clone(),
                baseline_target: first.clone(),
                ratios: ratios_map,
                ratio_ci95,
                verdicts,
            });
        }
    }
    ratios
}

const TABLE_COLS: [(&str, &str); 9] = [
    ("received_msg_s", "recv msg/s"),
    ("p50_ack_ms", "ack p50"),
    ("p99_ack_ms", "ack p99"),
    ("p999_ack_ms", "ack p99.9"),
    ("p50_e2e_ms", "e2e p50"),
    ("p99_e2e_ms", "e2e p99"),
    ("p999_e2e_ms", "e2e p99.9"),
    ("broker_cpu_ms_per_mib", "cpu ms/MiB"),
    ("broker_peak_rss_mib", "rss MiB"),
];

fn cell(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.3}"),
    }
}

fn row_name(label: &Option<String>, target: &str, targets: usize) -> String {
    match (label, targets > 1) {
        (Some(l), true) => format!("{l} @ {target}"),
        (Some(l), false) => l.clone(),
        (None, _) => target.to_string(),
    }
}

fn ci_cell(lo: Option<f64>, hi: Option<f64>) -> String {
    match (lo, hi) {
        (Some(a), Some(b)) => format!("[{}, {}]", cell(Some(a)), cell(Some(b))),
        _ => "-".into(),
    }
}

/// One line of the spread table: row name, metric header, and the stat.
type SpreadLine<'a> = (String, &'static str, &'a Stat);
/// One line of the verdict table: row name, metric header, ratio, CI, verdict.
type VerdictLine = (String, &'static str, Option<f64>, Option<[f64; 2]>, String);

impl RunSet {
    /// Rows with at least two runs, per compared column (the median/CI table).
    fn spread_lines(&self) -> Vec<SpreadLine<'_>> {
        let mut out = Vec::new();
        for r in self.rows.iter().filter(|r| r.runs >= 2) {
            for (m, h) in TABLE_COLS {
                if let Some(st) = r.metrics.get(m).filter(|s| s.n > 0) {
                    out.push((row_name(&r.label, &r.target, self.targets.len()), h, st));
                }
            }
        }
        out
    }

    fn verdict_lines(&self) -> Vec<VerdictLine> {
        let mut out = Vec::new();
        for r in &self.ratios {
            for (m, h) in TABLE_COLS {
                out.push((
                    row_name(&r.label, &r.target, self.targets.len()),
                    h,
                    r.ratios.get(m).copied().flatten(),
                    r.ratio_ci95.get(m).copied().flatten(),
                    r.verdicts.get(m).cloned().unwrap_or_else(|| "n/a".into()),
                ));
            }
        }
        out
    }

    /// The comparison tables for stdout (each run's own summary is printed as it finishes).
    pub fn human(&self) -> String {
        let mut o = String::new();
        let name_w = self
            .rows
            .iter()
            .map(|r| {
                row_name(&r.label, &r.target, self.targets.len())
                    .chars()
                    .count()
            })
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(o, "{}", "━".repeat(78));
        let _ = writeln!(
            o,
            " comparison · preset {} · {} runs · latencies in ms (mean over each row's runs)",
            self.preset,
            self.runs.len()
        );
        let _ = write!(o, " {:<name_w$} {:>4}", "run", "n");
        for (_, h) in TABLE_COLS {
            let _ = write!(o, " {h:>10}");
        }
        let _ = writeln!(o);
        for r in &self.rows {
            let _ = write!(
                o,
                " {:<name_w$} {:>4}",
                row_name(&r.label, &r.target, self.targets.len()),
                r.runs
            );
            for (m, _) in TABLE_COLS {
                let _ = write!(o, " {:>10}", cell(r.metrics.get(m).and_then(|s| s.mean)));
            }
            let _ = writeln!(o);
        }
        o.push_str(&self.ratios_human(name_w));
        o.push_str(&self.spread_human(name_w));
        o.push_str(&self.verdicts_human(name_w));
        o.push_str(&crate::report::gate_lines(&self.gates));
        if !self.warnings.is_empty() {
            let _ = writeln!(o);
        }
        for w in &self.warnings {
            let _ = writeln!(o, " warning: {w}");
        }
        let _ = writeln!(o, "{}", "━".repeat(78));
        o
    }

    /// Each row's ratio to the first target (A/B only).
    fn ratios_human(&self, name_w: usize) -> String {
        let mut o = String::new();
        if !self.ratios.is_empty() {
            let _ = writeln!(
                o,
                "\n ratio to {} (below 1: smaller; for latency and CPU, better)",
                self.targets[0]
            );
            for r in &self.ratios {
                let _ = write!(
                    o,
                    " {:<name_w$}     ",
                    row_name(&r.label, &r.target, self.targets.len())
                );
                for (m, _) in TABLE_COLS {
                    let _ = write!(
                        o,
                        " {:>10}",
                        r.ratios
                            .get(m)
                            .copied()
                            .flatten()
                            .map(|x| format!("{x:.2}x"))
                            .unwrap_or_else(|| "-".into())
                    );
                }
                let _ = writeln!(o);
            }
        }
        o
    }

    /// The spread over repeats, with the bootstrap 95% CI.
    fn spread_human(&self, name_w: usize) -> String {
        let mut o = String::new();
        let spread = self.spread_lines();
        if !spread.is_empty() {
            let _ = writeln!(
                o,
                "\n spread over repeats (95% CI: bootstrap of the mean, {} resamples)",
                limits::BOOTSTRAP_RESAMPLES
            );
            let _ = writeln!(
                o,
                " {:<name_w$} {:<10} {:>3} {:>10} {:>10} {:>10} {:>10}  95% CI",
                "run", "metric", "n", "mean", "median", "min", "max"
            );
            for (name, h, st) in spread {
                let _ = writeln!(
                    o,
                    " {:<name_w$} {:<10} {:>3} {:>10} {:>10} {:>10} {:>10}  {}",
                    name,
                    h,
                    st.n,
                    cell(st.mean),
                    cell(st.median),
                    cell(st.min),
                    cell(st.max),
                    ci_cell(st.ci95_lo, st.ci95_hi)
                );
            }
        }
        o
    }

    /// The verdicts with their ratios and CIs.
    fn verdicts_human(&self, name_w: usize) -> String {
        let mut o = String::new();
        let verdicts = self.verdict_lines();
        if !verdicts.is_empty() {
            let _ = writeln!(
                o,
                "\n verdicts · A = {}, B = the row's target · ratio = mean(B) / mean(A), 95% bootstrap CI",
                self.targets[0]
            );
            for (name, h, r, ci, v) in verdicts {
                let _ = writeln!(
                    o,
                    " {:<name_w$} {:<10} {:>8} {:>22}  {v}",
                    name,
                    h,
                    r.map(|x| format!("{x:.3}x")).unwrap_or_else(|| "-".into()),
                    ci.map(|c| format!("[{:.3}, {:.3}]", c[0], c[1]))
                        .unwrap_or_else(|| "-".into()),
                );
            }
        }
        o
    }

    /// A self-contained HTML page: the comparison, then each run's report in a collapsible section.
    pub fn html(&self) -> String {
        let mut b = String::new();
        for w in &self.warnings {
            let _ = write!(b, "<p class=warn>warning: {}</p>", crate::html::esc(w));
        }
        b.push_str(&self.comparison_html());
        b.push_str(&self.ratios_html());
        b.push_str(&self.spread_html());
        b.push_str(&self.verdicts_html());
        b.push_str(&self.gates_html());
        b.push_str(&self.runs_html());
        crate::html::page(
            &format!("sluice bench · {} · {}", self.preset, self.started_at_utc),
            &b,
        )
    }

    /// The comparison table: each row's mean over its runs.
    fn comparison_html(&self) -> String {
        let mut b = String::new();
        b.push_str("<h2>Comparison (mean over each row's runs; latencies in ms)</h2><table><tr><th>run</th><th>n</th>");
        for (_, h) in TABLE_COLS {
            let _ = write!(b, "<th>{h}</th>");
        }
        b.push_str("</tr>");
        for r in &self.rows {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td>",
                crate::html::esc(&row_name(&r.label, &r.target, self.targets.len())),
                r.runs
            );
            for (m, _) in TABLE_COLS {
                let _ = write!(
                    b,
                    "<td>{}</td>",
                    cell(r.metrics.get(m).and_then(|s| s.mean))
                );
            }
            b.push_str("</tr>");
        }
        b.push_str("</table>");
        b
    }

    /// Each row's ratio to the first target (A/B only).
    fn ratios_html(&self) -> String {
        let mut b = String::new();
        if !self.ratios.is_empty() {
            let _ = write!(
                b,
                "<h2>Ratio to {}</h2><table><tr><th>run</th>",
                crate::html::esc(&self.targets[0])
            );
            for (_, h) in TABLE_COLS {
                let _ = write!(b, "<th>{h}</th>");
            }
            b.push_str("</tr>");
            for r in &self.ratios {
                let _ = write!(
                    b,
                    "<tr><td>{}</td>",
                    crate::html::esc(&row_name(&r.label, &r.target, self.targets.len()))
                );
                for (m, _) in TABLE_COLS {
                    let _ = write!(
                        b,
                        "<td>{}</td>",
                        r.ratios
                            .get(m)
                            .copied()
                            .flatten()
                            .map(|x| format!("{x:.2}×"))
                            .unwrap_or_else(|| "–".into())
                    );
                }
                b.push_str("</tr>");
            }
            b.push_str("</table>");
        }
        b
    }

    /// The spread over repeats, with the bootstrap 95% CI.
    fn spread_html(&self) -> String {
        let mut b = String::new();
        let spread = self.spread_lines();
        if !spread.is_empty() {
            let _ = write!(
                b,
                "<h2>Spread over repeats</h2><p>95% CI: percentile bootstrap of the mean ({} resamples, fixed seed).</p><table><tr><th>run</th><th>metric</th><th>n</th><th>mean</th><th>median</th><th>min</th><th>max</th><th>95% CI</th></tr>",
                limits::BOOTSTRAP_RESAMPLES
            );
            for (name, h, st) in spread {
                let _ = write!(
                    b,
                    "<tr><td>{}</td><td>{h}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    crate::html::esc(&name),
                    st.n,
                    cell(st.mean),
                    cell(st.median),
                    cell(st.min),
                    cell(st.max),
                    ci_cell(st.ci95_lo, st.ci95_hi)
                );
            }
            b.push_str("</table>");
        }
        b
    }

    /// The verdicts: ratio, its CI, and whether A or B is faster or better.
    fn verdicts_html(&self) -> String {
        let mut b = String::new();
        let verdicts = self.verdict_lines();
        if !verdicts.is_empty() {
            let _ = write!(
                b,
                "<h2>Verdicts</h2><p>A = <code>{}</code>, B = the row's target; ratio = mean(B) ÷ mean(A) with its 95% bootstrap confidence interval; “no difference” when the interval contains 1.</p><table class=verdicts><tr><th>run</th><th>metric</th><th>ratio</th><th>95% CI</th><th>verdict</th></tr>",
                crate::html::esc(&self.targets[0])
            );
            for (name, h, r, ci, v) in verdicts {
                let class = if v.starts_with("A ") || v.starts_with("B ") {
                    "diff"
                } else {
                    "same"
                };
                let _ = write!(
                    b,
                    "<tr><td>{}</td><td>{h}</td><td>{}</td><td>{}</td><td class={class}>{}</td></tr>",
                    crate::html::esc(&name),
                    r.map(|x| format!("{x:.3}×")).unwrap_or_else(|| "–".into()),
                    ci.map(|c| format!("[{:.3}, {:.3}]", c[0], c[1]))
                        .unwrap_or_else(|| "–".into()),
                    crate::html::esc(&v)
                );
            }
            b.push_str("</table>");
        }
        b
    }

    /// The cross-run gates.
    fn gates_html(&self) -> String {
        let mut b = String::new();
        if !self.gates.is_empty() {
            b.push_str("<h2>Cross-run gates</h2><table><tr><th>gate</th><th>value</th><th>against</th><th>result</th></tr>");
            let v = |x: Option<f64>| {
                x.map(|v| format!("{v:.3}"))
                    .unwrap_or_else(|| "none".into())
            };
            for g in &self.gates {
                let _ = write!(
                    b,
                    "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td class={}>{}</td></tr>",
                    crate::html::esc(&g.gate.expr),
                    v(g.value),
                    v(g.against),
                    if g.passed { "pass" } else { "fail" },
                    if g.passed { "PASS" } else { "FAIL" }
                );
            }
            b.push_str("</table>");
        }
        b
    }

    /// Every run overlaid, then each run's own report in a collapsible section.
    fn runs_html(&self) -> String {
        let mut b = String::new();
        let named: Vec<(String, &Report)> = self
            .order
            .iter()
            .zip(&self.runs)
            .enumerate()
            .map(|(i, (k, rep))| {
                (
                    format!("{} {}", i + 1, row_name(&k.label, &k.target, 2)),
                    rep,
                )
            })
            .collect();
        b.push_str(&crate::html::overlays(&named));
        for (i, (k, rep)) in self.order.iter().zip(&self.runs).enumerate() {
            let _ = write!(
                b,
                "<details><summary>run {} · {}</summary>{}</details>",
                i + 1,
                crate::html::esc(&row_name(&k.label, &k.target, 2)),
                crate::html::body(rep)
            );
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::SplitMix64;

    fn key(label: Option<&str>, target: &str) -> RunKey {
        RunKey {
            label: label.map(str::to_string),
            target: target.to_string(),
        }
    }

    #[test]
    fn wire_ratio_warnings_compare_targets_and_repeats_never_variants() {
        // Goal: a set warns when two targets of one variant, or the repeats of one target,
        // compressed differently on the wire, and never for variants that differ (a sweep of
        // codecs). Method: A B B A sets of ratios on both sides of the 10 % bound.
        let (a, b) = (key(None, "kafka:9092"), key(None, "embedded"));
        // Issue 33's A/B: 2.18x against Kafka, 0.99x against Sluice.
        let ab = [
            (&a, Some(2.18)),
            (&b, Some(0.99)),
            (&b, Some(0.99)),
            (&a, Some(2.18)),
        ];
        let w = wire_ratio_warnings(&ab, 2);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("kafka:9092 2.18x, embedded 0.99x") && w[0].contains("10 %"),
            "{w:?}"
        );
        // Within 10 %: comparable, no warning.
        let close = [
            (&a, Some(2.0)),
            (&b, Some(2.15)),
            (&b, Some(2.1)),
            (&a, Some(2.05)),
        ];
        assert!(wire_ratio_warnings(&close, 2).is_empty());
        // Repeats of one target that drift apart: one warning naming the row.
        let repeats = [(&b, Some(2.0)), (&b, Some(2.5))];
        let w = wire_ratio_warnings(&repeats, 1);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("2 runs of embedded") && w[0].contains("2.00x to 2.50x"));
        // A codec sweep on one target: variants differ by design, nothing to warn about.
        let (none, zstd) = (key(Some("none"), "embedded"), key(Some("zstd"), "embedded"));
        assert!(wire_ratio_warnings(&[(&none, Some(0.98)), (&zstd, Some(3.1))], 1).is_empty());
        // A sweep across two targets compares targets within each variant only.
        let (none_k, zstd_k) = (key(Some("none"), "kafka"), key(Some("zstd"), "kafka"));
        let sweep = [
            (&none, Some(0.98)),
            (&none_k, Some(0.99)),
            (&zstd, Some(1.0)),
            (&zstd_k, Some(3.1)),
        ];
        let w = wire_ratio_warnings(&sweep, 2);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("in zstd"), "{w:?}");
        // Unmeasured ratios (no statistics) are left out, never counted as 0.
        assert!(wire_ratio_warnings(&[(&a, Some(2.0)), (&b, None), (&b, None)], 2).is_empty());
    }

    #[test]
    fn abba_order() {
        assert_eq!(abba(1), vec![0]);
        assert_eq!(abba(2), vec![0, 1, 1, 0]);
        assert_eq!(abba(3), vec![0, 1, 2, 2, 1, 0]);
    }

    #[test]
    fn stats_skip_missing_values() {
        let s = stat(&[Some(1.0), None, Some(3.0)], "x");
        assert_eq!((s.mean, s.min, s.max), (Some(2.0), Some(1.0), Some(3.0)));
        assert_eq!((s.median, s.n), (Some(2.0), 2));
        assert!(s.ci95_lo.is_some());
        assert!(stat(&[None], "x").mean.is_none());
        let one = stat(&[Some(5.0)], "x");
        assert_eq!((one.median, one.ci95_lo), (Some(5.0), None));
    }

    /// A deterministic sample around `center` with spread `spread`.
    fn sample(n: usize, center: f64, spread: f64, seed: u64) -> Vec<f64> {
        let mut r = SplitMix64::new(seed);
        (0..n)
            .map(|_| center + spread * ((r.below(2001) as f64 - 1000.0) / 1000.0))
            .collect()
    }

    #[test]
    fn bootstrap_is_deterministic_contains_the_mean_and_narrows() {
        let small = sample(5, 100.0, 10.0, 1);
        let big = sample(200, 100.0, 10.0, 1);
        let a = bootstrap_mean_ci(&small, 2000, 42);
        assert_eq!(a, bootstrap_mean_ci(&small, 2000, 42));
        let (lo, hi) = a.unwrap_or((f64::NAN, f64::NAN));
        let m = mean(&small);
        assert!(lo <= m && m <= hi, "{lo} {m} {hi}");
        let (blo, bhi) = bootstrap_mean_ci(&big, 2000, 42).unwrap_or((0.0, f64::MAX));
        let mb = mean(&big);
        assert!(blo <= mb && mb <= bhi);
        assert!(bhi - blo < (hi - lo) / 2.0, "{} vs {}", bhi - blo, hi - lo);
        assert!(bootstrap_mean_ci(&[1.0], 2000, 42).is_none());
        // Constant data: a zero-width interval at the value.
        assert_eq!(
            bootstrap_mean_ci(&[3.0, 3.0, 3.0], 500, 1),
            Some((3.0, 3.0))
        );
    }

    #[test]
    fn ratio_interval_and_verdicts() {
        let a = sample(6, 10.0, 0.5, 2);
        let same = sample(6, 10.0, 0.5, 3);
        let slower = sample(6, 20.0, 0.5, 4);
        // Two runs each: a verdict, flagged as weak.
        let ci2 = bootstrap_ratio_ci(&a[..2], &slower[..2], 2000, 7);
        assert_eq!(
            verdict("p99_e2e_ms", &a[..2], &slower[..2], Some(2.0), ci2),
            "A faster (weak: 2 runs)"
        );
        let ci = bootstrap_ratio_ci(&a, &slower, 2000, 7).unwrap_or((0.0, 0.0));
        assert!(ci.0 > 1.5 && ci.1 < 2.5, "{ci:?}");
        let r = Some(mean(&slower) / mean(&a));
        // Latency: B twice as slow means A is faster; throughput: B twice as high is faster.
        assert_eq!(verdict("p99_e2e_ms", &a, &slower, r, Some(ci)), "A faster");
        assert_eq!(
            verdict("received_msg_s", &a, &slower, r, Some(ci)),
            "B faster"
        );
        assert_eq!(
            verdict("broker_cpu_ms_per_mib", &a, &slower, r, Some(ci)),
            "A better"
        );
        let inv = bootstrap_ratio_ci(&slower, &a, 2000, 7);
        assert_eq!(
            verdict("p99_e2e_ms", &slower, &a, Some(0.5), inv),
            "B faster"
        );
        let ci_same = bootstrap_ratio_ci(&a, &same, 2000, 7);
        let (lo, hi) = ci_same.unwrap_or((2.0, 2.0));
        assert!(lo <= 1.0 && 1.0 <= hi, "{lo} {hi}");
        assert_eq!(
            verdict("p99_e2e_ms", &a, &same, Some(1.0), ci_same),
            "no difference"
        );
        assert_eq!(
            verdict("p99_e2e_ms", &a[..1], &same, Some(1.0), None),
            "inconclusive (1 run)"
        );
        assert!(bootstrap_ratio_ci(&a[..1], &same, 2000, 7).is_none());
        assert_eq!(
            verdict("lost", &[0.0, 0.0], &[0.0, 0.0], None, None),
            "no difference"
        );
        assert_eq!(verdict("lost", &[], &[0.0], None, None), "n/a");
    }
}
