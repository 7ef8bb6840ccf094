//! Rate limits for log lines that the same cause repeats at will: a consumer retrying a
//! fetch of damaged stored data gets CORRUPT_MESSAGE each time, and each of those reads
//! finds the damage again.
//!
//! Guarantee: a [`LogLimit`] lets at most one line through per interval, and that line
//! carries the number of lines left out since the previous one (`suppressed`), so nothing
//! is hidden: the first occurrence is logged at once, later ones are counted and reported
//! with the next line. Lock-free: one atomic load per suppressed event (plus an increment),
//! never a lock, an allocation or a write. Time is the monotonic clock, so a wall-clock
//! jump can neither silence a line for hours nor let every event through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// One rate-limited line (or kind of line): when the next may be written, and how many
/// were left out since the last one.
#[derive(Debug)]
pub struct LogLimit {
    interval_ms: u64,
    /// Milliseconds since [`now_ms`]'s epoch from which the next line may be written.
    next_ms: AtomicU64,
    /// Lines left out since the last one written.
    suppressed: AtomicU64,
}

impl LogLimit {
    /// A limit of one line per `interval_ms`.
    pub const fn new(interval_ms: u64) -> Self {
        Self {
            interval_ms,
            next_ms: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        }
    }

    /// Whether a line may be written now: `Some(lines left out since the last one)`, or
    /// `None`, and the event is counted as left out.
    pub fn check(&self) -> Option<u64> {
        self.check_at(now_ms())
    }

    /// [`Self::check`] at a given time (milliseconds on any monotonic clock).
    pub fn check_at(&self, now_ms: u64) -> Option<u64> {
        let next = self.next_ms.load(Ordering::Relaxed);
        // Only the caller that moves `next_ms` writes the line; racing callers count.
        if now_ms >= next
            && self
                .next_ms
                .compare_exchange(
                    next,
                    now_ms.saturating_add(self.interval_ms),
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

/// Milliseconds on the monotonic clock since the first call.
fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    u64::try_from(EPOCH.get_or_init(Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_count_left_out() {
        // Goal: the first event is written at once; events within the interval are
        // counted, not written; the next line carries their count, which then resets.
        let limit = LogLimit::new(1000);
        assert_eq!(limit.check_at(5), Some(0));
        for t in 6..1005 {
            assert_eq!(limit.check_at(t), None, "at {t}");
        }
        assert_eq!(limit.check_at(1005), Some(999));
        assert_eq!(limit.check_at(1006), None);
        assert_eq!(limit.check_at(5000), Some(1));
    }

    #[test]
    fn racing_threads_write_one_line_per_interval() {
        // Goal: many threads hitting one limit at the same instant write exactly one line;
        // every other event is counted.
        let limit = LogLimit::new(1000);
        let written: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..1000).filter(|_| limit.check_at(7).is_some()).count()))
                .collect();
            handles.into_iter().map(|h| h.join().expect("thread")).sum()
        });
        assert_eq!(written, 1);
        assert_eq!(limit.check_at(2000), Some(7999));
    }
}
