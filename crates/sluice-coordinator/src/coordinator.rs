//! [`GroupCoordinator`]: every group and its committed offsets, behind one façade the broker
//! calls with `now_ms`. Requests that must wait (JoinGroup until the rebalance completes,
//! SyncGroup until the leader's assignment arrives) are parked under a [`ReplyId`] the broker
//! chose; their answers come back later in [`Effects::replies`], from the call that
//! completed them or from [`GroupCoordinator::tick`].
//!
//! Guarantees: every parked request is answered exactly once (a result or an error); no call
//! panics on any input; every collection is bounded by [`GroupConfig`].

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use crate::config::GroupConfig;
use crate::consumer_group::{
    validate_heartbeat, ConsumerGroup, ConsumerGroupDescription, ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse, TopicsSnapshot, JOIN_EPOCH,
};
use crate::error::GroupError;
use crate::group::{Group, GroupState, TOMBSTONE_MARKER_TTL_MS};
use crate::records::{OffsetValue, StoreRecord, MAX_STRING_BYTES};

/// How long an Empty group without offsets is kept before it is deleted (Kafka deletes
/// such groups at its next offsets cleanup, `offsets.retention.check.interval.ms`, 10 min).
pub const EMPTY_GROUP_GRACE_MS: i64 = 10 * 60 * 1000;

/// The protocol type of Kafka consumers, whose subscriptions OffsetDelete inspects.
pub const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// Chosen by the broker to route a parked request's answer back to its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReplyId(pub u64);

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

/// JoinGroup (classic protocol).
#[derive(Debug, Clone)]
pub struct JoinGroupRequest {
    pub group_id: String,
    /// Empty for a member joining for the first time.
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    /// v0 has none: the caller passes the session timeout.
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    /// The protocols the member supports, in its order of preference.
    pub protocols: Vec<JoinProtocol>,
    /// v4+: a new dynamic member gets MEMBER_ID_REQUIRED with its id and must rejoin with it.
    pub require_known_member_id: bool,
}

/// One protocol of a JoinGroup (an assignor's name, for protocol type "consumer").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinProtocol {
    pub name: String,
    /// The member's metadata for it: opaque here, handed verbatim to the leader.
    pub metadata: Bytes,
    /// For protocol type "consumer": `metadata` decoded by the broker as a
    /// ConsumerProtocolSubscription. `None` for other protocol types and for metadata that
    /// does not decode (such a member is subscribed to nothing).
    pub subscription: Option<ConsumerSubscription>,
}

/// A classic consumer's subscription (the consumer protocol's ConsumerProtocolSubscription,
/// any version), as the broker decoded it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConsumerSubscription {
    pub topics: Vec<String>,
    /// v1+: the partitions the member owns (cooperative rebalancing); empty before.
    pub owned_partitions: Vec<TopicPartition>,
    /// v3+: the member's rack (KIP-881); `None` before.
    pub rack: Option<String>,
}

/// One member in the leader's JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// JoinGroup's answer. On error only `error` and, for MEMBER_ID_REQUIRED, `member_id` matter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JoinGroupResponse {
    pub error: Option<GroupError>,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    /// v9: true when a static leader rejoined without a rebalance and must not reassign.
    pub skip_assignment: bool,
    pub member_id: String,
    /// Every member with its metadata for the selected protocol; only for the leader.
    pub members: Vec<JoinMember>,
}

/// SyncGroup (classic protocol).
#[derive(Debug, Clone)]
pub struct SyncGroupRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// v5+: checked against the group's when present.
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignment, per member id; empty from followers.
    pub assignments: Vec<(String, Bytes)>,
}

/// SyncGroup's answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SyncGroupResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// Heartbeat (classic protocol).
#[derive(Debug, Clone)]
pub struct HeartbeatRequest {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// One member named in a LeaveGroup (v0-2 name exactly one, by member id).
#[derive(Debug, Clone)]
pub struct LeavingMember {
    /// May be empty for a static member leaving by instance id (v3+).
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// Who is committing offsets (OffsetCommit v2-9). A standalone commit (not a group member)
/// has `generation_id` -1 and an empty `member_id`.
#[derive(Debug, Clone)]
pub struct CommitAuth {
    pub group_id: String,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// A committed offset as OffsetFetch returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// DescribeGroups' view of one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub data: MemberData,
}

/// What DescribeGroups shows of a member's protocol state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberData {
    /// A classic member's metadata for the selected protocol (empty unless the group is
    /// Stable or completing a rebalance) and assignment, both opaque.
    Opaque { metadata: Bytes, assignment: Bytes },
    /// A KIP-848 member, in the consumer protocol's terms (its subscribed topics and its
    /// assigned partitions by topic name), for the broker to encode as classic tools expect.
    Consumer {
        topics: Vec<String>,
        assignment: Vec<(String, Vec<i32>)>,
    },
}

/// DescribeGroups' view of one group. An unknown group is `state: "Dead"` with no members.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescribedGroup {
    pub group_id: String,
    /// Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
    pub state: &'static str,
    pub protocol_type: String,
    /// The selected protocol when Stable or CompletingRebalance, else empty.
    pub protocol_name: String,
    pub members: Vec<DescribedMember>,
}

/// ListGroups' view of one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
    /// "classic" or "consumer" (KIP-848).
    pub group_type: &'static str,
}

/// An answer for a request parked earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupReply {
    Join(JoinGroupResponse),
    Sync(SyncGroupResponse),
    ConsumerHeartbeat(ConsumerHeartbeatResponse),
}

/// What a call asks the broker to do. `persist` records are already applied in memory; the
/// broker appends them to the offsets log and sends `replies` once they are durable.
#[derive(Debug, Default)]
pub struct Effects {
    pub replies: Vec<(ReplyId, GroupReply)>,
    pub persist: Vec<StoreRecord>,
}

/// One producer's pending transactional offsets: (group, partition) → the offset and the
/// log offset of its record.
type PendingOffsets = BTreeMap<(String, TopicPartition), (OffsetValue, i64)>;

/// All groups and their committed offsets.
#[derive(Debug)]
pub struct GroupCoordinator {
    config: GroupConfig,
    /// Classic groups, and the committed offsets of every group (a KIP-848 group's offsets
    /// live in an Empty `Group` of the same id with no protocol type, so the offset code
    /// is shared).
    groups: HashMap<String, Group>,
    /// KIP-848 consumer groups. A group id in here is a "consumer" group; its `groups`
    /// entry, if any, is Empty and only holds offsets.
    consumer: HashMap<String, ConsumerGroup>,
    /// State of the member-id generator (seeded by the caller; no clock or RNG here).
    id_state: u64,
    /// False while the broker replays the offsets log; set by [`Self::finish_load`]. After
    /// loading, group metadata records only ever come back from this coordinator's own
    /// `Effects::persist` (already applied), so [`Self::apply`] ignores them.
    loaded: bool,
    /// Recently applied group tombstones: group id → (log offset, applied at). An offset
    /// record older than the tombstone whose write completes after it must not recreate
    /// the group (a replay would not). Kept [`TOMBSTONE_MARKER_TTL_MS`], at most
    /// `groups_max` entries.
    deleted_groups: HashMap<String, (i64, i64)>,
    /// Transactional offsets not yet decided (TxnOffsetCommit, KIP-447;
    /// docs/transactions.md §6.5): producer id → (group, partition) → the offset and the
    /// log offset of its record. Invisible to OffsetFetch until the producer's COMMIT
    /// marker in the offsets log makes them committed ([`Self::complete_txn`]); an ABORT
    /// drops them. Bounded by `offsets_per_group_max` per group (counted with the live
    /// offsets when a commit is validated).
    pending_txn: HashMap<i64, PendingOffsets>,
    /// Index of `pending_txn`: (group, partition) → how many producers hold an offset for
    /// it, and group → how many of its partitions that is, so checks are O(1).
    pending_by_partition: HashMap<(String, TopicPartition), usize>,
    pending_by_group: HashMap<String, usize>,
}

fn join_refusal(error: GroupError) -> GroupReply {
    GroupReply::Join(JoinGroupResponse {
        error: Some(error),
        generation_id: -1,
        ..Default::default()
    })
}

impl GroupCoordinator {
    /// An empty coordinator. `seed` makes generated member ids unpredictable across restarts;
    /// the broker passes a random value.
    pub fn new(config: GroupConfig, seed: u64) -> Self {
        Self {
            config,
            groups: HashMap::new(),
            consumer: HashMap::new(),
            id_state: seed,
            loaded: false,
            deleted_groups: HashMap::new(),
            pending_txn: HashMap::new(),
            pending_by_partition: HashMap::new(),
            pending_by_group: HashMap::new(),
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The group, if the coordinator holds it (for inspection and tests).
    pub fn group(&self, group_id: &str) -> Option<&Group> {
        self.groups.get(group_id)
    }

    /// The KIP-848 consumer group, if `group_id` is one (for inspection and tests).
    pub fn consumer_group(&self, group_id: &str) -> Option<&ConsumerGroup> {
        self.consumer.get(group_id)
    }

    /// Number of groups held (classic, consumer, offset-only, and groups known only from
    /// pending transactional offsets: a TxnOffsetCommit to a group that does not exist yet
    /// holds memory for it too, so it counts against `groups_max` like any group).
    pub fn group_count(&self) -> usize {
        self.groups.len()
            + self
                .consumer
                .keys()
                .filter(|id| !self.groups.contains_key(*id))
                .count()
            + self
                .pending_by_group
                .keys()
                .filter(|id| !self.groups.contains_key(*id) && !self.consumer.contains_key(*id))
                .count()
    }

    /// Whether `group_id` is already counted by [`Self::group_count`].
    fn holds_group(&self, group_id: &str) -> bool {
        self.groups.contains_key(group_id)
            || self.consumer.contains_key(group_id)
            || self.pending_by_group.contains_key(group_id)
    }

    /// Whether `group_id` may take memory as a group: it is held already, or `groups_max`
    /// leaves room for one more.
    fn admits_group(&self, group_id: &str) -> bool {
        self.holds_group(group_id) || self.group_count() < self.config.groups_max
    }

    /// True when a KIP-848 group with members owns `group_id`.
    fn consumer_active(&self, group_id: &str) -> bool {
        self.consumer.get(group_id).is_some_and(|c| !c.is_empty())
    }

    // ---- loading and persistence ----

    /// Applies one durable record: during load (in log order) and after the broker has made
    /// validated commits / deletes durable. `log_offset` is the record's offset in the
    /// offsets log: an offset record older than the one already applied for the same
    /// partition is ignored, so completion order cannot reorder commits.
    ///
    /// Bounds are enforced when requests are validated, not here: a durable record is never
    /// dropped, so a group can briefly exceed `offsets_per_group_max` / `groups_max` by the
    /// commits that were in flight together (or after the bounds were lowered).
    pub fn apply(&mut self, record: &StoreRecord, log_offset: i64, now_ms: i64) {
        assert!(
            log_offset >= 0,
            "a durable record has its offset in the log"
        );
        let group_id = record.group_id();
        if let Some(&(deleted_at, _)) = self.deleted_groups.get(group_id) {
            if log_offset < deleted_at {
                return;
            }
        }
        match record {
            StoreRecord::Offset {
                topic,
                partition,
                value,
                ..
            } => {
                let tp = TopicPartition {
                    topic: topic.clone(),
                    partition: *partition,
                };
                match (self.groups.get_mut(group_id), value) {
                    (Some(g), v) => g.apply_offset(tp, v.as_ref(), log_offset, now_ms),
                    (None, Some(v)) => {
                        // A standalone commit creates an Empty group with no protocol type.
                        let mut g = Group::new(group_id, now_ms);
                        g.apply_offset(tp, Some(v), log_offset, now_ms);
                        self.groups.insert(group_id.to_owned(), g);
                    }
                    (None, None) => {}
                }
            }
            StoreRecord::Group { value: Some(v), .. } => {
                if self.loaded {
                    // Our own record, already applied when it was emitted; memory may have
                    // moved on since, and memory is authoritative.
                    return;
                }
                // A classic record after a consumer group's: the group was converted.
                self.consumer.remove(group_id);
                self.groups
                    .entry(group_id.to_owned())
                    .or_insert_with(|| Group::new(group_id, now_ms))
                    .restore(v, now_ms);
            }
            StoreRecord::ConsumerGroup { value, .. } => {
                if self.loaded {
                    return; // our own record, already applied
                }
                match value {
                    Some(v) => {
                        // A consumer record after a classic one: converted from an Empty
                        // classic group, whose metadata no longer matters (offsets stay).
                        if let Some(g) = self.groups.get_mut(group_id) {
                            g.reset_to_empty(now_ms);
                        }
                        self.consumer
                            .entry(group_id.to_owned())
                            .or_insert_with(|| ConsumerGroup::new(group_id, now_ms))
                            .restore(v, now_ms);
                    }
                    None => {
                        self.consumer.remove(group_id);
                    }
                }
            }
            StoreRecord::Group { value: None, .. } => {
                // DeleteGroups validated the group as empty; a consumer group that gained
                // members since survives (its older offsets still go below).
                if !self.consumer_active(group_id) {
                    self.consumer.remove(group_id);
                }
                let Some(g) = self.groups.get_mut(group_id) else {
                    self.remember_deleted_group(group_id, log_offset, now_ms);
                    return;
                };
                g.delete_offsets_before(log_offset);
                // After load the group may have come back to life since the delete was
                // validated (members joined): then only its older offsets go. Otherwise its
                // metadata goes too, so that no snapshot brings it back.
                if !self.loaded || g.state() == GroupState::Empty {
                    g.reset_to_empty(now_ms);
                }
                if g.is_disposable() {
                    self.groups.remove(group_id);
                }
                self.remember_deleted_group(group_id, log_offset, now_ms);
            }
        }
    }

    fn remember_deleted_group(&mut self, group_id: &str, log_offset: i64, now_ms: i64) {
        if !self.loaded {
            // Replay is in log order: nothing older can arrive later.
            return;
        }
        if self.deleted_groups.len() >= self.config.groups_max.max(1)
            && !self.deleted_groups.contains_key(group_id)
        {
            let oldest = self
                .deleted_groups
                .iter()
                .min_by_key(|(_, &(_, at))| at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.deleted_groups.remove(&k);
            }
        }
        let e = self
            .deleted_groups
            .entry(group_id.to_owned())
            .or_insert((log_offset, now_ms));
        *e = (e.0.max(log_offset), now_ms);
    }

    /// Ends loading: groups restored with members restart their session timers from `now_ms`,
    /// and the metadata of members of "consumer" groups (the log keeps only bytes) is
    /// decoded by the broker's `decode_subscription`, as JoinGroup's is.
    pub fn finish_load(
        &mut self,
        now_ms: i64,
        decode_subscription: impl Fn(&[u8]) -> Option<ConsumerSubscription>,
    ) {
        self.loaded = true;
        for g in self.groups.values_mut() {
            g.restart_sessions(now_ms);
            g.decode_subscriptions(&decode_subscription);
        }
    }

    /// Every live record (group metadata and committed offsets, no tombstones). Appending
    /// them and then moving the offsets log's start to their first offset loses nothing.
    ///
    /// A group's metadata is the last one written to the log (what a replay rebuilds), not
    /// a half-finished rebalance.
    pub fn snapshot(&self) -> Vec<StoreRecord> {
        let mut ids: Vec<&String> = self.groups.keys().collect();
        ids.sort();
        let mut out = Vec::new();
        for id in ids {
            self.groups[id].snapshot_into(&mut out);
        }
        // Consumer groups last: replay applies a consumer record after any classic one of
        // the same id, which is the order that makes the group a consumer group.
        let mut ids: Vec<&String> = self.consumer.keys().collect();
        ids.sort();
        for id in ids {
            let c = &self.consumer[id];
            if c.has_persisted() {
                out.push(c.record());
            }
        }
        out
    }

    // ---- classic protocol ----

    /// JoinGroup. The answer is in the returned effects under `reply`, now or from a later
    /// call, once the rebalance completes.
    pub fn join_group(&mut self, now_ms: i64, reply: ReplyId, req: JoinGroupRequest) -> Effects {
        let mut fx = Effects::default();
        let refuse = |fx: &mut Effects, e| fx.replies.push((reply, join_refusal(e)));
        if req.group_id.is_empty() {
            refuse(&mut fx, GroupError::InvalidGroupId);
            return fx;
        }
        if req.session_timeout_ms < self.config.group_min_session_timeout_ms
            || req.session_timeout_ms > self.config.group_max_session_timeout_ms
        {
            refuse(&mut fx, GroupError::InvalidSessionTimeout);
            return fx;
        }
        if let Some(c) = self.consumer.get(&req.group_id) {
            if !c.is_empty() {
                // A KIP-848 group with members cannot take classic members.
                refuse(&mut fx, GroupError::InconsistentGroupProtocol);
                return fx;
            }
            // An Empty consumer group becomes a classic group (Kafka converts empty groups).
            let persisted = c.has_persisted();
            self.consumer.remove(&req.group_id);
            if persisted {
                fx.persist.push(StoreRecord::ConsumerGroup {
                    group_id: req.group_id.clone(),
                    value: None,
                });
            }
        }
        if !self.groups.contains_key(&req.group_id) {
            if !req.member_id.is_empty() {
                refuse(&mut fx, GroupError::UnknownMemberId);
                return fx;
            }
            if !self.admits_group(&req.group_id) {
                refuse(&mut fx, GroupError::CoordinatorNotAvailable);
                return fx;
            }
            self.groups
                .insert(req.group_id.clone(), Group::new(&req.group_id, now_ms));
        }
        let group_id = req.group_id.clone();
        let g = self.groups.get_mut(&group_id).expect("inserted above");
        g.join(
            &self.config,
            &mut self.id_state,
            now_ms,
            reply,
            req,
            &mut fx,
        );
        // A refused join must not leave an empty shell behind.
        self.drop_if_unused(&group_id);
        fx
    }

    /// Removes a group that holds nothing and was never written to the log.
    fn drop_if_unused(&mut self, group_id: &str) {
        if self
            .groups
            .get(group_id)
            .is_some_and(|g| g.is_disposable() && g.generation_id() == 0 && !g.has_persisted())
        {
            self.groups.remove(group_id);
        }
    }

    /// SyncGroup. The answer is in the returned effects under `reply`, now or once the
    /// leader's assignment arrives.
    pub fn sync_group(&mut self, now_ms: i64, reply: ReplyId, req: SyncGroupRequest) -> Effects {
        let mut fx = Effects::default();
        match self.groups.get_mut(&req.group_id) {
            Some(g) => g.sync(now_ms, reply, req, &mut fx),
            None => fx.replies.push((
                reply,
                GroupReply::Sync(SyncGroupResponse {
                    error: Some(if req.group_id.is_empty() {
                        GroupError::InvalidGroupId
                    } else {
                        GroupError::UnknownMemberId
                    }),
                    ..Default::default()
                }),
            )),
        }
        fx
    }

    /// Heartbeat: refreshes the member's session and says whether to rejoin.
    pub fn heartbeat(&mut self, now_ms: i64, req: &HeartbeatRequest) -> Result<(), GroupError> {
        if req.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        match self.groups.get_mut(&req.group_id) {
            Some(g) => g.heartbeat(now_ms, req),
            None => Err(GroupError::UnknownMemberId),
        }
    }

    /// LeaveGroup: the group-level result, one result per named member, and the effects of
    /// the rebalance the departures start.
    pub fn leave_group(
        &mut self,
        now_ms: i64,
        group_id: &str,
        members: &[LeavingMember],
    ) -> (Result<(), GroupError>, Vec<Result<(), GroupError>>, Effects) {
        let mut fx = Effects::default();
        if group_id.is_empty() {
            return (Err(GroupError::InvalidGroupId), Vec::new(), fx);
        }
        match self.groups.get_mut(group_id) {
            Some(g) => {
                let results = g.leave(now_ms, members, &mut fx);
                (Ok(()), results, fx)
            }
            None => (Err(GroupError::UnknownMemberId), Vec::new(), fx),
        }
    }

    /// Fires due timers: session expiry, rebalance and initial-delay deadlines, pending
    /// member expiry, offset retention.
    pub fn tick(&mut self, now_ms: i64) -> Effects {
        let mut fx = Effects::default();
        let mut ids: Vec<String> = self.groups.keys().cloned().collect();
        // Sorted so that the order of replies and records does not depend on hashing.
        ids.sort();
        for id in ids {
            let hold = self.consumer.get(&id).is_some_and(|c| !c.is_empty());
            let Some(g) = self.groups.get_mut(&id) else {
                continue;
            };
            g.tick(&self.config, now_ms, hold, &mut fx);
            if g.is_disposable() && Self::disposal_time(g) <= now_ms {
                // An Empty group with no offsets left is deleted (Kafka's offset cleanup); its
                // metadata record, if one was written, is tombstoned.
                let persisted = g.has_persisted();
                self.groups.remove(&id);
                if persisted {
                    fx.persist.push(StoreRecord::Group {
                        group_id: id,
                        value: None,
                    });
                }
            }
        }
        let mut ids: Vec<String> = self.consumer.keys().cloned().collect();
        ids.sort();
        for id in ids {
            let Some(c) = self.consumer.get_mut(&id) else {
                continue;
            };
            c.tick(&self.config, now_ms, &mut fx);
            // An Empty consumer group without offsets goes like an Empty classic group.
            if c.is_empty()
                && !self.groups.contains_key(&id)
                && Self::consumer_disposal_time(c) <= now_ms
            {
                let persisted = c.has_persisted();
                self.consumer.remove(&id);
                if persisted {
                    fx.persist.push(StoreRecord::Group {
                        group_id: id,
                        value: None,
                    });
                }
            }
        }
        self.deleted_groups
            .retain(|_, &mut (_, at)| at.saturating_add(TOMBSTONE_MARKER_TTL_MS) > now_ms);
        fx
    }

    fn consumer_disposal_time(c: &ConsumerGroup) -> i64 {
        if c.has_persisted() {
            c.state_timestamp_ms().saturating_add(EMPTY_GROUP_GRACE_MS)
        } else {
            c.state_timestamp_ms()
        }
    }

    /// When a disposable group (Empty, no offsets, no pending member) is deleted: at once if
    /// it never reached the log, else [`EMPTY_GROUP_GRACE_MS`] after it became Empty, so
    /// that DescribeGroups still shows a group whose consumers just stopped.
    fn disposal_time(g: &Group) -> i64 {
        if g.has_persisted() {
            g.state_timestamp_ms().saturating_add(EMPTY_GROUP_GRACE_MS)
        } else {
            // Already due (a past time, so the broker's arithmetic on it cannot overflow).
            g.state_timestamp_ms()
        }
    }

    /// The earliest time [`Self::tick`] has work, if any.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        let classic = self.groups.iter().filter_map(|(id, g)| {
            let hold = self.consumer_active(id);
            if g.is_disposable() {
                Some(Self::disposal_time(g))
            } else {
                g.next_deadline_ms(&self.config, hold)
            }
        });
        let consumer = self.consumer.iter().filter_map(|(id, c)| {
            if c.is_empty() {
                (!self.groups.contains_key(id)).then(|| Self::consumer_disposal_time(c))
            } else {
                c.next_deadline_ms(&self.config)
            }
        });
        classic.chain(consumer).min()
    }

    // ---- KIP-848 consumer groups ----

    /// ConsumerGroupHeartbeat (join, heartbeat, leave). The answer is in the returned
    /// effects under `reply`, after the group's new epoch (if any) is durable. `topics` is
    /// the topic registry now: subscriptions are resolved against it.
    ///
    /// Group type rules (Kafka's): a classic group with members (or pending members)
    /// refuses with GROUP_ID_NOT_FOUND (no online migration); an Empty classic group is
    /// converted on a join (its offsets stay).
    pub fn consumer_group_heartbeat(
        &mut self,
        now_ms: i64,
        reply: ReplyId,
        req: ConsumerHeartbeatRequest,
        topics: &TopicsSnapshot,
    ) -> Effects {
        let mut fx = Effects::default();
        let resp = self.consumer_heartbeat_inner(now_ms, &req, topics, &mut fx);
        fx.replies
            .push((reply, GroupReply::ConsumerHeartbeat(resp)));
        fx
    }

    fn consumer_heartbeat_inner(
        &mut self,
        now_ms: i64,
        req: &ConsumerHeartbeatRequest,
        topics: &TopicsSnapshot,
        fx: &mut Effects,
    ) -> ConsumerHeartbeatResponse {
        if let Err((e, msg)) = validate_heartbeat(&self.config, req) {
            return ConsumerHeartbeatResponse::refusal(e, msg);
        }
        let id = &req.group_id;
        if let Some(g) = self.groups.get_mut(id) {
            if !self.consumer.contains_key(id) {
                if !(g.state() == GroupState::Empty && g.pending_member_ids().is_empty()) {
                    return ConsumerHeartbeatResponse::refusal(
                        GroupError::GroupIdNotFound,
                        "the group is a classic group with members",
                    );
                }
                if req.member_epoch != JOIN_EPOCH {
                    return ConsumerHeartbeatResponse::refusal(
                        GroupError::UnknownMemberId,
                        "unknown member id",
                    );
                }
                // Converted: the classic metadata goes, the offsets stay.
                g.reset_to_empty(now_ms);
                self.consumer
                    .insert(id.clone(), ConsumerGroup::new(id, now_ms));
            }
        } else if !self.consumer.contains_key(id) {
            if req.member_epoch != JOIN_EPOCH {
                // Kafka says GROUP_ID_NOT_FOUND; UNKNOWN_MEMBER_ID makes the client rejoin.
                return ConsumerHeartbeatResponse::refusal(
                    GroupError::UnknownMemberId,
                    "unknown member id",
                );
            }
            if !self.admits_group(id) {
                return ConsumerHeartbeatResponse::refusal(
                    GroupError::CoordinatorNotAvailable,
                    "the coordinator holds its maximum number of groups",
                );
            }
            self.consumer
                .insert(id.clone(), ConsumerGroup::new(id, now_ms));
        }
        let c = self
            .consumer
            .get_mut(id)
            .expect("present or inserted above");
        if req.member_epoch < 0 {
            c.leave(now_ms, req, fx)
        } else {
            let resp = c.heartbeat(&self.config, &mut self.id_state, now_ms, req, topics, fx);
            if resp.error.is_some() && c.is_empty() && !c.has_persisted() {
                // A refused first join must not leave an empty shell behind.
                self.consumer.remove(id);
            }
            resp
        }
    }

    // ---- offsets ----

    /// Checks that `auth` may commit offsets to its group now. On Ok the broker writes one
    /// [`StoreRecord::Offset`] per partition (see [`Self::offset_record`]) and, once durable,
    /// passes them to [`Self::apply`].
    ///
    /// Kafka's rules: a standalone commit (generation < 0, no member id, no instance id) is
    /// allowed to an unknown or Empty group and refused with UNKNOWN_MEMBER_ID while the
    /// group has members; a member's commit needs its current generation and is refused
    /// with REBALANCE_IN_PROGRESS while the group awaits the leader's assignment. A commit
    /// to an unknown group with a generation is ILLEGAL_GENERATION (Kafka: "a request from
    /// an older generation").
    pub fn validate_offset_commit(
        &mut self,
        now_ms: i64,
        auth: &CommitAuth,
    ) -> Result<(), GroupError> {
        if auth.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        if let Some(c) = self.consumer.get(&auth.group_id) {
            // KIP-848 group: `generation_id` is the member epoch.
            return c.validate_commit(&auth.member_id, auth.generation_id);
        }
        let at_group_limit = !self.admits_group(&auth.group_id);
        match self.groups.get_mut(&auth.group_id) {
            Some(g) => g.validate_commit(now_ms, auth),
            None if auth.generation_id >= 0 => Err(GroupError::IllegalGeneration),
            None if !auth.member_id.is_empty() || auth.group_instance_id.is_some() => {
                Err(GroupError::UnknownMemberId)
            }
            None if at_group_limit => Err(GroupError::CoordinatorNotAvailable),
            None => Ok(()),
        }
    }

    /// TxnOffsetCommit's group check (KIP-447): like [`Self::validate_offset_commit`], but
    /// a commit naming no member is accepted while the group has members (pre-v3 clients),
    /// and a rebalance in progress does not refuse it. A KIP-848 member's epoch mismatch is
    /// STALE_MEMBER_EPOCH and a named generation of a group that does not exist
    /// GROUP_ID_NOT_FOUND, as Kafka answers TxnOffsetCommit v6; the handler turns both into
    /// ILLEGAL_GENERATION for older versions, as Kafka does.
    pub fn validate_txn_offset_commit(
        &mut self,
        now_ms: i64,
        auth: &CommitAuth,
    ) -> Result<(), GroupError> {
        if auth.group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let names_member = auth.generation_id >= 0
            || !auth.member_id.is_empty()
            || auth.group_instance_id.is_some();
        if let Some(c) = self.consumer.get(&auth.group_id) {
            if !names_member {
                return Ok(());
            }
            return c.validate_commit(&auth.member_id, auth.generation_id);
        }
        let at_group_limit = !self.admits_group(&auth.group_id);
        match self.groups.get_mut(&auth.group_id) {
            Some(g) => g.validate_txn_commit(now_ms, auth),
            None if auth.generation_id >= 0 => Err(GroupError::GroupIdNotFound),
            None if names_member => Err(GroupError::UnknownMemberId),
            None if at_group_limit => Err(GroupError::CoordinatorNotAvailable),
            None => Ok(()),
        }
    }

    /// The record for one transactional offset: [`Self::offset_record`], with the group's
    /// pending transactional offsets counted towards `offsets_per_group_max`.
    pub fn txn_offset_record(
        &self,
        group_id: &str,
        tp: TopicPartition,
        offset: i64,
        leader_epoch: i32,
        metadata: Option<String>,
        now_ms: i64,
    ) -> Result<StoreRecord, GroupError> {
        let pending = self.pending_by_group.get(group_id).copied().unwrap_or(0);
        let known = self
            .groups
            .get(group_id)
            .is_some_and(|g| g.committed(&tp).is_some())
            || self.has_pending_offset(group_id, &tp);
        let live = self.groups.get(group_id).map_or(0, Group::offset_count);
        if !known && live + pending >= self.config.offsets_per_group_max {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        self.offset_record(group_id, tp, offset, leader_epoch, metadata, now_ms)
    }

    /// Holds a durable transactional offset record of `producer_id` (written at
    /// `log_offset`) as pending: during load in log order, and after the broker made a
    /// TxnOffsetCommit durable. A later record of the same producer for the same partition
    /// replaces it. Tombstones are never transactional; they are ignored.
    pub fn apply_txn_offset(&mut self, producer_id: i64, record: &StoreRecord, log_offset: i64) {
        let StoreRecord::Offset {
            group_id,
            topic,
            partition,
            value: Some(value),
        } = record
        else {
            return;
        };
        let tp = TopicPartition {
            topic: topic.clone(),
            partition: *partition,
        };
        let key = (group_id.clone(), tp);
        let held = self.pending_txn.entry(producer_id).or_default();
        if held
            .insert(key.clone(), (value.clone(), log_offset))
            .is_none()
        {
            let holders = self.pending_by_partition.entry(key).or_insert(0);
            *holders += 1;
            if *holders == 1 {
                *self.pending_by_group.entry(group_id.clone()).or_insert(0) += 1;
            }
        }
    }

    /// Takes a pending offset out of the index.
    fn unindex_pending(&mut self, key: &(String, TopicPartition)) {
        // The index counts each producer's pending offset once: a miss or a zero count
        // would let a group's pending offsets slip past `offsets_per_group_max`.
        let holders = self
            .pending_by_partition
            .get_mut(key)
            .expect("a pending offset is indexed");
        assert!(*holders > 0);
        *holders -= 1;
        if *holders > 0 {
            return;
        }
        self.pending_by_partition.remove(key);
        if let Some(n) = self.pending_by_group.get_mut(&key.0) {
            *n -= 1;
            if *n == 0 {
                self.pending_by_group.remove(&key.0);
            }
        }
    }

    /// The producer's marker in the offsets log: COMMIT makes its pending offsets the
    /// groups' committed ones, each at its own record's log offset (so a plain commit
    /// written after it still wins, as in Kafka); ABORT drops them. Returns how many
    /// offsets it decided.
    pub fn complete_txn(&mut self, producer_id: i64, commit: bool, now_ms: i64) -> usize {
        let Some(pending) = self.pending_txn.remove(&producer_id) else {
            return 0;
        };
        let decided = pending.len();
        for key in pending.keys() {
            self.unindex_pending(key);
        }
        if commit {
            for ((group_id, tp), (value, log_offset)) in pending {
                let record = StoreRecord::Offset {
                    group_id,
                    topic: tp.topic,
                    partition: tp.partition,
                    value: Some(value),
                };
                self.apply(&record, log_offset, now_ms);
            }
        }
        decided
    }

    /// Whether a transaction holds an undecided offset for the group's partition (OffsetFetch
    /// `require_stable`, KIP-447: UNSTABLE_OFFSET_COMMIT).
    pub fn has_pending_offset(&self, group_id: &str, tp: &TopicPartition) -> bool {
        // One lookup; the key is built only when the group has pending offsets at all.
        self.pending_by_group.contains_key(group_id)
            && self
                .pending_by_partition
                .contains_key(&(group_id.to_owned(), tp.clone()))
    }

    /// Pending transactional offsets held, across groups and producers (for tests and
    /// inspection).
    pub fn pending_txn_offsets(&self) -> usize {
        self.pending_txn.values().map(BTreeMap::len).sum()
    }

    /// OffsetFetch v9's member check (`member_id`, `member_epoch`): for a KIP-848 group the
    /// member must exist (UNKNOWN_MEMBER_ID) at its epoch (STALE_MEMBER_EPOCH), unless the
    /// fetch names no member and a negative epoch (admin tools). Classic and unknown groups
    /// are not checked, as in Kafka.
    pub fn validate_offset_fetch(
        &self,
        group_id: &str,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        match self.consumer.get(group_id) {
            Some(c) => c.validate_fetch(member_id, member_epoch),
            None => Ok(()),
        }
    }

    /// The record for one committed offset, or OffsetMetadataTooLarge (or
    /// CoordinatorNotAvailable when the group already holds `offsets_per_group_max`
    /// offsets and this partition is not one of them).
    pub fn offset_record(
        &self,
        group_id: &str,
        tp: TopicPartition,
        offset: i64,
        leader_epoch: i32,
        metadata: Option<String>,
        now_ms: i64,
    ) -> Result<StoreRecord, GroupError> {
        let metadata = metadata.unwrap_or_default();
        let max = self.config.offset_metadata_bytes_max.min(MAX_STRING_BYTES);
        if metadata.len() > max {
            return Err(GroupError::OffsetMetadataTooLarge);
        }
        if let Some(g) = self.groups.get(group_id) {
            if !g.has_offset_slot(&tp, self.config.offsets_per_group_max) {
                return Err(GroupError::CoordinatorNotAvailable);
            }
        } else if self.config.offsets_per_group_max == 0 {
            return Err(GroupError::CoordinatorNotAvailable);
        }
        Ok(StoreRecord::Offset {
            group_id: group_id.to_owned(),
            topic: tp.topic,
            partition: tp.partition,
            value: Some(OffsetValue {
                offset,
                leader_epoch,
                metadata,
                commit_timestamp_ms: now_ms,
            }),
        })
    }

    /// Committed offsets of `group_id`: of the given partitions (an uncommitted one is
    /// `None`), or every committed one when `partitions` is `None`. An unknown group has no
    /// offsets; that is not an error.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Vec<(TopicPartition, Option<CommittedOffset>)> {
        let g = self.groups.get(group_id);
        let view = |v: &OffsetValue| CommittedOffset {
            offset: v.offset,
            leader_epoch: v.leader_epoch,
            metadata: v.metadata.clone(),
        };
        match partitions {
            Some(tps) => tps
                .iter()
                .map(|tp| (tp.clone(), g.and_then(|g| g.committed(tp)).map(view)))
                .collect(),
            None => g
                .map(|g| {
                    g.committed_all()
                        .map(|(tp, v)| (tp.clone(), Some(view(v))))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// OffsetDelete: group-level check, then per partition Ok (the broker writes a tombstone
    /// for it) or GroupSubscribedToTopic when a member's subscription names its topic.
    ///
    /// Kafka's rules: an unknown group is GROUP_ID_NOT_FOUND; an Empty group may delete
    /// anything; a non-empty "consumer" group may delete offsets of topics no member
    /// subscribes to; a non-empty group of another protocol type is NON_EMPTY_GROUP.
    pub fn validate_offset_delete(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        if let Some(c) = self.consumer.get(group_id) {
            return Ok(partitions
                .iter()
                .map(|tp| {
                    if c.subscribed(&tp.topic) {
                        Err(GroupError::GroupSubscribedToTopic)
                    } else {
                        Ok(())
                    }
                })
                .collect());
        }
        let g = self
            .groups
            .get(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        if g.state() == GroupState::Empty {
            return Ok(partitions.iter().map(|_| Ok(())).collect());
        }
        if g.protocol_type() != CONSUMER_PROTOCOL_TYPE {
            return Err(GroupError::NonEmptyGroup);
        }
        Ok(partitions
            .iter()
            .map(|tp| {
                if g.subscribed(&tp.topic) {
                    Err(GroupError::GroupSubscribedToTopic)
                } else {
                    Ok(())
                }
            })
            .collect())
    }

    /// DeleteGroups for one group: the tombstone to write (then apply), or NonEmptyGroup /
    /// GroupIdNotFound / InvalidGroupId.
    pub fn validate_delete_group(&self, group_id: &str) -> Result<StoreRecord, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        if let Some(c) = self.consumer.get(group_id) {
            if !c.is_empty() {
                return Err(GroupError::NonEmptyGroup);
            }
            return Ok(StoreRecord::Group {
                group_id: group_id.to_owned(),
                value: None,
            });
        }
        let g = self
            .groups
            .get(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        if g.state() != GroupState::Empty {
            return Err(GroupError::NonEmptyGroup);
        }
        Ok(StoreRecord::Group {
            group_id: group_id.to_owned(),
            value: None,
        })
    }

    // ---- views ----

    /// DescribeGroups. A KIP-848 group is described classic-style: protocol type
    /// "consumer", its assignor as the protocol, consumer-group state names.
    /// True when `group_id` is a group this coordinator holds (classic or KIP-848).
    pub fn group_exists(&self, group_id: &str) -> bool {
        self.consumer.contains_key(group_id) || self.groups.contains_key(group_id)
    }

    pub fn describe_group(&self, group_id: &str) -> DescribedGroup {
        if let Some(c) = self.consumer.get(group_id) {
            return c.describe_classic();
        }
        match self.groups.get(group_id) {
            Some(g) => g.describe(),
            None => DescribedGroup {
                group_id: group_id.to_owned(),
                state: "Dead",
                protocol_type: String::new(),
                protocol_name: String::new(),
                members: Vec::new(),
            },
        }
    }

    /// ConsumerGroupDescribe for one group: GROUP_ID_NOT_FOUND unless it is a KIP-848
    /// group (Kafka answers the same for classic groups).
    pub fn describe_consumer_group(
        &self,
        group_id: &str,
    ) -> Result<ConsumerGroupDescription, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        self.consumer
            .get(group_id)
            .map(|c| c.describe_consumer())
            .ok_or(GroupError::GroupIdNotFound)
    }

    /// Every group, filtered by state names (case-insensitive; empty = all) and types
    /// ("classic", "consumer").
    pub fn list_groups(&self, states: &[String], types: &[String]) -> Vec<GroupListing> {
        let type_ok =
            |ty: &str| types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case(ty));
        let state_ok =
            |st: &str| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(st));
        let mut out: Vec<GroupListing> = Vec::new();
        if type_ok("classic") {
            out.extend(
                self.groups
                    .iter()
                    .filter(|(id, g)| {
                        !self.consumer.contains_key(*id) && state_ok(g.state().name())
                    })
                    .map(|(id, g)| GroupListing {
                        group_id: id.clone(),
                        protocol_type: g.protocol_type().to_owned(),
                        state: g.state().name(),
                        group_type: "classic",
                    }),
            );
        }
        if type_ok("consumer") {
            out.extend(
                self.consumer
                    .iter()
                    .filter(|(_, c)| state_ok(c.state_name()))
                    .map(|(id, c)| GroupListing {
                        group_id: id.clone(),
                        protocol_type: CONSUMER_PROTOCOL_TYPE.to_owned(),
                        state: c.state_name(),
                        group_type: "consumer",
                    }),
            );
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }
}
