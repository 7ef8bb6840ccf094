//! The records of `__transaction_state` (docs/transactions.md §3): one per change of a
//! transactional id's state, in Kafka's layout (`TransactionLogKey` v0,
//! `TransactionLogValue` v0 and v1), so `kafka-dump-log --transaction-log-decoder` reads
//! them. A `None` value is a tombstone: the transactional id is removed.
//!
//! Values are written at v1, the flexible version Kafka writes once `transaction.version`
//! is finalized at 1 or more: its tagged fields carry what Transactions V2 needs across a
//! restart (the producer id taken at epoch exhaustion, the previous producer id, the
//! client's transaction version). v0 values, all that Sluice wrote before Transactions V2,
//! still load, with those fields at their defaults.
//!
//! Guarantees: `decode(encode(r)) == r` for every record whose strings fit the format's i16
//! length (Kafka's wire strings always do; the coordinator refuses longer transactional
//! ids); decoding never panics and never allocates ahead of the bytes it has: every count
//! is checked against the bytes left before anything is reserved, and unknown versions,
//! unknown states, truncation and trailing bytes are errors, never guesses.

use crate::coordinator::TopicPartition;
use crate::records::MAX_STRING_BYTES;

/// Key version (Kafka's `TransactionLogKey` has only version 0).
pub const TXN_KEY_VERSION: i16 = 0;
/// Value version written (v1, flexible); v0 is read too.
pub const TXN_VALUE_VERSION: i16 = 1;
/// The first flexible value version (compact strings and arrays, tagged fields).
const FLEXIBLE_VALUE_VERSION: i16 = 1;

/// The tags of `TransactionLogValue` v1's tagged fields (Kafka's schema).
const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;

/// "No producer id", the default of the producer-id tagged fields.
const NO_PRODUCER_ID: i64 = -1;

/// A transaction's state (Kafka's `TransactionState`, with its wire ids).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnStatus {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    Dead,
    PrepareEpochFence,
}

impl TxnStatus {
    pub fn id(self) -> i8 {
        match self {
            TxnStatus::Empty => 0,
            TxnStatus::Ongoing => 1,
            TxnStatus::PrepareCommit => 2,
            TxnStatus::PrepareAbort => 3,
            TxnStatus::CompleteCommit => 4,
            TxnStatus::CompleteAbort => 5,
            TxnStatus::Dead => 6,
            TxnStatus::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<Self> {
        Some(match id {
            0 => TxnStatus::Empty,
            1 => TxnStatus::Ongoing,
            2 => TxnStatus::PrepareCommit,
            3 => TxnStatus::PrepareAbort,
            4 => TxnStatus::CompleteCommit,
            5 => TxnStatus::CompleteAbort,
            6 => TxnStatus::Dead,
            7 => TxnStatus::PrepareEpochFence,
            _ => return None,
        })
    }

    /// Kafka's state names, as DescribeTransactions and ListTransactions use them.
    pub fn name(self) -> &'static str {
        match self {
            TxnStatus::Empty => "Empty",
            TxnStatus::Ongoing => "Ongoing",
            TxnStatus::PrepareCommit => "PrepareCommit",
            TxnStatus::PrepareAbort => "PrepareAbort",
            TxnStatus::CompleteCommit => "CompleteCommit",
            TxnStatus::CompleteAbort => "CompleteAbort",
            TxnStatus::Dead => "Dead",
            TxnStatus::PrepareEpochFence => "PrepareEpochFence",
        }
    }
}

/// The value of a `__transaction_state` record: a transactional id's whole state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnValue {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub transaction_timeout_ms: i32,
    pub status: TxnStatus,
    /// Sorted, without duplicates. Written as a null array when empty, as Kafka does.
    pub partitions: Vec<TopicPartition>,
    pub last_update_timestamp_ms: i64,
    /// -1 when no transaction has started.
    pub start_timestamp_ms: i64,
    /// The producer id before the current one (-1: none), kept for a retry of the request
    /// that moved the id to a new producer id. v1 only (v0 reads -1).
    pub previous_producer_id: i64,
    /// The producer id a decided Transactions V2 transaction moves to once complete,
    /// because its epoch is exhausted (-1: none). v1 only.
    pub next_producer_id: i64,
    /// The transaction version of the client's transaction (0-1: V1, 2: V2; Kafka's
    /// `ClientTransactionVersion`). v1 only (v0 reads 0).
    pub client_transaction_version: i16,
}

/// One record of `__transaction_state`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnRecord {
    pub transactional_id: String,
    /// `None`: a tombstone (the id expired).
    pub value: Option<TxnValue>,
}

/// A record that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("undecodable __transaction_state record: {0}")]
pub struct TxnDecodeError(pub &'static str);

// key      := i16 version (0), string transactional_id
// value v0 := i16 version (0), i64 producer_id, i16 producer_epoch, i32 transaction_timeout_ms,
//             i8 transaction_status, i32 topic count (-1 = null), count × (string topic,
//             i32 partition count, count × i32), i64 last_update_ms, i64 start_ms
// value v1 := the same fields, but the partitions are a compact nullable array (count + 1
//             as an unsigned varint, 0 = null) of (compact string topic, compact array of
//             i32, tagged fields), then the value's tagged fields: count, and per field its
//             tag, size and bytes (0: previous producer id i64, 1: next producer id i64,
//             2: client transaction version i16, 3: next producer epoch i16, never written)
// string := i16 length (>= 0) + UTF-8; compact string := length + 1 as an unsigned varint
// + UTF-8. Big-endian; no trailing bytes.

fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_STRING_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as i16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

fn put_uvarint(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A compact string: its length + 1 as an unsigned varint, then UTF-8.
fn put_compact_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_STRING_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    put_uvarint(out, end as u32 + 1);
    out.extend_from_slice(&s.as_bytes()[..end]);
}

/// The partitions as a compact array of (topic, compact array of ids, no tagged fields).
fn put_partitions_compact(out: &mut Vec<u8>, partitions: &[TopicPartition]) {
    let topics = group_by_topic(partitions);
    put_uvarint(out, topics.len() as u32 + 1);
    for (topic, ids) in topics {
        put_compact_string(out, topic);
        put_uvarint(out, ids.len() as u32 + 1);
        for id in ids {
            out.extend_from_slice(&id.to_be_bytes());
        }
        put_uvarint(out, 0);
    }
}

/// The value's tagged fields, in tag order; a field at its default is left out, as
/// Kafka's generated code does.
fn put_value_tags(out: &mut Vec<u8>, v: &TxnValue) {
    let mut fields: Vec<(u32, Vec<u8>)> = Vec::with_capacity(3);
    if v.previous_producer_id != NO_PRODUCER_ID {
        let bytes = v.previous_producer_id.to_be_bytes().to_vec();
        fields.push((TAG_PREVIOUS_PRODUCER_ID, bytes));
    }
    if v.next_producer_id != NO_PRODUCER_ID {
        fields.push((
            TAG_NEXT_PRODUCER_ID,
            v.next_producer_id.to_be_bytes().to_vec(),
        ));
    }
    if v.client_transaction_version != 0 {
        let bytes = v.client_transaction_version.to_be_bytes().to_vec();
        fields.push((TAG_CLIENT_TRANSACTION_VERSION, bytes));
    }
    put_uvarint(out, fields.len() as u32);
    for (tag, bytes) in fields {
        put_uvarint(out, tag);
        put_uvarint(out, bytes.len() as u32);
        out.extend_from_slice(&bytes);
    }
}

impl TxnRecord {
    pub fn encode_key(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.transactional_id.len());
        out.extend_from_slice(&TXN_KEY_VERSION.to_be_bytes());
        put_string(&mut out, &self.transactional_id);
        out
    }

    /// The value bytes (v1); `None` for a tombstone.
    pub fn encode_value(&self) -> Option<Vec<u8>> {
        let v = self.value.as_ref()?;
        let mut out = Vec::with_capacity(48 + 16 * v.partitions.len());
        out.extend_from_slice(&TXN_VALUE_VERSION.to_be_bytes());
        out.extend_from_slice(&v.producer_id.to_be_bytes());
        out.extend_from_slice(&v.producer_epoch.to_be_bytes());
        out.extend_from_slice(&v.transaction_timeout_ms.to_be_bytes());
        out.push(v.status.id() as u8);
        // Kafka writes a null array for Empty (which never has partitions), an array for
        // the other states, empty ones included.
        match (v.status, v.partitions.is_empty()) {
            (TxnStatus::Empty, true) => put_uvarint(&mut out, 0),
            _ => put_partitions_compact(&mut out, &v.partitions),
        }
        out.extend_from_slice(&v.last_update_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&v.start_timestamp_ms.to_be_bytes());
        put_value_tags(&mut out, v);
        Some(out)
    }

    /// Decodes a key and an optional value read back from the log.
    pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<TxnRecord, TxnDecodeError> {
        let mut k = Reader(key);
        if k.i16()? != TXN_KEY_VERSION {
            return Err(TxnDecodeError("unknown key version"));
        }
        let transactional_id = k.string()?;
        k.finish()?;
        let value = value.map(decode_value).transpose()?;
        Ok(TxnRecord {
            transactional_id,
            value,
        })
    }
}

/// Sorted partitions, grouped by topic (consecutive runs of one topic).
fn group_by_topic(partitions: &[TopicPartition]) -> Vec<(&str, Vec<i32>)> {
    let mut topics: Vec<(&str, Vec<i32>)> = Vec::new();
    for tp in partitions {
        match topics.last_mut() {
            Some((topic, ids)) if *topic == tp.topic => ids.push(tp.partition),
            _ => topics.push((&tp.topic, vec![tp.partition])),
        }
    }
    topics
}

fn decode_value(bytes: &[u8]) -> Result<TxnValue, TxnDecodeError> {
    let mut r = Reader(bytes);
    let version = r.i16()?;
    if !(0..=TXN_VALUE_VERSION).contains(&version) {
        return Err(TxnDecodeError("unknown value version"));
    }
    let flexible = version >= FLEXIBLE_VALUE_VERSION;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let transaction_timeout_ms = r.i32()?;
    let status = TxnStatus::from_id(r.i8()?).ok_or(TxnDecodeError("unknown status"))?;
    let mut partitions = match flexible {
        true => r.partitions_compact()?,
        false => r.partitions()?,
    };
    let last_update_timestamp_ms = r.i64()?;
    let start_timestamp_ms = r.i64()?;
    let mut value = TxnValue {
        producer_id,
        producer_epoch,
        transaction_timeout_ms,
        status,
        partitions: Vec::new(),
        last_update_timestamp_ms,
        start_timestamp_ms,
        previous_producer_id: NO_PRODUCER_ID,
        next_producer_id: NO_PRODUCER_ID,
        client_transaction_version: 0,
    };
    if flexible {
        r.value_tags(&mut value)?;
    }
    r.finish()?;
    partitions.sort();
    partitions.dedup();
    value.partitions = partitions;
    Ok(value)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TxnDecodeError> {
        if self.0.len() < n {
            return Err(TxnDecodeError("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn i8(&mut self) -> Result<i8, TxnDecodeError> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i16(&mut self) -> Result<i16, TxnDecodeError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Result<i32, TxnDecodeError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, TxnDecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_be_bytes(a))
    }
    fn string(&mut self) -> Result<String, TxnDecodeError> {
        let len = self.i16()?;
        if len < 0 {
            return Err(TxnDecodeError("null or negative string length"));
        }
        let raw = self.take(len as usize)?;
        let s = std::str::from_utf8(raw).map_err(|_| TxnDecodeError("string is not UTF-8"))?;
        Ok(s.to_owned())
    }
    fn uvarint(&mut self) -> Result<u32, TxnDecodeError> {
        let mut n = 0u32;
        for shift in (0..35).step_by(7) {
            let b = self.take(1)?[0];
            n |= u32::from(b & 0x7f).checked_shl(shift).unwrap_or(0);
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(TxnDecodeError("varint longer than five bytes"))
    }

    /// v0's partitions: an i32 topic count (-1 = null), each topic a string and an i32
    /// count of i32 ids.
    fn partitions(&mut self) -> Result<Vec<TopicPartition>, TxnDecodeError> {
        let topics = self.i32()?;
        if topics < -1 {
            return Err(TxnDecodeError("negative topic count"));
        }
        let mut partitions = Vec::new();
        for _ in 0..topics.max(0) {
            // The smallest topic entry is 6 bytes: a count beyond what is left fails here,
            // before anything is reserved for it.
            if self.0.len() < 6 {
                return Err(TxnDecodeError("truncated"));
            }
            let topic = self.string()?;
            let count = self.i32()?;
            self.partition_ids(&topic, count.try_into().ok(), &mut partitions)?;
        }
        Ok(partitions)
    }

    /// v1's partitions: compact arrays and strings (length + 1 as a varint, 0 = null),
    /// and each topic entry ends with its (empty or skipped) tagged fields.
    fn partitions_compact(&mut self) -> Result<Vec<TopicPartition>, TxnDecodeError> {
        let topics = self.uvarint()?;
        let mut partitions = Vec::new();
        for _ in 0..topics.saturating_sub(1) {
            // The smallest topic entry is 3 bytes (empty name, no ids, no tags).
            if self.0.len() < 3 {
                return Err(TxnDecodeError("truncated"));
            }
            let topic = self.compact_string()?;
            let count = self.uvarint()?.checked_sub(1);
            self.partition_ids(&topic, count.map(|c| c as usize), &mut partitions)?;
            self.skip_tags()?;
        }
        Ok(partitions)
    }

    /// `count` i32 partition ids of `topic` (`None`: a null or negative count, refused).
    fn partition_ids(
        &mut self,
        topic: &str,
        count: Option<usize>,
        out: &mut Vec<TopicPartition>,
    ) -> Result<(), TxnDecodeError> {
        let count = count.ok_or(TxnDecodeError("bad partition count"))?;
        if count.saturating_mul(4) > self.0.len() {
            return Err(TxnDecodeError("bad partition count"));
        }
        out.reserve(count);
        for _ in 0..count {
            out.push(TopicPartition {
                topic: topic.to_owned(),
                partition: self.i32()?,
            });
        }
        Ok(())
    }

    fn compact_string(&mut self) -> Result<String, TxnDecodeError> {
        let len = self.uvarint()?.checked_sub(1);
        let len = len.ok_or(TxnDecodeError("null string"))? as usize;
        let raw = self.take(len)?;
        let s = std::str::from_utf8(raw).map_err(|_| TxnDecodeError("string is not UTF-8"))?;
        Ok(s.to_owned())
    }

    /// Tagged fields this decoder does not use: skipped by their sizes.
    fn skip_tags(&mut self) -> Result<(), TxnDecodeError> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Ok(())
    }

    /// The value's tagged fields into `v`; unknown tags (NextProducerEpoch, later ones)
    /// are skipped, as Kafka's generated code does.
    fn value_tags(&mut self, v: &mut TxnValue) -> Result<(), TxnDecodeError> {
        for _ in 0..self.uvarint()? {
            let tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            let mut field = Reader(self.take(size)?);
            match tag {
                TAG_PREVIOUS_PRODUCER_ID => v.previous_producer_id = field.i64()?,
                TAG_NEXT_PRODUCER_ID => v.next_producer_id = field.i64()?,
                TAG_CLIENT_TRANSACTION_VERSION => v.client_transaction_version = field.i16()?,
                _ => continue,
            }
            field.finish()?;
        }
        Ok(())
    }

    fn finish(&self) -> Result<(), TxnDecodeError> {
        match self.0.is_empty() {
            true => Ok(()),
            false => Err(TxnDecodeError("trailing bytes")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    fn value(status: TxnStatus, partitions: Vec<TopicPartition>) -> TxnValue {
        TxnValue {
            producer_id: 4_000,
            producer_epoch: 7,
            transaction_timeout_ms: 60_000,
            status,
            partitions,
            last_update_timestamp_ms: 1_700_000_000_123,
            start_timestamp_ms: 1_700_000_000_000,
            previous_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            client_transaction_version: 0,
        }
    }

    /// A value with every v1 tagged field away from its default.
    fn value_v2(status: TxnStatus, partitions: Vec<TopicPartition>) -> TxnValue {
        TxnValue {
            previous_producer_id: 3_999,
            next_producer_id: 4_001,
            client_transaction_version: 2,
            ..value(status, partitions)
        }
    }

    #[test]
    fn records_round_trip() {
        // Goal: every status, with and without partitions (null array), and a tombstone
        // decode to what was encoded.
        let partitions = vec![tp("a", 0), tp("a", 3), tp("b", 1), tp("é", 2)];
        for id in 0..8 {
            let status = TxnStatus::from_id(id).expect("status");
            assert_eq!(status.id(), id);
            let cases = [
                value(status, Vec::new()),
                value(status, partitions.clone()),
                value_v2(status, partitions.clone()),
            ];
            for v in cases {
                let record = TxnRecord {
                    transactional_id: "txn-1".into(),
                    value: Some(v),
                };
                let key = record.encode_key();
                let bytes = record.encode_value().expect("value");
                assert_eq!(TxnRecord::decode(&key, Some(&bytes)), Ok(record));
            }
        }
        let tombstone = TxnRecord {
            transactional_id: "gone".into(),
            value: None,
        };
        assert_eq!(tombstone.encode_value(), None);
        assert_eq!(
            TxnRecord::decode(&tombstone.encode_key(), None),
            Ok(tombstone)
        );
    }

    /// Kafka's v0 value bytes (what Sluice wrote before Transactions V2), by hand.
    fn v0_bytes(v: &TxnValue, topic: &[u8], partition: i32) -> Vec<u8> {
        let mut bytes = vec![0, 0];
        bytes.extend_from_slice(&v.producer_id.to_be_bytes());
        bytes.extend_from_slice(&v.producer_epoch.to_be_bytes());
        bytes.extend_from_slice(&v.transaction_timeout_ms.to_be_bytes());
        bytes.push(v.status.id() as u8);
        bytes.extend_from_slice(&1i32.to_be_bytes());
        bytes.extend_from_slice(&(topic.len() as i16).to_be_bytes());
        bytes.extend_from_slice(topic);
        bytes.extend_from_slice(&1i32.to_be_bytes());
        bytes.extend_from_slice(&partition.to_be_bytes());
        bytes.extend_from_slice(&v.last_update_timestamp_ms.to_be_bytes());
        bytes.extend_from_slice(&v.start_timestamp_ms.to_be_bytes());
        bytes
    }

    #[test]
    fn v0_records_written_before_transactions_v2_still_load() {
        // Goal: the v0 layout (TransactionLogValue v0, field by field) decodes, with the
        // v1-only fields at their defaults, so a data dir from before Transactions V2 loads.
        let v = value(TxnStatus::Ongoing, vec![tp("x", 5)]);
        let bytes = v0_bytes(&v, b"x", 5);
        let key = vec![0, 0, 0, 1, b't'];
        let decoded = TxnRecord::decode(&key, Some(&bytes)).expect("v0 decodes");
        assert_eq!(decoded.transactional_id, "t");
        assert_eq!(decoded.value, Some(v));
    }

    #[test]
    fn the_v1_layout_is_kafkas() {
        // Goal: the bytes follow TransactionLogValue v1 (flexible) field by field, tagged
        // fields in tag order and left out at their defaults.
        let record = TxnRecord {
            transactional_id: "t".into(),
            value: Some(value_v2(TxnStatus::Ongoing, vec![tp("x", 5)])),
        };
        assert_eq!(record.encode_key(), vec![0, 0, 0, 1, b't']);
        let v = record.encode_value().expect("value");
        let mut expected = vec![0, 1];
        expected.extend_from_slice(&4_000i64.to_be_bytes());
        expected.extend_from_slice(&7i16.to_be_bytes());
        expected.extend_from_slice(&60_000i32.to_be_bytes());
        expected.push(1);
        expected.extend_from_slice(&[2, 2, b'x', 2]);
        expected.extend_from_slice(&5i32.to_be_bytes());
        expected.push(0);
        expected.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        expected.extend_from_slice(&[3, 0, 8]);
        expected.extend_from_slice(&3_999i64.to_be_bytes());
        expected.extend_from_slice(&[1, 8]);
        expected.extend_from_slice(&4_001i64.to_be_bytes());
        expected.extend_from_slice(&[2, 2, 0, 2]);
        assert_eq!(v, expected);
        // Empty: a null array and, at the defaults, no tagged fields.
        let empty = TxnRecord {
            transactional_id: "t".into(),
            value: Some(value(TxnStatus::Empty, Vec::new())),
        };
        let bytes = empty.encode_value().expect("value");
        assert_eq!(bytes[17], 0, "null partitions");
        assert_eq!(bytes.last(), Some(&0), "no tagged fields");
        // An unknown tag (a later Kafka's) is skipped.
        let mut later = bytes.clone();
        *later.last_mut().expect("tags") = 1;
        later.extend_from_slice(&[9, 2, 0xab, 0xcd]);
        assert_eq!(
            TxnRecord::decode(&empty.encode_key(), Some(&later)),
            Ok(empty)
        );
    }

    #[test]
    fn hostile_and_damaged_records_are_refused() {
        // Goal: huge counts, unknown versions and states, truncation at every length and
        // trailing bytes are errors, never panics or large allocations, in v0 and v1.
        let v = value_v2(TxnStatus::Ongoing, vec![tp("x", 5), tp("y", 6)]);
        let record = TxnRecord {
            transactional_id: "t".into(),
            value: Some(v.clone()),
        };
        let key = record.encode_key();
        let v1 = record.encode_value().expect("value");
        let v0 = v0_bytes(&value(TxnStatus::Ongoing, Vec::new()), b"x", 5);
        for bytes in [&v0, &v1] {
            for cut in 0..bytes.len() {
                assert!(
                    TxnRecord::decode(&key, Some(&bytes[..cut])).is_err(),
                    "cut {cut}"
                );
            }
            let mut trailing = bytes.clone();
            trailing.push(0);
            assert!(TxnRecord::decode(&key, Some(&trailing)).is_err());
            let mut status = bytes.clone();
            status[16] = 8;
            assert!(TxnRecord::decode(&key, Some(&status)).is_err());
            let mut version = bytes.clone();
            version[1] = 2;
            assert!(TxnRecord::decode(&key, Some(&version)).is_err());
        }
        let mut huge_topics = v0.clone();
        huge_topics[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(TxnRecord::decode(&key, Some(&huge_topics)).is_err());
        let mut huge_partitions = v0.clone();
        huge_partitions[24..28].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(TxnRecord::decode(&key, Some(&huge_partitions)).is_err());
        // v1: a topic count of 2^28 and a partition count of 2^28, as varints.
        let mut huge_compact = v1.clone();
        huge_compact.splice(17..18, [0x80, 0x80, 0x80, 0x80, 0x01]);
        assert!(TxnRecord::decode(&key, Some(&huge_compact)).is_err());
        let mut huge_ids = v1.clone();
        huge_ids.splice(20..21, [0x80, 0x80, 0x80, 0x80, 0x01]);
        assert!(TxnRecord::decode(&key, Some(&huge_ids)).is_err());
        let mut long_varint = v1.clone();
        long_varint.splice(17..18, [0xff; 6]);
        assert!(TxnRecord::decode(&key, Some(&long_varint)).is_err());
        assert!(TxnRecord::decode(&[0, 1, 0, 1, b't'], Some(&v1)).is_err());
        assert!(TxnRecord::decode(&[0, 0, 0xff, 0xff], None).is_err());
        assert!(TxnRecord::decode(&[0, 0, 0, 2, 0xff, 0xfe], None).is_err());
    }
}
