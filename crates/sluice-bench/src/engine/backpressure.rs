//! The backpressure controller (`bench-backpressure`, only with `--bp-max-lag`): SSP's credit
//! rule with hysteresis. Every `--bp-poll` it reads the client-view lag and pauses the
//! producers above `max_lag`, resuming them below `resume_lag`.
//!
//! Guarantees: a tick whose lag cannot be read changes nothing; the paused time is counted to
//! the end, including a pause still open when the load ends.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::clients::Probe;
use crate::lagview::{self, LagFigures, TopicSet};
use crate::vocab::Clock;

/// Client-view lag per topic-partition (high watermark minus the consumed position); None when
/// the watermark query fails.
pub(crate) fn client_lag(
    probe: &Probe,
    topics: &TopicSet,
    positions: &[AtomicI64],
) -> Option<LagFigures> {
    let high = lagview::high_watermarks(probe, topics)?;
    Some(lagview::lag_against(&high, lagview::positions(positions)))
}

pub(crate) struct BpJob {
    pub(crate) probe: Probe,
    pub(crate) topics: Arc<TopicSet>,
    pub(crate) positions: Arc<Vec<AtomicI64>>,
    pub(crate) state: Arc<BpState>,
    pub(crate) max_lag: u64,
    pub(crate) resume_lag: u64,
    pub(crate) poll: Duration,
    pub(crate) clock: Clock,
    pub(crate) stop: Arc<AtomicBool>,
}

/// The backpressure controller: SSP's credit rule with hysteresis. A tick whose lag cannot be
/// read changes nothing.
pub(crate) fn backpressure_thread(job: BpJob) {
    let mut pause_start = 0u64;
    while !job.stop.load(Ordering::Relaxed) {
        if let Some(lag) = client_lag(&job.probe, &job.topics, &job.positions) {
            let lag = lag.total.max(0) as u64;
            let paused = job.state.paused.load(Ordering::Relaxed);
            if !paused && lag > job.max_lag {
                pause_start = job.clock.now_ns();
                job.state.events.fetch_add(1, Ordering::Relaxed);
                job.state.paused.store(true, Ordering::Relaxed);
            } else if paused && lag < job.resume_lag {
                job.state.paused.store(false, Ordering::Relaxed);
                job.state.paused_ns.fetch_add(
                    job.clock.now_ns().saturating_sub(pause_start),
                    Ordering::Relaxed,
                );
            }
        }
        std::thread::sleep(job.poll);
    }
    if job.state.paused.swap(false, Ordering::Relaxed) {
        job.state.paused_ns.fetch_add(
            job.clock.now_ns().saturating_sub(pause_start),
            Ordering::Relaxed,
        );
    }
}

/// What the sampler thread hands back.
/// Shared state of the backpressure controller.
#[derive(Debug, Default)]
pub struct BpState {
    pub(crate) paused: AtomicBool,
    pub(crate) events: AtomicU64,
    pub(crate) paused_ns: AtomicU64,
}
