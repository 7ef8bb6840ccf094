//! Start-up with a round store: the local journal is made to agree with the store before
//! recovery reads it (`docs/object-storage.md` §4).
//!
//! With a round store the journal is a cache that is never synced on the produce path, so
//! after a crash it may lack rounds the store committed (an OS crash lost them, or the data
//! dir is new), and it may end with one round the store never committed (written locally,
//! then the process died before the commit; at most one, since the committer writes a
//! round only after the previous one committed or was undone). Steps:
//! 1. every committed round from the checkpoint's journal position on (the checkpointer
//!    syncs the journal before it moves that position, so the bytes before it are on disk)
//!    is read locally and checked against the CRC-32C the store holds; a missing or
//!    different round is fetched from the store and written at its journal position (the
//!    file is created with its header if it is missing), and each file the writer had left
//!    for a later one gets its end marker again;
//! 2. the journal is cut after the last committed round: the rest of that file and every
//!    later file held only bytes the store never committed;
//! 3. what was written is synced, then recovery runs as usual.
//!
//! Guarantees: after it, the journal from the checkpoint's position on holds exactly the
//! committed rounds, so recovery neither loses an acknowledged round nor replays one that
//! was never acknowledged.

use std::io;
use std::path::Path;

use crate::checkpoint::{self, Checkpoint};
use crate::engine::Engine;
use crate::error::LogError;
use crate::fs::{self, Fs, FsFile, OpenMode};
use crate::journal::{self, JournalPosition};
use crate::mutation::mutated;
use crate::round_store::{CommittedRound, RoundStore, RoundStoreError};

/// What the reconciliation did, for the recovery report.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    /// Committed rounds checked against the local journal.
    pub rounds_checked: u64,
    /// Rounds fetched from the store and written locally.
    pub rounds_restored: u64,
    /// Bytes fetched.
    pub bytes_restored: u64,
    /// Journal files cut or removed because they held uncommitted bytes.
    pub files_cut: u64,
}

fn store_error(error: RoundStoreError) -> LogError {
    LogError::Io(io::Error::other(error.to_string()))
}

/// Where the checkpoint says replay starts, or the journal's start without one.
fn checkpoint_position(engine: &Engine) -> JournalPosition {
    let path = engine.journal_dir.join(checkpoint::FILE_NAME);
    fs::read_file(engine.fs.as_ref(), &path)
        .ok()
        .and_then(|data| Checkpoint::decode(&data))
        .map_or(JournalPosition::default(), |c| c.journal)
}

/// Makes the journal agree with `store` (see the module comment).
pub(crate) fn reconcile(
    engine: &Engine,
    store: &mut dyn RoundStore,
) -> Result<RestoreReport, LogError> {
    let fs = engine.fs.as_ref();
    fs.create_dir_all(&engine.journal_dir)?;
    let from = checkpoint_position(engine);
    let rounds = store
        .committed_rounds_from(from.seq, from.offset)
        .map_err(store_error)?;
    let mut report = RestoreReport::default();
    let mut open: Option<(u64, Box<dyn FsFile>)> = None;
    let mut end = from;
    for round in &rounds {
        assert!(
            (round.journal_seq, round.journal_position) >= (end.seq, end.offset),
            "committed rounds come in journal order and never overlap"
        );
        if open
            .as_ref()
            .is_some_and(|(seq, _)| *seq != round.journal_seq)
        {
            let (seq, file) = open.take().expect("checked above");
            // The writer moved on from this file: it ended it with a marker.
            fs::write_all_at(file.as_ref(), &journal::encode_end_marker(seq), end.offset)?;
            if !mutated!("round_store.restored_marker_unsynced") {
                file.sync_data()?;
            }
        }
        if open.is_none() {
            open = Some((
                round.journal_seq,
                open_journal_file(fs, &engine.journal_dir, round.journal_seq)?,
            ));
        }
        let (_, file) = open.as_ref().expect("opened above");
        report.rounds_checked += 1;
        if !round_present(file.as_ref(), round) {
            let data = store.read_round(round).map_err(store_error)?;
            if data.len() as u64 != round.size_bytes || crc32c::crc32c(&data) != round.crc32c {
                return Err(LogError::Io(io::Error::other(format!(
                    "round at journal {}:{} from the store does not match its CRC-32C",
                    round.journal_seq, round.journal_position
                ))));
            }
            fs::write_all_at(file.as_ref(), &data, round.journal_position)?;
            report.rounds_restored += 1;
            report.bytes_restored += round.size_bytes;
        }
        end = JournalPosition {
            seq: round.journal_seq,
            offset: round.journal_position + round.size_bytes,
        };
    }
    let last_file = open.as_ref().map(|(_, file)| file);
    if let Some(file) = last_file.filter(|_| !mutated!("round_store.restored_unsynced")) {
        file.sync_data()?;
    }
    report.files_cut = cut_after(fs, &engine.journal_dir, end)?;
    if !mutated!("round_store.cut_dir_unsynced") {
        fs.sync_dir(&engine.journal_dir)?;
    }
    if report.rounds_restored > 0 || report.files_cut > 0 {
        tracing::info!(?report, "journal reconciled with the round store");
    }
    Ok(report)
}

/// Journal file `seq`, created with its header when missing.
fn open_journal_file(fs: &dyn Fs, dir: &Path, seq: u64) -> Result<Box<dyn FsFile>, LogError> {
    let path = dir.join(journal::file_name(seq));
    if fs.exists(&path) {
        let file = fs.open(&path, OpenMode::Existing)?;
        let head =
            fs::read_new(file.as_ref(), journal::FILE_HEADER_LEN as usize, 0).unwrap_or_default();
        if journal::header_ok(&head, seq) {
            return Ok(file);
        }
        fs::write_all_at(file.as_ref(), &journal::encode_header(seq), 0)?;
        return Ok(file);
    }
    let file = fs.open(&path, OpenMode::CreateNew)?;
    fs::write_all_at(file.as_ref(), &journal::encode_header(seq), 0)?;
    Ok(file)
}

/// Whether `file` holds `round`'s bytes (its length and CRC-32C match).
fn round_present(file: &dyn FsFile, round: &CommittedRound) -> bool {
    match fs::read_new(file, round.size_bytes as usize, round.journal_position) {
        Ok(data) => data.len() as u64 == round.size_bytes && crc32c::crc32c(&data) == round.crc32c,
        Err(_) => false,
    }
}

/// Cuts journal file `end.seq` at `end.offset` and removes every later file: they hold
/// only bytes no store committed. Returns how many files were cut or removed.
fn cut_after(fs: &dyn Fs, dir: &Path, end: JournalPosition) -> Result<u64, LogError> {
    let mut cut = 0;
    for seq in journal::list_files(fs, dir)? {
        let path = dir.join(journal::file_name(seq));
        if seq > end.seq {
            fs.remove_file(&path)?;
            cut += 1;
        } else if seq == end.seq {
            let file = fs.open(&path, OpenMode::Existing)?;
            let start = end.offset.max(journal::FILE_HEADER_LEN);
            if file.len()? > start {
                file.set_len(start)?;
                if !mutated!("round_store.cut_unsynced") {
                    file.sync_data()?;
                }
                cut += 1;
            }
        }
    }
    Ok(cut)
}
