//! DeleteRecords (key 21), v0-2: moves a partition's log start offset up (offset -1 means the
//! high watermark). Durable before the response; segments wholly below it are deleted.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};
use sluice_log::Offset;

use super::{Ctx, Reply};
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DeleteRecordsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let who = ctx.who();
    ctx.respond_blocking(move |b| {
            let mut resp = DeleteRecordsResponse::default();
            for t in req.topics {
                // Kafka: DELETE on the topic, checked before existence.
                let authorized = who.allowed(b, acl::op::DELETE, acl::resource::TOPIC, &t.name.0);
                let topic = b.topics.get(&t.name.0);
                let mut tr = DeleteRecordsTopicResult::default();
                tr.name = t.name;
                for p in t.partitions {
                    let mut pr = DeleteRecordsPartitionResult::default();
                    pr.partition_index = p.partition_index;
                    pr.low_watermark = -1;
                    match topic.as_ref().and_then(|tp| tp.partition(p.partition_index)) {
                        _ if !authorized => {
                            pr.error_code = ResponseError::TopicAuthorizationFailed.code()
                        }
                        // Kafka: "Cannot delete records of internal topic".
                        None if crate::services::topics::is_internal(&tr.name.0) => {
                            pr.error_code = ResponseError::InvalidTopicException.code()
                        }
                        None => pr.error_code = ResponseError::UnknownTopicOrPartition.code(),
                        Some(key) => match b.log.delete_records(key, Offset(p.offset)) {
                            Ok(low) => {
                                pr.low_watermark = low.0;
                                tracing::info!(topic = %key.topic, partition = key.partition, log_start_offset = low.0, "deleted records");
                            }
                            Err(e) => pr.error_code = error_code::from_log(&e),
                        },
                    }
                    tr.partitions.push(pr);
                }
                resp.topics.push(tr);
            }
            resp
    })
    .await
}
