//! The handler table: every Kafka API Sluice serves, one row each: its key, the versions
//! served, whether ApiVersions advertises it, and its handler. It is the single source:
//! header parsing refuses what it does not list, ApiVersions lists its advertised rows,
//! [`super::start`] dispatches through it, and the per-API metric series are its rows
//! (`metrics`). Adding an API means adding one row here (and a fuzz seed in
//! `tests/fuzz_requests.rs`, which fails until there is one).
//!
//! Guarantees, checked when the crate compiles (`const` evaluation): no key twice, and
//! every key small enough for the dense index [`index`] gives O(1) dispatch with.
//!
//! Floors follow KIP-896 (Kafka 4.x); ceilings are Kafka 4.1's, so the Java 4.x client,
//! librdkafka 2.0 and later, franz-go, Sarama and kafka-python 3 all find an overlap. Each
//! handler file states its version range in its header comment. Advertise only what is
//! encoded correctly: over-advertising breaks clients worse than under-advertising.

use std::sync::OnceLock;

use kafka_protocol::messages::ApiKey;
use sluice_protocol::registry::{ApiSupport, ApiTable};

use super::*;

/// How a request of one API is run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Route {
    /// Its own task: the handler decodes, works and encodes.
    Task(fn(Ctx, Bytes) -> Pending),
    /// Appends queued in `start` itself (arrival order), the writer waits on the call.
    Produce,
    /// Decoded in `start`, run by the connection's writer.
    Fetch,
    /// Answered by the connection's SASL gate (`crate::net::sasl`) in arrival order, because it
    /// changes the connection's authentication state; never dispatched here.
    SaslGate,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Handler {
    pub api: ApiSupport,
    pub(crate) route: Route,
}

/// Listed in ApiVersions.
const ADVERTISED: bool = true;

const fn row(
    key: ApiKey,
    min_version: i16,
    max_version: i16,
    advertised: bool,
    route: Route,
) -> Handler {
    Handler {
        api: ApiSupport::new(key, min_version, max_version, advertised),
        route,
    }
}

/// A row that ApiVersions lists from `advertised_min_version`, below the versions served.
const fn row_listed_from(advertised_min_version: i16, handler: Handler) -> Handler {
    Handler {
        api: ApiSupport {
            advertised_min_version,
            ..handler.api
        },
        route: handler.route,
    }
}

/// A handler module's `handle(ctx, body)`, run as its own task.
macro_rules! task {
    ($module:ident) => {
        Route::Task(|ctx, body| Box::pin($module::handle(ctx, body)))
    };
}

/// Every API Sluice answers.
pub const HANDLERS: &[Handler] = &[
    // Listed from v0 as Kafka 4.x lists it, so librdkafka before 2.12 keeps compressing
    // (KAFKA-18659); v0-2 are refused as Kafka refuses them: the connection is closed.
    row_listed_from(0, row(ApiKey::Produce, 3, 13, ADVERTISED, Route::Produce)),
    row(ApiKey::Fetch, 4, 18, ADVERTISED, Route::Fetch),
    row(ApiKey::ListOffsets, 1, 11, ADVERTISED, task!(list_offsets)),
    // KIP-320 position validation: one leader epoch (0) per partition. v2 is the KIP-896
    // floor and librdkafka's ceiling; the Java client sends v4.
    row(
        ApiKey::OffsetForLeaderEpoch,
        2,
        4,
        ADVERTISED,
        task!(offset_for_leader_epoch),
    ),
    row(ApiKey::Metadata, 0, 13, ADVERTISED, task!(metadata)),
    row(
        ApiKey::FindCoordinator,
        0,
        6,
        ADVERTISED,
        task!(find_coordinator),
    ),
    // Classic consumer groups. OffsetCommit/OffsetFetch v10 name topics by id; they, ListOffsets
    // v11 and DeleteGroups v3 are beyond the protocol crate (`sluice_protocol::adapted`).
    row(ApiKey::JoinGroup, 0, 9, ADVERTISED, task!(join_group)),
    row(ApiKey::SyncGroup, 0, 5, ADVERTISED, task!(sync_group)),
    row(ApiKey::Heartbeat, 0, 4, ADVERTISED, task!(heartbeat)),
    row(ApiKey::LeaveGroup, 0, 5, ADVERTISED, task!(leave_group)),
    row(
        ApiKey::OffsetCommit,
        2,
        10,
        ADVERTISED,
        task!(offset_commit),
    ),
    row(ApiKey::OffsetFetch, 1, 10, ADVERTISED, task!(offset_fetch)),
    // v6: an unknown group gets GROUP_ID_NOT_FOUND (Dead with no error before).
    row(
        ApiKey::DescribeGroups,
        0,
        6,
        ADVERTISED,
        task!(describe_groups),
    ),
    row(ApiKey::ListGroups, 0, 5, ADVERTISED, task!(list_groups)),
    row(ApiKey::DeleteGroups, 0, 3, ADVERTISED, task!(delete_groups)),
    row(ApiKey::OffsetDelete, 0, 0, ADVERTISED, task!(offset_delete)),
    // KIP-848 consumer groups (`group.protocol=consumer`). v1 adds client-generated member
    // ids and regex subscriptions (resolved on the broker, RE2 syntax).
    row(
        ApiKey::ConsumerGroupHeartbeat,
        0,
        1,
        ADVERTISED,
        task!(consumer_group_heartbeat),
    ),
    row(
        ApiKey::ConsumerGroupDescribe,
        0,
        1,
        ADVERTISED,
        task!(consumer_group_describe),
    ),
    // Idempotent producers. v6 (KIP-939 two-phase commit) is not served.
    row(
        ApiKey::InitProducerId,
        0,
        5,
        ADVERTISED,
        task!(init_producer_id),
    ),
    // Transactions V1 and V2 (docs/transactions.md §1, §14: EndTxn v5 bumps the epoch at
    // every end; Produce v12+ and TxnOffsetCommit v5+ add their partitions). TxnOffsetCommit
    // v3+ carries the group member (KIP-447), v4+ knows TRANSACTION_ABORTABLE (KIP-890), v6
    // names topics by id (KIP-1319, `sluice_protocol::adapted`); AddPartitionsToTxn v4+ is
    // the batched broker form with `verify_only`.
    row(
        ApiKey::AddPartitionsToTxn,
        0,
        5,
        ADVERTISED,
        task!(add_partitions_to_txn),
    ),
    row(
        ApiKey::AddOffsetsToTxn,
        0,
        4,
        ADVERTISED,
        task!(add_offsets_to_txn),
    ),
    row(ApiKey::EndTxn, 0, 5, ADVERTISED, task!(end_txn)),
    row(
        ApiKey::TxnOffsetCommit,
        0,
        6,
        ADVERTISED,
        task!(txn_offset_commit),
    ),
    row(ApiKey::ApiVersions, 0, 5, ADVERTISED, task!(api_versions)),
    row(ApiKey::CreateTopics, 2, 7, ADVERTISED, task!(create_topics)),
    row(ApiKey::DeleteTopics, 1, 6, ADVERTISED, task!(delete_topics)),
    row(
        ApiKey::DeleteRecords,
        0,
        2,
        ADVERTISED,
        task!(delete_records),
    ),
    row(
        ApiKey::DescribeConfigs,
        1,
        4,
        ADVERTISED,
        task!(describe_configs),
    ),
    row(ApiKey::AlterConfigs, 0, 2, ADVERTISED, task!(alter_configs)),
    row(
        ApiKey::CreatePartitions,
        0,
        3,
        ADVERTISED,
        task!(create_partitions),
    ),
    row(
        ApiKey::IncrementalAlterConfigs,
        0,
        1,
        ADVERTISED,
        task!(incremental_alter_configs),
    ),
    row(
        ApiKey::DescribeCluster,
        0,
        2,
        ADVERTISED,
        task!(describe_cluster),
    ),
    // SASL (KIP-43, KIP-152): answered by the connection's authentication gate; v0 of the
    // handshake means raw tokens follow. SCRAM credentials (KIP-554).
    row(ApiKey::SaslHandshake, 0, 1, ADVERTISED, Route::SaslGate),
    row(ApiKey::SaslAuthenticate, 0, 2, ADVERTISED, Route::SaslGate),
    row(
        ApiKey::DescribeUserScramCredentials,
        0,
        0,
        ADVERTISED,
        task!(describe_user_scram_credentials),
    ),
    row(
        ApiKey::AlterUserScramCredentials,
        0,
        0,
        ADVERTISED,
        task!(alter_user_scram_credentials),
    ),
    // ACLs (KIP-290 prefixed patterns from v1; v0 is not in the protocol crate).
    row(ApiKey::DescribeAcls, 1, 3, ADVERTISED, task!(describe_acls)),
    row(ApiKey::CreateAcls, 1, 3, ADVERTISED, task!(create_acls)),
    row(ApiKey::DeleteAcls, 1, 3, ADVERTISED, task!(delete_acls)),
    // Client quotas (KIP-546).
    row(
        ApiKey::DescribeClientQuotas,
        0,
        1,
        ADVERTISED,
        task!(describe_client_quotas),
    ),
    row(
        ApiKey::AlterClientQuotas,
        0,
        1,
        ADVERTISED,
        task!(alter_client_quotas),
    ),
    // Transaction admin (KIP-664; `kafka-transactions.sh`): ListTransactions v1 adds the
    // duration filter (KIP-994), v2 the transactional id pattern (KIP-1152).
    row(
        ApiKey::DescribeProducers,
        0,
        0,
        ADVERTISED,
        task!(describe_producers),
    ),
    row(
        ApiKey::DescribeTransactions,
        0,
        0,
        ADVERTISED,
        task!(describe_transactions),
    ),
    row(
        ApiKey::ListTransactions,
        0,
        2,
        ADVERTISED,
        task!(list_transactions),
    ),
    // Admin reads: partition sizes (`kafka-log-dirs.sh`; Kafka's v5 is not in the protocol
    // crate); KIP-1142 config resources; KIP-966 paged topic descriptions (the Java admin's
    // `describeTopics`).
    row(
        ApiKey::DescribeLogDirs,
        1,
        4,
        ADVERTISED,
        task!(describe_log_dirs),
    ),
    row(
        ApiKey::ListConfigResources,
        0,
        1,
        ADVERTISED,
        task!(list_config_resources),
    ),
    row(
        ApiKey::DescribeTopicPartitions,
        0,
        0,
        ADVERTISED,
        task!(describe_topic_partitions),
    ),
    // Delegation tokens (KIP-48, KIP-373; `delegation_tokens`): Kafka 4.4's ranges.
    row(
        ApiKey::CreateDelegationToken,
        1,
        3,
        ADVERTISED,
        task!(create_delegation_token),
    ),
    row(
        ApiKey::RenewDelegationToken,
        1,
        2,
        ADVERTISED,
        task!(renew_delegation_token),
    ),
    row(
        ApiKey::ExpireDelegationToken,
        1,
        2,
        ADVERTISED,
        task!(expire_delegation_token),
    ),
    row(
        ApiKey::DescribeDelegationToken,
        1,
        3,
        ADVERTISED,
        task!(describe_delegation_token),
    ),
];

/// One past the largest API key the dense index can hold.
const INDEX_KEYS: usize = 128;
/// Index entry of a key with no row.
const NO_ROW: u8 = u8::MAX;

/// API key to row of [`HANDLERS`]; built (and the table checked) at compile time.
const INDEX: [u8; INDEX_KEYS] = build_index();

const fn build_index() -> [u8; INDEX_KEYS] {
    assert!(
        HANDLERS.len() < NO_ROW as usize,
        "table larger than the index"
    );
    let mut index = [NO_ROW; INDEX_KEYS];
    let mut i = 0;
    while i < HANDLERS.len() {
        let key = HANDLERS[i].api.key as i16;
        assert!(
            key >= 0 && (key as usize) < INDEX_KEYS,
            "API key beyond the index"
        );
        assert!(index[key as usize] == NO_ROW, "an API key has two rows");
        index[key as usize] = i as u8;
        i += 1;
    }
    index
}

/// The row index of `api_key` (as on the wire) in [`HANDLERS`], if it is served.
pub fn index(api_key: i16) -> Option<usize> {
    let i = *INDEX.get(usize::try_from(api_key).ok()?)?;
    (i != NO_ROW).then_some(i as usize)
}

/// The row of `key`, if it is served.
pub fn handler(key: ApiKey) -> Option<&'static Handler> {
    index(key as i16).map(|i| &HANDLERS[i])
}

/// The table as header parsing reads it: a key's row through [`INDEX`], O(1) per request.
#[derive(Debug, Clone, Copy)]
pub struct Keyed;

impl ApiTable for Keyed {
    fn row(&self, key: ApiKey) -> Option<ApiSupport> {
        handler(key).map(|h| h.api)
    }
}

/// The table as ApiVersions reads it (every row in order), built on first use. (Not a `const`
/// array: its length would be a type-level constant that depends on the handlers, whose
/// types depend on this list through ApiVersions, a cycle the compiler refuses.)
pub fn apis() -> &'static [ApiSupport] {
    static APIS: OnceLock<Box<[ApiSupport]>> = OnceLock::new();
    APIS.get_or_init(|| HANDLERS.iter().map(|h| h.api).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: we never serve a version the codec cannot encode or decode, nor a key twice.
    #[test]
    fn table_is_within_the_codec() {
        sluice_protocol::registry::check(apis()).unwrap();
    }

    // Goal: the index, the keyed table header parsing reads and the derived list agree
    // with the table row for row, and keys without a row (or off the index) have none.
    #[test]
    fn index_and_list_follow_the_table() {
        for (i, h) in HANDLERS.iter().enumerate() {
            assert_eq!(index(h.api.key as i16), Some(i));
            assert_eq!(apis()[i], h.api);
            assert_eq!(Keyed.row(h.api.key), Some(h.api));
        }
        for key in (0..INDEX_KEYS as i16).filter_map(|k| ApiKey::try_from(k).ok()) {
            assert_eq!(Keyed.row(key), apis().row(key), "{key:?}");
        }
        let served = (0..INDEX_KEYS as i16)
            .filter(|&k| index(k).is_some())
            .count();
        assert_eq!(served, HANDLERS.len());
        assert_eq!(index(-1), None);
        assert_eq!(index(i16::MAX), None);
    }

    // Goal: only Produce and Fetch take the writer-run paths and only the SASL APIs are
    // left to the gate; every other row is a task.
    #[test]
    fn routes_are_the_expected_kind() {
        for h in HANDLERS {
            let kind = match h.route {
                Route::Produce => ApiKey::Produce,
                Route::Fetch => ApiKey::Fetch,
                Route::SaslGate => {
                    assert!(matches!(
                        h.api.key,
                        ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
                    ));
                    continue;
                }
                Route::Task(_) => {
                    assert!(!matches!(h.api.key, ApiKey::Produce | ApiKey::Fetch));
                    continue;
                }
            };
            assert_eq!(kind, h.api.key);
        }
    }
}
