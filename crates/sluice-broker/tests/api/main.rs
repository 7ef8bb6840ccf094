//! The broker's fast in-process tier for its APIs, as one test binary: each module was a test
//! binary of its own, and each linked the crate and its dependencies again (21-38 s of
//! compile time each; one binary took CI's test build from 9.1 to 7.3 minutes). The tests
//! share nothing but the code in `common`: each starts its own `InProcessBroker` with its
//! own port and data directory, so they run side by side like the integration suite's.
//! Run one module with a filter:
//! `cargo test --release -p sluice-broker --test api handlers::`.
//!
//! Two tests stay binaries of their own, because each installs a global allocator:
//! `alloc_per_request` (counting) and `fuzz_requests` (guarded).

#[path = "../common/mod.rs"]
mod common;

mod admin;
mod admin_reads;
mod connection;
mod delegation_tokens;
mod error_codes;
mod every_api;
mod groups;
mod handlers;
mod kafka44_versions;
mod metrics;
mod security_apis;
mod storage_null;
mod transactions;
