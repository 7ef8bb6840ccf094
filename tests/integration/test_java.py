"""The Java client (Apache Kafka kafka-clients 4.x) and Kafka's kafka-consumer-groups tool
against a real broker process. The Java pieces come from Maven Central through
scripts/java-deps.sh (see java_client.py).

- The Java producer with its defaults (idempotent, acks=all): every record once, in order,
  at the acknowledged offsets, in batches that carry one producer id and sequence numbers
  that match their offsets.
- A classic consumer group of two Java consumers splits six partitions; every record
  arrives exactly once; commitSync'd offsets survive a broker restart and the group resumes
  after them.
- kafka-consumer-groups --describe shows CURRENT-OFFSET, LOG-END-OFFSET and LAG per
  partition; --list shows the group; the Java Admin client agrees.
"""

from __future__ import annotations

import struct
import uuid

from confluent_kafka import OFFSET_BEGINNING

import kwire
from helpers import ConfluentFamily, create_topic
from java_client import (GROUP_ARGS, committed_offsets, consumer_groups_tool, java_cp, java_produce,  # noqa: F401
                         parse_table, run, seq_values, split_and_consume_once)


def raw_batches(bootstrap: str, topic: str, end: int) -> list[dict]:
    """Every v2 batch header of partition 0 up to `end`, fetched over the raw wire."""
    out, offset = [], 0
    while offset < end:
        part = kwire.fetch_v4(bootstrap, topic, 0, offset)
        assert part.error_code == 0, part.error_code
        data, pos, before = part.records, 0, offset
        while pos + 61 <= len(data):
            base, length = struct.unpack(">qi", data[pos:pos + 12])
            if pos + 12 + length > len(data):
                break
            b = data[pos:pos + 12 + length]
            last_delta = struct.unpack(">i", b[23:27])[0]
            pid, epoch, base_seq, count = struct.unpack(">qhii", b[43:61])
            out.append(dict(base=base, last=base + last_delta, pid=pid, epoch=epoch, base_seq=base_seq,
                            count=count))
            offset = base + last_delta + 1
            pos += 12 + length
        assert offset > before, f"no progress fetching from {before}"
    return out


def test_java_idempotent_producer_defaults(broker, topic_name, java_cp):
    create_topic(broker.bootstrap, topic_name, 1)
    r = run("produce", "--bootstrap", broker.bootstrap, "--topic", topic_name, "--count", 1000, "--partition", 0)
    assert r.ok, r.summary()
    assert r["enable_idempotence"] is True and r["acks"] in ("-1", "all"), "not the client's defaults"
    assert r["results"] == [[0, i] for i in range(1000)], "acknowledged offsets are not 0..999 in order"

    fam = ConfluentFamily(broker.bootstrap)
    recs = fam.consume(topic_name, 0, OFFSET_BEGINNING, 1000, timeout=30)
    assert [rec.offset for rec in recs] == list(range(1000))
    assert [rec.value.decode() for rec in recs] == seq_values(0, 1000)
    assert fam.watermarks(topic_name, 0) == (0, 1000)

    # The broker stored what an idempotent producer sends: one producer id from
    # InitProducerId, and per-batch sequence numbers that start at 0 and have no gaps.
    batches = raw_batches(broker.bootstrap, topic_name, 1000)
    assert {b["pid"] for b in batches} == {batches[0]["pid"]} and batches[0]["pid"] >= 0, batches[:3]
    assert {b["epoch"] for b in batches} == {batches[0]["epoch"]} and batches[0]["epoch"] >= 0
    assert all(b["base_seq"] == b["base"] for b in batches), [b for b in batches if b["base_seq"] != b["base"]][:3]
    assert sum(b["count"] for b in batches) == 1000


def test_java_classic_group_split_and_resume_after_restart(sluice_factory, topic_name, java_cp):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 6)
    group = f"g-{uuid.uuid4().hex[:8]}"
    results, views = split_and_consume_once(bs, topic_name, group, "classic", partitions=6, per_partition=100)
    for r in results:
        assert any(e["event"] == "assigned" for e in r.events), r.summary()

    broker.restart()
    assert committed_offsets(bs, group, topic_name, 6) == {p: 100 for p in range(6)}
    acked = java_produce(bs, topic_name, 600, 60, 6)
    r = run("consume-group", "--bootstrap", bs, "--topic", topic_name, "--group", group, "--protocol", "classic",
            "--count", 60, "--extra-ms", 2000, "--timeout-ms", 60000)
    assert r.ok, r.summary()
    # Exactly the new records: nothing before the committed offsets, nothing twice.
    assert sorted(v for _, _, v in r["records"]) == seq_values(600, 60), r.summary()
    assert sorted((p, o) for p, o, _ in r["records"]) == sorted(acked.values())
    assert r["committed"] == {str(p): 110 for p in range(6)}, r.summary()
    assert committed_offsets(bs, group, topic_name, 6) == {p: 110 for p in range(6)}


def test_kafka_consumer_groups_describe_and_list(sluice_factory, topic_name, java_cp):
    broker = sluice_factory(GROUP_ARGS)
    bs = broker.bootstrap
    create_topic(bs, topic_name, 3)
    group = f"g-{uuid.uuid4().hex[:8]}"
    java_produce(bs, topic_name, 0, 30, 3)
    # A Java consumer processes (and commits) only the first 4 records of each partition.
    c = run("consume-group", "--bootstrap", bs, "--topic", topic_name, "--group", group, "--count", 12,
            "--per-partition-limit", 4, "--extra-ms", 500, "--timeout-ms", 60000)
    assert c.ok, c.summary()
    assert sorted((p, o) for p, o, _ in c["records"]) == [(p, o) for p in range(3) for o in range(4)]
    assert c["committed"] == {"0": 4, "1": 4, "2": 4}, c.summary()

    out = consumer_groups_tool("--bootstrap-server", bs, "--describe", "--group", group)
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr[-3000:]}"
    rows = [row for row in parse_table(out.stdout) if row.get("TOPIC") == topic_name]
    assert sorted(int(row["PARTITION"]) for row in rows) == [0, 1, 2], out.stdout
    for row in rows:
        assert row["GROUP"] == group
        assert (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"]) == ("4", "10", "6"), out.stdout
        assert row["CONSUMER-ID"] == "-", f"the consumer left, yet the tool shows a member: {out.stdout}"
    assert f"Consumer group '{group}' has no active members." in out.stdout + out.stderr

    listed = consumer_groups_tool("--bootstrap-server", bs, "--list")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert group in listed.stdout.split(), listed.stdout

    # The Java Admin client sees the same group and offsets.
    a = run("admin-describe", "--bootstrap", bs, "--group", group)
    assert a.ok, a.summary()
    assert a["state"] == "Empty" and a["type"] == "Classic" and a["members"] == [], a.summary()
    assert a["offsets"] == {f"{topic_name}-{p}": 4 for p in range(3)}, a.summary()
    assert [g for g in a["listed"] if g["group"] == group], a.summary()
