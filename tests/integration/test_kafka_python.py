"""kafka-python 3 end to end, and interoperability between the two client families."""

from __future__ import annotations

import pytest
from kafka.structs import TopicPartition as KTP

from helpers import ConfluentFamily, KafkaPythonFamily, Msg, create_topic, kp_consumer, kp_poll, kp_producer


@pytest.mark.parametrize("codec", ["gzip", "lz4"])
def test_kafka_python_end_to_end(broker, topic_name, codec):
    """Goal: a plain kafka-python application works: KafkaProducer (acks='all', idempotence
    off, compression, headers, keys) and KafkaConsumer (assign + seek, no group).
    Method: produce 100 records through send() futures with 3 headers each, check the
    returned metadata (partition, offsets 0..99), then consume with seek(37) and check every
    field from 37 to 99; position() after the poll is 100."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    p = kp_producer(broker.bootstrap, compression_type=codec, linger_ms=20)
    futures = [p.send(topic_name, key=f"key-{i}".encode(), value=f"value-{i}".encode() * 5, partition=1,
                      headers=[("seq", str(i).encode()), ("tag", b"a"), ("tag", b"b")])
               for i in range(100)]
    p.flush(20)
    mds = [f.get(timeout=20) for f in futures]
    p.close(timeout=5)
    assert [m.offset for m in mds] == list(range(100))
    assert {m.partition for m in mds} == {1}
    assert all(m.topic == topic_name for m in mds)

    c = kp_consumer(broker.bootstrap)
    tp = KTP(topic_name, 1)
    c.assign([tp])
    c.seek(tp, 37)
    recs = kp_poll(c, 63, timeout=15)
    assert [r.offset for r in recs] == list(range(37, 100))
    for r in recs:
        i = r.offset
        assert r.key == f"key-{i}".encode()
        assert r.value == f"value-{i}".encode() * 5
        assert list(r.headers) == [("seq", str(i).encode()), ("tag", b"a"), ("tag", b"b")]
        assert r.partition == 1
    assert c.position(tp) == 100
    assert c.end_offsets([tp])[tp] == 100
    assert c.beginning_offsets([KTP(topic_name, 0)])[KTP(topic_name, 0)] == 0
    c.close()


@pytest.mark.parametrize("direction", ["kafka-python->confluent", "confluent->kafka-python"])
def test_cross_client_interop(broker, topic_name, direction):
    """Goal: what one client family writes, the other reads identically (batches are stored
    as the producer encoded them and served back untouched).
    Method: produce 30 records with keys, duplicate headers, a tombstone and zstd compression
    with one family; consume with the other; compare all fields."""
    create_topic(broker.bootstrap, topic_name)
    prod_cls, cons_cls = ((KafkaPythonFamily, ConfluentFamily) if direction.startswith("kafka-python")
                          else (ConfluentFamily, KafkaPythonFamily))
    producer = prod_cls(broker.bootstrap)
    msgs = [Msg(None if i == 7 else f"x{i}".encode() * 3, key=f"k{i}".encode(),
                headers=[("h", b"1"), ("h", str(i).encode())]) for i in range(30)]
    conf = ({"compression": "zstd", "linger_ms": 20} if producer.name == "kafka-python"
            else {"compression.type": "zstd", "linger.ms": 20})
    assert producer.produce(topic_name, msgs, **conf) == list(range(30))
    recs = cons_cls(broker.bootstrap).consume(topic_name, 0, 0, 30)
    assert [(r.offset, r.key, r.value, r.headers) for r in recs] == \
        [(i, m.key, m.value, m.headers) for i, m in enumerate(msgs)]
