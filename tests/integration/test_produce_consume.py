"""The data path through real clients: produce and fetch with every codec, keys, headers,
tombstones, large records, fetch positions and long polling."""

from __future__ import annotations

import hashlib
import os
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

import kwire
from helpers import (CODEC_IDS, CODECS, FAMILIES, Msg, ck_consumer, ck_poll, ck_producer, consumer_conf,
                     create_topic, family, kp_consumer, kp_poll, producer_conf)


def _values(n: int, tag: str) -> list[bytes]:
    # Compressible but distinct payloads.
    return [(f"{tag}-{i:05d}-" + "abcdefgh" * 8).encode() for i in range(n)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("fam", FAMILIES)
def test_roundtrip_compression(broker, topic_name, fam, codec):
    """Goal: records produced with each compression codec come back byte-identical, and the
    broker keeps the producer's compressed batch (compression.type=producer).
    Method: produce 60 keyed records with headers in one go (so they batch), consume them
    from offset 0 with the same client family, compare everything; then read the stored
    batches with a raw Fetch v4 and check their codec bits."""
    create_topic(broker.bootstrap, topic_name)
    c = family(fam, broker.bootstrap)
    vals = _values(60, codec)
    msgs = [Msg(v, key=f"k{i % 7}".encode(), headers=[("n", str(i).encode())]) for i, v in enumerate(vals)]
    offsets = c.produce(topic_name, msgs, **producer_conf(fam, codec=codec, linger_ms=50))
    assert offsets == list(range(60))

    recs = c.consume(topic_name, 0, 0, 60)
    assert [r.offset for r in recs] == list(range(60))
    assert [r.value for r in recs] == vals
    assert [r.key for r in recs] == [m.key for m in msgs]
    assert [r.headers for r in recs] == [[("n", str(i).encode())] for i in range(60)]

    fetched = kwire.fetch_v4(broker.bootstrap, topic_name, 0, 0)
    assert fetched.error_code == 0
    assert fetched.high_watermark == 60
    batches = fetched.batches()
    assert batches, "raw fetch returned no batches"
    assert batches[0].base_offset == 0
    assert {b.attributes & 0x7 for b in batches} == {CODEC_IDS[codec]}, (
        f"stored batches carry codec ids {sorted({b.attributes & 0x7 for b in batches})}, the producer was "
        f"asked for {codec} ({CODEC_IDS[codec]}): either the client did not compress (librdkafka disables "
        f"features the broker's ApiVersions does not imply) or the broker re-encoded the batch; {batches}")
    assert sum(b.record_count for b in batches) == 60


@pytest.mark.parametrize("fam", FAMILIES)
def test_keys_headers_tombstones(broker, topic_name, fam):
    """Goal: keys, null keys, null values (tombstones), empty values and headers (with
    duplicate keys, in order, including empty header values) survive the round trip.
    Method: produce a fixed mix of records, consume them back and compare field by field."""
    create_topic(broker.bootstrap, topic_name)
    c = family(fam, broker.bootstrap)
    msgs = [
        Msg(b"v0", key=b"k0", headers=[("dup", b"1"), ("dup", b"2"), ("other", b"x"), ("dup", b"3")]),
        Msg(None, key=b"k0"),  # tombstone
        Msg(b"", key=b"k-empty-value"),
        Msg(b"no key"),
        Msg(b"v4", key=b"", headers=[("empty", b""), ("utf8-\u00e9", "\u00fc".encode())]),
        Msg(None, key=b"k5", headers=[("on-tombstone", b"yes")]),
        Msg(bytes(range(256)), key=bytes(range(255, -1, -1))),
    ]
    offsets = c.produce(topic_name, msgs)
    assert offsets == list(range(len(msgs)))
    recs = c.consume(topic_name, 0, 0, len(msgs))
    assert len(recs) == len(msgs)
    for m, r in zip(msgs, recs):
        assert r.key == m.key, r
        assert r.value == m.value, r
        assert r.headers == (m.headers or []), r


@pytest.mark.parametrize("fam", FAMILIES)
def test_large_records(broker, topic_name, fam):
    """Goal: 1 MiB records pass when the topic's max.message.bytes allows them.
    Method: create a topic with max.message.bytes=3 MiB, produce three 1 MiB random values
    (incompressible) with client limits raised, consume them back and compare digests."""
    create_topic(broker.bootstrap, topic_name, config={"max.message.bytes": 3 << 20})
    c = family(fam, broker.bootstrap)
    vals = [os.urandom(1 << 20) for _ in range(3)]
    offsets = c.produce(topic_name, [Msg(v, key=str(i).encode()) for i, v in enumerate(vals)],
                        **producer_conf(fam, max_message_bytes=4 << 20, linger_ms=0))
    assert offsets == [0, 1, 2]
    recs = c.consume(topic_name, 0, 0, 3, timeout=20, **consumer_conf(fam, max_bytes=8 << 20))
    assert [r.offset for r in recs] == [0, 1, 2]
    assert [hashlib.sha256(r.value).hexdigest() for r in recs] == [hashlib.sha256(v).hexdigest() for v in vals]


@pytest.mark.parametrize("fam", FAMILIES)
def test_fetch_positions(broker, topic_name, fam):
    """Goal: fetching from the beginning, from an offset inside a batch, and from the end all
    start at exactly the right record.
    Method: produce 3 batches of 10 records (one flush each, linger so they batch), verify with
    a raw Fetch that offset 15 lives in a batch starting before it (so the broker returns the
    whole batch and the client must skip), then consume from OFFSET_BEGINNING, from 15 and
    from OFFSET_END (then produce one more record, which must be the first one seen)."""
    create_topic(broker.bootstrap, topic_name)
    c = family(fam, broker.bootstrap)
    all_vals = []
    for b in range(3):
        vals = [f"b{b}-r{i}".encode() for i in range(10)]
        assert c.produce(topic_name, [Msg(v) for v in vals], **producer_conf(fam, linger_ms=100)) == \
            list(range(b * 10, b * 10 + 10))
        all_vals += vals

    raw = kwire.fetch_v4(broker.bootstrap, topic_name, 0, 15)
    assert raw.error_code == 0
    first = raw.batches()[0]
    assert first.base_offset <= 15 <= first.last_offset, raw.batches()
    assert first.base_offset < 15, "records were not batched; the mid-batch case is not exercised"

    recs = c.consume(topic_name, 0, OFFSET_BEGINNING, 30)
    assert [r.offset for r in recs] == list(range(30))
    assert [r.value for r in recs] == all_vals

    recs = c.consume(topic_name, 0, 15, 15)
    assert recs[0].offset == 15, f"first record at {recs[0].offset}, wanted 15"
    assert [r.offset for r in recs] == list(range(15, 30))
    assert [r.value for r in recs] == all_vals[15:]

    # From the end: nothing old may arrive; a record produced after the assignment must.
    if fam == "confluent":
        cons = ck_consumer(broker.bootstrap)
        cons.assign([TopicPartition(topic_name, 0, OFFSET_END)])
        assert ck_poll(cons, 1, timeout=1.5) == []
        family(fam, broker.bootstrap).produce(topic_name, [Msg(b"after-end")])
        got = ck_poll(cons, 1, timeout=10)
        cons.close()
        assert [(m.offset(), m.value()) for m in got] == [(30, b"after-end")]
    else:
        from kafka.structs import TopicPartition as KTP
        cons = kp_consumer(broker.bootstrap)
        tp = KTP(topic_name, 0)
        cons.assign([tp])
        cons.seek_to_end(tp)
        assert cons.position(tp) == 30
        assert kp_poll(cons, 1, timeout=1.5) == []
        family(fam, broker.bootstrap).produce(topic_name, [Msg(b"after-end")])
        got = kp_poll(cons, 1, timeout=10)
        cons.close()
        assert [(r.offset, r.value) for r in got] == [(30, b"after-end")]


@pytest.mark.parametrize("fam", FAMILIES)
def test_long_poll_wakeup(broker, topic_name, fam):
    """Goal: a fetch parked on an empty partition (long poll) is answered as soon as data
    arrives, not when fetch.wait.max.ms runs out.
    Method: a consumer with a 10 s fetch wait sits at offset 0 of an empty partition; after
    2 s (so its Fetch is parked) another, already connected, client produces one record; the
    consumer must see it less than 1 s after the produce was sent, far below the 10 s wait."""
    create_topic(broker.bootstrap, topic_name)
    prod = ck_producer(broker.bootstrap, **{"linger.ms": 0})
    # Warm the producer's connection and metadata so the timed produce is fast.
    prod.list_topics(topic=topic_name, timeout=10)

    got: list = []
    received_at: list[float] = []
    errors: list = []

    def consume():
        try:
            if fam == "confluent":
                cons = ck_consumer(broker.bootstrap, **{"fetch.wait.max.ms": 10000})
                cons.assign([TopicPartition(topic_name, 0, 0)])
                msgs = ck_poll(cons, 1, timeout=20)
                received_at.append(time.monotonic())
                got.extend((m.offset(), m.value()) for m in msgs)
                cons.close()
            else:
                from kafka.structs import TopicPartition as KTP
                cons = kp_consumer(broker.bootstrap, fetch_max_wait_ms=10000, request_timeout_ms=40000)
                tp = KTP(topic_name, 0)
                cons.assign([tp])
                cons.seek(tp, 0)
                recs = kp_poll(cons, 1, timeout=20)
                received_at.append(time.monotonic())
                got.extend((r.offset, r.value) for r in recs)
                cons.close()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    time.sleep(2.0)
    delivered: list[float] = []
    sent_at = time.monotonic()
    prod.produce(topic_name, b"wake-up", partition=0, on_delivery=lambda err, m: delivered.append(time.monotonic()))
    assert prod.flush(10) == 0
    t.join(25)
    assert not errors, errors
    assert got == [(0, b"wake-up")]
    latency = received_at[0] - sent_at
    assert latency < 1.0, f"record reached the parked consumer {latency:.2f}s after produce (fetch wait 10 s)"


def test_fetch_long_poll_raw_times_out(broker, topic_name):
    """Goal: a Fetch on an empty partition with min_bytes=1 waits about max_wait_ms, then
    answers empty (neither immediately nor never).
    Method: raw Fetch v4 with max_wait_ms=800 at offset 0 of an empty topic; time it."""
    create_topic(broker.bootstrap, topic_name)
    t0 = time.monotonic()
    part = kwire.fetch_v4(broker.bootstrap, topic_name, 0, 0, max_wait_ms=800)
    elapsed = time.monotonic() - t0
    assert part.error_code == 0
    assert part.records == b""
    assert 0.6 <= elapsed < 3.0, f"empty long poll answered after {elapsed:.2f}s (max_wait 800 ms)"


def test_fetch_out_of_range_raw(broker, topic_name):
    """Goal: a Fetch beyond the log end answers OFFSET_OUT_OF_RANGE with the high watermark.
    Method: produce 3 records, raw Fetch at offset 10 (and -5)."""
    create_topic(broker.bootstrap, topic_name)
    family("confluent", broker.bootstrap).produce(topic_name, [Msg(b"a"), Msg(b"b"), Msg(b"c")])
    part = kwire.fetch_v4(broker.bootstrap, topic_name, 0, 10)
    assert part.error_code == kwire.OFFSET_OUT_OF_RANGE
    part = kwire.fetch_v4(broker.bootstrap, topic_name, 0, -5)
    assert part.error_code == kwire.OFFSET_OUT_OF_RANGE
    part = kwire.fetch_v4(broker.bootstrap, topic_name, 0, 3)
    assert (part.error_code, part.high_watermark, part.records) == (0, 3, b"")


def test_multi_partition_produce_consume(broker, topic_name):
    """Goal: partitions are independent logs with their own offsets.
    Method: create 3 partitions, produce a different number of records to each with
    confluent-kafka, consume all three in one consumer, check per-partition offsets/values."""
    create_topic(broker.bootstrap, topic_name, partitions=3)
    c = family("confluent", broker.bootstrap)
    counts = {0: 4, 1: 7, 2: 2}
    for p, n in counts.items():
        assert c.produce(topic_name, [Msg(f"p{p}-{i}".encode()) for i in range(n)], partition=p) == list(range(n))
    cons = ck_consumer(broker.bootstrap)
    cons.assign([TopicPartition(topic_name, p, 0) for p in counts])
    msgs = ck_poll(cons, sum(counts.values()), timeout=10)
    cons.close()
    by_part: dict[int, list] = {}
    for m in msgs:
        by_part.setdefault(m.partition(), []).append((m.offset(), m.value()))
    for p, n in counts.items():
        assert by_part.get(p) == [(i, f"p{p}-{i}".encode()) for i in range(n)], p


def test_log_append_time(broker, topic_name):
    """Goal: a topic with message.timestamp.type=LogAppendTime stamps records with the broker's
    append time, tells the producer that time, and marks the timestamp type for consumers.
    Method: produce a record with a timestamp a day old through a raw Produce v3 (the response
    carries log_append_time_ms) and one through confluent-kafka; consume both: their
    timestamps are within a few seconds of now and of type LogAppendTime; ListOffsets by a
    time just before the produce finds offset 0."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME
    create_topic(broker.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    day_ago = int(time.time() * 1000) - 86_400_000
    before = int(time.time() * 1000)
    res = kwire.produce_v3(broker.bootstrap, topic_name, 0,
                           kwire.record_batch([kwire.RawRecord(b"raw")], base_timestamp=day_ago))
    assert res.error_code == 0 and res.base_offset == 0
    assert abs(res.log_append_time - before) < 5000, f"log_append_time_ms {res.log_append_time} vs now {before}"
    c = family("confluent", broker.bootstrap)
    assert c.produce(topic_name, [Msg(b"client", timestamp=day_ago)]) == [1]
    cons = ck_consumer(broker.bootstrap)
    cons.assign([TopicPartition(topic_name, 0, 0)])
    msgs = ck_poll(cons, 2)
    cons.close()
    assert [m.value() for m in msgs] == [b"raw", b"client"]
    now = int(time.time() * 1000)
    for m in msgs:
        ts_type, ts = m.timestamp()
        assert ts_type == TIMESTAMP_LOG_APPEND_TIME, m.timestamp()
        assert before - 1000 <= ts <= now + 1000, (ts, before, now)
    assert msgs[0].timestamp()[1] == res.log_append_time
    assert c.offsets_for_time(topic_name, 0, before - 1000) == 0
