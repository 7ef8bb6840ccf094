//! Allocations per request (issue 11): how many heap allocations, and how many bytes, the
//! broker makes for one steady-state Produce (acks=all) and one Fetch, at 1, 16 and 128
//! partitions per request. The Rust counterpart of Apache Kafka's JMH allocation runs.
//!
//! Everything is real except the process boundary: a `Server` bound on loopback with a data
//! dir under `target/` (real files, fdatasync on), served by a tokio runtime built like the
//! binary's, and a client on this test's own thread that speaks the wire protocol over a
//! real socket, one request at a time. So a request's count covers the connection (framing,
//! request task), the handler (decode, validation, response encode) and the log (append
//! queue, committer, journal) — whatever the broker does for it.
//!
//! Counting: a `#[global_allocator]` that wraps the binary's `GuardedAlloc` and counts every
//! allocation (a `realloc` counts as one allocation of its new size) by the kind of thread
//! making it: tokio workers, tokio's blocking pool, and every other thread (`sluice-log`'s
//! committer, checkpointer and retention threads). The client thread is not counted. Each
//! shape is warmed up first, then the counters are read around the measured requests.
//! Background work that happens to run in the window (a checkpoint) lands in the "log"
//! columns; it is amortised over the requests, as it is in production.
//!
//! Run (prints a table; asserts that every request succeeded, that a Produce request costs
//! the async workers at most a fixed few allocations, none per partition, and that a Fetch
//! request, with data or long-polling, costs the workers and the blocking pool no allocation
//! at all; it runs in the test command):
//! `cargo test --release -p sluice-broker --test alloc_per_request -- --nocapture`
//! With `SLUICE_ALLOC_BACKTRACE_BYTES=N` it also prints a backtrace for every broker
//! allocation of N bytes or more while measuring (slow; to find where the bytes go), and
//! `SLUICE_ALLOC_REQUESTS=N` measures N requests per shape instead of the defaults.
#![allow(unsafe_code)] // the counting allocator

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse,
};
use sluice_broker::{BrokerConfig, Server};

mod common;
use common::{topic_name, Client};
use sluice_protocol::alloc_guard::GuardedAlloc;

// ---------------------------------------------------------------------------------------
// The counting allocator
// ---------------------------------------------------------------------------------------

/// Who is allocating. Threads start as `OTHER`; tokio's hooks and the client re-label theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Role {
    /// The benchmark's client: not the broker's cost.
    Client = 0,
    /// A tokio worker: connections, decode, handlers, encode.
    Worker = 1,
    /// tokio's blocking pool: fetch reads, large validations.
    Blocking = 2,
    /// Any other thread: `sluice-log`'s committer, checkpointer, retention.
    Other = 3,
}

const ROLES: usize = 4;

thread_local! {
    // A const-initialised Cell has no destructor and needs no lazy setup, so reading it
    // from inside the allocator cannot allocate or recurse.
    static ROLE: Cell<u8> = const { Cell::new(Role::Other as u8) };
}

fn set_role(role: Role) {
    ROLE.with(|r| r.set(role as u8));
}

#[derive(Debug)]
struct Counting;

static ALLOCS: [AtomicU64; ROLES] = [const { AtomicU64::new(0) }; ROLES];
static BYTES: [AtomicU64; ROLES] = [const { AtomicU64::new(0) }; ROLES];

/// Broker allocations of at least this many bytes print a backtrace while measuring
/// (`SLUICE_ALLOC_BACKTRACE_BYTES`; 0 = off): where the bytes in the table come from.
static BACKTRACE_BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set while this thread prints a backtrace, whose own allocations are not traced.
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

fn count(size: usize) {
    let role = ROLE.try_with(Cell::get).unwrap_or(Role::Other as u8) as usize;
    ALLOCS[role].fetch_add(1, Ordering::Relaxed);
    BYTES[role].fetch_add(size as u64, Ordering::Relaxed);
    let threshold = BACKTRACE_BYTES.load(Ordering::Relaxed);
    if threshold > 0 && size as u64 >= threshold && role != Role::Client as usize {
        trace(size, role);
    }
}

#[cold]
fn trace(size: usize, role: usize) {
    if TRACING.try_with(|t| t.replace(true)).unwrap_or(true) {
        return;
    }
    let bt = std::backtrace::Backtrace::force_capture();
    eprintln!("--- {size} bytes on role {role}:\n{bt}");
    TRACING.with(|t| t.set(false));
}

// SAFETY: every call is forwarded unchanged to `GuardedAlloc`; counting touches only atomics
// and a const thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { GuardedAlloc.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { GuardedAlloc.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { GuardedAlloc.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        unsafe { GuardedAlloc.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

#[derive(Debug, Clone, Copy, Default)]
struct Snapshot {
    allocs: [u64; ROLES],
    bytes: [u64; ROLES],
}

fn snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    for i in 0..ROLES {
        s.allocs[i] = ALLOCS[i].load(Ordering::Relaxed);
        s.bytes[i] = BYTES[i].load(Ordering::Relaxed);
    }
    s
}

// ---------------------------------------------------------------------------------------
// The workload
// ---------------------------------------------------------------------------------------

/// 1 KiB values, and as many per batch as fit in the Java client's default 16 KiB
/// `batch.size` (15: a record takes 1,033 bytes with its framing).
const VALUE_BYTES: usize = 1024;
const RECORDS_PER_BATCH: i32 = 15;
const PRODUCE_VERSION: i16 = 9;
/// Worker allocations per Produce request, whatever its partitions: none (measured 0.0 at
/// 1, 16 and 128 partitions: frames bigger than the read chunk reuse a kept buffer), with
/// room for a rare amortised growth. Before big frames kept their buffers: 2-3 above 64 KiB;
/// before the produce path reused its calls: 11 + one per partition.
const PRODUCE_WORKER_ALLOCS_MAX: f64 = 0.5;
const FETCH_VERSION: i16 = 12;
/// Worker and blocking-pool allocations per Fetch request, with data or long-polling, whatever
/// its partitions: none (measured 0.0), with room for a rare amortised growth of a reused
/// vector. Before fetches reused their calls: 18 at 1 partition, 290 at 128.
const FETCH_ALLOCS_MAX: f64 = 0.5;
/// How long the long-poll rows wait for data that never comes.
const FETCH_EMPTY_WAIT_MS: i32 = 2;
/// (partitions per request, warm-up requests, measured requests).
const SHAPES: [(i32, u32, u32); 3] = [(1, 200, 2000), (16, 40, 250), (128, 20, 120)];

/// One idempotent producer's v2 batch of `RECORDS_PER_BATCH` values with a correct CRC-32C.
fn batch(producer_id: i64, epoch: i16, base_sequence: i32) -> Bytes {
    let values: Vec<Vec<u8>> = (0..RECORDS_PER_BATCH)
        .map(|i| vec![b'a' + (i % 26) as u8; VALUE_BYTES])
        .collect();
    let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    let writer = common::Writer {
        producer_id,
        epoch,
        base_sequence,
    };
    common::batch(writer, &values)
}

struct Producer {
    id: i64,
    epoch: i16,
    /// Next base sequence per partition.
    sequences: Vec<i32>,
}

fn produce_request(topic: &str, producer: &mut Producer) -> ProduceRequest {
    let mut td = TopicProduceData::default();
    td.name = topic_name(topic);
    for (p, seq) in producer.sequences.iter_mut().enumerate() {
        let mut pd = PartitionProduceData::default();
        pd.index = p as i32;
        pd.records = Some(batch(producer.id, producer.epoch, *seq));
        *seq += RECORDS_PER_BATCH;
        td.partition_data.push(pd);
    }
    let mut req = ProduceRequest::default();
    req.transactional_id = None;
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    req
}

fn produce(client: &mut Client, topic: &str, producer: &mut Producer) {
    let req = produce_request(topic, producer);
    let resp: ProduceResponse = client.call(ApiKey::Produce, PRODUCE_VERSION, &req);
    for t in &resp.responses {
        for p in &t.partition_responses {
            assert_eq!(p.error_code, 0, "produce to {}-{} failed", topic, p.index);
        }
    }
}

fn fetch_request(topic: &str, offsets: &[i64]) -> FetchRequest {
    let mut ft = FetchTopic::default();
    ft.topic = topic_name(topic);
    for (p, &offset) in offsets.iter().enumerate() {
        let mut fp = FetchPartition::default();
        fp.partition = p as i32;
        fp.fetch_offset = offset;
        // One batch per partition: the next one does not fit.
        fp.partition_max_bytes = 16 * 1024;
        ft.partitions.push(fp);
    }
    let mut req = FetchRequest::default();
    req.replica_id = (-1).into();
    req.max_wait_ms = 0;
    req.min_bytes = 1;
    req.max_bytes = i32::MAX;
    req.session_epoch = -1; // full fetches, no session
    req.topics = vec![ft];
    req
}

/// A fetch at the high watermarks: it long-polls for `FETCH_EMPTY_WAIT_MS` and comes back
/// empty (registers and withdraws its wake-ups, sleeps, answers).
fn fetch_empty(client: &mut Client, topic: &str, offsets: &[i64]) {
    let mut req = fetch_request(topic, offsets);
    req.max_wait_ms = FETCH_EMPTY_WAIT_MS;
    let resp: FetchResponse = client.call(ApiKey::Fetch, FETCH_VERSION, &req);
    assert_eq!(resp.error_code, 0);
    for p in resp.responses.iter().flat_map(|t| &t.partitions) {
        assert_eq!(p.error_code, 0);
        assert!(
            p.records.as_ref().is_none_or(|r| r.is_empty()),
            "no new data"
        );
    }
}

fn fetch(client: &mut Client, topic: &str, offsets: &mut [i64]) {
    let req = fetch_request(topic, offsets);
    let resp: FetchResponse = client.call(ApiKey::Fetch, FETCH_VERSION, &req);
    assert_eq!(resp.error_code, 0);
    for t in &resp.responses {
        for p in &t.partitions {
            assert_eq!(
                p.error_code, 0,
                "fetch of {}-{} failed",
                topic, p.partition_index
            );
            let records = p.records.as_ref().expect("records");
            assert!(
                !records.is_empty(),
                "{}-{}: no data",
                topic,
                p.partition_index
            );
            offsets[p.partition_index as usize] += i64::from(RECORDS_PER_BATCH);
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn backtrace_bytes() -> u64 {
    env_u64("SLUICE_ALLOC_BACKTRACE_BYTES").unwrap_or(0)
}

#[derive(Debug)]
struct Row {
    api: &'static str,
    partitions: i32,
    requests: u32,
    delta: Snapshot,
    micros_per_request: f64,
}

fn measure(
    api: &'static str,
    partitions: i32,
    warmup: u32,
    requests: u32,
    mut one: impl FnMut(),
) -> Row {
    for _ in 0..warmup {
        one();
    }
    let before = snapshot();
    let started = Instant::now();
    if backtrace_bytes() > 0 {
        eprintln!("=== measuring {api} at {partitions} partitions");
    }
    BACKTRACE_BYTES.store(backtrace_bytes(), Ordering::Relaxed);
    for _ in 0..requests {
        one();
    }
    BACKTRACE_BYTES.store(0, Ordering::Relaxed);
    let elapsed = started.elapsed();
    let after = snapshot();
    let mut delta = Snapshot::default();
    for i in 0..ROLES {
        delta.allocs[i] = after.allocs[i] - before.allocs[i];
        delta.bytes[i] = after.bytes[i] - before.bytes[i];
    }
    Row {
        api,
        partitions,
        requests,
        delta,
        micros_per_request: elapsed.as_secs_f64() * 1e6 / f64::from(requests),
    }
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| request | partitions | allocs/req | bytes/req | workers allocs | workers bytes | blocking allocs | blocking bytes | log threads allocs | log threads bytes | µs/req |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        let n = f64::from(r.requests);
        let per = |v: u64| v as f64 / n;
        let broker = [Role::Worker, Role::Blocking, Role::Other];
        let allocs: u64 = broker.iter().map(|&x| r.delta.allocs[x as usize]).sum();
        let bytes: u64 = broker.iter().map(|&x| r.delta.bytes[x as usize]).sum();
        print!(
            "| {} | {} | {:.1} | {:.0} |",
            r.api,
            r.partitions,
            per(allocs),
            per(bytes)
        );
        for x in broker {
            print!(
                " {:.1} | {:.0} |",
                per(r.delta.allocs[x as usize]),
                per(r.delta.bytes[x as usize])
            );
        }
        println!(" {:.0} |", r.micros_per_request);
    }
    println!();
}

// Runs in the test command (a few seconds), so the gates below hold on every commit: with
// the buffered journal (fetches sent from the page cache with sendfile) and with the journal
// written by direct I/O (fetches of fresh records sent from its in-memory tail). One test,
// the modes in turn: the counting allocator is process-wide.
#[test]
fn allocations_per_request() {
    for journal_direct_io in [false, true] {
        println!("journal written with direct I/O: {journal_direct_io}");
        allocations_per_request_in(journal_direct_io);
    }
}

fn allocations_per_request_in(journal_direct_io: bool) {
    set_role(Role::Client);
    let dir = tempfile::Builder::new()
        .prefix("alloc-per-request-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sluice-net")
        // Every runtime thread starts as blocking; workers re-label themselves when they
        // first park (which they do before running any request), blocking threads never park.
        .on_thread_start(|| set_role(Role::Blocking))
        .on_thread_park(|| set_role(Role::Worker))
        .build()
        .expect("runtime");
    let config = BrokerConfig {
        listen: "127.0.0.1:0".into(),
        data_dir: dir.path().join("data"),
        journal_direct_io,
        ..BrokerConfig::default()
    };
    let server = runtime
        .block_on(Server::bind(config))
        .expect("broker starts");
    let addr = server.local_addr().expect("bound");
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let served = runtime.spawn(server.run(async {
        let _ = stop_rx.await;
    }));
    let mut client = Client::connect(addr);

    let mut create = CreateTopicsRequest::default();
    create.timeout_ms = 30_000;
    for (partitions, _, _) in SHAPES {
        let mut t = CreatableTopic::default();
        t.name = topic_name(&format!("alloc-{partitions}"));
        t.num_partitions = partitions;
        t.replication_factor = 1;
        create.topics.push(t);
    }
    let created: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 5, &create);
    for t in &created.topics {
        assert_eq!(t.error_code, 0, "create {:?}", t.name);
    }
    let mut init = InitProducerIdRequest::default();
    init.transactional_id = None;
    init.transaction_timeout_ms = 60_000;
    init.producer_id = (-1).into();
    init.producer_epoch = -1;
    let init: InitProducerIdResponse = client.call(ApiKey::InitProducerId, 4, &init);
    assert_eq!(init.error_code, 0);

    let mut rows = Vec::new();
    for (partitions, warmup, requests) in SHAPES {
        let requests = env_u64("SLUICE_ALLOC_REQUESTS").map_or(requests, |n| n as u32);
        let topic = format!("alloc-{partitions}");
        let mut producer = Producer {
            id: init.producer_id.0,
            epoch: init.producer_epoch,
            sequences: vec![0; partitions as usize],
        };
        rows.push(measure("Produce", partitions, warmup, requests, || {
            produce(&mut client, &topic, &mut producer)
        }));
        let mut offsets = vec![0i64; partitions as usize];
        rows.push(measure("Fetch", partitions, warmup, requests, || {
            fetch(&mut client, &topic, &mut offsets)
        }));
        rows.push(measure("Fetch, long poll", partitions, 10, 100, || {
            fetch_empty(&mut client, &topic, &offsets)
        }));
    }
    print_table(&rows);
    for r in rows.iter().filter(|r| r.api == "Produce") {
        // The produce side's gate: on the async workers, none: the frame's buffer, the
        // decode, the append group and the response are reused.
        let per_request = r.delta.allocs[Role::Worker as usize] as f64 / f64::from(r.requests);
        let bound = PRODUCE_WORKER_ALLOCS_MAX;
        assert!(
            per_request <= bound,
            "Produce at {} partitions (direct I/O {journal_direct_io}): {per_request:.1} worker allocations per request, more than {bound}",
            r.partitions
        );
    }

    for r in rows.iter().filter(|r| r.api.starts_with("Fetch")) {
        // The fetch side's gate: the decode, the read job, the wake-ups and the response
        // frame are reused, and the read runs on a kept thread, not a spawned task.
        // Workers and the blocking pool; the reader threads count as log threads, whose
        // column also takes a checkpoint that happens to run in the window, so it is shown
        // in the table but not gated.
        let request_allocs =
            r.delta.allocs[Role::Worker as usize] + r.delta.allocs[Role::Blocking as usize];
        let per_request = request_allocs as f64 / f64::from(r.requests);
        assert!(
            per_request <= FETCH_ALLOCS_MAX,
            "{} at {} partitions (direct I/O {journal_direct_io}): {per_request:.1} worker allocations per request, more than {FETCH_ALLOCS_MAX}",
            r.api,
            r.partitions
        );
    }

    drop(client);
    let _ = stop_tx.send(());
    runtime
        .block_on(served)
        .expect("server task")
        .expect("clean shutdown");
}
