//! Decoding request bodies and encoding responses at a negotiated version.
//!
//! Responses are written into one reusable buffer per connection: size prefix, response
//! header at the version the API requires (ApiVersions is always header v0), then the body.
//! The buffer grows once per response, by the encoded size computed up front.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};

use crate::error::ProtocolError;
use crate::frame::SIZE_PREFIX_BYTES;
use crate::registry::ApiSupport;

/// Kafka's UNSUPPORTED_VERSION error code.
pub const UNSUPPORTED_VERSION: i16 =
    kafka_protocol::error::ResponseError::UnsupportedVersion.code();

/// Decodes a request body; decode failures become [`ProtocolError::Malformed`].
///
/// Bytes left after the body are ignored, as Kafka ignores them: librdkafka 2.x writes a
/// 4-byte null array into Metadata v9+ "all topics" requests where the schema has a 1-byte
/// varint, so refusing leftovers would refuse a real client. Leftovers cost nothing extra:
/// the frame is charged to the request-memory budget like any other until its response is
/// written, and no buffer outlives it.
pub fn decode_request<R: Decodable>(body: &mut Bytes, version: i16) -> Result<R, ProtocolError> {
    R::decode(body, version).map_err(|e| ProtocolError::Malformed(e.to_string()))
}

/// Appends one framed response (size prefix, header, body) to `out`.
pub fn encode_response<R: Encodable>(
    out: &mut BytesMut,
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Result<(), ProtocolError> {
    let start = out.len();
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    let header_version = api_key.response_header_version(version);
    // One allocation of the exact size instead of a doubling per growth step: the sizing
    // pass walks the response structure only, which costs far less than the copies it saves.
    let size = header
        .compute_size(header_version)
        .and_then(|h| Ok(h + body.compute_size(version)?))
        .map_err(|e| ProtocolError::Encode(e.to_string()))?;
    out.reserve(SIZE_PREFIX_BYTES + size);
    out.put_i32(0);
    let encoded = header
        .encode(out, header_version)
        .and_then(|_| body.encode(out, version));
    if let Err(e) = encoded {
        out.truncate(start);
        return Err(ProtocolError::Encode(e.to_string()));
    }
    let size_written = out.len() - start - SIZE_PREFIX_BYTES;
    debug_assert_eq!(size_written, size, "compute_size agrees with encode");
    let size = i32::try_from(size_written)
        .map_err(|_| ProtocolError::Encode("response too large".into()))?;
    out[start..start + SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    Ok(())
}

/// The ApiVersions body listing every advertised API of `apis` (the broker's table).
pub fn api_versions_body(error_code: i16, apis: &[ApiSupport]) -> ApiVersionsResponse {
    let mut resp = ApiVersionsResponse::default();
    resp.error_code = error_code;
    resp.api_keys = apis
        .iter()
        .filter(|a| a.advertised)
        .map(|a| {
            let mut v = ApiVersion::default();
            v.api_key = a.key as i16;
            v.min_version = a.advertised_min_version;
            v.max_version = a.max_version;
            v
        })
        .collect();
    resp
}

/// The answer to an ApiVersions request at a version we do not support: a v0-format response
/// with UNSUPPORTED_VERSION and our list, keeping the correlation id, so the client can retry
/// at a version we both speak.
pub fn encode_api_versions_fallback(
    out: &mut BytesMut,
    correlation_id: i32,
    apis: &[ApiSupport],
) -> Result<(), ProtocolError> {
    let body = api_versions_body(UNSUPPORTED_VERSION, apis);
    encode_response(out, ApiKey::ApiVersions, 0, correlation_id, &body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;

    // Goal: leftover bytes after a body are tolerated (Kafka and librdkafka rely on it):
    // the Metadata v13 "all topics" request librdkafka 2.x really sends decodes.
    #[test]
    fn trailing_bytes_are_tolerated() {
        use kafka_protocol::messages::MetadataRequest;
        let mut body = Bytes::from_static(&[0, 0, 0, 0, 1, 0, 0]);
        let req = decode_request::<MetadataRequest>(&mut body, 13).unwrap();
        assert!(req.topics.is_none());
        assert_eq!(body.len(), 3);
    }

    // Goal: ApiVersions lists a row from its advertised floor, not its served one.
    #[test]
    fn api_versions_lists_the_advertised_floor() {
        let produce = ApiSupport {
            advertised_min_version: 0,
            ..ApiSupport::new(ApiKey::Produce, 3, 13, true)
        };
        let resp = api_versions_body(0, &[produce]);
        assert_eq!(resp.api_keys[0].min_version, 0);
        assert_eq!(resp.api_keys[0].max_version, 13);
        assert!(!produce.serves(2));
    }

    // Goal: the fallback is a v0 response (header v0, no tagged fields) with error 35.
    #[test]
    fn api_versions_fallback_is_v0() {
        let apis = [
            ApiSupport::new(ApiKey::ApiVersions, 0, 4, true),
            ApiSupport::new(ApiKey::Metadata, 0, 13, false),
        ];
        let mut out = BytesMut::new();
        encode_api_versions_fallback(&mut out, 77, &apis).unwrap();
        let mut b = out.freeze();
        let size = b.get_i32() as usize;
        assert_eq!(size, b.len());
        assert_eq!(b.get_i32(), 77);
        let resp = ApiVersionsResponse::decode(&mut b, 0).unwrap();
        assert_eq!(resp.error_code, UNSUPPORTED_VERSION);
        // Only the advertised row is listed.
        assert_eq!(resp.api_keys.len(), 1);
        assert_eq!(resp.api_keys[0].api_key, ApiKey::ApiVersions as i16);
        assert!(b.is_empty());
    }

    // Goal: the size `encode_response` reserves up front is exactly what it writes, for the
    // produce and fetch responses at every version we serve: one allocation per response.
    #[test]
    fn reserved_size_is_the_encoded_size() {
        use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
        use kafka_protocol::messages::produce_response::{
            PartitionProduceResponse, TopicProduceResponse,
        };
        use kafka_protocol::messages::{FetchResponse, ProduceResponse, TopicName};
        use kafka_protocol::protocol::StrBytes;
        let name = TopicName(StrBytes::from_static_str("t"));
        let mut produce = ProduceResponse::default();
        let mut t = TopicProduceResponse::default();
        t.name = name.clone();
        for i in 0..3 {
            let mut p = PartitionProduceResponse::default();
            p.index = i;
            p.base_offset = 1 << 40;
            p.error_message = (i == 1).then(|| StrBytes::from_static_str("refused"));
            t.partition_responses.push(p);
        }
        produce.responses.push(t);
        let mut fetch = FetchResponse::default();
        let mut t = FetchableTopicResponse::default();
        t.topic = name;
        let mut p = PartitionData::default();
        p.records = Some(Bytes::from_static(&[7; 300]));
        t.partitions.push(p);
        fetch.responses.push(t);
        let check = |key: ApiKey,
                     range: std::ops::RangeInclusive<i16>,
                     body: &dyn Fn(&mut BytesMut, i16)| {
            for version in range {
                let mut out = BytesMut::new();
                body(&mut out, version);
                assert_eq!(
                    out.len(),
                    out.capacity(),
                    "{key:?} v{version}: one exact buffer"
                );
                let size = i32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
                assert_eq!(size + SIZE_PREFIX_BYTES, out.len(), "{key:?} v{version}");
            }
        };
        check(ApiKey::Produce, 3..=13, &|out, v| {
            encode_response(out, ApiKey::Produce, v, 1, &produce).unwrap()
        });
        check(ApiKey::Fetch, 4..=18, &|out, v| {
            encode_response(out, ApiKey::Fetch, v, 1, &fetch).unwrap()
        });
    }
}
