//! InitProducerId (key 22), v0-5.
//!
//! Without a transactional id every call gets a new producer id with epoch 0, as Kafka does
//! (the id and epoch a KIP-360 client sends are not needed: a fresh id restarts its
//! sequences cleanly). Ids never repeat, across restarts too (see `producer_ids`).
//! With a transactional id the transaction coordinator decides (docs/transactions.md §4,
//! §7.1): the id's producer id with a bumped epoch, answered once durable; an open
//! transaction is first aborted (CONCURRENT_TRANSACTIONS, the client retries).
//! PRODUCER_FENCED goes to v4+ only (KIP-588), INVALID_PRODUCER_EPOCH to older versions.
//!
//! Every new producer id is charged to the client's address (`sluice.producer.ids.per.ip.max`
//! per `sluice.producer.ids.per.ip.window.ms`, `producer_ids::AddressBuckets`); an address
//! past its share gets THROTTLING_QUOTA_EXCEEDED with the wait until its next id as the
//! throttle time, and no id. Java (a `RetriableException`: re-enqueued, and the connection
//! muted for the throttle time from v1), librdkafka (any error but authorization and
//! fencing: retried after its backoff) and franz-go (retriable) all retry it. A
//! transactional id that already has a producer id is not charged: it needs no new one.
//!
//! With an authorizer (Kafka's checks): WRITE on the transactional id, else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED; without one, IDEMPOTENT_WRITE on the cluster or
//! WRITE on some topic, else CLUSTER_AUTHORIZATION_FAILED.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use sluice_coordinator::{InitOutcome, TxnError};

use super::{Ctx, Reply};
use crate::error_code;
use crate::log_limit::{self, warn_limited};

/// The first version that knows PRODUCER_FENCED.
const PRODUCER_FENCED_FROM: i16 = 4;
/// The first version that sends the producer id and epoch it had (KIP-360).
const EXPECTED_FROM: i16 = 3;

/// Why no producer id was given: the error code, and the throttle time when throttled.
struct Refused {
    code: i16,
    throttle_ms: i32,
}

impl From<i16> for Refused {
    fn from(code: i16) -> Self {
        Self {
            code,
            throttle_ms: 0,
        }
    }
}

/// Charges one new producer id to the client's address (see the module header).
fn charge_new_id(ctx: &Ctx) -> Result<(), Refused> {
    let config = &ctx.broker.config;
    let (max, window_ms) = (
        config.producer_ids_per_ip_max,
        config.producer_ids_per_ip_window_ms,
    );
    let wait_ms = match ctx
        .broker
        .producer_ids
        .charge(ctx.peer.ip(), max, window_ms)
    {
        Ok(()) => return Ok(()),
        Err(wait_ms) => wait_ms.min(crate::config::limits::QUOTA_THROTTLE_MS_MAX),
    };
    warn_limited!(
        log_limit::PRODUCER_IDS_THROTTLED,
        peer = %ctx.peer,
        max,
        window_ms,
        wait_ms,
        "InitProducerId throttled: this address has taken its producer ids for the window (sluice.producer.ids.per.ip.max)"
    );
    Err(Refused {
        code: ResponseError::ThrottlingQuotaExceeded.code(),
        throttle_ms: i32::try_from(wait_ms).unwrap_or(i32::MAX),
    })
}

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
    let authorized = match &req.transactional_id {
        Some(id) => ctx.allowed_transactional_id(&id.0),
        None => ctx.allowed_idempotent_write(),
    };
    if !authorized {
        resp.error_code = match req.transactional_id {
            Some(_) => ResponseError::TransactionalIdAuthorizationFailed.code(),
            None => ResponseError::ClusterAuthorizationFailed.code(),
        };
        return ctx.respond(&resp);
    }
    if let Some(transactional_id) = &req.transactional_id {
        match transactional(&ctx, transactional_id.0.to_string(), &req).await {
            Ok((id, epoch)) => {
                resp.producer_id = ProducerId(id);
                resp.producer_epoch = epoch;
            }
            Err(refused) => {
                resp.error_code = refused.code;
                resp.throttle_time_ms = refused.throttle_ms;
            }
        }
        return ctx.respond(&resp);
    }
    if let Err(refused) = charge_new_id(&ctx) {
        resp.error_code = refused.code;
        resp.throttle_time_ms = refused.throttle_ms;
        return ctx.respond(&resp);
    }
    match ctx.blocking(|b| b.producer_ids.next()).await {
        Some(Ok(id)) => {
            resp.producer_id = ProducerId(id.0);
            resp.producer_epoch = 0;
        }
        Some(Err(e)) => {
            tracing::error!(error = %e, "could not reserve producer ids");
            resp.error_code = ResponseError::KafkaStorageError.code();
        }
        None => resp.error_code = ResponseError::CoordinatorNotAvailable.code(),
    }
    ctx.respond(&resp)
}

/// The producer id and epoch for a transactional id, or the error code.
async fn transactional(
    ctx: &Ctx,
    transactional_id: String,
    req: &InitProducerIdRequest,
) -> Result<(i64, i16), Refused> {
    let fenced = ctx.version >= PRODUCER_FENCED_FROM;
    let broker = &ctx.broker;
    // A producer id is reserved up front when the id may need one (reserving can write a
    // file, which must not happen under the coordinator lock or on the runtime).
    let needs_id = broker.txns.call(|c, _| {
        c.get(&transactional_id)
            .is_none_or(|m| m.producer_epoch >= i16::MAX - 1)
    });
    let reserved = match needs_id {
        true => {
            charge_new_id(ctx)?;
            match ctx.blocking(|b| b.producer_ids.next()).await {
                Some(Ok(id)) => Some(id.0),
                _ => return Err(ResponseError::CoordinatorNotAvailable.code().into()),
            }
        }
        false => None,
    };
    let expected =
        (ctx.version >= EXPECTED_FROM).then_some((req.producer_id.0, req.producer_epoch));
    let outcome = broker.txns.call(|c, now| {
        c.init_producer_id(
            &transactional_id,
            req.transaction_timeout_ms,
            expected,
            now,
            || reserved.ok_or(TxnError::CoordinatorNotAvailable),
        )
    });
    match outcome {
        Ok(InitOutcome::Write {
            change,
            producer_id,
            producer_epoch,
        }) => match broker.txns.write(&broker.topics, &change).await {
            Ok(()) => Ok((producer_id, producer_epoch)),
            Err(e) => {
                tracing::warn!(error = %e, "InitProducerId not durable");
                Err(ResponseError::CoordinatorNotAvailable.code().into())
            }
        },
        Ok(InitOutcome::Unchanged {
            producer_id,
            producer_epoch,
        }) => Ok((producer_id, producer_epoch)),
        Ok(InitOutcome::AbortFirst { change }) => {
            let broker = broker.clone();
            tokio::spawn(async move {
                if let Err(e) = broker.txns.write(&broker.topics, &change).await {
                    tracing::warn!(error = %e, "aborting the open transaction failed");
                }
            });
            Err(ResponseError::ConcurrentTransactions.code().into())
        }
        Err(e) => Err(error_code::from_txn(e, fenced).into()),
    }
}
