//! DescribeCluster (key 60), v0-2: the cluster id and the one broker, which is also the
//! controller. Kafka refuses no one here; with `include_cluster_authorized_operations`
//! the answer carries the cluster operations the client may do (0 without DESCRIBE on the
//! cluster).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};

use super::{str_bytes, Ctx, Reply};
use crate::services::acl;

/// DescribeCluster endpoint type for brokers (v1+); 2 asks for controllers.
const ENDPOINT_BROKERS: i8 = 1;
/// Kafka's code 115 (the hand-typed 119 it replaces is INVALID_REGISTRATION).
const UNSUPPORTED_ENDPOINT_TYPE: i16 = ResponseError::UnsupportedEndpointType.code();

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeClusterRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let b = &ctx.broker;
    let mut resp = DescribeClusterResponse::default();
    resp.endpoint_type = req.endpoint_type;
    if ctx.version >= 1 && req.endpoint_type != ENDPOINT_BROKERS {
        resp.error_code = UNSUPPORTED_ENDPOINT_TYPE;
        resp.error_message = Some(str_bytes("Only broker endpoints are served."));
        return ctx.respond(&resp);
    }
    resp.cluster_id = str_bytes(b.topics.cluster_id.clone());
    resp.controller_id = BrokerId(b.node_id());
    resp.cluster_authorized_operations = match req.include_cluster_authorized_operations {
        false => i32::MIN,
        true if !ctx.allowed_cluster(acl::op::DESCRIBE) => 0,
        true => ctx.authorized_operations(
            acl::resource::CLUSTER,
            acl::CLUSTER_NAME,
            acl::supported::CLUSTER,
        ),
    };
    let mut broker = DescribeClusterBroker::default();
    broker.broker_id = BrokerId(b.node_id());
    let (host, port) = ctx.advertised();
    broker.host = str_bytes(host);
    broker.port = port;
    resp.brokers = vec![broker];
    ctx.respond(&resp)
}
