//! Behaviour tests of the group coordinator façade: deterministic, time driven by hand.
//! Each test states its goal; the harness checks on every call that no ReplyId is answered
//! twice.

use std::collections::HashMap;

use bytes::Bytes;

use crate::*;

const SESSION: i32 = 10_000;
const REBALANCE: i32 = 30_000;

fn config() -> GroupConfig {
    GroupConfig {
        group_min_session_timeout_ms: 1_000,
        group_max_session_timeout_ms: 60_000,
        group_initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

/// Consumer-protocol subscription metadata naming `topics`.
fn sub(topics: &[&str]) -> Bytes {
    let mut b = vec![0, 1];
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    Bytes::from(b)
}

/// What the broker decodes `sub(&["orders"])` to.
fn orders() -> ConsumerSubscription {
    ConsumerSubscription {
        topics: vec!["orders".into()],
        ..ConsumerSubscription::default()
    }
}

/// The broker's decoder as far as these tests need it: `sub(&["orders"])` is a
/// subscription to "orders", anything else does not decode.
fn decode_orders(metadata: &[u8]) -> Option<ConsumerSubscription> {
    (metadata == &sub(&["orders"])[..]).then(orders)
}

fn protos(names: &[&str]) -> Vec<JoinProtocol> {
    names
        .iter()
        .map(|n| JoinProtocol {
            name: n.to_string(),
            metadata: sub(&["orders"]),
            subscription: Some(orders()),
        })
        .collect()
}

/// Opaque metadata and assignment of a classic member as DescribeGroups shows them.
fn opaque(m: &DescribedMember) -> (&Bytes, &Bytes) {
    match &m.data {
        MemberData::Opaque {
            metadata,
            assignment,
        } => (metadata, assignment),
        MemberData::Consumer { .. } => panic!("a classic member described as KIP-848"),
    }
}

fn jreq(group: &str, member: &str) -> JoinGroupRequest {
    JoinGroupRequest {
        group_id: group.into(),
        member_id: member.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/10.0.0.1".into(),
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: REBALANCE,
        protocol_type: "consumer".into(),
        protocols: protos(&["range"]),
        require_known_member_id: true,
    }
}

fn hb(group: &str, member: &str, generation: i32) -> HeartbeatRequest {
    HeartbeatRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
    }
}

fn sreq(
    group: &str,
    member: &str,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncGroupRequest {
    SyncGroupRequest {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
        protocol_type: None,
        protocol_name: None,
        assignments,
    }
}

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition {
        topic: topic.into(),
        partition,
    }
}

/// Drives a coordinator and records every answer.
struct H {
    c: GroupCoordinator,
    now: i64,
    next_reply: u64,
    answers: HashMap<u64, GroupReply>,
    persisted: Vec<StoreRecord>,
    log_offset: i64,
    /// Apply `Effects::persist` records back once "durable", as a broker may: they are
    /// already applied, so this must change nothing.
    echo: bool,
}

impl H {
    fn new() -> Self {
        Self::with(config())
    }

    fn with(cfg: GroupConfig) -> Self {
        let mut c = GroupCoordinator::new(cfg, 42);
        c.finish_load(0, decode_orders);
        Self {
            c,
            now: 0,
            next_reply: 0,
            answers: HashMap::new(),
            persisted: Vec::new(),
            log_offset: 0,
            echo: false,
        }
    }

    fn take(&mut self, fx: Effects) {
        for (id, r) in fx.replies {
            assert!(
                self.answers.insert(id.0, r).is_none(),
                "ReplyId {} answered twice",
                id.0
            );
        }
        if self.echo {
            for r in &fx.persist {
                self.log_offset += 1;
                self.c.apply(r, self.log_offset, self.now);
            }
        } else {
            self.log_offset += fx.persist.len() as i64;
        }
        self.persisted.extend(fx.persist);
    }

    fn join(&mut self, req: JoinGroupRequest) -> u64 {
        self.next_reply += 1;
        let id = self.next_reply;
        let fx = self.c.join_group(self.now, ReplyId(id), req);
        self.take(fx);
        id
    }

    fn sync(&mut self, req: SyncGroupRequest) -> u64 {
        self.next_reply += 1;
        let id = self.next_reply;
        let fx = self.c.sync_group(self.now, ReplyId(id), req);
        self.take(fx);
        id
    }

    fn tick_at(&mut self, now: i64) {
        self.now = now;
        let fx = self.c.tick(now);
        self.take(fx);
    }

    fn leave(
        &mut self,
        group: &str,
        members: &[LeavingMember],
    ) -> (Result<(), GroupError>, Vec<Result<(), GroupError>>) {
        let (g, per, fx) = self.c.leave_group(self.now, group, members);
        self.take(fx);
        (g, per)
    }

    fn joined(&self, id: u64) -> Option<&JoinGroupResponse> {
        match self.answers.get(&id) {
            Some(GroupReply::Join(r)) => Some(r),
            Some(other) => panic!("expected a join answer, got {other:?}"),
            None => None,
        }
    }

    fn join_resp(&self, id: u64) -> JoinGroupResponse {
        self.joined(id)
            .cloned()
            .unwrap_or_else(|| panic!("join {id} not answered"))
    }

    fn sync_resp(&self, id: u64) -> SyncGroupResponse {
        match self.answers.get(&id) {
            Some(GroupReply::Sync(r)) => r.clone(),
            other => panic!("expected a sync answer for {id}, got {other:?}"),
        }
    }

    /// The MEMBER_ID_REQUIRED handshake: returns the member id and the parked reply.
    fn join_new(&mut self, group: &str, client: &str) -> (String, u64) {
        let mut req = jreq(group, "");
        req.client_id = client.into();
        let first = self.join(req.clone());
        let r = self.join_resp(first);
        assert_eq!(r.error, Some(GroupError::MemberIdRequired));
        assert!(r.member_id.starts_with(&format!("{client}-")));
        req.member_id = r.member_id.clone();
        let second = self.join(req);
        (r.member_id, second)
    }

    fn state(&self, group: &str) -> &'static str {
        self.c.describe_group(group).state
    }

    /// Writes records as the broker would and applies them.
    fn commit(&mut self, group: &str, t: &str, p: i32, offset: i64) {
        let rec = self
            .c
            .offset_record(group, tp(t, p), offset, -1, None, self.now)
            .unwrap();
        self.log_offset += 1;
        self.c.apply(&rec, self.log_offset, self.now);
    }

    fn fetch(&self, group: &str, t: &str, p: i32) -> Option<i64> {
        self.c.fetch_offsets(group, Some(&[tp(t, p)]))[0]
            .1
            .as_ref()
            .map(|o| o.offset)
    }
}

/// Brings group "g" to Stable with members a (leader) and b, generation 1.
fn stable_pair(h: &mut H) -> (String, String) {
    let (a, ja) = h.join_new("g", "a");
    // Alone: the rebalance completes at once (no initial delay in these tests).
    assert_eq!(h.join_resp(ja).generation_id, 1);
    let (b, jb) = h.join_new("g", "b");
    assert!(h.joined(jb).is_none(), "b waits for a to rejoin");
    assert_eq!(
        h.c.heartbeat(h.now, &hb("g", &a, 1)),
        Err(GroupError::RebalanceInProgress)
    );
    let ja2 = h.join(jreq("g", &a));
    let (ra, rb) = (h.join_resp(ja2), h.join_resp(jb));
    assert_eq!(ra.generation_id, 2);
    let gen = ra.generation_id;
    let s_b = h.sync(sreq("g", &b, gen, vec![]));
    let s_a = h.sync(sreq(
        "g",
        &a,
        gen,
        vec![
            (a.clone(), Bytes::from_static(b"A")),
            (b.clone(), Bytes::from_static(b"B")),
        ],
    ));
    assert_eq!(rb.leader, a);
    assert_eq!(h.sync_resp(s_a).assignment, Bytes::from_static(b"A"));
    assert_eq!(h.sync_resp(s_b).assignment, Bytes::from_static(b"B"));
    assert_eq!(h.state("g"), "Stable");
    (a, b)
}

// Goal: two members join through MEMBER_ID_REQUIRED; the first becomes leader and gets the
// member list with metadata, the follower gets none; both land in the same generation.
#[test]
fn two_members_join_with_member_id_required() {
    let mut h = H::new();
    let (a, ja) = h.join_new("g", "a");
    let r = h.join_resp(ja);
    assert_eq!(
        (r.error, r.generation_id, r.leader.as_str()),
        (None, 1, a.as_str())
    );
    assert_eq!(r.members.len(), 1);
    assert_eq!(r.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(r.protocol_name.as_deref(), Some("range"));
    let (b, jb) = h.join_new("g", "b");
    assert_eq!(
        h.c.group("g").unwrap().member_ids(),
        vec![a.clone(), b.clone()]
    );
    let ja2 = h.join(jreq("g", &a));
    let (ra, rb) = (h.join_resp(ja2), h.join_resp(jb));
    assert_eq!((ra.generation_id, rb.generation_id), (2, 2));
    assert_eq!(
        (ra.leader.clone(), rb.leader.clone()),
        (a.clone(), a.clone())
    );
    let ids: Vec<_> = ra.members.iter().map(|m| m.member_id.clone()).collect();
    assert_eq!(ids, vec![a.clone(), b.clone()]);
    assert_eq!(ra.members[1].metadata, sub(&["orders"]));
    assert!(rb.members.is_empty());
    assert_eq!(h.state("g"), "CompletingRebalance");
}

// Goal: a dynamic member without require_known_member_id (JoinGroup v0-3) is added at once.
#[test]
fn old_clients_join_without_member_id_required() {
    let mut h = H::new();
    let mut req = jreq("g", "");
    req.require_known_member_id = false;
    let j = h.join(req);
    let r = h.join_resp(j);
    assert_eq!(r.error, None);
    assert_eq!(r.generation_id, 1);
    assert_eq!(r.leader, r.member_id);
}

// Goal: request-level validation errors of JoinGroup.
#[test]
fn join_validation_errors() {
    let mut h = H::with(GroupConfig {
        groups_max: 1,
        ..config()
    });
    let err = |h: &mut H, req| {
        let j = h.join(req);
        h.join_resp(j).error
    };
    assert_eq!(err(&mut h, jreq("", "")), Some(GroupError::InvalidGroupId));
    let mut r = jreq("g", "");
    r.session_timeout_ms = 999;
    assert_eq!(err(&mut h, r), Some(GroupError::InvalidSessionTimeout));
    let mut r = jreq("g", "");
    r.session_timeout_ms = 60_001;
    assert_eq!(err(&mut h, r), Some(GroupError::InvalidSessionTimeout));
    assert_eq!(
        err(&mut h, jreq("g", "who")),
        Some(GroupError::UnknownMemberId)
    );
    let mut r = jreq("g", "");
    r.protocols.clear();
    assert_eq!(err(&mut h, r), Some(GroupError::InconsistentGroupProtocol));
    assert_eq!(h.c.group_count(), 0, "refused joins leave no group behind");
    let (a, _) = h.join_new("g", "a");
    let mut r = jreq("g", "");
    r.protocol_type = "connect".into();
    assert_eq!(err(&mut h, r), Some(GroupError::InconsistentGroupProtocol));
    let mut r = jreq("g", "");
    r.protocols = protos(&["roundrobin"]);
    assert_eq!(err(&mut h, r), Some(GroupError::InconsistentGroupProtocol));
    assert_eq!(
        err(&mut h, jreq("other", "")),
        Some(GroupError::CoordinatorNotAvailable)
    );
    assert_eq!(
        err(&mut h, jreq("g", &format!("{a}x"))),
        Some(GroupError::UnknownMemberId)
    );
}

// Goal: group.max.size counts pending members too.
#[test]
fn group_max_size_counts_pending_members() {
    let mut h = H::with(GroupConfig {
        group_max_size: 2,
        ..config()
    });
    let (_a, _) = h.join_new("g", "a");
    let j = h.join(jreq("g", ""));
    assert_eq!(h.join_resp(j).error, Some(GroupError::MemberIdRequired));
    let j = h.join(jreq("g", ""));
    assert_eq!(h.join_resp(j).error, Some(GroupError::GroupMaxSizeReached));
    // The pending member expires after its session timeout; then there is room again.
    h.now = 5_000;
    assert_eq!(h.c.heartbeat(h.now, &hb("g", &_a, 1)), Ok(()));
    h.tick_at(i64::from(SESSION) + 1);
    assert_eq!(h.c.group("g").unwrap().member_ids(), vec![_a.clone()]);
    assert!(h.c.group("g").unwrap().pending_member_ids().is_empty());
}

// Goal: protocol selection: the most votes among protocols everyone supports; ties go to
// the smallest name.
#[test]
fn protocol_selection_by_votes() {
    /// Members join one by one with the given preferences, then all rejoin so that one
    /// generation holds them all; returns the selected protocol.
    fn select(prefs: &[&[&str]]) -> Option<String> {
        let mut h = H::new();
        let mut ids = Vec::new();
        for (i, p) in prefs.iter().enumerate() {
            let mut req = jreq("g", "");
            req.client_id = format!("c{i}");
            req.protocols = protos(p);
            let j = h.join(req.clone());
            req.member_id = h.join_resp(j).member_id.clone();
            h.join(req.clone());
            ids.push(req);
        }
        let mut last = 0;
        for req in ids {
            last = h.join(req);
        }
        h.join_resp(last).protocol_name
    }
    // Two of three prefer roundrobin; sticky is not supported by b.
    assert_eq!(
        select(&[
            &["range", "roundrobin", "sticky"],
            &["roundrobin", "range"],
            &["roundrobin", "range", "sticky"]
        ]),
        Some("roundrobin".into())
    );
    // Only candidates everyone supports can win, even against more first choices.
    assert_eq!(
        select(&[&["sticky", "range"], &["sticky", "range"], &["range"]]),
        Some("range".into())
    );
    // A tie goes to the lexicographically smallest candidate.
    assert_eq!(
        select(&[&["zeta", "alpha"], &["alpha", "zeta"]]),
        Some("alpha".into())
    );
}

// Goal: SyncGroup parks followers until the leader's assignment arrives, then releases all
// with their own assignment, becomes Stable and persists the group; later syncs answer at
// once; members the leader left out get an empty assignment.
#[test]
fn sync_parks_and_releases() {
    let mut h = H::new();
    let (a, _) = h.join_new("g", "a");
    let (b, jb) = h.join_new("g", "b");
    h.join(jreq("g", &a));
    let gen = h.join_resp(jb).generation_id;
    let sb = h.sync(sreq("g", &b, gen, vec![]));
    assert!(!h.answers.contains_key(&sb), "follower parked");
    assert!(h
        .persisted
        .iter()
        .all(|r| !matches!(r, StoreRecord::Group { .. })));
    let sa = h.sync(sreq(
        "g",
        &a,
        gen,
        vec![(a.clone(), Bytes::from_static(b"x"))],
    ));
    assert_eq!(h.sync_resp(sa).assignment, Bytes::from_static(b"x"));
    assert_eq!(h.sync_resp(sb).assignment, Bytes::new());
    assert_eq!(h.sync_resp(sb).protocol_name.as_deref(), Some("range"));
    assert_eq!(h.state("g"), "Stable");
    match h.persisted.last() {
        Some(StoreRecord::Group { value: Some(v), .. }) => {
            assert_eq!(v.generation_id, gen);
            assert_eq!(v.members.len(), 2);
            assert_eq!(v.leader.as_deref(), Some(a.as_str()));
            assert_eq!(v.members[0].assignment, Bytes::from_static(b"x"));
        }
        other => panic!("expected group metadata, got {other:?}"),
    }
    let again = h.sync(sreq("g", &a, gen, vec![]));
    assert_eq!(h.sync_resp(again).assignment, Bytes::from_static(b"x"));
}

// Goal: SyncGroup's error rules.
#[test]
fn sync_errors() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    let err = |h: &mut H, req| {
        let s = h.sync(req);
        h.sync_resp(s).error
    };
    assert_eq!(
        err(&mut h, sreq("nope", &a, 2, vec![])),
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(
        err(&mut h, sreq("g", "ghost", 2, vec![])),
        Some(GroupError::UnknownMemberId)
    );
    assert_eq!(
        err(&mut h, sreq("g", &a, 1, vec![])),
        Some(GroupError::IllegalGeneration)
    );
    let mut r = sreq("g", &a, 2, vec![]);
    r.protocol_type = Some("connect".into());
    assert_eq!(err(&mut h, r), Some(GroupError::InconsistentGroupProtocol));
    let mut r = sreq("g", &a, 2, vec![]);
    r.protocol_name = Some("sticky".into());
    assert_eq!(err(&mut h, r), Some(GroupError::InconsistentGroupProtocol));
    let mut r = sreq("g", &a, 2, vec![]);
    r.protocol_type = Some("consumer".into());
    r.protocol_name = Some("range".into());
    assert_eq!(err(&mut h, r), None);
    // A rejoin of the leader starts a rebalance: syncs now get REBALANCE_IN_PROGRESS.
    h.join(jreq("g", &a));
    assert_eq!(h.state("g"), "PreparingRebalance");
    assert_eq!(
        err(&mut h, sreq("g", &b, 2, vec![])),
        Some(GroupError::RebalanceInProgress)
    );
}

// Goal: a third member joining a Stable group starts a new generation; the old generation
// is dead for everyone (no member is in two generations: old-generation heartbeats, syncs
// and commits are refused).
#[test]
fn third_join_rebalances() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    let (c, jc) = h.join_new("g", "c");
    assert_eq!(h.state("g"), "PreparingRebalance");
    assert_eq!(
        h.c.heartbeat(h.now, &hb("g", &a, 2)),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(
        h.c.heartbeat(h.now, &hb("g", &b, 2)),
        Err(GroupError::RebalanceInProgress)
    );
    let ja = h.join(jreq("g", &a));
    assert!(h.joined(jc).is_none());
    let jb = h.join(jreq("g", &b));
    let gens: Vec<i32> = [ja, jb, jc]
        .iter()
        .map(|&j| h.join_resp(j).generation_id)
        .collect();
    assert_eq!(gens, vec![3, 3, 3]);
    assert_eq!(h.join_resp(ja).members.len(), 3, "a stays leader");
    assert!(h.join_resp(jc).members.is_empty());
    for m in [&a, &b, &c] {
        assert_eq!(
            h.c.heartbeat(h.now, &hb("g", m, 2)),
            Err(GroupError::IllegalGeneration)
        );
        assert_eq!(h.c.heartbeat(h.now, &hb("g", m, 3)), Ok(()));
    }
    let s = h.sync(sreq("g", &b, 2, vec![]));
    assert_eq!(h.sync_resp(s).error, Some(GroupError::IllegalGeneration));
    let auth = CommitAuth {
        group_id: "g".into(),
        generation_id: 2,
        member_id: c.clone(),
        group_instance_id: None,
    };
    assert_eq!(
        h.c.validate_offset_commit(h.now, &auth),
        Err(GroupError::IllegalGeneration)
    );
}

// Goal: the leader is kept while it stays; when it leaves the first remaining joiner leads.
#[test]
fn leader_election() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    let (c, jc) = h.join_new("g", "c");
    let (g, per) = h.leave(
        "g",
        &[LeavingMember {
            member_id: a.clone(),
            group_instance_id: None,
        }],
    );
    assert_eq!((g, per), (Ok(()), vec![Ok(())]));
    let jb = h.join(jreq("g", &b));
    let rb = h.join_resp(jb);
    assert_eq!(rb.leader, b, "b joined before c");
    assert_eq!(rb.members.len(), 2);
    assert_eq!(h.join_resp(jc).leader, b);
    assert!(h.join_resp(jc).members.is_empty());
    let _ = c;
}

// Goal: a member's second JoinGroup while one is parked answers the older one, so every
// ReplyId gets exactly one answer.
#[test]
fn second_join_answers_the_parked_one() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    let _ = b;
    let first = h.join(jreq("g", &a));
    assert!(h.joined(first).is_none());
    let second = h.join(jreq("g", &a));
    assert_eq!(
        h.join_resp(first).error,
        Some(GroupError::RebalanceInProgress)
    );
    assert!(h.joined(second).is_none());
    let jb = h.join(jreq("g", &b));
    assert_eq!(h.join_resp(second).generation_id, 3);
    assert_eq!(h.join_resp(jb).generation_id, 3);
}

// Goal: a follower rejoining a Stable group with unchanged protocols gets the current
// generation at once (no rebalance); in CompletingRebalance the leader gets the list again.
#[test]
fn rejoin_without_change_answers_at_once() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    let j = h.join(jreq("g", &b));
    let r = h.join_resp(j);
    assert_eq!(
        (r.error, r.generation_id, r.leader.clone()),
        (None, 2, a.clone())
    );
    assert_eq!(h.state("g"), "Stable");
    // Changed protocols do rebalance.
    let mut req = jreq("g", &b);
    req.protocols = protos(&["range", "sticky"]);
    h.join(req);
    assert_eq!(h.state("g"), "PreparingRebalance");
    let ja = h.join(jreq("g", &a));
    assert_eq!(h.state("g"), "CompletingRebalance");
    assert_eq!(h.join_resp(ja).members.len(), 2);
    let again = h.join(jreq("g", &a));
    assert_eq!(h.join_resp(again).generation_id, 3);
    assert_eq!(
        h.join_resp(again).members.len(),
        2,
        "leader gets the list again"
    );
    assert_eq!(h.state("g"), "CompletingRebalance");
}

// Goal: Heartbeat's error rules.
#[test]
fn heartbeat_errors() {
    let mut h = H::new();
    assert_eq!(
        h.c.heartbeat(0, &hb("nope", "m", 1)),
        Err(GroupError::UnknownMemberId)
    );
    let (a, b) = stable_pair(&mut h);
    assert_eq!(
        h.c.heartbeat(0, &hb("g", "ghost", 2)),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        h.c.heartbeat(0, &hb("g", &a, 1)),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(h.c.heartbeat(0, &hb("g", &a, 2)), Ok(()));
    let mut fenced = hb("g", &a, 2);
    fenced.group_instance_id = Some("not-registered".into());
    assert_eq!(h.c.heartbeat(0, &fenced), Err(GroupError::UnknownMemberId));
    // CompletingRebalance: Ok.
    h.join(jreq("g", &a));
    h.join(jreq("g", &b));
    assert_eq!(h.state("g"), "CompletingRebalance");
    assert_eq!(h.c.heartbeat(0, &hb("g", &b, 3)), Ok(()));
    // Empty: everyone left.
    let _ = h.leave(
        "g",
        &[
            LeavingMember {
                member_id: a.clone(),
                group_instance_id: None,
            },
            LeavingMember {
                member_id: b.clone(),
                group_instance_id: None,
            },
        ],
    );
    assert_eq!(h.state("g"), "Empty");
    assert_eq!(
        h.c.heartbeat(0, &hb("g", &a, 4)),
        Err(GroupError::UnknownMemberId)
    );
}

// Goal: a member heard from by nothing for its session timeout is removed; from Stable that
// starts a rebalance that the survivor completes alone. Heartbeats, syncs and commits all
// keep a session alive.
#[test]
fn session_expiry_triggers_rebalance() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    let t0 = h.now;
    h.now = t0 + 4_000;
    assert_eq!(h.c.heartbeat(h.now, &hb("g", &a, 2)), Ok(()));
    h.now = t0 + 8_000;
    let s = h.sync(sreq("g", &a, 2, vec![]));
    assert_eq!(h.sync_resp(s).error, None);
    h.now = t0 + 12_000;
    let auth = CommitAuth {
        group_id: "g".into(),
        generation_id: 2,
        member_id: a.clone(),
        group_instance_id: None,
    };
    assert_eq!(h.c.validate_offset_commit(h.now, &auth), Ok(()));
    assert_eq!(h.c.next_deadline_ms(), Some(t0 + i64::from(SESSION)));
    h.tick_at(t0 + i64::from(SESSION) - 1);
    assert_eq!(h.state("g"), "Stable");
    h.tick_at(t0 + i64::from(SESSION));
    assert_eq!(h.c.group("g").unwrap().member_ids(), vec![a.clone()]);
    assert_eq!(h.state("g"), "PreparingRebalance");
    let j = h.join(jreq("g", &a));
    assert_eq!(h.join_resp(j).generation_id, 3);
    assert_eq!(
        h.c.heartbeat(h.now, &hb("g", &b, 2)),
        Err(GroupError::UnknownMemberId)
    );
}

// Goal: a member lost while CompletingRebalance: the parked syncs get REBALANCE_IN_PROGRESS.
#[test]
fn expiry_while_completing_fails_parked_syncs() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    h.join(jreq("g", &a));
    h.join(jreq("g", &b));
    let t = h.now;
    let sb = h.sync(sreq("g", &b, 3, vec![]));
    assert!(!h.answers.contains_key(&sb));
    // The leader goes silent; b is waiting in SyncGroup and so is not expired.
    h.tick_at(t + i64::from(SESSION));
    assert_eq!(h.sync_resp(sb).error, Some(GroupError::RebalanceInProgress));
    assert_eq!(h.c.group("g").unwrap().member_ids(), vec![b.clone()]);
    assert_eq!(h.state("g"), "PreparingRebalance");
}

// Goal: a member that never sends SyncGroup cannot hold the group in CompletingRebalance
// forever: after the rebalance timeout it is removed.
#[test]
fn silent_member_in_completing_is_removed() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    h.join(jreq("g", &a));
    h.join(jreq("g", &b));
    let t = h.now;
    for step in 1..=(REBALANCE / 5_000) {
        h.now = t + i64::from(step * 5_000) - 1;
        assert_eq!(h.c.heartbeat(h.now, &hb("g", &a, 3)), Ok(()));
        assert_eq!(h.c.heartbeat(h.now, &hb("g", &b, 3)), Ok(()));
    }
    let sb = h.sync(sreq("g", &b, 3, vec![]));
    h.tick_at(t + i64::from(REBALANCE));
    assert_eq!(h.sync_resp(sb).error, Some(GroupError::RebalanceInProgress));
    assert_eq!(h.c.group("g").unwrap().member_ids(), vec![b]);
}

// Goal: members that do not rejoin before the rebalance timeout are dropped; the others
// form the next generation.
#[test]
fn rebalance_timeout_drops_non_rejoining_members() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    let t = h.now;
    let (c, jc) = h.join_new("g", "c");
    let ja = h.join(jreq("g", &a));
    // b keeps heartbeating but never rejoins.
    for s in 1..6 {
        h.now = t + s * 5_000;
        assert_eq!(
            h.c.heartbeat(h.now, &hb("g", &b, 2)),
            Err(GroupError::RebalanceInProgress)
        );
    }
    assert_eq!(h.c.next_deadline_ms(), Some(t + i64::from(REBALANCE)));
    h.tick_at(t + i64::from(REBALANCE) - 1);
    assert!(h.joined(ja).is_none());
    h.tick_at(t + i64::from(REBALANCE));
    assert_eq!(h.join_resp(ja).generation_id, 3);
    assert_eq!(h.join_resp(jc).generation_id, 3);
    assert_eq!(h.c.group("g").unwrap().member_ids(), vec![a, c]);
    assert_eq!(
        h.c.heartbeat(h.now, &hb("g", &b, 3)),
        Err(GroupError::UnknownMemberId)
    );
}

// Goal: the first rebalance of an empty group waits group.initial.rebalance.delay.ms,
// re-armed by each new member, but never past the rebalance timeout from the start.
#[test]
fn initial_rebalance_delay_rearms_and_is_capped() {
    let cfg = GroupConfig {
        group_initial_rebalance_delay_ms: 3_000,
        ..config()
    };
    // Re-arm: a at 0, b at 2000 → completes at 5000.
    let mut h = H::with(cfg.clone());
    let (_a, ja) = h.join_new("g", "a");
    h.now = 2_000;
    let (_b, jb) = h.join_new("g", "b");
    assert_eq!(h.c.next_deadline_ms(), Some(5_000));
    h.tick_at(4_999);
    assert!(h.joined(ja).is_none() && h.joined(jb).is_none());
    h.tick_at(5_000);
    assert_eq!(h.join_resp(ja).generation_id, 1);
    assert_eq!(h.join_resp(ja).members.len(), 2);
    assert_eq!(h.join_resp(jb).generation_id, 1);

    // Cap: rebalance timeout 6000; joins at 0, 2000, 4500 → completes at 6000, not 7500.
    let mut h = H::with(cfg);
    let mut parked = Vec::new();
    for (at, client) in [(0, "a"), (2_000, "b"), (4_500, "c")] {
        h.now = at;
        let mut req = jreq("g", "");
        req.client_id = client.into();
        req.rebalance_timeout_ms = 6_000;
        req.require_known_member_id = false;
        parked.push(h.join(req));
    }
    h.tick_at(5_999);
    assert!(parked.iter().all(|&j| h.joined(j).is_none()));
    h.tick_at(6_000);
    assert!(parked.iter().all(|&j| h.join_resp(j).generation_id == 1));
}

fn static_req(group: &str, member: &str, instance: &str) -> JoinGroupRequest {
    let mut r = jreq(group, member);
    r.group_instance_id = Some(instance.into());
    r
}

/// A Stable group with static leader s1 and dynamic follower d.
fn static_group(h: &mut H) -> (String, String) {
    static_group_with_session(h, SESSION)
}

fn static_group_with_session(h: &mut H, session_ms: i32) -> (String, String) {
    let mut first = static_req("g", "", "i1");
    first.session_timeout_ms = session_ms;
    let j1 = h.join(first);
    let s1 = h.join_resp(j1).member_id.clone();
    assert!(s1.starts_with("i1-"));
    let (d, jd) = h.join_new("g", "d");
    let mut again = static_req("g", &s1, "i1");
    again.session_timeout_ms = session_ms;
    let j1b = h.join(again);
    let gen = h.join_resp(jd).generation_id;
    assert_eq!(h.join_resp(j1b).leader, s1);
    let sd = h.sync(sreq("g", &d, gen, vec![]));
    let mut s = sreq(
        "g",
        &s1,
        gen,
        vec![(s1.clone(), "S".into()), (d.clone(), "D".into())],
    );
    s.group_instance_id = Some("i1".into());
    h.sync(s);
    assert_eq!(h.sync_resp(sd).assignment, Bytes::from_static(b"D"));
    (s1, d)
}

// Goal: a restarted static member (same instance id, no member id) gets a new member id
// and the current generation without a rebalance; as leader it is told to skip the
// assignment but gets the member list; the old member id is fenced.
#[test]
fn static_member_rejoins_without_rebalance_and_fences_old_id() {
    let mut h = H::new();
    let (s1, d) = static_group(&mut h);
    let gen = h.c.group("g").unwrap().generation_id();
    let persisted_before = h.persisted.len();
    let j = h.join(static_req("g", "", "i1"));
    let r = h.join_resp(j);
    assert_eq!(r.error, None);
    assert_ne!(r.member_id, s1);
    assert_eq!(r.generation_id, gen);
    assert_eq!(r.leader, r.member_id, "leadership moves to the new id");
    assert!(r.skip_assignment);
    assert_eq!(r.members.len(), 2);
    assert_eq!(h.state("g"), "Stable");
    assert!(
        matches!(
            h.persisted[persisted_before..],
            [StoreRecord::Group { value: Some(_), .. }]
        ),
        "the new member id is persisted before the answer"
    );
    let mut old = hb("g", &s1, gen);
    old.group_instance_id = Some("i1".into());
    assert_eq!(
        h.c.heartbeat(h.now, &old),
        Err(GroupError::FencedInstanceId)
    );
    let mut s = sreq("g", &s1, gen, vec![]);
    s.group_instance_id = Some("i1".into());
    let sid = h.sync(s);
    assert_eq!(h.sync_resp(sid).error, Some(GroupError::FencedInstanceId));
    let mut new = hb("g", &r.member_id, gen);
    new.group_instance_id = Some("i1".into());
    assert_eq!(h.c.heartbeat(h.now, &new), Ok(()));
    let mut s = sreq("g", &r.member_id, gen, vec![]);
    s.group_instance_id = Some("i1".into());
    let sid = h.sync(s);
    assert_eq!(
        h.sync_resp(sid).assignment,
        Bytes::from_static(b"S"),
        "assignment kept"
    );
    assert_eq!(h.c.heartbeat(h.now, &hb("g", &d, gen)), Ok(()));

    // With changed protocols the rejoin starts a rebalance instead.
    let mut req = static_req("g", "", "i1");
    req.protocols = protos(&["range", "sticky"]);
    let j = h.join(req);
    assert!(h.joined(j).is_none());
    assert_eq!(h.state("g"), "PreparingRebalance");
}

// Goal: static members leave by instance id; a mismatching member id is fenced; unknown
// instances and unknown groups are UNKNOWN_MEMBER_ID; the last departure empties the group
// and persists it.
#[test]
fn leave_by_instance_id() {
    let mut h = H::new();
    let (s1, d) = static_group(&mut h);
    let gen = h.c.group("g").unwrap().generation_id();
    let (g, per) = h.leave(
        "g",
        &[
            LeavingMember {
                member_id: "other".into(),
                group_instance_id: Some("i1".into()),
            },
            LeavingMember {
                member_id: String::new(),
                group_instance_id: Some("i9".into()),
            },
            LeavingMember {
                member_id: "ghost".into(),
                group_instance_id: None,
            },
        ],
    );
    assert_eq!(g, Ok(()));
    assert_eq!(
        per,
        vec![
            Err(GroupError::FencedInstanceId),
            Err(GroupError::UnknownMemberId),
            Err(GroupError::UnknownMemberId)
        ]
    );
    assert_eq!(h.state("g"), "Stable", "no departure, no rebalance");
    let (g, per) = h.leave(
        "g",
        &[
            LeavingMember {
                member_id: String::new(),
                group_instance_id: Some("i1".into()),
            },
            LeavingMember {
                member_id: d.clone(),
                group_instance_id: None,
            },
        ],
    );
    assert_eq!((g, per), (Ok(()), vec![Ok(()), Ok(())]));
    assert_eq!(h.state("g"), "Empty");
    match h.persisted.last() {
        Some(StoreRecord::Group { value: Some(v), .. }) => {
            assert_eq!(v.generation_id, gen + 1, "the generation still advances");
            assert!(v.members.is_empty());
            assert_eq!(v.protocol_name, None);
        }
        other => panic!("expected empty group metadata, got {other:?}"),
    }
    let _ = s1;
    assert_eq!(h.leave("nope", &[]).0, Err(GroupError::UnknownMemberId));
}

// Goal: a pending member (told MEMBER_ID_REQUIRED) may leave, and one that never rejoins is
// dropped after its session timeout, letting a waiting rebalance complete.
#[test]
fn pending_members_leave_and_expire() {
    let mut h = H::new();
    let (a, _b) = stable_pair(&mut h);
    let j = h.join(jreq("g", ""));
    let pending = h.join_resp(j).member_id.clone();
    let (g, per) = h.leave(
        "g",
        &[LeavingMember {
            member_id: pending,
            group_instance_id: None,
        }],
    );
    assert_eq!((g, per), (Ok(()), vec![Ok(())]));
    assert_eq!(h.state("g"), "Stable");
    // A pending member blocks completion of a rebalance until it rejoins or expires.
    let t = h.now;
    let j = h.join(jreq("g", ""));
    assert_eq!(h.join_resp(j).error, Some(GroupError::MemberIdRequired));
    let ja = h.join(jreq("g", &a));
    h.now = t + 1_000;
    assert_eq!(
        h.c.heartbeat(h.now, &hb("g", &_b, 2)),
        Err(GroupError::RebalanceInProgress)
    );
    let jb = h.join(jreq("g", &_b));
    assert!(h.joined(ja).is_none() && h.joined(jb).is_none());
    h.tick_at(t + i64::from(SESSION));
    assert_eq!(h.join_resp(ja).generation_id, 3);
    assert_eq!(h.join_resp(jb).generation_id, 3);
    assert!(h.c.group("g").unwrap().pending_member_ids().is_empty());
}

fn auth(group: &str, generation: i32, member: &str) -> CommitAuth {
    CommitAuth {
        group_id: group.into(),
        generation_id: generation,
        member_id: member.into(),
        group_instance_id: None,
    }
}

// Goal: the OffsetCommit validation matrix (Kafka's rules).
#[test]
fn offset_commit_validation_matrix() {
    let mut h = H::new();
    let v = |h: &mut H, a: CommitAuth| h.c.validate_offset_commit(h.now, &a);
    assert_eq!(v(&mut h, auth("", -1, "")), Err(GroupError::InvalidGroupId));
    // Unknown group: standalone allowed; a member or a generation is not.
    assert_eq!(v(&mut h, auth("solo", -1, "")), Ok(()));
    assert_eq!(
        v(&mut h, auth("solo", 3, "m")),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        v(&mut h, auth("solo", -1, "m")),
        Err(GroupError::UnknownMemberId)
    );
    // Applying the commit creates an Empty group with no protocol type.
    h.commit("solo", "t", 0, 5);
    let d = h.c.describe_group("solo");
    assert_eq!((d.state, d.protocol_type.as_str()), ("Empty", ""));
    assert_eq!(v(&mut h, auth("solo", -1, "")), Ok(()));
    // A group with members.
    let (a, b) = stable_pair(&mut h);
    assert_eq!(
        v(&mut h, auth("g", -1, "")),
        Err(GroupError::UnknownMemberId),
        "standalone"
    );
    assert_eq!(
        v(&mut h, auth("g", 2, "ghost")),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        v(&mut h, auth("g", 1, &a)),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(v(&mut h, auth("g", 2, &a)), Ok(()));
    let mut fenced = auth("g", 2, &a);
    fenced.group_instance_id = Some("i".into());
    assert_eq!(v(&mut h, fenced), Err(GroupError::UnknownMemberId));
    // PreparingRebalance with the current generation: allowed.
    h.join(jreq("g", &a));
    assert_eq!(v(&mut h, auth("g", 2, &b)), Ok(()));
    // CompletingRebalance: refused.
    h.join(jreq("g", &b));
    assert_eq!(h.state("g"), "CompletingRebalance");
    assert_eq!(
        v(&mut h, auth("g", 3, &b)),
        Err(GroupError::RebalanceInProgress)
    );
    // Static member fencing.
    let mut h = H::new();
    let (s1, _d) = static_group(&mut h);
    let gen = h.c.group("g").unwrap().generation_id();
    h.join(static_req("g", "", "i1"));
    let mut old = auth("g", gen, &s1);
    old.group_instance_id = Some("i1".into());
    assert_eq!(v(&mut h, old), Err(GroupError::FencedInstanceId));
}

// Goal: offset records: metadata size bound, per-group offset bound.
#[test]
fn offset_record_bounds() {
    let h = H::with(GroupConfig {
        offset_metadata_bytes_max: 4,
        offsets_per_group_max: 1,
        ..config()
    });
    let mut h = h;
    assert_eq!(
        h.c.offset_record("g", tp("t", 0), 1, -1, Some("12345".into()), 0),
        Err(GroupError::OffsetMetadataTooLarge)
    );
    assert!(h
        .c
        .offset_record("g", tp("t", 0), 1, -1, Some("1234".into()), 0)
        .is_ok());
    h.commit("g", "t", 0, 1);
    assert!(
        h.c.offset_record("g", tp("t", 0), 2, -1, None, 0).is_ok(),
        "same partition"
    );
    assert_eq!(
        h.c.offset_record("g", tp("t", 1), 1, -1, None, 0),
        Err(GroupError::CoordinatorNotAvailable)
    );
}

fn offset_rec(group: &str, t: &str, p: i32, offset: Option<i64>) -> StoreRecord {
    StoreRecord::Offset {
        group_id: group.into(),
        topic: t.into(),
        partition: p,
        value: offset.map(|o| OffsetValue {
            offset: o,
            leader_epoch: 1,
            metadata: "m".into(),
            commit_timestamp_ms: 0,
        }),
    }
}

// Goal: apply orders offset records by log offset per partition, whatever order their
// writes complete in; a deletion is not undone by an older commit; a group tombstone is not
// undone by an older commit either.
#[test]
fn apply_orders_by_log_offset() {
    let mut h = H::new();
    h.c.apply(&offset_rec("g", "t", 0, Some(10)), 10, 0);
    h.c.apply(&offset_rec("g", "t", 0, Some(5)), 5, 0);
    assert_eq!(h.fetch("g", "t", 0), Some(10));
    h.c.apply(&offset_rec("g", "t", 0, Some(10)), 10, 0);
    assert_eq!(h.fetch("g", "t", 0), Some(10), "idempotent");
    h.c.apply(&offset_rec("g", "t", 0, None), 12, 0);
    h.c.apply(&offset_rec("g", "t", 0, Some(11)), 11, 0);
    assert_eq!(h.fetch("g", "t", 0), None);
    h.c.apply(&offset_rec("g", "t", 0, Some(13)), 13, 0);
    assert_eq!(h.fetch("g", "t", 0), Some(13));
    // Group tombstone at 20: offsets before it go, a late older commit does not return.
    h.c.apply(&offset_rec("g", "t", 1, Some(1)), 14, 0);
    h.c.apply(
        &StoreRecord::Group {
            group_id: "g".into(),
            value: None,
        },
        20,
        0,
    );
    assert_eq!(h.c.describe_group("g").state, "Dead");
    h.c.apply(&offset_rec("g", "t", 2, Some(7)), 19, 0);
    assert!(h.c.fetch_offsets("g", None).is_empty());
    h.c.apply(&offset_rec("g", "t", 2, Some(8)), 21, 0);
    assert_eq!(h.fetch("g", "t", 2), Some(8));
    // Markers are forgotten after their TTL.
    h.tick_at(crate::group::TOMBSTONE_MARKER_TTL_MS + 1);
    h.c.apply(&offset_rec("g", "t", 0, Some(3)), 3, 0);
    assert_eq!(h.fetch("g", "t", 0), Some(3));
}

// Goal: replaying a log (group records then tombstone then new records) during load yields
// exactly the last state; group records after load are ignored (memory is newer).
#[test]
fn load_replays_in_log_order() {
    let mut h = H::new();
    let (a, _b) = stable_pair(&mut h);
    h.commit("g", "orders", 0, 100);
    let log = h.c.snapshot();
    let mut fresh = GroupCoordinator::new(config(), 1);
    for (i, r) in log.iter().enumerate() {
        fresh.apply(r, i as i64, 0);
    }
    // A delete and a recreation later in the log.
    let n = log.len() as i64;
    fresh.apply(
        &StoreRecord::Group {
            group_id: "g".into(),
            value: None,
        },
        n,
        0,
    );
    assert_eq!(fresh.describe_group("g").state, "Dead");
    fresh.apply(&offset_rec("g", "orders", 1, Some(7)), n + 1, 0);
    fresh.finish_load(1_000, decode_orders);
    assert_eq!(fresh.describe_group("g").state, "Empty");
    assert_eq!(fresh.fetch_offsets("g", None).len(), 1);
    // A group record after load is our own echo: ignored.
    fresh.apply(&log[0], n + 2, 1_000);
    assert_eq!(fresh.describe_group("g").state, "Empty");
    let _ = a;
}

// Goal: snapshot → apply into a fresh coordinator reproduces OffsetFetch and DescribeGroups,
// and a loaded group with members is Stable and serves its members (sessions restarted at
// finish_load).
#[test]
fn snapshot_round_trips() {
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    h.commit("g", "orders", 0, 100);
    h.commit("g", "orders", 1, 200);
    h.commit("solo", "t", 0, 1);
    let snap = h.c.snapshot();
    assert!(snap.iter().all(|r| match r {
        StoreRecord::Offset { value, .. } => value.is_some(),
        StoreRecord::Group { value, .. } => value.is_some(),
        StoreRecord::ConsumerGroup { value, .. } => value.is_some(),
    }));
    // Through the byte format too.
    let restore = |decode: fn(&[u8]) -> Option<ConsumerSubscription>| {
        let mut fresh = GroupCoordinator::new(config(), 7);
        for (i, r) in snap.iter().enumerate() {
            let back = StoreRecord::decode(&r.encode_key(), r.encode_value().as_deref()).unwrap();
            fresh.apply(&back, i as i64, 50_000);
        }
        fresh.finish_load(50_000, decode);
        fresh
    };
    let mut fresh = restore(decode_orders);
    // The restored members' metadata was decoded: OffsetDelete still sees the subscription;
    // metadata that does not decode subscribes to nothing.
    let both = [tp("orders", 0), tp("other", 0)];
    assert_eq!(
        fresh.validate_offset_delete("g", &both),
        Ok(vec![Err(GroupError::GroupSubscribedToTopic), Ok(())])
    );
    assert_eq!(
        restore(|_| None).validate_offset_delete("g", &both),
        Ok(vec![Ok(()), Ok(())])
    );
    for g in ["g", "solo"] {
        assert_eq!(fresh.fetch_offsets(g, None), h.c.fetch_offsets(g, None));
        assert_eq!(fresh.describe_group(g), h.c.describe_group(g));
    }
    assert_eq!(fresh.list_groups(&[], &[]), h.c.list_groups(&[], &[]));
    assert_eq!(fresh.heartbeat(55_000, &hb("g", &a, 2)), Ok(()));
    assert_eq!(
        fresh.heartbeat(50_000, &hb("g", &b, 2)),
        Ok(()),
        "b was restored"
    );
    // Sessions restarted at finish_load: b (silent) expires at 60_000, not before.
    let fx = fresh.tick(59_999);
    assert!(fx.replies.is_empty());
    assert_eq!(fresh.describe_group("g").state, "Stable");
    fresh.tick(60_000);
    assert_eq!(fresh.group("g").unwrap().member_ids(), vec![a.clone()]);
    assert_eq!(fresh.describe_group("g").state, "PreparingRebalance");
}

// Goal: offsets of an Empty consumer group expire offsets_retention_ms after it became
// Empty (all together); a standalone group's offsets expire per commit time; expiry emits
// tombstones, and the emptied group is deleted with a tombstone if it was ever persisted.
#[test]
fn retention_expiry() {
    let retention = 1_000_000; // longer than EMPTY_GROUP_GRACE_MS
    let mut h = H::with(GroupConfig {
        offsets_retention_ms: retention,
        ..config()
    });
    let (a, b) = stable_pair(&mut h);
    h.now = 1_000;
    h.commit("g", "orders", 0, 1);
    h.now = 2_000;
    let _ = h.leave(
        "g",
        &[
            LeavingMember {
                member_id: a,
                group_instance_id: None,
            },
            LeavingMember {
                member_id: b,
                group_instance_id: None,
            },
        ],
    );
    assert_eq!(h.state("g"), "Empty");
    h.now = 3_000;
    h.commit("solo", "t", 0, 1);
    h.now = 50_000;
    h.commit("solo", "t", 1, 2);
    h.commit("g", "orders", 1, 2); // a standalone commit to the Empty consumer group
    assert_eq!(h.c.next_deadline_ms(), Some(2_000 + retention));
    h.persisted.clear();
    h.tick_at(2_000 + retention - 1);
    assert!(h.persisted.is_empty());
    h.tick_at(2_000 + retention);
    assert_eq!(h.fetch("g", "orders", 0), None);
    assert_eq!(
        h.fetch("g", "orders", 1),
        None,
        "all of the group's offsets go together"
    );
    assert_eq!(h.state("g"), "Dead", "emptied group deleted");
    let tombstones: Vec<_> = h.persisted.iter().filter(|r| r.group_id() == "g").collect();
    assert_eq!(
        tombstones.len(),
        3,
        "two offsets and the group: {tombstones:?}"
    );
    assert!(matches!(
        tombstones[2],
        StoreRecord::Group { value: None, .. }
    ));
    h.tick_at(3_000 + retention);
    assert_eq!(h.fetch("solo", "t", 0), None);
    assert_eq!(h.fetch("solo", "t", 1), Some(2));
    h.tick_at(50_000 + retention);
    assert_eq!(h.state("solo"), "Dead");
    assert_eq!(h.c.group_count(), 0);
    assert_eq!(h.c.next_deadline_ms(), None);
}

// Goal: DeleteGroups and OffsetDelete rules.
#[test]
fn delete_group_and_offset_delete_rules() {
    let mut h = H::new();
    assert_eq!(
        h.c.validate_delete_group(""),
        Err(GroupError::InvalidGroupId)
    );
    assert_eq!(
        h.c.validate_delete_group("nope"),
        Err(GroupError::GroupIdNotFound)
    );
    assert_eq!(
        h.c.validate_offset_delete("nope", &[]),
        Err(GroupError::GroupIdNotFound)
    );
    let (a, b) = stable_pair(&mut h);
    h.commit("g", "orders", 0, 1);
    h.commit("g", "other", 0, 1);
    assert_eq!(
        h.c.validate_delete_group("g"),
        Err(GroupError::NonEmptyGroup)
    );
    assert_eq!(
        h.c.validate_offset_delete("g", &[tp("orders", 0), tp("other", 0)]),
        Ok(vec![Err(GroupError::GroupSubscribedToTopic), Ok(())])
    );
    let _ = h.leave(
        "g",
        &[
            LeavingMember {
                member_id: a,
                group_instance_id: None,
            },
            LeavingMember {
                member_id: b,
                group_instance_id: None,
            },
        ],
    );
    assert_eq!(
        h.c.validate_offset_delete("g", &[tp("orders", 0)]),
        Ok(vec![Ok(())])
    );
    let tomb = h.c.validate_delete_group("g").unwrap();
    assert_eq!(
        tomb,
        StoreRecord::Group {
            group_id: "g".into(),
            value: None
        }
    );
    h.c.apply(&tomb, 1_000, h.now);
    assert_eq!(h.state("g"), "Dead");
    assert!(h.c.fetch_offsets("g", None).is_empty());

    // A non-consumer protocol type that is not Empty: NON_EMPTY_GROUP.
    let mut req = jreq("connect", "");
    req.protocol_type = "connect".into();
    req.require_known_member_id = false;
    h.join(req);
    assert_eq!(
        h.c.validate_offset_delete("connect", &[tp("x", 0)]),
        Err(GroupError::NonEmptyGroup)
    );
}

// Goal: DescribeGroups and ListGroups views and filters.
#[test]
fn describe_and_list() {
    let mut h = H::new();
    let d = h.c.describe_group("nope");
    assert_eq!((d.state, d.members.len()), ("Dead", 0));
    let (a, _b) = stable_pair(&mut h);
    h.commit("solo", "t", 0, 1);
    let d = h.c.describe_group("g");
    assert_eq!(
        (d.state, d.protocol_type.as_str(), d.protocol_name.as_str()),
        ("Stable", "consumer", "range")
    );
    assert_eq!(d.members[0].member_id, a);
    let (metadata, assignment) = opaque(&d.members[0]);
    assert_eq!(*assignment, Bytes::from_static(b"A"));
    assert_eq!(*metadata, sub(&["orders"]));
    assert_eq!(d.members[0].client_host, "/10.0.0.1");
    let names = |v: Vec<GroupListing>| v.into_iter().map(|l| l.group_id).collect::<Vec<_>>();
    assert_eq!(names(h.c.list_groups(&[], &[])), vec!["g", "solo"]);
    assert_eq!(names(h.c.list_groups(&["stable".into()], &[])), vec!["g"]);
    assert_eq!(
        names(h.c.list_groups(&["EMPTY".into(), "Dead".into()], &[])),
        vec!["solo"]
    );
    assert_eq!(
        names(h.c.list_groups(&[], &["Classic".into()])),
        vec!["g", "solo"]
    );
    assert!(h.c.list_groups(&[], &["consumer".into()]).is_empty());
    assert_eq!(h.c.list_groups(&[], &[])[0].group_type, "classic");
    // While rebalancing: no protocol name or metadata.
    h.join(jreq("g", &a));
    let d = h.c.describe_group("g");
    assert_eq!(
        (d.state, d.protocol_name.as_str()),
        ("PreparingRebalance", "")
    );
    assert!(d.members.iter().all(|m| opaque(m).0.is_empty()));
}

// ---- randomized (seeded) multi-member scenario ----

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a simulated client believes.
#[derive(Clone, Default)]
struct Client {
    member_id: String,
    instance: Option<String>,
    generation: i32,
    join: Option<u64>,
    sync: Option<u64>,
}

// Goal: under random joins, syncs, heartbeats, commits, leaves and ticks from several
// clients (static and dynamic) on two groups, every parked ReplyId is answered exactly once
// (eventually, once clients stop and time runs out), no generation has two leaders, Stable
// groups hold assignments only for current members, and bounds hold.
#[test]
fn randomized_invariants() {
    for seed in 1..=200u64 {
        run_random(seed);
    }
}

fn run_random(seed: u64) {
    let cfg = GroupConfig {
        group_initial_rebalance_delay_ms: if seed & 1 == 0 { 500 } else { 0 },
        group_max_size: 5,
        // Every third seed runs with a short retention so that offsets expire mid-run.
        offsets_retention_ms: match seed % 3 {
            0 => 60_000,
            _ => 7 * 24 * 3_600_000,
        },
        ..config()
    };
    let mut h = H::with(cfg.clone());
    h.echo = seed % 4 < 2;
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let groups = ["g0", "g1"];
    let mut clients: Vec<(usize, Client)> = (0..8)
        .map(|i| {
            let c = Client {
                instance: (i % 3 == 0).then(|| format!("inst-{i}")),
                ..Default::default()
            };
            (i % 2, c)
        })
        .collect();
    let mut issued: Vec<u64> = Vec::new();
    // generation → leader, per group.
    // (group, incarnation, generation) → leader: a deleted and recreated group starts its
    // generations again, so answers are keyed by the incarnation they were issued in.
    let mut leaders: HashMap<(usize, u32, i32), String> = HashMap::new();
    let mut incarnation = [0u32; 2];
    let mut issued_in: HashMap<u64, u32> = HashMap::new();
    let mut stable_steps = 0;
    for step in 0..600 {
        h.now += rng.below(1_500) as i64;
        let ci = rng.below(clients.len() as u64) as usize;
        let (gi, mut c) = clients[ci].clone();
        let group = groups[gi];
        // Learn from answers.
        if let Some(j) = c.join {
            if let Some(r) = h.joined(j).cloned() {
                c.join = None;
                match r.error {
                    None => {
                        c.member_id = r.member_id.clone();
                        c.generation = r.generation_id;
                        let key = (gi, issued_in[&j], r.generation_id);
                        if let Some(prev) = leaders.insert(key, r.leader.clone()) {
                            // Within a generation the leader id only changes when a static
                            // leader restarted (its old id is fenced, no longer a member).
                            let members =
                                h.c.group(group).map(|g| g.member_ids()).unwrap_or_default();
                            assert!(
                                prev == r.leader || !members.contains(&prev),
                                "seed {seed}: two leaders in generation {}: {prev} and {}",
                                r.generation_id,
                                r.leader
                            );
                        }
                    }
                    Some(GroupError::MemberIdRequired) => c.member_id = r.member_id.clone(),
                    Some(GroupError::UnknownMemberId) | Some(GroupError::FencedInstanceId) => {
                        c.member_id.clear()
                    }
                    Some(_) => {}
                }
            }
        }
        if let Some(s) = c.sync {
            if let Some(GroupReply::Sync(r)) = h.answers.get(&s) {
                // Our simulated leader assigns each member its own id: a member is never
                // handed another member's assignment (a restarted static member inherits
                // its predecessor's).
                assert!(
                    r.error.is_some()
                        || c.instance.is_some()
                        || r.assignment.is_empty()
                        || r.assignment == c.member_id.as_bytes(),
                    "seed {seed}: {} got {:?}",
                    c.member_id,
                    r.assignment
                );
                c.sync = None;
            }
        }
        match rng.below(10) {
            0..=2 => {
                let mut req = jreq(group, &c.member_id);
                req.group_instance_id = c.instance.clone();
                req.client_id = format!("c{ci}");
                req.rebalance_timeout_ms = 5_000 + rng.below(5_000) as i32;
                req.protocols = if rng.below(4) == 0 {
                    protos(&["roundrobin", "range"])
                } else {
                    protos(&["range"])
                };
                let j = h.join(req);
                issued.push(j);
                issued_in.insert(j, incarnation[gi]);
                c.join = Some(j);
            }
            3..=4 => {
                let leader = h.c.group(group).and_then(|g| g.leader().map(str::to_owned));
                let assignments = if leader.as_deref() == Some(c.member_id.as_str()) {
                    let mut a: Vec<(String, Bytes)> =
                        h.c.group(group)
                            .unwrap()
                            .member_ids()
                            .into_iter()
                            .map(|m| (m.clone(), Bytes::from(m.into_bytes())))
                            .collect();
                    a.push(("not-a-member".into(), Bytes::from_static(b"?")));
                    a
                } else {
                    vec![]
                };
                let mut req = sreq(group, &c.member_id, c.generation, assignments);
                req.group_instance_id = c.instance.clone();
                let s = h.sync(req);
                issued.push(s);
                c.sync = Some(s);
            }
            5..=6 => {
                let mut req = hb(group, &c.member_id, c.generation);
                req.group_instance_id = c.instance.clone();
                let _ = h.c.heartbeat(h.now, &req);
            }
            7 => {
                let a = CommitAuth {
                    group_id: group.into(),
                    generation_id: c.generation,
                    member_id: c.member_id.clone(),
                    group_instance_id: c.instance.clone(),
                };
                if h.c.validate_offset_commit(h.now, &a).is_ok() {
                    h.commit(group, "orders", step % 4, i64::from(step));
                }
            }
            8 => {
                let l = LeavingMember {
                    member_id: c.member_id.clone(),
                    group_instance_id: c.instance.clone(),
                };
                let _ = h.leave(group, &[l]);
                c.member_id.clear();
            }
            _ => {
                let now = h.now;
                h.tick_at(now);
            }
        }
        clients[ci] = (gi, c);
        check_invariants(&h, &cfg, seed);
        for (i, gid) in groups.iter().enumerate() {
            match h.c.describe_group(gid).state {
                "Stable" => stable_steps += 1,
                "Dead" => incarnation[i] += 1,
                _ => {}
            }
        }
    }
    // Quiesce: nobody talks any more; timers must answer everything still parked.
    for _ in 0..20 {
        let t = h.c.next_deadline_ms().unwrap_or(h.now).max(h.now) + 1;
        h.tick_at(t);
        check_invariants(&h, &cfg, seed);
    }
    for id in &issued {
        assert!(
            h.answers.contains_key(id),
            "seed {seed}: ReplyId {id} never answered"
        );
    }
    let ok_syncs = issued
        .iter()
        .filter(|id| matches!(h.answers.get(id), Some(GroupReply::Sync(r)) if r.error.is_none()))
        .count();
    let ok_joins = issued
        .iter()
        .filter(|id| matches!(h.answers.get(id), Some(GroupReply::Join(r)) if r.error.is_none()))
        .count();
    if std::env::var_os("SLUICE_TEST_VERBOSE").is_some() {
        eprintln!("seed {seed}: {} requests, {ok_joins} joins ok, {ok_syncs} syncs ok, {stable_steps} stable group-steps, max gen {:?}",
            issued.len(), leaders.keys().map(|k| k.2).max());
    }
    // A snapshot replayed into a fresh coordinator serves the same offsets.
    let mut fresh = GroupCoordinator::new(cfg.clone(), 9);
    for (i, r) in h.c.snapshot().iter().enumerate() {
        fresh.apply(r, i as i64, h.now);
    }
    fresh.finish_load(h.now, decode_orders);
    for gid in groups {
        assert_eq!(
            fresh.fetch_offsets(gid, None),
            h.c.fetch_offsets(gid, None),
            "seed {seed}"
        );
    }
    // The scenario must actually exercise the protocol, not only its error paths.
    assert!(
        ok_joins > 0 && ok_syncs > 0,
        "seed {seed}: no successful join/sync"
    );
}

fn check_invariants(h: &H, cfg: &GroupConfig, seed: u64) {
    for gid in ["g0", "g1"] {
        let Some(g) = h.c.group(gid) else { continue };
        let members = g.member_ids();
        assert!(members.len() + g.pending_member_ids().len() <= cfg.group_max_size);
        if let Some(l) = g.leader() {
            assert!(
                members.iter().any(|m| m == l),
                "seed {seed}: leader is not a member"
            );
        }
        let d = h.c.describe_group(gid);
        if d.state == "Stable" {
            assert!(
                g.leader().is_some(),
                "seed {seed}: Stable group without leader"
            );
            for m in &d.members {
                assert!(members.contains(&m.member_id));
                // Our simulated leader assigns each member its own id (or nothing).
                // (A restarted static member keeps its predecessor's assignment.)
                let assignment = opaque(m).1;
                assert!(
                    m.group_instance_id.is_some()
                        || assignment.is_empty()
                        || assignment == m.member_id.as_bytes(),
                    "seed {seed}: assignment of {} is someone else's",
                    m.member_id
                );
            }
        }
        if d.state == "Empty" {
            assert!(members.is_empty());
        }
    }
}

// Goal: an Empty group without offsets is deleted (with a tombstone) EMPTY_GROUP_GRACE_MS
// after it became Empty; a group that never reached the log (only a pending member that
// never came back) disappears at once, without a tombstone.
#[test]
fn empty_groups_are_deleted_after_grace() {
    use crate::coordinator::EMPTY_GROUP_GRACE_MS;
    let mut h = H::new();
    let (a, b) = stable_pair(&mut h);
    h.now = 1_000;
    let _ = h.leave(
        "g",
        &[
            LeavingMember {
                member_id: a,
                group_instance_id: None,
            },
            LeavingMember {
                member_id: b,
                group_instance_id: None,
            },
        ],
    );
    assert_eq!(h.c.next_deadline_ms(), Some(1_000 + EMPTY_GROUP_GRACE_MS));
    h.persisted.clear();
    h.tick_at(1_000 + EMPTY_GROUP_GRACE_MS - 1);
    assert_eq!(h.state("g"), "Empty");
    h.tick_at(1_000 + EMPTY_GROUP_GRACE_MS);
    assert_eq!(h.state("g"), "Dead");
    assert_eq!(
        h.persisted,
        vec![StoreRecord::Group {
            group_id: "g".into(),
            value: None
        }]
    );

    let mut h = H::new();
    let j = h.join(jreq("p", ""));
    assert_eq!(h.join_resp(j).error, Some(GroupError::MemberIdRequired));
    assert_eq!(h.state("p"), "Empty");
    h.tick_at(i64::from(SESSION));
    assert_eq!(h.state("p"), "Dead");
    assert!(h.persisted.is_empty());
    assert_eq!(h.c.next_deadline_ms(), None);
}

// Goal: KIP-345: a static member that does not rejoin in time keeps its place (and gets an
// assignment from the leader) instead of being dropped like a dynamic member; when it comes
// back with its member id and unchanged protocols it gets the current generation without a
// rebalance.
#[test]
fn static_member_survives_a_rebalance_it_missed() {
    let mut h = H::new();
    // Static members use long sessions so that a restart does not cost their place.
    let (s1, d) = static_group_with_session(&mut h, 60_000);
    let gen = h.c.group("g").unwrap().generation_id();
    let (e, je) = h.join_new("g", "e");
    let jd = h.join(jreq("g", &d));
    h.tick_at(h.now + i64::from(REBALANCE));
    let rd = h.join_resp(jd);
    assert_eq!(rd.generation_id, gen + 1);
    assert_eq!(
        rd.leader, d,
        "the leader did not rejoin: the earliest rejoined member leads"
    );
    assert_eq!(
        rd.members.len(),
        3,
        "the absent static member is still listed"
    );
    assert_eq!(h.join_resp(je).generation_id, gen + 1);
    let sd = h.sync(sreq(
        "g",
        &d,
        gen + 1,
        vec![
            (s1.clone(), "S".into()),
            (d.clone(), "D".into()),
            (e.clone(), "E".into()),
        ],
    ));
    assert_eq!(h.sync_resp(sd).assignment, Bytes::from_static(b"D"));
    let mut back = static_req("g", &s1, "i1");
    back.session_timeout_ms = 60_000;
    let j = h.join(back);
    let r = h.join_resp(j);
    assert_eq!((r.error, r.generation_id), (None, gen + 1));
    let mut s = sreq("g", &s1, gen + 1, vec![]);
    s.group_instance_id = Some("i1".into());
    let sid = h.sync(s);
    assert_eq!(h.sync_resp(sid).assignment, Bytes::from_static(b"S"));
    assert_eq!(h.state("g"), "Stable");
}

// Goal: a restarted static member arriving while the group is CompletingRebalance forces a
// new rebalance (the leader may be assigning to its old id); parked syncs are released with
// REBALANCE_IN_PROGRESS and the old id's parked join is fenced.
#[test]
fn static_restart_while_completing_rebalances() {
    let mut h = H::new();
    let (s1, d) = static_group(&mut h);
    let gen = h.c.group("g").unwrap().generation_id();
    h.join(jreq("g", &d)); // follower rejoins with same protocols: answered at once
    let j1 = h.join(static_req("g", &s1, "i1")); // the leader rejoins: rebalance
    assert!(h.joined(j1).is_none());
    let jd = h.join(jreq("g", &d));
    assert_eq!(h.join_resp(j1).generation_id, gen + 1);
    assert_eq!(h.state("g"), "CompletingRebalance");
    let sd = h.sync(sreq("g", &d, gen + 1, vec![]));
    let _ = jd;
    let jr = h.join(static_req("g", "", "i1"));
    assert_eq!(h.sync_resp(sd).error, Some(GroupError::RebalanceInProgress));
    assert_eq!(h.state("g"), "PreparingRebalance");
    let jd2 = h.join(jreq("g", &d));
    let r = h.join_resp(jr);
    assert_eq!(r.generation_id, gen + 2);
    assert_ne!(r.member_id, s1);
    assert_eq!(r.leader, r.member_id, "the restarted leader keeps leading");
    assert_eq!(h.join_resp(jd2).generation_id, gen + 2);
}

// Goal: when every member's session expires, the rebalance completes with nobody: the group
// is Empty, its generation still advances, and its metadata is persisted.
#[test]
fn all_members_expire_to_empty() {
    let mut h = H::new();
    let (a, _b) = stable_pair(&mut h);
    h.persisted.clear();
    h.tick_at(i64::from(SESSION));
    assert_eq!(h.state("g"), "Empty");
    assert_eq!(h.c.group("g").unwrap().generation_id(), 3);
    match h.persisted.as_slice() {
        [StoreRecord::Group { value: Some(v), .. }] => {
            assert_eq!(
                (v.generation_id, v.members.len(), v.leader.as_ref()),
                (3, 0, None)
            );
        }
        other => panic!("expected one group record, got {other:?}"),
    }
    // A member of the dead generation is unknown now; a new join starts generation 4.
    assert_eq!(
        h.c.heartbeat(h.now, &hb("g", &a, 2)),
        Err(GroupError::UnknownMemberId)
    );
    let (_c, jc) = h.join_new("g", "c");
    assert_eq!(h.join_resp(jc).generation_id, 4);
}

// ---- transactional offsets (KIP-447, docs/transactions.md §6.5) ----

// Goal: a transaction's offsets are invisible until its COMMIT marker, which makes them the
// group's offsets (creating the group if needed); an ABORT drops them; a plain commit
// written after a transactional offset wins over it when the transaction commits later,
// as in Kafka (order by the records' log offsets).
#[test]
fn transactional_offsets_wait_for_the_marker() {
    let mut h = H::new();
    h.commit("g", "t", 0, 5);
    let log_offset = h.log_offset + 1;
    h.log_offset = log_offset;
    h.c.apply_txn_offset(7, &offset_rec("g", "t", 0, Some(12)), log_offset);
    h.c.apply_txn_offset(7, &offset_rec("new", "t", 1, Some(3)), log_offset + 1);
    h.log_offset += 1;
    assert_eq!(
        h.fetch("g", "t", 0),
        Some(5),
        "pending offsets are invisible"
    );
    assert!(h.c.has_pending_offset("g", &tp("t", 0)));
    assert!(!h.c.has_pending_offset("g", &tp("t", 1)));
    assert_eq!(h.c.pending_txn_offsets(), 2);
    assert_eq!(h.c.complete_txn(7, true, h.now), 2);
    assert_eq!(h.fetch("g", "t", 0), Some(12));
    assert_eq!(
        h.fetch("new", "t", 1),
        Some(3),
        "the commit created the group"
    );
    assert!(!h.c.has_pending_offset("g", &tp("t", 0)));
    assert_eq!(
        h.c.complete_txn(7, true, h.now),
        0,
        "a second marker decides nothing"
    );
    // Abort: dropped.
    h.log_offset += 1;
    h.c.apply_txn_offset(8, &offset_rec("g", "t", 0, Some(40)), h.log_offset);
    assert_eq!(h.c.complete_txn(8, false, h.now), 1);
    assert_eq!(h.fetch("g", "t", 0), Some(12));
    assert_eq!(h.c.pending_txn_offsets(), 0);
    // A plain commit after the transactional record wins over it.
    h.log_offset += 1;
    h.c.apply_txn_offset(9, &offset_rec("g", "t", 0, Some(50)), h.log_offset);
    h.commit("g", "t", 0, 60);
    h.c.complete_txn(9, true, h.now);
    assert_eq!(h.fetch("g", "t", 0), Some(60));
}

// Goal: two producers holding offsets for one partition: it stays unstable until both
// are decided; the per-group bound counts pending offsets.
#[test]
fn pending_offsets_are_indexed_and_bounded() {
    let mut h = H::with(GroupConfig {
        offsets_per_group_max: 2,
        ..config()
    });
    h.c.apply_txn_offset(1, &offset_rec("g", "t", 0, Some(1)), 1);
    h.c.apply_txn_offset(2, &offset_rec("g", "t", 0, Some(2)), 2);
    h.c.apply_txn_offset(2, &offset_rec("g", "t", 1, Some(2)), 3);
    assert_eq!(
        h.c.txn_offset_record("g", tp("t", 2), 1, -1, None, 0),
        Err(GroupError::CoordinatorNotAvailable),
        "two pending partitions fill the bound"
    );
    assert!(h
        .c
        .txn_offset_record("g", tp("t", 1), 1, -1, None, 0)
        .is_ok());
    h.c.complete_txn(1, false, 0);
    assert!(
        h.c.has_pending_offset("g", &tp("t", 0)),
        "producer 2 still holds it"
    );
    h.c.complete_txn(2, false, 0);
    assert!(!h.c.has_pending_offset("g", &tp("t", 0)));
    assert!(h
        .c
        .txn_offset_record("g", tp("t", 2), 1, -1, None, 0)
        .is_ok());
}

// Goal: TxnOffsetCommit's member checks (KIP-447): a commit naming no member is accepted
// even while the group has members (pre-v3 clients) and during a rebalance; a named member
// must exist at the current generation; a replaced static instance is fenced.
#[test]
fn txn_offset_commit_validation_matrix() {
    let mut h = H::new();
    let v = |h: &mut H, a: CommitAuth| h.c.validate_txn_offset_commit(h.now, &a);
    assert_eq!(v(&mut h, auth("", -1, "")), Err(GroupError::InvalidGroupId));
    assert_eq!(v(&mut h, auth("solo", -1, "")), Ok(()));
    // Kafka's answer since TxnOffsetCommit v6; the handler says ILLEGAL_GENERATION before.
    assert_eq!(
        v(&mut h, auth("solo", 1, "m")),
        Err(GroupError::GroupIdNotFound)
    );
    let (a, b) = stable_pair(&mut h);
    assert_eq!(v(&mut h, auth("g", -1, "")), Ok(()), "no member named");
    assert_eq!(
        v(&mut h, auth("g", 2, "ghost")),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        v(&mut h, auth("g", 1, &a)),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(v(&mut h, auth("g", 2, &a)), Ok(()));
    h.join(jreq("g", &a));
    h.join(jreq("g", &b));
    assert_eq!(h.state("g"), "CompletingRebalance");
    assert_eq!(
        v(&mut h, auth("g", 3, &b)),
        Ok(()),
        "a rebalance does not refuse a transactional commit"
    );
    let mut h = H::new();
    let (s1, _d) = static_group(&mut h);
    let gen = h.c.group("g").unwrap().generation_id();
    h.join(static_req("g", "", "i1"));
    let mut old = auth("g", gen, &s1);
    old.group_instance_id = Some("i1".into());
    assert_eq!(v(&mut h, old), Err(GroupError::FencedInstanceId));
}

// Goal: pending transactional offsets of a group that does not exist yet count against
// `groups_max`, so TxnOffsetCommits to ever new group ids cannot hold memory without bound;
// a group already held (here only by its pending offsets) is still admitted at the limit,
// and a decided transaction frees its slot.
#[test]
fn pending_offsets_of_unknown_groups_count_against_groups_max() {
    let mut h = H::with(GroupConfig {
        groups_max: 2,
        ..config()
    });
    let v = |h: &mut H, g: &str| h.c.validate_txn_offset_commit(h.now, &auth(g, -1, ""));
    for (i, g) in ["p1", "p2"].into_iter().enumerate() {
        assert_eq!(v(&mut h, g), Ok(()));
        h.c.apply_txn_offset(1, &offset_rec(g, "t", 0, Some(5)), i as i64);
    }
    assert!(h.c.group("p1").is_none(), "held only as pending offsets");
    assert_eq!(h.c.group_count(), 2);
    assert_eq!(
        v(&mut h, "p3"),
        Err(GroupError::CoordinatorNotAvailable),
        "a third group id past groups_max"
    );
    assert_eq!(
        h.c.validate_offset_commit(h.now, &auth("p3", -1, "")),
        Err(GroupError::CoordinatorNotAvailable)
    );
    assert_eq!(v(&mut h, "p1"), Ok(()), "a group already held is admitted");
    // ABORT drops the pending offsets: the slots are free again.
    h.c.complete_txn(1, false, 0);
    assert_eq!(h.c.group_count(), 0);
    assert_eq!(v(&mut h, "p3"), Ok(()));
}
