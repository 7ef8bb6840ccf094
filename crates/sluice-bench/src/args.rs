//! The command line of `sluice-bench`: its flags (`BenchArgs`), the command words (`Action`)
//! and where the scenario comes from (`Source`: a preset, a scenario file or an OMB workload),
//! and the scenario a run uses, the preset or file with the flags applied over it.
//!
//! Guarantees: every flag is range-checked when parsed (bounds in `limits`), and the scenario
//! is validated (`Scenario::validate`) before any run; giving the scenario twice is an error.

use std::path::PathBuf;
use std::time::Duration;

use crate::gate::Gate;
use crate::payload::PayloadClass;
use crate::presets::{self, Preset};
use crate::scenario::{self, Acks, Codec, Partitioning, Scenario};
use crate::scenario_file::{self, ScenarioFile};
use crate::{clientconf, faults, gate, limits, omb_import, regress, shaping, units};

/// Flags of `sluice-bench`. Scenario flags override the chosen preset.
#[derive(Debug, Clone, clap::Args)]
#[command(
    after_help = "Commands: list (the presets), run PRESET|FILE, sweep KEY=V1,V2,... [KEY=...]\n\
Exit codes: 0 ok, 1 run failed, 2 bad usage, 3 a gate failed or a metric regressed, 4 records lost\n\
(acknowledged with acks=all, or delivery below 100%; acks=1/0 losses are reported as lost_unsynced, not judged;\n\
--allow-loss or a gate on lost/lost_acked/lost_unsynced/delivery_pct decides instead) or duplicated\n\
(--allow-duplicates or a gate on duplicates decides instead), 130 interrupted.\n\
Example: sluice-bench --bootstrap h1:9092,h2:9092 --acks all --fault-cmd '10s:kill -9 1234' --fault-cmd '20s:./restart.sh'\n\
Example: sluice-bench --duration 5s --json r.json --gate 'p99_ack_ms<=50'\n\
Example: sluice-bench run bench/scenarios/sweep-batching.toml --duration 3s\n\
Example: sluice-bench sweep linger_ms=0,5 acks=1,all --baseline prev.json --max-regress 10%"
)]
pub struct BenchArgs {
    /// Optional command: `list`, `run PRESET|FILE` or `sweep KEY=V1,V2,... [KEY=...]`.
    #[arg(value_name = "COMMAND", num_args = 0..)]
    pub command: Vec<String>,
    /// Scenario file (TOML or YAML): a base preset, scenario keys, a sweep and gates; flags
    /// override it. An OMB workload file is recognised by its fields.
    #[arg(long, value_name = "FILE", conflicts_with = "omb_workload")]
    pub scenario: Option<PathBuf>,
    /// Import an OpenMessaging Benchmark workload YAML as the scenario (flags override it).
    #[arg(long, value_name = "FILE")]
    pub omb_workload: Option<PathBuf>,
    /// Compare with a previous report (a run or a set written by sluice-bench) and print
    /// old / new / change of the key metrics per matching run.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit 3 if a key metric got worse by more than this (e.g. 10%).
    #[arg(long, value_name = "PCT", value_parser = regress::parse_pct, requires = "baseline")]
    pub max_regress: Option<f64>,
    /// Named scenario to start from (see --list-presets).
    #[arg(long, default_value = "baseline")]
    pub preset: String,
    /// Print the presets and exit.
    #[arg(long)]
    pub list_presets: bool,
    /// Run against this broker (comma-separated host:port list) instead of an embedded Sluice.
    #[arg(long, value_name = "HOST:PORT[,..]", conflicts_with = "targets")]
    pub bootstrap: Option<String>,
    /// A/B: run the same scenario on each target ("embedded" or a host:port list), in
    /// A B B A order with fresh topics, and print ratio tables (repeatable).
    #[arg(long = "target", value_name = "embedded|HOST:PORT[,..]")]
    pub targets: Vec<String>,
    /// Measured duration after warmup (e.g. 30s, 2m).
    #[arg(long, value_parser = units::parse_duration)]
    pub duration: Option<Duration>,
    /// Warmup before measuring; its messages are tagged and excluded (e.g. 5s, 0).
    #[arg(long, value_parser = units::parse_duration)]
    pub warmup: Option<Duration>,
    /// Aggregate target rate in msg/s (10000, 10k); 0 or "max" for unthrottled; "search" for
    /// OMB's max-sustainable rate search (see --search-*).
    #[arg(long, value_parser = shaping::parse_rate_arg)]
    pub rate: Option<shaping::RateArg>,
    /// --rate search: the rate the search starts at.
    #[arg(long, value_parser = units::parse_rate)]
    pub search_start_rate: Option<u64>,
    /// --rate search: how often the target is adjusted (OMB: 3s).
    #[arg(long, value_parser = units::parse_duration)]
    pub search_period: Option<Duration>,
    /// --rate search: publish or receive backlog (messages) above which a period is overloaded.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub search_backlog_limit: Option<u64>,
    /// Message keys: none, round-robin over a key set, random from it, or hot (skew).
    #[arg(long, value_enum)]
    pub keys: Option<shaping::KeyMode>,
    /// Distinct keys of the key set (--keys round-robin, random, hot).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=limits::MAX_KEY_COUNT as i64))]
    pub key_count: Option<u32>,
    /// --keys hot: percent of messages on the hot key.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100))]
    pub hot_key_pct: Option<u32>,
    /// OMB backlog mode: consumers paused until this much backlog built (e.g. 100MiB), then
    /// the drain is timed.
    #[arg(long = "backlog", value_parser = units::parse_bytes)]
    pub backlog_bytes: Option<u64>,
    /// Backlog mode: the drain ends at max(1000, (1 - ratio) x built backlog) messages.
    #[arg(long, value_parser = units::parse_ratio)]
    pub backlog_drain_ratio: Option<f64>,
    /// Application-level batcher in front of each producer: linger in ms (0 = off).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=3_600_000))]
    pub app_batch_linger_ms: Option<u32>,
    /// Application batcher flush rule: deadline (oldest message) or debounce (idle time).
    #[arg(long, value_enum)]
    pub app_batch_mode: Option<shaping::AppBatchMode>,
    /// Application batcher size trigger (messages).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=limits::MAX_APP_BATCH_MSGS as i64))]
    pub app_batch_max: Option<u32>,
    /// Producer clients, each on its own thread.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=limits::MAX_PRODUCERS as i64))]
    pub producers: Option<u32>,
    /// Consumer clients; partitions are shared out round-robin (at most one per partition).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=limits::MAX_CONSUMERS as i64))]
    pub consumers: Option<u32>,
    /// Partitions of the (fresh) benchmark topic.
    #[arg(long, value_parser = clap::value_parser!(i32).range(1..=limits::MAX_PARTITIONS as i64))]
    pub partitions: Option<i32>,
    /// Fresh topics per run, each with --partitions partitions (producers rotate over them).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=limits::MAX_TOPICS as i64))]
    pub topics: Option<u32>,
    /// Consumer offset auto-commit interval in ms (the broker-view lag trails by up to this).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=limits::MAX_COMMIT_INTERVAL_MS as i64))]
    pub commit_interval_ms: Option<u32>,
    /// Bytes per message, including the 40-byte bench header.
    #[arg(long, value_parser = scenario::parse_message_bytes)]
    pub message_size: Option<usize>,
    /// Payload class.
    #[arg(long, value_enum)]
    pub payload: Option<PayloadClass>,
    /// With --payload txmeta: entries packed per record (sets the message size).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=limits::MAX_ENTRIES_PER_RECORD as i64))]
    pub entries: Option<u32>,
    /// Seed of the payload generator.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Producer acks: 0, 1 or all.
    #[arg(long, value_parser = scenario::parse_acks, allow_hyphen_values = true)]
    pub acks: Option<Acks>,
    /// compression.codec of the producers.
    #[arg(long, value_enum)]
    pub compression: Option<Codec>,
    /// linger.ms of the producers.
    #[arg(long)]
    pub linger_ms: Option<u32>,
    /// batch.size of the producers, bytes.
    #[arg(long)]
    pub batch_bytes: Option<u32>,
    /// enable.idempotence (needs a broker with InitProducerId: Sluice and Kafka have it): no
    /// duplicates from retried produce requests when a broker fails.
    #[arg(long, action = clap::ArgAction::Set)]
    pub idempotence: Option<bool>,
    /// max.in.flight.requests.per.connection.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_in_flight: Option<u32>,
    /// Transactional producers: producer n uses transactional.id ID-<n> and sends everything
    /// in transactions (--txn-messages, --txn-interval-ms); consumers read read_committed.
    /// Implies --acks all and --idempotence true.
    #[arg(long, value_name = "ID")]
    pub transactional_id: Option<String>,
    /// Messages per transaction (default 1000; 0 = only --txn-interval-ms ends one).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=limits::MAX_TXN_MESSAGES as i64))]
    pub txn_messages: Option<u32>,
    /// Also end a transaction once it is this many ms old (0 = off).
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=limits::MAX_TXN_INTERVAL_MS as i64))]
    pub txn_interval_ms: Option<u32>,
    /// Fraction of transactions aborted instead of committed (0..1); their records must never
    /// reach the read_committed consumers.
    #[arg(long, value_parser = units::parse_ratio)]
    pub txn_abort_ratio: Option<f64>,
    /// client: librdkafka's partitioner (no key); round-robin: explicit partition per message.
    #[arg(long, value_enum)]
    pub partitioning: Option<Partitioning>,
    /// Consumer processing time per message (e.g. 500us, 4ms); each consumer is serial.
    #[arg(long, value_parser = units::parse_duration)]
    pub consumer_delay: Option<Duration>,
    /// Extra uniform random processing time per message, up to this much.
    #[arg(long, value_parser = units::parse_duration)]
    pub consumer_jitter: Option<Duration>,
    /// After this long (from load start) the consumer delay switches to --phase-delay.
    #[arg(long, value_parser = units::parse_duration)]
    pub phase_after: Option<Duration>,
    /// The consumer delay after --phase-after (default 0: the consumers recover).
    #[arg(long, value_parser = units::parse_duration)]
    pub phase_delay: Option<Duration>,
    /// Aggregate rate during bursts (square wave; needs --burst-duration and --burst-period).
    #[arg(long, value_parser = units::parse_rate)]
    pub burst_rate: Option<u64>,
    /// Length of each burst, at the start of every period.
    #[arg(long, value_parser = units::parse_duration)]
    pub burst_duration: Option<Duration>,
    /// Burst period.
    #[arg(long, value_parser = units::parse_duration)]
    pub burst_period: Option<Duration>,
    /// Backpressure: pause producers while the client-view lag is above this (0 = off).
    #[arg(long)]
    pub bp_max_lag: Option<u64>,
    /// Backpressure: resume below this lag (default: half of --bp-max-lag).
    #[arg(long)]
    pub bp_resume_lag: Option<u64>,
    /// Backpressure controller poll interval.
    #[arg(long, value_parser = units::parse_duration)]
    pub bp_poll: Option<Duration>,
    /// Write the JSON report here (default: sluice-bench-<preset>-<UTC time>.json).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Run every (variant, target) this many times (A/B: the A B B A block is repeated); the
    /// comparison reports mean, min and max over the repeats.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=limits::MAX_REPEATS as i64))]
    pub repeats: u32,
    /// Write the 1-second time series of every run as CSV here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write a self-contained HTML report (charts, tables; no network needed) here.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write each run as OpenMessaging Benchmark result JSON (10 s windows); several runs
    /// write FILE-<n>[-<label>].json.
    #[arg(long, value_name = "FILE")]
    pub omb_json: Option<PathBuf>,
    /// Also write each run as SSP kafka-bench result JSON; several runs write
    /// FILE-<n>[-<label>].json.
    #[arg(long, value_name = "FILE")]
    pub ssp_json: Option<PathBuf>,
    /// Write no JSON report unless --json is given.
    #[arg(long)]
    pub no_report: bool,
    /// With more than one run (A/B, sweeps, repeats): start each run at once. By default the
    /// dirty pages the earlier runs left (a broker that does not fsync leaves gigabytes) are
    /// written back and the disks left to go idle first (see `settle`), so that leftover
    /// work does not land on whichever run comes next.
    #[arg(long)]
    pub no_settle: bool,
    /// Pass/fail condition on a metric, e.g. 'p99_ack_ms<=50', 'lost==0' (repeatable).
    #[arg(long = "gate", value_name = "EXPR", value_parser = gate::parse)]
    pub gates: Vec<Gate>,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// The broker binary the embedded and null targets run as `BIN serve ...` (default: the
    /// `sluice` beside this executable).
    #[arg(long, value_name = "PATH")]
    pub broker_bin: Option<PathBuf>,
    /// Extra flag for the embedded `sluice serve` (repeatable), e.g. --serve-arg=--fsync=never.
    #[arg(long = "serve-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub serve_args: Vec<String>,
    /// Pid of a local broker process of the one non-embedded target, to sample (CPU, RSS,
    /// I/O); repeatable (or a comma-separated list) for a cluster: each broker and the sum.
    #[arg(long, value_name = "PID[,..]", value_delimiter = ',')]
    pub broker_pid: Vec<u32>,
    /// Data directory of the one non-embedded target, to measure bytes on disk; repeatable,
    /// paired with --broker-pid by position.
    #[arg(long, value_name = "DIR")]
    pub broker_data_dir: Vec<PathBuf>,
    /// Replication factor of the bench's topics (default: the broker's
    /// default.replication.factor; CreateTopics is sent with -1).
    #[arg(long, value_parser = scenario::set_replication_factor, allow_hyphen_values = true)]
    pub replication_factor: Option<i16>,
    /// A topic config of the bench's topics, key=value (repeatable), e.g.
    /// min.insync.replicas=2; set over the scenario's.
    #[arg(long = "topic-config", value_name = "KEY=VALUE", value_parser = scenario::parse_topic_config)]
    pub topic_configs: Vec<(String, String)>,
    /// A librdkafka setting for every client the bench makes (producers, consumers, admin),
    /// key=value, repeatable, over --client-config's; e.g. -X security.protocol=SASL_SSL,
    /// -X debug=broker,protocol (librdkafka's debug log, to stderr). Checked by librdkafka
    /// before the run; keys the bench sets from its own flags (acks, linger.ms, ...) are refused.
    #[arg(short = 'X', long = "client-setting", value_name = "KEY=VALUE", value_parser = clientconf::parse_setting)]
    pub client_settings: Vec<(String, String)>,
    /// A Java-style properties file of librdkafka settings for every client (as Kafka's
    /// client.properties: security.protocol, sasl.mechanism, sasl.username, ssl.ca.location, ...).
    #[arg(long = "client-config", value_name = "FILE")]
    pub client_config_file: Option<PathBuf>,
    /// Security protocol of the embedded broker's listener: PLAINTEXT (default), SSL,
    /// SASL_PLAINTEXT or SASL_SSL. Its TLS stores and SASL users come from broker settings
    /// (--serve-arg=--config=FILE or --serve-arg=--override=KEY=VALUE), the clients' from
    /// -X / --client-config.
    #[arg(long, value_name = "PROTOCOL", value_parser = parse_listener_protocol)]
    pub embedded_listener: Option<String>,
    /// Port of the embedded broker (default: an ephemeral one), e.g. to attach other tools.
    #[arg(long, value_name = "PORT", value_parser = clap::value_parser!(u16).range(1..))]
    pub embedded_port: Option<u16>,
    /// Run a shell command at time AT of the measured window, e.g. '10s:kill -9 1234'
    /// (repeatable; added to a scenario file's `fault_cmd`). It sees SLUICE_BENCH_BOOTSTRAP and
    /// SLUICE_BENCH_BROKER_PIDS; its start, exit code and output tail are reported, and the
    /// time to recover from it.
    #[arg(long = "fault-cmd", value_name = "AT:COMMAND", value_parser = parse_fault)]
    pub fault_cmds: Vec<String>,
    /// A broker's Prometheus endpoint (http://HOST:PORT[/metrics]) to scrape every interval
    /// (repeatable); the embedded Sluice's own admin listener is scraped without it.
    #[arg(long = "broker-metrics", value_name = "URL")]
    pub broker_metrics: Vec<String>,
    /// Exit 0 even when records were lost or delivery was below 100 % (exit 4 otherwise).
    #[arg(long)]
    pub allow_loss: bool,
    /// Exit 0 even when records were delivered more than once (exit 4 otherwise); a run
    /// without idempotence may duplicate retried records when a broker fails.
    #[arg(long)]
    pub allow_duplicates: bool,
    /// Keep the benchmark topic on a --bootstrap broker (it is deleted by default).
    #[arg(long)]
    pub keep_topic: bool,
    /// First measure the client's own ceiling for each scenario (unthrottled, a few seconds,
    /// against `sluice serve --storage null`: the broker's front end over a log that
    /// acknowledges produce and keeps nothing) and say in every report whether the client or
    /// the broker set the pace. `--target null` runs a whole scenario against it.
    #[arg(long)]
    pub calibrate: bool,
}

fn parse_listener_protocol(s: &str) -> Result<String, String> {
    let p = s.trim().to_ascii_uppercase();
    if ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"].contains(&p.as_str()) {
        Ok(p)
    } else {
        Err(format!(
            "{s:?} is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)"
        ))
    }
}

fn parse_fault(s: &str) -> Result<String, String> {
    faults::parse(s).map(|f| f.text())
}

/// What `sluice-bench` was asked to do (the optional command words).
#[derive(Debug, Clone)]
pub enum Action {
    Bench,
    List,
    Run(String),
    Sweep(scenario_file::Sweep),
}

/// Where the scenario comes from: a preset, or a file (scenario or OMB workload) over one.
#[derive(Debug, Clone)]
pub enum Source {
    Preset(&'static Preset),
    File(Box<ScenarioFile>),
}

impl Source {
    pub fn preset(&self) -> &'static Preset {
        match self {
            Source::Preset(p) => p,
            Source::File(f) => f.preset,
        }
    }

    pub fn file(&self) -> Option<&ScenarioFile> {
        match self {
            Source::Preset(_) => None,
            Source::File(f) => Some(f),
        }
    }
}

const COMMANDS: &str = "list, run PRESET|FILE, sweep KEY=V1,V2,... [KEY=...]";

fn unknown_preset(name: &str) -> String {
    format!(
        "unknown preset {name:?}; presets are:\n{}",
        presets::preset_list()
    )
}

impl BenchArgs {
    /// The command words, checked.
    pub fn action(&self) -> Result<Action, String> {
        let words: Vec<&str> = self.command.iter().map(String::as_str).collect();
        match words.as_slice() {
            [] => Ok(Action::Bench),
            ["list"] => Ok(Action::List),
            ["run", target] => Ok(Action::Run(target.to_string())),
            ["run"] => Err("bench run needs a preset name or a scenario file".into()),
            ["sweep"] => Err("bench sweep needs KEY=V1,V2,... (e.g. linger_ms=0,5)".into()),
            ["sweep", kvs @ ..] => kvs
                .iter()
                .map(|kv| scenario_file::parse_sweep_arg(kv))
                .collect::<Result<Vec<_>, _>>()
                .map(Action::Sweep),
            [cmd, ..] if matches!(*cmd, "list" | "run") => Err(format!(
                "bench {cmd}: unexpected {:?}; commands are: {COMMANDS}",
                words[if *cmd == "run" { 2 } else { 1 }]
            )),
            [cmd, ..] => Err(format!(
                "unknown bench command {cmd:?}; commands are: {COMMANDS}"
            )),
        }
    }

    /// The preset or file this invocation runs: `bench run X`, `--scenario`, `--omb-workload`
    /// or `--preset`, in that order; giving two of the first three is an error.
    pub fn source(&self) -> Result<Source, String> {
        let run = match self.action()? {
            Action::Run(x) => Some(x),
            _ => None,
        };
        if let Some(x) = run {
            if self.scenario.is_some() || self.omb_workload.is_some() {
                return Err(
                    "give the scenario once: bench run X, or --scenario / --omb-workload".into(),
                );
            }
            let path = std::path::Path::new(&x);
            let looks_like_file = path.is_file()
                || [".toml", ".yaml", ".yml", ".json"]
                    .iter()
                    .any(|e| x.to_ascii_lowercase().ends_with(e));
            return if looks_like_file {
                omb_import::load(path, false).map(|f| Source::File(Box::new(f)))
            } else {
                presets::find_preset(&x)
                    .map(Source::Preset)
                    .ok_or_else(|| unknown_preset(&x))
            };
        }
        if let Some(p) = &self.scenario {
            return omb_import::load(p, false).map(|f| Source::File(Box::new(f)));
        }
        if let Some(p) = &self.omb_workload {
            return omb_import::load(p, true).map(|f| Source::File(Box::new(f)));
        }
        presets::find_preset(&self.preset)
            .map(Source::Preset)
            .ok_or_else(|| unknown_preset(&self.preset))
    }

    /// The preset or file with this invocation's overrides applied.
    pub fn scenario(&self) -> Result<Scenario, String> {
        self.scenario_from(&self.source()?)
    }

    /// `source`'s scenario with this invocation's flags applied over it.
    pub fn scenario_from(&self, source: &Source) -> Result<Scenario, String> {
        let mut s = match source {
            Source::Preset(p) => p.scenario(),
            Source::File(f) => f.scenario()?.0,
        };
        macro_rules! set {
            ($($field:ident => $target:ident),*) => {$( if let Some(v) = self.$field.clone() { s.$target = v; } )*};
        }
        set!(duration => duration_s, warmup => warmup_s, producers => producers,
             consumers => consumers, partitions => partitions, message_size => message_bytes,
             payload => payload, seed => seed, acks => acks, compression => compression,
             linger_ms => linger_ms, batch_bytes => batch_bytes, idempotence => idempotence,
             max_in_flight => max_in_flight, partitioning => partitioning,
             consumer_delay => consumer_delay_us, consumer_jitter => consumer_jitter_us,
             phase_delay => phase_delay_us, burst_rate => burst_rate_msg_s,
             burst_duration => burst_duration_s, burst_period => burst_period_s,
             bp_max_lag => bp_max_lag, bp_resume_lag => bp_resume_lag, bp_poll => bp_poll_ms,
             entries => entries_per_record, topics => topics,
             commit_interval_ms => commit_interval_ms, txn_messages => txn_messages,
             txn_interval_ms => txn_interval_ms, txn_abort_ratio => txn_abort_ratio);
        if let Some(id) = &self.transactional_id {
            s.set("transactional_id", id)?;
        }
        if let Some(p) = self.phase_after {
            s.phase_after_s = Some(p);
        }
        if let Some(rf) = self.replication_factor {
            s.replication_factor = rf;
        }
        for (k, v) in &self.topic_configs {
            s.topic_config.insert(k.clone(), v.clone());
        }
        s.fault_cmd.extend(self.fault_cmds.iter().cloned());
        if let Some(path) = &self.client_config_file {
            for (k, v) in clientconf::load_properties(path)? {
                s.client_config.insert(&k, &v)?;
            }
        }
        for (k, v) in &self.client_settings {
            s.client_config.insert(k, v)?;
        }
        if s.topic_config.len() > limits::MAX_TOPIC_CONFIGS {
            return Err(format!(
                "at most {} topic configs",
                limits::MAX_TOPIC_CONFIGS
            ));
        }
        self.apply_shaping(&mut s)?;
        s.validate()?;
        Ok(s)
    }
}

impl BenchArgs {
    /// The rate, key, backlog and application-batcher flags (see `shaping`).
    fn apply_shaping(&self, s: &mut Scenario) -> Result<(), String> {
        match self.rate {
            Some(shaping::RateArg::Fixed(r)) => {
                s.rate_msg_s = r;
                s.shaping.rate_search = false;
            }
            Some(shaping::RateArg::Search) => s.shaping.rate_search = true,
            None => {}
        }
        let sh = &mut s.shaping;
        macro_rules! set {
            ($($field:ident => $target:ident),*) => {$( if let Some(v) = self.$field { sh.$target = v; } )*};
        }
        set!(search_start_rate => search_start_msg_s, search_period => search_period_ms,
             search_backlog_limit => search_backlog_limit, keys => keys, key_count => key_count,
             hot_key_pct => hot_key_pct, backlog_bytes => backlog_bytes,
             backlog_drain_ratio => backlog_drain_ratio, app_batch_linger_ms => app_batch_linger_ms,
             app_batch_mode => app_batch_mode, app_batch_max => app_batch_max);
        s.shaping.validate(
            s.partitioning == Partitioning::RoundRobin,
            s.burst_rate_msg_s > 0,
            s.message_bytes,
        )
    }
}
