//! The Produce request (v3-13) decoded into vectors the connection reuses, so a steady
//! stream of produce requests allocates nothing to decode them: topic names and records
//! are slices of the request frame (`Bytes`), and the two vectors keep their capacity from
//! one request to the next.
//!
//! Guarantees: a request is decoded completely before anything is done with it, so a
//! malformed one is refused whole (the connection closes, nothing was appended); the number
//! of entries is bounded by [`PRODUCE_PARTITION_ENTRIES_MAX`] and by the frame's length
//! (every entry takes at least six bytes), never by a count read from the wire. Bytes left
//! after the body are ignored, as for every other API (see `codec::decode_request`).

use std::ops::Range;

use bytes::{Buf, Bytes};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::limits::PRODUCE_PARTITION_ENTRIES_MAX;

/// First version with flexible (compact) encodings and tagged fields.
const FLEXIBLE_VERSION_MIN: i16 = 9;
/// First version that names topics by id.
const TOPIC_ID_VERSION_MIN: i16 = 13;

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
    pub(crate) transactional_id: bool,
    pub(crate) acks: i16,
    pub(crate) topics: Vec<TopicData>,
    pub(crate) partitions: Vec<PartitionData>,
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed Produce request: {0}")]
pub(crate) struct Malformed(pub(crate) &'static str);

/// Vectors that grew past this many entries are given back after the request, so one huge
/// request does not leave a connection holding its memory.
const ENTRIES_KEPT_MAX: usize = 1024;

impl Decoded {
    /// Decodes `body` at `version`, replacing what the vectors held.
    pub(crate) fn decode(&mut self, body: &Bytes, version: i16) -> Result<(), Malformed> {
        self.clear();
        let mut r = Reader {
            body,
            at: 0,
            flexible: version >= FLEXIBLE_VERSION_MIN,
        };
        self.transactional_id = r.nullable_string()?.is_some();
        self.acks = r.i16()?;
        let _timeout_ms = r.i32()?;
        let topics = r.array_len()?;
        for _ in 0..topics {
            let (name, topic_id) = match version >= TOPIC_ID_VERSION_MIN {
                true => (StrBytes::default(), r.uuid()?),
                false => (r.string()?, Uuid::nil()),
            };
            let first = self.partitions.len();
            let partitions = r.array_len()?;
            if first + partitions > PRODUCE_PARTITION_ENTRIES_MAX {
                return Err(Malformed("more partition entries than the broker accepts"));
            }
            for _ in 0..partitions {
                let index = r.i32()?;
                let records = r.nullable_bytes()?;
                r.tagged_fields()?;
                self.partitions.push(PartitionData { index, records });
            }
            r.tagged_fields()?;
            self.topics.push(TopicData {
                name,
                topic_id,
                partitions: first..self.partitions.len(),
            });
        }
        r.tagged_fields()?;
        Ok(())
    }

    /// Forgets the request (its frame can go), keeping the vectors' capacity unless large.
    pub(crate) fn clear(&mut self) {
        self.topics.clear();
        self.partitions.clear();
        if self.partitions.capacity() > ENTRIES_KEPT_MAX {
            self.partitions = Vec::new();
        }
        if self.topics.capacity() > ENTRIES_KEPT_MAX {
            self.topics = Vec::new();
        }
    }
}

/// A cursor over the body; every read checks the bytes are there.
struct Reader<'a> {
    body: &'a Bytes,
    at: usize,
    flexible: bool,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<Range<usize>, Malformed> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.body.len())
            .ok_or(Malformed("truncated"))?;
        let range = self.at..end;
        self.at = end;
        Ok(range)
    }

    fn i16(&mut self) -> Result<i16, Malformed> {
        let r = self.take(2)?;
        Ok((&self.body[r]).get_i16())
    }

    fn i32(&mut self) -> Result<i32, Malformed> {
        let r = self.take(4)?;
        Ok((&self.body[r]).get_i32())
    }

    fn uuid(&mut self) -> Result<Uuid, Malformed> {
        let r = self.take(16)?;
        Ok(Uuid::from_slice(&self.body[r]).expect("16 bytes"))
    }

    fn unsigned_varint(&mut self) -> Result<u32, Malformed> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let r = self.take(1)?;
            let byte = self.body[r.start];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Malformed("varint longer than five bytes"))
    }

    /// A length, `None` for null: i16/i32 with -1 for null, or an unsigned varint of
    /// length + 1 with 0 for null (flexible versions).
    fn length(&mut self, wide: bool) -> Result<Option<usize>, Malformed> {
        let len = match (self.flexible, wide) {
            (true, _) => i64::from(self.unsigned_varint()?) - 1,
            (false, false) => i64::from(self.i16()?),
            (false, true) => i64::from(self.i32()?),
        };
        match len {
            -1 => Ok(None),
            n if n < 0 => Err(Malformed("negative length")),
            n => Ok(Some(n as usize)),
        }
    }

    fn array_len(&mut self) -> Result<usize, Malformed> {
        let len = self.length(true)?.ok_or(Malformed("null array"))?;
        // Each element takes at least one byte: a count beyond the bytes left is a lie.
        if len > self.body.len() - self.at {
            return Err(Malformed("array longer than the request"));
        }
        Ok(len)
    }

    fn nullable_string(&mut self) -> Result<Option<StrBytes>, Malformed> {
        let Some(len) = self.length(false)? else {
            return Ok(None);
        };
        let r = self.take(len)?;
        StrBytes::from_utf8(self.body.slice(r))
            .map(Some)
            .map_err(|_| Malformed("string is not UTF-8"))
    }

    fn string(&mut self) -> Result<StrBytes, Malformed> {
        self.nullable_string()?.ok_or(Malformed("null topic name"))
    }

    fn nullable_bytes(&mut self) -> Result<Option<Bytes>, Malformed> {
        let Some(len) = self.length(true)? else {
            return Ok(None);
        };
        let r = self.take(len)?;
        Ok(Some(self.body.slice(r)))
    }

    fn tagged_fields(&mut self) -> Result<(), Malformed> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            let _tag = self.unsigned_varint()?;
            let size = self.unsigned_varint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, TopicName};
    use kafka_protocol::protocol::Encodable;

    /// A small deterministic generator (xorshift), so a failure names its seed.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

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
            let mut rng = Rng(seed * 0x9E37_79B9_7F4A_7C15);
            for version in 3..=13 {
                let req = random_request(&mut rng, version);
                let body = encode(&req, version);
                decoded
                    .decode(&body, version)
                    .unwrap_or_else(|e| panic!("seed {seed} v{version}: {e}"));
                assert_eq!(decoded.transactional_id, req.transactional_id.is_some());
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
        let mut rng = Rng(77);
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
}
