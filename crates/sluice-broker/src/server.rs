//! The listener and the process lifecycle: open the log, reconcile topic metadata, bind,
//! accept up to `max.connections` (and `max.connections.per.ip` from one address; a
//! connection over either limit is closed at once, as Kafka does), and on shutdown stop accepting, let in-flight requests
//! finish (bounded by [`limits::SHUTDOWN_DRAIN_MS_MAX`]), then shut the log down cleanly.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_log::{fs::StdFs, LogManager, LogManagerConfig};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::config::BrokerConfig;
use crate::groups::{self, GroupService};
use crate::memory::RequestMemory;
use crate::producer_ids::ProducerIds;
use crate::topics::TopicRegistry;
use crate::{connection, limits, Broker};

/// A bound, recovered broker that is not yet accepting.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
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
}

fn log_config(config: &BrokerConfig) -> LogManagerConfig {
    let mut lc = LogManagerConfig::new(config.data_dir.clone());
    lc.fsync = config.fsync;
    lc.retention_check_interval_ms = config.retention_check_interval_ms;
    lc.producer_id_expiration_ms = config.producer_id_expiration_ms;
    lc.segment_files_max = segment_files_budget(config);
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

impl Server {
    /// Recovers the data dir and binds the listener. Blocking work runs on the blocking pool.
    pub async fn bind(config: BrokerConfig) -> Result<Server, StartError> {
        config.validate()?;
        let started = Instant::now();
        let cfg = config.clone();
        let opened = tokio::task::spawn_blocking(move || -> Result<_, StartError> {
            sluice_log::fs::create_private_dir_all(&cfg.data_dir)?;
            let (log, report) =
                LogManager::open(log_config(&cfg), Arc::new(StdFs)).map_err(|error| {
                    StartError::Log {
                        dir: cfg.data_dir.display().to_string(),
                        error,
                    }
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
                        && k.topic_id != crate::txns::TXN_STATE_TOPIC_ID
                })
                .collect();
            let on_disk = report.partitions.len();
            let topics = TopicRegistry::open(&cfg.data_dir, &log, &recovered, on_disk, &cfg)?;
            let groups =
                GroupService::open(&log, cfg.group_config()).map_err(|error| StartError::Log {
                    dir: cfg.data_dir.display().to_string(),
                    error,
                })?;
            let producer_ids = ProducerIds::open(&cfg.data_dir)?;
            let txns =
                crate::txns::TxnService::open(&log, sluice_coordinator::TxnConfig::default())
                    .map_err(|error| StartError::Log {
                        dir: cfg.data_dir.display().to_string(),
                        error,
                    })?;
            Ok((log, topics, groups, producer_ids, txns, report))
        })
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))??;
        let (log, topics, groups, producer_ids, txns, report) = opened;
        let listener = TcpListener::bind(&config.listen).await?;
        let admin = match &config.metrics_listen {
            Some(addr) => Some(TcpListener::bind(addr).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("metrics.listen {addr}: {e}"))
            })?),
            None => None,
        };
        let local = listener.local_addr()?;
        let (advertised_host, advertised_port) = advertised(&config, local)?;
        tracing::info!(
            listen = %local, advertised = %format!("{advertised_host}:{advertised_port}"), node_id = config.node_id,
            data_dir = %config.data_dir.display(), fsync = ?config.fsync, auto_create_topics = config.auto_create_topics,
            topics = topics.all().len(), partitions_recovered = report.partitions.len(),
            journal_entries_replayed = report.journal_entries_replayed, startup_ms = started.elapsed().as_millis() as u64,
            "sluice broker started"
        );
        let (shutdown_tx, shutdown) = watch::channel(false);
        let request_memory = RequestMemory::new(config.queued_max_request_bytes);
        let fetch_readers = crate::handlers::fetch::FetchReaders::start()?;
        let broker = Arc::new(Broker {
            request_memory,
            fetch_readers,
            metrics: crate::metrics::Metrics::new(),
            config,
            log,
            topics,
            groups: Arc::new(groups),
            txns: Arc::new(txns),
            producer_ids,
            advertised_host,
            advertised_port,
            shutdown,
        });
        broker.groups.start(broker.shutdown.clone());
        broker.txns.start(Arc::clone(&broker));
        Ok(Server {
            listener,
            admin,
            broker,
            shutdown_tx,
        })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
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
            listener,
            admin,
            broker,
            shutdown_tx,
        } = self;
        // Ready from here on: the Kafka listener accepts below, and /ready says so until
        // shutdown begins.
        let admin = admin.map(|l| tokio::spawn(crate::admin::serve(l, broker.clone())));
        let slots = Arc::new(Semaphore::new(broker.config.max_connections));
        let per_ip: PerIp = Arc::new(Mutex::new(HashMap::new()));
        // Every connection holds a clone of `alive_tx`; when all are dropped, `alive_rx`
        // returns None and we know every connection has finished.
        let (alive_tx, mut alive_rx) = mpsc::channel::<()>(1);
        tokio::pin!(signal);
        loop {
            tokio::select! {
                _ = &mut signal => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let Ok(permit) = slots.clone().try_acquire_owned() else {
                            tracing::warn!(%peer, max = broker.config.max_connections, "connection limit reached; closing new connection (max.connections)");
                            drop(stream);
                            continue;
                        };
                        let Some(per_ip) = PerIpSlot::take(&per_ip, &broker.config, peer.ip()) else {
                            tracing::warn!(%peer, max = broker.config.connections_per_ip_max(peer.ip()), "connection limit for this address reached; closing new connection (max.connections.per.ip)");
                            drop(stream);
                            continue;
                        };
                        let broker = broker.clone();
                        let alive = alive_tx.clone();
                        tokio::spawn(async move {
                            let open = crate::metrics::OpenConnection::new(broker.clone());
                            connection::serve(broker, stream, peer).await;
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
        tracing::info!("shutdown: no longer accepting; finishing in-flight requests");
        drop(listener);
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

fn advertised(config: &BrokerConfig, local: SocketAddr) -> std::io::Result<(String, i32)> {
    let Some(adv) = &config.advertised_listener else {
        return Ok((local.ip().to_string(), i32::from(local.port())));
    };
    let (host, port) = adv.rsplit_once(':').ok_or_else(|| {
        std::io::Error::other(format!("advertised listener '{adv}' is not host:port"))
    })?;
    let port: u16 = port
        .parse()
        .map_err(|_| std::io::Error::other(format!("bad port in advertised listener '{adv}'")))?;
    Ok((host.trim_matches(['[', ']']).to_string(), i32::from(port)))
}
