//! The named presets (`--preset`, `bench list`): each a description and the changes it makes
//! to the baseline scenario, or a sweep of variants applied after the command-line flags.
//!
//! Guarantees: every preset's scenario validates (tested), and a sweep's variants always win
//! over the flags for the setting they sweep.

use std::time::Duration;

use crate::payload::PayloadClass;
use crate::scenario::{Acks, Codec, Partitioning, Scenario};
use crate::shaping::AppBatchMode;

/// A named preset: a description and the changes it makes to the baseline.
#[derive(Debug)]
pub struct Preset {
    pub name: &'static str,
    pub about: &'static str,
    apply: fn(&mut Scenario),
    /// A sweep: one run per variant, each applied after the command-line flags so the swept
    /// setting always wins. Empty for a single-run preset.
    pub variants: &'static [Variant],
}

/// One point of a sweep.
#[derive(Debug)]
pub struct Variant {
    pub label: &'static str,
    pub apply: fn(&mut Scenario),
}

macro_rules! variant {
    ($label:expr, |$s:ident| $body:expr) => {
        Variant {
            label: $label,
            apply: |$s: &mut Scenario| $body,
        }
    };
}

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "baseline",
        about: "SSP bench: 10k msg/s, 512 B mixed, 8 producers, 12 partitions, 4 consumers, acks=1, snappy, 30 s + 5 s warmup",
        apply: |_| {},
        variants: &[],
    },
    Preset {
        name: "quick",
        about: "SSP quick smoke: 5k msg/s, 4 producers, 2 consumers, 5 s + 2 s warmup",
        apply: |s| {
            s.rate_msg_s = 5_000;
            s.producers = 4;
            s.consumers = 2;
            s.duration_s = Duration::from_secs(5);
            s.warmup_s = Duration::from_secs(2);
        },
        variants: &[],
    },
    Preset {
        name: "max-rate",
        about: "baseline unthrottled: every producer sends as fast as its client queue takes",
        apply: |s| s.rate_msg_s = 0,
        variants: &[],
    },
    Preset {
        name: "acks-0",
        about: "baseline with acks=0 (fire and forget; ack latency is the client's own)",
        apply: |s| s.acks = Acks::None,
        variants: &[],
    },
    Preset {
        name: "acks-all",
        about: "baseline with acks=all",
        apply: |s| s.acks = Acks::All,
        variants: &[],
    },
    Preset {
        name: "no-linger",
        about: "baseline with linger.ms=0 (latency-first batching)",
        apply: |s| s.linger_ms = 0,
        variants: &[],
    },
    Preset {
        name: "slow-consumer",
        about: "SSP slow-consumer: 8k msg/s json, 12 consumers (one per partition) sleeping 500 µs + 0..200 µs per message, 30 s + 3 s",
        apply: |s| {
            s.rate_msg_s = 8_000;
            s.payload = PayloadClass::Json;
            s.consumers = 12;
            s.consumer_delay_us = Duration::from_micros(500);
            s.consumer_jitter_us = Duration::from_micros(200);
            s.warmup_s = Duration::from_secs(3);
        },
        variants: &[],
    },
    Preset {
        name: "slow-aggr",
        about: "SSP slow-aggr: 10k msg/s json, consumers sleep 4 ms + 0..1 ms (capacity ~2.7k msg/s), 40 s + 3 s",
        apply: slow_aggr,
        variants: &[],
    },
    Preset {
        name: "recovery",
        about: "SSP recovery: 8k msg/s json, consumers sleep 800 µs until 30 s, then 0; 60 s + 3 s",
        apply: |s| {
            s.rate_msg_s = 8_000;
            s.payload = PayloadClass::Json;
            s.consumers = 12;
            s.consumer_delay_us = Duration::from_micros(800);
            s.phase_after_s = Some(Duration::from_secs(30));
            s.duration_s = Duration::from_secs(60);
            s.warmup_s = Duration::from_secs(3);
        },
        variants: &[],
    },
    Preset {
        name: "recovery-aggr",
        about: "SSP recovery-aggr: 10k msg/s json, consumers sleep 3 ms until 30 s (backlog builds), then 0; 80 s + 3 s",
        apply: |s| {
            s.payload = PayloadClass::Json;
            s.consumers = 12;
            s.consumer_delay_us = Duration::from_millis(3);
            s.phase_after_s = Some(Duration::from_secs(30));
            s.duration_s = Duration::from_secs(80);
            s.warmup_s = Duration::from_secs(3);
        },
        variants: &[],
    },
    Preset {
        name: "bursty-light",
        about: "SSP bursty-light: 5k msg/s json with 3 s bursts of 15k every 12 s, 60 s + 3 s",
        apply: |s| bursty(s, 15_000),
        variants: &[],
    },
    Preset {
        name: "bursty-heavy",
        about: "SSP bursty-heavy: 5k msg/s json with 3 s bursts of 30k every 12 s, 60 s + 3 s",
        apply: |s| bursty(s, 30_000),
        variants: &[],
    },
    Preset {
        name: "bursty-overload",
        about: "SSP bursty-overload: bursty-heavy with consumers sleeping 800 µs per message (capacity ~15k msg/s)",
        apply: |s| {
            bursty(s, 30_000);
            s.consumers = 12;
            s.consumer_delay_us = Duration::from_micros(800);
        },
        variants: &[],
    },
    Preset {
        name: "bp-loose",
        about: "SSP bp-on: slow-aggr with backpressure, pause above lag 20000, resume below 5000, poll 200 ms",
        apply: |s| {
            slow_aggr(s);
            bp_loose(s);
        },
        variants: &[],
    },
    Preset {
        name: "bp-tight",
        about: "SSP bp-tight: slow-aggr with backpressure, pause above lag 5000, resume below 1000, poll 100 ms",
        apply: |s| {
            slow_aggr(s);
            bp_tight(s);
        },
        variants: &[],
    },
    Preset {
        name: "backpressure",
        about: "SSP's headline comparison: slow-aggr without backpressure, then bp-loose and bp-tight settings, one table",
        apply: slow_aggr,
        variants: &[
            variant!("bp-off", |s| s.bp_max_lag = 0),
            variant!("bp-loose", |s| bp_loose(s)),
            variant!("bp-tight", |s| bp_tight(s)),
        ],
    },
    Preset {
        name: "sparse-fanout",
        about: "teranode T1: 32 partitions fed one 256 B message every 25 ms (batches never fill); linger.ms 1000 vs 10",
        apply: sparse_fanout,
        variants: &[
            variant!("linger-1s", |s| s.linger_ms = 1000),
            variant!("linger-10ms", |s| s.linger_ms = 10),
        ],
    },
    Preset {
        name: "sparse-fanout-stacked",
        about: "teranode T2: the sparse-fanout feed with linger.ms 1000 behind an application batcher of 1000 ms (stacked) vs 10 ms (decoupled), deadline and debounce flushes; gates e.g. 'p50_e2e_intended_ms@stacked-debounce > 1.3 * p50_e2e_intended_ms@decoupled-debounce', 'p50_e2e_intended_ms@decoupled-debounce < 1500' (deadline mode: compare mean_ or p99_)",
        apply: |s| {
            sparse_fanout(s);
            s.linger_ms = 1000;
        },
        variants: &[
            variant!("stacked-deadline", |s| app_batcher(s, 1000, AppBatchMode::Deadline)),
            variant!("decoupled-deadline", |s| app_batcher(s, 10, AppBatchMode::Deadline)),
            variant!("stacked-debounce", |s| app_batcher(s, 1000, AppBatchMode::Debounce)),
            variant!("decoupled-debounce", |s| app_batcher(s, 10, AppBatchMode::Debounce)),
        ],
    },
    Preset {
        name: "max-sustainable",
        about: "OMB max-rate search (producerRate 0): baseline with the target adjusted every 3 s from 10k msg/s (halve the ramp on backlog > 1000, else double it); 30 s + 5 s",
        apply: |s| s.shaping.rate_search = true,
        variants: &[],
    },
    Preset {
        name: "omb-backlog",
        about: "OMB backlog-1-topic-16-partitions-1kb, scaled down: 10k msg/s of 1 KiB, consumers paused until an 8 MiB backlog, then the drain is timed (ratio 1.0); 5 s, no warmup",
        apply: |s| {
            omb_workload(s);
            s.partitions = 16;
            s.duration_s = Duration::from_secs(5);
            s.warmup_s = Duration::ZERO;
            s.shaping.backlog_bytes = 8 << 20;
            s.shaping.backlog_drain_ratio = 1.0;
        },
        variants: &[],
    },
    Preset {
        name: "hot-key",
        about: "keyed skew: baseline with 80% of messages on one key (one hot partition), the rest on 10000 random keys, librdkafka's partitioner",
        apply: |s| {
            s.shaping.keys = crate::shaping::KeyMode::Hot;
            s.shaping.hot_key_pct = 80;
        },
        variants: &[],
    },
    Preset {
        name: "packed",
        about: "teranode T3: txmeta v2 records over 32 partitions (each owns a disjoint key-hash range; consumers parse and count every entry), 100k entries/s as 100-entry records (1000/s) vs 1000-entry records (100/s)",
        apply: |s| {
            s.payload = PayloadClass::Txmeta;
            s.producers = 4;
            s.consumers = 8;
            s.partitions = 32;
            s.compression = Codec::None;
            s.partitioning = Partitioning::RoundRobin;
            s.duration_s = Duration::from_secs(20);
            s.warmup_s = Duration::from_secs(3);
        },
        variants: &[
            variant!("100-entries", |s| {
                s.entries_per_record = 100;
                s.rate_msg_s = 1_000;
            }),
            variant!("1000-entries", |s| {
                s.entries_per_record = 1000;
                s.rate_msg_s = 100;
            }),
        ],
    },
    Preset {
        name: "omb-simple",
        about: "OMB simple-workload: 1 topic, 10 partitions, 1 KiB, 10k msg/s, 1 producer, 1 consumer, 60 s + 10 s (no key)",
        apply: omb_workload,
        variants: &[],
    },
    Preset {
        name: "omb-1-topic-16-partitions-1kb",
        about: "OMB 1-topic-16-partitions-1kb: 16 partitions, 1 KiB, 50k msg/s, 1 producer, 1 consumer, 60 s + 10 s",
        apply: |s| {
            omb_workload(s);
            s.partitions = 16;
            s.rate_msg_s = 50_000;
        },
        variants: &[],
    },
    Preset {
        name: "omb-latency",
        about: "OMB Kafka latency driver settings on the simple workload: acks=all, linger.ms=1, batch.size 128 KiB",
        apply: |s| {
            omb_workload(s);
            s.acks = Acks::All;
            s.linger_ms = 1;
            s.batch_bytes = 131_072;
        },
        variants: &[],
    },
    Preset {
        name: "sweep-compression",
        about: "SSP sweep: 10k msg/s mixed, 20 s + 3 s warmup, codec none, snappy, lz4, zstd, gzip",
        apply: |s| {
            s.duration_s = Duration::from_secs(20);
            s.warmup_s = Duration::from_secs(3);
        },
        variants: &[
            variant!("none", |s| s.compression = Codec::None),
            variant!("snappy", |s| s.compression = Codec::Snappy),
            variant!("lz4", |s| s.compression = Codec::Lz4),
            variant!("zstd", |s| s.compression = Codec::Zstd),
            variant!("gzip", |s| s.compression = Codec::Gzip),
        ],
    },
    Preset {
        name: "sweep-acks",
        about: "SSP sweep: 10k msg/s mixed, 20 s + 3 s warmup, acks 0, 1, all",
        apply: |s| {
            s.duration_s = Duration::from_secs(20);
            s.warmup_s = Duration::from_secs(3);
        },
        variants: &[
            variant!("acks=0", |s| s.acks = Acks::None),
            variant!("acks=1", |s| s.acks = Acks::Leader),
            variant!("acks=all", |s| s.acks = Acks::All),
        ],
    },
    Preset {
        name: "sweep-payload",
        about: "SSP sweep: 8k msg/s zstd, 15 s + 2 s warmup, payload random, mixed, json, logline, text, zeros",
        apply: |s| {
            s.rate_msg_s = 8_000;
            s.compression = Codec::Zstd;
            s.duration_s = Duration::from_secs(15);
            s.warmup_s = Duration::from_secs(2);
        },
        variants: &[
            variant!("random", |s| s.payload = PayloadClass::Random),
            variant!("mixed", |s| s.payload = PayloadClass::Mixed),
            variant!("json", |s| s.payload = PayloadClass::Json),
            variant!("logline", |s| s.payload = PayloadClass::Logline),
            variant!("text", |s| s.payload = PayloadClass::Text),
            variant!("zeros", |s| s.payload = PayloadClass::Zeros),
        ],
    },
    Preset {
        name: "sweep-msgsize",
        about: "SSP sweep: 8k msg/s mixed, 15 s + 2 s warmup, message size 64, 256, 1024, 4096, 16384 B",
        apply: |s| {
            s.rate_msg_s = 8_000;
            s.duration_s = Duration::from_secs(15);
            s.warmup_s = Duration::from_secs(2);
        },
        variants: &[
            variant!("64B", |s| s.message_bytes = 64),
            variant!("256B", |s| s.message_bytes = 256),
            variant!("1KiB", |s| s.message_bytes = 1024),
            variant!("4KiB", |s| s.message_bytes = 4096),
            variant!("16KiB", |s| s.message_bytes = 16_384),
        ],
    },
];

/// OMB's simple-workload shape, the base of the OMB presets: 1 topic of 10 partitions, 1 KiB
/// random payloads uncompressed, 10k msg/s (the baseline's) from 1 producer to 1 consumer,
/// 60 s after 10 s of warmup.
fn omb_workload(s: &mut Scenario) {
    s.partitions = 10;
    s.message_bytes = 1024;
    s.producers = 1;
    s.consumers = 1;
    s.payload = PayloadClass::Random;
    s.compression = Codec::None;
    s.duration_s = Duration::from_secs(60);
    s.warmup_s = Duration::from_secs(10);
}

/// teranode's sparse feed: one 256 B message every 25 ms over 32 partitions (about 1.25
/// messages per partition per second), so client batches never fill on size.
fn sparse_fanout(s: &mut Scenario) {
    s.rate_msg_s = 40;
    s.producers = 1;
    s.consumers = 4;
    s.partitions = 32;
    s.message_bytes = 256;
    s.payload = PayloadClass::Random;
    s.compression = Codec::None;
    s.batch_bytes = 1_048_576;
    s.partitioning = Partitioning::RoundRobin;
    s.duration_s = Duration::from_secs(5);
    s.warmup_s = Duration::from_secs(2);
}

/// teranode's application batcher in front of the client (size trigger `flush_messages`).
fn app_batcher(s: &mut Scenario, linger_ms: u32, mode: AppBatchMode) {
    s.shaping.app_batch_linger_ms = linger_ms;
    s.shaping.app_batch_mode = mode;
    s.shaping.app_batch_max = 10_000;
}

/// SSP's "bp-on" controller settings: pause above lag 20000, resume below 5000, poll 200 ms.
fn bp_loose(s: &mut Scenario) {
    s.bp_max_lag = 20_000;
    s.bp_resume_lag = 5_000;
    s.bp_poll_ms = Duration::from_millis(200);
}

/// SSP's "bp-tight": pause above lag 5000, resume below 1000, poll 100 ms.
fn bp_tight(s: &mut Scenario) {
    s.bp_max_lag = 5_000;
    s.bp_resume_lag = 1_000;
    s.bp_poll_ms = Duration::from_millis(100);
}

fn slow_aggr(s: &mut Scenario) {
    s.payload = PayloadClass::Json;
    s.consumers = 12;
    s.consumer_delay_us = Duration::from_millis(4);
    s.consumer_jitter_us = Duration::from_millis(1);
    s.duration_s = Duration::from_secs(40);
    s.warmup_s = Duration::from_secs(3);
}

fn bursty(s: &mut Scenario, burst_rate_msg_s: u64) {
    s.rate_msg_s = 5_000;
    s.burst_rate_msg_s = burst_rate_msg_s;
    s.burst_duration_s = Duration::from_secs(3);
    s.burst_period_s = Duration::from_secs(12);
    s.payload = PayloadClass::Json;
    s.duration_s = Duration::from_secs(60);
    s.warmup_s = Duration::from_secs(3);
}

pub fn find_preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

impl Preset {
    pub fn scenario(&self) -> Scenario {
        let mut s = Scenario::baseline();
        (self.apply)(&mut s);
        s.preset = self.name.to_string();
        s
    }

    /// The runs of this preset: `(variant label, scenario)`; `base` is `scenario()` with the
    /// command-line overrides already applied. A single-run preset has one unlabelled run.
    pub fn expand(&self, base: &Scenario) -> Vec<(Option<&'static str>, Scenario)> {
        if self.variants.is_empty() {
            let mut s = base.clone();
            s.normalize();
            return vec![(None, s)];
        }
        self.variants
            .iter()
            .map(|v| {
                let mut s = base.clone();
                (v.apply)(&mut s);
                s.normalize();
                (Some(v.label), s)
            })
            .collect()
    }
}

/// The preset list as printed for `--list-presets` and for an unknown `--preset`.
pub fn preset_list() -> String {
    let width = PRESETS.iter().map(|p| p.name.len()).max().unwrap_or(0);
    PRESETS
        .iter()
        .map(|p| {
            let runs = if p.variants.is_empty() {
                String::new()
            } else {
                format!(" [{} runs]", p.variants.len())
            };
            format!("  {:width$}  {}{runs}\n", p.name, p.about)
        })
        .collect()
}
