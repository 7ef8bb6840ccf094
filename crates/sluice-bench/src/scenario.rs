//! Scenarios: the fully resolved description of one run, the named presets, and how flags
//! override a preset. A scenario is plain data; two runs of the same scenario and seed send
//! the same schedule of the same bytes.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::limits;
use crate::payload::PayloadClass;
use crate::shaping::Shaping;
use crate::units::{parse_duration, parse_rate};

/// `acks` of the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Acks {
    #[serde(rename = "0")]
    None,
    #[serde(rename = "1")]
    Leader,
    #[serde(rename = "all")]
    All,
}

impl Acks {
    pub fn config_value(self) -> &'static str {
        match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        }
    }
}

pub fn parse_acks(s: &str) -> Result<Acks, String> {
    match s {
        "0" => Ok(Acks::None),
        "1" => Ok(Acks::Leader),
        "all" | "-1" => Ok(Acks::All),
        _ => Err(format!("acks must be 0, 1 or all (-1), not {s:?}")),
    }
}

/// `compression.codec` of the producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    pub fn config_value(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }
}

/// How producers pick partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Partitioning {
    /// No key, no partition: librdkafka's own choice (sticky for null keys).
    Client,
    /// Explicit partition: message `seq` of producer `p` goes to `(p + seq) % partitions`.
    RoundRobin,
}

/// One fully resolved run description.
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub preset: String,
    /// Aggregate target rate over all producers; 0 = unthrottled (as fast as the client takes).
    pub rate_msg_s: u64,
    #[serde(serialize_with = "ser_secs")]
    pub duration_s: Duration,
    #[serde(serialize_with = "ser_secs")]
    pub warmup_s: Duration,
    pub producers: u32,
    pub consumers: u32,
    pub partitions: i32,
    pub message_bytes: usize,
    pub payload: PayloadClass,
    pub seed: u64,
    pub acks: Acks,
    pub compression: Codec,
    pub linger_ms: u32,
    pub batch_bytes: u32,
    pub idempotence: bool,
    pub max_in_flight: u32,
    pub partitioning: Partitioning,
    /// Consumer processing model: each consumer thread handles its messages one at a time and
    /// sleeps `consumer_delay + uniform[0, consumer_jitter)` after each (so capacity is about
    /// consumers / mean delay). After `phase_after` (from load start), the delay becomes
    /// `phase_delay` (SSP's recovery scenarios).
    #[serde(serialize_with = "ser_us")]
    pub consumer_delay_us: Duration,
    #[serde(serialize_with = "ser_us")]
    pub consumer_jitter_us: Duration,
    #[serde(serialize_with = "ser_opt_secs")]
    pub phase_after_s: Option<Duration>,
    #[serde(serialize_with = "ser_us")]
    pub phase_delay_us: Duration,
    /// Square-wave bursts: for `burst_duration` at the start of every `burst_period`, the
    /// aggregate rate is `burst_rate_msg_s` instead of `rate_msg_s`. 0 = no bursts.
    pub burst_rate_msg_s: u64,
    #[serde(serialize_with = "ser_secs")]
    pub burst_duration_s: Duration,
    #[serde(serialize_with = "ser_secs")]
    pub burst_period_s: Duration,
    /// Producer backpressure (SSP's credit controller with hysteresis): every `bp_poll`, pause
    /// all producers when the client-view lag exceeds `bp_max_lag`, resume below
    /// `bp_resume_lag`. 0 = off. Paused time shifts the schedule (it is a deliberate slowdown,
    /// reported as paused time, not as latency).
    pub bp_max_lag: u64,
    pub bp_resume_lag: u64,
    #[serde(serialize_with = "ser_ms")]
    pub bp_poll_ms: Duration,
    /// txmeta payload: entries packed per record (0 for other payloads); decides message_bytes.
    pub entries_per_record: u32,
    /// Keys, max-rate search, backlog mode, application batcher (flattened into the JSON).
    #[serde(flatten)]
    pub shaping: Shaping,
    /// Fresh topics per run, each with `partitions` partitions (OMB's `topics`). Producer `i`'s
    /// message `k` goes to topic `(i + k) % topics`; consumers share all topic-partitions.
    pub topics: u32,
    /// Consumers store each message's offset when it is handed to them and auto-commit the
    /// stored offsets this often (SSP: about 1 s); the broker-view lag trails by up to this.
    pub commit_interval_ms: u32,
    /// Replication factor of the bench's topics; -1 lets the broker decide (its
    /// `default.replication.factor`), as CreateTopics does with -1.
    pub replication_factor: i16,
    /// Topic configs sent with CreateTopics (`min.insync.replicas`, `cleanup.policy`, ...).
    pub topic_config: BTreeMap<String, String>,
    /// Fault commands, `AT:COMMAND` (see `faults`), AT from the start of the measured window.
    pub fault_cmd: Vec<String>,
    /// librdkafka settings for every client of the run (`-X`, `--client-config`; see
    /// `clientconf`), secrets shown as `***`.
    pub client_config: crate::clientconf::ClientConf,
    /// Transactional producers (issue 12): producer `n` runs with `transactional.id`
    /// `<transactional_id>-<n>` and sends everything inside transactions; the consumers read
    /// with `isolation.level=read_committed`. None: plain producers.
    pub transactional_id: Option<String>,
    /// Messages per transaction (0: no count limit, `txn_interval_ms` alone ends them).
    pub txn_messages: u32,
    /// A transaction is also ended once it is this old (0: only `txn_messages` ends it).
    pub txn_interval_ms: u32,
    /// Fraction of transactions aborted instead of committed, drawn before each one begins
    /// from the seed (its records are flagged, so a consumer that sees one reports it).
    pub txn_abort_ratio: f64,
}

fn ser_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn ser_opt_secs<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

fn ser_us<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e6)
}

impl Scenario {
    /// SSP's "bench" preset: 10k msg/s of 512-byte mixed payloads from 8 producers into 12
    /// partitions, acks=1, snappy, 64 KiB batches, 5 ms linger, 4 consumers, 30 s after 5 s
    /// of warmup.
    pub fn baseline() -> Scenario {
        Scenario {
            preset: "baseline".into(),
            rate_msg_s: 10_000,
            duration_s: Duration::from_secs(30),
            warmup_s: Duration::from_secs(5),
            producers: 8,
            consumers: 4,
            partitions: 12,
            message_bytes: 512,
            payload: PayloadClass::Mixed,
            seed: 42,
            acks: Acks::Leader,
            compression: Codec::Snappy,
            linger_ms: 5,
            batch_bytes: 65_536,
            idempotence: false,
            max_in_flight: 5,
            partitioning: Partitioning::Client,
            consumer_delay_us: Duration::ZERO,
            consumer_jitter_us: Duration::ZERO,
            phase_after_s: None,
            phase_delay_us: Duration::ZERO,
            burst_rate_msg_s: 0,
            burst_duration_s: Duration::ZERO,
            burst_period_s: Duration::ZERO,
            bp_max_lag: 0,
            bp_resume_lag: 0,
            bp_poll_ms: Duration::from_millis(200),
            entries_per_record: 0,
            shaping: Shaping::default(),
            topics: 1,
            commit_interval_ms: 1000,
            replication_factor: -1,
            topic_config: BTreeMap::new(),
            fault_cmd: Vec::new(),
            client_config: Default::default(),
            transactional_id: None,
            txn_messages: 1000,
            txn_interval_ms: 0,
            txn_abort_ratio: 0.0,
        }
    }

    /// Settles settings that depend on others: a txmeta payload sizes the message from its
    /// entry count (100 unless given); other payloads carry no entries; a transactional
    /// producer is idempotent with acks=all (librdkafka refuses anything else).
    pub fn normalize(&mut self) {
        if self.transactional_id.is_some() {
            self.acks = Acks::All;
            self.idempotence = true;
        }
        if self.payload == PayloadClass::Txmeta {
            if self.entries_per_record == 0 {
                self.entries_per_record = 100;
            }
            self.entries_per_record = self
                .entries_per_record
                .min(crate::limits::MAX_ENTRIES_PER_RECORD);
            self.message_bytes = crate::payload::txmeta_message_bytes(self.entries_per_record);
        } else {
            self.entries_per_record = 0;
        }
    }

    /// The aggregate target rate at `t` since load start (bursts included); 0 = unthrottled.
    pub fn rate_at(&self, t: Duration) -> u64 {
        if self.burst_rate_msg_s > 0 && !self.burst_period_s.is_zero() {
            let into = t.as_nanos() % self.burst_period_s.as_nanos();
            if into < self.burst_duration_s.as_nanos() {
                return self.burst_rate_msg_s;
            }
        }
        self.rate_msg_s
    }

    /// The consumer delay at `t` since load start (before jitter).
    pub fn consumer_delay_at(&self, t: Duration) -> Duration {
        match self.phase_after_s {
            Some(p) if t >= p => self.phase_delay_us,
            _ => self.consumer_delay_us,
        }
    }

    /// Messages per second the consumers can process under the delay model, None if unlimited.
    pub fn consumer_capacity_msg_s(&self, consumers: u32) -> Option<f64> {
        let mean =
            self.consumer_delay_us.as_secs_f64() + self.consumer_jitter_us.as_secs_f64() / 2.0;
        (mean > 0.0).then(|| consumers as f64 / mean)
    }

    /// The resume threshold actually used (SSP: half of max when unset).
    pub fn bp_resume(&self) -> u64 {
        if self.bp_resume_lag > 0 {
            self.bp_resume_lag
        } else {
            self.bp_max_lag / 2
        }
    }

    /// Target rate per producer (msg/s), 0 when unthrottled.
    pub fn rate_per_producer(&self) -> f64 {
        if self.rate_msg_s == 0 {
            0.0
        } else {
            self.rate_msg_s as f64 / self.producers as f64
        }
    }
}

/// `key=value` settings: the one path by which scenario files, sweeps and OMB imports change a
/// scenario. Keys are the JSON names of the report's `scenario` object (`rate_msg_s`,
/// `duration_s`, ...) or the command-line flag names (`rate`, `duration`, `message-size`, ...);
/// `-` and `_` are interchangeable. A bare number for a duration is in the unit its key names
/// (`consumer_delay_us = 500` is 500 µs, `bp_poll_ms = 200` is 200 ms, `duration = 5` is 5 s),
/// so a report's `scenario` object can be fed back key by key; `500us`, `2m` etc. work anywhere.
impl Scenario {
    /// Sets one field from text. Unknown keys and bad values are errors naming the key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let k = key.trim().to_ascii_lowercase().replace('-', "_");
        let v = value.trim();
        let bad = |e: String| format!("{key} = {value:?}: {e}");
        // One arm per field: a field added to `Scenario` needs one line in `set_run_key` or
        // `set_shaping_key` (the `every_serialized_field_can_be_set` test fails until it has it).
        let known =
            self.set_run_key(&k, v).map_err(bad)? || self.set_shaping_key(&k, v).map_err(bad)?;
        if !known {
            return Err(format!(
                "unknown scenario key {key:?}; keys are: {}",
                scenario_keys().join(", ")
            ));
        }
        Ok(())
    }

    /// The run's keys (load, clients, topics, consumers, faults); false for another key.
    fn set_run_key(&mut self, k: &str, v: &str) -> Result<bool, String> {
        match k {
            "preset" | "name" => self.preset = set_name(v)?,
            "rate_msg_s" | "rate" => self.rate_msg_s = parse_rate(v)?,
            "duration_s" | "duration" => self.duration_s = set_duration(k, v)?,
            "warmup_s" | "warmup" => self.warmup_s = set_duration(k, v)?,
            "producers" => self.producers = set_int(v, 1, limits::MAX_PRODUCERS)?,
            "consumers" => self.consumers = set_int(v, 1, limits::MAX_CONSUMERS)?,
            "partitions" => self.partitions = set_int(v, 1, limits::MAX_PARTITIONS)?,
            "message_bytes" | "message_size" => self.message_bytes = parse_message_bytes(v)?,
            "payload" => self.payload = set_enum(v)?,
            "seed" => self.seed = set_int(v, 0, u64::MAX)?,
            "acks" => self.acks = parse_acks(v)?,
            "compression" => self.compression = set_enum(v)?,
            "linger_ms" => self.linger_ms = set_int(v, 0, limits::MAX_LINGER_MS)?,
            "batch_bytes" => self.batch_bytes = set_int(v, 1, i32::MAX as u32)?,
            "idempotence" => self.idempotence = set_bool(v)?,
            "max_in_flight" => self.max_in_flight = set_int(v, 1, 1_000_000)?,
            "partitioning" => self.partitioning = set_enum(v)?,
            "consumer_delay_us" | "consumer_delay" => self.consumer_delay_us = set_duration(k, v)?,
            "consumer_jitter_us" | "consumer_jitter" => {
                self.consumer_jitter_us = set_duration(k, v)?
            }
            "phase_after_s" | "phase_after" => {
                self.phase_after_s = match v {
                    "" | "none" | "null" | "off" => None,
                    _ => Some(set_duration(k, v)?),
                }
            }
            "phase_delay_us" | "phase_delay" => self.phase_delay_us = set_duration(k, v)?,
            "burst_rate_msg_s" | "burst_rate" => self.burst_rate_msg_s = parse_rate(v)?,
            "burst_duration_s" | "burst_duration" => self.burst_duration_s = set_duration(k, v)?,
            "burst_period_s" | "burst_period" => self.burst_period_s = set_duration(k, v)?,
            "bp_max_lag" => self.bp_max_lag = set_int(v, 0, u64::MAX)?,
            "bp_resume_lag" => self.bp_resume_lag = set_int(v, 0, u64::MAX)?,
            "bp_poll_ms" | "bp_poll" => self.bp_poll_ms = set_duration(k, v)?,
            "entries_per_record" | "entries" => {
                self.entries_per_record = set_int(v, 0, limits::MAX_ENTRIES_PER_RECORD)?
            }
            "topics" => self.topics = set_int(v, 1, limits::MAX_TOPICS)?,
            "commit_interval_ms" => self.commit_interval_ms = set_int(v, 1, 3_600_000)?,
            "replication_factor" => {
                self.replication_factor = match v {
                    "default" | "none" => -1,
                    _ => set_replication_factor(v)?,
                }
            }
            "topic_config" => self.topic_config = parse_topic_configs(v)?,
            "client_config" => self.client_config = crate::clientconf::parse_scenario_value(v)?,
            "fault_cmd" | "fault_cmds" | "faults" => self.fault_cmd = parse_fault_cmds(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The shaping keys (keys, rate search, backlog, application batcher) and the
    /// transactional ones; false for another key.
    fn set_shaping_key(&mut self, k: &str, v: &str) -> Result<bool, String> {
        match k {
            "keys" => self.shaping.keys = set_enum(v)?,
            "key_count" => self.shaping.key_count = set_int(v, 1, limits::MAX_KEY_COUNT)?,
            "hot_key_pct" => self.shaping.hot_key_pct = set_int(v, 0, 100)?,
            "rate_search" => self.shaping.rate_search = set_bool(v)?,
            "search_start_msg_s" | "search_start_rate" => {
                self.shaping.search_start_msg_s = parse_rate(v)?
            }
            "search_period_ms" | "search_period" => {
                self.shaping.search_period_ms = set_duration(k, v)?
            }
            "search_backlog_limit" => self.shaping.search_backlog_limit = set_int(v, 1, u64::MAX)?,
            "backlog_bytes" | "backlog" => {
                self.shaping.backlog_bytes = crate::units::parse_bytes(v)?
            }
            "backlog_drain_ratio" => {
                self.shaping.backlog_drain_ratio = crate::units::parse_ratio(v)?
            }
            "app_batch_linger_ms" => {
                self.shaping.app_batch_linger_ms = set_int(v, 0, limits::MAX_LINGER_MS)?
            }
            "app_batch_mode" => self.shaping.app_batch_mode = set_enum(v)?,
            "app_batch_max" => self.shaping.app_batch_max = set_int(v, 1, u32::MAX)?,
            "transactional_id" => {
                self.transactional_id = match v {
                    "" | "none" | "null" | "off" => None,
                    _ => Some(set_name(v)?),
                }
            }
            "txn_messages" => self.txn_messages = set_int(v, 0, limits::MAX_TXN_MESSAGES)?,
            "txn_interval_ms" => self.txn_interval_ms = set_int(v, 0, limits::MAX_TXN_INTERVAL_MS)?,
            "txn_abort_ratio" => self.txn_abort_ratio = crate::units::parse_ratio(v)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Checks that hold between fields (each field's own range is checked when it is set).
    pub fn validate(&self) -> Result<(), String> {
        if self.duration_s.is_zero() {
            return Err("--duration must be above 0".into());
        }
        if self.burst_rate_msg_s > 0
            && (self.rate_msg_s == 0
                || self.burst_period_s.is_zero()
                || self.burst_duration_s > self.burst_period_s)
        {
            return Err("bursts need a base --rate above 0 and --burst-duration <= --burst-period (period above 0)".into());
        }
        let topic_partitions = self.topics as usize * self.partitions.max(1) as usize;
        if topic_partitions > limits::MAX_TOPIC_PARTITIONS {
            return Err(format!(
                "--topics x --partitions is {topic_partitions} topic-partitions; at most {} are supported",
                limits::MAX_TOPIC_PARTITIONS
            ));
        }
        if self.transactional_id.is_some() && self.txn_messages == 0 && self.txn_interval_ms == 0 {
            return Err(
                "--transactional-id needs --txn-messages or --txn-interval-ms above 0".into(),
            );
        }
        if self.bp_max_lag > 0 && self.bp_resume() > self.bp_max_lag {
            return Err("--bp-resume-lag must not exceed --bp-max-lag".into());
        }
        self.client_config.check()?;
        if self.fault_cmd.len() > limits::MAX_FAULTS {
            return Err(format!("at most {} fault commands", limits::MAX_FAULTS));
        }
        for f in &self.fault_cmd {
            let spec = crate::faults::parse(f)?;
            if spec.at >= self.duration_s {
                return Err(format!(
                    "fault {f:?} is at or after the end of the {:?} measured window (AT counts from the end of warmup)",
                    self.duration_s
                ));
            }
        }
        Ok(())
    }
}

/// The scenario keys by their JSON names, in report order (what `Scenario::set` accepts besides
/// the flag-name aliases).
pub fn scenario_keys() -> Vec<String> {
    match serde_json::to_value(Scenario::baseline()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// A replication factor: -1 (the broker's default) or 1..=`limits::MAX_REPLICATION_FACTOR`.
pub fn set_replication_factor(v: &str) -> Result<i16, String> {
    match set_int::<i16>(v, -1, limits::MAX_REPLICATION_FACTOR) {
        Ok(0) => Err("0 replicas is not a replication factor; -1 lets the broker decide".into()),
        r => r,
    }
}

/// One `key=value` topic config (a flag's value); the key is a Kafka topic config name.
pub fn parse_topic_config(v: &str) -> Result<(String, String), String> {
    let (k, val) = v
        .split_once('=')
        .ok_or_else(|| format!("{v:?}: a topic config is key=value, e.g. min.insync.replicas=2"))?;
    let k = k.trim();
    let ok_key = !k.is_empty()
        && k.len() <= limits::MAX_NAME_BYTES
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !ok_key {
        return Err(format!("{k:?} is not a topic config name"));
    }
    if val.len() > limits::MAX_TOPIC_CONFIG_VALUE_BYTES {
        return Err(format!(
            "the value of {k} is longer than {} bytes",
            limits::MAX_TOPIC_CONFIG_VALUE_BYTES
        ));
    }
    Ok((k.to_string(), val.trim().to_string()))
}

/// The `fault_cmd` scenario key: a JSON array of `AT:COMMAND` strings (what a scenario file's
/// list becomes), or one such string; each checked by `faults::parse`, at most
/// `limits::MAX_FAULTS`.
pub fn parse_fault_cmds(v: &str) -> Result<Vec<String>, String> {
    let items: Vec<String> = match serde_json::from_str::<Vec<String>>(v.trim()) {
        Ok(list) => list,
        Err(_) if v.trim().is_empty() || v.trim() == "[]" => Vec::new(),
        Err(_) => vec![v.to_string()],
    };
    if items.len() > limits::MAX_FAULTS {
        return Err(format!("at most {} fault commands", limits::MAX_FAULTS));
    }
    items
        .iter()
        .map(|i| crate::faults::parse(i).map(|f| f.text()))
        .collect()
}

/// The `topic_config` scenario key: a JSON object (what a report holds, so a report's scenario
/// reproduces the run), or `key=value` items separated by `;` (a sweep value, since a sweep
/// splits on commas; a value may itself hold commas, e.g. `cleanup.policy=compact,delete`),
/// or empty / `none` for no configs. The whole set is replaced.
pub fn parse_topic_configs(v: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    let v = v.trim();
    if v.is_empty() || v == "none" {
        return Ok(out);
    }
    if v.starts_with('{') {
        let obj: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(v).map_err(|e| format!("not a JSON object: {e}"))?;
        for (k, val) in obj {
            let text = match val {
                serde_json::Value::String(s) => s,
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                other => return Err(format!("{k}: {other} is not a config value")),
            };
            let (k, text) = parse_topic_config(&format!("{k}={text}"))?;
            out.insert(k, text);
        }
    } else {
        for item in v.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, val) = parse_topic_config(item)?;
            out.insert(k, val);
        }
    }
    if out.len() > limits::MAX_TOPIC_CONFIGS {
        return Err(format!(
            "at most {} topic configs",
            limits::MAX_TOPIC_CONFIGS
        ));
    }
    Ok(out)
}

fn set_name(v: &str) -> Result<String, String> {
    let ok = !v.is_empty()
        && v.len() <= limits::MAX_NAME_BYTES
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.=,+".contains(c));
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!(
            "a name is 1..={} characters of letters, digits and - _ . = , +",
            limits::MAX_NAME_BYTES
        ))
    }
}

/// A duration: a bare number is in the unit the key ends with (`_us`, `_ms`, else seconds).
fn set_duration(key: &str, v: &str) -> Result<Duration, String> {
    let Ok(n) = v.parse::<f64>() else {
        return parse_duration(v);
    };
    let unit_ns = if key.ends_with("_us") {
        1e3
    } else if key.ends_with("_ms") {
        1e6
    } else {
        1e9
    };
    let ns = n * unit_ns;
    if !ns.is_finite() || ns < 0.0 || ns > limits::MAX_DURATION.as_nanos() as f64 {
        return Err(format!(
            "duration out of range (0 .. {} s)",
            limits::MAX_DURATION.as_secs()
        ));
    }
    // Rounded to whole nanoseconds so `0.3` s does not come back as 299.999999 ms.
    Ok(Duration::from_nanos(ns.round() as u64))
}

fn set_int<T>(v: &str, min: T, max: T) -> Result<T, String>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    // `5.0` (a number written by a YAML or JSON tool) is accepted as 5.
    let t = v.strip_suffix(".0").unwrap_or(v).replace('_', "");
    match t.parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(n),
        _ => Err(format!("expected a whole number in {min}..={max}")),
    }
}

fn set_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Ok(true),
        "false" | "no" | "off" | "0" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

fn set_enum<T: clap::ValueEnum>(v: &str) -> Result<T, String> {
    T::from_str(v, true).map_err(|_| {
        let names: Vec<String> = T::value_variants()
            .iter()
            .filter_map(|x| x.to_possible_value().map(|p| p.get_name().to_string()))
            .collect();
        format!("expected one of {}", names.join(", "))
    })
}

/// A message size in bytes, from the bench header up to `limits::MAX_MESSAGE_BYTES`.
pub fn parse_message_bytes(s: &str) -> Result<usize, String> {
    let v: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("not a size in bytes: {s:?}"))?;
    if !(limits::MIN_MESSAGE_BYTES..=limits::MAX_MESSAGE_BYTES).contains(&v) {
        return Err(format!(
            "message size must be {}..={} bytes (the bench header takes {})",
            limits::MIN_MESSAGE_BYTES,
            limits::MAX_MESSAGE_BYTES,
            crate::payload::HEADER_BYTES
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets::{find_preset, preset_list, Preset, PRESETS};

    #[test]
    fn rate_shape_phases_and_capacity() {
        let mut s = Scenario::baseline();
        s.rate_msg_s = 5_000;
        s.burst_rate_msg_s = 15_000;
        s.burst_duration_s = Duration::from_secs(3);
        s.burst_period_s = Duration::from_secs(12);
        assert_eq!(s.rate_at(Duration::from_millis(2_999)), 15_000);
        assert_eq!(s.rate_at(Duration::from_secs(3)), 5_000);
        assert_eq!(s.rate_at(Duration::from_secs(12)), 15_000);
        s.consumer_delay_us = Duration::from_millis(4);
        s.consumer_jitter_us = Duration::from_millis(1);
        s.phase_after_s = Some(Duration::from_secs(30));
        assert_eq!(
            s.consumer_delay_at(Duration::from_secs(29)),
            Duration::from_millis(4)
        );
        assert_eq!(s.consumer_delay_at(Duration::from_secs(30)), Duration::ZERO);
        let cap = s.consumer_capacity_msg_s(12).unwrap_or(0.0);
        assert!((cap - 12.0 / 0.0045).abs() < 1.0, "{cap}");
        assert_eq!(Scenario::baseline().consumer_capacity_msg_s(4), None);
        s.bp_max_lag = 100;
        assert_eq!(s.bp_resume(), 50);
    }

    #[test]
    fn presets_are_unique_and_named_in_their_scenario() {
        for (i, p) in PRESETS.iter().enumerate() {
            assert!(
                PRESETS[i + 1..].iter().all(|q| q.name != p.name),
                "{}",
                p.name
            );
            assert_eq!(p.scenario().preset, p.name);
        }
        assert!(find_preset("nope").is_none());
        // Sweeps: the swept setting wins over the base, every variant differs from the others.
        let p = find_preset("sweep-compression").unwrap_or(&PRESETS[0]);
        let mut base = p.scenario();
        base.compression = Codec::Gzip;
        let runs = p.expand(&base);
        assert_eq!(runs.len(), 5);
        assert_eq!(runs[0].1.compression, Codec::None);
        for p in PRESETS {
            for (_, s) in p.expand(&p.scenario()) {
                assert!(
                    s.message_bytes >= crate::limits::MIN_MESSAGE_BYTES,
                    "{}",
                    p.name
                );
            }
        }
        assert!(preset_list().contains("baseline"));
    }

    #[test]
    fn every_serialized_field_can_be_set() {
        // Feeding one scenario's JSON object key by key into another reproduces it exactly:
        // every field has an arm in `set`, and bare numbers use the unit in the key's name.
        for from in ["baseline", "recovery", "bursty-heavy", "bp-tight", "packed"] {
            let src = find_preset(from)
                .map(Preset::scenario)
                .unwrap_or_else(Scenario::baseline);
            let want = serde_json::to_value(&src).unwrap_or_default();
            let serde_json::Value::Object(fields) = &want else {
                panic!("scenario is not a JSON object")
            };
            assert!(fields.len() >= 28, "{}", fields.len());
            let mut dst = find_preset("sparse-fanout")
                .map(Preset::scenario)
                .unwrap_or_else(Scenario::baseline);
            for (k, v) in fields {
                let text = match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Null => "none".into(),
                    other => other.to_string(),
                };
                if let Err(e) = dst.set(k, &text) {
                    panic!("field {k:?} cannot be set from {text:?}: {e}");
                }
            }
            assert_eq!(
                serde_json::to_value(&dst).unwrap_or_default(),
                want,
                "{from}"
            );
        }
    }

    #[test]
    fn set_accepts_flag_names_and_rejects_bad_input() {
        let mut s = Scenario::baseline();
        for (k, v) in [
            ("rate", "20k"),
            ("duration", "2s"),
            ("message-size", "1024"),
            ("compression", "ZSTD"),
            ("acks", "-1"),
            ("linger_ms", "7"),
            ("consumer_delay", "500us"),
            ("consumer_delay_us", "250"),
            ("phase-after", "3"),
            ("bp_poll", "50ms"),
            ("idempotence", "yes"),
            ("partitioning", "round-robin"),
        ] {
            assert_eq!(s.set(k, v), Ok(()), "{k}={v}");
        }
        assert_eq!(s.rate_msg_s, 20_000);
        assert_eq!(s.duration_s, Duration::from_secs(2));
        assert_eq!(s.message_bytes, 1024);
        assert_eq!(s.compression, Codec::Zstd);
        assert_eq!(s.acks, Acks::All);
        assert_eq!(s.linger_ms, 7);
        assert_eq!(s.consumer_delay_us, Duration::from_micros(250));
        assert_eq!(s.phase_after_s, Some(Duration::from_secs(3)));
        assert_eq!(s.bp_poll_ms, Duration::from_millis(50));
        assert!(s.idempotence);
        assert_eq!(s.partitioning, Partitioning::RoundRobin);
        let e = s.set("lingerms", "5").unwrap_err();
        assert!(e.contains("\"lingerms\"") && e.contains("linger_ms"), "{e}");
        for (k, v) in [
            ("producers", "0"),
            ("producers", "1.5"),
            ("message_size", "3"),
            ("compression", "brotli"),
            ("acks", "2"),
            ("duration", "-1"),
            ("consumer_delay_us", "1e30"),
            ("idempotence", "maybe"),
            ("preset", "a b"),
        ] {
            let e = s.set(k, v).unwrap_err();
            assert!(e.starts_with(k), "{k}={v}: {e}");
        }
    }
}
