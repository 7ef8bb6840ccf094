//! `Storage::Null`, the no-op log of calibration runs: appends are answered with offsets
//! stamped from the log end, nothing reaches the journal or a segment, and readers see an
//! empty log (the high watermark never moves).

use std::sync::Arc;

use crate::common::*;
use sluice_log::fs::StdFs;
use sluice_log::{LogManager, Offset, Storage};

#[tokio::test]
async fn null_storage_stamps_offsets_and_keeps_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = config(dir.path());
    config.storage = Storage::Null;
    let (log, _) = LogManager::open(config, Arc::new(StdFs)).expect("open");
    let k = key("calibration", 0);
    create(&log, &k);
    // Two batches in one request, then one more: consecutive offsets as on disk.
    let mut two = batch(3, 20, 1);
    two.extend_from_slice(&batch(2, 20, 2));
    let first = append(&log, &k, two.into()).await;
    assert_eq!(
        (first.base_offset, first.last_offset),
        (Offset(0), Offset(4))
    );
    let second = append(&log, &k, bytes(4, 20, 3)).await;
    assert_eq!(
        (second.base_offset, second.last_offset),
        (Offset(5), Offset(8))
    );
    // Readers see an empty log: nothing below the high watermark, nothing to read.
    let offsets = log.offsets(&k).expect("offsets");
    assert_eq!(offsets.log_end_offset, Offset(9));
    assert_eq!(offsets.high_watermark, Offset(0));
    assert!(read_all(&log, &k).is_empty());
    let read = log.read(&k, Offset(0), 64 * 1024, true).expect("read");
    assert!(read.records.is_empty());
    // No journal byte written, no sync.
    let stats = log.stats();
    assert_eq!(stats.journal_bytes, 0);
    assert_eq!(stats.journal_syncs, 0);
    assert_eq!(stats.append_requests, 2);
    // A broken batch is still refused.
    let mut broken = batch(1, 20, 4);
    broken.truncate(broken.len() - 3);
    assert!(try_append(&log, &k, broken.into()).await.is_err());
    log.shutdown().expect("shutdown");
}
