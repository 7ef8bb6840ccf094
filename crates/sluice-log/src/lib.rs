//! `sluice-log`: the durable partition log behind the Sluice broker.
//!
//! It stores Kafka record batches (magic v2) exactly as received, stamps base offsets,
//! and makes them durable with group commit: every append waiting at one moment is written
//! to one shared journal and covered by a single `fdatasync`, however many partitions they
//! touch. The journal is the only copy of the data: a partition's segments are lists of
//! extents in journal files (with offset and time indexes), persisted by a separate
//! checkpointer thread, so every byte is written once and the number of syncs on the
//! produce path does not grow with the number of partitions.
//!
//! The crate knows nothing of the Kafka wire protocol: it sees batches only as bytes with
//! the v2 header layout (see [`batch`]). All file I/O happens on the log's own threads or on
//! the caller's thread in the blocking methods (documented per method); nothing here runs on
//! an async runtime. The storage format and the crash-case table live in `docs/storage.md`.
//!
//! # Layout
//! - [`batch`]: zero-copy view of a v2 record batch header, CRC-32C validation.
//! - [`fs`]: the small file-system trait all I/O goes through, so tests can inject faults.
//! - [`histogram`]: fixed-bucket histograms recorded with atomics only (commit rounds,
//!   journal sync latency), read through [`LogManager::commit_histograms`].
//! - `sim_fs`: an in-memory [`fs::Fs`] that keeps written and synced bytes apart and can
//!   crash, for the seeded crash-model test (`tests/log/model.rs`).
//! - [`config`]: per-partition [`LogConfig`] and process-wide [`LogManagerConfig`].
//! - [`error`]: [`LogError`], typed so the broker can map each case to a Kafka error code.
//! - `journal`, `extents`, `segment`, `index`, `partition`, `committer`, `checkpoint`, `checkpointer`,
//!   `recovery`, `retention`, `metadata`, `engine`: the engine behind [`LogManager`].
//! - `completion`: how appends are answered: a waiter each, or one [`AppendGroup`] per
//!   produce request (one wake-up, reused across requests).
//! - `producer_state`, `producer_snapshot`: idempotent-producer sequence tracking per
//!   partition (duplicates answered with their original offsets, gaps and stale epochs
//!   refused) and its snapshot file.
//! - [`round_store`]: the seam where a round becomes durable in a remote store instead of
//!   by the journal's `fdatasync` (`storage.backend=object`, docs/object-storage.md).
//! - [`txn`]: transaction markers (control batches), aborted-transaction entries and the
//!   isolation level of reads (docs/transactions.md §6).

mod append_queue;
pub mod batch;
mod checkpoint;
mod checkpointer;
pub mod cleaner;
mod cleaner_checkpoint;
mod cleaner_txn;
mod committer;
mod completion;
pub mod config;
mod engine;
pub mod error;
mod extents;
pub mod fs;
pub mod histogram;
mod index;
mod journal;
mod journal_cleaner;
mod journal_tail;
pub mod log_limit;
mod manager;
mod metadata;
pub mod mutation;
mod partition;
mod producer_snapshot;
mod producer_state;
mod read_check;
mod record_slices;
mod recovery;
mod retention;
pub mod round_restore;
pub mod round_store;
mod segment;
/// Test support: the simulated file system of the crash-model test (not used by the log).
#[doc(hidden)]
pub mod sim_fs;
mod throttle;
pub mod txn;
pub mod types;

pub use cleaner::{CleanerPass, RecordCodec, RecordKey};
pub use completion::{AppendGate, AppendGroup};
pub use config::{
    CleanerConfig, FsyncPolicy, JournalCleanerConfig, LogConfig, LogManagerConfig, Storage,
    TimestampType,
};
pub use error::LogError;
pub use journal_cleaner::{DiskUsage, JournalCleanerPass, PartitionDiskUsage};
pub use manager::{
    AppendInfo, AppendWaiter, CommitHistograms, CommitListener, LogManager, LogStats,
    PartitionOffsets, ReadResult, RecoveryReport,
};
pub use record_slices::{FileRange, RangesResult, RecordSlice};
pub use txn::{AbortedTxn, ActiveProducer, ControlType, IsolationLevel};
pub use types::{Offset, PartitionKey, ProducerEpoch, ProducerId, TopicId};
