//! LeaveGroup (key 13), v0-5: members leave a classic group and it rebalances. v0-2 name one
//! member by id; v3+ name a batch, static members by `group.instance.id`.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use sluice_coordinator::LeavingMember;

use super::{Ctx, Reply};
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: LeaveGroupRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // Kafka: READ on the group.
    if !ctx.allowed(acl::op::READ, acl::resource::GROUP, &req.group_id.0) {
        let mut resp = LeaveGroupResponse::default();
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let batched = ctx.version >= 3;
    let leaving: Vec<LeavingMember> = if batched {
        req.members
            .iter()
            .map(|m| LeavingMember {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
            })
            .collect()
    } else {
        vec![LeavingMember {
            member_id: req.member_id.to_string(),
            group_instance_id: None,
        }]
    };
    let group_id = req.group_id.0.to_string();
    let (group_result, member_results) = ctx.broker.groups.call(|c, now| {
        let (group, members, effects) = c.leave_group(now, &group_id, &leaving);
        ((group, members), effects)
    });
    let mut resp = LeaveGroupResponse::default();
    resp.error_code = error_code::from_group_opt(group_result.err());
    if batched {
        resp.members = req
            .members
            .into_iter()
            .zip(member_results)
            .map(|(m, result)| {
                let mut out = MemberResponse::default();
                out.member_id = m.member_id;
                out.group_instance_id = m.group_instance_id;
                out.error_code = error_code::from_group_opt(result.err());
                out
            })
            .collect();
    } else if resp.error_code == error_code::NONE {
        // v0-2 carry one member's outcome in the top-level error code.
        resp.error_code = member_results
            .into_iter()
            .next()
            .map_or(error_code::NONE, |r| error_code::from_group_opt(r.err()));
    }
    ctx.respond(&resp)
}
