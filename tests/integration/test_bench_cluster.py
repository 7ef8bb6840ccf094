"""`sluice-bench` against a real three-node Apache Kafka cluster (KRaft, combined nodes on
loopback, 512 MB heaps) started with `KAFKA_NODES=3 scripts/kafka-local.sh` (issue 16, first
slice): the bench's topics get the replication factor and topic configs it was given (or the
cluster's default), the report records the topology (brokers, racks, each partition's leader,
replicas and ISR at start and end), every broker process is sampled and summed, the A/B label
is short, and the bench deletes its consumer group with its topics.

Skipped with a reason when java or mvn is missing. The Kafka jars come from Maven Central
through the script's `fetch` (a local Maven repository that already holds them needs no
network). The cluster gets its own ports (free ones below the ephemeral range, found at start)
and its own data directory, and is stopped and deleted at the end of the module.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from conftest import sluice_bench_bin

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "kafka-local.sh"
# The version the issue was reported against; override to test another.
KAFKA_VERSION = os.environ.get("SLUICE_TEST_KAFKA_VERSION", "4.4.0")
NODES = 3
START_TIMEOUT_S = 240
RUN_TIMEOUT_S = 120


# Fixed ports (Kafka's KRaft nodes need their listener and controller ports up front, so they
# cannot bind port 0 and report it) come from below the kernel's ephemeral range (32768-60999
# by default): inside it, an outgoing connection of any program can take a port between the
# check here and Kafka binding it, which happened under load. 20000-28000 also stays clear of
# the other fixed-port scripts (kafka-local.sh 19092+, perf-compare.sh 19192, kgo-suite.sh
# 19392, stores.sh 15432, 18333+ and the gRPC ports 10000 above them).
PORT_RANGE = (20000, 28000)


def ephemeral_low() -> int:
    """The first port the kernel hands out for outgoing connections."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port_base(span: int) -> int:
    """A base port with `span` consecutive free loopback ports after it, all below the
    ephemeral range."""
    high = min(PORT_RANGE[1], ephemeral_low()) - span
    assert high > PORT_RANGE[0], f"the ephemeral range starts at {ephemeral_low()}"
    for _ in range(200):
        base = random.randrange(PORT_RANGE[0], high, 2)
        socks = []
        try:
            for p in range(base, base + span):
                s = socket.socket()
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no free port range")


class Cluster:
    def __init__(self, port: int):
        self.env = {**os.environ, "KAFKA_NODES": str(NODES), "KAFKA_VERSION": KAFKA_VERSION,
                    "KAFKA_PORT": str(port), "KAFKA_CONTROLLER_PORT": str(port + 1),
                    "KAFKA_START_TIMEOUT_S": str(START_TIMEOUT_S)}
        self.home = REPO_ROOT / ".cache" / f"kafka-{KAFKA_VERSION}"
        self.dir = self.home / f"cluster-{port}"
        self.bootstrap = ""
        self.pids: list[int] = []

    def script(self, cmd: str, timeout: float = START_TIMEOUT_S + 60) -> subprocess.CompletedProcess:
        return subprocess.run([str(SCRIPT), cmd], env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def data_dirs(self) -> list[str]:
        return [str(self.dir / f"node-{i}" / "data") for i in range(1, NODES + 1)]

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def wait_brokers(self, deadline_s: float = 90) -> None:
        """Every node has registered as a broker (a listening port is not yet a broker)."""
        end = time.monotonic() + deadline_s
        seen = 0
        while time.monotonic() < end:
            try:
                seen = len(self.admin().list_topics(timeout=5).brokers)
                if seen == NODES:
                    return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(1)
        raise AssertionError(f"{seen} of {NODES} brokers registered within {deadline_s}s\n"
                             f"{self.log_tail()}")

    def log_tail(self) -> str:
        out = []
        for i in range(1, NODES + 1):
            for name in ("stdout.log", "kafka.log"):
                p = self.dir / f"node-{i}" / name
                if p.exists():
                    out.append(f"--- node {i} {name}\n" + "\n".join(p.read_text().splitlines()[-15:]))
        return "\n".join(out)


@pytest.fixture(scope="module")
def cluster():
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed: the Kafka cluster cannot be started")
    c = Cluster(free_port_base(2 * NODES))
    try:
        r = c.script("start")
        assert r.returncode == 0, f"kafka-local.sh start failed:\n{r.stderr[-3000:]}\n{c.log_tail()}"
        c.bootstrap = r.stdout.strip().splitlines()[-1]
        assert len(c.bootstrap.split(",")) == NODES, r.stdout
        c.pids = [int(p) for p in c.script("pids", 30).stdout.split()]
        assert len(c.pids) == NODES
        c.wait_brokers()
        yield c
    finally:
        c.script("wipe", 120)


def run_bench(c: Cluster, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "r.json"
    cmd = [str(sluice_bench_bin()), "--quiet", "--bootstrap", c.bootstrap, "--json", str(out),
           # Light load: three JVMs share the machine's cores with the bench.
           "--rate", "2000", "--producers", "2", "--consumers", "2", "--partitions", "6",
           "--warmup", "1s", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads(out.read_text())


# The first test also waits for the module's cluster to start (the JVMs take a minute or
# more on a loaded machine), which counts against pytest-timeout's 120 s.
@pytest.mark.timeout(START_TIMEOUT_S + RUN_TIMEOUT_S)
def test_rf3_acks_all_topology_brokers_and_cleanup(cluster, tmp_path):
    pid_args = [a for p in cluster.pids for a in ("--broker-pid", str(p))]
    dir_args = [a for d in cluster.data_dirs() for a in ("--broker-data-dir", d)]
    proc, r = run_bench(cluster, tmp_path, "--replication-factor", "3",
                        "--topic-config", "min.insync.replicas=2", "--acks", "all",
                        "--duration", "5s", "--html", str(tmp_path / "r.html"),
                        *pid_args, *dir_args)
    s = r["scenario"]
    assert s["replication_factor"] == 3 and s["topic_config"] == {"min.insync.replicas": "2"}

    # Topology: three brokers with their racks; every partition on three replicas, all in sync
    # at the start and at the end; leaders on every broker.
    topo = r["topology"]
    assert topo["start_error"] is None and topo["end_error"] is None, topo
    for snap in (topo["start"], topo["end"]):
        assert [b["id"] for b in snap["brokers"]] == [1, 2, 3]
        assert [b["rack"] for b in snap["brokers"]] == ["rack-1", "rack-2", "rack-3"]
        parts = [p for p in snap["partitions"] if p["topic"] == r["topic"]]
        assert len(parts) == 6, snap["partitions"]
        for p in parts:
            assert sorted(p["replicas"]) == [1, 2, 3], p
            assert sorted(p["isr"]) == [1, 2, 3], p
            assert p["leader"] in (1, 2, 3) and p["error_code"] == 0, p
    leaders = {p["leader"] for p in topo["start"]["partitions"]}
    assert leaders == {1, 2, 3}, topo["start"]["partitions"]
    assert topo["changes"] == [], topo["changes"]
    assert "3 broker(s)" in proc.stdout and "replication.factor=3" in proc.stdout, proc.stdout

    # Resources: every broker sampled, each busy and resident, and the summary is their sum.
    t = r["target"]
    assert t["broker_pids"] == cluster.pids and t["label"] == cluster.bootstrap.split(",")[0] + "+2"
    bp = r["broker_process"]
    assert bp["pids"] == cluster.pids and len(bp["per_broker"]) == NODES
    for each in bp["per_broker"]:
        assert each["cpu_s"] > 0 and each["peak_rss_mib"] > 50 and each["data_dir_bytes"] > 0, each
    assert bp["cpu_s"] == pytest.approx(sum(e["cpu_s"] for e in bp["per_broker"]), rel=1e-6)
    assert bp["data_dir_bytes"] == sum(e["data_dir_bytes"] for e in bp["per_broker"])
    measured = [i for i in r["intervals"] if i["phase"] == "measure"]
    assert measured and all(len(i["brokers"]) == NODES for i in measured)
    assert all(i["broker_rss_mib"] == pytest.approx(sum(b["rss_mib"] for b in i["brokers"]))
               for i in measured)
    html = (tmp_path / "r.html").read_text()
    assert "<h2>Topology</h2>" in html and "rack-3" in html and f"broker pid {cluster.pids[2]}" in html

    # Delivery: acks=all with min.insync.replicas=2 on a healthy cluster loses nothing.
    a = r["audit"]
    assert a["produced"] > 0 and a["lost"] == 0 and a["duplicates"] == 0, a
    assert r["throughput"]["delivery_pct"] == 100.0

    # Cleanup: the topics and the bench's group are gone.
    assert r["topics_deleted"] is True and r["group_deleted"] is True
    groups = [g.group_id for g in cluster.admin().list_consumer_groups().result(timeout=30).valid]
    assert not [g for g in groups if g.startswith("sluice-bench-")], groups


def test_default_replication_factor_and_topic_config_reach_the_cluster(cluster, tmp_path):
    # No --replication-factor: CreateTopics asks for -1, and the cluster's default (3) applies.
    _, r = run_bench(cluster, tmp_path, "--topic-config", "min.insync.replicas=2",
                     "--topic-config", "retention.ms=600000", "--duration", "1s", "--keep-topic")
    admin = cluster.admin()
    try:
        assert r["scenario"]["replication_factor"] == -1
        parts = [p for p in r["topology"]["start"]["partitions"] if p["topic"] == r["topic"]]
        assert parts and all(len(p["replicas"]) == 3 for p in parts), parts
        res = ConfigResource(ConfigResource.Type.TOPIC, r["topic"])
        cfg = admin.describe_configs([res])[res].result(timeout=30)
        assert cfg["min.insync.replicas"].value == "2"
        assert cfg["retention.ms"].value == "600000"
        # --keep-topic keeps the group too (its offsets belong to the kept topic).
        assert r["topics_deleted"] is None and r["group_deleted"] is None
    finally:
        admin.delete_topics([r["topic"]])[r["topic"]].result(timeout=30)
        group = f"sluice-bench-{r['run_tag']}"
        try:
            admin.delete_consumer_groups([group])[group].result(timeout=30)
        except Exception:  # noqa: BLE001 - no offsets committed: no group
            pass


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_a_broker_killed_and_restarted_by_fault_commands_rejoins(cluster, tmp_path):
    # Goal: issue 16's kill-and-restart run at RF 3, min.insync.replicas=2, acks=all: node 2
    # is SIGKILLed 6 s in and started again (same data) 18 s in by a second fault command;
    # nothing acknowledged is lost, both faults are in the report, the topology shows node 2
    # leaving and coming back, and the stall of every partition at once after the kill is
    # not counted as each partition's unavailability (availability).
    victim = cluster.pids[1]
    restart = " ".join(f"{k}={cluster.env[k]}" for k in
                       ("KAFKA_NODES", "KAFKA_VERSION", "KAFKA_PORT", "KAFKA_CONTROLLER_PORT",
                        "KAFKA_START_TIMEOUT_S")) + f" {SCRIPT} start"
    proc, r = run_bench(cluster, tmp_path, "--replication-factor", "3",
                        "--topic-config", "min.insync.replicas=2", "--acks", "all",
                        # Idempotent producers: a produce retried to the new leader is not
                        # stored twice (duplicates would exit 4).
                        "--idempotence", "true", "--duration", "45s", "--fault-cmd", f"6s:kill -9 {victim}",
                        "--fault-cmd", f"18s:{restart}",
                        *[a for p in cluster.pids for a in ("--broker-pid", str(p))])
    assert proc.returncode == 0 and r["loss"] is None, r["audit"]
    assert r["audit"]["lost_acked"] == 0 and r["audit"]["lost"] == 0, r["audit"]
    assert r["audit"]["duplicates"] == 0 and r["duplicated"] is None, r["audit"]
    kill, start = r["faults"]
    assert kill["exit_code"] == 0 and start["exit_code"] == 0, (kill, start)
    assert start["started_at_s"] > kill["started_at_s"] + 5, (kill, start)
    # The outage and the recovery are in the report: acks stalled after the kill (acks=all
    # waits for node 2 until the controller fences it and the ISRs shrink), and the load came
    # back within the band against a steady pre-kill baseline.
    imp = kill["impact"]
    assert imp["baseline_intervals"] >= 4 and imp["baseline_note"] is None, imp
    assert imp["ack_stall_s"] >= 1.0 and imp["ack_stall_from_s"] >= kill["started_at_s"] - 0.2, imp
    assert imp["time_to_recover_s"] is not None and imp["time_to_recover_s"] >= 1.0, imp
    assert start["impact"]["baseline_acked_msg_s"] == imp["baseline_acked_msg_s"], start["impact"]
    assert "recovered after" in proc.stdout and "ack stall" in proc.stdout, proc.stdout
    during = r["topology"]["during"]
    # The controller drops node 2 from Metadata when it fences it, broker.session.timeout.ms
    # (9 s) after its last heartbeat, so ~15 s in; the restart comes after that (18 s): an
    # earlier one can register the node again before it was ever fenced (on a quiet machine
    # Kafka starts in ~5 s), and then no removal is there to see. The load goes on 27 s after
    # the restart: on a loaded machine (load average 10 on 2 cores) the JVM took over 19 s to
    # register again.
    # The JVM's start is slow on a loaded machine (35 s seen beside the rest of the suite):
    # when the restart command ended after the load, node 2's return is in the end snapshot,
    # taken after every fault command finished, instead of among the changes during the run.
    removed = [c["at_s"] for c in during if (c["what"], c["subject"]) == ("broker_removed", "2")]
    added = [c["at_s"] for c in during if (c["what"], c["subject"]) == ("broker_added", "2")]
    assert removed, during
    back_during_run = bool(added) and min(added) > min(removed)
    load_end_s = max(i["elapsed_s"] for i in r["intervals"])
    assert back_during_run or start["ended_at_s"] > load_end_s - 2, (during, start, load_end_s)
    assert 2 in [b["id"] for b in r["topology"]["end"]["brokers"]], r["topology"]["end"]
    led_by_victim = {p["partition"] for p in r["topology"]["start"]["partitions"] if p["leader"] == 2}
    assert led_by_victim, r["topology"]["start"]
    avail = r["availability"]
    assert avail["partitions"] == len(r["topology"]["start"]["partitions"]), avail
    per = {p["partition"]: p for p in avail["per_partition"]}
    print("unavailable s per partition (from s):",
          {k: (round(v["unavailable_s"], 1), round(v["first_at_s"], 1)) for k, v in sorted(per.items())},
          "led by node 2:", sorted(led_by_victim), "ack stall s:", round(imp["ack_stall_s"], 1))
    # The stall of every partition at once after the kill (acks=all waits for node 2 until
    # the controller fences it) is the fault's ack stall, not each partition's
    # unavailability: whichever partition acked first when the load resumed was never silent
    # while another acked, so at least one partition is not counted. Which others are is up
    # to the cluster, not only the partitions node 2 led: runs saw node 3's partitions go
    # 2.03 s without acks while node 1's acked when the restarted JVM took both cores, a
    # partition resume 2 s after the rest (counted from the kill: 8 s against a 6 s ack
    # stall), and a partition get its first ack 3 s after the load started.
    assert len(per) < avail["partitions"], (per, led_by_victim, imp)
    assert all(per[p]["unavailable_s"] > 0 for p in per), per
    # The bench itself reconnects to the restarted node: its client errors are grouped by kind.
    kinds = r["error_kinds"]
    assert len({k["kind"] for k in kinds}) == len(kinds), kinds
    # Node 2 runs under a new pid now: the tests after this one see the cluster as it is.
    cluster.pids = [int(p) for p in cluster.script("pids", 30).stdout.split()]
    assert len(cluster.pids) == NODES and cluster.pids[1] != victim, cluster.pids
    cluster.wait_brokers()


def test_a_broker_killed_by_a_fault_command_fails_over_and_recovers(cluster, tmp_path):
    # Last of the cluster tests: it leaves node 2 dead (the fixture wipes the cluster after).
    # The pids as they are now (the restart test above runs node 2 under a new one, and if it
    # failed half way its own refresh never ran).
    cluster.pids = [int(p) for p in cluster.script("pids", 30).stdout.split()]
    victim = cluster.pids[1]  # node 2: `pids` lists the nodes in order
    # 6 s in: after a steady baseline (at least 4 intervals once the first measured one, often
    # the warm-up's catch-up, is left out, even when a sampler tick comes late), and early
    # enough that the controller has fenced it (broker.session.timeout.ms, 9 s) and the load
    # has recovered before the load ends.
    proc, r = run_bench(cluster, tmp_path, "--replication-factor", "3",
                        "--topic-config", "min.insync.replicas=2", "--acks", "all",
                        "--idempotence", "true", "--duration", "25s", "--fault-cmd", f"6s:kill -9 {victim}",
                        "--html", str(tmp_path / "r.html"),
                        *[a for p in cluster.pids for a in ("--broker-pid", str(p))])
    # Exit 0: nothing acknowledged was lost and every record arrived.
    assert proc.returncode == 0 and r["loss"] is None, r["audit"]

    # The fault: run at 6 s of the measured window (1 s warmup), exit 0, marked on the charts.
    (fault,) = r["faults"]
    assert fault["command"] == f"kill -9 {victim}" and fault["exit_code"] == 0, fault
    assert 6.9 <= fault["started_at_s"] <= 7.6, fault
    html = (tmp_path / "r.html").read_text()
    assert 'class="fault"' in html and "<h2>Faults</h2>" in html

    # What users felt: acks stalled until the controller fenced node 2 and moved its
    # leaderships (and shrank every ISR, so acks=all could complete again), then the load came
    # back within the band before the end.
    imp = fault["impact"]
    assert imp["baseline_intervals"] >= 4 and imp["baseline_note"] is None, imp
    assert imp["ack_stall_s"] >= 1.0, imp
    assert imp["time_to_recover_s"] is not None and 2.0 <= imp["time_to_recover_s"] <= 19.0, imp
    assert "recovered after" in proc.stdout
    print(f"kill -9 node 2: ack stall {imp['ack_stall_s']:.1f} s, time to recover {imp['time_to_recover_s']:.1f} s, "
          f"baseline {imp['baseline_acked_msg_s']:.0f} msg/s p99 {imp['baseline_ack_p99_ms']} ms")

    # Leader moves and ISR shrinks seen while the run went on, with times after the kill.
    during = r["topology"]["during"]
    leader_moves = [c for c in during if c["what"] == "leader"]
    isr_shrinks = [c for c in during if c["what"] == "isr"]
    assert leader_moves and isr_shrinks, during
    assert all(fault["started_at_s"] < c["at_s"] <= r["intervals"][-1]["elapsed_s"] + 3 for c in during)
    assert all(c["before"] == "2" and c["after"] in ("1", "3") for c in leader_moves), leader_moves
    assert ("broker_removed", "2") in {(c["what"], c["subject"]) for c in during}, during
    assert "during the run:" in proc.stdout and "leader" in proc.stdout
    # The HTML report lists them too: one row per change (time, what, subject, before → after).
    assert "<table class=during>" in html, html[html.find("<h2>Topology</h2>"):][:3000]
    rows = html.split("<table class=during>")[1].split("</table>")[0].count("<tr><td>")
    assert rows == min(len(during), 96), (rows, len(during))
    removed = next(c for c in during if (c["what"], c["subject"]) == ("broker_removed", "2"))
    shown = re.findall(r"<tr><td>([\d.]+)</td><td>broker_removed</td><td><code>2</code></td>", html)
    assert shown and abs(float(shown[0]) - removed["at_s"]) <= 0.06, (shown, removed)

    # The end snapshot agrees: node 2 left every ISR, its partitions are led by survivors.
    topo = r["topology"]
    start = {p["partition"]: p for p in topo["start"]["partitions"]}
    end = {p["partition"]: p for p in topo["end"]["partitions"]}
    assert all(sorted(p["isr"]) == [1, 2, 3] for p in start.values()), start
    assert any(p["leader"] == 2 for p in start.values()), start
    assert [b["id"] for b in topo["end"]["brokers"]] == [1, 3]
    for p in end.values():
        assert 2 not in p["isr"] and p["leader"] in (1, 3), p

    # The dead broker process is reported as gone, not with stale figures; the others not.
    per = {b["pid"]: b for b in r["broker_process"]["per_broker"]}
    assert per[victim]["gone_at_s"] is not None and abs(per[victim]["gone_at_s"] - fault["started_at_s"]) < 2
    assert all(per[p]["gone_at_s"] is None for p in cluster.pids if p != victim)

    # The error list is grouped by kind: reconnect noise to node 2 from every client is one
    # entry per kind with a count, not one line per message.
    kinds = r["error_kinds"]
    assert len({k["kind"] for k in kinds}) == len(kinds) and len(kinds) < 32, kinds
    refused = [k for k in kinds if "Connection refused" in k["kind"]]
    assert refused and max(k["count"] for k in refused) > 1, kinds
    assert all(k["first_at_s"] >= fault["started_at_s"] - 0.5 for k in refused), refused
    # RF 3 with min.insync.replicas=2 and acks=all: nothing acknowledged is lost; idempotent
    # producers: nothing is delivered twice.
    assert r["audit"]["lost_acked"] == 0 and r["audit"]["lost"] == 0, r["audit"]
    assert r["audit"]["duplicates"] == 0 and r["duplicated"] is None, r["audit"]


# Waits for the module's cluster when run alone (-k), like the first test.
@pytest.mark.timeout(START_TIMEOUT_S + RUN_TIMEOUT_S)
def test_ab_against_kafka_compresses_alike_on_both_targets(cluster, tmp_path):
    # Issue 33: with snappy, librdkafka 2.10 compressed its batches against Kafka (2.18x on the
    # wire) and sent them uncompressed to Sluice (0.99x), so the A/B compared unlike client
    # work. The bench's librdkafka 2.12 compresses against both, and the set says nothing; it
    # warns when the two wire ratios are more than 10 % apart. One partition and a 20 ms linger
    # give batches of about 40 messages, so the ratio is the codec's.
    out = tmp_path / "ab.json"
    cmd = [str(sluice_bench_bin()), "--quiet", "--no-settle", "--json", str(out),
           "--target", "embedded", "--target", cluster.bootstrap, "--compression", "snappy",
           "--payload", "mixed", "--rate", "2000", "--producers", "1", "--consumers", "1",
           "--partitions", "1", "--linger-ms", "20", "--duration", "2s", "--warmup", "1s"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    doc = json.loads(out.read_text())
    ratios = {}
    for r in doc["runs"]:
        ratios.setdefault(r["target"]["spec"], []).append(r["latency_split"]["wire_compression_ratio"])
    assert set(ratios) == {"embedded", cluster.bootstrap}, ratios
    every = [x for v in ratios.values() for x in v]
    assert min(every) > 1.5 and max(every) <= 1.1 * min(every), ratios
    assert not [w for w in doc["warnings"] if "compression" in w], doc["warnings"]


def sluice_bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "s.json"
    cmd = [str(sluice_bench_bin()), "--quiet", "--json", str(out), "--rate", "2000",
           "--producers", "2", "--consumers", "2", "--partitions", "4", "--warmup", "1s",
           "--duration", "2s", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tmp_path)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc, json.loads(out.read_text())


def test_the_bench_group_is_deleted_with_its_topics_on_sluice(broker, tmp_path):
    # Kafka drops an empty group whose topics are deleted; Sluice keeps it, so this is where a
    # run used to leave `sluice-bench-*` groups behind.
    _, r = sluice_bench(tmp_path, "--bootstrap", broker.bootstrap)
    assert r["audit"]["received"] > 0 and r["topics_deleted"] is True and r["group_deleted"] is True
    assert r["target"]["label"] == broker.bootstrap
    # One node: the topology has one broker leading every partition, replication factor 1
    # (the broker's default, asked for with -1).
    start = r["topology"]["start"]
    assert len(start["brokers"]) == 1 and start["brokers"][0]["port"] == int(broker.bootstrap.split(":")[1])
    assert len(start["partitions"]) == 4 and all(p["replicas"] == [start["brokers"][0]["id"]]
                                                 for p in start["partitions"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    groups = [g.group_id for g in admin.list_consumer_groups().result(timeout=30).valid]
    assert not [g for g in groups if g.startswith("sluice-bench-")], groups


def test_embedded_port_is_pinned(tmp_path):
    port = free_port_base(1)
    _, r = sluice_bench(tmp_path, "--embedded-port", str(port))
    assert r["target"]["bootstrap"] == f"127.0.0.1:{port}"
    assert r["audit"]["lost"] == 0 and len(r["target"]["broker_pids"]) == 1
    # The embedded broker's topics go with it: nothing is deleted, nothing reported as failed.
    assert r["topics_deleted"] is None
