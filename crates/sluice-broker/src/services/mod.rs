//! The services: the state a broker keeps behind its APIs, each with its own durability. The
//! topic registry and its metadata file, the group and transaction coordinators (the
//! `sluice-coordinator` state machines, their timers and internal topics), producer ids,
//! SCRAM credentials, delegation tokens, ACLs, client quotas, and the checks the produce path
//! and compaction run on record batches.
//!
//! Direction: services are called by the handlers and the network and never import them (nor
//! the crate root's `Broker`): each takes what it needs as arguments. They import the leaf
//! modules and the configuration only (checked by `tests/layers.rs`).

pub mod acl;
pub(crate) mod atomic_file;
pub mod compaction;
pub mod consumer_protocol;
pub mod delegation_tokens;
pub mod groups;
pub mod internal_topics;
pub(crate) mod object_backend;
pub mod producer_ids;
pub mod quotas;
pub mod record_validation;
pub(crate) mod replay;
pub mod scram;
pub mod topics;
pub mod txns;
