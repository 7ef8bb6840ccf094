//! EndTxn (key 26), v0-5: commits or aborts the producer's transaction. The decision, one
//! marker per partition of the transaction and the completion are one append group, so
//! one sync covers them (docs/transactions.md §5); the client is answered once they are
//! durable and the markers applied (the LSO has moved). PRODUCER_FENCED goes to v2+ only
//! (KIP-588). With an authorizer: WRITE on the transactional id, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//!
//! v5 is Transactions V2 (KIP-890 part 2, §14): the end bumps the producer epoch (markers
//! at the bumped one, which fences a zombie of this transaction in every partition), and
//! the response carries the producer id and epoch the producer goes on with: the bumped
//! epoch, or a new producer id at epoch 0 once the epoch is exhausted. A retry of an end
//! already done is answered NONE with the current ones, as Kafka does; errors carry -1/-1.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use sluice_coordinator::{EndOutcome, TxnError, TxnResult};

use super::{Ctx, Reply};
use crate::error_code;

const PRODUCER_FENCED_FROM: i16 = 2;
/// The first version of Transactions V2 (Kafka's `transactionVersionForEndTxn`).
const EPOCH_BUMP_FROM: i16 = 5;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: EndTxnRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let id = req.transactional_id.0.to_string();
    let result = match req.committed {
        true => TxnResult::Commit,
        false => TxnResult::Abort,
    };
    let mut resp = EndTxnResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if !ctx.allowed_transactional_id(&id) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let producer = (req.producer_id.0, req.producer_epoch);
    let ended = match ctx.version >= EPOCH_BUMP_FROM {
        true => end_v2(&ctx, &id, producer, result).await,
        false => end_v1(&ctx, &id, producer, result).await.map(|()| (-1, -1)),
    };
    match ended {
        Ok((producer_id, producer_epoch)) => {
            resp.producer_id = ProducerId(producer_id);
            resp.producer_epoch = producer_epoch;
        }
        Err(code) => resp.error_code = code,
    }
    ctx.respond(&resp)
}

/// EndTxn v0-4: the decision at the transaction's epoch.
async fn end_v1(ctx: &Ctx, id: &str, producer: (i64, i16), result: TxnResult) -> Result<(), i16> {
    let broker = &ctx.broker;
    let (pid, epoch) = producer;
    let change = broker
        .txns
        .call(|c, now| c.end_txn(id, pid, epoch, result, now));
    match change {
        Ok(Some(change)) => write(ctx, &change).await,
        Ok(None) => Ok(()),
        Err(e) => Err(error_code::from_txn(e, ctx.version >= PRODUCER_FENCED_FROM)),
    }
}

/// EndTxn v5: the decision at the bumped epoch; the producer id and epoch to answer.
async fn end_v2(
    ctx: &Ctx,
    id: &str,
    producer: (i64, i16),
    result: TxnResult,
) -> Result<(i64, i16), i16> {
    let broker = &ctx.broker;
    // A producer id is reserved up front when the epoch is exhausted (reserving can write
    // a file, which must not happen under the coordinator lock or on the runtime); at
    // most one id a producer's 32 767 transactions is left unused if the end is refused.
    let exhausted = broker.txns.call(|c, _| {
        c.get(id)
            .is_some_and(|m| !m.pending && m.producer_epoch >= i16::MAX - 1)
    });
    let reserved = match exhausted {
        true => match ctx.blocking(|b| b.producer_ids.next()).await {
            Some(Ok(id)) => Some(id.0),
            _ => return Err(ResponseError::CoordinatorNotAvailable.code()),
        },
        false => None,
    };
    let outcome = broker.txns.call(|c, now| {
        let new_producer_id = || reserved.ok_or(TxnError::CoordinatorNotAvailable);
        c.end_txn_v2(id, producer, result, now, new_producer_id)
    });
    match outcome {
        Ok(EndOutcome::Write {
            change,
            producer_id,
            producer_epoch,
        }) => write(ctx, &change)
            .await
            .map(|()| (producer_id, producer_epoch)),
        Ok(EndOutcome::Done {
            producer_id,
            producer_epoch,
        }) => Ok((producer_id, producer_epoch)),
        Err(e) => Err(error_code::from_txn(e, true)),
    }
}

async fn write(ctx: &Ctx, change: &sluice_coordinator::TxnChange) -> Result<(), i16> {
    let broker = &ctx.broker;
    match broker.txns.write(&broker.topics, change).await {
        Ok(()) => Ok(()),
        Err(e) => {
            tracing::warn!(error = %e, "EndTxn not durable");
            Err(ResponseError::CoordinatorNotAvailable.code())
        }
    }
}
