"""Transactions, broker side of slice 3 (docs/transactions.md §2, §7, §8): the transaction
settings in the broker's config table and in DescribeConfigs, `__transaction_state` in
Metadata as an internal topic, and KIP-890's TRANSACTION_ABORTABLE for Produce v11+.

Before this change `transaction.max.timeout.ms` was an unknown setting (the broker kept
900 000 and DescribeConfigs did not list it), Metadata answered `__transaction_state` with
an error, and Produce v11 got INVALID_TXN_STATE: every test here failed.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

import kwire
from admin_facade import admin
from helpers import ck_producer, create_topic
from java_client import java_cp  # noqa: F401 (fixture)

TXN_STATE = "__transaction_state"
OFFSETS = "__consumer_offsets"


def broker_configs(bootstrap: str) -> dict[str, str]:
    a = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.BROKER, "1")
    entries = a.describe_configs([res], request_timeout=15)[res].result(timeout=20)
    return {k: e.value for k, e in entries.items()}


def init_error(bootstrap: str, timeout_ms: int) -> str | None:
    """Runs InitProducerId through librdkafka; the error name, or None when it succeeded."""
    p = ck_producer(bootstrap, **{
        "transactional.id": f"txn-{uuid.uuid4().hex[:8]}",
        "transaction.timeout.ms": timeout_ms,
        "enable.idempotence": True,
        "socket.timeout.ms": 3000,
        "message.timeout.ms": 3000,
    })
    try:
        p.init_transactions(15)
        return None
    except KafkaException as e:
        return e.args[0].name()


def init_producer_id_v1(bootstrap: str, txn_id: str) -> tuple[int, int]:
    """Raw InitProducerId v1 for `txn_id`: (producer id, epoch)."""
    body = kwire.string(txn_id) + kwire.i32(60000)
    req = kwire.frame(kwire.header_v1(22, 1, 3) + body)
    r = kwire.Reader(kwire.roundtrip(bootstrap, req))
    assert r.i32() == 3
    r.i32()  # throttle
    assert r.i16() == kwire.NONE
    return r.i64(), r.i16()


def test_transaction_settings_are_applied_and_described(sluice_factory):
    """Goal: the transaction settings are broker settings under Kafka's names, enforced and
    reported. Method: a broker started with `transaction.max.timeout.ms=5000` and the other
    four set; DescribeConfigs (librdkafka) lists each with its value; InitProducerId with a
    6 s timeout gets INVALID_TRANSACTION_TIMEOUT, with 4 s it succeeds; a default broker
    reports Kafka's defaults."""
    settings = {
        "transaction.max.timeout.ms": "5000",
        "transactional.id.expiration.ms": "86400000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
        "transaction.state.log.segment.bytes": "1048576",
    }
    args = [a for k, v in settings.items() for a in ("--override", f"{k}={v}")]
    b = sluice_factory(args, name="set")
    described = broker_configs(b.bootstrap)
    for k, v in settings.items():
        assert described.get(k) == v, (k, described.get(k))
    assert described.get("transaction.state.log.num.partitions") == "1"
    assert init_error(b.bootstrap, 6000) == "INVALID_TRANSACTION_TIMEOUT"
    assert init_error(b.bootstrap, 4000) is None

    d = sluice_factory(name="default")
    described = broker_configs(d.bootstrap)
    assert described["transaction.max.timeout.ms"] == "900000"
    assert described["transactional.id.expiration.ms"] == "604800000"
    assert init_error(d.bootstrap, 600000) is None


def test_transaction_state_listed_as_internal_in_metadata(broker, topic_name):
    """Goal: Metadata describes `__transaction_state` as Kafka does: internal, one partition
    led by the broker, in the all-topics answer and by name. Method: raw Metadata v1 both
    ways; kafka-python's describe_topics by name and in the full list."""
    create_topic(broker.bootstrap, topic_name, 1)
    for wanted in (None, [TXN_STATE]):
        md = kwire.parse_metadata(
            kwire.roundtrip(broker.bootstrap, kwire.metadata_request_v1(7, wanted)), 1)
        err, parts = md.topics[TXN_STATE]
        assert err == kwire.NONE, md.topics
        assert [(p, e) for p, e, _ in parts] == [(0, kwire.NONE)]
        assert all(leader == md.brokers[0][0] for _, _, leader in parts)
        assert TXN_STATE in md.internal
    assert md.internal == {TXN_STATE}
    md = kwire.parse_metadata(kwire.roundtrip(broker.bootstrap, kwire.metadata_request_v1(8, None)), 1)
    assert md.internal == {OFFSETS, TXN_STATE}
    kp = admin("kafka-python", broker.bootstrap).a
    by_name = {t["name"]: t for t in kp.describe_topics([TXN_STATE])}
    assert by_name[TXN_STATE]["is_internal"] is True and by_name[TXN_STATE]["error_code"] == 0
    every = {t["name"]: t for t in kp.describe_topics()}
    assert every[TXN_STATE]["is_internal"] is True


@pytest.mark.parametrize("version,expected", [(10, 48), (11, 120)])
def test_produce_outside_the_transaction_is_abortable_from_v11(broker, topic_name, version, expected):
    """Goal: a transactional batch to a partition the transaction never added gets
    TRANSACTION_ABORTABLE (120) from Produce v11 (KIP-890) and INVALID_TXN_STATE (48) before;
    nothing is written. (From v12 the produce adds the partition itself: Transactions V2,
    test_txn_v2.py.) Method: raw flexible Produce with a transactional id and a
    transactional batch from a producer that never called AddPartitionsToTxn; then the
    partition's end offset is still 0 (a plain produce_v3 lands at offset 0)."""
    create_topic(broker.bootstrap, topic_name, 1)
    txn_id = f"txn-never-added-{version}"
    producer_id, epoch = init_producer_id_v1(broker.bootstrap, txn_id)
    batch = kwire.record_batch([kwire.RawRecord(key=None, value=b"x")], producer_id=producer_id,
                               producer_epoch=epoch, base_sequence=0, transactional=True)
    req = kwire.produce_request_flexible(version, 5, topic_name, 0, batch,
                                         transactional_id=txn_id)
    corr, code = kwire.parse_produce_flexible_error(kwire.roundtrip(broker.bootstrap, req))
    assert (corr, code) == (5, expected)
    plain = kwire.produce_v3(broker.bootstrap, topic_name, 0,
                             kwire.record_batch([kwire.RawRecord(key=None, value=b"y")]))
    assert plain.error_code == kwire.NONE and plain.base_offset == 0


def test_java_transactional_producer(broker, topic_name, java_cp):
    """Goal: Apache Kafka's own Java producer runs transactions against Sluice (FindCoordinator
    type 1, InitProducerId, AddPartitionsToTxn, Produce, EndTxn as that client sends them).
    Method: SluiceClient txn-produce over 2 partitions: commit, abort, commit rounds of 20;
    a read_committed librdkafka consumer then sees exactly the two committed rounds and a
    read_uncommitted one all three."""
    from java_client import run
    from test_txn_confluent import consume
    create_topic(broker.bootstrap, topic_name, 2)
    r = run("txn-produce", "--bootstrap", broker.bootstrap, "--topic", topic_name,
            "--transactional-id", f"java-{uuid.uuid4().hex[:8]}", "--rounds", "commit,abort,commit",
            "--count", 20, "--partitions", 2)
    assert r.ok, r.summary()
    assert r["rounds"] == ["commit", "abort", "commit"]
    committed = sorted(f"r{rnd}-{i:06d}".encode() for rnd in (0, 2) for i in range(20))
    assert consume(broker.bootstrap, topic_name, 2, "read_committed", 40) == committed
    every = sorted(f"r{rnd}-{i:06d}".encode() for rnd in range(3) for i in range(20))
    assert consume(broker.bootstrap, topic_name, 2, "read_uncommitted", 60) == every
