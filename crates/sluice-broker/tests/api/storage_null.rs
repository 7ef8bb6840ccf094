//! The fast tier for `sluice.storage=null` (the bench's calibration target): the real front
//! end over the no-op log. Produce is answered with consecutive offsets, the log stays empty
//! to Fetch and ListOffsets, and a long poll waits out its time instead of returning at once.

use std::time::{Duration, Instant};

use crate::common::requests::{create_topic, fetch_partition, list_offsets_at, produce_values};
use crate::common::InProcessBroker;
use kafka_protocol::error::ResponseError;
use sluice_log::Storage;

const NONE: i16 = 0;

#[test]
fn the_null_log_acknowledges_produce_and_serves_an_empty_log() {
    let broker = InProcessBroker::start_with(|c| c.storage = Storage::Null);
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "calibration", 2), NONE);
    assert_eq!(
        produce_values(&mut client, "calibration", 1, &[b"a", b"bb", b"ccc"]),
        (NONE, 0)
    );
    assert_eq!(
        produce_values(&mut client, "calibration", 1, &[b"d"]),
        (NONE, 3)
    );
    // A bad partition is still refused by the front end.
    assert_eq!(
        produce_values(&mut client, "calibration", 9, &[b"x"]).0,
        ResponseError::UnknownTopicOrPartition.code()
    );

    assert_eq!(
        list_offsets_at(&mut client, "calibration", 1, -1),
        (NONE, 0)
    );
    assert_eq!(
        list_offsets_at(&mut client, "calibration", 1, -2),
        (NONE, 0)
    );
    let started = Instant::now();
    let resp = fetch_partition(&mut client, "calibration", 1, 0, 300);
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, NONE);
    assert_eq!(p.high_watermark, 0);
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    // Nothing to return: the fetch long-polled (no busy loop for consumers).
    assert!(started.elapsed() >= Duration::from_millis(250));
}
