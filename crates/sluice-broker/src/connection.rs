//! One client connection: a reader that parses frames and starts requests in arrival order,
//! and a writer that sends their responses in that same order.
//!
//! The two halves are joined by a bounded channel of spawned request tasks. Its capacity is
//! the in-flight limit: when it is full the reader stops reading, and TCP pushes back on the
//! client. A malformed frame, an unknown API key or an unsupported version (other than
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
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::handlers::{self, Reply};
use crate::{limits, Broker};

pub(crate) async fn serve(broker: Arc<Broker>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let (mut rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::channel::<JoinHandle<Reply>>(limits::IN_FLIGHT_PER_CONNECTION_MAX);
    let writer = tokio::spawn(write_loop(wr, rx, peer));
    let mut shutdown = broker.shutdown.clone();
    let mut buf = BytesMut::with_capacity(limits::READ_CHUNK_BYTES);
    loop {
        match frame::check(&buf, broker.config.max_request_bytes) {
            Ok(Some(len)) => {
                let body = buf
                    .split_to(frame::SIZE_PREFIX_BYTES + len)
                    .freeze()
                    .slice(frame::SIZE_PREFIX_BYTES..);
                let (task, keep_going) = start_request(&broker, body, peer).await;
                if tx.send(task).await.is_err() || !keep_going {
                    break;
                }
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
            let pending = handlers::start(broker, req).await;
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

async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<JoinHandle<Reply>>,
    peer: SocketAddr,
) {
    while let Some(task) = rx.recv().await {
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
