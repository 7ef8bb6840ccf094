//! The transactional producer mode (`--transactional-id`, issue 12): one `TxnDriver` per
//! producer thread opens a transaction before the first message that needs one, ends it after
//! `txn_messages` messages or once it is `txn_interval_ms` old, and times the end.
//!
//! What it guarantees:
//! - The commit latency is the EndTxn round trip as the application sees it: the driver
//!   flushes the transaction's messages first (waiting for their delivery reports), then
//!   times `commit_transaction` alone, so produce time is not counted twice. The flush is
//!   timed apart (`txn_flush`).
//! - Whether a transaction aborts is drawn from the seed *before* it begins, so each of its
//!   records carries `FLAG_TXN_ABORTED` in its bench header: the audit never expects them, and
//!   a read_committed consumer that receives one counts it (`txn_aborted_delivered`).
//! - No call blocks longer than `limits::TXN_CALL_TIMEOUT`; a failure is counted and noted in
//!   the error table. A fatal one (fenced, a timeout) stops that producer's load (the run goes
//!   on with the others and reports it); an abortable one aborts the transaction and goes on.
//! - Memory per producer is constant: a few counters and two histograms, nothing per
//!   transaction.

use std::time::Instant;

use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;

use crate::limits;
use crate::payload::SplitMix64;

/// What the driver reports after each end of a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Committed,
    Aborted,
    /// The commit failed with an abortable error; the transaction was aborted instead (its
    /// records were not flagged, so the audit counts them as lost).
    CommitFailed,
}

/// Waits until every record the client holds is acknowledged and its delivery report
/// served (the flush before EndTxn), sending what `linger.ms` still holds back at once, as
/// `commit_transaction`'s own flush does.
///
/// Not `Producer::flush`: with a `ThreadedProducer`, whose own thread serves the delivery
/// reports, rdkafka's flush sleeps in 100 ms polls that the other thread answers, so every
/// transaction would wait about 100 ms for nothing. Polling `in_flight_count` alone is no
/// flush either: librdkafka sends a partition's last, unfilled batch only once `linger.ms`
/// has passed, so each transaction end could wait up to `linger.ms` before its last records
/// left (measured at 10k msg/s with 100-message transactions and `linger.ms=5`: flush p50
/// 4.9 ms polling, 1.4 ms flushing). librdkafka ignores `linger.ms` only while a
/// `rd_kafka_flush` call is in progress, so the wait is a loop of short flush calls
/// (`TXN_FLUSH_POLL` each): the broker threads they wake see the flush under way and send
/// at once.
fn wait_acknowledged<P: Producer<C>, C: rdkafka::producer::ProducerContext>(
    p: &P,
) -> Result<(), Fatal> {
    let deadline = Instant::now() + limits::TXN_CALL_TIMEOUT;
    let slice_ms = limits::TXN_FLUSH_POLL.as_millis().max(1) as i32;
    while p.in_flight_count() > 0 {
        if Instant::now() >= deadline {
            return Err(Fatal(format!(
                "txn flush before EndTxn: {} records unacknowledged after {:?}",
                p.in_flight_count(),
                limits::TXN_CALL_TIMEOUT
            )));
        }
        flush_for(p, slice_ms);
    }
    Ok(())
}

/// One `rd_kafka_flush` of at most `timeout_ms`: librdkafka sends lingering batches while it
/// runs. Its result is not needed (the caller checks `in_flight_count`), and the delivery
/// reports it may serve on this thread go to the same context callback as the producer
/// thread's, which librdkafka allows from any thread.
#[allow(unsafe_code)]
fn flush_for<P: Producer<C>, C: rdkafka::producer::ProducerContext>(p: &P, timeout_ms: i32) {
    // SAFETY: the handle comes from a live producer that `p` borrows, so it stays valid for
    // the call; rd_kafka_flush is thread-safe and only reads the handle.
    unsafe {
        rdkafka_sys::rd_kafka_flush(p.client().native_ptr(), timeout_ms);
    }
}

/// One end of a transaction: how it ended and how long the flush and the EndTxn call took.
#[derive(Debug, Clone)]
pub struct EndReport {
    pub ended: Ended,
    pub flush_ns: u64,
    pub end_ns: u64,
    /// The transaction's last record was a warmup one (not counted in the measured window).
    pub warmup: bool,
    /// For the error table: why a commit became an abort.
    pub note: Option<String>,
}

/// A fatal transaction error: the producer must stop (its text goes to the error table).
#[derive(Debug, Clone)]
pub struct Fatal(pub String);

#[derive(Debug)]
pub struct TxnDriver {
    messages: u32,
    interval_ns: u64,
    abort_ratio: f64,
    rng: SplitMix64,
    open: bool,
    aborting: bool,
    in_txn: u32,
    started_ns: u64,
    /// Whether the open transaction's newest record is a warmup one: a transaction counts
    /// in the measured window when its last record does.
    last_warmup: bool,
}

impl TxnDriver {
    pub fn new(s: &crate::scenario::Scenario, producer_index: u32) -> TxnDriver {
        TxnDriver {
            messages: s.txn_messages,
            interval_ns: s.txn_interval_ms as u64 * 1_000_000,
            abort_ratio: s.txn_abort_ratio,
            rng: SplitMix64::new(s.seed ^ (0x7A_u64 << 40) ^ producer_index as u64),
            open: false,
            aborting: false,
            in_txn: 0,
            started_ns: 0,
            last_warmup: false,
        }
    }

    /// `init_transactions`: fences an older incarnation of this id and gets the epoch.
    pub fn init<P: Producer<C>, C: rdkafka::producer::ProducerContext>(
        &self,
        p: &P,
    ) -> Result<(), Fatal> {
        p.init_transactions(limits::TXN_CALL_TIMEOUT)
            .map_err(|e| Fatal(format!("txn init_transactions: {e}")))
    }

    /// Opens a transaction if none is open; returns whether the open one will be aborted
    /// (its records get `FLAG_TXN_ABORTED`).
    pub fn ensure_open<P: Producer<C>, C: rdkafka::producer::ProducerContext>(
        &mut self,
        p: &P,
        now_ns: u64,
    ) -> Result<bool, Fatal> {
        if !self.open {
            p.begin_transaction()
                .map_err(|e| Fatal(format!("txn begin_transaction: {e}")))?;
            self.open = true;
            self.in_txn = 0;
            self.started_ns = now_ns;
            // Drawn with a fixed-point threshold so a ratio of 0 never aborts and 1 always does.
            let draw = self.rng.next_u64() >> 11; // 53 bits, uniform
            self.aborting = (draw as f64) < self.abort_ratio * (1u64 << 53) as f64;
        }
        Ok(self.aborting)
    }

    /// One message of the open transaction was accepted by the client; true when the
    /// transaction is full and must end now.
    pub fn sent(&mut self, warmup: bool) -> bool {
        debug_assert!(self.open, "a transactional send outside a transaction");
        self.in_txn += 1;
        self.last_warmup = warmup;
        self.messages > 0 && self.in_txn >= self.messages
    }

    /// When the open transaction must end by its age (None: no transaction open or no
    /// interval), in clock nanoseconds.
    pub fn deadline_ns(&self) -> Option<u64> {
        (self.open && self.interval_ns > 0).then(|| self.started_ns + self.interval_ns)
    }

    pub fn is_open(&self) -> bool {
        self.open
    }

    /// Ends the open transaction as drawn: flush (its delivery reports served), then
    /// `commit_transaction` or `abort_transaction`, each bounded by `TXN_CALL_TIMEOUT`.
    pub fn end<P: Producer<C>, C: rdkafka::producer::ProducerContext>(
        &mut self,
        p: &P,
    ) -> Result<EndReport, Fatal> {
        debug_assert!(self.open, "end of a transaction that is not open");
        self.open = false;
        let t0 = Instant::now();
        wait_acknowledged(p)?;
        let flush_ns = t0.elapsed().as_nanos() as u64;
        let t1 = Instant::now();
        let r = if self.aborting {
            p.abort_transaction(limits::TXN_CALL_TIMEOUT)
        } else {
            p.commit_transaction(limits::TXN_CALL_TIMEOUT)
        };
        let end_ns = t1.elapsed().as_nanos() as u64;
        match r {
            Ok(()) => Ok(EndReport {
                ended: if self.aborting {
                    Ended::Aborted
                } else {
                    Ended::Committed
                },
                flush_ns,
                end_ns,
                warmup: self.last_warmup,
                note: None,
            }),
            Err(KafkaError::Transaction(e)) if e.txn_requires_abort() && !self.aborting => {
                let what = format!("txn commit_transaction: {e} (aborted instead)");
                p.abort_transaction(limits::TXN_CALL_TIMEOUT)
                    .map_err(|a| Fatal(format!("{what}; abort_transaction: {a}")))?;
                Ok(EndReport {
                    ended: Ended::CommitFailed,
                    flush_ns,
                    end_ns,
                    warmup: self.last_warmup,
                    note: Some(what),
                })
            }
            Err(e) => Err(Fatal(format!(
                "txn {}: {e}",
                if self.aborting {
                    "abort_transaction"
                } else {
                    "commit_transaction"
                }
            ))),
        }
    }
}
