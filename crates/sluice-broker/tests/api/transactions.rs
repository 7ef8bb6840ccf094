//! The fast tier for the transaction APIs: FindCoordinator (key type 1), InitProducerId
//! with a transactional id, AddPartitionsToTxn (the client form v0-3 and the batched form
//! v4-5), AddOffsetsToTxn, TxnOffsetCommit, EndTxn, DescribeTransactions, ListTransactions
//! and DescribeProducers, at the versions clients send, with their main error codes
//! (PRODUCER_FENCED and INVALID_PRODUCER_EPOCH by version, INVALID_TXN_STATE,
//! CONCURRENT_TRANSACTIONS, INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE...). A real
//! `Server` in this process (loopback socket, real data directory) and the wire client of
//! `common`; transactional batches are real v2 batches with the transactional bit.

use crate::common::requests::create_topic;
use crate::common::{
    batch, eventually, topic_name, with_attributes, Client, InProcessBroker, Writer,
};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, ApiKey, BrokerId, DescribeProducersRequest,
    DescribeProducersResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, FindCoordinatorRequest, FindCoordinatorResponse, GroupId,
    InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    ListTransactionsRequest, ListTransactionsResponse, OffsetFetchRequest, OffsetFetchResponse,
    ProduceRequest, ProduceResponse, ProducerId, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use kafka_protocol::protocol::StrBytes;
use sluice_record::Attributes;

const NONE: i16 = 0;

fn code(e: ResponseError) -> i16 {
    e.code()
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn txn_id(v: &str) -> TransactionalId {
    TransactionalId(s(v))
}

/// A producer's identity as the coordinator gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Producer {
    id: i64,
    epoch: i16,
}

fn init(
    client: &mut Client,
    version: i16,
    txn: Option<&str>,
    timeout_ms: i32,
) -> InitProducerIdResponse {
    let mut r = InitProducerIdRequest::default();
    r.transactional_id = txn.map(txn_id);
    r.transaction_timeout_ms = timeout_ms;
    r.producer_id = ProducerId(-1);
    r.producer_epoch = -1;
    client.call(ApiKey::InitProducerId, version, &r)
}

/// InitProducerId for `txn`, retried while an open transaction is being aborted.
fn init_txn(client: &mut Client, version: i16, txn: &str) -> Producer {
    for _ in 0..200 {
        let resp = init(client, version, Some(txn), 60_000);
        if resp.error_code == code(ResponseError::ConcurrentTransactions) {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        assert_eq!(resp.error_code, NONE, "InitProducerId v{version}");
        return Producer {
            id: resp.producer_id.0,
            epoch: resp.producer_epoch,
        };
    }
    panic!("InitProducerId never stopped answering CONCURRENT_TRANSACTIONS");
}

/// AddPartitionsToTxn in the client form (v0-3): each partition's code.
fn add_partitions(
    client: &mut Client,
    version: i16,
    txn: &str,
    p: Producer,
    topic: &str,
    partitions: &[i32],
) -> Vec<i16> {
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = topic_name(topic);
    t.partitions = partitions.to_vec();
    let mut r = AddPartitionsToTxnRequest::default();
    r.v3_and_below_transactional_id = txn_id(txn);
    r.v3_and_below_producer_id = ProducerId(p.id);
    r.v3_and_below_producer_epoch = p.epoch;
    r.v3_and_below_topics = vec![t];
    let resp: AddPartitionsToTxnResponse = client.call(ApiKey::AddPartitionsToTxn, version, &r);
    resp.results_by_topic_v3_and_below[0]
        .results_by_partition
        .iter()
        .map(|r| r.partition_error_code)
        .collect()
}

/// AddPartitionsToTxn in the batched form (v4-5) for one transaction: (top-level code,
/// each partition's code).
fn add_partitions_batched(
    client: &mut Client,
    version: i16,
    txn: &str,
    p: Producer,
    topic: &str,
    partition: i32,
    verify_only: bool,
) -> (i16, i16) {
    let mut t = AddPartitionsToTxnTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![partition];
    let mut x = AddPartitionsToTxnTransaction::default();
    x.transactional_id = txn_id(txn);
    x.producer_id = ProducerId(p.id);
    x.producer_epoch = p.epoch;
    x.verify_only = verify_only;
    x.topics = vec![t];
    let mut r = AddPartitionsToTxnRequest::default();
    r.transactions = vec![x];
    let resp: AddPartitionsToTxnResponse = client.call(ApiKey::AddPartitionsToTxn, version, &r);
    let part = resp.results_by_transaction.first().map_or(NONE, |t| {
        t.topic_results[0].results_by_partition[0].partition_error_code
    });
    (resp.error_code, part)
}

fn end_txn(client: &mut Client, version: i16, txn: &str, p: Producer, commit: bool) -> i16 {
    let mut r = EndTxnRequest::default();
    r.transactional_id = txn_id(txn);
    r.producer_id = ProducerId(p.id);
    r.producer_epoch = p.epoch;
    r.committed = commit;
    let resp: EndTxnResponse = client.call(ApiKey::EndTxn, version, &r);
    resp.error_code
}

fn add_offsets(client: &mut Client, version: i16, txn: &str, p: Producer, group: &str) -> i16 {
    let mut r = AddOffsetsToTxnRequest::default();
    r.transactional_id = txn_id(txn);
    r.producer_id = ProducerId(p.id);
    r.producer_epoch = p.epoch;
    r.group_id = GroupId(s(group));
    let resp: AddOffsetsToTxnResponse = client.call(ApiKey::AddOffsetsToTxn, version, &r);
    resp.error_code
}

fn txn_commit(
    client: &mut Client,
    version: i16,
    txn: &str,
    p: Producer,
    group: &str,
    topic: &str,
    offset: i64,
) -> i16 {
    let mut part = TxnOffsetCommitRequestPartition::default();
    part.partition_index = 0;
    part.committed_offset = offset;
    part.committed_leader_epoch = -1;
    let mut t = TxnOffsetCommitRequestTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![part];
    let mut r = TxnOffsetCommitRequest::default();
    r.transactional_id = txn_id(txn);
    r.group_id = GroupId(s(group));
    r.producer_id = ProducerId(p.id);
    r.producer_epoch = p.epoch;
    r.generation_id = -1;
    r.topics = vec![t];
    let resp: TxnOffsetCommitResponse = client.call(ApiKey::TxnOffsetCommit, version, &r);
    resp.topics[0].partitions[0].error_code
}

/// OffsetFetch v7 of `topic`-0 with `require_stable`: (code, offset).
fn fetch_stable(client: &mut Client, group: &str, topic: &str) -> (i16, i64) {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
    let mut t = OffsetFetchRequestTopic::default();
    t.name = topic_name(topic);
    t.partition_indexes = vec![0];
    let mut r = OffsetFetchRequest::default();
    r.group_id = GroupId(s(group));
    r.topics = Some(vec![t]);
    r.require_stable = true;
    let resp: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 7, &r);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.committed_offset)
}

/// A v2 batch of `values` with the transactional attribute bit, CRC recomputed.
fn transactional_batch(p: Producer, base_sequence: i32, values: &[&[u8]]) -> Bytes {
    let writer = Writer {
        producer_id: p.id,
        epoch: p.epoch,
        base_sequence,
    };
    with_attributes(&batch(writer, values), Attributes::TRANSACTIONAL)
}

/// Produce v9 (acks=all) of one transactional batch to `topic`-0: (code, base offset).
fn produce_txn(
    client: &mut Client,
    txn: &str,
    p: Producer,
    topic: &str,
    values: &[&[u8]],
) -> (i16, i64) {
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(transactional_batch(p, 0, values));
    let mut td = TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.transactional_id = Some(txn_id(txn));
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = client.call(ApiKey::Produce, 9, &r);
    let part = &resp.responses[0].partition_responses[0];
    (part.error_code, part.base_offset)
}

/// DescribeProducers v0 of `topic`-0: the offset where `p`'s open transaction starts there
/// (-1 when none is open).
fn open_txn_start(client: &mut Client, topic: &str, p: Producer) -> i64 {
    let mut dp = TopicRequest::default();
    dp.name = topic_name(topic);
    dp.partition_indexes = vec![0];
    let mut r = DescribeProducersRequest::default();
    r.topics = vec![dp];
    let resp: DescribeProducersResponse = client.call(ApiKey::DescribeProducers, 0, &r);
    let part = &resp.topics[0].partitions[0];
    assert_eq!(part.error_code, NONE);
    let mine = part
        .active_producers
        .iter()
        .find(|a| a.producer_id.0 == p.id)
        .expect("the producer is listed");
    mine.current_txn_start_offset
}

fn describe_txns(client: &mut Client, ids: &[&str]) -> DescribeTransactionsResponse {
    let mut r = DescribeTransactionsRequest::default();
    r.transactional_ids = ids.iter().map(|i| txn_id(i)).collect();
    client.call(ApiKey::DescribeTransactions, 0, &r)
}

// Goal: this broker is the transaction coordinator for any transactional id, at every
// FindCoordinator version that has key types (v1+; v4+ in the batched form).
#[test]
fn find_coordinator_for_a_transactional_id() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    for version in 1..=6i16 {
        let mut r = FindCoordinatorRequest::default();
        r.key_type = 1;
        if version >= 4 {
            r.coordinator_keys = vec![s("tx-a"), s("tx-b")];
        } else {
            r.key = s("tx-a");
        }
        let resp: FindCoordinatorResponse = client.call(ApiKey::FindCoordinator, version, &r);
        if version >= 4 {
            assert_eq!(resp.coordinators.len(), 2, "v{version}");
            for c in &resp.coordinators {
                assert_eq!(c.error_code, NONE, "v{version}");
                assert_eq!(c.port, i32::from(broker.addr.port()));
            }
        } else {
            assert_eq!(resp.error_code, NONE, "v{version}");
            assert_eq!(resp.port, i32::from(broker.addr.port()));
        }
    }
    let mut r = FindCoordinatorRequest::default();
    r.key_type = 2; // share groups are not served
    r.coordinator_keys = vec![s("x")];
    let resp: FindCoordinatorResponse = client.call(ApiKey::FindCoordinator, 6, &r);
    assert_eq!(
        resp.coordinators[0].error_code,
        code(ResponseError::InvalidRequest)
    );
}

// Goal: InitProducerId with a transactional id keeps the id's producer id and bumps its
// epoch on each call, at every version; a timeout beyond transaction.max.timeout.ms is
// INVALID_TRANSACTION_TIMEOUT. Without a transactional id each call is a new producer id.
#[test]
fn init_producer_id_bumps_the_epoch_of_a_transactional_id() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    let first = init_txn(&mut client, 0, "tx-init");
    assert_eq!(first.epoch, 0);
    for version in 1..=5i16 {
        let again = init_txn(&mut client, version, "tx-init");
        assert_eq!(again.id, first.id, "v{version}");
        assert_eq!(again.epoch, version, "v{version}: one bump per call");
    }
    let resp = init(&mut client, 5, Some("tx-long"), 24 * 3_600_000);
    assert_eq!(
        resp.error_code,
        code(ResponseError::InvalidTransactionTimeout)
    );
    let a = init(&mut client, 5, None, 60_000);
    let b = init(&mut client, 5, None, 60_000);
    assert_eq!((a.error_code, b.error_code), (NONE, NONE));
    assert_ne!(a.producer_id, b.producer_id);
    assert_eq!(a.producer_epoch, 0);
}

// Goal: a whole transaction through the client APIs: AddPartitionsToTxn (v0-3), a
// transactional produce, AddOffsetsToTxn and TxnOffsetCommit (its offset hidden from a
// require_stable OffsetFetch as UNSTABLE_OFFSET_COMMIT until the commit), then EndTxn;
// DescribeTransactions and ListTransactions show the Ongoing then CompleteCommit state, and
// DescribeProducers the producer with its open transaction's first offset.
#[test]
fn a_transaction_commits_produce_and_offsets() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 2), NONE);
    for version in 0..=3i16 {
        let txn = format!("tx-full-v{version}");
        let p = init_txn(&mut client, 4, &txn);
        assert_eq!(
            add_partitions(&mut client, version, &txn, p, "t", &[0, 1]),
            vec![NONE, NONE],
            "AddPartitionsToTxn v{version}"
        );
        let (produced, base) = produce_txn(&mut client, &txn, p, "t", &[b"x", b"y"]);
        assert_eq!(produced, NONE);

        let d = describe_txns(&mut client, &[&txn]);
        let st = &d.transaction_states[0];
        assert_eq!(st.error_code, NONE);
        assert_eq!(st.transaction_state.as_str(), "Ongoing");
        assert_eq!(st.producer_id.0, p.id);
        assert_eq!(st.topics[0].partitions.len(), 2);

        assert_eq!(open_txn_start(&mut client, "t", p), base);

        let group = format!("g-{txn}");
        let offsets_v = version.min(4);
        assert_eq!(add_offsets(&mut client, offsets_v, &txn, p, &group), NONE);
        let commit_v = version + 2; // 2..=5
        assert_eq!(
            txn_commit(&mut client, commit_v, &txn, p, &group, "t", 42),
            NONE,
            "TxnOffsetCommit v{commit_v}"
        );
        assert_eq!(
            fetch_stable(&mut client, &group, "t"),
            (code(ResponseError::UnstableOffsetCommit), -1)
        );
        let end_v = version + 1; // 1..=4
        assert_eq!(
            end_txn(&mut client, end_v, &txn, p, true),
            NONE,
            "EndTxn v{end_v}"
        );
        assert_eq!(fetch_stable(&mut client, &group, "t"), (NONE, 42));
        let d = describe_txns(&mut client, &[&txn]);
        assert_eq!(
            d.transaction_states[0].transaction_state.as_str(),
            "CompleteCommit"
        );
    }
    for version in 0..=2i16 {
        let mut r = ListTransactionsRequest::default();
        r.duration_filter = -1;
        let resp: ListTransactionsResponse = client.call(ApiKey::ListTransactions, version, &r);
        assert_eq!(resp.error_code, NONE, "ListTransactions v{version}");
        assert_eq!(resp.transaction_states.len(), 4, "v{version}");
    }
    let mut r = ListTransactionsRequest::default();
    r.duration_filter = -1;
    r.state_filters = vec![s("Ongoing"), s("NoSuchState")];
    let resp: ListTransactionsResponse = client.call(ApiKey::ListTransactions, 1, &r);
    assert!(resp.transaction_states.is_empty());
    assert_eq!(resp.unknown_state_filters, vec![s("NoSuchState")]);
    let mut r = ListTransactionsRequest::default();
    r.duration_filter = -1;
    r.transactional_id_pattern = Some(s("tx-full-v[12]"));
    let resp: ListTransactionsResponse = client.call(ApiKey::ListTransactions, 2, &r);
    assert_eq!(resp.transaction_states.len(), 2);
    r.transactional_id_pattern = Some(s("(unclosed"));
    let resp: ListTransactionsResponse = client.call(ApiKey::ListTransactions, 2, &r);
    assert_eq!(
        resp.error_code,
        code(ResponseError::InvalidRegularExpression)
    );
}

// Goal: the refusals of the transaction APIs: an old epoch after a re-init is
// PRODUCER_FENCED from AddPartitionsToTxn v2, AddOffsetsToTxn v2 and EndTxn v2 (and
// INVALID_PRODUCER_EPOCH before); another producer id is INVALID_PRODUCER_ID_MAPPING; an
// unknown topic UNKNOWN_TOPIC_OR_PARTITION with OPERATION_NOT_ATTEMPTED for the rest;
// EndTxn without a transaction INVALID_TXN_STATE; TxnOffsetCommit before AddOffsetsToTxn
// INVALID_TXN_STATE (TRANSACTION_ABORTABLE at v4; v5 adds the offsets partition itself,
// Transactions V2, and is accepted); InitProducerId during an open
// transaction CONCURRENT_TRANSACTIONS (it aborts it); DescribeTransactions of an unknown id
// TRANSACTIONAL_ID_NOT_FOUND and of an empty one INVALID_REQUEST.
#[test]
fn transaction_refusals_carry_kafkas_codes() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 1), NONE);
    let old = init_txn(&mut client, 5, "tx-refused");
    let p = init_txn(&mut client, 5, "tx-refused");
    assert_eq!(p.epoch, old.epoch + 1);

    let fenced = code(ResponseError::ProducerFenced);
    let bad_epoch = code(ResponseError::InvalidProducerEpoch);
    for version in 0..=3i16 {
        let want = if version >= 2 { fenced } else { bad_epoch };
        assert_eq!(
            add_partitions(&mut client, version, "tx-refused", old, "t", &[0]),
            vec![want],
            "AddPartitionsToTxn v{version}"
        );
    }
    for version in 0..=4i16 {
        let want = if version >= 2 { fenced } else { bad_epoch };
        assert_eq!(
            add_offsets(&mut client, version, "tx-refused", old, "g"),
            want,
            "AddOffsetsToTxn v{version}"
        );
        assert_eq!(
            end_txn(&mut client, version, "tx-refused", old, true),
            want,
            "EndTxn v{version}"
        );
    }
    let stranger = Producer {
        id: p.id + 1_000,
        epoch: 0,
    };
    assert_eq!(
        add_partitions(&mut client, 3, "tx-refused", stranger, "t", &[0]),
        vec![code(ResponseError::InvalidProducerIdMapping)]
    );
    assert_eq!(
        end_txn(&mut client, 4, "tx-refused", p, true),
        code(ResponseError::InvalidTxnState),
        "nothing to end"
    );
    for version in 0..=5i16 {
        let want = match version {
            5 => NONE,
            4 => code(ResponseError::TransactionAbortable),
            _ => code(ResponseError::InvalidTxnState),
        };
        assert_eq!(
            txn_commit(&mut client, version, "tx-refused", p, "g", "t", 1),
            want,
            "TxnOffsetCommit v{version} before AddOffsetsToTxn"
        );
    }

    let mut r = AddPartitionsToTxnRequest::default();
    let mut known = AddPartitionsToTxnTopic::default();
    known.name = topic_name("t");
    known.partitions = vec![0];
    let mut unknown = AddPartitionsToTxnTopic::default();
    unknown.name = topic_name("missing");
    unknown.partitions = vec![0];
    r.v3_and_below_transactional_id = txn_id("tx-refused");
    r.v3_and_below_producer_id = ProducerId(p.id);
    r.v3_and_below_producer_epoch = p.epoch;
    r.v3_and_below_topics = vec![known, unknown];
    let resp: AddPartitionsToTxnResponse = client.call(ApiKey::AddPartitionsToTxn, 3, &r);
    let codes: Vec<(String, i16)> = resp
        .results_by_topic_v3_and_below
        .iter()
        .map(|t| {
            (
                t.name.0.to_string(),
                t.results_by_partition[0].partition_error_code,
            )
        })
        .collect();
    assert!(codes.contains(&("t".into(), code(ResponseError::OperationNotAttempted))));
    assert!(codes.contains(&(
        "missing".into(),
        code(ResponseError::UnknownTopicOrPartition)
    )));

    // An open transaction: a new InitProducerId aborts it first and says to retry.
    assert_eq!(
        add_partitions(&mut client, 3, "tx-refused", p, "t", &[0]),
        vec![NONE]
    );
    let resp = init(&mut client, 5, Some("tx-refused"), 60_000);
    assert_eq!(resp.error_code, code(ResponseError::ConcurrentTransactions));
    let next = init_txn(&mut client, 5, "tx-refused");
    assert_eq!(next.id, p.id);
    assert!(next.epoch > p.epoch);
    let d = describe_txns(&mut client, &["tx-refused", "tx-never", ""]);
    assert_eq!(d.transaction_states[0].error_code, NONE);
    // The open transaction was aborted, and the new epoch's init left the id Empty.
    assert_eq!(d.transaction_states[0].transaction_state.as_str(), "Empty");
    assert_eq!(
        d.transaction_states[1].error_code,
        code(ResponseError::TransactionalIdNotFound)
    );
    assert_eq!(
        d.transaction_states[2].error_code,
        code(ResponseError::InvalidRequest)
    );
}

// Goal: the batched AddPartitionsToTxn (v4, v5; no authorizer, so CLUSTER_ACTION holds)
// adds partitions, and its `verify_only` answers NONE for a partition in the transaction
// and, for one outside it, INVALID_TXN_STATE at v4 but TRANSACTION_ABORTABLE at v5
// (KIP-890).
#[test]
fn batched_add_partitions_and_verify_only() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 2), NONE);
    for version in 4..=5i16 {
        let txn = format!("tx-batched-v{version}");
        let p = init_txn(&mut client, 5, &txn);
        assert_eq!(
            add_partitions_batched(&mut client, version, &txn, p, "t", 0, false),
            (NONE, NONE),
            "v{version}"
        );
        assert_eq!(
            add_partitions_batched(&mut client, version, &txn, p, "t", 0, true),
            (NONE, NONE),
            "v{version}: verify a partition in the transaction"
        );
        let outside = if version >= 5 {
            code(ResponseError::TransactionAbortable)
        } else {
            code(ResponseError::InvalidTxnState)
        };
        assert_eq!(
            add_partitions_batched(&mut client, version, &txn, p, "t", 1, true),
            (NONE, outside),
            "v{version}: verify a partition outside it"
        );
        assert_eq!(end_txn(&mut client, 4, &txn, p, false), NONE);
    }
    let mut r = DescribeProducersRequest::default();
    let mut dp = TopicRequest::default();
    dp.name = topic_name("missing");
    dp.partition_indexes = vec![0];
    r.topics = vec![dp];
    let resp: DescribeProducersResponse = client.call(ApiKey::DescribeProducers, 0, &r);
    assert_eq!(
        resp.topics[0].partitions[0].error_code,
        code(ResponseError::UnknownTopicOrPartition)
    );
}

// Goal: an open transaction is aborted by the coordinator's timer once its
// transaction.timeout.ms (60 s here) has passed on the coordinator's clock, not before, and
// its producer is fenced: the state becomes CompleteAbort with a bumped epoch, the
// partition's open transaction is closed (its abort marker is written), and the old epoch's
// EndTxn is PRODUCER_FENCED. The manual clock makes the minute take milliseconds; the timer
// looks every `transaction.abort.timed.out.transaction.cleanup.interval.ms` (10 s).
#[test]
fn an_open_transaction_is_aborted_and_fenced_after_its_timeout() {
    let broker = InProcessBroker::start_manual(|_| {});
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 1), NONE);
    let p = init_txn(&mut client, 4, "tx-timeout");
    assert_eq!(
        add_partitions(&mut client, 3, "tx-timeout", p, "t", &[0]),
        vec![NONE]
    );
    let (produced, base) = produce_txn(&mut client, "tx-timeout", p, "t", &[b"x"]);
    assert_eq!(produced, NONE);
    let state = |client: &mut Client| {
        let d = describe_txns(client, &["tx-timeout"]);
        let st = &d.transaction_states[0];
        (st.transaction_state.to_string(), st.producer_epoch)
    };

    // Past the timeout's second (the timer's pass at 59 s finds nothing to do) ...
    broker.advance_ms(59_000);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(state(&mut client), ("Ongoing".to_string(), p.epoch));
    // ... and its next pass, 10 s later, past the timeout: aborted and fenced.
    broker.advance_ms(10_001);
    let (aborted, epoch) = eventually("the timed-out transaction is aborted", || {
        let st = state(&mut client);
        (st.0 != "Ongoing" && st.0 != "PrepareAbort").then_some(st)
    });
    assert_eq!(aborted, "CompleteAbort");
    assert!(epoch > p.epoch, "the producer is fenced by an epoch bump");
    assert_eq!(
        open_txn_start(&mut client, "t", p),
        -1,
        "the abort marker closed it"
    );
    assert_ne!(base, -1);
    assert_eq!(
        end_txn(&mut client, 4, "tx-timeout", p, true),
        code(ResponseError::ProducerFenced)
    );
}

// ---------------------------------------------------------------------------------------
// Transactions V2 (KIP-890 part 2; docs/transactions.md §14)
// ---------------------------------------------------------------------------------------

/// Produce at `version` (acks=all) of one transactional batch to `topic`-`partition`:
/// (code, base offset).
fn produce_v(
    client: &mut Client,
    version: i16,
    txn: &str,
    batch: Bytes,
    topic: &str,
    partition: i32,
) -> (i16, i64) {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch);
    let mut td = TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data = vec![pd];
    let mut r = ProduceRequest::default();
    r.transactional_id = Some(txn_id(txn));
    r.acks = -1;
    r.timeout_ms = 30_000;
    r.topic_data = vec![td];
    let resp: ProduceResponse = client.call(ApiKey::Produce, version, &r);
    let part = &resp.responses[0].partition_responses[0];
    (part.error_code, part.base_offset)
}

/// EndTxn v5: (code, the producer the client goes on with).
fn end_txn_v5(client: &mut Client, txn: &str, p: Producer, commit: bool) -> (i16, Producer) {
    let mut r = EndTxnRequest::default();
    r.transactional_id = txn_id(txn);
    r.producer_id = ProducerId(p.id);
    r.producer_epoch = p.epoch;
    r.committed = commit;
    let resp: EndTxnResponse = client.call(ApiKey::EndTxn, 5, &r);
    let next = Producer {
        id: resp.producer_id.0,
        epoch: resp.producer_epoch,
    };
    (resp.error_code, next)
}

fn txn_state(client: &mut Client, txn: &str) -> (String, i16, usize) {
    let d = describe_txns(client, &[txn]);
    let st = &d.transaction_states[0];
    let partitions = st.topics.iter().map(|t| t.partitions.len()).sum();
    (
        st.transaction_state.to_string(),
        st.producer_epoch,
        partitions,
    )
}

// Goal: the V2 path end to end with no AddPartitionsToTxn: Produce v12 adds the partition
// to the transaction itself (Ongoing, the partition listed), TxnOffsetCommit v5 adds the
// offsets partition, EndTxn v5 commits and answers the bumped epoch, and the next
// transaction runs at it from sequence 0; a retried EndTxn gets NONE and the same epoch.
#[test]
fn transactions_v2_add_partitions_implicitly_and_bump_the_epoch() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 2), NONE);
    let p = init_txn(&mut client, 5, "tx-v2");
    let (code0, base) = produce_v(
        &mut client,
        12,
        "tx-v2",
        transactional_batch(p, 0, &[b"a"]),
        "t",
        0,
    );
    assert_eq!(code0, NONE);
    assert_eq!(
        txn_state(&mut client, "tx-v2"),
        ("Ongoing".into(), p.epoch, 1)
    );
    assert_eq!(open_txn_start(&mut client, "t", p), base);
    // Further batches to the same partition need no write; a second partition is added.
    let (code1, _) = produce_v(
        &mut client,
        12,
        "tx-v2",
        transactional_batch(p, 1, &[b"b"]),
        "t",
        0,
    );
    let (code2, _) = produce_v(
        &mut client,
        12,
        "tx-v2",
        transactional_batch(p, 0, &[b"c"]),
        "t",
        1,
    );
    assert_eq!((code1, code2), (NONE, NONE));
    assert_eq!(txn_commit(&mut client, 5, "tx-v2", p, "g-v2", "t", 7), NONE);
    assert_eq!(
        txn_state(&mut client, "tx-v2").2,
        3,
        "t-0, t-1, __consumer_offsets-0"
    );
    assert_eq!(
        fetch_stable(&mut client, "g-v2", "t"),
        (code(ResponseError::UnstableOffsetCommit), -1)
    );
    let (ended, next) = end_txn_v5(&mut client, "tx-v2", p, true);
    assert_eq!(ended, NONE);
    assert_eq!(
        next,
        Producer {
            id: p.id,
            epoch: p.epoch + 1
        }
    );
    assert_eq!(fetch_stable(&mut client, "g-v2", "t"), (NONE, 7));
    assert_eq!(
        open_txn_start(&mut client, "t", next),
        -1,
        "the marker closed it"
    );
    assert_eq!(
        txn_state(&mut client, "tx-v2"),
        ("CompleteCommit".into(), next.epoch, 0)
    );
    // A retry of the end (the response was lost): NONE with the current producer.
    assert_eq!(end_txn_v5(&mut client, "tx-v2", p, true), (NONE, next));
    // The next transaction, at the bumped epoch, from sequence 0 again.
    let (code3, _) = produce_v(
        &mut client,
        12,
        "tx-v2",
        transactional_batch(next, 0, &[b"d"]),
        "t",
        0,
    );
    assert_eq!(code3, NONE);
    let (aborted, after) = end_txn_v5(&mut client, "tx-v2", next, false);
    assert_eq!((aborted, after.epoch), (NONE, next.epoch + 1));
    // An abort with nothing open is allowed in V2 and bumps again; a commit is not.
    let (empty, again) = end_txn_v5(&mut client, "tx-v2", after, false);
    assert_eq!((empty, again.epoch), (NONE, after.epoch + 1));
    let (commit, none) = end_txn_v5(&mut client, "tx-v2", again, true);
    assert_eq!(commit, code(ResponseError::InvalidTxnState));
    assert_eq!(none, Producer { id: -1, epoch: -1 });
}

// Goal: bad input on the V2 path gets Kafka's codes and stores nothing: a produce at a
// stale epoch (the zombie of the previous transaction) INVALID_PRODUCER_EPOCH, at a
// future epoch INVALID_PRODUCER_EPOCH (PRODUCER_FENCED translated for Produce), from
// another producer id INVALID_PRODUCER_ID_MAPPING, a first batch not at sequence 0 or a
// sequence gap OUT_OF_ORDER_SEQUENCE_NUMBER; EndTxn v5 at a stale epoch PRODUCER_FENCED and with a
// stranger's producer id INVALID_PRODUCER_ID_MAPPING; after all of it the partition holds
// only the good transaction's records.
#[test]
fn transactions_v2_refuse_stale_epochs_and_sequences() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "t", 1), NONE);
    let p = init_txn(&mut client, 5, "tx-v2-bad");
    let (first, _) = produce_v(
        &mut client,
        12,
        "tx-v2-bad",
        transactional_batch(p, 0, &[b"a"]),
        "t",
        0,
    );
    assert_eq!(first, NONE);
    let (ended, next) = end_txn_v5(&mut client, "tx-v2-bad", p, true);
    assert_eq!(ended, NONE);
    let bad_epoch = code(ResponseError::InvalidProducerEpoch);
    let zombie = produce_v(
        &mut client,
        12,
        "tx-v2-bad",
        transactional_batch(p, 1, &[b"z"]),
        "t",
        0,
    );
    assert_eq!(zombie.0, bad_epoch, "the previous transaction's epoch");
    let future = Producer {
        id: next.id,
        epoch: next.epoch + 3,
    };
    let ahead = produce_v(
        &mut client,
        12,
        "tx-v2-bad",
        transactional_batch(future, 0, &[b"f"]),
        "t",
        0,
    );
    assert_eq!(ahead.0, bad_epoch, "an epoch the coordinator never gave");
    let stranger = Producer {
        id: next.id + 1_000,
        epoch: 0,
    };
    let other = produce_v(
        &mut client,
        12,
        "tx-v2-bad",
        transactional_batch(stranger, 0, &[b"s"]),
        "t",
        0,
    );
    assert_eq!(other.0, code(ResponseError::InvalidProducerIdMapping));
    // The new transaction's first batch in the partition must start at sequence 0.
    let skipped = produce_v(
        &mut client,
        12,
        "tx-v2-bad",
        transactional_batch(next, 3, &[b"k"]),
        "t",
        0,
    );
    assert_eq!(skipped.0, code(ResponseError::OutOfOrderSequenceNumber));
    let (ok, _) = produce_v(
        &mut client,
        12,
        "tx-v2-bad",
        transactional_batch(next, 0, &[b"b"]),
        "t",
        0,
    );
    assert_eq!(ok, NONE);
    let gap = produce_v(
        &mut client,
        12,
        "tx-v2-bad",
        transactional_batch(next, 5, &[b"g"]),
        "t",
        0,
    );
    assert_eq!(gap.0, code(ResponseError::OutOfOrderSequenceNumber));
    assert_eq!(
        end_txn_v5(&mut client, "tx-v2-bad", p, false).0,
        code(ResponseError::ProducerFenced),
        "an epoch two behind is no retry"
    );
    let stranger_end = end_txn_v5(&mut client, "tx-v2-bad", stranger, false);
    assert_eq!(
        stranger_end.0,
        code(ResponseError::InvalidProducerIdMapping)
    );
    let (committed, _) = end_txn_v5(&mut client, "tx-v2-bad", next, true);
    assert_eq!(committed, NONE);
    // a, its marker, b, its marker: nothing of the refused batches was stored.
    let mut r = ListOffsetsRequest::default();
    let mut t = ListOffsetsTopic::default();
    t.name = topic_name("t");
    let mut lp = ListOffsetsPartition::default();
    lp.partition_index = 0;
    lp.timestamp = -1;
    t.partitions = vec![lp];
    r.topics = vec![t];
    r.replica_id = BrokerId(-1);
    let resp: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 5, &r);
    assert_eq!(resp.topics[0].partitions[0].offset, 4);
}
