//! The bench's librdkafka clients: the settings each kind starts from (producer, assign()-only
//! consumer, probe, admin) with the user's `-X` settings applied last, the first Metadata
//! check, and the admin requests that create and delete the run's topics and group.
//!
//! Guarantees: every admin call and wait is bounded (`limits::admin_timeout`,
//! `limits::TOPIC_READY_TIMEOUT`, `limits::METADATA_TIMEOUT`); keys the bench owns are refused
//! before the run (`clientconf`), so the user's settings only add or replace defaults.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;

use crate::clientconf::ClientConf;
use crate::limits;
use crate::scenario::Scenario;
use crate::vocab::ErrorLog;

/// The context of consumers and probes: their errors go to the run's log.
#[derive(Debug)]
pub(crate) struct ConsumerCtx {
    pub(crate) errors: Arc<ErrorLog>,
    pub(crate) who: &'static str,
}

impl ClientContext for ConsumerCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, msg: &str) {
        log_to_errors(&self.errors, level, fac, msg);
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.errors.note(format!("{}: {error}: {reason}", self.who));
    }
}

impl ConsumerContext for ConsumerCtx {}

/// librdkafka's own log lines: warnings and worse go to the report's error list; the rest
/// (only logged with `-X debug=...`, see `base_config`) is written to stderr with a UTC
/// timestamp, to line up with a broker's log.
pub(crate) fn log_to_errors(errors: &ErrorLog, level: RDKafkaLogLevel, fac: &str, msg: &str) {
    if (level as i32) <= (RDKafkaLogLevel::Warning as i32) {
        errors.note(format!("librdkafka {fac}: {msg}"));
    } else {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        eprintln!(
            "{}.{:03} librdkafka {fac}: {msg}",
            crate::units::utc_string(now.as_secs_f64()).trim_end_matches('Z'),
            now.subsec_millis()
        );
    }
}

/// The settings every client starts from; the user's (`cc`) are applied last by the callers
/// (`finish`), so they win over these defaults.
pub(crate) fn base_config(bootstrap: &str, client_id: &str, cc: &ClientConf) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("client.id", client_id)
        // Latency benchmark on loopback: no Nagle (the Java client disables it too).
        .set("socket.nagle.disable", "true")
        // `-X debug=...`: librdkafka's debug lines reach `log_to_errors`, which prints them.
        .set_log_level(if cc.debug() {
            RDKafkaLogLevel::Debug
        } else {
            RDKafkaLogLevel::Warning
        });
    c
}

/// The user's settings over the bench's (see `clientconf`: keys the bench owns are refused
/// before the run, so these only add or replace defaults).
pub(crate) fn finish(mut c: ClientConfig, cc: &ClientConf) -> ClientConfig {
    cc.apply(&mut c);
    c
}

pub(crate) fn producer_config(s: &Scenario, bootstrap: &str, i: u32) -> ClientConfig {
    let cc = &s.client_config;
    let mut c = base_config(bootstrap, &format!("sluice-bench-producer-{i}"), cc);
    c.set("acks", s.acks.config_value())
        .set("compression.codec", s.compression.config_value())
        .set("linger.ms", s.linger_ms.to_string())
        .set("batch.size", s.batch_bytes.to_string())
        .set("enable.idempotence", s.idempotence.to_string())
        .set(
            "max.in.flight.requests.per.connection",
            s.max_in_flight.to_string(),
        )
        .set(
            "queue.buffering.max.messages",
            limits::PRODUCER_QUEUE_MAX_MESSAGES.to_string(),
        )
        .set(
            "queue.buffering.max.kbytes",
            limits::PRODUCER_QUEUE_MAX_KBYTES.to_string(),
        )
        .set(
            "statistics.interval.ms",
            limits::CLIENT_STATS_INTERVAL.as_millis().to_string(),
        );
    if let Some(id) = &s.transactional_id {
        // Producer i's own id, so producers never fence each other; a transaction may live
        // up to its interval, with room for the flush and EndTxn.
        let timeout_ms = (s.txn_interval_ms as u64 + limits::TXN_CALL_TIMEOUT.as_millis() as u64)
            .max(limits::TXN_TIMEOUT_MS as u64);
        c.set("transactional.id", format!("{id}-{i}"))
            .set("enable.idempotence", "true")
            .set("transaction.timeout.ms", timeout_ms.to_string());
    }
    if s.message_bytes + 512 > 1_000_000 {
        c.set("message.max.bytes", (s.message_bytes + 4096).to_string());
    }
    finish(c, cc)
}

pub(crate) fn consumer_config(bootstrap: &str, client_id: &str, cc: &ClientConf) -> ClientConfig {
    let mut c = base_config(bootstrap, client_id, cc);
    // assign() only: no group membership, no commits, no offset store.
    c.set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "false")
        .set(
            "queued.max.messages.kbytes",
            limits::CONSUMER_QUEUE_MAX_KBYTES.to_string(),
        );
    finish(c, cc)
}

/// A bench consumer: like `consumer_config`, but it stores each message's offset as poll()
/// hands it over and auto-commits the stored offsets every `commit_interval_ms` to `group`
/// (assign() only, so the commits are standalone ones: generation -1, no member id).
pub(crate) fn committing_consumer_config(
    bootstrap: &str,
    client_id: &str,
    group: &str,
    commit_interval_ms: u32,
    read_committed: bool,
    cc: &ClientConf,
) -> ClientConfig {
    let mut c = consumer_config(bootstrap, client_id, cc);
    if read_committed {
        // Transactional mode: records become visible at their commit (e2e includes it), and
        // aborted ones never.
        c.set("isolation.level", "read_committed");
    }
    c.set("group.id", group)
        .set("enable.auto.commit", "true")
        .set("enable.auto.offset.store", "true")
        .set(
            "auto.commit.interval.ms",
            commit_interval_ms.max(1).to_string(),
        );
    finish(c, cc)
}

/// The per-run group id the consumers commit to.
pub(crate) fn group_id(run_tag: u32) -> String {
    format!("sluice-bench-{run_tag:08x}")
}

pub(crate) type Probe = BaseConsumer<ConsumerCtx>;

pub(crate) fn make_probe(
    bootstrap: &str,
    cc: &ClientConf,
    errors: &Arc<ErrorLog>,
) -> Result<Probe, String> {
    consumer_config(bootstrap, "sluice-bench-probe", cc)
        .create_with_context(ConsumerCtx {
            errors: errors.clone(),
            who: "probe",
        })
        .map_err(|e| format!("cannot create a client: {e}"))
}

/// A Metadata round trip; fails clearly when the address is not a working Kafka broker. An
/// authentication or TLS failure (a wrong password, an untrusted certificate) fails within
/// about a second with the client's own reason, instead of waiting out the timeout.
pub fn check_metadata(bootstrap: &str, cc: &ClientConf) -> Result<usize, String> {
    let errors = Arc::new(ErrorLog::default());
    let probe = make_probe(bootstrap, cc, &errors)?;
    let deadline = Instant::now() + limits::METADATA_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let step = left.min(limits::METADATA_CHECK_STEP);
        let err = match probe.fetch_metadata(None, step) {
            Ok(m) => return Ok(m.brokers().len()),
            Err(e) => e,
        };
        // Serves the error callback (authentication failures arrive there).
        let _ = probe.poll(Duration::ZERO);
        let (_, kinds, _) = errors.snapshot(Instant::now());
        if let Some(k) = kinds.iter().find(|k| is_auth_failure(&k.example)) {
            return Err(format!(
                "{bootstrap}: the client could not authenticate or complete the TLS handshake: {}",
                k.example
            ));
        }
        if left <= step {
            let seen = kinds.first().map(|k| format!(" (client: {})", k.example));
            return Err(format!(
                "{bootstrap} accepted a connection but did not answer Metadata within {:?}: {err}{}",
                limits::METADATA_TIMEOUT,
                seen.unwrap_or_default()
            ));
        }
    }
}

/// A client error that retrying will not cure: SASL authentication or the TLS handshake.
pub(crate) fn is_auth_failure(msg: &str) -> bool {
    [
        "Authentication",
        "SASL authentication error",
        "SSL handshake failed",
        "certificate verify failed",
    ]
    .iter()
    .any(|m| msg.contains(m))
}

pub(crate) fn admin_runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start a runtime for admin requests: {e}"))
}

pub(crate) fn admin_config(bootstrap: &str, cc: &ClientConf) -> ClientConfig {
    finish(base_config(bootstrap, "sluice-bench-admin", cc), cc)
}

pub(crate) fn create_topics(
    bootstrap: &str,
    topics: &[String],
    s: &Scenario,
) -> Result<(), String> {
    let partitions = s.partitions;
    let admin: AdminClient<DefaultClientContext> = admin_config(bootstrap, &s.client_config)
        .create()
        .map_err(|e| format!("cannot create an admin client: {e}"))?;
    let timeout = limits::admin_timeout(topics.len() * partitions.max(1) as usize);
    let opts = AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    // -1 (the default) lets the broker apply its default.replication.factor (KIP-464).
    let new: Vec<NewTopic<'_>> = topics
        .iter()
        .map(|t| {
            let n = NewTopic::new(
                t,
                partitions,
                TopicReplication::Fixed(s.replication_factor.into()),
            );
            s.topic_config
                .iter()
                .fold(n, |n, (k, v)| n.set(k.as_str(), v.as_str()))
        })
        .collect();
    let topic = topics.first().map(String::as_str).unwrap_or("");
    let rt = admin_runtime()?;
    let res = rt.block_on(async {
        tokio::time::timeout(timeout * 2, admin.create_topics(new.iter(), &opts)).await
    });
    match res {
        Err(_) => Err(format!("CreateTopics for {topic} timed out")),
        Ok(Err(e)) => Err(format!("CreateTopics for {topic} failed: {e}")),
        Ok(Ok(results)) => {
            for r in results {
                if let Err((name, code)) = r {
                    return Err(format!("CreateTopics for {name} failed: {code}"));
                }
            }
            Ok(())
        }
    }
}

pub(crate) fn delete_topics(
    bootstrap: &str,
    topics: &[String],
    partitions: i32,
    cc: &ClientConf,
) -> bool {
    let timeout = limits::admin_timeout(topics.len() * partitions.max(1) as usize);
    let Ok(admin) = admin_config(bootstrap, cc).create::<AdminClient<DefaultClientContext>>()
    else {
        return false;
    };
    let opts = AdminOptions::new()
        .operation_timeout(Some(timeout))
        .request_timeout(Some(timeout));
    let Ok(rt) = admin_runtime() else {
        return false;
    };
    let res = rt.block_on(async {
        let names: Vec<&str> = topics.iter().map(String::as_str).collect();
        tokio::time::timeout(timeout * 2, admin.delete_topics(&names, &opts)).await
    });
    matches!(res, Ok(Ok(ref v)) if v.iter().all(|r| r.is_ok()))
}

/// Deletes the bench's consumer group (its committed offsets), as its topics are deleted: a
/// run leaves no `sluice-bench-*` group behind. True when the broker confirmed it.
pub(crate) fn delete_group(bootstrap: &str, group: &str, cc: &ClientConf) -> bool {
    let Ok(admin) = admin_config(bootstrap, cc).create::<AdminClient<DefaultClientContext>>()
    else {
        return false;
    };
    let timeout = limits::admin_timeout(1);
    let opts = AdminOptions::new().request_timeout(Some(timeout));
    let Ok(rt) = admin_runtime() else {
        return false;
    };
    let res = rt.block_on(async {
        tokio::time::timeout(timeout * 2, admin.delete_groups(&[group], &opts)).await
    });
    match res {
        Ok(Ok(v)) => v.iter().all(|r| match r {
            Ok(_) => true,
            // Nothing was committed (e.g. a run with no consumed message): nothing to delete.
            Err((_, code)) => *code == rdkafka::types::RDKafkaErrorCode::GroupIdNotFound,
        }),
        _ => false,
    }
}

/// Waits until Metadata shows `partitions` partitions of every topic, each with a leader.
pub(crate) fn wait_topics_ready(
    probe: &Probe,
    topics: &[String],
    partitions: i32,
) -> Result<(), String> {
    let deadline = Instant::now() + limits::TOPIC_READY_TIMEOUT;
    let mut last = String::from("no answer");
    let mut pending: Vec<&String> = topics.iter().collect();
    while Instant::now() < deadline {
        // One topic: ask for it alone; several: one Metadata request for all topics.
        let which = (pending.len() == 1).then(|| pending[0].as_str());
        match probe.fetch_metadata(which, Duration::from_secs(2)) {
            Ok(md) => {
                pending.retain(|topic| {
                    let Some(t) = md.topics().iter().find(|t| t.name() == topic.as_str()) else {
                        last = format!("{topic} not visible");
                        return true;
                    };
                    let ready = t.error().is_none()
                        && t.partitions().len() == partitions as usize
                        && t.partitions()
                            .iter()
                            .all(|p| p.leader() >= 0 && p.error().is_none());
                    if !ready {
                        last = format!(
                            "{topic}: {} of {partitions} partitions visible",
                            t.partitions().len()
                        );
                    }
                    !ready
                });
                if pending.is_empty() {
                    return Ok(());
                }
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!(
        "topic {} not ready within {:?} ({last})",
        pending.first().map(|t| t.as_str()).unwrap_or(""),
        limits::TOPIC_READY_TIMEOUT
    ))
}
