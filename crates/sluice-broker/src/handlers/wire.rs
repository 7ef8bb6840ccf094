//! The cursor the hand-written request decoders (Produce, Fetch) read a request body with.
//!
//! Guarantees: every read is bounds-checked against the body and fails with [`Malformed`]
//! instead of panicking; a count read from the wire (array length, string length, tagged
//! field size) is never trusted beyond the bytes left, so no caller sizes anything from it;
//! strings and byte fields kept by a caller are slices of the body's `Bytes` (no copy).
//! Nothing here allocates.

use std::ops::Range;

use bytes::{Buf, Bytes};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// Why a body could not be decoded (the decoders refuse the whole request; the connection
/// closes, as Kafka's does on a body it cannot parse).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed request: {0}")]
pub(crate) struct Malformed(pub(crate) &'static str);

/// A cursor over a request body.
#[derive(Debug)]
pub(crate) struct WireReader<'a> {
    body: &'a Bytes,
    at: usize,
    /// Whether the body uses the flexible encodings (compact lengths, tagged fields).
    flexible: bool,
}

impl<'a> WireReader<'a> {
    /// A cursor at the start of `body`; `flexible` is whether the request's version is one of
    /// the API's flexible versions.
    pub(crate) fn new(body: &'a Bytes, flexible: bool) -> Self {
        Self {
            body,
            at: 0,
            flexible,
        }
    }

    /// Bytes not yet read.
    pub(crate) fn remaining(&self) -> usize {
        debug_assert!(self.at <= self.body.len());
        self.body.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<Range<usize>, Malformed> {
        if n > self.remaining() {
            return Err(Malformed("truncated"));
        }
        let range = self.at..self.at + n;
        self.at = range.end;
        Ok(range)
    }

    /// Skips `n` bytes.
    pub(crate) fn skip(&mut self, n: usize) -> Result<(), Malformed> {
        self.take(n).map(drop)
    }

    pub(crate) fn i8(&mut self) -> Result<i8, Malformed> {
        let r = self.take(1)?;
        Ok(self.body[r.start] as i8)
    }

    pub(crate) fn i16(&mut self) -> Result<i16, Malformed> {
        let r = self.take(2)?;
        Ok((&self.body[r]).get_i16())
    }

    pub(crate) fn i32(&mut self) -> Result<i32, Malformed> {
        let r = self.take(4)?;
        Ok((&self.body[r]).get_i32())
    }

    pub(crate) fn i64(&mut self) -> Result<i64, Malformed> {
        let r = self.take(8)?;
        Ok((&self.body[r]).get_i64())
    }

    pub(crate) fn uuid(&mut self) -> Result<Uuid, Malformed> {
        let r = self.take(16)?;
        Ok(Uuid::from_slice(&self.body[r]).expect("16 bytes"))
    }

    fn unsigned_varint(&mut self) -> Result<u32, Malformed> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let r = self.take(1)?;
            let byte = self.body[r.start];
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Malformed("varint longer than five bytes"))
    }

    /// A length, `None` for null: i16/i32 with -1 for null, or an unsigned varint of
    /// length + 1 with 0 for null (flexible versions).
    fn length(&mut self, wide: bool) -> Result<Option<usize>, Malformed> {
        let len = match (self.flexible, wide) {
            (true, _) => i64::from(self.unsigned_varint()?) - 1,
            (false, false) => i64::from(self.i16()?),
            (false, true) => i64::from(self.i32()?),
        };
        match len {
            -1 => Ok(None),
            n if n < 0 => Err(Malformed("negative length")),
            n => Ok(Some(n as usize)),
        }
    }

    /// The element count of a (non-null) array whose elements take at least
    /// `element_bytes_min` bytes each: a count the bytes left cannot hold is a lie, refused
    /// here, before the caller does anything with it.
    pub(crate) fn array_len(&mut self, element_bytes_min: usize) -> Result<usize, Malformed> {
        debug_assert!(element_bytes_min > 0);
        let len = self.length(true)?.ok_or(Malformed("null array"))?;
        if len > self.remaining() / element_bytes_min {
            return Err(Malformed("array longer than the request"));
        }
        Ok(len)
    }

    /// Skips a (non-null) array of fixed-size elements, `element_bytes` each.
    pub(crate) fn skip_array(&mut self, element_bytes: usize) -> Result<(), Malformed> {
        let len = self.array_len(element_bytes)?;
        // Cannot overflow: `array_len` bounded `len` by the bytes left / `element_bytes`.
        self.skip(len * element_bytes)
    }

    pub(crate) fn nullable_string(&mut self) -> Result<Option<StrBytes>, Malformed> {
        let Some(len) = self.length(false)? else {
            return Ok(None);
        };
        let r = self.take(len)?;
        StrBytes::from_utf8(self.body.slice(r))
            .map(Some)
            .map_err(|_| Malformed("string is not UTF-8"))
    }

    /// A non-nullable string, kept as a slice of the body.
    pub(crate) fn string(&mut self) -> Result<StrBytes, Malformed> {
        self.nullable_string()?
            .ok_or(Malformed("null where the schema has a string"))
    }

    /// Skips a non-nullable string the caller does not keep. Its bytes are not checked for
    /// UTF-8: Kafka's own parser does not refuse them either.
    pub(crate) fn skip_string(&mut self) -> Result<(), Malformed> {
        let len = self
            .length(false)?
            .ok_or(Malformed("null where the schema has a string"))?;
        self.skip(len)
    }

    pub(crate) fn nullable_bytes(&mut self) -> Result<Option<Bytes>, Malformed> {
        let Some(len) = self.length(true)? else {
            return Ok(None);
        };
        let r = self.take(len)?;
        Ok(Some(self.body.slice(r)))
    }

    /// Skips a tagged-field section (flexible versions only; nothing otherwise). Every field
    /// is skipped by its own size, which is checked against the bytes left like any length;
    /// a field Sluice has no use for is never parsed.
    pub(crate) fn tagged_fields(&mut self) -> Result<(), Malformed> {
        if !self.flexible {
            return Ok(());
        }
        // Each field takes at least two bytes (tag, size), so the loop ends with the body
        // whatever the count claims.
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            let _tag = self.unsigned_varint()?;
            let size = self.unsigned_varint()? as usize;
            self.skip(size)?;
        }
        Ok(())
    }
}

/// The size bounds of one API's topic array (see [`topic_array`]).
pub(crate) struct TopicArray {
    /// Topic entries, and partition entries in all, the request may list.
    pub(crate) entries_max: usize,
    /// The fewest bytes one topic entry / one partition entry can take at this version.
    pub(crate) topic_bytes_min: usize,
    pub(crate) partition_bytes_min: usize,
    /// Topics are named by id (Produce v13+, Fetch v13+), else by name.
    pub(crate) by_id: bool,
}

/// The topic array Produce and Fetch share: `[name or id, [partition entry], tags]`. Each
/// partition entry is read by `partition` (its own tags included) and appended to
/// `partitions`; each topic is reported to `topic` with its name (or the default), its id
/// (or nil) and its range in `partitions`. Counts are bounded by `shape.entries_max` and by
/// the bytes left, before anything is stored.
pub(crate) fn topic_array<P>(
    r: &mut WireReader<'_>,
    shape: &TopicArray,
    partitions: &mut Vec<P>,
    mut partition: impl FnMut(&mut WireReader<'_>) -> Result<P, Malformed>,
    mut topic: impl FnMut(StrBytes, Uuid, Range<usize>),
) -> Result<(), Malformed> {
    let topics = r.array_len(shape.topic_bytes_min)?;
    // Topics listing no partitions would otherwise be bounded by the frame only.
    if topics > shape.entries_max {
        return Err(Malformed("more topic entries than the broker accepts"));
    }
    for _ in 0..topics {
        let (name, topic_id) = match shape.by_id {
            true => (StrBytes::default(), r.uuid()?),
            false => (r.string()?, Uuid::nil()),
        };
        let first = partitions.len();
        let count = r.array_len(shape.partition_bytes_min)?;
        if first + count > shape.entries_max {
            return Err(Malformed("more partition entries than the broker accepts"));
        }
        for _ in 0..count {
            partitions.push(partition(r)?);
        }
        r.tagged_fields()?;
        topic(name, topic_id, first..partitions.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: each read refuses what is not there, and lengths and counts are checked against
    // the bytes left, never trusted.
    #[test]
    fn reads_are_bounded() {
        let body = Bytes::from_static(&[0x01, 0x02, 0x03]);
        let mut r = WireReader::new(&body, false);
        assert_eq!(r.i16(), Ok(0x0102));
        assert_eq!(r.i16(), Err(Malformed("truncated")));
        assert_eq!(r.i8(), Ok(3));
        assert_eq!(r.remaining(), 0);

        // A compact array claiming 5 elements of 4 bytes in 16 bytes.
        let mut body = vec![6u8];
        body.extend_from_slice(&[0; 16]);
        let body = Bytes::from(body);
        let mut r = WireReader::new(&body, true);
        assert_eq!(
            r.skip_array(4),
            Err(Malformed("array longer than the request"))
        );
        let mut r = WireReader::new(&body, true);
        assert_eq!(r.array_len(1), Ok(5));

        // One tagged field claiming more bytes than there are.
        let body = Bytes::from_static(&[1, 0, 9, 0, 0]);
        let mut r = WireReader::new(&body, true);
        assert_eq!(r.tagged_fields(), Err(Malformed("truncated")));

        // A varint that never ends.
        let body = Bytes::from_static(&[0xff; 8]);
        let mut r = WireReader::new(&body, true);
        assert_eq!(
            r.tagged_fields(),
            Err(Malformed("varint longer than five bytes"))
        );
    }

    // Goal: strings are refused when null where the schema forbids it, and kept strings
    // must be UTF-8; skipped ones are only bounded.
    #[test]
    fn strings() {
        let body = Bytes::from_static(&[0xff, 0xff]);
        assert!(WireReader::new(&body, false).string().is_err());
        assert!(WireReader::new(&body, false).skip_string().is_err());
        assert_eq!(WireReader::new(&body, false).nullable_string(), Ok(None));
        let body = Bytes::from_static(&[3, 0xc3, 0x28]);
        assert_eq!(
            WireReader::new(&body, true).string(),
            Err(Malformed("string is not UTF-8"))
        );
        let mut r = WireReader::new(&body, true);
        assert_eq!(r.skip_string(), Ok(()));
        assert_eq!(r.remaining(), 0);
    }
}
