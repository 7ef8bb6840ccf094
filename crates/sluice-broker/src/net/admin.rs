//! The admin listener (`metrics.listen`, `--metrics-listen`; off by default): a minimal
//! HTTP/1.1 server for operators. `GET /metrics` answers the Prometheus text format 0.0.4
//! (or OpenMetrics when the scraper's `Accept` asks for it, as Prometheus does), `GET
//! /ready` answers 200 while the broker accepts Kafka connections and 503 once shutdown has
//! begun; any other path is 404, any other method 405.
//!
//! Bounded so that it can never starve the Kafka listener: at most
//! [`limits::ADMIN_CONNECTIONS_MAX`] connections at once (more are closed at accept), one
//! request per connection (`Connection: close`), a request head of at most
//! [`limits::ADMIN_REQUEST_BYTES_MAX`] that must arrive within
//! [`limits::ADMIN_READ_TIMEOUT_MS`] (else 431 or 400, or a plain close on timeout), the
//! response written within [`limits::ADMIN_WRITE_TIMEOUT_MS`], and the scrape itself
//! encoded on the blocking pool, not on the network workers. Bad input closes that admin
//! connection only.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::net::scrape;
use crate::{config::limits, Broker};

/// Serves the admin listener until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, broker: Arc<Broker>) {
    let registry = Arc::new(scrape::registry(broker.clone()));
    let slots = Arc::new(Semaphore::new(limits::ADMIN_CONNECTIONS_MAX));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "admin accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "admin connection limit reached; closing new connection");
            continue;
        };
        let (broker, registry) = (broker.clone(), registry.clone());
        tokio::spawn(async move {
            handle(stream, peer, &broker, registry).await;
            drop(permit);
        });
    }
}

/// What a request head asked for.
#[derive(Debug, PartialEq, Eq)]
struct Head {
    method: String,
    path: String,
    openmetrics: bool,
}

/// Why a request head could not be read.
#[derive(Debug, PartialEq, Eq)]
enum HeadError {
    TooLarge,
    Malformed,
}

async fn handle(mut stream: TcpStream, peer: SocketAddr, broker: &Broker, registry: Arc<Registry>) {
    let read = Duration::from_millis(limits::ADMIN_READ_TIMEOUT_MS);
    let head = match tokio::time::timeout(read, read_head(&mut stream)).await {
        Ok(Ok(head)) => parse_head(&head),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            tracing::debug!(%peer, "admin request not received in time; closing");
            return;
        }
    };
    let (status, content_type, body) = match head {
        Err(HeadError::TooLarge) => (431, "text/plain", "request too large\n".to_string()),
        Err(HeadError::Malformed) => (400, "text/plain", "bad request\n".to_string()),
        Ok(head) => answer(&head, broker, registry).await,
    };
    let response = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        reason(status),
        body.len()
    );
    let write = Duration::from_millis(limits::ADMIN_WRITE_TIMEOUT_MS);
    let written = tokio::time::timeout(write, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        tracing::debug!(%peer, "admin response not written; closing");
    }
}

async fn answer(
    head: &Head,
    broker: &Broker,
    registry: Arc<Registry>,
) -> (u16, &'static str, String) {
    if head.method != "GET" {
        return (405, "text/plain", "only GET\n".into());
    }
    match head.path.as_str() {
        "/metrics" => {
            let openmetrics = head.openmetrics;
            let rendered =
                tokio::task::spawn_blocking(move || scrape::render(&registry, openmetrics)).await;
            match rendered {
                Ok(Ok((body, content_type))) => (200, content_type, body),
                _ => (500, "text/plain", "metrics encoding failed\n".into()),
            }
        }
        "/ready" => match *broker.shutdown.borrow() {
            false => (200, "text/plain", "ready\n".into()),
            true => (503, "text/plain", "shutting down\n".into()),
        },
        _ => (404, "text/plain", "not found\n".into()),
    }
}

/// Reads up to the end of the request head (an empty line); the body, if any, is ignored.
async fn read_head(stream: &mut TcpStream) -> Result<Vec<u8>, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(|_| HeadError::Malformed)?;
        if n == 0 {
            return Err(HeadError::Malformed);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_head_end(&buf) {
            buf.truncate(end);
            return Ok(buf);
        }
        if buf.len() > limits::ADMIN_REQUEST_BYTES_MAX {
            return Err(HeadError::TooLarge);
        }
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n")
}

/// Parses `METHOD PATH HTTP/1.x` and the `Accept` header.
fn parse_head(head: &[u8]) -> Result<Head, HeadError> {
    if head.len() > limits::ADMIN_REQUEST_BYTES_MAX {
        return Err(HeadError::TooLarge);
    }
    let text = std::str::from_utf8(head).map_err(|_| HeadError::Malformed)?;
    let mut lines = text.split("\r\n");
    let request_line = lines.next().ok_or(HeadError::Malformed)?;
    let mut parts = request_line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::Malformed);
    };
    if !version.starts_with("HTTP/1.") || !target.starts_with('/') {
        return Err(HeadError::Malformed);
    }
    let path = target.split('?').next().unwrap_or(target);
    let mut openmetrics = false;
    for line in lines {
        let (name, value) = line.split_once(':').ok_or(HeadError::Malformed)?;
        if name.trim().eq_ignore_ascii_case("accept") {
            openmetrics |= value.contains("application/openmetrics-text");
        }
    }
    Ok(Head {
        method: method.to_string(),
        path: path.to_string(),
        openmetrics,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: the request line and Accept header are read; anything not HTTP/1.x is refused.
    #[test]
    fn heads_parse_or_are_refused() {
        let h = parse_head(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: application/openmetrics-text;version=1.0.0").unwrap();
        assert_eq!(
            (h.method.as_str(), h.path.as_str(), h.openmetrics),
            ("GET", "/metrics", true)
        );
        let h = parse_head(b"GET /ready HTTP/1.0").unwrap();
        assert!(!h.openmetrics);
        assert_eq!(parse_head(b"GET /ready"), Err(HeadError::Malformed));
        assert_eq!(parse_head(b"\x00\x01garbage"), Err(HeadError::Malformed));
        assert_eq!(
            parse_head(b"GET /ready HTTP/1.1\r\nno colon"),
            Err(HeadError::Malformed)
        );
        assert_eq!(find_head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(14));
    }
}
