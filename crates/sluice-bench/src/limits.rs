//! Every limit and fixed timing of `sluice bench`, in one place. Flags are range-checked against
//! these, queues and tables are sized from them, and every wait in the run is bounded by one.

use std::time::Duration;

/// Producer clients (threads) per run.
pub const MAX_PRODUCERS: u32 = 256;
/// Consumer clients (threads) per run.
pub const MAX_CONSUMERS: u32 = 256;
/// Partitions of the benchmark topic.
pub const MAX_PARTITIONS: i32 = 4096;
/// Topics per run (`--topics`), and topic-partitions over all of them: every per-partition
/// table (positions, time-lag checkpoints, watermark queries) is sized by the latter.
pub const MAX_TOPICS: u32 = 1024;
pub const MAX_TOPIC_PARTITIONS: usize = 4096;
/// Consumer offset auto-commit interval (`commit_interval_ms`), the broker-view lag's floor.
pub const MAX_COMMIT_INTERVAL_MS: u32 = 60_000;
/// Message size bounds. The lower bound is the bench header (see `payload`), so every message
/// carries its sequence number and timestamps.
pub const MIN_MESSAGE_BYTES: usize = crate::payload::HEADER_BYTES;
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// txmeta payload: entries per record (each 301 bytes).
pub const MAX_ENTRIES_PER_RECORD: u32 = 50_000;
/// --repeats of each (variant, target).
pub const MAX_REPEATS: u32 = 100;
/// Aggregate target rate; 0 means unthrottled.
pub const MAX_RATE_MSG_S: u64 = 50_000_000;
/// Longest measured window and warmup accepted on the command line.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Memory for the pre-generated payload bodies of all classes together.
pub const PAYLOAD_POOL_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Distinct bodies per payload class (fewer when the memory cap above binds).
pub const PAYLOAD_POOL_PER_CLASS: usize = 256;

/// librdkafka's per-producer queue bounds (`queue.buffering.max.messages` / `.kbytes`). When the
/// queue is full an open-loop producer retries after `QUEUE_FULL_BACKOFF`; the wait shows up as
/// send delay and in latency-from-intended, never as a dropped message.
pub const PRODUCER_QUEUE_MAX_MESSAGES: u32 = 100_000;
pub const PRODUCER_QUEUE_MAX_KBYTES: u32 = 256 * 1024;
pub const QUEUE_FULL_BACKOFF: Duration = Duration::from_millis(1);
/// Consumer prefetch bound per client (`queued.max.messages.kbytes`).
pub const CONSUMER_QUEUE_MAX_KBYTES: u32 = 64 * 1024;
/// How long one consumer poll blocks; bounds how fast consumer threads notice a stop.
pub const CONSUMER_POLL: Duration = Duration::from_millis(100);
/// Longest single sleep of a paced producer, so it notices a stop promptly.
pub const PRODUCER_MAX_SLEEP: Duration = Duration::from_millis(50);

/// Histograms: microsecond values from 1 µs to one hour, 3 significant digits.
pub const HIST_MAX_US: u64 = 3_600_000_000;
pub const HIST_SIGFIG: u8 = 3;

/// Loss/duplicate audit: highest sequence number tracked per producer (one bit each, so at most
/// 32 MiB per producer per bitset). Messages beyond it are counted but not audited.
pub const AUDIT_MAX_SEQ_PER_PRODUCER: u64 = 1 << 28;

/// librdkafka `statistics.interval.ms` of the producers (the latency split).
pub const CLIENT_STATS_INTERVAL: Duration = Duration::from_secs(1);
/// The time series resolution.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// Watermark query per partition in the lag sampler.
pub const LAG_QUERY_TIMEOUT: Duration = Duration::from_millis(500);
/// Up to this many topic-partitions the lag sampler asks per partition; above, one batched
/// ListOffsets (latest) for all, with its own timeout.
pub const WATERMARK_SINGLE_QUERY_MAX: usize = 64;
pub const LAG_BATCH_QUERY_TIMEOUT: Duration = Duration::from_secs(2);
/// OffsetFetch of the bench group's committed offsets (broker-view lag), once a second.
pub const COMMITTED_QUERY_TIMEOUT: Duration = Duration::from_secs(1);
/// Time lag: delivery-report checkpoints (offset, send time) at least this far apart in send
/// time per topic-partition (the time lag's resolution), at most `TIME_LAG_CHECKPOINTS_TOTAL`
/// over the run's topic-partitions (16 bytes plus map overhead each), and per partition within
/// the two bounds below.
pub const TIME_LAG_CHECKPOINT_SPACING: Duration = Duration::from_millis(1);
pub const TIME_LAG_CHECKPOINTS_TOTAL: usize = 1 << 20;
pub const TIME_LAG_CHECKPOINTS_MIN_PER_PARTITION: usize = 64;
pub const TIME_LAG_CHECKPOINTS_MAX_PER_PARTITION: usize = 65_536;
/// Partitions listed per interval in the JSON per-partition lag (the totals cover all).
pub const MAX_PARTITIONS_IN_SERIES: usize = 64;
/// Lag drain rate and time-to-drain are reported only for a real backlog: a peak of at least
/// this many messages and at least `LAG_BACKLOG_MIN_FACTOR` times the first-quartile lag. Otherwise
/// the ordinary in-flight lag of a healthy run would be reported as a slow "drain" (SSP's
/// "10 msg/s drain" on healthy runs).
pub const LAG_BACKLOG_MIN_PEAK: i64 = 1000;
pub const LAG_BACKLOG_MIN_FACTOR: i64 = 4;
/// Progress lines on a non-terminal stderr: one every this many samples.
pub const PROGRESS_EVERY_N_SAMPLES_NON_TTY: u64 = 5;

/// Reaching a `--bootstrap` address: TCP connect, then a Metadata round trip.
pub const BOOTSTRAP_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(5);
/// Topic create/delete, and waiting until Metadata shows every partition with a leader.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(15);
pub const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(15);
/// Added to the admin timeout per topic-partition created or deleted: brokers create a log
/// (files, often an fsync) per partition; Sluice takes about 15-20 ms each on a small machine.
pub const ADMIN_TIMEOUT_PER_PARTITION: Duration = Duration::from_millis(25);

/// The admin (create, delete) timeout for `topic_partitions` partitions.
pub fn admin_timeout(topic_partitions: usize) -> Duration {
    ADMIN_TIMEOUT + ADMIN_TIMEOUT_PER_PARTITION * topic_partitions.min(MAX_TOPIC_PARTITIONS) as u32
}

/// Embedded broker: wait for its "listening" line, and for a clean exit after SIGTERM.
pub const EMBEDDED_START_TIMEOUT: Duration = Duration::from_secs(15);
pub const EMBEDDED_STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Lines of the embedded broker's log shown when it fails.
pub const EMBEDDED_LOG_TAIL_LINES: usize = 20;

/// End of a run: producer flush, then the consumers drain until everything produced arrived,
/// nothing new arrived for `DRAIN_IDLE`, or `DRAIN_MAX` passed. After Ctrl-C both are short.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(30);
pub const DRAIN_IDLE: Duration = Duration::from_secs(5);
pub const DRAIN_MAX: Duration = Duration::from_secs(60);
pub const INTERRUPTED_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);
pub const INTERRUPTED_DRAIN_MAX: Duration = Duration::from_secs(2);

/// Distinct client error messages kept for the report (each with a count).
pub const MAX_DISTINCT_ERRORS: usize = 32;
