"""Offsets in a transaction (TxnOffsetCommit, KIP-447; docs/transactions.md §6.5) with
confluent-kafka (librdkafka): consume-transform-produce with `send_offsets_to_transaction`.
A commit makes the group's offsets and the output visible together; an abort moves neither
(a new consumer re-reads the input); a SIGKILL between TxnOffsetCommit and EndTxn leaves
the offsets uncommitted after the restart (the transaction is aborted at its timeout);
OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT while the transaction is
open; raw TxnOffsetCommit requests get Kafka's error codes (docs/transactions.md §7.5).

Before slice 4 TxnOffsetCommit was not advertised: librdkafka's send_offsets_to_transaction
failed with _UNSUPPORTED_FEATURE and a raw request closed the connection, so every test here
failed.
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


# ---------------------------------------------------------------------------
# Raw TxnOffsetCommit: the error codes of docs/transactions.md §7.5
# ---------------------------------------------------------------------------
TXN_OFFSET_COMMIT = 28
ADD_OFFSETS_TO_TXN = 25


def init_producer_id(bootstrap: str, txn_id: str) -> tuple[int, int]:
    """Raw InitProducerId v1: (producer id, epoch)."""
    req = kwire.frame(kwire.header_v1(22, 1, 3) + kwire.string(txn_id) + kwire.i32(60000))
    r = kwire.Reader(kwire.roundtrip(bootstrap, req))
    assert r.i32() == 3
    r.i32()
    assert r.i16() == kwire.NONE
    return r.i64(), r.i16()


def add_offsets(bootstrap: str, txn_id: str, pid: int, epoch: int, group: str) -> int:
    """Raw AddOffsetsToTxn v0: the error code."""
    body = kwire.string(txn_id) + kwire.i64(pid) + kwire.i16(epoch) + kwire.string(group)
    r = kwire.Reader(kwire.roundtrip(bootstrap, kwire.frame(kwire.header_v1(ADD_OFFSETS_TO_TXN, 0, 4) + body)))
    assert r.i32() == 4
    r.i32()
    return r.i16()


def txn_offset_commit(bootstrap: str, version: int, txn_id: str, pid: int, epoch: int, group: str,
                      topic: str, offset: int, generation: int = -1, member: str = "") -> int:
    """Raw TxnOffsetCommit (v0, or v3+ flexible) for one partition: its error code."""
    if version < 3:
        body = (kwire.string(txn_id) + kwire.string(group) + kwire.i64(pid) + kwire.i16(epoch)
                + kwire.i32(1) + kwire.string(topic) + kwire.i32(1)
                + kwire.i32(0) + kwire.i64(offset) + kwire.string(None))
        req = kwire.frame(kwire.header_v1(TXN_OFFSET_COMMIT, version, 9) + body)
    else:
        tags = kwire.tagged_fields_empty()
        body = (kwire.compact_string(txn_id) + kwire.compact_string(group) + kwire.i64(pid)
                + kwire.i16(epoch) + kwire.i32(generation) + kwire.compact_string(member)
                + kwire.compact_string(None)
                + kwire.uvarint(2) + kwire.compact_string(topic)
                + kwire.uvarint(2) + kwire.i32(0) + kwire.i64(offset) + kwire.i32(-1)
                + kwire.compact_string(None) + tags + tags + tags)
        req = kwire.frame(kwire.header_v2(TXN_OFFSET_COMMIT, version, 9) + body)
    r = kwire.Reader(kwire.roundtrip(bootstrap, req))
    assert r.i32() == 9
    if version >= 3:
        kwire._read_uvarint(r)
    r.i32()  # throttle
    if version < 3:
        assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == 0
        return r.i16()
    assert kwire._read_uvarint(r) == 2
    r.take(kwire._read_uvarint(r) - 1)
    assert kwire._read_uvarint(r) == 2 and r.i32() == 0
    return r.i16()


def test_txn_offset_commit_error_codes(broker, topic_name):
    """Goal: TxnOffsetCommit refuses what Kafka refuses, with Kafka's code per version:
    no AddOffsetsToTxn first: INVALID_TXN_STATE (48) at v0, TRANSACTION_ABORTABLE (120) at
    v4 (v5 is Transactions V2: it adds the offsets partition itself, test_txn_v2.py); an old
    epoch: INVALID_PRODUCER_EPOCH (47); an unknown transactional id:
    INVALID_PRODUCER_ID_MAPPING (49); v3 naming a member of an unknown group with a
    generation: ILLEGAL_GENERATION (22), without one: UNKNOWN_MEMBER_ID (25); an unknown
    topic: UNKNOWN_TOPIC_OR_PARTITION (3). Nothing refused becomes visible.
    Method: raw requests after a raw InitProducerId; OffsetFetch v7 afterwards."""
    create_topic(broker.bootstrap, topic_name)
    bs, group = broker.bootstrap, f"raw-{uuid.uuid4().hex[:8]}"
    txn_id = f"txn-raw-{uuid.uuid4().hex[:8]}"
    pid, epoch = init_producer_id(bs, txn_id)
    assert txn_offset_commit(bs, 0, txn_id, pid, epoch, group, topic_name, 7) == 48
    assert txn_offset_commit(bs, 4, txn_id, pid, epoch, group, topic_name, 7) == 120
    assert txn_offset_commit(bs, 0, "nobody", pid, epoch, group, topic_name, 7) == 49
    assert add_offsets(bs, txn_id, pid, epoch, group) == kwire.NONE
    assert txn_offset_commit(bs, 0, txn_id, pid, epoch - 1 if epoch > 0 else epoch + 1,
                             group, topic_name, 7) == 47
    assert txn_offset_commit(bs, 3, txn_id, pid, epoch, group, topic_name, 7,
                             generation=1, member="ghost") == 22
    assert txn_offset_commit(bs, 3, txn_id, pid, epoch, group, topic_name, 7,
                             generation=-1, member="ghost") == 25
    assert txn_offset_commit(bs, 3, txn_id, pid, epoch, group, "no-such-topic", 7) == 3
    wire = KafkaWire(bs)
    try:
        assert wire.offset_fetch(group, topic_name, 0, require_stable=True) == (0, -1)
        assert txn_offset_commit(bs, 3, txn_id, pid, epoch, group, topic_name, 7) == kwire.NONE
        assert wire.offset_fetch(group, topic_name, 0, require_stable=True) == (88, -1)
        assert wire.offset_fetch(group, topic_name, 0, require_stable=False) == (0, -1)
    finally:
        wire.close()


def plain_commits(bootstrap: str, group: str, topic: str, n: int, window: int = 50) -> None:
    """n raw OffsetCommit v2 requests (one offset each, standalone), pipelined `window` at a
    time over one connection: n records in `__consumer_offsets`."""
    sock = kwire.connect(bootstrap, timeout=30)
    try:
        sent = 0
        while sent < n:
            k = min(window, n - sent)
            frames = b""
            for i in range(sent, sent + k):
                body = (kwire.string(group) + kwire.i32(-1) + kwire.string("") + kwire.i64(-1)
                        + kwire.i32(1) + kwire.string(topic) + kwire.i32(1)
                        + kwire.i32(0) + kwire.i64(i) + kwire.string(None))
                frames += kwire.frame(kwire.header_v1(8, 2, i) + body)
            sock.sendall(frames)
            for _ in range(k):
                r = kwire.Reader(kwire.read_frame(sock))
                r.i32()
                assert r.i32() == 1 and r.string() == topic and r.i32() == 1 and r.i32() == 0
                assert r.i16() == kwire.NONE
            sent += k
    finally:
        sock.close()


def test_pending_offsets_survive_offsets_log_compaction(sluice_factory, topic_name):
    """Goal: compacting `__consumer_offsets` by snapshot (coordinator.md §9) never drops an
    undecided transaction's offsets: the log start stops at the partition's last stable
    offset, so after a restart the replay still finds the offsets and their COMMIT marker.
    Method: transaction A sends offsets (group ga) and stays open; 60 000 plain commits;
    transaction B sends offsets (group gb); A commits, so the LSO moves to B's first offset
    and more commits trigger a compaction with B open; B commits; restart; both groups'
    offsets are committed. Before the LSO bound, the log start passed B's offsets and gb
    came back with no offset."""
    broker = sluice_factory()
    bs = broker.bootstrap
    create_topic(bs, topic_name)
    ga, gb = f"ga-{uuid.uuid4().hex[:6]}", f"gb-{uuid.uuid4().hex[:6]}"

    def open_txn(group: str, offset: int):
        p = txn_producer(bs, f"txn-{uuid.uuid4().hex[:8]}", timeout_ms=600000)
        p.begin_transaction()
        p.produce(topic_name, b"x")
        c = ck_consumer(bs, **{"group.id": group})
        p.send_offsets_to_transaction([TopicPartition(topic_name, 0, offset)],
                                      c.consumer_group_metadata(), 30)
        c.close()
        return p

    a = open_txn(ga, 11)
    plain_commits(bs, "plain", topic_name, 60000)
    assert "compacted __consumer_offsets" not in broker.stderr_text(), \
        "compacted while only records above an open transaction could go"
    b = open_txn(gb, 22)
    a.commit_transaction(30)
    plain_commits(bs, "plain", topic_name, 100)
    assert "compacted __consumer_offsets" in broker.stderr_text(), "no compaction happened"
    b.commit_transaction(30)
    assert (committed(bs, ga, topic_name), committed(bs, gb, topic_name)) == (11, 22)
    broker.restart()
    assert (committed(bs, ga, topic_name), committed(bs, gb, topic_name)) == (11, 22)
