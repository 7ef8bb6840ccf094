//! DescribeConfigs (key 32), v1-4: every topic config with its effective value and source
//! (TOPIC_CONFIG for overrides, STATIC_BROKER_CONFIG when a broker setting supplies the
//! default, DEFAULT_CONFIG otherwise), synonyms on request, types (v3+) and documentation.
//! Broker resources list every row of the broker config table (`config::table`) plus the
//! per-listener security settings given, each with its value and source (STATIC_BROKER_CONFIG
//! when set by the file, the environment or a flag, DEFAULT_CONFIG otherwise), all read-only
//! (there is no dynamic broker config); sensitive ones (passwords, keys, JAAS) have a null
//! value and is_sensitive. The internal topics (`__consumer_offsets`, `__transaction_state`)
//! are described too, with the settings their logs really use as overrides
//! ([`internal_overrides`]): Metadata lists them, so `kafka-configs.sh --describe
//! --entity-type topics` describes every topic Metadata named and would fail on an unknown one.
//!
//! With an authorizer, a topic needs DESCRIBE_CONFIGS on it (TOPIC_AUTHORIZATION_FAILED) and a
//! broker DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED), checked before the
//! resource is looked up, as Kafka does ([`config_refusal`], shared with the alter APIs).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use super::{str_bytes, Ctx, Reply};
use crate::config::table::{self, BrokerConfigDef, BROKER_CONFIGS};
use crate::config::topic::{self, source, ConfigType};
use crate::config::BrokerConfig;
use crate::{config::security, services::acl, Broker};

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
            ResponseError::TopicAuthorizationFailed.code(),
            format!("Not authorized to access the configs of topic '{name}'."),
        )),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER if !ctx.allowed_cluster(operation) => Some((
            ResponseError::ClusterAuthorizationFailed.code(),
            "Not authorized to access the broker's configs.".to_string(),
        )),
        _ => None,
    }
}

struct Entry {
    name: String,
    /// None: null (no value, or a sensitive one).
    value: Option<String>,
    source: i8,
    kind: ConfigType,
    read_only: bool,
    sensitive: bool,
    doc: &'static str,
    synonyms: Vec<(String, Option<String>, i8)>,
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
                None if crate::services::topics::is_internal(&res.resource_name) => {
                    Ok(topic_entries(b, &internal_overrides(b, &res.resource_name)))
                }
                None => Err((
                    ResponseError::UnknownTopicOrPartition.code(),
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
                ResponseError::InvalidRequest.code(),
                format!("Unexpected broker id {}", &*res.resource_name),
            )),
            other => Err((
                ResponseError::InvalidRequest.code(),
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
    c.value = e.value.map(str_bytes);
    c.read_only = e.read_only;
    c.is_sensitive = e.sensitive;
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
                s.value = value.map(str_bytes);
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
    debug_assert!(crate::services::topics::is_internal(name));
    let segment_bytes = match name {
        crate::services::groups::OFFSETS_TOPIC => crate::config::limits::OFFSETS_SEGMENT_BYTES,
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
    topic::effective(overrides, &b.config)
        .into_iter()
        .map(|(name, value, src)| {
            let def = topic::lookup(name);
            let mut synonyms = Vec::new();
            if src == source::TOPIC_CONFIG {
                synonyms.push((name.to_string(), Some(value.clone()), source::TOPIC_CONFIG));
            }
            if let Some(broker_name) = def.and_then(|d| d.broker_synonym) {
                let (v, s) = topic::default_value(name, &b.config);
                synonyms.push((broker_name.to_string(), Some(v), s));
            }
            Entry {
                name: name.to_string(),
                value: Some(value),
                source: src,
                kind: def.map_or(ConfigType::Str, |d| d.kind),
                read_only: false,
                sensitive: false,
                doc: def.map_or("", |d| d.doc),
                synonyms,
            }
        })
        .collect()
}

/// A value as DescribeConfigs shows it: null when sensitive or empty.
fn shown(d: &BrokerConfigDef, value: String) -> Option<String> {
    match d.sensitive || value.is_empty() {
        true => None,
        false => Some(value),
    }
}

/// Every row of the broker config table, then the per-listener security settings given.
fn broker_entries(b: &Broker) -> Vec<Entry> {
    let c = &b.config;
    // What clients are told is the bound listeners' advertised addresses (port 0 resolved).
    let advertised = b
        .listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port))
        .collect::<Vec<_>>()
        .join(",");
    let mut entries: Vec<Entry> = BROKER_CONFIGS
        .iter()
        .map(|d| {
            let value = match d.name {
                "advertised.listeners" => advertised.clone(),
                _ => d.current(c),
            };
            let source = match c.explicit.contains_key(d.name) {
                true => source::STATIC_BROKER_CONFIG,
                false => source::DEFAULT_CONFIG,
            };
            Entry {
                name: d.name.to_string(),
                value: shown(d, value),
                source,
                kind: d.kind,
                read_only: true,
                sensitive: d.sensitive,
                doc: d.doc,
                synonyms: broker_synonyms(c, d),
            }
        })
        .collect();
    entries.extend(listener_security_entries(c));
    entries
}

/// Kafka's synonyms of a broker setting: the names that were set (the setting first, then its
/// synonyms in precedence order), then their defaults.
fn broker_synonyms(c: &BrokerConfig, d: &BrokerConfigDef) -> Vec<(String, Option<String>, i8)> {
    let names = || {
        std::iter::once(d.name)
            .chain(d.synonyms.iter().copied())
            .filter_map(table::lookup)
    };
    let set = names()
        .filter(|s| c.explicit.contains_key(s.name))
        .map(|s| {
            (
                s.name.to_string(),
                shown(s, s.current(c)),
                source::STATIC_BROKER_CONFIG,
            )
        });
    let defaults = names().filter(|s| !s.default.is_empty()).map(|s| {
        let value = shown(s, s.default.to_string());
        (s.name.to_string(), value, source::DEFAULT_CONFIG)
    });
    set.chain(defaults).collect()
}

/// The per-listener and per-mechanism security settings given (`listener.name.<l>.<key>`),
/// secrets null.
fn listener_security_entries(c: &BrokerConfig) -> Vec<Entry> {
    c.security
        .iter()
        .filter(|(key, _)| table::lookup(key).is_none())
        .map(|(key, value)| {
            let base = table::lookup(security::base_key(key));
            let sensitive = security::secret(key) || base.is_some_and(|d| d.sensitive);
            Entry {
                name: key.clone(),
                value: (!sensitive && !value.is_empty()).then(|| value.clone()),
                source: source::STATIC_BROKER_CONFIG,
                kind: match sensitive {
                    true => ConfigType::Password,
                    false => base.map_or(ConfigType::Str, |d| d.kind),
                },
                read_only: true,
                sensitive,
                doc: base.map_or("Per-listener security setting.", |d| d.doc),
                synonyms: vec![],
            }
        })
        .collect()
}
