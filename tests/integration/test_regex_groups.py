"""KIP-848 regex subscriptions (issue 12, second gap): a Java consumer with
`group.protocol=consumer` subscribing with `subscribe(SubscriptionPattern)` sends the RE2
regex in ConsumerGroupHeartbeat's SubscribedTopicRegex; the broker resolves it against its
topics and re-resolves it when topics are created or deleted. (`subscribe(Pattern)` is
resolved by the Java client itself and sends topic names.)

Before this change the broker refused the regex with INVALID_REQUEST, so the consumer
failed at once and both tests failed.
"""

from __future__ import annotations

import json
import time
import uuid

from helpers import ConfluentFamily, Msg, create_topic, wait_until
from java_client import GROUP_ARGS, JavaProc, java_cp, run  # noqa: F401


def assigned(proc: JavaProc) -> set[str]:
    """The topic-partitions the consumer holds after its latest rebalance event."""
    ev = proc.events()
    return set(ev[-1]["assignment"]) if ev else set()


def test_regex_group_gets_matching_topics_and_new_ones(sluice_factory, java_cp):
    """Goal: the group gets exactly the topics whose whole name matches, and a matching topic
    created while it runs is assigned and consumed without a restart.
    Method: topics `rx-a` (2 partitions), `rx-b` (1) and `xrx-c` (1, matches only as a
    substring); 6 records in each. A Java consumer subscribes to `rx-.*` and must be
    assigned rx-a and rx-b only. Then `rx-new` (1 partition) is created and 4 records
    produced to it: the consumer must receive exactly the 6+6+4 records of the three
    matching topics, each once, and none of `xrx-c`."""
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    fam = ConfluentFamily(bs)
    for name, parts in (("rx-a", 2), ("rx-b", 1), ("xrx-c", 1)):
        create_topic(bs, name, parts)
        for p in range(parts):
            fam.produce(name, [Msg(f"{name}-{p}-{i}".encode()) for i in range(6 // parts)], partition=p)
    group = f"g-rx-{uuid.uuid4().hex[:8]}"
    proc = JavaProc("consume-regex", "--bootstrap", bs, "--regex", "rx-.*", "--group", group,
                    "--count", 16, "--extra-ms", 2000, "--timeout-ms", 90000)
    try:
        wait_until(lambda: assigned(proc) == {"rx-a-0", "rx-a-1", "rx-b-0"} or proc.exited(), 45,
                   what="regex group assigned rx-a and rx-b")
        assert not proc.exited(), proc.wait(5).summary()
        create_topic(bs, "rx-new", 1)
        fam.produce("rx-new", [Msg(f"rx-new-0-{i}".encode()) for i in range(4)])
        wait_until(lambda: "rx-new-0" in assigned(proc) or proc.exited(), 45,
                   what="the new matching topic assigned")
        r = proc.wait(90)
    finally:
        proc.kill()
    assert r.ok, r.summary()
    got = sorted(v for _, _, _, v in r["records"])
    want = sorted([f"rx-a-{p}-{i}" for p in range(2) for i in range(3)]
                  + [f"rx-b-0-{i}" for i in range(6)] + [f"rx-new-0-{i}" for i in range(4)])
    assert got == want, r.summary()
    assert r["assignment"] == ["rx-a-0", "rx-a-1", "rx-b-0", "rx-new-0"], r.summary()


def test_invalid_regex_is_refused(sluice_factory, java_cp):
    """Goal: a pattern that is not a valid regular expression gets Kafka's
    INVALID_REGULAR_EXPRESSION, which the Java client raises instead of retrying.
    Method: subscribe to `rx-(`; the consumer must fail within its timeout with
    InvalidRegularExpression."""
    broker = sluice_factory(GROUP_ARGS)
    create_topic(broker.bootstrap, "rx-a", 1)
    start = time.monotonic()
    r = run("consume-regex", "--bootstrap", broker.bootstrap, "--regex", "rx-(", "--group", "g-bad-rx",
            "--count", 1, "--timeout-ms", 30000, timeout=90)
    assert not r.ok, r.summary()
    assert "InvalidRegularExpression" in json.dumps(r.data), r.summary()
    assert time.monotonic() - start < 60, "the client should give up, not retry until its deadline"


def test_regex_matches_internal_topics(sluice_factory, java_cp):
    """Goal: a regex is matched against every topic, internal ones included, as Kafka 4.4
    resolves it (franz-go's Test848RegexBrokerResolves expects `__consumer_offsets`).
    Method: topic `rxi-a` (1 partition) and a group that commits an offset, so
    `__consumer_offsets` holds records; a Java consumer subscribes to
    `__consumer_offsets|rxi-.*` and must be assigned both topics' partitions and receive
    rxi-a's records. Before the fix the regex matched rxi-a only."""
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, "rxi-a", 1)
    ConfluentFamily(bs).produce("rxi-a", [Msg(f"rxi-{i}".encode()) for i in range(3)])
    group = f"g-rxi-{uuid.uuid4().hex[:8]}"
    proc = JavaProc("consume-regex", "--bootstrap", bs, "--regex", "__consumer_offsets|rxi-.*",
                    "--group", group, "--stop-on-stdin", "--timeout-ms", 60000)
    try:
        wait_until(lambda: {"__consumer_offsets-0", "rxi-a-0"} <= assigned(proc) or proc.exited(), 45,
                   what="the regex group assigned __consumer_offsets and rxi-a")
        assert not proc.exited(), proc.wait(5).summary()
        # Fetches every 100 ms at most: rxi-a's records (and any number of __consumer_offsets
        # records) arrive well within this.
        time.sleep(5)
        r = proc.stop()
    finally:
        proc.kill()
    assert r.ok, r.summary()
    assert "__consumer_offsets-0" in r["assignment"], r.summary()
    got = sorted(v for t, _, _, v in r["records"] if t == "rxi-a")
    assert got == [f"rxi-{i}" for i in range(3)], r.summary()
