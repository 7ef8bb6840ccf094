//! AddOffsetsToTxn (key 25), v0-4: adds `__consumer_offsets-0` (where every group lives)
//! to the producer's transaction (docs/transactions.md §6.5, §7.2) and, once that is
//! durable, verifies the partition in the log for the producer's epoch, so the
//! TxnOffsetCommit batches that follow may open the transaction there (§6.1).
//! PRODUCER_FENCED goes to v2+ only (KIP-588). With an authorizer (Kafka's checks): WRITE on
//! the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group
//! (GROUP_AUTHORIZATION_FAILED).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use sluice_coordinator::{TopicPartition, CONSUMER_OFFSETS_PARTITION};

use super::{Ctx, Reply};
use crate::{error_code, services::acl};

/// The partition AddOffsetsToTxn adds.
fn offsets_partition() -> TopicPartition {
    let (topic, partition) = CONSUMER_OFFSETS_PARTITION;
    TopicPartition {
        topic: topic.to_owned(),
        partition,
    }
}

const PRODUCER_FENCED_FROM: i16 = 2;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: AddOffsetsToTxnRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let id = req.transactional_id.0.to_string();
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    let broker = &ctx.broker;
    let mut resp = AddOffsetsToTxnResponse::default();
    if !ctx.allowed_transactional_id(&id) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    if !ctx.allowed(acl::op::READ, acl::resource::GROUP, &req.group_id.0) {
        resp.error_code = ResponseError::GroupAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let change = broker
        .txns
        .call(|c, now| c.add_offsets(&id, pid, epoch, now));
    resp.error_code = match change {
        Ok(Some(change)) => match broker
            .txns
            .write_then_verify(&broker.topics, &change, &[offsets_partition()])
            .await
        {
            Ok(()) => error_code::NONE,
            Err(e) => {
                tracing::warn!(error = %e, "AddOffsetsToTxn not durable");
                ResponseError::CoordinatorNotAvailable.code()
            }
        },
        Ok(None) => error_code::NONE,
        Err(e) => error_code::from_txn(e, ctx.version >= PRODUCER_FENCED_FROM),
    };
    ctx.respond(&resp)
}
