//! The sampler (`bench-sampler`) and its lag thread (`bench-lag`): once a second it swaps
//! every producer's and consumer's interval counters and librdkafka statistics, asks the lag
//! thread for the three lag views (`lagview`), samples /proc, and appends one
//! `IntervalSample`; it prints the progress line.
//!
//! Guarantees: a slow lag query never stretches an interval (the answer is awaited at most
//! `limits::LAG_ANSWER_WAIT` and a late one is dropped); ticks missed behind a slow sample
//! are skipped, never sampled back to back.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::clients::Probe;
use super::consumer::ConsumerState;
use super::producer::ProducerState;
use crate::clientstats::SplitAcc;
use crate::lagview::{self, AckCheckpoints, LagFigures, TopicSet};
use crate::limits;
use crate::procstat::{self, ProcSampler};
use crate::vocab::{
    error_deltas, spawn, Clock, ConsumeSide, ErrorLog, IntervalSample, ProduceSide, Schedule,
};

#[derive(Debug, Default)]
pub(crate) struct SamplerOut {
    pub(crate) intervals: Vec<IntervalSample>,
    pub(crate) brokers: procstat::BrokerTrack,
    /// High watermarks at the last successful sample, per flat topic-partition.
    pub(crate) last_high: Option<Vec<i64>>,
    pub(crate) availability: crate::availability::AvailabilityReport,
}

pub(crate) struct SamplerJob {
    pub(crate) clock: Clock,
    pub(crate) sched: Schedule,
    pub(crate) topics: Arc<TopicSet>,
    pub(crate) probe: Option<Probe>,
    /// Carries the bench group id, never joins nor commits: reads the committed offsets.
    pub(crate) watcher: Option<Probe>,
    pub(crate) checkpoints: Arc<AckCheckpoints>,
    pub(crate) avail: Arc<crate::availability::Shared>,
    pub(crate) producers: Vec<Arc<Mutex<ProducerState>>>,
    pub(crate) consumers: Vec<Arc<Mutex<ConsumerState>>>,
    pub(crate) positions: Arc<Vec<AtomicI64>>,
    pub(crate) brokers: Vec<ProcSampler>,
    pub(crate) errors: Arc<ErrorLog>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) progress: bool,
    pub(crate) measure_s: f64,
}

pub(crate) const SAMPLE_NS: u64 = limits::SAMPLE_INTERVAL.as_nanos() as u64;

pub(crate) fn sampler_thread(mut job: SamplerJob) -> SamplerOut {
    let mut out = SamplerOut {
        brokers: procstat::BrokerTrack::start(std::mem::take(&mut job.brokers)),
        ..SamplerOut::default()
    };
    let mut lag = match (job.probe.take(), job.watcher.take()) {
        (Some(probe), watcher) => LagAsk::start(
            probe,
            watcher,
            job.topics.clone(),
            job.positions.clone(),
            job.checkpoints.clone(),
            job.clock,
        )
        .unwrap_or_else(|_| LagAsk::none()),
        (None, _) => LagAsk::none(),
    };
    let mut acc = Accumulated::new(&job);
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut tick: u64 = 0;
    loop {
        tick += 1;
        let last = wait_for_tick(&job, tick);
        acc.collect(&job);
        let sample = acc.sample(&job, &mut lag, &mut out, last);
        if job.progress {
            print_progress(&sample, job.measure_s, tick, tty);
        }
        out.intervals.push(sample);
        // A sample that took longer than a tick (lag queries waiting on a dead broker) makes
        // the next interval longer; the missed ticks are skipped, never sampled back to back,
        // which would give near-empty intervals that draw as spikes and drops.
        let behind = job.clock.now_ns().saturating_sub(job.sched.load_start_ns) / SAMPLE_NS;
        tick = tick.max(behind);
        if last {
            if job.progress && tty {
                eprintln!();
            }
            out.availability = acc.avail.finish(|f| {
                let (t, p) = job.topics.split(f);
                (t.to_string(), p)
            });
            return out;
        }
    }
}

/// Sleeps until tick `tick` is due; true when the sampler was stopped (the last sample).
fn wait_for_tick(job: &SamplerJob, tick: u64) -> bool {
    let due = job.clock.instant_at(job.sched.load_start_ns) + limits::SAMPLE_INTERVAL * tick as u32;
    loop {
        if job.stop.load(Ordering::Relaxed) {
            return true;
        }
        let now = Instant::now();
        if now >= due {
            return false;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}

/// The current interval's counters, swapped out of every thread's state at each tick, and
/// what the previous tick left to difference against.
struct Accumulated {
    produced: ProduceSide,
    consumed: ConsumeSide,
    split: SplitAcc,
    avail: crate::availability::Tracker,
    errors_prev: std::collections::BTreeMap<String, u64>,
    errors_by_kind: std::collections::BTreeMap<String, u64>,
    client_prev: Option<f64>,
    prev_ns: u64,
}

impl Accumulated {
    fn new(job: &SamplerJob) -> Accumulated {
        Accumulated {
            produced: ProduceSide::default(),
            consumed: ConsumeSide::default(),
            split: SplitAcc::default(),
            avail: crate::availability::Tracker::new(job.topics.len(), job.sched.load_start_ns),
            errors_prev: job.errors.counts(),
            errors_by_kind: Default::default(),
            client_prev: procstat::client_usage().map(|u| u.cpu_user_s + u.cpu_system_s),
            prev_ns: job.sched.load_start_ns,
        }
    }

    /// Swaps every producer's and consumer's interval window into this one.
    fn collect(&mut self, job: &SamplerJob) {
        for p in &job.producers {
            let mut s = p.lock();
            self.produced.merge(&s.window);
            s.window.reset();
            self.split.merge(&s.split);
            s.split = SplitAcc::default();
        }
        for c in &job.consumers {
            let mut s = c.lock();
            self.consumed.merge(&s.window);
            s.window.reset();
        }
        // Counted at the tick, with the windows above: not after the lag reading, which may
        // wait for a dead broker while its connection errors pile up.
        let errors_now = job.errors.counts();
        self.errors_by_kind = error_deltas(&self.errors_prev, &errors_now);
        self.errors_prev = errors_now;
    }

    /// This interval's sample; the counters start again from zero.
    fn sample(
        &mut self,
        job: &SamplerJob,
        lag: &mut LagAsk,
        out: &mut SamplerOut,
        last: bool,
    ) -> IntervalSample {
        let now_ns = job.clock.now_ns();
        let dt = (now_ns.saturating_sub(self.prev_ns) as f64 / 1e9).max(1e-9);
        let mid = self.prev_ns + (now_ns.saturating_sub(self.prev_ns)) / 2;
        self.prev_ns = now_ns;
        self.avail
            .tick(now_ns, &job.avail.acks, &job.avail.leaderless);
        let elapsed_s = now_ns.saturating_sub(job.sched.load_start_ns) as f64 / 1e9;
        let mut sample = IntervalSample {
            elapsed_s,
            interval_s: dt,
            phase: job.sched.phase_at(mid),
            errors_by_kind: std::mem::take(&mut self.errors_by_kind),
            ..self.rates_and_latencies(dt)
        };
        // The lag views come from the lag thread, asked now and awaited briefly: a broker
        // that cannot answer (dead, failing over) leaves this interval's lag unknown instead
        // of stretching the interval (see `LagAsk`).
        fill_lag(&mut sample, lag.ask(last), out);
        let broker_ticks = out.brokers.tick(dt, elapsed_s);
        (
            sample.broker_cpu_pct,
            sample.broker_rss_mib,
            sample.broker_disk_mib,
        ) = procstat::sum_ticks(&broker_ticks);
        if broker_ticks.len() > 1 {
            sample.brokers = broker_ticks;
        }
        let client_now = procstat::client_usage().map(|u| u.cpu_user_s + u.cpu_system_s);
        sample.client_cpu_pct = match (self.client_prev, client_now) {
            (Some(a), Some(b)) => Some((b - a) / dt * 100.0),
            _ => None,
        };
        self.client_prev = client_now;
        self.split = SplitAcc::default();
        self.produced.reset();
        self.consumed.reset();
        sample
    }

    /// The interval's rates, counts, latency percentiles and histograms.
    fn rates_and_latencies(&self, dt: f64) -> IntervalSample {
        let (p, c) = (&self.produced, &self.consumed);
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        IntervalSample {
            produced_msg_s: p.produced as f64 / dt,
            acked_msg_s: p.acked as f64 / dt,
            received_msg_s: c.received as f64 / dt,
            produced_mib_s: mib(p.produced_bytes) / dt,
            received_mib_s: mib(c.received_bytes) / dt,
            ack_errors: p.ack_errors,
            send_errors: p.send_errors,
            queue_full_retries: p.queue_full_retries,
            ack_p50_ms: p.ack.percentile_ms(50.0),
            ack_p99_ms: p.ack.percentile_ms(99.0),
            ack_intended_p99_ms: p.ack_intended.percentile_ms(99.0),
            send_delay_p99_ms: p.send_delay.percentile_ms(99.0),
            e2e_p50_ms: c.e2e.percentile_ms(50.0),
            e2e_p99_ms: c.e2e.percentile_ms(99.0),
            e2e_intended_p99_ms: c.e2e_intended.percentile_ms(99.0),
            split: self.split.summary(),
            hdr: crate::hist::IntervalHdr::of(&p.ack, &p.send_delay, &c.e2e),
            ..IntervalSample::default()
        }
    }
}

/// The three lag views of one reading (all unknown when none came in time).
fn fill_lag(sample: &mut IntervalSample, obs: Option<LagObs>, out: &mut SamplerOut) {
    let Some(o) = obs else {
        return;
    };
    if o.high.is_some() {
        out.last_high = o.high;
    }
    if let Some(LagFigures {
        total,
        max,
        mut per_partition,
    }) = o.client
    {
        per_partition.truncate(limits::MAX_PARTITIONS_IN_SERIES);
        sample.lag_total = Some(total);
        sample.lag_max_partition = Some(max);
        sample.lag_per_partition = per_partition;
    }
    sample.broker_lag_total = o.broker.as_ref().map(|b| b.total);
    sample.broker_lag_max_partition = o.broker.as_ref().map(|b| b.max);
    sample.time_lag_ms = o.time_lag_ms;
}

// `%` rather than `is_multiple_of`, which is newer than the workspace's MSRV.
#[allow(clippy::manual_is_multiple_of)]
pub(crate) fn print_progress(s: &IntervalSample, measure_s: f64, tick: u64, tty: bool) {
    let ms = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "-".into());
    let line = format!(
        "[{:>7} {:>6.1}s] produced {:>8.0}/s  received {:>8.0}/s  ack p99 {:>7} ms  e2e p99 {:>7} ms  lag {:>7}  of {:.0}s",
        s.phase,
        s.elapsed_s,
        s.produced_msg_s,
        s.received_msg_s,
        ms(s.ack_p99_ms),
        ms(s.e2e_p99_ms),
        s.lag_total.map(|l| l.to_string()).unwrap_or_else(|| "?".into()),
        measure_s,
    );
    if tty {
        eprint!("\r\x1b[2K{line}");
    } else if tick % limits::PROGRESS_EVERY_N_SAMPLES_NON_TTY == 0 {
        eprintln!("{line}");
    }
}

/// One reading of the three lag views (see `sampler_thread`).
pub(crate) struct LagObs {
    pub(crate) high: Option<Vec<i64>>,
    pub(crate) client: Option<LagFigures>,
    pub(crate) broker: Option<LagFigures>,
    pub(crate) time_lag_ms: Option<f64>,
}

/// The lag thread: the sampler asks for a reading at each tick and waits at most
/// `limits::LAG_ANSWER_WAIT` (the last tick: `limits::LAG_FINAL_ANSWER_WAIT`); a reading that
/// comes later is dropped, never shown as a later interval's value. The queries themselves
/// (watermarks, committed offsets) have their own timeouts in `lagview`.
pub(crate) struct LagAsk {
    pub(crate) ask: Option<std::sync::mpsc::SyncSender<u64>>,
    pub(crate) answers: Option<std::sync::mpsc::Receiver<(u64, LagObs)>>,
    pub(crate) handle: Option<JoinHandle<()>>,
    pub(crate) asked: u64,
}

impl LagAsk {
    pub(crate) fn none() -> LagAsk {
        LagAsk {
            ask: None,
            answers: None,
            handle: None,
            asked: 0,
        }
    }

    pub(crate) fn start(
        probe: Probe,
        watcher: Option<Probe>,
        topics: Arc<TopicSet>,
        positions: Arc<Vec<AtomicI64>>,
        checkpoints: Arc<AckCheckpoints>,
        clock: Clock,
    ) -> Result<LagAsk, String> {
        let (ask_tx, ask_rx) = std::sync::mpsc::sync_channel::<u64>(1);
        let (ans_tx, ans_rx) = std::sync::mpsc::sync_channel::<(u64, LagObs)>(2);
        let handle = spawn("bench-lag".into(), move || {
            while let Ok(id) = ask_rx.recv() {
                // Committed offsets first and positions last: a committed offset is never
                // ahead of the position it was stored from, so per partition the broker view
                // is never below the client view.
                let committed = watcher
                    .as_ref()
                    .and_then(|w| lagview::committed_offsets(w, &topics));
                let high = lagview::high_watermarks(&probe, &topics);
                let pos: Vec<i64> = lagview::positions(&positions).collect();
                let client = high
                    .as_ref()
                    .map(|h| lagview::lag_against(h, pos.iter().copied()));
                let broker = high
                    .as_ref()
                    .zip(committed)
                    .map(|(h, c)| lagview::lag_against(h, c.into_iter()));
                let time_lag_ms = high
                    .as_ref()
                    .and_then(|h| checkpoints.max_age_ms(h, &pos, clock.now_ns()));
                let obs = LagObs {
                    high,
                    client,
                    broker,
                    time_lag_ms,
                };
                if ans_tx.try_send((id, obs)).is_err() {
                    // The sampler stopped listening (or is far behind): nothing to keep.
                }
            }
        })?;
        Ok(LagAsk {
            ask: Some(ask_tx),
            answers: Some(ans_rx),
            handle: Some(handle),
            asked: 0,
        })
    }

    /// Asks for a reading and waits for it; None when none came in time (or the lag thread
    /// is still busy with an earlier question).
    pub(crate) fn ask(&mut self, last: bool) -> Option<LagObs> {
        let (ask, answers) = (self.ask.as_ref()?, self.answers.as_ref()?);
        // Late answers to earlier questions are stale: drop them.
        while answers.try_recv().is_ok() {}
        self.asked += 1;
        let id = self.asked;
        let wait = if last {
            limits::LAG_FINAL_ANSWER_WAIT
        } else {
            limits::LAG_ANSWER_WAIT
        };
        let deadline = Instant::now() + wait;
        // A busy lag thread (still on an earlier question) gets until the deadline to free up.
        loop {
            match ask.try_send(id) {
                Ok(()) => break,
                Err(std::sync::mpsc::TrySendError::Full(_)) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(_) => return None,
            }
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match answers.recv_timeout(left) {
                Ok((got, obs)) if got == id => return Some(obs),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    }
}

impl Drop for LagAsk {
    fn drop(&mut self) {
        // Closing the question channel ends the thread after its current question; it is not
        // awaited (a question to a dead broker may take its queries' full timeouts).
        self.ask = None;
        self.answers = None;
        drop(self.handle.take());
    }
}
