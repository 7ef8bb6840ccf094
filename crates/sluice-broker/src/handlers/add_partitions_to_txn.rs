//! AddPartitionsToTxn (key 24), v0-3: the client form (one transactional id per request).
//!
//! Partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION and the others
//! OPERATION_NOT_ATTEMPTED (nothing is added); otherwise the coordinator adds them
//! (docs/transactions.md §7.2), the change is made durable, each partition is verified in
//! the log for the producer's epoch (§6.1), and only then is the client answered.
//! PRODUCER_FENCED goes to v2+ only (KIP-588).
//!
//! With an authorizer (Kafka's checks): WRITE on the transactional id, else every partition
//! gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else its partitions get
//! TOPIC_AUTHORIZATION_FAILED (before existence is checked) and the rest
//! OPERATION_NOT_ATTEMPTED, as for refused partitions.

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use sluice_coordinator::TopicPartition;
use sluice_log::LogError;

use super::{Ctx, Reply};
use crate::{acl, error_code};

const PRODUCER_FENCED_FROM: i16 = 2;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: AddPartitionsToTxnRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let id = req.v3_and_below_transactional_id.0.to_string();
    let (pid, epoch) = (
        req.v3_and_below_producer_id.0,
        req.v3_and_below_producer_epoch,
    );
    let broker = &ctx.broker;
    let mut partitions = Vec::new();
    // Partitions refused before the coordinator is asked, with their codes.
    let mut refused = Vec::new();
    let id_allowed = ctx.allowed_transactional_id(&id);
    for t in &req.v3_and_below_topics {
        let topic = broker.topics.get(&t.name.0);
        let code = match id_allowed {
            false => Some(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
            true if !ctx.allowed(acl::op::WRITE, acl::resource::TOPIC, &t.name.0) => {
                Some(error_code::TOPIC_AUTHORIZATION_FAILED)
            }
            true => None,
        };
        for &p in &t.partitions {
            let tp = TopicPartition {
                topic: t.name.0.to_string(),
                partition: p,
            };
            match (code, topic.as_ref().and_then(|t| t.partition(p))) {
                (Some(code), _) => refused.push((tp, code)),
                (None, Some(_)) => partitions.push(tp),
                (None, None) => refused.push((tp, error_code::UNKNOWN_TOPIC_OR_PARTITION)),
            }
        }
    }
    let code_of = |tp: &TopicPartition, code: i16| (tp.clone(), code);
    let not_attempted = match id_allowed {
        true => error_code::OPERATION_NOT_ATTEMPTED,
        false => error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    };
    let codes: Vec<(TopicPartition, i16)> = if !refused.is_empty() {
        refused
            .iter()
            .map(|(tp, code)| code_of(tp, *code))
            .chain(partitions.iter().map(|tp| code_of(tp, not_attempted)))
            .collect()
    } else {
        let code = add(&ctx, &id, pid, epoch, &partitions).await;
        partitions.iter().map(|tp| code_of(tp, code)).collect()
    };
    let mut resp = AddPartitionsToTxnResponse::default();
    for t in &req.v3_and_below_topics {
        let mut result = AddPartitionsToTxnTopicResult::default();
        result.name = t.name.clone();
        for &p in &t.partitions {
            let code = codes
                .iter()
                .find(|(tp, _)| tp.topic == *t.name.0 && tp.partition == p)
                .map_or(error_code::NONE, |(_, c)| *c);
            let mut r = AddPartitionsToTxnPartitionResult::default();
            r.partition_index = p;
            r.partition_error_code = code;
            result.results_by_partition.push(r);
        }
        resp.results_by_topic_v3_and_below.push(result);
    }
    ctx.respond(&resp)
}

/// Adds the partitions; the code every partition gets.
async fn add(ctx: &Ctx, id: &str, pid: i64, epoch: i16, partitions: &[TopicPartition]) -> i16 {
    let broker = &ctx.broker;
    let change = broker
        .txns
        .call(|c, now| c.add_partitions(id, pid, epoch, partitions, now));
    let written = match change {
        // Verified while the id is still pending, so no EndTxn can come in between.
        Ok(Some(change)) => {
            broker
                .txns
                .write_then_verify(&broker.topics, &change, partitions)
                .await
        }
        // Already in the transaction: verify again (idempotent), in case a restart
        // forgot the verification before the coordinator's load redid it.
        Ok(None) => {
            broker
                .txns
                .verify(&broker.topics, partitions, pid, epoch)
                .await
        }
        Err(e) => return error_code::from_txn(e, ctx.version >= PRODUCER_FENCED_FROM),
    };
    match written {
        Ok(()) => error_code::NONE,
        Err(e @ (LogError::ProducerStateFull { .. } | LogError::InvalidProducerEpoch { .. })) => {
            error_code::from_log(&e)
        }
        Err(e) => {
            tracing::warn!(error = %e, "AddPartitionsToTxn not durable");
            error_code::COORDINATOR_NOT_AVAILABLE
        }
    }
}
