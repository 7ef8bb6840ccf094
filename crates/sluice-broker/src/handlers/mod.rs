//! One module per Kafka API, and the router between them. The router only routes, through
//! the handler table ([`table`], the single list of APIs, versions and handlers): each
//! module decodes its own request, does its work and encodes its own response.
//!
//! [`start`] is awaited by the connection reader in arrival order and returns the rest of the
//! work: a future the connection spawns; for Produce, a [`produce::ProduceCall`] whose
//! appends are already queued (keeping per-partition order for pipelined requests) and which
//! the connection's writer waits on itself, without a task; for Fetch, a decoded
//! [`fetch::FetchCall`] the writer runs itself. Both kinds of call are reused per
//! connection ([`Calls`]).
//!
//! Direction: below the network (the connection calls in; the SASL gate in `net::sasl`
//! answers SaslHandshake and SaslAuthenticate itself) and above the services, the leaf
//! modules and the configuration, which handlers call. A handler reads the crate root's
//! `Broker`; it never imports `net` (checked by `tests/layers.rs`).

mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_client_quotas;
mod alter_configs;
mod alter_user_scram_credentials;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_delegation_token;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_delegation_token;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_topic_partitions;
mod describe_transactions;
mod describe_user_scram_credentials;
mod end_txn;
mod expire_delegation_token;
pub(crate) mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_config_resources;
mod list_groups;
mod list_offsets;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod offset_for_leader_epoch;
pub(crate) mod produce;
mod renew_delegation_token;
mod response_errors;
mod sync_group;
pub mod table;
#[cfg(test)]
pub(crate) mod test_rng;
mod txn_offset_commit;
mod wire;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use sluice_protocol::{codec, header::Request};

use crate::Broker;
pub(crate) use response_errors::ResponseErrors;

/// What the connection writes for one request.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A framed response; `error` when it carries a non-zero error code (for the per-API
    /// error counter).
    Frame { frame: BytesMut, error: bool },
    /// Nothing (acks=0 produce).
    NoResponse,
    /// Close the connection after the responses before this one.
    Close,
}

impl Reply {
    /// Whether the response carries an error code (see [`Reply::Frame`]).
    pub(crate) fn has_error(&self) -> bool {
        matches!(self, Reply::Frame { error: true, .. })
    }
}

pub(crate) type Pending = Pin<Box<dyn Future<Output = Reply> + Send>>;

/// What starting a request gave the connection.
pub(crate) enum Started {
    /// The rest of the work, to spawn.
    Task(Pending),
    /// A produce request (see [`produce::Started`]).
    Produce(produce::Started),
    /// A fetch request, decoded: the writer runs it.
    Fetch(Box<fetch::FetchCall>),
}

/// The calls a connection keeps for reuse, shared by its reader (which takes one per
/// request) and its writer (which gives it back once the response is written).
#[derive(Debug, Default, Clone)]
pub(crate) struct Calls {
    pub(crate) produce: produce::ProduceCalls,
    pub(crate) fetch: fetch::FetchCalls,
}

/// Per-request context handed to a handler.
#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub broker: Arc<Broker>,
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    /// The request header's client id (groups record it per member).
    pub client_id: Option<StrBytes>,
    pub peer: SocketAddr,
    /// Index of the listener the client connected through (in `Broker::listeners`).
    pub listener: usize,
    /// The connection's principal (`User:<name>`, `User:ANONYMOUS` before or without
    /// authentication), what the authorizer (`crate::services::acl`) checks; `peer` is its host.
    pub principal: Arc<str>,
    /// The principal logged in with a delegation token (see `crate::services::delegation_tokens`).
    pub token_authenticated: bool,
}

impl Ctx {
    /// The advertised host and port of the listener the client connected through.
    pub fn advertised(&self) -> (String, i32) {
        let b = &self.broker;
        match b.listeners.get(self.listener) {
            Some(l) => (l.advertised_host.clone(), l.advertised_port),
            None => (b.advertised_host.clone(), b.advertised_port),
        }
    }

    /// The one authorization check handlers call: may this request's principal, from its
    /// host, do `operation` (`acl::op`) on the resource (`acl::resource`) named `name`?
    /// Allocates nothing (it runs once per topic on the produce and fetch paths).
    pub fn allowed(&self, operation: i8, resource_type: i8, name: &str) -> bool {
        self.who()
            .allowed(&self.broker, operation, resource_type, name)
    }

    /// Who sent the request, to check from blocking work ([`Who::allowed`]).
    pub fn who(&self) -> Who {
        Who {
            principal: self.principal.clone(),
            host: self.peer.ip(),
        }
    }

    /// [`Ctx::allowed`] for the cluster resource.
    pub fn allowed_cluster(&self, operation: i8) -> bool {
        self.allowed(
            operation,
            crate::services::acl::resource::CLUSTER,
            crate::services::acl::CLUSTER_NAME,
        )
    }

    /// WRITE on a transactional id: what InitProducerId, AddPartitionsToTxn,
    /// AddOffsetsToTxn, EndTxn, TxnOffsetCommit and a transactional Produce need (denied:
    /// TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
    pub fn allowed_transactional_id(&self, transactional_id: &str) -> bool {
        self.allowed(
            crate::services::acl::op::WRITE,
            crate::services::acl::resource::TRANSACTIONAL_ID,
            transactional_id,
        )
    }

    /// Kafka's check for an idempotent producer id: IDEMPOTENT_WRITE on the cluster, or
    /// WRITE on any topic (denied: CLUSTER_AUTHORIZATION_FAILED).
    pub fn allowed_idempotent_write(&self) -> bool {
        use crate::services::acl::{op, resource};
        self.allowed_cluster(op::IDEMPOTENT_WRITE)
            || self.broker.authorizer.authorize_by_resource_type(
                &self.principal,
                self.peer.ip(),
                op::WRITE,
                resource::TOPIC,
            )
    }

    /// The `*_authorized_operations` bit field for a resource (`acl::supported::*` lists
    /// the operations Kafka reports for each type).
    pub fn authorized_operations(&self, resource_type: i8, name: &str, operations: &[i8]) -> i32 {
        self.broker.authorizer.authorized_operations(
            &self.principal,
            self.peer.ip(),
            resource_type,
            name,
            operations,
        )
    }

    /// Decodes the request body; a malformed body is logged and closes the connection.
    pub fn decode<R: Decodable>(&self, mut body: Bytes) -> Result<R, Reply> {
        codec::decode_request(&mut body, self.version).map_err(|e| {
            crate::log_limit::warn_limited!(crate::log_limit::MALFORMED_REQUEST, peer = %self.peer, api = ?self.api_key, version = self.version, error = %e, "malformed request; closing connection");
            Reply::Close
        })
    }

    /// Encodes a response at the request's version.
    pub fn respond<R: Encodable + ResponseErrors>(&self, body: &R) -> Reply {
        encode(self.api_key, self.version, self.correlation_id, body)
    }

    /// Runs `f` on the blocking pool and encodes what it returns as the response.
    pub async fn respond_blocking<R: Encodable + ResponseErrors + Send + 'static>(
        &self,
        f: impl FnOnce(&Broker) -> R + Send + 'static,
    ) -> Reply {
        match self.blocking(f).await {
            Some(r) => self.respond(&r),
            None => Reply::Close,
        }
    }

    /// Runs blocking work (file I/O, admin changes) on the blocking pool.
    pub async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Broker) -> T + Send + 'static,
    ) -> Option<T> {
        let broker = self.broker.clone();
        match tokio::task::spawn_blocking(move || f(&broker)).await {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::error!(api = ?self.api_key, error = %e, "blocking task failed");
                None
            }
        }
    }
}

/// A request's principal and host, movable into blocking work.
#[derive(Debug, Clone)]
pub(crate) struct Who {
    pub principal: Arc<str>,
    pub host: std::net::IpAddr,
}

impl Who {
    /// See [`Ctx::allowed`].
    pub fn allowed(&self, b: &Broker, operation: i8, resource_type: i8, name: &str) -> bool {
        b.authorizer
            .authorize(&self.principal, self.host, operation, resource_type, name)
    }
}

/// Encodes a response at the request's version; a failure closes the connection.
pub(crate) fn encode<R: Encodable + ResponseErrors>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &R,
) -> Reply {
    let mut out = BytesMut::new();
    match codec::encode_response(&mut out, api_key, version, correlation_id, body) {
        Ok(()) => Reply::Frame {
            frame: out,
            error: body.has_error(),
        },
        Err(e) => {
            tracing::error!(api = ?api_key, version, error = %e, "response encode failed; closing connection");
            Reply::Close
        }
    }
}

fn task(f: impl Future<Output = Reply> + Send + 'static) -> Started {
    Started::Task(Box::pin(f))
}

pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Starts one request through its row of the handler table ([`table::HANDLERS`]).
/// Produce and fetch calls come from `calls`, the connection's kept ones.
pub(crate) async fn start(
    broker: &Arc<Broker>,
    req: Request,
    peer: SocketAddr,
    listener: usize,
    (principal, token_authenticated): (Arc<str>, bool),
    calls: &Calls,
) -> Started {
    let Some(handler) = table::handler(req.api_key) else {
        // Unreachable: the header parser refuses keys the table does not list.
        debug_assert!(false, "{:?} parsed without a row", req.api_key);
        tracing::error!(api = ?req.api_key, "no handler for a parsed API");
        return task(async { Reply::Close });
    };
    let ctx = Ctx {
        broker: broker.clone(),
        api_key: req.api_key,
        version: req.header.request_api_version,
        correlation_id: req.header.correlation_id,
        client_id: req.header.client_id,
        peer,
        listener,
        principal,
        token_authenticated,
    };
    let body = req.body;
    match handler.route {
        table::Route::Produce => {
            Started::Produce(produce::start(ctx, body, calls.produce.take()).await)
        }
        table::Route::Fetch => Started::Fetch(fetch::start(ctx, body, calls.fetch.take())),
        table::Route::Task(handle) => Started::Task(handle(ctx, body)),
        // The connection's SASL gate answers these before routing; they never get here.
        table::Route::SaslGate => task(async { Reply::Close }),
    }
}
