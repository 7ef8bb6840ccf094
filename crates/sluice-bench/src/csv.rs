//! `--csv FILE`: the 1-second time series of every run as one CSV table (RFC 4180 quoting),
//! one row per interval, for spreadsheets and plotting tools. Empty cells mean "not measured".

use std::fmt::Write as _;

use crate::report::Report;

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

/// The intervals of `runs` (in run order, numbered from 1).
pub fn intervals(runs: &[Report]) -> String {
    let mut o = String::from(COLUMNS);
    o.push('\n');
    for (n, r) in runs.iter().enumerate() {
        let label = field(r.label.as_deref().unwrap_or(""));
        let target = field(&r.target.spec);
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
