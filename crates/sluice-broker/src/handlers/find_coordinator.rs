//! FindCoordinator (key 10), v0-6, including batched keys (v4+).
//!
//! Consumer groups and transactions are not built yet (issue 3), so every key is answered with
//! COORDINATOR_NOT_AVAILABLE, a retriable error that clients wait out. The API is advertised
//! anyway because librdkafka gates features on it: without FindCoordinator in ApiVersions it
//! silently disables LZ4 compression for every producer.

use bytes::Bytes;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};

use super::{str_bytes, Ctx, Reply};

const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const WHY: &str = "Sluice does not run a group or transaction coordinator yet.";

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: FindCoordinatorRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = FindCoordinatorResponse::default();
    if ctx.version >= 4 {
        resp.coordinators = req
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let mut c = Coordinator::default();
                c.key = key;
                c.node_id = BrokerId(-1);
                c.port = -1;
                c.error_code = COORDINATOR_NOT_AVAILABLE;
                c.error_message = Some(str_bytes(WHY));
                c
            })
            .collect();
    } else {
        resp.error_code = COORDINATOR_NOT_AVAILABLE;
        resp.error_message = Some(str_bytes(WHY));
        resp.node_id = BrokerId(-1);
        resp.port = -1;
    }
    ctx.respond(&resp)
}
