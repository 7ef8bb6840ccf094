//! SASL on SASL_PLAINTEXT and SASL_SSL listeners (KIP-43, KIP-152, KIP-368): the mechanisms
//! a listener enables, PLAIN's users, and each connection's authentication state.
//!
//! A connection's [`Session`] sees every frame before it is routed ([`Session::gate`]). Until
//! the client has authenticated, only ApiVersions, SaslHandshake and SaslAuthenticate are
//! served; any other request closes the connection, as Kafka does, and frames are limited to
//! `sasl.server.max.receive.size`. SaslHandshake and SaslAuthenticate are answered here, in
//! arrival order, because they change the connection's state. After a SaslHandshake v0 the
//! client sends raw SASL tokens (no Kafka header), answered the same way.
//!
//! Every failed authentication answers SASL_AUTHENTICATION_FAILED (58) with a message (the
//! client gives up instead of retrying), then closes this connection; nothing else is
//! affected. The message never says whether the user exists.
//!
//! Re-authentication (KIP-368): with `connections.max.reauth.ms` set, SaslAuthenticate v1+
//! tells the client its session lifetime; the client authenticates again on the same
//! connection before it ends (as the same principal), and a connection whose session has
//! ended is closed at its next request other than a re-authentication.
//!
//! PLAIN users come from `listener.name.<listener>.plain.sasl.jaas.config`, Kafka's format:
//! `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";`.
//! SCRAM credentials come from the durable store ([`crate::services::scram`]), or for a login with the
//! extension `tokenauth=true` from a delegation token ([`crate::services::delegation_tokens`]); the
//! principal is then the token's owner, and the connection may not manage tokens.

mod authenticate;
mod handshake;

use std::collections::HashMap;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use sluice_protocol::header;
use tokio::time::{Duration, Instant};

use crate::config::security::{list, SecuritySettings};
use crate::handlers::{self, Reply};
use crate::log_limit::{self, info_limited, warn_limited};
use crate::services::scram::{ScramExchange, ScramMechanism};
use crate::Broker;

/// A SASL mechanism Sluice serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
}

impl Mechanism {
    pub fn parse(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }
}

/// A SASL listener's settings (Debug shows user names, never passwords).
pub struct SaslConfig {
    /// `sasl.enabled.mechanisms`, in the order given.
    pub mechanisms: Vec<Mechanism>,
    /// PLAIN's users and passwords (from the listener's JAAS config).
    plain_users: HashMap<String, String>,
}

impl SaslConfig {
    /// The settings of `listener` (checked by `security::check_listener`).
    pub fn load(listener: &str, s: &SecuritySettings) -> Result<SaslConfig, String> {
        let mechanisms: Vec<Mechanism> = s
            .get(listener, "sasl.enabled.mechanisms")
            .map(|v| list(v).filter_map(Mechanism::parse).collect())
            .unwrap_or_default();
        let plain_users = match mechanisms.contains(&Mechanism::Plain) {
            true => {
                let jaas = s
                    .get(listener, "plain.sasl.jaas.config")
                    .unwrap_or_default();
                let users = jaas_users(jaas)?;
                if users.is_empty() {
                    return Err(format!("listener.name.{}.plain.sasl.jaas.config: no user_<name>=\"<password>\" entry", listener.to_ascii_lowercase()));
                }
                users
            }
            false => HashMap::new(),
        };
        Ok(SaslConfig {
            mechanisms,
            plain_users,
        })
    }

    fn names(&self) -> Vec<&'static str> {
        self.mechanisms.iter().map(|m| m.name()).collect()
    }
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanisms", &self.mechanisms)
            .field("plain_users", &self.plain_users.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The `user_<name>="<password>"` options of a JAAS config entry.
fn jaas_users(jaas: &str) -> Result<HashMap<String, String>, String> {
    let mut users = HashMap::new();
    let mut rest = jaas;
    while let Some(i) = rest.find("user_") {
        let after = &rest[i + 5..];
        let Some((name, value)) = after.split_once('=') else {
            break;
        };
        let value = value.trim_start();
        let Some(quoted) = value.strip_prefix('"') else {
            return Err("JAAS user_<name> values must be quoted".into());
        };
        let mut password = String::new();
        let mut chars = quoted.char_indices();
        let mut end = None;
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => {
                    if let Some((_, next)) = chars.next() {
                        password.push(next);
                    }
                }
                '"' => {
                    end = Some(at);
                    break;
                }
                c => password.push(c),
            }
        }
        let end = end.ok_or("unterminated quoted value in JAAS config")?;
        users.insert(name.trim().to_string(), password);
        rest = &quoted[end + 1..];
    }
    Ok(users)
}

/// Where a connection is in its authentication.
#[derive(Debug)]
enum State {
    /// Nothing yet (or, after authentication, until a re-authentication's handshake).
    Start,
    /// A mechanism is chosen; its first token is next. `raw`: SaslHandshake v0, tokens
    /// come without Kafka headers.
    Chosen { mech: Mechanism, raw: bool },
    /// Between SCRAM's first and final messages.
    Scram {
        exchange: Box<ScramExchange>,
        raw: bool,
    },
}

/// What the gate decided for one frame.
#[derive(Debug)]
pub(crate) enum Gate {
    /// Not for the gate: route it as usual.
    Route,
    /// Answered here; keep reading when true.
    Answered(Reply, bool),
}

/// One connection's authentication state.
#[derive(Debug)]
pub(crate) struct Session {
    /// The listener's SASL settings; None on PLAINTEXT and SSL listeners.
    config: Option<std::sync::Arc<SaslConfig>>,
    state: State,
    /// `User:<name>` once authenticated (or from the client certificate, or ANONYMOUS).
    /// Shared (`Arc`) so each request's `handlers::Ctx` takes it without allocating.
    pub principal: std::sync::Arc<str>,
    /// Authenticated through SASL (always false without SASL).
    authenticated: bool,
    /// Authenticated with a delegation token (SCRAM with `tokenauth=true`): such a client
    /// may not manage tokens (Kafka's `allowTokenRequests`).
    pub token_authenticated: bool,
    /// The mechanism of the first authentication (re-authentication must use it too).
    first_mechanism: Option<Mechanism>,
    /// When the session ends (`connections.max.reauth.ms`).
    expires: Option<Instant>,
    reauth_ms: u64,
    max_receive_bytes: usize,
    /// The client's address, for the logs.
    pub peer: std::net::SocketAddr,
}

const ANONYMOUS: &str = "User:ANONYMOUS";
const FAILED: &str = "Authentication failed: invalid credentials";

impl Session {
    pub(crate) fn new(
        broker: &Broker,
        config: Option<std::sync::Arc<SaslConfig>>,
        tls_principal: Option<String>,
        peer: std::net::SocketAddr,
    ) -> Session {
        Session {
            config,
            state: State::Start,
            principal: tls_principal
                .unwrap_or_else(|| ANONYMOUS.to_string())
                .into(),
            authenticated: false,
            token_authenticated: false,
            first_mechanism: None,
            expires: None,
            reauth_ms: broker.config.connections_max_reauth_ms,
            max_receive_bytes: broker.config.sasl_server_max_receive_size,
            peer,
        }
    }

    /// Requests other than the SASL ones may be served.
    fn open(&self) -> bool {
        self.config.is_none() || self.authenticated
    }

    /// The largest frame to accept now.
    pub(crate) fn max_frame_bytes(&self, configured: usize) -> usize {
        match self.open() {
            true => configured,
            false => configured.min(self.max_receive_bytes),
        }
    }

    /// Decides what happens to one frame body before it is routed.
    pub(crate) fn gate(&mut self, broker: &Broker, body: &Bytes) -> Gate {
        if let State::Chosen { raw: true, .. } | State::Scram { raw: true, .. } = self.state {
            return self.raw_token(broker, body);
        }
        let api_key = body.get(..2).map(|k| i16::from_be_bytes([k[0], k[1]]));
        let sasl_api = api_key == Some(ApiKey::SaslHandshake as i16)
            || api_key == Some(ApiKey::SaslAuthenticate as i16);
        if sasl_api {
            let Ok(req) = header::parse(body.clone(), &handlers::table::Keyed) else {
                // Unsupported version or malformed header: the router closes as usual.
                return Gate::Route;
            };
            return match req.api_key {
                ApiKey::SaslHandshake => handshake::handle(self, req),
                _ => authenticate::handle(self, broker, req),
            };
        }
        if self.expires.is_some_and(|e| Instant::now() >= e) {
            tracing::info!(peer = %self.peer, principal = %self.principal, "SASL session expired without re-authentication (connections.max.reauth.ms); closing connection");
            return Gate::Answered(Reply::Close, false);
        }
        if !self.open() && api_key != Some(ApiKey::ApiVersions as i16) {
            warn_limited!(log_limit::UNAUTHENTICATED_REQUEST, peer = %self.peer, api_key, "request before SASL authentication; closing connection");
            return Gate::Answered(Reply::Close, false);
        }
        Gate::Route
    }

    /// SaslHandshake: chooses a mechanism. Returns the error code (0 when chosen), the
    /// enabled mechanisms, and whether to keep the connection.
    pub(crate) fn handshake(
        &mut self,
        version: i16,
        mechanism: &str,
    ) -> (i16, Vec<&'static str>, bool) {
        use crate::error_code::ResponseError;
        const ILLEGAL_SASL_STATE: i16 = ResponseError::IllegalSaslState.code();
        const UNSUPPORTED_SASL_MECHANISM: i16 = ResponseError::UnsupportedSaslMechanism.code();
        let Some(config) = self.config.clone() else {
            return (ILLEGAL_SASL_STATE, Vec::new(), true);
        };
        let names = config.names();
        let reauth = self.authenticated && self.reauth_ms > 0 && version >= 1;
        if !matches!(self.state, State::Start) || (self.authenticated && !reauth) {
            return (ILLEGAL_SASL_STATE, names, false);
        }
        let mech = Mechanism::parse(mechanism).filter(|m| config.mechanisms.contains(m));
        let Some(mech) = mech else {
            info_limited!(log_limit::SASL_FAILED, peer = %self.peer, mechanism, "SASL mechanism not enabled on this listener; closing connection");
            return (UNSUPPORTED_SASL_MECHANISM, names, false);
        };
        if reauth && self.first_mechanism != Some(mech) {
            return (UNSUPPORTED_SASL_MECHANISM, names, false);
        }
        self.state = State::Chosen {
            mech,
            raw: version == 0,
        };
        (crate::error_code::NONE, names, true)
    }

    /// One client token: Ok((server token, authenticated now)) to continue or finish;
    /// Err(why) fails the authentication (the caller answers 58 and closes).
    pub(crate) fn step(
        &mut self,
        broker: &Broker,
        token: &[u8],
    ) -> Result<(Vec<u8>, bool), String> {
        if token.len() > crate::config::limits::SASL_TOKEN_BYTES_MAX {
            return Err("SASL token too large".into());
        }
        // Only a handshake on a SASL listener leaves Start.
        debug_assert!(matches!(self.state, State::Start) || self.config.is_some());
        match std::mem::replace(&mut self.state, State::Start) {
            State::Start => Err("SaslAuthenticate before SaslHandshake".into()),
            State::Chosen {
                mech: Mechanism::Plain,
                ..
            } => {
                let user = self.plain(token)?;
                self.done(Mechanism::Plain, &user)?;
                Ok((Vec::new(), true))
            }
            State::Chosen {
                mech: Mechanism::Scram(m),
                raw,
            } => {
                let (exchange, reply) =
                    ScramExchange::first(m, token, &broker.scram, &|id, mech| {
                        broker.delegation_tokens.credential(id, mech)
                    })?;
                self.state = State::Scram {
                    exchange: Box::new(exchange),
                    raw,
                };
                Ok((reply, false))
            }
            State::Scram { exchange, .. } => {
                let mech = Mechanism::Scram(scram_mech(&exchange));
                let token_expiry_ms = exchange.token_expiry_ms();
                let (user, reply) = exchange.finish(token)?;
                self.done(mech, &user)?;
                self.token_login(broker, token_expiry_ms);
                Ok((reply, true))
            }
        }
    }

    /// Checks a PLAIN token (`authzid NUL user NUL password`); returns the user.
    fn plain(&self, token: &[u8]) -> Result<String, String> {
        let mut parts = token.split(|b| *b == 0);
        let (Some(authzid), Some(user), Some(password), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("malformed PLAIN token".into());
        };
        let user = std::str::from_utf8(user).map_err(|_| "user name is not UTF-8")?;
        if !authzid.is_empty() && authzid != user.as_bytes() {
            return Err("authorization id differs from the user name".into());
        }
        let users = self.config.as_ref().map(|c| &c.plain_users);
        let expected = users.and_then(|u| u.get(user));
        // Compare in time independent of where the passwords differ.
        let ok = expected.is_some_and(|e| {
            e.len() == password.len()
                && e.bytes().zip(password).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0
        });
        match ok {
            true => Ok(user.to_string()),
            false => Err(format!("PLAIN: wrong user or password for '{user}'")),
        }
    }

    /// Records a successful authentication as `user` with `mech`.
    fn done(&mut self, mech: Mechanism, user: &str) -> Result<(), String> {
        debug_assert!(
            self.config.is_some(),
            "authenticated on a listener without SASL"
        );
        let principal = format!("User:{user}");
        if self.authenticated && *principal != *self.principal {
            return Err("re-authentication as a different principal".into());
        }
        match self.authenticated {
            false => tracing::debug!(%principal, mechanism = mech.name(), "SASL authenticated"),
            true => tracing::debug!(%principal, mechanism = mech.name(), "SASL re-authenticated"),
        }
        self.principal = principal.into();
        self.authenticated = true;
        self.first_mechanism = Some(mech);
        self.expires =
            (self.reauth_ms > 0).then(|| Instant::now() + Duration::from_millis(self.reauth_ms));
        Ok(())
    }

    /// Records whether the login that just succeeded used a delegation token. As Kafka's
    /// SaslServerAuthenticator does, with re-authentication on (`connections.max.reauth.ms`)
    /// the session ends no later than the token expires.
    fn token_login(&mut self, broker: &Broker, token_expiry_ms: Option<i64>) {
        self.token_authenticated = token_expiry_ms.is_some();
        let (Some(expiry_ms), Some(expires)) = (token_expiry_ms, self.expires) else {
            return;
        };
        let left_ms = expiry_ms.saturating_sub(broker.delegation_tokens.now_ms());
        let left = Duration::from_millis(u64::try_from(left_ms).unwrap_or(0));
        self.expires = Some(expires.min(Instant::now() + left));
    }

    /// The session lifetime to announce (KIP-368), 0 when sessions do not expire; a token
    /// login's session may end sooner (when its token expires).
    pub(crate) fn session_lifetime_ms(&self) -> i64 {
        let configured = i64::try_from(self.reauth_ms).unwrap_or(i64::MAX);
        match (self.token_authenticated, self.expires) {
            (true, Some(e)) => {
                let left = e.saturating_duration_since(Instant::now()).as_millis();
                configured.min(i64::try_from(left).unwrap_or(i64::MAX))
            }
            _ => configured,
        }
    }

    /// A raw token after SaslHandshake v0: answered with a raw size-prefixed token; a
    /// failure closes the connection (v0 has no way to carry an error).
    fn raw_token(&mut self, broker: &Broker, body: &Bytes) -> Gate {
        match self.step(broker, body) {
            Ok((reply, _)) => {
                let mut out = BytesMut::with_capacity(4 + reply.len());
                out.put_i32(i32::try_from(reply.len()).unwrap_or(i32::MAX));
                out.put_slice(&reply);
                Gate::Answered(
                    Reply::Frame {
                        frame: out,
                        error: false,
                    },
                    true,
                )
            }
            Err(why) => {
                info_limited!(log_limit::SASL_FAILED, peer = %self.peer, error = %why, "SASL authentication failed; closing connection");
                Gate::Answered(Reply::Close, false)
            }
        }
    }

    /// The message a client is given when its authentication failed.
    pub(crate) fn failure_message(&self) -> String {
        let mech = match &self.state {
            State::Chosen { mech, .. } => mech.name(),
            State::Scram { exchange, .. } => scram_mech(exchange).name(),
            State::Start => "SASL",
        };
        format!("{FAILED} (mechanism {mech})")
    }
}

fn scram_mech(exchange: &ScramExchange) -> ScramMechanism {
    exchange.mechanism()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: Kafka's JAAS format yields its users, escapes included; unquoted values refuse.
    #[test]
    fn jaas_users_parse() {
        let u = jaas_users(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a\"b";"#,
        )
        .unwrap();
        assert_eq!(u.len(), 2);
        assert_eq!(u["admin"], "admin-secret");
        assert_eq!(u["alice"], "a\"b");
        assert!(jaas_users("x required user_a=b;").is_err());
        assert!(jaas_users("x required user_a=\"b").is_err());
    }
}
