"""Offsets in a transaction (TxnOffsetCommit, KIP-447; docs/transactions.md §6.5) with
confluent-kafka (librdkafka): consume-transform-produce with `send_offsets_to_transaction`.
A commit makes the group's offsets and the output visible together; an abort moves neither
(a new consumer re-reads the input); a SIGKILL between TxnOffsetCommit and EndTxn leaves
the offsets uncommitted after the restart (the transaction is aborted at its timeout);
OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT while the transaction is
open.
"""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, TopicPartition

from helpers import ck_consumer, ck_poll, ck_producer, create_topic
import kwire

N = 30


class KafkaWire:
    """One raw connection for OffsetFetch v7 (librdkafka cannot be asked for
    `require_stable` explicitly)."""

    def __init__(self, bootstrap: str):
        self.sock = kwire.connect(bootstrap, timeout=10)
        self.correlation = 0

    def offset_fetch(self, group: str, topic: str, partition: int,
                     require_stable: bool) -> tuple[int, int]:
        self.correlation += 1
        self.sock.sendall(kwire.offset_fetch_request_v7(self.correlation, group, topic,
                                                        partition, require_stable))
        return kwire.parse_offset_fetch_v7(kwire.read_frame(self.sock))

    def close(self) -> None:
        self.sock.close()


def txn_producer(bootstrap: str, txn_id: str, timeout_ms: int = 30000):
    p = ck_producer(bootstrap, **{
        "transactional.id": txn_id,
        "enable.idempotence": True,
        "transaction.timeout.ms": timeout_ms,
        "socket.timeout.ms": min(10000, timeout_ms),
        "message.timeout.ms": min(15000, timeout_ms),
        "linger.ms": 2,
    })
    p.init_transactions(30)
    return p


def fill_input(bootstrap: str, topic: str, n: int = N) -> None:
    p = ck_producer(bootstrap)
    for i in range(n):
        p.produce(topic, value=f"in-{i}".encode())
    assert p.flush(15) == 0


def group_consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    c = ck_consumer(bootstrap, **{"group.id": group, "isolation.level": "read_committed"})
    c.subscribe([topic])
    return c


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = ck_consumer(bootstrap, **{"group.id": group, "isolation.level": "read_committed"})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=15)[0].offset
    finally:
        c.close()


def read_committed_values(bootstrap: str, topic: str, n: int, timeout: float = 15.0) -> list[bytes]:
    c = ck_consumer(bootstrap, **{"isolation.level": "read_committed"})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        msgs = ck_poll(c, n, timeout=timeout)
        msgs += ck_poll(c, 100, timeout=1.5)
        return sorted(m.value() for m in msgs)
    finally:
        c.close()


def transform_batch(bootstrap, consumer, producer, out_topic, n, commit: bool) -> list[bytes]:
    """Consumes n input records, produces one output per record and sends the consumer's
    positions in the same transaction; commits or aborts. Returns the input values."""
    msgs = ck_poll(consumer, n, timeout=20)
    assert len(msgs) == n, f"consumed {len(msgs)} of {n}"
    producer.begin_transaction()
    for m in msgs:
        producer.produce(out_topic, value=b"out-" + m.value())
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 30)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)
    return [m.value() for m in msgs]


def test_consume_transform_produce_commit_and_abort(broker, topic_name):
    """Goal: offsets sent in a transaction are the group's committed offsets exactly when
    the transaction commits; after an abort the committed offset does not move and a new
    consumer of the group re-reads the input; the output under read_committed is exact.
    Method: 30 input records; transaction 1 transforms 10 and commits; transaction 2
    transforms 10 and aborts; a new consumer re-reads from offset 10 and commits the rest
    (20) in transaction 3."""
    inp, out = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap, inp)
    create_topic(broker.bootstrap, out)
    fill_input(broker.bootstrap, inp)
    group = f"ctp-{uuid.uuid4().hex[:8]}"
    p = txn_producer(broker.bootstrap, f"txn-{uuid.uuid4().hex[:8]}")
    c = group_consumer(broker.bootstrap, group, inp)
    first = transform_batch(broker.bootstrap, c, p, out, 10, commit=True)
    assert committed(broker.bootstrap, group, inp) == 10
    transform_batch(broker.bootstrap, c, p, out, 10, commit=False)
    assert committed(broker.bootstrap, group, inp) == 10, "an aborted transaction moved the offset"
    c.close()
    c = group_consumer(broker.bootstrap, group, inp)
    rest = transform_batch(broker.bootstrap, c, p, out, 20, commit=True)
    c.close()
    assert rest[0] == b"in-10", "the new consumer did not resume at the committed offset"
    assert committed(broker.bootstrap, group, inp) == N
    expected = sorted(b"out-" + v for v in first + rest)
    assert read_committed_values(broker.bootstrap, out, N) == expected


def test_pending_offsets_are_unstable_until_the_transaction_ends(broker, topic_name):
    """Goal: while a transaction holds offsets for a partition, OffsetFetch without
    require_stable shows the last committed offset and with it answers
    UNSTABLE_OFFSET_COMMIT (KIP-447); after the commit both show the new offset.
    Method: commit offset 5 plainly; in a transaction send offset 12; fetch at v7 both ways
    over the wire; commit the transaction; fetch again."""
    create_topic(broker.bootstrap, topic_name)
    group = f"stable-{uuid.uuid4().hex[:8]}"
    c = ck_consumer(broker.bootstrap, **{"group.id": group})
    c.commit(offsets=[TopicPartition(topic_name, 0, 5)], asynchronous=False)
    p = txn_producer(broker.bootstrap, f"txn-{uuid.uuid4().hex[:8]}")
    p.begin_transaction()
    p.produce(topic_name, b"x")
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 12)],
                                  c.consumer_group_metadata(), 30)
    wire = KafkaWire(broker.bootstrap)
    try:
        assert wire.offset_fetch(group, topic_name, 0, require_stable=False) == (0, 5)
        assert wire.offset_fetch(group, topic_name, 0, require_stable=True) == (88, -1)
        p.commit_transaction(30)
        assert wire.offset_fetch(group, topic_name, 0, require_stable=True) == (0, 12)
    finally:
        wire.close()
        c.close()


def test_offsets_of_a_transaction_cut_by_sigkill_are_not_committed(sluice_factory, topic_name):
    """Goal: a SIGKILL between TxnOffsetCommit and EndTxn leaves the group's offsets where
    they were after the restart: the recovered transaction is aborted at its timeout, and
    the pending offsets (replayed from `__consumer_offsets`) are dropped with it; the
    transaction's output never becomes visible.
    Method: commit 10 in one transaction; a second sends offset 20 and is left open;
    SIGKILL; restart with a 1 s abort timer; the transaction (timeout 3 s) is aborted; the
    committed offset is still 10, and a new transaction can commit offset 30."""
    args = ["--override", "transaction.abort.timed.out.transaction.cleanup.interval.ms=1000"]
    broker = sluice_factory(args)
    inp, out = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker.bootstrap, inp)
    create_topic(broker.bootstrap, out)
    fill_input(broker.bootstrap, inp)
    group = f"kill-{uuid.uuid4().hex[:8]}"
    txn_id = f"txn-{uuid.uuid4().hex[:8]}"
    p = txn_producer(broker.bootstrap, txn_id, timeout_ms=3000)
    c = group_consumer(broker.bootstrap, group, inp)
    first = transform_batch(broker.bootstrap, c, p, out, 10, commit=True)
    msgs = ck_poll(c, 10, timeout=20)
    assert len(msgs) == 10
    p.begin_transaction()
    for m in msgs:
        p.produce(out, value=b"out-" + m.value())
    p.send_offsets_to_transaction([TopicPartition(inp, 0, 20)],
                                  c.consumer_group_metadata(), 30)
    p.flush(10)
    c.close()  # leaves the group, so the next consumer need not wait out its session
    broker.kill9()
    del p
    broker.start()
    wire = KafkaWire(broker.bootstrap)
    try:
        deadline = time.monotonic() + 30
        while wire.offset_fetch(group, inp, 0, require_stable=True)[0] == 88:
            assert time.monotonic() < deadline, "the cut transaction was never aborted"
            time.sleep(0.3)
        assert wire.offset_fetch(group, inp, 0, require_stable=True) == (0, 10)
    finally:
        wire.close()
    assert committed(broker.bootstrap, group, inp) == 10
    c = group_consumer(broker.bootstrap, group, inp)
    rest = transform_batch(broker.bootstrap, c, txn_producer(broker.bootstrap, txn_id), out, 20,
                           commit=True)
    c.close()
    assert rest[0] == b"in-10"
    assert committed(broker.bootstrap, group, inp) == N
    expected = sorted(b"out-" + v for v in first + rest)
    assert read_committed_values(broker.bootstrap, out, N) == expected
