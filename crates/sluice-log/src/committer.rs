//! The committer thread: group commit of appends from every partition.
//!
//! One round: block for the first queued request, drain more without waiting up to
//! `commit_bytes_max`, then for each request stamp base offsets (the partition's log end),
//! roll the active segment if needed, lay the request out as one journal entry and place
//! its batches in the segment (indexed, with the journal position they will have). The
//! round is then written to the journal with one `pwritev` straight from the request
//! buffers (entry headers and 8-byte stamped base offsets are the only bytes the committer
//! produces: no record byte is copied in user space) and ONE `fdatasync` covers it. Then
//! the segments' committed lengths are published, the round is handed to the checkpointer,
//! the high watermarks are published and the waiters answered. A round costs one write and
//! one sync however many partitions it touched, and every byte reaches the disk once: the
//! journal is the segments' only copy.

//! Idempotent producers: a request whose batches carry a producer id is checked against
//! the partition's producer state (see `producer_state`) under the partition's append lock,
//! before any of its batches gets an offset, so the order of the checks is the order of the
//! offsets. A request is accepted or refused as a whole; a retry of a written batch is
//! answered with the original offsets and writes nothing. The state is updated as the
//! batches are placed, so a later request of the same round sees it.
//!
//! Transactions (docs/transactions.md §6): a marker request (one control batch built by
//! the log) is checked and applied to the producer state under the same locks, closing the
//! producer's open transaction; a verification request writes nothing and only marks the
//! partition as part of the producer's transaction, in queue order with markers and data.
//! After the sync each touched partition's last stable offset is published with its high
//! watermark.
//!
//! Guarantees: a waiter is answered Ok only after the sync covering its batches returned
//! (a duplicate's original was covered by this round's sync or an earlier one); a sync
//! error, or any other write error, poisons the log, fails every waiter of the round and
//! every later append, and nothing is retried.
//!
//! Refused writes are the exception: when the system refuses a write or an open with no
//! space or no file descriptor (`fs::is_retryable`) before the sync, nothing of the round
//! was acknowledged or published, so the round is undone instead: every touched
//! partition's log end, segments (rolled ones deleted durably, written ones cut back in
//! memory: their extents files hold only committed bytes), in-memory index and producer
//! state are put back as they were before the round, the journal is cut back to where the
//! round started (synced), and every waiter of the round gets the error
//! (KAFKA_STORAGE_ERROR). The undo needs no free space (cuts, unlinks, syncs), so it works
//! on the disk that just refused the round. The next round tries again, so appends resume
//! by themselves once space is freed, with nothing lost and nothing written twice.
//!
//! `Storage::Null` (calibration only): a round stamps offsets and answers every request
//! without writing, syncing, placing batches in segments or checking producers; the high
//! watermark is never published, so the log stays empty to readers (see `commit_round_null`).
//!
//! Steady state allocates nothing per request beyond the channel message: the round's
//! vectors, the slice list handed to `pwritev` and the producer undo records are reused.

use std::io::{self, IoSlice};
use std::ops::Range;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use sluice_record::layout::BATCH_LENGTH_AT;

use crate::append_queue::AppendReceiver;
use crate::batch::{self, BatchHeader};
use crate::checkpoint::RecoveryPoint;
use crate::completion::{Completion, Gating};
use crate::config::{FsyncPolicy, Storage};
use crate::engine::{Engine, Stats};
use crate::error::LogError;
use crate::journal::{self, EntryHeader, JournalWriter, ENTRY_HEADER_LEN};
use crate::log_limit::LogLimit;
use crate::manager::AppendInfo;
use crate::mutation::mutated;
use crate::partition::{Partition, SEGMENT_BYTES_MAX};
use crate::producer_state::{BatchMetadata, ProducerEntry, Room, Staged};
use crate::round_store::{Round, RoundEntry, RoundStore, RoundStoreError};
use crate::segment::{now_ms, Segment};
use crate::txn::ControlType;
use crate::types::{Offset, ProducerEpoch, ProducerId};

/// One line per 10 s for rolls refused by the per-topic share (a client keeps retrying).
static TOPIC_SHARE_LOG: LogLimit = LogLimit::new(10_000);

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
    /// A transaction marker or verification from the coordinator (not client data).
    pub(crate) txn: Option<TxnOp>,
    /// Ties this request to others queued with it (see [`crate::AppendGate`]).
    pub(crate) gate: Option<Gating>,
    pub(crate) reply: Completion,
    /// When `append` queued it (the queue-wait histogram).
    pub(crate) queued_at: Instant,
}

/// What a request does for a transaction (see the module header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxnOp {
    /// `records` is one marker batch of this type (built by `txn::marker_batch`).
    Marker(ControlType),
    /// `records` is empty: the partition joins the producer's transaction at `epoch`;
    /// `epoch_bump`: a Transactions V2 transaction, whose epoch is its own, so its first
    /// batch here starts at sequence 0.
    Verify {
        producer_id: ProducerId,
        epoch: ProducerEpoch,
        epoch_bump: bool,
    },
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

/// The producer id and epoch a marker batch carries.
fn marker_producer(header: &BatchHeader<'_>) -> (ProducerId, ProducerEpoch) {
    (header.producer_id(), header.producer_epoch())
}

/// Gives an empty slice list's allocation another lifetime. `into_iter().map().collect()`
/// between types of one layout collects in place (std's in-place iteration), so the round's
/// slice list reuses one allocation instead of making one per round.
fn recycle_slices<'a, 'b>(slices: Vec<IoSlice<'a>>) -> Vec<IoSlice<'b>> {
    debug_assert!(slices.is_empty());
    slices.into_iter().map(|_| IoSlice::new(&[])).collect()
}

/// A duration in whole nanoseconds, for the histograms (saturating: 584 years).
fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One request on the no-op log: offsets stamped from the log end, nothing stored.
fn null_append(request: &AppendRequest) -> Result<AppendInfo, LogError> {
    let partition = &request.partition;
    let _append = partition.append_lock.lock();
    if partition.is_deleted() {
        return Err(LogError::UnknownPartition);
    }
    let first = partition.log_end();
    let mut next = first;
    let mut at = 0usize;
    while at < request.records.len() {
        let len = batch::batch_len_within(&request.records[at..]).ok_or(LogError::CorruptBatch(
            "batch length is invalid or exceeds the buffer",
        ))?;
        let header = BatchHeader::parse(&request.records[at..at + len])?;
        next = Offset(next.0 + i64::from(header.last_offset_delta()) + 1);
        at += len;
    }
    assert!(next > first, "a request holds at least one batch");
    partition.set_log_end(next);
    assert!(partition.high_watermark() <= partition.log_end());
    Ok(AppendInfo {
        base_offset: first,
        last_offset: Offset(next.0 - 1),
        log_append_time_ms: request.log_append_time_ms,
        log_start_offset: partition.log_start(),
        duplicate: false,
    })
}

/// The bytes padding entries are made of.
static ZEROS: [u8; journal::PADDING_BYTES_MAX] = [0; journal::PADDING_BYTES_MAX];

/// Producer undo vectors kept for reuse: one per partition a round touches, at most.
const UNDO_POOL_MAX: usize = 4096;

/// One slice of the round as written to the journal, in order.
#[derive(Debug, Clone)]
enum Piece {
    /// `Committer::headers[i]`: an entry header.
    Header(usize),
    /// `Committer::stamps[i]`: a batch's stamped base offset (its first 8 bytes).
    Stamp(usize),
    /// This many zero bytes: the body of the padding entry that ends the round.
    Zeros(usize),
    /// Bytes `range` of request `i`'s records: a batch after its first 8 bytes.
    Body(usize, Range<usize>),
}

/// The entry being built for the request being applied.
#[derive(Debug)]
struct OpenEntry {
    header: EntryHeader,
    slot: usize,
    /// Where the entry starts in the round, its partition, and its first and last offset
    /// (for the round store's record of the round).
    position: u64,
    key: (crate::types::TopicId, i32),
    base: Option<Offset>,
    last: Offset,
}

/// A segment placed into this round: published after the sync.
#[derive(Debug)]
struct SegmentPublish {
    segment: Arc<Segment>,
    len: u64,
    next_offset: Offset,
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
    receiver: AppendReceiver<Message>,
    journal: JournalWriter,
    round: Vec<Pending>,
    round_bytes: usize,
    /// Journal bytes the round can take at most (records plus one entry header per request).
    round_journal_bytes: u64,
    /// The round as laid out in the journal: pieces referring to `headers`, `stamps` and
    /// the requests' own buffers, written with one `pwritev` (no copy in user space).
    pieces: Vec<Piece>,
    /// The allocation of the slice list handed to `pwritev`, kept between rounds.
    slices: Vec<IoSlice<'static>>,
    headers: Vec<[u8; ENTRY_HEADER_LEN]>,
    stamps: Vec<[u8; 8]>,
    /// Journal bytes laid out so far in this round.
    round_len: u64,
    entry: Option<OpenEntry>,
    /// The round's entries with batches, handed to the round store.
    entries: Vec<RoundEntry>,
    /// Where rounds become durable when the journal is a cache (`storage.backend=object`);
    /// `None`: the journal's `fdatasync` makes them durable.
    round_store: Option<Box<dyn RoundStore>>,
    publishes: Vec<SegmentPublish>,
    touched: Vec<Arc<Partition>>,
    /// One per touched partition, in the order of `touched`.
    undo: Vec<RoundUndo>,
    /// Emptied `RoundUndo::producers` vectors, reused so a round allocates none.
    undo_pool: Vec<Vec<(ProducerId, Option<ProducerEntry>)>>,
    sealed: Vec<Arc<Segment>>,
    new_files: Vec<Arc<Partition>>,
    /// The journal position before the current round (after any roll), where a refused
    /// round cuts the journal back to.
    round_start: journal::JournalPosition,
    /// Scratch for the producer checks of one request (reused: no allocation per request).
    staged: Vec<Staged>,
    round_id: u64,
    /// When the current round started (the round-duration histogram).
    round_started: Instant,
    /// A round was refused for lack of space (ENOSPC, EDQUOT) since the journal file was
    /// last reused in place: the next reuse cuts the file back to free its blocks.
    space_short: bool,
    stop_requested: bool,
}

impl Committer {
    pub(crate) fn new(
        engine: Arc<Engine>,
        receiver: AppendReceiver<Message>,
        journal: JournalWriter,
    ) -> Self {
        Self {
            engine,
            receiver,
            journal,
            round: Vec::new(),
            round_bytes: 0,
            round_journal_bytes: 0,
            pieces: Vec::new(),
            slices: Vec::new(),
            headers: Vec::new(),
            stamps: Vec::new(),
            round_len: 0,
            entry: None,
            entries: Vec::new(),
            round_store: None,
            publishes: Vec::new(),
            touched: Vec::new(),
            undo: Vec::new(),
            undo_pool: Vec::new(),
            sealed: Vec::new(),
            new_files: Vec::new(),
            round_start: journal::JournalPosition::default(),
            staged: Vec::new(),
            round_id: 0,
            round_started: Instant::now(),
            space_short: false,
            stop_requested: false,
        }
    }

    /// Rounds become durable in `store` instead of by the journal's `fdatasync`.
    pub(crate) fn set_round_store(&mut self, store: Box<dyn RoundStore>) {
        self.round_store = Some(store);
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
        if !self.engine.is_poisoned() {
            if let Err(error) = self.journal.trim_to_written() {
                tracing::warn!(%error, "could not cut the journal file back to its last round");
            }
        }
        tracing::debug!("committer stopped");
    }

    fn accept(&mut self, message: Message) {
        match message {
            Message::Append(request) => {
                let waited = request.queued_at.elapsed();
                self.engine
                    .stats
                    .append_queue_wait_ns
                    .observe(nanos(waited));
                self.round_bytes += request.records.len();
                self.round_journal_bytes += (request.records.len() + ENTRY_HEADER_LEN) as u64;
                self.pieces.reserve(1 + 2 * request.batch_count);
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
                Some(message) => self.accept(message),
                None => break,
            }
        }
    }

    fn commit_round(&mut self) {
        if self.round.is_empty() {
            return;
        }
        self.assert_round_empty();
        self.round_started = Instant::now();
        self.round_id += 1;
        if self.engine.is_poisoned() {
            self.fail_round(None);
            return self.finish_round();
        }
        if self.engine.config.storage == Storage::Null {
            return self.commit_round_null();
        }
        let now = now_ms();
        // Segments deleted since the last round may have left nothing pointing into the
        // current journal file: it is reused in place, and cut back to free its space if
        // a round was refused for lack of it (on a full disk, the only way DeleteRecords
        // can make room).
        match self.journal.reuse_if_unreferenced(self.space_short) {
            Err(error) if !crate::fs::is_retryable(&error) => {
                return self.fail_with_io("journal file reuse", error);
            }
            Err(error) => tracing::debug!(%error, "journal file not reused yet"),
            Ok(true) => self.space_short = false,
            Ok(false) => {}
        }
        // Entries are encoded with the journal file's sequence number, so the file must be
        // chosen before encoding.
        self.round_start = self.journal.position();
        let with_padding = self.round_journal_bytes + journal::PADDING_BYTES_MAX as u64;
        if let Err(error) = self.journal.reserve(with_padding) {
            // Nothing of the round is placed yet; a refused roll leaves the writer on its
            // current file (a new round writes over an end marker that may be there).
            return self.fail_with_io("journal roll", error);
        }
        self.round_start = self.journal.position();
        for i in 0..self.round.len() {
            let applied = self.apply(i, now);
            self.close_entry();
            if let Some(Gating::Sets(gate)) = &self.round[i].request.gate {
                match applied {
                    Ok(_) => gate.pass(),
                    Err(_) => gate.fail(),
                }
            }
            match applied {
                Ok(info) => self.round[i].outcome = Some(Ok(info)),
                Err(Failure::Request(error)) => self.round[i].outcome = Some(Err(error)),
                Err(Failure::Io(what, error)) => return self.fail_with_io(what, error),
            }
        }
        if self.round_len > 0 {
            self.pad_round();
            match self.write_round() {
                Ok(position) => {
                    // The journal is where the round's layout said it would be: every
                    // extent placed in this round points at the bytes just written.
                    assert_eq!(
                        position.seq, self.round_start.seq,
                        "a round never spans files"
                    );
                    assert_eq!(position.offset, self.round_start.offset + self.round_len);
                    if let Err(error) = self.commit_to_store() {
                        return self.fail_store(error);
                    }
                    // Segment lengths first: the checkpointer may persist extents up to
                    // them as soon as it sees the handoff.
                    if mutated!("commit.segment_lengths_after_handoff") {
                        self.hand_off(position);
                        self.publish_segments();
                    } else {
                        self.publish_segments();
                        self.hand_off(position);
                    }
                }
                Err((what, error)) => return self.fail_with_io(what, error),
            }
        }
        self.publish_high_watermarks();
        self.finish_round();
        if mutated!("commit.ack_before_journal_sync") {
            // The sync `write_round` skipped, after the answers (see `mutation`).
            let _ = self.journal.sync();
        }
    }

    /// The no-op log's round (`Storage::Null`): each request's batches get offsets from the
    /// partition's log end, as on disk, and the request is answered at once. Nothing is laid
    /// out, written, synced, indexed or checked against producer state, and the high
    /// watermark stays where it is, so readers see an empty log (no data to fetch, nothing
    /// that could be read from a file that was never written).
    fn commit_round_null(&mut self) {
        for pending in &mut self.round {
            pending.outcome = Some(null_append(&pending.request));
        }
        self.finish_round();
    }

    /// Writes the round to the journal straight from the request buffers (one `pwritev`
    /// of entry headers, stamped base offsets and batch bodies), then syncs it. Returns the
    /// journal position after the round.
    fn write_round(&mut self) -> Result<journal::JournalPosition, (&'static str, io::Error)> {
        // With a round store the journal is a cache: the store makes the round durable.
        let sync = self.engine.config.fsync == FsyncPolicy::Always && self.round_store.is_none();
        let (headers, stamps, round) = (&self.headers, &self.stamps, &self.round);
        let mut slices = recycle_slices(std::mem::take(&mut self.slices));
        slices.extend(self.pieces.iter().map(|piece| match piece {
            Piece::Header(k) => IoSlice::new(&headers[*k]),
            Piece::Stamp(k) => IoSlice::new(&stamps[*k]),
            Piece::Zeros(n) => IoSlice::new(&ZEROS[..*n]),
            Piece::Body(i, range) => IoSlice::new(&round[*i].request.records[range.clone()]),
        }));
        debug_assert_eq!(
            slices.iter().map(|s| s.len() as u64).sum::<u64>(),
            self.round_len
        );
        let started = Instant::now();
        let written = self.journal.append_vectored(&mut slices, self.round_len);
        slices.clear();
        self.slices = recycle_slices(slices);
        let position = written.map_err(|e| ("journal write", e))?;
        let stats = &self.engine.stats;
        stats.journal_write_ns.observe(nanos(started.elapsed()));
        if sync && !mutated!("commit.ack_before_journal_sync") {
            let started = Instant::now();
            self.journal.sync().map_err(|e| ("journal sync", e))?;
            stats.journal_sync_ns.observe(nanos(started.elapsed()));
        }
        Stats::add(&stats.journal_bytes, self.round_len);
        stats.round_bytes.observe(self.round_len);
        if sync {
            Stats::add(&stats.journal_syncs, 1);
        }
        Ok(position)
    }

    /// Ends the round on a page boundary with a padding entry. The next round then starts on
    /// a fresh page instead of rewriting the one this round's sync wrote last: each page
    /// of the journal reaches the disk once (without it, a round of 30 KiB wrote about
    /// 13 % more than its bytes).
    fn pad_round(&mut self) {
        let end = self.round_start.offset + self.round_len;
        if let Some((header, zeros)) = journal::padding_after(self.journal.seq(), end) {
            self.headers.push(header);
            self.pieces.push(Piece::Header(self.headers.len() - 1));
            self.pieces.push(Piece::Zeros(zeros));
            self.round_len += (ENTRY_HEADER_LEN + zeros) as u64;
            assert_eq!(
                (end + (ENTRY_HEADER_LEN + zeros) as u64) % journal::PAGE_BYTES,
                0,
                "a round ends on a page boundary"
            );
        }
    }

    /// Starts an entry for request `i`'s partition if none is open.
    fn open_entry(&mut self, partition: &Partition) {
        if self.entry.is_some() {
            return;
        }
        let key = &partition.key;
        let header = EntryHeader::begin(self.journal.seq(), key.topic_id, key.partition);
        let slot = self.headers.len();
        self.headers.push([0u8; ENTRY_HEADER_LEN]);
        self.pieces.push(Piece::Header(slot));
        let position = self.round_len;
        self.round_len += ENTRY_HEADER_LEN as u64;
        self.entry = Some(OpenEntry {
            header,
            slot,
            position,
            key: (key.topic_id, key.partition),
            base: None,
            last: Offset(0),
        });
    }

    /// Encodes the open entry's header now that its batches are known.
    fn close_entry(&mut self) {
        if let Some(entry) = self.entry.take() {
            debug_assert!(!entry.header.is_empty(), "an entry is opened for a batch");
            self.headers[entry.slot] = entry.header.encode();
            if let Some(base_offset) = entry.base {
                self.entries.push(RoundEntry {
                    topic_id: entry.key.0,
                    partition: entry.key.1,
                    base_offset,
                    last_offset: entry.last,
                    position: entry.position,
                    size_bytes: (self.round_len - entry.position) as u32,
                });
            }
        }
    }

    /// Lays out one batch (`records[range]`, to be stamped with `base`) at the end of the
    /// round and returns its position in the journal file.
    fn lay_out_batch(
        &mut self,
        i: usize,
        records: &Bytes,
        range: Range<usize>,
        base: Offset,
        last: Offset,
    ) -> u64 {
        assert!(range.len() >= batch::HEADER_LEN && range.end <= records.len());
        assert!(base.0 >= 0, "offsets are never negative");
        let stamp = base.0.to_be_bytes();
        let entry = self.entry.as_mut().expect("an entry is open");
        entry.base.get_or_insert(base);
        entry.last = last;
        entry.header.add_batch(&stamp, &records[range.clone()]);
        let position = self.round_start.offset + self.round_len;
        self.stamps.push(stamp);
        self.pieces.push(Piece::Stamp(self.stamps.len() - 1));
        // The body follows the stamped base offset.
        let body = range.start + BATCH_LENGTH_AT..range.end;
        self.pieces.push(Piece::Body(i, body));
        self.round_len += range.len() as u64;
        position
    }

    /// Places one request's batches: checks idempotent producers, stamps offsets, lays the
    /// request out as one journal entry of the round (slices of its own buffer), places and
    /// indexes the batches in their segment with the journal positions they will have.
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
                producers: self.undo_pool.pop().unwrap_or_default(),
            });
            self.touched.push(Arc::clone(&partition));
        }
        let txn = self.round[i].request.txn;
        if let Some(TxnOp::Verify {
            producer_id,
            epoch,
            epoch_bump,
        }) = txn
        {
            if let Some(Gating::Requires(gate)) = &self.round[i].request.gate {
                if !gate.passed() {
                    // The coordinator's record of this partition was not written: joining
                    // the transaction here would leave it without a marker forever.
                    return Err(Failure::Request(LogError::InvalidTxnState {
                        producer_id,
                        why: "the coordinator's record of the transaction was not written",
                        not_in_transaction: true,
                    }));
                }
            }
            let verification = (producer_id, epoch, epoch_bump);
            return self.apply_verify(&partition, verification, now);
        }
        let mut producers = None;
        if self.round[i].request.idempotent {
            let table = partition.producers.lock();
            let eviction_idle_ms = self.engine.config.producer_eviction_idle_ms;
            let checked = table.check_request(&records, &mut self.staged, eviction_idle_ms);
            if let Some(original) = checked.map_err(Failure::Request)? {
                return Ok(self.duplicate_info(i, &partition, original));
            }
            producers = Some(table);
        } else if let Some(TxnOp::Marker(_)) = txn {
            let table = partition.producers.lock();
            let header = BatchHeader::parse(&records).map_err(|e| Failure::Request(e.into()))?;
            let (producer_id, epoch) = marker_producer(&header);
            table
                .check_marker(producer_id, epoch)
                .map_err(Failure::Request)?;
            producers = Some(table);
        }
        let config = partition.config();
        self.check_topic_share(&partition, &records, &config, now)?;
        // Validated on the caller's thread (a marker: built by the log): whole batches of
        // at least one record each, `batch_count` of them.
        assert!(
            !records.is_empty(),
            "a data or marker request holds a batch"
        );
        let first = partition.log_end();
        assert!(partition.high_watermark() <= first);
        let mut next = first;
        let mut at = 0usize;
        let mut placed = 0usize;
        while at < records.len() {
            let len = batch::batch_len_within(&records[at..]).ok_or(Failure::Request(
                LogError::CorruptBatch("batch length is invalid or exceeds the buffer"),
            ))?;
            let range = at..at + len;
            at += len;
            let header = BatchHeader::parse(&records[range.clone()])
                .map_err(|e| Failure::Request(e.into()))?;
            assert!(
                header.last_offset_delta() >= 0,
                "validated: one offset per record"
            );
            let last = Offset(next.0 + i64::from(header.last_offset_delta()));
            let active = self.active_for(&partition, len as u64, last, &config, now)?;
            assert_eq!(
                active.next_offset(),
                next,
                "the active segment ends at the log end"
            );
            self.open_entry(&partition);
            let file_position = self.lay_out_batch(i, &records, range, next, last);
            active.place(
                next,
                &header,
                self.journal.current(),
                file_position,
                len as u64,
                config.index_interval_bytes,
                now,
            );
            if let Some(table) = producers.as_mut() {
                let undo = self
                    .undo
                    .iter_mut()
                    .rfind(|u| u.partition.uid == partition.uid);
                assert!(undo.is_some(), "a touched partition has its undo record");
                let mut scratch = Vec::new();
                match (txn, undo) {
                    (Some(TxnOp::Marker(control)), Some(undo)) => {
                        let (producer_id, epoch) = marker_producer(&header);
                        let saved = &mut undo.producers;
                        table.record_marker_undoable(producer_id, epoch, control, next, now, saved);
                    }
                    (_, undo) => {
                        let saved = undo.map_or(&mut scratch, |u| &mut u.producers);
                        table.record_header_undoable(&header, next, now, saved);
                    }
                }
            }
            next = Offset(last.0 + 1);
            partition.set_log_end(next);
            self.note_publish(active, next);
            Stats::add(&self.engine.stats.batches_appended, 1);
            placed += 1;
        }
        assert_eq!(
            placed, self.round[i].request.batch_count,
            "every batch placed once"
        );
        assert!(next > first && partition.log_end() == next);
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

    /// A verification (docs/transactions.md §6.1): recorded in the producer state, saved
    /// for undo like a batch, nothing written. Answered with the log end as its offset.
    fn apply_verify(
        &mut self,
        partition: &Arc<Partition>,
        (producer_id, epoch, epoch_bump): (ProducerId, ProducerEpoch, bool),
        now: i64,
    ) -> Result<AppendInfo, Failure> {
        let undo = self
            .undo
            .iter_mut()
            .rfind(|u| u.partition.uid == partition.uid)
            .expect("a touched partition has its undo record");
        let room = Room::new(now, self.engine.config.producer_eviction_idle_ms);
        let mut table = partition.producers.lock();
        table
            .verify_txn((producer_id, epoch, epoch_bump), room, &mut undo.producers)
            .map_err(Failure::Request)?;
        let log_end = partition.log_end();
        Ok(AppendInfo {
            base_offset: log_end,
            last_offset: Offset(log_end.0 - 1),
            log_append_time_ms: -1,
            log_start_offset: partition.log_start(),
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

    /// Refuses a request that may roll a segment of a topic holding its share of the
    /// segment-file budget (`segment_files_per_topic_max`), before anything of it is placed
    /// (a refusal in the middle of a request would leave its first batches written). "May
    /// roll" takes the whole request as one batch; a request then rolls at most once for
    /// time and, since any two neighbouring segments hold more than `segment.bytes`
    /// together, at most twice per `segment.bytes` of its size. The topic's files are
    /// counted only when a roll is possible: about once per segment.
    fn check_topic_share(
        &self,
        partition: &Partition,
        records: &Bytes,
        config: &crate::config::LogConfig,
        now: i64,
    ) -> Result<(), Failure> {
        if self.engine.config.segment_files_per_topic_max == usize::MAX {
            return Ok(());
        }
        let active = partition.active();
        let bytes = records.len() as u64;
        let segment_bytes = config.segment_bytes.clamp(1, SEGMENT_BYTES_MAX);
        // Offsets: a record takes at least one byte, so the request ends before this.
        let last = Offset(partition.log_end().0.saturating_add(bytes as i64));
        let may_roll = match active.is_empty() {
            // The first batch never rolls an empty segment; later ones may, past its size.
            true => bytes > segment_bytes,
            false => Partition::roll_reason(&active, bytes, last, config, now).is_some(),
        };
        let rolls = 1 + 2 * (bytes / segment_bytes);
        if !may_roll || self.engine.topic_may_roll(&partition.key.topic, rolls) {
            return Ok(());
        }
        let share = self.engine.config.segment_files_per_topic_max;
        if let Some(suppressed) = TOPIC_SHARE_LOG.check() {
            tracing::warn!(
                suppressed,
                topic = %partition.key.topic,
                partition = partition.key.partition,
                share,
                "segment roll refused: the topic holds its share of the segment-file budget; DeleteRecords, retention or fewer, larger segments free it"
            );
        }
        let why = format!(
            "topic {} holds its share of segment files ({share})",
            partition.key.topic
        );
        Err(Failure::Request(LogError::FileLimit(io::Error::other(why))))
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
        handoff.journal_bytes += self.round_len;
        for publish in &self.publishes {
            if !publish.segment.dirty.swap(true, Ordering::AcqRel) {
                handoff.dirty.push(Arc::clone(&publish.segment));
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

    /// Remembers that `segment` now ends (in this round) at its written length and at
    /// offset `next_offset`, for publishing after the sync.
    fn note_publish(&mut self, segment: Arc<Segment>, next_offset: Offset) {
        let len = segment.written_len();
        match self.publishes.last_mut() {
            Some(last) if Arc::ptr_eq(&last.segment, &segment) => {
                last.len = len;
                last.next_offset = next_offset;
            }
            _ => self.publishes.push(SegmentPublish {
                segment,
                len,
                next_offset,
            }),
        }
    }

    /// After the sync, first: each segment's committed length, so readers may read the
    /// bytes and the checkpointer may persist their extents.
    fn publish_segments(&mut self) {
        for publish in &self.publishes {
            publish.segment.publish(publish.len, publish.next_offset);
        }
    }

    /// Then the high watermarks, so a reader that sees a new high watermark finds its bytes
    /// committed. Each partition wakes only its own long polls; the global counter is not
    /// bumped, so a commit costs idle waiters elsewhere nothing.
    fn publish_high_watermarks(&mut self) {
        self.publishes.clear();
        for partition in self.touched.drain(..) {
            // Only this thread changes the log end and the open transactions.
            let first_unstable = partition.producers.lock().first_unstable_offset();
            let (before, log_end) = (partition.high_watermark(), partition.log_end());
            assert!(
                before <= log_end,
                "the high watermark never passes the log end"
            );
            partition.publish_watermarks(log_end, first_unstable);
        }
    }

    /// Hands the round just written to the journal to the round store, if there is one:
    /// the same slices (rebuilt: the write consumed them) and the round's entries.
    fn commit_to_store(&mut self) -> Result<(), RoundStoreError> {
        let Some(store) = self.round_store.as_mut() else {
            return Ok(());
        };
        let (headers, stamps, round) = (&self.headers, &self.stamps, &self.round);
        let mut slices = recycle_slices(std::mem::take(&mut self.slices));
        slices.extend(self.pieces.iter().map(|piece| match piece {
            Piece::Header(k) => IoSlice::new(&headers[*k]),
            Piece::Stamp(k) => IoSlice::new(&stamps[*k]),
            Piece::Zeros(n) => IoSlice::new(&ZEROS[..*n]),
            Piece::Body(i, range) => IoSlice::new(&round[*i].request.records[range.clone()]),
        }));
        let started = Instant::now();
        let committed = store.commit_round(&Round {
            journal_seq: self.round_start.seq,
            journal_position: self.round_start.offset,
            data: &slices,
            len: self.round_len,
            entries: &self.entries,
        });
        slices.clear();
        self.slices = recycle_slices(slices);
        self.engine
            .stats
            .journal_sync_ns
            .observe(nanos(started.elapsed()));
        committed
    }

    /// The round store did not commit the round. Refused: the round is undone as a round
    /// the disk refused is, and its requests get a retriable error; the next round tries
    /// again. Fatal (fenced, or the outcome unknown): the log is poisoned.
    fn fail_store(&mut self, error: RoundStoreError) {
        let io_error = io::Error::other(error.to_string());
        let RoundStoreError::Refused(_) = &error else {
            self.engine.poison("round store commit", &io_error);
            self.fail_round(Some(io_error));
            self.publishes.clear();
            self.touched.clear();
            self.recycle_undo();
            return self.finish_round();
        };
        self.publishes.clear();
        self.touched.clear();
        match self.undo_round() {
            Ok(()) => crate::engine::log_refused_round("round store commit", &io_error),
            Err((step, undo_error)) => {
                self.engine
                    .poison_refused_undo("round store commit", &io_error, step, &undo_error);
            }
        }
        for pending in &mut self.round {
            if !matches!(pending.outcome, Some(Err(_))) {
                pending.outcome = Some(Err(LogError::Io(io::Error::other(error.to_string()))));
            }
        }
        self.finish_round();
    }

    fn fail_with_io(&mut self, what: &'static str, error: io::Error) {
        if crate::fs::is_retryable(&error) {
            return self.refuse_round(what, error);
        }
        self.engine.poison(what, &error);
        self.fail_round(Some(error));
        self.publishes.clear();
        self.touched.clear();
        self.recycle_undo();
        self.finish_round();
    }

    /// The system refused a write or an open of this round (no space, no descriptor):
    /// undo the round and fail its waiters with that error; later rounds try again. If
    /// the undo itself fails the log is poisoned, since then the files may not match
    /// memory. Either way one line says which it was.
    fn refuse_round(&mut self, what: &'static str, error: io::Error) {
        self.publishes.clear();
        self.touched.clear();
        let undone = self.undo_round();
        let errno = error.raw_os_error().unwrap_or(libc::ENOSPC);
        if matches!(errno, libc::ENOSPC | libc::EDQUOT) {
            self.space_short = true;
            if let Err(error) = self.journal.release_free_file() {
                tracing::warn!(%error, "could not delete a recycled journal file");
            }
        }
        let file_limit = crate::fs::is_file_limit(&error);
        match &undone {
            Ok(()) => crate::engine::log_refused_round(what, &error),
            Err((step, undo_error)) => {
                self.engine
                    .poison_refused_undo(what, &error, step, undo_error);
            }
        }
        let mut first = Some(crate::engine::refused_error(error));
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
        self.finish_round();
    }

    /// Puts every partition the round touched back as it was before the round, and cuts
    /// the journal back to where the round started (synced). Rolled segments are deleted
    /// and their directory synced. Each partition's append lock is held while it is put
    /// back, so no reader or other appender sees a half state. Memory is put back even
    /// when a step on disk fails; the first failure is returned with the step's name.
    ///
    /// None of it needs free space: a cut, an unlink, syncs of them, and memory. (It runs
    /// on a disk that just refused a write.)
    fn undo_round(&mut self) -> Result<(), (&'static str, io::Error)> {
        let fs = Arc::clone(&self.engine.fs);
        let mut result = self
            .journal
            .discard_round(self.round_start)
            .map_err(|e| ("journal cut", e));
        let mut undos = std::mem::take(&mut self.undo);
        for undo in undos.iter_mut().rev() {
            let partition = &undo.partition;
            let _append = partition.append_lock.lock();
            // Nothing of the round was published: the log end only goes back, and no
            // reader was shown an offset the undo takes away.
            assert!(undo.log_end <= partition.log_end());
            assert!(partition.high_watermark() <= undo.log_end);
            let rolled = partition.truncate_segments(undo.segment_count);
            for segment in &rolled {
                let deleted = segment.delete_files(fs.as_ref());
                result = result.and(deleted.map_err(|e| ("delete of a rolled segment", e)));
            }
            if !rolled.is_empty() && !mutated!("commit.undo_rolled_dir_unsynced") {
                // The unlinks must be durable: a rolled segment a crash brought back would
                // be taken for data by recovery (its batches pass their CRC).
                let synced = fs.sync_dir(&partition.dir);
                result = result.and(synced.map_err(|e| ("partition directory sync", e)));
            }
            let cut = undo.active.undo_to(undo.active_len, undo.active_next);
            result = result.and(cut.map_err(|e| ("segment cut", e)));
            partition.set_log_end(undo.log_end);
            if !undo.producers.is_empty() {
                // The round's aborted transactions are those whose marker it placed: at or
                // after the log end it started from.
                partition
                    .producers
                    .lock()
                    .undo(&mut undo.producers, undo.log_end);
            }
            assert!(partition.high_watermark() <= partition.log_end());
        }
        self.undo = undos;
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

    /// Empties the round's undo records, keeping their producer vectors for reuse.
    fn recycle_undo(&mut self) {
        for mut undo in self.undo.drain(..) {
            undo.producers.clear();
            if self.undo_pool.len() < UNDO_POOL_MAX {
                self.undo_pool.push(undo.producers);
            }
        }
    }

    /// Between rounds nothing of the last one is left: a round starts from empty lists, so
    /// no slice, undo record or publish of one round leaks into the next.
    fn assert_round_empty(&self) {
        assert!(self.pieces.is_empty() && self.headers.is_empty() && self.stamps.is_empty());
        assert!(self.round_len == 0 && self.entry.is_none());
        assert!(self.publishes.is_empty() && self.touched.is_empty() && self.undo.is_empty());
        assert!(self.sealed.is_empty() && self.new_files.is_empty());
    }

    fn finish_round(&mut self) {
        let stats = &self.engine.stats;
        Stats::add(&stats.commit_rounds, 1);
        Stats::add(&stats.append_requests, self.round.len() as u64);
        stats.round_requests.observe(self.round.len() as u64);
        for pending in self.round.drain(..) {
            let outcome = pending.outcome.unwrap_or(Err(LogError::Poisoned));
            if let (Some(Gating::Sets(gate)), Err(_)) = (&pending.request.gate, &outcome) {
                // Before the answer: a gated append of a later round must see it.
                gate.fail();
            }
            pending.request.reply.send(outcome);
        }
        stats.round_ns.observe(nanos(self.round_started.elapsed()));
        self.round_bytes = 0;
        self.round_journal_bytes = 0;
        self.entry = None;
        self.pieces.clear();
        self.headers.clear();
        self.stamps.clear();
        self.round_len = 0;
        self.entries.clear();
        self.sealed.clear();
        self.new_files.clear();
        self.recycle_undo();
    }
}
