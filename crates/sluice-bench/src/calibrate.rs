//! Client-ceiling calibration. A result can only blame the broker if the load generator itself
//! was not the limit, so the bench can measure its own ceiling: the same scenario, unthrottled,
//! against an in-process null broker (`nullsink`, the `null` target) that stamps offsets, keeps
//! recent batches in memory and does nothing else. What remains is the cost of our generator,
//! librdkafka and the consumers, plus the least any broker must do on the same cores.
//!
//! (librdkafka's own mock cluster was tried first: it is slower than Sluice, so it would have
//! called Sluice runs "client-bound".) A null run is a calibration, never a result.

use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::nullsink::NullBroker;

use crate::scenario::Scenario;

/// Share of the client ceiling above which a run is called client-bound: the generator, not
/// the broker, set the pace.
pub const CLIENT_BOUND_SHARE: f64 = 0.8;

/// The live null brokers by bootstrap address, so `create_topic` can find the right one.
static NULLS: Mutex<Vec<(String, Arc<NullBroker>)>> = Mutex::new(Vec::new());

fn nulls() -> std::sync::MutexGuard<'static, Vec<(String, Arc<NullBroker>)>> {
    NULLS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The null broker of one run; stopped when dropped.
#[derive(Debug)]
pub struct NullTarget {
    bootstrap: String,
}

impl NullTarget {
    pub fn start() -> Result<NullTarget, String> {
        let broker = NullBroker::start()?;
        let bootstrap = broker.bootstrap().to_string();
        nulls().push((bootstrap.clone(), Arc::new(broker)));
        Ok(NullTarget { bootstrap })
    }

    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }
}

impl Drop for NullTarget {
    fn drop(&mut self) {
        // The registry holds the only handle: removing it stops the broker.
        let gone: Vec<_> = {
            let mut all = nulls();
            let (gone, keep) = std::mem::take(&mut *all)
                .into_iter()
                .partition(|(b, _)| b == &self.bootstrap);
            *all = keep;
            gone
        };
        drop(gone);
    }
}

/// Creates `topic` on the null broker at `bootstrap`; None when no null broker lives there
/// (then the caller uses CreateTopics as for any broker).
pub fn create_topic(bootstrap: &str, topic: &str, partitions: i32) -> Option<Result<(), String>> {
    let broker = nulls()
        .iter()
        .find(|(b, _)| b == bootstrap)
        .map(|(_, n)| n.clone())?;
    Some(broker.create_topic(topic, partitions))
}

/// Whether `bootstrap` is a live null broker of this process.
pub fn is_null(bootstrap: &str) -> bool {
    nulls().iter().any(|(b, _)| b == bootstrap)
}

/// The calibration scenario: the run's own message shape and client settings, but unthrottled,
/// with no bursts, no consumer sleep and no backpressure, for a short fixed window.
pub fn scenario(base: &Scenario) -> Scenario {
    let mut s = base.clone();
    s.rate_msg_s = 0;
    s.burst_rate_msg_s = 0;
    s.consumer_delay_us = std::time::Duration::ZERO;
    s.consumer_jitter_us = std::time::Duration::ZERO;
    s.phase_after_s = None;
    s.bp_max_lag = 0;
    s.shaping.rate_search = false;
    s.shaping.backlog_bytes = 0;
    s.duration_s = crate::limits::CALIBRATION_DURATION;
    s.warmup_s = crate::limits::CALIBRATION_WARMUP;
    s
}

/// The client's own ceiling, from a calibration run against the null broker.
#[derive(Debug, Clone, Serialize)]
pub struct ClientCeiling {
    /// Acknowledged messages per second the producers reached.
    pub produce_msg_s: f64,
    pub produce_mib_s: f64,
    /// Messages per second the consumers took in.
    pub consume_msg_s: f64,
    /// Length of the calibration's measured window.
    pub measure_s: f64,
}

/// How a run compares with the client ceiling.
#[derive(Debug, Clone, Serialize)]
pub struct Bottleneck {
    /// `client`: the run reached at least `share_limit` of the client's own ceiling, so the
    /// generator may have set the pace; `broker`: an unthrottled run stayed well below it;
    /// `none`: a paced run met its target rate.
    pub verdict: &'static str,
    /// Achieved acknowledged rate as a share of the ceiling (0..1, can exceed 1 by noise).
    pub share_of_ceiling: f64,
    pub share_limit: f64,
}

/// Judges a run's achieved rate against the ceiling. `target_msg_s` is 0 for unthrottled runs;
/// `rate_deficit` says whether a paced run fell short of its target.
pub fn judge(
    ceiling: &ClientCeiling,
    achieved_msg_s: f64,
    target_msg_s: u64,
    rate_deficit: bool,
) -> Bottleneck {
    let share = if ceiling.produce_msg_s > 0.0 {
        achieved_msg_s / ceiling.produce_msg_s
    } else {
        0.0
    };
    let verdict = if share >= CLIENT_BOUND_SHARE {
        "client"
    } else if target_msg_s > 0 && !rate_deficit {
        "none"
    } else {
        "broker"
    };
    Bottleneck {
        verdict,
        share_of_ceiling: share,
        share_limit: CLIENT_BOUND_SHARE,
    }
}

/// Records the ceiling and the verdict in a finished run's report, with a warning when the
/// client may have been the bottleneck.
pub fn attach(rep: &mut crate::report::Report, ceiling: &ClientCeiling) {
    let deficit = rep
        .throughput
        .rate_accuracy_pct
        .is_some_and(|acc| acc < 95.0);
    let b = judge(
        ceiling,
        rep.throughput.acked_msg_s,
        rep.scenario.rate_msg_s,
        deficit,
    );
    if b.verdict == "client" {
        rep.warnings.push(format!(
            "client-bound: {:.0} msg/s acknowledged is {:.0}% of the client's own ceiling ({:.0} msg/s against the null broker); the broker may be capable of more",
            rep.throughput.acked_msg_s,
            b.share_of_ceiling * 100.0,
            ceiling.produce_msg_s
        ));
    }
    rep.client_ceiling = Some(ceiling.clone());
    rep.bottleneck = Some(b);
}

/// The human summary's calibration lines (empty without --calibrate).
pub fn human(rep: &crate::report::Report) -> String {
    let (Some(c), Some(b)) = (&rep.client_ceiling, &rep.bottleneck) else {
        return String::new();
    };
    let what = match b.verdict {
        "client" => "the CLIENT set the pace (at or near its own ceiling)",
        "none" => "the target rate was met, well within the client's ceiling",
        _ => "the BROKER set the pace (the client had headroom)",
    };
    format!(
        "  client ceiling   {:.0} msg/s produced, {:.0} msg/s consumed (null broker); this run reached {:.0}% of it: {what}\n",
        c.produce_msg_s,
        c.consume_msg_s,
        b.share_of_ceiling * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceiling(msg_s: f64) -> ClientCeiling {
        ClientCeiling {
            produce_msg_s: msg_s,
            produce_mib_s: 0.0,
            consume_msg_s: msg_s,
            measure_s: 3.0,
        }
    }

    #[test]
    fn verdicts() {
        let c = ceiling(100_000.0);
        assert_eq!(judge(&c, 90_000.0, 0, false).verdict, "client");
        assert_eq!(judge(&c, 30_000.0, 0, false).verdict, "broker");
        assert_eq!(judge(&c, 10_000.0, 10_000, false).verdict, "none");
        assert_eq!(judge(&c, 7_000.0, 10_000, true).verdict, "broker");
        // A paced run that needs most of the client's ceiling is client-bound either way.
        assert_eq!(judge(&c, 85_000.0, 85_000, false).verdict, "client");
        // An unmeasured ceiling never blames the client.
        assert_eq!(judge(&ceiling(0.0), 5.0, 0, false).verdict, "broker");
    }

    #[test]
    fn calibration_scenario_is_unthrottled_and_short() {
        let mut base = Scenario::baseline();
        base.consumer_delay_us = std::time::Duration::from_millis(4);
        base.bp_max_lag = 5000;
        base.burst_rate_msg_s = 30_000;
        let s = scenario(&base);
        assert_eq!(s.rate_msg_s, 0);
        assert_eq!(s.burst_rate_msg_s, 0);
        assert_eq!(s.bp_max_lag, 0);
        assert!(s.consumer_delay_us.is_zero());
        assert_eq!(s.message_bytes, base.message_bytes);
        assert_eq!(s.compression, base.compression);
        assert_eq!(s.duration_s, crate::limits::CALIBRATION_DURATION);
    }

    #[test]
    fn null_broker_creates_topics_and_is_forgotten_when_dropped() {
        let m = NullTarget::start().expect("null broker");
        let b = m.bootstrap().to_string();
        assert!(is_null(&b));
        assert!(matches!(create_topic(&b, "t", 3), Some(Ok(()))));
        assert!(create_topic("127.0.0.1:1", "t", 3).is_none());
        drop(m);
        assert!(!is_null(&b));
        // Its port is closed once it is stopped.
        assert!(std::net::TcpStream::connect(&b).is_err());
    }
}
