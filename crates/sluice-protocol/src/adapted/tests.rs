//! The adapted versions against the bytes Kafka 4.4's own serializer writes (golden hex made
//! with `MessageUtil.toByteBufferAccessor` from the kafka-clients 4.4.0 jar, for the messages
//! built in each test), both ways, and against truncation.

use super::*;
use uuid::Uuid;

fn hex(s: &str) -> Bytes {
    Bytes::from(
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect::<Vec<u8>>(),
    )
}

fn id() -> Uuid {
    Uuid::from_u128(0x0102030405060708_090a0b0c0d0e0f10)
}

fn encoded<T: Encodable>(v: &T, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    v.encode(&mut out, version).expect("encodes");
    assert_eq!(v.compute_size(version).expect("sizes"), out.len());
    out.freeze()
}

/// Decodes `golden` at `version`, checks it equals `want`, and that `want` encodes to it.
fn both_ways<T>(golden: &str, version: i16, want: T)
where
    Versioned<T>: Decodable + Encodable + PartialEq + std::fmt::Debug,
{
    let want = Versioned(want);
    let bytes = hex(golden);
    assert_eq!(
        Versioned::<T>::decode(&mut bytes.clone(), version).expect("decodes"),
        want
    );
    assert_eq!(encoded(&want, version), bytes);
    // Every truncation is an error, never a panic.
    for cut in 0..bytes.len() {
        assert!(
            Versioned::<T>::decode(&mut bytes.slice(..cut), version).is_err(),
            "{cut}"
        );
    }
}

// Goal: OffsetCommit v10 request and response are Kafka's bytes: topic ids where v9 has
// names, partitions as v9.
#[test]
fn offset_commit_v10_is_kafkas() {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 3;
    p.committed_offset = 42;
    p.committed_leader_epoch = -1;
    p.committed_metadata = Some(StrBytes::from_static_str("md"));
    let mut t = OffsetCommitRequestTopic::default();
    t.topic_id = id();
    t.partitions = vec![p];
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_static_str("g"));
    req.generation_id_or_member_epoch = 7;
    req.member_id = StrBytes::from_static_str("m");
    req.topics = vec![t];
    both_ways(
        "026700000007026d00020102030405060708090a0b0c0d0e0f100200000003000000000000002affffffff036d64000000",
        10,
        req,
    );
    let mut rp = OffsetCommitResponsePartition::default();
    rp.partition_index = 3;
    rp.error_code = 100;
    let mut rt = OffsetCommitResponseTopic::default();
    rt.topic_id = id();
    rt.partitions = vec![rp];
    let mut resp = OffsetCommitResponse::default();
    resp.topics = vec![rt];
    both_ways(
        "00000000020102030405060708090a0b0c0d0e0f1002000000030064000000",
        10,
        resp,
    );
}

// Goal: OffsetFetch v10 request (a group with topics by id, a group asking for all) and
// response are Kafka's bytes.
#[test]
fn offset_fetch_v10_is_kafkas() {
    let mut t = OffsetFetchRequestTopics::default();
    t.topic_id = id();
    t.partition_indexes = vec![0, 2];
    let mut g = OffsetFetchRequestGroup::default();
    g.group_id = GroupId(StrBytes::from_static_str("g"));
    g.member_id = Some(StrBytes::from_static_str("m"));
    g.member_epoch = 5;
    g.topics = Some(vec![t]);
    let mut all = OffsetFetchRequestGroup::default();
    all.group_id = GroupId(StrBytes::from_static_str("all"));
    all.member_epoch = -1;
    all.topics = None;
    let mut req = OffsetFetchRequest::default();
    req.groups = vec![g, all];
    req.require_stable = true;
    both_ways(
        "030267026d00000005020102030405060708090a0b0c0d0e0f10030000000000000002000004616c6c00ffffffff00000100",
        10,
        req,
    );
    let mut p = OffsetFetchResponsePartitions::default();
    p.partition_index = 2;
    p.committed_offset = 9;
    p.committed_leader_epoch = -1;
    p.metadata = Some(StrBytes::from_static_str(""));
    let mut rt = OffsetFetchResponseTopics::default();
    rt.topic_id = id();
    rt.partitions = vec![p];
    let mut rg = OffsetFetchResponseGroup::default();
    rg.group_id = GroupId(StrBytes::from_static_str("g"));
    rg.topics = vec![rt];
    let mut resp = OffsetFetchResponse::default();
    resp.throttle_time_ms = 1;
    resp.groups = vec![rg];
    both_ways(
        "00000001020267020102030405060708090a0b0c0d0e0f1002000000020000000000000009ffffffff010000000000000000",
        10,
        resp,
    );
}

// Goal: DeleteGroups v3 carries each result's error message (null when there is none).
#[test]
fn delete_groups_v3_is_kafkas() {
    let mut g = DeletableGroupResult::default();
    g.group_id = GroupId(StrBytes::from_static_str("g"));
    g.error_code = 68;
    set_delete_groups_error_message(&mut g, "not empty");
    let mut h = DeletableGroupResult::default();
    h.group_id = GroupId(StrBytes::from_static_str("h"));
    let mut resp = DeleteGroupsResponse::default();
    resp.results = vec![g, h];
    both_ways(
        "0000000003026700440a6e6f7420656d7074790002680000000000",
        3,
        resp,
    );
    // Below v3 the message is not on the wire.
    let v2 = encoded(&Versioned(DeleteGroupsResponse::default()), 2);
    assert_eq!(v2, hex("000000000100"));
}

// Goal: ApiVersions v5 reads the cluster and node the client expects; older versions have
// neither.
#[test]
fn api_versions_v5_request_is_kafkas() {
    let golden = hex("026e023102630000000100");
    let req = ApiVersionsRequestV5::decode(&mut golden.clone(), 5).expect("decodes");
    assert_eq!(req.request.client_software_name.as_str(), "n");
    assert_eq!(req.request.client_software_version.as_str(), "1");
    assert_eq!(req.cluster_id.as_deref(), Some("c"));
    assert_eq!(req.node_id, 1);
    assert_eq!(encoded(&req, 5), golden);
    let v4 = encoded(&req, 4);
    let old = ApiVersionsRequestV5::decode(&mut v4.clone(), 4).expect("decodes");
    assert_eq!((old.cluster_id, old.node_id), (None, -1));
}

// Goal: TxnOffsetCommit v6 request and response are Kafka's bytes: ids beside the crate's
// structs, partitions as v5; ids that do not pair up with the topics refuse to encode.
#[test]
fn txn_offset_commit_v6_is_kafkas() {
    use kafka_protocol::messages::txn_offset_commit_request::{
        TxnOffsetCommitRequestPartition as Part, TxnOffsetCommitRequestTopic as Topic,
    };
    let golden = "027402670000000000000005000200000003026d00020102030405060708090a0b0c0d0e0f10\
                  02000000010000000000000007ffffffff00000000";
    let mut p = Part::default();
    p.partition_index = 1;
    p.committed_offset = 7;
    p.committed_leader_epoch = -1;
    p.committed_metadata = None;
    let mut t = Topic::default();
    t.partitions = vec![p];
    let mut req = TxnOffsetCommitRequest::default();
    req.transactional_id = TransactionalId(StrBytes::from_static_str("t"));
    req.group_id = GroupId(StrBytes::from_static_str("g"));
    req.producer_id = ProducerId(5);
    req.producer_epoch = 2;
    req.generation_id = 3;
    req.member_id = StrBytes::from_static_str("m");
    req.topics = vec![t];
    let with_ids = WithTopicIds {
        message: req,
        topic_ids: vec![id()],
    };
    let bytes = hex(&golden.replace(' ', ""));
    let decoded = WithTopicIds::<TxnOffsetCommitRequest>::decode(&mut bytes.clone(), 6).unwrap();
    assert_eq!(decoded, with_ids);
    assert_eq!(encoded(&with_ids, 6), bytes);
    for cut in 0..bytes.len() {
        assert!(
            WithTopicIds::<TxnOffsetCommitRequest>::decode(&mut bytes.slice(..cut), 6).is_err()
        );
    }
    let unpaired = WithTopicIds {
        topic_ids: vec![],
        ..with_ids
    };
    assert!(unpaired.encode(&mut BytesMut::new(), 6).is_err());

    let mut rp = TxnOffsetCommitResponsePartition::default();
    rp.partition_index = 1;
    let mut rt = TxnOffsetCommitResponseTopic::default();
    rt.partitions = vec![rp];
    let mut resp = TxnOffsetCommitResponse::default();
    resp.topics = vec![rt];
    let resp = WithTopicIds {
        message: resp,
        topic_ids: vec![id()],
    };
    let rbytes = hex("00000000020102030405060708090a0b0c0d0e0f1002000000010000000000");
    assert_eq!(encoded(&resp, 6), rbytes);
    let back = WithTopicIds::<TxnOffsetCommitResponse>::decode(&mut rbytes.clone(), 6).unwrap();
    assert_eq!(back, resp);
}

// Goal: ListOffsets v11 and ApiVersions v5 responses are the previous version's bytes.
#[test]
fn unchanged_layouts_are_the_previous_versions() {
    let mut resp = ApiVersionsResponse::default();
    resp.finalized_features_epoch = 3;
    let v = Versioned(resp.clone());
    assert_eq!(encoded(&v, 5), encoded(&resp, 4));
    let lo = ListOffsetsRequest::default();
    assert_eq!(encoded(&Versioned(lo.clone()), 11), encoded(&lo, 10));
}

// Goal: a claimed array length beyond the bytes left is refused before allocating.
#[test]
fn huge_array_counts_are_refused() {
    // OffsetCommit v10: group "g", epoch 0, member "", no instance id, then 2^28 topics.
    let body = hex("0267000000000100ffffff7f");
    let err = Versioned::<OffsetCommitRequest>::decode(&mut body.clone(), 10).unwrap_err();
    assert!(err.to_string().contains("truncated"), "{err}");
}
