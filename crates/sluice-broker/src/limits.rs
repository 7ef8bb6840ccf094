//! Every limit the broker enforces, in one place. Per-topic limits (max.message.bytes,
//! segment sizes) are topic configs; these are the process-wide bounds.

/// Largest request frame accepted (`socket.request.max.bytes`, Kafka's default 100 MiB).
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 100 * 1024 * 1024;
/// Bytes of requests buffered or being handled across all connections
/// (`queued.max.request.bytes`). A frame reserves its size before its body is read and frees
/// it when its response is written, so memory for requests stays bounded however many
/// connections send large requests at once.
pub const QUEUED_REQUEST_BYTES_MAX_DEFAULT: usize = 512 * 1024 * 1024;
/// Unit of the request-memory budget (semaphore permits are counted in KiB).
pub const REQUEST_MEMORY_UNIT_BYTES: usize = 1024;
/// Once a frame's size prefix has arrived, its body must arrive within this time or the
/// connection is closed. Without it, stalled partial frames could hold the request-memory
/// budget forever and block every other client.
pub const FRAME_READ_TIMEOUT_MS: u64 = 30_000;
/// Concurrent client connections (`max.connections`); connections beyond it are closed at once.
pub const CONNECTIONS_MAX_DEFAULT: usize = 4096;
/// Requests read from one connection whose responses are not yet written. When reached, the
/// broker stops reading from that socket until a response goes out (TCP pushes back).
pub const IN_FLIGHT_PER_CONNECTION_MAX: usize = 64;
/// The longest a fetch may long-poll, whatever the client asks for.
pub const FETCH_WAIT_MS_MAX: i32 = 30_000;
/// Partitions one topic may have.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;
/// Partitions in the whole broker.
pub const PARTITIONS_TOTAL_MAX: usize = 100_000;
/// Topic name length (Kafka's limit).
pub const TOPIC_NAME_BYTES_MAX: usize = 249;
/// File descriptors kept back from segment files for everything else: the listener, the
/// journal and its recycled files, checkpoint, index, snapshot and metadata writes, and
/// runtime internals. Client connections (`max.connections`) are reserved on top, so the
/// segment-file budget is `RLIMIT_NOFILE - max.connections - this`.
pub const FILE_DESCRIPTORS_RESERVED: u64 = 256;
/// The segment-file budget never goes below this (the broker's own partitions need a
/// few); when the descriptor limit is too low for it, connections pay.
pub const SEGMENT_FILES_MIN: u64 = 64;

/// How long shutdown waits for in-flight requests before closing connections anyway.
pub const SHUTDOWN_DRAIN_MS_MAX: u64 = 10_000;
/// Read buffer growth step per connection.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

const _: () = assert!(
    IN_FLIGHT_PER_CONNECTION_MAX >= 5,
    "producers pipeline at least 5 requests"
);
const _: () = assert!(REQUEST_BYTES_MAX_DEFAULT <= QUEUED_REQUEST_BYTES_MAX_DEFAULT);
const _: () = assert!(PARTITIONS_PER_TOPIC_MAX as usize <= PARTITIONS_TOTAL_MAX);

// ---- group coordinator (see `groups`) ----

/// Segment size of the internal `__consumer_offsets` partition: small, so that moving its
/// log start offset after a snapshot frees disk soon.
pub const OFFSETS_SEGMENT_BYTES: u64 = 16 * 1024 * 1024;
/// Largest batch the offsets partition accepts (one group's metadata must fit in it).
pub const OFFSETS_BATCH_BYTES_MAX: usize = 16 * 1024 * 1024;
/// Batches written to the offsets partition are cut at about this size.
pub const OFFSETS_BATCH_BYTES_SOFT: usize = 1024 * 1024;
/// Bytes read per step when replaying the offsets partition at start.
pub const OFFSETS_LOAD_READ_BYTES: u32 = 4 * 1024 * 1024;
/// The offsets partition is snapshotted once it holds more than this many records and more
/// than twice the live state.
pub const OFFSETS_COMPACT_RECORDS_MIN: u64 = 50_000;
/// Jobs (commits, group changes) the offsets writer appends in one request.
pub const GROUP_WRITE_JOBS_PER_ROUND_MAX: usize = 1024;
/// The group timer re-checks deadlines at least this often.
pub const GROUP_TIMER_INTERVAL_MS_MAX: i64 = 1_000;
