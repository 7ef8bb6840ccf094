//! Delegation tokens (KIP-48, KIP-373): the durable token store, Kafka's rules for creating,
//! renewing, expiring and describing tokens, and the SCRAM credential a token authenticates
//! with.
//!
//! A token is an id (22 characters of base64url, as Kafka's `Uuid`), an owner, the principal
//! that requested it, the principals that may renew it, and three timestamps (issued, expiry,
//! max). Its password is HMAC-SHA512(`delegation.token.secret.key`, token id), the bytes
//! Kafka's `DelegationTokenManager` computes, so a client authenticates with SASL/SCRAM as
//! user = token id, password = base64(HMAC) and the extension `tokenauth=true`, and is then
//! the token's owner. Without a secret key the feature is off: every token API answers
//! DELEGATION_TOKEN_AUTH_DISABLED (Kafka's controller does the same) and token logins fail.
//!
//! Durability: `<data_dir>/meta/delegation_tokens.json`, owner-only, replaced atomically
//! (temp file, fsync, rename, fsync dir) on the blocking pool before a change is answered, as
//! the SCRAM credentials are. A file that does not parse refuses to start. Tokens whose
//! stored HMAC is not the HMAC of their id under the configured key (the key was changed)
//! are dropped at start with a warning: Kafka derives the password from the key, so such a
//! token could never authenticate again there either. Expired tokens are removed every
//! `delegation.token.expiry.check.interval.ms`; until then they are refused at login, at
//! renewal and at expiry, as Kafka refuses them.
//!
//! Why the file keeps the HMAC: Kafka keeps token information in its metadata log and
//! recomputes the HMAC from the secret key, which sits in `server.properties` on the same
//! machine. The HMAC is a function of that key and the (non-secret) id, and the file is
//! readable only by the broker's own user, who can read the key and so compute every HMAC
//! anyway: keeping it exposes nothing that user cannot already derive, and lets the broker
//! notice a changed key (above) instead of serving tokens whose password changed under them.
//!
//! Time comes from the broker's [`Clock`] (the coordinators' clock), so tests can expire a
//! token by moving a manual clock. Changes are serialized by one writer lock held on the
//! blocking pool only; reads (authentication, describe) take an immutable snapshot.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::engine::general_purpose::{STANDARD as B64, URL_SAFE_NO_PAD as B64_URL};
use base64::Engine;
use parking_lot::{Mutex, RwLock};
use ring::rand::SecureRandom;
use ring::{hmac, pbkdf2};
use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::config::limits;
use crate::error_code::ResponseError;
use crate::services::scram::{Credential, ScramMechanism};

/// Kafka's `DelegationTokenManager.ERROR_TIMESTAMP`: the timestamp an error answers with.
pub const ERROR_TIMESTAMP: i64 = -1;

pub use crate::config::security::TokenConfig;

/// One token, as kept and stored.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub token_id: String,
    /// `<type>:<name>`, e.g. `User:alice`.
    pub owner: String,
    /// Who created it (the owner, or on v3 someone allowed CREATE_TOKENS for the owner).
    pub requester: String,
    pub renewers: Vec<String>,
    pub issue_timestamp_ms: i64,
    pub expiry_timestamp_ms: i64,
    pub max_timestamp_ms: i64,
    /// The password: HMAC-SHA512(secret key, token id).
    pub hmac: Vec<u8>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("token_id", &self.token_id)
            .field("owner", &self.owner)
            .field("renewers", &self.renewers)
            .field("expiry_timestamp_ms", &self.expiry_timestamp_ms)
            .field("max_timestamp_ms", &self.max_timestamp_ms)
            .finish_non_exhaustive()
    }
}

impl Token {
    /// Kafka's `ownerOrRenewer`.
    pub fn owner_or_renewer(&self, principal: &str) -> bool {
        self.owner == principal || self.renewers.iter().any(|r| r == principal)
    }

    /// Past its expiry or its max timestamp (Kafka compares with `<`).
    pub fn expired(&self, now_ms: i64) -> bool {
        self.max_timestamp_ms < now_ms || self.expiry_timestamp_ms < now_ms
    }
}

/// A principal's type and name (`User:alice` is ("User", "alice")).
pub fn split_principal(principal: &str) -> (&str, &str) {
    principal.split_once(':').unwrap_or(("User", principal))
}

pub use crate::services::scram::TokenCredential;

/// A refusal, as the Kafka error code to answer.
pub type Refusal = i16;

/// A CreateDelegationToken that passed the handler's checks.
#[derive(Debug, Clone)]
pub struct NewToken {
    pub owner: String,
    pub requester: String,
    pub renewers: Vec<String>,
    /// The request's `max_lifetime_ms` (<= 0: the configured maximum).
    pub max_lifetime_ms: i64,
}

type Tokens = BTreeMap<String, Arc<Token>>;

const FILE_NAME: &str = "delegation_tokens.json";
/// SCRAM iterations of a token's credential: Kafka's minimum for both mechanisms, which is
/// what its `DelegationTokenManager` uses (clients refuse fewer).
const TOKEN_SCRAM_ITERATIONS: u32 = 4096;

#[derive(Serialize, Deserialize)]
struct StoredToken {
    token_id: String,
    owner: String,
    requester: String,
    renewers: Vec<String>,
    issue_timestamp_ms: i64,
    expiry_timestamp_ms: i64,
    max_timestamp_ms: i64,
    /// Base64.
    hmac: String,
}

#[derive(Serialize, Deserialize)]
struct TokenFile {
    format_version: u32,
    tokens: Vec<StoredToken>,
}

/// The durable delegation tokens.
pub struct TokenStore {
    meta_dir: PathBuf,
    /// The HMAC key; None turns the feature off.
    key: Option<hmac::Key>,
    config: TokenConfig,
    clock: Clock,
    /// The current tokens by id; replaced whole after each durable change.
    tokens: RwLock<Arc<Tokens>>,
    /// Serializes changes (held on the blocking pool only, across the file write).
    writer: Mutex<()>,
    /// SCRAM credentials derived from tokens' HMACs (a PBKDF2 each), computed at a token's
    /// first login per mechanism and dropped with the token.
    credentials: Mutex<BTreeMap<(String, ScramMechanism), Credential>>,
}

impl std::fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenStore")
            .field("enabled", &self.enabled())
            .field("tokens", &self.tokens.read().len())
            .finish_non_exhaustive()
    }
}

fn invalid(path: &Path, e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("{}: {e}; refusing to start rather than lose delegation tokens (restore it from a backup, or remove it to start with none)", path.display()),
    )
}

impl TokenStore {
    /// Loads the tokens (none when the file does not exist). Blocking.
    pub fn open(data_dir: &Path, config: TokenConfig, clock: Clock) -> std::io::Result<Self> {
        let meta_dir = data_dir.join("meta");
        sluice_log::fs::create_private_dir_all(&meta_dir)?;
        let key = config
            .key()
            .map(|k| hmac::Key::new(hmac::HMAC_SHA512, k.as_bytes()));
        let path = meta_dir.join(FILE_NAME);
        let loaded = match std::fs::read(&path) {
            Ok(bytes) => decode_file(&bytes).map_err(|e| invalid(&path, e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Tokens::new(),
            Err(e) => return Err(e),
        };
        let store = TokenStore {
            meta_dir,
            key,
            config,
            clock,
            tokens: RwLock::new(Arc::new(Tokens::new())),
            writer: Mutex::new(()),
            credentials: Mutex::new(BTreeMap::new()),
        };
        let kept: Tokens = loaded
            .into_iter()
            .filter(|(id, t)| {
                let valid = store.key.is_none() || store.hmac_matches(t);
                if !valid {
                    tracing::warn!(token_id = %id, owner = %t.owner, "delegation token dropped: its HMAC is not that of the configured delegation.token.secret.key (the key was changed)");
                }
                valid
            })
            .collect();
        *store.tokens.write() = Arc::new(kept);
        Ok(store)
    }

    /// A secret key is configured.
    pub fn enabled(&self) -> bool {
        self.key.is_some()
    }

    pub fn config(&self) -> &TokenConfig {
        &self.config
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Every token (a snapshot).
    pub fn snapshot(&self) -> Arc<Tokens> {
        self.tokens.read().clone()
    }

    fn hmac_of(&self, token_id: &str) -> Option<Vec<u8>> {
        let key = self.key.as_ref()?;
        Some(hmac::sign(key, token_id.as_bytes()).as_ref().to_vec())
    }

    fn hmac_matches(&self, token: &Token) -> bool {
        self.hmac_of(&token.token_id)
            .is_some_and(|h| same(&h, &token.hmac))
    }

    /// The token whose HMAC is `hmac` (compared in constant time per token).
    fn by_hmac<'a>(tokens: &'a Tokens, hmac: &[u8]) -> Option<&'a Arc<Token>> {
        tokens.values().find(|t| same(&t.hmac, hmac))
    }

    /// Applies `f` to a copy of the tokens; when it returns Ok and changed them, writes them
    /// durably, then makes them visible. Blocking.
    fn change<T>(
        &self,
        f: impl FnOnce(&mut Tokens, i64) -> Result<T, Refusal>,
    ) -> Result<T, Refusal> {
        if self.key.is_none() {
            return Err(ResponseError::DelegationTokenAuthDisabled.code());
        }
        let _writer = self.writer.lock();
        let before = self.tokens.read().clone();
        let mut tokens: Tokens = (*before).clone();
        let out = f(&mut tokens, self.clock.now_ms())?;
        if tokens != *before {
            self.write(&tokens).map_err(|e| {
                tracing::error!(error = %e, "delegation tokens: write failed");
                ResponseError::UnknownServerError.code()
            })?;
            self.credentials
                .lock()
                .retain(|(id, _), _| tokens.contains_key(id));
            *self.tokens.write() = Arc::new(tokens);
        }
        Ok(out)
    }

    fn write(&self, tokens: &Tokens) -> std::io::Result<()> {
        let bytes =
            serde_json::to_vec_pretty(&encode_file(tokens)).map_err(std::io::Error::other)?;
        crate::services::atomic_file::write_atomically(&self.meta_dir, FILE_NAME, &bytes)
    }

    /// Creates a token (Kafka's `createDelegationToken`). Blocking.
    pub fn create(&self, new: NewToken) -> Result<Arc<Token>, Refusal> {
        let token_id = random_token_id()?;
        let hmac = self
            .hmac_of(&token_id)
            .ok_or(ResponseError::DelegationTokenAuthDisabled.code())?;
        let c = &self.config;
        self.change(|tokens, now| {
            if tokens.len() >= limits::DELEGATION_TOKENS_MAX {
                tracing::warn!(
                    max = limits::DELEGATION_TOKENS_MAX,
                    "delegation token refused: the broker holds the most tokens it keeps"
                );
                return Err(ResponseError::PolicyViolation.code());
            }
            let max_lifetime_ms = match new.max_lifetime_ms > 0 {
                true => c.max_lifetime_ms.min(new.max_lifetime_ms),
                false => c.max_lifetime_ms,
            };
            let max_timestamp_ms = now.saturating_add(max_lifetime_ms);
            let token = Arc::new(Token {
                token_id: token_id.clone(),
                owner: new.owner,
                requester: new.requester,
                renewers: new.renewers,
                issue_timestamp_ms: now,
                expiry_timestamp_ms: max_timestamp_ms.min(now.saturating_add(c.expiry_time_ms)),
                max_timestamp_ms,
                hmac,
            });
            tokens.insert(token_id, token.clone());
            Ok(token)
        })
    }

    /// Renews the token with this HMAC as `principal` (Kafka's `renewDelegationToken`):
    /// the new expiry timestamp. Blocking.
    pub fn renew(
        &self,
        hmac: &[u8],
        principal: &str,
        renew_period_ms: i64,
    ) -> Result<i64, Refusal> {
        let expiry_time_ms = self.config.expiry_time_ms;
        self.change(|tokens, now| {
            let token =
                Self::by_hmac(tokens, hmac).ok_or(ResponseError::DelegationTokenNotFound.code())?;
            if token.expired(now) {
                return Err(ResponseError::DelegationTokenExpired.code());
            }
            if !token.owner_or_renewer(principal) {
                return Err(ResponseError::DelegationTokenOwnerMismatch.code());
            }
            let period = match renew_period_ms > 0 {
                true => expiry_time_ms.min(renew_period_ms),
                false => expiry_time_ms,
            };
            let expiry = token.max_timestamp_ms.min(now.saturating_add(period));
            let renewed = Token {
                expiry_timestamp_ms: expiry,
                ..(**token).clone()
            };
            tokens.insert(renewed.token_id.clone(), Arc::new(renewed));
            Ok(expiry)
        })
    }

    /// Expires the token with this HMAC as `principal` (Kafka's `expireDelegationToken`):
    /// a negative period removes it now; otherwise its expiry becomes now + period (at most
    /// its max). The new expiry timestamp. Blocking.
    pub fn expire(&self, hmac: &[u8], principal: &str, period_ms: i64) -> Result<i64, Refusal> {
        self.change(|tokens, now| {
            let token = Self::by_hmac(tokens, hmac)
                .ok_or(ResponseError::DelegationTokenNotFound.code())?
                .clone();
            if !token.owner_or_renewer(principal) {
                return Err(ResponseError::DelegationTokenOwnerMismatch.code());
            }
            if period_ms < 0 {
                tokens.remove(&token.token_id);
                return Ok(now);
            }
            if token.expired(now) {
                return Err(ResponseError::DelegationTokenExpired.code());
            }
            let expiry = token.max_timestamp_ms.min(now.saturating_add(period_ms));
            let changed = Token {
                expiry_timestamp_ms: expiry,
                ..(*token).clone()
            };
            tokens.insert(changed.token_id.clone(), Arc::new(changed));
            Ok(expiry)
        })
    }

    /// Removes every expired token (the expiry-check task). Blocking.
    pub fn purge_expired(&self) -> usize {
        if self.key.is_none() {
            return 0;
        }
        let now = self.clock.now_ms();
        if !self.tokens.read().values().any(|t| t.expired(now)) {
            return 0;
        }
        let removed = self.change(|tokens, now| {
            let before = tokens.len();
            tokens.retain(|id, t| {
                let keep = !t.expired(now);
                if !keep {
                    tracing::info!(token_id = %id, owner = %t.owner, "delegation token expired; removed");
                }
                keep
            });
            Ok(before - tokens.len())
        });
        removed.unwrap_or(0)
    }

    /// The credential a `tokenauth=true` SCRAM login as `token_id` checks, if the token
    /// exists and has not expired. The first login per token and mechanism derives it
    /// (PBKDF2 with Kafka's 4096 iterations, a few milliseconds); later ones reuse it.
    pub fn credential(&self, token_id: &str, mech: ScramMechanism) -> Option<TokenCredential> {
        self.key.as_ref()?;
        let token = self.tokens.read().get(token_id)?.clone();
        if token.expired(self.clock.now_ms()) {
            return None;
        }
        let cache_key = (token.token_id.clone(), mech);
        let cached = self.credentials.lock().get(&cache_key).cloned();
        let credential = match cached {
            Some(c) => c,
            None => {
                let c = derive_credential(mech, &B64.encode(&token.hmac))?;
                let mut cache = self.credentials.lock();
                // Only tokens that still exist are cached (a change may have removed it).
                if self.tokens.read().contains_key(token_id) {
                    cache.insert(cache_key, c.clone());
                }
                c
            }
        };
        Some(TokenCredential {
            owner_name: split_principal(&token.owner).1.to_string(),
            credential,
            expiry_timestamp_ms: token.expiry_timestamp_ms,
        })
    }
}

/// Kafka's `ScramFormatter.generateCredential(password, minIterations)`: a random salt, the
/// salted password, and its StoredKey/ServerKey.
fn derive_credential(mech: ScramMechanism, password: &str) -> Option<Credential> {
    let mut salt = [0u8; 16];
    ring::rand::SystemRandom::new().fill(&mut salt).ok()?;
    let alg = match mech {
        ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
        ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
    };
    let mut salted = vec![0u8; mech.hash_len()];
    let iterations = NonZeroU32::new(TOKEN_SCRAM_ITERATIONS)?;
    pbkdf2::derive(alg, iterations, &salt, password.as_bytes(), &mut salted);
    let iterations = i32::try_from(TOKEN_SCRAM_ITERATIONS).ok()?;
    Some(Credential::from_salted(mech, &salt, iterations, &salted))
}

/// A new token id: 16 random bytes as unpadded base64url, the form of Kafka's `Uuid`.
fn random_token_id() -> Result<String, Refusal> {
    let mut id = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut id)
        .map_err(|_| ResponseError::UnknownServerError.code())?;
    Ok(B64_URL.encode(id))
}

/// Compares in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn encode_file(tokens: &Tokens) -> TokenFile {
    let tokens = tokens
        .values()
        .map(|t| StoredToken {
            token_id: t.token_id.clone(),
            owner: t.owner.clone(),
            requester: t.requester.clone(),
            renewers: t.renewers.clone(),
            issue_timestamp_ms: t.issue_timestamp_ms,
            expiry_timestamp_ms: t.expiry_timestamp_ms,
            max_timestamp_ms: t.max_timestamp_ms,
            hmac: B64.encode(&t.hmac),
        })
        .collect();
    TokenFile {
        format_version: 1,
        tokens,
    }
}

fn decode_file(bytes: &[u8]) -> Result<Tokens, String> {
    let file: TokenFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.format_version != 1 {
        return Err(format!("unknown format_version {}", file.format_version));
    }
    let mut tokens = Tokens::new();
    for t in file.tokens {
        let hmac = B64
            .decode(&t.hmac)
            .map_err(|e| format!("token {}: {e}", t.token_id))?;
        let token = Token {
            token_id: t.token_id,
            owner: t.owner,
            requester: t.requester,
            renewers: t.renewers,
            issue_timestamp_ms: t.issue_timestamp_ms,
            expiry_timestamp_ms: t.expiry_timestamp_ms,
            max_timestamp_ms: t.max_timestamp_ms,
            hmac,
        };
        if tokens
            .insert(token.token_id.clone(), Arc::new(token))
            .is_some()
        {
            return Err("a token id is listed twice".into());
        }
    }
    Ok(tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path, key: &str, clock: &Clock) -> TokenStore {
        let config = TokenConfig {
            secret_key: key.into(),
            ..TokenConfig::default()
        };
        TokenStore::open(dir, config, clock.clone()).unwrap()
    }

    fn new_token(owner: &str, renewers: &[&str], max_lifetime_ms: i64) -> NewToken {
        NewToken {
            owner: owner.into(),
            requester: owner.into(),
            renewers: renewers.iter().map(|r| r.to_string()).collect(),
            max_lifetime_ms,
        }
    }

    // Goal: Kafka's rules for renewal and expiry (owner or renewer only, not after expiry,
    // never past the max timestamp), the HMAC is Kafka's (HMAC-SHA512 of the id under the
    // key), and tokens survive a reopen, except after the key changed.
    #[test]
    fn rules_hmac_and_durability() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::manual(1_000_000);
        let s = store(dir.path(), "secret", &clock);
        let t = s
            .create(new_token("User:alice", &["User:bob"], 10_000))
            .unwrap();
        let key = hmac::Key::new(hmac::HMAC_SHA512, b"secret");
        assert_eq!(t.hmac, hmac::sign(&key, t.token_id.as_bytes()).as_ref());
        assert_eq!(t.token_id.len(), 22);
        assert_eq!(t.max_timestamp_ms, 1_010_000);
        assert_eq!(t.expiry_timestamp_ms, 1_010_000);
        let mismatch = ResponseError::DelegationTokenOwnerMismatch.code();
        assert_eq!(s.renew(&t.hmac, "User:eve", 0), Err(mismatch));
        assert_eq!(
            s.renew(b"nope", "User:bob", 0),
            Err(ResponseError::DelegationTokenNotFound.code())
        );
        clock.advance_ms(1_000);
        assert_eq!(s.renew(&t.hmac, "User:bob", 500), Ok(1_001_500));
        assert!(s.credential(&t.token_id, ScramMechanism::Sha256).is_some());
        clock.advance_ms(600);
        assert!(s.credential(&t.token_id, ScramMechanism::Sha256).is_none());
        let expired = ResponseError::DelegationTokenExpired.code();
        assert_eq!(s.renew(&t.hmac, "User:alice", 0), Err(expired));
        assert_eq!(s.expire(&t.hmac, "User:alice", 5), Err(expired));
        let t2 = s.create(new_token("User:carol", &[], 0)).unwrap();
        assert_eq!(
            t2.max_timestamp_ms - t2.issue_timestamp_ms,
            7 * 24 * 3_600_000
        );
        assert_eq!(s.purge_expired(), 1);
        let again = store(dir.path(), "secret", &clock);
        assert_eq!(again.snapshot().len(), 1);
        assert_eq!(*again.snapshot()[&t2.token_id], *t2);
        assert_eq!(again.expire(&t2.hmac, "User:carol", -1), Ok(clock.now_ms()));
        assert!(again.snapshot().is_empty());
        let t3 = again.create(new_token("User:dave", &[], 0)).unwrap();
        let text = std::fs::read_to_string(dir.path().join("meta").join(FILE_NAME)).unwrap();
        assert!(text.contains(&t3.token_id) && !text.contains("secret"));
        assert!(store(dir.path(), "other-key", &clock).snapshot().is_empty());
        std::fs::write(dir.path().join("meta").join(FILE_NAME), b"{oops").unwrap();
        assert!(TokenStore::open(dir.path(), TokenConfig::default(), clock).is_err());
    }

    // Goal: without a key every change is DELEGATION_TOKEN_AUTH_DISABLED and no login works.
    #[test]
    fn disabled_without_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path(), "", &Clock::manual(0));
        let disabled = ResponseError::DelegationTokenAuthDisabled.code();
        assert_eq!(s.create(new_token("User:a", &[], 0)).err(), Some(disabled));
        assert_eq!(s.renew(b"x", "User:a", 0), Err(disabled));
        assert!(s.credential("x", ScramMechanism::Sha512).is_none());
        assert_eq!(s.purge_expired(), 0);
    }
}
