//! [`ProtocolError`]: every way a request can fail to parse. The broker decides per variant
//! whether to answer with an error code or to close the connection.

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// The length prefix is negative or zero.
    #[error("invalid frame length {0}")]
    InvalidLength(i32),
    /// The length prefix exceeds the request size limit.
    #[error("frame of {size} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge { size: usize, max: usize },
    /// Too few bytes for even the fixed part of a request header.
    #[error("request header truncated")]
    HeaderTruncated,
    /// An API key Sluice does not know.
    #[error("unknown api key {0}")]
    UnknownApiKey(i16),
    /// A known API at a version outside the advertised range.
    #[error("unsupported version {version} for api key {api_key}")]
    UnsupportedVersion { api_key: i16, version: i16 },
    /// The body did not decode at the negotiated version.
    #[error("malformed request: {0}")]
    Malformed(String),
    /// A response failed to encode (a bug on our side, reported rather than panicking).
    #[error("response encode failed: {0}")]
    Encode(String),
}
