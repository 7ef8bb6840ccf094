//! The records of `__transaction_state` (docs/transactions.md §3): one per change of a
//! transactional id's state, in Kafka's layout (`TransactionLogKey` v0,
//! `TransactionLogValue` v0), so `kafka-dump-log --transaction-log-decoder` reads them. A
//! `None` value is a tombstone: the transactional id is removed.
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
/// Value version written and read (v1 is the flexible form of Transactions V2, not served).
pub const TXN_VALUE_VERSION: i16 = 0;

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

// key   := i16 version (0), string transactional_id
// value := i16 version (0), i64 producer_id, i16 producer_epoch, i32 transaction_timeout_ms,
//          i8 transaction_status, i32 topic count (-1 = null), count × (string topic,
//          i32 partition count, count × i32), i64 last_update_ms, i64 start_ms
// string := i16 length (>= 0) + UTF-8. Big-endian; no trailing bytes.

fn put_string(out: &mut Vec<u8>, s: &str) {
    let mut end = s.len().min(MAX_STRING_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as i16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..end]);
}

impl TxnRecord {
    pub fn encode_key(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.transactional_id.len());
        out.extend_from_slice(&TXN_KEY_VERSION.to_be_bytes());
        put_string(&mut out, &self.transactional_id);
        out
    }

    /// The value bytes; `None` for a tombstone.
    pub fn encode_value(&self) -> Option<Vec<u8>> {
        let v = self.value.as_ref()?;
        let mut out = Vec::with_capacity(40 + 16 * v.partitions.len());
        out.extend_from_slice(&TXN_VALUE_VERSION.to_be_bytes());
        out.extend_from_slice(&v.producer_id.to_be_bytes());
        out.extend_from_slice(&v.producer_epoch.to_be_bytes());
        out.extend_from_slice(&v.transaction_timeout_ms.to_be_bytes());
        out.push(v.status.id() as u8);
        let topics = group_by_topic(&v.partitions);
        match topics.len() {
            0 => out.extend_from_slice(&(-1i32).to_be_bytes()),
            n => out.extend_from_slice(&(n.min(i32::MAX as usize) as i32).to_be_bytes()),
        }
        for (topic, partitions) in topics {
            put_string(&mut out, topic);
            out.extend_from_slice(&(partitions.len() as i32).to_be_bytes());
            for partition in partitions {
                out.extend_from_slice(&partition.to_be_bytes());
            }
        }
        out.extend_from_slice(&v.last_update_timestamp_ms.to_be_bytes());
        out.extend_from_slice(&v.start_timestamp_ms.to_be_bytes());
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
    if r.i16()? != TXN_VALUE_VERSION {
        return Err(TxnDecodeError("unknown value version"));
    }
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let transaction_timeout_ms = r.i32()?;
    let status = TxnStatus::from_id(r.i8()?).ok_or(TxnDecodeError("unknown status"))?;
    let topics = r.i32()?;
    let mut partitions = Vec::new();
    if topics < -1 {
        return Err(TxnDecodeError("negative topic count"));
    }
    for _ in 0..topics.max(0) {
        // The smallest topic entry is 6 bytes: a count beyond what is left fails here,
        // before anything is reserved for it.
        if r.0.len() < 6 {
            return Err(TxnDecodeError("truncated"));
        }
        let topic = r.string()?;
        let count = r.i32()?;
        if count < 0 || (count as usize).saturating_mul(4) > r.0.len() {
            return Err(TxnDecodeError("bad partition count"));
        }
        partitions.reserve(count as usize);
        for _ in 0..count {
            partitions.push(TopicPartition {
                topic: topic.clone(),
                partition: r.i32()?,
            });
        }
    }
    let last_update_timestamp_ms = r.i64()?;
    let start_timestamp_ms = r.i64()?;
    r.finish()?;
    partitions.sort();
    partitions.dedup();
    Ok(TxnValue {
        producer_id,
        producer_epoch,
        transaction_timeout_ms,
        status,
        partitions,
        last_update_timestamp_ms,
        start_timestamp_ms,
    })
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
            for parts in [Vec::new(), partitions.clone()] {
                let record = TxnRecord {
                    transactional_id: "txn-1".into(),
                    value: Some(value(status, parts)),
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

    #[test]
    fn the_layout_is_kafkas() {
        // Goal: the bytes follow TransactionLogKey/Value v0 field by field.
        let record = TxnRecord {
            transactional_id: "t".into(),
            value: Some(value(TxnStatus::Ongoing, vec![tp("x", 5)])),
        };
        assert_eq!(record.encode_key(), vec![0, 0, 0, 1, b't']);
        let v = record.encode_value().expect("value");
        let mut expected = vec![0, 0];
        expected.extend_from_slice(&4_000i64.to_be_bytes());
        expected.extend_from_slice(&7i16.to_be_bytes());
        expected.extend_from_slice(&60_000i32.to_be_bytes());
        expected.push(1);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'x']);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&5i32.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        expected.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        assert_eq!(v, expected);
    }

    #[test]
    fn hostile_and_damaged_records_are_refused() {
        // Goal: huge counts, unknown versions and states, truncation at every length and
        // trailing bytes are errors, never panics or large allocations.
        let record = TxnRecord {
            transactional_id: "t".into(),
            value: Some(value(TxnStatus::Ongoing, vec![tp("x", 5), tp("y", 6)])),
        };
        let key = record.encode_key();
        let bytes = record.encode_value().expect("value");
        for cut in 0..bytes.len() {
            assert!(
                TxnRecord::decode(&key, Some(&bytes[..cut])).is_err(),
                "cut {cut}"
            );
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(TxnRecord::decode(&key, Some(&trailing)).is_err());
        let mut huge_topics = bytes.clone();
        huge_topics[17..21].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(TxnRecord::decode(&key, Some(&huge_topics)).is_err());
        let mut huge_partitions = bytes.clone();
        huge_partitions[24..28].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(TxnRecord::decode(&key, Some(&huge_partitions)).is_err());
        let mut status = bytes.clone();
        status[16] = 8;
        assert!(TxnRecord::decode(&key, Some(&status)).is_err());
        let mut version = bytes.clone();
        version[1] = 1;
        assert!(TxnRecord::decode(&key, Some(&version)).is_err());
        assert!(TxnRecord::decode(&[0, 1, 0, 1, b't'], Some(&bytes)).is_err());
        assert!(TxnRecord::decode(&[0, 0, 0xff, 0xff], None).is_err());
        assert!(TxnRecord::decode(&[0, 0, 0, 2, 0xff, 0xfe], None).is_err());
    }
}
