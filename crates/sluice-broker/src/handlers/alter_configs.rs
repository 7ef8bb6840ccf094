//! AlterConfigs (key 33), v0-2: replaces a topic's whole set of overrides (settings not named
//! go back to their defaults). Broker settings are static and cannot be altered.
//! [`apply_topic_configs`] is shared with IncrementalAlterConfigs. With an authorizer, each
//! resource needs ALTER_CONFIGS on its topic, or on the cluster for a broker
//! (`describe_configs::config_refusal`), checked before anything else.

use kafka_protocol::error::ResponseError;
use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use super::describe_configs::{config_refusal, RESOURCE_BROKER, RESOURCE_TOPIC};
use super::{str_bytes, Ctx, Reply};
use crate::services::topics::AdminError;
use crate::{config::topic, services::acl, Broker};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: AlterConfigsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let refusals: Vec<Option<(i16, String)>> = req
        .resources
        .iter()
        .map(|r| {
            config_refusal(
                &ctx,
                acl::op::ALTER_CONFIGS,
                r.resource_type,
                &r.resource_name,
            )
        })
        .collect();
    ctx.respond_blocking(move |b| {
        let mut resp = AlterConfigsResponse::default();
        for (res, refused) in req.resources.into_iter().zip(refusals) {
            let mut r = AlterConfigsResourceResponse::default();
            r.resource_type = res.resource_type;
            r.resource_name = res.resource_name.clone();
            let overrides: BTreeMap<String, String> = res
                .configs
                .iter()
                .filter_map(|c| {
                    c.value
                        .as_ref()
                        .map(|v| (c.name.to_string(), v.to_string()))
                })
                .collect();
            let outcome = match (refused, res.resource_type) {
                (Some((code, message)), _) => Err(AdminError::new(code, message)),
                (None, RESOURCE_TOPIC) => {
                    apply_topic_configs(b, &res.resource_name, |_| Ok(overrides), req.validate_only)
                }
                (None, other) => Err(resource_error(other)),
            };
            if let Err(e) = outcome {
                r.error_code = e.code;
                r.error_message = Some(str_bytes(e.message));
            }
            resp.responses.push(r);
        }
        resp
    })
    .await
}

pub(crate) fn resource_error(resource_type: i8) -> AdminError {
    if resource_type == RESOURCE_BROKER {
        AdminError::new(
            ResponseError::InvalidRequest.code(),
            "Broker configs are static in Sluice; set them at start.",
        )
    } else {
        AdminError::new(
            ResponseError::InvalidRequest.code(),
            format!("Unsupported resource type {resource_type}"),
        )
    }
}

/// Computes a topic's new overrides from its current ones with `change`, validates every
/// value, and applies them durably unless `validate_only`. Blocking.
pub(crate) fn apply_topic_configs(
    b: &Broker,
    topic: &str,
    change: impl FnOnce(&BTreeMap<String, String>) -> Result<BTreeMap<String, String>, AdminError>,
    validate_only: bool,
) -> Result<(), AdminError> {
    if let Some(refusal) =
        crate::services::topics::internal_topic_refusal(topic, "alter the configs of")
    {
        return Err(refusal);
    }
    let current = b.topics.get(topic).ok_or_else(|| {
        AdminError::new(
            ResponseError::UnknownTopicOrPartition.code(),
            format!("Topic '{topic}' does not exist."),
        )
    })?;
    let next = change(&current.configs)?;
    for (k, v) in &next {
        topic::validate(k, v)
            .map_err(|m| AdminError::new(ResponseError::InvalidConfig.code(), m))?;
    }
    topic::check_internal(&next, &b.config)
        .map_err(|m| AdminError::new(ResponseError::InvalidConfig.code(), m))?;
    if validate_only {
        return Ok(());
    }
    b.topics.set_configs(topic, next, &b.log, &b.config)
}
