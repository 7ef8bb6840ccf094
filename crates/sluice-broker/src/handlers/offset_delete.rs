//! OffsetDelete (key 47), v0: removes committed offsets of a group for given partitions.
//! Partitions of a topic the group is still subscribed to get GROUP_SUBSCRIBED_TO_TOPIC;
//! unknown topics get UNKNOWN_TOPIC_OR_PARTITION. Deletions are durable before the answer.
//! With an authorizer (Kafka's checks): DELETE on the group, else GROUP_AUTHORIZATION_FAILED
//! for the whole request; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its
//! partitions (checked before existence).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};
use sluice_coordinator::{StoreRecord, TopicPartition};

use super::{Ctx, Reply};
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: OffsetDeleteRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let group_id = req.group_id.0.to_string();
    let groups = &ctx.broker.groups;
    let mut resp = OffsetDeleteResponse::default();
    if !ctx.allowed(acl::op::DELETE, acl::resource::GROUP, &group_id) {
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    // Partitions of existing, readable topics go to the coordinator; others fail here.
    let mut asked: Vec<TopicPartition> = Vec::new();
    let mut unreadable: Vec<&str> = Vec::new();
    for t in &req.topics {
        if !ctx.allowed(acl::op::READ, acl::resource::TOPIC, &t.name.0) {
            unreadable.push(t.name.0.as_str());
            continue;
        }
        let topic = ctx.broker.topics.get(&t.name.0);
        for p in &t.partitions {
            if topic
                .as_ref()
                .is_some_and(|tp| tp.partition(p.partition_index).is_some())
            {
                asked.push(TopicPartition {
                    topic: t.name.0.to_string(),
                    partition: p.partition_index,
                });
            }
        }
    }
    let checked = if group_id.is_empty() {
        Err(sluice_coordinator::GroupError::InvalidGroupId)
    } else {
        groups.read(|c| c.validate_offset_delete(&group_id, &asked))
    };
    let results = match checked {
        Err(e) => {
            resp.error_code = error_code::from_group(e);
            return ctx.respond(&resp);
        }
        Ok(results) => results,
    };
    let mut outcome: Vec<(TopicPartition, i16)> = Vec::with_capacity(asked.len());
    let mut tombstones = Vec::new();
    for (tp, result) in asked.into_iter().zip(results) {
        let code = error_code::from_group_opt(result.err());
        if code == error_code::NONE {
            tombstones.push(StoreRecord::Offset {
                group_id: group_id.clone(),
                topic: tp.topic.clone(),
                partition: tp.partition,
                value: None,
            });
        }
        outcome.push((tp, code));
    }
    if let Err(e) = groups.write(tombstones).await {
        tracing::warn!(group = %group_id, error = %e, "offset delete not durable");
        resp.error_code = ResponseError::CoordinatorNotAvailable.code();
        return ctx.respond(&resp);
    }
    let unreadable: Vec<String> = unreadable.into_iter().map(String::from).collect();
    for t in req.topics {
        let mut rt = OffsetDeleteResponseTopic::default();
        let denied = unreadable.iter().any(|n| *n == *t.name.0);
        for p in t.partitions {
            let code = outcome
                .iter()
                .find(|(tp, _)| tp.topic == t.name.0.as_str() && tp.partition == p.partition_index)
                .map_or(ResponseError::UnknownTopicOrPartition.code(), |(_, c)| *c);
            let code = match denied {
                true => ResponseError::TopicAuthorizationFailed.code(),
                false => code,
            };
            let mut rp = OffsetDeleteResponsePartition::default();
            rp.partition_index = p.partition_index;
            rp.error_code = code;
            rt.partitions.push(rp);
        }
        rt.name = t.name;
        resp.topics.push(rt);
    }
    ctx.respond(&resp)
}
