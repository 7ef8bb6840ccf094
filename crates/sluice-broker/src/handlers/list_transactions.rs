//! ListTransactions (key 66), v0-2 (KIP-664, KIP-994, KIP-1152; `kafka-transactions.sh
//! list`): every transactional id the coordinator holds, with its producer id and state
//! name, filtered as Kafka's `TransactionStateManager.listTransactionStates` filters:
//! - state names (v0+): unknown names are echoed in `unknown_state_filters`, no error; a
//!   filter of only unknown names matches nothing;
//! - producer ids (v0+);
//! - duration (v1+, `duration_filter` ≥ 0): only transactions started more than that many
//!   milliseconds ago;
//! - transactional id pattern (v2+, null or empty: none): the whole id must match, RE2
//!   syntax as Kafka's RE2/J (`sluice_coordinator::topic_regex`); a pattern that does not
//!   compile (or compiles beyond `limits::TXN_ID_REGEX_COMPILED_BYTES_MAX`) answers
//!   INVALID_REGULAR_EXPRESSION.
//!
//! Ids the principal may not DESCRIBE are left out (Kafka's `KafkaApis`). The answer holds
//! at most `transactional_ids_max` entries, a copy of what the coordinator already keeps;
//! it is built under the coordinator's short lock, compiled pattern first, outside it.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use sluice_coordinator::topic_regex::TopicRegex;
use sluice_coordinator::TxnStatus;

use super::{str_bytes, Ctx, Reply};
use crate::{config::limits, services::acl};

const ALL_STATES: [TxnStatus; 8] = [
    TxnStatus::Empty,
    TxnStatus::Ongoing,
    TxnStatus::PrepareCommit,
    TxnStatus::PrepareAbort,
    TxnStatus::CompleteCommit,
    TxnStatus::CompleteAbort,
    TxnStatus::Dead,
    TxnStatus::PrepareEpochFence,
];

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: ListTransactionsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = ListTransactionsResponse::default();
    let mut states = Vec::new();
    for name in &req.state_filters {
        match ALL_STATES.iter().find(|s| s.name() == &**name) {
            Some(s) => states.push(*s),
            None => resp.unknown_state_filters.push(name.clone()),
        }
    }
    let pattern = match req.transactional_id_pattern.as_deref() {
        Some(p) if !p.is_empty() => {
            match TopicRegex::compile(p, limits::TXN_ID_REGEX_COMPILED_BYTES_MAX) {
                Ok(re) => Some(re),
                Err(e) => {
                    tracing::debug!(pattern = p, error = %e, "ListTransactions pattern refused");
                    resp.error_code = ResponseError::InvalidRegularExpression.code();
                    return ctx.respond(&resp);
                }
            }
        }
        _ => None,
    };
    let filter_states = !req.state_filters.is_empty();
    let producer_ids: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let duration_ms = req.duration_filter;
    let listed: Vec<(String, i64, TxnStatus)> = ctx.broker.txns.call(|c, now| {
        c.iter()
            .filter(|(id, m)| {
                m.status != TxnStatus::Dead
                    && (producer_ids.is_empty() || producer_ids.contains(&m.producer_id))
                    && (!filter_states || states.contains(&m.status))
                    && (duration_ms < 0 || now.saturating_sub(m.start_ms) > duration_ms)
                    && pattern.as_ref().is_none_or(|re| re.matches(id))
            })
            .map(|(id, m)| (id.to_owned(), m.producer_id, m.status))
            .collect()
    });
    // Kafka: DESCRIBE on each transactional id, else it is left out.
    resp.transaction_states = listed
        .into_iter()
        .filter(|(id, _, _)| ctx.allowed(acl::op::DESCRIBE, acl::resource::TRANSACTIONAL_ID, id))
        .map(|(id, producer_id, status)| {
            let mut t = TransactionState::default();
            t.transactional_id = TransactionalId(str_bytes(id));
            t.producer_id = ProducerId(producer_id);
            t.transaction_state = str_bytes(status.name());
            t
        })
        .collect();
    ctx.respond(&resp)
}
