"""KIP-848 consumer groups (`group.protocol=consumer`, ConsumerGroupHeartbeat) with librdkafka.

- With each server-side assignor (`group.remote.assignor` uniform / range): two consumers
  split 12 partitions; a third joins and partitions move; one leaves and its partitions
  move. Consumers commit synchronously after each batch and when partitions are revoked,
  so every record must be delivered exactly once, and the broker's view
  (ConsumerGroupDescribe) must show disjoint assignments covering all 12 partitions.
- The group is listed and described as type "consumer".
- Committed offsets resume after a broker restart: the restarted broker knows the group
  (its epoch is persisted) but not its members, so a consumer that kept running is told
  UNKNOWN_MEMBER_ID and rejoins.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, KafkaError, KafkaException, TopicPartition

from helpers import ck_admin, ck_producer, create_topic, wait_until
from test_groups import PARTITIONS, Tally, produce_keyed

# Heartbeat every 300 ms so that reconciliation (revoke, then assign) takes well under a
# second per step; the session timeout stays Kafka's default.
GROUP_ARGS = ["--override", "group.consumer.heartbeat.interval.ms=300"]

# Commit refusals that are expected while a rebalance moves partitions: the commit in the
# revocation callback covers what the refused one would have.
BENIGN_COMMIT_ERRORS = {KafkaError._NO_OFFSET, KafkaError.STALE_MEMBER_EPOCH,
                        KafkaError.UNKNOWN_MEMBER_ID, KafkaError.FENCED_MEMBER_EPOCH}


def consumer_conf(bootstrap: str, group: str, name: str, assignor: str) -> dict:
    # session.timeout.ms, heartbeat.interval.ms and partition.assignment.strategy belong to
    # the broker under the consumer protocol; librdkafka refuses them here.
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "group.remote.assignor": assignor,
        "client.id": name,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "fetch.wait.max.ms": 100,
    }


class Member:
    """A librdkafka consumer-protocol member in its own thread. Assignments under KIP-848
    are incremental: callbacks add and remove partitions."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, tally: Tally, assignor: str):
        self.name = name
        self.tally = tally
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.assigned: set[int] = set()
        self.c = Consumer(consumer_conf(bootstrap, group, name, assignor))
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                         on_lost=self._on_lost)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, c, parts):
        self.assigned |= {p.partition for p in parts}

    def _on_revoke(self, c, parts):
        # Commit what was processed before giving the partitions away.
        try:
            c.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() not in BENIGN_COMMIT_ERRORS:
                self.errors.append(f"commit on revoke: {e}")
        self.assigned -= {p.partition for p in parts}

    def _on_lost(self, c, parts):
        self.assigned -= {p.partition for p in parts}

    def _run(self):
        while not self.stop.is_set():
            msgs = self.c.consume(num_messages=100, timeout=0.2)
            got = False
            for m in msgs:
                if m.error():
                    if m.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(m.error()))
                    continue
                self.tally.add(self.name, m.partition(), m.offset(), m.value())
                got = True
            if got:
                try:
                    self.c.commit(asynchronous=False)
                except KafkaException as e:
                    if e.args[0].code() not in BENIGN_COMMIT_ERRORS:
                        self.errors.append(f"commit: {e}")
        self.c.close()

    def leave(self):
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), f"{self.name} did not close"


def describe(bootstrap: str, group: str):
    admin = ck_admin(bootstrap)
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)


def broker_assignment(bootstrap: str, group: str, stable_only: bool = False) -> dict[str, set[int]] | None:
    """The group's members and their current partitions as the broker reports them
    (None when `stable_only` and some member is still reconciling)."""
    desc = describe(bootstrap, group)
    if stable_only and desc.state != ConsumerGroupState.STABLE:
        return None
    out = {}
    for m in desc.members:
        parts = m.assignment.topic_partitions if m.assignment else []
        out[m.client_id] = {tp.partition for tp in parts}
    return out


def settled(bootstrap: str, group: str, members: int) -> dict[str, set[int]] | None:
    """The assignment once the group is Stable (every member at its target) with
    `members` members covering all partitions once."""
    a = broker_assignment(bootstrap, group, stable_only=True)
    if a is None or len(a) != members:
        return None
    union = set().union(*a.values())
    if union != set(range(PARTITIONS)) or sum(len(s) for s in a.values()) != PARTITIONS:
        return None
    return a


def check_disjoint(members) -> None:
    views = [(m.name, set(m.assigned)) for m in members]
    for i, (na, a) in enumerate(views):
        for nb, b in views[i + 1:]:
            assert not (a & b), f"{na} and {nb} both hold partitions {sorted(a & b)}"


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_consumer_protocol_split_join_leave(sluice_factory, topic_name, assignor):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tally = Tally()

    sent = produce_keyed(bs, topic_name, 20, "a")
    a = Member("member-a", bs, group, topic_name, tally, assignor)
    b = Member("member-b", bs, group, topic_name, tally, assignor)
    members = [a, b]
    split = wait_until(lambda: settled(bs, group, 2), 40, what="two members splitting 12 partitions")
    assert sorted(len(s) for s in split.values()) == [6, 6], split
    wait_until(lambda: tally.values >= sent, 30, what="first records consumed")

    desc = describe(bs, group)
    assert desc.type == ConsumerGroupType.CONSUMER, desc.type
    assert desc.partition_assignor == assignor
    admin = ck_admin(bs)  # kept alive until the result is in
    listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
    mine = [g for g in listed.valid if g.group_id == group]
    assert len(mine) == 1 and mine[0].type == ConsumerGroupType.CONSUMER, [(g.group_id, g.type, g.state) for g in listed.valid] + [str(e) for e in listed.errors]

    sent |= produce_keyed(bs, topic_name, 20, "b")
    c = Member("member-c", bs, group, topic_name, tally, assignor)
    members.append(c)
    split = wait_until(lambda: settled(bs, group, 3), 40, what="three members after the third joined")
    assert sorted(len(s) for s in split.values()) == [4, 4, 4], split
    if assignor == "range":
        # Range by member id: each member holds one contiguous block of four.
        for parts in split.values():
            assert max(parts) - min(parts) == 3, split
    sent |= produce_keyed(bs, topic_name, 20, "c")
    wait_until(lambda: tally.values >= sent, 30, what="records after the third joined")
    check_disjoint(members)

    before = broker_assignment(bs, group)
    a.leave()
    members.remove(a)
    split = wait_until(lambda: settled(bs, group, 2), 40, what="partitions moving after a member left")
    assert "member-a" not in split
    assert before["member-a"] <= set().union(*split.values())
    sent |= produce_keyed(bs, topic_name, 20, "d")
    wait_until(lambda: tally.values >= sent, 30, what="records after a member left")
    check_disjoint(members)
    for m in members:
        m.leave()
    errors = [e for m in [a, b, c] for e in m.errors]
    assert errors == [], errors
    assert tally.values == sent
    dups = tally.duplicates()
    assert not dups, f"{len(dups)} records delivered more than once, e.g. {list(dups.items())[:3]}"


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "group.protocol": "consumer"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def test_consumer_protocol_offsets_resume_after_restart(sluice_factory, topic_name):
    broker = sluice_factory(GROUP_ARGS)
    create_topic(broker.bootstrap, topic_name, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    p = ck_producer(broker.bootstrap)
    for i in range(30):
        p.produce(topic_name, value=f"first-{i}".encode(), partition=i % 3)
    assert p.flush(15) == 0

    def consume(c: Consumer, n: int) -> list[bytes]:
        out = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            for m in c.consume(50, timeout=0.2):
                if not m.error():
                    out.append(m.value())
        return out

    c = Consumer(consumer_conf(broker.bootstrap, group, "resumer", "uniform"))
    c.subscribe([topic_name])
    first = consume(c, 30)
    assert sorted(first) == sorted(f"first-{i}".encode() for i in range(30))
    c.commit(asynchronous=False)
    assert committed(broker.bootstrap, group, topic_name, 3) == {0: 10, 1: 10, 2: 10}

    # The broker restarts under a running consumer: the group survives (type and epoch
    # are persisted), the member does not; the consumer rejoins and resumes from its
    # committed offsets.
    broker.restart()
    assert committed(broker.bootstrap, group, topic_name, 3) == {0: 10, 1: 10, 2: 10}
    p = ck_producer(broker.bootstrap)
    for i in range(15):
        p.produce(topic_name, value=f"second-{i}".encode(), partition=i % 3)
    assert p.flush(15) == 0
    second = consume(c, 15)
    assert sorted(second) == sorted(f"second-{i}".encode() for i in range(15))
    c.commit(asynchronous=False)
    extra = [m for m in c.consume(50, timeout=1.0) if not m.error()]
    assert extra == []
    c.close()
    assert committed(broker.bootstrap, group, topic_name, 3) == {0: 15, 1: 15, 2: 15}
    assert describe(broker.bootstrap, group).type == ConsumerGroupType.CONSUMER

    # A fresh consumer after the restart resumes too (nothing left to read).
    c = Consumer(consumer_conf(broker.bootstrap, group, "fresh", "uniform"))
    c.subscribe([topic_name])
    assert [m for m in c.consume(50, timeout=3.0) if not m.error()] == []
    c.close()
