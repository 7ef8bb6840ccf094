//! Every limit and fixed timing of `sluice-bench`, in one place. Flags are range-checked against
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
/// Message size bounds. The lower bound is the bench header (`payload::HEADER_BYTES`, which
/// asserts it is this size), so every message carries its sequence number and timestamps.
pub const MIN_MESSAGE_BYTES: usize = 40;
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// txmeta payload: entries per record (each 301 bytes).
pub const MAX_ENTRIES_PER_RECORD: u32 = 50_000;
/// linger.ms accepted in a scenario (librdkafka's own maximum).
pub const MAX_LINGER_MS: u32 = 900_000;
/// Runs one sweep may expand to (the product of its value lists, times a preset's variants).
pub const MAX_SWEEP_RUNS: usize = 64;
/// Values one sweep key may list.
pub const MAX_SWEEP_VALUES: usize = 64;
/// Names of scenarios (a file's `name`, which becomes the report's `scenario.preset`).
pub const MAX_NAME_BYTES: usize = 100;
/// --replication-factor of the bench's topics (Kafka's own bound is the broker count; this only
/// refuses nonsense before a request is sent).
pub const MAX_REPLICATION_FACTOR: i16 = 32;
/// --topic-config entries per run, and the bytes of one value.
pub const MAX_TOPIC_CONFIGS: usize = 64;
pub const MAX_TOPIC_CONFIG_VALUE_BYTES: usize = 4096;
/// Client settings (`-X`, `--client-config`, a scenario's `client_config`) per run, the bytes
/// of one value (an inline PEM chain fits), and the largest properties file read.
pub const MAX_CLIENT_CONFIGS: usize = 128;
pub const MAX_CLIENT_CONFIG_VALUE_BYTES: usize = 64 * 1024;
pub const MAX_CLIENT_CONFIG_FILE_BYTES: u64 = 1024 * 1024;
/// Per-partition unavailability (see `availability`): a partition is silent when it had no ack
/// for longer than the grace while another partition had one within the live window and its
/// own rate predicted at least this many acks in the grace; partitions listed in the text.
pub const UNAVAILABLE_GRACE: Duration = Duration::from_secs(2);
pub const UNAVAILABLE_LIVE: Duration = Duration::from_millis(500);
pub const UNAVAILABLE_MIN_EXPECTED_ACKS: u64 = 5;
pub const UNAVAILABLE_ROWS_IN_TEXT: usize = 8;
/// --broker-pid processes sampled per run.
pub const MAX_BROKER_PIDS: usize = 64;
/// The topology snapshot (one Metadata request): connect and answer timeouts, the largest
/// response read, and the bootstrap addresses tried.
pub const TOPOLOGY_TIMEOUT: Duration = Duration::from_secs(5);
pub const MAX_TOPOLOGY_RESPONSE_BYTES: usize = 64 * 1024 * 1024;
/// Partitions shown in the HTML report's topology table (the JSON has them all).
pub const MAX_TOPOLOGY_ROWS_IN_HTML: usize = 96;
/// Topology changes listed per run (the rest are counted).
pub const MAX_TOPOLOGY_CHANGES: usize = 256;
/// Scenario and OMB workload files are small; a bigger one is refused before parsing.
pub const MAX_SCENARIO_FILE_BYTES: u64 = 1024 * 1024;
/// Baseline report for --baseline (a long multi-run set with its time series).
pub const MAX_BASELINE_FILE_BYTES: u64 = 512 * 1024 * 1024;
/// --max-regress upper bound, percent.
pub const MAX_REGRESS_PCT: f64 = 1_000_000.0;
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
/// The first Metadata round trip is retried in steps this long, so an authentication failure
/// reported in between ends the wait early.
pub const METADATA_CHECK_STEP: Duration = Duration::from_millis(500);
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

/// `--calibrate`: the measured window and warmup of the client-ceiling run against the null
/// broker (see `calibrate`). Short: the ceiling is a steady-state rate, reached within a second.
pub const CALIBRATION_DURATION: Duration = Duration::from_secs(3);
pub const CALIBRATION_WARMUP: Duration = Duration::from_secs(1);

/// Keys (`--keys`): distinct keys of a key set.
pub const MAX_KEY_COUNT: u32 = 1_000_000;
/// Max-rate search (`--rate search`): shortest adjustment period, lowest rate the controller
/// sets (a rate of 0 would stop the schedule and with it the search), and how often the
/// controller thread checks for a stop between adjustments.
pub const MIN_SEARCH_PERIOD: Duration = Duration::from_millis(100);
pub const MIN_SEARCH_RATE_MSG_S: f64 = 10.0;
/// OMB's ramping factor bounds: halved on overload down to the minimum, doubled otherwise up
/// to the maximum.
pub const SEARCH_MIN_RAMP_FACTOR: f64 = 0.01;
pub const SEARCH_MAX_RAMP_FACTOR: f64 = 1.0;
/// Search steps kept in the report (a 24 h run at 100 ms periods would be far more).
pub const MAX_SEARCH_STEPS: usize = 10_000;
/// Backlog mode (`--backlog`): largest backlog accepted, how often the build and drain are
/// checked, and OMB's floor of the drain target (messages).
pub const MAX_BACKLOG_BYTES: u64 = 1 << 40;
pub const BACKLOG_POLL: Duration = Duration::from_millis(10);
pub const BACKLOG_DRAIN_FLOOR_MSGS: u64 = 1000;
/// Application batcher: the buffered bytes (size trigger x message size) one producer may hold.
pub const APP_BATCH_MAX_BYTES: u64 = 256 * 1024 * 1024;
pub const MAX_APP_BATCH_MSGS: u32 = 1_000_000;
/// Offline compression table: messages concatenated (SSP's 2000) and the cap on their total
/// bytes (fewer messages when they are large).
pub const OFFLINE_COMPRESSION_SAMPLES: usize = 2000;
pub const OFFLINE_COMPRESSION_MAX_BYTES: usize = 32 * 1024 * 1024;
/// Compression warnings (see `compression::sent_uncompressed` and `compression::ratios_differ`).
/// A run with a codec warns when its wire ratio (`latency_split.wire_compression_ratio`) stays
/// below `WIRE_RATIO_UNCOMPRESSED_MAX` while the offline ratio of its codec is more than
/// `OFFLINE_OVER_WIRE_RATIO_MIN` times the wire ratio, and its batches' records were not
/// smaller than the messages they carried (`compression::batch_ratio` below
/// `BATCH_RATIO_COMPRESSED_MIN`): the client sent its batches uncompressed (librdkafka before
/// 2.11.1 against a broker without Produce v0, or any librdkafka for batches the codec would
/// not shrink), so it did less work than a compressing client would. The batch condition
/// keeps quiet about compressed one-message batches, where each request's own bytes hold the
/// wire ratio near 1 (the baseline's snappy at 500 msg/s: wire 1.07x and records 1.56x,
/// against 0.77x and 0.98x uncompressed); uncompressed records are always larger than their
/// messages (each adds at least 7 bytes of framing). Two runs of a set (two targets of one
/// variant, or repeats of one target) warn when the larger wire ratio is more than
/// `WIRE_RATIO_SPREAD_MAX` times the smaller (10 %): their results are then not like for like.
pub const WIRE_RATIO_UNCOMPRESSED_MAX: f64 = 1.1;
pub const OFFLINE_OVER_WIRE_RATIO_MIN: f64 = 1.5;
pub const BATCH_RATIO_COMPRESSED_MIN: f64 = 1.0;
pub const WIRE_RATIO_SPREAD_MAX: f64 = 1.1;
// A ratio of 1 is no compression: the bounds must lie above it (the batch one at it) to mean
// anything.
const _: () = assert!(WIRE_RATIO_UNCOMPRESSED_MAX > 1.0 && OFFLINE_OVER_WIRE_RATIO_MIN > 1.0);
const _: () = assert!(BATCH_RATIO_COMPRESSED_MIN >= 1.0 && WIRE_RATIO_SPREAD_MAX > 1.0);

/// A/B and repeat statistics: bootstrap resamples per confidence interval, and the fixed seed
/// that makes them reproducible.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;
pub const BOOTSTRAP_SEED: u64 = 0x5eed_b007;
/// Fewer runs than this on either side of an A/B verdict: the verdict says "(weak: n runs)",
/// since a percentile bootstrap of so few values understates the spread.
pub const BOOTSTRAP_SOLID_RUNS: usize = 4;
/// OMB's reporting window, in 1-second intervals.
pub const OMB_WINDOW_INTERVALS: usize = 10;

/// Faults (`--fault-cmd AT:COMMAND`, see `faults`): commands per run, bytes of one command,
/// how long one may run before it is killed, and the output kept of each.
pub const MAX_FAULTS: usize = 16;
pub const MAX_FAULT_CMD_BYTES: usize = 4096;
pub const FAULT_CMD_TIMEOUT: Duration = Duration::from_secs(120);
pub const FAULT_OUTPUT_TAIL_BYTES: usize = 2048;
/// Time to recover after a fault: the baseline is the lower median acked rate and ack p99 of
/// up to this many measured intervals before it; an interval is back when its acked rate is at
/// least the fraction and its p99 at most the factor times the baseline, or the baseline plus
/// the slack when that is more (a 5 ms baseline on a busy machine jitters past 10 ms without
/// anything being wrong).
pub const RECOVERY_BASELINE_INTERVALS: usize = 10;
/// Fewer baseline intervals than this and the baseline is reported as weak; with more, the
/// run's first measured interval (often the warm-up's catch-up) is left out of it.
pub const RECOVERY_MIN_BASELINE_INTERVALS: usize = 3;
pub const RECOVERY_THROUGHPUT_FRACTION: f64 = 0.8;
pub const RECOVERY_P99_FACTOR: f64 = 2.0;
pub const RECOVERY_P99_SLACK_MS: f64 = 20.0;
/// Attribution by send time (see `attribution`): 1-second slots per producer (about 1 KiB
/// each); a longer run counts its remaining records in the last slot. Also bounds the broker
/// metrics ticks and the topology samples kept.
pub const MAX_SENT_SLOTS: usize = 4 * 3600;
/// Topology sampled during the run (one Metadata request over its own connection) this often.
pub const TOPOLOGY_SAMPLE_INTERVAL: Duration = Duration::from_secs(2);
/// Broker metrics (`--broker-metrics URL`): URLs per run, one scrape's connect+read time, its
/// largest answer, and the histogram series kept per scrape.
pub const MAX_BROKER_METRICS_URLS: usize = 16;
pub const METRICS_SCRAPE_TIMEOUT: Duration = Duration::from_millis(800);
pub const MAX_METRICS_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
pub const MAX_METRIC_SERIES: usize = 512;
/// Distinct error kinds (see `vocab::ErrorLog`): messages are grouped by kind (digits
/// masked), delivery and send failures have their own table so reconnect noise can never
/// push the real failure reason out.
pub const MAX_DISTINCT_DELIVERY_ERRORS: usize = 32;
/// Topology changes seen during the run listed in the text summary (the JSON has them all,
/// up to `MAX_TOPOLOGY_CHANGES`).
pub const MAX_TOPOLOGY_CHANGES_IN_TEXT: usize = 24;
/// The same in the HTML report's table.
pub const MAX_TOPOLOGY_CHANGES_IN_HTML: usize = 96;
/// Error kinds with their own line in the per-interval error series (`errors_by_kind`, the CSV
/// and the HTML chart); the rest are summed as "other".
pub const ERROR_KINDS_IN_SERIES: usize = 8;
/// Of those, the kinds with their own line in the HTML chart (its legend holds five lines).
pub const ERROR_KINDS_IN_CHART: usize = 4;
/// Overlaid runs (A/B, sweeps): the same fault of two runs started this close is one marker.
pub const OVERLAY_MARKER_MERGE: Duration = Duration::from_secs(1);
/// The sampler waits this long for the lag thread's reading at each tick (the last tick, after
/// the consumers' final commit, longer); a later reading is dropped and the interval's lag is
/// unknown, so a broker that cannot answer never stretches the 1-second intervals.
pub const LAG_ANSWER_WAIT: Duration = Duration::from_millis(400);
pub const LAG_FINAL_ANSWER_WAIT: Duration = Duration::from_secs(5);
/// The consumers' final synchronous offset commit is awaited this long (librdkafka's own has
/// no timeout: with a dead coordinator it would hold the run forever).
pub const FINAL_COMMIT_TIMEOUT: Duration = Duration::from_secs(5);

/// Transactional mode (`--transactional-id`): the most messages one transaction may hold, and
/// the longest commit interval (Kafka's `transaction.max.timeout.ms` default is 15 min).
pub const MAX_TXN_MESSAGES: u32 = 10_000_000;
pub const MAX_TXN_INTERVAL_MS: u32 = 900_000;
/// `transaction.timeout.ms` of the bench's transactional producers: above the longest commit
/// interval the bench allows by default, below Kafka's `transaction.max.timeout.ms`.
pub const TXN_TIMEOUT_MS: u32 = 60_000;
/// How long one `init_transactions`, `commit_transaction` or `abort_transaction` call may
/// block; past it the call is reported as an error and the producer stops (never hangs).
pub const TXN_CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long each flush call of the flush before EndTxn lasts before the loop checks that
/// every record is acknowledged (see `txn::wait_acknowledged`): short, since a delivery
/// report the producer's own thread serves meanwhile is only seen at the next check, so
/// this is what the transaction's measured end may be padded by.
pub const TXN_FLUSH_POLL: Duration = Duration::from_millis(1);

/// Settling before each run of a comparison (`settle`): the disks must have done no I/O for
/// `SETTLE_IDLE` (checked every `SETTLE_POLL`), and the wait gives up after `SETTLE_MAX`.
pub const SETTLE_IDLE: Duration = Duration::from_millis(1000);
pub const SETTLE_POLL: Duration = Duration::from_millis(100);
pub const SETTLE_MAX: Duration = Duration::from_secs(30);
