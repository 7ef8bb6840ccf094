//! ApiVersions (key 18), v0-4: the advertised rows of the handler table (`table`). Versions we do
//! not support never reach here: the connection answers them with the v0 fallback.

use bytes::Bytes;
use kafka_protocol::messages::ApiVersionsRequest;
use sluice_protocol::codec;

use super::{Ctx, Reply};
use crate::error_code;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let _req: ApiVersionsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let resp = codec::api_versions_body(error_code::NONE, super::table::apis());
    ctx.respond(&resp)
}
