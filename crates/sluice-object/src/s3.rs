//! The S3 client: PUT, ranged GET, DELETE, ListObjectsV2, HeadBucket and CreateBucket,
//! signed with SigV4, over [`crate::http`].
//!
//! `object.store.url` is `s3://bucket[/prefix]`; every key the broker writes lies under the
//! prefix. Without `object.store.endpoint` requests go to AWS
//! (`https://bucket.s3.REGION.amazonaws.com`, virtual-hosted style); with it (an
//! S3-compatible server: SeaweedFS, MinIO, ...) they go to that endpoint, path style
//! (`/bucket/key`).
//!
//! Guarantees: an object is written whole or not at all (a PUT carries its length and its
//! CRC-32C, `x-amz-checksum-crc32c`, which the store checks before it stores anything);
//! errors say whether retrying can help ([`ObjectError::is_retriable`]): an unreachable
//! store, a timeout, 5xx, 429 and `SlowDown` can; a missing bucket or key, a refused
//! signature or a malformed answer cannot.

use std::io::{self, IoSlice};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use crate::credentials::{find_credentials, find_region, Credentials, Environment};
use crate::http::{Endpoint, HttpClient, Response};
use crate::sigv4::{self, amz_date, authorization, uri_encode, UNSIGNED_PAYLOAD};

/// Largest ListObjectsV2 answer read (1,000 keys are about 250 KiB).
const LIST_RESPONSE_MAX_BYTES: usize = 8 << 20;
/// Largest error or small response body read.
const SMALL_RESPONSE_MAX_BYTES: usize = 1 << 20;

/// An object-store failure.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The store could not be reached or did not answer in time.
    #[error("object store unreachable: {0}")]
    Unreachable(#[from] io::Error),
    /// The key (or the bucket) does not exist.
    #[error("object store: {0} not found")]
    NotFound(String),
    /// Any other answer that is not a success.
    #[error("object store answered {status} {code}: {message}")]
    Status {
        status: u16,
        code: String,
        message: String,
    },
}

impl ObjectError {
    /// Whether the same request may succeed later.
    pub fn is_retriable(&self) -> bool {
        match self {
            ObjectError::Unreachable(_) => true,
            ObjectError::NotFound(_) => false,
            ObjectError::Status { status, code, .. } => {
                *status >= 500 || *status == 429 || code == "SlowDown"
            }
        }
    }
}

/// One key of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedObject {
    pub key: String,
    pub size_bytes: u64,
}

/// Where the bucket is and how to reach it.
#[derive(Debug, Clone)]
pub struct ObjectStoreConfig {
    /// `s3://bucket[/prefix]`.
    pub url: String,
    /// An S3-compatible server (`http(s)://host:port`); `None` for AWS.
    pub endpoint: Option<String>,
    /// Socket timeout of every request.
    pub request_timeout: Duration,
}

/// A bucket and a key prefix in an S3-compatible store.
#[derive(Debug)]
pub struct ObjectStore {
    http: HttpClient,
    bucket: String,
    prefix: String,
    region: String,
    credentials: Credentials,
    path_style: bool,
}

/// Splits `s3://bucket[/prefix]` into the bucket and a prefix that is empty or ends in `/`.
pub fn parse_url(url: &str) -> Result<(String, String), String> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| format!("object.store.url {url:?}: must be s3://bucket[/prefix]"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    if !valid {
        return Err(format!(
            "object.store.url {url:?}: bucket {bucket:?} is not a valid S3 bucket name \
             (3-63 lower-case letters, digits, '-' and '.')"
        ));
    }
    let prefix = prefix.trim_matches('/');
    let prefix = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    Ok((bucket.to_string(), prefix))
}

impl ObjectStore {
    /// A client for `config`, with credentials and region from `env` (see
    /// [`crate::credentials`]). Makes no request.
    pub fn new(config: &ObjectStoreConfig, env: &Environment) -> Result<Self, String> {
        let (bucket, prefix) = parse_url(&config.url)?;
        let credentials = find_credentials(env)?;
        let region = find_region(env);
        let (endpoint, path_style) = match &config.endpoint {
            Some(url) => (Endpoint::parse(url)?, true),
            None => (
                Endpoint {
                    tls: true,
                    host: format!("{bucket}.s3.{region}.amazonaws.com"),
                    port: 443,
                },
                false,
            ),
        };
        Ok(Self {
            http: HttpClient::new(endpoint, config.request_timeout),
            bucket,
            prefix,
            region,
            credentials,
            path_style,
        })
    }

    /// `name` under the configured prefix.
    pub fn key(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The prefix every key of this store starts with (empty or ending in `/`).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// `s3://bucket/prefix`, for messages.
    pub fn describe(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    fn path(&self, key: &str) -> String {
        if self.path_style {
            format!("/{}/{}", self.bucket, uri_encode(key, true))
        } else {
            format!("/{}", uri_encode(key, true))
        }
    }

    fn bucket_path(&self) -> String {
        if self.path_style {
            format!("/{}", self.bucket)
        } else {
            "/".to_string()
        }
    }

    /// The request head: request line, signed headers, `extra` unsigned headers.
    fn head(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        signed: &[(&str, &str)],
    ) -> String {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let (date, _) = amz_date(secs);
        let host = self.http.endpoint().host_header();
        let mut headers: Vec<(&str, &str)> = vec![
            ("host", host.as_str()),
            ("x-amz-content-sha256", UNSIGNED_PAYLOAD),
            ("x-amz-date", date.as_str()),
        ];
        if let Some(token) = &self.credentials.session_token {
            headers.push(("x-amz-security-token", token.as_str()));
        }
        headers.extend_from_slice(signed);
        headers.sort_by(|a, b| a.0.cmp(b.0));
        let request = sigv4::Request {
            method,
            path,
            query,
            headers: &headers,
            payload_hash: UNSIGNED_PAYLOAD,
        };
        let auth = authorization(&request, &self.credentials, &self.region, &date);
        let query = sigv4::canonical_query(query);
        let target = if query.is_empty() {
            path.to_string()
        } else {
            format!("{path}?{query}")
        };
        let mut out = format!("{method} {target} HTTP/1.1\r\nauthorization: {auth}\r\n");
        for (name, value) in headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str("\r\n");
        out
    }

    /// Writes `body` (`len` bytes, CRC-32C `crc`) as object `key`.
    pub fn put(
        &self,
        key: &str,
        body: &[IoSlice<'_>],
        len: u64,
        crc: u32,
    ) -> Result<(), ObjectError> {
        let checksum = base64::engine::general_purpose::STANDARD.encode(crc.to_be_bytes());
        let length = len.to_string();
        let head = self.head(
            "PUT",
            &self.path(key),
            &[],
            &[
                ("content-length", length.as_str()),
                ("x-amz-checksum-crc32c", checksum.as_str()),
            ],
        );
        let response = self.http.send(&head, body, SMALL_RESPONSE_MAX_BYTES)?;
        expect_success(response, key).map(drop)
    }

    /// Bytes `[start, start + len)` of object `key` (exactly `len` of them, or an error).
    pub fn get_range(&self, key: &str, start: u64, len: u64) -> Result<Vec<u8>, ObjectError> {
        if len == 0 {
            return Ok(Vec::new());
        }
        let range = format!("bytes={}-{}", start, start + len - 1);
        let head = self.head("GET", &self.path(key), &[], &[("range", range.as_str())]);
        let response = self.http.send(&head, &[], len as usize)?;
        let response = expect_success(response, key)?;
        if response.body.len() as u64 != len {
            return Err(ObjectError::Status {
                status: response.status,
                code: "ShortRange".into(),
                message: format!(
                    "{key}: asked for {len} bytes at {start}, got {}",
                    response.body.len()
                ),
            });
        }
        Ok(response.body)
    }

    /// Deletes object `key` (deleting a missing key succeeds, as in S3).
    pub fn delete(&self, key: &str) -> Result<(), ObjectError> {
        let head = self.head("DELETE", &self.path(key), &[], &[]);
        let response = self.http.send(&head, &[], SMALL_RESPONSE_MAX_BYTES)?;
        match expect_success(response, key) {
            Err(ObjectError::NotFound(_)) => Ok(()),
            other => other.map(drop),
        }
    }

    /// One page (at most 1,000 keys) of the keys under `prefix` (a full key prefix), after
    /// `continuation`; the second value continues the listing when there is more.
    pub fn list_page(
        &self,
        prefix: &str,
        continuation: Option<&str>,
    ) -> Result<(Vec<ListedObject>, Option<String>), ObjectError> {
        let mut query = vec![("list-type", "2"), ("prefix", prefix)];
        if let Some(token) = continuation {
            query.push(("continuation-token", token));
        }
        let head = self.head("GET", &self.bucket_path(), &query, &[]);
        let response = self.http.send(&head, &[], LIST_RESPONSE_MAX_BYTES)?;
        let response = expect_success(response, &self.bucket)?;
        let text = String::from_utf8_lossy(&response.body);
        Ok(parse_list(&text))
    }

    /// Checks that the bucket exists and the credentials may use it.
    pub fn check_bucket(&self) -> Result<(), ObjectError> {
        let head = self.head("HEAD", &self.bucket_path(), &[], &[]);
        // A HEAD response has no body even when it carries a Content-Length.
        let response = self.http.send(&head, &[], SMALL_RESPONSE_MAX_BYTES);
        match response {
            Ok(r) if (200..300).contains(&r.status) => Ok(()),
            Ok(r) if r.status == 404 => {
                Err(ObjectError::NotFound(format!("bucket {}", self.bucket)))
            }
            Ok(r) => Err(ObjectError::Status {
                status: r.status,
                code: String::new(),
                message: format!("HeadBucket {}", self.bucket),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Creates the bucket (for test set-up and tools; the broker never creates buckets).
    pub fn create_bucket(&self) -> Result<(), ObjectError> {
        let head = self.head("PUT", &self.bucket_path(), &[], &[("content-length", "0")]);
        let response = self.http.send(&head, &[], SMALL_RESPONSE_MAX_BYTES)?;
        match expect_success(response, &self.bucket) {
            Err(ObjectError::Status { code, .. }) if code.starts_with("BucketAlready") => Ok(()),
            other => other.map(drop),
        }
    }
}

fn expect_success(response: Response, what: &str) -> Result<Response, ObjectError> {
    if (200..300).contains(&response.status) {
        return Ok(response);
    }
    let text = String::from_utf8_lossy(&response.body);
    let code = xml_values(&text, "Code")
        .into_iter()
        .next()
        .unwrap_or_default();
    let message = xml_values(&text, "Message")
        .into_iter()
        .next()
        .unwrap_or_default();
    if response.status == 404 {
        return Err(ObjectError::NotFound(what.to_string()));
    }
    Err(ObjectError::Status {
        status: response.status,
        code,
        message: format!("{what}: {message}"),
    })
}

/// The keys and sizes of a ListObjectsV2 answer, and its continuation token if truncated.
fn parse_list(text: &str) -> (Vec<ListedObject>, Option<String>) {
    let mut objects = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<Contents>") {
        let after = &rest[start + "<Contents>".len()..];
        let end = after.find("</Contents>").unwrap_or(after.len());
        let item = &after[..end];
        let key = xml_values(item, "Key").into_iter().next();
        let size = xml_values(item, "Size")
            .into_iter()
            .next()
            .and_then(|s| s.parse().ok());
        if let (Some(key), Some(size_bytes)) = (key, size) {
            objects.push(ListedObject { key, size_bytes });
        }
        rest = &after[end..];
    }
    let truncated = xml_values(text, "IsTruncated")
        .first()
        .is_some_and(|v| v == "true");
    let token = xml_values(text, "NextContinuationToken").into_iter().next();
    (objects, if truncated { token } else { None })
}

/// Every `<tag>value</tag>` in `text`, entities decoded.
fn xml_values(text: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(&close) else { break };
        out.push(
            after[..end]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&"),
        );
        rest = &after[end + close.len()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_bucket_and_a_prefix() {
        assert_eq!(
            parse_url("s3://bucket").unwrap(),
            ("bucket".into(), String::new())
        );
        assert_eq!(
            parse_url("s3://my-bucket/a/b/").unwrap(),
            ("my-bucket".into(), "a/b/".into())
        );
        assert!(parse_url("http://bucket").is_err());
        assert!(parse_url("s3://Bucket").is_err());
        assert!(parse_url("s3://ab").is_err());
    }

    #[test]
    fn listings_parse_keys_sizes_and_continuation() {
        let xml = "<?xml version=\"1.0\"?><ListBucketResult><IsTruncated>true</IsTruncated>\
            <Contents><Key>p/a&amp;b</Key><Size>12</Size></Contents>\
            <Contents><Key>p/c</Key><LastModified>x</LastModified><Size>0</Size></Contents>\
            <NextContinuationToken>tok</NextContinuationToken></ListBucketResult>";
        let (objects, token) = parse_list(xml);
        assert_eq!(objects.len(), 2);
        assert_eq!(
            objects[0],
            ListedObject {
                key: "p/a&b".into(),
                size_bytes: 12
            }
        );
        assert_eq!(objects[1].key, "p/c");
        assert_eq!(token.as_deref(), Some("tok"));
        let (_, token) = parse_list("<IsTruncated>false</IsTruncated>");
        assert_eq!(token, None);
    }

    #[test]
    fn errors_say_whether_a_retry_can_help() {
        let status = |status, code: &str| ObjectError::Status {
            status,
            code: code.into(),
            message: String::new(),
        };
        assert!(status(503, "SlowDown").is_retriable());
        assert!(status(500, "InternalError").is_retriable());
        assert!(!status(403, "SignatureDoesNotMatch").is_retriable());
        assert!(!ObjectError::NotFound("k".into()).is_retriable());
        assert!(ObjectError::Unreachable(io::Error::other("x")).is_retriable());
    }
}
