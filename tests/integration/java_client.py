"""The Java client family: Apache Kafka's own Java client (kafka-clients 4.x) and the
kafka-consumer-groups tool (kafka-tools), run as separate JVM processes.

scripts/java-deps.sh fetches the jars from Maven Central into target/java-deps/ and compiles
tests/integration/java/src (SluiceClient: produce, consume-group, admin-describe) into
target/java-classes/; it is cached, so calling it once per session costs nothing after the
first time. Every SluiceClient command prints one JSON result line last on stdout
(consume-group prints rebalance events before it, as JSON lines with an "event" key).
"""

from __future__ import annotations

import json
from collections import Counter
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
JAVA_DEPS = REPO_ROOT / "scripts" / "java-deps.sh"
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
# Small, quick-starting JVMs: these are short-lived test clients, and cores are shared.
JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m",
             "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
             "-Dorg.slf4j.simpleLogger.showDateTime=true",
             "-Dlog4j2.level=warn"]

_classpath: str | None = None


def classpath() -> str:
    """Builds (or finds cached) the Java pieces and returns the classpath."""
    global _classpath
    if _classpath is None:
        r = subprocess.run([str(JAVA_DEPS)], capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            raise AssertionError(f"{JAVA_DEPS} failed (exit {r.returncode}):\n{r.stderr[-4000:]}")
        _classpath = r.stdout.strip().splitlines()[-1]
    return _classpath


def connect_classpath() -> str:
    """The Kafka Connect worker's classpath (connect-runtime and connect-file, one release of
    their own: see tests/integration/java/connect/pom.xml), fetched by java-deps.sh."""
    classpath()
    return str(REPO_ROOT / "target" / "java-deps-connect" / "*")


@pytest.fixture(scope="session")
def java_cp() -> str:
    return classpath()


def java_cmd(main_class: str, args: list[str]) -> list[str]:
    return ["java", *JVM_FLAGS, "-cp", classpath(), main_class, *map(str, args)]


@dataclass
class JavaResult:
    """A finished SluiceClient process: its result line (`data`) and rebalance events."""
    rc: int
    data: dict
    events: list[dict] = field(default_factory=list)
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and self.data.get("ok") is True

    def __getitem__(self, key):
        return self.data[key]

    def summary(self) -> str:
        """For assertion messages: everything but the bulky lists, plus the stderr tail."""
        small = {k: v for k, v in self.data.items() if k not in ("records", "results")}
        tail = "\n".join(self.stderr.splitlines()[-25:])
        return f"exit {self.rc}: {json.dumps(small)[:3000]}\n--- java stderr tail ---\n{tail}"


def _parse(rc: int, stdout: str, stderr: str) -> JavaResult:
    events, data = [], None
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if "event" in obj:
            events.append(obj)
        else:
            data = obj
    if data is None:
        data = {"ok": False, "error": f"no result line on stdout: {stdout[-2000:]!r}"}
    return JavaResult(rc, data, events, stderr)


def run(command: str, *args, timeout: float = 120) -> JavaResult:
    """Runs one SluiceClient command to completion."""
    r = subprocess.run(java_cmd("SluiceClient", [command, *args]), capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return _parse(r.returncode, r.stdout, r.stderr)


def sasl_ssl_produce(bootstrap: str, topic: str, mechanism: str, user: str, password: str,
                     ca_pem, count: int, *extra: str, timeout: float = 240) -> JavaResult:
    """Produces `count` records to partition 0 of `topic` over SASL_SSL as `user` with
    `mechanism` (PLAIN or SCRAM-SHA-*), trusting the PEM CA `ca_pem`; `extra` adds options."""
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    jaas = f'{module} required username="{user}" password="{password}";'
    return run("produce", "--bootstrap", bootstrap, "--topic", topic, "--count", str(count),
               "--partition", "0", "--conf", "security.protocol=SASL_SSL",
               "--conf", f"sasl.mechanism={mechanism}", "--conf", f"sasl.jaas.config={jaas}",
               "--conf", "ssl.truststore.type=PEM", "--conf", f"ssl.truststore.location={ca_pem}",
               *extra, timeout=timeout)


class JavaProc:
    """A long-running SluiceClient command (consume-group --stop-on-stdin): its event lines
    are collected as they arrive, and stop() asks it to finish through stdin."""

    def __init__(self, command: str, *args, main_class: str = "SluiceClient"):
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(java_cmd(main_class, [command, *args]), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._stderr, text=True)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            with self._lock:
                self.lines.append(line)

    def events(self) -> list[dict]:
        with self._lock:
            lines = list(self.lines)
        return [json.loads(ln) for ln in lines if ln.startswith('{"event"')]

    def assignment(self) -> set[int] | None:
        """The partitions this consumer holds after its latest rebalance event."""
        ev = self.events()
        return set(ev[-1]["assignment"]) if ev else None

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def stop(self, timeout: float = 60) -> JavaResult:
        if not self.exited():
            try:
                self.proc.stdin.write("stop\n")
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass
        return self.wait(timeout)

    def wait(self, timeout: float = 60) -> JavaResult:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait(timeout=10)
        self._reader.join(timeout=10)
        self._stderr.seek(0)
        stderr = self._stderr.read().decode(errors="replace")
        self._stderr.close()
        with self._lock:
            stdout = "".join(self.lines)
        return _parse(rc, stdout, stderr)

    def kill(self) -> None:
        if not self.exited():
            self.proc.kill()
            self.proc.wait(timeout=10)


def consumer_groups_tool(*args, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs kafka-consumer-groups (ConsumerGroupCommand) with the given arguments."""
    return subprocess.run(java_cmd(CONSUMER_GROUP_COMMAND, list(args)), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def parse_table(text: str, first_column: str = "GROUP") -> list[dict[str, str]]:
    """Rows of the whitespace-aligned table(s) kafka-consumer-groups prints: each line after a
    header line (one starting with `first_column`) becomes a dict keyed by the header's
    column names."""
    rows, header = [], None
    for line in text.splitlines():
        cols = line.split()
        if not cols:
            continue
        if cols[0] == first_column:
            header = cols
            continue
        if header is not None and len(cols) == len(header):
            rows.append(dict(zip(header, cols)))
    return rows


def wait_for_split(procs: list[JavaProc], partitions: int, timeout: float) -> dict[int, set[int]]:
    """Waits until the consumers' own latest rebalance events show disjoint assignments that
    cover all `partitions` partitions, balanced (sizes differ by at most one, so a consumer
    still handing partitions over does not count). Fails at once if one of them exits (e.g.
    because the broker refused its group protocol)."""
    deadline = time.monotonic() + timeout
    while True:
        for i, p in enumerate(procs):
            if p.exited():
                r = p.wait(5)
                raise AssertionError(f"consumer {i} exited before the group settled: {r.summary()}")
        views = {i: p.assignment() for i, p in enumerate(procs)}
        if all(v for v in views.values()):
            union = set().union(*views.values())
            sizes = [len(v) for v in views.values()]
            if union == set(range(partitions)) and sum(sizes) == partitions and max(sizes) - min(sizes) <= 1:
                return views
        if time.monotonic() >= deadline:
            raise AssertionError(f"consumers did not split {partitions} partitions within {timeout}s: {views}")
        time.sleep(0.2)


# ---------------------------------------------------------------------------
# A consumer-group scenario shared by the classic and KIP-848 tests
# ---------------------------------------------------------------------------
# Fast rebalances for tests: no initial delay (the same overrides test_groups.py uses).
GROUP_ARGS = ["--override", "group.initial.rebalance.delay.ms=0",
              "--override", "group.min.session.timeout.ms=1000"]


def seq_values(start: int, n: int) -> list[str]:
    return [f"seq-{i:06d}" for i in range(start, start + n)]


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offsets as another client (librdkafka, OffsetFetch) sees them;
    -1001 where nothing is committed."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def start_group_members(bootstrap: str, topic: str, group: str, protocol: str, names: list[str]) -> list[JavaProc]:
    return [JavaProc("consume-group", "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                     "--protocol", protocol, "--client-id", name, "--stop-on-stdin", "--timeout-ms", "150000")
            for name in names]


def java_produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> dict[str, tuple[int, int]]:
    """Produces seq-START.. spread round-robin over `partitions` with the Java producer's
    defaults; returns value -> (partition, offset) as acknowledged."""
    r = run("produce", "--bootstrap", bootstrap, "--topic", topic, "--start", start, "--count", count,
            "--partitions", partitions)
    assert r.ok, r.summary()
    assert r["enable_idempotence"] is True and r["acks"] in ("-1", "all"), r.summary()
    values = seq_values(start, count)
    assert all(res is not None for res in r["results"]), r.summary()
    acked = {v: (res[0], res[1]) for v, res in zip(values, r["results"])}
    assert all(acked[v][0] == (start + i) % partitions for i, v in enumerate(values))
    return acked


def split_and_consume_once(bootstrap: str, topic: str, group: str, protocol: str, partitions: int,
                           per_partition: int) -> tuple[list[JavaResult], dict[int, set[int]]]:
    """Two Java consumers (group.protocol=`protocol`) join `group` and split the topic; then
    partitions * per_partition records are produced, and the consumers, committing with
    commitSync after every poll, must together receive every record exactly once, each
    from the partitions it was assigned, and the group's committed offsets must reach the
    end of every partition."""
    from helpers import wait_until
    procs = start_group_members(bootstrap, topic, group, protocol, ["java-a", "java-b"])
    try:
        views = wait_for_split(procs, partitions, 60)
        total = partitions * per_partition
        acked = java_produce(bootstrap, topic, 0, total, partitions)
        want = {p: per_partition for p in range(partitions)}
        wait_until(lambda: committed_offsets(bootstrap, group, topic, partitions) == want, 60,
                   what=f"the group committing {per_partition} on every partition")
        results = [p.stop() for p in procs]
    finally:
        for p in procs:
            p.kill()
    for r in results:
        assert r.ok, r.summary()
        assert r["group_protocol"] == protocol
        assert r["commit_failures"] == [] and r["commits"] >= 1, r.summary()
        assert r["committed"] == {str(p): per_partition for p in range(partitions)}, r.summary()
    consumed = [(n, p, o, v) for n, r in enumerate(results) for p, o, v in r["records"]]
    dups = {pos for pos, k in Counter((p, o) for _, p, o, _ in consumed).items() if k > 1}
    assert not dups, f"{len(dups)} records delivered more than once, e.g. {sorted(dups)[:5]}"
    assert sorted(v for *_, v in consumed) == seq_values(0, total), (
        f"{len(consumed)} records consumed, {total} produced")
    wrong = [(v, (p, o), acked[v]) for _, p, o, v in consumed if acked[v] != (p, o)]
    assert not wrong, f"records read back at other positions than acknowledged: {wrong[:5]}"
    for n, r in enumerate(results):
        got = {p for p, _, _ in r["records"]}
        assert got == views[n], f"consumer {n} held {sorted(views[n])} but read from {sorted(got)}"
    return results, views
