//! Request helpers shared by the in-process test files: one call each, returning what the
//! tests assert on (error codes first).

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, CreateTopicsResponse, FetchRequest, FetchResponse,
    ListOffsetsRequest, ListOffsetsResponse, ProduceRequest, ProduceResponse,
};

use super::{batch, topic_name, Client, Writer, NO_PRODUCER};

/// CreateTopics v5 for one topic; its error code.
pub fn create_topic(client: &mut Client, name: &str, partitions: i32) -> i16 {
    let mut t = CreatableTopic::default();
    t.name = topic_name(name);
    t.num_partitions = partitions;
    t.replication_factor = 1;
    let mut req = CreateTopicsRequest::default();
    req.timeout_ms = 30_000;
    req.topics = vec![t];
    let resp: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 5, &req);
    resp.topics[0].error_code
}

/// Produce v9, acks=all, `values` as one batch of no producer: (error code, base offset).
pub fn produce_values(
    client: &mut Client,
    topic: &str,
    partition: i32,
    values: &[&[u8]],
) -> (i16, i64) {
    produce_as(client, NO_PRODUCER, topic, partition, values)
}

/// Produce v9, acks=all, `values` as one batch written by `writer`: (error code, base offset).
pub fn produce_as(
    client: &mut Client,
    writer: Writer,
    topic: &str,
    partition: i32,
    values: &[&[u8]],
) -> (i16, i64) {
    let mut pd = PartitionProduceData::default();
    pd.index = partition;
    pd.records = Some(batch(writer, values));
    let mut td = TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.transactional_id = None;
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    let resp: ProduceResponse = client.call(ApiKey::Produce, 9, &req);
    let p = &resp.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Fetch v12 of one partition from `offset`, waiting at most `max_wait_ms` for 1 byte.
pub fn fetch_partition(
    client: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
) -> FetchResponse {
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.fetch_offset = offset;
    fp.partition_max_bytes = 1 << 20;
    let mut ft = FetchTopic::default();
    ft.topic = topic_name(topic);
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = (-1).into();
    req.max_wait_ms = max_wait_ms;
    req.min_bytes = 1;
    req.max_bytes = i32::MAX;
    req.session_epoch = -1;
    req.topics = vec![ft];
    client.call(ApiKey::Fetch, 12, &req)
}

/// ListOffsets v7 at `timestamp` (-1 latest, -2 earliest): (error code, offset).
pub fn list_offsets_at(
    client: &mut Client,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> (i16, i64) {
    let mut p = ListOffsetsPartition::default();
    p.partition_index = partition;
    p.timestamp = timestamp;
    let mut t = ListOffsetsTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut req = ListOffsetsRequest::default();
    req.replica_id = (-1).into();
    req.topics = vec![t];
    let resp: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 7, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.offset)
}
