//! Kafka's record batch, magic v2, as Sluice sees it: the one place its header layout is
//! written down. Every crate that reads or writes batch headers (the log, the protocol's
//! record walk and compaction, the broker's produce path and metrics, the log cleaner) goes
//! through this crate; none of them knows a byte offset of its own.
//!
//! Why a crate of its own, at the bottom: the layout is shared by `sluice-log` (which knows
//! batches only as bytes), `sluice-protocol` (which decodes records and must never import
//! the log) and `sluice-broker`, and the producer id is shared by `sluice-log` and
//! `sluice-coordinator`. Imports go in one direction only, from the broker down to the log,
//! the protocol and the coordinators; the only place all of them can import from is a leaf
//! below them. So this crate depends on no Sluice crate (only `crc32c`), does no I/O and
//! knows nothing of records, requests, errors codes or storage.
//!
//! Layout:
//! - [`layout`]: the field positions (big-endian, bytes from the start of the batch);
//! - [`BatchHeader`] / [`BatchPrefix`]: zero-copy views with typed getters;
//! - [`BatchHeaderMut`] (fields changed in place, then the CRC-32C recomputed) and
//!   [`BatchFields`] (a new batch around given record bytes): the writers;
//! - [`Attributes`], [`Compression`], [`TimestampType`]: the attribute bits;
//! - [`Offset`], [`ProducerId`], [`ProducerEpoch`]: the ids a header carries.
//!
//! Guarantees: a view is made only over at least the bytes it reads, so its getters never
//! fail and carry no bounds check once inlined; every writer leaves a batch whose CRC-32C
//! matches its bytes (except [`stamp_base_offset`] and [`BatchHeaderMut::set_base_offset`],
//! which write bytes the CRC does not cover).

mod attributes;
mod header;
mod ids;
pub mod layout;
mod writer;

pub use attributes::{Attributes, Compression, TimestampType};
pub use header::{batch_len_within, compute_crc, BatchHeader, BatchPrefix, HeaderTooShort};
pub use ids::{Offset, ProducerEpoch, ProducerId, NO_SEQUENCE};
pub use layout::{CRC_START, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2};
pub use writer::{stamp_base_offset, BatchFields, BatchHeaderMut};
