//! Producer-side shaping settings of a scenario, kept in one struct that `Scenario` flattens
//! into its JSON: message keys and skew (OMB's key distributors), OMB's max-sustainable rate
//! search, OMB's backlog build-and-drain mode, and teranode's application-level batcher in
//! front of the client. Plain data with the defaults of "off"; `validate` rejects combinations
//! that would make a run meaningless, with a message for the usage error.

use std::time::Duration;

use serde::Serialize;

use crate::limits;

/// Which key each message carries (OMB's `keyDistributor`, plus a hot-key skew).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyMode {
    /// Null keys (OMB NO_KEY); `partitioning` decides the partition.
    None,
    /// Keys `k-<n>` taken in turn from a set of `key_count` (OMB KEY_ROUND_ROBIN).
    RoundRobin,
    /// A uniformly random key of the set for every message (OMB RANDOM_NANO, seeded here).
    Random,
    /// `hot_key_pct` % of messages carry one key (`k-hot`), the rest a random key of the set:
    /// one partition gets at least that share.
    Hot,
}

/// When the application-level batcher hands its buffer to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppBatchMode {
    /// When the oldest buffered message is `app_batch_linger_ms` old.
    Deadline,
    /// When no message arrived for `app_batch_linger_ms` (the timer re-arms on every message,
    /// teranode's behaviour): a steady feed faster than the linger never flushes on time.
    Debounce,
}

/// The producer-side shaping of one scenario (see the module comment).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Shaping {
    pub keys: KeyMode,
    /// Distinct keys of the round-robin, random and hot modes (the hot key is extra).
    pub key_count: u32,
    /// Hot mode: percent of messages carrying the hot key.
    pub hot_key_pct: u32,
    /// OMB max-rate search: the aggregate target rate is adjusted every `search_period_ms`
    /// (and `rate_msg_s` is ignored).
    pub rate_search: bool,
    pub search_start_msg_s: u64,
    #[serde(serialize_with = "ser_ms")]
    pub search_period_ms: Duration,
    /// Messages of publish backlog (expected - sent) or receive backlog (sent - received) above
    /// which a search period counts as overloaded (OMB's default is 1000 for both).
    pub search_backlog_limit: u64,
    /// OMB backlog mode: consumers are paused from load start until (acked - consumed) x
    /// message size reaches this many bytes, then resume and the drain is timed. 0 = off.
    pub backlog_bytes: u64,
    /// The drain ends when the backlog is at most max(1000, (1 - ratio) x built backlog).
    pub backlog_drain_ratio: f64,
    /// teranode's application-level batcher in front of the client; 0 = off.
    pub app_batch_linger_ms: u32,
    pub app_batch_mode: AppBatchMode,
    /// Size trigger of the application batcher (messages).
    pub app_batch_max: u32,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl Default for Shaping {
    fn default() -> Self {
        Shaping {
            keys: KeyMode::None,
            key_count: 10_000,
            hot_key_pct: 80,
            rate_search: false,
            search_start_msg_s: 10_000,
            search_period_ms: Duration::from_secs(3),
            search_backlog_limit: 1000,
            backlog_bytes: 0,
            backlog_drain_ratio: 1.0,
            app_batch_linger_ms: 0,
            app_batch_mode: AppBatchMode::Deadline,
            app_batch_max: 10_000,
        }
    }
}

impl Shaping {
    pub fn app_batcher_on(&self) -> bool {
        self.app_batch_linger_ms > 0
    }

    /// Rejects settings that cannot work together. `explicit_partitions`: the scenario's
    /// partitioning sends to explicit partitions; `bursts`: a burst shape is configured.
    pub fn validate(
        &self,
        explicit_partitions: bool,
        bursts: bool,
        message_bytes: usize,
    ) -> Result<(), String> {
        if self.keys != KeyMode::None && explicit_partitions {
            return Err(
                "--keys sends keyed messages through librdkafka's partitioner: use --partitioning client"
                    .into(),
            );
        }
        if self.rate_search && bursts {
            return Err("--rate search and --burst-rate do not combine".into());
        }
        if self.rate_search && self.backlog_bytes > 0 {
            return Err(
                "--rate search and --backlog do not combine (paused consumers look like overload)"
                    .into(),
            );
        }
        if self.rate_search && self.search_period_ms < limits::MIN_SEARCH_PERIOD {
            return Err(format!(
                "--search-period must be at least {:?}",
                limits::MIN_SEARCH_PERIOD
            ));
        }
        if self.rate_search && self.search_start_msg_s == 0 {
            return Err("--search-start-rate must be above 0".into());
        }
        if !(0.0..=1.0).contains(&self.backlog_drain_ratio) {
            return Err("--backlog-drain-ratio must be within 0..1".into());
        }
        if self.app_batcher_on()
            && self.app_batch_max as u64 * message_bytes as u64 > limits::APP_BATCH_MAX_BYTES
        {
            return Err(format!(
                "--app-batch-max x message size exceeds the application batcher's {} MiB cap",
                limits::APP_BATCH_MAX_BYTES >> 20
            ));
        }
        Ok(())
    }
}

/// `--rate`: a fixed aggregate rate (0 = unthrottled) or the max-sustainable search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateArg {
    Fixed(u64),
    Search,
}

pub fn parse_rate_arg(s: &str) -> Result<RateArg, String> {
    if s.trim().eq_ignore_ascii_case("search") {
        return Ok(RateArg::Search);
    }
    crate::units::parse_rate(s)
        .map(RateArg::Fixed)
        .map_err(|e| format!("{e}; or \"search\" for the max-sustainable rate search"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_args_parse() {
        assert_eq!(parse_rate_arg("search"), Ok(RateArg::Search));
        assert_eq!(parse_rate_arg("10k"), Ok(RateArg::Fixed(10_000)));
        assert!(parse_rate_arg("fast").unwrap_err().contains("not a rate"));
    }

    #[test]
    fn invalid_combinations_are_refused() {
        let ok = Shaping::default();
        assert!(ok.validate(true, true, 512).is_ok());
        let keyed = Shaping {
            keys: KeyMode::Hot,
            ..Shaping::default()
        };
        assert!(keyed.validate(true, false, 512).is_err());
        assert!(keyed.validate(false, false, 512).is_ok());
        let search = Shaping {
            rate_search: true,
            ..Shaping::default()
        };
        assert!(search.validate(false, true, 512).is_err());
        assert!(Shaping {
            backlog_bytes: 1,
            ..search.clone()
        }
        .validate(false, false, 512)
        .is_err());
        assert!(Shaping {
            search_period_ms: Duration::from_millis(1),
            ..search
        }
        .validate(false, false, 512)
        .is_err());
        let huge = Shaping {
            app_batch_linger_ms: 10,
            app_batch_max: 1_000_000,
            ..Shaping::default()
        };
        assert!(huge.validate(false, false, 16 << 20).is_err());
    }
}
