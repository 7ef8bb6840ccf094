//! DescribeAcls (key 29), v1-3: the ACL bindings a filter matches (`kafka-acls.sh --list`,
//! `AdminClient.describe_acls`), grouped by resource pattern. Needs DESCRIBE on the cluster
//! (CLUSTER_AUTHORIZATION_FAILED); SECURITY_DISABLED without an authorizer; INVALID_REQUEST
//! for a filter with unknown codes.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};

use super::{str_bytes, Ctx, Reply};
use crate::services::acl::{self, Filter};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeAclsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = DescribeAclsResponse::default();
    let filter = Filter {
        resource_type: req.resource_type_filter,
        resource_name: req.resource_name_filter.map(|s| s.to_string()),
        pattern_type: req.pattern_type_filter,
        principal: req.principal_filter.map(|s| s.to_string()),
        host: req.host_filter.map(|s| s.to_string()),
        operation: req.operation,
        permission: req.permission_type,
    };
    let refusal = if !ctx.broker.authorizer.enabled() {
        Some((
            ResponseError::SecurityDisabled.code(),
            "No Authorizer is configured".to_string(),
        ))
    } else if !ctx.allowed_cluster(acl::op::DESCRIBE) {
        Some((
            ResponseError::ClusterAuthorizationFailed.code(),
            String::new(),
        ))
    } else {
        filter
            .check()
            .err()
            .map(|m| (ResponseError::InvalidRequest.code(), m))
    };
    if let Some((code, msg)) = refusal {
        resp.error_code = code;
        resp.error_message = (!msg.is_empty()).then(|| str_bytes(msg));
        return ctx.respond(&resp);
    }
    // Sorted by resource, so bindings of one resource pattern are adjacent.
    for a in ctx.broker.authorizer.describe(&filter) {
        let same = resp
            .resources
            .last()
            .is_some_and(|r: &DescribeAclsResource| {
                r.resource_type == a.resource_type
                    && r.resource_name.as_str() == a.resource_name
                    && r.pattern_type == a.pattern_type
            });
        if !same {
            let mut r = DescribeAclsResource::default();
            r.resource_type = a.resource_type;
            r.resource_name = str_bytes(a.resource_name.clone());
            r.pattern_type = a.pattern_type;
            resp.resources.push(r);
        }
        let mut d = AclDescription::default();
        d.principal = str_bytes(a.principal);
        d.host = str_bytes(a.host);
        d.operation = a.operation;
        d.permission_type = a.permission;
        if let Some(r) = resp.resources.last_mut() {
            r.acls.push(d);
        }
    }
    ctx.respond(&resp)
}
