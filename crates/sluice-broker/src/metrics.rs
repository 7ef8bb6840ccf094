//! The broker's counters, recorded on the request paths: per API (requests, errors, latency),
//! per topic ([`TopicStats`]), open connections and parked fetches. The admin listener's
//! scrape (`net::scrape`) turns them, and the state it reads at scrape time, into Prometheus
//! families; `docs/operations.md` lists every family.
//!
//! Recording is atomics only: no lock, no allocation, nothing that can fail. The per-API
//! series are created once at start for every row of the handler table (plus one `unknown` for
//! frames whose key we do not serve), and a request is recorded once, by the connection's
//! writer, when its response has been written (or the connection closed instead). Per-topic
//! counters live in the topic's [`TopicStats`], created with the topic and carried over
//! when the topic is republished, so they are bounded by the partition limits.
//!
//! A leaf module: the services, handlers and network record here; it imports none of them.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use sluice_log::histogram::{self, Histogram};
use sluice_record::{BatchHeader, LOG_OVERHEAD};

/// Per-topic counters, shared by every version of the topic's registry entry.
#[derive(Debug, Default)]
pub struct TopicStats {
    /// Record batch bytes accepted into the log (Kafka's BytesInPerSec).
    pub produce_bytes: AtomicU64,
    /// Records accepted, from the batch headers (Kafka's MessagesInPerSec).
    pub produce_records: AtomicU64,
    /// Record bytes sent in fetch responses (Kafka's BytesOutPerSec).
    pub fetch_bytes: AtomicU64,
    /// Records sent in fetch responses: the offsets each answer advances its consumer
    /// past (from the batch headers' offsets the read walked).
    pub fetch_records: AtomicU64,
}

impl TopicStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// No series for this key: it is counted in `unknown`.
const NO_ROW: usize = usize::MAX;

/// One API's series.
#[derive(Debug)]
pub(crate) struct ApiSeries {
    pub(crate) name: String,
    pub(crate) errors: AtomicU64,
    /// Every request is observed here once, so its count is `sluice_requests_total`: one
    /// snapshot renders both families, and a scrape never shows them apart.
    pub(crate) latency_ns: Histogram,
}

impl ApiSeries {
    fn new(name: String) -> Self {
        Self {
            name,
            errors: AtomicU64::new(0),
            latency_ns: Histogram::new(histogram::LATENCY_BOUNDS_NS),
        }
    }
}

/// The broker's own counters (the log and the coordinator keep theirs).
#[derive(Debug)]
pub struct Metrics {
    /// One entry per row of the handler table, in its order, then `unknown` last.
    pub(crate) apis: Box<[ApiSeries]>,
    /// The index in `apis` of each API key's series (`NO_ROW`: not served).
    rows: Box<[usize]>,
    /// Client connections being served.
    pub(crate) connections_open: AtomicUsize,
    /// Fetches waiting for data (long polls).
    pub(crate) fetch_long_polls_parked: AtomicUsize,
}

impl Metrics {
    /// Series for `api_keys` (the handler table's rows, in its order) and `unknown`.
    pub fn new(api_keys: impl IntoIterator<Item = ApiKey>) -> Self {
        let mut apis = Vec::new();
        let mut rows: Vec<usize> = Vec::new();
        for key in api_keys {
            let k = usize::try_from(key as i16).unwrap_or(0);
            if rows.len() <= k {
                rows.resize(k + 1, NO_ROW);
            }
            rows[k] = apis.len();
            apis.push(ApiSeries::new(format!("{key:?}")));
        }
        apis.push(ApiSeries::new("unknown".into()));
        Self {
            apis: apis.into_boxed_slice(),
            rows: rows.into_boxed_slice(),
            connections_open: AtomicUsize::new(0),
            fetch_long_polls_parked: AtomicUsize::new(0),
        }
    }

    /// The series of `api_key`: its row's, or `unknown` for a key not served.
    pub(crate) fn api(&self, api_key: i16) -> &ApiSeries {
        let row = usize::try_from(api_key)
            .ok()
            .and_then(|k| self.rows.get(k).copied())
            .filter(|&i| i != NO_ROW);
        &self.apis[row.unwrap_or(self.apis.len() - 1)]
    }

    /// Records one request whose response was written (or that closed the connection
    /// instead: `error`). `elapsed` runs from the frame's last byte to the response's.
    pub(crate) fn request_done(&self, api_key: i16, elapsed: Duration, error: bool) {
        let api = self.api(api_key);
        if error {
            api.errors.fetch_add(1, Ordering::Relaxed);
        }
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        api.latency_ns.observe(ns);
    }

    /// Counts a parked fetch until the guard is dropped (also when its connection goes).
    pub(crate) fn park_fetch(&self) -> ParkedFetch<'_> {
        self.fetch_long_polls_parked.fetch_add(1, Ordering::Relaxed);
        ParkedFetch(self)
    }
}

/// A fetch long poll in progress (see [`Metrics::park_fetch`]).
#[derive(Debug)]
pub(crate) struct ParkedFetch<'a>(&'a Metrics);

impl Drop for ParkedFetch<'_> {
    fn drop(&mut self) {
        self.0
            .fetch_long_polls_parked
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// Records in the v2 record batches of `records` (their headers' record counts); a
/// truncated tail counts nothing. Header hops only, no pass over the records.
pub(crate) fn batch_records(records: &[u8]) -> u64 {
    let mut at = 0;
    let mut n = 0u64;
    while let Some(header) = records.get(at..).and_then(|r| BatchHeader::parse(r).ok()) {
        n += u64::try_from(header.records_count()).unwrap_or(0);
        let Ok(length) = usize::try_from(header.batch_length()) else {
            break;
        };
        at += LOG_OVERHEAD + length;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    // Goal: record counts come from each batch header, hopping by batch length.
    #[test]
    fn batch_records_hops_headers() {
        let batch = |count: i32, body: usize| {
            let fields = sluice_record::BatchFields {
                records_count: count,
                ..Default::default()
            };
            fields.to_batch(&vec![0u8; body])
        };
        let mut two = batch(3, 10);
        two.extend(batch(5, 0));
        assert_eq!(batch_records(&two), 8);
        two.truncate(two.len() - 1);
        assert_eq!(batch_records(&two), 3, "a truncated batch counts nothing");
        assert_eq!(batch_records(&[]), 0);
    }

    // Goal: every served API has its own series, and a key we do not serve lands in
    // `unknown`, so recording never allocates a series.
    #[test]
    fn api_series_are_preregistered() {
        let m = Metrics::new([ApiKey::Produce, ApiKey::Fetch]);
        m.request_done(ApiKey::Produce as i16, Duration::from_micros(30), false);
        m.request_done(-1, Duration::ZERO, true);
        m.request_done(i16::MAX, Duration::ZERO, true);
        let produce = m.api(ApiKey::Produce as i16);
        assert_eq!(produce.name, "Produce");
        assert_eq!(produce.latency_ns.snapshot().count(), 1);
        let unknown = m.api(-1);
        assert_eq!(unknown.name, "unknown");
        assert_eq!(unknown.errors.load(Ordering::Relaxed), 2);
    }
}
