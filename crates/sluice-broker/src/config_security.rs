//! Fail-closed handling of Kafka's security settings.
//!
//! Sluice does not implement TLS, SASL or ACLs yet. A `server.properties` written for a secured
//! Kafka broker must therefore not start a plaintext, unauthenticated listener with a warning:
//! the operator asked for authentication and would silently get none. Every setting that
//! configures security (a non-PLAINTEXT listener, `ssl.*`, `sasl.*`, per-listener overrides, an
//! authorizer, super users) refuses to start with a message naming the key. Empty values and
//! settings that explicitly ask for PLAINTEXT are accepted: they configure no security.

use std::collections::BTreeMap;

use crate::config::ConfigError;

/// The only security protocol Sluice serves.
const PLAINTEXT: &str = "PLAINTEXT";
/// Kafka's security protocol names; a listener named after one uses it unless mapped.
const SECURITY_PROTOCOLS: [&str; 4] = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];
/// Key prefixes that only configure security.
const SECURITY_KEY_PREFIXES: [&str; 4] = ["ssl.", "sasl.", "listener.name.", "delegation.token."];
/// Exact keys that only configure security.
const SECURITY_KEYS: [&str; 5] = [
    "authorizer.class.name",
    "super.users",
    "allow.everyone.if.no.acl.found",
    "principal.builder.class",
    "connections.max.reauth.ms",
];
/// Keys that name a security protocol: accepted when it is PLAINTEXT.
const PROTOCOL_KEYS: [&str; 1] = ["security.inter.broker.protocol"];

const NOT_SUPPORTED: &str = "TLS, SASL and ACLs are not supported yet; refusing to start rather \
     than serve an unauthenticated plaintext listener (remove the setting to run without security)";

fn refused(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// Refuses a setting that would configure security. Called for every key before it is applied.
pub(crate) fn check_setting(key: &str, value: &str) -> Result<(), ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(());
    }
    let security_key =
        SECURITY_KEYS.contains(&key) || SECURITY_KEY_PREFIXES.iter().any(|p| key.starts_with(p));
    let protocol_key = PROTOCOL_KEYS.contains(&key) && !value.eq_ignore_ascii_case(PLAINTEXT);
    if security_key || protocol_key {
        return Err(refused(key, value, NOT_SUPPORTED));
    }
    Ok(())
}

/// Parses `listener.security.protocol.map` (`NAME:PROTOCOL,...`).
pub(crate) fn parse_protocol_map(
    key: &str,
    value: &str,
) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut map = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, protocol)) = entry.split_once(':') else {
            return Err(refused(key, value, "expected NAME:PROTOCOL entries"));
        };
        let protocol = protocol.trim().to_ascii_uppercase();
        if !SECURITY_PROTOCOLS.contains(&protocol.as_str()) {
            return Err(refused(key, value, "unknown security protocol"));
        }
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// The listener name of the first (served) entry of a `listeners` value, if it has a scheme.
pub(crate) fn listener_name(value: &str) -> Option<String> {
    let first = value.split(',').next().unwrap_or(value).trim();
    first
        .split_once("://")
        .map(|(name, _)| name.trim().to_ascii_uppercase())
}

/// Checks that the served listener resolves to PLAINTEXT, once every setting is applied
/// (the protocol map may come after `listeners` in a file).
pub(crate) fn check_listener(
    name: Option<&str>,
    map: &BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    let Some(name) = name else {
        return Ok(());
    };
    let protocol = match map.get(name) {
        Some(p) => p.as_str(),
        None if SECURITY_PROTOCOLS.contains(&name) => name,
        None => {
            return Err(refused(
                "listeners",
                name,
                "listener name is not a security protocol and listener.security.protocol.map does not map it",
            ))
        }
    };
    if protocol != PLAINTEXT {
        return Err(refused(
            "listeners",
            &format!("{name} ({protocol})"),
            NOT_SUPPORTED,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: every security setting refuses; empty values and explicit PLAINTEXT are accepted.
    #[test]
    fn security_settings_refuse() {
        for (k, v) in [
            ("ssl.keystore.location", "/k.jks"),
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("listener.name.sasl_ssl.plain.sasl.jaas.config", "x"),
            (
                "authorizer.class.name",
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            ),
            ("super.users", "User:admin"),
            ("security.inter.broker.protocol", "SASL_SSL"),
        ] {
            assert!(check_setting(k, v).is_err(), "{k} accepted");
        }
        assert!(check_setting("authorizer.class.name", " ").is_ok());
        assert!(check_setting("security.inter.broker.protocol", "PLAINTEXT").is_ok());
        assert!(check_setting("num.partitions", "3").is_ok());
    }

    // Goal: the served listener must resolve to PLAINTEXT, through the protocol map if named.
    #[test]
    fn listener_protocol_resolution() {
        let none = BTreeMap::new();
        assert!(check_listener(Some("PLAINTEXT"), &none).is_ok());
        assert!(check_listener(None, &none).is_ok());
        assert!(check_listener(Some("SASL_SSL"), &none).is_err());
        assert!(check_listener(Some("SSL"), &none).is_err());
        assert!(check_listener(Some("INTERNAL"), &none).is_err());
        let map = parse_protocol_map("m", "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL").unwrap();
        assert!(check_listener(Some("INTERNAL"), &map).is_ok());
        assert!(check_listener(Some("EXTERNAL"), &map).is_err());
        assert!(parse_protocol_map("m", "X:TLS").is_err());
        assert_eq!(
            listener_name("sasl_ssl://h:1,PLAINTEXT://h:2").as_deref(),
            Some("SASL_SSL")
        );
        assert_eq!(listener_name("127.0.0.1:9092"), None);
    }
}
