//! `sluice-object`: the object-storage backend's two stores.
//!
//! - [`s3`]: an S3 client (SigV4, blocking HTTP/1.1 with keep-alive, TLS) that writes a
//!   round's bytes straight from the committer's buffers.
//! - [`meta_store`]: the PostgreSQL metadata store: its versioned schema (created and
//!   migrated by the broker), and the one transaction per round that fences stale writers,
//!   checks every touched partition's log end, advances it and records where each
//!   partition's batches lie.
//!
//! Everything here is blocking and runs on the log's own threads, never on the broker's
//! async runtime. The design, the object layout, the schema and the crash cases are in
//! `docs/object-storage.md`.

pub mod credentials;
mod http;
pub mod meta_store;
pub mod rounds;
pub mod s3;
mod sigv4;

pub use credentials::{Credentials, Environment};
pub use rounds::{round_key, ObjectRoundStore};
pub use s3::{ListedObject, ObjectError, ObjectStore, ObjectStoreConfig};
