//! The producer threads (`bench-producer-N`): one librdkafka producer each, sending on the
//! open-loop schedule (sleeping until each message's intended time), through the application
//! batcher and in transactions when the scenario asks, and counting every send and delivery
//! report into the state the sampler reads.
//!
//! Guarantees: a message's intended time is fixed by the schedule before anything can delay
//! it; warmup messages carry the warmup flag and never enter the measured totals or the audit;
//! a full client queue is retried every `limits::QUEUE_FULL_BACKOFF`, never dropped; a pause
//! (backpressure) shifts the schedule instead of bursting the skipped slots.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Message};
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, ThreadedProducer};
use rdkafka::statistics::Statistics;

use super::attribution::{SentSlots, SeqMarks};
use super::backpressure::BpState;
use super::batcher::{AppBatcher, BatcherStats, Pending};
use super::clients::{log_to_errors, producer_config};
use super::ratecontrol::{LoadCounters, RateControl};
use crate::audit::SeqSet;
use crate::clientstats::{Cumulative, SplitAcc};
use crate::keys::{Key, KeyGen};
use crate::lagview::{self, AckCheckpoints, TopicSet};
use crate::limits;
use crate::payload::{Header, PayloadPool, FLAG_WARMUP, HEADER_BYTES};
use crate::scenario::{Partitioning, Scenario};
use crate::vocab::{Clock, ErrorLog, ProduceSide, Schedule};

#[derive(Debug, Default)]
pub(crate) struct ProducerState {
    pub(crate) window: ProduceSide,
    pub(crate) measured: ProduceSide,
    pub(crate) warmup_produced: u64,
    pub(crate) warmup_acked: u64,
    pub(crate) acked_set: SeqSet,
    /// librdkafka statistics since the sampler last looked.
    pub(crate) split: SplitAcc,
    pub(crate) split_last: Cumulative,
    /// Emits whose whole window lies in the measured window (after warmup, before load end):
    /// a client's first windows cover its connection setup and belong to the warmup.
    pub(crate) split_measured: SplitAcc,
    /// Measured messages acknowledged per partition (index = partition), from delivery reports.
    pub(crate) partition_acked: Vec<u64>,
    /// The application batcher's flush counts (None when it is off).
    pub(crate) app_batch: Option<BatcherStats>,
    /// Delivery reports by the second their record was sent in (see `attribution`), and where
    /// the sequence numbers fall in time.
    pub(crate) by_sent: SentSlots,
    pub(crate) seq_marks: SeqMarks,
}

#[derive(Debug)]
pub(crate) struct ProducerCtx {
    pub(crate) clock: Clock,
    pub(crate) sched: Schedule,
    pub(crate) run_tag: u32,
    pub(crate) topic: String,
    pub(crate) state: Arc<Mutex<ProducerState>>,
    pub(crate) errors: Arc<ErrorLog>,
    pub(crate) counters: Arc<LoadCounters>,
    pub(crate) topics: Arc<TopicSet>,
    pub(crate) checkpoints: Arc<AckCheckpoints>,
    pub(crate) avail: Arc<crate::availability::Shared>,
}

impl ClientContext for ProducerCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, msg: &str) {
        log_to_errors(&self.errors, level, fac, msg);
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.errors.note(format!("producer: {error}: {reason}"));
    }
    fn stats(&self, statistics: Statistics) {
        let now = self.clock.now_ns();
        let window_start = now.saturating_sub(limits::CLIENT_STATS_INTERVAL.as_nanos() as u64);
        let measured = window_start >= self.sched.warmup_end_ns && now <= self.sched.load_end_ns;
        let mut s = self.state.lock();
        let st = &mut *s;
        let before = st.split_last;
        st.split
            .add_emit(&statistics, &self.topic, &mut st.split_last);
        if measured {
            let mut last = before;
            st.split_measured
                .add_emit(&statistics, &self.topic, &mut last);
        }
    }
}

impl ProducerContext for ProducerCtx {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let now = self.clock.now_ns();
        let (msg, err) = match result {
            Ok(m) => (m, None),
            Err((e, m)) => (m, Some(e)),
        };
        let Some(h) = msg
            .payload()
            .and_then(Header::read)
            .filter(|h| h.run_tag == self.run_tag)
        else {
            return;
        };
        let bytes = msg.payload_len() as u64;
        let sent_since_load = h.sent_ns.saturating_sub(self.sched.load_start_ns);
        let mut s = self.state.lock();
        if let Some(e) = err {
            s.by_sent.failed(sent_since_load);
            s.window.ack_errors += 1;
            if !h.is_warmup() {
                s.measured.ack_errors += 1;
            }
            drop(s);
            self.errors.note(format!("delivery: {e}"));
            return;
        }
        self.counters.acked.fetch_add(1, Ordering::Relaxed);
        if let Some(f) = self.topics.flat(msg.topic(), msg.partition()) {
            self.checkpoints.note(f, msg.offset(), h.sent_ns);
            self.avail.acks.note(f, now);
        }
        let ack = now.saturating_sub(h.sent_ns);
        let ack_intended = now.saturating_sub(h.intended_ns);
        s.by_sent.acked(sent_since_load, ack);
        let w = &mut s.window;
        w.acked += 1;
        w.acked_bytes += bytes;
        w.ack.record_ns(ack);
        w.ack_intended.record_ns(ack_intended);
        if h.is_warmup() {
            s.warmup_acked += 1;
        } else {
            let m = &mut s.measured;
            m.acked += 1;
            m.acked_bytes += bytes;
            m.ack.record_ns(ack);
            m.ack_intended.record_ns(ack_intended);
            // A record of a transaction drawn to abort is acknowledged (it is in the log) but
            // must never be delivered: the audit does not expect it.
            if !h.is_txn_aborted() {
                s.acked_set.insert(h.seq);
            }
            if let Ok(p) = usize::try_from(msg.partition()) {
                if p < limits::MAX_PARTITIONS as usize {
                    if s.partition_acked.len() <= p {
                        s.partition_acked.resize(p + 1, 0);
                    }
                    s.partition_acked[p] += 1;
                }
            }
        }
    }
}

/// What a producer thread is given: its index, the scenario, the shared state it reports to.
pub(crate) struct ProducerJob {
    pub(crate) index: u32,
    pub(crate) scenario: Scenario,
    pub(crate) bootstrap: String,
    pub(crate) topic: String,
    pub(crate) topics: Arc<TopicSet>,
    pub(crate) checkpoints: Arc<AckCheckpoints>,
    pub(crate) avail: Arc<crate::availability::Shared>,
    pub(crate) pool: Arc<PayloadPool>,
    pub(crate) clock: Clock,
    pub(crate) sched: Schedule,
    pub(crate) run_tag: u32,
    pub(crate) state: Arc<Mutex<ProducerState>>,
    pub(crate) errors: Arc<ErrorLog>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) stopped_ns: Arc<AtomicU64>,
    pub(crate) bp: Option<Arc<BpState>>,
    /// The max-rate search's shared target (None: the scenario's fixed rate shape).
    pub(crate) rate: Option<Arc<RateControl>>,
    pub(crate) counters: Arc<LoadCounters>,
}

/// One producer's load; returns whether the final flush timed out.
pub(crate) fn producer_thread(job: ProducerJob) -> bool {
    let Some(producer) = create_producer(&job) else {
        return false;
    };
    let s = &job.scenario;
    let Ok(txn) = start_txn(&job, &producer) else {
        return false;
    };
    let mut pacer = Pacer::new(&job);
    let mut keys = KeyGen::new(&s.shaping, s.seed, job.index);
    let mut batcher = AppBatcher::new(&s.shaping);
    let mut sender = Sender {
        producer: &producer,
        job: &job,
        seq: 0,
        key_buf: Vec::new(),
        txn,
    };
    let mut buf = Vec::with_capacity(s.message_bytes);
    let partitions = s.partitions.max(1) as u64;
    // Messages made so far (the sequence number is given at send time, so it stays dense).
    let mut made: u64 = 0;
    while let Some(intended) = pacer.next_slot(&job, &mut sender, &mut batcher) {
        let warmup = intended < job.sched.warmup_end_ns;
        let header = Header {
            run_tag: job.run_tag,
            producer: job.index,
            flags: if warmup { FLAG_WARMUP } else { 0 },
            seq: made,
            intended_ns: intended,
            sent_ns: 0,
        };
        let key = keys.next_key();
        // Keyed messages go through librdkafka's partitioner, like an application's.
        let partition = (s.partitioning == Partitioning::RoundRobin && key.is_none())
            .then(|| ((job.index as u64 + made) % partitions) as i32);
        made += 1;
        let stopped = match batcher.as_mut() {
            Some(b) => {
                let mut payload = Vec::with_capacity(s.message_bytes);
                job.pool.fill(&mut payload, &header);
                let p = Pending {
                    payload,
                    header,
                    key,
                    partition,
                };
                b.push(p, job.clock.now_ns()) && sender.flush(b, true)
            }
            None => {
                job.pool.fill(&mut buf, &header);
                sender.send(&mut buf, header, key, partition) == SendOutcome::Stopped
            }
        };
        if stopped {
            break;
        }
    }
    finish_load(&job, &producer, &mut sender, batcher)
}

fn create_producer(job: &ProducerJob) -> Option<ThreadedProducer<ProducerCtx>> {
    let ctx = ProducerCtx {
        clock: job.clock,
        sched: job.sched,
        run_tag: job.run_tag,
        topic: job.topic.clone(),
        state: job.state.clone(),
        errors: job.errors.clone(),
        counters: job.counters.clone(),
        topics: job.topics.clone(),
        checkpoints: job.checkpoints.clone(),
        avail: job.avail.clone(),
    };
    match producer_config(&job.scenario, &job.bootstrap, job.index).create_with_context(ctx) {
        Ok(p) => Some(p),
        Err(e) => {
            job.errors
                .note(format!("cannot create producer {}: {e}", job.index));
            None
        }
    }
}

/// Transactional mode: the driver, its producer initialised (None: a plain producer); Err when
/// initialising failed (noted; the producer stops).
fn start_txn(
    job: &ProducerJob,
    producer: &ThreadedProducer<ProducerCtx>,
) -> Result<Option<crate::txn::TxnDriver>, ()> {
    if job.scenario.transactional_id.is_none() {
        return Ok(None);
    }
    let t = crate::txn::TxnDriver::new(&job.scenario, job.index);
    if let Err(crate::txn::Fatal(e)) = t.init(producer) {
        job.errors.note(e);
        job.state.lock().measured.txn_errors += 1;
        return Err(());
    }
    Ok(Some(t))
}

/// End of load: the application batcher's remainder goes out when its timer fires, as it
/// would in the application (at once after Ctrl-C); the last transaction ends as drawn, so its
/// records are decided before the drain; then the client is flushed. True when the flush
/// timed out.
fn finish_load(
    job: &ProducerJob,
    producer: &ThreadedProducer<ProducerCtx>,
    sender: &mut Sender<'_>,
    mut batcher: Option<AppBatcher>,
) -> bool {
    if let Some(b) = batcher.as_mut() {
        while let Some(d) = b.deadline_ns() {
            let now = job.clock.now_ns();
            if job.stop.load(Ordering::Relaxed) || now >= d {
                break;
            }
            std::thread::sleep(Duration::from_nanos(d - now).min(limits::PRODUCER_MAX_SLEEP));
        }
        sender.flush(b, false);
        job.state.lock().app_batch = Some(b.stats);
    }
    sender.end_txn();
    job.stopped_ns
        .fetch_max(job.clock.now_ns(), Ordering::Relaxed);
    let flush_timeout = if job.stop.load(Ordering::Relaxed) {
        limits::INTERRUPTED_FLUSH_TIMEOUT
    } else {
        limits::FLUSH_TIMEOUT
    };
    producer.flush(flush_timeout).is_err()
}

/// The open-loop schedule of one producer. Producer i's slots interleave with the others':
/// the aggregate schedule is evenly spaced at the current target rate (bursts change the
/// rate, never the spacing rule). `next` is the next intended send time in clock nanoseconds,
/// kept as f64 so no rounding accumulates.
struct Pacer {
    next: f64,
    throttled: bool,
    /// The max-rate search's rate in force and its epoch (see `ratecontrol`).
    search: Option<Arc<RateControl>>,
    epoch: u64,
    search_rate: f64,
}

/// How a wait for a slot ended.
enum Wait {
    Due,
    /// A pause or a new search rate: the slot is computed again.
    Again,
    Stop,
}

impl Pacer {
    fn new(job: &ProducerJob) -> Pacer {
        let s = &job.scenario;
        let search = job.rate.clone();
        let (epoch, search_rate) = match &search {
            Some(rc) => {
                let (e, r, _) = rc.current();
                (e, r)
            }
            None => (0, 0.0),
        };
        let first_rate = match search {
            Some(_) => search_rate,
            None => s.rate_at(Duration::ZERO).max(1) as f64,
        };
        Pacer {
            next: job.sched.load_start_ns as f64 + 1e9 * job.index as f64 / first_rate,
            throttled: s.rate_msg_s > 0 || search.is_some(),
            search,
            epoch,
            search_rate,
        }
    }

    /// The intended send time of the next message, once it is due (flushing the batcher and
    /// ending transactions while waiting); None when the load ends or the producer stops.
    fn next_slot(
        &mut self,
        job: &ProducerJob,
        sender: &mut Sender<'_>,
        batcher: &mut Option<AppBatcher>,
    ) -> Option<u64> {
        loop {
            if job.stop.load(Ordering::Relaxed)
                || flush_if_due(job, sender, batcher)
                || sender.end_txn_if_due()
                || !self.wait_while_paused(job)
            {
                return None;
            }
            self.follow_search_rate(job);
            let intended = if self.throttled {
                self.next as u64
            } else {
                job.clock.now_ns()
            };
            if intended >= job.sched.load_end_ns {
                return None;
            }
            if !self.throttled {
                return Some(intended);
            }
            match self.wait_for(intended, job, sender, batcher) {
                Wait::Due => {}
                Wait::Again => continue,
                Wait::Stop => return None,
            }
            let rate = match self.search {
                Some(_) => self.search_rate,
                None => {
                    let since = intended.saturating_sub(job.sched.load_start_ns);
                    job.scenario.rate_at(Duration::from_nanos(since)).max(1) as f64
                }
            };
            self.next += 1e9 * job.scenario.producers as f64 / rate;
            return Some(intended);
        }
    }

    /// Waits out a backpressure pause; false when the load ended or stopped meanwhile.
    fn wait_while_paused(&mut self, job: &ProducerJob) -> bool {
        let Some(bp) = job
            .bp
            .as_ref()
            .filter(|bp| bp.paused.load(Ordering::Relaxed))
        else {
            return true;
        };
        let pause_start = job.clock.now_ns();
        while bp.paused.load(Ordering::Relaxed) {
            if job.stop.load(Ordering::Relaxed) || job.clock.now_ns() >= job.sched.load_end_ns {
                return false;
            }
            std::thread::sleep(job.scenario.bp_poll_ms / 2);
        }
        // A pause is a deliberate slowdown: the schedule resumes where it stood, shifted by
        // the pause, instead of sending the skipped slots in a burst.
        self.next += job.clock.now_ns().saturating_sub(pause_start) as f64;
        true
    }

    /// A new search rate re-anchors the schedule at the change; due slots of the old one that
    /// were not sent yet are dropped and counted.
    fn follow_search_rate(&mut self, job: &ProducerJob) {
        let Some(rc) = self.search.as_ref().filter(|rc| rc.epoch() != self.epoch) else {
            return;
        };
        let (e, rate, anchor_ns) = rc.current();
        let anchor = anchor_ns as f64;
        if self.next < anchor {
            let spacing = 1e9 * job.scenario.producers as f64 / self.search_rate;
            rc.note_skipped(((anchor - self.next) / spacing).ceil() as u64);
        }
        self.epoch = e;
        self.search_rate = rate;
        self.next = anchor + 1e9 * job.index as f64 / rate;
    }

    /// Sleeps until `intended`, flushing the batcher and ending transactions as they fall due.
    fn wait_for(
        &self,
        intended: u64,
        job: &ProducerJob,
        sender: &mut Sender<'_>,
        batcher: &mut Option<AppBatcher>,
    ) -> Wait {
        let at = job.clock.instant_at(intended);
        loop {
            if flush_if_due(job, sender, batcher) || sender.end_txn_if_due() {
                return Wait::Stop;
            }
            let now = Instant::now();
            if now >= at {
                return Wait::Due;
            }
            if job.stop.load(Ordering::Relaxed) {
                return Wait::Stop;
            }
            let paused = (job.bp.as_ref()).is_some_and(|bp| bp.paused.load(Ordering::Relaxed));
            if paused
                || self
                    .search
                    .as_ref()
                    .is_some_and(|rc| rc.epoch() != self.epoch)
            {
                return Wait::Again;
            }
            let mut wait = (at - now).min(limits::PRODUCER_MAX_SLEEP);
            if let Some(d) = batcher.as_ref().and_then(|b| b.deadline_ns()) {
                wait = wait.min(job.clock.instant_at(d).saturating_duration_since(now));
            }
            if let Some(d) = sender.txn.as_ref().and_then(|t| t.deadline_ns()) {
                wait = wait.min(job.clock.instant_at(d).saturating_duration_since(now));
            }
            std::thread::sleep(wait);
        }
    }
}

/// Flushes the application batcher if its timer fired; true when the run was stopped.
fn flush_if_due(
    job: &ProducerJob,
    sender: &mut Sender<'_>,
    batcher: &mut Option<AppBatcher>,
) -> bool {
    match batcher.as_mut().filter(|b| b.due(job.clock.now_ns())) {
        Some(b) => sender.flush(b, false),
        None => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendOutcome {
    Accepted,
    /// Refused for a reason other than a full queue: counted as a send error, slot skipped.
    Skipped,
    /// The run was stopped while the client queue was full, or a transaction call failed
    /// fatally (this producer stops; see `txn`).
    Stopped,
}

/// Hands messages to one producer client and counts them.
pub(crate) struct Sender<'a> {
    pub(crate) producer: &'a ThreadedProducer<ProducerCtx>,
    pub(crate) job: &'a ProducerJob,
    /// The next sequence number: dense over the messages the client accepted.
    pub(crate) seq: u64,
    pub(crate) key_buf: Vec<u8>,
    /// Transactional mode: the transaction in progress (None: plain producer).
    pub(crate) txn: Option<crate::txn::TxnDriver>,
}

impl Sender<'_> {
    /// Sends one message, retrying while the client queue is full. The header gets its
    /// sequence number and actual send time here; its intended time stays the schedule's.
    pub(crate) fn send(
        &mut self,
        buf: &mut [u8],
        mut header: Header,
        key: Option<Key>,
        partition: Option<i32>,
    ) -> SendOutcome {
        let job = self.job;
        let Some(aborting) = self.open_txn(&mut header) else {
            return SendOutcome::Stopped;
        };
        header.seq = self.seq;
        header.write(buf);
        if let Some(k) = key {
            k.write(&mut self.key_buf);
        }
        let warmup = header.is_warmup();
        loop {
            let now = job.clock.now_ns();
            Header::set_sent_ns(buf, now);
            let (topic_index, rr_partition) = self.destination(buf, partition.is_some());
            let mut record =
                BaseRecord::<[u8], [u8]>::to(&job.topics.names[topic_index]).payload(&buf[..]);
            if key.is_some() {
                record = record.key(&self.key_buf[..]);
            }
            // `partition` marks explicit round-robin; its value is taken from the dense
            // sequence number (see `destination`), so several topics each get every partition.
            if partition.is_some() {
                record = record.partition(rr_partition);
            }
            match self.producer.send(record) {
                Ok(()) => {
                    let delay = now.saturating_sub(header.intended_ns);
                    return self.accepted(now, delay, buf.len() as u64, warmup, aborting);
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    {
                        let mut st = job.state.lock();
                        st.window.queue_full_retries += 1;
                        if !warmup {
                            st.measured.queue_full_retries += 1;
                        }
                    }
                    if job.stop.load(Ordering::Relaxed) {
                        return SendOutcome::Stopped;
                    }
                    std::thread::sleep(limits::QUEUE_FULL_BACKOFF);
                }
                Err((e, _)) => {
                    let mut st = job.state.lock();
                    st.window.send_errors += 1;
                    if !warmup {
                        st.measured.send_errors += 1;
                    }
                    drop(st);
                    job.errors.note(format!("send: {e}"));
                    return SendOutcome::Skipped;
                }
            }
        }
    }

    /// Transactional mode: opens a transaction if none is, and marks the record when its
    /// transaction is drawn to abort. Some(aborting); None when a fatal error stops the
    /// producer.
    fn open_txn(&mut self, header: &mut Header) -> Option<bool> {
        let job = self.job;
        let Some(t) = self.txn.as_mut() else {
            return Some(false);
        };
        match t.ensure_open(self.producer, job.clock.now_ns()) {
            Ok(aborting) => {
                if aborting {
                    header.flags |= crate::payload::FLAG_TXN_ABORTED;
                }
                Some(aborting)
            }
            Err(crate::txn::Fatal(e)) => {
                job.errors.note(e);
                job.state.lock().measured.txn_errors += 1;
                None
            }
        }
    }

    /// Topic (and, for explicit round-robin, partition) from the sequence number, so several
    /// topics share the load evenly (see `lagview::destination`); with a txmeta payload and
    /// explicit partitions, every entry's key hash is routed into that partition's range.
    fn destination(&self, buf: &mut [u8], explicit_partition: bool) -> (usize, i32) {
        let s = &self.job.scenario;
        let (topic_index, rr_partition) =
            lagview::destination(self.job.index, self.seq, s.topics, s.partitions);
        if explicit_partition && s.payload == crate::payload::PayloadClass::Txmeta {
            crate::txmeta::route(&mut buf[HEADER_BYTES..], rr_partition, s.partitions);
        }
        (topic_index, rr_partition)
    }

    /// Counts a message the client accepted, and ends its transaction when it was the last.
    fn accepted(
        &mut self,
        now: u64,
        delay: u64,
        bytes: u64,
        warmup: bool,
        aborting: bool,
    ) -> SendOutcome {
        let job = self.job;
        job.counters.produced.fetch_add(1, Ordering::Relaxed);
        let mut st = job.state.lock();
        st.seq_marks
            .note(self.seq, now.saturating_sub(job.sched.load_start_ns));
        st.window.produced += 1;
        st.window.produced_bytes += bytes;
        st.window.send_delay.record_ns(delay);
        if aborting {
            st.window.txn_aborted_records += 1;
        }
        if warmup {
            st.warmup_produced += 1;
        } else {
            st.measured.produced += 1;
            st.measured.produced_bytes += bytes;
            st.measured.send_delay.record_ns(delay);
            if aborting {
                st.measured.txn_aborted_records += 1;
            }
        }
        drop(st);
        self.seq += 1;
        if self.txn.as_mut().is_some_and(|t| t.sent(warmup)) && self.end_txn() {
            return SendOutcome::Stopped;
        }
        SendOutcome::Accepted
    }

    /// Ends the open transaction if its interval has passed; true when the producer must stop.
    pub(crate) fn end_txn_if_due(&mut self) -> bool {
        let now = self.job.clock.now_ns();
        match self.txn.as_ref().and_then(|t| t.deadline_ns()) {
            Some(d) if now >= d => self.end_txn(),
            _ => false,
        }
    }

    /// Ends the open transaction (if any) and counts it; true when a fatal error means this
    /// producer must stop.
    pub(crate) fn end_txn(&mut self) -> bool {
        let job = self.job;
        let Some(t) = self.txn.as_mut().filter(|t| t.is_open()) else {
            return false;
        };
        let r = t.end(self.producer);
        match r {
            Ok(r) => {
                let mut st = job.state.lock();
                note_txn_end(&mut st.window, &r);
                // Measured when its last record is (a late producer sends warmup slots
                // after the warmup's end, so the clock alone would count them).
                if !r.warmup {
                    note_txn_end(&mut st.measured, &r);
                }
                drop(st);
                if let Some(n) = r.note {
                    job.errors.note(n);
                }
                false
            }
            Err(crate::txn::Fatal(e)) => {
                let mut st = job.state.lock();
                st.window.txn_errors += 1;
                st.measured.txn_errors += 1;
                drop(st);
                job.errors.note(e);
                true
            }
        }
    }

    /// Sends everything the application batcher holds; true when the run was stopped.
    pub(crate) fn flush(&mut self, b: &mut AppBatcher, by_size: bool) -> bool {
        for mut p in b.take(by_size) {
            if self.send(&mut p.payload, p.header, p.key, p.partition) == SendOutcome::Stopped {
                return true;
            }
        }
        false
    }
}

/// Counts one end of a transaction into `side`.
fn note_txn_end(side: &mut ProduceSide, r: &crate::txn::EndReport) {
    use crate::txn::Ended;
    side.txn_flush.record_ns(r.flush_ns);
    match r.ended {
        Ended::Committed => {
            side.txn_committed += 1;
            side.txn_commit.record_ns(r.end_ns);
        }
        Ended::Aborted => {
            side.txn_aborted += 1;
            side.txn_abort.record_ns(r.end_ns);
        }
        Ended::CommitFailed => side.txn_commit_failed += 1,
    }
}
