//! OMB's max-sustainable rate search (`producerRate: 0`), as a controller thread that adjusts
//! the aggregate target rate which every producer reads from one shared `RateControl`.
//!
//! Every period (3 s unless configured) the controller compares what the schedule asked for
//! with what happened: receive backlog = sent - received (all messages so far), publish backlog
//! = expected - sent (this period). Either above the limit means overload: the ramp factor is
//! halved (down to 0.01) and the rate set to min(actual send rate, (expected - backlog) /
//! period). Otherwise the factor doubles (up to 1) and the rate grows by rate x factor.
//!
//! Guarantees: producers keep an intended-time schedule at the rate in force. A rate change
//! re-anchors every producer's schedule at the instant of the change (as OMB starts a new rate
//! limiter); slots of the old schedule that were due but not yet sent are dropped, counted in
//! `skipped_slots`, so latency from intended time is always relative to the schedule that
//! was in force and a dropped slot is reported instead of hidden. The rate never drops below
//! `limits::MIN_SEARCH_RATE_MSG_S`, so the search cannot stall itself.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;

use crate::limits;

/// Totals over all producers, warmup included, read by the rate search and the backlog mode.
#[derive(Debug, Default)]
pub struct LoadCounters {
    /// Messages the clients accepted (`send()` succeeded).
    pub produced: AtomicU64,
    /// Successful delivery reports.
    pub acked: AtomicU64,
}

/// Messages consumed so far: the sum of the consumers' next offsets (the topic is fresh, so
/// offsets count from 0).
pub fn consumed_total(positions: &[AtomicI64]) -> u64 {
    positions
        .iter()
        .map(|p| p.load(Ordering::Relaxed).max(0) as u64)
        .sum()
}

/// The target rate in force, shared by the controller and the producers.
#[derive(Debug)]
pub struct RateControl {
    epoch: AtomicU64,
    /// (epoch, aggregate rate msg/s, clock ns the rate took effect).
    current: Mutex<(u64, f64, u64)>,
    skipped_slots: AtomicU64,
}

impl RateControl {
    pub fn new(rate_msg_s: f64, anchor_ns: u64) -> RateControl {
        RateControl {
            epoch: AtomicU64::new(0),
            current: Mutex::new((0, rate_msg_s, anchor_ns)),
            skipped_slots: AtomicU64::new(0),
        }
    }

    /// The current epoch; a producer compares it with the one it runs on (one atomic load).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// (epoch, rate, anchor ns).
    pub fn current(&self) -> (u64, f64, u64) {
        *self.current.lock()
    }

    fn set(&self, rate_msg_s: f64, anchor_ns: u64) {
        let mut g = self.current.lock();
        *g = (g.0 + 1, rate_msg_s, anchor_ns);
        self.epoch.store(g.0, Ordering::Release);
    }

    pub fn note_skipped(&self, slots: u64) {
        self.skipped_slots.fetch_add(slots, Ordering::Relaxed);
    }
}

/// What one period showed.
#[derive(Debug, Clone, Copy)]
pub struct PeriodObs {
    pub dt_s: f64,
    /// Messages sent in this period.
    pub published: u64,
    pub total_published: u64,
    pub total_received: u64,
}

/// One adjustment of the search, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct SearchStep {
    /// End of the period, seconds since load start.
    pub elapsed_s: f64,
    /// The target rate during the period.
    pub target_msg_s: f64,
    pub published_msg_s: f64,
    pub received_msg_s: f64,
    /// Expected minus sent in this period (negative: the producers caught up on earlier slots).
    pub publish_backlog: i64,
    /// Sent minus received, all messages so far.
    pub receive_backlog: i64,
    /// "up", "down-receive" (receive backlog over the limit) or "down-publish".
    pub verdict: &'static str,
    /// Ramp factor after this step.
    pub ramp_factor: f64,
    pub next_target_msg_s: f64,
}

/// OMB's controller state.
#[derive(Debug, Clone)]
pub struct Controller {
    pub rate: f64,
    pub factor: f64,
    pub limit: u64,
}

impl Controller {
    pub fn new(start_msg_s: f64, limit: u64) -> Controller {
        Controller {
            rate: start_msg_s.max(limits::MIN_SEARCH_RATE_MSG_S),
            factor: limits::SEARCH_MAX_RAMP_FACTOR,
            limit,
        }
    }

    /// Judges one period and moves the rate; returns (verdict, publish backlog, receive backlog).
    pub fn step(&mut self, o: &PeriodObs) -> (&'static str, i64, i64) {
        let dt = o.dt_s.max(1e-9);
        let expected = (self.rate * dt).round() as i64;
        let publish_backlog = expected - o.published as i64;
        let receive_backlog = o.total_published as i64 - o.total_received as i64;
        let over = |b: i64| b > 0 && b as u64 > self.limit;
        let verdict = if over(receive_backlog) {
            "down-receive"
        } else if over(publish_backlog) {
            "down-publish"
        } else {
            "up"
        };
        if verdict == "up" {
            self.factor = (self.factor * 2.0).min(limits::SEARCH_MAX_RAMP_FACTOR);
            self.rate += self.rate * self.factor;
        } else {
            let backlog = if verdict == "down-receive" {
                receive_backlog
            } else {
                publish_backlog
            };
            self.factor = (self.factor / 2.0).max(limits::SEARCH_MIN_RAMP_FACTOR);
            let actual = o.published as f64 / dt;
            let catch_up = (expected - backlog).max(0) as f64 / dt;
            self.rate = actual.min(catch_up);
        }
        self.rate = self
            .rate
            .clamp(limits::MIN_SEARCH_RATE_MSG_S, limits::MAX_RATE_MSG_S as f64);
        (verdict, publish_backlog, receive_backlog)
    }
}

/// The `rate_search` object of the report.
#[derive(Debug, Clone, Serialize)]
pub struct RateSearchResult {
    pub start_msg_s: f64,
    pub period_s: f64,
    pub backlog_limit: u64,
    /// Every completed period, in order (at most `limits::MAX_SEARCH_STEPS`).
    pub steps: Vec<SearchStep>,
    /// The rate in force when the load ended.
    pub final_target_msg_s: f64,
    /// The target of the last period that was not overloaded: the rate the search settled on.
    pub sustainable_msg_s: Option<f64>,
    /// The highest target of any period that was not overloaded.
    pub max_sustained_msg_s: Option<f64>,
    /// Slots of a replaced schedule that were due but unsent when the rate changed.
    pub skipped_slots: u64,
    /// Seconds from load start until the consumers received their first message, when the
    /// first period began; null if they never did.
    pub ready_at_s: Option<f64>,
}

#[derive(Debug)]
pub struct SearchJob {
    pub clock: crate::vocab::Clock,
    pub load_start_ns: u64,
    pub load_end_ns: u64,
    pub control: Arc<RateControl>,
    pub counters: Arc<LoadCounters>,
    pub positions: Arc<Vec<AtomicI64>>,
    pub stop: Arc<AtomicBool>,
    pub start_msg_s: f64,
    pub period: Duration,
    pub limit: u64,
}

/// The controller thread: one step per period until the load ends or the run is stopped.
///
/// The first period starts when the consumers have received their first message: OMB starts
/// its controller only after a readiness probe proved every subscription receives, and judging
/// the consumers' connection setup as "overload" would collapse the rate at once.
pub fn search_thread(job: SearchJob) -> RateSearchResult {
    let mut ctl = Controller::new(job.start_msg_s, job.limit);
    let mut steps = Vec::new();
    let period_ns = job.period.as_nanos() as u64;
    let mut ready_at_s = None;
    while !job.stop.load(Ordering::Relaxed) && job.clock.now_ns() < job.load_end_ns {
        if consumed_total(&job.positions) > 0 {
            ready_at_s = Some(job.clock.now_ns().saturating_sub(job.load_start_ns) as f64 / 1e9);
            break;
        }
        std::thread::sleep(limits::BACKLOG_POLL);
    }
    let mut period_start = job.clock.now_ns();
    let mut published_before = job.counters.produced.load(Ordering::Relaxed);
    let mut received_before = consumed_total(&job.positions);
    'periods: loop {
        let due = period_start + period_ns;
        if due > job.load_end_ns {
            break;
        }
        loop {
            if job.stop.load(Ordering::Relaxed) {
                break 'periods;
            }
            let now = job.clock.now_ns();
            if now >= due {
                break;
            }
            std::thread::sleep(Duration::from_nanos(due - now).min(limits::PRODUCER_MAX_SLEEP));
        }
        let now = job.clock.now_ns();
        let total_published = job.counters.produced.load(Ordering::Relaxed);
        let total_received = consumed_total(&job.positions);
        let obs = PeriodObs {
            dt_s: now.saturating_sub(period_start) as f64 / 1e9,
            published: total_published.saturating_sub(published_before),
            total_published,
            total_received,
        };
        let target = ctl.rate;
        let (verdict, publish_backlog, receive_backlog) = ctl.step(&obs);
        if steps.len() < limits::MAX_SEARCH_STEPS {
            steps.push(SearchStep {
                elapsed_s: now.saturating_sub(job.load_start_ns) as f64 / 1e9,
                target_msg_s: target,
                published_msg_s: obs.published as f64 / obs.dt_s.max(1e-9),
                received_msg_s: total_received.saturating_sub(received_before) as f64
                    / obs.dt_s.max(1e-9),
                publish_backlog,
                receive_backlog,
                verdict,
                ramp_factor: ctl.factor,
                next_target_msg_s: ctl.rate,
            });
        }
        job.control.set(ctl.rate, now);
        period_start = now;
        published_before = total_published;
        received_before = total_received;
    }
    let mut result = summarize(
        job.start_msg_s,
        job.period,
        job.limit,
        steps,
        job.control.current().1,
        job.control.skipped_slots.load(Ordering::Relaxed),
    );
    result.ready_at_s = ready_at_s;
    result
}

fn summarize(
    start: f64,
    period: Duration,
    limit: u64,
    steps: Vec<SearchStep>,
    final_rate: f64,
    skipped: u64,
) -> RateSearchResult {
    let passed = steps.iter().filter(|s| s.verdict == "up");
    RateSearchResult {
        start_msg_s: start,
        period_s: period.as_secs_f64(),
        backlog_limit: limit,
        sustainable_msg_s: steps
            .iter()
            .rev()
            .find(|s| s.verdict == "up")
            .map(|s| s.target_msg_s),
        max_sustained_msg_s: passed.map(|s| s.target_msg_s).reduce(f64::max),
        final_target_msg_s: final_rate,
        steps,
        skipped_slots: skipped,
        ready_at_s: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(dt_s: f64, published: u64, total_published: u64, total_received: u64) -> PeriodObs {
        PeriodObs {
            dt_s,
            published,
            total_published,
            total_received,
        }
    }

    #[test]
    fn ramps_up_doubling_then_backs_off_on_backlog() {
        let mut c = Controller::new(10_000.0, 1000);
        // Healthy period at 10k for 3 s: the factor stays at 1, the rate doubles.
        let (v, pb, rb) = c.step(&obs(3.0, 30_000, 30_000, 29_900));
        assert_eq!((v, pb, rb), ("up", 0, 100));
        assert_eq!(c.rate, 20_000.0);
        // The producers only managed 45k of the 60k expected: publish backlog 15k.
        let (v, pb, _) = c.step(&obs(3.0, 45_000, 75_000, 74_500));
        assert_eq!((v, pb), ("down-publish", 15_000));
        assert_eq!(c.factor, 0.5);
        // min(actual 15k/s, (60k - 15k) / 3 s = 15k/s)
        assert!((c.rate - 15_000.0).abs() < 1e-6, "{}", c.rate);
        // Receive backlog wins over publish backlog and is judged first.
        let (v, _, rb) = c.step(&obs(3.0, 45_000, 120_000, 100_000));
        assert_eq!((v, rb), ("down-receive", 20_000));
        assert_eq!(c.factor, 0.25);
        // (45k - 20k) / 3 s = 8333/s, below the actual 15k/s.
        assert!((c.rate - 25_000.0 / 3.0).abs() < 1e-6, "{}", c.rate);
        // Recovery: the factor doubles back, growth is rate x factor.
        let r = c.rate;
        let (v, _, _) = c.step(&obs(3.0, 25_000, 145_000, 145_000));
        assert_eq!(v, "up");
        assert_eq!(c.factor, 0.5);
        assert!((c.rate - r * 1.5).abs() < 1e-6);
    }

    #[test]
    fn factor_and_rate_stay_in_bounds() {
        let mut c = Controller::new(100.0, 10);
        for _ in 0..20 {
            c.step(&obs(1.0, 0, 1_000_000, 0));
        }
        assert_eq!(c.factor, limits::SEARCH_MIN_RAMP_FACTOR);
        assert_eq!(c.rate, limits::MIN_SEARCH_RATE_MSG_S);
        let s = summarize(100.0, Duration::from_secs(1), 10, vec![], 10.0, 0);
        assert_eq!(s.sustainable_msg_s, None);
    }

    #[test]
    fn rate_changes_bump_the_epoch() {
        let rc = RateControl::new(1000.0, 5);
        assert_eq!(rc.epoch(), 0);
        rc.set(2000.0, 99);
        assert_eq!(rc.epoch(), 1);
        assert_eq!(rc.current(), (1, 2000.0, 99));
        let pos: Vec<AtomicI64> = vec![AtomicI64::new(3), AtomicI64::new(-1), AtomicI64::new(4)];
        assert_eq!(consumed_total(&pos), 7);
    }
}
