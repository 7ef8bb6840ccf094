//! The admin listener's `/metrics` scrape: one collector that reads the counters in
//! [`crate::metrics`] and the state at scrape time (the log's counters and histograms,
//! connections, the request-memory budget, groups, members and committed-offset lag: high
//! watermark minus committed offset) into Prometheus families. `docs/operations.md` lists
//! every family.
//!
//! The group series are capped at [`limits::METRICS_GROUP_SERIES_MAX`] each; past the cap,
//! `sluice_group_series_truncated` is 1. Scrapes run on the blocking pool, never on the
//! network workers.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use sluice_log::histogram::HistogramSnapshot;

use crate::config::limits;
use crate::handlers::table;
use crate::metrics::{ApiSeries, Metrics, TopicStats};
use crate::Broker;

/// Nanoseconds per second: latency histograms are recorded in nanoseconds and exposed in
/// seconds (dividing, which keeps decimal bounds such as 0.001 exact).
const NS: f64 = 1e9;

/// The counters for the handler table's rows (and `unknown`).
pub(crate) fn broker_metrics() -> Metrics {
    Metrics::new(table::HANDLERS.iter().map(|h| h.api.key))
}

/// A registry whose one collector reads `broker` at each scrape.
pub fn registry(broker: Arc<Broker>) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(BrokerCollector(broker)));
    registry
}

/// Encodes `registry`: the OpenMetrics text format when asked for, else Prometheus text
/// format 0.0.4. Returns the body and its content type.
pub fn render(
    registry: &Registry,
    openmetrics: bool,
) -> Result<(String, &'static str), fmt::Error> {
    let mut out = String::new();
    if openmetrics {
        prometheus_client::encoding::text::encode(&mut out, registry)?;
        Ok((
            out,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ))
    } else {
        prometheus_client::encoding::prometheus_text::encode(&mut out, registry)?;
        Ok((
            out,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        ))
    }
}

#[derive(Debug)]
struct BrokerCollector(Arc<Broker>);

impl Collector for BrokerCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
        let b = &*self.0;
        encode_requests(b, &mut enc)?;
        encode_topics(b, &mut enc)?;
        encode_log(b, &mut enc)?;
        encode_network(b, &mut enc)?;
        encode_groups(b, &mut enc)?;
        counter(
            &mut enc,
            "sluice_producer_ids_issued",
            "Producer ids handed out by InitProducerId since start.",
            b.producer_ids.issued_total(),
        )?;
        gauge(
            &mut enc,
            "sluice_producer_ids",
            "Producer ids with idempotent or transactional state, summed over partitions (Kafka's ProducerIdCount).",
            i64::try_from(b.log.producer_ids_live()).unwrap_or(i64::MAX),
        )
    }
}

fn counter(enc: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> fmt::Result {
    enc.encode_descriptor(name, help, None, MetricType::Counter)?
        .encode_counter::<NoLabelSet, _, u64>(&v, None)
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> fmt::Result {
    enc.encode_descriptor(name, help, None, MetricType::Gauge)?
        .encode_gauge(&v)
}

/// Encodes one histogram sample set, bounds and sum divided by `per_unit` (nanoseconds to
/// seconds; 1 for sizes and counts).
fn histogram(m: &mut MetricEncoder, s: &HistogramSnapshot, per_unit: f64) -> fmt::Result {
    let mut buckets: Vec<(f64, u64)> = s
        .bounds
        .iter()
        .zip(&s.buckets)
        .map(|(bound, n)| (*bound as f64 / per_unit, *n))
        .collect();
    buckets.push((f64::INFINITY, s.buckets.last().copied().unwrap_or(0)));
    m.encode_histogram::<NoLabelSet>(s.sum as f64 / per_unit, s.count(), &buckets, None)
}

fn histogram_family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    s: &HistogramSnapshot,
    per_unit: f64,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Histogram)?;
    histogram(&mut m, s, per_unit)
}

/// One counter family with a series per API.
fn per_api_counter(
    enc: &mut DescriptorEncoder,
    apis: &[ApiSeries],
    name: &str,
    help: &str,
    counter: impl Fn(&ApiSeries) -> &AtomicU64,
) -> fmt::Result {
    let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
    for a in apis {
        let v = counter(a).load(Ordering::Relaxed);
        m.encode_family(&[("api", a.name.as_str())])?
            .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
    }
    Ok(())
}

fn encode_requests(b: &Broker, enc: &mut DescriptorEncoder) -> fmt::Result {
    let apis = &b.metrics.apis;
    // One snapshot per API feeds both the request count and the latency histogram.
    let latency: Vec<_> = apis.iter().map(|a| a.latency_ns.snapshot()).collect();
    let mut m = enc.encode_descriptor(
        "sluice_requests",
        "Requests answered (or closed instead), by API.",
        None,
        MetricType::Counter,
    )?;
    for (a, s) in apis.iter().zip(&latency) {
        m.encode_family(&[("api", a.name.as_str())])?
            .encode_counter::<NoLabelSet, _, u64>(&s.count(), None)?;
    }
    per_api_counter(
        enc,
        apis,
        "sluice_request_errors",
        "Requests that closed the connection instead of being answered, or whose response carries a non-zero error code (top-level or in any entry), by API.",
        |a| &a.errors,
    )?;
    let mut m = enc.encode_descriptor(
        "sluice_request_latency_seconds",
        "Time from a request's last byte received to its response's last byte written, by API.",
        None,
        MetricType::Histogram,
    )?;
    for (a, s) in apis.iter().zip(&latency) {
        histogram(&mut m.encode_family(&[("api", a.name.as_str())])?, s, NS)?;
    }
    Ok(())
}

fn encode_topics(b: &Broker, enc: &mut DescriptorEncoder) -> fmt::Result {
    let topics = b.topics.all();
    type Pick = fn(&TopicStats) -> &AtomicU64;
    let families: [(&str, &str, Pick); 4] = [
        (
            "sluice_produce_bytes",
            "Record batch bytes accepted by Produce, by topic.",
            |s| &s.produce_bytes,
        ),
        (
            "sluice_produce_records",
            "Records accepted by Produce (from the batch headers), by topic.",
            |s| &s.produce_records,
        ),
        (
            "sluice_fetch_bytes",
            "Record bytes sent in Fetch responses, by topic.",
            |s| &s.fetch_bytes,
        ),
        (
            "sluice_fetch_records",
            "Records sent in Fetch responses, by topic: the offsets the answers advance their consumers past (transaction markers included; on a compacted topic also the offsets the cleaner removed).",
            |s| &s.fetch_records,
        ),
    ];
    for (name, help, pick) in families {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
        for t in &topics {
            let v = pick(&t.stats).load(Ordering::Relaxed);
            m.encode_family(&[("topic", &*t.name)])?
                .encode_counter::<NoLabelSet, _, u64>(&v, None)?;
        }
    }
    Ok(())
}

fn encode_log(b: &Broker, enc: &mut DescriptorEncoder) -> fmt::Result {
    let s = b.log.stats();
    let h = b.log.commit_histograms();
    counter(
        enc,
        "sluice_log_commit_rounds",
        "Group commit rounds.",
        s.commit_rounds,
    )?;
    counter(
        enc,
        "sluice_log_append_requests",
        "Append requests answered by the group commit (successfully or not).",
        s.append_requests,
    )?;
    counter(
        enc,
        "sluice_log_batches_appended",
        "Record batches written to partitions.",
        s.batches_appended,
    )?;
    histogram_family(
        enc,
        "sluice_log_commit_round_bytes",
        "Journal bytes written per group commit round (padding included).",
        &h.round_bytes,
        1.0,
    )?;
    histogram_family(
        enc,
        "sluice_log_commit_round_requests",
        "Append requests per group commit round.",
        &h.round_requests,
        1.0,
    )?;
    histogram_family(
        enc,
        "sluice_log_journal_sync_seconds",
        "Duration of each journal fdatasync.",
        &h.journal_sync_ns,
        NS,
    )?;
    histogram_family(
        enc,
        "sluice_log_journal_write_seconds",
        "Duration of each round's journal write.",
        &h.journal_write_ns,
        NS,
    )?;
    histogram_family(
        enc,
        "sluice_log_commit_round_seconds",
        "Duration of each group commit round, from taking its requests to answering them.",
        &h.round_ns,
        NS,
    )?;
    histogram_family(
        enc,
        "sluice_log_append_queue_wait_seconds",
        "Time each append request waited in the committer's queue before a round took it.",
        &h.append_queue_wait_ns,
        NS,
    )?;
    counter(
        enc,
        "sluice_log_journal_syncs",
        "Journal fdatasyncs.",
        s.journal_syncs,
    )?;
    counter(
        enc,
        "sluice_log_journal_written_bytes",
        "Bytes written to the journal (the only copy of the records).",
        s.journal_bytes,
    )?;
    counter(
        enc,
        "sluice_log_segment_syncs",
        "Segment extent-list syncs by the checkpointer.",
        s.segment_syncs,
    )?;
    counter(
        enc,
        "sluice_log_segment_written_bytes",
        "Bytes written to segment files other than the journal: extent records and index files by the checkpointer, cleaned segments by the log cleaner.",
        s.segment_written_bytes,
    )?;
    counter(
        enc,
        "sluice_log_checkpoints",
        "Checkpoints written.",
        s.checkpoints,
    )?;
    for (name, help, value) in [
        (
            "sluice_log_cleaner_passes",
            "Log cleaner passes (one partition each).",
            s.cleaner_passes,
        ),
        (
            "sluice_log_cleaner_segments_cleaned",
            "Segments replaced by a cleaned version.",
            s.cleaner_segments_cleaned,
        ),
        (
            "sluice_log_cleaner_read_bytes",
            "Bytes the log cleaner read.",
            s.cleaner_bytes_read,
        ),
        (
            "sluice_log_cleaner_written_bytes",
            "Bytes the log cleaner wrote.",
            s.cleaner_bytes_written,
        ),
        (
            "sluice_log_cleaner_records_removed",
            "Records the log cleaner removed.",
            s.cleaner_records_removed,
        ),
        (
            "sluice_log_cleaner_before_bytes",
            "Bytes of the segments log cleaner passes covered, before cleaning.",
            s.cleaner_bytes_before,
        ),
        (
            "sluice_log_cleaner_after_bytes",
            "Bytes of the segments log cleaner passes covered, after cleaning.",
            s.cleaner_bytes_after,
        ),
    ] {
        counter(enc, name, help, value)?;
    }
    enc.encode_descriptor(
        "sluice_log_cleaner_pass_seconds",
        "Time spent in log cleaner passes.",
        None,
        MetricType::Counter,
    )?
    .encode_counter::<NoLabelSet, _, f64>(&(s.cleaner_pass_us as f64 / 1e6), None)?;
    for (name, help, value) in [
        (
            "sluice_log_journal_cleaner_passes",
            "Journal cleaner passes that moved bytes.",
            s.journal_cleaner_passes,
        ),
        (
            "sluice_log_journal_cleaner_files_cleaned",
            "Data files whose outliving bytes the journal cleaner moved (each freed once nothing reads it).",
            s.journal_cleaner_files_cleaned,
        ),
        (
            "sluice_log_journal_cleaner_moved_bytes",
            "Bytes the journal cleaner moved (written a second time).",
            s.journal_cleaner_bytes_moved,
        ),
    ] {
        counter(enc, name, help, value)?;
    }
    encode_disk_usage(&b.log.disk_usage(), enc)?;
    gauge(
        enc,
        "sluice_log_poisoned",
        "1 once a write or sync failed: produce answers KAFKA_STORAGE_ERROR until restart.",
        i64::from(b.log.is_poisoned()),
    )
}

/// Disk use of the data files, and who keeps it (docs/operations.md, "Disk use").
fn encode_disk_usage(u: &sluice_log::DiskUsage, enc: &mut DescriptorEncoder) -> fmt::Result {
    let kinds = [
        ("journal", u.journal_files, u.journal_file_bytes),
        ("cleaned", u.cleaned_files, u.cleaned_file_bytes),
        ("free", u.free_files, u.free_file_bytes),
    ];
    type Count = fn(&(&str, u64, u64)) -> u64;
    let by_kind: [(&str, &str, Count); 2] = [
        (
            "sluice_log_data_files",
            "Data files on disk by kind: journal (.wal), cleaned (.cleaned, the cleaners' output), free (retired journal files kept for reuse).",
            |k| k.1,
        ),
        ("sluice_log_data_file_bytes", "Bytes of the data files on disk by kind.", |k| k.2),
    ];
    for (name, help, pick) in by_kind {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for kind in &kinds {
            m.encode_family(&[("kind", kind.0)])?
                .encode_gauge(&(pick(kind) as i64))?;
        }
    }
    gauge(
        enc,
        "sluice_log_retained_bytes",
        "Bytes the partitions' segments hold: what retention keeps.",
        u.retained_bytes as i64,
    )?;
    enc.encode_descriptor(
        "sluice_log_space_amplification",
        "Journal and cleaned file bytes per retained byte (1 is ideal; the journal cleaner keeps it near 1 + sluice.journal.cleaner.max.live.ratio at worst, plus the file being written).",
        None,
        MetricType::Gauge,
    )?
    .encode_gauge(&u.space_amplification())?;
    gauge(enc, "sluice_log_pinned_files", "Data files no longer written nor needed for replay, mostly expired, still kept by a few live bytes.", u.pinned_files as i64)?;
    gauge(
        enc,
        "sluice_log_pinned_file_bytes",
        "Bytes of those pinned files.",
        u.pinned_file_bytes as i64,
    )?;
    type Pick = fn(&sluice_log::PartitionDiskUsage) -> u64;
    let families: [(&str, &str, Pick); 3] = [
        (
            "sluice_log_partition_retained_bytes",
            "Bytes of the partition's segments.",
            |p| p.retained_bytes,
        ),
        (
            "sluice_log_partition_data_file_bytes",
            "Sizes of the data files the partition has bytes in (shared with other partitions).",
            |p| p.file_bytes,
        ),
        (
            "sluice_log_partition_pinned_bytes",
            "The partition's bytes in pinned files: what keeps them on disk.",
            |p| p.pinned_bytes,
        ),
    ];
    for (name, help, pick) in families {
        let mut m = enc.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for p in &u.partitions {
            let partition = p.key.partition.to_string();
            m.encode_family(&[("topic", &*p.key.topic), ("partition", partition.as_str())])?
                .encode_gauge(&(pick(p) as i64))?;
        }
    }
    Ok(())
}

fn encode_network(b: &Broker, enc: &mut DescriptorEncoder) -> fmt::Result {
    let m = &b.metrics;
    let memory = &b.request_memory;
    let unit = limits::REQUEST_MEMORY_UNIT_BYTES as i64;
    let total = i64::from(memory.total_units()) * unit;
    let free = memory.available_units() as i64 * unit;
    gauge(
        enc,
        "sluice_connections",
        "Client connections open.",
        m.connections_open.load(Ordering::Relaxed) as i64,
    )?;
    gauge(
        enc,
        "sluice_request_memory_used_bytes",
        "Request-memory budget in use (queued.max.request.bytes), in bytes.",
        total - free,
    )?;
    gauge(
        enc,
        "sluice_request_memory_limit_bytes",
        "The whole request-memory budget (queued.max.request.bytes), in bytes.",
        total,
    )?;
    gauge(
        enc,
        "sluice_fetch_long_polls_parked",
        "Fetch requests waiting for data.",
        m.fetch_long_polls_parked.load(Ordering::Relaxed) as i64,
    )
}

/// One group's state as read at scrape time.
struct GroupView {
    id: String,
    members: usize,
    /// (topic, partition, high watermark - committed offset).
    lag: Vec<(String, i32, i64)>,
}

/// Reads every group (up to the cap), one short coordinator lock per group.
fn read_groups(b: &Broker) -> (usize, Vec<GroupView>, bool) {
    let cap = limits::METRICS_GROUP_SERIES_MAX;
    let ids: Vec<String> = b.groups.read(|c| {
        c.list_groups(&[], &[])
            .into_iter()
            .map(|g| g.group_id)
            .collect()
    });
    let total = ids.len();
    let mut truncated = total > cap;
    let mut lag_series = 0;
    let mut views = Vec::with_capacity(total.min(cap));
    for id in ids.into_iter().take(cap) {
        let (members, offsets) = b.groups.read(|c| {
            (
                c.describe_group(&id).members.len(),
                c.fetch_offsets(&id, None),
            )
        });
        let mut lag = Vec::new();
        for (tp, committed) in offsets {
            let Some(committed) = committed else { continue };
            let Some(topic) = b.topics.get(&tp.topic) else {
                continue;
            };
            let Some(hw) = topic
                .partition(tp.partition)
                .and_then(|k| b.log.offsets(k).ok())
                .map(|o| o.high_watermark.0)
            else {
                continue;
            };
            if lag_series >= cap {
                truncated = true;
                break;
            }
            lag_series += 1;
            lag.push((tp.topic, tp.partition, (hw - committed.offset).max(0)));
        }
        views.push(GroupView { id, members, lag });
    }
    (total, views, truncated)
}

fn encode_groups(b: &Broker, enc: &mut DescriptorEncoder) -> fmt::Result {
    let (total, views, truncated) = read_groups(b);
    gauge(
        enc,
        "sluice_groups",
        "Consumer groups known to the coordinator.",
        total as i64,
    )?;
    let mut m = enc.encode_descriptor(
        "sluice_group_members",
        "Members of each group.",
        None,
        MetricType::Gauge,
    )?;
    for g in &views {
        m.encode_family(&[("group", g.id.as_str())])?
            .encode_gauge(&(g.members as i64))?;
    }
    let mut m = enc.encode_descriptor(
        "sluice_group_lag",
        "High watermark minus committed offset, in offsets, per group and partition.",
        None,
        MetricType::Gauge,
    )?;
    for g in &views {
        for (topic, partition, lag) in &g.lag {
            let partition = partition.to_string();
            let labels = [
                ("group", g.id.as_str()),
                ("topic", topic.as_str()),
                ("partition", partition.as_str()),
            ];
            m.encode_family(&labels)?.encode_gauge(lag)?;
        }
    }
    gauge(
        enc,
        "sluice_group_series_truncated",
        "1 when groups or lag series were left out (more than the series cap each).",
        i64::from(truncated),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_log::histogram::Histogram;

    // Goal: an atomic histogram is exposed in text format 0.0.4 with cumulative buckets in
    // seconds, an explicit +Inf bucket equal to the count, and the sum scaled too.
    #[test]
    fn histogram_text_encoding() {
        #[derive(Debug)]
        struct One(HistogramSnapshot);
        impl Collector for One {
            fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), fmt::Error> {
                histogram_family(&mut enc, "x_seconds", "Help.", &self.0, NS)
            }
        }
        static BOUNDS: &[u64] = &[1_000_000, 500_000_000];
        let h = Histogram::new(BOUNDS);
        for ns in [500_000, 2_000_000, 3_000_000_000] {
            h.observe(ns);
        }
        let mut registry = Registry::default();
        registry.register_collector(Box::new(One(h.snapshot())));
        let (text, content_type) = render(&registry, false).unwrap();
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        assert_eq!(
            text,
            "# HELP x_seconds Help.\n\
             # TYPE x_seconds histogram\n\
             x_seconds_bucket{le=\"0.001\"} 1\n\
             x_seconds_bucket{le=\"0.5\"} 2\n\
             x_seconds_bucket{le=\"+Inf\"} 3\n\
             x_seconds_sum 3.0025\n\
             x_seconds_count 3\n"
        );
    }

    // Goal: the series are the handler table's rows: one per row, named after its key, in
    // the table's order, so a new row is measured without another list to edit.
    #[test]
    fn api_series_follow_the_handler_table() {
        let m = broker_metrics();
        assert_eq!(m.apis.len(), table::HANDLERS.len() + 1);
        for h in table::HANDLERS {
            assert_eq!(m.api(h.api.key as i16).name, format!("{:?}", h.api.key));
        }
    }
}
