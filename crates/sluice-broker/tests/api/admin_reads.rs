//! DescribeTopicPartitions and ListConfigResources (Kafka 4.x admin reads): paging by
//! cursor, and each error Kafka answers, checked on the wire.

use crate::common::requests::{create_topic, produce_values};
use crate::common::{topic_name, Client, InProcessBroker};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse, ListConfigResourcesRequest, ListConfigResourcesResponse,
};
use std::collections::BTreeMap;

const NONE: i16 = 0;

fn dtp(
    client: &mut Client,
    topics: &[&str],
    limit: i32,
    cursor: Option<(&str, i32)>,
) -> DescribeTopicPartitionsResponse {
    let mut req = DescribeTopicPartitionsRequest::default();
    req.topics = topics
        .iter()
        .map(|t| {
            let mut r = TopicRequest::default();
            r.name = topic_name(t);
            r
        })
        .collect();
    req.response_partition_limit = limit;
    req.cursor = cursor.map(|(t, p)| {
        let mut c = Cursor::default();
        c.topic_name = topic_name(t);
        c.partition_index = p;
        c
    });
    client.call(ApiKey::DescribeTopicPartitions, 0, &req)
}

/// Each described topic with its partition indexes.
type Described = Vec<(String, Vec<i32>)>;

/// (topic, [partition indexes]) of each described topic, and the next cursor.
fn pages(resp: &DescribeTopicPartitionsResponse) -> (Described, Option<(String, i32)>) {
    let topics = resp
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            (
                name,
                t.partitions.iter().map(|p| p.partition_index).collect(),
            )
        })
        .collect();
    let next = resp
        .next_cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    (topics, next)
}

// Goal: a client that follows the cursor gets every partition of every named topic exactly
// once, in name order, at most `limit` per response; a missing topic and an illegal name get
// Kafka's codes; ids and leaders are filled in.
#[test]
fn describe_topic_partitions_pages_by_cursor() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "pa", 3), NONE);
    assert_eq!(create_topic(&mut client, "pb", 2), NONE);
    // Names in order: "missing" (an error, no partitions, counts nothing), then pa's first two.
    let first = dtp(&mut client, &["pb", "pa", "missing"], 2, None);
    let (topics, next) = pages(&first);
    assert_eq!(
        topics,
        vec![("missing".into(), vec![]), ("pa".into(), vec![0, 1])]
    );
    assert_eq!(
        first.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(next, Some(("pa".into(), 2)));
    assert!(!first.topics[1].topic_id.is_nil());
    assert_eq!(first.topics[1].partitions[0].leader_id.0, 1);
    // From the cursor on: names before its topic are not described again.
    let second = dtp(&mut client, &["pb", "pa", "missing"], 2, Some(("pa", 2)));
    let (topics, next) = pages(&second);
    assert_eq!(topics, vec![("pa".into(), vec![2]), ("pb".into(), vec![0])]);
    assert_eq!(next, Some(("pb".into(), 1)));
    let last = dtp(&mut client, &["pb", "pa"], 2, Some(("pb", 1)));
    assert_eq!(pages(&last), (vec![("pb".into(), vec![1])], None));
    let illegal = dtp(&mut client, &["bad/name"], 10, None);
    assert_eq!(
        illegal.topics[0].error_code,
        ResponseError::InvalidTopicException.code()
    );
}

// Goal: with no topics named, every topic is described, the internal ones included and
// flagged; the limit is at least 1 whatever the request says.
#[test]
fn describe_topic_partitions_of_every_topic() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "every", 2), NONE);
    let all = dtp(&mut client, &[], 100, None);
    let names: Vec<_> = pages(&all).0.into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        vec!["__consumer_offsets", "__transaction_state", "every"]
    );
    assert!(all.topics[0].is_internal && !all.topics[2].is_internal);
    let zero = dtp(&mut client, &[], 0, None);
    assert_eq!(
        pages(&zero).0.iter().map(|(_, p)| p.len()).sum::<usize>(),
        1
    );
    assert!(zero.next_cursor.is_some());
}

// Goal: a cursor whose topic was not named, or whose partition is negative, is
// INVALID_REQUEST for every named topic (Kafka's InvalidRequestException), and nothing is
// described.
#[test]
fn describe_topic_partitions_refuses_a_bad_cursor() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "cur", 2), NONE);
    for cursor in [("other", 0), ("cur", -1)] {
        let resp = dtp(&mut client, &["cur"], 10, Some(cursor));
        assert_eq!(resp.topics.len(), 1, "{cursor:?}");
        assert_eq!(
            resp.topics[0].error_code,
            ResponseError::InvalidRequest.code(),
            "{cursor:?}"
        );
        assert!(resp.topics[0].partitions.is_empty());
    }
}

fn lcr(client: &mut Client, version: i16, types: &[i8]) -> ListConfigResourcesResponse {
    let mut req = ListConfigResourcesRequest::default();
    req.resource_types = types.to_vec();
    client.call(ApiKey::ListConfigResources, version, &req)
}

// Goal: v1 lists topics (internal ones included) and the broker by type; v0 knows only
// CLIENT_METRICS, of which there are none; a type the version does not know is
// UNSUPPORTED_VERSION with nothing listed, as Kafka answers.
#[test]
fn list_config_resources_by_type_and_version() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "cfg", 1), NONE);
    let all = lcr(&mut client, 1, &[]);
    assert_eq!(all.error_code, NONE);
    let listed: Vec<_> = all
        .config_resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.to_string()))
        .collect();
    assert!(listed.contains(&(2, "cfg".into())), "{listed:?}");
    assert!(
        listed.contains(&(2, "__consumer_offsets".into())),
        "{listed:?}"
    );
    assert!(listed.contains(&(4, "1".into())), "{listed:?}");
    let v0 = lcr(&mut client, 0, &[]);
    assert_eq!((v0.error_code, v0.config_resources.len()), (NONE, 0));
    // (v0 cannot name types: the field is v1+.)
    let refused = lcr(&mut client, 1, &[2, 64]);
    assert_eq!(refused.error_code, ResponseError::UnsupportedVersion.code());
    assert!(refused.config_resources.is_empty());
}

fn log_dirs(
    client: &mut Client,
    version: i16,
    topics: Option<&[(&str, &[i32])]>,
) -> DescribeLogDirsResponse {
    let mut req = DescribeLogDirsRequest::default();
    req.topics = topics.map(|ts| {
        ts.iter()
            .map(|(t, ps)| {
                let mut d = DescribableLogDirTopic::default();
                d.topic = topic_name(t);
                d.partitions = ps.to_vec();
                d
            })
            .collect()
    });
    client.call(ApiKey::DescribeLogDirs, version, &req)
}

/// (topic, partition) -> size in the response's one directory.
fn sizes(resp: &DescribeLogDirsResponse) -> BTreeMap<(String, i32), i64> {
    assert_eq!(resp.results.len(), 1);
    resp.results[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| ((t.name.0.to_string(), p.partition_index), p.partition_size))
        })
        .collect()
}

// Goal: each partition's size is the bytes of the batches it holds (it grows by what was
// produced, and an empty partition is 0), every partition is listed when no topic is named
// (the internal ones too), named partitions that do not exist are left out, and v4 carries
// the file system's space.
#[test]
fn describe_log_dirs_reports_partition_sizes() {
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "sized", 2), NONE);
    let before = sizes(&log_dirs(&mut client, 4, None));
    assert_eq!(before[&("sized".into(), 0)], 0);
    let value: &[u8] = &[7u8; 1000];
    assert_eq!(produce_values(&mut client, "sized", 0, &[value; 5]).0, NONE);
    let all = log_dirs(&mut client, 4, None);
    let after = sizes(&all);
    let grown = after[&("sized".into(), 0)];
    // Five 1000-byte values in one batch: the values plus the batch and record headers.
    assert!((5000..5400).contains(&grown), "{grown}");
    assert_eq!(after[&("sized".into(), 1)], 0);
    assert!(after.contains_key(&("__consumer_offsets".into(), 0)));
    let dir = &all.results[0];
    assert_eq!(dir.error_code, NONE);
    assert!(dir.log_dir.starts_with('/'), "{}", dir.log_dir);
    assert!(dir.total_bytes > 0 && (0..=dir.total_bytes).contains(&dir.usable_bytes));
    let named = log_dirs(
        &mut client,
        1,
        Some(&[("sized", &[0, 9]), ("missing", &[0])]),
    );
    assert_eq!(
        sizes(&named).into_iter().collect::<Vec<_>>(),
        vec![(("sized".into(), 0), grown)]
    );
}
