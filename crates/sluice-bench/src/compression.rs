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

/// Bytes of a v2 record batch's header (base offset through record count), which a codec
/// never compresses: librdkafka's batch sizes include it.
pub const RECORD_BATCH_HEADER_BYTES: f64 = 61.0;

/// The producers' batches' own compression: the message bytes a batch carried (its average
/// message count times `message_bytes`) over the bytes of its records as sent (librdkafka's
/// topic `batchsize`, after compression, less the batch header). Always below 1 for an
/// uncompressed batch, whose every record adds at least 7 bytes of framing to its message;
/// above 1 for a compressed one whenever the codec saved more than that framing. None when
/// the statistics had no batches.
pub fn batch_ratio(
    batch_msgs_avg: Option<f64>,
    batch_bytes_avg: Option<f64>,
    message_bytes: usize,
) -> Option<f64> {
    let (msgs, bytes) = (batch_msgs_avg?, batch_bytes_avg?);
    let records_bytes = bytes - RECORD_BATCH_HEADER_BYTES;
    (msgs > 0.0 && records_bytes > 0.0).then(|| msgs * message_bytes as f64 / records_bytes)
}

/// Whether a run with `codec` looks as if its client sent the batches uncompressed: the wire
/// ratio stays near 1 while this payload compresses far better offline with the same codec,
/// and the batches (when known) were not smaller than their messages (thresholds and the
/// reasons in `limits`). Never for codec `none`.
pub fn sent_uncompressed(
    codec: &str,
    wire_ratio: f64,
    offline_ratio: f64,
    batch_ratio: Option<f64>,
) -> bool {
    codec != "none"
        && wire_ratio < limits::WIRE_RATIO_UNCOMPRESSED_MAX
        && offline_ratio > wire_ratio * limits::OFFLINE_OVER_WIRE_RATIO_MIN
        && batch_ratio.is_none_or(|b| b < limits::BATCH_RATIO_COMPRESSED_MIN)
}

/// The single-run compression warning: `codec` is the producers' codec, `wire_ratio` the run's
/// `latency_split.wire_compression_ratio` (None when no statistics came), `batch_ratio` its
/// batches' own (see `batch_ratio`), `table` the run's offline table. None when the run
/// compressed as expected or nothing can be said.
pub fn wire_ratio_warning(
    codec: &str,
    wire_ratio: Option<f64>,
    batch_ratio: Option<f64>,
    table: &CompressionTable,
) -> Option<String> {
    let wire = wire_ratio?;
    let offline = table.codecs.get(codec)?.ratio;
    let batches = batch_ratio
        .map(|b| format!(" (its batches' records {b:.2}x)"))
        .unwrap_or_default();
    sent_uncompressed(codec, wire, offline, batch_ratio).then(|| {
        format!(
            "compression={codec}, but the wire compression ratio is {wire:.2}x{batches} while \
             this payload compresses {offline:.2}x offline with {codec}: the client sent its \
             batches uncompressed, so it did less work than a compressing client and this run \
             does not measure {codec} (librdkafka does so silently against a broker that does \
             not advertise Produce v0, before 2.11.1, and for any batch that {codec} would not \
             shrink, such as one message of a few dozen bytes)"
        )
    })
}

/// Whether two wire compression ratios differ by more than `limits::WIRE_RATIO_SPREAD_MAX`
/// (the larger over the smaller), so the runs they come from are not like for like.
pub fn ratios_differ(a: f64, b: f64) -> bool {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    hi > lo * limits::WIRE_RATIO_SPREAD_MAX
}

/// The spread `ratios_differ` allows, in percent, for the warnings' text.
pub fn ratio_spread_pct() -> f64 {
    (limits::WIRE_RATIO_SPREAD_MAX - 1.0) * 100.0
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

    /// A table whose only codec row that matters is `codec` at `ratio`.
    fn table_with(codec: &str, ratio: f64) -> CompressionTable {
        let row = |ratio: f64| CodecResult {
            compressed_bytes: 1,
            ratio,
            space_saved_pct: 0.0,
            encode_micros: 0,
        };
        CompressionTable {
            raw_bytes: 1,
            sample_count: 1,
            codecs: [
                ("none".to_string(), row(1.0)),
                (codec.to_string(), row(ratio)),
            ]
            .into_iter()
            .collect(),
        }
    }

    #[test]
    fn a_codec_that_does_not_reach_the_wire_is_warned_about() {
        // Goal: the single-run warning fires exactly when a codec is set, the wire ratio
        // stays near 1, the offline ratio is far above it and the batches were no smaller
        // than their messages. Method: the case of issue 33 (snappy 2.16x offline, 0.94x on
        // the wire) and runs measured on the embedded broker, each condition broken in turn.
        let snappy = table_with("snappy", 2.16);
        let w = wire_ratio_warning("snappy", Some(0.94), Some(0.88), &snappy);
        let text = w.unwrap_or_default();
        assert!(
            text.contains("0.94x") && text.contains("0.88x") && text.contains("2.16x"),
            "{text}"
        );
        // Without batch statistics the wire ratio alone decides.
        assert!(wire_ratio_warning("snappy", Some(0.94), None, &snappy).is_some());
        // Compressed on the wire as well as the payload allows: no warning.
        assert_eq!(
            wire_ratio_warning("snappy", Some(2.18), Some(1.9), &snappy),
            None
        );
        // Compressed one-message batches at 500 msg/s: each request's own bytes hold the wire
        // ratio near 1, but the batches' records are smaller than their messages: no warning.
        assert_eq!(
            wire_ratio_warning("snappy", Some(1.07), Some(1.56), &snappy),
            None
        );
        // No codec: a ratio near 1 is what is expected.
        assert_eq!(
            wire_ratio_warning("none", Some(0.99), Some(0.88), &table_with("none", 1.0)),
            None
        );
        // Incompressible payload (random): near 1 offline too.
        assert_eq!(
            wire_ratio_warning("snappy", Some(0.98), Some(0.9), &table_with("snappy", 1.02)),
            None
        );
        // No wire statistics, or no offline row for the codec: nothing to judge.
        assert_eq!(wire_ratio_warning("snappy", None, Some(0.9), &snappy), None);
        assert_eq!(
            wire_ratio_warning("zstd", Some(0.94), Some(0.9), &snappy),
            None
        );
        // The bounds: below 1.1 on the wire, offline more than 1.5x the wire ratio, batches
        // below 1x their messages.
        assert!(sent_uncompressed("lz4", 1.09, 1.64, Some(0.99)));
        assert!(!sent_uncompressed("lz4", 1.1, 3.0, Some(0.9)));
        assert!(!sent_uncompressed("lz4", 1.0, 1.5, Some(0.9)));
        assert!(sent_uncompressed("lz4", 1.0, 1.51, Some(0.9)));
        assert!(!sent_uncompressed("lz4", 1.0, 3.0, Some(1.0)));
    }

    #[test]
    fn batch_ratio_tells_compressed_batches_from_uncompressed_ones() {
        // Goal: below 1 for every uncompressed batch, above 1 for compressed ones even of one
        // small message. Method: batch sizes librdkafka reported on the embedded broker.
        let ratio = |msgs, bytes, size| batch_ratio(Some(msgs), Some(bytes), size).unwrap_or(0.0);
        // One 128-byte message: 198 bytes uncompressed, 182.6 with lz4.
        assert!(ratio(1.0, 198.0, 128) < 1.0);
        assert!(ratio(1.0, 182.6, 128) > 1.0);
        // One 512-byte message: 582 bytes uncompressed, 389.1 with snappy.
        assert!(ratio(1.0, 582.0, 512) < 1.0);
        assert!((ratio(1.0, 389.1, 512) - 1.56).abs() < 0.01);
        // Six 512-byte messages: 3608.7 bytes uncompressed, 2016.6 with snappy.
        assert!(ratio(6.0, 3608.7, 512) < 1.0);
        assert!((ratio(6.0, 2016.6, 512) - 1.57).abs() < 0.01);
        assert_eq!(batch_ratio(None, Some(100.0), 512), None);
        assert_eq!(batch_ratio(Some(1.0), None, 512), None);
        assert_eq!(batch_ratio(Some(0.0), Some(0.0), 512), None);
        assert_eq!(batch_ratio(Some(1.0), Some(61.0), 512), None);
    }

    #[test]
    fn wire_ratios_more_than_ten_percent_apart_differ() {
        // Goal: the cross-run comparison is symmetric and its bound is the larger ratio over
        // the smaller. Method: pairs on both sides of 10 %, in both orders.
        assert!(ratios_differ(2.18, 0.99) && ratios_differ(0.99, 2.18));
        assert!(!ratios_differ(2.0, 2.2) && !ratios_differ(2.2, 2.0));
        assert!(ratios_differ(2.0, 2.21) && ratios_differ(2.21, 2.0));
        assert!(!ratios_differ(1.0, 1.0));
        assert_eq!(ratio_spread_pct().round(), 10.0);
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
