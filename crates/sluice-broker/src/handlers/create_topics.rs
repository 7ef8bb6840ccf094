//! CreateTopics (key 19), v2-7: validates names, partition counts, replication (1 on a single
//! node) and configs; `validate_only` checks without creating. v5+ responses carry the
//! topic's effective configs, partition count and replication factor; v7 adds the topic id.

use kafka_protocol::error::ResponseError;
use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};
use uuid::Uuid;

use super::{str_bytes, Ctx, Reply};
use crate::services::topics::AdminError;
use crate::{config::topic, services::acl, Broker};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: CreateTopicsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // Kafka: CREATE on the cluster, or on each topic.
    let cluster_create = ctx.allowed_cluster(acl::op::CREATE);
    let denied: Vec<bool> = req
        .topics
        .iter()
        .map(|t| !cluster_create && !ctx.allowed(acl::op::CREATE, acl::resource::TOPIC, &t.name))
        .collect();
    ctx.respond_blocking(move |b| {
        let mut resp = CreateTopicsResponse::default();
        for (t, denied) in req.topics.into_iter().zip(denied) {
            let mut r = CreatableTopicResult::default();
            r.name = t.name.clone();
            r.num_partitions = -1;
            r.replication_factor = -1;
            let outcome = match denied {
                true => Err(AdminError::new(
                    ResponseError::TopicAuthorizationFailed.code(),
                    "Authorization failed.".to_string(),
                )),
                false => create_one(b, &t, req.validate_only),
            };
            match outcome {
                Ok((id, partitions, configs)) => {
                    r.topic_id = id;
                    r.num_partitions = partitions;
                    r.replication_factor = 1;
                    r.configs = Some(
                        topic::effective(&configs, &b.config)
                            .into_iter()
                            .map(|(name, value, source)| {
                                let mut c = CreatableTopicConfigs::default();
                                c.name = str_bytes(name);
                                c.value = Some(str_bytes(value));
                                c.config_source = source;
                                c
                            })
                            .collect(),
                    );
                }
                Err(e) => {
                    r.error_code = e.code;
                    r.error_message = Some(str_bytes(e.message));
                }
            }
            resp.topics.push(r);
        }
        resp
    })
    .await
}

type Created = (Uuid, i32, BTreeMap<String, String>);

fn create_one(
    b: &Broker,
    t: &kafka_protocol::messages::create_topics_request::CreatableTopic,
    validate_only: bool,
) -> Result<Created, AdminError> {
    let partitions = match (t.num_partitions, t.assignments.len()) {
        (-1, 0) => b.config.topic_defaults.partitions,
        (-1, n) => n as i32,
        (n, _) => n,
    };
    if !matches!(t.replication_factor, -1 | 1) {
        return Err(AdminError::new(
            ResponseError::InvalidReplicationFactor.code(),
            format!(
                "Replication factor {} is larger than the 1 available broker.",
                t.replication_factor
            ),
        ));
    }
    let node = b.node_id();
    if t.assignments
        .iter()
        .any(|a| a.broker_ids.iter().any(|id| id.0 != node) || a.broker_ids.len() != 1)
    {
        return Err(AdminError::new(
            ResponseError::InvalidReplicaAssignment.code(),
            format!("Replicas must be exactly [{node}]."),
        ));
    }
    let mut configs = BTreeMap::new();
    for c in &t.configs {
        let Some(v) = &c.value else {
            return Err(AdminError::new(
                ResponseError::InvalidConfig.code(),
                format!("Null value for config {}", c.name),
            ));
        };
        configs.insert(c.name.to_string(), v.to_string());
    }
    let name = t.name.0.to_string();
    topic::check_internal(&configs, &b.config)
        .map_err(|m| AdminError::new(ResponseError::InvalidConfig.code(), m))?;
    if validate_only {
        b.topics.check_create(&name, partitions, &configs)?;
        return Ok((Uuid::nil(), partitions, configs));
    }
    let topic = b
        .topics
        .create(&name, partitions, configs, &b.log, &b.config)?;
    Ok((
        topic.id,
        topic.partitions.len() as i32,
        topic.configs.clone(),
    ))
}
