//! Fetch reads on dedicated threads, handed over without an allocation.
//!
//! A fetch reads batch headers from the journal files (`LogManager::read_ranges_into`):
//! blocking file I/O, which never runs on the async workers. Instead of a blocking-pool
//! task per request (a spawned closure, a join handle, a result box), each connection's
//! fetch owns one [`ReadJob`] for its lifetime: the partitions to read and the results,
//! reused from request to request. The request hands the job's `Arc` to a small pool of
//! reader threads over a bounded channel, and waits on the job's own `Notify`; the reader
//! fills the results in place and wakes it. So a steady stream of fetches allocates nothing
//! to read.
//!
//! Bounds: [`limits::FETCH_READ_THREADS`] threads, [`limits::FETCH_READ_QUEUE_MAX`] jobs
//! queued. When the queue is full (or the pool is gone), the job runs on tokio's blocking
//! pool instead, which allocates but never refuses: overload costs allocations, not errors.
//! A job is on a thread at most once at a time (the request waits for it before touching
//! its state again), and its lock is held neither across an `.await` nor during the read.
//!
//! The reader also makes sure long file ranges are in the page cache (reading them in if
//! not), so the worker's `sendfile` of data written long ago does not wait for the disk.

use kafka_protocol::error::ResponseError;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_log::{IsolationLevel, LogError, LogManager, Offset};
use tokio::sync::Notify;

use super::{Part, PartResult};
use crate::{config::limits, error_code};

/// What one read needs and what it found; owned by a connection's fetch, lent to a reader.
#[derive(Debug, Default)]
pub(crate) struct ReadState {
    /// The request's partitions, in response order.
    pub(crate) parts: Vec<Part>,
    /// One result per partition after a read (or [`ReadState::offsets_only`]).
    pub(crate) results: Vec<PartResult>,
    /// Response byte budget of the read in progress.
    limit_bytes: u32,
    /// The log, set for the read in progress (a clone of the broker's handle).
    log: Option<LogManager>,
    /// The request's isolation level: reads end at the high watermark or at the LSO.
    pub(crate) isolation: IsolationLevel,
}

/// A fetch's reusable read: its state and the wake-up for its end.
#[derive(Debug, Default)]
pub(crate) struct ReadJob {
    pub(crate) state: Mutex<ReadState>,
    done: Notify,
}

impl ReadJob {
    /// Runs the read on this thread (a reader, or the blocking pool) and wakes the waiter.
    /// The vectors are taken out for the read, so the state's lock is never held during
    /// file I/O (a call dropped meanwhile, its client gone, only finds them missing).
    fn run(&self) {
        let (mut parts, mut results, limit_bytes, log, isolation) = {
            let mut state = self.state.lock();
            (
                std::mem::take(&mut state.parts),
                std::mem::take(&mut state.results),
                state.limit_bytes,
                state.log.take(),
                state.isolation,
            )
        };
        if let Some(log) = log {
            read_all(&log, &parts, limit_bytes, isolation, &mut results);
        }
        let next = furthest_cold_range(&results);
        {
            let mut state = self.state.lock();
            std::mem::swap(&mut state.parts, &mut parts);
            std::mem::swap(&mut state.results, &mut results);
        }
        // A stored permit: the waiter may not be waiting yet.
        self.done.notify_one();
        if let Some(range) = next {
            if let Err(error) = range.read_ahead_after(
                limits::FETCH_NEXT_READ_AHEAD_BYTES,
                limits::FETCH_NEXT_READ_AHEAD_STEP_BYTES,
            ) {
                tracing::debug!(%error, "could not read ahead of a catching-up fetch");
            }
        }
    }
}

/// Results with only the watermarks (no read): for a long poll checking its partitions,
/// and for a response whose memory could not be charged. Atomics only.
pub(crate) fn offsets_only(log: &LogManager, state: &mut ReadState) {
    let ReadState { parts, results, .. } = state;
    reset_results(results, parts.len());
    for (p, r) in parts.iter().zip(results.iter_mut()) {
        match p.key.as_ref().map(|k| log.offsets(k)) {
            Some(Ok(o)) => {
                r.high_watermark = o.high_watermark.0;
                r.last_stable_offset = o.last_stable_offset.0;
                r.log_start_offset = o.log_start_offset.0;
            }
            _ => unknown(r, p.unknown_code),
        }
    }
}

/// The reader threads.
#[derive(Debug)]
pub(crate) struct FetchReaders {
    tx: SyncSender<Arc<ReadJob>>,
}

impl FetchReaders {
    /// Starts the reader threads; they stop when this is dropped (the channel closes).
    pub(crate) fn start() -> std::io::Result<Self> {
        let (tx, rx) = mpsc::sync_channel::<Arc<ReadJob>>(limits::FETCH_READ_QUEUE_MAX);
        let rx = Arc::new(std::sync::Mutex::new(rx));
        for i in 0..limits::FETCH_READ_THREADS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("sluice-fetch-read-{i}"))
                .spawn(move || reader_loop(&rx))?;
        }
        Ok(Self { tx })
    }

    /// Reads `job`'s partitions within `limit_bytes` and waits for the results, which are
    /// in `job.state` when this returns.
    pub(crate) async fn read(&self, job: &Arc<ReadJob>, log: &LogManager, limit_bytes: u32) {
        {
            let mut state = job.state.lock();
            state.limit_bytes = limit_bytes;
            state.log = Some(log.clone());
        }
        match self.tx.try_send(job.clone()) {
            Ok(()) => {}
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                // Overloaded (or shutting down): the blocking pool takes it.
                tokio::task::spawn_blocking(move || job.run());
            }
        }
        job.done.notified().await;
    }
}

fn reader_loop(rx: &std::sync::Mutex<mpsc::Receiver<Arc<ReadJob>>>) {
    loop {
        // The lock only chooses which idle thread takes the next job.
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job.run(),
            Err(_) => return,
        }
    }
}

/// `n` results, each empty, keeping the vectors' capacity.
fn reset_results(results: &mut Vec<PartResult>, n: usize) {
    results.truncate(n);
    for r in results.iter_mut() {
        r.reset();
    }
    results.resize_with(n, PartResult::default);
}

fn unknown(r: &mut PartResult, code: i16) {
    r.error_code = code;
    r.high_watermark = -1;
    r.last_stable_offset = -1;
    r.log_start_offset = -1;
}

/// Reads the long file ranges of a result into the page cache if they are not there yet
/// (data written long ago), here on the reader thread rather than in the worker's
/// `sendfile`. A failure is left for the send to report.
fn make_resident(records: &[sluice_log::RecordSlice]) {
    for range in records.iter().filter_map(long_file_range) {
        if let Err(error) = range.make_resident(limits::FETCH_READ_AHEAD_BYTES) {
            tracing::debug!(%error, "could not read a fetch range in ahead of its send");
        }
    }
}

/// The long file range of the results that ends furthest into its file (the newest file
/// wins), if any: where a consumer catching up will ask next. Tailing consumers (short,
/// cached ranges) get none.
fn furthest_cold_range(results: &[PartResult]) -> Option<sluice_log::FileRange> {
    results
        .iter()
        .flat_map(|r| r.records.iter())
        .filter_map(long_file_range)
        .max_by_key(|range| (range.file_seq(), range.position() + range.len() as u64))
        .cloned()
}

/// The slice as a file range if it is long enough to be worth a residency check (a
/// catching-up consumer's; a tailing one's ranges are short and cached).
fn long_file_range(slice: &sluice_log::RecordSlice) -> Option<&sluice_log::FileRange> {
    match slice {
        sluice_log::RecordSlice::File(range)
            if range.len() >= limits::FETCH_RESIDENT_CHECK_BYTES_MIN =>
        {
            Some(range)
        }
        _ => None,
    }
}

/// Reads every partition in order within the response byte budget. Blocking.
fn read_all(
    log: &LogManager,
    parts: &[Part],
    limit_bytes: u32,
    isolation: IsolationLevel,
    results: &mut Vec<PartResult>,
) {
    reset_results(results, parts.len());
    let mut remaining = u64::from(limit_bytes);
    let mut any_data = false;
    for (p, r) in parts.iter().zip(results.iter_mut()) {
        let Some(key) = &p.key else {
            unknown(r, p.unknown_code);
            continue;
        };
        let budget = remaining.min(p.max_bytes.max(0) as u64) as u32;
        match log.read_ranges_isolated_into(
            key,
            Offset(p.fetch_offset),
            budget,
            !any_data,
            isolation,
            &mut r.records,
        ) {
            Ok((len, offsets, end)) => {
                make_resident(&r.records);
                remaining = remaining.saturating_sub(len as u64);
                any_data |= len > 0;
                r.high_watermark = offsets.high_watermark.0;
                r.last_stable_offset = offsets.last_stable_offset.0;
                r.log_start_offset = offsets.log_start_offset.0;
                r.records_len = len;
                // The log returns whole batches from the one holding the fetch offset, and
                // offsets are contiguous: what lies between is what the consumer gets (no
                // pass over the records; on a compacted topic it includes the offsets the
                // cleaner removed).
                if len > 0 {
                    r.offsets_read = u64::try_from(end.0 - p.fetch_offset).unwrap_or(0);
                }
                if len > 0 && isolation == IsolationLevel::ReadCommitted {
                    // The transactions overlapping what was returned: each overlaps a
                    // returned batch, so there are at most as many as batches returned.
                    let from = Offset(p.fetch_offset);
                    let _ = log.aborted_transactions(key, from, end, &mut r.aborted);
                }
            }
            Err(LogError::OffsetOutOfRange {
                log_start_offset,
                high_watermark,
                ..
            }) => {
                r.error_code = ResponseError::OffsetOutOfRange.code();
                r.high_watermark = high_watermark.0;
                r.last_stable_offset = high_watermark.0;
                r.log_start_offset = log_start_offset.0;
            }
            Err(e) => {
                let o = log.offsets(key).ok();
                r.records.clear();
                r.error_code = error_code::from_log(&e);
                r.high_watermark = o.map_or(-1, |o| o.high_watermark.0);
                r.last_stable_offset = o.map_or(-1, |o| o.last_stable_offset.0);
                r.log_start_offset = o.map_or(-1, |o| o.log_start_offset.0);
            }
        }
        debug_assert_eq!(
            r.records
                .iter()
                .map(sluice_log::RecordSlice::len)
                .sum::<usize>(),
            r.records_len,
            "a result's length is its records'"
        );
    }
}
