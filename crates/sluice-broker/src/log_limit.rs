//! Rate-limited log lines for events a client can cause at will: malformed frames and
//! requests, refused connections, failed handshakes and logins, a full producer table.
//!
//! Guarantee: each kind of event writes at most one line per [`limits::LOG_LINE_INTERVAL_MS`]
//! (a process-wide [`LogLimit`] per kind), and that line carries `suppressed`, the number of
//! lines of its kind left out since the previous one. So a flood of bad input costs the
//! broker a counter increment per event, never disk, journald or CPU per line, and every
//! kind still shows up in the log within one interval of its first occurrence (the first
//! one at once). Lines for one-off events (startup, shutdown, storage errors) are not
//! limited: no client can repeat them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crate::limits;

/// One kind of rate-limited line: when the next line may be written, and how many were
/// left out since the last one. Lock-free; shared by every connection.
#[derive(Debug)]
pub(crate) struct LogLimit {
    /// Milliseconds since [`epoch`] from which the next line may be written.
    next_ms: AtomicU64,
    /// Lines left out since the last one written.
    suppressed: AtomicU64,
}

impl LogLimit {
    pub(crate) const fn new() -> Self {
        Self {
            next_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written now: `Some(lines left out since the last one)`, or
    /// `None`, counted as left out.
    pub(crate) fn check(&self) -> Option<u64> {
        self.check_at(now_ms(), limits::LOG_LINE_INTERVAL_MS)
    }

    fn check_at(&self, now_ms: u64, interval_ms: u64) -> Option<u64> {
        let next = self.next_ms.load(Ordering::Relaxed);
        // Only the caller that moves `next_ms` writes the line; racing callers count.
        if now_ms >= next
            && self
                .next_ms
                .compare_exchange(
                    next,
                    now_ms + interval_ms,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            return Some(self.suppressed.swap(0, Ordering::Relaxed));
        }
        self.suppressed.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// Milliseconds on the monotonic clock since the first call (wall-clock jumps must not
/// silence a kind for hours or let one through on every event).
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// `tracing::warn!` through a [`LogLimit`]: the line gets a `suppressed` field.
macro_rules! warn_limited {
    ($limit:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limit.check() {
            tracing::warn!(suppressed, $($arg)+);
        }
    };
}

/// `tracing::info!` through a [`LogLimit`]: the line gets a `suppressed` field.
macro_rules! info_limited {
    ($limit:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limit.check() {
            tracing::info!(suppressed, $($arg)+);
        }
    };
}

pub(crate) use {info_limited, warn_limited};

/// The kinds of client-caused lines (one limit each).
pub(crate) static BAD_FRAME: LogLimit = LogLimit::new();
pub(crate) static FRAME_TIMEOUT: LogLimit = LogLimit::new();
pub(crate) static UNUSABLE_REQUEST: LogLimit = LogLimit::new();
pub(crate) static MALFORMED_REQUEST: LogLimit = LogLimit::new();
pub(crate) static UNAUTHENTICATED_REQUEST: LogLimit = LogLimit::new();
pub(crate) static SASL_FAILED: LogLimit = LogLimit::new();
pub(crate) static TLS_HANDSHAKE_FAILED: LogLimit = LogLimit::new();
pub(crate) static CONNECTION_LIMIT: LogLimit = LogLimit::new();
pub(crate) static CONNECTION_CLOSED_IDLE: LogLimit = LogLimit::new();
pub(crate) static PRODUCER_STATE_FULL: LogLimit = LogLimit::new();
pub(crate) static PRODUCER_IDS_THROTTLED: LogLimit = LogLimit::new();

/// Logs (rate-limited) a new idempotent producer refused because a partition's producer
/// table is full of recently active producers (`LogError::ProducerStateFull`, answered
/// NOT_ENOUGH_REPLICAS): until one of them has been idle for the eviction window, no new
/// producer writes there, which an operator must be able to see. `partition` when known.
pub(crate) fn producer_state_full(error: &sluice_log::LogError, partition: Option<(&str, i32)>) {
    if !matches!(error, sluice_log::LogError::ProducerStateFull { .. }) {
        return;
    }
    let (topic, partition) = partition.unwrap_or(("", -1));
    warn_limited!(
        PRODUCER_STATE_FULL,
        topic = %topic,
        partition,
        %error,
        "new idempotent producer refused (NOT_ENOUGH_REPLICAS): the partition's producer table is full of producers active within sluice.producer.eviction.idle.ms"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_left_out() {
        // Goal: the first event is written at once; events within the interval are counted,
        // not written; the next line after the interval carries their count, then it resets.
        let limit = LogLimit::new();
        assert_eq!(limit.check_at(5, 1000), Some(0));
        for t in 6..1005 {
            assert_eq!(limit.check_at(t, 1000), None, "at {t}");
        }
        assert_eq!(limit.check_at(1005, 1000), Some(999));
        assert_eq!(limit.check_at(1006, 1000), None);
        assert_eq!(limit.check_at(5000, 1000), Some(1));
    }

    #[test]
    fn racing_threads_write_one_line_per_interval() {
        // Goal: with many threads hitting one limit at the same instant, exactly one line is
        // written and every other event is counted.
        let limit = std::sync::Arc::new(LogLimit::new());
        let written: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let limit = &limit;
                    s.spawn(move || {
                        (0..1000)
                            .filter(|_| limit.check_at(7, 1000).is_some())
                            .count()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap() as u64).sum()
        });
        assert_eq!(written, 1);
        assert_eq!(limit.check_at(2000, 1000), Some(7999));
    }
}
