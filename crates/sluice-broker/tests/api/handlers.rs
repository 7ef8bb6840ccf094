//! The fast tier of the broker's tests: each API's main answers and error codes, checked
//! against a real `Server` in this process (loopback socket, real data directory, fsync on)
//! with a wire client, in well under a second per test. The integration suite
//! (`tests/integration`, real clients against a `sluice serve` process) stays the judge of
//! client compatibility; this tier is for checking a handler change in seconds.

use std::io::Write;

use crate::common::requests::{
    create_topic as create, fetch_partition, list_offsets_at as list_offset, produce_as,
    produce_values as produce,
};
use crate::common::{batch, topic_name, Client, InProcessBroker, NO_PRODUCER};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, DeleteTopicsRequest, DeleteTopicsResponse, FetchResponse,
    MetadataRequest, MetadataResponse,
};
use sluice_record::{stamp_base_offset, BatchHeader, Offset};

const NONE: i16 = 0;

fn metadata(client: &mut Client, names: &[&str]) -> MetadataResponse {
    let mut req = MetadataRequest::default();
    req.allow_auto_topic_creation = false;
    req.topics = Some(
        names
            .iter()
            .map(|n| {
                let mut t = MetadataRequestTopic::default();
                t.name = Some(topic_name(n));
                t
            })
            .collect(),
    );
    client.call(ApiKey::Metadata, 12, &req)
}

fn fetch(client: &mut Client, topic: &str, partition: i32, offset: i64) -> FetchResponse {
    fetch_partition(client, topic, partition, offset, 0)
}

// Goal: ApiVersions lists exactly the advertised rows of the handler table, with their
// ranges.
#[test]
fn api_versions_advertises_exactly_the_handler_table() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    let resp: ApiVersionsResponse = client.call(
        ApiKey::ApiVersions,
        3,
        &crate::common::api_versions_request(),
    );
    assert_eq!(resp.error_code, NONE);
    let advertised: Vec<_> = sluice_broker::api_table::apis()
        .iter()
        .filter(|a| a.advertised)
        .collect();
    assert_eq!(resp.api_keys.len(), advertised.len());
    for api in advertised {
        let advertised = resp
            .api_keys
            .iter()
            .find(|a| a.api_key == api.key as i16)
            .unwrap_or_else(|| panic!("{:?} is not advertised", api.key));
        assert_eq!(
            (advertised.min_version, advertised.max_version),
            (api.advertised_min_version, api.max_version),
            "{:?}",
            api.key
        );
    }
}

// Goal: Produce is listed from v0 (librdkafka before 2.12 compresses only when it is), but
// a Produce v2 request is refused as Kafka 4.x refuses it: the connection is closed, and
// nothing is stored.
#[test]
fn produce_v0_to_v2_are_listed_but_refused() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    let resp: ApiVersionsResponse = client.call(
        ApiKey::ApiVersions,
        3,
        &crate::common::api_versions_request(),
    );
    let produce = resp
        .api_keys
        .iter()
        .find(|a| a.api_key == ApiKey::Produce as i16)
        .expect("Produce is advertised");
    assert_eq!((produce.min_version, produce.max_version), (0, 13));
    // acks -1, timeout 1000 ms, one topic "t" with one partition 0 and an empty message set.
    let body = [
        0xff, 0xff, 0, 0, 3, 232, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    for version in 0..=2 {
        let mut refused = broker.client();
        let frame = refused.frame_body(ApiKey::Produce, version, &body);
        refused.stream.write_all(&frame).expect("send");
        assert!(
            refused.read_frame().is_none(),
            "Produce v{version} was answered"
        );
    }
    // The broker goes on serving everyone else.
    let again: ApiVersionsResponse = client.call(
        ApiKey::ApiVersions,
        3,
        &crate::common::api_versions_request(),
    );
    assert_eq!(again.error_code, NONE);
}

#[test]
fn topics_are_created_described_and_deleted() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create(&mut client, "orders", 3), NONE);
    assert_eq!(
        create(&mut client, "orders", 3),
        ResponseError::TopicAlreadyExists.code()
    );
    assert_eq!(
        create(&mut client, "bad/name", 1),
        ResponseError::InvalidTopicException.code()
    );
    assert_eq!(
        create(&mut client, "none", 0),
        ResponseError::InvalidPartitions.code()
    );

    let md = metadata(&mut client, &["orders", "missing"]);
    let orders = &md.topics[0];
    assert_eq!(orders.error_code, NONE);
    assert_eq!(orders.partitions.len(), 3);
    let node = md.brokers[0].node_id;
    assert!(orders.partitions.iter().all(|p| p.leader_id == node));
    assert_eq!(
        md.topics[1].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );

    let mut state = DeleteTopicState::default();
    state.name = Some(topic_name("orders"));
    let mut req = DeleteTopicsRequest::default();
    req.timeout_ms = 30_000;
    req.topics = vec![state];
    let resp: DeleteTopicsResponse = client.call(ApiKey::DeleteTopics, 6, &req);
    assert_eq!(resp.responses[0].error_code, NONE);
    let md = metadata(&mut client, &["orders"]);
    assert_eq!(
        md.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[test]
fn produced_batches_come_back_from_fetch_with_their_offsets() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create(&mut client, "t", 2), NONE);
    let first: [&[u8]; 3] = [b"a", b"bb", b"ccc"];
    assert_eq!(produce(&mut client, "t", 1, &first), (NONE, 0));
    assert_eq!(produce(&mut client, "t", 1, &[b"dddd"]), (NONE, 3));

    let resp = fetch(&mut client, "t", 1, 0);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, NONE);
    assert_eq!(p.high_watermark, 4);
    let records = p.records.clone().expect("records");
    let mut sent = batch(NO_PRODUCER, &first).to_vec();
    stamp_base_offset(&mut sent, Offset(0));
    assert_eq!(&records[..sent.len()], &sent[..], "the first batch as sent");
    let second = BatchHeader::parse(&records[sent.len()..]).expect("a second batch");
    let second_base = second.base_offset().0;
    assert_eq!(
        second_base, 3,
        "the second batch is stamped with its offset"
    );

    assert_eq!(list_offset(&mut client, "t", 1, -2), (NONE, 0));
    assert_eq!(list_offset(&mut client, "t", 1, -1), (NONE, 4));
    assert_eq!(
        list_offset(&mut client, "t", 0, -1),
        (NONE, 0),
        "the other partition is empty"
    );
}

#[test]
fn unknown_topics_partitions_and_offsets_get_their_codes() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create(&mut client, "t", 1), NONE);
    assert_eq!(
        produce(&mut client, "nope", 0, &[b"x"]).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        produce(&mut client, "t", 5, &[b"x"]).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(produce(&mut client, "t", 0, &[b"x"]), (NONE, 0));
    let resp = fetch(&mut client, "t", 0, 7);
    assert_eq!(
        resp.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    assert_eq!(
        list_offset(&mut client, "nope", 0, -1).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[test]
fn a_malformed_frame_closes_only_its_own_connection() {
    let broker = InProcessBroker::start();
    let mut bystander = broker.client();
    assert_eq!(create(&mut bystander, "t", 1), NONE);

    let mut bad = broker.client();
    bad.stream.write_all(&(-1i32).to_be_bytes()).expect("send");
    assert!(
        bad.read_frame().is_none(),
        "a negative size closes the connection"
    );

    let mut unknown = broker.client();
    let mut frame = unknown
        .frame(ApiKey::Metadata, 12, &MetadataRequest::default())
        .to_vec();
    frame[4..6].copy_from_slice(&999i16.to_be_bytes()); // no such API key
    unknown.stream.write_all(&frame).expect("send");
    assert!(
        unknown.read_frame().is_none(),
        "an unknown API key closes the connection"
    );

    assert_eq!(produce(&mut bystander, "t", 0, &[b"still here"]), (NONE, 0));
}

#[test]
fn committed_offsets_are_fetched_back_on_another_connection() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    use kafka_protocol::messages::{
        GroupId, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    };
    use kafka_protocol::protocol::StrBytes;

    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create(&mut client, "t", 2), NONE);
    let group = GroupId(StrBytes::from_static_str("g"));

    // A commit outside any generation (an assign()-only consumer, as Kafka allows).
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 1;
    p.committed_offset = 42;
    p.committed_leader_epoch = -1;
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name("t");
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = group.clone();
    req.generation_id_or_member_epoch = -1;
    req.topics = vec![t];
    let resp: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 8, &req);
    assert_eq!(resp.topics[0].partitions[0].error_code, NONE);

    // Fetched back on a new connection: partition 1 at 42, partition 0 has none (-1).
    let mut client = broker.client();
    let mut t = OffsetFetchRequestTopic::default();
    t.name = topic_name("t");
    t.partition_indexes = vec![0, 1];
    let mut req = OffsetFetchRequest::default();
    req.group_id = group;
    req.topics = Some(vec![t]);
    let resp: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 7, &req);
    assert_eq!(resp.error_code, NONE);
    let mut offsets: Vec<(i32, i64)> = resp.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    offsets.sort_unstable();
    assert_eq!(offsets, vec![(0, -1), (1, 42)]);
}

#[test]
fn an_idempotent_producer_retry_is_not_written_twice() {
    use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create(&mut client, "t", 1), NONE);
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = None;
    req.transaction_timeout_ms = 60_000;
    req.producer_id = (-1).into();
    req.producer_epoch = -1;
    let init: InitProducerIdResponse = client.call(ApiKey::InitProducerId, 4, &req);
    assert_eq!(init.error_code, NONE);
    let writer = |base_sequence| crate::common::Writer {
        producer_id: init.producer_id.0,
        epoch: init.producer_epoch,
        base_sequence,
    };
    let send = |client: &mut Client, base_sequence: i32| {
        produce_as(client, writer(base_sequence), "t", 0, &[b"one", b"two"])
    };
    assert_eq!(send(&mut client, 0), (NONE, 0));
    assert_eq!(
        send(&mut client, 0),
        (NONE, 0),
        "a retry gets the first answer"
    );
    assert_eq!(
        list_offset(&mut client, "t", 0, -1),
        (NONE, 2),
        "written once"
    );
    assert_eq!(
        send(&mut client, 7).0,
        ResponseError::OutOfOrderSequenceNumber.code(),
        "a gap in the sequence is refused"
    );
    assert_eq!(send(&mut client, 2), (NONE, 2));
}

#[test]
fn a_classic_group_member_joins_syncs_heartbeats_and_leaves() {
    use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
    use kafka_protocol::messages::leave_group_request::MemberIdentity;
    use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
    use kafka_protocol::messages::{
        GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
        LeaveGroupRequest, LeaveGroupResponse, SyncGroupRequest, SyncGroupResponse,
    };
    use kafka_protocol::protocol::StrBytes;

    // No initial delay: the first join is answered at once.
    let broker = InProcessBroker::start_with(|c| c.group.group_initial_rebalance_delay_ms = 0);
    let mut client = broker.client();
    let group = GroupId(StrBytes::from_static_str("g"));
    let join = |client: &mut Client, member_id: StrBytes| {
        let mut protocol = JoinGroupRequestProtocol::default();
        protocol.name = StrBytes::from_static_str("range");
        protocol.metadata = bytes::Bytes::from_static(b"subscription");
        let mut req = JoinGroupRequest::default();
        req.group_id = group.clone();
        req.session_timeout_ms = 10_000;
        req.rebalance_timeout_ms = 10_000;
        req.member_id = member_id;
        req.protocol_type = StrBytes::from_static_str("consumer");
        req.protocols = vec![protocol];
        let resp: JoinGroupResponse = client.call(ApiKey::JoinGroup, 5, &req);
        resp
    };
    // v4+: a member without an id is given one and asked to come back with it (KIP-394).
    let first = join(&mut client, StrBytes::default());
    assert_eq!(first.error_code, ResponseError::MemberIdRequired.code());
    assert!(!first.member_id.is_empty());
    let joined = join(&mut client, first.member_id.clone());
    assert_eq!(joined.error_code, NONE);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader, first.member_id, "the only member leads");
    assert_eq!(joined.members.len(), 1);

    let mut assignment = SyncGroupRequestAssignment::default();
    assignment.member_id = first.member_id.clone();
    assignment.assignment = bytes::Bytes::from_static(b"partitions");
    let mut req = SyncGroupRequest::default();
    req.group_id = group.clone();
    req.generation_id = 1;
    req.member_id = first.member_id.clone();
    req.assignments = vec![assignment];
    let synced: SyncGroupResponse = client.call(ApiKey::SyncGroup, 3, &req);
    assert_eq!(synced.error_code, NONE);
    assert_eq!(&synced.assignment[..], b"partitions");

    let mut req = HeartbeatRequest::default();
    req.group_id = group.clone();
    req.generation_id = 1;
    req.member_id = first.member_id.clone();
    let beat: HeartbeatResponse = client.call(ApiKey::Heartbeat, 3, &req);
    assert_eq!(beat.error_code, NONE);
    req.generation_id = 7;
    let stale: HeartbeatResponse = client.call(ApiKey::Heartbeat, 3, &req);
    assert_eq!(stale.error_code, ResponseError::IllegalGeneration.code());

    let mut member = MemberIdentity::default();
    member.member_id = first.member_id.clone();
    let mut req = LeaveGroupRequest::default();
    req.group_id = group;
    req.members = vec![member];
    let left: LeaveGroupResponse = client.call(ApiKey::LeaveGroup, 3, &req);
    assert_eq!(left.error_code, NONE);
    assert_eq!(left.members[0].error_code, NONE);
}

// Goal: DescribeCluster v1+ asked for controller endpoints answers UNSUPPORTED_ENDPOINT_TYPE
// with Kafka's code (115), not INVALID_REGISTRATION (119), which a hand-typed number gave.
#[test]
fn describe_cluster_refuses_controller_endpoints_with_kafkas_code() {
    use kafka_protocol::messages::{DescribeClusterRequest, DescribeClusterResponse};
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    let mut req = DescribeClusterRequest::default();
    req.endpoint_type = 2;
    let resp: DescribeClusterResponse = client.call(ApiKey::DescribeCluster, 1, &req);
    assert_eq!(resp.error_code, 115);
    req.endpoint_type = 1;
    let resp: DescribeClusterResponse = client.call(ApiKey::DescribeCluster, 1, &req);
    assert_eq!(resp.error_code, NONE);
    assert_eq!(resp.brokers.len(), 1);
}
