//! ConsumerGroupDescribe (key 69), v0-1: the KIP-848 view of consumer groups (group and
//! assignment epochs, assignor, and per member its epoch, subscription, current and target
//! assignment). A group that is not a KIP-848 group (classic or unknown) gets
//! GROUP_ID_NOT_FOUND, as in Kafka; admin clients then fall back to DescribeGroups.
//!
//! With an authorizer (Kafka's checks): DESCRIBE on each group, else
//! GROUP_AUTHORIZATION_FAILED for it; a group whose members' assignments name a topic the
//! client may not DESCRIBE gets TOPIC_AUTHORIZATION_FAILED and no members. Authorized
//! operations are filled in when asked for.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, TopicName,
};
use sluice_coordinator::DescribedTopicPartitions;
use uuid::Uuid;

use super::{str_bytes, Ctx, Reply};
use crate::{error_code, services::acl};

/// Kafka's "authorized operations not requested" marker.
const AUTHORIZED_OPERATIONS_OMITTED: i32 = i32::MIN;
/// KIP-1099's member type of a member using the consumer protocol.
const MEMBER_TYPE_CONSUMER: i8 = 1;

fn assignment(tps: Vec<DescribedTopicPartitions>) -> Assignment {
    let mut a = Assignment::default();
    a.topic_partitions = tps
        .into_iter()
        .map(|t| {
            let mut tp = TopicPartitions::default();
            tp.topic_id = Uuid::from_bytes(t.topic_id);
            tp.topic_name = TopicName(str_bytes(t.topic_name));
            tp.partitions = t.partitions;
            tp
        })
        .collect();
    a
}

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: ConsumerGroupDescribeRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = ConsumerGroupDescribeResponse::default();
    for group_id in req.group_ids {
        let mut out = DescribedGroup::default();
        out.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED;
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
        match ctx
            .broker
            .groups
            .read(|c| c.describe_consumer_group(&group_id.0))
        {
            Err(e) => {
                out.error_code = error_code::from_group(e);
                out.error_message = Some(str_bytes(e.to_string()));
                out.group_state = str_bytes("Dead");
            }
            Ok(g) => {
                out.group_state = str_bytes(g.state);
                out.group_epoch = g.group_epoch;
                out.assignment_epoch = g.assignment_epoch;
                out.assignor_name = str_bytes(g.assignor_name);
                out.members = g
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut dm = Member::default();
                        dm.member_id = str_bytes(m.member_id);
                        dm.instance_id = m.instance_id.map(str_bytes);
                        dm.rack_id = m.rack_id.map(str_bytes);
                        dm.member_epoch = m.member_epoch;
                        dm.client_id = str_bytes(m.client_id);
                        dm.client_host = str_bytes(m.client_host);
                        dm.subscribed_topic_names = m
                            .subscribed_topic_names
                            .into_iter()
                            .map(|t| TopicName(str_bytes(t)))
                            .collect();
                        dm.subscribed_topic_regex = m.subscribed_topic_regex.map(str_bytes);
                        dm.assignment = assignment(m.assignment);
                        dm.target_assignment = assignment(m.target_assignment);
                        if ctx.version >= 1 {
                            dm.member_type = MEMBER_TYPE_CONSUMER;
                        }
                        dm
                    })
                    .collect();
                if !topics_describable(&ctx, &out.members) {
                    out.error_code = ResponseError::TopicAuthorizationFailed.code();
                    out.error_message = Some(str_bytes(
                        "The group has described topic(s) that the client is not authorized to describe.",
                    ));
                    out.members.clear();
                }
            }
        }
        out.group_id = group_id;
        resp.groups.push(out);
    }
    ctx.respond(&resp)
}

/// Whether the client may DESCRIBE every topic the members' assignments name.
fn topics_describable(ctx: &Ctx, members: &[Member]) -> bool {
    members
        .iter()
        .flat_map(|m| {
            m.assignment
                .topic_partitions
                .iter()
                .chain(&m.target_assignment.topic_partitions)
        })
        .all(|tp| ctx.allowed(acl::op::DESCRIBE, acl::resource::TOPIC, &tp.topic_name.0))
}
