"""Idempotent producers, from two client families (librdkafka through confluent-kafka, and
kafka-python 3, whose producers are idempotent by default).

- Lost responses: a proxy drops produce responses after the broker wrote the batch; the
  clients retry with the same sequence numbers, and the broker must answer with the original
  offsets instead of writing the batch again.
- SIGKILL: the broker is killed mid-stream and restarted on the same port and data dir; the
  producer retries whatever was in flight, and the log must hold every value exactly once,
  in order (the values carry their sequence numbers, so gaps and duplicates are visible).
- Raw wire: duplicates, sequence gaps and stale epochs get Kafka's exact answers.
"""

from __future__ import annotations

import random
import threading
import time

import pytest

import kwire
from flaky_proxy import FlakyProxy
from helpers import create_topic, ck_consumer, ck_poll, ck_producer, kp_producer
from confluent_kafka import TopicPartition

FAMILIES = ["confluent", "kafka-python"]


def consume_values(bootstrap: str, topic: str, n: int, timeout: float = 30.0) -> list[bytes]:
    c = ck_consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        msgs = ck_poll(c, n, timeout=timeout)
        # Anything past n is a duplicate: give it a moment to show up.
        msgs += ck_poll(c, 50, timeout=1.0)
        return [m.value() for m in msgs]
    finally:
        c.close()


def seq_values(n: int) -> list[bytes]:
    return [f"seq-{i:06d}".encode() for i in range(n)]


class IdempotentProducer:
    """One idempotent producer of either family, producing to partition 0."""

    def __init__(self, fam: str, bootstrap: str, **extra):
        self.fam = fam
        self.errors: list[str] = []
        if fam == "confluent":
            self.p = ck_producer(bootstrap, **{
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "batch.num.messages": 50,
                "message.timeout.ms": 60000,
                "request.timeout.ms": 5000,
                "retry.backoff.ms": 100,
                "reconnect.backoff.ms": 100,
                "reconnect.backoff.max.ms": 500,
                **extra,
            })
        else:
            self.p = kp_producer(bootstrap, enable_idempotence=True, acks="all", linger_ms=2,
                                 batch_size=4096, retries=1000, request_timeout_ms=5000,
                                 delivery_timeout_ms=60000, retry_backoff_ms=100,
                                 reconnect_backoff_ms=100, reconnect_backoff_max_ms=500,
                                 max_in_flight_requests_per_connection=5, **extra)
            self.futures = []

    def send(self, topic: str, value: bytes) -> None:
        if self.fam == "confluent":
            def cb(err, _msg):
                if err is not None:
                    self.errors.append(str(err))
            while True:
                try:
                    self.p.produce(topic, value=value, partition=0, on_delivery=cb)
                    break
                except BufferError:
                    self.p.poll(0.05)
            self.p.poll(0)
        else:
            self.futures.append(self.p.send(topic, value=value, partition=0))

    def flush(self, timeout: float = 90.0) -> None:
        if self.fam == "confluent":
            left = self.p.flush(timeout)
            assert left == 0, f"{left} messages still undelivered"
        else:
            self.p.flush(timeout=timeout)
            for f in self.futures:
                try:
                    f.get(timeout=1)
                except Exception as e:  # noqa: BLE001 - collected and asserted below
                    self.errors.append(repr(e))
            self.p.close(timeout=5)


@pytest.mark.parametrize("fam", FAMILIES)
def test_lost_responses_do_not_duplicate(sluice_factory, topic_name, fam):
    proxy = FlakyProxy(drop_produce_responses=0, hold_ms=300)
    try:
        broker = sluice_factory(["--advertised-listener", proxy.address])
        proxy.upstream = ("127.0.0.1", broker.port)
        create_topic(proxy.address, topic_name, 1)
        values = seq_values(300)
        producer = IdempotentProducer(fam, proxy.address)
        # The first few go through cleanly, so the producer has its id and sequences going.
        for v in values[:20]:
            producer.send(topic_name, v)
        if fam == "confluent":
            producer.p.flush(30)
        else:
            producer.p.flush(timeout=30)
        proxy.drop_produce_responses = 4
        for v in values[20:]:
            producer.send(topic_name, v)
            time.sleep(0.001)
        producer.flush()
        assert producer.errors == [], producer.errors
        assert proxy.dropped >= 1, "the proxy never dropped a response; the test proved nothing"
        got = consume_values(broker.bootstrap, topic_name, len(values))
        assert got == values, (f"{len(got)} values, {len(set(got))} distinct; "
                               f"first difference at {next((i for i, (a, b) in enumerate(zip(got, values)) if a != b), None)}")
        lo, hi = kwire_watermarks(broker.bootstrap, topic_name)
        assert hi == len(values), f"log end offset {hi}: duplicates were written"
    finally:
        proxy.close()


def kwire_watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = ck_consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


@pytest.mark.parametrize("fam", FAMILIES)
def test_sigkill_mid_stream_no_duplicates_no_gaps(sluice_factory, topic_name, fam):
    seed = random.randrange(1 << 30)
    rnd = random.Random(seed)
    broker = sluice_factory()
    create_topic(broker.bootstrap, topic_name, 1)
    values = seq_values(3000)
    producer = IdempotentProducer(fam, broker.bootstrap)
    sent = threading.Event()

    def produce_all():
        for v in values:
            producer.send(topic_name, v)
            if rnd.random() < 0.01:
                time.sleep(0.005)
        sent.set()

    t = threading.Thread(target=produce_all, daemon=True)
    t.start()
    time.sleep(0.2 + rnd.random() * 0.8)
    broker.kill9()
    time.sleep(0.3)
    broker.start()
    t.join(timeout=60)
    assert sent.is_set(), f"producer did not finish sending (seed {seed})"
    producer.flush()
    assert producer.errors == [], f"seed {seed}: {producer.errors[:5]}"
    got = consume_values(broker.bootstrap, topic_name, len(values))
    dups = len(got) - len(set(got))
    assert got == values, (f"seed {seed}: {len(got)} values, {dups} duplicates, "
                           f"missing {len(set(values) - set(got))}")


# ---------------------------------------------------------------------------
# Raw wire: the exact answers
# ---------------------------------------------------------------------------
INIT_PRODUCER_ID = 22
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


def init_producer_id(bootstrap: str) -> tuple[int, int, int]:
    """InitProducerId v1 (non-flexible): returns (error, producer id, epoch)."""
    body = kwire.string(None) + kwire.i32(60000)
    req = kwire.frame(kwire.header_v1(INIT_PRODUCER_ID, 1, 7) + body)
    r = kwire.Reader(kwire.roundtrip(bootstrap, req))
    assert r.i32() == 7
    r.i32()  # throttle
    return r.i16(), r.i64(), r.i16()


def idempotent_batch(pid: int, epoch: int, base_seq: int, n: int = 1) -> bytes:
    recs = [kwire.RawRecord(key=None, value=f"v{base_seq + i}".encode()) for i in range(n)]
    return kwire.record_batch(recs, producer_id=pid, producer_epoch=epoch, base_sequence=base_seq)


def test_raw_sequence_rules(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    err, pid, epoch = init_producer_id(broker.bootstrap)
    assert err == 0 and pid >= 0 and epoch == 0
    err2, pid2, _ = init_producer_id(broker.bootstrap)
    assert err2 == 0 and pid2 != pid, "producer ids must be unique"

    first = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 0, 0, 3))
    assert first.error_code == 0 and first.base_offset == 0
    second = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 0, 3, 2))
    assert second.error_code == 0 and second.base_offset == 3
    # An exact retry of the first batch: its original offset, nothing written.
    dup = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 0, 0, 3))
    assert dup.error_code == 0 and dup.base_offset == 0
    # A gap (expected 5).
    gap = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 0, 7, 1))
    assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    # A newer epoch must start at sequence 0; then the old epoch is stale.
    bad_bump = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 1, 5, 1))
    assert bad_bump.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    bump = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 1, 0, 1))
    assert bump.error_code == 0 and bump.base_offset == 5
    stale = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 0, 5, 1))
    assert stale.error_code == INVALID_PRODUCER_EPOCH
    _, hi = kwire_watermarks(broker.bootstrap, topic_name)
    assert hi == 6

    # The dedup state survives a SIGKILL: the same retry still gets its original offset.
    broker.kill9()
    broker.start()
    again = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 1, 0, 1))
    assert again.error_code == 0 and again.base_offset == 5
    nxt = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 1, 1, 1))
    assert nxt.error_code == 0 and nxt.base_offset == 6
    # Producer ids stay unique across restarts.
    _, pid3, _ = init_producer_id(broker.bootstrap)
    assert pid3 not in (pid, pid2)


def test_idle_producer_expires_and_comes_back(sluice_factory, topic_name):
    """After producer.id.expiration.ms of idleness the broker forgets the producer; when it
    comes back with its next sequence it is accepted (Redpanda once answered this with a
    fatal OUT_OF_ORDER_SEQUENCE_NUMBER), and a librdkafka producer keeps working."""
    broker = sluice_factory(["--retention-check-interval-ms", "200",
                             "--override", "producer.id.expiration.ms=1000"])
    create_topic(broker.bootstrap, topic_name, 1)
    _, pid, _ = init_producer_id(broker.bootstrap)
    assert kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 0, 0, 2)).error_code == 0
    # Before expiry a gap is refused...
    assert kwire.produce_v3(broker.bootstrap, topic_name, 0,
                            idempotent_batch(pid, 0, 9, 1)).error_code == OUT_OF_ORDER_SEQUENCE_NUMBER
    time.sleep(2.5)
    # ...after it, the producer is unknown and any sequence is taken.
    back = kwire.produce_v3(broker.bootstrap, topic_name, 0, idempotent_batch(pid, 0, 9, 1))
    assert back.error_code == 0 and back.base_offset == 2

    producer = IdempotentProducer("confluent", broker.bootstrap)
    for v in seq_values(10)[:5]:
        producer.send(topic_name, v)
    assert producer.p.flush(15) == 0
    time.sleep(2.5)
    for v in seq_values(10)[5:]:
        producer.send(topic_name, v)
    producer.flush()
    assert producer.errors == []
    got = consume_values(broker.bootstrap, topic_name, 13)
    assert got[3:] == seq_values(10)
