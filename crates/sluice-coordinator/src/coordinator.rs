//! [`GroupCoordinator`]: every group and its committed offsets, behind one façade the broker
//! calls with `now_ms`. Requests that must wait (JoinGroup until the rebalance completes,
//! SyncGroup until the leader's assignment arrives) are parked under a [`ReplyId`] the broker
//! chose; their answers come back later in [`Effects::replies`], from the call that
//! completed them or from [`GroupCoordinator::tick`].
//!
//! Guarantees: every parked request is answered exactly once (a result or an error); no call
//! panics on any input; every collection is bounded by [`GroupConfig`].

use std::collections::HashMap;

use bytes::Bytes;

use crate::config::GroupConfig;
use crate::error::GroupError;
use crate::group::Group;
use crate::records::StoreRecord;

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
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    /// v4+: a new dynamic member gets MEMBER_ID_REQUIRED with its id and must rejoin with it.
    pub require_known_member_id: bool,
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
    /// Metadata for the selected protocol (empty unless the group is Stable or completing).
    pub metadata: Bytes,
    pub assignment: Bytes,
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
    /// "classic" (or "consumer" once KIP-848 groups exist).
    pub group_type: &'static str,
}

/// An answer for a request parked earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupReply {
    Join(JoinGroupResponse),
    Sync(SyncGroupResponse),
}

/// What a call asks the broker to do. `persist` records are already applied in memory; the
/// broker appends them to the offsets log and sends `replies` once they are durable.
#[derive(Debug, Default)]
pub struct Effects {
    pub replies: Vec<(ReplyId, GroupReply)>,
    pub persist: Vec<StoreRecord>,
}

/// All groups and their committed offsets.
#[derive(Debug)]
pub struct GroupCoordinator {
    config: GroupConfig,
    groups: HashMap<String, Group>,
    /// State of the member-id generator (seeded by the caller; no clock or RNG here).
    id_state: u64,
}

impl GroupCoordinator {
    /// An empty coordinator. `seed` makes generated member ids unpredictable across restarts;
    /// the broker passes a random value.
    pub fn new(config: GroupConfig, seed: u64) -> Self {
        Self {
            config,
            groups: HashMap::new(),
            id_state: seed,
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    // ---- loading and persistence ----

    /// Applies one durable record: during load (in log order) and after the broker has made
    /// validated commits / deletes durable. `log_offset` is the record's offset in the
    /// offsets log: an offset record older than the one already applied for the same
    /// partition is ignored, so completion order cannot reorder commits.
    pub fn apply(&mut self, record: &StoreRecord, log_offset: i64, now_ms: i64) {
        let _ = (record, log_offset, now_ms, &self.groups, self.id_state);
        todo!("helper")
    }

    /// Ends loading: groups restored with members restart their session timers from `now_ms`.
    pub fn finish_load(&mut self, now_ms: i64) {
        let _ = now_ms;
        todo!("helper")
    }

    /// Every live record (group metadata and committed offsets, no tombstones). Appending
    /// them and then moving the offsets log's start to their first offset loses nothing.
    pub fn snapshot(&self) -> Vec<StoreRecord> {
        todo!("helper")
    }

    // ---- classic protocol ----

    /// JoinGroup. The answer is in the returned effects under `reply`, now or from a later
    /// call, once the rebalance completes.
    pub fn join_group(&mut self, now_ms: i64, reply: ReplyId, req: JoinGroupRequest) -> Effects {
        let _ = (now_ms, reply, req);
        todo!("helper")
    }

    /// SyncGroup. The answer is in the returned effects under `reply`, now or once the
    /// leader's assignment arrives.
    pub fn sync_group(&mut self, now_ms: i64, reply: ReplyId, req: SyncGroupRequest) -> Effects {
        let _ = (now_ms, reply, req);
        todo!("helper")
    }

    /// Heartbeat: refreshes the member's session and says whether to rejoin.
    pub fn heartbeat(&mut self, now_ms: i64, req: &HeartbeatRequest) -> Result<(), GroupError> {
        let _ = (now_ms, req);
        todo!("helper")
    }

    /// LeaveGroup: the group-level result, one result per named member, and the effects of
    /// the rebalance the departures start.
    pub fn leave_group(
        &mut self,
        now_ms: i64,
        group_id: &str,
        members: &[LeavingMember],
    ) -> (Result<(), GroupError>, Vec<Result<(), GroupError>>, Effects) {
        let _ = (now_ms, group_id, members);
        todo!("helper")
    }

    /// Fires due timers: session expiry, rebalance and initial-delay deadlines, pending
    /// member expiry, offset retention.
    pub fn tick(&mut self, now_ms: i64) -> Effects {
        let _ = now_ms;
        todo!("helper")
    }

    /// The earliest time [`Self::tick`] has work, if any.
    pub fn next_deadline_ms(&self) -> Option<i64> {
        todo!("helper")
    }

    // ---- offsets ----

    /// Checks that `auth` may commit offsets to its group now. On Ok the broker writes one
    /// [`StoreRecord::Offset`] per partition (see [`Self::offset_record`]) and, once durable,
    /// passes them to [`Self::apply`].
    pub fn validate_offset_commit(&mut self, now_ms: i64, auth: &CommitAuth) -> Result<(), GroupError> {
        let _ = (now_ms, auth);
        todo!("helper")
    }

    /// The record for one committed offset, or OffsetMetadataTooLarge.
    pub fn offset_record(
        &self,
        group_id: &str,
        tp: TopicPartition,
        offset: i64,
        leader_epoch: i32,
        metadata: Option<String>,
        now_ms: i64,
    ) -> Result<StoreRecord, GroupError> {
        let _ = (group_id, tp, offset, leader_epoch, metadata, now_ms);
        todo!("helper")
    }

    /// Committed offsets of `group_id`: of the given partitions (an uncommitted one is
    /// `None`), or every committed one when `partitions` is `None`. An unknown group has no
    /// offsets; that is not an error.
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[TopicPartition]>,
    ) -> Vec<(TopicPartition, Option<CommittedOffset>)> {
        let _ = (group_id, partitions);
        todo!("helper")
    }

    /// OffsetDelete: group-level check, then per partition Ok (the broker writes a tombstone
    /// for it) or GroupSubscribedToTopic when a member's subscription names its topic.
    pub fn validate_offset_delete(
        &self,
        group_id: &str,
        partitions: &[TopicPartition],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let _ = (group_id, partitions);
        todo!("helper")
    }

    /// DeleteGroups for one group: the tombstone to write (then apply), or NonEmptyGroup /
    /// GroupIdNotFound / InvalidGroupId.
    pub fn validate_delete_group(&self, group_id: &str) -> Result<StoreRecord, GroupError> {
        let _ = group_id;
        todo!("helper")
    }

    // ---- views ----

    pub fn describe_group(&self, group_id: &str) -> DescribedGroup {
        let _ = group_id;
        todo!("helper")
    }

    /// Every group, filtered by state names (case-insensitive; empty = all) and types.
    pub fn list_groups(&self, states: &[String], types: &[String]) -> Vec<GroupListing> {
        let _ = (states, types);
        todo!("helper")
    }
}
