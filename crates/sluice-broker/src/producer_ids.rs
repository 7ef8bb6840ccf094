//! Producer ids for InitProducerId, unique across restarts: ids are handed out of blocks
//! whose end is written to `<data_dir>/meta/producer_ids` (atomically, fsync'd) before the
//! first id of the block is used. A crash skips the rest of a block; it never reuses an id.
//!
//! Every id ever handed out is below the durable block end, so [`ProducerIds::is_issued`]
//! (a lock-free check on the produce path) tells ids this broker issued from ids a client
//! made up. It may also accept the unused rest of a block, never an id above it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use parking_lot::Mutex;
use sluice_coordinator::{ProducerId, ProducerIdAllocator};
use sluice_log::ProducerId as LogProducerId;

const FILE_NAME: &str = "producer_ids";

#[derive(Debug)]
pub struct ProducerIds {
    allocator: Mutex<ProducerIdAllocator>,
    meta_dir: PathBuf,
    /// The durable block end: every id handed out is below it. Raised only after the new
    /// end is on disk and before any id of the new block is handed out.
    issued_end: AtomicI64,
    /// Serializes block writes (blocking threads only).
    write: std::sync::Mutex<()>,
    /// Ids handed out since start (for metrics).
    issued_total: AtomicU64,
}

impl ProducerIds {
    /// Reads the durable block end. Blocking.
    pub fn open(data_dir: &Path) -> std::io::Result<Self> {
        let meta_dir = data_dir.join("meta");
        sluice_log::fs::create_private_dir_all(&meta_dir)?;
        let block_end = match std::fs::read_to_string(meta_dir.join(FILE_NAME)) {
            Ok(text) => text.trim().parse::<i64>().map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: {e}", meta_dir.join(FILE_NAME).display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        Ok(Self {
            allocator: Mutex::new(ProducerIdAllocator::new(block_end)),
            meta_dir,
            issued_end: AtomicI64::new(block_end.max(0)),
            write: std::sync::Mutex::new(()),
            issued_total: AtomicU64::new(0),
        })
    }

    /// The next producer id, reserving (durably) a new block when needed. Blocking.
    pub fn next(&self) -> std::io::Result<ProducerId> {
        let id = self.next_id()?;
        self.issued_total.fetch_add(1, Ordering::Relaxed);
        Ok(id)
    }

    /// Producer ids handed out since start.
    pub fn issued_total(&self) -> u64 {
        self.issued_total.load(Ordering::Relaxed)
    }

    fn next_id(&self) -> std::io::Result<ProducerId> {
        loop {
            if let Some(id) = self.allocator.lock().next_id() {
                return Ok(id);
            }
            let _write = self.write.lock().unwrap_or_else(|p| p.into_inner());
            // Another thread may have reserved a block while we waited.
            if let Some(id) = self.allocator.lock().next_id() {
                return Ok(id);
            }
            let end = self.allocator.lock().block_end_to_persist();
            crate::topics::write_atomically(
                &self.meta_dir,
                FILE_NAME,
                format!("{end}\n").as_bytes(),
            )?;
            self.issued_end.fetch_max(end, Ordering::Release);
            self.allocator.lock().block_persisted(end);
        }
    }

    /// Whether `producer_id` may have been handed out by this broker (now or before a
    /// restart). Non-blocking.
    pub fn is_issued(&self, producer_id: LogProducerId) -> bool {
        producer_id.0 >= 0 && producer_id.0 < self.issued_end.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_below_the_durable_block_end_are_issued() {
        // Goal: an id handed out is issued, before and after a restart; ids past the durable
        // block end and negative ids are not.
        let dir = tempfile::tempdir().expect("tempdir");
        let ids = ProducerIds::open(dir.path()).expect("open");
        assert!(!ids.is_issued(LogProducerId(0)), "nothing issued yet");
        let first = ids.next().expect("id");
        assert!(ids.is_issued(LogProducerId(first.0)));
        assert!(!ids.is_issued(LogProducerId(-1)));
        assert!(!ids.is_issued(LogProducerId(first.0 + 1_000_000)));
        drop(ids);
        let reopened = ProducerIds::open(dir.path()).expect("reopen");
        assert!(reopened.is_issued(LogProducerId(first.0)));
        assert!(!reopened.is_issued(LogProducerId(first.0 + 1_000_000)));
    }
}
