//! OpenMessaging Benchmark workload import: maps an OMB workload YAML (its field names, e.g.
//! `partitionsPerTopic`, `producerRate`, `testDurationMinutes`) onto a scenario, so a published
//! OMB workload runs here unchanged. The mapping keeps OMB's meaning where the bench can honour
//! it (the rate is the aggregate over all producers, as in OMB; OMB's randomized payloads become
//! random bodies) and says so where it cannot: every such field becomes a warning that is shown
//! before the run and kept in the report. Unknown fields are errors, as in scenario files.
//!
//! Scenario keys that may not exist in this build yet (`topics`, `keys`, `backlog_bytes`) are
//! listed in one place, `PENDING_KEYS`: the import asks for them as optional settings, which
//! `ScenarioFile::scenario` applies when `Scenario::set` knows the key and otherwise turns into
//! the warning written here. No Kafka driver settings are in a workload file: acks, linger and
//! the rest stay the baseline's unless given on the command line (OMB's own Kafka driver file
//! uses acks=all, linger.ms=1).

use std::path::Path;

use crate::limits;
use crate::scenario_file::{self, Node, Optional, ScenarioFile};

/// Every field of an OMB workload file.
pub const OMB_FIELDS: [&str; 18] = [
    "name",
    "topics",
    "partitionsPerTopic",
    "keyDistributor",
    "messageSize",
    "messageSizeDistribution",
    "useRandomizedPayloads",
    "randomBytesRatio",
    "randomizedPayloadPoolSize",
    "payloadFile",
    "subscriptionsPerTopic",
    "producersPerTopic",
    "consumerPerSubscription",
    "producerRate",
    "consumerBacklogSizeGB",
    "backlogDrainRatio",
    "testDurationMinutes",
    "warmupDurationMinutes",
];

/// Fields without which the workload is not meaningful.
const REQUIRED: [&str; 5] = [
    "partitionsPerTopic",
    "messageSize",
    "producersPerTopic",
    "producerRate",
    "testDurationMinutes",
];

/// Scenario keys the import sets only when this build has them, with what is lost otherwise.
pub const PENDING_KEYS: [(&str, &str); 3] = [
    (
        "topics",
        "one topic is used, with partitionsPerTopic partitions and all producers and consumers on it",
    ),
    (
        "keys",
        "messages carry no key; partitions are chosen round-robin instead of by key hash",
    ),
    (
        "backlog_bytes",
        "the backlog phase (pause consumers, build the backlog, drain it) is not run",
    ),
];

/// Loads a scenario file, or imports it when it is an OMB workload (`omb` forces that).
pub fn load(path: &Path, omb: bool) -> Result<ScenarioFile, String> {
    let map = scenario_file::read_map(path)?;
    let file = if omb || looks_like_omb(&map) {
        import(path, &map)?
    } else {
        scenario_file::from_map(path, map)?
    };
    scenario_file::checked(path, file)
}

/// Whether a top-level table is an OMB workload rather than a scenario file (OMB's camelCase
/// field names never occur in scenario files).
pub fn looks_like_omb(map: &[(String, Node)]) -> bool {
    map.iter().any(|(k, _)| {
        matches!(
            k.as_str(),
            "partitionsPerTopic"
                | "producersPerTopic"
                | "subscriptionsPerTopic"
                | "consumerPerSubscription"
                | "testDurationMinutes"
        )
    })
}

fn pending_note(key: &str, what: &str) -> String {
    let lost = PENDING_KEYS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, l)| *l)
        .unwrap_or("not applied");
    format!("OMB {what}: not supported yet (scenario key {key:?}); {lost}")
}

/// A file-name-safe version of an OMB name such as "1 topic / 16 partitions / 1Kb".
fn clean_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || "-_.".contains(c) {
            c
        } else {
            '-'
        };
        if !(c == '-' && (out.is_empty() || out.ends_with('-'))) {
            out.push(c);
        }
        if out.len() >= limits::MAX_NAME_BYTES {
            break;
        }
    }
    let out = out.trim_end_matches('-').to_string();
    if out.is_empty() {
        "omb".into()
    } else {
        out
    }
}

/// Maps an OMB workload onto a scenario file over the baseline preset.
pub fn import(path: &Path, map: &[(String, Node)]) -> Result<ScenarioFile, String> {
    let f = Fields {
        map,
        shown: path.display().to_string(),
    };
    f.check()?;
    let name = f.text("name").unwrap_or_else(|| {
        path.file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("omb")
            .to_string()
    });
    let topics = f.whole("topics", 1.0)?.max(1);
    let mut settings = f.load_settings(topics)?;
    let mut optional = f.key_distribution(&mut settings)?;
    let mut warnings = Vec::new();
    if topics > 1 {
        optional.push(Optional {
            key: "topics",
            value: topics.to_string(),
            note: pending_note("topics", &format!("topics {topics}")),
        });
    }
    let backlog_gb = f.num("consumerBacklogSizeGB", 0.0)?;
    if backlog_gb > 0.0 {
        optional.push(Optional {
            key: "backlog_bytes",
            value: format!("{}", (backlog_gb * 1024.0 * 1024.0 * 1024.0).round() as u64),
            note: pending_note(
                "backlog_bytes",
                &format!("consumerBacklogSizeGB {backlog_gb}"),
            ),
        });
    }
    let subscriptions = f.whole("subscriptionsPerTopic", 1.0)?;
    if subscriptions != 1 {
        warnings.push(format!(
            "OMB subscriptionsPerTopic {subscriptions}: not supported; one subscription reads each message once (consumption rates are for one subscription)"
        ));
    }
    if f.whole("producerRate", 0.0)? == 0 {
        // OMB's producerRate 0: search for the maximum sustainable rate.
        settings.push(("rate_search".into(), "true".into()));
    }
    f.payload_warnings(&mut warnings)?;
    Ok(ScenarioFile {
        path: path.to_path_buf(),
        name: clean_name(&name),
        description: Some(format!("OMB workload {name:?}")),
        preset: &crate::presets::PRESETS[0],
        settings,
        optional,
        sweep: Vec::new(),
        gates: Vec::new(),
        warnings,
    })
}

/// A workload file's fields, read with the file's name in every error.
struct Fields<'a> {
    map: &'a [(String, Node)],
    shown: String,
}

impl Fields<'_> {
    /// Every field is an OMB one, and the required ones are there.
    fn check(&self) -> Result<(), String> {
        let shown = &self.shown;
        if let Some((k, _)) = (self.map.iter()).find(|(k, _)| !OMB_FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "{shown}: unknown OMB workload field {k:?}; fields are: {}",
                OMB_FIELDS.join(", ")
            ));
        }
        if let Some(k) = REQUIRED
            .iter()
            .find(|r| !self.map.iter().any(|(k, _)| k == *r))
        {
            return Err(format!("{shown}: OMB workload lacks {k}"));
        }
        Ok(())
    }

    fn get(&self, k: &str) -> Option<&Node> {
        self.map.iter().find(|(f, _)| f == k).map(|(_, n)| n)
    }

    fn num(&self, k: &str, default: f64) -> Result<f64, String> {
        match self.get(k) {
            None | Some(Node::Null) => Ok(default),
            Some(n) => n
                .as_f64()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("{}: {k} must be a number of at least 0", self.shown)),
        }
    }

    fn whole(&self, k: &str, default: f64) -> Result<u64, String> {
        let v = self.num(k, default)?;
        if v.fract() != 0.0 || v > u32::MAX as f64 {
            return Err(format!("{}: {k} must be a whole number", self.shown));
        }
        Ok(v as u64)
    }

    fn text(&self, k: &str) -> Option<String> {
        self.get(k).and_then(Node::scalar_text)
    }

    /// The load: clients per topic times the topics, message size, rate and the phases.
    fn load_settings(&self, topics: u64) -> Result<Vec<(String, String)>, String> {
        let partitions = self.whole("partitionsPerTopic", 1.0)?;
        let producers = self.whole("producersPerTopic", 1.0)? * topics;
        let consumers = self.whole("consumerPerSubscription", 1.0)?.max(1) * topics;
        let duration_s = self.num("testDurationMinutes", 0.0)? * 60.0;
        let warmup_s = self.num("warmupDurationMinutes", 1.0)? * 60.0;
        Ok([
            ("partitions", partitions.to_string()),
            ("producers", producers.to_string()),
            ("consumers", consumers.to_string()),
            ("message_size", self.whole("messageSize", 0.0)?.to_string()),
            ("compression", "none".into()),
            ("payload", "random".into()),
            ("rate", self.whole("producerRate", 0.0)?.to_string()),
            ("duration", format!("{duration_s}s")),
            ("warmup", format!("{warmup_s}s")),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect())
    }

    /// The key distributor: keyed messages go through librdkafka's partitioner, like OMB's
    /// Kafka driver.
    fn key_distribution(
        &self,
        settings: &mut Vec<(String, String)>,
    ) -> Result<Vec<Optional>, String> {
        let mut optional = Vec::new();
        let keys = self
            .text("keyDistributor")
            .unwrap_or_else(|| "NO_KEY".into());
        match keys.as_str() {
            "NO_KEY" => settings.push(("partitioning".into(), "client".into())),
            "KEY_ROUND_ROBIN" | "RANDOM_NANO" => {
                settings.push(("partitioning".into(), "client".into()));
                optional.push(Optional {
                    key: "keys",
                    value: if keys == "KEY_ROUND_ROBIN" {
                        "round-robin".into()
                    } else {
                        "random".into()
                    },
                    note: pending_note("keys", &format!("keyDistributor {keys}")),
                });
            }
            other => {
                return Err(format!(
                "{}: keyDistributor {other:?} is not one of NO_KEY, KEY_ROUND_ROBIN, RANDOM_NANO",
                self.shown
            ))
            }
        }
        Ok(optional)
    }

    /// What the bench does differently from OMB with the payload fields.
    fn payload_warnings(&self, warnings: &mut Vec<String>) -> Result<(), String> {
        let randomized = matches!(self.get("useRandomizedPayloads"), Some(Node::Bool(true)));
        if randomized {
            let ratio = self.num("randomBytesRatio", 1.0)?;
            if ratio < 1.0 {
                warnings.push(format!(
                    "OMB randomBytesRatio {ratio}: bodies are fully random (OMB randomises the first {ratio} of each message and zeros the rest; this matters only with compression)"
                ));
            }
        } else if let Some(f) = self.text("payloadFile") {
            warnings.push(format!(
                "OMB payloadFile {f:?}: not read; bodies are random bytes of messageSize"
            ));
        }
        if self.get("messageSizeDistribution").is_some() {
            warnings.push(
                "OMB messageSizeDistribution: not supported; every message is messageSize bytes"
                    .into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::load;
    use super::*;
    use crate::scenario::{Codec, Partitioning};
    use std::time::Duration;

    fn file(text: &str, name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap_or_default();
        (dir, p)
    }

    const SIMPLE: &str = "name: 1 topic / 16 partitions / 1Kb\ntopics: 1\npartitionsPerTopic: 16\nkeyDistributor: \"NO_KEY\"\nmessageSize: 1024\nuseRandomizedPayloads: true\nrandomBytesRatio: 0.5\nrandomizedPayloadPoolSize: 1000\nsubscriptionsPerTopic: 1\nconsumerPerSubscription: 2\nproducersPerTopic: 4\nproducerRate: 50000\nconsumerBacklogSizeGB: 0\ntestDurationMinutes: 15\nwarmupDurationMinutes: 1\n";

    #[test]
    fn a_workload_maps_onto_a_scenario() {
        let (_d, p) = file(SIMPLE, "w.yaml");
        let f = load(&p, false).unwrap_or_else(|e| panic!("{e}"));
        let (s, warnings) = f.scenario().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.preset, "1-topic-16-partitions-1Kb");
        assert_eq!(s.partitions, 16);
        assert_eq!(s.message_bytes, 1024);
        assert_eq!(s.producers, 4);
        assert_eq!(s.consumers, 2);
        assert_eq!(s.rate_msg_s, 50_000);
        assert_eq!(s.duration_s, Duration::from_secs(900));
        assert_eq!(s.warmup_s, Duration::from_secs(60));
        assert_eq!(s.compression, Codec::None);
        assert_eq!(s.partitioning, Partitioning::Client);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("randomBytesRatio"));
    }

    #[test]
    fn what_cannot_be_honoured_is_listed() {
        let text = SIMPLE
            .replace("topics: 1\n", "topics: 4\n")
            .replace("subscriptionsPerTopic: 1", "subscriptionsPerTopic: 2")
            .replace("\"NO_KEY\"", "KEY_ROUND_ROBIN")
            .replace("producerRate: 50000", "producerRate: 0")
            .replace("consumerBacklogSizeGB: 0", "consumerBacklogSizeGB: 1.5")
            .replace(
                "useRandomizedPayloads: true",
                "useRandomizedPayloads: false",
            )
            + "payloadFile: payload/payload-1Kb.data\n";
        let (_d, p) = file(&text, "w.yml");
        let f = load(&p, false).unwrap_or_else(|e| panic!("{e}"));
        let (s, warnings) = f.scenario().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.producers, 16, "producersPerTopic × topics");
        assert_eq!(s.consumers, 8);
        assert_eq!(s.rate_msg_s, 0);
        assert_eq!(
            s.partitioning,
            Partitioning::Client,
            "keys use the client's partitioner"
        );
        let all = warnings.join("\n");
        assert!(
            s.shaping.rate_search,
            "producerRate 0 is the max-rate search"
        );
        for needle in ["subscriptionsPerTopic 2", "payloadFile"] {
            assert!(all.contains(needle), "{needle}: {all}");
        }
        // Pending keys: applied when the scenario has them, else one warning each.
        let known = crate::scenario::scenario_keys();
        for (key, what) in [
            ("topics", "topics 4"),
            ("keys", "keyDistributor KEY_ROUND_ROBIN"),
            ("backlog_bytes", "consumerBacklogSizeGB 1.5"),
        ] {
            assert_eq!(
                all.contains(what),
                !known.iter().any(|k| k == key),
                "{key}: {all}"
            );
        }
    }

    #[test]
    fn bad_workloads_are_errors() {
        for (text, needle) in [
            (
                SIMPLE.replace("producerRate", "producerRates"),
                "producerRates",
            ),
            (
                SIMPLE.replace("messageSize: 1024\n", ""),
                "lacks messageSize",
            ),
            (SIMPLE.replace("\"NO_KEY\"", "HOT_KEY"), "HOT_KEY"),
            (
                SIMPLE.replace("producersPerTopic: 4", "producersPerTopic: -1"),
                "producersPerTopic",
            ),
            (
                SIMPLE.replace("messageSize: 1024", "messageSize: 10"),
                "message_size",
            ),
        ] {
            let (_d, p) = file(&text, "w.yaml");
            let e = load(&p, true).unwrap_err();
            assert!(e.contains(needle), "{needle}: {e}");
        }
        assert_eq!(clean_name(" / "), "omb");
        assert_eq!(clean_name("max-rate 1 topic"), "max-rate-1-topic");
    }
}
