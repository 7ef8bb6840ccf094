//! AWS Signature Version 4 for S3 requests (header-based, `AWS4-HMAC-SHA256`).
//!
//! The payload is not hashed into the signature (`UNSIGNED-PAYLOAD`): hashing every round's
//! bytes with SHA-256 would cost more CPU than the rest of the produce path, and the
//! object's integrity is carried by `x-amz-checksum-crc32c` (checked by the store) and by
//! the journal entries' own CRCs inside it (checked by every reader). The signature covers
//! the method, path, query and the headers listed in [`Request::headers`].
//!
//! Guarantees: the canonical request follows the published algorithm exactly (checked
//! against its published example in the tests); secrets never leave this module except as
//! the derived signature.

use ring::{digest, hmac};

use crate::credentials::Credentials;

/// The parts of a request that are signed. `headers` must be lower-case names with trimmed
/// values, sorted by name, and include `host`, `x-amz-date` and `x-amz-content-sha256`.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub(crate) method: &'a str,
    /// The URI-encoded absolute path, e.g. `/bucket/prefix/key`.
    pub(crate) path: &'a str,
    /// `(name, value)` pairs, not yet encoded; sorted here.
    pub(crate) query: &'a [(&'a str, &'a str)],
    pub(crate) headers: &'a [(&'a str, &'a str)],
    pub(crate) payload_hash: &'a str,
}

pub(crate) const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";

/// `x-amz-date` (`20261208T020500Z`) and the scope's date (`20261208`) of a Unix time.
pub(crate) fn amz_date(unix_secs: u64) -> (String, String) {
    let days = (unix_secs / 86_400) as i64;
    let secs = unix_secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let date = format!("{y:04}{m:02}{d:02}");
    let time = format!("{:02}{:02}{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    (format!("{date}T{time}Z"), date)
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// RFC 3986 encoding as SigV4 wants it: unreserved characters stay, everything else is
/// `%XX` (upper case); `/` stays only when `keep_slash` (object key paths).
pub(crate) fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'~')
            || (keep_slash && b == b'/');
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The encoded, sorted query string of `query`.
pub(crate) fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    pairs.sort();
    let parts: Vec<String> = pairs.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join("&")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lower-case hex SHA-256 of `data` (the payload hash of small requests).
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, data).as_ref())
}

fn hmac_sha256(key: &[u8], data: &[u8]) -> hmac::Tag {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
}

/// The `Authorization` header value of `request`, signed at `amz_date` for `region`.
pub(crate) fn authorization(
    request: &Request<'_>,
    credentials: &Credentials,
    region: &str,
    amz_date: &str,
) -> String {
    debug_assert!(request.headers.windows(2).all(|w| w[0].0 < w[1].0));
    let date = &amz_date[..8];
    let mut canonical_headers = String::new();
    for (name, value) in request.headers {
        canonical_headers.push_str(&format!("{name}:{value}\n"));
    }
    let signed_headers: Vec<&str> = request.headers.iter().map(|(n, _)| *n).collect();
    let signed_headers = signed_headers.join(";");
    let canonical = format!(
        "{}\n{}\n{}\n{}\n{}\n{}",
        request.method,
        request.path,
        canonical_query(request.query),
        canonical_headers,
        signed_headers,
        request.payload_hash
    );
    let scope = format!("{date}/{region}/s3/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        sha256_hex(canonical.as_bytes())
    );
    let secret = format!("AWS4{}", credentials.secret_access_key);
    let k_date = hmac_sha256(secret.as_bytes(), date.as_bytes());
    let k_region = hmac_sha256(k_date.as_ref(), region.as_bytes());
    let k_service = hmac_sha256(k_region.as_ref(), b"s3");
    let k_signing = hmac_sha256(k_service.as_ref(), b"aws4_request");
    let signature = hex(hmac_sha256(k_signing.as_ref(), to_sign.as_bytes()).as_ref());
    format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(amz_date(0).0, "19700101T000000Z");
        // 2013-05-24T00:00:00Z, the date of the published S3 examples.
        assert_eq!(amz_date(1_369_353_600).0, "20130524T000000Z");
        // A leap day, and the last second of a year.
        assert_eq!(amz_date(951_782_400).1, "20000229");
        assert_eq!(amz_date(1_798_761_599).0, "20261231T235959Z");
    }

    #[test]
    fn encoding_keeps_only_unreserved_characters() {
        assert_eq!(uri_encode("a b/c~d", false), "a%20b%2Fc~d");
        assert_eq!(uri_encode("a b/c~d", true), "a%20b/c~d");
        assert_eq!(
            canonical_query(&[("prefix", "x/"), ("list-type", "2")]),
            "list-type=2&prefix=x%2F"
        );
    }

    /// The S3 documentation's "GET Object" example (Signature V4, header-based):
    /// bucket `examplebucket`, key `test.txt`, `Range: bytes=0-9`, the empty payload's hash.
    #[test]
    fn signs_the_published_get_object_example() {
        let credentials = Credentials {
            access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        let empty = sha256_hex(b"");
        let headers = [
            ("host", "examplebucket.s3.amazonaws.com"),
            ("range", "bytes=0-9"),
            ("x-amz-content-sha256", empty.as_str()),
            ("x-amz-date", "20130524T000000Z"),
        ];
        let request = Request {
            method: "GET",
            path: "/test.txt",
            query: &[],
            headers: &headers,
            payload_hash: &empty,
        };
        let auth = authorization(&request, &credentials, "us-east-1", "20130524T000000Z");
        assert!(auth.ends_with(
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        ));
        assert!(auth.contains("SignedHeaders=host;range;x-amz-content-sha256;x-amz-date"));
    }
}
