//! CreateDelegationToken (key 38), v1-3 (v2 flexible; v3 names an owner other than the
//! requester, KIP-373, and answers with the requester).
//!
//! Kafka's checks, in its order (`KafkaApis.handleCreateTokenRequest`, then the controller's
//! `DelegationTokenControlManager`): DELEGATION_TOKEN_REQUEST_NOT_ALLOWED on a PLAINTEXT
//! listener, on 1-way SSL (ANONYMOUS) and for a token-authenticated client; a token for
//! another owner needs CREATE_TOKENS on that USER (DELEGATION_TOKEN_AUTHORIZATION_FAILED);
//! renewers must be `User` principals (INVALID_PRINCIPAL_TYPE); without a secret key
//! DELEGATION_TOKEN_AUTH_DISABLED. Sluice's bounds (`limits`): more than
//! `DELEGATION_TOKEN_RENEWERS_MAX` renewers or more than `DELEGATION_TOKENS_MAX` tokens is
//! POLICY_VIOLATION, a principal name longer than `DELEGATION_TOKEN_PRINCIPAL_BYTES_MAX` or
//! empty is INVALID_REQUEST. The token is durable before it is answered.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{CreateDelegationTokenRequest, CreateDelegationTokenResponse};

use super::{str_bytes, Ctx, Reply};
use crate::config::security::SecurityProtocol;
use crate::services::delegation_tokens::{split_principal, NewToken};
use crate::{config::limits, services::acl};

/// Kafka's `allowTokenRequests`: not on PLAINTEXT, not on 1-way SSL (the ANONYMOUS
/// principal), not for a client that logged in with a token.
pub(super) fn allow_token_requests(ctx: &Ctx) -> bool {
    let protocol = ctx.broker.listeners.get(ctx.listener).map(|l| l.protocol);
    let one_way_ssl =
        protocol == Some(SecurityProtocol::Ssl) && &*ctx.principal == "User:ANONYMOUS";
    !(ctx.token_authenticated
        || matches!(protocol, None | Some(SecurityProtocol::Plaintext))
        || one_way_ssl)
}

/// Why a principal name cannot be kept (INVALID_REQUEST).
fn bad_name(name: &str) -> bool {
    name.is_empty() || name.len() > limits::DELEGATION_TOKEN_PRINCIPAL_BYTES_MAX
}

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: CreateDelegationTokenRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let requester = ctx.principal.to_string();
    let owner = match req
        .owner_principal_name
        .as_deref()
        .filter(|n| !n.is_empty())
    {
        Some(name) => {
            let kind = req
                .owner_principal_type
                .as_deref()
                .filter(|t| !t.is_empty());
            format!("{}:{name}", kind.unwrap_or("User"))
        }
        None => requester.clone(),
    };
    let mut resp = response(ctx.version, &owner, &requester);
    let code = refusal(&ctx, &req, &owner, &requester);
    if code != crate::error_code::NONE {
        resp.error_code = code;
        return ctx.respond(&resp);
    }
    let new = NewToken {
        owner,
        requester,
        renewers: req
            .renewers
            .iter()
            .map(|r| format!("{}:{}", &*r.principal_type, &*r.principal_name))
            .collect(),
        max_lifetime_ms: req.max_lifetime_ms,
    };
    let Some(created) = ctx.blocking(move |b| b.delegation_tokens.create(new)).await else {
        return Reply::Close;
    };
    match created {
        Ok(t) => {
            resp.issue_timestamp_ms = t.issue_timestamp_ms;
            resp.expiry_timestamp_ms = t.expiry_timestamp_ms;
            resp.max_timestamp_ms = t.max_timestamp_ms;
            resp.token_id = str_bytes(t.token_id.clone());
            resp.hmac = Bytes::from(t.hmac.clone());
        }
        Err(code) => resp.error_code = code,
    }
    ctx.respond(&resp)
}

/// The checks before the store is asked, in Kafka's order; NONE when they pass.
fn refusal(ctx: &Ctx, req: &CreateDelegationTokenRequest, owner: &str, requester: &str) -> i16 {
    if !allow_token_requests(ctx) {
        return ResponseError::DelegationTokenRequestNotAllowed.code();
    }
    if owner != requester && !ctx.allowed(acl::op::CREATE_TOKENS, acl::resource::USER, owner) {
        return ResponseError::DelegationTokenAuthorizationFailed.code();
    }
    if req.renewers.iter().any(|r| &*r.principal_type != "User") {
        return ResponseError::InvalidPrincipalType.code();
    }
    if !ctx.broker.delegation_tokens.enabled() {
        return ResponseError::DelegationTokenAuthDisabled.code();
    }
    if req.renewers.len() > limits::DELEGATION_TOKEN_RENEWERS_MAX {
        return ResponseError::PolicyViolation.code();
    }
    if bad_name(split_principal(owner).1)
        || req.renewers.iter().any(|r| bad_name(&r.principal_name))
    {
        return ResponseError::InvalidRequest.code();
    }
    crate::error_code::NONE
}

/// The response's principals (the requester's only from v3, where the fields exist).
fn response(version: i16, owner: &str, requester: &str) -> CreateDelegationTokenResponse {
    let mut resp = CreateDelegationTokenResponse::default();
    let (kind, name) = split_principal(owner);
    resp.principal_type = str_bytes(kind);
    resp.principal_name = str_bytes(name);
    if version >= 3 {
        let (kind, name) = split_principal(requester);
        resp.token_requester_principal_type = str_bytes(kind);
        resp.token_requester_principal_name = str_bytes(name);
    }
    resp
}
