//! `sluice-broker`: the Kafka broker on top of `sluice-log`.
//!
//! # Layout
//! - [`server`]: binds the listener, accepts connections up to `max.connections`, and runs
//!   shutdown (stop accepting, answer in-flight requests, sync the log, exit).
//! - `connection`: one task pair per socket. The reader parses frames and starts each request
//!   in arrival order; the writer sends responses in that same order, so pipelined requests
//!   work and responses never overtake each other. At most
//!   [`limits::IN_FLIGHT_PER_CONNECTION_MAX`] requests are in flight per connection.
//! - `handlers/`: one file per Kafka API, and [`api_table`] (`handlers/table.rs`), the one
//!   table of served APIs (key, versions, advertised, handler) that header parsing,
//!   ApiVersions, dispatch and the per-API metrics all read. Produce enqueues its appends while still in arrival
//!   order (so pipelined produces to one partition keep their order) and then waits for
//!   durability concurrently; every other API runs entirely concurrently.
//! - [`topics`]: the topic registry and its durable metadata file.
//! - [`consumer_protocol`]: the consumer protocol's subscription and assignment bytes,
//!   decoded and encoded with `kafka-protocol` for the group coordinator.
//! - [`clock`]: the clock seam, where the group and transaction coordinators' timers get
//!   their time (the system clock, or a manual clock in tests).
//! - [`groups`]: the group coordinator service (the `sluice-coordinator` state machine, its
//!   parked requests, timers and the internal `__consumer_offsets` partition).
//! - [`producer_ids`]: producer-id blocks for idempotent producers, durable across restarts.
//! - [`record_validation`]: what Kafka's LogValidator refuses, checked on the produce path
//!   with the bounded record walk (framing, codecs, decompression bombs, producer ids).
//! - [`listeners`], [`tls`], [`sasl`], [`scram`]: named listeners and their security (TLS on
//!   rustls, SASL PLAIN and SCRAM, the durable SCRAM credentials);
//!   [`delegation_tokens`]: delegation tokens, their store and their SCRAM logins;
//!   `config_security` refuses
//!   the security settings not served yet; [`acl`]: the authorizer and its durable ACLs;
//!   [`quotas`]: client byte-rate quotas and their throttle times.
//! - [`config_table`]: the one table of every broker setting, from which [`config`] (parsing,
//!   file, environment, flags), DescribeConfigs, the topic-config defaults and the docs come;
//!   [`topic_config`], [`limits`], [`error_code`]: topic settings, bounds and error codes.
//! - [`memory`]: the request-memory budget every large network buffer is charged to.
//! - [`metrics`] and `admin`: counters recorded with atomics on the request paths, and the
//!   optional admin listener (`metrics.listen`) serving `/metrics` and `/ready`.
//! - `response_chunks`: responses as chunks (own framing plus shared record bytes) written
//!   with vectored writes, so fetched records are never copied after the log read.
//!
//! Blocking work runs on dedicated threads (fetch reads: `handlers::fetch::read`) or on
//! tokio's blocking pool (admin changes, metadata writes), never on the async workers; no
//! lock is held across an `.await`.

pub mod acl;
mod admin;
pub mod clock;
pub mod compaction;
pub mod config;
mod config_security;
pub mod config_table;
mod connection;
pub mod consumer_protocol;
pub mod delegation_tokens;
pub mod error_code;
mod frame_buffers;
pub mod groups;
mod handlers;
pub mod limits;
pub mod listeners;
mod log_limit;
pub mod memory;
pub mod metrics;
pub mod producer_ids;
pub mod quotas;
pub mod record_validation;
mod replay;
mod response_chunks;
pub mod sasl;
pub mod scram;
pub mod server;
pub mod tls;
mod tls_stream;
pub mod topic_config;
pub mod topics;
pub mod txns;

use std::sync::Arc;

use sluice_log::LogManager;
use tokio::sync::watch;

pub use config::BrokerConfig;
/// The handler table: every API served, its versions, whether it is advertised, its handler.
pub use handlers::table as api_table;
pub use server::Server;

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
