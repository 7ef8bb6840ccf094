"""OffsetForLeaderEpoch (key 23; issue 12, third gap): advertised at v2-4 and answered with
Kafka's semantics for a log whose only leader epoch is 0.

Clients send it only for partitions whose Metadata carries a leader epoch (KIP-320), and
Sluice's Metadata reports none (-1), so neither the Java consumer nor librdkafka sends it
here on its own; the requests are raw (`kwire`), at every advertised version. Before this
change ApiVersions did not list key 23 and the broker closed the connection on it.
"""

from __future__ import annotations

import pytest

import kwire
from admin_facade import CkAdmin
from helpers import ConfluentFamily, Msg, create_topic

GHOST = "no-such-topic"


def ask(bootstrap: str, version: int, topics: dict[str, list[tuple[int, int, int]]]) -> dict:
    corr = 900 + version
    body = kwire.roundtrip(bootstrap, kwire.offset_for_leader_epoch_request(version, corr, topics))
    got_corr, parts = kwire.parse_offset_for_leader_epoch(body, version)
    assert got_corr == corr
    return parts


def test_advertised_versions(broker):
    """Goal: ApiVersions lists OffsetForLeaderEpoch at 2-4 (Kafka 4.x's range: the Java
    client sends v4, librdkafka v2)."""
    av = kwire.parse_api_versions_v0(kwire.roundtrip(broker.bootstrap, kwire.api_versions_request(0, 1)))
    assert av.api_keys.get(kwire.OFFSET_FOR_LEADER_EPOCH) == (2, 4)


@pytest.mark.parametrize("version", [2, 3, 4])
def test_end_offsets_and_errors(broker, topic_name, version):
    """Goal: every answer is Kafka's `endOffsetFor` for a partition whose one epoch (0) began
    at the log start and is still open, with Kafka's current-leader-epoch checks and errors.
    Method: 10 records in partition 0 of a 2-partition topic, the first 4 deleted
    (DeleteRecords), partition 1 empty. Ask, in one request: epoch 0 (end = 10, also on the
    empty partition: 0); the undefined epoch -1 and a newer epoch 5 ((-1, -1)); an epoch
    older than any, -3 ((-3, log start 4)); current leader epoch 0 (accepted), 7
    (UNKNOWN_LEADER_EPOCH) and -2 (FENCED_LEADER_EPOCH); a partition and a topic that do not
    exist (UNKNOWN_TOPIC_OR_PARTITION)."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    assert ConfluentFamily(bs).produce(topic_name, [Msg(f"r{i}".encode()) for i in range(10)]) == list(range(10))
    assert CkAdmin(bs).delete_records(topic_name, 0, 4) == (0, 4)

    cases = {
        # name: (partition, current_leader_epoch, leader_epoch) -> (error, epoch, end_offset)
        "epoch 0": ((0, -1, 0), (kwire.NONE, 0, 10)),
        "undefined": ((0, -1, -1), (kwire.NONE, -1, -1)),
        "newer": ((0, -1, 5), (kwire.NONE, -1, -1)),
        "older": ((0, -1, -3), (kwire.NONE, -3, 4)),
        "current 0": ((0, 0, 0), (kwire.NONE, 0, 10)),
        "current newer": ((0, 7, 0), (kwire.UNKNOWN_LEADER_EPOCH, -1, -1)),
        "current older": ((0, -2, 0), (kwire.FENCED_LEADER_EPOCH, -1, -1)),
        "empty partition": ((1, -1, 0), (kwire.NONE, 0, 0)),
        "no partition": ((9, -1, 0), (kwire.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)),
    }
    # One request per case: a response is keyed by (topic, partition), so cases on the same
    # partition must not share one.
    for name, (req, want) in cases.items():
        got = ask(bs, version, {topic_name: [req]})
        assert got == {(topic_name, req[0]): want}, name
    got = ask(bs, version, {GHOST: [(0, -1, 0)], topic_name: [(0, -1, 0), (1, -1, 0)]})
    assert got == {
        (GHOST, 0): (kwire.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        (topic_name, 0): (kwire.NONE, 0, 10),
        (topic_name, 1): (kwire.NONE, 0, 0),
    }


def test_end_offset_follows_the_log(broker, topic_name):
    """Goal: the end offset of epoch 0 is the durable end a consumer can read to, moving with
    every acknowledged produce, and the internal `__consumer_offsets` partition answers too.
    Method: ask after 0, 3 and 8 acknowledged records; ask for `__consumer_offsets` 0."""
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    fam = ConfluentFamily(bs)
    assert ask(bs, 4, {topic_name: [(0, -1, 0)]})[(topic_name, 0)] == (kwire.NONE, 0, 0)
    fam.produce(topic_name, [Msg(b"a")] * 3)
    assert ask(bs, 4, {topic_name: [(0, -1, 0)]})[(topic_name, 0)] == (kwire.NONE, 0, 3)
    fam.produce(topic_name, [Msg(b"b")] * 5)
    assert ask(bs, 4, {topic_name: [(0, 0, 0)]})[(topic_name, 0)] == (kwire.NONE, 0, 8)
    err, epoch, end = ask(bs, 4, {"__consumer_offsets": [(0, -1, 0)]})[("__consumer_offsets", 0)]
    assert (err, epoch) == (kwire.NONE, 0) and end >= 0
