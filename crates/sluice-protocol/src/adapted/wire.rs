//! The flexible-version wire primitives the adapted messages are written in: big-endian
//! integers, unsigned varints, compact (length + 1) strings and arrays, UUIDs and tagged
//! fields (read and skipped; none written). Reads check lengths against the bytes left
//! before allocating.

use anyhow::{bail, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use uuid::Uuid;

/// A cursor over a body being decoded.
#[derive(Debug)]
pub(crate) struct Reader {
    bytes: Bytes,
}

impl Reader {
    pub fn new(bytes: Bytes) -> Self {
        Self { bytes }
    }

    fn need(&self, n: usize) -> Result<()> {
        if self.bytes.remaining() < n {
            bail!(
                "truncated: {n} bytes needed, {} left",
                self.bytes.remaining()
            );
        }
        Ok(())
    }

    pub fn i16(&mut self) -> Result<i16> {
        self.need(2)?;
        Ok(self.bytes.get_i16())
    }
    pub fn i32(&mut self) -> Result<i32> {
        self.need(4)?;
        Ok(self.bytes.get_i32())
    }
    pub fn i64(&mut self) -> Result<i64> {
        self.need(8)?;
        Ok(self.bytes.get_i64())
    }
    pub fn bool(&mut self) -> Result<bool> {
        self.need(1)?;
        Ok(self.bytes.get_u8() != 0)
    }
    pub fn uuid(&mut self) -> Result<Uuid> {
        self.need(16)?;
        let mut b = [0u8; 16];
        self.bytes.copy_to_slice(&mut b);
        Ok(Uuid::from_bytes(b))
    }

    /// An unsigned varint of at most 5 bytes (a u32), as Kafka limits them.
    pub fn uvarint(&mut self) -> Result<u32> {
        let mut value: u32 = 0;
        for i in 0..5 {
            self.need(1)?;
            let b = self.bytes.get_u8();
            value |= u32::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        bail!("varint longer than 5 bytes")
    }

    /// A compact length: `None` for null (0), else the length, checked against the bytes
    /// left at `min_each` bytes per item.
    fn compact_len(&mut self, min_each: usize) -> Result<Option<usize>> {
        let n = self.uvarint()? as usize;
        if n == 0 {
            return Ok(None);
        }
        let len = n - 1;
        self.need(len.saturating_mul(min_each))?;
        Ok(Some(len))
    }

    pub fn compact_nullable_string(&mut self) -> Result<Option<StrBytes>> {
        let Some(len) = self.compact_len(1)? else {
            return Ok(None);
        };
        let raw = self.bytes.split_to(len);
        match StrBytes::from_utf8(raw) {
            Ok(s) => Ok(Some(s)),
            Err(_) => bail!("string is not UTF-8"),
        }
    }
    pub fn compact_string(&mut self) -> Result<StrBytes> {
        match self.compact_nullable_string()? {
            Some(s) => Ok(s),
            None => bail!("null where a string is required"),
        }
    }

    pub fn compact_nullable_array<T>(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<T>,
    ) -> Result<Option<Vec<T>>> {
        let Some(len) = self.compact_len(1)? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(len);
        for _ in 0..len {
            out.push(item(self)?);
        }
        Ok(Some(out))
    }
    pub fn compact_array<T>(&mut self, item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        match self.compact_nullable_array(item)? {
            Some(v) => Ok(v),
            None => bail!("null where an array is required"),
        }
    }

    /// Skips a tagged-field section (no tag of these versions is known).
    pub fn tags(&mut self) -> Result<()> {
        let count = self.uvarint()?;
        for _ in 0..count {
            self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.need(size)?;
            self.bytes.advance(size);
        }
        Ok(())
    }

    /// A struct whose layout is the crate's at `version`.
    pub fn crate_struct<T: Decodable>(&mut self, version: i16) -> Result<T> {
        T::decode(&mut self.bytes, version)
    }

    /// The shape every topic-id version here shares: a compact array of topics, each a UUID
    /// and a compact array of partitions laid out as the crate's at `version`, then tags.
    pub fn id_topics<P: Decodable>(&mut self, version: i16) -> Result<Vec<(Uuid, Vec<P>)>> {
        self.compact_array(|r| {
            let id = r.uuid()?;
            let partitions = r.compact_array(|r| r.crate_struct::<P>(version))?;
            r.tags()?;
            Ok((id, partitions))
        })
    }
}

/// A body being encoded; the first failure (of a nested crate struct) is kept and
/// returned by [`Writer::finish`].
#[derive(Debug, Default)]
pub(crate) struct Writer {
    out: BytesMut,
    failed: Option<anyhow::Error>,
}

impl Writer {
    pub fn finish(self) -> Result<Bytes> {
        match self.failed {
            Some(e) => Err(e),
            None => Ok(self.out.freeze()),
        }
    }

    pub fn i16(&mut self, v: i16) {
        self.out.put_i16(v);
    }
    pub fn i32(&mut self, v: i32) {
        self.out.put_i32(v);
    }
    pub fn i64(&mut self, v: i64) {
        self.out.put_i64(v);
    }
    pub fn bool(&mut self, v: bool) {
        self.out.put_u8(u8::from(v));
    }
    pub fn uuid(&mut self, v: Uuid) {
        self.out.put_slice(v.as_bytes());
    }
    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.out.put_u8((v as u8) | 0x80);
            v >>= 7;
        }
        self.out.put_u8(v as u8);
    }
    fn compact_len(&mut self, len: Option<usize>) {
        match len.map(|n| u32::try_from(n + 1)) {
            None => self.uvarint(0),
            Some(Ok(n)) => self.uvarint(n),
            Some(Err(_)) => self.fail("length beyond a varint"),
        }
    }

    pub fn compact_nullable_string(&mut self, s: Option<&str>) {
        self.compact_len(s.map(str::len));
        if let Some(s) = s {
            self.out.put_slice(s.as_bytes());
        }
    }
    pub fn compact_string(&mut self, s: &str) {
        self.compact_nullable_string(Some(s));
    }

    pub fn compact_nullable_array<T>(
        &mut self,
        items: Option<&[T]>,
        mut item: impl FnMut(&mut Self, &T),
    ) {
        self.compact_len(items.map(<[T]>::len));
        for t in items.unwrap_or_default() {
            item(self, t);
        }
    }
    pub fn compact_array<T>(&mut self, items: &[T], item: impl FnMut(&mut Self, &T)) {
        self.compact_nullable_array(Some(items), item);
    }

    /// An empty tagged-field section.
    pub fn no_tags(&mut self) {
        self.uvarint(0);
    }

    /// A struct whose layout is the crate's at `version`.
    pub fn crate_struct<T: Encodable>(&mut self, v: &T, version: i16) {
        if let Err(e) = v.encode(&mut self.out, version) {
            self.failed.get_or_insert(e);
        }
    }

    /// Topics named by id with their partitions: see [`Reader::id_topics`].
    pub fn id_topics<P: Encodable>(&mut self, topics: &[(Uuid, &[P])], version: i16) {
        self.compact_array(topics, |w, (id, partitions)| {
            w.uuid(*id);
            w.compact_array(partitions, |w, p| w.crate_struct(p, version));
            w.no_tags();
        });
    }

    fn fail(&mut self, why: &str) {
        self.failed.get_or_insert_with(|| anyhow::anyhow!("{why}"));
    }
}
