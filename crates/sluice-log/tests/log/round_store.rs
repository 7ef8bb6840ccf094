//! The committer with a round store (the object backend's seam, `round_store.rs`): rounds
//! are answered only once the store committed them, the store sees exactly the bytes the
//! journal got and every partition's entry, the journal is never synced, a refused round
//! is undone (nothing visible, the offsets used again), and a fatal one stops writes.
//! The store here records in memory; the real one (S3 + PostgreSQL) is tested in
//! sluice-object and by the integration suite.

use std::io::Read;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::common::*;
use sluice_log::fs::StdFs;
use sluice_log::round_store::{CommittedRound, Round, RoundEntry, RoundStore, RoundStoreError};
use sluice_log::{LogManager, Offset};

#[derive(Debug, Default)]
struct Recorded {
    rounds: Vec<(u64, u64, Vec<u8>, Vec<RoundEntry>)>,
    refuse: u32,
    fatal: bool,
}

#[derive(Debug, Clone, Default)]
struct Recorder(Arc<Mutex<Recorded>>);

impl RoundStore for Recorder {
    fn commit_round(&mut self, round: &Round<'_>) -> Result<(), RoundStoreError> {
        let data: Vec<u8> = round.data.iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(
            data.len() as u64,
            round.len,
            "the slices hold the whole round"
        );
        let mut state = self.0.lock();
        if state.fatal {
            return Err(RoundStoreError::Fatal("fenced".into()));
        }
        if state.refuse > 0 {
            state.refuse -= 1;
            return Err(RoundStoreError::Refused("store unreachable".into()));
        }
        state.rounds.push((
            round.journal_seq,
            round.journal_position,
            data,
            round.entries.to_vec(),
        ));
        Ok(())
    }

    fn committed_rounds_from(
        &mut self,
        seq: u64,
        position: u64,
    ) -> Result<Vec<CommittedRound>, RoundStoreError> {
        let state = self.0.lock();
        Ok(state
            .rounds
            .iter()
            .filter(|r| (r.0, r.1) >= (seq, position))
            .map(|r| CommittedRound {
                journal_seq: r.0,
                journal_position: r.1,
                size_bytes: r.2.len() as u64,
                crc32c: crc32c::crc32c(&r.2),
                key: format!("{}:{}", r.0, r.1),
            })
            .collect())
    }

    fn read_round(&mut self, round: &CommittedRound) -> Result<Vec<u8>, RoundStoreError> {
        let state = self.0.lock();
        let found = state
            .rounds
            .iter()
            .find(|r| (r.0, r.1) == (round.journal_seq, round.journal_position));
        found
            .map(|r| r.2.clone())
            .ok_or_else(|| RoundStoreError::Refused("no such round".into()))
    }
}

fn open_with_store(dir: &std::path::Path, store: &Recorder) -> LogManager {
    let (log, _) = LogManager::open_with_round_store(
        config(dir),
        Arc::new(StdFs),
        Some(Box::new(store.clone())),
    )
    .expect("open");
    log
}

#[tokio::test]
async fn rounds_reach_the_store_with_their_entries_and_the_journal_is_not_synced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Recorder::default();
    let log = open_with_store(dir.path(), &store);
    let (a, b) = (key("orders", 0), key("orders", 1));
    create(&log, &a);
    create(&log, &b);
    let syncs_before = log.stats().journal_syncs;
    let first = append(&log, &a, bytes(3, 40, 1)).await;
    let second = append(&log, &b, bytes(2, 40, 2)).await;
    let third = append(&log, &a, bytes(1, 40, 3)).await;
    assert_eq!(
        (first.base_offset, first.last_offset),
        (Offset(0), Offset(2))
    );
    assert_eq!(
        (second.base_offset, third.base_offset),
        (Offset(0), Offset(3))
    );
    assert_eq!(
        log.stats().journal_syncs,
        syncs_before,
        "the store, not fdatasync, makes rounds durable"
    );
    let recorded = store.0.lock();
    let entries: Vec<(i32, i64, i64)> = recorded
        .rounds
        .iter()
        .flat_map(|r| {
            r.3.iter()
                .map(|e| (e.partition, e.base_offset.0, e.last_offset.0))
        })
        .collect();
    assert_eq!(entries, [(0, 0, 2), (1, 0, 1), (0, 3, 3)]);
    // Each round's bytes are the journal's bytes at the round's position.
    for (seq, position, data, round_entries) in &recorded.rounds {
        let mut file = std::fs::File::open(journal_path(dir.path(), *seq)).expect("journal file");
        let mut on_disk = vec![0u8; data.len()];
        std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(*position)).unwrap();
        file.read_exact(&mut on_disk).unwrap();
        assert!(
            on_disk == *data,
            "round at {seq}:{position} differs from the journal"
        );
        for entry in round_entries {
            assert!(entry.position + u64::from(entry.size_bytes) <= data.len() as u64);
            // The entry's partition is in its header: after the length, CRC and topic id.
            let at = entry.position as usize + 24;
            let partition = i32::from_be_bytes(data[at..at + 4].try_into().unwrap());
            assert_eq!(partition, entry.partition);
        }
    }
    drop(recorded);
    assert_eq!(read_all(&log, &a).len(), 2);
    log.shutdown().expect("shutdown");
}

#[tokio::test]
async fn a_refused_round_is_undone_and_the_next_one_reuses_its_offsets() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Recorder::default();
    let log = open_with_store(dir.path(), &store);
    let k = key("refused", 0);
    create(&log, &k);
    append(&log, &k, bytes(2, 30, 1)).await;
    store.0.lock().refuse = 1;
    let refused = try_append(&log, &k, bytes(5, 30, 2)).await;
    assert!(
        refused.is_err(),
        "a round the store refused is not acknowledged"
    );
    let offsets = log.offsets(&k).expect("offsets");
    assert_eq!(
        (offsets.log_end_offset, offsets.high_watermark),
        (Offset(2), Offset(2))
    );
    assert!(!log.is_poisoned());
    let again = append(&log, &k, bytes(1, 30, 3)).await;
    assert_eq!(
        again.base_offset,
        Offset(2),
        "the refused round's offsets are used again"
    );
    let tags: Vec<i64> = read_all(&log, &k).iter().map(|s| s.tag).collect();
    assert_eq!(tags, [1, 3], "nothing of the refused round is visible");
    log.shutdown().expect("shutdown");
}

#[tokio::test]
async fn a_fatal_store_error_stops_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Recorder::default();
    let log = open_with_store(dir.path(), &store);
    let k = key("fenced", 0);
    create(&log, &k);
    append(&log, &k, bytes(1, 30, 1)).await;
    store.0.lock().fatal = true;
    assert!(try_append(&log, &k, bytes(1, 30, 2)).await.is_err());
    assert!(log.is_poisoned());
    store.0.lock().fatal = false;
    assert!(
        try_append(&log, &k, bytes(1, 30, 3)).await.is_err(),
        "a poisoned log stays stopped"
    );
    assert_eq!(log.offsets(&k).expect("offsets").high_watermark, Offset(1));
    let _ = log.shutdown();
}

/// A round the process wrote but the store never committed (here: the store failed it
/// fatally, which leaves its bytes in the journal, as a crash between the write and the
/// commit would) is cut on restart: recovery never replays it.
#[tokio::test]
async fn a_round_the_store_never_committed_is_cut_on_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Recorder::default();
    let k = key("cut", 0);
    {
        let log = open_with_store(dir.path(), &store);
        create(&log, &k);
        append(&log, &k, bytes(2, 30, 1)).await;
        store.0.lock().fatal = true;
        assert!(try_append(&log, &k, bytes(3, 30, 2)).await.is_err());
        let _ = log.shutdown();
    }
    store.0.lock().fatal = false;
    let log = open_with_store(dir.path(), &store);
    let tags: Vec<i64> = read_all(&log, &k).iter().map(|s| s.tag).collect();
    assert_eq!(tags, [1], "only the committed round is replayed");
    let next = append(&log, &k, bytes(1, 30, 3)).await;
    assert_eq!(
        next.base_offset,
        Offset(2),
        "the uncommitted round's offsets are free again"
    );
    log.shutdown().expect("shutdown");
}

/// Committed rounds the local journal lost (here: the journal cut back to its header and
/// the checkpoint gone, as after an OS crash before any checkpoint) are fetched from the
/// store and written back at their journal positions before recovery.
#[tokio::test]
async fn committed_rounds_lost_locally_are_restored_from_the_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Recorder::default();
    let (a, b) = (key("lost", 0), key("lost", 1));
    {
        let log = open_with_store(dir.path(), &store);
        create(&log, &a);
        create(&log, &b);
        for tag in 1..=4 {
            append(&log, &a, bytes(2, 50, tag)).await;
            append(&log, &b, bytes(1, 50, 10 + tag)).await;
        }
        log.shutdown().expect("shutdown");
    }
    let rounds = store.0.lock().rounds.len();
    assert!(rounds >= 2, "several rounds were committed");
    std::fs::remove_file(dir.path().join("journal").join("checkpoint")).expect("checkpoint");
    for path in journal_files(dir.path()) {
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(16).unwrap();
    }
    let log = open_with_store(dir.path(), &store);
    let tags_a: Vec<i64> = read_all(&log, &a).iter().map(|s| s.tag).collect();
    let tags_b: Vec<i64> = read_all(&log, &b).iter().map(|s| s.tag).collect();
    assert_eq!(tags_a, [1, 2, 3, 4]);
    assert_eq!(tags_b, [11, 12, 13, 14]);
    assert_eq!(
        append(&log, &a, bytes(1, 50, 5)).await.base_offset,
        Offset(8)
    );
    log.shutdown().expect("shutdown");
}
