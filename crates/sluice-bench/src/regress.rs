//! Regression check against a previous report: `--baseline prev.json --max-regress 10%`.
//! Loads a `sluice-bench/1` run or a `sluice-bench-set/1` set, pairs its runs with this
//! invocation's by (label, target) — or the one run with the one run — and compares the key
//! metrics: throughput (lower is worse), ack and end-to-end p50/p99/p99.9 and broker CPU per
//! MiB (higher is worse). A metric regresses when it got worse by more than the allowed
//! percentage; any regression makes the invocation exit 3, like a failed gate.
//!
//! Both sides are read from the JSON documents by the same code (the new runs are serialised
//! first), so a baseline written by an older build compares like a fresh one; a metric missing
//! on either side (or zero in the baseline) is shown but not judged.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::limits;

/// (metric name as in gates, JSON pointer into a run report, higher is better).
pub const KEY_METRICS: [(&str, &str, bool); 9] = [
    ("produced_msg_s", "/throughput/produced_msg_s", true),
    ("received_msg_s", "/throughput/received_msg_s", true),
    ("p50_ack_ms", "/latency/ack/p50_ms", false),
    ("p99_ack_ms", "/latency/ack/p99_ms", false),
    ("p999_ack_ms", "/latency/ack/p99_9_ms", false),
    ("p50_e2e_ms", "/latency/e2e/p50_ms", false),
    ("p99_e2e_ms", "/latency/e2e/p99_ms", false),
    ("p999_e2e_ms", "/latency/e2e/p99_9_ms", false),
    (
        "broker_cpu_ms_per_mib",
        "/broker_process/cpu_ms_per_mib",
        false,
    ),
];

/// One run as compared: its label, its target's spec and its key metrics.
#[derive(Debug, Clone)]
pub struct RunMetrics {
    pub label: Option<String>,
    pub target: String,
    pub metrics: BTreeMap<&'static str, Option<f64>>,
}

/// The key metrics of one `sluice-bench/1` run document.
pub fn run_metrics(run: &Value) -> RunMetrics {
    RunMetrics {
        label: run.get("label").and_then(Value::as_str).map(str::to_string),
        target: run
            .pointer("/target/spec")
            .and_then(Value::as_str)
            .unwrap_or("embedded")
            .to_string(),
        metrics: KEY_METRICS
            .iter()
            .map(|(name, ptr, _)| (*name, run.pointer(ptr).and_then(Value::as_f64)))
            .collect(),
    }
}

/// A loaded baseline file.
#[derive(Debug, Clone)]
pub struct Baseline {
    pub path: String,
    pub schema: String,
    pub runs: Vec<RunMetrics>,
}

/// Reads a previous report; any problem is a message for a usage error.
pub fn load(path: &Path) -> Result<Baseline, String> {
    let shown = path.display().to_string();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read baseline {shown}: {e}"))?;
    if meta.len() > limits::MAX_BASELINE_FILE_BYTES {
        return Err(format!(
            "baseline {shown} is {} bytes; at most {} are read",
            meta.len(),
            limits::MAX_BASELINE_FILE_BYTES
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read baseline {shown}: {e}"))?;
    let doc: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("baseline {shown} is not JSON: {e}"))?;
    let schema = doc
        .get("schema")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let runs: Vec<RunMetrics> = match schema.as_str() {
        crate::report::SCHEMA => vec![run_metrics(&doc)],
        crate::compare::SET_SCHEMA => doc
            .get("runs")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(run_metrics).collect())
            .unwrap_or_default(),
        other => {
            return Err(format!(
                "baseline {shown}: schema {other:?} is not a sluice bench report ({} or {})",
                crate::report::SCHEMA,
                crate::compare::SET_SCHEMA
            ))
        }
    };
    if runs.is_empty() {
        return Err(format!("baseline {shown} holds no runs"));
    }
    Ok(Baseline {
        path: shown,
        schema,
        runs,
    })
}

/// `10%`, `10` or `2.5%`: the allowed worsening in percent.
pub fn parse_pct(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v: f64 = t
        .strip_suffix('%')
        .unwrap_or(t)
        .trim()
        .parse()
        .map_err(|_| format!("not a percentage: {s:?} (e.g. 10%)"))?;
    if !v.is_finite() || !(0.0..=limits::MAX_REGRESS_PCT).contains(&v) {
        return Err(format!(
            "percentage {s:?} out of range (0 .. {}%)",
            limits::MAX_REGRESS_PCT
        ));
    }
    Ok(v)
}

#[derive(Debug, Clone, Serialize)]
pub struct MetricChange {
    pub old: Option<f64>,
    pub new: Option<f64>,
    /// (new − old) ÷ old × 100; null when either is missing or old is 0.
    pub change_pct: Option<f64>,
    pub higher_is_better: bool,
    /// Worse by more than `max_regress_pct` (never true without it).
    pub regressed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RowChange {
    pub label: Option<String>,
    pub target: String,
    pub baseline_label: Option<String>,
    pub baseline_target: String,
    /// Runs averaged on each side (repeats).
    pub runs: usize,
    pub baseline_runs: usize,
    pub metrics: BTreeMap<&'static str, MetricChange>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunKey {
    pub label: Option<String>,
    pub target: String,
}

/// The `baseline` object of a report or set.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub file: String,
    pub schema: String,
    /// null: compared and shown, not judged.
    pub max_regress_pct: Option<f64>,
    pub rows: Vec<RowChange>,
    /// This invocation's runs with no baseline run to compare with.
    pub unmatched: Vec<RunKey>,
    pub regressions: usize,
    pub passed: bool,
}

type Group = (
    Option<String>,
    String,
    Vec<BTreeMap<&'static str, Option<f64>>>,
);

fn groups(runs: &[RunMetrics]) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for r in runs {
        match out
            .iter_mut()
            .find(|(l, t, _)| *l == r.label && *t == r.target)
        {
            Some((_, _, v)) => v.push(r.metrics.clone()),
            None => out.push((r.label.clone(), r.target.clone(), vec![r.metrics.clone()])),
        }
    }
    out
}

fn mean(ms: &[BTreeMap<&'static str, Option<f64>>], name: &str) -> Option<f64> {
    let v: Vec<f64> = ms
        .iter()
        .filter_map(|m| m.get(name).copied().flatten())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Compares this invocation's runs with the baseline's.
pub fn compare(base: &Baseline, new: &[RunMetrics], max_regress_pct: Option<f64>) -> Comparison {
    let old_groups = groups(&base.runs);
    let new_groups = groups(new);
    let single = old_groups.len() == 1 && new_groups.len() == 1;
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for (label, target, ms) in &new_groups {
        let old = old_groups
            .iter()
            .find(|(l, t, _)| l == label && t == target)
            .or_else(|| single.then(|| &old_groups[0]));
        let Some((old_label, old_target, old_ms)) = old else {
            unmatched.push(RunKey {
                label: label.clone(),
                target: target.clone(),
            });
            continue;
        };
        let metrics = KEY_METRICS
            .iter()
            .map(|&(name, _, higher_is_better)| {
                let (o, n) = (mean(old_ms, name), mean(ms, name));
                let change_pct = match (o, n) {
                    (Some(o), Some(n)) if o > 0.0 => Some((n - o) / o * 100.0),
                    _ => None,
                };
                let worse_pct = change_pct.map(|c| if higher_is_better { -c } else { c });
                let regressed =
                    matches!((worse_pct, max_regress_pct), (Some(w), Some(max)) if w > max);
                (
                    name,
                    MetricChange {
                        old: o,
                        new: n,
                        change_pct,
                        higher_is_better,
                        regressed,
                    },
                )
            })
            .collect();
        rows.push(RowChange {
            label: label.clone(),
            target: target.clone(),
            baseline_label: old_label.clone(),
            baseline_target: old_target.clone(),
            runs: ms.len(),
            baseline_runs: old_ms.len(),
            metrics,
        });
    }
    let rows_empty = rows.is_empty();
    let regressions = rows
        .iter()
        .flat_map(|r| r.metrics.values())
        .filter(|m| m.regressed)
        .count();
    Comparison {
        file: base.path.clone(),
        schema: base.schema.clone(),
        max_regress_pct,
        rows,
        unmatched,
        regressions,
        // Judged with nothing to judge (the wrong baseline file) must not pass silently.
        passed: regressions == 0 && !(max_regress_pct.is_some() && rows_empty),
    }
}

fn run_name(label: &Option<String>, target: &str) -> String {
    match label {
        Some(l) => format!("{l} @ {target}"),
        None => target.to_string(),
    }
}

impl Comparison {
    /// The old / new / change table for stdout.
    pub fn human(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "{}", "━".repeat(78));
        let _ = writeln!(
            o,
            " baseline {} · {}",
            self.file,
            match self.max_regress_pct {
                Some(p) => format!("allowed worsening {p}%"),
                None => "not judged (no --max-regress)".into(),
            }
        );
        let f = |v: Option<f64>| match v {
            None => "-".to_string(),
            Some(x) if x.abs() >= 1000.0 => format!("{x:.0}"),
            Some(x) => format!("{x:.3}"),
        };
        for r in &self.rows {
            let _ = writeln!(
                o,
                " {} vs baseline {}",
                run_name(&r.label, &r.target),
                run_name(&r.baseline_label, &r.baseline_target)
            );
            let _ = writeln!(
                o,
                "   {:<22} {:>12} {:>12} {:>9}",
                "metric", "old", "new", "change"
            );
            // In KEY_METRICS order (throughput, then latencies, then CPU), not by name.
            for (name, m) in KEY_METRICS
                .iter()
                .filter_map(|(n, _, _)| r.metrics.get(n).map(|m| (n, m)))
            {
                let _ = writeln!(
                    o,
                    "   {name:<22} {:>12} {:>12} {:>9}{}",
                    f(m.old),
                    f(m.new),
                    m.change_pct
                        .map(|c| format!("{c:+.1}%"))
                        .unwrap_or_else(|| "-".into()),
                    if m.regressed { "  REGRESSED" } else { "" }
                );
            }
        }
        for u in &self.unmatched {
            let _ = writeln!(
                o,
                " {}: no matching run in the baseline",
                run_name(&u.label, &u.target)
            );
        }
        if self.max_regress_pct.is_some() {
            let _ = writeln!(
                o,
                " {}",
                if self.rows.is_empty() {
                    "FAIL: no run matched the baseline, nothing was compared".to_string()
                } else if self.passed {
                    "no regression".to_string()
                } else {
                    format!("{} metric(s) regressed", self.regressions)
                }
            );
        }
        let _ = writeln!(o, "{}", "━".repeat(78));
        o
    }
}

/// A report or set with the `baseline` object added at the end (additive: the wrapped
/// document's fields are unchanged and in their order).
#[derive(Debug, Serialize)]
pub struct WithBaseline<'a, T: Serialize> {
    #[serde(flatten)]
    pub doc: &'a T,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<&'a Comparison>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(label: Option<&str>, recv: f64, p99: f64) -> Value {
        json!({"schema": "sluice-bench/1", "label": label, "target": {"spec": "embedded"},
               "throughput": {"produced_msg_s": recv, "received_msg_s": recv},
               "latency": {"ack": {"p50_ms": 1.0, "p99_ms": p99, "p99_9_ms": null},
                           "e2e": {"p50_ms": 2.0, "p99_ms": p99, "p99_9_ms": 9.0}},
               "broker_process": null})
    }

    #[test]
    fn worse_by_more_than_allowed_regresses() {
        let base = Baseline {
            path: "prev.json".into(),
            schema: "sluice-bench/1".into(),
            runs: vec![run_metrics(&run(None, 1000.0, 10.0))],
        };
        // 5 % less throughput and 20 % more p99: only the latter exceeds 10 %.
        let new = [run_metrics(&run(None, 950.0, 12.0))];
        let c = compare(&base, &new, Some(10.0));
        assert_eq!(c.rows.len(), 1);
        let m = &c.rows[0].metrics;
        assert!(!m["received_msg_s"].regressed);
        assert!((m["received_msg_s"].change_pct.unwrap_or(0.0) + 5.0).abs() < 1e-9);
        assert!(m["p99_ack_ms"].regressed && m["p99_e2e_ms"].regressed);
        assert!(!m["p50_ack_ms"].regressed);
        assert!(m["p999_ack_ms"].change_pct.is_none() && !m["p999_ack_ms"].regressed);
        assert_eq!(c.regressions, 2);
        assert!(!c.passed);
        assert!(c.human().contains("REGRESSED"));
        // Better everywhere, or no threshold: nothing regresses.
        assert!(compare(&base, &[run_metrics(&run(None, 2000.0, 5.0))], Some(0.0)).passed);
        assert!(compare(&base, &new, None).passed);
    }

    #[test]
    fn sets_pair_by_label() {
        let base = Baseline {
            path: "set.json".into(),
            schema: crate::compare::SET_SCHEMA.into(),
            runs: vec![
                run_metrics(&run(Some("a"), 1000.0, 10.0)),
                run_metrics(&run(Some("b"), 1000.0, 1.0)),
            ],
        };
        let new = [
            run_metrics(&run(Some("b"), 1000.0, 1.0)),
            run_metrics(&run(Some("a"), 1000.0, 10.0)),
            run_metrics(&run(Some("c"), 1000.0, 10.0)),
        ];
        let c = compare(&base, &new, Some(1.0));
        assert!(c.passed, "{}", c.human());
        assert_eq!(c.rows.len(), 2);
        assert_eq!(c.rows[0].baseline_label.as_deref(), Some("b"));
        assert_eq!(c.unmatched.len(), 1);
        // Nothing paired: shown either way, a failure only when judged.
        let other = [run_metrics(&run(Some("z"), 1000.0, 10.0))];
        assert!(compare(&base, &other, None).passed);
        let c = compare(&base, &other, Some(10.0));
        assert!(!c.passed && c.rows.is_empty() && c.human().contains("nothing was compared"));
    }

    #[test]
    fn percentages_and_files() {
        assert_eq!(parse_pct("10%"), Ok(10.0));
        assert_eq!(parse_pct(" 2.5 "), Ok(2.5));
        assert!(parse_pct("-1%").is_err() && parse_pct("lots").is_err());
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(load(&dir.path().join("none.json"))
            .unwrap_err()
            .contains("cannot read"));
        let p = dir.path().join("x.json");
        std::fs::write(&p, "{\"schema\": \"other\"}").unwrap_or_default();
        assert!(load(&p).unwrap_err().contains("\"other\""));
        std::fs::write(&p, "not json").unwrap_or_default();
        assert!(load(&p).unwrap_err().contains("not JSON"));
        std::fs::write(&p, run(None, 5.0, 1.0).to_string()).unwrap_or_default();
        assert_eq!(load(&p).map(|b| b.runs.len()), Ok(1));
    }
}
