//! The Produce request (v3-13) decoded into vectors the connection reuses, so a steady
//! stream of produce requests allocates nothing to decode them: topic names and records
//! are slices of the request frame (`Bytes`), and the two vectors keep their capacity from
//! one request to the next.
//!
//! Guarantees: a request is decoded completely before anything is done with it, so a
//! malformed one is refused whole (the connection closes, nothing was appended); the number
//! of entries (topics, and partitions) is bounded by [`PRODUCE_PARTITION_ENTRIES_MAX`] and by
//! the frame's length (every partition entry takes at least six bytes), never by a count read
//! from the wire. The body is read with the shared bounds-checked cursor ([`WireReader`]).
//! Bytes left after the body are ignored, as for every other API (see
//! `codec::decode_request`).

use std::ops::Range;

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use sluice_record::BatchHeader;
use uuid::Uuid;

use crate::config::limits::CALL_ENTRIES_KEPT_MAX;
use crate::config::limits::PRODUCE_PARTITION_ENTRIES_MAX;
pub(crate) use crate::handlers::wire::Malformed;
use crate::handlers::wire::{topic_array, TopicArray, WireReader};
use crate::memory::clear_kept;

/// First version with flexible (compact) encodings and tagged fields.
const FLEXIBLE_VERSION_MIN: i16 = 9;
/// First version that names topics by id.
const TOPIC_ID_VERSION_MIN: i16 = 13;

/// Fewest bytes a topic entry takes at any version: its name's length or its id, and its
/// partitions' count.
const TOPIC_BYTES_MIN: usize = 2;
/// Fewest bytes a partition entry takes at any version: index, records' length, tagged
/// fields (flexible) or a four-byte length (not).
const PARTITION_BYTES_MIN: usize = 6;

/// One topic of the request: its name (v3-12) or id (v13+), and its partition entries.
#[derive(Debug, Clone)]
pub(crate) struct TopicData {
    pub(crate) name: StrBytes,
    pub(crate) topic_id: Uuid,
    /// Its entries in [`Decoded::partitions`].
    pub(crate) partitions: Range<usize>,
}

/// One partition entry: the partition index and its records (null allowed by the schema).
#[derive(Debug, Clone)]
pub(crate) struct PartitionData {
    pub(crate) index: i32,
    pub(crate) records: Option<Bytes>,
}

/// A decoded Produce request; reused from request to request.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    /// The request's transactional id (a slice of the frame; forgotten by `clear`).
    pub(crate) transactional_id: Option<StrBytes>,
    pub(crate) acks: i16,
    pub(crate) topics: Vec<TopicData>,
    pub(crate) partitions: Vec<PartitionData>,
}

impl Decoded {
    /// Kafka's `hasTransactionalRecords`: whether a partition's first batch has the
    /// transactional attribute (the bit `record_validation` checks again per batch).
    pub(crate) fn has_transactional_records(&self) -> bool {
        self.partitions.iter().any(|p| {
            p.records
                .as_ref()
                .and_then(|r| BatchHeader::parse(r).ok())
                .is_some_and(|h| h.is_transactional())
        })
    }

    /// Decodes `body` at `version`, replacing what the vectors held.
    pub(crate) fn decode(&mut self, body: &Bytes, version: i16) -> Result<(), Malformed> {
        self.clear();
        let mut r = WireReader::new(body, version >= FLEXIBLE_VERSION_MIN);
        self.transactional_id = r.nullable_string()?;
        self.acks = r.i16()?;
        let _timeout_ms = r.i32()?;
        let shape = TopicArray {
            entries_max: PRODUCE_PARTITION_ENTRIES_MAX,
            topic_bytes_min: TOPIC_BYTES_MIN,
            partition_bytes_min: PARTITION_BYTES_MIN,
            by_id: version >= TOPIC_ID_VERSION_MIN,
        };
        let topics = &mut self.topics;
        topic_array(
            &mut r,
            &shape,
            &mut self.partitions,
            |r| {
                let index = r.i32()?;
                let records = r.nullable_bytes()?;
                r.tagged_fields()?;
                Ok(PartitionData { index, records })
            },
            |name, topic_id, partitions| {
                topics.push(TopicData {
                    name,
                    topic_id,
                    partitions,
                })
            },
        )?;
        r.tagged_fields()?;
        Ok(())
    }

    /// Forgets the request (its frame can go), keeping the vectors' capacity unless large.
    pub(crate) fn clear(&mut self) {
        self.transactional_id = None;
        clear_kept(&mut self.topics, CALL_ENTRIES_KEPT_MAX);
        clear_kept(&mut self.partitions, CALL_ENTRIES_KEPT_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handlers::test_rng::Rng;
    use bytes::BytesMut;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::Encodable;

    fn random_request(rng: &mut Rng, version: i16) -> ProduceRequest {
        let mut req = ProduceRequest::default();
        if rng.below(3) == 0 {
            req.transactional_id = Some(TopicName(StrBytes::from_static_str("txn")).0.into());
        }
        req.acks = [-1, 0, 1][rng.below(3) as usize];
        req.timeout_ms = rng.below(60_000) as i32;
        for t in 0..rng.below(4) {
            let mut topic = TopicProduceData::default();
            if version >= TOPIC_ID_VERSION_MIN {
                topic.topic_id = Uuid::from_u128(u128::from(rng.next()) << 64 | u128::from(t));
            } else {
                topic.name = TopicName(StrBytes::from_string(format!(
                    "topic-{t}-{}",
                    rng.below(1000)
                )));
            }
            for _ in 0..rng.below(5) {
                let mut p = PartitionProduceData::default();
                p.index = rng.below(100) as i32;
                p.records = match rng.below(4) {
                    0 => None,
                    n => Some(Bytes::from(vec![n as u8; rng.below(300) as usize])),
                };
                topic.partition_data.push(p);
            }
            req.topic_data.push(topic);
        }
        req
    }

    fn encode(req: &ProduceRequest, version: i16) -> Bytes {
        let mut out = BytesMut::new();
        req.encode(&mut out, version).expect("encode");
        out.freeze()
    }

    // Goal: the hand-written decoder reads exactly what kafka-protocol encodes, at every
    // version Sluice accepts, for random requests (seeded; the seed is in the message).
    #[test]
    fn matches_kafka_protocol_at_every_version() {
        let mut decoded = Decoded::default();
        for seed in 1..300u64 {
            let mut rng = Rng::new(seed);
            for version in 3..=13 {
                let req = random_request(&mut rng, version);
                let body = encode(&req, version);
                decoded
                    .decode(&body, version)
                    .unwrap_or_else(|e| panic!("seed {seed} v{version}: {e}"));
                assert_eq!(
                    decoded.transactional_id.is_some(),
                    req.transactional_id.is_some()
                );
                assert_eq!(decoded.acks, req.acks, "seed {seed} v{version}");
                assert_eq!(decoded.topics.len(), req.topic_data.len());
                for (got, want) in decoded.topics.iter().zip(&req.topic_data) {
                    assert_eq!(got.name, want.name.0, "seed {seed} v{version}");
                    assert_eq!(got.topic_id, want.topic_id, "seed {seed} v{version}");
                    let parts = &decoded.partitions[got.partitions.clone()];
                    assert_eq!(parts.len(), want.partition_data.len());
                    for (g, w) in parts.iter().zip(&want.partition_data) {
                        assert_eq!(g.index, w.index);
                        assert_eq!(g.records, w.records, "seed {seed} v{version}");
                    }
                }
            }
        }
    }

    // Goal: every truncation of a valid request is refused, never a panic or a partial
    // decode taken for a whole one.
    #[test]
    fn every_truncation_is_refused() {
        let mut rng = Rng::new(77);
        let mut decoded = Decoded::default();
        for version in [3, 8, 9, 12, 13] {
            let mut req = random_request(&mut rng, version);
            while req.topic_data.iter().all(|t| t.partition_data.is_empty()) {
                req = random_request(&mut rng, version);
            }
            let body = encode(&req, version);
            for cut in 0..body.len() {
                assert!(
                    decoded.decode(&body.slice(..cut), version).is_err(),
                    "v{version}: a body cut at {cut} of {} decoded",
                    body.len()
                );
            }
        }
    }

    // Goal: counts from the wire never drive allocation: an array count beyond the bytes
    // left is refused before anything is reserved.
    #[test]
    fn lying_counts_are_refused() {
        let mut body = BytesMut::new();
        body.extend_from_slice(&(-1i16).to_be_bytes()); // no transactional id
        body.extend_from_slice(&(-1i16).to_be_bytes()); // acks
        body.extend_from_slice(&30_000i32.to_be_bytes());
        body.extend_from_slice(&i32::MAX.to_be_bytes()); // topic count
        let mut decoded = Decoded::default();
        assert_eq!(
            decoded.decode(&body.freeze(), 3),
            Err(Malformed("array longer than the request"))
        );
        assert!(decoded.topics.capacity() < 16);
    }

    // Goal: topic entries are bounded like partition entries: topics listing no partitions
    // cannot make the decoded request as large as the frame allows.
    #[test]
    fn too_many_topics_are_refused() {
        let topics = PRODUCE_PARTITION_ENTRIES_MAX + 1;
        let mut body = BytesMut::new();
        body.extend_from_slice(&(-1i16).to_be_bytes()); // no transactional id
        body.extend_from_slice(&(-1i16).to_be_bytes()); // acks
        body.extend_from_slice(&30_000i32.to_be_bytes());
        body.extend_from_slice(&(topics as i32).to_be_bytes());
        for _ in 0..topics {
            body.extend_from_slice(&0i16.to_be_bytes()); // empty name
            body.extend_from_slice(&0i32.to_be_bytes()); // no partitions
        }
        let mut decoded = Decoded::default();
        assert_eq!(
            decoded.decode(&body.freeze(), 3),
            Err(Malformed("more topic entries than the broker accepts"))
        );
        assert!(decoded.topics.is_empty());
    }
}
