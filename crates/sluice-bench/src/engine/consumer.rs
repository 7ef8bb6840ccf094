//! The consumer threads (`bench-consumer-N`): one assign()-only librdkafka consumer each, over
//! a fixed round-robin share of the topic-partitions, recording end-to-end latency, the audit
//! and the consumed positions, then "working" per message as the scenario's processing model
//! says. librdkafka auto-commits the stored offsets to the run's group; one last synchronous
//! commit at the end makes the broker's view of the lag exact.
//!
//! Guarantees: no group membership, so no rebalance; warmup messages never enter the audit;
//! the final commit is awaited at most `limits::FINAL_COMMIT_TIMEOUT`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::Offset;

use super::attribution::SentSlots;
use super::clients::{committing_consumer_config, group_id, ConsumerCtx};
use crate::audit::ConsumerAudit;
use crate::lagview::TopicSet;
use crate::limits;
use crate::payload::{Header, HEADER_BYTES};
use crate::scenario::Scenario;
use crate::vocab::{Clock, ConsumeSide, ErrorLog};

/// State one consumer thread shares with the sampler.
#[derive(Debug, Default)]
pub(crate) struct ConsumerState {
    pub(crate) window: ConsumeSide,
    pub(crate) measured: ConsumeSide,
    pub(crate) warmup_received: u64,
    /// Messages that are not this run's (no bench header, or another run's tag).
    pub(crate) foreign: u64,
    pub(crate) audit: ConsumerAudit,
    /// Distinct measured messages received, per topic (index into the run's `TopicSet`).
    pub(crate) topic_received: Vec<u64>,
    /// Duplicates by the second their record was sent in.
    pub(crate) by_sent: SentSlots,
}

pub(crate) struct ConsumerJob {
    pub(crate) bootstrap: String,
    pub(crate) topics: Arc<TopicSet>,
    /// Flat topic-partition indexes (see `TopicSet`) this consumer is assigned.
    pub(crate) assigned: Vec<usize>,
    pub(crate) clock: Clock,
    pub(crate) run_tag: u32,
    pub(crate) state: Arc<Mutex<ConsumerState>>,
    pub(crate) positions: Arc<Vec<AtomicI64>>,
    pub(crate) unique_measured: Arc<AtomicU64>,
    pub(crate) errors: Arc<ErrorLog>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) index: u32,
    pub(crate) scenario: Scenario,
    pub(crate) load_start_ns: u64,
    /// Backlog mode: consume nothing while set.
    pub(crate) hold: Option<Arc<AtomicBool>>,
}

pub(crate) fn consumer_thread(job: ConsumerJob) {
    let Some(consumer) = create_consumer(&job) else {
        return;
    };
    let mut rng =
        crate::payload::SplitMix64::new(job.scenario.seed ^ (0xC0A5_u64 << 32) ^ job.index as u64);
    while !job.stop.load(Ordering::Relaxed) {
        let msg = match consumer.poll(limits::CONSUMER_POLL) {
            None => continue,
            Some(Err(e)) => {
                job.errors.note(format!("consume: {e}"));
                continue;
            }
            Some(Ok(m)) => m,
        };
        let now = job.clock.now_ns();
        if note_message(&job, &msg, now) {
            consumer_work(&job, now, &mut rng);
        }
    }
    final_commit(&job, consumer);
}

/// The consumer, assigned its share from the beginning (and held in backlog mode); None when
/// it could not be created or assigned (noted).
fn create_consumer(job: &ConsumerJob) -> Option<BaseConsumer<ConsumerCtx>> {
    let ctx = ConsumerCtx {
        errors: job.errors.clone(),
        who: "consumer",
    };
    let consumer: BaseConsumer<ConsumerCtx> = match committing_consumer_config(
        &job.bootstrap,
        &format!("sluice-bench-consumer-{}", job.index),
        &group_id(job.run_tag),
        job.scenario.commit_interval_ms,
        job.scenario.transactional_id.is_some(),
        &job.scenario.client_config,
    )
    .create_with_context(ctx)
    {
        Ok(c) => c,
        Err(e) => {
            job.errors
                .note(format!("cannot create consumer {}: {e}", job.index));
            return None;
        }
    };
    let tpl = job
        .topics
        .tpl(job.assigned.iter().copied(), Offset::Beginning);
    if let Err(e) = consumer.assign(&tpl) {
        job.errors
            .note(format!("consumer {} assign failed: {e}", job.index));
        return None;
    }
    if let Some(hold) = &job.hold {
        super::backlog::hold_consumer(&consumer, hold, &job.stop, &job.errors);
    }
    Some(consumer)
}

/// Counts one consumed message (position, audit, latencies); true when it is this run's and
/// the processing model's work follows it.
fn note_message(job: &ConsumerJob, msg: &BorrowedMessage<'_>, now: u64) -> bool {
    let flat = job.topics.flat(msg.topic(), msg.partition());
    if let Some(pos) = flat.and_then(|f| job.positions.get(f)) {
        pos.fetch_max(msg.offset() + 1, Ordering::Relaxed);
    }
    // The audit judges order per topic-partition: the flat index names one.
    let partition = flat.map(|f| f as i32).unwrap_or(-1);
    let bytes = msg.payload_len() as u64;
    let header = msg
        .payload()
        .and_then(Header::read)
        .filter(|h| h.run_tag == job.run_tag);
    // `packed`: parse every record like the application would (outside the lock).
    let parsed = (header.is_some() && job.scenario.payload == crate::payload::PayloadClass::Txmeta)
        .then(|| {
            let body = msg
                .payload()
                .and_then(|b| b.get(HEADER_BYTES..))
                .unwrap_or(&[]);
            crate::txmeta::parse(body, partition, job.scenario.partitions)
        });
    let mut s = job.state.lock();
    let Some(h) = header else {
        s.foreign += 1;
        return false;
    };
    if h.is_txn_aborted() {
        s.window.txn_aborted_delivered += 1;
        s.measured.txn_aborted_delivered += 1;
        return false;
    }
    let e2e = now.saturating_sub(h.sent_ns);
    let e2e_intended = now.saturating_sub(h.intended_ns);
    s.window.received += 1;
    s.window.received_bytes += bytes;
    if h.is_warmup() {
        s.warmup_received += 1;
        s.window.e2e.record_ns(e2e);
        s.window.e2e_intended.record_ns(e2e_intended);
        return true;
    }
    if s.audit.note(partition, h.producer, h.seq) {
        s.by_sent
            .duplicate(h.sent_ns.saturating_sub(job.load_start_ns));
        s.window.duplicates += 1;
        s.measured.duplicates += 1;
        return false;
    }
    job.unique_measured.fetch_add(1, Ordering::Relaxed);
    if let Some(n) = flat
        .map(|f| f / job.topics.partitions as usize)
        .and_then(|t| s.topic_received.get_mut(t))
    {
        *n += 1;
    }
    s.window.e2e.record_ns(e2e);
    s.window.e2e_intended.record_ns(e2e_intended);
    let m = &mut s.measured;
    m.received += 1;
    m.received_bytes += bytes;
    m.e2e.record_ns(e2e);
    m.e2e_intended.record_ns(e2e_intended);
    match parsed {
        Some(Ok(p)) => {
            m.entries += p.entries;
            m.misrouted_entries += p.misrouted;
        }
        Some(Err(_)) => m.bad_records += 1,
        None => {}
    }
    true
}

/// The final commit, synchronously, so the last broker-view sample sees every offset this
/// consumer handed over. "No offset stored" just means nothing new since the last commit.
/// librdkafka's synchronous commit has no timeout (with the coordinator dead it waits for
/// good), so it runs on a helper thread that owns the client, and is awaited at most
/// `limits::FINAL_COMMIT_TIMEOUT`; past that the run goes on and the helper ends with the
/// commit (or the process).
fn final_commit(job: &ConsumerJob, consumer: BaseConsumer<ConsumerCtx>) {
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let errors = job.errors.clone();
    let index = job.index;
    let helper = std::thread::Builder::new()
        .name(format!("bench-commit-{index}"))
        .spawn(move || {
            match consumer.commit_consumer_state(CommitMode::Sync) {
                Ok(()) => {}
                Err(KafkaError::ConsumerCommit(RDKafkaErrorCode::NoOffset)) => {}
                Err(e) => errors.note(format!("consumer {index} final commit: {e}")),
            }
            let _ = done_tx.send(());
        });
    match helper {
        Ok(_) => {
            if done_rx.recv_timeout(limits::FINAL_COMMIT_TIMEOUT).is_err() {
                job.errors.note(format!(
                    "consumer {index} final commit: no answer within {:?} (the broker view's final lag is not exact)",
                    limits::FINAL_COMMIT_TIMEOUT
                ));
            }
        }
        Err(e) => job.errors.note(format!(
            "consumer {index} final commit: cannot start a thread: {e}"
        )),
    }
}

/// The processing model: a consumer thread handles one message at a time, then "works" for the
/// configured delay plus jitter (after its lock is released, so the sampler never waits on it).
pub(crate) fn consumer_work(job: &ConsumerJob, now_ns: u64, rng: &mut crate::payload::SplitMix64) {
    let since_start = Duration::from_nanos(now_ns.saturating_sub(job.load_start_ns));
    let mut work = job.scenario.consumer_delay_at(since_start);
    let jitter_ns = job.scenario.consumer_jitter_us.as_nanos() as u64;
    if jitter_ns > 0 {
        work += Duration::from_nanos(rng.below(jitter_ns));
    }
    if !work.is_zero() {
        std::thread::sleep(work);
    }
}
