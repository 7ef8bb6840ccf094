//! InitProducerId (key 22), v0-5, for idempotent producers.
//!
//! Without a transactional id every call gets a new producer id with epoch 0, as Kafka does
//! (the id and epoch a KIP-360 client sends are not needed: a fresh id restarts its
//! sequences cleanly). Ids never repeat, across restarts too (see `producer_ids`).
//! Transactions are not supported yet: a transactional id gets COORDINATOR_NOT_AVAILABLE,
//! the same answer FindCoordinator gives for transaction coordinators.

use bytes::Bytes;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::{Ctx, Reply};
use crate::error_code;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: InitProducerIdRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    resp.ongoing_txn_producer_id = ProducerId(-1);
    resp.ongoing_txn_producer_epoch = -1;
    if req.transactional_id.is_some() {
        resp.error_code = error_code::COORDINATOR_NOT_AVAILABLE;
        return ctx.respond(&resp);
    }
    match ctx.blocking(|b| b.producer_ids.next()).await {
        Some(Ok(id)) => {
            resp.producer_id = ProducerId(id.0);
            resp.producer_epoch = 0;
        }
        Some(Err(e)) => {
            tracing::error!(error = %e, "could not reserve producer ids");
            resp.error_code = error_code::KAFKA_STORAGE_ERROR;
        }
        None => resp.error_code = error_code::COORDINATOR_NOT_AVAILABLE,
    }
    ctx.respond(&resp)
}
