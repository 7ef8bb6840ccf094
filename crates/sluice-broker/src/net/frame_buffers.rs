//! Buffers for frames larger than one read chunk, kept per connection and reused.
//!
//! A Produce request of a few hundred KiB (a producer's batches for many partitions) does
//! not fit the connection's 64 KiB read chunk, so it is read into a buffer of its own. That
//! buffer leaves with the frame: the request's batches are written to the journal straight
//! from it. Allocating one per request (and letting the heap hand it back) was the produce
//! path's last allocation per request. Instead the connection keeps the buffer's allocation
//! after the frame is split off (an empty `BytesMut` sharing it) and reclaims it for a later
//! big frame once every reference to the old frame has gone.
//!
//! Bounds: a connection keeps at most [`limits::FRAME_BUFFERS_KEPT_PER_CONNECTION`] buffers
//! (a pipelining producer has several big frames in flight), none larger than
//! [`limits::FRAME_BUFFER_KEPT_BYTES_MAX`], and all connections together at most
//! [`limits::FRAME_BUFFERS_KEPT_BYTES_TOTAL_MAX`] (counted in [`RequestMemory`]); a buffer
//! that would exceed any of them is freed as before. Kept buffers hold no budget: the frame
//! read into one is charged as its bytes arrive, like any other.

use bytes::BytesMut;

use crate::config::limits;
use crate::memory::RequestMemory;

/// One kept allocation: an empty handle on it, and its size (what the handle can reclaim).
#[derive(Debug)]
struct Kept {
    handle: BytesMut,
    bytes: usize,
}

/// The big-frame buffers one connection keeps.
#[derive(Debug)]
pub(crate) struct FrameBuffers<'a> {
    memory: &'a RequestMemory,
    kept: Vec<Kept>,
}

impl<'a> FrameBuffers<'a> {
    pub(crate) fn new(memory: &'a RequestMemory) -> Self {
        Self {
            memory,
            kept: Vec::new(),
        }
    }

    /// An empty buffer with room for `total` bytes: a kept one whose earlier frame is gone,
    /// or a fresh one of exactly that size. Returns it with the size of its allocation (to
    /// give back with it).
    pub(crate) fn take(&mut self, total: usize) -> (BytesMut, usize) {
        let reusable = self
            .kept
            .iter_mut()
            .position(|k| k.bytes >= total && k.handle.try_reclaim(total));
        match reusable {
            Some(i) => {
                let kept = self.kept.swap_remove(i);
                self.memory.release_kept_frame_bytes(kept.bytes);
                debug_assert!(kept.handle.is_empty() && kept.handle.capacity() >= total);
                (kept.handle, kept.bytes)
            }
            None => (BytesMut::with_capacity(total), total),
        }
    }

    /// Keeps `handle` (an allocation of `bytes`, its frame split off) for a later big frame,
    /// if every bound allows; otherwise drops it, and the allocation is freed with the
    /// frame.
    pub(crate) fn give(&mut self, mut handle: BytesMut, bytes: usize) {
        if bytes > limits::FRAME_BUFFER_KEPT_BYTES_MAX {
            return;
        }
        if self.kept.len() == limits::FRAME_BUFFERS_KEPT_PER_CONNECTION {
            // Prefer the newest: the oldest is the likeliest to be reusable, but a full
            // list means the client pipelines more big frames than we keep anyway.
            return;
        }
        if !self.memory.keep_frame_bytes(bytes) {
            return;
        }
        if self.kept.capacity() == 0 {
            self.kept
                .reserve_exact(limits::FRAME_BUFFERS_KEPT_PER_CONNECTION);
        }
        handle.clear();
        self.kept.push(Kept { handle, bytes });
    }

    /// Bytes kept by this connection (tests).
    #[cfg(test)]
    fn kept_bytes(&self) -> usize {
        self.kept.iter().map(|k| k.bytes).sum()
    }
}

impl Drop for FrameBuffers<'_> {
    fn drop(&mut self) {
        let bytes = self.kept.iter().map(|k| k.bytes).sum();
        self.memory.release_kept_frame_bytes(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BIG: usize = 256 * 1024;

    /// Reads a frame of `total` bytes into a buffer from `buffers` and splits it off, as the
    /// connection does; returns the frame and gives the buffer back.
    fn read_frame(buffers: &mut FrameBuffers<'_>, total: usize) -> (bytes::Bytes, *const u8) {
        let (mut buf, bytes) = buffers.take(total);
        let start = buf.as_ptr();
        buf.resize(total, 7);
        let frame = buf.split_to(total).freeze();
        buffers.give(buf, bytes);
        (frame, start)
    }

    #[test]
    fn a_buffer_is_reused_once_its_frame_is_gone() {
        let memory = RequestMemory::new(64 << 20);
        let mut buffers = FrameBuffers::new(&memory);
        let (first, at) = read_frame(&mut buffers, BIG);
        drop(first);
        let (second, again) = read_frame(&mut buffers, BIG - 10);
        assert_eq!(at, again, "the kept allocation is reused");
        assert_eq!(second.len(), BIG - 10);
        assert_eq!(memory.kept_frame_bytes(), BIG);
    }

    #[test]
    fn a_buffer_still_referenced_is_not_reused() {
        let memory = RequestMemory::new(64 << 20);
        let mut buffers = FrameBuffers::new(&memory);
        let (first, at) = read_frame(&mut buffers, BIG);
        let (second, other) = read_frame(&mut buffers, BIG);
        assert_ne!(at, other, "the first frame still uses its buffer");
        assert!(first.iter().all(|b| *b == 7) && second.len() == BIG);
        assert_eq!(buffers.kept_bytes(), 2 * BIG);
        drop(buffers);
        assert_eq!(
            memory.kept_frame_bytes(),
            0,
            "a closed connection gives its count back"
        );
    }

    #[test]
    fn bounds_are_kept() {
        let memory = RequestMemory::new(64 << 20);
        let mut buffers = FrameBuffers::new(&memory);
        let (_huge, _) = read_frame(&mut buffers, limits::FRAME_BUFFER_KEPT_BYTES_MAX + 1);
        assert_eq!(buffers.kept_bytes(), 0, "too big to keep");
        let frames: Vec<_> = (0..limits::FRAME_BUFFERS_KEPT_PER_CONNECTION + 2)
            .map(|_| read_frame(&mut buffers, BIG).0)
            .collect();
        assert_eq!(
            buffers.kept_bytes(),
            limits::FRAME_BUFFERS_KEPT_PER_CONNECTION * BIG
        );
        drop(frames);
        // Other connections together may not pass the broker-wide total.
        let size = limits::FRAME_BUFFER_KEPT_BYTES_MAX;
        let mut others: Vec<FrameBuffers<'_>> = Vec::new();
        for _ in 0..limits::FRAME_BUFFERS_KEPT_BYTES_TOTAL_MAX / size + 2 {
            let mut b = FrameBuffers::new(&memory);
            drop(read_frame(&mut b, size));
            others.push(b);
        }
        assert!(memory.kept_frame_bytes() <= limits::FRAME_BUFFERS_KEPT_BYTES_TOTAL_MAX);
        drop(others);
        drop(buffers);
        assert_eq!(memory.kept_frame_bytes(), 0);
    }
}
