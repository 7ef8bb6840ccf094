//! One client connection: a reader that parses frames and starts requests in arrival order,
//! and a writer that sends their responses in that same order.
//!
//! The two halves are joined by a bounded channel of spawned request tasks. Its capacity is
//! the in-flight limit: when it is full the reader stops reading, and TCP pushes back on the
//! client. Before reading a frame's body (or, for a frame that arrived whole, before handling
//! it) the reader reserves the frame's size from the broker-wide `queued.max.request.bytes`
//! budget; the writer frees it after the response. A body must arrive within
//! [`limits::FRAME_READ_TIMEOUT_MS`], so stalled clients cannot hold the budget forever.
//!
//! A malformed frame, an unknown API key or an unsupported version (other than
//! ApiVersions, which gets the v0 fallback) closes this connection after the responses
//! already owed are written; no other connection is affected.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use kafka_protocol::messages::ApiKey;
use sluice_protocol::{codec, frame, header, ProtocolError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant};

use crate::handlers::{self, Reply};
use crate::{limits, Broker};

pub(crate) async fn serve(broker: Arc<Broker>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<InFlight>(limits::IN_FLIGHT_PER_CONNECTION_MAX);
    let writer = tokio::spawn(write_loop(wr, rx, peer));
    let mut shutdown = broker.shutdown.clone();
    let mut buf = BytesMut::with_capacity(limits::READ_CHUNK_BYTES);
    // The budget reserved for the frame being read, taken once its size prefix has arrived.
    let mut reserved: Option<OwnedSemaphorePermit> = None;
    // When the frame being read must be complete.
    let mut frame_deadline: Option<Instant> = None;
    loop {
        match frame::check(&buf, broker.config.max_request_bytes) {
            Ok(Some(len)) => {
                // A frame that arrived whole still reserves its bytes before it is handled.
                if reserved.is_none() {
                    reserved = match reserve(&broker, len, &mut shutdown).await {
                        Some(p) => Some(p),
                        None => break,
                    };
                }
                let body = buf
                    .split_to(frame::SIZE_PREFIX_BYTES + len)
                    .freeze()
                    .slice(frame::SIZE_PREFIX_BYTES..);
                let (task, keep_going) = start_request(&broker, body, peer).await;
                frame_deadline = None;
                let in_flight = InFlight {
                    task,
                    _memory: reserved.take(),
                };
                if tx.send(in_flight).await.is_err() || !keep_going {
                    break;
                }
                continue;
            }
            Ok(None) if reserved.is_none() && buf.len() >= frame::SIZE_PREFIX_BYTES => {
                // The size is valid here: frame::check rejected bad lengths already.
                let size = i32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                reserved = match reserve(&broker, size, &mut shutdown).await {
                    Some(p) => Some(p),
                    None => break,
                };
                frame_deadline =
                    Some(Instant::now() + Duration::from_millis(limits::FRAME_READ_TIMEOUT_MS));
                continue;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(%peer, error = %e, "bad frame; closing connection");
                break;
            }
        }
        if buf.capacity() - buf.len() < limits::READ_CHUNK_BYTES {
            buf.reserve(limits::READ_CHUNK_BYTES);
        }
        tokio::select! {
            n = rd.read_buf(&mut buf) => match n {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "read failed");
                    break;
                }
            },
            _ = shutdown.wait_for(|s| *s) => break,
            _ = until(frame_deadline) => {
                tracing::warn!(%peer, "request body not received in time; closing connection");
                break;
            }
        }
    }
    // Dropping the sender lets the writer finish the responses already owed, then stop.
    drop(tx);
    let _ = writer.await;
}

/// Parses one frame and starts its request. Returns the task that yields the response, and
/// whether to keep reading from this connection.
async fn start_request(
    broker: &Arc<Broker>,
    body: bytes::Bytes,
    peer: SocketAddr,
) -> (JoinHandle<Reply>, bool) {
    match header::parse(body) {
        Ok(req) => {
            let pending = handlers::start(broker, req, peer).await;
            (tokio::spawn(pending), true)
        }
        Err(fail) => {
            let reply = match (fail.correlation_id, &fail.error) {
                (Some(cid), ProtocolError::UnsupportedVersion { api_key, .. })
                    if *api_key == ApiKey::ApiVersions as i16 =>
                {
                    let mut out = BytesMut::new();
                    match codec::encode_api_versions_fallback(&mut out, cid) {
                        Ok(()) => Reply::Frame(out),
                        Err(_) => Reply::Close,
                    }
                }
                _ => {
                    tracing::warn!(%peer, api_key = fail.api_key, api_version = fail.api_version, error = %fail.error, "unusable request; closing connection");
                    Reply::Close
                }
            };
            let keep_going = matches!(reply, Reply::Frame(_));
            (tokio::spawn(async move { reply }), keep_going)
        }
    }
}

/// Waits for `size` bytes (plus the prefix) of the request-memory budget; None on shutdown.
async fn reserve(
    broker: &Broker,
    size: usize,
    shutdown: &mut tokio::sync::watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    let units = (size + frame::SIZE_PREFIX_BYTES).div_ceil(limits::REQUEST_MEMORY_UNIT_BYTES);
    let budget = broker.request_memory.clone();
    tokio::select! {
        permit = budget.acquire_many_owned(u32::try_from(units).unwrap_or(u32::MAX)) => permit.ok(),
        _ = shutdown.wait_for(|s| *s) => None,
    }
}

/// Sleeps until `deadline`, or forever when there is none.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// A started request and the request memory it holds until its response is written.
struct InFlight {
    task: JoinHandle<Reply>,
    _memory: Option<OwnedSemaphorePermit>,
}

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<InFlight>, peer: SocketAddr) {
    while let Some(InFlight { task, _memory }) = rx.recv().await {
        match task.await {
            Ok(Reply::Frame(bytes)) => {
                if let Err(e) = wr.write_all(&bytes).await {
                    tracing::debug!(%peer, error = %e, "write failed");
                    break;
                }
            }
            Ok(Reply::NoResponse) => {}
            Ok(Reply::Close) => break,
            Err(e) => {
                tracing::error!(%peer, error = %e, "request task failed; closing connection");
                break;
            }
        }
    }
    let _ = wr.shutdown().await;
}
