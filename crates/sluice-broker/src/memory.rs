//! The broker-wide request-memory budget (`queued.max.request.bytes`): one pool that every
//! large buffer of the network path is charged to, so the broker's memory stays bounded
//! however many clients send or fetch at once.
//!
//! What is charged, and when:
//! - request bytes as they arrive, beyond each connection's first
//!   [`limits::READ_CHUNK_BYTES`] (that part is bounded by `max.connections` instead). A bare
//!   size prefix therefore holds nothing: the budget is taken by bytes, not by promises.
//! - a whole frame, from the moment it is split off the read buffer until its response has
//!   been written;
//! - a fetch response, from before its records are read until it has been written.
//!
//! Guarantees: charged bytes never exceed the budget, with one exception that buys progress:
//! the *overdraft*. When the budget is exhausted by partly received frames, each waiting for
//! more budget to finish, none could finish. So one connection at a time may finish its
//! frame without budget; it holds the overdraft until that frame's response is written. The
//! memory bound is therefore the budget plus one `socket.request.max.bytes` frame plus
//! `max.connections` × [`limits::READ_CHUNK_BYTES`].
//!
//! Budget permits are counted in [`limits::REQUEST_MEMORY_UNIT_BYTES`] units.
//!
//! Besides the budget, connections keep the allocations of their big frames for reuse
//! (`frame_buffers`); those are not charged but counted here, and capped broker-wide at
//! [`limits::FRAME_BUFFERS_KEPT_BYTES_TOTAL_MAX`], which adds that much to the bound above.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::limits;

/// Budget units needed for `bytes` (rounded up), saturating at what a semaphore can count.
pub(crate) fn units(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(limits::REQUEST_MEMORY_UNIT_BYTES)).unwrap_or(u32::MAX)
}

#[derive(Debug)]
pub struct RequestMemory {
    budget: Arc<Semaphore>,
    overdraft: Arc<Semaphore>,
    total_units: u32,
    /// Bytes of big-frame buffers all connections keep for reuse (not charged).
    kept_frame_bytes: AtomicUsize,
}

impl RequestMemory {
    pub fn new(bytes: usize) -> Self {
        let total_units = units(bytes).min(Semaphore::MAX_PERMITS as u32);
        Self {
            budget: Arc::new(Semaphore::new(total_units as usize)),
            overdraft: Arc::new(Semaphore::new(1)),
            total_units,
            kept_frame_bytes: AtomicUsize::new(0),
        }
    }

    /// Counts `bytes` more of kept frame buffers if the broker-wide cap allows it.
    pub(crate) fn keep_frame_bytes(&self, bytes: usize) -> bool {
        self.kept_frame_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |kept| {
                kept.checked_add(bytes)
                    .filter(|n| *n <= limits::FRAME_BUFFERS_KEPT_BYTES_TOTAL_MAX)
            })
            .is_ok()
    }

    /// Uncounts kept frame buffers taken back into use or freed.
    pub(crate) fn release_kept_frame_bytes(&self, bytes: usize) {
        let before = self.kept_frame_bytes.fetch_sub(bytes, Ordering::AcqRel);
        assert!(
            before >= bytes,
            "more kept frame bytes released than counted"
        );
    }

    /// Bytes of frame buffers kept for reuse across all connections.
    pub fn kept_frame_bytes(&self) -> usize {
        self.kept_frame_bytes.load(Ordering::Acquire)
    }

    /// The whole budget, in units.
    pub(crate) fn total_units(&self) -> u32 {
        self.total_units
    }

    /// Units not charged right now (for logs and tests).
    pub fn available_units(&self) -> usize {
        self.budget.available_permits()
    }

    /// A reservation of nothing, to merge others into.
    pub(crate) fn empty(&self) -> Reservation {
        Reservation(None)
    }

    /// `n` units if they are free right now.
    pub(crate) fn try_reserve(&self, n: u32) -> Option<Reservation> {
        if n == 0 {
            return Some(Reservation(None));
        }
        self.budget
            .clone()
            .try_acquire_many_owned(n.min(self.total_units))
            .ok()
            .map(|p| Reservation(Some(p)))
    }

    /// Waits for `n` units (at most the whole budget, so the wait can always end). Waiters are
    /// served in arrival order.
    pub(crate) async fn reserve(&self, n: u32) -> Reservation {
        if n == 0 {
            return Reservation(None);
        }
        match self
            .budget
            .clone()
            .acquire_many_owned(n.min(self.total_units))
            .await
        {
            Ok(p) => Reservation(Some(p)),
            // The semaphore is never closed; if it were, charging nothing is the safe answer
            // for a broker that is going away anyway.
            Err(_) => Reservation(None),
        }
    }

    /// Waits for the overdraft (see the module comment).
    pub(crate) async fn overdraft(&self) -> Overdraft {
        match self.overdraft.clone().acquire_owned().await {
            Ok(p) => Overdraft { _permit: Some(p) },
            Err(_) => Overdraft { _permit: None },
        }
    }
}

/// Budget units held; returned to the budget when dropped.
#[derive(Debug)]
pub(crate) struct Reservation(Option<OwnedSemaphorePermit>);

impl Reservation {
    pub(crate) fn units(&self) -> u32 {
        self.0.as_ref().map_or(0, |p| p.num_permits() as u32)
    }

    /// Adds `other`'s units to this reservation.
    pub(crate) fn merge(&mut self, other: Reservation) {
        match (&mut self.0, other.0) {
            (_, None) => {}
            (None, Some(p)) => self.0 = Some(p),
            (Some(mine), Some(p)) => mine.merge(p),
        }
    }

    /// Moves up to `n` units out into a reservation of their own.
    pub(crate) fn take(&mut self, n: u32) -> Reservation {
        let n = n.min(self.units());
        if n == self.units() {
            return Reservation(self.0.take());
        }
        Reservation(self.0.as_mut().and_then(|p| p.split(n as usize)))
    }

    /// Returns every unit above `n` to the budget.
    pub(crate) fn shrink_to(&mut self, n: u32) {
        let surplus = self.units().saturating_sub(n);
        drop(self.take(surplus));
        assert!(self.units() <= n);
    }
}

/// The one-at-a-time permission to finish a frame without budget.
#[derive(Debug)]
pub(crate) struct Overdraft {
    _permit: Option<OwnedSemaphorePermit>,
}

/// Empties a vector a connection keeps for reuse, keeping its allocation unless it grew past
/// `capacity_max` entries (then it is given back: see `limits::CALL_ENTRIES_KEPT_MAX`).
pub(crate) fn clear_kept<T>(v: &mut Vec<T>, capacity_max: usize) {
    v.clear();
    if v.capacity() > capacity_max {
        *v = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: reservations split, merge and shrink without losing or inventing units, and the
    // budget gets every unit back when they are dropped.
    #[tokio::test]
    async fn reservations_add_up() {
        let m = RequestMemory::new(64 * limits::REQUEST_MEMORY_UNIT_BYTES);
        assert_eq!(m.total_units(), 64);
        let mut a = m.try_reserve(40).expect("free");
        assert!(m.try_reserve(30).is_none(), "over the budget");
        let b = a.take(15);
        assert_eq!((a.units(), b.units()), (25, 15));
        a.merge(b);
        a.merge(m.reserve(10).await);
        assert_eq!(a.units(), 50);
        a.shrink_to(5);
        assert_eq!(a.units(), 5);
        assert_eq!(m.available_units(), 59);
        let all = a.take(99);
        assert_eq!((all.units(), a.units()), (5, 0));
        drop(all);
        assert_eq!(m.available_units(), 64);
        // A request larger than the whole budget is capped so it can be granted.
        assert_eq!(m.reserve(1000).await.units(), 64);
    }

    // Goal: one overdraft at a time.
    #[tokio::test]
    async fn one_overdraft_at_a_time() {
        let m = RequestMemory::new(1024);
        let first = m.overdraft().await;
        let second = tokio::time::timeout(std::time::Duration::from_millis(50), m.overdraft());
        assert!(second.await.is_err());
        drop(first);
        let _again = m.overdraft().await;
    }
}
