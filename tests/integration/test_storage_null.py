"""`sluice serve --storage null`: the no-op log the bench calibrates against. The broker's real
front end (listeners, decoding, record validation, the append queue and commit rounds) over a
log that acknowledges every produce with offsets and keeps nothing: no journal byte, no sync, an
empty log to consumers, which long-poll instead of spinning. Checked with librdkafka against a
real process, its `/metrics` and DescribeConfigs."""

from __future__ import annotations

import subprocess

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from conftest import sluice_bin
from helpers import ck_consumer, ck_poll, ck_producer, create_topic
from test_metrics import scrape


def broker_configs(bootstrap: str) -> dict[str, str]:
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1")
    entries = a.describe_configs([res], request_timeout=15)[res].result(timeout=20)
    return {k: e.value for k, e in entries.items()}


def produce(bootstrap: str, topic: str, n: int) -> list[int]:
    offsets: list[int] = []
    errors: list = []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())

    p = ck_producer(bootstrap, acks="all", **{"linger.ms": 20})
    for i in range(n):
        p.produce(topic, value=f"null-{i:04d}".encode() * 8, partition=0, on_delivery=report)
    assert p.flush(20) == 0
    assert not errors, errors
    return sorted(offsets)


def test_null_storage_acknowledges_and_keeps_nothing(sluice_factory, topic_name):
    b = sluice_factory(["--storage", "null"], metrics=True)
    create_topic(b.bootstrap, topic_name)
    # Every record acknowledged with its own offset, as by the disk log.
    assert produce(b.bootstrap, topic_name, 300) == list(range(300))
    assert produce(b.bootstrap, topic_name, 50) == list(range(300, 350))

    m = scrape(b)
    assert m.get("sluice_produce_records_total", topic=topic_name) == 350
    assert m.get("sluice_log_journal_written_bytes_total") == 0
    assert m.get("sluice_log_journal_syncs_total") == 0

    # Consumers see an empty log: nothing to fetch, and the high watermark never moved.
    c = ck_consumer(b.bootstrap, **{"fetch.wait.max.ms": 500})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        assert ck_poll(c, 1, timeout=3.0) == []
        low, high = c.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=10)
        assert (low, high) == (0, 0)
    finally:
        c.close()
    # The consumer long-polled (fetch.wait.max.ms) instead of spinning on empty answers.
    fetches = scrape(b).get("sluice_requests_total", api="Fetch")
    assert fetches < 30, fetches

    assert broker_configs(b.bootstrap)["sluice.storage"] == "null"
    assert "calibration only" in b.stderr_text()


def test_disk_storage_is_the_default(sluice_factory, topic_name):
    b = sluice_factory(metrics=True)
    create_topic(b.bootstrap, topic_name)
    assert produce(b.bootstrap, topic_name, 20) == list(range(20))
    assert scrape(b).get("sluice_log_journal_written_bytes_total") > 0
    assert broker_configs(b.bootstrap)["sluice.storage"] == "disk"


def test_bad_storage_value_is_refused(tmp_path):
    proc = subprocess.run([str(sluice_bin()), "serve", "--listen", "127.0.0.1:0", "--data-dir",
                           str(tmp_path / "d"), "--override", "sluice.storage=memory"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2, proc
    assert "expected disk or null" in proc.stderr, proc.stderr
