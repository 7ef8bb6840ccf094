//! The null broker: the cheapest thing a Kafka client can talk to, for the client-ceiling
//! calibration (see `calibrate`). It listens on an ephemeral loopback port inside the bench
//! process and answers just enough of the protocol for librdkafka's producers and `assign()`
//! consumers: ApiVersions, Metadata, Produce (offsets stamped, batches kept in memory),
//! ListOffsets, Fetch, FindCoordinator, OffsetCommit/OffsetFetch (accepted, not kept) and
//! InitProducerId. There is no disk, no CRC check, no sequence check and no replication; it is
//! a measuring stick, never a broker.
//!
//! Bounds: frames above `NULL_SINK_MAX_FRAME_BYTES` close the connection; each partition keeps
//! its newest `NULL_SINK_PARTITION_MAX_BYTES` (older batches are dropped and the log start
//! offset moves, like retention); connections beyond `NULL_SINK_MAX_CONNECTIONS` are refused;
//! a Fetch waits at most `NULL_SINK_FETCH_WAIT_MAX`. Every connection has its own thread.

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, BrokerId, FetchRequest, FetchResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, OffsetCommitRequest, OffsetCommitResponse,
    OffsetFetchRequest, OffsetFetchResponse, ProduceRequest, ProduceResponse, ProducerId,
    RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use parking_lot::{Condvar, Mutex};

use crate::limits;

/// Kafka error codes the null broker answers with.
const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// The APIs and versions it speaks (flexible versions included, topic names, not ids).
const APIS: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 7),
    (ApiKey::Metadata, 1, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 3),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::InitProducerId, 0, 4),
];

#[derive(Default)]
struct PartitionLog {
    log_start_offset: i64,
    /// The high watermark (= log end offset: nothing to replicate).
    log_end_offset: i64,
    /// (base offset, last offset, batch bytes with the base offset stamped).
    batches: VecDeque<(i64, i64, Bytes)>,
    bytes: usize,
}

struct Shared {
    port: u16,
    topics: Mutex<HashMap<String, Vec<Mutex<PartitionLog>>>>,
    /// Bumped and signalled on every append, so waiting fetches wake.
    appended: Mutex<u64>,
    appended_cv: Condvar,
    next_producer_id: AtomicI64,
    connections: AtomicUsize,
    stop: AtomicBool,
}

/// A running null broker; stopped when dropped.
pub struct NullBroker {
    shared: Arc<Shared>,
    bootstrap: String,
    acceptor: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for NullBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NullBroker({})", self.bootstrap)
    }
}

impl NullBroker {
    pub fn start() -> Result<NullBroker, String> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| format!("null broker: cannot listen on loopback: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("null broker: {e}"))?
            .port();
        let shared = Arc::new(Shared {
            port,
            topics: Mutex::new(HashMap::new()),
            appended: Mutex::new(0),
            appended_cv: Condvar::new(),
            next_producer_id: AtomicI64::new(1),
            connections: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("null broker: {e}"))?;
        let s = shared.clone();
        let acceptor = std::thread::Builder::new()
            .name("bench-null-broker".into())
            .spawn(move || accept_loop(listener, s))
            .map_err(|e| format!("null broker: cannot start its thread: {e}"))?;
        Ok(NullBroker {
            shared,
            bootstrap: format!("127.0.0.1:{port}"),
            acceptor: Some(acceptor),
        })
    }

    pub fn bootstrap(&self) -> &str {
        &self.bootstrap
    }

    /// Creates (or re-creates, empty) a topic.
    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<(), String> {
        if !(1..=limits::MAX_PARTITIONS).contains(&partitions) {
            return Err(format!(
                "null broker: {partitions} partitions is out of range"
            ));
        }
        let logs = (0..partitions).map(|_| Mutex::default()).collect();
        self.shared.topics.lock().insert(topic.to_string(), logs);
        Ok(())
    }
}

impl Drop for NullBroker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.appended_cv.notify_all();
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                if shared.connections.load(Ordering::Relaxed) >= limits::NULL_SINK_MAX_CONNECTIONS {
                    continue; // dropped: refused
                }
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let s = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("bench-null-conn".into())
                    .spawn(move || {
                        let _ = serve(stream, &s);
                        s.connections.fetch_sub(1, Ordering::Relaxed);
                    });
                if spawned.is_err() {
                    shared.connections.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// One connection: read a frame, answer it, until the peer closes, a frame is bad or the broker
/// stops. Errors end the connection (the client reconnects), never the process.
fn serve(mut stream: TcpStream, shared: &Shared) -> Result<(), String> {
    stream.set_nodelay(true).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| e.to_string())?;
    let mut len_buf = [0u8; 4];
    let mut out = BytesMut::new();
    loop {
        if !read_full(&mut stream, &mut len_buf, shared)? {
            return Ok(());
        }
        let len = i32::from_be_bytes(len_buf);
        if len < 0 || len as usize > limits::NULL_SINK_MAX_FRAME_BYTES {
            return Err(format!("frame of {len} bytes"));
        }
        let mut frame = vec![0u8; len as usize];
        if !read_full(&mut stream, &mut frame, shared)? {
            return Ok(());
        }
        let mut buf = Bytes::from(frame);
        out.clear();
        out.extend_from_slice(&[0, 0, 0, 0]);
        if !handle(&mut buf, &mut out, shared)? {
            continue; // acks=0 produce: no answer
        }
        let body = (out.len() - 4) as u32;
        out[..4].copy_from_slice(&body.to_be_bytes());
        stream.write_all(&out).map_err(|e| e.to_string())?;
    }
}

/// Fills `buf`; false when the peer closed (or the broker stopped) before the first byte.
fn read_full(stream: &mut TcpStream, buf: &mut [u8], shared: &Shared) -> Result<bool, String> {
    let mut got = 0;
    while got < buf.len() {
        if shared.stop.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match stream.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err("peer closed mid-frame".into()),
            Ok(n) => got += n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(true)
}

fn encode<T: Encodable>(
    out: &mut BytesMut,
    key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &T,
) -> Result<(), String> {
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    header
        .encode(out, key.response_header_version(version))
        .map_err(|e| e.to_string())?;
    body.encode(out, version).map_err(|e| e.to_string())
}

/// Answers one request into `out`; false when no answer is due (acks=0).
fn handle(buf: &mut Bytes, out: &mut BytesMut, shared: &Shared) -> Result<bool, String> {
    if buf.remaining() < 4 {
        return Err("short request".into());
    }
    let key_raw = i16::from_be_bytes([buf[0], buf[1]]);
    let version = i16::from_be_bytes([buf[2], buf[3]]);
    let key = ApiKey::try_from(key_raw).map_err(|_| format!("unknown api key {key_raw}"))?;
    let Some(&(_, min, max)) = APIS.iter().find(|(k, _, _)| *k == key) else {
        return Err(format!("{key:?} is not spoken here"));
    };
    if key == ApiKey::ApiVersions && !(min..=max).contains(&version) {
        // Answer an unknown version in v0 with UNSUPPORTED_VERSION and our ranges.
        let header = RequestHeader::decode(buf, 1).map_err(|e| e.to_string())?;
        let body = api_versions().with_error_code(35);
        encode(out, key, 0, header.correlation_id, &body)?;
        return Ok(true);
    }
    if !(min..=max).contains(&version) {
        return Err(format!("{key:?} v{version} is not spoken here"));
    }
    let header = RequestHeader::decode(buf, key.request_header_version(version))
        .map_err(|e| e.to_string())?;
    let cid = header.correlation_id;
    macro_rules! decode {
        ($t:ty) => {
            <$t>::decode(buf, version).map_err(|e| format!("{key:?} v{version}: {e}"))?
        };
    }
    match key {
        ApiKey::ApiVersions => encode(out, key, version, cid, &api_versions())?,
        ApiKey::Metadata => {
            let req = decode!(MetadataRequest);
            encode(out, key, version, cid, &metadata(shared, &req))?
        }
        ApiKey::Produce => {
            let req = decode!(ProduceRequest);
            let resp = produce(shared, req.topic_data);
            if req.acks == 0 {
                return Ok(false);
            }
            encode(out, key, version, cid, &resp)?
        }
        ApiKey::Fetch => {
            let req = decode!(FetchRequest);
            encode(out, key, version, cid, &fetch(shared, &req))?
        }
        ApiKey::ListOffsets => {
            let req = decode!(ListOffsetsRequest);
            encode(out, key, version, cid, &list_offsets(shared, &req))?
        }
        ApiKey::FindCoordinator => {
            let req = decode!(FindCoordinatorRequest);
            encode(out, key, version, cid, &find_coordinator(shared, &req))?
        }
        ApiKey::OffsetCommit => {
            let req = decode!(OffsetCommitRequest);
            let topics = req
                .topics
                .iter()
                .map(|t| {
                    OffsetCommitResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    OffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                })
                                .collect(),
                        )
                })
                .collect();
            encode(
                out,
                key,
                version,
                cid,
                &OffsetCommitResponse::default().with_topics(topics),
            )?
        }
        ApiKey::OffsetFetch => {
            let req = decode!(OffsetFetchRequest);
            let topics = req
                .topics
                .unwrap_or_default()
                .iter()
                .map(|t| {
                    OffsetFetchResponseTopic::default()
                        .with_name(t.name.clone())
                        .with_partitions(
                            t.partition_indexes
                                .iter()
                                .map(|&p| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_committed_offset(-1)
                                        .with_committed_leader_epoch(-1)
                                })
                                .collect(),
                        )
                })
                .collect();
            encode(
                out,
                key,
                version,
                cid,
                &OffsetFetchResponse::default().with_topics(topics),
            )?
        }
        ApiKey::InitProducerId => {
            let id = shared.next_producer_id.fetch_add(1, Ordering::Relaxed);
            let body = InitProducerIdResponse::default()
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0)
                .with_ongoing_txn_producer_id(ProducerId(-1))
                .with_ongoing_txn_producer_epoch(-1);
            encode(out, key, version, cid, &body)?
        }
        _ => return Err(format!("{key:?} is not spoken here")),
    }
    Ok(true)
}

fn api_versions() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        APIS.iter()
            .map(|&(k, min, max)| {
                ApiVersion::default()
                    .with_api_key(k as i16)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect(),
    )
}

fn metadata(shared: &Shared, req: &MetadataRequest) -> MetadataResponse {
    let topics = shared.topics.lock();
    let names: Vec<String> = match &req.topics {
        None => topics.keys().cloned().collect(),
        Some(list) => list
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.as_str().to_string()))
            .collect(),
    };
    let answers = names
        .into_iter()
        .map(|name| {
            let t = MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.clone()))));
            match topics.get(&name) {
                None => t.with_error_code(UNKNOWN_TOPIC_OR_PARTITION),
                Some(parts) => t.with_partitions(
                    (0..parts.len() as i32)
                        .map(|p| {
                            MetadataResponsePartition::default()
                                .with_partition_index(p)
                                .with_leader_id(BrokerId(0))
                                .with_leader_epoch(0)
                                .with_replica_nodes(vec![BrokerId(0)])
                                .with_isr_nodes(vec![BrokerId(0)])
                        })
                        .collect(),
                ),
            }
        })
        .collect();
    MetadataResponse::default()
        .with_brokers(vec![MetadataResponseBroker::default()
            .with_node_id(BrokerId(0))
            .with_host(StrBytes::from_static_str("127.0.0.1"))
            .with_port(shared.port as i32)])
        .with_cluster_id(Some(StrBytes::from_static_str("sluice-bench-null")))
        .with_controller_id(BrokerId(0))
        .with_topics(answers)
}

/// Stamps base offsets into the batches of one partition's records and appends them. Returns
/// the base offset, or None when the bytes are not whole record batches.
fn append(log: &mut PartitionLog, records: &Bytes) -> Option<i64> {
    let base = log.log_end_offset;
    let mut data = BytesMut::from(&records[..]);
    let mut at = 0usize;
    let mut next = base;
    // Record batch v2: base offset i64 @0, batch length i32 @8 (bytes after it), last offset
    // delta i32 @23.
    while at + 27 <= data.len() {
        let batch_len = i32::from_be_bytes(data[at + 8..at + 12].try_into().ok()?);
        let end = at + 12 + usize::try_from(batch_len).ok()?;
        if end > data.len() {
            return None;
        }
        let delta = i32::from_be_bytes(data[at + 23..at + 27].try_into().ok()?);
        data[at..at + 8].copy_from_slice(&next.to_be_bytes());
        next += i64::from(delta.max(0)) + 1;
        at = end;
    }
    if at != data.len() || next == base {
        return None;
    }
    let bytes = data.freeze();
    log.bytes += bytes.len();
    log.batches.push_back((base, next - 1, bytes));
    log.log_end_offset = next;
    while log.bytes > limits::NULL_SINK_PARTITION_MAX_BYTES && log.batches.len() > 1 {
        if let Some((_, last, b)) = log.batches.pop_front() {
            log.bytes -= b.len();
            log.log_start_offset = last + 1;
        }
    }
    Some(base)
}

fn produce(
    shared: &Shared,
    topic_data: Vec<kafka_protocol::messages::produce_request::TopicProduceData>,
) -> ProduceResponse {
    let mut responses = Vec::with_capacity(topic_data.len());
    {
        let topics = shared.topics.lock();
        for t in topic_data {
            let parts = topics.get(t.name.as_str());
            let partition_responses = t
                .partition_data
                .iter()
                .map(|p| {
                    let r = PartitionProduceResponse::default()
                        .with_index(p.index)
                        .with_log_append_time_ms(-1);
                    let log =
                        parts.and_then(|ps| usize::try_from(p.index).ok().and_then(|i| ps.get(i)));
                    match (log, &p.records) {
                        (Some(log), Some(records)) => {
                            let mut log = log.lock();
                            match append(&mut log, records) {
                                Some(base) => r
                                    .with_base_offset(base)
                                    .with_log_start_offset(log.log_start_offset),
                                // CORRUPT_MESSAGE
                                None => r.with_error_code(2).with_base_offset(-1),
                            }
                        }
                        _ => r
                            .with_error_code(UNKNOWN_TOPIC_OR_PARTITION)
                            .with_base_offset(-1),
                    }
                })
                .collect();
            responses.push(
                TopicProduceResponse::default()
                    .with_name(t.name)
                    .with_partition_responses(partition_responses),
            );
        }
    }
    *shared.appended.lock() += 1;
    shared.appended_cv.notify_all();
    ProduceResponse::default().with_responses(responses)
}

fn fetch(shared: &Shared, req: &FetchRequest) -> FetchResponse {
    let wait =
        Duration::from_millis(req.max_wait_ms.max(0) as u64).min(limits::NULL_SINK_FETCH_WAIT_MAX);
    let deadline = Instant::now() + wait;
    loop {
        let seen = *shared.appended.lock();
        let (responses, bytes) = fetch_once(shared, req);
        if bytes > 0 || bytes >= req.min_bytes.max(0) as usize && req.min_bytes <= 0 {
            return FetchResponse::default().with_responses(responses);
        }
        let mut appended = shared.appended.lock();
        if *appended == seen {
            let now = Instant::now();
            if now >= deadline || shared.stop.load(Ordering::Relaxed) {
                return FetchResponse::default().with_responses(responses);
            }
            shared.appended_cv.wait_for(&mut appended, deadline - now);
        }
        if Instant::now() >= deadline {
            drop(appended);
            let (responses, _) = fetch_once(shared, req);
            return FetchResponse::default().with_responses(responses);
        }
    }
}

fn fetch_once(shared: &Shared, req: &FetchRequest) -> (Vec<FetchableTopicResponse>, usize) {
    let topics = shared.topics.lock();
    let mut total = 0usize;
    let max_total = req.max_bytes.max(1) as usize;
    let responses = req
        .topics
        .iter()
        .map(|t| {
            let parts = topics.get(t.topic.as_str());
            let partitions = t
                .partitions
                .iter()
                .map(|fp| {
                    let r = PartitionData::default()
                        .with_partition_index(fp.partition)
                        .with_aborted_transactions(Some(Vec::new()))
                        .with_preferred_read_replica(BrokerId(-1));
                    let Some(log) = parts
                        .and_then(|ps| usize::try_from(fp.partition).ok().and_then(|i| ps.get(i)))
                    else {
                        return r.with_error_code(UNKNOWN_TOPIC_OR_PARTITION);
                    };
                    let log = log.lock();
                    let r = r
                        .with_high_watermark(log.log_end_offset)
                        .with_last_stable_offset(log.log_end_offset)
                        .with_log_start_offset(log.log_start_offset);
                    if fp.fetch_offset < log.log_start_offset
                        || fp.fetch_offset > log.log_end_offset
                    {
                        return r.with_error_code(OFFSET_OUT_OF_RANGE);
                    }
                    let mut out = BytesMut::new();
                    let part_max = fp.partition_max_bytes.max(1) as usize;
                    for (_, last, b) in log.batches.iter() {
                        if *last < fp.fetch_offset {
                            continue;
                        }
                        // Always at least one batch, like Kafka, so a big batch is never stuck.
                        if !out.is_empty()
                            && (out.len() + b.len() > part_max || total + b.len() > max_total)
                        {
                            break;
                        }
                        out.extend_from_slice(b);
                        total += b.len();
                    }
                    r.with_error_code(NONE).with_records(Some(out.freeze()))
                })
                .collect();
            FetchableTopicResponse::default()
                .with_topic(t.topic.clone())
                .with_partitions(partitions)
        })
        .collect();
    (responses, total)
}

fn list_offsets(shared: &Shared, req: &ListOffsetsRequest) -> ListOffsetsResponse {
    let topics = shared.topics.lock();
    let answers = req
        .topics
        .iter()
        .map(|t| {
            let parts = topics.get(t.name.as_str());
            ListOffsetsTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let r = ListOffsetsPartitionResponse::default()
                                .with_partition_index(p.partition_index)
                                .with_timestamp(-1);
                            match parts.and_then(|ps| {
                                usize::try_from(p.partition_index)
                                    .ok()
                                    .and_then(|i| ps.get(i))
                            }) {
                                None => r.with_error_code(UNKNOWN_TOPIC_OR_PARTITION),
                                Some(log) => {
                                    let log = log.lock();
                                    // -2 earliest; anything else answers the end.
                                    let offset = if p.timestamp == -2 {
                                        log.log_start_offset
                                    } else {
                                        log.log_end_offset
                                    };
                                    r.with_offset(offset).with_leader_epoch(0)
                                }
                            }
                        })
                        .collect(),
                )
        })
        .collect();
    ListOffsetsResponse::default().with_topics(answers)
}

fn find_coordinator(shared: &Shared, req: &FindCoordinatorRequest) -> FindCoordinatorResponse {
    let host = StrBytes::from_static_str("127.0.0.1");
    let port = shared.port as i32;
    FindCoordinatorResponse::default()
        .with_node_id(BrokerId(0))
        .with_host(host.clone())
        .with_port(port)
        .with_coordinators(
            req.coordinator_keys
                .iter()
                .map(|k| {
                    Coordinator::default()
                        .with_key(k.clone())
                        .with_node_id(BrokerId(0))
                        .with_host(host.clone())
                        .with_port(port)
                })
                .collect(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(records: i32, body: usize) -> Vec<u8> {
        let mut b = vec![0u8; 61 + body];
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[16] = 2;
        b[23..27].copy_from_slice(&(records - 1).to_be_bytes());
        b
    }

    #[test]
    fn append_stamps_offsets_and_bounds_memory() {
        let mut log = PartitionLog::default();
        let two = [batch(3, 10), batch(2, 10)].concat();
        assert_eq!(append(&mut log, &Bytes::from(two)), Some(0));
        assert_eq!(log.log_end_offset, 5);
        let stored = &log.batches[0].2;
        let second_base = i64::from_be_bytes(stored[71..79].try_into().unwrap());
        assert_eq!(second_base, 3);
        // A torn batch is refused and changes nothing.
        let mut torn = batch(1, 10);
        torn.truncate(40);
        assert_eq!(append(&mut log, &Bytes::from(torn)), None);
        assert_eq!(log.log_end_offset, 5);
        // Retention keeps the newest bytes and moves the log start offset.
        let big = batch(1, limits::NULL_SINK_PARTITION_MAX_BYTES / 2);
        for _ in 0..4 {
            append(&mut log, &Bytes::from(big.clone())).unwrap();
        }
        assert!(log.bytes <= limits::NULL_SINK_PARTITION_MAX_BYTES);
        assert!(log.log_start_offset > 0);
        assert_eq!(log.log_end_offset, 9);
    }
}
