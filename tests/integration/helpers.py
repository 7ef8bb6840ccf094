"""Client helpers shared by the tests: topic setup through the confluent-kafka AdminClient,
and a small common interface over the two client families (librdkafka through
confluent-kafka, and kafka-python) so data-path tests can be parametrized by family.

Consumers never join a group: they assign() partitions with explicit offsets. Producers are
never idempotent (the broker has no InitProducerId yet).
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

import kafka
import kafka.errors as kerrors
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition as KTopicPartition

FAMILIES = ["confluent", "kafka-python"]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def wait_until(cond: Callable[[], Any], timeout: float, interval: float = 0.1, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = cond()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - the condition may fail transiently
            last_exc = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                                 + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)


# The open flag of a descriptor written with direct I/O, x86_64 (asm-generic/fcntl.h).
O_DIRECT = 0o40000


def journal_fd_flags(pid: int) -> list[tuple[str, int]]:
    """(target, open flags) of every descriptor of process `pid` on a journal `.wal` file, from
    /proc/<pid>/fd and /proc/<pid>/fdinfo: which way (`O_DIRECT` or through the page cache) the
    broker really writes its journal."""
    out = []
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except OSError:
            continue  # closed meanwhile
        if "/journal/" in target and target.endswith(".wal"):
            flags = next(int(line.split()[1], 8) for line in info.splitlines() if line.startswith("flags:"))
            out.append((target, flags))
    return out


# ---------------------------------------------------------------------------
# confluent-kafka (librdkafka) plumbing
# ---------------------------------------------------------------------------
def ck_admin(bootstrap: str, **conf) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000, **conf})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    """Creates a topic through CreateTopics and waits until Metadata shows every partition with
    a leader."""
    admin = ck_admin(bootstrap)
    fs = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1,
                                       config={k: str(v) for k, v in (config or {}).items()})],
                             operation_timeout=10, request_timeout=15)
    fs[name].result(timeout=20)

    def ready():
        md = admin.list_topics(topic=name, timeout=5)
        t = md.topics.get(name)
        return (t is not None and t.error is None and len(t.partitions) == partitions
                and all(p.leader >= 0 for p in t.partitions.values()))

    wait_until(ready, 10, what=f"topic {name} in metadata")


def ck_producer(bootstrap: str, **conf) -> Producer:
    base = {
        "bootstrap.servers": bootstrap,
        "acks": "all",
        "enable.idempotence": False,
        "linger.ms": 5,
        "message.timeout.ms": 15000,
        "socket.timeout.ms": 10000,
    }
    base.update(conf)
    return Producer(base)


def ck_consumer(bootstrap: str, **conf) -> Consumer:
    base = {
        "bootstrap.servers": bootstrap,
        # librdkafka insists on a group id; the tests never subscribe nor commit.
        "group.id": f"sluice-it-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "socket.timeout.ms": 10000,
        "enable.partition.eof": False,
    }
    base.update(conf)
    return Consumer(base)


# Consumer-level (not partition-level) errors that a group-less, assign()-only consumer may
# see because the broker has no group coordinator; they do not affect fetching.
_IGNORABLE_CONSUMER_ERRORS = {
    KafkaError._PARTITION_EOF,
}


def ck_poll(consumer: Consumer, n: int, timeout: float = 10.0,
            on_error: Callable[[KafkaError, Any], bool] | None = None) -> list:
    """Consumes until `n` messages arrived or `timeout` passed. Partition errors raise unless
    `on_error(err, msg)` returns True (handled)."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for m in consumer.consume(num_messages=max(1, n - len(out)), timeout=min(0.25, left)):
            err = m.error()
            if err is None:
                out.append(m)
                continue
            if on_error is not None and on_error(err, m):
                continue
            if err.code() in _IGNORABLE_CONSUMER_ERRORS:
                continue
            if m.topic() is None and not err.fatal():
                # consumer-level error unrelated to a partition, e.g. coordinator lookups
                continue
            raise KafkaException(err)
    return out


# ---------------------------------------------------------------------------
# kafka-python plumbing
# ---------------------------------------------------------------------------
def kp_producer(bootstrap: str, **kw) -> KafkaProducer:
    base = dict(bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=5,
                request_timeout_ms=10000, max_block_ms=15000, retries=3, delivery_timeout_ms=30000)
    base.update(kw)
    return KafkaProducer(**base)


def kp_consumer(bootstrap: str, **kw) -> KafkaConsumer:
    base = dict(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                auto_offset_reset="earliest", fetch_max_wait_ms=100, request_timeout_ms=30000,
                consumer_timeout_ms=1000)
    base.update(kw)
    return KafkaConsumer(**base)


def kp_poll(consumer: KafkaConsumer, n: int, timeout: float = 10.0) -> list:
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        batches = consumer.poll(timeout_ms=int(min(250, left * 1000)), max_records=max(1, n - len(out)))
        for _tp, recs in sorted(batches.items(), key=lambda kv: kv[0].partition):
            out.extend(recs)
    return out


# ---------------------------------------------------------------------------
# A common interface over both families
# ---------------------------------------------------------------------------
@dataclass
class Msg:
    """A record to produce."""
    value: bytes | None
    key: bytes | None = None
    headers: list[tuple[str, bytes]] | None = None
    timestamp: int | None = None  # ms since epoch; None lets the client choose


@dataclass
class Rec:
    """A consumed record, normalized across clients."""
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp: int = -1


class ProduceError(Exception):
    def __init__(self, code: int, text: str):
        super().__init__(f"produce failed: code {code}: {text}")
        self.code = code


class Family:
    name = ""

    def produce(self, topic: str, msgs: list[Msg], partition: int = 0, **conf) -> list[int]:
        raise NotImplementedError

    def consume(self, topic: str, partition: int, offset: int, n: int, timeout: float = 10.0, **conf) -> list[Rec]:
        raise NotImplementedError

    def watermarks(self, topic: str, partition: int = 0) -> tuple[int, int]:
        raise NotImplementedError

    def offsets_for_time(self, topic: str, partition: int, ts: int) -> int | None:
        """Earliest offset whose timestamp >= ts, or None when there is none."""
        raise NotImplementedError


class ConfluentFamily(Family):
    name = "confluent"

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def produce(self, topic, msgs, partition=0, **conf):
        p = ck_producer(self.bootstrap, **conf)
        results: list = [None] * len(msgs)

        def make_cb(i):
            def cb(err, m):
                results[i] = (err, m.offset() if err is None else None)
            return cb

        for i, msg in enumerate(msgs):
            kwargs = dict(value=msg.value, key=msg.key, partition=partition, on_delivery=make_cb(i))
            if msg.headers is not None:
                kwargs["headers"] = msg.headers
            if msg.timestamp is not None:
                kwargs["timestamp"] = msg.timestamp
            while True:
                try:
                    p.produce(topic, **kwargs)
                    break
                except BufferError:
                    p.poll(0.05)
            p.poll(0)
        left = p.flush(20)
        assert left == 0, f"{left} messages still undelivered after flush"
        offsets = []
        for i, r in enumerate(results):
            assert r is not None, f"no delivery report for message {i}"
            err, off = r
            if err is not None:
                raise ProduceError(err.code(), str(err))
            offsets.append(off)
        return offsets

    def consume(self, topic, partition, offset, n, timeout=10.0, **conf):
        c = ck_consumer(self.bootstrap, **conf)
        try:
            c.assign([TopicPartition(topic, partition, offset)])
            msgs = ck_poll(c, n, timeout)
        finally:
            c.close()
        return [Rec(m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []), m.timestamp()[1])
                for m in msgs]

    def watermarks(self, topic, partition=0):
        c = ck_consumer(self.bootstrap)
        try:
            return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
        finally:
            c.close()

    def offsets_for_time(self, topic, partition, ts):
        c = ck_consumer(self.bootstrap)
        try:
            [tp] = c.offsets_for_times([TopicPartition(topic, partition, ts)], timeout=10)
        finally:
            c.close()
        assert tp.error is None, tp.error
        return None if tp.offset < 0 else tp.offset


class KafkaPythonFamily(Family):
    name = "kafka-python"
    _CODEC = {"none": None, "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def produce(self, topic, msgs, partition=0, **conf):
        if "compression" in conf:
            conf["compression_type"] = self._CODEC[conf.pop("compression")]
        p = kp_producer(self.bootstrap, **conf)
        try:
            futures = []
            for msg in msgs:
                futures.append(p.send(topic, value=msg.value, key=msg.key, headers=msg.headers or [],
                                      partition=partition, timestamp_ms=msg.timestamp))
            p.flush(timeout=20)
            offsets = []
            for f in futures:
                try:
                    md = f.get(timeout=20)
                except kerrors.KafkaError as e:
                    raise ProduceError(getattr(e, "errno", -1) or -1, repr(e)) from e
                offsets.append(md.offset)
            return offsets
        finally:
            p.close(timeout=2)

    def consume(self, topic, partition, offset, n, timeout=10.0, **conf):
        c = kp_consumer(self.bootstrap, **conf)
        try:
            tp = KTopicPartition(topic, partition)
            c.assign([tp])
            if offset == OFFSET_BEGINNING:
                c.seek_to_beginning(tp)
            elif offset == OFFSET_END:
                c.seek_to_end(tp)
            else:
                c.seek(tp, offset)
            recs = kp_poll(c, n, timeout)
        finally:
            c.close()
        return [Rec(r.partition, r.offset, r.key, r.value, list(r.headers or []), r.timestamp) for r in recs]

    def watermarks(self, topic, partition=0):
        c = kp_consumer(self.bootstrap)
        try:
            tp = KTopicPartition(topic, partition)
            lo = c.beginning_offsets([tp])[tp]
            hi = c.end_offsets([tp])[tp]
            return lo, hi
        finally:
            c.close()

    def offsets_for_time(self, topic, partition, ts):
        c = kp_consumer(self.bootstrap)
        try:
            tp = KTopicPartition(topic, partition)
            r = c.offsets_for_times({tp: ts})[tp]
        finally:
            c.close()
        return None if r is None else r.offset


def family(name: str, bootstrap: str) -> Family:
    return {"confluent": ConfluentFamily, "kafka-python": KafkaPythonFamily}[name](bootstrap)


def producer_conf(fam: str, *, codec: str = "none", linger_ms: int = 5, max_message_bytes: int | None = None) -> dict:
    """Per-family producer settings for compression, batching and record size."""
    if fam == "confluent":
        conf = {"compression.type": codec, "linger.ms": linger_ms}
        if max_message_bytes:
            conf["message.max.bytes"] = max_message_bytes
        return conf
    conf = {"compression": codec, "linger_ms": linger_ms}
    if max_message_bytes:
        # A record above batch_size gets a batch of its own, which is what the size tests want.
        conf["max_request_size"] = max_message_bytes
    return conf


def consumer_conf(fam: str, *, max_bytes: int | None = None, wait_ms: int | None = None) -> dict:
    conf: dict = {}
    if fam == "confluent":
        if max_bytes:
            conf.update({"fetch.max.bytes": max_bytes, "max.partition.fetch.bytes": max_bytes,
                         "receive.message.max.bytes": max_bytes + 1_000_000})
        if wait_ms is not None:
            conf["fetch.wait.max.ms"] = wait_ms
    else:
        if max_bytes:
            conf.update({"fetch_max_bytes": max_bytes, "max_partition_fetch_bytes": max_bytes})
        if wait_ms is not None:
            conf["fetch_max_wait_ms"] = wait_ms
    return conf


def kafka_python_version() -> str:
    return kafka.__version__
