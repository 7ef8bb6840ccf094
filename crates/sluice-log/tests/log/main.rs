//! The storage engine's crate tests, as one test binary: each module was a test binary of
//! its own, and each linked the crate and its dependencies again (the broker's API tests
//! were merged for the same reason, `crates/sluice-broker/tests/api`). The tests share
//! nothing but the helpers in `common`: each opens its own log in its own directory (or its
//! own simulated file system), so they run side by side. Run one module with a filter, for
//! example the seeded crash model:
//! `cargo test --release -p sluice-log --test log model::`.

#[path = "../common/mod.rs"]
mod common;

mod append_read;
mod cleaner;
mod damage;
mod faults;
mod full_disk;
mod idempotence;
mod journal_cleaner;
mod journal_files;
mod model;
mod mutation_points;
mod null_storage;
mod read_damage;
mod read_ranges;
mod recovery;
mod retention;
mod round_store;
mod transactions;
mod txn_model;
