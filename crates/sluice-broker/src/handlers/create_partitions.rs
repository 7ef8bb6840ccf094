//! CreatePartitions (key 37), v0-3: grows a topic's partition count; never shrinks it.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use super::{str_bytes, Ctx, Reply};
use crate::services::acl;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: CreatePartitionsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let who = ctx.who();
    ctx.respond_blocking(move |b| {
        let mut resp = CreatePartitionsResponse::default();
        for t in req.topics {
            let mut r = CreatePartitionsTopicResult::default();
            r.name = t.name.clone();
            let node = b.node_id();
            let bad_assignment = t
                .assignments
                .as_ref()
                .is_some_and(|a| a.iter().any(|x| x.broker_ids.iter().any(|id| id.0 != node)));
            // Kafka: ALTER on the topic.
            let authorized = who.allowed(b, acl::op::ALTER, acl::resource::TOPIC, &t.name.0);
            let outcome = if !authorized {
                Err(crate::services::topics::AdminError::new(
                    ResponseError::TopicAuthorizationFailed.code(),
                    "Authorization failed.",
                ))
            } else if bad_assignment {
                Err(crate::services::topics::AdminError::new(
                    ResponseError::InvalidReplicaAssignment.code(),
                    format!("Replicas must be [{node}]."),
                ))
            } else {
                b.topics
                    .add_partitions(&t.name.0, t.count, req.validate_only, &b.log, &b.config)
            };
            if let Err(e) = outcome {
                r.error_code = e.code;
                r.error_message = Some(str_bytes(e.message));
            }
            resp.results.push(r);
        }
        resp
    })
    .await
}
