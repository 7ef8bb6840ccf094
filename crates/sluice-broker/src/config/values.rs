//! The values settings are made of, shared by the broker and topic tables: the error a bad
//! value gets ([`ConfigError`]), Kafka's config types, and the parsers of values that are
//! more than a number (timestamp types, cleanup policies, address overrides, lists, ...).
//!
//! The bottom of the configuration: it imports nothing else from the crate.

use std::collections::BTreeMap;
use std::net::IpAddr;

use sluice_log::{FsyncPolicy, Storage, TimestampType};

/// A setting that could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {key}={value}: {reason}")]
pub struct ConfigError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

/// Kafka's DescribeConfigs config types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    Str = 2,
    Int = 3,
    Short = 4,
    Long = 5,
    Double = 6,
    List = 7,
    Password = 9,
}

/// A comma-separated list's trimmed, non-empty entries.
pub fn list(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// Parses `cleanup.policy` (a list of `delete` and `compact`, Kafka's values) into its
/// normal form: `delete`, `compact` or `compact,delete`.
pub fn parse_cleanup_policy(value: &str) -> Result<String, String> {
    let (mut compact, mut delete) = (false, false);
    for item in value.split(',').map(str::trim) {
        match item {
            "compact" => compact = true,
            "delete" => delete = true,
            _ => return Err(format!("{item:?} is not delete or compact")),
        }
    }
    Ok(match (compact, delete) {
        (true, true) => "compact,delete",
        (true, false) => "compact",
        _ => "delete",
    }
    .to_string())
}

pub fn timestamp_type_name(t: sluice_log::TimestampType) -> &'static str {
    match t {
        sluice_log::TimestampType::CreateTime => "CreateTime",
        sluice_log::TimestampType::LogAppendTime => "LogAppendTime",
    }
}

/// Kafka's authorizer class names are accepted (both serve the same ACL model here); an
/// empty value means no authorizer, any other class refuses to start (fail closed).
pub(crate) fn authorizer_class(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value {
        "" => Ok(false),
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        | "kafka.security.authorizer.AclAuthorizer" => Ok(true),
        _ => Err(ConfigError {
            key: key.into(),
            value: value.into(),
            reason: "only org.apache.kafka.metadata.authorizer.StandardAuthorizer and kafka.security.authorizer.AclAuthorizer are served; refusing to start rather than run without the authorizer asked for".into(),
        }),
    }
}

/// Strips a `PLAINTEXT://` style scheme from a Kafka listener string (`metrics.listen`).
pub(crate) fn strip_listener_scheme(value: &str) -> String {
    let first = value.split(',').next().unwrap_or(value).trim();
    match first.split_once("://") {
        Some((_, addr)) => addr.to_string(),
        None => first.to_string(),
    }
}

pub fn parse_timestamp_type(key: &str, v: &str) -> Result<TimestampType, ConfigError> {
    match v {
        "CreateTime" => Ok(TimestampType::CreateTime),
        "LogAppendTime" => Ok(TimestampType::LogAppendTime),
        _ => Err(ConfigError {
            key: key.into(),
            value: v.into(),
            reason: "expected CreateTime or LogAppendTime".into(),
        }),
    }
}

/// Parses `max.connections.per.ip.overrides`: comma-separated `ip:count` (IPv6 addresses in
/// brackets, `[::1]:10`). Kafka also accepts host names; we take addresses only, so the limit
/// never depends on a DNS answer.
pub(crate) fn parse_ip_overrides(
    key: &str,
    v: &str,
) -> Result<BTreeMap<IpAddr, usize>, ConfigError> {
    let bad = |reason: &str| ConfigError {
        key: key.into(),
        value: v.into(),
        reason: reason.into(),
    };
    let mut out = BTreeMap::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (host, count) = item
            .rsplit_once(':')
            .ok_or_else(|| bad("expected ip:count pairs"))?;
        let ip: IpAddr = host
            .trim_matches(['[', ']'])
            .parse()
            .map_err(|_| bad("not an IP address (host names are not supported)"))?;
        let count: usize = count.trim().parse().map_err(|_| bad("bad count"))?;
        out.insert(ip, count);
    }
    Ok(out)
}

pub(crate) fn parse_storage(key: &str, v: &str) -> Result<Storage, ConfigError> {
    match v {
        "disk" => Ok(Storage::Disk),
        "null" => Ok(Storage::Null),
        _ => Err(ConfigError {
            key: key.into(),
            value: v.into(),
            reason: "expected disk or null".into(),
        }),
    }
}

pub(crate) fn parse_fsync(key: &str, v: &str) -> Result<FsyncPolicy, ConfigError> {
    match v {
        "always" => Ok(FsyncPolicy::Always),
        "never" => Ok(FsyncPolicy::Never),
        _ => Err(ConfigError {
            key: key.into(),
            value: v.into(),
            reason: "expected always or never".into(),
        }),
    }
}
