//! Injected I/O faults (FaultyFs): a failed write or sync poisons the log, fails the waiters
//! in flight and every later append, is never retried, and loses nothing acknowledged.

mod common;

use std::sync::Arc;

use common::*;
use sluice_log::fs::{FaultOp, FaultyFs};
use sluice_log::{LogError, LogManager, Offset, PartitionKey};

async fn setup(dir: &std::path::Path) -> (LogManager, FaultyFs, PartitionKey) {
    let fs = FaultyFs::new();
    let (log, _) = open_with(dir, Arc::new(fs.clone()));
    let k = key("faulty", 0);
    create(&log, &k);
    for tag in 0..3 {
        append(&log, &k, bytes(2, 30, tag)).await;
    }
    (log, fs, k)
}

/// After the fault: later appends are refused and the acknowledged data is all there after
/// reopening on the real file system.
async fn assert_poisoned_and_recoverable(log: LogManager, k: &PartitionKey, dir: &std::path::Path) {
    assert!(log.is_poisoned());
    assert!(matches!(
        log.append(k, bytes(1, 1, 9)).await,
        Err(LogError::Poisoned)
    ));
    assert!(matches!(
        log.delete_records(k, Offset(1)),
        Err(LogError::Poisoned)
    ));
    assert!(matches!(log.shutdown(), Err(LogError::Poisoned)));
    drop(log);
    let (log, _) = open(dir);
    let seen = read_all(&log, k);
    let tags: Vec<i64> = seen.iter().take(3).map(|s| s.tag).collect();
    assert_eq!(tags, vec![0, 1, 2], "acknowledged appends survive");
    assert!(
        seen.len() <= 4,
        "only the failed append may also have reached the disk"
    );
    assert!(!log.is_poisoned());
}

#[tokio::test]
async fn journal_sync_failure_poisons() {
    // Goal: EIO from the journal fdatasync fails the waiting append with Io, poisons the log,
    // and is never retried (one injected failure only).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, fs, k) = setup(dir.path()).await;
    fs.arm(FaultOp::Sync, 0, Some(".wal"));
    let result = log
        .append(&k, bytes(2, 30, 3))
        .await
        .expect("queued")
        .wait()
        .await;
    assert!(
        matches!(result, Err(LogError::Io(ref e)) if e.raw_os_error() == Some(libc::EIO)),
        "{result:?}"
    );
    assert_eq!(fs.injected(), 1);
    assert_poisoned_and_recoverable(log, &k, dir.path()).await;
}

#[tokio::test]
async fn journal_write_enospc_poisons_every_waiter() {
    // Goal: ENOSPC on the journal write fails every waiter of the round (the first with Io,
    // the rest Poisoned).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, fs, k) = setup(dir.path()).await;
    fs.arm(FaultOp::Write, 0, Some(".wal"));
    // Queued together they share a round; any the committer has not taken before the fault
    // are refused at once with Poisoned.
    let mut waiters = Vec::new();
    let mut refused = 0;
    for tag in 3..13 {
        match log.append(&k, bytes(1, 10, tag)).await {
            Ok(waiter) => waiters.push(waiter),
            Err(LogError::Poisoned) => refused += 1,
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    let mut io_errors = 0;
    for waiter in waiters {
        match waiter.wait().await {
            Err(LogError::Io(e)) => {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
                io_errors += 1;
            }
            Err(LogError::Poisoned) => {}
            other => panic!("expected a failure, got {other:?}"),
        }
    }
    assert!(refused < 10);
    assert_eq!(io_errors, 1, "one waiter carries the I/O error");
    assert!(log.is_poisoned());
    // The fault hit the journal, whose bytes are not in the segments' committed view, so the
    // later rounds never wrote anything: check only the common assertions.
    let dir = dir.path().to_owned();
    assert!(matches!(
        log.append(&k, bytes(1, 1, 9)).await,
        Err(LogError::Poisoned)
    ));
    drop(log);
    let (log, _) = open(&dir);
    let tags: Vec<i64> = read_all(&log, &k).iter().take(3).map(|s| s.tag).collect();
    assert_eq!(tags, vec![0, 1, 2]);
}

#[tokio::test]
async fn segment_write_failure_poisons() {
    // Goal: ENOSPC while writing a segment poisons the log like a journal failure.
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, fs, k) = setup(dir.path()).await;
    fs.arm(FaultOp::Write, 0, Some(".log"));
    let result = log
        .append(&k, bytes(2, 30, 3))
        .await
        .expect("queued")
        .wait()
        .await;
    assert!(matches!(result, Err(LogError::Io(_))), "{result:?}");
    assert_poisoned_and_recoverable(log, &k, dir.path()).await;
}

#[tokio::test]
async fn segment_sync_failure_in_checkpoint_poisons() {
    // Goal: EIO while the checkpoint syncs a segment poisons the log and leaves the previous
    // checkpoint in force (the journal still covers the data).
    let dir = tempfile::tempdir().expect("tempdir");
    let (log, fs, k) = setup(dir.path()).await;
    fs.arm(FaultOp::Sync, 0, Some(".log"));
    assert!(matches!(log.checkpoint_now(), Err(LogError::Io(_))));
    assert_poisoned_and_recoverable(log, &k, dir.path()).await;
}

#[tokio::test]
async fn fault_after_countdown_keeps_earlier_appends() {
    // Goal: with the fault armed to fire after a few more journal syncs, the appends acked
    // before it all survive and nothing after it is acknowledged.
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultyFs::new();
    let (log, _) = open_with(dir.path(), Arc::new(fs.clone()));
    let k = key("countdown", 0);
    create(&log, &k);
    fs.arm(FaultOp::Sync, 5, Some(".wal"));
    let mut acked = Vec::new();
    for tag in 0..10 {
        match log.append(&k, bytes(1, 10, tag)).await {
            Ok(waiter) => match waiter.wait().await {
                Ok(info) => acked.push((tag, info.base_offset)),
                Err(_) => break,
            },
            Err(_) => break,
        }
    }
    assert_eq!(acked.len(), 5);
    assert!(log.is_poisoned());
    drop(log);
    let (log, _) = open(dir.path());
    let seen = read_all(&log, &k);
    for (i, (tag, offset)) in acked.iter().enumerate() {
        assert_eq!((seen[i].tag, Offset(seen[i].base_offset)), (*tag, *offset));
    }
}
