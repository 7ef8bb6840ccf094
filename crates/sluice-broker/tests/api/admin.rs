//! The fast tier for the admin APIs beyond topic create/delete: DescribeConfigs (topic and
//! broker resources, key filters, unknown resources), CreatePartitions (grow, never shrink,
//! unknown topics, validate-only) and DeleteRecords (moves the log start, refuses offsets
//! past the high watermark and unknown partitions).

use crate::common::requests::{create_topic, list_offsets_at, produce_values};
use crate::common::{topic_name, Client, InProcessBroker};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreatePartitionsResponse, DeleteRecordsRequest,
    DeleteRecordsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

const NONE: i16 = 0;
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;

fn describe(
    client: &mut Client,
    kind: i8,
    name: &str,
    keys: Option<&[&str]>,
) -> DescribeConfigsResult {
    let mut res = DescribeConfigsResource::default();
    res.resource_type = kind;
    res.resource_name = StrBytes::from_string(name.to_owned());
    res.configuration_keys = keys.map(|k| {
        k.iter()
            .map(|s| StrBytes::from_string((*s).to_owned()))
            .collect()
    });
    let mut req = DescribeConfigsRequest::default();
    req.resources = vec![res];
    let mut resp: DescribeConfigsResponse = client.call(ApiKey::DescribeConfigs, 4, &req);
    resp.results.remove(0)
}

fn value(result: &DescribeConfigsResult, key: &str) -> Option<String> {
    result
        .configs
        .iter()
        .find(|c| &*c.name == key)
        .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
}

fn create_partitions(client: &mut Client, topic: &str, count: i32, validate_only: bool) -> i16 {
    let mut t = CreatePartitionsTopic::default();
    t.name = topic_name(topic);
    t.count = count;
    let mut req = CreatePartitionsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    req.validate_only = validate_only;
    let resp: CreatePartitionsResponse = client.call(ApiKey::CreatePartitions, 3, &req);
    resp.results[0].error_code
}

/// Partitions that answer ListOffsets (they are numbered from 0).
fn partition_count(client: &mut Client, topic: &str) -> usize {
    (0..64)
        .take_while(|p| list_offsets_at(client, topic, *p, -1).0 == NONE)
        .count()
}

/// DeleteRecords v2 below `offset`: (error code, low watermark).
fn delete_records(client: &mut Client, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
    let mut p = DeleteRecordsPartition::default();
    p.partition_index = partition;
    p.offset = offset;
    let mut t = DeleteRecordsTopic::default();
    t.name = topic_name(topic);
    t.partitions = vec![p];
    let mut req = DeleteRecordsRequest::default();
    req.topics = vec![t];
    req.timeout_ms = 30_000;
    let resp: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, 2, &req);
    let p = &resp.topics[0].partitions[0];
    (p.error_code, p.low_watermark)
}

#[test]
fn describe_configs_answers_topics_and_the_broker_and_refuses_the_rest() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "described", 1), NONE);

    let topic = describe(&mut client, RESOURCE_TOPIC, "described", None);
    assert_eq!(topic.error_code, NONE);
    assert_eq!(value(&topic, "cleanup.policy").as_deref(), Some("delete"));
    let filtered = describe(
        &mut client,
        RESOURCE_TOPIC,
        "described",
        Some(&["retention.ms"]),
    );
    assert_eq!(filtered.configs.len(), 1);
    assert_eq!(&*filtered.configs[0].name, "retention.ms");

    // Metadata lists the internal topics, so they are described too (kafka-configs.sh
    // --describe --entity-type topics describes every listed topic), with their logs' settings.
    for internal in ["__consumer_offsets", "__transaction_state"] {
        let t = describe(&mut client, RESOURCE_TOPIC, internal, None);
        assert_eq!(t.error_code, NONE, "{internal}");
        assert_eq!(value(&t, "cleanup.policy").as_deref(), Some("compact"));
        assert!(value(&t, "segment.bytes").is_some());
    }

    let node = describe(&mut client, RESOURCE_BROKER, "1", None);
    assert_eq!(node.error_code, NONE);
    assert_eq!(value(&node, "sluice.storage").as_deref(), Some("disk"));
    assert_eq!(value(&node, "sluice.fsync").as_deref(), Some("always"));

    assert_eq!(
        describe(&mut client, RESOURCE_TOPIC, "missing", None).error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        describe(&mut client, RESOURCE_BROKER, "7", None).error_code,
        ResponseError::InvalidRequest.code()
    );
    assert_eq!(
        describe(&mut client, 99, "x", None).error_code,
        ResponseError::InvalidRequest.code()
    );
}

#[test]
fn create_partitions_grows_never_shrinks_and_validates_only_when_asked() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "grown", 2), NONE);
    assert_eq!(create_partitions(&mut client, "grown", 4, true), NONE);
    assert_eq!(
        partition_count(&mut client, "grown"),
        2,
        "validate_only changes nothing"
    );
    assert_eq!(create_partitions(&mut client, "grown", 4, false), NONE);
    assert_eq!(partition_count(&mut client, "grown"), 4);
    assert_eq!(
        produce_values(&mut client, "grown", 3, &[b"new"]),
        (NONE, 0)
    );
    assert_eq!(
        create_partitions(&mut client, "grown", 3, false),
        ResponseError::InvalidPartitions.code()
    );
    assert_eq!(
        create_partitions(&mut client, "grown", 4, false),
        ResponseError::InvalidPartitions.code(),
        "the same count is not an increase"
    );
    assert_eq!(
        create_partitions(&mut client, "missing", 4, false),
        ResponseError::UnknownTopicOrPartition.code()
    );
}

#[test]
fn delete_records_moves_the_log_start_up_to_the_high_watermark() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "trimmed", 1), NONE);
    for _ in 0..3 {
        produce_values(&mut client, "trimmed", 0, &[b"a", b"b"]);
    }
    assert_eq!(delete_records(&mut client, "trimmed", 0, 2), (NONE, 2));
    assert_eq!(list_offsets_at(&mut client, "trimmed", 0, -2), (NONE, 2));
    // -1 means the high watermark.
    assert_eq!(delete_records(&mut client, "trimmed", 0, -1), (NONE, 6));
    assert_eq!(
        delete_records(&mut client, "trimmed", 0, 7).0,
        ResponseError::OffsetOutOfRange.code()
    );
    assert_eq!(
        delete_records(&mut client, "trimmed", 4, 0).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        delete_records(&mut client, "missing", 0, 0).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
}
