//! Offline compression table (SSP's): how well each producer codec compresses this scenario's
//! payloads, measured in-process after the run so it never competes with the load. The first
//! `limits::OFFLINE_COMPRESSION_SAMPLES` messages of producer 0 (header and body, exactly as
//! sent) are concatenated and compressed once per codec: none, snappy (raw block, as inside
//! Kafka's snappy framing), lz4 (frame format, Kafka's), gzip at its fastest level (like
//! librdkafka's and SSP's gzip) and zstd at its default level. The total input is capped at
//! `limits::OFFLINE_COMPRESSION_MAX_BYTES` (fewer samples for large messages), so the table
//! costs at most a fraction of a second. One contiguous buffer compresses better than Kafka's
//! per-batch compression can, so these ratios are an upper bound on the on-wire ones
//! (`latency_split.wire_compression_ratio` has the real on-wire figure).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::time::Instant;

use serde::Serialize;

use crate::limits;
use crate::payload::{Header, PayloadPool};
use crate::scenario::Scenario;

/// Codecs in the order SSP prints them.
pub const CODECS: [&str; 5] = ["none", "snappy", "lz4", "gzip", "zstd"];

#[derive(Debug, Clone, Serialize)]
pub struct CodecResult {
    pub compressed_bytes: u64,
    /// raw / compressed.
    pub ratio: f64,
    /// (1 − compressed / raw) × 100.
    pub space_saved_pct: f64,
    /// Wall time of the one encode call.
    pub encode_micros: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompressionTable {
    pub raw_bytes: u64,
    pub sample_count: u64,
    /// Codec name -> result; a codec whose encoder failed is left out.
    pub codecs: BTreeMap<String, CodecResult>,
}

/// The concatenated sample input for `s`: producer 0's messages 0..n, headers included (their
/// timestamps advance at the scenario's rate, as on the wire).
pub fn sample_input(s: &Scenario) -> (Vec<u8>, u64) {
    let size = s.message_bytes.max(1);
    let n = (limits::OFFLINE_COMPRESSION_MAX_BYTES / size)
        .clamp(1, limits::OFFLINE_COMPRESSION_SAMPLES);
    let pool = PayloadPool::new(s.payload, s.message_bytes, s.seed);
    let gap_ns = if s.rate_msg_s > 0 {
        1_000_000_000 / s.rate_msg_s.max(1)
    } else {
        1_000
    };
    let mut all = Vec::with_capacity(n * size);
    let mut buf = Vec::with_capacity(size);
    for seq in 0..n as u64 {
        let t = seq * gap_ns;
        let h = Header {
            run_tag: 0x5eed_0000,
            producer: 0,
            flags: 0,
            seq,
            intended_ns: t,
            sent_ns: t,
        };
        pool.fill(&mut buf, &h);
        all.extend_from_slice(&buf);
    }
    (all, n as u64)
}

fn encode(codec: &str, data: &[u8]) -> Result<Vec<u8>, String> {
    match codec {
        "none" => Ok(data.to_vec()),
        "snappy" => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| e.to_string()),
        "lz4" => {
            let mut enc = lz4::EncoderBuilder::new()
                .build(Vec::new())
                .map_err(|e| e.to_string())?;
            enc.write_all(data).map_err(|e| e.to_string())?;
            let (out, r) = enc.finish();
            r.map_err(|e| e.to_string())?;
            Ok(out)
        }
        "gzip" => {
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            enc.write_all(data).map_err(|e| e.to_string())?;
            enc.finish().map_err(|e| e.to_string())
        }
        "zstd" => {
            zstd::bulk::compress(data, zstd::DEFAULT_COMPRESSION_LEVEL).map_err(|e| e.to_string())
        }
        other => Err(format!("unknown codec {other}")),
    }
}

/// Compresses `data` (of `samples` messages) once per codec.
pub fn table_of(data: &[u8], samples: u64) -> CompressionTable {
    let raw = data.len() as u64;
    let mut codecs = BTreeMap::new();
    for c in CODECS {
        let t0 = Instant::now();
        let Ok(out) = encode(c, data) else { continue };
        let micros = t0.elapsed().as_micros() as u64;
        let comp = out.len() as u64;
        codecs.insert(
            c.to_string(),
            CodecResult {
                compressed_bytes: comp,
                ratio: if comp > 0 {
                    raw as f64 / comp as f64
                } else {
                    0.0
                },
                space_saved_pct: if raw > 0 {
                    (1.0 - comp as f64 / raw as f64) * 100.0
                } else {
                    0.0
                },
                encode_micros: micros,
            },
        );
    }
    CompressionTable {
        raw_bytes: raw,
        sample_count: samples,
        codecs,
    }
}

/// The offline table for a scenario.
pub fn offline(s: &Scenario) -> CompressionTable {
    let (data, n) = sample_input(s);
    table_of(&data, n)
}

impl CompressionTable {
    /// Rows in SSP's order (codecs that failed are skipped).
    pub fn rows(&self) -> impl Iterator<Item = (&'static str, &CodecResult)> {
        CODECS
            .iter()
            .filter_map(|&c| self.codecs.get(c).map(|r| (c, r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(codec: &str, data: &[u8]) -> Vec<u8> {
        use std::io::Read as _;
        let mut out = Vec::new();
        match codec {
            "none" => out = data.to_vec(),
            "snappy" => {
                out = snap::raw::Decoder::new()
                    .decompress_vec(data)
                    .unwrap_or_default()
            }
            "lz4" => {
                if let Ok(mut d) = lz4::Decoder::new(data) {
                    let _ = d.read_to_end(&mut out);
                }
            }
            "gzip" => {
                let _ = flate2::read::GzDecoder::new(data).read_to_end(&mut out);
            }
            "zstd" => out = zstd::decode_all(data).unwrap_or_default(),
            _ => {}
        }
        out
    }

    #[test]
    fn every_codec_round_trips_and_ratios_follow_the_payload() {
        let mut s = Scenario::baseline();
        s.message_bytes = 512;
        s.payload = crate::payload::PayloadClass::Zeros;
        let (data, n) = sample_input(&s);
        assert_eq!(n, limits::OFFLINE_COMPRESSION_SAMPLES as u64);
        assert_eq!(data.len(), 512 * n as usize);
        for c in CODECS {
            let out = encode(c, &data).unwrap_or_default();
            assert_eq!(decode(c, &out), data, "{c}");
        }
        let zeros = table_of(&data, n);
        assert_eq!(zeros.codecs.len(), 5);
        assert_eq!(zeros.codecs["none"].ratio, 1.0);
        assert!(
            zeros.codecs["zstd"].ratio > 5.0,
            "{:?}",
            zeros.codecs["zstd"]
        );
        s.payload = crate::payload::PayloadClass::Random;
        let random = offline(&s);
        // Random bodies barely compress within snappy's 64 KiB blocks (no body repeats there;
        // zstd's larger window does find the pool's repeats, as it would in a big batch).
        assert!(random.codecs["zstd"].ratio < zeros.codecs["zstd"].ratio);
        assert!(
            random.codecs["snappy"].space_saved_pct < 20.0,
            "{:?}",
            random.codecs["snappy"]
        );
        assert_eq!(random.rows().map(|r| r.0).collect::<Vec<_>>(), CODECS);
    }

    #[test]
    fn big_messages_are_capped() {
        let mut s = Scenario::baseline();
        s.message_bytes = limits::MAX_MESSAGE_BYTES;
        s.payload = crate::payload::PayloadClass::Zeros;
        let (data, n) = sample_input(&s);
        assert!(n >= 1);
        assert!(data.len() <= limits::OFFLINE_COMPRESSION_MAX_BYTES.max(s.message_bytes));
    }
}
