//! The fast tier for the consumer group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete
//! (classic protocol) and ConsumerGroupHeartbeat, ConsumerGroupDescribe (KIP-848), each at
//! the versions clients send, with their main error codes. A real `Server` in this process
//! (loopback socket, real data directory) and the wire client of `common`.
//!
//! `group.initial.rebalance.delay.ms` is 0, so a one-member join answers at once. The
//! timer tests run the coordinator on a manual clock (`sluice_broker::clock`) and advance
//! it past real Kafka timeouts (10 s sessions, 45 s KIP-848 sessions) in milliseconds.

use crate::common::requests::create_topic;
use crate::common::{eventually, topic_name, Client, InProcessBroker};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_request::ConsumerGroupDescribeRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupDescribeResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, DeleteGroupsRequest, DeleteGroupsResponse,
    DescribeGroupsRequest, DescribeGroupsResponse, GroupId, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, SyncGroupRequest,
    SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;

const NONE: i16 = 0;

fn code(e: ResponseError) -> i16 {
    e.code()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn group(id: &str) -> GroupId {
    GroupId(s(id))
}

/// A broker whose first rebalance of a group does not wait (`group.initial.rebalance.delay.ms`
/// 0), so a one-member join answers at once.
fn broker() -> InProcessBroker {
    InProcessBroker::start_with(|c| {
        c.set("group.initial.rebalance.delay.ms", "0").unwrap();
    })
}

/// A consumer-protocol subscription (v0) to `topics`.
fn subscription(topics: &[&str]) -> Bytes {
    subscription_v(0, topics)
}

/// A consumer-protocol subscription to `topics` at `version`, encoded by kafka-protocol
/// (v1+ with an owned partition, v2+ a generation, v3 a rack), with user data.
fn subscription_v(version: i16, topics: &[&str]) -> Bytes {
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as Owned;
    use kafka_protocol::messages::ConsumerProtocolSubscription;
    use kafka_protocol::protocol::Encodable;
    let mut sub = ConsumerProtocolSubscription::default();
    sub.topics = topics.iter().map(|t| s(t)).collect();
    sub.user_data = Some(Bytes::from_static(b"user"));
    if version >= 1 {
        let mut owned = Owned::default();
        owned.topic = topic_name(topics[0]);
        owned.partitions = vec![0];
        sub.owned_partitions = vec![owned];
        sub.generation_id = 1;
        sub.rack_id = Some(s("rack-a"));
    }
    let mut out = bytes::BytesMut::new();
    out.extend_from_slice(&version.to_be_bytes());
    sub.encode(&mut out, version).expect("encodes");
    out.freeze()
}

fn join_request(group_id: &str, member_id: &str, topics: &[&str]) -> JoinGroupRequest {
    let mut p = JoinGroupRequestProtocol::default();
    p.name = s("range");
    p.metadata = subscription(topics);
    let mut r = JoinGroupRequest::default();
    r.group_id = group(group_id);
    r.session_timeout_ms = 10_000;
    r.rebalance_timeout_ms = 10_000;
    r.member_id = s(member_id);
    r.protocol_type = s("consumer");
    r.protocols = vec![p];
    r
}

/// Joins `group_id` as a new member at `version` (rejoining with the given id when v4+
/// asks for it): the completed join.
fn join(client: &mut Client, version: i16, group_id: &str, topics: &[&str]) -> JoinGroupResponse {
    let req = join_request(group_id, "", topics);
    let resp: JoinGroupResponse = client.call(ApiKey::JoinGroup, version, &req);
    if version < 4 {
        return resp;
    }
    assert_eq!(
        resp.error_code,
        code(ResponseError::MemberIdRequired),
        "v{version}"
    );
    assert!(!resp.member_id.is_empty());
    let req = join_request(group_id, &resp.member_id, topics);
    client.call(ApiKey::JoinGroup, version, &req)
}

fn sync_request(
    group_id: &str,
    generation_id: i32,
    member_id: &str,
    assignments: &[(&str, &[u8])],
) -> SyncGroupRequest {
    let mut r = SyncGroupRequest::default();
    r.group_id = group(group_id);
    r.generation_id = generation_id;
    r.member_id = s(member_id);
    r.protocol_type = Some(s("consumer"));
    r.protocol_name = Some(s("range"));
    r.assignments = assignments
        .iter()
        .map(|(m, a)| {
            let mut x = SyncGroupRequestAssignment::default();
            x.member_id = s(m);
            x.assignment = Bytes::copy_from_slice(a);
            x
        })
        .collect();
    r
}

fn heartbeat(client: &mut Client, version: i16, group_id: &str, gen: i32, member: &str) -> i16 {
    let mut r = HeartbeatRequest::default();
    r.group_id = group(group_id);
    r.generation_id = gen;
    r.member_id = s(member);
    let resp: HeartbeatResponse = client.call(ApiKey::Heartbeat, version, &r);
    resp.error_code
}

/// LeaveGroup of one member: the top-level code and (v3+) the member's.
fn leave(client: &mut Client, version: i16, group_id: &str, member: &str) -> (i16, Option<i16>) {
    let mut r = LeaveGroupRequest::default();
    r.group_id = group(group_id);
    if version >= 3 {
        let mut m = MemberIdentity::default();
        m.member_id = s(member);
        r.members = vec![m];
    } else {
        r.member_id = s(member);
    }
    let resp: LeaveGroupResponse = client.call(ApiKey::LeaveGroup, version, &r);
    (resp.error_code, resp.members.first().map(|m| m.error_code))
}

/// OffsetCommit of `offset` for `topic`-0: the partition's code.
fn commit(
    client: &mut Client,
    version: i16,
    group_id: &str,
    gen: i32,
    member: &str,
    topic: &str,
    offset: i64,
) -> i16 {
    let mut p = OffsetCommitRequestPartition::default();
    p.partition_index = 0;
    p.committed_offset = offset;
    p.committed_metadata = Some(s("m"));
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut r = OffsetCommitRequest::default();
    r.group_id = group(group_id);
    r.generation_id_or_member_epoch = gen;
    r.member_id = s(member);
    r.retention_time_ms = -1;
    r.topics = vec![t];
    let resp: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, version, &r);
    resp.topics[0].partitions[0].error_code
}

/// OffsetFetch of `topic`-0 at `version` (the v8+ groups form from v8): (code, offset).
fn fetch_offset(client: &mut Client, version: i16, group_id: &str, topic: &str) -> (i16, i64) {
    let mut r = OffsetFetchRequest::default();
    if version >= 8 {
        let mut t = OffsetFetchRequestTopics::default();
        t.name = topic_name(topic);
        t.partition_indexes = vec![0];
        let mut g = OffsetFetchRequestGroup::default();
        g.group_id = group(group_id);
        g.member_epoch = -1;
        g.topics = Some(vec![t]);
        r.groups = vec![g];
    } else {
        let mut t = OffsetFetchRequestTopic::default();
        t.name = topic_name(topic);
        t.partition_indexes = vec![0];
        r.group_id = group(group_id);
        r.topics = Some(vec![t]);
    }
    let resp: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, version, &r);
    if version >= 8 {
        let g = &resp.groups[0];
        assert_eq!(g.error_code, NONE);
        let p = &g.topics[0].partitions[0];
        (p.error_code, p.committed_offset)
    } else {
        assert_eq!(resp.error_code, NONE);
        let p = &resp.topics[0].partitions[0];
        (p.error_code, p.committed_offset)
    }
}

/// OffsetDelete v0 of `topic`-0: (top-level code, the partition's code).
fn offset_delete(client: &mut Client, group_id: &str, topic: &str) -> (i16, i16) {
    let mut p = OffsetDeleteRequestPartition::default();
    p.partition_index = 0;
    let mut t = OffsetDeleteRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut r = OffsetDeleteRequest::default();
    r.group_id = group(group_id);
    r.topics = vec![t];
    let resp: OffsetDeleteResponse = client.call(ApiKey::OffsetDelete, 0, &r);
    let part = resp
        .topics
        .first()
        .map_or(NONE, |t| t.partitions[0].error_code);
    (resp.error_code, part)
}

fn describe(client: &mut Client, version: i16, group_id: &str) -> DescribeGroupsResponse {
    let mut r = DescribeGroupsRequest::default();
    r.groups = vec![group(group_id)];
    client.call(ApiKey::DescribeGroups, version, &r)
}

fn list(client: &mut Client, version: i16, states: &[&str]) -> ListGroupsResponse {
    let mut r = ListGroupsRequest::default();
    r.states_filter = states.iter().map(|v| s(v)).collect();
    client.call(ApiKey::ListGroups, version, &r)
}

fn delete_groups(client: &mut Client, version: i16, ids: &[&str]) -> Vec<i16> {
    let mut r = DeleteGroupsRequest::default();
    r.groups_names = ids.iter().map(|g| group(g)).collect();
    let resp: DeleteGroupsResponse = client.call(ApiKey::DeleteGroups, version, &r);
    resp.results.iter().map(|g| g.error_code).collect()
}

// Goal: the one-member lifecycle (join, sync, heartbeat, leave) answers NONE at every
// JoinGroup version and the matching SyncGroup, Heartbeat and LeaveGroup versions; a wrong
// generation is ILLEGAL_GENERATION, a stranger UNKNOWN_MEMBER_ID, before and after leaving.
#[test]
fn one_member_joins_syncs_beats_and_leaves_at_every_version() {
    let broker = broker();
    let mut client = broker.client();
    for version in 0..=9i16 {
        let g = format!("solo-v{version}");
        let joined = join(&mut client, version, &g, &["t"]);
        assert_eq!(joined.error_code, NONE, "JoinGroup v{version}");
        assert_eq!(joined.generation_id, 1, "v{version}");
        assert_eq!(
            joined.leader, joined.member_id,
            "v{version}: the only member leads"
        );
        assert_eq!(
            joined.members.len(),
            1,
            "v{version}: the leader gets the members"
        );
        let member = joined.member_id.to_string();

        let sync_v = version.min(5);
        let req = sync_request(&g, 1, &member, &[(&member, b"assigned")]);
        let synced: SyncGroupResponse = client.call(ApiKey::SyncGroup, sync_v, &req);
        assert_eq!(synced.error_code, NONE, "SyncGroup v{sync_v}");
        assert_eq!(&synced.assignment[..], b"assigned");

        let beat_v = version.min(4);
        assert_eq!(heartbeat(&mut client, beat_v, &g, 1, &member), NONE);
        assert_eq!(
            heartbeat(&mut client, beat_v, &g, 2, &member),
            code(ResponseError::IllegalGeneration),
            "Heartbeat v{beat_v}"
        );
        assert_eq!(
            heartbeat(&mut client, beat_v, &g, 1, "stranger"),
            code(ResponseError::UnknownMemberId),
            "Heartbeat v{beat_v}"
        );

        let leave_v = version.min(5);
        let (top, one) = leave(&mut client, leave_v, &g, &member);
        assert_eq!(top, NONE, "LeaveGroup v{leave_v}");
        if leave_v >= 3 {
            assert_eq!(one, Some(NONE));
        }
        let (top, one) = leave(&mut client, leave_v, &g, &member);
        let gone = code(ResponseError::UnknownMemberId);
        assert_eq!(one.unwrap_or(top), gone, "LeaveGroup v{leave_v} twice");
        assert_eq!(heartbeat(&mut client, beat_v, &g, 1, &member), gone);
    }
}

// Goal: JoinGroup refuses a session timeout outside the broker's bounds
// (INVALID_SESSION_TIMEOUT) and an empty group id (INVALID_GROUP_ID); SyncGroup from an
// unknown member is UNKNOWN_MEMBER_ID.
#[test]
fn join_refuses_bad_session_timeouts_and_group_ids() {
    let broker = broker();
    let mut client = broker.client();
    let mut req = join_request("g", "", &["t"]);
    req.session_timeout_ms = 10; // group.min.session.timeout.ms is 6000
    let resp: JoinGroupResponse = client.call(ApiKey::JoinGroup, 9, &req);
    assert_eq!(resp.error_code, code(ResponseError::InvalidSessionTimeout));
    let req = join_request("", "", &["t"]);
    let resp: JoinGroupResponse = client.call(ApiKey::JoinGroup, 9, &req);
    assert_eq!(resp.error_code, code(ResponseError::InvalidGroupId));
    let req = sync_request("nobody-here", 1, "ghost", &[]);
    let resp: SyncGroupResponse = client.call(ApiKey::SyncGroup, 5, &req);
    assert_eq!(resp.error_code, code(ResponseError::UnknownMemberId));
}

// Goal: a second member starts a rebalance: the first member's heartbeat and commit get
// REBALANCE_IN_PROGRESS until it rejoins; both then get generation 2, the leader's
// SyncGroup hands the follower its assignment, and DescribeGroups and ListGroups show the
// Stable group with both members.
#[test]
fn a_second_member_rebalances_the_group() {
    let broker = broker();
    let mut a = broker.client();
    let mut b = broker.client();
    assert_eq!(create_topic(&mut a, "t", 2), NONE);
    let first = join(&mut a, 9, "pair", &["t"]);
    assert_eq!(first.error_code, NONE);
    let leader = first.member_id.to_string();
    // Joined but not synced: CompletingRebalance refuses commits.
    assert_eq!(
        commit(&mut a, 9, "pair", 1, &leader, "t", 5),
        code(ResponseError::RebalanceInProgress)
    );
    let req = sync_request("pair", 1, &leader, &[(&leader, b"all")]);
    let synced: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &req);
    assert_eq!(synced.error_code, NONE);

    // The newcomer's join waits for the rebalance, so it is sent, not awaited.
    let id_resp: JoinGroupResponse =
        b.call(ApiKey::JoinGroup, 9, &join_request("pair", "", &["t"]));
    assert_eq!(id_resp.error_code, code(ResponseError::MemberIdRequired));
    let follower = id_resp.member_id.to_string();
    let frame = b.frame(
        ApiKey::JoinGroup,
        9,
        &join_request("pair", &follower, &["t"]),
    );
    use std::io::Write;
    b.stream.write_all(&frame).unwrap();
    // The join is parked; wait until it has reached the coordinator.
    let rebalancing = code(ResponseError::RebalanceInProgress);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while heartbeat(&mut a, 4, "pair", 1, &leader) != rebalancing {
        assert!(std::time::Instant::now() < deadline, "no rebalance started");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let stale_sync: SyncGroupResponse =
        a.call(ApiKey::SyncGroup, 5, &sync_request("pair", 1, &leader, &[]));
    assert_eq!(stale_sync.error_code, rebalancing);

    let rejoined: JoinGroupResponse =
        a.call(ApiKey::JoinGroup, 9, &join_request("pair", &leader, &["t"]));
    assert_eq!(rejoined.error_code, NONE);
    assert_eq!(rejoined.generation_id, 2);
    assert_eq!(rejoined.leader.as_str(), leader);
    assert_eq!(rejoined.members.len(), 2);
    let body = b.read_frame().expect("the follower's join");
    let follower_join = decode::<JoinGroupResponse>(body, ApiKey::JoinGroup, 9);
    assert_eq!(follower_join.error_code, NONE);
    assert_eq!(follower_join.generation_id, 2);
    assert!(
        follower_join.members.is_empty(),
        "only the leader gets the members"
    );

    // The follower's SyncGroup waits for the leader's assignment.
    let frame = b.frame(
        ApiKey::SyncGroup,
        5,
        &sync_request("pair", 2, &follower, &[]),
    );
    b.stream.write_all(&frame).unwrap();
    let assignments: [(&str, &[u8]); 2] = [(&leader, b"p0"), (&follower, b"p1")];
    let synced: SyncGroupResponse = a.call(
        ApiKey::SyncGroup,
        5,
        &sync_request("pair", 2, &leader, &assignments),
    );
    assert_eq!(synced.error_code, NONE);
    assert_eq!(&synced.assignment[..], b"p0");
    let body = b.read_frame().expect("the follower's sync");
    let follower_sync = decode::<SyncGroupResponse>(body, ApiKey::SyncGroup, 5);
    assert_eq!(follower_sync.error_code, NONE);
    assert_eq!(&follower_sync.assignment[..], b"p1");

    for version in 0..=6 {
        let d = describe(&mut a, version, "pair");
        let g = &d.groups[0];
        assert_eq!(g.error_code, NONE, "DescribeGroups v{version}");
        assert_eq!(g.group_state.as_str(), "Stable");
        assert_eq!(g.protocol_data.as_str(), "range");
        assert_eq!(g.members.len(), 2);
    }
    let unknown = describe(&mut a, 5, "never-seen");
    assert_eq!(unknown.groups[0].group_state.as_str(), "Dead");
    assert_eq!(unknown.groups[0].error_code, NONE);
    // v6 (Kafka 4.x): an unknown group is an error, with a message.
    let unknown = describe(&mut a, 6, "never-seen");
    assert_eq!(
        unknown.groups[0].error_code,
        code(ResponseError::GroupIdNotFound)
    );
    assert_eq!(unknown.groups[0].group_state.as_str(), "Dead");
    assert_eq!(
        unknown.groups[0].error_message.as_deref(),
        Some("Group never-seen not found.")
    );
    assert_eq!(
        describe(&mut a, 5, "").groups[0].error_code,
        code(ResponseError::InvalidGroupId)
    );
    for version in 0..=5 {
        let l = list(&mut a, version, &[]);
        assert_eq!(l.error_code, NONE, "ListGroups v{version}");
        assert!(l.groups.iter().any(|g| g.group_id.0.as_str() == "pair"));
    }
    let stable = list(&mut a, 4, &["Stable"]);
    assert!(stable
        .groups
        .iter()
        .any(|g| g.group_id.0.as_str() == "pair"));
    assert_eq!(stable.groups[0].group_state.as_str(), "Stable");
    assert!(list(&mut a, 4, &["Empty"]).groups.is_empty());
}

fn decode<R: kafka_protocol::protocol::Decodable>(mut body: Bytes, key: ApiKey, version: i16) -> R {
    use kafka_protocol::messages::ResponseHeader;
    use kafka_protocol::protocol::Decodable;
    ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
    R::decode(&mut body, version).unwrap()
}

// Goal: commits of a standalone consumer (no member, generation -1) are stored and fetched
// back at every OffsetCommit and OffsetFetch version; an unknown topic is
// UNKNOWN_TOPIC_OR_PARTITION; a partition never committed fetches as -1 without error.
#[test]
fn standalone_commits_round_trip_at_every_version() {
    let broker = broker();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 1), NONE);
    for version in 2..=9i16 {
        let g = format!("standalone-v{version}");
        let offset = 100 + i64::from(version);
        assert_eq!(
            commit(&mut client, version, &g, -1, "", "t", offset),
            NONE,
            "OffsetCommit v{version}"
        );
        assert_eq!(
            commit(&mut client, version, &g, -1, "", "missing", 1),
            code(ResponseError::UnknownTopicOrPartition),
            "OffsetCommit v{version}"
        );
        let fetch_v = version.min(9);
        assert_eq!(fetch_offset(&mut client, fetch_v, &g, "t"), (NONE, offset));
    }
    for version in 1..=9i16 {
        assert_eq!(
            fetch_offset(&mut client, version, "standalone-v5", "t"),
            (NONE, 105),
            "OffsetFetch v{version}"
        );
        assert_eq!(
            fetch_offset(&mut client, version, "no-commits", "t"),
            (NONE, -1),
            "OffsetFetch v{version}"
        );
    }
}

// Goal: a managed group's commits are checked: the member's generation (ILLEGAL_GENERATION),
// the member (UNKNOWN_MEMBER_ID); OffsetDelete refuses a subscribed topic
// (GROUP_SUBSCRIBED_TO_TOPIC) and DeleteGroups a group with members (NON_EMPTY_GROUP); once
// empty, OffsetDelete and DeleteGroups work, and an unknown group is GROUP_ID_NOT_FOUND.
#[test]
fn managed_commits_offset_delete_and_delete_groups() {
    let broker = broker();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 1), NONE);
    assert_eq!(create_topic(&mut client, "other", 1), NONE);
    let joined = join(&mut client, 9, "managed", &["t"]);
    let member = joined.member_id.to_string();
    let req = sync_request("managed", 1, &member, &[(&member, b"")]);
    let synced: SyncGroupResponse = client.call(ApiKey::SyncGroup, 5, &req);
    assert_eq!(synced.error_code, NONE);
    assert_eq!(commit(&mut client, 9, "managed", 1, &member, "t", 7), NONE);
    assert_eq!(
        commit(&mut client, 9, "managed", 1, &member, "other", 3),
        NONE
    );
    assert_eq!(
        commit(&mut client, 9, "managed", 2, &member, "t", 8),
        code(ResponseError::IllegalGeneration)
    );
    assert_eq!(
        commit(&mut client, 9, "managed", 1, "stranger", "t", 8),
        code(ResponseError::UnknownMemberId)
    );
    assert_eq!(
        commit(&mut client, 9, "managed", -1, "", "t", 8),
        code(ResponseError::UnknownMemberId),
        "a standalone commit to a managed group"
    );
    assert_eq!(fetch_offset(&mut client, 9, "managed", "t"), (NONE, 7));

    let offset_delete = |client: &mut Client, topic: &str| offset_delete(client, "managed", topic);
    assert_eq!(
        offset_delete(&mut client, "t"),
        (NONE, code(ResponseError::GroupSubscribedToTopic))
    );
    assert_eq!(offset_delete(&mut client, "other"), (NONE, NONE));
    assert_eq!(fetch_offset(&mut client, 9, "managed", "other"), (NONE, -1));
    assert_eq!(
        offset_delete(&mut client, "missing"),
        (NONE, code(ResponseError::UnknownTopicOrPartition))
    );

    assert_eq!(
        delete_groups(&mut client, 2, &["managed", "ghost"]),
        vec![
            code(ResponseError::NonEmptyGroup),
            code(ResponseError::GroupIdNotFound)
        ]
    );
    assert_eq!(leave(&mut client, 5, "managed", &member).0, NONE);
    assert_eq!(offset_delete(&mut client, "t"), (NONE, NONE));
    for version in 0..=2 {
        let g = format!("empty-v{version}");
        assert_eq!(commit(&mut client, 9, &g, -1, "", "t", 1), NONE);
        assert_eq!(delete_groups(&mut client, version, &[&g]), vec![NONE]);
        assert_eq!(
            fetch_offset(&mut client, 9, &g, "t"),
            (NONE, -1),
            "v{version}"
        );
    }
    assert_eq!(delete_groups(&mut client, 2, &["managed"]), vec![NONE]);
    assert!(!list(&mut client, 5, &[])
        .groups
        .iter()
        .any(|g| g.group_id.0.as_str() == "managed"));
}

/// A broker like [`broker`] whose group timers run on a manual clock (`common`'s
/// `start_manual`): time moves only when the test advances it.
fn manual_broker() -> InProcessBroker {
    InProcessBroker::start_manual(|c| {
        c.set("group.initial.rebalance.delay.ms", "0").unwrap();
    })
}

/// A JoinGroup v9 with these timeouts, sent and not awaited (the coordinator parks it).
fn send_join(client: &mut Client, group_id: &str, member_id: &str, timeouts: (i32, i32)) {
    use std::io::Write;
    let mut req = join_request(group_id, member_id, &["t"]);
    (req.session_timeout_ms, req.rebalance_timeout_ms) = timeouts;
    let frame = client.frame(ApiKey::JoinGroup, 9, &req);
    client.stream.write_all(&frame).unwrap();
}

/// The member id JoinGroup v9 hands a new member (MEMBER_ID_REQUIRED).
fn member_id(client: &mut Client, group_id: &str) -> String {
    let resp: JoinGroupResponse =
        client.call(ApiKey::JoinGroup, 9, &join_request(group_id, "", &["t"]));
    assert_eq!(resp.error_code, code(ResponseError::MemberIdRequired));
    resp.member_id.to_string()
}

/// The parked JoinGroup's answer.
fn read_join(client: &mut Client) -> JoinGroupResponse {
    decode(
        client.read_frame().expect("a JoinGroup answer"),
        ApiKey::JoinGroup,
        9,
    )
}

/// Whether a response frame arrives within `ms` of real time.
fn answers_within(client: &mut Client, ms: u64) -> bool {
    let wait = std::time::Duration::from_millis(ms);
    client.stream.set_read_timeout(Some(wait)).unwrap();
    let mut byte = [0u8; 1];
    let answered = client.stream.peek(&mut byte).is_ok_and(|n| n > 0);
    let wait = std::time::Duration::from_secs(30);
    client.stream.set_read_timeout(Some(wait)).unwrap();
    answered
}

/// Two members in a Stable group `group_id` at generation 2, each joined with `timeouts`
/// (session, rebalance) and synced: (leader's client and id, follower's client and id).
fn stable_pair(
    broker: &InProcessBroker,
    group_id: &str,
    timeouts: (i32, i32),
) -> ((Client, String), (Client, String)) {
    let (mut a, mut b) = (broker.client(), broker.client());
    let leader = member_id(&mut a, group_id);
    send_join(&mut a, group_id, &leader, timeouts);
    assert_eq!(read_join(&mut a).generation_id, 1);
    let req = sync_request(group_id, 1, &leader, &[(&leader, b"all")]);
    let synced: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &req);
    assert_eq!(synced.error_code, NONE);
    let follower = member_id(&mut b, group_id);
    send_join(&mut b, group_id, &follower, timeouts);
    let rebalancing = code(ResponseError::RebalanceInProgress);
    eventually("the follower's join starts a rebalance", || {
        (heartbeat(&mut a, 4, group_id, 1, &leader) == rebalancing).then_some(())
    });
    send_join(&mut a, group_id, &leader, timeouts);
    let (ja, jb) = (read_join(&mut a), read_join(&mut b));
    assert_eq!((ja.error_code, jb.error_code), (NONE, NONE));
    assert_eq!((ja.generation_id, ja.members.len()), (2, 2));
    use std::io::Write;
    let frame = b.frame(
        ApiKey::SyncGroup,
        5,
        &sync_request(group_id, 2, &follower, &[]),
    );
    b.stream.write_all(&frame).unwrap();
    let assignments: [(&str, &[u8]); 2] = [(&leader, b"p0"), (&follower, b"p1")];
    let req = sync_request(group_id, 2, &leader, &assignments);
    let synced: SyncGroupResponse = a.call(ApiKey::SyncGroup, 5, &req);
    assert_eq!(synced.error_code, NONE);
    let body = b.read_frame().expect("the follower's sync");
    assert_eq!(
        decode::<SyncGroupResponse>(body, ApiKey::SyncGroup, 5).error_code,
        NONE
    );
    ((a, leader), (b, follower))
}

fn members(client: &mut Client, group_id: &str) -> usize {
    describe(client, 5, group_id).groups[0].members.len()
}

// Goal: a classic member that stops heartbeating is removed once its session.timeout.ms
// has passed on the coordinator's clock (not before), and the group rebalances: the
// member still beating gets REBALANCE_IN_PROGRESS, rejoins alone at generation 3, and the
// silent one is UNKNOWN_MEMBER_ID. Time is the manual clock's: 10 s sessions, no waiting.
#[test]
fn a_silent_member_is_removed_after_its_session_timeout_and_the_group_rebalances() {
    let broker = manual_broker();
    let ((mut a, leader), (mut b, follower)) = stable_pair(&broker, "beats", (10_000, 30_000));
    broker.advance_ms(9_000);
    assert_eq!(heartbeat(&mut a, 4, "beats", 2, &leader), NONE);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(
        members(&mut a, "beats"),
        2,
        "removed before its session timeout"
    );

    broker.advance_ms(1_001);
    let rebalancing = code(ResponseError::RebalanceInProgress);
    eventually("the silent member's session expires", || {
        (heartbeat(&mut a, 4, "beats", 2, &leader) == rebalancing).then_some(())
    });
    send_join(&mut a, "beats", &leader, (10_000, 30_000));
    let rejoined = read_join(&mut a);
    assert_eq!(rejoined.error_code, NONE);
    assert_eq!(rejoined.generation_id, 3);
    assert_eq!(rejoined.members.len(), 1, "only the beating member is left");
    assert_eq!(
        heartbeat(&mut b, 4, "beats", 2, &follower),
        code(ResponseError::UnknownMemberId)
    );
}

// Goal: a JoinGroup rebalance that one member misses completes after the rebalance timeout
// (the longest of the members'), not before, with the members that rejoined; the one that
// missed it is UNKNOWN_MEMBER_ID. Sessions (60 s) outlast the rebalance timeout (20 s), so
// only the rebalance timer can end it.
#[test]
fn a_rebalance_a_member_misses_completes_after_the_rebalance_timeout() {
    let broker = manual_broker();
    let timeouts = (60_000, 20_000);
    let ((mut a, leader), (mut b, follower)) = stable_pair(&broker, "late", timeouts);
    let mut c = broker.client();
    let newcomer = member_id(&mut c, "late");
    send_join(&mut c, "late", &newcomer, timeouts);
    let rebalancing = code(ResponseError::RebalanceInProgress);
    eventually("the newcomer starts a rebalance", || {
        (heartbeat(&mut a, 4, "late", 2, &leader) == rebalancing).then_some(())
    });
    send_join(&mut a, "late", &leader, timeouts);
    broker.advance_ms(19_000);
    assert!(
        !answers_within(&mut a, 100),
        "the rebalance completed before its timeout"
    );

    broker.advance_ms(1_001);
    let (ja, jc) = (read_join(&mut a), read_join(&mut c));
    assert_eq!((ja.error_code, jc.error_code), (NONE, NONE));
    assert_eq!((ja.generation_id, jc.generation_id), (3, 3));
    assert_eq!(ja.leader.as_str(), leader);
    let mut joined: Vec<String> = ja.members.iter().map(|m| m.member_id.to_string()).collect();
    joined.sort();
    let mut want = vec![leader.clone(), newcomer];
    want.sort();
    assert_eq!(joined, want, "the member that missed the rebalance is out");
    assert_eq!(
        heartbeat(&mut b, 4, "late", 2, &follower),
        code(ResponseError::UnknownMemberId)
    );
}

fn cg_heartbeat(
    client: &mut Client,
    version: i16,
    group_id: &str,
    member_id: &str,
    epoch: i32,
    topics: Option<&[&str]>,
) -> ConsumerGroupHeartbeatResponse {
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = group(group_id);
    r.member_id = s(member_id);
    r.member_epoch = epoch;
    r.rebalance_timeout_ms = if epoch == 0 { 10_000 } else { -1 };
    r.subscribed_topic_names = topics.map(|ts| ts.iter().map(|t| topic_name(t)).collect());
    if epoch == 0 {
        r.topic_partitions = Some(Vec::new());
    }
    client.call(ApiKey::ConsumerGroupHeartbeat, version, &r)
}

fn cg_describe(client: &mut Client, version: i16, ids: &[&str]) -> ConsumerGroupDescribeResponse {
    let mut r = ConsumerGroupDescribeRequest::default();
    r.group_ids = ids.iter().map(|g| group(g)).collect();
    client.call(ApiKey::ConsumerGroupDescribe, version, &r)
}

// Goal: a KIP-848 member joins (epoch 0) and is given an epoch and every partition of its
// topic at v0 (broker-made member id) and v1 (client-made id); a wrong epoch is
// FENCED_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID, an unknown assignor
// UNSUPPORTED_ASSIGNOR; ConsumerGroupDescribe shows the member (v0, v1) and answers
// GROUP_ID_NOT_FOUND for a classic or unknown group; leaving (-1) ends the membership.
#[test]
fn consumer_group_heartbeat_and_describe() {
    let broker = broker();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 3), NONE);
    for version in 0..=1i16 {
        let g = format!("kip848-v{version}");
        let chosen = if version >= 1 {
            "0123456789abcdefABCDEF"
        } else {
            ""
        };
        let joined = cg_heartbeat(&mut client, version, &g, chosen, 0, Some(&["t"]));
        assert_eq!(joined.error_code, NONE, "ConsumerGroupHeartbeat v{version}");
        let member = joined.member_id.clone().expect("a member id").to_string();
        if version >= 1 {
            assert_eq!(member, chosen);
        }
        assert!(joined.member_epoch >= 1);
        let assigned: usize = joined.assignment.as_ref().map_or(0, |a| {
            a.topic_partitions.iter().map(|t| t.partitions.len()).sum()
        });
        assert_eq!(
            assigned, 3,
            "v{version}: the only member gets every partition"
        );

        let epoch = joined.member_epoch;
        let beat = cg_heartbeat(&mut client, version, &g, &member, epoch, None);
        assert_eq!(beat.error_code, NONE);
        let fenced = cg_heartbeat(&mut client, version, &g, &member, epoch + 5, None);
        assert_eq!(fenced.error_code, code(ResponseError::FencedMemberEpoch));
        let stranger = cg_heartbeat(&mut client, version, &g, "stranger-id-0123456789", 1, None);
        assert_eq!(stranger.error_code, code(ResponseError::UnknownMemberId));

        let d = cg_describe(&mut client, version, &[&g, "ghost"]);
        assert_eq!(
            d.groups[0].error_code, NONE,
            "ConsumerGroupDescribe v{version}"
        );
        assert_eq!(d.groups[0].members.len(), 1);
        assert_eq!(d.groups[0].members[0].member_id.as_str(), member);
        assert_eq!(d.groups[1].error_code, code(ResponseError::GroupIdNotFound));

        let left = cg_heartbeat(&mut client, version, &g, &member, -1, None);
        assert_eq!(left.error_code, NONE);
        assert_eq!(left.member_epoch, -1);
        let d = cg_describe(&mut client, version, &[&g]);
        assert!(d.groups[0].members.is_empty(), "v{version}: left");
    }
    let mut r = ConsumerGroupHeartbeatRequest::default();
    r.group_id = group("odd-assignor");
    r.member_epoch = 0;
    r.rebalance_timeout_ms = 10_000;
    r.subscribed_topic_names = Some(vec![topic_name("t")]);
    r.server_assignor = Some(s("no-such-assignor"));
    r.topic_partitions = Some(Vec::new());
    let resp: ConsumerGroupHeartbeatResponse = client.call(ApiKey::ConsumerGroupHeartbeat, 0, &r);
    assert_eq!(resp.error_code, code(ResponseError::UnsupportedAssignor));

    let classic = join(&mut client, 9, "classic", &["t"]);
    assert_eq!(classic.error_code, NONE);
    let d = cg_describe(&mut client, 1, &["classic"]);
    assert_eq!(d.groups[0].error_code, code(ResponseError::GroupIdNotFound));
}

// Goal: a KIP-848 member whose heartbeats stop is fenced once
// `group.consumer.session.timeout.ms` (45 s by default) has passed on the coordinator's
// clock, not before: ConsumerGroupDescribe no longer lists it, its next heartbeat is
// UNKNOWN_MEMBER_ID, and the member that kept beating stays.
#[test]
fn a_silent_kip848_member_is_fenced_after_its_session_timeout() {
    let broker = manual_broker();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 1), NONE);
    // Joins with a rebalance timeout far beyond the test, so no revocation deadline can
    // remove anyone: only the session timer is under test.
    let join = |client: &mut Client| {
        let mut r = ConsumerGroupHeartbeatRequest::default();
        r.group_id = group("fenced");
        r.member_epoch = 0;
        r.rebalance_timeout_ms = 600_000;
        r.subscribed_topic_names = Some(vec![topic_name("t")]);
        r.topic_partitions = Some(Vec::new());
        let resp: ConsumerGroupHeartbeatResponse =
            client.call(ApiKey::ConsumerGroupHeartbeat, 0, &r);
        assert_eq!(resp.error_code, NONE);
        (
            resp.member_id.expect("a member id").to_string(),
            resp.member_epoch,
        )
    };
    let (x, x_epoch) = join(&mut client);
    let (y, y_epoch) = join(&mut client);
    let listed = |client: &mut Client| {
        let d = cg_describe(client, 1, &["fenced"]);
        let mut ids: Vec<String> = d.groups[0]
            .members
            .iter()
            .map(|m| m.member_id.to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(listed(&mut client).len(), 2);

    broker.advance_ms(30_000);
    let beat = cg_heartbeat(&mut client, 0, "fenced", &x, x_epoch, None);
    assert_eq!(beat.error_code, NONE);
    broker.advance_ms(14_999);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(
        listed(&mut client).len(),
        2,
        "fenced before its session timeout"
    );

    broker.advance_ms(2);
    eventually("the silent member is fenced", || {
        (listed(&mut client) == vec![x.clone()]).then_some(())
    });
    let late = cg_heartbeat(&mut client, 0, "fenced", &y, y_epoch, None);
    assert_eq!(late.error_code, code(ResponseError::UnknownMemberId));
    let beat = cg_heartbeat(&mut client, 0, "fenced", &x, beat.member_epoch, None);
    assert_eq!(beat.error_code, NONE, "the beating member stays");
}

// Goal: the coordinator reads a classic consumer's subscription in every version of the
// consumer protocol (v0-v3, encoded by kafka-protocol): OffsetDelete refuses the subscribed
// topic (GROUP_SUBSCRIBED_TO_TOPIC) and deletes another, and the leader gets the member's
// metadata back byte for byte. Metadata that does not decode as a whole (cut short in its
// user data, a negative version) subscribes its member to nothing, so OffsetDelete goes
// ahead; the hand parser this replaced read the topics of both and refused.
#[test]
fn classic_subscriptions_of_every_consumer_protocol_version() {
    let broker = broker();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 1), NONE);
    assert_eq!(create_topic(&mut client, "other", 1), NONE);
    let mut truncated = subscription_v(1, &["t"]).to_vec();
    truncated.truncate(truncated.len() - 1);
    let mut negative = subscription_v(0, &["t"]).to_vec();
    negative[..2].copy_from_slice(&(-1i16).to_be_bytes());
    let cases: Vec<(String, Bytes, bool)> = (0..=3i16)
        .map(|v| (format!("cp-v{v}"), subscription_v(v, &["t"]), true))
        .chain([
            ("cp-truncated".to_string(), Bytes::from(truncated), false),
            ("cp-negative".to_string(), Bytes::from(negative), false),
        ])
        .collect();
    for (g, metadata, subscribed) in cases {
        let mut req = join_request(&g, "", &[]);
        req.protocols[0].metadata = metadata.clone();
        let first: JoinGroupResponse = client.call(ApiKey::JoinGroup, 9, &req);
        req.member_id = first.member_id;
        let joined: JoinGroupResponse = client.call(ApiKey::JoinGroup, 9, &req);
        assert_eq!(joined.error_code, NONE, "{g}");
        assert_eq!(joined.members[0].metadata, metadata, "{g}: verbatim");
        let member = joined.member_id.to_string();
        let sync = sync_request(&g, 1, &member, &[(&member, b"")]);
        let synced: SyncGroupResponse = client.call(ApiKey::SyncGroup, 5, &sync);
        assert_eq!(synced.error_code, NONE);
        for topic in ["t", "other"] {
            assert_eq!(commit(&mut client, 9, &g, 1, &member, topic, 5), NONE);
        }
        let refused = code(ResponseError::GroupSubscribedToTopic);
        let want = if subscribed { refused } else { NONE };
        assert_eq!(offset_delete(&mut client, &g, "t"), (NONE, want), "{g}");
        assert_eq!(offset_delete(&mut client, &g, "other"), (NONE, NONE), "{g}");
    }
}

// Goal: DescribeGroups shows a KIP-848 member classic-style: its metadata and assignment
// decode with kafka-protocol's ConsumerProtocolSubscription / ConsumerProtocolAssignment
// (v0) to its subscribed topic and its partitions.
#[test]
fn describe_groups_encodes_kip848_members_in_the_consumer_protocol() {
    use kafka_protocol::messages::{ConsumerProtocolAssignment, ConsumerProtocolSubscription};
    use kafka_protocol::protocol::Decodable;
    let broker = broker();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 3), NONE);
    let joined = cg_heartbeat(&mut client, 0, "kip848-classic-view", "", 0, Some(&["t"]));
    assert_eq!(joined.error_code, NONE);
    let d = describe(&mut client, 5, "kip848-classic-view");
    let m = &d.groups[0].members[0];
    let mut md = m.member_metadata.clone();
    assert_eq!(md.split_to(2)[..], [0, 0], "version 0");
    let sub = ConsumerProtocolSubscription::decode(&mut md, 0).expect("a subscription");
    assert_eq!(sub.topics, vec![s("t")]);
    let mut ma = m.member_assignment.clone();
    assert_eq!(ma.split_to(2)[..], [0, 0], "version 0");
    let a = ConsumerProtocolAssignment::decode(&mut ma, 0).expect("an assignment");
    assert_eq!(a.assigned_partitions.len(), 1);
    assert_eq!(a.assigned_partitions[0].topic, topic_name("t"));
    assert_eq!(a.assigned_partitions[0].partitions, vec![0, 1, 2]);
}
