//! OffsetForLeaderEpoch (key 23), v2-4 (Kafka 4.x's range, KIP-896 floor): the end offset of
//! a leader epoch, which KIP-320 clients use to check that their position was not truncated
//! away by a leader change.
//!
//! Sluice is one node whose partitions never change leader, so every partition has exactly
//! one leader epoch, 0, which starts at the log start offset and is still open. Kafka's
//! `LeaderEpochFileCache.endOffsetFor` then gives, for a requested epoch:
//!
//! | requested epoch | answer (leader_epoch, end_offset) |
//! |---|---|
//! | -1 (undefined) | (-1, -1) |
//! | 0 (the latest) | (0, end of the log) |
//! | above 0 (unknown, newer than any) | (-1, -1) |
//! | below -1 (older than any) | (requested, log start offset) |
//!
//! The end of the log is the high watermark: the durable end a consumer can read up to
//! (Kafka's leader answers with its log end offset, which it may not have replicated yet).
//! A `current_leader_epoch` other than -1 (not given) is checked as Kafka's
//! `checkCurrentLeaderEpoch` does: above 0 is UNKNOWN_LEADER_EPOCH, below 0 is
//! FENCED_LEADER_EPOCH. Unknown topics and partitions get UNKNOWN_TOPIC_OR_PARTITION.
//! Nothing here touches a file: the offsets are atomics in memory.

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse};
use sluice_log::PartitionOffsets;

use super::{Ctx, Reply};
use crate::{error_code, services::acl};
use crate::{services::groups, services::topics};

/// The one leader epoch of every Sluice partition (Metadata reports none, -1).
const LEADER_EPOCH: i32 = 0;
/// Kafka's `UNDEFINED_EPOCH` and `UNDEFINED_EPOCH_OFFSET`.
const UNDEFINED_EPOCH: i32 = -1;
const UNDEFINED_EPOCH_OFFSET: i64 = -1;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: OffsetForLeaderEpochRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let b = &ctx.broker;
    let mut resp = OffsetForLeaderEpochResponse::default();
    for t in req.topics {
        let topic = b.topics.get(&t.topic.0);
        let internal = topics::is_internal(&t.topic.0);
        let authorized = ctx.allowed(acl::op::DESCRIBE, acl::resource::TOPIC, &t.topic.0);
        let mut tr = OffsetForLeaderTopicResult::default();
        tr.topic = t.topic;
        for p in t.partitions {
            let key = match (&topic, internal) {
                (Some(topic), _) => topic.partition(p.partition).cloned(),
                (None, true) if p.partition == 0 => Some(groups::offsets_partition()),
                (None, _) => None,
            };
            let offsets = key.map(|k| b.log.offsets(&k));
            let mut r = EpochEndOffset::default();
            r.partition = p.partition;
            (r.error_code, r.leader_epoch, r.end_offset) = match offsets {
                _ if !authorized => (
                    ResponseError::TopicAuthorizationFailed.code(),
                    UNDEFINED_EPOCH,
                    UNDEFINED_EPOCH_OFFSET,
                ),
                None => (
                    ResponseError::UnknownTopicOrPartition.code(),
                    UNDEFINED_EPOCH,
                    UNDEFINED_EPOCH_OFFSET,
                ),
                Some(Err(e)) => (
                    error_code::from_log(&e),
                    UNDEFINED_EPOCH,
                    UNDEFINED_EPOCH_OFFSET,
                ),
                Some(Ok(o)) => answer(p.current_leader_epoch, p.leader_epoch, &o),
            };
            tr.partitions.push(r);
        }
        resp.topics.push(tr);
    }
    ctx.respond(&resp)
}

/// (error code, leader epoch, end offset) for one partition of the log; see the table above.
fn answer(current_leader_epoch: i32, requested: i32, o: &PartitionOffsets) -> (i16, i32, i64) {
    let fenced = match current_leader_epoch {
        UNDEFINED_EPOCH => None,
        c if c > LEADER_EPOCH => Some(ResponseError::UnknownLeaderEpoch.code()),
        c if c < LEADER_EPOCH => Some(ResponseError::FencedLeaderEpoch.code()),
        _ => None,
    };
    if let Some(code) = fenced {
        return (code, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
    }
    let (epoch, end) = match requested {
        UNDEFINED_EPOCH => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
        LEADER_EPOCH => (LEADER_EPOCH, o.high_watermark.0),
        e if e > LEADER_EPOCH => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
        e => (e, o.log_start_offset.0),
    };
    debug_assert!(end == UNDEFINED_EPOCH_OFFSET || end >= o.log_start_offset.0);
    (error_code::NONE, epoch, end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_log::Offset;

    fn offsets() -> PartitionOffsets {
        PartitionOffsets {
            log_start_offset: Offset(5),
            last_stable_offset: Offset(42),
            high_watermark: Offset(42),
            log_end_offset: Offset(42),
        }
    }

    // Goal: the answers are Kafka's endOffsetFor for a log whose only epoch is 0.
    #[test]
    fn kafka_end_offset_semantics() {
        let o = offsets();
        assert_eq!(answer(-1, 0, &o), (0, 0, 42));
        assert_eq!(answer(0, 0, &o), (0, 0, 42));
        assert_eq!(answer(-1, -1, &o), (0, -1, -1));
        assert_eq!(answer(-1, 3, &o), (0, -1, -1));
        assert_eq!(answer(-1, -7, &o), (0, -7, 5));
    }

    // Goal: a current leader epoch other than ours is refused as Kafka refuses it.
    #[test]
    fn current_leader_epoch_is_checked() {
        let o = offsets();
        assert_eq!(answer(1, 0, &o).0, ResponseError::UnknownLeaderEpoch.code());
        assert_eq!(answer(-2, 0, &o).0, ResponseError::FencedLeaderEpoch.code());
    }
}
