//! CreateAcls (key 30), v1-3: adds ACL bindings (`kafka-acls.sh --add`,
//! `AdminClient.create_acls`). Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED);
//! without an authorizer every creation gets SECURITY_DISABLED. A malformed binding gets
//! INVALID_REQUEST with the reason, per binding; the valid ones are written durably in one file
//! replacement, on the blocking pool, before the answer.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};

use super::{str_bytes, Ctx, Reply};
use crate::error_code;
use crate::services::acl::{self, Acl};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: CreateAclsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let refusal = match () {
        _ if !ctx.broker.authorizer.enabled() => Some(ResponseError::SecurityDisabled.code()),
        _ if !ctx.allowed_cluster(acl::op::ALTER) => {
            Some(ResponseError::ClusterAuthorizationFailed.code())
        }
        _ => None,
    };
    let mut results: Vec<(i16, Option<String>)> = Vec::with_capacity(req.creations.len());
    let mut new = Vec::new();
    for c in &req.creations {
        if let Some(code) = refusal {
            results.push((code, None));
            continue;
        }
        let binding = Acl {
            resource_type: c.resource_type,
            resource_name: c.resource_name.to_string(),
            pattern_type: c.resource_pattern_type,
            principal: c.principal.to_string(),
            host: c.host.to_string(),
            operation: c.operation,
            permission: c.permission_type,
        };
        match acl::check_new(&binding) {
            Ok(()) => {
                new.push(binding);
                results.push((error_code::NONE, None));
            }
            Err(msg) => results.push((ResponseError::InvalidRequest.code(), Some(msg))),
        }
    }
    if !new.is_empty() {
        let written = ctx.blocking(move |b| b.authorizer.create(&new)).await;
        if let Some(err) = match written {
            Some(Ok(())) => None,
            Some(Err(e)) => Some(e.to_string()),
            None => Some("ACL write failed".to_string()),
        } {
            tracing::warn!(error = %err, "ACLs not created");
            for r in results.iter_mut().filter(|r| r.0 == error_code::NONE) {
                *r = (ResponseError::UnknownServerError.code(), Some(err.clone()));
            }
        }
    }
    let mut resp = CreateAclsResponse::default();
    resp.results = results
        .into_iter()
        .map(|(code, msg)| {
            let mut r = AclCreationResult::default();
            r.error_code = code;
            r.error_message = msg.map(str_bytes);
            r
        })
        .collect();
    ctx.respond(&resp)
}
