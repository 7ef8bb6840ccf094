"""Produce-side errors: unknown topics with auto-creation off, records over
max.message.bytes, unknown partitions and corrupt batches."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

import kwire
from admin_facade import CkAdmin
from helpers import FAMILIES, ConfluentFamily, Msg, ProduceError, ck_producer, create_topic, family, producer_conf


def test_unknown_topic_with_auto_create_disabled(sluice_factory):
    """Goal: with --auto-create-topics false, neither Metadata nor Produce creates topics and
    both answer UNKNOWN_TOPIC_OR_PARTITION.
    Method: raw Metadata v1 and raw Produce v3 naming a missing topic (check the codes); a
    confluent producer's delivery report for that topic must fail with an unknown-topic
    error; the topic must not be listed afterwards."""
    b = sluice_factory(["--auto-create-topics", "false"])
    md = kwire.parse_metadata(kwire.roundtrip(b.bootstrap, kwire.metadata_request_v1(1, ["ghost"])), 1)
    assert md.topics["ghost"][0] == kwire.UNKNOWN_TOPIC_OR_PARTITION

    res = kwire.produce_v3(b.bootstrap, "ghost", 0, kwire.record_batch([kwire.RawRecord(b"boo")]))
    assert res.error_code == kwire.UNKNOWN_TOPIC_OR_PARTITION

    p = ck_producer(b.bootstrap, **{"topic.metadata.propagation.max.ms": 1000, "message.timeout.ms": 5000})
    errs = []
    p.produce("ghost", b"boo", on_delivery=lambda err, m: errs.append(err))
    assert p.flush(10) == 0
    assert len(errs) == 1 and errs[0] is not None, errs
    assert errs[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC), errs[0]
    assert "ghost" not in CkAdmin(b.bootstrap).list()


def test_unknown_partition(broker, topic_name):
    """Goal: producing to or fetching from a partition the topic does not have answers
    UNKNOWN_TOPIC_OR_PARTITION, and does not create it.
    Method: one-partition topic; raw Produce and raw Fetch for partition 5."""
    create_topic(broker.bootstrap, topic_name)
    res = kwire.produce_v3(broker.bootstrap, topic_name, 5, kwire.record_batch([kwire.RawRecord(b"x")]))
    assert res.error_code == kwire.UNKNOWN_TOPIC_OR_PARTITION
    part = kwire.fetch_v4(broker.bootstrap, topic_name, 5, 0)
    assert part.error_code == kwire.UNKNOWN_TOPIC_OR_PARTITION
    assert CkAdmin(broker.bootstrap).list()[topic_name] == 1


@pytest.mark.parametrize("fam", FAMILIES)
def test_message_too_large(broker, topic_name, fam):
    """Goal: a batch larger than the topic's max.message.bytes is refused with
    MESSAGE_TOO_LARGE and nothing is appended; smaller records still go through.
    Method: topic with max.message.bytes=2000; produce one 5000-byte record with client
    limits raised so the client sends it; expect error 10; watermarks stay (0, 0); then a
    100-byte record lands at offset 0."""
    create_topic(broker.bootstrap, topic_name, config={"max.message.bytes": 2000})
    c = family(fam, broker.bootstrap)
    with pytest.raises(ProduceError) as ei:
        c.produce(topic_name, [Msg(b"z" * 5000)], **producer_conf(fam, max_message_bytes=1 << 20, linger_ms=0))
    assert ei.value.code == kwire.MESSAGE_TOO_LARGE, ei.value
    assert c.watermarks(topic_name) == (0, 0)
    assert c.produce(topic_name, [Msg(b"s" * 100)]) == [0]


def test_message_too_large_raw(broker, topic_name):
    """Goal: the wire-level answer to an oversized batch is MESSAGE_TOO_LARGE for that
    partition, with the connection still usable afterwards.
    Method: topic with max.message.bytes=1500; raw Produce v3 of a 3000-byte batch, then a
    small batch on the same connection."""
    create_topic(broker.bootstrap, topic_name, config={"max.message.bytes": 1500})
    with kwire.connect(broker.bootstrap) as s:
        s.sendall(kwire.produce_request_v3(1, topic_name, 0, kwire.record_batch([kwire.RawRecord(b"q" * 3000)])))
        corr, parts = kwire.parse_produce_v3(kwire.read_frame(s))
        assert corr == 1
        assert parts[(topic_name, 0)].error_code == kwire.MESSAGE_TOO_LARGE
        s.sendall(kwire.produce_request_v3(2, topic_name, 0, kwire.record_batch([kwire.RawRecord(b"ok")])))
        corr, parts = kwire.parse_produce_v3(kwire.read_frame(s))
        assert corr == 2
        assert (parts[(topic_name, 0)].error_code, parts[(topic_name, 0)].base_offset) == (0, 0)


def test_corrupt_batch_crc(broker, topic_name):
    """Goal: a batch whose CRC does not match is refused (CORRUPT_MESSAGE) and not stored.
    Method: raw Produce v3 with a flipped CRC, check the code and that the high watermark is
    still 0; then a correct batch lands at offset 0 and reads back through confluent-kafka."""
    create_topic(broker.bootstrap, topic_name)
    res = kwire.produce_v3(broker.bootstrap, topic_name, 0,
                           kwire.record_batch([kwire.RawRecord(b"bad")], corrupt_crc=True))
    assert res.error_code == kwire.CORRUPT_MESSAGE
    c = ConfluentFamily(broker.bootstrap)
    assert c.watermarks(topic_name) == (0, 0)
    res = kwire.produce_v3(broker.bootstrap, topic_name, 0,
                           kwire.record_batch([kwire.RawRecord(b"good", key=b"k", headers=[("h", b"1")])]))
    assert (res.error_code, res.base_offset) == (0, 0)
    [rec] = c.consume(topic_name, 0, 0, 1)
    assert (rec.key, rec.value, rec.headers) == (b"k", b"good", [("h", b"1")])


def test_batch_with_lying_record_count(broker, topic_name):
    """Goal: a batch whose header claims 2,000,000,000 records (with a valid CRC over that lie)
    is rejected without crashing or allocating for the claimed count.
    Method: raw Produce v3 of such a batch; expect CORRUPT_MESSAGE or INVALID_RECORD (or a
    closed connection); the high watermark stays 0 and the broker keeps serving."""
    create_topic(broker.bootstrap, topic_name)
    batch = kwire.record_batch([kwire.RawRecord(b"one")], claimed_count=2_000_000_000)
    with kwire.connect(broker.bootstrap) as s:
        s.sendall(kwire.produce_request_v3(9, topic_name, 0, batch))
        try:
            corr, parts = kwire.parse_produce_v3(kwire.read_frame(s))
            assert corr == 9
            assert parts[(topic_name, 0)].error_code in (kwire.CORRUPT_MESSAGE, kwire.INVALID_RECORD), parts
        except kwire.ConnectionClosed:
            pass
    assert broker.alive()
    assert ConfluentFamily(broker.bootstrap).watermarks(topic_name) == (0, 0)


@pytest.mark.parametrize("fam", FAMILIES)
def test_auto_create_on_produce(sluice_factory, fam):
    """Goal: with auto-creation on (the default), producing to a new topic just works: the
    client's Metadata request creates it with --default-partitions partitions.
    Method: start with --default-partitions 2, produce 3 records to partition 1 of a topic
    that does not exist, read them back, list the topic's partition count."""
    b = sluice_factory(["--default-partitions", "2"])
    c = family(fam, b.bootstrap)
    assert c.produce("born-on-produce", [Msg(f"a{i}".encode()) for i in range(3)], partition=1) == [0, 1, 2]
    recs = c.consume("born-on-produce", 1, 0, 3)
    assert [r.value for r in recs] == [b"a0", b"a1", b"a2"]
    assert CkAdmin(b.bootstrap).list()["born-on-produce"] == 2
