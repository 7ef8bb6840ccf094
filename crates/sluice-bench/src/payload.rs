//! Message bodies and the bench header.
//!
//! Every message is `header ++ body`. The fixed 40-byte little-endian header carries what the
//! consumer needs to time and audit the message; the body is generated for `size - 40` bytes,
//! so the header never overwrites generated content.
//!
//! Header layout: `magic "SLB1"` (4) · run tag u32 · producer id u32 · flags u32 (bit 0: sent
//! during warmup) · sequence u64 (per producer, dense from 0) · intended send time u64 ·
//! actual send time u64. Times are nanoseconds since the run's monotonic epoch: producers and
//! consumers share one process and one clock, so there is no clock skew to correct.
//!
//! Bodies are deterministic for a seed: a pool of distinct bodies per class is generated once
//! (bounded by `limits::PAYLOAD_POOL_MAX_BYTES`) and message `seq` of producer `p` picks one,
//! so compressors see realistic variety rather than one repeated message.

use crate::limits;

pub const HEADER_BYTES: usize = 40;
// The smallest message the flags accept is exactly one header.
const _: () = assert!(HEADER_BYTES == limits::MIN_MESSAGE_BYTES);
const MAGIC: [u8; 4] = *b"SLB1";
pub const FLAG_WARMUP: u32 = 1;
/// Sent inside a transaction the producer will abort (`txn`): never to be delivered to a
/// read_committed consumer, never expected by the audit.
pub const FLAG_TXN_ABORTED: u32 = 2;

/// The decoded bench header of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub run_tag: u32,
    pub producer: u32,
    pub flags: u32,
    pub seq: u64,
    pub intended_ns: u64,
    pub sent_ns: u64,
}

impl Header {
    pub fn is_warmup(&self) -> bool {
        self.flags & FLAG_WARMUP != 0
    }

    pub fn is_txn_aborted(&self) -> bool {
        self.flags & FLAG_TXN_ABORTED != 0
    }

    /// Writes the header into the first `HEADER_BYTES` of `buf` (which must be at least that long;
    /// callers size buffers from the validated message size).
    pub fn write(&self, buf: &mut [u8]) {
        if buf.len() < HEADER_BYTES {
            return;
        }
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4..8].copy_from_slice(&self.run_tag.to_le_bytes());
        buf[8..12].copy_from_slice(&self.producer.to_le_bytes());
        buf[12..16].copy_from_slice(&self.flags.to_le_bytes());
        buf[16..24].copy_from_slice(&self.seq.to_le_bytes());
        buf[24..32].copy_from_slice(&self.intended_ns.to_le_bytes());
        buf[32..40].copy_from_slice(&self.sent_ns.to_le_bytes());
    }

    /// Rewrites only the actual send time (a retry after a full client queue).
    pub fn set_sent_ns(buf: &mut [u8], sent_ns: u64) {
        if buf.len() >= HEADER_BYTES {
            buf[32..40].copy_from_slice(&sent_ns.to_le_bytes());
        }
    }

    /// Decodes a header; `None` for anything that is not a bench message.
    pub fn read(buf: &[u8]) -> Option<Header> {
        if buf.len() < HEADER_BYTES || buf[0..4] != MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
        let u64_at = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&buf[i..i + 8]);
            u64::from_le_bytes(b)
        };
        Some(Header {
            run_tag: u32_at(4),
            producer: u32_at(8),
            flags: u32_at(12),
            seq: u64_at(16),
            intended_ns: u64_at(24),
            sent_ns: u64_at(32),
        })
    }
}

/// What the body bytes look like; it decides how well they compress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PayloadClass {
    /// Uniform random bytes (incompressible).
    Random,
    /// All zero bytes (maximally compressible).
    Zeros,
    /// Words from an English-like vocabulary.
    Text,
    /// Newline-separated JSON event objects.
    Json,
    /// Apache-style access log lines.
    Logline,
    /// By sequence: text, json, logline, random, zeros (one in five each).
    Mixed,
    /// teranode's txmeta v2 records: many entries packed into one record (see `gen_txmeta`).
    Txmeta,
}

impl PayloadClass {
    pub fn name(self) -> &'static str {
        match self {
            PayloadClass::Random => "random",
            PayloadClass::Zeros => "zeros",
            PayloadClass::Text => "text",
            PayloadClass::Json => "json",
            PayloadClass::Logline => "logline",
            PayloadClass::Mixed => "mixed",
            PayloadClass::Txmeta => "txmeta",
        }
    }
}

const MIXED_ORDER: [PayloadClass; 5] = [
    PayloadClass::Text,
    PayloadClass::Json,
    PayloadClass::Logline,
    PayloadClass::Random,
    PayloadClass::Zeros,
];

/// SplitMix64: a tiny deterministic generator; payload content only needs to be reproducible
/// from the seed, not cryptographically strong.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (n > 0; slight modulo bias is irrelevant here).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const WORDS: &[&str] = &[
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "one",
    "all",
    "we",
    "can",
    "their",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "broker",
    "partition",
    "offset",
    "record",
    "batch",
    "segment",
    "replica",
    "leader",
    "consumer",
    "producer",
    "topic",
    "log",
    "commit",
    "latency",
    "throughput",
    "stream",
    "queue",
    "message",
];
const EVENTS: &[&str] = &["click", "view", "purchase", "signup", "logout", "search"];
const REGIONS: &[&str] = &["eu-west", "us-east", "ap-south", "sa-east"];
const METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE"];
const PATHS: &[&str] = &[
    "/",
    "/api/v1/items",
    "/login",
    "/static/app.js",
    "/search?q=kafka",
];
const STATUSES: &[u32] = &[200, 200, 200, 301, 404, 500];
const AGENTS: &[&str] = &[
    "Mozilla/5.0 (X11; Linux x86_64)",
    "curl/8.5.0",
    "kafka-client/3.7",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4)",
];

fn gen_body(class: PayloadClass, len: usize, rng: &mut SplitMix64, index: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 256);
    match class {
        PayloadClass::Random | PayloadClass::Mixed => {
            while out.len() < len {
                out.extend_from_slice(&rng.next_u64().to_le_bytes());
            }
        }
        PayloadClass::Zeros => out.resize(len, 0),
        PayloadClass::Txmeta => gen_txmeta(&mut out, len, rng),
        PayloadClass::Text => {
            while out.len() < len {
                if !out.is_empty() {
                    out.push(if rng.below(12) == 0 { b'\n' } else { b' ' });
                }
                out.extend_from_slice(rng.pick(WORDS).as_bytes());
            }
        }
        PayloadClass::Json => {
            let mut n = 0u64;
            while out.len() < len {
                let line = format!(
                    "{{\"ts\":{},\"seq\":{},\"user_id\":{},\"event\":\"{}\",\"region\":\"{}\",\"value\":{},\"ok\":{}}}\n",
                    1_700_000_000_000_000_000u64 + rng.below(1_000_000_000_000),
                    index * 1000 + n,
                    rng.below(1_000_000_000),
                    rng.pick(EVENTS),
                    rng.pick(REGIONS),
                    rng.below(100_000),
                    rng.below(8) != 0,
                );
                out.extend_from_slice(line.as_bytes());
                n += 1;
            }
        }
        PayloadClass::Logline => {
            let mut n = 0u64;
            while out.len() < len {
                let line = format!(
                    "127.0.0.1 - - [{}] \"{} {} HTTP/1.1\" {} {} \"-\" \"{}\" seq={}\n",
                    1_700_000_000u64 + rng.below(10_000_000),
                    rng.pick(METHODS),
                    rng.pick(PATHS),
                    STATUSES[rng.below(STATUSES.len() as u64) as usize],
                    rng.below(65_536),
                    rng.pick(AGENTS),
                    index * 1000 + n,
                );
                out.extend_from_slice(line.as_bytes());
                n += 1;
            }
        }
    }
    out.truncate(len);
    out
}

/// txmeta v2 layout: an 8-byte record header (magic 0xFF, version 0x02, two zero bytes, u32 LE
/// entry count), then per entry a u64 LE key hash, a 32-byte transaction id, a 1-byte action
/// (0 add, 1 delete), a u32 LE value length and the value. The key hash here is a seeded
/// pseudo-random stand-in for teranode's xxhash64 (routing is by explicit partition anyway).
pub const TXMETA_RECORD_HEADER_BYTES: usize = 8;
pub const TXMETA_VALUE_BYTES: usize = 256;
pub const TXMETA_ENTRY_BYTES: usize = 8 + 32 + 1 + 4 + TXMETA_VALUE_BYTES;

/// The message size of a txmeta record with `entries` entries (bench header included).
pub fn txmeta_message_bytes(entries: u32) -> usize {
    HEADER_BYTES + TXMETA_RECORD_HEADER_BYTES + entries as usize * TXMETA_ENTRY_BYTES
}

fn gen_txmeta(out: &mut Vec<u8>, len: usize, rng: &mut SplitMix64) {
    let entries = len.saturating_sub(TXMETA_RECORD_HEADER_BYTES) / TXMETA_ENTRY_BYTES;
    out.extend_from_slice(&[0xFF, 0x02, 0, 0]);
    out.extend_from_slice(&(entries as u32).to_le_bytes());
    for _ in 0..entries {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
        for _ in 0..4 {
            out.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        out.push(u8::from(rng.below(8) == 0));
        out.extend_from_slice(&(TXMETA_VALUE_BYTES as u32).to_le_bytes());
        for _ in 0..TXMETA_VALUE_BYTES / 8 {
            out.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
    }
    // Sizes come from `txmeta_message_bytes`; any other size is padded (never truncated into
    // a half entry, since the caller truncates to `len`).
    out.resize(len.max(out.len()), 0);
}

/// Pre-generated bodies for every class a run uses.
#[derive(Debug)]
pub struct PayloadPool {
    class: PayloadClass,
    /// Indexed like `MIXED_ORDER` for `Mixed`, else a single entry.
    bodies: Vec<Vec<Vec<u8>>>,
    message_bytes: usize,
}

impl PayloadPool {
    /// `message_bytes` is validated by the caller to be in the limits' range.
    pub fn new(class: PayloadClass, message_bytes: usize, seed: u64) -> Self {
        let body_len = message_bytes.saturating_sub(HEADER_BYTES);
        let classes: Vec<PayloadClass> = match class {
            PayloadClass::Mixed => MIXED_ORDER.to_vec(),
            c => vec![c],
        };
        let per_class_budget = limits::PAYLOAD_POOL_MAX_BYTES / classes.len();
        let per_class =
            (per_class_budget / body_len.max(1)).clamp(1, limits::PAYLOAD_POOL_PER_CLASS);
        let mut rng = SplitMix64::new(seed);
        let bodies = classes
            .iter()
            .map(|&c| {
                // Zeros are all identical anyway; keep one copy.
                let n = if c == PayloadClass::Zeros {
                    1
                } else {
                    per_class
                };
                (0..n as u64)
                    .map(|i| gen_body(c, body_len, &mut rng, i))
                    .collect()
            })
            .collect();
        PayloadPool {
            class,
            bodies,
            message_bytes,
        }
    }

    pub fn message_bytes(&self) -> usize {
        self.message_bytes
    }

    /// The body for message `seq` of `producer`.
    pub fn body(&self, producer: u32, seq: u64) -> &[u8] {
        let class_index = match self.class {
            PayloadClass::Mixed => (seq % MIXED_ORDER.len() as u64) as usize,
            _ => 0,
        };
        let pool = &self.bodies[class_index];
        // Spread producers over the pool so they do not send the same body at the same time.
        let i = (seq
            .wrapping_mul(7919)
            .wrapping_add(producer as u64 * 104_729))
            % pool.len() as u64;
        &pool[i as usize]
    }

    /// Fills `buf` (of `message_bytes` length) with header and body for one message.
    pub fn fill(&self, buf: &mut Vec<u8>, header: &Header) {
        buf.clear();
        buf.resize(HEADER_BYTES, 0);
        header.write(buf);
        buf.extend_from_slice(self.body(header.producer, header.seq));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_rejects_foreign_bytes() {
        let h = Header {
            run_tag: 7,
            producer: 3,
            flags: FLAG_WARMUP,
            seq: 1 << 40,
            intended_ns: 12,
            sent_ns: 99,
        };
        let mut buf = vec![0u8; 64];
        h.write(&mut buf);
        assert_eq!(Header::read(&buf), Some(h));
        Header::set_sent_ns(&mut buf, 1234);
        assert_eq!(Header::read(&buf).map(|x| x.sent_ns), Some(1234));
        assert!(Header::read(&buf[..HEADER_BYTES - 1]).is_none());
        buf[0] = b'X';
        assert!(Header::read(&buf).is_none());
    }

    #[test]
    fn every_class_fills_exactly_the_message_size_and_is_seeded() {
        for class in [
            PayloadClass::Random,
            PayloadClass::Zeros,
            PayloadClass::Text,
            PayloadClass::Json,
            PayloadClass::Logline,
            PayloadClass::Mixed,
        ] {
            for size in [HEADER_BYTES, HEADER_BYTES + 1, 512, 4096] {
                let a = PayloadPool::new(class, size, 42);
                let b = PayloadPool::new(class, size, 42);
                let mut buf = Vec::new();
                let h = Header {
                    run_tag: 1,
                    producer: 0,
                    flags: 0,
                    seq: 5,
                    intended_ns: 0,
                    sent_ns: 0,
                };
                a.fill(&mut buf, &h);
                assert_eq!(buf.len(), size, "{class:?} {size}");
                assert_eq!(a.body(2, 9), b.body(2, 9));
            }
        }
    }

    #[test]
    fn txmeta_records_are_well_formed() {
        let size = txmeta_message_bytes(3);
        let pool = PayloadPool::new(PayloadClass::Txmeta, size, 7);
        let body = pool.body(0, 0);
        assert_eq!(body.len() + HEADER_BYTES, size);
        assert_eq!(&body[..4], &[0xFF, 0x02, 0, 0]);
        assert_eq!(u32::from_le_bytes([body[4], body[5], body[6], body[7]]), 3);
        for e in 0..3 {
            let at = TXMETA_RECORD_HEADER_BYTES + e * TXMETA_ENTRY_BYTES;
            assert!(body[at + 40] <= 1, "action byte");
            let vlen =
                u32::from_le_bytes([body[at + 41], body[at + 42], body[at + 43], body[at + 44]]);
            assert_eq!(vlen as usize, TXMETA_VALUE_BYTES);
        }
    }

    #[test]
    fn text_bodies_differ_between_messages() {
        let pool = PayloadPool::new(PayloadClass::Text, 512, 1);
        assert_ne!(pool.body(0, 0), pool.body(0, 1));
    }
}
