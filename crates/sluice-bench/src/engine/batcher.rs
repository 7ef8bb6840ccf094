//! The application-level batcher (teranode's "outer batcher") that can sit in front of a
//! producer client: messages are buffered in the application and handed to the client together,
//! so the client's own `linger.ms` starts only after the application's wait ("stacked linger").
//!
//! Two flush rules, as in teranode's finding: `deadline` flushes when the oldest buffered
//! message has waited the linger; `debounce` flushes when no message arrived for the linger
//! (the timer re-arms on every message), so a feed faster than the linger holds everything until
//! it pauses. Both also flush at `app_batch_max` messages.
//!
//! Guarantees: a buffered message keeps its header, so its intended send time is the one the
//! schedule gave it and `e2e_intended` includes the application wait; the buffer never holds
//! more than `app_batch_max` messages; this is pure logic driven by the caller's clock.

use crate::keys::Key;
use crate::payload::Header;
use serde::Serialize;

use crate::shaping::{AppBatchMode, Shaping};

/// One message waiting in the application batcher.
#[derive(Debug)]
pub struct Pending {
    pub payload: Vec<u8>,
    pub header: Header,
    pub key: Option<Key>,
    pub partition: Option<i32>,
}

/// Flush counts, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatcherStats {
    pub flushes: u64,
    /// Flushes triggered by the size limit (the rest by the timer or the end of load).
    pub size_flushes: u64,
    pub messages: u64,
}

impl BatcherStats {
    pub fn merge(&mut self, o: &BatcherStats) {
        self.flushes += o.flushes;
        self.size_flushes += o.size_flushes;
        self.messages += o.messages;
    }
}

#[derive(Debug)]
pub struct AppBatcher {
    mode: AppBatchMode,
    linger_ns: u64,
    max: usize,
    buf: Vec<Pending>,
    /// Clock time the oldest buffered message entered, and the newest.
    first_ns: u64,
    last_ns: u64,
    pub stats: BatcherStats,
}

impl AppBatcher {
    /// None when the scenario has no application batcher.
    pub fn new(s: &Shaping) -> Option<AppBatcher> {
        s.app_batcher_on().then(|| AppBatcher {
            mode: s.app_batch_mode,
            linger_ns: s.app_batch_linger_ms as u64 * 1_000_000,
            max: s.app_batch_max.max(1) as usize,
            buf: Vec::new(),
            first_ns: 0,
            last_ns: 0,
            stats: BatcherStats::default(),
        })
    }

    /// Buffers a message that arrived at `now_ns`; true when the size trigger says flush now.
    pub fn push(&mut self, p: Pending, now_ns: u64) -> bool {
        if self.buf.is_empty() {
            self.first_ns = now_ns;
        }
        self.last_ns = now_ns;
        self.buf.push(p);
        self.buf.len() >= self.max
    }

    /// When the timer fires (clock ns); None while the buffer is empty.
    pub fn deadline_ns(&self) -> Option<u64> {
        if self.buf.is_empty() {
            return None;
        }
        Some(match self.mode {
            AppBatchMode::Deadline => self.first_ns + self.linger_ns,
            AppBatchMode::Debounce => self.last_ns + self.linger_ns,
        })
    }

    pub fn due(&self, now_ns: u64) -> bool {
        self.deadline_ns().is_some_and(|d| now_ns >= d)
    }

    /// Empties the buffer for sending; `by_size` records what triggered the flush.
    pub fn take(&mut self, by_size: bool) -> Vec<Pending> {
        if !self.buf.is_empty() {
            self.stats.flushes += 1;
            self.stats.size_flushes += u64::from(by_size);
            self.stats.messages += self.buf.len() as u64;
        }
        std::mem::take(&mut self.buf)
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

/// The report's section for the application batcher: its settings and its flushes over all
/// producers.
#[derive(Debug, Serialize)]
pub struct AppBatchReport {
    pub mode: AppBatchMode,
    pub linger_ms: u32,
    pub max_msgs: u32,
    pub flushes: u64,
    /// Flushes by the size trigger (the others by the timer or the end of load).
    pub size_flushes: u64,
    pub msgs_per_flush_avg: Option<f64>,
}

impl AppBatchReport {
    pub fn new(s: &Shaping, b: &BatcherStats) -> AppBatchReport {
        AppBatchReport {
            mode: s.app_batch_mode,
            linger_ms: s.app_batch_linger_ms,
            max_msgs: s.app_batch_max,
            flushes: b.flushes,
            size_flushes: b.size_flushes,
            msgs_per_flush_avg: (b.flushes > 0).then(|| b.messages as f64 / b.flushes as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> Pending {
        Pending {
            payload: vec![0; 40],
            header: Header {
                run_tag: 1,
                producer: 0,
                flags: 0,
                seq: 0,
                intended_ns: 0,
                sent_ns: 0,
            },
            key: None,
            partition: None,
        }
    }

    fn batcher(mode: AppBatchMode, linger_ms: u32, max: u32) -> AppBatcher {
        let s = Shaping {
            app_batch_linger_ms: linger_ms,
            app_batch_mode: mode,
            app_batch_max: max,
            ..Shaping::default()
        };
        AppBatcher::new(&s).expect("on")
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn deadline_flushes_on_the_oldest_message() {
        let mut b = batcher(AppBatchMode::Deadline, 1000, 10_000);
        assert_eq!(b.deadline_ns(), None);
        // A message every 25 ms: the deadline stays 1 s after the first.
        for i in 0..10 {
            assert!(!b.push(pending(), i * 25 * MS));
        }
        assert_eq!(b.deadline_ns(), Some(1000 * MS));
        assert!(!b.due(999 * MS) && b.due(1000 * MS));
        assert_eq!(b.take(false).len(), 10);
        assert!(b.is_empty() && b.deadline_ns().is_none());
        assert_eq!(
            b.stats,
            BatcherStats {
                flushes: 1,
                size_flushes: 0,
                messages: 10
            }
        );
    }

    #[test]
    fn debounce_rearms_on_every_message_and_size_flushes() {
        let mut b = batcher(AppBatchMode::Debounce, 1000, 5);
        for i in 0..4 {
            assert!(!b.push(pending(), i * 25 * MS));
        }
        // Re-armed by the last message, at 75 ms: fires at 1075 ms, not 1000 ms.
        assert_eq!(b.deadline_ns(), Some(1075 * MS));
        assert!(!b.due(1000 * MS));
        assert!(b.push(pending(), 100 * MS), "size trigger at 5");
        assert_eq!(b.take(true).len(), 5);
        assert_eq!(b.stats.size_flushes, 1);
        // Empty take counts nothing.
        assert!(b.take(false).is_empty());
        assert_eq!(b.stats.flushes, 1);
        let off = Shaping::default();
        assert!(AppBatcher::new(&off).is_none());
    }
}
