//! DescribeDelegationToken (key 41), v1-3 (v2 flexible; v3 adds each token's requester).
//!
//! Kafka's rules (`KafkaApis.handleDescribeTokensRequest`, `DelegationTokenManager.filterToken`):
//! DELEGATION_TOKEN_REQUEST_NOT_ALLOWED (see `create_delegation_token::allow_token_requests`),
//! then DELEGATION_TOKEN_AUTH_DISABLED; an empty owner list describes nothing, a null one
//! every token. A token is listed when its owner or a renewer is among the owners asked for
//! (if any were), and the caller is its owner or a renewer, or may DESCRIBE the token
//! (DELEGATION_TOKEN resource, by id), or may DESCRIBE_TOKENS of its owner (USER resource).
//! Expired tokens not yet removed are listed, as Kafka lists them.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_delegation_token_response::{
    DescribedDelegationToken, DescribedDelegationTokenRenewer,
};
use kafka_protocol::messages::{DescribeDelegationTokenRequest, DescribeDelegationTokenResponse};

use super::create_delegation_token::allow_token_requests;
use super::{str_bytes, Ctx, Reply};
use crate::services::acl;
use crate::services::delegation_tokens::{split_principal, Token};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeDelegationTokenRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = DescribeDelegationTokenResponse::default();
    if !allow_token_requests(&ctx) {
        resp.error_code = ResponseError::DelegationTokenRequestNotAllowed.code();
        return ctx.respond(&resp);
    }
    if !ctx.broker.delegation_tokens.enabled() {
        resp.error_code = ResponseError::DelegationTokenAuthDisabled.code();
        return ctx.respond(&resp);
    }
    let owners: Option<Vec<String>> = req.owners.map(|owners| {
        owners
            .iter()
            .map(|o| format!("{}:{}", &*o.principal_type, &*o.principal_name))
            .collect()
    });
    if owners.as_ref().is_some_and(Vec::is_empty) {
        return ctx.respond(&resp);
    }
    let tokens = ctx.broker.delegation_tokens.snapshot();
    resp.tokens = tokens
        .values()
        .filter(|t| eligible(&ctx, owners.as_deref(), t))
        .map(|t| described(ctx.version, t))
        .collect();
    ctx.respond(&resp)
}

/// Kafka's `filterToken`.
fn eligible(ctx: &Ctx, owners: Option<&[String]>, token: &Token) -> bool {
    if owners.is_some_and(|o| !o.iter().any(|p| token.owner_or_renewer(p))) {
        return false;
    }
    token.owner_or_renewer(&ctx.principal)
        || ctx.allowed(
            acl::op::DESCRIBE,
            acl::resource::DELEGATION_TOKEN,
            &token.token_id,
        )
        || ctx.allowed(acl::op::DESCRIBE_TOKENS, acl::resource::USER, &token.owner)
}

fn described(version: i16, t: &Token) -> DescribedDelegationToken {
    let mut d = DescribedDelegationToken::default();
    let (kind, name) = split_principal(&t.owner);
    d.principal_type = str_bytes(kind);
    d.principal_name = str_bytes(name);
    if version >= 3 {
        let (kind, name) = split_principal(&t.requester);
        d.token_requester_principal_type = str_bytes(kind);
        d.token_requester_principal_name = str_bytes(name);
    }
    d.issue_timestamp = t.issue_timestamp_ms;
    d.expiry_timestamp = t.expiry_timestamp_ms;
    d.max_timestamp = t.max_timestamp_ms;
    d.token_id = str_bytes(t.token_id.clone());
    d.hmac = Bytes::from(t.hmac.clone());
    d.renewers = t
        .renewers
        .iter()
        .map(|r| {
            let (kind, name) = split_principal(r);
            let mut renewer = DescribedDelegationTokenRenewer::default();
            renewer.principal_type = str_bytes(kind);
            renewer.principal_name = str_bytes(name);
            renewer
        })
        .collect();
    d
}
