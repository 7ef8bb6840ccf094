"""Client quotas (issue 14, third security slice): `producer_byte_rate` / `consumer_byte_rate`
set with AlterClientQuotas and read with DescribeClientQuotas (raw wire requests: none of the
Python clients has these admin calls), durable across a restart, and enforced as Kafka does
(`throttle_time_ms` in the response, the connection muted meanwhile), measured with
confluent-kafka. Each test fails on a broker without quotas: it does not serve the two APIs
(the connection closes on an unknown API key) and throttles no one.
"""

from __future__ import annotations

import stat
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition

import kwire
from helpers import create_topic

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
INVALID_REQUEST = 42
MB = 1024 * 1024


def f64(v: float) -> bytes:
    return struct.pack(">d", v)


def alter_quotas_frame(entries: list[tuple[list[tuple[str, str | None]],
                                            list[tuple[str, float, bool]]]],
                       validate_only: bool = False) -> bytes:
    """AlterClientQuotas v0: entries of (entity [(type, name or None = default)],
    ops [(key, value, remove)])."""
    body = kwire.i32(len(entries))
    for entity, ops in entries:
        body += kwire.i32(len(entity)) + b"".join(kwire.string(t) + kwire.string(n) for t, n in entity)
        body += kwire.i32(len(ops)) + b"".join(
            kwire.string(k) + f64(v) + kwire.i8(int(rm)) for k, v, rm in ops)
    body += kwire.i8(int(validate_only))
    return kwire.frame(kwire.header_v1(ALTER_CLIENT_QUOTAS, 0, 31) + body)


def parse_alter_quotas(frame_body: bytes) -> list[tuple[int, str | None]]:
    """(error code, message) per entry."""
    r = kwire.Reader(frame_body)
    assert r.i32() == 31
    r.i32()  # throttle_time_ms
    out = []
    for _ in range(r.array_len()):
        code, message = r.i16(), r.string()
        for _ in range(r.array_len()):
            r.string(), r.string()
        out.append((code, message))
    return out


def alter_quotas(bootstrap: str, entries, validate_only: bool = False) -> list[tuple[int, str | None]]:
    return parse_alter_quotas(kwire.roundtrip(bootstrap, alter_quotas_frame(entries, validate_only)))


def describe_quotas_frame(components=(), strict: bool = False) -> bytes:
    """DescribeClientQuotas v0: components of (type, match type, name)."""
    body = kwire.i32(len(components)) + b"".join(
        kwire.string(t) + kwire.i8(m) + kwire.string(n) for t, m, n in components)
    body += kwire.i8(int(strict))
    return kwire.frame(kwire.header_v1(DESCRIBE_CLIENT_QUOTAS, 0, 32) + body)


def parse_describe_quotas(frame_body: bytes) -> tuple[int, dict]:
    """(error code, {((type, name), ...): {key: value}})."""
    r = kwire.Reader(frame_body)
    assert r.i32() == 32
    r.i32()
    code, _message = r.i16(), r.string()
    out = {}
    for _ in range(max(r.array_len(), 0)):
        entity = tuple(sorted((r.string(), r.string()) for _ in range(r.array_len())))
        values = {}
        for _ in range(r.array_len()):
            key = r.string()
            values[key] = struct.unpack(">d", r.take(8))[0]
        out[entity] = values
    return code, out


def describe_quotas(bootstrap: str, components=(), strict: bool = False) -> dict:
    code, out = parse_describe_quotas(kwire.roundtrip(bootstrap, describe_quotas_frame(components, strict)))
    assert code == 0, code
    return out


def test_quotas_are_set_described_refused_and_survive_a_restart(sluice_factory):
    b = sluice_factory()
    assert alter_quotas(b.bootstrap, [
        ([("user", "alice")], [("producer_byte_rate", 1024.0 * 1024, False)]),
        ([("user", None), ("client-id", "etl")], [("consumer_byte_rate", 2048.0, False),
                                                   ("producer_byte_rate", 4096.0, False)]),
        ([("client-id", None)], [("consumer_byte_rate", 1e6, False)]),
    ]) == [(0, None)] * 3
    # Refused with a reason, and nothing of the entry applied.
    refused = alter_quotas(b.bootstrap, [
        ([("user", "bob")], [("request_percentage", 50.0, False)]),
        ([("ip", "10.0.0.1")], [("producer_byte_rate", 1.0, False)]),
        ([("user", "bob")], [("producer_byte_rate", 0.5, False)]),
    ])
    assert [c for c, _ in refused] == [INVALID_REQUEST] * 3
    assert "request_percentage" in refused[0][1] and "not supported" in refused[0][1]
    assert alter_quotas(b.bootstrap, [([("user", "carol")], [("producer_byte_rate", 1e3, False)])],
                        validate_only=True) == [(0, None)]
    expected = {
        (("user", "alice"),): {"producer_byte_rate": 1024.0 * 1024},
        (("client-id", "etl"), ("user", None)): {"consumer_byte_rate": 2048.0,
                                                  "producer_byte_rate": 4096.0},
        (("client-id", None),): {"consumer_byte_rate": 1e6},
    }
    assert describe_quotas(b.bootstrap) == expected
    # Kafka's filters: exact, default, any; strict leaves out entities with other parts.
    assert describe_quotas(b.bootstrap, [("user", 0, "alice")]) == {
        (("user", "alice"),): expected[(("user", "alice"),)]}
    assert set(describe_quotas(b.bootstrap, [("user", 2, None)])) == {
        (("user", "alice"),), (("client-id", "etl"), ("user", None))}
    assert set(describe_quotas(b.bootstrap, [("user", 2, None)], strict=True)) == {
        (("user", "alice"),)}
    assert set(describe_quotas(b.bootstrap, [("client-id", 1, None)])) == {(("client-id", None),)}
    quota_file = b.data_dir / "meta" / "client_quotas.json"
    assert stat.S_IMODE(quota_file.stat().st_mode) == 0o600
    b.restart()
    assert describe_quotas(b.bootstrap) == expected
    # Removing the last value removes the entity, durably.
    assert alter_quotas(b.bootstrap, [([("client-id", None)], [("consumer_byte_rate", 0, True)])]) \
        == [(0, None)]
    b.restart()
    del expected[(("client-id", None),)]
    assert describe_quotas(b.bootstrap) == expected


def produce_rate(bootstrap: str, topic: str, client_id: str, total: int, skip: int,
                 value_bytes: int = 16 * 1024) -> tuple[float, list]:
    """Produces `total` bytes as fast as the client may; the acknowledged rate (bytes/s)
    after the first `skip` bytes (so a quota's initial burst is left out), and the
    throttle events librdkafka reported."""
    throttles = []
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "batch.size": 64 * 1024, "throttle_cb": throttles.append,
                  "queue.buffering.max.kbytes": 64 * 1024})
    acked = [0]
    marks = {}

    def on_delivery(err, msg):
        assert err is None, err
        acked[0] += len(msg.value())
        if acked[0] >= skip and "start" not in marks:
            marks["start"] = (time.monotonic(), acked[0])

    value = b"x" * value_bytes
    for _ in range(total // value_bytes):
        p.produce(topic, value, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(120) == 0
    end = time.monotonic()
    t0, b0 = marks["start"]
    return (acked[0] - b0) / (end - t0), throttles


def test_producer_byte_rate_is_enforced_with_throttle_time(sluice_factory):
    b = sluice_factory()
    create_topic(b.bootstrap, "q", 1)
    assert alter_quotas(b.bootstrap, [
        ([("client-id", "slow")], [("producer_byte_rate", 1.0 * MB, False)])]) == [(0, None)]
    rate, throttles = produce_rate(b.bootstrap, "q", "slow", total=7 * MB, skip=2 * MB)
    print(f"quota 1 MiB/s: measured {rate / MB:.2f} MiB/s, {len(throttles)} throttle events")
    assert 0.7 * MB <= rate <= 1.3 * MB, rate / MB
    assert throttles, "librdkafka saw no throttle_time_ms"
    # Another client id is not limited by that quota.
    fast, throttles = produce_rate(b.bootstrap, "q", "fast", total=16 * MB, skip=2 * MB)
    print(f"no quota: {fast / MB:.2f} MiB/s")
    assert fast > 3 * MB and not throttles


def test_consumer_byte_rate_is_enforced(sluice_factory):
    b = sluice_factory()
    create_topic(b.bootstrap, "cq", 1)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    value = b"y" * (16 * 1024)
    for _ in range(6 * MB // len(value)):
        p.produce("cq", value)
        p.poll(0)
    assert p.flush(60) == 0
    assert alter_quotas(b.bootstrap, [
        ([("user", None)], [("consumer_byte_rate", 1.0 * MB, False)])]) == [(0, None)]
    throttles = []
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "cq-g", "client.id": "reader",
                  "throttle_cb": throttles.append, "fetch.max.bytes": 1 * MB,
                  "max.partition.fetch.bytes": 1 * MB})
    c.assign([TopicPartition("cq", 0, 0)])
    got, start, marks = 0, time.monotonic(), None
    while got < 6 * MB and time.monotonic() - start < 60:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got += len(m.value())
        if marks is None and got >= 2 * MB:
            marks = (time.monotonic(), got)
    end = time.monotonic()
    c.close()
    rate = (got - marks[1]) / (end - marks[0])
    print(f"consumer quota 1 MiB/s: measured {rate / MB:.2f} MiB/s, {len(throttles)} throttle events")
    assert got >= 6 * MB
    assert 0.7 * MB <= rate <= 1.3 * MB, rate / MB
    assert throttles
