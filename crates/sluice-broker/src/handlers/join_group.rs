//! JoinGroup (key 11), v0-9: the first step of a classic-protocol rebalance.
//!
//! The request is parked in the group coordinator until the rebalance completes (every
//! member rejoined, or the rebalance timeout passed), so this task may wait up to the
//! group's rebalance timeout. It is answered NOT_COORDINATOR if the broker shuts down first.
//! v0 has no rebalance timeout: the session timeout stands in for it, as in Kafka. v4+
//! makes new dynamic members rejoin with the id they are given (MEMBER_ID_REQUIRED).
//! For protocol type "consumer" each protocol's metadata is decoded here
//! (`consumer_protocol`) and handed to the coordinator beside the bytes, which the leader
//! still gets verbatim.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use sluice_coordinator::coordinator::CONSUMER_PROTOCOL_TYPE;
use sluice_coordinator::{GroupReply, JoinGroupRequest as Join, JoinProtocol};

use super::{str_bytes, Ctx, Reply};
use crate::services::consumer_protocol::decode_subscription;
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: JoinGroupRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // Kafka: READ on the group.
    if !ctx.allowed(acl::op::READ, acl::resource::GROUP, &req.group_id.0) {
        let mut resp = JoinGroupResponse::default();
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    // Only the consumer protocol's metadata has a meaning the coordinator uses.
    let consumer = req.protocol_type.as_str() == CONSUMER_PROTOCOL_TYPE;
    let join = Join {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.map(|s| s.to_string()),
        client_id: ctx.client_id.as_deref().unwrap_or("").to_string(),
        client_host: format!("/{}", ctx.peer.ip()),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if ctx.version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        protocols: req
            .protocols
            .into_iter()
            .map(|p| JoinProtocol {
                subscription: consumer.then(|| decode_subscription(&p.metadata)).flatten(),
                name: p.name.to_string(),
                metadata: p.metadata,
            })
            .collect(),
        protocol_type: req.protocol_type.to_string(),
        require_known_member_id: ctx.version >= 4,
    };
    let groups = &ctx.broker.groups;
    let (id, rx) = groups.park();
    groups.call(|c, now| ((), c.join_group(now, id, join)));
    let mut resp = JoinGroupResponse::default();
    match rx.await {
        Ok(GroupReply::Join(r)) => {
            resp.error_code = error_code::from_group_opt(r.error);
            resp.generation_id = r.generation_id;
            resp.protocol_type = r.protocol_type.map(str_bytes);
            resp.protocol_name = r.protocol_name.map(str_bytes);
            resp.leader = str_bytes(r.leader);
            // Before v9 a static leader that rejoined without a rebalance simply gets the
            // member list again and reassigns; the Stable group keeps its assignment.
            resp.skip_assignment = r.skip_assignment && ctx.version >= 9;
            resp.member_id = str_bytes(r.member_id);
            resp.members = r
                .members
                .into_iter()
                .map(|m| {
                    let mut out = JoinGroupResponseMember::default();
                    out.member_id = str_bytes(m.member_id);
                    out.group_instance_id = m.group_instance_id.map(str_bytes);
                    out.metadata = m.metadata;
                    out
                })
                .collect();
            // Before v7 the protocol type is not on the wire and the name is not nullable.
            if ctx.version < 7 {
                resp.protocol_type = None;
                if resp.protocol_name.is_none() {
                    resp.protocol_name = Some(str_bytes(""));
                }
            }
        }
        _ => {
            resp.error_code = ResponseError::NotCoordinator.code();
            resp.generation_id = -1;
        }
    }
    ctx.respond(&resp)
}
