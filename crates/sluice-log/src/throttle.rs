//! An I/O rate limit for background work (the log cleaner, the journal cleaner): callers
//! charge the bytes they read or write and sleep until the budget has paid for them.
//!
//! Guarantees: no lock is held while sleeping; each charge waits for its own bytes after
//! all those charged before it (by any thread sharing the throttle), so N bytes take at
//! least N / limit; a stopping log ends the wait within [`SLEEP_MAX`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Longest single sleep, so shutdown is noticed promptly.
const SLEEP_MAX: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
pub(crate) struct Throttle {
    /// When the bytes charged so far are paid for.
    paid_until: Mutex<Option<Instant>>,
}

impl Throttle {
    /// Sleeps until `bytes`, after everything charged before them, are paid for at
    /// `bytes_per_second` (0 or `u64::MAX`: no limit), or until `stopping` is set.
    pub(crate) fn charge(&self, bytes: u64, bytes_per_second: u64, stopping: &AtomicBool) {
        if bytes_per_second == u64::MAX || bytes_per_second == 0 {
            return;
        }
        let cost = Duration::from_secs_f64(bytes as f64 / bytes_per_second as f64);
        let wake = {
            let mut paid = self.paid_until.lock();
            let now = Instant::now();
            let until = paid.filter(|t| *t > now).unwrap_or(now) + cost;
            *paid = Some(until);
            until
        };
        loop {
            let now = Instant::now();
            if wake <= now || stopping.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep((wake - now).min(SLEEP_MAX));
        }
    }
}
