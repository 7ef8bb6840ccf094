//! The `packed` preset's application side (teranode PR #912): txmeta v2 records, each packing
//! many entries (layout in `payload`). Entries are routed so that every partition owns a
//! disjoint range of the key-hash space, and the consumer parses every record and counts its
//! entries, so entries/s is measured, not derived from record counts.
//!
//! Routing: a key hash belongs to bucket `hash % HASH_BUCKETS`, and bucket `b` to partition
//! `b * partitions / HASH_BUCKETS` (teranode: 8192 buckets, 256 per partition at 32). Bodies come
//! from a pre-generated pool, so the producer rewrites each entry's bucket into its record's
//! partition just before sending; the rest of the hash stays random.

use crate::payload::{TXMETA_ENTRY_BYTES, TXMETA_RECORD_HEADER_BYTES, TXMETA_VALUE_BYTES};

/// Key-hash buckets shared out among the partitions.
pub const HASH_BUCKETS: u64 = 8192;

/// The partition that owns a key hash.
pub fn owner(hash: u64, partitions: i32) -> i32 {
    ((hash % HASH_BUCKETS) * partitions.max(1) as u64 / HASH_BUCKETS) as i32
}

/// The buckets `[lo, hi)` partition `p` owns (non-empty while partitions <= HASH_BUCKETS).
fn buckets(p: i32, partitions: i32) -> (u64, u64) {
    let n = partitions.max(1) as u64;
    let p = p.max(0) as u64;
    // Smallest bucket b with b * n / BUCKETS >= p, i.e. ceil(p * BUCKETS / n).
    let lo = (p * HASH_BUCKETS).div_ceil(n);
    let hi = ((p + 1) * HASH_BUCKETS).div_ceil(n);
    (lo, hi.max(lo + 1))
}

/// Rewrites every entry's key hash of `record` (the txmeta bytes after the bench header) into
/// partition `p`'s buckets. A record that is not txmeta v2 is left alone.
pub fn route(record: &mut [u8], p: i32, partitions: i32) {
    let Some(entries) = entry_count(record) else {
        return;
    };
    let (lo, hi) = buckets(p, partitions);
    for i in 0..entries as usize {
        let at = TXMETA_RECORD_HEADER_BYTES + i * TXMETA_ENTRY_BYTES;
        let Some(field) = record.get_mut(at..at + 8) else {
            return;
        };
        let hash = u64::from_le_bytes(field.try_into().unwrap_or([0; 8]));
        let bucket = lo + (hash >> 13) % (hi - lo);
        let routed = hash - hash % HASH_BUCKETS + bucket;
        field.copy_from_slice(&routed.to_le_bytes());
    }
}

fn entry_count(record: &[u8]) -> Option<u32> {
    if record.len() < TXMETA_RECORD_HEADER_BYTES || record[..4] != [0xFF, 0x02, 0, 0] {
        return None;
    }
    Some(u32::from_le_bytes(record[4..8].try_into().ok()?))
}

/// What the consumer found in one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    pub entries: u64,
    /// Entries whose key hash another partition owns.
    pub misrouted: u64,
}

/// Parses one record the way teranode's handler does: header, then every entry (hash, id,
/// action, value length, value). Any inconsistency rejects the whole record.
pub fn parse(record: &[u8], partition: i32, partitions: i32) -> Result<Parsed, &'static str> {
    let entries = entry_count(record).ok_or("not a txmeta v2 record")?;
    let mut at = TXMETA_RECORD_HEADER_BYTES;
    let mut misrouted = 0;
    for _ in 0..entries {
        let entry = record
            .get(at..at + TXMETA_ENTRY_BYTES - TXMETA_VALUE_BYTES)
            .ok_or("record shorter than its entry count")?;
        let hash = u64::from_le_bytes(entry[..8].try_into().map_err(|_| "short hash")?);
        if entry[40] > 1 {
            return Err("unknown action");
        }
        let len = u32::from_le_bytes(entry[41..45].try_into().map_err(|_| "short length")?);
        let end = at + 45 + len as usize;
        if end > record.len() {
            return Err("value runs past the record");
        }
        if owner(hash, partitions) != partition {
            misrouted += 1;
        }
        at = end;
    }
    // Only zero padding may follow the last entry.
    if record[at..].iter().any(|&b| b != 0) {
        return Err("bytes after the last entry");
    }
    Ok(Parsed {
        entries: entries as u64,
        misrouted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{PayloadClass, PayloadPool};

    #[test]
    fn partitions_own_disjoint_ranges_that_cover_every_bucket() {
        for partitions in [1, 3, 32, 100, 4096] {
            let mut next = 0;
            for p in 0..partitions {
                let (lo, hi) = buckets(p, partitions);
                assert_eq!(lo, next, "contiguous at {p}/{partitions}");
                assert!(hi > lo);
                for b in [lo, hi - 1] {
                    assert_eq!(owner(b, partitions), p, "bucket {b} of {p}/{partitions}");
                }
                next = hi;
            }
            assert_eq!(next, HASH_BUCKETS);
        }
    }

    #[test]
    fn routed_records_parse_with_every_entry_in_their_partition() {
        let size = crate::payload::txmeta_message_bytes(50);
        let pool = PayloadPool::new(PayloadClass::Txmeta, size, 7);
        let mut body = pool.body(0, 0).to_vec();
        let record = &mut body[..];
        let before = parse(record, 5, 32).expect("a generated record parses");
        assert_eq!(before.entries, 50);
        assert!(before.misrouted > 0, "pool bodies are not routed yet");
        route(record, 5, 32);
        assert_eq!(
            parse(record, 5, 32),
            Ok(Parsed {
                entries: 50,
                misrouted: 0
            })
        );
        assert_eq!(parse(record, 6, 32).map(|p| p.misrouted), Ok(50));
        // Damage is caught: a bad action byte, a count beyond the bytes, trailing garbage.
        let mut bad = record.to_vec();
        bad[TXMETA_RECORD_HEADER_BYTES + 40] = 9;
        assert!(parse(&bad, 5, 32).is_err());
        let mut bad = record.to_vec();
        bad[4..8].copy_from_slice(&51u32.to_le_bytes());
        assert!(parse(&bad, 5, 32).is_err());
        let mut bad = record.to_vec();
        bad.extend_from_slice(&[1, 2, 3]);
        assert!(parse(&bad, 5, 32).is_err());
        assert!(parse(b"plain bytes", 0, 1).is_err());
    }
}
