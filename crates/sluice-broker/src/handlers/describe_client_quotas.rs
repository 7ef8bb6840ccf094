//! DescribeClientQuotas (key 48), v0-1: the quota entities a filter matches, with their
//! values (`kafka-configs.sh --describe --entity-type users|clients`). Components match an
//! entity's user or client-id exactly, as `<default>`, or any; `strict` leaves out entities
//! with parts no component names (Kafka's semantics, `quotas::ClientQuotas::describe`).
//! Needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED); a malformed filter
//! is INVALID_REQUEST.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeClientQuotasResponse};

use super::{str_bytes, Ctx, Reply};
use crate::services::acl;
use crate::services::quotas::{self, Component};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeClientQuotasRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = DescribeClientQuotasResponse::default();
    resp.error_message = None;
    if !ctx.allowed_cluster(acl::op::DESCRIBE_CONFIGS) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        resp.error_message = Some(str_bytes("Not authorized to describe client quotas."));
        return ctx.respond(&resp);
    }
    let components = match filter(&req) {
        Ok(c) => c,
        Err(message) => {
            resp.error_code = ResponseError::InvalidRequest.code();
            resp.error_message = Some(str_bytes(message));
            return ctx.respond(&resp);
        }
    };
    let entries = ctx.broker.quotas.describe(&components, req.strict);
    resp.entries = Some(
        entries
            .into_iter()
            .map(|e| {
                let mut out = EntryData::default();
                out.entity = e
                    .entity
                    .into_iter()
                    .map(|p| {
                        let mut d = EntityData::default();
                        d.entity_type = str_bytes(p.entity_type);
                        d.entity_name = p.name.map(str_bytes);
                        d
                    })
                    .collect();
                out.values = e
                    .values
                    .into_iter()
                    .map(|(key, value)| {
                        let mut v = ValueData::default();
                        v.key = str_bytes(key);
                        v.value = value;
                        v
                    })
                    .collect();
                out
            })
            .collect(),
    );
    ctx.respond(&resp)
}

/// The request's components, or why they are malformed.
fn filter(req: &DescribeClientQuotasRequest) -> Result<Vec<Component>, String> {
    let mut out: Vec<Component> = Vec::with_capacity(req.components.len());
    for c in &req.components {
        let entity_type = c.entity_type.to_string();
        if entity_type != quotas::ENTITY_USER && entity_type != quotas::ENTITY_CLIENT_ID {
            return Err(format!("entity type {entity_type:?} is not supported"));
        }
        if out.iter().any(|o| o.entity_type == entity_type) {
            return Err(format!("duplicate filter component for {entity_type:?}"));
        }
        let name = c._match.as_ref().map(|m| m.to_string());
        match c.match_type {
            quotas::MATCH_EXACT if name.is_none() => {
                return Err("an exact match needs a name".into())
            }
            quotas::MATCH_EXACT | quotas::MATCH_DEFAULT | quotas::MATCH_ANY => {}
            other => return Err(format!("unknown match type {other}")),
        }
        out.push(Component {
            entity_type,
            match_type: c.match_type,
            name,
        });
    }
    Ok(out)
}
