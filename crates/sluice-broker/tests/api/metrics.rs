//! The fast tier for the admin listener's `/metrics`: the families it exports are exactly the
//! ones `docs/operations.md` lists (so neither can drift from the other), a response's error
//! codes count as errors of its API whatever the API, and fetched records are counted per
//! topic. The scrape is a plain HTTP request over a real socket.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::common::requests::{create_topic, fetch_partition, list_offsets_at, produce_values};
use crate::common::InProcessBroker;
use kafka_protocol::error::ResponseError;

const OPERATIONS_MD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/operations.md");

fn with_metrics() -> InProcessBroker {
    InProcessBroker::start_with(|c| c.metrics_listen = Some("127.0.0.1:0".into()))
}

/// The body of `GET /metrics` (Prometheus text format).
fn scrape(admin: SocketAddr) -> String {
    let mut s = TcpStream::connect(admin).expect("connect to the admin listener");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("a response");
    let (head, body) = reply.split_once("\r\n\r\n").expect("headers end");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The value of the sample `name{labels}` (labels as written, e.g. `api="Produce"`).
fn sample(text: &str, name: &str, labels: &str) -> Option<f64> {
    let prefix = match labels {
        "" => format!("{name} "),
        _ => format!("{name}{{{labels}}} "),
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.parse().expect("a number"))
}

/// The family names of the `# TYPE` lines.
fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// The family names in the first column of docs/operations.md's metrics table.
fn documented() -> BTreeSet<String> {
    let text = std::fs::read_to_string(OPERATIONS_MD).expect("docs/operations.md");
    let section = text
        .split_once("## Metric families")
        .expect("the metric families section")
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `sluice_"))
        .filter_map(|l| l.split('`').next())
        .map(|name| format!("sluice_{name}"))
        .collect()
}

// Goal: the documented families are the exported ones, both ways: a family added without
// its row in docs/operations.md (or a row whose family is gone) fails here.
#[test]
fn exported_families_are_the_documented_ones() {
    let broker = with_metrics();
    let text = scrape(broker.admin.expect("admin listener"));
    let exported = families(&text);
    let documented = documented();
    assert!(exported.len() > 30, "{exported:?}");
    let undocumented: Vec<_> = exported.difference(&documented).collect();
    let missing: Vec<_> = documented.difference(&exported).collect();
    assert!(
        undocumented.is_empty() && missing.is_empty(),
        "exported but not in docs/operations.md: {undocumented:?}; documented but not exported: {missing:?}"
    );
}

// Goal: a response that carries an error code, top-level or in an entry, counts as an
// error of its API, for APIs other than Produce and Fetch too; a clean one does not.
#[test]
fn error_codes_count_per_api() {
    let broker = with_metrics();
    let admin = broker.admin.expect("admin listener");
    let mut client = broker.client();
    let errors = |text: &str, api: &str| {
        sample(
            text,
            "sluice_request_errors_total",
            &format!("api=\"{api}\""),
        )
        .expect("a series per API")
    };
    assert_eq!(create_topic(&mut client, "m", 1), 0);
    let text = scrape(admin);
    assert_eq!(errors(&text, "CreateTopics"), 0.0);
    assert_eq!(
        create_topic(&mut client, "m", 1),
        ResponseError::TopicAlreadyExists.code()
    );
    assert_eq!(list_offsets_at(&mut client, "m", 0, -1).0, 0);
    assert_eq!(
        list_offsets_at(&mut client, "m", 7, -1).0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(produce_values(&mut client, "m", 0, &[b"a"]).0, 0);
    let out_of_range = fetch_partition(&mut client, "m", 0, 99, 0);
    assert_eq!(
        out_of_range.responses[0].partitions[0].error_code,
        ResponseError::OffsetOutOfRange.code()
    );
    let text = scrape(admin);
    assert_eq!(errors(&text, "CreateTopics"), 1.0);
    assert_eq!(errors(&text, "ListOffsets"), 1.0);
    assert_eq!(errors(&text, "Fetch"), 1.0);
    assert_eq!(errors(&text, "Produce"), 0.0);
    let requests = sample(&text, "sluice_requests_total", "api=\"CreateTopics\"");
    assert_eq!(requests, Some(2.0));
}

// Goal: fetched records are counted per topic from the fetch offset to the end of the
// batches returned: a fetch from the middle of a batch counts the records after it only.
#[test]
fn fetched_records_per_topic() {
    let broker = with_metrics();
    let admin = broker.admin.expect("admin listener");
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "f", 1), 0);
    assert_eq!(
        produce_values(&mut client, "f", 0, &[b"a", b"b", b"c"]).0,
        0
    );
    assert_eq!(produce_values(&mut client, "f", 0, &[b"d", b"e"]).0, 0);
    let resp = fetch_partition(&mut client, "f", 0, 1, 0);
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    let text = scrape(admin);
    assert_eq!(
        sample(&text, "sluice_fetch_records_total", "topic=\"f\""),
        Some(4.0)
    );
    let resp = fetch_partition(&mut client, "f", 0, 5, 0);
    assert_eq!(resp.responses[0].partitions[0].error_code, 0);
    let text = scrape(admin);
    assert_eq!(
        sample(&text, "sluice_fetch_records_total", "topic=\"f\""),
        Some(4.0),
        "a fetch at the high watermark returns nothing"
    );
}
