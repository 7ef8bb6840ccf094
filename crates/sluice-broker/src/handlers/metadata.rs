//! Metadata (key 3), v0-13: the one broker, and topics with their partitions. Unknown topics
//! are created here when both the broker (`auto.create.topics.enable`) and the request
//! (`allow_auto_topic_creation`, v4+) allow it, as Kafka does; creation is synchronous, so the
//! response already describes the new topic.
//!
//! The internal topics `__consumer_offsets` and `__transaction_state` (the group and
//! transaction coordinators' one partition each, which the topic registry does not hold) are
//! described too, with `is_internal = true`, in the all-topics answer and by name or id, as
//! Kafka lists its internal topics: regex consumers and admin tools expect them. They are
//! never auto-created here and are read-only to clients (see
//! `topics::internal_topic_refusal`).
//!
//! Authorization as Kafka's: the all-topics answer lists only topics the principal may
//! DESCRIBE; a named topic it may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED (whether or not
//! it exists, so names do not leak); auto-creation also needs CREATE on the cluster or the
//! topic, else TOPIC_AUTHORIZATION_FAILED. Authorized operations (v8+) are filled in when
//! asked for: the cluster's (v8-10; 0 without DESCRIBE on it) and each described topic's.

use kafka_protocol::error::ResponseError;
use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use uuid::Uuid;

use super::{str_bytes, Ctx, Reply};
use crate::services::groups::{OFFSETS_TOPIC, OFFSETS_TOPIC_ID, OFFSETS_TOPIC_PARTITIONS};
use crate::services::topics::{validate_name, Topic};
use crate::services::txns::{TXN_STATE_TOPIC, TXN_STATE_TOPIC_ID};
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: MetadataRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let b = &ctx.broker;
    let (cluster_ops, topic_ops) = (
        req.include_cluster_authorized_operations,
        req.include_topic_authorized_operations,
    );
    // v0: an empty list means all topics; v1+: null means all, empty means none.
    let wanted = match req.topics {
        None => None,
        Some(t) if t.is_empty() && ctx.version == 0 => None,
        Some(t) => Some(t),
    };
    let allow_create =
        b.config.auto_create_topics && (ctx.version < 4 || req.allow_auto_topic_creation);
    let mut topics = Vec::new();
    match wanted {
        None => {
            let visible = |name: &str| ctx.allowed(acl::op::DESCRIBE, acl::resource::TOPIC, name);
            topics.extend(
                b.topics
                    .all()
                    .iter()
                    .filter(|t| visible(&t.name))
                    .map(|t| describe(&ctx, t)),
            );
            for internal in [OFFSETS_TOPIC, TXN_STATE_TOPIC] {
                if visible(internal) {
                    topics.push(describe_internal(&ctx, internal));
                }
            }
        }
        Some(list) => {
            for t in list {
                // A topic id (v12+) wins over the name, which clients then leave empty
                // (the Java consumer asks for the topics of a regex assignment this way);
                // Kafka resolves such requests by id alone.
                let name = match t.topic_id.is_nil() {
                    true => t.name.map(|n| n.0.to_string()),
                    false => None,
                };
                topics.push(resolve(&ctx, name, t.topic_id, allow_create).await);
            }
        }
    }
    let mut resp = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(b.node_id());
    let (host, port) = ctx.advertised();
    broker.host = str_bytes(host);
    broker.port = port;
    resp.brokers = vec![broker];
    resp.cluster_id = Some(str_bytes(b.topics.cluster_id.clone()));
    resp.controller_id = BrokerId(b.node_id());
    resp.cluster_authorized_operations = match cluster_ops {
        false => i32::MIN,
        true if !ctx.allowed_cluster(acl::op::DESCRIBE) => 0,
        true => ctx.authorized_operations(
            acl::resource::CLUSTER,
            acl::CLUSTER_NAME,
            acl::supported::CLUSTER,
        ),
    };
    if topic_ops {
        for t in topics
            .iter_mut()
            .filter(|t| t.error_code == error_code::NONE)
        {
            if let Some(name) = &t.name {
                t.topic_authorized_operations =
                    ctx.authorized_operations(acl::resource::TOPIC, &name.0, acl::supported::TOPIC);
            }
        }
    }
    resp.topics = topics;
    ctx.respond(&resp)
}

async fn resolve(
    ctx: &Ctx,
    name: Option<String>,
    id: Uuid,
    allow_create: bool,
) -> MetadataResponseTopic {
    let b = &ctx.broker;
    let may_describe = |name: &str| ctx.allowed(acl::op::DESCRIBE, acl::resource::TOPIC, name);
    let Some(name) = name else {
        if let Some(internal) = internal_by_id(id).filter(|name| may_describe(name)) {
            return describe_internal(ctx, internal);
        }
        return match b.topics.get_by_id(id) {
            Some(t) if may_describe(&t.name) => describe(ctx, &t),
            Some(_) => error_topic(None, id, ResponseError::TopicAuthorizationFailed.code()),
            None => error_topic(None, id, ResponseError::UnknownTopicId.code()),
        };
    };
    if !may_describe(&name) {
        return error_topic(
            Some(name),
            Uuid::nil(),
            ResponseError::TopicAuthorizationFailed.code(),
        );
    }
    if let Some(t) = b.topics.get(&name) {
        return describe(ctx, &t);
    }
    if name == OFFSETS_TOPIC || name == TXN_STATE_TOPIC {
        return describe_internal(ctx, &name);
    }
    if let Err(e) = validate_name(&name) {
        return error_topic(Some(name), Uuid::nil(), e.code);
    }
    if !allow_create {
        return error_topic(
            Some(name),
            Uuid::nil(),
            ResponseError::UnknownTopicOrPartition.code(),
        );
    }
    if !ctx.allowed_cluster(acl::op::CREATE)
        && !ctx.allowed(acl::op::CREATE, acl::resource::TOPIC, &name)
    {
        return error_topic(
            Some(name),
            Uuid::nil(),
            ResponseError::TopicAuthorizationFailed.code(),
        );
    }
    let n = name.clone();
    let created = ctx
        .blocking(move |b| {
            let partitions = b.config.topic_defaults.partitions;
            match b
                .topics
                .create(&n, partitions, BTreeMap::new(), &b.log, &b.config)
            {
                // Lost a race with another creator: use theirs.
                Err(e) if e.code == ResponseError::TopicAlreadyExists.code() => {
                    b.topics.get(&n).ok_or(e)
                }
                other => other,
            }
        })
        .await;
    match created {
        Some(Ok(t)) => describe(ctx, &t),
        Some(Err(e)) => {
            tracing::warn!(topic = %name, error = %e.message, "auto-create failed");
            error_topic(Some(name), Uuid::nil(), e.code)
        }
        None => error_topic(
            Some(name),
            Uuid::nil(),
            ResponseError::KafkaStorageError.code(),
        ),
    }
}

fn error_topic(name: Option<String>, id: Uuid, code: i16) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.error_code = code;
    t.name = name.map(|n| TopicName(str_bytes(n)));
    t.topic_id = id;
    t.topic_authorized_operations = i32::MIN;
    t
}

fn describe(ctx: &Ctx, topic: &Arc<Topic>) -> MetadataResponseTopic {
    let partitions = topic.partitions.iter().map(|k| k.partition);
    describe_topic(ctx, topic.name.to_string(), topic.id, partitions, false)
}

/// A coordinator's internal topic (`name` is one of the two). Its partition count is the one
/// its service writes to (partition 0 only; the transaction service creates
/// `__transaction_state-0` at start, so it always exists).
fn describe_internal(ctx: &Ctx, name: &str) -> MetadataResponseTopic {
    let view = topic_view(ctx, name).expect("an internal topic");
    debug_assert!(view.is_internal);
    describe_topic(ctx, view.name, view.id, 0..view.partitions, true)
}

/// A topic as the describing APIs show it (Metadata, DescribeTopicPartitions): a topic of
/// the registry or one of the two internal topics, which it does not hold.
pub(super) struct TopicView {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    pub is_internal: bool,
}

/// The topic named `name`, if it exists.
pub(super) fn topic_view(ctx: &Ctx, name: &str) -> Option<TopicView> {
    if let Some(t) = ctx.broker.topics.get(name) {
        return Some(TopicView {
            name: t.name.to_string(),
            id: t.id,
            partitions: t.partitions.len() as i32,
            is_internal: false,
        });
    }
    let (id, partitions) = match name {
        OFFSETS_TOPIC => (OFFSETS_TOPIC_ID, OFFSETS_TOPIC_PARTITIONS),
        TXN_STATE_TOPIC => (TXN_STATE_TOPIC_ID, 1),
        _ => return None,
    };
    Some(TopicView {
        name: name.to_string(),
        id: Uuid::from_bytes(id.0),
        partitions,
        is_internal: true,
    })
}

/// The name of the topic whose id is `id` (an internal topic's too), if it exists: how the
/// topic-id versions of OffsetCommit and OffsetFetch (v10) find their topics.
pub(super) fn topic_name_by_id(ctx: &Ctx, id: Uuid) -> Option<String> {
    if let Some(internal) = internal_by_id(id) {
        return Some(internal.to_string());
    }
    ctx.broker.topics.get_by_id(id).map(|t| t.name.to_string())
}

/// The id of the topic named `name` (an internal topic's too), if it exists.
pub(super) fn topic_id_by_name(ctx: &Ctx, name: &str) -> Option<Uuid> {
    topic_view(ctx, name).map(|v| v.id)
}

/// Every topic's name, the internal topics included, in name order.
pub(super) fn all_topic_names(ctx: &Ctx) -> Vec<String> {
    let mut names: Vec<String> = ctx
        .broker
        .topics
        .all()
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    names.extend([OFFSETS_TOPIC.to_string(), TXN_STATE_TOPIC.to_string()]);
    names.sort();
    names
}

/// The internal topic whose id (as clients see it: the log's fixed topic id bytes) is `id`.
fn internal_by_id(id: Uuid) -> Option<&'static str> {
    [
        (OFFSETS_TOPIC, OFFSETS_TOPIC_ID),
        (TXN_STATE_TOPIC, TXN_STATE_TOPIC_ID),
    ]
    .into_iter()
    .find(|(_, t)| Uuid::from_bytes(t.0) == id)
    .map(|(name, _)| name)
}

fn describe_topic(
    ctx: &Ctx,
    name: String,
    id: Uuid,
    partitions: impl Iterator<Item = i32>,
    is_internal: bool,
) -> MetadataResponseTopic {
    let node = BrokerId(ctx.broker.node_id());
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(str_bytes(name)));
    t.topic_id = id;
    t.is_internal = is_internal;
    t.topic_authorized_operations = i32::MIN;
    t.partitions = partitions
        .map(|index| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = index;
            p.leader_id = node;
            // No leader epochs: clients then skip KIP-320 truncation checks, which a single
            // node with no leader changes never needs.
            p.leader_epoch = -1;
            p.replica_nodes = vec![node];
            p.isr_nodes = vec![node];
            p
        })
        .collect();
    t
}
