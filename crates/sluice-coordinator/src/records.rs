//! The records of `__consumer_offsets`: what the coordinator needs to rebuild its state after
//! a restart. Keys and values are versioned byte strings, big-endian, written and read only
//! here; the broker wraps each (key, value) pair in a Kafka record inside a v2 record batch.
//! A `None` value is a tombstone. The format is documented in `docs/coordinator.md`.
//!
//! Guarantees: `decode(encode(r)) == r` for every record whose strings fit the format's
//! i16 length (≤ 32767 bytes, as Kafka's wire strings always do; longer ones are cut at a
//! character boundary rather than written unreadable); decoding never panics on any input
//! and refuses unknown versions, truncation and trailing bytes with an error instead of
//! guessing.

use bytes::Bytes;

/// A committed offset as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// -1 when the client sent none.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// One member of a classic group, as persisted after a rebalance completes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMetadataValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's selected protocol.
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A classic group as persisted after a rebalance completes (or when it becomes empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataValue {
    pub protocol_type: String,
    pub generation_id: i32,
    /// The selected protocol; `None` when the group is empty.
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberMetadataValue>,
}

/// A KIP-848 consumer group as persisted: only its existence (the group type) and its
/// group epoch. Members are not persisted; see `docs/coordinator.md` for why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupValue {
    pub epoch: i32,
}

/// One record of the offsets log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRecord {
    /// A committed offset, or its deletion (`value: None`).
    Offset {
        group_id: String,
        topic: String,
        partition: i32,
        value: Option<OffsetValue>,
    },
    /// A group's metadata, or the group's deletion (`value: None`), which also removes
    /// every committed offset of the group that the log holds before this record.
    Group {
        group_id: String,
        value: Option<GroupMetadataValue>,
    },
    /// A KIP-848 consumer group's epoch, or (`value: None`) the end of its life as a
    /// consumer group (converted to classic). Key version 3.
    ConsumerGroup {
        group_id: String,
        value: Option<ConsumerGroupValue>,
    },
}

/// A record that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("undecodable __consumer_offsets record: {0}")]
pub struct DecodeError(pub &'static str);

// ---- format ----
//
// The layouts follow the field order Kafka documents for its own `__consumer_offsets`
// records (OffsetCommitKey / GroupMetadataKey, OffsetCommitValue v3, GroupMetadataValue v3),
// so the log reads familiarly in tools; only those versions are written or accepted.
//
// key   := i16 key_version, then
//          1 (offset key): string group_id, string topic, i32 partition
//          2 (group key):  string group_id
//          3 (consumer group key): string group_id
// value := i16 value_version (3), then
//          offset value: i64 offset, i32 leader_epoch, string metadata, i64 commit_timestamp
//          group value:  string protocol_type, i32 generation_id, nullable_string protocol,
//                        nullable_string leader, i64 current_state_timestamp,
//                        i32 count, count × member
//          consumer group value: i16 version (0), i32 epoch
// member := string member_id, nullable_string group_instance_id, string client_id,
//           string client_host, i32 rebalance_timeout, i32 session_timeout,
//           bytes subscription, bytes assignment
// string := i16 length (>= 0) + UTF-8; nullable_string: length -1 = null;
// bytes  := i32 length (>= 0) + raw bytes. Everything big-endian; no trailing bytes allowed.

/// Key version of an offset-commit key (Kafka's numbering; 0 is an older identical layout
/// that Sluice never writes).
pub const OFFSET_KEY_VERSION: i16 = 1;
/// Key version of a group-metadata key.
pub const GROUP_KEY_VERSION: i16 = 2;
/// Key version of a KIP-848 consumer group key (Kafka's `ConsumerGroupMetadataKey` is 3).
pub const CONSUMER_GROUP_KEY_VERSION: i16 = 3;
/// The only consumer group value version written and read.
pub const CONSUMER_GROUP_VALUE_VERSION: i16 = 0;
/// The only offset value version written and read.
pub const OFFSET_VALUE_VERSION: i16 = 3;
/// The only group value version written and read.
pub const GROUP_VALUE_VERSION: i16 = 3;

/// Longest string the format carries (i16 length prefix). Kafka's wire strings have the same
/// limit, so only a misconfigured `offset_metadata_bytes_max` could reach it; the
/// coordinator refuses longer metadata before a record is ever built.
pub const MAX_STRING_BYTES: usize = i16::MAX as usize;

struct Writer(Vec<u8>);

impl Writer {
    fn i16(&mut self, v: i16) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_be_bytes());
    }
    /// Strings longer than the format allows are cut at a char boundary rather than
    /// producing a record that cannot be read back (unreachable for wire-sourced strings).
    fn string(&mut self, s: &str) {
        let mut end = s.len().min(MAX_STRING_BYTES);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.i16(end as i16);
        self.0.extend_from_slice(&s.as_bytes()[..end]);
    }
    fn nullable_string(&mut self, s: Option<&str>) {
        match s {
            Some(s) => self.string(s),
            None => self.i16(-1),
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        let len = b.len().min(i32::MAX as usize);
        self.i32(len as i32);
        self.0.extend_from_slice(&b[..len]);
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i16(&mut self) -> Result<i16, DecodeError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn nullable_string(&mut self) -> Result<Option<String>, DecodeError> {
        let len = self.i16()?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 {
            return Err(DecodeError("negative string length"));
        }
        let raw = self.take(len as usize)?;
        let s = std::str::from_utf8(raw).map_err(|_| DecodeError("string is not UTF-8"))?;
        Ok(Some(s.to_owned()))
    }
    fn string(&mut self) -> Result<String, DecodeError> {
        self.nullable_string()?
            .ok_or(DecodeError("null where a string is required"))
    }
    fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let len = self.i32()?;
        if len < 0 {
            return Err(DecodeError("negative bytes length"));
        }
        Ok(Bytes::copy_from_slice(self.take(len as usize)?))
    }
    fn finish(&self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

/// Smallest encoded member: four strings, two i32s, two bytes fields, all empty/null.
const MIN_MEMBER_BYTES: usize = 2 * 4 + 4 * 2 + 4 * 2;

impl StoreRecord {
    /// The record's key bytes.
    pub fn encode_key(&self) -> Vec<u8> {
        let mut w = Writer(Vec::with_capacity(64));
        match self {
            StoreRecord::Offset {
                group_id,
                topic,
                partition,
                ..
            } => {
                w.i16(OFFSET_KEY_VERSION);
                w.string(group_id);
                w.string(topic);
                w.i32(*partition);
            }
            StoreRecord::Group { group_id, .. } => {
                w.i16(GROUP_KEY_VERSION);
                w.string(group_id);
            }
            StoreRecord::ConsumerGroup { group_id, .. } => {
                w.i16(CONSUMER_GROUP_KEY_VERSION);
                w.string(group_id);
            }
        }
        w.0
    }

    /// The record's value bytes; `None` for a tombstone.
    pub fn encode_value(&self) -> Option<Vec<u8>> {
        match self {
            StoreRecord::Offset { value, .. } => {
                let v = value.as_ref()?;
                let mut w = Writer(Vec::with_capacity(32 + v.metadata.len()));
                w.i16(OFFSET_VALUE_VERSION);
                w.i64(v.offset);
                w.i32(v.leader_epoch);
                w.string(&v.metadata);
                w.i64(v.commit_timestamp_ms);
                Some(w.0)
            }
            StoreRecord::Group { value, .. } => {
                let g = value.as_ref()?;
                let mut w = Writer(Vec::with_capacity(64 + 64 * g.members.len()));
                w.i16(GROUP_VALUE_VERSION);
                w.string(&g.protocol_type);
                w.i32(g.generation_id);
                w.nullable_string(g.protocol_name.as_deref());
                w.nullable_string(g.leader.as_deref());
                w.i64(g.current_state_timestamp_ms);
                w.i32(g.members.len().min(i32::MAX as usize) as i32);
                for m in &g.members {
                    w.string(&m.member_id);
                    w.nullable_string(m.group_instance_id.as_deref());
                    w.string(&m.client_id);
                    w.string(&m.client_host);
                    w.i32(m.rebalance_timeout_ms);
                    w.i32(m.session_timeout_ms);
                    w.bytes(&m.subscription);
                    w.bytes(&m.assignment);
                }
                Some(w.0)
            }
            StoreRecord::ConsumerGroup { value, .. } => {
                let v = value.as_ref()?;
                let mut w = Writer(Vec::with_capacity(6));
                w.i16(CONSUMER_GROUP_VALUE_VERSION);
                w.i32(v.epoch);
                Some(w.0)
            }
        }
    }

    /// Decodes a key and an optional value read back from the log.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<StoreRecord, DecodeError> {
        let mut k = Reader(key);
        match k.i16()? {
            OFFSET_KEY_VERSION => {
                let group_id = k.string()?;
                let topic = k.string()?;
                let partition = k.i32()?;
                k.finish()?;
                let value = value.map(decode_offset_value).transpose()?;
                Ok(StoreRecord::Offset {
                    group_id,
                    topic,
                    partition,
                    value,
                })
            }
            GROUP_KEY_VERSION => {
                let group_id = k.string()?;
                k.finish()?;
                let value = value.map(decode_group_value).transpose()?;
                Ok(StoreRecord::Group { group_id, value })
            }
            CONSUMER_GROUP_KEY_VERSION => {
                let group_id = k.string()?;
                k.finish()?;
                let value = value.map(decode_consumer_group_value).transpose()?;
                Ok(StoreRecord::ConsumerGroup { group_id, value })
            }
            _ => Err(DecodeError("unknown key version")),
        }
    }

    /// The group this record belongs to.
    pub fn group_id(&self) -> &str {
        match self {
            StoreRecord::Offset { group_id, .. }
            | StoreRecord::Group { group_id, .. }
            | StoreRecord::ConsumerGroup { group_id, .. } => group_id,
        }
    }
}

fn decode_offset_value(bytes: &[u8]) -> Result<OffsetValue, DecodeError> {
    let mut r = Reader(bytes);
    if r.i16()? != OFFSET_VALUE_VERSION {
        return Err(DecodeError("unknown offset value version"));
    }
    let v = OffsetValue {
        offset: r.i64()?,
        leader_epoch: r.i32()?,
        metadata: r.string()?,
        commit_timestamp_ms: r.i64()?,
    };
    r.finish()?;
    Ok(v)
}

fn decode_consumer_group_value(bytes: &[u8]) -> Result<ConsumerGroupValue, DecodeError> {
    let mut r = Reader(bytes);
    if r.i16()? != CONSUMER_GROUP_VALUE_VERSION {
        return Err(DecodeError("unknown consumer group value version"));
    }
    let v = ConsumerGroupValue { epoch: r.i32()? };
    r.finish()?;
    Ok(v)
}

fn decode_group_value(bytes: &[u8]) -> Result<GroupMetadataValue, DecodeError> {
    let mut r = Reader(bytes);
    if r.i16()? != GROUP_VALUE_VERSION {
        return Err(DecodeError("unknown group value version"));
    }
    let protocol_type = r.string()?;
    let generation_id = r.i32()?;
    let protocol_name = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let current_state_timestamp_ms = r.i64()?;
    let count = r.i32()?;
    if count < 0 {
        return Err(DecodeError("negative member count"));
    }
    // A hostile count must not make us allocate: every member takes at least
    // MIN_MEMBER_BYTES, so a count the remaining bytes cannot hold is refused up front.
    let count = count as usize;
    if count > r.0.len() / MIN_MEMBER_BYTES {
        return Err(DecodeError("member count exceeds the value's size"));
    }
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        members.push(MemberMetadataValue {
            member_id: r.string()?,
            group_instance_id: r.nullable_string()?,
            client_id: r.string()?,
            client_host: r.string()?,
            rebalance_timeout_ms: r.i32()?,
            session_timeout_ms: r.i32()?,
            subscription: r.bytes()?,
            assignment: r.bytes()?,
        });
    }
    r.finish()?;
    Ok(GroupMetadataValue {
        protocol_type,
        generation_id,
        protocol_name,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(i: u8, instance: bool) -> MemberMetadataValue {
        MemberMetadataValue {
            member_id: format!("client-{i}-0123"),
            group_instance_id: instance.then(|| format!("instance-{i}")),
            client_id: format!("client-{i}"),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 300_000,
            session_timeout_ms: 45_000,
            subscription: Bytes::from(vec![i; i as usize]),
            assignment: Bytes::from(vec![i ^ 0xff; 3]),
        }
    }

    fn samples() -> Vec<StoreRecord> {
        vec![
            StoreRecord::Offset {
                group_id: "g".into(),
                topic: "orders".into(),
                partition: 7,
                value: Some(OffsetValue {
                    offset: 42,
                    leader_epoch: -1,
                    metadata: "ünïcode".into(),
                    commit_timestamp_ms: 1_700_000_000_000,
                }),
            },
            StoreRecord::Offset {
                group_id: "g".into(),
                topic: "orders".into(),
                partition: 0,
                value: None,
            },
            StoreRecord::Group {
                group_id: "".into(),
                value: None,
            },
            StoreRecord::Group {
                group_id: "g".into(),
                value: Some(GroupMetadataValue {
                    protocol_type: "consumer".into(),
                    generation_id: 3,
                    protocol_name: Some("range".into()),
                    leader: Some("client-1-0123".into()),
                    current_state_timestamp_ms: 99,
                    members: vec![member(1, false), member(2, true), member(0, true)],
                }),
            },
            StoreRecord::ConsumerGroup {
                group_id: "cg".into(),
                value: Some(ConsumerGroupValue { epoch: 17 }),
            },
            StoreRecord::ConsumerGroup {
                group_id: "cg".into(),
                value: None,
            },
            StoreRecord::Group {
                group_id: "empty".into(),
                value: Some(GroupMetadataValue {
                    protocol_type: String::new(),
                    generation_id: 0,
                    protocol_name: None,
                    leader: None,
                    current_state_timestamp_ms: 0,
                    members: vec![],
                }),
            },
        ]
    }

    // Goal: every record survives encode → decode unchanged.
    #[test]
    fn round_trip() {
        for r in samples() {
            let key = r.encode_key();
            let value = r.encode_value();
            assert_eq!(StoreRecord::decode(&key, value.as_deref()).unwrap(), r);
        }
    }

    // Goal: offset keys and group keys of the same group never collide.
    #[test]
    fn keys_are_distinct_by_type() {
        let o = StoreRecord::Offset {
            group_id: "g".into(),
            topic: String::new(),
            partition: 0,
            value: None,
        };
        let g = StoreRecord::Group {
            group_id: "g".into(),
            value: None,
        };
        assert_ne!(o.encode_key(), g.encode_key());
        assert_eq!(&o.encode_key()[..2], &OFFSET_KEY_VERSION.to_be_bytes());
        assert_eq!(&g.encode_key()[..2], &GROUP_KEY_VERSION.to_be_bytes());
    }

    // Goal: unknown key or value versions are refused, not guessed at.
    #[test]
    fn unknown_versions_are_refused() {
        let r = &samples()[0];
        let mut key = r.encode_key();
        key[1] = 9;
        assert!(StoreRecord::decode(&key, None).is_err());
        let key = r.encode_key();
        let mut value = r.encode_value().unwrap();
        value[1] = 4;
        assert!(StoreRecord::decode(&key, Some(&value)).is_err());
        let g = &samples()[3];
        let mut value = g.encode_value().unwrap();
        value[1] = 2;
        assert!(StoreRecord::decode(&g.encode_key(), Some(&value)).is_err());
    }

    // Goal: a hostile member count cannot trigger a huge allocation or a panic.
    #[test]
    fn huge_member_count_is_refused() {
        let g = StoreRecord::Group {
            group_id: "g".into(),
            value: Some(GroupMetadataValue {
                protocol_type: "consumer".into(),
                generation_id: 1,
                protocol_name: None,
                leader: None,
                current_state_timestamp_ms: 0,
                members: vec![],
            }),
        };
        let mut value = g.encode_value().unwrap();
        let n = value.len();
        value[n - 4..].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(StoreRecord::decode(&g.encode_key(), Some(&value)).is_err());
    }

    // Goal: over-long strings are cut so that the record still decodes.
    #[test]
    fn over_long_string_still_decodes() {
        let r = StoreRecord::Offset {
            group_id: "g".into(),
            topic: "t".into(),
            partition: 0,
            value: Some(OffsetValue {
                offset: 1,
                leader_epoch: 0,
                metadata: "é".repeat(MAX_STRING_BYTES),
                commit_timestamp_ms: 0,
            }),
        };
        let back = StoreRecord::decode(&r.encode_key(), r.encode_value().as_deref()).unwrap();
        match back {
            StoreRecord::Offset { value: Some(v), .. } => {
                assert!(v.metadata.len() <= MAX_STRING_BYTES);
                assert!(v.metadata.chars().all(|c| c == 'é'));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    // Goal: decode never panics: every truncation and many random mutations of valid
    // records, plus random byte strings, either decode or return an error.
    #[test]
    fn decode_never_panics() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for r in samples() {
            let key = r.encode_key();
            let value = r.encode_value();
            for cut in 0..key.len() {
                assert!(StoreRecord::decode(&key[..cut], value.as_deref()).is_err());
            }
            if let Some(v) = &value {
                for cut in 0..v.len() {
                    assert!(StoreRecord::decode(&key, Some(&v[..cut])).is_err());
                }
                for _ in 0..2_000 {
                    let mut m = v.clone();
                    let flips = 1 + rand() % 4;
                    for _ in 0..flips {
                        let i = (rand() as usize) % m.len();
                        m[i] = rand() as u8;
                    }
                    let _ = StoreRecord::decode(&key, Some(&m));
                }
            }
        }
        for _ in 0..20_000 {
            let klen = (rand() % 24) as usize;
            let vlen = (rand() % 64) as usize;
            let mut key: Vec<u8> = (0..klen).map(|_| rand() as u8).collect();
            if klen >= 2 && rand() % 2 == 0 {
                key[0] = 0;
                key[1] = 1 + (rand() % 3) as u8;
            }
            let mut val: Vec<u8> = (0..vlen).map(|_| rand() as u8).collect();
            if vlen >= 2 && rand() % 2 == 0 {
                val[0] = 0;
                val[1] = 3;
            }
            let _ = StoreRecord::decode(&key, Some(&val));
            let _ = StoreRecord::decode(&key, None);
        }
    }
}
