//! OffsetCommit (key 8), v2-10: stores a group's consumed positions durably. v10 names
//! topics by id (KIP-848; `sluice_protocol::adapted`): an id that names no topic gets
//! UNKNOWN_TOPIC_ID for its partitions, as Kafka answers.
//!
//! Topics and partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION (Kafka checks the
//! metadata cache the same way). The rest are checked by the coordinator (membership,
//! generation, metadata size), written to `__consumer_offsets` in one append that shares
//! the produce path's group commit, and applied only once durable: the answer means the
//! commit survives a crash.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, TopicName};
use sluice_coordinator::{CommitAuth, StoreRecord, TopicPartition};
use sluice_protocol::adapted::Versioned;

use super::metadata::topic_name_by_id;
use super::{str_bytes, Ctx, Reply};
use crate::{error_code, services::acl};

/// The first version that names topics by id.
const TOPIC_IDS_VERSION: i16 = 10;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let Versioned::<OffsetCommitRequest>(mut req) = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // v10: each topic's name from its id; an unknown id leaves the name empty.
    let by_id = ctx.version >= TOPIC_IDS_VERSION;
    if by_id {
        for t in &mut req.topics {
            if let Some(name) = topic_name_by_id(&ctx, t.topic_id) {
                t.name = TopicName(str_bytes(name));
            }
        }
    }
    let auth = CommitAuth {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id_or_member_epoch,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
    };
    let groups = &ctx.broker.groups;
    // Kafka: READ on the group (every partition gets GROUP_AUTHORIZATION_FAILED), then READ
    // on each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
    let group_read = ctx.allowed(acl::op::READ, acl::resource::GROUP, &auth.group_id);
    let allowed = groups.check(|c, now| c.validate_offset_commit(now, &auth));
    // Per partition: the response slot (topic index, partition index) and its outcome.
    let mut codes: Vec<Vec<i16>> = Vec::with_capacity(req.topics.len());
    let mut records: Vec<StoreRecord> = Vec::new();
    let mut written: Vec<(usize, usize)> = Vec::new();
    let now = groups.clock().now_ms();
    for (ti, t) in req.topics.iter().enumerate() {
        let topic_read = ctx.allowed(acl::op::READ, acl::resource::TOPIC, &t.name.0);
        let topic = ctx.broker.topics.get(&t.name.0);
        let mut topic_codes = Vec::with_capacity(t.partitions.len());
        for (pi, p) in t.partitions.iter().enumerate() {
            let exists = topic
                .as_ref()
                .is_some_and(|tp| tp.partition(p.partition_index).is_some());
            let code = match (&allowed, exists) {
                _ if !group_read => ResponseError::GroupAuthorizationFailed.code(),
                _ if by_id && t.name.0.is_empty() => ResponseError::UnknownTopicId.code(),
                _ if !topic_read => ResponseError::TopicAuthorizationFailed.code(),
                (Err(e), _) => error_code::from_group(*e),
                (Ok(()), false) => ResponseError::UnknownTopicOrPartition.code(),
                (Ok(()), true) => {
                    let tp = TopicPartition {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                    };
                    let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
                    match groups.read(|c| {
                        c.offset_record(
                            &auth.group_id,
                            tp,
                            p.committed_offset,
                            p.committed_leader_epoch,
                            metadata,
                            now,
                        )
                    }) {
                        Ok(record) => {
                            records.push(record);
                            written.push((ti, pi));
                            error_code::NONE
                        }
                        Err(e) => error_code::from_group(e),
                    }
                }
            };
            topic_codes.push(code);
        }
        codes.push(topic_codes);
    }
    if let Err(e) = groups.write(records).await {
        tracing::warn!(group = %auth.group_id, error = %e, "offset commit not durable");
        for (ti, pi) in written {
            codes[ti][pi] = ResponseError::CoordinatorNotAvailable.code();
        }
    }
    let mut resp = OffsetCommitResponse::default();
    for (t, topic_codes) in req.topics.into_iter().zip(codes) {
        let mut rt = OffsetCommitResponseTopic::default();
        rt.name = t.name;
        rt.topic_id = t.topic_id;
        for (p, code) in t.partitions.into_iter().zip(topic_codes) {
            let mut rp = OffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            rp.error_code = code;
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    ctx.respond(&Versioned(resp))
}
