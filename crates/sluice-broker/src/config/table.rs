//! [`BROKER_CONFIGS`]: the one table of every broker setting, as `TOPIC_CONFIGS` is for topics.
//! Each row has the Kafka key, its type, its default, its validation, a one-line doc, Kafka's
//! update mode, and how it is applied to and read back from [`BrokerConfig`].
//!
//! Guarantees: everything that knows a broker setting derives it from this table, so they
//! cannot disagree. `BrokerConfig::set` (and through it `server.properties`, `SLUICE_*`
//! environment variables, `--override` and the convenience flags) accepts exactly these keys
//! (plus the per-listener and per-mechanism security keys `config::security` resolves) and
//! refuses any other with the closest known key as a suggestion; `BrokerConfig::default()`
//! takes its values from the `default` column; DescribeConfigs lists every row with its value
//! and source; the topic-config defaults are the current values of their `log.*` broker
//! synonyms; `docs/configuration.md` is checked against the table by a test.

use std::collections::BTreeMap;
use std::path::PathBuf;

use sluice_coordinator::{GroupConfig, TxnConfig};
use sluice_log::{FsyncPolicy, Storage};

use crate::config::broker::{BrokerConfig, TopicDefaults};
use crate::config::limits;
use crate::config::listeners;
use crate::config::security::{self, SecuritySettings};
use crate::config::values::{self, list, ConfigType};

/// How Kafka lets a setting change on a running broker (the "Update Mode" of its docs).
/// Sluice has no dynamic broker config: every setting is fixed at start, DescribeConfigs
/// reports each as read-only and AlterConfigs on the broker is refused. The column tells an
/// operator moving a Kafka file what Kafka would have let them change live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    ReadOnly,
    PerBroker,
    ClusterWide,
}

impl UpdateMode {
    pub fn name(self) -> &'static str {
        match self {
            UpdateMode::ReadOnly => "read-only",
            UpdateMode::PerBroker => "per-broker",
            UpdateMode::ClusterWide => "cluster-wide",
        }
    }
}

/// Where a setting is listed in `docs/configuration.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Node,
    Log,
    Cleaner,
    Groups,
    Transactions,
    Network,
    Security,
    Authorizer,
    DelegationTokens,
    Sluice,
    /// Kafka settings a single node accepts (stock `server.properties` files carry them)
    /// but that change nothing here.
    NoEffect,
}

impl Section {
    pub const ALL: [Section; 11] = [
        Section::Node,
        Section::Log,
        Section::Cleaner,
        Section::Groups,
        Section::Transactions,
        Section::Network,
        Section::Security,
        Section::Authorizer,
        Section::DelegationTokens,
        Section::Sluice,
        Section::NoEffect,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Section::Node => "Node and listeners",
            Section::Log => "Log and topic defaults",
            Section::Cleaner => "Log cleaner",
            Section::Groups => "Group coordinator",
            Section::Transactions => "Transactions",
            Section::Network => "Network and request limits",
            Section::Security => "Security (each may also be given per listener)",
            Section::Authorizer => "Authorizer",
            Section::DelegationTokens => "Delegation tokens",
            Section::Sluice => "Sluice's own",
            Section::NoEffect => "Accepted, no effect on a single node",
        }
    }
}

/// A value's range, checked by `BrokerConfig::set` after the type (cross-setting rules are
/// in `BrokerConfig::validate`).
#[derive(Debug, Clone, Copy)]
pub enum Check {
    Any,
    /// An integer of at least this.
    Min(i64),
    /// An integer in this closed range.
    Range(i64, i64),
    /// One of these words (case-sensitive, as Kafka's validators are).
    OneOf(&'static [&'static str]),
    /// Checked by the row's `apply`; the text is what the docs show.
    Custom(&'static str),
}

impl Check {
    /// The rule as the docs show it ("" for none).
    pub fn describe(self) -> String {
        match self {
            Check::Any => String::new(),
            Check::Min(n) => format!(">= {n}"),
            Check::Range(a, b) if a == b => format!("{a}"),
            Check::Range(a, b) => format!("{a} .. {b}"),
            Check::OneOf(words) => words.join(", "),
            Check::Custom(text) => text.to_string(),
        }
    }

    fn check(self, value: &str) -> Result<(), String> {
        let int = || {
            value
                .parse::<i64>()
                .map_err(|_| "expected an integer".to_string())
        };
        match self {
            Check::Any | Check::Custom(_) => Ok(()),
            Check::Min(min) if int()? >= min => Ok(()),
            Check::Min(min) => Err(format!("must be at least {min}")),
            Check::Range(a, b) if (a..=b).contains(&int()?) => Ok(()),
            Check::Range(a, b) if a == b => Err(format!("must be {a} (a single node)")),
            Check::Range(a, b) => Err(format!("must be between {a} and {b}")),
            Check::OneOf(words) if words.contains(&value) => Ok(()),
            Check::OneOf(words) => Err(format!("expected one of {}", words.join(", "))),
        }
    }
}

/// Applies a checked value (`key` is the row's name, `value` trimmed). The error is the
/// reason; the caller names the key.
pub type Apply = fn(&mut BrokerConfig, &str, &str) -> Result<(), String>;
/// The effective value of a setting that owns a field of [`BrokerConfig`].
pub type Value = fn(&BrokerConfig) -> String;

/// One broker setting.
#[derive(Debug)]
pub struct BrokerConfigDef {
    /// Kafka's key (or `sluice.*` for Sluice's own).
    pub name: &'static str,
    pub kind: ConfigType,
    /// The value when not set, as DescribeConfigs reports it; "" means none (null).
    pub default: &'static str,
    pub check: Check,
    pub mode: UpdateMode,
    pub section: Section,
    /// Never echoed: DescribeConfigs returns null with is_sensitive, errors hide the value.
    pub sensitive: bool,
    /// Kafka's other keys for the same thing, lower precedence first after this one
    /// (`log.retention.ms` before `log.retention.minutes` before `log.retention.hours`).
    pub synonyms: &'static [&'static str],
    pub doc: &'static str,
    pub apply: Apply,
    /// `None`: the setting owns no field; its value is what was given, else the default.
    pub value: Option<Value>,
}

impl BrokerConfigDef {
    // One argument per column keeps each row of the table positional and short.
    #[allow(clippy::too_many_arguments)]
    const fn new(
        name: &'static str,
        kind: ConfigType,
        default: &'static str,
        mode: UpdateMode,
        section: Section,
        doc: &'static str,
        apply: Apply,
        value: Option<Value>,
    ) -> Self {
        Self {
            name,
            kind,
            default,
            check: Check::Any,
            mode,
            section,
            sensitive: false,
            synonyms: &[],
            doc,
            apply,
            value,
        }
    }

    const fn check(mut self, check: Check) -> Self {
        self.check = check;
        self
    }

    const fn synonyms(mut self, synonyms: &'static [&'static str]) -> Self {
        self.synonyms = synonyms;
        self
    }

    const fn sensitive(mut self) -> Self {
        self.sensitive = true;
        self
    }

    /// The effective value on this broker (sensitive ones too: callers hide them).
    pub fn current(&self, c: &BrokerConfig) -> String {
        match self.value {
            Some(value) => value(c),
            None => c
                .explicit
                .get(self.name)
                .map_or(self.default, String::as_str)
                .to_string(),
        }
    }

    /// Checks `value` against the type and the range.
    pub fn check_value(&self, value: &str) -> Result<(), String> {
        // An empty string or list configures nothing (Kafka's null); `apply` decides.
        if value.is_empty()
            && matches!(
                self.kind,
                ConfigType::Str | ConfigType::List | ConfigType::Password
            )
        {
            return Ok(());
        }
        let typed = match self.kind {
            ConfigType::Boolean => parse_bool(value).map(|_| ()),
            ConfigType::Short => num::<i16>(value).map(|_| ()),
            ConfigType::Int => num::<i32>(value).map(|_| ()),
            ConfigType::Long => num::<i64>(value).map(|_| ()),
            ConfigType::Double => num::<f64>(value).map(|_| ()),
            ConfigType::Str | ConfigType::List | ConfigType::Password => Ok(()),
        };
        typed.map_err(|_| format!("expected {}", type_name(self.kind)))?;
        self.check.check(value)
    }

    /// The environment variable that sets it: `SLUICE_` and the key upper-cased, dots as
    /// underscores (`SLUICE_LOG_RETENTION_MS`).
    pub fn env_var(&self) -> String {
        env_var(self.name)
    }
}

pub fn env_var(key: &str) -> String {
    format!(
        "SLUICE_{}",
        key.to_ascii_uppercase().replace(['.', '-'], "_")
    )
}

/// Kafka's type names, as its docs print them.
pub fn type_name(kind: ConfigType) -> &'static str {
    match kind {
        ConfigType::Boolean => "boolean",
        ConfigType::Str => "string",
        ConfigType::Int => "int",
        ConfigType::Short => "short",
        ConfigType::Long => "long",
        ConfigType::Double => "double",
        ConfigType::List => "list",
        ConfigType::Password => "password",
    }
}

pub fn lookup(name: &str) -> Option<&'static BrokerConfigDef> {
    BROKER_CONFIGS.iter().find(|d| d.name == name)
}

/// The known key closest to `unknown` (edit distance, after Kafka-style normalization of
/// `_`/`-` to `.` and case), for "did you mean" in the unknown-key error.
pub fn closest(unknown: &str) -> &'static str {
    let norm = unknown.to_ascii_lowercase().replace(['_', '-'], ".");
    let norm = norm
        .strip_prefix("sluice.")
        .filter(|n| lookup(n).is_some())
        .unwrap_or(&norm);
    BROKER_CONFIGS
        .iter()
        .map(|d| (edit_distance(norm, d.name), d.name))
        .min()
        .map_or("", |(_, name)| name)
}

/// Levenshtein distance over bytes (keys are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut row = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            row[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1);
        }
        prev = row;
    }
    prev[b.len()]
}

fn num<T: std::str::FromStr>(v: &str) -> Result<T, String> {
    v.parse().map_err(|_| "not a valid number".to_string())
}

/// Kafka's booleans: `true` or `false`, any case.
fn parse_bool(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

/// Rows that only need their value checked (the value is remembered in `explicit`).
fn accept(_: &mut BrokerConfig, _: &str, _: &str) -> Result<(), String> {
    Ok(())
}

/// Security rows: stored (and checked) by `config::security`, which also serves the
/// per-listener forms.
fn security(c: &mut BrokerConfig, key: &str, value: &str) -> Result<(), String> {
    c.security
        .set(key, value, is_security_row)
        .map(|_| ())
        .map_err(|e| e.reason)
}

pub(crate) fn listener_list(specs: &[listeners::ListenerSpec]) -> String {
    specs
        .iter()
        .map(|l| match l.name.is_empty() {
            true => l.addr.clone(),
            false => format!("{}://{}", l.name, l.addr),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Kafka's default for `log.cleaner.io.max.bytes.per.second` (Java's Double.MAX_VALUE).
const DOUBLE_MAX: &str = "1.7976931348623157E308";
const I64_MAX: &str = "9223372036854775807";
/// Settings that must be 1 on a single node (replication factors, in-sync replicas,
/// internal topics' partitions): accepting more would promise what one node cannot keep.
const ONLY_ONE: Check = Check::Range(1, 1);

use ConfigType::{Boolean, Double, Int, List, Long, Password, Short, Str};
use Section::{
    Authorizer as Auth, Cleaner, DelegationTokens as Tokens, Groups, Log, Network as Net, NoEffect,
    Node, Security as Sec, Sluice, Transactions as Txn,
};
use UpdateMode::{ClusterWide as Cw, PerBroker as Pb, ReadOnly as Ro};

type D = BrokerConfigDef;

/// Every broker setting, in the order DescribeConfigs and the docs list them. (Kept out of
/// rustfmt so each row stays a few lines to read down.)
#[rustfmt::skip]
pub const BROKER_CONFIGS: &[BrokerConfigDef] = &[
    // --- Node and listeners -------------------------------------------------------------
    D::new("node.id", Int, "1", Ro, Node, "This broker's id.",
        |c, _, v| { c.node_id = num(v)?; Ok(()) },
        Some(|c| c.node_id.to_string())).check(Check::Min(0)).synonyms(&["broker.id"]),
    D::new("broker.id", Int, "1", Ro, Node, "Kafka's older name of node.id.",
        |c, _, v| { c.node_id = num(v)?; Ok(()) },
        Some(|c| c.node_id.to_string())).check(Check::Min(0)),
    D::new("listeners", List, "PLAINTEXT://127.0.0.1:9092", Pb, Node,
        "Listeners to bind (NAME://host:port,...; a bare host:port is PLAINTEXT); port 0 picks a free port.",
        |c, k, v| {
            let mut specs = listeners::parse(k, v).map_err(|e| e.reason)?;
            c.listen = specs[0].addr.clone();
            // One PLAINTEXT listener is kept as `listen` alone (what code that builds a
            // config by its fields sets); anything else is the named list.
            if specs.len() == 1 && specs[0].name == "PLAINTEXT" {
                specs.clear();
            }
            c.listeners = specs;
            Ok(())
        },
        Some(|c| listener_list(&c.listener_specs()))),
    D::new("advertised.listeners", List, "", Pb, Node,
        "What clients are told per listener; a listener without an entry advertises its bound address.",
        |c, k, v| {
            c.advertised_listeners = match v.is_empty() {
                true => Vec::new(),
                false => listeners::parse(k, v).map_err(|e| e.reason)?,
            };
            Ok(())
        },
        Some(|c| listener_list(&c.advertised_listeners))),
    D::new("listener.security.protocol.map", List,
        "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL", Pb, Node,
        "Listener name to security protocol.",
        |c, k, v| {
            c.listener_security_protocol_map =
                security::parse_protocol_map(k, v).map_err(|e| e.reason)?;
            Ok(())
        },
        Some(|c| c.listener_security_protocol_map.iter()
            .map(|(name, p)| format!("{name}:{}", p.name())).collect::<Vec<_>>().join(","))),
    D::new("log.dirs", List, "./data", Ro, Node,
        "The data directory (the first entry; one directory per node).",
        |c, _, v| { c.data_dir = list(v).next().unwrap_or(v).into(); Ok(()) },
        Some(|c| c.data_dir.display().to_string())).synonyms(&["log.dir"]),
    D::new("log.dir", Str, "", Ro, Node, "Kafka's single-directory form of log.dirs.",
        |c, _, v| { c.data_dir = v.into(); Ok(()) }, None),
    D::new("auto.create.topics.enable", Boolean, "true", Ro, Node,
        "Create unknown topics when clients ask for their metadata.",
        |c, _, v| { c.auto_create_topics = parse_bool(v)?; Ok(()) },
        Some(|c| c.auto_create_topics.to_string())),
    D::new("num.partitions", Int, "1", Ro, Node, "Partitions of new topics.",
        |c, _, v| { c.topic_defaults.partitions = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.partitions.to_string()))
        .check(Check::Range(1, limits::PARTITIONS_PER_TOPIC_MAX as i64)),
    D::new("default.replication.factor", Int, "1", Ro, Node, "Always 1 on a single node.",
        accept, None).check(ONLY_ONE),
    // --- Log and topic defaults (the log.* settings are the topic configs' defaults) ------
    D::new("log.retention.ms", Long, "604800000", Cw, Log,
        "Default retention.ms: age above which old segments are deleted (-1: forever).",
        |c, _, v| { c.topic_defaults.retention_ms = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.retention_ms.to_string()))
        .check(Check::Min(-1)).synonyms(&["log.retention.minutes", "log.retention.hours"]),
    D::new("log.retention.minutes", Int, "", Cw, Log, "log.retention.ms in minutes.",
        |c, _, v| { c.topic_defaults.retention_ms = num::<i64>(v)?.saturating_mul(60_000); Ok(()) },
        None).check(Check::Min(-1)),
    D::new("log.retention.hours", Int, "168", Cw, Log, "log.retention.ms in hours.",
        |c, _, v| { c.topic_defaults.retention_ms = num::<i64>(v)?.saturating_mul(3_600_000); Ok(()) },
        None).check(Check::Min(-1)),
    D::new("log.retention.bytes", Long, "-1", Cw, Log,
        "Default retention.bytes: partition size above which old segments are deleted (-1: no limit).",
        |c, _, v| { c.topic_defaults.retention_bytes = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.retention_bytes.to_string())).check(Check::Min(-1)),
    D::new("log.segment.bytes", Int, "1073741824", Cw, Log, "Default segment.bytes.",
        |c, _, v| { c.topic_defaults.segment_bytes = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.segment_bytes.to_string()))
        .check(Check::Min(limits::SEGMENT_BYTES_MIN)),
    D::new("log.roll.ms", Long, "604800000", Cw, Log, "Default segment.ms.",
        |c, _, v| { c.topic_defaults.segment_ms = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.segment_ms.to_string()))
        .check(Check::Min(1)).synonyms(&["log.roll.hours"]),
    D::new("log.roll.hours", Int, "168", Cw, Log, "log.roll.ms in hours.",
        |c, _, v| { c.topic_defaults.segment_ms = num::<i64>(v)?.saturating_mul(3_600_000); Ok(()) },
        None).check(Check::Min(1)),
    D::new("message.max.bytes", Int, "1048588", Cw, Log, "Default max.message.bytes.",
        |c, _, v| { c.topic_defaults.max_message_bytes = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.max_message_bytes.to_string())).check(Check::Min(0)),
    D::new("log.message.timestamp.type", Str, "CreateTime", Cw, Log,
        "Default message.timestamp.type.",
        |c, k, v| {
            c.topic_defaults.timestamp_type =
                values::parse_timestamp_type(k, v).map_err(|e| e.reason)?;
            Ok(())
        },
        Some(|c| values::timestamp_type_name(c.topic_defaults.timestamp_type).into()))
        .check(Check::OneOf(&["CreateTime", "LogAppendTime"])),
    D::new("log.cleanup.policy", List, "delete", Cw, Log,
        "Default cleanup.policy: delete, compact, or compact,delete.",
        |c, _, v| { c.topic_defaults.cleanup_policy = values::parse_cleanup_policy(v)?; Ok(()) },
        Some(|c| c.topic_defaults.cleanup_policy.clone())).check(Check::Custom("delete, compact")),
    D::new("log.index.interval.bytes", Int, "4096", Cw, Log, "Default index.interval.bytes.",
        accept, None).check(Check::Min(0)),
    D::new("log.retention.check.interval.ms", Long, "300000", Ro, Log,
        "How often retention and time-based rolls run (and idle producer ids expire).",
        |c, _, v| { c.retention_check_interval_ms = num(v)?; Ok(()) },
        Some(|c| c.retention_check_interval_ms.to_string())).check(Check::Min(1)),
    D::new("compression.type", Str, "producer", Cw, Log,
        "Default compression.type: only producer (batches are stored as sent).",
        accept, None).check(Check::OneOf(&["producer"])),
    D::new("log.message.timestamp.after.max.ms", Long, "3600000", Cw, Log,
        "Default message.timestamp.after.max.ms.", accept, None).check(Check::Min(0)),
    D::new("log.message.timestamp.before.max.ms", Long, I64_MAX, Cw, Log,
        "Default message.timestamp.before.max.ms.", accept, None).check(Check::Min(0)),
    // --- Log cleaner ----------------------------------------------------------------------
    D::new("log.cleaner.enable", Boolean, "true", Ro, Cleaner, "Run the log cleaner.",
        |c, _, v| { c.log_cleaner.enable = parse_bool(v)?; Ok(()) },
        Some(|c| c.log_cleaner.enable.to_string())),
    D::new("log.cleaner.threads", Int, "1", Cw, Cleaner, "Cleaner threads.",
        |c, _, v| { c.log_cleaner.threads = num(v)?; Ok(()) },
        Some(|c| c.log_cleaner.threads.to_string()))
        .check(Check::Range(1, limits::LOG_CLEANER_THREADS_MAX as i64)),
    D::new("log.cleaner.backoff.ms", Long, "15000", Cw, Cleaner,
        "Sleep between passes when nothing is due.",
        |c, _, v| { c.log_cleaner.backoff_ms = num(v)?; Ok(()) },
        Some(|c| c.log_cleaner.backoff_ms.to_string())).check(Check::Min(0)),
    D::new("log.cleaner.io.max.bytes.per.second", Double, DOUBLE_MAX, Cw, Cleaner,
        "Bytes read plus written per second by all cleaner threads (Kafka's default: no limit).",
        |c, _, v| {
            // Kafka's default is Double.MAX_VALUE: anything that large means no limit.
            let rate: f64 = num(v)?;
            if rate.is_nan() || rate <= 0.0 {
                return Err("must be positive".into());
            }
            c.log_cleaner.io_max_bytes_per_second = rate.min(u64::MAX as f64) as u64;
            Ok(())
        },
        Some(|c| match c.log_cleaner.io_max_bytes_per_second {
            u64::MAX => DOUBLE_MAX.to_string(),
            rate => rate.to_string(),
        })).check(Check::Custom("> 0")),
    D::new("log.cleaner.dedupe.buffer.size", Long, "134217728", Cw, Cleaner,
        "Key-map memory of one pass, shared by the threads (at least 1 MiB per thread).",
        |c, _, v| { c.log_cleaner.dedupe_buffer_bytes = num(v)?; Ok(()) },
        Some(|c| c.log_cleaner.dedupe_buffer_bytes.to_string())).check(Check::Min(0)),
    D::new("log.cleaner.min.cleanable.ratio", Double, "0.5", Cw, Cleaner,
        "Default min.cleanable.dirty.ratio.",
        |c, _, v| {
            let ratio: f64 = num(v)?;
            if !(0.0..=1.0).contains(&ratio) {
                return Err("must be in [0, 1]".into());
            }
            c.topic_defaults.min_cleanable_dirty_ratio = ratio;
            Ok(())
        },
        Some(|c| c.topic_defaults.min_cleanable_dirty_ratio.to_string()))
        .check(Check::Custom("0 .. 1")),
    D::new("log.cleaner.min.compaction.lag.ms", Long, "0", Cw, Cleaner,
        "Default min.compaction.lag.ms.",
        |c, _, v| { c.topic_defaults.min_compaction_lag_ms = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.min_compaction_lag_ms.to_string())).check(Check::Min(0)),
    D::new("log.cleaner.max.compaction.lag.ms", Long, I64_MAX, Cw, Cleaner,
        "Default max.compaction.lag.ms.",
        |c, _, v| { c.topic_defaults.max_compaction_lag_ms = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.max_compaction_lag_ms.to_string())).check(Check::Min(1)),
    D::new("log.cleaner.delete.retention.ms", Long, "86400000", Cw, Cleaner,
        "Default delete.retention.ms (tombstone retention).",
        |c, _, v| { c.topic_defaults.delete_retention_ms = num(v)?; Ok(()) },
        Some(|c| c.topic_defaults.delete_retention_ms.to_string())).check(Check::Min(0)),
    // --- Group coordinator ----------------------------------------------------------------
    D::new("group.min.session.timeout.ms", Int, "6000", Ro, Groups,
        "Shortest session.timeout.ms a classic member may ask.",
        |c, _, v| { c.group.group_min_session_timeout_ms = num(v)?; Ok(()) },
        Some(|c| c.group.group_min_session_timeout_ms.to_string())).check(Check::Min(0)),
    D::new("group.max.session.timeout.ms", Int, "1800000", Ro, Groups,
        "Longest session.timeout.ms a classic member may ask.",
        |c, _, v| { c.group.group_max_session_timeout_ms = num(v)?; Ok(()) },
        Some(|c| c.group.group_max_session_timeout_ms.to_string())).check(Check::Min(0)),
    D::new("group.initial.rebalance.delay.ms", Int, "3000", Ro, Groups,
        "How long the first rebalance of an empty classic group waits for more members.",
        |c, _, v| { c.group.group_initial_rebalance_delay_ms = num(v)?; Ok(()) },
        Some(|c| c.group.group_initial_rebalance_delay_ms.to_string())).check(Check::Min(0)),
    D::new("group.max.size", Int, "1000", Ro, Groups, "Members per classic group.",
        |c, _, v| { c.group.group_max_size = num(v)?; Ok(()) },
        Some(|c| c.group.group_max_size.to_string())).check(Check::Min(1)),
    D::new("group.consumer.session.timeout.ms", Int, "45000", Ro, Groups,
        "A KIP-848 member not heard from this long is removed.",
        |c, _, v| { c.group.consumer_session_timeout_ms = num(v)?; Ok(()) },
        Some(|c| c.group.consumer_session_timeout_ms.to_string())).check(Check::Min(1)),
    D::new("group.consumer.heartbeat.interval.ms", Int, "5000", Ro, Groups,
        "Heartbeat interval given to KIP-848 members (below the session timeout).",
        |c, _, v| { c.group.consumer_heartbeat_interval_ms = num(v)?; Ok(()) },
        Some(|c| c.group.consumer_heartbeat_interval_ms.to_string())).check(Check::Min(1)),
    D::new("group.consumer.max.size", Int, "1000", Ro, Groups, "Members per KIP-848 group.",
        |c, _, v| { c.group.consumer_group_max_size = num(v)?; Ok(()) },
        Some(|c| c.group.consumer_group_max_size.to_string())).check(Check::Min(1)),
    D::new("offsets.retention.minutes", Int, "10080", Ro, Groups,
        "Committed offsets of an empty group expire after this.",
        |c, _, v| { c.group.offsets_retention_ms = num::<i64>(v)?.saturating_mul(60_000); Ok(()) },
        Some(|c| (c.group.offsets_retention_ms / 60_000).to_string())).check(Check::Min(1)),
    D::new("offset.metadata.max.bytes", Int, "4096", Ro, Groups,
        "Largest metadata string of a committed offset.",
        |c, _, v| { c.group.offset_metadata_bytes_max = num(v)?; Ok(()) },
        Some(|c| c.group.offset_metadata_bytes_max.to_string())).check(Check::Min(0)),
    D::new("producer.id.expiration.ms", Int, "86400000", Cw, Groups,
        "Idle idempotent-producer state is dropped after this.",
        |c, _, v| { c.producer_id_expiration_ms = num(v)?; Ok(()) },
        Some(|c| c.producer_id_expiration_ms.to_string())).check(Check::Min(1)),
    // --- Transactions ---------------------------------------------------------------------
    D::new("transaction.max.timeout.ms", Int, "900000", Ro, Txn,
        "Longest transaction.timeout.ms a producer may ask.",
        |c, _, v| { c.txn.transaction_max_timeout_ms = num(v)?; Ok(()) },
        Some(|c| c.txn.transaction_max_timeout_ms.to_string())).check(Check::Min(1)),
    D::new("transactional.id.expiration.ms", Int, "604800000", Ro, Txn,
        "A transactional id idle this long is removed.",
        |c, _, v| { c.txn.transactional_id_expiration_ms = num(v)?; Ok(()) },
        Some(|c| c.txn.transactional_id_expiration_ms.to_string())).check(Check::Min(1)),
    D::new("transaction.abort.timed.out.transaction.cleanup.interval.ms", Int, "10000", Ro, Txn,
        "How often timed-out transactions are aborted.",
        |c, _, v| { c.transaction_abort_cleanup_interval_ms = num(v)?; Ok(()) },
        Some(|c| c.transaction_abort_cleanup_interval_ms.to_string())).check(Check::Min(1)),
    D::new("transaction.remove.expired.transaction.cleanup.interval.ms", Int, "3600000", Ro, Txn,
        "How often idle transactional ids are removed.",
        |c, _, v| { c.transaction_remove_expired_cleanup_interval_ms = num(v)?; Ok(()) },
        Some(|c| c.transaction_remove_expired_cleanup_interval_ms.to_string()))
        .check(Check::Min(1)),
    D::new("transaction.state.log.segment.bytes", Int, "16777216", Ro, Txn,
        "Segment size of __transaction_state (Kafka's default is 100 MiB).",
        |c, _, v| { c.transaction_state_log_segment_bytes = num(v)?; Ok(()) },
        Some(|c| c.transaction_state_log_segment_bytes.to_string()))
        .check(Check::Min(limits::SEGMENT_BYTES_FLOOR)),
    D::new("transaction.state.log.num.partitions", Int, "1", Ro, Txn,
        "Always 1: one coordinator partition on a single node.", accept, None).check(ONLY_ONE),
    D::new("transaction.state.log.replication.factor", Short, "1", Ro, Txn,
        "Always 1 on a single node.", accept, None).check(ONLY_ONE),
    D::new("transaction.state.log.min.isr", Int, "1", Ro, Txn,
        "Always 1 on a single node.", accept, None).check(ONLY_ONE),
    // --- Network and request limits --------------------------------------------------------
    D::new("max.connections", Int, "4096", Cw, Net, "Concurrent connections.",
        |c, _, v| { c.max_connections = num(v)?; Ok(()) },
        Some(|c| c.max_connections.to_string())).check(Check::Min(1)),
    D::new("max.connections.per.ip", Int, "1024", Cw, Net, "Concurrent connections per client address (a quarter of max.connections' default, so one host cannot take every slot; Kafka: unlimited).",
        |c, _, v| { c.max_connections_per_ip = num(v)?; Ok(()) },
        Some(|c| c.max_connections_per_ip.to_string())).check(Check::Min(1)),
    D::new("max.connections.per.ip.overrides", Str, "", Cw, Net,
        "ip:count pairs that replace the per-address limit (addresses, not host names).",
        |c, k, v| {
            c.max_connections_per_ip_overrides =
                values::parse_ip_overrides(k, v).map_err(|e| e.reason)?;
            Ok(())
        },
        Some(|c| c.max_connections_per_ip_overrides.iter().map(|(ip, n)| match ip {
            std::net::IpAddr::V6(_) => format!("[{ip}]:{n}"),
            std::net::IpAddr::V4(_) => format!("{ip}:{n}"),
        }).collect::<Vec<_>>().join(","))).check(Check::Custom("ip:count,...")),
    D::new("connections.max.idle.ms", Long, "600000", Ro, Net, "Idle connections are closed after this.",
        |c, _, v| { c.connections_max_idle_ms = num(v)?; Ok(()) },
        Some(|c| c.connections_max_idle_ms.to_string())).check(Check::Min(1)),
    D::new("socket.request.max.bytes", Int, "104857600", Ro, Net, "Largest request accepted.",
        |c, _, v| { c.max_request_bytes = num(v)?; Ok(()) },
        Some(|c| c.max_request_bytes.to_string())).check(Check::Min(1024)),
    D::new("queued.max.request.bytes", Long, "536870912", Ro, Net,
        "Request bytes and fetch responses held across all connections (>= socket.request.max.bytes).",
        |c, _, v| { c.queued_max_request_bytes = num(v)?; Ok(()) },
        Some(|c| c.queued_max_request_bytes.to_string())).check(Check::Min(1024)),
    D::new("fetch.max.bytes", Int, "57671680", Ro, Net, "Largest fetch response.",
        |c, _, v| { c.fetch_max_bytes = num(v)?; Ok(()) },
        Some(|c| c.fetch_max_bytes.to_string()))
        .check(Check::Range(limits::FETCH_MAX_BYTES_MIN as i64, i32::MAX as i64)),
    D::new("connections.max.reauth.ms", Long, "0", Ro, Net,
        "Lifetime of an authenticated SASL session (KIP-368); 0: sessions do not expire.",
        |c, _, v| { c.connections_max_reauth_ms = num(v)?; Ok(()) },
        Some(|c| c.connections_max_reauth_ms.to_string())).check(Check::Min(0)),
    D::new("sasl.server.max.receive.size", Int, "524288", Ro, Net,
        "Largest frame accepted before authentication.",
        |c, _, v| { c.sasl_server_max_receive_size = num(v)?; Ok(()) },
        Some(|c| c.sasl_server_max_receive_size.to_string())).check(Check::Min(1)),
    // --- Security (config::security serves these and their listener.name.<l>. forms) ------
    D::new("ssl.keystore.type", Str, "PEM", Pb, Sec, "Only PEM (JKS and PKCS12 are refused).",
        security, None).check(Check::Custom("PEM")),
    D::new("ssl.keystore.location", Str, "", Pb, Sec,
        "One PEM file: unencrypted private key and certificate chain.", security, None),
    D::new("ssl.keystore.key", Password, "", Pb, Sec, "Inline PEM private key.", security, None)
        .sensitive(),
    D::new("ssl.keystore.certificate.chain", Password, "", Pb, Sec, "Inline PEM certificate chain.",
        security, None).sensitive(),
    D::new("ssl.truststore.type", Str, "PEM", Pb, Sec, "Only PEM (JKS and PKCS12 are refused).",
        security, None).check(Check::Custom("PEM")),
    D::new("ssl.truststore.location", Str, "", Pb, Sec,
        "CA certificates (PEM file) for client certificates.", security, None),
    D::new("ssl.truststore.certificates", Password, "", Pb, Sec,
        "CA certificates (inline PEM) for client certificates.", security, None).sensitive(),
    D::new("ssl.client.auth", Str, "none", Pb, Sec, "Client certificates.", security, None)
        .check(Check::Custom("required, requested, none")),
    D::new("ssl.enabled.protocols", List, "TLSv1.2,TLSv1.3", Pb, Sec, "TLS versions served.",
        security, None).check(Check::Custom("TLSv1.2, TLSv1.3")),
    D::new("ssl.protocol", Str, "TLSv1.3", Pb, Sec, "TLS, TLSv1.2 or TLSv1.3.", security, None)
        .check(Check::Custom("TLS, TLSv1.2, TLSv1.3")),
    D::new("ssl.endpoint.identification.algorithm", Str, "https", Pb, Sec,
        "How a broker checks other brokers' names as their client: none on a single node.",
        security, None),
    D::new("sasl.enabled.mechanisms", List, "", Pb, Sec,
        "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (required on SASL listeners; Kafka's GSSAPI is not served).",
        security, None).check(Check::Custom("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")),
    D::new("sasl.mechanism.inter.broker.protocol", Str, "", Pb, Sec,
        "No inter-broker traffic on a single node; must name a served mechanism.", security, None)
        .check(Check::Custom("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")),
    D::new("security.inter.broker.protocol", Str, "PLAINTEXT", Ro, Sec,
        "No inter-broker traffic on a single node; must name a protocol.", security, None)
        .check(Check::Custom("PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")),
    D::new("principal.builder.class", Str, "", Pb, Sec,
        "Custom principal builders are refused (only empty).", security, None)
        .check(Check::Custom("empty")),
    // --- Authorizer ---------------------------------------------------------------------
    D::new("authorizer.class.name", Str, "", Ro, Auth,
        "StandardAuthorizer or AclAuthorizer: ACLs on; empty: every client may do everything.",
        |c, k, v| { c.authorizer.enabled = values::authorizer_class(k, v).map_err(|e| e.reason)?; Ok(()) },
        None).check(Check::Custom("org.apache.kafka.metadata.authorizer.StandardAuthorizer, kafka.security.authorizer.AclAuthorizer")),
    D::new("super.users", List, "", Ro, Auth, "User:<name>;... allowed everything.",
        |c, _, v| {
            c.authorizer.super_users =
                v.split(';').map(str::trim).filter(|u| !u.is_empty()).map(String::from).collect();
            Ok(())
        },
        Some(|c| c.authorizer.super_users.join(";"))),
    D::new("allow.everyone.if.no.acl.found", Boolean, "false", Ro, Auth,
        "Allow a resource that has no ACL at all.",
        |c, _, v| { c.authorizer.allow_everyone_if_no_acl_found = parse_bool(v)?; Ok(()) },
        Some(|c| c.authorizer.allow_everyone_if_no_acl_found.to_string())),
    // --- Delegation tokens (services/delegation_tokens.rs) ----------------------------------
    D::new("delegation.token.secret.key", Password, "", Ro, Tokens,
        "HMAC key of delegation tokens' passwords; empty: the token APIs answer DELEGATION_TOKEN_AUTH_DISABLED.",
        |c, _, v| { c.delegation_token.secret_key = v.to_string(); Ok(()) }, None)
        .sensitive().synonyms(&["delegation.token.master.key"]),
    D::new("delegation.token.master.key", Password, "", Ro, Tokens,
        "Deprecated name of delegation.token.secret.key (used when that is unset).",
        |c, _, v| { c.delegation_token.master_key = v.to_string(); Ok(()) }, None).sensitive(),
    D::new("delegation.token.max.lifetime.ms", Long, "604800000", Ro, Tokens,
        "No renewal extends a token past its issue time plus this.",
        |c, _, v| { c.delegation_token.max_lifetime_ms = num(v)?; Ok(()) },
        Some(|c| c.delegation_token.max_lifetime_ms.to_string())).check(Check::Min(1)),
    D::new("delegation.token.expiry.time.ms", Long, "86400000", Ro, Tokens,
        "A token's lifetime until renewed, and the longest renewal.",
        |c, _, v| { c.delegation_token.expiry_time_ms = num(v)?; Ok(()) },
        Some(|c| c.delegation_token.expiry_time_ms.to_string())).check(Check::Min(1)),
    D::new("delegation.token.expiry.check.interval.ms", Long, "3600000", Ro, Tokens,
        "How often expired tokens are removed (expired ones are refused before that).",
        |c, _, v| { c.delegation_token.expiry_check_interval_ms = num(v)?; Ok(()) },
        Some(|c| c.delegation_token.expiry_check_interval_ms.to_string())).check(Check::Min(1)),
    // --- Sluice's own ---------------------------------------------------------------------
    D::new("sluice.fsync", Str, "always", Ro, Sluice,
        "always: acknowledge acks=1/all after fdatasync; never: page-cache durability.",
        |c, k, v| { c.fsync = values::parse_fsync(k, v).map_err(|e| e.reason)?; Ok(()) },
        Some(|c| match c.fsync {
            sluice_log::FsyncPolicy::Always => "always".into(),
            sluice_log::FsyncPolicy::Never => "never".into(),
        })).check(Check::Custom("always, never")),
    D::new("sluice.journal.direct.io", Boolean, "true", Ro, Sluice,
        "Write journal rounds with O_DIRECT from aligned memory kept as the in-memory tail (same fdatasync); false writes through the page cache, which keeps data for consumers lagging beyond the tail in memory but lets a busy CPU stall every fdatasync. Only with sluice.fsync=always: under never the journal is written through the page cache, since a direct write would make every ack wait for the device.",
        |c, _, v| { c.journal_direct_io = parse_bool(v)?; Ok(()) },
        Some(|c| c.journal_direct_io.to_string())),
    D::new("sluice.journal.file.bytes", Long, "134217728", Ro, Sluice,
        "Size at which the journal moves to a new file. Disk space is freed a whole file at a time (the journal cleaner moves what outlives the rest of a file), so smaller files free space sooner at the cost of more files.",
        |c, _, v| { c.journal_file_bytes = num(v)?; Ok(()) },
        Some(|c| c.journal_file_bytes.to_string())).check(Check::Range(1 << 20, 1 << 30)),
    D::new("sluice.journal.cleaner.enable", Boolean, "true", Ro, Sluice,
        "Run the journal cleaner: it moves the bytes that outlive the rest of their journal file (long retention, compacted and internal topics) to a cleaned file, so mostly-expired journal files are freed (docs/storage.md §7a).",
        |c, _, v| { c.journal_cleaner.enable = parse_bool(v)?; Ok(()) },
        Some(|c| c.journal_cleaner.enable.to_string())),
    D::new("sluice.journal.cleaner.max.live.ratio", Double, "0.5", Ro, Sluice,
        "A journal file is cleaned once at most this share of its bytes is still live: at most this many bytes are moved per byte freed. Lower writes less and keeps more on disk.",
        |c, _, v| {
            let ratio: f64 = num(v)?;
            if !(ratio > 0.0 && ratio < 1.0) {
                return Err("must be in (0, 1)".into());
            }
            c.journal_cleaner.max_live_ratio = ratio;
            Ok(())
        },
        Some(|c| c.journal_cleaner.max_live_ratio.to_string())).check(Check::Custom("(0, 1)")),
    D::new("sluice.journal.cleaner.backoff.ms", Long, "5000", Ro, Sluice,
        "Time between journal cleaner passes (deletions by retention also wake it).",
        |c, _, v| { c.journal_cleaner.backoff_ms = num(v)?; Ok(()) },
        Some(|c| c.journal_cleaner.backoff_ms.to_string())).check(Check::Min(1)),
    D::new("sluice.journal.cleaner.io.max.bytes.per.second", Long, "67108864", Ro, Sluice,
        "Bytes read plus written per second by the journal cleaner.",
        |c, _, v| { c.journal_cleaner.io_max_bytes_per_second = num(v)?; Ok(()) },
        Some(|c| c.journal_cleaner.io_max_bytes_per_second.to_string())).check(Check::Min(1)),
    D::new("sluice.producer.eviction.idle.ms", Long, "600000", Ro, Sluice,
        "How long a producer must have been idle before a new producer id may take its slot in a partition tracking producer_ids_per_partition_max (10,000) producers; until then new producers get NOT_ENOUGH_REPLICAS (retriable). Below a client's retry window (Java delivery.timeout.ms 120 s, librdkafka message.timeout.ms 300 s) an evicted producer's retry is no longer recognised as a duplicate.",
        |c, _, v| { c.producer_eviction_idle_ms = num(v)?; Ok(()) },
        Some(|c| c.producer_eviction_idle_ms.to_string())).check(Check::Min(1000)),
    D::new("sluice.producer.ids.per.ip.max", Long, "1000", Ro, Sluice,
        "Producer ids InitProducerId hands out to one client address per sluice.producer.ids.per.ip.window.ms (a token bucket of this size, refilled over the window); beyond it THROTTLING_QUOTA_EXCEEDED with the wait as throttle time, which Java, librdkafka and franz-go retry. Keeps one address from filling partitions' producer tables (Kafka: unlimited).",
        |c, _, v| { c.producer_ids_per_ip_max = num(v)?; Ok(()) },
        Some(|c| c.producer_ids_per_ip_max.to_string())).check(Check::Min(1)),
    D::new("sluice.producer.ids.per.ip.window.ms", Long, "600000", Ro, Sluice,
        "The window of sluice.producer.ids.per.ip.max.",
        |c, _, v| { c.producer_ids_per_ip_window_ms = num(v)?; Ok(()) },
        Some(|c| c.producer_ids_per_ip_window_ms.to_string())).check(Check::Min(1)),
    D::new("sluice.internal.segment.bytes.enable", Boolean, "false", Ro, Sluice,
        "Let topics set internal.segment.bytes, Kafka's test-only topic config for segments below segment.bytes' 1 MiB minimum (Kafka accepts it from any client; with it a client could fill the segment-file budget in seconds). For tests only.",
        |c, _, v| { c.internal_segment_bytes_enable = parse_bool(v)?; Ok(()) },
        Some(|c| c.internal_segment_bytes_enable.to_string())),
    D::new("sluice.segment.files.per.topic.percent", Int, "25", Ro, Sluice,
        "The share of the segment-file budget (RLIMIT_NOFILE - max.connections - 256) one topic may hold: past it the topic's segment rolls are refused (KAFKA_STORAGE_ERROR, retriable) until DeleteRecords or retention frees some, so one topic cannot leave other topics without files to roll or create partitions with. New partitions are not held to it.",
        |c, _, v| { c.segment_files_per_topic_percent = num(v)?; Ok(()) },
        Some(|c| c.segment_files_per_topic_percent.to_string())).check(Check::Range(1, 100)),
    D::new("sluice.storage", Str, "disk", Ro, Sluice,
        "disk; null: acknowledge produce and keep nothing (bench calibration only, never for data).",
        |c, k, v| { c.storage = values::parse_storage(k, v).map_err(|e| e.reason)?; Ok(()) },
        Some(|c| match c.storage {
            sluice_log::Storage::Disk => "disk".into(),
            sluice_log::Storage::Null => "null".into(),
        })).check(Check::Custom("disk, null")),
    D::new("storage.backend", Str, "local", Ro, Sluice,
        "Where record data is made durable: local (the journal in log.dirs, synced before each answer) or object (each commit round uploaded as one object to object.store.url and committed in one PostgreSQL transaction at metadata.store.url before it is answered; the data dir is then a cache; docs/object-storage.md).",
        |c, k, v| { c.object_backend.enabled = crate::config::object_backend::parse_backend(k, v).map_err(|e| e.reason)?; Ok(()) },
        Some(|c| if c.object_backend.enabled { "object".into() } else { "local".into() }))
        .check(Check::Custom("local, object")),
    D::new("object.store.url", Str, "", Ro, Sluice,
        "s3://bucket/prefix of the object backend (storage.backend=object). Credentials and region as AWS tools find them: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN), else the AWS_PROFILE profile of ~/.aws/credentials; AWS_REGION.",
        |c, _, v| { c.object_backend.object_store_url = v.trim().to_string(); Ok(()) },
        Some(|c| c.object_backend.object_store_url.clone())),
    D::new("object.store.endpoint", Str, "", Ro, Sluice,
        "http(s)://host:port of an S3-compatible server (SeaweedFS, MinIO, ...), addressed path-style; empty: AWS S3.",
        |c, _, v| { c.object_backend.object_store_endpoint = v.trim().to_string(); Ok(()) },
        Some(|c| c.object_backend.object_store_endpoint.clone())),
    D::new("metadata.store.url", Password, "", Ro, Sluice,
        "postgresql:// URL of the object backend's metadata store; the broker creates and migrates its schema. TLS to PostgreSQL is not supported yet (sslmode=require is refused).",
        |c, _, v| { c.object_backend.metadata_store_url = v.trim().to_string(); Ok(()) },
        Some(|c| c.object_backend.metadata_store_url.clone())).sensitive(),
    D::new("metrics.listen", Str, "", Ro, Sluice,
        "host:port of the admin listener (Prometheus /metrics, /ready); off when empty, port 0 picks one.",
        |c, _, v| {
            c.metrics_listen = Some(values::strip_listener_scheme(v)).filter(|a| !a.is_empty());
            Ok(())
        },
        Some(|c| c.metrics_listen.clone().unwrap_or_default())),
    // --- Accepted, no effect on a single node (stock server.properties carry them) ---------
    D::new("process.roles", List, "broker,controller", Ro, NoEffect,
        "A single node is both.", accept, None).check(Check::Custom("broker, controller")),
    D::new("controller.quorum.voters", List, "", Ro, NoEffect, "No controller quorum.", accept, None),
    D::new("controller.quorum.bootstrap.servers", List, "", Ro, NoEffect, "No controller quorum.",
        accept, None),
    D::new("controller.listener.names", List, "", Ro, Node,
        "Listeners of listeners that are not opened: a single node has no controller quorum, and Kafka serves no client on them.",
        |c, _, v| {
            c.controller_listener_names = v.split(',').map(|n| n.trim().to_ascii_uppercase())
                .filter(|n| !n.is_empty()).collect();
            Ok(())
        },
        Some(|c| c.controller_listener_names.join(","))),
    D::new("inter.broker.listener.name", Str, "", Ro, NoEffect, "No inter-broker traffic.",
        accept, None),
    D::new("num.network.threads", Int, "3", Cw, NoEffect, "Tokio's workers serve the network.",
        accept, None).check(Check::Min(1)),
    D::new("num.io.threads", Int, "8", Cw, NoEffect, "Handlers run on tokio's workers.", accept, None)
        .check(Check::Min(1)),
    D::new("num.recovery.threads.per.data.dir", Int, "1", Cw, NoEffect,
        "Recovery replays one journal.", accept, None).check(Check::Min(1)),
    D::new("socket.send.buffer.bytes", Int, "102400", Ro, NoEffect, "The kernel's default is kept.",
        accept, None),
    D::new("socket.receive.buffer.bytes", Int, "102400", Ro, NoEffect, "The kernel's default is kept.",
        accept, None),
    D::new("offsets.topic.replication.factor", Short, "1", Ro, NoEffect, "Always 1 on a single node.",
        accept, None).check(ONLY_ONE),
    D::new("offsets.topic.num.partitions", Int, "1", Ro, NoEffect,
        "Always 1: one __consumer_offsets partition.", accept, None).check(ONLY_ONE),
    D::new("share.coordinator.state.topic.replication.factor", Short, "1", Ro, NoEffect,
        "Always 1 on a single node.", accept, None).check(ONLY_ONE),
    D::new("share.coordinator.state.topic.min.isr", Short, "1", Ro, NoEffect,
        "Always 1 on a single node.", accept, None).check(ONLY_ONE),
    D::new("min.insync.replicas", Int, "1", Cw, NoEffect, "Default min.insync.replicas: always 1.",
        accept, None).check(ONLY_ONE),
    D::new("unclean.leader.election.enable", Boolean, "false", Cw, NoEffect,
        "Default unclean.leader.election.enable: meaningless on one node.", accept, None),
    D::new("log.flush.interval.messages", Long, I64_MAX, Cw, NoEffect,
        "Default flush.messages: every acknowledged write is synced.", accept, None)
        .check(Check::Min(1)),
    D::new("log.flush.interval.ms", Long, I64_MAX, Cw, NoEffect,
        "Default flush.ms: every acknowledged write is synced.", accept, None).check(Check::Min(0)),
    D::new("log.segment.delete.delay.ms", Long, "60000", Cw, NoEffect,
        "Default file.delete.delay.ms.", accept, None).check(Check::Min(0)),
    D::new("log.preallocate", Boolean, "false", Cw, NoEffect, "Default preallocate.", accept, None),
    D::new("log.index.size.max.bytes", Int, "10485760", Cw, NoEffect, "Default segment.index.bytes.",
        accept, None).check(Check::Min(4)),
    D::new("log.roll.jitter.ms", Long, "0", Cw, NoEffect, "Default segment.jitter.ms.", accept, None)
        .check(Check::Min(0)),
];

/// The settings tables of `docs/configuration.md` (between its `settings:begin` and
/// `settings:end` markers), one per section, rendered from the table.
pub fn markdown_tables() -> String {
    let mut out = String::new();
    for section in Section::ALL {
        out.push_str(&format!("\n### {}\n\n", section.title()));
        out.push_str("| key | type | default | valid values | Kafka update mode | environment variable | description |\n");
        out.push_str("|---|---|---|---|---|---|---|\n");
        for d in BROKER_CONFIGS.iter().filter(|d| d.section == section) {
            let default = match d.default {
                "" => "(none)".to_string(),
                v => format!("`{v}`"),
            };
            let mut doc = d.doc.to_string();
            if d.sensitive {
                doc.push_str(" Sensitive: never shown.");
            }
            if !d.synonyms.is_empty() {
                doc.push_str(&format!(" Synonyms: {}.", d.synonyms.join(", ")));
            }
            out.push_str(&format!(
                "| `{}` | {} | {} | {} | {} | `{}` | {} |\n",
                d.name,
                type_name(d.kind),
                default,
                d.check.describe(),
                d.mode.name(),
                d.env_var(),
                doc.replace('|', "\\|"),
            ));
        }
    }
    out
}

/// Whether `key` is a row of the Security section (what `SecuritySettings::set` stores).
pub(crate) fn is_security_row(key: &str) -> bool {
    lookup(key).is_some_and(|d| d.section == Section::Security)
}

/// The table's defaults are the defaults of [`BrokerConfig`].
impl Default for BrokerConfig {
    fn default() -> Self {
        let mut c = Self {
            listen: "127.0.0.1:9092".into(),
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            node_id: 1,
            data_dir: PathBuf::from("./data"),
            auto_create_topics: true,
            topic_defaults: TopicDefaults::default(),
            explicit: BTreeMap::new(),
            fsync: FsyncPolicy::Always,
            journal_direct_io: true,
            internal_segment_bytes_enable: false,
            segment_files_per_topic_percent: limits::SEGMENT_FILES_PER_TOPIC_PERCENT_DEFAULT,
            storage: Storage::Disk,
            object_backend: Default::default(),
            retention_check_interval_ms: 300_000,
            max_connections: limits::CONNECTIONS_MAX_DEFAULT,
            max_request_bytes: limits::REQUEST_BYTES_MAX_DEFAULT,
            queued_max_request_bytes: limits::QUEUED_REQUEST_BYTES_MAX_DEFAULT,
            max_connections_per_ip: limits::CONNECTIONS_PER_IP_MAX_DEFAULT,
            max_connections_per_ip_overrides: BTreeMap::new(),
            connections_max_idle_ms: limits::CONNECTIONS_IDLE_MS_DEFAULT,
            fetch_max_bytes: limits::FETCH_MAX_BYTES_DEFAULT,
            group: GroupConfig::default(),
            producer_id_expiration_ms: 86_400_000,
            producer_eviction_idle_ms: sluice_log::config::PRODUCER_EVICTION_IDLE_MS_DEFAULT,
            producer_ids_per_ip_max: limits::PRODUCER_IDS_PER_IP_MAX_DEFAULT,
            producer_ids_per_ip_window_ms: limits::PRODUCER_IDS_PER_IP_WINDOW_MS_DEFAULT,
            listener_security_protocol_map: BTreeMap::new(),
            controller_listener_names: Vec::new(),
            security: SecuritySettings::default(),
            connections_max_reauth_ms: 0,
            sasl_server_max_receive_size: limits::SASL_SERVER_MAX_RECEIVE_BYTES_DEFAULT,
            metrics_listen: None,
            log_cleaner: sluice_log::CleanerConfig::default(),
            journal_file_bytes: 128 << 20,
            journal_cleaner: sluice_log::JournalCleanerConfig::default(),
            txn: TxnConfig::default(),
            transaction_abort_cleanup_interval_ms: limits::TXN_ABORT_CLEANUP_INTERVAL_MS_DEFAULT,
            transaction_remove_expired_cleanup_interval_ms:
                limits::TXN_REMOVE_EXPIRED_CLEANUP_INTERVAL_MS_DEFAULT,
            transaction_state_log_segment_bytes: limits::TXN_STATE_SEGMENT_BYTES_DEFAULT,
            authorizer: security::AuthorizerConfig::default(),
            delegation_token: security::TokenConfig::default(),
        };
        // The table's defaults are the defaults: they replace the values above for every
        // setting that owns a field (a test checks that each reads back unchanged).
        for d in BROKER_CONFIGS {
            if d.value.is_some() && !d.default.is_empty() {
                let applied = (d.apply)(&mut c, d.name, d.default);
                debug_assert!(applied.is_ok(), "default of {}: {applied:?}", d.name);
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
    const BEGIN: &str =
        "<!-- settings:begin (generated from config/table.rs; a test checks it) -->\n";
    const END: &str = "<!-- settings:end -->";

    // Goal: docs/configuration.md lists every setting with the table's type, default and
    // rules: the test fails if one is missing or differs. `SLUICE_BLESS_DOCS=1` rewrites it.
    #[test]
    fn configuration_md_matches_the_table() {
        let text = std::fs::read_to_string(DOC).expect("docs/configuration.md");
        let (head, rest) = text.split_once(BEGIN).expect("settings:begin marker");
        let (_, tail) = rest.split_once(END).expect("settings:end marker");
        let wanted = format!("{head}{BEGIN}{}{END}{tail}", markdown_tables());
        if std::env::var_os("SLUICE_BLESS_DOCS").is_some() {
            std::fs::write(DOC, &wanted).expect("write docs/configuration.md");
            return;
        }
        for d in BROKER_CONFIGS {
            let row = format!("| `{}` |", d.name);
            assert!(
                text.contains(&row),
                "docs/configuration.md lacks {}",
                d.name
            );
        }
        assert!(
            text == wanted,
            "docs/configuration.md differs from the config table; rerun this test with SLUICE_BLESS_DOCS=1"
        );
    }

    // Goal: the table is well formed: unique names, every default passes its own check and
    // reads back unchanged from a default config (so the table is the one default).
    #[test]
    fn table_is_well_formed() {
        let c = BrokerConfig::default();
        let mut names = std::collections::BTreeSet::new();
        for d in BROKER_CONFIGS {
            assert!(names.insert(d.name), "{} listed twice", d.name);
            if !d.default.is_empty() {
                d.check_value(d.default)
                    .unwrap_or_else(|e| panic!("{}: {e}", d.name));
            }
            assert_eq!(
                d.current(&c),
                d.default,
                "{}: default config disagrees",
                d.name
            );
            for s in d.synonyms {
                assert!(
                    lookup(s).is_some(),
                    "{}: synonym {s} is not a setting",
                    d.name
                );
            }
        }
    }

    // Goal: the suggestion for a misspelt key is the key meant.
    #[test]
    fn closest_key() {
        assert_eq!(closest("log.retention.msec"), "log.retention.ms");
        assert_eq!(closest("LOG_RETENTION_MS"), "log.retention.ms");
        assert_eq!(closest("num.partition"), "num.partitions");
        assert_eq!(
            closest("group.inital.rebalance.delay.ms"),
            "group.initial.rebalance.delay.ms"
        );
        assert_eq!(env_var("log.retention.ms"), "SLUICE_LOG_RETENTION_MS");
    }
}
