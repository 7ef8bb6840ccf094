//! DescribeTransactions (key 65), v0 (KIP-664, `kafka-transactions.sh describe`): the
//! coordinator's state of each named transactional id: state name, producer id and epoch,
//! timeout, start time and the partitions of its transaction (docs/transactions.md §7.6).
//!
//! Per id, as Kafka's `TransactionCoordinator.handleDescribeTransactions`: empty id
//! INVALID_REQUEST; no DESCRIBE on the transactional id TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//! (checked first, as `KafkaApis` does); an id the coordinator does not hold (never
//! initialized, expired, or only being created) TRANSACTIONAL_ID_NOT_FOUND. Answered from
//! memory under the coordinator's short lock; nothing is written.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use sluice_coordinator::TxnMetadata;

use super::{str_bytes, Ctx, Reply};
use crate::{error_code, services::acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeTransactionsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = DescribeTransactionsResponse::default();
    for id in req.transactional_ids {
        let mut out = TransactionState::default();
        out.producer_id = ProducerId(-1);
        out.producer_epoch = -1;
        out.transaction_start_time_ms = -1;
        out.error_code = if !ctx.allowed(acl::op::DESCRIBE, acl::resource::TRANSACTIONAL_ID, &id.0)
        {
            ResponseError::TransactionalIdAuthorizationFailed.code()
        } else if id.0.is_empty() {
            ResponseError::InvalidRequest.code()
        } else {
            ctx.broker
                .txns
                .call(|c, _| c.get(&id.0).map(|m| describe(m, &mut out)))
                .unwrap_or(ResponseError::TransactionalIdNotFound.code())
        };
        out.transactional_id = id;
        resp.transaction_states.push(out);
    }
    ctx.respond(&resp)
}

/// Fills `out` from the id's state; the error code (none).
fn describe(m: &TxnMetadata, out: &mut TransactionState) -> i16 {
    out.transaction_state = str_bytes(m.status.name());
    out.transaction_timeout_ms = m.timeout_ms;
    out.transaction_start_time_ms = m.start_ms;
    out.producer_id = ProducerId(m.producer_id);
    out.producer_epoch = m.producer_epoch;
    // The partitions are a sorted set: one entry per topic, partitions in order.
    for tp in &m.partitions {
        match out.topics.last_mut() {
            Some(t) if *t.topic.0 == *tp.topic => t.partitions.push(tp.partition),
            _ => {
                let mut t = TopicData::default();
                t.topic = TopicName(str_bytes(tp.topic.clone()));
                t.partitions.push(tp.partition);
                out.topics.push(t);
            }
        }
    }
    error_code::NONE
}
