//! Fetch (key 1), v4-18.
//!
//! Reads whole batches up to each partition's high watermark, bounded by `max_bytes` overall
//! (never above the broker's `fetch.max.bytes`; zero or negative means that cap) and
//! `partition_max_bytes` per partition, always returning at least one batch of the first
//! partition with data (KIP-74) so a batch larger than the limits cannot stall a consumer.
//! A partition listed twice is fetched once. The response is charged to the request-memory
//! budget before its records are read and until it is written (see `read_charged`), so
//! concurrent fetches cannot hold more memory than the budget; once encoded, the charge
//! shrinks to the part held in memory (framing, records the log returned as bytes): records
//! sent from journal files are page cache, not the process's memory. Each response pins the
//! journal files its ranges name until written, so pinned files are bounded by the
//! responses in flight (`limits::IN_FLIGHT_PER_CONNECTION_MAX` per connection).
//!
//! When fewer than `min_bytes` are available the request long-polls: it sleeps on its own
//! partitions' commit wakers (a commit elsewhere does not wake it) and on the log's counter
//! of deletions and log-start moves, until `max_wait_ms` (capped by
//! [`crate::limits::FETCH_WAIT_MS_MAX`]) or shutdown. If the client disconnects, the
//! connection aborts the parked request.
//!
//! Fetch sessions (KIP-227) are answered without a session: session id 0 tells the client to
//! keep sending full requests. Reads run on the blocking pool.
//!
//! The response is encoded by hand ([`encode`]) as a chunked frame: the framing in one small
//! buffer, each partition's records as the journal file ranges `LogManager::read_ranges`
//! returned (only batch headers are read), written with vectored writes and `sendfile`.
//! Record bytes go from the page cache to the socket without entering user space; only
//! where the log has no file to send from (damage read as zeros, a simulated file system)
//! are they read into memory, once.

mod decode;
mod encode;

use std::collections::hash_map::{Entry, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use sluice_log::{CommitWaker, LogError, Offset, PartitionKey, RecordSlice};
use tokio::sync::futures::Notified;
use tokio::time::Instant;
use uuid::Uuid;

use super::{Ctx, Reply};
use crate::memory::{self, Reservation};
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

#[derive(Debug, Default, Clone)]
struct PartResult {
    error_code: i16,
    high_watermark: i64,
    log_start_offset: i64,
    /// The records: journal file ranges (sent with `sendfile`), bytes where the log had no
    /// file to send from.
    records: Vec<RecordSlice>,
    /// Bytes in `records`.
    records_len: usize,
}

impl PartResult {
    /// Bytes of the records held in memory (file ranges stay in the page cache).
    fn memory_len(&self) -> usize {
        self.records
            .iter()
            .map(|s| match s {
                RecordSlice::Bytes(b) => b.len(),
                RecordSlice::File(_) => 0,
            })
            .sum()
    }
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
    let flat: Vec<Part> = topics
        .iter()
        .flat_map(|t| t.parts.iter().cloned())
        .collect();
    let cap = response_cap(ctx.broker.config.fetch_max_bytes, req.max_bytes);
    let wait = Duration::from_millis(req.max_wait_ms.clamp(0, limits::FETCH_WAIT_MS_MAX) as u64);
    let deadline = Instant::now() + wait;
    let log = &ctx.broker.log;
    let wakers: Vec<CommitWaker> = flat
        .iter()
        .filter_map(|p| p.key.as_ref().and_then(|k| log.commit_waker(k).ok()))
        .collect();
    let mut changes = log.subscribe_commits();
    let mut shutdown = ctx.broker.shutdown.clone();
    loop {
        // Arm every wake-up before reading, so a commit during the read wakes us.
        changes.borrow_and_update();
        let mut commits = armed(&wakers);
        let (results, charge) = if has_data_or_error(&ctx.broker, &flat) {
            match read_charged(&ctx, &topics, &flat, cap, deadline).await {
                Some(r) => r,
                None => return Reply::Close,
            }
        } else {
            (offsets_only(&ctx.broker, &flat), None)
        };
        let bytes: usize = results.iter().map(|r| r.records_len).sum();
        let errors = results.iter().any(|r| r.error_code != error_code::NONE);
        let done = bytes >= req.min_bytes.max(0) as usize
            || errors
            || Instant::now() >= deadline
            || *shutdown.borrow();
        if done {
            return respond_charged(&ctx, encode::Top::default(), &topics, results, charge);
        }
        drop((results, charge));
        tokio::select! {
            _ = any_commit(&mut commits) => {}
            _ = changes.changed() => {}
            _ = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.wait_for(|s| *s) => {}
        }
    }
}

type Armed<'a> = Vec<Pin<Box<Notified<'a>>>>;

/// One enabled wait per partition: a commit from now on completes it, even one that happens
/// before it is polled.
fn armed(wakers: &[CommitWaker]) -> Armed<'_> {
    let mut commits: Armed<'_> = wakers.iter().map(|w| Box::pin(w.notified())).collect();
    for c in &mut commits {
        c.as_mut().enable();
    }
    commits
}

/// Completes when a commit moved any of the partitions' high watermarks (never when there
/// are none).
async fn any_commit(commits: &mut Armed<'_>) {
    std::future::poll_fn(|cx| {
        for c in commits.iter_mut() {
            if c.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    })
    .await
}

/// The response size limit: the request's `max_bytes` (zero or negative: no limit of its
/// own), never above the broker's `fetch.max.bytes`.
fn response_cap(fetch_max_bytes: usize, request_max_bytes: i32) -> usize {
    let cap = fetch_max_bytes.min(i32::MAX as usize);
    match usize::try_from(request_max_bytes) {
        Ok(n) if n > 0 => n.min(cap),
        _ => cap,
    }
}

/// Reads the partitions with the response charged to the request-memory budget first. The
/// charge is the read limit plus the response's framing (the records are not copied again),
/// and shrinks to the response's size once encoded. The read limit is the smaller of
/// `cap` and the sum of the partition limits of the partitions that have data, and at most
/// a share of the budget ([`limits::FETCH_READ_BUDGET_DIVISOR`]), so the charge can be
/// granted even while other requests hold some of it. When it cannot be granted in time
/// the answer carries no records. None when the blocking read failed.
async fn read_charged(
    ctx: &Ctx,
    topics: &[TopicParts],
    flat: &[Part],
    cap: usize,
    deadline: Instant,
) -> Option<(Vec<PartResult>, Option<Reservation>)> {
    let memory = &ctx.broker.request_memory;
    let budget_share = memory.total_units() as usize * limits::REQUEST_MEMORY_UNIT_BYTES
        / limits::FETCH_READ_BUDGET_DIVISOR;
    let limit = partition_limits_with_data(&ctx.broker, flat)
        .min(cap)
        .min(budget_share);
    let want = memory::units(limit.saturating_add(encode::framing_bytes_max(topics)));
    let mut charge = match memory.try_reserve(want) {
        Some(c) => c,
        None => {
            let wait_until = deadline
                .max(Instant::now() + Duration::from_millis(limits::FETCH_MEMORY_WAIT_MS_MIN));
            match tokio::time::timeout_at(wait_until, memory.reserve(want)).await {
                Ok(c) => c,
                Err(_) => {
                    tracing::debug!(peer = %ctx.peer, bytes = limit, "no request memory for a fetch response in time; answering without records");
                    return Some((offsets_only(&ctx.broker, flat), None));
                }
            }
        }
    };
    let parts = flat.to_vec();
    let results = ctx
        .blocking(move |b| read_all(b, &parts, limit as i32))
        .await?;
    let in_memory: usize = results.iter().map(PartResult::memory_len).sum();
    if in_memory > limit {
        // KIP-74: the first batch is returned even when it is larger than the limits.
        let extra = memory::units(in_memory - limit);
        let wait_until = Instant::now() + Duration::from_millis(limits::FETCH_MEMORY_WAIT_MS_MIN);
        if let Ok(more) = tokio::time::timeout_at(wait_until, memory.reserve(extra)).await {
            charge.merge(more);
        }
    }
    Some((results, Some(charge)))
}

/// Sum of `partition_max_bytes` over the partitions that have records to read (atomics only).
fn partition_limits_with_data(b: &Broker, parts: &[Part]) -> usize {
    parts
        .iter()
        .filter(|p| {
            p.key
                .as_ref()
                .and_then(|k| b.log.offsets(k).ok())
                .is_some_and(|o| p.fetch_offset != o.high_watermark.0)
        })
        .map(|p| p.max_bytes.max(0) as usize)
        .fold(0usize, usize::saturating_add)
}

/// Encodes the response; its charge shrinks to the response's size and travels with it
/// until the connection has written it.
fn respond_charged(
    ctx: &Ctx,
    top: encode::Top,
    topics: &[TopicParts],
    results: Vec<PartResult>,
    charge: Option<Reservation>,
) -> Reply {
    match encode::encode(ctx.version, ctx.correlation_id, top, topics, results) {
        Ok(frame) => {
            // Only the frame's memory stays charged: its file ranges are page cache.
            let charge = charge.map(|mut c| {
                c.shrink_to(memory::units(frame.memory_len()));
                c
            });
            Reply::Chunked(frame, charge)
        }
        Err(e) => {
            tracing::error!(version = ctx.version, error = %e, "fetch response encode failed; closing connection");
            Reply::Close
        }
    }
}

fn session_error(ctx: &Ctx, code: i16) -> Reply {
    let top = encode::Top {
        error_code: code,
        ..encode::Top::default()
    };
    respond_charged(ctx, top, &[], Vec::new(), None)
}

/// Resolves the requested partitions against the registry. A partition listed more than
/// once is fetched once: like Kafka, which keys a request's fetch data by topic-partition,
/// the last listing's offset and limit win and the partition keeps its first position, so
/// repeating a partition cannot multiply the work or the response.
fn resolve(ctx: &Ctx, req: &FetchRequest) -> Vec<TopicParts> {
    let by_id = ctx.version >= 13;
    let mut seen: HashMap<(Uuid, StrBytes, i32), (usize, usize)> = HashMap::new();
    let mut out: Vec<TopicParts> = Vec::with_capacity(req.topics.len());
    for t in &req.topics {
        let topic = if by_id {
            ctx.broker.topics.get_by_id(t.topic_id)
        } else {
            ctx.broker.topics.get(&t.topic.0)
        };
        let unknown_code = match (&topic, by_id) {
            (None, true) => error_code::UNKNOWN_TOPIC_ID,
            _ => error_code::UNKNOWN_TOPIC_OR_PARTITION,
        };
        let ti = out.len();
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let part = Part {
                key: topic
                    .as_ref()
                    .and_then(|tp| tp.partition(p.partition))
                    .cloned(),
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                unknown_code,
            };
            let name = if by_id {
                StrBytes::default()
            } else {
                t.topic.0.clone()
            };
            let id = if by_id { t.topic_id } else { Uuid::nil() };
            match seen.entry((id, name, p.partition)) {
                Entry::Occupied(e) => {
                    let (i, j) = *e.get();
                    let earlier = if i == ti {
                        &mut parts[j]
                    } else {
                        &mut out[i].parts[j]
                    };
                    *earlier = part;
                }
                Entry::Vacant(e) => {
                    e.insert((ti, parts.len()));
                    parts.push(part);
                }
            }
        }
        if parts.is_empty() && !t.partitions.is_empty() {
            // Every partition of this listing was already listed: nothing left to answer.
            continue;
        }
        out.push(TopicParts {
            name: t.topic.clone(),
            topic_id: t.topic_id,
            parts,
        });
    }
    debug_assert_eq!(
        out.iter().map(|t| t.parts.len()).sum::<usize>(),
        seen.len(),
        "every distinct partition is fetched exactly once"
    );
    out
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
            match b
                .log
                .read_ranges(key, Offset(p.fetch_offset), budget, !any_data)
            {
                Ok(r) => {
                    remaining = remaining.saturating_sub(r.len as u64);
                    any_data |= r.len > 0;
                    PartResult {
                        error_code: error_code::NONE,
                        high_watermark: r.offsets.high_watermark.0,
                        log_start_offset: r.offsets.log_start_offset.0,
                        records: r.slices,
                        records_len: r.len,
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

/// The response as `kafka-protocol` builds it: the reference the hand encoding is compared
/// with.
#[cfg(test)]
fn response(
    topics: &[TopicParts],
    results: Vec<PartResult>,
) -> kafka_protocol::messages::FetchResponse {
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::FetchResponse;

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
                    pd.records = Some(records_bytes(&r.records));
                    pd
                })
                .collect();
            tr
        })
        .collect();
    resp
}

/// The records' bytes in one buffer, files read (tests only).
#[cfg(test)]
fn records_bytes(records: &[RecordSlice]) -> Bytes {
    let mut out = Vec::new();
    for s in records {
        match s {
            RecordSlice::Bytes(b) => out.extend_from_slice(b),
            RecordSlice::File(r) => out.extend_from_slice(&r.read(0, r.len()).expect("read")),
        }
    }
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: max_bytes <= 0 means the broker cap; a request may only lower it.
    #[test]
    fn response_cap_is_min_of_request_and_fetch_max_bytes() {
        assert_eq!(response_cap(1000, 0), 1000);
        assert_eq!(response_cap(1000, -5), 1000);
        assert_eq!(response_cap(1000, 10), 10);
        assert_eq!(response_cap(1000, i32::MAX), 1000);
        assert_eq!(response_cap(usize::MAX, 0), i32::MAX as usize);
    }
}
