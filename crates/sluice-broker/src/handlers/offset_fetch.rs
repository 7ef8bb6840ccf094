//! OffsetFetch (key 9), v1-10: a group's committed offsets. v10 names topics by id
//! (KIP-848; `sluice_protocol::adapted`). v8+ asks for several groups at
//! once. Null topics (v2+) means every committed partition of the group. A partition with
//! no committed offset answers offset -1 without an error, as Kafka does.
//!
//! v9 names the fetching member (member id and epoch, KIP-848): for a consumer group the
//! coordinator checks them like a commit's (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH).
//!
//! Offsets a transaction committed but has not decided yet (TxnOffsetCommit, KIP-447) are
//! never shown: the partition answers its last committed offset. With `require_stable`
//! (v7+, sent by read_committed consumers) such a partition answers UNSTABLE_OFFSET_COMMIT
//! and offset -1 instead, and the client retries until the transaction is decided.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use sluice_coordinator::{CommittedOffset, TopicPartition};
use sluice_protocol::adapted::Versioned;
use uuid::Uuid;

use super::metadata::{topic_id_by_name, topic_name_by_id};
use super::{str_bytes, Ctx, Reply};
use crate::{error_code, services::acl};

/// The first version that names topics by id.
const TOPIC_IDS_VERSION: i16 = 10;

/// A fetched partition: its committed offset, or the partition's error code
/// (UNSTABLE_OFFSET_COMMIT).
type Slot = Result<Option<CommittedOffset>, i16>;
type Fetched = Vec<(TopicPartition, Slot)>;
/// Fetched offsets grouped by topic: (topic, [(partition, slot)]).
type ByTopic = Vec<(String, Vec<(i32, Slot)>)>;

/// Looks one group up: the requested partitions, or all committed ones when `None`.
/// `member`: v9's member id and epoch.
fn fetch(
    ctx: &Ctx,
    group_id: &str,
    wanted: Option<Vec<TopicPartition>>,
    member: Option<(Option<&str>, i32)>,
    require_stable: bool,
) -> (i16, Fetched) {
    if group_id.is_empty() {
        return (ResponseError::InvalidGroupId.code(), Vec::new());
    }
    // Kafka: DESCRIBE on the group, then topics without DESCRIBE are not shown.
    if !ctx.allowed(acl::op::DESCRIBE, acl::resource::GROUP, group_id) {
        return (ResponseError::GroupAuthorizationFailed.code(), Vec::new());
    }
    if let Some((member_id, epoch)) = member {
        let checked = ctx
            .broker
            .groups
            .read(|c| c.validate_offset_fetch(group_id, member_id, epoch));
        if let Err(e) = checked {
            return (error_code::from_group(e), Vec::new());
        }
    }
    let all_topics = wanted.is_none();
    let mut fetched: Fetched = ctx.broker.groups.read(|c| {
        c.fetch_offsets(group_id, wanted.as_deref())
            .into_iter()
            .map(|(tp, committed)| {
                let unstable = require_stable && c.has_pending_offset(group_id, &tp);
                let slot = match unstable {
                    true => Err(ResponseError::UnstableOffsetCommit.code()),
                    false => Ok(committed),
                };
                (tp, slot)
            })
            .collect()
    });
    let visible =
        |tp: &TopicPartition| ctx.allowed(acl::op::DESCRIBE, acl::resource::TOPIC, &tp.topic);
    match all_topics {
        true => fetched.retain(|(tp, _)| visible(tp)),
        // Named partitions of a hidden topic answer as if nothing was committed.
        false => fetched
            .iter_mut()
            .filter(|(tp, _)| !visible(tp))
            .for_each(|(_, c)| *c = Ok(None)),
    }
    (error_code::NONE, fetched)
}

/// Flattens requested (topic, partition indexes) into topic-partitions.
fn partitions(topics: impl Iterator<Item = (TopicName, Vec<i32>)>) -> Vec<TopicPartition> {
    topics
        .flat_map(|(name, indexes)| {
            let topic = name.0.to_string();
            indexes.into_iter().map(move |partition| TopicPartition {
                topic: topic.clone(),
                partition,
            })
        })
        .collect()
}

/// Groups fetched partitions by topic, keeping first-seen topic order.
fn by_topic(fetched: Fetched) -> ByTopic {
    let mut out: ByTopic = Vec::new();
    for (tp, committed) in fetched {
        match out.iter_mut().find(|(t, _)| *t == tp.topic) {
            Some((_, parts)) => parts.push((tp.partition, committed)),
            None => out.push((tp.topic, vec![(tp.partition, committed)])),
        }
    }
    out
}

/// One group's answer (v8+). From v10 topics are named by id both ways: a requested id that
/// names no topic answers UNKNOWN_TOPIC_ID for its partitions, and a committed topic that no
/// longer exists (so has no id) is left out of an all-topics answer, as Kafka does.
fn group_response(
    ctx: &Ctx,
    g: OffsetFetchRequestGroup,
    require_stable: bool,
) -> OffsetFetchResponseGroup {
    let by_id = ctx.version >= TOPIC_IDS_VERSION;
    let mut unknown_ids: Vec<(Uuid, Vec<i32>)> = Vec::new();
    let wanted = g.topics.map(|ts| {
        partitions(ts.into_iter().filter_map(|t| match by_id {
            false => Some((t.name, t.partition_indexes)),
            true => match topic_name_by_id(ctx, t.topic_id) {
                Some(name) => Some((TopicName(str_bytes(name)), t.partition_indexes)),
                None => {
                    unknown_ids.push((t.topic_id, t.partition_indexes));
                    None
                }
            },
        }))
    });
    let member = (ctx.version >= 9).then_some((g.member_id.as_deref(), g.member_epoch));
    let (code, fetched) = fetch(ctx, &g.group_id.0, wanted, member, require_stable);
    let mut rg = OffsetFetchResponseGroup::default();
    rg.group_id = g.group_id;
    rg.error_code = code;
    for (topic, parts) in by_topic(fetched) {
        let mut rt = OffsetFetchResponseTopics::default();
        if by_id {
            let Some(id) = topic_id_by_name(ctx, &topic) else {
                continue;
            };
            rt.topic_id = id;
        }
        rt.name = TopicName(str_bytes(topic));
        rt.partitions = parts
            .into_iter()
            .map(|(p, slot)| partitions_entry(p, slot))
            .collect();
        rg.topics.push(rt);
    }
    if code == error_code::NONE {
        for (id, indexes) in unknown_ids {
            let mut rt = OffsetFetchResponseTopics::default();
            rt.topic_id = id;
            let unknown = ResponseError::UnknownTopicId.code();
            rt.partitions = indexes
                .into_iter()
                .map(|p| partitions_entry(p, Err(unknown)))
                .collect();
            rg.topics.push(rt);
        }
    }
    rg
}

/// A v8+ partition entry.
fn partitions_entry(partition: i32, slot: Slot) -> OffsetFetchResponsePartitions {
    let (offset, epoch, metadata, partition_code) = values(slot);
    let mut rp = OffsetFetchResponsePartitions::default();
    rp.partition_index = partition;
    rp.committed_offset = offset;
    rp.committed_leader_epoch = epoch;
    rp.metadata = Some(str_bytes(metadata));
    rp.error_code = partition_code;
    rp
}

/// (offset, leader epoch, metadata, partition error code) of a slot.
fn values(slot: Slot) -> (i64, i32, String, i16) {
    match slot {
        Ok(Some(c)) => (c.offset, c.leader_epoch, c.metadata, error_code::NONE),
        Ok(None) => (-1, -1, String::new(), error_code::NONE),
        Err(code) => (-1, -1, String::new(), code),
    }
}

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let Versioned::<OffsetFetchRequest>(req) = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = OffsetFetchResponse::default();
    if ctx.version >= 8 {
        for g in req.groups {
            resp.groups
                .push(group_response(&ctx, g, req.require_stable));
        }
        return ctx.respond(&Versioned(resp));
    }
    let wanted = req
        .topics
        .map(|ts| partitions(ts.into_iter().map(|t| (t.name, t.partition_indexes))));
    // `require_stable` exists from v7; older requests decode it as false.
    let (code, fetched) = fetch(&ctx, &req.group_id.0, wanted, None, req.require_stable);
    resp.error_code = code;
    for (topic, parts) in by_topic(fetched) {
        let mut rt = OffsetFetchResponseTopic::default();
        rt.name = TopicName(str_bytes(topic));
        for (partition, slot) in parts {
            let (offset, epoch, metadata, partition_code) = values(slot);
            let mut rp = OffsetFetchResponsePartition::default();
            rp.partition_index = partition;
            rp.committed_offset = offset;
            rp.committed_leader_epoch = epoch;
            rp.metadata = Some(str_bytes(metadata));
            // v1 has only a per-partition error field for group-level failures.
            rp.error_code = if ctx.version < 2 {
                code
            } else {
                partition_code
            };
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    ctx.respond(&Versioned(resp))
}
