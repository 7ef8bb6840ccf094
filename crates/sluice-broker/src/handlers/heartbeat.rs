//! Heartbeat (key 12), v0-4: keeps a classic-protocol member's session alive and tells it
//! when to rejoin (REBALANCE_IN_PROGRESS).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};
use sluice_coordinator::HeartbeatRequest as Beat;

use super::{Ctx, Reply};
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: HeartbeatRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // Kafka: READ on the group.
    if !ctx.allowed(acl::op::READ, acl::resource::GROUP, &req.group_id.0) {
        let mut resp = HeartbeatResponse::default();
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let beat = Beat {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.map(|s| s.to_string()),
    };
    let result = ctx.broker.groups.check(|c, now| c.heartbeat(now, &beat));
    let mut resp = HeartbeatResponse::default();
    resp.error_code = error_code::from_group_opt(result.err());
    ctx.respond(&resp)
}
