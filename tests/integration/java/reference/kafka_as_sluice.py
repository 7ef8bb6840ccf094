#!/usr/bin/env python3
"""Dev-only stand-in for `sluice serve` that runs a real Apache Kafka node (KRaft, combined
broker and controller), so the integration tests can be checked against the reference
broker. A test that fails against sluice but passes here points at the broker, not the test:

    SLUICE_BIN=tests/integration/java/reference/kafka_as_sluice.py SLUICE_STARTUP_TIMEOUT_S=120 \\
        .venv/bin/python -m pytest tests/integration/test_java.py -o timeout=400

Understands --listen, --data-dir, --advertised-listener and --override KEY=VALUE (passed to
server.properties); other sluice flags are ignored. The first run fetches the broker jars
(pom.xml beside this file) into target/kafka-reference/. Kafka dies with this process
(PR_SET_PDEATHSIG), so SIGKILL from the test fixture leaves nothing behind.
"""

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIBS = HERE.parents[3] / "target" / "kafka-reference"
CLUSTER_ID = "c2x1aWNlLXJlZmVyZW5jZQ"
JVM = ["java", "-XX:+UseSerialGC", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch_libs() -> None:
    if (LIBS / ".done").exists():
        return
    subprocess.run(["mvn", "-B", "-q", "-f", str(HERE / "pom.xml"), "dependency:copy-dependencies",
                    "-DincludeScope=runtime", f"-DoutputDirectory={LIBS}"], check=True, stdout=sys.stderr)
    (LIBS / ".done").write_text("")


def main() -> int:
    argv = sys.argv[1:]
    if not argv or argv[0] != "serve":
        print("usage: kafka_as_sluice.py serve [--listen H:P] [--data-dir D] [--override K=V]...", file=sys.stderr)
        return 64
    opts, overrides = {}, []
    for flag, value in zip(argv[1::2], argv[2::2]):
        if flag == "--override":
            overrides.append(value)
        else:
            opts[flag] = value
    host, port = opts.get("--listen", "127.0.0.1:9092").rsplit(":", 1)
    port = int(port) or free_port()
    cport = free_port()
    data = Path(opts.get("--data-dir", "./data")).resolve()
    data.mkdir(parents=True, exist_ok=True)
    advertised = opts.get("--advertised-listener", f"{host}:{port}")
    props = data / "server.properties"
    props.write_text("\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{cport}",
        f"listeners=PLAINTEXT://{host}:{port},CONTROLLER://127.0.0.1:{cport}",
        f"advertised.listeners=PLAINTEXT://{advertised}",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=PLAINTEXT",
        f"log.dirs={data}/kafka",
        "offsets.topic.replication.factor=1",
        "offsets.topic.num.partitions=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        *overrides, ""]))
    fetch_libs()
    cp = f"{LIBS}/*"
    if not (data / "kafka" / "meta.properties").exists():
        subprocess.run([*JVM, "-cp", cp, "kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c", str(props)],
                       check=True, stdout=sys.stderr)
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    child = subprocess.Popen([*JVM, "-cp", cp, "kafka.Kafka", str(props)], stdout=sys.stderr,
                             preexec_fn=lambda: libc.prctl(pr_set_pdeathsig, signal.SIGKILL))
    stopping = []

    def forward(sig, _frame):
        stopping.append(sig)
        child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    deadline = time.monotonic() + 120
    while not stopping:
        try:
            socket.create_connection((host, port), 0.5).close()
            break
        except OSError:
            if child.poll() is not None or time.monotonic() > deadline:
                child.kill()
                return 1
            time.sleep(0.2)
    print(f"sluice listening on {host}:{port}", flush=True)
    child.wait()
    return 0 if stopping else 1


if __name__ == "__main__":
    sys.exit(main())
