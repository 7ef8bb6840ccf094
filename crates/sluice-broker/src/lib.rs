//! `sluice-broker`: the Kafka broker on top of `sluice-log`.
//!
//! # Layout
//! The crate is four layers; each imports only the layers below it (`tests/layers.rs` reads
//! the sources and fails on an upward import):
//! - [`net`]: the top. [`server`] builds the [`Broker`], binds the listeners, accepts
//!   connections up to `max.connections`, and runs shutdown (stop accepting, answer in-flight
//!   requests, sync the log, exit). `net::connection` runs one task pair per socket: the
//!   reader parses frames and starts each request in arrival order; the writer sends
//!   responses in that same order, so pipelined requests work and responses never overtake
//!   each other (at most [`config::limits::IN_FLIGHT_PER_CONNECTION_MAX`] in flight per
//!   connection). Also TLS on rustls, the SASL gate (PLAIN, SCRAM, delegation tokens), frame
//!   buffers, and the admin listener (`metrics.listen`) with its `/metrics` scrape.
//! - `handlers/`: one file per Kafka API, and [`api_table`] (`handlers/table.rs`), the one
//!   table of served APIs (key, versions, advertised, handler) that header parsing,
//!   ApiVersions, dispatch and the per-API metrics all read. Produce enqueues its appends
//!   while still in arrival order (so pipelined produces to one partition keep their order)
//!   and then waits for durability concurrently; every other API runs entirely concurrently.
//! - [`services`]: the state behind the APIs: the topic registry and its metadata file, the
//!   group coordinator (classic and KIP-848) and the transaction coordinator over their
//!   internal topics, producer ids, SCRAM credentials, delegation tokens, ACLs, client
//!   quotas, record validation and compaction checks. Services never import the network,
//!   the handlers or this root's [`Broker`]: they are handed what they need.
//! - [`config`]: [`BrokerConfig`] and [`config_table`], the one table of every broker
//!   setting (parsing, file, environment, flags, DescribeConfigs, the topic-config defaults
//!   and the docs come from it), the security settings, topic configs, listener specs and
//!   [`config::limits`]. It imports nothing else in the crate.
//!
//! Leaf modules, importable from every layer above the configuration: [`clock`] (the
//! coordinators' time seam), [`error_code`], `log_limit` (rate-limited log lines),
//! [`memory`] (the request-memory budget every large network buffer is charged to),
//! [`metrics`] (counters recorded with atomics on the request paths) and `response_chunks`
//! (responses as chunks of own framing plus shared record bytes, written with vectored
//! writes, so fetched records are never copied after the log read).
//!
//! This root holds [`Broker`], the state shared by every connection; the network and the
//! handlers read it, nothing below them does.
//!
//! Blocking work runs on dedicated threads (fetch reads: `handlers::fetch::read`) or on
//! tokio's blocking pool (admin changes, metadata writes), never on the async workers; no
//! lock is held across an `.await`.

pub mod clock;
pub mod config;
pub mod error_code;
mod handlers;
mod log_limit;
pub mod memory;
pub mod metrics;
pub mod net;
mod response_chunks;
pub mod services;

use std::sync::Arc;

use sluice_log::LogManager;
use tokio::sync::watch;

pub use config::table as config_table;
pub use config::BrokerConfig;
/// The handler table: every API served, its versions, whether it is advertised, its handler.
pub use handlers::table as api_table;
pub use net::server::{self, Server};

use net::listeners;
use services::{acl, delegation_tokens, groups, producer_ids, quotas, scram, topics, txns};

/// State shared by every connection.
#[derive(Debug)]
pub struct Broker {
    pub config: BrokerConfig,
    pub log: LogManager,
    pub topics: topics::TopicRegistry,
    pub groups: Arc<groups::GroupService>,
    /// The transaction coordinator (docs/transactions.md).
    pub txns: Arc<txns::TxnService>,
    pub producer_ids: producer_ids::ProducerIds,
    /// Host and port of the first listener (what a listener without its own entry falls
    /// back to; handlers answer with the connection's listener, `handlers::Ctx::advertised`).
    pub advertised_host: String,
    pub advertised_port: i32,
    /// Every bound listener, in `listeners` order.
    pub listeners: Vec<Arc<listeners::Listener>>,
    /// SCRAM credentials (durable; see [`scram`]).
    pub scram: scram::CredentialStore,
    /// Delegation tokens (durable; see [`delegation_tokens`]).
    pub delegation_tokens: delegation_tokens::TokenStore,
    /// The authorizer and its durable ACLs (see [`acl`]).
    pub authorizer: acl::Authorizer,
    /// Client quotas (durable; see [`quotas`]).
    pub quotas: quotas::ClientQuotas,
    /// Flips to true when shutdown starts; long-polls and readers watch it.
    pub shutdown: watch::Receiver<bool>,
    /// The `queued.max.request.bytes` budget: request bytes, read buffers beyond their first
    /// chunk, and fetch responses in flight (see [`memory`]).
    pub request_memory: memory::RequestMemory,
    /// The threads that read fetches from the journal files.
    pub(crate) fetch_readers: handlers::fetch::FetchReaders,
    /// Counters for the admin listener's `/metrics` (recorded whether or not it is on).
    pub metrics: metrics::Metrics,
}

impl Broker {
    pub fn node_id(&self) -> i32 {
        self.config.node_id
    }
}

pub type SharedBroker = Arc<Broker>;
