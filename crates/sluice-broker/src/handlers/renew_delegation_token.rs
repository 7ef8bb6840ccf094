//! RenewDelegationToken (key 39), v1-2 (v2 flexible): moves a token's expiry to now plus the
//! requested period (at most `delegation.token.expiry.time.ms`), never past its max timestamp.
//!
//! Kafka's answers, in its order: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (see
//! `create_delegation_token::allow_token_requests`), DELEGATION_TOKEN_AUTH_DISABLED,
//! DELEGATION_TOKEN_NOT_FOUND (no token has this HMAC), DELEGATION_TOKEN_EXPIRED,
//! DELEGATION_TOKEN_OWNER_MISMATCH (the caller is neither owner nor renewer). Errors answer
//! the expiry timestamp -1. Durable before it is answered.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{RenewDelegationTokenRequest, RenewDelegationTokenResponse};

use super::create_delegation_token::allow_token_requests;
use super::{Ctx, Reply};
use crate::services::delegation_tokens::ERROR_TIMESTAMP;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: RenewDelegationTokenRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = RenewDelegationTokenResponse::default();
    resp.expiry_timestamp_ms = ERROR_TIMESTAMP;
    if !allow_token_requests(&ctx) {
        resp.error_code = ResponseError::DelegationTokenRequestNotAllowed.code();
        return ctx.respond(&resp);
    }
    let principal = ctx.principal.clone();
    let renewed = ctx
        .blocking(move |b| {
            b.delegation_tokens
                .renew(&req.hmac, &principal, req.renew_period_ms)
        })
        .await;
    match renewed {
        Some(Ok(expiry)) => resp.expiry_timestamp_ms = expiry,
        Some(Err(code)) => resp.error_code = code,
        None => return Reply::Close,
    }
    ctx.respond(&resp)
}
