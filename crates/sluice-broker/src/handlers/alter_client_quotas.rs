//! AlterClientQuotas (key 49), v0-1: sets or removes `producer_byte_rate` and
//! `consumer_byte_rate` of user / client-id entities (`kafka-configs.sh --alter
//! --entity-type users|clients`), durably before the answer (`quotas`). Each entry is
//! answered on its own: an entity type other than user and client-id, an unknown key, a
//! refused one (`request_percentage`, `controller_mutation_rate`) or a value that is not a
//! whole positive number gets INVALID_REQUEST with the reason, and is not applied. Needs
//! ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED), as in Kafka.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};

use super::{str_bytes, Ctx, Reply};
use crate::services::acl;
use crate::services::quotas::{self, EntityPart, QuotaOp};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: AlterClientQuotasRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let authorized = ctx.allowed_cluster(acl::op::ALTER_CONFIGS);
    let mut resp = AlterClientQuotasResponse::default();
    let mut changes = Vec::new();
    for entry in &req.entries {
        let mut out = EntryData::default();
        out.error_message = None;
        out.entity = entry
            .entity
            .iter()
            .map(|e| {
                let mut d = EntityData::default();
                d.entity_type = e.entity_type.clone();
                d.entity_name = e.entity_name.clone();
                d
            })
            .collect();
        match check(entry, authorized) {
            Ok(change) => changes.push((resp.entries.len(), change)),
            Err((code, message)) => {
                out.error_code = code;
                out.error_message = Some(str_bytes(message));
            }
        }
        resp.entries.push(out);
    }
    if req.validate_only || changes.is_empty() {
        return ctx.respond(&resp);
    }
    let (slots, changes): (Vec<usize>, Vec<_>) = changes.into_iter().unzip();
    let written = ctx.blocking(move |b| b.quotas.alter(&changes)).await;
    if let Some(message) = match written {
        Some(Ok(())) => None,
        Some(Err(e)) => Some(e.to_string()),
        None => Some("the change could not be run".to_string()),
    } {
        tracing::warn!(error = %message, "client quota change not applied");
        for i in slots {
            resp.entries[i].error_code = ResponseError::UnknownServerError.code();
            resp.entries[i].error_message = Some(str_bytes(message.clone()));
        }
    }
    ctx.respond(&resp)
}

type Change = (Vec<EntityPart>, Vec<QuotaOp>);

/// One entry as a change to apply, or its error.
fn check(
    entry: &kafka_protocol::messages::alter_client_quotas_request::EntryData,
    authorized: bool,
) -> Result<Change, (i16, String)> {
    if !authorized {
        return Err((
            ResponseError::ClusterAuthorizationFailed.code(),
            "Not authorized to alter client quotas.".into(),
        ));
    }
    let invalid = |m: String| (ResponseError::InvalidRequest.code(), m);
    let entity: Vec<EntityPart> = entry
        .entity
        .iter()
        .map(|e| EntityPart {
            entity_type: e.entity_type.to_string(),
            name: e.entity_name.as_ref().map(|n| n.to_string()),
        })
        .collect();
    let entity = quotas::check_entity(&entity).map_err(invalid)?;
    let ops: Vec<QuotaOp> = entry
        .ops
        .iter()
        .map(|o| QuotaOp {
            key: o.key.to_string(),
            value: o.value,
            remove: o.remove,
        })
        .collect();
    for op in &ops {
        quotas::check_op(op).map_err(invalid)?;
    }
    Ok((entity, ops))
}
