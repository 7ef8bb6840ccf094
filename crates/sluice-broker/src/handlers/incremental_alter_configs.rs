//! IncrementalAlterConfigs (key 44), v0-1: SET, DELETE, APPEND and SUBTRACT on a topic's
//! overrides; the list operations apply only to list-typed settings (cleanup.policy). With
//! an authorizer, ALTER_CONFIGS on the topic or the cluster, as AlterConfigs.

use kafka_protocol::error::ResponseError;
use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use super::alter_configs::{apply_topic_configs, resource_error};
use super::describe_configs::{config_refusal, RESOURCE_TOPIC};
use super::{str_bytes, Ctx, Reply};
use crate::config::topic::{self, ConfigType};
use crate::services::topics::AdminError;
use crate::{services::acl, Broker};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: IncrementalAlterConfigsRequest = match ctx.decode(body) {
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
        let mut resp = IncrementalAlterConfigsResponse::default();
        for (res, refused) in req.resources.into_iter().zip(refusals) {
            let mut r = AlterConfigsResourceResponse::default();
            r.resource_type = res.resource_type;
            r.resource_name = res.resource_name.clone();
            if let Some((code, message)) = refused {
                r.error_code = code;
                r.error_message = Some(str_bytes(message));
            } else if let Err(e) = alter_one(
                b,
                res.resource_type,
                &res.resource_name,
                &res.configs,
                req.validate_only,
            ) {
                r.error_code = e.code;
                r.error_message = Some(str_bytes(e.message));
            }
            resp.responses.push(r);
        }
        resp
    })
    .await
}

fn alter_one(
    b: &Broker,
    resource_type: i8,
    name: &str,
    ops: &[AlterableConfig],
    validate_only: bool,
) -> Result<(), AdminError> {
    if resource_type != RESOURCE_TOPIC {
        return Err(resource_error(resource_type));
    }
    apply_topic_configs(b, name, |current| apply_ops(current, ops, b), validate_only)
}

fn apply_ops(
    current: &BTreeMap<String, String>,
    ops: &[AlterableConfig],
    b: &Broker,
) -> Result<BTreeMap<String, String>, AdminError> {
    let invalid = |m: String| AdminError::new(ResponseError::InvalidConfig.code(), m);
    let mut next = current.clone();
    for op in ops {
        let name = op.name.to_string();
        let def = topic::lookup(&name)
            .ok_or_else(|| invalid(format!("Unknown topic config name: {name}")))?;
        let value = op.value.as_ref().map(|v| v.to_string());
        match op.config_operation {
            SET => {
                let v = value.ok_or_else(|| invalid(format!("Null value for {name}")))?;
                next.insert(name, v);
            }
            DELETE => {
                next.remove(&name);
            }
            APPEND | SUBTRACT if def.kind == ConfigType::List => {
                let v = value.ok_or_else(|| invalid(format!("Null value for {name}")))?;
                let base = next
                    .get(&name)
                    .cloned()
                    .unwrap_or_else(|| topic::default_value(&name, &b.config).0);
                let mut items: Vec<String> = base
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    if op.config_operation == APPEND {
                        if !items.iter().any(|i| i == item) {
                            items.push(item.to_string());
                        }
                    } else {
                        items.retain(|i| i != item);
                    }
                }
                next.insert(name, items.join(","));
            }
            APPEND | SUBTRACT => {
                return Err(invalid(format!(
                    "{name} is not a list; APPEND and SUBTRACT need a list config"
                )))
            }
            other => {
                return Err(AdminError::new(
                    ResponseError::InvalidRequest.code(),
                    format!("Unknown config operation {other}"),
                ))
            }
        }
    }
    Ok(next)
}
