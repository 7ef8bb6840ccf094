//! ListGroups (key 16), v0-5: every group, optionally filtered by state (v4+) and type (v5+).

use bytes::Bytes;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use super::{str_bytes, Ctx, Reply};
use crate::services::acl;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: ListGroupsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_string()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_string()).collect();
    let mut listed = ctx.broker.groups.read(|c| c.list_groups(&states, &types));
    // Kafka: DESCRIBE on the cluster lists every group, else only groups with DESCRIBE.
    if !ctx.allowed_cluster(acl::op::DESCRIBE) {
        listed.retain(|g| ctx.allowed(acl::op::DESCRIBE, acl::resource::GROUP, &g.group_id));
    }
    let mut resp = ListGroupsResponse::default();
    resp.groups = listed
        .into_iter()
        .map(|g| {
            let mut out = ListedGroup::default();
            out.group_id = GroupId(str_bytes(g.group_id));
            out.protocol_type = str_bytes(g.protocol_type);
            out.group_state = str_bytes(g.state);
            out.group_type = str_bytes(g.group_type);
            out
        })
        .collect();
    ctx.respond(&resp)
}
