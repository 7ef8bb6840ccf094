//! The clock seam: the one place the group and transaction coordinators get their time.
//!
//! Every timer of the two coordinators (classic session and rebalance timeouts, KIP-848
//! session and rebalance timeouts, offsets retention, `transaction.timeout.ms` aborts,
//! transactional-id expiry) compares a deadline in wall-clock milliseconds with
//! [`Clock::now_ms`], and every timer task waits with [`Clock::sleep_ms`]. Wall-clock
//! milliseconds because the deadlines sit beside persisted timestamps (commit and expiry
//! timestamps in `__consumer_offsets`, transaction start times in `__transaction_state`), as
//! in Kafka.
//!
//! Guarantees:
//! - [`Clock::system`] (what `sluice serve` runs) is exactly the system clock and tokio's
//!   timers: no behaviour of its own.
//! - [`Clock::manual`] (the in-process tests) stands still until [`Clock::advance_ms`]
//!   moves it; sleepers wake as soon as it reaches their deadline, so a test that advances
//!   past a session timeout sees the expiry within milliseconds of real time.
//!
//! Why a manual clock and not tokio's paused time: a paused runtime advances itself to the
//! next timer whenever it is idle, and the broker is idle whenever it waits for the
//! committer thread's fsync or for the test client's next request. Sessions would then
//! expire while a request is in flight; with a manual clock time moves only when the test
//! says so.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// Where the coordinators' time comes from. Cheap to clone (clones share one clock).
#[derive(Debug, Clone, Default)]
pub struct Clock {
    /// `None`: the system clock. `Some`: a manual clock's current time in milliseconds;
    /// sleepers watch it.
    manual: Option<Arc<watch::Sender<i64>>>,
}

impl Clock {
    /// The system's wall clock; sleeps are tokio's.
    pub fn system() -> Clock {
        Clock { manual: None }
    }

    /// A clock that reads `start_ms` until [`Clock::advance_ms`] moves it (tests).
    pub fn manual(start_ms: i64) -> Clock {
        let (tx, _) = watch::channel(start_ms);
        Clock {
            manual: Some(Arc::new(tx)),
        }
    }

    /// Wall-clock milliseconds since the Unix epoch.
    pub fn now_ms(&self) -> i64 {
        match &self.manual {
            Some(t) => *t.borrow(),
            None => system_now_ms(),
        }
    }

    /// Waits `ms` milliseconds of this clock's time.
    pub async fn sleep_ms(&self, ms: u64) {
        match &self.manual {
            None => tokio::time::sleep(Duration::from_millis(ms)).await,
            Some(t) => {
                let mut rx = t.subscribe();
                let deadline = rx
                    .borrow()
                    .saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
                // The sender lives as long as `self`, so this cannot end early with an error.
                let _ = rx.wait_for(|now| *now >= deadline).await;
            }
        }
    }

    /// Moves a manual clock forward by `ms` and wakes the sleepers it reaches.
    ///
    /// # Panics
    /// On the system clock: only tests move time.
    pub fn advance_ms(&self, ms: u64) {
        let t = self
            .manual
            .as_ref()
            .expect("only a manual clock can be advanced");
        let step = i64::try_from(ms).unwrap_or(i64::MAX);
        t.send_modify(|now| *now = now.saturating_add(step));
    }
}

fn system_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: a manual clock stands still, advances by exactly what it is told, and wakes a
    // sleeper only once its deadline is reached.
    #[tokio::test]
    async fn a_manual_clock_moves_only_when_advanced() {
        let clock = Clock::manual(1_000);
        assert_eq!(clock.now_ms(), 1_000);
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep_ms(500).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        clock.advance_ms(499);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!sleeper.is_finished(), "woke before its deadline");
        clock.advance_ms(1);
        tokio::time::timeout(Duration::from_secs(5), sleeper)
            .await
            .expect("woke at its deadline")
            .unwrap();
        assert_eq!(clock.now_ms(), 1_500);
    }
}
