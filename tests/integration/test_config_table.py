"""The one broker config table (issue 15): a real `sluice serve` configured at once from a
server.properties file, SLUICE_* environment variables and --override flags, checked through a
real client's DescribeConfigs on the broker resource (librdkafka's AdminClient) and through
Kafka's own `kafka-configs.sh --describe --entity-type brokers --all` (ConfigCommand from
kafka-tools 4.4, fetched by scripts/java-deps.sh): precedence flags > env > file > default, every setting of
docs/configuration.md listed with its source, sensitive ones null, topic defaults fed by the
log.* settings; and unknown keys refused at start, from every source, with a suggestion."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

from conftest import sluice_bin
from helpers import create_topic
from java_client import java_cmd, java_cp  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
# kafka-configs.sh's class since Kafka 4.x moved it from the broker jars to kafka-tools.
CONFIG_COMMAND = "org.apache.kafka.tools.ConfigCommand"
STATIC = ConfigSource.STATIC_BROKER_CONFIG.value
DEFAULT = ConfigSource.DEFAULT_CONFIG.value

PROPERTIES = """\
# a server.properties with Kafka keys, the security ones only stored (no TLS/SASL listener)
num.partitions=3
log.retention.ms=1000
log.segment.bytes=4194304
group.initial.rebalance.delay.ms=100
ssl.keystore.key=-----BEGIN PRIVATE KEY----- not-a-real-key
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.\\
    PlainLoginModule required user_admin="hunter2";
"""


def documented_keys() -> list[str]:
    text = (REPO / "docs" / "configuration.md").read_text()
    settings = text.split("<!-- settings:begin", 1)[1]
    return re.findall(r"^\| `([a-z0-9.]+)` \|", settings, re.M)


def describe_broker(bootstrap: str) -> dict:
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1")
    return a.describe_configs([res], request_timeout=15)[res].result(timeout=20)


def describe_topic(bootstrap: str, topic: str) -> dict:
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.TOPIC, topic)
    return a.describe_configs([res], request_timeout=15)[res].result(timeout=20)


@pytest.fixture
def configured(sluice_factory, tmp_path, monkeypatch):
    props = tmp_path / "server.properties"
    props.write_text(PROPERTIES)
    monkeypatch.setenv("SLUICE_LOG_RETENTION_MS", "2000")        # over the file's 1000
    monkeypatch.setenv("SLUICE_LOG_SEGMENT_BYTES", "8388608")       # over the file, under the flag
    monkeypatch.setenv("SLUICE_LOG_CLEANER_BACKOFF_MS", "1234")  # env only
    return sluice_factory(["--config", str(props),
                           "--override", "log.segment.bytes=16777216",
                           "--override", "producer.id.expiration.ms=5000"])


def test_sources_and_precedence_through_describe_configs(configured, topic_name):
    """Goal: file, env and flags all reach the broker with flags > env > file > default, and
    DescribeConfigs lists every documented setting with its source; secrets are null."""
    entries = describe_broker(configured.bootstrap)
    missing = [k for k in documented_keys() if k not in entries]
    assert not missing, f"settings missing from DescribeConfigs: {missing}"
    # The named omissions of the old hand list.
    for key in ("group.max.size", "queued.max.request.bytes", "producer.id.expiration.ms"):
        assert key in entries, key

    def check(key: str, value: str | None, source: int):
        e = entries[key]
        assert (e.value, e.source) == (value, source), (key, e.value, e.source)

    check("num.partitions", "3", STATIC)                    # file
    check("group.initial.rebalance.delay.ms", "100", STATIC)
    check("log.retention.ms", "2000", STATIC)               # env over file
    check("log.cleaner.backoff.ms", "1234", STATIC)         # env
    check("log.segment.bytes", "16777216", STATIC)             # --override over env and file
    check("producer.id.expiration.ms", "5000", STATIC)
    check("log.retention.check.interval.ms", "300000", DEFAULT)
    check("log.dirs", str(configured.data_dir), STATIC)     # the --data-dir alias
    assert all(e.is_read_only for e in entries.values())

    key = entries["ssl.keystore.key"]
    assert key.is_sensitive and key.value is None and key.source == STATIC, key
    jaas = entries["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None, jaas
    assert not any("hunter2" in (e.value or "") for e in entries.values())

    # Synonyms (librdkafka asks for them): log.retention.ms set, its synonyms' defaults after.
    syn = entries["log.retention.ms"].synonyms
    if syn:
        assert list(syn)[0] == "log.retention.ms", list(syn)
        assert syn["log.retention.hours"].value == "168", syn

    # One source of topic defaults: the log.* settings are the topic's.
    create_topic(configured.bootstrap, topic_name)
    t = describe_topic(configured.bootstrap, topic_name)
    assert (t["retention.ms"].value, t["retention.ms"].source) == ("2000", STATIC)
    assert (t["segment.bytes"].value, t["segment.bytes"].source) == ("16777216", STATIC)
    assert (t["index.interval.bytes"].value, t["index.interval.bytes"].source) == ("4096", DEFAULT)


def test_kafka_configs_describe_all(configured, java_cp):
    """Goal: Kafka's own ConfigCommand reads the broker's settings: every documented key,
    the values set through each source, sensitive ones hidden."""
    cmd = java_cmd(CONFIG_COMMAND, ["--bootstrap-server", configured.bootstrap, "--describe",
                                    "--entity-type", "brokers", "--entity-name", "1", "--all"])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    for key in documented_keys():
        assert f"  {key}=" in out, f"{key} missing from kafka-configs output:\n{out[:3000]}"
    assert "log.retention.ms=2000 sensitive=false synonyms={STATIC_BROKER_CONFIG:log.retention.ms=2000" in out, out
    assert "log.segment.bytes=16777216" in out and "num.partitions=3" in out
    assert "ssl.keystore.key=null sensitive=true" in out, out
    assert "hunter2" not in out


def refused(tmp_path: Path, args: list[str], env: dict[str, str] | None = None) -> str:
    """Starts `sluice serve` expecting it to refuse; returns stderr."""
    import os
    full_env = {**os.environ, **(env or {})}
    r = subprocess.run([str(sluice_bin()), "serve", "--listen", "127.0.0.1:0", "--data-dir",
                        str(tmp_path / "data"), *args], capture_output=True, text=True, timeout=30,
                       env=full_env, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "listening" not in r.stdout
    return r.stderr


def test_unknown_keys_are_errors_with_a_suggestion(tmp_path):
    """Goal: an unknown key stops the broker before it listens, wherever it comes from, and
    the message names the source and the key meant."""
    err = refused(tmp_path, ["--override", "log.retention.msec=5"])
    assert "did you mean log.retention.ms?" in err, err
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\n\nnum.partition=3\n")
    err = refused(tmp_path, ["--config", str(props)])
    assert f"{props} line 3" in err and "did you mean num.partitions?" in err, err
    err = refused(tmp_path, [], env={"SLUICE_NUM_PARTITIONS": "lots"})
    assert "SLUICE_NUM_PARTITIONS" in err and "num.partitions" in err, err
    # A misspelt variable is refused too, not left unread with the setting at its default.
    err = refused(tmp_path, [], env={"SLUICE_LOG_RETENTION_MSEC": "5"})
    assert err.startswith("sluice: SLUICE_LOG_RETENTION_MSEC:"), err
    assert "did you mean SLUICE_LOG_RETENTION_MS (log.retention.ms)?" in err, err
    err = refused(tmp_path, ["--override", "offsets.topic.replication.factor=3"])
    assert "offsets.topic.replication.factor" in err and "must be 1" in err, err


def test_deploy_server_properties_serves(sluice_factory, topic_name):
    """Goal: the server.properties shipped for the systemd unit (docs/deploy/server.properties)
    loads and serves as documented. Method: start `sluice serve --config` with that file, the
    flags moving what would clash on a shared machine (listener and admin listener to
    ephemeral loopback ports, data dir to a temp dir) and `--override advertised.listeners=`
    (the file's example host name does not resolve here); the file's other settings stay.
    A confluent producer writes 20 records and an assigned consumer reads all 20 back in
    order; the admin listener answers /ready; DescribeConfigs reports the file's
    log.retention.ms as a static broker setting."""
    import urllib.request
    from confluent_kafka import TopicPartition
    from helpers import ck_consumer, ck_poll, ck_producer
    props = REPO / "docs" / "deploy" / "server.properties"
    b = sluice_factory(["--config", str(props), "--override", "advertised.listeners="], metrics=True)
    create_topic(b.bootstrap, topic_name)
    p = ck_producer(b.bootstrap)
    for i in range(20):
        p.produce(topic_name, value=b"deploy-%02d" % i)
    assert p.flush(15) == 0
    c = ck_consumer(b.bootstrap)
    c.assign([TopicPartition(topic_name, 0, 0)])
    got = ck_poll(c, 20, timeout=20)
    c.close()
    assert [m.value() for m in got] == [b"deploy-%02d" % i for i in range(20)]
    with urllib.request.urlopen(b.metrics_url + "/ready", timeout=10) as r:
        assert r.status == 200
    entry = describe_broker(b.bootstrap)["log.retention.ms"]
    assert (entry.value, entry.source) == ("604800000", STATIC), entry
