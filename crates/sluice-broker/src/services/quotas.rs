//! Client quotas (KIP-55, KIP-546): `producer_byte_rate` and `consumer_byte_rate` per user,
//! per client id, or per (user, client id), with `<default>` entities, set with
//! AlterClientQuotas and read with DescribeClientQuotas, enforced as Kafka enforces them: the
//! response carries `throttle_time_ms` and the connection is muted (not read) for that long.
//!
//! Which quota applies to a request is Kafka's precedence, first match wins, per quota key:
//! user+client, user+default client, user, default user+client, default user+default client,
//! default user, client, default client. The matched entity (with `<default>` replaced by the
//! request's own user or client id) names the bucket the bytes are charged to, so a quota on
//! a user is shared by all of its connections, and a `<default>` one applies to each user (or
//! client id) separately, as Kafka's quota metrics are keyed.
//!
//! Rate: each bucket is a token bucket refilled at the quota's bytes per second and holding
//! at most [`limits::QUOTA_BURST_MS`] of it. A request's bytes are taken when it is charged
//! (produce: the request frame; fetch: the response's records); a bucket in debt gives the
//! throttle time `debt / rate`, capped at [`limits::QUOTA_THROTTLE_MS_MAX`]. Over any period
//! longer than the burst, a client that waits out its throttle times gets the quota's rate.
//!
//! Durability: `<data_dir>/meta/client_quotas.json`, owner-only, replaced atomically on the
//! blocking pool before a change is answered (as ACLs are). A file that does not parse
//! refuses to start. Without any quota set, [`ClientQuotas::throttle_ms`] is one atomic
//! load: the produce and fetch paths allocate nothing for it.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::config::limits;

/// Kafka's entity types. `ip` quotas (connection rates) are not served.
pub const ENTITY_USER: &str = "user";
pub const ENTITY_CLIENT_ID: &str = "client-id";

/// The quota keys served, and the ones refused with a reason.
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";
const REFUSED_KEYS: &[&str] = &[
    "request_percentage",
    "controller_mutation_rate",
    "connection_creation_rate",
];

/// Which byte rate a request is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Produce,
    Fetch,
}

impl Kind {
    fn key(self) -> &'static str {
        match self {
            Kind::Produce => PRODUCER_BYTE_RATE,
            Kind::Fetch => CONSUMER_BYTE_RATE,
        }
    }
}

/// One entity part: `name` None is `<default>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct EntityPart {
    #[serde(rename = "type")]
    pub entity_type: String,
    pub name: Option<String>,
}

/// A quota entity (a user, a client id, or both; sorted by type) and its values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaEntry {
    pub entity: Vec<EntityPart>,
    pub values: BTreeMap<String, f64>,
}

impl QuotaEntry {
    fn part(&self, entity_type: &str) -> Option<&EntityPart> {
        self.entity.iter().find(|p| p.entity_type == entity_type)
    }
}

/// One change of AlterClientQuotas: set `key` to `value`, or remove it.
#[derive(Debug, Clone)]
pub struct QuotaOp {
    pub key: String,
    pub value: f64,
    pub remove: bool,
}

/// Why an entity or an operation is refused (answered as INVALID_REQUEST).
pub fn check_entity(entity: &[EntityPart]) -> Result<Vec<EntityPart>, String> {
    let mut parts = entity.to_vec();
    parts.sort();
    if parts.is_empty() {
        return Err("an entity needs a user or a client-id".into());
    }
    for (i, p) in parts.iter().enumerate() {
        if p.entity_type != ENTITY_USER && p.entity_type != ENTITY_CLIENT_ID {
            return Err(format!(
                "entity type {:?} is not supported (only user and client-id quotas are)",
                p.entity_type
            ));
        }
        if i > 0 && parts[i - 1].entity_type == p.entity_type {
            return Err(format!("duplicate entity type {:?}", p.entity_type));
        }
        if p.name
            .as_ref()
            .is_some_and(|n| n.len() > limits::QUOTA_ENTITY_NAME_BYTES_MAX)
        {
            return Err("entity name too long".into());
        }
    }
    Ok(parts)
}

/// Checks one operation: a served key, and a whole positive number of bytes per second.
pub fn check_op(op: &QuotaOp) -> Result<(), String> {
    if REFUSED_KEYS.contains(&op.key.as_str()) {
        return Err(format!(
            "{} quotas are not supported by Sluice; only {PRODUCER_BYTE_RATE} and {CONSUMER_BYTE_RATE} are",
            op.key
        ));
    }
    if op.key != PRODUCER_BYTE_RATE && op.key != CONSUMER_BYTE_RATE {
        return Err(format!("Invalid configuration key {}", op.key));
    }
    let whole_bytes = op.value >= 1.0 && op.value.fract() == 0.0 && op.value <= i64::MAX as f64;
    if !op.remove && !whole_bytes {
        return Err(format!(
            "{} must be a whole number of bytes per second, at least 1",
            op.key
        ));
    }
    Ok(())
}

/// A DescribeClientQuotas component: `match_type` 0 exact (`name`), 1 default, 2 any.
#[derive(Debug, Clone)]
pub struct Component {
    pub entity_type: String,
    pub match_type: i8,
    pub name: Option<String>,
}

pub const MATCH_EXACT: i8 = 0;
pub const MATCH_DEFAULT: i8 = 1;
pub const MATCH_ANY: i8 = 2;

/// Kafka's DescribeClientQuotas matching: every component must match a part of the entry's
/// entity; `strict` also excludes entries with entity types no component names.
fn matches(entry: &QuotaEntry, components: &[Component], strict: bool) -> bool {
    let each = components.iter().all(|c| match entry.part(&c.entity_type) {
        None => false,
        Some(p) => match c.match_type {
            MATCH_EXACT => p.name.is_some() && p.name == c.name,
            MATCH_DEFAULT => p.name.is_none(),
            _ => true,
        },
    });
    each && (!strict
        || entry
            .entity
            .iter()
            .all(|p| components.iter().any(|c| c.entity_type == p.entity_type)))
}

const FILE_NAME: &str = "client_quotas.json";

#[derive(Serialize, Deserialize)]
struct QuotaFile {
    version: u32,
    quotas: Vec<QuotaEntry>,
}

/// The bucket a request's bytes go to: the kind, and the resolved user and client id (None
/// where the matched entity has no such part).
type BucketKey = (Kind, Option<String>, Option<String>);

#[derive(Debug)]
struct Bucket {
    rate_bytes_per_s: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self, now: Instant) {
        let burst = self.rate_bytes_per_s * limits::QUOTA_BURST_MS as f64 / 1000.0;
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate_bytes_per_s).min(burst);
        self.at = now;
    }

    fn debt_ms(&self) -> u64 {
        match self.tokens < 0.0 {
            true => ((-self.tokens / self.rate_bytes_per_s) * 1000.0).ceil() as u64,
            false => 0,
        }
        .min(limits::QUOTA_THROTTLE_MS_MAX)
    }
}

/// The quotas and their buckets.
#[derive(Debug)]
pub struct ClientQuotas {
    meta_dir: PathBuf,
    entries: RwLock<Arc<Vec<QuotaEntry>>>,
    /// Whether any quota is set (the fast path of every request).
    any: AtomicBool,
    /// Serializes changes (held on the blocking pool only, across the file write).
    writer: Mutex<()>,
    buckets: Mutex<HashMap<BucketKey, Bucket>>,
}

impl ClientQuotas {
    /// Loads the quotas (none when the file does not exist). Blocking.
    pub fn open(data_dir: &Path) -> std::io::Result<ClientQuotas> {
        let meta_dir = data_dir.join("meta");
        sluice_log::fs::create_private_dir_all(&meta_dir)?;
        let path = meta_dir.join(FILE_NAME);
        let entries = match std::fs::read(&path) {
            Ok(bytes) => decode_file(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}; refusing to start rather than drop client quotas (restore it from a backup, or remove it to start with none)", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(ClientQuotas {
            meta_dir,
            any: AtomicBool::new(!entries.is_empty()),
            entries: RwLock::new(Arc::new(entries)),
            writer: Mutex::new(()),
            buckets: Mutex::new(HashMap::new()),
        })
    }

    /// The entries matching a DescribeClientQuotas filter.
    pub fn describe(&self, components: &[Component], strict: bool) -> Vec<QuotaEntry> {
        let entries = self.entries.read().clone();
        entries
            .iter()
            .filter(|e| matches(e, components, strict))
            .cloned()
            .collect()
    }

    /// Applies AlterClientQuotas changes (each entity checked by the caller), durably, then
    /// makes them visible. Blocking (file write).
    pub fn alter(&self, changes: &[(Vec<EntityPart>, Vec<QuotaOp>)]) -> std::io::Result<()> {
        let _writer = self.writer.lock();
        let mut entries: Vec<QuotaEntry> = (**self.entries.read()).clone();
        for (entity, ops) in changes {
            let at = match entries.iter().position(|e| e.entity == *entity) {
                Some(i) => i,
                None => {
                    entries.push(QuotaEntry {
                        entity: entity.clone(),
                        values: BTreeMap::new(),
                    });
                    entries.len() - 1
                }
            };
            for op in ops {
                match op.remove {
                    true => entries[at].values.remove(&op.key),
                    false => entries[at].values.insert(op.key.clone(), op.value),
                };
            }
        }
        entries.retain(|e| !e.values.is_empty());
        entries.sort_by(|a, b| a.entity.cmp(&b.entity));
        if entries.len() > limits::QUOTA_ENTITIES_MAX {
            return Err(std::io::Error::other(format!(
                "more than {} quota entities",
                limits::QUOTA_ENTITIES_MAX
            )));
        }
        let file = QuotaFile {
            version: 1,
            quotas: entries.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(std::io::Error::other)?;
        crate::services::atomic_file::write_atomically(&self.meta_dir, FILE_NAME, &bytes)?;
        self.any.store(!entries.is_empty(), Ordering::Release);
        *self.entries.write() = Arc::new(entries);
        // Rates may have changed: buckets start over at the new rates.
        self.buckets.lock().clear();
        Ok(())
    }

    /// Charges `bytes` of `kind` to the request's quota, if one applies, and returns the
    /// throttle time (0: not throttled). `principal` is `User:<name>`.
    pub fn throttle_ms(
        &self,
        kind: Kind,
        principal: &str,
        client_id: &str,
        bytes: usize,
        now: Instant,
    ) -> u64 {
        if !self.any.load(Ordering::Acquire) {
            return 0;
        }
        let user = principal.split_once(':').map_or(principal, |(_, n)| n);
        let Some((rate, key)) = self.resolve(kind, user, client_id) else {
            return 0;
        };
        let mut buckets = self.buckets.lock();
        if buckets.len() >= limits::QUOTA_BUCKETS_MAX && !buckets.contains_key(&key) {
            // Forget buckets that are full again (idle clients); at worst, all of them.
            buckets.retain(|_, b| {
                b.refill(now);
                b.tokens < 0.0
            });
            if buckets.len() >= limits::QUOTA_BUCKETS_MAX {
                buckets.clear();
            }
        }
        let bucket = buckets.entry(key).or_insert_with(|| Bucket {
            rate_bytes_per_s: rate,
            tokens: rate * limits::QUOTA_BURST_MS as f64 / 1000.0,
            at: now,
        });
        bucket.refill(now);
        bucket.tokens -= bytes as f64;
        bucket.debt_ms()
    }

    /// How long the request's quota bucket is still in debt, charging nothing (a fetch
    /// answered empty while throttled, as Kafka's throttled fetch response).
    pub fn debt_ms(&self, kind: Kind, principal: &str, client_id: &str, now: Instant) -> u64 {
        if !self.any.load(Ordering::Acquire) {
            return 0;
        }
        let user = principal.split_once(':').map_or(principal, |(_, n)| n);
        let Some((_, key)) = self.resolve(kind, user, client_id) else {
            return 0;
        };
        let mut buckets = self.buckets.lock();
        buckets.get_mut(&key).map_or(0, |b| {
            b.refill(now);
            b.debt_ms()
        })
    }

    /// Kafka's precedence (module comment): the rate and the bucket for `kind`.
    fn resolve(&self, kind: Kind, user: &str, client_id: &str) -> Option<(f64, BucketKey)> {
        let entries = self.entries.read().clone();
        // (user part, client part): Some(Some(name)) named, Some(None) default, None absent.
        type Want<'a> = Option<Option<&'a str>>;
        let order: [(Want, Want); 8] = [
            (Some(Some(user)), Some(Some(client_id))),
            (Some(Some(user)), Some(None)),
            (Some(Some(user)), None),
            (Some(None), Some(Some(client_id))),
            (Some(None), Some(None)),
            (Some(None), None),
            (None, Some(Some(client_id))),
            (None, Some(None)),
        ];
        let part_is = |e: &QuotaEntry, t: &str, want: Want| match (e.part(t), want) {
            (None, None) => true,
            (Some(p), Some(w)) => p.name.as_deref() == w,
            _ => false,
        };
        for (u, c) in order {
            let hit = entries.iter().find(|e| {
                part_is(e, ENTITY_USER, u)
                    && part_is(e, ENTITY_CLIENT_ID, c)
                    && e.values.contains_key(kind.key())
            });
            if let Some(e) = hit {
                let rate = e.values[kind.key()];
                let key = (
                    kind,
                    u.map(|_| user.to_string()),
                    c.map(|_| client_id.to_string()),
                );
                return Some((rate, key));
            }
        }
        None
    }
}

fn decode_file(bytes: &[u8]) -> Result<Vec<QuotaEntry>, String> {
    let file: QuotaFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.version != 1 {
        return Err(format!(
            "unknown client quota file version {}",
            file.version
        ));
    }
    for e in &file.quotas {
        check_entity(&e.entity)?;
        for (key, value) in &e.values {
            check_op(&QuotaOp {
                key: key.clone(),
                value: *value,
                remove: false,
            })?;
        }
    }
    Ok(file.quotas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn part(t: &str, name: Option<&str>) -> EntityPart {
        EntityPart {
            entity_type: t.into(),
            name: name.map(String::from),
        }
    }

    fn set(key: &str, value: f64) -> QuotaOp {
        QuotaOp {
            key: key.into(),
            value,
            remove: false,
        }
    }

    // Goal: Kafka's precedence picks the most specific entity per key, and the bucket is
    // shared by what the matched entity names (a default user: one bucket per user).
    #[test]
    fn precedence_and_buckets() {
        let dir = tempfile::tempdir().unwrap();
        let q = ClientQuotas::open(dir.path()).unwrap();
        let now = Instant::now();
        assert_eq!(q.throttle_ms(Kind::Produce, "User:a", "c", 1 << 30, now), 0);
        q.alter(&[
            (
                vec![part(ENTITY_USER, None)],
                vec![set(PRODUCER_BYTE_RATE, 1000.0)],
            ),
            (
                vec![part(ENTITY_USER, Some("vip"))],
                vec![set(PRODUCER_BYTE_RATE, 1_000_000.0)],
            ),
            (
                vec![part(ENTITY_CLIENT_ID, Some("c"))],
                vec![set(CONSUMER_BYTE_RATE, 10.0)],
            ),
        ])
        .unwrap();
        assert_eq!(q.resolve(Kind::Produce, "vip", "c").unwrap().0, 1_000_000.0);
        let (rate, key) = q.resolve(Kind::Produce, "a", "c").unwrap();
        assert_eq!((rate, key.1.as_deref(), key.2), (1000.0, Some("a"), None));
        assert_eq!(q.resolve(Kind::Fetch, "a", "c").unwrap().0, 10.0);
        assert!(q.resolve(Kind::Fetch, "a", "other").is_none());
        // The burst (a second's worth) passes; 2,000 bytes more is two seconds of debt.
        assert_eq!(q.throttle_ms(Kind::Produce, "User:a", "c", 1000, now), 0);
        assert_eq!(q.throttle_ms(Kind::Produce, "User:a", "x", 2000, now), 2000);
        // Another user has a bucket of its own; time pays the debt back.
        assert_eq!(q.throttle_ms(Kind::Produce, "User:b", "c", 1000, now), 0);
        let later = now + Duration::from_millis(1500);
        assert_eq!(q.debt_ms(Kind::Produce, "User:a", "c", later), 500);
        drop(q);
        let q = ClientQuotas::open(dir.path()).unwrap();
        let all = q.describe(&[], false);
        assert_eq!(all.len(), 3);
        let users = q.describe(
            &[Component {
                entity_type: ENTITY_USER.into(),
                match_type: MATCH_ANY,
                name: None,
            }],
            true,
        );
        assert_eq!(users.len(), 2);
        q.alter(&[(
            vec![part(ENTITY_USER, None)],
            vec![QuotaOp {
                key: PRODUCER_BYTE_RATE.into(),
                value: 0.0,
                remove: true,
            }],
        )])
        .unwrap();
        assert_eq!(q.describe(&[], false).len(), 2);
        std::fs::write(dir.path().join("meta").join(FILE_NAME), b"[").unwrap();
        assert!(ClientQuotas::open(dir.path()).is_err());
    }

    // Goal: a `<default>` client-id quota and more client ids than QUOTA_BUCKETS_MAX keep
    // the bucket map within its bound (idle buckets are forgotten first).
    #[test]
    fn buckets_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let q = ClientQuotas::open(dir.path()).unwrap();
        q.alter(&[(
            vec![part(ENTITY_CLIENT_ID, None)],
            vec![set(PRODUCER_BYTE_RATE, 1000.0)],
        )])
        .unwrap();
        let now = Instant::now();
        for i in 0..limits::QUOTA_BUCKETS_MAX + 10 {
            // Half of them go into debt (kept while in debt), half stay idle.
            let bytes = if i % 2 == 0 { 5000 } else { 1 };
            q.throttle_ms(Kind::Produce, "User:u", &format!("c{i}"), bytes, now);
            assert!(q.buckets.lock().len() <= limits::QUOTA_BUCKETS_MAX);
        }
        // The latest client in debt is still tracked, and still owes its 4 s.
        let last = format!("c{}", limits::QUOTA_BUCKETS_MAX + 8);
        assert_eq!(q.debt_ms(Kind::Produce, "User:u", &last, now), 4000);
    }

    // Goal: unsupported keys, entity types and values are refused with a reason.
    #[test]
    fn refusals() {
        assert!(check_op(&set("request_percentage", 50.0))
            .unwrap_err()
            .contains("not supported"));
        assert!(check_op(&set("bogus", 1.0)).is_err());
        assert!(check_op(&set(PRODUCER_BYTE_RATE, 0.5)).is_err());
        assert!(check_op(&set(PRODUCER_BYTE_RATE, 1024.0)).is_ok());
        assert!(check_entity(&[part("ip", Some("1.2.3.4"))]).is_err());
        assert!(check_entity(&[part(ENTITY_USER, None), part(ENTITY_USER, Some("a"))]).is_err());
        assert!(check_entity(&[]).is_err());
    }
}
