//! Producer ids for InitProducerId, unique across restarts: ids are handed out of blocks
//! whose end is written to `<data_dir>/meta/producer_ids` (atomically, fsync'd) before the
//! first id of the block is used. A crash skips the rest of a block; it never reuses an id.

use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use sluice_coordinator::{ProducerId, ProducerIdAllocator};

const FILE_NAME: &str = "producer_ids";

#[derive(Debug)]
pub struct ProducerIds {
    allocator: Mutex<ProducerIdAllocator>,
    meta_dir: PathBuf,
    /// Serializes block writes (blocking threads only).
    write: std::sync::Mutex<()>,
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
            write: std::sync::Mutex::new(()),
        })
    }

    /// The next producer id, reserving (durably) a new block when needed. Blocking.
    pub fn next(&self) -> std::io::Result<ProducerId> {
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
            self.allocator.lock().block_persisted(end);
        }
    }
}
