//! TxnOffsetCommit (key 28), v0-6: a transactional producer commits a group's consumed
//! positions inside its transaction (KIP-98, KIP-447; docs/transactions.md §6.5, §7.5).
//! v6 (KIP-1319) names topics by id (`sluice_protocol::adapted::WithTopicIds`; an unknown id
//! is UNKNOWN_TOPIC_ID for its partitions) and answers GROUP_ID_NOT_FOUND and
//! STALE_MEMBER_EPOCH where older versions say ILLEGAL_GENERATION, as Kafka does.
//! v5 is also Transactions V2's AddOffsetsToTxn (KIP-890 part 2, §14): the commit adds
//! `__consumer_offsets-0` to the transaction itself, as Kafka's group coordinator does
//! through its partition leader's AddPartitionsToTxn v5, before the offsets are written.
//!
//! The offsets are written durably into `__consumer_offsets-0` as the producer's
//! transactional batch (its id and epoch) and held by the group coordinator as *pending*:
//! OffsetFetch does not show them (with `require_stable` it answers
//! UNSTABLE_OFFSET_COMMIT for those partitions) until the transaction's marker in the
//! offsets partition commits them; an ABORT marker drops them. The marker is written by
//! EndTxn or the timeout abort, and replay applies records and markers in log order, so a
//! restart decides them the same way.
//!
//! Checks, in Kafka's order: WRITE on the transactional id
//! (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group and each topic; then the
//! transaction (the producer id and epoch are the id's current ones, and AddOffsetsToTxn
//! added `__consumer_offsets-0` to its ongoing transaction: INVALID_PRODUCER_EPOCH,
//! INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE, or TRANSACTION_ABORTABLE from v4); then,
//! v3+ (KIP-447), the member: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID;
//! unknown partitions get UNKNOWN_TOPIC_OR_PARTITION. While the commit is written, the
//! transactional id counts as busy (an EndTxn gets CONCURRENT_TRANSACTIONS and retries),
//! so the marker always finds the offsets it decides.

use kafka_protocol::error::ResponseError;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use sluice_coordinator::{
    CommitAuth, GroupError, StoreRecord, TopicPartition, TxnError, CONSUMER_OFFSETS_PARTITION,
};
use sluice_log::LogError;
use sluice_protocol::adapted::WithTopicIds;

use super::metadata::topic_name_by_id;
use super::{str_bytes, Ctx, Reply};
use crate::services::groups::{TxnProducer, TxnRefusal};
use crate::services::txns::TxnService;
use crate::{error_code, services::acl};

/// v4+ knows TRANSACTION_ABORTABLE (KIP-890; Kafka's GENERIC_ERROR_SUPPORTED from v4).
const TRANSACTION_ABORTABLE_FROM: i16 = 4;
/// v5+ adds the offsets partition to the transaction (Kafka's
/// `txnOffsetCommitRequestVersionToTransactionSupportedOperation`: ADD_PARTITION).
const IMPLICIT_ADD_FROM: i16 = 5;
/// v6+ names topics by id and tells a missing group or a stale member epoch apart.
const TOPIC_IDS_FROM: i16 = 6;

/// The code for a group refusal at `version`: before v6, Kafka folds a missing group and a
/// stale member epoch into ILLEGAL_GENERATION.
fn group_code(e: GroupError, version: i16) -> i16 {
    match e {
        GroupError::GroupIdNotFound | GroupError::StaleMemberEpoch if version < TOPIC_IDS_FROM => {
            ResponseError::IllegalGeneration.code()
        }
        e => error_code::from_group(e),
    }
}

/// How long a commit waits for another change of its transactional id in flight (an
/// AddPartitionsToTxn of the same producer, one commit round) before answering
/// CONCURRENT_TRANSACTIONS; clients treat that code as fatal here, so a short wait is
/// kinder than a refusal.
const BUSY_WAIT_MS_MAX: u64 = 2_000;
const BUSY_POLL_MS: u64 = 5;

/// Clears the transactional id's busy flag when the commit is done, however it ends.
struct Busy<'a> {
    txns: &'a TxnService,
    id: &'a str,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.txns.call(|c, _| c.finish(self.id));
    }
}

/// The transaction check, waiting out a short change in flight; with `implicit_add` (v5+)
/// the offsets partition is added to the transaction first.
async fn begin<'a>(
    ctx: &'a Ctx,
    id: &'a str,
    producer: TxnProducer,
    implicit_add: bool,
) -> Result<Busy<'a>, TxnError> {
    let txns = &ctx.broker.txns;
    let mut waited_ms = 0;
    loop {
        let added = match implicit_add {
            true => add_offsets_partition(ctx, id, producer).await,
            false => Ok(()),
        };
        let checked = added.and_then(|()| {
            txns.call(|c, _| {
                c.begin_offset_commit(id, producer.producer_id, producer.producer_epoch)
            })
        });
        match checked {
            Ok(()) => return Ok(Busy { txns, id }),
            Err(TxnError::ConcurrentTransactions) if waited_ms < BUSY_WAIT_MS_MAX => {
                tokio::time::sleep(Duration::from_millis(BUSY_POLL_MS)).await;
                waited_ms += BUSY_POLL_MS;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Transactions V2: adds `__consumer_offsets-0` to the producer's transaction (nothing to
/// write when it is there already) and verifies it in the log, as AddOffsetsToTxn does.
async fn add_offsets_partition(ctx: &Ctx, id: &str, producer: TxnProducer) -> Result<(), TxnError> {
    let broker = &ctx.broker;
    let (topic, partition) = CONSUMER_OFFSETS_PARTITION;
    let offsets = [TopicPartition {
        topic: topic.to_owned(),
        partition,
    }];
    let (pid, epoch) = (producer.producer_id, producer.producer_epoch);
    let change = broker
        .txns
        .call(|c, now| c.add_partitions_implicitly(id, pid, epoch, &offsets, now))?;
    let Some(change) = change else {
        return Ok(());
    };
    let written = broker
        .txns
        .write_then_verify(&broker.topics, &change, &offsets)
        .await;
    match written {
        Ok(()) => Ok(()),
        Err(LogError::InvalidProducerEpoch { .. }) => Err(TxnError::ProducerFenced),
        Err(e) => {
            tracing::warn!(error = %e, "implicit add of the offsets partition not durable");
            Err(TxnError::CoordinatorNotAvailable)
        }
    }
}

/// The code for a transaction refusal: an old epoch is INVALID_PRODUCER_EPOCH in every
/// version (the Java client and librdkafka treat it as fenced).
fn txn_code(e: TxnError, version: i16) -> i16 {
    match e {
        TxnError::InvalidTxnState if version >= TRANSACTION_ABORTABLE_FROM => {
            ResponseError::TransactionAbortable.code()
        }
        e => error_code::from_txn(e, false),
    }
}

fn refusal_code(e: TxnRefusal, version: i16) -> i16 {
    match e {
        TxnRefusal::Fenced => ResponseError::InvalidProducerEpoch.code(),
        TxnRefusal::NotInTransaction => txn_code(TxnError::InvalidTxnState, version),
    }
}

pub(crate) async fn handle(ctx: Ctx, body: Bytes) -> Reply {
    let WithTopicIds {
        message: mut req,
        topic_ids,
    } = match ctx.decode::<WithTopicIds<TxnOffsetCommitRequest>>(body) {
        Ok(r) => r,
        Err(reply) => return reply,
    };
    // v6: each topic's name from its id; an unknown id leaves the name empty.
    let by_id = ctx.version >= TOPIC_IDS_FROM;
    for (t, id) in req.topics.iter_mut().zip(&topic_ids) {
        if let Some(name) = topic_name_by_id(&ctx, *id) {
            t.name = TopicName(str_bytes(name));
        }
    }
    let transactional_id = req.transactional_id.0.to_string();
    let producer = TxnProducer {
        producer_id: req.producer_id.0,
        producer_epoch: req.producer_epoch,
    };
    let auth = CommitAuth {
        group_id: req.group_id.0.to_string(),
        generation_id: req.generation_id,
        member_id: req.member_id.to_string(),
        group_instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
    };
    let broker = &ctx.broker;
    // One code for every partition when the request as a whole is refused.
    let mut request_code = None;
    if !ctx.allowed(
        acl::op::WRITE,
        acl::resource::TRANSACTIONAL_ID,
        &transactional_id,
    ) {
        request_code = Some(ResponseError::TransactionalIdAuthorizationFailed.code());
    } else if !ctx.allowed(acl::op::READ, acl::resource::GROUP, &auth.group_id) {
        request_code = Some(ResponseError::GroupAuthorizationFailed.code());
    }
    let busy = match request_code {
        Some(_) => None,
        None => match begin(
            &ctx,
            &transactional_id,
            producer,
            ctx.version >= IMPLICIT_ADD_FROM,
        )
        .await
        {
            Ok(busy) => Some(busy),
            Err(e) => {
                request_code = Some(txn_code(e, ctx.version));
                None
            }
        },
    };
    if request_code.is_none() {
        let member = broker
            .groups
            .check(|c, now| c.validate_txn_offset_commit(now, &auth));
        if let Err(e) = member {
            request_code = Some(group_code(e, ctx.version));
        }
    }
    let mut codes: Vec<Vec<i16>> = Vec::with_capacity(req.topics.len());
    let mut records: Vec<StoreRecord> = Vec::new();
    let mut written: Vec<(usize, usize)> = Vec::new();
    let now = broker.groups.clock().now_ms();
    for (ti, t) in req.topics.iter().enumerate() {
        let topic_read = ctx.allowed(acl::op::READ, acl::resource::TOPIC, &t.name.0);
        let topic = broker.topics.get(&t.name.0);
        let mut topic_codes = Vec::with_capacity(t.partitions.len());
        for (pi, p) in t.partitions.iter().enumerate() {
            let exists = topic
                .as_ref()
                .is_some_and(|tp| tp.partition(p.partition_index).is_some());
            let code = match request_code {
                Some(code) => code,
                None if by_id && t.name.0.is_empty() => ResponseError::UnknownTopicId.code(),
                None if !topic_read => ResponseError::TopicAuthorizationFailed.code(),
                None if !exists => ResponseError::UnknownTopicOrPartition.code(),
                None => {
                    let tp = TopicPartition {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                    };
                    let metadata = p.committed_metadata.as_ref().map(|m| m.to_string());
                    let leader_epoch = match ctx.version {
                        0..=1 => -1,
                        _ => p.committed_leader_epoch,
                    };
                    let record = broker.groups.read(|c| {
                        c.txn_offset_record(
                            &auth.group_id,
                            tp,
                            p.committed_offset,
                            leader_epoch,
                            metadata,
                            now,
                        )
                    });
                    match record {
                        Ok(record) => {
                            records.push(record);
                            written.push((ti, pi));
                            error_code::NONE
                        }
                        Err(e) => error_code::from_group(e),
                    }
                }
            };
            topic_codes.push(code);
        }
        codes.push(topic_codes);
    }
    if let Err(e) = broker.groups.write_txn(records, producer).await {
        let code = match e.1 {
            Some(refused) => refusal_code(refused, ctx.version),
            None => {
                tracing::warn!(group = %auth.group_id, error = %e, "transactional offset commit not durable");
                ResponseError::CoordinatorNotAvailable.code()
            }
        };
        for (ti, pi) in written {
            codes[ti][pi] = code;
        }
    }
    // The offsets are pending in the group coordinator (or were not written): the id may
    // change again.
    drop(busy);
    let mut resp = TxnOffsetCommitResponse::default();
    for (t, topic_codes) in req.topics.into_iter().zip(codes) {
        let mut rt = TxnOffsetCommitResponseTopic::default();
        rt.name = t.name;
        for (p, code) in t.partitions.into_iter().zip(topic_codes) {
            let mut rp = TxnOffsetCommitResponsePartition::default();
            rp.partition_index = p.partition_index;
            rp.error_code = code;
            rt.partitions.push(rp);
        }
        resp.topics.push(rt);
    }
    ctx.respond(&WithTopicIds {
        message: resp,
        topic_ids,
    })
}
