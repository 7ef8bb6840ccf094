//! Pass/fail gates: `--gate 'p99_ack_ms<=50'`. A gate names one metric of the report, a
//! comparison and a number. Gates are parsed before the run (a typo fails at once, listing the
//! metric names) and evaluated after it; a violated gate, or one whose metric has no value
//! (for example broker CPU against a remote broker), makes the run exit non-zero.

use std::collections::BTreeMap;

use serde::Serialize;

/// Latency distributions, as they appear in metric names (`p99_ack_ms`).
pub const LATENCY_KINDS: [&str; 5] = ["ack", "ack_intended", "send_delay", "e2e", "e2e_intended"];
/// Statistics of each latency distribution.
pub const LATENCY_STATS: [&str; 11] = [
    "min", "mean", "p50", "p75", "p90", "p95", "p99", "p99_5", "p999", "p9999", "max",
];
/// Scalar metrics.
pub const SCALARS: [&str; 17] = [
    "produced_msg_s",
    "acked_msg_s",
    "received_msg_s",
    "produced_mib_s",
    "delivery_pct",
    "rate_accuracy_pct",
    "lost",
    "lost_acked",
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
    pub op: Op,
    pub threshold: f64,
}

/// Parses `METRIC OP NUMBER` (spaces optional), OP one of <= < >= > == !=.
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
    let metric = s[..pos].trim().to_string();
    let value = s[pos + text.len()..].trim();
    let threshold: f64 = value
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("gate {s:?}: {value:?} is not a number"))?;
    if !metric_names().contains(&metric) {
        return Err(format!(
            "gate {s:?}: unknown metric {metric:?}; metrics are: {}",
            metric_names().join(", ")
        ));
    }
    Ok(Gate {
        expr: s.to_string(),
        metric,
        op,
        threshold,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct GateResult {
    #[serde(flatten)]
    pub gate: Gate,
    pub value: Option<f64>,
    pub passed: bool,
}

pub fn evaluate(gates: &[Gate], metrics: &BTreeMap<String, Option<f64>>) -> Vec<GateResult> {
    gates
        .iter()
        .map(|g| {
            let value = metrics.get(&g.metric).copied().flatten();
            let passed = value.is_some_and(|v| g.op.holds(v, g.threshold));
            GateResult {
                gate: g.clone(),
                value,
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
