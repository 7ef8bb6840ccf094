//! The cluster's topology as the bench saw it: brokers (id, host:port, rack), the controller
//! and each bench topic's partitions (leader, replicas, ISR), taken with one Metadata request
//! at the start of the run (topics ready) and at its end (after the drain), and the changes
//! between the two (a leader that moved, a replica set or an ISR that changed, a broker that
//! came or left).
//!
//! Guarantees: a snapshot is one request over a plain TCP connection (kafka-protocol codecs, no
//! librdkafka cache, so it is what the broker answered at that moment) — or, when the clients'
//! settings ask for TLS or SASL (`ClientConf::secured`), one Metadata request through a
//! librdkafka client made with those settings (it has no controller, cluster id or racks:
//! they show as -1 / none) — bounded in time
//! (`limits::TOPOLOGY_TIMEOUT`) and in response size; it never fails a run — a broker that
//! cannot answer yields an error string in the report instead. The controller is Metadata's
//! `controller_id`: in KRaft clusters brokers answer with a broker id there, not the quorum
//! controller (DescribeCluster says the same thing, so it is not asked separately).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, RequestHeader, ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rdkafka::client::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use serde::Serialize;

use crate::limits;

/// Metadata v9: the first flexible version; has racks, cluster id and controller id, and every
/// broker the bench talks to (Kafka 2.4+, Sluice) answers it.
const METADATA_VERSION: i16 = 9;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerNode {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionNode {
    pub topic: String,
    pub partition: i32,
    /// -1: no leader.
    pub leader: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// The partition's error code in the answer (0: none).
    pub error_code: i16,
}

/// One Metadata answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Topology {
    pub cluster_id: Option<String>,
    /// As Metadata reports it; -1: none. A KRaft broker names a random live broker here, not
    /// the quorum's active controller, so it is shown but not compared.
    pub controller_id: i32,
    pub brokers: Vec<BrokerNode>,
    pub partitions: Vec<PartitionNode>,
}

impl Topology {
    /// Partitions led per broker id (leaderless partitions under -1).
    pub fn leaders_per_broker(&self) -> BTreeMap<i32, u32> {
        let mut m = BTreeMap::new();
        for p in &self.partitions {
            *m.entry(p.leader).or_insert(0) += 1;
        }
        m
    }

    /// The smallest replica and ISR counts over the partitions (None without partitions).
    pub fn min_replicas_and_isr(&self) -> Option<(usize, usize)> {
        let r = self.partitions.iter().map(|p| p.replicas.len()).min()?;
        let i = self.partitions.iter().map(|p| p.isr.len()).min()?;
        Some((r, i))
    }
}

/// One difference between the start and the end snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopologyChange {
    /// "broker_added", "broker_removed", "leader", "replicas" or "isr".
    pub what: &'static str,
    /// `topic/partition` for partition changes, the broker id for broker changes.
    pub subject: String,
    pub before: String,
    pub after: String,
}

/// A change seen between two snapshots taken during the run (see `engine::observers::topology_thread`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimedChange {
    /// When the snapshot that first showed it was taken, seconds since load start (the change
    /// happened at most `limits::TOPOLOGY_SAMPLE_INTERVAL` plus one request earlier).
    #[serde(serialize_with = "ser_f64")]
    pub at_s: f64,
    #[serde(flatten)]
    pub change: TopologyChange,
}

fn ser_f64<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((v * 1000.0).round() / 1000.0)
}

/// The report's `topology`: both snapshots (or why one is missing), the changes between them,
/// and the changes seen while the run went on (sampled every few seconds).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TopologyReport {
    /// Changes between consecutive snapshots during the run, with times.
    pub during: Vec<TimedChange>,
    /// Snapshots taken during the run, and those that failed (no broker answered).
    pub samples_during: u64,
    pub failed_samples_during: u64,
    pub start: Option<Topology>,
    pub end: Option<Topology>,
    pub start_error: Option<String>,
    pub end_error: Option<String>,
    pub changes: Vec<TopologyChange>,
    /// Changes beyond `limits::MAX_TOPOLOGY_CHANGES`, counted only.
    pub changes_not_listed: usize,
}

impl TopologyReport {
    pub fn new(start: Result<Topology, String>, end: Result<Topology, String>) -> Self {
        let mut changes = match (&start, &end) {
            (Ok(a), Ok(b)) => diff(a, b),
            _ => Vec::new(),
        };
        let changes_not_listed = changes.len().saturating_sub(limits::MAX_TOPOLOGY_CHANGES);
        changes.truncate(limits::MAX_TOPOLOGY_CHANGES);
        let (start, start_error) = split(start);
        let (end, end_error) = split(end);
        TopologyReport {
            start,
            end,
            start_error,
            end_error,
            changes,
            changes_not_listed,
            ..TopologyReport::default()
        }
    }

    /// Text lines for the summary: brokers, leaders per broker, replicas/ISR, changes.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let Some(t) = self.start.as_ref().or(self.end.as_ref()) else {
            if let Some(e) = self.start_error.as_ref().or(self.end_error.as_ref()) {
                out.push_str(&format!(" topology           unknown: {e}\n"));
            }
            return out;
        };
        let brokers: Vec<String> = t
            .brokers
            .iter()
            .map(|b| {
                let rack = b
                    .rack
                    .as_ref()
                    .map(|r| format!(" rack {r}"))
                    .unwrap_or_default();
                format!("{} {}:{}{rack}", b.id, b.host, b.port)
            })
            .collect();
        out.push_str(&format!(
            " topology           {} broker(s): {} · controller {}\n",
            t.brokers.len(),
            brokers.join(", "),
            t.controller_id
        ));
        let leaders: Vec<String> = t
            .leaders_per_broker()
            .iter()
            .map(|(b, n)| format!("{b}:{n}"))
            .collect();
        let (r, i) = t.min_replicas_and_isr().unwrap_or((0, 0));
        out.push_str(&format!(
            "                    {} partition(s) · leaders per broker {} · replicas >= {r} · ISR >= {i} (start)\n",
            t.partitions.len(),
            leaders.join(" "),
        ));
        match (&self.end, &self.end_error) {
            (Some(_), _) if self.changes.is_empty() => {
                out.push_str("                    no change by the end of the run\n")
            }
            (Some(_), _) => {
                for c in &self.changes {
                    out.push_str(&format!(
                        "                    change: {} {} {} -> {}\n",
                        c.what, c.subject, c.before, c.after
                    ));
                }
                if self.changes_not_listed > 0 {
                    out.push_str(&format!(
                        "                    ... and {} more change(s)\n",
                        self.changes_not_listed
                    ));
                }
            }
            (None, Some(e)) => {
                out.push_str(&format!("                    end snapshot failed: {e}\n"))
            }
            (None, None) => {}
        }
        if self.samples_during > 0 {
            out.push_str(&format!(
                "                    during the run: {} change(s) in {} snapshot(s) ({} failed)\n",
                self.during.len(),
                self.samples_during,
                self.failed_samples_during
            ));
        }
        for c in self
            .during
            .iter()
            .take(limits::MAX_TOPOLOGY_CHANGES_IN_TEXT)
        {
            out.push_str(&format!(
                "                    at {:>6.1} s: {} {} {} -> {}\n",
                c.at_s, c.change.what, c.change.subject, c.change.before, c.change.after
            ));
        }
        if self.during.len() > limits::MAX_TOPOLOGY_CHANGES_IN_TEXT {
            out.push_str(&format!(
                "                    ... {} more in the JSON\n",
                self.during.len() - limits::MAX_TOPOLOGY_CHANGES_IN_TEXT
            ));
        }
        out
    }
}

fn split(r: Result<Topology, String>) -> (Option<Topology>, Option<String>) {
    match r {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(e)),
    }
}

fn ids(v: &[i32]) -> String {
    let s: Vec<String> = v.iter().map(i32::to_string).collect();
    format!("[{}]", s.join(","))
}

/// The changes from `a` to `b`: brokers gone and come, the controller, and per partition
/// (present in both) the leader, the replica set and the ISR (compared as sets).
pub fn diff(a: &Topology, b: &Topology) -> Vec<TopologyChange> {
    let mut out = Vec::new();
    let ch = |what, subject: String, before: String, after: String| TopologyChange {
        what,
        subject,
        before,
        after,
    };
    for x in &a.brokers {
        if !b.brokers.iter().any(|y| y.id == x.id) {
            let addr = format!("{}:{}", x.host, x.port);
            out.push(ch("broker_removed", x.id.to_string(), addr, "-".into()));
        }
    }
    for y in &b.brokers {
        if !a.brokers.iter().any(|x| x.id == y.id) {
            let addr = format!("{}:{}", y.host, y.port);
            out.push(ch("broker_added", y.id.to_string(), "-".into(), addr));
        }
    }
    // No "controller" change: a KRaft broker answers Metadata (and DescribeCluster) with a
    // random live broker as the controller, so a difference there is noise, not a failover.
    let sorted = |v: &[i32]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    for p in &a.partitions {
        let Some(q) = b
            .partitions
            .iter()
            .find(|q| q.topic == p.topic && q.partition == p.partition)
        else {
            continue;
        };
        let subject = format!("{}/{}", p.topic, p.partition);
        if p.leader != q.leader {
            out.push(ch(
                "leader",
                subject.clone(),
                p.leader.to_string(),
                q.leader.to_string(),
            ));
        }
        if sorted(&p.replicas) != sorted(&q.replicas) {
            out.push(ch(
                "replicas",
                subject.clone(),
                ids(&p.replicas),
                ids(&q.replicas),
            ));
        }
        if sorted(&p.isr) != sorted(&q.isr) {
            out.push(ch("isr", subject, ids(&p.isr), ids(&q.isr)));
        }
    }
    out
}

/// Where snapshots come from: a raw request on plain TCP, or a librdkafka client with the
/// user's security settings (kept for the run, so each sample is one request, not a handshake).
pub enum Source {
    Raw(String),
    Client(Box<Result<BaseConsumer<Quiet>, String>>),
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Raw(b) => write!(f, "Source::Raw({b})"),
            Source::Client(_) => write!(f, "Source::Client"),
        }
    }
}

/// A context that drops the topology client's logs and errors: the run's own clients report
/// the same connection problems.
#[derive(Debug)]
pub struct Quiet;

impl ClientContext for Quiet {
    fn log(&self, _: RDKafkaLogLevel, _: &str, _: &str) {}
    fn error(&self, _: rdkafka::error::KafkaError, _: &str) {}
}

impl ConsumerContext for Quiet {}

impl Source {
    pub fn new(bootstrap: &str, cc: &crate::clientconf::ClientConf) -> Source {
        if !cc.secured() {
            return Source::Raw(bootstrap.to_string());
        }
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", bootstrap)
            .set("client.id", "sluice-bench-topology")
            .set_log_level(RDKafkaLogLevel::Emerg);
        cc.apply(&mut c);
        Source::Client(Box::new(
            c.create_with_context(Quiet)
                .map_err(|e| format!("topology client: {e}")),
        ))
    }

    /// One Metadata answer for `topics` (see the module comment).
    pub fn snapshot(&self, topics: &[String]) -> Result<Topology, String> {
        match self {
            Source::Raw(bootstrap) => snapshot(bootstrap, topics),
            Source::Client(c) => match c.as_ref() {
                Ok(c) => via_client(c, topics),
                Err(e) => Err(e.clone()),
            },
        }
    }
}

fn via_client(c: &BaseConsumer<Quiet>, topics: &[String]) -> Result<Topology, String> {
    // One topic: ask for it alone; several: ask for all and keep the bench's.
    let one = match topics {
        [t] => Some(t.as_str()),
        _ => None,
    };
    let md = c
        .fetch_metadata(one, limits::TOPOLOGY_TIMEOUT)
        .map_err(|e| format!("Metadata: {e}"))?;
    let mut partitions = Vec::new();
    for t in md
        .topics()
        .iter()
        .filter(|t| topics.iter().any(|n| n == t.name()))
    {
        for p in t.partitions() {
            partitions.push(PartitionNode {
                topic: t.name().to_string(),
                partition: p.id(),
                leader: p.leader(),
                replicas: p.replicas().to_vec(),
                isr: p.isr().to_vec(),
                error_code: p.error().map(|e| e as i16).unwrap_or(0),
            });
        }
    }
    partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    let mut brokers: Vec<BrokerNode> = md
        .brokers()
        .iter()
        .map(|b| BrokerNode {
            id: b.id(),
            host: b.host().to_string(),
            port: b.port(),
            rack: None,
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    Ok(Topology {
        cluster_id: None,
        controller_id: -1,
        brokers,
        partitions,
    })
}

/// One Metadata request for `topics` to the first bootstrap address that accepts a connection.
pub fn snapshot(bootstrap: &str, topics: &[String]) -> Result<Topology, String> {
    match crate::target::connect_first(bootstrap, limits::TOPOLOGY_TIMEOUT) {
        Ok((entry, stream)) => ask(stream, topics).map_err(|e| format!("{entry}: Metadata: {e}")),
        Err(problems) => Err(format!(
            "no bootstrap broker answered: {}",
            problems.join("; ")
        )),
    }
}

fn ask(mut stream: TcpStream, topics: &[String]) -> Result<Topology, String> {
    let io = |e: std::io::Error| e.to_string();
    stream
        .set_read_timeout(Some(limits::TOPOLOGY_TIMEOUT))
        .map_err(io)?;
    stream
        .set_write_timeout(Some(limits::TOPOLOGY_TIMEOUT))
        .map_err(io)?;
    let _ = stream.set_nodelay(true);
    stream.write_all(&request(topics)?).map_err(io)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(io)?;
    let n = i32::from_be_bytes(len);
    if n < 4 || n as usize > limits::MAX_TOPOLOGY_RESPONSE_BYTES {
        return Err(format!("response size {n} is out of bounds"));
    }
    let mut body = vec![0u8; n as usize];
    stream.read_exact(&mut body).map_err(io)?;
    decode(Bytes::from(body))
}

/// The framed Metadata request (size prefix included).
fn request(topics: &[String]) -> Result<BytesMut, String> {
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::Metadata as i16)
        .with_request_api_version(METADATA_VERSION)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("sluice-bench-topology")));
    let body = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                })
                .collect(),
        ));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header
        .encode(
            &mut buf,
            ApiKey::Metadata.request_header_version(METADATA_VERSION),
        )
        .map_err(|e| e.to_string())?;
    body.encode(&mut buf, METADATA_VERSION)
        .map_err(|e| e.to_string())?;
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    Ok(buf)
}

fn decode(mut body: Bytes) -> Result<Topology, String> {
    ResponseHeader::decode(
        &mut body,
        ApiKey::Metadata.response_header_version(METADATA_VERSION),
    )
    .map_err(|e| e.to_string())?;
    let r = MetadataResponse::decode(&mut body, METADATA_VERSION).map_err(|e| e.to_string())?;
    if body.has_remaining() {
        return Err(format!("{} bytes after the response", body.remaining()));
    }
    let mut partitions = Vec::new();
    for t in &r.topics {
        let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
        for p in &t.partitions {
            partitions.push(PartitionNode {
                topic: name.clone(),
                partition: p.partition_index,
                leader: p.leader_id.0,
                replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
                isr: p.isr_nodes.iter().map(|b| b.0).collect(),
                error_code: p.error_code,
            });
        }
    }
    partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    let mut brokers: Vec<BrokerNode> = r
        .brokers
        .iter()
        .map(|b| BrokerNode {
            id: b.node_id.0,
            host: b.host.to_string(),
            port: b.port,
            rack: b.rack.as_ref().map(|r| r.to_string()),
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    Ok(Topology {
        cluster_id: r.cluster_id.as_ref().map(|c| c.to_string()),
        controller_id: r.controller_id.0,
        brokers,
        partitions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(p: i32, leader: i32, replicas: &[i32], isr: &[i32]) -> PartitionNode {
        PartitionNode {
            topic: "t".into(),
            partition: p,
            leader,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            error_code: 0,
        }
    }

    fn broker(id: i32) -> BrokerNode {
        BrokerNode {
            id,
            host: "127.0.0.1".into(),
            port: 19090 + 2 * id,
            rack: None,
        }
    }

    #[test]
    fn diff_lists_leader_isr_broker_and_controller_changes() {
        let a = Topology {
            cluster_id: Some("c".into()),
            controller_id: 1,
            brokers: vec![broker(1), broker(2), broker(3)],
            partitions: vec![
                part(0, 1, &[1, 2, 3], &[1, 2, 3]),
                part(1, 2, &[2, 3, 1], &[2, 3, 1]),
            ],
        };
        assert!(diff(&a, &a.clone()).is_empty());
        assert_eq!(a.leaders_per_broker(), BTreeMap::from([(1, 1), (2, 1)]));
        assert_eq!(a.min_replicas_and_isr(), Some((3, 3)));
        let mut b = a.clone();
        b.brokers.remove(0);
        b.controller_id = 2;
        b.partitions[0] = part(0, 2, &[1, 2, 3], &[2, 3]);
        // ISR order alone is not a change.
        b.partitions[1] = part(1, 2, &[2, 3, 1], &[1, 2, 3]);
        let d = diff(&a, &b);
        let whats: Vec<&str> = d.iter().map(|c| c.what).collect();
        // The controller id is not compared (KRaft brokers answer a random one).
        assert_eq!(whats, ["broker_removed", "leader", "isr"]);
        assert_eq!(d[1].subject, "t/0");
        assert_eq!((d[1].before.as_str(), d[1].after.as_str()), ("1", "2"));
        assert_eq!(
            (d[2].before.as_str(), d[2].after.as_str()),
            ("[1,2,3]", "[2,3]")
        );
        let r = TopologyReport::new(Ok(a), Ok(b));
        assert_eq!(r.changes.len(), 3);
        let text = r.human();
        assert!(text.contains("3 broker(s)"), "{text}");
        assert!(text.contains("change: isr t/0 [1,2,3] -> [2,3]"), "{text}");
        let failed = TopologyReport::new(Err("down".into()), Err("down".into()));
        assert!(failed.changes.is_empty() && failed.human().contains("unknown: down"));
    }

    #[test]
    fn a_request_round_trips_through_the_codec() {
        let buf = request(&["a".into(), "b".into()]).expect("encodes");
        let mut b = buf.freeze();
        let n = b.get_i32() as usize;
        assert_eq!(n, b.remaining());
        let h = RequestHeader::decode(&mut b, ApiKey::Metadata.request_header_version(9))
            .expect("header");
        assert_eq!(h.request_api_version, 9);
        let req = MetadataRequest::decode(&mut b, 9).expect("body");
        assert_eq!(req.topics.map(|t| t.len()), Some(2));
        assert!(!req.allow_auto_topic_creation);
    }
}
