//! The bounded record walk: reads the records of one v2 record batch, decompressing gzip,
//! snappy, lz4 or zstd as a stream, and checks their framing the way Kafka's `DefaultRecord`
//! reader and `LogValidator` do. No I/O, no wire error codes (the broker maps [`WalkError`]).
//!
//! Guarantees, for any input bytes:
//! - it never panics and never allocates more than a fixed amount per walk: decompressed
//!   bytes flow through one [`STREAM_CHUNK_BYTES`] buffer and are never materialised whole
//!   (except raw, unframed snappy, whose format needs the whole output; its declared size is
//!   checked against the cap before anything is allocated);
//! - it stops with [`WalkError::DecompressedTooLarge`] once more than
//!   [`WalkLimits::decompressed_bytes_max`] bytes have come out of the decompressor, so both
//!   memory and CPU per batch are bounded whatever the compression ratio;
//! - `Ok` means: the codec is one Kafka defines, every record's length prefix matches the
//!   fields inside it, key/value/header lengths fit, offset deltas are exactly 0, 1, 2, ...,
//!   there are exactly `recordsCount` records and no byte follows the last one.
//!
//! The walk reads only `attributes`, `baseTimestamp` and `recordsCount` of the header and
//! trusts nothing else: the guarantees above hold whether or not the batch's magic and
//! CRC-32C have been checked yet (the produce path checks the CRC once, in the log, after
//! this walk; ListOffsets walks batches the log already checked). Uncompressed records are
//! walked in place, with no copy.

use std::io::Read;
use std::ops::ControlFlow;

use sluice_record::{Attributes, BatchHeader, HEADER_LEN};

/// The codec in a batch's attributes (the batch model's: Kafka's `CompressionType` ids 0-4).
pub use sluice_record::Compression;
/// The smallest possible record: a 1-byte length and six 1-byte fields (attributes,
/// timestamp delta, offset delta, key length, value length, header count).
pub const RECORD_BYTES_MIN: usize = 7;
/// Decompressed bytes are pulled through a buffer of this size.
pub const STREAM_CHUNK_BYTES: usize = 32 * 1024;

/// First bytes of snappy-java's framed ("xerial") stream; Kafka's Java clients write it,
/// librdkafka writes raw snappy. The full header is 16 bytes (magic, version, compat).
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

/// Bounds of one walk. The broker's values live in its `limits.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkLimits {
    /// Most bytes a compressed batch may expand to.
    pub decompressed_bytes_max: usize,
    /// Largest zstd window accepted (log2 of bytes); the decoder allocates the window.
    pub zstd_window_log_max: u32,
}

/// The codec of a batch with these attributes; ids 5-7 are not defined by Kafka.
pub fn codec(attributes: Attributes) -> Result<Compression, WalkError> {
    let id = attributes.compression_id();
    attributes
        .compression()
        .ok_or(WalkError::UnsupportedCompression(id))
}

/// Why a batch's records were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WalkError {
    /// Compression id 5, 6 or 7 (Kafka: UNSUPPORTED_COMPRESSION_TYPE).
    #[error("unsupported compression codec id {0}")]
    UnsupportedCompression(i16),
    /// Bad record framing or a compressed stream that does not decode (Kafka:
    /// INVALID_RECORD; a CRC-valid batch that does not decode is not a transmission error).
    #[error("invalid record batch: {0}")]
    InvalidRecord(&'static str),
    /// The records expand past the cap (a decompression bomb, or simply too large).
    #[error("record batch decompresses to more than {max} bytes")]
    DecompressedTooLarge { max: usize },
}

/// One record as the walk sees it: enough for offsets and timestamps, nothing copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMeta {
    /// Position in the batch, which is also its offset delta (checked).
    pub offset_delta: i32,
    /// baseTimestamp + timestampDelta (wrapping, as Kafka's long arithmetic).
    pub timestamp: i64,
}

/// What a complete walk saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkSummary {
    pub records: i32,
    /// Record bytes read: the batch's own for uncompressed data, decompressed otherwise.
    pub record_bytes: usize,
}

/// Walks every record of `batch` (exactly one v2 batch), calling `visit` for each. When
/// `visit` breaks, the walk stops there and returns `Ok` without checking the rest (callers
/// that validate never break).
pub fn walk<F>(batch: &[u8], limits: &WalkLimits, mut visit: F) -> Result<WalkSummary, WalkError>
where
    F: FnMut(RecordMeta) -> ControlFlow<()>,
{
    let (header, compression, data) = open_batch(batch, limits)?;
    match compression {
        Compression::None => walk_slice(data, &header, &mut visit),
        codec => {
            let reader = decoder(codec, data, limits)?;
            let mut input = StreamInput::new(reader, limits.decompressed_bytes_max);
            walk_input(&mut input, &header, &mut visit)
        }
    }
}

/// The header fields a walk reads, the codec and the record bytes, with the record count
/// checked against what the bytes can hold.
fn open_batch<'b>(
    batch: &'b [u8],
    limits: &WalkLimits,
) -> Result<(Header, Compression, &'b [u8]), WalkError> {
    let view = BatchHeader::parse(batch).map_err(|_| SHORT_HEADER)?;
    let header = Header {
        base_timestamp: view.base_timestamp(),
        records_count: view.records_count(),
    };
    let data = &batch[HEADER_LEN..];
    let compression = codec(view.attributes())?;
    check_count(&header, compression, data.len(), limits)?;
    Ok((header, compression, data))
}

/// Walks and discards: `Ok` only for a batch whose records are all well-formed.
pub fn validate(batch: &[u8], limits: &WalkLimits) -> Result<WalkSummary, WalkError> {
    walk(batch, limits, |_| ControlFlow::Continue(()))
}

/// A batch too short for its header.
pub(crate) const SHORT_HEADER: WalkError =
    WalkError::InvalidRecord("shorter than a v2 batch header");

#[derive(Debug, Clone, Copy)]
struct Header {
    base_timestamp: i64,
    records_count: i32,
}

/// Refuses counts that cannot be true before reading anything: every record takes at least
/// [`RECORD_BYTES_MIN`] bytes, so a huge `recordsCount` over a few bytes (uncompressed), or
/// over more bytes than the cap lets a batch expand to (compressed), is refused as invalid,
/// the answer Kafka gives once the records run out.
fn check_count(
    header: &Header,
    compression: Compression,
    data_bytes: usize,
    limits: &WalkLimits,
) -> Result<(), WalkError> {
    let count = usize::try_from(header.records_count)
        .ok()
        .filter(|&c| c > 0)
        .ok_or(WalkError::InvalidRecord("recordsCount is not positive"))?;
    let room = match compression {
        Compression::None => data_bytes,
        _ => limits.decompressed_bytes_max,
    };
    if count.saturating_mul(RECORD_BYTES_MIN) > room {
        return Err(WalkError::InvalidRecord(
            "recordsCount exceeds what the batch can hold",
        ));
    }
    Ok(())
}

/// Where record bytes come from: the batch itself, or a decompressor.
trait Input {
    /// The next byte; running out inside a record is a framing error.
    fn byte(&mut self) -> Result<u8, WalkError>;
    /// Skips `n` bytes (a key, value or header), failing if fewer are left.
    fn skip(&mut self, n: usize) -> Result<(), WalkError>;
    /// Whether every byte has been read.
    fn at_end(&mut self) -> Result<bool, WalkError>;
    /// Bytes read so far.
    fn consumed(&self) -> usize;
}

const PREMATURE_END: WalkError =
    WalkError::InvalidRecord("incorrect declared batch size, premature end of records");

/// Uncompressed records through the generic walk: the reference [`walk_slice`] is checked
/// against (tests only; the fuzz harness compares them on every case).
#[cfg(test)]
pub(crate) fn walk_generic<F>(
    batch: &[u8],
    limits: &WalkLimits,
    mut visit: F,
) -> Result<WalkSummary, WalkError>
where
    F: FnMut(RecordMeta) -> ControlFlow<()>,
{
    let (header, compression, data) = open_batch(batch, limits)?;
    match compression {
        Compression::None => walk_input(&mut SliceInput { data, at: 0 }, &header, &mut visit),
        _ => walk(batch, limits, visit),
    }
}

#[cfg(test)]
struct SliceInput<'a> {
    data: &'a [u8],
    at: usize,
}

#[cfg(test)]
impl Input for SliceInput<'_> {
    fn byte(&mut self) -> Result<u8, WalkError> {
        let b = *self.data.get(self.at).ok_or(PREMATURE_END)?;
        self.at += 1;
        Ok(b)
    }
    fn skip(&mut self, n: usize) -> Result<(), WalkError> {
        if n > self.data.len() - self.at {
            return Err(PREMATURE_END);
        }
        self.at += n;
        Ok(())
    }
    fn at_end(&mut self) -> Result<bool, WalkError> {
        Ok(self.at == self.data.len())
    }
    fn consumed(&self) -> usize {
        self.at
    }
}

/// Decompressed bytes through one fixed buffer, counting against the cap.
struct StreamInput<'a> {
    reader: Box<dyn Read + 'a>,
    buf: Box<[u8]>,
    at: usize,
    filled: usize,
    /// Bytes taken out of the decompressor so far.
    produced: usize,
    produced_max: usize,
}

impl<'a> StreamInput<'a> {
    fn new(reader: Box<dyn Read + 'a>, produced_max: usize) -> Self {
        Self {
            reader,
            buf: vec![0u8; STREAM_CHUNK_BYTES].into_boxed_slice(),
            at: 0,
            filled: 0,
            produced: 0,
            produced_max,
        }
    }

    /// Refills the buffer; `Ok(false)` at the end of the stream. Asks the decompressor for at
    /// most one byte past the cap, so a bomb costs at most the cap in CPU.
    fn fill(&mut self) -> Result<bool, WalkError> {
        debug_assert_eq!(self.at, self.filled, "refill only an exhausted buffer");
        let allowed = self
            .produced_max
            .saturating_sub(self.produced)
            .saturating_add(1);
        let want = self.buf.len().min(allowed);
        let n = loop {
            match self.reader.read(&mut self.buf[..want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) if e.get_ref().is_some_and(|inner| inner.is::<CapExceeded>()) => {
                    return Err(WalkError::DecompressedTooLarge {
                        max: self.produced_max,
                    })
                }
                Err(_) => return Err(UNDECODABLE),
            }
        };
        self.produced += n;
        if self.produced > self.produced_max {
            return Err(WalkError::DecompressedTooLarge {
                max: self.produced_max,
            });
        }
        assert!(self.produced <= self.produced_max, "never past the cap");
        self.at = 0;
        self.filled = n;
        Ok(n > 0)
    }
}

impl Input for StreamInput<'_> {
    fn byte(&mut self) -> Result<u8, WalkError> {
        if self.at == self.filled && !self.fill()? {
            return Err(PREMATURE_END);
        }
        let b = self.buf[self.at];
        self.at += 1;
        Ok(b)
    }
    fn skip(&mut self, mut n: usize) -> Result<(), WalkError> {
        while n > 0 {
            if self.at == self.filled && !self.fill()? {
                return Err(PREMATURE_END);
            }
            let step = n.min(self.filled - self.at);
            self.at += step;
            n -= step;
        }
        Ok(())
    }
    fn at_end(&mut self) -> Result<bool, WalkError> {
        Ok(self.at == self.filled && !self.fill()?)
    }
    fn consumed(&self) -> usize {
        self.produced - (self.filled - self.at)
    }
}

fn walk_input<I: Input, F>(
    input: &mut I,
    header: &Header,
    visit: &mut F,
) -> Result<WalkSummary, WalkError>
where
    F: FnMut(RecordMeta) -> ControlFlow<()>,
{
    let count = header.records_count;
    debug_assert!(count > 0, "check_count refuses empty batches");
    for index in 0..count {
        let timestamp_delta = read_record(input, index)?;
        let meta = RecordMeta {
            offset_delta: index,
            timestamp: header.base_timestamp.wrapping_add(timestamp_delta),
        };
        if visit(meta).is_break() {
            return Ok(summary(index + 1, input));
        }
    }
    debug_assert!(input.consumed() >= count as usize * RECORD_BYTES_MIN);
    if !input.at_end()? {
        return Err(WalkError::InvalidRecord(
            "incorrect declared batch size, records still remaining",
        ));
    }
    Ok(summary(count, input))
}

fn summary<I: Input>(records: i32, input: &I) -> WalkSummary {
    WalkSummary {
        records,
        record_bytes: input.consumed(),
    }
}

/// The walk over uncompressed records, on the slice itself: exactly the checks, errors and
/// visits of [`walk_input`] over the batch's bytes, with one bound check per byte instead
/// of two and a one-byte fast path for varints. It is the produce path's hot loop for small
/// records (the generic walk took 13 % of the broker's CPU producing 100 B records); the
/// fuzz harness checks that both walks agree on every case (`walk_generic`).
fn walk_slice<F>(data: &[u8], header: &Header, visit: &mut F) -> Result<WalkSummary, WalkError>
where
    F: FnMut(RecordMeta) -> ControlFlow<()>,
{
    let count = header.records_count;
    debug_assert!(count > 0, "check_count refuses empty batches");
    let mut at = 0;
    for index in 0..count {
        prefetch(data, at + PREFETCH_AHEAD_BYTES);
        let timestamp_delta = slice_record(data, &mut at, index)?;
        let meta = RecordMeta {
            offset_delta: index,
            timestamp: header.base_timestamp.wrapping_add(timestamp_delta),
        };
        if visit(meta).is_break() {
            return Ok(WalkSummary {
                records: index + 1,
                record_bytes: at,
            });
        }
    }
    if at != data.len() {
        return Err(WalkError::InvalidRecord(
            "incorrect declared batch size, records still remaining",
        ));
    }
    Ok(WalkSummary {
        records: count,
        record_bytes: at,
    })
}

/// How far ahead of the record being read the walk asks the CPU to fetch the batch's bytes.
/// A produce request's records are walked long after the socket copy put them in memory
/// (a 12-partition request holds about 3 MiB), so the walk waits on memory: each record's
/// position depends on the lengths inside the one before, and 100 B records were walked at
/// 0.25-0.28 ms per MB from memory against 0.09 in the cache. A prefetch 2 KiB ahead made it
/// 0.15-0.16 (`cargo bench -p sluice-protocol --bench record_walk`); 0.5-1 KiB ahead gained
/// less, 4-8 KiB no more.
const PREFETCH_AHEAD_BYTES: usize = 2048;

/// Asks the CPU to bring the cache line holding `data[at]` in (nothing past the end).
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch(data: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(byte) = data.get(at) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: a prefetch is a hint that reads and writes nothing, for any address; this
        // one points into `data` besides.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(byte).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at);
}

/// One record at `*at` ([`read_record`]'s checks); returns its timestamp delta and moves
/// `*at` past it.
#[inline]
fn slice_record(data: &[u8], at: &mut usize, index: i32) -> Result<i64, WalkError> {
    let mut length = SliceBody::new(data, *at, 5);
    let declared = length.varint(5)? as i32;
    let declared = usize::try_from(declared)
        .map_err(|_| WalkError::InvalidRecord("negative record length"))?;
    let mut body = SliceBody::new(data, length.at, declared);
    body.byte()?; // attributes: unused in v2
    let timestamp_delta = body.varint(10)?;
    if body.varint(5)? as i32 != index {
        return Err(WalkError::InvalidRecord(
            "offset deltas are not 0, 1, 2, ...",
        ));
    }
    body.skip_field(true)?; // key
    body.skip_field(true)?; // value
    let headers = body.varint(5)? as i32;
    if headers < 0 || headers as usize > body.end - body.at {
        return Err(WalkError::InvalidRecord("invalid number of record headers"));
    }
    for _ in 0..headers {
        body.skip_field(false)?; // header key: never null
        body.skip_field(true)?; // header value
    }
    if body.at != body.end {
        return Err(WalkError::InvalidRecord(
            "record is longer than its fields (bytes left over)",
        ));
    }
    *at = body.at;
    Ok(timestamp_delta)
}

/// A record's bytes inside the batch's: reading past the record's declared size is
/// `BODY_OVERRUN`, past the batch's data `PREMATURE_END`, checked in that order as
/// [`Body`] over [`Input`] does. Invariant: `at <= end` and `at <= data.len()`.
struct SliceBody<'a> {
    data: &'a [u8],
    at: usize,
    /// Where the record's declared size ends (may lie past the data).
    end: usize,
}

impl<'a> SliceBody<'a> {
    #[inline]
    fn new(data: &'a [u8], at: usize, len: usize) -> Self {
        debug_assert!(at <= data.len());
        Self {
            data,
            at,
            end: at.saturating_add(len),
        }
    }

    #[inline]
    fn byte(&mut self) -> Result<u8, WalkError> {
        if self.at >= self.end {
            return Err(BODY_OVERRUN);
        }
        let b = *self.data.get(self.at).ok_or(PREMATURE_END)?;
        self.at += 1;
        Ok(b)
    }

    /// A zigzag varint of at most `max_bytes` bytes; one byte is the common case.
    #[inline]
    fn varint(&mut self, max_bytes: u32) -> Result<i64, WalkError> {
        let first = self.byte()?;
        let mut raw = u64::from(first & 0x7f);
        if first & 0x80 != 0 {
            let mut i = 1;
            loop {
                if i == max_bytes {
                    return Err(WalkError::InvalidRecord("varint is too long"));
                }
                let b = self.byte()?;
                raw |= u64::from(b & 0x7f) << (7 * i);
                if b & 0x80 == 0 {
                    break;
                }
                i += 1;
            }
        }
        Ok((raw >> 1) as i64 ^ -((raw & 1) as i64))
    }

    #[inline]
    fn skip_field(&mut self, nullable: bool) -> Result<(), WalkError> {
        match self.varint(5)? as i32 {
            -1 if nullable => Ok(()),
            len if len >= 0 => {
                let n = len as usize;
                if n > self.end - self.at {
                    return Err(BODY_OVERRUN);
                }
                if n > self.data.len() - self.at {
                    return Err(PREMATURE_END);
                }
                self.at += n;
                Ok(())
            }
            _ => Err(WalkError::InvalidRecord("negative field length")),
        }
    }
}

/// A record body being read: every field must fit inside the length the record declared.
struct Body<'i, I> {
    input: &'i mut I,
    left: usize,
}

const BODY_OVERRUN: WalkError =
    WalkError::InvalidRecord("record fields run past the record's declared size");

impl<I: Input> Body<'_, I> {
    fn byte(&mut self) -> Result<u8, WalkError> {
        self.left = self.left.checked_sub(1).ok_or(BODY_OVERRUN)?;
        self.input.byte()
    }

    /// A zigzag varint of at most `max_bytes` bytes (5 for an int, 10 for a long).
    fn varint(&mut self, max_bytes: u32) -> Result<i64, WalkError> {
        let mut raw: u64 = 0;
        for i in 0..max_bytes {
            let b = self.byte()?;
            raw |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        Err(WalkError::InvalidRecord("varint is too long"))
    }

    fn varint32(&mut self) -> Result<i32, WalkError> {
        // Five 7-bit groups can exceed 32 bits; Kafka keeps the low 32, so does this.
        Ok(self.varint(5)? as i32)
    }

    fn skip(&mut self, n: usize) -> Result<(), WalkError> {
        self.left = self.left.checked_sub(n).ok_or(BODY_OVERRUN)?;
        self.input.skip(n)
    }

    /// A length-prefixed field: -1 (null) when `nullable`, else 0 or more bytes, skipped.
    fn skip_field(&mut self, nullable: bool) -> Result<(), WalkError> {
        match self.varint32()? {
            -1 if nullable => Ok(()),
            len if len >= 0 => self.skip(len as usize),
            _ => Err(WalkError::InvalidRecord("negative field length")),
        }
    }
}

/// Reads one record (Kafka's `DefaultRecord` layout) and returns its timestamp delta.
fn read_record<I: Input>(input: &mut I, index: i32) -> Result<i64, WalkError> {
    let mut length = Body { input, left: 5 };
    let declared = length.varint32()?;
    let declared = usize::try_from(declared)
        .map_err(|_| WalkError::InvalidRecord("negative record length"))?;
    let mut body = Body {
        input: length.input,
        left: declared,
    };
    body.byte()?; // attributes: unused in v2
    let timestamp_delta = body.varint(10)?;
    if body.varint32()? != index {
        return Err(WalkError::InvalidRecord(
            "offset deltas are not 0, 1, 2, ...",
        ));
    }
    body.skip_field(true)?; // key
    body.skip_field(true)?; // value
    let headers = body.varint32()?;
    if headers < 0 || headers as usize > body.left {
        return Err(WalkError::InvalidRecord("invalid number of record headers"));
    }
    for _ in 0..headers {
        body.skip_field(false)?; // header key: never null
        body.skip_field(true)?; // header value
    }
    if body.left != 0 {
        return Err(WalkError::InvalidRecord(
            "record is longer than its fields (bytes left over)",
        ));
    }
    Ok(timestamp_delta)
}

const UNDECODABLE: WalkError = WalkError::InvalidRecord("compressed records do not decode");

/// A streaming decompressor over `data`.
pub(crate) fn decoder<'a>(
    codec: Compression,
    data: &'a [u8],
    limits: &WalkLimits,
) -> Result<Box<dyn Read + 'a>, WalkError> {
    Ok(match codec {
        Compression::None => Box::new(data),
        // Java's GZIPInputStream reads concatenated members; so does this.
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Compression::Snappy => snappy_reader(data, limits.decompressed_bytes_max)?,
        Compression::Lz4 => Box::new(lz4::Decoder::new(data).map_err(|_| UNDECODABLE)?),
        Compression::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(data).map_err(|_| UNDECODABLE)?;
            d.window_log_max(limits.zstd_window_log_max)
                .map_err(|_| UNDECODABLE)?;
            Box::new(d)
        }
    })
}

/// Snappy as Kafka clients write it: xerial-framed blocks (Java) or one raw block
/// (librdkafka), told apart by the magic, as snappy-java's reader does.
fn snappy_reader<'a>(data: &'a [u8], bytes_max: usize) -> Result<Box<dyn Read + 'a>, WalkError> {
    if data.len() >= XERIAL_HEADER_BYTES && data.starts_with(XERIAL_MAGIC) {
        return Ok(Box::new(XerialReader {
            rest: &data[XERIAL_HEADER_BYTES..],
            block: Vec::new(),
            at: 0,
            bytes_max,
            produced: 0,
        }));
    }
    // Raw snappy must be decompressed whole; its header declares the size, checked first.
    let len = snap::raw::decompress_len(data).map_err(|_| UNDECODABLE)?;
    if len > bytes_max {
        return Err(WalkError::DecompressedTooLarge { max: bytes_max });
    }
    let out = snap::raw::Decoder::new()
        .decompress_vec(data)
        .map_err(|_| UNDECODABLE)?;
    Ok(Box::new(std::io::Cursor::new(out)))
}

/// A decompressor's way of saying a block would pass the cap before it is allocated.
#[derive(Debug)]
struct CapExceeded;

impl std::fmt::Display for CapExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("decompressed size cap exceeded")
    }
}

impl std::error::Error for CapExceeded {}

/// xerial framing: `[u32 length][raw snappy block]...`, decompressed one block at a time
/// into a reused buffer. A block declaring more than what is left of the cap is refused
/// before it is allocated.
struct XerialReader<'a> {
    rest: &'a [u8],
    block: Vec<u8>,
    at: usize,
    bytes_max: usize,
    produced: usize,
}

impl XerialReader<'_> {
    fn next_block(&mut self) -> std::io::Result<()> {
        let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_owned());
        if self.rest.len() < 4 {
            return Err(bad("truncated xerial block length"));
        }
        let len = u32::from_be_bytes([self.rest[0], self.rest[1], self.rest[2], self.rest[3]]);
        let len = len as usize;
        if len > self.rest.len() - 4 {
            return Err(bad("xerial block runs past the data"));
        }
        let compressed = &self.rest[4..4 + len];
        self.rest = &self.rest[4 + len..];
        let out_len = snap::raw::decompress_len(compressed).map_err(|_| bad("snappy header"))?;
        if out_len > self.bytes_max - self.produced {
            return Err(std::io::Error::other(CapExceeded));
        }
        debug_assert!(self.produced + out_len <= self.bytes_max);
        self.block.resize(out_len, 0);
        snap::raw::Decoder::new()
            .decompress(compressed, &mut self.block)
            .map_err(|_| bad("snappy block"))?;
        self.produced += out_len;
        self.at = 0;
        Ok(())
    }
}

impl Read for XerialReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.block.len() {
            if self.rest.is_empty() {
                return Ok(0);
            }
            self.next_block()?;
        }
        let n = out.len().min(self.block.len() - self.at);
        out[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

#[cfg(test)]
#[path = "record_walk_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "record_walk_fuzz.rs"]
mod fuzz;
