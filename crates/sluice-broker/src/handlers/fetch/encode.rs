//! The Fetch response (v4-18), encoded by hand into the call's reused [`ChunkedFrame`] so
//! each partition's records are spliced in as journal file ranges (or the log's own
//! `Bytes`) instead of being copied into one buffer.
//!
//! Guarantee: for every version the broker advertises, the bytes are exactly what
//! `kafka-protocol` encodes for the same `FetchResponse` (response header v0 below v12, v1
//! with empty tagged fields from v12; `RECORDS` lengths as i32 below v12, `COMPACT_RECORDS`
//! as unsigned varint length + 1 from v12). The test below encodes random responses both
//! ways and compares them. Only the fields Sluice sets are written: no aborted transactions
//! (an empty array, as `kafka-protocol`'s default), no preferred read replica (-1), the last
//! stable offset equal to the high watermark (no transactions yet), no tagged fields.

use bytes::BufMut;

use sluice_log::RecordSlice;

use super::{Part, PartResult, TopicEntry};
use crate::response_chunks::ChunkedFrame;

/// First version with flexible encoding (compact arrays and strings, tagged fields, header v1).
const FLEXIBLE_FROM: i16 = 12;
/// First version with the top-level error code and session id.
const SESSION_FROM: i16 = 7;
/// First version with each partition's log start offset.
const LOG_START_FROM: i16 = 5;
/// First version with the preferred read replica.
const PREFERRED_REPLICA_FROM: i16 = 11;
/// First version that names topics by id instead of by name.
const TOPIC_ID_FROM: i16 = 13;

/// Bytes of one aborted transaction in the response, at most (producer id, first offset,
/// tagged fields).
pub(super) const ABORTED_TXN_BYTES_MAX: usize = 8 + 8 + 1;

/// Framing bytes per partition, at most: index, error, three offsets, aborted transactions
/// (empty), preferred replica, records length, tagged fields.
const PARTITION_FRAMING_BYTES_MAX: usize = 4 + 2 + 8 + 8 + 8 + 4 + 4 + 5 + 1;
/// Framing bytes per topic besides its name, at most: name length, id, partition count,
/// tagged fields.
const TOPIC_FRAMING_BYTES_MAX: usize = 5 + 16 + 5 + 1;
/// Response header and top-level fields, at most.
const TOP_FRAMING_BYTES_MAX: usize = 4 + 1 + 4 + 2 + 4 + 5 + 1;

/// The top-level fields of the response.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Top {
    pub throttle_time_ms: i32,
    pub error_code: i16,
    /// Always 0 from Sluice (no fetch sessions); must be 0 below v7, which has no field.
    pub session_id: i32,
}

/// Why a response could not be encoded (the connection is closed, as for any encode
/// failure).
#[derive(Debug, thiserror::Error)]
pub(super) enum EncodeError {
    #[error("{0} is too long for version {1}")]
    TooLong(&'static str, i16),
    #[error("session id {0} cannot be sent at version {1}")]
    SessionId(i32, i16),
    #[error(transparent)]
    Frame(#[from] crate::response_chunks::FrameTooLarge),
}

/// Upper bound of the bytes the response adds around its records, size prefix excluded:
/// `topics` with `parts` partitions in all.
pub(super) fn framing_bytes_max(topics: &[TopicEntry], parts: usize) -> usize {
    let names: usize = topics.iter().map(|t| t.name.len()).sum();
    TOP_FRAMING_BYTES_MAX
        + topics.len() * TOPIC_FRAMING_BYTES_MAX
        + names
        + parts * PARTITION_FRAMING_BYTES_MAX
}

/// Encodes the framed response into `frame`: `results` holds one entry per partition of
/// `parts`, in order, and `topics` cover `parts` in order. The records move from `results`
/// into the frame (the results keep their vectors' capacity).
pub(super) fn encode(
    frame: &mut ChunkedFrame,
    version: i16,
    correlation_id: i32,
    top: Top,
    topics: &[TopicEntry],
    parts: &[Part],
    results: &mut [PartResult],
) -> Result<(), EncodeError> {
    assert!((4..=18).contains(&version), "registry range of Fetch");
    assert_eq!(parts.len(), results.len(), "one result per partition");
    debug_assert!(
        covers(topics, parts.len()),
        "topics cover the partitions in order"
    );
    let flexible = version >= FLEXIBLE_FROM;
    frame.begin(framing_bytes_max(topics, parts.len()));
    let out = frame.own();
    out.put_i32(correlation_id);
    if flexible {
        put_tagged_fields_none(out);
    }
    out.put_i32(top.throttle_time_ms);
    if version >= SESSION_FROM {
        out.put_i16(top.error_code);
        out.put_i32(top.session_id);
    } else if top.session_id != 0 {
        return Err(EncodeError::SessionId(top.session_id, version));
    }
    put_array_len(out, flexible, topics.len(), "topics", version)?;
    for t in topics {
        let out = frame.own();
        if version < TOPIC_ID_FROM {
            put_string(out, flexible, t.name.as_bytes(), version)?;
        } else {
            out.put_slice(t.topic_id.as_bytes());
        }
        put_array_len(out, flexible, t.parts.len(), "partitions", version)?;
        for (p, r) in parts[t.parts.clone()]
            .iter()
            .zip(&mut results[t.parts.clone()])
        {
            put_partition(frame, flexible, version, p, r)?;
        }
        if flexible {
            put_tagged_fields_none(frame.own());
        }
    }
    if flexible {
        put_tagged_fields_none(frame.own());
    }
    Ok(frame.finish()?)
}

/// True when the topics' ranges run back to back from 0 to `parts`.
fn covers(topics: &[TopicEntry], parts: usize) -> bool {
    let mut at = 0;
    for t in topics {
        if t.parts.start != at {
            return false;
        }
        at = t.parts.end;
    }
    at == parts
}

/// One partition's fields, then its records spliced in as their own chunks.
fn put_partition(
    frame: &mut ChunkedFrame,
    flexible: bool,
    version: i16,
    p: &Part,
    r: &mut PartResult,
) -> Result<(), EncodeError> {
    let out = frame.own();
    out.put_i32(p.partition);
    out.put_i16(r.error_code);
    out.put_i64(r.high_watermark);
    out.put_i64(r.last_stable_offset);
    if version >= LOG_START_FROM {
        out.put_i64(r.log_start_offset);
    }
    // Aborted transactions (read_committed only; an empty, not null, array otherwise).
    put_array_len(
        out,
        flexible,
        r.aborted.len(),
        "aborted transactions",
        version,
    )?;
    for aborted in r.aborted.drain(..) {
        out.put_i64(aborted.producer_id.0);
        out.put_i64(aborted.first_offset.0);
        if flexible {
            put_tagged_fields_none(out);
        }
    }
    if version >= PREFERRED_REPLICA_FROM {
        out.put_i32(-1);
    }
    put_bytes_len(out, flexible, r.records_len, version)?;
    debug_assert_eq!(
        r.records.iter().map(RecordSlice::len).sum::<usize>(),
        r.records_len
    );
    for slice in r.records.drain(..) {
        match slice {
            RecordSlice::File(range) => frame.share_file(range),
            RecordSlice::Bytes(bytes) => frame.share(bytes),
        }
    }
    if flexible {
        put_tagged_fields_none(frame.own());
    }
    Ok(())
}

fn put_tagged_fields_none(out: &mut Vec<u8>) {
    put_unsigned_varint(out, 0);
}

/// Kafka's unsigned varint: seven bits at a time, low bits first, high bit set on all but the
/// last byte.
fn put_unsigned_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.put_u8((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// A non-null length as ARRAY (i32) or COMPACT_ARRAY (unsigned varint of length + 1).
fn put_array_len(
    out: &mut Vec<u8>,
    flexible: bool,
    len: usize,
    what: &'static str,
    version: i16,
) -> Result<(), EncodeError> {
    if flexible {
        let n = u32::try_from(len)
            .ok()
            .and_then(|n| n.checked_add(1))
            .ok_or(EncodeError::TooLong(what, version))?;
        put_unsigned_varint(out, n);
    } else {
        let n = i32::try_from(len).map_err(|_| EncodeError::TooLong(what, version))?;
        out.put_i32(n);
    }
    Ok(())
}

/// A non-null STRING (i16 length) or COMPACT_STRING.
fn put_string(
    out: &mut Vec<u8>,
    flexible: bool,
    s: &[u8],
    version: i16,
) -> Result<(), EncodeError> {
    if flexible {
        put_array_len(out, true, s.len(), "topic name", version)?;
    } else {
        let n = i16::try_from(s.len()).map_err(|_| EncodeError::TooLong("topic name", version))?;
        out.put_i16(n);
    }
    out.put_slice(s);
    Ok(())
}

/// The length of non-null RECORDS (i32) or COMPACT_RECORDS; the bytes follow as their own
/// chunk.
fn put_bytes_len(
    out: &mut Vec<u8>,
    flexible: bool,
    len: usize,
    version: i16,
) -> Result<(), EncodeError> {
    put_array_len(out, flexible, len, "records", version)
}

#[cfg(test)]
mod tests {
    use super::super::response;
    use super::*;
    use crate::handlers::test_rng::Rng;
    use bytes::BytesMut;
    use kafka_protocol::messages::{ApiKey, FetchResponse};
    use kafka_protocol::protocol::StrBytes;
    use sluice_log::FileRange;
    use sluice_protocol::frame::SIZE_PREFIX_BYTES;
    use uuid::Uuid;

    /// A file of 128 KiB patterned bytes, for records sent as file ranges.
    fn records_file() -> std::fs::File {
        let bytes: Vec<u8> = (0..128 * 1024)
            .map(|i: u32| (i * 13 + i / 256) as u8)
            .collect();
        let mut f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut f, &bytes).unwrap();
        f
    }

    /// Random records as the log returns them: bytes, a file range, or a file range
    /// followed by bytes.
    fn random_records(rng: &mut Rng, file: &std::fs::File) -> (Vec<RecordSlice>, usize) {
        let len = rng.len();
        let bytes =
            |n: usize| RecordSlice::Bytes((0..n).map(|i| i as u8).collect::<Vec<_>>().into());
        let range = |rng: &mut Rng, n: usize| {
            let position = rng.below(128 * 1024 - n as u64 + 1);
            RecordSlice::File(FileRange::standalone(
                file.try_clone().unwrap(),
                position,
                n as u32,
            ))
        };
        let slices = match (len, rng.below(3)) {
            (0, _) | (_, 0) => vec![bytes(len)],
            (_, 1) => vec![range(rng, len)],
            _ => {
                let cut = rng.below(len as u64) as usize;
                vec![range(rng, len - cut), bytes(cut)]
            }
        };
        (
            slices
                .into_iter()
                .filter(|s| !s.is_empty() || len == 0)
                .collect(),
            len,
        )
    }

    /// A random response as the handler lays it out: topics, their partitions back to
    /// back, one result per partition.
    fn random_topics(
        rng: &mut Rng,
        version: i16,
        file: &std::fs::File,
    ) -> (Vec<TopicEntry>, Vec<Part>, Vec<PartResult>) {
        let mut topics = Vec::new();
        let mut parts = Vec::new();
        let mut results = Vec::new();
        let topic_count = if rng.below(8) == 0 { 130 } else { rng.below(4) };
        for _ in 0..topic_count {
            let name_len = rng.len().min(300);
            // Multi-byte UTF-8 too: lengths are in bytes.
            let name: String = (0..name_len)
                .map(|i| if i % 7 == 3 { 'é' } else { 'a' })
                .collect();
            let part_count = if rng.below(16) == 0 {
                128
            } else {
                rng.below(5) as usize
            };
            let first = parts.len();
            for _ in 0..part_count {
                parts.push(Part {
                    key: None,
                    partition: rng.next() as i32,
                    fetch_offset: 0,
                    max_bytes: 0,
                    unknown_code: 0,
                });
                let (records, records_len) = random_records(rng, file);
                let aborted = (0..rng.next() % 3)
                    .map(|_| sluice_log::AbortedTxn {
                        producer_id: sluice_log::ProducerId(rng.i64()),
                        first_offset: sluice_log::Offset(rng.i64()),
                        last_offset: sluice_log::Offset(0),
                        last_stable_offset: sluice_log::Offset(0),
                    })
                    .collect();
                results.push(PartResult {
                    error_code: rng.next() as i16,
                    high_watermark: rng.i64(),
                    log_start_offset: rng.i64(),
                    records_len,
                    offsets_read: 0,
                    records,
                    last_stable_offset: rng.i64(),
                    aborted,
                });
            }
            // As decoded from a request of this version: names below v13, ids from v13.
            let (name, topic_id) = if version < TOPIC_ID_FROM {
                (name, Uuid::nil())
            } else {
                (String::new(), Uuid::from_u64_pair(rng.next(), rng.next()))
            };
            topics.push(TopicEntry {
                name: StrBytes::from_string(name),
                topic_id,
                parts: first..parts.len(),
            });
        }
        (topics, parts, results)
    }

    /// The reference: the `kafka-protocol` response encoded by the codec, as the old path did.
    fn reference(
        version: i16,
        correlation_id: i32,
        top: Top,
        topics: &[TopicEntry],
        parts: &[Part],
        results: Vec<PartResult>,
    ) -> Vec<u8> {
        let mut resp: FetchResponse = response(topics, parts, results);
        resp.throttle_time_ms = top.throttle_time_ms;
        resp.error_code = top.error_code;
        resp.session_id = top.session_id;
        let mut out = BytesMut::new();
        sluice_protocol::codec::encode_response(
            &mut out,
            ApiKey::Fetch,
            version,
            correlation_id,
            &resp,
        )
        .unwrap();
        out.to_vec()
    }

    // Goal: byte-for-byte the old encoding, for random responses at every advertised
    // version (records as bytes, file ranges or both; empty and large records, name and
    // count lengths across varint boundaries, negative offsets, top-level fields).
    #[test]
    fn matches_kafka_protocol_encoding_at_every_version() {
        let range = crate::handlers::table::handler(ApiKey::Fetch).unwrap().api;
        let mut rng = Rng(0x5eed_f00d_u64);
        let file = records_file();
        let mut compared = 0;
        // One frame for every response, as a connection reuses it.
        let mut frame = ChunkedFrame::default();
        for version in range.min_version..=range.max_version {
            for _ in 0..60 {
                let (topics, parts, mut results) = random_topics(&mut rng, version, &file);
                let top = Top {
                    throttle_time_ms: rng.next() as i32,
                    error_code: if version >= SESSION_FROM {
                        rng.next() as i16
                    } else {
                        0
                    },
                    session_id: if version >= SESSION_FROM {
                        rng.next() as i32
                    } else {
                        0
                    },
                };
                let cid = rng.next() as i32;
                let records_bytes: usize = results.iter().map(|r| r.records_len).sum();
                // Aborted transactions are charged with the read (`PartResult::memory_len`).
                let aborted_bytes: usize = results
                    .iter()
                    .map(|r| r.aborted.len() * ABORTED_TXN_BYTES_MAX)
                    .sum();
                let want = reference(version, cid, top, &topics, &parts, results.clone());
                encode(&mut frame, version, cid, top, &topics, &parts, &mut results).unwrap();
                assert_eq!(frame.len(), want.len(), "version {version}");
                assert!(frame.to_vec() == want, "version {version}: bytes differ");
                assert!(
                    SIZE_PREFIX_BYTES + framing_bytes_max(&topics, parts.len()) + aborted_bytes
                        >= frame.len() - records_bytes,
                    "version {version}: framing above its bound"
                );
                assert!(
                    results.iter().all(|r| r.records.is_empty()),
                    "the records moved into the frame"
                );
                compared += 1;
            }
        }
        assert_eq!(compared, 15 * 60);
    }

    // Goal: a session id below v7 (no such field) is refused, as `kafka-protocol` refuses it.
    #[test]
    fn session_id_below_v7_is_refused() {
        let top = Top {
            session_id: 5,
            ..Top::default()
        };
        assert!(matches!(
            encode(&mut ChunkedFrame::default(), 6, 1, top, &[], &[], &mut []),
            Err(EncodeError::SessionId(5, 6))
        ));
    }
}
