//! A connection's two halves, raw TCP or TLS, behind the interface the connection uses, and
//! the TLS handshake that makes them ([`secure`]: within [`limits::TLS_HANDSHAKE_TIMEOUT_MS`];
//! the client certificate's subject becomes the connection's principal).
//!
//! The plaintext halves are tokio's own TCP halves, unchanged: the reader waits for
//! readiness and reads into its chunk in place, and the writer sends fetched records with
//! `sendfile` (zero-copy). Over TLS the kernel cannot send file pages (they must be
//! encrypted), so [`ConnWrite::tcp`] is `None` and `response_chunks` takes its copy path.
//! Both halves share the TLS stream behind a mutex held only inside one poll (never across
//! an `.await`). Reads keep the reader's readiness-then-read loop: [`ConnRead::readable`]
//! waits until rustls holds decrypted bytes (without taking them), and
//! [`ConnRead::try_read_buf`] copies them from rustls' own buffer straight into the frame
//! buffer, so a byte is copied once after decryption (a staging buffer in between cost a
//! second copy, about 7 % of the broker's CPU on a TLS produce load). Every response written
//! over TLS is flushed: rustls buffers records until told to send them.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use bytes::BufMut;
use tokio::io::{AsyncBufRead, AsyncWrite};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::time::Duration;
use tokio_rustls::server::TlsStream;

use crate::net::sasl::Session;
use crate::response_chunks::ChunkSink;
use crate::{config::limits, Broker};

type Tls = TlsStream<TcpStream>;
/// A TLS stream both halves use; the lock is held only inside one poll.
type SharedTls = Arc<Mutex<Tls>>;

/// The read half.
#[derive(Debug)]
pub(crate) enum ConnRead {
    Plain(OwnedReadHalf),
    Tls(SharedTls),
}

/// The write half.
#[derive(Debug)]
pub(crate) enum ConnWrite {
    Plain(OwnedWriteHalf),
    Tls(SharedTls),
}

/// The TLS stream, locked for one poll. A poisoned lock (a panic inside rustls while the
/// other half held it) ends the connection instead of using a stream in an unknown state.
fn lock(tls: &SharedTls) -> io::Result<MutexGuard<'_, Tls>> {
    tls.lock()
        .map_err(|_| io::Error::other("TLS stream lock poisoned"))
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
                .and_then(|c| crate::net::tls::principal(c));
            if let Some(p) = &principal {
                tracing::debug!(%peer, principal = %p, "TLS client certificate accepted");
            }
            let (rd, wr) = self::tls(stream);
            Some((rd, wr, Session::new(broker, sasl, principal, peer)))
        }
        Ok(Err(e)) => {
            crate::log_limit::info_limited!(crate::log_limit::TLS_HANDSHAKE_FAILED, %peer, error = %e, "TLS handshake failed; closing connection");
            None
        }
        Err(_) => {
            crate::log_limit::info_limited!(crate::log_limit::TLS_HANDSHAKE_FAILED, %peer, "TLS handshake not finished in time; closing connection");
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
    let shared = Arc::new(Mutex::new(stream));
    (ConnRead::Tls(shared.clone()), ConnWrite::Tls(shared))
}

impl ConnRead {
    /// Waits until a read can make progress (bytes, end of stream or an error). Cancel
    /// safe: over TLS, rustls keeps the decrypted bytes until `try_read_buf` takes them.
    pub(crate) async fn readable(&mut self) -> io::Result<()> {
        match self {
            ConnRead::Plain(rd) => rd.readable().await,
            ConnRead::Tls(tls) => {
                std::future::poll_fn(|cx| {
                    let mut stream = lock(tls)?;
                    // Ready with bytes, or with none at the end of the stream.
                    Pin::new(&mut *stream).poll_fill_buf(cx).map_ok(|_| ())
                })
                .await
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
            ConnRead::Tls(tls) => {
                let mut stream = lock(tls)?;
                take_decrypted(&mut stream, buf)
            }
        }
    }
}

/// Copies the decrypted bytes rustls holds into `buf`'s spare room, record by record, and
/// stops before anything would need the socket: that is `readable`'s job, whose waker a
/// socket poll from here would replace with this no-op one.
fn take_decrypted<B: BufMut>(stream: &mut Tls, buf: &mut B) -> io::Result<usize> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut room = buf.chunk_mut().len();
    let mut taken = 0;
    while room > 0 && !stream.get_ref().1.wants_read() {
        match Pin::new(&mut *stream).poll_fill_buf(&mut cx) {
            // The peer's close_notify once everything before it was taken.
            Poll::Ready(Ok([])) => return Ok(taken),
            Poll::Ready(Ok(decrypted)) => {
                let n = decrypted.len().min(room);
                buf.put_slice(&decrypted[..n]);
                Pin::new(&mut *stream).consume(n);
                room -= n;
                taken += n;
            }
            Poll::Ready(Err(e)) if taken == 0 => return Err(e),
            Poll::Ready(Err(_)) | Poll::Pending => break,
        }
    }
    match taken {
        0 => Err(io::ErrorKind::WouldBlock.into()),
        n => Ok(n),
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
            ConnWrite::Tls(tls) => Pin::new(&mut *lock(tls)?).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ConnWrite::Plain(w) => Pin::new(w).poll_write_vectored(cx, bufs),
            ConnWrite::Tls(tls) => Pin::new(&mut *lock(tls)?).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ConnWrite::Plain(w) => w.is_write_vectored(),
            ConnWrite::Tls(tls) => lock(tls).is_ok_and(|s| s.is_write_vectored()),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnWrite::Plain(w) => Pin::new(w).poll_flush(cx),
            ConnWrite::Tls(tls) => Pin::new(&mut *lock(tls)?).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ConnWrite::Plain(w) => Pin::new(w).poll_shutdown(cx),
            ConnWrite::Tls(tls) => Pin::new(&mut *lock(tls)?).poll_shutdown(cx),
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
