//! Pass/fail gates: `--gate 'p99_ack_ms<=50'`. A gate names one metric of the report, a
//! comparison and a number. A cross-run gate names runs of a sweep or A/B set with `@RUN` (a
//! variant label or a target) and may compare two runs, teranode style:
//! `--gate 'p50_e2e_ms@linger-1s > 3 * p99_e2e_ms@linger-10ms'`; a metric of several runs
//! with that name (repeats, A B B A) is their mean. Gates are parsed before the run (a typo fails at once, listing the
//! metric names) and evaluated after it; a violated gate, or one whose metric has no value
//! (for example broker CPU against a remote broker), makes the run exit non-zero.

use std::collections::BTreeMap;

use serde::Serialize;

/// Latency distributions, as they appear in metric names (`p99_ack_ms`).
pub const LATENCY_KINDS: [&str; 7] = [
    "ack",
    "ack_intended",
    "send_delay",
    "e2e",
    "e2e_intended",
    "txn_commit",
    "txn_abort",
];
/// Statistics of each latency distribution.
pub const LATENCY_STATS: [&str; 11] = [
    "min", "mean", "p50", "p75", "p90", "p95", "p99", "p99_5", "p999", "p9999", "max",
];
/// Scalar metrics.
pub const SCALARS: [&str; 18] = [
    "produced_msg_s",
    "acked_msg_s",
    "received_msg_s",
    "produced_mib_s",
    "delivery_pct",
    "rate_accuracy_pct",
    "lost",
    "lost_acked",
    "lost_unsynced",
    "duplicates",
    "reordered",
    "ack_errors",
    "send_errors",
    "peak_lag",
    "final_lag",
    "broker_cpu_us_per_msg",
    "broker_cpu_ms_per_mib",
    "broker_peak_rss_mib",
];

/// Every metric name a gate may use.
pub fn metric_names() -> Vec<String> {
    let mut v: Vec<String> = LATENCY_STATS
        .iter()
        .flat_map(|s| LATENCY_KINDS.iter().map(move |k| format!("{s}_{k}_ms")))
        .collect();
    v.extend(SCALARS.iter().map(|s| s.to_string()));
    v
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    #[serde(rename = "<=")]
    Le,
    #[serde(rename = "<")]
    Lt,
    #[serde(rename = ">=")]
    Ge,
    #[serde(rename = ">")]
    Gt,
    #[serde(rename = "==")]
    Eq,
    #[serde(rename = "!=")]
    Ne,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Le => a <= b,
            Op::Lt => a < b,
            Op::Ge => a >= b,
            Op::Gt => a > b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gate {
    pub expr: String,
    pub metric: String,
    /// `@RUN` on the left: evaluated once over the runs with this label or target.
    pub run: Option<String>,
    pub op: Op,
    /// The number on the right, or the factor of `rhs_metric`.
    pub threshold: f64,
    /// A relational gate's right side: `threshold * rhs_metric@rhs_run`.
    pub rhs_metric: Option<String>,
    pub rhs_run: Option<String>,
}

impl Gate {
    /// Whether the gate is evaluated once over a set of runs rather than on each run.
    pub fn is_cross_run(&self) -> bool {
        self.run.is_some() || self.rhs_run.is_some()
    }
}

fn check_metric(expr: &str, metric: &str) -> Result<(), String> {
    if metric_names().iter().any(|m| m == metric) {
        Ok(())
    } else {
        Err(format!(
            "gate {expr:?}: unknown metric {metric:?}; metrics are: {}",
            metric_names().join(", ")
        ))
    }
}

/// `METRIC[@RUN]` into its parts.
fn metric_at(expr: &str, side: &str) -> Result<(String, Option<String>), String> {
    let (metric, run) = match side.split_once('@') {
        Some((m, r)) if !r.trim().is_empty() => (m.trim(), Some(r.trim().to_string())),
        Some(_) => return Err(format!("gate {expr:?}: empty run name after '@'")),
        None => (side.trim(), None),
    };
    check_metric(expr, metric)?;
    Ok((metric.to_string(), run))
}

/// Parses `METRIC[@RUN] OP NUMBER` or `METRIC@RUN OP [FACTOR *] METRIC@RUN` (spaces optional),
/// OP one of <= < >= > == !=.
pub fn parse(s: &str) -> Result<Gate, String> {
    const OPS: [(&str, Op); 6] = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];
    let (pos, text, op) = OPS
        .iter()
        .filter_map(|(t, op)| s.find(t).map(|i| (i, *t, *op)))
        .min_by_key(|(i, t, _)| (*i, std::cmp::Reverse(t.len())))
        .ok_or_else(|| {
            format!("gate {s:?} has no comparison (use <=, <, >=, >, ==, !=), e.g. p99_ack_ms<=50")
        })?;
    let (metric, run) = metric_at(s, &s[..pos])?;
    let right = s[pos + text.len()..].trim();
    let number = |t: &str| t.trim().parse::<f64>().ok().filter(|v| v.is_finite());
    let (threshold, rhs_metric, rhs_run) = if let Some(v) = number(right) {
        (v, None, None)
    } else {
        let (factor, rest) = match right.split_once('*') {
            Some((f, r)) => (
                number(f).ok_or_else(|| format!("gate {s:?}: {f:?} is not a number"))?,
                r,
            ),
            None => (1.0, right),
        };
        if !rest.contains('@') || run.is_none() {
            return Err(format!(
                "gate {s:?}: the right side must be a number, or compare two runs as METRIC@RUN OP [FACTOR *] METRIC@RUN"
            ));
        }
        let (m, r) = metric_at(s, rest)?;
        (factor, Some(m), r)
    };
    Ok(Gate {
        expr: s.to_string(),
        metric,
        run,
        op,
        threshold,
        rhs_metric,
        rhs_run,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct GateResult {
    #[serde(flatten)]
    pub gate: Gate,
    /// The left side's value (null: not measured, which fails the gate).
    pub value: Option<f64>,
    /// A relational gate's computed right side (`threshold * rhs_metric@rhs_run`).
    pub against: Option<f64>,
    pub passed: bool,
}

/// Evaluates the per-run gates on one run's metrics (cross-run gates are skipped).
pub fn evaluate(gates: &[Gate], metrics: &BTreeMap<String, Option<f64>>) -> Vec<GateResult> {
    gates
        .iter()
        .filter(|g| !g.is_cross_run())
        .map(|g| {
            let value = metrics.get(&g.metric).copied().flatten();
            let passed = value.is_some_and(|v| g.op.holds(v, g.threshold));
            GateResult {
                gate: g.clone(),
                value,
                against: None,
                passed,
            }
        })
        .collect()
}

/// One run of a set as cross-run gates see it: its label, target and metrics.
pub type RunMetrics<'a> = (Option<&'a str>, &'a str, BTreeMap<String, Option<f64>>);

/// Mean of `metric` over the runs whose label or target is `run`.
fn value_at(runs: &[RunMetrics<'_>], metric: &str, run: Option<&str>) -> Option<f64> {
    let vals: Vec<f64> = runs
        .iter()
        .filter(|(label, target, _)| run.is_none_or_eq(*label, target))
        .filter_map(|(_, _, m)| m.get(metric).copied().flatten())
        .collect();
    (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
}

trait RunSelector {
    fn is_none_or_eq(&self, label: Option<&str>, target: &str) -> bool;
}

impl RunSelector for Option<&str> {
    fn is_none_or_eq(&self, label: Option<&str>, target: &str) -> bool {
        match self {
            None => true,
            Some(r) => label == Some(*r) || target == *r,
        }
    }
}

/// Evaluates the cross-run gates once over all runs.
pub fn evaluate_set(gates: &[Gate], runs: &[RunMetrics<'_>]) -> Vec<GateResult> {
    gates
        .iter()
        .filter(|g| g.is_cross_run())
        .map(|g| {
            let value = value_at(runs, &g.metric, g.run.as_deref());
            let against = match &g.rhs_metric {
                Some(m) => value_at(runs, m, g.rhs_run.as_deref()).map(|v| v * g.threshold),
                None => Some(g.threshold),
            };
            let passed = matches!((value, against), (Some(a), Some(b)) if g.op.holds(a, b));
            GateResult {
                gate: g.clone(),
                value,
                against: g.rhs_metric.as_ref().and(against),
                passed,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let g = parse("p99_ack_ms<=50").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (g.metric.as_str(), g.op, g.threshold),
            ("p99_ack_ms", Op::Le, 50.0)
        );
        let g = parse(" lost == 0 ").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(g.op, Op::Eq);
        assert_eq!(parse("produced_msg_s>9000").map(|g| g.op), Ok(Op::Gt));
        assert!(parse("p99_ack_ms 50").is_err());
        assert!(parse("p99_ack_ms<=fast").is_err());
        assert!(parse("p99_ack_ms<=inf").is_err());
        let e = parse("p99_latency<=5").err().unwrap_or_default();
        assert!(
            e.contains("unknown metric") && e.contains("p99_e2e_ms"),
            "{e}"
        );
    }

    #[test]
    fn cross_run_gates_compare_runs() {
        let g = parse("p50_e2e_ms@linger-1s > 3 * p99_e2e_ms@linger-10ms")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(g.is_cross_run());
        assert_eq!(g.rhs_metric.as_deref(), Some("p99_e2e_ms"));
        assert_eq!(g.threshold, 3.0);
        assert!(parse("p50_e2e_ms@a > 3 * p99_e2e_ms").is_err());
        assert!(parse("p50_e2e_ms > p99_e2e_ms@b").is_err());
        assert!(parse("p50_e2e_ms@ > 1").is_err());
        let m = |v: f64| {
            let mut b = BTreeMap::new();
            b.insert("p50_e2e_ms".to_string(), Some(v));
            b.insert("p99_e2e_ms".to_string(), Some(v / 2.0));
            b
        };
        let runs: Vec<RunMetrics<'_>> = vec![
            (Some("linger-1s"), "embedded", m(1000.0)),
            (Some("linger-10ms"), "embedded", m(20.0)),
            (Some("linger-10ms"), "embedded", m(40.0)),
        ];
        let r = evaluate_set(std::slice::from_ref(&g), &runs);
        assert_eq!(r[0].value, Some(1000.0));
        assert_eq!(r[0].against, Some(45.0)); // 3 * mean(10, 20)
        assert!(r[0].passed);
        let simple_on_run = parse("p50_e2e_ms@nope<5").unwrap_or_else(|e| panic!("{e}"));
        assert!(!evaluate_set(&[simple_on_run], &runs)[0].passed);
        // Per-run evaluation skips cross-run gates.
        assert!(evaluate(&[g], &runs[0].2).is_empty());
    }

    #[test]
    fn evaluates_and_missing_values_fail() {
        let gates = vec![
            parse("p99_ack_ms<=50").unwrap_or_else(|e| panic!("{e}")),
            parse("lost==0").unwrap_or_else(|e| panic!("{e}")),
            parse("broker_peak_rss_mib<100").unwrap_or_else(|e| panic!("{e}")),
        ];
        let mut m = BTreeMap::new();
        m.insert("p99_ack_ms".to_string(), Some(51.0));
        m.insert("lost".to_string(), Some(0.0));
        m.insert("broker_peak_rss_mib".to_string(), None);
        let r = evaluate(&gates, &m);
        assert_eq!(
            r.iter().map(|r| r.passed).collect::<Vec<_>>(),
            vec![false, true, false]
        );
    }
}
