//! ApiVersions (key 18), v0-5: the advertised rows of the handler table (`table`) and, from
//! v3, the feature levels this broker supports and has finalized (KIP-584), which clients
//! read to pick a protocol (the Java client turns Transactions V2 on at
//! `transaction.version` 2, so a level is listed only once everything it implies is served).
//! Versions we do not support never reach here: the connection answers them with the v0
//! fallback. What differs from Kafka 4.4, and why: `docs/api-versions.md`.
//!
//! As Kafka 4.4 answers: a v3+ request whose client software name or version is not
//! Kafka's `[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?`, or a v5 request naming only one of
//! cluster id and node id, gets INVALID_REQUEST; a v5 request naming another cluster or
//! node gets REBOOTSTRAP_REQUIRED (KIP-1242: the client reached the wrong broker and must
//! bootstrap again). Both with no API list, on a connection that stays open. Supported
//! feature ranges starting at level 0 are left out below v4, where older Java clients
//! refuse them (KAFKA-17492).

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::ApiVersionsResponse;
use sluice_protocol::adapted::ApiVersionsRequestV5;
use sluice_protocol::codec;

use super::{str_bytes, Ctx, Reply};
use crate::error_code;

/// One feature: its name, the levels this build supports, and the level it finalizes.
struct Feature {
    name: &'static str,
    min_level: i16,
    max_level: i16,
    finalized_level: i16,
}

/// The features this broker serves. `group.version` 1: KIP-848 consumer groups
/// (ConsumerGroupHeartbeat / ConsumerGroupDescribe). `transaction.version` 2: Transactions
/// V2 (KIP-890 part 2: Produce v12+ and TxnOffsetCommit v5+ add their partitions, EndTxn v5
/// bumps the epoch; docs/transactions.md §14); the V1 protocol stays served for clients
/// that keep to it. Not listed: `share.version` and `streams.version` (no share or streams
/// groups), `metadata.version` and `kraft.version` (no KRaft metadata log).
const FEATURES: &[Feature] = &[
    Feature {
        name: "group.version",
        min_level: 0,
        max_level: 1,
        finalized_level: 1,
    },
    Feature {
        name: "transaction.version",
        min_level: 0,
        max_level: 2,
        finalized_level: 2,
    },
];

/// The epoch of the finalized levels above. Clients keep the levels of the highest epoch
/// they have seen, across reconnects (the Java client ignores -1), so it must grow whenever
/// [`FEATURES`] changes in a release: bump it with every change to the table.
const FINALIZED_FEATURES_EPOCH: i64 = 2;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: ApiVersionsRequestV5 = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    if let Some(error) = refusal(&ctx, &req) {
        let mut resp = ApiVersionsResponse::default();
        resp.error_code = error.code();
        return ctx.respond(&sluice_protocol::adapted::Versioned(resp));
    }
    let mut resp = codec::api_versions_body(error_code::NONE, super::table::apis());
    add_features(&mut resp, ctx.version);
    ctx.respond(&sluice_protocol::adapted::Versioned(resp))
}

/// Why a request is refused, if it is (see the module comment).
fn refusal(ctx: &Ctx, req: &ApiVersionsRequestV5) -> Option<ResponseError> {
    let r = &req.request;
    if ctx.version >= 3
        && !(software_token_ok(&r.client_software_name)
            && software_token_ok(&r.client_software_version))
    {
        return Some(ResponseError::InvalidRequest);
    }
    if ctx.version < 5 {
        return None;
    }
    match (&req.cluster_id, req.node_id) {
        (None, -1) => None,
        (None, _) | (Some(_), -1) => Some(ResponseError::InvalidRequest),
        (Some(cluster), node) => {
            let here =
                cluster.as_str() == ctx.broker.topics.cluster_id && node == ctx.broker.node_id();
            (!here).then_some(ResponseError::RebootstrapRequired)
        }
    }
}

/// Kafka's rule for a client software name or version: letters, digits, '-' and '.', not
/// starting or ending with '-' or '.', and not empty.
fn software_token_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: &u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && b.first().is_some_and(edge)
        && b.last().is_some_and(edge)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'.')
}

/// Lists [`FEATURES`] (encoded only at v3+, as tagged fields).
fn add_features(resp: &mut ApiVersionsResponse, version: i16) {
    for f in FEATURES {
        let mut supported = SupportedFeatureKey::default();
        supported.name = str_bytes(f.name.to_string());
        supported.min_version = f.min_level;
        supported.max_version = f.max_level;
        if version >= 4 || f.min_level > 0 {
            resp.supported_features.push(supported);
        }
        debug_assert!((f.min_level..=f.max_level).contains(&f.finalized_level));
        let mut finalized = FinalizedFeatureKey::default();
        finalized.name = str_bytes(f.name.to_string());
        finalized.min_version_level = f.finalized_level;
        finalized.max_version_level = f.finalized_level;
        resp.finalized_features.push(finalized);
    }
    resp.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
}
