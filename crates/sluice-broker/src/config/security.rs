//! Kafka's security settings: the ones Sluice serves (listeners with PLAINTEXT, SSL,
//! SASL_PLAINTEXT and SASL_SSL; PEM key and trust stores; SASL PLAIN and SCRAM), and
//! fail-closed refusal of every other one.
//!
//! Guarantee: a `server.properties` written for a secured Kafka broker never starts a listener
//! with less security than it asked for. A security setting Sluice does not implement (an
//! custom principal builder, GSSAPI, OAUTHBEARER, encrypted keys, JKS stores, cipher lists, ...)
//! refuses to start with a message naming the key, rather than being ignored. Empty values are
//! accepted: they configure nothing.
//!
//! Settings may be given per listener as in Kafka (`listener.name.<listener>.<key>`, the
//! listener name in lower case); the per-listener value wins over the plain key. The stored
//! values are resolved per listener by [`SecuritySettings::get`].

use std::collections::BTreeMap;

pub use crate::config::values::list;
use crate::config::values::ConfigError;

/// Kafka's security protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        match name.trim().to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Some(SecurityProtocol::Plaintext),
            "SSL" => Some(SecurityProtocol::Ssl),
            "SASL_PLAINTEXT" => Some(SecurityProtocol::SaslPlaintext),
            "SASL_SSL" => Some(SecurityProtocol::SaslSsl),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The connection is encrypted with TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Clients must authenticate with SASL before anything else is served.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// The SASL mechanisms Sluice serves, in Kafka's spelling.
pub const SASL_MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Key prefixes that configure security; any key under them not served above is refused
/// (the served `delegation.token.*` keys are rows of the config table, found before this).
const SECURITY_KEY_PREFIXES: [&str; 4] = ["ssl.", "sasl.", "listener.name.", "delegation.token."];
/// Exact keys that configure what Sluice does not implement (the authorizer's settings are
/// in `BrokerConfig::set`).
const REFUSED_KEYS: [&str; 1] = ["principal.builder.class"];

const NOT_SUPPORTED: &str = "this security setting is not supported; refusing to start rather \
     than run with less security than configured (remove the setting to run without it)";

fn refused(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    }
}

/// The security settings that were given, by their full key (a per-listener key keeps its
/// `listener.name.<listener>.` prefix).
#[derive(Clone, Default)]
pub struct SecuritySettings {
    values: BTreeMap<String, String>,
}

/// Secrets (JAAS configs hold passwords, inline keys are keys) never reach a log or a
/// DescribeConfigs answer.
pub(crate) fn secret(key: &str) -> bool {
    key.ends_with("sasl.jaas.config") || key.ends_with("ssl.keystore.key")
}

impl std::fmt::Debug for SecuritySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.values.iter().map(|(k, v)| {
                let shown = if secret(k) { "(secret)" } else { v.as_str() };
                (k, shown)
            }))
            .finish()
    }
}

impl SecuritySettings {
    /// The value of `key` for `listener`: the per-listener key first, then the plain one.
    pub fn get(&self, listener: &str, key: &str) -> Option<&str> {
        let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        self.values
            .get(&prefixed)
            .or_else(|| self.values.get(key))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// Every stored key and value (for DescribeConfigs, which hides the [`secret`] ones).
    pub fn iter(&self) -> impl Iterator<Item = (&String, &String)> {
        self.values.iter()
    }

    /// Stores a security setting, or refuses it. Returns false for keys that are not
    /// security settings (the caller applies those). `is_security_row` says whether an
    /// `ssl.*` or `sasl.*` key is a served row of the broker config table (the table's
    /// `is_security_row`; handed in, since the table is built on this module).
    pub(crate) fn set(
        &mut self,
        key: &str,
        value: &str,
        is_security_row: fn(&str) -> bool,
    ) -> Result<bool, ConfigError> {
        let value = value.trim();
        if REFUSED_KEYS.contains(&key) {
            return match value.is_empty() {
                true => Ok(true),
                false => Err(refused(
                    key,
                    value,
                    "custom principal builders are not supported; refusing to start",
                )),
            };
        }
        if key == "security.inter.broker.protocol" {
            if SecurityProtocol::parse(value).is_none() && !value.is_empty() {
                return Err(refused(key, value, "unknown security protocol"));
            }
            // A single node has no inter-broker traffic: any protocol configures nothing.
            return Ok(true);
        }
        if !SECURITY_KEY_PREFIXES.iter().any(|p| key.starts_with(p)) {
            return Ok(false);
        }
        // Secrets and large inline PEM values are never echoed back in errors.
        let shown = if value.len() > 80 || secret(key) {
            "(value)"
        } else {
            value
        };
        let base = base_key(key);
        let served = is_listener_security_key(base, is_security_row) || is_jaas_key(base);
        if !served {
            if value.is_empty() {
                return Ok(true);
            }
            return Err(refused(key, shown, NOT_SUPPORTED));
        }
        check_value(base, value).map_err(|reason| refused(key, shown, &reason))?;
        self.values.insert(key.to_string(), value.to_string());
        Ok(true)
    }
}

/// The key without a `listener.name.<listener>.` prefix.
pub(crate) fn base_key(key: &str) -> &str {
    key.strip_prefix("listener.name.")
        .and_then(|rest| rest.split_once('.'))
        .map_or(key, |(_, base)| base)
}

/// An `ssl.*` or `sasl.*` key that is served: the Security rows of the broker config table
/// (each may also be given per listener).
fn is_listener_security_key(base: &str, is_security_row: fn(&str) -> bool) -> bool {
    (base.starts_with("ssl.") || base.starts_with("sasl.")) && is_security_row(base)
}

/// `<mechanism>.sasl.jaas.config` for a served mechanism (Kafka's per-mechanism JAAS key).
fn is_jaas_key(base: &str) -> bool {
    base.strip_suffix(".sasl.jaas.config")
        .is_some_and(|m| SASL_MECHANISMS.iter().any(|s| s.eq_ignore_ascii_case(m)))
}

/// The values each served key accepts.
fn check_value(base: &str, value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    let one_of = |allowed: &[&str]| -> Result<(), String> {
        match allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
            true => Ok(()),
            false => Err(format!("expected one of {}", allowed.join(", "))),
        }
    };
    match base {
        "ssl.keystore.type" | "ssl.truststore.type" => one_of(&["PEM"])
            .map_err(|_| "only PEM stores are supported (JKS and PKCS12 are not)".into()),
        "ssl.client.auth" => one_of(&["required", "requested", "none"]),
        "ssl.protocol" => one_of(&["TLS", "TLSv1.2", "TLSv1.3"]),
        "ssl.enabled.protocols" => list(value).try_for_each(|p| match p {
            "TLSv1.2" | "TLSv1.3" => Ok(()),
            _ => Err(format!("{p}: only TLSv1.2 and TLSv1.3 are served")),
        }),
        "sasl.enabled.mechanisms" | "sasl.mechanism.inter.broker.protocol" => list(value)
            .try_for_each(|m| match SASL_MECHANISMS.contains(&m) {
                true => Ok(()),
                false => Err(format!(
                    "{m}: the SASL mechanisms served are {}",
                    SASL_MECHANISMS.join(", ")
                )),
            }),
        _ => Ok(()),
    }
}

/// Parses `listener.security.protocol.map` (`NAME:PROTOCOL,...`).
pub(crate) fn parse_protocol_map(
    key: &str,
    value: &str,
) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let mut map = BTreeMap::new();
    for entry in list(value) {
        let Some((name, protocol)) = entry.split_once(':') else {
            return Err(refused(key, value, "expected NAME:PROTOCOL entries"));
        };
        let Some(protocol) = SecurityProtocol::parse(protocol) else {
            return Err(refused(key, value, "unknown security protocol"));
        };
        map.insert(name.trim().to_ascii_uppercase(), protocol);
    }
    Ok(map)
}

/// The security protocol of listener `name`: its entry in the protocol map, or the protocol
/// it is named after.
pub(crate) fn protocol_of(
    name: &str,
    map: &BTreeMap<String, SecurityProtocol>,
) -> Result<SecurityProtocol, ConfigError> {
    map.get(name)
        .copied()
        .or_else(|| SecurityProtocol::parse(name))
        .ok_or_else(|| {
            refused(
                "listeners",
                name,
                "listener name is not a security protocol and listener.security.protocol.map does not map it",
            )
        })
}

/// Checks that a listener's settings can serve its protocol (files are read later, at bind).
pub(crate) fn check_listener(
    name: &str,
    protocol: SecurityProtocol,
    s: &SecuritySettings,
) -> Result<(), ConfigError> {
    let key = |k: &str| format!("listener.name.{}.{k}", name.to_ascii_lowercase());
    if protocol.uses_tls() {
        let has_location = s.get(name, "ssl.keystore.location").is_some();
        let has_inline = s.get(name, "ssl.keystore.key").is_some()
            && s.get(name, "ssl.keystore.certificate.chain").is_some();
        if !has_location && !has_inline {
            return Err(refused(
                &key("ssl.keystore.location"),
                "",
                "a TLS listener needs ssl.keystore.location (key and chain in one PEM file) or ssl.keystore.key and ssl.keystore.certificate.chain",
            ));
        }
        let client_auth = s.get(name, "ssl.client.auth").unwrap_or("none");
        let has_trust = s.get(name, "ssl.truststore.location").is_some()
            || s.get(name, "ssl.truststore.certificates").is_some();
        if !client_auth.eq_ignore_ascii_case("none") && !has_trust {
            return Err(refused(
                &key("ssl.client.auth"),
                client_auth,
                "client certificates need a truststore (ssl.truststore.location or ssl.truststore.certificates)",
            ));
        }
    }
    if protocol.uses_sasl() {
        let mechanisms: Vec<&str> = s
            .get(name, "sasl.enabled.mechanisms")
            .map(|v| list(v).collect())
            .unwrap_or_default();
        if mechanisms.is_empty() {
            return Err(refused(
                &key("sasl.enabled.mechanisms"),
                "",
                "a SASL listener needs sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; Kafka's default GSSAPI is not served)",
            ));
        }
        if mechanisms.contains(&"PLAIN") && s.get(name, "plain.sasl.jaas.config").is_none() {
            return Err(refused(
                &key("plain.sasl.jaas.config"),
                "",
                "PLAIN needs its users: listener.name.<listener>.plain.sasl.jaas.config with user_<name>=\"<password>\" entries",
            ));
        }
    }
    Ok(())
}

/// The authorizer settings (`authorizer.class.name`, `super.users`,
/// `allow.everyone.if.no.acl.found`), resolved from `BrokerConfig`.
#[derive(Debug, Clone, Default)]
pub struct AuthorizerConfig {
    pub enabled: bool,
    pub super_users: Vec<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

/// The `delegation.token.*` settings (Kafka's `DelegationTokenManagerConfigs`).
#[derive(Clone)]
pub struct TokenConfig {
    /// `delegation.token.secret.key`: the HMAC key; empty turns tokens off.
    pub secret_key: String,
    /// `delegation.token.master.key`: Kafka's deprecated name, used when the other is unset.
    pub master_key: String,
    /// `delegation.token.max.lifetime.ms`: no renewal extends a token past issue + this.
    pub max_lifetime_ms: i64,
    /// `delegation.token.expiry.time.ms`: a renewal's default (and longest) period.
    pub expiry_time_ms: i64,
    /// `delegation.token.expiry.check.interval.ms`: how often expired tokens are removed.
    pub expiry_check_interval_ms: i64,
}

impl Default for TokenConfig {
    fn default() -> Self {
        TokenConfig {
            secret_key: String::new(),
            master_key: String::new(),
            max_lifetime_ms: 7 * 24 * 3_600_000,
            expiry_time_ms: 24 * 3_600_000,
            expiry_check_interval_ms: 3_600_000,
        }
    }
}

impl std::fmt::Debug for TokenConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenConfig")
            .field("key_set", &self.key().is_some())
            .field("max_lifetime_ms", &self.max_lifetime_ms)
            .field("expiry_time_ms", &self.expiry_time_ms)
            .field("expiry_check_interval_ms", &self.expiry_check_interval_ms)
            .finish()
    }
}

impl TokenConfig {
    /// The effective secret key: `secret.key`, else the deprecated `master.key`.
    pub fn key(&self) -> Option<&str> {
        [&self.secret_key, &self.master_key]
            .into_iter()
            .map(String::as_str)
            .find(|k| !k.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `set` as the broker calls it: with the config table's Security rows.
    trait Put {
        fn put(&mut self, key: &str, value: &str) -> Result<bool, ConfigError>;
    }

    impl Put for SecuritySettings {
        fn put(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
            self.set(key, value, crate::config::table::is_security_row)
        }
    }

    // Goal: served settings are stored (per listener too), unserved ones refuse, empty
    // values configure nothing.
    #[test]
    fn settings_are_served_or_refused() {
        let mut s = SecuritySettings::default();
        for (k, v) in [
            ("ssl.keystore.type", "JKS"),
            ("ssl.key.password", "x"),
            ("ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"),
            ("sasl.enabled.mechanisms", "GSSAPI"),
            ("listener.name.ext.oauthbearer.sasl.jaas.config", "x"),
            ("principal.builder.class", "x.Builder"),
            ("ssl.client.auth", "sometimes"),
            ("ssl.enabled.protocols", "TLSv1.1"),
            ("security.inter.broker.protocol", "QUIC"),
            // The served delegation.token.* keys are rows of the config table; others refuse.
            ("delegation.token.other", "k"),
        ] {
            assert!(s.put(k, v).is_err(), "{k}={v} accepted");
        }
        assert!(s.put("principal.builder.class", " ").unwrap());
        assert!(s.put("ssl.key.password", "").unwrap());
        assert!(s.put("security.inter.broker.protocol", "SASL_SSL").unwrap());
        assert!(!s.put("num.partitions", "3").unwrap());
        assert!(s.put("ssl.keystore.location", "/a.pem").unwrap());
        assert!(s
            .put("listener.name.internal.ssl.keystore.location", "/b.pem")
            .unwrap());
        assert!(s
            .put(
                "listener.name.ext.scram-sha-512.sasl.jaas.config",
                "x required;"
            )
            .unwrap());
        assert_eq!(s.get("INTERNAL", "ssl.keystore.location"), Some("/b.pem"));
        assert_eq!(s.get("EXTERNAL", "ssl.keystore.location"), Some("/a.pem"));
        assert!(s
            .put("sasl.enabled.mechanisms", "PLAIN, SCRAM-SHA-512")
            .unwrap());
        s.put("listener.name.a.plain.sasl.jaas.config", "x user_a=\"pw\";")
            .unwrap();
        assert!(!format!("{s:?}").contains("pw"));
    }

    // Goal: a listener resolves through the protocol map or its own name, and each protocol
    // needs its settings.
    #[test]
    fn listener_protocols_and_their_settings() {
        let map = parse_protocol_map("m", "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL").unwrap();
        assert_eq!(
            protocol_of("EXTERNAL", &map).unwrap(),
            SecurityProtocol::SaslSsl
        );
        assert_eq!(protocol_of("SSL", &map).unwrap(), SecurityProtocol::Ssl);
        assert!(protocol_of("OTHER", &map).is_err());
        assert!(parse_protocol_map("m", "X:TLS").is_err());
        let mut s = SecuritySettings::default();
        let none = SecurityProtocol::Plaintext;
        assert!(check_listener("PLAINTEXT", none, &s).is_ok());
        assert!(check_listener("SSL", SecurityProtocol::Ssl, &s).is_err());
        s.put("ssl.keystore.location", "/k.pem").unwrap();
        assert!(check_listener("SSL", SecurityProtocol::Ssl, &s).is_ok());
        s.put("ssl.client.auth", "required").unwrap();
        assert!(check_listener("SSL", SecurityProtocol::Ssl, &s).is_err());
        s.put("ssl.truststore.location", "/ca.pem").unwrap();
        assert!(check_listener("SSL", SecurityProtocol::Ssl, &s).is_ok());
        let sasl = SecurityProtocol::SaslPlaintext;
        assert!(check_listener("SASL_PLAINTEXT", sasl, &s).is_err());
        s.put("sasl.enabled.mechanisms", "PLAIN").unwrap();
        assert!(check_listener("SASL_PLAINTEXT", sasl, &s).is_err());
        s.put(
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
        )
        .unwrap();
        assert!(check_listener("SASL_PLAINTEXT", sasl, &s).is_ok());
    }
}
