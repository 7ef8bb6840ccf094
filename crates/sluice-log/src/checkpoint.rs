//! The checkpoint file, `<data_dir>/journal/checkpoint`: how far the journal is no longer
//! needed, and per partition what recovery can trust without scanning.
//!
//! Layout (big-endian), replaced atomically (tmp file, fsync, rename, fsync dir):
//!
//! | bytes | field |
//! |-------|-------|
//! | 8     | magic `SLUICECK` |
//! | 2     | version (1) |
//! | 2     | flags: bit 0 = written by a clean shutdown |
//! | 8     | journal position: file sequence number |
//! | 8     | journal position: byte offset in that file |
//! | 4     | partition count N |
//! | N x 48| per partition: topic id (16), partition i32, log start offset i64, recovery point offset i64, recovery point segment base offset i64, recovery point byte position u32 |
//! | 4     | CRC-32C of every byte before it |
//!
//! The journal position P means: every journal entry before P has been written to its
//! segment and that segment data was fsynced before this file was written. A partition's
//! recovery point (offset, segment, position) is its log end at P: segment bytes before it
//! are durable and need no CRC scan on open.

use crate::journal::JournalPosition;
use crate::types::{Offset, TopicId};

const MAGIC: &[u8; 8] = b"SLUICECK";
const VERSION: u16 = 1;
const FLAG_CLEAN_SHUTDOWN: u16 = 1;
const FIXED_LEN: usize = 8 + 2 + 2 + 8 + 8 + 4;
const PARTITION_LEN: usize = 16 + 4 + 8 + 8 + 8 + 4;
const CRC_LEN: usize = 4;

/// How far a partition's segment data is known to be durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RecoveryPoint {
    /// The log end offset at that point.
    pub(crate) offset: Offset,
    /// Base offset of the segment that was active then.
    pub(crate) segment_base: Offset,
    /// Bytes of that segment that were durable.
    pub(crate) position: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionCheckpoint {
    pub(crate) topic_id: TopicId,
    pub(crate) partition: i32,
    pub(crate) log_start_offset: Offset,
    /// `None` when nothing of the partition is known durable (e.g. created after P).
    pub(crate) recovery: Option<RecoveryPoint>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Checkpoint {
    pub(crate) clean_shutdown: bool,
    pub(crate) journal: JournalPosition,
    pub(crate) partitions: Vec<PartitionCheckpoint>,
}

pub(crate) const FILE_NAME: &str = "checkpoint";

impl Checkpoint {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out =
            Vec::with_capacity(FIXED_LEN + self.partitions.len() * PARTITION_LEN + CRC_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        let flags = if self.clean_shutdown {
            FLAG_CLEAN_SHUTDOWN
        } else {
            0
        };
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&self.journal.seq.to_be_bytes());
        out.extend_from_slice(&self.journal.offset.to_be_bytes());
        out.extend_from_slice(&(self.partitions.len() as u32).to_be_bytes());
        for p in &self.partitions {
            encode_partition(&mut out, p);
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Decodes a checkpoint; `None` when the file is malformed or its CRC does not match.
    pub(crate) fn decode(data: &[u8]) -> Option<Self> {
        if data.len() < FIXED_LEN + CRC_LEN || &data[..8] != MAGIC {
            return None;
        }
        let (body, crc) = data.split_at(data.len() - CRC_LEN);
        if crc32c::crc32c(body) != u32::from_be_bytes(crc.try_into().ok()?) {
            return None;
        }
        let mut r = Reader { data: body, at: 8 };
        if r.u16()? != VERSION {
            return None;
        }
        let flags = r.u16()?;
        let journal = JournalPosition {
            seq: r.u64()?,
            offset: r.u64()?,
        };
        let count = r.u32()? as usize;
        if body.len() != FIXED_LEN + count.checked_mul(PARTITION_LEN)? {
            return None;
        }
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            partitions.push(decode_partition(&mut r)?);
        }
        Some(Self {
            clean_shutdown: flags & FLAG_CLEAN_SHUTDOWN != 0,
            journal,
            partitions,
        })
    }
}

/// A missing recovery point is stored as offset -1.
fn encode_partition(out: &mut Vec<u8>, p: &PartitionCheckpoint) {
    let recovery = p.recovery.unwrap_or(RecoveryPoint {
        offset: Offset(-1),
        segment_base: Offset(-1),
        position: 0,
    });
    out.extend_from_slice(&p.topic_id.0);
    out.extend_from_slice(&p.partition.to_be_bytes());
    out.extend_from_slice(&p.log_start_offset.0.to_be_bytes());
    out.extend_from_slice(&recovery.offset.0.to_be_bytes());
    out.extend_from_slice(&recovery.segment_base.0.to_be_bytes());
    out.extend_from_slice(&recovery.position.to_be_bytes());
}

fn decode_partition(r: &mut Reader<'_>) -> Option<PartitionCheckpoint> {
    let topic_id = TopicId(r.bytes::<16>()?);
    let partition = r.u32()? as i32;
    let log_start_offset = Offset(r.u64()? as i64);
    let offset = Offset(r.u64()? as i64);
    let segment_base = Offset(r.u64()? as i64);
    let position = r.u32()?;
    let recovery = (offset.0 >= 0).then_some(RecoveryPoint {
        offset,
        segment_base,
        position,
    });
    Some(PartitionCheckpoint {
        topic_id,
        partition,
        log_start_offset,
        recovery,
    })
}

struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let slice = self.data.get(self.at..self.at + N)?;
        self.at += N;
        slice.try_into().ok()
    }
    fn u16(&mut self) -> Option<u16> {
        self.bytes::<2>().map(u16::from_be_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.bytes::<4>().map(u32::from_be_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.bytes::<8>().map(u64::from_be_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_round_trips_and_rejects_damage() {
        // Goal: a checkpoint decodes to what was encoded; any flipped bit is detected.
        let checkpoint = Checkpoint {
            clean_shutdown: true,
            journal: JournalPosition {
                seq: 3,
                offset: 4096,
            },
            partitions: vec![
                PartitionCheckpoint {
                    topic_id: TopicId([1; 16]),
                    partition: 2,
                    log_start_offset: Offset(10),
                    recovery: Some(RecoveryPoint {
                        offset: Offset(50),
                        segment_base: Offset(40),
                        position: 900,
                    }),
                },
                PartitionCheckpoint {
                    topic_id: TopicId([2; 16]),
                    partition: 0,
                    log_start_offset: Offset(0),
                    recovery: None,
                },
            ],
        };
        let bytes = checkpoint.encode();
        assert_eq!(Checkpoint::decode(&bytes), Some(checkpoint));
        let mut damaged = bytes.clone();
        damaged[30] ^= 4;
        assert_eq!(Checkpoint::decode(&damaged), None);
        assert_eq!(Checkpoint::decode(&bytes[..bytes.len() - 1]), None);
    }
}
