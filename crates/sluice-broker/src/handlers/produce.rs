//! Produce (key 0), v3-13.
//!
//! [`start`] runs in the connection's arrival order: it decodes the request, validates every
//! partition's records (`record_validation`: framing, codecs, decompression with a cap,
//! control/transactional batches, producer ids never issued) and hands them to the log, which
//! checks the header again (CRC-32C, size against max.message.bytes, offsets) and queues them
//! for group commit. A refused partition stores nothing; the others of the request go on.
//! acks=1 and acks=all are the same on one node: both are answered once the log reports the
//! appends durable (after the fsync). acks=0 returns no response at all and waits for nothing.
//! The produce path never touches topic metadata on disk: it reads the in-memory registry.
//! With an authorizer: WRITE on each topic (TOPIC_AUTHORIZATION_FAILED per partition), and
//! for transactional records WRITE on the transactional id
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), as Kafka checks them.
//!
//! No task per request: the appends of one request share one [`AppendGroup`], and the
//! connection's writer waits on it directly ([`ProduceCall::wait`]), then has the call
//! encode its response ([`ProduceCall::respond`]). So a produce request costs the runtime one
//! wake-up (the committer's, when the last of its partitions is durable), not a spawned task
//! plus one wake-up per partition.
//!
//! Allocations (counted by `tests/alloc_per_request.rs`): none per request in steady state.
//! A [`ProduceCall`] holds everything a request needs, the decoded request (`decode`: slices
//! of the frame in two vectors), the append group, the response laid out in place and the
//! buffer it is encoded into, and the connection keeps a few ([`ProduceCalls`]) for reuse.
//! A call forgets its request's slices once the response is written, so a kept call holds no
//! frame.
//!
//! Transactions V2 (v12+): a transactional request first adds its partitions to the
//! producer's transaction ([`implicit_add`]), then queues its appends.

mod decode;
mod implicit_add;

/// First Produce version whose response carries `record_errors` (KIP-467).
const RECORD_ERRORS_VERSION_MIN: i16 = 8;

use kafka_protocol::error::ResponseError;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ApiKey, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use parking_lot::Mutex;
use sluice_log::{AppendGroup, AppendInfo, LogError, PartitionKey};
use sluice_protocol::codec;

use super::{str_bytes, Ctx, Reply};
use crate::metrics::{self, TopicStats};
use crate::{
    config::limits, error_code, services::acl, services::quotas, services::record_validation,
    Broker,
};

/// One produce request from decode to response; reused (see the module comment).
#[derive(Debug, Default)]
pub(crate) struct ProduceCall {
    version: i16,
    correlation_id: i32,
    decoded: decode::Decoded,
    group: AppendGroup,
    resp: ProduceResponse,
    out: BytesMut,
    /// The client quota's throttle time for this request (`quotas`; 0: not throttled).
    throttle_ms: u64,
}

impl ProduceCall {
    /// Waits until every append the request queued is answered.
    pub(crate) async fn wait(&self) {
        self.group.wait().await
    }

    /// Fills the laid-out response with the appends' outcomes and encodes it. Call after
    /// [`ProduceCall::wait`]. `None` when encoding failed (logged; close the connection).
    pub(crate) fn respond(&mut self) -> Option<&[u8]> {
        let partitions = self.resp.responses.iter_mut().flat_map(|t| {
            let name = &t.name;
            t.partition_responses.iter_mut().map(move |p| (name, p))
        });
        for (slot, (topic, pr)) in partitions.enumerate() {
            match self.group.take(slot) {
                Some(outcome) => {
                    if let Err(e) = &outcome {
                        crate::log_limit::producer_state_full(e, Some((topic, pr.index)));
                    }
                    fill(pr, outcome, self.version)
                }
                // Failed before it was queued: the error is in place already.
                None => debug_assert_ne!(pr.error_code, 0, "partition neither queued nor failed"),
            }
        }
        self.resp.throttle_time_ms = i32::try_from(self.throttle_ms).unwrap_or(i32::MAX);
        self.out.clear();
        let encoded = codec::encode_response(
            &mut self.out,
            ApiKey::Produce,
            self.version,
            self.correlation_id,
            &self.resp,
        );
        self.forget_request();
        match encoded {
            Ok(()) => Some(&self.out),
            Err(e) => {
                tracing::error!(version = self.version, error = %e, "produce response encode failed; closing connection");
                None
            }
        }
    }

    /// How long the connection is muted after this request (its quota's throttle time).
    pub(crate) fn throttle_ms(&self) -> u64 {
        self.throttle_ms
    }

    /// Whether a partition of the last response carries an error code (for metrics).
    pub(crate) fn has_partition_error(&self) -> bool {
        self.resp
            .responses
            .iter()
            .flat_map(|t| &t.partition_responses)
            .any(|p| p.error_code != error_code::NONE)
    }

    /// Drops every reference into the request's frame (names, records) and the error
    /// messages, keeping the vectors' capacity.
    fn forget_request(&mut self) {
        self.decoded.clear();
        for t in &mut self.resp.responses {
            t.name = TopicName(StrBytes::default());
            for p in &mut t.partition_responses {
                p.error_message = None;
                p.record_errors.clear();
            }
        }
    }

    /// Lays the response out, one pending answer per partition entry, in request order.
    fn lay_out_response(&mut self) {
        let topics = &self.decoded.topics;
        let responses = &mut self.resp.responses;
        responses.truncate(topics.len());
        responses.resize_with(topics.len(), TopicProduceResponse::default);
        for (tr, t) in responses.iter_mut().zip(topics) {
            tr.name = TopicName(t.name.clone());
            tr.topic_id = t.topic_id;
            tr.partition_responses.clear();
            let parts = &self.decoded.partitions[t.partitions.clone()];
            tr.partition_responses
                .extend(parts.iter().map(|p| pending_partition(p.index)));
        }
    }
}

/// The produce calls a connection keeps for reuse, shared by its reader (which takes one per
/// produce request) and its writer (which gives it back after the response is written).
#[derive(Debug, Default, Clone)]
// Boxed so that handing a call between the reader, the channel and the writer moves a pointer.
#[allow(clippy::vec_box)]
pub(crate) struct ProduceCalls(Arc<Mutex<Vec<Box<ProduceCall>>>>);

impl ProduceCalls {
    /// A call with nothing outstanding (an acks=0 call may still have appends in the log).
    pub(crate) fn take(&self) -> Box<ProduceCall> {
        let mut kept = self.0.lock();
        match kept.iter().position(|c| c.group.outstanding() == 0) {
            Some(i) => kept.swap_remove(i),
            None => Box::default(),
        }
    }

    pub(crate) fn put(&self, call: Box<ProduceCall>) {
        let mut kept = self.0.lock();
        if kept.len() < limits::PRODUCE_CALLS_KEPT_PER_CONNECTION {
            kept.push(call);
        }
    }
}

/// What starting a produce request gave the connection.
#[derive(Debug)]
pub(crate) enum Started {
    /// Appends are queued: wait on the call, then write what it responds.
    Waiting(Box<ProduceCall>),
    /// Nothing to wait for: acks=0 (no response) or a malformed request (close). The call
    /// can be given back at once.
    Done(Reply, Box<ProduceCall>),
}

pub(crate) async fn start(ctx: Ctx, body: Bytes, mut call: Box<ProduceCall>) -> Started {
    call.throttle_ms = 0;
    if let Err(e) = call.decoded.decode(&body, ctx.version) {
        tracing::warn!(version = ctx.version, error = %e, "malformed request; closing connection");
        call.decoded.clear();
        return Started::Done(Reply::Close, call);
    }
    call.version = ctx.version;
    call.correlation_id = ctx.correlation_id;
    // Kafka charges a produce request's whole size to the producer_byte_rate quota.
    call.throttle_ms = ctx.broker.quotas.throttle_ms(
        quotas::Kind::Produce,
        &ctx.principal,
        ctx.client_id.as_deref().unwrap_or(""),
        body.len(),
        std::time::Instant::now(),
    );
    call.lay_out_response();
    let entries = call.decoded.partitions.len();
    call.group.reset(entries);
    queue_appends(&ctx, &mut call).await;
    // The log holds what it needs of the frame; the response keeps only the topic names.
    call.decoded.partitions.clear();
    if call.decoded.acks == 0 {
        // The client expects no response; durability proceeds without anyone waiting.
        call.forget_request();
        return Started::Done(Reply::NoResponse, call);
    }
    Started::Waiting(call)
}

/// Validates and queues every partition entry, in request order; a refused one gets its
/// error in the laid-out response.
async fn queue_appends(ctx: &Ctx, call: &mut ProduceCall) {
    let ProduceCall {
        version,
        decoded,
        group,
        resp,
        ..
    } = call;
    let request = record_validation::ProduceContext {
        version: *version,
        transactional_id: decoded.transactional_id.is_some(),
    };
    // Kafka: transactional records need WRITE on the transactional id; without it every
    // partition of the request is refused.
    let txn_denied = decoded.has_transactional_records()
        && !decoded
            .transactional_id
            .as_ref()
            .is_some_and(|id| ctx.allowed_transactional_id(id));
    let by_id = *version >= 13;
    let unknown = match by_id {
        true => ResponseError::UnknownTopicId.code(),
        false => ResponseError::UnknownTopicOrPartition.code(),
    };
    let acks_valid = matches!(decoded.acks, -1..=1);
    // Transactions V2: the implicit add comes before any append of the request; when it is
    // refused, every transactional partition gets its code and nothing of them is queued.
    let txn_refusal = match (&decoded.transactional_id, *version) {
        (Some(id), v) if v >= implicit_add::IMPLICIT_ADD_VERSION_MIN && acks_valid => {
            match txn_denied || !decoded.has_transactional_records() {
                true => None,
                false => transactional_partitions(ctx, decoded, by_id)
                    .add(&ctx.broker, id)
                    .await
                    .err(),
            }
        }
        _ => None,
    };
    let is_transactional = |p: &decode::PartitionData| {
        p.records
            .as_ref()
            .and_then(implicit_add::transactional_producer)
            .is_some()
    };
    let mut slot = 0;
    for (t, tr) in decoded.topics.iter().zip(resp.responses.iter_mut()) {
        let topic = match by_id {
            true => ctx.broker.topics.get_by_id(t.topic_id),
            false => ctx.broker.topics.get(&t.name),
        };
        // Kafka checks WRITE before existence, so an unauthorized client learns nothing.
        let name = match (&topic, by_id) {
            (Some(tp), true) => &*tp.name,
            _ => t.name.as_str(),
        };
        // An unknown topic id has no name to check: it is answered UNKNOWN_TOPIC_ID.
        let authorized =
            (by_id && topic.is_none()) || ctx.allowed(acl::op::WRITE, acl::resource::TOPIC, name);
        let parts = &decoded.partitions[t.partitions.clone()];
        for (p, pr) in parts.iter().zip(tr.partition_responses.iter_mut()) {
            let refused = match (
                acks_valid,
                topic.as_ref().and_then(|tp| tp.partition(p.index)),
            ) {
                (false, _) => Some(Refused::new(
                    ResponseError::InvalidRequiredAcks.code(),
                    None,
                )),
                (true, _) if txn_denied => Some(Refused::new(
                    ResponseError::TransactionalIdAuthorizationFailed.code(),
                    None,
                )),
                (true, _) if !authorized => Some(Refused::new(
                    ResponseError::TopicAuthorizationFailed.code(),
                    None,
                )),
                // Kafka: "Cannot append to internal topic" (not retriable).
                (true, None) if !by_id && crate::services::topics::is_internal(&t.name) => {
                    Some(Refused::new(
                        ResponseError::InvalidTopicException.code(),
                        Some(format!("Cannot append to internal topic {}", &*t.name)),
                    ))
                }
                (true, None) => Some(Refused::new(unknown, None)),
                (true, Some(_)) if txn_refusal.is_some() && is_transactional(p) => {
                    txn_refusal.map(|code| Refused::new(code, None))
                }
                (true, Some(key)) => match &p.records {
                    None => Some(Refused::new(
                        ResponseError::CorruptMessage.code(),
                        Some("no records".into()),
                    )),
                    Some(records) => {
                        let stats = topic.as_ref().map(|tp| &*tp.stats);
                        append(
                            &ctx.broker,
                            request,
                            key,
                            records.clone(),
                            group,
                            slot,
                            stats,
                        )
                        .await
                    }
                },
            };
            if let Some(refused) = refused {
                pr.error_code = refused.error_code;
                pr.error_message = refused.message.map(str_bytes);
                if *version >= RECORD_ERRORS_VERSION_MIN {
                    pr.record_errors = refused
                        .record_errors
                        .into_iter()
                        .map(|(index, message)| {
                            let mut e = BatchIndexAndErrorMessage::default();
                            e.batch_index = index;
                            e.batch_index_error_message = Some(str_bytes(message));
                            e
                        })
                        .collect();
                }
            }
            slot += 1;
        }
    }
    assert_eq!(
        slot,
        decoded.partitions.len(),
        "one slot per partition entry"
    );
}

/// The partitions of the request that carry transactional batches and would be appended:
/// existing, and writable by the principal (the others are refused in the request's pass
/// anyway, and must not join the transaction).
fn transactional_partitions(
    ctx: &Ctx,
    decoded: &decode::Decoded,
    by_id: bool,
) -> implicit_add::TxnPartitions {
    let mut txn = implicit_add::TxnPartitions::default();
    for t in &decoded.topics {
        let topic = match by_id {
            true => ctx.broker.topics.get_by_id(t.topic_id),
            false => ctx.broker.topics.get(&t.name),
        };
        let Some(topic) = topic else { continue };
        if !ctx.allowed(acl::op::WRITE, acl::resource::TOPIC, &topic.name) {
            continue;
        }
        for p in &decoded.partitions[t.partitions.clone()] {
            let producer = p
                .records
                .as_ref()
                .and_then(implicit_add::transactional_producer);
            if let (Some(producer), Some(_)) = (producer, topic.partition(p.index)) {
                txn.push(&topic.name, p.index, producer);
            }
        }
    }
    txn
}

/// A partition's answer before its append completes: Kafka's "no offset" values.
fn pending_partition(index: i32) -> PartitionProduceResponse {
    let mut pr = PartitionProduceResponse::default();
    pr.index = index;
    pr.base_offset = -1;
    pr.log_append_time_ms = -1;
    pr.log_start_offset = -1;
    pr
}

fn fill(pr: &mut PartitionProduceResponse, outcome: Result<AppendInfo, LogError>, version: i16) {
    match outcome {
        Ok(info) => {
            pr.base_offset = info.base_offset.0;
            pr.log_append_time_ms = info.log_append_time_ms;
            pr.log_start_offset = info.log_start_offset.0;
        }
        Err(e) => {
            pr.error_code = error_code::from_produce_log(&e, version);
            pr.error_message = Some(str_bytes(e.to_string()));
        }
    }
}

/// Validates one partition's records, then queues them in `slot` of `group`. Awaited in
/// arrival order, so a slow validation (a large compressed batch) holds back only this
/// connection's later requests. Returns the refusal, if refused.
async fn append(
    broker: &Broker,
    request: record_validation::ProduceContext,
    key: &PartitionKey,
    records: Bytes,
    group: &AppendGroup,
    slot: usize,
    stats: Option<&TopicStats>,
) -> Option<Refused> {
    let validated =
        record_validation::validate_produce(&broker.producer_ids, request, &records).await;
    let validated = match validated {
        Ok(()) if broker.log.is_compacted(key) => {
            crate::services::compaction::refuse_keyless(&records, key).await
        }
        other => other,
    };
    if let Err(refusal) = validated {
        tracing::debug!(?key, code = refusal.error_code, reason = %refusal.message, "produce refused");
        return Some(Refused {
            error_code: refusal.error_code,
            message: Some(refusal.message),
            record_errors: refusal.record_errors,
        });
    }
    let (bytes, count) = (records.len() as u64, metrics::batch_records(&records));
    match broker.log.append_in_group(key, records, group, slot).await {
        Ok(()) => {
            if let Some(stats) = stats {
                TopicStats::add(&stats.produce_bytes, bytes);
                TopicStats::add(&stats.produce_records, count);
            }
            None
        }
        Err(e) => Some(Refused::new(error_code::from_log(&e), Some(e.to_string()))),
    }
}

/// Why a partition entry got no offset: its error code, message and, for refused records,
/// the `record_errors` to name (index among the partition's records, message).
struct Refused {
    error_code: i16,
    message: Option<String>,
    record_errors: Vec<(i32, String)>,
}

impl Refused {
    fn new(error_code: i16, message: Option<String>) -> Self {
        Self {
            error_code,
            message,
            record_errors: Vec::new(),
        }
    }
}
