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
//! When fewer than `min_bytes` are available the request long-polls: its connection's
//! [`CommitListener`] is registered with its own partitions (a commit elsewhere does not
//! wake it) and it also watches the log's counter of deletions and log-start moves, until
//! `max_wait_ms` (capped by [`crate::config::limits::FETCH_WAIT_MS_MAX`]) or shutdown. If the
//! client disconnects, the connection drops the parked request.
//!
//! Fetch sessions (KIP-227) are answered without a session: session id 0 tells the client to
//! keep sending full requests.
//!
//! No task and no allocation per request in steady state, as for Produce: a [`FetchCall`]
//! holds everything a request needs and the connection keeps it for the next one
//! ([`FetchCalls`]). The request is decoded by hand into reused vectors ([`decode`]), its
//! partitions are resolved into the call's [`read::ReadJob`], read by a dedicated reader
//! thread ([`read`]; batch headers only), and the response is encoded into the call's
//! reused [`ChunkedFrame`] ([`encode`]): the framing in one buffer, each partition's
//! records as the journal file ranges the log returned, written with vectored writes and
//! `sendfile`. Record bytes go from the page cache to the socket without entering user
//! space; only where the log has no file to send from (damage read as zeros, a simulated
//! file system) are they read into memory, once. The connection's writer runs the call
//! ([`FetchCall::run`]) and writes its frame, in the connection's response order.

mod decode;
mod encode;
mod read;

use kafka_protocol::error::ResponseError;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use sluice_log::{CommitListener, LogManager, PartitionKey, RecordSlice};
use tokio::time::Instant;
use uuid::Uuid;

pub(crate) use read::FetchReaders;

use super::Ctx;
use crate::config::limits::CALL_ENTRIES_KEPT_MAX;
use crate::memory::{self, clear_kept, Reservation};
use crate::metrics::TopicStats;
use crate::response_chunks::ChunkedFrame;
use crate::{config::limits, error_code, services::acl, services::quotas, Broker};

/// One requested partition, resolved against the registry.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    key: Option<PartitionKey>,
    partition: i32,
    fetch_offset: i64,
    max_bytes: i32,
    /// Error for a partition that could not be resolved.
    unknown_code: i16,
}

/// One partition's answer; reused (its records vector keeps its capacity).
#[derive(Debug, Default, Clone)]
pub(crate) struct PartResult {
    error_code: i16,
    high_watermark: i64,
    log_start_offset: i64,
    /// The records: journal file ranges (sent with `sendfile`), bytes where the log had no
    /// file to send from.
    records: Vec<RecordSlice>,
    /// Bytes in `records`.
    records_len: usize,
    /// Offsets the records take the consumer past: from the fetch offset to the offset
    /// after the last batch returned (for `sluice_fetch_records_total`).
    offsets_read: u64,
    /// The last stable offset (the high watermark without open transactions).
    last_stable_offset: i64,
    /// `read_committed` only: the aborted transactions overlapping what was returned
    /// (docs/transactions.md §6.4); the vector keeps its capacity.
    aborted: Vec<sluice_log::AbortedTxn>,
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
            .sum::<usize>()
            + self.aborted.len() * encode::ABORTED_TXN_BYTES_MAX
    }

    fn reset(&mut self) {
        self.error_code = error_code::NONE;
        self.high_watermark = 0;
        self.log_start_offset = 0;
        self.records.clear();
        self.records_len = 0;
        self.offsets_read = 0;
        self.last_stable_offset = 0;
        self.aborted.clear();
    }
}

/// One topic of the response: its name (below v13) or id, and its partitions in the
/// read job's `parts`.
#[derive(Debug, Clone)]
pub(crate) struct TopicEntry {
    name: StrBytes,
    topic_id: Uuid,
    parts: Range<usize>,
}

const INVALID_FETCH_SESSION_EPOCH: i16 = ResponseError::InvalidFetchSessionEpoch.code();

/// Where a call stands.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Nothing to answer (a kept call).
    #[default]
    Idle,
    /// Decoded and resolved: `run` answers it.
    Ready,
    /// The body was malformed: the connection closes.
    Malformed,
}

/// One fetch request from decode to response; reused (see the module comment).
#[derive(Debug, Default)]
pub(crate) struct FetchCall {
    ctx: Option<Ctx>,
    stage: Stage,
    decoded: decode::Decoded,
    topics: Vec<TopicEntry>,
    /// Each entry of `topics`' counters (None: unknown topic), for the per-topic metrics.
    topic_stats: Vec<Option<Arc<TopicStats>>>,
    /// Each distinct partition's index in the job's `parts` (duplicates are fetched once).
    seen: HashMap<(Uuid, StrBytes, i32), usize>,
    job: Arc<read::ReadJob>,
    listener: CommitListener,
    /// True while `listener` may be registered with the job's partitions.
    listening: bool,
    frame: ChunkedFrame,
    charge: Option<Reservation>,
    /// The client quota's throttle time of the last response (`quotas`; 0: not throttled).
    throttle_ms: u64,
    /// Whether the last response carries an error code, top-level or per partition.
    answered_error: bool,
}

/// The fetch calls a connection keeps for reuse (shared by its reader and writer).
#[derive(Debug, Default, Clone)]
// Boxed so that handing a call between the reader, the channel and the writer moves a pointer.
#[allow(clippy::vec_box)]
pub(crate) struct FetchCalls(Arc<Mutex<Vec<Box<FetchCall>>>>);

impl FetchCalls {
    pub(crate) fn take(&self) -> Box<FetchCall> {
        self.0.lock().pop().unwrap_or_default()
    }

    /// Keeps a call whose response was written (and whose read is over).
    pub(crate) fn put(&self, mut call: Box<FetchCall>) {
        call.finish();
        let mut kept = self.0.lock();
        if kept.len() < limits::FETCH_CALLS_KEPT_PER_CONNECTION {
            kept.push(call);
        }
    }
}

/// Decodes and resolves the request into `call`; the connection's writer runs it.
pub(crate) fn start(ctx: Ctx, body: Bytes, mut call: Box<FetchCall>) -> Box<FetchCall> {
    call.finish();
    match call.decoded.decode(&body, ctx.version) {
        Ok(()) => {
            call.resolve(&ctx);
            call.stage = Stage::Ready;
        }
        Err(e) => {
            tracing::warn!(version = ctx.version, error = %e, "malformed request; closing connection");
            call.stage = Stage::Malformed;
        }
    }
    call.ctx = Some(ctx);
    call
}

impl FetchCall {
    /// Answers the request: reads (long-polling while fewer than `min_bytes` are there)
    /// and encodes the response into [`FetchCall::frame`]. False when the connection must
    /// close (a malformed request, a failed encode).
    pub(crate) async fn run(&mut self) -> bool {
        let Some(ctx) = self.ctx.clone() else {
            debug_assert!(false, "run without start");
            return false;
        };
        self.throttle_ms = 0;
        self.answered_error = false;
        if self.stage != Stage::Ready {
            return false;
        }
        let d = &self.decoded;
        let debt_ms = ctx.broker.quotas.debt_ms(
            quotas::Kind::Fetch,
            &ctx.principal,
            ctx.client_id.as_deref().unwrap_or(""),
            std::time::Instant::now(),
        );
        let ok = if debt_ms > 0 {
            // Kafka's throttled fetch: no data while the quota is in debt, only the wait.
            self.throttle_ms = debt_ms;
            let top = encode::Top {
                throttle_time_ms: i32::try_from(debt_ms).unwrap_or(i32::MAX),
                ..encode::Top::default()
            };
            self.respond_empty(&ctx, top)
        } else if ctx.version >= 7 && d.session_id != 0 {
            self.session_error(&ctx, ResponseError::FetchSessionIdNotFound.code())
        } else if ctx.version >= 7 && d.session_epoch > 0 {
            self.session_error(&ctx, INVALID_FETCH_SESSION_EPOCH)
        } else {
            let ok = self.poll(&ctx).await;
            self.unlisten(&ctx.broker.log);
            ok
        };
        self.forget_request();
        ok
    }

    /// Drops every reference into the request's frame (topic names, the header's client
    /// id) once the response is encoded, before it is written, as `ProduceCall::respond`
    /// does: a client waiting for this response sends its next request as soon as it has
    /// it, and the connection's reader reuses its read buffer in place only if the frames
    /// read into it are gone; else it allocates a fresh one.
    fn forget_request(&mut self) {
        self.decoded.clear();
        self.topics.clear();
        self.seen.clear();
        self.ctx = None;
    }

    /// How long the connection is muted after this response (its quota's throttle time).
    pub(crate) fn throttle_ms(&self) -> u64 {
        self.throttle_ms
    }

    /// The response, after [`FetchCall::run`] returned true.
    pub(crate) fn frame(&self) -> &ChunkedFrame {
        &self.frame
    }

    /// Reads until there is enough to answer, or the wait is over; encodes the answer.
    async fn poll(&mut self, ctx: &Ctx) -> bool {
        let broker = &ctx.broker;
        let cap = response_cap(broker.config.fetch_max_bytes, self.decoded.max_bytes);
        let wait_ms = self.decoded.max_wait_ms.clamp(0, limits::FETCH_WAIT_MS_MAX) as u64;
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let min_bytes = self.decoded.min_bytes.max(0) as usize;
        let mut changes = broker.log.subscribe_commits();
        let mut shutdown = broker.shutdown.clone();
        loop {
            changes.borrow_and_update();
            let charge = match self.has_data_or_error(broker) {
                true => self.read_charged(ctx, cap, deadline).await,
                false => {
                    read::offsets_only(&broker.log, &mut self.job.state.lock());
                    None
                }
            };
            let (bytes, errors) = {
                let state = self.job.state.lock();
                let bytes: usize = state.results.iter().map(|r| r.records_len).sum();
                let errors = state
                    .results
                    .iter()
                    .any(|r| r.error_code != error_code::NONE);
                (bytes, errors)
            };
            let done =
                bytes >= min_bytes || errors || Instant::now() >= deadline || *shutdown.borrow();
            if done {
                // Kafka charges what a fetch returns to the consumer_byte_rate quota.
                self.throttle_ms = broker.quotas.throttle_ms(
                    quotas::Kind::Fetch,
                    &ctx.principal,
                    ctx.client_id.as_deref().unwrap_or(""),
                    bytes,
                    std::time::Instant::now(),
                );
                let top = encode::Top {
                    throttle_time_ms: i32::try_from(self.throttle_ms).unwrap_or(i32::MAX),
                    ..encode::Top::default()
                };
                return self.respond(ctx, top, charge);
            }
            drop(charge);
            // About to wait: arm the wake-up first, then look again, so a commit that landed
            // after the read is not slept through. A request answered at once never arms.
            self.listen(&broker.log);
            let moved = self.moved_since_read(broker);
            self.job
                .state
                .lock()
                .results
                .iter_mut()
                .for_each(PartResult::reset);
            if moved {
                continue;
            }
            let _parked = broker.metrics.park_fetch();
            tokio::select! {
                () = self.listener.wait() => {}
                _ = changes.changed() => {}
                () = tokio::time::sleep_until(deadline) => {}
                _ = shutdown.wait_for(|s| *s) => {}
            }
        }
    }

    /// True when a partition's high watermark moved since the results were read.
    fn moved_since_read(&self, b: &Broker) -> bool {
        let state = self.job.state.lock();
        state.parts.iter().zip(&state.results).any(|(p, r)| {
            let Some(k) = &p.key else { return false };
            b.log.offsets(k).is_ok_and(|o| {
                r.error_code == error_code::NONE && o.high_watermark.0 != r.high_watermark
            })
        })
    }

    /// Registers the call's listener with each of its partitions (again after a wake-up:
    /// a wake-up removes it from the partition that fired).
    fn listen(&mut self, log: &LogManager) {
        for p in &self.job.state.lock().parts {
            if let Some(k) = &p.key {
                let _ = log.listen_commits(k, &self.listener);
            }
        }
        self.listening = true;
    }

    /// Withdraws the listener: a finished poll leaves no entry behind.
    fn unlisten(&mut self, log: &LogManager) {
        if !std::mem::take(&mut self.listening) {
            return;
        }
        for p in &self.job.state.lock().parts {
            if let Some(k) = &p.key {
                log.unlisten_commits(k, &self.listener);
            }
        }
    }

    /// Reads the partitions with the response charged to the request-memory budget first.
    /// The charge is the read limit plus the response's framing (the records are not
    /// copied again), and shrinks to the response's size once encoded. The read limit is
    /// the smaller of `cap` and the sum of the partition limits of the partitions that have
    /// data, and at most a share of the budget ([`limits::FETCH_READ_BUDGET_DIVISOR`]), so
    /// the charge can be granted even while other requests hold some of it. When it cannot
    /// be granted in time the answer carries no records (and no charge).
    async fn read_charged(
        &mut self,
        ctx: &Ctx,
        cap: usize,
        deadline: Instant,
    ) -> Option<Reservation> {
        let broker = &ctx.broker;
        let memory = &broker.request_memory;
        let budget_share = memory.total_units() as usize * limits::REQUEST_MEMORY_UNIT_BYTES
            / limits::FETCH_READ_BUDGET_DIVISOR;
        let (limit, framing) = {
            let state = self.job.state.lock();
            let limit = partition_limits_with_data(broker, &state.parts)
                .min(cap)
                .min(budget_share);
            (
                limit,
                encode::framing_bytes_max(&self.topics, state.parts.len()),
            )
        };
        let want = memory::units(limit.saturating_add(framing));
        let mut charge = match memory.try_reserve(want) {
            Some(c) => c,
            None => {
                let wait_until = deadline
                    .max(Instant::now() + Duration::from_millis(limits::FETCH_MEMORY_WAIT_MS_MIN));
                match tokio::time::timeout_at(wait_until, memory.reserve(want)).await {
                    Ok(c) => c,
                    Err(_) => {
                        tracing::debug!(peer = %ctx.peer, bytes = limit, "no request memory for a fetch response in time; answering without records");
                        read::offsets_only(&broker.log, &mut self.job.state.lock());
                        return None;
                    }
                }
            }
        };
        let limit_bytes = u32::try_from(limit)
            .unwrap_or(u32::MAX)
            .min(i32::MAX as u32);
        broker
            .fetch_readers
            .read(&self.job, &broker.log, limit_bytes)
            .await;
        let in_memory: usize = self
            .job
            .state
            .lock()
            .results
            .iter()
            .map(PartResult::memory_len)
            .sum();
        if in_memory > limit {
            // KIP-74: the first batch is returned even when it is larger than the limits.
            let extra = memory::units(in_memory - limit);
            let wait_until =
                Instant::now() + Duration::from_millis(limits::FETCH_MEMORY_WAIT_MS_MIN);
            if let Ok(more) = tokio::time::timeout_at(wait_until, memory.reserve(extra)).await {
                charge.merge(more);
            }
        }
        Some(charge)
    }

    /// Encodes the response into the frame; its charge shrinks to the frame's memory and
    /// is kept until the connection has written it.
    fn respond(&mut self, ctx: &Ctx, top: encode::Top, charge: Option<Reservation>) -> bool {
        let encoded = {
            let mut state = self.job.state.lock();
            let read::ReadState { parts, results, .. } = &mut *state;
            // Results beyond the request's partitions are a kept call's earlier ones (a
            // session error answers with none).
            let n = parts.len().min(results.len());
            let results = &mut results[..n];
            let encoded = encode::encode(
                &mut self.frame,
                ctx.version,
                ctx.correlation_id,
                top,
                &self.topics,
                parts,
                results,
            );
            if encoded.is_ok() {
                count_fetched(&self.topics, &self.topic_stats, results);
                self.answered_error = top.error_code != error_code::NONE
                    || results.iter().any(|r| r.error_code != error_code::NONE);
            }
            encoded
        };
        match encoded {
            Ok(()) => {
                // Only the frame's memory stays charged: its file ranges are page cache.
                self.charge = charge.map(|mut c| {
                    c.shrink_to(memory::units(self.frame.memory_len()));
                    c
                });
                debug_assert!(
                    self.charge.as_ref().map_or(0, |c| c.units())
                        <= memory::units(self.frame.len()),
                    "a response holds no more budget than its own size"
                );
                true
            }
            Err(e) => {
                tracing::error!(version = ctx.version, error = %e, "fetch response encode failed; closing connection");
                false
            }
        }
    }

    fn session_error(&mut self, ctx: &Ctx, code: i16) -> bool {
        let top = encode::Top {
            error_code: code,
            ..encode::Top::default()
        };
        self.respond_empty(ctx, top)
    }

    /// Answers with no topics: a fetch-session error, or a throttled fetch.
    fn respond_empty(&mut self, ctx: &Ctx, top: encode::Top) -> bool {
        self.topics.clear();
        self.topic_stats.clear();
        self.job.state.lock().parts.clear();
        self.respond(ctx, top, None)
    }

    /// Whether the last response carries an error code, top-level or per partition (for
    /// metrics).
    pub(crate) fn has_error(&self) -> bool {
        self.answered_error
    }

    /// True when some partition has bytes to read or an error to report (checked with
    /// atomics, so idle long-polls do no file I/O).
    fn has_data_or_error(&self, b: &Broker) -> bool {
        self.job.state.lock().parts.iter().any(|p| match &p.key {
            None => true,
            Some(k) => match b.log.offsets(k) {
                Ok(o) => p.fetch_offset != o.high_watermark.0,
                Err(_) => true,
            },
        })
    }

    /// Resolves the requested partitions against the registry. A partition listed more
    /// than once is fetched once: like Kafka, which keys a request's fetch data by
    /// topic-partition, the last listing's offset and limit win and the partition keeps
    /// its first position, so repeating a partition cannot multiply the work or the
    /// response. A topic listing whose partitions were all listed before is dropped.
    fn resolve(&mut self, ctx: &Ctx) {
        let by_id = ctx.version >= 13;
        let mut state = self.job.state.lock();
        state.isolation = match self.decoded.isolation_level {
            1 => sluice_log::IsolationLevel::ReadCommitted,
            _ => sluice_log::IsolationLevel::ReadUncommitted,
        };
        let parts = &mut state.parts;
        parts.clear();
        self.topics.clear();
        self.topic_stats.clear();
        self.seen.clear();
        for t in &self.decoded.topics {
            let topic = match by_id {
                true => ctx.broker.topics.get_by_id(t.topic_id),
                false => ctx.broker.topics.get(&t.name),
            };
            let name = match (&topic, by_id) {
                (Some(tp), true) => &*tp.name,
                _ => t.name.as_str(),
            };
            // Kafka checks READ before existence; an unauthorized topic is answered as if
            // it had no partitions here, with its own code.
            let authorized = (by_id && topic.is_none())
                || ctx.allowed(acl::op::READ, acl::resource::TOPIC, name);
            let topic = topic.filter(|_| authorized);
            let unknown_code = match (&topic, by_id) {
                _ if !authorized => ResponseError::TopicAuthorizationFailed.code(),
                (None, true) => ResponseError::UnknownTopicId.code(),
                _ => ResponseError::UnknownTopicOrPartition.code(),
            };
            let first = parts.len();
            for p in &self.decoded.partitions[t.partitions.clone()] {
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
                    t.name.clone()
                };
                let id = if by_id { t.topic_id } else { Uuid::nil() };
                match self.seen.entry((id, name, p.partition)) {
                    std::collections::hash_map::Entry::Occupied(e) => parts[*e.get()] = part,
                    std::collections::hash_map::Entry::Vacant(e) => {
                        e.insert(parts.len());
                        parts.push(part);
                    }
                }
            }
            if parts.len() == first && !t.partitions.is_empty() {
                // Every partition of this listing was already listed: nothing left to answer.
                continue;
            }
            self.topics.push(TopicEntry {
                name: t.name.clone(),
                topic_id: t.topic_id,
                parts: first..parts.len(),
            });
            self.topic_stats
                .push(topic.as_ref().map(|tp| tp.stats.clone()));
        }
        debug_assert_eq!(
            parts.len(),
            self.seen.len(),
            "every distinct partition is fetched exactly once"
        );
    }

    /// Forgets the request and its response (the frame's records and the journal files
    /// they pin go now), keeping the vectors' capacity unless a huge request grew them.
    fn finish(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            self.unlisten(&ctx.broker.log);
        }
        self.stage = Stage::Idle;
        self.charge = None;
        self.frame.clear();
        self.decoded.clear();
        clear_kept(&mut self.topics, CALL_ENTRIES_KEPT_MAX);
        clear_kept(&mut self.topic_stats, CALL_ENTRIES_KEPT_MAX);
        self.seen.clear();
        if self.seen.capacity() > CALL_ENTRIES_KEPT_MAX {
            self.seen = HashMap::new();
        }
        let mut state = self.job.state.lock();
        clear_kept(&mut state.parts, CALL_ENTRIES_KEPT_MAX);
        state.results.iter_mut().for_each(PartResult::reset);
        // Results keep their own vectors' room, so they are reset in place, not cleared.
        if state.results.len() > CALL_ENTRIES_KEPT_MAX {
            state.results = Vec::new();
        }
    }
}

impl Drop for FetchCall {
    /// A call dropped mid-poll (its client went away) withdraws its listener.
    fn drop(&mut self) {
        if let Some(ctx) = self.ctx.take() {
            self.unlisten(&ctx.broker.log);
        }
    }
}

/// Adds each topic's record bytes in the response to its fetch counter.
fn count_fetched(topics: &[TopicEntry], stats: &[Option<Arc<TopicStats>>], results: &[PartResult]) {
    debug_assert_eq!(topics.len(), stats.len(), "one stats entry per topic entry");
    for (t, s) in topics.iter().zip(stats) {
        if let Some(s) = s {
            let parts = &results[t.parts.clone()];
            let bytes: usize = parts.iter().map(|r| r.records_len).sum();
            TopicStats::add(&s.fetch_bytes, bytes as u64);
            let records: u64 = parts.iter().map(|r| r.offsets_read).sum();
            TopicStats::add(&s.fetch_records, records);
        }
    }
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

/// The response as `kafka-protocol` builds it: the reference the hand encoding is compared
/// with.
#[cfg(test)]
fn response(
    topics: &[TopicEntry],
    parts: &[Part],
    results: Vec<PartResult>,
) -> kafka_protocol::messages::FetchResponse {
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{FetchResponse, TopicName};

    let mut results = results.into_iter();
    let mut resp = FetchResponse::default();
    resp.responses = topics
        .iter()
        .map(|t| {
            let mut tr = FetchableTopicResponse::default();
            tr.topic = TopicName(t.name.clone());
            tr.topic_id = t.topic_id;
            tr.partitions = parts[t.parts.clone()]
                .iter()
                .map(|p| {
                    let r = results.next().unwrap_or_default();
                    let mut pd = PartitionData::default();
                    pd.partition_index = p.partition;
                    pd.error_code = r.error_code;
                    pd.high_watermark = r.high_watermark;
                    pd.last_stable_offset = r.last_stable_offset;
                    pd.aborted_transactions = Some(
                        r.aborted
                            .iter()
                            .map(|a| {
                                let mut t = kafka_protocol::messages::fetch_response::AbortedTransaction::default();
                                t.producer_id = kafka_protocol::messages::ProducerId(a.producer_id.0);
                                t.first_offset = a.first_offset.0;
                                t
                            })
                            .collect(),
                    );
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
