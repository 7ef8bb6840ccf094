"""Transactions with kafka-python 3's transactional producer (its own protocol versions:
InitProducerId, AddPartitionsToTxn v3-style, EndTxn) and its read_committed consumer
(docs/transactions.md §10).
"""

from __future__ import annotations

import uuid

from kafka import KafkaConsumer, TopicPartition

from helpers import create_topic, kp_producer


def read_all(bootstrap: str, topic: str, isolation: str) -> list[tuple[int, bytes]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                      enable_auto_commit=False, consumer_timeout_ms=3000)
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        return [(m.offset, m.value) for m in c]
    finally:
        c.close()


def test_commit_and_abort_with_kafka_python(broker, topic_name):
    """Goal: kafka-python commits and aborts; its read_committed consumer sees only the
    committed records, its read_uncommitted consumer all of them, and markers take offsets.
    Method: commit, abort (after a flush, so the records are written), commit; read back."""
    create_topic(broker.bootstrap, topic_name)
    p = kp_producer(broker.bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:8]}",
                    enable_idempotence=True)
    p.init_transactions()
    for value, commit in [(b"c1", True), (b"a1", False), (b"c2", True)]:
        p.begin_transaction()
        p.send(topic_name, value)
        p.flush()
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.close()
    assert read_all(broker.bootstrap, topic_name, "read_committed") == [(0, b"c1"), (4, b"c2")]
    assert read_all(broker.bootstrap, topic_name, "read_uncommitted") == [
        (0, b"c1"), (2, b"a1"), (4, b"c2")]


def test_send_offsets_to_transaction_with_kafka_python(broker, topic_name):
    """Goal: kafka-python's send_offsets_to_transaction (AddOffsetsToTxn, TxnOffsetCommit at
    its own versions) commits the group's offset with the transaction and an abort leaves it
    where it was. Method: one transaction sends offset 3 and commits; a second sends offset
    9 and aborts; the group's committed offset is 3 (read by kafka-python's consumer)."""
    from kafka.structs import OffsetAndMetadata
    create_topic(broker.bootstrap, topic_name)
    group = f"kp-ctp-{uuid.uuid4().hex[:8]}"
    p = kp_producer(broker.bootstrap, transactional_id=f"kp-{uuid.uuid4().hex[:8]}",
                    enable_idempotence=True)
    p.init_transactions()
    tp = TopicPartition(topic_name, 0)
    for offset, commit in [(3, True), (9, False)]:
        p.begin_transaction()
        p.send(topic_name, b"x")
        p.send_offsets_to_transaction({tp: OffsetAndMetadata(offset, "", -1)}, group)
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
    p.close()
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        assert c.committed(tp) == 3
    finally:
        c.close()
