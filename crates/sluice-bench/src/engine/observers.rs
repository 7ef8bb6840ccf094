//! The observers: threads that watch the run without taking part in it, the scenario's fault
//! commands (`bench-fault-N`), the topology sampler (`bench-topology`) and the broker metrics
//! scraper (`bench-broker-metrics`).
//!
//! Guarantees: none of them blocks the load or the one-second sampler; stopping them waits
//! only for fault commands already running (each bounded by `limits::FAULT_CMD_TIMEOUT`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::sampler::SAMPLE_NS;
use crate::lagview::TopicSet;
use crate::limits;
use crate::scenario::Scenario;
use crate::vocab::{spawn, Clock, RunOptions, Schedule};

/// The threads that watch the run without taking part in it: the scenario's faults (one
/// thread each), the topology sampler and the broker metrics scraper. None of them blocks the
/// load or the 1-second sampler.
pub(crate) struct Observers {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) faults: Vec<JoinHandle<crate::faults::FaultRecord>>,
    pub(crate) topology: JoinHandle<TopologyDuring>,
    pub(crate) metrics: Option<JoinHandle<crate::brokermetrics::BrokerMetrics>>,
}

/// What the observers saw.
pub(crate) struct Observed {
    pub(crate) faults: Vec<crate::faults::FaultRecord>,
    pub(crate) topology_changes: Vec<crate::topology::TimedChange>,
    pub(crate) topology_samples: u64,
    pub(crate) topology_failed: u64,
    pub(crate) broker_metrics: Option<crate::brokermetrics::BrokerMetrics>,
}

#[derive(Default)]
pub(crate) struct TopologyDuring {
    pub(crate) changes: Vec<crate::topology::TimedChange>,
    pub(crate) samples: u64,
    pub(crate) failed: u64,
}

impl Observers {
    pub(crate) fn start(
        s: &Scenario,
        opts: &RunOptions,
        topic_set: &Arc<TopicSet>,
        clock: Clock,
        sched: Schedule,
        topology_start: Option<crate::topology::Topology>,
        avail: Arc<crate::availability::Shared>,
    ) -> Result<Observers, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let load_start = clock.instant_at(sched.load_start_ns);
        let measure_start = clock.instant_at(sched.warmup_end_ns);
        let env = crate::faults::FaultEnv {
            bootstrap: opts.bootstrap.clone(),
            broker_pids: opts.broker_pids.clone(),
        };
        let mut faults = Vec::new();
        for (i, text) in s.fault_cmd.iter().enumerate() {
            let spec = crate::faults::parse(text)?;
            let (env, stop, progress) = (env.clone(), stop.clone(), opts.progress);
            faults.push(spawn(format!("bench-fault-{i}"), move || {
                let rec = crate::faults::run_one(&spec, &env, load_start, measure_start, &stop);
                if progress && rec.started_at_s.is_some() {
                    // On its own line, so it also marks the progress output.
                    eprintln!(
                        "\nsluice bench: fault {} at {:.1} s: {} -> exit {}",
                        i + 1,
                        rec.started_at_s.unwrap_or(0.0),
                        rec.command,
                        rec.exit_code
                            .map(|c| c.to_string())
                            .or_else(|| rec.error.clone())
                            .unwrap_or_else(|| "-".into())
                    );
                }
                rec
            })?);
        }
        let topology = {
            let (bootstrap, topics, stop) =
                (opts.bootstrap.clone(), topic_set.clone(), stop.clone());
            let cc = s.client_config.clone();
            spawn("bench-topology".into(), move || {
                let source = crate::topology::Source::new(&bootstrap, &cc);
                topology_thread(&source, &topics, topology_start, load_start, &stop, &avail)
            })?
        };
        let metrics = if opts.broker_metrics.is_empty() {
            None
        } else {
            let (urls, stop) = (opts.broker_metrics.clone(), stop.clone());
            Some(spawn("bench-broker-metrics".into(), move || {
                let mut sc = crate::brokermetrics::Scraper::new(urls);
                // The scrape at load start is the baseline of the first interval.
                let mut tick = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    sc.tick(load_start.elapsed().as_secs_f64());
                    tick += 1;
                    let due = load_start + limits::SAMPLE_INTERVAL * tick;
                    sleep_until(due, &stop);
                    let now = Instant::now();
                    if now > due + limits::SAMPLE_INTERVAL {
                        tick =
                            (now.duration_since(load_start).as_nanos() / SAMPLE_NS as u128) as u32;
                    }
                }
                sc.tick(load_start.elapsed().as_secs_f64());
                sc.finish()
            })?)
        };
        Ok(Observers {
            stop,
            faults,
            topology,
            metrics,
        })
    }

    /// Stops the observers (faults not started yet are skipped; running ones are awaited,
    /// each bounded by `limits::FAULT_CMD_TIMEOUT`).
    pub(crate) fn finish(self) -> Observed {
        self.stop.store(true, Ordering::Relaxed);
        let faults = self
            .faults
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        let t = self.topology.join().unwrap_or_default();
        Observed {
            faults,
            topology_changes: t.changes,
            topology_samples: t.samples,
            topology_failed: t.failed,
            broker_metrics: self.metrics.and_then(|h| h.join().ok()),
        }
    }
}

/// Sleeps until `due` in short steps, returning early when `stop` is set.
pub(crate) fn sleep_until(due: Instant, stop: &AtomicBool) {
    loop {
        let now = Instant::now();
        if now >= due || stop.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}

/// Takes a topology snapshot every `limits::TOPOLOGY_SAMPLE_INTERVAL` and records the changes
/// from the previous successful one, with the time they were first seen.
pub(crate) fn topology_thread(
    source: &crate::topology::Source,
    topic_set: &TopicSet,
    mut prev: Option<crate::topology::Topology>,
    load_start: Instant,
    stop: &AtomicBool,
    avail: &crate::availability::Shared,
) -> TopologyDuring {
    let topics = &topic_set.names;
    let mut out = TopologyDuring::default();
    let mut next = Instant::now() + limits::TOPOLOGY_SAMPLE_INTERVAL;
    loop {
        sleep_until(next, stop);
        if stop.load(Ordering::Relaxed) {
            return out;
        }
        next = Instant::now() + limits::TOPOLOGY_SAMPLE_INTERVAL;
        out.samples += 1;
        match source.snapshot(topics) {
            Ok(t) => {
                // Partitions without a leader (or answered with an error) in this sample.
                avail.leaderless.set(
                    topic_set.len(),
                    t.partitions
                        .iter()
                        .filter(|p| p.leader < 0 || p.error_code != 0)
                        .filter_map(|p| topic_set.flat(&p.topic, p.partition)),
                );
                let at_s = load_start.elapsed().as_secs_f64();
                if let Some(p) = &prev {
                    for change in crate::topology::diff(p, &t) {
                        if out.changes.len() < limits::MAX_TOPOLOGY_CHANGES {
                            out.changes
                                .push(crate::topology::TimedChange { at_s, change });
                        }
                    }
                }
                prev = Some(t);
            }
            Err(_) => out.failed += 1,
        }
    }
}
