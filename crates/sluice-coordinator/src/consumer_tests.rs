//! Behaviour tests of KIP-848 consumer groups through the coordinator façade:
//! deterministic, time driven by hand. Each test states its goal.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::assignor::TopicUuid;
use crate::consumer_group::{ConsumerHeartbeatRequest, ConsumerHeartbeatResponse, TopicsSnapshot};
use crate::*;

const T1: TopicUuid = [1; 16];
const T2: TopicUuid = [2; 16];

fn config() -> GroupConfig {
    GroupConfig {
        group_min_session_timeout_ms: 1_000,
        group_initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

/// The coordinator, the clock, the topic registry and every record persisted so far.
struct H {
    c: GroupCoordinator,
    now: i64,
    topics: TopicsSnapshot,
    next_reply: u64,
    log: Vec<StoreRecord>,
}

impl H {
    fn new() -> Self {
        let mut topics = TopicsSnapshot::new();
        topics.insert("orders", T1, 6);
        topics.insert("payments", T2, 3);
        Self {
            c: GroupCoordinator::new(config(), 42),
            now: 1_000_000,
            topics,
            next_reply: 0,
            log: Vec::new(),
        }
    }

    fn send(&mut self, req: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse {
        self.next_reply += 1;
        let id = ReplyId(self.next_reply);
        let fx = self
            .c
            .consumer_group_heartbeat(self.now, id, req, &self.topics);
        self.log.extend(fx.persist);
        assert_eq!(fx.replies.len(), 1, "exactly one answer per heartbeat");
        match fx.replies.into_iter().next() {
            Some((rid, GroupReply::ConsumerHeartbeat(r))) if rid == id => r,
            other => panic!("unexpected reply {other:?}"),
        }
    }

    fn tick(&mut self, advance: i64) {
        self.now += advance;
        let fx = self.c.tick(self.now);
        self.log.extend(fx.persist);
    }

    fn group(&self, g: &str) -> &ConsumerGroup {
        self.c.consumer_group(g).expect("consumer group")
    }
}

fn join(group: &str, member: &str, topics: &[&str]) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(topics.iter().map(|t| t.to_string()).collect()),
        topic_partitions: Some(Vec::new()),
        client_id: format!("client-{member}"),
        client_host: "/10.0.0.1".into(),
        api_version: 1,
        ..Default::default()
    }
}

fn beat(
    group: &str,
    member: &str,
    epoch: i32,
    owned: Option<Vec<(TopicUuid, Vec<i32>)>>,
) -> ConsumerHeartbeatRequest {
    ConsumerHeartbeatRequest {
        group_id: group.into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        topic_partitions: owned,
        api_version: 1,
        ..Default::default()
    }
}

fn count(a: &Option<Vec<(TopicUuid, Vec<i32>)>>) -> usize {
    a.as_ref()
        .map_or(0, |v| v.iter().map(|(_, p)| p.len()).sum())
}

// Goal: a lone member gets every subscribed partition at once; a second member's join
// makes the first revoke before the second gets anything, and the epochs follow Kafka's
// rules (revoking member keeps its epoch; the new owner gets partitions only once
// released).
#[test]
fn join_revoke_then_assign() {
    let mut h = H::new();
    let a = h.send(join("g", "a", &["orders"]));
    assert_eq!(a.error, None);
    assert_eq!(a.member_id.as_deref(), Some("a"));
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.heartbeat_interval_ms, 5_000);
    assert_eq!(a.assignment, Some(vec![(T1, (0..6).collect())]));
    assert_eq!(h.group("g").state_name(), "Stable");

    let b = h.send(join("g", "b", &["orders"]));
    assert_eq!(b.member_epoch, 2, "b joins at the new group epoch");
    assert_eq!(count(&b.assignment), 0, "nothing is free yet");
    assert_eq!(h.group("g").state_name(), "Reconciling");

    // a still owns everything: told to keep only its target, at its old epoch.
    let all = Some(vec![(T1, (0..6).collect())]);
    let a2 = h.send(beat("g", "a", 1, all.clone()));
    assert_eq!(a2.member_epoch, 1);
    let kept = a2
        .assignment
        .clone()
        .expect("revocation is an assignment change");
    assert_eq!(count(&a2.assignment), 3);
    // Without an acknowledgement nothing moves.
    let b2 = h.send(beat("g", "b", 2, Some(vec![])));
    assert_eq!(count(&b2.assignment), 0);
    let a3 = h.send(beat("g", "a", 1, all));
    assert_eq!(a3.member_epoch, 1);
    // a acknowledges: epoch 2; b picks the released partitions up.
    let a4 = h.send(beat("g", "a", 1, Some(kept.clone())));
    assert_eq!(a4.member_epoch, 2);
    let b3 = h.send(beat("g", "b", 2, Some(vec![])));
    assert_eq!(count(&b3.assignment), 3);
    let theirs: BTreeSet<i32> = b3.assignment.unwrap()[0].1.iter().copied().collect();
    let mine: BTreeSet<i32> = kept[0].1.iter().copied().collect();
    assert!(theirs.is_disjoint(&mine));
    h.group("g").check_invariants();
    assert_eq!(h.group("g").state_name(), "Stable");
    assert_eq!(h.group("g").group_epoch(), 2);
}

// Goal: request validation and epoch checks answer with Kafka's errors.
#[test]
fn heartbeat_errors() {
    let mut h = H::new();
    let bad = |f: &dyn Fn(&mut ConsumerHeartbeatRequest)| {
        let mut r = join("g", "a", &["orders"]);
        f(&mut r);
        r
    };
    for (req, want) in [
        (bad(&|r| r.group_id.clear()), GroupError::InvalidRequest),
        (bad(&|r| r.member_id.clear()), GroupError::InvalidRequest), // v1 needs an id
        (
            bad(&|r| r.rebalance_timeout_ms = -1),
            GroupError::InvalidRequest,
        ),
        (
            bad(&|r| r.subscribed_topic_names = None),
            GroupError::InvalidRequest,
        ),
        (
            bad(&|r| r.topic_partitions = Some(vec![(T1, vec![0])])),
            GroupError::InvalidRequest,
        ),
        (
            bad(&|r| r.subscribed_topic_regex = Some("ord(".into())),
            GroupError::InvalidRegularExpression,
        ),
        (
            bad(&|r| r.subscribed_topic_regex = Some(r"\w{1000}".into())),
            GroupError::InvalidRegularExpression,
        ),
        (
            bad(&|r| r.instance_id = Some(String::new())),
            GroupError::InvalidRequest,
        ),
        (bad(&|r| r.member_epoch = -3), GroupError::InvalidRequest),
        (bad(&|r| r.member_epoch = -2), GroupError::InvalidRequest), // static leave, no instance
        (
            bad(&|r| r.server_assignor = Some("sticky".into())),
            GroupError::UnsupportedAssignor,
        ),
    ] {
        assert_eq!(h.send(req).error, Some(want));
    }
    assert!(
        h.c.consumer_group("g").is_none(),
        "refused joins leave no group behind"
    );

    // v0: the coordinator generates the member id.
    let mut v0 = join("g", "", &["orders"]);
    v0.api_version = 0;
    let r = h.send(v0);
    let id = r.member_id.unwrap();
    assert_eq!(id.len(), 36, "UUID-shaped: {id}");
    assert_eq!(r.member_epoch, 1);

    assert_eq!(
        h.send(beat("g", "nobody", 1, None)).error,
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(
        h.send(beat("other", "x", 1, None)).error,
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(
        h.send(beat("g", &id, 5, None)).error,
        Some(GroupError::FencedMemberEpoch)
    );
    // A second member bumps the epoch; `id` is told to revoke and stays at 1.
    h.send(join("g", "b", &["orders"]));
    let r = h.send(beat("g", &id, 1, Some(vec![(T1, (0..6).collect())])));
    assert_eq!(r.member_epoch, 1);
    let kept = r.assignment.unwrap();
    let r = h.send(beat("g", &id, 1, Some(kept.clone())));
    assert_eq!(r.member_epoch, 2);
    // The response bumping it to 2 was "lost": epoch 1 with a subset of its partitions is
    // accepted (Kafka), epoch 1 without ownership or with a partition it lacks is fenced.
    assert_eq!(h.send(beat("g", &id, 1, Some(kept.clone()))).error, None);
    assert_eq!(
        h.send(beat("g", &id, 1, None)).error,
        Some(GroupError::FencedMemberEpoch)
    );
    assert_eq!(
        h.send(beat("g", &id, 1, Some(vec![(T1, (0..6).collect())])))
            .error,
        Some(GroupError::FencedMemberEpoch)
    );
    assert_eq!(
        h.send(beat("g", &id, 0, None)).error,
        Some(GroupError::InvalidRequest)
    );

    // A fenced member rejoins with epoch 0 and its own id: it starts over.
    let r = h.send(join("g", &id, &["orders"]));
    assert_eq!(r.error, None);
    assert!(r.member_epoch >= 2);
    h.group("g").check_invariants();
}

// Goal: the group size bound refuses new members with GROUP_MAX_SIZE_REACHED.
#[test]
fn group_max_size() {
    let mut h = H::new();
    h.c = GroupCoordinator::new(
        GroupConfig {
            consumer_group_max_size: 2,
            ..config()
        },
        1,
    );
    assert_eq!(h.send(join("g", "a", &["orders"])).error, None);
    assert_eq!(h.send(join("g", "b", &["orders"])).error, None);
    assert_eq!(
        h.send(join("g", "c", &["orders"])).error,
        Some(GroupError::GroupMaxSizeReached)
    );
    assert_eq!(h.group("g").member_ids(), vec!["a", "b"]);
}

// Goal: leaving (-1) frees partitions at once; session expiry and a missed revocation
// deadline remove members; each removal bumps the epoch.
#[test]
fn leave_and_timeouts() {
    let mut h = H::new();
    h.send(join("g", "a", &["orders"]));
    h.send(join("g", "b", &["orders"]));
    let e = h.group("g").group_epoch();
    let r = h.send(beat("g", "b", -1, None));
    assert_eq!((r.error, r.member_epoch), (None, -1));
    assert_eq!(h.group("g").group_epoch(), e + 1);
    assert_eq!(
        h.send(beat("g", "b", -1, None)).error,
        Some(GroupError::UnknownMemberId)
    );
    // a converges to everything again.
    let r = h.send(beat("g", "a", 1, Some(vec![(T1, (0..6).collect())])));
    assert_eq!(r.member_epoch, e + 1);
    assert_eq!(h.c.next_deadline_ms(), Some(h.now + 45_000), "a's session");

    // Session expiry.
    h.send(join("g", "c", &["orders"]));
    h.tick(40_000);
    h.send(beat("g", "a", e + 1, None)); // a stays alive; c is silent
    h.tick(6_000);
    assert_eq!(h.group("g").member_ids(), vec!["a"]);

    // Revocation deadline: a is told to revoke and never acknowledges.
    let before = h.group("g").member_epoch("a").unwrap();
    h.send(join("g", "d", &["orders"]));
    let r = h.send(beat("g", "a", before, None));
    assert_eq!(r.member_epoch, before, "revoking keeps the epoch");
    for _ in 0..6 {
        h.tick(5_000);
        h.send(beat("g", "a", before, None));
        h.send(beat(
            "g",
            "d",
            h.group("g").member_epoch("d").unwrap(),
            Some(vec![]),
        ));
    }
    h.tick(1_000);
    assert_eq!(
        h.group("g").member_ids(),
        vec!["d"],
        "a missed its revocation deadline"
    );
    let r = h.send(beat(
        "g",
        "d",
        h.group("g").member_epoch("d").unwrap(),
        Some(vec![]),
    ));
    assert_eq!(count(&r.assignment), 6);
    h.group("g").check_invariants();
}

// Goal: static members: -2 keeps the partitions; a new incarnation with the same
// instance id takes them over without a rebalance; while the old one is active, a new one
// gets UNRELEASED_INSTANCE_ID; a mismatched instance id is FENCED_INSTANCE_ID.
#[test]
fn static_members() {
    let mut h = H::new();
    let mut j = join("g", "a1", &["orders"]);
    j.instance_id = Some("inst-a".into());
    let r = h.send(j.clone());
    assert_eq!(r.member_epoch, 1);
    h.send(join("g", "b", &["orders"]));
    let r = h.send(beat("g", "a1", 1, Some(vec![(T1, (0..6).collect())])));
    let kept = r.assignment.unwrap();
    let r = h.send(beat("g", "a1", 1, Some(kept.clone())));
    assert_eq!(r.member_epoch, 2);

    let mut j2 = j.clone();
    j2.member_id = "a2".into();
    assert_eq!(
        h.send(j2.clone()).error,
        Some(GroupError::UnreleasedInstanceId)
    );
    let mut wrong = beat("g", "b", 2, None);
    wrong.instance_id = Some("inst-a".into());
    assert_eq!(h.send(wrong).error, Some(GroupError::FencedInstanceId));

    let mut leave = beat("g", "a1", -2, None);
    leave.instance_id = Some("inst-a".into());
    assert_eq!(h.send(leave).member_epoch, -2);
    let epoch = h.group("g").group_epoch();
    let r = h.send(j2);
    assert_eq!(r.error, None);
    assert_eq!(r.member_id.as_deref(), Some("a2"));
    assert_eq!(r.member_epoch, 2, "resumes at its epoch");
    assert_eq!(r.assignment, Some(kept), "with its partitions");
    assert_eq!(h.group("g").group_epoch(), epoch, "no rebalance");
    assert_eq!(h.group("g").member_ids(), vec!["a2", "b"]);
    h.group("g").check_invariants();
}

// Goal: new partitions of a subscribed topic and subscription changes bump the epoch and
// reach the members; the range assignor lays partitions out by member id.
#[test]
fn metadata_and_subscription_changes() {
    let mut h = H::new();
    let mut j = join("g", "a", &["orders"]);
    j.server_assignor = Some("range".into());
    h.send(j);
    let mut j = join("g", "b", &["orders"]);
    j.server_assignor = Some("range".into());
    h.send(j);
    let r = h.send(beat("g", "a", 1, Some(vec![(T1, (0..6).collect())])));
    assert_eq!(r.assignment, Some(vec![(T1, vec![0, 1, 2])]));
    h.send(beat("g", "a", 1, Some(vec![(T1, vec![0, 1, 2])])));
    let r = h.send(beat("g", "b", 2, Some(vec![])));
    assert_eq!(r.assignment, Some(vec![(T1, vec![3, 4, 5])]));
    assert_eq!(
        h.c.describe_consumer_group("g").unwrap().assignor_name,
        "range"
    );

    h.topics.insert("orders", T1, 8);
    let e = h.group("g").group_epoch();
    let r = h.send(beat("g", "b", 2, Some(vec![(T1, vec![3, 4, 5])])));
    assert_eq!(h.group("g").group_epoch(), e + 1);
    assert_eq!(
        r.assignment,
        Some(vec![(T1, vec![4, 5])]),
        "3 is revoked first"
    );
    let r = h.send(beat("g", "b", 2, Some(vec![(T1, vec![4, 5])])));
    assert_eq!(
        r.assignment,
        Some(vec![(T1, vec![4, 5, 6, 7])]),
        "then 6 and 7 (free) come"
    );
    assert_eq!(r.member_epoch, e + 1);

    let mut sub = beat("g", "a", 2, None);
    sub.subscribed_topic_names = Some(vec!["orders".into(), "payments".into()]);
    h.send(sub);
    assert_eq!(h.group("g").group_epoch(), e + 2);
    let d = h.c.describe_consumer_group("g").unwrap();
    let a = d.members.iter().find(|m| m.member_id == "a").unwrap();
    assert_eq!(a.subscribed_topic_names, vec!["orders", "payments"]);
    assert!(a
        .target_assignment
        .iter()
        .any(|t| t.topic_name == "payments" && t.partitions == vec![0, 1, 2]));
}

// Goal: classic and consumer groups share one id space: a classic group with members
// refuses ConsumerGroupHeartbeat; a consumer group with members refuses JoinGroup; an
// Empty group of either type converts.
#[test]
fn group_types_and_conversion() {
    let mut h = H::new();
    let join_classic = |member: &str| JoinGroupRequest {
        group_id: "g".into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "/h".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![JoinProtocol {
            name: "range".into(),
            metadata: Bytes::new(),
            subscription: None,
        }],
        require_known_member_id: false,
    };
    h.send(join("g", "a", &["orders"]));
    let fx = h.c.join_group(h.now, ReplyId(9_000), join_classic(""));
    match &fx.replies[0].1 {
        GroupReply::Join(r) => assert_eq!(r.error, Some(GroupError::InconsistentGroupProtocol)),
        other => panic!("{other:?}"),
    }
    // Empty consumer group → classic.
    h.send(beat("g", "a", -1, None));
    let fx = h.c.join_group(h.now, ReplyId(9_001), join_classic(""));
    assert!(fx.persist.contains(&StoreRecord::ConsumerGroup {
        group_id: "g".into(),
        value: None
    }));
    assert!(h.c.consumer_group("g").is_none());
    assert_eq!(h.c.list_groups(&[], &["classic".into()]).len(), 1);
    // Classic with members → refused.
    let r = h.send(join("g", "x", &["orders"]));
    assert_eq!(r.error, Some(GroupError::GroupIdNotFound));
    // The classic member leaves; the Empty classic group converts back.
    let member = h.c.group("g").unwrap().member_ids()[0].clone();
    let _ = h.c.leave_group(
        h.now,
        "g",
        &[LeavingMember {
            member_id: member,
            group_instance_id: None,
        }],
    );
    assert_eq!(h.send(join("g", "x", &["orders"])).error, None);
    let listed = h.c.list_groups(&[], &[]);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].group_type, listed[0].protocol_type.as_str()),
        ("consumer", "consumer")
    );
    assert!(h.c.list_groups(&[], &["classic".into()]).is_empty());
    assert_eq!(
        h.c.list_groups(&["stable".into()], &["consumer".into()])
            .len(),
        1
    );
    // ConsumerGroupDescribe of a classic or unknown group: GROUP_ID_NOT_FOUND.
    assert_eq!(
        h.c.describe_consumer_group("nope"),
        Err(GroupError::GroupIdNotFound)
    );
}

// Goal: OffsetCommit v9 / OffsetFetch v9 check the member epoch of consumer-group
// members; standalone commits only reach an empty group.
#[test]
fn offsets_check_member_epochs() {
    let mut h = H::new();
    h.send(join("g", "a", &["orders"]));
    let auth = |member: &str, epoch: i32| CommitAuth {
        group_id: "g".into(),
        generation_id: epoch,
        member_id: member.into(),
        group_instance_id: None,
    };
    let now = h.now;
    assert_eq!(h.c.validate_offset_commit(now, &auth("a", 1)), Ok(()));
    assert_eq!(
        h.c.validate_offset_commit(now, &auth("a", 2)),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        h.c.validate_offset_commit(now, &auth("z", 1)),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        h.c.validate_offset_commit(now, &auth("", -1)),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(h.c.validate_offset_fetch("g", Some("a"), 1), Ok(()));
    assert_eq!(
        h.c.validate_offset_fetch("g", Some("a"), 0),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        h.c.validate_offset_fetch("g", Some("z"), 1),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(h.c.validate_offset_fetch("g", None, -1), Ok(()));
    assert_eq!(
        h.c.validate_offset_fetch("classic-or-unknown", Some("q"), 7),
        Ok(())
    );

    // A commit lands in the shared offsets store.
    let rec =
        h.c.offset_record(
            "g",
            TopicPartition {
                topic: "orders".into(),
                partition: 0,
            },
            5,
            -1,
            None,
            now,
        )
        .unwrap();
    h.c.apply(&rec, 100, now);
    assert_eq!(h.c.fetch_offsets("g", None).len(), 1);
    // Offsets do not expire while the group has members, even long after the commit.
    h.tick(8 * 24 * 3_600_000);
    h.send(join("g", "a", &["orders"])); // (rejoin after its session expired)
    h.tick(1);
    assert_eq!(h.c.fetch_offsets("g", None).len(), 1);
    // OffsetDelete: subscribed topics refused while members subscribe.
    let parts = [TopicPartition {
        topic: "orders".into(),
        partition: 0,
    }];
    assert_eq!(
        h.c.validate_offset_delete("g", &parts),
        Ok(vec![Err(GroupError::GroupSubscribedToTopic)])
    );
    assert_eq!(
        h.c.validate_delete_group("g"),
        Err(GroupError::NonEmptyGroup)
    );
    h.send(beat(
        "g",
        "a",
        h.group("g").member_epoch("a").unwrap(),
        None,
    ));
    let e = h.group("g").member_epoch("a").unwrap();
    h.send(beat("g", "a", -1, None));
    let _ = e;
    assert_eq!(h.c.validate_offset_commit(h.now, &auth("", -1)), Ok(()));
    assert!(h.c.validate_delete_group("g").is_ok());
}

// Goal: after a restart (replay of the persisted records) the group exists with its
// epoch and no members: heartbeats get UNKNOWN_MEMBER_ID, the rejoin gets a larger
// epoch, and the snapshot carries the group.
#[test]
fn restart_keeps_group_and_epoch() {
    let mut h = H::new();
    h.send(join("g", "a", &["orders"]));
    h.send(join("g", "b", &["orders"]));
    let epoch = h.group("g").group_epoch();
    assert!(h.log.iter().any(
        |r| matches!(r, StoreRecord::ConsumerGroup { value: Some(v), .. } if v.epoch == epoch)
    ));
    let snap = h.c.snapshot();
    assert!(snap.contains(&StoreRecord::ConsumerGroup {
        group_id: "g".into(),
        value: Some(ConsumerGroupValue { epoch })
    }));
    for records in [h.log.clone(), snap] {
        let mut fresh = GroupCoordinator::new(config(), 7);
        for (i, r) in records.iter().enumerate() {
            let back = StoreRecord::decode(&r.encode_key(), r.encode_value().as_deref()).unwrap();
            fresh.apply(&back, i as i64, h.now);
        }
        fresh.finish_load(h.now, |_| None);
        let cg = fresh.consumer_group("g").expect("restored");
        assert!(cg.is_empty());
        assert_eq!(cg.group_epoch(), epoch);
        let mut h2 = H::new();
        h2.c = fresh;
        assert_eq!(
            h2.send(beat("g", "a", epoch, None)).error,
            Some(GroupError::UnknownMemberId)
        );
        let r = h2.send(join("g", "a", &["orders"]));
        assert_eq!(r.member_epoch, epoch + 1);
        assert_eq!(count(&r.assignment), 6);
        assert_eq!(h2.c.describe_group("g").protocol_type, "consumer");
    }
}

// Goal: DescribeGroups describes a consumer group classic-style (protocol type "consumer",
// each member's subscription and assignment by topic name, for the broker to encode in the
// consumer protocol); ConsumerGroupDescribe has the epochs.
#[test]
fn describe_views() {
    let mut h = H::new();
    h.send(join("g", "a", &["payments"]));
    let d = h.c.describe_group("g");
    assert_eq!(
        (d.state, d.protocol_type.as_str(), d.protocol_name.as_str()),
        ("Stable", "consumer", "uniform")
    );
    let m = &d.members[0];
    assert_eq!(m.client_id, "client-a");
    assert_eq!(
        m.data,
        MemberData::Consumer {
            topics: vec!["payments".into()],
            assignment: vec![("payments".into(), vec![0, 1, 2])],
        }
    );
    let cd = h.c.describe_consumer_group("g").unwrap();
    assert_eq!(
        (cd.group_epoch, cd.assignment_epoch, cd.state),
        (1, 1, "Stable")
    );
    assert_eq!(cd.members[0].member_epoch, 1);
    assert_eq!(cd.members[0].assignment[0].topic_name, "payments");
}

/// A simulated client: what it owns and its epoch.
#[derive(Debug, Clone)]
struct Client {
    epoch: i32,
    owned: Vec<(TopicUuid, Vec<i32>)>,
    topics: Vec<String>,
}

// Goal: under random joins, leaves, silent members (session expiry), lost responses,
// unreported ownership, partition additions and subscription changes, no partition is
// ever owned by two members (the coordinator's record, and every live client's view is
// within it); once churn stops, every partition of the subscribed topics ends assigned
// exactly once and the group is Stable.
#[test]
fn randomized_reconciliation() {
    let mut converged = 0;
    for seed in 1..=40u64 {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        let mut h = H::new();
        let assignor = if seed % 2 == 0 { "uniform" } else { "range" };
        let mut clients: BTreeMap<String, Client> = BTreeMap::new();
        let mut next_id = 0;
        let topic_sets: [&[&str]; 3] = [&["orders"], &["orders", "payments"], &["payments"]];
        let handle = |h: &mut H,
                      clients: &mut BTreeMap<String, Client>,
                      id: &str,
                      r: ConsumerHeartbeatResponse,
                      lose: bool| {
            let c = clients.get_mut(id).unwrap();
            match r.error {
                None => {
                    if lose {
                        return; // the response never arrived
                    }
                    c.epoch = r.member_epoch;
                    if let Some(a) = r.assignment {
                        c.owned = a;
                    }
                }
                Some(GroupError::UnknownMemberId) | Some(GroupError::FencedMemberEpoch) => {
                    c.owned.clear();
                    c.epoch = 0;
                }
                Some(e) => panic!("seed {seed}: unexpected {e:?}"),
            }
            let _ = h;
        };
        for _step in 0..400 {
            match rand(20) {
                0 | 1 if clients.len() < 8 => {
                    next_id += 1;
                    let id = format!("m{next_id}");
                    let topics: Vec<String> = topic_sets[rand(3) as usize]
                        .iter()
                        .map(|s| s.to_string())
                        .collect();
                    clients.insert(
                        id.clone(),
                        Client {
                            epoch: 0,
                            owned: vec![],
                            topics,
                        },
                    );
                }
                2 if !clients.is_empty() => {
                    let id = clients
                        .keys()
                        .nth(rand(clients.len() as u64) as usize)
                        .unwrap()
                        .clone();
                    let r = h.send(beat("g", &id, -1, None));
                    assert!(r.error.is_none() || r.error == Some(GroupError::UnknownMemberId));
                    clients.remove(&id);
                }
                3 => h.tick(rand(20_000) as i64),
                4 if rand(10) == 0 => {
                    let n = 6 + rand(6) as i32;
                    h.topics.insert("orders", T1, n.max(6));
                }
                5 if !clients.is_empty() => {
                    let id = clients
                        .keys()
                        .nth(rand(clients.len() as u64) as usize)
                        .unwrap()
                        .clone();
                    clients.get_mut(&id).unwrap().topics = topic_sets[rand(3) as usize]
                        .iter()
                        .map(|s| s.to_string())
                        .collect();
                    let c = clients[&id].clone();
                    let mut req = beat("g", &id, c.epoch, Some(c.owned.clone()));
                    req.subscribed_topic_names = Some(c.topics.clone());
                    if c.epoch == 0 {
                        req = join(
                            "g",
                            &id,
                            &c.topics.iter().map(String::as_str).collect::<Vec<_>>(),
                        );
                    }
                    let r = h.send(req);
                    handle(&mut h, &mut clients, &id, r, false);
                }
                _ if !clients.is_empty() => {
                    let id = clients
                        .keys()
                        .nth(rand(clients.len() as u64) as usize)
                        .unwrap()
                        .clone();
                    let c = clients[&id].clone();
                    let mut req = if c.epoch == 0 {
                        join(
                            "g",
                            &id,
                            &c.topics.iter().map(String::as_str).collect::<Vec<_>>(),
                        )
                    } else {
                        beat("g", &id, c.epoch, (rand(4) != 0).then(|| c.owned.clone()))
                    };
                    req.server_assignor = Some(assignor.into());
                    h.now += rand(3_000) as i64;
                    let r = h.send(req);
                    handle(&mut h, &mut clients, &id, r, rand(15) == 0);
                }
                _ => {}
            }
            if let Some(g) = h.c.consumer_group("g") {
                g.check_invariants();
                // A live member's own view never exceeds what the coordinator counts as its.
                for (id, c) in &clients {
                    if g.member_epoch(id).is_none() {
                        continue;
                    }
                    let server = g.owned_by(id);
                    for (t, ps) in &c.owned {
                        for p in ps {
                            assert!(
                                server.contains(&(*t, *p)),
                                "seed {seed}: {id} holds {p} the coordinator gave away"
                            );
                        }
                    }
                }
            }
        }
        // Churn stops: every client heartbeats in rounds, reporting what it owns.
        for _round in 0..12 {
            let ids: Vec<String> = clients.keys().cloned().collect();
            for id in ids {
                let c = clients[&id].clone();
                let req = if c.epoch == 0 {
                    let mut j = join(
                        "g",
                        &id,
                        &c.topics.iter().map(String::as_str).collect::<Vec<_>>(),
                    );
                    j.server_assignor = Some(assignor.into());
                    j
                } else {
                    beat("g", &id, c.epoch, Some(c.owned.clone()))
                };
                h.now += 10;
                let r = h.send(req);
                handle(&mut h, &mut clients, &id, r, false);
            }
        }
        let Some(g) = h.c.consumer_group("g") else {
            continue;
        };
        if g.is_empty() {
            continue;
        }
        converged += 1;
        g.check_invariants();
        assert_eq!(g.state_name(), "Stable", "seed {seed}");
        let mut seen = BTreeSet::new();
        for (id, c) in &clients {
            let mut mine: Vec<(TopicUuid, Vec<i32>)> = c.owned.clone();
            mine.sort();
            assert_eq!(
                mine,
                g.assigned(id),
                "seed {seed}: {id} agrees with the coordinator"
            );
            for (t, ps) in &c.owned {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "seed {seed}: {p} twice");
                }
            }
        }
        let subscribed: BTreeSet<&str> = clients
            .values()
            .flat_map(|c| c.topics.iter().map(String::as_str))
            .collect();
        for name in subscribed {
            let info = h.topics.get(name).unwrap();
            for p in 0..info.partitions {
                assert!(
                    seen.contains(&(info.id, p)),
                    "seed {seed}: {name}-{p} unassigned"
                );
            }
        }
    }
    assert!(converged >= 20, "only {converged} seeds ended with members");
}

fn join_regex(group: &str, member: &str, regex: &str) -> ConsumerHeartbeatRequest {
    let mut r = join(group, member, &[]);
    r.subscribed_topic_names = None;
    r.subscribed_topic_regex = Some(regex.into());
    r
}

// Goal: a KIP-848 regex subscription gets every topic whose whole name matches, a topic
// created later is picked up on the next heartbeat (with a new group epoch), a deleted one
// goes, and names and a regex combine.
#[test]
fn regex_subscription_follows_topics() {
    let mut h = H::new();
    h.topics.insert("orders-eu", [3; 16], 2);
    let a = h.send(join_regex("g", "a", "orders.*"));
    assert_eq!(a.error, None);
    let got: BTreeMap<TopicUuid, Vec<i32>> = a.assignment.unwrap().into_iter().collect();
    assert_eq!(got.get(&T1), Some(&(0..6).collect()));
    assert_eq!(got.get(&[3; 16]), Some(&vec![0, 1]));
    assert!(!got.contains_key(&T2), "payments does not match");
    let epoch = a.member_epoch;

    // A matching topic is created: the next heartbeat re-resolves and assigns it.
    h.topics.insert("orders-us", [4; 16], 1);
    let owned: Vec<(TopicUuid, Vec<i32>)> = got.into_iter().collect();
    let a2 = h.send(beat("g", "a", epoch, Some(owned)));
    assert!(
        a2.member_epoch > epoch,
        "a new matching topic bumps the group epoch"
    );
    let got2: BTreeMap<TopicUuid, Vec<i32>> = a2.assignment.unwrap().into_iter().collect();
    assert_eq!(got2.get(&[4; 16]), Some(&vec![0]));

    // Deleted: gone from the assignment.
    let mut topics = TopicsSnapshot::new();
    topics.insert("orders", T1, 6);
    topics.insert("payments", T2, 3);
    h.topics = topics;
    let owned2: Vec<(TopicUuid, Vec<i32>)> = got2.into_iter().collect();
    let a3 = h.send(beat("g", "a", a2.member_epoch, Some(owned2)));
    assert_eq!(a3.assignment, Some(vec![(T1, (0..6).collect())]));

    // Names and a regex together: the union.
    let mut b = join("g2", "b", &["payments"]);
    b.subscribed_topic_regex = Some("ord.rs".into());
    let b = h.send(b);
    assert_eq!(
        b.assignment,
        Some(vec![(T1, (0..6).collect()), (T2, (0..3).collect())])
    );
    h.group("g").check_invariants();
    let d = h.c.consumer_group("g").unwrap().describe_consumer();
    assert_eq!(
        d.members[0].subscribed_topic_regex.as_deref(),
        Some("orders.*")
    );
}

// Goal: a versioned snapshot is resolved once per version (the broker's registry version
// moves on every create or delete), and an empty regex clears the subscription.
#[test]
fn regex_resolution_per_registry_version() {
    let mut h = H::new();
    let mut topics = TopicsSnapshot::with_version(7);
    topics.insert("orders", T1, 6);
    h.topics = topics.clone();
    let a = h.send(join_regex("g", "a", "orders|audit"));
    assert_eq!(a.assignment, Some(vec![(T1, (0..6).collect())]));
    // Same version: the cached resolution stands (the registry cannot differ at one version).
    h.topics.insert("audit", T2, 3);
    let a2 = h.send(beat("g", "a", a.member_epoch, None));
    assert_eq!(a2.member_epoch, a.member_epoch);
    // New version: resolved again.
    let mut next = TopicsSnapshot::with_version(8);
    next.insert("orders", T1, 6);
    next.insert("audit", T2, 3);
    h.topics = next;
    let a3 = h.send(beat("g", "a", a.member_epoch, None));
    assert!(a3.member_epoch > a.member_epoch);
    // Cleared with an empty regex and no names: nothing left to own.
    let mut clear = beat("g", "a", a3.member_epoch, None);
    clear.subscribed_topic_regex = Some(String::new());
    let a4 = h.send(clear);
    assert_eq!(count(&a4.assignment), 0);
}
