//! TLS for SSL and SASL_SSL listeners, on rustls (ring provider), with Kafka's PEM settings.
//!
//! Key store: `ssl.keystore.type=PEM` with `ssl.keystore.location` (one file holding the
//! private key and the certificate chain) or the inline `ssl.keystore.key` and
//! `ssl.keystore.certificate.chain`. Trust store (client certificates): `ssl.truststore.type=PEM`
//! with `ssl.truststore.location` or the inline `ssl.truststore.certificates`.
//! `ssl.client.auth`: `required` (a client without a certificate the trust store vouches for
//! is refused during the handshake), `requested` (a certificate is checked if sent) or `none`.
//! `ssl.enabled.protocols`: TLSv1.2 and/or TLSv1.3 (both by default).
//!
//! Guarantees: an unreadable or inconsistent store refuses to start, naming the key; an
//! encrypted private key is refused (no `ssl.key.password`). Files are read on blocking
//! threads only. Stores given as files are checked for changes every
//! [`limits::TLS_RELOAD_CHECK_MS`] and reloaded without a restart: new connections use the
//! new certificates, open ones keep theirs; a change that does not load is logged and the
//! previous certificates stay in use.
//!
//! A client certificate's subject becomes the connection's principal, `User:` followed by the
//! distinguished name in RFC 2253 order (`User:CN=alice,OU=eng,O=corp`), as Kafka's default
//! principal builder does.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use crate::config::security::{list, SecuritySettings};

/// How client certificates are asked for (`ssl.client.auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    Required,
    Requested,
    None,
}

/// A listener's TLS settings, their files' last-seen change times, and the server config
/// built from them.
#[derive(Debug)]
pub struct Tls {
    listener: String,
    settings: SecuritySettings,
    pub client_auth: ClientAuth,
    config: RwLock<Arc<ServerConfig>>,
    /// (file, modification time when last loaded) for every store given as a file.
    stamps: Mutex<Vec<(PathBuf, Option<SystemTime>)>>,
}

impl Tls {
    /// Reads the stores and builds the server config for `listener`. Blocking (file reads).
    pub fn load(listener: &str, settings: &SecuritySettings) -> Result<Tls, String> {
        let client_auth = match settings.get(listener, "ssl.client.auth") {
            Some(v) if v.eq_ignore_ascii_case("required") => ClientAuth::Required,
            Some(v) if v.eq_ignore_ascii_case("requested") => ClientAuth::Requested,
            _ => ClientAuth::None,
        };
        let stamps = files(listener, settings)
            .into_iter()
            .map(|f| {
                let t = modified(&f);
                (f, t)
            })
            .collect();
        let config = build(listener, settings, client_auth)?;
        Ok(Tls {
            listener: listener.to_string(),
            settings: settings.clone(),
            client_auth,
            config: RwLock::new(Arc::new(config)),
            stamps: Mutex::new(stamps),
        })
    }

    /// An acceptor with the current certificates.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.read().clone())
    }

    /// Reloads the stores when one of their files changed since the last load. Blocking.
    /// Returns true when new certificates are now in use.
    pub fn reload_if_changed(&self) -> bool {
        let mut stamps = self.stamps.lock();
        let now: Vec<Option<SystemTime>> = stamps.iter().map(|(f, _)| modified(f)).collect();
        if stamps.iter().zip(&now).all(|((_, was), is)| was == is) {
            return false;
        }
        for ((_, was), is) in stamps.iter_mut().zip(now) {
            *was = is;
        }
        match build(&self.listener, &self.settings, self.client_auth) {
            Ok(config) => {
                *self.config.write() = Arc::new(config);
                tracing::info!(listener = %self.listener, "TLS stores changed on disk; reloaded (new connections use them)");
                true
            }
            Err(e) => {
                tracing::error!(listener = %self.listener, error = %e, "TLS stores changed on disk but do not load; keeping the previous ones");
                false
            }
        }
    }
}

/// The store files of a listener (inline stores have none).
fn files(listener: &str, s: &SecuritySettings) -> Vec<PathBuf> {
    ["ssl.keystore.location", "ssl.truststore.location"]
        .iter()
        .filter_map(|k| s.get(listener, k).map(PathBuf::from))
        .collect()
}

fn modified(path: &PathBuf) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Builds the rustls server config from the listener's settings.
fn build(
    listener: &str,
    s: &SecuritySettings,
    client_auth: ClientAuth,
) -> Result<ServerConfig, String> {
    let get = |k: &str| s.get(listener, k);
    let (chain, key) = match get("ssl.keystore.location") {
        Some(path) => {
            let pem =
                std::fs::read(path).map_err(|e| format!("ssl.keystore.location {path}: {e}"))?;
            keystore(&pem).map_err(|e| format!("ssl.keystore.location {path}: {e}"))?
        }
        None => {
            let chain = normalize_pem(get("ssl.keystore.certificate.chain").unwrap_or_default());
            let chain = certs(chain.as_bytes())
                .map_err(|e| format!("ssl.keystore.certificate.chain: {e}"))?;
            let key = normalize_pem(get("ssl.keystore.key").unwrap_or_default());
            let key = private_key(key.as_bytes()).map_err(|e| format!("ssl.keystore.key: {e}"))?;
            (chain, key)
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut versions: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    match get("ssl.enabled.protocols") {
        Some(v) => {
            for p in list(v) {
                versions.push(match p {
                    "TLSv1.2" => &rustls::version::TLS12,
                    _ => &rustls::version::TLS13,
                });
            }
        }
        None => versions.extend([&rustls::version::TLS13, &rustls::version::TLS12]),
    }
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("ssl.enabled.protocols: {e}"))?;
    let builder = match client_auth {
        ClientAuth::None => builder.with_no_client_auth(),
        ClientAuth::Required | ClientAuth::Requested => {
            let roots = truststore(listener, s)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match client_auth {
                ClientAuth::Requested => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("ssl.truststore: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder
        .with_single_cert(chain, key)
        .map_err(|e| format!("key store of listener {listener}: {e}"))
}

/// The certificate chain and the private key of one PEM key store.
fn keystore(pem: &[u8]) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    Ok((certs(pem)?, private_key(pem)?))
}

/// Every certificate in a PEM text, at least one.
fn certs(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad certificate: {e}"))?;
    match chain.is_empty() {
        true => Err("no certificate".into()),
        false => Ok(chain),
    }
}

fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    if pem.windows(21).any(|w| w == b"ENCRYPTED PRIVATE KEY") {
        return Err("the private key is encrypted; ssl.key.password is not supported (store it unencrypted, readable only by the broker's user)".into());
    }
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("no usable private key: {e}"))
}

/// The trust store's CA certificates.
fn truststore(listener: &str, s: &SecuritySettings) -> Result<RootCertStore, String> {
    let pem = match s.get(listener, "ssl.truststore.location") {
        Some(path) => {
            std::fs::read(path).map_err(|e| format!("ssl.truststore.location {path}: {e}"))?
        }
        None => normalize_pem(
            s.get(listener, "ssl.truststore.certificates")
                .unwrap_or_default(),
        )
        .into_bytes(),
    };
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| format!("ssl.truststore: bad certificate: {e}"))?;
        roots
            .add(cert)
            .map_err(|e| format!("ssl.truststore: {e}"))?;
    }
    if roots.is_empty() {
        return Err("ssl.truststore: no certificate".into());
    }
    Ok(roots)
}

/// Inline PEM values often arrive on one line (a properties value): puts every
/// `-----BEGIN ...-----` / `-----END ...-----` marker and the base64 between them on lines of
/// their own, as PEM readers expect. Multi-line values pass through unchanged.
pub fn normalize_pem(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 64);
    let mut rest = value;
    while let Some(begin) = rest.find("-----BEGIN ") {
        let after = &rest[begin + 11..];
        let Some(label_end) = after.find("-----") else {
            break;
        };
        let label = &after[..label_end];
        let body_start = &after[label_end + 5..];
        let end_marker = format!("-----END {label}-----");
        let Some(body_end) = body_start.find(&end_marker) else {
            break;
        };
        // A properties value may carry literal `\n` escapes between the base64 lines.
        let body: String = body_start[..body_end]
            .replace("\\n", "")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        out.push_str(&format!("-----BEGIN {label}-----\n"));
        for line in body.as_bytes().chunks(64) {
            out.push_str(std::str::from_utf8(line).unwrap_or_default());
            out.push('\n');
        }
        out.push_str(&end_marker);
        out.push('\n');
        rest = &body_start[body_end + end_marker.len()..];
    }
    out
}

/// The principal of a client certificate: `User:` and its subject in RFC 2253 order. None
/// when the certificate's DER cannot be walked (it was verified, so that means a form this
/// walker does not know; the connection then has no certificate principal).
pub fn principal(cert_der: &[u8]) -> Option<String> {
    subject_dn(cert_der).map(|dn| format!("User:{dn}"))
}

/// One DER element: (tag, contents, rest).
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// The subject of an X.509 certificate as an RFC 2253 string.
fn subject_dn(cert: &[u8]) -> Option<String> {
    let (tag, cert, _) = der(cert)?;
    (tag == SEQUENCE).then_some(())?;
    let (tag, tbs, _) = der(cert)?;
    (tag == SEQUENCE).then_some(())?;
    let mut rest = tbs;
    // [0] version (optional), serial, signature algorithm, issuer, validity, subject.
    let (tag, _, after) = der(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..4 {
        let (_, _, after) = der(rest)?;
        rest = after;
    }
    let (tag, name, _) = der(rest)?;
    (tag == SEQUENCE).then_some(())?;
    let mut rdns = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let (tag, set, after) = der(rest)?;
        (tag == SET).then_some(())?;
        rest = after;
        let mut parts = Vec::new();
        let mut attrs = set;
        while !attrs.is_empty() {
            let (tag, attr, after) = der(attrs)?;
            (tag == SEQUENCE).then_some(())?;
            attrs = after;
            let (tag, oid, value) = der(attr)?;
            (tag == OID).then_some(())?;
            let (vtag, value, _) = der(value)?;
            parts.push(format!("{}={}", attr_name(oid), attr_value(vtag, value)));
        }
        rdns.push(parts.join("+"));
    }
    // RFC 2253 writes the most specific RDN first: the reverse of the DER order.
    rdns.reverse();
    Some(rdns.join(","))
}

/// Short names Java's X500Principal uses in RFC 2253 output; others as dotted OIDs.
fn attr_name(oid: &[u8]) -> String {
    match oid {
        [0x55, 0x04, 0x03] => "CN".into(),
        [0x55, 0x04, 0x06] => "C".into(),
        [0x55, 0x04, 0x07] => "L".into(),
        [0x55, 0x04, 0x08] => "ST".into(),
        [0x55, 0x04, 0x09] => "STREET".into(),
        [0x55, 0x04, 0x0a] => "O".into(),
        [0x55, 0x04, 0x0b] => "OU".into(),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => "DC".into(),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => "UID".into(),
        _ => dotted_oid(oid),
    }
}

fn dotted_oid(oid: &[u8]) -> String {
    let mut arcs: Vec<u64> = Vec::new();
    let mut acc: u64 = 0;
    for b in oid {
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if arcs.is_empty() {
                let first = (acc / 40).min(2);
                arcs.push(first);
                arcs.push(acc - first * 40);
            } else {
                arcs.push(acc);
            }
            acc = 0;
        }
    }
    arcs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".")
}

/// A string attribute, escaped as RFC 2253 asks; other types as `#hex`.
fn attr_value(tag: u8, value: &[u8]) -> String {
    // UTF8String, PrintableString, IA5String, TeletexString (treated as Latin-1-ish bytes).
    let text = match tag {
        0x0c | 0x13 | 0x16 | 0x14 => std::str::from_utf8(value).ok(),
        _ => None,
    };
    let Some(text) = text else {
        let hex: String = value.iter().map(|b| format!("{b:02x}")).collect();
        return format!("#{hex}");
    };
    let mut out = String::with_capacity(text.len());
    let last = text.chars().count().saturating_sub(1);
    for (i, c) in text.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a DER element.
    fn el(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut v = vec![tag];
        if content.len() < 0x80 {
            v.push(content.len() as u8);
        } else {
            v.push(0x82);
            v.extend_from_slice(&(content.len() as u16).to_be_bytes());
        }
        v.extend_from_slice(content);
        v
    }

    fn rdn(oid: &[u8], value: &str) -> Vec<u8> {
        let attr = [el(OID, oid), el(0x0c, value.as_bytes())].concat();
        el(SET, &el(SEQUENCE, &attr))
    }

    // Goal: the subject comes out in RFC 2253 order with escaping; truncated or hostile DER
    // gives None, never a panic.
    #[test]
    fn subject_of_a_certificate() {
        let name = el(
            SEQUENCE,
            &[
                rdn(&[0x55, 0x04, 0x06], "DE"),
                rdn(&[0x55, 0x04, 0x0a], "Acme, Inc"),
                rdn(&[0x55, 0x04, 0x03], "alice"),
            ]
            .concat(),
        );
        let tbs = el(
            SEQUENCE,
            &[
                el(0xa0, &el(0x02, &[2])),
                el(0x02, &[1]),
                el(SEQUENCE, &[]),
                el(SEQUENCE, &[]),
                el(SEQUENCE, &[]),
                name,
            ]
            .concat(),
        );
        let cert = el(SEQUENCE, &tbs);
        assert_eq!(
            principal(&cert).as_deref(),
            Some("User:CN=alice,O=Acme\\, Inc,C=DE")
        );
        for cut in 0..cert.len() {
            let _ = principal(&cert[..cut]);
        }
        assert_eq!(principal(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(
            dotted_oid(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d]),
            "1.2.840.113549"
        );
    }

    // Goal: one-line inline PEM values become PEM a reader accepts.
    #[test]
    fn one_line_pem_is_normalized() {
        let one = "-----BEGIN CERTIFICATE----- QUJD\\nREVG -----END CERTIFICATE-----";
        assert_eq!(
            normalize_pem(one),
            "-----BEGIN CERTIFICATE-----\nQUJDREVG\n-----END CERTIFICATE-----\n"
        );
        let certs: Vec<_> = CertificateDer::pem_slice_iter(normalize_pem(one).as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(certs[0].as_ref(), b"ABCDEF");
    }
}
