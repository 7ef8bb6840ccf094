//! The Fetch request (v4-18) decoded into vectors the connection reuses, so a steady stream
//! of fetch requests allocates nothing to decode them: topic names (v4-12) are slices of the
//! request frame (`Bytes`), ids (v13+) are read in place, and the two vectors keep their
//! capacity from one request to the next.
//!
//! Only what a single-node broker answers with is kept (the fields of [`Decoded`]). The rest
//! is read past, field by field as Kafka's FetchRequest.json lays it out at each version:
//! replica_id (v4-14), current_leader_epoch (v9+), last_fetched_epoch (v12+),
//! log_start_offset (v5+), the forgotten topics (v7+: nothing stored), rack_id (v11+), and
//! the tagged fields of flexible versions (v12+: cluster_id, replica_state,
//! replica_directory_id, high_watermark, unknown tags), each skipped by its own size.
//!
//! Guarantees: a request is decoded completely before anything is done with it, so a
//! malformed one is refused whole; topic entries and partition entries are each bounded by
//! [`FETCH_PARTITION_ENTRIES_MAX`] and by the frame's length, never by a count read from the
//! wire (a count the bytes left cannot hold is refused before anything is stored). Every read
//! is bounds-checked ([`WireReader`]). Bytes left after the body are ignored, as for every
//! other API (see `codec::decode_request`).

use std::ops::Range;

use bytes::Bytes;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use crate::config::limits::CALL_ENTRIES_KEPT_MAX;
use crate::config::limits::FETCH_PARTITION_ENTRIES_MAX;
pub(crate) use crate::handlers::wire::Malformed;
use crate::handlers::wire::{topic_array, TopicArray, WireReader};
use crate::memory::clear_kept;

/// The versions this decoder reads (as the handler and the API registry accept).
const VERSIONS: std::ops::RangeInclusive<i16> = 4..=18;
/// First version whose partitions carry log_start_offset.
const LOG_START_OFFSET_VERSION_MIN: i16 = 5;
/// First version with fetch sessions (KIP-227) and forgotten topics.
const SESSION_VERSION_MIN: i16 = 7;
/// First version whose partitions carry current_leader_epoch.
const CURRENT_LEADER_EPOCH_VERSION_MIN: i16 = 9;
/// First version with rack_id.
const RACK_ID_VERSION_MIN: i16 = 11;
/// First version with flexible (compact) encodings and tagged fields.
const FLEXIBLE_VERSION_MIN: i16 = 12;
/// First version whose partitions carry last_fetched_epoch.
const LAST_FETCHED_EPOCH_VERSION_MIN: i16 = 12;
/// First version that names topics by id.
const TOPIC_ID_VERSION_MIN: i16 = 13;
/// Last version with replica_id in the body (later ones send it as replica_state, tagged).
const REPLICA_ID_VERSION_MAX: i16 = 14;

/// session_id where a version has none: no session (INVALID_SESSION_ID).
const SESSION_ID_NONE: i32 = 0;
/// session_epoch where a version has none: FINAL_EPOCH, a full request without a session.
const SESSION_EPOCH_FINAL: i32 = -1;

/// Fewest bytes a topic entry (or a forgotten topic) takes at any version: its name's
/// length or its id, and its partitions' count.
const TOPIC_BYTES_MIN: usize = 2;
/// Fewest bytes a partition entry takes at any version: partition, fetch_offset and
/// partition_max_bytes.
const PARTITION_BYTES_MIN: usize = 16;
/// Bytes of one forgotten partition (an int32 index).
const FORGOTTEN_PARTITION_BYTES: usize = 4;

/// One topic of the request: its name (v4-12) or id (v13+), the other left default.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FetchTopic {
    pub(crate) name: StrBytes,
    pub(crate) topic_id: Uuid,
    /// Its entries in [`Decoded::partitions`].
    pub(crate) partitions: Range<usize>,
}

/// One partition entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FetchPartition {
    pub(crate) partition: i32,
    pub(crate) fetch_offset: i64,
    pub(crate) partition_max_bytes: i32,
}

/// A decoded Fetch request; reused from request to request.
#[derive(Debug, Default)]
pub(crate) struct Decoded {
    pub(crate) max_wait_ms: i32,
    pub(crate) min_bytes: i32,
    pub(crate) max_bytes: i32,
    pub(crate) isolation_level: i8,
    pub(crate) session_id: i32,
    pub(crate) session_epoch: i32,
    pub(crate) topics: Vec<FetchTopic>,
    pub(crate) partitions: Vec<FetchPartition>,
}

impl Decoded {
    /// Decodes `body` (the request after its header) at `version`, replacing what was held.
    /// On error what is held is unspecified (the caller closes the connection and clears).
    pub(crate) fn decode(&mut self, body: &Bytes, version: i16) -> Result<(), Malformed> {
        self.clear();
        if !VERSIONS.contains(&version) {
            return Err(Malformed("Fetch version outside 4-18"));
        }
        let mut r = WireReader::new(body, version >= FLEXIBLE_VERSION_MIN);
        if version <= REPLICA_ID_VERSION_MAX {
            let _replica_id = r.i32()?;
        }
        self.max_wait_ms = r.i32()?;
        self.min_bytes = r.i32()?;
        self.max_bytes = r.i32()?;
        self.isolation_level = r.i8()?;
        (self.session_id, self.session_epoch) = match version >= SESSION_VERSION_MIN {
            true => (r.i32()?, r.i32()?),
            false => (SESSION_ID_NONE, SESSION_EPOCH_FINAL),
        };
        self.decode_topics(&mut r, version)?;
        if version >= SESSION_VERSION_MIN {
            skip_forgotten_topics(&mut r, version)?;
        }
        if version >= RACK_ID_VERSION_MIN {
            r.skip_string()?;
        }
        r.tagged_fields()?;
        self.assert_consistent();
        Ok(())
    }

    fn decode_topics(&mut self, r: &mut WireReader<'_>, version: i16) -> Result<(), Malformed> {
        let shape = TopicArray {
            entries_max: FETCH_PARTITION_ENTRIES_MAX,
            topic_bytes_min: TOPIC_BYTES_MIN,
            partition_bytes_min: PARTITION_BYTES_MIN,
            by_id: version >= TOPIC_ID_VERSION_MIN,
        };
        let topics = &mut self.topics;
        topic_array(
            r,
            &shape,
            &mut self.partitions,
            |r| decode_partition(r, version),
            |name, topic_id, partitions| {
                topics.push(FetchTopic {
                    name,
                    topic_id,
                    partitions,
                })
            },
        )
    }

    /// The topics' ranges tile the partition entries in order, within the bounds (kept in
    /// release: one pass over the topics the decode already made).
    fn assert_consistent(&self) {
        assert!(self.topics.len() <= FETCH_PARTITION_ENTRIES_MAX);
        assert!(self.partitions.len() <= FETCH_PARTITION_ENTRIES_MAX);
        let mut next = 0;
        for t in &self.topics {
            assert_eq!(t.partitions.start, next);
            next = t.partitions.end;
        }
        assert_eq!(next, self.partitions.len());
    }

    /// Forgets the request (its frame can go), keeping the vectors' capacity unless large.
    pub(crate) fn clear(&mut self) {
        clear_kept(&mut self.topics, CALL_ENTRIES_KEPT_MAX);
        clear_kept(&mut self.partitions, CALL_ENTRIES_KEPT_MAX);
    }
}

/// One partition entry, its per-version fields read past.
fn decode_partition(r: &mut WireReader<'_>, version: i16) -> Result<FetchPartition, Malformed> {
    let partition = r.i32()?;
    if version >= CURRENT_LEADER_EPOCH_VERSION_MIN {
        let _current_leader_epoch = r.i32()?;
    }
    let fetch_offset = r.i64()?;
    if version >= LAST_FETCHED_EPOCH_VERSION_MIN {
        let _last_fetched_epoch = r.i32()?;
    }
    if version >= LOG_START_OFFSET_VERSION_MIN {
        let _log_start_offset = r.i64()?;
    }
    let partition_max_bytes = r.i32()?;
    // replica_directory_id (v17+), high_watermark (v18+) and unknown tags.
    r.tagged_fields()?;
    Ok(FetchPartition {
        partition,
        fetch_offset,
        partition_max_bytes,
    })
}

/// The forgotten topics of an incremental request (v7+). Sessions are not kept, so they are
/// read past: bounded by the frame, nothing stored, however many there are.
fn skip_forgotten_topics(r: &mut WireReader<'_>, version: i16) -> Result<(), Malformed> {
    let topics = r.array_len(TOPIC_BYTES_MIN)?;
    for _ in 0..topics {
        match version >= TOPIC_ID_VERSION_MIN {
            true => drop(r.uuid()?),
            false => r.skip_string()?,
        }
        r.skip_array(FORGOTTEN_PARTITION_BYTES)?;
        r.tagged_fields()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::handlers::test_rng::Rng;
    use bytes::{BufMut, BytesMut};
    use kafka_protocol::messages::fetch_request as k;
    use kafka_protocol::messages::{BrokerId, FetchRequest, TopicName};
    use kafka_protocol::protocol::Encodable;

    /// Lengths of generated names and tag values at most this: the default keeps bodies
    /// small enough to cut at every byte.
    const SMALL: usize = 200;

    /// Unknown tagged fields; tags from 2, as kafka-protocol writes unknown tags only past
    /// the ones a struct knows (0 and 1 at most in FetchRequest).
    fn unknown_tags(rng: &mut Rng, len_max: usize) -> BTreeMap<i32, Bytes> {
        let mut tags = BTreeMap::new();
        for _ in 0..rng.below(3) {
            let tag = 2 + rng.below(300) as i32;
            let len = rng.len().min(len_max);
            tags.insert(tag, Bytes::from(vec![0xa5; len]));
        }
        tags
    }

    /// A string of up to `len_max` characters (at most 10 000, so at most 30 000 bytes: an
    /// int16 length must hold it).
    fn name(rng: &mut Rng, len_max: usize) -> StrBytes {
        let mut s = String::new();
        for _ in 0..rng.len().min(len_max).min(10_000) {
            s.push(['a', '-', '.', '_', '7', 'é', '語'][rng.below(7) as usize]);
        }
        StrBytes::from_string(s)
    }

    fn uuid(rng: &mut Rng) -> Uuid {
        Uuid::from_u128(u128::from(rng.next()) << 64 | u128::from(rng.next()))
    }

    fn random_partition(rng: &mut Rng, version: i16, len_max: usize) -> k::FetchPartition {
        let mut p = k::FetchPartition::default();
        p.partition = rng.i32();
        p.fetch_offset = rng.i64();
        p.partition_max_bytes = rng.i32();
        if version >= CURRENT_LEADER_EPOCH_VERSION_MIN {
            p.current_leader_epoch = rng.i32();
        }
        if version >= LOG_START_OFFSET_VERSION_MIN {
            p.log_start_offset = rng.i64();
        }
        if version >= LAST_FETCHED_EPOCH_VERSION_MIN {
            p.last_fetched_epoch = rng.i32();
        }
        if version >= FLEXIBLE_VERSION_MIN {
            p.unknown_tagged_fields = unknown_tags(rng, len_max);
        }
        if version >= 17 && rng.below(2) == 0 {
            p.replica_directory_id = uuid(rng);
        }
        if version >= 18 && rng.below(2) == 0 {
            p.high_watermark = rng.i64();
        }
        p
    }

    fn random_topic(rng: &mut Rng, version: i16, len_max: usize) -> k::FetchTopic {
        let mut t = k::FetchTopic::default();
        match version >= TOPIC_ID_VERSION_MIN {
            true => t.topic_id = uuid(rng),
            false => t.topic = TopicName(name(rng, len_max)),
        }
        let partitions = match rng.below(6) {
            0 => 0,
            1 => rng.below(300),
            _ => 1 + rng.below(5),
        };
        for _ in 0..partitions {
            t.partitions.push(random_partition(rng, version, len_max));
        }
        if version >= FLEXIBLE_VERSION_MIN {
            t.unknown_tagged_fields = unknown_tags(rng, len_max);
        }
        t
    }

    fn random_forgotten(rng: &mut Rng, version: i16, len_max: usize) -> k::ForgottenTopic {
        let mut t = k::ForgottenTopic::default();
        match version >= TOPIC_ID_VERSION_MIN {
            true => t.topic_id = uuid(rng),
            false => t.topic = TopicName(name(rng, len_max)),
        }
        t.partitions = (0..rng.below(20)).map(|_| rng.i32()).collect();
        if version >= FLEXIBLE_VERSION_MIN {
            t.unknown_tagged_fields = unknown_tags(rng, len_max);
        }
        t
    }

    /// A random request with every field `version` has (and only those: kafka-protocol
    /// refuses to encode the others).
    fn random_request(rng: &mut Rng, version: i16, len_max: usize) -> FetchRequest {
        let mut req = FetchRequest::default();
        if version <= REPLICA_ID_VERSION_MAX {
            req.replica_id = BrokerId(rng.i32());
        }
        req.max_wait_ms = rng.i32();
        req.min_bytes = rng.i32();
        req.max_bytes = rng.i32();
        req.isolation_level = rng.next() as i8;
        if version >= SESSION_VERSION_MIN {
            req.session_id = rng.i32();
            req.session_epoch = rng.i32();
            for _ in 0..rng.below(4) {
                let forgotten = random_forgotten(rng, version, len_max);
                req.forgotten_topics_data.push(forgotten);
            }
        }
        let topics = match rng.below(8) {
            0 => 0,
            1 => 20 + rng.below(50),
            _ => 1 + rng.below(4),
        };
        for _ in 0..topics {
            req.topics.push(random_topic(rng, version, len_max));
        }
        if version >= RACK_ID_VERSION_MIN {
            req.rack_id = name(rng, len_max);
        }
        if version >= FLEXIBLE_VERSION_MIN {
            if rng.below(2) == 0 {
                req.cluster_id = Some(name(rng, len_max));
            }
            req.unknown_tagged_fields = unknown_tags(rng, len_max);
        }
        if version >= 15 && rng.below(2) == 0 {
            req.replica_state.replica_id = BrokerId(rng.i32());
            req.replica_state.replica_epoch = rng.i64();
        }
        req
    }

    fn encode(req: &FetchRequest, version: i16) -> Bytes {
        let mut out = BytesMut::new();
        req.encode(&mut out, version).expect("encode");
        out.freeze()
    }

    /// Every field the interface has, as `req` says at `version` (the other of name and id
    /// default; session fields as kafka-protocol defaults them where a version has none).
    fn assert_matches(got: &Decoded, req: &FetchRequest, version: i16, seed: u64) {
        let at = format!("seed {seed} v{version}");
        assert_eq!(got.max_wait_ms, req.max_wait_ms, "{at}");
        assert_eq!(got.min_bytes, req.min_bytes, "{at}");
        assert_eq!(got.max_bytes, req.max_bytes, "{at}");
        assert_eq!(got.isolation_level, req.isolation_level, "{at}");
        let (session_id, session_epoch) = match version >= SESSION_VERSION_MIN {
            true => (req.session_id, req.session_epoch),
            false => (0, -1),
        };
        assert_eq!(got.session_id, session_id, "{at}");
        assert_eq!(got.session_epoch, session_epoch, "{at}");
        assert_eq!(got.topics.len(), req.topics.len(), "{at}");
        let mut next = 0;
        for (g, w) in got.topics.iter().zip(&req.topics) {
            let by_id = version >= TOPIC_ID_VERSION_MIN;
            assert_eq!(
                g.name,
                if by_id { "".into() } else { w.topic.0.clone() },
                "{at}"
            );
            assert_eq!(
                g.topic_id,
                if by_id { w.topic_id } else { Uuid::nil() },
                "{at}"
            );
            assert_eq!(g.partitions, next..next + w.partitions.len(), "{at}");
            next = g.partitions.end;
            for (gp, wp) in got.partitions[g.partitions.clone()]
                .iter()
                .zip(&w.partitions)
            {
                assert_eq!(gp.partition, wp.partition, "{at}");
                assert_eq!(gp.fetch_offset, wp.fetch_offset, "{at}");
                assert_eq!(gp.partition_max_bytes, wp.partition_max_bytes, "{at}");
            }
        }
        assert_eq!(got.partitions.len(), next, "{at}");
    }

    // Goal: the hand-written decoder reads exactly what kafka-protocol encodes, at every
    // version Sluice accepts, for random requests with every field of the version (forgotten
    // topics, rack ids, known and unknown tagged fields, some tag values at varint
    // boundaries); seeded, the seed is in the message.
    #[test]
    fn matches_kafka_protocol_at_every_version() {
        let mut decoded = Decoded::default();
        for seed in 1..300u64 {
            let mut rng = Rng::new(seed);
            for version in VERSIONS {
                let len_max = if seed % 10 == 0 { usize::MAX } else { SMALL };
                let req = random_request(&mut rng, version, len_max);
                let body = encode(&req, version);
                decoded
                    .decode(&body, version)
                    .unwrap_or_else(|e| panic!("seed {seed} v{version}: {e}"));
                assert_matches(&decoded, &req, version, seed);
            }
        }
    }

    // Goal: every truncation of a valid request is refused, never a panic or a partial
    // decode taken for a whole one. With the test above this also shows the decoder reads
    // a body to its last byte, no more, no less, at every version.
    #[test]
    fn every_truncation_is_refused() {
        let mut decoded = Decoded::default();
        for seed in 1..6u64 {
            let mut rng = Rng::new(seed);
            for version in VERSIONS {
                let body = encode(&random_request(&mut rng, version, SMALL), version);
                if body.len() > 16 * 1024 {
                    continue;
                }
                for cut in 0..body.len() {
                    assert!(
                        decoded.decode(&body.slice(..cut), version).is_err(),
                        "seed {seed} v{version}: a body cut at {cut} of {} decoded",
                        body.len()
                    );
                }
            }
        }
    }

    /// The fields before the topics at `version`, all zero.
    fn head(version: i16) -> BytesMut {
        let mut body = BytesMut::new();
        // max_wait_ms, min_bytes, max_bytes, isolation_level; replica_id; the session.
        let mut fixed = 3 * 4 + 1;
        if version <= REPLICA_ID_VERSION_MAX {
            fixed += 4;
        }
        if version >= SESSION_VERSION_MIN {
            fixed += 8;
        }
        body.put_bytes(0, fixed);
        body
    }

    fn refused(body: BytesMut, version: i16) -> Malformed {
        let mut decoded = Decoded::default();
        let err = decoded.decode(&body.freeze(), version).unwrap_err();
        assert!(decoded.partitions.capacity() < 16 && decoded.topics.capacity() < 16);
        err
    }

    // Goal: counts and lengths from the wire never drive anything: a count beyond what the
    // bytes left can hold, a length past the end, a null or negative length where the schema
    // has none, each is refused before anything is stored.
    #[test]
    fn lying_counts_are_refused() {
        let lie = Malformed("array longer than the request");
        // Topic count of i32::MAX.
        let mut body = head(4);
        body.put_i32(i32::MAX);
        assert_eq!(refused(body, 4), lie);
        // Compact topic count of u32::MAX - 1 (v12).
        let mut body = head(12);
        body.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(refused(body, 12), lie);
        // 1000 partitions in 100 bytes.
        let mut body = head(4);
        body.put_i32(1);
        body.put_i16(1);
        body.put_u8(b't');
        body.put_i32(1000);
        body.put_bytes(0, 100);
        assert_eq!(refused(body, 4), lie);
        // A forgotten topic claiming 10 partitions (40 bytes) with 12 bytes left (v7).
        let mut body = head(7);
        body.put_i32(0);
        body.put_i32(1);
        body.put_i16(0);
        body.put_i32(10);
        body.put_bytes(0, 12);
        assert_eq!(refused(body, 7), lie);
        // A top-level tagged field claiming 1000 bytes (v12: no topics, no forgotten
        // topics, empty rack id, one tagged field).
        let mut body = head(12);
        body.put_slice(&[1, 1, 1, 1, 0, 0xe8, 0x07]);
        body.put_bytes(0, 10);
        assert_eq!(refused(body, 12), Malformed("truncated"));
        // A topic name of negative length, then a null one.
        for (len, why) in [
            (-2, "negative length"),
            (-1, "null where the schema has a string"),
        ] {
            let mut body = head(4);
            body.put_i32(1);
            body.put_i16(len);
            body.put_bytes(0, 8);
            assert_eq!(refused(body, 4), Malformed(why));
        }
        // A null rack id (v11).
        let mut body = head(11);
        body.put_i32(0);
        body.put_i32(0);
        body.put_i16(-1);
        assert_eq!(
            refused(body, 11),
            Malformed("null where the schema has a string")
        );
        // A version the decoder does not read.
        for version in [3, 19, -1] {
            assert!(Decoded::default().decode(&Bytes::new(), version).is_err());
        }
    }

    /// A v4 body listing `partitions[i]` partitions under topic `i`.
    fn many_entries(partitions: &[usize]) -> Bytes {
        let mut body = head(4);
        body.put_i32(partitions.len() as i32);
        for &count in partitions {
            body.put_i16(1);
            body.put_u8(b't');
            body.put_i32(count as i32);
            body.put_bytes(0, count * PARTITION_BYTES_MIN);
        }
        body.freeze()
    }

    // Goal: entries are bounded by FETCH_PARTITION_ENTRIES_MAX however they are spread
    // (one topic, several, topics without partitions), refused before they are stored; the
    // bound itself is accepted.
    #[test]
    fn too_many_entries_are_refused() {
        let max = FETCH_PARTITION_ENTRIES_MAX;
        let mut decoded = Decoded::default();
        assert_eq!(decoded.decode(&many_entries(&[max]), 4), Ok(()));
        assert_eq!(decoded.partitions.len(), max);
        let too_many = Malformed("more partition entries than the broker accepts");
        for spread in [vec![max + 1], vec![max / 2, max / 2 + 1]] {
            let mut decoded = Decoded::default();
            assert_eq!(
                decoded.decode(&many_entries(&spread), 4),
                Err(too_many.clone())
            );
            assert!(decoded.partitions.len() <= max / 2);
        }
        let mut decoded = Decoded::default();
        assert_eq!(
            decoded.decode(&many_entries(&vec![0; max + 1]), 4),
            Err(Malformed("more topic entries than the broker accepts"))
        );
        assert!(decoded.topics.is_empty());
        assert_eq!(decoded.decode(&many_entries(&vec![0; max]), 4), Ok(()));
    }

    // Goal: one Decoded serves request after request: decoding again gives the same result
    // as a fresh one, without reallocating its vectors; a huge request's capacity is given
    // back by `clear`.
    #[test]
    fn decoding_again_reuses_the_vectors() {
        let mut rng = Rng::new(4242);
        let mut reused = Decoded::default();
        for version in VERSIONS {
            let a = encode(&random_request(&mut rng, version, SMALL), version);
            let b = encode(&random_request(&mut rng, version, SMALL), version);
            let mut fresh = Decoded::default();
            fresh.decode(&a, version).unwrap();
            // Once the vectors have held both requests, neither needs them to grow again.
            reused.decode(&a, version).unwrap();
            reused.decode(&b, version).unwrap();
            let topics_at = reused.topics.as_ptr();
            let partitions_at = reused.partitions.as_ptr();
            reused.decode(&a, version).unwrap();
            assert_eq!(format!("{reused:?}"), format!("{fresh:?}"), "v{version}");
            reused.decode(&b, version).unwrap();
            let kept = |capacity: usize| (1..=CALL_ENTRIES_KEPT_MAX).contains(&capacity);
            if kept(reused.partitions.capacity()) {
                assert_eq!(reused.partitions.as_ptr(), partitions_at, "v{version}");
            }
            if kept(reused.topics.capacity()) {
                assert_eq!(reused.topics.as_ptr(), topics_at, "v{version}");
            }
        }
        reused
            .decode(&many_entries(&[CALL_ENTRIES_KEPT_MAX + 1]), 4)
            .unwrap();
        reused.clear();
        assert_eq!(reused.partitions.capacity(), 0);
    }
}
