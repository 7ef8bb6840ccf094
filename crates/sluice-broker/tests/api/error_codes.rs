//! The fast tier for error codes no other in-process test asserts: each request below is
//! built to earn one Kafka error code, sent over a real socket to an in-process broker, and
//! the code (and, where it matters, that nothing was written) is checked. Produce refusals
//! (MESSAGE_TOO_LARGE, CORRUPT_MESSAGE, INVALID_RECORD, INVALID_REQUIRED_ACKS,
//! UNSUPPORTED_COMPRESSION_TYPE, UNKNOWN_PRODUCER_ID), topic ids (UNKNOWN_TOPIC_ID), leader
//! epochs (FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH), CreateTopics'
//! INVALID_REPLICATION_FACTOR, the classic group codes INCONSISTENT_GROUP_PROTOCOL,
//! GROUP_MAX_SIZE_REACHED and OFFSET_METADATA_TOO_LARGE, and KIP-848's
//! UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID and STALE_MEMBER_EPOCH.

use crate::common::requests::{create_topic, list_offsets_at};
use crate::common::{
    batch, topic_name, with_attributes, Client, InProcessBroker, Writer, NO_PRODUCER,
};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse, GroupId,
    JoinGroupRequest, JoinGroupResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ProduceRequest, ProduceResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice_record::{Attributes, Compression};

const NONE: i16 = 0;

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// Produce of `records` to partition 0 of `topic` at `version` with `acks`: the
/// partition's error code.
fn produce(client: &mut Client, version: i16, acks: i16, topic: &str, records: Bytes) -> i16 {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(records);
    let mut td = TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = acks;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    let resp: ProduceResponse = client.call(ApiKey::Produce, version, &req);
    resp.responses[0].partition_responses[0].error_code
}

/// The high watermark of partition 0: what was written.
fn end_offset(client: &mut Client, topic: &str) -> i64 {
    let (code, offset) = list_offsets_at(client, topic, 0, -1);
    assert_eq!(code, NONE);
    offset
}

// Goal: every Produce refusal of a bad batch or request answers Kafka's code for it and
// writes nothing.
#[test]
fn produce_refusals_have_kafkas_codes() {
    let broker = InProcessBroker::start_with(|c| c.set("message.max.bytes", "1024").unwrap());
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "p", 1), NONE);
    let good = batch(NO_PRODUCER, &[b"a", b"b"]);
    let cases: Vec<(&str, i16, i16, Bytes, ResponseError)> = vec![
        (
            "a batch over message.max.bytes",
            9,
            -1,
            batch(NO_PRODUCER, &[&[7u8; 2000]]),
            ResponseError::MessageTooLarge,
        ),
        (
            "a record byte changed after the CRC was computed",
            9,
            -1,
            {
                let mut b = good.to_vec();
                let last = b.len() - 2;
                b[last] ^= 0xff;
                Bytes::from(b)
            },
            ResponseError::CorruptMessage,
        ),
        (
            "a control batch from a client",
            9,
            -1,
            with_attributes(&good, Attributes::CONTROL),
            ResponseError::InvalidRecord,
        ),
        (
            "acks=2",
            9,
            2,
            good.clone(),
            ResponseError::InvalidRequiredAcks,
        ),
        (
            "zstd below Produce v7",
            6,
            -1,
            with_attributes(&good, Attributes(0).with_compression(Compression::Zstd)),
            ResponseError::UnsupportedCompressionType,
        ),
        (
            "a compression codec that does not exist",
            9,
            -1,
            with_attributes(&good, Attributes(6)), // ids 5-7 name no codec
            ResponseError::UnsupportedCompressionType,
        ),
        (
            "a producer id this broker never issued",
            9,
            -1,
            batch(
                Writer {
                    producer_id: 424_242,
                    epoch: 0,
                    base_sequence: 0,
                },
                &[b"x"],
            ),
            ResponseError::UnknownProducerId,
        ),
    ];
    for (what, version, acks, records, expected) in cases {
        let code = produce(&mut client, version, acks, "p", records);
        assert_eq!(code, expected.code(), "{what}: got {code}");
    }
    assert_eq!(end_offset(&mut client, "p"), 0, "nothing was written");
    assert_eq!(produce(&mut client, 9, -1, "p", good), NONE);
    assert_eq!(end_offset(&mut client, "p"), 2);
}

// Goal: a topic id the broker does not know is UNKNOWN_TOPIC_ID for Fetch (v13+, by id).
#[test]
fn fetch_by_unknown_topic_id() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    let mut fp = FetchPartition::default();
    fp.partition = 0;
    fp.partition_max_bytes = 1 << 20;
    let mut ft = FetchTopic::default();
    ft.topic_id = uuid::Uuid::from_u128(0x5151_5151);
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = (-1).into();
    req.max_bytes = i32::MAX;
    req.session_epoch = -1;
    req.topics = vec![ft];
    for version in [13, 18] {
        let resp: FetchResponse = client.call(ApiKey::Fetch, version, &req);
        assert_eq!(
            resp.responses[0].partitions[0].error_code,
            ResponseError::UnknownTopicId.code(),
            "v{version}"
        );
    }
}

// Goal: a client's current leader epoch other than the single node's 0 is fenced (older)
// or unknown (newer), as Kafka's checkCurrentLeaderEpoch answers; -1 (none) is accepted.
#[test]
fn leader_epochs_other_than_the_nodes_are_refused() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "e", 1), NONE);
    let ask = |client: &mut Client, current: i32| {
        let mut p = OffsetForLeaderPartition::default();
        p.partition = 0;
        p.current_leader_epoch = current;
        p.leader_epoch = 0;
        let mut t = OffsetForLeaderTopic::default();
        t.topic = topic_name("e");
        t.partitions = vec![p];
        let mut req = OffsetForLeaderEpochRequest::default();
        req.replica_id = (-1).into();
        req.topics = vec![t];
        let resp: OffsetForLeaderEpochResponse = client.call(ApiKey::OffsetForLeaderEpoch, 4, &req);
        resp.topics[0].partitions[0].error_code
    };
    assert_eq!(
        ask(&mut client, 3),
        ResponseError::UnknownLeaderEpoch.code()
    );
    assert_eq!(
        ask(&mut client, -5),
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(ask(&mut client, -1), NONE);
    assert_eq!(ask(&mut client, 0), NONE);
}

// Goal: a replication factor above 1 on a single node is INVALID_REPLICATION_FACTOR, and
// the topic is not created.
#[test]
fn replication_factor_above_one_is_refused() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    let mut t = CreatableTopic::default();
    t.name = topic_name("r3");
    t.num_partitions = 1;
    t.replication_factor = 3;
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 30_000;
    req.topics = vec![t];
    let resp: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &req);
    assert_eq!(
        resp.topics[0].error_code,
        ResponseError::InvalidReplicationFactor.code()
    );
    assert_eq!(
        list_offsets_at(&mut client, "r3", 0, -1).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

/// JoinGroup v3 (no member id round trip) of a new member with `protocol_type`.
fn join(client: &mut Client, group: &str, protocol_type: &str) -> JoinGroupResponse {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let mut req = JoinGroupRequest::default();
    req.group_id = GroupId(s(group));
    req.session_timeout_ms = 10_000;
    req.rebalance_timeout_ms = 10_000;
    req.member_id = s("");
    req.protocol_type = s(protocol_type);
    req.protocols = vec![p];
    client.call(ApiKey::JoinGroup, 3, &req)
}

// Goal: a member whose protocol type differs from the group's is
// INCONSISTENT_GROUP_PROTOCOL; a member past group.max.size is GROUP_MAX_SIZE_REACHED.
#[test]
fn group_joins_refused_by_protocol_and_size() {
    let broker = InProcessBroker::start_with(|c| {
        c.set("group.initial.rebalance.delay.ms", "0").unwrap();
        c.set("group.max.size", "1").unwrap();
    });
    let mut first = broker.client();
    let joined = join(&mut first, "g", "consumer");
    assert_eq!(joined.error_code, NONE);
    let mut other = broker.client();
    assert_eq!(
        join(&mut other, "g", "connect").error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );
    assert_eq!(
        join(&mut other, "g", "consumer").error_code,
        ResponseError::GroupMaxSizeReached.code()
    );
}

// Goal: commit metadata longer than offset.metadata.max.bytes is refused per partition
// with OFFSET_METADATA_TOO_LARGE; metadata at the limit is accepted.
#[test]
fn oversized_commit_metadata_is_refused() {
    let broker = InProcessBroker::start_with(|c| {
        c.set("offset.metadata.max.bytes", "16").unwrap();
    });
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "o", 1), NONE);
    let commit = |client: &mut Client, metadata: &str| {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = 0;
        p.committed_offset = 5;
        p.committed_metadata = Some(s(metadata));
        let mut t = OffsetCommitRequestTopic::default();
        t.name = topic_name("o");
        t.partitions = vec![p];
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(s("standalone"));
        req.generation_id_or_member_epoch = -1;
        req.member_id = s("");
        req.topics = vec![t];
        let resp: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 8, &req);
        resp.topics[0].partitions[0].error_code
    };
    assert_eq!(
        commit(&mut client, &"m".repeat(17)),
        ResponseError::OffsetMetadataTooLarge.code()
    );
    assert_eq!(commit(&mut client, &"m".repeat(16)), NONE);
}

/// ConsumerGroupHeartbeat v1 (client-made member ids) of `member` with `instance`.
fn cg_heartbeat(
    client: &mut Client,
    member: &str,
    instance: &str,
    epoch: i32,
) -> kafka_protocol::messages::ConsumerGroupHeartbeatResponse {
    let mut r = kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default();
    r.group_id = GroupId(s("k"));
    r.member_id = s(member);
    r.instance_id = Some(s(instance));
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = if epoch == 0 { 10_000 } else { -1 };
    if epoch == 0 {
        r.subscribed_topic_names = Some(vec![topic_name("k")]);
        r.topic_partitions = Some(Vec::new());
    }
    client.call(ApiKey::ConsumerGroupHeartbeat, 1, &r)
}

// Goal: KIP-848 static membership and epochs: a second incarnation of an instance id whose
// first is still active is UNRELEASED_INSTANCE_ID; a member heartbeating under another
// member's instance id is FENCED_INSTANCE_ID; an OffsetCommit (v9) at an epoch other than
// the member's is STALE_MEMBER_EPOCH, and at its epoch is accepted.
#[test]
fn kip848_instance_ids_and_member_epochs() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "k", 1), NONE);
    let a = cg_heartbeat(&mut client, "member-a", "instance-a", 0);
    assert_eq!(a.error_code, NONE);
    let epoch = a.member_epoch;
    assert!(epoch > 0);
    assert_eq!(
        cg_heartbeat(&mut client, "member-b", "instance-a", 0).error_code,
        ResponseError::UnreleasedInstanceId.code()
    );
    assert_eq!(
        cg_heartbeat(&mut client, "member-a", "instance-z", epoch).error_code,
        ResponseError::FencedInstanceId.code()
    );
    let commit = |client: &mut Client, epoch: i32| {
        let mut p = OffsetCommitRequestPartition::default();
        p.partition_index = 0;
        p.committed_offset = 0;
        let mut t = OffsetCommitRequestTopic::default();
        t.name = topic_name("k");
        t.partitions = vec![p];
        let mut req = OffsetCommitRequest::default();
        req.group_id = GroupId(s("k"));
        req.generation_id_or_member_epoch = epoch;
        req.member_id = s("member-a");
        req.topics = vec![t];
        let resp: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 9, &req);
        resp.topics[0].partitions[0].error_code
    };
    assert_eq!(
        commit(&mut client, epoch + 5),
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(commit(&mut client, epoch), NONE);
}
