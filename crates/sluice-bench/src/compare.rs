//! Several runs in one invocation: a sweep (one run per preset variant), A/B targets (the same
//! seeded scenario on each broker, in A B B A order so drift over time hits both alike), or
//! both. Produces the `sluice-bench-set/1` document: every run's full report plus a comparison
//! of key metrics per (variant, target) — mean, min and max over that pair's runs — and, with
//! several targets, the ratio of each target's mean to the first target's.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

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
    pub runs: Vec<Report>,
}

/// Target order for A/B: forward then backward (A B B A, A B C C B A); one target runs once.
pub fn abba(targets: usize) -> Vec<usize> {
    if targets <= 1 {
        return vec![0];
    }
    (0..targets).chain((0..targets).rev()).collect()
}

fn stat(values: &[Option<f64>]) -> Stat {
    let v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.is_empty() {
        return Stat {
            mean: None,
            min: None,
            max: None,
        };
    }
    Stat {
        mean: Some(v.iter().sum::<f64>() / v.len() as f64),
        min: v.iter().copied().reduce(f64::min),
        max: v.iter().copied().reduce(f64::max),
    }
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
    // Groups in first-seen order of (label, target), each with its runs' metric maps.
    type Metrics = BTreeMap<String, Option<f64>>;
    let mut groups: Vec<(RunKey, Vec<Metrics>)> = Vec::new();
    for (key, rep) in order.iter().zip(&runs) {
        let m = rep.metrics();
        match groups
            .iter_mut()
            .find(|(k, _)| k.label == key.label && k.target == key.target)
        {
            Some((_, v)) => v.push(m),
            None => groups.push((key.clone(), vec![m])),
        }
    }
    let rows: Vec<Row> = groups
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
                        ),
                    )
                })
                .collect(),
        })
        .collect();
    let mut ratios = Vec::new();
    if let Some(first) = targets.first() {
        for row in rows.iter().filter(|r| &r.target != first) {
            let Some(base) = rows
                .iter()
                .find(|b| b.label == row.label && &b.target == first)
            else {
                continue;
            };
            let ratios_map = COMPARE_METRICS
                .iter()
                .map(|&name| {
                    let r = match (row.metrics[name].mean, base.metrics[name].mean) {
                        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
                        _ => None,
                    };
                    (name, r)
                })
                .collect();
            ratios.push(Ratio {
                label: row.label.clone(),
                target: row.target.clone(),
                baseline_target: first.clone(),
                ratios: ratios_map,
            });
        }
    }
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
        runs,
    }
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

impl RunSet {
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
        o.push_str(&crate::report::gate_lines(&self.gates));
        let _ = writeln!(o, "{}", "━".repeat(78));
        o
    }

    /// A self-contained HTML page: the comparison, then each run's report in a collapsible section.
    pub fn html(&self) -> String {
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
        for (i, (k, rep)) in self.order.iter().zip(&self.runs).enumerate() {
            let _ = write!(
                b,
                "<details><summary>run {} · {}</summary>{}</details>",
                i + 1,
                crate::html::esc(&row_name(&k.label, &k.target, 2)),
                crate::html::body(rep)
            );
        }
        crate::html::page(
            &format!("sluice bench · {} · {}", self.preset, self.started_at_utc),
            &b,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abba_order() {
        assert_eq!(abba(1), vec![0]);
        assert_eq!(abba(2), vec![0, 1, 1, 0]);
        assert_eq!(abba(3), vec![0, 1, 2, 2, 1, 0]);
    }

    #[test]
    fn stats_skip_missing_values() {
        let s = stat(&[Some(1.0), None, Some(3.0)]);
        assert_eq!((s.mean, s.min, s.max), (Some(2.0), Some(1.0), Some(3.0)));
        assert!(stat(&[None]).mean.is_none());
    }
}
