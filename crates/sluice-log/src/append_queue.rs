//! The bounded queue from the async appenders to the committer thread.
//!
//! Why not tokio's `mpsc`: it keeps its messages in a linked list of 32-slot blocks and
//! allocates a block whenever a freed one could not be recycled in time, which a produce
//! request of 128 partitions (128 messages) did about once per request. Here the messages
//! sit in a standard `sync_channel`, a ring allocated once at its full capacity
//! (`append_queue_len`), so queueing allocates nothing.
//!
//! Senders never block a runtime worker: [`AppendSender::send`] tries, and while the ring
//! is full it waits on a [`Notify`] that the committer raises after it has taken messages
//! (only when someone waits). The committer blocks on the ring itself, on its own thread.
//!
//! Guarantees: messages are received in the order they were queued; a sender that sees the
//! queue closed ([`AppendReceiver::close`]) or its receiver gone gets its message back;
//! a message that lands in the ring anyway (a send racing the close) is received by the
//! final drain or dropped with the receiver, and an append's completion then answers
//! `ShuttingDown`: nobody waits forever and nothing unwritten is acknowledged.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;

use tokio::sync::Notify;

/// What senders and the receiver share besides the ring.
#[derive(Debug, Default)]
struct Shared {
    /// Raised by the receiver after taking messages while senders wait for room.
    room: Notify,
    /// Senders waiting for room.
    waiting: AtomicUsize,
    /// Set by [`AppendReceiver::close`]: sends fail from then on.
    closed: AtomicBool,
}

/// The queue was closed (the committer stopped); the message comes back.
#[derive(Debug)]
pub(crate) struct Closed<T>(pub(crate) T);

/// A queue of at most `capacity` messages.
pub(crate) fn queue<T>(capacity: usize) -> (AppendSender<T>, AppendReceiver<T>) {
    let (tx, rx) = mpsc::sync_channel(capacity.max(1));
    let shared = Arc::new(Shared::default());
    (
        AppendSender {
            tx,
            shared: Arc::clone(&shared),
        },
        AppendReceiver {
            rx: Some(rx),
            shared,
        },
    )
}

#[derive(Debug)]
pub(crate) struct AppendSender<T> {
    tx: SyncSender<T>,
    shared: Arc<Shared>,
}

impl<T> AppendSender<T> {
    /// Queues `message`, waiting (asynchronously) while the queue is full.
    pub(crate) async fn send(&self, mut message: T) -> Result<(), Closed<T>> {
        loop {
            message = match self.try_send(message) {
                Ok(()) => return Ok(()),
                Err(TrySendError::Disconnected(m)) => return Err(Closed(m)),
                Err(TrySendError::Full(m)) => m,
            };
            let room = self.shared.room.notified();
            tokio::pin!(room);
            // Registered before the second try: room made after it wakes this waiter.
            room.as_mut().enable();
            self.shared.waiting.fetch_add(1, Ordering::SeqCst);
            let retried = self.try_send(message);
            message = match retried {
                Err(TrySendError::Full(m)) => {
                    room.await;
                    self.shared.waiting.fetch_sub(1, Ordering::SeqCst);
                    m
                }
                Ok(()) => {
                    self.shared.waiting.fetch_sub(1, Ordering::SeqCst);
                    return Ok(());
                }
                Err(TrySendError::Disconnected(m)) => {
                    self.shared.waiting.fetch_sub(1, Ordering::SeqCst);
                    return Err(Closed(m));
                }
            };
        }
    }

    /// Queues `message` if there is room right now.
    pub(crate) fn try_send(&self, message: T) -> Result<(), TrySendError<T>> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(TrySendError::Disconnected(message));
        }
        self.tx.try_send(message)
    }
}

#[derive(Debug)]
pub(crate) struct AppendReceiver<T> {
    /// `None` once closed and dropped.
    rx: Option<Receiver<T>>,
    shared: Arc<Shared>,
}

impl<T> AppendReceiver<T> {
    /// Waits for the next message; `None` when every sender is gone or after `close`.
    pub(crate) fn blocking_recv(&mut self) -> Option<T> {
        let message = self.rx.as_ref()?.recv().ok();
        self.made_room();
        message
    }

    /// The next message if one is queued.
    pub(crate) fn try_recv(&mut self) -> Option<T> {
        match self.rx.as_ref()?.try_recv() {
            Ok(message) => {
                self.made_room();
                Some(message)
            }
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => None,
        }
    }

    /// Wakes the senders waiting for room, if any (after messages were taken).
    pub(crate) fn made_room(&self) {
        if self.shared.waiting.load(Ordering::SeqCst) > 0 {
            self.shared.room.notify_waiters();
        }
    }

    /// Refuses further sends. Messages already queued can still be received.
    pub(crate) fn close(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.made_room();
    }
}

impl<T> Drop for AppendReceiver<T> {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        // Queued messages go with the ring; waiting senders then find it disconnected.
        drop(self.rx.take());
        self.shared.room.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_makes_senders_wait_until_room_is_made() {
        let (tx, mut rx) = queue::<u32>(2);
        tx.send(1).await.unwrap();
        tx.send(2).await.unwrap();
        let tx = Arc::new(tx);
        let waiter = tokio::spawn({
            let tx = Arc::clone(&tx);
            async move { tx.send(3).await.map_err(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !waiter.is_finished(),
            "the queue is full: the third send waits"
        );
        let taken = tokio::task::spawn_blocking(move || {
            let first = rx.blocking_recv();
            (first, rx)
        })
        .await
        .unwrap();
        let (first, mut rx) = taken;
        assert_eq!(first, Some(1));
        waiter.await.unwrap().expect("room was made");
        assert_eq!(rx.try_recv(), Some(2));
        assert_eq!(rx.try_recv(), Some(3), "order is kept");
        assert_eq!(rx.try_recv(), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn closing_refuses_sends_and_wakes_waiters() {
        let (tx, mut rx) = queue::<u32>(1);
        tx.send(1).await.unwrap();
        let tx = Arc::new(tx);
        let waiter = tokio::spawn({
            let tx = Arc::clone(&tx);
            async move { tx.send(2).await.map_err(|Closed(m)| m) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        rx.close();
        assert_eq!(
            rx.try_recv(),
            Some(1),
            "queued before the close: still received"
        );
        drop(rx);
        assert_eq!(waiter.await.unwrap(), Err(2), "the waiting send fails");
        assert!(matches!(tx.send(3).await, Err(Closed(3))));
    }
}
