"""The Java consumer with group.protocol=consumer (KIP-848: ConsumerGroupHeartbeat, with
the broker computing assignments) against a real broker process.

- Two Java consumers split a 6-partition topic; every record arrives exactly once, each
  from a partition its consumer was assigned; commitSync works and the committed offsets
  are what other clients read back.
- The Java Admin client describes the group as a consumer-protocol group with both members
  and their assignments (ConsumerGroupDescribe).

A broker without ConsumerGroupHeartbeat fails these: the client reports "The cluster does
not support the new CONSUMER group protocol".
"""

from __future__ import annotations

import uuid

from helpers import create_topic
from java_client import (GROUP_ARGS, java_cp, run, split_and_consume_once, start_group_members,  # noqa: F401
                         wait_for_split)


def test_java_consumer_protocol_split_every_record_once(sluice_factory, topic_name, java_cp):
    broker = sluice_factory(GROUP_ARGS)
    create_topic(broker.bootstrap, topic_name, 6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    results, _views = split_and_consume_once(broker.bootstrap, topic_name, group, "consumer",
                                             partitions=6, per_partition=100)
    # The new protocol identifies members by member id and epoch (generation).
    for r in results:
        assert r["member_id"] and r["generation"] > 0, r.summary()
    assert results[0]["member_id"] != results[1]["member_id"]


def test_java_admin_describes_consumer_protocol_group(sluice_factory, topic_name, java_cp):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    procs = start_group_members(bs, topic_name, group, "consumer", ["java-a", "java-b"])
    try:
        views = wait_for_split(procs, 6, 60)
        a = run("admin-describe", "--bootstrap", bs, "--group", group, "--wait-members", 2,
                "--wait-partitions", 6, "--timeout-ms", 30000)
        results = [p.stop() for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert a.ok, a.summary()
    assert a["type"] == "Consumer" and a["state"] == "Stable", a.summary()
    by_client = {m["client_id"]: {int(tp.rsplit("-", 1)[1]) for tp in m["partitions"]} for m in a["members"]}
    assert by_client == {"java-a": views[0], "java-b": views[1]}, (by_client, views)
    assert [g for g in a["listed"] if g["group"] == group and g["type"] == "Consumer"], a.summary()
    for r in results:
        assert r.ok, r.summary()
