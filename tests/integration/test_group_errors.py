"""Group-protocol bad input over raw sockets: each case gets exactly Kafka's error code.

Requests are built by hand (non-flexible versions: JoinGroup v5, SyncGroup v3, Heartbeat v3,
OffsetCommit v7, FindCoordinator v1) so the test controls every field.
"""

from __future__ import annotations

import signal
import time
import uuid

from confluent_kafka import Consumer, TopicPartition

import kwire
from kwire import i8, i32, i64, string
from helpers import create_topic

OFFSET_COMMIT, FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, SYNC_GROUP = 8, 10, 11, 12, 14
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
MEMBER_ID_REQUIRED = 79

GROUP_ARGS = ["--override", "group.initial.rebalance.delay.ms=0",
              "--override", "group.min.session.timeout.ms=1000"]


def nbytes(b: bytes | None) -> bytes:
    return i32(-1) if b is None else i32(len(b)) + b


def join_request(corr: int, group: str, member: str, session_ms: int = 6000,
                 instance: str | None = None) -> bytes:
    body = (string(group) + i32(session_ms) + i32(10000) + string(member) + string(instance)
            + string("consumer") + i32(1) + string("range") + nbytes(b"\x00\x00\x00\x00\x00\x00"))
    return kwire.frame(kwire.header_v1(JOIN_GROUP, 5, corr) + body)


def parse_join(body: bytes) -> tuple[int, int, str, str]:
    """(error, generation, leader, member id)."""
    r = kwire.Reader(body)
    r.i32()  # correlation id
    r.i32()  # throttle
    err, gen = r.i16(), r.i32()
    r.string()  # protocol name
    leader, member = r.string(), r.string()
    return err, gen, leader, member


def heartbeat(bs: str, group: str, gen: int, member: str) -> int:
    body = string(group) + i32(gen) + string(member) + string(None)
    r = kwire.Reader(kwire.roundtrip(bs, kwire.frame(kwire.header_v1(HEARTBEAT, 3, 3) + body)))
    r.i32()
    r.i32()
    return r.i16()


def sync(bs: str, group: str, gen: int, member: str, assignments: list[tuple[str, bytes]]) -> tuple[int, bytes]:
    body = string(group) + i32(gen) + string(member) + string(None) + i32(len(assignments))
    for m, a in assignments:
        body += string(m) + nbytes(a)
    r = kwire.Reader(kwire.roundtrip(bs, kwire.frame(kwire.header_v1(SYNC_GROUP, 3, 4) + body)))
    r.i32()
    r.i32()
    return r.i16(), r.bytes_()


def join(bs: str, group: str, member: str = "", **kw) -> tuple[int, int, str, str]:
    return parse_join(kwire.roundtrip(bs, join_request(2, group, member, **kw)))


def join_member(bs: str, group: str) -> tuple[int, str]:
    """Joins through the MEMBER_ID_REQUIRED handshake and syncs; returns (generation, member)."""
    err, _, _, member = join(bs, group)
    assert err == MEMBER_ID_REQUIRED and member
    err, gen, leader, member2 = join(bs, group, member)
    assert err == 0 and member2 == member and leader == member and gen >= 1
    err, assignment = sync(bs, group, gen, member, [(member, b"mine")])
    assert err == 0 and assignment == b"mine"
    return gen, member


def commit_standalone(bs: str, group: str, topic: str, partition: int, offset: int) -> int:
    body = (string(group) + i32(-1) + string("") + string(None)
            + i32(1) + string(topic) + i32(1) + i32(partition) + i64(offset) + i32(-1) + string(None))
    r = kwire.Reader(kwire.roundtrip(bs, kwire.frame(kwire.header_v1(OFFSET_COMMIT, 7, 5) + body)))
    r.i32()
    r.i32()
    assert r.array_len() == 1
    assert r.string() == topic
    assert r.array_len() == 1
    assert r.i32() == partition
    return r.i16()


def find_coordinator(bs: str, key: str, key_type: int) -> tuple[int, int, int]:
    """(error, node id, port)."""
    body = string(key) + i8(key_type)
    r = kwire.Reader(kwire.roundtrip(bs, kwire.frame(kwire.header_v1(FIND_COORDINATOR, 1, 6) + body)))
    r.i32()
    r.i32()
    err = r.i16()
    r.string()
    node = r.i32()
    r.string()
    return err, node, r.i32()


def test_group_error_codes(sluice_factory, topic_name):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 1)
    group = f"g-{uuid.uuid4().hex[:8]}"

    assert find_coordinator(bs, group, 0) == (0, 1, broker.port)
    assert join(bs, "")[0] == INVALID_GROUP_ID
    assert join(bs, group, session_ms=10)[0] == INVALID_SESSION_TIMEOUT
    # A member id the group never gave out, for a group that does not exist yet.
    assert join(bs, group, "made-up-member")[0] == UNKNOWN_MEMBER_ID

    gen, member = join_member(bs, group)
    assert heartbeat(bs, group, gen, member) == 0
    assert heartbeat(bs, group, gen, "made-up-member") == UNKNOWN_MEMBER_ID
    assert heartbeat(bs, group, gen + 1, member) == ILLEGAL_GENERATION
    assert sync(bs, group, gen + 1, member, [])[0] == ILLEGAL_GENERATION
    assert heartbeat(bs, f"{group}-none", 1, member) == UNKNOWN_MEMBER_ID

    # A second member joining starts a rebalance: the first is told to rejoin.
    err, _, _, second = join(bs, group)
    assert err == MEMBER_ID_REQUIRED
    parked = kwire.connect(bs)
    parked.sendall(join_request(9, group, second))  # parked until the first member rejoins
    try:
        # The parked join travels on another connection: until the broker has read it the
        # group is still Stable, after that every heartbeat must say REBALANCE_IN_PROGRESS.
        deadline = time.monotonic() + 5
        while (code := heartbeat(bs, group, gen, member)) == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert code == REBALANCE_IN_PROGRESS
        # Rejoining completes the rebalance; both get the new generation.
        err, gen2, leader, _ = join(bs, group, member)
        assert err == 0 and gen2 == gen + 1 and leader == member
        perr, pgen, _, pmember = parse_join(kwire.read_frame(parked))
        assert (perr, pgen, pmember) == (0, gen2, second)
    finally:
        parked.close()

    # Offsets: a standalone commit to an unknown topic, and to a group with live members.
    assert commit_standalone(bs, f"{group}-solo", "no-such-topic", 0, 5) == kwire.UNKNOWN_TOPIC_OR_PARTITION
    assert commit_standalone(bs, f"{group}-solo", topic_name, 7, 5) == kwire.UNKNOWN_TOPIC_OR_PARTITION
    assert commit_standalone(bs, f"{group}-solo", topic_name, 0, 5) == 0
    assert commit_standalone(bs, group, topic_name, 0, 5) == UNKNOWN_MEMBER_ID
    assert commit_standalone(bs, "", topic_name, 0, 5) == INVALID_GROUP_ID

    # A transactional id's coordinator is this node (issue 12); unknown key types are
    # invalid requests.
    err, node, port = find_coordinator(bs, "txn", 1)
    assert (err, port) == (0, int(bs.rsplit(":", 1)[1])) and node >= 0
    assert find_coordinator(bs, group, 7)[0] == kwire.INVALID_REQUEST


def test_parked_join_answered_not_coordinator_on_shutdown(sluice_factory):
    # Default initial rebalance delay (3 s): the first rebalance of a new group waits.
    broker = sluice_factory([])
    bs = broker.bootstrap
    group = f"g-{uuid.uuid4().hex[:8]}"
    err, _, _, member = join(bs, group)
    assert err == MEMBER_ID_REQUIRED
    s = kwire.connect(bs)
    try:
        s.sendall(join_request(11, group, member))
        time.sleep(0.3)
        broker.proc.send_signal(signal.SIGTERM)
        s.settimeout(10)
        err, *_ = parse_join(kwire.read_frame(s))
        assert err == NOT_COORDINATOR
    finally:
        s.close()
    assert broker.proc.wait(timeout=15) == 0
    broker._expected_exit = True


OFFSET_DELETE = 47
GROUP_ID_NOT_FOUND = 69
GROUP_SUBSCRIBED_TO_TOPIC = 86


def offset_delete(bs: str, group: str, topic: str, partitions: list[int]) -> tuple[int, dict[int, int]]:
    body = string(group) + i32(1) + string(topic) + i32(len(partitions))
    for p in partitions:
        body += i32(p)
    r = kwire.Reader(kwire.roundtrip(bs, kwire.frame(kwire.header_v1(OFFSET_DELETE, 0, 8) + body)))
    r.i32()
    err = r.i16()
    r.i32()  # throttle
    out = {}
    for _ in range(r.array_len()):
        r.string()
        for _ in range(r.array_len()):
            p = r.i32()
            out[p] = r.i16()
    return err, out


def fetch_committed(bs: str, group: str, topic: str, partition: int) -> int:
    """OffsetFetch v5 for one partition: the committed offset (-1 when none)."""
    body = string(group) + i32(1) + string(topic) + i32(1) + i32(partition)
    r = kwire.Reader(kwire.roundtrip(bs, kwire.frame(kwire.header_v1(9, 5, 10) + body)))
    r.i32()
    r.i32()
    assert r.array_len() == 1
    r.string()
    assert r.array_len() == 1
    assert r.i32() == partition
    offset = r.i64()
    return offset


def test_offset_delete(sluice_factory, topic_name):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 2)
    solo = f"g-{uuid.uuid4().hex[:8]}"
    assert commit_standalone(bs, solo, topic_name, 0, 7) == 0
    assert commit_standalone(bs, solo, topic_name, 1, 9) == 0
    assert fetch_committed(bs, solo, topic_name, 0) == 7
    err, parts = offset_delete(bs, solo, topic_name, [0, 5])
    assert err == 0 and parts == {0: 0, 5: kwire.UNKNOWN_TOPIC_OR_PARTITION}
    assert fetch_committed(bs, solo, topic_name, 0) == -1
    assert fetch_committed(bs, solo, topic_name, 1) == 9
    # Survives a restart: the tombstone is durable.
    broker.kill9()
    broker.start()
    assert fetch_committed(bs, solo, topic_name, 0) == -1
    assert fetch_committed(bs, solo, topic_name, 1) == 9
    assert offset_delete(bs, f"{solo}-missing", topic_name, [0])[0] == GROUP_ID_NOT_FOUND
    # A group whose member subscribes to the topic keeps its offsets.
    live = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bs, "group.id": live, "session.timeout.ms": 6000})
    try:
        c.subscribe([topic_name])
        deadline = time.monotonic() + 20
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.1)
        assert c.assignment()
        c.commit(offsets=[TopicPartition(topic_name, 0, 3)], asynchronous=False)
        err, parts = offset_delete(bs, live, topic_name, [0])
        assert err == 0 and parts == {0: GROUP_SUBSCRIBED_TO_TOPIC}
        assert fetch_committed(bs, live, topic_name, 0) == 3
    finally:
        c.close()
