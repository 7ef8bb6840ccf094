//! ApiVersions (key 18), v0-4: the advertised rows of the handler table (`table`) and, from
//! v3, the feature levels this broker supports and has finalized (KIP-584), which clients
//! read to pick a protocol (the Java client turns Transactions V2 on at
//! `transaction.version` 2, so a level is listed only once everything it implies is served).
//! Versions we do not support never reach here: the connection answers them with the v0
//! fallback. What differs from Kafka 4.4, and why: `docs/api-versions.md`.

use bytes::Bytes;
use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse};
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
    let _req: ApiVersionsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = codec::api_versions_body(error_code::NONE, super::table::apis());
    add_features(&mut resp);
    ctx.respond(&resp)
}

/// Lists [`FEATURES`] (encoded only at v3+, as tagged fields).
fn add_features(resp: &mut ApiVersionsResponse) {
    for f in FEATURES {
        let mut supported = SupportedFeatureKey::default();
        supported.name = str_bytes(f.name.to_string());
        supported.min_version = f.min_level;
        supported.max_version = f.max_level;
        resp.supported_features.push(supported);
        debug_assert!((f.min_level..=f.max_level).contains(&f.finalized_level));
        let mut finalized = FinalizedFeatureKey::default();
        finalized.name = str_bytes(f.name.to_string());
        finalized.min_version_level = f.finalized_level;
        finalized.max_version_level = f.finalized_level;
        resp.finalized_features.push(finalized);
    }
    resp.finalized_features_epoch = FINALIZED_FEATURES_EPOCH;
}
