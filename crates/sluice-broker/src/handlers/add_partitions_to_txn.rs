//! AddPartitionsToTxn (key 24), v0-5: the client form (v0-3, one transactional id per
//! request) and the batched form (v4-5, KIP-890: several transactions, each with
//! `verify_only`), which Kafka's brokers and tools send.
//!
//! Partitions that do not exist get UNKNOWN_TOPIC_OR_PARTITION and the others of the same
//! transaction OPERATION_NOT_ATTEMPTED (nothing is added); otherwise the coordinator adds
//! them (docs/transactions.md §7.2), the change is made durable, each partition is verified
//! in the log for the producer's epoch (§6.1), and only then is the client answered.
//! `verify_only` adds nothing: a partition in the ongoing transaction gets NONE, one
//! outside it TRANSACTION_ABORTABLE (INVALID_TXN_STATE before v5, KIP-890).
//! PRODUCER_FENCED goes to v2+ only (KIP-588). v4+ needs CLUSTER_ACTION on the cluster
//! (Kafka: it is a broker-to-broker form), else CLUSTER_AUTHORIZATION_FAILED for the
//! whole request.
//!
//! The client form (v0-3) with an authorizer (Kafka's checks): WRITE on the transactional id,
//! else every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else
//! its partitions get TOPIC_AUTHORIZATION_FAILED (before existence is checked) and the rest
//! OPERATION_NOT_ATTEMPTED, as for refused partitions.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};
use sluice_coordinator::TopicPartition;
use sluice_log::LogError;

use super::{Ctx, Reply};
use crate::{error_code, services::acl};

const PRODUCER_FENCED_FROM: i16 = 2;
const BATCHED_FROM: i16 = 4;
const TRANSACTION_ABORTABLE_FROM: i16 = 5;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: AddPartitionsToTxnRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = AddPartitionsToTxnResponse::default();
    if ctx.version < BATCHED_FROM {
        let id = req.v3_and_below_transactional_id.0.to_string();
        let (pid, epoch) = (
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
        );
        let topics = &req.v3_and_below_topics;
        resp.results_by_topic_v3_and_below =
            transaction(&ctx, &id, pid, epoch, Form::Client, topics).await;
        return ctx.respond(&resp);
    }
    if !ctx.allowed_cluster(acl::op::CLUSTER_ACTION) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    for t in &req.transactions {
        let id = t.transactional_id.0.to_string();
        let (pid, epoch) = (t.producer_id.0, t.producer_epoch);
        let mut result = AddPartitionsToTxnResult::default();
        result.transactional_id = t.transactional_id.clone();
        let form = match t.verify_only {
            true => Form::VerifyOnly,
            false => Form::Batched,
        };
        result.topic_results = transaction(&ctx, &id, pid, epoch, form, &t.topics).await;
        resp.results_by_transaction.push(result);
    }
    ctx.respond(&resp)
}

/// How a transaction's partitions came: the client form (v0-3, checked against ACLs per
/// transactional id and topic), or the batched broker form (v4+, authorized as a whole by
/// CLUSTER_ACTION), adding or only verifying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Client,
    Batched,
    VerifyOnly,
}

/// One transaction's partitions: adds them (or, `verify_only`, checks them); the result of
/// each, in request order. Codes are computed in request order and paired by position, so
/// the work is linear in the request (a request may name very many partitions).
async fn transaction(
    ctx: &Ctx,
    id: &str,
    pid: i64,
    epoch: i16,
    form: Form,
    topics: &[AddPartitionsToTxnTopic],
) -> Vec<AddPartitionsToTxnTopicResult> {
    let broker = &ctx.broker;
    let checked = form == Form::Client;
    let id_allowed = !checked || ctx.allowed_transactional_id(id);
    let mut partitions = Vec::new();
    // Per partition, in order: the code it is refused with before the coordinator is asked.
    let mut refusals = Vec::new();
    for t in topics {
        let topic = broker.topics.get(&t.name.0);
        let topic_allowed =
            !checked || ctx.allowed(acl::op::WRITE, acl::resource::TOPIC, &t.name.0);
        for &p in &t.partitions {
            let exists = topic.as_ref().and_then(|t| t.partition(p)).is_some();
            refusals.push(match (id_allowed, topic_allowed, exists) {
                (false, _, _) => Some(ResponseError::TransactionalIdAuthorizationFailed.code()),
                (true, false, _) => Some(ResponseError::TopicAuthorizationFailed.code()),
                (true, true, false) => Some(ResponseError::UnknownTopicOrPartition.code()),
                (true, true, true) => None,
            });
            partitions.push(TopicPartition {
                topic: t.name.0.to_string(),
                partition: p,
            });
        }
    }
    let not_attempted = match id_allowed {
        true => ResponseError::OperationNotAttempted.code(),
        false => ResponseError::TransactionalIdAuthorizationFailed.code(),
    };
    let codes: Vec<i16> = if refusals.iter().any(Option::is_some) {
        refusals
            .iter()
            .map(|r| r.unwrap_or(not_attempted))
            .collect()
    } else if form == Form::VerifyOnly {
        verify(ctx, id, pid, epoch, &partitions)
    } else {
        let code = add(ctx, id, pid, epoch, &partitions).await;
        vec![code; partitions.len()]
    };
    debug_assert_eq!(codes.len(), partitions.len());
    let mut codes = codes.into_iter();
    topics
        .iter()
        .map(|t| {
            let mut result = AddPartitionsToTxnTopicResult::default();
            result.name = t.name.clone();
            for &p in &t.partitions {
                let mut r = AddPartitionsToTxnPartitionResult::default();
                r.partition_index = p;
                r.partition_error_code = codes.next().unwrap_or(error_code::NONE);
                result.results_by_partition.push(r);
            }
            result
        })
        .collect()
}

/// `verify_only` (KIP-890): whether each partition is in the ongoing transaction; nothing
/// is written. One code per partition, in order.
fn verify(ctx: &Ctx, id: &str, pid: i64, epoch: i16, partitions: &[TopicPartition]) -> Vec<i16> {
    let contained = ctx
        .broker
        .txns
        .call(|c, _| c.contains_partitions(id, pid, epoch, partitions));
    let outside = match ctx.version >= TRANSACTION_ABORTABLE_FROM {
        true => ResponseError::TransactionAbortable.code(),
        false => ResponseError::InvalidTxnState.code(),
    };
    match contained {
        Ok(inside) => inside
            .into_iter()
            .map(|i| if i { error_code::NONE } else { outside })
            .collect(),
        Err(e) => vec![error_code::from_txn(e, true); partitions.len()],
    }
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
            crate::log_limit::producer_state_full(&e, None);
            error_code::from_log(&e)
        }
        Err(e) => {
            tracing::warn!(error = %e, "AddPartitionsToTxn not durable");
            ResponseError::CoordinatorNotAvailable.code()
        }
    }
}
