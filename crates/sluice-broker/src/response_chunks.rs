//! Responses as a list of chunks, written with vectored writes and `sendfile(2)`, so record
//! bytes reach the socket without a copy in user space.
//!
//! A [`ChunkedFrame`] is one framed response (size prefix, header, body) split into
//! [`Chunk`]s that are written back to back. The response's own framing bytes (sizes,
//! offsets, error codes, topic names) live in one buffer owned by the frame; record bytes
//! are either ranges of the log's journal files ([`Chunk::File`], a [`FileRange`] that pins
//! its file until the frame is cleared) or, where the log had no file to send from, the
//! `Bytes` its read returned, shared, never copied. A frame is assembled in place: framing
//! is appended to its buffer, records are spliced in between, and the size prefix is
//! patched once the total is known. A connection reuses one frame for all its fetch
//! responses, so building one allocates nothing in steady state.
//!
//! Writing ([`write_chunked`]): runs of memory chunks go out as one vectored write; a file
//! chunk on a raw TCP socket goes out with `sendfile` (the kernel hands page-cache pages
//! to the socket: no `pread` into a buffer, no copy from it), non-blocking, resuming
//! after partial sends. A writer that is not a raw TCP socket (TLS, tests) gets the copy
//! path: the file range is read into memory on the blocking pool, at most
//! [`limits::FILE_CHUNK_COPY_BYTES`] at a time, and written.
//!
//! Guarantees: the bytes written are exactly the concatenation of the chunks in order (the
//! frame's `len` is checked against them when built); [`write_chunked`] either writes all of
//! them, resuming after partial writes, or returns the error, after which the connection must
//! not write anything else (the stream is mid-frame). A journal file shorter than a range
//! (it cannot be: ranges are below the committed length and the file is pinned, so this
//! would be damage under us) is such an error: `sendfile` returning 0 before the range is
//! done ends the write, never a retry loop.
//!
//! A `sendfile` whose pages are not in the page cache reads them from disk on the calling
//! worker thread, as Kafka's network threads do: fetches are served from the page cache in
//! the common case (the batch headers were just read by a fetch reader thread, and recent data
//! is cached); a cold read of old data can stall one worker for the disk's latency.

use std::io::{self, IoSlice};

use bytes::{BufMut, Bytes};
use sluice_log::FileRange;
use tokio::io::{AsyncWrite, AsyncWriteExt, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;

use sluice_protocol::frame::SIZE_PREFIX_BYTES;

use crate::config::limits;
use crate::memory::clear_kept;

/// Most slices handed to one `writev`: far below the kernel's IOV_MAX (1024), and enough for
/// a fetch of hundreds of partitions to leave in a few calls.
const IOVECS_PER_WRITE_MAX: usize = 64;

/// One piece of a response frame.
#[derive(Debug, Clone)]
pub(crate) enum Chunk {
    /// The frame's own framing bytes in this range of its buffer.
    Own { start: usize, end: usize },
    /// Record bytes in memory, shared with the log read that returned them.
    Bytes(Bytes),
    /// Record bytes in a journal file, sent from the page cache.
    File(FileRange),
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Own { start, end } => end - start,
            Chunk::Bytes(b) => b.len(),
            Chunk::File(r) => r.len(),
        }
    }
}

/// One framed response as chunks (see the module comment), built in place and reused: a
/// connection keeps its frame from one response to the next, so building one allocates
/// nothing once its two vectors have grown to the responses' size.
///
/// Building: [`ChunkedFrame::begin`], framing appended to [`ChunkedFrame::own`], records
/// spliced in with [`ChunkedFrame::share`] / [`ChunkedFrame::share_file`], then
/// [`ChunkedFrame::finish`] patches the size prefix. [`ChunkedFrame::clear`] lets go of
/// the records (and the journal files they pin) once the frame is written.
#[derive(Debug, Default)]
pub(crate) struct ChunkedFrame {
    /// Framing bytes, size prefix first.
    own: Vec<u8>,
    chunks: Vec<Chunk>,
    /// Length of `own` already covered by an `Own` chunk.
    own_marked: usize,
    /// Bytes of the `Bytes` and `File` chunks.
    shared_len: usize,
    /// Bytes of the whole frame, size prefix included; set by `finish`.
    len: usize,
}

impl ChunkedFrame {
    /// A frame begun with room for `framing_bytes` (tests, one-off frames).
    #[cfg(test)]
    pub(crate) fn new(framing_bytes: usize) -> Self {
        let mut frame = Self::default();
        frame.begin(framing_bytes);
        frame
    }

    /// Starts a new frame (dropping what the last one held) with room for `framing_bytes`
    /// of framing after the size prefix.
    pub(crate) fn begin(&mut self, framing_bytes: usize) {
        self.clear();
        self.own.reserve(SIZE_PREFIX_BYTES + framing_bytes);
        self.own.put_i32(0); // patched by `finish`
    }

    /// The framing buffer, to append framing bytes to.
    pub(crate) fn own(&mut self) -> &mut Vec<u8> {
        &mut self.own
    }

    /// Appends `bytes` as a chunk of its own, without copying it.
    pub(crate) fn share(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        self.mark_own_end();
        self.shared_len += bytes.len();
        self.chunks.push(Chunk::Bytes(bytes));
    }

    /// Appends a journal file range as a chunk of its own, to be sent from the file.
    pub(crate) fn share_file(&mut self, range: FileRange) {
        if range.len() == 0 {
            return;
        }
        self.mark_own_end();
        self.shared_len += range.len();
        self.chunks.push(Chunk::File(range));
    }

    /// Closes the run of framing bytes appended since the last shared chunk, if any.
    fn mark_own_end(&mut self) {
        if self.own_marked < self.own.len() {
            self.chunks.push(Chunk::Own {
                start: self.own_marked,
                end: self.own.len(),
            });
            self.own_marked = self.own.len();
        }
    }

    /// Patches the size prefix: the frame is ready to write.
    pub(crate) fn finish(&mut self) -> Result<(), FrameTooLarge> {
        assert!(self.own.len() >= SIZE_PREFIX_BYTES, "finish without begin");
        self.mark_own_end();
        let len = self.own.len() + self.shared_len;
        let size = i32::try_from(len - SIZE_PREFIX_BYTES)
            .map_err(|_| FrameTooLarge(len - SIZE_PREFIX_BYTES))?;
        self.own[..SIZE_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
        self.len = len;
        debug_assert_eq!(self.chunks.iter().map(Chunk::len).sum::<usize>(), len);
        debug_assert!(self.chunks.iter().all(|c| c.len() > 0));
        Ok(())
    }

    /// Forgets the frame: its records and the journal files they pin go now. Keeps the
    /// buffers' capacity unless a huge response grew them.
    pub(crate) fn clear(&mut self) {
        clear_kept(&mut self.chunks, limits::CALL_ENTRIES_KEPT_MAX);
        clear_kept(&mut self.own, limits::FRAME_BYTES_KEPT_MAX);
        self.own_marked = 0;
        self.shared_len = 0;
        self.len = 0;
    }

    /// Bytes of the whole frame, size prefix included (0 before `finish`).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes of the frame held in memory (its file chunks stay in the page cache).
    pub(crate) fn memory_len(&self) -> usize {
        self.own.len()
            + self
                .chunks
                .iter()
                .map(|c| match c {
                    Chunk::Bytes(b) => b.len(),
                    Chunk::Own { .. } | Chunk::File(_) => 0,
                })
                .sum::<usize>()
    }

    /// The bytes of a memory chunk.
    fn memory<'a>(&'a self, chunk: &'a Chunk) -> Option<&'a [u8]> {
        match chunk {
            Chunk::Own { start, end } => Some(&self.own[*start..*end]),
            Chunk::Bytes(b) => Some(b),
            Chunk::File(_) => None,
        }
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
            match (c, self.memory(c)) {
                (_, Some(b)) => out.extend_from_slice(b),
                (Chunk::File(r), None) => out.extend_from_slice(&r.read(0, r.len()).expect("read")),
                _ => unreachable!("only file chunks are not in memory"),
            }
        }
        out
    }
}

/// A frame body larger than a Kafka size prefix can state.
#[derive(Debug, thiserror::Error)]
#[error("response of {0} bytes is too large for one frame")]
pub(crate) struct FrameTooLarge(pub usize);

/// Position of the next byte to write: a chunk and an offset inside it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    chunk: usize,
    offset: usize,
}

impl Cursor {
    /// Fills `out` with the unwritten memory chunks from here up to the next file chunk;
    /// returns how many it filled.
    fn gather<'a>(&self, frame: &'a ChunkedFrame, out: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (i, c) in frame.chunks.iter().enumerate().skip(self.chunk) {
            if n == out.len() {
                break;
            }
            let Some(b) = frame.memory(c) else {
                break;
            };
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

/// A writer responses go to: any async writer, and the TCP socket under it when file
/// chunks may be sent with `sendfile` (a raw TCP connection; not TLS).
pub(crate) trait ChunkSink: AsyncWrite + Unpin {
    /// The socket to `sendfile` to; `None` sends file chunks through the copy path.
    fn tcp(&self) -> Option<&TcpStream> {
        None
    }
}

impl ChunkSink for OwnedWriteHalf {
    fn tcp(&self) -> Option<&TcpStream> {
        Some(self.as_ref())
    }
}

/// Writes the whole frame, resuming after partial writes: memory chunks with vectored
/// writes, file chunks with `sendfile` (or the copy path, see [`ChunkSink`]).
pub(crate) async fn write_chunked<W: ChunkSink>(
    wr: &mut W,
    frame: &ChunkedFrame,
) -> io::Result<()> {
    let chunks = frame.chunks.as_slice();
    let mut at = Cursor::default();
    assert!(frame.len >= SIZE_PREFIX_BYTES, "a finished frame");
    let mut left = frame.len;
    while at.chunk < chunks.len() {
        let written = match &chunks[at.chunk] {
            Chunk::File(range) => match wr.tcp() {
                Some(tcp) => send_file(tcp, range, at.offset).await?,
                None => copy_file(wr, range, at.offset).await?,
            },
            Chunk::Own { .. } | Chunk::Bytes(_) => {
                let mut slices = [IoSlice::new(&[]); IOVECS_PER_WRITE_MAX];
                let n = at.gather(frame, &mut slices);
                assert!(n > 0);
                wr.write_vectored(&slices[..n]).await?
            }
        };
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        assert!(written <= left);
        left -= written;
        at.advance(chunks, written);
    }
    assert_eq!(left, 0, "a frame is written exactly once");
    Ok(())
}

/// One `sendfile` of the range from byte `from` on: waits until the socket is writable and
/// returns the bytes the kernel took (a partial send is normal on a non-blocking socket).
/// A file that ends before the range does is an error (`UnexpectedEof`).
async fn send_file(tcp: &TcpStream, range: &FileRange, from: usize) -> io::Result<usize> {
    assert!(from < range.len());
    let count = range.len() - from;
    let start = range.position() + from as u64;
    let mut offset = nix::libc::off_t::try_from(start)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "file position too large"))?;
    loop {
        tcp.writable().await?;
        let sent = tcp.try_io(Interest::WRITABLE, || {
            nix::sys::sendfile::sendfile(tcp, range.fd(), Some(&mut offset), count)
                .map_err(io::Error::from)
        });
        match sent {
            Ok(0) => return Err(file_ended(start, count)),
            Ok(n) => return Ok(n),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

/// The error for a journal file that ends at `position`, inside a range being sent.
fn file_ended(position: u64, left: usize) -> io::Error {
    let why = format!("journal file ends at {position}, {left} bytes before its range does");
    io::Error::new(io::ErrorKind::UnexpectedEof, why)
}

/// The copy path: reads part of the range from byte `from` on into memory (on the blocking
/// pool: it is file I/O) and writes all of it; returns the bytes written.
async fn copy_file<W: AsyncWrite + Unpin>(
    wr: &mut W,
    range: &FileRange,
    from: usize,
) -> io::Result<usize> {
    let len = (range.len() - from).min(limits::FILE_CHUNK_COPY_BYTES);
    let file = range.clone();
    let buf = tokio::task::spawn_blocking(move || file.read(from, len))
        .await
        .map_err(io::Error::other)??;
    assert_eq!(buf.len(), len);
    wr.write_all(&buf).await?;
    Ok(buf.len())
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

    impl ChunkSink for Trickle {}

    fn sample() -> (ChunkedFrame, Bytes, Bytes) {
        let records_a = Bytes::from((0..200u8).collect::<Vec<_>>());
        let records_b = Bytes::from(vec![7u8; 5]);
        let mut b = ChunkedFrame::new(16);
        b.own().put_slice(b"head");
        b.share(records_a.clone());
        b.share(Bytes::new());
        b.share(records_b.clone());
        b.own().put_slice(b"mid");
        b.own().put_slice(b"tail");
        b.finish().unwrap();
        (b, records_a, records_b)
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
        let (Chunk::Bytes(c1), Chunk::Bytes(c2)) = (&chunks[1], &chunks[2]) else {
            panic!("records are memory chunks");
        };
        assert_eq!(c1.as_ptr(), a.as_ptr(), "records are shared, not copied");
        assert_eq!(c2.as_ptr(), b.as_ptr(), "records are shared, not copied");
    }

    // Goal: a frame reused for a second response carries only the second one's bytes, and
    // clearing it lets go of the records it shared.
    #[test]
    fn a_reused_frame_holds_only_its_latest_response() {
        let (mut frame, a, _) = sample();
        assert!(!a.is_unique(), "the frame shares the records");
        frame.begin(4);
        frame.own().put_slice(b"next");
        frame.finish().unwrap();
        assert!(
            a.is_unique(),
            "beginning a new frame let go of the old records"
        );
        assert_eq!(frame.to_vec(), [&4i32.to_be_bytes()[..], b"next"].concat());
        assert_eq!(frame.memory_len(), 8);
        frame.clear();
        assert_eq!(frame.len(), 0);
        assert!(frame.chunks().is_empty());
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
        let mut b = ChunkedFrame::new(0);
        let mut want_body = Vec::new();
        for i in 0..(3 * IOVECS_PER_WRITE_MAX as u32) {
            b.own().put_u32(i);
            want_body.extend_from_slice(&i.to_be_bytes());
            let r = Bytes::from(vec![i as u8; 3]);
            want_body.extend_from_slice(&r);
            b.share(r);
        }
        b.finish().unwrap();
        let frame = b;
        let mut w = Trickle {
            out: Vec::new(),
            step: usize::MAX,
            calls: 0,
        };
        write_chunked(&mut w, &frame).await.unwrap();
        assert_eq!(&w.out[4..], &want_body[..]);
        assert_eq!(w.calls, 6);
    }

    /// A file holding `len` patterned bytes.
    fn patterned_file(len: usize) -> (tempfile::NamedTempFile, Vec<u8>) {
        let bytes: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut f, &bytes).unwrap();
        (f, bytes)
    }

    /// A frame of framing, two file ranges, framing in between, and shared bytes; the
    /// bytes it must put on the wire.
    fn file_frame(file: &std::fs::File, content: &[u8]) -> (ChunkedFrame, Vec<u8>) {
        let a = (10usize, 24 * 1024 * 1024);
        let b = (5usize, 700_000);
        let mut fb = ChunkedFrame::new(16);
        fb.own().put_slice(b"head");
        fb.share_file(FileRange::standalone(
            file.try_clone().unwrap(),
            a.0 as u64,
            a.1 as u32,
        ));
        fb.own().put_slice(b"mid");
        fb.share_file(FileRange::standalone(
            file.try_clone().unwrap(),
            b.0 as u64,
            b.1 as u32,
        ));
        fb.share(Bytes::from_static(b"shared"));
        fb.own().put_slice(b"tail");
        fb.finish().unwrap();
        let frame = fb;
        let mut want = Vec::new();
        want.extend_from_slice(&((frame.len() - 4) as i32).to_be_bytes());
        want.extend_from_slice(b"head");
        want.extend_from_slice(&content[a.0..a.0 + a.1]);
        want.extend_from_slice(b"mid");
        want.extend_from_slice(&content[b.0..b.0 + b.1]);
        want.extend_from_slice(b"sharedtail");
        assert_eq!(frame.len(), want.len());
        assert_eq!(frame.memory_len(), 4 + 4 + 3 + 6 + 4);
        (frame, want)
    }

    /// A connected pair of real TCP sockets on loopback: (the writer's half, the reader).
    async fn socket_pair() -> (OwnedWriteHalf, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
        let (_rd, wr) = client.unwrap().into_split();
        // The read half is dropped: only the write half is used.
        (wr, accepted.unwrap().0)
    }

    // Goal: over a real socket, file chunks go out with sendfile from the file and memory
    // chunks with vectored writes, in order, exactly once, although the reader is slow, so
    // the socket buffer fills and sendfile sends parts of a range (partial sends resume).
    #[tokio::test]
    async fn sendfile_over_a_real_socket_resumes_after_partial_sends() {
        use tokio::io::AsyncReadExt;
        let (file, content) = patterned_file(25 * 1024 * 1024);
        let (frame, want) = file_frame(file.as_file(), &content);
        let (mut wr, mut rd) = socket_pair().await;
        assert!(
            wr.tcp().is_some(),
            "a raw TCP writer sends files with sendfile"
        );
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 4096];
            loop {
                let n = rd.read(&mut buf).await.unwrap();
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&buf[..n]);
                if got.len() < 64 * 1024 {
                    // Slow at first, and the range is larger than both socket buffers
                    // together: the writer meets a full socket buffer mid-range.
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            }
        });
        write_chunked(&mut wr, &frame).await.unwrap();
        wr.shutdown().await.unwrap();
        drop(wr);
        let got = reader.await.unwrap();
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes on the wire differ from the frame");
    }

    // Goal: a file range that runs past the end of its file (the file is shorter than the
    // range claims) fails the write with an error, after sending what the file has, instead
    // of hanging or panicking; both on the sendfile path and on the copy path.
    #[tokio::test]
    async fn a_range_past_the_file_end_fails_cleanly() {
        use tokio::io::AsyncReadExt;
        let (file, _) = patterned_file(100_000);
        let mut fb = ChunkedFrame::new(8);
        fb.own().put_slice(b"head");
        fb.share_file(FileRange::standalone(
            file.as_file().try_clone().unwrap(),
            50_000,
            80_000,
        ));
        fb.finish().unwrap();
        let frame = fb;
        let (mut wr, mut rd) = socket_pair().await;
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            rd.read_to_end(&mut got).await.unwrap();
            got.len()
        });
        let err = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            write_chunked(&mut wr, &frame),
        )
        .await
        .expect("no hang")
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
        drop(wr);
        assert_eq!(reader.await.unwrap(), 4 + 4 + 50_000, "what the file had");

        let mut w = Trickle {
            out: Vec::new(),
            step: 10_000,
            calls: 0,
        };
        let err = write_chunked(&mut w, &frame).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof, "{err}");
    }

    // Goal: a writer that cannot sendfile (TLS later; here the trickle writer) gets the
    // copy path: the same bytes, read in bounded pieces.
    #[tokio::test]
    async fn the_copy_path_writes_the_same_bytes() {
        let (file, content) = patterned_file(25 * 1024 * 1024);
        let (frame, want) = file_frame(file.as_file(), &content);
        let mut w = Trickle {
            out: Vec::new(),
            step: 100_000,
            calls: 0,
        };
        assert!(w.tcp().is_none());
        write_chunked(&mut w, &frame).await.unwrap();
        assert!(w.out == want, "bytes differ from the frame");
    }
}
