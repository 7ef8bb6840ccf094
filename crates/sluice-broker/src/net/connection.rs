//! One client connection: a reader that parses frames and starts requests in arrival order,
//! and a writer that sends their responses in that same order.
//!
//! The two halves are joined by a bounded channel of started requests: spawned request
//! tasks, produce calls whose appends are queued and on which the writer waits itself, or
//! decoded fetch calls the writer runs itself (no task per produce or fetch request; see
//! `handlers::produce` and `handlers::fetch`). Its capacity is the in-flight
//! limit: when it is full the reader stops reading, and TCP pushes back on the client.
//!
//! Memory (see [`crate::memory`]): the reader charges bytes to the broker-wide budget as they
//! arrive, beyond the first [`limits::READ_CHUNK_BYTES`] it may buffer; a bare size prefix
//! charges nothing, so prefixes alone cannot starve other clients. A complete frame carries
//! its charge until its response is written. A frame bigger than one chunk is read into a
//! buffer of its own, which leaves with the frame; its allocation is kept and reused for a
//! later big frame once the old one is gone, within the bounds of `frame_buffers`. Once a
//! frame's size prefix has arrived, its body must arrive within
//! [`limits::FRAME_READ_TIMEOUT_MS`]. While the rest of a big frame is awaited, the socket's
//! low-water mark is set to that rest (`SO_RCVLOWAT`, within `limits::RECV_LOW_WATER_*`), so
//! a 1 MiB produce request wakes the reader once or twice, not once per burst of segments.
//!
//! Lifetime: a connection with no bytes received and no response owed for
//! `connections.max.idle.ms` is closed, and so is one whose client does not take a response
//! within that time (a response's write that has not finished after it): a client that
//! stops reading cannot hold a response's memory charge and the journal files its fetch
//! ranges pin for longer than an idle connection may live. When the client goes away (end
//! of stream, read or write error, idle close), the requests still in flight are aborted:
//! parked fetches and produce waits stop at once instead of running to their deadlines. (A
//! produce's appends were queued when it started, so aborting only drops the answer nobody
//! reads.)
//!
//! Writing: a response is either one contiguous frame or a fetch call's chunked frame
//! (framing plus journal file ranges), written with vectored writes and `sendfile` that
//! resume after partial writes (see [`crate::response_chunks`]). Either way one response is
//! written completely before the next one starts, and its charge is released only after its
//! last byte is written.
//!
//! Security (see [`crate::net::tls_stream`], [`crate::net::sasl`]): on a TLS listener the handshake
//! runs first, within [`limits::TLS_HANDSHAKE_TIMEOUT_MS`], and the halves are TLS halves
//! (fetched records are then encrypted from a copy instead of sent with `sendfile`). On a
//! SASL listener every frame passes the connection's SASL gate before it is routed: until the
//! client has authenticated only ApiVersions, SaslHandshake and SaslAuthenticate are served.
//!
//! Client quotas (see [`crate::services::quotas`]): a produce or fetch whose quota is in debt carries
//! `throttle_time_ms`, and the connection is muted for that long: the reader takes no next
//! request (buffered or not) until it is over, as Kafka mutes a throttled channel. The
//! reader mutes itself for produce requests (acks=0 included), the writer for fetches
//! (whose throttle is known once they are answered); both extend one shared deadline.
//!
//! A malformed frame, an unknown API key or an unsupported version (other than
//! ApiVersions, which gets the v0 fallback) closes this connection after the responses
//! already owed are written; no other connection is affected.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use kafka_protocol::messages::ApiKey;
use sluice_protocol::{codec, frame, header, ProtocolError};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::{Duration, Instant};

use crate::handlers::fetch::FetchCall;
use crate::handlers::produce::{self, ProduceCall};
use crate::handlers::{self, Calls, Reply, Started};
use crate::log_limit::{self, info_limited, warn_limited};
use crate::memory::{self, Overdraft, Reservation};
use crate::net::frame_buffers::FrameBuffers;
use crate::net::sasl::{Gate, Session};
use crate::net::tls_stream::{self, ConnRead, ConnWrite};
use crate::response_chunks::{self, ChunkedFrame};
use crate::{config::limits, Broker};

/// The connection's mute deadline (client quotas), shared by its reader and writer.
#[derive(Debug)]
struct Mute {
    base: Instant,
    /// Milliseconds after `base` until which the reader takes no request (0: never muted).
    until_ms: AtomicU64,
}

impl Mute {
    fn new() -> Mute {
        Mute {
            base: Instant::now(),
            until_ms: AtomicU64::new(0),
        }
    }

    /// Mutes for `throttle_ms` from now (never shortening a longer mute).
    fn extend(&self, throttle_ms: u64) {
        if throttle_ms == 0 {
            return;
        }
        let until = self.base.elapsed().as_millis() as u64 + throttle_ms;
        self.until_ms.fetch_max(until, Ordering::AcqRel);
    }

    /// When the mute ends, if it has not.
    fn until(&self) -> Option<Instant> {
        let ms = self.until_ms.load(Ordering::Acquire);
        let until = self.base + Duration::from_millis(ms);
        (ms > 0 && until > Instant::now()).then_some(until)
    }
}

/// Why the reader stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Bad input or shutdown: write the responses already owed, then close.
    Drain,
    /// The client is gone (or idle): nobody reads the answers, abort what is in flight.
    Abort,
}

pub(crate) async fn serve(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    listener: usize,
) {
    let _ = stream.set_nodelay(true);
    let Some((rd, wr, session)) = tls_stream::secure(&broker, stream, peer, listener).await else {
        return;
    };
    let (tx, rx) = mpsc::channel::<InFlight>(limits::IN_FLIGHT_PER_CONNECTION_MAX);
    let (abort_tx, abort_rx) = watch::channel(false);
    let owed = Arc::new(AtomicUsize::new(0));
    let mute = Arc::new(Mute::new());
    let calls = Calls::default();
    let writer = tokio::spawn(write_loop(
        Writer {
            wr,
            peer,
            write_within: Duration::from_millis(broker.config.connections_max_idle_ms),
        },
        rx,
        broker.clone(),
        abort_rx,
        owed.clone(),
        calls.clone(),
        mute.clone(),
    ));
    let mut reader = Reader {
        broker: &broker,
        calls,
        spare_chunk: None,
        frame_buffers: FrameBuffers::new(&broker.request_memory),
        big_frame_bytes: None,
        rd,
        peer,
        listener,
        session,
        buf: BytesMut::with_capacity(limits::READ_CHUNK_BYTES),
        held: broker.request_memory.empty(),
        overdraft: None,
        frame_deadline: None,
        owed,
        mute,
        recv_low_water: 1,
    };
    let stop = reader.run(&tx).await;
    if stop == Stop::Abort {
        let _ = abort_tx.send(true);
    }
    // Dropping the sender lets the writer finish the responses already owed, then stop.
    drop(tx);
    let _ = writer.await;
}

struct Reader<'a> {
    broker: &'a Arc<Broker>,
    /// Produce and fetch calls kept for reuse (given back by the writer).
    calls: Calls,
    /// The read chunk, put aside while a big frame is read into a buffer of its own.
    spare_chunk: Option<BytesMut>,
    /// Kept allocations of earlier big frames, reused for later ones.
    frame_buffers: FrameBuffers<'a>,
    /// While `buf` is a big frame's own buffer: the size of its allocation.
    big_frame_bytes: Option<usize>,
    rd: ConnRead,
    peer: SocketAddr,
    /// Index of the listener the client connected through.
    listener: usize,
    /// The client's authentication state (its SASL gate).
    session: Session,
    buf: BytesMut,
    /// Budget charged for the bytes in `buf` beyond the free first chunk.
    held: Reservation,
    /// Held while the frame being read is finished without budget (see `memory`).
    overdraft: Option<Overdraft>,
    /// When the frame being read must be complete.
    frame_deadline: Option<Instant>,
    /// Requests started whose responses are not yet written (the writer decrements).
    owed: Arc<AtomicUsize>,
    /// Until when the client's quota mutes this connection.
    mute: Arc<Mute>,
    /// The socket's `SO_RCVLOWAT` as last set (1: the kernel's default).
    recv_low_water: usize,
}

impl Reader<'_> {
    async fn run(&mut self, tx: &mpsc::Sender<InFlight>) -> Stop {
        let broker = self.broker;
        let mut shutdown = broker.shutdown.clone();
        let idle = Duration::from_millis(broker.config.connections_max_idle_ms);
        let mut idle_deadline = Instant::now() + idle;
        loop {
            if let Some(until) = self.mute.until() {
                tokio::select! {
                    () = tokio::time::sleep_until(until) => {}
                    _ = shutdown.wait_for(|s| *s) => return Stop::Drain,
                }
                idle_deadline = Instant::now() + idle;
            }
            let max_frame_bytes = self
                .session
                .max_frame_bytes(broker.config.max_request_bytes);
            match frame::check(&self.buf, max_frame_bytes) {
                Ok(Some(len)) => {
                    let in_flight = match self.split_frame(len, &mut shutdown).await {
                        Some(f) => f,
                        None => return Stop::Drain,
                    };
                    self.owed.fetch_add(1, Ordering::AcqRel);
                    let keep_going = in_flight.keep_going;
                    if tx.send(in_flight).await.is_err() {
                        return Stop::Abort;
                    }
                    if !keep_going {
                        return Stop::Drain;
                    }
                    continue;
                }
                Ok(None) => {
                    if self.frame_deadline.is_none() && self.buf.len() >= frame::SIZE_PREFIX_BYTES {
                        self.start_frame();
                    }
                }
                Err(e) => {
                    warn_limited!(log_limit::BAD_FRAME, peer = %self.peer, error = %e, "bad frame; closing connection");
                    return Stop::Drain;
                }
            }
            if let Err(stop) = self.charge_next_read(&mut shutdown).await {
                return stop;
            }
            self.wait_for_frame_rest();
            tokio::select! {
                ready = self.rd.readable() => {
                    if let Err(e) = ready {
                        tracing::debug!(peer = %self.peer, error = %e, "read failed");
                        return Stop::Abort;
                    }
                    // Room is made only once bytes are there: by then a client that waits
                    // for each response has released the last frame, and the buffer is
                    // reused in place instead of a fresh chunk being allocated.
                    self.make_room();
                    let mut limited = (&mut self.buf).limit(limits::READ_CHUNK_BYTES);
                    match self.rd.try_read_buf(&mut limited) {
                        Ok(0) => return Stop::Abort,
                        Ok(_) => idle_deadline = Instant::now() + idle,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) => {
                            tracing::debug!(peer = %self.peer, error = %e, "read failed");
                            return Stop::Abort;
                        }
                    }
                },
                _ = shutdown.wait_for(|s| *s) => return Stop::Drain,
                _ = until(self.frame_deadline) => {
                    warn_limited!(log_limit::FRAME_TIMEOUT, peer = %self.peer, "request body not received in time; closing connection");
                    return Stop::Drain;
                }
                _ = tokio::time::sleep_until(idle_deadline), if self.frame_deadline.is_none() => {
                    if self.owed.load(Ordering::Acquire) == 0 {
                        info_limited!(log_limit::CONNECTION_CLOSED_IDLE, peer = %self.peer, idle_ms = idle.as_millis() as u64, "connection idle; closing it (connections.max.idle.ms)");
                        return Stop::Abort;
                    }
                    // A response is still owed (a long poll): not idle.
                    idle_deadline = Instant::now() + idle;
                }
            }
        }
    }

    /// The whole size of the frame being read, once its size prefix is in.
    fn frame_total(&self) -> Option<usize> {
        let b = &self.buf;
        (self.frame_deadline.is_some() && b.len() >= frame::SIZE_PREFIX_BYTES).then(|| {
            // frame::check accepted the prefix: positive and within the limit.
            frame::SIZE_PREFIX_BYTES + i32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize
        })
    }

    /// Sets the socket's low-water mark before a wait: the rest of a big frame (within
    /// [`limits::RECV_LOW_WATER_MAX_BYTES`]), else 1. Never more than the bytes still to come
    /// of the frame being read, so the wake-up it delays always comes.
    fn wait_for_frame_rest(&mut self) {
        let rest = self
            .frame_total()
            .map_or(0, |total| total.saturating_sub(self.buf.len()));
        let want = match rest >= limits::RECV_LOW_WATER_MIN_BYTES {
            true => rest.min(limits::RECV_LOW_WATER_MAX_BYTES),
            false => 1,
        };
        if want != self.recv_low_water {
            match self.rd.set_recv_low_water(want) {
                Ok(()) => self.recv_low_water = want,
                Err(e) => tracing::debug!(peer = %self.peer, error = %e, "SO_RCVLOWAT refused"),
            }
        }
    }

    /// A frame's size prefix has arrived: its body must arrive in time.
    fn start_frame(&mut self) {
        self.frame_deadline =
            Some(Instant::now() + Duration::from_millis(limits::FRAME_READ_TIMEOUT_MS));
    }

    /// Makes room to read. A frame that outgrows the first chunk gets a buffer of its own (a
    /// kept one, or one of exactly its size), so it is never copied while growing and
    /// leaves with the frame. Otherwise reads go into the room left in the
    /// current chunk while there is some; when there is too little, the chunk is reused in
    /// place if the frames read into it are gone (a client that waits for each response),
    /// and only else is a fresh chunk allocated. Nothing is allocated on a bare size prefix.
    fn make_room(&mut self) {
        let (len, capacity) = (self.buf.len(), self.buf.capacity());
        match self.frame_total() {
            // The frame's own buffer has room for the rest of it: never grow it (that would
            // copy the whole frame); bytes past the frame wait for the next buffer.
            Some(total) if capacity >= total && total > len => {}
            Some(total) if total > len + limits::READ_CHUNK_BYTES => {
                // Not `reserve`: it would round the capacity up (to twice the old one, or
                // more) and copy, and the frame keeps this buffer until it is handled.
                let (mut own, bytes) = self.frame_buffers.take(total);
                own.extend_from_slice(&self.buf);
                let mut chunk = std::mem::replace(&mut self.buf, own);
                chunk.clear();
                self.spare_chunk = Some(chunk);
                self.big_frame_bytes = Some(bytes);
            }
            _ if capacity - len >= limits::READ_ROOM_MIN_BYTES => {}
            _ => {
                let additional = limits::READ_CHUNK_BYTES
                    .saturating_sub(len)
                    .max(limits::READ_ROOM_MIN_BYTES);
                // With the frames still in flight, read into the little room left first:
                // readiness may be left over from the last read, and when bytes really
                // come the frames before may be gone.
                if !self.buf.try_reclaim(additional) && capacity == len {
                    self.buf.reserve(additional);
                }
            }
        }
    }

    /// The read chunk put aside while a big frame had its own buffer, reused in place if
    /// the frames read into it are gone; else a fresh one.
    fn take_chunk(&mut self) -> BytesMut {
        match self.spare_chunk.take() {
            Some(mut chunk) => match chunk.try_reclaim(limits::READ_CHUNK_BYTES) {
                true => chunk,
                false => BytesMut::with_capacity(limits::READ_CHUNK_BYTES),
            },
            None => BytesMut::with_capacity(limits::READ_CHUNK_BYTES),
        }
    }

    /// Before reading up to one chunk more, charges the budget for every buffered byte beyond
    /// the free first chunk. When the budget is exhausted, waits for it, or (while a frame is
    /// partly read) for the overdraft, so partly read frames cannot all wait on each other.
    async fn charge_next_read(&mut self, shutdown: &mut watch::Receiver<bool>) -> Result<(), Stop> {
        if self.overdraft.is_some() {
            return Ok(());
        }
        let need = memory::units(self.buf.len());
        let Some(missing) = need.checked_sub(self.held.units()).filter(|m| *m > 0) else {
            return Ok(());
        };
        let memory = &self.broker.request_memory;
        if let Some(r) = memory.try_reserve(missing) {
            self.held.merge(r);
            return Ok(());
        }
        let partial = self.frame_deadline.is_some();
        tokio::select! {
            r = memory.reserve(missing) => self.held.merge(r),
            o = memory.overdraft(), if partial => {
                tracing::debug!(peer = %self.peer, "request memory exhausted; finishing this frame on the overdraft");
                self.overdraft = Some(o);
            }
            _ = shutdown.wait_for(|s| *s) => return Err(Stop::Drain),
            _ = until(self.frame_deadline) => {
                warn_limited!(log_limit::FRAME_TIMEOUT, peer = %self.peer, "request body not received in time; closing connection");
                return Err(Stop::Drain);
            }
        }
        Ok(())
    }

    /// Splits the complete frame of body length `len` off the buffer with its charge, and
    /// starts its request. None on shutdown.
    async fn split_frame(
        &mut self,
        len: usize,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<InFlight> {
        let total = frame::SIZE_PREFIX_BYTES + len;
        let need = memory::units(total);
        let mut charge = self.held.take(need);
        let overdraft = self.overdraft.take();
        if overdraft.is_none() && charge.units() < need {
            // Arrived within the free first chunk: charge it now, before it is handled.
            let missing = need - charge.units();
            tokio::select! {
                r = self.broker.request_memory.reserve(missing) => charge.merge(r),
                _ = shutdown.wait_for(|s| *s) => return None,
            }
        }
        debug_assert!(
            overdraft.is_some()
                || charge.units() >= need.min(self.broker.request_memory.total_units())
        );
        let frame = self.buf.split_to(total).freeze();
        let body = frame.slice(frame::SIZE_PREFIX_BYTES..);
        if let Some(bytes) = self.big_frame_bytes.take() {
            // The frame had a buffer of its own: keep its allocation for a later big frame,
            // and read on in the chunk (what was read past the frame is at most one chunk).
            let mut chunk = self.take_chunk();
            chunk.extend_from_slice(&self.buf);
            let own = std::mem::replace(&mut self.buf, chunk);
            self.frame_buffers.give(own, bytes);
        } else if total > limits::READ_CHUNK_BYTES && self.buf.capacity() > limits::READ_CHUNK_BYTES
        {
            // The chunk grew to finish a frame a little bigger than it: start a fresh one.
            let mut chunk = self.take_chunk();
            chunk.extend_from_slice(&self.buf);
            self.buf = chunk;
        }
        self.frame_deadline = None;
        let arrived = Instant::now();
        // The header's first field; a frame too short for it is recorded as unknown.
        let api_key = body
            .get(..2)
            .map_or(-1, |k| i16::from_be_bytes([k[0], k[1]]));
        let (work, keep_going) = match self.session.gate(self.broker, &body) {
            Gate::Answered(reply, keep_going) => (Work::Ready(reply), keep_going),
            Gate::Route => {
                let principal = (
                    self.session.principal.clone(),
                    self.session.token_authenticated,
                );
                let (work, keep_going, throttle_ms) = start_request(
                    self.broker,
                    body,
                    self.peer,
                    self.listener,
                    principal,
                    &self.calls,
                )
                .await;
                self.mute.extend(throttle_ms);
                (work, keep_going)
            }
        };
        Some(InFlight {
            work,
            keep_going,
            api_key,
            arrived,
            _memory: charge,
            _overdraft: overdraft,
        })
    }
}

/// Parses one frame and starts its request. Returns the work that yields the response,
/// whether to keep reading from this connection, and the produce quota's throttle time.
async fn start_request(
    broker: &Arc<Broker>,
    body: bytes::Bytes,
    peer: SocketAddr,
    listener: usize,
    principal: (Arc<str>, bool),
    calls: &Calls,
) -> (Work, bool, u64) {
    match header::parse(body, &handlers::table::Keyed) {
        Ok(req) => match handlers::start(broker, req, peer, listener, principal, calls).await {
            Started::Task(pending) => (Work::Task(tokio::spawn(pending)), true, 0),
            Started::Produce(produce::Started::Waiting(call)) => {
                let throttle_ms = call.throttle_ms();
                (Work::Produce(call), true, throttle_ms)
            }
            Started::Fetch(call) => (Work::Fetch(call), true, 0),
            Started::Produce(produce::Started::Done(reply, call)) => {
                let throttle_ms = call.throttle_ms();
                calls.produce.put(call);
                let keep_going = !matches!(reply, Reply::Close);
                (Work::Ready(reply), keep_going, throttle_ms)
            }
        },
        Err(fail) => {
            let reply = match (fail.correlation_id, &fail.error) {
                (Some(cid), ProtocolError::UnsupportedVersion { api_key, .. })
                    if *api_key == ApiKey::ApiVersions as i16 =>
                {
                    let mut out = BytesMut::new();
                    match codec::encode_api_versions_fallback(
                        &mut out,
                        cid,
                        handlers::table::apis(),
                    ) {
                        // It carries UNSUPPORTED_VERSION.
                        Ok(()) => Reply::Frame {
                            frame: out,
                            error: true,
                        },
                        Err(_) => Reply::Close,
                    }
                }
                _ => {
                    warn_limited!(log_limit::UNUSABLE_REQUEST, %peer, api_key = fail.api_key, api_version = fail.api_version, error = %fail.error, "unusable request; closing connection");
                    Reply::Close
                }
            };
            let keep_going = matches!(reply, Reply::Frame { .. });
            (Work::Ready(reply), keep_going, 0)
        }
    }
}

/// Sleeps until `deadline`, or forever when there is none.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// What yields a started request's response.
enum Work {
    /// A spawned request task.
    Task(JoinHandle<Reply>),
    /// A produce request whose appends are queued: the writer waits on it.
    Produce(Box<ProduceCall>),
    /// A decoded fetch request: the writer runs it.
    Fetch(Box<FetchCall>),
    /// Known already (no response, a close, the ApiVersions fallback).
    Ready(Reply),
}

impl Work {
    /// Stops the work: nobody will read its answer.
    fn abort(&self) {
        if let Work::Task(task) = self {
            task.abort();
        }
        // A produce's appends stay queued (they were accepted); nobody waits for them. A
        // fetch call that never ran is dropped with the queue.
    }
}

/// A started request and the request memory it holds until its response is written.
struct InFlight {
    work: Work,
    keep_going: bool,
    /// For the per-API metrics, recorded once its response is written.
    api_key: i16,
    /// When its frame was complete.
    arrived: Instant,
    _memory: Reservation,
    _overdraft: Option<Overdraft>,
}

/// The connection's write half, and how long one response may take to be written.
struct Writer {
    wr: ConnWrite,
    peer: SocketAddr,
    /// `connections.max.idle.ms`: a response not taken by the client within it closes the
    /// connection.
    write_within: Duration,
}

impl Writer {
    async fn frame(&mut self, bytes: &[u8]) -> bool {
        let (peer, within) = (self.peer, self.write_within);
        let wr = &mut self.wr;
        let write = async move {
            wr.write_all(bytes).await?;
            flush_if_buffered(wr).await
        };
        match bounded(within, peer, write).await {
            Some(Ok(())) => true,
            Some(Err(e)) => {
                tracing::debug!(%peer, error = %e, "write failed");
                false
            }
            None => false,
        }
    }

    async fn chunks(&mut self, frame: &ChunkedFrame) -> bool {
        let (peer, within) = (self.peer, self.write_within);
        let wr = &mut self.wr;
        let write = async move {
            response_chunks::write_chunked(wr, frame).await?;
            flush_if_buffered(wr).await
        };
        match bounded(within, peer, write).await {
            Some(Ok(())) => true,
            Some(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                // A journal file shorter than a range of it: damage under a pinned file. The
                // stream is mid-frame, so the connection closes.
                tracing::error!(%peer, error = %e, "fetch response could not be sent from its journal file; closing connection");
                false
            }
            Some(Err(e)) => {
                tracing::debug!(%peer, error = %e, "write failed");
                false
            }
            None => false,
        }
    }
}

/// Sends what the TLS layer buffered of a response (nothing to do on plain TCP).
async fn flush_if_buffered(wr: &mut ConnWrite) -> std::io::Result<()> {
    match wr.buffers() {
        true => wr.flush().await,
        false => Ok(()),
    }
}

/// Runs one response's write, or gives up on a client that does not take it in time.
async fn bounded<T>(
    within: Duration,
    peer: SocketAddr,
    write: impl std::future::Future<Output = T>,
) -> Option<T> {
    match tokio::time::timeout(within, write).await {
        Ok(done) => Some(done),
        Err(_) => {
            info_limited!(log_limit::CONNECTION_CLOSED_IDLE, %peer, within_ms = within.as_millis() as u64, "client did not take a response in time (connections.max.idle.ms); closing connection");
            None
        }
    }
}

async fn write_loop(
    mut wr: Writer,
    mut rx: mpsc::Receiver<InFlight>,
    // The broker whose metrics the writer records.
    broker: Arc<Broker>,
    mut abort: watch::Receiver<bool>,
    owed: Arc<AtomicUsize>,
    calls: Calls,
    mute: Arc<Mute>,
) {
    while let Some(mut item) = rx.recv().await {
        // Whether a Task's or Ready's response carries an error code (Produce and Fetch
        // calls answer it themselves below).
        let mut replied_error = false;
        let written = match &mut item.work {
            Work::Produce(call) => {
                tokio::select! {
                    () = call.wait() => {}
                    _ = abort.wait_for(|a| *a) => break,
                }
                match call.respond() {
                    Some(frame) => wr.frame(frame).await,
                    None => false,
                }
            }
            Work::Fetch(call) => {
                let answered = tokio::select! {
                    ok = call.run() => ok,
                    _ = abort.wait_for(|a| *a) => break,
                };
                let written = answered && wr.chunks(call.frame()).await;
                mute.extend(call.throttle_ms());
                written
            }
            Work::Task(task) => {
                let outcome = tokio::select! {
                    r = &mut *task => r,
                    _ = abort.wait_for(|a| *a) => {
                        task.abort();
                        break;
                    }
                };
                match outcome {
                    Ok(reply) => {
                        replied_error = reply.has_error();
                        write_reply(&mut wr, reply).await
                    }
                    Err(e) => {
                        tracing::error!(peer = %wr.peer, error = %e, "request task failed; closing connection");
                        false
                    }
                }
            }
            Work::Ready(reply) => {
                let reply = std::mem::replace(reply, Reply::NoResponse);
                replied_error = reply.has_error();
                write_reply(&mut wr, reply).await
            }
        };
        // Recorded once per request, here: latency to the response's last byte, and an
        // error when the connection closes instead or the response carries an error code.
        let failed = !written
            || match &item.work {
                Work::Produce(call) => call.has_partition_error(),
                Work::Fetch(call) => call.has_error(),
                Work::Task(_) | Work::Ready(_) => replied_error,
            };
        broker
            .metrics
            .request_done(item.api_key, item.arrived.elapsed(), failed);
        // The response (and with it the request's charge) is released here.
        let InFlight { work, .. } = item;
        match work {
            Work::Produce(call) => calls.produce.put(call),
            // Its frame (and the journal files it pins) is cleared as it is kept.
            Work::Fetch(call) => calls.fetch.put(call),
            Work::Task(_) | Work::Ready(_) => {}
        }
        owed.fetch_sub(1, Ordering::AcqRel);
        if !written {
            break;
        }
    }
    // Whatever is still queued will never be answered: stop it rather than let it run on.
    rx.close();
    while let Some(item) = rx.recv().await {
        item.work.abort();
    }
    let _ = wr.wr.shutdown().await;
}

/// Writes one reply; false when the connection must close.
async fn write_reply(wr: &mut Writer, reply: Reply) -> bool {
    match reply {
        Reply::Frame { frame, .. } => wr.frame(&frame).await,
        Reply::NoResponse => true,
        Reply::Close => false,
    }
}
