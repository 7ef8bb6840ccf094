//! A small blocking HTTP/1.1 client for the object store: keep-alive connections in a
//! bounded pool, request bodies written straight from the caller's slices (a round's
//! bytes go from the committer's buffers to the socket, no copy in user space over plain
//! TCP), `Content-Length` and chunked responses, TLS with the Mozilla roots.
//!
//! It runs only on the log's own threads (the committer, the restore at start-up), never
//! on the broker's async runtime. Every socket has the configured timeout for reads and
//! writes, so an unreachable store fails a request instead of hanging it.
//!
//! Guarantees: a response is read whole or the connection is dropped (never returned to
//! the pool half-read); headers are capped at [`HEADERS_MAX_BYTES`] and bodies at the
//! caller's limit; a request on a pooled connection that the server closed while idle is
//! sent once more on a new connection (every request this crate makes is idempotent).

use std::io::{self, IoSlice, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Largest response head (status line and headers) accepted.
pub(crate) const HEADERS_MAX_BYTES: usize = 64 * 1024;
/// Largest body of an error response read.
const ERROR_BODY_MAX_BYTES: usize = 64 * 1024;
/// Idle connections kept per client.
const POOL_MAX: usize = 8;

/// Where requests go: `http://host:port` or `https://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    pub(crate) tls: bool,
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl Endpoint {
    /// Parses `http://host[:port]` or `https://host[:port]` (no path).
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let (tls, rest) = if let Some(rest) = url.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = url.strip_prefix("http://") {
            (false, rest)
        } else {
            return Err(format!(
                "object.store.endpoint {url:?}: must start with http:// or https://"
            ));
        };
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() || rest.contains('/') {
            return Err(format!(
                "object.store.endpoint {url:?}: expected scheme://host[:port] and no path"
            ));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || host.starts_with('[') => {
                let port = port
                    .parse()
                    .map_err(|_| format!("object.store.endpoint {url:?}: bad port {port:?}"))?;
                (host.to_string(), port)
            }
            _ => (rest.to_string(), if tls { 443 } else { 80 }),
        };
        Ok(Self { tls, host, port })
    }

    /// The `Host` header: the port only when it is not the scheme's default.
    pub(crate) fn host_header(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

#[derive(Debug)]
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write_vectored(bufs),
            Stream::Tls(s) => s.write_vectored(bufs),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A response: status, headers (names lower-cased) and the body, read whole.
#[derive(Debug, Default)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A client of one endpoint.
#[derive(Debug)]
pub(crate) struct HttpClient {
    endpoint: Endpoint,
    tls: Option<Arc<rustls::ClientConfig>>,
    timeout: Duration,
    pool: Mutex<Vec<Stream>>,
}

impl HttpClient {
    pub(crate) fn new(endpoint: Endpoint, timeout: Duration) -> Self {
        let tls = endpoint.tls.then(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .expect("ring supports the default protocol versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
            Arc::new(config)
        });
        Self {
            endpoint,
            tls,
            timeout,
            pool: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    fn connect(&self) -> io::Result<Stream> {
        let addrs = (self.endpoint.host.as_str(), self.endpoint.port).to_socket_addrs()?;
        let mut last = io::Error::new(
            io::ErrorKind::NotFound,
            "the endpoint resolved to no address",
        );
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, self.timeout) {
                Ok(tcp) => {
                    tcp.set_nodelay(true)?;
                    tcp.set_read_timeout(Some(self.timeout))?;
                    tcp.set_write_timeout(Some(self.timeout))?;
                    return self.wrap(tcp);
                }
                Err(error) => last = error,
            }
        }
        Err(last)
    }

    fn wrap(&self, tcp: TcpStream) -> io::Result<Stream> {
        let Some(config) = &self.tls else {
            return Ok(Stream::Plain(tcp));
        };
        let name = rustls::pki_types::ServerName::try_from(self.endpoint.host.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let connection = rustls::ClientConnection::new(Arc::clone(config), name)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(
            connection, tcp,
        ))))
    }

    /// Sends `head` (request line and headers, ending in an empty line) and `body`, and
    /// reads the response, whose body may be at most `body_max` bytes.
    pub(crate) fn send(
        &self,
        head: &str,
        body: &[IoSlice<'_>],
        body_max: usize,
    ) -> io::Result<Response> {
        let pooled = self.pool.lock().pop();
        if let Some(mut stream) = pooled {
            match exchange(&mut stream, head, body, body_max) {
                Ok((response, reusable)) => {
                    self.give_back(stream, reusable);
                    return Ok(response);
                }
                // The server may have closed an idle connection: once more, on a new one.
                Err(error) => tracing::debug!(%error, "pooled object-store connection failed"),
            }
        }
        let mut stream = self.connect()?;
        let (response, reusable) = exchange(&mut stream, head, body, body_max)?;
        self.give_back(stream, reusable);
        Ok(response)
    }

    fn give_back(&self, stream: Stream, reusable: bool) {
        let mut pool = self.pool.lock();
        if reusable && pool.len() < POOL_MAX {
            pool.push(stream);
        }
    }
}

/// One request and its response on `stream`; the flag says whether the connection may be
/// reused.
fn exchange(
    stream: &mut Stream,
    head: &str,
    body: &[IoSlice<'_>],
    body_max: usize,
) -> io::Result<(Response, bool)> {
    stream.write_all(head.as_bytes())?;
    write_all_vectored(stream, body)?;
    stream.flush()?;
    // A response to HEAD has no body, whatever its Content-Length says.
    let body_max = if head.starts_with("HEAD ") {
        None
    } else {
        Some(body_max)
    };
    read_response(stream, body_max)
}

fn write_all_vectored(stream: &mut Stream, slices: &[IoSlice<'_>]) -> io::Result<()> {
    let mut index = 0;
    let mut skip = 0;
    while index < slices.len() {
        // Rebuild the remaining window (at most 64 slices a call, within IOV_MAX).
        let mut window: Vec<IoSlice<'_>> = Vec::with_capacity(64);
        window.push(IoSlice::new(&slices[index][skip..]));
        window.extend(slices[index + 1..].iter().take(63).map(|s| IoSlice::new(s)));
        let mut written = stream.write_vectored(&window)?;
        if written == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "object store stopped reading",
            ));
        }
        while index < slices.len() && written >= slices[index].len() - skip {
            written -= slices[index].len() - skip;
            index += 1;
            skip = 0;
        }
        skip += written;
    }
    Ok(())
}

fn read_response(stream: &mut Stream, body_max: Option<usize>) -> io::Result<(Response, bool)> {
    let mut buf = Vec::with_capacity(4096);
    let head_end = loop {
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            break end;
        }
        if buf.len() > HEADERS_MAX_BYTES {
            return Err(invalid("response headers too long"));
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "object store closed the connection",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let mut response = parse_head(&buf[..head_end])?;
    let rest = buf[head_end + 4..].to_vec();
    let Some(body_max) = body_max else {
        return Ok((response, rest.is_empty()));
    };
    // An error's body (an XML message) may be longer than the success body asked for.
    let body_max = if (200..300).contains(&response.status) {
        body_max
    } else {
        body_max.max(ERROR_BODY_MAX_BYTES)
    };
    let close = response
        .header("connection")
        .is_some_and(|v| v.eq_ignore_ascii_case("close"));
    if response
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        response.body = read_chunked(stream, rest, body_max)?;
    } else if let Some(len) = response.header("content-length") {
        let len: usize = len
            .trim()
            .parse()
            .map_err(|_| invalid("bad content-length"))?;
        if len > body_max {
            return Err(invalid("response body larger than expected"));
        }
        response.body = read_exact_body(stream, rest, len)?;
    } else {
        // No length: the body ends with the connection (only for responses without one).
        return Ok((response, false));
    }
    Ok((response, !close))
}

fn parse_head(head: &[u8]) -> io::Result<Response> {
    let text = std::str::from_utf8(head).map_err(|_| invalid("response head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let (version, status) = (parts.next(), parts.next());
    if !version.is_some_and(|v| v.starts_with("HTTP/1.")) {
        return Err(invalid("not an HTTP/1.x response"));
    }
    let status = status
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("bad status line"))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Response {
        status,
        headers,
        body: Vec::new(),
    })
}

fn read_exact_body(stream: &mut Stream, mut body: Vec<u8>, len: usize) -> io::Result<Vec<u8>> {
    if body.len() > len {
        return Err(invalid("more bytes than content-length"));
    }
    let have = body.len();
    body.resize(len, 0);
    stream.read_exact(&mut body[have..])?;
    Ok(body)
}

fn read_chunked(stream: &mut Stream, mut pending: Vec<u8>, body_max: usize) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(end) = find(&pending, b"\r\n") {
                break end;
            }
            fill(stream, &mut pending, 1)?;
        };
        let size_text =
            std::str::from_utf8(&pending[..line_end]).map_err(|_| invalid("bad chunk"))?;
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
        pending.drain(..line_end + 2);
        if body.len() + size > body_max {
            return Err(invalid("chunked body larger than expected"));
        }
        while pending.len() < size + 2 {
            let missing = size + 2 - pending.len();
            fill(stream, &mut pending, missing)?;
        }
        body.extend_from_slice(&pending[..size]);
        pending.drain(..size + 2);
        if size == 0 {
            return Ok(body);
        }
    }
}

fn fill(stream: &mut Stream, pending: &mut Vec<u8>, at_least: usize) -> io::Result<()> {
    let mut chunk = vec![0u8; at_least.clamp(4096, 1 << 20)];
    let n = stream.read(&mut chunk)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "object store closed mid-body",
        ));
    }
    pending.extend_from_slice(&chunk[..n]);
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("object store: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_with_default_ports() {
        let e = Endpoint::parse("http://127.0.0.1:8333").unwrap();
        assert_eq!((e.tls, e.host.as_str(), e.port), (false, "127.0.0.1", 8333));
        assert_eq!(e.host_header(), "127.0.0.1:8333");
        let e = Endpoint::parse("https://s3.eu-west-1.amazonaws.com/").unwrap();
        assert_eq!((e.tls, e.port), (true, 443));
        assert_eq!(e.host_header(), "s3.eu-west-1.amazonaws.com");
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("http://x/path").is_err());
        assert!(Endpoint::parse("http://x:port").is_err());
    }

    #[test]
    fn heads_parse_and_reject_garbage() {
        let r = parse_head(b"HTTP/1.1 206 Partial Content\r\nContent-Length: 10\r\nETag: \"x\"")
            .unwrap();
        assert_eq!(r.status, 206);
        assert_eq!(r.header("content-length"), Some("10"));
        assert!(parse_head(b"SSH-2.0-OpenSSH").is_err());
        assert!(parse_head(b"HTTP/1.1 abc").is_err());
    }
}
