//! Sparse offset and time indexes of one segment: in memory while the segment lives, in
//! Kafka's `.index` / `.timeindex` files once it is sealed or the log shuts down cleanly.
//!
//! - Offset entries map a relative offset (the base offset of a batch, minus the segment's
//!   base offset) to the byte position of that batch. One entry is added at most every
//!   `index.interval.bytes`, so a lookup returns a position at or before the wanted batch
//!   and the caller walks batch headers from there.
//! - Time entries hold `(max timestamp so far, relative base offset of the batch holding
//!   it)`, added at the same points when the max grew, plus a final entry when the segment
//!   is sealed. Every batch before an entry's batch has a max timestamp <= the entry's.
//!
//! The files are derived data: on open they are checked (sizes, strictly increasing
//! entries, positions inside the trusted part of the segment) and rebuilt by scanning the
//! segment when anything is off.

use crate::types::Offset;

/// `.index` entry: relative offset u32 + position u32, big-endian.
pub(crate) const OFFSET_ENTRY_LEN: usize = 8;
/// `.timeindex` entry: timestamp i64 + relative offset u32, big-endian.
pub(crate) const TIME_ENTRY_LEN: usize = 12;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    pub(crate) relative_offset: u32,
    pub(crate) position: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    pub(crate) timestamp: i64,
    pub(crate) relative_offset: u32,
}

/// What the index needs to know about a batch just appended (or scanned).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchMeta {
    pub(crate) base_offset: Offset,
    pub(crate) position: u64,
    pub(crate) size: u64,
    pub(crate) max_timestamp: i64,
}

/// In-memory index of one segment. Written by the single appender of the segment (the
/// committer, or recovery), read by fetches under the segment's `RwLock`.
#[derive(Debug, Clone)]
pub(crate) struct SegmentIndex {
    base_offset: Offset,
    offsets: Vec<OffsetEntry>,
    times: Vec<TimeEntry>,
    bytes_since_entry: u64,
    /// Largest batch max timestamp in the segment, -1 when empty (Kafka's "no timestamp").
    max_timestamp: i64,
    /// Base offset of the first batch holding `max_timestamp`.
    max_timestamp_offset: Offset,
}

impl SegmentIndex {
    pub(crate) fn new(base_offset: Offset) -> Self {
        Self {
            base_offset,
            offsets: Vec::new(),
            times: Vec::new(),
            bytes_since_entry: 0,
            max_timestamp: -1,
            max_timestamp_offset: base_offset,
        }
    }

    fn relative(&self, offset: Offset) -> u32 {
        u32::try_from(offset.0 - self.base_offset.0).unwrap_or(u32::MAX)
    }

    /// Records a batch. Adds entries when `interval_bytes` have passed since the last one.
    pub(crate) fn on_append(&mut self, batch: BatchMeta, interval_bytes: u32) {
        if batch.max_timestamp > self.max_timestamp {
            self.max_timestamp = batch.max_timestamp;
            self.max_timestamp_offset = batch.base_offset;
        }
        let relative_offset = self.relative(batch.base_offset);
        let is_new = self
            .offsets
            .last()
            .is_none_or(|e| e.relative_offset < relative_offset);
        let due = self.bytes_since_entry >= u64::from(interval_bytes);
        if due && batch.position > 0 && is_new {
            let position = u32::try_from(batch.position).unwrap_or(u32::MAX);
            self.offsets.push(OffsetEntry {
                relative_offset,
                position,
            });
            self.push_time_entry();
            self.bytes_since_entry = 0;
        }
        self.bytes_since_entry += batch.size;
    }

    /// Forgets the batches from byte `position` (offset `offset`) on: a commit round whose
    /// writes were refused is undone. The tracked max timestamp is kept (it can only be
    /// too high, which keeps the segment longer and makes a max-timestamp lookup walk).
    pub(crate) fn truncate(&mut self, position: u64, offset: Offset) {
        let relative = self.relative(offset);
        self.offsets.retain(|e| u64::from(e.position) < position);
        self.times.retain(|e| e.relative_offset < relative);
        assert!(self
            .offsets
            .last()
            .is_none_or(|e| e.relative_offset < relative));
    }

    /// Makes the next batch get an offset entry whatever the interval (recovery: the first
    /// intact batch after a damaged stretch, so lookups past the damage start there).
    pub(crate) fn force_entry(&mut self) {
        self.bytes_since_entry = u64::MAX / 2;
    }

    /// Adds a time entry for the current max when it grew since the last entry.
    fn push_time_entry(&mut self) {
        let grew = self
            .times
            .last()
            .is_none_or(|e| e.timestamp < self.max_timestamp);
        if grew && self.max_timestamp >= 0 {
            let relative_offset = self.relative(self.max_timestamp_offset);
            self.times.push(TimeEntry {
                timestamp: self.max_timestamp,
                relative_offset,
            });
        }
    }

    /// Called when the segment stops growing: makes the last time entry the exact max.
    pub(crate) fn seal(&mut self) {
        self.push_time_entry();
    }

    /// Byte position of the last indexed batch at or before `offset` (0 when none is).
    pub(crate) fn lookup_position(&self, offset: Offset) -> u64 {
        if offset.0 < self.base_offset.0 {
            return 0;
        }
        let relative = self.relative(offset);
        let after = self
            .offsets
            .partition_point(|e| e.relative_offset <= relative);
        match after {
            0 => 0,
            n => u64::from(self.offsets[n - 1].position),
        }
    }

    /// [`Self::lookup_position`] with the base offset of the batch there (the segment's
    /// base offset at position 0).
    pub(crate) fn lookup(&self, offset: Offset) -> (u64, Option<Offset>) {
        let relative = match offset.0 < self.base_offset.0 {
            true => 0,
            false => self.relative(offset),
        };
        let after = self
            .offsets
            .partition_point(|e| e.relative_offset <= relative);
        match after {
            0 => (0, Some(self.base_offset)),
            n => (
                u64::from(self.offsets[n - 1].position),
                Some(self.absolute(self.offsets[n - 1].relative_offset)),
            ),
        }
    }

    /// The first offset entry after byte `position`: its position and base offset.
    pub(crate) fn entry_after(&self, position: u64) -> Option<(u64, Offset)> {
        let at = self
            .offsets
            .partition_point(|e| u64::from(e.position) <= position);
        let e = self.offsets.get(at)?;
        Some((u64::from(e.position), self.absolute(e.relative_offset)))
    }

    fn absolute(&self, relative_offset: u32) -> Offset {
        Offset(self.base_offset.0 + i64::from(relative_offset))
    }

    /// Position from which to walk to find the first batch whose max timestamp is
    /// >= `timestamp`: the batch of the last time entry below `timestamp`.
    pub(crate) fn time_lookup_position(&self, timestamp: i64) -> u64 {
        let below = self.times.partition_point(|e| e.timestamp < timestamp);
        match below {
            0 => 0,
            n => {
                let offset =
                    Offset(self.base_offset.0 + i64::from(self.times[n - 1].relative_offset));
                self.lookup_position(offset)
            }
        }
    }

    pub(crate) fn max_timestamp(&self) -> (i64, Offset) {
        (self.max_timestamp, self.max_timestamp_offset)
    }

    /// Position of the last offset entry, where a scan that extends a loaded index resumes.
    pub(crate) fn last_entry(&self) -> Option<OffsetEntry> {
        self.offsets.last().copied()
    }

    /// Encodes the `.index` file.
    pub(crate) fn encode_offsets(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.offsets.len() * OFFSET_ENTRY_LEN);
        for entry in &self.offsets {
            out.extend_from_slice(&entry.relative_offset.to_be_bytes());
            out.extend_from_slice(&entry.position.to_be_bytes());
        }
        out
    }

    /// Encodes the `.timeindex` file.
    pub(crate) fn encode_times(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.times.len() * TIME_ENTRY_LEN);
        for entry in &self.times {
            out.extend_from_slice(&entry.timestamp.to_be_bytes());
            out.extend_from_slice(&entry.relative_offset.to_be_bytes());
        }
        out
    }

    /// Rebuilds an index from its two files, keeping only what can be trusted: entries must
    /// be strictly increasing and point inside `trusted_len` bytes of the segment. Returns
    /// `None` when a file is malformed (the caller then rebuilds from the segment).
    pub(crate) fn decode(
        base_offset: Offset,
        offsets: &[u8],
        times: &[u8],
        trusted_len: u64,
    ) -> Option<Self> {
        if !offsets.len().is_multiple_of(OFFSET_ENTRY_LEN)
            || !times.len().is_multiple_of(TIME_ENTRY_LEN)
        {
            return None;
        }
        let mut index = Self::new(base_offset);
        for raw in offsets.chunks_exact(OFFSET_ENTRY_LEN) {
            let entry = OffsetEntry {
                relative_offset: be_u32(&raw[0..4]),
                position: be_u32(&raw[4..8]),
            };
            if u64::from(entry.position) >= trusted_len {
                break;
            }
            if let Some(last) = index.offsets.last() {
                if entry.relative_offset <= last.relative_offset || entry.position <= last.position
                {
                    return None;
                }
            }
            index.offsets.push(entry);
        }
        let last_relative = index.offsets.last().map_or(0, |e| e.relative_offset);
        for raw in times.chunks_exact(TIME_ENTRY_LEN) {
            let entry = TimeEntry {
                timestamp: be_i64(&raw[0..8]),
                relative_offset: be_u32(&raw[8..12]),
            };
            if entry.relative_offset > last_relative {
                // Points past the trusted entries: the scan that extends the index re-derives it.
                break;
            }
            if index
                .times
                .last()
                .is_some_and(|last| entry.timestamp <= last.timestamp)
            {
                return None;
            }
            index.times.push(entry);
        }
        if let Some(last) = index.times.last() {
            index.max_timestamp = last.timestamp;
            index.max_timestamp_offset = Offset(base_offset.0 + i64::from(last.relative_offset));
        }
        Some(index)
    }

    /// Prepares a loaded index for extension by a scan that starts at the batch of the last
    /// offset entry (so the bytes counter restarts there).
    pub(crate) fn resume_at_last_entry(&mut self) {
        self.bytes_since_entry = 0;
    }
}

fn be_u32(raw: &[u8]) -> u32 {
    let mut bytes = [0u8; 4];
    bytes.copy_from_slice(raw);
    u32::from_be_bytes(bytes)
}

fn be_i64(raw: &[u8]) -> i64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(raw);
    i64::from_be_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(base: i64, position: u64, size: u64, ts: i64) -> BatchMeta {
        BatchMeta {
            base_offset: Offset(base),
            position,
            size,
            max_timestamp: ts,
        }
    }

    #[test]
    fn lookups_return_floor_positions() {
        // Goal: offset lookups give the last indexed batch at or before the target.
        let mut index = SegmentIndex::new(Offset(100));
        for i in 0..10u64 {
            index.on_append(meta(100 + 5 * i as i64, i * 100, 100, 1000 + i as i64), 250);
        }
        assert_eq!(index.lookup_position(Offset(100)), 0);
        assert_eq!(index.lookup_position(Offset(99)), 0);
        let pos = index.lookup_position(Offset(137));
        assert!(pos <= 700 && pos > 0, "{pos}");
        assert_eq!(index.max_timestamp(), (1009, Offset(145)));
    }

    #[test]
    fn encode_decode_round_trip() {
        // Goal: files written from an index load back to the same trusted entries.
        let mut index = SegmentIndex::new(Offset(0));
        for i in 0..20u64 {
            index.on_append(meta(i as i64 * 2, i * 64, 64, 50 + i as i64), 100);
        }
        index.seal();
        let loaded = SegmentIndex::decode(
            Offset(0),
            &index.encode_offsets(),
            &index.encode_times(),
            20 * 64,
        )
        .expect("valid");
        assert_eq!(loaded.offsets, index.offsets);
        // Time entries past the last offset entry are left to the scan that extends the index.
        assert_eq!(loaded.times[..], index.times[..loaded.times.len()]);
        assert!(loaded.times.len() >= index.times.len() - 1);
        assert!(SegmentIndex::decode(Offset(0), &[1, 2, 3], &[], 100).is_none());
    }
}
