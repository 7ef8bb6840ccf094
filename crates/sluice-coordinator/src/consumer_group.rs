//! One KIP-848 consumer group (the "consumer" group protocol, ConsumerGroupHeartbeat): its
//! members, the group epoch, the target assignment computed by a server-side assignor
//! ([`crate::assignor`]), and each member's reconciliation towards its target.
//!
//! Kafka's nouns: the *group epoch* bumps whenever membership, a subscription, the chosen
//! assignor or a subscribed topic's partition count changes; the *target assignment* is
//! recomputed for each new group epoch and carries that epoch (the *assignment epoch*); each
//! member has a *member epoch* and a *current assignment*, and moves to its target in steps
//! (Kafka's `CurrentAssignmentBuilder`):
//! 1. partitions it owns that are not in its target are revoked first: the member is told to
//!    keep only `current ∩ target`, stays at its epoch and is *UnrevokedPartitions* until a
//!    heartbeat's `topic_partitions` shows it no longer owns them (or its rebalance timeout
//!    removes it);
//! 2. then it takes the target epoch and every target partition that no member owns; those
//!    still owned by another member (not yet revoked there) leave it *UnreleasedPartitions*,
//!    and it picks them up on a later heartbeat once they are released.
//!
//! What it guarantees:
//! - a partition is owned (assigned or pending revocation) by at most one member at any
//!   time: `owners` is the single record of ownership and a partition is handed out only
//!   when it has no owner (checked by the randomized test in `tests.rs`);
//! - once heartbeats stop changing anything, every partition of every subscribed topic is
//!   assigned to exactly one member (the assignor's guarantee, reached by reconciliation);
//! - member ids are never reused within a run; no call panics; members are bounded by
//!   `consumer_group_max_size` and each subscription by `consumer_subscribed_topics_max`;
//! - a member's subscription is its topic names plus every topic whose whole name matches
//!   its `SubscribedTopicRegex` ([`crate::topic_regex`]), re-resolved on the first heartbeat
//!   after the topic registry changed (created or deleted topics), so a regex member gets a
//!   new matching topic within one heartbeat interval; a change in what a regex matches
//!   bumps the group epoch like a changed subscription.
//!
//! Nothing here reads a clock or the topic registry: `now_ms` and a [`TopicsSnapshot`] are
//! passed in. Only the group epoch is persisted (see `docs/coordinator.md`): after a restart
//! the group exists, empty, and members that heartbeat get UNKNOWN_MEMBER_ID and rejoin.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::assignor::{Assignment, Assignor, TopicInfo, TopicUuid};
use crate::config::GroupConfig;
use crate::coordinator::{
    DescribedGroup, DescribedMember, Effects, MemberData, CONSUMER_PROTOCOL_TYPE,
};
use crate::error::GroupError;
use crate::group::generate_member_id;
use crate::records::{ConsumerGroupValue, StoreRecord};
use crate::topic_regex::TopicRegex;

/// Member epoch of a ConsumerGroupHeartbeat that joins (or rejoins) the group.
pub const JOIN_EPOCH: i32 = 0;
/// Member epoch of a ConsumerGroupHeartbeat that leaves the group.
pub const LEAVE_EPOCH: i32 = -1;
/// Member epoch of a static member leaving temporarily (it keeps its partitions until its
/// session expires, and a restart with the same instance id takes them over).
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// The topic registry as the coordinator needs it: name → (id, partition count). The broker
/// builds one per call.
#[derive(Debug, Clone, Default)]
pub struct TopicsSnapshot {
    by_name: HashMap<String, TopicInfo>,
    names: HashMap<TopicUuid, String>,
    /// The registry's version, if it has one: two snapshots with the same version hold the
    /// same topics, so regexes resolved against one need no new resolution. `None`: always
    /// resolve again.
    version: Option<u64>,
}

impl TopicsSnapshot {
    /// A snapshot without a version: regexes are resolved against it on every heartbeat.
    pub fn new() -> Self {
        Self::default()
    }

    /// A snapshot of the registry at `version`; the caller inserts every topic it holds.
    pub fn with_version(version: u64) -> Self {
        Self {
            version: Some(version),
            ..Self::default()
        }
    }

    pub fn insert(&mut self, name: impl Into<String>, id: TopicUuid, partitions: i32) {
        let name = name.into();
        self.names.insert(id, name.clone());
        self.by_name.insert(name, TopicInfo { id, partitions });
    }

    pub fn get(&self, name: &str) -> Option<TopicInfo> {
        self.by_name.get(name).copied()
    }

    pub fn name_of(&self, id: &TopicUuid) -> Option<&str> {
        self.names.get(id).map(String::as_str)
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

/// One distinct `SubscribedTopicRegex` of a group and the topics it matched.
#[derive(Debug, Clone)]
struct ResolvedRegex {
    regex: TopicRegex,
    topics: BTreeSet<String>,
    /// The registry version `topics` was resolved at (`None`: resolve again).
    version: Option<u64>,
}

/// ConsumerGroupHeartbeat (key 68), v0-1. `None` fields mean "unchanged since the last
/// heartbeat", as on the wire.
#[derive(Debug, Clone, Default)]
pub struct ConsumerHeartbeatRequest {
    pub group_id: String,
    /// v0: empty on the first heartbeat (the coordinator generates one); v1: always set,
    /// generated by the client.
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// What the member owns now (topic id, partitions).
    pub topic_partitions: Option<Vec<(TopicUuid, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
    pub api_version: i16,
}

/// ConsumerGroupHeartbeat's answer. On error only `error` and `error_message` matter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerHeartbeatResponse {
    pub error: Option<GroupError>,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, sent when it changed (or on join, or when the member's
    /// reported ownership differs); `None` = unchanged.
    pub assignment: Option<Vec<(TopicUuid, Vec<i32>)>>,
}

impl ConsumerHeartbeatResponse {
    pub(crate) fn refusal(error: GroupError, message: &str) -> Self {
        Self {
            error: Some(error),
            error_message: Some(message.to_owned()),
            ..Default::default()
        }
    }
}

/// One topic's partitions in a ConsumerGroupDescribe answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedTopicPartitions {
    pub topic_id: TopicUuid,
    pub topic_name: String,
    pub partitions: Vec<i32>,
}

/// ConsumerGroupDescribe's view of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Vec<DescribedTopicPartitions>,
    pub target_assignment: Vec<DescribedTopicPartitions>,
}

/// ConsumerGroupDescribe's view of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    pub group_id: String,
    /// Kafka's names: Empty, Assigning, Reconciling, Stable.
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor_name: String,
    pub members: Vec<ConsumerMemberDescription>,
}

/// Where a member is in its reconciliation (Kafka's `MemberState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemberState {
    /// At its target (or waiting for none).
    Stable,
    /// Told to revoke `pending_revocation`; not acknowledged yet.
    UnrevokedPartitions,
    /// At the target epoch, but some target partitions are still owned by others.
    UnreleasedPartitions,
}

#[derive(Debug, Clone)]
struct Member {
    member_id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    member_epoch: i32,
    /// The epoch before the last bump: a heartbeat at it is accepted if the member's owned
    /// partitions are a subset of its assignment (the bumping response may have been lost).
    previous_member_epoch: i32,
    state: MemberState,
    rebalance_timeout_ms: i32,
    /// Topics subscribed by name.
    subscribed: BTreeSet<String>,
    /// `SubscribedTopicRegex` (never empty: an empty one clears it).
    subscribed_regex: Option<String>,
    server_assignor: Option<Assignor>,
    assigned: Assignment,
    pending_revocation: Assignment,
    last_heard_ms: i64,
    /// Set while UnrevokedPartitions: the member is removed if it has not revoked by then.
    revocation_deadline_ms: Option<i64>,
}

impl Member {
    fn new(member_id: String, now_ms: i64) -> Self {
        Self {
            member_id,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            member_epoch: JOIN_EPOCH,
            previous_member_epoch: -1,
            state: MemberState::Stable,
            rebalance_timeout_ms: 0,
            subscribed: BTreeSet::new(),
            subscribed_regex: None,
            server_assignor: None,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            last_heard_ms: now_ms,
            revocation_deadline_ms: None,
        }
    }

    fn session_deadline_ms(&self, cfg: &GroupConfig) -> i64 {
        self.last_heard_ms
            .saturating_add(i64::from(cfg.consumer_session_timeout_ms.max(0)))
    }
}

fn partitions_of(a: &Assignment) -> impl Iterator<Item = (TopicUuid, i32)> + '_ {
    a.iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (*t, *p)))
}

fn insert(a: &mut Assignment, t: TopicUuid, p: i32) {
    a.entry(t).or_default().insert(p);
}

fn contains(a: &Assignment, t: &TopicUuid, p: i32) -> bool {
    a.get(t).is_some_and(|s| s.contains(&p))
}

fn to_wire(a: &Assignment) -> Vec<(TopicUuid, Vec<i32>)> {
    a.iter()
        .filter(|(_, ps)| !ps.is_empty())
        .map(|(t, ps)| (*t, ps.iter().copied().collect()))
        .collect()
}

/// Normalizes reported ownership: empty topics dropped, so that it compares with an
/// [`Assignment`].
fn from_wire(tps: &[(TopicUuid, Vec<i32>)]) -> Assignment {
    let mut a = Assignment::new();
    for (t, ps) in tps {
        for p in ps {
            insert(&mut a, *t, *p);
        }
    }
    a
}

fn is_subset(small: &Assignment, big: &Assignment) -> bool {
    partitions_of(small).all(|(t, p)| contains(big, &t, p))
}

/// A KIP-848 consumer group.
#[derive(Debug)]
pub struct ConsumerGroup {
    group_id: String,
    group_epoch: i32,
    assignment_epoch: i32,
    members: BTreeMap<String, Member>,
    /// group.instance.id → member id.
    static_members: BTreeMap<String, String>,
    /// Target assignment of the assignment epoch, per member id.
    target: BTreeMap<String, Assignment>,
    /// Who owns each partition now (assigned or pending revocation): the single source of
    /// truth that keeps two members from owning one partition.
    owners: HashMap<(TopicUuid, i32), String>,
    /// The subscribed topics' metadata the current group epoch was computed with; a
    /// difference on a later heartbeat bumps the epoch.
    subscribed_metadata: BTreeMap<String, TopicInfo>,
    /// Every distinct regex a member subscribes with, compiled once, and what it matched.
    regexes: BTreeMap<String, ResolvedRegex>,
    /// The assignor of the current target.
    assignor: Assignor,
    /// When the group was created or last became Empty (for the empty-group grace period).
    state_timestamp_ms: i64,
    /// The epoch last handed to `Effects::persist` (or loaded).
    persisted_epoch: Option<i32>,
}

impl ConsumerGroup {
    pub(crate) fn new(group_id: &str, now_ms: i64) -> Self {
        Self {
            group_id: group_id.to_owned(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            target: BTreeMap::new(),
            owners: HashMap::new(),
            subscribed_metadata: BTreeMap::new(),
            regexes: BTreeMap::new(),
            assignor: Assignor::DEFAULT,
            state_timestamp_ms: now_ms,
            persisted_epoch: None,
        }
    }

    /// A group rebuilt from its persisted record: its epoch, no members.
    pub(crate) fn restore(&mut self, v: &ConsumerGroupValue, now_ms: i64) {
        *self = ConsumerGroup::new(&self.group_id, now_ms);
        self.group_epoch = v.epoch;
        self.assignment_epoch = v.epoch;
        self.persisted_epoch = Some(v.epoch);
    }

    pub fn group_epoch(&self) -> i32 {
        self.group_epoch
    }

    pub fn assignment_epoch(&self) -> i32 {
        self.assignment_epoch
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn member_ids(&self) -> Vec<String> {
        self.members.keys().cloned().collect()
    }

    /// The member's epoch, if it is a member.
    pub fn member_epoch(&self, member_id: &str) -> Option<i32> {
        self.members.get(member_id).map(|m| m.member_epoch)
    }

    pub(crate) fn state_timestamp_ms(&self) -> i64 {
        self.state_timestamp_ms
    }

    pub(crate) fn has_persisted(&self) -> bool {
        self.persisted_epoch.is_some()
    }

    /// Kafka's consumer group state.
    pub fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch != self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.member_epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// True when some member subscribes to `topic`, by name or regex (OffsetDelete's check).
    pub(crate) fn subscribed(&self, topic: &str) -> bool {
        self.members.values().any(|m| {
            m.subscribed.contains(topic) || self.regex_topics(m).any(|t| t.as_str() == topic)
        })
    }

    /// The topics a member's regex matched at its last resolution (none without a regex).
    fn regex_topics<'a>(&'a self, m: &'a Member) -> impl Iterator<Item = &'a String> + 'a {
        m.subscribed_regex
            .as_ref()
            .and_then(|p| self.regexes.get(p))
            .into_iter()
            .flat_map(|r| r.topics.iter())
    }

    /// A member's subscription: its topic names and what its regex matched.
    fn subscription(&self, m: &Member) -> BTreeSet<String> {
        m.subscribed
            .iter()
            .chain(self.regex_topics(m))
            .cloned()
            .collect()
    }

    /// Compiles the members' new regexes and resolves every regex whose resolution is older
    /// than `topics`; regexes no member uses any more are dropped. True when what some regex
    /// matches changed (the caller bumps the group epoch). A pattern was checked by
    /// [`validate_heartbeat`], so compiling it again cannot fail; if it did, it matches
    /// nothing.
    fn resolve_regexes(&mut self, cfg: &GroupConfig, topics: &TopicsSnapshot) -> bool {
        let used: BTreeSet<&String> = self
            .members
            .values()
            .filter_map(|m| m.subscribed_regex.as_ref())
            .collect();
        self.regexes.retain(|p, _| used.contains(p));
        let mut changed = false;
        for pattern in used {
            if !self.regexes.contains_key(pattern) {
                let Ok(regex) = TopicRegex::compile(pattern, cfg.consumer_regex_compiled_bytes_max)
                else {
                    continue;
                };
                let fresh = ResolvedRegex {
                    regex,
                    topics: BTreeSet::new(),
                    version: None,
                };
                self.regexes.insert(pattern.clone(), fresh);
            }
            let r = self.regexes.get_mut(pattern).expect("inserted above");
            if r.version.is_some() && r.version == topics.version {
                continue;
            }
            let matched: BTreeSet<String> = topics
                .names()
                .filter(|t| r.regex.matches(t))
                .map(str::to_owned)
                .collect();
            changed |= matched != r.topics;
            r.topics = matched;
            r.version = topics.version;
        }
        changed
    }

    fn persist_epoch(&mut self, fx: &mut Effects) {
        if self.persisted_epoch != Some(self.group_epoch) {
            self.persisted_epoch = Some(self.group_epoch);
            fx.persist.push(self.record());
        }
    }

    pub(crate) fn record(&self) -> StoreRecord {
        StoreRecord::ConsumerGroup {
            group_id: self.group_id.clone(),
            value: Some(ConsumerGroupValue {
                epoch: self.persisted_epoch.unwrap_or(self.group_epoch),
            }),
        }
    }

    fn bump_epoch(&mut self) {
        self.group_epoch = self.group_epoch.saturating_add(1);
    }

    /// The assignor members ask for most (ties to the smaller name), else the default.
    fn preferred_assignor(&self) -> Assignor {
        let mut votes: BTreeMap<Assignor, usize> = BTreeMap::new();
        for a in self.members.values().filter_map(|m| m.server_assignor) {
            *votes.entry(a).or_default() += 1;
        }
        votes
            .into_iter()
            .max_by(|(a, x), (b, y)| x.cmp(y).then(b.name().cmp(a.name())))
            .map_or(Assignor::DEFAULT, |(a, _)| a)
    }

    /// Recomputes the target for the current group epoch if it is newer. Topics no member
    /// subscribes to any more are dropped from `subscribed_metadata`.
    fn maybe_compute_target(&mut self) {
        if self.assignment_epoch == self.group_epoch {
            return;
        }
        let subs: BTreeMap<String, BTreeSet<String>> = self
            .members
            .iter()
            .map(|(id, m)| (id.clone(), self.subscription(m)))
            .collect();
        let wanted: BTreeSet<&String> = subs.values().flatten().collect();
        self.subscribed_metadata.retain(|t, _| wanted.contains(t));
        self.assignor = self.preferred_assignor();
        self.target = self
            .assignor
            .assign(&subs, &self.subscribed_metadata, &self.target);
        // The target is computed only for a newer group epoch, and never for a member
        // that is gone.
        assert!(self.assignment_epoch < self.group_epoch);
        assert!(self.target.keys().len() <= self.members.len());
        self.assignment_epoch = self.group_epoch;
    }

    fn release_all(&mut self, member_id: &str) {
        if let Some(m) = self.members.get_mut(member_id) {
            for (t, p) in partitions_of(&m.assigned).chain(partitions_of(&m.pending_revocation)) {
                if self.owners.get(&(t, p)).is_some_and(|o| o == member_id) {
                    self.owners.remove(&(t, p));
                }
            }
            m.assigned.clear();
            m.pending_revocation.clear();
            m.revocation_deadline_ms = None;
        }
    }

    /// Removes a member (left, fenced, expired): its partitions are free at once, the group
    /// epoch bumps and the target is recomputed.
    fn remove_member(&mut self, member_id: &str, now_ms: i64) {
        self.release_all(member_id);
        if let Some(m) = self.members.remove(member_id) {
            if let Some(inst) = &m.instance_id {
                if self
                    .static_members
                    .get(inst)
                    .is_some_and(|id| id == member_id)
                {
                    self.static_members.remove(inst);
                }
            }
            self.target.remove(member_id);
            self.bump_epoch();
            if self.members.is_empty() {
                self.state_timestamp_ms = now_ms;
            }
            self.maybe_compute_target();
        }
    }

    /// One reconciliation step for `member_id` (Kafka's `CurrentAssignmentBuilder`). `owned`
    /// is what the member reported owning in this heartbeat (`None`: not reported).
    fn reconcile(&mut self, member_id: &str, owned: Option<&Assignment>, now_ms: i64) {
        let Some(m) = self.members.get(member_id) else {
            return;
        };
        let step = match m.state {
            MemberState::Stable => m.member_epoch != self.assignment_epoch,
            // Revocation is acknowledged only by a report that no longer lists them.
            MemberState::UnrevokedPartitions => owned.is_some_and(|o| {
                partitions_of(&m.pending_revocation).all(|(t, p)| !contains(o, &t, p))
            }),
            MemberState::UnreleasedPartitions => true,
        };
        if !step {
            return;
        }
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let m = self.members.get_mut(member_id).expect("checked above");
        // Acknowledged revocations are released first, so they can be handed out below.
        for (t, p) in partitions_of(&m.pending_revocation) {
            if self.owners.get(&(t, p)).is_some_and(|o| o == member_id) {
                self.owners.remove(&(t, p));
            }
        }
        m.pending_revocation.clear();
        let mut keep = Assignment::new();
        let mut revoke = Assignment::new();
        for (t, p) in partitions_of(&m.assigned) {
            if contains(&target, &t, p) {
                insert(&mut keep, t, p);
            } else {
                insert(&mut revoke, t, p);
            }
        }
        if !revoke.is_empty() {
            // Step 1: revoke first; the epoch stays until the member acknowledges.
            m.assigned = keep;
            m.pending_revocation = revoke;
            m.state = MemberState::UnrevokedPartitions;
            if m.revocation_deadline_ms.is_none() {
                m.revocation_deadline_ms =
                    Some(now_ms.saturating_add(i64::from(m.rebalance_timeout_ms.max(0))));
            }
            return;
        }
        // Step 2: the target epoch, with every target partition nobody else owns.
        let mut unreleased = false;
        for (t, p) in partitions_of(&target) {
            if contains(&keep, &t, p) {
                continue;
            }
            match self.owners.get(&(t, p)) {
                None => {
                    self.owners.insert((t, p), member_id.to_owned());
                    insert(&mut keep, t, p);
                }
                Some(o) if o == member_id => insert(&mut keep, t, p),
                Some(_) => unreleased = true,
            }
        }
        m.assigned = keep;
        m.revocation_deadline_ms = None;
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        if m.member_epoch != self.assignment_epoch {
            m.previous_member_epoch = m.member_epoch;
            m.member_epoch = self.assignment_epoch;
        }
        // Epochs order as Kafka's do: member <= assignment <= group.
        assert!(
            m.member_epoch <= self.assignment_epoch && self.assignment_epoch <= self.group_epoch
        );
    }

    /// A heartbeat with member epoch ≥ 0 (join or heartbeat). The request passed
    /// [`validate_heartbeat`]; `can_add` says whether the coordinator may admit a new member.
    pub(crate) fn heartbeat(
        &mut self,
        cfg: &GroupConfig,
        id_state: &mut u64,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
        topics: &TopicsSnapshot,
        fx: &mut Effects,
    ) -> ConsumerHeartbeatResponse {
        let result = self.heartbeat_inner(cfg, id_state, now_ms, req, topics);
        self.persist_epoch(fx);
        match result {
            Ok(r) => r,
            Err((e, msg)) => ConsumerHeartbeatResponse::refusal(e, msg),
        }
    }

    fn new_member_id(&self, id_state: &mut u64, req: &ConsumerHeartbeatRequest) -> String {
        if !req.member_id.is_empty() {
            return req.member_id.clone();
        }
        loop {
            // A UUID-shaped id, like the ids v1 clients generate themselves.
            let id = generate_member_id(id_state, "m");
            let id = id[2..].to_owned();
            if !self.members.contains_key(&id) {
                return id;
            }
        }
    }

    fn heartbeat_inner(
        &mut self,
        cfg: &GroupConfig,
        id_state: &mut u64,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
        topics: &TopicsSnapshot,
    ) -> Result<ConsumerHeartbeatResponse, (GroupError, &'static str)> {
        let owned = req.topic_partitions.as_deref().map(|tps| {
            // Partitions of topics that no longer exist are not "owned" any more.
            let mut a = from_wire(tps);
            a.retain(|t, _| topics.name_of(t).is_some());
            a
        });
        let joining = req.member_epoch == JOIN_EPOCH;
        let mut membership_changed = false;
        let member_id: String = match (&req.instance_id, joining) {
            (Some(inst), true) => match self.static_members.get(inst).cloned() {
                None => {
                    let id = self.new_member_id(id_state, req);
                    self.admit(cfg, &id, now_ms)?;
                    membership_changed = true;
                    id
                }
                Some(old) => {
                    let m = &self.members[&old];
                    if m.member_epoch != STATIC_LEAVE_EPOCH && old != req.member_id {
                        return Err((
                            GroupError::UnreleasedInstanceId,
                            "the static member's previous incarnation is still active",
                        ));
                    }
                    let id = self.new_member_id(id_state, req);
                    self.replace_static(&old, &id);
                    if old == id {
                        // The same incarnation rejoining from scratch owns nothing.
                        self.reset_member(&id);
                    }
                    id
                }
            },
            (None, true) => {
                let id = self.new_member_id(id_state, req);
                if self.members.contains_key(&id) {
                    // A known member rejoining (after being fenced): it owns nothing now.
                    self.reset_member(&id);
                } else {
                    self.admit(cfg, &id, now_ms)?;
                    membership_changed = true;
                }
                id
            }
            (inst, false) => {
                let Some(m) = self.members.get(&req.member_id) else {
                    return Err((GroupError::UnknownMemberId, "unknown member id"));
                };
                if let Some(inst) = inst {
                    if m.instance_id.as_ref() != Some(inst) {
                        return Err((
                            GroupError::FencedInstanceId,
                            "the instance id belongs to another member",
                        ));
                    }
                }
                let subset = owned.as_ref().is_some_and(|o| is_subset(o, &m.assigned));
                if req.member_epoch > m.member_epoch
                    || (req.member_epoch < m.member_epoch
                        && (req.member_epoch != m.previous_member_epoch || !subset))
                {
                    return Err((
                        GroupError::FencedMemberEpoch,
                        "the member epoch is not the member's current epoch; rejoin",
                    ));
                }
                req.member_id.clone()
            }
        };

        // Take the request's changes.
        let m = self.members.get_mut(&member_id).expect("admitted above");
        m.last_heard_ms = now_ms;
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        if req.instance_id.is_some() {
            m.instance_id = req.instance_id.clone();
        }
        if req.rack_id.is_some() {
            m.rack_id = req.rack_id.clone();
        }
        if req.rebalance_timeout_ms > 0 {
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if let Some(names) = &req.subscribed_topic_names {
            let set: BTreeSet<String> = names.iter().filter(|n| !n.is_empty()).cloned().collect();
            if set != m.subscribed {
                m.subscribed = set;
                membership_changed = true;
            }
        }
        if let Some(pattern) = &req.subscribed_topic_regex {
            let regex = (!pattern.is_empty()).then(|| pattern.clone());
            if regex != m.subscribed_regex {
                m.subscribed_regex = regex;
                membership_changed = true;
            }
        }
        if let Some(name) = &req.server_assignor {
            let a = Assignor::from_name(name);
            if a != m.server_assignor {
                m.server_assignor = a;
                membership_changed = true;
            }
        }
        if let Some(inst) = &m.instance_id {
            self.static_members.insert(inst.clone(), member_id.clone());
        }
        // A regex now matching other topics changes a subscription like a new name list.
        membership_changed |= self.resolve_regexes(cfg, topics);

        // The subscribed topics as they are now: new topics, deleted topics and added
        // partitions change the target, so they bump the epoch like membership does.
        let mut metadata = BTreeMap::new();
        for m in self.members.values() {
            for t in m.subscribed.iter().chain(self.regex_topics(m)) {
                if let Some(info) = topics.get(t) {
                    metadata.insert(t.clone(), info);
                }
            }
        }
        if metadata != self.subscribed_metadata {
            self.subscribed_metadata = metadata;
            membership_changed = true;
        }
        if membership_changed {
            self.bump_epoch();
        }
        self.maybe_compute_target();

        let before = self
            .members
            .get(&member_id)
            .map(|m| (m.member_epoch, m.assigned.clone()));
        self.reconcile(&member_id, owned.as_ref(), now_ms);
        let m = &self.members[&member_id];
        let changed = before.is_none_or(|(e, a)| e != m.member_epoch || a != m.assigned);
        let send_assignment = joining
            || changed
            || req.member_epoch != m.member_epoch
            || owned.as_ref().is_some_and(|o| *o != m.assigned);
        Ok(ConsumerHeartbeatResponse {
            error: None,
            error_message: None,
            member_id: Some(member_id.clone()),
            member_epoch: m.member_epoch,
            heartbeat_interval_ms: cfg.consumer_heartbeat_interval_ms,
            assignment: send_assignment.then(|| to_wire(&m.assigned)),
        })
    }

    /// Adds a new member, or refuses with GROUP_MAX_SIZE_REACHED.
    fn admit(
        &mut self,
        cfg: &GroupConfig,
        member_id: &str,
        now_ms: i64,
    ) -> Result<(), (GroupError, &'static str)> {
        if self.members.len() >= cfg.consumer_group_max_size {
            return Err((
                GroupError::GroupMaxSizeReached,
                "the group has reached group.consumer.max.size",
            ));
        }
        self.members.insert(
            member_id.to_owned(),
            Member::new(member_id.to_owned(), now_ms),
        );
        Ok(())
    }

    /// A member that rejoins with epoch 0 has lost its partitions: release them and start
    /// its reconciliation over.
    fn reset_member(&mut self, member_id: &str) {
        self.release_all(member_id);
        if let Some(m) = self.members.get_mut(member_id) {
            m.state = MemberState::Stable;
            m.previous_member_epoch = -1;
            m.member_epoch = JOIN_EPOCH;
        }
    }

    /// A static member's new incarnation takes over the old one's place, epoch and
    /// partitions (KIP-345 for KIP-848): no rebalance.
    fn replace_static(&mut self, old: &str, new: &str) {
        if old == new {
            return;
        }
        let Some(mut m) = self.members.remove(old) else {
            return;
        };
        m.member_id = new.to_owned();
        for (t, p) in partitions_of(&m.assigned).chain(partitions_of(&m.pending_revocation)) {
            self.owners.insert((t, p), new.to_owned());
        }
        if let Some(t) = self.target.remove(old) {
            self.target.insert(new.to_owned(), t);
        }
        if let Some(inst) = &m.instance_id {
            self.static_members.insert(inst.clone(), new.to_owned());
        }
        // A static member that left with -2 resumes at the epoch it had.
        if m.member_epoch == STATIC_LEAVE_EPOCH {
            m.member_epoch = m.previous_member_epoch.max(0);
        }
        self.members.insert(new.to_owned(), m);
    }

    /// A heartbeat with member epoch -1 (leave) or -2 (static temporary leave).
    pub(crate) fn leave(
        &mut self,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
        fx: &mut Effects,
    ) -> ConsumerHeartbeatResponse {
        let found = match &req.instance_id {
            Some(inst) => match self.static_members.get(inst) {
                None => Err((GroupError::UnknownMemberId, "unknown instance id")),
                Some(id) if *id != req.member_id => Err((
                    GroupError::FencedInstanceId,
                    "the instance id belongs to another member",
                )),
                Some(id) => Ok(id.clone()),
            },
            None if self.members.contains_key(&req.member_id) => Ok(req.member_id.clone()),
            None => Err((GroupError::UnknownMemberId, "unknown member id")),
        };
        let member_id = match found {
            Ok(id) => id,
            Err((e, msg)) => return ConsumerHeartbeatResponse::refusal(e, msg),
        };
        if req.member_epoch == STATIC_LEAVE_EPOCH {
            // Kept, with its partitions, until its session expires or it comes back.
            let m = self.members.get_mut(&member_id).expect("found above");
            if m.member_epoch != STATIC_LEAVE_EPOCH {
                m.previous_member_epoch = m.member_epoch;
                m.member_epoch = STATIC_LEAVE_EPOCH;
            }
            m.last_heard_ms = now_ms;
        } else {
            self.remove_member(&member_id, now_ms);
        }
        self.persist_epoch(fx);
        ConsumerHeartbeatResponse {
            member_id: Some(member_id),
            member_epoch: req.member_epoch,
            ..Default::default()
        }
    }

    /// Session expiry and revocation (rebalance) timeouts: the member is removed.
    pub(crate) fn tick(&mut self, cfg: &GroupConfig, now_ms: i64, fx: &mut Effects) {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline_ms(cfg) <= now_ms
                    || m.revocation_deadline_ms.is_some_and(|d| d <= now_ms)
            })
            .map(|m| m.member_id.clone())
            .collect();
        for id in expired {
            self.remove_member(&id, now_ms);
        }
        self.persist_epoch(fx);
    }

    pub(crate) fn next_deadline_ms(&self, cfg: &GroupConfig) -> Option<i64> {
        self.members
            .values()
            .flat_map(|m| [Some(m.session_deadline_ms(cfg)), m.revocation_deadline_ms])
            .flatten()
            .min()
    }

    /// OffsetCommit (v9: `generation_id_or_member_epoch` is the member epoch). Kafka's
    /// `ConsumerGroup.validateOffsetCommit`: a commit with a negative epoch is accepted only
    /// while the group is empty; otherwise the member must exist and be at its epoch.
    pub(crate) fn validate_commit(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        self.check_member_epoch(member_id, epoch)
    }

    /// OffsetFetch v9 with a member id and epoch; a fetch without a member (admin tools,
    /// older clients: no member id, negative epoch) is always accepted.
    pub(crate) fn validate_fetch(
        &self,
        member_id: Option<&str>,
        epoch: i32,
    ) -> Result<(), GroupError> {
        let member_id = member_id.unwrap_or_default();
        if member_id.is_empty() && epoch < 0 {
            return Ok(());
        }
        self.check_member_epoch(member_id, epoch)
    }

    /// The member must exist and be at `epoch` (commits and fetches alike).
    fn check_member_epoch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if epoch != m.member_epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    fn topic_name(&self, id: &TopicUuid) -> Option<&str> {
        self.subscribed_metadata
            .iter()
            .find(|(_, i)| i.id == *id)
            .map(|(n, _)| n.as_str())
    }

    fn describe_assignment(&self, a: &Assignment) -> Vec<DescribedTopicPartitions> {
        a.iter()
            .filter(|(_, ps)| !ps.is_empty())
            .map(|(t, ps)| DescribedTopicPartitions {
                topic_id: *t,
                topic_name: self.topic_name(t).unwrap_or_default().to_owned(),
                partitions: ps.iter().copied().collect(),
            })
            .collect()
    }

    /// ConsumerGroupDescribe's view.
    pub(crate) fn describe_consumer(&self) -> ConsumerGroupDescription {
        ConsumerGroupDescription {
            group_id: self.group_id.clone(),
            state: self.state_name(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor_name: self.assignor.name().to_owned(),
            members: self
                .members
                .values()
                .map(|m| ConsumerMemberDescription {
                    member_id: m.member_id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.member_epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed.iter().cloned().collect(),
                    subscribed_topic_regex: m.subscribed_regex.clone(),
                    assignment: self.describe_assignment(&m.assigned),
                    target_assignment: self.describe_assignment(
                        self.target.get(&m.member_id).unwrap_or(&Assignment::new()),
                    ),
                })
                .collect(),
        }
    }

    /// DescribeGroups' (classic) view: protocol type "consumer", the assignor as the
    /// protocol, and each member's subscription and current assignment by topic name, which
    /// the broker encodes in the consumer protocol so that classic tools can read them.
    pub(crate) fn describe_classic(&self) -> DescribedGroup {
        DescribedGroup {
            group_id: self.group_id.clone(),
            state: self.state_name(),
            protocol_type: CONSUMER_PROTOCOL_TYPE.to_owned(),
            protocol_name: self.assignor.name().to_owned(),
            members: self
                .members
                .values()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    data: MemberData::Consumer {
                        topics: self.subscription(m).into_iter().collect(),
                        assignment: self.named_assignment(&m.assigned),
                    },
                })
                .collect(),
        }
    }

    /// An assignment by topic name (topics no longer known are left out).
    fn named_assignment(&self, a: &Assignment) -> Vec<(String, Vec<i32>)> {
        a.iter()
            .filter_map(|(t, ps)| {
                let name = self.topic_name(t)?;
                Some((name.to_owned(), ps.iter().copied().collect()))
            })
            .collect()
    }

    /// Checks the ownership invariant (tests): `owners` is exactly the union of every
    /// member's assigned and pending partitions, and no partition has two owners.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut seen: HashMap<(TopicUuid, i32), &str> = HashMap::new();
        for m in self.members.values() {
            for tp in partitions_of(&m.assigned).chain(partitions_of(&m.pending_revocation)) {
                if let Some(other) = seen.insert(tp, &m.member_id) {
                    panic!("{tp:?} owned by {other} and {}", m.member_id);
                }
                assert_eq!(
                    self.owners.get(&tp).map(String::as_str),
                    Some(m.member_id.as_str())
                );
            }
        }
        assert_eq!(seen.len(), self.owners.len(), "stale owners entries");
    }

    /// What the coordinator counts as owned by the member: assigned plus pending
    /// revocation (tests).
    #[cfg(test)]
    pub(crate) fn owned_by(&self, member_id: &str) -> BTreeSet<(TopicUuid, i32)> {
        self.members
            .get(member_id)
            .map(|m| {
                partitions_of(&m.assigned)
                    .chain(partitions_of(&m.pending_revocation))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Each member's current assignment (tests).
    #[cfg(test)]
    pub(crate) fn assigned(&self, member_id: &str) -> Vec<(TopicUuid, Vec<i32>)> {
        self.members
            .get(member_id)
            .map(|m| to_wire(&m.assigned))
            .unwrap_or_default()
    }
}

/// The group-independent checks of a ConsumerGroupHeartbeat (Kafka's
/// `throwIfConsumerGroupHeartbeatRequestIsInvalid`).
pub(crate) fn validate_heartbeat(
    cfg: &GroupConfig,
    req: &ConsumerHeartbeatRequest,
) -> Result<(), (GroupError, &'static str)> {
    let invalid = |msg| Err((GroupError::InvalidRequest, msg));
    if req.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if (req.api_version >= 1 || req.member_epoch != JOIN_EPOCH) && req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if req.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if req.member_epoch < STATIC_LEAVE_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    if req.member_epoch == STATIC_LEAVE_EPOCH && req.instance_id.is_none() {
        return invalid("InstanceId can't be null when leaving as a static member.");
    }
    if req
        .subscribed_topic_names
        .as_ref()
        .is_some_and(|n| n.len() > cfg.consumer_subscribed_topics_max)
    {
        return invalid("Too many subscribed topics.");
    }
    if req.member_epoch == JOIN_EPOCH {
        if req.rebalance_timeout_ms <= 0 {
            return invalid("RebalanceTimeoutMs must be provided in first request.");
        }
        if req.topic_partitions.as_ref().is_some_and(|t| !t.is_empty()) {
            return invalid("TopicPartitions must be empty when (re-)joining.");
        }
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            );
        }
    }
    if let Some(pattern) = req.subscribed_topic_regex.as_deref() {
        if !pattern.is_empty()
            && TopicRegex::compile(pattern, cfg.consumer_regex_compiled_bytes_max).is_err()
        {
            return Err((
                GroupError::InvalidRegularExpression,
                "SubscribedTopicRegex is not a valid regular expression.",
            ));
        }
    }
    if let Some(a) = &req.server_assignor {
        if Assignor::from_name(a).is_none() {
            return Err((
                GroupError::UnsupportedAssignor,
                "ServerAssignor is not supported; use uniform or range.",
            ));
        }
    }
    Ok(())
}
