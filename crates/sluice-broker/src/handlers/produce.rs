//! Produce (key 0), v3-13.
//!
//! [`start`] runs in the connection's arrival order: it decodes the request, validates every
//! partition's records (`record_validation`: framing, codecs, decompression with a cap,
//! control/transactional batches, producer ids never issued) and hands them to the log, which
//! checks the header again (CRC-32C, size against max.message.bytes, offsets) and queues them
//! for group commit. A refused partition stores nothing; the others of the request go on. The
//! returned future then waits, concurrently with later requests, until the log reports the
//! appends durable (acks=1 and acks=all are the same on one node: both wait for the fsync). acks=0 returns no response at all and waits for nothing.
//! The produce path never touches topic metadata on disk: it reads the in-memory registry.
//!
//! Allocations (counted by `tests/alloc_per_request.rs`): the response is laid out once, at
//! its final size, while the request is decoded (one vector for the topics, one per topic,
//! one for the appends' waiters), and filled in place as the appends complete; it is encoded
//! into one buffer of its exact size. Nothing here grows a vector or copies record bytes.

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use sluice_log::{AppendWaiter, PartitionKey};

use super::{boxed, str_bytes, Ctx, Pending, Reply};
use crate::{error_code, record_validation};

/// One partition's outcome so far: queued, or failed before queueing.
enum Queued {
    Waiting(AppendWaiter),
    Failed(i16, Option<String>),
}

pub(crate) async fn start(ctx: Ctx, body: Bytes) -> Pending {
    let req: ProduceRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return boxed(async move { reply }),
    };
    let acks = req.acks;
    let request = record_validation::ProduceContext {
        version: ctx.version,
        transactional_id: req.transactional_id.is_some(),
    };
    let by_id = ctx.version >= 13;
    let unknown = if by_id {
        error_code::UNKNOWN_TOPIC_ID
    } else {
        error_code::UNKNOWN_TOPIC_OR_PARTITION
    };
    let partitions_total = req.topic_data.iter().map(|t| t.partition_data.len()).sum();
    // In request order, as the response lists them: `queued[i]` answers the i-th partition.
    let mut queued = Vec::with_capacity(partitions_total);
    let mut resp = ProduceResponse::default();
    resp.responses = Vec::with_capacity(req.topic_data.len());
    for t in req.topic_data {
        let topic = if by_id {
            ctx.broker.topics.get_by_id(t.topic_id)
        } else {
            ctx.broker.topics.get(&t.name.0)
        };
        let mut tr = TopicProduceResponse::default();
        tr.partition_responses = Vec::with_capacity(t.partition_data.len());
        for p in t.partition_data {
            let outcome = if !matches!(acks, -1..=1) {
                Queued::Failed(error_code::INVALID_REQUIRED_ACKS, None)
            } else {
                match (
                    topic.as_ref().and_then(|tp| tp.partition(p.index)),
                    p.records,
                ) {
                    (None, _) => Queued::Failed(unknown, None),
                    (Some(_), None) => {
                        Queued::Failed(error_code::CORRUPT_MESSAGE, Some("no records".into()))
                    }
                    (Some(key), Some(records)) => append(&ctx, request, key, records).await,
                }
            };
            queued.push(outcome);
            tr.partition_responses.push(pending_partition(p.index));
        }
        tr.name = t.name;
        tr.topic_id = t.topic_id;
        resp.responses.push(tr);
    }
    debug_assert_eq!(queued.len(), partitions_total);
    if acks == 0 {
        // The client expects no response; durability proceeds without anyone waiting.
        return boxed(async { Reply::NoResponse });
    }
    boxed(finish(ctx, resp, queued))
}

/// A partition's answer before its append completes: Kafka's "no offset" values.
fn pending_partition(index: i32) -> PartitionProduceResponse {
    let mut pr = PartitionProduceResponse::default();
    pr.index = index;
    pr.base_offset = -1;
    pr.log_append_time_ms = -1;
    pr.log_start_offset = -1;
    pr
}

/// Validates one partition's records, then queues them. Awaited in arrival order, so a slow
/// validation (a large compressed batch) holds back only this connection's later requests.
async fn append(
    ctx: &Ctx,
    request: record_validation::ProduceContext,
    key: &PartitionKey,
    records: Bytes,
) -> Queued {
    let broker = &ctx.broker;
    let validated =
        record_validation::validate_produce(&broker.producer_ids, request, &records).await;
    if let Err(refusal) = validated {
        tracing::debug!(?key, code = refusal.error_code, reason = %refusal.message, "produce refused");
        return Queued::Failed(refusal.error_code, Some(refusal.message));
    }
    match broker.log.append(key, records).await {
        Ok(w) => Queued::Waiting(w),
        Err(e) => Queued::Failed(error_code::from_log(&e), Some(e.to_string())),
    }
}

/// Waits for every queued append, in request order, and fills in the laid-out response.
async fn finish(ctx: Ctx, mut resp: ProduceResponse, queued: Vec<Queued>) -> Reply {
    debug_assert_eq!(
        resp.responses
            .iter()
            .map(|t| t.partition_responses.len())
            .sum::<usize>(),
        queued.len(),
        "one outcome per partition"
    );
    let partitions = resp
        .responses
        .iter_mut()
        .flat_map(|t| t.partition_responses.iter_mut());
    for (pr, queued) in partitions.zip(queued) {
        let outcome = match queued {
            Queued::Waiting(w) => w
                .wait()
                .await
                .map_err(|e| (error_code::from_log(&e), Some(e.to_string()))),
            Queued::Failed(code, msg) => Err((code, msg)),
        };
        match outcome {
            Ok(info) => {
                pr.base_offset = info.base_offset.0;
                pr.log_append_time_ms = info.log_append_time_ms;
                pr.log_start_offset = info.log_start_offset.0;
            }
            Err((code, msg)) => {
                pr.error_code = code;
                pr.error_message = msg.map(str_bytes);
            }
        }
    }
    ctx.respond(&resp)
}
