//! DeleteGroups (key 42), v0-3: removes empty groups and their committed offsets. A group
//! with members gets NON_EMPTY_GROUP, an unknown one GROUP_ID_NOT_FOUND. The deletion is
//! durable (a tombstone in `__consumer_offsets`) before it is answered. v3 (KIP-1331) adds
//! a message to each failed group's result (`sluice_protocol::adapted`).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};
use sluice_protocol::adapted::{set_delete_groups_error_message, Versioned};

use super::{Ctx, Reply};
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let Versioned::<DeleteGroupsRequest>(req) = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let groups = &ctx.broker.groups;
    let mut resp = DeleteGroupsResponse::default();
    for group_id in req.groups_names {
        // Kafka: DELETE on the group.
        let allowed = ctx.allowed(acl::op::DELETE, acl::resource::GROUP, &group_id.0);
        let code = match groups.read(|c| c.validate_delete_group(&group_id.0)) {
            _ if !allowed => ResponseError::GroupAuthorizationFailed.code(),
            Err(e) => error_code::from_group(e),
            Ok(tombstone) => match groups.write(vec![tombstone]).await {
                Ok(()) => error_code::NONE,
                Err(e) => {
                    tracing::warn!(group = %group_id.0.as_str(), error = %e, "group delete not durable");
                    ResponseError::CoordinatorNotAvailable.code()
                }
            },
        };
        let mut out = DeletableGroupResult::default();
        if code != error_code::NONE {
            let why = ResponseError::try_from_code(code).map_or(String::new(), |e| e.to_string());
            set_delete_groups_error_message(&mut out, &format!("group {}: {why}", &*group_id.0));
        }
        out.group_id = group_id;
        out.error_code = code;
        resp.results.push(out);
    }
    ctx.respond(&Versioned(resp))
}
