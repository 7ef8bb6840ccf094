//! Fuzzing of request decoding, on stable Rust (proptest-driven), bounded so it runs in the
//! test command.
//!
//! What it holds: for every API and version in the broker's handler table
//! (`sluice_broker::api_table`, advertised or not), header parsing and body
//! decoding of arbitrary bytes, and of mutated valid requests (bytes flipped, cut, inserted,
//! counts and lengths overwritten with hostile values), never panic and never abort; a body
//! that decodes also re-encodes and decodes to the same value (the decoder accepts nothing it
//! cannot represent). Every row of the table needs a seed here (`default_kind` panics for a
//! key without one), so a new API cannot be served unfuzzed. The allocation guard is installed as in the broker binary, so hostile
//! array counts exercise the same path they take in production.
//!
//! `SLUICE_FUZZ_CASES` raises the number of cases per property (default 256) for a longer run.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use proptest::prelude::*;
use sluice_broker::api_table::{apis, Keyed};
use sluice_protocol::alloc_guard::GuardedAlloc;
use sluice_protocol::header;

#[global_allocator]
static ALLOC: GuardedAlloc = GuardedAlloc;

fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Every (api key, version) pair the broker serves.
fn served() -> Vec<(ApiKey, i16)> {
    apis()
        .iter()
        .flat_map(|a| (a.min_version..=a.max_version).map(move |v| (a.key, v)))
        .collect()
}

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A request of each served API with some fields filled, so mutations reach nested
/// structures (arrays, strings, record bytes), not just empty bodies.
fn seed(key: ApiKey) -> RequestKind {
    match key {
        ApiKey::Produce => {
            let mut p = produce_request::PartitionProduceData::default();
            p.index = 3;
            p.records = Some(Bytes::from_static(&[0u8; 70]));
            let mut t = produce_request::TopicProduceData::default();
            t.name = TopicName(name("topic"));
            t.partition_data = vec![p];
            let mut r = ProduceRequest::default();
            r.acks = -1;
            r.timeout_ms = 30_000;
            r.topic_data = vec![t];
            RequestKind::Produce(r)
        }
        ApiKey::Fetch => {
            let mut p = fetch_request::FetchPartition::default();
            p.partition = 1;
            p.fetch_offset = 42;
            p.partition_max_bytes = 1 << 20;
            let mut t = fetch_request::FetchTopic::default();
            t.topic = TopicName(name("topic"));
            t.partitions = vec![p];
            let mut r = FetchRequest::default();
            r.max_bytes = 1 << 20;
            r.topics = vec![t];
            RequestKind::Fetch(r)
        }
        ApiKey::ListOffsets => {
            let mut p = list_offsets_request::ListOffsetsPartition::default();
            p.timestamp = -1;
            let mut t = list_offsets_request::ListOffsetsTopic::default();
            t.name = TopicName(name("topic"));
            t.partitions = vec![p];
            let mut r = ListOffsetsRequest::default();
            r.topics = vec![t];
            RequestKind::ListOffsets(r)
        }
        ApiKey::OffsetForLeaderEpoch => {
            let mut p = offset_for_leader_epoch_request::OffsetForLeaderPartition::default();
            p.current_leader_epoch = -1;
            let mut t = offset_for_leader_epoch_request::OffsetForLeaderTopic::default();
            t.topic = TopicName(name("topic"));
            t.partitions = vec![p];
            let mut r = OffsetForLeaderEpochRequest::default();
            r.replica_id = BrokerId(-1);
            r.topics = vec![t];
            RequestKind::OffsetForLeaderEpoch(r)
        }
        ApiKey::Metadata => {
            let mut t = metadata_request::MetadataRequestTopic::default();
            t.name = Some(TopicName(name("topic")));
            let mut r = MetadataRequest::default();
            r.topics = Some(vec![t]);
            RequestKind::Metadata(r)
        }
        ApiKey::JoinGroup => {
            let mut p = join_group_request::JoinGroupRequestProtocol::default();
            p.name = name("range");
            p.metadata = Bytes::from_static(b"\x00\x01\x00\x00\x00\x01\x00\x05topic");
            let mut r = JoinGroupRequest::default();
            r.group_id = GroupId(name("group"));
            r.session_timeout_ms = 10_000;
            r.protocol_type = name("consumer");
            r.protocols = vec![p];
            RequestKind::JoinGroup(r)
        }
        ApiKey::CreateTopics => {
            let mut t = create_topics_request::CreatableTopic::default();
            t.name = TopicName(name("topic"));
            t.num_partitions = 3;
            t.replication_factor = 1;
            let mut c = create_topics_request::CreatableTopicConfig::default();
            c.name = name("retention.ms");
            c.value = Some(name("1000"));
            t.configs = vec![c];
            let mut r = CreateTopicsRequest::default();
            r.topics = vec![t];
            RequestKind::CreateTopics(r)
        }
        ApiKey::SaslAuthenticate => {
            let mut r = SaslAuthenticateRequest::default();
            r.auth_bytes = Bytes::from_static(b"n,,n=user,r=nonce");
            RequestKind::SaslAuthenticate(r)
        }
        ApiKey::AlterUserScramCredentials => {
            let mut u = alter_user_scram_credentials_request::ScramCredentialUpsertion::default();
            u.name = name("alice");
            u.mechanism = 2;
            u.iterations = 4096;
            u.salt = Bytes::from_static(b"salt");
            u.salted_password = Bytes::from_static(&[7u8; 64]);
            let mut r = AlterUserScramCredentialsRequest::default();
            r.upsertions = vec![u];
            RequestKind::AlterUserScramCredentials(r)
        }
        ApiKey::CreateAcls => {
            let mut c = kafka_protocol::messages::create_acls_request::AclCreation::default();
            c.resource_type = 2;
            c.resource_name = StrBytes::from_static_str("topic");
            c.resource_pattern_type = 3;
            c.principal = StrBytes::from_static_str("User:alice");
            c.host = StrBytes::from_static_str("*");
            c.operation = 4;
            c.permission_type = 3;
            let mut r = kafka_protocol::messages::CreateAclsRequest::default();
            r.creations = vec![c];
            RequestKind::CreateAcls(r)
        }
        ApiKey::DeleteAcls => {
            let mut f = kafka_protocol::messages::delete_acls_request::DeleteAclsFilter::default();
            f.resource_type_filter = 1;
            f.pattern_type_filter = 1;
            f.operation = 1;
            f.permission_type = 1;
            let mut r = kafka_protocol::messages::DeleteAclsRequest::default();
            r.filters = vec![f];
            RequestKind::DeleteAcls(r)
        }
        ApiKey::AlterClientQuotas => {
            use kafka_protocol::messages::alter_client_quotas_request as acq;
            let mut e = acq::EntityData::default();
            e.entity_type = StrBytes::from_static_str("user");
            e.entity_name = Some(StrBytes::from_static_str("alice"));
            let mut o = acq::OpData::default();
            o.key = StrBytes::from_static_str("producer_byte_rate");
            o.value = 1024.0;
            let mut entry = acq::EntryData::default();
            entry.entity = vec![e];
            entry.ops = vec![o];
            let mut r = kafka_protocol::messages::AlterClientQuotasRequest::default();
            r.entries = vec![entry];
            RequestKind::AlterClientQuotas(r)
        }
        other => default_kind(other),
    }
}

/// The default (empty) request of a served API.
fn default_kind(key: ApiKey) -> RequestKind {
    match key {
        ApiKey::Produce => RequestKind::Produce(Default::default()),
        ApiKey::Fetch => RequestKind::Fetch(Default::default()),
        ApiKey::ListOffsets => RequestKind::ListOffsets(Default::default()),
        ApiKey::Metadata => RequestKind::Metadata(Default::default()),
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(Default::default()),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(Default::default()),
        ApiKey::JoinGroup => RequestKind::JoinGroup(Default::default()),
        ApiKey::SyncGroup => RequestKind::SyncGroup(Default::default()),
        ApiKey::Heartbeat => RequestKind::Heartbeat(Default::default()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(Default::default()),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(Default::default()),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(Default::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(Default::default()),
        ApiKey::ListGroups => RequestKind::ListGroups(Default::default()),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(Default::default()),
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(Default::default()),
        ApiKey::ConsumerGroupHeartbeat => RequestKind::ConsumerGroupHeartbeat(Default::default()),
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(Default::default()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(Default::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(Default::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(Default::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(Default::default()),
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(Default::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(Default::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(Default::default()),
        ApiKey::CreatePartitions => RequestKind::CreatePartitions(Default::default()),
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(Default::default()),
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(Default::default()),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(Default::default()),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(Default::default()),
        ApiKey::DescribeUserScramCredentials => {
            RequestKind::DescribeUserScramCredentials(Default::default())
        }
        ApiKey::AlterUserScramCredentials => {
            RequestKind::AlterUserScramCredentials(Default::default())
        }
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(Default::default()),
        ApiKey::CreateAcls => RequestKind::CreateAcls(Default::default()),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(Default::default()),
        ApiKey::AddPartitionsToTxn => RequestKind::AddPartitionsToTxn(Default::default()),
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(Default::default()),
        ApiKey::EndTxn => RequestKind::EndTxn(Default::default()),
        ApiKey::DescribeClientQuotas => RequestKind::DescribeClientQuotas(Default::default()),
        ApiKey::AlterClientQuotas => RequestKind::AlterClientQuotas(Default::default()),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(Default::default()),
        ApiKey::DescribeProducers => RequestKind::DescribeProducers(Default::default()),
        ApiKey::DescribeTransactions => RequestKind::DescribeTransactions(Default::default()),
        ApiKey::ListTransactions => RequestKind::ListTransactions(Default::default()),
        other => panic!("{other:?} is in the handler table but has no fuzz seed; add it here"),
    }
}

/// The seed's body at `version`, if the seed can be encoded there (some fields only exist
/// at some versions; then the empty request is used).
fn seed_body(key: ApiKey, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    if seed(key).encode(&mut out, version).is_ok() {
        return out.freeze();
    }
    let mut out = BytesMut::new();
    default_kind(key)
        .encode(&mut out, version)
        .expect("a default request encodes at every served version");
    out.freeze()
}

/// One change to a valid body.
#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: usize,
        bits: u8,
    },
    Cut {
        at: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    /// Overwrites 4 bytes with a hostile count or length.
    Count {
        at: usize,
        value: i32,
    },
    /// Overwrites one byte with a varint continuation (compact counts in flexible versions).
    Varint {
        at: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let hostile = prop_oneof![
        Just(i32::MAX),
        Just(i32::MIN),
        Just(-1),
        Just(-2),
        Just(0),
        Just(0x7fff),
        Just(1_000_000_000),
        any::<i32>()
    ];
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(at, bits)| Mutation::Flip { at, bits }),
        any::<usize>().prop_map(|at| Mutation::Cut { at }),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), hostile).prop_map(|(at, value)| Mutation::Count { at, value }),
        any::<usize>().prop_map(|at| Mutation::Varint { at }),
    ]
}

fn apply(body: &Bytes, mutations: &[Mutation]) -> Bytes {
    let mut b = body.to_vec();
    for m in mutations {
        let n = b.len().max(1);
        match m {
            Mutation::Flip { at, bits } => {
                if let Some(x) = b.get_mut(at % n) {
                    *x ^= bits;
                }
            }
            Mutation::Cut { at } => b.truncate(at % n),
            Mutation::Insert { at, bytes } => {
                let at = (at % n).min(b.len());
                b.splice(at..at, bytes.iter().copied());
            }
            Mutation::Count { at, value } => {
                let at = at % n;
                for (i, x) in value.to_be_bytes().iter().enumerate() {
                    if let Some(slot) = b.get_mut(at + i) {
                        *slot = *x;
                    }
                }
            }
            Mutation::Varint { at } => {
                if let Some(x) = b.get_mut(at % n) {
                    *x |= 0x80;
                }
            }
        }
    }
    Bytes::from(b)
}

/// Decodes a body as the broker does; when it decodes, it must survive a re-encode and
/// decode to the same value.
fn check_body(key: ApiKey, version: i16, body: Bytes) -> Result<(), TestCaseError> {
    let mut input = body;
    let Ok(decoded) = RequestKind::decode(key, &mut input, version) else {
        return Ok(());
    };
    // kafka-protocol keeps unknown tags as i32 and re-encodes only the non-negative ones
    // (while still counting every one), so a tag of 2^31 or more decodes but cannot
    // round-trip. The broker never re-encodes a request, so for it such a tag is only an
    // unknown tagged field, skipped as Kafka skips it; the decode above is what must hold.
    if format!("{decoded:?}").contains("unknown_tagged_fields: {-") {
        return Ok(());
    }
    let mut again = BytesMut::new();
    if decoded.encode(&mut again, version).is_err() {
        // Values the encoder refuses (e.g. a field that only exists at other versions set
        // by tagged data) are fine to refuse later; the point is that decode did not panic.
        return Ok(());
    }
    let redecoded = RequestKind::decode(key, &mut again.freeze(), version).map_err(|e| {
        TestCaseError::fail(format!(
            "{key:?} v{version}: re-encoded body does not decode: {e}"
        ))
    })?;
    prop_assert_eq!(format!("{decoded:?}"), format!("{redecoded:?}"));
    Ok(())
}

fn api_and_version() -> impl Strategy<Value = (ApiKey, i16)> {
    let all = served();
    (0..all.len()).prop_map(move |i| all[i])
}

proptest! {
    #![proptest_config(config())]

    // Goal: arbitrary frame bodies never panic the header parser.
    #[test]
    fn header_parse_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = header::parse(Bytes::from(bytes), &Keyed);
    }

    // Goal: a valid header followed by arbitrary bytes never panics any body decoder.
    #[test]
    fn arbitrary_bodies_never_panic(
        (key, version) in api_and_version(),
        bytes in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        check_body(key, version, Bytes::from(bytes))?;
    }

    // Goal: mutated valid requests (flips, cuts, inserts, hostile counts) never panic, and
    // whatever still decodes round-trips.
    #[test]
    fn mutated_requests_never_panic(
        (key, version) in api_and_version(),
        mutations in prop::collection::vec(mutation(), 1..6),
    ) {
        let body = seed_body(key, version);
        check_body(key, version, apply(&body, &mutations))?;
    }

    // Goal: the whole frame path (header then body) on mutated frames never panics.
    #[test]
    fn mutated_frames_never_panic(
        (key, version) in api_and_version(),
        correlation_id in any::<i32>(),
        mutations in prop::collection::vec(mutation(), 0..4),
    ) {
        let mut frame = BytesMut::new();
        frame.put_i16(key as i16);
        frame.put_i16(version);
        frame.put_i32(correlation_id);
        let mut h = RequestHeader::default();
        h.request_api_key = key as i16;
        h.request_api_version = version;
        h.correlation_id = correlation_id;
        h.client_id = Some(name("fuzz"));
        let mut rest = BytesMut::new();
        use kafka_protocol::protocol::Encodable;
        h.encode(&mut rest, key.request_header_version(version)).unwrap();
        frame.put_slice(&rest[8..]);
        frame.put_slice(&seed_body(key, version));
        let mutated = apply(&frame.freeze(), &mutations);
        if let Ok(req) = header::parse(mutated, &Keyed) {
            check_body(req.api_key, req.header.request_api_version, req.body)?;
        }
    }
}

// Goal: every served API and version has a seed that encodes and decodes back (so the
// mutation properties start from real requests, not from errors).
#[test]
fn every_served_version_has_a_valid_seed() {
    for (key, version) in served() {
        let body = seed_body(key, version);
        let mut b = body.clone();
        RequestKind::decode(key, &mut b, version)
            .unwrap_or_else(|e| panic!("{key:?} v{version} seed does not decode: {e}"));
        assert!(b.is_empty(), "{key:?} v{version}: seed leaves bytes");
    }
}

/// The case CI found: a tag varint whose fifth byte still has the continuation bit set
/// decodes to tag 2^31. Decoding must not panic, and the round-trip check must not
/// mistake the library's i32 tag map for a decoder bug.
#[test]
fn tag_of_two_to_the_31_decodes() {
    let mut body = vec![1u8, 0x80, 0x80, 0x80, 0x80, 0x88, 0];
    body.extend_from_slice(&[0; 40]);
    let decoded = RequestKind::decode(ApiKey::ListGroups, &mut Bytes::from(body.clone()), 3)
        .expect("an unknown tagged field is skipped, not refused");
    assert!(format!("{decoded:?}").contains("-2147483648"));
    check_body(ApiKey::ListGroups, 3, Bytes::from(body)).expect("round-trip check");
}
