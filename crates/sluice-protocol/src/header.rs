//! Request headers. The fixed prefix (api key, api version, correlation id) is read by hand
//! so that short or hostile input can never panic; the rest of the header (client id,
//! tagged fields) is decoded by `kafka-protocol` at the header version the API requires.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;

use crate::error::ProtocolError;
use crate::registry::{self, ApiTable};

/// Bytes of the fixed header prefix: api key, api version, correlation id.
pub const FIXED_HEADER_BYTES: usize = 8;

/// A request whose header has been parsed and whose version is served.
#[derive(Debug)]
pub struct Request {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    /// The undecoded body.
    pub body: Bytes,
}

/// Why a frame could not become a [`Request`], with as much of the header as was read so
/// the broker can still answer (ApiVersions) or log it.
#[derive(Debug)]
pub struct HeaderFailure {
    /// Known when at least [`FIXED_HEADER_BYTES`] arrived.
    pub correlation_id: Option<i32>,
    pub api_key: i16,
    pub api_version: i16,
    pub error: ProtocolError,
}

/// Parses the header of one frame body (without the size prefix). `apis` is the broker's
/// table, asked for the key's row (O(1) for the broker's keyed table): keys and versions it
/// does not serve are refused before the header's rest is read.
pub fn parse<T: ApiTable + ?Sized>(mut body: Bytes, apis: &T) -> Result<Request, HeaderFailure> {
    if body.len() < FIXED_HEADER_BYTES {
        return Err(HeaderFailure {
            correlation_id: None,
            api_key: -1,
            api_version: -1,
            error: ProtocolError::HeaderTruncated,
        });
    }
    let mut fixed = &body[..FIXED_HEADER_BYTES];
    let api_key_raw = fixed.get_i16();
    let api_version = fixed.get_i16();
    let correlation_id = fixed.get_i32();
    let fail = |error| HeaderFailure {
        correlation_id: Some(correlation_id),
        api_key: api_key_raw,
        api_version,
        error,
    };
    let api_key = ApiKey::try_from(api_key_raw)
        .map_err(|_| fail(ProtocolError::UnknownApiKey(api_key_raw)))?;
    if !registry::is_supported(apis, api_key, api_version) {
        return Err(fail(ProtocolError::UnsupportedVersion {
            api_key: api_key_raw,
            version: api_version,
        }));
    }
    let header_version = api_key.request_header_version(api_version);
    let header = RequestHeader::decode(&mut body, header_version)
        .map_err(|e| fail(ProtocolError::Malformed(format!("request header: {e}"))))?;
    Ok(Request {
        api_key,
        header,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::ApiSupport;
    use bytes::{BufMut, BytesMut};

    /// A stand-in for the broker's table: Metadata (3) v0-13 and ApiVersions (18) v0-4.
    const APIS: &[ApiSupport] = &[
        ApiSupport::new(ApiKey::Metadata, 0, 13, true),
        ApiSupport::new(ApiKey::ApiVersions, 0, 4, true),
    ];

    fn frame(api_key: i16, version: i16, correlation_id: i32, rest: &[u8]) -> Bytes {
        let mut b = BytesMut::new();
        b.put_i16(api_key);
        b.put_i16(version);
        b.put_i32(correlation_id);
        b.put_slice(rest);
        b.freeze()
    }

    // Goal: every prefix of a header fails cleanly, never panics.
    #[test]
    fn truncated_headers_fail_cleanly() {
        let full = frame(18, 3, 7, &[0, 0, 0]);
        for n in 0..full.len() {
            assert!(parse(full.slice(..n), APIS).is_err(), "prefix {n} parsed");
        }
    }

    // Goal: unknown keys and versions keep the correlation id for the error answer.
    #[test]
    fn unknown_key_and_version_keep_correlation_id() {
        let e = parse(frame(9999, 0, 42, &[0xff, 0xff]), APIS).unwrap_err();
        assert_eq!(e.correlation_id, Some(42));
        assert!(matches!(e.error, ProtocolError::UnknownApiKey(9999)));
        let e = parse(frame(18, 99, 43, &[0xff, 0xff]), APIS).unwrap_err();
        assert_eq!(e.correlation_id, Some(43));
        assert!(matches!(
            e.error,
            ProtocolError::UnsupportedVersion {
                api_key: 18,
                version: 99
            }
        ));
    }

    // Goal: a v1 header (nullable client id) parses and leaves the body untouched.
    #[test]
    fn parses_v1_header() {
        let mut rest = BytesMut::new();
        rest.put_i16(3);
        rest.put_slice(b"abc");
        rest.put_slice(&[9, 9]);
        let req = parse(frame(3, 1, 5, &rest), APIS).unwrap();
        assert_eq!(req.header.correlation_id, 5);
        assert_eq!(req.header.client_id.as_deref(), Some("abc"));
        assert_eq!(&req.body[..], &[9, 9]);
    }
}
