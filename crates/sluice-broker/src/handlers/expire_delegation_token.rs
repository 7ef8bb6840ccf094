//! ExpireDelegationToken (key 40), v1-2 (v2 flexible): a negative period removes the token
//! now; otherwise its expiry becomes now plus the period (at most its max timestamp).
//!
//! Kafka's answers, in its order: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (see
//! `create_delegation_token::allow_token_requests`), DELEGATION_TOKEN_AUTH_DISABLED,
//! DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_OWNER_MISMATCH, then (for a period >= 0)
//! DELEGATION_TOKEN_EXPIRED. Errors answer the expiry timestamp -1. Durable before it is
//! answered.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ExpireDelegationTokenRequest, ExpireDelegationTokenResponse};

use super::create_delegation_token::allow_token_requests;
use super::{Ctx, Reply};
use crate::services::delegation_tokens::ERROR_TIMESTAMP;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: ExpireDelegationTokenRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = ExpireDelegationTokenResponse::default();
    resp.expiry_timestamp_ms = ERROR_TIMESTAMP;
    if !allow_token_requests(&ctx) {
        resp.error_code = ResponseError::DelegationTokenRequestNotAllowed.code();
        return ctx.respond(&resp);
    }
    let principal = ctx.principal.clone();
    let expired = ctx
        .blocking(move |b| {
            b.delegation_tokens
                .expire(&req.hmac, &principal, req.expiry_time_period_ms)
        })
        .await;
    match expired {
        Some(Ok(expiry)) => resp.expiry_timestamp_ms = expiry,
        Some(Err(code)) => resp.error_code = code,
        None => return Reply::Close,
    }
    ctx.respond(&resp)
}
