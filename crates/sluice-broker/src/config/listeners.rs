//! Named listeners (`listeners`, `advertised.listeners`, `listener.security.protocol.map`).
//!
//! A broker binds one socket per listener; each listener has a security protocol (PLAINTEXT,
//! SSL, SASL_PLAINTEXT, SASL_SSL) and an advertised address. Guarantees: a client is always
//! told the advertised address of the listener it connected through (Metadata,
//! FindCoordinator, DescribeCluster), so a client that came in over TLS is never sent to the
//! plaintext port; listener names are unique; an advertised entry must name a listener.

use std::net::SocketAddr;

use crate::config::values::ConfigError;

/// One entry of `listeners` or `advertised.listeners`: `NAME://host:port`. A bare
/// `host:port` (the `--listen` and `--advertised-listener` flags) is the PLAINTEXT listener
/// in `listeners`, and the first listener's address in `advertised.listeners` (its name is
/// then empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Upper case, as Kafka normalises listener names (empty: a bare advertised address).
    pub name: String,
    /// `host:port` as given (an empty host means every interface).
    pub addr: String,
}

impl ListenerSpec {
    /// The address to bind: an empty host binds every interface, as in Kafka.
    pub fn bind_addr(&self) -> String {
        match self.addr.starts_with(':') {
            true => format!("0.0.0.0{}", self.addr),
            false => self.addr.clone(),
        }
    }
}

/// Parses a `listeners` or `advertised.listeners` value.
pub fn parse(key: &str, value: &str) -> Result<Vec<ListenerSpec>, ConfigError> {
    let bare_name = match key {
        "advertised.listeners" => "",
        _ => "PLAINTEXT",
    };
    let bad = |reason: &str| ConfigError {
        key: key.into(),
        value: value.into(),
        reason: reason.into(),
    };
    let mut out: Vec<ListenerSpec> = Vec::new();
    for entry in crate::config::values::list(value) {
        let (name, addr) = match entry.split_once("://") {
            Some((name, addr)) => (name.trim().to_ascii_uppercase(), addr.trim()),
            None => (bare_name.to_string(), entry),
        };
        if (name.is_empty() && entry.contains("://")) || !addr.contains(':') {
            return Err(bad("expected NAME://host:port entries"));
        }
        if out.iter().any(|l| l.name == name) {
            return Err(bad("listener names must be unique"));
        }
        out.push(ListenerSpec {
            name,
            addr: addr.to_string(),
        });
    }
    if out.is_empty() {
        return Err(bad("no listener"));
    }
    Ok(out)
}

/// The advertised `host:port` of listener `spec` bound at `local`: its entry in
/// `advertised.listeners` (by name; a bare `host:port` there is the first listener's), or the
/// bound address.
pub fn advertised(
    spec: &ListenerSpec,
    first: bool,
    advertised: &[ListenerSpec],
    local: SocketAddr,
) -> std::io::Result<(String, i32)> {
    let entry = advertised.iter().find(|a| a.name == spec.name).or_else(|| {
        first
            .then(|| advertised.iter().find(|a| a.name.is_empty()))
            .flatten()
    });
    let Some(entry) = entry else {
        return Ok((local.ip().to_string(), i32::from(local.port())));
    };
    let (host, port) = entry.addr.rsplit_once(':').ok_or_else(|| {
        std::io::Error::other(format!(
            "advertised listener '{}' is not host:port",
            entry.addr
        ))
    })?;
    let port: u16 = port.parse().map_err(|_| {
        std::io::Error::other(format!("bad port in advertised listener '{}'", entry.addr))
    })?;
    let host = host.trim_matches(['[', ']']);
    let host = match host.is_empty() {
        true => local.ip().to_string(),
        false => host.to_string(),
    };
    Ok((host, i32::from(port)))
}

/// Checks that every advertised entry names a listener.
pub fn check_advertised(
    listeners: &[ListenerSpec],
    advertised: &[ListenerSpec],
) -> Result<(), ConfigError> {
    for a in advertised {
        if !a.name.is_empty() && !listeners.iter().any(|l| l.name == a.name) {
            return Err(ConfigError {
                key: "advertised.listeners".into(),
                value: a.name.clone(),
                reason: "names no listener in listeners".into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: listeners parse by name, bare addresses are PLAINTEXT, names are unique, and each
    // listener advertises its own entry.
    #[test]
    fn parse_and_advertise() {
        let l = parse(
            "listeners",
            "PLAINTEXT://127.0.0.1:0, sasl_ssl://:9093,INTERNAL://[::1]:9",
        )
        .unwrap();
        assert_eq!(l.len(), 3);
        assert_eq!(l[1].name, "SASL_SSL");
        assert_eq!(l[1].bind_addr(), "0.0.0.0:9093");
        assert_eq!(
            parse("listeners", "127.0.0.1:5").unwrap()[0].name,
            "PLAINTEXT"
        );
        assert!(parse("listeners", "A://h:1,a://h:2").is_err());
        assert!(parse("listeners", "A://h").is_err());
        assert!(parse("listeners", "").is_err());
        let adv = parse("advertised.listeners", "SASL_SSL://broker.example:19093").unwrap();
        let local: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        assert_eq!(
            advertised(&l[1], false, &adv, local).unwrap(),
            ("broker.example".into(), 19093)
        );
        assert_eq!(
            advertised(&l[0], true, &adv, local).unwrap(),
            ("127.0.0.1".into(), 4000)
        );
        let bare = parse("advertised.listeners", "h:7").unwrap();
        assert_eq!(
            advertised(&l[0], true, &bare, local).unwrap(),
            ("h".into(), 7)
        );
        // A named PLAINTEXT entry is that listener's, never the first one's.
        let tls_first = parse("listeners", "SSL://:1,PLAINTEXT://:2").unwrap();
        let plain = parse("advertised.listeners", "PLAINTEXT://p:2").unwrap();
        assert_eq!(
            advertised(&tls_first[0], true, &plain, local).unwrap(),
            ("127.0.0.1".into(), 4000)
        );
        assert_eq!(
            advertised(&tls_first[1], false, &plain, local).unwrap(),
            ("p".into(), 2)
        );
        assert!(check_advertised(&tls_first, &bare).is_ok());
        assert!(check_advertised(&l, &adv).is_ok());
        let unknown = parse("advertised.listeners", "X://h:1,SSL://h:2").unwrap();
        assert!(check_advertised(&l, &unknown).is_err());
    }
}
