//! Fetch (key 1), v4-18.
//!
//! Reads whole batches up to each partition's high watermark, bounded by `max_bytes` overall
//! and `partition_max_bytes` per partition, always returning at least one batch of the first
//! partition with data (KIP-74) so a batch larger than the limits cannot stall a consumer.
//! When fewer than `min_bytes` are available the request long-polls: it sleeps on the log's
//! commit counter and wakes as soon as a commit advances a high watermark, until `max_wait_ms`
//! (capped by [`crate::limits::FETCH_WAIT_MS_MAX`]) or shutdown.
//!
//! Fetch sessions (KIP-227) are answered without a session: session id 0 tells the client to
//! keep sending full requests. Reads run on the blocking pool.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use sluice_log::{LogError, Offset, PartitionKey};
use tokio::time::Instant;
use uuid::Uuid;

use super::{Ctx, Reply};
use crate::{error_code, limits, Broker};

/// One requested partition, resolved against the registry.
#[derive(Debug, Clone)]
struct Part {
    key: Option<PartitionKey>,
    partition: i32,
    fetch_offset: i64,
    max_bytes: i32,
    /// Error for a partition that could not be resolved.
    unknown_code: i16,
}

#[derive(Debug, Default)]
struct PartResult {
    error_code: i16,
    high_watermark: i64,
    log_start_offset: i64,
    records: Bytes,
}

struct TopicParts {
    name: TopicName,
    topic_id: Uuid,
    parts: Vec<Part>,
}

const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: FetchRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    if ctx.version >= 7 && req.session_id != 0 {
        return session_error(&ctx, error_code::FETCH_SESSION_ID_NOT_FOUND);
    }
    if ctx.version >= 7 && req.session_epoch > 0 {
        return session_error(&ctx, INVALID_FETCH_SESSION_EPOCH);
    }
    let topics = resolve(&ctx, &req);
    let max_bytes = if req.max_bytes <= 0 {
        i32::MAX
    } else {
        req.max_bytes
    };
    let wait = Duration::from_millis(req.max_wait_ms.clamp(0, limits::FETCH_WAIT_MS_MAX) as u64);
    let deadline = Instant::now() + wait;
    let mut commits = ctx.broker.log.subscribe_commits();
    let mut shutdown = ctx.broker.shutdown.clone();
    loop {
        // Mark the counter seen before reading, so a commit during the read wakes us.
        commits.borrow_and_update();
        let flat: Vec<Part> = topics
            .iter()
            .flat_map(|t| t.parts.iter().cloned())
            .collect();
        let results = if has_data_or_error(&ctx.broker, &flat) {
            match ctx.blocking(move |b| read_all(b, &flat, max_bytes)).await {
                Some(r) => r,
                None => return Reply::Close,
            }
        } else {
            offsets_only(&ctx.broker, &flat)
        };
        let bytes: usize = results.iter().map(|r| r.records.len()).sum();
        let errors = results.iter().any(|r| r.error_code != error_code::NONE);
        let done = bytes >= req.min_bytes.max(0) as usize
            || errors
            || Instant::now() >= deadline
            || *shutdown.borrow();
        if done {
            return ctx.respond(&response(&topics, results));
        }
        tokio::select! {
            _ = commits.changed() => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.wait_for(|s| *s) => {}
        }
    }
}

fn session_error(ctx: &Ctx, code: i16) -> Reply {
    let mut resp = FetchResponse::default();
    resp.error_code = code;
    ctx.respond(&resp)
}

fn resolve(ctx: &Ctx, req: &FetchRequest) -> Vec<TopicParts> {
    let by_id = ctx.version >= 13;
    req.topics
        .iter()
        .map(|t| {
            let topic = if by_id {
                ctx.broker.topics.get_by_id(t.topic_id)
            } else {
                ctx.broker.topics.get(&t.topic.0)
            };
            let unknown_code = match (&topic, by_id) {
                (None, true) => error_code::UNKNOWN_TOPIC_ID,
                _ => error_code::UNKNOWN_TOPIC_OR_PARTITION,
            };
            let parts = t
                .partitions
                .iter()
                .map(|p| Part {
                    key: topic
                        .as_ref()
                        .and_then(|tp| tp.partition(p.partition))
                        .cloned(),
                    partition: p.partition,
                    fetch_offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                    unknown_code,
                })
                .collect();
            TopicParts {
                name: t.topic.clone(),
                topic_id: t.topic_id,
                parts,
            }
        })
        .collect()
}

/// True when some partition has bytes to read or an error to report (checked with atomics,
/// so idle long-polls do no file I/O).
fn has_data_or_error(b: &Broker, parts: &[Part]) -> bool {
    parts.iter().any(|p| match &p.key {
        None => true,
        Some(k) => match b.log.offsets(k) {
            Ok(o) => p.fetch_offset != o.high_watermark.0,
            Err(_) => true,
        },
    })
}

fn offsets_only(b: &Broker, parts: &[Part]) -> Vec<PartResult> {
    parts
        .iter()
        .map(|p| match p.key.as_ref().map(|k| b.log.offsets(k)) {
            Some(Ok(o)) => PartResult {
                high_watermark: o.high_watermark.0,
                log_start_offset: o.log_start_offset.0,
                ..Default::default()
            },
            _ => PartResult {
                error_code: p.unknown_code,
                high_watermark: -1,
                log_start_offset: -1,
                ..Default::default()
            },
        })
        .collect()
}

/// Reads every partition in order within the response byte budget. Blocking.
fn read_all(b: &Broker, parts: &[Part], max_bytes: i32) -> Vec<PartResult> {
    let mut remaining = max_bytes.max(0) as u64;
    let mut any_data = false;
    parts
        .iter()
        .map(|p| {
            let Some(key) = &p.key else {
                return PartResult {
                    error_code: p.unknown_code,
                    high_watermark: -1,
                    log_start_offset: -1,
                    ..Default::default()
                };
            };
            let budget = remaining.min(p.max_bytes.max(0) as u64) as u32;
            match b.log.read(key, Offset(p.fetch_offset), budget, !any_data) {
                Ok(r) => {
                    remaining = remaining.saturating_sub(r.records.len() as u64);
                    any_data |= !r.records.is_empty();
                    PartResult {
                        error_code: error_code::NONE,
                        high_watermark: r.offsets.high_watermark.0,
                        log_start_offset: r.offsets.log_start_offset.0,
                        records: r.records,
                    }
                }
                Err(LogError::OffsetOutOfRange {
                    log_start_offset,
                    high_watermark,
                    ..
                }) => PartResult {
                    error_code: error_code::OFFSET_OUT_OF_RANGE,
                    high_watermark: high_watermark.0,
                    log_start_offset: log_start_offset.0,
                    ..Default::default()
                },
                Err(e) => {
                    let o = b.log.offsets(key).ok();
                    PartResult {
                        error_code: error_code::from_log(&e),
                        high_watermark: o.map_or(-1, |o| o.high_watermark.0),
                        log_start_offset: o.map_or(-1, |o| o.log_start_offset.0),
                        ..Default::default()
                    }
                }
            }
        })
        .collect()
}

fn response(topics: &[TopicParts], results: Vec<PartResult>) -> FetchResponse {
    let mut results = results.into_iter();
    let mut resp = FetchResponse::default();
    resp.responses = topics
        .iter()
        .map(|t| {
            let mut tr = FetchableTopicResponse::default();
            tr.topic = t.name.clone();
            tr.topic_id = t.topic_id;
            tr.partitions = t
                .parts
                .iter()
                .map(|p| {
                    let r = results.next().unwrap_or_default();
                    let mut pd = PartitionData::default();
                    pd.partition_index = p.partition;
                    pd.error_code = r.error_code;
                    pd.high_watermark = r.high_watermark;
                    // No transactions yet: the last stable offset is the high watermark.
                    pd.last_stable_offset = r.high_watermark;
                    pd.log_start_offset = r.log_start_offset;
                    pd.preferred_read_replica = kafka_protocol::messages::BrokerId(-1);
                    pd.records = Some(r.records);
                    pd
                })
                .collect();
            tr
        })
        .collect();
    resp
}
