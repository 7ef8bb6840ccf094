//! The consumer protocol: what a consumer puts in JoinGroup's protocol metadata
//! (ConsumerProtocolSubscription) and what its leader puts in SyncGroup's assignments
//! (ConsumerProtocolAssignment), for groups of protocol type "consumer". Decoded and encoded
//! here with `kafka-protocol`'s messages, every version (0-3), so the coordinator gets and
//! gives structured data and never parses these bytes itself.
//!
//! Guarantees:
//! - Decoding never panics: metadata that does not decode (bad version, truncated, invalid
//!   UTF-8) is `None`, and the coordinator treats such a member as subscribed to nothing.
//! - `kafka-protocol` pre-sizes arrays from their claimed counts. Metadata that is not a
//!   subscription at all (any other bytes a client sends as protocol type "consumer") would
//!   claim a count from its third to sixth bytes, so the topics count, the one array at a
//!   fixed place, is checked against the bytes left before decoding; counts further in are
//!   left to the binary's allocation guard, as for every request (docs/broker.md, "Bad
//!   input").
//! - The classic protocol still hands each member's metadata bytes to the leader verbatim
//!   (they are opaque to Kafka too); only the coordinator's own questions (which topics is
//!   the group subscribed to) use the decoded form.
//! - A version above the newest one known is read as the newest, as Kafka's
//!   `ConsumerProtocol` does: later versions only append fields.

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};
use sluice_coordinator::{ConsumerSubscription, TopicPartition};

/// The version this broker writes (DescribeGroups of KIP-848 groups): v0, which every
/// consumer-protocol reader accepts.
const WRITE_VERSION: i16 = 0;

/// A JoinGroup member's metadata as a subscription; `None` when it does not decode.
pub fn decode_subscription(metadata: &[u8]) -> Option<ConsumerSubscription> {
    let mut buf = metadata;
    let version = read_version(&mut buf, ConsumerProtocolSubscription::VERSIONS.max)?;
    let topics = buf
        .get(..4)
        .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]))?;
    // Each topic takes at least its 2-byte length; -1 (null) is refused by the decode.
    if usize::try_from(topics).is_ok_and(|n| n > buf.len().saturating_sub(4) / 2) {
        return None;
    }
    let s = ConsumerProtocolSubscription::decode(&mut buf, version).ok()?;
    let owned_partitions = s
        .owned_partitions
        .into_iter()
        .flat_map(|t| {
            let topic = t.topic.0.to_string();
            t.partitions
                .into_iter()
                .map(move |partition| TopicPartition {
                    topic: topic.clone(),
                    partition,
                })
        })
        .collect();
    Some(ConsumerSubscription {
        topics: s.topics.into_iter().map(|t| t.to_string()).collect(),
        owned_partitions,
        rack: s.rack_id.map(|r| r.to_string()),
    })
}

/// A subscription to `topics` (no user data), as DescribeGroups shows a KIP-848 member.
pub fn encode_subscription(topics: &[String]) -> Bytes {
    let mut s = ConsumerProtocolSubscription::default();
    s.topics = topics.iter().map(|t| str_bytes(t)).collect();
    encode(&s)
}

/// An assignment of partitions by topic name (no user data), as DescribeGroups shows a
/// KIP-848 member.
pub fn encode_assignment(assignment: &[(String, Vec<i32>)]) -> Bytes {
    let mut a = ConsumerProtocolAssignment::default();
    a.assigned_partitions = assignment
        .iter()
        .map(|(topic, partitions)| {
            let mut t = AssignedTopic::default();
            t.topic = TopicName(str_bytes(topic));
            t.partitions = partitions.clone();
            t
        })
        .collect();
    encode(&a)
}

/// The leading i16 version; negative ones do not decode, newer ones read as `newest`.
fn read_version(buf: &mut &[u8], newest: i16) -> Option<i16> {
    let version = buf.try_get_i16().ok()?;
    (version >= 0).then(|| version.min(newest))
}

fn encode<M: Encodable>(message: &M) -> Bytes {
    let mut out = BytesMut::new();
    out.extend_from_slice(&WRITE_VERSION.to_be_bytes());
    // Encoding fails only for values a version cannot carry; these have none.
    if message.encode(&mut out, WRITE_VERSION).is_err() {
        debug_assert!(false, "a v0 consumer-protocol message always encodes");
        return Bytes::new();
    }
    out.freeze()
}

fn str_bytes(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as OwnedTopic;

    /// A subscription to `topics` with one owned partition, generation 7 and rack "r1",
    /// encoded by kafka-protocol at `version` (each version keeps what it has).
    fn subscription(version: i16, topics: &[&str]) -> Vec<u8> {
        let mut s = ConsumerProtocolSubscription::default();
        s.topics = topics.iter().map(|t| str_bytes(t)).collect();
        s.user_data = Some(Bytes::from_static(b"user"));
        if version >= 1 {
            let mut owned = OwnedTopic::default();
            owned.topic = TopicName(str_bytes(topics[0]));
            owned.partitions = vec![0, 2];
            s.owned_partitions = vec![owned];
        }
        if version >= 2 {
            s.generation_id = 7;
        }
        if version >= 3 {
            s.rack_id = Some(str_bytes("r1"));
        }
        let mut out = BytesMut::new();
        out.extend_from_slice(&version.to_be_bytes());
        s.encode(&mut out, version).unwrap();
        out.to_vec()
    }

    // Goal: subscriptions of every version kafka-protocol knows decode to their topics,
    // their owned partitions (v1+) and their rack (v3+).
    #[test]
    fn every_subscription_version_decodes() {
        for version in 0..=3i16 {
            let bytes = subscription(version, &["orders", "payments"]);
            let s = decode_subscription(&bytes).expect("decodes");
            assert_eq!(s.topics, vec!["orders", "payments"], "v{version}");
            let owned: Vec<(String, i32)> = s
                .owned_partitions
                .iter()
                .map(|tp| (tp.topic.clone(), tp.partition))
                .collect();
            let want_owned = if version >= 1 {
                vec![("orders".to_string(), 0), ("orders".to_string(), 2)]
            } else {
                vec![]
            };
            assert_eq!(owned, want_owned, "v{version}");
            let want_rack = (version >= 3).then(|| "r1".to_string());
            assert_eq!(s.rack, want_rack, "v{version}");
        }
    }

    // Goal: a version newer than kafka-protocol's is read as the newest (Kafka's rule), and
    // a negative one does not decode.
    #[test]
    fn newer_versions_read_as_the_newest_and_negative_ones_fail() {
        let mut bytes = subscription(3, &["t"]);
        bytes[..2].copy_from_slice(&9i16.to_be_bytes());
        assert_eq!(decode_subscription(&bytes).unwrap().topics, vec!["t"]);
        bytes[..2].copy_from_slice(&(-1i16).to_be_bytes());
        assert_eq!(decode_subscription(&bytes), None);
    }

    // Goal: malformed metadata never panics and decodes to nothing: every truncation of
    // every version, a null topic array, invalid UTF-8, empty bytes.
    #[test]
    fn malformed_subscriptions_decode_to_nothing() {
        for version in 0..=3i16 {
            let full = subscription(version, &["orders", "payments"]);
            for cut in 0..full.len() {
                assert_eq!(
                    decode_subscription(&full[..cut]),
                    None,
                    "v{version} cut {cut}"
                );
            }
        }
        assert_eq!(decode_subscription(&[]), None);
        assert_eq!(decode_subscription(&[0, 0, 0xff, 0xff, 0xff, 0xff]), None);
        // Bytes that are no subscription claim ~1.6 billion topics ("bscr"): refused before
        // anything is allocated for them (without the binary's guard this test would abort).
        assert_eq!(decode_subscription(b"subscription"), None);
        assert_eq!(
            decode_subscription(&[0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 1]),
            None
        );
        let mut bad_utf8 = subscription(0, &["ab"]);
        bad_utf8[8] = 0xff;
        assert_eq!(decode_subscription(&bad_utf8), None);
    }

    // Goal: what DescribeGroups shows of a KIP-848 member is the consumer protocol's v0
    // encoding, byte for byte (what the coordinator used to write by hand), and reads back.
    #[test]
    fn encoded_subscription_and_assignment_are_v0() {
        let mut want = vec![0u8, 0, 0, 0, 0, 1, 0, 8];
        want.extend_from_slice(b"payments");
        want.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&encode_subscription(&["payments".into()])[..], &want[..]);
        assert_eq!(decode_subscription(&want).unwrap().topics, vec!["payments"]);

        let mut want = vec![0u8, 0, 0, 0, 0, 1, 0, 8];
        want.extend_from_slice(b"payments");
        want.extend_from_slice(&[
            0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff,
        ]);
        let got = encode_assignment(&[("payments".into(), vec![0, 1, 2])]);
        assert_eq!(&got[..], &want[..]);
    }
}
