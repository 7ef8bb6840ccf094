//! Faults as part of a scenario: `--fault-cmd 'AT:COMMAND'` runs a shell command the user
//! supplies (`kill -9 1234`, `./restart-node.sh 2`, `docker kill b2`) at time AT of the
//! measured window, records when it started and ended, its exit code and the tail of its
//! output; and, after the run, what the fault did to the load: the longest ack stall, and the
//! time to recover (the first interval after the fault whose throughput and p99 ack latency
//! are back within a stated band of the pre-fault baseline).
//!
//! Guarantees:
//! - A fault never blocks the load or the sampler: each runs on its own thread through
//!   `sh -c`, with stdin closed and stdout+stderr going to a temporary file (not a pipe, so a
//!   command that leaves a background process behind, such as a restarted broker, does not
//!   hold the run open). A command still running `limits::FAULT_CMD_TIMEOUT` after it started
//!   is killed and recorded as such.
//! - Each command sees `SLUICE_BENCH_BOOTSTRAP` (the target's bootstrap list) and
//!   `SLUICE_BENCH_BROKER_PIDS` (the sampled broker pids, space-separated, in order) in its
//!   environment, so a scenario file can say `kill -9 $(echo $SLUICE_BENCH_BROKER_PIDS | cut -d' ' -f2)`.
//! - Recovery is judged on the 1-second series only (see `recovery`), from data that was
//!   measured, never extrapolated: a run that never recovered says so (`recovered_at_s` null).

use std::io::{Read, Seek, SeekFrom};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::limits;
use crate::vocab::IntervalSample;

/// One `AT:COMMAND`: when (from the start of the measured window) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpec {
    pub at: Duration,
    pub command: String,
}

impl FaultSpec {
    /// The canonical text form, as scenario files and reports carry it.
    pub fn text(&self) -> String {
        format!("{}:{}", fmt_at(self.at), self.command)
    }
}

// `%` rather than `is_multiple_of`, which is newer than the workspace's MSRV.
#[allow(clippy::manual_is_multiple_of)]
fn fmt_at(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// Parses `AT:COMMAND`, AT a duration (`10s`, `1500ms`, `2m`).
pub fn parse(s: &str) -> Result<FaultSpec, String> {
    let (at, cmd) = s
        .split_once(':')
        .ok_or_else(|| format!("fault {s:?}: expected AT:COMMAND, e.g. '10s:kill -9 1234'"))?;
    let at = crate::units::parse_duration(at.trim())
        .map_err(|e| format!("fault {s:?}: bad time: {e}"))?;
    let command = cmd.trim().to_string();
    if command.is_empty() {
        return Err(format!("fault {s:?}: empty command"));
    }
    if command.len() > limits::MAX_FAULT_CMD_BYTES {
        return Err(format!(
            "fault command longer than {} bytes",
            limits::MAX_FAULT_CMD_BYTES
        ));
    }
    Ok(FaultSpec { at, command })
}

/// What one fault command did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FaultRecord {
    /// As given: `AT:COMMAND`.
    pub spec: String,
    pub command: String,
    /// Scheduled time, seconds from the start of the measured window.
    pub at_s: f64,
    /// When it actually started and ended, seconds since load start (the time series' x);
    /// `ended_at_s` null when the run ended before the command did.
    pub started_at_s: Option<f64>,
    pub ended_at_s: Option<f64>,
    /// Exit code; null when it was killed by a signal, timed out or could not start.
    pub exit_code: Option<i32>,
    /// Last bytes of stdout and stderr together (at most `limits::FAULT_OUTPUT_TAIL_BYTES`).
    pub output_tail: String,
    /// Why there is no exit code (could not start, timed out, killed by signal N).
    pub error: Option<String>,
    /// What it did to the load (filled in after the run; see `analyze`).
    pub impact: Option<FaultImpact>,
}

/// The environment of every fault command.
#[derive(Debug, Clone, Default)]
pub struct FaultEnv {
    pub bootstrap: String,
    pub broker_pids: Vec<u32>,
}

/// Runs one fault at `start + at` (start: the clock instant of the end of warmup), unless
/// `stop` is set first. `load_start` is the time series' origin.
pub fn run_one(
    spec: &FaultSpec,
    env: &FaultEnv,
    load_start: Instant,
    measure_start: Instant,
    stop: &std::sync::atomic::AtomicBool,
) -> FaultRecord {
    let mut rec = FaultRecord {
        spec: spec.text(),
        command: spec.command.clone(),
        at_s: spec.at.as_secs_f64(),
        ..FaultRecord::default()
    };
    let due = measure_start + spec.at;
    while Instant::now() < due {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            rec.error = Some("not run: the run was stopped first".into());
            return rec;
        }
        std::thread::sleep((due - Instant::now()).min(Duration::from_millis(20)));
    }
    let since = |t: Instant| t.saturating_duration_since(load_start).as_secs_f64();
    let out = match tempfile::tempfile() {
        Ok(f) => f,
        Err(e) => {
            rec.error = Some(format!("cannot create an output file: {e}"));
            return rec;
        }
    };
    let pids: Vec<String> = env.broker_pids.iter().map(u32::to_string).collect();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(&spec.command)
        .env("SLUICE_BENCH_BOOTSTRAP", &env.bootstrap)
        .env("SLUICE_BENCH_BROKER_PIDS", pids.join(" "))
        .stdin(Stdio::null());
    match out.try_clone() {
        Ok(f2) => {
            cmd.stdout(Stdio::from(f2));
        }
        Err(_) => {
            cmd.stdout(Stdio::null());
        }
    }
    match out.try_clone() {
        Ok(f3) => {
            cmd.stderr(Stdio::from(f3));
        }
        Err(_) => {
            cmd.stderr(Stdio::null());
        }
    }
    let started = Instant::now();
    rec.started_at_s = Some(since(started));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            rec.error = Some(format!("cannot start sh: {e}"));
            return rec;
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() < limits::FAULT_CMD_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(10))
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                rec.error = Some(format!(
                    "killed after {:?} (limits::FAULT_CMD_TIMEOUT)",
                    limits::FAULT_CMD_TIMEOUT
                ));
                break None;
            }
            Err(e) => {
                rec.error = Some(format!("cannot wait for the command: {e}"));
                break None;
            }
        }
    };
    rec.ended_at_s = Some(since(Instant::now()));
    if let Some(s) = status {
        rec.exit_code = s.code();
        if s.code().is_none() {
            use std::os::unix::process::ExitStatusExt;
            rec.error = Some(format!("killed by signal {}", s.signal().unwrap_or(0)));
        }
    }
    rec.output_tail = tail(out);
    rec
}

/// The last `FAULT_OUTPUT_TAIL_BYTES` of a file, as text (cut at a character boundary).
fn tail(mut f: std::fs::File) -> String {
    let len = f.seek(SeekFrom::End(0)).unwrap_or(0);
    let from = len.saturating_sub(limits::FAULT_OUTPUT_TAIL_BYTES as u64);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_ok() {
        let _ = f
            .take(limits::FAULT_OUTPUT_TAIL_BYTES as u64)
            .read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).trim().to_string()
}

/// What a fault did to the load, from the 1-second series.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FaultImpact {
    /// Pre-fault baseline: the lower medians of the per-interval acked msg/s and ack p99 over
    /// the measured intervals before the fault (at most `limits::RECOVERY_BASELINE_INTERVALS`).
    /// For a rate-limited run the throughput baseline is at most the target rate: an interval
    /// above it is a catch-up (of the warm-up or of a slow second), not the steady state.
    pub baseline_acked_msg_s: Option<f64>,
    pub baseline_ack_p99_ms: Option<f64>,
    pub baseline_intervals: usize,
    /// True when the throughput baseline was capped at the target rate.
    pub baseline_capped_at_rate: bool,
    /// Set when the baseline stands on fewer than `limits::RECOVERY_MIN_BASELINE_INTERVALS`
    /// intervals (a fault early in the run): says so, since one odd second then decides the band.
    pub baseline_note: Option<String>,
    /// The band: throughput at least `RECOVERY_THROUGHPUT_FRACTION` of the baseline and p99 at
    /// most `RECOVERY_P99_FACTOR` times it (the "within 2x") or `RECOVERY_P99_SLACK_MS`
    /// above it when that is more, both in one interval.
    pub band: String,
    /// End of the first measured interval that began at the fault or later and is inside the
    /// band, seconds since load start; null: not back within the band before the load ended.
    pub recovered_at_s: Option<f64>,
    /// recovered_at_s minus the fault's start.
    pub time_to_recover_s: Option<f64>,
    /// Longest run of consecutive intervals with no acknowledgement, from the fault on, and
    /// where it started (seconds since load start).
    pub ack_stall_s: f64,
    pub ack_stall_from_s: Option<f64>,
    /// By send time, records sent from one interval before the fault on (those in flight
    /// when it hit included): failed (delivery error), acknowledged, acknowledged but never
    /// consumed, and consumed more than once.
    pub failed_after: u64,
    pub acked_after: u64,
    pub lost_acked_after: u64,
    pub duplicates_after: u64,
}

/// The recovery band (see `FaultImpact::band`).
pub fn band_text() -> String {
    format!(
        "acked msg/s >= {:.0}% of baseline and ack p99 <= max({:.0}x baseline, baseline + {:.0} ms)",
        limits::RECOVERY_THROUGHPUT_FRACTION * 100.0,
        limits::RECOVERY_P99_FACTOR,
        limits::RECOVERY_P99_SLACK_MS
    )
}

/// The highest p99 inside the band for a baseline p99.
fn p99_bound(baseline_ms: f64) -> f64 {
    (baseline_ms * limits::RECOVERY_P99_FACTOR).max(baseline_ms + limits::RECOVERY_P99_SLACK_MS)
}

/// Per interval: whether any record was waiting for its delivery report in it (sent before it
/// or in it, and not yet acknowledged or failed when it began), by the intervals' counts.
fn waiting_for_acks(intervals: &[IntervalSample]) -> Vec<bool> {
    let mut outstanding: f64 = 0.0;
    intervals
        .iter()
        .map(|i| {
            let sent = (i.produced_msg_s * i.interval_s).round();
            let w = outstanding + sent >= 1.0;
            let answered = (i.acked_msg_s * i.interval_s).round() + i.ack_errors as f64;
            outstanding = (outstanding + sent - answered).max(0.0);
            w
        })
        .collect()
}

/// The lower median of `v` (the smaller middle value of an even count); None when empty.
fn lower_median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len().saturating_sub(1) / 2).copied()
}

/// The measured intervals the baseline stands on: those that ended by `until_s`, without the
/// run's first measured interval when enough others remain (it often acks the warm-up's
/// backlog on top of its own second), and at most the last `RECOVERY_BASELINE_INTERVALS`.
/// The note is set when fewer than `RECOVERY_MIN_BASELINE_INTERVALS` are left.
fn baseline_intervals(
    intervals: &[IntervalSample],
    until_s: f64,
) -> (Vec<&IntervalSample>, Option<String>) {
    let slack = limits::SAMPLE_INTERVAL.as_secs_f64() / 10.0;
    let mut before: Vec<&IntervalSample> = intervals
        .iter()
        .filter(|i| i.phase == "measure" && i.elapsed_s <= until_s + slack)
        .collect();
    if before.len() > limits::RECOVERY_MIN_BASELINE_INTERVALS {
        before.remove(0);
    }
    let before = before.split_off(
        before
            .len()
            .saturating_sub(limits::RECOVERY_BASELINE_INTERVALS),
    );
    let note = (!before.is_empty() && before.len() < limits::RECOVERY_MIN_BASELINE_INTERVALS)
        .then(|| {
            format!(
                "weak baseline: {} measured interval(s) before the fault (fewer than {}), the first of them possibly still the warm-up's catch-up; start the fault later for a steadier one",
                before.len(),
                limits::RECOVERY_MIN_BASELINE_INTERVALS
            )
        });
    (before, note)
}

/// The impact of a fault that started at `fault_s` (seconds since load start) on `intervals`,
/// against the steady state before `baseline_until_s` (the run's first fault: a restart that
/// follows a kill is judged against the healthy load, not the outage). `target_rate`: the
/// run's fixed target in msg/s (None when unthrottled or searching), the most a steady
/// interval can ack.
pub fn analyze(
    intervals: &[IntervalSample],
    fault_s: f64,
    baseline_until_s: f64,
    target_rate: Option<f64>,
) -> FaultImpact {
    // An interval belongs after the fault when it began at it or later (within a tenth of an
    // interval: the sampler's ticks and the fault's start are both on whole seconds of load
    // time, a few ms apart), so an interval of healthy load that merely ends just after the
    // fault can never count as "recovered".
    let slack = limits::SAMPLE_INTERVAL.as_secs_f64() / 10.0;
    let is_after = |i: &IntervalSample| i.elapsed_s - i.interval_s >= fault_s - slack;
    let (before, note) = baseline_intervals(intervals, fault_s.min(baseline_until_s));
    let mut imp = FaultImpact {
        band: band_text(),
        baseline_intervals: before.len(),
        baseline_note: note,
        ..FaultImpact::default()
    };
    if !before.is_empty() {
        // Lower medians, not means: with few intervals (a fault early in the run) one of them
        // is often still the clients' and broker's warm-up, a slow interval (high p99) or the
        // catch-up after one (twice the rate), and a mean would carry it into the band.
        let tput = lower_median(before.iter().map(|i| i.acked_msg_s).collect());
        imp.baseline_acked_msg_s = match (tput, target_rate) {
            (Some(t), Some(r)) if t > r => {
                imp.baseline_capped_at_rate = true;
                Some(r)
            }
            (t, _) => t,
        };
        imp.baseline_ack_p99_ms =
            lower_median(before.iter().filter_map(|i| i.ack_p99_ms).collect());
    }
    let after: Vec<&IntervalSample> = intervals.iter().filter(|i| is_after(i)).collect();
    // Ack stall: consecutive intervals without a single ack (by completion time) while
    // records were waiting for one; an interval with nothing waiting (the drain after every
    // record was answered) is idle, not stalled.
    let waiting = waiting_for_acks(intervals);
    let mut run_start: Option<f64> = None;
    for (i, &w) in intervals.iter().zip(&waiting).filter(|(i, _)| is_after(i)) {
        let start = i.elapsed_s - i.interval_s;
        if i.acked_msg_s == 0.0 && w {
            let from = *run_start.get_or_insert(start.max(fault_s));
            let len = i.elapsed_s - from;
            if len > imp.ack_stall_s {
                imp.ack_stall_s = len;
                imp.ack_stall_from_s = Some(from);
            }
        } else {
            run_start = None;
        }
    }
    // Records counted "after" include those in flight when the fault hit: sent from one
    // interval before it on.
    let in_flight_from = fault_s - limits::SAMPLE_INTERVAL.as_secs_f64() - slack;
    for i in intervals
        .iter()
        .filter(|i| i.elapsed_s > in_flight_from + i.interval_s)
    {
        imp.failed_after += i.sent_failed.unwrap_or(0);
        imp.acked_after += i.sent_acked.unwrap_or(0);
        imp.lost_acked_after += i.sent_lost_acked.unwrap_or(0);
        imp.duplicates_after += i.sent_duplicates.unwrap_or(0);
    }
    let (Some(tput), Some(p99)) = (imp.baseline_acked_msg_s, imp.baseline_ack_p99_ms) else {
        return imp;
    };
    let in_band = |i: &IntervalSample| {
        i.acked_msg_s >= tput * limits::RECOVERY_THROUGHPUT_FRACTION
            && i.ack_p99_ms.is_some_and(|v| v <= p99_bound(p99))
    };
    // Only measured load counts: the drain has no steady load to compare.
    if let Some(i) = after
        .iter()
        .filter(|i| i.phase == "measure")
        .find(|i| in_band(i))
    {
        imp.recovered_at_s = Some(i.elapsed_s);
        imp.time_to_recover_s = Some((i.elapsed_s - fault_s).max(0.0));
    }
    imp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(t: f64, acked: f64, p99: Option<f64>) -> IntervalSample {
        IntervalSample {
            elapsed_s: t,
            interval_s: 1.0,
            phase: "measure",
            produced_msg_s: 1000.0,
            acked_msg_s: acked,
            ack_p99_ms: p99,
            ..IntervalSample::default()
        }
    }

    #[test]
    fn a_drain_with_nothing_left_to_ack_is_not_a_stall() {
        // 1000 msg/s; the fault at 4 s stalls acks for one second, the next acks the backlog
        // too, and the load ends: the drain's seconds have no acks because nothing is waiting.
        let mut v: Vec<IntervalSample> = (1..=4).map(|t| iv(t as f64, 1000.0, Some(5.0))).collect();
        v.push(iv(5.0, 0.0, None));
        v.push(iv(6.0, 2000.0, Some(900.0)));
        for t in 7..=12 {
            let mut d = iv(t as f64, 0.0, None);
            d.phase = "drain";
            d.produced_msg_s = 0.0;
            v.push(d);
        }
        let imp = analyze(&v, 4.0, 4.0, None);
        assert_eq!((imp.ack_stall_s, imp.ack_stall_from_s), (1.0, Some(4.0)));
        // A record still unanswered keeps the drain's silence a stall (a broker that stays dead).
        v[5].acked_msg_s = 1999.0;
        let imp = analyze(&v, 4.0, 4.0, None);
        assert_eq!((imp.ack_stall_s, imp.ack_stall_from_s), (6.0, Some(6.0)));
    }

    #[test]
    fn parses_at_and_command() {
        let f = parse("10s:kill -9 1234").unwrap();
        assert_eq!(f.at, Duration::from_secs(10));
        assert_eq!(f.command, "kill -9 1234");
        assert_eq!(f.text(), "10s:kill -9 1234");
        // Only the first colon splits: commands may hold colons.
        let f = parse("1500ms: echo a:b").unwrap();
        assert_eq!(
            (f.at, f.command.as_str()),
            (Duration::from_millis(1500), "echo a:b")
        );
        assert_eq!(f.text(), "1500ms:echo a:b");
        assert!(parse("kill -9 1").is_err());
        assert!(parse("10s:").is_err());
        assert!(parse("soon:kill").is_err());
    }

    #[test]
    fn recovery_time_and_ack_stall() {
        // 1000 msg/s at 5 ms p99, fault at 4.0 s, nothing acked for 3 s, a slow interval
        // (p99 far above 2x), then back in band at 9 s.
        let mut v: Vec<IntervalSample> = (1..=4).map(|t| iv(t as f64, 1000.0, Some(5.0))).collect();
        v.push(iv(5.0, 0.0, None));
        v.push(iv(6.0, 0.0, None));
        v.push(iv(7.0, 0.0, None));
        v.push(iv(8.0, 1500.0, Some(900.0)));
        v.push(iv(9.0, 1000.0, Some(8.0)));
        v.push(iv(10.0, 1000.0, Some(5.0)));
        let imp = analyze(&v, 4.0, 4.0, None);
        // The run's first measured interval is left out: three others remain.
        assert_eq!(imp.baseline_intervals, 3);
        assert_eq!(imp.baseline_note, None);
        assert_eq!(imp.baseline_acked_msg_s, Some(1000.0));
        assert_eq!(imp.baseline_ack_p99_ms, Some(5.0));
        assert_eq!(imp.recovered_at_s, Some(9.0));
        assert_eq!(imp.time_to_recover_s, Some(5.0));
        assert_eq!(imp.ack_stall_s, 3.0);
        assert_eq!(imp.ack_stall_from_s, Some(4.0));
        // Never back in band: no recovery time, the stall runs to the end.
        let imp = analyze(&v[..7], 4.0, 4.0, None);
        assert_eq!(imp.recovered_at_s, None);
        assert_eq!(imp.time_to_recover_s, None);
        // No baseline (fault before any measured interval): no recovery verdict at all.
        let imp = analyze(&v, 0.5, 0.5, None);
        assert_eq!(imp.baseline_intervals, 0);
        assert_eq!(imp.recovered_at_s, None);
        // A second fault (the restart at 6 s) is judged against the pre-outage baseline.
        let imp = analyze(&v, 6.0, 4.0, None);
        assert_eq!(imp.baseline_acked_msg_s, Some(1000.0));
        assert_eq!(imp.time_to_recover_s, Some(3.0));
        assert_eq!(imp.ack_stall_s, 1.0);
    }

    #[test]
    fn a_warm_up_catch_up_interval_does_not_raise_the_baseline() {
        // CI's run: the first measured interval acked the previous second's backlog too
        // (twice the 2000 msg/s rate), the fault came one interval later, and the restarted
        // broker was back at 2000 msg/s within 2 s. A mean baseline (3000) put every healthy
        // interval below the band's 80 %.
        let mut v = vec![iv(2.0, 3997.0, Some(990.0)), iv(3.0, 1999.0, Some(6.5))];
        v.push(iv(4.0, 0.0, None));
        v.push(iv(5.0, 0.0, None));
        v.push(iv(6.0, 5993.0, Some(2107.0)));
        v.push(iv(7.0, 1997.0, Some(6.6)));
        let imp = analyze(&v, 3.0, 3.0, Some(2000.0));
        assert_eq!(imp.baseline_acked_msg_s, Some(1999.0));
        assert_eq!(imp.baseline_ack_p99_ms, Some(6.5));
        assert_eq!(imp.recovered_at_s, Some(7.0));
        assert!(!imp.baseline_capped_at_rate);
        assert!(imp
            .baseline_note
            .as_deref()
            .unwrap()
            .starts_with("weak baseline: 2 "));
    }

    /// Healthy 2000 msg/s seconds after the fault at 10 s, ending at `t` = 11.. .
    fn after_fault(v: &mut Vec<IntervalSample>) {
        v.push(iv(11.0, 0.0, None));
        v.extend((12..=14).map(|t| iv(t as f64, 2000.0, Some(6.0))));
    }

    #[test]
    fn a_single_catch_up_interval_is_capped_at_the_target_rate() {
        // The only interval before the fault acked the warm-up's backlog too: 4000 msg/s at a
        // 2000 msg/s target. Uncapped, 80 % of it (3200) is more than the load can ever ack
        // again, and the run would never "recover".
        let mut v = vec![iv(10.0, 4000.0, Some(6.0))];
        after_fault(&mut v);
        let imp = analyze(&v, 10.0, 10.0, Some(2000.0));
        assert_eq!(imp.baseline_intervals, 1);
        assert_eq!(imp.baseline_acked_msg_s, Some(2000.0));
        assert!(imp.baseline_capped_at_rate);
        assert!(imp
            .baseline_note
            .as_deref()
            .unwrap()
            .starts_with("weak baseline: 1 "));
        assert_eq!(imp.recovered_at_s, Some(12.0));
        // Unthrottled there is no rate to cap at: the baseline is what was measured.
        let imp = analyze(&v, 10.0, 10.0, None);
        assert_eq!(imp.baseline_acked_msg_s, Some(4000.0));
        assert_eq!(imp.recovered_at_s, None);
    }

    #[test]
    fn a_slow_first_second_and_its_catch_up_do_not_make_the_baseline() {
        // CI's flake: [1200, 2800] before the fault (a slow first second, then its catch-up)
        // at 2000 msg/s. The lower median of the two is 1200: a weak baseline, and said so.
        let mut v = vec![iv(9.0, 1200.0, Some(6.0)), iv(10.0, 2800.0, Some(6.0))];
        after_fault(&mut v);
        let imp = analyze(&v, 10.0, 10.0, Some(2000.0));
        assert_eq!(imp.baseline_intervals, 2);
        assert_eq!(imp.baseline_acked_msg_s, Some(1200.0));
        assert!(imp.baseline_note.is_some());
        // With three steady seconds after them the slow first one is dropped and the
        // catch-up is outvoted (and could never raise the baseline above the rate anyway).
        let mut v = vec![iv(6.0, 1200.0, Some(6.0)), iv(7.0, 2800.0, Some(6.0))];
        v.extend((8..=10).map(|t| iv(t as f64, 2000.0, Some(6.0))));
        after_fault(&mut v);
        let imp = analyze(&v, 10.0, 10.0, Some(2000.0));
        assert_eq!(imp.baseline_intervals, 4);
        assert_eq!(imp.baseline_acked_msg_s, Some(2000.0));
        assert_eq!(imp.baseline_note, None);
        assert_eq!(imp.recovered_at_s, Some(12.0));
        // A catch-up that outvotes the steady seconds is still capped at the rate.
        let mut v: Vec<IntervalSample> = [1200.0, 2800.0, 2000.0, 2800.0, 2800.0, 2000.0]
            .iter()
            .zip(5..)
            .map(|(&a, t)| iv(t as f64, a, Some(6.0)))
            .collect();
        after_fault(&mut v);
        let imp = analyze(&v, 10.0, 10.0, Some(2000.0));
        assert_eq!(imp.baseline_acked_msg_s, Some(2000.0));
        assert!(imp.baseline_capped_at_rate);
    }

    #[test]
    fn a_fault_runs_with_its_environment_and_keeps_its_output_tail() {
        let now = Instant::now();
        let env = FaultEnv {
            bootstrap: "h:1".into(),
            broker_pids: vec![7, 8],
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let spec =
            parse("0s:echo $SLUICE_BENCH_BOOTSTRAP $SLUICE_BENCH_BROKER_PIDS; exit 3").unwrap();
        let r = run_one(&spec, &env, now, now, &stop);
        assert_eq!(r.exit_code, Some(3));
        assert_eq!(r.output_tail, "h:1 7 8");
        assert!(r.started_at_s.is_some() && r.ended_at_s >= r.started_at_s);
        // A background child holding stdout does not hold the fault open.
        let spec = parse("0s:sleep 5 & echo started").unwrap();
        let t = Instant::now();
        let r = run_one(&spec, &env, now, now, &stop);
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
        assert_eq!((r.exit_code, r.output_tail.as_str()), (Some(0), "started"));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let spec = parse("60s:true").unwrap();
        let r = run_one(&spec, &env, now, now, &stop);
        assert!(r.started_at_s.is_none() && r.error.is_some());
    }
}
