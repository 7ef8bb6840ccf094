"""A real Kafka Connect distributed worker (connect-runtime and connect-file 4.3.1 from Maven
Central, fetched by scripts/java-deps.sh) against a real `sluice serve` (issue 13).

A distributed worker keeps its connector configs, source offsets and statuses in three topics
it creates itself, and refuses to start unless they have `cleanup.policy=compact`. The test
runs a FileStreamSource (a file into a topic) and a FileStreamSink (the topic into another
file) through the worker's REST API on an ephemeral port, lets Sluice's cleaner compact the
internal topics (small segments through the broker defaults `log.roll.ms` and
`log.cleaner.min.cleanable.ratio`), restarts the worker and checks that it resumes from its
compacted offsets: every line arrives exactly once.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from confluent_kafka.admin import ConfigResource, ResourceType

from helpers import ck_admin, wait_until
from java_client import connect_classpath
from test_compaction import metric, raw_batches

CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
INTERNAL_TOPICS = ("connect-configs", "connect-offsets", "connect-status")
# Small segments rolled every second and a low dirty ratio, so the internal topics are cleaned
# within the test (Connect creates them with cleanup.policy=compact and nothing else).
BROKER_ARGS = ["--retention-check-interval-ms", "200",
               "--override", "log.cleaner.backoff.ms=200",
               "--override", "log.roll.ms=1000",
               "--override", "log.cleaner.min.cleanable.ratio=0.01"]
# The test clients' small-JVM flags, with INFO logging: the REST port and the herder's start
# are read from the log.
WORKER_JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m",
                    "-Dorg.slf4j.simpleLogger.defaultLogLevel=info"]
WORKER_START_S = 90
LINES_S = 40


class ConnectWorker:
    """One `ConnectDistributed` JVM; its REST port is read from its log (listeners on port 0)."""

    def __init__(self, workdir: Path, bootstrap: str):
        self.workdir = workdir
        self.props = workdir / "worker.properties"
        self.props.write_text("\n".join([
            f"bootstrap.servers={bootstrap}",
            "group.id=sluice-connect",
            "config.storage.topic=connect-configs",
            "offset.storage.topic=connect-offsets",
            "status.storage.topic=connect-status",
            "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "offset.storage.partitions=1",
            "status.storage.partitions=1",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            "offset.flush.interval.ms=300",
            "listeners=http://127.0.0.1:0",
            "rest.advertised.host.name=127.0.0.1",
            "plugin.discovery=service_load",
        ]) + "\n")
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.url = ""

    @property
    def log_path(self) -> Path:
        return self.workdir / f"connect-{self.starts}.log"

    def start(self) -> None:
        self.starts += 1
        cmd = ["java", *WORKER_JVM_FLAGS, "-cp", connect_classpath(), CONNECT_MAIN, str(self.props)]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        port = wait_until(self._rest_port, WORKER_START_S, interval=0.2, what="the REST server")
        self.url = f"http://127.0.0.1:{port}"
        wait_until(lambda: "Herder started" in self.log(), WORKER_START_S, interval=0.2,
                   what=f"the herder to start (log {self.log_path})")

    def _rest_port(self) -> int | None:
        assert self.proc.poll() is None, f"worker exited {self.proc.returncode}:\n{self.log()[-4000:]}"
        m = re.search(r"REST server listening at http://127\.0\.0\.1:(\d+)/", self.log())
        return int(m.group(1)) if m else None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): the worker commits its source offsets and leaves."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(f"worker ignored SIGTERM for 30 s:\n{self.log()[-3000:]}")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def rest(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def running(self, name: str) -> bool:
        try:
            s = self.rest("GET", f"/connectors/{name}/status")
        except OSError:
            return False
        return (s["connector"]["state"] == "RUNNING" and len(s["tasks"]) == 1
                and s["tasks"][0]["state"] == "RUNNING")


def append_lines(path: Path, first: int, count: int) -> list[str]:
    lines = [f"line-{i:05d}" for i in range(first, first + count)]
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))
    return lines


def sink_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def offsets_cleaned(bootstrap: str) -> bool:
    """Whether connect-offsets holds fewer records than the offsets it spans: the cleaner
    removed superseded versions of the source's offset key from that topic itself."""
    batches = raw_batches(bootstrap, "connect-offsets")
    if not batches:
        return False
    held = sum(bt.record_count for bt in batches)
    return held < batches[-1].last_offset + 1 - batches[0].base_offset


def test_connect_distributed_worker_file_source_and_sink(sluice_factory, tmp_path):
    """Goal: a distributed Connect worker starts against Sluice, creates compacted internal
    topics, moves a file through a topic into another file, and after a restart (with its
    internal topics cleaned meanwhile) neither duplicates nor loses a line.
    Method: 3 rounds of 200 lines, one second apart (so connect-offsets gets many versions of
    the source's one offset key across rolled segments); wait for the sink file; wait until
    connect-offsets itself holds fewer records than offsets (Fetch v4: superseded source
    offsets removed, gaps left); SIGTERM the worker, append 200 more lines, start it
    again; the sink file must hold every line exactly once, in order."""
    b = sluice_factory(BROKER_ARGS, metrics=True)
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    source.write_text("")
    worker = ConnectWorker(tmp_path, b.bootstrap)
    try:
        worker.start()
        admin = ck_admin(b.bootstrap)
        for t in INTERNAL_TOPICS:
            res = ConfigResource(ResourceType.TOPIC, t)
            policy = admin.describe_configs([res])[res].result(timeout=10)["cleanup.policy"].value
            assert policy == "compact", f"{t}: cleanup.policy={policy}"
        worker.rest("PUT", "/connectors/file-source/config", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(source), "topic": "connect-lines", "tasks.max": "1"})
        worker.rest("PUT", "/connectors/file-sink/config", {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(sink), "topics": "connect-lines", "tasks.max": "1"})
        wait_until(lambda: worker.running("file-source") and worker.running("file-sink"), 60,
                   interval=0.3, what="both connectors RUNNING")
        expected: list[str] = []
        for round_no in range(3):
            expected += append_lines(source, len(expected), 200)
            wait_until(lambda: len(sink_lines(sink)) >= len(expected), LINES_S, interval=0.2,
                       what=f"{len(expected)} lines in the sink file")
            time.sleep(1.1)  # past log.roll.ms: the next offset commit starts a new segment
        assert sink_lines(sink) == expected
        wait_until(lambda: offsets_cleaned(b.bootstrap), 30, interval=0.5,
                   what="the cleaner to remove superseded source offsets from connect-offsets")

        worker.stop()
        expected += append_lines(source, len(expected), 200)
        worker.start()
        wait_until(lambda: len(sink_lines(sink)) >= len(expected), LINES_S, interval=0.2,
                   what=f"{len(expected)} lines in the sink file after the restart")
        time.sleep(2)  # a duplicate would arrive within the offset flush interval
        got = sink_lines(sink)
        dups = sorted({line for line in got if got.count(line) > 1})
        assert not dups, f"{len(dups)} lines duplicated after the restart, e.g. {dups[:5]}"
        assert got == expected, f"{len(got)} lines, {len(expected)} expected"
        assert worker.running("file-source") and worker.running("file-sink")
        assert "ERROR" not in worker.log(), worker.log()[-3000:]
        print(f"cleaner: {metric(b, 'sluice_log_cleaner_passes'):.0f} passes, "
              f"{metric(b, 'sluice_log_cleaner_segments_cleaned'):.0f} segments cleaned, "
              f"{metric(b, 'sluice_log_cleaner_records_removed'):.0f} records removed")
    finally:
        worker.kill()
