//! Client-ceiling calibration. A result can only blame the broker if the load generator itself
//! was not the limit, so the bench can measure its own ceiling: the same scenario, unthrottled,
//! against `sluice serve --storage null` (the `null` target): the broker's own front end
//! (network, decoding, record validation, the append queue and commit rounds) over a no-op
//! log that acknowledges every produce and keeps nothing. What remains is the cost of our
//! generator and librdkafka's producers, plus the least this broker must do on the same cores,
//! so calibration measures the front end it benchmarks.
//!
//! Consumers run but receive nothing (the null log has no data to fetch: they long-poll), so
//! the ceiling is the producers' one; `consume_msg_s` is reported as measured (0). A null run
//! is a calibration, never a result: it neither waits to drain nor counts loss.
//!
//! (librdkafka's own mock cluster was tried first: it is slower than Sluice, so it would have
//! called Sluice runs "client-bound". An in-process null broker, a second Kafka server inside
//! the bench, came next; it measured a front end other than the one benchmarked.)

use serde::Serialize;

use crate::scenario::Scenario;

/// Share of the client ceiling above which a run is called client-bound: the generator, not
/// the broker, set the pace.
pub const CLIENT_BOUND_SHARE: f64 = 0.8;

/// The `sluice serve` flags of the null target.
pub fn null_serve_args() -> Vec<String> {
    vec!["--storage".into(), "null".into()]
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

/// The client's own ceiling, from a calibration run against the null target.
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
}
