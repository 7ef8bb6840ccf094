//! Requests of every API in the broker's handler table: a seed with some fields filled
//! (nested arrays, strings, record bytes) and the empty request, at any served version.
//! Shared by the decoder fuzzing (`fuzz_requests.rs`, which mutates them) and the
//! every-API test (`every_api.rs`, which sends them to an in-process broker).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sluice_broker::api_table::apis;
use sluice_protocol::adapted;

/// Every (api key, version) pair the broker serves.
pub fn served() -> Vec<(ApiKey, i16)> {
    apis()
        .iter()
        .flat_map(|a| (a.min_version..=a.max_version).map(move |v| (a.key, v)))
        .collect()
}

pub fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A request of each served API with some fields filled, so mutations reach nested
/// structures (arrays, strings, record bytes), not just empty bodies.
pub fn seed(key: ApiKey) -> RequestKind {
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
        ApiKey::DescribeTopicPartitions => {
            let mut t = describe_topic_partitions_request::TopicRequest::default();
            t.name = TopicName(name("topic"));
            let mut c = describe_topic_partitions_request::Cursor::default();
            c.topic_name = TopicName(name("topic"));
            c.partition_index = 1;
            let mut r = DescribeTopicPartitionsRequest::default();
            r.topics = vec![t];
            r.response_partition_limit = 1;
            r.cursor = Some(c);
            RequestKind::DescribeTopicPartitions(r)
        }
        ApiKey::DescribeLogDirs => {
            let mut t = describe_log_dirs_request::DescribableLogDirTopic::default();
            t.topic = TopicName(name("topic"));
            t.partitions = vec![0, 3];
            let mut r = DescribeLogDirsRequest::default();
            r.topics = Some(vec![t]);
            RequestKind::DescribeLogDirs(r)
        }
        ApiKey::ListConfigResources => {
            let mut r = ListConfigResourcesRequest::default();
            r.resource_types = vec![2, 4, 16];
            RequestKind::ListConfigResources(r)
        }
        ApiKey::CreateDelegationToken => {
            let mut renewer = create_delegation_token_request::CreatableRenewers::default();
            renewer.principal_type = name("User");
            renewer.principal_name = name("bob");
            let mut r = CreateDelegationTokenRequest::default();
            r.renewers = vec![renewer];
            r.max_lifetime_ms = 60_000;
            RequestKind::CreateDelegationToken(r)
        }
        ApiKey::RenewDelegationToken => {
            let mut r = RenewDelegationTokenRequest::default();
            r.hmac = Bytes::from_static(&[7u8; 64]);
            r.renew_period_ms = 1_000;
            RequestKind::RenewDelegationToken(r)
        }
        ApiKey::ExpireDelegationToken => {
            let mut r = ExpireDelegationTokenRequest::default();
            r.hmac = Bytes::from_static(&[7u8; 64]);
            r.expiry_time_period_ms = -1;
            RequestKind::ExpireDelegationToken(r)
        }
        ApiKey::DescribeDelegationToken => {
            let mut owner =
                describe_delegation_token_request::DescribeDelegationTokenOwner::default();
            owner.principal_type = name("User");
            owner.principal_name = name("alice");
            let mut r = DescribeDelegationTokenRequest::default();
            r.owners = Some(vec![owner]);
            RequestKind::DescribeDelegationToken(r)
        }
        other => default_kind(other),
    }
}

/// The default (empty) request of a served API.
pub fn default_kind(key: ApiKey) -> RequestKind {
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
        ApiKey::ListConfigResources => RequestKind::ListConfigResources(Default::default()),
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(Default::default()),
        ApiKey::DescribeTopicPartitions => RequestKind::DescribeTopicPartitions(Default::default()),
        ApiKey::CreateDelegationToken => RequestKind::CreateDelegationToken(Default::default()),
        ApiKey::RenewDelegationToken => RequestKind::RenewDelegationToken(Default::default()),
        ApiKey::ExpireDelegationToken => RequestKind::ExpireDelegationToken(Default::default()),
        ApiKey::DescribeDelegationToken => RequestKind::DescribeDelegationToken(Default::default()),
        other => panic!("{other:?} is in the handler table but has no fuzz seed; add it here"),
    }
}

/// The seed's body at `version`, if the seed can be encoded there (some fields only exist
/// at some versions; then the empty request is used).
pub fn seed_body(key: ApiKey, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    if adapted::encode_request(&seed(key), version, &mut out).is_ok() {
        return out.freeze();
    }
    let mut out = BytesMut::new();
    adapted::encode_request(&default_kind(key), version, &mut out)
        .expect("a default request encodes at every served version");
    out.freeze()
}
