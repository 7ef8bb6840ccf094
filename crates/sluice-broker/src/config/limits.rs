//! Every limit the broker enforces, in one place. Per-topic limits (max.message.bytes,
//! segment sizes) are topic configs; these are the process-wide bounds.

/// Largest request frame accepted (`socket.request.max.bytes`, Kafka's default 100 MiB).
pub const REQUEST_BYTES_MAX_DEFAULT: usize = 100 * 1024 * 1024;
/// Bytes of requests and fetch responses held across all connections
/// (`queued.max.request.bytes`; see `memory`). Request bytes are reserved as they arrive
/// (beyond each connection's first [`READ_CHUNK_BYTES`]) and freed when the response is
/// written; a fetch reserves its response before reading and holds it until it is written.
pub const QUEUED_REQUEST_BYTES_MAX_DEFAULT: usize = 512 * 1024 * 1024;
/// Unit of the request-memory budget (semaphore permits are counted in KiB).
pub const REQUEST_MEMORY_UNIT_BYTES: usize = 1024;
/// Once a frame's size prefix has arrived, its body must arrive within this time or the
/// connection is closed. Without it, stalled partial frames could hold the request-memory
/// budget forever and block every other client.
pub const FRAME_READ_TIMEOUT_MS: u64 = 30_000;
/// Concurrent client connections (`max.connections`); connections beyond it are closed at once.
pub const CONNECTIONS_MAX_DEFAULT: usize = 4096;
/// Concurrent connections from one IP address (`max.connections.per.ip`). Kafka's default is
/// unlimited; ours is a quarter of [`CONNECTIONS_MAX_DEFAULT`], so at the defaults one host
/// (4,100 idle connections was enough before) cannot take every slot and lock every other
/// client out. Hosts that need more get `max.connections.per.ip.overrides`.
pub const CONNECTIONS_PER_IP_MAX_DEFAULT: usize = CONNECTIONS_MAX_DEFAULT / 4;
/// A connection with no bytes received and no response owed for this long is closed
/// (`connections.max.idle.ms`, Kafka's default 10 minutes), so idle sockets cannot hold
/// `max.connections` slots forever.
pub const CONNECTIONS_IDLE_MS_DEFAULT: u64 = 600_000;
/// Largest fetch response (`fetch.max.bytes`, Kafka's default 55 MiB). A request's own
/// `max_bytes` only lowers it; zero or negative means this cap.
pub const FETCH_MAX_BYTES_DEFAULT: usize = 55 * 1024 * 1024;
/// Smallest `fetch.max.bytes` accepted (Kafka's lower bound).
pub const FETCH_MAX_BYTES_MIN: usize = 1024;
/// A fetch reads at most 1/this of the request-memory budget (and is charged twice that, for
/// the records and their encoded copy), so its charge can be granted even while other
/// requests, its own included, hold part of the budget.
pub const FETCH_READ_BUDGET_DIVISOR: usize = 4;
/// How long a fetch with data waits for response memory at least, even when its own
/// `max_wait_ms` is shorter; after its wait it answers without records (the client simply
/// fetches again). The wait is bounded so fetches pipelined on one connection, whose
/// responses go out in order, cannot hold the budget against each other forever.
pub const FETCH_MEMORY_WAIT_MS_MIN: u64 = 500;
/// Requests read from one connection whose responses are not yet written. When reached, the
/// broker stops reading from that socket until a response goes out (TCP pushes back).
pub const IN_FLIGHT_PER_CONNECTION_MAX: usize = 64;
/// The longest a fetch may long-poll, whatever the client asks for.
pub const FETCH_WAIT_MS_MAX: i32 = 30_000;
/// Lines a client can cause at will (malformed frames, refused connections, failed
/// logins, a full producer table, ...) are written at most once per this interval per kind,
/// with the count left out since the last one (`log_limit`): a flood of bad input must not
/// turn into a flood of log lines.
pub const LOG_LINE_INTERVAL_MS: u64 = 10_000;
/// Bytes of a journal file range read into memory at a time when a response is written
/// through the copy path (a writer that cannot `sendfile`, e.g. TLS): bounds the buffer
/// each such write holds beyond the response's charge.
pub const FILE_CHUNK_COPY_BYTES: usize = 256 * 1024;

/// Partitions one topic may have.
pub const PARTITIONS_PER_TOPIC_MAX: i32 = 10_000;
/// Partitions in the whole broker.
pub const PARTITIONS_TOTAL_MAX: usize = 100_000;
/// Partitions one DescribeTopicPartitions response describes at most; the client pages
/// through the rest with the response's cursor. Kafka's `max.request.partition.size.limit`
/// default.
pub const DESCRIBE_TOPIC_PARTITIONS_MAX: i32 = 2_000;
/// Partition entries one Produce request may list: as many as the broker can have. A
/// request listing more is malformed (no client sends one); the bound keeps the decoded
/// request's memory proportional to something other than the frame size.
pub const PRODUCE_PARTITION_ENTRIES_MAX: usize = PARTITIONS_TOTAL_MAX;
/// Partition entries (and, separately, topic entries) one Fetch request may list, for the
/// same reason: a consumer fetching every partition of the broker stays within it, and the
/// decoded request's memory stays proportional to it, not to the frame size.
pub const FETCH_PARTITION_ENTRIES_MAX: usize = PARTITIONS_TOTAL_MAX;
/// Produce calls (decoded request, response layout, encode buffer) a connection keeps for
/// reuse once their responses are written.
pub const PRODUCE_CALLS_KEPT_PER_CONNECTION: usize = 8;
/// Entries a kept call's vectors (decoded request, resolved partitions, response chunks) may
/// keep room for between requests; one that grew past it is given back, so one huge request
/// does not leave a connection holding its memory.
pub const CALL_ENTRIES_KEPT_MAX: usize = 1024;
/// Framing bytes a kept fetch response frame may keep room for between responses.
pub const FRAME_BYTES_KEPT_MAX: usize = 64 * 1024;
/// Fetch calls (decoded request, read job, response frame) a connection keeps for reuse.
/// Clients keep one fetch in flight per broker; a second covers a pipelined one.
pub const FETCH_CALLS_KEPT_PER_CONNECTION: usize = 2;
/// Threads that read fetches' batch headers from the journal files (`handlers::fetch::read`).
/// Reads are mostly page-cache hits; more than one keeps a cold read of old data from
/// stalling every other consumer.
pub const FETCH_READ_THREADS: usize = 4;
/// Fetch reads queued for the reader threads; beyond it, reads go to tokio's blocking pool.
pub const FETCH_READ_QUEUE_MAX: usize = 1024;
/// File ranges of a fetch at least this long are checked for being in the page cache on the
/// reader thread, and read in there if not, so the worker's `sendfile` does not wait for the
/// disk. Shorter ones (tailing consumers: fresh, cached data) skip the check's system call.
pub const FETCH_RESIDENT_CHECK_BYTES_MIN: usize = 64 * 1024;
/// A range found not cached is read in together with the journal bytes after it, up to this
/// far from its start: one long device request instead of one per partition's batch
/// (`RecordSlice::make_resident`). The virtual disk here takes requests up to 4 MiB.
pub const FETCH_READ_AHEAD_BYTES: u64 = 4 * 1024 * 1024;
/// After answering a fetch that read long file ranges (a consumer catching up), its reader
/// thread reads this much of the journal after the furthest of them into the page cache, so
/// the consumer's next fetch finds it there: about one 12-partition fetch's worth.
pub const FETCH_NEXT_READ_AHEAD_BYTES: u64 = 16 * 1024 * 1024;
/// The read-ahead after a fetch waits until at least this much of its span is missing from
/// the page cache, then reads all that is missing: a consumer of one partition advances
/// 1 MiB per fetch, and reading each new MiB on its own cost more CPU per byte.
pub const FETCH_NEXT_READ_AHEAD_STEP_BYTES: u64 = 4 * 1024 * 1024;
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
/// The share of the segment-file budget one topic may hold
/// (`sluice.segment.files.per.topic.percent`): four topics at least must fill it, and a
/// topic at its share leaves three quarters for the others' rolls and new partitions.
pub const SEGMENT_FILES_PER_TOPIC_PERCENT_DEFAULT: u64 = 25;

/// How long shutdown waits for in-flight requests before closing connections anyway.
pub const SHUTDOWN_DRAIN_MS_MAX: u64 = 10_000;
/// Bytes read from a socket at a time, and the part of each connection's read buffer that is
/// not charged to the request-memory budget (bounded by `max.connections` instead). A frame
/// larger than this gets a buffer of its own, which leaves with the frame and is reused for
/// a later big frame within the `FRAME_BUFFER*_KEPT_*` bounds below.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Big-frame buffers (see `frame_buffers`) one connection keeps for reuse: enough for a
/// producer's usual pipeline of big requests.
pub const FRAME_BUFFERS_KEPT_PER_CONNECTION: usize = 5;
/// Largest big-frame buffer a connection keeps (a bigger frame's buffer is freed with it).
/// Covers a Java producer's `max.request.size` (1 MiB) with room to spare.
pub const FRAME_BUFFER_KEPT_BYTES_MAX: usize = 4 << 20;
/// Big-frame buffer bytes all connections together keep; part of the memory bound.
pub const FRAME_BUFFERS_KEPT_BYTES_TOTAL_MAX: usize = 32 << 20;
/// Least room a connection reads into before it reuses or replaces its read chunk: less
/// would mean many tiny reads at the end of a chunk.
pub const READ_ROOM_MIN_BYTES: usize = 4 * 1024;
/// A plaintext connection waiting for the rest of a frame at least this big asks the kernel
/// to wake it only once that rest has arrived (`SO_RCVLOWAT`), instead of once per TCP
/// segment burst: a 1 MiB produce request then costs one or two wake-ups, not a dozen.
pub const RECV_LOW_WATER_MIN_BYTES: usize = 128 * 1024;
/// The most a connection asks to wait for at once. Linux caps it too (half of
/// `net.ipv4.tcp_rmem`'s maximum) and wakes the reader early under memory pressure or when
/// the receive window is full, so the mark never stalls a transfer.
pub const RECV_LOW_WATER_MAX_BYTES: usize = 1 << 20;

const _: () = assert!(
    IN_FLIGHT_PER_CONNECTION_MAX >= 5,
    "producers pipeline at least 5 requests"
);
const _: () = assert!(REQUEST_BYTES_MAX_DEFAULT <= QUEUED_REQUEST_BYTES_MAX_DEFAULT);
const _: () = assert!(CONNECTIONS_PER_IP_MAX_DEFAULT < CONNECTIONS_MAX_DEFAULT);
const _: () = assert!(
    FETCH_MAX_BYTES_DEFAULT * FETCH_READ_BUDGET_DIVISOR <= QUEUED_REQUEST_BYTES_MAX_DEFAULT,
    "by default the budget does not lower fetch.max.bytes"
);
const _: () = assert!(FETCH_READ_BUDGET_DIVISOR > 2);
const _: () = assert!(READ_CHUNK_BYTES.is_multiple_of(REQUEST_MEMORY_UNIT_BYTES));
const _: () = assert!(RECV_LOW_WATER_MIN_BYTES > READ_CHUNK_BYTES);
const _: () = assert!(RECV_LOW_WATER_MIN_BYTES <= RECV_LOW_WATER_MAX_BYTES);
const _: () = assert!(PARTITIONS_PER_TOPIC_MAX as usize <= PARTITIONS_TOTAL_MAX);

// ---- record validation (see `record_validation`) ----

/// Most bytes one record batch may decompress to. The walk stops one byte past it, so a
/// decompression bomb costs at most this much CPU and no memory beyond the walk's fixed
/// buffers. Kafka has no such cap; legitimate batches (batch.size at most a few MiB before
/// compression) stay far below it. Refused with MESSAGE_TOO_LARGE.
pub const RECORD_BATCH_DECOMPRESSED_BYTES_MAX: usize = 64 * 1024 * 1024;
/// Largest zstd window (log2 bytes) a batch may ask for; the decoder allocates the window.
/// 2^23 = 8 MiB covers every level up to 19 as Java and librdkafka write them (level 3, the
/// default, needs 2^21); levels 20-22 ("ultra") are refused as INVALID_RECORD.
pub const ZSTD_WINDOW_LOG_MAX: u32 = 23;
/// Compressed batches walked at once across the broker (produce validation and ListOffsets
/// by time). Each walk holds a zstd window or a raw snappy output, so this bounds the memory
/// of decompression to about `DECOMPRESSIONS_CONCURRENT_MAX` * 64 MiB in the worst case
/// (raw snappy of a very large batch), 8 MiB each for zstd, under 100 KiB for gzip and lz4.
pub const DECOMPRESSIONS_CONCURRENT_MAX: usize = 4;
/// Uncompressed records up to this size per partition are walked on the async worker (a
/// framing walk of well under a millisecond); larger ones go to the blocking pool.
pub const RECORDS_INLINE_WALK_BYTES_MAX: usize = 256 * 1024;
/// Records named in one partition's Produce `record_errors` (keyless records refused by a
/// compacted topic). Kafka names every one; a batch of a million keyless records would make
/// a response of tens of megabytes, so the list stops here (the error message says how many
/// there were).
pub const PRODUCE_RECORD_ERRORS_MAX: usize = 1000;

const _: () = assert!(DECOMPRESSIONS_CONCURRENT_MAX >= 1);
const _: () = assert!(ZSTD_WINDOW_LOG_MAX >= 21, "zstd's default level needs 2^21");

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

// ---- admin listener and metrics (see `net::admin`, `net::scrape`, `metrics`) ----

/// Admin (metrics, readiness) connections served at once; more are closed at accept. A
/// scraper and a probe or two need no more, and the Kafka listener never competes with more.
pub const ADMIN_CONNECTIONS_MAX: usize = 4;
/// Largest admin request head (request line and headers); larger ones get 431 and a close.
pub const ADMIN_REQUEST_BYTES_MAX: usize = 8 * 1024;
/// An admin request head must arrive within this, or the connection is closed.
pub const ADMIN_READ_TIMEOUT_MS: u64 = 5_000;
/// An admin response must be written within this, or the connection is closed.
pub const ADMIN_WRITE_TIMEOUT_MS: u64 = 10_000;
/// Series per scrape for each per-group family (`sluice_group_members`, and
/// `sluice_group_lag` across all groups); beyond it series are left out and
/// `sluice_group_series_truncated` is 1. Bounds the scrape's size and its time under the
/// coordinator's lock (taken once per group).
pub const METRICS_GROUP_SERIES_MAX: usize = 10_000;

/// Most log cleaner threads (`log.cleaner.threads`); more only contend for the same disk.
pub const LOG_CLEANER_THREADS_MAX: usize = 16;
/// Smallest `log.cleaner.dedupe.buffer.size` per cleaner thread: a key map that holds
/// fewer keys than a small segment has records cleans nothing.
pub const LOG_CLEANER_DEDUPE_BYTES_PER_THREAD_MIN: u64 = 1024 * 1024;

const _: () = assert!(ADMIN_CONNECTIONS_MAX >= 2, "a scraper and a probe at once");

/// Default segment size of `__transaction_state-0` (`transaction.state.log.segment.bytes`;
/// Kafka's is 100 MiB; the partition holds small records and is kept short,
/// docs/transactions.md §2).
pub const TXN_STATE_SEGMENT_BYTES_DEFAULT: u64 = 16 << 20;

/// Default of `transaction.abort.timed.out.transaction.cleanup.interval.ms` (Kafka's): how
/// often timed-out transactions are aborted and unfinished completions retried.
pub const TXN_ABORT_CLEANUP_INTERVAL_MS_DEFAULT: u64 = 10_000;
/// Default of `transaction.remove.expired.transaction.cleanup.interval.ms` (Kafka's): how
/// often idle transactional ids are expired.
pub const TXN_REMOVE_EXPIRED_CLEANUP_INTERVAL_MS_DEFAULT: u64 = 3_600_000;
/// The most a ListTransactions v2 transactional id pattern may compile to (as the KIP-848
/// subscription patterns are bounded by `consumer_regex_compiled_bytes_max`); beyond it the
/// request gets INVALID_REGULAR_EXPRESSION.
pub const TXN_ID_REGEX_COMPILED_BYTES_MAX: usize = 256 * 1024;
/// The most producers one DescribeProducers response lists (about 40 bytes each); the
/// partitions past it get UNKNOWN_SERVER_ERROR with a message to ask for fewer at once.
pub const DESCRIBE_PRODUCERS_ENTRIES_MAX: usize = 100_000;

// Security (listeners, TLS, SASL).

/// `sasl.server.max.receive.size` default (Kafka's): the largest frame a SASL listener takes
/// before the client has authenticated, so an anonymous client cannot make the broker buffer
/// `socket.request.max.bytes`.
pub const SASL_SERVER_MAX_RECEIVE_BYTES_DEFAULT: usize = 512 * 1024;
/// A TLS handshake (or a SASL exchange's time to the first frame) must finish within this.
pub const TLS_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// How often the key and trust store files are checked for changes (reloaded when they
/// change, without a restart).
pub const TLS_RELOAD_CHECK_MS: u64 = 5_000;
/// SCRAM iterations accepted from AlterUserScramCredentials (Kafka's bounds).
pub const SCRAM_ITERATIONS_MIN: i32 = 4096;
pub const SCRAM_ITERATIONS_MAX: i32 = 16_384;
/// Longest SCRAM user name, and most SCRAM users kept (each costs a few hundred bytes).
pub const SCRAM_USER_NAME_BYTES_MAX: usize = 1024;
pub const SCRAM_USERS_MAX: usize = 100_000;
/// Most delegation tokens kept (`delegation_tokens`): a renewal or expiry finds its token
/// by comparing HMACs with every token, and DescribeDelegationToken may list them all.
pub const DELEGATION_TOKENS_MAX: usize = 10_000;
/// Most renewers of one token, and the longest principal name (owner or renewer) a token
/// request may name: Kafka sets no bound, each is kept in memory and in the file.
pub const DELEGATION_TOKEN_RENEWERS_MAX: usize = 100;
pub const DELEGATION_TOKEN_PRINCIPAL_BYTES_MAX: usize = 1024;
/// Most ACLs kept (`acl`): each check walks them all, so this bounds a check's work too.
pub const ACLS_MAX: usize = 10_000;

/// Client quotas (`quotas`): the burst a byte-rate bucket holds (this long at its rate), the
/// longest throttle time answered (Kafka's bound: its quota window, 11 samples of 1 s), most
/// quota entities kept and their names' length, and most buckets (one per user or client id
/// a quota applies to) tracked before idle ones are forgotten.
pub const QUOTA_BURST_MS: u64 = 1_000;
pub const QUOTA_THROTTLE_MS_MAX: u64 = 11_000;
pub const QUOTA_ENTITIES_MAX: usize = 10_000;
pub const QUOTA_ENTITY_NAME_BYTES_MAX: usize = 1024;
pub const QUOTA_BUCKETS_MAX: usize = 100_000;

/// Producer ids InitProducerId hands out to one client address per
/// [`PRODUCER_IDS_PER_IP_WINDOW_MS_DEFAULT`] (`sluice.producer.ids.per.ip.max`): a tenth
/// of a partition's producer table (`producer_ids_per_partition_max`, 10,000), so one
/// address cannot fill a table within the eviction window (a bucket of 1,000 refilled
/// over the window gives at most 2,000 in any 10 minutes).
pub const PRODUCER_IDS_PER_IP_MAX_DEFAULT: u64 = 1_000;
/// The window of [`PRODUCER_IDS_PER_IP_MAX_DEFAULT`]: the default eviction window
/// (`sluice.producer.eviction.idle.ms`).
pub const PRODUCER_IDS_PER_IP_WINDOW_MS_DEFAULT: u64 = 600_000;
/// Client addresses whose producer-id buckets are kept; beyond it full (idle) buckets are
/// forgotten, and new addresses then share one bucket until some are.
pub const PRODUCER_ID_ADDRESSES_MAX: usize = 100_000;
/// Longest SASL token (client message) accepted in one SaslAuthenticate.
pub const SASL_TOKEN_BYTES_MAX: usize = 64 * 1024;
/// Partition verifications of one AddPartitionsToTxn / AddOffsetsToTxn queued on the log
/// before the service waits for them (`txns::verify`): they share commit rounds instead of
/// waiting for one round each, and a request naming very many partitions holds at most
/// this many waiters at a time.
pub const TXN_VERIFY_IN_FLIGHT_MAX: usize = 1024;

// ---- segment sizes ----

/// Smallest `segment.bytes` (and `log.segment.bytes`) accepted: Kafka 4.x's, 1 MiB. Each
/// segment holds a file open out of the process-wide segment-file budget, so a floor this
/// size makes filling the budget with one topic's rolls take gigabytes of writes (it took
/// seconds at 1 KiB: issue 32).
pub const SEGMENT_BYTES_MIN: i64 = 1024 * 1024;
/// Smallest segment size the log is ever given: `internal.segment.bytes` (tests only) and
/// `segment.bytes` values stored by an older Sluice, which allowed down to this.
pub const SEGMENT_BYTES_FLOOR: i64 = 1024;
