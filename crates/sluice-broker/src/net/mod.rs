//! The network: the listeners and their sockets, TLS, SASL authentication, request framing,
//! the connection tasks that read requests and write responses in order, the admin listener
//! and its `/metrics` scrape, and the process lifecycle ([`server`]) that builds the
//! [`crate::Broker`] and runs shutdown.
//!
//! Direction: the top of the crate. It calls down into the handlers (one per Kafka API), the
//! services, the leaf modules and the configuration; nothing below imports it (checked by
//! `tests/layers.rs`).

pub(crate) mod admin;
pub(crate) mod connection;
pub(crate) mod frame_buffers;
pub mod listeners;
pub mod sasl;
pub(crate) mod scrape;
pub mod server;
pub mod tls;
pub(crate) mod tls_stream;
