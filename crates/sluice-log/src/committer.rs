//! The committer thread: group commit of appends from every partition.
//!
//! One round: block for the first queued request, drain more without waiting up to
//! `commit_bytes_max`, then for each request stamp base offsets (the partition's log end),
//! roll the active segment if needed, encode the journal entry into the round buffer and
//! reserve (and index) the batch's place in its segment. Then, in parallel, a helper thread
//! writes the stamped batches from the round buffer to their segments (page cache only)
//! while the committer writes the round buffer to the journal in one write and issues ONE
//! `fdatasync` of it. Once both are done the round is handed to the checkpointer, the new
//! committed segment lengths and high watermarks are published, and the waiters answered.
//! A round costs one sync however many partitions it touched, because the journal alone
//! makes it durable; splitting the two page-cache copies over two threads keeps the
//! committer from being CPU-bound on them.
//!
//! Idempotent producers: a request whose batches carry a producer id is checked against
//! the partition's producer state (see `producer_state`) under the partition's append lock,
//! before any of its batches gets an offset, so the order of the checks is the order of the
//! offsets. A request is accepted or refused as a whole; a retry of a written batch is
//! answered with the original offsets and writes nothing. The state is updated as the
//! batches are placed, so a later request of the same round sees it.
//!
//! Guarantees: a waiter is answered Ok only after the sync covering its batches returned
//! (a duplicate's original was covered by this round's sync or an earlier one); a sync
//! error, or any other write error, poisons the log, fails every waiter of the round and
//! every later append, and nothing is retried.
//!
//! Refused writes are the exception: when the system refuses a write or an open with no
//! space or no file descriptor (`fs::is_retryable`) before the sync, nothing of the round
//! was acknowledged or published, so the round is undone instead: every touched
//! partition's log end, segments (rolled ones deleted, written ones cut back, durably),
//! in-memory index and producer state are put back as they were before the round, the
//! journal is cut back to where the round started, and every waiter of the round gets
//! the error (KAFKA_STORAGE_ERROR). The next round tries again, so appends resume by
//! themselves once space is freed, with nothing lost and nothing written twice.
//!
//! Steady state allocates nothing per request beyond the channel message: the round's
//! vectors and journal buffer are reused, and segments are written from the journal buffer.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::batch::{BatchHeader, BatchIter};
use crate::checkpoint::RecoveryPoint;
use crate::config::FsyncPolicy;
use crate::engine::{Engine, Stats};
use crate::error::LogError;
use crate::journal::{self, JournalWriter};
use crate::manager::AppendInfo;
use crate::partition::Partition;
use crate::producer_state::{BatchMetadata, ProducerEntry, Staged};
use crate::segment::{now_ms, Segment};
use crate::types::{Offset, ProducerId};

/// A queued append: already validated on the caller's thread.
#[derive(Debug)]
pub(crate) struct AppendRequest {
    pub(crate) partition: Arc<Partition>,
    pub(crate) records: Bytes,
    /// Number of batches in `records` (counted by validation).
    pub(crate) batch_count: usize,
    /// The append time for LogAppendTime partitions, else -1.
    pub(crate) log_append_time_ms: i64,
    /// Some batch carries a producer id: the request goes through the sequence checks.
    pub(crate) idempotent: bool,
    pub(crate) reply: oneshot::Sender<Result<AppendInfo, LogError>>,
}

#[derive(Debug)]
pub(crate) enum Message {
    Append(AppendRequest),
    /// Sent by shutdown / drop: finish what is queued, then exit.
    Stop,
}

/// One request in the current round and its result so far.
#[derive(Debug)]
struct Pending {
    request: AppendRequest,
    outcome: Option<Result<AppendInfo, LogError>>,
}

/// Rounds whose segment bytes are at least this large write them on a helper thread in
/// parallel with the journal write and sync; smaller rounds (mostly latency-bound) write
/// them inline, which is cheaper than starting a thread.
const PARALLEL_SEGMENT_WRITE_BYTES_MIN: usize = 256 * 1024;

/// A batch placed in a segment this round: written from the round buffer, published after
/// the sync.
#[derive(Debug)]
struct SegmentWrite {
    segment: Arc<Segment>,
    /// Where the stamped batch sits in the round's journal buffer.
    source: std::ops::Range<usize>,
    position: u64,
    next_offset: Offset,
}

impl SegmentWrite {
    fn end(&self) -> u64 {
        self.position + self.source.len() as u64
    }
}

/// Writes every placed batch from the round buffer to its segment.
fn write_segments(buf: &[u8], writes: &[SegmentWrite]) -> io::Result<()> {
    for write in writes {
        write
            .segment
            .write_at(&buf[write.source.clone()], write.position)?;
    }
    Ok(())
}

/// A partition as it was before the current round first touched it, to put it back if
/// the round's writes are refused.
#[derive(Debug)]
struct RoundUndo {
    partition: Arc<Partition>,
    log_end: Offset,
    segment_count: usize,
    active: Arc<Segment>,
    active_len: u64,
    active_next: Offset,
    /// Producer entries as they were (see `ProducerStateTable::record_header_undoable`).
    producers: Vec<(ProducerId, Option<ProducerEntry>)>,
}

/// Why a request could not be applied.
enum Failure {
    /// The request alone fails (e.g. its partition was deleted).
    Request(LogError),
    /// Storage failed: the log is poisoned.
    Io(&'static str, io::Error),
}

#[derive(Debug)]
pub(crate) struct Committer {
    engine: Arc<Engine>,
    receiver: mpsc::Receiver<Message>,
    journal: JournalWriter,
    round: Vec<Pending>,
    round_bytes: usize,
    /// Journal bytes the round can take at most (records plus one entry header per batch).
    round_journal_bytes: u64,
    journal_buf: Vec<u8>,
    writes: Vec<SegmentWrite>,
    touched: Vec<Arc<Partition>>,
    /// One per touched partition, in the order of `touched`.
    undo: Vec<RoundUndo>,
    sealed: Vec<Arc<Segment>>,
    new_files: Vec<Arc<Partition>>,
    /// The journal position before the current round (after any roll), where a refused
    /// round cuts the journal back to.
    round_start: journal::JournalPosition,
    /// Scratch for the producer checks of one request (reused: no allocation per request).
    staged: Vec<Staged>,
    round_id: u64,
    stop_requested: bool,
}

impl Committer {
    pub(crate) fn new(
        engine: Arc<Engine>,
        receiver: mpsc::Receiver<Message>,
        journal: JournalWriter,
    ) -> Self {
        let buf_capacity = engine.config.commit_bytes_max.saturating_mul(2);
        Self {
            engine,
            receiver,
            journal,
            round: Vec::new(),
            round_bytes: 0,
            round_journal_bytes: 0,
            journal_buf: Vec::with_capacity(buf_capacity),
            writes: Vec::new(),
            touched: Vec::new(),
            undo: Vec::new(),
            sealed: Vec::new(),
            new_files: Vec::new(),
            round_start: journal::JournalPosition::default(),
            staged: Vec::new(),
            round_id: 0,
            stop_requested: false,
        }
    }

    /// The thread body. Exits on Stop, on shutdown, or when every sender is gone; before
    /// exiting it closes the queue and commits whatever is still in it.
    pub(crate) fn run(mut self) {
        while !self.stop_requested && !self.engine.stopping.load(Ordering::Acquire) {
            let Some(first) = self.receiver.blocking_recv() else {
                break;
            };
            self.accept(first);
            self.drain_queue();
            self.commit_round();
        }
        self.receiver.close();
        loop {
            self.drain_queue();
            if self.round.is_empty() {
                break;
            }
            self.commit_round();
        }
        tracing::debug!("committer stopped");
    }

    fn accept(&mut self, message: Message) {
        match message {
            Message::Append(request) => {
                self.round_bytes += request.records.len();
                let headers = request.batch_count * journal::ENTRY_HEADER_LEN;
                self.round_journal_bytes += (request.records.len() + headers) as u64;
                self.round.push(Pending {
                    request,
                    outcome: None,
                });
            }
            Message::Stop => self.stop_requested = true,
        }
    }

    /// Takes what is already queued, without waiting, up to the round's byte budget.
    fn drain_queue(&mut self) {
        while self.round_bytes < self.engine.config.commit_bytes_max {
            match self.receiver.try_recv() {
                Ok(message) => self.accept(message),
                Err(_) => break,
            }
        }
    }

    fn commit_round(&mut self) {
        if self.round.is_empty() {
            return;
        }
        self.round_id += 1;
        if self.engine.is_poisoned() {
            self.fail_round(None);
            return self.finish_round();
        }
        let now = now_ms();
        self.journal_buf.clear();
        // Entries are encoded with the journal file's sequence number, so the file must be
        // chosen before encoding.
        self.round_start = self.journal.position();
        if let Err(error) = self.journal.reserve(self.round_journal_bytes) {
            // Nothing of the round is placed yet; a refused roll leaves the writer on its
            // current file (a new round writes over an end marker that may be there).
            return self.fail_with_io("journal roll", error);
        }
        self.round_start = self.journal.position();
        for i in 0..self.round.len() {
            match self.apply(i, now) {
                Ok(info) => self.round[i].outcome = Some(Ok(info)),
                Err(Failure::Request(error)) => self.round[i].outcome = Some(Err(error)),
                Err(Failure::Io(what, error)) => return self.fail_with_io(what, error),
            }
        }
        if !self.journal_buf.is_empty() {
            match self.write_round() {
                Ok(position) => self.hand_off(position),
                Err((what, error)) => return self.fail_with_io(what, error),
            }
        }
        self.publish();
        self.finish_round();
    }

    /// Writes the round's segment bytes and its journal bytes (in parallel when the round is
    /// large), then syncs the journal. Returns the journal position after the round.
    fn write_round(&mut self) -> Result<journal::JournalPosition, (&'static str, io::Error)> {
        let (buf, writes, journal) = (&self.journal_buf, &self.writes, &mut self.journal);
        let sync = self.engine.config.fsync == FsyncPolicy::Always;
        let write_journal = |journal: &mut JournalWriter| -> io::Result<journal::JournalPosition> {
            let position = journal.append(buf)?;
            if sync {
                journal.sync()?;
            }
            Ok(position)
        };
        let (journal_result, segments_result) = std::thread::scope(|scope| {
            let helper = (buf.len() >= PARALLEL_SEGMENT_WRITE_BYTES_MIN)
                .then(|| {
                    std::thread::Builder::new()
                        .name("sluice-segwrite".into())
                        .spawn_scoped(scope, || write_segments(buf, writes))
                })
                .and_then(Result::ok);
            let journal_result = write_journal(journal);
            let segments_result = match helper {
                Some(handle) => handle
                    .join()
                    .unwrap_or_else(|_| Err(io::Error::other("segment writer panicked"))),
                None => write_segments(buf, writes),
            };
            (journal_result, segments_result)
        });
        segments_result.map_err(|e| ("segment write", e))?;
        let position = journal_result.map_err(|e| ("journal write or sync", e))?;
        let stats = &self.engine.stats;
        Stats::add(&stats.journal_bytes, self.journal_buf.len() as u64);
        if sync {
            Stats::add(&stats.journal_syncs, 1);
        }
        Ok(position)
    }

    /// Places one request's batches: checks idempotent producers, stamps offsets, encodes
    /// journal entries into the round buffer, reserves and indexes their segment space.
    /// Holds the partition's append lock for the request only; no I/O happens here except a
    /// segment roll.
    fn apply(&mut self, i: usize, now: i64) -> Result<AppendInfo, Failure> {
        let partition = Arc::clone(&self.round[i].request.partition);
        let records = self.round[i].request.records.clone();
        let _append = partition.append_lock.lock();
        if partition.is_deleted() {
            return Err(Failure::Request(LogError::UnknownPartition));
        }
        if partition.round_mark.swap(self.round_id, Ordering::Relaxed) != self.round_id {
            let active = partition.active();
            self.undo.push(RoundUndo {
                partition: Arc::clone(&partition),
                log_end: partition.log_end(),
                segment_count: partition.segment_count(),
                active_len: active.written_len(),
                active_next: active.next_offset(),
                active,
                producers: Vec::new(),
            });
            self.touched.push(Arc::clone(&partition));
        }
        let mut producers = None;
        if self.round[i].request.idempotent {
            let table = partition.producers.lock();
            let checked = table.check_request(&records, &mut self.staged);
            if let Some(original) = checked.map_err(Failure::Request)? {
                return Ok(self.duplicate_info(i, &partition, original));
            }
            producers = Some(table);
        }
        let config = partition.config();
        let first = partition.log_end();
        let mut next = first;
        for batch in BatchIter::new(records) {
            let batch = batch.map_err(Failure::Request)?;
            let header = BatchHeader::parse(&batch).map_err(Failure::Request)?;
            let last = Offset(next.0 + i64::from(header.last_offset_delta()));
            let active = self.active_for(&partition, batch.len() as u64, last, &config, now)?;
            let key = &partition.key;
            let seq = self.journal.seq();
            let source = journal::encode_entry(
                &mut self.journal_buf,
                seq,
                key.topic_id,
                key.partition,
                &batch,
                next,
            );
            let stamped =
                BatchHeader::parse(&self.journal_buf[source.clone()]).map_err(Failure::Request)?;
            let position = active.reserve(
                &stamped,
                source.len() as u64,
                config.index_interval_bytes,
                now,
            );
            if let Some(table) = producers.as_mut() {
                let undo = self
                    .undo
                    .iter_mut()
                    .rfind(|u| u.partition.uid == partition.uid)
                    .map(|u| &mut u.producers);
                debug_assert!(undo.is_some(), "a touched partition has its undo record");
                let mut scratch = Vec::new();
                table.record_header_undoable(&header, next, now, undo.unwrap_or(&mut scratch));
            }
            next = Offset(last.0 + 1);
            partition.set_log_end(next);
            self.writes.push(SegmentWrite {
                segment: active,
                source,
                position,
                next_offset: next,
            });
            Stats::add(&self.engine.stats.batches_appended, 1);
        }
        let log_append_time_ms = self.round[i].request.log_append_time_ms;
        let log_start_offset = partition.log_start();
        Ok(AppendInfo {
            base_offset: first,
            last_offset: Offset(next.0 - 1),
            log_append_time_ms,
            log_start_offset,
            duplicate: false,
        })
    }

    /// The answer to a retried batch: the offsets (and append time) it got when it was
    /// first written. Nothing is written for it.
    fn duplicate_info(
        &self,
        i: usize,
        partition: &Partition,
        original: BatchMetadata,
    ) -> AppendInfo {
        let log_append_time = self.round[i].request.log_append_time_ms >= 0;
        AppendInfo {
            base_offset: original.first_offset,
            last_offset: original.last_offset,
            log_append_time_ms: if log_append_time {
                original.timestamp_ms
            } else {
                -1
            },
            log_start_offset: partition.log_start(),
            duplicate: true,
        }
    }

    /// The active segment, rolled first if this batch must go to a new one.
    fn active_for(
        &mut self,
        partition: &Arc<Partition>,
        batch_len: u64,
        last: Offset,
        config: &crate::config::LogConfig,
        now: i64,
    ) -> Result<Arc<Segment>, Failure> {
        let active = partition.active();
        if Partition::roll_reason(&active, batch_len, last, config, now).is_none() {
            return Ok(active);
        }
        let sealed = partition
            .roll(self.engine.fs.as_ref())
            .map_err(|e| Failure::Io("segment roll", e))?;
        self.sealed.push(sealed);
        self.new_files.push(Arc::clone(partition));
        Ok(partition.active())
    }

    /// Tells the checkpointer what this round wrote: the journal position reached, the
    /// segments to sync, and each touched partition's recovery point.
    fn hand_off(&mut self, position: journal::JournalPosition) {
        let mut handoff = self.engine.handoff.lock();
        handoff.written_to = position;
        handoff.journal_bytes += self.journal_buf.len() as u64;
        for write in &self.writes {
            if !write.segment.dirty.swap(true, Ordering::AcqRel) {
                handoff.dirty.push(Arc::clone(&write.segment));
            }
        }
        for partition in &self.touched {
            let active = partition.active();
            let position = u32::try_from(active.written_len()).unwrap_or(u32::MAX);
            let point = RecoveryPoint {
                offset: partition.log_end(),
                segment_base: active.base_offset,
                position,
            };
            handoff.recovery_points.insert(partition.uid, point);
        }
        handoff.sealed.append(&mut self.sealed);
        handoff.new_files.append(&mut self.new_files);
        let since_checkpoint = handoff.journal_bytes - self.engine.checkpoints_journal_bytes();
        drop(handoff);
        if since_checkpoint >= self.engine.config.checkpoint_bytes {
            self.engine.checkpoint_signal.raise();
        }
    }

    /// After the sync: segment bytes first, then high watermarks, so a reader that sees a
    /// new high watermark finds its bytes committed. Each partition wakes only its own long
    /// polls; the global counter is not bumped, so a commit costs idle waiters elsewhere
    /// nothing.
    fn publish(&mut self) {
        for write in self.writes.drain(..) {
            write.segment.publish(write.end(), write.next_offset);
        }
        for partition in self.touched.drain(..) {
            partition.publish_high_watermark(partition.log_end());
        }
    }

    fn fail_with_io(&mut self, what: &'static str, error: io::Error) {
        if crate::fs::is_retryable(&error) {
            return self.refuse_round(what, error);
        }
        self.engine.poison(what, &error);
        self.fail_round(Some(error));
        self.writes.clear();
        self.touched.clear();
        self.undo.clear();
        self.finish_round();
    }

    /// The system refused a write or an open of this round (no space, no descriptor):
    /// undo the round and fail its waiters with that error; later rounds try again. If
    /// the undo itself fails the log is poisoned, since then the files may not match
    /// memory.
    fn refuse_round(&mut self, what: &'static str, error: io::Error) {
        self.writes.clear();
        self.touched.clear();
        let undone = self.undo_round();
        let errno = error.raw_os_error().unwrap_or(libc::ENOSPC);
        let file_limit = crate::fs::is_file_limit(&error);
        let mut first = Some(crate::engine::refused(what, error));
        // Every request not already failed on its own fails, duplicates included (their
        // original may be in this very round).
        for pending in &mut self.round {
            if matches!(pending.outcome, Some(Err(_))) {
                continue;
            }
            let again = io::Error::from_raw_os_error(errno);
            let error = first.take().unwrap_or(match file_limit {
                true => LogError::FileLimit(again),
                false => LogError::Io(again),
            });
            pending.outcome = Some(Err(error));
        }
        if let Err(error) = undone {
            self.engine.poison("undo of a refused commit round", &error);
        }
        self.finish_round();
    }

    /// Puts every partition the round touched back as it was before the round (durably:
    /// segments cut back and synced, rolled ones deleted and their directory synced), and
    /// cuts the journal back to where the round started. Each partition's append lock is
    /// held while it is put back, so no reader or other appender sees a half state.
    fn undo_round(&mut self) -> io::Result<()> {
        let fs = Arc::clone(&self.engine.fs);
        let mut result = self.journal.discard_round(self.round_start);
        for undo in self.undo.drain(..).rev() {
            let partition = &undo.partition;
            let _append = partition.append_lock.lock();
            let rolled = partition.truncate_segments(undo.segment_count);
            for segment in &rolled {
                result = result.and(segment.delete_files(fs.as_ref()));
            }
            if !rolled.is_empty() {
                // The unlinks must be durable: a rolled segment a crash brought back would
                // be taken for data by recovery (its batches pass their CRC).
                result = result.and(fs.sync_dir(&partition.dir));
            }
            result = result.and(undo.active.undo_to(undo.active_len, undo.active_next));
            partition.set_log_end(undo.log_end);
            if !undo.producers.is_empty() {
                partition.producers.lock().undo(undo.producers);
            }
            debug_assert!(partition.high_watermark() <= partition.log_end());
        }
        result
    }

    /// Every request of the round not already failed on its own gets an error: the first
    /// one the I/O error itself, the others `Poisoned`.
    fn fail_round(&mut self, mut error: Option<io::Error>) {
        for pending in &mut self.round {
            if matches!(pending.outcome, Some(Err(_))) {
                continue;
            }
            pending.outcome = Some(Err(match error.take() {
                Some(error) => LogError::Io(error),
                None => LogError::Poisoned,
            }));
        }
    }

    fn finish_round(&mut self) {
        let stats = &self.engine.stats;
        Stats::add(&stats.commit_rounds, 1);
        Stats::add(&stats.append_requests, self.round.len() as u64);
        for pending in self.round.drain(..) {
            let outcome = pending.outcome.unwrap_or(Err(LogError::Poisoned));
            // A dropped waiter (acks=0) is fine.
            let _ = pending.request.reply.send(outcome);
        }
        self.round_bytes = 0;
        self.round_journal_bytes = 0;
        self.sealed.clear();
        self.new_files.clear();
        self.undo.clear();
    }
}
