//! Responses as a list of chunks, written with vectored writes, so record bytes read from the
//! log reach the socket without another copy in user space.
//!
//! A [`ChunkedFrame`] is one framed response (size prefix, header, body) split into
//! [`Chunk`]s that are written back to back. The response's own framing bytes (sizes,
//! offsets, error codes, topic names) live in one buffer owned by the frame; record bytes are
//! the `Bytes` the log's read returned, shared, never copied. [`FrameBuilder`] assembles a
//! frame: framing is appended to its buffer, records are spliced in between, and the size
//! prefix is patched once the total is known.
//!
//! Guarantees: the bytes written are exactly the concatenation of the chunks in order (the
//! frame's `len` is checked against them when built); [`write_chunked`] either writes all of
//! them, resuming after partial writes, or returns the error, after which the connection must
//! not write anything else (the stream is mid-frame).
//!
//! Extension point: a chunk is an enum so that a file range (sendfile from a journal or
//! segment file, the kernel copying page cache to socket) can become a second variant. The
//! writer gathers memory chunks into one vectored write and would stop at a file chunk to
//! send it with its own call; [`ChunkedFrame::len`] already counts chunks by their length,
//! not by their bytes in memory.

use std::io::{self, IoSlice};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use sluice_protocol::frame::SIZE_PREFIX_BYTES;

/// Most slices handed to one `writev`: far below the kernel's IOV_MAX (1024), and enough for
/// a fetch of hundreds of partitions to leave in a few calls.
const IOVECS_PER_WRITE_MAX: usize = 64;

/// One piece of a response frame.
#[derive(Debug, Clone)]
pub(crate) enum Chunk {
    /// Bytes in memory: the response's own framing, or record bytes shared with the log read.
    Bytes(Bytes),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Bytes(b) => b.len(),
        }
    }
}

/// One framed response as chunks; see the module comment.
#[derive(Debug)]
pub(crate) struct ChunkedFrame {
    chunks: Vec<Chunk>,
    /// Bytes of the whole frame, size prefix included.
    len: usize,
}

impl ChunkedFrame {
    /// Bytes of the whole frame, size prefix included.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    pub(crate) fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// The frame as one contiguous buffer (tests compare it with the reference encoding).
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len);
        for c in &self.chunks {
            match c {
                Chunk::Bytes(b) => out.extend_from_slice(b),
            }
        }
        out
    }
}

/// A frame body larger than a Kafka size prefix can state.
#[derive(Debug, thiserror::Error)]
#[error("response of {0} bytes is too large for one frame")]
pub(crate) struct FrameTooLarge(pub usize);

/// Where the owned buffer ends before a shared chunk, or a shared chunk itself.
#[derive(Debug)]
enum Piece {
    /// The owned buffer up to this length.
    Own {
        end: usize,
    },
    Shared(Bytes),
}

/// Builds one [`ChunkedFrame`]: framing goes into [`FrameBuilder::own`], records are spliced
/// in with [`FrameBuilder::share`].
#[derive(Debug)]
pub(crate) struct FrameBuilder {
    own: BytesMut,
    pieces: Vec<Piece>,
    /// Length of `own` already covered by an `Own` piece.
    own_marked: usize,
    shared_len: usize,
}

impl FrameBuilder {
    /// A builder whose owned buffer starts with room for `framing_bytes` and the size prefix.
    pub(crate) fn new(framing_bytes: usize) -> Self {
        let mut own = BytesMut::with_capacity(SIZE_PREFIX_BYTES + framing_bytes);
        own.put_i32(0); // patched by `finish`
        Self {
            own,
            pieces: Vec::new(),
            own_marked: 0,
            shared_len: 0,
        }
    }

    /// The owned buffer, to append framing bytes to.
    pub(crate) fn own(&mut self) -> &mut BytesMut {
        &mut self.own
    }

    /// Appends `bytes` as a chunk of its own, without copying it.
    pub(crate) fn share(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        self.mark_own_end();
        self.shared_len += bytes.len();
        self.pieces.push(Piece::Shared(bytes));
    }

    /// Closes the run of owned bytes appended since the last shared chunk, if any.
    fn mark_own_end(&mut self) {
        if self.own_marked < self.own.len() {
            self.own_marked = self.own.len();
            self.pieces.push(Piece::Own {
                end: self.own_marked,
            });
        }
    }

    /// Patches the size prefix and returns the frame.
    pub(crate) fn finish(mut self) -> Result<ChunkedFrame, FrameTooLarge> {
        self.mark_own_end();
        let len = self.own.len() + self.shared_len;
        let size = i32::try_from(len - SIZE_PREFIX_BYTES)
            .map_err(|_| FrameTooLarge(len - SIZE_PREFIX_BYTES))?;
        self.own[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
        let own = self.own.freeze();
        let mut start = 0;
        let chunks: Vec<Chunk> = self
            .pieces
            .into_iter()
            .map(|p| match p {
                Piece::Own { end } => {
                    let c = Chunk::Bytes(own.slice(start..end));
                    start = end;
                    c
                }
                Piece::Shared(b) => Chunk::Bytes(b),
            })
            .collect();
        assert_eq!(start, own.len(), "every owned byte is in a chunk");
        debug_assert_eq!(chunks.iter().map(Chunk::len).sum::<usize>(), len);
        debug_assert!(chunks.iter().all(|c| c.len() > 0));
        Ok(ChunkedFrame { chunks, len })
    }
}

/// Position of the next byte to write: a chunk and an offset inside it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    chunk: usize,
    offset: usize,
}

impl Cursor {
    /// Fills `out` with the unwritten memory chunks from here on; returns how many it filled.
    fn gather<'a>(&self, chunks: &'a [Chunk], out: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (i, c) in chunks.iter().enumerate().skip(self.chunk) {
            if n == out.len() {
                break;
            }
            let Chunk::Bytes(b) = c;
            let from = if i == self.chunk { self.offset } else { 0 };
            out[n] = IoSlice::new(&b[from..]);
            n += 1;
        }
        n
    }

    /// Moves past `written` bytes.
    fn advance(&mut self, chunks: &[Chunk], mut written: usize) {
        while written > 0 {
            let left = chunks[self.chunk].len() - self.offset;
            if written < left {
                self.offset += written;
                return;
            }
            written -= left;
            self.chunk += 1;
            self.offset = 0;
        }
    }
}

/// Writes the whole frame with vectored writes, resuming after partial ones.
pub(crate) async fn write_chunked<W: AsyncWrite + Unpin>(
    wr: &mut W,
    frame: &ChunkedFrame,
) -> io::Result<()> {
    let chunks = frame.chunks.as_slice();
    let mut at = Cursor::default();
    let mut left = frame.len;
    while at.chunk < chunks.len() {
        let mut slices = [IoSlice::new(&[]); IOVECS_PER_WRITE_MAX];
        let n = at.gather(chunks, &mut slices);
        let written = wr.write_vectored(&slices[..n]).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        debug_assert!(written <= left);
        left -= written;
        at.advance(chunks, written);
    }
    assert_eq!(left, 0, "a frame is written exactly once");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// A writer that takes at most `step` bytes per call, spread over several slices, so
    /// every partial-write boundary is exercised.
    struct Trickle {
        out: Vec<u8>,
        step: usize,
        calls: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.out.extend_from_slice(&buf[..n]);
            self.calls += 1;
            Poll::Ready(Ok(n))
        }
        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut room = self.step;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(room);
                self.out.extend_from_slice(&b[..take]);
                room -= take;
                n += take;
                if room == 0 {
                    break;
                }
            }
            self.calls += 1;
            Poll::Ready(Ok(n))
        }
        fn is_write_vectored(&self) -> bool {
            true
        }
        fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    fn sample() -> (ChunkedFrame, Bytes, Bytes) {
        let records_a = Bytes::from((0..200u8).collect::<Vec<_>>());
        let records_b = Bytes::from(vec![7u8; 5]);
        let mut b = FrameBuilder::new(16);
        b.own().put_slice(b"head");
        b.share(records_a.clone());
        b.share(Bytes::new());
        b.share(records_b.clone());
        b.own().put_slice(b"mid");
        b.own().put_slice(b"tail");
        (b.finish().unwrap(), records_a, records_b)
    }

    // Goal: the size prefix counts everything after it, shared chunks are the log's own
    // buffers (not copies), and empty shares add no chunk.
    #[test]
    fn builder_splices_shared_bytes_without_copying() {
        let (frame, a, b) = sample();
        let bytes = frame.to_vec();
        assert_eq!(bytes.len(), frame.len());
        assert_eq!(bytes.len(), 4 + 4 + 200 + 5 + 7);
        assert_eq!(
            i32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize,
            bytes.len() - 4
        );
        assert_eq!(&bytes[4..8], b"head");
        assert_eq!(&bytes[bytes.len() - 7..], b"midtail");
        let chunks = frame.chunks();
        assert_eq!(chunks.len(), 4);
        let Chunk::Bytes(c1) = &chunks[1];
        let Chunk::Bytes(c2) = &chunks[2];
        assert_eq!(c1.as_ptr(), a.as_ptr(), "records are shared, not copied");
        assert_eq!(c2.as_ptr(), b.as_ptr(), "records are shared, not copied");
    }

    // Goal: whatever the writer accepts per call (1 byte up to everything), the bytes on the
    // wire are exactly the frame, once.
    #[tokio::test]
    async fn partial_writes_resume_where_they_stopped() {
        let (frame, _, _) = sample();
        let want = frame.to_vec();
        for step in [1, 2, 3, 4, 5, 7, 199, 200, 201, 211, 10_000] {
            let mut w = Trickle {
                out: Vec::new(),
                step,
                calls: 0,
            };
            write_chunked(&mut w, &frame).await.unwrap();
            assert_eq!(w.out, want, "step {step}");
            assert_eq!(w.calls, want.len().div_ceil(step), "step {step}");
        }
    }

    // Goal: more chunks than one vectored write takes still go out completely, in order.
    #[tokio::test]
    async fn many_chunks_take_several_writes() {
        let mut b = FrameBuilder::new(0);
        let mut want_body = Vec::new();
        for i in 0..(3 * IOVECS_PER_WRITE_MAX as u32) {
            b.own().put_u32(i);
            want_body.extend_from_slice(&i.to_be_bytes());
            let r = Bytes::from(vec![i as u8; 3]);
            want_body.extend_from_slice(&r);
            b.share(r);
        }
        let frame = b.finish().unwrap();
        let mut w = Trickle {
            out: Vec::new(),
            step: usize::MAX,
            calls: 0,
        };
        write_chunked(&mut w, &frame).await.unwrap();
        assert_eq!(&w.out[4..], &want_body[..]);
        assert_eq!(w.calls, 6);
    }
}
