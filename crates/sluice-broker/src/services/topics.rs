//! The topic registry: names, topic ids, partition counts and config overrides, and their
//! durable home, `<data_dir>/meta/topics.json`.
//!
//! Reads (every produce and fetch) take a short read lock and clone an `Arc<Topic>`; they never
//! wait on disk. Mutations (admin APIs, auto-creation) are serialized by `admin`, run on a
//! blocking thread, and follow one order so a crash at any point is repaired on start:
//! create = log partitions first, then the metadata file, then the in-memory map (orphan
//! partition directories are deleted on start); delete = the in-memory map first, then the
//! file, then the log partitions (again, orphans are deleted on start).
//!
//! A missing metadata file is never taken for an empty one: when the log holds partitions
//! but `topics.json` is gone, the broker refuses to start (Kafka refuses to start on a log
//! directory whose metadata is missing rather than reformatting it). Treating the missing
//! file as "no topics" would delete every partition as an orphan.

use kafka_protocol::error::ResponseError;
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use sluice_log::{LogError, LogManager, PartitionKey, TopicId};
use uuid::Uuid;

use crate::config::BrokerConfig;
use crate::metrics::TopicStats;
use crate::services::atomic_file;
use crate::services::internal_topics::{OFFSETS_TOPIC, TXN_STATE_TOPIC};
use crate::{config::limits, config::topic, error_code};

/// One topic as the broker sees it. Immutable: changes publish a new `Arc<Topic>`.
#[derive(Debug)]
pub struct Topic {
    pub name: Arc<str>,
    pub id: Uuid,
    /// One key per partition, indexed by partition number.
    pub partitions: Vec<PartitionKey>,
    /// Explicitly set topic configs (overrides of the broker defaults).
    pub configs: BTreeMap<String, String>,
    /// Produce and fetch counters, kept across republished versions of the topic.
    pub stats: Arc<TopicStats>,
}

impl Topic {
    pub fn partition(&self, index: i32) -> Option<&PartitionKey> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }
}

/// An admin operation's failure: a Kafka error code and a message for the client.
#[derive(Debug, Clone)]
pub struct AdminError {
    pub code: i16,
    pub message: String,
}

impl AdminError {
    pub fn new(code: i16, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    fn from_log(e: &LogError) -> Self {
        Self::new(error_code::from_log(e), e.to_string())
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct TopicRecord {
    name: String,
    id: Uuid,
    partitions: i32,
    configs: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct MetaFile {
    format_version: u32,
    cluster_id: String,
    topics: Vec<TopicRecord>,
}

#[derive(Debug, Default)]
struct Maps {
    by_name: HashMap<Arc<str>, Arc<Topic>>,
    by_id: HashMap<Uuid, Arc<Topic>>,
    /// Bumped by every published change, so a reader can tell two snapshots apart without
    /// comparing them (KIP-848 regex subscriptions re-resolve only when it moves).
    version: u64,
}

#[derive(Debug)]
pub struct TopicRegistry {
    /// The published maps. Produce, fetch and the offset APIs resolve names and ids on every
    /// request: loading the current maps takes no lock (`ArcSwap`); a change builds the next
    /// maps aside (under `admin`) and publishes them whole.
    maps: ArcSwap<Maps>,
    /// Serializes mutations; held only on blocking threads, never across `.await`.
    admin: Mutex<()>,
    meta_dir: PathBuf,
    pub cluster_id: String,
}

/// Kafka's topic-name rules.
pub fn validate_name(name: &str) -> Result<(), AdminError> {
    let bad = |why: &str| {
        Err(AdminError::new(
            ResponseError::InvalidTopicException.code(),
            format!("Invalid topic name '{name}': {why}"),
        ))
    };
    if name.is_empty() {
        return bad("empty");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are not allowed");
    }
    if name == OFFSETS_TOPIC {
        return bad("reserved for the group coordinator's internal use");
    }
    if name == TXN_STATE_TOPIC {
        return bad("reserved for the transaction coordinator's internal use");
    }
    if name.len() > limits::TOPIC_NAME_BYTES_MAX {
        return bad("longer than 249 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// True for the names of internal topics (Kafka's `Topic.isInternal`): the group
/// coordinator's `__consumer_offsets` and the transaction coordinator's
/// `__transaction_state`, which live in the log but not in this registry.
pub fn is_internal(name: &str) -> bool {
    name == OFFSETS_TOPIC || name == TXN_STATE_TOPIC
}

/// The refusal of a change to an internal topic, which is read-only to clients: Kafka answers
/// produce and DeleteRecords with INVALID_TOPIC_EXCEPTION ("Cannot append to internal
/// topic"). Kafka lets an admin delete, grow or reconfigure one; Sluice cannot (its layout
/// is fixed by the groups service), so those get the same non-retriable code.
pub fn internal_topic_refusal(name: &str, action: &str) -> Option<AdminError> {
    is_internal(name).then(|| {
        AdminError::new(
            ResponseError::InvalidTopicException.code(),
            format!("Cannot {action} internal topic {name}"),
        )
    })
}

fn key(name: &Arc<str>, id: Uuid, partition: i32) -> PartitionKey {
    PartitionKey {
        topic_id: TopicId(*id.as_bytes()),
        topic: name.clone(),
        partition,
    }
}

fn build_topic(
    name: &str,
    id: Uuid,
    partitions: i32,
    configs: BTreeMap<String, String>,
    stats: Arc<TopicStats>,
) -> Topic {
    let name: Arc<str> = Arc::from(name);
    let partitions = (0..partitions).map(|p| key(&name, id, p)).collect();
    Topic {
        name,
        id,
        partitions,
        configs,
        stats,
    }
}

const META_FILE: &str = "topics.json";

impl TopicRegistry {
    /// Loads the metadata file (creating a new cluster id on first start) and reconciles it
    /// with the partitions the log recovered. `partitions_on_disk` counts every partition the
    /// log found, internal ones included: with any, a missing metadata file is an error.
    /// Blocking.
    pub fn open(
        data_dir: &Path,
        log: &LogManager,
        recovered: &[PartitionKey],
        partitions_on_disk: usize,
        broker: &BrokerConfig,
    ) -> std::io::Result<Self> {
        let meta_dir = data_dir.join("meta");
        sluice_log::fs::create_private_dir_all(&meta_dir)?;
        let path = meta_dir.join(META_FILE);
        let meta: MetaFile = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && partitions_on_disk > 0 => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!(
                        "{} is missing but the data directory holds {partitions_on_disk} partitions; \
                         refusing to start rather than deleting them. Restore the file from a backup \
                         (each partition's partition.metadata names its topic id, topic and partition)",
                        path.display()
                    ),
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let m = MetaFile {
                    format_version: 1,
                    cluster_id: new_cluster_id(),
                    topics: vec![],
                };
                atomic_file::write_atomically(
                    &meta_dir,
                    META_FILE,
                    &serde_json::to_vec_pretty(&m).map_err(std::io::Error::other)?,
                )?;
                m
            }
            Err(e) => return Err(e),
        };
        let reg = Self {
            maps: ArcSwap::from_pointee(Maps::default()),
            admin: Mutex::new(()),
            meta_dir,
            cluster_id: meta.cluster_id.clone(),
        };
        let mut maps = Maps::default();
        for t in meta.topics {
            let topic = Arc::new(build_topic(
                &t.name,
                t.id,
                t.partitions,
                t.configs,
                Arc::default(),
            ));
            reconcile_topic(&topic, log, recovered, broker);
            maps.by_id.insert(topic.id, topic.clone());
            maps.by_name.insert(topic.name.clone(), topic);
        }
        for k in recovered {
            if !maps.by_id.contains_key(&Uuid::from_bytes(k.topic_id.0)) {
                tracing::warn!(topic = %k.topic, partition = k.partition, "deleting partition of a topic not in metadata (interrupted create or delete)");
                if let Err(e) = log.delete_partition(k) {
                    tracing::error!(topic = %k.topic, partition = k.partition, error = %e, "could not delete orphan partition");
                }
            }
        }
        reg.maps.store(Arc::new(maps));
        Ok(reg)
    }

    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.maps.load().by_name.get(name).cloned()
    }

    pub fn get_by_id(&self, id: Uuid) -> Option<Arc<Topic>> {
        self.maps.load().by_id.get(&id).cloned()
    }

    /// All topics, sorted by name.
    pub fn all(&self) -> Vec<Arc<Topic>> {
        self.all_with_version().0
    }

    /// Every topic, by name, and the registry's version: a number that differs whenever the
    /// set of topics (or a topic) differs.
    pub fn all_with_version(&self) -> (Vec<Arc<Topic>>, u64) {
        let m = self.maps.load();
        let mut v: Vec<_> = m.by_name.values().cloned().collect();
        let version = m.version;
        drop(m);
        v.sort_by(|a, b| a.name.cmp(&b.name));
        (v, version)
    }

    fn partitions_total(&self) -> usize {
        self.maps
            .load()
            .by_name
            .values()
            .map(|t| t.partitions.len())
            .sum()
    }

    fn persist(&self, maps: &Maps) -> Result<(), AdminError> {
        let mut topics: Vec<TopicRecord> = maps
            .by_name
            .values()
            .map(|t| TopicRecord {
                name: t.name.to_string(),
                id: t.id,
                partitions: t.partitions.len() as i32,
                configs: t.configs.clone(),
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        let m = MetaFile {
            format_version: 1,
            cluster_id: self.cluster_id.clone(),
            topics,
        };
        let bytes = serde_json::to_vec_pretty(&m)
            .map_err(|e| AdminError::new(ResponseError::KafkaStorageError.code(), e.to_string()))?;
        atomic_file::write_atomically(&self.meta_dir, META_FILE, &bytes).map_err(|e| {
            tracing::error!(error = %e, "writing topic metadata failed");
            AdminError::new(
                ResponseError::KafkaStorageError.code(),
                format!("writing topic metadata: {e}"),
            )
        })
    }

    /// Checks a create without doing it (also used by validate_only).
    pub fn check_create(
        &self,
        name: &str,
        partitions: i32,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), AdminError> {
        // The internal topic exists (the groups service creates it before the listener
        // starts), so Kafka's answer is that it already exists.
        if is_internal(name) || self.get(name).is_some() {
            return Err(AdminError::new(
                ResponseError::TopicAlreadyExists.code(),
                format!("Topic '{name}' already exists."),
            ));
        }
        validate_name(name)?;
        if !(1..=limits::PARTITIONS_PER_TOPIC_MAX).contains(&partitions) {
            return Err(AdminError::new(
                ResponseError::InvalidPartitions.code(),
                format!(
                    "Number of partitions must be between 1 and {}",
                    limits::PARTITIONS_PER_TOPIC_MAX
                ),
            ));
        }
        if self.partitions_total() + partitions as usize > limits::PARTITIONS_TOTAL_MAX {
            return Err(AdminError::new(
                ResponseError::PolicyViolation.code(),
                "broker partition limit reached",
            ));
        }
        for (k, v) in configs {
            topic::validate(k, v)
                .map_err(|m| AdminError::new(ResponseError::InvalidConfig.code(), m))?;
        }
        Ok(())
    }

    /// Creates a topic durably. Blocking.
    pub fn create(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        log: &LogManager,
        broker: &BrokerConfig,
    ) -> Result<Arc<Topic>, AdminError> {
        let _admin = self.admin.lock().unwrap_or_else(|p| p.into_inner());
        self.check_create(name, partitions, &configs)?;
        check_file_budget(log, partitions)?;
        let topic = Arc::new(build_topic(
            name,
            Uuid::new_v4(),
            partitions,
            configs,
            Arc::default(),
        ));
        let lc = topic::log_config(&topic.configs, broker);
        for k in &topic.partitions {
            if let Err(e) = log.create_partition(k.clone(), lc.clone()) {
                for created in &topic.partitions[..k.partition as usize] {
                    let _ = log.delete_partition(created);
                }
                return Err(AdminError::from_log(&e));
            }
        }
        let mut next = self.snapshot();
        next.by_id.insert(topic.id, topic.clone());
        next.by_name.insert(topic.name.clone(), topic.clone());
        if let Err(e) = self.persist(&next) {
            for k in &topic.partitions {
                let _ = log.delete_partition(k);
            }
            return Err(e);
        }
        self.maps.store(Arc::new(next));
        tracing::info!(topic = name, partitions, id = %topic.id, "created topic");
        Ok(topic)
    }

    /// Deletes a topic durably. Blocking.
    pub fn delete(&self, topic: &Arc<Topic>, log: &LogManager) -> Result<(), AdminError> {
        let _admin = self.admin.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = self.snapshot();
        if next.by_id.remove(&topic.id).is_none() {
            return Err(AdminError::new(
                ResponseError::UnknownTopicOrPartition.code(),
                "topic already deleted",
            ));
        }
        next.by_name.remove(&topic.name);
        self.persist(&next)?;
        self.maps.store(Arc::new(next));
        for k in &topic.partitions {
            if let Err(e) = log.delete_partition(k) {
                tracing::error!(topic = %k.topic, partition = k.partition, error = %e, "deleting partition files failed; they are removed on next start");
            }
        }
        tracing::info!(topic = %topic.name, "deleted topic");
        Ok(())
    }

    /// Grows a topic to `count` partitions. Blocking.
    pub fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
        log: &LogManager,
        broker: &BrokerConfig,
    ) -> Result<(), AdminError> {
        if let Some(refusal) = internal_topic_refusal(name, "add partitions to") {
            return Err(refusal);
        }
        let _admin = self.admin.lock().unwrap_or_else(|p| p.into_inner());
        let topic = self.get(name).ok_or_else(|| {
            AdminError::new(
                ResponseError::UnknownTopicOrPartition.code(),
                format!("Topic '{name}' does not exist."),
            )
        })?;
        let current = topic.partitions.len() as i32;
        if count <= current {
            return Err(AdminError::new(ResponseError::InvalidPartitions.code(), format!("Topic currently has {current} partitions, which is higher than or equal to the requested {count}.")));
        }
        if count > limits::PARTITIONS_PER_TOPIC_MAX
            || self.partitions_total() + (count - current) as usize > limits::PARTITIONS_TOTAL_MAX
        {
            return Err(AdminError::new(
                ResponseError::InvalidPartitions.code(),
                "partition limit exceeded",
            ));
        }
        check_file_budget(log, count - current)?;
        if validate_only {
            return Ok(());
        }
        let next_topic = Arc::new(build_topic(
            name,
            topic.id,
            count,
            topic.configs.clone(),
            topic.stats.clone(),
        ));
        let lc = topic::log_config(&topic.configs, broker);
        for k in &next_topic.partitions[current as usize..] {
            log.create_partition(k.clone(), lc.clone())
                .map_err(|e| AdminError::from_log(&e))?;
        }
        self.replace(next_topic)?;
        tracing::info!(topic = name, from = current, to = count, "added partitions");
        Ok(())
    }

    /// Replaces a topic's config overrides (already validated). Blocking.
    pub fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        log: &LogManager,
        broker: &BrokerConfig,
    ) -> Result<(), AdminError> {
        if let Some(refusal) = internal_topic_refusal(name, "add partitions to") {
            return Err(refusal);
        }
        let _admin = self.admin.lock().unwrap_or_else(|p| p.into_inner());
        let topic = self.get(name).ok_or_else(|| {
            AdminError::new(
                ResponseError::UnknownTopicOrPartition.code(),
                format!("Topic '{name}' does not exist."),
            )
        })?;
        let next_topic = Arc::new(build_topic(
            name,
            topic.id,
            topic.partitions.len() as i32,
            configs,
            topic.stats.clone(),
        ));
        self.replace(next_topic.clone())?;
        let lc = topic::log_config(&next_topic.configs, broker);
        for k in &next_topic.partitions {
            log.set_config(k, lc.clone())
                .map_err(|e| AdminError::from_log(&e))?;
        }
        tracing::info!(topic = name, configs = ?next_topic.configs, "altered topic configs");
        Ok(())
    }

    fn replace(&self, topic: Arc<Topic>) -> Result<(), AdminError> {
        let mut next = self.snapshot();
        next.by_id.insert(topic.id, topic.clone());
        next.by_name.insert(topic.name.clone(), topic);
        self.persist(&next)?;
        self.maps.store(Arc::new(next));
        Ok(())
    }

    fn snapshot(&self) -> Maps {
        let m = self.maps.load();
        Maps {
            by_name: m.by_name.clone(),
            by_id: m.by_id.clone(),
            // The version the copy gets if it is published.
            version: m.version + 1,
        }
    }
}

/// Refuses a create that would need more segment files than the descriptor budget has
/// left (one per new partition), before any partition is made. Without it, a create of
/// thousands of partitions would fail half way and leave the broker without descriptors
/// for connections.
fn check_file_budget(log: &LogManager, partitions: i32) -> Result<(), AdminError> {
    let needed = usize::try_from(partitions).unwrap_or(0);
    let available = log.segment_files_available();
    if needed > available {
        return Err(AdminError::new(
            ResponseError::PolicyViolation.code(),
            format!(
                "not enough file descriptors: {needed} new partitions need a segment file each, \
                 {available} are left (raise the open-file limit, RLIMIT_NOFILE)"
            ),
        ));
    }
    Ok(())
}

fn reconcile_topic(
    topic: &Topic,
    log: &LogManager,
    recovered: &[PartitionKey],
    broker: &BrokerConfig,
) {
    let lc = topic::log_config(&topic.configs, broker);
    for k in &topic.partitions {
        if recovered.contains(k) {
            if let Err(e) = log.set_config(k, lc.clone()) {
                tracing::error!(topic = %k.topic, partition = k.partition, error = %e, "applying topic config failed");
            }
        } else {
            tracing::warn!(topic = %k.topic, partition = k.partition, "partition missing on disk; creating it empty");
            if let Err(e) = log.create_partition(k.clone(), lc.clone()) {
                tracing::error!(topic = %k.topic, partition = k.partition, error = %e, "creating missing partition failed");
            }
        }
    }
}

fn new_cluster_id() -> String {
    // Kafka cluster ids are 22-character URL-safe base64 of a UUID.
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let v = Uuid::new_v4().as_u128();
    (0..22)
        .map(|i| ALPHABET[((v >> (i * 6)) & 63) as usize] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: Kafka's topic-name rules are enforced.
    #[test]
    fn topic_names() {
        assert!(validate_name("orders.v1_x-2").is_ok());
        for bad in ["", ".", "..", "a b", "é", &"x".repeat(250)] {
            assert_eq!(
                validate_name(bad).unwrap_err().code,
                ResponseError::InvalidTopicException.code(),
                "{bad}"
            );
        }
    }
}
