//! SyncGroup (key 14), v0-5: the second step of a classic-protocol rebalance.
//!
//! Followers are parked until the leader's SyncGroup brings the assignment; then every
//! member gets its own. The group's new metadata is made durable in `__consumer_offsets`
//! before the answers go out, so a broker restart keeps the assignment.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};
use sluice_coordinator::{GroupReply, SyncGroupRequest as Sync};

use super::{str_bytes, Ctx, Reply};
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: SyncGroupRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // Kafka: READ on the group.
    if !ctx.allowed(acl::op::READ, acl::resource::GROUP, &req.group_id.0) {
        let mut resp = SyncGroupResponse::default();
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let sync = Sync {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.map(|s| s.to_string()),
        protocol_type: req.protocol_type.map(|s| s.to_string()),
        protocol_name: req.protocol_name.map(|s| s.to_string()),
        assignments: req
            .assignments
            .into_iter()
            .map(|a| (a.member_id.to_string(), a.assignment))
            .collect(),
    };
    let groups = &ctx.broker.groups;
    let (id, rx) = groups.park();
    groups.call(|c, now| ((), c.sync_group(now, id, sync)));
    let mut resp = SyncGroupResponse::default();
    match rx.await {
        Ok(GroupReply::Sync(r)) => {
            resp.error_code = error_code::from_group_opt(r.error);
            resp.protocol_type = r.protocol_type.map(str_bytes);
            resp.protocol_name = r.protocol_name.map(str_bytes);
            resp.assignment = r.assignment;
            if ctx.version < 5 {
                resp.protocol_type = None;
                resp.protocol_name = None;
            }
        }
        _ => resp.error_code = ResponseError::NotCoordinator.code(),
    }
    ctx.respond(&resp)
}
