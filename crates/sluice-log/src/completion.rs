//! How the committer answers appends: one waiter per append ([`AppendWaiter`], a oneshot
//! channel), or one [`AppendGroup`] for all the appends of a produce request.
//!
//! A group exists so that a produce request of N partitions costs one wake-up and no
//! allocation: the committer writes each append's outcome into the group's slot for it
//! and counts down; the append that brings the count to zero wakes the one task waiting on
//! the group. The owner keeps the group and reuses it for its next request (`reset`), so
//! the slots' vector and the shared state are allocated once per group, not per request.
//!
//! Guarantees: every queued append is answered exactly once, with its outcome, or with
//! `ShuttingDown` when the committer drops it unanswered (it stopped); [`AppendGroup::wait`]
//! returns only when every append queued on the group since the last reset is answered; a
//! slot's outcome is written before the count that covers it goes down, and the committer
//! touches the group no more after that, so a group whose count is zero can be reset.
//!
//! [`AppendWaiter`]: crate::AppendWaiter

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};

use crate::error::LogError;
use crate::manager::AppendInfo;

type Outcome = Result<AppendInfo, LogError>;

#[derive(Debug, Default)]
struct GroupState {
    /// One per append of the request, by the slot the appender gave it.
    slots: Mutex<Vec<Option<Outcome>>>,
    /// Appends queued and not answered yet.
    outstanding: AtomicUsize,
    /// Raised by the answer that brings `outstanding` to zero.
    done: Notify,
}

/// The completions of a produce request's appends; see the module comment.
#[derive(Debug, Default)]
pub struct AppendGroup {
    state: Arc<GroupState>,
}

impl AppendGroup {
    pub fn new() -> Self {
        Self::default()
    }

    /// Readies the group for a request of `slots` appends (slots `0..slots`). The group
    /// must have no append outstanding (its last `wait` returned, or it was never used).
    pub fn reset(&mut self, slots: usize) {
        assert_eq!(
            self.state.outstanding.load(Ordering::Acquire),
            0,
            "an append group is reset while appends are outstanding"
        );
        let mut s = self.state.slots.lock();
        s.clear();
        s.resize_with(slots, || None);
    }

    /// Answers for slot `slot` once; called by `LogManager::append_in_group` before the
    /// append is queued.
    pub(crate) fn completion(&self, slot: usize) -> Completion {
        debug_assert!(
            slot < self.state.slots.lock().len(),
            "slot beyond the reset size"
        );
        self.state.outstanding.fetch_add(1, Ordering::AcqRel);
        Completion(Target::Slot(Arc::clone(&self.state), slot))
    }

    /// Waits until every append queued on the group is answered.
    pub async fn wait(&self) {
        loop {
            let done = self.state.done.notified();
            if self.state.outstanding.load(Ordering::Acquire) == 0 {
                return;
            }
            done.await;
        }
    }

    /// Appends queued and not yet answered.
    pub fn outstanding(&self) -> usize {
        self.state.outstanding.load(Ordering::Acquire)
    }

    /// Takes slot `slot`'s outcome; `None` when no append was queued for it (or it is not
    /// answered yet: call after `wait`).
    pub fn take(&self, slot: usize) -> Option<Outcome> {
        self.state.slots.lock().get_mut(slot).and_then(Option::take)
    }
}

/// Ties appends queued one after another so that the later ones take effect only if the
/// earlier ones did (docs/transactions.md §6.1): the coordinator queues its durable record
/// of AddPartitionsToTxn and, right behind it, the partitions' verifications, so both share
/// one commit round instead of waiting for two in a row. The committer marks the gate
/// failed when a gating append fails, by itself or with its round, and refuses a gated
/// append unless every gating append before it was applied and has not failed. Since the
/// committer finishes each round (answers included) before it starts the next, a gated
/// append in a later round sees the final outcome, and one in the same round shares the
/// round's fate (all of it is written and synced, or all of it undone). So a partition is
/// never verified for a transaction whose record was refused (for example for space in one
/// round, with the verification accepted in the next). One per call, never reused.
#[derive(Debug, Clone, Default)]
pub struct AppendGate(Arc<AtomicU8>);

const GATE_OPEN: u8 = 0;
const GATE_PASSED: u8 = 1;
const GATE_FAILED: u8 = 2;

impl AppendGate {
    pub fn new() -> Self {
        Self::default()
    }

    /// A gating append was applied (its round may still fail: then `fail` follows).
    pub(crate) fn pass(&self) {
        // FAILED is sticky: an earlier gating append that failed keeps the gate shut.
        let _ =
            self.0
                .compare_exchange(GATE_OPEN, GATE_PASSED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// A gating append failed, by itself or with its round.
    pub(crate) fn fail(&self) {
        self.0.store(GATE_FAILED, Ordering::Release);
    }

    /// Whether a gated append may take effect.
    pub(crate) fn passed(&self) -> bool {
        self.0.load(Ordering::Acquire) == GATE_PASSED
    }
}

/// A request's part in an [`AppendGate`].
#[derive(Debug, Clone)]
pub(crate) enum Gating {
    /// The request's outcome opens (or shuts) the gate.
    Sets(AppendGate),
    /// The request takes effect only through an open gate.
    Requires(AppendGate),
}

#[derive(Debug)]
enum Target {
    Oneshot(oneshot::Sender<Outcome>),
    Slot(Arc<GroupState>, usize),
    Answered,
}

/// The committer's side of one append: answered once, by `send` or, unanswered, on drop.
#[derive(Debug)]
pub(crate) struct Completion(Target);

impl Completion {
    pub(crate) fn oneshot() -> (Self, oneshot::Receiver<Outcome>) {
        let (sender, receiver) = oneshot::channel();
        (Self(Target::Oneshot(sender)), receiver)
    }

    pub(crate) fn send(mut self, outcome: Outcome) {
        self.answer(outcome);
    }

    fn answer(&mut self, outcome: Outcome) {
        match std::mem::replace(&mut self.0, Target::Answered) {
            // A dropped receiver (acks=0) is fine.
            Target::Oneshot(sender) => drop(sender.send(outcome)),
            Target::Slot(state, slot) => {
                if let Some(s) = state.slots.lock().get_mut(slot) {
                    debug_assert!(s.is_none(), "an append slot answered twice");
                    *s = Some(outcome);
                }
                // The outcome is in place before the count that covers it goes down.
                if state.outstanding.fetch_sub(1, Ordering::AcqRel) == 1 {
                    state.done.notify_one();
                }
            }
            Target::Answered => debug_assert!(false, "an append answered twice"),
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        if !matches!(self.0, Target::Answered) {
            // The committer stopped before answering: say so rather than leave a waiter.
            self.answer(Err(LogError::ShuttingDown));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Offset;

    fn info(base: i64) -> AppendInfo {
        AppendInfo {
            base_offset: Offset(base),
            last_offset: Offset(base),
            log_append_time_ms: -1,
            log_start_offset: Offset(0),
            duplicate: false,
        }
    }

    // Goal: a group waits for every queued append, hands each outcome to its slot, and can
    // be reused for the next request.
    #[tokio::test]
    async fn group_waits_for_every_slot_and_is_reusable() {
        let mut group = AppendGroup::new();
        for round in 0..3i64 {
            group.reset(3);
            let a = group.completion(0);
            let c = group.completion(2);
            let answer = tokio::spawn(async move {
                tokio::task::yield_now().await;
                c.send(Ok(info(round * 10 + 2)));
                a.send(Err(LogError::Poisoned));
            });
            group.wait().await;
            answer.await.unwrap();
            assert_eq!(group.outstanding(), 0);
            assert!(matches!(group.take(0), Some(Err(LogError::Poisoned))));
            assert!(group.take(1).is_none(), "no append was queued for slot 1");
            assert_eq!(
                group.take(2).unwrap().unwrap().base_offset,
                Offset(round * 10 + 2)
            );
        }
    }

    // Goal: a completion dropped unanswered (the committer stopped) still releases the waiter.
    #[tokio::test]
    async fn dropped_completion_answers_shutting_down() {
        let mut group = AppendGroup::new();
        group.reset(1);
        drop(group.completion(0));
        group.wait().await;
        assert!(matches!(group.take(0), Some(Err(LogError::ShuttingDown))));
        let (completion, receiver) = Completion::oneshot();
        drop(completion);
        assert!(matches!(receiver.await, Ok(Err(LogError::ShuttingDown))));
    }

    // Goal: a gate opens only for a gating append that was applied, and a failure shuts
    // it for good (a later pass cannot reopen it).
    #[test]
    fn a_gate_passes_once_applied_and_a_failure_is_final() {
        let gate = AppendGate::new();
        assert!(!gate.passed(), "nothing applied yet");
        gate.pass();
        assert!(gate.passed());
        gate.fail();
        assert!(!gate.passed());
        gate.pass();
        assert!(!gate.passed(), "a failed gate stays shut");
    }

    // Goal: resetting a group with an append outstanding is a bug caught at once.
    #[test]
    #[should_panic(expected = "outstanding")]
    fn reset_with_outstanding_append_panics() {
        let mut group = AppendGroup::new();
        group.reset(1);
        let _pending = group.completion(0);
        group.reset(1);
    }
}
