//! One classic-protocol consumer group: members, generations and the rebalance state
//! machine (Empty → PreparingRebalance → CompletingRebalance → Stable), with Kafka's rules,
//! plus the group's committed offsets.
//!
//! What it guarantees:
//! - Every parked JoinGroup / SyncGroup (a [`ReplyId`]) is answered exactly once: on
//!   completion, on error, when its member is removed or fenced, or when a newer request
//!   of the same member supersedes it (the older one then gets REBALANCE_IN_PROGRESS).
//! - One leader per generation, chosen among members whose JoinGroup is parked, so the
//!   leader always receives the member list it must assign.
//! - Nothing here reads a clock: `now_ms` is passed in; deadlines are returned by
//!   [`Group::next_deadline_ms`] and fired by [`Group::tick`].
//!
//! The façade ([`crate::coordinator`]) validates the group-independent parts of each request
//! (group id, session timeout range, group count) before calling in here.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::config::GroupConfig;
use crate::coordinator::{
    CommitAuth, ConsumerSubscription, DescribedGroup, DescribedMember, Effects, GroupReply,
    HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, JoinMember, JoinProtocol, LeavingMember,
    MemberData, ReplyId, SyncGroupRequest, SyncGroupResponse, TopicPartition,
    CONSUMER_PROTOCOL_TYPE,
};
use crate::error::GroupError;
use crate::records::{GroupMetadataValue, MemberMetadataValue, OffsetValue, StoreRecord};

/// Kafka's generation id in error responses ("no generation").
const NO_GENERATION: i32 = -1;

/// How long a deleted offset is remembered (as a marker carrying its tombstone's log offset)
/// so that an older commit whose write completes late cannot bring it back. Far longer than
/// any append to the offsets log can take; purged by [`Group::tick`].
pub(crate) const TOMBSTONE_MARKER_TTL_MS: i64 = 10 * 60 * 1000;

/// The classic group states, with Kafka's names. A deleted group is simply gone from the
/// coordinator (Kafka's `Dead`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl GroupState {
    /// Kafka's name for the state, as DescribeGroups and ListGroups report it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
        }
    }
}

/// One member of the group.
#[derive(Debug, Clone)]
struct Member {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    session_timeout_ms: i32,
    /// The member's protocols in its order of preference (with their decoded
    /// subscriptions, for protocol type "consumer").
    protocols: Vec<JoinProtocol>,
    /// The member's assignment in the current generation (empty until the leader's SyncGroup).
    assignment: Bytes,
    /// Order of first join: "the first member to join" for leader election and listings.
    join_seq: u64,
    /// Last time any request of the member was heard (join, sync, heartbeat, commit).
    last_heard_ms: i64,
    /// A parked JoinGroup waiting for the rebalance to complete.
    awaiting_join: Option<ReplyId>,
    /// A parked SyncGroup waiting for the leader's assignment.
    awaiting_sync: Option<ReplyId>,
    /// Has not sent SyncGroup since the generation started (CompletingRebalance only).
    sync_pending: bool,
}

impl Member {
    fn metadata_for(&self, protocol: Option<&str>) -> Bytes {
        protocol
            .and_then(|p| self.protocols.iter().find(|jp| jp.name == p))
            .map(|jp| jp.metadata.clone())
            .unwrap_or_default()
    }

    /// Members waiting for the rebalance are alive by definition (Kafka's rule): their
    /// session starts again when the rebalance answers them.
    fn session_deadline_ms(&self) -> Option<i64> {
        if self.awaiting_join.is_some() || self.awaiting_sync.is_some() {
            None
        } else {
            Some(
                self.last_heard_ms
                    .saturating_add(i64::from(self.session_timeout_ms.max(0))),
            )
        }
    }
}

/// A committed offset as held in memory, or the marker of a deleted one.
#[derive(Debug, Clone)]
pub(crate) struct StoredOffset {
    /// `None`: deleted by a tombstone at `log_offset` (a marker, see
    /// [`TOMBSTONE_MARKER_TTL_MS`]).
    pub(crate) value: Option<OffsetValue>,
    pub(crate) log_offset: i64,
    pub(crate) applied_at_ms: i64,
}

/// Timers of a rebalance in PreparingRebalance.
#[derive(Debug, Clone, Copy)]
struct JoinTimer {
    /// The rebalance timeout: members that have not rejoined by then are dropped.
    deadline_ms: i64,
    /// While the first rebalance of an empty group waits for more members
    /// (`group.initial.rebalance.delay.ms`): completion time, re-armed by each new member,
    /// never past `deadline_ms`.
    initial_delay_until_ms: Option<i64>,
}

/// A classic group and its committed offsets.
#[derive(Debug)]
pub struct Group {
    group_id: String,
    state: GroupState,
    /// When the group entered its current state (Kafka's `currentStateTimestamp`): offsets of
    /// an Empty consumer group expire `offsets_retention_ms` after it.
    state_timestamp_ms: i64,
    /// Empty for a group that only stores offsets (standalone commits).
    protocol_type: String,
    generation_id: i32,
    protocol_name: Option<String>,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// group.instance.id → member id of static members.
    static_members: BTreeMap<String, String>,
    /// Members told MEMBER_ID_REQUIRED, by id, with the time they are dropped unless they
    /// rejoin.
    pending: BTreeMap<String, i64>,
    next_join_seq: u64,
    join_timer: Option<JoinTimer>,
    /// CompletingRebalance: members that have not sent SyncGroup by then are removed.
    sync_deadline_ms: Option<i64>,
    offsets: BTreeMap<TopicPartition, StoredOffset>,
    /// Number of live (non-marker) entries in `offsets`.
    live_offsets: usize,
    /// A lower bound of the live offsets' commit timestamps (for standalone retention).
    earliest_commit_ms: Option<i64>,
    /// The last group metadata written to (or loaded from) the offsets log: what a replay
    /// would rebuild, and so what a snapshot must carry.
    last_persisted: Option<GroupMetadataValue>,
}

impl Default for Group {
    /// An Empty group with an empty id (the skeleton's placeholder derived `Default`).
    fn default() -> Self {
        Group::new("", 0)
    }
}

/// splitmix64: a bijection of the counter, so ids from one seed never repeat.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `"{prefix}-{uuid-shaped suffix}"`, like Kafka's `clientId-UUID`.
pub(crate) fn generate_member_id(id_state: &mut u64, prefix: &str) -> String {
    let a = splitmix64(id_state);
    let b = splitmix64(id_state);
    format!(
        "{prefix}-{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

fn join_error(error: GroupError, member_id: &str) -> GroupReply {
    GroupReply::Join(JoinGroupResponse {
        error: Some(error),
        generation_id: NO_GENERATION,
        member_id: member_id.to_owned(),
        ..Default::default()
    })
}

fn sync_error(error: GroupError) -> GroupReply {
    GroupReply::Sync(SyncGroupResponse {
        error: Some(error),
        ..Default::default()
    })
}

impl Group {
    /// A new, Empty group.
    pub(crate) fn new(group_id: &str, now_ms: i64) -> Self {
        Self {
            group_id: group_id.to_owned(),
            state: GroupState::Empty,
            state_timestamp_ms: now_ms,
            protocol_type: String::new(),
            generation_id: 0,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending: BTreeMap::new(),
            next_join_seq: 0,
            join_timer: None,
            sync_deadline_ms: None,
            offsets: BTreeMap::new(),
            live_offsets: 0,
            earliest_commit_ms: None,
            last_persisted: None,
        }
    }

    pub fn state(&self) -> GroupState {
        self.state
    }

    /// When the group entered its current state.
    pub fn state_timestamp_ms(&self) -> i64 {
        self.state_timestamp_ms
    }

    pub fn generation_id(&self) -> i32 {
        self.generation_id
    }

    pub fn protocol_type(&self) -> &str {
        &self.protocol_type
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// Member ids in join order.
    pub fn member_ids(&self) -> Vec<String> {
        self.members_in_join_order()
            .into_iter()
            .map(|m| m.member_id.clone())
            .collect()
    }

    /// Member ids told MEMBER_ID_REQUIRED that have not rejoined yet.
    pub fn pending_member_ids(&self) -> Vec<String> {
        self.pending.keys().cloned().collect()
    }

    /// The member's assignment in the current generation, if it is a member.
    pub fn assignment_of(&self, member_id: &str) -> Option<Bytes> {
        self.members.get(member_id).map(|m| m.assignment.clone())
    }

    /// Number of live committed offsets.
    pub fn offset_count(&self) -> usize {
        self.live_offsets
    }

    /// True once group metadata was written to (or loaded from) the offsets log.
    pub(crate) fn has_persisted(&self) -> bool {
        self.last_persisted.is_some()
    }

    /// Members plus pending members: what `group.max.size` bounds.
    fn size(&self) -> usize {
        self.members.len() + self.pending.len()
    }

    /// True when the group holds nothing worth keeping: Empty, no pending member, no offset.
    pub(crate) fn is_disposable(&self) -> bool {
        self.state == GroupState::Empty && self.pending.is_empty() && self.live_offsets == 0
    }

    fn members_in_join_order(&self) -> Vec<&Member> {
        let mut v: Vec<&Member> = self.members.values().collect();
        v.sort_by_key(|m| m.join_seq);
        v
    }

    fn is_leader(&self, member_id: &str) -> bool {
        self.leader.as_deref() == Some(member_id)
    }

    fn transition(&mut self, state: GroupState, now_ms: i64) {
        self.assert_transition(state);
        if self.state != state {
            tracing::info!(
                group = %self.group_id,
                from = self.state.name(),
                to = state.name(),
                generation = self.generation_id,
                members = self.members.len(),
                "group state changed"
            );
        }
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    /// The classic protocol's state graph (Kafka's `GroupState` valid previous states) and
    /// what each state promises: a group completing a rebalance or stable has a leader among
    /// its members, an empty one has no member. O(1): a map lookup at most.
    fn assert_transition(&self, to: GroupState) {
        use GroupState::*;
        let allowed = match to {
            PreparingRebalance => matches!(self.state, Empty | Stable | CompletingRebalance),
            CompletingRebalance => self.state == PreparingRebalance,
            Stable => self.state == CompletingRebalance,
            Empty => self.state == PreparingRebalance,
        };
        assert!(
            allowed,
            "group state {} -> {}",
            self.state.name(),
            to.name()
        );
        match to {
            CompletingRebalance | Stable => {
                let leader = self.leader.as_deref();
                assert!(
                    leader.is_some_and(|l| self.members.contains_key(l)),
                    "a leader"
                );
            }
            Empty => assert!(self.members.is_empty(), "an empty group has no member"),
            PreparingRebalance => {}
        }
    }

    // ---- protocol compatibility and selection ----

    /// Protocols every member supports.
    fn candidate_protocols(&self) -> Vec<&str> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            // A member listing a protocol twice still counts once.
            let mut seen: Vec<&str> = Vec::new();
            for jp in &m.protocols {
                if !seen.contains(&jp.name.as_str()) {
                    seen.push(&jp.name);
                    *counts.entry(&jp.name).or_default() += 1;
                }
            }
        }
        let n = self.members.len();
        counts
            .into_iter()
            .filter(|&(_, c)| c == n)
            .map(|(p, _)| p)
            .collect()
    }

    /// Kafka's `supportsProtocols`: an empty group accepts any non-empty protocol type and
    /// list; otherwise the type must match and one protocol must be supported by everyone.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[JoinProtocol]) -> bool {
        if protocol_type.is_empty() || protocols.is_empty() {
            return false;
        }
        if self.members.is_empty() {
            return true;
        }
        if protocol_type != self.protocol_type {
            return false;
        }
        let candidates = self.candidate_protocols();
        protocols
            .iter()
            .any(|jp| candidates.contains(&jp.name.as_str()))
    }

    /// Each member votes for its most preferred protocol among those everyone supports; the
    /// most votes wins, ties going to the lexicographically smallest name (Kafka leaves ties
    /// unspecified; Sluice makes them deterministic).
    fn select_protocol(&self) -> Option<String> {
        let candidates = self.candidate_protocols();
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(jp) = m
                .protocols
                .iter()
                .find(|jp| candidates.contains(&jp.name.as_str()))
            {
                *votes.entry(jp.name.as_str()).or_default() += 1;
            }
        }
        // BTreeMap iterates names in order; keep the first of the highest count.
        let mut best: Option<(&str, usize)> = None;
        for (p, c) in votes {
            let better = match best {
                None => true,
                Some((_, bc)) => c > bc,
            };
            if better {
                best = Some((p, c));
            }
        }
        best.map(|(p, _)| p.to_owned())
    }

    // ---- member validation ----

    /// Kafka's `validateCurrentMember`: a static member must be the instance's current
    /// member id (else FENCED_INSTANCE_ID); any member must exist (else UNKNOWN_MEMBER_ID).
    fn validate_current(&self, member_id: &str, instance: Option<&str>) -> Result<(), GroupError> {
        if let Some(iid) = instance {
            match self.static_members.get(iid) {
                Some(current) if current != member_id => return Err(GroupError::FencedInstanceId),
                Some(_) => {}
                None => return Err(GroupError::UnknownMemberId),
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }

    fn fresh_member_id(&self, id_state: &mut u64, prefix: &str) -> String {
        loop {
            let id = generate_member_id(id_state, prefix);
            if !self.members.contains_key(&id) && !self.pending.contains_key(&id) {
                return id;
            }
        }
    }

    // ---- JoinGroup ----

    /// JoinGroup, after the façade checked the group id and the session timeout range.
    pub(crate) fn join(
        &mut self,
        cfg: &GroupConfig,
        id_state: &mut u64,
        now_ms: i64,
        reply: ReplyId,
        req: JoinGroupRequest,
        fx: &mut Effects,
    ) {
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            fx.replies.push((
                reply,
                join_error(GroupError::InconsistentGroupProtocol, &req.member_id),
            ));
            return;
        }
        if req.member_id.is_empty() {
            self.join_new_member(cfg, id_state, now_ms, reply, req, fx);
        } else {
            self.join_known_member(cfg, now_ms, reply, req, fx);
        }
    }

    fn join_new_member(
        &mut self,
        cfg: &GroupConfig,
        id_state: &mut u64,
        now_ms: i64,
        reply: ReplyId,
        req: JoinGroupRequest,
        fx: &mut Effects,
    ) {
        if let Some(iid) = req.group_instance_id.clone() {
            if let Some(old_id) = self.static_members.get(&iid).cloned() {
                self.replace_static_member(id_state, now_ms, reply, req, &iid, &old_id, fx);
                return;
            }
        }
        if self.size() >= cfg.group_max_size {
            fx.replies
                .push((reply, join_error(GroupError::GroupMaxSizeReached, "")));
            return;
        }
        // Kafka prefixes static members' ids with their instance id, dynamic ones with the
        // client id.
        let prefix = req.group_instance_id.as_deref().unwrap_or(&req.client_id);
        let member_id = self.fresh_member_id(id_state, prefix);
        if req.group_instance_id.is_none() && req.require_known_member_id {
            // KIP-394: the member must come back with this id, so a client that gives up
            // mid-join cannot leave a ghost member behind.
            let deadline = now_ms.saturating_add(i64::from(req.session_timeout_ms.max(0)));
            self.pending.insert(member_id.clone(), deadline);
            fx.replies
                .push((reply, join_error(GroupError::MemberIdRequired, &member_id)));
            return;
        }
        self.add_member_and_rebalance(cfg, now_ms, reply, member_id, req, fx);
    }

    fn add_member_and_rebalance(
        &mut self,
        cfg: &GroupConfig,
        now_ms: i64,
        reply: ReplyId,
        member_id: String,
        req: JoinGroupRequest,
        fx: &mut Effects,
    ) {
        if self.members.is_empty() {
            self.protocol_type = req.protocol_type.clone();
        }
        if let Some(iid) = &req.group_instance_id {
            self.static_members.insert(iid.clone(), member_id.clone());
        }
        let member = Member {
            member_id: member_id.clone(),
            group_instance_id: req.group_instance_id,
            client_id: req.client_id,
            client_host: req.client_host,
            rebalance_timeout_ms: req.rebalance_timeout_ms,
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols,
            assignment: Bytes::new(),
            join_seq: self.next_join_seq,
            last_heard_ms: now_ms,
            awaiting_join: Some(reply),
            awaiting_sync: None,
            sync_pending: false,
        };
        self.next_join_seq += 1;
        self.members.insert(member_id, member);
        if self.state == GroupState::PreparingRebalance {
            self.rearm_initial_delay(cfg, now_ms);
        }
        self.maybe_prepare_rebalance(cfg.group_initial_rebalance_delay_ms, now_ms, fx);
        self.maybe_complete_join(now_ms, fx);
    }

    /// A known group.instance.id joined with no member id (a restarted static member): the
    /// new member id takes over the old one's place, assignment and leadership; the old id
    /// is fenced from now on.
    #[allow(clippy::too_many_arguments)]
    fn replace_static_member(
        &mut self,
        id_state: &mut u64,
        now_ms: i64,
        reply: ReplyId,
        req: JoinGroupRequest,
        iid: &str,
        old_id: &str,
        fx: &mut Effects,
    ) {
        let new_id = self.fresh_member_id(id_state, iid);
        let Some(mut member) = self.members.remove(old_id) else {
            // The map says the instance is a member; repair rather than panic.
            self.static_members.remove(iid);
            fx.replies
                .push((reply, join_error(GroupError::UnknownMemberId, "")));
            return;
        };
        if let Some(old_reply) = member.awaiting_join.take() {
            fx.replies
                .push((old_reply, join_error(GroupError::FencedInstanceId, old_id)));
        }
        if let Some(old_reply) = member.awaiting_sync.take() {
            fx.replies
                .push((old_reply, sync_error(GroupError::FencedInstanceId)));
        }
        let protocols_unchanged = member.protocols == req.protocols;
        member.member_id = new_id.clone();
        member.client_id = req.client_id;
        member.client_host = req.client_host;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        member.session_timeout_ms = req.session_timeout_ms;
        member.protocols = req.protocols;
        member.last_heard_ms = now_ms;
        self.members.insert(new_id.clone(), member);
        self.static_members.insert(iid.to_owned(), new_id.clone());
        if self.is_leader(old_id) {
            self.leader = Some(new_id.clone());
        }
        match self.state {
            GroupState::Stable if protocols_unchanged => {
                // Nothing the assignment depends on changed: no rebalance (KIP-345). The new
                // id must be durable before the member learns it, so the answer rides on the
                // group record.
                let is_leader = self.is_leader(&new_id);
                let mut resp = self.current_generation_response(&new_id, is_leader);
                resp.skip_assignment = is_leader;
                fx.persist.push(self.persist_metadata());
                fx.replies.push((reply, GroupReply::Join(resp)));
            }
            GroupState::PreparingRebalance => {
                self.park_join(&new_id, reply, fx);
                self.maybe_complete_join(now_ms, fx);
            }
            // Stable with changed protocols, or CompletingRebalance: the leader may already be
            // assigning to the old id, so a new generation is needed.
            _ => {
                self.park_join(&new_id, reply, fx);
                self.prepare_rebalance_and_check(now_ms, fx);
            }
        }
    }

    fn join_known_member(
        &mut self,
        cfg: &GroupConfig,
        now_ms: i64,
        reply: ReplyId,
        req: JoinGroupRequest,
        fx: &mut Effects,
    ) {
        if self.pending.contains_key(&req.member_id) {
            // The second half of the MEMBER_ID_REQUIRED handshake.
            if let Some(iid) = &req.group_instance_id {
                if self.static_members.contains_key(iid) {
                    fx.replies.push((
                        reply,
                        join_error(GroupError::FencedInstanceId, &req.member_id),
                    ));
                    return;
                }
            }
            self.pending.remove(&req.member_id);
            let member_id = req.member_id.clone();
            self.add_member_and_rebalance(cfg, now_ms, reply, member_id, req, fx);
            return;
        }
        if let Err(e) = self.validate_current(&req.member_id, req.group_instance_id.as_deref()) {
            fx.replies.push((reply, join_error(e, &req.member_id)));
            return;
        }
        let member_id = req.member_id.clone();
        let protocols_unchanged = {
            let m = self.members.get_mut(&member_id).expect("validated");
            m.last_heard_ms = now_ms;
            m.protocols == req.protocols
        };
        match self.state {
            GroupState::PreparingRebalance => {
                self.update_member(&member_id, req, reply, fx);
                self.maybe_complete_join(now_ms, fx);
            }
            GroupState::CompletingRebalance if protocols_unchanged => {
                // The member missed the JoinGroup answer: repeat it.
                let is_leader = self.is_leader(&member_id);
                let resp = self.current_generation_response(&member_id, is_leader);
                fx.replies.push((reply, GroupReply::Join(resp)));
            }
            GroupState::Stable if protocols_unchanged && !self.is_leader(&member_id) => {
                let resp = self.current_generation_response(&member_id, false);
                fx.replies.push((reply, GroupReply::Join(resp)));
            }
            GroupState::Empty => {
                // No members in Empty, so validation cannot pass; answer defensively.
                fx.replies
                    .push((reply, join_error(GroupError::UnknownMemberId, &member_id)));
            }
            // The leader rejoining a Stable group (it wants to reassign), or changed
            // protocols: a new generation.
            _ => {
                self.update_member(&member_id, req, reply, fx);
                self.prepare_rebalance_and_check(now_ms, fx);
            }
        }
    }

    /// Takes the member's new protocols and timeouts and parks its JoinGroup.
    fn update_member(
        &mut self,
        member_id: &str,
        req: JoinGroupRequest,
        reply: ReplyId,
        fx: &mut Effects,
    ) {
        if let Some(m) = self.members.get_mut(member_id) {
            m.protocols = req.protocols;
            m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            m.session_timeout_ms = req.session_timeout_ms;
        }
        self.park_join(member_id, reply, fx);
    }

    /// Parks `reply` as the member's JoinGroup; an older parked one is answered first
    /// (REBALANCE_IN_PROGRESS, so the client simply rejoins) to keep exactly-once answers.
    fn park_join(&mut self, member_id: &str, reply: ReplyId, fx: &mut Effects) {
        if let Some(m) = self.members.get_mut(member_id) {
            if let Some(old) = m.awaiting_join.replace(reply) {
                fx.replies
                    .push((old, join_error(GroupError::RebalanceInProgress, member_id)));
            }
        }
    }

    /// The JoinGroup answer of the current generation for `member_id`.
    fn current_generation_response(
        &self,
        member_id: &str,
        with_members: bool,
    ) -> JoinGroupResponse {
        JoinGroupResponse {
            error: None,
            generation_id: self.generation_id,
            protocol_type: Some(self.protocol_type.clone()),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            skip_assignment: false,
            member_id: member_id.to_owned(),
            members: if with_members {
                self.join_members()
            } else {
                Vec::new()
            },
        }
    }

    fn join_members(&self) -> Vec<JoinMember> {
        let protocol = self.protocol_name.as_deref();
        self.members_in_join_order()
            .into_iter()
            .map(|m| JoinMember {
                member_id: m.member_id.clone(),
                group_instance_id: m.group_instance_id.clone(),
                metadata: m.metadata_for(protocol),
            })
            .collect()
    }

    // ---- rebalance ----

    fn max_rebalance_timeout_ms(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms.max(0)))
            .max()
            .unwrap_or(0)
    }

    /// Starts a rebalance when the state allows one (Empty, Stable, CompletingRebalance).
    /// `initial_delay_ms` is `group.initial.rebalance.delay.ms`; it only applies when the
    /// group was Empty.
    fn maybe_prepare_rebalance(&mut self, initial_delay_ms: i32, now_ms: i64, fx: &mut Effects) {
        if self.state == GroupState::PreparingRebalance {
            return;
        }
        let was_empty = self.state == GroupState::Empty;
        if self.state == GroupState::CompletingRebalance {
            // The assignment being computed is for a generation that will never be Stable.
            for m in self.members.values_mut() {
                m.assignment = Bytes::new();
                m.sync_pending = false;
                if let Some(r) = m.awaiting_sync.take() {
                    fx.replies
                        .push((r, sync_error(GroupError::RebalanceInProgress)));
                }
            }
        }
        self.sync_deadline_ms = None;
        self.transition(GroupState::PreparingRebalance, now_ms);
        let deadline_ms = now_ms.saturating_add(self.max_rebalance_timeout_ms());
        let delay = i64::from(initial_delay_ms.max(0));
        let initial_delay_until_ms =
            (was_empty && delay > 0).then(|| now_ms.saturating_add(delay).min(deadline_ms));
        self.join_timer = Some(JoinTimer {
            deadline_ms,
            initial_delay_until_ms,
        });
    }

    /// A rebalance started by anything but a member joining an Empty group (so no initial
    /// delay), completed at once if nobody needs to be waited for.
    fn prepare_rebalance_and_check(&mut self, now_ms: i64, fx: &mut Effects) {
        self.maybe_prepare_rebalance(0, now_ms, fx);
        self.maybe_complete_join(now_ms, fx);
    }

    /// A new member joined while the initial delay runs: wait another delay for more,
    /// never past the rebalance timeout (which the newcomer may have raised).
    fn rearm_initial_delay(&mut self, cfg: &GroupConfig, now_ms: i64) {
        let max_timeout = self.max_rebalance_timeout_ms();
        if let Some(t) = &mut self.join_timer {
            if let Some(until) = &mut t.initial_delay_until_ms {
                let started = self.state_timestamp_ms;
                t.deadline_ms = t.deadline_ms.max(started.saturating_add(max_timeout));
                let delay = i64::from(cfg.group_initial_rebalance_delay_ms.max(0));
                *until = (*until)
                    .max(now_ms.saturating_add(delay))
                    .min(t.deadline_ms);
            }
        }
    }

    fn all_members_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    /// Completes the rebalance when everyone has rejoined or its timer has fired.
    fn maybe_complete_join(&mut self, now_ms: i64, fx: &mut Effects) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        let Some(timer) = self.join_timer else {
            self.complete_join(now_ms, fx);
            return;
        };
        let due = match timer.initial_delay_until_ms {
            Some(until) => now_ms >= until,
            None => self.all_members_joined() || now_ms >= timer.deadline_ms,
        };
        if due {
            self.complete_join(now_ms, fx);
        }
    }

    /// Kafka's `onCompleteJoin`.
    fn complete_join(&mut self, now_ms: i64, fx: &mut Effects) {
        // Dynamic members that did not rejoin in time are gone. Static members stay (KIP-345:
        // a restarting static member keeps its place); the leader assigns to them too.
        let dropped: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.group_instance_id.is_none())
            .map(|m| m.member_id.clone())
            .collect();
        for id in dropped {
            self.remove_member(&id, fx);
        }
        self.join_timer = None;
        if self.members.is_empty() {
            self.generation_id = self.generation_id.wrapping_add(1);
            self.protocol_name = None;
            self.leader = None;
            self.transition(GroupState::Empty, now_ms);
            fx.persist.push(self.persist_metadata());
            return;
        }
        // Keep the leader if it rejoined, else the earliest joiner among those that did.
        let joined = self
            .members_in_join_order()
            .into_iter()
            .filter(|m| m.awaiting_join.is_some())
            .map(|m| m.member_id.clone())
            .collect::<Vec<_>>();
        let Some(first_joined) = joined.first().cloned() else {
            // Only static members that have not rejoined: nobody could receive the member
            // list. Wait another rebalance timeout; their sessions expire meanwhile (Kafka).
            let deadline_ms = now_ms.saturating_add(self.max_rebalance_timeout_ms());
            self.join_timer = Some(JoinTimer {
                deadline_ms,
                initial_delay_until_ms: None,
            });
            return;
        };
        if !self.leader.as_ref().is_some_and(|l| joined.contains(l)) {
            self.leader = Some(first_joined);
        }
        self.generation_id = self.generation_id.wrapping_add(1);
        self.protocol_name = self.select_protocol();
        self.transition(GroupState::CompletingRebalance, now_ms);
        self.sync_deadline_ms = Some(now_ms.saturating_add(self.max_rebalance_timeout_ms()));
        let members_list = self.join_members();
        let leader = self.leader.clone().unwrap_or_default();
        let mut answers = Vec::new();
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
            m.sync_pending = true;
            if let Some(r) = m.awaiting_join.take() {
                m.last_heard_ms = now_ms;
                answers.push((m.join_seq, r, m.member_id.clone()));
            }
        }
        answers.sort_by_key(|a| a.0);
        for (_, r, member_id) in answers {
            let is_leader = member_id == leader;
            fx.replies.push((
                r,
                GroupReply::Join(JoinGroupResponse {
                    error: None,
                    generation_id: self.generation_id,
                    protocol_type: Some(self.protocol_type.clone()),
                    protocol_name: self.protocol_name.clone(),
                    leader: leader.clone(),
                    skip_assignment: false,
                    member_id,
                    members: if is_leader {
                        members_list.clone()
                    } else {
                        Vec::new()
                    },
                }),
            ));
        }
    }

    /// Removes a member, answering whatever it has parked with UNKNOWN_MEMBER_ID. The caller
    /// reacts to the departure with [`Self::after_departure`].
    fn remove_member(&mut self, member_id: &str, fx: &mut Effects) {
        let Some(m) = self.members.remove(member_id) else {
            return;
        };
        if let Some(r) = m.awaiting_join {
            fx.replies
                .push((r, join_error(GroupError::UnknownMemberId, member_id)));
        }
        if let Some(r) = m.awaiting_sync {
            fx.replies
                .push((r, sync_error(GroupError::UnknownMemberId)));
        }
        if let Some(iid) = &m.group_instance_id {
            if self.static_members.get(iid).map(String::as_str) == Some(member_id) {
                self.static_members.remove(iid);
            }
        }
        if self.is_leader(member_id) {
            self.leader = self
                .members_in_join_order()
                .first()
                .map(|m| m.member_id.clone());
        }
    }

    /// After members or pending members left: a Stable or completing group rebalances; a
    /// preparing one may now be complete.
    fn after_departure(&mut self, now_ms: i64, fx: &mut Effects) {
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance_and_check(now_ms, fx)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now_ms, fx),
            GroupState::Empty => {}
        }
    }

    // ---- SyncGroup ----

    pub(crate) fn sync(
        &mut self,
        now_ms: i64,
        reply: ReplyId,
        req: SyncGroupRequest,
        fx: &mut Effects,
    ) {
        if let Err(e) = self.check_sync(&req) {
            fx.replies.push((reply, sync_error(e)));
            return;
        }
        let member_id = req.member_id.clone();
        if let Some(m) = self.members.get_mut(&member_id) {
            m.last_heard_ms = now_ms;
        }
        match self.state {
            GroupState::Empty => fx
                .replies
                .push((reply, sync_error(GroupError::UnknownMemberId))),
            GroupState::PreparingRebalance => fx
                .replies
                .push((reply, sync_error(GroupError::RebalanceInProgress))),
            GroupState::Stable => {
                let resp = self.sync_response(&member_id);
                fx.replies.push((reply, GroupReply::Sync(resp)));
            }
            GroupState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(&member_id) {
                    m.sync_pending = false;
                    if let Some(old) = m.awaiting_sync.replace(reply) {
                        fx.replies
                            .push((old, sync_error(GroupError::RebalanceInProgress)));
                    }
                }
                if self.is_leader(&member_id) {
                    self.complete_sync(now_ms, req.assignments, fx);
                }
            }
        }
    }

    fn check_sync(&self, req: &SyncGroupRequest) -> Result<(), GroupError> {
        self.validate_current(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(t) = &req.protocol_type {
            if *t != self.protocol_type {
                return Err(GroupError::InconsistentGroupProtocol);
            }
        }
        if let Some(n) = &req.protocol_name {
            if Some(n) != self.protocol_name.as_ref() {
                return Err(GroupError::InconsistentGroupProtocol);
            }
        }
        Ok(())
    }

    fn sync_response(&self, member_id: &str) -> SyncGroupResponse {
        SyncGroupResponse {
            error: None,
            protocol_type: Some(self.protocol_type.clone()),
            protocol_name: self.protocol_name.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    /// The leader's assignment arrived: store it (members it leaves out get an empty one;
    /// ids it names that are not members are ignored), become Stable, persist, and release
    /// every parked SyncGroup.
    fn complete_sync(&mut self, now_ms: i64, assignments: Vec<(String, Bytes)>, fx: &mut Effects) {
        for m in self.members.values_mut() {
            m.assignment = Bytes::new();
        }
        for (id, a) in assignments {
            if let Some(m) = self.members.get_mut(&id) {
                m.assignment = a;
            }
        }
        self.transition(GroupState::Stable, now_ms);
        self.sync_deadline_ms = None;
        fx.persist.push(self.persist_metadata());
        let mut parked: Vec<(u64, ReplyId, String)> = Vec::new();
        for m in self.members.values_mut() {
            m.sync_pending = false;
            if let Some(r) = m.awaiting_sync.take() {
                parked.push((m.join_seq, r, m.member_id.clone()));
            }
        }
        parked.sort_by_key(|p| p.0);
        for (_, r, id) in parked {
            let resp = self.sync_response(&id);
            fx.replies.push((r, GroupReply::Sync(resp)));
        }
    }

    // ---- Heartbeat, LeaveGroup, OffsetCommit ----

    pub(crate) fn heartbeat(
        &mut self,
        now_ms: i64,
        req: &HeartbeatRequest,
    ) -> Result<(), GroupError> {
        self.validate_current(&req.member_id, req.group_instance_id.as_deref())?;
        if req.generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        match self.state {
            GroupState::Empty => Err(GroupError::UnknownMemberId),
            state => {
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    m.last_heard_ms = now_ms;
                }
                if state == GroupState::PreparingRebalance {
                    Err(GroupError::RebalanceInProgress)
                } else {
                    Ok(())
                }
            }
        }
    }

    /// LeaveGroup: one result per named member; departures start a rebalance.
    pub(crate) fn leave(
        &mut self,
        now_ms: i64,
        leaving: &[LeavingMember],
        fx: &mut Effects,
    ) -> Vec<Result<(), GroupError>> {
        let mut results = Vec::with_capacity(leaving.len());
        let mut members_left = false;
        let mut pending_left = false;
        for l in leaving {
            let r = match &l.group_instance_id {
                Some(iid) => match self.static_members.get(iid).cloned() {
                    None => Err(GroupError::UnknownMemberId),
                    Some(current) if !l.member_id.is_empty() && l.member_id != current => {
                        Err(GroupError::FencedInstanceId)
                    }
                    Some(current) => {
                        self.remove_member(&current, fx);
                        members_left = true;
                        Ok(())
                    }
                },
                None if self.pending.remove(&l.member_id).is_some() => {
                    pending_left = true;
                    Ok(())
                }
                None if self.members.contains_key(&l.member_id) => {
                    self.remove_member(&l.member_id, fx);
                    members_left = true;
                    Ok(())
                }
                None => Err(GroupError::UnknownMemberId),
            };
            results.push(r);
        }
        if members_left {
            self.after_departure(now_ms, fx);
        } else if pending_left {
            // A pending member was never part of a generation: nothing to rebalance, but a
            // rebalance may have been waiting for it.
            self.maybe_complete_join(now_ms, fx);
        }
        results
    }

    /// Kafka's `validateOffsetCommit` for an existing group, plus the state rules; a member's
    /// commit counts as hearing from it.
    pub(crate) fn validate_commit(
        &mut self,
        now_ms: i64,
        auth: &CommitAuth,
    ) -> Result<(), GroupError> {
        let names_member = auth.generation_id >= 0
            || !auth.member_id.is_empty()
            || auth.group_instance_id.is_some();
        if !names_member {
            // Standalone commit (no group management): only while nobody manages the group.
            return if self.state == GroupState::Empty {
                Ok(())
            } else {
                Err(GroupError::UnknownMemberId)
            };
        }
        self.validate_current(&auth.member_id, auth.group_instance_id.as_deref())?;
        if auth.generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        match self.state {
            GroupState::CompletingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::Empty => Err(GroupError::UnknownMemberId),
            GroupState::Stable | GroupState::PreparingRebalance => {
                if let Some(m) = self.members.get_mut(&auth.member_id) {
                    m.last_heard_ms = now_ms;
                }
                Ok(())
            }
        }
    }

    /// Kafka's `validateOffsetCommit` for a transactional commit (TxnOffsetCommit, KIP-447).
    /// A commit naming no member (generation -1, no member id, no instance id: clients
    /// before v3) is accepted in any state, as Kafka does for transactional producers that
    /// know nothing of the group. One naming a member needs it current (UNKNOWN_MEMBER_ID,
    /// FENCED_INSTANCE_ID) at the group's generation (ILLEGAL_GENERATION); a rebalance in
    /// progress does not refuse it: the transaction decides whether it counts.
    pub(crate) fn validate_txn_commit(
        &mut self,
        now_ms: i64,
        auth: &CommitAuth,
    ) -> Result<(), GroupError> {
        let names_member = auth.generation_id >= 0
            || !auth.member_id.is_empty()
            || auth.group_instance_id.is_some();
        if !names_member {
            return Ok(());
        }
        self.validate_current(&auth.member_id, auth.group_instance_id.as_deref())?;
        if auth.generation_id != self.generation_id {
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(m) = self.members.get_mut(&auth.member_id) {
            m.last_heard_ms = now_ms;
        }
        Ok(())
    }

    // ---- timers ----

    /// Fires the group's due timers: pending-member and session expiry, the sync deadline,
    /// the rebalance (or initial delay) deadline, offset retention, and tombstone-marker
    /// cleanup.
    ///
    /// `hold_offsets`: the group id belongs to a KIP-848 consumer group with members (this
    /// `Group` only holds its offsets), so nothing expires.
    pub(crate) fn tick(
        &mut self,
        cfg: &GroupConfig,
        now_ms: i64,
        hold_offsets: bool,
        fx: &mut Effects,
    ) {
        // Pending members that never came back: dropped without a rebalance (they were
        // never part of a generation); a waiting rebalance is checked below.
        self.pending.retain(|_, deadline| *deadline > now_ms);
        let mut departed = false;

        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline_ms().is_some_and(|d| d <= now_ms))
            .map(|m| m.member_id.clone())
            .collect();
        for id in &expired {
            tracing::info!(group = %self.group_id, member = %id, "member removed: session timeout");
            self.remove_member(id, fx);
        }
        departed |= !expired.is_empty();

        if self.state == GroupState::CompletingRebalance
            && self.sync_deadline_ms.is_some_and(|d| d <= now_ms)
        {
            // Members that never sent SyncGroup for this generation are gone (Kafka 3.x's
            // pending-sync timeout), so a silent member cannot hold the group forever.
            let silent: Vec<String> = self
                .members
                .values()
                .filter(|m| m.sync_pending)
                .map(|m| m.member_id.clone())
                .collect();
            for id in &silent {
                tracing::info!(group = %self.group_id, member = %id, "member removed: no SyncGroup within the rebalance timeout");
                self.remove_member(id, fx);
            }
            self.sync_deadline_ms = None;
            departed |= !silent.is_empty();
        }

        if departed {
            self.after_departure(now_ms, fx);
        }
        self.maybe_complete_join(now_ms, fx);
        if !hold_offsets {
            self.expire_offsets(cfg, now_ms, fx);
        }
        self.offsets.retain(|_, o| {
            o.value.is_some() || o.applied_at_ms.saturating_add(TOMBSTONE_MARKER_TTL_MS) > now_ms
        });
    }

    /// When an Empty group's offsets expire: a consumer group's all together, retention after
    /// it became Empty; a standalone group's one by one, retention after each commit.
    fn retention_deadline_ms(&self, cfg: &GroupConfig) -> Option<i64> {
        if self.state != GroupState::Empty || self.live_offsets == 0 {
            return None;
        }
        let base = if self.protocol_type.is_empty() {
            self.earliest_commit_ms?
        } else {
            self.state_timestamp_ms
        };
        Some(base.saturating_add(cfg.offsets_retention_ms.max(0)))
    }

    fn expire_offsets(&mut self, cfg: &GroupConfig, now_ms: i64, fx: &mut Effects) {
        match self.retention_deadline_ms(cfg) {
            Some(d) if d <= now_ms => {}
            _ => return,
        }
        let retention = cfg.offsets_retention_ms.max(0);
        let whole_group = !self.protocol_type.is_empty();
        let mut expired = Vec::new();
        let mut earliest: Option<i64> = None;
        for (tp, o) in &self.offsets {
            let Some(v) = &o.value else { continue };
            if whole_group || v.commit_timestamp_ms.saturating_add(retention) <= now_ms {
                expired.push(tp.clone());
            } else {
                earliest = Some(
                    earliest.map_or(v.commit_timestamp_ms, |e: i64| e.min(v.commit_timestamp_ms)),
                );
            }
        }
        for tp in expired {
            self.offsets.remove(&tp);
            self.live_offsets -= 1;
            fx.persist.push(StoreRecord::Offset {
                group_id: self.group_id.clone(),
                topic: tp.topic,
                partition: tp.partition,
                value: None,
            });
        }
        self.earliest_commit_ms = earliest;
    }

    /// The earliest time [`Self::tick`] has work for this group.
    pub(crate) fn next_deadline_ms(&self, cfg: &GroupConfig, hold_offsets: bool) -> Option<i64> {
        let mut next: Option<i64> = None;
        let mut consider = |t: Option<i64>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n: i64| n.min(t)));
            }
        };
        for d in self.pending.values() {
            consider(Some(*d));
        }
        for m in self.members.values() {
            consider(m.session_deadline_ms());
        }
        if self.state == GroupState::CompletingRebalance {
            consider(self.sync_deadline_ms);
        }
        if let (GroupState::PreparingRebalance, Some(t)) = (self.state, self.join_timer) {
            consider(Some(t.initial_delay_until_ms.unwrap_or(t.deadline_ms)));
        }
        if !hold_offsets {
            consider(self.retention_deadline_ms(cfg));
        }
        next
    }

    // ---- persistence ----

    /// The group's metadata as of now; remembered as what the log will hold.
    fn persist_metadata(&mut self) -> StoreRecord {
        let value = self.metadata_value();
        self.last_persisted = Some(value.clone());
        StoreRecord::Group {
            group_id: self.group_id.clone(),
            value: Some(value),
        }
    }

    fn metadata_value(&self) -> GroupMetadataValue {
        let protocol = self.protocol_name.as_deref();
        GroupMetadataValue {
            protocol_type: self.protocol_type.clone(),
            generation_id: self.generation_id,
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members_in_join_order()
                .into_iter()
                .map(|m| MemberMetadataValue {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata_for(protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Rebuilds membership from a loaded group record: Stable with its members, or Empty.
    /// Each member's only known protocol is the selected one (all the record carries), so a
    /// member rejoining with its full list starts a rebalance, as in Kafka.
    pub(crate) fn restore(&mut self, v: &GroupMetadataValue, now_ms: i64) {
        self.members.clear();
        self.static_members.clear();
        self.pending.clear();
        self.join_timer = None;
        self.sync_deadline_ms = None;
        self.protocol_type = v.protocol_type.clone();
        self.generation_id = v.generation_id;
        self.last_persisted = Some(v.clone());
        let protocol = match (&v.protocol_name, v.members.is_empty()) {
            (Some(p), false) => p.clone(),
            _ => {
                // No members (or no protocol to give them): Empty.
                self.protocol_name = None;
                self.leader = None;
                self.state = GroupState::Empty;
                self.state_timestamp_ms = v.current_state_timestamp_ms;
                return;
            }
        };
        for mv in &v.members {
            if self.members.contains_key(&mv.member_id) {
                continue;
            }
            if let Some(iid) = &mv.group_instance_id {
                self.static_members
                    .insert(iid.clone(), mv.member_id.clone());
            }
            self.members.insert(
                mv.member_id.clone(),
                Member {
                    member_id: mv.member_id.clone(),
                    group_instance_id: mv.group_instance_id.clone(),
                    client_id: mv.client_id.clone(),
                    client_host: mv.client_host.clone(),
                    rebalance_timeout_ms: mv.rebalance_timeout_ms,
                    session_timeout_ms: mv.session_timeout_ms,
                    // Decoded by `decode_subscriptions` at the end of the load.
                    protocols: vec![JoinProtocol {
                        name: protocol.clone(),
                        metadata: mv.subscription.clone(),
                        subscription: None,
                    }],
                    assignment: mv.assignment.clone(),
                    join_seq: self.next_join_seq,
                    last_heard_ms: now_ms,
                    awaiting_join: None,
                    awaiting_sync: None,
                    sync_pending: false,
                },
            );
            self.next_join_seq += 1;
        }
        self.protocol_name = Some(protocol);
        self.leader = v
            .leader
            .clone()
            .filter(|l| self.members.contains_key(l))
            .or_else(|| {
                self.members_in_join_order()
                    .first()
                    .map(|m| m.member_id.clone())
            });
        self.state = GroupState::Stable;
        self.state_timestamp_ms = v.current_state_timestamp_ms;
    }

    /// Decodes restored members' metadata of a "consumer" group with the broker's
    /// `decode` (end of load; JoinGroup's arrives decoded).
    pub(crate) fn decode_subscriptions(
        &mut self,
        decode: &impl Fn(&[u8]) -> Option<ConsumerSubscription>,
    ) {
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE {
            return;
        }
        for m in self.members.values_mut() {
            for jp in &mut m.protocols {
                if jp.subscription.is_none() {
                    jp.subscription = decode(&jp.metadata);
                }
            }
        }
    }

    /// Restarts every member's session at `now_ms` (end of load).
    pub(crate) fn restart_sessions(&mut self, now_ms: i64) {
        for m in self.members.values_mut() {
            m.last_heard_ms = now_ms;
        }
    }

    /// The group's live records: its last persisted metadata, then its offsets.
    pub(crate) fn snapshot_into(&self, out: &mut Vec<StoreRecord>) {
        if let Some(v) = &self.last_persisted {
            out.push(StoreRecord::Group {
                group_id: self.group_id.clone(),
                value: Some(v.clone()),
            });
        }
        for (tp, o) in &self.offsets {
            if let Some(v) = &o.value {
                out.push(StoreRecord::Offset {
                    group_id: self.group_id.clone(),
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                    value: Some(v.clone()),
                });
            }
        }
    }

    // ---- offsets ----

    /// Applies a durable offset record; older log offsets than the partition's last applied
    /// one (value or tombstone) are ignored.
    pub(crate) fn apply_offset(
        &mut self,
        tp: TopicPartition,
        value: Option<&OffsetValue>,
        log_offset: i64,
        now_ms: i64,
    ) {
        if let Some(existing) = self.offsets.get(&tp) {
            if existing.log_offset >= log_offset {
                return;
            }
        }
        let was_live = self.offsets.get(&tp).is_some_and(|o| o.value.is_some());
        match value {
            Some(v) => {
                if !was_live {
                    self.live_offsets += 1;
                }
                self.earliest_commit_ms = Some(
                    self.earliest_commit_ms
                        .map_or(v.commit_timestamp_ms, |e| e.min(v.commit_timestamp_ms)),
                );
                self.offsets.insert(
                    tp,
                    StoredOffset {
                        value: Some(v.clone()),
                        log_offset,
                        applied_at_ms: now_ms,
                    },
                );
            }
            None => {
                if was_live {
                    self.live_offsets -= 1;
                }
                // Remember the deletion (not a new partition: nothing to remember otherwise).
                if self.offsets.contains_key(&tp) {
                    self.offsets.insert(
                        tp,
                        StoredOffset {
                            value: None,
                            log_offset,
                            applied_at_ms: now_ms,
                        },
                    );
                }
            }
        }
        // The count of live offsets (what `offsets_per_group_max` bounds) never exceeds
        // the offsets held, tombstones included.
        assert!(self.live_offsets <= self.offsets.len());
    }

    /// A group tombstone at `log_offset`: every offset written before it goes.
    pub(crate) fn delete_offsets_before(&mut self, log_offset: i64) {
        self.offsets.retain(|_, o| o.log_offset > log_offset);
        self.live_offsets = self.offsets.values().filter(|o| o.value.is_some()).count();
    }

    /// Forgets membership metadata (a group tombstone during load).
    pub(crate) fn reset_to_empty(&mut self, now_ms: i64) {
        let offsets = std::mem::take(&mut self.offsets);
        let live = self.live_offsets;
        let earliest = self.earliest_commit_ms;
        *self = Group::new(&self.group_id, now_ms);
        self.offsets = offsets;
        self.live_offsets = live;
        self.earliest_commit_ms = earliest;
    }

    pub(crate) fn has_offset_slot(&self, tp: &TopicPartition, max: usize) -> bool {
        self.offsets.get(tp).is_some_and(|o| o.value.is_some()) || self.live_offsets < max
    }

    pub(crate) fn committed(&self, tp: &TopicPartition) -> Option<&OffsetValue> {
        self.offsets.get(tp).and_then(|o| o.value.as_ref())
    }

    pub(crate) fn committed_all(&self) -> impl Iterator<Item = (&TopicPartition, &OffsetValue)> {
        self.offsets
            .iter()
            .filter_map(|(tp, o)| o.value.as_ref().map(|v| (tp, v)))
    }

    /// Topics any member's subscription names (consumer protocol only; every protocol's
    /// subscription counts when none is selected yet). A member whose metadata did not
    /// decode is subscribed to nothing.
    pub(crate) fn subscribed(&self, topic: &str) -> bool {
        self.members.values().any(|m| {
            m.protocols
                .iter()
                .filter(|jp| match &self.protocol_name {
                    Some(p) => *p == jp.name,
                    None => true,
                })
                .filter_map(|jp| jp.subscription.as_ref())
                .any(|sub| sub.topics.iter().any(|t| t == topic))
        })
    }

    // ---- views ----

    pub(crate) fn describe(&self) -> DescribedGroup {
        let with_metadata = matches!(
            self.state,
            GroupState::Stable | GroupState::CompletingRebalance
        );
        let protocol = self.protocol_name.as_deref().filter(|_| with_metadata);
        DescribedGroup {
            group_id: self.group_id.clone(),
            state: self.state.name(),
            protocol_type: self.protocol_type.clone(),
            protocol_name: protocol.unwrap_or_default().to_owned(),
            members: self
                .members_in_join_order()
                .into_iter()
                .map(|m| DescribedMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    data: MemberData::Opaque {
                        metadata: if with_metadata {
                            m.metadata_for(protocol)
                        } else {
                            Bytes::new()
                        },
                        assignment: if self.state == GroupState::Stable {
                            m.assignment.clone()
                        } else {
                            Bytes::new()
                        },
                    },
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: generated member ids carry the prefix and do not repeat.
    #[test]
    fn member_ids_are_unique() {
        let mut s = 7;
        let mut seen = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let id = generate_member_id(&mut s, "client");
            assert!(id.starts_with("client-"));
            assert!(seen.insert(id));
        }
    }
}
