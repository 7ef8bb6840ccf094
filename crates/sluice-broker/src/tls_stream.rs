//! A connection's two halves, raw TCP or TLS, behind the interface the connection uses, and
//! the TLS handshake that makes them ([`secure`]: within [`limits::TLS_HANDSHAKE_TIMEOUT_MS`];
//! the client certificate's subject becomes the connection's principal).
//!
//! The plaintext halves are tokio's own TCP halves, unchanged: the reader waits for
//! readiness and reads into its chunk in place, and the writer sends fetched records with
//! `sendfile` (zero-copy). Over TLS the kernel cannot send file pages (they must be
//! encrypted), so [`ConnWrite::tcp`] is `None` and `response_chunks` takes its copy path;
//! reads go through a small staging buffer ([`limits::TLS_READ_STAGING_BYTES`]) of decrypted
//! bytes, so the reader's readiness-then-read loop works unchanged. Every response written
//! over TLS is flushed: rustls buffers records until told to send them.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWrite, ReadHalf, WriteHalf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::time::Duration;
use tokio_rustls::server::TlsStream;

use crate::response_chunks::ChunkSink;
use crate::sasl::Session;
use crate::{limits, Broker};

type Tls = TlsStream<TcpStream>;

/// The read half.
#[derive(Debug)]
pub(crate) enum ConnRead {
    Plain(OwnedReadHalf),
    Tls {
        rd: ReadHalf<Tls>,
        /// Decrypted bytes not yet taken by the reader.
        staged: BytesMut,
        /// The peer closed the TLS stream.
        eof: bool,
    },
}

/// The write half.
#[derive(Debug)]
pub(crate) enum ConnWrite {
    Plain(OwnedWriteHalf),
    Tls(WriteHalf<Tls>),
}

/// The connection's halves after its listener's TLS handshake (if any), and its SASL
/// session. None when the handshake failed or did not finish in time.
pub(crate) async fn secure(
    broker: &Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    listener: usize,
) -> Option<(ConnRead, ConnWrite, Session)> {
    let l = broker.listeners.get(listener).cloned();
    let tls = l.as_ref().and_then(|l| l.tls.clone());
    let sasl = l.as_ref().and_then(|l| l.sasl.clone());
    let Some(tls) = tls else {
        let (rd, wr) = plain(stream);
        return Some((rd, wr, Session::new(broker, sasl, None, peer)));
    };
    let within = Duration::from_millis(limits::TLS_HANDSHAKE_TIMEOUT_MS);
    match tokio::time::timeout(within, tls.acceptor().accept(stream)).await {
        Ok(Ok(stream)) => {
            let principal = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| crate::tls::principal(c));
            if let Some(p) = &principal {
                tracing::debug!(%peer, principal = %p, "TLS client certificate accepted");
            }
            let (rd, wr) = self::tls(stream);
            Some((rd, wr, Session::new(broker, sasl, principal, peer)))
        }
        Ok(Err(e)) => {
            tracing::info!(%peer, error = %e, "TLS handshake failed; closing connection");
            None
        }
        Err(_) => {
            tracing::info!(%peer, "TLS handshake not finished in time; closing connection");
            None
        }
    }
}

/// Splits a plaintext connection.
pub(crate) fn plain(stream: TcpStream) -> (ConnRead, ConnWrite) {
    let (rd, wr) = stream.into_split();
    (ConnRead::Plain(rd), ConnWrite::Plain(wr))
}

/// Splits a TLS connection (after its handshake).
pub(crate) fn tls(stream: Tls) -> (ConnRead, ConnWrite) {
    let (rd, wr) = tokio::io::split(stream);
    let read = ConnRead::Tls {
        rd,
        staged: BytesMut::new(),
        eof: false,
    };
    (read, ConnWrite::Tls(wr))
}

impl ConnRead {
    /// Waits until a read can make progress (bytes, end of stream or an error). Cancel
    /// safe: over TLS, decrypted bytes stay staged until taken.
    pub(crate) async fn readable(&mut self) -> io::Result<()> {
        match self {
            ConnRead::Plain(rd) => rd.readable().await,
            ConnRead::Tls { rd, staged, eof } => {
                if !staged.is_empty() || *eof {
                    return Ok(());
                }
                // Reuse the staging buffer in place once the reader took everything.
                staged.clear();
                staged.reserve(limits::TLS_READ_STAGING_BYTES);
                let mut limited = staged.limit(limits::TLS_READ_STAGING_BYTES);
                if rd.read_buf(&mut limited).await? == 0 {
                    *eof = true;
                }
                Ok(())
            }
        }
    }

    /// Reads what is there into `buf` without waiting: `Ok(0)` at end of stream,
    /// `WouldBlock` when nothing is there. Never grows `buf` beyond its spare room.
    /// Asks the kernel to report the socket readable only once `bytes` have arrived
    /// (`SO_RCVLOWAT`; 1 is the default). Plaintext only: over TLS the reader waits for
    /// records, whose sizes are not the frame's. Non-blocking reads still return whatever
    /// is there, and Linux wakes the reader early when its receive buffer or window is
    /// full, so a mark at most the bytes still to come can delay a wake-up, never lose one.
    pub(crate) fn set_recv_low_water(&self, bytes: usize) -> io::Result<()> {
        match self {
            ConnRead::Plain(rd) => set_recv_low_water(rd.as_ref(), bytes),
            ConnRead::Tls { .. } => Ok(()),
        }
    }

    pub(crate) fn try_read_buf<B: BufMut>(&mut self, buf: &mut B) -> io::Result<usize> {
        match self {
            ConnRead::Plain(rd) => rd.try_read_buf(buf),
            ConnRead::Tls { staged, eof, .. } => {
                if staged.is_empty() {
                    return match eof {
                        true => Ok(0),
                        false => Err(io::ErrorKind::WouldBlock.into()),
                    };
                }
                let n = staged.len().min(buf.chunk_mut().len());
                buf.put_slice(&staged[..n]);
                staged.advance(n);
                Ok(n)
            }
        }
    }
}

impl ConnWrite {
    /// True over TLS: each response must be flushed out of the TLS layer.
    pub(crate) fn buffers(&self) -> bool {
        matches!(self, ConnWrite::Tls(_))
    }
}

impl ChunkSink for ConnWrite {
    fn tcp(&self) -> Option<&TcpStream> {
        match self {
            ConnWrite::Plain(wr) => Some(wr.as_ref()),
            ConnWrite::Tls(_) => None,
        }
    }
}

impl AsyncWrite for ConnWrite {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnWrite::Plain(w) => Pin::new(w).poll_write(cx, buf),
            ConnWrite::Tls(w) => Pin::new(w).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnWrite::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            ConnWrite::Tls(w) => Pin::new(w).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ConnWrite::Plain(w) => w.is_write_vectored(),
            ConnWrite::Tls(w) => w.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnWrite::Plain(w) => Pin::new(w).poll_flush(cx),
            ConnWrite::Tls(w) => Pin::new(w).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnWrite::Plain(w) => Pin::new(w).poll_shutdown(cx),
            ConnWrite::Tls(w) => Pin::new(w).poll_shutdown(cx),
        }
    }
}

#[allow(unsafe_code)]
fn set_recv_low_water(socket: &TcpStream, bytes: usize) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let value = nix::libc::c_int::try_from(bytes).unwrap_or(nix::libc::c_int::MAX);
    // SAFETY: the descriptor is the live socket `socket` borrows; the option value is a
    // c_int on the stack, passed with its exact size.
    let rc = unsafe {
        nix::libc::setsockopt(
            socket.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            nix::libc::SO_RCVLOWAT,
            std::ptr::from_ref(&value).cast(),
            std::mem::size_of::<nix::libc::c_int>() as nix::libc::socklen_t,
        )
    };
    match rc {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
