//! FindCoordinator (key 10), v0-6, including batched keys (v4+).
//!
//! This broker is the group coordinator for every group and the transaction coordinator
//! for every transactional id. Other key types (share groups) are INVALID_REQUEST.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::{str_bytes, Ctx, Reply};
use crate::{error_code, services::acl};

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
const BAD_KEY_TYPE: &str = "Unknown coordinator key type.";

/// (error code, message, node id, host, port) for one key.
fn answer(ctx: &Ctx, key_type: i8) -> (i16, Option<&'static str>, i32, String, i32) {
    if key_type == KEY_TYPE_GROUP || key_type == KEY_TYPE_TRANSACTION {
        (
            error_code::NONE,
            None,
            ctx.broker.node_id(),
            ctx.advertised().0,
            ctx.advertised().1,
        )
    } else {
        (
            ResponseError::InvalidRequest.code(),
            Some(BAD_KEY_TYPE),
            -1,
            String::new(),
            -1,
        )
    }
}

/// Kafka: DESCRIBE on the group, or on the transactional id.
fn authorized(ctx: &Ctx, key_type: i8, key: &str) -> bool {
    match key_type {
        KEY_TYPE_GROUP => ctx.allowed(acl::op::DESCRIBE, acl::resource::GROUP, key),
        _ => ctx.allowed(acl::op::DESCRIBE, acl::resource::TRANSACTIONAL_ID, key),
    }
}

fn denied_code(key_type: i8) -> i16 {
    match key_type {
        KEY_TYPE_GROUP => ResponseError::GroupAuthorizationFailed.code(),
        _ => ResponseError::TransactionalIdAuthorizationFailed.code(),
    }
}

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: FindCoordinatorRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = FindCoordinatorResponse::default();
    let key_type = if ctx.version >= 1 {
        req.key_type
    } else {
        KEY_TYPE_GROUP
    };
    let (code, message, node, host, port) = answer(&ctx, key_type);
    if ctx.version >= 4 {
        resp.coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let mut c = Coordinator::default();
                c.error_code = match authorized(&ctx, key_type, &key) {
                    true => code,
                    false => denied_code(key_type),
                };
                c.key = key;
                c.node_id = BrokerId(node);
                c.host = str_bytes(host.clone());
                c.port = port;
                c.error_message = message.map(str_bytes);
                c
            })
            .collect();
    } else {
        resp.error_code = match authorized(&ctx, key_type, &req.key) {
            true => code,
            false => denied_code(key_type),
        };
        resp.error_message = message.map(str_bytes);
        resp.node_id = BrokerId(node);
        resp.host = str_bytes(host);
        resp.port = port;
    }
    ctx.respond(&resp)
}
