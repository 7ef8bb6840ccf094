//! The user's librdkafka settings (`-X key=value`, `--client-config FILE`, a scenario file's
//! `client_config` table), passed to every client the bench makes: producers, consumers, the
//! metadata probe, the offset watcher and the admin client. This is how the bench reaches a
//! secured cluster (`security.protocol`, `sasl.*`, `ssl.*`) or tunes anything librdkafka
//! exposes (`socket.send.buffer.bytes`, `debug`, ...).
//!
//! Guarantees:
//! - An unknown key or an invalid value fails before any run, with librdkafka's own message
//!   (`check` builds a native configuration from the settings).
//! - Keys the bench sets from its own flags (`acks`, `linger.ms`, `group.id`, ...) are refused
//!   with the flag to use instead, so a report's scenario always says what the clients ran with.
//! - Secrets (`sasl.password`, `ssl.key.password`, inline keys, ...) never reach a report: the
//!   scenario serializes them as `"***"`.
//! - Bounded: at most `limits::MAX_CLIENT_CONFIGS` settings, each value at most
//!   `limits::MAX_CLIENT_CONFIG_VALUE_BYTES`, a properties file at most
//!   `limits::MAX_CLIENT_CONFIG_FILE_BYTES`.

use std::collections::BTreeMap;
use std::path::Path;

use rdkafka::config::ClientConfig;
use serde::Serialize;

use crate::limits;

/// librdkafka settings, key -> value; later inserts win (file, then `-X`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientConf(BTreeMap<String, String>);

/// Keys the bench owns, and the flag (or reason) that sets them instead.
const OWNED: &[(&str, &str)] = &[
    ("bootstrap.servers", "--bootstrap"),
    ("metadata.broker.list", "--bootstrap"),
    ("acks", "--acks"),
    ("request.required.acks", "--acks"),
    ("compression.codec", "--compression"),
    ("compression.type", "--compression"),
    ("linger.ms", "--linger-ms"),
    ("queue.buffering.max.ms", "--linger-ms"),
    ("batch.size", "--batch-bytes"),
    ("enable.idempotence", "--idempotence"),
    ("transactional.id", "--transactional-id"),
    ("transaction.timeout.ms", "--txn-interval-ms"),
    (
        "isolation.level",
        "--transactional-id (read_committed with it)",
    ),
    ("max.in.flight", "--max-in-flight"),
    ("max.in.flight.requests.per.connection", "--max-in-flight"),
    ("group.id", "the bench's per-run group"),
    ("enable.auto.commit", "--commit-interval-ms"),
    ("enable.auto.offset.store", "--commit-interval-ms"),
    ("auto.commit.interval.ms", "--commit-interval-ms"),
    (
        "statistics.interval.ms",
        "the bench's latency split (it reads statistics every second)",
    ),
];

/// Key fragments whose values are secrets.
const SECRET_PARTS: &[&str] = &[
    "password",
    "secret",
    ".pem",
    "ssl.key",
    "jaas",
    "token",
    "oauthbearer.config",
];

/// Key prefixes that describe the connection's security, left out against the in-process
/// null broker (plaintext only) of `--calibrate`.
const SECURITY_PREFIXES: &[&str] = &["security.", "ssl.", "sasl.", "ssl_", "enable.ssl", "https."];

impl ClientConf {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.0.iter()
    }

    /// Adds (or replaces) one setting, checked by `check_entry`.
    pub fn insert(&mut self, key: &str, value: &str) -> Result<(), String> {
        check_entry(key, value)?;
        self.0.insert(key.to_string(), value.to_string());
        if self.0.len() > limits::MAX_CLIENT_CONFIGS {
            return Err(format!(
                "at most {} client settings",
                limits::MAX_CLIENT_CONFIGS
            ));
        }
        Ok(())
    }

    /// Every setting onto a librdkafka configuration (over what the bench set).
    pub fn apply(&self, c: &mut ClientConfig) {
        for (k, v) in &self.0 {
            c.set(k.as_str(), v.as_str());
        }
    }

    /// `debug` is set: librdkafka's debug log is wanted (written to stderr, see `engine`).
    pub fn debug(&self) -> bool {
        self.get("debug").is_some_and(|v| !v.trim().is_empty())
    }

    /// The connection is not plain TCP (`security.protocol` other than PLAINTEXT): the
    /// bench's own raw-socket requests (the topology snapshot) must go through librdkafka.
    pub fn secured(&self) -> bool {
        self.get("security.protocol")
            .is_some_and(|p| !p.trim().eq_ignore_ascii_case("plaintext"))
    }

    /// These settings without the security ones (for the plaintext null broker).
    pub fn without_security(&self) -> ClientConf {
        ClientConf(
            self.0
                .iter()
                .filter(|(k, _)| !SECURITY_PREFIXES.iter().any(|p| k.starts_with(p)))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    }

    /// Checks the whole set with librdkafka: an unknown key or a bad value fails with its
    /// message (secrets' values are not repeated).
    pub fn check(&self) -> Result<(), String> {
        let mut c = ClientConfig::new();
        self.apply(&mut c);
        c.create_native_config().map(|_| ()).map_err(|e| match e {
            // The value is not repeated: a misspelt password key would print the password.
            rdkafka::error::KafkaError::ClientConfig(_, msg, key, _) => {
                format!("client setting {key}: {msg}")
            }
            other => format!("client settings: {other}"),
        })
    }
}

impl Serialize for ClientConf {
    /// As a JSON object, secrets as `"***"`.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, if is_secret(k) { "***" } else { v })?;
        }
        m.end()
    }
}

/// Whether a setting's value must not be shown (passwords, private keys, JAAS, tokens).
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    SECRET_PARTS.iter().any(|p| k.contains(p)) && k != "ssl.key.location"
}

/// A command-line argument with the value of a secret `key=value` in it replaced by `***`
/// (`-Xsasl.password=x`, `sasl.password=x` after `-X`, or one inside another flag's value).
pub fn redact_arg(arg: &str) -> String {
    for (pos, _) in arg.match_indices('=') {
        let before = &arg[..pos];
        let key = before.rsplit(['=', ' ']).next().unwrap_or(before);
        let key = key
            .trim_start_matches("--client-setting")
            .trim_start_matches("-X")
            .trim_start_matches('-');
        if is_secret(key) {
            return format!("{}=***", &arg[..pos]);
        }
    }
    arg.to_string()
}

/// A key is a librdkafka property name (letters, digits, `.`, `_`, `-`), not one the bench
/// owns; a value is bounded.
pub fn check_entry(key: &str, value: &str) -> Result<(), String> {
    let ok_key = !key.is_empty()
        && key.len() <= limits::MAX_NAME_BYTES
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !ok_key {
        return Err(format!("{key:?} is not a client setting name"));
    }
    if let Some((_, flag)) = OWNED.iter().find(|(k, _)| *k == key) {
        return Err(format!(
            "client setting {key} is set by the bench ({flag}); it cannot be given with -X"
        ));
    }
    if value.len() > limits::MAX_CLIENT_CONFIG_VALUE_BYTES {
        return Err(format!(
            "the value of client setting {key} is longer than {} bytes",
            limits::MAX_CLIENT_CONFIG_VALUE_BYTES
        ));
    }
    Ok(())
}

/// One `-X key=value` (the value may hold `=`; surrounding spaces of the key are trimmed).
pub fn parse_setting(v: &str) -> Result<(String, String), String> {
    let (k, val) = v.split_once('=').ok_or_else(|| {
        format!("{v:?}: a client setting is key=value, e.g. security.protocol=SASL_SSL")
    })?;
    let k = k.trim();
    check_entry(k, val)?;
    Ok((k.to_string(), val.to_string()))
}

/// The `client_config` scenario key: a JSON object (what a scenario file's table becomes), or
/// `key=value` items separated by `;` (a sweep value), or empty / `none`. The whole set is
/// replaced.
pub fn parse_scenario_value(v: &str) -> Result<ClientConf, String> {
    let mut out = ClientConf::default();
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
                other => return Err(format!("{k}: {other} is not a client setting value")),
            };
            out.insert(k.trim(), &text)?;
        }
    } else {
        for item in v.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, val) = parse_setting(item)?;
            out.insert(&k, &val)?;
        }
    }
    Ok(out)
}

/// Reads a Java-style properties file (`--client-config`), as Kafka's `--command-config` and
/// `client.properties` files are written: `key=value`, `key: value` or `key value`; `#` and `!`
/// comment lines; a backslash at the end of a line continues it; `\t`, `\n`, `\uXXXX` and `\x`
/// escapes.
pub fn load_properties(path: &Path) -> Result<Vec<(String, String)>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > limits::MAX_CLIENT_CONFIG_FILE_BYTES {
        return Err(format!(
            "{}: larger than {} bytes",
            path.display(),
            limits::MAX_CLIENT_CONFIG_FILE_BYTES
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_properties(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The properties of `text` (see `load_properties`), in file order; each checked by
/// `check_entry`.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((no, first)) = lines.next() {
        let first = first.trim_start();
        if first.is_empty() || first.starts_with('#') || first.starts_with('!') {
            continue;
        }
        // Join continuation lines (an odd number of trailing backslashes).
        let mut logical = String::from(first);
        while ends_in_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_property(&logical);
        let (key, value) = (unescape(&key), unescape(&value));
        check_entry(&key, &value).map_err(|e| format!("line {}: {e}", no + 1))?;
        out.push((key, value));
    }
    if out.len() > limits::MAX_CLIENT_CONFIGS {
        return Err(format!(
            "at most {} client settings",
            limits::MAX_CLIENT_CONFIGS
        ));
    }
    Ok(out)
}

fn ends_in_continuation(s: &str) -> bool {
    s.chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
}

/// Key (to the first unescaped `=`, `:` or whitespace) and raw value (after that separator,
/// surrounding whitespace and one `=` or `:`).
fn split_property(line: &str) -> (String, String) {
    let mut key_end = line.len();
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || c.is_whitespace() {
            key_end = i;
            break;
        }
    }
    let key = &line[..key_end];
    let mut rest = line[key_end..].trim_start();
    if let Some(r) = rest.strip_prefix('=').or_else(|| rest.strip_prefix(':')) {
        rest = r.trim_start();
    }
    (key.to_string(), rest.trim_end().to_string())
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_files_parse_as_java_does() {
        let text = "# comment\n! also a comment\n\nsecurity.protocol=SASL_SSL\n  sasl.mechanism : SCRAM-SHA-512\nsasl.username alice\nsasl.password=p\\=w\\u0041rd\nsasl.jaas.config=a \\\n    b\\\\\nclient.rack=\n";
        let got = parse_properties(text).unwrap_or_default();
        assert_eq!(
            got,
            vec![
                ("security.protocol".into(), "SASL_SSL".into()),
                ("sasl.mechanism".into(), "SCRAM-SHA-512".into()),
                ("sasl.username".into(), "alice".into()),
                ("sasl.password".into(), "p=wArd".into()),
                ("sasl.jaas.config".into(), "a b\\".into()),
                ("client.rack".into(), String::new()),
            ]
        );
    }

    #[test]
    fn owned_and_malformed_keys_are_refused_with_the_flag_to_use() {
        let e = parse_setting("acks=all").unwrap_err();
        assert!(e.contains("--acks"), "{e}");
        assert!(parse_setting("linger.ms=5")
            .unwrap_err()
            .contains("--linger-ms"));
        assert!(parse_setting("nokeyvalue").is_err());
        assert!(parse_setting("bad key=1").is_err());
        assert!(parse_properties("group.id=x\n")
            .unwrap_err()
            .contains("line 1"));
        let big = format!(
            "ssl.ca.pem={}",
            "x".repeat(limits::MAX_CLIENT_CONFIG_VALUE_BYTES + 1)
        );
        assert!(parse_setting(&big).is_err());
        assert_eq!(
            parse_setting("sasl.password=a=b"),
            Ok(("sasl.password".into(), "a=b".into()))
        );
    }

    #[test]
    fn librdkafka_judges_keys_and_values() {
        let mut c = ClientConf::default();
        assert!(c.insert("socket.send.buffer.bytes", "1048576").is_ok());
        assert_eq!(c.check(), Ok(()));
        let mut bad = c.clone();
        assert!(bad.insert("no.such.setting", "1").is_ok());
        let e = bad.check().unwrap_err();
        assert!(
            e.contains("no.such.setting") && e.contains("No such configuration"),
            "{e}"
        );
        let mut bad = c.clone();
        assert!(bad.insert("security.protocol", "CARRIER_PIGEON").is_ok());
        assert!(bad.check().unwrap_err().contains("security.protocol"));
        // This build has TLS and SCRAM.
        let mut tls = ClientConf::default();
        assert!(tls.insert("security.protocol", "SASL_SSL").is_ok());
        assert!(tls.insert("sasl.mechanism", "SCRAM-SHA-512").is_ok());
        assert_eq!(tls.check(), Ok(()));
        assert!(tls.secured() && !c.secured());
        assert!(tls.without_security().is_empty());
    }

    #[test]
    fn secrets_are_not_serialized() {
        let mut c = ClientConf::default();
        for (k, v) in [
            ("sasl.password", "hunter2"),
            ("ssl.key.password", "k"),
            ("sasl.username", "alice"),
            ("ssl.key.location", "/k.pem"),
        ] {
            assert!(c.insert(k, v).is_ok());
        }
        let json = serde_json::to_string(&c).unwrap_or_default();
        assert!(
            !json.contains("hunter2") && !json.contains("\"k\""),
            "{json}"
        );
        assert!(json.contains("alice") && json.contains("/k.pem"), "{json}");
        let mut typo = ClientConf::default();
        assert!(typo.insert("sasl.passwd", "hunter2").is_ok());
        let e = typo.check().unwrap_err();
        assert!(e.contains("sasl.passwd") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn secret_arguments_are_redacted() {
        assert_eq!(redact_arg("sasl.password=hunter2"), "sasl.password=***");
        assert_eq!(redact_arg("-Xsasl.password=a=b"), "-Xsasl.password=***");
        assert_eq!(
            redact_arg("--client-setting=ssl.key.password=k"),
            "--client-setting=ssl.key.password=***"
        );
        assert_eq!(redact_arg("--rate=1000"), "--rate=1000");
        assert_eq!(redact_arg("sasl.username=alice"), "sasl.username=alice");
        assert_eq!(
            redact_arg("--serve-arg=--override=listener.name.x.plain.sasl.jaas.config=u p"),
            "--serve-arg=--override=listener.name.x.plain.sasl.jaas.config=***"
        );
    }

    #[test]
    fn scenario_values_are_objects_or_semicolon_lists() {
        let a = parse_scenario_value("{\"socket.nagle.disable\": true, \"fetch.wait.max.ms\": 5}")
            .unwrap_or_default();
        assert_eq!(a.get("fetch.wait.max.ms"), Some("5"));
        assert_eq!(a.get("socket.nagle.disable"), Some("true"));
        let b = parse_scenario_value("fetch.wait.max.ms=5; client.rack=r1").unwrap_or_default();
        assert_eq!(b.len(), 2);
        assert!(parse_scenario_value("none").is_ok_and(|c| c.is_empty()));
        assert!(parse_scenario_value("{\"acks\": 1}").is_err());
    }
}
