//! ListOffsets (key 2), v1-11: earliest (-2), latest (-1), max timestamp (-3, v7+), earliest
//! local (-4, v8+: the same as earliest without tiered storage), latest tiered (-5, v9+) and
//! earliest pending upload (-6, v11+: KIP-1023; both -1 without tiered storage, as Kafka
//! answers), and offsets by timestamp. A special timestamp older than its version, or any
//! other negative one, is UNSUPPORTED_VERSION for its partition, as Kafka answers. v11 is
//! v10's layout (`sluice_protocol::adapted`).
//!
//! The log finds the candidate batch by its max timestamp; this handler walks that one batch
//! with the bounded record walk (`sluice_protocol::record_walk`: streaming decompression with
//! a cap, offsets and timestamps only, no record is materialised) to find the exact record,
//! as Kafka does. Lookups by time run on the blocking pool, holding one of the broker's
//! decompression permits. A stored batch that cannot be walked (a decompression bomb or
//! garbage written before records were validated) answers from its header instead: its base
//! offset and max timestamp, a position at or before the exact record, so a consumer that
//! seeks there misses nothing.
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};
use sluice_protocol::adapted::Versioned;
use std::ops::ControlFlow;

use sluice_log::batch::BatchHeader;
use sluice_log::{LogError, LogManager, PartitionKey};
use sluice_protocol::record_walk::{self, RecordMeta};

use super::{Ctx, Reply};
use crate::services::record_validation::{self, WALK_LIMITS};
use crate::{error_code, services::acl};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

/// Whether a request at `version` may ask for `timestamp` (Kafka's minimum version of each
/// special timestamp: -3 v7, -4 v8, -5 v9, -6 v11; other negatives never).
fn timestamp_supported(timestamp: i64, version: i16) -> bool {
    match timestamp {
        ts if ts >= 0 => true,
        LATEST | EARLIEST => true,
        MAX_TIMESTAMP => version >= 7,
        EARLIEST_LOCAL => version >= 8,
        -5 => version >= 9,
        -6 => version >= 11,
        _ => false,
    }
}

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let Versioned::<ListOffsetsRequest>(req) = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let version = ctx.version;
    // read_committed (v2+): offsets end at the last stable offset (docs/transactions.md §6.4).
    let committed = version >= 2 && req.isolation_level == 1;
    let by_time = req.topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|p| p.timestamp >= 0 || p.timestamp == MAX_TIMESTAMP)
    });
    // Walks may decompress: they share the broker's bound on concurrent decompressions.
    let permit = if by_time {
        record_validation::decompression_permit().await
    } else {
        None
    };
    let who = ctx.who();
    ctx.respond_blocking(move |b| {
        let _permit = permit;
        let mut resp = ListOffsetsResponse::default();
        for t in req.topics {
            // Kafka: DESCRIBE on the topic, checked before existence.
            let authorized = who.allowed(b, acl::op::DESCRIBE, acl::resource::TOPIC, &t.name.0);
            let topic = b.topics.get(&t.name.0).filter(|_| authorized);
            let mut tr = ListOffsetsTopicResponse::default();
            tr.name = t.name;
            for p in t.partitions {
                let mut pr = ListOffsetsPartitionResponse::default();
                pr.partition_index = p.partition_index;
                pr.leader_epoch = -1;
                let key = topic
                    .as_ref()
                    .and_then(|tp| tp.partition(p.partition_index));
                let supported = timestamp_supported(p.timestamp, version);
                match key.map(|k| lookup(&b.log, k, p.timestamp, version, committed)) {
                    Some(_) if !supported => {
                        pr.error_code = ResponseError::UnsupportedVersion.code();
                        pr.offset = -1;
                        pr.timestamp = -1;
                    }
                    None => {
                        pr.error_code = match authorized {
                            true => ResponseError::UnknownTopicOrPartition.code(),
                            false => ResponseError::TopicAuthorizationFailed.code(),
                        };
                        pr.offset = -1;
                        pr.timestamp = -1;
                    }
                    Some(Ok((offset, timestamp))) => {
                        pr.offset = offset;
                        pr.timestamp = timestamp;
                    }
                    Some(Err(e)) => {
                        pr.error_code = error_code::from_log(&e);
                        pr.offset = -1;
                        pr.timestamp = -1;
                    }
                }
                tr.partitions.push(pr);
            }
            resp.topics.push(tr);
        }
        Versioned(resp)
    })
    .await
}

/// (offset, timestamp) for one partition; (-1, -1) when no record matches.
fn lookup(
    log: &LogManager,
    key: &PartitionKey,
    target: i64,
    version: i16,
    committed: bool,
) -> Result<(i64, i64), LogError> {
    let o = log.offsets(key)?;
    let end = match committed {
        true => o.last_stable_offset.0,
        false => o.high_watermark.0,
    };
    let below_end = |found: (i64, i64)| match found.0 < end {
        true => found,
        false => (-1, -1),
    };
    match target {
        LATEST => Ok((end, -1)),
        EARLIEST => Ok((o.log_start_offset.0, -1)),
        EARLIEST_LOCAL if version >= 8 => Ok((o.log_start_offset.0, -1)),
        MAX_TIMESTAMP if version >= 7 => {
            let batch = log.find_max_timestamp_batch(key)?;
            Ok(below_end(batch.and_then(max_record).unwrap_or((-1, -1))))
        }
        ts if ts >= 0 => {
            let batch = log.find_batch_by_timestamp(key, ts)?;
            Ok(below_end(
                batch
                    .and_then(|b| first_at_or_after(b, ts))
                    .unwrap_or((-1, -1)),
            ))
        }
        _ => Ok((-1, -1)),
    }
}

/// Every record's timestamp in a LogAppendTime batch is the batch's max timestamp (the
/// broker's append time), whatever the records carry; the first record is the base offset.
fn log_append_time(batch: &Bytes) -> Option<(i64, i64)> {
    let h = BatchHeader::parse(batch).ok()?;
    h.is_log_append_time()
        .then(|| (h.base_offset().0, h.max_timestamp()))
}

/// The answer from the header alone, for a batch the walk refuses: its base offset (at or
/// before every record in it) and its max timestamp.
fn from_header(batch: &Bytes, why: &record_walk::WalkError) -> Option<(i64, i64)> {
    let h = BatchHeader::parse(batch).ok()?;
    tracing::warn!(
        base_offset = h.base_offset().0,
        error = %why,
        "stored batch cannot be walked; ListOffsets answers from its header"
    );
    Some((h.base_offset().0, h.max_timestamp()))
}

/// Walks the records of `batch`, calling `visit` with each record's (offset, timestamp).
fn walk(
    batch: &Bytes,
    mut visit: impl FnMut(i64, i64) -> ControlFlow<()>,
) -> Result<(), record_walk::WalkError> {
    let base = BatchHeader::parse(batch).map_or(0, |h| h.base_offset().0);
    record_walk::walk(batch, &WALK_LIMITS, |m: RecordMeta| {
        visit(base.saturating_add(i64::from(m.offset_delta)), m.timestamp)
    })
    .map(|_| ())
}

/// The first record in the batch whose timestamp is >= `target`.
fn first_at_or_after(batch: Bytes, target: i64) -> Option<(i64, i64)> {
    if let Some((offset, ts)) = log_append_time(&batch) {
        return (ts >= target).then_some((offset, ts));
    }
    let mut found = None;
    let walked = walk(&batch, |offset, ts| {
        if ts < target {
            return ControlFlow::Continue(());
        }
        found = Some((offset, ts));
        ControlFlow::Break(())
    });
    match walked {
        Ok(()) => found,
        Err(e) => from_header(&batch, &e),
    }
}

/// The record with the largest timestamp in the batch (the first one on ties, as Kafka).
fn max_record(batch: Bytes) -> Option<(i64, i64)> {
    if let Some(found) = log_append_time(&batch) {
        return Some(found);
    }
    let mut best: Option<(i64, i64)> = None;
    let walked = walk(&batch, |offset, ts| {
        if best.is_none_or(|(_, best_ts)| ts > best_ts) {
            best = Some((offset, ts));
        }
        ControlFlow::Continue(())
    });
    match walked {
        Ok(()) => best,
        Err(e) => from_header(&batch, &e),
    }
}
