"""Transactions with confluent-kafka (librdkafka): commit and abort across partitions,
read_committed and read_uncommitted consumers, fencing by a second producer with the same
transactional id, and the transaction state surviving a restart (docs/transactions.md §10).
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaException, TopicPartition

from helpers import ck_consumer, ck_poll, ck_producer, create_topic


def txn_producer(bootstrap: str, txn_id: str):
    p = ck_producer(bootstrap, **{
        "transactional.id": txn_id,
        "enable.idempotence": True,
        "transaction.timeout.ms": 30000,
        "linger.ms": 2,
    })
    p.init_transactions(30)
    return p


def consume(bootstrap: str, topic: str, partitions: int, isolation: str, n: int,
            timeout: float = 15.0) -> list[bytes]:
    c = ck_consumer(bootstrap, **{"isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        msgs = ck_poll(c, n, timeout=timeout)
        msgs += ck_poll(c, 100, timeout=1.5)
        return sorted(m.value() for m in msgs)
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, partition: int, isolation: str) -> int:
    c = ck_consumer(bootstrap, **{"isolation.level": isolation})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return high
    finally:
        c.close()


def test_commit_and_abort_are_seen_exactly_under_each_isolation_level(broker, topic_name):
    """Goal: committed records are visible to read_committed consumers and aborted ones
    never are; read_uncommitted consumers see both; markers take offsets.
    Method: one transactional producer over 2 partitions: commit 10, abort 10, commit 10,
    then an open transaction of 5; consume each way."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = txn_producer(broker.bootstrap, f"txn-{uuid.uuid4().hex[:8]}")
    expected_committed = []
    all_values = []
    for round_, commit in enumerate([True, False, True]):
        p.begin_transaction()
        for i in range(10):
            v = f"r{round_}-{i}".encode()
            p.produce(topic_name, v, partition=i % 2)
            all_values.append(v)
            if commit:
                expected_committed.append(v)
        # Sent before the abort: librdkafka purges what it has not sent yet.
        p.flush(30)
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    p.begin_transaction()
    for i in range(5):
        v = f"open-{i}".encode()
        p.produce(topic_name, v, partition=i % 2)
        all_values.append(v)
    p.flush(30)
    committed = consume(broker.bootstrap, topic_name, 2, "read_committed", len(expected_committed))
    assert committed == sorted(expected_committed)
    uncommitted = consume(broker.bootstrap, topic_name, 2, "read_uncommitted", len(all_values))
    assert uncommitted == sorted(all_values)
    # Each partition: 15 + 3 markers = 18 decided offsets; the open transaction's records
    # are past the LSO.
    for part in range(2):
        assert end_offsets(broker.bootstrap, topic_name, part, "read_committed") == 18
    p.commit_transaction(30)
    for part in range(2):
        assert end_offsets(broker.bootstrap, topic_name, part, "read_committed") > 18


def test_a_second_producer_fences_the_first(broker, topic_name):
    """Goal: InitProducerId with the same transactional id bumps the epoch, aborting the
    first producer's open transaction; the first producer is fenced and its records are
    never visible to read_committed consumers.
    Method: producer A begins and produces; producer B inits with the same id; A's commit
    fails; B commits its own records."""
    create_topic(broker.bootstrap, topic_name)
    txn_id = f"txn-{uuid.uuid4().hex[:8]}"
    a = txn_producer(broker.bootstrap, txn_id)
    a.begin_transaction()
    a.produce(topic_name, b"from-a")
    a.flush(30)
    b = txn_producer(broker.bootstrap, txn_id)
    with pytest.raises(KafkaException):
        a.commit_transaction(10)
    b.begin_transaction()
    b.produce(topic_name, b"from-b")
    b.commit_transaction(30)
    assert consume(broker.bootstrap, topic_name, 1, "read_committed", 1) == [b"from-b"]


def test_transaction_state_survives_a_restart(sluice_factory, topic_name):
    """Goal: after a clean restart the transactional id keeps its producer id (the epoch is
    bumped) and a committed transaction stays visible, an aborted one invisible.
    Method: commit, abort, restart, init again, commit; consume read_committed."""
    broker = sluice_factory()
    create_topic(broker.bootstrap, topic_name)
    txn_id = f"txn-{uuid.uuid4().hex[:8]}"
    p = txn_producer(broker.bootstrap, txn_id)
    p.begin_transaction()
    p.produce(topic_name, b"one")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic_name, b"aborted")
    p.flush(30)
    p.abort_transaction(30)
    del p
    broker.restart()
    p = txn_producer(broker.bootstrap, txn_id)
    p.begin_transaction()
    p.produce(topic_name, b"two")
    p.commit_transaction(30)
    assert consume(broker.bootstrap, topic_name, 1, "read_committed", 2) == [b"one", b"two"]


def test_a_stalled_transaction_is_aborted_at_its_timeout(broker, topic_name):
    """Goal: transaction.timeout.ms is enforced: the coordinator's timer aborts a stalled
    transaction with a bumped epoch, the LSO moves past it, its records never become
    visible to read_committed consumers, and its producer is fenced.
    Method: timeout 1 s, produce and flush, wait past the timer's 10 s interval."""
    create_topic(broker.bootstrap, topic_name)
    p = ck_producer(broker.bootstrap, **{
        "transactional.id": f"txn-{uuid.uuid4().hex[:8]}",
        "enable.idempotence": True,
        "transaction.timeout.ms": 1000,
        "socket.timeout.ms": 1000,
        "message.timeout.ms": 1000,
    })
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"stalled")
    p.flush(30)
    assert end_offsets(broker.bootstrap, topic_name, 0, "read_committed") == 0
    deadline = time.monotonic() + 25
    while end_offsets(broker.bootstrap, topic_name, 0, "read_committed") == 0:
        assert time.monotonic() < deadline, "the stalled transaction was never aborted"
        time.sleep(0.5)
    assert end_offsets(broker.bootstrap, topic_name, 0, "read_committed") == 2
    assert consume(broker.bootstrap, topic_name, 1, "read_committed", 1, timeout=2) == []
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
