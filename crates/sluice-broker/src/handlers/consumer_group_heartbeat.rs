//! ConsumerGroupHeartbeat (key 68), v0-1: the KIP-848 consumer group protocol
//! (`group.protocol=consumer`). One request joins (member epoch 0), heartbeats (the member's
//! epoch), or leaves (-1, or -2 for a static member's temporary leave); the answer carries
//! the member's epoch and, when it changed, its assignment by topic id.
//!
//! The coordinator resolves subscriptions against a snapshot of the topic registry taken
//! here, the internal topics included: Kafka matches a regex against every topic, so a
//! pattern that names `__consumer_offsets` is assigned its partitions. The answer is sent once any group epoch change it caused is durable in
//! `__consumer_offsets` (the same parked-reply path JoinGroup uses).
//!
//! With an authorizer (Kafka's checks): READ on the group, else GROUP_AUTHORIZATION_FAILED;
//! DESCRIBE on every subscribed topic name, else TOPIC_AUTHORIZATION_FAILED (a client may
//! not learn of topics it cannot describe through its assignment).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use sluice_coordinator::{ConsumerHeartbeatRequest, GroupReply};
use uuid::Uuid;

use super::metadata::topic_view;
use super::{str_bytes, Ctx, Reply};
use crate::services::groups::OFFSETS_TOPIC;
use crate::services::txns::TXN_STATE_TOPIC;
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: ConsumerGroupHeartbeatRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    if let Some(code) = refusal(&ctx, &req) {
        let mut resp = ConsumerGroupHeartbeatResponse::default();
        resp.error_code = code;
        return ctx.respond(&resp);
    }
    let beat = ConsumerHeartbeatRequest {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.map(|s| s.to_string()),
        rack_id: req.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .map(|ts| ts.into_iter().map(|t| t.0.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: req.server_assignor.map(|s| s.to_string()),
        topic_partitions: req.topic_partitions.map(|tps| {
            tps.into_iter()
                .map(|tp| (*tp.topic_id.as_bytes(), tp.partitions))
                .collect()
        }),
        client_id: ctx.client_id.as_deref().unwrap_or("").to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
        api_version: ctx.version,
    };
    let topics = topics_snapshot(&ctx);
    let groups = &ctx.broker.groups;
    let (id, rx) = groups.park();
    groups.call(|c, now| ((), c.consumer_group_heartbeat(now, id, beat, &topics)));
    let mut resp = ConsumerGroupHeartbeatResponse::default();
    match rx.await {
        Ok(GroupReply::ConsumerHeartbeat(r)) => {
            resp.error_code = error_code::from_group_opt(r.error);
            resp.error_message = r.error_message.map(str_bytes);
            resp.member_id = r.member_id.map(str_bytes);
            resp.member_epoch = r.member_epoch;
            resp.heartbeat_interval_ms = r.heartbeat_interval_ms;
            resp.assignment = r.assignment.map(|tps| {
                let mut a = Assignment::default();
                a.topic_partitions = tps
                    .into_iter()
                    .map(|(topic_id, partitions)| {
                        let mut tp = TopicPartitions::default();
                        tp.topic_id = Uuid::from_bytes(topic_id);
                        tp.partitions = partitions;
                        tp
                    })
                    .collect();
                a
            });
        }
        _ => resp.error_code = ResponseError::NotCoordinator.code(),
    }
    ctx.respond(&resp)
}

/// The authorization refusal of a heartbeat, if refused.
fn refusal(ctx: &Ctx, req: &ConsumerGroupHeartbeatRequest) -> Option<i16> {
    if !ctx.allowed(acl::op::READ, acl::resource::GROUP, &req.group_id.0) {
        return Some(ResponseError::GroupAuthorizationFailed.code());
    }
    let names = req.subscribed_topic_names.as_deref().unwrap_or_default();
    names
        .iter()
        .any(|t| !ctx.allowed(acl::op::DESCRIBE, acl::resource::TOPIC, &t.0))
        .then_some(ResponseError::TopicAuthorizationFailed.code())
}

/// The topics as the coordinator sees them (name → topic id, partition count), for KIP-848
/// subscriptions: the registry's and the two internal topics, which it does not hold (as
/// Metadata describes them: `metadata::topic_view`).
fn topics_snapshot(ctx: &Ctx) -> sluice_coordinator::TopicsSnapshot {
    let (all, version) = ctx.broker.topics.all_with_version();
    let mut snap = sluice_coordinator::TopicsSnapshot::with_version(version);
    for t in all {
        snap.insert(
            t.name.to_string(),
            *t.id.as_bytes(),
            t.partitions.len() as i32,
        );
    }
    for internal in [OFFSETS_TOPIC, TXN_STATE_TOPIC] {
        let v = topic_view(ctx, internal).expect("an internal topic");
        snap.insert(v.name, *v.id.as_bytes(), v.partitions);
    }
    snap
}
