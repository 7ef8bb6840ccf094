//! DescribeUserScramCredentials (key 50), v0: which SCRAM mechanisms (and iteration counts)
//! each user has; never salts or keys.
//!
//! No user list (or an empty one) describes every user. A named user without credentials
//! gets RESOURCE_NOT_FOUND; a user named twice gets DUPLICATE_RESOURCE, as in Kafka.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};

use super::{str_bytes, Ctx, Reply};
use crate::services::acl;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeUserScramCredentialsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // Kafka: DESCRIBE on the cluster.
    if !ctx.allowed_cluster(acl::op::DESCRIBE) {
        let mut resp = DescribeUserScramCredentialsResponse::default();
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let users = ctx.broker.scram.snapshot();
    let named: Vec<String> = req
        .users
        .unwrap_or_default()
        .into_iter()
        .map(|u| u.name.to_string())
        .collect();
    let wanted: Vec<String> = match named.is_empty() {
        true => users.keys().cloned().collect(),
        false => named.clone(),
    };
    let mut results = Vec::with_capacity(wanted.len());
    let mut done: Vec<&str> = Vec::new();
    for user in &wanted {
        if done.contains(&user.as_str()) {
            continue;
        }
        done.push(user);
        let mut r = DescribeUserScramCredentialsResult::default();
        r.user = str_bytes(user.clone());
        if named.iter().filter(|n| *n == user).count() > 1 {
            r.error_code = ResponseError::DuplicateResource.code();
            r.error_message = Some(str_bytes(
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            ));
        } else if let Some(mechs) = users.get(user) {
            r.credential_infos = mechs
                .iter()
                .map(|(m, c)| {
                    let mut i = CredentialInfo::default();
                    i.mechanism = m.type_id();
                    i.iterations = c.iterations;
                    i
                })
                .collect();
        } else {
            r.error_code = ResponseError::ResourceNotFound.code();
            r.error_message = Some(str_bytes(
                "Attempt to describe a user credential that does not exist",
            ));
        }
        results.push(r);
    }
    let mut resp = DescribeUserScramCredentialsResponse::default();
    resp.results = results;
    ctx.respond(&resp)
}
