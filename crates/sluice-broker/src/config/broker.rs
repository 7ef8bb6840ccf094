//! [`BrokerConfig`]: the broker's settings as the rest of the crate reads them, one field
//! per setting (or group of settings), and the questions answered from them alone (the
//! listeners to bind, a listener's protocol, per-address connection limits). Its default
//! comes from the config table (`impl Default` in `table.rs`); loading and validation are
//! in `config/mod.rs`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use sluice_coordinator::{GroupConfig, TxnConfig};
use sluice_log::{FsyncPolicy, Storage, TimestampType};

use crate::config::listeners::ListenerSpec;
use crate::config::security::{self, SecurityProtocol, SecuritySettings};
use crate::config::values::ConfigError;

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
    /// Table settings that were set explicitly (Kafka names), for DescribeConfigs sources and
    /// the values of settings that own no field. Sensitive ones are kept with an empty value.
    pub explicit: BTreeMap<String, String>,
    pub fsync: FsyncPolicy,
    /// `sluice.journal.direct.io`: journal rounds written with `O_DIRECT` (see
    /// `sluice_log::LogManagerConfig::journal_direct_io`). Default true.
    pub journal_direct_io: bool,
    /// `sluice.internal.segment.bytes.enable`: whether topics may set Kafka's test-only
    /// `internal.segment.bytes` (segments below `segment.bytes`' 1 MiB floor).
    pub internal_segment_bytes_enable: bool,
    /// `sluice.segment.files.per.topic.percent`: the share of the segment-file budget one
    /// topic may hold (`LogManagerConfig::segment_files_per_topic_max`).
    pub segment_files_per_topic_percent: u64,
    /// `storage.backend` and the object backend's stores (docs/object-storage.md).
    pub object_backend: crate::config::object_backend::ObjectBackendConfig,
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
    /// `sluice.producer.eviction.idle.ms`: how long a producer must have been idle before
    /// a new producer id may take its slot in a full partition (docs/storage.md §12).
    pub producer_eviction_idle_ms: u64,
    /// `sluice.producer.ids.per.ip.max`: producer ids InitProducerId hands out to one
    /// client address per `producer_ids_per_ip_window_ms` (`producer_ids::AddressBuckets`).
    pub producer_ids_per_ip_max: u64,
    /// `sluice.producer.ids.per.ip.window.ms`.
    pub producer_ids_per_ip_window_ms: u64,
    /// `listener.security.protocol.map`: listener name to security protocol.
    pub listener_security_protocol_map: BTreeMap<String, SecurityProtocol>,
    /// `controller.listener.names`: listeners of `listeners` that are not opened (see
    /// [`BrokerConfig::served_listener_specs`]).
    pub controller_listener_names: Vec<String>,
    /// The `ssl.*`, `sasl.*` and `listener.name.*` settings (see `config::security`).
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
    /// `sluice.journal.file.bytes`: size at which the journal moves to a new file.
    pub journal_file_bytes: u64,
    /// `sluice.journal.cleaner.*`: the journal cleaner (docs/storage.md §7a).
    pub journal_cleaner: sluice_log::JournalCleanerConfig,
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
    pub authorizer: security::AuthorizerConfig,
    /// `delegation.token.*` (see `delegation_tokens`; Debug hides the key).
    pub delegation_token: security::TokenConfig,
}

impl BrokerConfig {
    /// Every listener to bind, first one first.
    pub fn listener_specs(&self) -> Vec<ListenerSpec> {
        match self.listeners.is_empty() {
            true => vec![ListenerSpec {
                name: "PLAINTEXT".into(),
                addr: self.listen.clone(),
            }],
            false => self.listeners.clone(),
        }
    }

    /// The listeners this broker opens: [`BrokerConfig::listener_specs`] without those named
    /// in `controller.listener.names`. A stock KRaft `server.properties` lists a CONTROLLER
    /// listener beside the client one; Kafka's broker serves no client there, and a single
    /// node has no controller quorum to serve on it, so it is not bound at all.
    pub fn served_listener_specs(&self) -> Vec<ListenerSpec> {
        let mut specs = self.listener_specs();
        specs.retain(|s| !self.controller_listener_names.contains(&s.name));
        specs
    }

    /// The security protocol of a listener named in `listeners` (checked by `validate`).
    pub fn listener_protocol(&self, name: &str) -> Result<SecurityProtocol, ConfigError> {
        security::protocol_of(name, &self.listener_security_protocol_map)
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
