//! DescribeTopicPartitions (key 75), v0 (KIP-966): topics and their partitions in pages of
//! at most `response_partition_limit` partitions (capped by
//! [`limits::DESCRIBE_TOPIC_PARTITIONS_MAX`]), with a cursor to the next page. The Java admin
//! client's `describeTopics` prefers it to Metadata.
//!
//! As Kafka answers: an empty topic list means every topic (internal ones included, those
//! the principal may not DESCRIBE left out); named topics are described in name order from
//! the cursor's topic on, and a named topic the principal may not DESCRIBE gets
//! TOPIC_AUTHORIZATION_FAILED (with no topic id), one that does not exist
//! UNKNOWN_TOPIC_OR_PARTITION (or INVALID_TOPIC_EXCEPTION for an illegal name). A cursor
//! whose topic is not among the named ones, or whose partition is negative, is
//! INVALID_REQUEST for every topic. One node leads every partition; there are no leader
//! epochs (-1, as Metadata answers) and no eligible leader replicas.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use uuid::Uuid;

use super::metadata::{all_topic_names, topic_view, TopicView};
use super::{str_bytes, Ctx, Reply};
use crate::services::topics::validate_name;
use crate::{config::limits, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeTopicPartitionsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = DescribeTopicPartitionsResponse::default();
    let all = req.topics.is_empty();
    let cursor = req
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let from = cursor.as_ref().map_or("", |(t, _)| t.as_str());
    let mut names: Vec<String> = match all {
        true => all_topic_names(&ctx),
        false => req.topics.iter().map(|t| t.name.0.to_string()).collect(),
    };
    names.retain(|n| n.as_str() >= from);
    names.sort();
    names.dedup();
    let cursor_ok = cursor
        .as_ref()
        .is_none_or(|(t, p)| *p >= 0 && (all || names.iter().any(|n| n == t)));
    if !cursor_ok {
        resp.topics = req
            .topics
            .iter()
            .map(|t| error_topic(t.name.0.to_string(), ResponseError::InvalidRequest))
            .collect();
        return ctx.respond(&resp);
    }
    let may_describe = |n: &str| ctx.allowed(acl::op::DESCRIBE, acl::resource::TOPIC, n);
    let (allowed, refused): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| may_describe(n));
    let limit = req
        .response_partition_limit
        .clamp(1, limits::DESCRIBE_TOPIC_PARTITIONS_MAX);
    let mut remaining = limit;
    for name in allowed {
        if remaining == 0 {
            resp.next_cursor = Some(cursor_at(&name, 0));
            break;
        }
        let Some(view) = topic_view(&ctx, &name) else {
            if !all {
                resp.topics.push(error_topic(name.clone(), missing(&name)));
            }
            continue;
        };
        let start = match &cursor {
            Some((t, p)) if *t == name => *p,
            _ => 0,
        };
        let end = view.partitions.min(start.saturating_add(remaining));
        resp.topics.push(describe(&ctx, &view, start.min(end)..end));
        if end < view.partitions {
            resp.next_cursor = Some(cursor_at(&name, end));
            break;
        }
        remaining -= end - start.min(end);
    }
    if !all {
        resp.topics.extend(
            refused
                .into_iter()
                .map(|n| error_topic(n, ResponseError::TopicAuthorizationFailed)),
        );
    }
    ctx.respond(&resp)
}

/// Why a named topic that does not exist is not described.
fn missing(name: &str) -> ResponseError {
    match validate_name(name) {
        Ok(()) => ResponseError::UnknownTopicOrPartition,
        Err(_) => ResponseError::InvalidTopicException,
    }
}

fn describe(
    ctx: &Ctx,
    view: &TopicView,
    partitions: std::ops::Range<i32>,
) -> DescribeTopicPartitionsResponseTopic {
    let node = BrokerId(ctx.broker.node_id());
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.name = Some(TopicName(str_bytes(view.name.clone())));
    t.topic_id = view.id;
    t.is_internal = view.is_internal;
    t.topic_authorized_operations =
        ctx.authorized_operations(acl::resource::TOPIC, &view.name, acl::supported::TOPIC);
    t.partitions = partitions
        .map(|index| {
            let mut p = DescribeTopicPartitionsResponsePartition::default();
            p.partition_index = index;
            p.leader_id = node;
            p.leader_epoch = -1;
            p.replica_nodes = vec![node];
            p.isr_nodes = vec![node];
            p.eligible_leader_replicas = Some(Vec::new());
            p.last_known_elr = Some(Vec::new());
            p
        })
        .collect();
    t
}

fn error_topic(name: String, error: ResponseError) -> DescribeTopicPartitionsResponseTopic {
    let mut t = DescribeTopicPartitionsResponseTopic::default();
    t.error_code = error.code();
    t.name = Some(TopicName(str_bytes(name)));
    t.topic_id = Uuid::nil();
    t.topic_authorized_operations = i32::MIN;
    t
}

fn cursor_at(topic: &str, partition: i32) -> Cursor {
    let mut c = Cursor::default();
    c.topic_name = TopicName(str_bytes(topic.to_string()));
    c.partition_index = partition;
    c
}
