#!/usr/bin/env python3
"""Disk use under mixed retention, and what the journal cleaner costs (issue 32's goals).

Run through `scripts/disk-use.sh`, which builds Sluice and fetches the Java tools.

Part `space` (the re-attack at full scale): one broker at a time, default settings except
`log.retention.check.interval.ms=2000`, `--mb` MiB of 1 KiB records to a topic with
`retention.ms=5000`, in three setups: the topic alone (control); with one consumer group
committing its offset every 50 ms; with a week-retained topic receiving one record per 200.
Each setup runs with the journal cleaner on and off. Reported: the data dir's journal and
cleaned file bytes once retention has settled, and the ratio to the control.

Part `long`: one broker, the cleaner on, `--long-s` seconds of steady load at `--rate` MiB/s
over 16 MiB journal files: 84 % to a topic kept 60 s, 16 % to one kept 5 min, a week-retained
trickle of one record per 200 and a group committing every 50 ms (hours of retention in small
settings: many journal files, each outliving its short data; 16 MiB segments). Sampled every
2 s: data file bytes against retained bytes; reported: the largest and the mean of
data files / (retained + the 4 recycled files' worth), once the 5 min topic is full.

Part `cost`: two brokers side by side, the cleaner on (A) and off (B), each with the
committing group and the week trickle running in the background; rounds of Kafka's
ProducerPerformance (12 partitions, 1 KiB records, acks=all, client defaults) alternate
between them (A first in even rounds). Each round's topic is deleted after it, so the next
round's load meets files the cleaner (on A) must free. Reported: medians of throughput and
broker CPU ms per MB, A / B.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import perf_compare as pc  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024
WEEK_MS = 7 * 86_400_000


class Sluice:
    """A `sluice serve` process with its own data dir and admin listener."""

    def __init__(self, name: str, workdir: Path, port: int, overrides: dict):
        self.name, self.port = name, port
        self.data = workdir / f"{name}-data"
        shutil.rmtree(self.data, ignore_errors=True)
        args = [str(ROOT / "target/release/sluice"), "serve", "--listen", f"127.0.0.1:{port}",
                "--data-dir", str(self.data), "--metrics-listen", f"127.0.0.1:{port + 1}",
                "--override", "group.initial.rebalance.delay.ms=0"]
        for k, v in overrides.items():
            args += ["--override", f"{k}={v}"]
        self.out = open(workdir / f"{name}.out", "w")
        self.proc = subprocess.Popen(args, stdout=self.out, stderr=subprocess.STDOUT)
        self.bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=1)
                return
            except Exception:
                time.sleep(0.2)
        raise RuntimeError(f"{name} did not start")

    def as_broker(self) -> pc.Broker:
        return pc.Broker(self.name, self.bootstrap, self.proc.pid)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port + 1}/metrics", timeout=10) as r:
            return r.read().decode()

    def gauge(self, name: str) -> float:
        m = re.search(rf"^{re.escape(name)} (\S+)$", self.metrics(), re.M)
        return float(m.group(1)) if m else float("nan")

    def data_file_bytes(self) -> int:
        j = self.data / "journal"
        return sum(p.stat().st_size for p in j.iterdir() if p.suffix in (".wal", ".cleaned"))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.out.close()
        shutil.rmtree(self.data, ignore_errors=True)


def create(bootstrap: str, topic: str, partitions: int, config: dict) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fs = admin.create_topics([NewTopic(topic, partitions, 1, config={k: str(v) for k, v in config.items()})])
    for f in fs.values():
        f.result(30)


class Background:
    """A consumer group committing every 50 ms and a week-retained trickle (one record per
    `every` of the foreground's, or `trickle_per_s` a second), until stopped."""

    def __init__(self, bootstrap: str, group: bool, trickle_per_s: float, follow: str):
        self.stop_ev, self.threads, self.commits, self.trickled = threading.Event(), [], 0, 0
        if trickle_per_s:
            create(bootstrap, "week", 1, {"retention.ms": WEEK_MS})
            self.threads.append(threading.Thread(target=self._trickle, args=(bootstrap, trickle_per_s), daemon=True))
        if group:
            self.threads.append(threading.Thread(target=self._commit, args=(bootstrap, follow), daemon=True))
        for t in self.threads:
            t.start()

    def _trickle(self, bootstrap: str, per_s: float) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        while not self.stop_ev.is_set():
            p.produce("week", value=b"t" * 200)
            self.trickled += 1
            p.poll(0)
            time.sleep(1 / per_s)
        p.flush(30)

    def _commit(self, bootstrap: str, topic: str) -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "committer", "enable.auto.commit": False})
        offset = 0
        while not self.stop_ev.is_set():
            c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            offset += 1
            self.commits += 1
            time.sleep(0.05)
        c.close()

    def stop(self) -> None:
        self.stop_ev.set()
        for t in self.threads:
            t.join(30)


def produce(bootstrap: str, topic: str, mb: int, trickle_every: int = 0) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 262144})
    value = b"x" * 1024
    for i in range(mb * 1024):
        p.produce(topic, value=value, partition=i % 4)
        if trickle_every and i % trickle_every == 0:
            p.produce("week", value=b"t" * 200)
        if i % 20_000 == 0:
            p.poll(0)
        while len(p) > 100_000:
            p.poll(0.01)
    assert p.flush(120) == 0


def settled_bytes(b: Sluice, file_bytes: int, retention_ms: int, timeout_s: float = 180) -> int:
    """The data files' bytes once retention and the cleaner are done: first the retention
    window, a retention check, a checkpoint (5 s) and a cleaner pass (5 s) go by, then the
    size must hold for 15 s."""
    time.sleep(retention_ms / 1000 + 12)
    sizes, deadline = [], time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sizes.append(b.data_file_bytes())
        if len(sizes) >= 15 and max(sizes[-15:]) - min(sizes[-15:]) < file_bytes // 2:
            break
        time.sleep(1)
    return sizes[-1]


def part_space(a) -> list[dict]:
    rows = []
    for setup in ("control", "group", "trickle"):
        for cleaner in (True, False):
            if setup == "control" and not cleaner:
                continue
            b = Sluice(f"space-{setup}-{cleaner}", a.workdir, a.port, {
                "log.retention.check.interval.ms": 2000,
                "sluice.journal.cleaner.enable": str(cleaner).lower()})
            try:
                create(b.bootstrap, "load", 4, {"retention.ms": 5000})
                bg = Background(b.bootstrap, group=setup == "group", trickle_per_s=0, follow="load")
                if setup == "trickle":
                    create(b.bootstrap, "week", 1, {"retention.ms": WEEK_MS})
                produce(b.bootstrap, "load", a.mb, trickle_every=200 if setup == "trickle" else 0)
                bg.stop()
                size = settled_bytes(b, 128 * MIB, 5000)
                rows.append({"setup": setup, "cleaner": cleaner, "data_file_mib": size / MIB,
                             "retained_mib": b.gauge("sluice_log_retained_bytes") / MIB,
                             "moved_mib": b.gauge("sluice_log_journal_cleaner_moved_bytes_total") / MIB})
                print(f"space: {rows[-1]}", flush=True)
            finally:
                b.stop()
    control = next(r["data_file_mib"] for r in rows if r["setup"] == "control")
    for r in rows:
        r["vs_control"] = r["data_file_mib"] / control if control else float("nan")
    return rows


def part_long(a) -> dict:
    file_bytes = 16 * MIB
    b = Sluice("long", a.workdir, a.port, {"log.retention.check.interval.ms": 2000,
                                            "sluice.journal.file.bytes": file_bytes})
    samples = []
    try:
        # Segments of 16 MiB: retention deletes whole segments, so with Kafka's 1 GiB a
        # partition would keep up to a GiB past its retention, whatever the journal does.
        create(b.bootstrap, "short", 4, {"retention.ms": 60_000, "segment.bytes": 16 * MIB})
        create(b.bootstrap, "medium", 2, {"retention.ms": 300_000, "segment.bytes": 16 * MIB})
        bg = Background(b.bootstrap, group=True, trickle_per_s=a.rate * 1024 / 200, follow="short")
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5})
        value, t0, sent = b"x" * 1024, time.monotonic(), 0
        next_sample = t0 + 2
        while time.monotonic() - t0 < a.long_s:
            target = int((time.monotonic() - t0) * a.rate * 1024)
            while sent < target:
                p.produce("medium" if sent % 100 < 16 else "short", value=value)
                sent += 1
                if sent % 10_000 == 0:
                    p.poll(0)
            p.poll(0.01)
            if time.monotonic() >= next_sample:
                next_sample += 2
                data, retained = b.data_file_bytes(), b.gauge("sluice_log_retained_bytes")
                samples.append((time.monotonic() - t0, data, retained))
        p.flush(60)
        bg.stop()
    finally:
        b.stop()
    recycled = 4 * file_bytes
    ratios = [d / (r + recycled) for t, d, r in samples if t > 330 and r > 0]
    out = {"seconds": a.long_s, "rate_mib_s": a.rate, "samples": len(ratios),
           "max_ratio": max(ratios) if ratios else float("nan"),
           "mean_ratio": statistics.mean(ratios) if ratios else float("nan"),
           "max_data_mib": max(d for _, d, _ in samples) / MIB,
           "max_retained_mib": max(r for _, _, r in samples) / MIB}
    print(f"long: {out}", flush=True)
    return out


def thread_cpu_s(pid: int, prefix: str) -> float:
    """CPU seconds (user + system) of the process's threads whose name starts with `prefix`."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if not (task / "comm").read_text().startswith(prefix):
                continue
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / pc.CLK_TCK


def part_cost(a) -> dict:
    on = Sluice("cost-on", a.workdir, a.port, {"log.retention.check.interval.ms": 2000})
    off = Sluice("cost-off", a.workdir, a.port + 10, {"log.retention.check.interval.ms": 2000,
                                                      "sluice.journal.cleaner.enable": "false"})
    runs = []
    try:
        bgs = []
        for b in (on, off):
            create(b.bootstrap, "follow", 1, {})
            bgs.append(Background(b.bootstrap, group=True, trickle_per_s=200, follow="follow"))
        for rnd in range(a.rounds):
            order = (on, off) if rnd % 2 == 0 else (off, on)
            for b in order:
                run = pc.run_produce(a.classpath, b.as_broker(), "produce-defaults", rnd, a.mb, 1024, {})
                runs.append({"broker": b.name, "round": rnd, "mb_per_s": run.mb_per_s,
                             "cpu_ms_per_mb": run.cpu_ms_per_mb})
                print(f"cost: {runs[-1]}", flush=True)
        moved = on.gauge("sluice_log_journal_cleaner_moved_bytes_total")
        cleaner_cpu_s = thread_cpu_s(on.proc.pid, "sluice-journal")
        pinned_off = off.gauge("sluice_log_pinned_file_bytes")
        for bg in bgs:
            bg.stop()
    finally:
        on.stop()
        off.stop()

    def med(name, key):
        return statistics.median(r[key] for r in runs if r["broker"] == name)

    produced_mb = sum(a.mb for r in runs if r["broker"] == "cost-on")
    out = {"rounds": a.rounds, "mb": a.mb,
           "cleaner_thread_cpu_ms_per_mb": 1000 * cleaner_cpu_s / produced_mb,
           "throughput_on_vs_off": med("cost-on", "mb_per_s") / med("cost-off", "mb_per_s"),
           "cpu_per_mb_on_vs_off": med("cost-on", "cpu_ms_per_mb") / med("cost-off", "cpu_ms_per_mb"),
           "moved_mib_on": moved / MIB, "pinned_mib_off": pinned_off / MIB, "runs": runs}
    print(f"cost: throughput on/off {out['throughput_on_vs_off']:.3f}, CPU per MB on/off "
          f"{out['cpu_per_mb_on_vs_off']:.3f}, moved {out['moved_mib_on']:.1f} MiB, "
          f"off keeps {out['pinned_mib_off']:.0f} MiB pinned; the cleaner thread used "
          f"{out['cleaner_thread_cpu_ms_per_mb']:.4f} ms CPU per MB produced", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="space,long,cost")
    ap.add_argument("--mb", type=int, default=1400, help="MiB per space run and per cost round")
    ap.add_argument("--long-s", type=int, default=900)
    ap.add_argument("--rate", type=float, default=10.0, help="MiB/s of the long run")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--classpath", default=str(ROOT / "target/java-deps/*"))
    ap.add_argument("--workdir", type=Path, default=ROOT / "target/disk-use")
    ap.add_argument("--port", type=int, default=19300)
    ap.add_argument("--json")
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    result = {}
    parts = a.parts.split(",")
    if "space" in parts:
        result["space"] = part_space(a)
    if "long" in parts:
        result["long"] = part_long(a)
    if "cost" in parts:
        result["cost"] = part_cost(a)
    if "space" in result:
        print("\nsetup     cleaner  data files MiB  vs control  retained MiB  moved MiB")
        for r in result["space"]:
            print(f"{r['setup']:<9} {'on' if r['cleaner'] else 'off':<8} {r['data_file_mib']:>14.0f} "
                  f"{r['vs_control']:>11.2f} {r['retained_mib']:>13.1f} {r['moved_mib']:>10.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
