//! The connection reader against a real socket: how it waits for the bytes of a request.
//!
//! A big frame's reader asks the kernel to wake it only when the rest of the frame is in
//! (`SO_RCVLOWAT`, see `connection::Reader::wait_for_frame_rest`). A mark set one byte too
//! high would leave a request unanswered until the frame timeout (30 s), so these tests send
//! big frames in pieces, with pauses, and require the answer within seconds of the last byte.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::common::requests::create_topic;
use crate::common::{batch, topic_name, Client, InProcessBroker, NO_PRODUCER};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, ResponseHeader};
use kafka_protocol::protocol::Decodable;

/// A produce request (v9, acks=all) of `records` values of `value_bytes` each, as a frame.
fn produce_frame(client: &mut Client, topic: &str, records: usize, value_bytes: usize) -> Vec<u8> {
    let value = vec![b'v'; value_bytes];
    let values: Vec<&[u8]> = (0..records).map(|_| value.as_slice()).collect();
    let mut pd = PartitionProduceData::default();
    pd.index = 0;
    pd.records = Some(batch(NO_PRODUCER, &values));
    let mut td = TopicProduceData::default();
    td.name = topic_name(topic);
    td.partition_data = vec![pd];
    let mut req = ProduceRequest::default();
    req.acks = -1;
    req.timeout_ms = 30_000;
    req.topic_data = vec![td];
    client.frame(ApiKey::Produce, 9, &req).to_vec()
}

/// Sends `frame` cut at `cuts` (byte positions), pausing `pause` before each piece after the
/// first; returns when the last byte was sent.
fn send_in_pieces(client: &mut Client, frame: &[u8], cuts: &[usize], pause: Duration) -> Instant {
    let mut from = 0;
    for &to in cuts.iter().chain(std::iter::once(&frame.len())) {
        if from > 0 {
            std::thread::sleep(pause);
        }
        client.stream.write_all(&frame[from..to]).expect("send");
        from = to;
    }
    Instant::now()
}

fn produce_answer(client: &mut Client) -> ProduceResponse {
    let mut body = client
        .read_frame()
        .expect("a response, not a closed connection");
    ResponseHeader::decode(&mut body, ApiKey::Produce.response_header_version(9))
        .expect("response header");
    ProduceResponse::decode(&mut body, 9).expect("produce response")
}

#[test]
fn a_big_frame_sent_in_pieces_is_answered_when_its_last_byte_arrives() {
    // Goal: whatever the pieces, the reader wakes for the frame's last bytes; in particular
    // for a last piece of one byte, and for pieces that leave less than the low-water
    // minimum after a big first part.
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "pieces", 1), 0);
    let frame = produce_frame(&mut client, "pieces", 600, 1000);
    let n = frame.len();
    assert!(
        n > 2 * 128 * 1024,
        "the frame must be big enough to use the mark"
    );
    let cases: [&[usize]; 4] = [
        &[4],                             // the size prefix, then the rest at once
        &[200_000, 400_000],              // thirds
        &[n - 1],                         // all but the last byte
        &[4, 70_000, n - 100_000, n - 1], // a chunk, most of it, all but one byte
    ];
    for cuts in cases {
        let frame = produce_frame(&mut client, "pieces", 600, 1000);
        let last_sent = send_in_pieces(&mut client, &frame, cuts, Duration::from_millis(150));
        let resp = produce_answer(&mut client);
        let waited = last_sent.elapsed();
        let p = &resp.responses[0].partition_responses[0];
        assert_eq!(p.error_code, 0, "cuts {cuts:?}");
        assert!(
            waited < Duration::from_secs(5),
            "cuts {cuts:?}: answered {waited:?} after the last byte"
        );
    }
}

#[test]
fn small_requests_after_a_big_one_are_not_held_back() {
    // Goal: the mark is reset after a big frame, so a small request that follows (here a
    // produce of one record) is answered at once, not when 128 KiB more have arrived.
    let broker = InProcessBroker::start();
    let mut client = broker.client();
    assert_eq!(create_topic(&mut client, "after", 1), 0);
    let big = produce_frame(&mut client, "after", 600, 1000);
    send_in_pieces(&mut client, &big, &[300_000], Duration::from_millis(100));
    assert_eq!(
        produce_answer(&mut client).responses[0].partition_responses[0].error_code,
        0
    );
    for _ in 0..3 {
        let small = produce_frame(&mut client, "after", 1, 10);
        let sent = send_in_pieces(&mut client, &small, &[4], Duration::from_millis(100));
        let resp = produce_answer(&mut client);
        assert_eq!(resp.responses[0].partition_responses[0].error_code, 0);
        assert!(sent.elapsed() < Duration::from_secs(5));
    }
}
