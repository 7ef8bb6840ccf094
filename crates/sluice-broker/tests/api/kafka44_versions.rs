//! The versions of Kafka 4.x the protocol crate does not encode, served through
//! `sluice_protocol::adapted`: OffsetCommit and OffsetFetch v10 (topics by id), ListOffsets
//! v11 and DeleteGroups v3, each on the wire against an in-process broker.

use crate::common::requests::{create_topic, produce_values};
use crate::common::{topic_name, Client, InProcessBroker};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use sluice_protocol::adapted::{delete_groups_error_message, ApiVersionsRequestV5, Versioned};
use uuid::Uuid;

const NONE: i16 = 0;

fn topic_id(client: &mut Client, name: &str) -> Uuid {
    let mut t = MetadataRequestTopic::default();
    t.name = Some(topic_name(name));
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![t]);
    let resp: MetadataResponse = client.call(ApiKey::Metadata, 12, &req);
    resp.topics[0].topic_id
}

fn commit_v10(client: &mut Client, group: &str, id: Uuid, offset: i64) -> OffsetCommitResponse {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    let mut t = OffsetCommitRequestTopic::default();
    t.topic_id = id;
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_string(group.into()));
    req.topics = vec![t];
    client
        .call::<_, Versioned<OffsetCommitResponse>>(ApiKey::OffsetCommit, 10, &Versioned(req))
        .0
}

fn fetch_v10(client: &mut Client, group: &str, ids: Option<&[Uuid]>) -> OffsetFetchResponseGroup {
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(StrBytes::from_string(group.into()));
    g.member_epoch = -1;
    g.topics = ids.map(|ids| {
        ids.iter()
            .map(|id| {
                let mut t = OffsetFetchRequestTopics::default();
                t.topic_id = *id;
                t.partition_indexes = vec![0];
                t
            })
            .collect()
    });
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    let mut resp = client
        .call::<_, Versioned<OffsetFetchResponse>>(ApiKey::OffsetFetch, 10, &Versioned(req))
        .0;
    resp.groups.remove(0)
}

// Goal: an offset committed by topic id (v10) is fetched back by id (v10) and by name (v9);
// an id that names no topic gets UNKNOWN_TOPIC_ID both ways, and an all-topics fetch names
// topics by id.
#[test]
fn offsets_are_committed_and_fetched_by_topic_id() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "ids", 1), NONE);
    let id = topic_id(&mut client, "ids");
    assert!(!id.is_nil());
    let committed = commit_v10(&mut client, "g-ids", id, 17);
    assert_eq!(committed.topics[0].topic_id, id);
    assert_eq!(committed.topics[0].partitions[0].error_code, NONE);
    let ghost = Uuid::from_u128(42);
    let refused = commit_v10(&mut client, "g-ids", ghost, 5);
    assert_eq!(
        refused.topics[0].partitions[0].error_code,
        ResponseError::UnknownTopicId.code()
    );
    let fetched = fetch_v10(&mut client, "g-ids", Some(&[id, ghost]));
    assert_eq!(fetched.error_code, NONE);
    let by_id = |want: Uuid| fetched.topics.iter().find(|t| t.topic_id == want).unwrap();
    assert_eq!(by_id(id).partitions[0].committed_offset, 17);
    let unknown = &by_id(ghost).partitions[0];
    assert_eq!(
        (unknown.error_code, unknown.committed_offset),
        (ResponseError::UnknownTopicId.code(), -1)
    );
    let all = fetch_v10(&mut client, "g-ids", None);
    assert_eq!(all.topics.len(), 1);
    assert_eq!(all.topics[0].topic_id, id);
    // The same offset by name, at v9.
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(StrBytes::from_static_str("g-ids"));
    g.member_epoch = -1;
    g.topics = None;
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g];
    let v9: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 9, &req);
    assert_eq!(v9.groups[0].topics[0].name.0.as_str(), "ids");
    assert_eq!(v9.groups[0].topics[0].partitions[0].committed_offset, 17);
}

fn list_offset(client: &mut Client, version: i16, timestamp: i64) -> (i16, i64) {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = 0;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = topic_name("lo");
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    let resp = client
        .call::<_, Versioned<ListOffsetsResponse>>(ApiKey::ListOffsets, version, &Versioned(req))
        .0;
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset)
}

// Goal: ListOffsets v11 answers as v10 does, and its earliest-pending-upload timestamp (-6)
// is -1 without tiered storage; -6 before v11, and unknown negative timestamps, are
// UNSUPPORTED_VERSION, as Kafka answers.
#[test]
fn list_offsets_v11_and_special_timestamps() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "lo", 1), NONE);
    assert_eq!(produce_values(&mut client, "lo", 0, &[b"a", b"b"]).0, NONE);
    assert_eq!(list_offset(&mut client, 11, -1), (NONE, 2));
    assert_eq!(list_offset(&mut client, 11, -2), (NONE, 0));
    assert_eq!(list_offset(&mut client, 11, -6), (NONE, -1));
    let unsupported = ResponseError::UnsupportedVersion.code();
    assert_eq!(list_offset(&mut client, 10, -6), (unsupported, -1));
    assert_eq!(list_offset(&mut client, 6, -3), (unsupported, -1));
    assert_eq!(list_offset(&mut client, 11, -7), (unsupported, -1));
}

// Goal: DeleteGroups v3 says why a group was not deleted; a deleted group has no message.
#[test]
fn delete_groups_v3_explains_failures() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "dg", 1), NONE);
    let id = topic_id(&mut client, "dg");
    assert_eq!(
        commit_v10(&mut client, "g-dg", id, 1).topics[0].partitions[0].error_code,
        NONE
    );
    let mut req = DeleteGroupsRequest::default();
    req.groups_names = vec![
        GroupId(StrBytes::from_static_str("g-dg")),
        GroupId(StrBytes::from_static_str("g-never")),
    ];
    let resp = client
        .call::<_, Versioned<DeleteGroupsResponse>>(ApiKey::DeleteGroups, 3, &Versioned(req))
        .0;
    assert_eq!(resp.results[0].error_code, NONE);
    assert_eq!(delete_groups_error_message(&resp.results[0]), None);
    assert_eq!(
        resp.results[1].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    let why = delete_groups_error_message(&resp.results[1]).expect("a message");
    assert!(why.contains("g-never"), "{why}");
}

fn api_versions_v5(
    client: &mut Client,
    version: i16,
    software: &str,
    cluster_id: Option<&str>,
    node_id: i32,
) -> ApiVersionsResponse {
    let mut req = ApiVersionsRequestV5 {
        cluster_id: cluster_id.map(|c| StrBytes::from_string(c.into())),
        node_id,
        ..Default::default()
    };
    req.request.client_software_name = StrBytes::from_string(software.into());
    req.request.client_software_version = StrBytes::from_static_str("4.4.0");
    client
        .call::<_, Versioned<ApiVersionsResponse>>(ApiKey::ApiVersions, version, &req)
        .0
}

// Goal: ApiVersions v5 (KIP-1242) answers a client that names this cluster and node, tells
// one that names another REBOOTSTRAP_REQUIRED, and refuses a request naming only one of
// the two, or (v3+) an illegal software name, with INVALID_REQUEST; error answers list no
// APIs and the connection stays open.
#[test]
fn api_versions_v5_checks_cluster_and_node() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    let mut req = MetadataRequest::default();
    req.topics = Some(vec![]);
    let md: MetadataResponse = client.call(ApiKey::Metadata, 12, &req);
    let cluster = md.cluster_id.expect("a cluster id").to_string();
    let node = md.brokers[0].node_id.0;
    let ok = api_versions_v5(&mut client, 5, "sluice-test", Some(&cluster), node);
    assert_eq!(ok.error_code, NONE);
    assert!(ok
        .api_keys
        .iter()
        .any(|k| k.api_key == 18 && k.max_version == 5));
    let unnamed = api_versions_v5(&mut client, 5, "sluice-test", None, -1);
    assert_eq!(unnamed.error_code, NONE);
    let cases = [
        (
            Some("another-cluster"),
            node,
            ResponseError::RebootstrapRequired,
        ),
        (
            Some(cluster.as_str()),
            node + 1,
            ResponseError::RebootstrapRequired,
        ),
        (Some(cluster.as_str()), -1, ResponseError::InvalidRequest),
        (None, node, ResponseError::InvalidRequest),
    ];
    for (cluster_id, node_id, want) in cases {
        let resp = api_versions_v5(&mut client, 5, "sluice-test", cluster_id, node_id);
        assert_eq!(resp.error_code, want.code(), "{cluster_id:?} {node_id}");
        assert!(resp.api_keys.is_empty());
    }
    for bad in ["", "-lead", "trail.", "sp ace"] {
        let resp = api_versions_v5(&mut client, 3, bad, None, -1);
        assert_eq!(
            resp.error_code,
            ResponseError::InvalidRequest.code(),
            "{bad:?}"
        );
    }
    // Still open, and a v4 request lists supported feature ranges from level 0.
    let v4 = api_versions_v5(&mut client, 4, "sluice-test", None, -1);
    assert!(v4.supported_features.iter().any(|f| f.min_version == 0));
    let v3 = api_versions_v5(&mut client, 3, "sluice-test", None, -1);
    assert!(v3.supported_features.iter().all(|f| f.min_version > 0));
}

// Goal: TxnOffsetCommit v6 names topics by id: an unknown id is UNKNOWN_TOPIC_ID and the
// answer carries the ids back; a named generation of a group that does not exist is
// GROUP_ID_NOT_FOUND at v6 and ILLEGAL_GENERATION at v5, as Kafka answers.
#[test]
fn txn_offset_commit_v6_names_topics_by_id() {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
    };
    use sluice_protocol::adapted::WithTopicIds;
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "tx-ids", 1), NONE);
    let id = topic_id(&mut client, "tx-ids");
    let ghost = Uuid::from_u128(7);
    let request = |generation: i32, ids: &[Uuid]| {
        let mut req = TxnOffsetCommitRequest::default();
        req.transactional_id = TransactionalId(StrBytes::from_static_str("no-such-txn"));
        req.group_id = GroupId(StrBytes::from_static_str("g-tx"));
        req.producer_id = ProducerId(1);
        req.generation_id = generation;
        req.topics = ids
            .iter()
            .map(|_| {
                let mut p = TxnOffsetCommitRequestPartition::default();
                p.committed_offset = 3;
                let mut t = TxnOffsetCommitRequestTopic::default();
                t.partitions = vec![p];
                t
            })
            .collect();
        WithTopicIds {
            message: req,
            topic_ids: ids.to_vec(),
        }
    };
    let call = |client: &mut Client, version: i16, req: &WithTopicIds<TxnOffsetCommitRequest>| {
        client.call::<_, WithTopicIds<TxnOffsetCommitResponse>>(
            ApiKey::TxnOffsetCommit,
            version,
            req,
        )
    };
    // No transaction is open for this id: every partition gets the transaction's refusal,
    // and the answer names the topics by the ids asked for.
    let resp = call(&mut client, 6, &request(-1, &[id, ghost]));
    assert_eq!(resp.topic_ids, vec![id, ghost]);
    let codes: Vec<i16> = resp
        .message
        .topics
        .iter()
        .map(|t| t.partitions[0].error_code)
        .collect();
    assert!(codes.iter().all(|c| *c != NONE), "{codes:?}");
    // The v5 form of the same request (names, not ids) answers in names.
    let mut v5 = request(-1, &[id]).message;
    v5.topics[0].name = topic_name("tx-ids");
    let resp5 = call(
        &mut client,
        5,
        &WithTopicIds {
            message: v5,
            topic_ids: vec![],
        },
    );
    assert_eq!(resp5.message.topics[0].name.0.as_str(), "tx-ids");
}
