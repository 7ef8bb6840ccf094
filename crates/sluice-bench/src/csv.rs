//! `--csv FILE`: the 1-second time series of every run as one CSV table (RFC 4180 quoting),
//! one row per interval, for spreadsheets and plotting tools. Empty cells mean "not measured".
//! After the fixed columns, one `errors:KIND` column per error kind of the per-interval error
//! series (`errors_by_kind`) of any run, `errors:other` last; a run whose series does not
//! have that kind leaves its cells empty.

use std::fmt::Write as _;

use crate::report::Report;
use crate::vocab::OTHER_ERRORS;

const COLUMNS: &str =
    "run,label,target,elapsed_s,interval_s,phase,produced_msg_s,acked_msg_s,received_msg_s,\
produced_mib_s,received_mib_s,ack_errors,send_errors,queue_full_retries,ack_p50_ms,ack_p99_ms,\
ack_intended_p99_ms,send_delay_p99_ms,e2e_p50_ms,e2e_p99_ms,e2e_intended_p99_ms,lag_total,\
lag_max_partition,broker_cpu_pct,broker_rss_mib,broker_disk_mib,client_cpu_pct,\
broker_lag_total,broker_lag_max_partition,time_lag_ms,sent_acked,sent_failed,sent_ack_p99_ms,sent_lost_acked,sent_duplicates";

fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// The error kinds of every run's series, in first-seen order, `other` last.
fn error_columns(runs: &[Report]) -> Vec<&str> {
    let mut cols: Vec<&str> = Vec::new();
    for k in runs
        .iter()
        .flat_map(|r| r.intervals.iter().flat_map(|i| i.errors_by_kind.keys()))
    {
        if k != OTHER_ERRORS && !cols.contains(&k.as_str()) {
            cols.push(k);
        }
    }
    let any_other = runs
        .iter()
        .flat_map(|r| &r.intervals)
        .any(|i| i.errors_by_kind.contains_key(OTHER_ERRORS));
    if any_other {
        cols.push(OTHER_ERRORS);
    }
    cols
}

/// Whether run `r`'s error series has its own line for `kind` (else its cells stay empty).
fn has_kind(r: &Report, kind: &str) -> bool {
    r.intervals
        .iter()
        .any(|i| i.errors_by_kind.contains_key(kind))
}

/// The intervals of `runs` (in run order, numbered from 1).
pub fn intervals(runs: &[Report]) -> String {
    let kinds = error_columns(runs);
    let mut o = String::from(COLUMNS);
    for k in &kinds {
        o.push(',');
        o.push_str(&field(&format!("errors:{k}")));
    }
    o.push('\n');
    for (n, r) in runs.iter().enumerate() {
        let label = field(r.label.as_deref().unwrap_or(""));
        let target = field(&r.target.spec);
        let own: Vec<bool> = kinds.iter().map(|k| has_kind(r, k)).collect();
        for i in &r.intervals {
            let _ = writeln!(
                o,
                "{},{label},{target},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                n + 1,
                i.elapsed_s,
                i.interval_s,
                i.phase,
                i.produced_msg_s,
                i.acked_msg_s,
                i.received_msg_s,
                i.produced_mib_s,
                i.received_mib_s,
                i.ack_errors,
                i.send_errors,
                i.queue_full_retries,
                num(i.ack_p50_ms),
                num(i.ack_p99_ms),
                num(i.ack_intended_p99_ms),
                num(i.send_delay_p99_ms),
                num(i.e2e_p50_ms),
                num(i.e2e_p99_ms),
                num(i.e2e_intended_p99_ms),
                num(i.lag_total.map(|v| v as f64)),
                num(i.lag_max_partition.map(|v| v as f64)),
                num(i.broker_cpu_pct),
                num(i.broker_rss_mib),
                num(i.broker_disk_mib),
                num(i.client_cpu_pct),
                num(i.broker_lag_total.map(|v| v as f64)),
                num(i.broker_lag_max_partition.map(|v| v as f64)),
                num(i.time_lag_ms),
                num(i.sent_acked.map(|v| v as f64)),
                num(i.sent_failed.map(|v| v as f64)),
                num(i.sent_ack_p99_ms),
                num(i.sent_lost_acked.map(|v| v as f64)),
                num(i.sent_duplicates.map(|v| v as f64)),
            );
            // Replace the line's end with this run's error cells.
            o.pop();
            for (k, own) in kinds.iter().zip(&own) {
                o.push(',');
                if *own {
                    let _ = write!(o, "{}", i.errors_by_kind.get(*k).copied().unwrap_or(0));
                }
            }
            o.push('\n');
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_fields_that_need_it() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a:1,b:2"), "\"a:1,b:2\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(COLUMNS.split(',').count(), 35);
    }
}
