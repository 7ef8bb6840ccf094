"""Consumer groups (classic protocol) with real clients: librdkafka (eager and cooperative
assignors) and kafka-python.

- Two consumers split 12 partitions; a third joins and they rebalance; one leaves and its
  partitions move. Every consumer commits what it processed, synchronously, after each batch
  and when partitions are revoked, so across all rebalances every record must be delivered
  exactly once, and the broker's view (DescribeGroups) must show disjoint assignments that
  cover all 12 partitions.
- Committed offsets resume after a consumer restart, a clean broker restart and a SIGKILL.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kafka import KafkaConsumer

from helpers import ck_admin, ck_producer, create_topic, wait_until

PARTITIONS = 12
# kafka-python 3.0.12 loses a SyncGroup answer that arrives after poll()'s timeout has cut
# the join short (it never re-enables heartbeats and never fetches). A SyncGroup is answered
# only once the group's new metadata is fsync'd, which on a loaded machine can take longer
# than a short poll timeout, so its consumers poll with a generous one.
KP_POLL_MS = 2000
# Fast rebalances for tests: no initial delay, short sessions allowed.
GROUP_ARGS = ["--override", "group.initial.rebalance.delay.ms=0",
              "--override", "group.min.session.timeout.ms=1000"]


def produce_keyed(bootstrap: str, topic: str, per_partition: int, tag: str) -> set[tuple[int, bytes]]:
    p = ck_producer(bootstrap, **{"linger.ms": 2})
    sent = set()
    for part in range(PARTITIONS):
        for i in range(per_partition):
            v = f"{tag}-{part}-{i}".encode()
            p.produce(topic, value=v, partition=part)
            sent.add((part, v))
    assert p.flush(30) == 0
    return sent


class Tally:
    """What every consumer received: (partition, offset) -> list of consumer names."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen: dict[tuple[int, int], list[str]] = {}
        self.values: set[tuple[int, bytes]] = set()

    def add(self, who: str, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.seen.setdefault((partition, offset), []).append(who)
            self.values.add((partition, value))

    def duplicates(self) -> dict:
        with self.lock:
            return {k: v for k, v in self.seen.items() if len(v) > 1}


class CkMember:
    """A librdkafka group member running in its own thread."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, tally: Tally, strategy: str):
        self.name = name
        self.tally = tally
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.assigned: set[int] = set()
        self.c = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
            "fetch.wait.max.ms": 100,
            "partition.assignment.strategy": strategy,
        })
        self.cooperative = strategy == "cooperative-sticky"
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, c, parts):
        if self.cooperative:
            self.assigned |= {p.partition for p in parts}
        else:
            self.assigned = {p.partition for p in parts}

    def _on_revoke(self, c, parts):
        # Commit what was processed before giving the partitions away.
        try:
            c.commit(asynchronous=False)
        except KafkaException as e:
            if e.args[0].code() != KafkaError._NO_OFFSET:
                self.errors.append(f"commit on revoke: {e}")
        if self.cooperative:
            self.assigned -= {p.partition for p in parts}
        else:
            self.assigned = set()

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
                    # A commit racing a rebalance is refused; the revoke commit covers it.
                    if e.args[0].code() not in (KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION,
                                                KafkaError._NO_OFFSET, KafkaError.UNKNOWN_MEMBER_ID):
                        self.errors.append(f"commit: {e}")
        self.c.close()

    def leave(self):
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), f"{self.name} did not close"


class KpMember:
    """A kafka-python group member running in its own thread."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, tally: Tally):
        self.name = name
        self.tally = tally
        self.stop = threading.Event()
        self.errors: list[str] = []
        # kafka-python commits consumed positions itself before every rebalance (and on
        # close) when auto-commit is on; its sync listener may not block on a commit.
        self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name,
                               auto_offset_reset="earliest", enable_auto_commit=True,
                               auto_commit_interval_ms=200,
                               session_timeout_ms=6000, heartbeat_interval_ms=300,
                               fetch_max_wait_ms=100, request_timeout_ms=30000)
        self.c.subscribe([topic])
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def assigned(self) -> set[int]:
        return {tp.partition for tp in self.c.assignment()}

    def _run(self):
        import kafka.errors as kerrors
        while not self.stop.is_set():
            batches = self.c.poll(timeout_ms=KP_POLL_MS, max_records=200)
            got = False
            for tp, recs in batches.items():
                for r in recs:
                    self.tally.add(self.name, tp.partition, r.offset, r.value)
                    got = True
            if got:
                try:
                    self.c.commit()
                except (kerrors.CommitFailedError, kerrors.RebalanceInProgressError,
                        kerrors.IllegalGenerationError):
                    pass
        self.c.close()

    def leave(self):
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), f"{self.name} did not close"


def broker_assignment(bootstrap: str, group: str) -> dict[str, set[int]]:
    """The group's members and their partitions as DescribeGroups reports them."""
    admin = ck_admin(bootstrap)
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    out = {}
    for m in desc.members:
        parts = m.assignment.topic_partitions if m.assignment else []
        out[m.client_id] = {tp.partition for tp in parts}
    return out


def settled(bootstrap: str, group: str, members: int) -> dict[str, set[int]] | None:
    a = broker_assignment(bootstrap, group)
    if len(a) != members:
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


@pytest.mark.parametrize("flavour", ["confluent-range", "confluent-cooperative", "kafka-python"])
def test_group_split_rebalance_and_leave(sluice_factory, topic_name, flavour):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, PARTITIONS)
    group = f"g-{uuid.uuid4().hex[:8]}"
    tally = Tally()

    def member(name):
        if flavour == "kafka-python":
            return KpMember(name, bs, group, topic_name, tally)
        strategy = "cooperative-sticky" if flavour == "confluent-cooperative" else "range"
        return CkMember(name, bs, group, topic_name, tally, strategy)

    sent = produce_keyed(bs, topic_name, 20, "a")
    a, b = member("member-a"), member("member-b")
    members = [a, b]
    split = wait_until(lambda: settled(bs, group, 2), 40, what="two members splitting 12 partitions")
    assert sorted(len(s) for s in split.values()) == [6, 6], split
    wait_until(lambda: tally.values >= sent, 30, what="first records consumed")

    sent |= produce_keyed(bs, topic_name, 20, "b")
    c = member("member-c")
    members.append(c)
    split = wait_until(lambda: settled(bs, group, 3), 40, what="three members after the third joined")
    assert sorted(len(s) for s in split.values()) == [4, 4, 4], split
    sent |= produce_keyed(bs, topic_name, 20, "c")
    wait_until(lambda: tally.values >= sent, 30, what="records after the third joined")
    if flavour != "kafka-python":
        check_disjoint(members)

    before = broker_assignment(bs, group)
    a.leave()
    members.remove(a)
    split = wait_until(lambda: settled(bs, group, 2), 40, what="partitions moving after a member left")
    assert "member-a" not in split
    assert before["member-a"] <= set().union(*split.values())
    sent |= produce_keyed(bs, topic_name, 20, "d")
    wait_until(lambda: tally.values >= sent, 30, what="records after a member left")
    for m in members:
        m.leave()
    errors = [e for m in [a, b, c] for e in m.errors]
    assert errors == [], errors
    assert tally.values == sent
    dups = tally.duplicates()
    assert not dups, f"{len(dups)} records delivered more than once, e.g. {list(dups.items())[:3]}"


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(3)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


@pytest.mark.parametrize("restart", ["consumer", "broker-sigterm", "broker-sigkill"])
@pytest.mark.parametrize("fam", ["confluent", "kafka-python"])
def test_committed_offsets_resume(sluice_factory, topic_name, restart, fam):
    broker = sluice_factory(GROUP_ARGS)
    create_topic(broker.bootstrap, topic_name, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    p = ck_producer(broker.bootstrap)
    for i in range(30):
        p.produce(topic_name, value=f"first-{i}".encode(), partition=i % 3)
    assert p.flush(15) == 0

    def consume_group(n: int) -> list[bytes]:
        out = []
        if fam == "confluent":
            c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                          "auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "session.timeout.ms": 6000, "fetch.wait.max.ms": 100})
            c.subscribe([topic_name])
            deadline = time.monotonic() + 30
            while len(out) < n and time.monotonic() < deadline:
                for m in c.consume(50, timeout=0.2):
                    if not m.error():
                        out.append(m.value())
            c.commit(asynchronous=False)
            # Nothing more arrives: the group resumed exactly where it committed.
            extra = [m for m in c.consume(50, timeout=1.0) if not m.error()]
            assert extra == []
            c.close()
        else:
            c = KafkaConsumer(topic_name, bootstrap_servers=broker.bootstrap, group_id=group,
                              auto_offset_reset="earliest", enable_auto_commit=False,
                              session_timeout_ms=6000, fetch_max_wait_ms=100)
            deadline = time.monotonic() + 30
            while len(out) < n and time.monotonic() < deadline:
                for recs in c.poll(timeout_ms=KP_POLL_MS).values():
                    out.extend(r.value for r in recs)
            c.commit()
            extra = [r for recs in c.poll(timeout_ms=1000).values() for r in recs]
            assert extra == []
            c.close()
        return out

    first = consume_group(30)
    assert sorted(first) == sorted(f"first-{i}".encode() for i in range(30))
    assert committed(broker.bootstrap, group, topic_name) == {0: 10, 1: 10, 2: 10}

    if restart == "broker-sigterm":
        broker.restart()
    elif restart == "broker-sigkill":
        broker.kill9()
        broker.start()
    assert committed(broker.bootstrap, group, topic_name) == {0: 10, 1: 10, 2: 10}

    p = ck_producer(broker.bootstrap)
    for i in range(15):
        p.produce(topic_name, value=f"second-{i}".encode(), partition=i % 3)
    assert p.flush(15) == 0
    second = consume_group(15)
    assert sorted(second) == sorted(f"second-{i}".encode() for i in range(15))
    assert committed(broker.bootstrap, group, topic_name) == {0: 15, 1: 15, 2: 15}


def test_list_describe_delete_groups(sluice_factory, topic_name):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "client.id": "lister",
                  "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    c.subscribe([topic_name])
    admin = ck_admin(bs)

    def stable():
        listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
        return [g for g in listed.valid if g.group_id == group and str(g.state).endswith("STABLE")]

    wait_until(lambda: (c.poll(0.1), stable())[1], 30, what="group listed as Stable")
    # ListGroups' state filter (v4+): the group is listed under Stable and not under Empty.
    from confluent_kafka import ConsumerGroupState
    by_state = {
        st: [g.group_id for g in admin.list_consumer_groups(states={st}, request_timeout=10).result(timeout=15).valid]
        for st in (ConsumerGroupState.STABLE, ConsumerGroupState.EMPTY)
    }
    assert group in by_state[ConsumerGroupState.STABLE]
    assert group not in by_state[ConsumerGroupState.EMPTY]
    desc = admin.describe_consumer_groups([group])[group].result(timeout=15)
    assert str(desc.state).endswith("STABLE") and len(desc.members) == 1
    assert desc.members[0].client_id == "lister"
    # A group with members cannot be deleted.
    with pytest.raises(KafkaException) as e:
        admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert e.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
    c.close()
    wait_until(lambda: str(admin.describe_consumer_groups([group])[group].result(timeout=15).state).endswith("EMPTY"),
               20, what="group empty after the member left")
    empty = admin.list_consumer_groups(states={ConsumerGroupState.EMPTY}, request_timeout=10).result(timeout=15)
    assert group in [g.group_id for g in empty.valid]
    admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert committed(bs, group, topic_name)[0] < 0, "offsets must go with the group"
    listed = admin.list_consumer_groups(request_timeout=10).result(timeout=15)
    assert group not in [g.group_id for g in listed.valid]
    with pytest.raises(KafkaException) as e:
        admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert e.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND


def test_static_membership_rejoin_without_rebalance_and_fencing(sluice_factory, topic_name):
    """KIP-345: a static member (group.instance.id) that restarts within its session timeout
    gets its partitions back without a rebalance; a second process with the same instance
    id fences the first."""
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    events: dict[str, list[str]] = {"a": [], "b": [], "a2": []}
    fatal: list[str] = []
    names: dict[int, str] = {}

    def member(name: str, instance: str):
        def on_assign(c, parts):
            events[name].append("assign:" + ",".join(str(p.partition) for p in sorted(parts, key=lambda p: p.partition)))

        def on_revoke(c, parts):
            events[name].append("revoke")

        def on_error(err):
            if err.fatal():
                fatal.append(f"{name}: {err}")

        c = Consumer({"bootstrap.servers": bs, "group.id": group, "client.id": name,
                      "group.instance.id": instance, "session.timeout.ms": 10000,
                      "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest",
                      "partition.assignment.strategy": "range", "error_cb": on_error})
        c.subscribe([topic_name], on_assign=on_assign, on_revoke=on_revoke)
        names[id(c)] = name
        return c

    a, b = member("a", "inst-a"), member("b", "inst-b")

    def pump(*cs, seconds=0.5):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for c in cs:
                m = c.poll(0.05)
                # librdkafka delivers the fencing as a fatal error through poll().
                if m is not None and m.error() is not None and (
                        m.error().fatal() or m.error().code() == KafkaError._FATAL):
                    fatal.append(f"{names.get(id(c), '?')}: {m.error()}")

    wait_until(lambda: (pump(a, b), settled_n(bs, group, 2, 4))[1], 30, what="two static members")
    assign_a = [e for e in events["a"] if e.startswith("assign")][-1]
    b_events = len(events["b"])
    # A static member closes without LeaveGroup and comes back within the session timeout.
    a.close()
    a = member("a", "inst-a")
    wait_until(lambda: (pump(a, b), [e for e in events["a"] if e.startswith("assign")][-1:] and len(events["a"]) > 1)[1]
               and settled_n(bs, group, 2, 4), 30, what="static member back")
    pump(a, b, seconds=1.0)
    assert [e for e in events["a"] if e.startswith("assign")][-1] == assign_a, events
    assert len(events["b"]) == b_events, f"b saw a rebalance: {events['b']}"
    # The same instance id in a second process fences the first one.
    a2 = member("a2", "inst-a")
    wait_until(lambda: (pump(a, a2, b), any(f.startswith("a:") for f in fatal))[1], 30,
               what="the older instance fenced")
    assert "FENCED" in " ".join(fatal).upper()
    for c in (a2, b):
        c.close()


def settled_n(bootstrap: str, group: str, members: int, partitions: int) -> bool:
    a = broker_assignment(bootstrap, group)
    return (len(a) == members and set().union(*a.values()) == set(range(partitions))
            and sum(len(s) for s in a.values()) == partitions)


MEMBER_SCRIPT = r"""
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "client.id": "doomed",
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
              "partition.assignment.strategy": "range"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_killed_member_partitions_move_after_session_timeout(sluice_factory, topic_name):
    """A member that dies without leaving (SIGKILL) is removed when its session times out,
    and its partitions move to the survivor."""
    import subprocess
    import sys
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 4)
    group = f"g-{uuid.uuid4().hex[:8]}"
    doomed = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, bs, group, topic_name],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    survivor = Consumer({"bootstrap.servers": bs, "group.id": group, "client.id": "survivor",
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                         "partition.assignment.strategy": "range"})
    try:
        survivor.subscribe([topic_name])
        split = wait_until(lambda: (survivor.poll(0.1), settled_n(bs, group, 2, 4)
                                    and broker_assignment(bs, group))[1], 30, what="two members")
        assert split["doomed"] and split["survivor"]
        doomed.kill()
        doomed.wait(timeout=10)
        killed_at = time.monotonic()
        wait_until(lambda: (survivor.poll(0.1), settled_n(bs, group, 1, 4))[1], 30,
                   what="the survivor owning every partition")
        waited = time.monotonic() - killed_at
        # Not before the session timeout (6 s), and not long after it.
        assert 4.5 < waited < 20, waited
        # The broker settles first; the survivor's client takes its new assignment in a
        # later poll.
        wait_until(lambda: (survivor.poll(0.1),
                            {p.partition for p in survivor.assignment()} == {0, 1, 2, 3})[1],
                   10, what="the survivor's client assigned every partition")
    finally:
        survivor.close()
        if doomed.poll() is None:
            doomed.kill()
