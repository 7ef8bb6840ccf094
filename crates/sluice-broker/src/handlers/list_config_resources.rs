//! ListConfigResources (key 74), v0-1 (KIP-1142; v0 was ListClientMetricsResources): the
//! config resources DescribeConfigs can be asked about, by type. Needs DESCRIBE_CONFIGS on
//! the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise), as Kafka.
//!
//! The types are Kafka's: v0 knows CLIENT_METRICS only; v1 TOPIC, BROKER, BROKER_LOGGER,
//! CLIENT_METRICS and GROUP. An empty list asks for every type of the version; a type outside
//! them is refused with UNSUPPORTED_VERSION and no resources, as Kafka refuses it. Listed:
//! every topic (the internal ones too, which DescribeConfigs describes) and this broker's node
//! id. BROKER_LOGGER, CLIENT_METRICS and GROUP list nothing: Sluice has no logger, client
//! metrics or group config resources (DescribeConfigs refuses the first two types; where
//! Kafka lists the node id as a BROKER_LOGGER resource, a tool following it would fail here).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{ListConfigResourcesRequest, ListConfigResourcesResponse};

use super::describe_configs::{RESOURCE_BROKER, RESOURCE_BROKER_LOGGER, RESOURCE_TOPIC};
use super::metadata::all_topic_names;
use super::{str_bytes, Ctx, Reply};
use crate::services::acl;

/// Kafka's CLIENT_METRICS config resource type.
const RESOURCE_CLIENT_METRICS: i8 = 16;
/// Kafka's GROUP config resource type.
const RESOURCE_GROUP: i8 = 32;

/// The types a request at `version` may ask for.
fn supported_types(version: i16) -> &'static [i8] {
    match version {
        0 => &[RESOURCE_CLIENT_METRICS],
        _ => &[
            RESOURCE_TOPIC,
            RESOURCE_BROKER,
            RESOURCE_BROKER_LOGGER,
            RESOURCE_CLIENT_METRICS,
            RESOURCE_GROUP,
        ],
    }
}

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: ListConfigResourcesRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = ListConfigResourcesResponse::default();
    if !ctx.allowed_cluster(acl::op::DESCRIBE_CONFIGS) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    let supported = supported_types(ctx.version);
    let wanted: Vec<i8> = match req.resource_types.is_empty() {
        true => supported.to_vec(),
        false => req.resource_types,
    };
    if wanted.iter().any(|t| !supported.contains(t)) {
        resp.error_code = ResponseError::UnsupportedVersion.code();
        return ctx.respond(&resp);
    }
    for resource_type in wanted {
        let names = match resource_type {
            RESOURCE_TOPIC => all_topic_names(&ctx),
            RESOURCE_BROKER => vec![ctx.broker.node_id().to_string()],
            _ => Vec::new(),
        };
        resp.config_resources
            .extend(names.into_iter().map(|name| resource(name, resource_type)));
    }
    ctx.respond(&resp)
}

fn resource(name: String, resource_type: i8) -> ConfigResource {
    let mut r = ConfigResource::default();
    r.resource_name = str_bytes(name);
    r.resource_type = resource_type;
    r
}
