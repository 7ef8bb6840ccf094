//! DescribeGroups (key 15), v0-6: state, protocol and members of classic groups, as
//! `kafka-consumer-groups.sh --describe` shows them. An unknown group is described as Dead,
//! with no error before v6 and GROUP_ID_NOT_FOUND (and a message) from v6, as Kafka answers. A KIP-848 group is shown classic-style: its
//! members' subscriptions and assignments are encoded here in the consumer protocol.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};
use sluice_coordinator::MemberData;

use super::{str_bytes, Ctx, Reply};
use crate::services::acl;
use crate::services::consumer_protocol::{encode_assignment, encode_subscription};

/// Kafka's "authorized operations not requested" marker.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeGroupsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = DescribeGroupsResponse::default();
    for group_id in req.groups {
        let mut out = DescribedGroup::default();
        out.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
        if group_id.0.is_empty() {
            out.error_code = ResponseError::InvalidGroupId.code();
            out.group_id = group_id;
            resp.groups.push(out);
            continue;
        }
        // Kafka: DESCRIBE on the group.
        if !ctx.allowed(acl::op::DESCRIBE, acl::resource::GROUP, &group_id.0) {
            out.error_code = ResponseError::GroupAuthorizationFailed.code();
            out.group_id = group_id;
            resp.groups.push(out);
            continue;
        }
        if req.include_authorized_operations {
            out.authorized_operations =
                ctx.authorized_operations(acl::resource::GROUP, &group_id.0, acl::supported::GROUP);
        }
        let (exists, g) = ctx
            .broker
            .groups
            .read(|c| (c.group_exists(&group_id.0), c.describe_group(&group_id.0)));
        if !exists && ctx.version >= 6 {
            out.error_code = ResponseError::GroupIdNotFound.code();
            out.error_message = Some(str_bytes(format!("Group {} not found.", &*group_id.0)));
        }
        out.group_id = group_id;
        out.group_state = str_bytes(g.state);
        out.protocol_type = str_bytes(g.protocol_type);
        out.protocol_data = str_bytes(g.protocol_name);
        out.members = g
            .members
            .into_iter()
            .map(|m| {
                let mut dm = DescribedGroupMember::default();
                dm.member_id = str_bytes(m.member_id);
                dm.group_instance_id = m.group_instance_id.map(str_bytes);
                dm.client_id = str_bytes(m.client_id);
                dm.client_host = str_bytes(m.client_host);
                (dm.member_metadata, dm.member_assignment) = match m.data {
                    MemberData::Opaque {
                        metadata,
                        assignment,
                    } => (metadata, assignment),
                    MemberData::Consumer { topics, assignment } => {
                        (encode_subscription(&topics), encode_assignment(&assignment))
                    }
                };
                dm
            })
            .collect();
        resp.groups.push(out);
    }
    ctx.respond(&resp)
}
