//! EndTxn (key 26), v0-4: commits or aborts the producer's transaction. The decision, one
//! marker per partition of the transaction and the completion are one append group, so
//! one sync covers them (docs/transactions.md §5); the client is answered once they are
//! durable and the markers applied (the LSO has moved). PRODUCER_FENCED goes to v2+ only
//! (KIP-588). With an authorizer: WRITE on the transactional id, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use sluice_coordinator::TxnResult;

use super::{Ctx, Reply};
use crate::error_code;

const PRODUCER_FENCED_FROM: i16 = 2;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: EndTxnRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let id = req.transactional_id.0.to_string();
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    let result = match req.committed {
        true => TxnResult::Commit,
        false => TxnResult::Abort,
    };
    let broker = &ctx.broker;
    let mut resp = EndTxnResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if !ctx.allowed_transactional_id(&id) {
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let change = broker
        .txns
        .call(|c, now| c.end_txn(&id, pid, epoch, result, now));
    resp.error_code = match change {
        Ok(Some(change)) => match broker.txns.write(&broker.topics, &change).await {
            Ok(()) => error_code::NONE,
            Err(e) => {
                tracing::warn!(error = %e, "EndTxn not durable");
                ResponseError::CoordinatorNotAvailable.code()
            }
        },
        Ok(None) => error_code::NONE,
        Err(e) => error_code::from_txn(e, ctx.version >= PRODUCER_FENCED_FROM),
    };
    ctx.respond(&resp)
}
