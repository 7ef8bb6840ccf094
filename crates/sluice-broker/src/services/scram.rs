//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677, KIP-84): the durable credential
//! store and the server side of one authentication exchange.
//!
//! Credentials are managed with AlterUserScramCredentials / DescribeUserScramCredentials
//! (KIP-554: the client sends the salt and the salted password, never the password). The
//! store keeps only what the server needs to verify a client and prove itself: per user and
//! mechanism the salt, the iteration count, StoredKey = H(HMAC(salted, "Client Key")) and
//! ServerKey = HMAC(salted, "Server Key"). Neither lets anyone log in as the user (the client
//! proof needs ClientKey, which H does not give back).
//!
//! Durability: `<data_dir>/meta/scram_credentials.json`, owner-only, replaced atomically
//! (temp file, fsync, rename, fsync dir) on the blocking pool before a change is answered or
//! used, as topic metadata is. A file that does not parse refuses to start (users are never
//! dropped silently). Writers are serialized; authentications read an immutable snapshot that
//! is swapped in after the write, so no lock is held across file I/O on a network thread.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use parking_lot::{Mutex, RwLock};
use ring::{digest, hmac, rand::SecureRandom};
use serde::{Deserialize, Serialize};

use crate::config::limits;

/// The two SCRAM mechanisms, with Kafka's type numbers (ScramMechanism: 1 and 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SCRAM-SHA-256" => Some(ScramMechanism::Sha256),
            "SCRAM-SHA-512" => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    /// Kafka's wire number for the mechanism.
    pub fn type_id(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_type_id(id: i8) -> Option<Self> {
        match id {
            1 => Some(ScramMechanism::Sha256),
            2 => Some(ScramMechanism::Sha512),
            _ => None,
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    /// Bytes of the hash (and of a salted password).
    pub fn hash_len(self) -> usize {
        self.digest().output_len()
    }
}

fn mac(mech: ScramMechanism, key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(mech.hmac(), key), data)
        .as_ref()
        .to_vec()
}

fn hash(mech: ScramMechanism, data: &[u8]) -> Vec<u8> {
    digest::digest(mech.digest(), data).as_ref().to_vec()
}

/// Compares in time independent of where the inputs differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What the server keeps for one user and mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    pub salt: Vec<u8>,
    pub iterations: i32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

impl Credential {
    /// The credential for a salted password (Hi(password, salt, iterations)).
    pub fn from_salted(
        mech: ScramMechanism,
        salt: &[u8],
        iterations: i32,
        salted: &[u8],
    ) -> Credential {
        let client_key = mac(mech, salted, b"Client Key");
        Credential {
            salt: salt.to_vec(),
            iterations,
            stored_key: hash(mech, &client_key),
            server_key: mac(mech, salted, b"Server Key"),
        }
    }
}

/// The file's form of a credential (base64 fields).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StoredCredential {
    salt: String,
    iterations: i32,
    stored_key: String,
    server_key: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CredentialFile {
    format_version: u32,
    /// user -> mechanism name -> credential.
    users: BTreeMap<String, BTreeMap<String, StoredCredential>>,
}

type Users = BTreeMap<String, BTreeMap<ScramMechanism, Credential>>;

const FILE_NAME: &str = "scram_credentials.json";

/// One requested change.
#[derive(Debug, Clone)]
pub enum Change {
    Delete {
        user: String,
        mech: ScramMechanism,
    },
    Upsert {
        user: String,
        mech: ScramMechanism,
        credential: Credential,
    },
}

/// The durable SCRAM credentials.
#[derive(Debug)]
pub struct CredentialStore {
    meta_dir: PathBuf,
    /// The current credentials; replaced whole after each durable change.
    users: RwLock<Arc<Users>>,
    /// Serializes changes (held on the blocking pool only, across the file write).
    writer: Mutex<()>,
}

impl CredentialStore {
    /// Loads the store (empty when the file does not exist). Blocking.
    pub fn open(data_dir: &Path) -> std::io::Result<CredentialStore> {
        let meta_dir = data_dir.join("meta");
        sluice_log::fs::create_private_dir_all(&meta_dir)?;
        let path = meta_dir.join(FILE_NAME);
        let users = match std::fs::read(&path) {
            Ok(bytes) => decode_file(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}; refusing to start rather than lose SCRAM users (restore it from a backup, or remove it to start with none)", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Users::new(),
            Err(e) => return Err(e),
        };
        Ok(CredentialStore {
            meta_dir,
            users: RwLock::new(Arc::new(users)),
            writer: Mutex::new(()),
        })
    }

    /// The credential of `user` for `mech`.
    pub fn get(&self, user: &str, mech: ScramMechanism) -> Option<Credential> {
        self.users.read().get(user)?.get(&mech).cloned()
    }

    /// The users and their (mechanism, iterations), all of them or those named.
    pub fn snapshot(&self) -> Arc<Users> {
        self.users.read().clone()
    }

    /// Applies changes that were each checked by the caller, durably, then makes them
    /// visible. Blocking (file write).
    pub fn apply(&self, changes: &[Change]) -> std::io::Result<()> {
        let _writer = self.writer.lock();
        let mut users: Users = (**self.users.read()).clone();
        for change in changes {
            match change {
                Change::Delete { user, mech } => {
                    if let Some(m) = users.get_mut(user) {
                        m.remove(mech);
                        if m.is_empty() {
                            users.remove(user);
                        }
                    }
                }
                Change::Upsert {
                    user,
                    mech,
                    credential,
                } => {
                    users
                        .entry(user.clone())
                        .or_default()
                        .insert(*mech, credential.clone());
                }
            }
        }
        if users.len() > limits::SCRAM_USERS_MAX {
            return Err(std::io::Error::other(format!(
                "more than {} SCRAM users",
                limits::SCRAM_USERS_MAX
            )));
        }
        let bytes =
            serde_json::to_vec_pretty(&encode_file(&users)).map_err(std::io::Error::other)?;
        crate::services::atomic_file::write_atomically(&self.meta_dir, FILE_NAME, &bytes)?;
        *self.users.write() = Arc::new(users);
        Ok(())
    }
}

fn encode_file(users: &Users) -> CredentialFile {
    let users = users
        .iter()
        .map(|(u, m)| {
            let m = m
                .iter()
                .map(|(mech, c)| {
                    let stored = StoredCredential {
                        salt: B64.encode(&c.salt),
                        iterations: c.iterations,
                        stored_key: B64.encode(&c.stored_key),
                        server_key: B64.encode(&c.server_key),
                    };
                    (mech.name().to_string(), stored)
                })
                .collect();
            (u.clone(), m)
        })
        .collect();
    CredentialFile {
        format_version: 1,
        users,
    }
}

fn decode_file(bytes: &[u8]) -> Result<Users, String> {
    let file: CredentialFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.format_version != 1 {
        return Err(format!("unknown format_version {}", file.format_version));
    }
    let mut users = Users::new();
    for (user, mechs) in file.users {
        let mut m = BTreeMap::new();
        for (name, c) in mechs {
            let mech =
                ScramMechanism::from_name(&name).ok_or(format!("unknown mechanism {name}"))?;
            let dec = |s: &str| B64.decode(s).map_err(|e| format!("user {user}: {e}"));
            let credential = Credential {
                salt: dec(&c.salt)?,
                iterations: c.iterations,
                stored_key: dec(&c.stored_key)?,
                server_key: dec(&c.server_key)?,
            };
            if credential.stored_key.len() != mech.hash_len()
                || credential.server_key.len() != mech.hash_len()
            {
                return Err(format!("user {user}: {name} keys have the wrong length"));
            }
            m.insert(mech, credential);
        }
        users.insert(user, m);
    }
    Ok(users)
}

/// The server's state between the client's first and final messages.
#[derive(Debug)]
pub struct ScramExchange {
    mech: ScramMechanism,
    user: String,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    credential: Credential,
    /// A delegation-token login (`tokenauth=true`): the token's expiry timestamp.
    token_expiry_ms: Option<i64>,
}

/// Why an exchange failed (the client is told only that authentication failed).
pub type ScramError = String;

/// Decodes a SCRAM `saslname` (`=2C` is `,`, `=3D` is `=`).
fn decode_name(name: &str) -> Result<String, ScramError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(i) = rest.find('=') {
        out.push_str(&rest[..i]);
        match rest.get(i..i + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err("bad user name encoding".into()),
        }
        rest = &rest[i + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

impl ScramExchange {
    pub fn mechanism(&self) -> ScramMechanism {
        self.mech
    }

    /// A delegation-token login (the client sent `tokenauth=true`): when the token expires.
    /// The user [`ScramExchange::finish`] returns is then the token's owner.
    pub fn token_expiry_ms(&self) -> Option<i64> {
        self.token_expiry_ms
    }

    /// Takes the client-first message; returns the exchange and the server-first message.
    /// A client-first with the extension `tokenauth=true` names a delegation token as its
    /// user (Kafka's ScramSaslServer): its credential comes from `tokens` (the delegation
    /// token store's lookup by token id, handed in: the store is built on this module).
    pub fn first(
        mech: ScramMechanism,
        msg: &[u8],
        store: &CredentialStore,
        tokens: &TokenLookup<'_>,
    ) -> Result<(ScramExchange, Vec<u8>), ScramError> {
        let mut nonce = [0u8; 24];
        ring::rand::SystemRandom::new()
            .fill(&mut nonce)
            .map_err(|_| "no randomness".to_string())?;
        Self::first_with_nonce(mech, msg, store, Some(tokens), &B64.encode(nonce))
    }

    fn first_with_nonce(
        mech: ScramMechanism,
        msg: &[u8],
        store: &CredentialStore,
        tokens: Option<&TokenLookup<'_>>,
        server_nonce: &str,
    ) -> Result<(ScramExchange, Vec<u8>), ScramError> {
        let msg = std::str::from_utf8(msg).map_err(|_| "client-first is not UTF-8")?;
        // gs2-header: cbind flag, authzid, then the bare message.
        let mut parts = msg.splitn(3, ',');
        let (Some(flag), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err("malformed client-first message".into());
        };
        if flag != "n" && flag != "y" {
            return Err("channel binding is not supported".into());
        }
        let gs2_header = format!("{flag},{authzid},");
        let mut fields = bare.split(',');
        let user = fields
            .next()
            .and_then(|f| f.strip_prefix("n="))
            .ok_or("client-first without a user name")?;
        let user = decode_name(user)?;
        let client_nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .filter(|n| !n.is_empty())
            .ok_or("client-first without a nonce")?;
        // Kafka's only extension is tokenauth (delegation tokens); others are ignored, as
        // Kafka ignores them.
        let token_auth = fields.any(|ext| ext.eq_ignore_ascii_case("tokenauth=true"));
        if let Some(authzid) = authzid.strip_prefix("a=") {
            if decode_name(authzid)? != user {
                return Err("authorization id differs from the user name".into());
            }
        } else if !authzid.is_empty() {
            return Err("malformed authorization id".into());
        }
        if user.len() > limits::SCRAM_USER_NAME_BYTES_MAX {
            return Err("user name too long".into());
        }
        let (user, credential, token_expiry_ms) = match token_auth {
            false => {
                let credential = store
                    .get(&user, mech)
                    .ok_or_else(|| format!("no {} credential for user {user}", mech.name()))?;
                (user, credential, None)
            }
            true => {
                let token = tokens
                    .and_then(|lookup| lookup(&user, mech))
                    .ok_or_else(|| format!("no delegation token {user} (unknown or expired)"))?;
                let expiry = Some(token.expiry_timestamp_ms);
                (token.owner_name, token.credential, expiry)
            }
        };
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&credential.salt),
            credential.iterations
        );
        let reply = server_first.clone().into_bytes();
        Ok((
            ScramExchange {
                mech,
                user,
                gs2_header,
                client_first_bare: bare.to_string(),
                server_first,
                nonce,
                credential,
                token_expiry_ms,
            },
            reply,
        ))
    }

    /// Takes the client-final message; returns the user and the server-final message.
    pub fn finish(self, msg: &[u8]) -> Result<(String, Vec<u8>), ScramError> {
        let msg = std::str::from_utf8(msg).map_err(|_| "client-final is not UTF-8")?;
        let (without_proof, proof) = msg
            .rsplit_once(",p=")
            .ok_or("client-final without a proof")?;
        let mut fields = without_proof.split(',');
        let binding = fields
            .next()
            .and_then(|f| f.strip_prefix("c="))
            .ok_or("client-final without channel binding")?;
        if binding != B64.encode(self.gs2_header.as_bytes()) {
            return Err("channel binding does not match".into());
        }
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .ok_or("client-final without a nonce")?;
        // Kafka's ScramSaslServer accepts a nonce that *ends with* the combined one, and
        // librdkafka 2.0.x (Debian's, under kcat) sends its client nonce twice; the proof
        // is computed over the message as sent, so this weakens nothing.
        if !nonce.ends_with(self.nonce.as_str()) {
            return Err("nonce does not match".into());
        }
        let proof = B64.decode(proof).map_err(|_| "proof is not base64")?;
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let c = &self.credential;
        let signature = mac(self.mech, &c.stored_key, auth_message.as_bytes());
        if proof.len() != signature.len() {
            return Err("proof has the wrong length".into());
        }
        let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
        if !same(&hash(self.mech, &client_key), &c.stored_key) {
            return Err(format!("wrong password for user {}", self.user));
        }
        let server_signature = mac(self.mech, &c.server_key, auth_message.as_bytes());
        let reply = format!("v={}", B64.encode(server_signature)).into_bytes();
        Ok((self.user, reply))
    }
}

/// The delegation token store's lookup of a token id's credential (`TokenStore::credential`).
pub type TokenLookup<'a> = dyn Fn(&str, ScramMechanism) -> Option<TokenCredential> + 'a;

/// What a token login needs: the owner's name, the SCRAM credential derived from the
/// token's HMAC, and the token's expiry.
#[derive(Debug, Clone)]
pub struct TokenCredential {
    pub owner_name: String,
    pub credential: Credential,
    pub expiry_timestamp_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU32;

    fn salted(mech: ScramMechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let alg = match mech {
            ScramMechanism::Sha256 => ring::pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => ring::pbkdf2::PBKDF2_HMAC_SHA512,
        };
        let mut out = vec![0u8; mech.hash_len()];
        ring::pbkdf2::derive(
            alg,
            NonZeroU32::new(iterations).unwrap(),
            salt,
            password.as_bytes(),
            &mut out,
        );
        out
    }

    fn store_with(
        user: &str,
        mech: ScramMechanism,
        password: &str,
        salt: &[u8],
    ) -> (tempfile::TempDir, CredentialStore) {
        let dir = tempfile::tempdir().unwrap();
        let store = CredentialStore::open(dir.path()).unwrap();
        let credential =
            Credential::from_salted(mech, salt, 4096, &salted(mech, password, salt, 4096));
        store
            .apply(&[Change::Upsert {
                user: user.into(),
                mech,
                credential,
            }])
            .unwrap();
        (dir, store)
    }

    // Goal: the exchange of RFC 7677's SCRAM-SHA-256 example, byte for byte.
    #[test]
    fn rfc7677_example() {
        let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let (_d, store) = store_with("user", ScramMechanism::Sha256, "pencil", &salt);
        let (ex, first) = ScramExchange::first_with_nonce(
            ScramMechanism::Sha256,
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            &store,
            None,
            "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        )
        .unwrap();
        assert_eq!(
            first,
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
        );
        let (user, last) = ex
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(user, "user");
        assert_eq!(last, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }

    // Goal: a wrong proof, a replayed nonce, unknown users and garbage all fail without a
    // panic; the store survives a reopen and keeps no password.
    #[test]
    fn failures_and_durability() {
        let salt = b"salty-salt-16byt";
        let mech = ScramMechanism::Sha512;
        let (dir, store) = store_with("alice", mech, "secret", salt);
        let (ex, _) =
            ScramExchange::first_with_nonce(mech, b"n,,n=alice,r=abc", &store, None, "XYZ")
                .unwrap();
        let bad = format!("c=biws,r=abcXYZ,p={}", B64.encode([0u8; 64]));
        assert!(ex.finish(bad.as_bytes()).is_err());
        let (ex, _) =
            ScramExchange::first_with_nonce(mech, b"n,,n=alice,r=abc", &store, None, "XYZ")
                .unwrap();
        assert!(ex.finish(b"c=biws,r=abcOTHER,p=AAAA").is_err());
        for garbage in [
            &b""[..],
            b"n",
            b"p=x,,n=alice,r=a",
            b"n,,n=bob,r=a",
            b"\xff\xfe",
            b"n,,n=al=ZZ,r=a",
        ] {
            assert!(ScramExchange::first_with_nonce(mech, garbage, &store, None, "n").is_err());
        }
        let text = std::fs::read_to_string(dir.path().join("meta").join(FILE_NAME)).unwrap();
        assert!(!text.contains("secret"));
        let reopened = CredentialStore::open(dir.path()).unwrap();
        assert_eq!(reopened.get("alice", mech), store.get("alice", mech));
        assert_eq!(reopened.get("alice", ScramMechanism::Sha256), None);
        reopened
            .apply(&[Change::Delete {
                user: "alice".into(),
                mech,
            }])
            .unwrap();
        assert!(CredentialStore::open(dir.path())
            .unwrap()
            .snapshot()
            .is_empty());
        std::fs::write(dir.path().join("meta").join(FILE_NAME), b"{oops").unwrap();
        assert!(CredentialStore::open(dir.path()).is_err());
    }

    // Goal: a full exchange with a client computed here succeeds for the right password,
    // also with librdkafka 2.0's final nonce (its client nonce, then the combined one).
    #[test]
    fn full_exchange_sha512() {
        exchange_with_final_nonce(|nonce| nonce.to_string());
        exchange_with_final_nonce(|nonce| format!("clientnonce{nonce}"));
    }

    fn exchange_with_final_nonce(final_nonce: impl Fn(&str) -> String) {
        let mech = ScramMechanism::Sha512;
        let salt = b"0123456789abcdef";
        let (_d, store) = store_with("bob", mech, "pw", salt);
        let first_bare = "n=bob,r=clientnonce";
        let (ex, server_first) = ScramExchange::first_with_nonce(
            mech,
            format!("n,,{first_bare}").as_bytes(),
            &store,
            None,
            "srvnonce",
        )
        .unwrap();
        let server_first = String::from_utf8(server_first).unwrap();
        let nonce = server_first
            .split(',')
            .next()
            .unwrap()
            .trim_start_matches("r=");
        let without_proof = format!("c=biws,r={}", final_nonce(nonce));
        let auth = format!("{first_bare},{server_first},{without_proof}");
        let salted = salted(mech, "pw", salt, 4096);
        let client_key = mac(mech, &salted, b"Client Key");
        let sig = mac(mech, &hash(mech, &client_key), auth.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
        let (user, v) = ex
            .finish(format!("{without_proof},p={}", B64.encode(proof)).as_bytes())
            .unwrap();
        assert_eq!(user, "bob");
        let expect = mac(mech, &mac(mech, &salted, b"Server Key"), auth.as_bytes());
        assert_eq!(v, format!("v={}", B64.encode(expect)).into_bytes());
    }
}
