//! The listeners and the process lifecycle: open the log, reconcile topic metadata, load the
//! listeners' TLS and SASL settings, bind every listener, accept up to `max.connections` in
//! total over all listeners (and `max.connections.per.ip` from one address; a connection over
//! either limit is closed at once, as Kafka does), and on shutdown stop accepting, let
//! in-flight requests finish (bounded by [`limits::SHUTDOWN_DRAIN_MS_MAX`]), then shut the log
//! down cleanly. A listener that binds beyond loopback without authentication is warned about,
//! and so is a data directory other users may read or enter.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_log::{fs::StdFs, LogManager, LogManagerConfig};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::clock::Clock;
use crate::config::security::SecurityProtocol;
use crate::config::BrokerConfig;
use crate::config::{limits, listeners};
use crate::memory::RequestMemory;
use crate::net::listeners::Listener;
use crate::services::groups::{self, GroupService};
use crate::services::producer_ids::ProducerIds;
use crate::services::topics::TopicRegistry;
use crate::{net::connection, Broker};

/// A bound, recovered broker that is not yet accepting.
#[derive(Debug)]
pub struct Server {
    /// One socket per listener, in `Broker::listeners` order.
    sockets: Vec<TcpListener>,
    /// The admin listener (`metrics.listen`), when configured.
    admin: Option<TcpListener>,
    broker: Arc<Broker>,
    shutdown_tx: watch::Sender<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("opening the log in {dir}: {error}")]
    Log {
        dir: String,
        error: sluice_log::LogError,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The object backend's stores could not be used (storage.backend=object).
    #[error("object backend: {0}")]
    ObjectBackend(String),
}

fn log_config(config: &BrokerConfig) -> LogManagerConfig {
    let mut lc = LogManagerConfig::new(config.data_dir.clone());
    lc.fsync = config.fsync;
    lc.journal_direct_io = config.journal_direct_io;
    lc.storage = config.storage;
    lc.retention_check_interval_ms = config.retention_check_interval_ms;
    lc.producer_id_expiration_ms = config.producer_id_expiration_ms;
    lc.producer_eviction_idle_ms = config.producer_eviction_idle_ms;
    lc.segment_files_max = segment_files_budget(config);
    lc.segment_files_per_topic_max = segment_files_per_topic(lc.segment_files_max, config);
    lc.cleaner = config.log_cleaner;
    lc.journal_cleaner = config.journal_cleaner;
    lc.journal_file_bytes_max = config.journal_file_bytes;
    lc.record_codec = Some(std::sync::Arc::new(
        crate::services::compaction::ProtocolCodec,
    ));
    lc
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (every segment keeps its file open,
/// as in Kafka, whose operators raise the limit for the same reason) and returns the
/// soft limit in force.
fn raise_file_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        tracing::info!(from = soft, to = hard, "raised the open-file limit");
        return hard;
    }
    soft
}

/// Segment files the log may keep open: the descriptor limit minus one per allowed
/// connection and [`limits::FILE_DESCRIPTORS_RESERVED`], so that accept() and the journal
/// never starve because of segments.
fn segment_files_budget(config: &BrokerConfig) -> usize {
    let limit = raise_file_limit();
    let reserved = limits::FILE_DESCRIPTORS_RESERVED + config.max_connections as u64;
    let budget = limit.saturating_sub(reserved);
    if budget < limits::SEGMENT_FILES_MIN {
        tracing::warn!(limit, reserved, "open-file limit too low for max.connections; connections may be refused before segments are");
    }
    let budget = budget.max(limits::SEGMENT_FILES_MIN);
    tracing::info!(
        open_files_limit = limit,
        segment_files_max = budget,
        "file descriptor budget"
    );
    usize::try_from(budget).unwrap_or(usize::MAX)
}

/// One topic's share of the segment-file budget (`sluice.segment.files.per.topic.percent`).
fn segment_files_per_topic(budget: usize, config: &BrokerConfig) -> usize {
    let percent = u128::from(config.segment_files_per_topic_percent.clamp(1, 100));
    let share = (budget as u128 * percent / 100).max(1);
    usize::try_from(share).unwrap_or(usize::MAX)
}

impl Server {
    /// Recovers the data dir and binds the listener. Blocking work runs on the blocking pool.
    pub async fn bind(config: BrokerConfig) -> Result<Server, StartError> {
        Self::bind_with_clock(config, Clock::system()).await
    }

    /// [`Server::bind`] with the coordinators' timers on `clock` (a manual clock in the
    /// in-process tests; see [`crate::clock`]).
    pub async fn bind_with_clock(config: BrokerConfig, clock: Clock) -> Result<Server, StartError> {
        config.validate()?;
        let started = Instant::now();
        let cfg = config.clone();
        let opened = tokio::task::spawn_blocking(move || -> Result<_, StartError> {
            sluice_log::fs::create_private_dir_all(&cfg.data_dir)?;
            warn_if_data_dir_shared(&cfg.data_dir);
            let round_store =
                crate::services::object_backend::open(&cfg.object_backend, &cfg.data_dir)
                    .map_err(StartError::ObjectBackend)?;
            let (log, report) =
                LogManager::open_with_round_store(log_config(&cfg), Arc::new(StdFs), round_store)
                    .map_err(|error| StartError::Log {
                    dir: cfg.data_dir.display().to_string(),
                    error,
                })?;
            for action in &report.actions {
                tracing::info!(action = %action, "recovery");
            }
            // The offsets partition belongs to the group coordinator, not to a topic.
            let recovered: Vec<_> = report
                .partitions
                .iter()
                .map(|(k, _)| k.clone())
                .filter(|k| {
                    k.topic_id != groups::OFFSETS_TOPIC_ID
                        && k.topic_id != crate::services::txns::TXN_STATE_TOPIC_ID
                })
                .collect();
            let on_disk = report.partitions.len();
            let topics = TopicRegistry::open(&cfg.data_dir, &log, &recovered, on_disk, &cfg)?;
            let groups = GroupService::open(&log, cfg.group_config(), clock).map_err(|error| {
                StartError::Log {
                    dir: cfg.data_dir.display().to_string(),
                    error,
                }
            })?;
            let groups = Arc::new(groups);
            let producer_ids = ProducerIds::open(&cfg.data_dir)?;
            let scram = crate::services::scram::CredentialStore::open(&cfg.data_dir)?;
            let tokens = crate::services::delegation_tokens::TokenStore::open(
                &cfg.data_dir,
                cfg.delegation_token.clone(),
                groups.clock().clone(),
            )?;
            let authorizer =
                crate::services::acl::Authorizer::open(&cfg.data_dir, cfg.authorizer.clone())?;
            let quotas = crate::services::quotas::ClientQuotas::open(&cfg.data_dir)?;
            let security = load_security(&cfg)?;
            let segment_bytes = cfg.transaction_state_log_segment_bytes;
            let txns = crate::services::txns::TxnService::open(
                &log,
                cfg.txn.clone(),
                segment_bytes,
                Arc::clone(&groups),
            )
            .map_err(|error| StartError::Log {
                dir: cfg.data_dir.display().to_string(),
                error,
            })?;
            Ok((
                log,
                topics,
                groups,
                producer_ids,
                (scram, tokens, authorizer, quotas),
                security,
                txns,
                report,
            ))
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))??;
        let (
            log,
            topics,
            groups,
            producer_ids,
            (scram, tokens, authorizer, quotas),
            security,
            txns,
            report,
        ) = opened;
        let specs = config.served_listener_specs();
        let mut sockets = Vec::with_capacity(specs.len());
        let mut bound = Vec::with_capacity(specs.len());
        for (i, (spec, (tls, sasl))) in specs.iter().zip(security).enumerate() {
            let socket = TcpListener::bind(spec.bind_addr()).await.map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("listener {}://{}: {e}", spec.name, spec.addr),
                )
            })?;
            let local = socket.local_addr()?;
            let (advertised_host, advertised_port) =
                listeners::advertised(spec, i == 0, &config.advertised_listeners, local)?;
            let protocol = config.listener_protocol(&spec.name)?;
            warn_if_open(&spec.name, protocol, tls.as_deref(), local);
            bound.push(Arc::new(Listener {
                name: spec.name.clone(),
                protocol,
                local,
                advertised_host,
                advertised_port,
                tls,
                sasl,
            }));
            sockets.push(socket);
        }
        let admin = match &config.metrics_listen {
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("metrics.listen {addr}: {e}"))
            })?),
            None => None,
        };
        let first = bound[0].clone();
        let (local, advertised_host, advertised_port) = (
            first.local,
            first.advertised_host.clone(),
            first.advertised_port,
        );
        for l in &bound {
            tracing::info!(listener = %l.name, protocol = l.protocol.name(), listen = %l.local,
                advertised = %format!("{}:{}", l.advertised_host, l.advertised_port), "listener bound");
        }
        tracing::info!(
            listen = %local, advertised = %format!("{advertised_host}:{advertised_port}"), node_id = config.node_id,
            data_dir = %config.data_dir.display(), fsync = ?config.fsync, storage = ?config.storage, auto_create_topics = config.auto_create_topics,
            topics = topics.all().len(), partitions_recovered = report.partitions.len(),
            journal_entries_replayed = report.journal_entries_replayed, startup_ms = started.elapsed().as_millis() as u64,
            "sluice broker started"
        );
        if config.storage == sluice_log::Storage::Null {
            tracing::warn!("sluice.storage=null: produce is acknowledged and nothing is kept (calibration only)");
        }
        let (shutdown_tx, shutdown) = watch::channel(false);
        let request_memory = RequestMemory::new(config.queued_max_request_bytes);
        let fetch_readers = crate::handlers::fetch::FetchReaders::start()?;
        let broker = Arc::new(Broker {
            request_memory,
            fetch_readers,
            metrics: crate::net::scrape::broker_metrics(),
            config,
            log,
            topics,
            groups,
            txns: Arc::new(txns),
            producer_ids,
            advertised_host,
            advertised_port,
            listeners: bound,
            scram,
            delegation_tokens: tokens,
            authorizer,
            quotas,
            shutdown,
        });
        broker.groups.start(broker.shutdown.clone());
        let b = Arc::clone(&broker);
        tokio::spawn(async move {
            let shutdown = b.shutdown.clone();
            b.txns.run_timer(&b.topics, shutdown, &b.config).await;
        });
        start_token_expiry(&broker);
        Ok(Server {
            sockets,
            admin,
            broker,
            shutdown_tx,
        })
    }

    /// The first listener's address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.sockets[0].local_addr()
    }

    /// Every listener's name and bound address, first one first.
    pub fn listener_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.broker
            .listeners
            .iter()
            .map(|l| (l.name.clone(), l.local))
            .collect()
    }

    /// The admin listener's address (`metrics.listen`), if it is on.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Accepts connections until `signal` completes, then shuts down cleanly.
    pub async fn run(self, signal: impl Future<Output = ()>) -> Result<(), StartError> {
        let Server {
            sockets,
            admin,
            broker,
            shutdown_tx,
        } = self;
        // Ready from here on: the Kafka listeners accept below, and /ready says so until
        // shutdown begins.
        let admin = admin.map(|l| tokio::spawn(crate::net::admin::serve(l, broker.clone())));
        let shared = Accepting {
            slots: Arc::new(Semaphore::new(broker.config.max_connections)),
            per_ip: Arc::new(Mutex::new(HashMap::new())),
        };
        // Every connection holds a clone of `alive_tx`; when all are dropped, `alive_rx`
        // returns None and we know every connection has finished.
        let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
        let (stop_tx, stop_rx) = watch::channel(false);
        let reload = spawn_tls_reload(&broker, stop_rx.clone());
        let acceptors: Vec<_> = sockets
            .into_iter()
            .enumerate()
            .map(|(index, socket)| {
                tokio::spawn(accept_loop(
                    socket,
                    index,
                    broker.clone(),
                    shared.clone(),
                    alive_tx.clone(),
                    stop_rx.clone(),
                ))
            })
            .collect();
        signal.await;
        let _ = stop_tx.send(true);
        for a in acceptors {
            // Each returns once it stopped accepting (its socket is closed with it).
            let _ = a.await;
        }
        if let Some(r) = reload {
            r.abort();
        }
        tracing::info!("shutdown: no longer accepting; finishing in-flight requests");
        let _ = shutdown_tx.send(true);
        drop(alive_tx);
        let drained = tokio::time::timeout(
            Duration::from_millis(limits::SHUTDOWN_DRAIN_MS_MAX),
            alive_rx.recv(),
        )
        .await;
        if drained.is_err() {
            tracing::warn!("shutdown: connections still open after the drain limit; closing them");
        }
        let log = broker.log.clone();
        let result = tokio::task::spawn_blocking(move || log.shutdown())
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        if let Some(admin) = admin {
            admin.abort();
        }
        match result {
            Ok(()) => tracing::info!("shutdown complete: log synced"),
            Err(e) => {
                tracing::error!(error = %e, "log shutdown failed");
                return Err(StartError::Log {
                    dir: broker.config.data_dir.display().to_string(),
                    error: e,
                });
            }
        }
        Ok(())
    }
}

/// Open connections per client address. Entries are removed at zero, so the map holds only
/// addresses with open connections (at most `max.connections` entries).
type PerIp = Arc<Mutex<HashMap<IpAddr, usize>>>;

/// One connection's place in the per-address count; given back when dropped.
struct PerIpSlot {
    map: PerIp,
    ip: IpAddr,
}

impl PerIpSlot {
    /// Counts a new connection from `ip`, or None when the address is at its limit
    /// (`max.connections.per.ip`, or its entry in `max.connections.per.ip.overrides`).
    fn take(map: &PerIp, config: &BrokerConfig, ip: IpAddr) -> Option<PerIpSlot> {
        let max = config.connections_per_ip_max(ip);
        let mut counts = map.lock();
        let n = counts.entry(ip).or_insert(0);
        if *n >= max {
            if *n == 0 {
                counts.remove(&ip);
            }
            return None;
        }
        *n += 1;
        Some(PerIpSlot {
            map: map.clone(),
            ip,
        })
    }
}

impl Drop for PerIpSlot {
    fn drop(&mut self) {
        let mut counts = self.map.lock();
        if let Some(n) = counts.get_mut(&self.ip) {
            debug_assert!(*n > 0);
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// The connection limits every listener's accept loop shares.
#[derive(Clone)]
struct Accepting {
    slots: Arc<Semaphore>,
    per_ip: PerIp,
}

/// Accepts on one listener until told to stop.
async fn accept_loop(
    socket: TcpListener,
    index: usize,
    broker: Arc<Broker>,
    shared: Accepting,
    alive_tx: mpsc::Sender<()>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = stopped(&mut stop) => return,
            accepted = socket.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Ok(permit) = shared.slots.clone().try_acquire_owned() else {
                        crate::log_limit::warn_limited!(crate::log_limit::CONNECTION_LIMIT, %peer, max = broker.config.max_connections, "connection limit reached; closing new connection (max.connections)");
                        drop(stream);
                        continue;
                    };
                    let Some(per_ip) = PerIpSlot::take(&shared.per_ip, &broker.config, peer.ip()) else {
                        crate::log_limit::warn_limited!(crate::log_limit::CONNECTION_LIMIT, %peer, max = broker.config.connections_per_ip_max(peer.ip()), "connection limit for this address reached; closing new connection (max.connections.per.ip)");
                        drop(stream);
                        continue;
                    };
                    let broker = broker.clone();
                    let alive = alive_tx.clone();
                    tokio::spawn(async move {
                        let open = OpenConnection::new(broker.clone());
                        connection::serve(broker, stream, peer, index).await;
                        drop(open);
                        drop(per_ip);
                        drop(permit);
                        drop(alive);
                    });
                }
                Err(e) => {
                    // Usually EMFILE or a reset during accept: back off briefly, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
}

/// Completes once shutdown began (holds no watch guard across an await).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Each listener's TLS and SASL settings, loaded (files read) before anything binds, so a
/// bad store refuses to start. Blocking.
#[allow(clippy::type_complexity)]
fn load_security(
    config: &BrokerConfig,
) -> std::io::Result<
    Vec<(
        Option<Arc<crate::net::tls::Tls>>,
        Option<Arc<crate::net::sasl::SaslConfig>>,
    )>,
> {
    let mut out = Vec::new();
    for spec in config.served_listener_specs() {
        let protocol = config
            .listener_protocol(&spec.name)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let fail = |e: String| std::io::Error::other(format!("listener {}: {e}", spec.name));
        let tls = match protocol.uses_tls() {
            true => Some(Arc::new(
                crate::net::tls::Tls::load(&spec.name, &config.security).map_err(fail)?,
            )),
            false => None,
        };
        let sasl = match protocol.uses_sasl() {
            true => Some(Arc::new(
                crate::net::sasl::SaslConfig::load(&spec.name, &config.security).map_err(fail)?,
            )),
            false => None,
        };
        out.push((tls, sasl));
    }
    Ok(out)
}

/// Warns when other users may read or enter the data directory. An existing directory is the
/// operator's and is left as it is (it may be a mount point); everything the broker creates
/// under it is owner-only (`sluice_log::fs::DIR_MODE`, `FILE_MODE`).
fn warn_if_data_dir_shared(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        tracing::warn!(data_dir = %dir.display(), mode = %format!("{mode:o}"), "data directory is accessible to other users; restrict it (chmod 700) so only the broker's user reaches the data");
    }
}

/// Warns when a listener reachable beyond loopback lets clients in without authentication.
fn warn_if_open(
    name: &str,
    protocol: SecurityProtocol,
    tls: Option<&crate::net::tls::Tls>,
    local: SocketAddr,
) {
    let authenticated = protocol.uses_sasl()
        || tls.is_some_and(|t| t.client_auth == crate::net::tls::ClientAuth::Required);
    if !authenticated && !local.ip().is_loopback() {
        tracing::warn!(listener = name, protocol = protocol.name(), %local, "listener is reachable beyond loopback without authentication: anyone who can reach it can read, write and delete every topic");
    }
}

/// Checks the listeners' TLS store files for changes every [`limits::TLS_RELOAD_CHECK_MS`]
/// (on the blocking pool) and reloads them; None when no listener uses TLS.
fn spawn_tls_reload(
    broker: &Arc<Broker>,
    mut stop: watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    let tls: Vec<_> = broker
        .listeners
        .iter()
        .filter_map(|l| l.tls.clone())
        .collect();
    if tls.is_empty() {
        return None;
    }
    Some(tokio::spawn(async move {
        let every = Duration::from_millis(limits::TLS_RELOAD_CHECK_MS);
        loop {
            tokio::select! {
                () = stopped(&mut stop) => return,
                _ = tokio::time::sleep(every) => {}
            }
            let tls = tls.clone();
            let _ = tokio::task::spawn_blocking(move || {
                for t in &tls {
                    t.reload_if_changed();
                }
            })
            .await;
        }
    }))
}

/// A client connection being served, counted until dropped.
#[derive(Debug)]
pub(crate) struct OpenConnection(Arc<Broker>);

impl OpenConnection {
    pub(crate) fn new(broker: Arc<Broker>) -> Self {
        broker
            .metrics
            .connections_open
            .fetch_add(1, Ordering::Relaxed);
        Self(broker)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0
            .metrics
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Removes expired tokens every `delegation.token.expiry.check.interval.ms` until shutdown
/// (on the blocking pool: a removal writes the file). Not started without a secret key.
fn start_token_expiry(broker: &Arc<Broker>) {
    if !broker.delegation_tokens.enabled() {
        return;
    }
    let broker = Arc::clone(broker);
    let every_ms = broker
        .delegation_tokens
        .config()
        .expiry_check_interval_ms
        .max(1);
    let every = std::time::Duration::from_millis(u64::try_from(every_ms).unwrap_or(1));
    let mut shutdown = broker.shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = shutdown.wait_for(|s| *s) => return,
                () = tokio::time::sleep(every) => {}
            }
            let b = Arc::clone(&broker);
            let _ = tokio::task::spawn_blocking(move || b.delegation_tokens.purge_expired()).await;
        }
    });
}
