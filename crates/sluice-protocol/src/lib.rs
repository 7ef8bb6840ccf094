//! `sluice-protocol`: the Kafka wire protocol as Sluice speaks it, with no I/O.
//!
//! - [`frame`]: the 4-byte length prefix; a partial frame is `Ok(None)`, never an error.
//! - [`header`]: request headers, parsed defensively (short or unknown input is a typed error,
//!   never a panic).
//! - [`registry`]: the shape of the API table (key, version range, advertised); the table
//!   itself is the broker's handler table, handed to [`header::parse`] (as an
//!   [`registry::ApiTable`], a row by key) and ApiVersions.
//! - [`codec`]: request decode and response encode for a negotiated version, including the
//!   ApiVersions v0 fallback that clients rely on.
//! - [`adapted`]: the request and response versions of Kafka 4.x the protocol crate does not
//!   encode yet (OffsetCommit/OffsetFetch v10, ListOffsets v11, DeleteGroups v3, ApiVersions
//!   v5), written on top of its message structs.
//! - [`alloc_guard`]: the allocator guard against hostile array counts (see its docs).
//! - [`record_walk`]: the bounded, streaming walk over one record batch's records (framing
//!   checks and decompression with a cap), for produce validation and ListOffsets by time.
//!
//! Record batches are never decoded into records here: Produce and Fetch carry them as raw
//! `Bytes`; the record walk only reads them.

pub mod adapted;
pub mod alloc_guard;
pub mod codec;
pub mod error;
pub mod frame;
pub mod header;
pub mod record_compact;
pub mod record_walk;
pub mod registry;

pub use error::ProtocolError;
pub use kafka_protocol;
