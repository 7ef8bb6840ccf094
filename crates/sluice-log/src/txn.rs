//! Transactions in the log (docs/transactions.md §6): the control batches that end a
//! transaction (COMMIT / ABORT markers), the aborted-transaction entries that Fetch with
//! `read_committed` hands to clients, and the isolation level of a read.
//!
//! Guarantees: a marker batch built here is a well-formed v2 batch (CRC-32C valid, one
//! control record, base sequence -1) in exactly the layout Kafka writes, so every client
//! reads it; parsing a control record never panics and never reads past the bytes given
//! (markers are only ever written by the log itself, but recovery reads them back from
//! disk, where they may be damaged). Entries are Kafka's `.txnindex` entries (34 bytes).

use crate::batch::{self, Attributes, BatchFields};
use crate::types::{Offset, ProducerEpoch, ProducerId};

/// Which way a transaction ended: the `type` field of a control record's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControlType {
    Abort,
    Commit,
}

impl ControlType {
    fn code(self) -> i16 {
        match self {
            ControlType::Abort => 0,
            ControlType::Commit => 1,
        }
    }

    fn from_code(code: i16) -> Option<Self> {
        match code {
            0 => Some(ControlType::Abort),
            1 => Some(ControlType::Commit),
            _ => None,
        }
    }
}

/// How far a read may go: the high watermark (`read_uncommitted`, Kafka's isolation level
/// 0) or the last stable offset (`read_committed`, level 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    #[default]
    ReadUncommitted,
    ReadCommitted,
}

/// Bytes of the control record after the batch header that [`control_type`] needs at
/// most: the record's length, attributes, timestamp and offset deltas and key length (five
/// varints of up to 5 bytes each, as written by any Kafka broker) and the 4-byte key.
pub(crate) const CONTROL_KEY_BYTES_MAX: usize = 5 * 5 + 4;

/// The coordinator epoch written in every marker's value. Sluice has one coordinator and
/// no coordinator epochs (docs/transactions.md §12).
pub(crate) const COORDINATOR_EPOCH: i32 = 0;

fn put_varint(out: &mut Vec<u8>, value: i64) {
    let mut zigzag = ((value << 1) ^ (value >> 63)) as u64;
    while zigzag >= 0x80 {
        out.push((zigzag as u8) | 0x80);
        zigzag >>= 7;
    }
    out.push(zigzag as u8);
}

/// Reads a zigzag varint of at most 5 bytes (Kafka's `varint`, an i32) at `*at`.
fn get_varint(bytes: &[u8], at: &mut usize) -> Option<i64> {
    let mut value: u64 = 0;
    for shift in 0..5 {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << (7 * shift);
        if byte & 0x80 == 0 {
            return Some(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    None
}

/// The control batch that ends producer `producer_id`'s transaction at `producer_epoch`:
/// attributes transactional | control, one record whose key is (version 0, type) and
/// whose value is (version 0, coordinator epoch), base sequence -1, both timestamps
/// `timestamp_ms`. Its base offset (0 here) is stamped by the committer like any batch.
pub fn marker_batch(
    producer_id: ProducerId,
    producer_epoch: ProducerEpoch,
    control: ControlType,
    timestamp_ms: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&control.code().to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&COORDINATOR_EPOCH.to_be_bytes());
    let mut body = Vec::with_capacity(24);
    body.push(0); // record attributes
    put_varint(&mut body, 0); // timestamp delta
    put_varint(&mut body, 0); // offset delta
    put_varint(&mut body, key.len() as i64);
    body.extend_from_slice(&key);
    put_varint(&mut body, value.len() as i64);
    body.extend_from_slice(&value);
    put_varint(&mut body, 0); // no headers
    let mut record = Vec::with_capacity(body.len() + 1);
    put_varint(&mut record, body.len() as i64);
    record.extend_from_slice(&body);

    // Base offset 0 and leader epoch 0: the committer stamps the offset like any batch's.
    let out = BatchFields {
        attributes: Attributes::TRANSACTIONAL.with(Attributes::CONTROL),
        last_offset_delta: 0,
        base_timestamp: timestamp_ms,
        max_timestamp: timestamp_ms,
        producer_id,
        producer_epoch,
        records_count: 1,
        ..BatchFields::default()
    }
    .to_batch(&record);
    debug_assert!(batch::validate(&out, u32::MAX).is_ok_and(|h| h.is_control()));
    out
}

/// The marker type of a control batch, given the bytes after its 61-byte header (at least
/// the first [`CONTROL_KEY_BYTES_MAX`] of them, or all there are). `None` when the bytes do
/// not hold a control record key of version 0 with a known type (Kafka skips unknown
/// control types too).
pub fn control_type(after_header: &[u8]) -> Option<ControlType> {
    let mut at = 0;
    let _record_len = get_varint(after_header, &mut at)?;
    at += 1; // record attributes
    let _timestamp_delta = get_varint(after_header, &mut at)?;
    let _offset_delta = get_varint(after_header, &mut at)?;
    if get_varint(after_header, &mut at)? < 4 {
        return None;
    }
    let key = after_header.get(at..at + 4)?;
    let version = i16::from_be_bytes([key[0], key[1]]);
    let code = i16::from_be_bytes([key[2], key[3]]);
    (version == 0).then(|| ControlType::from_code(code))?
}

/// One aborted transaction of a partition (an entry of Kafka's `.txnindex`): the
/// producer's data from `first_offset` up to its ABORT marker at `last_offset` is to be
/// skipped by `read_committed` consumers. `last_stable_offset` is the partition's LSO just
/// after the marker was placed; it ends a query early (see [`collect_aborted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: ProducerId,
    pub first_offset: Offset,
    pub last_offset: Offset,
    pub last_stable_offset: Offset,
}

/// One producer a partition knows, as DescribeProducers (KIP-664) reports it: what its
/// producer-state entry holds (docs/transactions.md §7.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    pub producer_id: ProducerId,
    pub epoch: ProducerEpoch,
    /// The last sequence of its newest cached batch; -1 when none is cached (a producer
    /// known only from a marker or a verification).
    pub last_sequence: i32,
    /// The max timestamp of its newest cached batch; -1 when none is cached.
    pub last_timestamp_ms: i64,
    /// The first offset of its open transaction here, if any.
    pub current_txn_start_offset: Option<Offset>,
    /// The coordinator epoch of its newest marker here; None before its first marker
    /// (Kafka reports -1 then).
    pub coordinator_epoch: Option<i32>,
}

/// Encoded size of an [`AbortedTxn`] (Kafka's `.txnindex` entry).
pub(crate) const ABORTED_TXN_BYTES: usize = 2 + 8 + 8 + 8 + 8;

impl AbortedTxn {
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&0i16.to_be_bytes());
        out.extend_from_slice(&self.producer_id.0.to_be_bytes());
        out.extend_from_slice(&self.first_offset.0.to_be_bytes());
        out.extend_from_slice(&self.last_offset.0.to_be_bytes());
        out.extend_from_slice(&self.last_stable_offset.0.to_be_bytes());
    }

    /// Decodes one entry; `None` for a short slice, an unknown version or offsets out of
    /// order (a damaged entry is never used).
    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let bytes = bytes.get(..ABORTED_TXN_BYTES)?;
        let i64_at = |at: usize| {
            let mut raw = [0u8; 8];
            raw.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(raw)
        };
        if i16::from_be_bytes([bytes[0], bytes[1]]) != 0 {
            return None;
        }
        let entry = Self {
            producer_id: ProducerId(i64_at(2)),
            first_offset: Offset(i64_at(10)),
            last_offset: Offset(i64_at(18)),
            last_stable_offset: Offset(i64_at(26)),
        };
        // The LSO after a marker may be below it (another transaction still open), but a
        // transaction's data always precedes its marker.
        let ordered = entry.producer_id.is_idempotent()
            && 0 <= entry.first_offset.0
            && entry.first_offset < entry.last_offset
            && 0 <= entry.last_stable_offset.0;
        ordered.then_some(entry)
    }
}

/// Appends to `out` the aborted transactions a fetch returning offsets `[from, end)` must
/// report: those with data in the range (`first_offset < end`) whose marker is at or after
/// `from`. `entries` are in marker order. Kafka's `collectAbortedTxns`: the scan starts at
/// the first marker at or after `from` and stops after the first entry whose
/// `last_stable_offset` reaches `end`, since a later marker can only close a transaction
/// that started after `end` (an earlier start would have held the LSO below `end`).
pub fn collect_aborted(
    entries: &[AbortedTxn],
    from: Offset,
    end: Offset,
    out: &mut Vec<AbortedTxn>,
) {
    let start = entries.partition_point(|e| e.last_offset < from);
    for entry in &entries[start..] {
        if entry.first_offset < end {
            out.push(*entry);
        }
        if entry.last_stable_offset >= end {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::HEADER_LEN;

    #[test]
    fn marker_batches_are_valid_and_read_back() {
        // Goal: a marker is one valid control record batch whose key names its type.
        for control in [ControlType::Abort, ControlType::Commit] {
            let bytes = marker_batch(ProducerId(7), ProducerEpoch(3), control, 1_000);
            let header = batch::validate(&bytes, 1 << 20).expect("valid batch");
            assert!(header.is_control() && header.is_transactional());
            assert_eq!(header.records_count(), 1);
            assert_eq!(header.base_sequence(), -1);
            assert_eq!((header.producer_id().0, header.producer_epoch().0), (7, 3));
            assert_eq!(control_type(&bytes[HEADER_LEN..]), Some(control));
        }
    }

    #[test]
    fn damaged_control_records_give_none() {
        // Goal: short, unknown-version or unknown-type keys give None, never a panic.
        let bytes = marker_batch(ProducerId(1), ProducerEpoch(0), ControlType::Commit, 0);
        let record = &bytes[HEADER_LEN..];
        // Length, attributes, two deltas and the key length take a byte each here.
        for cut in 0..9 {
            assert_eq!(control_type(&record[..cut]), None, "cut at {cut}");
        }
        let mut unknown = record.to_vec();
        unknown[8] = 9; // type 9
        assert_eq!(control_type(&unknown), None);
        let mut version = record.to_vec();
        version[6] = 1;
        assert_eq!(control_type(&version), None);
        assert_eq!(control_type(&[0xff; 12]), None);
    }

    #[test]
    fn aborted_entries_round_trip_and_refuse_damage() {
        // Goal: 34-byte entries decode to what was encoded; broken ones decode to None.
        let entry = AbortedTxn {
            producer_id: ProducerId(5),
            first_offset: Offset(10),
            last_offset: Offset(20),
            last_stable_offset: Offset(21),
        };
        let mut bytes = Vec::new();
        entry.encode(&mut bytes);
        assert_eq!(bytes.len(), ABORTED_TXN_BYTES);
        assert_eq!(AbortedTxn::decode(&bytes), Some(entry));
        assert_eq!(AbortedTxn::decode(&bytes[..33]), None);
        let mut version = bytes.clone();
        version[1] = 1;
        assert_eq!(AbortedTxn::decode(&version), None);
        let mut disordered = bytes.clone();
        disordered[10..18].copy_from_slice(&20i64.to_be_bytes());
        assert_eq!(AbortedTxn::decode(&disordered), None);
    }

    #[test]
    fn aborted_query_returns_overlapping_entries_and_stops_early() {
        // Goal: the query returns exactly the transactions overlapping [from, end) whose
        // marker is at or after from, and stops at the first entry whose LSO reaches end.
        let e = |pid, first, last, lso| AbortedTxn {
            producer_id: ProducerId(pid),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(lso),
        };
        let entries = [
            e(1, 0, 5, 3),
            e(2, 3, 9, 10),
            e(3, 12, 15, 16),
            e(4, 20, 25, 26),
        ];
        let query = |from, end| {
            let mut out = Vec::new();
            collect_aborted(&entries, Offset(from), Offset(end), &mut out);
            out.iter().map(|e| e.producer_id.0).collect::<Vec<_>>()
        };
        assert_eq!(query(0, 30), vec![1, 2, 3, 4]);
        assert_eq!(query(6, 12), vec![2]);
        assert_eq!(query(6, 13), vec![2, 3]);
        assert_eq!(query(16, 20), Vec::<i64>::new());
        assert_eq!(query(26, 40), Vec::<i64>::new());
        assert_eq!(query(4, 5), vec![1, 2]);
    }
}
