//! The configuration: [`BrokerConfig`], everything `sluice serve` is told at start, under
//! Kafka's names where a Kafka broker setting exists, with the tables and parsers it is made
//! from: [`table`] (every broker setting), [`topic`] (every topic setting), [`security`]
//! (the security settings, served or refused), [`listeners`] (listener specs) and
//! [`limits`] (the process-wide bounds).
//!
//! Every setting is a row of [`table::BROKER_CONFIGS`]: [`BrokerConfig::set`] checks and
//! applies a value through its row, and refuses keys that have none (with the closest known
//! key as a suggestion). [`BrokerConfig::load`] layers the sources: defaults (the table), then
//! a `server.properties` file, then `SLUICE_*` environment variables, then command-line flags
//! (`--override` and the convenience flags). A later source wins over an earlier one; within
//! one source, the later line wins.
//!
//! Direction: the bottom of the crate. It imports nothing else from the crate (checked by
//! `tests/layers.rs`); the network, handlers, services and leaf modules read it.

use std::collections::BTreeMap;

mod broker;
pub mod limits;
pub mod listeners;
pub mod object_backend;
pub mod security;
pub mod table;
pub mod topic;
pub mod values;

pub use broker::{BrokerConfig, TopicDefaults};
pub use values::{parse_timestamp_type, ConfigError};

/// Where a setting came from, for error messages.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: {error}")]
pub struct LoadError {
    pub origin: String,
    pub error: ConfigError,
}

impl BrokerConfig {
    /// Applies one setting by its key: a row of the config table, or a per-listener or
    /// per-mechanism security key (`config::security`). Any other key is an error that names
    /// the closest known key.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), ConfigError> {
        let v = value.trim();
        let Some(def) = table::lookup(key) else {
            // Security settings outside the table are stored apart (never in `explicit`:
            // JAAS values hold passwords), or refused when not served.
            if self.security.set(key, v, table::is_security_row)? {
                return Ok(());
            }
            return Err(ConfigError {
                key: key.into(),
                value: v.into(),
                reason: format!(
                    "not a broker setting; did you mean {}? (docs/configuration.md lists them)",
                    table::closest(key)
                ),
            });
        };
        let shown = if def.sensitive || v.len() > 80 {
            "(value)"
        } else {
            v
        };
        let refused = |reason: String| ConfigError {
            key: key.into(),
            value: shown.into(),
            reason,
        };
        def.check_value(v).map_err(refused)?;
        (def.apply)(self, key, v).map_err(refused)?;
        let kept = if def.sensitive { "" } else { v };
        self.explicit.insert(key.to_string(), kept.to_string());
        Ok(())
    }

    /// Applies a `server.properties` file's text; the error names the line.
    pub fn apply_properties(&mut self, text: &str) -> Result<(), LoadError> {
        for (n, line) in logical_lines(text).iter().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
                continue;
            }
            let origin = || format!("line {}", n + 1);
            let Some((key, value)) = line.split_once(['=', ':']) else {
                return Err(LoadError {
                    origin: origin(),
                    error: ConfigError {
                        key: line.into(),
                        value: String::new(),
                        reason: "expected key=value".into(),
                    },
                });
            };
            self.set(key.trim(), value).map_err(|error| LoadError {
                origin: origin(),
                error,
            })?;
        }
        Ok(())
    }

    /// The config from its sources, each winning over the ones before: the table's
    /// defaults, the `server.properties` text (`file`: its name and text), the environment
    /// (`env`: every variable, name and value; see [`BrokerConfig::apply_env`]), and the
    /// command-line flags in order (`--override` first, then the convenience flags, which
    /// are aliases of table keys). The result is validated.
    pub fn load(
        file: Option<(&str, &str)>,
        env: &[(String, String)],
        flags: &[(String, String)],
    ) -> Result<BrokerConfig, LoadError> {
        let mut c = BrokerConfig::default();
        if let Some((name, text)) = file {
            c.apply_properties(text).map_err(|e| LoadError {
                origin: format!("{name} {}", e.origin),
                error: e.error,
            })?;
        }
        c.apply_env(env)?;
        for (key, value) in flags {
            c.set(key, value).map_err(|error| LoadError {
                origin: "command line".into(),
                error,
            })?;
        }
        c.validate().map_err(|error| LoadError {
            origin: "settings".into(),
            error,
        })?;
        Ok(c)
    }

    /// Applies the `SLUICE_*` variables of `env`: `SLUICE_` + a table key upper-cased with
    /// dots as underscores sets that key (in the table's order, so a synonym's row order
    /// decides as in a file); a variable of [`NOT_SETTINGS`] is not ours to read; any other
    /// `SLUICE_*` variable is refused with the closest setting, so a misspelt variable never
    /// leaves a setting silently at its default.
    pub fn apply_env(&mut self, env: &[(String, String)]) -> Result<(), LoadError> {
        let mut given = BTreeMap::new();
        for (var, value) in env {
            if !var.starts_with("SLUICE_") || is_not_setting(var) {
                continue;
            }
            if !table::BROKER_CONFIGS.iter().any(|d| d.env_var() == *var) {
                // `SLUICE_FSYNC` means `sluice.fsync` (whose variable is SLUICE_SLUICE_FSYNC).
                let key = var["SLUICE_".len()..]
                    .to_ascii_lowercase()
                    .replace('_', ".");
                let meant = table::lookup(&format!("sluice.{key}"))
                    .map_or_else(|| table::closest(&key), |d| d.name);
                return Err(LoadError {
                    origin: var.clone(),
                    error: ConfigError {
                        key: var.clone(),
                        value: value.clone(),
                        reason: format!(
                            "not a broker setting; did you mean {} ({meant})? (docs/configuration.md lists them)",
                            table::env_var(meant)
                        ),
                    },
                });
            }
            given.insert(var.as_str(), value.as_str());
        }
        for d in table::BROKER_CONFIGS {
            let var = d.env_var();
            if let Some(value) = given.get(var.as_str()) {
                self.set(d.name, value)
                    .map_err(|error| LoadError { origin: var, error })?;
            }
        }
        Ok(())
    }

    /// Checks the rules that join settings (a single value's range is checked by its row of
    /// the config table when it is set).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, value: String, reason: &str| ConfigError {
            key: key.into(),
            value,
            reason: reason.into(),
        };
        let served = self.served_listener_specs();
        if served.is_empty() {
            return Err(bad(
                "listeners",
                crate::config::table::listener_list(&self.listener_specs()),
                "every listener is a controller listener (controller.listener.names): name one that serves clients",
            ));
        }
        for spec in &served {
            let protocol = security::protocol_of(&spec.name, &self.listener_security_protocol_map)?;
            security::check_listener(&spec.name, protocol, &self.security)?;
        }
        listeners::check_advertised(&self.listener_specs(), &self.advertised_listeners)?;
        self.object_backend.check()?;
        let cleaner = &self.log_cleaner;
        let per_thread = cleaner.dedupe_buffer_bytes / cleaner.threads.max(1) as u64;
        if per_thread < limits::LOG_CLEANER_DEDUPE_BYTES_PER_THREAD_MIN {
            return Err(bad(
                "log.cleaner.dedupe.buffer.size",
                cleaner.dedupe_buffer_bytes.to_string(),
                "must be at least 1 MiB per cleaner thread",
            ));
        }
        if self.queued_max_request_bytes < self.max_request_bytes {
            return Err(bad(
                "queued.max.request.bytes",
                self.queued_max_request_bytes.to_string(),
                "must be at least socket.request.max.bytes",
            ));
        }
        let g = &self.group;
        if g.group_min_session_timeout_ms > g.group_max_session_timeout_ms {
            return Err(bad(
                "group.min.session.timeout.ms",
                g.group_min_session_timeout_ms.to_string(),
                "must not exceed group.max.session.timeout.ms",
            ));
        }
        if g.consumer_heartbeat_interval_ms >= g.consumer_session_timeout_ms {
            return Err(bad(
                "group.consumer.heartbeat.interval.ms",
                g.consumer_heartbeat_interval_ms.to_string(),
                "must be below group.consumer.session.timeout.ms",
            ));
        }
        Ok(())
    }
}

/// `SLUICE_*` variables that are not broker settings, and which the broker ignores: the log
/// filter (`SLUICE_LOG`), the revision a build records (`SLUICE_GIT_SHA`), and the knobs of
/// this project's own tests, benches and scripts, which a broker they start inherits.
pub const NOT_SETTINGS: &[&str] = &[
    "SLUICE_LOG",
    "SLUICE_GIT_SHA",
    "SLUICE_BIN",
    "SLUICE_BLESS_DOCS",
    "SLUICE_STARTUP_TIMEOUT_S",
    "SLUICE_PERF_PORT",
    "SLUICE_IDEMPOTENCE_CHILD_DIR",
    "SLUICE_UNGUARDED_CHILD",
];

/// Prefixes of further tooling variables ignored the same way (`SLUICE_TEST_KAFKA_VERSION`,
/// `SLUICE_BENCH_BOOTSTRAP`, `SLUICE_FUZZ_CASES`, ...). No table key starts with one (a test
/// checks it).
pub const NOT_SETTING_PREFIXES: &[&str] = &[
    "SLUICE_TEST_",
    "SLUICE_BENCH_",
    "SLUICE_FUZZ_",
    "SLUICE_CRASH_",
    "SLUICE_MODEL_",
    "SLUICE_TXN_MODEL_",
    "SLUICE_ALLOC_",
];

fn is_not_setting(var: &str) -> bool {
    NOT_SETTINGS.contains(&var) || NOT_SETTING_PREFIXES.iter().any(|p| var.starts_with(p))
}

/// A properties file's logical lines: a line ending in an odd number of backslashes continues
/// on the next one, whose leading whitespace is dropped (Java's `Properties` rule; Kafka's JAAS
/// and inline PEM values are usually written this way). Comment lines never continue.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for raw in text.lines() {
        let line = match &current {
            Some(_) => raw.trim_start(),
            None => raw,
        };
        let comment =
            current.is_none() && matches!(line.trim_start().chars().next(), Some('#' | '!'));
        let backslashes = line.chars().rev().take_while(|c| *c == '\\').count();
        if !comment && backslashes % 2 == 1 {
            current
                .get_or_insert_with(String::new)
                .push_str(&line[..line.len() - 1]);
            continue;
        }
        let mut whole = current.take().unwrap_or_default();
        whole.push_str(line);
        out.push(whole);
    }
    out.extend(current);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::listeners::ListenerSpec;
    use sluice_coordinator::{GroupConfig, TxnConfig};

    // Goal: a server.properties file maps onto the config; an unknown key is an error that
    // names the line and suggests the key meant.
    #[test]
    fn applies_properties() {
        let mut c = BrokerConfig::default();
        c.apply_properties("# comment\nlisteners=PLAINTEXT://0.0.0.0:19092\nnum.partitions=3\nlog.retention.hours=2\n")
            .unwrap();
        assert_eq!(c.listen, "0.0.0.0:19092");
        assert_eq!(c.topic_defaults.partitions, 3);
        assert_eq!(c.topic_defaults.retention_ms, 7_200_000);
        assert!(c.explicit.contains_key("num.partitions"));
        let e = c.apply_properties("a=1\n\nnum.partitions=x").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        let e = c.apply_properties("\nnum.partition=2").unwrap_err();
        assert_eq!(e.origin, "line 2");
        assert!(
            e.error.reason.contains("did you mean num.partitions?"),
            "{e}"
        );
        assert!(c.apply_properties("num.partitions=x").is_err());
        assert!(c.apply_properties("num.partitions=0").is_err());
    }

    // Goal: file < environment < flags, each for every table key; the env name is SLUICE_
    // plus the key upper-cased with dots as underscores.
    #[test]
    fn sources_have_a_precedence() {
        let file = "log.retention.ms=1000\nlog.segment.bytes=4194304\nnum.partitions=2\n";
        let env = vars(&[
            ("SLUICE_LOG_RETENTION_MS", "2000"),
            ("SLUICE_LOG_SEGMENT_BYTES", "8388608"),
            ("SLUICE_LOG", "debug"),
            ("PATH", "/bin"),
        ]);
        let flags = vec![("log.segment.bytes".to_string(), "16777216".to_string())];
        let c = BrokerConfig::load(Some(("server.properties", file)), &env, &flags).unwrap();
        assert_eq!(c.topic_defaults.partitions, 2, "file over default");
        assert_eq!(c.topic_defaults.retention_ms, 2000, "env over file");
        assert_eq!(c.topic_defaults.segment_bytes, 16777216, "flag over env");
        let c = BrokerConfig::load(None, &[], &[]).unwrap();
        assert!(c.explicit.is_empty());
        let bad_env = vars(&[("SLUICE_NUM_PARTITIONS", "x")]);
        let e = BrokerConfig::load(None, &bad_env, &[]).unwrap_err();
        assert_eq!(e.origin, "SLUICE_NUM_PARTITIONS");
        let e = BrokerConfig::load(Some(("f.properties", "x.y=1")), &[], &[]).unwrap_err();
        assert!(e.to_string().starts_with("f.properties line 1"), "{e}");
        let flags = vec![("log.retention.msec".to_string(), "5".to_string())];
        let e = BrokerConfig::load(None, &[], &flags).unwrap_err();
        assert!(
            e.to_string().contains("did you mean log.retention.ms?"),
            "{e}"
        );
    }

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    // Goal: a `SLUICE_*` variable that names no setting stops the load with the variable
    // meant, unless it is one of the project's own non-setting variables; no table key's
    // variable falls under a non-setting name or prefix (it would be ignored).
    #[test]
    fn unknown_env_vars_are_refused() {
        for (var, meant) in [
            (
                "SLUICE_NUM_PARTITION",
                "SLUICE_NUM_PARTITIONS (num.partitions)",
            ),
            ("SLUICE_LOG_RETENTION_MSEC", "SLUICE_LOG_RETENTION_MS"),
            ("SLUICE_FSYNC", "SLUICE_SLUICE_FSYNC (sluice.fsync)"),
        ] {
            let e = BrokerConfig::load(None, &vars(&[(var, "1")]), &[]).unwrap_err();
            assert_eq!(e.origin, var);
            assert!(
                e.to_string().contains(&format!("did you mean {meant}")),
                "{e}"
            );
        }
        let tooling = vars(&[
            ("SLUICE_LOG", "debug"),
            ("SLUICE_GIT_SHA", "abc"),
            ("SLUICE_BIN", "/x"),
            ("SLUICE_TEST_KAFKA_VERSION", "4.1.1"),
            ("SLUICE_BENCH_BOOTSTRAP", "127.0.0.1:9092"),
            ("SLUICE_FUZZ_CASES", "5"),
            ("NOT_SLUICE_X", "1"),
        ]);
        BrokerConfig::load(None, &tooling, &[]).unwrap();
        for d in table::BROKER_CONFIGS {
            assert!(!is_not_setting(&d.env_var()), "{} would be ignored", d.name);
        }
    }

    // Goal: a KRaft-style server.properties as Kafka ships it loads: the settings that do
    // not apply to one node are table rows accepted with no effect, not unknown keys.
    #[test]
    fn kafka_style_file_loads() {
        let text = "process.roles=broker,controller\nnode.id=1\n\
            controller.quorum.bootstrap.servers=localhost:9093\n\
            listeners=PLAINTEXT://127.0.0.1:0\ninter.broker.listener.name=PLAINTEXT\n\
            controller.listener.names=CONTROLLER\n\
            listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n\
            num.network.threads=3\nnum.io.threads=8\nsocket.send.buffer.bytes=102400\n\
            socket.receive.buffer.bytes=102400\nsocket.request.max.bytes=104857600\n\
            log.dirs=/tmp/kraft-combined-logs\nnum.partitions=1\n\
            num.recovery.threads.per.data.dir=1\noffsets.topic.replication.factor=1\n\
            share.coordinator.state.topic.replication.factor=1\n\
            share.coordinator.state.topic.min.isr=1\n\
            transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n\
            log.retention.hours=168\nlog.segment.bytes=1073741824\n\
            log.retention.check.interval.ms=300000\n";
        let c = BrokerConfig::load(Some(("server.properties", text)), &[], &[]).unwrap();
        assert_eq!(c.data_dir, std::path::Path::new("/tmp/kraft-combined-logs"));
        assert_eq!(
            c.explicit.get("num.io.threads").map(String::as_str),
            Some("8")
        );
    }

    // Goal: a stock KRaft file's CONTROLLER listener is not opened, while it stays the
    // configured value and an advertised name; a file naming only controller listeners is
    // refused rather than starting a broker nobody can reach.
    #[test]
    fn controller_listeners_are_not_opened() {
        let text = "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n\
            advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093\n\
            controller.listener.names=CONTROLLER\n\
            listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n";
        let c = BrokerConfig::load(Some(("server.properties", text)), &[], &[]).unwrap();
        let names =
            |specs: Vec<ListenerSpec>| specs.into_iter().map(|s| s.name).collect::<Vec<_>>();
        assert_eq!(names(c.served_listener_specs()), ["PLAINTEXT"]);
        assert_eq!(names(c.listener_specs()), ["PLAINTEXT", "CONTROLLER"]);
        let text = "listeners=CONTROLLER://127.0.0.1:0\ncontroller.listener.names=controller\n\
            listener.security.protocol.map=CONTROLLER:PLAINTEXT\n";
        let e = BrokerConfig::load(Some(("server.properties", text)), &[], &[]).unwrap_err();
        assert!(
            e.to_string()
                .contains("every listener is a controller listener"),
            "{e}"
        );
    }

    // Goal: secrets never land in `explicit` (and so in no Debug output or DescribeConfigs).
    #[test]
    fn secrets_are_not_kept() {
        let mut c = BrokerConfig::default();
        c.set("ssl.keystore.key", "-----BEGIN PRIVATE KEY----- hunter2")
            .unwrap();
        assert_eq!(
            c.explicit.get("ssl.keystore.key").map(String::as_str),
            Some("")
        );
        let e = c.set("ssl.keystore.type", "JKS").unwrap_err();
        assert!(e.reason.contains("only PEM"), "{e}");
        assert!(
            c.set("ssl.cipher.suites", "x").is_err(),
            "unserved security keys refuse"
        );
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    // Goal: backslash continuation joins lines as Java's Properties does (JAAS values).
    #[test]
    fn continued_lines() {
        let text = "a=1 \\\n   2\n# c \\\nb=x\\\\\nc=3 \\";
        assert_eq!(
            logical_lines(text),
            vec!["a=1 2", "# c \\", "b=x\\\\", "c=3 "]
        );
    }

    // Goal: the network limits parse under Kafka's names, overrides by address.
    #[test]
    fn network_limits() {
        let mut c = BrokerConfig::default();
        c.apply_properties("max.connections.per.ip=5\nmax.connections.per.ip.overrides=127.0.0.2:1, [::1]:7\nconnections.max.idle.ms=1000\nfetch.max.bytes=2048\n")
            .unwrap();
        assert_eq!(c.connections_per_ip_max("127.0.0.1".parse().unwrap()), 5);
        assert_eq!(c.connections_per_ip_max("127.0.0.2".parse().unwrap()), 1);
        assert_eq!(c.connections_per_ip_max("::1".parse().unwrap()), 7);
        assert_eq!(c.connections_max_idle_ms, 1000);
        assert_eq!(c.fetch_max_bytes, 2048);
        c.validate().unwrap();
        assert!(c
            .set("max.connections.per.ip.overrides", "localhost:3")
            .is_err());
        assert!(c.set("fetch.max.bytes", "10").is_err());
        c.set("queued.max.request.bytes", "2048").unwrap();
        assert!(
            c.validate().is_err(),
            "queued below socket.request.max.bytes"
        );
    }

    #[test]
    fn transaction_settings() {
        let mut c = BrokerConfig::default();
        c.apply_properties(
            "transaction.max.timeout.ms=5000\ntransactional.id.expiration.ms=60000\n\
             transaction.abort.timed.out.transaction.cleanup.interval.ms=100\n\
             transaction.remove.expired.transaction.cleanup.interval.ms=200\n\
             transaction.state.log.segment.bytes=1048576\n",
        )
        .unwrap();
        assert_eq!(c.txn.transaction_max_timeout_ms, 5000);
        assert_eq!(c.txn.transactional_id_expiration_ms, 60_000);
        assert_eq!(c.transaction_abort_cleanup_interval_ms, 100);
        assert_eq!(c.transaction_remove_expired_cleanup_interval_ms, 200);
        assert_eq!(c.transaction_state_log_segment_bytes, 1 << 20);
        c.validate().unwrap();
        for bad in [
            "transaction.max.timeout.ms=0",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=0",
            "transaction.state.log.segment.bytes=100",
        ] {
            let mut c = BrokerConfig::default();
            assert!(c.apply_properties(bad).is_err(), "{bad}");
        }
    }

    // Goal: no second default: the crates' own defaults for what a broker setting controls
    // equal the table's (the broker always passes its values, but tools and tests use the
    // crates' defaults directly).
    #[test]
    fn crate_defaults_match_the_table() {
        let c = BrokerConfig::default();
        let log = sluice_log::LogManagerConfig::new("x");
        assert_eq!(
            log.retention_check_interval_ms,
            c.retention_check_interval_ms
        );
        assert_eq!(log.producer_id_expiration_ms, c.producer_id_expiration_ms);
        assert_eq!(log.producer_eviction_idle_ms, c.producer_eviction_idle_ms);
        assert_eq!(log.cleaner, c.log_cleaner);
        assert_eq!(log.journal_cleaner, c.journal_cleaner);
        assert_eq!(log.journal_file_bytes_max, c.journal_file_bytes);
        assert_eq!(log.fsync, c.fsync);
        let topic = crate::config::topic::log_config(&BTreeMap::new(), &c);
        assert_eq!(topic, sluice_log::LogConfig::default());
        let g = GroupConfig::default();
        assert_eq!(
            (
                g.group_min_session_timeout_ms,
                g.group_max_session_timeout_ms
            ),
            (
                c.group.group_min_session_timeout_ms,
                c.group.group_max_session_timeout_ms
            )
        );
        assert_eq!(
            g.group_initial_rebalance_delay_ms,
            c.group.group_initial_rebalance_delay_ms
        );
        assert_eq!(g.group_max_size, c.group.group_max_size);
        assert_eq!(g.offsets_retention_ms, c.group.offsets_retention_ms);
        assert_eq!(
            g.offset_metadata_bytes_max,
            c.group.offset_metadata_bytes_max
        );
        assert_eq!(
            g.consumer_session_timeout_ms,
            c.group.consumer_session_timeout_ms
        );
        assert_eq!(
            g.consumer_heartbeat_interval_ms,
            c.group.consumer_heartbeat_interval_ms
        );
        assert_eq!(g.consumer_group_max_size, c.group.consumer_group_max_size);
        let t = TxnConfig::default();
        assert_eq!(
            t.transaction_max_timeout_ms,
            c.txn.transaction_max_timeout_ms
        );
        assert_eq!(
            t.transactional_id_expiration_ms,
            c.txn.transactional_id_expiration_ms
        );
    }
}
