//! DescribeConfigs (key 32), v1-4: every topic config with its effective value and source
//! (TOPIC_CONFIG for overrides, STATIC_BROKER_CONFIG when a broker setting supplies the
//! default, DEFAULT_CONFIG otherwise), synonyms on request, types (v3+) and documentation.
//! Broker resources list the broker's settings, all read-only (there is no dynamic broker
//! config). The internal topics (`__consumer_offsets`, `__transaction_state`) are described
//! too, with the settings their logs really use as overrides ([`internal_overrides`]): Metadata
//! lists them, so `kafka-configs.sh --describe --entity-type topics` describes every topic
//! Metadata named and would fail on an unknown one.
//!
//! With an authorizer, a topic needs DESCRIBE_CONFIGS on it (TOPIC_AUTHORIZATION_FAILED) and a
//! broker DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED), checked before the
//! resource is looked up, as Kafka does ([`config_refusal`], shared with the alter APIs).

use bytes::Bytes;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::{str_bytes, Ctx, Reply};
use crate::topic_config::{self, source, ConfigType};
use crate::{acl, error_code, Broker};

pub(crate) const RESOURCE_TOPIC: i8 = 2;
pub(crate) const RESOURCE_BROKER: i8 = 4;
/// Kafka's BROKER_LOGGER config resource (authorized as the cluster, then refused).
pub(crate) const RESOURCE_BROKER_LOGGER: i8 = 8;

/// The authorization refusal of `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on a config
/// resource, if refused: topics are checked on the topic, broker resources on the cluster.
/// Other resource types are left to the caller's own refusal.
pub(crate) fn config_refusal(
    ctx: &Ctx,
    operation: i8,
    resource_type: i8,
    name: &str,
) -> Option<(i16, String)> {
    match resource_type {
        RESOURCE_TOPIC if !ctx.allowed(operation, acl::resource::TOPIC, name) => Some((
            error_code::TOPIC_AUTHORIZATION_FAILED,
            format!("Not authorized to access the configs of topic '{name}'."),
        )),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER if !ctx.allowed_cluster(operation) => Some((
            error_code::CLUSTER_AUTHORIZATION_FAILED,
            "Not authorized to access the broker's configs.".to_string(),
        )),
        _ => None,
    }
}

struct Entry {
    name: String,
    value: String,
    source: i8,
    kind: ConfigType,
    read_only: bool,
    doc: &'static str,
    synonyms: Vec<(String, String, i8)>,
}

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeConfigsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let b = &ctx.broker;
    let mut resp = DescribeConfigsResponse::default();
    for res in req.resources {
        let mut r = DescribeConfigsResult::default();
        r.resource_type = res.resource_type;
        r.resource_name = res.resource_name.clone();
        let refused = config_refusal(
            &ctx,
            acl::op::DESCRIBE_CONFIGS,
            res.resource_type,
            &res.resource_name,
        );
        let entries = match res.resource_type {
            _ if refused.is_some() => Err(refused.expect("checked")),
            RESOURCE_TOPIC => match b.topics.get(&res.resource_name) {
                Some(t) => Ok(topic_entries(b, &t.configs)),
                None if crate::topics::is_internal(&res.resource_name) => {
                    Ok(topic_entries(b, &internal_overrides(b, &res.resource_name)))
                }
                None => Err((
                    error_code::UNKNOWN_TOPIC_OR_PARTITION,
                    format!("Topic '{}' does not exist.", &*res.resource_name),
                )),
            },
            RESOURCE_BROKER
                if res.resource_name.is_empty()
                    || *res.resource_name == *b.node_id().to_string() =>
            {
                Ok(broker_entries(b))
            }
            RESOURCE_BROKER => Err((
                error_code::INVALID_REQUEST,
                format!("Unexpected broker id {}", &*res.resource_name),
            )),
            other => Err((
                error_code::INVALID_REQUEST,
                format!("Unsupported resource type {other}"),
            )),
        };
        match entries {
            Ok(entries) => {
                let keys = res.configuration_keys.as_ref();
                r.configs = entries
                    .into_iter()
                    .filter(|e| {
                        keys.is_none_or(|k| k.is_empty() || k.iter().any(|k| **k == *e.name))
                    })
                    .map(|e| encode(e, req.include_synonyms, req.include_documentation))
                    .collect();
            }
            Err((code, msg)) => {
                r.error_code = code;
                r.error_message = Some(str_bytes(msg));
            }
        }
        resp.results.push(r);
    }
    ctx.respond(&resp)
}

fn encode(e: Entry, synonyms: bool, docs: bool) -> DescribeConfigsResourceResult {
    let mut c = DescribeConfigsResourceResult::default();
    c.name = str_bytes(e.name);
    c.value = Some(str_bytes(e.value));
    c.read_only = e.read_only;
    c.config_source = e.source;
    c.config_type = e.kind as i8;
    if docs {
        c.documentation = Some(str_bytes(e.doc));
    }
    if synonyms {
        c.synonyms = e
            .synonyms
            .into_iter()
            .map(|(name, value, source)| {
                let mut s = DescribeConfigsSynonym::default();
                s.name = str_bytes(name);
                s.value = Some(str_bytes(value));
                s.source = source;
                s
            })
            .collect();
    }
    c
}

/// What an internal topic's log is, as topic overrides: Kafka's own overrides for these
/// topics (`cleanup.policy=compact`: only each key's latest record matters; Sluice keeps them
/// small by snapshots instead of the cleaner, with the same effect) and the segment size the
/// coordinator's log is opened with.
fn internal_overrides(b: &Broker, name: &str) -> std::collections::BTreeMap<String, String> {
    debug_assert!(crate::topics::is_internal(name));
    let segment_bytes = match name {
        crate::groups::OFFSETS_TOPIC => crate::limits::OFFSETS_SEGMENT_BYTES,
        _ => b.config.transaction_state_log_segment_bytes,
    };
    [
        ("cleanup.policy", "compact".to_string()),
        ("segment.bytes", segment_bytes.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

fn topic_entries(b: &Broker, overrides: &std::collections::BTreeMap<String, String>) -> Vec<Entry> {
    topic_config::effective(overrides, &b.config)
        .into_iter()
        .map(|(name, value, src)| {
            let def = topic_config::lookup(name);
            let mut synonyms = Vec::new();
            if src == source::TOPIC_CONFIG {
                synonyms.push((name.to_string(), value.clone(), source::TOPIC_CONFIG));
            }
            if let Some(broker_name) = def.and_then(|d| d.broker_synonym) {
                let (v, s) = topic_config::default_value(name, &b.config);
                synonyms.push((broker_name.to_string(), v, s));
            }
            Entry {
                name: name.to_string(),
                value,
                source: src,
                kind: def.map_or(ConfigType::Str, |d| d.kind),
                read_only: false,
                doc: def.map_or("", |d| d.doc),
                synonyms,
            }
        })
        .collect()
}

fn broker_entries(b: &Broker) -> Vec<Entry> {
    let c = &b.config;
    let d = &c.topic_defaults;
    let listener = c
        .listener_specs()
        .iter()
        .map(|l| format!("{}://{}", l.name, l.addr))
        .collect::<Vec<_>>()
        .join(",");
    let advertised = b
        .listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port))
        .collect::<Vec<_>>()
        .join(",");
    let fsync = match c.fsync {
        sluice_log::FsyncPolicy::Always => "always",
        sluice_log::FsyncPolicy::Never => "never",
    };
    let storage = match c.storage {
        sluice_log::Storage::Disk => "disk",
        sluice_log::Storage::Null => "null",
    };
    let rows: Vec<(&str, String, ConfigType, &'static str)> = vec![
        (
            "node.id",
            c.node_id.to_string(),
            ConfigType::Int,
            "This broker's id.",
        ),
        (
            "broker.id",
            c.node_id.to_string(),
            ConfigType::Int,
            "Same as node.id.",
        ),
        (
            "listeners",
            listener,
            ConfigType::List,
            "Address the broker binds.",
        ),
        (
            "advertised.listeners",
            advertised,
            ConfigType::List,
            "Address given to clients.",
        ),
        (
            "log.dirs",
            c.data_dir.display().to_string(),
            ConfigType::List,
            "The data directory.",
        ),
        (
            "num.partitions",
            d.partitions.to_string(),
            ConfigType::Int,
            "Default partitions for new topics.",
        ),
        (
            "auto.create.topics.enable",
            c.auto_create_topics.to_string(),
            ConfigType::Boolean,
            "Create unknown topics on Metadata.",
        ),
        (
            "default.replication.factor",
            "1".into(),
            ConfigType::Int,
            "Always 1 on a single node.",
        ),
        (
            "log.retention.ms",
            d.retention_ms.to_string(),
            ConfigType::Long,
            "Default retention.ms.",
        ),
        (
            "log.retention.bytes",
            d.retention_bytes.to_string(),
            ConfigType::Long,
            "Default retention.bytes.",
        ),
        (
            "log.segment.bytes",
            d.segment_bytes.to_string(),
            ConfigType::Int,
            "Default segment.bytes.",
        ),
        (
            "log.roll.ms",
            d.segment_ms.to_string(),
            ConfigType::Long,
            "Default segment.ms.",
        ),
        (
            "message.max.bytes",
            d.max_message_bytes.to_string(),
            ConfigType::Int,
            "Default max.message.bytes.",
        ),
        (
            "log.retention.check.interval.ms",
            c.retention_check_interval_ms.to_string(),
            ConfigType::Long,
            "How often retention runs.",
        ),
        (
            "max.connections",
            c.max_connections.to_string(),
            ConfigType::Int,
            "Concurrent connection limit.",
        ),
        (
            "socket.request.max.bytes",
            c.max_request_bytes.to_string(),
            ConfigType::Int,
            "Largest request accepted.",
        ),
        (
            "transaction.max.timeout.ms",
            c.txn.transaction_max_timeout_ms.to_string(),
            ConfigType::Int,
            "The longest transaction.timeout.ms a producer may ask.",
        ),
        (
            "transactional.id.expiration.ms",
            c.txn.transactional_id_expiration_ms.to_string(),
            ConfigType::Int,
            "A transactional id idle this long is removed.",
        ),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            c.transaction_abort_cleanup_interval_ms.to_string(),
            ConfigType::Int,
            "How often timed-out transactions are aborted.",
        ),
        (
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            c.transaction_remove_expired_cleanup_interval_ms.to_string(),
            ConfigType::Int,
            "How often idle transactional ids are removed.",
        ),
        (
            "transaction.state.log.segment.bytes",
            c.transaction_state_log_segment_bytes.to_string(),
            ConfigType::Int,
            "Segment size of __transaction_state.",
        ),
        (
            "transaction.state.log.num.partitions",
            "1".into(),
            ConfigType::Int,
            "Always 1: one coordinator partition on a single node.",
        ),
        (
            "transaction.state.log.replication.factor",
            "1".into(),
            ConfigType::Int,
            "Always 1 on a single node.",
        ),
        (
            "sluice.fsync",
            fsync.into(),
            ConfigType::Str,
            "always: acknowledge after fdatasync; never: page-cache durability.",
        ),
        (
            "sluice.journal.direct.io",
            c.journal_direct_io.to_string(),
            ConfigType::Boolean,
            "Write journal rounds with O_DIRECT from aligned memory kept as the in-memory tail (same fdatasync).",
        ),
        (
            "sluice.storage",
            storage.into(),
            ConfigType::Str,
            "disk; null: acknowledge produce and keep nothing (bench calibration only).",
        ),
    ];
    rows.into_iter()
        .map(|(name, value, kind, doc)| {
            let src = if c.explicit.contains_key(name) {
                source::STATIC_BROKER_CONFIG
            } else {
                source::DEFAULT_CONFIG
            };
            Entry {
                name: name.to_string(),
                value,
                source: src,
                kind,
                read_only: true,
                doc,
                synonyms: vec![],
            }
        })
        .collect()
}
