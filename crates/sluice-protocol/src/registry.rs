//! The API registry: which Kafka APIs Sluice serves and at which versions. ApiVersions
//! responses are built from this table, and the broker's dispatcher must have a handler for
//! every entry (a broker test checks that). Advertise only what is encoded correctly:
//! over-advertising breaks clients worse than under-advertising.

use kafka_protocol::messages::ApiKey;

/// One supported API and its inclusive version range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiSupport {
    pub key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
}

const fn api(key: ApiKey, min_version: i16, max_version: i16) -> ApiSupport {
    ApiSupport {
        key,
        min_version,
        max_version,
    }
}

/// Every API Sluice answers. Floors follow KIP-896 (Kafka 4.x); ceilings are Kafka 4.1's, so
/// the Java 4.x client, librdkafka 2.0 and later, franz-go, Sarama and kafka-python 3 all find
/// an overlap.
pub const SUPPORTED: &[ApiSupport] = &[
    api(ApiKey::Produce, 3, 13),
    api(ApiKey::Fetch, 4, 18),
    api(ApiKey::ListOffsets, 1, 10),
    // KIP-320 position validation: one leader epoch (0) per partition. v2 is the KIP-896
    // floor and librdkafka's ceiling; the Java client sends v4.
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::FindCoordinator, 0, 6),
    // Classic consumer groups. OffsetCommit/OffsetFetch v10 (topic ids) are not served yet.
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::OffsetCommit, 2, 9),
    api(ApiKey::OffsetFetch, 1, 9),
    // v6 changes unknown groups from Dead to GROUP_ID_NOT_FOUND; we answer the older way.
    api(ApiKey::DescribeGroups, 0, 5),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::OffsetDelete, 0, 0),
    // KIP-848 consumer groups (`group.protocol=consumer`). v1 adds client-generated member
    // ids and regex subscriptions (resolved on the broker, RE2 syntax).
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    // Idempotent producers. v6 (KIP-939 two-phase commit) is not served.
    api(ApiKey::InitProducerId, 0, 5),
    // Transactions V1 (docs/transactions.md §1); TxnOffsetCommit v3+ carries the group
    // member (KIP-447), v5 knows TRANSACTION_ABORTABLE (KIP-890); AddPartitionsToTxn v4+ is
    // the batched broker form with `verify_only`.
    api(ApiKey::AddPartitionsToTxn, 0, 5),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 4),
    api(ApiKey::TxnOffsetCommit, 0, 5),
    api(ApiKey::ApiVersions, 0, 4),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::DescribeCluster, 0, 2),
    // SASL (KIP-43, KIP-152): answered by the connection's authentication gate; v0 of the
    // handshake means raw tokens follow. SCRAM credentials (KIP-554).
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    // ACLs (KIP-290 prefixed patterns from v1; v0 is not in the protocol crate).
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    // Client quotas (KIP-546).
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    // Transaction admin (KIP-664; `kafka-transactions.sh`): ListTransactions v1 adds the
    // duration filter (KIP-994), v2 the transactional id pattern (KIP-1152).
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 2),
];

/// The advertised range for `key`, if Sluice serves it.
pub fn lookup(key: ApiKey) -> Option<ApiSupport> {
    SUPPORTED.iter().copied().find(|a| a.key == key)
}

/// True when `version` of `key` is advertised.
pub fn is_supported(key: ApiKey, version: i16) -> bool {
    lookup(key).is_some_and(|a| (a.min_version..=a.max_version).contains(&version))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: we never advertise a version the codec cannot encode or decode.
    #[test]
    fn ranges_within_codec_ranges() {
        for a in SUPPORTED {
            let codec = a.key.valid_versions();
            assert!(a.min_version <= a.max_version, "{:?}", a.key);
            assert!(
                a.min_version >= codec.min && a.max_version <= codec.max,
                "{:?} beyond codec {codec}",
                a.key
            );
        }
    }

    // Goal: each API appears once.
    #[test]
    fn no_duplicates() {
        for (i, a) in SUPPORTED.iter().enumerate() {
            assert!(
                SUPPORTED[i + 1..].iter().all(|b| b.key != a.key),
                "{:?} twice",
                a.key
            );
        }
    }
}
