//! Topic configs: the names, types, defaults and validation of every topic setting Sluice
//! reports, and the conversion of a topic's overrides into the log's [`LogConfig`].
//!
//! Settings Sluice enforces: retention.ms, retention.bytes, segment.bytes, segment.ms,
//! max.message.bytes, message.timestamp.type, index.interval.bytes, and the compaction
//! settings (cleanup.policy, min.cleanable.dirty.ratio, min/max.compaction.lag.ms,
//! delete.retention.ms; see `docs/compaction.md`). Others are accepted and reported with
//! Kafka's defaults because tools set and read them, but they have no effect on a single
//! node (flush.*, min.insync.replicas, ...). Values Sluice cannot honour are refused with
//! INVALID_CONFIG rather than silently ignored: broker-side recompression
//! (`compression.type` other than `producer`).

use std::collections::BTreeMap;

use sluice_log::LogConfig;

use crate::config::broker::BrokerConfig;
pub use crate::config::limits::{SEGMENT_BYTES_FLOOR, SEGMENT_BYTES_MIN};
use crate::config::table;
use crate::config::values::parse_timestamp_type;
pub use crate::config::values::{parse_cleanup_policy, timestamp_type_name, ConfigType};

/// Kafka 4.4's test-only topic config (`LogConfig.INTERNAL_SEGMENT_BYTES_CONFIG`): replaces
/// `segment.bytes` without its 1 MiB floor. Accepted only when the broker enables it
/// ([`check_internal`]); not listed by DescribeConfigs, as in Kafka.
pub const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";

/// Refuses `internal.segment.bytes` unless the broker allows it
/// (`sluice.internal.segment.bytes.enable`): Kafka accepts it from any client, which
/// would undo the `segment.bytes` floor.
pub fn check_internal(
    configs: &BTreeMap<String, String>,
    broker: &BrokerConfig,
) -> Result<(), String> {
    match configs.contains_key(INTERNAL_SEGMENT_BYTES) && !broker.internal_segment_bytes_enable {
        true => Err(format!(
            "{INTERNAL_SEGMENT_BYTES} is for tests; the broker refuses it unless sluice.internal.segment.bytes.enable=true"
        )),
        false => Ok(()),
    }
}

/// Kafka's DescribeConfigs config sources.
pub mod source {
    pub const TOPIC_CONFIG: i8 = 1;
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    pub const DEFAULT_CONFIG: i8 = 5;
}

/// One topic setting.
#[derive(Debug)]
pub struct ConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// The broker setting that supplies the default, if any.
    pub broker_synonym: Option<&'static str>,
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    kind: ConfigType,
    broker_synonym: Option<&'static str>,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        kind,
        broker_synonym,
        doc,
    }
}

/// Every topic config, in the order DescribeConfigs lists them.
pub const TOPIC_CONFIGS: &[ConfigDef] = &[
    def(
        "cleanup.policy",
        ConfigType::List,
        Some("log.cleanup.policy"),
        "delete, compact, or compact,delete.",
    ),
    def(
        "compression.type",
        ConfigType::Str,
        Some("compression.type"),
        "Only producer: batches are stored as sent.",
    ),
    def(
        "delete.retention.ms",
        ConfigType::Long,
        Some("log.cleaner.delete.retention.ms"),
        "Tombstone retention for compacted topics.",
    ),
    def(
        "file.delete.delay.ms",
        ConfigType::Long,
        Some("log.segment.delete.delay.ms"),
        "Delay before deleting a file.",
    ),
    def(
        "flush.messages",
        ConfigType::Long,
        Some("log.flush.interval.messages"),
        "Unused: Sluice syncs every acknowledged write.",
    ),
    def(
        "flush.ms",
        ConfigType::Long,
        Some("log.flush.interval.ms"),
        "Unused: Sluice syncs every acknowledged write.",
    ),
    def(
        "index.interval.bytes",
        ConfigType::Int,
        Some("log.index.interval.bytes"),
        "Bytes between offset index entries.",
    ),
    def(
        "max.compaction.lag.ms",
        ConfigType::Long,
        Some("log.cleaner.max.compaction.lag.ms"),
        "Compaction lag bound.",
    ),
    def(
        "max.message.bytes",
        ConfigType::Int,
        Some("message.max.bytes"),
        "Largest record batch accepted.",
    ),
    def(
        "message.timestamp.after.max.ms",
        ConfigType::Long,
        Some("log.message.timestamp.after.max.ms"),
        "Allowed future timestamp skew.",
    ),
    def(
        "message.timestamp.before.max.ms",
        ConfigType::Long,
        Some("log.message.timestamp.before.max.ms"),
        "Allowed past timestamp skew.",
    ),
    def(
        "message.timestamp.type",
        ConfigType::Str,
        Some("log.message.timestamp.type"),
        "CreateTime or LogAppendTime.",
    ),
    def(
        "min.cleanable.dirty.ratio",
        ConfigType::Double,
        Some("log.cleaner.min.cleanable.ratio"),
        "Compaction trigger ratio.",
    ),
    def(
        "min.compaction.lag.ms",
        ConfigType::Long,
        Some("log.cleaner.min.compaction.lag.ms"),
        "Minimum compaction lag.",
    ),
    def(
        "min.insync.replicas",
        ConfigType::Int,
        Some("min.insync.replicas"),
        "Always satisfied on one node.",
    ),
    def(
        "preallocate",
        ConfigType::Boolean,
        Some("log.preallocate"),
        "Unused.",
    ),
    def(
        "retention.bytes",
        ConfigType::Long,
        Some("log.retention.bytes"),
        "Partition size above which old segments are deleted.",
    ),
    def(
        "retention.ms",
        ConfigType::Long,
        Some("log.retention.ms"),
        "Age above which old segments are deleted.",
    ),
    def(
        "segment.bytes",
        ConfigType::Int,
        Some("log.segment.bytes"),
        "Segment size before rolling.",
    ),
    def(
        "segment.index.bytes",
        ConfigType::Int,
        Some("log.index.size.max.bytes"),
        "Unused.",
    ),
    def(
        "segment.jitter.ms",
        ConfigType::Long,
        Some("log.roll.jitter.ms"),
        "Unused.",
    ),
    def(
        "segment.ms",
        ConfigType::Long,
        Some("log.roll.ms"),
        "Segment age before rolling.",
    ),
    def(
        "unclean.leader.election.enable",
        ConfigType::Boolean,
        Some("unclean.leader.election.enable"),
        "Meaningless on one node.",
    ),
];

pub fn lookup(name: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// The default value of a topic config on this broker, and where it came from: the
/// current value of its broker synonym (a row of the broker config table), whose source is
/// STATIC_BROKER_CONFIG when it or one of its own synonyms was set.
pub fn default_value(name: &str, broker: &BrokerConfig) -> (String, i8) {
    let Some(row) = lookup(name)
        .and_then(|d| d.broker_synonym)
        .and_then(table::lookup)
    else {
        debug_assert!(false, "{name}: no broker synonym in the config table");
        return (String::new(), source::DEFAULT_CONFIG);
    };
    let set = std::iter::once(row.name)
        .chain(row.synonyms.iter().copied())
        .any(|k| broker.explicit.contains_key(k));
    let src = match set {
        true => source::STATIC_BROKER_CONFIG,
        false => source::DEFAULT_CONFIG,
    };
    (row.current(broker), src)
}

/// Validates one override. The error is the message returned with INVALID_CONFIG.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    if name == INTERNAL_SEGMENT_BYTES {
        return match value.trim().parse::<i32>() {
            Ok(n) if i64::from(n) >= SEGMENT_BYTES_FLOOR => Ok(()),
            _ => Err(format!(
                "Invalid value {value} for configuration {name}: must be at least {SEGMENT_BYTES_FLOOR}"
            )),
        };
    }
    let def = lookup(name).ok_or_else(|| format!("Unknown topic config name: {name}"))?;
    let v = value.trim();
    let typed = match def.kind {
        ConfigType::Boolean => v
            .parse::<bool>()
            .map(|_| ())
            .map_err(|_| "expected true or false".to_string()),
        ConfigType::Short => v
            .parse::<i16>()
            .map(|_| ())
            .map_err(|_| "expected a 16-bit integer".to_string()),
        ConfigType::Int => v
            .parse::<i32>()
            .map(|_| ())
            .map_err(|_| "expected a 32-bit integer".to_string()),
        ConfigType::Long => v
            .parse::<i64>()
            .map(|_| ())
            .map_err(|_| "expected a 64-bit integer".to_string()),
        ConfigType::Double => v
            .parse::<f64>()
            .map(|_| ())
            .map_err(|_| "expected a number".to_string()),
        ConfigType::Str | ConfigType::List | ConfigType::Password => Ok(()),
    };
    typed.map_err(|e| format!("Invalid value {value} for configuration {name}: {e}"))?;
    let range = |ok: bool, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(format!(
                "Invalid value {value} for configuration {name}: {what}"
            ))
        }
    };
    match name {
        "cleanup.policy" => parse_cleanup_policy(v)
            .map(|_| ())
            .map_err(|e| format!("Invalid value {value} for configuration {name}: {e}")),
        "min.compaction.lag.ms" | "delete.retention.ms" => range(
            v.parse::<i64>().is_ok_and(|n| n >= 0),
            "must not be negative",
        ),
        "max.compaction.lag.ms" => {
            range(v.parse::<i64>().is_ok_and(|n| n >= 1), "must be at least 1")
        }
        "compression.type" => range(
            v == "producer",
            "only producer is supported (batches are stored as sent)",
        ),
        "message.timestamp.type" => parse_timestamp_type(name, v)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        "segment.bytes" => range(
            v.parse::<i64>().is_ok_and(|n| n >= SEGMENT_BYTES_MIN),
            "must be at least 1048576 (Kafka's minimum)",
        ),
        "segment.ms" => range(v.parse::<i64>().is_ok_and(|n| n >= 1), "must be at least 1"),
        "retention.ms" | "retention.bytes" => range(
            v.parse::<i64>().is_ok_and(|n| n >= -1),
            "must be -1 or more",
        ),
        "max.message.bytes" => range(
            v.parse::<i32>().is_ok_and(|n| n >= 0),
            "must not be negative",
        ),
        "index.interval.bytes" => range(
            v.parse::<i32>().is_ok_and(|n| n >= 0),
            "must not be negative",
        ),
        "min.insync.replicas" => range(
            v.parse::<i32>().is_ok_and(|n| n == 1),
            "must be 1 on a single node",
        ),
        "min.cleanable.dirty.ratio" => range(
            v.parse::<f64>().is_ok_and(|n| (0.0..=1.0).contains(&n)),
            "must be in [0, 1]",
        ),
        _ => Ok(()),
    }
}

/// The effective value of every topic config: (name, value, source).
pub fn effective(
    overrides: &BTreeMap<String, String>,
    broker: &BrokerConfig,
) -> Vec<(&'static str, String, i8)> {
    TOPIC_CONFIGS
        .iter()
        .map(|d| match overrides.get(d.name) {
            Some(v) => (d.name, v.clone(), source::TOPIC_CONFIG),
            None => {
                let (v, s) = default_value(d.name, broker);
                (d.name, v, s)
            }
        })
        .collect()
}

/// The log settings for a topic with these overrides. Overrides were validated on the way
/// in; anything unparsable falls back to the default rather than failing a running broker.
pub fn log_config(overrides: &BTreeMap<String, String>, broker: &BrokerConfig) -> LogConfig {
    let get = |name: &str| -> String {
        overrides
            .get(name)
            .cloned()
            .unwrap_or_else(|| default_value(name, broker).0)
    };
    let num = |name: &str, fallback: i64| get(name).trim().parse::<i64>().unwrap_or(fallback);
    let defaults = LogConfig::default();
    let policy = parse_cleanup_policy(&get("cleanup.policy")).unwrap_or_else(|_| "delete".into());
    LogConfig {
        segment_bytes: overrides
            .get(INTERNAL_SEGMENT_BYTES)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or_else(|| num("segment.bytes", defaults.segment_bytes as i64))
            .max(SEGMENT_BYTES_FLOOR) as u64,
        segment_ms: num("segment.ms", defaults.segment_ms),
        retention_ms: num("retention.ms", defaults.retention_ms),
        retention_bytes: num("retention.bytes", defaults.retention_bytes),
        max_message_bytes: num("max.message.bytes", i64::from(defaults.max_message_bytes))
            .clamp(0, i64::from(i32::MAX)) as u32,
        timestamp_type: parse_timestamp_type(
            "message.timestamp.type",
            get("message.timestamp.type").trim(),
        )
        .unwrap_or_default(),
        index_interval_bytes: num(
            "index.interval.bytes",
            i64::from(defaults.index_interval_bytes),
        )
        .clamp(0, i64::from(i32::MAX)) as u32,
        cleanup_delete: policy.contains("delete"),
        cleanup_compact: policy.contains("compact"),
        min_cleanable_dirty_ratio: get("min.cleanable.dirty.ratio")
            .trim()
            .parse::<f64>()
            .unwrap_or(defaults.min_cleanable_dirty_ratio),
        min_compaction_lag_ms: num("min.compaction.lag.ms", defaults.min_compaction_lag_ms),
        max_compaction_lag_ms: num("max.compaction.lag.ms", defaults.max_compaction_lag_ms),
        delete_retention_ms: num("delete.retention.ms", defaults.delete_retention_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: validation accepts Kafka's values and refuses what Sluice cannot honour.
    #[test]
    fn validates() {
        assert!(validate("retention.ms", "1000").is_ok());
        assert!(validate("retention.ms", "-1").is_ok());
        assert!(validate("retention.ms", "abc").is_err());
        assert!(validate("retention.ms", "-5").is_err());
        assert!(validate("segment.bytes", "100").is_err());
        assert!(validate("segment.bytes", "1048575").is_err());
        assert!(validate("segment.bytes", "1048576").is_ok());
        assert!(validate("internal.segment.bytes", "1024").is_ok());
        assert!(validate("internal.segment.bytes", "1023").is_err());
        assert!(validate("cleanup.policy", "compact").is_ok());
        assert!(validate("cleanup.policy", "delete, compact").is_ok());
        assert!(validate("cleanup.policy", "compact,bogus").is_err());
        assert!(validate("max.compaction.lag.ms", "0").is_err());
        assert!(validate("delete.retention.ms", "-1").is_err());
        assert!(validate("message.timestamp.type", "LogAppendTime").is_ok());
        assert!(validate("message.timestamp.type", "Later").is_err());
        assert!(validate("no.such.config", "1").is_err());
    }

    // Goal: one source of topic defaults: every topic config's default is a broker setting
    // of the table, and setting it (or its synonym) changes the topic default and source.
    #[test]
    fn topic_defaults_come_from_broker_settings() {
        for d in TOPIC_CONFIGS {
            let broker = d.broker_synonym.and_then(table::lookup);
            assert!(
                broker.is_some(),
                "{}: broker synonym not in the table",
                d.name
            );
        }
        let mut broker = BrokerConfig::default();
        assert_eq!(
            default_value("index.interval.bytes", &broker),
            ("4096".into(), source::DEFAULT_CONFIG)
        );
        broker.set("log.index.interval.bytes", "8192").unwrap();
        broker.set("log.retention.hours", "2").unwrap();
        assert_eq!(
            default_value("index.interval.bytes", &broker),
            ("8192".into(), source::STATIC_BROKER_CONFIG)
        );
        assert_eq!(
            default_value("retention.ms", &broker),
            ("7200000".into(), source::STATIC_BROKER_CONFIG)
        );
        assert_eq!(
            log_config(&BTreeMap::new(), &broker).index_interval_bytes,
            8192
        );
    }

    // Goal: overrides win over broker defaults, and broker-set defaults report their source.
    #[test]
    fn effective_values_and_log_config() {
        let mut broker = BrokerConfig::default();
        broker.set("log.retention.ms", "5000").unwrap();
        let mut o = BTreeMap::new();
        o.insert("segment.bytes".to_string(), "2048".to_string());
        let eff = effective(&o, &broker);
        let get = |n: &str| eff.iter().find(|e| e.0 == n).unwrap().clone();
        assert_eq!(
            get("segment.bytes"),
            ("segment.bytes", "2048".into(), source::TOPIC_CONFIG)
        );
        assert!(eff.iter().all(|e| e.0 != INTERNAL_SEGMENT_BYTES));
        assert_eq!(
            get("retention.ms"),
            ("retention.ms", "5000".into(), source::STATIC_BROKER_CONFIG)
        );
        assert_eq!(get("retention.bytes").2, source::DEFAULT_CONFIG);
        let lc = log_config(&o, &broker);
        // 2048: a value an older Sluice stored is kept (the floor applies to new values).
        assert_eq!(lc.segment_bytes, 2048);
        let mut internal = o.clone();
        internal.insert(INTERNAL_SEGMENT_BYTES.into(), "1024".into());
        assert_eq!(log_config(&internal, &broker).segment_bytes, 1024);
        assert!(check_internal(&internal, &broker).is_err());
        broker.internal_segment_bytes_enable = true;
        assert!(check_internal(&internal, &broker).is_ok());
        assert_eq!(lc.retention_ms, 5000);
        assert!(lc.cleanup_delete && !lc.cleanup_compact);
        o.insert("cleanup.policy".into(), "compact".into());
        o.insert("delete.retention.ms".into(), "100".into());
        let lc = log_config(&o, &broker);
        assert!(lc.cleanup_compact && !lc.cleanup_delete);
        assert_eq!(lc.delete_retention_ms, 100);
    }
}
