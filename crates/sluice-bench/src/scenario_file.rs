//! Scenario files and sweeps. A scenario file (TOML or YAML) names a base preset, a name and a
//! description, scenario keys (exactly the keys `Scenario::set` takes), an optional `sweep`
//! (key → list of values: one run per combination) and optional `gates` (same syntax as
//! `--gate`). OMB workload files are recognised by their fields and imported (`omb_import::load`, the entry point
//! for files of either kind).
//!
//! Guarantees: every key of a file is checked when the file is loaded, before any run; an
//! unknown key or a bad value is an error naming the file and the key. Values are applied in
//! file order through `Scenario::set`, the same path the sweeps use. Sweeps expand in the order
//! their keys were written (first key outermost) and are bounded by `limits::MAX_SWEEP_RUNS`.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::gate::{self, Gate};
use crate::limits;
use crate::presets::{self, Preset};
use crate::scenario::{self, Scenario};

/// A parsed TOML or YAML document, keeping the order of map keys (so sweeps expand as written).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    List(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    /// The text `Scenario::set` receives for a scalar; None for a list or map.
    pub fn scalar_text(&self) -> Option<String> {
        match self {
            Node::Null => Some("none".into()),
            Node::Bool(b) => Some(b.to_string()),
            Node::Int(i) => Some(i.to_string()),
            Node::Float(f) => Some(f.to_string()),
            Node::Str(s) => Some(s.clone()),
            Node::List(_) | Node::Map(_) => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Node::Int(i) => Some(*i as f64),
            Node::Float(f) => Some(*f),
            Node::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Int(_) | Node::Float(_) => "a number",
            Node::Str(_) => "a string",
            Node::List(_) => "a list",
            Node::Map(_) => "a table",
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar, list or table")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Int(v.into()))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(Node::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut v = Vec::new();
        while let Some(n) = seq.next_element::<Node>()? {
            v.push(n);
        }
        Ok(Node::List(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut v: Vec<(String, Node)> = Vec::new();
        while let Some((k, n)) = map.next_entry::<Node, Node>()? {
            let key = k
                .scalar_text()
                .ok_or_else(|| de::Error::custom("a table key must be a scalar"))?;
            if v.iter().any(|(seen, _)| *seen == key) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            v.push((key, n));
        }
        Ok(Node::Map(v))
    }
}

/// Reads and parses a TOML (`.toml`) or YAML (`.yaml`, `.yml`, `.json`) file.
pub fn read_node(path: &Path) -> Result<Node, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    if meta.len() > limits::MAX_SCENARIO_FILE_BYTES {
        return Err(format!(
            "{shown} is {} bytes; scenario files are at most {}",
            meta.len(),
            limits::MAX_SCENARIO_FILE_BYTES
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "toml" => {
            toml::from_str::<Node>(&text).map_err(|e| format!("{shown}: not valid TOML: {e}"))
        }
        "yaml" | "yml" | "json" => serde_norway::from_str::<Node>(&text)
            .map_err(|e| format!("{shown}: not valid YAML: {e}")),
        _ => Err(format!(
            "{shown}: a scenario file ends in .toml, .yaml or .yml"
        )),
    }
}

/// A key the file sets only if this build's `Scenario` has it (OMB fields whose scenario key
/// may not exist yet); otherwise `note` becomes a warning.
#[derive(Debug, Clone)]
pub struct Optional {
    pub key: &'static str,
    pub value: String,
    pub note: String,
}

/// A loaded scenario file (or imported OMB workload).
#[derive(Debug, Clone)]
pub struct ScenarioFile {
    pub path: PathBuf,
    pub name: String,
    pub description: Option<String>,
    pub preset: &'static Preset,
    /// `(key, value)` in file order, applied with `Scenario::set` over the preset.
    pub settings: Vec<(String, String)>,
    pub optional: Vec<Optional>,
    pub sweep: Sweep,
    pub gates: Vec<Gate>,
    /// What an import could not honour (shown before the run and kept in each report).
    pub warnings: Vec<String>,
}

impl ScenarioFile {
    /// The preset's scenario with the file's settings applied, named after the file. Also
    /// returns the warnings of optional keys this build does not know.
    pub fn scenario(&self) -> Result<(Scenario, Vec<String>), String> {
        let mut s = self.preset.scenario();
        let shown = self.path.display();
        for (k, v) in &self.settings {
            s.set(k, v).map_err(|e| format!("{shown}: {e}"))?;
        }
        let known = scenario::scenario_keys();
        let mut warnings = self.warnings.clone();
        for o in &self.optional {
            if known.iter().any(|k| k == o.key) {
                // Known but refusing the value: the mapping needs completing; run without it.
                if let Err(e) = s.set(o.key, &o.value) {
                    warnings.push(format!("{} ({e})", o.note));
                }
            } else {
                warnings.push(o.note.clone());
            }
        }
        s.preset = self.name.clone();
        Ok((s, warnings))
    }
}

/// Loads a scenario file. OMB workload files are recognised by `omb_import::load`, the entry
/// point for files of either kind.
pub fn load(path: &Path) -> Result<ScenarioFile, String> {
    let map = read_map(path)?;
    checked(path, from_map(path, map)?)
}

/// A file's top-level table, in the order written.
pub fn read_map(path: &Path) -> Result<Vec<(String, Node)>, String> {
    let node = read_node(path)?;
    let Node::Map(map) = node else {
        return Err(format!(
            "{}: expected a table of keys at the top, found {}",
            path.display(),
            node.kind()
        ));
    };
    Ok(map)
}

/// The file, once every key and value is checked (now, before any run).
pub fn checked(path: &Path, file: ScenarioFile) -> Result<ScenarioFile, String> {
    file.scenario()?;
    for (k, values) in &file.sweep {
        check_sweep_values(k, values).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(file)
}

fn stem_name(path: &Path) -> String {
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("scenario");
    let cleaned: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(limits::MAX_NAME_BYTES)
        .collect();
    if cleaned.is_empty() {
        "scenario".into()
    } else {
        cleaned
    }
}

pub fn from_map(path: &Path, map: Vec<(String, Node)>) -> Result<ScenarioFile, String> {
    let shown = path.display().to_string();
    let text = |k: &str, n: &Node| -> Result<String, String> {
        // `topic_config` and `client_config` are the keys whose value is a table (config
        // name -> value).
        let is_table_key = matches!(
            k.rsplit('.').next().unwrap_or(k).replace('-', "_").as_str(),
            "topic_config" | "client_config"
        );
        // `fault_cmd` is the one key whose value is a list (of `AT:COMMAND` strings).
        let is_list_key = k.replace('-', "_") == "fault_cmd";
        match n {
            Node::Map(entries) if is_table_key => table_text(entries)
                .ok_or_else(|| format!("{shown}: {k}: every value must be a single value")),
            Node::List(items) if is_list_key => items
                .iter()
                .map(Node::scalar_text)
                .collect::<Option<Vec<String>>>()
                .map(|v| serde_json::Value::from(v).to_string())
                .ok_or_else(|| format!("{shown}: {k}: every item must be a string")),
            _ => n
                .scalar_text()
                .ok_or_else(|| format!("{shown}: {k} must be a single value, not {}", n.kind())),
        }
    };
    let mut file = ScenarioFile {
        path: path.to_path_buf(),
        name: stem_name(path),
        description: None,
        preset: &presets::PRESETS[0],
        settings: Vec::new(),
        optional: Vec::new(),
        sweep: Vec::new(),
        gates: Vec::new(),
        warnings: Vec::new(),
    };
    for (k, n) in map {
        match k.as_str() {
            "name" => file.name = text(&k, &n)?,
            "description" => file.description = Some(text(&k, &n)?),
            "preset" => {
                let p = text(&k, &n)?;
                file.preset = presets::find_preset(&p).ok_or_else(|| {
                    format!(
                        "{shown}: unknown preset {p:?}; presets are:\n{}",
                        presets::preset_list()
                    )
                })?;
            }
            "sweep" => {
                let Node::Map(entries) = n else {
                    return Err(format!(
                        "{shown}: sweep must be a table of key = [values], not {}",
                        n.kind()
                    ));
                };
                for (sk, sv) in entries {
                    let values = match sv {
                        Node::List(items) => items
                            .iter()
                            .map(|i| text(&format!("sweep.{sk}"), i))
                            .collect::<Result<Vec<_>, _>>()?,
                        other => vec![text(&format!("sweep.{sk}"), &other)?],
                    };
                    file.sweep.push((sk, values));
                }
            }
            "gates" => {
                let items = match n {
                    Node::List(items) => items,
                    other => vec![other],
                };
                for i in &items {
                    let expr = text("gates", i)?;
                    file.gates
                        .push(gate::parse(&expr).map_err(|e| format!("{shown}: {e}"))?);
                }
            }
            _ => {
                let v = text(&k, &n)?;
                file.settings.push((k, v));
            }
        }
    }
    // The report's `scenario.preset` carries the name: checked like any other.
    Scenario::baseline()
        .set("preset", &file.name)
        .map_err(|e| format!("{shown}: name: {e}"))?;
    Ok(file)
}

/// A table of scalars as the JSON object text `Scenario::set` takes for `topic_config` and
/// `client_config`. Nested tables are dotted names, so a TOML `[client_config]` section may
/// write `security.protocol = "SASL_SSL"` unquoted.
fn table_text(entries: &[(String, Node)]) -> Option<String> {
    fn flatten(
        prefix: &str,
        entries: &[(String, Node)],
        obj: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Option<()> {
        for (k, v) in entries {
            let name = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            match v {
                Node::Map(inner) => flatten(&name, inner, obj)?,
                _ => {
                    obj.insert(name, serde_json::Value::String(v.scalar_text()?));
                }
            }
        }
        Some(())
    }
    let mut obj = serde_json::Map::new();
    flatten("", entries, &mut obj)?;
    Some(serde_json::Value::Object(obj).to_string())
}

/// Sweep keys and their values, in the order given.
pub type Sweep = Vec<(String, Vec<String>)>;

/// `key=v1,v2,...` from the command line.
pub fn parse_sweep_arg(arg: &str) -> Result<(String, Vec<String>), String> {
    let (k, vs) = arg
        .split_once('=')
        .ok_or_else(|| format!("sweep {arg:?}: expected KEY=V1,V2,... e.g. linger_ms=0,5"))?;
    let values: Vec<String> = vs.split(',').map(|v| v.trim().to_string()).collect();
    let k = k.trim().to_string();
    check_sweep_values(&k, &values).map_err(|e| format!("sweep {arg:?}: {e}"))?;
    Ok((k, values))
}

fn check_sweep_values(key: &str, values: &[String]) -> Result<(), String> {
    if values.is_empty() || values.iter().any(String::is_empty) {
        return Err(format!("sweep {key}: empty value"));
    }
    if values.len() > limits::MAX_SWEEP_VALUES {
        return Err(format!(
            "sweep {key}: {} values; at most {}",
            values.len(),
            limits::MAX_SWEEP_VALUES
        ));
    }
    let mut s = Scenario::baseline();
    for v in values {
        s.set(key, v)?;
    }
    Ok(())
}

fn canonical(key: &str) -> String {
    key.trim().to_ascii_lowercase().replace('-', "_")
}

/// The command line's sweep over the file's: a key given on both wins from the command line.
pub fn merge_sweeps(file: &Sweep, cli: &Sweep) -> Sweep {
    let mut out: Sweep = file
        .iter()
        .filter(|(k, _)| !cli.iter().any(|(c, _)| canonical(c) == canonical(k)))
        .cloned()
        .collect();
    out.extend(cli.iter().cloned());
    out
}

/// Every run: each preset variant (or the single run) times every combination of the sweep
/// values, labelled `variant,key=value,...`. Swept values are applied last, so they win over
/// the file and the command-line flags; each run is normalised and validated.
pub fn expand(
    runs: Vec<(Option<String>, Scenario)>,
    sweep: &Sweep,
) -> Result<Vec<(Option<String>, Scenario)>, String> {
    let combos: usize = sweep.iter().map(|(_, v)| v.len().max(1)).product();
    let total = combos.saturating_mul(runs.len());
    if total > limits::MAX_SWEEP_RUNS {
        return Err(format!(
            "the sweep expands to {total} runs; at most {} are allowed",
            limits::MAX_SWEEP_RUNS
        ));
    }
    if sweep.is_empty() {
        return Ok(runs);
    }
    let mut out = Vec::with_capacity(total);
    for (label, base) in runs {
        for i in 0..combos {
            let mut s = base.clone();
            let mut parts: Vec<String> = label.iter().cloned().collect();
            // Mixed-radix digits of `i`, last key fastest.
            let mut rest = i;
            let mut picks = vec![0; sweep.len()];
            for (j, (_, values)) in sweep.iter().enumerate().rev() {
                picks[j] = rest % values.len();
                rest /= values.len();
            }
            for ((k, values), &p) in sweep.iter().zip(&picks) {
                s.set(k, &values[p])?;
                parts.push(format!("{k}={}", values[p]));
            }
            s.normalize();
            s.validate()
                .map_err(|e| format!("run {}: {e}", parts.join(",")))?;
            out.push((Some(parts.join(",")), s));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap_or_default();
        p
    }

    #[test]
    fn toml_and_yaml_files_load_the_same_scenario() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let t = write(
            dir.path(),
            "a.toml",
            "name = \"lab\"\npreset = \"quick\"\nrate = \"2k\"\nlinger_ms = 0\nacks = \"all\"\nconsumer_delay_us = 250\ngates = [\"lost==0\"]\n[sweep]\ncompression = [\"none\", \"zstd\"]\nproducers = [1, 2]\n",
        );
        let y = write(
            dir.path(),
            "a.yaml",
            "name: lab\npreset: quick\nrate: 2k\nlinger_ms: 0\nacks: all\nconsumer_delay_us: 250\ngates: [lost==0]\nsweep:\n  compression: [none, zstd]\n  producers: [1, 2]\n",
        );
        let ft = load(&t).unwrap_or_else(|e| panic!("{e}"));
        let fy = load(&y).unwrap_or_else(|e| panic!("{e}"));
        let (st, _) = ft.scenario().unwrap_or_else(|e| panic!("{e}"));
        let (sy, _) = fy.scenario().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            serde_json::to_value(&st).ok(),
            serde_json::to_value(&sy).ok()
        );
        assert_eq!(st.preset, "lab");
        assert_eq!(st.rate_msg_s, 2_000);
        assert_eq!(st.consumers, 2, "from the quick preset");
        assert_eq!(st.consumer_delay_us, std::time::Duration::from_micros(250));
        assert_eq!(ft.gates.len(), 1);
        assert_eq!(ft.sweep, fy.sweep);
        let runs = expand(vec![(None, st)], &ft.sweep).unwrap_or_default();
        let labels: Vec<_> = runs.iter().filter_map(|(l, _)| l.clone()).collect();
        assert_eq!(
            labels,
            [
                "compression=none,producers=1",
                "compression=none,producers=2",
                "compression=zstd,producers=1",
                "compression=zstd,producers=2"
            ]
        );
        assert_eq!(runs[3].1.producers, 2);
        assert_eq!(runs[3].1.compression, crate::scenario::Codec::Zstd);
    }

    #[test]
    fn shipped_examples_load() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench");
        let mut n = 0;
        for dir in ["scenarios", "omb"] {
            let entries =
                std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("{dir}: {e}"));
            for e in entries.flatten() {
                // OMB workloads among them: the loader of both kinds.
                let f =
                    crate::omb_import::load(&e.path(), false).unwrap_or_else(|err| panic!("{err}"));
                let (s, _) = f.scenario().unwrap_or_else(|err| panic!("{err}"));
                assert_eq!(s.validate(), Ok(()), "{}", e.path().display());
                assert_eq!(
                    dir == "omb",
                    f.description.unwrap_or_default().starts_with("OMB")
                );
                n += 1;
            }
        }
        assert!(n >= 6, "{n}");
    }

    #[test]
    fn bad_files_name_the_problem() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (name, text, needle) in [
            ("u.toml", "lingerms = 5\n", "\"lingerms\""),
            ("v.yaml", "producers: 0\n", "producers"),
            ("p.toml", "preset = \"nope\"\n", "unknown preset"),
            ("g.toml", "gates = [\"p99_nope_ms<1\"]\n", "p99_nope_ms"),
            ("s.toml", "[sweep]\nacks = [\"0\", \"7\"]\n", "acks"),
            ("l.toml", "rate = [1, 2]\n", "rate must be a single value"),
            ("x.txt", "rate = 1\n", ".toml, .yaml"),
            ("b.toml", "rate = \n", "not valid TOML"),
            ("d.yaml", "rate: 1\nrate: 2\n", "duplicate"),
        ] {
            let p = write(dir.path(), name, text);
            let e = load(&p).unwrap_err();
            assert!(e.contains(needle), "{name}: {e}");
        }
        assert!(load(&dir.path().join("missing.toml"))
            .unwrap_err()
            .contains("cannot read"));
    }

    #[test]
    fn fault_commands_in_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let t = write(
            dir.path(),
            "f.toml",
            "duration = \"30s\"\nfault_cmd = [\"10s:kill -9 1234\", \"20s: ./restart.sh 2\"]\n",
        );
        let y = write(
            dir.path(),
            "f.yaml",
            "duration: 30s\nfault_cmd:\n  - \"10s:kill -9 1234\"\n  - \"20s: ./restart.sh 2\"\n",
        );
        let one = write(dir.path(), "o.toml", "fault_cmd = \"5s:docker kill b2\"\n");
        let (st, _) = load(&t)
            .and_then(|f| f.scenario())
            .unwrap_or_else(|e| panic!("{e}"));
        let (sy, _) = load(&y)
            .and_then(|f| f.scenario())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(st.fault_cmd, vec!["10s:kill -9 1234", "20s:./restart.sh 2"]);
        assert_eq!(st.fault_cmd, sy.fault_cmd);
        let (so, _) = load(&one)
            .and_then(|f| f.scenario())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(so.fault_cmd, vec!["5s:docker kill b2"]);
        // A fault past the measured window, or without a time, is refused.
        let late = write(
            dir.path(),
            "l.toml",
            "duration = \"5s\"\nfault_cmd = [\"6s:true\"]\n",
        );
        let err = load(&late)
            .and_then(|f| f.scenario())
            .and_then(|(s, _)| s.validate())
            .err()
            .unwrap_or_default();
        assert!(err.contains("measured window"), "{err}");
        let bad = write(dir.path(), "b.toml", "fault_cmd = [\"kill -9 1\"]\n");
        assert!(load(&bad).and_then(|f| f.scenario()).is_err());
    }

    #[test]
    fn client_settings_in_files_as_tables_or_sections() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let t = write(
            dir.path(),
            "c.toml",
            "duration = \"5s\"\n[client_config]\nsecurity.protocol = \"SASL_SSL\"\n\"sasl.mechanism\" = \"PLAIN\"\nsocket.send.buffer.bytes = 1048576\n",
        );
        let y = write(
            dir.path(),
            "c.yaml",
            "client_config:\n  security.protocol: SASL_SSL\n  sasl.mechanism: PLAIN\n  socket.send.buffer.bytes: 1048576\n",
        );
        let (st, _) = load(&t)
            .and_then(|f| f.scenario())
            .unwrap_or_else(|e| panic!("{e}"));
        let (sy, _) = load(&y)
            .and_then(|f| f.scenario())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(st.client_config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(
            st.client_config.get("socket.send.buffer.bytes"),
            Some("1048576")
        );
        assert_eq!(st.client_config, sy.client_config);
        // librdkafka judges the values when the scenario is checked.
        let bad = write(
            dir.path(),
            "b.toml",
            "client_config = { \"no.such\" = 1 }\n",
        );
        let err = load(&bad)
            .and_then(|f| f.scenario())
            .and_then(|(s, _)| s.validate())
            .err()
            .unwrap_or_default();
        assert!(err.contains("No such configuration property"), "{err}");
        let owned = write(dir.path(), "o.toml", "client_config = { acks = \"all\" }\n");
        assert!(load(&owned).and_then(|f| f.scenario()).is_err());
    }

    #[test]
    fn replication_and_topic_configs_in_files_and_sweeps() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let t = write(
            dir.path(),
            "r.toml",
            "replication_factor = 3\ntopic_config = { \"min.insync.replicas\" = 2, \"cleanup.policy\" = \"compact,delete\" }\n[sweep]\ntopic_config = [\"min.insync.replicas=1\", \"min.insync.replicas=2;retention.ms=60000\"]\n",
        );
        let y = write(
            dir.path(),
            "r.yaml",
            "replication_factor: 3\ntopic_config:\n  min.insync.replicas: 2\n  cleanup.policy: compact,delete\nsweep:\n  topic_config: [\"min.insync.replicas=1\", \"min.insync.replicas=2;retention.ms=60000\"]\n",
        );
        let ft = load(&t).unwrap_or_else(|e| panic!("{e}"));
        let fy = load(&y).unwrap_or_else(|e| panic!("{e}"));
        let (st, _) = ft.scenario().unwrap_or_else(|e| panic!("{e}"));
        let (sy, _) = fy.scenario().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(st.replication_factor, 3);
        assert_eq!(
            st.topic_config.get("cleanup.policy").map(String::as_str),
            Some("compact,delete")
        );
        assert_eq!(st.topic_config, sy.topic_config);
        let runs = expand(vec![(None, st)], &ft.sweep).unwrap_or_default();
        assert_eq!(runs.len(), 2);
        // A sweep value replaces the whole set.
        assert_eq!(runs[0].1.topic_config.len(), 1);
        assert_eq!(
            runs[1]
                .1
                .topic_config
                .get("retention.ms")
                .map(String::as_str),
            Some("60000")
        );
        // Bad values name the problem.
        let mut s = Scenario::baseline();
        assert!(s.set("replication_factor", "0").is_err());
        assert!(s.set("replication_factor", "-2").is_err());
        assert!(s.set("topic_config", "nokey").is_err());
        assert!(s.set("topic_config", "bad key=1").is_err());
        assert!(s.set("replication_factor", "default").is_ok() && s.replication_factor == -1);
        assert!(s.set("topic_config", "none").is_ok() && s.topic_config.is_empty());
    }

    #[test]
    fn sweeps_parse_merge_and_stay_bounded() {
        assert_eq!(
            parse_sweep_arg("linger_ms=0,5"),
            Ok(("linger_ms".to_string(), vec!["0".into(), "5".into()]))
        );
        assert!(parse_sweep_arg("linger_ms").is_err());
        assert!(parse_sweep_arg("linger_ms=0,,5").is_err());
        assert!(parse_sweep_arg("nope=1").unwrap_err().contains("\"nope\""));
        let file: Sweep = vec![
            ("linger-ms".into(), vec!["1".into()]),
            ("acks".into(), vec!["0".into()]),
        ];
        let cli: Sweep = vec![("linger_ms".into(), vec!["0".into(), "5".into()])];
        let m = merge_sweeps(&file, &cli);
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].1.len(), 2);
        let big: Sweep = vec![
            ("linger_ms".into(), (0..10).map(|i| i.to_string()).collect()),
            ("seed".into(), (0..10).map(|i| i.to_string()).collect()),
        ];
        let e = expand(vec![(None, Scenario::baseline())], &big).unwrap_err();
        assert!(e.contains("100 runs"), "{e}");
        // A preset's variants combine with the sweep, the variant label first.
        let p = presets::find_preset("sparse-fanout").unwrap_or(&presets::PRESETS[0]);
        let runs: Vec<_> = p
            .expand(&p.scenario())
            .into_iter()
            .map(|(l, s)| (l.map(str::to_string), s))
            .collect();
        let out = expand(runs, &vec![("acks".into(), vec!["0".into(), "all".into()])])
            .unwrap_or_default();
        assert_eq!(out.len(), 4);
        assert_eq!(out[1].0.as_deref(), Some("linger-1s,acks=all"));
        assert_eq!(out[1].1.linger_ms, 1000);
    }
}
