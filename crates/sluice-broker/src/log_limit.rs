//! Rate-limited log lines for events a client can cause at will: malformed frames and
//! requests, refused connections, failed handshakes and logins, a full producer table.
//!
//! Guarantee: each kind of event writes at most one line per [`limits::LOG_LINE_INTERVAL_MS`]
//! (a process-wide [`LogLimit`] per kind), and that line carries `suppressed`, the number of
//! lines of its kind left out since the previous one. So a flood of bad input costs the
//! broker a counter increment per event, never disk, journald or CPU per line, and every
//! kind still shows up in the log within one interval of its first occurrence (the first
//! one at once). Lines for one-off events (startup, shutdown, storage errors) are not
//! limited: no client can repeat them.

use sluice_log::log_limit::LogLimit;

use crate::config::limits;

/// A limit of one line per [`limits::LOG_LINE_INTERVAL_MS`] (the log crate's [`LogLimit`],
/// shared with its damaged-read lines).
const fn kind() -> LogLimit {
    LogLimit::new(limits::LOG_LINE_INTERVAL_MS)
}

/// `tracing::warn!` through a [`LogLimit`]: the line gets a `suppressed` field.
macro_rules! warn_limited {
    ($limit:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limit.check() {
            tracing::warn!(suppressed, $($arg)+);
        }
    };
}

/// `tracing::info!` through a [`LogLimit`]: the line gets a `suppressed` field.
macro_rules! info_limited {
    ($limit:expr, $($arg:tt)+) => {
        if let Some(suppressed) = $limit.check() {
            tracing::info!(suppressed, $($arg)+);
        }
    };
}

pub(crate) use {info_limited, warn_limited};

/// The kinds of client-caused lines (one limit each).
pub(crate) static BAD_FRAME: LogLimit = kind();
pub(crate) static FRAME_TIMEOUT: LogLimit = kind();
pub(crate) static UNUSABLE_REQUEST: LogLimit = kind();
pub(crate) static MALFORMED_REQUEST: LogLimit = kind();
pub(crate) static UNAUTHENTICATED_REQUEST: LogLimit = kind();
pub(crate) static SASL_FAILED: LogLimit = kind();
pub(crate) static TLS_HANDSHAKE_FAILED: LogLimit = kind();
pub(crate) static CONNECTION_LIMIT: LogLimit = kind();
pub(crate) static CONNECTION_CLOSED_IDLE: LogLimit = kind();
pub(crate) static PRODUCER_STATE_FULL: LogLimit = kind();
pub(crate) static PRODUCER_IDS_THROTTLED: LogLimit = kind();

/// Logs (rate-limited) a new idempotent producer refused because a partition's producer
/// table is full of recently active producers (`LogError::ProducerStateFull`, answered
/// NOT_ENOUGH_REPLICAS): until one of them has been idle for the eviction window, no new
/// producer writes there, which an operator must be able to see. `partition` when known.
pub(crate) fn producer_state_full(error: &sluice_log::LogError, partition: Option<(&str, i32)>) {
    if !matches!(error, sluice_log::LogError::ProducerStateFull { .. }) {
        return;
    }
    let (topic, partition) = partition.unwrap_or(("", -1));
    warn_limited!(
        PRODUCER_STATE_FULL,
        topic = %topic,
        partition,
        %error,
        "new idempotent producer refused (NOT_ENOUGH_REPLICAS): the partition's producer table is full of producers active within sluice.producer.eviction.idle.ms"
    );
}
