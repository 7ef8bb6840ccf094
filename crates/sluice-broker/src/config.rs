//! [`BrokerConfig`]: everything `sluice serve` is told at start, with Kafka's names where a
//! Kafka broker setting exists. A `server.properties`-style file can supply values; explicit
//! command-line flags win over the file, and the file wins over defaults.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use sluice_coordinator::{GroupConfig, TxnConfig};
use sluice_log::{FsyncPolicy, Storage, TimestampType};

use crate::config_security::{self, SecurityProtocol, SecuritySettings};
use crate::limits;
use crate::listeners::{self, ListenerSpec};

/// Defaults for new topics (Kafka's `log.*` broker settings). Each is also reported by
/// DescribeConfigs, with STATIC_BROKER_CONFIG as the source when it was set explicitly.
#[derive(Debug, Clone)]
pub struct TopicDefaults {
    pub partitions: i32,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub segment_bytes: i64,
    pub segment_ms: i64,
    pub max_message_bytes: i64,
    pub timestamp_type: TimestampType,
    /// `log.cleanup.policy`, normalized (`delete`, `compact` or `compact,delete`).
    pub cleanup_policy: String,
    /// `log.cleaner.min.cleanable.ratio`.
    pub min_cleanable_dirty_ratio: f64,
    /// `log.cleaner.min.compaction.lag.ms`.
    pub min_compaction_lag_ms: i64,
    /// `log.cleaner.max.compaction.lag.ms`.
    pub max_compaction_lag_ms: i64,
    /// `log.cleaner.delete.retention.ms`.
    pub delete_retention_ms: i64,
}

impl Default for TopicDefaults {
    fn default() -> Self {
        Self {
            partitions: 1,
            retention_ms: 7 * 24 * 3600 * 1000,
            retention_bytes: -1,
            segment_bytes: 1 << 30,
            segment_ms: 7 * 24 * 3600 * 1000,
            max_message_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
            cleanup_policy: "delete".into(),
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// Address of the first listener (`listeners`). Port 0 picks a free port.
    pub listen: String,
    /// `listeners`: every named listener; empty means one PLAINTEXT listener on `listen`.
    pub listeners: Vec<ListenerSpec>,
    /// `advertised.listeners`: what clients are told per listener; a listener without an
    /// entry advertises its bound address.
    pub advertised_listeners: Vec<ListenerSpec>,
    pub node_id: i32,
    pub data_dir: PathBuf,
    /// `auto.create.topics.enable`.
    pub auto_create_topics: bool,
    pub topic_defaults: TopicDefaults,
    /// Broker settings that were set explicitly (Kafka names), for DescribeConfigs sources.
    pub explicit: BTreeMap<String, String>,
    pub fsync: FsyncPolicy,
    /// `sluice.journal.direct.io`: journal rounds written with `O_DIRECT` (see
    /// `sluice_log::LogManagerConfig::journal_direct_io`). Default false.
    pub journal_direct_io: bool,
    /// `sluice.storage`: `disk`, or `null` (the no-op log the bench calibrates against:
    /// produce is acknowledged and nothing is kept; never for data).
    pub storage: Storage,
    /// `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: u64,
    /// `max.connections`.
    pub max_connections: usize,
    /// `socket.request.max.bytes`.
    pub max_request_bytes: usize,
    /// `queued.max.request.bytes`: request bytes buffered across all connections.
    pub queued_max_request_bytes: usize,
    /// `max.connections.per.ip`.
    pub max_connections_per_ip: usize,
    /// `max.connections.per.ip.overrides`: `ip:count` pairs that replace the per-IP limit.
    pub max_connections_per_ip_overrides: BTreeMap<IpAddr, usize>,
    /// `connections.max.idle.ms`.
    pub connections_max_idle_ms: u64,
    /// `fetch.max.bytes`: the largest fetch response.
    pub fetch_max_bytes: usize,
    /// Group coordinator settings (`group.*`, `offsets.retention.minutes`,
    /// `offset.metadata.max.bytes`).
    pub group: GroupConfig,
    /// `producer.id.expiration.ms`: idle idempotent-producer state is dropped after this.
    pub producer_id_expiration_ms: u64,
    /// `listener.security.protocol.map`: listener name to security protocol.
    pub listener_security_protocol_map: BTreeMap<String, SecurityProtocol>,
    /// The `ssl.*`, `sasl.*` and `listener.name.*` settings (see `config_security`).
    pub security: SecuritySettings,
    /// `connections.max.reauth.ms` (KIP-368): an authenticated SASL session's lifetime; 0
    /// means sessions do not expire.
    pub connections_max_reauth_ms: u64,
    /// `sasl.server.max.receive.size`: the largest frame accepted before authentication.
    pub sasl_server_max_receive_size: usize,
    /// `metrics.listen`: `host:port` of the admin listener (`/metrics`, `/ready`); off
    /// when unset. Port 0 picks a free port.
    pub metrics_listen: Option<String>,
    /// `log.cleaner.*`: the log cleaner's threads, backoff, I/O rate and key map memory.
    pub log_cleaner: sluice_log::CleanerConfig,
    /// Transaction coordinator settings (`transaction.max.timeout.ms`,
    /// `transactional.id.expiration.ms`; docs/transactions.md §8).
    pub txn: TxnConfig,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often timed-out
    /// transactions are aborted and unfinished completions retried.
    pub transaction_abort_cleanup_interval_ms: u64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how often idle
    /// transactional ids are expired.
    pub transaction_remove_expired_cleanup_interval_ms: u64,
    /// `transaction.state.log.segment.bytes`: segment size of `__transaction_state-0`.
    pub transaction_state_log_segment_bytes: u64,
    /// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found` (see `acl`).
    pub authorizer: crate::acl::AuthorizerConfig,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:9092".into(),
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            node_id: 1,
            data_dir: PathBuf::from("./data"),
            auto_create_topics: true,
            topic_defaults: TopicDefaults::default(),
            explicit: BTreeMap::new(),
            fsync: FsyncPolicy::Always,
            journal_direct_io: false,
            storage: Storage::Disk,
            retention_check_interval_ms: 300_000,
            max_connections: limits::CONNECTIONS_MAX_DEFAULT,
            max_request_bytes: limits::REQUEST_BYTES_MAX_DEFAULT,
            queued_max_request_bytes: limits::QUEUED_REQUEST_BYTES_MAX_DEFAULT,
            max_connections_per_ip: limits::CONNECTIONS_PER_IP_MAX_DEFAULT,
            max_connections_per_ip_overrides: BTreeMap::new(),
            connections_max_idle_ms: limits::CONNECTIONS_IDLE_MS_DEFAULT,
            fetch_max_bytes: limits::FETCH_MAX_BYTES_DEFAULT,
            group: GroupConfig::default(),
            producer_id_expiration_ms: 86_400_000,
            listener_security_protocol_map: BTreeMap::new(),
            security: SecuritySettings::default(),
            connections_max_reauth_ms: 0,
            sasl_server_max_receive_size: limits::SASL_SERVER_MAX_RECEIVE_BYTES_DEFAULT,
            metrics_listen: None,
            log_cleaner: sluice_log::CleanerConfig::default(),
            txn: TxnConfig::default(),
            transaction_abort_cleanup_interval_ms: limits::TXN_ABORT_CLEANUP_INTERVAL_MS_DEFAULT,
            transaction_remove_expired_cleanup_interval_ms:
                limits::TXN_REMOVE_EXPIRED_CLEANUP_INTERVAL_MS_DEFAULT,
            transaction_state_log_segment_bytes: limits::TXN_STATE_SEGMENT_BYTES_DEFAULT,
            authorizer: crate::acl::AuthorizerConfig::default(),
        }
    }
}

/// A setting that could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {key}={value}: {reason}")]
pub struct ConfigError {
    pub key: String,
    pub value: String,
    pub reason: String,
}

fn parse<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value.trim().parse().map_err(|_| ConfigError {
        key: key.into(),
        value: value.into(),
        reason: "not a valid number or boolean".into(),
    })
}

/// Kafka's authorizer class names are accepted (both serve the same ACL model here); an
/// empty value means no authorizer, any other class refuses to start (fail closed).
fn authorizer_class(key: &str, value: &str) -> Result<bool, ConfigError> {
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
fn strip_listener_scheme(value: &str) -> String {
    let first = value.split(',').next().unwrap_or(value).trim();
    match first.split_once("://") {
        Some((_, addr)) => addr.to_string(),
        None => first.to_string(),
    }
}

impl BrokerConfig {
    /// Applies one setting by its Kafka broker name (or a Sluice name). Unknown keys are
    /// returned as `Ok(false)` so the caller can warn about them.
    pub fn set(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let v = value.trim();
        // Security settings are stored apart (never in `explicit`: JAAS values hold passwords).
        if self.security.set(key, v)? {
            return Ok(true);
        }
        let d = &mut self.topic_defaults;
        match key {
            "listeners" => {
                self.listeners = listeners::parse(key, v)?;
                self.listen = self.listeners[0].addr.clone();
            }
            "listener.security.protocol.map" => {
                self.listener_security_protocol_map = config_security::parse_protocol_map(key, v)?
            }
            "advertised.listeners" => self.advertised_listeners = listeners::parse(key, v)?,
            "authorizer.class.name" => self.authorizer.enabled = authorizer_class(key, v)?,
            "super.users" => {
                self.authorizer.super_users = v
                    .split(';')
                    .map(str::trim)
                    .filter(|u| !u.is_empty())
                    .map(String::from)
                    .collect()
            }
            "allow.everyone.if.no.acl.found" => {
                self.authorizer.allow_everyone_if_no_acl_found = parse(key, v)?
            }
            "connections.max.reauth.ms" => self.connections_max_reauth_ms = parse(key, v)?,
            "sasl.server.max.receive.size" => self.sasl_server_max_receive_size = parse(key, v)?,
            "node.id" | "broker.id" => self.node_id = parse(key, v)?,
            "log.dirs" | "log.dir" => {
                self.data_dir = PathBuf::from(v.split(',').next().unwrap_or(v))
            }
            "auto.create.topics.enable" => self.auto_create_topics = parse(key, v)?,
            "num.partitions" => d.partitions = parse(key, v)?,
            "log.retention.ms" => d.retention_ms = parse(key, v)?,
            "log.retention.minutes" => d.retention_ms = parse::<i64>(key, v)? * 60_000,
            "log.retention.hours" => d.retention_ms = parse::<i64>(key, v)? * 3_600_000,
            "log.retention.bytes" => d.retention_bytes = parse(key, v)?,
            "log.segment.bytes" => d.segment_bytes = parse(key, v)?,
            "log.roll.ms" => d.segment_ms = parse(key, v)?,
            "log.roll.hours" => d.segment_ms = parse::<i64>(key, v)? * 3_600_000,
            "message.max.bytes" => d.max_message_bytes = parse(key, v)?,
            "log.message.timestamp.type" => d.timestamp_type = parse_timestamp_type(key, v)?,
            "log.retention.check.interval.ms" => self.retention_check_interval_ms = parse(key, v)?,
            "log.cleaner.enable" => self.log_cleaner.enable = parse(key, v)?,
            "log.cleaner.threads" => self.log_cleaner.threads = parse(key, v)?,
            "log.cleaner.backoff.ms" => self.log_cleaner.backoff_ms = parse(key, v)?,
            "log.cleaner.io.max.bytes.per.second" => {
                // Kafka's default is Double.MAX_VALUE: anything that large means no limit.
                let rate: f64 = parse(key, v)?;
                self.log_cleaner.io_max_bytes_per_second = rate.min(u64::MAX as f64) as u64;
            }
            "log.cleaner.dedupe.buffer.size" => {
                self.log_cleaner.dedupe_buffer_bytes = parse(key, v)?
            }
            "log.cleanup.policy" => {
                d.cleanup_policy =
                    crate::topic_config::parse_cleanup_policy(v).map_err(|reason| ConfigError {
                        key: key.into(),
                        value: v.into(),
                        reason,
                    })?
            }
            "log.cleaner.min.cleanable.ratio" => d.min_cleanable_dirty_ratio = parse(key, v)?,
            "log.cleaner.min.compaction.lag.ms" => d.min_compaction_lag_ms = parse(key, v)?,
            "log.cleaner.max.compaction.lag.ms" => d.max_compaction_lag_ms = parse(key, v)?,
            "log.cleaner.delete.retention.ms" => d.delete_retention_ms = parse(key, v)?,
            "max.connections" => self.max_connections = parse(key, v)?,
            "socket.request.max.bytes" => self.max_request_bytes = parse(key, v)?,
            "queued.max.request.bytes" => self.queued_max_request_bytes = parse(key, v)?,
            "max.connections.per.ip" => self.max_connections_per_ip = parse(key, v)?,
            "max.connections.per.ip.overrides" => {
                self.max_connections_per_ip_overrides = parse_ip_overrides(key, v)?
            }
            "connections.max.idle.ms" => self.connections_max_idle_ms = parse(key, v)?,
            "fetch.max.bytes" => self.fetch_max_bytes = parse(key, v)?,
            "sluice.fsync" => self.fsync = parse_fsync(key, v)?,
            "sluice.journal.direct.io" => self.journal_direct_io = parse(key, v)?,
            "sluice.storage" => self.storage = parse_storage(key, v)?,
            "group.min.session.timeout.ms" => {
                self.group.group_min_session_timeout_ms = parse(key, v)?
            }
            "group.max.session.timeout.ms" => {
                self.group.group_max_session_timeout_ms = parse(key, v)?
            }
            "group.initial.rebalance.delay.ms" => {
                self.group.group_initial_rebalance_delay_ms = parse(key, v)?
            }
            "group.max.size" => self.group.group_max_size = parse(key, v)?,
            "group.consumer.session.timeout.ms" => {
                self.group.consumer_session_timeout_ms = parse(key, v)?
            }
            "group.consumer.heartbeat.interval.ms" => {
                self.group.consumer_heartbeat_interval_ms = parse(key, v)?
            }
            "group.consumer.max.size" => self.group.consumer_group_max_size = parse(key, v)?,
            "offsets.retention.minutes" => {
                self.group.offsets_retention_ms = parse::<i64>(key, v)?.saturating_mul(60_000)
            }
            "offset.metadata.max.bytes" => self.group.offset_metadata_bytes_max = parse(key, v)?,
            "producer.id.expiration.ms" => self.producer_id_expiration_ms = parse(key, v)?,
            "transaction.max.timeout.ms" => self.txn.transaction_max_timeout_ms = parse(key, v)?,
            "transactional.id.expiration.ms" => {
                self.txn.transactional_id_expiration_ms = parse(key, v)?
            }
            "transaction.abort.timed.out.transaction.cleanup.interval.ms" => {
                self.transaction_abort_cleanup_interval_ms = parse(key, v)?
            }
            "transaction.remove.expired.transaction.cleanup.interval.ms" => {
                self.transaction_remove_expired_cleanup_interval_ms = parse(key, v)?
            }
            "transaction.state.log.segment.bytes" => {
                self.transaction_state_log_segment_bytes = parse(key, v)?
            }
            "metrics.listen" => {
                self.metrics_listen = Some(strip_listener_scheme(v)).filter(|a| !a.is_empty())
            }
            _ => return Ok(false),
        }
        self.explicit.insert(key.to_string(), v.to_string());
        Ok(true)
    }

    /// Applies a `server.properties` file's text. Returns the keys it did not know.
    pub fn apply_properties(&mut self, text: &str) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        for line in logical_lines(text) {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let Some((key, value)) = line.split_once(['=', ':']) else {
                unknown.push(line.to_string());
                continue;
            };
            if !self.set(key.trim(), value)? {
                unknown.push(key.trim().to_string());
            }
        }
        Ok(unknown)
    }

    /// Checks values that have a valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: String, reason: &str| ConfigError {
            key: key.into(),
            value,
            reason: reason.into(),
        };
        let specs = self.listener_specs();
        for spec in &specs {
            let protocol =
                config_security::protocol_of(&spec.name, &self.listener_security_protocol_map)?;
            config_security::check_listener(&spec.name, protocol, &self.security)?;
        }
        listeners::check_advertised(&specs, &self.advertised_listeners)?;
        let d = &self.topic_defaults;
        if !(1..=limits::PARTITIONS_PER_TOPIC_MAX).contains(&d.partitions) {
            return Err(bad(
                "num.partitions",
                d.partitions.to_string(),
                "must be between 1 and 10000",
            ));
        }
        if d.segment_bytes < crate::topic_config::SEGMENT_BYTES_MIN {
            return Err(bad(
                "log.segment.bytes",
                d.segment_bytes.to_string(),
                "too small",
            ));
        }
        if d.max_message_bytes < 0 || d.max_message_bytes > i64::from(i32::MAX) {
            return Err(bad(
                "message.max.bytes",
                d.max_message_bytes.to_string(),
                "out of range",
            ));
        }
        if self.max_connections == 0 {
            return Err(bad("max.connections", "0".into(), "must be positive"));
        }
        let cleaner = &self.log_cleaner;
        if !(1..=limits::LOG_CLEANER_THREADS_MAX).contains(&cleaner.threads) {
            return Err(bad(
                "log.cleaner.threads",
                cleaner.threads.to_string(),
                "must be between 1 and 16",
            ));
        }
        let per_thread = cleaner.dedupe_buffer_bytes / cleaner.threads as u64;
        if per_thread < limits::LOG_CLEANER_DEDUPE_BYTES_PER_THREAD_MIN {
            return Err(bad(
                "log.cleaner.dedupe.buffer.size",
                cleaner.dedupe_buffer_bytes.to_string(),
                "must be at least 1 MiB per cleaner thread",
            ));
        }
        if self.max_request_bytes < 1024 {
            return Err(bad(
                "socket.request.max.bytes",
                self.max_request_bytes.to_string(),
                "too small",
            ));
        }
        if self.queued_max_request_bytes < self.max_request_bytes {
            return Err(bad(
                "queued.max.request.bytes",
                self.queued_max_request_bytes.to_string(),
                "must be at least socket.request.max.bytes",
            ));
        }
        if self.max_connections_per_ip == 0 {
            return Err(bad(
                "max.connections.per.ip",
                "0".into(),
                "must be positive",
            ));
        }
        if self.connections_max_idle_ms == 0 {
            return Err(bad(
                "connections.max.idle.ms",
                "0".into(),
                "must be positive",
            ));
        }
        if self.fetch_max_bytes < limits::FETCH_MAX_BYTES_MIN
            || self.fetch_max_bytes > i32::MAX as usize
        {
            return Err(bad(
                "fetch.max.bytes",
                self.fetch_max_bytes.to_string(),
                "must be between 1024 and 2147483647",
            ));
        }
        let g = &self.group;
        if g.group_min_session_timeout_ms < 0
            || g.group_min_session_timeout_ms > g.group_max_session_timeout_ms
        {
            return Err(bad(
                "group.min.session.timeout.ms",
                g.group_min_session_timeout_ms.to_string(),
                "must be between 0 and group.max.session.timeout.ms",
            ));
        }
        if g.group_initial_rebalance_delay_ms < 0 {
            return Err(bad(
                "group.initial.rebalance.delay.ms",
                g.group_initial_rebalance_delay_ms.to_string(),
                "must not be negative",
            ));
        }
        if g.group_max_size == 0 {
            return Err(bad("group.max.size", "0".into(), "must be positive"));
        }
        if g.consumer_group_max_size == 0 {
            return Err(bad(
                "group.consumer.max.size",
                "0".into(),
                "must be positive",
            ));
        }
        self.validate_txn()?;
        if g.consumer_heartbeat_interval_ms <= 0
            || g.consumer_heartbeat_interval_ms >= g.consumer_session_timeout_ms
        {
            return Err(bad(
                "group.consumer.heartbeat.interval.ms",
                g.consumer_heartbeat_interval_ms.to_string(),
                "must be positive and below group.consumer.session.timeout.ms",
            ));
        }
        Ok(())
    }

    /// Every listener to bind, first one first.
    /// Checks the transaction settings' ranges (Kafka's: each at least 1, and segments at
    /// least `log.segment.bytes`' minimum).
    fn validate_txn(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: String, reason: &str| ConfigError {
            key: key.into(),
            value,
            reason: reason.into(),
        };
        let t = &self.txn;
        if t.transaction_max_timeout_ms < 1 {
            let v = t.transaction_max_timeout_ms.to_string();
            return Err(bad("transaction.max.timeout.ms", v, "must be positive"));
        }
        if t.transactional_id_expiration_ms < 1 {
            let v = t.transactional_id_expiration_ms.to_string();
            return Err(bad("transactional.id.expiration.ms", v, "must be positive"));
        }
        for (key, ms) in [
            (
                "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                self.transaction_abort_cleanup_interval_ms,
            ),
            (
                "transaction.remove.expired.transaction.cleanup.interval.ms",
                self.transaction_remove_expired_cleanup_interval_ms,
            ),
        ] {
            if ms == 0 {
                return Err(bad(key, "0".into(), "must be positive"));
            }
        }
        let segment = self.transaction_state_log_segment_bytes;
        if segment < crate::topic_config::SEGMENT_BYTES_MIN as u64 || segment > i32::MAX as u64 {
            return Err(bad(
                "transaction.state.log.segment.bytes",
                segment.to_string(),
                "out of range",
            ));
        }
        Ok(())
    }

    pub fn listener_specs(&self) -> Vec<ListenerSpec> {
        match self.listeners.is_empty() {
            true => vec![ListenerSpec {
                name: "PLAINTEXT".into(),
                addr: self.listen.clone(),
            }],
            false => self.listeners.clone(),
        }
    }

    /// The security protocol of a listener named in `listeners` (checked by `validate`).
    pub fn listener_protocol(&self, name: &str) -> Result<SecurityProtocol, ConfigError> {
        config_security::protocol_of(name, &self.listener_security_protocol_map)
    }

    /// The connection limit for one client address (`max.connections.per.ip` unless
    /// `max.connections.per.ip.overrides` names the address).
    pub fn connections_per_ip_max(&self, ip: IpAddr) -> usize {
        self.max_connections_per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.max_connections_per_ip)
    }

    /// The group coordinator's settings.
    pub fn group_config(&self) -> GroupConfig {
        self.group.clone()
    }
}

/// A properties file's logical lines: a line ending in an odd number of backslashes continues
/// on the next one, whose leading whitespace is dropped (Java's `Properties` rule; Kafka's JAAS
/// and inline PEM values are usually written this way). Comment lines never continue.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for raw in text.lines() {
        let line = match &current {
            Some(_) => raw.trim_start(),
            None => raw,
        };
        let comment =
            current.is_none() && matches!(line.trim_start().chars().next(), Some('#' | '!'));
        let backslashes = line.chars().rev().take_while(|c| *c == '\\').count();
        if !comment && backslashes % 2 == 1 {
            current
                .get_or_insert_with(String::new)
                .push_str(&line[..line.len() - 1]);
            continue;
        }
        let mut whole = current.take().unwrap_or_default();
        whole.push_str(line);
        out.push(whole);
    }
    out.extend(current);
    out
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
fn parse_ip_overrides(key: &str, v: &str) -> Result<BTreeMap<IpAddr, usize>, ConfigError> {
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

fn parse_storage(key: &str, v: &str) -> Result<Storage, ConfigError> {
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

fn parse_fsync(key: &str, v: &str) -> Result<FsyncPolicy, ConfigError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a server.properties file maps onto the config, and unknown keys are reported.
    #[test]
    fn applies_properties() {
        let mut c = BrokerConfig::default();
        let unknown = c
            .apply_properties("# comment\nlisteners=PLAINTEXT://0.0.0.0:19092\nnum.partitions=3\nlog.retention.hours=2\nfoo.bar=1\n")
            .unwrap();
        assert_eq!(c.listen, "0.0.0.0:19092");
        assert_eq!(c.topic_defaults.partitions, 3);
        assert_eq!(c.topic_defaults.retention_ms, 7_200_000);
        assert_eq!(unknown, vec!["foo.bar".to_string()]);
        assert!(c.explicit.contains_key("num.partitions"));
        assert!(c.apply_properties("num.partitions=x").is_err());
    }

    // Goal: backslash continuation joins lines as Java's Properties does (JAAS values).
    #[test]
    fn continued_lines() {
        let text = "a=1 \\\n   2\n# c \\\nb=x\\\\\nc=3 \\";
        assert_eq!(
            logical_lines(text),
            vec!["a=1 2", "# c \\", "b=x\\\\", "c=3 "]
        );
    }

    // Goal: the network limits parse under Kafka's names, overrides by address.
    #[test]
    fn network_limits() {
        let mut c = BrokerConfig::default();
        c.apply_properties("max.connections.per.ip=5\nmax.connections.per.ip.overrides=127.0.0.2:1, [::1]:7\nconnections.max.idle.ms=1000\nfetch.max.bytes=2048\n")
            .unwrap();
        assert_eq!(c.connections_per_ip_max("127.0.0.1".parse().unwrap()), 5);
        assert_eq!(c.connections_per_ip_max("127.0.0.2".parse().unwrap()), 1);
        assert_eq!(c.connections_per_ip_max("::1".parse().unwrap()), 7);
        assert_eq!(c.connections_max_idle_ms, 1000);
        assert_eq!(c.fetch_max_bytes, 2048);
        c.validate().unwrap();
        assert!(c
            .set("max.connections.per.ip.overrides", "localhost:3")
            .is_err());
        c.fetch_max_bytes = 10;
        assert!(c.validate().is_err());
    }

    #[test]
    fn transaction_settings() {
        let mut c = BrokerConfig::default();
        let unknown = c
            .apply_properties(
                "transaction.max.timeout.ms=5000\ntransactional.id.expiration.ms=60000\n\
                 transaction.abort.timed.out.transaction.cleanup.interval.ms=100\n\
                 transaction.remove.expired.transaction.cleanup.interval.ms=200\n\
                 transaction.state.log.segment.bytes=1048576\n",
            )
            .unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(c.txn.transaction_max_timeout_ms, 5000);
        assert_eq!(c.txn.transactional_id_expiration_ms, 60_000);
        assert_eq!(c.transaction_abort_cleanup_interval_ms, 100);
        assert_eq!(c.transaction_remove_expired_cleanup_interval_ms, 200);
        assert_eq!(c.transaction_state_log_segment_bytes, 1 << 20);
        c.validate().unwrap();
        for bad in [
            "transaction.max.timeout.ms=0",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=0",
            "transaction.state.log.segment.bytes=100",
        ] {
            let mut c = BrokerConfig::default();
            c.apply_properties(bad).unwrap();
            assert!(c.validate().is_err(), "{bad}");
        }
    }
}
