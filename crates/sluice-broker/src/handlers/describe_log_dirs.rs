//! DescribeLogDirs (key 35), v1-4: the one log directory (`log.dirs`, the data dir) with the
//! bytes each partition's log holds (`kafka-log-dirs.sh`, and web consoles' topic sizes) and,
//! from v4, the file system's total and usable bytes. Kafka's v5 (KIP-1066 cordoned dirs)
//! is not in the protocol crate; clients use v4.
//!
//! As Kafka answers: DESCRIBE on the cluster is needed, else CLUSTER_AUTHORIZATION_FAILED
//! (top level, v3+) and no directories; a null topic list means every partition (the
//! internal ones too), named partitions that do not exist are left out; a poisoned log (a
//! failed sync, the directory is offline) is KAFKA_STORAGE_ERROR for the directory. Sizes are
//! the partitions' own record bytes; the journal files that hold them may hold more (other
//! partitions' data, [`storage.md`](../../../../docs/storage.md) §7).

use std::path::Path;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, TopicName};
use sluice_log::PartitionKey;

use super::{str_bytes, Ctx, Reply};
use crate::services::groups::{offsets_partition, OFFSETS_TOPIC};
use crate::services::txns::{txn_state_partition, TXN_STATE_TOPIC};
use crate::{services::acl, Broker};

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let req: DescribeLogDirsRequest = match ctx.decode(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    let mut resp = DescribeLogDirsResponse::default();
    if !ctx.allowed_cluster(acl::op::DESCRIBE) {
        resp.error_code = ResponseError::ClusterAuthorizationFailed.code();
        return ctx.respond(&resp);
    }
    // The file system call and the segment walks stay off the async workers.
    let result = ctx.blocking(move |b| describe_dir(b, req.topics)).await;
    match result {
        Some(r) => resp.results = vec![r],
        None => resp.error_code = ResponseError::UnknownServerError.code(),
    }
    ctx.respond(&resp)
}

/// The data dir's entry: its partitions (those of `wanted`, or all) and its space.
fn describe_dir(b: &Broker, wanted: Option<Vec<DescribableLogDirTopic>>) -> DescribeLogDirsResult {
    let mut dir = DescribeLogDirsResult::default();
    let path =
        std::path::absolute(&b.config.data_dir).unwrap_or_else(|_| b.config.data_dir.clone());
    dir.log_dir = str_bytes(path.display().to_string());
    (dir.total_bytes, dir.usable_bytes) = space(&path);
    if b.log.is_poisoned() {
        dir.error_code = ResponseError::KafkaStorageError.code();
        return dir;
    }
    dir.topics = all_partitions(b)
        .into_iter()
        .filter_map(|(name, keys)| {
            let keys: Vec<(i32, PartitionKey)> = match &wanted {
                None => keys,
                Some(w) => {
                    let asked = w.iter().find(|t| *t.topic.0 == *name)?;
                    keys.into_iter()
                        .filter(|(i, _)| asked.partitions.contains(i))
                        .collect()
                }
            };
            (!keys.is_empty()).then(|| topic(b, name, keys))
        })
        .collect();
    dir
}

/// Every topic's partitions by index, the internal topics' included.
fn all_partitions(b: &Broker) -> Vec<(String, Vec<(i32, PartitionKey)>)> {
    let mut out: Vec<_> = b
        .topics
        .all()
        .iter()
        .map(|t| {
            let keys = t
                .partitions
                .iter()
                .map(|k| (k.partition, k.clone()))
                .collect();
            (t.name.to_string(), keys)
        })
        .collect();
    out.push((OFFSETS_TOPIC.to_string(), vec![(0, offsets_partition())]));
    out.push((
        TXN_STATE_TOPIC.to_string(),
        vec![(0, txn_state_partition())],
    ));
    out
}

fn topic(b: &Broker, name: String, keys: Vec<(i32, PartitionKey)>) -> DescribeLogDirsTopic {
    let mut t = DescribeLogDirsTopic::default();
    t.name = TopicName(str_bytes(name));
    t.partitions = keys
        .into_iter()
        // A partition deleted since the list was taken is left out, as a missing one is.
        .filter_map(|(index, key)| {
            let size = b.log.size_bytes(&key).ok()?;
            let mut p = DescribeLogDirsPartition::default();
            p.partition_index = index;
            p.partition_size = i64::try_from(size).unwrap_or(i64::MAX);
            p.offset_lag = 0;
            p.is_future_key = false;
            Some(p)
        })
        .collect();
    t
}

/// The file system's total and usable bytes (-1 each when it cannot be asked, as Kafka's
/// defaults say "unknown").
fn space(path: &Path) -> (i64, i64) {
    match nix::sys::statvfs::statvfs(path) {
        Ok(s) => {
            let block = s.fragment_size() as i64;
            (
                (s.blocks() as i64).saturating_mul(block),
                (s.blocks_available() as i64).saturating_mul(block),
            )
        }
        Err(_) => (-1, -1),
    }
}
