//! DescribeProducers (key 61), v0 (KIP-664, `kafka-transactions.sh describe-producers`):
//! for each requested partition, every producer its producer state holds: producer id,
//! epoch, last sequence and last timestamp (of its newest batch, -1 when none), coordinator
//! epoch (of its newest marker in the partition, as Kafka: -1 before its first marker; the
//! one coordinator's markers carry epoch 0, docs/transactions.md §12) and the first offset
//! of its open transaction (-1 none).
//!
//! Per partition, as Kafka: no READ on the topic TOPIC_AUTHORIZATION_FAILED (checked
//! first), an unknown topic or partition UNKNOWN_TOPIC_OR_PARTITION. Answered from memory
//! (one short lock per partition, no I/O). Bound: a partition holds at most
//! `producer_ids_per_partition_max` producers, and one response at most
//! `limits::DESCRIBE_PRODUCERS_ENTRIES_MAX`; partitions past that bound are answered
//! UNKNOWN_SERVER_ERROR with a message saying to ask for fewer partitions at once.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use sluice_log::ActiveProducer;

use super::{str_bytes, Ctx, Reply};
use crate::{config::limits, error_code, services::acl};

/// "No coordinator epoch": the producer has no marker in the partition yet (Kafka's
/// `RecordBatch.NO_PARTITION_LEADER_EPOCH`).
const NO_COORDINATOR_EPOCH: i32 = -1;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeProducersRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let broker = &ctx.broker;
    let mut resp = DescribeProducersResponse::default();
    let mut producers: Vec<ActiveProducer> = Vec::new();
    let mut entries = 0usize;
    for t in req.topics {
        // Kafka: READ on the topic, checked before existence.
        let authorized = ctx.allowed(acl::op::READ, acl::resource::TOPIC, &t.name.0);
        let topic = broker.topics.get(&t.name.0).filter(|_| authorized);
        let mut out = TopicResponse::default();
        for p in t.partition_indexes {
            let mut pr = PartitionResponse::default();
            pr.partition_index = p;
            producers.clear();
            let key = topic.as_ref().and_then(|tp| tp.partition(p));
            let found = key.map(|k| broker.log.active_producers(k, &mut producers));
            pr.error_code = match found {
                None if !authorized => ResponseError::TopicAuthorizationFailed.code(),
                None => ResponseError::UnknownTopicOrPartition.code(),
                Some(Err(e)) => error_code::from_log(&e),
                Some(Ok(()))
                    if entries + producers.len() > limits::DESCRIBE_PRODUCERS_ENTRIES_MAX =>
                {
                    pr.error_message = Some(str_bytes(format!(
                        "a DescribeProducers response holds at most {} producers; ask for fewer partitions at once",
                        limits::DESCRIBE_PRODUCERS_ENTRIES_MAX
                    )));
                    ResponseError::UnknownServerError.code()
                }
                Some(Ok(())) => {
                    entries += producers.len();
                    pr.active_producers = producers.iter().map(state).collect();
                    error_code::NONE
                }
            };
            out.partitions.push(pr);
        }
        out.name = t.name;
        resp.topics.push(out);
    }
    ctx.respond(&resp)
}

fn state(p: &ActiveProducer) -> ProducerState {
    let mut s = ProducerState::default();
    s.producer_id = ProducerId(p.producer_id.0);
    s.producer_epoch = i32::from(p.epoch.0);
    s.last_sequence = p.last_sequence;
    s.last_timestamp = p.last_timestamp_ms;
    s.coordinator_epoch = p.coordinator_epoch.unwrap_or(NO_COORDINATOR_EPOCH);
    s.current_txn_start_offset = p.current_txn_start_offset.map_or(-1, |o| o.0);
    s
}
