//! OMB's backlog mode: consumers are paused from load start while producers keep their target
//! rate, until the backlog (acknowledged minus consumed messages, times the message size)
//! reaches `backlog_bytes`; then consumers resume and the drain is timed until the backlog is
//! at most max(1000, (1 - drain ratio) x the built backlog).
//!
//! Guarantees: paused consumers do not fetch (librdkafka `pause()` on their assignment, so no
//! prefetch hides part of the drain); the hold is always released, at the latest when the load
//! ends, so the run's drain and audit still see every message; a backlog that was not reached
//! or not drained is reported as such (`reached`, `drained`), never as a number it did not hit.

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use super::ratecontrol::{consumed_total, LoadCounters};
use crate::limits;
use crate::vocab::{Clock, ErrorLog};

/// Keeps a consumer paused while `hold` is set (called once after `assign()`, before polling).
/// Returns early when `stop` is set.
pub fn hold_consumer<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    hold: &AtomicBool,
    stop: &AtomicBool,
    errors: &ErrorLog,
) {
    if !hold.load(Ordering::Acquire) {
        return;
    }
    let assignment = match consumer.assignment() {
        Ok(a) => a,
        Err(e) => {
            errors.note(format!("backlog: cannot read the assignment: {e}"));
            return;
        }
    };
    if let Err(e) = consumer.pause(&assignment) {
        errors.note(format!("backlog: pause failed: {e}"));
    }
    while hold.load(Ordering::Acquire) && !stop.load(Ordering::Relaxed) {
        // No poll while held: nothing consumed here could be handed to the audit.
        std::thread::sleep(limits::BACKLOG_POLL);
    }
    if let Err(e) = consumer.resume(&assignment) {
        errors.note(format!("backlog: resume failed: {e}"));
    }
}

/// The `backlog` object of the report.
#[derive(Debug, Clone, Serialize)]
pub struct BacklogResult {
    pub target_bytes: u64,
    pub drain_ratio: f64,
    /// The backlog when consumers resumed.
    pub built_msgs: u64,
    pub built_bytes: u64,
    /// Load start to consumer resume.
    pub build_s: f64,
    /// The backlog reached `target_bytes` (false: the load ended first and consumers resumed
    /// then).
    pub reached: bool,
    /// The drain ends at this backlog (messages).
    pub drain_target_msgs: u64,
    /// Resume until the backlog was at most `drain_target_msgs`; null when it never was.
    pub drain_s: Option<f64>,
    pub drained: bool,
    /// Messages consumed during the drain per second (the consumers' catch-up rate).
    pub drain_msg_s: Option<f64>,
    /// Backlog reduction per second (the catch-up rate minus the producers' rate).
    pub net_drain_msg_s: Option<f64>,
}

#[derive(Debug)]
pub struct BacklogJob {
    pub clock: Clock,
    pub load_start_ns: u64,
    pub load_end_ns: u64,
    pub target_bytes: u64,
    pub drain_ratio: f64,
    pub message_bytes: u64,
    pub hold: Arc<AtomicBool>,
    pub counters: Arc<LoadCounters>,
    pub positions: Arc<Vec<AtomicI64>>,
    /// Ctrl-C: release the hold at once.
    pub interrupt: Arc<AtomicBool>,
    /// Set when the consumers stop (end of the run's drain, or Ctrl-C).
    pub stop: Arc<AtomicBool>,
}

/// The drain target: OMB's max(1000, (1 - ratio) x built).
pub fn drain_target(built_msgs: u64, ratio: f64) -> u64 {
    let rest = ((1.0 - ratio.clamp(0.0, 1.0)) * built_msgs as f64).floor() as u64;
    rest.max(limits::BACKLOG_DRAIN_FLOOR_MSGS)
}

/// The build-and-drain monitor thread.
pub fn backlog_thread(job: BacklogJob) -> BacklogResult {
    let backlog_msgs = || {
        job.counters
            .acked
            .load(Ordering::Relaxed)
            .saturating_sub(consumed_total(&job.positions))
    };
    let size = job.message_bytes.max(1);
    // Build.
    let (built_msgs, reached, resumed_ns) = loop {
        let now = job.clock.now_ns();
        let b = backlog_msgs();
        let reached = b.saturating_mul(size) >= job.target_bytes;
        if reached
            || now >= job.load_end_ns
            || job.stop.load(Ordering::Relaxed)
            || job.interrupt.load(Ordering::Relaxed)
        {
            job.hold.store(false, Ordering::Release);
            break (b, reached, now);
        }
        std::thread::sleep(limits::BACKLOG_POLL);
    };
    let consumed_at_resume = consumed_total(&job.positions);
    let target = drain_target(built_msgs, job.drain_ratio);
    // Drain (also judged once more after a stop, so a drain that finished just before the
    // consumers stopped is not missed).
    let mut drained_at = None;
    loop {
        let stopping = job.stop.load(Ordering::Relaxed);
        let b = backlog_msgs();
        if b <= target {
            drained_at = Some((job.clock.now_ns(), b, consumed_total(&job.positions)));
            break;
        }
        if stopping {
            break;
        }
        std::thread::sleep(limits::BACKLOG_POLL);
    }
    let drain_s = drained_at.map(|(t, _, _)| t.saturating_sub(resumed_ns) as f64 / 1e9);
    let per_s = |n: f64| drain_s.filter(|&s| s > 0.0).map(|s| n / s);
    BacklogResult {
        target_bytes: job.target_bytes,
        drain_ratio: job.drain_ratio,
        built_msgs,
        built_bytes: built_msgs * size,
        build_s: resumed_ns.saturating_sub(job.load_start_ns) as f64 / 1e9,
        reached,
        drain_target_msgs: target,
        drain_s,
        drained: drained_at.is_some(),
        drain_msg_s: drained_at
            .and_then(|(_, _, c)| per_s(c.saturating_sub(consumed_at_resume) as f64)),
        net_drain_msg_s: drained_at
            .and_then(|(_, left, _)| per_s(built_msgs.saturating_sub(left) as f64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drain_target_follows_omb() {
        assert_eq!(drain_target(100_000, 1.0), 1000);
        assert_eq!(drain_target(100_000, 0.5), 50_000);
        assert_eq!(drain_target(1500, 0.5), 1000);
        assert_eq!(drain_target(0, 0.0), 1000);
    }
}
