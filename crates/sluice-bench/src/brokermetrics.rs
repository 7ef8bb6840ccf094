//! Broker-side truth: scrapes a broker's Prometheus `/metrics` (`--broker-metrics URL`,
//! repeatable; the embedded Sluice turns its admin listener on itself) once a second during
//! the run and reports what the broker saw, next to what the clients saw: every histogram
//! family's count, mean and p50/p99 over the run (seconds shown as milliseconds), and per
//! interval Sluice's journal fdatasync p99, group-commit round size and Produce request p99
//! (names in docs/operations.md). A broker whose endpoint exports the standard process
//! metrics (`process_cpu_seconds_total`, `process_resident_memory_bytes`) also gets its CPU
//! and RSS from them, which is how a broker without a local pid (`--broker-pid`) is costed.
//!
//! Guarantees: a scrape is one HTTP/1.0 GET over a plain TCP connection, bounded in time
//! (`limits::METRICS_SCRAPE_TIMEOUT`) and size (`limits::MAX_METRICS_RESPONSE_BYTES`); series
//! kept per scrape are capped (`limits::MAX_METRIC_SERIES`); a failed scrape (a broker that
//! died) is counted and leaves that interval's figures null, never a stale value. Percentiles
//! come from the cumulative buckets' difference between two scrapes, interpolated linearly
//! inside the bucket (Prometheus's `histogram_quantile`), so they are as coarse as the
//! broker's buckets.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Instant;

use serde::Serialize;

use crate::limits;

/// A histogram series at one scrape: cumulative (upper bound, count) buckets, sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hist {
    pub buckets: Vec<(f64, f64)>,
    pub sum: f64,
    pub count: f64,
}

impl Hist {
    /// `self - earlier` (counters restart when the broker restarts: then `self` alone).
    fn minus(&self, earlier: &Hist) -> Hist {
        if self.count < earlier.count || self.buckets.len() != earlier.buckets.len() {
            return self.clone();
        }
        Hist {
            buckets: self
                .buckets
                .iter()
                .zip(&earlier.buckets)
                .map(|(a, b)| (a.0, a.1 - b.1))
                .collect(),
            sum: self.sum - earlier.sum,
            count: self.count - earlier.count,
        }
    }

    fn add(&mut self, o: &Hist) {
        if self.buckets.is_empty() {
            *self = o.clone();
            return;
        }
        if self.buckets.len() == o.buckets.len() {
            for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
                a.1 += b.1;
            }
            self.sum += o.sum;
            self.count += o.count;
        }
    }

    /// Prometheus's histogram_quantile: linear inside the bucket holding rank q * count.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count <= 0.0 {
            return None;
        }
        let rank = q * self.count;
        let mut prev = (0.0, 0.0);
        for &(le, cum) in &self.buckets {
            if cum >= rank {
                if le.is_infinite() {
                    return Some(prev.0);
                }
                let width = cum - prev.1;
                let frac = if width > 0.0 {
                    (rank - prev.1) / width
                } else {
                    1.0
                };
                return Some(prev.0 + (le - prev.0) * frac);
            }
            prev = (le, cum);
        }
        Some(prev.0)
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }
}

/// One scrape: histogram series by `name{labels}` (without `le`), and the process gauges.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    pub hists: BTreeMap<String, Hist>,
    /// `process_cpu_seconds_total` (user + system) and `process_resident_memory_bytes`, when
    /// the endpoint exports them (unlabelled, as the Prometheus clients write them).
    pub cpu_s: Option<f64>,
    pub rss_bytes: Option<f64>,
}

const PROCESS_CPU: &str = "process_cpu_seconds_total";
const PROCESS_RSS: &str = "process_resident_memory_bytes";

/// Parses the Prometheus text format's histogram series (everything else is skipped).
pub fn parse(text: &str) -> Scrape {
    let mut s = Scrape::default();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (series, ""),
        };
        if labels.is_empty() && v.is_finite() && v >= 0.0 {
            match name {
                PROCESS_CPU => s.cpu_s = Some(v),
                PROCESS_RSS => s.rss_bytes = Some(v),
                _ => {}
            }
        }
        let mut le = None;
        let rest: Vec<&str> = labels
            .split(',')
            .filter(|l| !l.is_empty())
            .filter(|l| match l.strip_prefix("le=") {
                Some(b) => {
                    le = parse_le(b.trim_matches('"'));
                    false
                }
                None => true,
            })
            .collect();
        let key = |base: &str| {
            if rest.is_empty() {
                base.to_string()
            } else {
                format!("{base}{{{}}}", rest.join(","))
            }
        };
        let entry = if let Some(base) = name.strip_suffix("_bucket") {
            let Some(le) = le else { continue };
            (key(base), Some(le))
        } else if let Some(base) = name.strip_suffix("_sum") {
            (key(base), None)
        } else if let Some(base) = name.strip_suffix("_count") {
            (key(base), None)
        } else {
            continue;
        };
        if !s.hists.contains_key(&entry.0) && s.hists.len() >= limits::MAX_METRIC_SERIES {
            continue;
        }
        let h = s.hists.entry(entry.0).or_default();
        match entry.1 {
            Some(le) => h.buckets.push((le, v)),
            None if name.ends_with("_sum") => h.sum = v,
            None => h.count = v,
        }
    }
    // `_sum`/`_count` without buckets are summaries or counters, not histograms.
    s.hists.retain(|_, h| !h.buckets.is_empty());
    for h in s.hists.values_mut() {
        h.buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    s
}

fn parse_le(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        _ => v.parse().ok(),
    }
}

/// `http://host:port/path` or `host:port[/path]` (path `/metrics` by default).
pub fn parse_url(url: &str) -> Result<(String, String), String> {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    if rest.starts_with("https://") || url.starts_with("https://") {
        return Err(format!("{url}: only http:// is supported"));
    }
    let (host, path) = match rest.split_once('/') {
        Some((h, p)) => (h, format!("/{p}")),
        None => (rest, "/metrics".to_string()),
    };
    if host.is_empty() || !host.contains(':') {
        return Err(format!("{url}: expected http://HOST:PORT[/path]"));
    }
    Ok((host.to_string(), path))
}

/// One GET; the body on a 200.
pub fn fetch(url: &str) -> Result<String, String> {
    let (host, path) = parse_url(url)?;
    let addr = host
        .to_socket_addrs()
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))?;
    let t = limits::METRICS_SCRAPE_TIMEOUT;
    let mut c = TcpStream::connect_timeout(&addr, t).map_err(|e| format!("{host}: {e}"))?;
    let _ = c.set_read_timeout(Some(t));
    let _ = c.set_write_timeout(Some(t));
    write!(
        c,
        "GET {path} HTTP/1.0\r\nHost: {host}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("{host}: {e}"))?;
    let deadline = Instant::now() + t;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if Instant::now() > deadline {
            return Err(format!("{host}: no complete answer within {t:?}"));
        }
        match c.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > limits::MAX_METRICS_RESPONSE_BYTES {
                    return Err(format!(
                        "{host}: answer larger than {} bytes",
                        limits::MAX_METRICS_RESPONSE_BYTES
                    ));
                }
            }
            Err(e) => return Err(format!("{host}: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{host}: not an HTTP answer"))?;
    let status = head.lines().next().unwrap_or("");
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("{host}: {status}"));
    }
    Ok(body.to_string())
}

/// Sluice's figures of one interval (null: not exposed, or a failed scrape).
#[derive(Debug, Clone, Default, Serialize)]
pub struct MetricsTick {
    /// Seconds since load start, at the scrape.
    pub elapsed_s: f64,
    /// Every URL answered.
    pub complete: bool,
    pub fsyncs: Option<f64>,
    pub fsync_p50_ms: Option<f64>,
    pub fsync_p99_ms: Option<f64>,
    /// Append requests per group-commit round (mean) and rounds in the interval.
    pub commit_rounds: Option<f64>,
    pub commit_round_requests_avg: Option<f64>,
    pub produce_p99_ms: Option<f64>,
    /// From the process gauges, summed over the URLs (null unless every URL exported them
    /// in this scrape and, for the CPU, the one before): CPU in % of one core since the
    /// previous scrape, and resident memory.
    pub process_cpu_pct: Option<f64>,
    pub process_rss_mib: Option<f64>,
}

/// The brokers' CPU and memory from their process gauges over the run (see `Scraper`).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ProcessFromMetrics {
    /// CPU seconds from each URL's first scrape to its last, summed.
    pub cpu_s: f64,
    /// Seconds between the first and the last scrape.
    pub span_s: f64,
    /// The largest and the last summed RSS of a complete scrape.
    pub peak_rss_mib: Option<f64>,
    pub final_rss_mib: Option<f64>,
}

/// A histogram family's figures over the run (all URLs summed).
#[derive(Debug, Clone, Serialize)]
pub struct HistSummary {
    pub count: f64,
    /// Unit of the figures: "ms" for `_seconds` families, else the family's own.
    pub unit: &'static str,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
}

/// The report's `broker_metrics`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BrokerMetrics {
    pub urls: Vec<String>,
    pub scrapes: u64,
    pub failed_scrapes: u64,
    /// The last scrape error, if any (e.g. a broker that died).
    pub last_error: Option<String>,
    /// Over the run (the first successful scrape of each URL to its last): every histogram.
    pub histograms: BTreeMap<String, HistSummary>,
    /// Headline Sluice figures over the run, from `histograms`.
    pub fsync_p50_ms: Option<f64>,
    pub fsync_p99_ms: Option<f64>,
    pub fsyncs: Option<f64>,
    pub commit_round_requests_avg: Option<f64>,
    pub commit_round_bytes_avg: Option<f64>,
    /// Request latency p99 per API (`sluice_request_latency_seconds{api=..}`), ms.
    pub request_p99_ms: BTreeMap<String, f64>,
    /// CPU and RSS from the process gauges; null when any URL lacked them.
    pub process: Option<ProcessFromMetrics>,
    pub intervals: Vec<MetricsTick>,
}

const FSYNC: &str = "sluice_log_journal_sync_seconds";
const ROUND_REQS: &str = "sluice_log_commit_round_requests";
const ROUND_BYTES: &str = "sluice_log_commit_round_bytes";
const REQ_LAT: &str = "sluice_request_latency_seconds";

fn summed(per_url: &[Option<Scrape>], name: &str) -> Option<Hist> {
    let mut acc: Option<Hist> = None;
    for s in per_url.iter().flatten() {
        if let Some(h) = s.hists.get(name) {
            acc.get_or_insert_with(Hist::default).add(h);
        }
    }
    acc
}

fn delta(cur: &[Option<Scrape>], prev: &[Option<Scrape>]) -> Vec<Option<Scrape>> {
    cur.iter()
        .zip(prev)
        .map(|(c, p)| {
            let c = c.as_ref()?;
            let p = p.as_ref()?;
            Some(Scrape {
                cpu_s: c.cpu_s,
                rss_bytes: c.rss_bytes,
                hists: c
                    .hists
                    .iter()
                    .map(|(k, h)| {
                        let d = p
                            .hists
                            .get(k)
                            .map(|ph| h.minus(ph))
                            .unwrap_or_else(|| h.clone());
                        (k.clone(), d)
                    })
                    .collect(),
            })
        })
        .collect()
}

fn ms(v: Option<f64>) -> Option<f64> {
    v.map(|s| s * 1e3)
}

/// The sum of `f` over every URL's scrape; None when any is missing or lacks it.
fn sum_all(per_url: &[Option<Scrape>], f: impl Fn(&Scrape) -> Option<f64>) -> Option<f64> {
    per_url
        .iter()
        .map(|s| s.as_ref().and_then(&f))
        .sum::<Option<f64>>()
        .filter(|_| !per_url.is_empty())
}

/// CPU % of one core between two scrapes `dt_s` apart, from the summed CPU gauges (None
/// across a restart, whose counter started again).
fn cpu_pct(cur: &[Option<Scrape>], prev: &[Option<Scrape>], dt_s: f64) -> Option<f64> {
    let (a, b) = (sum_all(prev, |s| s.cpu_s)?, sum_all(cur, |s| s.cpu_s)?);
    (b >= a && dt_s > 0.0).then(|| (b - a) / dt_s * 100.0)
}

fn tick_of(d: &[Option<Scrape>], elapsed_s: f64, complete: bool) -> MetricsTick {
    let fs = summed(d, FSYNC);
    let rr = summed(d, ROUND_REQS);
    let prod = summed(d, &format!("{REQ_LAT}{{api=\"Produce\"}}"));
    MetricsTick {
        elapsed_s,
        complete,
        fsyncs: fs.as_ref().map(|h| h.count),
        fsync_p50_ms: ms(fs.as_ref().and_then(|h| h.quantile(0.5))),
        fsync_p99_ms: ms(fs.as_ref().and_then(|h| h.quantile(0.99))),
        commit_rounds: rr.as_ref().map(|h| h.count),
        commit_round_requests_avg: rr.as_ref().and_then(Hist::mean),
        produce_p99_ms: ms(prod.as_ref().and_then(|h| h.quantile(0.99))),
        process_cpu_pct: None,
        process_rss_mib: None,
    }
}

/// The scraper's state over a run.
#[derive(Debug, Default)]
pub struct Scraper {
    urls: Vec<String>,
    first: Vec<Option<Scrape>>,
    prev: Vec<Option<Scrape>>,
    out: BrokerMetrics,
    /// When the first and the latest complete round of scrapes were taken (the span of the
    /// process CPU), and the previous round when it was complete (the CPU % of a tick).
    first_at_s: Option<f64>,
    last_at_s: Option<f64>,
    prev_at_s: Option<f64>,
    peak_rss_mib: Option<f64>,
    final_rss_mib: Option<f64>,
}

impl Scraper {
    pub fn new(urls: Vec<String>) -> Self {
        let n = urls.len();
        Scraper {
            out: BrokerMetrics {
                urls: urls.clone(),
                ..BrokerMetrics::default()
            },
            urls,
            first: vec![None; n],
            prev: vec![None; n],
            ..Scraper::default()
        }
    }

    /// Scrapes every URL once and adds this interval's tick.
    pub fn tick(&mut self, elapsed_s: f64) {
        let mut cur: Vec<Option<Scrape>> = Vec::with_capacity(self.urls.len());
        for u in &self.urls {
            self.out.scrapes += 1;
            match fetch(u) {
                Ok(body) => cur.push(Some(parse(&body))),
                Err(e) => {
                    self.out.failed_scrapes += 1;
                    self.out.last_error = Some(e);
                    cur.push(None);
                }
            }
        }
        self.add(cur, elapsed_s);
    }

    /// Adds one round of scrapes (one per URL, None: failed) taken at `elapsed_s`.
    fn add(&mut self, cur: Vec<Option<Scrape>>, elapsed_s: f64) {
        let complete = cur.iter().all(Option::is_some);
        let d = delta(&cur, &self.prev);
        let mut t = tick_of(&d, elapsed_s, complete);
        if let Some(prev_s) = self.prev_at_s {
            t.process_cpu_pct = cpu_pct(&cur, &self.prev, elapsed_s - prev_s);
        }
        t.process_rss_mib = sum_all(&cur, |s| s.rss_bytes).map(|b| b / 1048576.0);
        if let Some(r) = t.process_rss_mib {
            self.peak_rss_mib = Some(self.peak_rss_mib.map_or(r, |p: f64| p.max(r)));
            self.final_rss_mib = Some(r);
        }
        if complete {
            self.first_at_s.get_or_insert(elapsed_s);
            self.last_at_s = Some(elapsed_s);
        }
        self.prev_at_s = complete.then_some(elapsed_s);
        if self.out.intervals.len() < limits::MAX_SENT_SLOTS {
            self.out.intervals.push(t);
        }
        for (i, c) in cur.into_iter().enumerate() {
            if let Some(c) = c {
                if self.first[i].is_none() {
                    self.first[i] = Some(c.clone());
                }
                self.prev[i] = Some(c);
            }
        }
    }

    /// The run's figures: each URL's last successful scrape minus its first.
    pub fn finish(mut self) -> BrokerMetrics {
        let d = delta(&self.prev, &self.first);
        let mut names: Vec<String> = d
            .iter()
            .flatten()
            .flat_map(|s| s.hists.keys().cloned())
            .collect();
        names.sort();
        names.dedup();
        for n in names {
            let Some(h) = summed(&d, &n) else { continue };
            let seconds = n.split('{').next().unwrap_or("").ends_with("_seconds");
            let k = if seconds { 1e3 } else { 1.0 };
            self.out.histograms.insert(
                n.clone(),
                HistSummary {
                    count: h.count,
                    unit: if seconds { "ms" } else { "" },
                    mean: h.mean().map(|v| v * k),
                    p50: h.quantile(0.5).map(|v| v * k),
                    p99: h.quantile(0.99).map(|v| v * k),
                },
            );
            if let Some(api) = n
                .strip_prefix(REQ_LAT)
                .and_then(|l| l.strip_prefix("{api=\""))
                .and_then(|l| l.strip_suffix("\"}"))
            {
                if let Some(p) = h.quantile(0.99).filter(|_| h.count > 0.0) {
                    self.out.request_p99_ms.insert(api.to_string(), p * 1e3);
                }
            }
        }
        let f = summed(&d, FSYNC);
        self.out.fsyncs = f.as_ref().map(|h| h.count);
        self.out.fsync_p50_ms = ms(f.as_ref().and_then(|h| h.quantile(0.5)));
        self.out.fsync_p99_ms = ms(f.as_ref().and_then(|h| h.quantile(0.99)));
        self.out.commit_round_requests_avg = summed(&d, ROUND_REQS).as_ref().and_then(Hist::mean);
        self.out.commit_round_bytes_avg = summed(&d, ROUND_BYTES).as_ref().and_then(Hist::mean);
        self.out.process = self.process();
        self.out
    }

    /// The process gauges over the run: every URL's last CPU reading minus its first (a
    /// restarted broker's counter starts again: then its last reading alone).
    fn process(&self) -> Option<ProcessFromMetrics> {
        let mut cpu_s = 0.0;
        for (a, b) in self.first.iter().zip(&self.prev) {
            let (a, b) = (a.as_ref()?.cpu_s?, b.as_ref()?.cpu_s?);
            cpu_s += if b >= a { b - a } else { b };
        }
        Some(ProcessFromMetrics {
            cpu_s,
            span_s: self.last_at_s.zip(self.first_at_s).map(|(b, a)| b - a)?,
            peak_rss_mib: self.peak_rss_mib,
            final_rss_mib: self.final_rss_mib,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str =
        "# HELP sluice_log_journal_sync_seconds Duration of each journal fdatasync.\n\
# TYPE sluice_log_journal_sync_seconds histogram\n\
sluice_log_journal_sync_seconds_sum 0.05\n\
sluice_log_journal_sync_seconds_count 10\n\
sluice_log_journal_sync_seconds_bucket{le=\"0.001\"} 4\n\
sluice_log_journal_sync_seconds_bucket{le=\"0.01\"} 10\n\
sluice_log_journal_sync_seconds_bucket{le=\"+Inf\"} 10\n\
sluice_request_latency_seconds_sum{api=\"Produce\"} 1.0\n\
sluice_request_latency_seconds_count{api=\"Produce\"} 2\n\
sluice_request_latency_seconds_bucket{api=\"Produce\",le=\"0.5\"} 1\n\
sluice_request_latency_seconds_bucket{api=\"Produce\",le=\"1.0\"} 2\n\
sluice_request_latency_seconds_bucket{api=\"Produce\",le=\"+Inf\"} 2\n\
sluice_requests_total{api=\"Produce\"} 2\n";

    #[test]
    fn parses_histograms_and_interpolates_quantiles() {
        let s = parse(TEXT);
        assert_eq!(s.hists.len(), 2, "{:?}", s.hists.keys());
        let f = &s.hists[FSYNC];
        assert_eq!((f.count, f.sum), (10.0, 0.05));
        // Rank 5 of 10: the second bucket (4..10 between 1 ms and 10 ms), 1/6 of the way.
        let p50 = f.quantile(0.5).unwrap();
        assert!((p50 - (0.001 + 0.009 / 6.0)).abs() < 1e-12, "{p50}");
        assert_eq!(f.quantile(0.0), Some(0.0));
        let p = &s.hists["sluice_request_latency_seconds{api=\"Produce\"}"];
        assert_eq!(p.quantile(1.0), Some(1.0));
        assert_eq!(p.mean(), Some(0.5));
    }

    #[test]
    fn deltas_between_scrapes_and_restarts() {
        let a = parse(TEXT);
        let b = parse(
            &TEXT
                .replace("} 10\n", "} 30\n")
                .replace("_count 10", "_count 30"),
        );
        let d = delta(&[Some(b.clone())], &[Some(a.clone())]);
        let f = &d[0].as_ref().unwrap().hists[FSYNC];
        assert_eq!(f.count, 20.0);
        assert_eq!(f.buckets[0].1, 0.0);
        // All 20 new syncs were in (1 ms, 10 ms]: the p99 is near 10 ms.
        assert!(f.quantile(0.99).unwrap() > 0.009);
        // A restarted broker's counters went down: the new scrape stands alone.
        let d = delta(&[Some(a)], &[Some(b)]);
        assert_eq!(d[0].as_ref().unwrap().hists[FSYNC].count, 10.0);
        let t = tick_of(&d, 1.0, true);
        assert_eq!(t.fsyncs, Some(10.0));
        // No Produce request between the two scrapes: no figure rather than a stale one.
        assert_eq!(t.produce_p99_ms, None);
        let t = tick_of(&[Some(parse(TEXT))], 1.0, true);
        assert!(t.produce_p99_ms.unwrap() > 900.0);
    }

    #[test]
    fn cpu_and_rss_come_from_the_process_gauges() {
        // What a Prometheus client library exports for its process (Go's, Java's simpleclient
        // hotspot, Python's): counters and gauges among the histograms.
        let expo = |cpu: f64, rss: f64| {
            format!(
                "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
# TYPE process_cpu_seconds_total counter\n\
process_cpu_seconds_total {cpu}\n\
# TYPE process_resident_memory_bytes gauge\n\
process_resident_memory_bytes {rss:e}\n\
process_open_fds 42\n{TEXT}"
            )
        };
        let s = parse(&expo(12.5, 2.097152e8));
        assert_eq!((s.cpu_s, s.rss_bytes), (Some(12.5), Some(209715200.0)));
        assert_eq!(s.hists.len(), 2, "histograms still parsed");
        assert_eq!(parse(TEXT).cpu_s, None);
        assert_eq!(parse("process_cpu_seconds_total NaN\n").cpu_s, None);

        // Two brokers scraped at 1 s, 2 s, 3 s: 0.5 s and 0.25 s of CPU a second.
        let mut sc = Scraper::new(vec!["a".into(), "b".into()]);
        for (t, ca, cb, rss) in [
            (1.0, 10.0, 20.0, 100.0),
            (2.0, 10.5, 20.25, 300.0),
            (3.0, 11.0, 20.5, 200.0),
        ] {
            let mib = 1048576.0 * rss;
            sc.add(
                vec![Some(parse(&expo(ca, mib))), Some(parse(&expo(cb, mib)))],
                t,
            );
        }
        let ticks = sc.out.intervals.clone();
        assert_eq!(ticks[0].process_cpu_pct, None, "no earlier scrape");
        assert!(
            (ticks[1].process_cpu_pct.unwrap() - 75.0).abs() < 1e-9,
            "{:?}",
            ticks[1]
        );
        assert_eq!(ticks[1].process_rss_mib, Some(600.0));
        let out = sc.finish();
        let p = out.process.unwrap();
        assert!((p.cpu_s - 1.5).abs() < 1e-9 && p.span_s == 2.0, "{p:?}");
        assert_eq!(
            (p.peak_rss_mib, p.final_rss_mib),
            (Some(600.0), Some(400.0))
        );

        // One endpoint without the gauges (Sluice's own exports histograms only): no figure.
        let mut sc = Scraper::new(vec!["a".into(), "b".into()]);
        sc.add(vec![Some(parse(&expo(1.0, 1.0))), Some(parse(TEXT))], 1.0);
        sc.add(vec![Some(parse(&expo(2.0, 1.0))), Some(parse(TEXT))], 2.0);
        assert_eq!(sc.out.intervals[1].process_cpu_pct, None);
        assert_eq!(sc.finish().process, None);
    }

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("http://127.0.0.1:9100/metrics").unwrap(),
            ("127.0.0.1:9100".into(), "/metrics".into())
        );
        assert_eq!(
            parse_url("localhost:9100").unwrap(),
            ("localhost:9100".into(), "/metrics".into())
        );
        assert!(parse_url("https://x:1").is_err());
        assert!(parse_url("http://nohost/metrics").is_err());
        // Nothing listening: a quick, counted failure.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        let mut s = Scraper::new(vec![format!("127.0.0.1:{port}")]);
        s.tick(1.0);
        let out = s.finish();
        assert_eq!((out.scrapes, out.failed_scrapes), (1, 1));
        assert!(out.last_error.is_some() && out.intervals[0].fsync_p99_ms.is_none());
    }
}
