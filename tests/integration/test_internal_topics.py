"""The internal topic `__consumer_offsets` in Metadata (issue 12, first gap): listed in the
all-topics answer and by name with `is_internal = true` and the one partition the group
coordinator writes, as Kafka lists its internal topics; read-only to clients.

Before this change Metadata answered the name with INVALID_TOPIC_EXCEPTION and left it out
of the all-topics list, so every test here failed.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

import kwire
from admin_facade import CkAdmin, admin
from helpers import FAMILIES, ConfluentFamily, Msg, ck_consumer, create_topic

OFFSETS = "__consumer_offsets"


def metadata_v1(bootstrap: str, topics: list[str] | None) -> kwire.MetadataV1:
    return kwire.parse_metadata(kwire.roundtrip(bootstrap, kwire.metadata_request_v1(7, topics)), 1)


def test_listed_as_internal_in_metadata(broker, topic_name):
    """Goal: Metadata describes `__consumer_offsets` as Kafka does, and only the two
    coordinator topics as internal.
    Method: raw Metadata v1 for all topics and by name: no error, one partition led by the
    broker, is_internal set for it and not for an ordinary topic; librdkafka's list_topics
    and kafka-python's describe_topics (is_internal, by name and in the full list) agree."""
    create_topic(broker.bootstrap, topic_name, 2)
    for wanted in (None, [OFFSETS]):
        md = metadata_v1(broker.bootstrap, wanted)
        err, parts = md.topics[OFFSETS]
        assert err == kwire.NONE, md.topics
        assert [(p, e) for p, e, _ in parts] == [(0, kwire.NONE)]
        assert all(leader == md.brokers[0][0] for _, _, leader in parts)
        assert OFFSETS in md.internal
    md = metadata_v1(broker.bootstrap, None)
    assert topic_name in md.topics and topic_name not in md.internal
    # The transaction coordinator's partition is the other internal topic (test_txn_broker.py).
    assert md.internal == {OFFSETS, "__transaction_state"}

    listed = CkAdmin(broker.bootstrap).a.list_topics(timeout=10).topics
    assert len(listed[OFFSETS].partitions) == 1 and listed[OFFSETS].error is None
    assert topic_name in listed

    kp = admin("kafka-python", broker.bootstrap).a
    by_name = {t["name"]: t for t in kp.describe_topics([OFFSETS, topic_name])}
    assert by_name[OFFSETS]["is_internal"] is True and by_name[OFFSETS]["error_code"] == 0
    assert by_name[topic_name]["is_internal"] is False
    every = {t["name"]: t for t in kp.describe_topics()}
    assert every[OFFSETS]["is_internal"] is True
    assert OFFSETS in kp.list_topics()


@pytest.mark.parametrize("fam", FAMILIES)
def test_read_only_to_admin_clients(broker, topic_name, fam):
    """Goal: clients cannot delete, grow, reconfigure, trim or re-create the internal topic,
    and each attempt gets the non-retriable code Kafka uses for internal topics; the groups
    that live in it keep working.
    Method: with a group's offset committed, DeleteTopics, CreatePartitions, both
    AlterConfigs and DeleteRecords on `__consumer_offsets` get INVALID_TOPIC_EXCEPTION and
    CreateTopics gets TOPIC_ALREADY_EXISTS (it exists, as in Kafka), through the family's
    admin client; Metadata still shows it with one partition and the committed offset reads
    back."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    ConfluentFamily(bs).produce(topic_name, [Msg(b"x")] * 3)
    group = f"g-internal-{fam}"
    c = ck_consumer(bs, **{"group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic_name, 0, 2)], asynchronous=False)
    finally:
        c.close()

    a = admin(fam, bs)
    assert a.delete([OFFSETS]) == {OFFSETS: kwire.INVALID_TOPIC_EXCEPTION}
    assert a.create_partitions(OFFSETS, 4) == kwire.INVALID_TOPIC_EXCEPTION
    assert a.incremental_alter(OFFSETS, set_={"retention.ms": 1000}) == kwire.INVALID_TOPIC_EXCEPTION
    assert a.legacy_alter(OFFSETS, {"retention.ms": 1000}) == kwire.INVALID_TOPIC_EXCEPTION
    assert a.delete_records(OFFSETS, 0, -1)[0] == kwire.INVALID_TOPIC_EXCEPTION
    assert a.create(OFFSETS, partitions=3) == kwire.TOPIC_ALREADY_EXISTS

    err, parts = metadata_v1(bs, [OFFSETS]).topics[OFFSETS]
    assert err == kwire.NONE and len(parts) == 1
    c = ck_consumer(bs, **{"group.id": group})
    try:
        got = c.committed([TopicPartition(topic_name, 0)], timeout=10)
        assert got[0].offset == 2, got
    finally:
        c.close()


def test_produce_to_internal_topic_refused(broker):
    """Goal: producing to `__consumer_offsets` fails at once with INVALID_TOPIC_EXCEPTION
    (Kafka: "Cannot append to internal topic"), and nothing is written.
    Method: a raw Produce v3 of one record batch."""
    batch = kwire.record_batch([kwire.RawRecord(b"forged")])
    r = kwire.produce_v3(broker.bootstrap, OFFSETS, 0, batch)
    assert r.error_code == kwire.INVALID_TOPIC_EXCEPTION
