//! DeleteAcls (key 31), v1-3: removes the ACL bindings each filter matches
//! (`kafka-acls.sh --remove`, `AdminClient.delete_acls`) and returns them per filter. Needs
//! ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED); SECURITY_DISABLED without an
//! authorizer; INVALID_REQUEST for a filter with unknown codes. The removal is durable (one
//! file replacement, on the blocking pool) before the answer.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};

use super::{str_bytes, Ctx, Reply};
use crate::services::acl::{self, Filter};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DeleteAclsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let refusal = if !ctx.broker.authorizer.enabled() {
        Some(ResponseError::SecurityDisabled.code())
    } else if !ctx.allowed_cluster(acl::op::ALTER) {
        Some(ResponseError::ClusterAuthorizationFailed.code())
    } else {
        None
    };
    let filters: Vec<Filter> = req
        .filters
        .iter()
        .map(|f| Filter {
            resource_type: f.resource_type_filter,
            resource_name: f.resource_name_filter.as_ref().map(|s| s.to_string()),
            pattern_type: f.pattern_type_filter,
            principal: f.principal_filter.as_ref().map(|s| s.to_string()),
            host: f.host_filter.as_ref().map(|s| s.to_string()),
            operation: f.operation,
            permission: f.permission_type,
        })
        .collect();
    // Per filter: its own refusal, or the index among the valid filters sent to the store.
    let mut valid = Vec::new();
    let outcome: Vec<Result<usize, (i16, Option<String>)>> = filters
        .into_iter()
        .map(|f| match (refusal, f.check()) {
            (Some(code), _) => Err((code, None)),
            (None, Err(msg)) => Err((ResponseError::InvalidRequest.code(), Some(msg))),
            (None, Ok(())) => {
                valid.push(f);
                Ok(valid.len() - 1)
            }
        })
        .collect();
    let removed = match valid.is_empty() {
        true => Ok(Vec::new()),
        false => match ctx.blocking(move |b| b.authorizer.delete(&valid)).await {
            Some(Ok(r)) => Ok(r),
            Some(Err(e)) => Err(e.to_string()),
            None => Err("ACL write failed".to_string()),
        },
    };
    let mut resp = DeleteAclsResponse::default();
    for o in outcome {
        let mut r = DeleteAclsFilterResult::default();
        match (o, &removed) {
            (Err((code, msg)), _) => {
                r.error_code = code;
                r.error_message = msg.map(str_bytes);
            }
            (Ok(_), Err(e)) => {
                tracing::warn!(error = %e, "ACLs not deleted");
                r.error_code = ResponseError::UnknownServerError.code();
                r.error_message = Some(str_bytes(e.clone()));
            }
            (Ok(i), Ok(removed)) => {
                for a in removed.get(i).into_iter().flatten() {
                    let mut m = DeleteAclsMatchingAcl::default();
                    m.resource_type = a.resource_type;
                    m.resource_name = str_bytes(a.resource_name.clone());
                    m.pattern_type = a.pattern_type;
                    m.principal = str_bytes(a.principal.clone());
                    m.host = str_bytes(a.host.clone());
                    m.operation = a.operation;
                    m.permission_type = a.permission;
                    r.matching_acls.push(m);
                }
            }
        }
        resp.filter_results.push(r);
    }
    ctx.respond(&resp)
}
