//! Writing v2 batch headers: [`BatchHeaderMut`] changes fields of an existing batch in
//! place, [`BatchFields`] writes a new batch around given record bytes, and
//! [`stamp_base_offset`] writes the one field a log changes on append.
//!
//! Guarantees: [`BatchFields::write`] always leaves a batch whose length, magic and
//! CRC-32C are right for its bytes; after [`BatchHeaderMut`]'s setters, the CRC is right
//! again once [`BatchHeaderMut::update_crc`] has run (the setters do not recompute it, so
//! that several changes cost one pass over the batch).

use crate::attributes::Attributes;
use crate::header::{compute_crc, BatchHeader, HeaderTooShort};
use crate::ids::{Offset, ProducerEpoch, ProducerId, NO_SEQUENCE};
use crate::layout::*;

/// Writes `base_offset` into the first 8 bytes of `batch`. Those bytes are outside the
/// CRC, so a valid batch stays valid.
///
/// Panics when `batch` is shorter than 8 bytes (callers hold whole batches).
#[inline]
pub fn stamp_base_offset(batch: &mut [u8], base_offset: Offset) {
    batch[BASE_OFFSET_AT..BATCH_LENGTH_AT].copy_from_slice(&base_offset.0.to_be_bytes());
}

/// A mutable view of one whole batch (`batch` holds exactly one batch when
/// [`Self::update_crc`] is called, since the CRC covers everything after the header's
/// prefix).
#[derive(Debug)]
pub struct BatchHeaderMut<'a> {
    batch: &'a mut [u8],
}

impl<'a> BatchHeaderMut<'a> {
    /// Fails only when `batch` is shorter than a header.
    #[inline]
    pub fn new(batch: &'a mut [u8]) -> Result<Self, HeaderTooShort> {
        match batch.len() >= HEADER_LEN {
            true => Ok(Self { batch }),
            false => Err(HeaderTooShort),
        }
    }

    /// The header as it is now.
    #[inline]
    pub fn header(&self) -> BatchHeader<'_> {
        BatchHeader::parse(self.batch).expect("checked in new")
    }

    #[inline]
    fn put<const W: usize>(&mut self, at: usize, value: [u8; W]) {
        self.batch[at..at + W].copy_from_slice(&value);
    }

    /// Outside the CRC: needs no [`Self::update_crc`].
    #[inline]
    pub fn set_base_offset(&mut self, base_offset: Offset) {
        self.put(BASE_OFFSET_AT, base_offset.0.to_be_bytes());
    }
    #[inline]
    pub fn set_batch_length(&mut self, batch_length: i32) {
        self.put(BATCH_LENGTH_AT, batch_length.to_be_bytes());
    }
    /// Sets batchLength to what the batch's bytes hold. Panics past 2 GiB, which no
    /// batch reaches (Kafka's sizes are i32).
    #[inline]
    pub fn fit_batch_length(&mut self) {
        let length = i32::try_from(self.batch.len() - LOG_OVERHEAD).expect("a batch < 2 GiB");
        self.set_batch_length(length);
    }
    #[inline]
    pub fn set_partition_leader_epoch(&mut self, epoch: i32) {
        self.put(PARTITION_LEADER_EPOCH_AT, epoch.to_be_bytes());
    }
    #[inline]
    pub fn set_magic(&mut self, magic: i8) {
        self.put(MAGIC_AT, magic.to_be_bytes());
    }
    /// Writes a CRC as given; [`Self::update_crc`] writes the right one.
    #[inline]
    pub fn set_crc(&mut self, crc: u32) {
        self.put(CRC_AT, crc.to_be_bytes());
    }
    #[inline]
    pub fn set_attributes(&mut self, attributes: Attributes) {
        self.put(ATTRIBUTES_AT, attributes.0.to_be_bytes());
    }
    #[inline]
    pub fn set_last_offset_delta(&mut self, delta: i32) {
        self.put(LAST_OFFSET_DELTA_AT, delta.to_be_bytes());
    }
    #[inline]
    pub fn set_base_timestamp(&mut self, timestamp_ms: i64) {
        self.put(BASE_TIMESTAMP_AT, timestamp_ms.to_be_bytes());
    }
    #[inline]
    pub fn set_max_timestamp(&mut self, timestamp_ms: i64) {
        self.put(MAX_TIMESTAMP_AT, timestamp_ms.to_be_bytes());
    }
    #[inline]
    pub fn set_producer_id(&mut self, producer_id: ProducerId) {
        self.put(PRODUCER_ID_AT, producer_id.0.to_be_bytes());
    }
    #[inline]
    pub fn set_producer_epoch(&mut self, epoch: ProducerEpoch) {
        self.put(PRODUCER_EPOCH_AT, epoch.0.to_be_bytes());
    }
    #[inline]
    pub fn set_base_sequence(&mut self, base_sequence: i32) {
        self.put(BASE_SEQUENCE_AT, base_sequence.to_be_bytes());
    }
    #[inline]
    pub fn set_records_count(&mut self, count: i32) {
        self.put(RECORDS_COUNT_AT, count.to_be_bytes());
    }

    /// Recomputes the CRC-32C over bytes 21..end and stores it.
    #[inline]
    pub fn update_crc(&mut self) {
        let crc = compute_crc(self.batch);
        self.set_crc(crc);
    }
}

/// The header fields of a new batch, for [`BatchFields::write`]; batchLength, magic and
/// the CRC follow from the bytes written. The default is a batch of no producer (id, epoch
/// and base sequence -1) at offset 0 with leader epoch 0 (the only epoch of a one-node
/// log), no records and no attributes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchFields {
    pub base_offset: Offset,
    pub partition_leader_epoch: i32,
    pub attributes: Attributes,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: ProducerId,
    pub producer_epoch: ProducerEpoch,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl Default for BatchFields {
    fn default() -> Self {
        Self {
            base_offset: Offset(0),
            partition_leader_epoch: 0,
            attributes: Attributes(0),
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: ProducerId::NONE,
            producer_epoch: ProducerEpoch::NONE,
            base_sequence: NO_SEQUENCE,
            records_count: 0,
        }
    }
}

impl BatchFields {
    /// The fields of an existing header.
    pub fn of(header: &BatchHeader<'_>) -> Self {
        Self {
            base_offset: header.base_offset(),
            partition_leader_epoch: header.partition_leader_epoch(),
            attributes: header.attributes(),
            last_offset_delta: header.last_offset_delta(),
            base_timestamp: header.base_timestamp(),
            max_timestamp: header.max_timestamp(),
            producer_id: header.producer_id(),
            producer_epoch: header.producer_epoch(),
            base_sequence: header.base_sequence(),
            records_count: header.records_count(),
        }
    }

    /// Appends to `out` one batch: this header, then `records` (the record bytes as they
    /// are stored, compressed or not), with batchLength, magic 2 and the CRC-32C set.
    /// Panics when the batch would pass 2 GiB.
    pub fn write(&self, records: &[u8], out: &mut Vec<u8>) {
        let start = out.len();
        out.resize(start + HEADER_LEN, 0);
        out.extend_from_slice(records);
        let mut batch = BatchHeaderMut::new(&mut out[start..]).expect("a header was added");
        batch.set_base_offset(self.base_offset);
        batch.fit_batch_length();
        batch.set_partition_leader_epoch(self.partition_leader_epoch);
        batch.set_magic(MAGIC_V2);
        batch.set_attributes(self.attributes);
        batch.set_last_offset_delta(self.last_offset_delta);
        batch.set_base_timestamp(self.base_timestamp);
        batch.set_max_timestamp(self.max_timestamp);
        batch.set_producer_id(self.producer_id);
        batch.set_producer_epoch(self.producer_epoch);
        batch.set_base_sequence(self.base_sequence);
        batch.set_records_count(self.records_count);
        batch.update_crc();
    }

    /// [`Self::write`] into a new vector.
    pub fn to_batch(&self, records: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + records.len());
        self.write(records, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::BatchPrefix;

    fn fields() -> BatchFields {
        BatchFields {
            base_offset: Offset(1 << 40),
            partition_leader_epoch: 7,
            attributes: Attributes::TRANSACTIONAL.with(Attributes(3)),
            last_offset_delta: 4,
            base_timestamp: 1_700_000_000_000,
            max_timestamp: 1_700_000_000_123,
            producer_id: ProducerId(42),
            producer_epoch: ProducerEpoch(3),
            base_sequence: 99,
            records_count: 5,
        }
    }

    #[test]
    fn a_written_batch_reads_back_field_for_field() {
        // Goal: every field written reads back from the view, and the derived ones (length,
        // magic, CRC) are right for the bytes; writing after other bytes leaves them alone.
        let mut out = vec![0xaa; 3];
        fields().write(b"records", &mut out);
        assert_eq!(&out[..3], &[0xaa; 3]);
        let batch = &out[3..];
        let header = BatchHeader::parse(batch).unwrap();
        assert_eq!(BatchFields::of(&header), fields());
        assert_eq!(header.total_size(), Some(HEADER_LEN + 7));
        assert_eq!(batch_len(batch), Some(batch.len()));
        assert_eq!(header.magic(), MAGIC_V2);
        assert_eq!(header.crc(), compute_crc(batch));
        assert_eq!(&batch[HEADER_LEN..], b"records");
        assert_eq!(header.last_offset(), Offset((1 << 40) + 4));
        assert_eq!(header.next_offset(), Offset((1 << 40) + 5));
        assert_eq!(header.prefix().base_offset(), header.base_offset());
        assert_eq!(header.prefix().crc(), header.crc());
        assert_eq!(header.prefix().total_size(), header.total_size());
    }

    fn batch_len(bytes: &[u8]) -> Option<usize> {
        crate::header::batch_len_within(bytes)
    }

    #[test]
    fn setters_change_one_field_and_update_crc_makes_it_valid() {
        // Goal: each setter changes its own field and no other; the CRC is stale until
        // update_crc, then right; the base offset is outside the CRC.
        let original = fields().to_batch(b"xyz");
        let mut batch = original.clone();
        let mut view = BatchHeaderMut::new(&mut batch).unwrap();
        view.set_base_offset(Offset(5));
        assert_eq!(
            view.header().crc(),
            compute_crc(&original),
            "outside the CRC"
        );
        view.set_max_timestamp(-3);
        view.set_attributes(view.header().attributes().with(Attributes::LOG_APPEND_TIME));
        assert_ne!(view.header().crc(), compute_crc(&batch_bytes(&view)));
        view.update_crc();
        let header = view.header();
        assert_eq!(header.crc(), compute_crc(&batch_bytes(&view)));
        let mut expected = fields();
        expected.base_offset = Offset(5);
        expected.max_timestamp = -3;
        expected.attributes = expected.attributes.with(Attributes::LOG_APPEND_TIME);
        assert_eq!(BatchFields::of(&header), expected);
        assert_eq!(
            batch[HEADER_LEN..],
            original[HEADER_LEN..],
            "records untouched"
        );
        let mut stamped = original.clone();
        stamp_base_offset(&mut stamped, Offset(-2));
        assert_eq!(
            BatchHeader::parse(&stamped).unwrap().base_offset(),
            Offset(-2)
        );
        assert_eq!(stamped[BATCH_LENGTH_AT..], original[BATCH_LENGTH_AT..]);
    }

    fn batch_bytes(view: &BatchHeaderMut<'_>) -> Vec<u8> {
        view.batch.to_vec()
    }

    #[test]
    fn views_refuse_short_bytes_and_reject_insane_lengths() {
        // Goal: no view is made over fewer bytes than it reads; a length below a header's or
        // negative, or one running past the buffer, has no size.
        let batch = fields().to_batch(b"");
        assert!(BatchHeader::parse(&batch[..HEADER_LEN - 1]).is_err());
        assert!(BatchHeader::parse(&batch[..HEADER_LEN]).is_ok());
        assert!(BatchPrefix::parse(&batch[..CRC_START - 1]).is_err());
        assert!(BatchPrefix::parse(&batch[..CRC_START]).is_ok());
        assert!(BatchHeaderMut::new(&mut batch.clone()[..60]).is_err());
        for length in [-1, 0, (HEADER_LEN - LOG_OVERHEAD) as i32 - 1] {
            let mut bad = batch.clone();
            BatchHeaderMut::new(&mut bad)
                .unwrap()
                .set_batch_length(length);
            assert_eq!(BatchHeader::parse(&bad).unwrap().total_size(), None);
            assert_eq!(batch_len(&bad), None);
        }
        let mut long = batch.clone();
        BatchHeaderMut::new(&mut long).unwrap().set_batch_length(50);
        assert_eq!(batch_len(&long), None, "runs one byte past the buffer");
        assert_eq!(compute_crc(&batch[..5]), crc32c::crc32c(b""));
    }
}
