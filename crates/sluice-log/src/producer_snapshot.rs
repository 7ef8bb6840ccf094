//! The producer snapshot file, `<partition dir>/<offset:020>.snapshot` (Kafka's name): a
//! partition's producer state as of log end offset `offset`.
//!
//! Layout (big-endian), written atomically (tmp file, fsync, rename, fsync dir):
//!
//! | bytes | field |
//! |-------|-------|
//! | 8     | magic `SLUICEPS` |
//! | 2     | version (3; versions 1 and 2 still load) |
//! | 2     | flags (0) |
//! | 16    | topic id |
//! | 4     | partition i32 |
//! | 8     | offset i64: the log end offset the state is as of |
//! | 4     | producer count N |
//! | ...   | N entries, least recently active first |
//! | 4     | aborted transaction count A (version 2) |
//! | ...   | A aborted transactions in marker order, 34 bytes each (`txn::AbortedTxn`, Kafka's `.txnindex` entry) (version 2) |
//! | 4     | CRC-32C of every byte before it |
//!
//! Entry: producer id i64, producer epoch i16, last activity ms i64, (version 2:) first
//! offset of the open transaction i64 (-1: none), (version 3:) coordinator epoch of the
//! producer's newest marker i32 (-1: none yet), batch count u8 (1..=5; version 2 also
//! 0, for a producer known only from a marker or a verification), then per cached batch,
//! oldest first: first sequence i32, last sequence i32, first offset i64, last offset
//! i64, timestamp i64.
//!
//! The aborted transactions ride in the snapshot rather than in per-segment `.txnindex`
//! files (docs/transactions.md §6.3): the snapshot is already written atomically, only
//! once every batch below its offset is durable, and rebuilt by the recovery walk above
//! its offset, which is exactly what the index needs. Retention trims them with the log
//! start (`ProducerStateTable::trim_aborted`).
//!
//! Guarantees: a file is written only once every batch below its offset is durable (see
//! `checkpointer`), so a snapshot never describes a batch recovery could lose. A damaged
//! file, or one naming another partition (a stale write into a re-created directory),
//! decodes to `None` and is never half-used.

use crate::config::PRODUCER_BATCHES_CACHED_MAX;
use crate::producer_state::{BatchMetadata, ProducerEntry, ProducerStateTable};
use crate::txn::{AbortedTxn, ABORTED_TXN_BYTES};
use crate::types::{Offset, ProducerEpoch, ProducerId, TopicId};

const MAGIC: &[u8; 8] = b"SLUICEPS";
const VERSION: u16 = 3;
/// Files of this version (before DescribeProducers' coordinator epoch) still load, with
/// no coordinator epoch known (-1) until the producer's next marker.
const VERSION_2: u16 = 2;
/// Files of this version (before transactions) still load, with no transaction open.
const VERSION_1: u16 = 1;
const HEADER_LEN: usize = 8 + 2 + 2 + 16 + 4 + 8 + 4;
const ENTRY_FIXED_LEN: usize = 8 + 2 + 8 + 8 + 4 + 1;
const BATCH_LEN: usize = 4 + 4 + 8 + 8 + 8;
const CRC_LEN: usize = 4;

pub(crate) const SUFFIX: &str = ".snapshot";

/// `<offset:020>.snapshot`, zero-padded so that `ls` sorts snapshots by offset.
pub(crate) fn file_name(offset: Offset) -> String {
    format!("{:020}{SUFFIX}", offset.0)
}

/// The offset of a snapshot file name, or `None` for any other name.
pub(crate) fn parse_file_name(name: &str) -> Option<Offset> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().map(Offset)
}

/// Encodes `table` as the state of partition (`topic_id`, `partition`) at `offset`.
pub(crate) fn encode(
    table: &ProducerStateTable,
    topic_id: TopicId,
    partition: i32,
    offset: Offset,
) -> Vec<u8> {
    let entries_len = table.len() * (ENTRY_FIXED_LEN + PRODUCER_BATCHES_CACHED_MAX * BATCH_LEN);
    let aborted_len = 4 + table.aborted().len() * ABORTED_TXN_BYTES;
    let mut out = Vec::with_capacity(HEADER_LEN + entries_len + aborted_len + CRC_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&topic_id.0);
    out.extend_from_slice(&partition.to_be_bytes());
    out.extend_from_slice(&offset.0.to_be_bytes());
    // The table is bounded by a u32 slot count, so the count fits.
    out.extend_from_slice(&(table.len() as u32).to_be_bytes());
    for (producer_id, entry) in table.by_activity() {
        out.extend_from_slice(&producer_id.0.to_be_bytes());
        out.extend_from_slice(&entry.epoch.0.to_be_bytes());
        out.extend_from_slice(&entry.last_activity_ms.to_be_bytes());
        let open = entry.current_txn_first_offset.map_or(-1, |o| o.0);
        out.extend_from_slice(&open.to_be_bytes());
        out.extend_from_slice(&entry.coordinator_epoch.unwrap_or(-1).to_be_bytes());
        let count = entry.batches().count();
        out.push(count as u8); // <= PRODUCER_BATCHES_CACHED_MAX <= 255
        for batch in entry.batches() {
            out.extend_from_slice(&batch.first_seq.to_be_bytes());
            out.extend_from_slice(&batch.last_seq.to_be_bytes());
            out.extend_from_slice(&batch.first_offset.0.to_be_bytes());
            out.extend_from_slice(&batch.last_offset.0.to_be_bytes());
            out.extend_from_slice(&batch.timestamp_ms.to_be_bytes());
        }
    }
    // Bounded by the log's size (one per ABORT marker of at least 70 bytes), so it fits.
    out.extend_from_slice(&(table.aborted().len() as u32).to_be_bytes());
    for aborted in table.aborted() {
        aborted.encode(&mut out);
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// Decodes a snapshot of partition (`topic_id`, `partition`) into a table bounded by
/// `producer_ids_max`. Returns the snapshot's offset and the table, or `None` when the
/// file is damaged, of another version, or of another partition.
pub(crate) fn decode(
    data: &[u8],
    topic_id: TopicId,
    partition: i32,
    producer_ids_max: usize,
) -> Option<(Offset, ProducerStateTable)> {
    if data.len() < HEADER_LEN + CRC_LEN || &data[..8] != MAGIC {
        return None;
    }
    let (body, crc) = data.split_at(data.len() - CRC_LEN);
    if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
        return None;
    }
    let mut r = Reader { data: body, at: 8 };
    let version = r.u16()?;
    if !(VERSION_1..=VERSION).contains(&version) || r.u16()? != 0 {
        return None;
    }
    if TopicId(r.bytes::<16>()?) != topic_id || r.i32()? != partition {
        return None;
    }
    let offset = Offset(r.i64()?);
    let count = r.u32()?;
    let mut table = ProducerStateTable::new(producer_ids_max);
    for _ in 0..count {
        let (producer_id, entry) = decode_entry(&mut r, version)?;
        table.insert_loaded(producer_id, entry);
    }
    if version >= VERSION_2 {
        let aborted = r.u32()?;
        let mut previous: Option<Offset> = None;
        for _ in 0..aborted {
            // Each entry is read (and checked) before the next: a hostile count fails at
            // the end of the bytes, never allocates ahead.
            let entry = AbortedTxn::decode(r.slice(ABORTED_TXN_BYTES)?)?;
            if previous.is_some_and(|p| p >= entry.last_offset) || entry.last_offset >= offset {
                return None;
            }
            previous = Some(entry.last_offset);
            table.push_loaded_aborted(entry);
        }
    }
    (r.at == body.len()).then_some((offset, table))
}

fn decode_entry(r: &mut Reader<'_>, version: u16) -> Option<(ProducerId, ProducerEntry)> {
    let producer_id = ProducerId(r.i64()?);
    let epoch = ProducerEpoch(r.i16()?);
    let last_activity_ms = r.i64()?;
    let open = match version {
        VERSION_1 => -1,
        _ => r.i64()?,
    };
    let coordinator_epoch = match version {
        VERSION_1 | VERSION_2 => -1,
        _ => r.i32()?,
    };
    let count = usize::from(r.bytes::<1>()?[0]);
    let count_min = usize::from(version == VERSION_1);
    if !producer_id.is_idempotent() || count < count_min || count > PRODUCER_BATCHES_CACHED_MAX {
        return None;
    }
    if open < -1 || coordinator_epoch < -1 {
        return None;
    }
    let mut entry = ProducerEntry::new(epoch, last_activity_ms);
    entry.current_txn_first_offset = (open >= 0).then_some(Offset(open));
    entry.coordinator_epoch = (coordinator_epoch >= 0).then_some(coordinator_epoch);
    for _ in 0..count {
        entry.push(BatchMetadata {
            first_seq: r.i32()?,
            last_seq: r.i32()?,
            first_offset: Offset(r.i64()?),
            last_offset: Offset(r.i64()?),
            timestamp_ms: r.i64()?,
        });
    }
    Some((producer_id, entry))
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn slice(&mut self, len: usize) -> Option<&'a [u8]> {
        let slice = self.data.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(slice)
    }
    fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let slice = self.data.get(self.at..self.at.checked_add(N)?)?;
        self.at += N;
        slice.try_into().ok()
    }
    fn u16(&mut self) -> Option<u16> {
        self.bytes::<2>().map(u16::from_be_bytes)
    }
    fn i16(&mut self) -> Option<i16> {
        self.bytes::<2>().map(i16::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.bytes::<4>().map(u32::from_be_bytes)
    }
    fn i32(&mut self) -> Option<i32> {
        self.bytes::<4>().map(i32::from_be_bytes)
    }
    fn i64(&mut self) -> Option<i64> {
        self.bytes::<8>().map(i64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::producer_state::{increment_sequence, ProducerBatch, Room};

    fn table_with(producers: i64, batches: i32) -> ProducerStateTable {
        let mut table = ProducerStateTable::new(100);
        let mut offset = 0;
        for round in 0..batches {
            for id in 0..producers {
                let batch = ProducerBatch {
                    producer_id: ProducerId(id * 1000),
                    epoch: ProducerEpoch(id as i16),
                    first_seq: round * 3,
                    last_seq: increment_sequence(round * 3, 2),
                    transactional: false,
                };
                let written = BatchMetadata {
                    first_seq: batch.first_seq,
                    last_seq: batch.last_seq,
                    first_offset: Offset(offset),
                    last_offset: Offset(offset + 2),
                    timestamp_ms: 1_700_000_000_000 + offset,
                };
                table.record(&batch, written, 5_000 + offset);
                offset += 3;
            }
        }
        table
    }

    fn contents(table: &ProducerStateTable) -> Vec<(ProducerId, ProducerEntry)> {
        table.by_activity().map(|(id, e)| (id, e.clone())).collect()
    }

    #[test]
    fn snapshot_round_trips_in_activity_order() {
        // Goal: a decoded snapshot holds the same producers, epochs, cached batches (ring
        // wrapped: 7 batches written, 5 kept) and activity order as the encoded table.
        let table = table_with(4, 7);
        let topic = TopicId([9; 16]);
        let bytes = encode(&table, topic, 3, Offset(84));
        let (offset, decoded) = decode(&bytes, topic, 3, 100).expect("decodes");
        assert_eq!(offset, Offset(84));
        assert_eq!(contents(&decoded), contents(&table));
        let entry = decoded.get(ProducerId(2000)).expect("producer 2000");
        assert_eq!(entry.batches().count(), PRODUCER_BATCHES_CACHED_MAX);
        assert_eq!(entry.newest_batch().expect("newest").first_seq, 18);
        let empty = encode(&ProducerStateTable::new(5), topic, 3, Offset(0));
        assert!(decode(&empty, topic, 3, 5).expect("empty").1.is_empty());
    }

    #[test]
    fn damaged_or_foreign_snapshots_are_refused() {
        // Goal: any flipped byte, a cut tail, another topic id or partition all give None.
        let table = table_with(2, 2);
        let topic = TopicId([1; 16]);
        let bytes = encode(&table, topic, 0, Offset(12));
        for at in [0, 9, 20, 40, 60, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x10;
            assert!(decode(&damaged, topic, 0, 100).is_none(), "flip at {at}");
        }
        assert!(decode(&bytes[..bytes.len() - 3], topic, 0, 100).is_none());
        assert!(decode(&bytes, TopicId([2; 16]), 0, 100).is_none());
        assert!(decode(&bytes, topic, 1, 100).is_none());
    }

    #[test]
    fn loading_into_a_smaller_bound_keeps_the_most_recent() {
        // Goal: a snapshot with more producers than the configured bound keeps the most
        // recently active ones.
        let table = table_with(5, 1);
        let topic = TopicId([1; 16]);
        let bytes = encode(&table, topic, 0, Offset(15));
        let (_, decoded) = decode(&bytes, topic, 0, 2).expect("decodes");
        let ids: Vec<i64> = decoded.by_activity().map(|(id, _)| id.0).collect();
        assert_eq!(ids, vec![3000, 4000]);
    }

    #[test]
    fn file_names_sort_by_offset() {
        // Goal: names are 20-digit offsets; anything else is not a snapshot.
        assert_eq!(file_name(Offset(42)), "00000000000000000042.snapshot");
        assert_eq!(parse_file_name(&file_name(Offset(42))), Some(Offset(42)));
        assert_eq!(parse_file_name("42.snapshot"), None);
        assert_eq!(parse_file_name("00000000000000000042.snapshot.tmp"), None);
        assert_eq!(parse_file_name("00000000000000000042.log"), None);
    }
    #[test]
    fn version_2_keeps_open_transactions_and_aborted_ones() {
        // Goal: an open transaction's first offset, an entry with no batches (known from
        // a marker) and the aborted transactions survive a round trip; a hostile aborted
        // count or an entry beyond the snapshot's offset makes the file unusable.
        use crate::txn::ControlType;
        let mut table = ProducerStateTable::new(10);
        let mut undo = Vec::new();
        for id in [1, 2] {
            table
                .verify_txn(
                    (ProducerId(id), ProducerEpoch(0), false),
                    Room::new(5, 1),
                    &mut undo,
                )
                .expect("verified");
            let batch = ProducerBatch {
                producer_id: ProducerId(id),
                epoch: ProducerEpoch(0),
                first_seq: 0,
                last_seq: 0,
                transactional: true,
            };
            let at = Offset(id * 10);
            let written = BatchMetadata {
                first_seq: 0,
                last_seq: 0,
                first_offset: at,
                last_offset: at,
                timestamp_ms: 1,
            };
            table.record(&batch, written, 5);
        }
        table.record_marker(
            ProducerId(1),
            ProducerEpoch(0),
            ControlType::Abort,
            Offset(30),
            6,
        );
        table.record_marker(
            ProducerId(7),
            ProducerEpoch(2),
            ControlType::Commit,
            Offset(31),
            6,
        );
        let topic = TopicId([3; 16]);
        let bytes = encode(&table, topic, 0, Offset(32));
        let (_, decoded) = decode(&bytes, topic, 0, 10).expect("decodes");
        assert_eq!(contents(&decoded), contents(&table));
        assert_eq!(decoded.first_unstable_offset(), Some(Offset(20)));
        assert_eq!(decoded.aborted(), table.aborted());
        assert_eq!(
            decoded
                .get(ProducerId(7))
                .expect("marker-only")
                .batches()
                .count(),
            0
        );
        // Version 3: the coordinator epoch of a producer's newest marker (DescribeProducers)
        // survives; a producer without a marker has none.
        assert_eq!(
            decoded.get(ProducerId(1)).map(|e| e.coordinator_epoch),
            Some(Some(crate::txn::COORDINATOR_EPOCH))
        );
        assert_eq!(
            decoded.get(ProducerId(2)).map(|e| e.coordinator_epoch),
            Some(None)
        );
        // A snapshot as of offset 30 cannot name a marker at 30.
        assert!(decode(&encode(&table, topic, 0, Offset(30)), topic, 0, 10).is_none());
        // A huge aborted count runs out of bytes instead of allocating.
        let count_at = bytes.len() - CRC_LEN - 4 - ABORTED_TXN_BYTES;
        let mut hostile = bytes[..count_at].to_vec();
        hostile.extend_from_slice(&u32::MAX.to_be_bytes());
        let crc = crc32c::crc32c(&hostile);
        hostile.extend_from_slice(&crc.to_be_bytes());
        assert!(decode(&hostile, topic, 0, 10).is_none());
    }

    #[test]
    fn version_2_files_still_load_without_a_coordinator_epoch() {
        // Goal: a snapshot written before snapshot v3 (no coordinator epoch per entry)
        // loads; its producers report no coordinator epoch until their next marker.
        let topic = TopicId([5; 16]);
        let mut v2 = Vec::new();
        v2.extend_from_slice(MAGIC);
        v2.extend_from_slice(&2u16.to_be_bytes());
        v2.extend_from_slice(&0u16.to_be_bytes());
        v2.extend_from_slice(&topic.0);
        v2.extend_from_slice(&0i32.to_be_bytes());
        v2.extend_from_slice(&9i64.to_be_bytes());
        v2.extend_from_slice(&1u32.to_be_bytes());
        v2.extend_from_slice(&42i64.to_be_bytes()); // producer id
        v2.extend_from_slice(&3i16.to_be_bytes()); // epoch
        v2.extend_from_slice(&77i64.to_be_bytes()); // last activity
        v2.extend_from_slice(&5i64.to_be_bytes()); // open transaction at 5
        v2.push(0); // no batches
        v2.extend_from_slice(&0u32.to_be_bytes()); // no aborted transactions
        let crc = crc32c::crc32c(&v2);
        v2.extend_from_slice(&crc.to_be_bytes());
        let (_, table) = decode(&v2, topic, 0, 10).expect("version 2 decodes");
        let entry = table.get(ProducerId(42)).expect("entry");
        assert_eq!(entry.current_txn_first_offset, Some(Offset(5)));
        assert_eq!(entry.coordinator_epoch, None);
    }

    #[test]
    fn version_1_files_still_load() {
        // Goal: a snapshot written before transactions (version 1: no open-transaction
        // field, no aborted list) loads with no transaction open.
        let topic = TopicId([4; 16]);
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.extend_from_slice(&1u16.to_be_bytes());
        v1.extend_from_slice(&0u16.to_be_bytes());
        v1.extend_from_slice(&topic.0);
        v1.extend_from_slice(&2i32.to_be_bytes());
        v1.extend_from_slice(&9i64.to_be_bytes());
        v1.extend_from_slice(&1u32.to_be_bytes());
        v1.extend_from_slice(&42i64.to_be_bytes()); // producer id
        v1.extend_from_slice(&3i16.to_be_bytes()); // epoch
        v1.extend_from_slice(&77i64.to_be_bytes()); // last activity
        v1.push(1);
        for field in [0i32, 4] {
            v1.extend_from_slice(&field.to_be_bytes());
        }
        for field in [4i64, 8, 1_000] {
            v1.extend_from_slice(&field.to_be_bytes());
        }
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        let (offset, table) = decode(&v1, topic, 2, 10).expect("version 1 decodes");
        assert_eq!(offset, Offset(9));
        let entry = table.get(ProducerId(42)).expect("entry");
        assert_eq!(
            (entry.epoch, entry.last_activity_ms),
            (ProducerEpoch(3), 77)
        );
        assert_eq!(entry.newest_batch().expect("batch").last_offset, Offset(8));
        assert_eq!(table.first_unstable_offset(), None);
        assert!(table.aborted().is_empty());
    }
}
