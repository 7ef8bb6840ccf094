"""Admin reads that Kafka 4.x tools and the Java admin client use (issue 33), against a real
`sluice serve`: DescribeTopicPartitions (KIP-966, the Java admin's `describeTopics` pages
through it), ListConfigResources (KIP-1142) and DescribeLogDirs (`kafka-log-dirs.sh`). The
broker's per-API request counters show that the Java client really sent the new API rather
than falling back to Metadata.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import kwire
from helpers import ConfluentFamily, Msg, create_topic
from java_client import _parse, java_cmd, java_cp  # noqa: F401
from test_metrics import scrape


LOG_DIRS_COMMAND = "org.apache.kafka.tools.LogDirsCommand"


def admin_tool(command: str, *args) -> dict:
    r = subprocess.run(java_cmd("AdminTools", [command, *map(str, args)]), capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    res = _parse(r.returncode, r.stdout, r.stderr)
    assert res.ok, res.summary()
    return res.data


def requests_of(b, api: str) -> float:
    return scrape(b).samples.get(("sluice_requests_total", frozenset({("api", api)})), 0.0)


def test_java_admin_describes_topics_through_describe_topic_partitions(sluice_factory, java_cp):
    """Goal: `Admin.describeTopics` gets every topic and partition through
    DescribeTopicPartitions, paged by its cursor, and unknown topics fail as on Kafka.
    Method: topics dtp-a (5 partitions) and dtp-b (3); describe both plus a missing topic
    with a page of 2 partitions (so the client follows the cursor 4 times), then every topic
    (internal ones included). Each topic must have its id and all its partitions led by the
    one node, the missing one UnknownTopicOrPartitionException, and the broker must have
    answered DescribeTopicPartitions requests (not only Metadata). Before the API was served
    the client fell back to Metadata and the request counter stayed at 0."""
    b = sluice_factory(metrics=True)
    create_topic(b.bootstrap, "dtp-a", 5)
    create_topic(b.bootstrap, "dtp-b", 3)
    before = requests_of(b, "DescribeTopicPartitions")
    out = admin_tool("describe-topics", "--bootstrap", b.bootstrap,
                     "--topics", "dtp-a,dtp-b,dtp-missing", "--limit", 2)
    topics = out["topics"]
    assert topics["dtp-missing"] == {"error": "UnknownTopicOrPartitionException"}, topics
    for name, count in (("dtp-a", 5), ("dtp-b", 3)):
        t = topics[name]
        assert t["internal"] is False and len(t["id"]) == 22, t
        assert [p[0] for p in t["partitions"]] == list(range(count)), t
        assert all(p[1] == 1 and p[2] == [1] and p[3] == [1] for p in t["partitions"]), t
    # 8 partitions in pages of 2: at least 4 requests.
    assert requests_of(b, "DescribeTopicPartitions") >= before + 4
    every = admin_tool("describe-topics", "--bootstrap", b.bootstrap)["topics"]
    assert {"dtp-a", "dtp-b", "__consumer_offsets"} <= set(every), every
    assert every["__consumer_offsets"]["internal"] is True, every
    assert len(every["dtp-a"]["partitions"]) == 5


def test_java_admin_lists_config_resources(sluice_factory, java_cp):
    """Goal: `Admin.listConfigResources` lists every topic and the broker, by type, and a type
    Sluice has none of lists nothing.
    Method: topics lcr-a and lcr-b; list with no types (all of them), then TOPIC alone,
    then GROUP alone. Before the API was served the call failed with
    UnsupportedVersionException."""
    b = sluice_factory()
    create_topic(b.bootstrap, "lcr-a", 1)
    create_topic(b.bootstrap, "lcr-b", 2)
    every = {tuple(r) for r in admin_tool("list-config-resources", "--bootstrap", b.bootstrap)["resources"]}
    assert {("TOPIC", "lcr-a"), ("TOPIC", "lcr-b"), ("TOPIC", "__consumer_offsets"),
            ("BROKER", "1")} <= every, every
    topics = admin_tool("list-config-resources", "--bootstrap", b.bootstrap, "--types", "TOPIC")
    assert {r[0] for r in topics["resources"]} == {"TOPIC"}, topics
    groups = admin_tool("list-config-resources", "--bootstrap", b.bootstrap, "--types", "GROUP")
    assert groups["resources"] == [], groups


def log_dirs_tool(bootstrap: str, *args: str) -> dict:
    """Kafka's `kafka-log-dirs.sh --describe` (LogDirsCommand from kafka-tools): its JSON line."""
    r = subprocess.run(java_cmd(LOG_DIRS_COMMAND, ["--bootstrap-server", bootstrap, "--describe", *args]),
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    assert lines, r.stdout
    return json.loads(lines[-1])


def test_kafka_log_dirs_reports_real_partition_sizes(sluice_factory, java_cp, tmp_path):
    """Goal: `kafka-log-dirs.sh --describe` shows Sluice's data dir and each partition's real
    size: exactly the bytes of the record batches the partition serves.
    Method: 300 records to ld-a partition 0, none to partition 1; the tool's size for ld-a-0
    must equal the length of everything a raw Fetch v4 from offset 0 returns (whole batches,
    as stored), ld-a-1's must be 0, and the log dir must be the broker's data dir. Before
    DescribeLogDirs was served the tool failed with UnsupportedVersionException."""
    b = sluice_factory()
    create_topic(b.bootstrap, "ld-a", 2)
    ConfluentFamily(b.bootstrap).produce("ld-a", [Msg(b"v" * 100) for _ in range(300)], partition=0)
    out = log_dirs_tool(b.bootstrap, "--topic-list", "ld-a")
    (broker,) = out["brokers"]
    (log_dir,) = broker["logDirs"]
    assert log_dir["error"] is None, log_dir
    assert Path(log_dir["logDir"]).resolve() == Path(b.data_dir).resolve(), log_dir
    sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
    served = kwire.fetch_v4(b.bootstrap, "ld-a", 0, 0, max_bytes=64 << 20, partition_max_bytes=64 << 20)
    assert sum(x.record_count for x in served.batches()) == 300
    assert sizes == {"ld-a-0": len(served.records), "ld-a-1": 0}, sizes
