"""ListOffsets (earliest, latest, by timestamp, max timestamp) and DeleteRecords."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import OffsetSpec

import kwire
from admin_facade import admin
from helpers import (FAMILIES, Msg, ck_admin, ck_consumer, ck_poll, create_topic, family, kp_consumer, kp_poll,
                     producer_conf)


@pytest.mark.parametrize("fam", FAMILIES)
def test_list_offsets_earliest_latest_by_time(broker, topic_name, fam):
    """Goal: ListOffsets answers earliest, latest and by-timestamp lookups exactly.
    Method: on an empty partition both watermarks are 0. Produce 8 records with explicit,
    increasing timestamps one second apart, the first 4 in one batch and the rest one by one,
    then query: watermarks (0, 8); an exact timestamp gives its record; a timestamp between
    two records gives the later one (also inside a batch); one before all gives 0; one after
    all gives no offset."""
    create_topic(broker.bootstrap, topic_name)
    c = family(fam, broker.bootstrap)
    assert c.watermarks(topic_name) == (0, 0)
    base = int(time.time() * 1000) - 3_600_000
    ts = [base + i * 1000 for i in range(8)]
    assert c.produce(topic_name, [Msg(f"r{i}".encode(), timestamp=ts[i]) for i in range(4)],
                     **producer_conf(fam, linger_ms=50)) == [0, 1, 2, 3]
    for i in range(4, 8):
        assert c.produce(topic_name, [Msg(f"r{i}".encode(), timestamp=ts[i])]) == [i]

    assert c.watermarks(topic_name) == (0, 8)
    assert c.offsets_for_time(topic_name, 0, ts[2]) == 2
    assert c.offsets_for_time(topic_name, 0, ts[2] + 1) == 3
    assert c.offsets_for_time(topic_name, 0, ts[1] + 500) == 2
    assert c.offsets_for_time(topic_name, 0, ts[5] + 999) == 6
    assert c.offsets_for_time(topic_name, 0, ts[7]) == 7
    assert c.offsets_for_time(topic_name, 0, base - 60_000) == 0
    assert c.offsets_for_time(topic_name, 0, ts[7] + 1) is None

    recs = c.consume(topic_name, 0, 0, 8)
    assert [r.timestamp for r in recs] == ts, "CreateTime timestamps were not kept"


def test_list_offsets_admin_confluent(broker, topic_name):
    """Goal: the AdminClient ListOffsets specs (earliest, latest, max timestamp, timestamp)
    agree with what was produced, including a max timestamp that is not on the last record.
    Method: produce 5 records with timestamps [t, t+5000, t+1000, t+2000, t+3000]; the max
    timestamp lives at offset 1. Query each spec through confluent-kafka list_offsets()."""
    create_topic(broker.bootstrap, topic_name)
    c = family("confluent", broker.bootstrap)
    t = int(time.time() * 1000) - 600_000
    stamps = [t, t + 5000, t + 1000, t + 2000, t + 3000]
    for i, s in enumerate(stamps):
        assert c.produce(topic_name, [Msg(f"m{i}".encode(), timestamp=s)]) == [i]
    tp = TopicPartition(topic_name, 0)
    a = ck_admin(broker.bootstrap)

    def query(spec):
        return a.list_offsets({tp: spec}, request_timeout=15)[tp].result(timeout=20)

    assert query(OffsetSpec.earliest()).offset == 0
    assert query(OffsetSpec.latest()).offset == 5
    mx = query(OffsetSpec.max_timestamp())
    assert (mx.offset, mx.timestamp) == (1, t + 5000)
    by_ts = query(OffsetSpec.for_timestamp(t + 1500))
    # first offset whose timestamp >= t+1500 is offset 1 (t+5000)
    assert by_ts.offset == 1
    assert by_ts.timestamp == t + 5000


def test_list_offsets_admin_kafka_python(broker, topic_name):
    """Goal: kafka-python's admin ListOffsets (earliest, latest, max timestamp) match the log.
    Method: produce records with out-of-order timestamps with kafka-python and query each
    spec through list_partition_offsets()."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.consumer import OffsetSpec as KOffsetSpec
    from kafka.structs import TopicPartition as KTP
    create_topic(broker.bootstrap, topic_name)
    c = family("kafka-python", broker.bootstrap)
    t = int(time.time() * 1000) - 600_000
    stamps = [t + 2000, t, t + 9000, t + 4000]
    assert c.produce(topic_name, [Msg(f"m{i}".encode(), timestamp=s) for i, s in enumerate(stamps)]) == [0, 1, 2, 3]
    tp = KTP(topic_name, 0)
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        assert a.list_partition_offsets({tp: KOffsetSpec.EARLIEST})[tp].offset == 0
        assert a.list_partition_offsets({tp: KOffsetSpec.LATEST})[tp].offset == 4
        mx = a.list_partition_offsets({tp: KOffsetSpec.MAX_TIMESTAMP})[tp]
        assert (mx.offset, mx.timestamp) == (2, t + 9000)
    finally:
        a.close()


@pytest.mark.parametrize("fam", FAMILIES)
def test_delete_records(broker, topic_name, fam):
    """Goal: DeleteRecords moves the log start offset (low watermark); reads below it are out
    of range, and consumers reset to it; deleting past the high watermark is refused.
    Method: produce 10 records, delete before offset 4 with the family's admin client, check
    the returned and listed low watermark, a raw Fetch at 2 (OFFSET_OUT_OF_RANGE), consumption
    from offset 1 with reset-to-earliest (first record 4), delete before 20
    (OFFSET_OUT_OF_RANGE), then delete everything (-1 = high watermark) and append again."""
    create_topic(broker.bootstrap, topic_name)
    c = family(fam, broker.bootstrap)
    vals = [f"v{i}".encode() for i in range(10)]
    assert c.produce(topic_name, [Msg(v) for v in vals]) == list(range(10))
    a = admin(fam, broker.bootstrap)

    assert a.delete_records(topic_name, 0, 4) == (0, 4)
    assert c.watermarks(topic_name) == (4, 10)
    assert kwire.fetch_v4(broker.bootstrap, topic_name, 0, 2).error_code == kwire.OFFSET_OUT_OF_RANGE
    ok = kwire.fetch_v4(broker.bootstrap, topic_name, 0, 4)
    assert ok.error_code == 0 and ok.batches()

    recs = c.consume(topic_name, 0, 1, 6)  # auto offset reset = earliest
    assert [r.offset for r in recs] == list(range(4, 10))
    assert [r.value for r in recs] == vals[4:]

    err, _ = a.delete_records(topic_name, 0, 20)
    assert err == kwire.OFFSET_OUT_OF_RANGE
    assert c.watermarks(topic_name) == (4, 10)

    assert a.delete_records(topic_name, 0, -1) == (0, 10)
    assert c.watermarks(topic_name) == (10, 10)
    assert c.produce(topic_name, [Msg(b"after")]) == [10]
    recs = c.consume(topic_name, 0, 0, 1)
    assert [(r.offset, r.value) for r in recs] == [(10, b"after")]


def test_consume_below_low_watermark_errors_without_reset(broker, topic_name):
    """Goal: a consumer positioned below the log start offset with no reset policy gets an
    offset-out-of-range error rather than records or silence.
    Method: produce 6, delete before 3, then (a) confluent consumer with
    auto.offset.reset=error at offset 0 must report an error for the partition and deliver
    nothing; (b) kafka-python consumer with auto_offset_reset='none' must raise
    OffsetOutOfRangeError."""
    create_topic(broker.bootstrap, topic_name)
    c = family("confluent", broker.bootstrap)
    assert c.produce(topic_name, [Msg(f"x{i}".encode()) for i in range(6)]) == list(range(6))
    assert admin("confluent", broker.bootstrap).delete_records(topic_name, 0, 3) == (0, 3)

    cons = ck_consumer(broker.bootstrap, **{"auto.offset.reset": "error"})
    cons.assign([TopicPartition(topic_name, 0, 0)])
    seen = []

    def on_error(err: KafkaError, msg) -> bool:
        if msg.topic() == topic_name:
            seen.append(err)
            return True
        return False

    try:
        msgs = ck_poll(cons, 1, timeout=4, on_error=on_error)
    finally:
        cons.close()
    assert msgs == [], [(m.offset(), m.value()) for m in msgs]
    assert seen, "no error reported for a fetch below the log start offset"
    assert any(e.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE) for e in seen), seen

    import kafka.errors as kerrors
    from kafka.structs import TopicPartition as KTP
    kc = kp_consumer(broker.bootstrap, auto_offset_reset="none")
    tp = KTP(topic_name, 0)
    kc.assign([tp])
    kc.seek(tp, 1)
    try:
        with pytest.raises(kerrors.OffsetOutOfRangeError):
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                assert not kp_poll(kc, 1, timeout=0.5), "records delivered below the log start offset"
    finally:
        kc.close()
