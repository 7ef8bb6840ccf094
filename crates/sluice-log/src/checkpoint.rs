//! The checkpoint file, `<data_dir>/journal/checkpoint`: how far the journal is no longer
//! needed, and per partition what recovery can trust without scanning.
//!
//! Layout (big-endian), replaced atomically (tmp file, fsync, rename, fsync dir):
//!
//! | bytes | field |
//! |-------|-------|
//! | 8     | magic `SLUICECK` |
//! | 2     | version (2) |
//! | 2     | flags: bit 0 = written by a clean shutdown |
//! | 8     | journal position: file sequence number |
//! | 8     | journal position: byte offset in that file |
//! | 4     | partition count N |
//! | N x 64| per partition: topic id (16), partition i32, log start offset i64, recovery point offset i64, recovery point segment base offset i64, recovery point byte position u32, producer state offset i64, producer snapshot offset i64 |
//! | 4     | CRC-32C of every byte before it |
//!
//! The journal position P means: every journal entry before P has been written to its
//! segment and that segment data was fsynced before this file was written. A partition's
//! recovery point (offset, segment, position) is its log end at P: segment bytes before it
//! are durable and need no CRC scan on open.
//!
//! The producer state point says from where recovery rebuilds the partition's producer
//! state: the state as of the producer state offset is in the snapshot file named by the
//! producer snapshot offset (`<offset:020>.snapshot`), or is empty when that is -1; the
//! batches from the producer state offset on are re-applied. -1 as the producer state
//! offset means unknown. Version 1 files (written before producer state existed) are still
//! read: their partitions start with empty producer state at the recovery point.

use crate::journal::JournalPosition;
use crate::types::{Offset, TopicId};

const MAGIC: &[u8; 8] = b"SLUICECK";
const VERSION: u16 = 2;
/// The version before producer state points; still decoded.
const VERSION_1: u16 = 1;
const FLAG_CLEAN_SHUTDOWN: u16 = 1;
const FIXED_LEN: usize = 8 + 2 + 2 + 8 + 8 + 4;
const PARTITION_LEN_V1: usize = 16 + 4 + 8 + 8 + 8 + 4;
const PARTITION_LEN: usize = PARTITION_LEN_V1 + 8 + 8;
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

/// From where recovery rebuilds a partition's producer state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProducerStatePoint {
    /// The producer state as of this log end offset is known; recovery re-applies the
    /// batches from here to the recovered log end. Every batch below it was durable when
    /// the checkpoint was written.
    pub(crate) offset: Offset,
    /// The snapshot file holding that state, by its own offset (<= `offset`: the state did
    /// not change in between), or `None` when the state was empty.
    pub(crate) snapshot: Option<Offset>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionCheckpoint {
    pub(crate) topic_id: TopicId,
    pub(crate) partition: i32,
    pub(crate) log_start_offset: Offset,
    /// `None` when nothing of the partition is known durable (e.g. created after P).
    pub(crate) recovery: Option<RecoveryPoint>,
    /// `None` when the producer state is unknown (recovery then rebuilds it by scanning).
    pub(crate) producer_state: Option<ProducerStatePoint>,
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
        let version = r.u16()?;
        let partition_len = match version {
            VERSION => PARTITION_LEN,
            VERSION_1 => PARTITION_LEN_V1,
            _ => return None,
        };
        let flags = r.u16()?;
        let journal = JournalPosition {
            seq: r.u64()?,
            offset: r.u64()?,
        };
        let count = r.u32()? as usize;
        if body.len() != FIXED_LEN + count.checked_mul(partition_len)? {
            return None;
        }
        let mut partitions = Vec::with_capacity(count);
        for _ in 0..count {
            partitions.push(decode_partition(&mut r, version)?);
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
    let (state_offset, snapshot_offset) = match p.producer_state {
        Some(point) => (point.offset, point.snapshot.unwrap_or(Offset(-1))),
        None => (Offset(-1), Offset(-1)),
    };
    out.extend_from_slice(&state_offset.0.to_be_bytes());
    out.extend_from_slice(&snapshot_offset.0.to_be_bytes());
}

fn decode_partition(r: &mut Reader<'_>, version: u16) -> Option<PartitionCheckpoint> {
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
    let producer_state = if version == VERSION_1 {
        // Written by a log that kept no producer state: there is none to restore.
        recovery.map(|point| ProducerStatePoint {
            offset: point.offset,
            snapshot: None,
        })
    } else {
        let state_offset = Offset(r.u64()? as i64);
        let snapshot_offset = Offset(r.u64()? as i64);
        (state_offset.0 >= 0).then_some(ProducerStatePoint {
            offset: state_offset,
            snapshot: (snapshot_offset.0 >= 0).then_some(snapshot_offset),
        })
    };
    Some(PartitionCheckpoint {
        topic_id,
        partition,
        log_start_offset,
        recovery,
        producer_state,
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
                    producer_state: Some(ProducerStatePoint {
                        offset: Offset(52),
                        snapshot: Some(Offset(44)),
                    }),
                },
                PartitionCheckpoint {
                    topic_id: TopicId([2; 16]),
                    partition: 0,
                    log_start_offset: Offset(0),
                    recovery: None,
                    producer_state: None,
                },
                PartitionCheckpoint {
                    topic_id: TopicId([3; 16]),
                    partition: 1,
                    log_start_offset: Offset(0),
                    recovery: None,
                    producer_state: Some(ProducerStatePoint {
                        offset: Offset(7),
                        snapshot: None,
                    }),
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

    #[test]
    fn version_1_checkpoint_means_empty_producer_state_at_the_recovery_point() {
        // Goal: a checkpoint written before producer state existed still opens; its
        // partitions' producer state starts empty at their recovery points.
        let mut v1 = Vec::new();
        v1.extend_from_slice(MAGIC);
        v1.extend_from_slice(&VERSION_1.to_be_bytes());
        v1.extend_from_slice(&0u16.to_be_bytes());
        v1.extend_from_slice(&5u64.to_be_bytes());
        v1.extend_from_slice(&16u64.to_be_bytes());
        v1.extend_from_slice(&1u32.to_be_bytes());
        v1.extend_from_slice(&[4; 16]);
        v1.extend_from_slice(&0i32.to_be_bytes());
        v1.extend_from_slice(&0i64.to_be_bytes());
        v1.extend_from_slice(&30i64.to_be_bytes());
        v1.extend_from_slice(&0i64.to_be_bytes());
        v1.extend_from_slice(&2000u32.to_be_bytes());
        let crc = crc32c::crc32c(&v1);
        v1.extend_from_slice(&crc.to_be_bytes());
        let decoded = Checkpoint::decode(&v1).expect("v1 decodes");
        let point = decoded.partitions[0].producer_state.expect("point");
        assert_eq!(
            point,
            ProducerStatePoint {
                offset: Offset(30),
                snapshot: None
            }
        );
        assert_eq!(decoded.journal.seq, 5);
    }
}
